//! `vapcheck check` on bindings and params: a verdict and reason for every binding, in text
//! and JSON; malformed params named by file, document and field; every set of the bindings
//! corpus (`../shared/corpus/bindings/`) read and reported.
//!
//! These tests need `../shared` (the OpenAPI documents and the corpus). Without it they are
//! skipped with a message, except under CI (`CI` set), where a missing `../shared` fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// `$VAPCHECK_SHARED`, then `<repository>/../shared`, then `/work/shared`; `None` (skip)
/// when it is missing outside CI; a panic under CI.
fn shared() -> Option<PathBuf> {
    let dir = crate::support::shared_dir();
    if dir.join("openapi/v1.35").is_dir() && dir.join("corpus/bindings").is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} (../shared) is missing or incomplete; CI needs it",
            dir.display()
        );
    }
    eprintln!("skipped: {} is missing", dir.display());
    None
}

fn check(shared: &Path, extra: &[&str], files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .arg("check")
        .args(extra)
        .arg("--openapi")
        .arg(shared.join("openapi/v1.35"))
        .args(files)
        .output()
        .unwrap()
}

/// One policy with a ConfigMap paramKind and five bindings, one per outcome.
const SCENARIO: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: limits.example.com}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: team-a, labels: {use: limits}}
data: {maxReplicas: "3"}
---
apiVersion: v1
kind: Secret
metadata: {name: absent, namespace: team-a}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: found}
spec:
  policyName: limits.example.com
  validationActions: [Deny]
  paramRef: {name: limits, namespace: team-a, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: missing-deny}
spec:
  policyName: limits.example.com
  validationActions: [Warn]
  paramRef: {name: absent, namespace: team-a, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: missing-allow}
spec:
  policyName: limits.example.com
  validationActions: [Deny]
  paramRef: {selector: {matchLabels: {use: other}}, namespace: team-a, parameterNotFoundAction: Allow}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-policy}
spec:
  policyName: nope.example.com
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: elsewhere}
spec:
  policyName: limits.example.com
  validationActions: [Deny]
  matchResources:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
"#;

#[test]
fn every_binding_gets_a_verdict_and_a_reason() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, SCENARIO).unwrap();
    let o = check(&shared, &["-o", "json"], std::slice::from_ref(&file));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let verdicts: BTreeMap<&str, (&str, &str)> = entries
        .iter()
        .filter(|e| e["kind"] == "ValidatingAdmissionPolicyBinding")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                (
                    e["verdict"].as_str().unwrap(),
                    e["reason"].as_str().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), 5);
    assert_eq!(verdicts["found"].0, "evaluates");
    assert!(
        verdicts["found"]
            .1
            .contains("once per param (1 ConfigMap: team-a/limits)")
    );
    assert_eq!(verdicts["missing-deny"].0, "denies all matching requests");
    assert!(
        verdicts["missing-deny"].1.starts_with(
            "binding \"missing-deny\" of policy \"limits.example.com\": paramRef name \"absent\" in namespace \"team-a\" matches no ConfigMap and parameterNotFoundAction is Deny"
        ),
        "{}",
        verdicts["missing-deny"].1
    );
    assert_eq!(verdicts["missing-allow"].0, "inactive");
    assert_eq!(verdicts["no-policy"].0, "inactive");
    assert_eq!(verdicts["elsewhere"].0, "inactive");
    let deny = entries
        .iter()
        .find(|e| e["name"] == "missing-deny")
        .unwrap();
    assert_eq!(
        deny["effect"]["denialMessage"],
        "ValidatingAdmissionPolicy 'limits.example.com' with binding 'missing-deny' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    // the Secret of the same name is named as a param of the wrong kind
    assert!(deny["effect"]["notes"][0].as_str().unwrap().contains(
        "v1 Secret \"team-a/absent\" is in the input, but the policy's paramKind is v1 ConfigMap"
    ));
    let policy = entries
        .iter()
        .find(|e| e["name"] == "limits.example.com")
        .unwrap();
    assert_eq!(
        policy["boundBy"],
        serde_json::json!(["found", "missing-deny", "missing-allow", "elsewhere"])
    );
    // existing fields unchanged
    assert_eq!(policy["apiServer"], serde_json::json!({"accepted": true}));
    assert!(policy["status"]["conditions"].is_array());

    let o = check(&shared, &[], &[file]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("  denies all matching requests: binding \"missing-deny\""),
        "{text}"
    );
    assert!(
        text.ends_with(
            "bindings: 1 deny all matching requests, 3 inactive, 1 evaluate (0 with warnings)\n"
        ),
        "{text}"
    );
}

#[test]
fn malformed_params_are_named_by_file_document_and_field() {
    let Some(shared) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let bad = SCENARIO.replace(
        "metadata: {name: limits, namespace: team-a, labels: {use: limits}}",
        "metadata: {name: limits, namespace: team-a, labels: [use]}",
    );
    std::fs::write(&file, bad).unwrap();
    let o = check(&shared, &[], std::slice::from_ref(&file));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "bad.yaml: document 2: param object (v1 ConfigMap) \"limits\": metadata.labels: must be a map of strings"
        ),
        "{err}"
    );
    // objects of kinds no policy uses as params are still ignored, malformed or not
    let file = dir.path().join("other.yaml");
    std::fs::write(
        &file,
        SCENARIO.replace(
            "kind: Secret\nmetadata: {name: absent, namespace: team-a}",
            "kind: Secret\nmetadata: {name: 3}",
        ),
    )
    .unwrap();
    let o = check(&shared, &[], &[file]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // a selector that does not parse: the API server rejects the binding (exit 3), and the
    // verdict says it never takes effect
    let file = dir.path().join("sel.yaml");
    std::fs::write(
        &file,
        SCENARIO.replace(
            "{matchLabels: {use: other}}",
            "{matchExpressions: [{key: use, operator: Equals, values: [x]}]}",
        ),
    )
    .unwrap();
    let o = check(&shared, &["-o", "json"], &[file]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let b = entries
        .iter()
        .find(|e| e["name"] == "missing-allow")
        .unwrap();
    assert_eq!(b["verdict"], "inactive");
    assert!(
        b["apiServer"]["causes"][0]
            .as_str()
            .unwrap()
            .starts_with("spec.paramRef.selector.matchExpressions[0].operator")
    );
}

/// The objects of a corpus file (list items walked).
fn objects_of(f: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(f).unwrap();
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    docs.into_iter()
        .flat_map(|d| match d.get("items").and_then(Value::as_array) {
            Some(items) => items.clone(),
            None => vec![d],
        })
        .collect()
}

/// Every file of `corpus/bindings` is read (per set: a set is one folder, as it would be
/// applied), and every binding of the admissionregistration.k8s.io group gets a verdict.
/// The sets of kubernetes/cel-admission-webhook use the prototype group
/// `admissionregistration.x-k8s.io`, which is not Kubernetes' API: they have no policy or
/// binding vapcheck reads, and say so.
#[test]
fn every_corpus_binding_set_gets_a_verdict() {
    let Some(shared) = shared() else { return };
    let root = shared.join("corpus/bindings");
    let mut sets = Vec::new();
    for owner in std::fs::read_dir(&root).unwrap() {
        let owner = owner.unwrap().path();
        if owner.is_dir() {
            for set in std::fs::read_dir(&owner).unwrap() {
                sets.push(set.unwrap().path());
            }
        }
    }
    sets.sort();
    // The folders two levels under corpus/bindings (owner/set): a set added to or removed from
    // the shared corpus changes it.
    assert_eq!(sets.len(), 116, "binding sets in {}", root.display());
    let (mut files_read, mut bindings, mut prototype) = (0, 0, 0);
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    for set in &sets {
        let mut files: Vec<PathBuf> = std::fs::read_dir(set)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let crds: Vec<&PathBuf> = files
            .iter()
            .filter(|f| f.to_string_lossy().ends_with(".crd.yaml"))
            .collect();
        let mut extra = vec!["-o".to_string(), "json".to_string()];
        for c in &crds {
            extra.push("--crd".into());
            extra.push(c.display().to_string());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let o = check(&shared, &extra, &files);
        let stderr = String::from_utf8_lossy(&o.stderr);
        files_read += files.len();
        let objects: Vec<Value> = files.iter().flat_map(|f| objects_of(f)).collect();
        let kubernetes = |o: &&Value| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"))
        };
        if !objects.iter().any(|o| kubernetes(&o)) {
            assert_eq!(o.status.code(), Some(2), "{}: {stderr}", set.display());
            assert!(
                stderr.contains(
                    "no ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingWebhookConfiguration, MutatingWebhookConfiguration, Kyverno ValidatingPolicy or NamespacedValidatingPolicy, or Gatekeeper ConstraintTemplate with K8sNativeValidation code found"
                ),
                "{}: {stderr}",
                set.display()
            );
            prototype += 1;
            continue;
        }
        assert!(
            matches!(o.status.code(), Some(0 | 1 | 3)),
            "{}: exit {:?}: {stderr}",
            set.display(),
            o.status.code()
        );
        let entries: Vec<Value> = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{}: {e}: {stderr}", set.display()));
        let expected_bindings = objects
            .iter()
            .filter(|o| kubernetes(o) && o["kind"] == "ValidatingAdmissionPolicyBinding")
            .count();
        let got: Vec<&Value> = entries
            .iter()
            .filter(|e| e["kind"] == "ValidatingAdmissionPolicyBinding")
            .collect();
        assert_eq!(got.len(), expected_bindings, "{}", set.display());
        for e in got {
            let v = e["verdict"]
                .as_str()
                .unwrap_or_else(|| panic!("{}: {e}", set.display()));
            let r = e["reason"].as_str().unwrap();
            assert!(
                r.contains(&format!("binding {:?}", e["name"].as_str().unwrap())),
                "{r}"
            );
            let v = if v.starts_with("evaluates with warnings on kinds") {
                "evaluates with warnings on kinds K"
            } else {
                v
            };
            *verdicts.entry(v.to_owned()).or_default() += 1;
            bindings += 1;
        }
    }
    eprintln!(
        "bindings corpus: {} sets, {files_read} files read, {bindings} bindings, {prototype} prototype-group sets; verdicts {verdicts:?}",
        sets.len()
    );
    assert!(bindings >= 150, "{bindings} bindings");
    assert_eq!(prototype, 2);
}
