//! Kyverno's MutatingPolicy and NamespacedMutatingPolicy (`policies.kyverno.io` `v1alpha1`,
//! `v1beta1`, `v1`): what Kyverno's policy webhook answers when one is created, and vapcheck's
//! type check of its CEL as the MutatingAdmissionPolicy it resembles ([`crate::mutating`]),
//! in Kyverno's environment. Pure: no I/O (docs/engines.md).
//!
//! Upstream: github.com/kyverno/kyverno v1.19.1 (pinned in `e2e/kyverno-oracle/go.mod`):
//! - `pkg/cel/policies/mpol/validate.go` `Validate`: the compiler's errors; a
//!   `matchConstraints` with at least one resource rule; not both `evaluation.admission` and
//!   `evaluation.mutateExisting` disabled; in a policy with a namespace, no `globalContext`
//!   and (by default) no `http` in the expressions `mpolExpressions` lists.
//! - `pkg/cel/policies/mpol/compiler/compiler.go` `(*compilerImpl).Compile`, in order, each
//!   stage compiling all its expressions and stopping after a stage with errors (no
//!   placeholder error, unlike the vpol compiler): `validateMAPCompatibleMatchConditions` (with
//!   `spec.autogen.mutatingAdmissionPolicy.enabled`, a match condition may not name
//!   `variables`), the variables (`CompileVariables`: so match conditions may read them), the
//!   match conditions, `targetMatchConstraints.expression` (exactly
//!   `map(string, google.protobuf.Any)`), the target match conditions, the audit annotations,
//!   and the mutations (`CompileMutation`: a JSON patch exactly `list(JSONPatch)`, an apply
//!   configuration exactly `Object`; a mutation whose `patchType` has no configuration of
//!   that type is not compiled). The environment is `newExtendedEnv`
//!   ([`super::env::mutating_verdict_env`]).
//! - The types: `github.com/kyverno/api` `api/policies.kyverno.io/v1alpha1/mutating_policy.go`
//!   `MutatingPolicySpec` (aliased by `v1beta1`), with `AdmissionEnabled` (default true),
//!   `MutateExistingEnabled` (default false), `GenerateMutatingAdmissionPolicyEnabled`
//!   (default false) and `EvaluationMode` (default `Kubernetes`).

use k8s_openapi::api::admissionregistration::v1::{
    ApplyConfiguration, AuditAnnotation, JSONPatch, MatchCondition, MatchResources,
    MutatingAdmissionPolicy, MutatingAdmissionPolicySpec, Mutation, Variable,
};
use serde_json::Value;

use crate::apiserver::field::Cause;
use crate::apiserver::field::FieldError;

use super::{
    Output, compile_conditions, compile_site, compile_variables, entries, entry_text, env,
    mode_not_checked, namespaced_rules, text, typed_status, uses_ident,
};

/// The mutating kinds `vapcheck check` reads.
pub const MUTATING_KINDS: &[&str] = &["MutatingPolicy", "NamespacedMutatingPolicy"];

/// Whether `api_version`/`kind` is a Kyverno MutatingPolicy or NamespacedMutatingPolicy.
pub fn is_mutating_policy(api_version: &str, kind: &str) -> bool {
    super::is_kind_of(MUTATING_KINDS, api_version, kind)
}

/// A MutatingPolicy or NamespacedMutatingPolicy, as Kyverno decodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MutatingPolicy {
    /// `MutatingPolicy` or `NamespacedMutatingPolicy`.
    pub kind: &'static str,
    /// `apiVersion`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (namespaced kind: [`DEFAULT_NAMESPACE`] when missing). Kyverno
    /// reads a policy with a namespace as namespaced (`policy.GetNamespace() != ""`).
    pub namespace: String,
    /// `spec.evaluation.mode` (`Kubernetes` when missing).
    pub mode: String,
    /// `spec.failurePolicy`.
    pub failure_policy: Option<String>,
    /// `spec.reinvocationPolicy`.
    pub reinvocation_policy: Option<String>,
    /// `spec.matchConstraints`.
    pub match_constraints: Option<MatchResources>,
    /// `spec.matchConditions`.
    pub match_conditions: Vec<MatchCondition>,
    /// `spec.variables`.
    pub variables: Vec<Variable>,
    /// `spec.targetMatchConstraints.expression` (empty: none).
    pub target_expression: String,
    /// `spec.targetMatchConstraints`' match resources (its resource rules, selectors).
    pub target_constraints: Option<MatchResources>,
    /// `spec.targetMatchConditions`.
    pub target_match_conditions: Vec<MatchCondition>,
    /// `spec.auditAnnotations`.
    pub audit_annotations: Vec<AuditAnnotation>,
    /// `spec.mutations` (a present `applyConfiguration` or `jsonPatch` always has an
    /// `expression`, empty when missing: Kyverno compiles it all the same).
    pub mutations: Vec<Mutation>,
    /// `spec.autogen.mutatingAdmissionPolicy.enabled` (default false).
    pub autogen_map: bool,
    /// `spec.evaluation.admission.enabled` (default true).
    pub admission_enabled: bool,
    /// `spec.evaluation.mutateExisting.enabled` (default false).
    pub mutate_existing_enabled: bool,
}

/// A boolean field: `Ok(None)` when missing or null.
fn flag(value: &Value, pointer: &str) -> Result<Option<bool>, (String, String)> {
    match value.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err((
            pointer.trim_start_matches('/').replace('/', "."),
            "must be a boolean".into(),
        )),
    }
}

/// The `expression` of the object `key` of a mutation, if the object is there.
fn configuration(entry: &Value, key: &str, at: &str) -> Result<Option<String>, (String, String)> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => entry_text(v, "expression", &format!("{at}.{key}")).map(Some),
        Some(_) => Err((format!("{at}.{key}"), "must be an object".into())),
    }
}

/// Reads a policy. `Err((field, cause))` when a field has a type Go's `encoding/json` refuses
/// for the `v1beta1` type.
pub fn read_mutating_policy(value: &Value) -> Result<MutatingPolicy, (String, String)> {
    let kind = super::read_kind(value, MUTATING_KINDS, "not a mutating policy")?;
    let namespace = super::read_namespace(value, kind == "NamespacedMutatingPolicy")?;
    let mode = super::read_mode(value)?;
    let optional = |p: &str| -> Result<Option<String>, (String, String)> {
        Ok(Some(text(value, p)?).filter(|s| !s.is_empty()))
    };
    let match_constraints = super::read_match_constraints(value)?;
    let (target_expression, target_constraints) = match value
        .pointer("/spec/targetMatchConstraints")
    {
        None | Some(Value::Null) => (String::new(), None),
        Some(Value::Object(o)) => {
            let mut resources = o.clone();
            resources.remove("expression");
            let constraints = serde_json::from_value::<MatchResources>(Value::Object(resources))
                .map_err(|e| ("spec.targetMatchConstraints".to_owned(), e.to_string()))?;
            (
                text(value, "/spec/targetMatchConstraints/expression")?,
                Some(constraints),
            )
        }
        Some(_) => {
            return Err((
                "spec.targetMatchConstraints".into(),
                "must be an object".into(),
            ));
        }
    };
    let mutations = entries(value, "mutations", |e, at| {
        let apply = configuration(e, "applyConfiguration", at)?;
        let patch = configuration(e, "jsonPatch", at)?;
        Ok(Mutation {
            patch_type: entry_text(e, "patchType", at)?,
            apply_configuration: apply.map(|x| ApplyConfiguration {
                expression: Some(x),
            }),
            json_patch: patch.map(|x| JSONPatch {
                expression: Some(x),
            }),
        })
    })?;
    Ok(MutatingPolicy {
        kind,
        api_version: text(value, "/apiVersion")?,
        name: text(value, "/metadata/name")?,
        namespace,
        mode,
        failure_policy: optional("/spec/failurePolicy")?,
        reinvocation_policy: optional("/spec/reinvocationPolicy")?,
        match_constraints,
        match_conditions: super::read_match_conditions(value, "matchConditions")?,
        variables: super::read_variables(value)?,
        target_expression,
        target_constraints,
        target_match_conditions: super::read_match_conditions(value, "targetMatchConditions")?,
        audit_annotations: super::read_audit_annotations(value)?,
        mutations,
        autogen_map: flag(value, "/spec/autogen/mutatingAdmissionPolicy/enabled")?.unwrap_or(false),
        admission_enabled: flag(value, "/spec/evaluation/admission/enabled")?.unwrap_or(true),
        mutate_existing_enabled: flag(value, "/spec/evaluation/mutateExisting/enabled")?
            .unwrap_or(false),
    })
}

impl MutatingPolicy {
    /// Whether Kyverno reads the policy as namespaced (`GetNamespace() != ""`: the
    /// namespaced environment of `resource` and the namespaced checks).
    pub fn namespaced(&self) -> bool {
        !self.namespace.is_empty()
    }
}

/// The errors Kyverno's webhook answers for the policy (`mpol.Validate`), each as
/// `field.Error.Error()` prints it; empty: accepted.
pub fn validate(policy: &MutatingPolicy) -> Vec<String> {
    validate_causes(policy)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

/// [`validate`] with the field and CEL position of each error.
pub fn validate_causes(policy: &MutatingPolicy) -> Vec<Cause> {
    let mut errors = compile(policy);
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
    if !policy.admission_enabled && !policy.mutate_existing_enabled {
        errors.push(
            FieldError::forbidden(
                "spec.evaluation",
                "disabling both admission and mutateExisting evaluation modes is not allowed",
            )
            .cause(),
        );
    }
    // As for validating policies, over `mpolExpressions`.
    namespaced_rules(
        &mut errors,
        policy.namespaced().then(|| check_texts(policy)),
    );
    errors
}

/// `mpolExpressions`: the texts the namespaced checks read.
fn check_texts(policy: &MutatingPolicy) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    out.extend(policy.variables.iter().map(|v| v.expression.as_str()));
    out.extend(
        policy
            .match_conditions
            .iter()
            .map(|m| m.expression.as_str()),
    );
    for m in &policy.mutations {
        if let Some(a) = &m.apply_configuration {
            out.push(a.expression.as_deref().unwrap_or_default());
        }
        if let Some(j) = &m.json_patch {
            out.push(j.expression.as_deref().unwrap_or_default());
        }
    }
    out.extend(
        policy
            .audit_annotations
            .iter()
            .map(|a| a.value_expression.as_str()),
    );
    if !policy.target_expression.is_empty() {
        out.push(&policy.target_expression);
    }
    out.extend(
        policy
            .target_match_conditions
            .iter()
            .map(|m| m.expression.as_str()),
    );
    out
}

/// The errors of `(*compilerImpl).Compile`: those of the first stage that has any.
pub fn compile(policy: &MutatingPolicy) -> Vec<Cause> {
    let mut env = match env::mutating_verdict_env(policy.namespaced()) {
        Ok(e) => e,
        Err(e) => {
            return vec![
                FieldError::internal(
                    "",
                    format!("mutating policy extended compiler 2.0 error: {e}"),
                )
                .cause(),
            ];
        }
    };
    // validateMAPCompatibleMatchConditions: an expression that parses and names `variables`.
    if policy.autogen_map {
        let errors: Vec<Cause> = policy
            .match_conditions
            .iter()
            .enumerate()
            .filter(|(_, m)| uses_ident(&[m.expression.as_str()], "variables"))
            .map(|(i, _)| {
                FieldError::forbidden(
                    format!("spec.matchConditions[{i}].expression"),
                    "variables cannot be referenced in matchConditions when spec.autogen.mutatingAdmissionPolicy.enabled is true; native MutatingAdmissionPolicy evaluates match conditions before variables, so inline the expression instead",
                )
                .cause()
            })
            .collect();
        if !errors.is_empty() {
            return errors;
        }
    }
    let errors = compile_variables(&mut env, &policy.variables);
    if !errors.is_empty() {
        return errors;
    }
    let conditions = |list: &[MatchCondition], at: &str| compile_conditions(&env, list, at);
    let errors = conditions(&policy.match_conditions, "matchConditions");
    if !errors.is_empty() {
        return errors;
    }
    if !policy.target_expression.is_empty()
        && let Some(e) = compile_site(
            &env,
            "spec.targetMatchConstraints.expression".into(),
            &policy.target_expression,
            Output::TargetMap,
        )
    {
        return vec![e];
    }
    let errors = conditions(&policy.target_match_conditions, "targetMatchConditions");
    if !errors.is_empty() {
        return errors;
    }
    let errors: Vec<Cause> = policy
        .audit_annotations
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let field = format!("spec.auditAnnotations[{i}].valueExpression");
            compile_site(&env, field, &a.value_expression, Output::StringOrNull)
        })
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    for (i, m) in policy.mutations.iter().enumerate() {
        let (field, text, output) =
            match (m.patch_type.as_str(), &m.json_patch, &m.apply_configuration) {
                ("JSONPatch", Some(j), _) => (
                    format!("spec.mutations[{i}].jsonPatch.expression"),
                    j.expression.as_deref().unwrap_or_default(),
                    Output::JsonPatches,
                ),
                ("ApplyConfiguration", _, Some(a)) => (
                    format!("spec.mutations[{i}].applyConfiguration.expression"),
                    a.expression.as_deref().unwrap_or_default(),
                    Output::ApplyConfiguration,
                ),
                _ => continue,
            };
        if let Some(e) = compile_site(&env, field, text, output) {
            return vec![e];
        }
    }
    Vec::new()
}

/// The MutatingAdmissionPolicy vapcheck type-checks for the policy: its matching, match
/// conditions, variables and mutations under its name (no `paramKind`). The target match
/// conditions, target expression and audit annotations have no place there and are not
/// type-checked (they are compiled for the verdict).
pub fn as_admission_policy(policy: &MutatingPolicy) -> MutatingAdmissionPolicy {
    fn some_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
        (!v.is_empty()).then_some(v)
    }
    MutatingAdmissionPolicy {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(policy.name.clone()),
            ..Default::default()
        },
        spec: Some(MutatingAdmissionPolicySpec {
            failure_policy: policy.failure_policy.clone(),
            match_constraints: policy.match_constraints.clone(),
            match_conditions: some_vec(policy.match_conditions.clone()),
            variables: some_vec(policy.variables.clone()),
            mutations: some_vec(policy.mutations.clone()),
            reinvocation_policy: policy.reinvocation_policy.clone(),
            ..Default::default()
        }),
    }
}

/// Why the policy is not type-checked (the field and the reason), `None`: checked. An
/// evaluation mode other than `Kubernetes`, as for a ValidatingPolicy.
pub fn not_checked_reason(policy: &MutatingPolicy) -> Option<(String, String)> {
    mode_not_checked(&policy.mode).map(|r| ("spec.evaluation.mode".into(), r))
}

/// Whether vapcheck types the policy by its targets instead of its trigger: with
/// `evaluation.mutateExisting.enabled` and admission disabled, the mutations run only on
/// existing resources, with `object` the target (pkg/cel/policies/mpol/compiler/policy.go
/// `(*Policy).EvaluateTarget`: the variables, the target match conditions and the mutations
/// see the target; the trigger's match conditions are not evaluated). With admission enabled
/// (the default) a mutate-existing policy also mutates its trigger at admission
/// (mpol/engine/provider.go `Fetch`: "a mutate-existing policy still runs on admission by
/// default"): that side is the one vapcheck types, its target side is not.
pub fn typed_by_targets(policy: &MutatingPolicy) -> bool {
    policy.mutate_existing_enabled && !policy.admission_enabled
}

/// The MutatingAdmissionPolicy vapcheck type-checks for the target side of the policy
/// ([`typed_by_targets`]): matching the targets (`targetMatchConstraints`' own resource rules
/// when it has some, else `matchConstraints`: mpol/engine/engine.go
/// `(*engineImpl).handlePolicy`), the target match conditions as its match conditions, the
/// variables and the mutations.
pub fn as_target_admission_policy(policy: &MutatingPolicy) -> MutatingAdmissionPolicy {
    let mut map = as_admission_policy(policy);
    if let Some(spec) = map.spec.as_mut() {
        if let Some(target) = policy
            .target_constraints
            .as_ref()
            .filter(|t| t.resource_rules.as_ref().is_some_and(|r| !r.is_empty()))
        {
            spec.match_constraints = Some(target.clone());
        }
        spec.match_conditions = (!policy.target_match_conditions.is_empty())
            .then(|| policy.target_match_conditions.clone());
    }
    map
}

/// vapcheck's type checking of the policy: [`as_admission_policy`] (or, typed by its targets,
/// [`as_target_admission_policy`], its match-condition findings moved to
/// `spec.targetMatchConditions`) checked by [`crate::mutating::check_mutating_policy`] (the
/// mutations with the patch types, the literals against the matched kind's schema) in
/// Kyverno's environment, `object` and `oldObject` typed by the matched kinds; no cost
/// estimates. A policy whose evaluation mode is not `Kubernetes` is not checked.
pub fn type_check(
    policy: &MutatingPolicy,
    options: &crate::policy::CheckOptions,
    backends: &crate::policy::Backends<'_>,
) -> crate::policy::PolicyStatus {
    let targets = typed_by_targets(policy);
    let map = if targets {
        as_target_admission_policy(policy)
    } else {
        as_admission_policy(policy)
    };
    let remap = |f: &str| -> Option<String> {
        Some(match f.strip_prefix("spec.matchConditions") {
            Some(rest) if targets => format!("spec.targetMatchConditions{rest}"),
            _ => f.to_owned(),
        })
    };
    typed_status(
        env::checker(policy.namespaced()),
        not_checked_reason(policy),
        options,
        backends,
        &remap,
        |options, backends| crate::mutating::check_mutating_policy(&map, options, backends),
    )
}
