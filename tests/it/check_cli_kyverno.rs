//! `vapcheck check` on Kyverno ValidatingPolicies (docs/engines.md): a field typo, a wrong type
//! and a wrong function that Kyverno accepts (it compiles `object` as `dyn`) reported at the
//! exact line and column of the policy file in every output format; a policy Kyverno rejects,
//! with Kyverno's causes at their position; a policy in JSON evaluation mode, not typed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `vapcheck check ARGS` run in `dir` (file names in the output stay relative).
fn check(dir: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(fixture(dir))
        .arg("check")
        .args(args)
        .output()
        .expect("run vapcheck")
}

/// The three findings of `deployments.yaml`: line, column, field, message start.
const EXPECTED: [(usize, usize, &str, &str); 3] = [
    (
        17,
        31,
        "spec.validations[0].expression",
        "ERROR: <input>:1:12: undefined field 'replica'",
    ),
    (
        19,
        40,
        "spec.validations[0].messageExpression",
        "ERROR: <input>:1:14: found no matching overload for '_+_' applied to '(string, int)'",
    ),
    (
        21,
        50,
        "spec.validations[1].expression",
        "ERROR: <input>:1:32: found no matching overload for 'startsWith' applied to 'int.(string)'",
    ),
];

#[test]
fn typo_wrong_type_and_wrong_function_at_their_line_and_column_in_every_format() {
    let file = "deployments.yaml";
    // GitHub workflow commands.
    let out = check("kyverno-cli", &["-o", "github", file]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), EXPECTED.len(), "{text}");
    for (line, (l, c, field, message)) in lines.iter().zip(EXPECTED) {
        let head = format!(
            "::warning file={file},line={l},col={c},title=ValidatingPolicy deployment-replicas%3A type-checking warning (apps/v1%2C Kind=Deployment)::{field}: {message}%0A"
        );
        assert!(
            line.starts_with(&head),
            "{line}\nexpected to start with\n{head}"
        );
    }

    // SARIF.
    let out = check("kyverno-cli", &["-o", "sarif", file]);
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    let got: Vec<(u64, u64, String, String)> = results
        .iter()
        .map(|r| {
            let region = &r["locations"][0]["physicalLocation"]["region"];
            (
                region["startLine"].as_u64().expect("line"),
                region["startColumn"].as_u64().expect("column"),
                r["properties"]["fieldRef"]
                    .as_str()
                    .expect("field")
                    .to_owned(),
                r["ruleId"].as_str().expect("rule").to_owned(),
            )
        })
        .collect();
    let want: Vec<(u64, u64, String, String)> = EXPECTED
        .iter()
        .map(|(l, c, f, _)| (*l as u64, *c as u64, f.to_string(), "VAP100".to_owned()))
        .collect();
    assert_eq!(got, want);

    // JUnit.
    let out = check("kyverno-cli", &["-o", "junit", file]);
    assert_eq!(out.status.code(), Some(1));
    let junit = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        junit.contains(r#"tests="3" failures="3" errors="0""#),
        "{junit}"
    );
    for (l, c, f, _) in EXPECTED {
        assert!(
            junit.contains(&format!(r#"name="{f}" file="{file}" line="{l}""#))
                && junit.contains(&format!("{file}:{l}:{c}: ")),
            "{junit}"
        );
    }

    // Text.
    let out = check("kyverno-cli", &[file]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with("deployment-replicas (deployments.yaml: document 1): 3 warnings\n"),
        "{text}"
    );
    for (l, c, f, message) in EXPECTED {
        assert!(
            text.contains(&format!(
                "  {file}:{l}:{c}: {f}\n    apps/v1, Kind=Deployment: {message}\n"
            )),
            "{text}"
        );
    }

    // JSON and YAML: the entry and its warnings.
    for format in ["json", "yaml"] {
        let out = check("kyverno-cli", &["-o", format, file]);
        assert_eq!(out.status.code(), Some(1));
        let v: Value = if format == "json" {
            serde_json::from_slice(&out.stdout).expect("JSON")
        } else {
            serde_saphyr::from_str(std::str::from_utf8(&out.stdout).expect("utf-8")).expect("YAML")
        };
        let e = &v[0];
        assert_eq!(e["kind"], "ValidatingPolicy");
        assert_eq!(e["name"], "deployment-replicas");
        assert_eq!(e["apiServer"], serde_json::json!({"accepted": true}));
        let fields: Vec<&str> = e["status"]["typeChecking"]["expressionWarnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .map(|w| w["fieldRef"].as_str().expect("fieldRef"))
            .collect();
        let want: Vec<&str> = EXPECTED.iter().map(|(_, _, f, _)| *f).collect();
        assert_eq!(fields, want, "{format}");
    }
}

#[test]
fn a_policy_kyverno_rejects_with_its_causes_at_their_position() {
    let out = check("kyverno", &["wrong-function.yaml"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with(
            "names-prefixed (wrong-function.yaml: document 1): REJECTED by Kyverno on create: 2 causes"
        ),
        "{text}"
    );
    assert!(
        text.contains("  wrong-function.yaml:15:39: spec.validations[0].expression: Invalid value: \"object.metadata.name.startWith(\\\"team-\\\")\\n\": ERROR: <input>:1:31: undeclared reference to 'startWith' (in container '')\n"),
        "{text}"
    );
    // The summary counts it as Kyverno's refusal, not kube-apiserver's.
    assert!(
        text.contains(", 0 rejected by kube-apiserver 1.37, 1 rejected by Kyverno\n"),
        "{text}"
    );
    let out = check("kyverno", &["-o", "json", "wrong-function.yaml"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v[0]["apiServer"]["accepted"], false);
    assert_eq!(
        v[0]["apiServer"]["causes"].as_array().map(Vec::len),
        Some(2)
    );
}

#[test]
fn json_mode_is_not_typed_and_says_why() {
    let out = check("kyverno", &["-o", "sarif", "json-mode.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ruleId"], "VAP101");
    assert_eq!(results[0]["properties"]["fieldRef"], "spec.evaluation.mode");
    let region = &results[0]["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 9);
    let message = results[0]["message"]["text"].as_str().expect("text");
    assert!(
        message.contains("evaluation mode JSON: `object` is not an object of the matched kinds"),
        "{message}"
    );
}

/// The three findings of the MutatingPolicy `mpol-deployment-defaults.yaml` (which Kyverno
/// accepts: tests/it/kyverno_oracle.rs): line, column, field, message start.
const MUTATING_EXPECTED: [(usize, usize, &str, &str); 3] = [
    (
        18,
        54,
        "spec.mutations[0].applyConfiguration.expression",
        "ERROR: <input>:1:33: undefined field 'replica'",
    ),
    (
        21,
        103,
        "spec.mutations[1].jsonPatch.expression",
        "ERROR: <input>:1:82: found no matching overload for '_+_' applied to '(int, string)'",
    ),
    (
        24,
        53,
        "spec.mutations[2].jsonPatch.expression",
        "ERROR: <input>:1:32: found no matching overload for 'startsWith' applied to 'int.(string)'",
    ),
];

#[test]
fn mutating_policy_typo_wrong_type_and_wrong_function_at_their_line_and_column() {
    findings_in_every_format(
        "mpol-deployment-defaults.yaml",
        "MutatingPolicy",
        "deployment-defaults",
        &MUTATING_EXPECTED,
    );
}

/// `file` of `tests/fixtures/kyverno` (one policy of `kind` named `name`, accepted by
/// Kyverno, matching Deployments) has exactly the findings `expected` (line, column, field,
/// message start) in the GitHub, SARIF, JUnit, text, JSON and YAML outputs.
fn findings_in_every_format(
    file: &str,
    kind: &str,
    name: &str,
    expected: &[(usize, usize, &str, &str)],
) {
    let out = check("kyverno", &["-o", "github", file]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{text}");
    for (line, (l, c, field, message)) in lines.iter().zip(expected) {
        let head = format!(
            "::warning file={file},line={l},col={c},title={kind} {name}%3A type-checking warning (apps/v1%2C Kind=Deployment)::{field}: {message}"
        );
        assert!(
            line.starts_with(&head),
            "{line}\nexpected to start with\n{head}"
        );
    }
    let out = check("kyverno", &["-o", "sarif", file]);
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    let got: Vec<(u64, u64, String, String)> = results
        .iter()
        .map(|r| {
            let region = &r["locations"][0]["physicalLocation"]["region"];
            (
                region["startLine"].as_u64().expect("line"),
                region["startColumn"].as_u64().expect("column"),
                r["properties"]["fieldRef"]
                    .as_str()
                    .expect("field")
                    .to_owned(),
                r["ruleId"].as_str().expect("rule").to_owned(),
            )
        })
        .collect();
    let want: Vec<(u64, u64, String, String)> = expected
        .iter()
        .map(|(l, c, f, _)| (*l as u64, *c as u64, f.to_string(), "VAP100".to_owned()))
        .collect();
    assert_eq!(got, want);
    let out = check("kyverno", &["-o", "junit", file]);
    assert_eq!(out.status.code(), Some(1));
    let junit = String::from_utf8(out.stdout).expect("utf-8");
    let n = expected.len();
    assert!(
        junit.contains(&format!(r#"tests="{n}" failures="{n}" errors="0""#)),
        "{junit}"
    );
    let out = check("kyverno", &[file]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with(&format!("{name} ({file}: document 1): {n} warnings\n")),
        "{text}"
    );
    for (l, c, f, message) in expected {
        assert!(
            text.contains(&format!(
                "  {file}:{l}:{c}: {f}\n    apps/v1, Kind=Deployment: {message}"
            )),
            "{text}"
        );
    }
    for format in ["json", "yaml"] {
        let out = check("kyverno", &["-o", format, file]);
        assert_eq!(out.status.code(), Some(1));
        let v: Value = if format == "json" {
            serde_json::from_slice(&out.stdout).expect("JSON")
        } else {
            serde_saphyr::from_str(std::str::from_utf8(&out.stdout).expect("utf-8")).expect("YAML")
        };
        let e = &v[0];
        assert_eq!(e["kind"], kind);
        assert_eq!(e["name"], name);
        assert_eq!(e["apiServer"], serde_json::json!({"accepted": true}));
        let fields: Vec<&str> = e["status"]["typeChecking"]["expressionWarnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .map(|w| w["fieldRef"].as_str().expect("fieldRef"))
            .collect();
        let want: Vec<&str> = expected.iter().map(|(_, _, f, _)| *f).collect();
        assert_eq!(fields, want, "{format}");
    }
}

/// The three findings of the DeletingPolicy `dpol-deployments.yaml` (which Kyverno accepts:
/// tests/it/kyverno_oracle.rs), on the conditions, with `object` the existing Deployment.
const DELETING_EXPECTED: [(usize, usize, &str, &str); 3] = [
    (
        16,
        30,
        "spec.conditions[0].expression",
        "ERROR: <input>:1:12: undefined field 'replica'",
    ),
    (
        18,
        40,
        "spec.conditions[1].expression",
        "ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'",
    ),
    (
        20,
        62,
        "spec.conditions[2].expression",
        "ERROR: <input>:1:44: found no matching overload for 'startsWith' applied to 'int.(string)'",
    ),
];

/// The three findings of the GeneratingPolicy `gpol-deployments.yaml` (which Kyverno
/// accepts): a wrong function in the generation (typed as a validation, reported at
/// `spec.generate[0]`), a typo in a match condition, a wrong type in a variable's map literal.
const GENERATING_EXPECTED: [(usize, usize, &str, &str); 3] = [
    (
        23,
        38,
        "spec.generate[0].expression",
        "ERROR: <input>:1:30: found no matching overload for 'startsWith' applied to 'bool.(string)'",
    ),
    (
        14,
        30,
        "spec.matchConditions[0].expression",
        "ERROR: <input>:1:12: undefined field 'replica'",
    ),
    (
        20,
        55,
        "spec.variables[0].expression",
        "ERROR: <input>:1:150: found no matching overload for '_+_' applied to '(int, string)'",
    ),
];

#[test]
fn generating_policy_typo_wrong_type_and_wrong_function_at_their_line_and_column() {
    findings_in_every_format(
        "gpol-deployments.yaml",
        "GeneratingPolicy",
        "deployment-budget",
        &GENERATING_EXPECTED,
    );
}

#[test]
fn deleting_policy_typo_wrong_type_and_wrong_function_at_their_line_and_column() {
    findings_in_every_format(
        "dpol-deployments.yaml",
        "DeletingPolicy",
        "scaled-down-deployments",
        &DELETING_EXPECTED,
    );
}

#[test]
fn mutate_existing_without_admission_is_typed_by_its_targets() {
    let out = check("kyverno", &["-o", "sarif", "mpol-existing-targets.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    let got: Vec<(String, u64, u64, String)> = results
        .iter()
        .map(|r| {
            let region = &r["locations"][0]["physicalLocation"]["region"];
            (
                r["ruleId"].as_str().expect("rule").to_owned(),
                region["startLine"].as_u64().expect("line"),
                region["startColumn"].as_u64().expect("column"),
                r["properties"]["fieldRef"]
                    .as_str()
                    .expect("field")
                    .to_owned(),
            )
        })
        .collect();
    // The target match condition's typo, on the Deployment target; nothing on the mutation,
    // whose `object.spec.replicas` the ConfigMap trigger would not have.
    assert_eq!(
        got,
        vec![(
            "VAP100".to_owned(),
            29,
            30,
            "spec.targetMatchConditions[0].expression".to_owned()
        )]
    );
    let message = results[0]["message"]["text"].as_str().expect("text");
    assert!(
        message.contains("(apps/v1, Kind=Deployment): spec.targetMatchConditions[0].expression: ERROR: <input>:1:12: undefined field 'replica'"),
        "{message}"
    );
}
