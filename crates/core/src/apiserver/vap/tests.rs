use super::*;
use crate::apiserver::{validate_policy_create, validate_policy_update};

fn policy(yaml: &str) -> ValidatingAdmissionPolicy {
    serde_saphyr::from_str(yaml).expect("test policy parses")
}

fn causes(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

const BASE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: EXPR
"#;

fn with_expr(e: &str) -> ValidatingAdmissionPolicy {
    policy(&BASE.replace("EXPR", &format!("{e:?}")))
}

#[test]
fn accepted_and_result_types() {
    assert!(
        validate_policy_create(&with_expr("object.spec.replicas > 1"), Server::PINNED).is_empty()
    );
    assert_eq!(
        causes(&validate_policy_create(&with_expr("0"), Server::PINNED)),
        [
            r#"spec.validations[0].expression: Invalid value: "0": must evaluate to bool but got int"#
        ]
    );
    assert_eq!(
        causes(&validate_policy_create(
            &with_expr("object.spec"),
            Server::PINNED
        )),
        [
            r#"spec.validations[0].expression: Invalid value: "object.spec": must evaluate to bool but got dyn"#
        ]
    );
}

#[test]
fn compile_errors_are_multi_line() {
    let c = causes(&validate_policy_create(
        &with_expr("request.uid == ''"),
        Server::PINNED,
    ));
    assert_eq!(
        c,
        [
            "spec.validations[0].expression: Invalid value: \"request.uid == ''\": compilation failed: ERROR: <input>:1:8: undefined field 'uid'\n | request.uid == ''\n | .......^"
        ]
    );
    let c = causes(&validate_policy_create(
        &with_expr("params.max > 1"),
        Server::PINNED,
    ));
    assert!(c[0].contains("undeclared reference to 'params'"), "{c:?}");
}

#[test]
fn defaults_then_enums() {
    let mut p = with_expr("true");
    p.spec.as_mut().unwrap().failure_policy = Some("Bogus".into());
    assert_eq!(
        causes(&validate_policy_create(&p, Server::PINNED)),
        [r#"spec.failurePolicy: Unsupported value: "Bogus": supported values: "Fail", "Ignore""#]
    );
}

#[test]
fn stored_expressions_on_update() {
    let p = with_expr("[1, 2].includes(1)");
    let create = validate_policy_create(&p, Server::PINNED);
    assert_eq!(create.len(), 1, "{create:?}");
    assert!(validate_policy_update(&p, &p, Server::PINNED).is_empty());
}

#[test]
fn static_suffix_only_on_create() {
    let mut p = with_expr("true");
    p.metadata.name = Some("x.static.k8s.io".into());
    assert_eq!(validate_policy_create(&p, Server::PINNED).len(), 1);
    assert!(validate_policy_update(&p, &p, Server::PINNED).is_empty());
}
