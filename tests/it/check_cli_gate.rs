//! `vapcheck check --fail-on LEVEL` and baselines (`--baseline`, `--write-baseline`; issue 34,
//! item 3), with the real binary and the built-in Kubernetes 1.37 schemas.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn check(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .output()
        .unwrap()
}

fn policy(name: &str, expression: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}
  validations:
  - expression: '{expression}'
"
    )
}

/// A type-checking warning only (VAP100).
fn warning() -> String {
    policy("typo", "object.replicas > 0")
}

/// An expression that errors on valid objects only (VAP110).
fn runtime_error() -> String {
    policy("team", "object.metadata.labels[\"team\"] == \"x\"")
}

/// An object kube-apiserver rejects (VAP001, with a VAP100 beside it).
fn rejected() -> String {
    policy("uid", "request.uid != \"\"")
}

/// A document that does not decode (VAP003).
const UNDECODED: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bad}
spec: {validations: 5}
";

#[test]
fn fail_on_each_level() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("clean.yaml", policy("clean", "object.spec.replicas > 0")),
        ("warning.yaml", warning()),
        ("runtime.yaml", runtime_error()),
        ("rejected.yaml", rejected()),
        ("undecoded.yaml", UNDECODED.to_owned()),
    ];
    // Exit status per file for: default, rejected, error, warning, never.
    let want = [
        ("clean.yaml", [0, 0, 0, 0, 0]),
        ("warning.yaml", [1, 0, 0, 1, 0]),
        ("runtime.yaml", [1, 0, 1, 1, 0]),
        ("rejected.yaml", [3, 3, 3, 3, 0]),
        ("undecoded.yaml", [3, 3, 3, 3, 0]),
    ];
    for (file, text) in &cases {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let mut got = Vec::new();
    for (file, _) in &want {
        let mut codes = [0; 5];
        for (i, level) in [
            None,
            Some("rejected"),
            Some("error"),
            Some("warning"),
            Some("never"),
        ]
        .iter()
        .enumerate()
        {
            let mut args = vec![*file];
            if let Some(level) = level {
                args.extend(["--fail-on", level]);
            }
            let o = check(dir.path(), &args);
            codes[i] = o.status.code().unwrap_or(-1);
        }
        got.push((*file, codes));
    }
    assert_eq!(got, want);
    // Unusable input exits 2 whatever the level.
    let o = check(dir.path(), &["--fail-on", "never", "missing.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    // Unknown levels are usage errors.
    let o = check(dir.path(), &["--fail-on", "sometimes", "clean.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("[possible values: rejected, error, warning, never]")
    );
}

fn sarif_results(o: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    v["runs"][0]["results"].as_array().unwrap().clone()
}

/// Write a baseline, run again: exit 0, every finding `unchanged`. Move everything down (a
/// comment on top) and add a new error: exit 3 with that error alone `new`.
#[test]
fn baseline_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("p.yaml"),
        format!("{}---\n{}---\n{UNDECODED}", warning(), runtime_error()),
    )
    .unwrap();
    let o = check(p, &["--write-baseline", "base.sarif", "p.yaml"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The baseline is the SARIF log of the run.
    let sarif = check(p, &["-o", "sarif", "p.yaml"]);
    assert_eq!(sarif.status.code(), Some(3));
    assert_eq!(std::fs::read(p.join("base.sarif")).unwrap(), sarif.stdout);
    let before = sarif_results(&sarif);
    // VAP100, two VAP110, VAP003.
    assert_eq!(before.len(), 4, "{before:?}");

    let o = check(p, &["--baseline", "base.sarif", "-o", "sarif", "p.yaml"]);
    assert_eq!(o.status.code(), Some(0));
    let states: Vec<&str> = sarif_results(&o)
        .iter()
        .map(|r| r["baselineState"].as_str().unwrap_or_default().to_owned())
        .map(|s| {
            if s == "unchanged" {
                "unchanged"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(states, ["unchanged"; 4]);
    let o = check(p, &["--baseline", "base.sarif", "p.yaml"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .ends_with("baseline base.sarif: 4 of 4 findings baselined, 0 new\n")
    );
    let o = check(p, &["--baseline", "base.sarif", "-o", "github", "p.yaml"]);
    assert_eq!((o.status.code(), o.stdout.as_slice()), (Some(0), &b""[..]));

    // Lines move and a rejected policy is added.
    std::fs::write(
        p.join("p.yaml"),
        format!(
            "# moved\n\n{}---\n{}---\n{UNDECODED}---\n{}",
            warning(),
            runtime_error(),
            rejected()
        ),
    )
    .unwrap();
    let o = check(p, &["--baseline", "base.sarif", "-o", "sarif", "p.yaml"]);
    assert_eq!(o.status.code(), Some(3));
    let results = sarif_results(&o);
    let new: Vec<(&str, &str)> = results
        .iter()
        .filter(|r| r["baselineState"] == "new")
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap(),
                r["properties"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(new, [("VAP001", "uid"), ("VAP100", "uid")]);
    assert_eq!(
        results
            .iter()
            .filter(|r| r["baselineState"] == "unchanged")
            .count(),
        4
    );
    let o = check(p, &["--baseline", "base.sarif", "-o", "github", "p.yaml"]);
    let gh = String::from_utf8_lossy(&o.stdout);
    assert_eq!(gh.lines().count(), 2, "{gh}");
    assert!(
        gh.lines()
            .all(|l| l.contains("title=ValidatingAdmissionPolicy uid%3A")),
        "{gh}"
    );
    // Warnings alone do not fail at --fail-on rejected; the rejected policy does.
    let o = check(
        p,
        &[
            "--baseline",
            "base.sarif",
            "--fail-on",
            "rejected",
            "p.yaml",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .ends_with("baseline base.sarif: 4 of 6 findings baselined, 2 new\n")
    );

    // A baseline that is not a SARIF log is unusable input, naming the file.
    std::fs::write(p.join("bad.sarif"), "{}").unwrap();
    let o = check(p, &["--baseline", "bad.sarif", "p.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "vapcheck: --baseline bad.sarif: not a SARIF log (no `runs` array)\n"
    );
}
