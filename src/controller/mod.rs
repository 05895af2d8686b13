//! `vapcheck controller`: the kube-runtime controller that keeps every
//! ValidatingAdmissionPolicy's status true. The imperative shell around [`crate::policy`].
//!
//! - [`run`] reconciles every `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy with
//!   [`crate::policy::check_policy`] over live inputs ([`inputs::LiveInputs`]) and writes the result with
//!   server-side apply on `/status` (field manager [`status::FIELD_MANAGER`]), skipping the
//!   write when the object already says the same.
//! - A poll task re-reads the OpenAPI index every `schemaPollInterval` and re-enqueues the
//!   policies a changed group-version can affect ([`index::TriggerIndex`]).
//! - With leader election only the Lease holder runs the controller.
//!
//! See `docs/controller.md`.

pub mod bindings;
#[cfg(test)]
mod corpus_support;
pub mod engines;
pub mod event_queue;
pub mod events;
#[cfg(test)]
mod findings_corpus;
pub mod index;
pub mod inputs;
pub mod lease;
pub mod memo;
pub mod mutating;
pub mod mutating_bindings;
mod reconcile;
pub mod reports;
mod runtime;
pub mod slim;
pub mod status;
pub mod stored;
pub mod suppression;
pub mod watch;
pub mod webhooks;

pub use reconcile::{WRITE_TIMEOUT, apply_status, backoff};
pub(crate) use reconcile::{after_success, no_answer_in_time};
use reconcile::{publish_binding_events, rejected_on_create, state_of};
use runtime::AbortOnDrop;
pub use runtime::{identity, main, run};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio::sync::broadcast;
use tracing::debug;

use crate::config::Config;
use crate::metrics::{Metrics, PolicyKind, PolicyStates};
use crate::policy::PolicyStatus;
use crate::suppress;

use self::index::TriggerIndex;
use self::inputs::LiveInputs;
use self::stored::StoredPolicy;

/// Why a reconcile failed (retried with backoff by the error policy).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The check itself could not run (a panic in the checking task, no inputs yet).
    #[error("checking failed: {0}")]
    Check(String),
    /// The status write failed.
    #[error("status write failed: {0}")]
    Write(String),
    /// An Event could not be published (MutatingAdmissionPolicies: their only output).
    #[error("publishing an event failed: {0}")]
    Event(String),
    /// A policy report could not be written (`reports`).
    #[error("writing a policy report failed: {0}")]
    Report(String),
}

/// Shared state of the controller.
pub struct Context {
    client: Client,
    config: Config,
    inputs: Arc<LiveInputs>,
    metrics: Metrics,
    recorder: Recorder,
    /// Where reconciles put the Events they publish (`event_queue`): they never wait for them.
    events: event_queue::EventQueue,
    /// The other end of `events`, taken by [`run`] to publish them.
    queued_events: Mutex<Option<event_queue::QueuedEvents>>,
    /// This replica's identity (the Events' `reportingInstance`).
    identity: String,
    /// Until when this replica may write (the lease holder, or always with leader election
    /// off); checked before every write.
    fence: lease::Fence,
    index: Mutex<TriggerIndex>,
    states: Mutex<PolicyStates>,
    failures: Mutex<HashMap<String, u32>>,
    /// Names of policies to re-check, fed by the schema poll task. Sent through
    /// [`Context::trigger`].
    triggers: broadcast::Sender<String>,
    /// Which policies need no new check when reconciled again (`memo`).
    memo: memo::CheckMemo,
    /// The store of the running controller (to forget deleted policies).
    store: Mutex<Option<Store<StoredPolicy>>>,
    /// The bindings and param kinds the running controller watches.
    bindings: bindings::BindingState,
    /// The MutatingAdmissionPolicy controller's state.
    mutating: mutating::MutatingState,
    /// The MutatingAdmissionPolicyBindings the running controller watches.
    mutating_bindings: mutating_bindings::MutatingBindingState,
    /// The policy reports this replica wrote (`reports`).
    reports: reports::ReportState,
    /// The admission webhook watcher's state.
    webhooks: webhooks::WebhookState,
    /// The policy engines' watchers (Kyverno, Gatekeeper).
    engines: engines::EngineState,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Context {
    /// A context over `inputs`.
    pub fn new(
        client: Client,
        config: Config,
        inputs: Arc<LiveInputs>,
        metrics: Metrics,
        identity: String,
    ) -> Arc<Context> {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: crate::metrics::CONTROLLER_NAME.to_owned(),
                instance: Some(identity.clone()),
            },
        );
        let (events, queued_events) = event_queue::queue();
        Arc::new(Context {
            client,
            config,
            inputs,
            metrics,
            recorder,
            events,
            queued_events: Mutex::new(Some(queued_events)),
            identity,
            fence: lease::Fence::default(),
            index: Mutex::new(TriggerIndex::default()),
            states: Mutex::new(PolicyStates::default()),
            failures: Mutex::new(HashMap::new()),
            triggers: broadcast::channel(4096).0,
            memo: memo::CheckMemo::default(),
            store: Mutex::new(None),
            bindings: bindings::BindingState::default(),
            mutating: mutating::MutatingState::default(),
            mutating_bindings: mutating_bindings::MutatingBindingState::default(),
            reports: reports::ReportState::default(),
            webhooks: webhooks::WebhookState::default(),
            engines: engines::EngineState::default(),
        })
    }

    /// Asks the running controller (if any) to check the policy `name` again; its last check
    /// no longer counts (`memo`), even if no controller receives this (a standby).
    fn trigger(&self, name: String) {
        self.memo.triggered(&name);
        self.metrics.workqueue_add();
        let _ = self.triggers.send(name);
    }

    /// How long a check counts in [`Context::memo`]: half the re-check period, so that the
    /// periodic re-check always checks again (`None` with periodic re-checks off).
    fn memo_max_age(&self) -> Option<Duration> {
        let period = self.config.recheck_period.get();
        (!period.is_zero()).then(|| period / 2)
    }

    fn record_state(&self, name: &str, computed: &PolicyStatus, applied: &suppress::Applied) {
        let state = suppression::state(state_of(computed), computed, applied);
        let counts = lock(&self.states).set(name, state);
        self.metrics
            .set_policy_states(PolicyKind::Validating, counts);
        self.metrics
            .set_policy_warnings(PolicyKind::Validating, name, applied.warnings);
        self.metrics
            .set_policy_runtime_errors(PolicyKind::Validating, name, applied.runtime);
        self.metrics.set_policy_rejected_on_create(
            PolicyKind::Validating,
            name,
            rejected_on_create(computed),
        );
    }

    /// Forgets policies that are no longer in the controller's store (deleted).
    fn forget_deleted(&self) {
        let Some(store) = lock(&self.store).clone() else {
            return;
        };
        let present: std::collections::HashSet<String> =
            store.state().iter().map(|p| p.name_any()).collect();
        self.memo.retain(|n| present.contains(n));
        let gone: Vec<String> = lock(&self.states)
            .names()
            .filter(|n| !present.contains(*n))
            .cloned()
            .collect();
        if gone.is_empty() {
            return;
        }
        let counts = {
            let mut states = lock(&self.states);
            for name in &gone {
                states.remove(name);
            }
            states.counts()
        };
        let mut index = lock(&self.index);
        for name in &gone {
            index.remove(name);
            lock(&self.failures).remove(name);
            self.metrics.remove_policy(PolicyKind::Validating, name);
            debug!(policy = %name, "policy deleted; forgotten");
        }
        self.metrics
            .set_policy_states(PolicyKind::Validating, counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(50), Duration::from_secs(300));
    }

    #[test]
    fn identity_is_not_empty() {
        assert!(!identity().is_empty());
    }
}
