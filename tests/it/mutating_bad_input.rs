//! Malformed MutatingAdmissionPolicies never make vapcheck panic: documents with missing or
//! mistyped fields are input errors or checked, and absurd expressions (random text around
//! `Object…{}` and `JSONPatch{}` literals, deep nesting, odd JSON Pointers) are checked in
//! both modes against the built-in Kubernetes 1.37 kinds.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_all;
use vapcheck::cli::mutating::{policies, read};
use vapcheck::mutating::check_mutating_policy;
use vapcheck::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode};

fn with_backends(f: impl FnOnce(&Backends<'_>)) {
    // One folder per call: the tests of this file run in parallel threads of one process.
    let tmp = tempfile::tempdir().expect("temporary folder");
    let dir = tmp.path().to_path_buf();
    vapcheck::schema::embedded::write_folder("1.37", &dir).expect("built-in schemas");
    let options = SchemaOptions {
        openapi: Some(dir.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&dir), None, &[]).expect("discovery"));
    f(&Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    });
}

/// Reads `text` as the CLI does and checks every MAP in both modes. Returns how many MAPs
/// were checked, or the input error.
fn read_and_check(backends: &Backends<'_>, text: &str) -> Result<usize, String> {
    let (_, others) = read_all("bad.yaml", text).map_err(|e| e.to_string())?;
    let objects = read(&others).map_err(|e| e.to_string())?;
    let maps: Vec<_> = policies(&objects).map(|(_, p)| p).collect();
    for policy in &maps {
        for mode in [Mode::Strict, Mode::Extended] {
            let options = CheckOptions {
                mode,
                ..CheckOptions::default()
            };
            let status = check_mutating_policy(policy, &options, backends);
            // Every finding is rendered for a fieldRef of the policy.
            for w in &status.expression_warnings {
                assert!(w.field_ref.starts_with("spec."), "{}", w.field_ref);
            }
        }
    }
    Ok(maps.len())
}

fn map_with(mutation: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata:\n  name: bad\nspec:\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\", \"apps\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\"]\n      resources: [\"pods\", \"deployments\", \"configmaps\"]\n  mutations:\n{mutation}"
    )
}

fn yaml_quote(expr: &str) -> String {
    serde_json::to_string(expr).expect("json string")
}

#[test]
fn malformed_documents_are_input_errors_or_checked() {
    with_backends(|b| {
        let header = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n";
        let cases: &[(&str, bool)] = &[
            ("metadata: {name: a}\n", true),
            ("metadata: {name: a}\nspec: {}\n", true),
            ("metadata: {name: a}\nspec: null\n", true),
            ("metadata: {name: a}\nspec: 3\n", false),
            ("metadata: {name: a}\nspec: {mutations: {}}\n", false),
            // k8s-openapi reads a missing `patchType` as ""; no mutation is compiled for it
            // (compilation.go compilePolicy), and create-time validation is not computed here.
            ("metadata: {name: a}\nspec: {mutations: [{}]}\n", true),
            (
                "metadata: {name: a}\nspec: {mutations: [{patchType: JSONPatch}]}\n",
                true,
            ),
            (
                "metadata: {name: a}\nspec: {mutations: [{patchType: JSONPatch, jsonPatch: {}}]}\n",
                true,
            ),
            (
                "metadata: {name: a}\nspec: {mutations: [{patchType: ApplyConfiguration, applyConfiguration: {expression: 3}}]}\n",
                false,
            ),
            (
                "metadata: {name: a}\nspec: {mutations: [{patchType: ApplyConfiguration, jsonPatch: {expression: '[]'}}]}\n",
                true,
            ),
            (
                "metadata: {name: a}\nspec: {matchConstraints: {resourceRules: [{}]}, mutations: []}\n",
                true,
            ),
            (
                "metadata: {name: a}\nspec: {matchConstraints: {resourceRules: 'x'}}\n",
                false,
            ),
            // a missing expression is read as "" (a parse error per kind when checked)
            (
                "metadata: {name: a}\nspec: {variables: [{name: v}]}\n",
                true,
            ),
            (
                "metadata: {name: a}\nspec: {variables: [{name: 1, expression: 2}]}\n",
                false,
            ),
            ("metadata: {name: a}\nspec: {paramKind: {}}\n", true),
            ("metadata: 7\n", false),
        ];
        let mut wrong = Vec::new();
        for (body, ok) in cases {
            let text = format!("{header}{body}");
            let r = read_and_check(b, &text);
            if r.is_ok() != *ok {
                wrong.push(format!("{body}: {r:?}"));
            }
            if let Err(e) = r {
                assert!(e.contains("invalid MutatingAdmissionPolicy"), "{e}");
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    });
}

#[test]
fn absurd_expressions_never_panic() {
    with_backends(|b| {
        let mut fixed = vec![
            "Object{".repeat(300),
            format!("{}{}", "Object.spec{a: ".repeat(120), "}".repeat(120)),
            format!("[{}]", "JSONPatch{op: 'add', path: '/'},".repeat(200)),
            "[JSONPatch{op: 'add', path: '/~', value: 1}, JSONPatch{op: 'add', path: '/spec/containers/-/-/-', value: [[[]]]}]".into(),
            "[JSONPatch{op: 'add', path: '//////', value: {'': {'': ''}}}]".into(),
            "[JSONPatch{op: 'test', path: '/metadata/labels/\u{1F600}~2', value: Object.x{}}]".into(),
            "Object{spec: Object.spec{containers: [[Object.spec.containers{}]], volumes: {1: 2}}}".into(),
            "Object{metadata: {'labels': {'a': {'b': 1}}}}".into(),
            "Object.{}".into(),
            "[JSONPatch{op: 'add', path: '/spec' + '/x' + '/y', value: null}]".into(),
            "[JSONPatch{?op: optional.of('add'), path: '/spec'}]".into(),
        ];
        fixed.push(format!("[{}]", "[".repeat(100)));
        for expr in &fixed {
            for kind in ["applyConfiguration", "jsonPatch"] {
                let patch_type = if kind == "jsonPatch" {
                    "JSONPatch"
                } else {
                    "ApplyConfiguration"
                };
                let text = map_with(&format!(
                    "  - patchType: {patch_type}\n    {kind}:\n      expression: {}\n",
                    yaml_quote(expr)
                ));
                assert_eq!(read_and_check(b, &text), Ok(1), "{expr}");
            }
        }
        let pieces = prop::sample::select(vec![
            "Object",
            "Object.spec",
            "Object.spec.containers",
            "Object.metadata",
            "JSONPatch",
            "{",
            "}",
            "[",
            "]",
            "(",
            ")",
            ":",
            ",",
            "'add'",
            "'remove'",
            "'/spec/containers/-'",
            "'/metadata/labels/a~1b'",
            "'~'",
            "op",
            "path",
            "value",
            "from",
            "spec",
            "replicas",
            "containers",
            "name",
            "labels",
            "1",
            "'x'",
            "null",
            "true",
            "+",
            "?",
            ".",
            " ",
            "object.spec",
            "jsonpatch.escapeKey('k')",
            "variables.v",
            "params",
        ]);
        let exprs = prop::collection::vec(pieces, 0..40).prop_map(|v| v.concat());
        let mut runner = TestRunner::new(Config {
            cases: 300,
            ..Config::default()
        });
        runner
            .run(&exprs, |expr| {
                for (patch_type, kind) in [
                    ("ApplyConfiguration", "applyConfiguration"),
                    ("JSONPatch", "jsonPatch"),
                ] {
                    let text = map_with(&format!(
                        "  - patchType: {patch_type}\n    {kind}:\n      expression: {}\n",
                        yaml_quote(&expr)
                    ));
                    prop_assert_eq!(read_and_check(b, &text), Ok(1));
                }
                Ok(())
            })
            .expect("no panic, every MAP checked");
    });
}
