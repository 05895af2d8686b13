//! Runtime safety (issue 31) through the binary: the class cases of
//! `e2e/fixtures/runtime-safety-cases.yaml` (replayed on the real API server by
//! `e2e_runtime_safety`) get their exact findings, strict mode gets none, and applying the
//! SARIF `fixes` to the file removes every finding.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
}

fn cases() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/fixtures/runtime-safety-cases.yaml")
}

/// `(policy, fieldRef, access)` of every runtime finding of `file`.
fn runtime(file: &std::path::Path, mode: &str) -> Vec<(String, String, String)> {
    let o = binary()
        .args(["check", "-o", "json", "--mode", mode])
        .arg(file)
        .output()
        .expect("runs");
    let v: Vec<Value> = serde_json::from_slice(&o.stdout).expect("JSON");
    let mut out = Vec::new();
    for e in &v {
        for f in e["status"]["runtime"].as_array().into_iter().flatten() {
            out.push((
                e["name"].as_str().unwrap_or_default().to_owned(),
                f["fieldRef"].as_str().unwrap_or_default().to_owned(),
                f["access"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn the_class_cases_get_exactly_their_findings() {
    let got = runtime(&cases(), "extended");
    let want = [
        (
            "rs-absent-field",
            "spec.validations[0].expression",
            "object.spec.securityContext.runAsNonRoot",
        ),
        (
            "rs-absent-field",
            "spec.validations[1].expression",
            "c.securityContext",
        ),
        (
            "rs-absent-key",
            "spec.validations[0].expression",
            "object.metadata.labels['team']",
        ),
        (
            "rs-absent-key",
            "spec.validations[1].expression",
            "object.data",
        ),
        (
            "rs-null-object",
            "spec.validations[0].expression",
            "object.metadata",
        ),
        (
            "rs-null-old-object",
            "spec.validations[0].expression",
            "oldObject.metadata",
        ),
        (
            "rs-match-condition",
            "spec.matchConditions[0].expression",
            "object.metadata.labels",
        ),
        (
            "rs-match-condition",
            "spec.matchConditions[0].expression",
            "object.metadata.labels['color']",
        ),
        (
            "rs-variable",
            "spec.variables[0].expression",
            "object.spec.activeDeadlineSeconds",
        ),
        (
            "rs-old-object-field",
            "spec.validations[0].expression",
            "oldObject.automountServiceAccountToken",
        ),
        (
            "rs-old-object-field",
            "spec.validations[0].expression",
            "object.automountServiceAccountToken",
        ),
        (
            "rs-message-expression",
            "spec.validations[0].messageExpression",
            "object.metadata.labels",
        ),
        (
            "rs-message-expression",
            "spec.validations[0].messageExpression",
            "object.metadata.labels['team']",
        ),
        (
            "rs-message-expression-no-message",
            "spec.validations[0].messageExpression",
            "object.automountServiceAccountToken",
        ),
        (
            "rs-namespace-object",
            "spec.validations[0].expression",
            "namespaceObject.metadata",
        ),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(got, want);
    // Strict mode is kube-controller-manager's output: no runtime findings.
    assert_eq!(runtime(&cases(), "strict"), Vec::new());
}

#[test]
fn applying_the_sarif_fixes_removes_every_finding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cases.yaml");
    std::fs::copy(cases(), &file).expect("copy");
    let o = binary()
        .args(["check", "-o", "sarif"])
        .arg(&file)
        .output()
        .expect("runs");
    let sarif: Value = serde_json::from_slice(&o.stdout).expect("SARIF");
    // (line, start column, end column, text), one per distinct replacement.
    let mut edits: Vec<(usize, usize, usize, String)> = Vec::new();
    let mut results = 0;
    for r in sarif["runs"][0]["results"].as_array().into_iter().flatten() {
        if r["ruleId"] != "VAP110" {
            continue;
        }
        results += 1;
        let rep = &r["fixes"][0]["artifactChanges"][0]["replacements"][0];
        let region = &rep["deletedRegion"];
        assert_eq!(region["startLine"], region["endLine"], "{r}");
        let e = (
            region["startLine"].as_u64().expect("line") as usize,
            region["startColumn"].as_u64().expect("column") as usize,
            region["endColumn"].as_u64().expect("column") as usize,
            rep["insertedContent"]["text"]
                .as_str()
                .expect("text")
                .to_owned(),
        );
        if !edits.contains(&e) {
            edits.push(e);
        }
    }
    assert_eq!(results, 15);
    assert_eq!(edits.len(), 13, "{edits:?}");
    let text = std::fs::read_to_string(&file).expect("read");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // From the end of each line, so that earlier columns stay valid.
    edits.sort_by_key(|e| std::cmp::Reverse((e.0, e.1)));
    for (line, start, end, new) in &edits {
        let l = &mut lines[line - 1];
        let chars: Vec<char> = l.chars().collect();
        let before: String = chars[..start - 1].iter().collect();
        let after: String = chars[end - 1..].iter().collect();
        *l = format!("{before}{new}{after}");
    }
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    assert_eq!(runtime(&file, "extended"), Vec::new());
}
