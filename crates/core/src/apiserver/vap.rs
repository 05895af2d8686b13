//! kube-apiserver's defaulting and validation of ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding on create and update, in the API server's order.
//!
//! Sources (Kubernetes 1.37.1):
//! * `pkg/apis/admissionregistration/v1/defaults.go` and `zz_generated.defaults.go`
//!   (`SetObjectDefaults_ValidatingAdmissionPolicy`, `..._ValidatingAdmissionPolicyBinding`);
//! * `pkg/apis/admissionregistration/validation/validation.go` (each function is named where
//!   it is reproduced);
//! * `pkg/apis/admissionregistration/validation/static_suffix.go` (`ValidateStaticSuffix`);
//! * `pkg/registry/admissionregistration/validatingadmissionpolicy{,binding}/strategy.go`
//!   (`Validate`, `ValidateUpdate`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind, ParamRef,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicySpec,
    Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use crate::k8s_env::apiserver::{self as env, Composition, Decls, EnvKind, Parses};

use super::field::FieldError;
use super::meta::{MetaContext, validate_labels, validate_object_meta};
use super::names::{
    is_dns1035_label, is_dns1123_subdomain, is_path_segment_name, is_qualified_name,
    name_is_dns_subdomain,
};

/// `StaticConfigSuffix`: names reserved for manifest-based admission configuration.
pub const STATIC_CONFIG_SUFFIX: &str = ".static.k8s.io";

/// `maxAuditAnnotations`.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// `maxAuditAnnotationValueExpressionLength`: 5 KiB.
const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

/// The API server being reproduced: its minor version selects the CEL libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// `1.<minor>`.
    pub minor: u32,
}

impl Server {
    /// The pinned release (1.37).
    pub const PINNED: Server = Server { minor: 37 };

    pub(super) fn lib_minor(self, kind: EnvKind) -> u32 {
        env::library_minor(self.minor, kind)
    }

    /// `ManifestBasedAdmissionControlConfig` (beta, on by default, from 1.37): the
    /// `.static.k8s.io` suffix is reserved on create.
    pub(super) fn reserves_static_suffix(self) -> bool {
        self.minor >= 37
    }
}

/// The expressions of the stored object an update replaces (`preexistingExpressions`,
/// `findValidatingPolicyPreexistingExpressions`, `findMutatingPolicyPreexistingExpressions`):
/// these compile in the StoredExpressions environment. Shared with [`super::map`].
#[derive(Debug, Default, Clone)]
pub struct Preexisting {
    pub(super) match_conditions: BTreeSet<String>,
    pub(super) validations: BTreeSet<String>,
    pub(super) message_expressions: BTreeSet<String>,
    pub(super) audit_annotation_values: BTreeSet<String>,
    /// `applyConfigurationExpressions` (a MutatingAdmissionPolicy's; upstream also looks its
    /// JSON patch expressions up here).
    pub(super) apply_configurations: BTreeSet<String>,
}

impl Preexisting {
    /// `findValidatingPolicyPreexistingExpressions` of the stored spec.
    pub(super) fn of_validating(old: Option<&ValidatingAdmissionPolicySpec>) -> Self {
        let mut p = Self::default();
        let Some(old) = old else {
            return p;
        };
        for mc in old.match_conditions.iter().flatten() {
            p.match_conditions.insert(mc.expression.clone());
        }
        for v in old.validations.iter().flatten() {
            p.validations.insert(v.expression.clone());
            if let Some(m) = v.message_expression.as_deref()
                && !m.is_empty()
            {
                p.message_expressions.insert(m.to_owned());
            }
        }
        for a in old.audit_annotations.iter().flatten() {
            p.audit_annotation_values.insert(a.value_expression.clone());
        }
        p
    }

    pub(super) fn kind(set: &BTreeSet<String>, e: &str) -> EnvKind {
        if set.contains(e) {
            EnvKind::Stored
        } else {
            EnvKind::New
        }
    }
}

/// `validationOptions` (shared with [`super::map`]).
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Validated by the static-manifest loader rather than the REST API.
    pub(super) static_manifest: bool,
    pub(super) ignore_match_conditions: bool,
    pub(super) allow_params_in_match_conditions: bool,
    pub(super) preexisting: Preexisting,
    /// The parses of the policy's expression texts (shared by every clone, so by every
    /// compiler of one validation).
    pub(super) parses: Arc<Parses>,
}

/// `SetObjectDefaults_ValidatingAdmissionPolicy`.
pub fn default_policy(p: &mut ValidatingAdmissionPolicy) {
    let spec = p.spec.get_or_insert_with(Default::default);
    default_policy_spec(&mut spec.failure_policy, spec.match_constraints.as_mut());
}

/// What the defaulters of both policy kinds do to their spec: `failurePolicy` `Fail`
/// (k8s.io/kubernetes v1.37.1 pkg/apis/admissionregistration/v1/defaults.go
/// `SetDefaults_ValidatingAdmissionPolicySpec`, `SetDefaults_MutatingAdmissionPolicySpec`),
/// then the match constraints' defaults (`SetDefaults_MatchResources`).
pub(super) fn default_policy_spec(
    failure_policy: &mut Option<String>,
    match_constraints: Option<&mut MatchResources>,
) {
    failure_policy.get_or_insert_with(|| "Fail".into());
    if let Some(mc) = match_constraints {
        default_match_resources(mc);
    }
}

/// `SetObjectDefaults_ValidatingAdmissionPolicyBinding`.
pub fn default_binding(b: &mut ValidatingAdmissionPolicyBinding) {
    if let Some(mr) = b.spec.match_resources.as_mut() {
        default_match_resources(mr);
    }
}

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` of every rule.
pub(super) fn default_match_resources(mr: &mut MatchResources) {
    if mr.match_policy.is_none() {
        mr.match_policy = Some("Equivalent".into());
    }
    if mr.namespace_selector.is_none() {
        mr.namespace_selector = Some(LabelSelector::default());
    }
    if mr.object_selector.is_none() {
        mr.object_selector = Some(LabelSelector::default());
    }
    for r in mr
        .resource_rules
        .iter_mut()
        .flatten()
        .chain(mr.exclude_resource_rules.iter_mut().flatten())
    {
        if r.scope.is_none() {
            r.scope = Some("*".into());
        }
    }
}

/// What `rest.ValidateCreate` / `rest.ValidateUpdate` hand to `errors.NewInvalid`: the
/// strategy's errors pass through `ValidateDeclarativelyWithMigrationChecks`, whose
/// `validate.FilterCoveredHandwrittenErrors` calls `field.ErrorList.Filter`, which goes through
/// `ToAggregate` (apimachinery field/errors.go): an error whose text (`%v`) equals an earlier
/// one's is dropped. Shared with [`super::map`].
pub(super) fn as_returned(errs: Vec<FieldError>) -> Vec<FieldError> {
    let mut seen = BTreeSet::new();
    errs.into_iter()
        .filter(|e| seen.insert(e.to_string()))
        .collect()
}

/// `ValidateStaticSuffix(name, metadata.name)`.
pub(super) fn validate_static_suffix(name: Option<&str>) -> Vec<FieldError> {
    match name {
        Some(n) if n.ends_with(STATIC_CONFIG_SUFFIX) => vec![FieldError::invalid(
            "metadata.name",
            n,
            format!(
                "names ending with \"{STATIC_CONFIG_SUFFIX}\" are reserved for static manifest-based configurations and cannot be managed via the API"
            ),
        )],
        _ => Vec::new(),
    }
}

/// `validateValidatingAdmissionPolicy`.
pub(super) fn validate_policy(
    p: &ValidatingAdmissionPolicy,
    opts: &Options,
    server: Server,
) -> Vec<FieldError> {
    let (context, name) = if opts.static_manifest {
        (MetaContext::StaticManifest, p.metadata.name.clone())
    } else {
        (
            MetaContext::RestCreate,
            super::meta::effective_name(&p.metadata),
        )
    };
    let mut errs = validate_object_meta(&p.metadata, context);
    let spec = p.spec.clone().unwrap_or_default();
    errs.extend(validate_policy_spec(
        name.as_deref().unwrap_or_default(),
        &spec,
        opts.clone(),
        server,
    ));
    errs
}

/// The CEL compiler of one policy: stateless, or composited when the policy has variables
/// (`createCompiler(len(spec.Variables) > 0)`).
pub(super) struct Compiler {
    pub(super) server: Server,
    pub(super) composition: Option<Composition>,
    /// Where the expressions' parses come from ([`Options::parses`]).
    pub(super) parses: Arc<Parses>,
}

/// What an expression must evaluate to (`ExpressionAccessor.ReturnTypes`).
#[derive(Clone, Copy)]
pub(super) enum Returns {
    /// `ValidationCondition`, `MatchCondition`: `bool`.
    Bool,
    /// `MessageExpressionCondition`: `string`.
    String,
    /// `AuditAnnotationCondition`: `string` or `null`.
    StringOrNull,
    /// `Variable`: anything.
    Any,
    /// `ApplyConfigurationCondition` (mutating/patch/smd.go): `Object`.
    Object,
    /// `JSONPatchCondition` (mutating/patch/json_patch.go): `list(JSONPatch)`.
    JsonPatches,
}

/// Why `CompileCELExpression` failed, by its `apiservercel.ErrorType`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CompileFailure {
    /// `ErrorTypeInvalid`: the detail of a `field.Invalid` with the expression as value, and
    /// the position of the first CEL error it prints.
    Invalid(String, Option<super::field::CelPos>),
    /// `ErrorTypeInternal`: the detail of a `field.InternalError` (k8s.io/kubernetes v1.37.1
    /// `pkg/apis/admissionregistration/validation`, `convertCELErrorToValidationError`).
    Internal(String),
}

impl CompileFailure {
    /// The field error kube-apiserver answers for the expression `value` at `field`.
    pub(super) fn field_error(self, field: impl Into<String>, value: &str) -> FieldError {
        match self {
            CompileFailure::Invalid(detail, cel) => {
                FieldError::invalid(field, value, detail).with_cel(cel)
            }
            CompileFailure::Internal(detail) => FieldError::internal(field, detail),
        }
    }
}

impl Compiler {
    /// `CompileCELExpression`: the failure by its error type; the output type (when it
    /// compiled) is returned beside for the composition.
    pub(super) fn compile(
        &self,
        expression: &str,
        decls: Decls,
        kind: EnvKind,
        returns: Returns,
    ) -> (Result<(), CompileFailure>, Option<crate::cel::Type>) {
        let lib = self.server.lib_minor(kind);
        let compiled = match env::compile(
            lib,
            decls,
            self.composition.as_ref(),
            expression,
            &self.parses,
        ) {
            Ok(r) => r,
            Err(e) => {
                return (
                    // compile.go: `ErrorTypeInternal`.
                    Err(CompileFailure::Internal(format!(
                        "unexpected error loading CEL environment: {e}"
                    ))),
                    None,
                );
            }
        };
        let compiled = match compiled {
            Ok(c) => c,
            Err(issues) => {
                return (
                    Err(CompileFailure::Invalid(
                        format!("compilation failed: {}", issues.to_display_string()),
                        super::field::CelPos::first_of(&issues),
                    )),
                    None,
                );
            }
        };
        let out = compiled.result_type().clone();
        use crate::cel::TypeKind as K;
        let ok = match returns {
            Returns::Bool => matches!(out.type_kind(), K::Bool),
            Returns::String => matches!(out.type_kind(), K::String),
            Returns::StringOrNull => matches!(out.type_kind(), K::String | K::Null),
            Returns::Any => true,
            Returns::Object => matches!(out.type_kind(), K::Struct(n) if &**n == env::OBJECT_TYPE),
            Returns::JsonPatches => matches!(out.type_kind(),
                K::List(e) if matches!(e.type_kind(), K::Struct(n) if &**n == env::JSONPATCH_TYPE)),
        };
        if ok {
            // `env.Program`: what cel-go's planner rejects with Kubernetes' `OptOptimize`
            // (k8s_env::plan).
            let planned = match self.parses.parse(expression) {
                Ok(parsed) => crate::k8s_env::plan::plan_error(parsed.expr()),
                Err(_) => None,
            };
            if let Some(e) = planned {
                return (
                    Err(CompileFailure::Internal(format!(
                        "program instantiation failed: {e}"
                    ))),
                    Some(out),
                );
            }
            return (Ok(()), Some(out));
        }
        let got = env::go_type_string(&out);
        let reason = match returns {
            Returns::Bool => format!("must evaluate to bool but got {got}"),
            Returns::String => format!("must evaluate to string but got {got}"),
            Returns::StringOrNull => {
                format!("must evaluate to one of [string null_type] but got {got}")
            }
            Returns::Object => format!("must evaluate to {} but got {got}", env::OBJECT_TYPE),
            Returns::JsonPatches => {
                format!(
                    "must evaluate to list({}) but got {got}",
                    env::JSONPATCH_TYPE
                )
            }
            Returns::Any => unreachable!("any type is accepted above"),
        };
        (Err(CompileFailure::Invalid(reason, None)), Some(out))
    }
}

/// `validateValidatingAdmissionPolicySpec`.
fn validate_policy_spec(
    name: &str,
    spec: &ValidatingAdmissionPolicySpec,
    mut opts: Options,
    server: Server,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let variables = spec.variables.clone().unwrap_or_default();
    let mut compiler = Compiler {
        server,
        composition: (!variables.is_empty()).then(Composition::new),
        parses: Arc::clone(&opts.parses),
    };
    errs.extend(validate_failure_policy(spec.failure_policy.as_deref()));
    errs.extend(validate_param_kind_of(spec.param_kind.as_ref(), &mut opts));
    errs.extend(validate_match_constraints(spec.match_constraints.as_ref()));
    let has_params = spec.param_kind.is_some();
    errs.extend(validate_conditions_and_variables(
        &mut compiler,
        spec.match_conditions.as_deref().unwrap_or_default(),
        &variables,
        has_params,
        &opts,
    ));
    let validations = spec.validations.as_deref().unwrap_or_default();
    let audit = spec.audit_annotations.as_deref();
    if validations.is_empty() && audit.is_none_or(<[_]>::is_empty) {
        let both = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", both));
        errs.push(FieldError::required("spec.auditAnnotations", both));
        return errs;
    }
    for (i, v) in validations.iter().enumerate() {
        errs.extend(validate_validation(&compiler, v, has_params, &opts, i));
    }
    if let Some(audit) = audit {
        if audit.len() > MAX_AUDIT_ANNOTATIONS {
            // The internal type has no JSON tags: encoding/json uses the Go field names.
            let value = serde_json::Value::Array(
                audit
                    .iter()
                    .map(|a| json!({"Key": a.key, "ValueExpression": a.value_expression}))
                    .collect(),
            );
            errs.push(FieldError::invalid_json(
                "spec.auditAnnotations",
                value,
                format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
            ));
        }
        let mut keys = BTreeSet::new();
        for (i, a) in audit.iter().enumerate() {
            errs.extend(validate_audit_annotation(
                &compiler, name, a, has_params, &opts, i,
            ));
            if keys.contains(&a.key) {
                errs.push(FieldError::duplicate(
                    format!("spec.auditAnnotations[{i}].key"),
                    &a.key,
                ));
            }
            keys.insert(a.key.clone());
        }
    }
    errs
}

/// `spec.failurePolicy` of either policy kind: required, one of `supportedFailurePolicies`
/// (`Fail`, `Ignore`).
pub(super) fn validate_failure_policy(failure_policy: Option<&str>) -> Option<FieldError> {
    match failure_policy {
        None => Some(FieldError::required("spec.failurePolicy", "")),
        Some("Fail" | "Ignore") => None,
        Some(other) => Some(FieldError::not_supported(
            "spec.failurePolicy",
            other,
            &["Fail", "Ignore"],
        )),
    }
}

/// `spec.paramKind` of either policy kind, when set; a policy with one may read `params` in
/// its match conditions.
pub(super) fn validate_param_kind_of(
    param_kind: Option<&ParamKind>,
    opts: &mut Options,
) -> Vec<FieldError> {
    let Some(pk) = param_kind else {
        return Vec::new();
    };
    opts.allow_params_in_match_conditions = true;
    validate_param_kind(pk, "spec.paramKind")
}

/// `spec.matchConstraints` of either policy kind: required, and with resource rules.
pub(super) fn validate_match_constraints(mc: Option<&MatchResources>) -> Vec<FieldError> {
    let Some(mc) = mc else {
        return vec![FieldError::required("spec.matchConstraints", "")];
    };
    let mut errs = validate_match_resources(mc, "spec.matchConstraints");
    if mc.resource_rules.as_ref().is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(
            "spec.matchConstraints.resourceRules",
            "",
        ));
    }
    errs
}

/// `spec.matchConditions` (unless [`Options::ignore_match_conditions`]) and `spec.variables`
/// of either policy kind, in that order.
pub(super) fn validate_conditions_and_variables(
    compiler: &mut Compiler,
    match_conditions: &[MatchCondition],
    variables: &[Variable],
    has_params: bool,
    opts: &Options,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !opts.ignore_match_conditions {
        errs.extend(validate_match_conditions(
            match_conditions,
            "spec.matchConditions",
            opts,
            compiler.server,
        ));
    }
    for (i, v) in variables.iter().enumerate() {
        errs.extend(validate_variable(compiler, v, has_params, opts, i));
    }
    errs
}

/// `spec.policyName` of either binding kind: required, a DNS subdomain.
pub(super) fn validate_policy_name(policy_name: &str) -> Vec<FieldError> {
    if policy_name.is_empty() {
        return vec![FieldError::required("spec.policyName", "")];
    }
    name_is_dns_subdomain(policy_name, false)
        .into_iter()
        .map(|msg| FieldError::invalid("spec.policyName", policy_name, msg))
        .collect()
}

/// `validateParamKind`.
pub(super) fn validate_param_kind(pk: &ParamKind, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_version = pk.api_version.as_deref().unwrap_or_default();
    let av_path = format!("{path}.apiVersion");
    if api_version.is_empty() {
        errs.push(FieldError::required(&av_path, ""));
    } else {
        match parse_group_version(api_version) {
            Err(e) => errs.push(FieldError::invalid(&av_path, api_version, e)),
            Ok((group, version)) => {
                if !group.is_empty() {
                    let e = is_dns1123_subdomain(group);
                    if !e.is_empty() {
                        errs.push(FieldError::invalid(&av_path, group, e.join(",")));
                    }
                }
                if version.is_empty() {
                    errs.push(FieldError::invalid(
                        &av_path,
                        api_version,
                        "version must be specified",
                    ));
                } else {
                    let e = is_dns1035_label(version);
                    if !e.is_empty() {
                        errs.push(FieldError::invalid(&av_path, version, e.join(",")));
                    }
                }
            }
        }
    }
    let kind = pk.kind.as_deref().unwrap_or_default();
    if kind.is_empty() {
        errs.push(FieldError::required(format!("{path}.kind"), ""));
    } else {
        let e = is_dns1035_label(&kind.to_lowercase());
        if !e.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.kind"),
                kind,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    e.join(",")
                ),
            ));
        }
    }
    errs
}

/// `parseGroupVersion` of validation.go.
fn parse_group_version(gv: &str) -> Result<(&str, &str), String> {
    if gv.is_empty() || gv == "/" {
        return Ok(("", ""));
    }
    match gv.matches('/').count() {
        0 => Ok(("", gv)),
        1 => {
            let (g, v) = gv.split_once('/').unwrap_or(("", gv));
            Ok((g, v))
        }
        _ => Err(format!("unexpected GroupVersion string: {gv}")),
    }
}

/// `validateMatchResources`.
pub(super) fn validate_match_resources(mr: &MatchResources, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match mr.match_policy.as_deref() {
        None => errs.push(FieldError::required(format!("{path}.matchPolicy"), "")),
        Some("Exact" | "Equivalent") => {}
        Some(other) => errs.push(FieldError::not_supported(
            format!("{path}.matchPolicy"),
            other,
            &["Equivalent", "Exact"],
        )),
    }
    for (field, sel) in [
        ("namespaceSelector", &mr.namespace_selector),
        ("objectSelector", &mr.object_selector),
    ] {
        match sel {
            None => errs.push(FieldError::required(format!("{path}.{field}"), "")),
            Some(s) => errs.extend(validate_label_selector(s, &format!("{path}.{field}"))),
        }
    }
    for (i, r) in mr.resource_rules.iter().flatten().enumerate() {
        errs.extend(validate_named_rule(
            r,
            &format!("{path}.resourceRules[{i}]"),
        ));
    }
    for (i, r) in mr.exclude_resource_rules.iter().flatten().enumerate() {
        errs.extend(validate_named_rule(
            r,
            &format!("{path}.excludeResourceRules[{i}]"),
        ));
    }
    errs
}

/// `metav1validation.ValidateLabelSelector` with default options (strict operators and
/// values).
fn validate_label_selector(s: &LabelSelector, path: &str) -> Vec<FieldError> {
    validate_label_selector_with(s, path, true)
}

/// `ValidateLabelSelector` with `AllowInvalidLabelValueInSelector` = `!check_values` (the
/// values of `matchExpressions` are checked only when `check_values`).
pub(super) fn validate_label_selector_with(
    s: &LabelSelector,
    path: &str,
    check_values: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = &s.match_labels {
        errs.extend(validate_labels(labels, &format!("{path}.matchLabels")));
    }
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{p}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{p}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid_json(
                format!("{p}.operator"),
                json!(other),
                "not a valid selector operator",
            )),
        }
        for msg in is_qualified_name(&e.key) {
            errs.push(FieldError::invalid(format!("{p}.key"), &e.key, msg));
        }
        for (j, v) in values.iter().enumerate().filter(|_| check_values) {
            for msg in super::names::is_label_value(v) {
                errs.push(FieldError::invalid(format!("{p}.values[{j}]"), v, msg));
            }
        }
    }
    errs
}

/// `validateNamedRuleWithOperations`.
pub(super) fn validate_named_rule(r: &NamedRuleWithOperations, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, n) in r.resource_names.iter().flatten().enumerate() {
        let p = format!("{path}.resourceNames[{i}]");
        for msg in is_path_segment_name(n) {
            errs.push(FieldError::invalid(&p, n, msg));
        }
        if !names.insert(n.as_str()) {
            errs.push(FieldError::duplicate(&p, n));
        }
    }
    // validateRuleWithOperations
    let ops = r.operations.as_deref().unwrap_or_default();
    if ops.is_empty() {
        errs.push(FieldError::required(format!("{path}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(FieldError::invalid_json(
            format!("{path}.operations"),
            json!(ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (i, o) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&o.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{path}.operations[{i}]"),
                o,
                &OPERATIONS,
            ));
        }
    }
    errs.extend(validate_rule(r, path));
    errs
}

/// `validateRule` with `allowSubResource = true`.
fn validate_rule(r: &NamedRuleWithOperations, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let groups = r.api_groups.as_deref().unwrap_or_default();
    if groups.is_empty() {
        errs.push(FieldError::required(format!("{path}.apiGroups"), ""));
    }
    if groups.len() > 1 && groups.iter().any(|g| g == "*") {
        errs.push(FieldError::invalid_json(
            format!("{path}.apiGroups"),
            json!(groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = r.api_versions.as_deref().unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(format!("{path}.apiVersions"), ""));
    }
    if versions.len() > 1 && versions.iter().any(|v| v == "*") {
        errs.push(FieldError::invalid_json(
            format!("{path}.apiVersions"),
            json!(versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(format!("{path}.apiVersions[{i}]"), ""));
        }
    }
    errs.extend(validate_resources(
        r.resources.as_deref().unwrap_or_default(),
        &format!("{path}.resources"),
    ));
    if let Some(scope) = r.scope.as_deref()
        && !matches!(scope, "*" | "Cluster" | "Namespaced")
    {
        errs.push(FieldError::not_supported(
            format!("{path}.scope"),
            scope,
            &["*", "Cluster", "Namespaced"],
        ));
    }
    errs
}

/// `validateResources`.
fn validate_resources(resources: &[String], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut with_wildcard_sub = BTreeSet::new();
    let mut sub_with_wildcard_res = BTreeSet::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut without_sub = false;
    for (i, rs) in resources.iter().enumerate() {
        if rs.is_empty() {
            errs.push(FieldError::required(format!("{path}[{i}]"), ""));
            continue;
        }
        if rs == "*/*" {
            double_wildcard = true;
        }
        if rs == "*" {
            single_wildcard = true;
        }
        let Some((res, sub)) = rs.split_once('/') else {
            without_sub = rs != "*";
            continue;
        };
        if with_wildcard_sub.contains(res) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                rs,
                format!("if '{res}/*' is present, must not specify {rs}"),
            ));
        }
        if sub_with_wildcard_res.contains(sub) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                rs,
                format!("if '*/{sub}' is present, must not specify {rs}"),
            ));
        }
        if sub == "*" {
            with_wildcard_sub.insert(res);
        }
        if res == "*" {
            sub_with_wildcard_res.insert(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errs.push(FieldError::invalid_json(
            path,
            json!(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && without_sub {
        errs.push(FieldError::invalid_json(
            path,
            json!(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

/// `validateMatchConditions` (stateless compiler: no `variables`).
pub(super) fn validate_match_conditions(
    conditions: &[k8s_openapi::api::admissionregistration::v1::MatchCondition],
    path: &str,
    opts: &Options,
    server: Server,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if conditions.len() > 64 {
        errs.push(FieldError::too_many(path, conditions.len(), 64));
    }
    let stateless = Compiler {
        server,
        composition: None,
        parses: Arc::clone(&opts.parses),
    };
    let mut names = BTreeSet::new();
    for (i, mc) in conditions.iter().enumerate() {
        let p = format!("{path}[{i}]");
        // validateMatchCondition: the trimmed expression is compiled and shown.
        let trimmed = go_trim_space(&mc.expression);
        if trimmed.is_empty() {
            errs.push(FieldError::required(format!("{p}.expression"), ""));
        } else {
            let kind = Preexisting::kind(&opts.preexisting.match_conditions, trimmed);
            let decls = Decls {
                has_params: opts.allow_params_in_match_conditions,
                has_authorizer: true,
                has_patch_types: false,
            };
            if let (Err(detail), _) = stateless.compile(trimmed, decls, kind, Returns::Bool) {
                errs.push(detail.field_error(format!("{p}.expression"), trimmed));
            }
        }
        if mc.name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            for msg in is_qualified_name(&mc.name) {
                errs.push(FieldError::invalid(format!("{p}.name"), &mc.name, msg));
            }
        }
        if !mc.name.is_empty() && !names.insert(mc.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &mc.name));
        }
    }
    errs
}

/// `validateVariable` (composited compiler: every variable, compiled or not, becomes a field
/// of `variables`; one with an empty expression is not compiled and adds none).
pub(super) fn validate_variable(
    compiler: &mut Compiler,
    v: &k8s_openapi::api::admissionregistration::v1::Variable,
    has_params: bool,
    opts: &Options,
    i: usize,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("spec.variables[{i}]");
    if go_trim_space(&v.name).is_empty() {
        errs.push(FieldError::required(
            format!("{p}.name"),
            "name is not specified",
        ));
    } else if !is_cel_identifier(&v.name) {
        errs.push(FieldError::invalid(
            format!("{p}.name"),
            &v.name,
            "must be a valid CEL identifier",
        ));
    }
    if go_trim_space(&v.expression).is_empty() {
        errs.push(FieldError::required(
            format!("{p}.expression"),
            "expression is not specified",
        ));
        return errs;
    }
    // Upstream looks the variable up among the old policy's *validation* expressions.
    let kind = Preexisting::kind(&opts.preexisting.validations, &v.expression);
    let decls = Decls {
        has_params,
        has_authorizer: true,
        has_patch_types: false,
    };
    let (result, out) = compiler.compile(&v.expression, decls, kind, Returns::Any);
    if let Some(c) = compiler.composition.as_mut() {
        c.add_field(&v.name, out.as_ref());
    }
    if let Err(detail) = result {
        errs.push(detail.field_error(format!("{p}.expression"), &v.expression));
    }
    errs
}

/// `validateValidation`.
fn validate_validation(
    compiler: &Compiler,
    v: &k8s_openapi::api::admissionregistration::v1::Validation,
    has_params: bool,
    opts: &Options,
    i: usize,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("spec.validations[{i}]");
    if go_trim_space(&v.expression).is_empty() {
        errs.push(FieldError::required(
            format!("{p}.expression"),
            "expression is not specified",
        ));
    } else {
        let kind = Preexisting::kind(&opts.preexisting.validations, &v.expression);
        let decls = Decls {
            has_params,
            has_authorizer: true,
            has_patch_types: false,
        };
        if let (Err(detail), _) = compiler.compile(&v.expression, decls, kind, Returns::Bool) {
            errs.push(detail.field_error(format!("{p}.expression"), &v.expression));
        }
    }
    let message_expression = v.message_expression.as_deref().unwrap_or_default();
    if !message_expression.is_empty() && go_trim_space(message_expression).is_empty() {
        errs.push(FieldError::invalid(
            format!("{p}.messageExpression"),
            message_expression,
            "must be non-empty if specified",
        ));
    } else if !go_trim_space(message_expression).is_empty() {
        let kind = Preexisting::kind(&opts.preexisting.message_expressions, message_expression);
        let decls = Decls {
            has_params: opts.allow_params_in_match_conditions,
            has_authorizer: false,
            has_patch_types: false,
        };
        if let (Err(detail), _) = compiler.compile(message_expression, decls, kind, Returns::String)
        {
            errs.push(detail.field_error(format!("{p}.messageExpression"), message_expression));
        }
    }
    let message = v.message.as_deref().unwrap_or_default();
    let trimmed = go_trim_space(message);
    if !message.is_empty() && trimmed.is_empty() {
        errs.push(FieldError::invalid(
            format!("{p}.message"),
            message,
            "must be non-empty if specified",
        ));
    } else if trimmed.contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            format!("{p}.message"),
            message,
            "must not contain line breaks",
        ));
    }
    if let Some(reason) = v.reason.as_deref()
        && !matches!(reason, "Forbidden" | "Invalid" | "RequestEntityTooLarge")
    {
        errs.push(FieldError::not_supported(
            format!("{p}.reason"),
            reason,
            &["Forbidden", "Invalid", "RequestEntityTooLarge"],
        ));
    }
    errs
}

/// `validateAuditAnnotation`.
fn validate_audit_annotation(
    compiler: &Compiler,
    policy_name: &str,
    a: &k8s_openapi::api::admissionregistration::v1::AuditAnnotation,
    has_params: bool,
    opts: &Options,
    i: usize,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("spec.auditAnnotations[{i}]");
    if policy_name.is_empty() {
        errs.push(FieldError::invalid(
            format!("{p}.key"),
            &a.key,
            "requires metadata.name be non-empty",
        ));
    } else {
        let qualified = format!("{policy_name}/{}", a.key);
        for msg in is_qualified_name(&qualified) {
            errs.push(FieldError::invalid(format!("{p}.key"), &qualified, msg));
        }
    }
    let trimmed = go_trim_space(&a.value_expression);
    if trimmed.is_empty() {
        errs.push(FieldError::required(
            format!("{p}.valueExpression"),
            "valueExpression is not specified",
        ));
    } else if trimmed.len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
        errs.push(FieldError::required(
            format!("{p}.valueExpression"),
            format!(
                "must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length"
            ),
        ));
    } else {
        let kind = Preexisting::kind(
            &opts.preexisting.audit_annotation_values,
            &a.value_expression,
        );
        let decls = Decls {
            has_params,
            has_authorizer: true,
            has_patch_types: false,
        };
        if let (Err(detail), _) = compiler.compile(trimmed, decls, kind, Returns::StringOrNull) {
            errs.push(detail.field_error(format!("{p}.valueExpression"), &a.value_expression));
        }
    }
    errs
}

/// `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*` and not a reserved word (validation.go's
/// `celReserved` is the same list as escaping.go's, [`crate::schema::escape::is_reserved`]).
fn is_cel_identifier(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && !crate::schema::escape::is_reserved(name)
}

/// Go's `strings.TrimSpace` (Unicode white space).
pub(super) fn go_trim_space(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace())
}

/// What the static-manifest loader's `defaultAndValidateVAP` (k8s.io/kubernetes
/// pkg/admission/plugin/policy/manifest/loader/validating_loader.go) answers for `policy`:
/// defaulting, then `validation.ValidateValidatingAdmissionPolicy` on the object as written
/// (no generated name, no static-suffix rule, no paramKind authorization). Empty: valid.
pub fn validate_policy_static(
    policy: &ValidatingAdmissionPolicy,
    server: Server,
) -> Vec<FieldError> {
    let mut p = policy.clone();
    default_policy(&mut p);
    let opts = Options {
        static_manifest: true,
        ..Options::default()
    };
    validate_policy(&p, &opts, server)
}

/// The loader's `defaultAndValidateVAPB`: defaulting, then
/// `validation.ValidateValidatingAdmissionPolicyBinding` on the binding as written.
pub fn validate_binding_static(binding: &ValidatingAdmissionPolicyBinding) -> Vec<FieldError> {
    let mut b = binding.clone();
    default_binding(&mut b);
    validate_binding(&b, MetaContext::StaticManifest)
}

/// `validateValidatingAdmissionPolicyBinding`.
pub(super) fn validate_binding(
    b: &ValidatingAdmissionPolicyBinding,
    context: MetaContext,
) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&b.metadata, context);
    let spec = &b.spec;
    errs.extend(validate_policy_name(&spec.policy_name));
    if let Some(pr) = &spec.param_ref {
        errs.extend(validate_param_ref(pr, "spec.paramRef"));
    }
    if let Some(mr) = &spec.match_resources {
        errs.extend(validate_match_resources(mr, "spec.matchResources"));
    }
    let actions = spec.validation_actions.as_slice();
    let mut seen = BTreeSet::new();
    for (i, a) in actions.iter().enumerate() {
        let p = format!("spec.validationActions[{i}]");
        if !matches!(a.as_str(), "Deny" | "Warn" | "Audit") {
            errs.push(FieldError::not_supported(&p, a, &["Audit", "Deny", "Warn"]));
        }
        if seen.contains(a.as_str()) {
            errs.push(FieldError::duplicate_json(&p, a));
        }
        seen.insert(a.as_str());
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid_json(
            "spec.validationActions",
            json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        // Covered by declarative validation in 1.37 (`RequiredSlice`): no detail (seen on
        // the 1.37.1 API server).
        errs.push(FieldError::required("spec.validationActions", ""));
    }
    errs
}

/// `validateParamRef`.
pub(super) fn validate_param_ref(pr: &ParamRef, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = pr.name.as_deref().unwrap_or_default();
    if !name.is_empty() {
        for msg in is_path_segment_name(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
        if pr.selector.is_some() {
            errs.push(FieldError::forbidden(
                format!("{path}.name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(sel) = &pr.selector {
        errs.extend(validate_label_selector(sel, &format!("{path}.selector")));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                format!("{path}.selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && pr.selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    match pr.parameter_not_found_action.as_deref() {
        None | Some("") => errs.push(FieldError::required(
            format!("{path}.parameterNotFoundAction"),
            "",
        )),
        Some("Deny" | "Allow") => {}
        Some(other) => errs.push(FieldError::not_supported(
            format!("{path}.parameterNotFoundAction"),
            other,
            &["Deny", "Allow"],
        )),
    }
    errs
}

#[cfg(test)]
mod tests;
