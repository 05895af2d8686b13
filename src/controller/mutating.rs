//! MutatingAdmissionPolicies in the cluster (issue 12): the shell around
//! [`crate::mutating::check_mutating_policy`].
//!
//! - [`run`] waits until discovery shows `admissionregistration.k8s.io/v1`
//!   `mutatingadmissionpolicies` (logging once when it is not served, and looking again after
//!   every schema poll), then runs a second kube-runtime controller over them, next to the
//!   ValidatingAdmissionPolicy controller and only while this replica leads;
//! - each reconcile checks the policy with the same [`super::inputs::LiveInputs`] (discovery,
//!   schemas, CEL checker) as validating policies, records its dependencies in the mutating
//!   [`TriggerIndex`] that the schema poll consults (so a CRD change re-checks it) and reports
//!   new, changed and cleared findings as Events ([`super::events::events_of_findings`], over
//!   the policy's findings, [`crate::finding::produce_status`]): a MutatingAdmissionPolicy has
//!   no status to write.
//!
//! See docs/mutating.md, "In the cluster".

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::Store;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::broadcast;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::metrics::{Metrics, PolicyKind, PolicyStates, ReconcileResult};
use crate::policy::PolicyStatus;

use super::events::{FindingEvent, FindingRecord, events_of_findings, record_of_findings};
use super::index::{Dependencies, TriggerIndex};
use super::{Context, ReconcileError, backoff, lock};

/// The API group of MutatingAdmissionPolicies.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// The version vapcheck watches.
pub const VERSION: &str = "v1";
/// The resource vapcheck watches.
pub const RESOURCE: &str = "mutatingadmissionpolicies";

/// The state of the MutatingAdmissionPolicy controller, kept across leader terms.
pub struct MutatingState {
    /// Policy name → dependencies (consulted by the schema poll).
    pub(super) index: Mutex<TriggerIndex>,
    /// Names of policies to re-check.
    pub(super) triggers: broadcast::Sender<String>,
    /// Policy name → (uid, what was last reported on it).
    records: Mutex<HashMap<String, (String, FindingRecord)>>,
    failures: Mutex<HashMap<String, u32>>,
    /// Policy name → `vapcheck_policies` state.
    states: Mutex<PolicyStates>,
    store: Mutex<Option<Store<MutatingAdmissionPolicy>>>,
}

impl Default for MutatingState {
    fn default() -> Self {
        MutatingState {
            index: Mutex::new(TriggerIndex::default()),
            triggers: broadcast::channel(4096).0,
            records: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            states: Mutex::new(PolicyStates::default()),
            store: Mutex::new(None),
        }
    }
}

impl MutatingState {
    /// Records the metrics of one check of `name`.
    fn record_state(&self, metrics: &Metrics, name: &str, computed: &PolicyStatus) {
        let counts = lock(&self.states).set(name, super::state_of(computed));
        metrics.set_policy_states(PolicyKind::Mutating, counts);
        metrics.set_policy_warnings(
            PolicyKind::Mutating,
            name,
            computed.expression_warnings.len(),
        );
        metrics.set_policy_rejected_on_create(
            PolicyKind::Mutating,
            name,
            super::rejected_on_create(computed),
        );
    }

    /// Name → uid of every policy in the running controller's store (`None` while it does
    /// not run).
    pub(super) fn present(&self) -> Option<HashMap<String, String>> {
        super::reports::present_in(lock(&self.store).clone())
    }

    /// Re-checks every stored MutatingAdmissionPolicy whose paramKind has `gvk`'s group and
    /// kind (an object of that kind changed: what their bindings do may have changed).
    pub(super) fn trigger_param_kind(&self, metrics: &Metrics, gvk: &crate::policy::Gvk) {
        let Some(store) = lock(&self.store).clone() else {
            return;
        };
        for p in store.state() {
            let same = p
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .and_then(crate::bindings::param_kind_gvk)
                .is_some_and(|g| g.group == gvk.group && g.kind == gvk.kind);
            if same {
                self.trigger(metrics, p.name_any());
            }
        }
    }

    /// Asks the running controller (if any) to check the policy `name` again.
    pub(super) fn trigger(&self, metrics: &Metrics, name: String) {
        metrics.workqueue_add();
        // No receiver (standby) is fine: the new leader checks everything.
        let _ = self.triggers.send(name);
    }

    /// Forgets the policies no longer in the running controller's store (records, index and
    /// metric series).
    pub(super) fn forget_deleted(&self, metrics: &Metrics) {
        let Some(store) = lock(&self.store).clone() else {
            return;
        };
        let present: std::collections::HashSet<String> =
            store.state().iter().map(|p| p.name_any()).collect();
        let gone: Vec<String> = lock(&self.states)
            .names()
            .filter(|n| !present.contains(*n))
            .cloned()
            .collect();
        if gone.is_empty() {
            return;
        }
        for name in gone {
            lock(&self.states).remove(&name);
            metrics.remove_policy(PolicyKind::Mutating, &name);
            lock(&self.records).remove(&name);
            lock(&self.index).remove(&name);
            lock(&self.failures).remove(&name);
            debug!(mutating_policy = %name, "policy deleted; forgotten");
        }
        let counts = lock(&self.states).counts();
        metrics.set_policy_states(PolicyKind::Mutating, counts);
    }
}

/// Runs the MutatingAdmissionPolicy controller until the task is aborted (the validating
/// controller stopped): waits until the API server serves the kind, then watches it.
pub async fn run(ctx: Arc<Context>) {
    let mut logged = false;
    loop {
        match ctx.inputs.serves(GROUP, VERSION, RESOURCE) {
            Some(true) => break,
            served => {
                if !logged {
                    info!(
                        resource = %format!("{RESOURCE}.{VERSION}.{GROUP}"),
                        discovery_read = served.is_some(),
                        "the API server does not serve MutatingAdmissionPolicies; they are not checked (looking again after every schema poll)"
                    );
                    logged = true;
                }
            }
        }
        tokio::time::sleep(ctx.config.schema_poll_interval.get()).await;
    }
    info!("watching MutatingAdmissionPolicies");
    // Their bindings are served with them (the same group and version): watched as long as
    // the policies are.
    let _bindings = super::AbortOnDrop(tokio::spawn(super::mutating_bindings::watch(Arc::clone(
        &ctx,
    ))));
    // Bindings whose policy does not exist (no policy check reports them).
    let _orphans = super::AbortOnDrop(tokio::spawn(super::mutating_bindings::watch_orphans(
        Arc::clone(&ctx),
    )));
    let api: Api<MutatingAdmissionPolicy> = Api::all(ctx.client.clone());
    let rx = ctx.mutating.triggers.subscribe();
    let triggers = super::watch::trigger_stream(rx, "mutating policy re-check triggers lagged");
    let (reader, writer) = reflector::store();
    let config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let (mut failing, mut listed) = (false, false);
    let policies = watcher(api, config)
        .backoff(super::watch::WatchBackoff::default())
        .map(move |event| {
            match &event {
                Ok(e) => {
                    failing = false;
                    // Said once: from here on, a MutatingAdmissionPolicy reaches the checks
                    // by the watch (or, while the watch is refused, not until a relist).
                    if matches!(e, watcher::Event::InitDone)
                        && !std::mem::replace(&mut listed, true)
                    {
                        info!("MutatingAdmissionPolicies listed");
                    }
                }
                // A 403 (no RBAC for the kind) would repeat every two seconds: warn once.
                Err(e) if !failing => {
                    failing = true;
                    warn!(error = %e, "the MutatingAdmissionPolicy list/watch failed; retrying");
                }
                Err(e) => debug!(error = %e, "the MutatingAdmissionPolicy list/watch failed"),
            }
            event
        })
        .modify(|p: &mut MutatingAdmissionPolicy| super::slim::slim_meta(&mut p.metadata))
        .reflect(writer)
        .applied_objects()
        .filter_map(|object| futures::future::ready(object.ok().map(Ok)));
    let controller = Controller::for_stream(policies, reader)
        .with_config(controller::Config::default().concurrency(ctx.config.concurrency))
        .reconcile_on(triggers);
    *lock(&ctx.mutating.store) = Some(controller.store());
    controller
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            if let Err(e) = result {
                match e {
                    controller::Error::ReconcilerFailed(..) => {}
                    other => warn!(error = %other, "mutating policy controller"),
                }
            }
        })
        .await;
    *lock(&ctx.mutating.store) = None;
}

fn error_policy(
    policy: Arc<MutatingAdmissionPolicy>,
    _error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    ctx.metrics.workqueue_retry();
    let mut failures = lock(&ctx.mutating.failures);
    let n = failures.entry(policy.name_any()).or_insert(0);
    *n = n.saturating_add(1);
    Action::requeue(backoff(*n))
}

async fn reconcile(
    policy: Arc<MutatingAdmissionPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let name = policy.name_any();
    let generation = policy.metadata.generation.unwrap_or(0);
    let span = info_span!("reconcile", mutating_policy = %name, generation);
    async move {
        let guard = ctx.metrics.start_reconcile();
        let result = reconcile_inner(&policy, &name, &ctx).await;
        let took = guard.elapsed();
        match &result {
            Ok(events) => {
                lock(&ctx.mutating.failures).remove(&name);
                info!(events, duration_ms = took.as_millis() as u64, "reconciled");
                guard.finish(ReconcileResult::Success);
            }
            Err(e) => {
                warn!(error = %e, duration_ms = took.as_millis() as u64, "reconcile failed");
                guard.finish(ReconcileResult::Error);
            }
        }
        result.map(|_| super::after_success(&ctx))
    }
    .instrument(span)
    .await
}

/// Creates one `events.k8s.io/v1` Event. Not through kube-runtime's `Recorder`: it folds an
/// Event with the same type, reason, action and object (fieldPath included) seen in the last
/// 6 minutes into a series of the first one and keeps the first one's note, so a finding that
/// changed twice in a row would show its old text.
async fn publish(
    ctx: &Context,
    ev: &FindingEvent,
    regarding: k8s_openapi::api::core::v1::ObjectReference,
) -> Result<(), kube::Error> {
    let event = kube::runtime::events::Event {
        type_: if ev.warning {
            kube::runtime::events::EventType::Warning
        } else {
            kube::runtime::events::EventType::Normal
        },
        reason: ev.reason.to_owned(),
        note: Some(ev.note.clone()),
        action: "TypeCheck".to_owned(),
        secondary: None,
    };
    super::event_queue::create_unfolded(&ctx.client, &ctx.identity, &event, regarding).await
}

/// Checks one policy and publishes its Events; returns how many were published.
async fn reconcile_inner(
    policy: &Arc<MutatingAdmissionPolicy>,
    name: &str,
    ctx: &Arc<Context>,
) -> Result<usize, ReconcileError> {
    if policy.metadata.deletion_timestamp.is_some() {
        return Ok(0);
    }
    let inputs = Arc::clone(&ctx.inputs);
    let checked = Arc::clone(policy);
    let started = Instant::now();
    let computed: PolicyStatus =
        tokio::task::spawn_blocking(move || inputs.check_mutating(&checked))
            .await
            .map_err(|e| ReconcileError::Check(e.to_string()))?
            .map_err(ReconcileError::Check)?;
    ctx.metrics.observe_typecheck(started.elapsed());
    ctx.metrics.observe_estimated_costs(&computed.cost);
    // The vapcheck.io/ignore annotation: suppressed findings make no Event and no count; the
    // report shows them as suppressed.
    let (counted, invalid) = super::suppression::apply_mutating(&policy.metadata, &computed);
    if let Some(e) = invalid {
        ctx.events.send(
            super::suppression::invalid_event(&e),
            policy.object_ref(&()),
        );
    }
    lock(&ctx.mutating.index).set(name, Dependencies::of_mutating(policy, &computed));
    ctx.mutating.record_state(&ctx.metrics, name, &counted);
    let subject = crate::reports::Subject {
        kind: crate::reports::SubjectKind::MutatingPolicy,
        name: name.to_owned(),
        uid: policy.metadata.uid.clone().unwrap_or_default(),
    };
    let suppression = super::suppression::directive(&policy.metadata)
        .ok()
        .flatten();
    // Its report and its Events are emitters over its findings.
    let object = crate::finding::ObjectRef::in_cluster("MutatingAdmissionPolicy", name);
    let findings = crate::finding::produce_status(&object, &computed, None);
    let entries = crate::reports::finding_entries(&findings, suppression.as_ref());
    super::reports::publish(ctx, subject, &entries).await?;
    // What each of its bindings will do (`mutating_bindings`): an Event on each binding whose
    // verdict changed, and a report per binding.
    match super::mutating_bindings::binding_reports(ctx, policy, &computed).await {
        Ok(reports) => {
            super::mutating_bindings::publish(ctx, &reports).await?;
        }
        Err(why) => {
            debug!(error = %why, "the policy's MutatingAdmissionPolicyBindings not evaluated");
        }
    }
    if !ctx.fence.may_write() {
        return Ok(0);
    }
    let uid = policy.metadata.uid.clone().unwrap_or_default();
    // A record of an earlier object of the same name (deleted and created again) does not
    // count.
    let before = lock(&ctx.mutating.records)
        .get(name)
        .filter(|(u, _)| *u == uid)
        .map(|(_, r)| r.clone());
    // What the Events count: the findings of `counted` (the suppressed ones left out).
    let counted_findings = crate::finding::produce_status(&object, &counted, None);
    let events = events_of_findings(before.as_ref(), &counted_findings);
    for ev in &events {
        let mut reference = policy.object_ref(&());
        reference.field_path = ev.field_ref.clone();
        // On failure the record stays as it was, so the retry publishes again.
        match tokio::time::timeout(super::WRITE_TIMEOUT, publish(ctx, ev, reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(ReconcileError::Event(e.to_string())),
            Err(_) => {
                return Err(ReconcileError::Event(super::no_answer_in_time()));
            }
        }
    }
    lock(&ctx.mutating.records).insert(
        name.to_owned(),
        (uid, record_of_findings(&counted_findings)),
    );
    Ok(events.len())
}
