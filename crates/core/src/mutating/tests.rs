//! One test per finding class, through the real CEL backend (`crate::engine`) on a small
//! hand-built Deployment schema.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    ApplyConfiguration, JSONPatch, MatchCondition, MatchResources, MutatingAdmissionPolicySpec,
    Mutation, NamedRuleWithOperations, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::engine::KubeChecker;
use crate::k8s_env::Target;
use crate::policy::restmapper::DiscoveryRestMapper;
use crate::policy::restmapper::tests::sample_discovery;
use crate::policy::{SchemaError, SchemaLookup, SchemaSource};
use crate::schema::{DeclType, ObjectType, Scalar};

fn obj(name: &str, fields: Vec<(&str, DeclType)>) -> DeclType {
    DeclType::Object(Arc::new(ObjectType::new(
        name,
        fields.into_iter().map(|(n, t)| (n.to_owned(), t)).collect(),
    )))
}
fn s(x: Scalar) -> DeclType {
    DeclType::Scalar(x)
}
fn list(t: DeclType) -> DeclType {
    DeclType::List(Arc::new(t))
}
fn map(t: DeclType) -> DeclType {
    DeclType::Map(Arc::new(t))
}

/// A Deployment: enough of `spec` and `metadata` for every finding class.
fn deployment() -> DeclType {
    let d = "Deployment";
    let container = obj(
        "Deployment.spec.template.spec.containers.@idx",
        vec![
            ("name", s(Scalar::String)),
            ("image", s(Scalar::String)),
            ("args", list(s(Scalar::String))),
            (
                "ports",
                list(obj(
                    "Deployment.spec.template.spec.containers.@idx.ports.@idx",
                    vec![
                        ("containerPort", s(Scalar::Int)),
                        ("protocol", s(Scalar::String)),
                    ],
                )),
            ),
        ],
    );
    let resources = DeclType::Object(Arc::new(
        ObjectType::new(
            "Deployment.spec.template.spec.containers.@idx.resources",
            vec![("claims".into(), list(s(Scalar::String)))],
        )
        .with_unexposed(vec!["limits".into(), "requests".into()]),
    ));
    let container = match container {
        DeclType::Object(o) => {
            let mut fields: Vec<(String, DeclType)> =
                o.fields().map(|(n, t)| (n.to_owned(), t.clone())).collect();
            fields.push(("resources".into(), resources));
            DeclType::Object(Arc::new(ObjectType::new(o.name(), fields)))
        }
        other => other,
    };
    let meta = |n: &str| {
        obj(
            n,
            vec![
                ("name", s(Scalar::String)),
                ("labels", map(s(Scalar::String))),
                ("annotations", map(s(Scalar::String))),
            ],
        )
    };
    obj(
        d,
        vec![
            ("apiVersion", s(Scalar::String)),
            ("kind", s(Scalar::String)),
            ("metadata", meta("Deployment.metadata")),
            (
                "spec",
                obj(
                    "Deployment.spec",
                    vec![
                        ("replicas", s(Scalar::Int)),
                        ("paused", s(Scalar::Bool)),
                        (
                            "selector",
                            obj(
                                "Deployment.spec.selector",
                                vec![("matchLabels", map(s(Scalar::String)))],
                            ),
                        ),
                        (
                            "strategy",
                            obj(
                                "Deployment.spec.strategy",
                                vec![(
                                    "rollingUpdate",
                                    obj(
                                        "Deployment.spec.strategy.rollingUpdate",
                                        vec![("maxSurge", DeclType::Dyn)],
                                    ),
                                )],
                            ),
                        ),
                        (
                            "template",
                            obj(
                                "Deployment.spec.template",
                                vec![
                                    ("metadata", meta("Deployment.spec.template.metadata")),
                                    (
                                        "spec",
                                        obj(
                                            "Deployment.spec.template.spec",
                                            vec![("containers", list(container))],
                                        ),
                                    ),
                                ],
                            ),
                        ),
                    ],
                ),
            ),
        ],
    )
}

struct Schemas(HashMap<Gvk, SchemaType>);

impl SchemaSource for Schemas {
    fn resolve(&self, gvk: &Gvk) -> Result<SchemaLookup, SchemaError> {
        self.0
            .get(gvk)
            .cloned()
            .map(SchemaLookup::Typed)
            .ok_or(SchemaError::NotFound)
    }
}

fn deploy_gvk() -> Gvk {
    Gvk::new("apps", "v1", "Deployment")
}

enum M<'a> {
    Apply(&'a str),
    Patch(&'a str),
}

fn policy(mutations: &[M<'_>]) -> MutatingAdmissionPolicy {
    MutatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some("m".into()),
            ..Default::default()
        },
        spec: Some(MutatingAdmissionPolicySpec {
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec!["apps".into()]),
                    api_versions: Some(vec!["v1".into()]),
                    resources: Some(vec!["deployments".into()]),
                    operations: Some(vec!["CREATE".into()]),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            mutations: Some(
                mutations
                    .iter()
                    .map(|m| match m {
                        M::Apply(e) => Mutation {
                            patch_type: "ApplyConfiguration".into(),
                            apply_configuration: Some(ApplyConfiguration {
                                expression: Some((*e).into()),
                            }),
                            json_patch: None,
                        },
                        M::Patch(e) => Mutation {
                            patch_type: "JSONPatch".into(),
                            apply_configuration: None,
                            json_patch: Some(JSONPatch {
                                expression: Some((*e).into()),
                            }),
                        },
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
    }
}

fn run_mode(p: &MutatingAdmissionPolicy, mode: Mode) -> PolicyStatus {
    let mapper = DiscoveryRestMapper::new(sample_discovery());
    let schemas = Schemas(HashMap::from([(
        deploy_gvk(),
        SchemaType(Arc::new(RootType::new(deployment()))),
    )]));
    let checker = KubeChecker::new(Target::upstream()).expect("checker");
    let backends = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: &schemas,
        checker: &checker,
    };
    check_mutating_policy(
        p,
        &CheckOptions {
            mode,
            kind_limit: 100,
            ..CheckOptions::default()
        },
        &backends,
    )
}

/// The warning of each fieldRef, without the kind prefix.
fn warnings(p: &MutatingAdmissionPolicy) -> Vec<(String, String)> {
    run_mode(p, Mode::Extended)
        .expression_warnings
        .iter()
        .map(|w| {
            let text = w
                .warning
                .strip_prefix("apps/v1, Kind=Deployment: ")
                .unwrap_or(&w.warning);
            (w.field_ref.clone(), text.trim_end().to_owned())
        })
        .collect()
}

fn one(expr: M<'_>) -> String {
    let w = warnings(&policy(&[expr]));
    assert_eq!(w.len(), 1, "{w:?}");
    w[0].1.clone()
}

fn clean(expr: M<'_>) {
    let w = warnings(&policy(&[expr]));
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn correct_apply_configurations_have_no_findings() {
    clean(M::Apply(
        "Object{spec: Object.spec{replicas: 3, template: Object.spec.template{spec: \
         Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'a', \
         args: ['x'], ports: [Object.spec.template.spec.containers.ports{containerPort: 80}]}]}}}}",
    ));
    // maps of strings, int-or-string both ways, a map literal for an object
    clean(M::Apply(
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}, spec: Object.spec{strategy: \
         Object.spec.strategy{rollingUpdate: {'maxSurge': 1}}}}",
    ));
    clean(M::Apply(
        "Object{spec: Object.spec{strategy: Object.spec.strategy{rollingUpdate: \
         Object.spec.strategy.rollingUpdate{maxSurge: '25%'}}}}",
    ));
    // computed values are not judged; a property without a CEL type is not unknown
    clean(M::Apply(
        "Object{spec: Object.spec{replicas: object.spec.replicas + 1, template: \
         Object.spec.template{spec: Object.spec.template.spec{containers: \
         object.spec.template.spec.containers.map(c, Object.spec.template.spec.containers{name: \
         c.name, resources: Object.spec.template.spec.containers.resources{requests: {'cpu': \
         '1'}}})}}}}",
    ));
}

#[test]
fn unknown_fields_of_apply_configurations() {
    assert_eq!(
        one(M::Apply("Object{spec: Object.spec{replicaz: 3}}")),
        "ERROR: <input>:1:34: undefined field 'replicaz'\n | Object{spec: Object.spec{replicaz: 3}}\n | .................................^"
    );
    // in a map literal standing for an object
    let w = one(M::Apply(
        "Object{spec: Object.spec{strategy: Object.spec.strategy{rollingUpdate: {'maxSurgee': 1}}}}",
    ));
    assert!(w.contains("undefined field 'maxSurgee'"), "{w}");
    // a top-level nested type that is no path of the schema
    let w = one(M::Apply(
        "[Object.spec.templat{}].size() == 1 ? Object{} : Object{}",
    ));
    assert!(
        w.contains(
            "type 'Object.spec.templat' names no field of the schema: undefined field 'templat'"
        ),
        "{w}"
    );
}

#[test]
fn wrong_value_types_lists_and_maps() {
    let w = one(M::Apply("Object{spec: Object.spec{replicas: '3'}}"));
    assert!(
        w.starts_with("ERROR: <input>:1:34: expected type of field 'replicas' is 'int' but provided type is 'string'"),
        "{w}"
    );
    let w = one(M::Apply("Object{spec: Object.spec{paused: 1}}"));
    assert!(
        w.contains("field 'paused' is 'bool' but provided type is 'int'"),
        "{w}"
    );
    // a map where the schema has a list, a list where it has a map
    let w = one(M::Apply(
        "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: {'a': 'b'}}}}}",
    ));
    assert!(
        w.contains("field 'containers' is 'list(Object.spec.template.spec.containers)' but provided type is 'map(string, string)'"),
        "{w}"
    );
    let w = one(M::Apply("Object{metadata: Object.metadata{labels: ['a']}}"));
    assert!(
        w.contains("field 'labels' is 'map(string, string)' but provided type is 'list(string)'"),
        "{w}"
    );
    // list elements and map values
    let w = one(M::Apply(
        "Object{metadata: Object.metadata{labels: {'a': 1}}}",
    ));
    assert!(
        w.contains(
            "expected type of map value of field 'labels' is 'string' but provided type is 'int'"
        ),
        "{w}"
    );
    // an object where the schema has a scalar
    let w = one(M::Apply(
        "Object{spec: Object.spec{replicas: Object.spec.replicas{}}}",
    ));
    assert!(
        w.contains("field 'replicas' is 'int' but provided type is 'Object.spec.replicas'"),
        "{w}"
    );
}

#[test]
fn nested_type_names_must_follow_the_field_path() {
    let w = one(M::Apply(
        "Object{spec: Object.spec{selector: Object.spec.wrong{}}}",
    ));
    assert!(
        w.contains("unexpected type name \"Object.spec.wrong\", expected \"Object.spec.selector\", which matches field name path from root Object type"),
        "{w}"
    );
    // lists are transparent: an element is named after the list field
    clean(M::Apply(
        "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'a'}]}}}}",
    ));
}

#[test]
fn result_types_are_upstreams_messages() {
    assert_eq!(one(M::Apply("1")), "must evaluate to Object but got int");
    assert_eq!(
        one(M::Patch("[Object{}]")),
        "must evaluate to list(JSONPatch) but got list(Object)"
    );
    assert_eq!(
        one(M::Apply("Object.spec{}")),
        "must evaluate to Object but got Object.spec"
    );
    // cel-go types `[]` as list(dyn), which is not exactly list(JSONPatch)
    // (plugin/cel/compile.go CompileCELExpression uses IsExactType).
    assert_eq!(
        one(M::Patch("[]")),
        "must evaluate to list(JSONPatch) but got list(dyn)"
    );
    clean(M::Patch(
        "false ? [JSONPatch{op: 'remove', path: '/spec/paused'}] : []",
    ));
}

#[test]
fn json_patch_ops_fields_and_paths() {
    clean(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/template/spec/containers/-', value: \
         Object.spec.template.spec.containers{name: 'x'}}, JSONPatch{op: 'replace', path: \
         '/spec/replicas', value: 2}, JSONPatch{op: 'add', path: '/metadata/labels/a~1b', \
         value: 'v'}, JSONPatch{op: 'remove', path: '/spec/template/spec/containers/0/args/1'}, \
         JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('x/y'), \
         value: 'z'}, JSONPatch{op: 'copy', from: '/spec/paused', path: '/spec/paused'}]",
    ));
    let w = one(M::Patch(
        "[JSONPatch{op: 'adds', path: '/spec/replicas', value: 1}]",
    ));
    assert!(
        w.contains(
            "unknown JSON Patch op \"adds\" (one of add, remove, replace, move, copy, test)"
        ),
        "{w}"
    );
    let w = one(M::Patch("[JSONPatch{path: '/spec/replicas', value: 1}]"));
    assert!(w.contains("JSONPatch without op"), "{w}");
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/replicas', valeu: 1}]",
    ));
    assert!(w.contains("unexpected JSONPatchType field: valeu"), "{w}");
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/replicaz', value: 1}]",
    ));
    assert!(
        w.contains("JSON Patch path \"/spec/replicaz\": undefined field 'replicaz'"),
        "{w}"
    );
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: 'spec/replicas', value: 1}]",
    ));
    assert!(w.contains("must start with '/'"), "{w}");
    let w = one(M::Patch(
        "[JSONPatch{op: 'remove', path: '/spec/template/spec/containers/first'}]",
    ));
    assert!(w.contains("'first' is not an index of a list"), "{w}");
    let w = one(M::Patch(
        "[JSONPatch{op: 'replace', path: '/spec/template/spec/containers/-/name', value: 'a'}]",
    ));
    assert!(
        w.contains("'-' (the end of the list) is only valid as the last segment"),
        "{w}"
    );
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/replicas/x', value: 1}]",
    ));
    assert!(w.contains("'x' is below a int value"), "{w}");
    // ~0 and ~1 are unescaped before the lookup: `~1` is a '/', so no such field
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/repli~1cas', value: 1}]",
    ));
    assert!(w.contains("undefined field 'repli/cas'"), "{w}");
    // a known prefix followed by a computed part: only complete segments are checked
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/metadata/labelz/' + jsonpatch.escapeKey('a'), value: 'v'}]",
    ));
    assert!(w.contains("undefined field 'labelz'"), "{w}");
    // the `from` of a move
    let w = one(M::Patch(
        "[JSONPatch{op: 'move', from: '/spec/pause', path: '/spec/paused'}]",
    ));
    assert!(
        w.contains("JSON Patch from \"/spec/pause\": undefined field 'pause'"),
        "{w}"
    );
}

#[test]
fn json_patch_values_fit_the_schema_at_the_path() {
    let w = one(M::Patch(
        "[JSONPatch{op: 'replace', path: '/spec/replicas', value: 'three'}]",
    ));
    assert!(
        w.contains("expected type of field 'replicas' is 'int' but provided type is 'string'"),
        "{w}"
    );
    let w = one(M::Patch(
        "[JSONPatch{op: 'add', path: '/spec/template/spec/containers/-', value: \
         Object.spec.template.spec.containers{nam: 'x'}}]",
    ));
    assert!(w.contains("undefined field 'nam'"), "{w}");
    // `remove` carries no value to check
    clean(M::Patch(
        "[JSONPatch{op: 'remove', path: '/spec/replicas', value: 'ignored'}]",
    ));
}

#[test]
fn variables_and_match_conditions_have_no_patch_types() {
    let mut p = policy(&[M::Apply("Object{spec: Object.spec{replicas: variables.n}}")]);
    let spec = p.spec.as_mut().expect("spec");
    spec.variables = Some(vec![
        Variable {
            name: "n".into(),
            expression: "object.spec.replicas + 1".into(),
        },
        Variable {
            name: "o".into(),
            expression: "Object{}".into(),
        },
    ]);
    spec.match_conditions = Some(vec![MatchCondition {
        name: "c".into(),
        expression: "object.spec.pausd".into(),
    }]);
    let w = warnings(&p);
    let refs: Vec<&str> = w.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        refs,
        [
            "spec.matchConditions[0].expression",
            "spec.variables[1].expression"
        ]
    );
    assert!(w[0].1.contains("undefined field 'pausd'"), "{}", w[0].1);
    assert!(
        w[1].1.contains("undeclared reference to 'Object'"),
        "{}",
        w[1].1
    );
}

#[test]
fn strict_mode_checks_mutations_only_and_without_literal_checks() {
    let mut p = policy(&[
        M::Apply("Object{spec: Object.spec{replicaz: object.spec.replicaz}}"),
        M::Apply("1"),
    ]);
    p.spec.as_mut().expect("spec").match_conditions = Some(vec![MatchCondition {
        name: "c".into(),
        expression: "object.nope".into(),
    }]);
    let s = run_mode(&p, Mode::Strict);
    let w: Vec<(&str, &str)> = s
        .expression_warnings
        .iter()
        .map(|w| (w.field_ref.as_str(), w.warning.as_str()))
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "spec.mutations[0].applyConfiguration.expression");
    // the checker's error on `object`, not the literal's unknown field
    assert!(
        w[0].1.contains("<input>:1:47: undefined field 'replicaz'"),
        "{}",
        w[0].1
    );
    assert!(!w[0].1.contains("<input>:1:34"), "{}", w[0].1);
}

#[test]
fn mutations_whose_patch_type_has_no_configuration_are_not_compiled() {
    for patch_type in ["JSONPatch", "StrategicMerge", ""] {
        let mut p = policy(&[M::Apply("1")]);
        p.spec
            .as_mut()
            .expect("spec")
            .mutations
            .as_mut()
            .expect("m")[0]
            .patch_type = patch_type.into();
        assert!(
            mutation_sites(&p, Mode::Extended).is_empty(),
            "{patch_type}"
        );
    }
    assert_eq!(
        mutation_sites(&policy(&[M::Apply("1")]), Mode::Strict).len(),
        1
    );
}

#[test]
fn patch_typing_artefacts_are_dropped_but_classified() {
    // `[Object…] + object.spec…` is `list(Object…) + list(Deployment…)` in vapcheck's typed
    // environment; upstream declares `object` dyn for MAPs, where it compiles and runs.
    let p = policy(&[M::Apply(
        "Object{spec: Object.spec{template: Object.spec.template{spec: \
         Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'a'}] \
         + object.spec.template.spec.containers}}}}",
    )]);
    let s = run_mode(&p, Mode::Extended);
    assert!(
        s.expression_warnings.is_empty(),
        "{:?}",
        s.expression_warnings
    );
    assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
    assert_eq!(
        s.findings[0].class,
        crate::policy::narrowing::FindingClass::StaticTypingOnly
    );
}

#[test]
fn unescaping_json_pointer_segments() {
    assert_eq!(schema::unescape_segment("a~1b~0c"), "a/b~c");
    assert_eq!(schema::unescape_segment("~01"), "~1");
}

#[test]
fn objects_that_keep_unknown_fields_accept_any_field() {
    let root = obj(
        "Widget",
        vec![(
            "spec",
            DeclType::Object(Arc::new(
                ObjectType::new("Widget.spec", vec![("size".to_owned(), s(Scalar::Int))])
                    .with_preserved_unknown_fields(true),
            )),
        )],
    );
    let lits = literal::Literals {
        objects: vec![literal::Message {
            type_name: "Object.spec".into(),
            at: None,
            fields: vec![
                literal::Field {
                    name: "anything".into(),
                    at: None,
                    optional: false,
                    value: literal::Value::Int(None),
                },
                literal::Field {
                    name: "size".into(),
                    at: None,
                    optional: false,
                    value: literal::Value::Str("x".into(), None),
                },
            ],
        }],
        patches: vec![],
    };
    let mut out = Vec::new();
    schema::check_apply_configuration(&root, &lits, &mut out);
    // the undeclared field is fine, the declared one is still typed
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].1.contains("field 'size' is 'int'"), "{out:?}");
}

#[test]
fn findings_in_branches_not_evaluated_for_the_kind_are_dropped() {
    // `object.kind == 'Pod'` is false for a Deployment: the `undefined field` inside that
    // branch is classified unreachable and not reported, for mutations too.
    let p = policy(&[M::Apply(
        "object.kind == 'Pod' ? Object{spec: Object.spec{nodeName: object.spec.nodeName}} : Object{}",
    )]);
    let s = run_mode(&p, Mode::Extended);
    assert!(
        s.expression_warnings.is_empty(),
        "{:?}",
        s.expression_warnings
    );
    assert!(
        s.findings
            .iter()
            .all(|f| f.class == crate::policy::narrowing::FindingClass::Unreachable),
        "{:?}",
        s.findings
    );
    assert!(!s.findings.is_empty());
}
