//! `vapcheck check` with no schema flags: the built-in kinds of every supported Kubernetes
//! version are compiled in (crates/core/src/schema/embedded.rs, data/embedded-openapi.bin).

use std::path::Path;
use std::process::Command;

fn vapcheck(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn samples() -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/samples"))
            .unwrap()
            .map(|e| {
                format!(
                    "config/samples/{}",
                    e.unwrap().file_name().to_string_lossy()
                )
            })
            .filter(|p| p.ends_with(".yaml"))
            .collect();
    v.sort();
    v
}

#[test]
fn samples_need_no_flags_and_match_the_v1_35_documents() {
    let files = samples();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let (code, built_in) = vapcheck(&[&["check"], &files[..]].concat());
    let openapi = crate::support::shared_dir().join("openapi/v1.35");
    assert!(openapi.is_dir(), "{} is missing", openapi.display());
    let openapi = openapi.to_string_lossy().into_owned();
    let (code2, from_files) = vapcheck(&[&["check", "--openapi", &openapi], &files[..]].concat());
    assert_eq!((code, &built_in), (code2, &from_files));
    assert!(
        built_in.contains("undefined field 'replicas'"),
        "{built_in}"
    );
}

#[test]
fn every_embedded_version_checks_the_samples() {
    let files = samples();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    for minor in 30..=37 {
        let v = format!("1.{minor}");
        let (code, out) = vapcheck(&[&["check", "--kubernetes-version", &v], &files[..]].concat());
        assert_eq!(
            code, 1,
            "{v}: the sample with a typo warns, nothing else fails:\n{out}"
        );
        assert!(out.contains("undefined field 'replicas'"), "{v}:\n{out}");
    }
}

#[test]
fn strict_corpus_statuses_equal_those_from_the_v1_35_documents() {
    let root = crate::support::shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    assert_eq!(files.len(), 263, "corpus files under {}", root.display());
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let openapi = crate::support::shared_dir().join("openapi/v1.35");
    let openapi = openapi.to_string_lossy().into_owned();
    let (_, built_in) =
        vapcheck(&[&["check", "--mode", "strict", "-o", "json"], &files[..]].concat());
    let (_, from_files) = vapcheck(
        &[
            &[
                "check",
                "--mode",
                "strict",
                "-o",
                "json",
                "--openapi",
                &openapi,
            ],
            &files[..],
        ]
        .concat(),
    );
    let a: Vec<serde_json::Value> = serde_json::from_str(&built_in).unwrap();
    let b: Vec<serde_json::Value> = serde_json::from_str(&from_files).unwrap();
    assert_eq!(a.len(), 263);
    let same = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x["status"] == y["status"])
        .count();
    println!(
        "embedded 1.37 vs openapi/v1.35, strict: {same}/{} statuses identical",
        a.len()
    );
    assert_eq!(same, a.len());
}
