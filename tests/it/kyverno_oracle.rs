//! Kyverno's verdict on its ValidatingPolicies and NamespacedValidatingPolicies, reproduced:
//! for every `policies.kyverno.io` object of the Kyverno corpus (`../shared/corpus/kyverno`)
//! and of `tests/fixtures/kyverno`, vapcheck's answer equals the oracle's, `kvcheck`
//! (e2e/kyverno-oracle: Kyverno v1.19.1's own policy webhook validation,
//! `pkg/cel/policies/vpol.Validate` and its compiler): accepted or not, with the same errors
//! in the same order. Kyverno's library declarations in vapcheck (`engines::kyverno::decls`)
//! equal the ones `kvcheck -decls` reads from Kyverno's environment.
//!
//! The oracle is `$KVCHECK`, else `e2e/kyverno-oracle/bin/kvcheck` (built by
//! `e2e/kyverno-oracle/build`); under CI (`CI=true`) a missing oracle fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use vapcheck::engines::kyverno as kv;

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn oracle_path() -> Option<PathBuf> {
    let path = match std::env::var_os("KVCHECK") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/kyverno-oracle/bin/kvcheck"),
    };
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "the Kyverno oracle {} does not exist: build it with e2e/kyverno-oracle/build or set KVCHECK",
        path.display()
    );
    assert!(!under_ci(), "{why} (required under CI)");
    eprintln!("SKIPPED (not under CI): {why}");
    None
}

fn run(oracle: &Path, args: &[&Path]) -> String {
    let out = Command::new(oracle)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", oracle.display()));
    assert!(
        out.status.success(),
        "{} failed: {}",
        oracle.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The oracle's answer on one object.
#[derive(Debug)]
struct Answer {
    kind: String,
    checked: bool,
    errors: Vec<String>,
}

/// The oracle's answers by (file, document).
fn oracle_answers(oracle: &Path, dirs: &[PathBuf]) -> BTreeMap<(String, u64), Answer> {
    let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let mut out = BTreeMap::new();
    for line in run(oracle, &dirs).lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let key = (
            v["file"].as_str().expect("file").to_owned(),
            v["document"].as_u64().expect("document"),
        );
        let errors: Vec<String> = v["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| e.as_str().expect("error").to_owned())
            .collect();
        assert_eq!(
            v["accepted"].as_bool().expect("accepted"),
            v["checked"] == true && errors.is_empty(),
            "{line}"
        );
        let answer = Answer {
            kind: v["kind"].as_str().expect("kind").to_owned(),
            checked: v["checked"].as_bool().expect("checked"),
            errors,
        };
        assert!(out.insert(key, answer).is_none(), "{line}: twice");
    }
    out
}

/// vapcheck's errors for the validating or mutating policy in document `document` (1-based)
/// of `file`.
fn vapcheck_errors(file: &str, document: u64) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let index = usize::try_from(document - 1).expect("index");
    let value = docs
        .get(index)
        .unwrap_or_else(|| panic!("{file}: no document {document}"));
    let kind = value["kind"].as_str().unwrap_or("");
    let decoded = if kv::mutating::MUTATING_KINDS.contains(&kind) {
        kv::mutating::read_mutating_policy(value).map(|p| kv::mutating::validate(&p))
    } else if kv::deleting::DELETING_KINDS.contains(&kind) {
        kv::deleting::read_deleting_policy(value).map(|p| kv::deleting::validate(&p))
    } else if kv::generating::GENERATING_KINDS.contains(&kind) {
        kv::generating::read_generating_policy(value).map(|p| kv::generating::validate(&p))
    } else {
        kv::read_validating_policy(value).map(|p| kv::validate(&p))
    };
    decoded.unwrap_or_else(|(field, cause)| vec![format!("decode: {field}: {cause}")])
}

/// The counts of a comparison.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    /// Validating policies compared.
    compared: usize,
    /// Of them, accepted by Kyverno.
    accepted: usize,
    /// Mutating policies (MutatingPolicy, NamespacedMutatingPolicy) compared.
    mutating: usize,
    /// Of them, accepted by Kyverno.
    mutating_accepted: usize,
    /// Deleting policies (DeletingPolicy, NamespacedDeletingPolicy) compared.
    deleting: usize,
    /// Of them, accepted by Kyverno.
    deleting_accepted: usize,
    /// Generating policies (GeneratingPolicy, NamespacedGeneratingPolicy) compared.
    generating: usize,
    /// Of them, accepted by Kyverno.
    generating_accepted: usize,
    /// Objects of the other kinds (ImageValidatingPolicies: not checked by the oracle either).
    other_kinds: usize,
    /// Of the compared, those whose errors differ only by the end of a block scalar that ends
    /// the file without a line break: Go's YAML reader keeps no final `\n` (YAML 1.2 clip
    /// chomping keeps the final line break only if there is one), vapcheck's (serde-saphyr)
    /// adds one, so the quoted expression in a cause ends in `\n`. Same verdict, same causes
    /// otherwise.
    eof_newline: usize,
}

fn compare(dirs: &[PathBuf]) -> Option<Counts> {
    let oracle = oracle_path()?;
    let answers = oracle_answers(&oracle, dirs);
    let mut differences = Vec::new();
    let (mut compared, mut accepted, mut other_kinds, mut eof_newline) = (0, 0, 0, 0);
    let (mut mutating, mut mutating_accepted) = (0, 0);
    let (mut deleting, mut deleting_accepted) = (0, 0);
    let (mut generating, mut generating_accepted) = (0, 0);
    for ((file, document), want) in &answers {
        let kind = want.kind.as_str();
        if kv::mutating::MUTATING_KINDS.contains(&kind) {
            mutating += 1;
            mutating_accepted += usize::from(want.errors.is_empty());
        } else if kv::deleting::DELETING_KINDS.contains(&kind) {
            deleting += 1;
            deleting_accepted += usize::from(want.errors.is_empty());
        } else if kv::generating::GENERATING_KINDS.contains(&kind) {
            generating += 1;
            generating_accepted += usize::from(want.errors.is_empty());
        } else if kv::VALIDATING_KINDS.contains(&kind) {
            compared += 1;
            accepted += usize::from(want.errors.is_empty());
        } else {
            other_kinds += 1;
            continue;
        }
        assert!(want.checked, "{file}: a policy not checked by the oracle");
        let got = vapcheck_errors(file, *document);
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let trimmed: Vec<String> = got
            .iter()
            .map(|e| e.replacen("\\n\": ", "\": ", 1))
            .collect();
        if got != want.errors && !text.ends_with('\n') && trimmed == want.errors {
            eof_newline += 1;
            continue;
        }
        if got != want.errors {
            differences.push(format!(
                "{file} #{document}:\n  kyverno:  {:?}\n  vapcheck: {got:?}",
                want.errors
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} policies differ:\n{}",
        differences.len(),
        compared + mutating + deleting + generating,
        differences.join("\n")
    );
    let counts = Counts {
        compared,
        accepted,
        mutating,
        mutating_accepted,
        deleting,
        deleting_accepted,
        generating,
        generating_accepted,
        other_kinds,
        eof_newline,
    };
    eprintln!("kyverno oracle: {} objects, {counts:?}", answers.len());
    Some(counts)
}

fn corpus_dir() -> PathBuf {
    crate::support::shared_dir().join("corpus/kyverno")
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kyverno")
}

#[test]
fn corpus_verdicts_equal_kyvernos() {
    if let Some(counts) = compare(&[corpus_dir()]) {
        assert_eq!(
            counts,
            Counts {
                compared: 206,
                accepted: ACCEPTED_CORPUS,
                mutating: 98,
                mutating_accepted: 96,
                deleting: 14,
                deleting_accepted: 10,
                generating: 80,
                generating_accepted: 75,
                other_kinds: 29,
                eof_newline: 5,
            }
        );
    }
}

/// Of the corpus's 206 validating policies, how many Kyverno accepts.
const ACCEPTED_CORPUS: usize = 177;

#[test]
fn fixture_verdicts_equal_kyvernos() {
    if let Some(counts) = compare(&[fixture_dir()]) {
        assert_eq!(
            counts,
            Counts {
                compared: FIXTURES,
                accepted: FIXTURES_ACCEPTED,
                mutating: MUTATING_FIXTURES,
                mutating_accepted: MUTATING_FIXTURES_ACCEPTED,
                deleting: DELETING_FIXTURES,
                deleting_accepted: DELETING_FIXTURES_ACCEPTED,
                generating: GENERATING_FIXTURES,
                generating_accepted: GENERATING_FIXTURES_ACCEPTED,
                other_kinds: 0,
                eof_newline: 0,
            }
        );
    }
}

const FIXTURES: usize = 13;
const FIXTURES_ACCEPTED: usize = 6;
const MUTATING_FIXTURES: usize = 12;
const MUTATING_FIXTURES_ACCEPTED: usize = 3;
const DELETING_FIXTURES: usize = 24;
const DELETING_FIXTURES_ACCEPTED: usize = 7;
const GENERATING_FIXTURES: usize = 21;
const GENERATING_FIXTURES_ACCEPTED: usize = 3;

/// The table of Kyverno's library declarations equals what Kyverno's environment declares
/// beyond Kubernetes' base environment, row for row.
#[test]
fn declarations_equal_kyvernos() {
    let Some(oracle) = oracle_path() else {
        return;
    };
    let mut want = oracle_rows(&oracle, "-decls");
    let mut got = table_rows();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    eprintln!("kyverno declarations: {} rows equal", want.len());
}

/// The rows `kvcheck <flag>` prints, as [`row_text`] writes them.
fn oracle_rows(oracle: &Path, flag: &str) -> Vec<String> {
    run(oracle, &[Path::new(flag)])
        .lines()
        .map(|line| row_text(&serde_json::from_str(line).expect("JSON")))
        .collect()
}

/// vapcheck's table of Kyverno's declarations, both variants, as [`row_text`] writes rows.
fn table_rows() -> Vec<String> {
    let mut got: Vec<String> = Vec::new();
    for (variant, name) in [
        (kv::decls::Variant::Cluster, "cluster"),
        (kv::decls::Variant::Namespaced, "namespaced"),
    ] {
        for v in kv::decls::VARIABLES
            .iter()
            .filter(|v| v.variant.holds(variant))
        {
            got.push(format!("{name} variable {} : {}", v.name, v.ty));
        }
        for f in kv::decls::FIELDS
            .iter()
            .filter(|f| f.variant.holds(variant))
        {
            got.push(format!("{name} field {}.{} : {}", f.object, f.field, f.ty));
        }
        for o in kv::decls::OVERLOADS
            .iter()
            .filter(|o| o.variant.holds(variant))
        {
            got.push(format!(
                "{name} overload {} {} member={} ({}) -> {}",
                o.function,
                o.id,
                o.member,
                o.args.join(", "),
                o.result
            ));
        }
    }
    got
}

/// The MutatingPolicy environment (`kvcheck -decls-mpol`: mpol/compiler `newExtendedEnv`)
/// declares exactly the ValidatingPolicy table plus `jsonpatch.escapeKey`, the one function
/// `engines::kyverno::env::mutating_verdict_env` adds (`k8s_env::mutation::add_patch_types`,
/// with the `Object` and `JSONPatch` types, which are types, not rows).
#[test]
fn mutating_declarations_equal_kyvernos() {
    let Some(oracle) = oracle_path() else {
        return;
    };
    let mut want = oracle_rows(&oracle, "-decls-mpol");
    let mut got = table_rows();
    for variant in ["cluster", "namespaced"] {
        got.push(format!(
            "{variant} overload jsonpatch.escapeKey string_jsonpatch_escapeKey_string member=false (string) -> string"
        ));
    }
    want.sort();
    got.sort();
    assert_eq!(got, want);
    eprintln!("kyverno mutating declarations: {} rows equal", want.len());
    assert_eq!(want.len(), table_rows().len() + 2);
}

/// What the DeletingPolicy and GeneratingPolicy environments (built on `cel.NewEnv()`, not
/// on Kubernetes' base environment set) lack of that set, as `kvcheck -decls-dpol` and
/// `-decls-gpol` print it: the `authz` and `authzSelectors` libraries' overloads and the
/// two-variable comprehensions (their macros and `cel.@mapInsert`), the libraries
/// `engines::kyverno::env` leaves out of both.
fn removed_from_kubernetes_base() -> Vec<String> {
    use vapcheck::k8s_env::decls::{AUTHZ, AUTHZ_SELECTORS};
    let mut out = Vec::new();
    for variant in ["cluster", "namespaced"] {
        for row in AUTHZ.iter().chain(AUTHZ_SELECTORS) {
            out.push(format!(
                "{variant} removed-overload {} {}",
                row.function, row.id
            ));
        }
        for id in ["@mapInsert_map_key_value", "@mapInsert_map_map"] {
            out.push(format!("{variant} removed-overload cel.@mapInsert {id}"));
        }
        for m in [
            "all:3:true",
            "exists:3:true",
            "existsOne:3:true",
            "exists_one:3:true",
            "transformList:3:true",
            "transformList:4:true",
            "transformMap:3:true",
            "transformMap:4:true",
            "transformMapEntry:3:true",
            "transformMapEntry:4:true",
        ] {
            out.push(format!("{variant} removed-macro {m}"));
        }
    }
    out
}

/// Whether a row of [`table_rows`] is the `user` library's (left out of the DeletingPolicy
/// and GeneratingPolicy environments).
fn user_library_row(row: &str) -> bool {
    kv::env::USER_LIBRARY
        .iter()
        .any(|name| row.contains(&format!(" {name} ")) || row.contains(&format!(" {name}.")))
}

/// The DeletingPolicy environment (`kvcheck -decls-dpol`: dpol/compiler `createBaseDpolEnv`)
/// declares the ValidatingPolicy table without the `user` library and `libs.Exception`'s
/// fields, `exceptions` of type `compiler.Exception`, and lacks what
/// [`removed_from_kubernetes_base`] lists.
#[test]
fn deleting_declarations_equal_kyvernos() {
    let Some(oracle) = oracle_path() else {
        return;
    };
    let want = oracle_rows(&oracle, "-decls-dpol");
    let mut got: Vec<String> = table_rows()
        .into_iter()
        .filter(|r| !user_library_row(r) && !r.contains(" field libs.Exception."))
        .map(|r| {
            r.replace(
                "variable exceptions : libs.Exception",
                "variable exceptions : compiler.Exception",
            )
        })
        .collect();
    got.extend(removed_from_kubernetes_base());
    // createBaseDpolEnv declares `resource` itself, beside the resource library's own
    // declaration of it: `Variables()` lists both.
    for variant in ["cluster", "namespaced"] {
        got.push(format!(
            "{variant} variable resource : opaque:resource.Context"
        ));
    }
    assert_same_rows(got, want, "deleting");
}

/// The GeneratingPolicy environment (`kvcheck -decls-gpol`: gpol/compiler
/// `createBaseGpolEnv`) declares the ValidatingPolicy table without the `user` library, plus
/// the generator library (`engines::kyverno::env::GENERATOR_*`), and lacks what
/// [`removed_from_kubernetes_base`] lists.
#[test]
fn generating_declarations_equal_kyvernos() {
    let Some(oracle) = oracle_path() else {
        return;
    };
    let want = oracle_rows(&oracle, "-decls-gpol");
    let mut got: Vec<String> = table_rows()
        .into_iter()
        .filter(|r| !user_library_row(r))
        .collect();
    let (name, ty) = kv::env::GENERATOR_VARIABLE;
    for (variant, v) in [
        ("cluster", kv::decls::Variant::Cluster),
        ("namespaced", kv::decls::Variant::Namespaced),
    ] {
        got.push(format!("{variant} variable {name} : {ty}"));
        for o in kv::env::GENERATOR_OVERLOADS
            .iter()
            .filter(|o| o.variant.holds(v))
        {
            got.push(format!(
                "{variant} overload {} {} member={} ({}) -> {}",
                o.function,
                o.id,
                o.member,
                o.args.join(", "),
                o.result
            ));
        }
    }
    got.extend(removed_from_kubernetes_base());
    assert_same_rows(got, want, "generating");
}

/// `got` and `want` hold the same rows (as multisets); else the rows only one side has.
fn assert_same_rows(mut got: Vec<String>, mut want: Vec<String>, what: &str) {
    got.sort();
    want.sort();
    if got != want {
        let extra: Vec<&String> = got.iter().filter(|r| !want.contains(r)).collect();
        let missing: Vec<&String> = want.iter().filter(|r| !got.contains(r)).collect();
        panic!(
            "{what}: vapcheck's rows differ from Kyverno's ({} against {}):\nonly vapcheck's: {extra:#?}\nonly Kyverno's: {missing:#?}",
            got.len(),
            want.len()
        );
    }
    eprintln!("kyverno {what} declarations: {} rows equal", want.len());
}

fn row_text(v: &Value) -> String {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    match v["what"].as_str() {
        Some("removed-overload") => {
            format!(
                "{} removed-overload {} {}",
                s("variant"),
                s("name"),
                s("id")
            )
        }
        Some("removed-macro") => format!("{} removed-macro {}", s("variant"), s("name")),
        Some("variable") => format!("{} variable {} : {}", s("variant"), s("name"), s("result")),
        Some("field") => format!(
            "{} field {}.{} : {}",
            s("variant"),
            s("name"),
            s("field"),
            s("result")
        ),
        Some("overload") => format!(
            "{} overload {} {} member={} ({}) -> {}",
            s("variant"),
            s("name"),
            s("id"),
            v["member"].as_bool().unwrap_or(false),
            v["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            s("result")
        ),
        _ => format!("unexpected row {v}"),
    }
}

/// Every typed finding on the corpus's validating policies (`vapcheck check -o json
/// ../shared/corpus/kyverno`): policy name, message, number of error blocks (one per matched
/// kind); each class is reviewed in docs/engines.md.
const REVIEWED: [(&str, &str, usize); 40] = [
    (
        "check-deployment-labels",
        "found no matching overload for '_!=_' applied to '(string, null)'",
        1,
    ),
    (
        "check-deployment-labels",
        "undeclared reference to 'platform' (in container '')",
        1,
    ),
    (
        "check-ingress-nginx-controller-version-and-annotation-policy",
        "undefined field 'containers'",
        1,
    ),
    (
        "check-ingress-nginx-controller-version-and-annotation-policy",
        "undefined field 'ephemeralContainers'",
        1,
    ),
    (
        "check-ingress-nginx-controller-version-and-annotation-policy",
        "undefined field 'initContainers'",
        1,
    ),
    ("check-security-context", "undefined field 'containers'", 2),
    (
        "computeclasses-enforce-non-spot-usage-crd",
        "undefined field 'jobTemplate'",
        5,
    ),
    (
        "computeclasses-enforce-non-spot-usage-crd",
        "undefined field 'nodeSelector'",
        5,
    ),
    (
        "computeclasses-enforce-non-spot-usage-crd",
        "undefined field 'template'",
        4,
    ),
    (
        "disallow-privilege-escalation",
        "undefined field 'containers'",
        1,
    ),
    (
        "exclude-namespaces-example",
        "undefined field 'jobTemplate'",
        12,
    ),
    (
        "exclude-namespaces-example",
        "undefined field 'template'",
        12,
    ),
    ("forbid-cpu-limits", "undefined field 'limits'", 1),
    (
        "memory-requests-equal-limits",
        "undefined field 'limits'",
        1,
    ),
    (
        "memory-requests-equal-limits",
        "undefined field 'requests'",
        2,
    ),
    (
        "require-labels",
        "found no matching overload for 'string' applied to '(map(string, string))'",
        1,
    ),
    ("require-pod-probes", "undefined field 'containers'", 6),
    ("require-pod-probes", "undefined field 'template'", 3),
    ("require-qos-burstable", "undefined field 'limits'", 1),
    ("require-qos-burstable", "undefined field 'requests'", 1),
    ("require-qos-guaranteed", "undefined field 'limits'", 4),
    ("require-qos-guaranteed", "undefined field 'requests'", 4),
    (
        "require-storageclass",
        "undefined field 'storageClassName'",
        1,
    ),
    (
        "require-storageclass",
        "undefined field 'volumeClaimTemplates'",
        1,
    ),
    (
        "restrict-clusterrole-nodesproxy",
        "found no matching overload for '_==_' applied to '(list(ClusterRole.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-escalation-verbs-roles",
        "found no matching overload for '_==_' applied to '(list(ClusterRole.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-escalation-verbs-roles",
        "found no matching overload for '_==_' applied to '(list(Role.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-networkpolicy-empty-podselector",
        "found no matching overload for 'size' applied to '(NetworkPolicy.spec.podSelector)'",
        1,
    ),
    (
        "restrict-pod-controller-serviceaccount-updates",
        "undefined field 'jobTemplate'",
        2,
    ),
    (
        "restrict-pod-controller-serviceaccount-updates",
        "undefined field 'template'",
        2,
    ),
    (
        "restrict-secret-role-verbs",
        "found no matching overload for '_==_' applied to '(list(ClusterRole.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-secret-role-verbs",
        "found no matching overload for '_==_' applied to '(list(Role.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-wildcard-resources",
        "found no matching overload for '_==_' applied to '(list(ClusterRole.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-wildcard-resources",
        "found no matching overload for '_==_' applied to '(list(Role.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-wildcard-verbs",
        "found no matching overload for '_==_' applied to '(list(ClusterRole.rules.@idx), null)'",
        1,
    ),
    (
        "restrict-wildcard-verbs",
        "found no matching overload for '_==_' applied to '(list(Role.rules.@idx), null)'",
        1,
    ),
    (
        "validate-probes",
        "found no matching overload for '_==_' applied to '(DaemonSet.spec.template.spec.containers.@idx.readinessProbe, DaemonSet.spec.template.spec.containers.@idx.livenessProbe)'",
        1,
    ),
    (
        "validate-probes",
        "found no matching overload for '_==_' applied to '(Deployment.spec.template.spec.containers.@idx.readinessProbe, Deployment.spec.template.spec.containers.@idx.livenessProbe)'",
        1,
    ),
    (
        "validate-probes",
        "found no matching overload for '_==_' applied to '(StatefulSet.spec.template.spec.containers.@idx.readinessProbe, StatefulSet.spec.template.spec.containers.@idx.livenessProbe)'",
        1,
    ),
    ("vpol-http-get", "undefined field 'get'", 1),
];

#[test]
fn corpus_findings_are_the_reviewed_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(corpus_dir())
        .output()
        .expect("run vapcheck");
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let all = v.as_array().expect("list");
    assert_eq!(all.len(), 206 + 98 + 14 + 80);
    let entries: Vec<&Value> = all
        .iter()
        .filter(|e| kv::VALIDATING_KINDS.contains(&e["kind"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(entries.len(), 206);
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let (mut warnings, mut policies) = (0, 0);
    for e in &entries {
        let ws = e["status"]["typeChecking"]["expressionWarnings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        warnings += ws.len();
        policies += usize::from(!ws.is_empty());
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
        "kyverno corpus: {warnings} warnings on {policies} of 206 validating policies, {} error blocks, each class reviewed in docs/engines.md",
        counts.values().sum::<usize>()
    );
    assert_eq!((warnings, policies), (28, 24));
}

/// Every typed finding on the corpus's mutating policies (`vapcheck check -o json
/// ../shared/corpus/kyverno`): policy name, message, number of error blocks; each class is
/// reviewed in docs/engines.md.
const REVIEWED_MUTATING: [(&str, &str, usize); 32] = [
    ("auto-bind-sa-add", "undefined field 'subjects'", 1),
    (
        "add-apparmor-annotations",
        "found no matching overload for '_+_' applied to '(list(Pod.spec.containers.@idx), list(Pod.spec.initContainers.@idx))'",
        1,
    ),
    (
        "add-castai-removal-disabled",
        "undefined field 'jobTemplate'",
        1,
    ),
    (
        "add-castai-removal-disabled",
        "undefined field 'template'",
        1,
    ),
    (
        "add-default-labels",
        "Syntax error: extraneous input '}' expecting <EOF>",
        1,
    ),
    (
        "add-default-labels",
        "Syntax error: mismatched input ':' expecting {'}', ','}",
        1,
    ),
    ("add-default-labels", "Syntax error: missing ':' at '-'", 1),
    ("add-nodeselector", "undefined field 'jobTemplate'", 5),
    ("add-nodeselector", "undefined field 'nodeSelector'", 5),
    ("add-nodeselector", "undefined field 'template'", 2),
    (
        "add-tolerations",
        "found no matching overload for '_==_' applied to '(list(Pod.spec.tolerations.@idx), null)'",
        2,
    ),
    (
        "apply-pss-restricted-profile",
        "found no matching overload for '_?_:_' applied to '(bool, DaemonSet.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "apply-pss-restricted-profile",
        "found no matching overload for '_?_:_' applied to '(bool, Deployment.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "apply-pss-restricted-profile",
        "found no matching overload for '_?_:_' applied to '(bool, Job.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "apply-pss-restricted-profile",
        "found no matching overload for '_?_:_' applied to '(bool, StatefulSet.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    ("inject-coco-initdata", "undefined field 'template'", 1),
    (
        "log4shell-mitigation",
        "found no matching overload for '_?_:_' applied to '(bool, DaemonSet.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "log4shell-mitigation",
        "found no matching overload for '_?_:_' applied to '(bool, Deployment.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "log4shell-mitigation",
        "found no matching overload for '_?_:_' applied to '(bool, Job.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    (
        "log4shell-mitigation",
        "found no matching overload for '_?_:_' applied to '(bool, StatefulSet.spec.template.spec, map(dyn, dyn))'",
        1,
    ),
    ("log4shell-mitigation", "undefined field 'jobTemplate'", 5),
    ("log4shell-mitigation", "undefined field 'template'", 4),
    (
        "mpol-complex",
        "expected type 'bool' but found 'map(string, list(string))'",
        1,
    ),
    (
        "mpol-complex",
        "expected type 'string' but found 'list(string)'",
        1,
    ),
    (
        "mpol-complex",
        "expected type 'string' but found 'map(string, dyn)'",
        1,
    ),
    (
        "mpol-complex",
        "expected type 'string' but found 'map(string, map(string, string))'",
        1,
    ),
    (
        "resolve-image-to-digest",
        "type 'Object.spec.containers' names no field of the schema: undefined field 'containers'",
        5,
    ),
    (
        "resolve-image-to-digest",
        "type 'Object.spec.jobTemplate.spec.template.spec.containers' names no field of the schema: undefined field 'jobTemplate'",
        5,
    ),
    (
        "resolve-image-to-digest",
        "type 'Object.spec.template.spec.containers' names no field of the schema: undefined field 'template'",
        2,
    ),
    (
        "resolve-image-to-digest",
        "undefined field 'containers'",
        15,
    ),
    (
        "resolve-image-to-digest",
        "undefined field 'jobTemplate'",
        15,
    ),
    ("resolve-image-to-digest", "undefined field 'template'", 6),
];

#[test]
fn corpus_mutating_findings_are_the_reviewed_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(corpus_dir())
        .output()
        .expect("run vapcheck");
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let entries: Vec<&Value> = v
        .as_array()
        .expect("list")
        .iter()
        .filter(|e| kv::mutating::MUTATING_KINDS.contains(&e["kind"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(entries.len(), 98);
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let (mut warnings, mut policies, mut not_typed) = (0, 0, 0);
    for e in &entries {
        let status = &e["status"];
        let ws = status["typeChecking"]["expressionWarnings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        warnings += ws.len();
        policies += usize::from(!ws.is_empty());
        not_typed += status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| {
                c["type"] == "TypeChecked"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("Not checked: spec.evaluation"))
            })
            .count();
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
    let want: BTreeMap<(String, String), usize> = REVIEWED_MUTATING
        .iter()
        .map(|(n, m, k)| ((n.to_string(), m.to_string()), *k))
        .collect();
    assert_eq!(counts, want);
    eprintln!(
        "kyverno corpus: {warnings} warnings on {policies} of 98 mutating policies, {} error blocks, {not_typed} not typed (evaluation mode)",
        counts.values().sum::<usize>()
    );
    assert_eq!((warnings, policies, not_typed), (21, 11, 0));
}

/// The typed findings of `vapcheck check -o json ../shared/corpus/kyverno` on the entries of
/// `kinds`: how many entries, (policy name, message) → number of error blocks, warnings, and
/// policies with a warning.
fn corpus_findings(kinds: &[&str]) -> (usize, BTreeMap<(String, String), usize>, usize, usize) {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .arg(corpus_dir())
        .output()
        .expect("run vapcheck");
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let entries: Vec<&Value> = v
        .as_array()
        .expect("list")
        .iter()
        .filter(|e| kinds.contains(&e["kind"].as_str().unwrap_or("")))
        .collect();
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    let (mut warnings, mut policies) = (0, 0);
    for e in &entries {
        let ws = e["status"]["typeChecking"]["expressionWarnings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        warnings += ws.len();
        policies += usize::from(!ws.is_empty());
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
    (entries.len(), counts, warnings, policies)
}

fn reviewed(rows: &[(&str, &str, usize)]) -> BTreeMap<(String, String), usize> {
    rows.iter()
        .map(|(n, m, k)| ((n.to_string(), m.to_string()), *k))
        .collect()
}

/// Every typed finding on the corpus's deleting policies; each class is reviewed in
/// docs/engines.md.
const REVIEWED_DELETING: [(&str, &str, usize); 3] = [
    (
        "cleanup-jobs",
        "found no matching overload for '_==_' applied to '(optional_type(string), string)'",
        1,
    ),
    (
        "cleanup-jobs",
        "found no matching overload for '_==_' applied to '(type(type), string)'",
        1,
    ),
    (
        "cleanup-old-test-pods",
        "undeclared reference to 'now' (in container '')",
        1,
    ),
];

#[test]
fn corpus_deleting_findings_are_the_reviewed_ones() {
    let (entries, counts, warnings, policies) = corpus_findings(kv::deleting::DELETING_KINDS);
    assert_eq!(entries, 14);
    assert_eq!(counts, reviewed(&REVIEWED_DELETING));
    eprintln!(
        "kyverno corpus: {warnings} warnings on {policies} of 14 deleting policies, {} error blocks",
        counts.values().sum::<usize>()
    );
    assert_eq!((warnings, policies), (2, 2));
}

/// Every typed finding on the corpus's generating policies; each class is reviewed in
/// docs/engines.md.
const REVIEWED_GENERATING: [(&str, &str, usize); 4] = [
    (
        "clone-secret",
        "found no matching overload for 'Apply' applied to 'generator.Context.(string, list(dyn))'",
        1,
    ),
    (
        "clone-secret",
        "found no matching overload for 'Get' applied to 'resource.Context.(string, string, string, string)'",
        1,
    ),
    (
        "cross-ns-escalate",
        "found no matching overload for 'apply' applied to 'generator.Context.(string, list(map(string, dyn)))'",
        1,
    ),
    (
        "zk-kafka-address",
        "found no matching overload for 'apply' applied to 'generator.Context.(list(map(string, dyn)))'",
        1,
    ),
];

#[test]
fn corpus_generating_findings_are_the_reviewed_ones() {
    let (entries, counts, warnings, policies) = corpus_findings(kv::generating::GENERATING_KINDS);
    assert_eq!(entries, 80);
    assert_eq!(counts, reviewed(&REVIEWED_GENERATING));
    eprintln!(
        "kyverno corpus: {warnings} warnings on {policies} of 80 generating policies, {} error blocks",
        counts.values().sum::<usize>()
    );
    assert_eq!((warnings, policies), (4, 3));
}
