use super::*;
use crate::apiserver::{
    validate_mutating_binding_create, validate_mutating_binding_update,
    validate_mutating_policy_create, validate_mutating_policy_update,
};

fn policy(yaml: &str) -> MutatingAdmissionPolicy {
    serde_saphyr::from_str(yaml).expect("test policy parses")
}

fn binding(yaml: &str) -> MutatingAdmissionPolicyBinding {
    serde_saphyr::from_str(yaml).expect("test binding parses")
}

fn causes(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

const BASE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: m.example.com}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: EXPR
"#;

fn apply(e: &str) -> MutatingAdmissionPolicy {
    policy(&BASE.replace("EXPR", &format!("{e:?}")))
}

fn json_patch(e: &str) -> MutatingAdmissionPolicy {
    policy(
        &BASE
            .replace("patchType: ApplyConfiguration", "patchType: JSONPatch")
            .replace("applyConfiguration:", "jsonPatch:")
            .replace("EXPR", &format!("{e:?}")),
    )
}

fn create(p: &MutatingAdmissionPolicy) -> Vec<String> {
    causes(&validate_mutating_policy_create(p, Server::PINNED))
}

#[test]
fn accepted_mutations() {
    assert_eq!(
        create(&apply("Object{spec: Object.spec{replicas: 1}}")),
        Vec::<String>::new()
    );
    assert_eq!(
        create(&json_patch(
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b'), value: 'x'}]"
        )),
        Vec::<String>::new()
    );
    // `variables` is declared even without spec.variables (composited compiler).
    assert_eq!(
        create(&apply("variables.x")),
        [concat!(
            "spec.mutations[0].applyConfiguration.expression: Invalid value: \"variables.x\": ",
            "compilation failed: ERROR: <input>:1:10: undefined field 'x'\n",
            " | variables.x\n",
            " | .........^"
        )]
    );
}

#[test]
fn result_types() {
    assert_eq!(
        create(&apply("Object.spec{}")),
        [
            r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "Object.spec{}": must evaluate to Object but got Object.spec"#
        ]
    );
    assert_eq!(
        create(&apply("object")),
        [
            r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "object": must evaluate to Object but got dyn"#
        ]
    );
    assert_eq!(
        create(&json_patch("JSONPatch{op: 'remove', path: '/a'}")),
        [
            r#"spec.mutations[0].jsonPatch.expression: Invalid value: "JSONPatch{op: 'remove', path: '/a'}": must evaluate to list(JSONPatch) but got JSONPatch"#
        ]
    );
    assert_eq!(
        create(&json_patch("[]")),
        [
            r#"spec.mutations[0].jsonPatch.expression: Invalid value: "[]": must evaluate to list(JSONPatch) but got list(dyn)"#
        ]
    );
}

#[test]
fn expressions_are_trimmed_and_required() {
    assert_eq!(
        create(&apply("  Object.spec{}\n")),
        [
            r#"spec.mutations[0].applyConfiguration.expression: Invalid value: "Object.spec{}": must evaluate to Object but got Object.spec"#
        ]
    );
    assert_eq!(
        create(&apply("  ")),
        ["spec.mutations[0].applyConfiguration.expression: Required value"]
    );
    assert_eq!(
        create(&json_patch("")),
        ["spec.mutations[0].jsonPatch.expression: Required value"]
    );
}

#[test]
fn patch_type_rules() {
    let mut p = apply("Object{}");
    let spec = p.spec.as_mut().unwrap();
    let m = &mut spec.mutations.as_mut().unwrap()[0];
    m.patch_type = String::new();
    assert_eq!(create(&p), ["spec.mutations[0].patchType: Required value"]);
    let m = &mut p.spec.as_mut().unwrap().mutations.as_mut().unwrap()[0];
    m.patch_type = "StrategicMerge".into();
    assert_eq!(
        create(&p),
        [
            r#"spec.mutations[0].patchType: Unsupported value: "StrategicMerge": supported values: "ApplyConfiguration", "JSONPatch""#
        ]
    );
    let m = &mut p.spec.as_mut().unwrap().mutations.as_mut().unwrap()[0];
    m.patch_type = "JSONPatch".into();
    assert_eq!(
        create(&p),
        [
            "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
            r#"spec.mutations[0].applyConfiguration: Invalid value: "{applyConfiguration}": must not be specified when patchType is JSONPatch"#
        ]
    );
    let mut p = json_patch("[]");
    let m = &mut p.spec.as_mut().unwrap().mutations.as_mut().unwrap()[0];
    m.patch_type = "ApplyConfiguration".into();
    assert_eq!(
        create(&p),
        [
            "spec.mutations[0].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
            r#"spec.mutations[0].jsonPatch: Invalid value: "{jsonPatch}": must not be specified when patchType is ApplyConfiguration"#
        ]
    );
}

#[test]
fn spec_rules() {
    let mut p = apply("Object{}");
    let spec = p.spec.as_mut().unwrap();
    spec.mutations = None;
    spec.reinvocation_policy = None;
    spec.failure_policy = Some("Never".into());
    spec.match_constraints
        .as_mut()
        .unwrap()
        .resource_rules
        .as_mut()
        .unwrap()[0]
        .operations = Some(vec!["DELETE".into(), "CREATE".into()]);
    assert_eq!(
        create(&p),
        [
            r#"spec.failurePolicy: Unsupported value: "Never": supported values: "Fail", "Ignore""#,
            r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
            "spec.mutations: Required value: mutations must contain at least one item",
            "spec.reinvocationPolicy: Required value",
        ]
    );
    let spec = p.spec.as_mut().unwrap();
    spec.reinvocation_policy = Some("Always".into());
    spec.failure_policy = None; // defaulted to Fail
    spec.match_constraints = None;
    assert_eq!(
        create(&p),
        [
            "spec.matchConstraints: Required value",
            "spec.mutations: Required value: mutations must contain at least one item",
            r#"spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#,
        ]
    );
}

#[test]
fn params_authorizer_and_variables() {
    assert!(
        create(&apply(
            "Object{metadata: Object.metadata{labels: params.l}}"
        ))[0]
            .contains("undeclared reference to 'params'")
    );
    let mut p = apply("Object{metadata: Object.metadata{labels: params.l}}");
    p.spec.as_mut().unwrap().param_kind = Some(
        serde_saphyr::from_str("{apiVersion: v1, kind: ConfigMap}").expect("paramKind parses"),
    );
    assert_eq!(create(&p), Vec::<String>::new());
    // Variables are compiled without the patch types.
    let mut p = apply("Object{spec: variables.s}");
    p.spec.as_mut().unwrap().variables = Some(vec![
        serde_saphyr::from_str("{name: s, expression: 'Object.spec{}'}").expect("variable"),
    ]);
    let got = create(&p);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with(
            r#"spec.variables[0].expression: Invalid value: "Object.spec{}": compilation failed: "#
        ),
        "{got:?}"
    );
    assert!(
        got[0].contains("undeclared reference to 'Object.spec'"),
        "{got:?}"
    );
    assert_eq!(
        create(&apply(
            "authorizer.group('apps').resource('deployments').check('get').allowed() ? Object{} : Object{}"
        )),
        Vec::<String>::new()
    );
}

#[test]
fn static_suffix_and_metadata() {
    let mut p = apply("Object{}");
    p.metadata.name = Some("m.static.k8s.io".into());
    assert_eq!(
        create(&p),
        [
            r#"metadata.name: Invalid value: "m.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API"#
        ]
    );
    assert!(validate_mutating_policy_create(&p, Server { minor: 36 }).is_empty());
    p.metadata.name = None;
    assert_eq!(
        create(&p),
        ["metadata.name: Required value: name or generateName is required"]
    );
}

#[test]
fn new_and_stored_environments_on_update() {
    // `includes` (Kubernetes lists library, 1.37) compiles only in the stored environment.
    let new = apply("[1].includes(1) ? Object{} : Object{}");
    let got = create(&new);
    assert_eq!(got.len(), 1);
    assert!(
        got[0].contains("undeclared reference to 'includes'"),
        "{got:?}"
    );
    let s = Server::PINNED;
    assert!(validate_mutating_policy_update(&new, &new, s).is_empty());
    // A JSON patch is looked up among the stored apply configurations: unchanged, it is
    // still a new expression.
    let jp = json_patch("[1].includes(1) ? [] : [JSONPatch{op: 'remove', path: '/a'}]");
    let got = causes(&validate_mutating_policy_update(&jp, &jp, s));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].contains("undeclared reference to 'includes'"),
        "{got:?}"
    );
    // ... and stored when an old apply configuration had the same text.
    let expr = "[1].includes(1) ? [] : [JSONPatch{op: 'remove', path: '/a'}]";
    assert!(validate_mutating_policy_update(&jp, &apply(expr), s).is_empty());
}

#[test]
fn unchanged_match_conditions_are_skipped_on_update() {
    let mut p = apply("Object{}");
    p.spec.as_mut().unwrap().match_conditions = Some(vec![
        serde_saphyr::from_str("{name: a, expression: '1'}").expect("match condition"),
    ]);
    let got = create(&p);
    assert_eq!(
        got,
        [
            r#"spec.matchConditions[0].expression: Invalid value: "1": must evaluate to bool but got int"#
        ]
    );
    assert!(validate_mutating_policy_update(&p, &p, Server::PINNED).is_empty());
    let mut changed = p.clone();
    changed.spec.as_mut().unwrap().param_kind =
        Some(serde_saphyr::from_str("{apiVersion: v1, kind: ConfigMap}").expect("paramKind"));
    assert_eq!(
        causes(&validate_mutating_policy_update(
            &changed,
            &p,
            Server::PINNED
        )),
        got
    );
}

const BINDING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: b.example.com}
spec:
  policyName: m.example.com
"#;

#[test]
fn bindings() {
    let s = Server::PINNED;
    let b = binding(BINDING);
    assert!(validate_mutating_binding_create(&b, s).is_empty());
    let mut b2 = b.clone();
    b2.spec = None;
    assert_eq!(
        causes(&validate_mutating_binding_create(&b2, s)),
        ["spec.policyName: Required value"]
    );
    let b3 = binding(&format!(
        "{BINDING}  paramRef: {{name: a, selector: {{}}}}\n  matchResources:\n    resourceRules:\n    - {{apiGroups: [''], apiVersions: [v1], operations: [DELETE], resources: [pods]}}\n"
    ));
    assert_eq!(
        causes(&validate_mutating_binding_create(&b3, s)),
        [
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
            "spec.paramRef.parameterNotFoundAction: Required value",
            r#"spec.matchResources.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#,
        ]
    );
    let mut b4 = b.clone();
    b4.metadata.name = Some("b.static.k8s.io".into());
    assert_eq!(validate_mutating_binding_create(&b4, s).len(), 1);
    assert!(validate_mutating_binding_update(&b4).is_empty());
    let mut b5 = b.clone();
    b5.spec.as_mut().unwrap().policy_name = Some("Bad_Name".into());
    let got = causes(&validate_mutating_binding_update(&b5));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with(
            r#"spec.policyName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#
        ),
        "{got:?}"
    );
}

#[test]
fn identical_errors_are_returned_once() {
    // DELETE in two rules: the same error text twice, returned once (ErrorList.Filter).
    let mut p = apply("Object{}");
    let mc = p.spec.as_mut().unwrap().match_constraints.as_mut().unwrap();
    let mut r = mc.resource_rules.as_ref().unwrap()[0].clone();
    r.operations = Some(vec!["DELETE".into(), "CREATE".into()]);
    mc.resource_rules = Some(vec![r.clone(), r]);
    assert_eq!(
        create(&p),
        [
            r#"spec.matchConstraints.resourceRules.operations: Unsupported value: "DELETE": supported values: "*", "CONNECT", "CREATE", "UPDATE""#
        ]
    );
}

#[test]
fn served_from_1_36() {
    assert!(served(Server::PINNED));
    assert!(served(Server { minor: 36 }));
    assert!(!served(Server { minor: 35 }));
}

#[test]
fn resource_rules_required_and_excluded_rules_not_checked() {
    let mut p = apply("Object{}");
    let mc = p.spec.as_mut().unwrap().match_constraints.as_mut().unwrap();
    let mut r = mc.resource_rules.as_ref().unwrap()[0].clone();
    r.operations = Some(vec!["DELETE".into()]);
    mc.exclude_resource_rules = Some(vec![r]);
    assert_eq!(create(&p), Vec::<String>::new());
    let mc = p.spec.as_mut().unwrap().match_constraints.as_mut().unwrap();
    mc.resource_rules = Some(Vec::new());
    assert_eq!(
        create(&p),
        ["spec.matchConstraints.resourceRules: Required value"]
    );
}

#[test]
fn defaults() {
    let mut p = apply("Object{}");
    p.spec.as_mut().unwrap().failure_policy = None;
    p.spec.as_mut().unwrap().reinvocation_policy = None;
    default_mutating_policy(&mut p);
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    // reinvocationPolicy has no default for mutating admission policies.
    assert_eq!(spec.reinvocation_policy, None);
    let mc = spec.match_constraints.as_ref().unwrap();
    assert_eq!(mc.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(
        mc.resource_rules.as_ref().unwrap()[0].scope.as_deref(),
        Some("*")
    );
    let mut b = binding(&format!(
        "{BINDING}  matchResources:\n    resourceRules:\n    - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}}\n"
    ));
    default_mutating_binding(&mut b);
    let mr = b.spec.unwrap().match_resources.unwrap();
    assert!(mr.namespace_selector.is_some() && mr.object_selector.is_some());
}
