//! MutatingAdmissionPolicyBindings in the cluster (issue 34): what each binding will do, by
//! the same analysis `vapcheck check` runs ([`crate::bindings::analyse_mutating`]), as
//! [`super::bindings`] does it for ValidatingAdmissionPolicyBindings.
//!
//! - [`watch`] keeps a store of every MutatingAdmissionPolicyBinding (started by the
//!   MutatingAdmissionPolicy controller once the API server serves that group-version) and
//!   re-checks the policy a binding names (and the one it named before) on every change;
//! - each reconcile of a MutatingAdmissionPolicy analyses its bindings
//!   ([`binding_reports`]) with the param objects of its `paramKind` (the same metadata-only
//!   param watches as validating policies: [`super::bindings::BindingState::param_access`]),
//!   and [`publish`] writes a report per binding and, as the leader, an Event on each binding
//!   whose verdict is new or changed (a MutatingAdmissionPolicy has no status to carry a
//!   `BindingsEffective` condition).
//!
//! - [`watch_orphans`] gives a binding whose policy does not exist (created so, or its policy
//!   deleted) the `Inactive` verdict, as an Event (it has no policy whose check would report it).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use crate::bindings::{
    BindingReport, MutatingBindingInput, MutatingPolicyInput, ParamScope, Verdict, analyse_mutating,
};
use crate::policy::PolicyStatus;
use crate::reports::{Subject, SubjectKind};

use super::bindings::{ParamAccess, retarget};
use super::watch::{Watched, watch_with_refusals};
use super::{Context, ReconcileError, lock};

/// `vapcheck_watch_forbidden`'s resource label for the bindings' list/watch.
pub const RESOURCE: &str = "mutatingadmissionpolicybindings.admissionregistration.k8s.io";

/// How long a reconcile waits for the bindings' first list (as for validating bindings:
/// past it, the policy's findings are published without its bindings' verdicts, and the
/// first list re-checks the policy).
const FIRST_LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The bindings store and the verdicts last reported.
#[derive(Default)]
pub struct MutatingBindingState {
    store: Mutex<Option<Store<MutatingAdmissionPolicyBinding>>>,
    /// Why the list is refused (403), while it is.
    refused: Mutex<Option<String>>,
    /// The policies whose reconcile asked for the bindings before their first list.
    waiting: Mutex<HashSet<String>>,
    /// Binding name → (uid, the last verdict reported on it).
    verdicts: Mutex<HashMap<String, (String, Verdict)>>,
}

impl MutatingBindingState {
    /// The bindings that name `policy`, once the first list is done.
    async fn bindings_of(
        &self,
        policy: &str,
    ) -> Result<Vec<Arc<MutatingAdmissionPolicyBinding>>, String> {
        if let Some(why) = lock(&self.refused).clone() {
            return Err(why);
        }
        lock(&self.waiting).insert(policy.to_owned());
        let store = lock(&self.store)
            .clone()
            .ok_or("the MutatingAdmissionPolicyBinding watch is not running")?;
        tokio::time::timeout(FIRST_LIST_TIMEOUT, store.wait_until_ready())
            .await
            .map_err(|_| "the MutatingAdmissionPolicyBindings have not been listed yet".to_owned())?
            .map_err(|_| "the MutatingAdmissionPolicyBinding watch stopped".to_owned())?;
        lock(&self.waiting).remove(policy);
        Ok(store
            .state()
            .into_iter()
            .filter(|b| {
                b.spec
                    .as_ref()
                    .and_then(|s| s.policy_name.as_deref())
                    .is_some_and(|p| p == policy)
            })
            .collect())
    }

    /// Name → uid of every binding in the store (`None` while the watch does not run or has
    /// not listed yet).
    pub(super) fn present(&self) -> Option<HashMap<String, String>> {
        super::reports::present_in(lock(&self.store).clone())
    }

    /// A reference to the binding `name` for an Event (with its uid once it is in the store).
    fn binding_ref(&self, name: &str) -> k8s_openapi::api::core::v1::ObjectReference {
        let stored = lock(&self.store)
            .clone()
            .and_then(|s| s.get(&reflector::ObjectRef::new(name)));
        k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("admissionregistration.k8s.io/v1".into()),
            kind: Some("MutatingAdmissionPolicyBinding".into()),
            name: Some(name.to_owned()),
            uid: stored.as_ref().and_then(|b| b.metadata.uid.clone()),
            resource_version: stored.and_then(|b| b.metadata.resource_version.clone()),
            ..Default::default()
        }
    }

    /// Forgets the verdicts of bindings that are no longer in the store.
    fn forget_gone(&self, present: &HashSet<String>) {
        lock(&self.verdicts).retain(|name, _| present.contains(name));
    }
}

/// The report of a stored binding whose MutatingAdmissionPolicy does not exist: kube-apiserver
/// skips it (k8s.io/apiserver v0.37.1 `pkg/admission/plugin/policy/generic/policy_source.go`,
/// `calculatePolicyData`, shared by both plugins; `e2e_map_binding_verdicts`, case
/// `no-policy`), so it does nothing.
fn orphan_report(binding: &MutatingAdmissionPolicyBinding, policy: &str) -> BindingReport {
    let name = binding.name_any();
    BindingReport {
        reason: format!(
            "binding {name:?} of policy {policy:?}: no MutatingAdmissionPolicy of that name exists; kube-apiserver skips bindings whose policy does not exist, so the binding does nothing"
        ),
        binding: name,
        policy: policy.to_owned(),
        policy_exists: false,
        failure_policy: "Fail".into(),
        validation_actions: Vec::new(),
        params: Vec::new(),
        overlap: None,
        verdict: Verdict::Inactive,
        denial_message: None,
        notes: Vec::new(),
    }
}

/// How often [`watch_orphans`] looks for bindings whose policy does not exist.
const ORPHAN_SWEEP: std::time::Duration = std::time::Duration::from_secs(1);

/// Once a second, while the policies and the bindings are listed, each binding whose
/// MutatingAdmissionPolicy does not exist gets the `Inactive` verdict: an Event when that is new
/// for it ([`publish_events`]). No report: as for validating bindings, the verdict of a binding
/// without policy is an Event only. When the policy appears, its check reports the new verdict.
pub async fn watch_orphans(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(ORPHAN_SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Both listed: before that, a missing policy may just not be read yet.
        let (Some(policies), Some(_)) = (ctx.mutating.present(), ctx.mutating_bindings.present())
        else {
            continue;
        };
        let Some(store) = lock(&ctx.mutating_bindings.store).clone() else {
            continue;
        };
        let reports: Vec<BindingReport> = store
            .state()
            .iter()
            .filter_map(|b| {
                let policy = policy_of(b)?;
                (!policies.contains_key(&policy)).then(|| orphan_report(b, &policy))
            })
            .collect();
        publish_events(&ctx, &reports);
    }
}

/// The name of the policy `binding` names, if any.
fn policy_of(binding: &MutatingAdmissionPolicyBinding) -> Option<String> {
    binding
        .spec
        .as_ref()
        .and_then(|s| s.policy_name.clone())
        .filter(|p| !p.is_empty())
}

/// The analysis of `policy`'s bindings; `Err` when the bindings or its params cannot be read
/// (yet): why.
pub async fn binding_reports(
    ctx: &Arc<Context>,
    policy: &MutatingAdmissionPolicy,
    computed: &PolicyStatus,
) -> Result<Vec<BindingReport>, String> {
    let name = policy.name_any();
    let bindings = ctx.mutating_bindings.bindings_of(&name).await?;
    let param_kind = policy.spec.as_ref().and_then(|s| s.param_kind.as_ref());
    let any_ref = bindings
        .iter()
        .any(|b| b.spec.as_ref().is_some_and(|s| s.param_ref.is_some()));
    let (params, scope) = match ctx.bindings.param_access(ctx, param_kind, any_ref).await? {
        ParamAccess::NotNeeded => (Vec::new(), ParamScope::Unknown),
        ParamAccess::NotServed => (Vec::new(), ParamScope::NoSuchKind),
        ParamAccess::Objects(objects, scope) => (objects, scope),
        ParamAccess::Unavailable(why) => {
            return Err(format!(
                "the params of MutatingAdmissionPolicy {name:?} cannot be read: {why}"
            ));
        }
    };
    let policies = [MutatingPolicyInput {
        policy,
        // A stored policy exists whatever a create would say now.
        stored: true,
        warning_kinds: crate::bindings::warning_kinds(computed),
        param_scope: scope,
    }];
    let inputs: Vec<MutatingBindingInput<'_>> = bindings
        .iter()
        .map(|b| MutatingBindingInput {
            binding: b,
            stored: true,
        })
        .collect();
    Ok(analyse_mutating(&policies, &inputs, &params))
}

/// Writes the report of each binding of `reports` and, as the leader, an Event on each
/// binding whose verdict is new to this replica or changed since it last reported one.
pub async fn publish(ctx: &Arc<Context>, reports: &[BindingReport]) -> Result<(), ReconcileError> {
    for r in reports {
        let uid = ctx
            .mutating_bindings
            .binding_ref(&r.binding)
            .uid
            .unwrap_or_default();
        let subject = Subject {
            kind: SubjectKind::MutatingBinding,
            name: r.binding.clone(),
            uid,
        };
        super::reports::publish(ctx, subject, &crate::reports::binding_entries(r)).await?;
    }
    publish_events(ctx, reports);
    Ok(())
}

/// As the leader, an Event on each binding of `reports` whose verdict is new to this replica or
/// changed since it last reported one.
fn publish_events(ctx: &Context, reports: &[BindingReport]) {
    if !ctx.fence.may_write() {
        return;
    }
    for r in reports {
        let reference = ctx.mutating_bindings.binding_ref(&r.binding);
        let uid = reference.uid.clone().unwrap_or_default();
        let new = {
            let mut verdicts = lock(&ctx.mutating_bindings.verdicts);
            let before = verdicts.insert(r.binding.clone(), (uid.clone(), r.verdict.clone()));
            before.is_none_or(|(u, v)| u != uid || v != r.verdict)
        };
        if !new {
            continue;
        }
        ctx.events
            .send(super::bindings::verdict_event(r), reference);
    }
}

/// Watches every MutatingAdmissionPolicyBinding into the state's store until aborted; each
/// change re-checks the policy the binding names and, when it was re-pointed, the one it
/// named. A refused list (403: no list on the bindings in the ClusterRole) leaves the
/// policies' bindings unevaluated until a list works again (then every waiting policy is
/// checked again); a refused watch alone leaves it to the repeated lists
/// ([`watch_with_refusals`]).
pub async fn watch(ctx: Arc<Context>) {
    let api: Api<MutatingAdmissionPolicyBinding> = Api::all(ctx.client.clone());
    let mut writer = reflector::store::Writer::<MutatingAdmissionPolicyBinding>::default();
    let reader = writer.as_reader();
    *lock(&ctx.mutating_bindings.store) = Some(reader.clone());
    info!("watching MutatingAdmissionPolicyBindings");
    // Each binding's policy and resourceVersion, as last seen.
    let mut targets: HashMap<String, (String, Option<String>)> = HashMap::new();
    let metrics = ctx.metrics.clone();
    let slim: fn(&mut MutatingAdmissionPolicyBinding) = |b| super::slim::slim_meta(&mut b.metadata);
    let trigger = |policy: String| ctx.mutating.trigger(&ctx.metrics, policy);
    watch_with_refusals(api, RESOURCE, &metrics, slim, |watched| {
        let event = match watched {
            Watched::Event(event) => event,
            Watched::Refused { list: true } => {
                *lock(&ctx.mutating_bindings.refused) = Some(REFUSED.to_owned());
                return;
            }
            Watched::Allowed { list: true } => {
                *lock(&ctx.mutating_bindings.refused) = None;
                for name in ctx.mutating.present().unwrap_or_default().into_keys() {
                    trigger(name);
                }
                return;
            }
            Watched::Refused { list: false } | Watched::Allowed { list: false } => return,
        };
        writer.apply_watcher_event(&event);
        match event {
            watcher::Event::Apply(b) | watcher::Event::InitApply(b) => {
                let policy = policy_of(&b);
                let version = b.metadata.resource_version.clone();
                for p in retarget(&mut targets, b.name_any(), policy, version) {
                    trigger(p);
                }
            }
            watcher::Event::Delete(b) => {
                if let Some((p, _)) = targets.remove(&b.name_any()) {
                    trigger(p);
                }
                let present: HashSet<String> =
                    reader.state().iter().map(|b| b.name_any()).collect();
                ctx.mutating_bindings.forget_gone(&present);
            }
            watcher::Event::Init => {}
            watcher::Event::InitDone => {
                // A relist may have missed deletions: forget what is gone, re-check its policy.
                let present: HashSet<String> =
                    reader.state().iter().map(|b| b.name_any()).collect();
                let gone: Vec<String> = targets
                    .keys()
                    .filter(|b| !present.contains(*b))
                    .cloned()
                    .collect();
                for b in gone {
                    if let Some((p, _)) = targets.remove(&b) {
                        trigger(p);
                    }
                }
                ctx.mutating_bindings.forget_gone(&present);
                let waited: Vec<String> = lock(&ctx.mutating_bindings.waiting).drain().collect();
                debug!(
                    bindings = present.len(),
                    waited = waited.len(),
                    "MutatingAdmissionPolicyBindings listed"
                );
                for policy in waited {
                    trigger(policy);
                }
            }
        }
    })
    .await;
}

/// Why a policy's bindings are not evaluated while their list is refused.
const REFUSED: &str = "vapcheck may not list mutatingadmissionpolicybindings.admissionregistration.k8s.io: grant its service account list and watch on them (docs/rbac.md)";
