//! `vapcheck check -o github|sarif|junit` and the `file:line:col` of text output: every
//! finding at the line and column of the offending character in the YAML source.

use std::path::PathBuf;
use std::process::Command;

/// Also tests/fixtures/ci-formats/policies.yaml, whose outputs are the golden files.
const POLICIES: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: >-
      object.spec.replicas <= 5 &&
      object.replicas > 1
  - expression: "request.uid != 'é,:%' && true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: other.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: |
      object.spec.replicas > 0 &&
      	object.spec.paused
"#;

fn run(dir: &std::path::Path, file: &str, format: &str) -> String {
    let openapi = crate::support::shared_dir().join("openapi/v1.35");
    assert!(openapi.is_dir(), "{} is missing", openapi.display());
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(dir)
        .args(["check", "-o", format, "--openapi"])
        .arg(&openapi)
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vapcheck-ci-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("p.yaml"), text).unwrap();
    dir
}

#[test]
fn text_and_github_point_at_the_offending_character() {
    let dir = scratch("gh", POLICIES);
    let text = run(&dir, "p.yaml", "text");
    // The '.' of `object.replicas` (folded scalar, second line) and of `request.uid`.
    assert!(
        text.contains("  p.yaml:15:13: spec.validations[0].expression\n"),
        "{text}"
    );
    assert!(
        text.contains("  p.yaml:16:25: spec.validations[1].expression: Invalid value"),
        "{text}"
    );
    let gh = run(&dir, "p.yaml", "github");
    let lines: Vec<&str> = gh.lines().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("::error ") || l.starts_with("::warning "))
    );
    let uid = lines
        .iter()
        .find(|l| l.starts_with("::error file=p.yaml,line=16,col=25,"))
        .expect("the rejected expression at 16:25");
    // Escaping: the message keeps ':' and ',' but %, CR and LF are escaped; in properties
    // ':' and ',' are escaped too.
    assert!(
        uid.contains(
            "title=ValidatingAdmissionPolicy replicas.example.com%3A rejected by kube-apiserver::"
        ),
        "{uid}"
    );
    assert!(uid.contains("'é,:%25'"), "{uid}");
    assert!(uid.contains("%0A | request.uid"), "{uid}");
    assert!(!uid[2..].contains('\n'));
}

#[test]
fn sarif_regions_and_fingerprints() {
    let dir = scratch("sarif", POLICIES);
    let sarif: serde_json::Value = serde_json::from_str(&run(&dir, "p.yaml", "sarif")).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run0 = &sarif["runs"][0];
    let rules: Vec<&str> = run0["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let results = run0["results"].as_array().unwrap();
    for r in results {
        assert!(rules.contains(&r["ruleId"].as_str().unwrap()));
        assert!(r["partialFingerprints"]["vapcheckFinding/v1"].is_string());
    }
    let region = |field: &str| -> (u64, u64) {
        let r = results
            .iter()
            .find(|r| r["properties"]["fieldRef"] == field && r["ruleId"] == "VAP100")
            .unwrap_or_else(|| panic!("no warning for {field}"));
        let reg = &r["locations"][0]["physicalLocation"]["region"];
        (
            reg["startLine"].as_u64().unwrap(),
            reg["startColumn"].as_u64().unwrap(),
        )
    };
    assert_eq!(region("spec.validations[0].expression"), (15, 13));
    // The second policy (a literal block with a tab) has no finding; editing it, which moves
    // every line after it, must not change the first policy's fingerprints.
    let fingerprints = |s: &serde_json::Value| -> Vec<String> {
        s["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["properties"]["name"] == "replicas.example.com")
            .map(|r| {
                r["partialFingerprints"]["vapcheckFinding/v1"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    let edited = POLICIES.replace(
        "object.spec.replicas > 0 &&",
        "object.spec.replicas > 1 &&\n      true &&",
    );
    let dir2 = scratch("sarif2", &edited);
    let sarif2: serde_json::Value = serde_json::from_str(&run(&dir2, "p.yaml", "sarif")).unwrap();
    assert_eq!(fingerprints(&sarif), fingerprints(&sarif2));
    assert!(!fingerprints(&sarif).is_empty());
}

#[test]
fn junit_has_a_failing_case_per_field() {
    let dir = scratch("junit", POLICIES);
    let xml = run(&dir, "p.yaml", "junit");
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"));
    assert!(xml.contains("<testsuite name=\"ValidatingAdmissionPolicy replicas.example.com\" tests=\"2\" failures=\"2\""), "{xml}");
    assert!(
        xml.contains(
            "<testcase classname=\"ValidatingAdmissionPolicy other.example.com\" name=\"checks\""
        ),
        "{xml}"
    );
    assert!(xml.contains("&apos;é,:%&apos;"), "{xml}");
}

/// Runs a registry validator (scripts/ci-validators: jsonschema with the official SARIF
/// 2.1.0 schema, junitparser) on an output; its installation failing fails the test.
pub(crate) fn validate(kind: &str, text: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/ci-validators"))
        .output()
        .expect("scripts/ci-validators runs");
    assert!(
        out.status.success(),
        "scripts/ci-validators failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let file = std::env::temp_dir().join(format!("vapcheck-ci-{}.{kind}", std::process::id()));
    std::fs::write(&file, text).unwrap();
    let out = Command::new("python3")
        .arg(dir.join("validate.py"))
        .arg(kind)
        .arg(&file)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{kind} does not validate:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn sarif_and_junit_pass_registry_validators() {
    let dir = scratch("validators", POLICIES);
    let sarif = validate("sarif", &run(&dir, "p.yaml", "sarif"));
    println!("{sarif}");
    assert!(
        sarif.starts_with("sarif: valid against SARIF 2.1.0 ("),
        "{sarif}"
    );
    let junit = validate("junit", &run(&dir, "p.yaml", "junit"));
    println!("{junit}");
    assert_eq!(junit.trim(), "junit: 2 suites, 3 cases, 2 failures");
    // A log that breaks the schema is refused: the validator really validates.
    let broken =
        run(&dir, "p.yaml", "sarif").replace("\"level\": \"error\"", "\"level\": \"fatal\"");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = String::from_utf8(
        Command::new(root.join("scripts/ci-validators"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let file =
        std::env::temp_dir().join(format!("vapcheck-ci-broken-{}.sarif", std::process::id()));
    std::fs::write(&file, broken).unwrap();
    let status = Command::new("python3")
        .arg(PathBuf::from(cache.trim()).join("validate.py"))
        .args(["sarif"])
        .arg(&file)
        .output()
        .unwrap()
        .status;
    assert!(!status.success(), "an invalid level must fail validation");
}

/// The documented example (tests/fixtures/ci-formats/policies.yaml) in every format equals
/// its golden file in tests/golden/ci-formats/ (`VAPCHECK_BLESS=1` rewrites them).
#[test]
fn golden_outputs_of_the_example_in_every_format() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fixtures = root.join("tests/fixtures/ci-formats");
    let text = std::fs::read_to_string(fixtures.join("policies.yaml")).unwrap();
    assert_eq!(text, POLICIES, "the fixture is the test's example");
    for (format, ext) in [
        ("text", "txt"),
        ("github", "github"),
        ("sarif", "sarif"),
        ("junit", "xml"),
        ("json", "json"),
    ] {
        let got = run(&fixtures, "policies.yaml", format);
        let golden = root.join(format!("tests/golden/ci-formats/policies.{ext}"));
        if crate::support::bless() {
            std::fs::write(&golden, &got).unwrap();
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        assert_eq!(got, want, "{format} differs from {}", golden.display());
    }
}
