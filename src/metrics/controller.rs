//! controller-runtime's families: reconciles, the work queue and leader election, under
//! controller-runtime's names and HELP texts so its dashboards and alerts work.

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Metrics, ReconcileResult, histogram_family};

/// The `controller` label value of every controller-runtime family.
pub const CONTROLLER_NAME: &str = "vapcheck";

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets
/// (controller-runtime pkg/internal/controller/metrics/metrics.go).
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

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

const C: ControllerLabels = ControllerLabels {
    controller: CONTROLLER_NAME,
};
const WQ: WorkqueueLabels = WorkqueueLabels {
    name: CONTROLLER_NAME,
    controller: CONTROLLER_NAME,
};

fn workqueue_buckets() -> impl Iterator<Item = f64> {
    // controller-runtime pkg/metrics/workqueue.go: ExponentialBuckets(10e-9, 10, 12).
    exponential_buckets(1e-8, 10.0, 12)
}

/// The reconcile, work queue and leader election families.
#[derive(Debug, Clone)]
pub(super) struct ControllerMetrics {
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
}

impl ControllerMetrics {
    /// Registers the families in `r`, with the zero-valued series dashboards expect before the
    /// first event.
    pub(super) fn register(r: &mut Registry) -> Self {
        let m = ControllerMetrics {
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
        };
        m.register_families(r);
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
        m
    }

    fn register_families(&self, r: &mut Registry) {
        r.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconcile_total.clone(),
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        r.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        r.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.wq_depth.clone(),
        );
        r.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.wq_adds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.wq_retries.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.wq_queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.wq_work_duration.clone(),
        );
        r.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
            self.leader.clone(),
        );
    }
}

impl Metrics {
    // ---- controller-runtime families ----

    /// Records the configured worker count (`controller_runtime_max_concurrent_reconciles`).
    pub fn set_max_concurrent_reconciles(&self, n: u16) {
        self.controller
            .max_concurrent
            .get_or_create(&C)
            .set(i64::from(n));
    }

    /// Starts timing one reconcile and counts an active worker until the guard is finished
    /// or dropped. A guard dropped without [`ReconcileGuard::finish`] (e.g. a cancelled
    /// future) records nothing but the worker count.
    pub fn start_reconcile(&self) -> ReconcileGuard {
        self.controller.active_workers.get_or_create(&C).inc();
        ReconcileGuard {
            metrics: self.clone(),
            started: Instant::now(),
        }
    }

    /// Records one finished reconcile that was timed elsewhere.
    pub fn observe_reconcile(&self, result: ReconcileResult, duration: Duration) {
        self.controller
            .reconcile_total
            .get_or_create(&ReconcileLabels {
                controller: CONTROLLER_NAME,
                result,
            })
            .inc();
        if result == ReconcileResult::Error {
            self.controller.reconcile_errors.get_or_create(&C).inc();
        }
        self.controller
            .reconcile_time
            .get_or_create(&C)
            .observe(duration.as_secs_f64());
    }

    // ---- workqueue families ----

    /// An item was added to the work queue (`workqueue_adds_total`).
    pub fn workqueue_add(&self) {
        self.controller.wq_adds.get_or_create(&WQ).inc();
    }

    /// An item was re-queued after a failure (`workqueue_retries_total`).
    pub fn workqueue_retry(&self) {
        self.controller.wq_retries.get_or_create(&WQ).inc();
    }

    /// Current number of items waiting (`workqueue_depth`).
    pub fn set_workqueue_depth(&self, depth: usize) {
        self.controller
            .wq_depth
            .get_or_create(&WQ)
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Time an item waited between being queued and being picked up.
    pub fn observe_queue_duration(&self, waited: Duration) {
        self.controller
            .wq_queue_duration
            .get_or_create(&WQ)
            .observe(waited.as_secs_f64());
    }

    /// Time processing one item took.
    pub fn observe_work_duration(&self, took: Duration) {
        self.controller
            .wq_work_duration
            .get_or_create(&WQ)
            .observe(took.as_secs_f64());
    }

    // ---- leader election ----

    /// 1 while this replica holds the lease `lease_name`, else 0.
    pub fn set_leader(&self, lease_name: &str, leading: bool) {
        self.controller
            .leader
            .get_or_create(&LeaseLabels {
                name: lease_name.to_owned(),
            })
            .set(i64::from(leading));
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
        self.metrics
            .controller
            .active_workers
            .get_or_create(&C)
            .dec();
    }
}
