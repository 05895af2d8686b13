use serde_json::json;

use super::*;

fn policy(kind: &str, spec: serde_json::Value) -> ValidatingPolicy {
    read_validating_policy(&json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": kind,
        "metadata": {"name": "p"},
        "spec": spec,
    }))
    .unwrap()
}

fn rules() -> serde_json::Value {
    json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]})
}

#[test]
fn accepted_and_refused_results() {
    let ok = policy(
        "ValidatingPolicy",
        json!({"matchConstraints": rules(), "validations": [{"expression": "object.spec.x == 1"}]}),
    );
    assert_eq!(validate(&ok), Vec::<String>::new());
    // `dyn` is not bool: Kyverno checks the output type exactly.
    let dyn_result = policy(
        "ValidatingPolicy",
        json!({"matchConstraints": rules(), "validations": [{"expression": "object.spec.x"}]}),
    );
    assert_eq!(
        validate(&dyn_result),
        vec![
            COMPILE_PLACEHOLDER.to_owned(),
            r#"spec.validations[0].expression: Invalid value: "object.spec.x": output is expected to be of type bool"#.to_owned(),
        ]
    );
    // The orValue macro makes the result `dyn`.
    let or_value = policy(
        "ValidatingPolicy",
        json!({"matchConstraints": rules(), "validations": [{"expression": "[true][?0].orValue(false)"}]}),
    );
    assert_eq!(validate(&or_value).len(), 2);
}

#[test]
fn match_conditions_come_before_the_variables() {
    let p = policy(
        "ValidatingPolicy",
        json!({
            "matchConstraints": rules(),
            "matchConditions": [{"name": "a", "expression": "variables.v"}],
            "variables": [{"name": "v", "expression": "true"}],
            "validations": [{"expression": "variables.v"}],
        }),
    );
    let errors = validate(&p);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[1].starts_with("spec.matchConditions[0].expression: Invalid value: \"variables.v\": ERROR: <input>:1:10: undefined field 'v'"),
        "{errors:?}"
    );
}

#[test]
fn namespaced_policies_have_their_own_resource_overloads_and_no_http() {
    let get = |kind: &str, args: &str| {
        policy(
            kind,
            json!({
                "matchConstraints": rules(),
                "variables": [{"name": "c", "expression": format!("resource.get({args})")}],
                "validations": [{"expression": "variables.c.size() >= 0"}],
            }),
        )
    };
    let three = r#""v1", "configmaps", "c""#;
    let four = r#""v1", "configmaps", "ns", "c""#;
    let errors = validate(&get("NamespacedValidatingPolicy", three));
    assert!(errors.is_empty(), "{errors:?}");
    assert!(validate(&get("ValidatingPolicy", four)).is_empty());
    assert_eq!(validate(&get("NamespacedValidatingPolicy", four)).len(), 2);
    assert_eq!(validate(&get("ValidatingPolicy", three)).len(), 2);
    let http = policy(
        "NamespacedValidatingPolicy",
        json!({"matchConstraints": rules(), "validations": [{"expression": "http.get('http://x') != null"}]}),
    );
    assert_eq!(
        validate(&http),
        vec!["spec: Forbidden: http.* is not allowed in namespaced policies; set --allowHTTPInNamespacedPolicies to enable".to_owned()]
    );
    assert_eq!(http.namespace, DEFAULT_NAMESPACE);
}

#[test]
fn a_policy_without_resource_rules_is_refused() {
    let p = policy(
        "ValidatingPolicy",
        json!({"validations": [{"expression": "true"}]}),
    );
    assert_eq!(
        validate(&p),
        vec!["spec.matchConstraints: Required value: a matchConstraints with at least one resource rule is required".to_owned()]
    );
}

#[test]
fn fields_of_the_wrong_type_are_named() {
    let err = read_validating_policy(&json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "ValidatingPolicy",
        "metadata": {"name": "p"},
        "spec": {"validations": [{"expression": 1}]},
    }))
    .unwrap_err();
    assert_eq!(
        err,
        (
            "spec.validations[0].expression".to_owned(),
            "must be a string".to_owned()
        )
    );
}

#[test]
fn table_types_parse() {
    use crate::cel::Type;
    assert_eq!(
        env::table_type("map(string, any)").unwrap(),
        Type::map(Type::string(), Type::any())
    );
    assert_eq!(
        env::table_type("opaque:resource.Context").unwrap(),
        Type::opaque("resource.Context", vec![])
    );
    assert_eq!(
        env::table_type("list(opaque:a.B(string))").unwrap(),
        Type::list(Type::opaque("a.B", vec![Type::string()]))
    );
    assert!(env::table_type("map(string").is_err());
}

fn mutating_policy(spec: serde_json::Value) -> mutating::MutatingPolicy {
    mutating::read_mutating_policy(&json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "MutatingPolicy",
        "metadata": {"name": "m"},
        "spec": spec,
    }))
    .unwrap()
}

#[test]
fn mutating_output_types_are_exact() {
    let ok = mutating_policy(json!({
        "matchConstraints": rules(),
        "mutations": [
            {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: \"remove\", path: \"/a\"}]"}},
            {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}},
            // No JSON patch for this patch type: not compiled.
            {"patchType": "JSONPatch", "applyConfiguration": {"expression": "("}},
        ],
    }));
    assert_eq!(mutating::validate(&ok), Vec::<String>::new());
    let dyn_patch = mutating_policy(json!({
        "matchConstraints": rules(),
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "object.x"}}],
    }));
    assert_eq!(
        mutating::validate(&dyn_patch),
        vec![r#"spec.mutations[0].jsonPatch.expression: Invalid value: "object.x": output is expected to be of type list"#.to_owned()]
    );
}

#[test]
fn mutating_variables_are_compiled_before_match_conditions_and_all_reported() {
    let p = mutating_policy(json!({
        "matchConstraints": rules(),
        "variables": [{"name": "a", "expression": "nope"}, {"name": "b", "expression": "true"}, {"name": "c", "expression": "nope2"}],
        "matchConditions": [{"name": "m", "expression": "variables.b"}],
    }));
    let errors = mutating::validate(&p);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.variables[0].expression: "),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("spec.variables[2].expression: "),
        "{errors:?}"
    );
    let q = mutating_policy(json!({
        "matchConstraints": rules(),
        "variables": [{"name": "b", "expression": "true"}],
        "matchConditions": [{"name": "m", "expression": "variables.b"}],
    }));
    assert_eq!(mutating::validate(&q), Vec::<String>::new());
}

#[test]
fn mutating_fields_of_the_wrong_type_do_not_decode() {
    let bad = mutating::read_mutating_policy(&json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "MutatingPolicy",
        "metadata": {"name": "m"},
        "spec": {"evaluation": {"admission": {"enabled": "yes"}}},
    }));
    assert_eq!(
        bad.err(),
        Some((
            "spec.evaluation.admission.enabled".to_owned(),
            "must be a boolean".to_owned()
        ))
    );
    let bad = mutating::read_mutating_policy(&json!({
        "apiVersion": "policies.kyverno.io/v1",
        "kind": "MutatingPolicy",
        "metadata": {"name": "m"},
        "spec": {"mutations": [{"patchType": "JSONPatch", "jsonPatch": "x"}]},
    }));
    assert_eq!(
        bad.err(),
        Some((
            "spec.mutations[0].jsonPatch".to_owned(),
            "must be an object".to_owned()
        ))
    );
}
