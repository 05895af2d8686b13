//! `vapcheck check` on MutatingAdmissionPolicy and binding documents: the API server's verdict
//! (`apiServer`), in input order among validating policies, exit code 3 when one is rejected,
//! `--previous` for updates, and a document that does not deserialise as a finding (exit 3).

use std::process::Command;

use serde_json::{Value, json};

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
}

const MAP: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: NAME}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: EXPR}
";

fn map(name: &str, expr: &str) -> String {
    MAP.replace("NAME", name)
        .replace("EXPR", &format!("{expr:?}"))
}

const VAP_BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: vb}
spec: {policyName: p, validationActions: [Deny]}
";

const MAP_BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mb}
spec:
  policyName: m
  matchResources:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [DELETE], resources: [pods]}
";

fn run(args: &[&str], files: &[&std::path::Path]) -> (Option<i32>, Value, String) {
    let o = binary().args(args).args(files).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v, stderr)
}

fn verdicts(v: &Value) -> Vec<Value> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| json!([e["kind"], e["name"], e["apiServer"]]))
        .collect()
}

#[test]
fn mutating_documents_get_the_api_server_verdict_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.yaml");
    let b = dir.path().join("b.yaml");
    std::fs::write(
        &a,
        format!(
            "{}---\n{VAP_BINDING}---\n{MAP_BINDING}",
            map("m", "Object{spec: Object.spec{replicas: 1}}")
        ),
    )
    .unwrap();
    std::fs::write(&b, map("other", "Object.spec{}")).unwrap();
    let (code, v, stderr) = run(&["check", "-o", "json"], &[&b, &a]);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        verdicts(&v),
        [
            json!(["MutatingAdmissionPolicy", "other", {"accepted": false, "causes": [
                "spec.mutations[0].applyConfiguration.expression: Invalid value: \"Object.spec{}\": must evaluate to Object but got Object.spec"
            ]}]),
            json!(["MutatingAdmissionPolicy", "m", {"accepted": true}]),
            json!(["ValidatingAdmissionPolicyBinding", "vb", {"accepted": true}]),
            json!(["MutatingAdmissionPolicyBinding", "mb", {"accepted": false, "causes": [
                "spec.matchResources.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\""
            ]}]),
        ]
    );
    // Only accepted objects: exit 0; text output names the kind.
    let (code, _, stderr) = run(&["check", "-o", "json"], &[&a]);
    assert_eq!(code, Some(3), "{stderr}");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, map("m", "Object{}")).unwrap();
    let o = binary().arg("check").arg(&good).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("m [mutating] ("), "{text}");
}

#[test]
fn previous_makes_an_update_and_old_servers_do_not_serve_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.yaml");
    std::fs::write(&new, map("m", "[1].includes(1) ? Object{} : Object{}")).unwrap();
    let (code, v, _) = run(&["check", "-o", "json"], &[&new]);
    assert_eq!(code, Some(3));
    let cause = v[0]["apiServer"]["causes"][0].as_str().unwrap();
    assert!(
        cause.contains("undeclared reference to 'includes'"),
        "{cause}"
    );
    let prev = new.to_str().unwrap();
    let (code, v, stderr) = run(&["check", "-o", "json", "--previous", prev], &[&new]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(v[0]["apiServer"], json!({"accepted": true}));
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, map("m", "Object{}")).unwrap();
    let (code, v, _) = run(
        &["check", "-o", "json", "--kubernetes-version", "1.35"],
        &[&good],
    );
    assert_eq!(code, Some(3));
    assert_eq!(
        v[0]["apiServer"]["causes"],
        json!([
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy is not served by kube-apiserver 1.35 (served from 1.36)"
        ])
    );
}

#[test]
fn a_mutating_document_that_does_not_deserialise_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {name: m}\nspec:\n  mutations: 3\n",
    )
    .unwrap();
    let o = binary().arg("check").arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "{}:5:14: spec.mutations: invalid type: integer `3`, expected a sequence",
            bad.display()
        )),
        "{out}"
    );
}
