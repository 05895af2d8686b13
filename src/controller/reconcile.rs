//! One reconcile of a ValidatingAdmissionPolicy: check it over the live inputs, write its
//! status (server-side apply on `/status`, skipped when the object already says the same),
//! add the `BindingsEffective` condition and the bindings' Events, and the retry policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::config::StatusMode;
use crate::metrics::{PolicyState, ReconcileResult, StatusWriteResult};
use crate::policy::PolicyStatus;

use super::index::Dependencies;
use super::status::{
    FIELD_MANAGER, apply_body, desired_status, is_up_to_date, overwritten_by_other_manager,
    warnings_of,
};
use super::stored::StoredPolicy;

use super::{Context, ReconcileError, lock};
use super::{bindings, events, reports, suppression};

/// Whether the computed status says kube-apiserver would reject the stored policy if it were
/// created now (`AcceptedOnCreate=False`).
pub(super) fn rejected_on_create(computed: &PolicyStatus) -> bool {
    computed
        .conditions
        .iter()
        .any(|c| c.type_ == crate::policy::status::ACCEPTED_ON_CREATE && c.status == "False")
}

/// The `vapcheck_policies` state of a check result (both policy kinds): from its findings
/// ([`PolicyState::of_status`]).
pub(super) fn state_of(computed: &PolicyStatus) -> PolicyState {
    PolicyState::of_status(computed)
}

/// Reconciles one policy: check, compare, write if needed, record an event on change.
pub(super) async fn reconcile(
    stored: Arc<StoredPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
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
pub(super) enum Outcome {
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

pub(super) async fn reconcile_inner(
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
pub(super) enum Checked {
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
pub(super) async fn check_and_write(
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
pub(super) async fn add_bindings_condition(
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
pub(super) fn publish_binding_events(
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
        let reference = ctx.bindings.binding_ref(&report.binding);
        ctx.events.send(bindings::verdict_event(report), reference);
    }
}

/// The metrics label of a skip reason.
pub(super) fn skip_label(reason: &crate::policy::SkipReason) -> crate::metrics::SkipReason {
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
pub(super) fn error_policy(
    policy: Arc<StoredPolicy>,
    _error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
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
