//! Proof for issue 13's binding verdicts: for each case a policy, a binding and params are
//! created on the real kube-apiserver 1.37.1, `vapcheck check -o json --kubeconfig <cluster>`
//! reads the same objects, and a matching request (a server-side dry-run create of a
//! ConfigMap labelled for the case) must get what vapcheck's verdict says:
//!
//! * `denies all matching requests`: denied, and the message holds vapcheck's `denialMessage`;
//! * `inactive`: admitted, although the policy's only validation is `false`;
//! * `evaluates`: a request the validation accepts is admitted, one it rejects is denied with
//!   the validation's message;
//! * `evaluates with warnings on kinds K`: the expression that has the warning fails at
//!   admission, so (failurePolicy Fail) the request is denied with the evaluation error.
//!
//! Each case's policy selects only objects labelled `bind13-case: <case>` (ConfigMaps, or
//! ClusterRoles for the cluster-scoped case), so cases (and the param ConfigMaps, which carry
//! no such label) do not disturb each other. The objects of the
//! "inactive" cases are created first and a sentinel case last: the admission plugin loads all
//! policies and bindings in one refresh, so once the sentinel denies, every earlier case is
//! loaded too; the admitted cases are then asked three times, a second apart.
//!
//! `cargo test --test e2e -- --group binding_verdicts --nocapture` prints one line per case and a
//! summary line `binding-verdicts: N cases, N agree with kube-apiserver`.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use serde_json::{Value, json};

const NS: &str = "bind13-e2e";

/// A case: its objects (policy, binding, params) and the request names to send.
struct Case {
    name: &'static str,
    yaml: String,
    /// Names of objects to dry-run create: the first must get the verdict's outcome; for
    /// `evaluates` the second is one the validation rejects.
    requests: Vec<String>,
    /// What to create: a ConfigMap in [`NS`], or a (cluster-scoped) ClusterRole.
    cluster_scoped: bool,
}

const CONFIGMAPS: &str = r#"    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]"#;

const CLUSTERROLES: &str = r#"    - apiGroups: ["rbac.authorization.k8s.io"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["clusterroles"]
      scope: Cluster"#;

fn policy(case: &str, failure: &str, param_kind: Option<(&str, &str)>, expr: &str) -> String {
    policy_for(case, failure, param_kind, expr, CONFIGMAPS)
}

fn policy_for(
    case: &str,
    failure: &str,
    param_kind: Option<(&str, &str)>,
    expr: &str,
    rules: &str,
) -> String {
    let pk = param_kind
        .map(|(v, k)| format!("  paramKind: {{apiVersion: {v}, kind: {k}}}\n"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: bind13-{case}}}
spec:
  failurePolicy: {failure}
{pk}  matchConstraints:
    resourceRules:
{rules}
    objectSelector:
      matchLabels: {{bind13-case: {case}}}
  validations:
  - expression: {expr:?}
    message: "bind13 {case}: validation failed"
"#
    )
}

fn binding(case: &str, policy: &str, actions: &str, rest: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: bind13-{case}}}
spec:
  policyName: {policy}
  validationActions: [{actions}]
{rest}"#
    )
}

fn doc(parts: &[String]) -> String {
    parts.join("---\n")
}

fn cases() -> Vec<Case> {
    let prefix_expr = "object.metadata.name.startsWith(params.data.prefix)";
    let one = |case: &'static str, yaml: String| Case {
        name: case,
        yaml,
        requests: vec![format!("ok-{case}"), format!("bad-{case}")],
        cluster_scoped: false,
    };
    vec![
        // inactive: params not found, parameterNotFoundAction Allow (CollectParams: no params)
        one(
            "missing-allow",
            doc(&[
                policy("missing-allow", "Fail", Some(("v1", "ConfigMap")), "false"),
                binding(
                    "missing-allow",
                    "bind13-missing-allow",
                    "Deny",
                    &format!(
                        "  paramRef: {{name: absent, namespace: {NS}, parameterNotFoundAction: Allow}}\n"
                    ),
                ),
            ]),
        ),
        // inactive: params not found with Deny, but failurePolicy Ignore drops the error
        one(
            "missing-deny-ignore",
            doc(&[
                policy(
                    "missing-deny-ignore",
                    "Ignore",
                    Some(("v1", "ConfigMap")),
                    "false",
                ),
                binding(
                    "missing-deny-ignore",
                    "bind13-missing-deny-ignore",
                    "Deny",
                    &format!(
                        "  paramRef: {{name: absent, namespace: {NS}, parameterNotFoundAction: Deny}}\n"
                    ),
                ),
            ]),
        ),
        // inactive: the binding's policy does not exist (its own "policy" would deny)
        one(
            "no-policy",
            doc(&[
                policy("no-policy", "Fail", None, "false"),
                binding("no-policy", "bind13-does-not-exist", "Deny", ""),
            ]),
        ),
        // inactive: matchResources select pods, the policy matches configmaps
        one(
            "disjoint",
            doc(&[
                policy("disjoint", "Fail", None, "false"),
                binding(
                    "disjoint",
                    "bind13-disjoint",
                    "Deny",
                    "  matchResources:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\"]\n      resources: [\"pods\"]\n",
                ),
            ]),
        ),
        // evaluates: the param is found by name
        one(
            "found",
            doc(&[
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bind13-prefix, namespace: {NS}}}\ndata: {{prefix: ok-}}\n"
                ),
                policy("found", "Fail", Some(("v1", "ConfigMap")), prefix_expr),
                binding(
                    "found",
                    "bind13-found",
                    "Deny",
                    &format!(
                        "  paramRef: {{name: bind13-prefix, namespace: {NS}, parameterNotFoundAction: Deny}}\n"
                    ),
                ),
            ]),
        ),
        // evaluates: a selector finds the param in the request's namespace (no paramRef.namespace)
        one(
            "selector",
            doc(&[
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bind13-selected, namespace: {NS}, labels: {{bind13-param: selector}}}}\ndata: {{prefix: ok-}}\n"
                ),
                policy("selector", "Fail", Some(("v1", "ConfigMap")), prefix_expr),
                binding(
                    "selector",
                    "bind13-selector",
                    "Deny",
                    "  paramRef: {selector: {matchLabels: {bind13-param: selector}}, parameterNotFoundAction: Deny}\n",
                ),
            ]),
        ),
        // evaluates, with params null: paramKind set, no paramRef ("Validate with nil params")
        one(
            "no-param-ref",
            doc(&[
                policy(
                    "no-param-ref",
                    "Fail",
                    Some(("v1", "ConfigMap")),
                    "params == null && object.metadata.name.startsWith('ok-')",
                ),
                binding("no-param-ref", "bind13-no-param-ref", "Deny", ""),
            ]),
        ),
        // evaluates with warnings: `object.nosuch` is not a ConfigMap field
        one(
            "warnings",
            doc(&[
                policy("warnings", "Fail", None, "object.nosuch == 'x'"),
                binding("warnings", "bind13-warnings", "Deny", ""),
            ]),
        ),
        // denies all: the param does not exist and parameterNotFoundAction is Deny; the
        // binding only warns, which does not apply to configuration errors
        one(
            "missing-deny",
            doc(&[
                policy("missing-deny", "Fail", Some(("v1", "ConfigMap")), "true"),
                binding(
                    "missing-deny",
                    "bind13-missing-deny",
                    "Warn",
                    &format!(
                        "  paramRef: {{name: absent, namespace: {NS}, parameterNotFoundAction: Deny}}\n"
                    ),
                ),
            ]),
        ),
        // denies all: paramRef.namespace set for a cluster-scoped param kind (Namespace)
        one(
            "cluster-param-namespace",
            doc(&[
                policy(
                    "cluster-param-namespace",
                    "Fail",
                    Some(("v1", "Namespace")),
                    "true",
                ),
                binding(
                    "cluster-param-namespace",
                    "bind13-cluster-param-namespace",
                    "Deny",
                    &format!(
                        "  paramRef: {{name: {NS}, namespace: {NS}, parameterNotFoundAction: Allow}}\n"
                    ),
                ),
            ]),
        ),
        // denies all: a namespaced param kind without paramRef.namespace, and the binding
        // matches only cluster-scoped requests (ClusterRoles)
        Case {
            cluster_scoped: true,
            ..one(
                "cluster-requests",
                doc(&[
                    policy_for(
                        "cluster-requests",
                        "Fail",
                        Some(("v1", "ConfigMap")),
                        "true",
                        CLUSTERROLES,
                    ),
                    binding(
                        "cluster-requests",
                        "bind13-cluster-requests",
                        "Deny",
                        "  paramRef: {name: bind13-prefix, parameterNotFoundAction: Allow}\n",
                    ),
                ]),
            )
        },
        // denies all: the param kind is not served (the policy's configuration error)
        one(
            "no-such-kind",
            doc(&[
                policy(
                    "no-such-kind",
                    "Fail",
                    Some(("bind13.example.com/v1", "Nope")),
                    "true",
                ),
                binding(
                    "no-such-kind",
                    "bind13-no-such-kind",
                    "Deny",
                    "  paramRef: {name: x, parameterNotFoundAction: Allow}\n",
                ),
            ]),
        ),
    ]
}

/// A dry-run create of a ConfigMap `name` in [`NS`] (or a ClusterRole) labelled for the
/// case: `Ok(None)` when admitted, `Ok(Some(message))` when denied.
async fn request(client: &Client, case: &Case, name: &str) -> anyhow::Result<Option<String>> {
    let labels = json!({"bind13-case": case.name});
    let (body, uri) = if case.cluster_scoped {
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": name, "labels": labels}, "rules": []}),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles?dryRun=All".to_owned(),
        )
    } else {
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": name, "namespace": NS, "labels": labels},
                   "data": {"k": "v"}}),
            format!("/api/v1/namespaces/{NS}/configmaps?dryRun=All"),
        )
    };
    support::dry_run_create(client, &uri, &body).await
}

/// Whether the API server's answer to the case's first request (and, for `evaluates`, its
/// second) is what the verdict says; `Err` is the disagreement.
fn agrees(
    case: &Case,
    verdict: &str,
    denial: &Value,
    first: &Option<String>,
    second: &Option<String>,
) -> Result<String, String> {
    let binding = format!("bind13-{}", case.name);
    let said = format!("first request: {first:?}; second: {second:?}");
    match verdict {
        "denies all matching requests" => {
            let want = denial.as_str().unwrap_or("<no denialMessage>");
            match first {
                Some(m) if m.contains(want) => Ok(format!("denied: {m}")),
                _ => Err(format!(
                    "vapcheck: denied with {want:?}; kube-apiserver: {said}"
                )),
            }
        }
        "inactive" => match (first, second) {
            (None, None) => Ok("admitted (both requests)".into()),
            _ => Err(format!("vapcheck: inactive; kube-apiserver: {said}")),
        },
        "evaluates" => match (first, second) {
            (None, Some(m))
                if m.contains(&format!("with binding '{binding}' denied request"))
                    && m.contains("validation failed") =>
            {
                Ok(format!("admitted, and denied by the validation: {m}"))
            }
            _ => Err(format!(
                "vapcheck: evaluates (ok- admitted, bad- denied by the validation); kube-apiserver: {said}"
            )),
        },
        v if v.starts_with("evaluates with warnings on kinds") && v.contains("v1 ConfigMap") => {
            match first {
                Some(m)
                    if m.contains(&format!("with binding '{binding}' denied request"))
                        && m.contains("no such key") =>
                {
                    Ok(format!("denied by the failing expression: {m}"))
                }
                _ => Err(format!(
                    "vapcheck: {v} (the expression fails on ConfigMaps); kube-apiserver: {said}"
                )),
            }
        }
        v => Err(format!("unexpected verdict {v:?}")),
    }
}

async fn binding_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    support::apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n"),
    )
    .await?;
    let cases = cases();
    // one file for vapcheck, in creation order
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cases.yaml");
    let all = cases
        .iter()
        .map(|c| c.yaml.clone())
        .collect::<Vec<_>>()
        .join("---\n");
    std::fs::write(
        &file,
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}\n---\n{all}"),
    )?;
    for c in &cases {
        support::apply_yaml(&client, &c.yaml)
            .await
            .with_context(|| format!("creating case {}", c.name))?;
    }
    let verdicts = support::binding_verdicts(
        cluster.kubeconfig(),
        &file,
        "ValidatingAdmissionPolicyBinding",
        "binding-verdicts",
    )?;
    if verdicts.len() != cases.len() {
        bail!(
            "vapcheck reported {} bindings for {} cases",
            verdicts.len(),
            cases.len()
        );
    }

    // The sentinel (created last) denies once the plugin has loaded every object.
    let sentinel = cases.last().context("no cases")?;
    support::wait_for(
        "the admission plugin to load the bindings",
        Duration::from_secs(90),
        || async {
            Ok(request(&client, sentinel, &sentinel.requests[0])
                .await?
                .map(|_| ()))
        },
    )
    .await?;

    let mut failures = Vec::new();
    let mut seen_verdicts = BTreeMap::<String, usize>::new();
    for c in &cases {
        let (verdict, denial) = &verdicts[&format!("bind13-{}", c.name)];
        // Ask three times, a second apart: the answer must be stable.
        let mut answers = Vec::new();
        for round in 0..3 {
            if round > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let first = request(&client, c, &c.requests[0]).await?;
            let second = request(&client, c, &c.requests[1]).await?;
            answers.push(agrees(c, verdict, denial, &first, &second));
        }
        let kind = if verdict.starts_with("evaluates with warnings") {
            "evaluates with warnings on kinds K".to_owned()
        } else {
            verdict.clone()
        };
        *seen_verdicts.entry(kind).or_default() += 1;
        match answers.iter().find(|a| a.is_err()).unwrap_or(&answers[0]) {
            Ok(what) => eprintln!(
                "binding-verdicts: {}: {verdict}: kube-apiserver {what}",
                c.name
            ),
            Err(why) => {
                eprintln!("binding-verdicts: {}: DISAGREE: {why}", c.name);
                failures.push(format!("{}: {why}", c.name));
            }
        }
    }
    eprintln!(
        "binding-verdicts: {} cases, {} agree with kube-apiserver 1.37.1; verdicts {seen_verdicts:?}",
        cases.len(),
        cases.len() - failures.len()
    );
    for v in [
        "denies all matching requests",
        "inactive",
        "evaluates",
        "evaluates with warnings on kinds K",
    ] {
        if !seen_verdicts.contains_key(v) {
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
    tokio_multi_thread binding_verdicts_match_the_api_server,
}
