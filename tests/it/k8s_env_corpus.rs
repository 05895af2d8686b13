//! Every CEL expression of the policy corpus (`shared/corpus/policies`, 263 real-world
//! ValidatingAdmissionPolicies) compiled in the Kubernetes 1.37.1 environment with `object`,
//! `oldObject` and `params` as `dyn`: no expression may fail with a "no such function /
//! overload" error (`undeclared reference`, `found no matching overload`) except the
//! reviewed ones listed in [`KNOWN`] (genuine bugs in those policies, see docs/k8s-env.md).
//! Run with `--nocapture` to see every failure, of any kind.

use crate::support::shared_dir;
use std::path::{Path, PathBuf};

use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};

/// Reviewed function/overload failures: (policy file relative to `corpus/policies`,
/// field path, message). Each is explained in docs/k8s-env.md.
const KNOWN: &[(&str, &str, &str)] = &[
    // Typo: the standard library function is `startsWith`.
    (
        "kubernetes__website/demo-policy.example.com--validating-admission-policy-match-conditions.yaml",
        "spec.validations[0].expression",
        "undeclared reference to 'startWith' (in container '')",
    ),
    // `cond ? <map> : null`: cel-go only lets null unify with object, opaque, wrapper,
    // any, duration and timestamp types (checker/types.go isLegacyNullable), not maps.
    (
        "undistro__cel-playground/test-variable-access--variable4-policy.yaml",
        "spec.variables[0].expression",
        "found no matching overload for '_?_:_' applied to '(bool, map(string, list(string)), null)'",
    ),
];

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

struct Failure {
    file: String,
    path: String,
    message: String,
    is_function_error: bool,
}

fn str_at<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(|x| x.as_str())
}

fn items<'a>(v: &'a serde_json::Value, key: &str) -> impl Iterator<Item = &'a serde_json::Value> {
    v.get(key).and_then(|x| x.as_array()).into_iter().flatten()
}

/// Checks one policy document; returns (expressions compiled, failures).
fn check_policy(file: &str, doc: &serde_json::Value) -> (usize, Vec<Failure>) {
    let spec = &doc["spec"];
    let params = if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
        Params::Untyped
    } else {
        Params::Absent
    };
    let mut env = PolicyEnv::new(Target::upstream(), KindDecls::untyped(params)).expect("env");
    let mut failures = Vec::new();
    let mut count = 0;
    let mut record = |path: String, issues: vapcheck::cel::Issues| {
        for e in issues.errors() {
            let is_function_error = e.message.starts_with("found no matching overload")
                || e.message.starts_with("undeclared reference");
            failures.push(Failure {
                file: file.to_string(),
                path: path.clone(),
                message: e.message.clone(),
                is_function_error,
            });
        }
    };
    for (i, v) in items(spec, "variables").enumerate() {
        let (Some(name), Some(expr)) = (str_at(v, "name"), str_at(v, "expression")) else {
            continue;
        };
        count += 1;
        let outcome = env.add_variable(name, expr);
        if let Err(issues) = outcome.result {
            record(format!("spec.variables[{i}].expression"), issues);
        }
    }
    let mut exprs: Vec<(String, &str)> = Vec::new();
    for (i, v) in items(spec, "validations").enumerate() {
        if let Some(e) = str_at(v, "expression") {
            exprs.push((format!("spec.validations[{i}].expression"), e));
        }
        if let Some(e) = str_at(v, "messageExpression").filter(|e| !e.is_empty()) {
            exprs.push((format!("spec.validations[{i}].messageExpression"), e));
        }
    }
    for (i, v) in items(spec, "matchConditions").enumerate() {
        if let Some(e) = str_at(v, "expression") {
            exprs.push((format!("spec.matchConditions[{i}].expression"), e));
        }
    }
    for (i, v) in items(spec, "auditAnnotations").enumerate() {
        if let Some(e) = str_at(v, "valueExpression") {
            exprs.push((format!("spec.auditAnnotations[{i}].valueExpression"), e));
        }
    }
    for (path, e) in exprs {
        count += 1;
        if let Err(issues) = env.compile(e) {
            record(path, issues);
        }
    }
    (count, failures)
}

#[test]
fn corpus_has_no_unexplained_function_or_overload_errors() {
    let root = shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    collect_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() >= 263,
        "corpus not found under {}",
        root.display()
    );
    let mut policies = 0;
    let mut expressions = 0;
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable corpus file");
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&text).expect("corpus files are valid YAML");
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        for d in docs
            .iter()
            .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
        {
            policies += 1;
            let (n, fs) = check_policy(&rel, d);
            expressions += n;
            failures.extend(fs);
        }
    }
    println!(
        "{policies} policies, {expressions} expressions, {} errors:",
        failures.len()
    );
    for f in &failures {
        println!(
            "{} {} {}: {}",
            if f.is_function_error { "FUNC" } else { "OTHER" },
            f.file,
            f.path,
            f.message
        );
    }
    assert_eq!(policies, 263);
    let unexplained: Vec<String> = failures
        .iter()
        .filter(|f| f.is_function_error)
        .filter(|f| {
            !KNOWN
                .iter()
                .any(|(file, path, msg)| *file == f.file && *path == f.path && *msg == f.message)
        })
        .map(|f| format!("{} {}: {}", f.file, f.path, f.message))
        .collect();
    assert!(
        unexplained.is_empty(),
        "unexplained function/overload errors:\n{}",
        unexplained.join("\n")
    );
    let stale: Vec<_> = KNOWN
        .iter()
        .filter(|(file, path, msg)| {
            !failures
                .iter()
                .any(|f| f.file == *file && f.path == *path && f.message == *msg)
        })
        .collect();
    assert!(stale.is_empty(), "known failures no longer seen: {stale:?}");
}
