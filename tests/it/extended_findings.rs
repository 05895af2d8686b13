//! Every finding extended mode makes on the corpus (`shared/corpus/policies`, checked as
//! `vapcheck check --openapi shared/openapi/v1.35` does) with its runtime class, against the
//! reviewed table `tests/fixtures/extended-findings.tsv` (issue 14; docs/extended-mode.md).
//!
//! Columns: policy (`<file>#<name>`), fieldRef, kind, strict (`strict`: part of upstream's
//! text, which is kept whatever the class; `extended-only`: vapcheck's own), class (`fails
//! at admission`, `static typing only`, or `unreachable`: not evaluated for that kind, and
//! dropped from the text when extended-only), why, finding (its first line).
//! `VAPCHECK_BLESS=1 cargo test --test it extended_findings::` rewrites the table; review the
//! diff before committing it.

use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_policies;
use vapcheck::policy::narrowing::FindingClass;
use vapcheck::policy::{
    Backends, CheckOptions, DiscoveryRestMapper, Mode, check_policy, extended_keeps_strict,
};

fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("corpus folder") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

/// Runs `f` with the offline backends of `shared/openapi/v1.35`.
fn with_backends<T>(f: impl FnOnce(&Backends<'_>) -> T) -> T {
    let openapi = crate::support::shared_dir().join("openapi/v1.35");
    let options = SchemaOptions {
        openapi: Some(openapi.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&openapi), None, &[]).expect("discovery"));
    f(&Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    })
}

/// The table vapcheck computes now, with a header line.
fn compute() -> String {
    with_backends(compute_with)
}

fn compute_with(backends: &Backends<'_>) -> String {
    let corpus = crate::support::shared_dir().join("corpus/policies");
    let mut out = String::from("policy\tfieldRef\tkind\tstrict\tclass\twhy\tfinding\n");
    for path in corpus_files(&corpus) {
        let rel = path
            .strip_prefix(&corpus)
            .expect("under corpus")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("corpus file");
        let policies = read_policies(&rel, &text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for p in policies {
            let status = check_policy(&p.policy, &CheckOptions::default(), backends);
            let name = p.policy.metadata.name.clone().unwrap_or_default();
            for f in &status.findings {
                out.push_str(&format!(
                    "{rel}#{name}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                    f.field_ref,
                    f.gvk,
                    if f.upstream {
                        "strict"
                    } else {
                        "extended-only"
                    },
                    f.class,
                    f.why,
                    clean(&f.message)
                ));
            }
        }
    }
    out
}

#[test]
fn extended_findings_match_the_reviewed_table() {
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extended-findings.tsv");
    let ours = compute();
    if crate::support::bless() {
        std::fs::write(&table, &ours).expect("write table");
    }
    let theirs = std::fs::read_to_string(&table).expect("tests/fixtures/extended-findings.tsv");
    for source in ["extended-only", "strict"] {
        let count = |class: FindingClass| {
            let c = format!("\t{source}\t{class}\t");
            ours.lines().filter(|l| l.contains(&c)).count()
        };
        println!(
            "{source} findings: {} fails at admission, {} static typing only, {} unreachable",
            count(FindingClass::FailsAtAdmission),
            count(FindingClass::StaticTypingOnly),
            count(FindingClass::Unreachable)
        );
    }
    if ours != theirs {
        let a: Vec<&str> = theirs.lines().collect();
        let b: Vec<&str> = ours.lines().collect();
        let missing: Vec<&&str> = a.iter().filter(|l| !b.contains(l)).take(20).collect();
        let extra: Vec<&&str> = b.iter().filter(|l| !a.contains(l)).take(20).collect();
        panic!(
            "classification differs from the table ({} vs {} rows)\nonly in the table:\n{}\nonly in vapcheck:\n{}",
            a.len(),
            b.len(),
            missing
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            extra
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
}

/// A policy on Pods and Deployments: kind-guarded branches are checked only for their kind,
/// the static-typing-only findings stay visible with their class, a typo still fails, and
/// strict mode says exactly what it said before.
#[test]
fn narrowing_and_classes_on_a_two_kind_policy() {
    let policy = |variables: serde_json::Value| -> ValidatingAdmissionPolicy {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "generation": 1},
            "spec": {
                "matchConstraints": {"resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                    {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                "variables": variables,
                "validations": [{"expression": "size(variables.containers) >= 0"}]
            }
        }))
        .expect("policy")
    };
    let guarded = policy(serde_json::json!([{"name": "containers", "expression":
        "object.kind == 'Pod' ? object.spec.containers : object.spec.template.spec.containers"}]));
    let concat = policy(serde_json::json!([{"name": "containers", "expression":
        "has(object.spec.template) ? object.spec.template.spec.containers + object.spec.template.spec.initContainers : []"}]));
    let typo = policy(serde_json::json!([{"name": "containers", "expression":
        "object.kind == 'Pod' ? object.spec.containrs : object.spec.template.spec.containers"}]));
    with_backends(|b| {
        let ext = |p: &ValidatingAdmissionPolicy| check_policy(p, &CheckOptions::default(), b);
        let valid = |s: &vapcheck::policy::PolicyStatus| {
            let c = s
                .conditions
                .iter()
                .find(|c| c.type_ == "ExpressionsValid")
                .expect("condition");
            (c.status.clone(), c.reason.clone(), c.message.clone())
        };

        let s = ext(&guarded);
        assert!(
            s.expression_warnings.is_empty(),
            "{:?}",
            s.expression_warnings
        );
        assert_eq!(valid(&s).0, "True");
        assert_eq!(
            s.findings
                .iter()
                .filter(|f| f.class == FindingClass::Unreachable)
                .count(),
            2,
            "{:?}",
            s.findings
        );

        let s = ext(&concat);
        let text: Vec<&str> = s
            .expression_warnings
            .iter()
            .map(|w| w.warning.as_str())
            .collect();
        // Pod: has() of a field it lacks is false (static typing only), and the branch it
        // guards is dropped; Deployment: the concatenation (static typing only).
        assert_eq!(text.len(), 1, "{text:?}");
        let blocks: Vec<&str> = text[0].split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{}", text[0]);
        assert!(
            blocks[0].starts_with("/v1, Kind=Pod: ERROR: <input>:1:4: undefined field 'template'"),
            "{}",
            text[0]
        );
        assert_eq!(blocks[0].matches("ERROR").count(), 1, "{}", text[0]);
        assert!(
            blocks[1].starts_with("apps/v1, Kind=Deployment: ERROR:"),
            "{}",
            text[0]
        );
        assert!(blocks[1].contains("'_+_'"), "{}", text[0]);
        // The typing finding is static typing only; the Deployment's template may omit
        // initContainers, which fails at run time (runtime safety, issue 31).
        assert_eq!(
            valid(&s),
            (
                "False".to_owned(),
                "ErrorsOnValidObjects".to_owned(),
                "1 expression with warnings, none failing at admission: spec.variables[0].expression (static typing only). 1 expression failing on valid objects: spec.variables[0].expression (no such key: initContainers): kube-apiserver denies such requests (failurePolicy Fail)".to_owned()
            )
        );

        let s = ext(&typo);
        let w = &s.expression_warnings[0].warning;
        assert!(w.starts_with("/v1, Kind=Pod: ERROR:"), "{w}");
        assert!(w.contains("undefined field 'containrs'"), "{w}");
        assert!(!w.contains("Kind=Deployment"), "{w}");
        assert_eq!(
            valid(&s),
            (
                "False".to_owned(),
                "ExpressionWarnings".to_owned(),
                "1 expression with warnings: spec.variables[0].expression".to_owned()
            )
        );

        // Strict mode checks no variables: nothing changes there.
        let strict = CheckOptions {
            mode: Mode::Strict,
            ..CheckOptions::default()
        };
        for p in [&guarded, &concat, &typo] {
            let s = check_policy(p, &strict, b);
            assert!(s.expression_warnings.is_empty());
            assert!(s.findings.is_empty());
        }
    });
}

/// Narrowing never touches upstream's text: on every corpus policy each strict warning is a
/// prefix of the extended warning of the same fieldRef.
#[test]
fn strict_text_stays_a_prefix_of_extended_text_on_the_corpus() {
    let corpus = crate::support::shared_dir().join("corpus/policies");
    with_backends(|b| {
        let strict = CheckOptions {
            mode: Mode::Strict,
            ..CheckOptions::default()
        };
        let mut entries = 0;
        for path in corpus_files(&corpus) {
            let text = std::fs::read_to_string(&path).expect("corpus file");
            let rel = path.display().to_string();
            let policies = read_policies(&rel, &text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            for p in policies {
                let s = check_policy(&p.policy, &strict, b);
                let x = check_policy(&p.policy, &CheckOptions::default(), b);
                entries += s.expression_warnings.len();
                if let Err(e) =
                    extended_keeps_strict(&s.expression_warnings, &x.expression_warnings)
                {
                    panic!("{rel}: {e}");
                }
            }
        }
        assert!(
            entries > 100,
            "only {entries} strict warnings on the corpus"
        );
    });
}

/// A variable is evaluated only where it is used: a variable used only under
/// `object.kind == 'Deployment'` is not evaluated for Pods, so its `undefined field` on a Pod is
/// unreachable; used once more without a guard, it is reachable again (and fails).
#[test]
fn variables_are_narrowed_by_the_guards_of_their_uses() {
    let policy = |validations: serde_json::Value| -> ValidatingAdmissionPolicy {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "generation": 1},
            "spec": {
                "matchConstraints": {"resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                    {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                "variables": [{"name": "tpl", "expression": "object.spec.template.spec.containers"}],
                "validations": validations
            }
        }))
        .expect("policy")
    };
    let guarded = policy(serde_json::json!([
        {"expression": "object.kind != 'Deployment' || size(variables.tpl) > 0"},
        {"expression": "object.kind == 'Deployment' ? true : true",
         "messageExpression": "object.kind == 'Deployment' ? string(size(variables.tpl)) : 'x'"}
    ]));
    let unguarded = policy(serde_json::json!([
        {"expression": "object.kind != 'Deployment' || size(variables.tpl) > 0"},
        {"expression": "size(variables.tpl) >= 0"}
    ]));
    with_backends(|b| {
        let class_of_variable = |p: &ValidatingAdmissionPolicy| {
            let s = check_policy(p, &CheckOptions::default(), b);
            s.findings
                .iter()
                .filter(|f| f.field_ref == "spec.variables[0].expression" && f.gvk.kind == "Pod")
                .map(|f| f.class)
                .collect::<Vec<_>>()
        };
        assert_eq!(class_of_variable(&guarded), vec![FindingClass::Unreachable]);
        assert_eq!(
            class_of_variable(&unguarded),
            vec![FindingClass::FailsAtAdmission]
        );
    });
}

/// The guard forms added last (issue 14): optional chains (`hasValue()`, `orValue(<bool>)`),
/// map-key tests (`'k' in object.spec`), required fields of `oldObject`, and the same as
/// matchConditions, checked by the real checker for Pods and Deployments; a presence test of
/// a field no matched kind has (a typo) stays a failure.
#[test]
fn optional_chains_key_tests_and_old_object_guards() {
    use FindingClass::{FailsAtAdmission as Fail, StaticTypingOnly as Static, Unreachable};
    let policy = |conditions: serde_json::Value, expression: &str| -> ValidatingAdmissionPolicy {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "generation": 1},
            "spec": {
                "matchConstraints": {"resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                    {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                "matchConditions": conditions,
                "validations": [{"expression": expression}]
            }
        }))
        .expect("policy")
    };
    let none = serde_json::json!([]);
    let template = "undefined field 'template'";
    // (matchConditions, validation, Pod findings, Deployment findings): (class, message
    // without its position) of every finding, sorted; `@in` stands for the overload message.
    type Expected<'a> = &'a [(FindingClass, &'a str)];
    let cases: &[(serde_json::Value, &str, Expected<'_>, Expected<'_>)] = &[
        (
            none.clone(),
            "object.?spec.template.hasValue() ? object.spec.template.spec.containers.size() > 0 : true",
            &[(Static, template), (Unreachable, template)],
            &[],
        ),
        (
            none.clone(),
            "!object.?spec.?template.hasValue() || object.spec.template.metadata.name != ''",
            &[(Static, template), (Unreachable, template)],
            &[],
        ),
        (
            none.clone(),
            "object.?spec.paused.orValue(false) ? object.spec.template.metadata.name != '' : true",
            &[
                (Static, "undefined field 'paused'"),
                (Unreachable, template),
            ],
            &[],
        ),
        (
            none.clone(),
            "'template' in object.spec ? object.spec.template.metadata.name != '' : true",
            &[(Static, "@in"), (Unreachable, template)],
            &[(Static, "@in")],
        ),
        (
            none.clone(),
            "!('template' in object.spec) ? object.spec.containers.size() > 0 : true",
            &[(Static, "@in")],
            &[
                (Static, "@in"),
                (Unreachable, "undefined field 'containers'"),
            ],
        ),
        (
            none.clone(),
            "!has(oldObject.spec.template) ? oldObject.spec.containers.size() > 0 : true",
            &[(Static, template)],
            &[(Unreachable, "undefined field 'containers'")],
        ),
        // Typos: no matched kind has the field.
        (
            none.clone(),
            "object.?spec.containrs.orValue([]).size() >= 0",
            &[(Fail, "undefined field 'containrs'")],
            &[(Fail, "undefined field 'containrs'")],
        ),
        (
            none.clone(),
            "!has(object.spec.containrs)",
            &[(Fail, "undefined field 'containrs'")],
            &[(Fail, "undefined field 'containrs'")],
        ),
        // The same guards as matchConditions: the validation is not evaluated for Pods.
        (
            serde_json::json!([{"name": "t", "expression": "object.?spec.template.hasValue()"}]),
            "object.spec.template.metadata.name != ''",
            &[(Unreachable, template)],
            &[],
        ),
        (
            serde_json::json!([{"name": "t", "expression": "'template' in object.spec"}]),
            "object.spec.template.metadata.name != ''",
            &[(Unreachable, template)],
            &[],
        ),
    ];
    with_backends(|b| {
        for (conditions, expression, pod, deployment) in cases {
            let s = check_policy(
                &policy(conditions.clone(), expression),
                &CheckOptions::default(),
                b,
            );
            let got = |kind: &str| {
                let mut v: Vec<(FindingClass, String)> = s
                    .findings
                    .iter()
                    .filter(|f| {
                        f.field_ref == "spec.validations[0].expression" && f.gvk.kind == kind
                    })
                    .map(|f| {
                        let rest = f.message.splitn(3, ": ").nth(2).unwrap_or_default();
                        let rest = if rest.starts_with("found no matching overload for '@in'") {
                            "@in"
                        } else {
                            rest
                        };
                        (f.class, rest.to_owned())
                    })
                    .collect();
                v.sort();
                v
            };
            let want = |e: Expected<'_>| {
                let mut v: Vec<(FindingClass, String)> =
                    e.iter().map(|(c, m)| (*c, (*m).to_owned())).collect();
                v.sort();
                v
            };
            assert_eq!(got("Pod"), want(pod), "Pod: {expression}");
            assert_eq!(
                got("Deployment"),
                want(deployment),
                "Deployment: {expression}"
            );
            let valid = s
                .conditions
                .iter()
                .find(|c| c.type_ == "ExpressionsValid")
                .expect("condition");
            // Runtime-safety findings (absent fields) make the condition False too.
            let fails = pod.iter().chain(deployment.iter()).any(|(c, _)| *c == Fail)
                || !s.runtime.is_empty();
            assert_eq!(
                valid.status,
                if fails { "False" } else { "True" },
                "{expression}"
            );
        }
    });
}
