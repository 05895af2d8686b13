//! Kyverno's CEL policies (`policies.kyverno.io` `v1alpha1`, `v1beta1`, `v1`): what Kyverno's
//! policy validation webhook answers when a ValidatingPolicy or NamespacedValidatingPolicy is
//! created, and vapcheck's type checking of its CEL against the kinds its `matchConstraints`
//! select, in Kyverno's CEL environment ([`env`]). Pure: no I/O (docs/engines.md).
//! MutatingPolicies and NamespacedMutatingPolicies: [`mutating`]; DeletingPolicies and
//! NamespacedDeletingPolicies: [`deleting`].
//!
//! Upstream: github.com/kyverno/kyverno v1.19.1 (pinned in `e2e/kyverno-oracle/go.mod`, with
//! github.com/kyverno/api and github.com/kyverno/sdk at the versions its go.mod requires):
//! - `pkg/webhooks/policy/handlers.go`, `(*policyHandlers).Validate`: the object is decoded by
//!   `pkg/utils/admission/policy.go` `UnmarshalPolicy` into the `v1beta1` type of its kind,
//!   whatever its apiVersion (the three versions share one schema), and a ValidatingPolicy (or
//!   its namespaced variant) is validated by `pkg/cel/policies/vpol/validate.go` `Validate`:
//!   the compiler's errors, a `matchConstraints` with at least one resource rule, and in a
//!   namespaced policy no `globalContext` and (by default) no `http`.
//! - `pkg/cel/policies/vpol/compiler/compiler.go`, `(*compilerImpl).Compile`: the evaluation
//!   mode `JSON` compiles with `compileForJSON`, every other mode (`Kubernetes`, and `Envoy` or
//!   `HTTP`, which are kyverno-authz's) with `compileForKubernetes`: in order the match
//!   conditions, the variables, the validations (each expression then its message
//!   expression) and, for Kubernetes, the audit annotations, stopping at the first error
//!   (`pkg/cel/compiler/compiler.go` `CompileMatchConditions`, `CompileVariables`,
//!   `CompileValidation`, `CompileAuditAnnotations`). A condition or validation must be of
//!   type `bool` exactly, a message expression `string` exactly, an audit annotation `string`
//!   or `null` exactly (`IsExactType`: `dyn` is refused, unlike kube-apiserver). `object` and
//!   `oldObject` are `dyn`.

pub mod cron;
pub mod decls;
pub mod deleting;
pub mod env;
pub mod generating;
pub mod mutating;

use k8s_openapi::api::admissionregistration::v1::{
    AuditAnnotation, MatchCondition, MatchResources, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use serde_json::Value;

use crate::apiserver::field::FieldError;
use crate::apiserver::field::{Cause, CelPos};
use crate::cel::Type;

/// The API group.
pub const GROUP: &str = "policies.kyverno.io";
/// The versions read (`v1alpha1`, `v1beta1`, `v1`: one schema, decoded alike by Kyverno).
pub const VERSIONS: &[&str] = &["v1alpha1", "v1beta1", "v1"];
/// The kinds `vapcheck check` reads: Kyverno's validating policies.
pub const VALIDATING_KINDS: &[&str] = &["ValidatingPolicy", "NamespacedValidatingPolicy"];
/// The evaluation mode whose `object` is a Kubernetes object (`EvaluationModeKubernetes`).
pub const MODE_KUBERNETES: &str = "Kubernetes";
/// `EvaluationModeJSON`.
pub const MODE_JSON: &str = "JSON";
/// The namespace `kubectl create` gives a namespaced object without one (the API server sets
/// the request's namespace on the object before admission:
/// k8s.io/apiserver/pkg/registry/rest `EnsureObjectNamespaceMatchesRequestNamespace`).
pub const DEFAULT_NAMESPACE: &str = "default";

/// The placeholder error `compileForKubernetes` puts first in every error list it returns
/// (`field.InternalError(nil, fmt.Errorf(compileError, "failed to compile policy"))`; a nil
/// path prints as `<nil>`).
pub const COMPILE_PLACEHOLDER: &str =
    "<nil>: Internal error: validating policy compiler 1.0 error: failed to compile policy";

/// Whether `api_version`/`kind` is a Kyverno ValidatingPolicy or NamespacedValidatingPolicy.
pub fn is_validating_policy(api_version: &str, kind: &str) -> bool {
    is_kind_of(VALIDATING_KINDS, api_version, kind)
}

/// Whether `kind` is one of `kinds` and `api_version` a version of `policies.kyverno.io`
/// vapcheck reads.
pub(super) fn is_kind_of(kinds: &[&str], api_version: &str, kind: &str) -> bool {
    kinds.contains(&kind)
        && api_version
            .split_once('/')
            .is_some_and(|(g, v)| g == GROUP && VERSIONS.contains(&v))
}

/// A ValidatingPolicy or NamespacedValidatingPolicy, as Kyverno decodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatingPolicy {
    /// `ValidatingPolicy` or `NamespacedValidatingPolicy`.
    pub kind: &'static str,
    /// `apiVersion`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (namespaced kind: [`DEFAULT_NAMESPACE`] when missing; the
    /// cluster-wide kind: empty).
    pub namespace: String,
    /// `spec.evaluation.mode` (`Kubernetes` when missing: `EvaluationMode()`).
    pub mode: String,
    /// `spec.failurePolicy`.
    pub failure_policy: Option<String>,
    /// `spec.matchConstraints`.
    pub match_constraints: Option<MatchResources>,
    /// `spec.matchConditions`.
    pub match_conditions: Vec<MatchCondition>,
    /// `spec.variables`.
    pub variables: Vec<Variable>,
    /// `spec.validations`.
    pub validations: Vec<Validation>,
    /// `spec.auditAnnotations`.
    pub audit_annotations: Vec<AuditAnnotation>,
}

impl ValidatingPolicy {
    /// Whether the kind is namespaced.
    pub fn namespaced(&self) -> bool {
        self.kind == "NamespacedValidatingPolicy"
    }
}

/// Reads a policy. `Err((field, cause))` when a field has a type Go's `encoding/json` refuses
/// for the `v1beta1` type (Kyverno answers with that decoding error).
pub fn read_validating_policy(value: &Value) -> Result<ValidatingPolicy, (String, String)> {
    let kind = read_kind(value, VALIDATING_KINDS, "not a validating policy")?;
    let api_version = text(value, "/apiVersion")?;
    let name = text(value, "/metadata/name")?;
    let namespace = read_namespace(value, kind == "NamespacedValidatingPolicy")?;
    let mode = read_mode(value)?;
    let failure_policy = Some(text(value, "/spec/failurePolicy")?).filter(|s| !s.is_empty());
    let match_constraints = read_match_constraints(value)?;
    let match_conditions = read_match_conditions(value, "matchConditions")?;
    let variables = read_variables(value)?;
    let validations = entries(value, "validations", |e, at| {
        let optional = |k: &str| -> Result<Option<String>, (String, String)> {
            Ok(Some(entry_text(e, k, at)?).filter(|s| !s.is_empty()))
        };
        Ok(Validation {
            expression: entry_text(e, "expression", at)?,
            message: optional("message")?,
            message_expression: optional("messageExpression")?,
            reason: optional("reason")?,
        })
    })?;
    let audit_annotations = read_audit_annotations(value)?;
    Ok(ValidatingPolicy {
        kind,
        api_version,
        name,
        namespace,
        mode,
        failure_policy,
        match_constraints,
        match_conditions,
        variables,
        validations,
        audit_annotations,
    })
}

/// `kind`, which must be one of `kinds` (else `Err(("kind", "<refusal>: <kind>"))`).
pub(super) fn read_kind(
    value: &Value,
    kinds: &[&'static str],
    refusal: &str,
) -> Result<&'static str, (String, String)> {
    let kind_text = text(value, "/kind")?;
    kinds
        .iter()
        .copied()
        .find(|k| *k == kind_text)
        .ok_or_else(|| ("kind".to_owned(), format!("{refusal}: {kind_text}")))
}

/// `metadata.namespace`; for a namespaced kind [`DEFAULT_NAMESPACE`] when missing.
pub(super) fn read_namespace(value: &Value, namespaced: bool) -> Result<String, (String, String)> {
    let namespace = text(value, "/metadata/namespace")?;
    if namespaced && namespace.is_empty() {
        return Ok(DEFAULT_NAMESPACE.to_owned());
    }
    Ok(namespace)
}

/// `spec.evaluation.mode`, [`MODE_KUBERNETES`] when missing (`EvaluationMode()`).
pub(super) fn read_mode(value: &Value) -> Result<String, (String, String)> {
    Ok(match text(value, "/spec/evaluation/mode")? {
        m if m.is_empty() => MODE_KUBERNETES.to_owned(),
        m => m,
    })
}

/// `spec.matchConstraints`, decoded as the admissionregistration type.
pub(super) fn read_match_constraints(
    value: &Value,
) -> Result<Option<MatchResources>, (String, String)> {
    match value.pointer("/spec/matchConstraints") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value::<MatchResources>(v.clone())
            .map(Some)
            .map_err(|e| ("spec.matchConstraints".to_owned(), e.to_string())),
    }
}

/// The match conditions in the list `spec.<key>`.
pub(super) fn read_match_conditions(
    value: &Value,
    key: &str,
) -> Result<Vec<MatchCondition>, (String, String)> {
    entries(value, key, |e, at| {
        Ok(MatchCondition {
            name: entry_text(e, "name", at)?,
            expression: entry_text(e, "expression", at)?,
        })
    })
}

/// `spec.variables`.
pub(super) fn read_variables(value: &Value) -> Result<Vec<Variable>, (String, String)> {
    entries(value, "variables", |e, at| {
        Ok(Variable {
            name: entry_text(e, "name", at)?,
            expression: entry_text(e, "expression", at)?,
        })
    })
}

/// `spec.auditAnnotations`.
pub(super) fn read_audit_annotations(
    value: &Value,
) -> Result<Vec<AuditAnnotation>, (String, String)> {
    entries(value, "auditAnnotations", |e, at| {
        Ok(AuditAnnotation {
            key: entry_text(e, "key", at)?,
            value_expression: entry_text(e, "valueExpression", at)?,
        })
    })
}

fn text(value: &Value, pointer: &str) -> Result<String, (String, String)> {
    match value.pointer(pointer) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err((
            pointer.trim_start_matches('/').replace('/', "."),
            "must be a string".into(),
        )),
    }
}

fn entry_text(entry: &Value, key: &str, at: &str) -> Result<String, (String, String)> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err((format!("{at}.{key}"), "must be a string".into())),
    }
}

/// The entries of the list `spec.<list>`, each read by `read` (an entry that is not an object
/// is refused, as Go refuses to decode it into the struct).
fn entries<T>(
    value: &Value,
    list: &str,
    read: impl Fn(&Value, &str) -> Result<T, (String, String)>,
) -> Result<Vec<T>, (String, String)> {
    match value.pointer(&format!("/spec/{list}")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let at = format!("spec.{list}[{i}]");
                match e {
                    Value::Object(_) | Value::Null => read(e, &at),
                    _ => Err((at, "must be an object".into())),
                }
            })
            .collect(),
        Some(_) => Err((format!("spec.{list}"), "must be a list".into())),
    }
}

/// One CEL site of a policy, in the order Kyverno compiles them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The field (`spec.validations[0].messageExpression`).
    pub field: String,
    /// The expression.
    pub expression: String,
}

/// The errors Kyverno's webhook answers for the policy (`vpol.Validate`), each as
/// `field.Error.Error()` prints it; empty: accepted.
pub fn validate(policy: &ValidatingPolicy) -> Vec<String> {
    validate_causes(policy)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

/// [`validate`] with the field and CEL position of each error.
pub fn validate_causes(policy: &ValidatingPolicy) -> Vec<Cause> {
    let mut errors: Vec<Cause> = compile(policy);
    let no_rules = policy
        .match_constraints
        .as_ref()
        .and_then(|m| m.resource_rules.as_ref())
        .is_none_or(Vec::is_empty);
    if no_rules {
        errors.push(
            FieldError::required(
                "spec.matchConstraints",
                "a matchConstraints with at least one resource rule is required",
            )
            .cause(),
        );
    }
    namespaced_rules(
        &mut errors,
        policy.namespaced().then(|| namespaced_check_texts(policy)),
    );
    errors
}

/// The end of every Kyverno policy validation: for a namespaced policy (`texts`: its
/// expressions as the compiler lists them, `vpolExpressions` / `mpolExpressions`),
/// pkg/cel/compiler/http.go `ExpressionsUseGlobalContext` and `ExpressionsUseHTTP`: an
/// identifier of that name anywhere in a parsed expression; `http` is refused unless Kyverno
/// runs with --allowHTTPInNamespacedPolicies (off by default, pkg/toggle/toggle.go
/// `AllowHTTPInNamespacedPolicies`). Then `ErrorList.ToAggregate`, which drops repeated
/// messages.
pub(super) fn namespaced_rules(errors: &mut Vec<Cause>, texts: Option<Vec<&str>>) {
    if let Some(texts) = texts {
        if uses_ident(&texts, "globalContext") {
            errors.push(
                FieldError::forbidden(
                    "spec",
                    "globalContext.* is not allowed in namespaced policies",
                )
                .cause(),
            );
        }
        if uses_ident(&texts, "http") {
            errors.push(
                FieldError::forbidden(
                    "spec",
                    "http.* is not allowed in namespaced policies; set --allowHTTPInNamespacedPolicies to enable",
                )
                .cause(),
            );
        }
    }
    let mut seen = std::collections::HashSet::new();
    errors.retain(|e| seen.insert(e.text.clone()));
}

/// `vpolExpressions`: the texts the namespaced checks read.
fn namespaced_check_texts(policy: &ValidatingPolicy) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    out.extend(policy.variables.iter().map(|v| v.expression.as_str()));
    out.extend(
        policy
            .match_conditions
            .iter()
            .map(|m| m.expression.as_str()),
    );
    for v in &policy.validations {
        out.push(&v.expression);
        out.push(v.message_expression.as_deref().unwrap_or_default());
    }
    out.extend(
        policy
            .audit_annotations
            .iter()
            .map(|a| a.value_expression.as_str()),
    );
    out
}

/// Whether an expression that parses names the identifier `name` (`expressionsUseIdent`).
fn uses_ident(texts: &[&str], name: &str) -> bool {
    use cel::common::ast::Expr;
    texts.iter().filter(|t| !t.is_empty()).any(|t| {
        let Ok(parsed) = crate::cel::parse::parse(t) else {
            return false;
        };
        let mut found = false;
        crate::cel::parse::walk(parsed.expr(), |e| {
            if let Expr::Ident(n) = &e.expr
                && n == name
            {
                found = true;
            }
        });
        found
    })
}

/// What the output type of a site must be (`IsExactType`: `dyn` is refused).
#[derive(Clone, Copy)]
enum Output {
    /// `bool` (conditions, validations: `CompileMatchCondition`, `CompileValidation`).
    Bool,
    /// `string` (message expressions).
    String,
    /// `string` or `null_type` (`CompileAuditAnnotation`).
    StringOrNull,
    /// `list(JSONPatch)` (a mutation's JSON patch: `CompileMutation` with
    /// `cel.ListType(jsonPatchType)`; the message names `TypeName()`, `list`).
    JsonPatches,
    /// `Object` (a mutation's apply configuration: `applyConfigObjectType`).
    ApplyConfiguration,
    /// `map(string, google.protobuf.Any)` (an mpol's `targetMatchConstraints.expression`,
    /// mpol/compiler/compiler.go `Compile`).
    TargetMap,
}

impl Output {
    /// Whether `t` is the output type, else the message Kyverno gives.
    fn refusal(self, t: &Type) -> Option<&'static str> {
        let (ok, message) = match self {
            Output::Bool => (
                t.is_exact(&Type::bool()),
                "output is expected to be of type bool",
            ),
            Output::String => (
                t.is_exact(&Type::string()),
                "output is expected to be of type string",
            ),
            Output::StringOrNull => (
                t.is_exact(&Type::string()) || t.is_exact(&Type::null()),
                "output is expected to be either of type string or null_type",
            ),
            Output::JsonPatches => (
                t.is_exact(&Type::list(Type::object(
                    crate::k8s_env::mutation::JSONPATCH_TYPE,
                ))),
                "output is expected to be of type list",
            ),
            Output::ApplyConfiguration => (
                t.is_exact(&Type::object(crate::k8s_env::mutation::OBJECT_TYPE)),
                "output is expected to be of type Object",
            ),
            Output::TargetMap => (
                t.is_exact(&Type::map(Type::string(), Type::any())),
                "output type must be a map",
            ),
        };
        (!ok).then_some(message)
    }
}

/// One site compiled as `pkg/cel/compiler/compiler.go` compiles it (`env.Compile`, then the
/// exact output type): `None`, or the `field.Invalid` error text.
fn compile_site(
    env: &crate::k8s_env::PolicyEnv,
    field: String,
    text: &str,
    output: Output,
) -> Option<Cause> {
    let compiled = match env.compile(text) {
        Ok(c) => c,
        Err(issues) => {
            return Some(
                FieldError::invalid(field, text, issues.to_display_string())
                    .with_cel(CelPos::first_of(&issues))
                    .cause(),
            );
        }
    };
    let message = output.refusal(compiled.result_type())?;
    Some(FieldError::invalid(field, text, message).cause())
}

/// `pkg/cel/compiler/compiler.go` `CompileVariables` (the mpol and dpol compilers): every
/// variable compiled, the errors of all; `CompileVariable` registers a variable's type only
/// when it compiles, so a later variable reading one that failed gets `undefined field`
/// (Kubernetes would declare it `dyn`): a failing variable is not added.
pub(super) fn compile_variables(
    env: &mut crate::k8s_env::PolicyEnv,
    variables: &[Variable],
) -> Vec<Cause> {
    let mut errors = Vec::new();
    for (i, v) in variables.iter().enumerate() {
        match env.compile(&v.expression) {
            Ok(_) => {
                env.add_variable(&v.name, &v.expression);
            }
            Err(issues) => {
                let field = format!("spec.variables[{i}].expression");
                errors.push(
                    FieldError::invalid(field, &v.expression, issues.to_display_string())
                        .with_cel(CelPos::first_of(&issues))
                        .cause(),
                );
            }
        }
    }
    errors
}

/// `CompileMatchConditions` over the list `spec.<at>`: each condition compiled (exactly
/// `bool`), the errors of all.
pub(super) fn compile_conditions(
    env: &crate::k8s_env::PolicyEnv,
    list: &[MatchCondition],
    at: &str,
) -> Vec<Cause> {
    list.iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let field = format!("spec.{at}[{i}].expression");
            compile_site(env, field, &m.expression, Output::Bool)
        })
        .collect()
}

/// The compile errors of `(*compilerImpl).Compile`: none, or the placeholder (Kubernetes
/// mode) and the first error.
pub fn compile(policy: &ValidatingPolicy) -> Vec<Cause> {
    let json = policy.mode == MODE_JSON;
    let fail = |e: Cause| -> Vec<Cause> {
        if json {
            vec![e]
        } else {
            vec![Cause::new("", COMPILE_PLACEHOLDER), e]
        }
    };
    let mut env = match env::verdict_env(policy.namespaced()) {
        Ok(e) => e,
        Err(e) => {
            return fail(
                FieldError::internal("", format!("validating policy compiler 1.0 error: {e}"))
                    .cause(),
            );
        }
    };
    let one = compile_site;
    for (i, m) in policy.match_conditions.iter().enumerate() {
        let field = format!("spec.matchConditions[{i}].expression");
        if let Some(e) = one(&env, field, &m.expression, Output::Bool) {
            return fail(e);
        }
    }
    for (i, v) in policy.variables.iter().enumerate() {
        let outcome = env.add_variable(&v.name, &v.expression);
        if let Err(issues) = outcome.result {
            let field = format!("spec.variables[{i}].expression");
            return fail(
                FieldError::invalid(field, &v.expression, issues.to_display_string())
                    .with_cel(CelPos::first_of(&issues))
                    .cause(),
            );
        }
    }
    for (i, v) in policy.validations.iter().enumerate() {
        let field = format!("spec.validations[{i}].expression");
        if let Some(e) = one(&env, field, &v.expression, Output::Bool) {
            return fail(e);
        }
        if let Some(m) = v.message_expression.as_deref().filter(|m| !m.is_empty()) {
            let field = format!("spec.validations[{i}].messageExpression");
            if let Some(e) = one(&env, field, m, Output::String) {
                return fail(e);
            }
        }
    }
    if !json {
        for (i, a) in policy.audit_annotations.iter().enumerate() {
            let field = format!("spec.auditAnnotations[{i}].valueExpression");
            if let Some(e) = one(&env, field, &a.value_expression, Output::StringOrNull) {
                return fail(e);
            }
        }
    }
    Vec::new()
}

/// The ValidatingAdmissionPolicy vapcheck type-checks for the policy: its matching, match
/// conditions, variables, validations and audit annotations, under its name (no `paramKind`:
/// Kyverno's validating policies have no parameters).
pub fn as_admission_policy(policy: &ValidatingPolicy) -> ValidatingAdmissionPolicy {
    fn some_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
        (!v.is_empty()).then_some(v)
    }
    ValidatingAdmissionPolicy {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(policy.name.clone()),
            generation: None,
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: policy.failure_policy.clone(),
            match_constraints: policy.match_constraints.clone(),
            match_conditions: some_vec(policy.match_conditions.clone()),
            variables: some_vec(policy.variables.clone()),
            validations: some_vec(policy.validations.clone()),
            audit_annotations: some_vec(policy.audit_annotations.clone()),
            ..Default::default()
        }),
        status: None,
    }
}

/// Why a policy's expressions are not type-checked against kinds: its evaluation mode is not
/// `Kubernetes`, so `object` is not an object of the kinds `matchConstraints` names (JSON:
/// any JSON payload; `Envoy`, `HTTP`: kyverno-authz's requests). `None`: checked.
pub fn not_checked_reason(policy: &ValidatingPolicy) -> Option<String> {
    mode_not_checked(&policy.mode)
}

/// [`not_checked_reason`] for an evaluation mode.
fn mode_not_checked(mode: &str) -> Option<String> {
    (mode != MODE_KUBERNETES).then(|| {
        format!(
            "evaluation mode {mode}: `object` is not an object of the matched kinds, no schema types it"
        )
    })
}

/// vapcheck's type checking of the policy: [`as_admission_policy`] checked by
/// [`crate::policy::check_policy`] in Kyverno's environment ([`env::base_env`]), `object`
/// and `oldObject` typed by the kinds `matchConstraints` selects. The fields are the policy's
/// own. Left out: the runtime-safety findings and the cost estimates (kube-apiserver's
/// evaluation and cost limits, not Kyverno's). A policy whose mode is not `Kubernetes` is not
/// checked ([`not_checked_reason`]).
pub fn type_check(
    policy: &ValidatingPolicy,
    options: &crate::policy::CheckOptions,
    backends: &crate::policy::Backends<'_>,
) -> crate::policy::PolicyStatus {
    let vap = as_admission_policy(policy);
    typed_status(
        env::checker(policy.namespaced()),
        not_checked_reason(policy).map(|r| ("spec.evaluation.mode".to_owned(), r)),
        options,
        backends,
        &|f| Some(f.to_owned()),
        |options, backends| crate::policy::check_policy(&vap, options, backends),
    )
}

/// The typed check of a Kyverno policy by `check` (the analysis of the Kubernetes policy it
/// resembles) with Kyverno's checker (`checker`, of the policy kind's environment) in place
/// of `backends.checker` and no cost estimates; or, with `not_checked`, the field and the
/// reason it is not checked. The findings' fields are moved to the policy's by `remap`.
fn typed_status(
    checker: Result<crate::engine::KubeChecker, crate::cel::EnvError>,
    not_checked: Option<(String, String)>,
    options: &crate::policy::CheckOptions,
    backends: &crate::policy::Backends<'_>,
    remap: &dyn Fn(&str) -> Option<String>,
    check: impl FnOnce(
        &crate::policy::CheckOptions,
        &crate::policy::Backends<'_>,
    ) -> crate::policy::PolicyStatus,
) -> crate::policy::PolicyStatus {
    use crate::policy::{PolicyStatus, SkipReason, SkipSubject, Skipped};
    if let Some((field, reason)) = not_checked {
        let skipped = vec![Skipped {
            subject: SkipSubject::Field(field),
            reason: SkipReason::SchemaError(reason),
        }];
        return PolicyStatus {
            conditions: vec![crate::policy::status::type_checked_condition(
                None,
                &[],
                &skipped,
                false,
            )],
            skipped,
            ..Default::default()
        };
    }
    let checker = match checker {
        Ok(c) => c,
        Err(e) => {
            return PolicyStatus {
                skipped: vec![Skipped {
                    subject: SkipSubject::Field("spec".into()),
                    reason: SkipReason::SchemaError(format!("Kyverno's environment: {e}")),
                }],
                ..Default::default()
            };
        }
    };
    let overlay = crate::policy::Backends {
        checker: &checker,
        ..*backends
    };
    let options = crate::policy::CheckOptions {
        estimate_costs: false,
        ..*options
    };
    let mut checked = check(&options, &overlay);
    let mut status = PolicyStatus {
        observed_generation: None,
        checked_kinds: std::mem::take(&mut checked.checked_kinds),
        skipped: std::mem::take(&mut checked.skipped),
        expressions_checked: checked.expressions_checked,
        conditions: std::mem::take(&mut checked.conditions),
        ..Default::default()
    };
    status.take_remapped(&mut checked, remap);
    status
}

#[cfg(test)]
mod tests;
