//! Proof for issue 15's cost findings on the real kube-apiserver 1.37.1: two policies on
//! ConfigMaps (failurePolicy Fail, Deny binding), checked by `vapcheck check -o json
//! --kubeconfig <cluster>` (extended mode, schemas from the cluster):
//!
//! * `over`: `object.data.all(k, object.data[k].matches(<80-character regex>))`. A ConfigMap's
//!   `data` values have no `maxLength`, so vapcheck's worst case exceeds `PerCallLimit` and it
//!   reports a `PerCallLimit` finding naming `data[*]`. A dry-run create of a ConfigMap whose
//!   value is 1,000,000 characters (within the bounds: ConfigMap data up to 1 MiB) is denied by
//!   kube-apiserver with the runtime cost error (matches costs ceil((1 + 1e6) × 0.1) ×
//!   ceil(80 × 0.25) ≈ 2,000,000 at run time, cel-go `interpreter/runtimecost.go`).
//! * `under`: `object.metadata.name.size() < 100`: vapcheck's maximum is under every limit (no
//!   finding) and the same large ConfigMap is admitted.
//!
//! `cargo test --test e2e -- --group cost_limits --nocapture` prints one line per case.

use crate::support;

use std::time::Duration;

use anyhow::bail;
use kube::Client;
use serde_json::{Value, json};

const NS: &str = "cost15-e2e";

/// `^(a|a|…|a)+$` with 38 alternatives: 80 characters, matches only `a`s.
fn regex() -> String {
    let body = vec!["a"; 38].join("|");
    let r = format!("^({body})+$");
    assert_eq!(r.len(), 80, "{r}");
    r
}

fn policy(case: &str, expr: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: cost15-{case}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {{cost15-case: {case}}}
  validations:
  - expression: {expr:?}
    message: "cost15 {case}: validation false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: cost15-{case}}}
spec:
  policyName: cost15-{case}
  validationActions: [Deny]
"#
    )
}

/// A dry-run create of a ConfigMap labelled for `case` whose one value has `len` `a`s:
/// `Ok(None)` when admitted, `Ok(Some(message))` when denied.
async fn request(client: &Client, case: &str, len: usize) -> anyhow::Result<Option<String>> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{case}-{len}"), "namespace": NS,
                     "labels": {"cost15-case": case}},
        "data": {"k": "a".repeat(len)}});
    support::dry_run_create(
        client,
        &format!("/api/v1/namespaces/{NS}/configmaps?dryRun=All"),
        &body,
    )
    .await
}

/// vapcheck's `check -o json` entries.
fn vapcheck(kubeconfig: &std::path::Path, file: &std::path::Path) -> anyhow::Result<Vec<Value>> {
    support::check_json(kubeconfig, file)
}

async fn cost_findings_match_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    support::apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
    )
    .await?;
    let over = format!("object.data.all(k, object.data[k].matches('{}'))", regex());
    let under = "object.metadata.name.size() < 100";
    let policies = [policy("over", &over), policy("under", under)];
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cost.yaml");
    std::fs::write(&file, policies.join("---\n"))?;
    for yaml in &policies {
        support::apply_yaml(&client, yaml).await?;
    }
    let entries = vapcheck(cluster.kubeconfig(), &file)?;
    let cost_of = |name: &str| -> Value {
        entries
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["status"]["cost"].clone())
            .unwrap_or(Value::Null)
    };
    let (over_cost, under_cost) = (cost_of("cost15-over"), cost_of("cost15-under"));

    // The over policy denies (with its cost error) once the plugin has loaded it.
    const BIG: usize = 1_000_000;
    let denied = support::wait_for(
        "the admission plugin to load the policies",
        Duration::from_secs(90),
        || async { request(&client, "over", BIG).await },
    )
    .await?;
    let under_big = request(&client, "under", BIG).await?;
    let over_small = request(&client, "over", 10).await?;
    eprintln!("cost-limits: over: vapcheck {over_cost}; kube-apiserver on 1e6 chars: {denied}");
    eprintln!(
        "cost-limits: under: vapcheck {under_cost}; kube-apiserver on 1e6 chars: {under_big:?}"
    );

    let mut failures = Vec::new();
    let finding = &over_cost["findings"][0];
    if finding["limit"] != "PerCallLimit"
        || finding["fieldRef"] != "spec.validations[0].expression"
        || finding["estimate"].as_u64().is_none_or(|e| e <= 1_000_000)
        || !finding["because"]
            .as_array()
            .is_some_and(|b| b.iter().any(|r| r == "`data[*]` has no maxLength"))
    {
        failures.push(format!(
            "over: vapcheck reports no PerCallLimit finding: {over_cost}"
        ));
    }
    if !denied.contains("cost15-over") || !denied.contains("actual cost limit exceeded") {
        failures.push(format!(
            "over: kube-apiserver denied without a cost error: {denied}"
        ));
    }
    if over_small.is_some() {
        failures.push(format!("over: a small ConfigMap is denied: {over_small:?}"));
    }
    if under_cost["findings"] != json!([])
        || under_cost["expressions"][0]["max"]
            .as_u64()
            .is_none_or(|m| m > 1_000_000)
    {
        failures.push(format!("under: vapcheck reports a finding: {under_cost}"));
    }
    if under_big.is_some() {
        failures.push(format!("under: kube-apiserver denied: {under_big:?}"));
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    eprintln!("cost-limits: 2 cases, 2 agree with kube-apiserver 1.37.1");
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio_multi_thread cost_findings_match_the_api_server,
}
