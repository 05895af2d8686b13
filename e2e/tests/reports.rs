//! Proof for issue 34, item 1 on the local control plane: `vapcheck controller` writes one
//! policy report per policy and binding into the report API the cluster serves, with the real
//! CRDs of the pinned modules (scripts/report-crds: OpenReports v0.2.1, and the wgpolicyk8s.io
//! CRDs of Kyverno's module).
//!
//! 1. `openreports_reports_follow_policies_maps_and_bindings` (kube-apiserver with
//!    `--event-ttl=5s`, the OpenReports CRDs installed): a VAP with a finding gets a
//!    ClusterReport with exactly one `fail` (VAP100, field and kind in `properties`), a clean
//!    VAP one `pass`, a binding that denies every request one `fail` (VAP130), a MAP with a
//!    finding one `fail` that is still there after its Warning Event has expired; fixing the
//!    VAP turns its `fail` into `pass` within 5 s; each report's owner reference names its
//!    object (kind, name, uid); deleting the VAP and the binding deletes their reports. This
//!    control plane runs no garbage collector (e2e/cluster/up starts kube-controller-manager
//!    with the VAP status controller only), so the deletions seen are vapcheck's own.
//!    A VAP whose finding the `vapcheck.io/ignore` annotation suppresses gets a `pass` and a
//!    `skip` marked suppressed (properties `suppressed`, `suppression`, `suppressionReason`,
//!    `unsuppressedResult`), and one `fail` within 5 s once the annotation is removed.
//! 2. `wgpolicy_reports_when_only_wgpolicy_is_served`: with neither API served, vapcheck
//!    writes statuses and logs no error or warning; once only the wgpolicyk8s.io CRDs are
//!    installed, the same reports appear as ClusterPolicyReports for the VAPs, the MAP, the
//!    binding that denies all and the webhook configuration applied before (each with its
//!    owner reference), a fix gives `pass` within 5 s, and deleted objects' reports go.
//!
//! `cargo test --test e2e -- --group reports --nocapture` prints the measured delays.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use serde_json::Value;
use support::{Cluster, UpOptions, Vapcheck, apply_yaml, wait_for};

/// How long the first report may take (vapcheck's start included).
const FIRST: Duration = Duration::from_secs(60);
/// Issue 34: a fix turns `fail` into `pass` within 5 s.
const CHANGE: Duration = Duration::from_secs(5);
/// How long a deleted object's report may stay: one schema poll (1 s here) and its work.
const GONE: Duration = Duration::from_secs(10);

const BAD: &str = "bad.reports.e2e.vapcheck.dev";
const CLEAN: &str = "clean.reports.e2e.vapcheck.dev";
const PARAMS: &str = "params.reports.e2e.vapcheck.dev";
const DENY_BINDING: &str = "deny-binding.reports.e2e.vapcheck.dev";
const MAP: &str = "map.reports.e2e.vapcheck.dev";
const WEBHOOKS: &str = "webhooks.reports.e2e.vapcheck.dev";
const SUPPRESSED: &str = "suppressed.reports.e2e.vapcheck.dev";
/// The suppression of [`SUPPRESSED`]'s one finding, and its reason.
const IGNORE: &str = "VAP100@spec.validations[0]";
const IGNORE_REASON: &str = "accepted until the e2e policy is rewritten";

/// A fail-closed webhook whose Service does not exist (its rule names a resource nothing
/// serves here, so it intercepts nothing); `CLIENT` is its clientConfig.
const WEBHOOK_CONFIG: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: webhooks.reports.e2e.vapcheck.dev
webhooks:
  - name: missing.reports.e2e.vapcheck.dev
    clientConfig: CLIENT
    rules:
      - apiGroups: [reports.e2e.vapcheck.dev]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [widgets]
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
"#;

#[derive(Clone, Copy)]
struct ReportApi {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
}

const OPENREPORTS: ReportApi = ReportApi {
    group: "openreports.io",
    version: "v1alpha1",
    kind: "ClusterReport",
    plural: "clusterreports",
};
const WGPOLICY: ReportApi = ReportApi {
    group: "wgpolicyk8s.io",
    version: "v1alpha2",
    kind: "ClusterPolicyReport",
    plural: "clusterpolicyreports",
};

fn api(client: &Client, r: ReportApi) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(r.group, r.version, r.kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, r.plural),
    )
}

/// The report `name` as JSON, if it exists.
async fn report(client: &Client, r: ReportApi, name: &str) -> anyhow::Result<Option<Value>> {
    match api(client, r).get_opt(name).await? {
        Some(o) => Ok(Some(serde_json::to_value(o)?)),
        None => Ok(None),
    }
}

/// Waits for the report `name` whose summary is `summary` (pass, fail, warn, error, skip).
async fn wait_summary(
    client: &Client,
    r: ReportApi,
    name: &str,
    summary: [u64; 5],
    timeout: Duration,
) -> anyhow::Result<(Value, Duration)> {
    let started = Instant::now();
    let last = std::sync::Mutex::new(Value::Null);
    let found = wait_for(
        &format!("{} {name} with summary {summary:?}", r.kind),
        timeout,
        || async {
            let Some(rep) = report(client, r, name).await? else {
                return Ok(None);
            };
            *last.lock().unwrap_or_else(|p| p.into_inner()) = rep.clone();
            Ok((counts(&rep) == summary).then_some(rep))
        },
    )
    .await
    .with_context(|| {
        format!(
            "last seen: {}",
            last.lock().unwrap_or_else(|p| p.into_inner())
        )
    })?;
    Ok((found, started.elapsed()))
}

fn counts(rep: &Value) -> [u64; 5] {
    let s = &rep["summary"];
    ["pass", "fail", "warn", "error", "skip"].map(|k| s[k].as_u64().unwrap_or(0))
}

async fn wait_gone(
    client: &Client,
    r: ReportApi,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    wait_for(
        &format!("{} {name} to be deleted", r.kind),
        timeout,
        || async { Ok(report(client, r, name).await?.is_none().then_some(())) },
    )
    .await?;
    Ok(started.elapsed())
}

/// Installs the CRDs of `dir` and waits until they are established.
async fn install_crds(client: &Client, dir: &Path) -> anyhow::Result<()> {
    let mut names = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| dir.display().to_string())?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let text = std::fs::read_to_string(e.path())?;
        for o in apply_yaml(client, &text).await? {
            names.push(o.metadata.name.unwrap_or_default());
        }
    }
    ensure!(
        names.len() == 2,
        "expected 2 CRDs in {}: {names:?}",
        dir.display()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        wait_for(&format!("CRD {name} established"), FIRST, || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                let crd = crds.get(&name).await?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                Ok(established.then_some(()))
            }
        })
        .await?;
    }
    Ok(())
}

fn vap(name: &str, expression: &str, param_kind: bool) -> String {
    let param_kind = if param_kind {
        "\n  paramKind: {apiVersion: v1, kind: ConfigMap}"
    } else {
        ""
    };
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:{param_kind}
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  validations:
    - expression: {}
"#,
        serde_json::to_string(expression).unwrap_or_default()
    )
}

/// [`vap`] with the `vapcheck.io/ignore` annotation [`IGNORE`] and its reason.
fn suppressed_vap(name: &str, expression: &str) -> String {
    vap(name, expression, false).replace(
        &format!("  name: {name}\n"),
        &format!(
            "  name: {name}\n  annotations:\n    vapcheck.io/ignore: {IGNORE:?}\n    vapcheck.io/ignore-reason: {IGNORE_REASON:?}\n"
        ),
    )
}

const DENY_ALL: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: deny-binding.reports.e2e.vapcheck.dev
spec:
  policyName: params.reports.e2e.vapcheck.dev
  validationActions: [Deny]
  paramRef:
    name: missing
    namespace: default
    parameterNotFoundAction: Deny
"#;

const MAP_WITH_FINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: map.reports.e2e.vapcheck.dev
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["configmaps"]
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: 'Object{dataz: {"k": "v"}}'
"#;

/// The one result of a report, checked to be vapcheck's.
fn only_result(rep: &Value) -> anyhow::Result<&Value> {
    let results = rep["results"].as_array().context("no results")?;
    ensure!(results.len() == 1, "expected 1 result: {rep}");
    ensure!(results[0]["source"] == "vapcheck", "{rep}");
    Ok(&results[0])
}

/// The report's owner reference names `kind` `name` with `uid`, as the controller reference.
fn assert_owner(rep: &Value, kind: &str, name: &str, uid: &str) -> anyhow::Result<()> {
    let owners = rep["metadata"]["ownerReferences"]
        .as_array()
        .context("no ownerReferences")?;
    ensure!(owners.len() == 1, "{rep}");
    let o = &owners[0];
    ensure!(
        o["apiVersion"] == "admissionregistration.k8s.io/v1"
            && o["kind"] == kind
            && o["name"] == name
            && o["uid"] == uid
            && o["controller"] == true,
        "owner reference {o} is not {kind} {name} {uid}"
    );
    ensure!(
        rep["scope"]["uid"] == uid && rep["scope"]["kind"] == kind,
        "{rep}"
    );
    Ok(())
}

fn uid_of<K: kube::Resource>(o: &K) -> String {
    o.meta().uid.clone().unwrap_or_default()
}

/// The binding that denies every request: one critical VAP130 fail on its report, owned by the
/// binding; its (clean) policy, which has params, passes.
async fn deny_binding_reported(client: &Client, api: ReportApi) -> anyhow::Result<Value> {
    let (deny, _) = wait_summary(
        client,
        api,
        &format!("vapcheck-vapb-{DENY_BINDING}"),
        [0, 1, 0, 0, 0],
        FIRST,
    )
    .await?;
    let r = only_result(&deny)?;
    ensure!(
        r["rule"] == "VAP130" && r["severity"] == "critical" && r["policy"] == DENY_BINDING,
        "{r}"
    );
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    assert_owner(
        &deny,
        "ValidatingAdmissionPolicyBinding",
        DENY_BINDING,
        &uid_of(&bindings.get(DENY_BINDING).await?),
    )?;
    wait_summary(
        client,
        api,
        &format!("vapcheck-vap-{PARAMS}"),
        [1, 0, 0, 0, 0],
        FIRST,
    )
    .await?;
    Ok(deny)
}

async fn openreports_reports_follow_policies_maps_and_bindings() -> anyhow::Result<()> {
    let crds = support::script_output("scripts/report-crds")?;
    let cluster = Cluster::start(UpOptions {
        apiserver_extra_args: Some("--event-ttl=5s".to_owned()),
        ..UpOptions::default()
    })?;
    let client = cluster.client().await?;
    install_crds(&client, &crds.join("openreports")).await?;
    let vapcheck = Vapcheck::start(cluster.kubeconfig(), "reports-or", &[])?;

    apply_yaml(&client, &vap(BAD, "object.replicas > 1", false)).await?;
    apply_yaml(&client, &vap(CLEAN, "true", false)).await?;
    apply_yaml(&client, &vap(PARAMS, "true", true)).await?;
    apply_yaml(&client, DENY_ALL).await?;
    apply_yaml(&client, MAP_WITH_FINDING).await?;

    // A VAP with a finding: one fail.
    let bad_name = format!("vapcheck-vap-{BAD}");
    let (bad, took) = wait_summary(&client, OPENREPORTS, &bad_name, [0, 1, 0, 0, 0], FIRST).await?;
    println!("reports: VAP with a finding reported after {took:?} (vapcheck's start included)");
    ensure!(bad["source"] == "vapcheck", "{bad}");
    let r = only_result(&bad)?;
    ensure!(
        r["result"] == "fail" && r["rule"] == "VAP100" && r["policy"] == BAD,
        "{r}"
    );
    ensure!(
        r["properties"]["rule"] == "VAP100"
            && r["properties"]["severity"] == "high"
            && r["properties"]["field"] == "spec.validations[0].expression"
            && r["properties"]["kind"] == "apps/v1, Kind=Deployment",
        "{r}"
    );
    ensure!(
        r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("undefined field 'replicas'"),
        "{r}"
    );
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bad_uid = uid_of(&vaps.get(BAD).await?);
    assert_owner(&bad, "ValidatingAdmissionPolicy", BAD, &bad_uid)?;

    // A clean policy: one pass.
    let (clean, _) = wait_summary(
        &client,
        OPENREPORTS,
        &format!("vapcheck-vap-{CLEAN}"),
        [1, 0, 0, 0, 0],
        FIRST,
    )
    .await?;
    ensure!(only_result(&clean)?["result"] == "pass", "{clean}");

    // A binding that denies every request: one critical fail on the binding's report; its
    // (clean) policy passes.
    deny_binding_reported(&client, OPENREPORTS).await?;

    // A MAP with a finding: one fail, still there once its Warning Event has expired.
    let map_name = format!("vapcheck-map-{MAP}");
    let (map, _) = wait_summary(&client, OPENREPORTS, &map_name, [0, 1, 0, 0, 0], FIRST).await?;
    let r = only_result(&map)?;
    ensure!(
        r["rule"] == "VAP100"
            && r["message"]
                .as_str()
                .unwrap_or_default()
                .contains("undefined field 'dataz'"),
        "{r}"
    );
    let maps: Api<MutatingAdmissionPolicy> = Api::all(client.clone());
    assert_owner(
        &map,
        "MutatingAdmissionPolicy",
        MAP,
        &uid_of(&maps.get(MAP).await?),
    )?;
    let events: Api<Event> = Api::all(client.clone());
    let map_events = || async {
        let list = events
            .list(&ListParams::default().fields(&format!("regarding.name={MAP}")))
            .await?;
        anyhow::Ok(list.items.len())
    };
    ensure!(
        map_events().await? >= 1,
        "no Event on the MAP: the TTL part proves nothing"
    );
    let started = Instant::now();
    wait_for(
        "the MAP's Events to expire (--event-ttl=5s)",
        Duration::from_secs(60),
        || async { Ok((map_events().await? == 0).then_some(())) },
    )
    .await?;
    let expired_after = started.elapsed();
    println!("reports: the MAP's Events expired {expired_after:?} after the report was seen");
    let still = report(&client, OPENREPORTS, &map_name)
        .await?
        .context("the MAP's report went with its Events")?;
    ensure!(counts(&still) == [0, 1, 0, 0, 0], "{still}");

    // A fix turns fail into pass within 5 s.
    apply_yaml(&client, &vap(BAD, "has(object.spec.replicas)", false)).await?;
    let (fixed, took) =
        wait_summary(&client, OPENREPORTS, &bad_name, [1, 0, 0, 0, 0], CHANGE).await?;
    println!("reports: fix reported as pass after {took:?}");
    ensure!(only_result(&fixed)?["result"] == "pass", "{fixed}");

    // A suppressed finding (the vapcheck.io/ignore annotation): a skip marked suppressed and a
    // pass, neither a fail nor dropped; upstream's warning text stays in the status. Without
    // the annotation: one fail within 5 s.
    let annotated = suppressed_vap(SUPPRESSED, "object.replicas > 1");
    ensure!(annotated.contains("vapcheck.io/ignore: "), "{annotated}");
    apply_yaml(&client, &annotated).await?;
    let suppressed_name = format!("vapcheck-vap-{SUPPRESSED}");
    let (rep, took) = wait_summary(
        &client,
        OPENREPORTS,
        &suppressed_name,
        [1, 0, 0, 0, 1],
        FIRST,
    )
    .await?;
    println!("reports: suppressed finding reported as skip after {took:?}");
    let results = rep["results"].as_array().context("no results")?;
    ensure!(results.len() == 2, "expected a pass and a skip: {rep}");
    ensure!(
        results[0]["result"] == "pass"
            && results[0]["message"] == "no findings but 1 suppressed by vapcheck.io/ignore",
        "{rep}"
    );
    let skip = &results[1];
    ensure!(
        skip["result"] == "skip"
            && skip["rule"] == "VAP100"
            && skip["severity"] == "high"
            && skip["source"] == "vapcheck"
            && skip["message"]
                .as_str()
                .unwrap_or_default()
                .contains("undefined field 'replicas'"),
        "{skip}"
    );
    let want = serde_json::json!({
        "rule": "VAP100",
        "severity": "high",
        "field": "spec.validations[0].expression",
        "kind": "apps/v1, Kind=Deployment",
        "suppressed": "true",
        "suppression": format!("vapcheck.io/ignore: {IGNORE}"),
        "suppressionReason": IGNORE_REASON,
        "unsuppressedResult": "fail",
    });
    ensure!(skip["properties"] == want, "{skip}");
    let status =
        serde_json::to_value(support::wait_for_type_checking(&client, SUPPRESSED, FIRST).await?)?;
    let warnings = status["typeChecking"]["expressionWarnings"]
        .as_array()
        .context("the suppressed warning is gone from typeChecking")?;
    ensure!(
        warnings.len() == 1 && warnings[0]["fieldRef"] == "spec.validations[0].expression",
        "{status}"
    );
    apply_yaml(&client, &vap(SUPPRESSED, "object.replicas > 1", false)).await?;
    let (rep, took) = wait_summary(
        &client,
        OPENREPORTS,
        &suppressed_name,
        [0, 1, 0, 0, 0],
        CHANGE,
    )
    .await?;
    println!("reports: annotation removed, reported as fail after {took:?}");
    let r = only_result(&rep)?;
    ensure!(
        r["result"] == "fail"
            && r["rule"] == "VAP100"
            && r["properties"].get("suppressed").is_none(),
        "{r}"
    );

    // A webhook configuration: a webhook that cannot be called fails (critical: it fails
    // closed), and passes once it can; deleting the configuration deletes its report.
    apply_yaml(
        &client,
        &WEBHOOK_CONFIG.replace(
            "CLIENT",
            r#"{service: {namespace: default, name: missing-hook, port: 443}}"#,
        ),
    )
    .await?;
    let webhook_name = format!("vapcheck-vwc-{WEBHOOKS}");
    let (broken, took) =
        wait_summary(&client, OPENREPORTS, &webhook_name, [0, 1, 0, 0, 0], CHANGE).await?;
    println!("reports: webhook without its Service reported after {took:?}");
    let r = only_result(&broken)?;
    ensure!(
        r["result"] == "fail"
            && r["rule"] == "WebhookServiceNotFound"
            && r["severity"] == "critical"
            && r["policy"] == WEBHOOKS
            && r["properties"]["field"] == "webhooks[0]",
        "{r}"
    );
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let webhook_config = configs.get(WEBHOOKS).await?;
    assert_owner(
        &broken,
        "ValidatingWebhookConfiguration",
        WEBHOOKS,
        &uid_of(&webhook_config),
    )?;
    apply_yaml(
        &client,
        &WEBHOOK_CONFIG.replace("CLIENT", r#"{url: "https://127.0.0.1:1/validate"}"#),
    )
    .await?;
    let (callable, took) =
        wait_summary(&client, OPENREPORTS, &webhook_name, [1, 0, 0, 0, 0], CHANGE).await?;
    println!("reports: webhook fixed, reported as pass after {took:?}");
    ensure!(only_result(&callable)?["result"] == "pass", "{callable}");
    configs.delete(WEBHOOKS, &DeleteParams::default()).await?;
    let took = wait_gone(&client, OPENREPORTS, &webhook_name, GONE).await?;
    println!("reports: deleted webhook configuration's report gone after {took:?}");

    // Deleting an object deletes its report (vapcheck's sweep: no garbage collector here).
    vaps.delete(BAD, &DeleteParams::default()).await?;
    let took = wait_gone(&client, OPENREPORTS, &bad_name, GONE).await?;
    println!("reports: deleted VAP's report gone after {took:?}");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .delete(DENY_BINDING, &DeleteParams::default())
        .await?;
    let took = wait_gone(
        &client,
        OPENREPORTS,
        &format!("vapcheck-vapb-{DENY_BINDING}"),
        GONE,
    )
    .await?;
    println!("reports: deleted binding's report gone after {took:?}");

    // Exactly the reports of the remaining objects: clean, params, suppressed, the MAP.
    let all = api(&client, OPENREPORTS)
        .list(&ListParams::default())
        .await?;
    let mut names: Vec<String> = all
        .items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    ensure!(
        names
            == [
                format!("vapcheck-map-{MAP}"),
                format!("vapcheck-vap-{CLEAN}"),
                format!("vapcheck-vap-{PARAMS}"),
                format!("vapcheck-vap-{SUPPRESSED}"),
            ],
        "{names:?}"
    );
    no_errors(&vapcheck)?;
    Ok(())
}

/// The controller's log has no error and no warning line.
fn no_errors(vapcheck: &Vapcheck) -> anyhow::Result<()> {
    let log = vapcheck.log_text();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" ERROR ") || l.contains(" WARN "))
        .collect();
    if !bad.is_empty() {
        bail!(
            "the controller logged errors or warnings:\n{}",
            bad.join("\n")
        );
    }
    Ok(())
}

async fn wgpolicy_reports_when_only_wgpolicy_is_served() -> anyhow::Result<()> {
    let crds = support::script_output("scripts/report-crds")?;
    let cluster = Cluster::start(UpOptions::default())?;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(cluster.kubeconfig(), "reports-wg", &[])?;

    // Neither API served: statuses are written, nothing is logged as an error or a warning.
    // A MAP, a binding that denies all and a webhook configuration too: their reports must
    // appear once the API is.
    apply_yaml(&client, &vap(BAD, "object.replicas > 1", false)).await?;
    apply_yaml(&client, &vap(CLEAN, "true", false)).await?;
    apply_yaml(&client, &vap(PARAMS, "true", true)).await?;
    apply_yaml(&client, DENY_ALL).await?;
    apply_yaml(&client, MAP_WITH_FINDING).await?;
    apply_yaml(
        &client,
        &WEBHOOK_CONFIG.replace(
            "CLIENT",
            r#"{service: {namespace: default, name: missing-hook, port: 443}}"#,
        ),
    )
    .await?;
    support::wait_for_type_checking(&client, BAD, FIRST).await?;
    support::wait_for_type_checking(&client, CLEAN, FIRST).await?;
    support::wait_for_type_checking(&client, PARAMS, FIRST).await?;
    let log = vapcheck.log_text();
    ensure!(
        log.matches("serves neither openreports.io/v1alpha1 clusterreports nor wgpolicyk8s.io/v1alpha2 clusterpolicyreports").count() == 1,
        "the controller did not say once that no report API is served:\n{log}"
    );
    no_errors(&vapcheck)?;

    // Only wgpolicyk8s.io served: the same reports there.
    install_crds(&client, &crds.join("wgpolicy")).await?;
    let bad_name = format!("vapcheck-vap-{BAD}");
    let (bad, took) = wait_summary(&client, WGPOLICY, &bad_name, [0, 1, 0, 0, 0], FIRST).await?;
    println!("reports: ClusterPolicyReport after {took:?} from the CRDs' installation");
    let r = only_result(&bad)?;
    ensure!(
        r["rule"] == "VAP100"
            && r["properties"]["field"] == "spec.validations[0].expression"
            && r["properties"]["kind"] == "apps/v1, Kind=Deployment",
        "{r}"
    );
    ensure!(
        bad.get("source").is_none(),
        "wgpolicyk8s.io has no report-level source: {bad}"
    );
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    assert_owner(
        &bad,
        "ValidatingAdmissionPolicy",
        BAD,
        &uid_of(&vaps.get(BAD).await?),
    )?;
    wait_summary(
        &client,
        WGPOLICY,
        &format!("vapcheck-vap-{CLEAN}"),
        [1, 0, 0, 0, 0],
        FIRST,
    )
    .await?;

    // The MAP, the binding and the webhook configuration: the same results as with
    // openreports.io, each with `source` on the result and an owner reference to its object.
    let (map, took) = wait_summary(
        &client,
        WGPOLICY,
        &format!("vapcheck-map-{MAP}"),
        [0, 1, 0, 0, 0],
        FIRST,
    )
    .await?;
    println!("reports: MAP's ClusterPolicyReport after {took:?} (after the VAP's)");
    let r = only_result(&map)?;
    ensure!(
        r["rule"] == "VAP100"
            && r["properties"]["field"] == "spec.mutations[0].applyConfiguration.expression"
            && r["message"]
                .as_str()
                .unwrap_or_default()
                .contains("undefined field 'dataz'"),
        "{r}"
    );
    let maps: Api<MutatingAdmissionPolicy> = Api::all(client.clone());
    assert_owner(
        &map,
        "MutatingAdmissionPolicy",
        MAP,
        &uid_of(&maps.get(MAP).await?),
    )?;
    let deny = deny_binding_reported(&client, WGPOLICY).await?;
    let webhook_name = format!("vapcheck-vwc-{WEBHOOKS}");
    let (broken, took) =
        wait_summary(&client, WGPOLICY, &webhook_name, [0, 1, 0, 0, 0], FIRST).await?;
    println!(
        "reports: webhook configuration's ClusterPolicyReport after {took:?} (after the binding's)"
    );
    let r = only_result(&broken)?;
    ensure!(
        r["rule"] == "WebhookServiceNotFound"
            && r["severity"] == "critical"
            && r["properties"]["field"] == "webhooks[0]",
        "{r}"
    );
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    assert_owner(
        &broken,
        "ValidatingWebhookConfiguration",
        WEBHOOKS,
        &uid_of(&configs.get(WEBHOOKS).await?),
    )?;
    for (kind, rep) in [("MAP", &map), ("binding", &deny), ("webhook", &broken)] {
        ensure!(
            rep.get("source").is_none(),
            "wgpolicyk8s.io has no report-level source ({kind}): {rep}"
        );
    }
    configs.delete(WEBHOOKS, &DeleteParams::default()).await?;
    wait_gone(&client, WGPOLICY, &webhook_name, GONE).await?;
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .delete(DENY_BINDING, &DeleteParams::default())
        .await?;
    wait_gone(
        &client,
        WGPOLICY,
        &format!("vapcheck-vapb-{DENY_BINDING}"),
        GONE,
    )
    .await?;

    apply_yaml(&client, &vap(BAD, "has(object.spec.replicas)", false)).await?;
    let (_, took) = wait_summary(&client, WGPOLICY, &bad_name, [1, 0, 0, 0, 0], CHANGE).await?;
    println!("reports: wgpolicyk8s.io fix reported as pass after {took:?}");
    vaps.delete(BAD, &DeleteParams::default()).await?;
    wait_gone(&client, WGPOLICY, &bad_name, GONE).await?;
    let all = api(&client, WGPOLICY).list(&ListParams::default()).await?;
    let mut names: Vec<String> = all
        .items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    ensure!(
        names
            == [
                format!("vapcheck-map-{MAP}"),
                format!("vapcheck-vap-{CLEAN}"),
                format!("vapcheck-vap-{PARAMS}"),
            ],
        "expected the reports of the clean policy, the params policy and the MAP: {names:?}"
    );
    no_errors(&vapcheck)?;
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio_two_workers openreports_reports_follow_policies_maps_and_bindings,
    tokio_two_workers wgpolicy_reports_when_only_wgpolicy_is_served,
}
