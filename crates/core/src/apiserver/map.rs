//! kube-apiserver's defaulting and validation of MutatingAdmissionPolicy and
//! MutatingAdmissionPolicyBinding on create and update, in the API server's order.
//!
//! Sources (Kubernetes 1.37.1):
//! * `pkg/apis/admissionregistration/v1/defaults.go` and `zz_generated.defaults.go`
//!   (`SetObjectDefaults_MutatingAdmissionPolicy`: `SetDefaults_MutatingAdmissionPolicySpec`
//!   defaults `failurePolicy` only, not `reinvocationPolicy`; match resources as for
//!   validating policies; `SetObjectDefaults_MutatingAdmissionPolicyBinding`);
//! * `pkg/apis/admissionregistration/validation/validation.go`: `validateMutatingAdmissionPolicy`,
//!   `validateMutatingAdmissionPolicySpec`, `validateMutation`, `validateApplyConfiguration`,
//!   `validateJSONPatch`, `validateMutatingAdmissionPolicyBinding(Spec)`,
//!   `ValidateMutatingAdmissionPolicyUpdate`, `ValidateMutatingAdmissionPolicyBindingUpdate`,
//!   `findMutatingPolicyPreexistingExpressions`, `ignoreMutatingAdmissionPolicyMatchConditions`;
//!   the rules shared with ValidatingAdmissionPolicy (metadata, paramKind, match resources,
//!   match conditions, variables, paramRef) are the functions of [`super::vap`];
//! * `pkg/registry/admissionregistration/mutatingadmissionpolicy{,binding}/strategy.go`
//!   (`Validate`: validation, then `ValidateStaticSuffix` when `ManifestBasedAdmissionControlConfig`
//!   is on; `ValidateUpdate`);
//! * `k8s.io/apiserver/pkg/admission/plugin/cel/compile.go` (`hasPatchTypes`) and
//!   `pkg/admission/plugin/policy/mutating/patch/{smd,json_patch}.go` (`ReturnTypes`).
//!
//! MutatingAdmissionPolicy `admissionregistration.k8s.io/v1` is served from Kubernetes 1.36;
//! [`served`] says whether the target server has it.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, MutatingAdmissionPolicySpec, Mutation,
};

use crate::k8s_env::apiserver::{Composition, Decls, EnvKind};

use super::field::FieldError;
use super::meta::{MetaContext, validate_object_meta};
use super::vap::{
    Compiler, Options, Preexisting, Returns, Server, default_match_resources, go_trim_space,
    validate_conditions_and_variables, validate_failure_policy, validate_match_constraints,
    validate_match_resources, validate_param_kind_of, validate_param_ref, validate_policy_name,
};

/// `supportedMutatingOperations` (sorted as `sets.String.List()` prints them): a mutating
/// policy cannot match DELETE.
const MUTATING_OPERATIONS: [&str; 4] = ["*", "CONNECT", "CREATE", "UPDATE"];
/// `supportedReinvocationPolicies`.
const REINVOCATION_POLICIES: [&str; 2] = ["IfNeeded", "Never"];
/// `supportedPatchType`.
const PATCH_TYPES: [&str; 2] = ["ApplyConfiguration", "JSONPatch"];

/// The first minor version whose API server serves MutatingAdmissionPolicy v1 (GA in 1.36).
pub const FIRST_SERVED_MINOR: u32 = 36;

/// Whether kube-apiserver 1.`minor` serves `admissionregistration.k8s.io/v1`
/// MutatingAdmissionPolicy and its binding by default.
pub fn served(server: Server) -> bool {
    server.minor >= FIRST_SERVED_MINOR
}

/// `SetObjectDefaults_MutatingAdmissionPolicy`.
pub fn default_mutating_policy(p: &mut MutatingAdmissionPolicy) {
    let spec = p.spec.get_or_insert_with(Default::default);
    super::vap::default_policy_spec(&mut spec.failure_policy, spec.match_constraints.as_mut());
}

/// `SetObjectDefaults_MutatingAdmissionPolicyBinding`.
pub fn default_mutating_binding(b: &mut MutatingAdmissionPolicyBinding) {
    if let Some(mr) = b.spec.as_mut().and_then(|s| s.match_resources.as_mut()) {
        default_match_resources(mr);
    }
}

/// An update (`ValidateMutatingAdmissionPolicyUpdate`, [`super::generic::validate_policy_update`])
/// keeps only match conditions and mutation expressions of the stored object, and looks JSON
/// patch expressions up among the old *apply configuration* expressions, so an unchanged JSON
/// patch (or variable) compiles as a new expression.
impl Preexisting {
    /// `findMutatingPolicyPreexistingExpressions` of the stored spec.
    pub(super) fn of_mutating(old: Option<&MutatingAdmissionPolicySpec>) -> Self {
        let mut p = Preexisting::default();
        let Some(old) = old else {
            return p;
        };
        for mc in old.match_conditions.iter().flatten() {
            p.match_conditions.insert(mc.expression.clone());
        }
        for m in old.mutations.iter().flatten() {
            if let Some(ac) = &m.apply_configuration {
                p.apply_configurations
                    .insert(ac.expression.clone().unwrap_or_default());
            }
            // Its JSON patch expressions go into a set nothing reads (jsonPatchExpressions).
        }
        p
    }
}

/// `validateMutatingAdmissionPolicy`.
pub(super) fn validate_policy(
    p: &MutatingAdmissionPolicy,
    opts: &Options,
    server: Server,
) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&p.metadata, MetaContext::RestCreate);
    let spec = p.spec.clone().unwrap_or_default();
    errs.extend(validate_policy_spec(&spec, opts.clone(), server));
    errs
}

/// `validateMutatingAdmissionPolicySpec`: always a composited compiler
/// (`createCompiler(true)`), so `variables` is declared even without `spec.variables`.
fn validate_policy_spec(
    spec: &MutatingAdmissionPolicySpec,
    mut opts: Options,
    server: Server,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut compiler = Compiler {
        server,
        composition: Some(Composition::new()),
        parses: std::sync::Arc::clone(&opts.parses),
    };
    errs.extend(validate_failure_policy(spec.failure_policy.as_deref()));
    errs.extend(validate_param_kind_of(spec.param_kind.as_ref(), &mut opts));
    errs.extend(validate_match_constraints(spec.match_constraints.as_ref()));
    if let Some(mc) = &spec.match_constraints {
        errs.extend(mutating_operations(
            mc.resource_rules.as_deref().unwrap_or_default(),
            "spec.matchConstraints.resourceRules.operations",
        ));
    }
    let has_params = spec.param_kind.is_some();
    errs.extend(validate_conditions_and_variables(
        &mut compiler,
        spec.match_conditions.as_deref().unwrap_or_default(),
        spec.variables.as_deref().unwrap_or_default(),
        has_params,
        &opts,
    ));
    let mutations = spec.mutations.as_deref().unwrap_or_default();
    if mutations.is_empty() {
        errs.push(FieldError::required(
            "spec.mutations",
            "mutations must contain at least one item",
        ));
    } else {
        for (i, m) in mutations.iter().enumerate() {
            errs.extend(validate_mutation(&compiler, m, has_params, &opts, i));
        }
    }
    match spec.reinvocation_policy.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required("spec.reinvocationPolicy", "")),
        r if REINVOCATION_POLICIES.contains(&r) => {}
        other => errs.push(FieldError::not_supported(
            "spec.reinvocationPolicy",
            other,
            &REINVOCATION_POLICIES,
        )),
    }
    errs
}

/// "It is only possible to mutate create and update requests": every operation of every
/// resource rule (not the excluded ones), reported at the rules' path without an index (so
/// the same operation in two rules gives the same error twice, of which the API server
/// returns one: [`as_returned`]).
fn mutating_operations(
    rules: &[k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations],
    path: &str,
) -> Vec<FieldError> {
    rules
        .iter()
        .flat_map(|r| r.operations.iter().flatten())
        .filter(|op| !MUTATING_OPERATIONS.contains(&op.as_str()))
        .map(|op| FieldError::not_supported(path, op, &MUTATING_OPERATIONS))
        .collect()
}

/// `validateMutation`.
fn validate_mutation(
    compiler: &Compiler,
    m: &Mutation,
    has_params: bool,
    opts: &Options,
    i: usize,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let p = format!("spec.mutations[{i}]");
    match m.patch_type.as_str() {
        "" => errs.push(FieldError::required(format!("{p}.patchType"), "")),
        "JSONPatch" => {
            match &m.json_patch {
                None => errs.push(FieldError::required(
                    format!("{p}.jsonPatch"),
                    "must be specified when patchType is JSONPatch",
                )),
                Some(jp) => errs.extend(validate_mutation_expression(
                    compiler,
                    jp.expression.as_deref().unwrap_or_default(),
                    Returns::JsonPatches,
                    has_params,
                    opts,
                    &format!("{p}.jsonPatch.expression"),
                )),
            }
            if m.apply_configuration.is_some() {
                errs.push(FieldError::invalid(
                    format!("{p}.applyConfiguration"),
                    "{applyConfiguration}",
                    "must not be specified when patchType is JSONPatch",
                ));
            }
        }
        "ApplyConfiguration" => {
            match &m.apply_configuration {
                None => errs.push(FieldError::required(
                    format!("{p}.applyConfiguration"),
                    "must be specified when patchType is ApplyConfiguration",
                )),
                Some(ac) => errs.extend(validate_mutation_expression(
                    compiler,
                    ac.expression.as_deref().unwrap_or_default(),
                    Returns::Object,
                    has_params,
                    opts,
                    &format!("{p}.applyConfiguration.expression"),
                )),
            }
            if m.json_patch.is_some() {
                errs.push(FieldError::invalid(
                    format!("{p}.jsonPatch"),
                    "{jsonPatch}",
                    "must not be specified when patchType is ApplyConfiguration",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{p}.patchType"),
            other,
            &PATCH_TYPES,
        )),
    }
    errs
}

/// `validateApplyConfiguration` and `validateJSONPatch`: the trimmed expression is compiled
/// (and shown in the error) with params (when a paramKind is set), the authorizer and the
/// patch types; the environment is StoredExpressions when the untrimmed expression was an
/// apply configuration of the stored object (for both patch types, as upstream).
fn validate_mutation_expression(
    compiler: &Compiler,
    expression: &str,
    returns: Returns,
    has_params: bool,
    opts: &Options,
    path: &str,
) -> Vec<FieldError> {
    let trimmed = go_trim_space(expression);
    if trimmed.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let kind: EnvKind = Preexisting::kind(&opts.preexisting.apply_configurations, expression);
    let decls = Decls {
        has_params,
        has_authorizer: true,
        has_patch_types: true,
    };
    match compiler.compile(trimmed, decls, kind, returns) {
        (Err(detail), _) => vec![detail.field_error(path, trimmed)],
        (Ok(()), _) => Vec::new(),
    }
}

/// `validateMutatingAdmissionPolicyBinding` and `validateMutatingAdmissionPolicyBindingSpec`.
pub(super) fn validate_binding(b: &MutatingAdmissionPolicyBinding) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&b.metadata, MetaContext::RestCreate);
    let spec = b.spec.clone().unwrap_or_default();
    errs.extend(validate_policy_name(
        spec.policy_name.as_deref().unwrap_or_default(),
    ));
    if let Some(pr) = &spec.param_ref {
        errs.extend(validate_param_ref(pr, "spec.paramRef"));
    }
    if let Some(mr) = &spec.match_resources {
        errs.extend(validate_match_resources(mr, "spec.matchResources"));
        errs.extend(mutating_operations(
            mr.resource_rules.as_deref().unwrap_or_default(),
            "spec.matchResources.resourceRules.operations",
        ));
    }
    errs
}

#[cfg(test)]
mod tests;
