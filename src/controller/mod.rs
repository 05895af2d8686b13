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
pub mod engines;
pub mod event_queue;
pub mod events;
pub mod index;
pub mod inputs;
pub mod lease;
pub mod memo;
pub mod mutating;
pub mod mutating_bindings;
pub mod reports;
pub mod slim;
pub mod status;
pub mod stored;
pub mod suppression;
pub mod watch;
pub mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::broadcast;
use tracing::{Instrument, debug, error, info, info_span, warn};

use crate::config::{Config, StatusMode};
use crate::health::{ElectionState, Health, HttpServers, Readiness, Shutdown};
use crate::metrics::{
    Metrics, PolicyKind, PolicyState, PolicyStates, ReconcileResult, StatusWriteResult,
    WatchRestartReason,
};
use crate::policy::PolicyStatus;
use crate::suppress;

use self::index::{Dependencies, TriggerIndex};
use self::inputs::LiveInputs;
use self::status::{
    FIELD_MANAGER, apply_body, desired_status, is_up_to_date, overwritten_by_other_manager,
    warnings_of,
};
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

/// Whether the computed status says kube-apiserver would reject the stored policy if it were
/// created now (`AcceptedOnCreate=False`).
fn rejected_on_create(computed: &PolicyStatus) -> bool {
    computed
        .conditions
        .iter()
        .any(|c| c.type_ == crate::policy::status::ACCEPTED_ON_CREATE && c.status == "False")
}

/// The `vapcheck_policies` state of a check result (both policy kinds).
fn state_of(computed: &PolicyStatus) -> PolicyState {
    let failed = computed
        .conditions
        .iter()
        .any(|c| c.type_ == crate::policy::status::TYPE_CHECKED && c.status != "True");
    if failed {
        PolicyState::Failed
    } else if computed.has_warnings() || !computed.runtime.is_empty() {
        PolicyState::Warnings
    } else if !computed.skipped.is_empty() {
        PolicyState::Partial
    } else {
        PolicyState::Clean
    }
}

/// Reconciles one policy: check, compare, write if needed, record an event on change.
async fn reconcile(stored: Arc<StoredPolicy>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let name = stored.name_any();
    let generation = stored.metadata.generation;
    let span = info_span!("reconcile", policy = %name, generation = generation.unwrap_or(0));
    async move {
        let guard = ctx.metrics.start_reconcile();
        // The store keeps spec and status packed (stored.rs); this reconcile's copy is dropped
        // when it ends.
        let result = match stored.unpack() {
            Ok(policy) => reconcile_inner(&Arc::new(policy), &name, &ctx).await,
            Err(e) => Err(ReconcileError::Check(e)),
        };
        let took = guard.elapsed();
        match &result {
            Ok(outcome) => {
                lock(&ctx.failures).remove(&name);
                info!(
                    outcome = outcome.as_str(),
                    duration_ms = took.as_millis() as u64,
                    "reconciled"
                );
                guard.finish(ReconcileResult::Success);
            }
            Err(e) => {
                warn!(error = %e, duration_ms = took.as_millis() as u64, "reconcile failed");
                guard.finish(ReconcileResult::Error);
            }
        }
        result.map(|_| after_success(&ctx))
    }
    .instrument(span)
    .await
}

/// What a reconcile did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Unchanged,
    Written,
    NotLeader,
    Gone,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::Written => "written",
            Outcome::NotLeader => "not-leader",
            Outcome::Gone => "deleted",
        }
    }
}

async fn reconcile_inner(
    policy: &Arc<ValidatingAdmissionPolicy>,
    name: &str,
    ctx: &Arc<Context>,
) -> Result<Outcome, ReconcileError> {
    if policy.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Gone);
    }
    let resource_version = policy.metadata.resource_version.as_deref();
    let now = Instant::now();
    if ctx
        .memo
        .fresh(name, resource_version, ctx.memo_max_age(), now)
    {
        debug!("not checked again: neither the policy nor its inputs changed since the last check");
        ctx.metrics.status_write(StatusWriteResult::Unchanged);
        return Ok(Outcome::Unchanged);
    }
    let memo = ctx.memo.start(name, now);
    let result = check_and_write(policy, name, ctx).await;
    match &result {
        Ok(Checked::Complete(_, rv)) => ctx.memo.record(name, rv.as_deref(), memo),
        _ => ctx.memo.clear(name),
    }
    result.map(Checked::outcome)
}

/// How a check ended: `Complete` with the `resourceVersion` the status is known at (the
/// policy's when nothing was written, the API server's answer after a write), or `Partial`
/// when it must not count in the memo (the bindings could not be evaluated, a standby could
/// not write, or the policy is gone).
enum Checked {
    Complete(Outcome, Option<String>),
    Partial(Outcome),
}

impl Checked {
    fn outcome(self) -> Outcome {
        match self {
            Checked::Complete(o, _) | Checked::Partial(o) => o,
        }
    }
}

/// Checks `policy` and writes its status if it changed.
async fn check_and_write(
    policy: &Arc<ValidatingAdmissionPolicy>,
    name: &str,
    ctx: &Arc<Context>,
) -> Result<Checked, ReconcileError> {
    // The check is CPU-bound: run it off the async workers.
    let inputs = Arc::clone(&ctx.inputs);
    let checked = Arc::clone(policy);
    let started = Instant::now();
    let computed = tokio::task::spawn_blocking(move || inputs.check(&checked))
        .await
        .map_err(|e| ReconcileError::Check(e.to_string()))?
        .map_err(ReconcileError::Check)?;
    ctx.metrics.observe_typecheck(started.elapsed());
    ctx.metrics.observe_estimated_costs(&computed.cost);
    for skipped in &computed.skipped {
        ctx.metrics.kinds_skipped(skip_label(&skipped.reason), 1);
    }
    let mut computed = computed;
    let (binding_reports, bindings_complete) =
        add_bindings_condition(policy, &mut computed, ctx).await;
    let done = |outcome: Outcome, rv: Option<String>| {
        if bindings_complete {
            Checked::Complete(outcome, rv)
        } else {
            Checked::Partial(outcome)
        }
    };
    // The vapcheck.io/ignore annotation (suppression.rs): ExpressionsValid and the gauges
    // without the suppressed findings; typeChecking unchanged.
    let (applied, invalid) =
        suppression::apply_validating(&policy.metadata, &mut computed, ctx.config.mode);
    if let Some(e) = &invalid {
        ctx.events
            .send(suppression::invalid_event(e), policy.object_ref(&()));
    }
    lock(&ctx.index).set(name, Dependencies::of(policy, &computed));
    ctx.record_state(name, &computed, &applied);

    let mode = ctx.config.status_mode;
    let existing = policy.status.as_ref();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let desired = desired_status(&computed, existing, mode, &now);
    publish_binding_events(ctx, existing, &binding_reports);
    reports::publish_policy(ctx, policy, &computed, &binding_reports).await?;
    if is_up_to_date(existing, &desired, mode) {
        ctx.metrics.status_write(StatusWriteResult::Unchanged);
        return Ok(done(
            Outcome::Unchanged,
            policy.metadata.resource_version.clone(),
        ));
    }
    if !ctx.fence.may_write() {
        return Ok(Checked::Partial(Outcome::NotLeader));
    }
    if let Some(other) = overwritten_by_other_manager(policy) {
        info!(manager = %other, "typeChecking was written by another manager; re-applying vapcheck's status");
    }

    let api: Api<ValidatingAdmissionPolicy> = Api::all(ctx.client.clone());
    let Ok(applied) = tokio::time::timeout(WRITE_TIMEOUT, apply_status(&api, name, &desired)).await
    else {
        // A request the API server holds must not hold a worker: give up, and the reconcile's
        // backoff (or the watch's recovery) retries it.
        ctx.metrics.status_write(StatusWriteResult::Error);
        return Err(ReconcileError::Write(no_answer_in_time()));
    };
    let stored = match applied {
        Ok(Some(stored)) => stored,
        Ok(None) => {
            ctx.metrics.status_write(StatusWriteResult::NotFound);
            return Ok(Checked::Partial(Outcome::Gone));
        }
        Err(kube::Error::Api(s)) if s.is_conflict() => {
            ctx.metrics.status_write(StatusWriteResult::Conflict);
            return Err(ReconcileError::Write(s.to_string()));
        }
        Err(e) => {
            ctx.metrics.status_write(StatusWriteResult::Error);
            return Err(ReconcileError::Write(e.to_string()));
        }
    };
    // The object's version after the write(s), kept only when the object the API server
    // answered with shows the desired status: another manager may write between vapcheck's
    // apply and its merge patch below, and then the version is not one vapcheck checked.
    let verified = |object: &ValidatingAdmissionPolicy| {
        is_up_to_date(object.status.as_ref(), &desired, mode)
            .then(|| object.metadata.resource_version.clone())
            .flatten()
    };
    let mut written_version = verified(&stored);
    // A warning list another manager co-owns survives an apply that leaves it out; clear it
    // explicitly when vapcheck found no warnings.
    if mode == StatusMode::Full
        && warnings_of(Some(&desired)).is_empty()
        && !warnings_of(stored.status.as_ref()).is_empty()
    {
        let clear = serde_json::json!({"status": {"typeChecking": {"expressionWarnings": null}}});
        let merge_params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let cleared = tokio::time::timeout(
            WRITE_TIMEOUT,
            api.patch_status(name, &merge_params, &Patch::Merge(&clear)),
        )
        .await
        .map_err(|_| {
            ctx.metrics.status_write(StatusWriteResult::Error);
            ReconcileError::Write(no_answer_in_time())
        })?;
        match cleared {
            Ok(cleared) => written_version = verified(&cleared),
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                ctx.metrics.status_write(StatusWriteResult::NotFound);
                return Ok(Checked::Partial(Outcome::Gone));
            }
            Err(e) => {
                ctx.metrics.status_write(StatusWriteResult::Error);
                return Err(ReconcileError::Write(e.to_string()));
            }
        }
    }
    ctx.metrics.status_write(StatusWriteResult::Success);

    let valid = computed
        .conditions
        .iter()
        .find(|c| c.type_ == crate::policy::status::EXPRESSIONS_VALID);
    if let Some(ev) = events::event_for(existing, valid) {
        let event = Event {
            type_: if ev.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: ev.reason.to_owned(),
            note: Some(ev.note),
            action: "TypeCheck".to_owned(),
            secondary: None,
        };
        ctx.events.send(event, policy.object_ref(&()));
    }
    Ok(done(Outcome::Written, written_version))
}

/// How long a status write may take before the reconcile gives it up and retries later.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a request bounded by [`WRITE_TIMEOUT`] was given up.
pub(crate) fn no_answer_in_time() -> String {
    format!(
        "the API server did not answer within {}s",
        WRITE_TIMEOUT.as_secs()
    )
}

/// Applies `desired` to the status of policy `name` (server-side apply, forced, as
/// [`FIELD_MANAGER`]) and returns the stored policy, or `None` when the policy no longer
/// exists.
///
/// A deleted policy is not always answered 404: an apply creates what is missing
/// (k8s.io/apiserver v0.37.1 `pkg/endpoints/handlers/patch.go`, `patchResource`: apply patch
/// types set `forceAllowCreate`), so the API server tries to create the policy from the status
/// body, which has no name, and refuses with 400 "the name of the object (<name> based on URL)
/// was undeterminable: name must be provided" (`rest.go`, `checkName`; a body with the name
/// would be refused as an invalid policy, 422). So after a 400 or 422, one list of the policy
/// by name tells whether it is gone; otherwise the refusal is returned as it came. A list with
/// the field selector `metadata.name`, not a GET, so that the ClusterRole needs no `get` on
/// policies (the watch needs `list` anyway): every kind supports that selector
/// (k8s.io/apimachinery v0.37.1 `pkg/runtime/scheme.go`, `ConvertFieldLabel` falls back to
/// `DefaultMetaV1FieldSelectorConversion`).
#[doc(hidden)]
pub async fn apply_status(
    api: &Api<ValidatingAdmissionPolicy>,
    name: &str,
    desired: &k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyStatus,
) -> Result<Option<ValidatingAdmissionPolicy>, kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch_status(name, &params, &Patch::Apply(apply_body(desired)))
        .await
    {
        Ok(stored) => Ok(Some(stored)),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 400 || s.code == 422 => {
            let by_name = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
            match api.list_metadata(&by_name).await {
                Ok(list) if list.items.is_empty() => Ok(None),
                _ => Err(kube::Error::Api(s)),
            }
        }
        Err(e) => Err(e),
    }
}

/// Adds the `BindingsEffective` condition to `computed` (`Unknown` when the bindings or
/// params cannot be read yet) and returns the binding reports it came from, and whether the
/// bindings could be evaluated.
async fn add_bindings_condition(
    policy: &ValidatingAdmissionPolicy,
    computed: &mut PolicyStatus,
    ctx: &Arc<Context>,
) -> (Vec<crate::bindings::BindingReport>, bool) {
    let generation = policy.metadata.generation;
    let complete;
    let (condition, reports) = match bindings::binding_reports(ctx, policy, computed).await {
        Ok((reports, unavailable)) => {
            complete = unavailable.is_none();
            (
                crate::bindings::bindings_condition(generation, &reports, unavailable.as_deref()),
                if unavailable.is_some() {
                    Vec::new()
                } else {
                    reports
                },
            )
        }
        Err(why) => {
            complete = false;
            debug!(error = %why, "bindings not evaluated");
            (
                crate::bindings::condition::not_evaluated(generation, &why),
                Vec::new(),
            )
        }
    };
    computed.conditions.push(condition);
    (reports, complete)
}

/// Records the verdicts of `reports` (metric) and, as the leader, publishes an Event on each
/// binding whose verdict changed, or that is new to this replica and not yet described by the
/// policy's stored condition (so a restart does not repeat old Events).
fn publish_binding_events(
    ctx: &Arc<Context>,
    existing: Option<&k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyStatus>,
    reports: &[crate::bindings::BindingReport],
) {
    let (changed, counts) = ctx.bindings.record_verdicts(reports);
    ctx.metrics.set_binding_verdicts(&counts);
    if !ctx.fence.may_write() {
        return;
    }
    let stored = existing
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == crate::bindings::BINDINGS_EFFECTIVE)
        })
        .map(|c| c.message.as_str())
        .unwrap_or_default();
    for (report, first_sight) in changed {
        if first_sight && stored.contains(&report.reason) {
            continue;
        }
        let event = crate::bindings::condition::binding_event(report);
        let reference = ctx.bindings.binding_ref(&report.binding);
        let event = Event {
            type_: if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.to_owned(),
            note: Some(event.note),
            action: "EvaluateBinding".to_owned(),
            secondary: None,
        };
        ctx.events.send(event, reference);
    }
}

/// The metrics label of a skip reason.
fn skip_label(reason: &crate::policy::SkipReason) -> crate::metrics::SkipReason {
    use crate::metrics::SkipReason as M;
    use crate::policy::SkipReason as P;
    match reason {
        P::Wildcard => M::Wildcard,
        P::Subresource => M::Subresource,
        P::Limit => M::KindLimit,
        P::Mapping(_) => M::NotFound,
        P::NoSchema | P::SchemaError(_) => M::NoSchema,
    }
}

/// Retry with exponential backoff per policy: 1 s, 2 s, 4 s ... at most 5 minutes.
fn error_policy(policy: Arc<StoredPolicy>, _error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.metrics.workqueue_retry();
    let mut failures = lock(&ctx.failures);
    let n = failures.entry(policy.name_any()).or_insert(0);
    *n = n.saturating_add(1);
    Action::requeue(backoff(*n))
}

/// What follows a successful reconcile: a re-check after the configured period, or none
/// (period 0: only changes trigger one).
pub(crate) fn after_success(ctx: &Context) -> Action {
    let period = ctx.config.recheck_period.get();
    if period.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(period)
    }
}

/// The retry delay after `failures` consecutive failures.
pub fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(9);
    Duration::from_secs(secs.min(300))
}

/// Runs one controller instance until `stop` completes (then finishes in-flight reconciles).
async fn run_controller(ctx: Arc<Context>, stop: impl Future<Output = ()> + Send + Sync + 'static) {
    // Decoded straight into the packed form the store keeps (stored.rs).
    let api: Api<StoredPolicy> = Api::all(ctx.client.clone());
    let rx = ctx.triggers.subscribe();
    let triggers = futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(name) => return Some((ObjectRef::new(&name), rx)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    warn!(missed = n, "re-check triggers lagged");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    // The policy watch, with a bounded backoff (kube's default grows to 30 s and, in the
    // controller, also pauses the re-check triggers), counted in the watch metrics.
    let status = ctx.metrics.watch_status().clone();
    status.start();
    let metrics = ctx.metrics.clone();
    let (reader, writer) = reflector::store();
    // One list request, not pages of 500 (kube's default): with paginated relists after a
    // kube-apiserver restart (1.37.1, which serves continuations from watch-cache snapshots),
    // changes made during the relist were lost for good once there were more than 500
    // policies (e2e_faults at 300 initial policies failed 3 runs out of 3 at the fourth
    // restart; unpaginated it passed). The cost is one large response per relist.
    let watch_config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let policies = watcher(api, watch_config)
        .backoff(watch::WatchBackoff::default())
        .map(move |event| {
            match &event {
                Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                    metrics.watch_status().succeeded();
                }
                Ok(_) => {}
                Err(e) => {
                    let reason = if watch::is_expired(e) {
                        WatchRestartReason::Expired
                    } else {
                        WatchRestartReason::Error
                    };
                    warn!(error = %e, reason = reason.as_str(), "the policy list/watch failed; retrying");
                    metrics.watch_failed(reason, &e.to_string());
                }
            }
            event
        })
        // Only what the controller reads goes into the store: StoredPolicy slims and packs
        // each object as it is decoded (stored.rs, slim.rs).
        .reflect(writer)
        .applied_objects()
        // Errors are handled above; passed on they would make the controller back off once more.
        .filter_map(|object| futures::future::ready(object.ok().map(Ok)));
    // When the watch works again, retry at once every policy whose reconcile failed meanwhile
    // (their own backoff may have grown to minutes during the outage).
    let _retry_failed = AbortOnDrop(tokio::spawn(retry_failed_on_recovery(Arc::clone(&ctx))));
    let controller = Controller::for_stream(policies, reader)
        .with_config(controller::Config::default().concurrency(ctx.config.concurrency))
        .reconcile_on(triggers)
        .graceful_shutdown_on(stop);
    *lock(&ctx.store) = Some(controller.store());
    let _bindings = AbortOnDrop(tokio::spawn(bindings::watch_bindings(Arc::clone(&ctx))));
    let _orphans = AbortOnDrop(tokio::spawn(bindings::watch_orphans(Arc::clone(&ctx))));
    let _mutating = AbortOnDrop(tokio::spawn(mutating::run(Arc::clone(&ctx))));
    let _webhooks = AbortOnDrop(tokio::spawn(webhooks::run(Arc::clone(&ctx))));
    let _engines = AbortOnDrop(tokio::spawn(engines::run(Arc::clone(&ctx))));
    ctx.metrics
        .set_max_concurrent_reconciles(ctx.config.concurrency);
    controller
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            if let Err(e) = result {
                match e {
                    controller::Error::ReconcilerFailed(..) => {}
                    // A requeue (re-check period, retry, trigger) for a policy deleted since:
                    // nothing to do, and not a fault.
                    controller::Error::ObjectNotFound(object) => {
                        debug!(policy = %object.name, "not reconciled: the policy was deleted");
                    }
                    other => warn!(error = %other, "controller"),
                }
            }
        })
        .await;
    *lock(&ctx.store) = None;
    ctx.bindings.clear();
    ctx.engines.clear();
    status.stop();
}

/// Aborts the task when dropped (also when the owning task is aborted).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Re-enqueues, with a fresh backoff, the policies whose last reconcile failed, each time the
/// policy watch recovers.
async fn retry_failed_on_recovery(ctx: Arc<Context>) {
    loop {
        ctx.metrics.watch_status().recovered().await;
        let failed: Vec<String> = lock(&ctx.failures).drain().map(|(name, _)| name).collect();
        if failed.is_empty() {
            continue;
        }
        info!(
            policies = failed.len(),
            "the policy watch works again; retrying failed policies now"
        );
        for name in failed {
            ctx.trigger(name);
        }
    }
}

/// Polls the schemas every `schemaPollInterval` and re-enqueues the affected policies.
async fn poll_schemas(ctx: Arc<Context>, shutdown: Shutdown) {
    let period = ctx.config.schema_poll_interval.get();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => {}
        }
        ctx.forget_deleted();
        ctx.mutating.forget_deleted(&ctx.metrics);
        let refreshed = ctx.inputs.refresh().await;
        // After the refresh: the report API is detected in the discovery just read.
        reports::sweep(&ctx).await;
        ctx.metrics.schema_fetch(inputs::fetch_result(&refreshed));
        ctx.metrics.set_schema_cache_kinds(ctx.inputs.kind_count());
        match refreshed {
            Ok(changes) if changes.is_empty() => {}
            // Only documents that keep failing: counted in `vapcheck_schema_fetches_total`,
            // and the affected policies already say so in their status.
            Ok(changes) if changes.affected().next().is_none() => {
                debug!(failed = ?changes.failed, "schema documents still failing");
            }
            Ok(changes) => {
                ctx.webhooks.schemas_changed();
                ctx.engines.schemas_changed();
                // Validating and mutating policies: the same index rules, each kind its own
                // names and queue.
                let validating = enqueue_affected(&ctx.index, &changes, |name| ctx.trigger(name));
                let mutating = enqueue_affected(&ctx.mutating.index, &changes, |name| {
                    ctx.metrics.workqueue_add();
                    // No receiver (standby) is fine: the new leader checks everything.
                    let _ = ctx.mutating.triggers.send(name);
                });
                info!(
                    added = changes.added.len(),
                    changed = changes.changed.len(),
                    removed = changes.removed.len(),
                    policies = validating,
                    mutating_policies = mutating,
                    "schemas changed; re-checking affected policies"
                );
            }
            Err(e) => warn!(error = %e, "schema poll failed; keeping the previous schemas"),
        }
    }
}

/// Re-enqueues with `trigger` the policies of `index` that `changes` can affect; returns how
/// many.
fn enqueue_affected(
    index: &Mutex<TriggerIndex>,
    changes: &crate::schema::Changes,
    trigger: impl Fn(String),
) -> usize {
    let affected = lock(index).affected(changes.affected());
    let n = affected.len();
    for name in affected {
        trigger(name);
    }
    n
}

/// This replica's leader election identity: `POD_NAME`, else host name and process id.
pub fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "vapcheck".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Runs the controller (and, with leader election, the lease) until `shutdown` is triggered.
pub async fn run(
    ctx: Arc<Context>,
    readiness: Readiness,
    lease_namespace: String,
    identity: String,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let poller = tokio::spawn(poll_schemas(Arc::clone(&ctx), shutdown.clone()));
    let publisher = lock(&ctx.queued_events).take().map(|queued| {
        tokio::spawn(event_queue::publish_with_recorder(
            queued,
            ctx.fence.clone(),
            ctx.recorder.clone(),
            ctx.client.clone(),
            ctx.identity.clone(),
        ))
    });
    let election = ctx.config.leader_election.clone();
    let result = if !election.enabled {
        ctx.fence.allow_always();
        readiness.set_election(ElectionState::Leading);
        ctx.metrics.set_leader(&election.lease_name, true);
        run_controller(Arc::clone(&ctx), shutdown_future(&shutdown)).await;
        Ok(())
    } else {
        lead(&ctx, &readiness, &lease_namespace, &identity, &shutdown).await
    };
    poller.abort();
    if let Some(publisher) = publisher {
        publisher.abort();
    }
    result
}

/// A `Send + Sync` future that completes on shutdown (what `graceful_shutdown_on` takes).
fn shutdown_future(shutdown: &Shutdown) -> impl Future<Output = ()> + Send + Sync + 'static {
    let shutdown = shutdown.clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown.wait().await;
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

async fn lead(
    ctx: &Arc<Context>,
    readiness: &Readiness,
    namespace: &str,
    identity: &str,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let election = &ctx.config.leader_election;
    let lease_name = election.lease_name.clone();
    let timing = lease::Timing {
        lease_duration: election.lease_duration.get(),
        renew_deadline: election.renew_deadline.get(),
    };
    let elector = lease::Elector::new(
        Api::namespaced(ctx.client.clone(), namespace),
        &lease_name,
        identity,
        FIELD_MANAGER,
        timing,
        ctx.fence.clone(),
    );
    let (leading_tx, mut leading_rx) = tokio::sync::watch::channel(false);
    let mut lease_task = tokio::spawn(elector.run(leading_tx));
    readiness.set_election(ElectionState::Standby);
    ctx.metrics.set_leader(&lease_name, false);
    info!(lease = %format!("{namespace}/{lease_name}"), identity, "waiting for the lease");
    let mut running: Option<(tokio::task::JoinHandle<()>, Shutdown)> = None;
    loop {
        let leading = *leading_rx.borrow_and_update();
        match (leading, running.is_some()) {
            (true, false) => {
                info!(identity, "acquired the lease; starting the controller");
                readiness.set_election(ElectionState::Leading);
                ctx.metrics.set_leader(&lease_name, true);
                let stop = Shutdown::default();
                let task = tokio::spawn(run_controller(Arc::clone(ctx), shutdown_future(&stop)));
                running = Some((task, stop));
            }
            (false, true) => {
                // The fence already stops writes; stop the controller too (its next leader
                // term starts with a fresh list).
                warn!(identity, "lost the lease; stopping all writes");
                ctx.fence.revoke();
                readiness.set_election(ElectionState::Standby);
                ctx.metrics.set_leader(&lease_name, false);
                if let Some((task, _)) = running.take() {
                    task.abort();
                    let _ = task.await;
                }
                *lock(&ctx.store) = None;
                ctx.metrics.watch_status().stop();
            }
            _ => {}
        }
        tokio::select! {
            _ = shutdown.wait() => break,
            changed = leading_rx.changed() => {
                if changed.is_err() {
                    error!("the leader election task stopped");
                    readiness.set_election(ElectionState::Failed);
                    break;
                }
            }
        }
    }
    // Graceful: let in-flight reconciles finish, then release the lease.
    if let Some((task, stop)) = running.take() {
        stop.trigger();
        if tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .is_err()
        {
            warn!("in-flight reconciles did not finish within 20s");
        }
    }
    ctx.fence.revoke();
    ctx.metrics.set_leader(&lease_name, false);
    // Dropping the receiver makes the elector release the lease and return.
    drop(leading_rx);
    if tokio::time::timeout(Duration::from_secs(10), &mut lease_task)
        .await
        .is_err()
    {
        warn!("releasing the lease timed out");
        lease_task.abort();
    }
    Ok(())
}

/// The whole `vapcheck controller` process: client, start-up checks, metrics and health
/// servers, signal handling, schema polling, leader election and the controller. Returns when
/// SIGTERM or SIGINT was handled (Ok) or start-up failed (Err, with a message for humans).
pub async fn main(config: Config) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let health = Health::default();
    let readiness = health.readiness();
    let shutdown = Shutdown::default();

    let mut kube_config = kube::Config::infer().await.map_err(|e| {
        anyhow::anyhow!(
            "no Kubernetes cluster to talk to: neither an in-cluster service account nor a usable KUBECONFIG ({e})"
        )
    })?;
    // No silent retries in the client: kube-client 5's default retries 429, 503 and 504 up to
    // 15 times, each pause the larger of Retry-After and a doubling backoff capped at 1,000 s
    // (kube-client `client/retry.rs`, `RetryPolicy::server_retry`), with nothing logged or
    // counted meanwhile. kube-apiserver answers 429 while a watch cache is re-initialising
    // (k8s.io/apiserver `storage/cacher/cacher.go`, `Cacher.GetList`: "storage is
    // (re)initializing"), so after an etcd restart a list could stall silently for longer than
    // the recovery bound. Failures surface instead, where vapcheck's own bounded backoffs handle
    // them and the metrics count them: the watches' (`watch.rs`, at most 2 s), the reconciles'
    // (`error_policy`, with a retry at once when the policy watch recovers), the lease's.
    kube_config.default_retry = false;
    let url = kube_config.cluster_url.clone();
    let kubeconfig_namespace = kube_config.default_namespace.clone();
    let host = url.host().unwrap_or_default().to_owned();
    let client = kube::client::ClientBuilder::try_from(kube_config)
        .map_err(|e| anyhow::anyhow!("cannot build a client for {url}: {e}"))?
        .with_layer(&metrics.rest_client_layer(host))
        .build();
    let server = client
        .apiserver_version()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the Kubernetes API server at {url}: {e}"))?;
    info!(server = %url, version = %server.git_version, "connected");

    let lease_namespace = crate::config::resolve_lease_namespace(
        &config.leader_election.lease_namespace,
        Some(&kubeconfig_namespace),
    );
    let needs_lease = config
        .leader_election
        .enabled
        .then_some(lease_namespace.as_str());
    let missing = crate::health::preflight::check_permissions(
        &client,
        needs_lease,
        config.metrics.secure.enabled && config.metrics.secure.authorize,
    )
    .await
    .map_err(|e| anyhow::anyhow!("cannot check this identity's permissions: {e}"))?;
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
        anyhow::bail!("{}", list.join("; "));
    }

    readiness.attach_watch(metrics.watch_status().clone());
    let servers = HttpServers::bind(
        &config,
        metrics.clone(),
        health.clone(),
        Some(client.clone()),
    )
    .await?;
    info!(
        metrics = %servers.metrics_addr().map(|a| a.to_string()).unwrap_or_default(),
        health = %servers.health_addr().map(|a| a.to_string()).unwrap_or_default(),
        "serving metrics and health probes"
    );
    let http = tokio::spawn(servers.run(shutdown.clone()));
    let heartbeat = health.spawn_heartbeat(Duration::from_secs(5));

    // Signals: the first SIGTERM/SIGINT starts the graceful shutdown.
    {
        let shutdown = shutdown.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("shutting down");
            readiness.set_shutting_down();
            shutdown.trigger();
        });
    }

    let inputs = Arc::new(
        LiveInputs::new(client.clone(), &config, &server).map_err(|e| anyhow::anyhow!(e))?,
    );
    // The first read of discovery and schemas; retried until it works or we are stopped.
    let mut delay = Duration::from_millis(500);
    loop {
        // Counted like the later polls, so the first fetch (and its failures) show.
        let refreshed = inputs.refresh().await;
        metrics.schema_fetch(inputs::fetch_result(&refreshed));
        match refreshed {
            Ok(_) => break,
            Err(e) => {
                warn!(error = %e, "reading discovery and schemas failed; retrying");
                tokio::select! {
                    _ = shutdown.wait() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
    metrics.set_schema_cache_kinds(inputs.kind_count());
    readiness.set_caches_synced(true);

    let identity = identity();
    let ctx = Context::new(client, config, inputs, metrics, identity.clone());
    let result = run(ctx, readiness, lease_namespace, identity, shutdown.clone()).await;
    shutdown.trigger();
    heartbeat.abort();
    let _ = http.await;
    result
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
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
