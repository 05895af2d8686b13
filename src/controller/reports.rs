//! Policy reports in the cluster (issue 34, item 1): the I/O around [`crate::reports`].
//!
//! - [`publish`] writes the report of one object (a policy or a binding) after each of its
//!   checks, with server-side apply (field manager [`FIELD_MANAGER`]) in the report API the
//!   cluster serves ([`detect`]: `openreports.io/v1alpha1` ClusterReport, else
//!   `wgpolicyk8s.io/v1alpha2` ClusterPolicyReport, else nothing, said once at info level;
//!   a namespaced object's report is that API's namespaced `Report` or `PolicyReport`, in the
//!   object's namespace),
//!   only when its content changed since this replica last wrote it, or when that write is
//!   older than half the re-check period (so a report deleted by hand comes back);
//! - [`sweep`], after every schema poll, looks at the served APIs again (re-checking every
//!   policy when a report API appears) and deletes the reports of objects that are gone. Each
//!   report also has an owner reference to its object, so the garbage collector of
//!   kube-controller-manager deletes it too; the sweep covers clusters without one and
//!   is the bound on how long a report outlives its object here (one `schemaPollInterval`).
//!   Reports of objects deleted while no replica led are left to the garbage collector (the
//!   controller may not list reports).
//!
//! See docs/reports.md.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use tracing::{debug, info, warn};

use crate::apiserver::webhook::WebhookKind;
use crate::bindings::BindingReport;
use crate::policy::PolicyStatus;
use crate::reports::{Entry, ReportApi, Subject, SubjectKind};

use super::engines::EngineKind;
use super::status::FIELD_MANAGER;
use super::{Context, ReconcileError, WRITE_TIMEOUT, lock, no_answer_in_time};

/// The end of kube-apiserver's message for a create of a custom resource whose CRD is being
/// deleted.
const CRD_TERMINATING: &str = "create not allowed while custom resource definition is terminating";

/// What this replica wrote, per report ([`Subject::report_key`]: the name, with the namespace of
/// a namespaced one).
#[derive(Default)]
pub struct ReportState {
    written: Mutex<HashMap<String, Written>>,
    /// Whether "no report API" was said since the last report API was seen.
    said_none: AtomicBool,
    /// The API the last detection found (`None`: not detected yet).
    api: Mutex<Option<Option<ReportApi>>>,
}

/// One report as last written.
struct Written {
    api: ReportApi,
    subject: Subject,
    hash: u64,
    at: Instant,
}

/// The report API the cluster serves now (from the discovery snapshot the schema poll keeps):
/// `openreports.io` first. Says once, at info level, when it serves neither (not an error:
/// reports are optional), and when that changes. Returns it and whether it differs from the
/// one detected before (a first detection does not count as a change).
pub fn detect(ctx: &Context) -> (Option<ReportApi>, bool) {
    let api = ReportApi::ALL
        .into_iter()
        .find(|a| ctx.inputs.serves(a.group(), a.version(), a.resource()) == Some(true));
    let before = lock(&ctx.reports.api).replace(api);
    match api {
        Some(a) if before != Some(Some(a)) => {
            ctx.reports.said_none.store(false, Ordering::Relaxed);
            info!(api = %a.api_version(), kind = a.kind(), "writing policy reports");
        }
        None if !ctx.reports.said_none.swap(true, Ordering::Relaxed) => {
            info!(
                "the API server serves neither openreports.io/v1alpha1 clusterreports nor wgpolicyk8s.io/v1alpha2 clusterpolicyreports: no policy reports are written (looking again after every schema poll)"
            );
        }
        _ => {}
    }
    (api, before.is_some_and(|b| b != api))
}

/// The report API detected last, detecting it on first use.
fn current_api(ctx: &Context) -> Option<ReportApi> {
    let known = *lock(&ctx.reports.api);
    known.unwrap_or_else(|| detect(ctx).0)
}

/// Re-checks every policy (both kinds, and the engines' objects) of the running controllers: a
/// report API appeared or changed, and the policies checked before have no report in it.
fn recheck_all(ctx: &Context) {
    if let Some(store) = lock(&ctx.store).clone() {
        for p in store.state() {
            ctx.trigger(p.name_any());
        }
    }
    for name in ctx.mutating.present().unwrap_or_default().into_keys() {
        ctx.metrics.workqueue_add();
        // No receiver (standby) is fine: the new leader checks everything.
        let _ = ctx.mutating.triggers.send(name);
    }
    ctx.engines.schemas_changed();
}

/// The report resource of `subject` in `api`: cluster-scoped, or namespaced in the object's
/// namespace.
fn api_of(ctx: &Context, api: ReportApi, subject: &Subject) -> Api<DynamicObject> {
    let (kind, plural) = api.kind_for(subject.kind);
    let gvk = GroupVersionKind::gvk(api.group(), api.version(), kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    match subject.namespace() {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &resource),
        None => Api::all_with(ctx.client.clone(), &resource),
    }
}

/// How long a written report counts as current without a new write: half the re-check
/// period, as the check memo (`None`: re-check off, a report is written again only when it
/// changes).
fn max_age(ctx: &Context) -> Option<Duration> {
    ctx.memo_max_age()
}

/// Writes the report of `subject` with `entries`, when reports are on, a report API is
/// served, this replica may write, and the report changed (or its last write is old).
pub async fn publish(
    ctx: &Context,
    subject: Subject,
    entries: &[Entry],
) -> Result<(), ReconcileError> {
    if !ctx.config.reports.enabled || subject.uid.is_empty() {
        return Ok(());
    }
    let Some(api) = current_api(ctx) else {
        return Ok(());
    };
    let body = crate::reports::report(api, &subject, entries);
    let text = serde_json::to_string(&body)
        .map_err(|e| ReconcileError::Report(format!("{}: {e}", subject.report_name())))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let hash = hasher.finish();
    let name = subject.report_name();
    let key = subject.report_key();
    let kind = api.kind_for(subject.kind).0;
    let now = Instant::now();
    let current = lock(&ctx.reports.written).get(&key).is_some_and(|w| {
        w.api == api
            && w.hash == hash
            && w.subject == subject
            && max_age(ctx).is_none_or(|age| now.duration_since(w.at) < age)
    });
    if current || !ctx.fence.may_write() {
        return Ok(());
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let applied = tokio::time::timeout(
        WRITE_TIMEOUT,
        api_of(ctx, api, &subject).patch(&name, &params, &Patch::Apply(&body)),
    )
    .await
    .map_err(|_| ReconcileError::Report(format!("{kind} {key}: {}", no_answer_in_time())))?;
    match applied {
        Ok(_) => {
            debug!(report = %key, kind, results = entries.len(), "report written");
            lock(&ctx.reports.written).insert(
                key,
                Written {
                    api,
                    subject,
                    hash,
                    at: now,
                },
            );
            Ok(())
        }
        // The CRD went away since discovery was read, or is being deleted (k8s.io/
        // apiextensions-apiserver v0.37.1 `pkg/apiserver/customresource_handler.go`
        // `forbidCreateAdmission.Admit`, the admission of creates while the CRD terminates: 403
        // "create not allowed while custom resource definition is terminating"): discovery,
        // read on every poll, drops the API soon, and the sweep after that detects the
        // change and checks every policy again into the API served then.
        Err(kube::Error::Api(s))
            if s.is_not_found() || (s.code == 403 && s.message.ends_with(CRD_TERMINATING)) =>
        {
            debug!(report = %key, "the report API is no longer served");
            Ok(())
        }
        Err(e) => Err(ReconcileError::Report(format!(
            "{kind} {key} of {} {}: {e}",
            subject.kind.kind(),
            subject.name
        ))),
    }
}

/// The report of a ValidatingAdmissionPolicy and those of its bindings `bindings` (the
/// reports of one check, complete). The findings its `vapcheck.io/ignore` annotation covers
/// are in the report as suppressed.
pub async fn publish_policy(
    ctx: &Context,
    policy: &k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    computed: &PolicyStatus,
    bindings: &[BindingReport],
) -> Result<(), ReconcileError> {
    if !ctx.config.reports.enabled {
        return Ok(());
    }
    let subject = Subject {
        kind: SubjectKind::ValidatingPolicy,
        name: policy.name_any(),
        uid: policy.metadata.uid.clone().unwrap_or_default(),
    };
    let suppression = super::suppression::directive(&policy.metadata)
        .ok()
        .flatten();
    let object = crate::finding::ObjectRef::in_cluster("ValidatingAdmissionPolicy", &subject.name);
    let findings = crate::finding::produce_status(&object, computed, None);
    let entries = crate::reports::finding_entries(&findings, suppression.as_ref());
    publish(ctx, subject, &entries).await?;
    for b in bindings {
        let reference = ctx.bindings.binding_ref(&b.binding);
        let subject = Subject {
            kind: SubjectKind::ValidatingBinding,
            name: b.binding.clone(),
            uid: reference.uid.unwrap_or_default(),
        };
        publish(ctx, subject, &crate::reports::binding_entries(b)).await?;
    }
    Ok(())
}

/// Name → uid of every object in `store`, once its first list is done (`None` before, and
/// without a store: nothing is known to be gone then).
pub(super) fn present_in<K>(store: Option<Store<K>>) -> Option<HashMap<String, String>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let store = store?;
    store.wait_until_ready().now_or_never()?.ok()?;
    Some(
        store
            .state()
            .iter()
            .map(|o| (o.name_any(), o.meta().uid.clone().unwrap_or_default()))
            .collect(),
    )
}

/// [`present_in`] for a store of dynamic objects (the engines' kinds), keyed as their
/// [`Subject::name`]: `namespace/name` for a namespaced object.
pub(super) fn present_in_dynamic(store: &Store<DynamicObject>) -> Option<HashMap<String, String>> {
    store.wait_until_ready().now_or_never()?.ok()?;
    Some(
        store
            .state()
            .iter()
            .map(|o| {
                (
                    super::engines::key_of(o),
                    o.metadata.uid.clone().unwrap_or_default(),
                )
            })
            .collect(),
    )
}

/// Deletes the reports this replica wrote whose object is gone (or is another object of the
/// same name now) from the stores of the running controllers. Kinds whose controller does not
/// run (standby, MAPs not served) are left alone.
/// Detects the report API first: when it appeared or changed, every policy is checked again
/// (their checks are memoised, so they would not be re-written otherwise until the periodic
/// re-check).
pub async fn sweep(ctx: &Context) {
    if !ctx.config.reports.enabled {
        return;
    }
    let (api, changed) = detect(ctx);
    if changed && api.is_some() {
        info!("re-checking every policy for its report");
        recheck_all(ctx);
    }
    if !ctx.fence.may_write() {
        return;
    }
    let validating = present_in(lock(&ctx.store).clone());
    let present = |kind: SubjectKind| -> Option<HashMap<String, String>> {
        match kind {
            SubjectKind::ValidatingPolicy => validating.clone(),
            SubjectKind::MutatingPolicy => ctx.mutating.present(),
            SubjectKind::ValidatingBinding => ctx.bindings.present(),
            SubjectKind::MutatingBinding => ctx.mutating_bindings.present(),
            SubjectKind::ValidatingWebhooks => ctx.webhooks.present(WebhookKind::Validating),
            SubjectKind::MutatingWebhooks => ctx.webhooks.present(WebhookKind::Mutating),
            SubjectKind::KyvernoValidatingPolicy => {
                ctx.engines.present(EngineKind::KyvernoValidating)
            }
            SubjectKind::ConstraintTemplate => ctx.engines.present(EngineKind::GatekeeperTemplate),
            SubjectKind::KyvernoNamespacedValidatingPolicy => {
                ctx.engines.present(EngineKind::KyvernoNamespacedValidating)
            }
        }
    };
    let mut by_kind: HashMap<SubjectKind, Option<HashMap<String, String>>> = HashMap::new();
    let gone: Vec<(String, ReportApi, Subject)> = {
        let written = lock(&ctx.reports.written);
        written
            .iter()
            .filter(|(_, w)| {
                by_kind
                    .entry(w.subject.kind)
                    .or_insert_with(|| present(w.subject.kind))
                    .as_ref()
                    .is_some_and(|names| names.get(&w.subject.name) != Some(&w.subject.uid))
            })
            .map(|(n, w)| (n.clone(), w.api, w.subject.clone()))
            .collect()
    };
    for (key, api, subject) in gone {
        let kind = api.kind_for(subject.kind).0;
        let deleted = tokio::time::timeout(
            WRITE_TIMEOUT,
            api_of(ctx, api, &subject).delete(&subject.report_name(), &DeleteParams::default()),
        )
        .await;
        match deleted {
            Ok(Ok(_)) => {
                info!(report = %key, kind, object = %subject.name, "object gone; report deleted");
            }
            Ok(Err(kube::Error::Api(s))) if s.is_not_found() => {
                debug!(report = %key, "report already gone");
            }
            Ok(Err(e)) => {
                warn!(report = %key, kind, error = %e, "deleting the report of a deleted object failed; retrying after the next poll");
                continue;
            }
            Err(_) => {
                warn!(report = %key, kind, error = %no_answer_in_time(), "deleting the report of a deleted object failed; retrying after the next poll");
                continue;
            }
        }
        let mut written = lock(&ctx.reports.written);
        // Only if no newer write (of a new object of that name) replaced it meanwhile.
        if written.get(&key).is_some_and(|w| w.subject == subject) {
            written.remove(&key);
        }
    }
}
