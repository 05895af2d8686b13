//! `vapcheck check` on Gatekeeper ConstraintTemplates (docs/engines.md): a field typo, a
//! wrong type, a wrong function and a parameter typo reported at the exact line and column of
//! the template file in every output format; the `dyn` fallback without a Constraint; a
//! template Gatekeeper's driver rejects.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `vapcheck check ARGS` run in the fixture folder (file names in the output stay relative).
fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(fixture("gatekeeper-cli"))
        .arg("check")
        .args(args)
        .output()
        .expect("run vapcheck")
}

const SOURCE: &str = "spec.targets[0].code[0].source";

/// The four findings of `replicas.yaml`: line, column, field (after the source), message start.
const EXPECTED: [(usize, usize, &str, &str); 4] = [
    (
        27,
        50,
        "validations[0].expression",
        "ERROR: <input>:1:25: undefined field 'replica'",
    ),
    (
        28,
        55,
        "validations[0].messageExpression",
        "ERROR: <input>:1:23: found no matching overload for '_+_' applied to '(string, int)'",
    ),
    (
        29,
        70,
        "validations[1].expression",
        "ERROR: <input>:1:45: undeclared reference to 'beginsWith' (in container '')",
    ),
    (
        30,
        64,
        "validations[2].expression",
        "ERROR: <input>:1:39: undefined field 'maximum'",
    ),
];

#[test]
fn typo_wrong_type_and_wrong_function_at_their_line_and_column_in_every_format() {
    // GitHub workflow commands.
    let out = check(&["-o", "github", "replicas.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), EXPECTED.len(), "{text}");
    for (line, (l, c, field, message)) in lines.iter().zip(EXPECTED) {
        let head = format!(
            "::warning file=replicas.yaml,line={l},col={c},title=ConstraintTemplate k8smaxreplicas%3A type-checking warning (apps/v1%2C Kind=Deployment)::{SOURCE}.{field}: {message}%0A"
        );
        assert!(
            line.starts_with(&head),
            "{line}\nexpected to start with\n{head}"
        );
    }

    // SARIF.
    let out = check(&["-o", "sarif", "replicas.yaml"]);
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
        .map(|(l, c, f, _)| {
            (
                *l as u64,
                *c as u64,
                format!("{SOURCE}.{f}"),
                "VAP100".to_owned(),
            )
        })
        .collect();
    assert_eq!(got, want);

    // JUnit.
    let out = check(&["-o", "junit", "replicas.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let junit = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        junit.contains(r#"tests="4" failures="4" errors="0""#),
        "{junit}"
    );
    for (l, c, f, _) in EXPECTED {
        assert!(
            junit.contains(&format!(
                r#"name="{SOURCE}.{f}" file="replicas.yaml" line="{l}""#
            )) && junit.contains(&format!("replicas.yaml:{l}:{c}: ")),
            "{junit}"
        );
    }

    // Text.
    let out = check(&["replicas.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with("k8smaxreplicas (replicas.yaml: document 1): 4 warnings\n"),
        "{text}"
    );
    for (l, c, f, message) in EXPECTED {
        assert!(
            text.contains(&format!(
                "  replicas.yaml:{l}:{c}: {SOURCE}.{f}\n    apps/v1, Kind=Deployment: {message}\n"
            )),
            "{text}"
        );
    }

    // JSON: the entry and its warnings.
    let out = check(&["-o", "json", "replicas.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let entries = json.as_array().expect("list");
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(e["kind"], "ConstraintTemplate");
    assert_eq!(e["name"], "k8smaxreplicas");
    assert_eq!(e["apiServer"], serde_json::json!({"accepted": true}));
    let fields: Vec<&str> = e["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w["fieldRef"].as_str().expect("fieldRef"))
        .collect();
    let want: Vec<String> = EXPECTED
        .iter()
        .map(|(_, _, f, _)| format!("{SOURCE}.{f}"))
        .collect();
    assert_eq!(fields, want);
}

#[test]
fn without_a_constraint_object_is_dyn_and_params_still_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(fixture("gatekeeper-cli/replicas.yaml")).expect("read");
    let template = text.split("\n---\n").next().expect("template");
    let file = dir.path().join("template.yaml");
    std::fs::write(&file, template).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(&file)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let warnings = json[0]["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .expect("warnings");
    // The field typo and the `string + int` (whose operand comes from `object`) need the kind;
    // the function that does not exist and the parameter typo do not.
    let got: Vec<(&str, &str)> = warnings
        .iter()
        .map(|w| {
            (
                w["fieldRef"].as_str().expect("fieldRef"),
                w["warning"].as_str().expect("warning"),
            )
        })
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, format!("{SOURCE}.validations[1].expression"));
    assert!(got[0].1.starts_with("untyped.vapcheck.dev/v1, Kind=AnyObject: ERROR: <input>:1:45: undeclared reference to 'beginsWith'"), "{}", got[0].1);
    assert_eq!(got[1].0, format!("{SOURCE}.validations[2].expression"));
    assert!(got[1].1.starts_with("untyped.vapcheck.dev/v1, Kind=AnyObject: ERROR: <input>:1:39: undefined field 'maximum'"), "{}", got[1].1);
}

#[test]
fn a_template_gatekeeper_rejects() {
    let file = fixture("gatekeeper/reserved-variable.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(&file)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        json[0]["apiServer"],
        serde_json::json!({"accepted": false, "causes": [
            "spec.targets: invalid variable definition: params an invalid variable name, \"params\" is a reserved keyword"
        ]})
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .arg("check")
        .arg(&file)
        .output()
        .expect("run");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.contains("REJECTED by Gatekeeper on create: 1 cause"),
        "{text}"
    );
}
