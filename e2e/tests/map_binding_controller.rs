//! Proof for MutatingAdmissionPolicyBindings in the cluster (issue 34, item 1, for MAP
//! bindings): `vapcheck controller` watches them and says, through an Event on each binding
//! and an `openreports.io` ClusterReport per binding (the CRDs of the pinned module,
//! scripts/report-crds), what kube-apiserver 1.37.1 does with a matching request:
//!
//! 1. a binding whose `paramRef` names a ConfigMap that does not exist, with
//!    `parameterNotFoundAction: Deny`: a Warning Event `DeniesAllMatchingRequests` on the
//!    binding, naming it, whose quoted denial message is the end of what kube-apiserver
//!    answers a matching request; its report has exactly one `fail` (VAP130, critical) and
//!    an owner reference to the binding (kind, name, uid);
//! 2. the ConfigMap is created: within 5 s a Normal Event `Evaluates` on the binding and a
//!    report with one `pass`, and a matching request is admitted and mutated with the
//!    param's name;
//! 3. a binding that selects nothing the policy matches: a Warning Event `Inactive` and a
//!    report with one `warn` (VAP131), and a matching request is admitted unmutated;
//! 4. a binding whose policy does not exist: a Warning Event `Inactive` within 5 s naming the
//!    binding, the policy and the cause (kube-apiserver skips such bindings:
//!    `e2e_map_binding_verdicts`, case `no-policy`);
//! 5. deleting a binding deletes its report (this control plane runs no garbage collector:
//!    the deletion is vapcheck's own).
//!
//! `cargo test --test e2e -- --group map_binding_controller --nocapture` prints the measured delays.

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{Vapcheck, apply_yaml, dry_run_create, shared_cluster, wait_for};

const NS: &str = "mapb-ctl";
const POLICY: &str = "params.mapb-ctl.e2e.vapcheck.dev";
const DENY: &str = "deny.mapb-ctl.e2e.vapcheck.dev";
const NARROW: &str = "narrow.mapb-ctl.e2e.vapcheck.dev";
const NARROW_POLICY: &str = "narrow-policy.mapb-ctl.e2e.vapcheck.dev";
const ORPHAN: &str = "orphan.mapb-ctl.e2e.vapcheck.dev";
const MISSING_POLICY: &str = "missing.mapb-ctl.e2e.vapcheck.dev";
const PARAM: &str = "limits";
const LABEL: &str = "mapb-ctl-mutated";

/// How long the first verdict may take (vapcheck's start included).
const FIRST: Duration = Duration::from_secs(60);
/// A binding or param change is reflected within 5 s (as for validating bindings).
const CHANGE: Duration = Duration::from_secs(5);
/// How long a deleted binding's report may stay: one schema poll (1 s here) and its work.
const GONE: Duration = Duration::from_secs(10);

/// A MAP of ConfigMaps labelled `mapb-ctl: <case>` that labels them with its param's name.
fn policy(name: &str, case: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  paramKind: {{apiVersion: v1, kind: ConfigMap}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {{mapb-ctl: {case}}}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{{metadata: Object.metadata{{labels: {{"{LABEL}": params.metadata.name}}}}}}'
"#
    )
}

/// The report API of the e2e (`openreports.io/v1alpha1` ClusterReport).
fn reports(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "ClusterReport");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusterreports"),
    )
}

/// Installs the OpenReports CRDs of the pinned module and waits until they are established.
async fn install_openreports(client: &Client) -> anyhow::Result<()> {
    let dir = support::script_output("scripts/report-crds")?.join("openreports");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
        let text = std::fs::read_to_string(entry?.path())?;
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
        wait_for(&format!("CRD {name} established"), FIRST, || async {
            let crd = crds.get(&name).await?;
            Ok(crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// Waits for an Event on the MutatingAdmissionPolicyBinding `binding` with `reason` and
/// `type_`; returns it and how long it took.
async fn wait_event(
    client: &Client,
    binding: &str,
    reason: &str,
    type_: &str,
    timeout: Duration,
) -> anyhow::Result<(Event, Duration)> {
    let started = Instant::now();
    let events: Api<Event> = Api::all(client.clone());
    let event = wait_for(
        &format!("a {type_} Event {reason} on MutatingAdmissionPolicyBinding {binding}"),
        timeout,
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("regarding.name={binding}")))
                .await?;
            Ok(list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some(type_)
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref())
                        == Some("MutatingAdmissionPolicyBinding")
            }))
        },
    )
    .await?;
    Ok((event, started.elapsed()))
}

/// Waits for the report of `binding` whose summary is `[pass, fail, warn, error, skip]`.
async fn wait_report(
    client: &Client,
    binding: &str,
    summary: [u64; 5],
    timeout: Duration,
) -> anyhow::Result<(Value, Duration)> {
    let started = Instant::now();
    let api = reports(client);
    let name = format!("vapcheck-mapb-{binding}");
    let report = wait_for(
        &format!("ClusterReport {name} with summary {summary:?}"),
        timeout,
        || async {
            let Some(o) = api.get_opt(&name).await? else {
                return Ok(None);
            };
            let v = serde_json::to_value(o)?;
            let s = &v["summary"];
            let counts =
                ["pass", "fail", "warn", "error", "skip"].map(|k| s[k].as_u64().unwrap_or(0));
            Ok((counts == summary).then_some(v))
        },
    )
    .await?;
    Ok((report, started.elapsed()))
}

/// A server-side dry-run create of a ConfigMap labelled for `case`: `Err`-free answer, the
/// denial message if denied.
async fn request(client: &Client, case: &str, name: &str) -> anyhow::Result<Option<String>> {
    dry_run_create(
        client,
        &format!("/api/v1/namespaces/{NS}/configmaps?dryRun=All"),
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": {"mapb-ctl": case}},
        }),
    )
    .await
}

/// The label [`LABEL`] a real (not dry-run) create of a ConfigMap labelled for `case` gets.
async fn created_label(client: &Client, case: &str, name: &str) -> anyhow::Result<Option<String>> {
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"mapb-ctl": case}},
    }))?;
    let created = cms.create(&Default::default(), &cm).await?;
    cms.delete(name, &DeleteParams::default()).await?;
    Ok(created
        .metadata
        .labels
        .unwrap_or_default()
        .get(LABEL)
        .cloned())
}

/// The one result of `report` (its rule, result, severity).
fn only_result(report: &Value) -> anyhow::Result<(String, String, String)> {
    let results = report["results"]
        .as_array()
        .context("no results in the report")?;
    ensure!(results.len() == 1, "{report}");
    let r = &results[0];
    Ok((
        r["properties"]["rule"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        r["result"].as_str().unwrap_or_default().to_owned(),
        r["severity"].as_str().unwrap_or_default().to_owned(),
    ))
}

async fn map_bindings_get_events_and_reports_that_follow_the_api_server() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    install_openreports(&client).await?;
    apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"),
    )
    .await?;
    let mut vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "map-bindings",
        &["--lease-name", "vapcheck-e2e-map-bindings"],
    )?;

    // 1. paramRef to a ConfigMap that does not exist, parameterNotFoundAction Deny.
    apply_yaml(&client, &policy(POLICY, "params")).await?;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: {DENY}}}
spec:
  policyName: {POLICY}
  paramRef: {{name: {PARAM}, namespace: {NS}, parameterNotFoundAction: Deny}}
"#
        ),
    )
    .await?;
    let (denies, took) =
        wait_event(&client, DENY, "DeniesAllMatchingRequests", "Warning", FIRST).await?;
    println!("map-binding-controller: denies-all Event after {took:?} (vapcheck start included)");
    let note = denies.note.clone().unwrap_or_default();
    ensure!(note.contains(DENY) && note.contains(POLICY), "{note}");
    // The analysis quotes the API server's message: `... with "<message>"`.
    let quoted = note
        .split(" with \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .with_context(|| format!("no quoted denial message in {note:?}"))?
        .to_owned();
    let answer = wait_for("a matching request denied", FIRST, || async {
        request(&client, "params", "any-name").await
    })
    .await?;
    println!("map-binding-controller: kube-apiserver: {answer}");
    ensure!(
        answer.ends_with(&quoted),
        "kube-apiserver said {answer:?}; vapcheck's Event: {note:?}"
    );
    let (report, _) = wait_report(&client, DENY, [0, 1, 0, 0, 0], FIRST).await?;
    assert_eq!(
        only_result(&report)?,
        (
            "VAP130".to_owned(),
            "fail".to_owned(),
            "critical".to_owned()
        )
    );
    let bindings: Api<MutatingAdmissionPolicyBinding> = Api::all(client.clone());
    let stored = bindings.get(DENY).await?;
    let owner = &report["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "MutatingAdmissionPolicyBinding");
    assert_eq!(owner["name"], DENY);
    assert_eq!(
        owner["uid"].as_str(),
        stored.metadata.uid.as_deref(),
        "{report}"
    );
    assert_eq!(
        report["metadata"]["ownerReferences"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // 2. The param appears: within 5 s the binding evaluates, and the request is mutated.
    apply_yaml(
        &client,
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {PARAM}\n  namespace: {NS}\ndata:\n  max: \"3\"\n"
        ),
    )
    .await?;
    let started = Instant::now();
    let (evaluates, _) = wait_event(&client, DENY, "Evaluates", "Normal", CHANGE).await?;
    println!(
        "map-binding-controller: Evaluates Event {:?} after the param was created",
        started.elapsed()
    );
    ensure!(
        evaluates.note.as_deref().unwrap_or_default().contains(DENY),
        "{evaluates:?}"
    );
    let (report, _) = wait_report(&client, DENY, [1, 0, 0, 0, 0], CHANGE).await?;
    println!(
        "map-binding-controller: pass report {:?} after the param was created",
        started.elapsed()
    );
    assert_eq!(only_result(&report)?.1, "pass");
    let label = wait_for("a matching request admitted and mutated", FIRST, || async {
        if request(&client, "params", "any-name").await?.is_some() {
            return Ok(None);
        }
        Ok(Some(
            created_label(&client, "params", "mutated-params").await?,
        ))
    })
    .await?;
    assert_eq!(label.as_deref(), Some(PARAM));

    // 3. A binding that selects nothing its policy matches (secrets only): inactive.
    apply_yaml(&client, &policy(NARROW_POLICY, "narrow")).await?;
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: {NARROW}}}
spec:
  policyName: {NARROW_POLICY}
  paramRef: {{name: {PARAM}, namespace: {NS}, parameterNotFoundAction: Deny}}
  matchResources:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["secrets"]
"#
        ),
    )
    .await?;
    let (inactive, took) = wait_event(&client, NARROW, "Inactive", "Warning", FIRST).await?;
    println!("map-binding-controller: Inactive Event {took:?} after the binding was created");
    ensure!(
        inactive
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(NARROW),
        "{inactive:?}"
    );
    let (report, _) = wait_report(&client, NARROW, [0, 0, 1, 0, 0], CHANGE).await?;
    assert_eq!(
        only_result(&report)?,
        ("VAP131".to_owned(), "warn".to_owned(), "low".to_owned())
    );
    // kube-apiserver agrees: the request is admitted and not mutated.
    ensure!(request(&client, "narrow", "any-name").await?.is_none());
    assert_eq!(created_label(&client, "narrow", "narrow-cm").await?, None);

    // 4. A binding whose policy does not exist: inactive (kube-apiserver skips it:
    // e2e_map_binding_verdicts, case `no-policy`), as an Event.
    apply_yaml(
        &client,
        &format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: {ORPHAN}}}
spec:
  policyName: {MISSING_POLICY}
"#
        ),
    )
    .await?;
    let (orphan, took) = wait_event(&client, ORPHAN, "Inactive", "Warning", CHANGE).await?;
    println!("map-binding-controller: orphan's Inactive Event {took:?} after it was created");
    let note = orphan.note.unwrap_or_default();
    ensure!(
        note.contains(ORPHAN)
            && note.contains(MISSING_POLICY)
            && note.contains("no MutatingAdmissionPolicy of that name exists"),
        "{note}"
    );

    // 5. Deleting a binding deletes its report.
    bindings.delete(DENY, &DeleteParams::default()).await?;
    let started = Instant::now();
    let api = reports(&client);
    let name = format!("vapcheck-mapb-{DENY}");
    wait_for(&format!("ClusterReport {name} deleted"), GONE, || async {
        Ok(api.get_opt(&name).await?.is_none().then_some(()))
    })
    .await?;
    println!(
        "map-binding-controller: report deleted {:?} after its binding",
        started.elapsed()
    );
    // The other binding's report stays.
    wait_report(&client, NARROW, [0, 0, 1, 0, 0], CHANGE).await?;

    let log = vapcheck.log_text();
    ensure!(!log.contains("ERROR"), "vapcheck logged an error:\n{log}");
    vapcheck.stop();
    bindings.delete(NARROW, &DeleteParams::default()).await?;
    bindings.delete(ORPHAN, &DeleteParams::default()).await?;
    let maps: Api<k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy> =
        Api::all(client.clone());
    for name in [POLICY, NARROW_POLICY] {
        maps.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio map_bindings_get_events_and_reports_that_follow_the_api_server,
}
