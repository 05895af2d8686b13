//! The policy engines' CEL objects in the cluster (issue 33, item 4): Kyverno's
//! `policies.kyverno.io/v1` ValidatingPolicies and NamespacedValidatingPolicies, and
//! Gatekeeper's `templates.gatekeeper.sh/v1` ConstraintTemplates with `K8sNativeValidation`
//! code, checked by the same functions `vapcheck check` calls (`cli::kyverno::check`,
//! `cli::gatekeeper::check`): [`crate::engines::kyverno::validate`] and
//! [`crate::engines::kyverno::type_check`]; [`crate::engines::gatekeeper::add_template`],
//! [`crate::engines::gatekeeper::type_check`] and
//! [`crate::engines::gatekeeper::add_compile_errors`].
//!
//! - [`run`] starts one watcher per kind; each waits until discovery shows the kind's CRD
//!   served in `v1` (looking again after every schema poll: a cluster without Kyverno or
//!   Gatekeeper has nothing watched and no error), then lists and watches it;
//! - each new or changed object is checked off the async workers against the same live
//!   inputs as admission policies, and reported: an Event on the object for each new, changed
//!   or cleared finding ([`super::events::events_of_findings`], as for MutatingAdmissionPolicies,
//!   with the expression in `regarding.fieldPath`), a Warning Event `RejectedOnCreate` when
//!   the engine would refuse the object if it were created now (Kyverno's policy webhook,
//!   Gatekeeper's driver), the per-object metrics with the object's kind as `kind` label, and
//!   a report per object (`vapcheck-kvpol-<name>`, `vapcheck-ct-<name>`; a
//!   NamespacedValidatingPolicy's is the namespaced `vapcheck-knvpol-<name>` in its namespace,
//!   since a cluster-scoped report cannot be owned by a namespaced object);
//! - every object is checked again when the schemas change.
//!
//! Gatekeeper's `object` is typed by its documented fallback (no Constraint is read from the
//! cluster: `gatekeeper::untyped_kind`), so in the cluster its findings are those on `params`
//! (typed from the template's schema) and Gatekeeper's own compile errors.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::engines::{gatekeeper, kyverno};
use crate::metrics::{PolicyKind, PolicyStates};
use crate::policy::PolicyStatus;
use crate::policy::status::PolicyCondition;
use crate::reports::{Subject, SubjectKind};

use super::events::{FindingRecord, events_of_findings, record_of_findings};
use super::watch::{Watched, watch_with_refusals};
use super::{AbortOnDrop, Context, lock};

/// The version of each kind vapcheck watches.
pub const VERSION: &str = "v1";

/// The engine objects vapcheck watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Kyverno's ValidatingPolicy (cluster-scoped).
    KyvernoValidating,
    /// Kyverno's NamespacedValidatingPolicy.
    KyvernoNamespacedValidating,
    /// Gatekeeper's ConstraintTemplate (cluster-scoped).
    GatekeeperTemplate,
}

impl EngineKind {
    /// Every kind.
    pub const ALL: [EngineKind; 3] = [
        EngineKind::KyvernoValidating,
        EngineKind::KyvernoNamespacedValidating,
        EngineKind::GatekeeperTemplate,
    ];

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            EngineKind::KyvernoValidating | EngineKind::KyvernoNamespacedValidating => {
                kyverno::GROUP
            }
            EngineKind::GatekeeperTemplate => gatekeeper::TEMPLATE_GROUP,
        }
    }

    /// The kind.
    pub fn kind(self) -> &'static str {
        match self {
            EngineKind::KyvernoValidating => "ValidatingPolicy",
            EngineKind::KyvernoNamespacedValidating => "NamespacedValidatingPolicy",
            EngineKind::GatekeeperTemplate => "ConstraintTemplate",
        }
    }

    /// The resource (plural).
    pub fn plural(self) -> &'static str {
        match self {
            EngineKind::KyvernoValidating => "validatingpolicies",
            EngineKind::KyvernoNamespacedValidating => "namespacedvalidatingpolicies",
            EngineKind::GatekeeperTemplate => "constrainttemplates",
        }
    }

    /// `<plural>.<group>` (the `resource` label of `vapcheck_watch_forbidden`).
    pub fn resource(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }

    /// The engine that validates the object on create.
    fn engine(self) -> &'static str {
        match self {
            EngineKind::KyvernoValidating | EngineKind::KyvernoNamespacedValidating => "Kyverno",
            EngineKind::GatekeeperTemplate => "Gatekeeper",
        }
    }

    /// The `kind` label of the per-object metrics.
    fn metric_kind(self) -> PolicyKind {
        match self {
            EngineKind::KyvernoValidating => PolicyKind::KyvernoValidating,
            EngineKind::KyvernoNamespacedValidating => PolicyKind::KyvernoNamespacedValidating,
            EngineKind::GatekeeperTemplate => PolicyKind::GatekeeperTemplate,
        }
    }

    /// The kind of its report's subject.
    pub fn subject_kind(self) -> SubjectKind {
        match self {
            EngineKind::KyvernoValidating => SubjectKind::KyvernoValidatingPolicy,
            EngineKind::KyvernoNamespacedValidating => {
                SubjectKind::KyvernoNamespacedValidatingPolicy
            }
            EngineKind::GatekeeperTemplate => SubjectKind::ConstraintTemplate,
        }
    }

    fn api_resource(self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(self.group(), VERSION, self.kind());
        ApiResource::from_gvk_with_plural(&gvk, self.plural())
    }
}

/// What a worker is asked to do.
enum Work {
    /// Check the object (new or changed).
    Check(Box<DynamicObject>),
    /// The object was deleted: forget it.
    Deleted(String),
    /// A list completed: forget what is no longer in the store.
    Listed,
    /// The schemas changed: check every object again.
    RecheckAll,
}

/// One watched kind.
struct KindState {
    store: Store<DynamicObject>,
    work: mpsc::UnboundedSender<Work>,
}

/// What was last reported on one object.
struct Record {
    uid: String,
    resource_version: Option<String>,
    findings: FindingRecord,
    /// A hash of the engine's create-time causes (0: accepted).
    rejected: u64,
}

/// The engine watchers' state, kept across leader terms.
#[derive(Default)]
pub struct EngineState {
    kinds: Mutex<HashMap<EngineKind, Arc<KindState>>>,
}

impl EngineState {
    /// Name → uid of every object of `kind` in its store, once listed (`None` while it is not
    /// watched or not listed yet).
    pub(super) fn present(&self, kind: EngineKind) -> Option<HashMap<String, String>> {
        let state = lock(&self.kinds).get(&kind).cloned()?;
        super::reports::present_in_dynamic(&state.store)
    }

    /// Forgets every watched kind (the controller stopped: another replica leads).
    pub(super) fn clear(&self) {
        lock(&self.kinds).clear();
    }

    /// Asks every watched kind to check all its objects again (the schemas changed).
    pub(super) fn schemas_changed(&self) {
        for state in lock(&self.kinds).values() {
            let _ = state.work.send(Work::RecheckAll);
        }
    }
}

/// The key of an object: `name`, or `namespace/name` for a namespaced kind.
pub(super) fn key_of(object: &DynamicObject) -> String {
    match object.metadata.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", object.name_any()),
        _ => object.name_any(),
    }
}

/// Runs one watcher per engine kind until aborted (the controller stopped).
pub async fn run(ctx: Arc<Context>) {
    let _tasks: Vec<AbortOnDrop> = EngineKind::ALL
        .into_iter()
        .map(|kind| AbortOnDrop(tokio::spawn(run_kind(Arc::clone(&ctx), kind))))
        .collect();
    futures::future::pending::<()>().await;
}

/// Waits until `kind` is served, then watches it and checks its objects.
async fn run_kind(ctx: Arc<Context>, kind: EngineKind) {
    let mut logged = false;
    loop {
        match ctx.inputs.serves(kind.group(), VERSION, kind.plural()) {
            Some(true) => break,
            served => {
                if !logged {
                    info!(
                        resource = %format!("{}.{VERSION}.{}", kind.plural(), kind.group()),
                        discovery_read = served.is_some(),
                        "the API server does not serve {} {} objects; they are not checked (looking again after every schema poll)",
                        kind.engine(),
                        kind.kind()
                    );
                    logged = true;
                }
            }
        }
        tokio::time::sleep(ctx.config.schema_poll_interval.get()).await;
    }
    info!(resource = %kind.resource(), "watching {} {} objects", kind.engine(), kind.kind());
    let resource = kind.api_resource();
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
    let mut writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let (tx, rx) = mpsc::unbounded_channel();
    lock(&ctx.engines.kinds).insert(
        kind,
        Arc::new(KindState {
            store: store.clone(),
            work: tx.clone(),
        }),
    );
    let _worker = AbortOnDrop(tokio::spawn(work(Arc::clone(&ctx), kind, store, rx)));
    let metrics = ctx.metrics.clone();
    let slim: fn(&mut DynamicObject) = |o| super::slim::slim_meta(&mut o.metadata);
    let label = kind.resource();
    watch_with_refusals(api, &label, &metrics, slim, |watched| {
        let event = match watched {
            Watched::Event(event) => event,
            // A refused list leaves the objects unchecked; the next list that works checks them.
            Watched::Refused { .. } | Watched::Allowed { .. } => return,
        };
        writer.apply_watcher_event(&event);
        let work = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Work::Check(Box::new(o)),
            watcher::Event::Delete(o) => Work::Deleted(key_of(&o)),
            watcher::Event::InitDone => Work::Listed,
            watcher::Event::Init => return,
        };
        let _ = tx.send(work);
    })
    .await;
}

/// The worker of one kind: checks and reports its objects one at a time.
async fn work(
    ctx: Arc<Context>,
    kind: EngineKind,
    store: Store<DynamicObject>,
    mut rx: mpsc::UnboundedReceiver<Work>,
) {
    let mut records: HashMap<String, Record> = HashMap::new();
    let mut states = PolicyStates::default();
    let metric_kind = kind.metric_kind();
    while let Some(item) = rx.recv().await {
        match item {
            Work::Check(object) => {
                let unchanged = records.get(&key_of(&object)).is_some_and(|r| {
                    r.resource_version.is_some()
                        && r.resource_version == object.metadata.resource_version
                        && Some(&r.uid) == object.metadata.uid.as_ref()
                });
                if !unchanged {
                    check_object(&ctx, kind, &object, &mut records, &mut states).await;
                }
            }
            Work::Deleted(key) => forget(&ctx, metric_kind, &key, &mut records, &mut states),
            Work::Listed => {
                let present: std::collections::HashSet<String> =
                    store.state().iter().map(|o| key_of(o)).collect();
                let gone: Vec<String> = records
                    .keys()
                    .filter(|k| !present.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    forget(&ctx, metric_kind, &key, &mut records, &mut states);
                }
            }
            Work::RecheckAll => {
                for object in store.state() {
                    check_object(&ctx, kind, &object, &mut records, &mut states).await;
                }
            }
        }
    }
}

/// Forgets a deleted object: its record and metric series.
fn forget(
    ctx: &Context,
    kind: PolicyKind,
    key: &str,
    records: &mut HashMap<String, Record>,
    states: &mut PolicyStates,
) {
    records.remove(key);
    states.remove(key);
    ctx.metrics.remove_policy(kind, key);
    ctx.metrics.set_policy_states(kind, states.counts());
    debug!(object = %key, "engine object deleted; forgotten");
}

/// The check of one object: its status (`None` when nothing could be type-checked) and the
/// causes its engine would refuse it with on create; `None` overall when vapcheck does not
/// read it (a ConstraintTemplate without K8sNativeValidation code).
type Checked = Option<(Option<PolicyStatus>, Vec<String>)>;

/// Checks `value` (an object of `kind`) as `vapcheck check` does.
fn check_value(
    inputs: &super::inputs::LiveInputs,
    kind: EngineKind,
    value: &Value,
) -> Result<Checked, String> {
    match kind {
        EngineKind::KyvernoValidating | EngineKind::KyvernoNamespacedValidating => {
            match kyverno::read_validating_policy(value) {
                Err((field, cause)) => Ok(Some((None, vec![format!("{field}: {cause}")]))),
                Ok(policy) => {
                    let causes = kyverno::validate(&policy);
                    let status = inputs.with_backends(|options, backends| {
                        kyverno::type_check(&policy, options, backends)
                    })?;
                    Ok(Some((Some(status), causes)))
                }
            }
        }
        EngineKind::GatekeeperTemplate => {
            if !gatekeeper::has_cel(value) {
                return Ok(None);
            }
            let template = match gatekeeper::read_template(value) {
                Ok(t) => t,
                Err((field, cause)) => return Ok(Some((None, vec![format!("{field}: {cause}")]))),
            };
            match gatekeeper::add_template(&template) {
                Err(e) => Ok(Some((None, vec![format!("spec.targets: {e}")]))),
                Ok(code) => {
                    let status = inputs.with_backends(|options, backends| {
                        let mut status =
                            gatekeeper::type_check(&template, &code, None, options, backends);
                        gatekeeper::add_compile_errors(&mut status, &template, &code);
                        status
                    })?;
                    Ok(Some((Some(status), Vec::new())))
                }
            }
        }
    }
}

fn hash_of(causes: &[String]) -> u64 {
    if causes.is_empty() {
        return 0;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    causes.hash(&mut h);
    h.finish().max(1)
}

/// A reference to `object` for an Event.
fn reference_of(
    kind: EngineKind,
    object: &DynamicObject,
) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(format!("{}/{VERSION}", kind.group())),
        kind: Some(kind.kind().to_owned()),
        name: Some(object.name_any()),
        namespace: object.metadata.namespace.clone(),
        uid: object.metadata.uid.clone(),
        resource_version: object.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Checks one object and reports what changed (Events), its metrics and its report.
async fn check_object(
    ctx: &Arc<Context>,
    kind: EngineKind,
    object: &DynamicObject,
    records: &mut HashMap<String, Record>,
    states: &mut PolicyStates,
) {
    if object.metadata.deletion_timestamp.is_some() {
        return;
    }
    let key = key_of(object);
    let mut value = match serde_json::to_value(object) {
        Ok(v) => v,
        Err(e) => {
            warn!(object = %key, kind = kind.kind(), error = %e, "cannot read the object");
            return;
        }
    };
    // The watch's items may come without their type (they are in the list's).
    value["apiVersion"] = Value::String(format!("{}/{VERSION}", kind.group()));
    value["kind"] = Value::String(kind.kind().to_owned());
    let inputs = Arc::clone(&ctx.inputs);
    let started = std::time::Instant::now();
    let checked = tokio::task::spawn_blocking(move || check_value(&inputs, kind, &value)).await;
    let checked = match checked {
        Ok(Ok(Some(c))) => c,
        Ok(Ok(None)) => {
            debug!(object = %key, "a ConstraintTemplate without K8sNativeValidation code: not checked");
            return;
        }
        Ok(Err(e)) => {
            warn!(object = %key, kind = kind.kind(), error = %e, "checking failed");
            return;
        }
        Err(e) => {
            warn!(object = %key, kind = kind.kind(), error = %e, "checking failed");
            return;
        }
    };
    ctx.metrics.observe_typecheck(started.elapsed());
    let (status, causes) = checked;
    let mut computed = status.unwrap_or_default();
    if !causes.is_empty() {
        computed.conditions.push(PolicyCondition {
            type_: crate::policy::status::ACCEPTED_ON_CREATE.into(),
            status: "False".into(),
            observed_generation: object.metadata.generation,
            reason: crate::policy::status::REASON_REJECTED_ON_CREATE.into(),
            message: rejected_message(kind, &key, &causes),
        });
    }
    let (counted, invalid) = super::suppression::apply_mutating(&object.metadata, &computed);
    let reference = reference_of(kind, object);
    if let Some(e) = invalid {
        ctx.events
            .send(super::suppression::invalid_event(&e), reference.clone());
    }
    let metric_kind = kind.metric_kind();
    ctx.metrics
        .set_policy_states(metric_kind, states.set(&key, super::state_of(&counted)));
    ctx.metrics
        .set_policy_warnings(metric_kind, &key, counted.expression_warnings.len());
    ctx.metrics
        .set_policy_rejected_on_create(metric_kind, &key, !causes.is_empty());
    // Its report and its Events are emitters over its findings.
    let on = crate::finding::ObjectRef::in_cluster(kind.kind(), &key);
    {
        // A namespaced object's report is in its namespace ([`Subject::name`] is the key).
        let subject = Subject {
            kind: kind.subject_kind(),
            name: key.clone(),
            uid: object.metadata.uid.clone().unwrap_or_default(),
        };
        let suppression = super::suppression::directive(&object.metadata)
            .ok()
            .flatten();
        let findings = crate::finding::produce_status(&on, &computed, Some(kind.engine()));
        let entries = crate::reports::finding_entries(&findings, suppression.as_ref());
        if let Err(e) = super::reports::publish(ctx, subject, &entries).await {
            warn!(object = %key, kind = kind.kind(), error = %e, "writing the report failed; written again at the next change or schema change");
        }
    }
    if !ctx.fence.may_write() {
        return;
    }
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let before = records.get(&key).filter(|r| r.uid == uid);
    // The Events are an emitter over the findings of `counted` (the suppressed ones left out).
    let counted_findings = crate::finding::produce_status(&on, &counted, Some(kind.engine()));
    let events = events_of_findings(before.map(|r| &r.findings), &counted_findings);
    for ev in &events {
        let mut reference = reference.clone();
        reference.field_path = ev.field_ref.clone();
        let event = Event {
            type_: if ev.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: ev.reason.to_owned(),
            note: Some(ev.note.clone()),
            action: "TypeCheck".to_owned(),
            secondary: None,
        };
        ctx.events.send_unfolded(event, reference);
    }
    let rejected = hash_of(&causes);
    let rejected_before = before.map_or(0, |r| r.rejected);
    if rejected != rejected_before {
        let (warning, reason, note) = if rejected != 0 {
            (
                true,
                crate::policy::status::REASON_REJECTED_ON_CREATE,
                rejected_message(kind, &key, &causes),
            )
        } else {
            (
                false,
                crate::policy::status::REASON_ACCEPTED,
                format!(
                    "{} accepts {} {key:?} on create",
                    kind.engine(),
                    kind.kind()
                ),
            )
        };
        ctx.events.send_unfolded(
            Event {
                type_: if warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: reason.to_owned(),
                note: Some(super::events::bounded_note(&note)),
                action: "Validate".to_owned(),
                secondary: None,
            },
            reference,
        );
    }
    records.insert(
        key,
        Record {
            uid,
            resource_version: object.metadata.resource_version.clone(),
            findings: record_of_findings(&counted_findings),
            rejected,
        },
    );
}

/// What the engine answers to a create of the object: its causes.
fn rejected_message(kind: EngineKind, key: &str, causes: &[String]) -> String {
    format!(
        "{} rejects {} {key:?} on create: {}",
        kind.engine(),
        kind.kind(),
        causes.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_resources_and_their_reports() {
        let resources: Vec<String> = EngineKind::ALL.iter().map(|k| k.resource()).collect();
        assert_eq!(
            resources,
            [
                "validatingpolicies.policies.kyverno.io",
                "namespacedvalidatingpolicies.policies.kyverno.io",
                "constrainttemplates.templates.gatekeeper.sh",
            ]
        );
        let reported: Vec<SubjectKind> = EngineKind::ALL.iter().map(|k| k.subject_kind()).collect();
        assert_eq!(
            reported,
            [
                SubjectKind::KyvernoValidatingPolicy,
                SubjectKind::KyvernoNamespacedValidatingPolicy,
                SubjectKind::ConstraintTemplate,
            ]
        );
        // The report's owner reference names the kind and the version watched, and only the
        // namespaced kind's report is namespaced.
        for k in EngineKind::ALL {
            let subject = k.subject_kind();
            assert_eq!(subject.api_version(), format!("{}/{VERSION}", k.group()));
            assert_eq!(subject.kind(), k.kind());
            assert_eq!(
                subject.namespaced(),
                k == EngineKind::KyvernoNamespacedValidating
            );
        }
    }

    #[test]
    fn namespaced_objects_are_keyed_by_namespace_and_name() {
        let mut o = DynamicObject::new("p", &EngineKind::KyvernoValidating.api_resource());
        assert_eq!(key_of(&o), "p");
        o.metadata.namespace = Some("team-a".into());
        assert_eq!(key_of(&o), "team-a/p");
    }

    #[test]
    fn a_refusal_is_recorded_by_its_causes() {
        assert_eq!(hash_of(&[]), 0);
        let a = hash_of(&["spec.matchConstraints: Required value".to_owned()]);
        let b = hash_of(&["spec.validations[0].expression: Invalid value".to_owned()]);
        assert_ne!(a, 0);
        assert_ne!(b, 0);
        assert_ne!(a, b);
        assert_eq!(
            rejected_message(
                EngineKind::KyvernoNamespacedValidating,
                "team-a/p",
                &["x: y".to_owned(), "z: w".to_owned()]
            ),
            "Kyverno rejects NamespacedValidatingPolicy \"team-a/p\" on create: x: y; z: w"
        );
    }
}
