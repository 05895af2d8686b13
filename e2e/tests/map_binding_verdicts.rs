//! Proof for the MutatingAdmissionPolicyBinding verdicts of `vapcheck check` (issue 13 for
//! MAPs): each case's MAP, binding and params are created on the real kube-apiserver 1.37.1,
//! `vapcheck check -o json --kubeconfig <cluster>` reads the same objects, and a matching
//! request (a server-side dry-run create of a ConfigMap labelled for the case) must get what
//! vapcheck's verdict says:
//!
//! * `denies all matching requests`: denied, and the message is vapcheck's `denialMessage`
//!   (the generic dispatcher's `policy '<p>' with binding '<b>' denied request: ...`, or
//!   `policy "<p>" denied request: ...` for a policy-level error);
//! * `inactive`: admitted and not mutated;
//! * `evaluates`: admitted and mutated (the MAP adds a label whose value is the param's name,
//!   so the param really was used).
//!
//! Each MAP selects only ConfigMaps labelled `mapb-case: <case>`. A sentinel case, created
//! last, denies once the admission plugin has loaded every object; the other cases are then
//! asked three times, a second apart.
//!
//! `cargo test --test e2e -- --group map_binding_verdicts --nocapture` prints one line per case and
//! `map-binding-verdicts: N cases, N agree with kube-apiserver 1.37.1`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use serde_json::{Value, json};

const NS: &str = "mapb-e2e";
const LABEL: &str = "mapb-mutated";

struct Case {
    name: &'static str,
    yaml: String,
}

fn policy(case: &str, param_kind: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {{name: mapb-{case}}}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  paramKind: {param_kind}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    objectSelector:
      matchLabels: {{mapb-case: {case}}}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{{metadata: Object.metadata{{labels: {{"{LABEL}": params.metadata.name}}}}}}'
"#
    )
}

fn binding(case: &str, policy: &str, rest: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: mapb-{case}}}
spec:
  policyName: {policy}
{rest}"#
    )
}

fn param(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {NS}}}\ndata: {{k: v}}\n"
    )
}

const CM: &str = "{apiVersion: v1, kind: ConfigMap}";

fn cases() -> Vec<Case> {
    let case = |name: &'static str, parts: Vec<String>| Case {
        name,
        yaml: parts.join("---\n"),
    };
    let by_name = |name: &str, action: &str| {
        format!(
            "  paramRef: {{name: {name}, namespace: {NS}, parameterNotFoundAction: {action}}}\n"
        )
    };
    vec![
        case(
            "missing-allow",
            vec![
                policy("missing-allow", CM),
                binding(
                    "missing-allow",
                    "mapb-missing-allow",
                    &by_name("absent", "Allow"),
                ),
            ],
        ),
        case(
            "no-policy",
            vec![binding(
                "no-policy",
                "mapb-nothing-of-that-name",
                &by_name("absent", "Deny"),
            )],
        ),
        case(
            "disjoint",
            vec![
                policy("disjoint", CM),
                param("mapb-disjoint-param"),
                binding(
                    "disjoint",
                    "mapb-disjoint",
                    &format!(
                        "{}  matchResources:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\"]\n      resources: [\"secrets\"]\n",
                        by_name("mapb-disjoint-param", "Deny")
                    ),
                ),
            ],
        ),
        case(
            "found",
            vec![
                policy("found", CM),
                param("mapb-found-param"),
                binding("found", "mapb-found", &by_name("mapb-found-param", "Deny")),
            ],
        ),
        case(
            "no-such-kind",
            vec![
                policy(
                    "no-such-kind",
                    "{apiVersion: mapb.example.com/v1, kind: Nope}",
                ),
                binding("no-such-kind", "mapb-no-such-kind", &by_name("x", "Deny")),
            ],
        ),
        // The sentinel: created last, denies once everything is loaded.
        case(
            "missing-deny",
            vec![
                policy("missing-deny", CM),
                binding(
                    "missing-deny",
                    "mapb-missing-deny",
                    &by_name("absent", "Deny"),
                ),
            ],
        ),
    ]
}

/// A dry-run create of a ConfigMap labelled for `case`: `Ok(labels)` of the object admission
/// returned, or `Err(message)` when denied.
async fn request(
    client: &Client,
    case: &str,
) -> anyhow::Result<Result<BTreeMap<String, String>, String>> {
    use http_body_util::BodyExt;
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("req-{case}"), "namespace": NS,
                     "labels": {"mapb-case": case}}});
    let req = http::Request::builder()
        .method(http::Method::POST)
        .uri(format!("/api/v1/namespaces/{NS}/configmaps?dryRun=All"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(&body)?))?;
    let response = client.send(req).await.context("sending a dry-run create")?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let value: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("HTTP {code}: {}", String::from_utf8_lossy(&bytes)))?;
    if (200..300).contains(&code) {
        Ok(Ok(serde_json::from_value(
            value["metadata"]["labels"].clone(),
        )?))
    } else {
        Ok(Err(format!(
            "HTTP {code}: {}",
            value["message"].as_str().unwrap_or_default()
        )))
    }
}

fn agrees(
    case: &str,
    verdict: &str,
    denial: &Value,
    answer: &Result<BTreeMap<String, String>, String>,
) -> Result<String, String> {
    match (verdict, answer) {
        ("denies all matching requests", Err(m)) => {
            let want = denial.as_str().unwrap_or("<no denialMessage>");
            if m.ends_with(want) {
                Ok(format!("denied: {m}"))
            } else {
                Err(format!(
                    "vapcheck: denied with {want:?}; kube-apiserver: {m}"
                ))
            }
        }
        ("inactive", Ok(labels)) if !labels.contains_key(LABEL) => {
            Ok("admitted, not mutated".into())
        }
        ("evaluates", Ok(labels))
            if labels.get(LABEL).map(String::as_str) == Some(&format!("mapb-{case}-param")[..]) =>
        {
            Ok(format!("admitted and mutated: {LABEL}={}", labels[LABEL]))
        }
        _ => Err(format!("vapcheck: {verdict}; kube-apiserver: {answer:?}")),
    }
}

async fn map_binding_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n");
    support::apply_yaml(&client, &namespace).await?;
    let cases = cases();
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cases.yaml");
    let all = cases
        .iter()
        .map(|c| c.yaml.clone())
        .collect::<Vec<_>>()
        .join("---\n");
    std::fs::write(&file, format!("{namespace}---\n{all}"))?;
    for c in &cases {
        support::apply_yaml(&client, &c.yaml)
            .await
            .with_context(|| format!("creating case {}", c.name))?;
    }
    let verdicts = support::binding_verdicts(
        cluster.kubeconfig(),
        &file,
        "MutatingAdmissionPolicyBinding",
        "map-binding-verdicts",
    )?;
    if verdicts.len() != cases.len() {
        bail!(
            "vapcheck reported {} MAP bindings for {} cases",
            verdicts.len(),
            cases.len()
        );
    }
    let sentinel = cases.last().context("no cases")?;
    support::wait_for(
        "the admission plugin to load the MAP bindings",
        Duration::from_secs(90),
        || async { Ok(request(&client, sentinel.name).await?.err().map(|_| ())) },
    )
    .await?;

    let mut failures = Vec::new();
    let mut seen = BTreeMap::<String, usize>::new();
    for c in &cases {
        let (verdict, denial) = &verdicts[&format!("mapb-{}", c.name)];
        let mut answers = Vec::new();
        for round in 0..3 {
            if round > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let answer = request(&client, c.name).await?;
            answers.push(agrees(c.name, verdict, denial, &answer));
        }
        *seen.entry(verdict.clone()).or_default() += 1;
        match answers.iter().find(|a| a.is_err()).unwrap_or(&answers[0]) {
            Ok(what) => eprintln!(
                "map-binding-verdicts: {}: {verdict}: kube-apiserver {what}",
                c.name
            ),
            Err(why) => {
                eprintln!("map-binding-verdicts: {}: DISAGREE: {why}", c.name);
                failures.push(format!("{}: {why}", c.name));
            }
        }
    }
    eprintln!(
        "map-binding-verdicts: {} cases, {} agree with kube-apiserver 1.37.1; verdicts {seen:?}",
        cases.len(),
        cases.len() - failures.len()
    );
    for v in ["denies all matching requests", "inactive", "evaluates"] {
        if !seen.contains_key(v) {
            failures.push(format!("no case has the verdict {v:?}"));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio_multi_thread map_binding_verdicts_match_the_api_server,
}
