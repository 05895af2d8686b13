//! The health of the policy list/watch: [`WatchStatus`] (shared with readiness) and the
//! `vapcheck_watch_*` families.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::{Metrics, WatchRestartReason};

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

/// The `resource` label of the bindings in `vapcheck_watch_forbidden`.
pub const BINDINGS_RESOURCE: &str =
    "validatingadmissionpolicybindings.admissionregistration.k8s.io";

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WatchRestartLabels {
    reason: WatchRestartReason,
}

/// The watch families and the status their time-dependent series are read from.
#[derive(Debug, Clone)]
pub(super) struct WatchMetrics {
    restarts: Family<WatchRestartLabels, Counter>,
    forbidden: Family<ResourceLabels, Gauge>,
    pub(super) status: WatchStatus,
}

impl WatchMetrics {
    /// Registers the families in `r` (the time-dependent ones as a collector, encoded after
    /// every family), with zero-valued restart series and the bindings' forbidden series.
    pub(super) fn register(r: &mut Registry) -> Self {
        let m = WatchMetrics {
            restarts: Family::default(),
            forbidden: Family::default(),
            status: WatchStatus::default(),
        };
        r.register(
            "vapcheck_watch_restarts",
            "Number of times the ValidatingAdmissionPolicy list/watch failed and was restarted, by reason",
            m.restarts.clone(),
        );
        r.register(
            "vapcheck_watch_forbidden",
            "1 while the API server refuses (403) vapcheck's list/watch of the resource (the bindings, a param kind), else 0",
            m.forbidden.clone(),
        );
        r.register_collector(Box::new(WatchCollector {
            status: m.status.clone(),
        }));
        for &reason in WatchRestartReason::ALL {
            drop(m.restarts.get_or_create(&WatchRestartLabels { reason }));
        }
        // The bindings are always watched: their series exists from start-up.
        m.forbidden
            .get_or_create(&ResourceLabels {
                resource: BINDINGS_RESOURCE.to_owned(),
            })
            .set(0);
        m
    }
}

impl Metrics {
    /// The health of the policy list/watch, shared with readiness.
    pub fn watch_status(&self) -> &WatchStatus {
        &self.watch.status
    }

    /// Counts one failure of the policy list/watch (the watcher retries after its backoff).
    pub fn watch_failed(&self, reason: WatchRestartReason, error: &str) {
        self.watch
            .restarts
            .get_or_create(&WatchRestartLabels { reason })
            .inc();
        self.watch.status.failed(error);
    }

    /// Sets `vapcheck_watch_forbidden{resource}`: whether the API server refuses (403) the
    /// list/watch of `resource` (plural.group, or the plural for the core group).
    pub fn set_watch_forbidden(&self, resource: &str, forbidden: bool) {
        self.watch
            .forbidden
            .get_or_create(&ResourceLabels {
                resource: resource.to_owned(),
            })
            .set(i64::from(forbidden));
    }
}

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
