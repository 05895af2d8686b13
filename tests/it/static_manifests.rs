//! `vapcheck check --static-manifests DIR` against the pinned loader itself: every folder of
//! tests/fixtures/static-manifests (each README.md names the loader rule it exercises) was run
//! through k8s.io/kubernetes 1.37.1 `LoadValidatingManifestsFromDirectory` by the oracle
//! (e2e/oracle/cmd/staticmanifests; `e2e/oracle/golden --check` regenerates
//! tests/golden/static-manifests-1.37.jsonl in CI). vapcheck must print the loader's first
//! error byte for byte, or load the same policies and bindings.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Folders where vapcheck's wording differs from the loader's on purpose: the cause and the
/// file are the same, the YAML parser's message is vapcheck's own.
const OWN_WORDING: [&str; 1] = ["invalid-yaml"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/static-manifests")
}

fn run(case: &str) -> (i32, serde_json::Value, String) {
    let openapi = crate::support::shared_dir().join("openapi/v1.35");
    assert!(openapi.is_dir(), "{} is missing", openapi.display());
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(root())
        .args(["check", "-o", "json", "--openapi"])
        .arg(&openapi)
        .args(["--static-manifests", case])
        .output()
        .expect("vapcheck runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{case}: not JSON ({e}); stderr: {stderr}"));
    (out.status.code().expect("exit code"), json, stderr)
}

fn names(entries: &[serde_json::Value], kind: &str) -> Vec<String> {
    let mut v: Vec<String> = entries
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_fixture_folder_gets_the_loaders_verdict() {
    let golden_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/static-manifests-1.37.jsonl");
    let golden = std::fs::read_to_string(&golden_path).expect("golden file");
    let mut folders: Vec<String> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    let mut seen = Vec::new();
    let (mut identical, mut own_wording) = (0, 0);
    for line in golden.lines() {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let case = want["case"].as_str().unwrap();
        seen.push(case.to_owned());
        let readme = root().join(case).join("README.md");
        assert!(
            readme.is_file(),
            "{case}: every case names its rule in README.md"
        );
        let (code, got, stderr) = run(case);
        let entries = got.as_array().expect("array");
        let folder = &entries[0];
        assert_eq!(folder["kind"], "StaticManifests", "{case}");
        assert_eq!(folder["apiServer"]["staticManifests"], case, "{case}");
        match want["error"].as_str() {
            None => {
                assert_eq!(folder["apiServer"]["accepted"], true, "{case}: {folder}");
                assert_eq!(
                    names(entries, "ValidatingAdmissionPolicy"),
                    serde_json::from_value::<Vec<String>>(want["policies"].clone()).unwrap(),
                    "{case}"
                );
                assert_eq!(
                    names(entries, "ValidatingAdmissionPolicyBinding"),
                    serde_json::from_value::<Vec<String>>(want["bindings"].clone()).unwrap(),
                    "{case}"
                );
                assert!(code == 0 || code == 1, "{case}: exit {code}; {stderr}");
                identical += 1;
            }
            Some(error) => {
                assert_eq!(folder["apiServer"]["accepted"], false, "{case}");
                let first = folder["apiServer"]["causes"][0].as_str().unwrap();
                if OWN_WORDING.contains(&case) {
                    let prefix = error.split(": ").next().unwrap();
                    assert!(first.starts_with(prefix), "{case}: {first:?} vs {error:?}");
                    own_wording += 1;
                } else {
                    assert_eq!(first, error, "{case}");
                    identical += 1;
                }
                assert_eq!(code, 3, "{case}: a rejected folder exits 3; {stderr}");
            }
        }
    }
    assert_eq!(seen, folders, "the golden file covers every fixture folder");
    println!(
        "static manifests: {identical}/{} folders identical to the 1.37.1 loader, {own_wording} with vapcheck's own YAML wording",
        folders.len()
    );
    assert_eq!(identical + own_wording, folders.len());
    assert_eq!(own_wording, OWN_WORDING.len());
}

#[test]
fn type_checking_warnings_of_a_loaded_folder_are_reported() {
    let (code, got, _) = run("type-warnings");
    assert_eq!(code, 1, "warnings, not rejected");
    let policy = &got.as_array().unwrap()[1];
    assert_eq!(policy["name"], "typo.static.k8s.io");
    let warning = policy["status"]["typeChecking"]["expressionWarnings"][0]["warning"]
        .as_str()
        .unwrap();
    assert!(warning.contains("undefined field 'replicas'"), "{warning}");
}

#[test]
fn an_unreadable_folder_is_unusable_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "--static-manifests", "/nonexistent/static"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--static-manifests: cannot read folder /nonexistent/static"),
        "{stderr}"
    );
}
