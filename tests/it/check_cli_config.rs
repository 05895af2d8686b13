//! `.vapcheck.yaml` and `--config` (issue 34, item 3): discovery from the working directory
//! upward, precedence (flag > file > default), paths relative to the file, and errors that
//! name the key, with the real binary and the built-in Kubernetes 1.37 schemas.

use std::path::Path;
use std::process::{Command, Output};

fn check(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(dir)
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap()
}

/// A policy with one type-checking warning (VAP100, exit 1 by default) that strict mode
/// reports too.
const TYPO: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: 'object.replicas > 0'
";

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("policies/sub")).unwrap();
    std::fs::write(dir.path().join("policies/sub/typo.yaml"), TYPO).unwrap();
    dir
}

#[test]
fn the_file_is_found_upward_and_the_command_line_wins() {
    let dir = repo();
    let sub = dir.path().join("policies/sub");
    // No file: the default (--fail-on warning): exit 1.
    assert_eq!(check(&sub, &["typo.yaml"]).status.code(), Some(1));
    std::fs::write(dir.path().join(".vapcheck.yaml"), "failOn: never\n").unwrap();
    // Found two folders up.
    assert_eq!(check(&sub, &["typo.yaml"]).status.code(), Some(0));
    // The flag wins over the file.
    assert_eq!(
        check(&sub, &["--fail-on", "warning", "typo.yaml"])
            .status
            .code(),
        Some(1)
    );
    // --config names another file, which replaces the one found.
    std::fs::write(dir.path().join("ci.yaml"), "failOn: warning\n").unwrap();
    let other = dir.path().join("ci.yaml");
    assert_eq!(
        check(&sub, &["--config", other.to_str().unwrap(), "typo.yaml"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn paths_are_relative_to_the_file() {
    let dir = repo();
    std::fs::write(
        dir.path().join(".vapcheck.yaml"),
        "crds: [crds/missing.yaml]\n",
    )
    .unwrap();
    let out = check(&dir.path().join("policies"), &["sub/typo.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let expected = dir.path().join("crds/missing.yaml");
    assert!(stderr.contains(&expected.display().to_string()), "{stderr}");
}

#[test]
fn an_unknown_key_or_value_is_an_error_naming_it() {
    let dir = repo();
    std::fs::write(dir.path().join(".vapcheck.yaml"), "failon: never\n").unwrap();
    let out = check(dir.path(), &["policies"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "vapcheck: {}: invalid .vapcheck.yaml: ",
            dir.path().join(".vapcheck.yaml").display()
        )) && stderr.contains("failon"),
        "{stderr}"
    );
    std::fs::write(dir.path().join(".vapcheck.yaml"), "mode: loose\n").unwrap();
    let out = check(dir.path(), &["policies"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "vapcheck: mode: \"loose\" is not one of \"strict\", \"extended\"\n"
    );
    assert_eq!(out.status.code(), Some(2));
}
