//! Kyverno's DeletingPolicy and NamespacedDeletingPolicy (`policies.kyverno.io` `v1alpha1`,
//! `v1beta1`, `v1`): what Kyverno's policy webhook answers when one is created, and vapcheck's
//! type check of its CEL against the kinds its `matchConstraints` select. Pure: no I/O
//! (docs/engines.md).
//!
//! Upstream: github.com/kyverno/kyverno v1.19.1 (pinned in `e2e/kyverno-oracle/go.mod`):
//! - `pkg/cel/policies/dpol/validate.go` `Validate`: the compiler's errors; a
//!   `matchConstraints` with at least one resource rule; a `schedule`, which
//!   `github.com/aptible/supercronic/cronexpr` `Parse` reads ([`super::cron`]); in a policy
//!   with a namespace (`GetNamespace() != ""`), no `globalContext` and (by default) no `http`
//!   in the expressions `dpolExpressions` lists (the variables, then the conditions).
//! - `pkg/cel/policies/dpol/compiler/compiler.go` `(*compilerImpl).Compile`: in the
//!   environment of `createBaseDpolEnv` ([`super::env::deleting_base_env`]), the placeholder
//!   error first (`field.InternalError(nil, fmt.Errorf(compileError, "failed to compile
//!   policy"))`, `compileError` naming `compiler.KyvernoVersion`, 1.18), then the variables
//!   (`CompileVariables`: the errors of all), and if none failed the conditions
//!   (`CompileMatchConditions`: each exactly `bool`, the errors of all).
//! - What `object` is: a DeletingPolicy has no admission request. Kyverno's deleting
//!   controller lists, on the policy's schedule, the resources its `matchConstraints` select
//!   and evaluates the conditions on each (`pkg/cel/policies/dpol/compiler/policy.go`
//!   `(*Policy).Evaluate`): `object` is the existing resource (`object.UnstructuredContent()`)
//!   of a matched kind, `namespaceObject` its namespace, with `resource` and `variables`. No
//!   other variable is bound there: `oldObject` and `request` are declared (`dyn`, and
//!   Kubernetes' `AdmissionRequest` type) but evaluate as unbound. vapcheck types `object` by
//!   the matched kinds, as for a ValidatingPolicy.
//! - The types: `github.com/kyverno/api` `api/policies.kyverno.io/v1alpha1/deleting_policy.go`
//!   `DeletingPolicySpec` (aliased by `v1beta1`): `matchConstraints`, `conditions`,
//!   `variables`, `schedule`, `deletionPropagationPolicy`.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, ValidatingAdmissionPolicy, ValidatingAdmissionPolicySpec,
    Validation, Variable,
};
use serde_json::Value;

use crate::apiserver::field::{Cause, FieldError};

use super::{compile_conditions, compile_variables, env, namespaced_rules, text, typed_status};

/// The deleting kinds `vapcheck check` reads.
pub const DELETING_KINDS: &[&str] = &["DeletingPolicy", "NamespacedDeletingPolicy"];

/// The placeholder error `Compile` puts first in every error list it returns.
pub const COMPILE_PLACEHOLDER: &str =
    "<nil>: Internal error: deleting policy compiler 1.18 error: failed to compile policy";

/// Whether `api_version`/`kind` is a Kyverno DeletingPolicy or NamespacedDeletingPolicy.
pub fn is_deleting_policy(api_version: &str, kind: &str) -> bool {
    super::is_kind_of(DELETING_KINDS, api_version, kind)
}

/// A DeletingPolicy or NamespacedDeletingPolicy, as Kyverno decodes it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletingPolicy {
    /// `DeletingPolicy` or `NamespacedDeletingPolicy`.
    pub kind: &'static str,
    /// `apiVersion`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (namespaced kind: [`super::DEFAULT_NAMESPACE`] when missing).
    /// Kyverno reads a policy with a namespace as namespaced (`GetNamespace() != ""`).
    pub namespace: String,
    /// `spec.matchConstraints`.
    pub match_constraints: Option<MatchResources>,
    /// `spec.conditions`.
    pub conditions: Vec<MatchCondition>,
    /// `spec.variables`.
    pub variables: Vec<Variable>,
    /// `spec.schedule` (empty when missing).
    pub schedule: String,
    /// `spec.deletionPropagationPolicy` (not validated by Kyverno: the CRD's enum is the API
    /// server's).
    pub deletion_propagation_policy: Option<String>,
}

impl DeletingPolicy {
    /// Whether Kyverno reads the policy as namespaced (the namespaced environment of
    /// `resource` and `globalContext`, and the namespaced checks).
    pub fn namespaced(&self) -> bool {
        !self.namespace.is_empty()
    }
}

/// Reads a policy. `Err((field, cause))` when a field has a type Go's `encoding/json` refuses
/// for the `v1beta1` type.
pub fn read_deleting_policy(value: &Value) -> Result<DeletingPolicy, (String, String)> {
    let kind = super::read_kind(value, DELETING_KINDS, "not a deleting policy")?;
    Ok(DeletingPolicy {
        kind,
        api_version: text(value, "/apiVersion")?,
        name: text(value, "/metadata/name")?,
        namespace: super::read_namespace(value, kind == "NamespacedDeletingPolicy")?,
        match_constraints: super::read_match_constraints(value)?,
        conditions: super::read_match_conditions(value, "conditions")?,
        variables: super::read_variables(value)?,
        schedule: text(value, "/spec/schedule")?,
        deletion_propagation_policy: Some(text(value, "/spec/deletionPropagationPolicy")?)
            .filter(|s| !s.is_empty()),
    })
}

/// The errors Kyverno's webhook answers for the policy (`dpol.Validate`), each as
/// `field.Error.Error()` prints it; empty: accepted.
pub fn validate(policy: &DeletingPolicy) -> Vec<String> {
    validate_causes(policy)
        .into_iter()
        .map(|c| c.text)
        .collect()
}

/// [`validate`] with the field and CEL position of each error.
pub fn validate_causes(policy: &DeletingPolicy) -> Vec<Cause> {
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
    if policy.schedule.is_empty() {
        errors.push(FieldError::required("spec.schedule", "schedule is required").cause());
    } else if let Err(e) = super::cron::parse(&policy.schedule) {
        errors.push(
            FieldError::invalid(
                "spec.schedule",
                &policy.schedule,
                format!("schedule spec in the deletingPolicy is not in proper cron format: {e}"),
            )
            .cause(),
        );
    }
    namespaced_rules(
        &mut errors,
        policy.namespaced().then(|| check_texts(policy)),
    );
    errors
}

/// `dpolExpressions`: the texts the namespaced checks read.
fn check_texts(policy: &DeletingPolicy) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    out.extend(policy.variables.iter().map(|v| v.expression.as_str()));
    out.extend(policy.conditions.iter().map(|c| c.expression.as_str()));
    out
}

/// The errors of `(*compilerImpl).Compile`: none, or the placeholder and those of the first
/// stage (variables, conditions) that has any.
pub fn compile(policy: &DeletingPolicy) -> Vec<Cause> {
    let mut env = match env::deleting_verdict_env(policy.namespaced()) {
        Ok(e) => e,
        Err(e) => {
            return vec![
                FieldError::internal("", format!("deleting policy compiler 1.18 error: {e}"))
                    .cause(),
            ];
        }
    };
    let with_placeholder = |errors: Vec<Cause>| -> Vec<Cause> {
        std::iter::once(Cause::new("", COMPILE_PLACEHOLDER))
            .chain(errors)
            .collect()
    };
    let errors = compile_variables(&mut env, &policy.variables);
    if !errors.is_empty() {
        return with_placeholder(errors);
    }
    let errors = compile_conditions(&env, &policy.conditions, "conditions");
    if !errors.is_empty() {
        return with_placeholder(errors);
    }
    Vec::new()
}

/// The ValidatingAdmissionPolicy vapcheck type-checks for the policy: its matching, its
/// variables, and its conditions as validations (boolean expressions that see `variables`, as
/// the conditions do; a Kubernetes match condition would not), under its name (no
/// `paramKind`).
pub fn as_admission_policy(policy: &DeletingPolicy) -> ValidatingAdmissionPolicy {
    fn some_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
        (!v.is_empty()).then_some(v)
    }
    let validations = policy
        .conditions
        .iter()
        .map(|c| Validation {
            expression: c.expression.clone(),
            ..Default::default()
        })
        .collect();
    ValidatingAdmissionPolicy {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(policy.name.clone()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            match_constraints: policy.match_constraints.clone(),
            variables: some_vec(policy.variables.clone()),
            validations: some_vec(validations),
            ..Default::default()
        }),
        status: None,
    }
}

/// vapcheck's type checking of the policy: [`as_admission_policy`] checked by
/// [`crate::policy::check_policy`] in the DeletingPolicy environment
/// ([`env::deleting_base_env`]), `object` (the existing resource) typed by the kinds
/// `matchConstraints` selects; the findings on `spec.validations[i]` are the conditions'
/// (`spec.conditions[i]`). No cost estimates.
pub fn type_check(
    policy: &DeletingPolicy,
    options: &crate::policy::CheckOptions,
    backends: &crate::policy::Backends<'_>,
) -> crate::policy::PolicyStatus {
    let vap = as_admission_policy(policy);
    let remap = |f: &str| -> Option<String> {
        Some(match f.strip_prefix("spec.validations") {
            Some(rest) => format!("spec.conditions{rest}"),
            None => f.to_owned(),
        })
    };
    typed_status(
        env::deleting_checker(policy.namespaced()),
        None,
        options,
        backends,
        &remap,
        |options, backends| crate::policy::check_policy(&vap, options, backends),
    )
}
