//! Proof for issue 14's runtime classes on the real kube-apiserver 1.37.1: for each case a
//! policy (failurePolicy Fail, on Pods and Deployments labelled for the case) and a Deny
//! binding are created; `vapcheck check -o json --kubeconfig <cluster>` (extended mode) gives
//! the policy's `ExpressionsValid` condition; a server-side dry-run create of a Pod and of a
//! Deployment (for the `oldObject` cases, a dry-run patch of ones created beforehand: an
//! UPDATE request) must then get what the class says:
//!
//! * `static typing only` (`True/StaticTypingOnly`) and findings in branches not evaluated for
//!   a kind: both objects admitted (each expression is written to be true whenever it
//!   evaluates without error);
//! * `fails at admission` (`False/ExpressionWarnings`): the Pod (every failing case fails on
//!   Pods) is denied, with an evaluation error or the validation's message for a wrong result,
//!   and the Deployment, for which the failing branch is not evaluated, is admitted.
//!
//! `cargo test --test e2e -- --group runtime_classes --nocapture` prints one line per case and a
//! summary line `runtime-classes: N cases, N agree with kube-apiserver`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use serde_json::{Value, json};

const NS: &str = "rc14-e2e";

/// (case, expected ExpressionsValid reason, expression)
const CASES: &[(&str, &str, &str)] = &[
    // Kind-guarded branches: upstream reports `undefined field` for the other kind.
    (
        "kind-guard",
        "StaticTypingOnly",
        "object.kind == 'Pod' ? object.spec.containers.size() > 0 : object.spec.template.spec.containers.size() > 0",
    ),
    // list(A) + list(B) of two schema paths.
    (
        "list-concat",
        "StaticTypingOnly",
        // (`initContainers` guarded: a Pod may omit it, a runtime-safety finding otherwise.)
        "object.kind != 'Pod' || !has(object.spec.initContainers) || (object.spec.containers + object.spec.initContainers).size() == 2",
    ),
    // A conditional of an object and a map.
    (
        "object-or-map",
        "StaticTypingOnly",
        "object.kind != 'Pod' || !('rc14' in (has(object.spec.securityContext) ? object.spec.securityContext : {}))",
    ),
    // Equality with null.
    (
        "null-equality",
        "StaticTypingOnly",
        "object.metadata.name != null",
    ),
    // has() of a field the kind lacks is false; the branch it guards is not evaluated.
    (
        "has-guard",
        "StaticTypingOnly",
        "!has(object.spec.template) || object.spec.template.spec.containers.size() > 0",
    ),
    // The negative branch of has() of a required field (a Deployment's spec.template): not
    // evaluated for a Deployment (the registry validates before validating admission); for a
    // Pod, has() of a field it lacks is false.
    (
        "has-required",
        "StaticTypingOnly",
        "(!has(object.spec.template) && object.spec.containers.size() > 0) || has(object.spec.template)",
    ),
    // object.apiVersion and request.kind.group/version guards (the matched kind's).
    (
        "api-version",
        "StaticTypingOnly",
        "object.apiVersion == 'v1' ? object.spec.containers.size() > 0 : object.spec.template.spec.containers.size() > 0",
    ),
    (
        "request-kind-group",
        "StaticTypingOnly",
        "(request.kind.group == 'apps' && request.kind.version == 'v1') || object.spec.containers.size() > 0",
    ),
    // A typo under an apiVersion guard: fails for the Pod.
    (
        "api-version-typo",
        "ExpressionWarnings",
        "object.apiVersion != 'v1' || object.spec.containrs.size() > 0",
    ),
    // matchConditions select the Pod (see `match_condition`): the validation is not
    // evaluated for the Deployment.
    (
        "match-condition",
        "StaticTypingOnly",
        "object.spec.containers.size() > 0",
    ),
    (
        "match-condition-typo",
        "ExpressionWarnings",
        "object.spec.containrs.size() > 0",
    ),
    // matchConditions that select Deployments through an optional chain and a key test:
    // the validation, which reads Deployment fields, is not evaluated for the Pod.
    (
        "match-condition-optional",
        "StaticTypingOnly",
        "object.spec.template.spec.containers.size() > 0",
    ),
    (
        "match-condition-key",
        "StaticTypingOnly",
        "object.spec.template.spec.containers.size() > 0",
    ),
    // Variables (see `variables_of`) are evaluated only where they are used: `tpl` reads a
    // Deployment path and is used only for Deployments; `typo` is used only for Pods.
    (
        "variable-guarded",
        "NoWarnings",
        "object.kind != 'Deployment' || size(variables.tpl) > 0",
    ),
    (
        "variable-typo",
        "ExpressionWarnings",
        "object.kind != 'Pod' || size(variables.typo) > 0",
    ),
    // Optional chains: `hasValue()` of a chain through a field the kind lacks is false, the
    // branch it guards is not evaluated; an optional selection of a missing field is
    // `optional.none()`, not an error.
    (
        "optional-has-value",
        "StaticTypingOnly",
        "object.?spec.template.hasValue() ? object.spec.template.spec.containers.size() > 0 : true",
    ),
    (
        "optional-or-value",
        "StaticTypingOnly",
        "!object.?spec.paused.orValue(false) || object.spec.template.metadata.name != ''",
    ),
    (
        "optional-absent",
        "StaticTypingOnly",
        "object.?spec.template.spec.containers.orValue([]).size() >= 0",
    ),
    // An optional chain through a field no matched kind has (a typo): always none, so the
    // validation is false for the Pod (the Deployment's branch is not evaluated).
    (
        "optional-typo",
        "ExpressionWarnings",
        "object.kind != 'Pod' || object.?spec.containrs.orValue([]).size() > 0",
    ),
    // `in` on an object tests its keys: false for a field the kind lacks, true for a
    // required one.
    (
        "key-in-object",
        "StaticTypingOnly",
        "!('template' in object.spec) || object.spec.template.spec.containers.size() > 0",
    ),
    (
        "key-required",
        "StaticTypingOnly",
        "('template' in object.spec) || object.spec.containers.size() > 0",
    ),
    // oldObject (UPDATE requests, see `is_update`): has() of a required field of the stored
    // object; and a typo under an oldObject kind guard.
    (
        "old-object-required",
        "StaticTypingOnly",
        "(!has(oldObject.spec.template) && oldObject.spec.containers.size() > 0) || has(oldObject.spec.template)",
    ),
    (
        "old-object-typo",
        "ExpressionWarnings",
        "oldObject.kind != 'Pod' || oldObject.spec.containrs.size() > 0",
    ),
    // A typo: no such key at run time.
    (
        "typo",
        "ExpressionWarnings",
        "object.kind != 'Pod' || object.spec.containrs.size() > 0",
    ),
    // A label value compared with a bool: never true.
    (
        "string-eq-bool",
        "ExpressionWarnings",
        "object.kind != 'Pod' || object.metadata.labels['rc14-case'] == true",
    ),
    // A label value used as a condition: no such overload at run time.
    (
        "string-condition",
        "ExpressionWarnings",
        "object.kind != 'Pod' || (object.metadata.labels['rc14-case'] ? true : true)",
    ),
];

const SENTINEL: &str = "sentinel";

/// The matchConditions of a case (`spec.matchConditions`, YAML), if any.
fn match_condition(case: &str) -> &'static str {
    match case {
        "match-condition" | "match-condition-typo" => {
            "\n  matchConditions:\n  - name: pods-only\n    expression: \"request.kind.kind == 'Pod'\""
        }
        "match-condition-optional" => {
            "\n  matchConditions:\n  - name: deployments-only\n    expression: \"object.?spec.template.hasValue()\""
        }
        "match-condition-key" => {
            "\n  matchConditions:\n  - name: deployments-only\n    expression: \"'template' in object.spec\""
        }
        _ => "",
    }
}

/// Cases checked on UPDATE requests (a dry-run patch of an object created beforehand), where
/// `oldObject` is the stored object; the others on CREATE.
fn is_update(case: &str) -> bool {
    case.starts_with("old-object")
}

/// The variables of a case (`spec.variables`, YAML), if any.
fn variables_of(case: &str) -> &'static str {
    match case {
        "variable-guarded" => {
            "\n  variables:\n  - name: tpl\n    expression: object.spec.template.spec.containers"
        }
        "variable-typo" => "\n  variables:\n  - name: typo\n    expression: object.spec.containrs",
        _ => "",
    }
}

fn policy(case: &str, expr: &str) -> String {
    let conditions = format!("{}{}", match_condition(case), variables_of(case));
    let operation = if is_update(case) { "UPDATE" } else { "CREATE" };
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: rc14-{case}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["{operation}"]
      resources: ["pods"]
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["{operation}"]
      resources: ["deployments"]
    objectSelector:
      matchLabels: {{rc14-case: {case}}}{conditions}
  validations:
  - expression: {expr:?}
    message: "rc14 {case}: validation false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: rc14-{case}}}
spec:
  policyName: rc14-{case}
  validationActions: [Deny]
"#
    )
}

/// A dry-run create of a Pod or a Deployment labelled for `case`: `Ok(None)` when admitted,
/// `Ok(Some(message))` when denied.
async fn request(client: &Client, case: &str, kind: &str) -> anyhow::Result<Option<String>> {
    let uri = match kind {
        "Pod" => format!("/api/v1/namespaces/{NS}/pods?dryRun=All"),
        _ => format!("/apis/apps/v1/namespaces/{NS}/deployments?dryRun=All"),
    };
    request_at(client, case, kind, &uri).await
}

/// A create of the Pod or Deployment of `case` at `uri`.
async fn request_at(
    client: &Client,
    case: &str,
    kind: &str,
    uri: &str,
) -> anyhow::Result<Option<String>> {
    let labels = json!({"rc14-case": case});
    let pod_spec = json!({
        "containers": [{"name": "c", "image": "registry.example/app:1"}],
        "initContainers": [{"name": "i", "image": "registry.example/init:1"}]
    });
    let name = format!("{case}-{}", kind.to_lowercase());
    let body = match kind {
        "Pod" => json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": NS, "labels": labels},
                   "spec": pod_spec}),
        _ => json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": name, "namespace": NS, "labels": labels},
                   "spec": {"selector": {"matchLabels": {"app": "x"}},
                            "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}}}),
    };
    support::dry_run_create(client, uri, &body).await
}

/// Creates the Pod or Deployment of an UPDATE case (for real; `AlreadyExists` from an
/// earlier run on the same cluster is fine), then returns what a dry-run merge patch of it
/// (an annotation added: an UPDATE request) gets: `Ok(None)` when admitted.
async fn update(client: &Client, case: &str, kind: &str) -> anyhow::Result<Option<String>> {
    use http_body_util::BodyExt;
    let name = format!("{case}-{}", kind.to_lowercase());
    let (create_uri, object_uri) = match kind {
        "Pod" => (
            format!("/api/v1/namespaces/{NS}/pods"),
            format!("/api/v1/namespaces/{NS}/pods/{name}?dryRun=All"),
        ),
        _ => (
            format!("/apis/apps/v1/namespaces/{NS}/deployments"),
            format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}?dryRun=All"),
        ),
    };
    let created = request_at(client, case, kind, &create_uri).await?;
    if let Some(m) = created.filter(|m| !m.starts_with("HTTP 409")) {
        bail!("creating the {kind} of {case}: {m}");
    }
    let patch = json!({"metadata": {"annotations": {"rc14-update": "1"}}});
    let req = http::Request::builder()
        .method(http::Method::PATCH)
        .uri(object_uri)
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&patch)?))?;
    let response = client.send(req).await.context("sending a dry-run patch")?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    if (200..300).contains(&code) {
        return Ok(None);
    }
    let status: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("HTTP {code}: {}", String::from_utf8_lossy(&bytes)))?;
    Ok(Some(format!(
        "HTTP {code}: {}",
        status["message"].as_str().unwrap_or_default()
    )))
}

/// vapcheck's `ExpressionsValid` (reason, message) per policy name.
fn vapcheck(
    kubeconfig: &std::path::Path,
    file: &std::path::Path,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let entries = support::check_json(kubeconfig, file)?;
    let mut out = BTreeMap::new();
    for e in entries {
        let Some(conditions) = e["status"]["conditions"].as_array() else {
            continue;
        };
        for c in conditions {
            if c["type"] == "ExpressionsValid" {
                out.insert(
                    e["name"].as_str().unwrap_or_default().to_owned(),
                    (
                        c["reason"].as_str().unwrap_or_default().to_owned(),
                        c["message"].as_str().unwrap_or_default().to_owned(),
                    ),
                );
            }
        }
    }
    Ok(out)
}

async fn runtime_classes_match_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    support::apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
    )
    .await?;
    // Pods need their service account (no service account controller runs here).
    support::apply_yaml(
        &client,
        &format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: default, namespace: {NS}}}\n"
        ),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cases.yaml");
    let mut all: Vec<String> = CASES.iter().map(|(c, _, e)| policy(c, e)).collect();
    all.push(policy(SENTINEL, "false"));
    std::fs::write(&file, all.join("---\n"))?;
    for yaml in &all {
        support::apply_yaml(&client, yaml).await?;
    }
    let classes = vapcheck(cluster.kubeconfig(), &file)?;

    // The sentinel (created last) denies once the plugin has loaded every policy.
    support::wait_for(
        "the admission plugin to load the policies",
        Duration::from_secs(90),
        || async {
            Ok(request(&client, SENTINEL, "Pod")
                .await?
                .filter(|m| m.contains("rc14 sentinel"))
                .map(|_| ()))
        },
    )
    .await?;

    let mut failures = Vec::new();
    for (case, want_reason, expr) in CASES {
        let (reason, message) = classes
            .get(&format!("rc14-{case}"))
            .cloned()
            .unwrap_or_default();
        let (pod, deployment) = if is_update(case) {
            (
                update(&client, case, "Pod").await?,
                update(&client, case, "Deployment").await?,
            )
        } else {
            (
                request(&client, case, "Pod").await?,
                request(&client, case, "Deployment").await?,
            )
        };
        let said = format!("Pod: {pod:?}; Deployment: {deployment:?}");
        let agree = match reason.as_str() {
            "StaticTypingOnly" | "NoWarnings" => pod.is_none() && deployment.is_none(),
            "ExpressionWarnings" => {
                pod.as_deref().is_some_and(|m| {
                    m.contains(&format!("ValidatingAdmissionPolicy 'rc14-{case}'"))
                }) && deployment.is_none()
            }
            _ => false,
        };
        eprintln!(
            "runtime-classes: {case}: vapcheck ExpressionsValid {reason} ({message}); kube-apiserver {said}"
        );
        if reason != *want_reason {
            failures.push(format!(
                "{case}: vapcheck says {reason}, the case expects {want_reason} ({expr})"
            ));
        } else if !agree {
            failures.push(format!("{case}: vapcheck {reason}; kube-apiserver {said}"));
        }
    }
    eprintln!(
        "runtime-classes: {} cases, {} agree with kube-apiserver 1.37.1",
        CASES.len(),
        CASES.len() - failures.len()
    );
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio_multi_thread runtime_classes_match_the_api_server,
}
