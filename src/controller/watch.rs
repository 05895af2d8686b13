//! The backoff of the policy watch, and how its errors are classified.
//!
//! kube-runtime's `DefaultBackoff` (client-go's reflector numbers: 800 ms doubling to 30 s,
//! reset only after 120 s without an error) is kind to a struggling API server, but after a
//! few API server restarts in a row it leaves the watch asleep for up to 30 s after the server
//! is back, and in a `Controller` the same backoff also pauses the re-check triggers. vapcheck
//! is one client with one watch, so it retries sooner: [`WatchBackoff`] starts at 250 ms,
//! doubles, and never waits more than [`WATCH_BACKOFF_MAX`] (with jitter below it). The
//! stream resets it on every successful item (`StreamBackoff`).

use std::time::Duration;

use kube::runtime::utils::Backoff;
use kube::runtime::watcher;

/// The first pause after a list or watch failure.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(250);

/// The longest pause between two list or watch attempts.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Exponential backoff from [`WATCH_BACKOFF_MIN`] to [`WATCH_BACKOFF_MAX`]; each pause is
/// shortened by a random 0–25 % so that replicas do not retry in lockstep.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
    seed: u64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id()).rotate_left(32);
        WatchBackoff {
            next: WATCH_BACKOFF_MIN,
            seed: seed | 1,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let pause = jittered(self.next, &mut self.seed);
        self.next = (self.next * 2).min(WATCH_BACKOFF_MAX);
        Some(pause)
    }
}

/// `pause` less a random part of up to a quarter, drawn from `seed` (xorshift64: enough
/// randomness to keep retries apart), which it advances.
pub(crate) fn jittered(pause: Duration, seed: &mut u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    let jitter = (*seed % 1000) as f64 / 1000.0 * 0.25;
    pause.mul_f64(1.0 - jitter)
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_BACKOFF_MIN;
    }
}

/// Whether the watcher failed because its resource version expired (410 Gone); it lists
/// again on its next step.
pub fn is_expired(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::InitialListFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_the_cap_and_resets() {
        let mut b = WatchBackoff::default();
        let pauses: Vec<Duration> = (&mut b).take(20).collect();
        assert!(pauses[0] <= WATCH_BACKOFF_MIN && pauses[0] >= WATCH_BACKOFF_MIN.mul_f64(0.75));
        assert!(pauses.iter().all(|p| *p <= WATCH_BACKOFF_MAX), "{pauses:?}");
        assert!(
            pauses[10..]
                .iter()
                .all(|p| *p >= WATCH_BACKOFF_MAX.mul_f64(0.75)),
            "{pauses:?}"
        );
        // Five restarts in a row never add up to a long sleep: the sum of the first 20
        // pauses is bounded by 20 × the cap.
        assert!(pauses.iter().sum::<Duration>() <= WATCH_BACKOFF_MAX * 20);
        b.reset();
        assert!(b.next().is_some_and(|p| p <= WATCH_BACKOFF_MIN));
    }

    #[test]
    fn expired_means_410() {
        let status = |code: u16| kube::core::Status {
            code,
            ..kube::core::Status::default()
        };
        assert!(is_expired(&watcher::Error::WatchError(Box::new(status(
            410
        )))));
        assert!(!is_expired(&watcher::Error::WatchError(Box::new(status(
            500
        )))));
        assert!(is_expired(&watcher::Error::WatchStartFailed(
            kube::Error::Api(Box::new(status(410)))
        )));
        assert!(!is_expired(&watcher::Error::NoResourceVersion));
    }
}
