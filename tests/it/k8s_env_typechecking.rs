//! The cases of Kubernetes 1.37.1
//! `k8s.io/apiserver/pkg/admission/plugin/policy/validating/typechecking_test.go`
//! (`TestTypeCheck`), replayed on the Kubernetes environment: the schema the fake resolver
//! returns is written as hand-built object types (the schema conversion itself is
//! `crates/core/src/schema/`'s job), and the policy walk (validations, then messageExpressions, after
//! compiling `spec.variables` in order) is the one of `TypeChecker.CheckExpression`.

use std::sync::Arc;

use vapcheck::cel::{StructTypes, Type, TypeProvider};
use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};

const ROOT: &str = "Deployment123456789";

struct Policy<'a> {
    variables: &'a [(&'a str, &'a str)],
    /// (expression, messageExpression)
    validations: &'a [(&'a str, &'a str)],
    has_params: bool,
}

/// One warning per expression with errors: (fieldRef, issues text).
fn check(policy: &Policy<'_>, schema: Option<StructTypes>) -> Vec<(String, String)> {
    let (object, params, types) = match schema {
        Some(t) => {
            let t: Arc<dyn TypeProvider> = Arc::new(t);
            let params = if policy.has_params {
                Params::Typed(Type::object(ROOT))
            } else {
                Params::Absent
            };
            (Some(Type::object(ROOT)), params, Some(t))
        }
        None => {
            // Schema without type: object/oldObject dyn, params dyn.
            let params = if policy.has_params {
                Params::Untyped
            } else {
                Params::Absent
            };
            (None, params, None)
        }
    };
    let mut env = PolicyEnv::new(
        Target::upstream(),
        KindDecls {
            object,
            params,
            types,
            patch_types: false,
        },
    )
    .expect("env builds");
    env.add_variables(policy.variables.iter().copied());
    let mut out = Vec::new();
    for (i, (expr, msg)) in policy.validations.iter().enumerate() {
        if let Err(e) = env.compile(expr) {
            out.push((
                format!("spec.validations[{i}].expression"),
                e.to_display_string(),
            ));
        }
        if !msg.is_empty()
            && let Err(e) = env.compile(msg)
        {
            out.push((
                format!("spec.validations[{i}].messageExpression"),
                e.to_display_string(),
            ));
        }
    }
    out
}

fn schema(fields: &[(&str, Type)]) -> StructTypes {
    StructTypes::new().with_type(ROOT, fields.iter().cloned())
}

/// A policy with one validation and nothing else.
fn check_one(expr: &str, schema: Option<StructTypes>) -> Vec<(String, String)> {
    let validations = [(expr, "")];
    let policy = Policy {
        variables: &[],
        validations: &validations,
        has_params: false,
    };
    check(&policy, schema)
}

#[test]
fn passed_check() {
    let w = check_one(
        "object.foo == 'bar'",
        Some(schema(&[("foo", Type::string())])),
    );
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn undefined_field() {
    let w = check_one(
        "object.foo == 'bar'",
        Some(schema(&[("bar", Type::string())])),
    );
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, "spec.validations[0].expression");
    assert_eq!(
        w[0].1,
        "ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^"
    );
}

#[test]
fn field_type_mismatch() {
    let w = check_one("object.foo == 'bar'", Some(schema(&[("foo", Type::int())])));
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].1,
        "ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | object.foo == 'bar'\n | ...........^"
    );
}

#[test]
fn params_typed_from_the_same_schema() {
    let p = Policy {
        variables: &[],
        validations: &[("object.foo == params.bar", "")],
        has_params: true,
    };
    let w = check(&p, Some(schema(&[("foo", Type::string())])));
    assert_eq!(w.len(), 1);
    assert!(w[0].1.contains("undefined field 'bar'"), "{}", w[0].1);
}

#[test]
fn params_with_untyped_schema() {
    let p = Policy {
        variables: &[],
        validations: &[("params != null", "")],
        has_params: true,
    };
    assert!(check(&p, None).is_empty());
}

#[test]
fn multiple_expressions() {
    let p = Policy {
        variables: &[],
        validations: &[("object.foo == 'bar'", ""), ("object.bar == 'foo'", "")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[("foo", Type::string())])));
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, "spec.validations[1].expression");
}

#[test]
fn message_expressions() {
    let p = Policy {
        variables: &[],
        validations: &[("object.foo == 'bar'", "object.foo + 114514")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[("foo", Type::string())])));
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, "spec.validations[0].messageExpression");
    assert!(
        w[0].1
            .contains("found no matching overload for '_+_' applied to '(string, int)'"),
        "{}",
        w[0].1
    );
}

#[test]
fn authorizer() {
    let w = check_one(
        "authorizer.group('').resource('endpoints').check('create').allowed()",
        Some(schema(&[])),
    );
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn authorizer_invalid() {
    let w = check_one("authorizer.allowed()", Some(schema(&[])));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].1.contains(
            "found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer"
        ),
        "{}",
        w[0].1
    );
}

#[test]
fn additional_properties_true_sibling() {
    let t = StructTypes::new()
        .with_type(
            ROOT,
            [
                ("spec", Type::object(format!("{ROOT}.spec"))),
                ("status", Type::object(format!("{ROOT}.status"))),
            ],
        )
        .with_type(&format!("{ROOT}.spec"), [("text", Type::string())])
        .with_type(
            &format!("{ROOT}.status"),
            [(
                "problematicProperty",
                Type::object(format!("{ROOT}.status.problematicProperty")),
            )],
        )
        .with_type(
            &format!("{ROOT}.status.problematicProperty"),
            Vec::<(&str, Type)>::new(),
        );
    assert!(check_one("has(object.spec.text)", Some(t)).is_empty());
}

#[test]
fn schema_without_type() {
    assert!(check_one("true", None).is_empty());
}

#[test]
fn variables_valid() {
    let p = Policy {
        variables: &[("works", "true")],
        validations: &[("variables.works", "")],
        has_params: false,
    };
    assert!(check(&p, Some(schema(&[("foo", Type::int())]))).is_empty());
}

#[test]
fn variables_missing_field() {
    let p = Policy {
        variables: &[("works", "true")],
        validations: &[("variables.nonExisting", "")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[("foo", Type::int())])));
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].1,
        "ERROR: <input>:1:10: undefined field 'nonExisting'\n | variables.nonExisting\n | .........^"
    );
}

#[test]
fn variables_field_wrong_type() {
    let p = Policy {
        variables: &[("name", "'something'")],
        validations: &[("variables.name == object.foo", "")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[("foo", Type::int())])));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].1
            .contains("found no matching overload for '_==_' applied to '(string, int)'"),
        "{}",
        w[0].1
    );
}

#[test]
fn error_in_variables_not_reported_and_variable_becomes_dyn() {
    let p = Policy {
        variables: &[("name", "object.foo == 'str'")],
        validations: &[("variables.name == object.foo", "")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[("foo", Type::int())])));
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn variables_see_only_earlier_variables() {
    let p = Policy {
        variables: &[
            ("a", "variables.b + 1"),
            ("b", "1"),
            ("c", "variables.b + 1"),
        ],
        // `a` referred to a later variable: it failed and is dyn, so `a.x` is accepted;
        // `c` is int.
        validations: &[("variables.a.x == 1 && variables.c == 2", "variables.c.x")],
        has_params: false,
    };
    let w = check(&p, Some(schema(&[])));
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "spec.validations[0].messageExpression");
    assert!(
        w[0].1
            .contains("type 'int' does not support field selection"),
        "{}",
        w[0].1
    );
}
