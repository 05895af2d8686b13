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

use std::fmt::Write as _;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `controller` label value of every controller-runtime family.
/// Every verdict label of `vapcheck_bindings{verdict}`, for zero-valued series (the
/// controller's binding analysis, `controller::bindings`, sets one of them per binding).
pub const VERDICT_LABELS: &[&str] = &[
    "denies_all",
    "inactive",
    "evaluates",
    "evaluates_with_warnings",
];

pub const CONTROLLER_NAME: &str = "vapcheck";

/// The content type of [`Metrics::encode_openmetrics`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::encode_prometheus_text`] (Prometheus text format 0.0.4).
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets
/// (controller-runtime pkg/internal/controller/metrics/metrics.go).
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// client-go's `rest_client_request_duration_seconds` buckets
/// (k8s.io/component-base v0.37.1 metrics/prometheus/restclient/metrics.go).
pub const REST_CLIENT_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

macro_rules! label_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                encoder.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// Outcome of one reconcile (`controller_runtime_reconcile_total{result}`).
    ReconcileResult {
        /// Done; nothing scheduled beyond the periodic re-check.
        Success => "success",
        /// The reconcile returned an error (also counted in `..._errors_total`).
        Error => "error",
        /// Requeued at once (rate-limited).
        Requeue => "requeue",
        /// Requeued after a delay.
        RequeueAfter => "requeue_after",
    }
}

label_enum! {
    /// A policy's check state (`vapcheck_policies{state}`).
    PolicyState {
        /// Every expression type-checks against every kind.
        Clean => "clean",
        /// At least one expression warning.
        Warnings => "warnings",
        /// Checked, but some kinds were skipped (no schema, limit, ...).
        Partial => "partial",
        /// Could not be checked at all (internal error, unusable policy).
        Failed => "failed",
    }
}

label_enum! {
    /// The kind of a checked policy (`kind` label of the per-policy metrics).
    PolicyKind {
        /// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy.
        Validating => "ValidatingAdmissionPolicy",
        /// `admissionregistration.k8s.io/v1` MutatingAdmissionPolicy.
        Mutating => "MutatingAdmissionPolicy",
        /// Kyverno's `policies.kyverno.io/v1` ValidatingPolicy.
        KyvernoValidating => "ValidatingPolicy",
        /// Kyverno's `policies.kyverno.io/v1` NamespacedValidatingPolicy (series named
        /// `<namespace>/<name>`).
        KyvernoNamespacedValidating => "NamespacedValidatingPolicy",
        /// Gatekeeper's `templates.gatekeeper.sh/v1` ConstraintTemplate.
        GatekeeperTemplate => "ConstraintTemplate",
    }
}

label_enum! {
    /// Why a kind was not checked (`vapcheck_kinds_skipped_total{reason}`).
    SkipReason {
        /// Above `kindLimit`.
        KindLimit => "kind_limit",
        /// A wildcard rule that was not expanded.
        Wildcard => "wildcard",
        /// A subresource (no schema of its own).
        Subresource => "subresource",
        /// The resource is not served by the cluster.
        NotFound => "not_found",
        /// The kind is served but has no usable schema.
        NoSchema => "no_schema",
    }
}

label_enum! {
    /// Why the policy watch had to be restarted (`vapcheck_watch_restarts_total{reason}`).
    WatchRestartReason {
        /// 410 Gone: the resource version expired; the watcher lists again.
        Expired => "expired",
        /// Any other list or watch failure (API server unreachable, 5xx, 403, ...).
        Error => "error",
    }
}

label_enum! {
    /// Outcome of one OpenAPI schema fetch (`vapcheck_schema_fetches_total{result}`).
    SchemaFetchResult {
        /// Fetched and parsed.
        Success => "success",
        /// The hash was unchanged; nothing downloaded.
        Unchanged => "unchanged",
        /// 404.
        NotFound => "not_found",
        /// 401 or 403.
        Forbidden => "forbidden",
        /// Any other failure (network, 5xx, unparsable document).
        Error => "error",
    }
}

label_enum! {
    /// Outcome of one status write (`vapcheck_status_writes_total{result}`).
    StatusWriteResult {
        /// Applied.
        Success => "success",
        /// The computed status equals the current one; no request sent.
        Unchanged => "unchanged",
        /// The policy was deleted meanwhile (404).
        NotFound => "not_found",
        /// 409 conflict.
        Conflict => "conflict",
        /// Any other failure.
        Error => "error",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ControllerLabels {
    controller: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReconcileLabels {
    controller: &'static str,
    result: ReconcileResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WorkqueueLabels {
    name: &'static str,
    controller: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestDurationLabels {
    verb: String,
    host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    kind: PolicyKind,
    state: PolicyState,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VerdictLabels {
    verdict: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

/// The `resource` label of the bindings in `vapcheck_watch_forbidden`.
pub const BINDINGS_RESOURCE: &str =
    "validatingadmissionpolicybindings.admissionregistration.k8s.io";

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PolicyLabels {
    kind: PolicyKind,
    policy: String,
}

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

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WatchRestartLabels {
    reason: WatchRestartReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FetchLabels {
    result: SchemaFetchResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabels {
    result: StatusWriteResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    kubernetes: &'static str,
}

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

fn workqueue_buckets() -> impl Iterator<Item = f64> {
    // controller-runtime pkg/metrics/workqueue.go: ExponentialBuckets(10e-9, 10, 12).
    exponential_buckets(1e-8, 10.0, 12)
}

/// Number of policies per state, set as a whole from a snapshot of all policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyStateCounts {
    /// Policies in [`PolicyState::Clean`].
    pub clean: u64,
    /// Policies in [`PolicyState::Warnings`].
    pub warnings: u64,
    /// Policies in [`PolicyState::Partial`].
    pub partial: u64,
    /// Policies in [`PolicyState::Failed`].
    pub failed: u64,
}

impl PolicyStateCounts {
    /// Counts the states of an iterator of policies.
    pub fn tally(states: impl IntoIterator<Item = PolicyState>) -> Self {
        let mut counts = PolicyStateCounts::default();
        for state in states {
            match state {
                PolicyState::Clean => counts.clean += 1,
                PolicyState::Warnings => counts.warnings += 1,
                PolicyState::Partial => counts.partial += 1,
                PolicyState::Failed => counts.failed += 1,
            }
        }
        counts
    }

    fn slot(&mut self, state: PolicyState) -> &mut u64 {
        match state {
            PolicyState::Clean => &mut self.clean,
            PolicyState::Warnings => &mut self.warnings,
            PolicyState::Partial => &mut self.partial,
            PolicyState::Failed => &mut self.failed,
        }
    }

    fn get(&self, state: PolicyState) -> u64 {
        match state {
            PolicyState::Clean => self.clean,
            PolicyState::Warnings => self.warnings,
            PolicyState::Partial => self.partial,
            PolicyState::Failed => self.failed,
        }
    }
}

/// The state of each policy of one kind by name, with the counts kept up to date on each
/// change (a tally over every policy on each check made a cold start quadratic: 12.5 million
/// visits at 5,000 policies).
#[derive(Debug, Default)]
pub struct PolicyStates {
    by_name: std::collections::HashMap<String, PolicyState>,
    counts: PolicyStateCounts,
}

impl PolicyStates {
    /// Records `state` for `name`; returns the new counts.
    pub fn set(&mut self, name: &str, state: PolicyState) -> PolicyStateCounts {
        let before = match self.by_name.get_mut(name) {
            Some(kept) => Some(std::mem::replace(kept, state)),
            None => {
                self.by_name.insert(name.to_owned(), state);
                None
            }
        };
        if let Some(before) = before {
            *self.counts.slot(before) -= 1;
        }
        *self.counts.slot(state) += 1;
        self.counts
    }

    /// Forgets `name`; returns the new counts.
    pub fn remove(&mut self, name: &str) -> PolicyStateCounts {
        if let Some(before) = self.by_name.remove(name) {
            *self.counts.slot(before) -= 1;
        }
        self.counts
    }

    /// The names with a recorded state.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    /// The counts of the recorded states.
    pub fn counts(&self) -> PolicyStateCounts {
        self.counts
    }
}

fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// All metrics of the process. Clone it freely; clones share the same series.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconcile_total: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_time: HistogramFamily<ControllerLabels>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    wq_depth: Family<WorkqueueLabels, Gauge>,
    wq_adds: Family<WorkqueueLabels, Counter>,
    wq_retries: Family<WorkqueueLabels, Counter>,
    wq_queue_duration: HistogramFamily<WorkqueueLabels>,
    wq_work_duration: HistogramFamily<WorkqueueLabels>,
    leader: Family<LeaseLabels, Gauge>,
    rest_requests: Family<RequestLabels, Counter>,
    rest_duration: HistogramFamily<RequestDurationLabels>,
    policies: Family<StateLabels, Gauge>,
    bindings: Family<VerdictLabels, Gauge>,
    policy_warnings: Family<PolicyLabels, Gauge>,
    policy_runtime_errors: Family<PolicyLabels, Gauge>,
    policy_rejected_on_create: Family<PolicyLabels, Gauge>,
    typecheck_duration: Histogram,
    estimated_cost: Histogram,
    kinds_skipped: Family<ReasonLabels, Counter>,
    schema_fetches: Family<FetchLabels, Counter>,
    schema_cache_kinds: Gauge,
    status_writes: Family<WriteLabels, Counter>,
    watch_restarts: Family<WatchRestartLabels, Counter>,
    watch_forbidden: Family<ResourceLabels, Gauge>,
    webhook_state: Family<WebhookStateLabels, Gauge>,
    webhook_ready_endpoints: Family<WebhookLabels, Gauge>,
    webhook_ca_expiry: Family<WebhookLabels, Gauge>,
    webhook_findings: Family<WebhookLabels, Gauge>,
    watch: WatchStatus,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

const C: ControllerLabels = ControllerLabels {
    controller: CONTROLLER_NAME,
};
const WQ: WorkqueueLabels = WorkqueueLabels {
    name: CONTROLLER_NAME,
    controller: CONTROLLER_NAME,
};

impl Metrics {
    /// Creates the registry with every family, the process collector and
    /// `vapcheck_build_info`. Series with fixed label values start at zero so they are
    /// visible before the first event.
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: histogram_family(RECONCILE_TIME_BUCKETS),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            wq_depth: Family::default(),
            wq_adds: Family::default(),
            wq_retries: Family::default(),
            wq_queue_duration: histogram_family(workqueue_buckets()),
            wq_work_duration: histogram_family(workqueue_buckets()),
            leader: Family::default(),
            rest_requests: Family::default(),
            rest_duration: histogram_family(REST_CLIENT_DURATION_BUCKETS),
            policies: Family::default(),
            bindings: Family::default(),
            policy_warnings: Family::default(),
            policy_runtime_errors: Family::default(),
            policy_rejected_on_create: Family::default(),
            // 100 µs … 3.3 s, doubling.
            typecheck_duration: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            // 1 … 1e12, times ten: PerCallLimit (1e6) and RuntimeCELCostBudget (1e7) are
            // bucket bounds.
            estimated_cost: Histogram::new(exponential_buckets(1.0, 10.0, 13)),
            kinds_skipped: Family::default(),
            schema_fetches: Family::default(),
            schema_cache_kinds: Gauge::default(),
            status_writes: Family::default(),
            watch_restarts: Family::default(),
            watch_forbidden: Family::default(),
            webhook_state: Family::default(),
            webhook_ready_endpoints: Family::default(),
            webhook_ca_expiry: Family::default(),
            webhook_findings: Family::default(),
            watch: WatchStatus::default(),
        };

        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        r.register(
            "workqueue_depth",
            "Current depth of workqueue",
            m.wq_depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.wq_adds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.wq_retries.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.wq_queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            m.wq_work_duration.clone(),
        );
        r.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
            m.leader.clone(),
        );
        r.register(
            "rest_client_requests",
            "Number of HTTP requests to the Kubernetes API server, partitioned by status code, method, and host",
            m.rest_requests.clone(),
        );
        r.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds until the response headers arrive, broken down by verb and host",
            m.rest_duration.clone(),
        );
        r.register(
            "vapcheck_policies",
            "Number of admission policies per kind (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) and check state",
            m.policies.clone(),
        );
        r.register(
            "vapcheck_bindings",
            "Number of ValidatingAdmissionPolicyBindings per verdict",
            m.bindings.clone(),
        );
        r.register(
            "vapcheck_policy_expression_warnings",
            "Number of expression warnings of each admission policy, by kind",
            m.policy_warnings.clone(),
        );
        r.register(
            "vapcheck_policy_runtime_errors",
            "Number of expression accesses of each admission policy that error at admission on valid objects (extended mode; docs/runtime-safety.md), by kind",
            m.policy_runtime_errors.clone(),
        );
        r.register(
            "vapcheck_policy_rejected_on_create",
            "1 when kube-apiserver would reject the stored admission policy if it were created now, else 0 (a ValidatingAdmissionPolicy's AcceptedOnCreate condition names the causes)",
            m.policy_rejected_on_create.clone(),
        );
        r.register(
            "vapcheck_typecheck_duration_seconds",
            "Time to type-check one policy against all its kinds",
            m.typecheck_duration.clone(),
        );
        r.register(
            "vapcheck_cel_estimated_cost",
            "Worst-case estimated CEL cost of each expression for each checked kind (extended mode, schema sizes; docs/cost.md)",
            m.estimated_cost.clone(),
        );
        r.register(
            "vapcheck_kinds_skipped",
            "Number of kinds not checked, by reason",
            m.kinds_skipped.clone(),
        );
        r.register(
            "vapcheck_schema_fetches",
            "Number of OpenAPI schema fetches, by result",
            m.schema_fetches.clone(),
        );
        r.register(
            "vapcheck_schema_cache_kinds",
            "Number of kinds whose schema is cached",
            m.schema_cache_kinds.clone(),
        );
        r.register(
            "vapcheck_status_writes",
            "Number of policy status writes, by result",
            m.status_writes.clone(),
        );
        r.register(
            "vapcheck_watch_restarts",
            "Number of times the ValidatingAdmissionPolicy list/watch failed and was restarted, by reason",
            m.watch_restarts.clone(),
        );
        r.register(
            "vapcheck_watch_forbidden",
            "1 while the API server refuses (403) vapcheck's list/watch of the resource (the bindings, a param kind), else 0",
            m.watch_forbidden.clone(),
        );
        r.register(
            "vapcheck_webhook_state",
            "1 for the state of each admission webhook (its first problem, or available), 0 for the other states; by configuration kind and name, webhook name and failure policy (docs/webhooks.md)",
            m.webhook_state.clone(),
        );
        r.register(
            "vapcheck_webhook_ready_endpoints",
            "Ready endpoints of the Service port an admission webhook's clientConfig.service names (webhooks with a Service reference whose Service and port exist)",
            m.webhook_ready_endpoints.clone(),
        );
        r.register(
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            "notAfter, in Unix seconds, of the last-expiring certificate of an admission webhook's clientConfig.caBundle",
            m.webhook_ca_expiry.clone(),
        );
        r.register(
            "vapcheck_webhook_findings",
            "Offline findings on an admission webhook (the practices VAP120-VAP127 and its match conditions' type-check, runtime and cost findings, as vapcheck check reports them)",
            m.webhook_findings.clone(),
        );
        // The bindings are always watched: their series exists from start-up.
        m.set_watch_forbidden(BINDINGS_RESOURCE, false);
        r.register_collector(Box::new(WatchCollector {
            status: m.watch.clone(),
        }));
        let build_info: Family<BuildLabels, Gauge> = Family::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                kubernetes: crate::KUBERNETES_VERSION,
            })
            .set(1);
        r.register(
            "vapcheck_build_info",
            "Build information, always 1: vapcheck version and the Kubernetes release it follows",
            build_info,
        );
        r.register_collector(Box::new(ProcessCollector::new()));

        // Zero-valued series that dashboards expect before the first event.
        for &result in ReconcileResult::ALL {
            drop(m.reconcile_total.get_or_create(&ReconcileLabels {
                controller: CONTROLLER_NAME,
                result,
            }));
        }
        drop(m.reconcile_errors.get_or_create(&C));
        drop(m.active_workers.get_or_create(&C));
        drop(m.max_concurrent.get_or_create(&C));
        drop(m.wq_depth.get_or_create(&WQ));
        drop(m.wq_adds.get_or_create(&WQ));
        drop(m.wq_retries.get_or_create(&WQ));
        for &reason in WatchRestartReason::ALL {
            drop(
                m.watch_restarts
                    .get_or_create(&WatchRestartLabels { reason }),
            );
        }
        for &kind in PolicyKind::ALL {
            m.set_policy_states(kind, PolicyStateCounts::default());
        }
        m.set_binding_verdicts(&std::collections::HashMap::new());

        Metrics {
            registry: Arc::new(r),
            ..m
        }
    }

    /// The registry, e.g. to register more metrics in tests. Encoding goes through
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

    // ---- controller-runtime families ----

    /// Records the configured worker count (`controller_runtime_max_concurrent_reconciles`).
    pub fn set_max_concurrent_reconciles(&self, n: u16) {
        self.max_concurrent.get_or_create(&C).set(i64::from(n));
    }

    /// Starts timing one reconcile and counts an active worker until the guard is finished
    /// or dropped. A guard dropped without [`ReconcileGuard::finish`] (e.g. a cancelled
    /// future) records nothing but the worker count.
    pub fn start_reconcile(&self) -> ReconcileGuard {
        self.active_workers.get_or_create(&C).inc();
        ReconcileGuard {
            metrics: self.clone(),
            started: Instant::now(),
        }
    }

    /// Records one finished reconcile that was timed elsewhere.
    pub fn observe_reconcile(&self, result: ReconcileResult, duration: Duration) {
        self.reconcile_total
            .get_or_create(&ReconcileLabels {
                controller: CONTROLLER_NAME,
                result,
            })
            .inc();
        if result == ReconcileResult::Error {
            self.reconcile_errors.get_or_create(&C).inc();
        }
        self.reconcile_time
            .get_or_create(&C)
            .observe(duration.as_secs_f64());
    }

    // ---- workqueue families ----

    /// An item was added to the work queue (`workqueue_adds_total`).
    pub fn workqueue_add(&self) {
        self.wq_adds.get_or_create(&WQ).inc();
    }

    /// An item was re-queued after a failure (`workqueue_retries_total`).
    pub fn workqueue_retry(&self) {
        self.wq_retries.get_or_create(&WQ).inc();
    }

    /// Current number of items waiting (`workqueue_depth`).
    pub fn set_workqueue_depth(&self, depth: usize) {
        self.wq_depth
            .get_or_create(&WQ)
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Time an item waited between being queued and being picked up.
    pub fn observe_queue_duration(&self, waited: Duration) {
        self.wq_queue_duration
            .get_or_create(&WQ)
            .observe(waited.as_secs_f64());
    }

    /// Time processing one item took.
    pub fn observe_work_duration(&self, took: Duration) {
        self.wq_work_duration
            .get_or_create(&WQ)
            .observe(took.as_secs_f64());
    }

    // ---- leader election ----

    /// 1 while this replica holds the lease `lease_name`, else 0.
    pub fn set_leader(&self, lease_name: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                name: lease_name.to_owned(),
            })
            .set(i64::from(leading));
    }

    // ---- API client ----

    /// A tower layer for kube's `ClientBuilder` that feeds `rest_client_requests_total` and
    /// `rest_client_request_duration_seconds`. `host` labels requests whose URI has no
    /// authority (kube sets the base URI below user layers); pass the cluster URL's host.
    pub fn rest_client_layer(&self, host: impl Into<String>) -> RestClientMetricsLayer {
        RestClientMetricsLayer {
            metrics: self.clone(),
            host: Arc::from(host.into()),
        }
    }

    fn observe_request(&self, method: &str, code: &str, verb: &str, host: &str, elapsed: Duration) {
        self.rest_requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
                host: host.to_owned(),
            })
            .inc();
        self.rest_duration
            .get_or_create(&RequestDurationLabels {
                verb: verb.to_owned(),
                host: host.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    // ---- vapcheck ----

    /// Sets `vapcheck_policies{kind, state}` for every state from a snapshot of all policies
    /// of `kind`.
    pub fn set_policy_states(&self, kind: PolicyKind, counts: PolicyStateCounts) {
        for &state in PolicyState::ALL {
            self.policies
                .get_or_create(&StateLabels { kind, state })
                .set(gauge_value(counts.get(state)));
        }
    }

    /// Sets `vapcheck_bindings{verdict}` for every verdict (missing ones: 0) from a snapshot of
    /// all bindings seen.
    pub fn set_binding_verdicts(&self, counts: &std::collections::HashMap<&'static str, u64>) {
        for &verdict in VERDICT_LABELS {
            self.bindings
                .get_or_create(&VerdictLabels {
                    verdict: verdict.to_owned(),
                })
                .set(gauge_value(counts.get(verdict).copied().unwrap_or(0)));
        }
    }

    /// Sets `vapcheck_policy_expression_warnings{kind, policy}`.
    pub fn set_policy_warnings(&self, kind: PolicyKind, policy: &str, warnings: usize) {
        self.policy_warnings
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::try_from(warnings).unwrap_or(i64::MAX));
    }

    /// Sets `vapcheck_policy_runtime_errors{kind, policy}`.
    pub fn set_policy_runtime_errors(&self, kind: PolicyKind, policy: &str, errors: usize) {
        self.policy_runtime_errors
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::try_from(errors).unwrap_or(i64::MAX));
    }

    /// Sets `vapcheck_policy_rejected_on_create{kind, policy}`.
    pub fn set_policy_rejected_on_create(&self, kind: PolicyKind, policy: &str, rejected: bool) {
        self.policy_rejected_on_create
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::from(rejected));
    }

    /// Removes every per-policy series of a deleted policy.
    pub fn remove_policy(&self, kind: PolicyKind, policy: &str) {
        let labels = PolicyLabels {
            kind,
            policy: policy.to_owned(),
        };
        self.policy_warnings.remove(&labels);
        self.policy_runtime_errors.remove(&labels);
        self.policy_rejected_on_create.remove(&labels);
    }

    /// Records the time one policy's type check took.
    pub fn observe_typecheck(&self, took: Duration) {
        self.typecheck_duration.observe(took.as_secs_f64());
    }

    /// Observes the worst-case estimate of each expression for each kind of one check
    /// (`PolicyStatus::cost`, extended mode; one observation per expression and kind).
    pub fn observe_estimated_costs(&self, cost: &crate::policy::PolicyCost) {
        for e in &cost.expressions {
            for _ in &e.gvks {
                // u64 → f64 rounds above 2^53; bucket bounds are far below.
                self.estimated_cost.observe(e.max as f64);
            }
        }
    }

    /// Counts `n` kinds skipped for `reason`.
    pub fn kinds_skipped(&self, reason: SkipReason, n: u64) {
        self.kinds_skipped
            .get_or_create(&ReasonLabels { reason })
            .inc_by(n);
    }

    /// Counts one schema fetch.
    pub fn schema_fetch(&self, result: SchemaFetchResult) {
        self.schema_fetches
            .get_or_create(&FetchLabels { result })
            .inc();
    }

    /// Sets the number of kinds in the schema cache.
    pub fn set_schema_cache_kinds(&self, n: usize) {
        self.schema_cache_kinds
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// The health of the policy list/watch, shared with readiness.
    pub fn watch_status(&self) -> &WatchStatus {
        &self.watch
    }

    /// Counts one failure of the policy list/watch (the watcher retries after its backoff).
    pub fn watch_failed(&self, reason: WatchRestartReason, error: &str) {
        self.watch_restarts
            .get_or_create(&WatchRestartLabels { reason })
            .inc();
        self.watch.failed(error);
    }

    /// Sets `vapcheck_watch_forbidden{resource}`: whether the API server refuses (403) the
    /// list/watch of `resource` (plural.group, or the plural for the core group).
    pub fn set_watch_forbidden(&self, resource: &str, forbidden: bool) {
        self.watch_forbidden
            .get_or_create(&ResourceLabels {
                resource: resource.to_owned(),
            })
            .set(i64::from(forbidden));
    }

    /// Sets every series of one webhook: `vapcheck_webhook_state` (1 for `values.state`, 0
    /// for the others), and the ready endpoints and caBundle expiry when known (removed when
    /// not).
    pub fn set_webhook(&self, w: &WebhookLabels, values: &WebhookValues) {
        use crate::webhooks::availability::State;
        for state in State::ALL {
            self.webhook_state
                .get_or_create(&WebhookStateLabels::of(
                    w,
                    &values.failure_policy,
                    state.as_str(),
                ))
                .set(i64::from(state == values.state));
        }
        match values.ready_endpoints {
            Some(n) => {
                self.webhook_ready_endpoints
                    .get_or_create(w)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            None => {
                self.webhook_ready_endpoints.remove(w);
            }
        }
        match values.ca_not_after {
            Some(t) => {
                self.webhook_ca_expiry.get_or_create(w).set(t);
            }
            None => {
                self.webhook_ca_expiry.remove(w);
            }
        }
        self.webhook_findings
            .get_or_create(w)
            .set(i64::try_from(values.findings).unwrap_or(i64::MAX));
    }

    /// Removes every series of one webhook (its configuration or the webhook is gone, or its
    /// failure policy changed: `failure_policy` is the one its series carry).
    pub fn remove_webhook(&self, w: &WebhookLabels, failure_policy: &str) {
        for state in crate::webhooks::availability::State::ALL {
            self.webhook_state
                .remove(&WebhookStateLabels::of(w, failure_policy, state.as_str()));
        }
        self.webhook_ready_endpoints.remove(w);
        self.webhook_ca_expiry.remove(w);
        self.webhook_findings.remove(w);
    }

    /// Counts one status write (or a skipped one, [`StatusWriteResult::Unchanged`]).
    pub fn status_write(&self, result: StatusWriteResult) {
        self.status_writes
            .get_or_create(&WriteLabels { result })
            .inc();
    }
}

/// Times one reconcile; see [`Metrics::start_reconcile`].
#[derive(Debug)]
#[must_use = "finish the guard with the reconcile's result"]
pub struct ReconcileGuard {
    metrics: Metrics,
    started: Instant,
}

impl ReconcileGuard {
    /// Records the result and the elapsed time, and releases the worker.
    pub fn finish(self, result: ReconcileResult) {
        let took = self.started.elapsed();
        self.metrics.observe_reconcile(result, took);
        self.metrics.observe_work_duration(took);
        // Dropping `self` releases the worker.
    }

    /// Time since the reconcile started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for ReconcileGuard {
    fn drop(&mut self) {
        self.metrics.active_workers.get_or_create(&C).dec();
    }
}

/// Rewrites prometheus-client's OpenMetrics output into Prometheus text format 0.0.4.
///
/// Differences handled: OpenMetrics names a counter family without `_total` in `# HELP` and
/// `# TYPE` while classic text names it with; `# UNIT` and `# EOF` do not exist in classic
/// text; `unknown` is `untyped`; `info` and `stateset` become gauges. Sample lines are the same.
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (orig, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = orig;
            let (name, kind) = match kind {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" | "gaugehistogram" => (name.to_owned(), "gauge"),
                "unknown" => (name.to_owned(), "untyped"),
                other => (name.to_owned(), other),
            };
            if let Some((help_name, help)) = pending_help.take() {
                let help_name = if help_name == orig {
                    name.as_str()
                } else {
                    help_name
                };
                let _ = writeln!(out, "# HELP {help_name} {}", escape_help(help));
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some((name, help)) = pending_help.take() {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn escape_help(help: &str) -> String {
    // Classic text escapes only backslash and newline in HELP; OpenMetrics help from
    // prometheus-client is written raw, so escape backslashes here.
    help.replace('\\', "\\\\")
}

// ---- process metrics ----

/// Collects `process_*` metrics from `/proc/self` at scrape time.
#[derive(Debug)]
struct ProcessCollector {
    /// Fallback start time when `/proc` is unavailable (not Linux).
    created: f64,
}

impl ProcessCollector {
    fn new() -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        ProcessCollector { created }
    }
}

/// What `/proc/self` says about the process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes.
    pub resident_bytes: u64,
    /// Start time in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Number of open file descriptors.
    pub open_fds: u64,
}

/// Parses `/proc/self/stat` content. `ticks` is `sysconf(_SC_CLK_TCK)`, `page_size` in
/// bytes, `boot_time` the `btime` of `/proc/stat`. Returns `(cpu seconds, rss bytes,
/// start time)`. The command name may contain spaces and parentheses, so fields are counted
/// after the last `)`.
pub fn parse_proc_stat(
    stat: &str,
    ticks: f64,
    page_size: u64,
    boot_time: u64,
) -> Option<(f64, u64, f64)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3 of proc(5), i.e. index 0 here.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let utime = field(14)?;
    let stime = field(15)?;
    let starttime = field(22)?;
    let rss_pages = field(24)?;
    if ticks <= 0.0 {
        return None;
    }
    let cpu = (utime + stime) as f64 / ticks;
    let start = boot_time as f64 + starttime as f64 / ticks;
    Some((cpu, rss_pages.saturating_mul(page_size), start))
}

/// Reads `btime` from `/proc/stat` content.
pub fn parse_boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads the process statistics from `/proc/self`; `None` where `/proc` is unavailable.
pub fn read_process_stats() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = parse_boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    // SAFETY: sysconf only reads a system constant and has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let (cpu_seconds, resident_bytes, start_time_seconds) = parse_proc_stat(
        &stat,
        ticks as f64,
        u64::try_from(page).ok().filter(|p| *p > 0)?,
        boot,
    )?;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    Some(ProcessStats {
        cpu_seconds,
        resident_bytes,
        start_time_seconds,
        open_fds,
    })
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = read_process_stats() else {
            let start = ConstGauge::new(self.created);
            start.encode(encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                None,
                start.metric_type(),
            )?)?;
            return Ok(());
        };
        let cpu = ConstCounter::new(stats.cpu_seconds);
        // A counter registered as `process_cpu_seconds` is exposed as `process_cpu_seconds_total`.
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            cpu.metric_type(),
        )?)?;
        let fds = ConstGauge::new(gauge_value(stats.open_fds));
        fds.encode(encoder.encode_descriptor(
            "process_open_fds",
            "Number of open file descriptors.",
            None,
            fds.metric_type(),
        )?)?;
        let rss = ConstGauge::new(gauge_value(stats.resident_bytes));
        rss.encode(encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            None,
            rss.metric_type(),
        )?)?;
        let start = ConstGauge::new(stats.start_time_seconds);
        start.encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            None,
            start.metric_type(),
        )?)?;
        Ok(())
    }
}

// ---- kube client tower layer ----

/// The path suffix of the one collection vapcheck watches.
const WATCHED_RESOURCE_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// Health of the controller's policy list/watch: when it last worked, and since when it has
/// been failing. Shared by the metrics (`vapcheck_watch_*`) and readiness. Cheap to clone;
/// clones share state.
#[derive(Debug, Clone)]
pub struct WatchStatus {
    inner: Arc<WatchStatusInner>,
}

#[derive(Debug)]
struct WatchStatusInner {
    base: Instant,
    base_wall: SystemTime,
    /// Whether a controller runs its watch now (the leader); a standby watches nothing.
    active: std::sync::atomic::AtomicBool,
    /// Milliseconds after `base` of the last successful list, watch start or watch event;
    /// `u64::MAX` before the first.
    last_success_ms: std::sync::atomic::AtomicU64,
    /// Milliseconds after `base` of the first failure since the last success; `u64::MAX`
    /// when healthy.
    broken_since_ms: std::sync::atomic::AtomicU64,
    last_error: std::sync::Mutex<String>,
    /// Wakes one waiter of [`WatchStatus::recovered`] when a failing watch works again.
    recovered: tokio::sync::Notify,
}

impl Default for WatchStatus {
    fn default() -> Self {
        // The base lies in the past so that every offset from it is positive (and tests can
        // move a failure back in time).
        let now = Instant::now();
        let back = Duration::from_secs(3600);
        let base = now.checked_sub(back).unwrap_or(now);
        WatchStatus {
            inner: Arc::new(WatchStatusInner {
                base,
                base_wall: SystemTime::now() - now.duration_since(base),
                active: std::sync::atomic::AtomicBool::new(false),
                last_success_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
                broken_since_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
                last_error: std::sync::Mutex::new(String::new()),
                recovered: tokio::sync::Notify::new(),
            }),
        }
    }
}

impl WatchStatus {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.inner.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// A controller starts its watch (healthy until it fails).
    pub fn start(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.inner.broken_since_ms.store(u64::MAX, SeqCst);
        self.inner.active.store(true, SeqCst);
    }

    /// The controller stopped (lost the lease, shutting down).
    pub fn stop(&self) {
        self.inner
            .active
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// A list completed, a watch was accepted, or a watch event arrived.
    pub fn succeeded(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.inner.last_success_ms.store(self.now_ms(), SeqCst);
        if self.inner.broken_since_ms.swap(u64::MAX, SeqCst) != u64::MAX {
            self.inner.recovered.notify_one();
        }
    }

    /// The list or watch failed with `error`.
    pub fn failed(&self, error: &str) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now_ms();
        let _ = self
            .inner
            .broken_since_ms
            .compare_exchange(u64::MAX, now, SeqCst, SeqCst);
        *self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = error.to_owned();
    }

    /// Moves the start of the current failure `ago` into the past (tests of the grace).
    #[cfg(test)]
    pub(crate) fn backdate_failure(&self, ago: Duration) {
        let ms = u64::try_from(ago.as_millis()).unwrap_or(u64::MAX);
        let now = self.now_ms();
        self.inner
            .broken_since_ms
            .store(now.saturating_sub(ms), std::sync::atomic::Ordering::SeqCst);
    }

    /// Completes when a failing watch has worked again (after [`WatchStatus::failed`], the
    /// next [`WatchStatus::succeeded`]). A recovery before the call is reported at once.
    pub async fn recovered(&self) {
        self.inner.recovered.notified().await;
    }

    /// How long the watch of a running controller has been failing, and the last error;
    /// `None` when it works or no controller runs.
    pub fn broken_for(&self) -> Option<(Duration, String)> {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.inner.active.load(SeqCst) {
            return None;
        }
        let since = self.inner.broken_since_ms.load(SeqCst);
        if since == u64::MAX {
            return None;
        }
        let error = self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Some((
            Duration::from_millis(self.now_ms().saturating_sub(since)),
            error,
        ))
    }

    /// Time since the last successful list, watch start or watch event, if any.
    pub fn since_last_success(&self) -> Option<Duration> {
        let last = self
            .inner
            .last_success_ms
            .load(std::sync::atomic::Ordering::SeqCst);
        (last != u64::MAX).then(|| Duration::from_millis(self.now_ms().saturating_sub(last)))
    }

    /// Unix time of the last success, in seconds.
    fn last_success_unix(&self) -> Option<f64> {
        let last = self
            .inner
            .last_success_ms
            .load(std::sync::atomic::Ordering::SeqCst);
        if last == u64::MAX {
            return None;
        }
        let at = self.inner.base_wall + Duration::from_millis(last);
        at.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64())
    }
}

/// Encodes the time-dependent watch series at scrape time.
#[derive(Debug)]
struct WatchCollector {
    status: WatchStatus,
}

impl Collector for WatchCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (Some(since), Some(at)) = (
            self.status.since_last_success(),
            self.status.last_success_unix(),
        ) else {
            return Ok(());
        };
        let since = ConstGauge::new(since.as_secs_f64());
        since.encode(encoder.encode_descriptor(
            "vapcheck_watch_seconds_since_last_success",
            "Seconds since the ValidatingAdmissionPolicy list/watch last succeeded (a list, an accepted watch or a watch event)",
            None,
            since.metric_type(),
        )?)?;
        let at = ConstGauge::new(at);
        at.encode(encoder.encode_descriptor(
            "vapcheck_watch_last_success_timestamp_seconds",
            "Unix time of the last successful ValidatingAdmissionPolicy list, watch start or watch event",
            None,
            at.metric_type(),
        )?)?;
        Ok(())
    }
}

/// Tower layer counting and timing Kubernetes API requests; see
/// [`Metrics::rest_client_layer`]. Use it as
/// `kube::client::ClientBuilder::try_from(config)?.with_layer(&layer).build()`.
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    metrics: Metrics,
    host: Arc<str>,
}

impl<S> tower::Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetricsService {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service made by [`RestClientMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RestClientMetricsService<S> {
    inner: S,
    metrics: Metrics,
    host: Arc<str>,
}

impl<S, B, R> tower::Service<http::Request<B>> for RestClientMetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RestClientMetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // kube-client tags each request with its verb as a `&'static str` extension
        // ("list", "watch", "patch_status", ...); raw requests have none.
        let method = req.method().as_str().to_owned();
        let verb = req
            .extensions()
            .get::<&'static str>()
            .map(|v| (*v).to_owned())
            .unwrap_or_else(|| method.to_ascii_lowercase());
        let host = req
            .uri()
            .authority()
            .map(|a| a.host().to_owned())
            .unwrap_or_else(|| self.host.to_string());
        let watches_policies = verb == "watch" && req.uri().path().ends_with(WATCHED_RESOURCE_PATH);
        RestClientMetricsFuture {
            watches_policies,
            path: req.uri().path().to_owned(),
            inner: Box::pin(self.inner.call(req)),
            metrics: self.metrics.clone(),
            started: Instant::now(),
            method,
            verb,
            host,
        }
    }
}

/// A request (other than a watch) answered after this long is logged.
pub const SLOW_REQUEST: Duration = Duration::from_secs(3);

/// The response future of [`RestClientMetricsService`].
pub struct RestClientMetricsFuture<F> {
    watches_policies: bool,
    /// The request's path, named in the log when the answer was slow.
    path: String,
    inner: std::pin::Pin<Box<F>>,
    metrics: Metrics,
    started: Instant,
    method: String,
    verb: String,
    host: String,
}

impl<F> std::fmt::Debug for RestClientMetricsFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClientMetricsFuture")
            .field("verb", &self.verb)
            .finish()
    }
}

impl<F, R, E> std::future::Future for RestClientMetricsFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = match self.inner.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        // client-go labels transport failures with code "<error>".
        let code = match &result {
            Ok(resp) => resp.status().as_str().to_owned(),
            Err(_) => "<error>".to_owned(),
        };
        let this = &*self;
        // A watch of policies that the server accepted: the watch works again (kube's
        // watcher emits no event when it merely re-establishes a watch).
        if this.watches_policies && matches!(&result, Ok(resp) if resp.status().is_success()) {
            this.metrics.watch.succeeded();
        }
        let elapsed = this.started.elapsed();
        this.metrics
            .observe_request(&this.method, &code, &this.verb, &this.host, elapsed);
        // A watch's response is its whole stream; every other request should answer quickly.
        if elapsed >= SLOW_REQUEST && this.verb != "watch" {
            tracing::warn!(
                verb = %this.verb,
                path = %this.path,
                code = %code,
                duration_ms = elapsed.as_millis() as u64,
                "the API server answered slowly"
            );
        }
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts kept on each change are the tally of the recorded states, through new
    /// names, changed states, unchanged states and removals (also of unknown names).
    #[test]
    fn policy_states_keep_the_tally() {
        use PolicyState::{Clean, Failed, Partial, Warnings};
        let mut states = PolicyStates::default();
        let mut reference: std::collections::BTreeMap<String, PolicyState> = Default::default();
        let steps: &[(&str, Option<PolicyState>)] = &[
            ("a", Some(Clean)),
            ("b", Some(Warnings)),
            ("a", Some(Failed)),
            ("c", Some(Partial)),
            ("a", Some(Failed)),
            ("b", None),
            ("zz", None),
            ("b", Some(Clean)),
            ("c", Some(Warnings)),
        ];
        for (name, state) in steps {
            let counts = match state {
                Some(s) => {
                    reference.insert((*name).to_owned(), *s);
                    states.set(name, *s)
                }
                None => {
                    reference.remove(*name);
                    states.remove(name)
                }
            };
            let want = PolicyStateCounts::tally(reference.values().copied());
            assert_eq!(counts, want, "after {name} -> {state:?}");
            assert_eq!(states.counts(), want);
        }
        let mut names: Vec<&String> = states.names().collect();
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
    }
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Format {
        Classic,
        OpenMetrics,
    }

    /// One parsed sample: name, labels, value.
    type Sample = (String, BTreeMap<String, String>, f64);

    fn is_metric_name(s: &str) -> bool {
        let mut chars = s.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    fn is_label_name(s: &str) -> bool {
        let mut chars = s.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    }

    fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
        let mut labels = BTreeMap::new();
        let mut rest = s;
        while !rest.is_empty() {
            let (name, after) = rest.split_once("=\"").ok_or(format!("bad labels {s}"))?;
            if !is_label_name(name) {
                return Err(format!("bad label name {name:?}"));
            }
            let mut value = String::new();
            let mut chars = after.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    '\n' => return Err("newline in label value".into()),
                    c => value.push(c),
                }
            }
            let end = end.ok_or("unterminated label value")?;
            if labels.insert(name.to_owned(), value).is_some() {
                return Err(format!("duplicate label {name}"));
            }
            rest = &after[end + 1..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
        Ok(labels)
    }

    fn parse_value(s: &str) -> Result<f64, String> {
        match s {
            "+Inf" => Ok(f64::INFINITY),
            "-Inf" => Ok(f64::NEG_INFINITY),
            "NaN" => Ok(f64::NAN),
            _ => s.parse().map_err(|_| format!("bad value {s:?}")),
        }
    }

    /// A strict parser of both exposition formats: every sample belongs to the family of the
    /// `# TYPE` line before it, names and labels are well-formed, no series is repeated.
    fn parse_exposition(text: &str, format: Format) -> Result<Vec<Sample>, String> {
        let mut samples = Vec::new();
        let mut families: BTreeMap<String, String> = BTreeMap::new();
        let mut current: Option<(String, String)> = None;
        let mut series = BTreeSet::new();
        let mut lines: Vec<&str> = text.lines().collect();
        if !text.ends_with('\n') {
            return Err("no final newline".into());
        }
        if format == Format::OpenMetrics && lines.pop() != Some("# EOF") {
            return Err("OpenMetrics output must end with # EOF".into());
        }
        for line in lines {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or("");
                if !is_metric_name(name) {
                    return Err(format!("bad HELP name {name}"));
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').ok_or("bad TYPE")?;
                let allowed: &[&str] = match format {
                    Format::Classic => &["counter", "gauge", "histogram", "summary", "untyped"],
                    Format::OpenMetrics => &[
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "unknown",
                        "info",
                        "stateset",
                        "gaugehistogram",
                    ],
                };
                if !allowed.contains(&kind) || !is_metric_name(name) {
                    return Err(format!("bad TYPE line {line}"));
                }
                if families.insert(name.to_owned(), kind.to_owned()).is_some() {
                    return Err(format!("family {name} declared twice"));
                }
                current = Some((name.to_owned(), kind.to_owned()));
                continue;
            }
            if line.starts_with('#') {
                if format == Format::OpenMetrics && line.starts_with("# UNIT ") {
                    continue;
                }
                return Err(format!("unexpected comment {line}"));
            }
            let (name_labels, value) = line.rsplit_once(' ').ok_or(format!("bad line {line}"))?;
            let value = parse_value(value)?;
            let (name, labels) = match name_labels.split_once('{') {
                Some((n, l)) => (
                    n,
                    parse_labels(l.strip_suffix('}').ok_or(format!("bad labels in {line}"))?)?,
                ),
                None => (name_labels, BTreeMap::new()),
            };
            let (family, kind) = current
                .as_ref()
                .ok_or(format!("sample before TYPE: {line}"))?;
            let ok = match (kind.as_str(), format) {
                ("counter", Format::Classic) => name == family,
                ("counter", Format::OpenMetrics) => name == format!("{family}_total"),
                ("histogram", _) => {
                    (name == format!("{family}_bucket") && labels.contains_key("le"))
                        || name == format!("{family}_sum")
                        || name == format!("{family}_count")
                }
                _ => name == family,
            };
            if !ok {
                return Err(format!(
                    "sample {name} outside its family {family} ({kind})"
                ));
            }
            if !series.insert(format!("{name}{labels:?}")) {
                return Err(format!("duplicate series {line}"));
            }
            samples.push((name.to_owned(), labels, value));
        }
        Ok(samples)
    }

    fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
        samples.iter().find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
    }

    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        find(samples, name, labels)
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
    }

    fn exercised() -> Metrics {
        let m = Metrics::new();
        m.set_max_concurrent_reconciles(4);
        m.start_reconcile().finish(ReconcileResult::Success);
        m.start_reconcile().finish(ReconcileResult::Error);
        m.workqueue_add();
        m.workqueue_retry();
        m.set_workqueue_depth(3);
        m.observe_queue_duration(Duration::from_millis(2));
        m.set_leader("vapcheck", true);
        m.watch_failed(WatchRestartReason::Expired, "410 Gone");
        m.watch_status().succeeded();
        m.set_policy_states(
            PolicyKind::Validating,
            PolicyStateCounts {
                clean: 5,
                warnings: 1,
                partial: 0,
                failed: 0,
            },
        );
        m.set_policy_warnings(PolicyKind::Validating, "demo-policy", 2);
        m.set_policy_runtime_errors(PolicyKind::Validating, "demo-policy", 1);
        m.set_policy_rejected_on_create(PolicyKind::Validating, "demo-policy", true);
        m.set_policy_states(
            PolicyKind::Mutating,
            PolicyStateCounts {
                warnings: 3,
                ..PolicyStateCounts::default()
            },
        );
        m.set_policy_warnings(PolicyKind::Mutating, "demo-policy", 4);
        m.observe_typecheck(Duration::from_millis(3));
        m.kinds_skipped(SkipReason::KindLimit, 2);
        m.schema_fetch(SchemaFetchResult::Success);
        m.set_schema_cache_kinds(42);
        m.status_write(StatusWriteResult::Success);
        m.observe_request("GET", "200", "list", "10.0.0.1", Duration::from_millis(7));
        m
    }

    /// The families of issue 8 under their final exposed names (classic text).
    const EXPECTED_FAMILIES: &[(&str, &str)] = &[
        ("controller_runtime_reconcile_total", "counter"),
        ("controller_runtime_reconcile_errors_total", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
        ("controller_runtime_active_workers", "gauge"),
        ("controller_runtime_max_concurrent_reconciles", "gauge"),
        ("workqueue_depth", "gauge"),
        ("workqueue_adds_total", "counter"),
        ("workqueue_retries_total", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("leader_election_master_status", "gauge"),
        ("rest_client_requests_total", "counter"),
        ("rest_client_request_duration_seconds", "histogram"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("vapcheck_policies", "gauge"),
        ("vapcheck_bindings", "gauge"),
        ("vapcheck_policy_expression_warnings", "gauge"),
        ("vapcheck_policy_runtime_errors", "gauge"),
        ("vapcheck_policy_rejected_on_create", "gauge"),
        ("vapcheck_typecheck_duration_seconds", "histogram"),
        ("vapcheck_cel_estimated_cost", "histogram"),
        ("vapcheck_kinds_skipped_total", "counter"),
        ("vapcheck_schema_fetches_total", "counter"),
        ("vapcheck_schema_cache_kinds", "gauge"),
        ("vapcheck_status_writes_total", "counter"),
        ("vapcheck_watch_restarts_total", "counter"),
        ("vapcheck_watch_forbidden", "gauge"),
        ("vapcheck_watch_seconds_since_last_success", "gauge"),
        ("vapcheck_watch_last_success_timestamp_seconds", "gauge"),
        ("vapcheck_build_info", "gauge"),
    ];

    #[test]
    fn classic_text_has_exactly_the_expected_families() {
        let text = exercised().encode_prometheus_text();
        parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let declared: BTreeSet<(String, String)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, k)| (n.to_owned(), k.to_owned()))
            .collect();
        let expected: BTreeSet<(String, String)> = EXPECTED_FAMILIES
            .iter()
            .map(|(n, k)| ((*n).to_owned(), (*k).to_owned()))
            .collect();
        assert_eq!(declared, expected, "\n{text}");
        // HELP names match TYPE names in classic text.
        for line in text.lines().filter_map(|l| l.strip_prefix("# HELP ")) {
            let name = line.split(' ').next().unwrap_or("");
            assert!(declared.iter().any(|(n, _)| n == name), "HELP for {name}");
        }
    }

    #[test]
    fn metrics_doc_lists_every_family() {
        let doc =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
                .unwrap_or_default();
        for (family, _) in EXPECTED_FAMILIES {
            assert!(
                doc.contains(&format!("| `{family}` |")),
                "docs/metrics.md lacks a row for {family}"
            );
        }
    }

    #[test]
    fn openmetrics_parses_and_names_counters_with_total() {
        let text = exercised().encode_openmetrics();
        let samples =
            parse_exposition(&text, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let names: BTreeSet<&str> = samples.iter().map(|s| s.0.as_str()).collect();
        for (family, kind) in EXPECTED_FAMILIES {
            let sample = if *kind == "histogram" {
                format!("{family}_count")
            } else {
                (*family).to_owned()
            };
            assert!(names.contains(sample.as_str()), "missing {sample}\n{text}");
        }
        assert!(!text.contains("_total_total"));
        assert!(!text.contains("# UNIT"));
    }

    #[test]
    fn values_are_exposed_with_their_labels() {
        let m = exercised();
        let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
            .unwrap_or_else(|e| panic!("{e}"));
        let c = ("controller", "vapcheck");
        let total = "controller_runtime_reconcile_total";
        assert_eq!(value(&s, total, &[c, ("result", "success")]), 1.0);
        assert_eq!(value(&s, total, &[c, ("result", "error")]), 1.0);
        assert_eq!(value(&s, total, &[c, ("result", "requeue")]), 0.0);
        assert_eq!(
            value(&s, "controller_runtime_reconcile_errors_total", &[c]),
            1.0
        );
        assert_eq!(
            value(&s, "controller_runtime_reconcile_time_seconds_count", &[c]),
            2.0
        );
        let buckets = s
            .iter()
            .filter(|x| x.0 == "controller_runtime_reconcile_time_seconds_bucket")
            .count();
        assert_eq!(
            buckets,
            RECONCILE_TIME_BUCKETS.len() + 1,
            "40 buckets and +Inf"
        );
        assert_eq!(value(&s, "controller_runtime_active_workers", &[c]), 0.0);
        assert_eq!(
            value(&s, "controller_runtime_max_concurrent_reconciles", &[c]),
            4.0
        );
        let wq = [("name", "vapcheck"), c];
        assert_eq!(value(&s, "workqueue_depth", &wq), 3.0);
        assert_eq!(value(&s, "workqueue_adds_total", &wq), 1.0);
        assert_eq!(value(&s, "workqueue_retries_total", &wq), 1.0);
        assert_eq!(
            value(&s, "workqueue_queue_duration_seconds_count", &wq),
            1.0
        );
        assert_eq!(value(&s, "workqueue_work_duration_seconds_count", &wq), 2.0);
        assert_eq!(
            value(&s, "leader_election_master_status", &[("name", "vapcheck")]),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "rest_client_requests_total",
                &[("code", "200"), ("method", "GET"), ("host", "10.0.0.1")]
            ),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "rest_client_request_duration_seconds_count",
                &[("verb", "list"), ("host", "10.0.0.1")]
            ),
            1.0
        );
        let vap = ("kind", "ValidatingAdmissionPolicy");
        let map = ("kind", "MutatingAdmissionPolicy");
        assert_eq!(
            value(&s, "vapcheck_policies", &[vap, ("state", "clean")]),
            5.0
        );
        assert_eq!(
            value(&s, "vapcheck_policies", &[vap, ("state", "warnings")]),
            1.0
        );
        assert_eq!(
            value(&s, "vapcheck_policies", &[vap, ("state", "partial")]),
            0.0
        );
        assert_eq!(
            value(&s, "vapcheck_policies", &[vap, ("state", "failed")]),
            0.0
        );
        assert_eq!(
            value(&s, "vapcheck_policies", &[map, ("state", "warnings")]),
            3.0
        );
        assert_eq!(
            value(&s, "vapcheck_policies", &[map, ("state", "clean")]),
            0.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_policy_expression_warnings",
                &[vap, ("policy", "demo-policy")]
            ),
            2.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_policy_expression_warnings",
                &[map, ("policy", "demo-policy")]
            ),
            4.0
        );
        assert_eq!(
            value(&s, "vapcheck_typecheck_duration_seconds_count", &[]),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_kinds_skipped_total",
                &[("reason", "kind_limit")]
            ),
            2.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_schema_fetches_total",
                &[("result", "success")]
            ),
            1.0
        );
        assert_eq!(value(&s, "vapcheck_schema_cache_kinds", &[]), 42.0);
        assert_eq!(
            value(&s, "vapcheck_status_writes_total", &[("result", "success")]),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_build_info",
                &[
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("kubernetes", crate::KUBERNETES_VERSION)
                ]
            ),
            1.0
        );
        assert!(value(&s, "process_resident_memory_bytes", &[]) > 0.0);
        assert!(value(&s, "process_start_time_seconds", &[]) > 1.6e9);
        assert!(value(&s, "process_open_fds", &[]) >= 1.0);
        assert!(value(&s, "process_cpu_seconds_total", &[]) >= 0.0);
    }

    #[test]
    fn estimated_costs_are_observed_per_expression_and_kind() {
        use crate::policy::cost::{CostOutcome, analyze};
        use crate::policy::{ExpressionField, Gvk};
        let m = Metrics::new();
        let outcome = |max| CostOutcome {
            min: 1,
            max,
            unbounded: Vec::new(),
        };
        let cost = analyze(vec![
            (
                ExpressionField::ValidationExpression(0),
                Gvk::new("", "v1", "Pod").into(),
                outcome(5),
            ),
            (
                ExpressionField::ValidationExpression(0),
                Gvk::new("", "v1", "Service").into(),
                outcome(5),
            ),
            (
                ExpressionField::ValidationExpression(1),
                Gvk::new("", "v1", "Pod").into(),
                outcome(7_340_029),
            ),
        ]);
        m.observe_estimated_costs(&cost);
        let text = m.encode_prometheus_text();
        let s = parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(value(&s, "vapcheck_cel_estimated_cost_count", &[]), 3.0);
        assert_eq!(
            value(&s, "vapcheck_cel_estimated_cost_bucket", &[("le", "10.0")]),
            2.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_cel_estimated_cost_bucket",
                &[("le", "1000000.0")]
            ),
            2.0
        );
        assert_eq!(
            value(
                &s,
                "vapcheck_cel_estimated_cost_bucket",
                &[("le", "10000000.0")]
            ),
            3.0
        );
    }

    #[test]
    fn deleted_policy_series_is_removed() {
        let m = Metrics::new();
        m.set_policy_warnings(PolicyKind::Validating, "a", 1);
        m.set_policy_warnings(PolicyKind::Validating, "b", 0);
        // A MAP of the same name is another series.
        m.set_policy_warnings(PolicyKind::Mutating, "a", 2);
        m.remove_policy(PolicyKind::Validating, "a");
        let text = m.encode_prometheus_text();
        assert!(
            !text.contains("kind=\"ValidatingAdmissionPolicy\",policy=\"a\""),
            "{text}"
        );
        assert!(
            text.contains("vapcheck_policy_expression_warnings{kind=\"ValidatingAdmissionPolicy\",policy=\"b\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("vapcheck_policy_expression_warnings{kind=\"MutatingAdmissionPolicy\",policy=\"a\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.set_leader("we\"ird\\name", false);
        let text = m.encode_prometheus_text();
        let s = parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            value(
                &s,
                "leader_election_master_status",
                &[("name", "we\"ird\\name")]
            ),
            0.0
        );
    }

    #[test]
    fn accept_header_selects_the_format() {
        let m = Metrics::new();
        let (ct, body) = m.encode_for_accept(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        ));
        assert_eq!(ct, OPENMETRICS_CONTENT_TYPE);
        assert!(body.ends_with("# EOF\n"));
        let (ct, body) = m.encode_for_accept(Some("text/plain"));
        assert_eq!(ct, PROMETHEUS_TEXT_CONTENT_TYPE);
        assert!(!body.contains("# EOF"));
        assert_eq!(m.encode_for_accept(None).0, PROMETHEUS_TEXT_CONTENT_TYPE);
    }

    #[test]
    fn guard_dropped_without_finish_releases_the_worker() {
        let m = Metrics::new();
        let g1 = m.start_reconcile();
        let g2 = m.start_reconcile();
        let text = m.encode_prometheus_text();
        assert!(text.contains("controller_runtime_active_workers{controller=\"vapcheck\"} 2"));
        drop(g1);
        g2.finish(ReconcileResult::RequeueAfter);
        let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            value(
                &s,
                "controller_runtime_active_workers",
                &[("controller", "vapcheck")]
            ),
            0.0
        );
        assert_eq!(
            value(
                &s,
                "controller_runtime_reconcile_total",
                &[("result", "requeue_after")]
            ),
            1.0
        );
    }

    #[test]
    fn proc_stat_parsing() {
        // proc(5) layout; the command contains a space and a parenthesis.
        let stat = "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                    4 0 1000 123456789 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let (cpu, rss, start) =
            parse_proc_stat(stat, 100.0, 4096, 1_700_000_000).unwrap_or((0.0, 0, 0.0));
        assert_eq!(cpu, 3.0);
        assert_eq!(rss, 300 * 4096);
        assert_eq!(start, 1_700_000_010.0);
        assert_eq!(parse_proc_stat("garbage", 100.0, 4096, 0), None);
        assert_eq!(parse_proc_stat("1 (x) S 1 2", 100.0, 4096, 0), None);
        assert_eq!(
            parse_boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        assert_eq!(parse_boot_time("cpu 1 2\n"), None);
    }

    #[test]
    fn process_stats_are_read_on_linux() {
        if !Path::new("/proc/self/stat").exists() {
            eprintln!("skipped: no /proc on this system");
            return;
        }
        let stats = read_process_stats().unwrap_or_else(|| panic!("/proc/self readable"));
        assert!(stats.resident_bytes > 0);
        assert!(stats.open_fds > 0);
    }

    use std::path::Path;

    fn fake_response(status: u16) -> http::Response<String> {
        http::Response::builder()
            .status(status)
            .body(String::new())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn layer_counts_requests_against_a_fake_service() {
        use tower::{Layer, ServiceExt};
        let m = Metrics::new();
        let layer = m.rest_client_layer("apiserver.example");
        let svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
            if req.uri().path() == "/fail" {
                Err::<http::Response<String>, std::io::Error>(std::io::Error::other("refused"))
            } else if req.uri().path() == "/missing" {
                Ok(fake_response(404))
            } else {
                Ok(fake_response(200))
            }
        }));
        let mut tagged = http::Request::get("/apis/x").body(()).unwrap_or_default();
        tagged.extensions_mut().insert::<&'static str>("list");
        assert!(svc.clone().oneshot(tagged).await.is_ok());
        let untagged = http::Request::get("/missing").body(()).unwrap_or_default();
        assert!(svc.clone().oneshot(untagged).await.is_ok());
        let with_host = http::Request::patch("https://10.1.2.3:6443/fail")
            .body(())
            .unwrap_or_default();
        assert!(svc.clone().oneshot(with_host).await.is_err());

        let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
            .unwrap_or_else(|e| panic!("{e}"));
        let h = ("host", "apiserver.example");
        let r = "rest_client_requests_total";
        assert_eq!(value(&s, r, &[("code", "200"), ("method", "GET"), h]), 1.0);
        assert_eq!(value(&s, r, &[("code", "404"), ("method", "GET"), h]), 1.0);
        assert_eq!(
            value(
                &s,
                r,
                &[
                    ("code", "<error>"),
                    ("method", "PATCH"),
                    ("host", "10.1.2.3")
                ]
            ),
            1.0
        );
        let d = "rest_client_request_duration_seconds_count";
        assert_eq!(value(&s, d, &[("verb", "list"), h]), 1.0);
        assert_eq!(
            value(&s, d, &[("verb", "get"), h]),
            1.0,
            "untagged falls back to the method"
        );
        assert_eq!(
            value(&s, d, &[("verb", "patch"), ("host", "10.1.2.3")]),
            1.0
        );
    }

    #[tokio::test]
    async fn layer_fits_a_kube_client_and_sees_kube_verbs() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let m = Metrics::new();
        let fake = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
            let body = if req.uri().path().ends_with("/configmaps") {
                r#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[]}"#
            } else {
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#
            };
            let status = if req.uri().path().ends_with("/configmaps") {
                200
            } else {
                404
            };
            http::Response::builder()
                .status(status)
                .body(kube::client::Body::from(body.as_bytes().to_vec()))
                .map_err(|e| std::io::Error::other(e.to_string()))
        });
        let client = kube::client::ClientBuilder::new(fake, "default")
            .with_layer(&m.rest_client_layer("fake-apiserver"))
            .build();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
        assert!(api.list(&Default::default()).await.is_ok());
        assert!(api.get("nope").await.is_err());
        let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
            .unwrap_or_else(|e| panic!("{e}"));
        let h = ("host", "fake-apiserver");
        let d = "rest_client_request_duration_seconds_count";
        assert_eq!(value(&s, d, &[("verb", "list"), h]), 1.0);
        assert_eq!(value(&s, d, &[("verb", "get"), h]), 1.0);
        let r = "rest_client_requests_total";
        assert_eq!(value(&s, r, &[("code", "404"), ("method", "GET"), h]), 1.0);
    }

    #[test]
    fn conversion_handles_every_openmetrics_type() {
        let om = "# HELP a_thing Some help.\n# TYPE a_thing counter\n# UNIT a_thing seconds\na_thing_total 1\n\
                  # HELP b Info.\n# TYPE b info\nb_info{v=\"1\"} 1\n# TYPE c unknown\nc 2\n# EOF\n";
        let classic = openmetrics_to_prometheus_text(om);
        assert_eq!(
            classic,
            "# HELP a_thing_total Some help.\n# TYPE a_thing_total counter\na_thing_total 1\n\
             # HELP b_info Info.\n# TYPE b_info gauge\nb_info{v=\"1\"} 1\n# TYPE c untyped\nc 2\n"
        );
        parse_exposition(&classic, Format::Classic).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn strict_parser_rejects_bad_input() {
        for bad in [
            "foo 1\n",                           // sample before TYPE
            "# TYPE foo counter\nfoo_total 1\n", // OpenMetrics counter name in classic text
            "# TYPE foo gauge\nfoo{a=\"x} 1\n",  // unterminated label
            "# TYPE foo gauge\nfoo 1\nfoo 2\n",  // duplicate series
            "# TYPE foo info\nfoo 1\n",          // type classic text does not know
            "# TYPE foo gauge\nbar 1\n",         // sample outside its family
            "# TYPE foo gauge\nfoo one\n",       // bad value
            "# EOF\n",                           // OpenMetrics-only comment
        ] {
            assert!(parse_exposition(bad, Format::Classic).is_err(), "{bad}");
        }
        assert!(
            parse_exposition("# TYPE foo counter\nfoo_total 1\n", Format::OpenMetrics).is_err()
        );
    }
}
