//! Gatekeeper's verdict on ConstraintTemplates with K8sNativeValidation code, reproduced: for
//! every template of the Gatekeeper corpus (`../shared/corpus/gatekeeper`) and of
//! `tests/fixtures/gatekeeper` (each way the driver rejects a template, compile errors of every
//! site), vapcheck's answer equals the oracle's, `gkcheck` (e2e/gatekeeper-oracle: Gatekeeper
//! v3.23.1's own `(*Driver).AddTemplate` and its compiler): accepted or not with the same
//! error, and the same compile error text on the same fields. The `check` command's `dyn`
//! fallback (no Constraint in the input) reports a warning on exactly those fields.
//!
//! The oracle is `$GKCHECK`, else `e2e/gatekeeper-oracle/bin/gkcheck` (built by
//! `e2e/gatekeeper-oracle/build`); under CI (`CI=true`) a missing oracle fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use vapcheck::apiserver::Server;
use vapcheck::engines::gatekeeper as gk;

const GATEKEEPER_SERVER: Server = gk::GATEKEEPER_SERVER;

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn oracle_path() -> Result<PathBuf, String> {
    let path = match std::env::var_os("GKCHECK") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/gatekeeper-oracle/bin/gkcheck"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the Gatekeeper oracle {} does not exist: build it with e2e/gatekeeper-oracle/build or set GKCHECK",
            path.display()
        ))
    }
}

/// A verdict: accepted (else the error) and the compile errors by field relative to the
/// source (`validations[0].expression`).
#[derive(Debug, PartialEq, Eq)]
struct Verdict {
    error: Option<String>,
    compile: BTreeMap<String, String>,
}

fn oracle_verdicts(oracle: &Path, dirs: &[PathBuf]) -> BTreeMap<String, Verdict> {
    let out = Command::new(oracle)
        .args(dirs)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", oracle.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        oracle.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut verdicts = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let file = v["file"].as_str().expect("file").to_owned();
        let error = (!v["accepted"].as_bool().expect("accepted"))
            .then(|| v["error"].as_str().unwrap_or_default().to_owned());
        let compile = v["compileErrors"]
            .as_array()
            .expect("compileErrors")
            .iter()
            .map(|c| {
                (
                    c["field"].as_str().expect("field").to_owned(),
                    c["error"].as_str().expect("error").to_owned(),
                )
            })
            .collect();
        let previous = verdicts.insert(file.clone(), Verdict { error, compile });
        assert!(previous.is_none(), "{file}: more than one template");
    }
    verdicts
}

fn vapcheck_verdict(file: &str) -> Verdict {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let value: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let template = gk::read_template(&value).unwrap_or_else(|e| panic!("{file}: {e:?}"));
    match gk::add_template(&template) {
        Err(e) => Verdict {
            error: Some(e),
            compile: BTreeMap::new(),
        },
        Ok(code) => Verdict {
            error: None,
            compile: gk::compile_errors(&template, &code, GATEKEEPER_SERVER)
                .into_iter()
                .map(|c| {
                    let field = c
                        .field
                        .strip_prefix(&format!("{}.", code.path))
                        .unwrap_or(&c.field)
                        .to_owned();
                    (field, c.error)
                })
                .collect(),
        },
    }
}

/// Compares every template of `dirs`; returns (templates, accepted, with compile errors,
/// compile errors) after asserting equality.
fn compare(dirs: &[PathBuf]) -> Option<(usize, usize, usize, usize)> {
    let oracle = match oracle_path() {
        Ok(p) => p,
        Err(why) if under_ci() => panic!("{why} (required under CI)"),
        Err(why) => {
            eprintln!("SKIPPED (not under CI): {why}");
            return None;
        }
    };
    let expected = oracle_verdicts(&oracle, dirs);
    let mut differences = Vec::new();
    for (file, want) in &expected {
        let got = vapcheck_verdict(file);
        if got != *want {
            differences.push(format!(
                "{file}:\n  gatekeeper: {want:?}\n  vapcheck:   {got:?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} templates differ:\n{}",
        differences.len(),
        expected.len(),
        differences.join("\n")
    );
    let accepted = expected.values().filter(|v| v.error.is_none()).count();
    let with_errors = expected.values().filter(|v| !v.compile.is_empty()).count();
    let errors = expected.values().map(|v| v.compile.len()).sum();
    eprintln!(
        "gatekeeper oracle: {} templates identical ({accepted} accepted, {with_errors} with {errors} compile errors)",
        expected.len()
    );
    Some((expected.len(), accepted, with_errors, errors))
}

fn corpus_dirs() -> Vec<PathBuf> {
    let root = crate::support::shared_dir().join("corpus/gatekeeper");
    vec![
        root.join("open-policy-agent__gatekeeper"),
        root.join("open-policy-agent__gatekeeper-library"),
    ]
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gatekeeper")
}

#[test]
fn corpus_verdicts_equal_gatekeepers() {
    if let Some(counts) = compare(&corpus_dirs()) {
        assert_eq!(counts, (67, 67, 2, 2));
    }
}

#[test]
fn fixture_verdicts_equal_gatekeepers() {
    if let Some(counts) = compare(&[fixture_dir()]) {
        // 6 rejected (each way the driver rejects), 4 accepted, 3 of them with 7 errors.
        assert_eq!(counts, (10, 4, 3, 7));
    }
}

/// The fields with warnings in `vapcheck check -o json FILE` (one template, no Constraint).
/// `vapcheck check` of each corpus template alone (object `dyn`, params typed): the warnings
/// and the templates with any (docs/engines.md reviews them).
const WARNINGS: usize = 33;
const TEMPLATES_WARNED: usize = 13;

fn warned_fields(file: &Path) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(file)
        .output()
        .expect("run vapcheck");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let entries = v.as_array().expect("a list");
    assert_eq!(entries.len(), 1, "{}", file.display());
    let mut fields: Vec<String> = entries[0]["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| w["fieldRef"].as_str().expect("fieldRef").to_owned())
        .collect();
    fields.sort();
    fields
}

#[test]
fn check_warns_where_gatekeeper_fails_to_compile() {
    let mut files = Vec::new();
    for dir in corpus_dirs() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            files.push(e.expect("entry").path());
        }
    }
    files.sort();
    assert_eq!(files.len(), 67);
    let (mut compile, mut warnings, mut templates_warned) = (0, 0, 0);
    for file in &files {
        let verdict = vapcheck_verdict(file.to_str().expect("utf-8"));
        let fields = warned_fields(file);
        for f in verdict.compile.keys() {
            let field = format!("spec.targets[0].code[0].source.{f}");
            assert!(
                fields.contains(&field),
                "{}: no warning at {field}, where Gatekeeper fails to compile; warnings at {fields:?}",
                file.display()
            );
        }
        compile += verdict.compile.len();
        warnings += fields.len();
        templates_warned += usize::from(!fields.is_empty());
    }
    eprintln!(
        "gatekeeper check without Constraints: {} templates, {warnings} warnings on {templates_warned} of them, among them the {compile} fields Gatekeeper fails to compile (the others: params typed, docs/engines.md)",
        files.len()
    );
    assert_eq!(
        (compile, warnings, templates_warned),
        (2, WARNINGS, TEMPLATES_WARNED)
    );
}

/// Every typed finding on the corpus with its Constraints (`vapcheck check
/// ../shared/corpus/gatekeeper`): template name, message, number of error blocks; each row is
/// reviewed in docs/engines.md.
const REVIEWED: [(&str, &str, usize); 15] = [
    ("k8scontainerlimits", "undefined field 'limits'", 1),
    (
        "k8spspallowedusers",
        "found no matching overload for '_+_' applied to '(int, string)'",
        24,
    ),
    (
        "k8spspallowedusers",
        "found no matching overload for '_?_:_' applied to '(bool, int, null)'",
        12,
    ),
    (
        "k8spspallowedusers",
        "found no matching overload for '_?_:_' applied to '(bool, list(int), null)'",
        4,
    ),
    (
        "k8spspallowedusers",
        "found no matching overload for 'join' applied to 'list(int).(string)'",
        24,
    ),
    ("k8spspallowedusers", "undefined field 'securityContext'", 1),
    (
        "k8spspapparmor",
        "expected type 'dyn' but found 'string'",
        5,
    ),
    (
        "k8spspforbiddensysctls",
        "undefined field 'allowedSysctls'",
        1,
    ),
    (
        "k8spspforbiddensysctls",
        "undefined field 'forbiddenSysctls'",
        1,
    ),
    (
        "k8spspfsgroup",
        "found no matching overload for '_?_:_' applied to '(bool, string, int)'",
        2,
    ),
    (
        "k8spspfsgroup",
        "found no matching overload for 'string' applied to '(K8sPSPFSGroup.ranges.@idx)'",
        1,
    ),
    (
        "k8spspreadonlyrootfilesystem",
        "undeclared reference to 'variabales' (in container '')",
        1,
    ),
    (
        "k8spspseccomp",
        "expected type 'dyn' but found 'string'",
        14,
    ),
    ("k8spspseccomp", "undefined field 'allowAllProfiles'", 2),
    (
        "k8spspselinuxv2",
        "found no matching overload for '_+_' applied to '(string, list(K8sPSPSELinuxV2.allowedSELinuxOptions.@idx))'",
        4,
    ),
];

#[test]
fn corpus_findings_with_constraints_are_the_reviewed_ones() {
    let root = crate::support::shared_dir().join("corpus/gatekeeper");
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(&root)
        .output()
        .expect("run vapcheck");
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let entries = v.as_array().expect("list");
    assert_eq!(entries.len(), 67);
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let (mut warnings, mut templates) = (0, 0);
    for e in entries {
        assert_eq!(e["kind"], "ConstraintTemplate");
        assert_eq!(e["apiServer"]["accepted"], true);
        let ws = e["status"]["typeChecking"]["expressionWarnings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        warnings += ws.len();
        templates += usize::from(!ws.is_empty());
        for w in ws {
            for block in w["warning"].as_str().expect("warning").lines() {
                let Some(at) = block.find("ERROR: <input>:") else {
                    continue;
                };
                let rest = &block[at + "ERROR: <input>:".len()..];
                let message = rest.splitn(3, ':').nth(2).unwrap_or_default().trim();
                *counts
                    .entry((
                        e["name"].as_str().expect("name").to_owned(),
                        message.to_owned(),
                    ))
                    .or_default() += 1;
            }
        }
    }
    let want: BTreeMap<(String, String), usize> = REVIEWED
        .iter()
        .map(|(n, m, k)| ((n.to_string(), m.to_string()), *k))
        .collect();
    assert_eq!(counts, want);
    eprintln!(
        "gatekeeper corpus with its Constraints: {warnings} warnings on {templates} of 67 templates, {} error blocks, each class reviewed in docs/engines.md",
        counts.values().sum::<usize>()
    );
    assert_eq!((warnings, templates), (70, 20));
}

#[test]
fn check_warns_exactly_where_gatekeeper_fails_on_the_fixtures() {
    // The accepted fixtures with compile errors: every site kind, `params` outside the
    // variables (undeclared in Gatekeeper's driver, declared in the generated policy), a `dyn`
    // message expression (Gatekeeper requires `string` exactly).
    let mut compared = 0;
    for name in [
        "compile-errors.yaml",
        "params-outside-variables.yaml",
        "dyn-message.yaml",
    ] {
        let file = fixture_dir().join(name);
        let verdict = vapcheck_verdict(file.to_str().expect("utf-8"));
        assert_eq!(verdict.error, None, "{name}");
        let mut want: Vec<String> = verdict
            .compile
            .keys()
            .map(|f| format!("spec.targets[0].code[0].source.{f}"))
            .collect();
        want.sort();
        assert_eq!(warned_fields(&file), want, "{name}");
        compared += want.len();
    }
    assert_eq!(compared, 7);
}
