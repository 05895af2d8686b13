//! Which policies need no new check when they are reconciled again.
//!
//! Every relist of the policy watch (after a 410, or when a replica leads again after losing
//! its lease) reconciles every policy, and a check costs about a millisecond per policy: with
//! 5,000 policies the policies that really changed waited behind 15 to 25 s of checks that
//! could only repeat the last result (`e2e/bench/recovery 5000 10`). A check's result depends
//! on the policy object and on inputs (schemas, bindings, params) whose changes reach the
//! controller as re-check triggers, so a policy needs no new check when
//! - its `metadata.resourceVersion` is the one vapcheck last checked or wrote (the API server
//!   changes it on every change to the object, status and metadata included),
//! - no trigger for it was sent since that check started, and
//! - that check is younger than half the re-check period (the periodic re-check, vapcheck's
//!   safety net for changes no trigger reports, always checks again).
//!
//! Triggers are counted where they are sent (`Context::trigger`), not where the running
//! controller receives them: a replica that lost its lease receives nothing, and must still
//! check again what changed meanwhile once it leads again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The last check of each policy and the triggers sent for it.
#[derive(Debug, Default)]
pub struct CheckMemo {
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
    /// Triggers sent for the policy since vapcheck first reconciled it.
    triggers: u64,
    checked: Option<Checked>,
}

#[derive(Debug)]
struct Checked {
    resource_version: Box<str>,
    /// `Entry::triggers` when that check started.
    triggers: u64,
    at: Instant,
}

/// A check in progress: what [`CheckMemo::record`] needs when it ends.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    triggers: u64,
    at: Instant,
}

impl CheckMemo {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A re-check trigger was sent for `name`: its last check no longer counts.
    pub fn triggered(&self, name: &str) {
        if let Some(e) = self.entries().get_mut(name) {
            e.triggers += 1;
        }
    }

    /// Whether the policy `name` at `resource_version` needs no new check (module docs);
    /// `max_age` is how long a check counts (`None`: until a trigger or a change).
    pub fn fresh(
        &self,
        name: &str,
        resource_version: Option<&str>,
        max_age: Option<Duration>,
        now: Instant,
    ) -> bool {
        let Some(rv) = resource_version.filter(|rv| !rv.is_empty()) else {
            return false;
        };
        let entries = self.entries();
        let Some(entry) = entries.get(name) else {
            return false;
        };
        entry.checked.as_ref().is_some_and(|c| {
            &*c.resource_version == rv
                && c.triggers == entry.triggers
                && max_age.is_none_or(|max| now.saturating_duration_since(c.at) < max)
        })
    }

    /// A check of `name` starts now.
    pub fn start(&self, name: &str, now: Instant) -> Started {
        let mut entries = self.entries();
        let entry = entries.entry(name.to_owned()).or_default();
        Started {
            triggers: entry.triggers,
            at: now,
        }
    }

    /// The check `started` found the policy up to date at `resource_version`, or wrote it and
    /// the API server answered with `resource_version`.
    pub fn record(&self, name: &str, resource_version: Option<&str>, started: Started) {
        let mut entries = self.entries();
        let entry = entries.entry(name.to_owned()).or_default();
        entry.checked = resource_version
            .filter(|rv| !rv.is_empty())
            .map(|rv| Checked {
                resource_version: rv.into(),
                triggers: started.triggers,
                at: started.at,
            });
    }

    /// The last check of `name` no longer counts (it failed, or it did not end in a status
    /// vapcheck saw).
    pub fn clear(&self, name: &str) {
        if let Some(e) = self.entries().get_mut(name) {
            e.checked = None;
        }
    }

    /// Keeps only the policies `present` accepts (the others were deleted).
    pub fn retain(&self, present: impl Fn(&str) -> bool) {
        self.entries().retain(|name, _| present(name));
    }

    /// How many policies have an entry.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no policy has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Option<Duration> = Some(Duration::from_secs(3600));

    #[test]
    fn a_recorded_check_counts_until_the_object_changes() {
        let memo = CheckMemo::default();
        let t0 = Instant::now();
        assert!(!memo.fresh("p", Some("10"), HOUR, t0), "never checked");
        let s = memo.start("p", t0);
        memo.record("p", Some("10"), s);
        assert!(memo.fresh("p", Some("10"), HOUR, t0));
        assert!(!memo.fresh("p", Some("11"), HOUR, t0), "the object changed");
        assert!(!memo.fresh("q", Some("10"), HOUR, t0), "another policy");
        assert!(!memo.fresh("p", None, HOUR, t0), "no resourceVersion");
        assert!(!memo.fresh("p", Some(""), HOUR, t0));
    }

    #[test]
    fn a_trigger_sent_during_or_after_a_check_voids_it() {
        let memo = CheckMemo::default();
        let t0 = Instant::now();
        let s = memo.start("p", t0);
        memo.record("p", Some("10"), s);
        memo.triggered("p");
        assert!(!memo.fresh("p", Some("10"), HOUR, t0), "triggered after");

        // Triggered while the check ran: the check may have read the old inputs.
        let s = memo.start("p", t0);
        memo.triggered("p");
        memo.record("p", Some("10"), s);
        assert!(!memo.fresh("p", Some("10"), HOUR, t0), "triggered during");

        // The next check, with no trigger meanwhile, counts again.
        let s = memo.start("p", t0);
        memo.record("p", Some("10"), s);
        assert!(memo.fresh("p", Some("10"), HOUR, t0));
    }

    #[test]
    fn a_check_expires_after_max_age() {
        let memo = CheckMemo::default();
        let t0 = Instant::now();
        let s = memo.start("p", t0);
        memo.record("p", Some("10"), s);
        let max = Some(Duration::from_secs(300));
        assert!(memo.fresh("p", Some("10"), max, t0 + Duration::from_secs(299)));
        assert!(!memo.fresh("p", Some("10"), max, t0 + Duration::from_secs(300)));
        assert!(memo.fresh("p", Some("10"), None, t0 + Duration::from_secs(86_400)));
    }

    #[test]
    fn clearing_and_forgetting() {
        let memo = CheckMemo::default();
        let t0 = Instant::now();
        for name in ["p", "q"] {
            let s = memo.start(name, t0);
            memo.record(name, Some("10"), s);
        }
        memo.clear("p");
        assert!(!memo.fresh("p", Some("10"), HOUR, t0));
        let s = memo.start("q", t0);
        memo.record("q", None, s);
        assert!(
            !memo.fresh("q", Some("10"), HOUR, t0),
            "recorded without a version"
        );
        memo.retain(|n| n == "q");
        assert_eq!(memo.len(), 1);
        memo.retain(|_| false);
        assert!(memo.is_empty());
        // A trigger for a policy never reconciled leaves nothing behind.
        memo.triggered("r");
        assert!(memo.is_empty());
    }
}
