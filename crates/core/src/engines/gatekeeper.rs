//! Gatekeeper ConstraintTemplates (`templates.gatekeeper.sh/v1`, `v1beta1`) with
//! `engine: K8sNativeValidation` code: what Gatekeeper answers when the template is added, the
//! CEL compile errors of its code in Gatekeeper's environment, and vapcheck's type checking of
//! the code against the kinds its Constraints match. Pure: no I/O (docs/engines.md).
//!
//! Upstream: github.com/open-policy-agent/gatekeeper/v3 v3.23.1 (pinned in
//! `e2e/gatekeeper-oracle/go.mod`, with github.com/open-policy-agent/frameworks/constraint
//! v0.0.0-20260616163050-e1eaa1bf6d62, whose `pkg/client/drivers` no longer holds the driver):
//! - `pkg/drivers/k8scel/driver.go`, `(*Driver).AddTemplate`: the template's source is read by
//!   `schema.GetSourceFromTemplate` and compiled by a `cel.CompositedCompiler` over
//!   `environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())` in
//!   `StoredExpressions` mode: first the variables `transform.AllVariablesCEL()` (`anyObject`,
//!   `params`) and the user's variables, declared with `HasParams: true`; then the match
//!   conditions, validations and message expressions with no optional variables (so `params`
//!   is undeclared there: only `variables.params` reaches the parameters). Compile errors are
//!   kept inside the evaluators, not returned ("FRICTION: Note that compilation errors are
//!   possible, but we cannot introspect"): the template is accepted and the expression errors
//!   at every evaluation.
//! - `pkg/drivers/k8scel/schema/schema.go`, `GetSourceFromTemplate`, `GetSource`,
//!   `(*Source).Validate`, `GetFailurePolicy`: what does reject the template.
//! - `pkg/drivers/k8scel/transform/cel_snippets.go`, `BindObjectV1Beta1`, `BindParamsV1Beta1`:
//!   the two injected variables; `make_vap_objects.go`, `TemplateToPolicyDefinition`: the
//!   ValidatingAdmissionPolicy Gatekeeper generates (variables injected first, `paramKind` the
//!   constraint kind), which is the synthetic policy vapcheck checks.
//! - frameworks `pkg/client/crds/schema.go`, `CreateSchema`: the Constraint's schema, whose
//!   `spec.parameters` is the template's `spec.crd.spec.validation.openAPIV3Schema`.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use serde_json::{Map, Value, json};

/// The template API group.
pub const TEMPLATE_GROUP: &str = "templates.gatekeeper.sh";
/// The template versions read (the corpus is all v1; v1beta1 has the same `spec`).
pub const TEMPLATE_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// The Constraints' API group; the version is the one Gatekeeper's CRDs store.
pub const CONSTRAINT_GROUP: &str = "constraints.gatekeeper.sh";
/// `paramKind.apiVersion` of the generated policy (`make_vap_objects.go`).
pub const CONSTRAINT_API_VERSION: &str = "constraints.gatekeeper.sh/v1beta1";
/// The engine name (`schema.Name`).
pub const ENGINE: &str = "K8sNativeValidation";
/// `schema.ReservedPrefix`.
pub const RESERVED_PREFIX: &str = "gatekeeper_internal_";
/// `schema.ParamsName` and `schema.ObjectName`.
pub const PARAMS_NAME: &str = "params";
/// See [`PARAMS_NAME`].
pub const OBJECT_NAME: &str = "anyObject";
/// `transform.BindObjectV1Beta1`.
pub const ANY_OBJECT_EXPRESSION: &str = r#"has(request.operation) && request.operation == "DELETE" && object == null ? oldObject : object"#;
/// `transform.BindParamsV1Beta1`.
pub const PARAMS_EXPRESSION: &str =
    "!has(params.spec) ? null : !has(params.spec.parameters) ? null: params.spec.parameters";
/// `variables.params` in vapcheck's typed check (see [`as_policy`]).
pub const TYPED_PARAMS_EXPRESSION: &str = "params.spec.parameters";
/// How many variables Gatekeeper puts before the user's.
pub const INJECTED_VARIABLES: usize = 2;

/// A ConstraintTemplate with K8sNativeValidation code.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// `metadata.name`.
    pub name: String,
    /// `spec.crd.spec.names.kind`: the kind of its Constraints.
    pub kind: String,
    /// `spec.crd.spec.validation.openAPIV3Schema`.
    pub parameters: Option<Value>,
    /// `spec.targets`: each target's name and its code (engine, source).
    pub targets: Vec<(String, Vec<(String, Value)>)>,
}

/// One validation of a source.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceValidation {
    /// `expression`.
    pub expression: String,
    /// `message`.
    pub message: String,
    /// `messageExpression`.
    pub message_expression: String,
}

/// A K8sNativeValidation source (`schema.Source`), as Gatekeeper decodes it: unknown fields are
/// dropped (`runtime.DefaultUnstructuredConverter.FromUnstructured`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    /// `validations`.
    pub validations: Vec<SourceValidation>,
    /// `failurePolicy`.
    pub failure_policy: Option<String>,
    /// `matchCondition` (singular: the field's JSON name in `schema.Source`): name, expression.
    pub match_conditions: Vec<(String, String)>,
    /// `variables`: name, expression.
    pub variables: Vec<(String, String)>,
    /// Keys of the source that Gatekeeper ignores (not fields of `schema.Source`).
    pub ignored_keys: Vec<String>,
}

/// The code Gatekeeper compiles: where it is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelCode {
    /// The field path of the source in the template (`spec.targets[0].code[0].source`).
    pub path: String,
    /// The decoded source.
    pub source: Source,
}

/// Whether `api_version`/`kind` is a ConstraintTemplate this module reads.
pub fn is_template(api_version: &str, kind: &str) -> bool {
    kind == "ConstraintTemplate"
        && api_version
            .split_once('/')
            .is_some_and(|(g, v)| g == TEMPLATE_GROUP && TEMPLATE_VERSIONS.contains(&v))
}

/// Whether the template has K8sNativeValidation code (`schema.HasCELEngine`, over all targets).
pub fn has_cel(value: &Value) -> bool {
    value
        .pointer("/spec/targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("code").and_then(Value::as_array))
        .flatten()
        .any(|c| c.get("engine").and_then(Value::as_str) == Some(ENGINE))
}

/// Reads a template. `Err((field, cause))` when a field has the wrong type.
pub fn read_template(value: &Value) -> Result<Template, (String, String)> {
    let text = |path: &str| -> Result<String, (String, String)> {
        match value.pointer(path) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err((field_of(path), "must be a string".into())),
        }
    };
    let name = text("/metadata/name")?;
    let kind = text("/spec/crd/spec/names/kind")?;
    let parameters = value
        .pointer("/spec/crd/spec/validation/openAPIV3Schema")
        .filter(|v| !v.is_null())
        .cloned();
    let mut targets = Vec::new();
    match value.pointer("/spec/targets") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, t) in items.iter().enumerate() {
                let target = t
                    .get("target")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let mut code = Vec::new();
                match t.get("code") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(cs)) => {
                        for (j, c) in cs.iter().enumerate() {
                            let engine = match c.get("engine") {
                                Some(Value::String(s)) => s.clone(),
                                None | Some(Value::Null) => String::new(),
                                Some(_) => {
                                    return Err((
                                        format!("spec.targets[{i}].code[{j}].engine"),
                                        "must be a string".into(),
                                    ));
                                }
                            };
                            code.push((engine, c.get("source").cloned().unwrap_or(Value::Null)));
                        }
                    }
                    Some(_) => {
                        return Err((format!("spec.targets[{i}].code"), "must be a list".into()));
                    }
                }
                targets.push((target, code));
            }
        }
        Some(_) => return Err(("spec.targets".into(), "must be a list".into())),
    }
    Ok(Template {
        name,
        kind,
        parameters,
        targets,
    })
}

fn field_of(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// What Gatekeeper's `(*Driver).AddTemplate` answers: the code it compiles, or its error,
/// worded as Gatekeeper words it (`schema.GetSourceFromTemplate`, `GetSource`, `Validate`,
/// `GetFailurePolicy` with the default `Fail`).
pub fn add_template(template: &Template) -> Result<CelCode, String> {
    if template.targets.len() != 1 {
        return Err("wrong number of targets defined, only 1 target allowed".into());
    }
    let (_, code) = &template.targets[0];
    let Some((j, (_, source))) = code.iter().enumerate().find(|(_, (e, _))| e == ENGINE) else {
        return Err("K8sNativeValidation engine is missing".into());
    };
    let path = format!("spec.targets[0].code[{j}].source");
    let Value::Object(map) = source else {
        return Err("could not recognize the type".into());
    };
    let source = decode_source(map)?;
    validate_source(&source)?;
    Ok(CelCode { path, source })
}

/// `runtime.DefaultUnstructuredConverter.FromUnstructured` into `schema.Source`: known fields
/// must have their type, unknown ones are dropped.
fn decode_source(map: &Map<String, Value>) -> Result<Source, String> {
    let mut out = Source::default();
    let string = |v: &Value, what: &str| -> Result<String, String> {
        match v {
            Value::Null => Ok(String::new()),
            Value::String(s) => Ok(s.clone()),
            other => Err(format!(
                "{what}: cannot decode {} into a string",
                json_kind(other)
            )),
        }
    };
    let list = |v: &'_ Value, what: &str| -> Result<Vec<Map<String, Value>>, String> {
        match v {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    Value::Object(m) => Ok(m.clone()),
                    Value::Null => Ok(Map::new()),
                    other => Err(format!(
                        "{what}: cannot decode {} into an object",
                        json_kind(other)
                    )),
                })
                .collect(),
            other => Err(format!(
                "{what}: cannot decode {} into a list",
                json_kind(other)
            )),
        }
    };
    let get = |m: &Map<String, Value>, k: &str| m.get(k).cloned().unwrap_or(Value::Null);
    for (key, value) in map {
        match key.as_str() {
            "validations" => {
                for v in list(value, "validations")? {
                    out.validations.push(SourceValidation {
                        expression: string(&get(&v, "expression"), "validations.expression")?,
                        message: string(&get(&v, "message"), "validations.message")?,
                        message_expression: string(
                            &get(&v, "messageExpression"),
                            "validations.messageExpression",
                        )?,
                    });
                }
            }
            "failurePolicy" => {
                if !value.is_null() {
                    out.failure_policy = Some(string(value, "failurePolicy")?);
                }
            }
            "matchCondition" => {
                for v in list(value, "matchCondition")? {
                    out.match_conditions.push((
                        string(&get(&v, "name"), "matchCondition.name")?,
                        string(&get(&v, "expression"), "matchCondition.expression")?,
                    ));
                }
            }
            "variables" => {
                for v in list(value, "variables")? {
                    out.variables.push((
                        string(&get(&v, "name"), "variables.name")?,
                        string(&get(&v, "expression"), "variables.expression")?,
                    ));
                }
            }
            "generateVAP" => {
                if !matches!(value, Value::Null | Value::Bool(_)) {
                    return Err(format!(
                        "generateVAP: cannot decode {} into a bool",
                        json_kind(value)
                    ));
                }
            }
            _ => out.ignored_keys.push(key.clone()),
        }
    }
    Ok(out)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `(*Source).Validate` and `GetFailurePolicy`.
fn validate_source(source: &Source) -> Result<(), String> {
    for (name, _) in &source.match_conditions {
        if name.starts_with(RESERVED_PREFIX) {
            return Err(format!(
                "invalid match condition: {name} is not a valid match condition; cannot have {RESERVED_PREFIX:?} as a prefix"
            ));
        }
    }
    for (name, _) in &source.variables {
        if name.starts_with(RESERVED_PREFIX) {
            return Err(format!(
                "invalid variable definition: {name} is not a valid variable; cannot have {RESERVED_PREFIX:?} as a prefix"
            ));
        }
        for reserved in [PARAMS_NAME, OBJECT_NAME] {
            if name == reserved {
                return Err(format!(
                    "invalid variable definition: {reserved} an invalid variable name, {reserved:?} is a reserved keyword"
                ));
            }
        }
    }
    match source.failure_policy.as_deref() {
        None | Some("Fail" | "Ignore") => Ok(()),
        Some(other) => Err(format!(
            "invalid failure policy: unrecognized failure policy: {other}"
        )),
    }
}

/// A kind selected by a Constraint's `spec.match.kinds`: API group and kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MatchedKind {
    /// API group (`""`: core).
    pub group: String,
    /// Kind.
    pub kind: String,
}

/// The kinds `constraint` selects (`spec.match.kinds[].apiGroups × kinds`), or `None` when it
/// selects every kind (no `kinds`, an empty list, or a `*`), which vapcheck does not expand.
pub fn constraint_kinds(constraint: &Value) -> Option<Vec<MatchedKind>> {
    let entries = constraint.pointer("/spec/match/kinds")?.as_array()?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let mut out = Vec::new();
    for e in entries {
        let kinds = strings(e.get("kinds"));
        let mut groups = strings(e.get("apiGroups"));
        if kinds.is_empty() || kinds.iter().any(|k| k == "*") {
            return None;
        }
        if groups.is_empty() || groups.iter().any(|g| g == "*") {
            // Any group: the kinds are looked up in the core group and by the mapper's
            // preference (the `apiGroups: ["*"]` of the library samples select core kinds).
            groups = vec![String::new()];
        }
        for g in &groups {
            for k in &kinds {
                let m = MatchedKind {
                    group: g.clone(),
                    kind: k.clone(),
                };
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
    }
    if out.is_empty() { None } else { Some(out) }
}

/// A CRD of the Constraint kind whose whole schema is the parameters' (`{type: object}`
/// without one): the type `params` has in the typed check.
pub fn params_crd(template: &Template) -> Value {
    let mut crd = constraint_crd(template);
    let schema = template
        .parameters
        .clone()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(versions) = crd.pointer_mut("/spec/versions/0/schema")
        && let Some(v) = versions.as_object_mut()
    {
        v.insert("openAPIV3Schema".into(), schema);
    }
    crd
}

/// The Constraint CRD's published schema (frameworks `crds.CreateSchema`), with `match` left
/// open (its schema is the target's; the code never reads it: only Gatekeeper's internal match
/// conditions do).
pub fn constraint_crd(template: &Template) -> Value {
    let mut spec = json!({
        "type": "object",
        "properties": {
            "match": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "enforcementAction": {"type": "string"},
            "scopedEnforcementActions": {"type": "array", "items": {"type": "object", "properties": {
                "action": {"type": "string"},
                "enforcementPoints": {"type": "array", "items": {"type": "object",
                    "properties": {"name": {"type": "string"}}}}}}}
        }
    });
    if let (Some(p), Some(props)) = (
        &template.parameters,
        spec.get_mut("properties").and_then(Value::as_object_mut),
    ) {
        props.insert("parameters".into(), p.clone());
    }
    let kind = template.kind.clone();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{CONSTRAINT_GROUP}", kind.to_lowercase())},
        "spec": {
            "group": CONSTRAINT_GROUP,
            "scope": "Cluster",
            "names": {"kind": kind, "plural": kind.to_lowercase(), "singular": kind.to_lowercase()},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {
                    "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
                    "spec": spec,
                    "status": {"x-kubernetes-preserve-unknown-fields": true}
                }}
            }}]
        }
    })
}

/// The ValidatingAdmissionPolicy Gatekeeper generates from the code
/// (`transform.TemplateToPolicyDefinition`): `paramKind` the constraint kind, the injected
/// variables first, then the user's variables, match conditions and validations; its matching
/// is `rules` (Gatekeeper's default matches every resource; vapcheck narrows it to the kinds
/// the template's Constraints match). Gatekeeper's internal match conditions are left out: they
/// are Gatekeeper's own code, not the template's.
///
/// `typed_params`: `variables.params` is `params.spec.parameters` instead of Gatekeeper's
/// `!has(params.spec) ? null : ... : params.spec.parameters`. With a typed `params`, cel-go
/// types `c ? null : T` as `null` (checker/types.go `mostGeneral` keeps the first branch's
/// `null`: `isEqualOrLessSpecific(T, null)` is false for different kinds), so every
/// `variables.params.x` would be "type 'null' does not support field selection"; with
/// Gatekeeper's `dyn` params the expression is `dyn`. The typed check declares the variable as
/// the parameters' type, the value it has whenever the Constraint sets parameters.
pub fn as_policy(
    template: &Template,
    code: &CelCode,
    rules: Vec<NamedRuleWithOperations>,
    typed_params: bool,
) -> ValidatingAdmissionPolicy {
    let source = &code.source;
    let mut variables = vec![
        Variable {
            name: OBJECT_NAME.into(),
            expression: ANY_OBJECT_EXPRESSION.into(),
        },
        Variable {
            name: PARAMS_NAME.into(),
            expression: if typed_params {
                TYPED_PARAMS_EXPRESSION.into()
            } else {
                PARAMS_EXPRESSION.into()
            },
        },
    ];
    variables.extend(source.variables.iter().map(|(n, e)| Variable {
        name: n.clone(),
        expression: e.clone(),
    }));
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    ValidatingAdmissionPolicy {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(template.name.clone()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some(
                source
                    .failure_policy
                    .clone()
                    .unwrap_or_else(|| "Fail".into()),
            ),
            param_kind: Some(ParamKind {
                api_version: Some(CONSTRAINT_API_VERSION.into()),
                kind: Some(template.kind.clone()),
            }),
            match_constraints: Some(MatchResources {
                resource_rules: Some(rules),
                ..Default::default()
            }),
            match_conditions: (!source.match_conditions.is_empty()).then(|| {
                source
                    .match_conditions
                    .iter()
                    .map(|(n, e)| MatchCondition {
                        name: n.clone(),
                        expression: e.clone(),
                    })
                    .collect()
            }),
            validations: Some(
                source
                    .validations
                    .iter()
                    .map(|v| Validation {
                        expression: v.expression.clone(),
                        message: non_empty(&v.message),
                        message_expression: non_empty(&v.message_expression),
                        reason: None,
                    })
                    .collect(),
            ),
            variables: Some(variables),
            ..Default::default()
        }),
        status: None,
    }
}

/// A field of the generated policy as the field of the template it comes from
/// (`spec.variables[2].expression` → `<source>.variables[0].expression`); `None` for the
/// injected variables and anything the template does not hold.
pub fn template_field(code: &CelCode, policy_field: &str) -> Option<String> {
    let rest = |prefix: &str| policy_field.strip_prefix(prefix);
    if let Some(r) = rest("spec.variables[") {
        let (index, tail) = r.split_once(']')?;
        let i: usize = index.parse().ok()?;
        let i = i.checked_sub(INJECTED_VARIABLES)?;
        return Some(format!("{}.variables[{i}]{tail}", code.path));
    }
    if let Some(r) = rest("spec.matchConditions") {
        return Some(format!("{}.matchCondition{r}", code.path));
    }
    if let Some(r) = rest("spec.validations") {
        return Some(format!("{}.validations{r}", code.path));
    }
    None
}

/// One CEL compile error of the code in Gatekeeper's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// The template's field (`spec.targets[0].code[0].source.validations[0].expression`).
    pub field: String,
    /// The error (cel-go's text, as the API server prints it in the cause's detail).
    pub error: String,
}

/// The compile errors of the code as Gatekeeper's driver compiles it: the generated policy
/// compiled by kube-apiserver's validation in `StoredExpressions` mode (an update that keeps
/// every expression: `object`, `oldObject` and `params` are `dyn`, as in the driver), plus
/// `params` read outside the variables, which the driver does not declare there (the
/// generated policy does).
pub fn compile_errors(
    template: &Template,
    code: &CelCode,
    server: crate::apiserver::Server,
) -> Vec<CompileError> {
    let policy = as_policy(template, code, Vec::new(), false);
    let mut out: Vec<CompileError> = Vec::new();
    for e in crate::apiserver::validate_policy_update(&policy, &policy, server) {
        let is_cel = e.field.ends_with(".expression") || e.field.ends_with(".messageExpression");
        if !is_cel {
            continue;
        }
        if let Some(field) = template_field(code, &e.field) {
            out.push(CompileError {
                field,
                error: e.detail.clone(),
            });
        }
    }
    let source = &code.source;
    let mut outside: Vec<(String, &str)> = Vec::new();
    for (j, (_, e)) in source.match_conditions.iter().enumerate() {
        outside.push((format!("{}.matchCondition[{j}].expression", code.path), e));
    }
    for (j, v) in source.validations.iter().enumerate() {
        outside.push((
            format!("{}.validations[{j}].expression", code.path),
            &v.expression,
        ));
        if !v.message_expression.is_empty() {
            outside.push((
                format!("{}.validations[{j}].messageExpression", code.path),
                &v.message_expression,
            ));
        }
    }
    for (field, text) in outside {
        if out.iter().any(|c| c.field == field) {
            continue;
        }
        if let Some((line, column)) = params_reference(text) {
            // cel-go's error block: the position (1-based column), the source line and a
            // caret under the column (common/errors.go `ToDisplayString`).
            let source_line = text.lines().nth(line.saturating_sub(1)).unwrap_or_default();
            out.push(CompileError {
                field,
                error: format!(
                    "compilation failed: ERROR: <input>:{line}:{}: undeclared reference to 'params' (in container '')\n | {source_line}\n | {}^",
                    column + 1,
                    ".".repeat(column)
                ),
            });
        }
    }
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

/// The line (1-based) and column (0-based, in code points) of the first free `params`
/// identifier of `text` (not a comprehension's own variable), or `None`.
fn params_reference(text: &str) -> Option<(usize, usize)> {
    use cel::common::ast::Expr;
    let parsed = crate::cel::parse::parse(text).ok()?;
    let mut bound = false;
    crate::cel::parse::walk(parsed.expr(), |e| {
        if let Expr::Comprehension(c) = &e.expr
            && (c.iter_var == PARAMS_NAME || c.accu_var == PARAMS_NAME)
        {
            bound = true;
        }
    });
    if bound {
        return None;
    }
    let mut first = None;
    crate::cel::parse::walk(parsed.expr(), |e| {
        if first.is_none()
            && let Expr::Ident(n) = &e.expr
            && n == PARAMS_NAME
        {
            first = Some(e.id);
        }
    });
    let id = first?;
    parsed.location(id).map(|l| (l.line, l.column))
}

/// The kind `object` and `oldObject` are checked as when no Constraint of the template is in
/// the input: a kind of no cluster, whose schema is untyped, so `object` is `dyn` as in
/// Gatekeeper's driver (undeclared references, functions that do not exist, wrong argument or
/// result types on typed values and syntax errors are still found; field typos are not).
pub fn untyped_kind() -> crate::policy::Gvk {
    crate::policy::Gvk {
        group: "untyped.vapcheck.dev".into(),
        version: "v1".into(),
        kind: "AnyObject".into(),
    }
}

/// The Constraint kind of `template` (`paramKind` of the generated policy).
pub fn constraint_gvk(template: &Template) -> crate::policy::Gvk {
    crate::policy::Gvk {
        group: CONSTRAINT_GROUP.into(),
        version: "v1beta1".into(),
        kind: template.kind.clone(),
    }
}

/// The CEL type of the Constraint's `spec.parameters` (the template's `openAPIV3Schema`,
/// converted as the API server publishes a CRD's schema), which `params` has in vapcheck's
/// typed check ([`rewritten`]), or why there is none.
fn params_type(template: &Template) -> Result<crate::policy::SchemaLookup, String> {
    use crate::schema::{Components, ConvertOptions, Limits, RootType, crd};
    let versions = crd::crd_versions(&params_crd(template))?;
    let version = versions
        .first()
        .ok_or_else(|| "the constraint CRD has no version".to_owned())?;
    let schema = version.schema.clone()?;
    let name = crd::model_name(&version.gvk);
    let mut components = crd::meta_components();
    components.insert(name.clone(), schema);
    let converted = Components::new(&components)
        .convert_root_sized(
            &name,
            &template.kind,
            Limits::default(),
            ConvertOptions::default(),
        )
        .map_err(|e| e.to_string())?;
    Ok(match converted {
        Some((t, sizes)) => crate::policy::SchemaLookup::Typed(crate::policy::SchemaType(
            std::sync::Arc::new(RootType::new(t).with_sizes(sizes)),
        )),
        None => crate::policy::SchemaLookup::Untyped,
    })
}

/// The backends' schemas, with the Constraint kind and [`untyped_kind`] added.
struct Schemas<'a> {
    inner: &'a dyn crate::policy::SchemaSource,
    constraint: (
        crate::policy::Gvk,
        Result<crate::policy::SchemaLookup, String>,
    ),
}

impl crate::policy::SchemaSource for Schemas<'_> {
    fn resolve(
        &self,
        gvk: &crate::policy::Gvk,
    ) -> Result<crate::policy::SchemaLookup, crate::policy::SchemaError> {
        if *gvk == self.constraint.0 {
            return self
                .constraint
                .1
                .clone()
                .map_err(crate::policy::SchemaError::Failed);
        }
        if *gvk == untyped_kind() {
            return Ok(crate::policy::SchemaLookup::Untyped);
        }
        self.inner.resolve(gvk)
    }
}

/// The backends' REST mapper, with [`untyped_kind`]'s resource added.
struct Mapper<'a> {
    inner: &'a dyn crate::policy::RestMapper,
}

/// The resource of [`untyped_kind`].
const UNTYPED_RESOURCE: &str = "anyobjects";

impl crate::policy::RestMapper for Mapper<'_> {
    fn kinds_for(
        &self,
        gvr: &crate::policy::Gvr,
    ) -> Result<Vec<crate::policy::Gvk>, crate::policy::MappingError> {
        let any = untyped_kind();
        if gvr.group == any.group && gvr.resource == UNTYPED_RESOURCE {
            return Ok(vec![any]);
        }
        self.inner.kinds_for(gvr)
    }
}

/// The rules of the generated policy: one per matched kind, at the version the mapper
/// prefers (a kind the mapper does not know keeps `apiVersions: ["*"]` and is reported as not
/// checked), or the [`untyped_kind`] without matched kinds.
fn rules(
    kinds: Option<&[MatchedKind]>,
    mapper: &dyn crate::policy::RestMapper,
) -> Vec<NamedRuleWithOperations> {
    let rule = |group: &str, version: &str, resource: &str| NamedRuleWithOperations {
        api_groups: Some(vec![group.to_owned()]),
        api_versions: Some(vec![version.to_owned()]),
        operations: Some(vec!["*".into()]),
        resources: Some(vec![resource.to_owned()]),
        resource_names: None,
        scope: None,
    };
    let Some(kinds) = kinds else {
        let any = untyped_kind();
        return vec![rule(&any.group, &any.version, UNTYPED_RESOURCE)];
    };
    kinds
        .iter()
        .map(|k| {
            let resource = k.kind.to_lowercase();
            let gvr = crate::policy::Gvr {
                group: k.group.clone(),
                version: String::new(),
                resource: resource.clone(),
            };
            let version = mapper
                .kinds_for(&gvr)
                .ok()
                .and_then(|gvks| gvks.into_iter().find(|g| g.kind == k.kind))
                .map_or_else(|| "*".to_owned(), |g| g.version);
            rule(&k.group, &version, &resource)
        })
        .collect()
}

/// vapcheck's type checking of the code: the generated policy ([`as_policy`]) checked by
/// [`crate::policy::check_policy`] with `object` typed by the kinds the template's Constraints
/// select (`kinds`; `None`: [`untyped_kind`]) and `params` by the Constraint's schema, the
/// results moved to the template's fields ([`template_field`]); the injected variables' own
/// results, the policy's conditions and its cost sums are dropped.
pub fn type_check(
    template: &Template,
    code: &CelCode,
    kinds: Option<&[MatchedKind]>,
    options: &crate::policy::CheckOptions,
    backends: &crate::policy::Backends<'_>,
) -> crate::policy::PolicyStatus {
    let mapper = Mapper {
        inner: backends.rest_mapper,
    };
    let schemas = Schemas {
        inner: backends.schemas,
        constraint: (constraint_gvk(template), params_type(template)),
    };
    let overlay = crate::policy::Backends {
        rest_mapper: &mapper,
        discovery: backends.discovery,
        schemas: &schemas,
        checker: backends.checker,
    };
    let typed = CelCode {
        path: code.path.clone(),
        source: rewritten(&code.source),
    };
    let policy = as_policy(template, &typed, rules(kinds, &mapper), true);
    let mut checked = crate::policy::check_policy(&policy, options, &overlay);
    restore_texts(&mut checked, &code.source, &typed.source);
    let mut status = crate::policy::PolicyStatus {
        observed_generation: None,
        checked_kinds: std::mem::take(&mut checked.checked_kinds),
        skipped: std::mem::take(&mut checked.skipped),
        ..Default::default()
    };
    let remap = |f: &str| template_field(code, f);
    // Moved below, only when `object` has matched kinds.
    let cost_expressions = std::mem::take(&mut checked.cost.expressions);
    status.take_remapped(&mut checked, &remap);
    // The runtime-safety findings are left out: `object` stands for `variables.anyObject`,
    // which is `oldObject` on DELETE, so the null-object cases would be wrong.
    // Without matched kinds `object` is `dyn`, of unknown size: no cost is estimated.
    if kinds.is_none() {
        return status;
    }
    for mut e in cost_expressions {
        if let Some(n) = remap(&e.field_ref) {
            e.field_ref = n;
            status.cost.expressions.push(e);
        }
    }
    for mut f in checked.cost.findings {
        if let Some(n) = f.field_ref.as_deref().and_then(remap) {
            f.field_ref = Some(n);
            status.cost.findings.push(f);
        }
    }
    status
}

/// `variables.anyObject` and `variables.params` of `text` replaced by `(object` and `(params`
/// padded with spaces to the same length and closed by `)`: the same columns, but typed, where
/// the variables are `dyn` in the generated policy (composition.go `convertCelTypeToDeclType`
/// declares a variable holding an object as `dyn`, so KCM's type checking of Gatekeeper's
/// generated policy never types them). `object` has `anyObject`'s type (its value on DELETE
/// is `oldObject`, of the same kind); `params` is declared as the parameters' type
/// ([`params_crd`]). Only references followed by a selection (`.`) are replaced; one inside a
/// string literal is replaced too (no finding can come from a literal).
pub fn rewrite_expression(text: &str) -> String {
    let mut out = text.to_owned();
    for (from, to) in [
        ("variables.anyObject", "object"),
        ("variables.params", "params"),
    ] {
        let mut at = 0;
        while let Some(found) = out[at..].find(from) {
            let start = at + found;
            let end = start + from.len();
            let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
            let before_ok = out[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !ident(c) && c != '.');
            // Only a selection (`variables.params.x`): `has(variables.params)` must keep its
            // selection, and a whole use needs no type.
            let after_ok = out[end..].starts_with('.');
            if before_ok && after_ok {
                let pad = from.len() - to.len() - 2;
                let replacement = format!("({to}{}) ", " ".repeat(pad));
                // `(` + name + spaces + `)`: exactly `from.len()` bytes.
                out.replace_range(start..end, &replacement[..from.len()]);
            }
            at = end;
        }
    }
    out
}

/// The name a free `params` of a match condition, validation or message expression is
/// checked as: undeclared, as in Gatekeeper's driver (which compiles them without `params`),
/// and of the same length; [`restore_texts`] puts `params` back into the messages.
const UNDECLARED_PARAMS: &str = "_param";

/// [`rewrite_expression`] for a site compiled without `params`: a free `params` (not a
/// comprehension's variable, not `variables.params`) becomes [`UNDECLARED_PARAMS`] first.
fn rewrite_site(text: &str) -> String {
    if params_reference(text).is_none() {
        return rewrite_expression(text);
    }
    let mut out = text.to_owned();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut at = 0;
    while let Some(found) = out[at..].find(PARAMS_NAME) {
        let start = at + found;
        let end = start + PARAMS_NAME.len();
        let before_ok = out[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !ident(c) && c != '.');
        let after_ok = out[end..].chars().next().is_none_or(|c| !ident(c));
        if before_ok && after_ok {
            out.replace_range(start..end, UNDECLARED_PARAMS);
        }
        at = end;
    }
    rewrite_expression(&out)
}

/// The source with every expression rewritten by [`rewrite_expression`] ([`rewrite_site`]
/// outside the variables).
fn rewritten(source: &Source) -> Source {
    let mut out = source.clone();
    for v in &mut out.validations {
        v.expression = rewrite_site(&v.expression);
        v.message_expression = rewrite_site(&v.message_expression);
    }
    for (_, e) in &mut out.match_conditions {
        *e = rewrite_site(e);
    }
    for (_, e) in &mut out.variables {
        *e = rewrite_expression(e);
    }
    out
}

/// Puts the template's own expression lines back into the texts of the results (the source
/// lines cel-go quotes), line for line: the rewritten lines have the same length, so the
/// caret lines under them stay right.
fn restore_texts(status: &mut crate::policy::PolicyStatus, original: &Source, typed: &Source) {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut add = |a: &str, b: &str| {
        for (x, y) in b.lines().zip(a.lines()) {
            if x != y && !pairs.iter().any(|(p, _)| p == x) {
                pairs.push((x.to_owned(), y.to_owned()));
            }
        }
    };
    for (o, t) in original.validations.iter().zip(&typed.validations) {
        add(&o.expression, &t.expression);
        add(&o.message_expression, &t.message_expression);
    }
    for (o, t) in original
        .match_conditions
        .iter()
        .zip(&typed.match_conditions)
    {
        add(&o.1, &t.1);
    }
    for (o, t) in original.variables.iter().zip(&typed.variables) {
        add(&o.1, &t.1);
    }
    let undeclared = format!("undeclared reference to '{UNDECLARED_PARAMS}'");
    let fix = |text: &mut String| {
        if text.contains(&undeclared) {
            *text = text.replace(&undeclared, "undeclared reference to 'params'");
        }
        for (rewritten, own) in &pairs {
            let quoted = format!(" | {rewritten}");
            if text.contains(&quoted) {
                *text = text.replace(&quoted, &format!(" | {own}"));
            }
        }
    };
    for w in &mut status.expression_warnings {
        fix(&mut w.warning);
    }
    for r in &mut status.expression_results {
        for k in &mut r.kinds {
            if let crate::policy::KindOutcome::Issues(issues) = &mut k.outcome {
                for i in &mut issues.0 {
                    fix(&mut i.text);
                    fix(&mut i.message);
                }
            }
        }
    }
    for f in &mut status.findings {
        fix(&mut f.message);
    }
}

/// The Kubernetes libraries Gatekeeper v3.23.1 is built with (k8s.io/apiserver v0.36.2): the
/// server whose validation [`compile_errors`] reproduces.
pub const GATEKEEPER_SERVER: crate::apiserver::Server = crate::apiserver::Server { minor: 36 };

/// Adds to `status` each of Gatekeeper's compile errors ([`compile_errors`]) at a field the
/// type check has no warning for: an expression Gatekeeper fails on always gets a warning,
/// e.g. a message expression of type `dyn` (Gatekeeper requires `string` exactly; the typed
/// check does not report a `dyn` result). Shown for [`untyped_kind`], Gatekeeper's typing.
pub fn add_compile_errors(
    status: &mut crate::policy::PolicyStatus,
    template: &Template,
    code: &CelCode,
) {
    use crate::policy::{Issue, Issues, KindOutcome, KindResult};
    for e in compile_errors(template, code, GATEKEEPER_SERVER) {
        if status
            .expression_warnings
            .iter()
            .any(|w| w.field_ref == e.field)
        {
            continue;
        }
        let result = KindResult {
            gvk: untyped_kind(),
            outcome: KindOutcome::Issues(Issues::one(Issue::plain(e.error.clone()))),
        };
        status.expression_warnings.push(
            k8s_openapi::api::admissionregistration::v1::ExpressionWarning {
                field_ref: e.field.clone(),
                warning: format!("{}: {}\n", untyped_kind(), e.error),
            },
        );
        status
            .expression_results
            .push(crate::policy::status::ExpressionResults {
                field_ref: e.field,
                kinds: vec![result],
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(source: Value) -> Template {
        read_template(&json!({
            "apiVersion": "templates.gatekeeper.sh/v1",
            "kind": "ConstraintTemplate",
            "metadata": {"name": "t"},
            "spec": {
                "crd": {"spec": {"names": {"kind": "K"}}},
                "targets": [{"target": "admission.k8s.gatekeeper.sh", "code": [
                    {"engine": "Rego", "source": {"rego": "package x"}},
                    {"engine": ENGINE, "source": source}
                ]}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn rewriting_keeps_every_column() {
        for text in [
            "variables.anyObject.spec.x + variables.params.y",
            "has(variables.params) && variables.params.a.exists(p, p == variables.anyObject.metadata.name)",
            "myvariables.params.x + variables.paramsX.y",
        ] {
            let out = rewrite_expression(text);
            assert_eq!(out.chars().count(), text.chars().count(), "{out}");
        }
        assert_eq!(
            rewrite_expression("variables.anyObject.spec.x > variables.params.y"),
            "(object           ).spec.x > (params        ).y"
        );
        // A whole use keeps its selection; other names are left alone.
        assert_eq!(
            rewrite_expression("has(variables.params) || myvariables.params.x"),
            "has(variables.params) || myvariables.params.x"
        );
        assert_eq!(
            rewrite_site("has(params.spec) && [1].all(x, variables.params.m > x)"),
            "has(_param.spec) && [1].all(x, (params        ).m > x)"
        );
        // A comprehension that names its variable `params` leaves the text as is.
        assert_eq!(
            rewrite_site("[1].exists(params, params > 0)"),
            "[1].exists(params, params > 0)"
        );
    }

    #[test]
    fn fields_of_the_generated_policy_map_back_to_the_template() {
        let t = template(json!({"validations": [{"expression": "true"}]}));
        let code = add_template(&t).unwrap();
        assert_eq!(code.path, "spec.targets[0].code[1].source");
        let cases = [
            ("spec.variables[0].expression", None),
            ("spec.variables[1].expression", None),
            (
                "spec.variables[3].expression",
                Some("spec.targets[0].code[1].source.variables[1].expression"),
            ),
            (
                "spec.matchConditions[0].expression",
                Some("spec.targets[0].code[1].source.matchCondition[0].expression"),
            ),
            (
                "spec.validations[2].messageExpression",
                Some("spec.targets[0].code[1].source.validations[2].messageExpression"),
            ),
            ("spec.auditAnnotations[0].valueExpression", None),
        ];
        for (from, to) in cases {
            assert_eq!(template_field(&code, from).as_deref(), to, "{from}");
        }
    }

    #[test]
    fn the_driver_refuses_what_gatekeeper_refuses() {
        let err = |source: Value| add_template(&template(source)).unwrap_err();
        assert_eq!(
            err(json!({"variables": [{"name": "anyObject", "expression": "1"}]})),
            "invalid variable definition: anyObject an invalid variable name, \"anyObject\" is a reserved keyword"
        );
        assert_eq!(
            err(json!({"failurePolicy": "Never"})),
            "invalid failure policy: unrecognized failure policy: Never"
        );
        assert_eq!(err(json!("text")), "could not recognize the type");
        assert_eq!(
            err(json!({"validations": "x"})),
            "validations: cannot decode a string into a list"
        );
        // Unknown keys (`matchConditions`, plural) are dropped, as Gatekeeper drops them.
        let code = add_template(&template(
            json!({"matchConditions": [{"name": "m", "expression": "x"}]}),
        ))
        .unwrap();
        assert!(code.source.match_conditions.is_empty());
        assert_eq!(code.source.ignored_keys, vec!["matchConditions".to_owned()]);
    }

    #[test]
    fn constraints_select_kinds_or_everything() {
        let c = |kinds: Value| constraint_kinds(&json!({"spec": {"match": {"kinds": kinds}}}));
        assert_eq!(
            c(json!([{"apiGroups": ["apps", ""], "kinds": ["Deployment"]}])),
            Some(vec![
                MatchedKind {
                    group: "apps".into(),
                    kind: "Deployment".into()
                },
                MatchedKind {
                    group: String::new(),
                    kind: "Deployment".into()
                },
            ])
        );
        assert_eq!(
            c(json!([{"apiGroups": ["*"], "kinds": ["Pod"]}])),
            Some(vec![MatchedKind {
                group: String::new(),
                kind: "Pod".into()
            }])
        );
        assert_eq!(c(json!([{"apiGroups": [""], "kinds": ["*"]}])), None);
        assert_eq!(c(json!([])), None);
        assert_eq!(constraint_kinds(&json!({"spec": {}})), None);
    }
}
