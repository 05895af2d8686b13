//! Runtime safety (issue 31) through the binary: the class cases of
//! `e2e/fixtures/runtime-safety-cases.yaml` (replayed on the real API server by
//! `e2e_runtime_safety`) get their exact findings, strict mode gets none, and applying the
//! SARIF `fixes` to the file removes every finding.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
}

fn cases() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/fixtures/runtime-safety-cases.yaml")
}

/// `(policy, fieldRef, access)` of every runtime finding of `file`.
fn runtime(file: &std::path::Path, mode: &str) -> Vec<(String, String, String)> {
    let o = binary()
        .args(["check", "-o", "json", "--mode", mode])
        .arg(file)
        .output()
        .expect("runs");
    let v: Vec<Value> = serde_json::from_slice(&o.stdout).expect("JSON");
    let mut out = Vec::new();
    for e in &v {
        for f in e["status"]["runtime"].as_array().into_iter().flatten() {
            out.push((
                e["name"].as_str().unwrap_or_default().to_owned(),
                f["fieldRef"].as_str().unwrap_or_default().to_owned(),
                f["access"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    out
}

/// `(policy, fieldRef, access, class, binding, param)` of every runtime finding of `file`.
fn runtime_with_bindings(file: &std::path::Path, mode: &str) -> Vec<[String; 6]> {
    let o = binary()
        .args(["check", "-o", "json", "--mode", mode])
        .arg(file)
        .output()
        .expect("runs");
    let v: Vec<Value> = serde_json::from_slice(&o.stdout).expect("JSON");
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for e in &v {
        for f in e["status"]["runtime"].as_array().into_iter().flatten() {
            out.push([
                s(&e["name"]),
                s(&f["fieldRef"]),
                s(&f["access"]),
                s(&f["class"]),
                s(&f["binding"]),
                s(&f["param"]),
            ]);
        }
    }
    out
}

/// `e2e/fixtures/runtime-safety-params.yaml`: null params (a binding without paramRef) and a
/// param ConfigMap without the key or without `data` get exactly their findings, each naming
/// its binding (and param); `rs-guarded-params` (has(), `in`, `.?` with `orValue`, `?:`, a
/// matchCondition `params != null`, and an `&&` whose other side cannot be decided) gets
/// none; strict mode none at all.
#[test]
fn the_params_cases_get_exactly_their_findings() {
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e/fixtures/runtime-safety-params.yaml");
    let got = runtime_with_bindings(&file, "extended");
    let row = |p: &str, a: &str, c: &str, b: &str, param: &str| {
        [p, "spec.validations[0].expression", a, c, b, param].map(str::to_owned)
    };
    let want = vec![
        row(
            "rs-params-null",
            "params.data",
            "nullParams",
            "rs-params-null-binding",
            "",
        ),
        row(
            "rs-params-absent",
            "params.data.forbiddenName",
            "absentParamField",
            "rs-params-absent-key",
            "rs-params/rs-limits",
        ),
        row(
            "rs-params-absent",
            "params.data",
            "absentParamField",
            "rs-params-absent-data",
            "rs-params/rs-empty",
        ),
    ];
    assert_eq!(got, want);
    assert!(runtime_with_bindings(&file, "strict").is_empty());
}

#[test]
fn the_class_cases_get_exactly_their_findings() {
    let got = runtime(&cases(), "extended");
    let want = [
        (
            "rs-absent-field",
            "spec.validations[0].expression",
            "object.spec.securityContext.runAsNonRoot",
        ),
        (
            "rs-absent-field",
            "spec.validations[1].expression",
            "c.securityContext",
        ),
        (
            "rs-absent-key",
            "spec.validations[0].expression",
            "object.metadata.labels['team']",
        ),
        (
            "rs-absent-key",
            "spec.validations[1].expression",
            "object.data",
        ),
        (
            "rs-null-object",
            "spec.validations[0].expression",
            "object.metadata",
        ),
        (
            "rs-null-old-object",
            "spec.validations[0].expression",
            "oldObject.metadata",
        ),
        (
            "rs-match-condition",
            "spec.matchConditions[0].expression",
            "object.metadata.labels",
        ),
        (
            "rs-match-condition",
            "spec.matchConditions[0].expression",
            "object.metadata.labels['color']",
        ),
        (
            "rs-variable",
            "spec.variables[0].expression",
            "object.spec.activeDeadlineSeconds",
        ),
        (
            "rs-old-object-field",
            "spec.validations[0].expression",
            "oldObject.automountServiceAccountToken",
        ),
        (
            "rs-old-object-field",
            "spec.validations[0].expression",
            "object.automountServiceAccountToken",
        ),
        (
            "rs-message-expression",
            "spec.validations[0].messageExpression",
            "object.metadata.labels",
        ),
        (
            "rs-message-expression",
            "spec.validations[0].messageExpression",
            "object.metadata.labels['team']",
        ),
        (
            "rs-message-expression-no-message",
            "spec.validations[0].messageExpression",
            "object.automountServiceAccountToken",
        ),
        (
            "rs-namespace-object",
            "spec.validations[0].expression",
            "namespaceObject.metadata",
        ),
        (
            "rs-audit-annotation",
            "spec.auditAnnotations[0].valueExpression",
            "object.spec.activeDeadlineSeconds",
        ),
        (
            "rs-namespace-label",
            "spec.validations[0].expression",
            "namespaceObject.metadata.labels['env']",
        ),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(got, want);
    // Strict mode is kube-controller-manager's output: no runtime findings.
    assert_eq!(runtime(&cases(), "strict"), Vec::new());
}

#[test]
fn applying_the_sarif_fixes_removes_every_finding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cases.yaml");
    std::fs::copy(cases(), &file).expect("copy");
    let o = binary()
        .args(["check", "-o", "sarif"])
        .arg(&file)
        .output()
        .expect("runs");
    let sarif: Value = serde_json::from_slice(&o.stdout).expect("SARIF");
    // (line, start column, end column, text), one per distinct replacement.
    let mut edits: Vec<(usize, usize, usize, String)> = Vec::new();
    let mut results = 0;
    for r in sarif["runs"][0]["results"].as_array().into_iter().flatten() {
        if r["ruleId"] != "VAP110" {
            continue;
        }
        results += 1;
        let rep = &r["fixes"][0]["artifactChanges"][0]["replacements"][0];
        let region = &rep["deletedRegion"];
        assert_eq!(region["startLine"], region["endLine"], "{r}");
        let e = (
            region["startLine"].as_u64().expect("line") as usize,
            region["startColumn"].as_u64().expect("column") as usize,
            region["endColumn"].as_u64().expect("column") as usize,
            rep["insertedContent"]["text"]
                .as_str()
                .expect("text")
                .to_owned(),
        );
        if !edits.contains(&e) {
            edits.push(e);
        }
    }
    assert_eq!(results, 17);
    assert_eq!(edits.len(), 15, "{edits:?}");
    let text = std::fs::read_to_string(&file).expect("read");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // From the end of each line, so that earlier columns stay valid.
    edits.sort_by_key(|e| std::cmp::Reverse((e.0, e.1)));
    for (line, start, end, new) in &edits {
        let l = &mut lines[line - 1];
        let chars: Vec<char> = l.chars().collect();
        let before: String = chars[..start - 1].iter().collect();
        let after: String = chars[end - 1..].iter().collect();
        *l = format!("{before}{new}{after}");
    }
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    assert_eq!(runtime(&file, "extended"), Vec::new());
}

/// The built-in schemas of the pinned release (the witnesses exist for it only), written to a
/// temporary folder, as the offline backends `vapcheck check` uses by default.
fn with_pinned_backends<T>(f: impl FnOnce(&vapcheck::policy::Backends<'_>) -> T) -> T {
    use vapcheck::cli::SchemaOptions;
    use vapcheck::cli::discovery::offline_discovery;
    use vapcheck::policy::{Backends, DiscoveryRestMapper};
    let dir = tempfile::tempdir().expect("tempdir");
    vapcheck::schema::embedded::write_folder("1.37", dir.path()).expect("built-in schemas");
    let options = SchemaOptions {
        openapi: Some(dir.path().to_path_buf()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper = DiscoveryRestMapper::new(
        offline_discovery(Some(dir.path()), None, &[]).expect("discovery"),
    );
    f(&Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    })
}

/// Where the expression under test sits in the policy.
#[derive(Clone, Copy, Debug)]
enum SiteKind {
    Validation,
    Variable,
    MatchCondition,
    MessageExpression,
    AuditAnnotation,
}

/// One row of the guard table: the expression with its guards (`guard_condition`: a
/// matchCondition placed before the site), and variants with one guard taken away, each with
/// the one finding it must get (`(access, class)`).
struct Row {
    form: &'static str,
    operations: &'static [&'static str],
    guard_condition: Option<&'static str>,
    guarded: &'static str,
    unguarded: &'static [(
        Option<&'static str>,
        &'static str,
        &'static str,
        &'static str,
    )],
}

/// A Pod policy (its objectSelector makes the witness carry `app: web`) with `expression` at
/// `kind`, after the matchCondition `condition` when given.
fn table_policy(
    kind: SiteKind,
    operations: &[&str],
    condition: Option<&str>,
    expression: &str,
) -> k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy {
    let mut conditions: Vec<Value> = condition
        .map(|c| serde_json::json!({"name": "guard", "expression": c}))
        .into_iter()
        .collect();
    let mut variables = Vec::new();
    let mut annotations = Vec::new();
    let validation = match kind {
        SiteKind::Validation => serde_json::json!({"expression": expression}),
        SiteKind::Variable => {
            variables.push(serde_json::json!({"name": "v", "expression": expression}));
            serde_json::json!({"expression": "variables.v"})
        }
        SiteKind::MatchCondition => {
            conditions.push(serde_json::json!({"name": "site", "expression": expression}));
            serde_json::json!({"expression": "true"})
        }
        SiteKind::MessageExpression => serde_json::json!({
            "expression": "false",
            "messageExpression": format!("'value: ' + string({expression})"),
        }),
        SiteKind::AuditAnnotation => {
            annotations.push(serde_json::json!({
                "key": "value",
                "valueExpression": format!("string({expression})"),
            }));
            serde_json::json!({"expression": "true"})
        }
    };
    let v = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "rs-table"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "objectSelector": {"matchLabels": {"app": "web"}},
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": operations, "resources": ["pods"],
                }],
            },
            "matchConditions": conditions,
            "variables": variables,
            "validations": [validation],
            "auditAnnotations": annotations,
        },
    });
    serde_json::from_value(v).expect("a policy")
}

/// Each guard form alone and combined, at each kind of site (a validation, a variable, a
/// matchCondition, a messageExpression, an auditAnnotation), through `check_policy` in
/// extended mode: the guarded expression gets no runtime finding, and each variant with one
/// guard taken away exactly the one finding of what that guard protected.
#[test]
fn guard_forms_alone_and_combined_at_every_site_kind() {
    const AD: &str = "object.spec.activeDeadlineSeconds > 0";
    const AD_ACCESS: &str = "object.spec.activeDeadlineSeconds";
    const TEAM: &str = "object.metadata.labels['team'] == 'a'";
    const TEAM_ACCESS: &str = "object.metadata.labels['team']";
    const NAME: &str = "object.metadata.name != ''";
    const CONTAINERS: &str = "object.spec.containers.all(c, c.securityContext.privileged == false)";
    const CREATE: &[&str] = &["CREATE"];
    const CREATE_DELETE: &[&str] = &["CREATE", "DELETE"];
    let rows = [
        Row {
            form: "has()",
            operations: CREATE,
            guard_condition: None,
            guarded: "has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds > 0",
            unguarded: &[(None, AD, AD_ACCESS, "AbsentField")],
        },
        Row {
            form: "in",
            operations: CREATE,
            guard_condition: None,
            guarded: "'team' in object.metadata.labels && object.metadata.labels['team'] == 'a'",
            unguarded: &[(None, TEAM, TEAM_ACCESS, "AbsentKey")],
        },
        Row {
            form: ".?f.orValue()",
            operations: CREATE,
            guarded: "object.spec.?activeDeadlineSeconds.orValue(0) > 0",
            guard_condition: None,
            unguarded: &[(None, AD, AD_ACCESS, "AbsentField")],
        },
        Row {
            form: "[?k].orValue()",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.metadata.labels[?'team'].orValue('') == 'a'",
            unguarded: &[(None, TEAM, TEAM_ACCESS, "AbsentKey")],
        },
        Row {
            form: ".?f.hasValue()",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.spec.?activeDeadlineSeconds.hasValue() && object.spec.activeDeadlineSeconds > 0",
            unguarded: &[(None, AD, AD_ACCESS, "AbsentField")],
        },
        Row {
            form: "?:",
            operations: CREATE,
            guard_condition: None,
            guarded: "has(object.spec.activeDeadlineSeconds) ? object.spec.activeDeadlineSeconds > 0 : true",
            unguarded: &[(
                None,
                "object.metadata.name != '' ? object.spec.activeDeadlineSeconds > 0 : true",
                AD_ACCESS,
                "AbsentField",
            )],
        },
        Row {
            form: "&& short-circuit",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.metadata.name == 'never' && object.spec.activeDeadlineSeconds > 0",
            unguarded: &[(
                None,
                "object.metadata.name != 'never' && object.spec.activeDeadlineSeconds > 0",
                AD_ACCESS,
                "AbsentField",
            )],
        },
        Row {
            form: "|| short-circuit",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.metadata.name != 'never' || object.spec.activeDeadlineSeconds > 0",
            unguarded: &[(
                None,
                "object.metadata.name == 'never' || object.spec.activeDeadlineSeconds > 0",
                AD_ACCESS,
                "AbsentField",
            )],
        },
        Row {
            form: "matchCondition",
            operations: CREATE,
            guard_condition: Some("has(object.spec.activeDeadlineSeconds)"),
            guarded: AD,
            unguarded: &[(Some("true"), AD, AD_ACCESS, "AbsentField")],
        },
        Row {
            form: "comprehension over its container",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.spec.containers.all(c, has(c.securityContext) && c.securityContext.privileged == false)",
            unguarded: &[(None, CONTAINERS, "c.securityContext", "AbsentField")],
        },
        Row {
            form: "request.operation",
            operations: CREATE_DELETE,
            guard_condition: None,
            guarded: "request.operation != 'DELETE' && object.metadata.name != ''",
            unguarded: &[(None, NAME, "object.metadata", "NullRoot")],
        },
        Row {
            form: "object != null",
            operations: CREATE_DELETE,
            guard_condition: None,
            guarded: "object != null && object.metadata.name != ''",
            unguarded: &[(None, NAME, "object.metadata", "NullRoot")],
        },
        Row {
            form: "has() and in, under ||",
            operations: CREATE,
            guard_condition: None,
            guarded: "has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds > 0 || 'team' in object.metadata.labels && object.metadata.labels['team'] == 'a'",
            unguarded: &[
                (
                    None,
                    "object.spec.activeDeadlineSeconds > 0 || 'team' in object.metadata.labels && object.metadata.labels['team'] == 'a'",
                    AD_ACCESS,
                    "AbsentField",
                ),
                (
                    None,
                    "has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds > 0 || object.metadata.labels['team'] == 'a'",
                    TEAM_ACCESS,
                    "AbsentKey",
                ),
            ],
        },
        Row {
            form: "?: on request.operation",
            operations: CREATE_DELETE,
            guard_condition: None,
            guarded: "request.operation == 'DELETE' ? true : object.metadata.name != ''",
            unguarded: &[(None, NAME, "object.metadata", "NullRoot")],
        },
        Row {
            form: "object != null and .?f.orValue()",
            operations: CREATE_DELETE,
            guard_condition: None,
            guarded: "object != null && object.spec.?activeDeadlineSeconds.orValue(0) > 0",
            unguarded: &[
                (
                    None,
                    "object.spec.?activeDeadlineSeconds.orValue(0) > 0",
                    "object.spec",
                    "NullRoot",
                ),
                (
                    None,
                    "object != null && object.spec.activeDeadlineSeconds > 0",
                    AD_ACCESS,
                    "AbsentField",
                ),
            ],
        },
        Row {
            form: "matchCondition on the operation and .?f.orValue()",
            operations: CREATE_DELETE,
            guard_condition: Some("request.operation != 'DELETE'"),
            guarded: "object.spec.?activeDeadlineSeconds.orValue(0) > 0",
            unguarded: &[
                (
                    Some("true"),
                    "object.spec.?activeDeadlineSeconds.orValue(0) > 0",
                    "object.spec",
                    "NullRoot",
                ),
                (
                    Some("request.operation != 'DELETE'"),
                    AD,
                    AD_ACCESS,
                    "AbsentField",
                ),
            ],
        },
        Row {
            form: "comprehension and || short-circuit",
            operations: CREATE,
            guard_condition: None,
            guarded: "object.metadata.name == 'never' || object.spec.containers.all(c, !has(c.securityContext) || c.securityContext.privileged == false)",
            unguarded: &[(
                None,
                "object.metadata.name == 'never' || object.spec.containers.all(c, c.securityContext.privileged == false)",
                "c.securityContext",
                "AbsentField",
            )],
        },
    ];
    let kinds = [
        SiteKind::Validation,
        SiteKind::Variable,
        SiteKind::MatchCondition,
        SiteKind::MessageExpression,
        SiteKind::AuditAnnotation,
    ];
    let options = vapcheck::policy::CheckOptions {
        mode: vapcheck::policy::Mode::Extended,
        ..vapcheck::policy::CheckOptions::default()
    };
    let (mut guarded_checked, mut unguarded_checked) = (0, 0);
    with_pinned_backends(|backends| {
        for kind in kinds {
            for row in &rows {
                let p = table_policy(kind, row.operations, row.guard_condition, row.guarded);
                let status = vapcheck::policy::check_policy(&p, &options, backends);
                let got: Vec<(&str, &str)> = status
                    .runtime
                    .iter()
                    .map(|f| (f.field_ref.as_str(), f.access.as_str()))
                    .collect();
                assert_eq!(got, Vec::new(), "{kind:?}, {}: guarded", row.form);
                guarded_checked += 1;
                for (condition, expression, access, class) in row.unguarded {
                    let p = table_policy(kind, row.operations, *condition, expression);
                    let status = vapcheck::policy::check_policy(&p, &options, backends);
                    let got: Vec<(String, String, String)> = status
                        .runtime
                        .iter()
                        .map(|f| {
                            (
                                f.field_ref.clone(),
                                f.access.clone(),
                                format!("{:?}", f.class),
                            )
                        })
                        .collect();
                    let conditions = usize::from(condition.is_some());
                    let field_ref = match kind {
                        SiteKind::Validation => "spec.validations[0].expression".to_owned(),
                        SiteKind::Variable => "spec.variables[0].expression".to_owned(),
                        SiteKind::MatchCondition => {
                            format!("spec.matchConditions[{conditions}].expression")
                        }
                        SiteKind::MessageExpression => {
                            "spec.validations[0].messageExpression".to_owned()
                        }
                        SiteKind::AuditAnnotation => {
                            "spec.auditAnnotations[0].valueExpression".to_owned()
                        }
                    };
                    assert_eq!(
                        got,
                        vec![(field_ref, access.to_string(), class.to_string())],
                        "{kind:?}, {}: without one guard: {expression}",
                        row.form
                    );
                    unguarded_checked += 1;
                }
            }
        }
    });
    assert_eq!((guarded_checked, unguarded_checked), (5 * 17, 5 * 20));
}
