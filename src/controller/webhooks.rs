//! Admission webhooks in the cluster (issue 32): what happens now to the requests each webhook
//! matches. The shell around [`crate::webhooks::availability`].
//!
//! While this replica leads, [`run`] watches `admissionregistration.k8s.io/v1`
//! Validating- and MutatingWebhookConfigurations, Services and the `discovery.k8s.io/v1`
//! EndpointSlices labelled `kubernetes.io/service-name`, and after every change (and when a
//! `caBundle` certificate crosses the warning threshold or expires) assesses every webhook:
//! its Service, ready endpoints and `caBundle` ([`assess`]), plus the offline findings
//! `vapcheck check` gives ([`crate::webhooks::advise`], [`crate::webhooks::exact_match_bypass`],
//! [`crate::webhooks::match_conditions::type_check`], through [`super::inputs::LiveInputs`]).
//!
//! It reports through the per-webhook metrics (`vapcheck_webhook_*`) and Events on the
//! configuration: a Warning when a problem appears, a Normal one when it clears, nothing while
//! it stays (compared with what this process last reported; after a restart, or when another
//! replica takes the lease, the current problems are reported once more). See docs/webhooks.md,
//! "In the cluster".

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::apiserver::webhook::{
    WebhookConfiguration, WebhookKind, decode_configuration, default_configuration,
};
use crate::metrics::{WebhookLabels, WebhookValues};
use crate::reports::{Entry, Subject, SubjectKind, WebhookResult, webhook_entries};
use crate::webhooks::availability::{
    Assessment, Problem, ProblemKind, SERVICE_NAME_LABEL, assess, offline_findings,
};

use super::events::bounded_note;
use super::{Context, lock};

/// The longest pause between two assessments (certificates are judged against the clock).
const MAX_PAUSE: Duration = Duration::from_secs(300);

/// Identifies a configuration: kind and name.
type ConfigKey = (WebhookKind, String);

/// What was last reported on one configuration.
#[derive(Debug, Clone, Default)]
struct Record {
    uid: String,
    /// Webhook name → (failure policy of its metric series, problems reported).
    webhooks: BTreeMap<String, (String, BTreeSet<ProblemKind>)>,
}

/// Offline findings of one configuration at one resourceVersion, by webhook index.
type CachedFindings = (String, Arc<Vec<Vec<String>>>);

/// The webhook watcher's state, kept across leader terms.
#[derive(Default)]
pub struct WebhookState {
    records: Mutex<HashMap<ConfigKey, Record>>,
    findings: Mutex<HashMap<ConfigKey, CachedFindings>>,
    changed: Notify,
    /// Whether a first assessment was made (before it, nothing is known to be gone).
    assessed: std::sync::atomic::AtomicBool,
}

impl WebhookState {
    /// The schemas changed: the offline findings are computed again.
    pub(super) fn schemas_changed(&self) {
        lock(&self.findings).clear();
        self.changed.notify_one();
    }

    /// Name → uid of the configurations of `kind` the last assessment saw (`None` before the
    /// first one), for deleting the reports of those that are gone.
    pub(super) fn present(&self, kind: WebhookKind) -> Option<HashMap<String, String>> {
        if !self.assessed.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        Some(
            lock(&self.records)
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|((_, name), r)| (name.clone(), r.uid.clone()))
                .collect(),
        )
    }
}

/// The stores of the four watched kinds.
#[derive(Clone)]
struct Stores {
    validating: Store<ValidatingWebhookConfiguration>,
    mutating: Store<MutatingWebhookConfiguration>,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
}

/// Watches `api` into a new store, waking `ctx.webhooks.changed` on every change, until the
/// task is aborted.
fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    ctx: &Arc<Context>,
    what: &'static str,
) -> (Store<K>, super::AbortOnDrop)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let ctx = Arc::clone(ctx);
    let mut failing = false;
    let stream = watcher(api, config)
        .backoff(super::watch::WatchBackoff::default())
        .modify(|o: &mut K| super::slim::slim_meta(o.meta_mut()))
        .reflect(writer);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    failing = false;
                    ctx.webhooks.changed.notify_one();
                }
                // A 403 (no RBAC) would repeat every two seconds: warn once.
                Err(e) if !failing => {
                    failing = true;
                    warn!(error = %e, "the {what} list/watch for webhooks failed; retrying");
                }
                Err(e) => debug!(error = %e, resource = what, "the list/watch failed"),
            }
        }
    });
    (reader, super::AbortOnDrop(task))
}

/// Runs until the task is aborted (the controller stopped leading).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let all = watcher::Config::default();
    let (validating, _v) = watch(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        all.clone(),
        &ctx,
        "validatingwebhookconfigurations",
    );
    let (mutating, _m) = watch(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        all.clone(),
        &ctx,
        "mutatingwebhookconfigurations",
    );
    let (services, _s) = watch(
        Api::<Service>::all(client.clone()),
        all.clone(),
        &ctx,
        "services",
    );
    let (slices, _e) = watch(
        Api::<EndpointSlice>::all(client),
        all.labels(SERVICE_NAME_LABEL),
        &ctx,
        "endpointslices.discovery.k8s.io",
    );
    let stores = Stores {
        validating,
        mutating,
        services,
        slices,
    };
    for ready in [
        stores.validating.wait_until_ready().await,
        stores.mutating.wait_until_ready().await,
        stores.services.wait_until_ready().await,
        stores.slices.wait_until_ready().await,
    ] {
        if ready.is_err() {
            return;
        }
    }
    info!("watching admission webhook configurations");
    loop {
        let pass_ctx = Arc::clone(&ctx);
        let pass_stores = stores.clone();
        // The offline findings are CPU-bound (the match conditions' type check).
        let (pause, reports) =
            tokio::task::spawn_blocking(move || assess_all(&pass_ctx, &pass_stores))
                .await
                .unwrap_or((MAX_PAUSE, Vec::new()));
        for (subject, entries) in reports {
            if let Err(e) = super::reports::publish(&ctx, subject, &entries).await {
                warn!(error = %e, "writing a webhook configuration's report failed; retrying at the next assessment");
            }
        }
        tokio::select! {
            _ = ctx.webhooks.changed.notified() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

fn now_seconds() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

/// A configuration of the stores, decoded and defaulted, with its reference for Events.
struct Seen {
    key: ConfigKey,
    uid: String,
    resource_version: String,
    reference: ObjectReference,
    config: WebhookConfiguration,
}

fn seen<K: Resource<DynamicType = ()> + serde::Serialize>(
    kind: WebhookKind,
    object: &K,
) -> Option<Seen> {
    let value = serde_json::to_value(object).ok()?;
    let name = object.meta().name.clone().unwrap_or_default();
    match decode_configuration(kind, &value) {
        Ok(mut config) => {
            default_configuration(&mut config);
            Some(Seen {
                key: (kind, name),
                uid: object.meta().uid.clone().unwrap_or_default(),
                resource_version: object.meta().resource_version.clone().unwrap_or_default(),
                reference: object.object_ref(&()),
                config,
            })
        }
        Err((field, message)) => {
            debug!(configuration = %name, field, message, "webhook configuration not decoded");
            None
        }
    }
}

/// Assesses every webhook, updates metrics and records, queues Events; returns how long to
/// wait at most before the next assessment (the next certificate threshold), and the report of
/// each configuration (written by the caller, `controller::reports::publish`).
fn assess_all(ctx: &Context, stores: &Stores) -> (Duration, Vec<(Subject, Vec<Entry>)>) {
    let now = now_seconds();
    let warn_before =
        i64::try_from(ctx.config.webhook_certificate_warning.get().as_secs()).unwrap_or(i64::MAX);
    let mut configs: Vec<Seen> = Vec::new();
    configs.extend(
        stores
            .validating
            .state()
            .iter()
            .filter_map(|o| seen(WebhookKind::Validating, o.as_ref())),
    );
    configs.extend(
        stores
            .mutating
            .state()
            .iter()
            .filter_map(|o| seen(WebhookKind::Mutating, o.as_ref())),
    );
    // The EndpointSlices of each Service: (namespace, service name).
    let mut slices: HashMap<(String, String), Vec<Arc<EndpointSlice>>> = HashMap::new();
    for s in stores.slices.state() {
        if let Some(service) = s.labels().get(SERVICE_NAME_LABEL) {
            slices
                .entry((s.namespace().unwrap_or_default(), service.clone()))
                .or_default()
                .push(s);
        }
    }
    let mut next = MAX_PAUSE;
    let present: BTreeSet<ConfigKey> = configs.iter().map(|c| c.key.clone()).collect();
    let mut reports = Vec::new();
    for c in &configs {
        let findings = offline(ctx, c);
        let mut reported = BTreeMap::new();
        for (i, hook) in c.config.webhooks().iter().enumerate() {
            let reference = hook
                .client_config
                .as_ref()
                .and_then(|cc| cc.service.as_ref());
            let (service, hook_slices) = match reference {
                Some(r) => {
                    let ns = r.namespace.clone().unwrap_or_default();
                    let name = r.name.clone().unwrap_or_default();
                    let service = stores.services.get(&ObjectRef::new(&name).within(&ns));
                    (
                        service,
                        slices.get(&(ns, name)).cloned().unwrap_or_default(),
                    )
                }
                None => (None, Vec::new()),
            };
            let slice_refs: Vec<&EndpointSlice> = hook_slices.iter().map(AsRef::as_ref).collect();
            let mut assessment = assess(hook, service.as_deref(), &slice_refs, now, warn_before);
            let lines = findings.get(i).cloned().unwrap_or_default();
            if let Some(first) = lines.first() {
                assessment.problems.push(Problem {
                    kind: ProblemKind::Findings,
                    message: format!(
                        "{} finding(s) (as vapcheck check reports them), the first: {first}",
                        lines.len()
                    ),
                });
            }
            if let Some(t) = assessment.ca_not_after {
                for at in [t.saturating_sub(warn_before), t.saturating_add(1)] {
                    if at > now {
                        let wait = Duration::from_secs(u64::try_from(at - now).unwrap_or(0));
                        next = next.min(wait);
                    }
                }
            }
            let failure_policy = hook.failure_policy.clone().unwrap_or_else(|| "Fail".into());
            let labels = WebhookLabels {
                kind: c.key.0.as_str(),
                configuration: c.key.1.clone(),
                webhook: hook.name().to_owned(),
            };
            ctx.metrics.set_webhook(
                &labels,
                &WebhookValues {
                    failure_policy: failure_policy.clone(),
                    state: assessment.state(),
                    ready_endpoints: assessment.ready_endpoints,
                    ca_not_after: assessment.ca_not_after,
                    findings: lines.len(),
                },
            );
            reported.insert(hook.name().to_owned(), (failure_policy, assessment));
        }
        let results: Vec<WebhookResult<'_>> = c
            .config
            .webhooks()
            .iter()
            .enumerate()
            .filter_map(|(index, hook)| {
                let (failure_policy, assessment) = reported.get(hook.name())?;
                Some(WebhookResult {
                    index,
                    name: hook.name(),
                    failure_policy,
                    assessment,
                })
            })
            .collect();
        let subject = Subject {
            kind: match c.key.0 {
                WebhookKind::Validating => SubjectKind::ValidatingWebhooks,
                WebhookKind::Mutating => SubjectKind::MutatingWebhooks,
            },
            name: c.key.1.clone(),
            uid: c.uid.clone(),
        };
        reports.push((subject, webhook_entries(&results)));
        publish(ctx, c, reported);
    }
    forget_deleted(ctx, &present);
    ctx.webhooks
        .assessed
        .store(true, std::sync::atomic::Ordering::Release);
    (next, reports)
}

/// The offline findings of `c`, computed once per resourceVersion (and schema snapshot).
fn offline(ctx: &Context, c: &Seen) -> Arc<Vec<Vec<String>>> {
    if let Some((rv, f)) = lock(&ctx.webhooks.findings).get(&c.key)
        && *rv == c.resource_version
    {
        return Arc::clone(f);
    }
    let mut advice = crate::webhooks::advise(&c.config);
    let status = match ctx.inputs.check_webhooks(&c.config) {
        Ok((status, bypass)) => {
            advice.extend(bypass);
            status
        }
        Err(e) => {
            debug!(configuration = %c.key.1, error = %e, "match conditions not checked");
            None
        }
    };
    let findings = Arc::new(offline_findings(
        c.config.webhooks().len(),
        &advice,
        status.as_ref(),
    ));
    lock(&ctx.webhooks.findings).insert(
        c.key.clone(),
        (c.resource_version.clone(), Arc::clone(&findings)),
    );
    findings
}

/// Queues the Events for going from the last record of `c` to `now` (webhook name → (failure
/// policy, assessment)) and records `now`.
fn publish(ctx: &Context, c: &Seen, now: BTreeMap<String, (String, Assessment)>) {
    let mut records = lock(&ctx.webhooks.records);
    let before = records
        .get(&c.key)
        .filter(|r| r.uid == c.uid)
        .cloned()
        .unwrap_or_default();
    let mut record = Record {
        uid: c.uid.clone(),
        webhooks: BTreeMap::new(),
    };
    for (name, (failure_policy, assessment)) in &now {
        let old = before.webhooks.get(name);
        if let Some((old_policy, _)) = old
            && old_policy != failure_policy
        {
            ctx.metrics
                .remove_webhook(&labels(c, name), old_policy.as_str());
        }
        let old_problems = old.map(|(_, p)| p.clone()).unwrap_or_default();
        let kinds: BTreeSet<ProblemKind> = assessment.problems.iter().map(|p| p.kind).collect();
        for p in &assessment.problems {
            if !old_problems.contains(&p.kind) {
                send(ctx, c, name, true, p.kind.reason(), &p.message);
            }
        }
        for gone in old_problems.difference(&kinds) {
            // An expired certificate that is now only expiring (a new bundle), or an expiring
            // one that has now expired (the clock), is still a certificate problem: no Normal
            // Event saying the bundle is valid.
            if still_certificate_problem(*gone, &kinds) {
                continue;
            }
            send(
                ctx,
                c,
                name,
                false,
                gone.resolved_reason(),
                &resolved_note(*gone, assessment),
            );
        }
        record
            .webhooks
            .insert(name.clone(), (failure_policy.clone(), kinds));
    }
    for (name, (old_policy, _)) in &before.webhooks {
        if !now.contains_key(name) {
            ctx.metrics.remove_webhook(&labels(c, name), old_policy);
        }
    }
    records.insert(c.key.clone(), record);
}

/// Whether `gone` is a certificate problem replaced by the other one in `now`.
fn still_certificate_problem(gone: ProblemKind, now: &BTreeSet<ProblemKind>) -> bool {
    match gone {
        ProblemKind::CertificateExpired => now.contains(&ProblemKind::CertificateExpiring),
        ProblemKind::CertificateExpiring => now.contains(&ProblemKind::CertificateExpired),
        _ => false,
    }
}

fn labels(c: &Seen, webhook: &str) -> WebhookLabels {
    WebhookLabels {
        kind: c.key.0.as_str(),
        configuration: c.key.1.clone(),
        webhook: webhook.to_owned(),
    }
}

/// The note of the Normal Event when `kind` cleared.
fn resolved_note(kind: ProblemKind, now: &Assessment) -> String {
    match kind {
        ProblemKind::ServiceNotFound => "the Service exists".to_owned(),
        ProblemKind::ServicePortNotFound => "the Service has the webhook's port".to_owned(),
        ProblemKind::NoReadyEndpoints => format!(
            "the Service has {} ready endpoint(s) for the webhook's port",
            now.ready_endpoints.unwrap_or(0)
        ),
        ProblemKind::CaBundleInvalid => "clientConfig.caBundle parses".to_owned(),
        ProblemKind::CertificateExpired | ProblemKind::CertificateExpiring => {
            match now.ca_not_after {
                Some(t) => format!(
                    "clientConfig.caBundle is valid until {}",
                    k8s_openapi::jiff::Timestamp::from_second(t)
                        .map(|t| t.to_string())
                        .unwrap_or_else(|_| t.to_string())
                ),
                None => "clientConfig.caBundle has no certificate to expire".to_owned(),
            }
        }
        ProblemKind::Findings => "no findings".to_owned(),
    }
}

/// Queues one Event on the configuration, about webhook `webhook`, never folded into an
/// earlier one ([`super::event_queue::EventQueue::send_unfolded`]): a problem that comes back
/// gets an Event of its own with its note of now.
fn send(ctx: &Context, c: &Seen, webhook: &str, warning: bool, reason: &str, text: &str) {
    let mut reference = c.reference.clone();
    reference.field_path = Some(format!("webhooks{{{webhook}}}"));
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(bounded_note(&format!("webhook {webhook:?}: {text}"))),
        action: "CheckWebhook".to_owned(),
        secondary: None,
    };
    ctx.events.send_unfolded(event, reference);
}

/// Forgets configurations that are gone: their records and metric series.
fn forget_deleted(ctx: &Context, present: &BTreeSet<ConfigKey>) {
    let mut records = lock(&ctx.webhooks.records);
    let gone: Vec<ConfigKey> = records
        .keys()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        if let Some(record) = records.remove(&key) {
            for (webhook, (policy, _)) in record.webhooks {
                ctx.metrics.remove_webhook(
                    &WebhookLabels {
                        kind: key.0.as_str(),
                        configuration: key.1.clone(),
                        webhook,
                    },
                    &policy,
                );
            }
        }
        lock(&ctx.webhooks.findings).remove(&key);
        debug!(configuration = %key.1, "webhook configuration deleted; forgotten");
    }
}
