//! Bindings and params in the cluster (issue 13): the shell around [`crate::bindings`].
//!
//! - [`watch_bindings`] keeps a store of every ValidatingAdmissionPolicyBinding and re-checks
//!   the policy a binding names (and the one it named before) on every change;
//! - [`BindingState::param_access`] starts, on first need, a metadata-only watch of a param
//!   kind some bound policy names (resolved through the discovery snapshot; namespaced or
//!   cluster-scoped) and re-checks the policies of that kind on every change of its objects.
//!   Only kinds that bindings need are watched, so vapcheck needs list/watch only on those
//!   (docs/bindings.md, "In the cluster");
//! - [`binding_reports`] gathers the analysis' inputs for one policy; the reconcile turns the
//!   reports into the `BindingsEffective` condition, Events on the bindings and metrics.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ParamKind, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use crate::bindings::{
    BindingInput, BindingReport, ParamObject, ParamScope, PolicyInput, Verdict, analyse,
    param_kind_gvk, param_resource,
};
use crate::metrics::BINDINGS_RESOURCE;
use crate::policy::{Gvk, PolicyStatus};

use super::watch::{Watched, watch_with_refusals};
use super::{AbortOnDrop, Context, lock};

/// How long a reconcile waits for the first list of the bindings or of a param kind. Past
/// it, the policy's type-check results are written without the binding analysis (the
/// `BindingsEffective` condition then says it is not evaluated yet), and the policy is
/// checked again as soon as the list arrives: the bindings' first list re-checks every policy
/// that waited for it ([`BindingState::waiting`]), a param kind's re-checks every policy of
/// that kind. A long wait held up the type-check results of whole terms: after an etcd
/// restart, kube-apiserver's bindings cache can take over 10 s to be ready again while the
/// policies' is (e2e_faults, one_leader_converges_within_bound_across_etcd_restarts, failed
/// on 10.9 s with a 10 s wait here).
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// The bindings store and the param watches of one running controller.
#[derive(Default)]
pub struct BindingState {
    bindings: Mutex<Option<Store<ValidatingAdmissionPolicyBinding>>>,
    /// Why the binding list/watch is refused (403), while it is.
    bindings_refused: Mutex<Option<String>>,
    /// The policies whose reconcile asked for the bindings before their first list was done
    /// (re-checked when it is).
    waiting: Mutex<HashSet<String>>,
    params: Mutex<HashMap<Gvk, Arc<ParamWatch>>>,
    /// The last verdict seen per binding (for Events and the metric).
    verdicts: Mutex<HashMap<String, Verdict>>,
}

/// A metadata-only watch of one param kind.
struct ParamWatch {
    store: Store<PartialObjectMeta<DynamicObject>>,
    namespaced: bool,
    /// Why the last list or watch failed, while it fails (e.g. 403: no RBAC for the kind).
    failing: Arc<Mutex<Option<String>>>,
    _task: AbortOnDrop,
}

/// What a reconcile knows about a policy's param kind.
pub enum ParamAccess {
    /// The policy has no (parseable) paramKind, or no binding of it has a paramRef.
    NotNeeded,
    /// The kind is not served (its REST mapping fails in kube-apiserver too).
    NotServed,
    /// The objects of the kind, and its scope.
    Objects(Vec<ParamObject>, ParamScope),
    /// The objects cannot be read: why.
    Unavailable(String),
}

impl BindingState {
    /// The bindings that name `policy`, once the first list is done.
    pub async fn bindings_of(
        &self,
        policy: &str,
    ) -> Result<Vec<Arc<ValidatingAdmissionPolicyBinding>>, String> {
        if let Some(why) = lock(&self.bindings_refused).clone() {
            return Err(why);
        }
        // Noted before the store is looked at, so that a first list completing meanwhile
        // still re-checks this policy.
        lock(&self.waiting).insert(policy.to_owned());
        let store = lock(&self.bindings)
            .clone()
            .ok_or("the binding watch is not running")?;
        tokio::time::timeout(FIRST_LIST_TIMEOUT, store.wait_until_ready())
            .await
            .map_err(|_| "the bindings have not been listed yet".to_owned())?
            .map_err(|_| "the binding watch stopped".to_owned())?;
        lock(&self.waiting).remove(policy);
        Ok(store
            .state()
            .into_iter()
            .filter(|b| b.spec.policy_name == policy)
            .collect())
    }

    /// The objects of a policy's param kind `param_kind`, starting its watch on first need;
    /// `any_ref`: whether some binding of the policy has a `paramRef` (else none are needed).
    /// For both policy kinds: the field has the same type and rules in both.
    pub async fn param_access(
        &self,
        ctx: &Arc<Context>,
        param_kind: Option<&ParamKind>,
        any_ref: bool,
    ) -> Result<ParamAccess, String> {
        let Some(gvk) = param_kind.and_then(param_kind_gvk) else {
            return Ok(ParamAccess::NotNeeded);
        };
        if !any_ref {
            return Ok(ParamAccess::NotNeeded);
        }
        let watch = {
            let existing = lock(&self.params).get(&gvk).cloned();
            match existing {
                Some(w) => w,
                None => {
                    let groups = ctx
                        .inputs
                        .api_groups()
                        .ok_or("discovery has not been read yet")?;
                    let Some(resource) = param_resource(&groups, &gvk) else {
                        return Ok(ParamAccess::NotServed);
                    };
                    let w = Arc::new(start_param_watch(
                        Arc::clone(ctx),
                        &gvk,
                        &resource.name,
                        resource.namespaced,
                    ));
                    lock(&self.params).entry(gvk.clone()).or_insert(w).clone()
                }
            }
        };
        let ready = tokio::time::timeout(FIRST_LIST_TIMEOUT, watch.store.wait_until_ready()).await;
        if let Some(why) = lock(&watch.failing).clone() {
            return Ok(ParamAccess::Unavailable(why));
        }
        if ready.is_err() {
            return Err(format!("the objects of {gvk} have not been listed yet"));
        }
        let api_version = if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        let objects = watch
            .store
            .state()
            .iter()
            .map(|o| ParamObject {
                api_version: api_version.clone(),
                kind: gvk.kind.clone(),
                name: o.name_any(),
                namespace: o.metadata.namespace.clone(),
                labels: o
                    .metadata
                    .labels
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect::<BTreeMap<_, _>>(),
            })
            .collect();
        let scope = if watch.namespaced {
            ParamScope::Namespaced
        } else {
            ParamScope::Cluster
        };
        Ok(ParamAccess::Objects(objects, scope))
    }

    /// Records `reports`' verdicts; returns the reports whose verdict differs from the last one
    /// seen for that binding (`None` before: first sight), and the counts per verdict of all
    /// bindings seen.
    pub fn record_verdicts<'r>(
        &self,
        reports: &'r [BindingReport],
    ) -> (Vec<(&'r BindingReport, bool)>, HashMap<&'static str, u64>) {
        let mut verdicts = lock(&self.verdicts);
        let mut changed = Vec::new();
        for r in reports {
            match verdicts.insert(r.binding.clone(), r.verdict.clone()) {
                Some(old) if old == r.verdict => {}
                Some(_) => changed.push((r, false)),
                None => changed.push((r, true)),
            }
        }
        let mut counts: HashMap<&'static str, u64> = HashMap::new();
        for v in verdicts.values() {
            *counts.entry(verdict_label(v)).or_default() += 1;
        }
        (changed, counts)
    }

    /// Forgets the bindings that no longer exist (for the metric).
    pub fn forget_bindings(&self, present: &dyn Fn(&str) -> bool) -> HashMap<&'static str, u64> {
        let mut verdicts = lock(&self.verdicts);
        verdicts.retain(|name, _| present(name));
        let mut counts: HashMap<&'static str, u64> = HashMap::new();
        for v in verdicts.values() {
            *counts.entry(verdict_label(v)).or_default() += 1;
        }
        counts
    }

    /// Name → uid of every binding in the store (`None` while the binding watch does not run).
    pub fn present(&self) -> Option<HashMap<String, String>> {
        super::reports::present_in(lock(&self.bindings).clone())
    }

    /// A reference to the binding `name` for an Event (with its uid once it is in the store).
    pub fn binding_ref(&self, name: &str) -> k8s_openapi::api::core::v1::ObjectReference {
        let stored = lock(&self.bindings)
            .clone()
            .and_then(|s| s.get(&reflector::ObjectRef::new(name)));
        k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("admissionregistration.k8s.io/v1".into()),
            kind: Some("ValidatingAdmissionPolicyBinding".into()),
            name: Some(name.to_owned()),
            uid: stored.as_ref().and_then(|b| b.metadata.uid.clone()),
            resource_version: stored.and_then(|b| b.metadata.resource_version.clone()),
            ..Default::default()
        }
    }

    /// The policies that asked for the bindings before they were listed, once each: the
    /// first list (or a relist) re-checks them.
    pub fn take_waiting(&self) -> Vec<String> {
        lock(&self.waiting).drain().collect()
    }

    /// Stops every watch (the controller stopped: another replica leads).
    pub fn clear(&self) {
        *lock(&self.bindings) = None;
        lock(&self.waiting).clear();
        lock(&self.params).clear();
    }
}

/// The metric label of a verdict.
pub fn verdict_label(v: &Verdict) -> &'static str {
    match v {
        Verdict::DeniesAllMatching => "denies_all",
        Verdict::Inactive => "inactive",
        Verdict::Evaluates => "evaluates",
        Verdict::EvaluatesWithWarnings(_) => "evaluates_with_warnings",
    }
}

/// The analysis of `policy`'s bindings; `Err` when the inputs are not known yet (retry).
/// The second value says why the params cannot be read, if so.
pub async fn binding_reports(
    ctx: &Arc<Context>,
    policy: &ValidatingAdmissionPolicy,
    computed: &PolicyStatus,
) -> Result<(Vec<BindingReport>, Option<String>), String> {
    let name = policy.name_any();
    let bindings = ctx.bindings.bindings_of(&name).await?;
    let param_kind = policy.spec.as_ref().and_then(|s| s.param_kind.as_ref());
    let any_ref = bindings.iter().any(|b| b.spec.param_ref.is_some());
    let access = ctx.bindings.param_access(ctx, param_kind, any_ref).await?;
    let (params, scope, unavailable) = match access {
        ParamAccess::NotNeeded => (Vec::new(), ParamScope::Unknown, None),
        ParamAccess::NotServed => (Vec::new(), ParamScope::NoSuchKind, None),
        ParamAccess::Objects(objects, scope) => (objects, scope, None),
        ParamAccess::Unavailable(why) => (Vec::new(), ParamScope::Unknown, Some(why)),
    };
    let policies = [PolicyInput {
        policy,
        // A stored policy exists whatever a create would say now.
        stored: true,
        warning_kinds: crate::bindings::warning_kinds(computed),
        param_scope: scope,
    }];
    let inputs: Vec<BindingInput<'_>> = bindings
        .iter()
        .map(|b| BindingInput {
            binding: b.as_ref(),
            stored: true,
        })
        .collect();
    Ok((analyse(&policies, &inputs, &params), unavailable))
}

/// Watches every binding into the state's store until the controller stops; each change
/// re-checks the policy the binding names and, when it was re-pointed, the one it named.
///
/// A refusal (403: the ClusterRole lacks list or watch on the bindings, e.g. revoked while
/// vapcheck runs) does not stop the controller ([`watch_with_refusals`]: logged once with the
/// resource and the API server's reason, `vapcheck_watch_forbidden` 1). A refused list makes
/// every policy's `BindingsEffective` `Unknown`/`NotEvaluated`, naming the grant to add, until
/// a list works again; then every policy is checked again. A refused watch alone leaves the
/// analysis to the lists, repeated after each refusal (at most 2 s apart).
pub async fn watch_bindings(ctx: Arc<Context>) {
    let api: Api<ValidatingAdmissionPolicyBinding> = Api::all(ctx.client.clone());
    let mut writer = reflector::store::Writer::<ValidatingAdmissionPolicyBinding>::default();
    let reader = writer.as_reader();
    *lock(&ctx.bindings.bindings) = Some(reader.clone());
    // Each binding's policy and resourceVersion, as last seen.
    let mut targets: HashMap<String, (String, Option<String>)> = HashMap::new();
    let metrics = ctx.metrics.clone();
    let slim: fn(&mut ValidatingAdmissionPolicyBinding) =
        |b| super::slim::slim_meta(&mut b.metadata);
    watch_with_refusals(api, BINDINGS_RESOURCE, &metrics, slim, |watched| {
        let trigger = |policy: String| ctx.trigger(policy);
        let event = match watched {
            Watched::Event(event) => event,
            Watched::Refused { list: true } => {
                *lock(&ctx.bindings.bindings_refused) = Some(BINDINGS_REFUSED.to_owned());
                trigger_all_policies(&ctx);
                return;
            }
            Watched::Allowed { list: true } => {
                *lock(&ctx.bindings.bindings_refused) = None;
                trigger_all_policies(&ctx);
                return;
            }
            Watched::Refused { list: false } | Watched::Allowed { list: false } => return,
        };
        writer.apply_watcher_event(&event);
        match event {
            watcher::Event::Apply(b) | watcher::Event::InitApply(b) => {
                let policy = Some(b.spec.policy_name.clone()).filter(|p| !p.is_empty());
                let version = b.metadata.resource_version.clone();
                for p in retarget(&mut targets, b.name_any(), policy, version) {
                    trigger(p);
                }
            }
            watcher::Event::Delete(b) => {
                if let Some((p, _)) = targets.remove(&b.name_any()) {
                    trigger(p);
                }
                let present: std::collections::HashSet<String> =
                    reader.state().iter().map(|b| b.name_any()).collect();
                let counts = ctx.bindings.forget_bindings(&|n| present.contains(n));
                ctx.metrics.set_binding_verdicts(&counts);
            }
            watcher::Event::Init => {}
            watcher::Event::InitDone => {
                // A relist may have missed deletions: forget what is gone, re-check its policy.
                let present: std::collections::HashSet<String> =
                    reader.state().iter().map(|b| b.name_any()).collect();
                let gone: Vec<String> = targets
                    .iter()
                    .filter(|(b, _)| !present.contains(*b))
                    .map(|(b, _)| b.clone())
                    .collect();
                for b in gone {
                    if let Some((p, _)) = targets.remove(&b) {
                        trigger(p);
                    }
                }
                let counts = ctx.bindings.forget_bindings(&|n| present.contains(n));
                ctx.metrics.set_binding_verdicts(&counts);
                let waited = ctx.bindings.take_waiting();
                debug!(
                    bindings = present.len(),
                    waited = waited.len(),
                    "bindings listed"
                );
                for policy in waited {
                    trigger(policy);
                }
            }
        }
    })
    .await;
}

/// What `BindingsEffective` says while the bindings' list/watch is refused.
const BINDINGS_REFUSED: &str = "vapcheck may not list validatingadmissionpolicybindings.admissionregistration.k8s.io: grant its service account list and watch on them (docs/rbac.md)";

/// A binding's watch event re-checks the policies it concerns: `targets` keeps each binding's
/// policy and resourceVersion as last seen (binding name → both). Returns the policies to
/// check again: none when a relist hands out the binding unchanged; otherwise the policy it
/// named before (if another) and the one it names now. For both binding kinds.
pub(super) fn retarget(
    targets: &mut HashMap<String, (String, Option<String>)>,
    binding: String,
    policy: Option<String>,
    version: Option<String>,
) -> Vec<String> {
    let before = match &policy {
        Some(p) => targets.insert(binding, (p.clone(), version.clone())),
        None => targets.remove(&binding),
    };
    if before
        .as_ref()
        .is_some_and(|(p, v)| Some(p) == policy.as_ref() && v.is_some() && *v == version)
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some((old, _)) = before.filter(|(old, _)| Some(old) != policy.as_ref()) {
        out.push(old);
    }
    out.extend(policy);
    out
}

/// Asks for a new check of every policy in the controller's store.
fn trigger_all_policies(ctx: &Arc<Context>) {
    let Some(store) = lock(&ctx.store).clone() else {
        return;
    };
    for p in store.state() {
        ctx.trigger(p.name_any());
    }
}

/// How often [`watch_orphans`] looks for bindings whose policy does not exist.
const ORPHAN_SWEEP: Duration = Duration::from_secs(1);

/// Bindings whose policy does not exist have no policy to reconcile: once a second, while the
/// policy and binding stores are listed, each such binding gets the `Inactive` verdict (metric)
/// and, when that is new for it, an Event (a binding created for a missing policy, or whose
/// policy was deleted). When the policy appears, its reconcile records the new verdict.
pub async fn watch_orphans(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(ORPHAN_SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let policies = lock(&ctx.store).clone();
        let bindings = lock(&ctx.bindings.bindings).clone();
        let (Some(policies), Some(bindings)) = (policies, bindings) else {
            continue;
        };
        // Both listed at least once: before that, a missing policy may just not be read yet.
        let listed = futures::FutureExt::now_or_never(policies.wait_until_ready())
            .is_some_and(|r| r.is_ok())
            && futures::FutureExt::now_or_never(bindings.wait_until_ready())
                .is_some_and(|r| r.is_ok());
        if !listed {
            continue;
        }
        let reports: Vec<BindingReport> = bindings
            .state()
            .iter()
            .filter(|b| {
                !b.spec.policy_name.is_empty()
                    && policies
                        .get(&reflector::ObjectRef::new(&b.spec.policy_name))
                        .is_none()
            })
            .map(|b| crate::bindings::orphan_report(b))
            .collect();
        if !reports.is_empty() {
            super::publish_binding_events(&ctx, None, &reports);
        }
    }
}

/// Starts a metadata-only watch of `gvk` (plural `resource`) in every namespace; each change
/// re-checks the policies whose paramKind is that group and kind.
fn start_param_watch(ctx: Arc<Context>, gvk: &Gvk, resource: &str, namespaced: bool) -> ParamWatch {
    let api_resource = kube::discovery::ApiResource {
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        api_version: if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        },
        kind: gvk.kind.clone(),
        plural: resource.to_owned(),
    };
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(ctx.client.clone(), &api_resource);
    let mut writer = reflector::store::Writer::new(api_resource.clone());
    let store = writer.as_reader();
    let failing: Arc<Mutex<Option<String>>> = Arc::default();
    let plural = if gvk.group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{}", gvk.group)
    };
    info!(kind = %gvk, resource = %plural, "watching a param kind");
    let task = {
        let failing = Arc::clone(&failing);
        let gvk = gvk.clone();
        let client_ctx = Arc::clone(&ctx);
        tokio::spawn(async move {
            let metrics = client_ctx.metrics.clone();
            let slim: fn(&mut PartialObjectMeta<DynamicObject>) =
                |o| super::slim::slim_meta(&mut o.metadata);
            // As the bindings' watch: a refused list makes the policies of the kind say
            // ParamsUnavailable; a refused watch alone leaves them to the repeated lists.
            let resource = plural.clone();
            watch_with_refusals(api, &resource, &metrics, slim, |watched| {
                let event = match watched {
                    Watched::Event(event) => event,
                    Watched::Refused { list: true } => {
                        *lock(&failing) = Some(format!(
                            "vapcheck may not list {plural}, the objects of the policy's paramKind {gvk}: grant its service account list and watch on {plural} (docs/rbac.md)"
                        ));
                        trigger_param_kind(&client_ctx, &gvk);
                        return;
                    }
                    Watched::Allowed { list: true } => {
                        // Again after the list's InitDone, now that they can read the params.
                        *lock(&failing) = None;
                        trigger_param_kind(&client_ctx, &gvk);
                        return;
                    }
                    Watched::Refused { list: false } | Watched::Allowed { list: false } => return,
                };
                writer.apply_watcher_event(&event);
                match event {
                    watcher::Event::Init | watcher::Event::InitApply(_) => {}
                    watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                        trigger_param_object(&client_ctx, &gvk, &o.metadata);
                    }
                    watcher::Event::InitDone => trigger_param_kind(&client_ctx, &gvk),
                }
            })
            .await;
        })
    };
    ParamWatch {
        store,
        namespaced,
        failing,
        _task: AbortOnDrop(task),
    }
}

/// Whether `binding`'s paramRef can resolve to the object `meta` (of its policy's param
/// kind): it names the object or selects by labels, in the object's namespace or in the
/// request's (no `paramRef.namespace`). Deliberately wider than the resolution itself
/// (`policy/generic/policy_dispatcher.go` `collectParams`): a selector that matched the
/// object's old labels must see the change too.
fn may_reference(
    binding: &ValidatingAdmissionPolicyBinding,
    meta: &kube::core::ObjectMeta,
) -> bool {
    let Some(r) = binding.spec.param_ref.as_ref() else {
        return false;
    };
    let named = match (&r.name, &r.selector) {
        (Some(name), _) if !name.is_empty() => meta.name.as_deref() == Some(name.as_str()),
        (_, Some(_)) => true,
        _ => false,
    };
    let namespace_ok = match r.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => meta.namespace.as_deref() == Some(ns),
        None => true,
    };
    named && namespace_ok
}

/// Re-checks the policies of param kind `gvk` that have a binding whose paramRef can resolve
/// to the changed object `meta` (all of that kind when the bindings are not listed yet). One
/// ConfigMap changed must not re-check every policy with a ConfigMap paramKind: with 1,000
/// param objects and 200 such policies that was 200,000 re-checks (e2e/bench/bindings).
fn trigger_param_object(ctx: &Arc<Context>, gvk: &Gvk, meta: &kube::core::ObjectMeta) {
    let Some(bindings) = lock(&ctx.bindings.bindings).clone() else {
        return trigger_param_kind(ctx, gvk);
    };
    let names: std::collections::BTreeSet<String> = bindings
        .state()
        .iter()
        .filter(|b| may_reference(b, meta))
        .map(|b| b.spec.policy_name.clone())
        .collect();
    trigger_policies_of_kind(ctx, gvk, |name| names.contains(name));
}

/// Re-checks every stored policy whose paramKind has `gvk`'s group and kind.
fn trigger_param_kind(ctx: &Arc<Context>, gvk: &Gvk) {
    trigger_policies_of_kind(ctx, gvk, |_| true);
}

/// Re-checks the stored policies whose paramKind has `gvk`'s group and kind and whose name
/// `wanted` accepts, and every MutatingAdmissionPolicy of that param kind (their bindings'
/// verdicts depend on the params too: `mutating_bindings`).
fn trigger_policies_of_kind(ctx: &Arc<Context>, gvk: &Gvk, wanted: impl Fn(&str) -> bool) {
    ctx.mutating.trigger_param_kind(&ctx.metrics, gvk);
    let Some(store) = lock(&ctx.store).clone() else {
        return;
    };
    for p in store.state() {
        let same = p
            .param_kind
            .as_ref()
            .and_then(param_kind_gvk)
            .is_some_and(|g| g.group == gvk.group && g.kind == gvk.kind);
        if same && wanted(&p.name_any()) {
            ctx.trigger(p.name_any());
        }
    }
}

/// The Event on a binding for its verdict ([`crate::bindings::condition::binding_event`],
/// action `EvaluateBinding`), for validating and mutating bindings alike.
pub(super) fn verdict_event(
    report: &crate::bindings::BindingReport,
) -> kube::runtime::events::Event {
    use kube::runtime::events::{Event, EventType};
    let event = crate::bindings::condition::binding_event(report);
    Event {
        type_: if event.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.to_owned(),
        note: Some(event.note),
        action: "EvaluateBinding".to_owned(),
        secondary: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{
        ParamRef, ValidatingAdmissionPolicyBindingSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::core::ObjectMeta;
    #[test]
    fn a_binding_event_rechecks_the_policies_it_concerns() {
        let mut targets = HashMap::new();
        let some = |s: &str| Some(s.to_owned());
        // New: its policy.
        assert_eq!(
            retarget(&mut targets, "b".into(), some("p"), some("1")),
            ["p"]
        );
        // A relist handing it out unchanged: nothing.
        assert!(retarget(&mut targets, "b".into(), some("p"), some("1")).is_empty());
        // Changed, same policy: that policy.
        assert_eq!(
            retarget(&mut targets, "b".into(), some("p"), some("2")),
            ["p"]
        );
        // Moved to another policy: the one before, then the new one.
        assert_eq!(
            retarget(&mut targets, "b".into(), some("q"), some("3")),
            ["p", "q"]
        );
        // No policy name any more: the one before.
        assert_eq!(retarget(&mut targets, "b".into(), None, some("4")), ["q"]);
        assert!(targets.is_empty());
        // Without a resourceVersion an unchanged binding is not recognised: checked again.
        assert_eq!(retarget(&mut targets, "c".into(), some("p"), None), ["p"]);
        assert_eq!(retarget(&mut targets, "c".into(), some("p"), None), ["p"]);
    }

    fn binding(param_ref: Option<ParamRef>) -> ValidatingAdmissionPolicyBinding {
        ValidatingAdmissionPolicyBinding {
            metadata: ObjectMeta::default(),
            spec: ValidatingAdmissionPolicyBindingSpec {
                policy_name: "p".into(),
                param_ref,
                ..ValidatingAdmissionPolicyBindingSpec::default()
            },
        }
    }

    fn object(name: &str, namespace: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: namespace.map(Into::into),
            ..ObjectMeta::default()
        }
    }

    #[tokio::test]
    async fn a_policy_that_waited_for_the_bindings_first_list_is_handed_out_once_it_is_done() {
        let state = BindingState::default();
        // No binding watch running yet: no wait, and the policy is remembered.
        assert_eq!(
            state.bindings_of("p1").await.unwrap_err(),
            "the binding watch is not running"
        );
        // A watch whose first list has not arrived: the wait ends after FIRST_LIST_TIMEOUT.
        let (reader, mut writer) = reflector::store::<ValidatingAdmissionPolicyBinding>();
        *lock(&state.bindings) = Some(reader);
        let started = std::time::Instant::now();
        assert_eq!(
            state.bindings_of("p2").await.unwrap_err(),
            "the bindings have not been listed yet"
        );
        let waited = started.elapsed();
        assert!(
            waited >= FIRST_LIST_TIMEOUT && waited < FIRST_LIST_TIMEOUT * 2,
            "{waited:?}"
        );
        // The first list arrives: both policies are handed out for a re-check, once.
        let mut listed = binding(None);
        listed.metadata.name = Some("b".into());
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(listed));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let mut waited = state.take_waiting();
        waited.sort();
        assert_eq!(waited, ["p1", "p2"]);
        assert!(state.take_waiting().is_empty());
        // Listed: an answer at once, and nothing remembered.
        let of_p = state.bindings_of("p").await.unwrap();
        assert_eq!(of_p.len(), 1);
        assert!(state.bindings_of("p3").await.unwrap().is_empty());
        assert!(state.take_waiting().is_empty());
    }

    #[test]
    fn a_param_object_re_checks_only_bindings_that_can_resolve_to_it() {
        let by_name = |name: &str, ns: Option<&str>| {
            binding(Some(ParamRef {
                name: Some(name.into()),
                namespace: ns.map(Into::into),
                ..ParamRef::default()
            }))
        };
        let by_selector = |ns: Option<&str>| {
            binding(Some(ParamRef {
                selector: Some(LabelSelector::default()),
                namespace: ns.map(Into::into),
                ..ParamRef::default()
            }))
        };
        let cm = object("limits", Some("team-a"));
        assert!(may_reference(&by_name("limits", Some("team-a")), &cm));
        assert!(
            may_reference(&by_name("limits", None), &cm),
            "the request's namespace"
        );
        assert!(!may_reference(&by_name("limits", Some("team-b")), &cm));
        assert!(!may_reference(&by_name("other", Some("team-a")), &cm));
        assert!(may_reference(&by_selector(Some("team-a")), &cm));
        assert!(may_reference(&by_selector(None), &cm));
        assert!(!may_reference(&by_selector(Some("team-b")), &cm));
        assert!(!may_reference(&binding(None), &cm), "no paramRef");
        // Cluster-scoped params: a paramRef namespace never matches them.
        let cluster = object("limits", None);
        assert!(may_reference(&by_name("limits", None), &cluster));
        assert!(!may_reference(&by_name("limits", Some("team-a")), &cluster));
    }
}
