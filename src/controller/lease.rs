//! Leader election on a `coordination.k8s.io/v1` Lease, with a write fence.
//!
//! The algorithm is client-go's (`tools/leaderelection`): every attempt reads the Lease; it is
//! taken or renewed with an update that carries the `resourceVersion` it read (so two
//! replicas never both win), and another holder's lease counts as expired only after this
//! replica has seen the same record, unchanged, for `leaseDurationSeconds` on its own
//! monotonic clock (so clock skew between replicas does not matter).
//!
//! What this adds over a plain "am I the holder" flag is the [`Fence`]: the leader may write
//! only until `start of its last successful renewal + leaseDuration - renewDeadline / 2`. A
//! standby can take the lease no earlier than `leaseDuration` after it saw that renewal, which
//! is after the renewal request started, so a leader cut off from the API server stops
//! writing (at the latest `renewDeadline / 2` before) anyone else may start. Every status write
//! checks the fence ([`Fence::may_write`]); [`Elector::run`] also reports the loss on its
//! channel so that the controller is stopped.
//!
//! Retries are bounded: after an error the next attempt comes after at most
//! [`MAX_RETRY`], so when the API server is back the lease is renewed (or taken) within about
//! a second and the controller restarts with a fresh list.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// The longest pause between two attempts after an error.
pub const MAX_RETRY: Duration = Duration::from_secs(1);

/// The longest pause between two looks at a lease another replica holds.
pub const STANDBY_POLL: Duration = Duration::from_secs(2);

/// Until when this replica may write. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct Fence {
    inner: Arc<FenceInner>,
}

#[derive(Debug)]
struct FenceInner {
    base: Instant,
    /// Milliseconds after `base` until which writes are allowed; 0: not allowed;
    /// `u64::MAX`: always (leader election off).
    until_ms: AtomicU64,
}

impl Default for Fence {
    fn default() -> Self {
        Fence {
            inner: Arc::new(FenceInner {
                base: Instant::now(),
                until_ms: AtomicU64::new(0),
            }),
        }
    }
}

impl Fence {
    /// Writes allowed from now on, without a deadline (leader election disabled).
    pub fn allow_always(&self) {
        self.inner.until_ms.store(u64::MAX, Ordering::SeqCst);
    }

    /// Writes allowed until `deadline`.
    pub fn allow_until(&self, deadline: Instant) {
        if deadline <= Instant::now() {
            self.revoke();
            return;
        }
        let ms = deadline
            .saturating_duration_since(self.inner.base)
            .as_millis()
            .try_into()
            .unwrap_or(u64::MAX - 1);
        self.inner.until_ms.store(ms.max(1), Ordering::SeqCst);
    }

    /// No writes from now on.
    pub fn revoke(&self) {
        self.inner.until_ms.store(0, Ordering::SeqCst);
    }

    /// Whether a write may start now.
    pub fn may_write(&self) -> bool {
        self.remaining().is_some()
    }

    /// How long writes stay allowed (`Duration::MAX` without a deadline), `None` if they are
    /// not allowed now.
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.inner.until_ms.load(Ordering::SeqCst);
        if until == u64::MAX {
            return Some(Duration::MAX);
        }
        let now = u64::try_from(self.inner.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        (until > now).then(|| Duration::from_millis(until - now))
    }
}

/// Timing of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `leaseDurationSeconds` written into the Lease.
    pub lease_duration: Duration,
    /// How long before the lease expires the leader renews it.
    pub renew_deadline: Duration,
}

impl Timing {
    /// The pause between two renewals of a held lease.
    pub fn renew_interval(self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline)
    }

    /// How long after the start of a successful renewal the leader may write.
    pub fn fence(self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline / 2)
    }

    /// The pause between two looks at another replica's lease (client-go's retry period:
    /// a standby takes over at most this long after the lease expired).
    pub fn standby_poll(self) -> Duration {
        self.renew_interval().min(STANDBY_POLL)
    }

    /// The pause after an error.
    pub fn retry(self) -> Duration {
        self.renew_interval().min(MAX_RETRY)
    }
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Create it (it does not exist).
    Create,
    /// Write this replica's claim (free, expired, or already ours); `transition` when the
    /// holder changes.
    Claim { transition: bool },
    /// Another replica holds it and it has not expired.
    HeldByOther(String),
}

/// Decides from the Lease as read, and how long this replica has seen that very record
/// unchanged (`unchanged_for`).
pub fn decide(lease: Option<&LeaseSpec>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(spec) = lease else {
        return Decision::Create;
    };
    let holder = spec
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
        .map(str::to_owned);
    match holder {
        None => Decision::Claim { transition: false },
        Some(h) if h == identity => Decision::Claim { transition: false },
        Some(h) => {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(Duration::ZERO);
            if unchanged_for >= duration {
                Decision::Claim { transition: true }
            } else {
                Decision::HeldByOther(h)
            }
        }
    }
}

/// The spec this replica writes when it takes or renews the lease.
pub fn claim(
    old: Option<&LeaseSpec>,
    identity: &str,
    timing: Timing,
    transition: bool,
) -> LeaseSpec {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let ours = old
        .and_then(|s| s.holder_identity.as_deref())
        .is_some_and(|h| h == identity);
    let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(
            i32::try_from(timing.lease_duration.as_secs()).unwrap_or(i32::MAX),
        ),
        acquire_time: if ours {
            old.and_then(|s| s.acquire_time.clone())
                .or(Some(now.clone()))
        } else {
            Some(now.clone())
        },
        renew_time: Some(now),
        lease_transitions: Some(if transition {
            transitions.saturating_add(1)
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// One replica's elector.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    field_manager: String,
    timing: Timing,
    fence: Fence,
    /// The record last seen (resourceVersion) and since when it is unchanged.
    observed: Option<(String, Instant)>,
}

impl Elector {
    /// An elector for the Lease `name` in `api`'s namespace.
    pub fn new(
        api: Api<Lease>,
        name: &str,
        identity: &str,
        field_manager: &str,
        timing: Timing,
        fence: Fence,
    ) -> Elector {
        Elector {
            api,
            name: name.to_owned(),
            identity: identity.to_owned(),
            field_manager: field_manager.to_owned(),
            timing,
            fence,
            observed: None,
        }
    }

    /// One attempt to take or renew the lease: `Ok(true)` when this replica holds it now.
    async fn attempt(&mut self) -> Result<bool, kube::Error> {
        let read = self.api.get_opt(&self.name).await?;
        let spec = read.as_ref().and_then(|l| l.spec.clone());
        let rv = read
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone())
            .unwrap_or_default();
        let unchanged_for = match &self.observed {
            Some((seen, since)) if *seen == rv => since.elapsed(),
            _ => {
                self.observed = Some((rv.clone(), Instant::now()));
                Duration::ZERO
            }
        };
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        let decision = decide(spec.as_ref(), &self.identity, unchanged_for);
        let result = match decision {
            Decision::HeldByOther(holder) => {
                debug!(%holder, "the lease is held by another replica");
                return Ok(false);
            }
            Decision::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(claim(None, &self.identity, self.timing, false)),
                };
                self.api.create(&params, &lease).await
            }
            Decision::Claim { transition } => {
                let mut lease = read.unwrap_or_default();
                lease.metadata.managed_fields = None;
                lease.spec = Some(claim(
                    spec.as_ref(),
                    &self.identity,
                    self.timing,
                    transition,
                ));
                self.api.replace(&self.name, &params, &lease).await
            }
        };
        match result {
            Ok(stored) => {
                self.observed = stored
                    .metadata
                    .resource_version
                    .map(|rv| (rv, Instant::now()));
                Ok(true)
            }
            // Someone else wrote first (409 on update or create): not ours this time.
            Err(kube::Error::Api(s)) if s.is_conflict() || s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Runs until `leading` has no receivers any more, then releases the lease if held.
    /// Sends `true` on taking the lease and `false` on losing it (another holder, or no
    /// successful renewal before the fence ran out).
    pub async fn run(mut self, leading: watch::Sender<bool>) {
        let timing = self.timing;
        let timeout = timing
            .renew_interval()
            .clamp(Duration::from_millis(500), Duration::from_secs(5));
        loop {
            let started = Instant::now();
            let outcome = tokio::time::timeout(timeout, self.attempt()).await;
            let pause = match outcome {
                Ok(Ok(true)) => {
                    self.fence.allow_until(started + timing.fence());
                    leading.send_if_modified(|l| !std::mem::replace(l, true));
                    timing.renew_interval()
                }
                Ok(Ok(false)) => {
                    self.fence.revoke();
                    leading.send_if_modified(|l| std::mem::replace(l, false));
                    timing.standby_poll()
                }
                Ok(Err(e)) => {
                    warn!(error = %e, lease = %self.name, "reading or writing the lease failed; retrying");
                    timing.retry()
                }
                Err(_) => {
                    warn!(lease = %self.name, timeout = ?timeout, "the lease request timed out; retrying");
                    timing.retry()
                }
            };
            // Wake up when the fence runs out to report the loss at that very moment.
            let pause = match self.fence.remaining() {
                Some(left) if *leading.borrow() => pause.min(left),
                _ => pause,
            };
            tokio::select! {
                _ = leading.closed() => break,
                _ = tokio::time::sleep(pause) => {}
            }
            if *leading.borrow() && !self.fence.may_write() {
                warn!(lease = %self.name, "the lease was not renewed in time; this replica may have lost it");
                leading.send_if_modified(|l| std::mem::replace(l, false));
            }
        }
        self.release().await;
    }

    /// Gives the lease up if this replica holds it (so a standby takes over at once).
    async fn release(&mut self) {
        self.fence.revoke();
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let ours = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| h == self.identity);
        if !ours {
            return;
        }
        lease.metadata.managed_fields = None;
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        }
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        match self.api.replace(&self.name, &params, &lease).await {
            Ok(_) => info!(lease = %self.name, "released the lease"),
            Err(e) => warn!(error = %e, lease = %self.name, "releasing the lease failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(seconds),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "me", Duration::ZERO), Decision::Create);
        assert_eq!(
            decide(Some(&spec(None, 15)), "me", Duration::ZERO),
            Decision::Claim { transition: false }
        );
        assert_eq!(
            decide(Some(&spec(Some(""), 15)), "me", Duration::ZERO),
            Decision::Claim { transition: false }
        );
        assert_eq!(
            decide(Some(&spec(Some("me"), 15)), "me", Duration::ZERO),
            Decision::Claim { transition: false }
        );
        assert_eq!(
            decide(
                Some(&spec(Some("other"), 15)),
                "me",
                Duration::from_secs(14)
            ),
            Decision::HeldByOther("other".to_owned())
        );
        assert_eq!(
            decide(
                Some(&spec(Some("other"), 15)),
                "me",
                Duration::from_secs(15)
            ),
            Decision::Claim { transition: true }
        );
    }

    #[test]
    fn claim_keeps_acquire_time_and_counts_transitions() {
        let timing = Timing {
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(2),
        };
        let first = claim(None, "me", timing, false);
        assert_eq!(first.holder_identity.as_deref(), Some("me"));
        assert_eq!(first.lease_duration_seconds, Some(4));
        assert_eq!(first.lease_transitions, Some(0));
        let renewed = claim(Some(&first), "me", timing, false);
        assert_eq!(renewed.acquire_time, first.acquire_time);
        let taken = claim(Some(&first), "other", timing, true);
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.holder_identity.as_deref(), Some("other"));
    }

    #[test]
    fn timing_bounds() {
        let t = Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(5),
        };
        assert_eq!(t.renew_interval(), Duration::from_secs(10));
        // The fence ends after the next renewal is due and before anyone else can take over.
        assert!(t.fence() > t.renew_interval() && t.fence() < t.lease_duration);
        assert_eq!(t.retry(), MAX_RETRY);
        assert_eq!(t.standby_poll(), STANDBY_POLL);
    }

    #[test]
    fn fence_opens_and_closes() {
        let f = Fence::default();
        assert!(!f.may_write());
        f.allow_until(Instant::now() + Duration::from_secs(60));
        assert!(f.may_write());
        f.allow_until(Instant::now() - Duration::from_millis(1));
        assert!(!f.may_write());
        f.allow_always();
        assert_eq!(f.remaining(), Some(Duration::MAX));
        f.revoke();
        assert!(!f.may_write());
    }
}
