//! `vapcheck check` reports every document (issue 34): folders given as FILE are walked, and a
//! document that does not decode is a finding on it (rule VAP003, at its file and line, in
//! every output format, exit 3) while every other document is checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn check(dir: &Path, args: &[&str], files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .args(files)
        .output()
        .unwrap()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
}

/// The files a folder argument stands for: each folder's entries in name order, recursively,
/// files ending in .yaml, .yml or .json.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p
            .extension()
            .is_some_and(|e| ["yaml", "yml", "json"].contains(&e.to_str().unwrap_or_default()))
        {
            out.push(p);
        }
    }
}

/// The whole MutatingAdmissionPolicy corpus in one run, as a folder and as the list of its
/// files: every one of its 353 objects is reported, the three documents that do not decode as
/// findings at their lines, the others checked; the run exits 3 (rejected objects and those
/// three), not 2.
#[test]
fn the_whole_mutating_corpus_is_reported_in_one_run() {
    let shared = crate::support::shared_dir();
    let corpus = Path::new("corpus/mutating");
    let o = check(&shared, &["-o", "json"], &[corpus.to_path_buf()]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json_of(&o);
    let entries = v.as_array().unwrap();
    assert_eq!(entries.len(), 353);
    let count = |kind: &str| entries.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(count("MutatingAdmissionPolicy"), 197);
    assert_eq!(count("MutatingAdmissionPolicyBinding"), 156);
    let undecoded: Vec<&Value> = entries
        .iter()
        .filter_map(|e| e.get("decodeError"))
        .collect();
    let dir = "corpus/mutating";
    assert_eq!(
        undecoded,
        [
            &json!({"file": format!("{dir}/kubernetes__enhancements/keps__sig-api-machinery__3962-mutating-admission-policies__README--block7.policy.yaml"),
                "document": 1, "line": 8, "column": 5, "field": "spec.mutations",
                "message": "invalid type: map, expected a sequence"}),
            &json!({"file": format!("{dir}/livhuip__talos-proxmox/kubernetes__apps__storage__volsync__app__mutatingadmissionpolicy@299e0cc1--volsync-mover-jitter.policy.yaml"),
                "document": 1, "line": 25, "column": 9, "field": "spec.mutations[0].jsonPatch",
                "message": "invalid type: sequence, expected JSONPatch"}),
            &json!({"file": format!("{dir}/livhuip__talos-proxmox/kubernetes__apps__storage__volsync__app__mutatingadmissionpolicy@299e0cc1--volsync-mover-nfs.policy.yaml"),
                "document": 1, "line": 27, "column": 9, "field": "spec.mutations[0].jsonPatch",
                "message": "invalid type: sequence, expected JSONPatch"}),
        ]
    );
    // Every other policy is checked.
    let checked = entries.iter().filter(|e| e.get("status").is_some()).count();
    assert_eq!(checked, 197 - 3);

    // The folder is the same as its files listed in walk order.
    let mut files = Vec::new();
    walk(&shared.join(corpus), &mut files);
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(&shared).unwrap().to_path_buf())
        .collect();
    assert_eq!(files.len(), 357);
    let listed = check(&shared, &["-o", "json"], &files);
    assert_eq!(listed.status.code(), Some(3));
    assert_eq!(json_of(&listed), v);

    // Text: the summary counts them.
    let o = check(&shared, &[], &[corpus.to_path_buf()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("194 policies checked, 15 with warnings, 51 rejected by kube-apiserver 1.37, 3 not decoded\n"),
        "{text}"
    );
}

const GOOD: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: good}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas > 0
";

const TYPO: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: object.replicas > 0
";

const BAD_MAP: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: bad-map}
spec:
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: 7
";

/// A MAP whose field has the wrong type between two policies in one file (lines 11 to 18; its
/// `expression` is on line 18): in JSON and SARIF a finding at that line, the others checked.
#[test]
fn a_decode_error_amid_good_documents_in_json_and_sarif() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        format!("{GOOD}---\n{BAD_MAP}---\n{TYPO}"),
    )
    .unwrap();
    let file = [PathBuf::from("p.yaml")];
    let o = check(dir.path(), &["-o", "json"], &file);
    assert_eq!(o.status.code(), Some(3));
    let v = json_of(&o);
    let summary: Vec<Value> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            json!([
                e["kind"],
                e["name"],
                e["apiServer"]["accepted"],
                e.get("status").is_some()
            ])
        })
        .collect();
    assert_eq!(
        summary,
        [
            json!(["ValidatingAdmissionPolicy", "good", true, true]),
            json!(["MutatingAdmissionPolicy", "bad-map", false, false]),
            json!(["ValidatingAdmissionPolicy", "typo", true, true]),
        ]
    );
    assert_eq!(
        v[1]["decodeError"],
        json!({"file": "p.yaml", "document": 2, "line": 18, "column": 19,
            "field": "spec.mutations[0].jsonPatch.expression",
            "message": "invalid type: integer `7`, expected a string"})
    );
    assert_eq!(
        v[1]["apiServer"]["causes"],
        json!([
            "spec.mutations[0].jsonPatch.expression: invalid type: integer `7`, expected a string"
        ])
    );

    let o = check(dir.path(), &["-o", "sarif"], &file);
    assert_eq!(o.status.code(), Some(3));
    let sarif = json_of(&o);
    let run = &sarif["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let results = run["results"].as_array().unwrap();
    let decode: Vec<&Value> = results.iter().filter(|r| r["ruleId"] == "VAP003").collect();
    assert_eq!(decode.len(), 1, "{results:?}");
    let r = decode[0];
    assert_eq!(
        rules[r["ruleIndex"].as_u64().unwrap() as usize]["id"],
        "VAP003"
    );
    assert_eq!(r["level"], "error");
    assert_eq!(
        r["locations"][0]["physicalLocation"],
        json!({"artifactLocation": {"uri": "p.yaml"}, "region": {"startLine": 18, "startColumn": 19}})
    );
    assert_eq!(
        r["message"]["text"],
        "MutatingAdmissionPolicy bad-map: not decoded: spec.mutations[0].jsonPatch.expression: invalid type: integer `7`, expected a string"
    );
    assert!(r["partialFingerprints"]["vapcheckFinding/v1"].is_string());
    // The typo of the third document is still found.
    assert!(
        results
            .iter()
            .any(|r| r["ruleId"] == "VAP100" && r["properties"]["name"] == "typo"),
        "{results:?}"
    );

    // GitHub, JUnit and text carry it too.
    let gh = check(dir.path(), &["-o", "github"], &file);
    assert!(String::from_utf8_lossy(&gh.stdout).contains(
        "::error file=p.yaml,line=18,col=19,title=MutatingAdmissionPolicy bad-map%3A not decoded::spec.mutations[0].jsonPatch.expression: invalid type: integer `7`, expected a string\n"
    ));
    let junit = check(dir.path(), &["-o", "junit"], &file);
    assert!(String::from_utf8_lossy(&junit.stdout).contains("<failure type=\"VAP003\""));
    let text = check(dir.path(), &[], &file);
    assert!(String::from_utf8_lossy(&text.stdout).starts_with(
        "bad-map [mutating] (p.yaml: document 2): NOT DECODED\n  p.yaml:18:19: spec.mutations[0].jsonPatch.expression: invalid type: integer `7`, expected a string\n"
    ));
}

/// A folder argument is walked recursively (.yaml, .yml, .json; hidden entries and other
/// files skipped), in name order; an empty folder is unusable input.
#[test]
fn folders_are_walked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("policies/nested")).unwrap();
    std::fs::create_dir_all(root.join("policies/.git")).unwrap();
    std::fs::write(root.join("policies/b.yaml"), GOOD).unwrap();
    std::fs::write(root.join("policies/nested/a.yml"), TYPO).unwrap();
    std::fs::write(root.join("policies/.git/x.yaml"), "kind: [").unwrap();
    std::fs::write(root.join("policies/README.md"), "# not read").unwrap();
    let o = check(root, &["-o", "json"], &[PathBuf::from("policies")]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let names: Vec<Value> = json_of(&o)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(names, [json!("good"), json!("typo")]);
    let o = check(root, &[], &[PathBuf::from("policies")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("typo (policies/nested/a.yml: document 1): 1 warning\n"),
        "{text}"
    );

    std::fs::create_dir_all(root.join("empty")).unwrap();
    let o = check(root, &[], &[PathBuf::from("empty")]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "vapcheck: no .yaml, .yml or .json file in the input\n"
    );
}
