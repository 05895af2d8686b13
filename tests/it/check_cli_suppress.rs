//! Suppressing findings in `vapcheck check` (issue 34, items 2 and 3): the
//! `vapcheck.io/ignore` annotation (with a field scope and `vapcheck.io/ignore-reason`),
//! `# vapcheck:ignore` comments, the `ignore:` and `severity:` keys of `.vapcheck.yaml`;
//! suppressed findings shown in every format (SARIF `suppressions` checked by the registry
//! validator) and left out of the exit status. The real binary, the built-in 1.37 schemas.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn check(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// A policy named `name` with two findings of VAP110 on validation 0 (the absent `labels`
/// field and the absent `team` key) and one VAP100 on validation 1 (`object.replicas`), with
/// `annotations` (YAML lines under `metadata.annotations`, or none).
fn two(name: &str, annotations: &[&str]) -> String {
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        let lines: Vec<String> = annotations.iter().map(|a| format!("    {a}\n")).collect();
        format!("  annotations:\n{}", lines.concat())
    };
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
{annotations}spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}
  validations:
  - expression: 'object.metadata.labels[\"team\"] == \"x\"'
  - expression: 'object.replicas > 0'
"
    )
}

/// One suppressed finding of `-o json`: rule, field, by, reason.
type Shown = (String, String, String, Option<String>);

/// The `suppressed` list of each entry of `-o json` (`None`: the key is absent).
fn suppressed(json: &str) -> Vec<Option<Vec<Shown>>> {
    let v: Value = serde_json::from_str(json).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e.get("suppressed").map(|s| {
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|s| {
                        (
                            s["rule"].as_str().unwrap().to_owned(),
                            s["field"].as_str().unwrap().to_owned(),
                            s["by"].as_str().unwrap().to_owned(),
                            s["reason"].as_str().map(str::to_owned),
                        )
                    })
                    .collect()
            })
        })
        .collect()
}

const V0: &str = "spec.validations[0].expression";
const V1: &str = "spec.validations[1].expression";

#[test]
fn the_annotation_with_scope_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let write = |text: &str| std::fs::write(dir.path().join("p.yaml"), text).unwrap();
    let reason = "vapcheck.io/ignore-reason: a webhook adds the team label";
    let sup = |rule: &str, field: &str, reason: Option<&str>| {
        (
            rule.to_owned(),
            field.to_owned(),
            "annotation".to_owned(),
            reason.map(str::to_owned),
        )
    };
    // Without an annotation: 3 findings, none suppressed, no `suppressed` key; exit 1.
    write(&two("two", &[]));
    let plain = check(dir.path(), &["-o", "json", "p.yaml"]);
    assert_eq!(plain.status.code(), Some(1));
    assert_eq!(suppressed(&stdout(&plain)), [None]);

    // Every VAP110 on the object, with the reason: the VAP100 still fails the run.
    write(&two("two", &["vapcheck.io/ignore: VAP110", reason]));
    let out = check(dir.path(), &["-o", "json", "p.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let why = Some("a webhook adds the team label");
    assert_eq!(
        suppressed(&stdout(&out)),
        [Some(vec![sup("VAP110", V0, why), sup("VAP110", V0, why)])]
    );
    // The rest of the output is the output without the annotation.
    let mut without: Value = serde_json::from_str(&stdout(&out)).unwrap();
    without[0].as_object_mut().unwrap().remove("suppressed");
    assert_eq!(
        without,
        serde_json::from_str::<Value>(&stdout(&plain)).unwrap()
    );
    // VAP110 alone no longer counts: --fail-on error passes.
    assert_eq!(
        check(dir.path(), &["--fail-on", "error", "p.yaml"])
            .status
            .code(),
        Some(0)
    );

    // A scope that is not the finding's field suppresses nothing.
    write(&two(
        "two",
        &["vapcheck.io/ignore: \"VAP100@spec.validations[0]\""],
    ));
    let out = check(dir.path(), &["-o", "json", "p.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(suppressed(&stdout(&out)), [None]);

    // Scoped to validation 1, and VAP110: everything, exit 0.
    write(&two(
        "two",
        &["vapcheck.io/ignore: \"VAP100@spec.validations[1], VAP110\""],
    ));
    let out = check(dir.path(), &["-o", "json", "p.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        suppressed(&stdout(&out)),
        [Some(vec![
            sup("VAP100", V1, None),
            sup("VAP110", V0, None),
            sup("VAP110", V0, None)
        ])]
    );
    // Text: one line per suppressed finding and the count.
    let text = stdout(&check(dir.path(), &["p.yaml"]));
    assert_eq!(text.matches("\nsuppressed VAP").count(), 3, "{text}");
    assert!(text.ends_with("\n3 findings suppressed\n"), "{text}");
}

/// Comments: on the finding's line, alone on the line above, on the key line of a block
/// scalar (whose lines are the expression's text), with and without a reason.
const COMMENTED: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: block}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  # vapcheck:ignore VAP100 -- replicas: see #12
  - expression: |
      object.spec.replicas > 0 &&
      object.replicas > 0
  - expression: |  # vapcheck:ignore VAP100
      object.replicas > 1
  - expression: 'object.replicas > 2' # vapcheck:ignore VAP110 -- another rule
  - expression: 'object.replicas > 3' # vapcheck:ignore VAP100@spec.validations[3]
";

#[test]
fn comments_on_the_line_above_and_the_key_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.yaml"), COMMENTED).unwrap();
    let out = check(dir.path(), &["-o", "sarif", "c.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let sarif = stdout(&out);
    let log: Value = serde_json::from_str(&sarif).unwrap();
    let results: Vec<(i64, Value)> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["locations"][0]["physicalLocation"]["region"]["startLine"]
                    .as_i64()
                    .unwrap(),
                r.get("suppressions").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let comment = |justification: Option<&str>| {
        let mut s = serde_json::json!({
            "kind": "inSource",
            "status": "accepted",
            "properties": {"by": "comment", "entry": "VAP100"}
        });
        if let Some(j) = justification {
            s["justification"] = Value::from(j);
        }
        Value::Array(vec![s])
    };
    let mut scoped = comment(None);
    scoped[0]["properties"]["entry"] = Value::from("VAP100@spec.validations[3]");
    assert_eq!(
        results,
        [
            (12, comment(Some("replicas: see #12"))),
            (14, comment(None)),
            (15, Value::Null),
            (16, scoped),
        ]
    );
    let validated = super::ci_formats::validate("sarif", &sarif);
    assert!(
        validated.starts_with("sarif: valid against SARIF 2.1.0 ("),
        "{validated}"
    );

    // A baseline records the suppressed findings with their suppressions; against an empty
    // one only the finding left is new and counts.
    let out = check(dir.path(), &["--write-baseline", "b.sarif", "c.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("b.sarif")).unwrap())
            .unwrap();
    let with_suppressions = written["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("suppressions").is_some())
        .count();
    assert_eq!(with_suppressions, 3);
    assert_eq!(
        check(dir.path(), &["--baseline", "b.sarif", "c.yaml"])
            .status
            .code(),
        Some(0)
    );
    std::fs::write(
        dir.path().join("empty.sarif"),
        r#"{"runs": [{"results": []}]}"#,
    )
    .unwrap();
    let out = check(dir.path(), &["--baseline", "empty.sarif", "c.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).ends_with(
            "3 findings suppressed\nbaseline empty.sarif: 0 of 4 findings baselined, 4 new\n"
        ),
        "{}",
        stdout(&out)
    );

    // GitHub: the one finding left, and the count.
    let github = stdout(&check(dir.path(), &["-o", "github", "c.yaml"]));
    assert_eq!(github.lines().count(), 2, "{github}");
    assert!(
        github.starts_with("::warning file=c.yaml,line=15,"),
        "{github}"
    );
    assert!(
        github.ends_with("\n::notice title=vapcheck::3 findings suppressed\n"),
        "{github}"
    );
    // JUnit: 4 cases, 1 failing, 3 skipped as suppressed.
    let junit = stdout(&check(dir.path(), &["-o", "junit", "c.yaml"]));
    assert!(
        junit.contains("tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"3\""),
        "{junit}"
    );
    assert_eq!(
        junit
            .matches("<skipped message=\"suppressed by comment (VAP100")
            .count(),
        3,
        "{junit}"
    );
    let validated = super::ci_formats::validate("junit", &junit);
    assert_eq!(validated.trim(), "junit: 1 suites, 4 cases, 1 failures");
}

#[test]
fn malformed_annotations_and_comments_are_errors_naming_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            two("two", &["vapcheck.io/ignore: \"VAP110,,VAP100\""]),
            "vapcheck: invalid suppression: ValidatingAdmissionPolicy two (p.yaml: document 1): metadata.annotations[vapcheck.io/ignore]: entry \"\": empty (expected RULE or RULE@FIELD between commas)\n",
        ),
        (
            two(
                "two",
                &["vapcheck.io/ignore: \"VAP110@spec.validations[x]\""],
            ),
            "vapcheck: invalid suppression: ValidatingAdmissionPolicy two (p.yaml: document 1): metadata.annotations[vapcheck.io/ignore]: entry \"VAP110@spec.validations[x]\": field \"spec.validations[x]\": index [x] is not a number\n",
        ),
        (
            two("two", &["vapcheck.io/ignore-reason: no rules"]),
            "vapcheck: invalid suppression: ValidatingAdmissionPolicy two (p.yaml: document 1): metadata.annotations[vapcheck.io/ignore-reason]: set without vapcheck.io/ignore (it gives the reason of that annotation's rules)\n",
        ),
        (
            two("two", &[]).replace(
                "  - expression: 'object.replicas > 0'",
                "  - expression: 'object.replicas > 0' # vapcheck:ignore VAP1OO -- typo",
            ),
            "vapcheck: invalid suppression: p.yaml:11: # vapcheck:ignore: entry \"VAP1OO\": unknown rule \"VAP1OO\" (one of VAP001, VAP002, VAP003, VAP100, VAP101, VAP110, VAP120, VAP121, VAP122, VAP123, VAP124, VAP125, VAP126, VAP127)\n",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(dir.path().join("p.yaml"), text).unwrap();
        let out = check(dir.path(), &["-o", "json", "p.yaml"]);
        assert_eq!(out.status.code(), Some(2), "{want}");
        assert_eq!(stderr(&out), want);
        // The findings are still reported, none suppressed.
        assert_eq!(suppressed(&stdout(&out)), [None]);
    }
}

#[test]
fn configuration_ignores_and_severities() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("legacy")).unwrap();
    std::fs::create_dir_all(root.join("new")).unwrap();
    std::fs::write(root.join("legacy/two.yaml"), two("two", &[])).unwrap();
    std::fs::write(root.join("new/other.yaml"), two("other", &[])).unwrap();
    let config = |text: &str| std::fs::write(root.join(".vapcheck.yaml"), text).unwrap();
    config(
        "ignore:
- rule: VAP110
  files: [legacy]
  reason: legacy policies, rewritten in Q3
- rule: VAP100@spec.validations[1]
  objects: [ValidatingAdmissionPolicy/two]
",
    );
    let out = check(root, &["-o", "json", "legacy", "new"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let by_config = |rule: &str, field: &str, reason: Option<&str>| {
        (
            rule.to_owned(),
            field.to_owned(),
            "configuration".to_owned(),
            reason.map(str::to_owned),
        )
    };
    let q3 = Some("legacy policies, rewritten in Q3");
    assert_eq!(
        suppressed(&stdout(&out)),
        [
            Some(vec![
                by_config("VAP100", V1, None),
                by_config("VAP110", V0, q3),
                by_config("VAP110", V0, q3)
            ]),
            None
        ]
    );
    // Only the legacy folder: nothing left, exit 0; SARIF `external` suppressions, valid.
    let out = check(root, &["-o", "sarif", "legacy"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sarif = stdout(&out);
    let log: Value = serde_json::from_str(&sarif).unwrap();
    let kinds: Vec<&str> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["suppressions"][0]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["external"; 3]);
    let validated = super::ci_formats::validate("sarif", &sarif);
    assert!(
        validated.starts_with("sarif: valid against SARIF 2.1.0 ("),
        "{validated}"
    );

    // Severities: notes never fail; levels follow in SARIF.
    config("severity: {VAP100: note, VAP110: note}\n");
    let out = check(root, &["-o", "sarif", "new"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let levels: Vec<&str> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels, ["note"; 3]);
    // VAP100 raised to error: --fail-on error fails on it (VAP110 off).
    config("severity: {VAP100: error, VAP110: off}\n");
    let out = check(root, &["--fail-on", "error", "-o", "json", "new"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        suppressed(&stdout(&out)),
        [Some(vec![
            by_config("VAP110", V0, None),
            by_config("VAP110", V0, None)
        ])]
    );
    config("severity: {VAP100: warning}\n");
    assert_eq!(
        check(root, &["--fail-on", "error", "new"]).status.code(),
        Some(1),
        "VAP110 is still an error"
    );
    config("severity: {VAP100: warning, VAP110: warning}\n");
    assert_eq!(
        check(root, &["--fail-on", "error", "new"]).status.code(),
        Some(0)
    );
    // A rejected object (VAP001, exit 3) lowered to a warning: exit 1.
    std::fs::write(
        root.join("new/other.yaml"),
        two("other", &[]).replace("object.replicas > 0", "request.uid != \"\""),
    )
    .unwrap();
    config("severity: {VAP110: off}\n");
    assert_eq!(check(root, &["new"]).status.code(), Some(3));
    config("severity: {VAP110: off, VAP001: warning}\n");
    assert_eq!(check(root, &["new"]).status.code(), Some(1));

    // Errors name the key.
    for (text, want) in [
        ("ignore:\n- rules: VAP110\n", "unknown field `rules`"),
        (
            "ignore:\n- rule: VAP110, VAP100\n",
            "vapcheck: ignore[0].rule: \"VAP110, VAP100\": one RULE or RULE@FIELD per item\n",
        ),
        (
            "ignore:\n- rule: VAP110\n  objects: [a/b/c]\n",
            "vapcheck: ignore[0].objects[0]: \"a/b/c\" is not NAME or KIND/NAME\n",
        ),
        (
            "severity: {VAP999: error}\n",
            "vapcheck: severity: unknown rule \"VAP999\" (one of VAP001, VAP002, VAP003, VAP100, VAP101, VAP110, VAP120, VAP121, VAP122, VAP123, VAP124, VAP125, VAP126, VAP127)\n",
        ),
        (
            "severity: {VAP100: fatal}\n",
            "vapcheck: severity.VAP100: \"fatal\" is not one of \"error\", \"warning\", \"note\", \"off\"\n",
        ),
    ] {
        config(text);
        let out = check(root, &["new"]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = stderr(&out);
        if want.starts_with("vapcheck: ") {
            assert_eq!(err, want);
        } else {
            assert!(err.contains(want), "{err}");
        }
    }
}
