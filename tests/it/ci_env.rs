//! `scripts/ci-env`, which `.ci/run` sources before `make test`: it refuses `VAPCHECK_BLESS`
//! (exit 2 and one line on stderr) and unsets every variable that loosens or redirects a test.
//! The variables are found the way the script's comment says: every `VAPCHECK_*`, `CEL_DIFF_*`,
//! `INSTA_*` and `FUZZ_*` name the repository's sources, tests and scripts mention, plus the
//! other names the script lists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const REFUSAL: &str =
    "ci: error: VAPCHECK_BLESS is set; CI compares goldens and never rewrites them\n";

/// Names that are not `VAPCHECK_*`, `CEL_DIFF_*`, `INSTA_*` or `FUZZ_*` and are cleared too.
const OTHER_CLEARED: [&str; 8] = [
    "KUBECONFIG",
    "CELCHECK",
    "GKCHECK",
    "KVCHECK",
    "CHECKBENCH",
    "MAKEFLAGS",
    "MFLAGS",
    "GNUMAKEFLAGS",
];

/// Kept: where the caches and the shared data are.
const KEPT: [&str; 2] = ["VAPCHECK_CACHE", "VAPCHECK_SHARED"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `bash -c '. scripts/ci-env && <after>'` in the repository with only `PATH` and `vars` in
/// its environment (so that what make or cargo set for this test does not count).
fn source(vars: &[(String, String)], after: &str) -> Output {
    let mut command = Command::new("bash");
    command
        .current_dir(repo())
        .arg("-c")
        .arg(format!(". scripts/ci-env && {after}"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in vars {
        command.env(k, v);
    }
    command.output().expect("run bash")
}

fn is_candidate(token: &str) -> bool {
    ["VAPCHECK_", "CEL_DIFF_", "INSTA_", "FUZZ_"]
        .iter()
        .any(|p| token.len() > p.len() && token.starts_with(p))
        && !token.ends_with('_')
}

fn scan(path: &Path, out: &mut BTreeSet<String>) {
    if path.is_dir() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "target" | ".git" | "corpus" | "seeds" | "artifacts") {
            return;
        }
        let entries = std::fs::read_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for e in entries {
            scan(&e.expect("directory entry").path(), out);
        }
        return;
    }
    // Binary files (images, archives) are not read.
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for token in text.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')) {
        if is_candidate(token) {
            out.insert(token.to_owned());
        }
    }
}

/// Every candidate name the repository's code, tests and scripts mention.
fn mentioned() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for part in [
        "src", "crates", "tests", "e2e", "benches", "fuzz", "scripts", ".ci", "Makefile",
    ] {
        scan(&repo().join(part), &mut names);
    }
    names
}

#[test]
fn bless_is_refused_with_exit_2() {
    // Any value, also an empty one, is refused (only an unset VAPCHECK_BLESS passes).
    for value in ["1", "0", ""] {
        let out = source(
            &[("VAPCHECK_BLESS".to_owned(), value.to_owned())],
            "echo sourced",
        );
        assert_eq!(out.status.code(), Some(2), "VAPCHECK_BLESS={value:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), REFUSAL);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "",
            "nothing runs after the refusal"
        );
    }
    let out = source(&[], "echo sourced");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "sourced\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn ci_run_sources_it_before_make_test() {
    let run = std::fs::read_to_string(repo().join(".ci/run")).expect("read .ci/run");
    let sourced = run
        .find("\nsource scripts/ci-env\n")
        .expect(".ci/run sources scripts/ci-env");
    let make = run.find("\nmake test ").expect(".ci/run runs make test");
    assert!(sourced < make, "scripts/ci-env is sourced before make test");
}

#[test]
fn every_weakening_variable_comes_out_unset() {
    let names = mentioned();
    // The ones the audit of issue 30 named must be among those found.
    for name in [
        "VAPCHECK_BENCH_MAX_RSS_MIB",
        "VAPCHECK_BENCH_MAX_ADDED_MIB",
        "VAPCHECK_BENCH_TIMEOUT",
        "VAPCHECK_BENCH_WILDCARD_POLICIES",
        "VAPCHECK_APISERVER_EXTRA_ARGS",
        "VAPCHECK_PROMETHEUS_BIN",
        "VAPCHECK_K8S_DISCOVERY",
        "VAPCHECK_BIN_DIR",
        "VAPCHECK_FAULT_MEASURE_ONLY",
        "VAPCHECK_E2E_KUBECONFIG",
        "FUZZ_DEV",
        "FUZZ_CODEGEN_UNITS",
        "CEL_DIFF_SEED",
    ] {
        assert!(names.contains(name), "{name} not found in the repository");
    }
    let mut cleared: BTreeSet<String> = names
        .iter()
        .filter(|n| *n != "VAPCHECK_BLESS" && !KEPT.contains(&n.as_str()))
        .cloned()
        .collect();
    cleared.extend(OTHER_CLEARED.iter().map(|s| (*s).to_owned()));
    // Names no file mentions yet are cleared by their prefix too.
    cleared.extend(
        [
            "VAPCHECK_NOT_YET_NAMED",
            "CEL_DIFF_NEW",
            "INSTA_UPDATE",
            "INSTA_FORCE_PASS",
        ]
        .map(str::to_owned),
    );
    let mut vars: Vec<(String, String)> = cleared
        .iter()
        .map(|n| (n.clone(), "-i".to_owned()))
        .collect();
    vars.push(("VAPCHECK_CACHE".to_owned(), "/kept/cache".to_owned()));
    vars.push(("VAPCHECK_SHARED".to_owned(), "/kept/shared".to_owned()));
    vars.push(("CI".to_owned(), "true".to_owned()));
    // The helper variables must not outlive the script (`declare -p` fails on unset names).
    let out = source(
        &vars,
        "! declare -p ci_env_name ci_env_weakening 2>/dev/null && echo '--env--' && env -0",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (printed, dump) = stdout.split_once("--env--\n").expect("the script went on");
    let env: BTreeMap<&str, &str> = dump
        .split('\0')
        .filter_map(|entry| entry.split_once('='))
        .collect();
    let left: Vec<&String> = cleared
        .iter()
        .filter(|n| env.contains_key(n.as_str()))
        .collect();
    assert!(left.is_empty(), "still set after scripts/ci-env: {left:?}");
    assert_eq!(env.get("VAPCHECK_CACHE"), Some(&"/kept/cache"));
    assert_eq!(env.get("VAPCHECK_SHARED"), Some(&"/kept/shared"));
    assert_eq!(env.get("CI"), Some(&"true"));
    // One line for each variable it unset, and nothing else.
    let notices: BTreeSet<String> = printed
        .lines()
        .map(|l| {
            l.strip_prefix("ci: unsetting ")
                .and_then(|l| l.strip_suffix(" (it changes what a test checks)"))
                .unwrap_or_else(|| panic!("unexpected line {l:?}"))
                .to_owned()
        })
        .collect();
    assert_eq!(notices, cleared);
    assert_eq!(printed.lines().count(), cleared.len(), "one line each");
}
