//! The `vapcheck_webhook_*` families: each admission webhook's state, endpoints, caBundle
//! expiry and offline findings (docs/webhooks.md).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Metrics;

/// The labels of the per-webhook series: the configuration's kind and name and the webhook's
/// name (unique in its configuration: kube-apiserver refuses duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, EncodeLabelSet)]
pub struct WebhookLabels {
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
    pub kind: &'static str,
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name.
    pub webhook: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WebhookStateLabels {
    kind: &'static str,
    configuration: String,
    webhook: String,
    failure_policy: String,
    state: &'static str,
}

impl WebhookStateLabels {
    fn of(w: &WebhookLabels, failure_policy: &str, state: &'static str) -> Self {
        WebhookStateLabels {
            kind: w.kind,
            configuration: w.configuration.clone(),
            webhook: w.webhook.clone(),
            failure_policy: failure_policy.to_owned(),
            state,
        }
    }
}

/// One webhook's values for [`Metrics::set_webhook`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookValues {
    /// `Fail` or `Ignore` (the defaulted `failurePolicy`).
    pub failure_policy: String,
    /// The `state` label whose series is 1 (`crate::webhooks::availability::State`).
    pub state: crate::webhooks::availability::State,
    /// Ready endpoints of the webhook's Service port (`None`: no such series).
    pub ready_endpoints: Option<u64>,
    /// The caBundle's last `notAfter`, Unix seconds (`None`: no such series).
    pub ca_not_after: Option<i64>,
    /// The offline findings.
    pub findings: usize,
}

/// The per-webhook families.
#[derive(Debug, Clone)]
pub(super) struct WebhookMetrics {
    state: Family<WebhookStateLabels, Gauge>,
    ready_endpoints: Family<WebhookLabels, Gauge>,
    ca_expiry: Family<WebhookLabels, Gauge>,
    findings: Family<WebhookLabels, Gauge>,
}

impl WebhookMetrics {
    /// Registers the families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        let m = WebhookMetrics {
            state: Family::default(),
            ready_endpoints: Family::default(),
            ca_expiry: Family::default(),
            findings: Family::default(),
        };
        r.register(
            "vapcheck_webhook_state",
            "1 for the state of each admission webhook (its first problem, or available), 0 for the other states; by configuration kind and name, webhook name and failure policy (docs/webhooks.md)",
            m.state.clone(),
        );
        r.register(
            "vapcheck_webhook_ready_endpoints",
            "Ready endpoints of the Service port an admission webhook's clientConfig.service names (webhooks with a Service reference whose Service and port exist)",
            m.ready_endpoints.clone(),
        );
        r.register(
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            "notAfter, in Unix seconds, of the last-expiring certificate of an admission webhook's clientConfig.caBundle",
            m.ca_expiry.clone(),
        );
        r.register(
            "vapcheck_webhook_findings",
            "Offline findings on an admission webhook (the practices VAP120-VAP127 and its match conditions' type-check, runtime and cost findings, as vapcheck check reports them)",
            m.findings.clone(),
        );
        m
    }
}

impl Metrics {
    /// Sets every series of one webhook: `vapcheck_webhook_state` (1 for `values.state`, 0
    /// for the others), and the ready endpoints and caBundle expiry when known (removed when
    /// not).
    pub fn set_webhook(&self, w: &WebhookLabels, values: &WebhookValues) {
        use crate::webhooks::availability::State;
        for state in State::ALL {
            self.webhook
                .state
                .get_or_create(&WebhookStateLabels::of(
                    w,
                    &values.failure_policy,
                    state.as_str(),
                ))
                .set(i64::from(state == values.state));
        }
        match values.ready_endpoints {
            Some(n) => {
                self.webhook
                    .ready_endpoints
                    .get_or_create(w)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            None => {
                self.webhook.ready_endpoints.remove(w);
            }
        }
        match values.ca_not_after {
            Some(t) => {
                self.webhook.ca_expiry.get_or_create(w).set(t);
            }
            None => {
                self.webhook.ca_expiry.remove(w);
            }
        }
        self.webhook
            .findings
            .get_or_create(w)
            .set(i64::try_from(values.findings).unwrap_or(i64::MAX));
    }

    /// Removes every series of one webhook (its configuration or the webhook is gone, or its
    /// failure policy changed: `failure_policy` is the one its series carry).
    pub fn remove_webhook(&self, w: &WebhookLabels, failure_policy: &str) {
        for state in crate::webhooks::availability::State::ALL {
            self.webhook
                .state
                .remove(&WebhookStateLabels::of(w, failure_policy, state.as_str()));
        }
        self.webhook.ready_endpoints.remove(w);
        self.webhook.ca_expiry.remove(w);
        self.webhook.findings.remove(w);
    }
}
