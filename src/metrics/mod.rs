//! Prometheus metrics of the controller (prometheus-client, no global registry).
//!
//! One [`Metrics`] value owns the registry and every family listed in `docs/metrics.md`. It is
//! cheap to clone (all families are shared handles), so the controller clones it into its
//! context, the HTTP server and the kube client layer ([`RestClientMetricsLayer`]).
//!
//! Names follow controller-runtime and client-go so existing dashboards and alerts work:
//! `controller_runtime_*`, `workqueue_*`, `leader_election_master_status`, `rest_client_*`,
//! `process_*`; vapcheck's own families start with `vapcheck_`. prometheus-client appends
//! `_total` to counters, so counters are registered under their base name.
//!
//! Label values are bounded: enums for results and reasons, the lease name, the API server
//! host, HTTP status codes, kube-rs verb names, and policy names (bounded by the number of
//! policies; a deleted policy's series is removed with [`Metrics::remove_policy`]).
//!
//! Each group of families is a struct in its own file that registers them (controller-runtime's
//! reconcile and work queue families in `controller.rs`, client-go's in `rest_client.rs`,
//! policies in `policies.rs`, the watch in `watch.rs`, webhooks in `webhooks.rs`, build and
//! process in `process.rs`), together with the [`Metrics`] methods that record them. The
//! registration order, which is the order of the exposition, is the order of [`Metrics::new`].

use std::sync::Arc;

use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

mod controller;
mod exposition;
mod labels;
mod policies;
mod process;
mod rest_client;
#[cfg(test)]
mod tests;
mod watch;
mod webhooks;

pub use controller::{CONTROLLER_NAME, RECONCILE_TIME_BUCKETS, ReconcileGuard};
pub use exposition::openmetrics_to_prometheus_text;
pub use labels::{
    PolicyKind, PolicyState, ReconcileResult, SchemaFetchResult, SkipReason, StatusWriteResult,
    WatchRestartReason,
};
pub use policies::{PolicyStateCounts, PolicyStates, VERDICT_LABELS};
pub use process::{ProcessStats, parse_boot_time, parse_proc_stat, read_process_stats};
pub use rest_client::{
    REST_CLIENT_DURATION_BUCKETS, RestClientMetricsFuture, RestClientMetricsLayer,
    RestClientMetricsService, SLOW_REQUEST,
};
pub use watch::{BINDINGS_RESOURCE, WatchStatus};
pub use webhooks::{WebhookLabels, WebhookValues};

/// The content type of [`Metrics::encode_openmetrics`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_prometheus_text`] (Prometheus text format 0.0.4).
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A histogram constructor with fixed buckets, for histogram families.
#[derive(Debug, Clone)]
struct Buckets(Arc<[f64]>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

type HistogramFamily<L> = Family<L, Histogram, Buckets>;

fn histogram_family<L: Clone + Eq + std::hash::Hash>(
    buckets: impl IntoIterator<Item = f64>,
) -> HistogramFamily<L> {
    Family::new_with_constructor(Buckets(buckets.into_iter().collect()))
}

fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// All metrics of the process. Clone it freely; clones share the same series.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    controller: controller::ControllerMetrics,
    rest_client: rest_client::RestClientMetrics,
    policy: policies::PolicyMetrics,
    watch: watch::WatchMetrics,
    webhook: webhooks::WebhookMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates the registry with every family, the process collector and
    /// `vapcheck_build_info`. Series with fixed label values start at zero so they are
    /// visible before the first event.
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let controller = controller::ControllerMetrics::register(&mut r);
        let rest_client = rest_client::RestClientMetrics::register(&mut r);
        let policy = policies::PolicyMetrics::register(&mut r);
        let watch = watch::WatchMetrics::register(&mut r);
        let webhook = webhooks::WebhookMetrics::register(&mut r);
        process::register(&mut r);
        let m = Metrics {
            registry: Arc::new(r),
            controller,
            rest_client,
            policy,
            watch,
            webhook,
        };
        for &kind in PolicyKind::ALL {
            m.set_policy_states(kind, PolicyStateCounts::default());
        }
        m.set_binding_verdicts(&std::collections::HashMap::new());
        m
    }

    /// [`Metrics::encode_openmetrics`] or [`Metrics::encode_prometheus_text`].
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The OpenMetrics text exposition (ends with `# EOF`).
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            // Writing to a String cannot fail; a collector error leaves a partial body.
            out.push_str("# EOF\n");
        }
        out
    }

    /// The classic Prometheus text format 0.0.4, for scrapers that do not ask for
    /// OpenMetrics: counter families are named with `_total`, and `# UNIT`/`# EOF` dropped.
    pub fn encode_prometheus_text(&self) -> String {
        openmetrics_to_prometheus_text(&self.encode_openmetrics())
    }

    /// Encodes for an HTTP `Accept` header: `(content type, body)`. OpenMetrics when the
    /// scraper accepts `application/openmetrics-text`, else the classic text format.
    pub fn encode_for_accept(&self, accept: Option<&str>) -> (&'static str, String) {
        let wants_openmetrics = accept
            .map(|a| a.contains("application/openmetrics-text"))
            .unwrap_or(false);
        if wants_openmetrics {
            (OPENMETRICS_CONTENT_TYPE, self.encode_openmetrics())
        } else {
            (PROMETHEUS_TEXT_CONTENT_TYPE, self.encode_prometheus_text())
        }
    }
}
