//! The type of an expression written in a policy, in each environment [`check_policy`]
//! (super::check_policy) checks the policy's expressions in: the same kinds (strict or
//! extended selection), schemas, `params` and `variables` (typed in order, as
//! k8s.io/apiserver v0.37.1 admission/plugin/cel/composition.go `CompileAndStoreVariables`
//! declares them). For the editor's hover (`crate::lsp`): the type of a sub-expression, e.g.
//! a field selection `object.spec.replicas`, per matched kind. Both policy kinds: a
//! [`Shape`] is what a ValidatingAdmissionPolicy and a MutatingAdmissionPolicy share for this
//! (their `matchConstraints`, `paramKind` and `variables` have the same types).

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, MutatingAdmissionPolicy, ParamKind, ValidatingAdmissionPolicy,
};

use super::backend::{EnvRequest, ObjectDecl, ParamsDecl, SchemaLookup, SchemaType};
use super::check::{Backends, CheckOptions, params_type, variable_pairs};
use super::expressions::Mode;
use super::gvk::Gvk;
use super::kinds::{KindSelection, ResetOnce, extend_selection, types_to_check_with};
use super::types::OutputType;

/// What the environments of a policy's expressions are built from.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'p> {
    /// `spec.matchConstraints`.
    pub constraints: Option<&'p MatchResources>,
    /// `spec.paramKind`.
    pub param_kind: Option<&'p ParamKind>,
    /// `spec.variables`.
    pub variables: Option<&'p [k8s_openapi::api::admissionregistration::v1::Variable]>,
    /// A MutatingAdmissionPolicy ([`EnvRequest::mutating`]).
    pub mutating: bool,
}

impl<'p> Shape<'p> {
    /// A ValidatingAdmissionPolicy's.
    pub fn validating(policy: &'p ValidatingAdmissionPolicy) -> Self {
        let spec = policy.spec.as_ref();
        Self {
            constraints: spec.and_then(|s| s.match_constraints.as_ref()),
            param_kind: spec.and_then(|s| s.param_kind.as_ref()),
            variables: spec.and_then(|s| s.variables.as_deref()),
            mutating: false,
        }
    }

    /// A MutatingAdmissionPolicy's.
    pub fn mutating(policy: &'p MutatingAdmissionPolicy) -> Self {
        let spec = policy.spec.as_ref();
        Self {
            constraints: spec.and_then(|s| s.match_constraints.as_ref()),
            param_kind: spec.and_then(|s| s.param_kind.as_ref()),
            variables: spec.and_then(|s| s.variables.as_deref()),
            mutating: true,
        }
    }
}

/// The kinds the policy is checked against, in the selection's order, with the schema type
/// of each (`None`: untyped); kinds whose schema does not resolve are left out, as
/// `check_policy` skips them.
pub fn object_types(
    policy: &ValidatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> Vec<(Gvk, Option<SchemaType>)> {
    object_types_of(&Shape::validating(policy), options, backends)
}

/// [`object_types`] of either policy kind (MutatingAdmissionPolicies select kinds exactly as
/// ValidatingAdmissionPolicies, [`crate::mutating::check_mutating_policy`]).
pub fn object_types_of(
    shape: &Shape<'_>,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> Vec<(Gvk, Option<SchemaType>)> {
    let constraints = shape.constraints;
    let mut reset = ResetOnce::default();
    let strict = types_to_check_with(&constraints, backends.rest_mapper, &mut reset);
    let KindSelection { kinds, .. } = match options.mode {
        Mode::Strict => strict,
        Mode::Extended => extend_selection(
            &constraints,
            strict.kinds,
            backends.rest_mapper,
            backends.discovery,
            options.kind_limit,
            &mut reset,
        ),
    };
    kinds
        .into_iter()
        .filter_map(|gvk| match backends.schemas.resolve(&gvk) {
            Ok(SchemaLookup::Typed(t)) => Some((gvk, Some(t))),
            Ok(SchemaLookup::Untyped) => Some((gvk, None)),
            Err(_) => None,
        })
        .collect()
}

/// The kind of the policy's `params` and its schema type, as `check_policy` declares them:
/// `None` when there is no `params` (no `paramKind`, or one without a group-version-kind),
/// no schema type when `params` is `dyn` (its schema is unknown or untyped).
pub fn params_schema(
    policy: &ValidatingAdmissionPolicy,
    backends: &Backends<'_>,
) -> Option<(Gvk, Option<SchemaType>)> {
    params_schema_of(&Shape::validating(policy), backends)
}

/// [`params_schema`] of either policy kind.
pub fn params_schema_of(
    shape: &Shape<'_>,
    backends: &Backends<'_>,
) -> Option<(Gvk, Option<SchemaType>)> {
    let pk = shape.param_kind?;
    let schema = params_type(Some(pk), backends.schemas)?;
    let gvk = Gvk::from_api_version(
        pk.api_version.as_deref().unwrap_or(""),
        pk.kind.as_deref().unwrap_or(""),
    )?;
    Some((gvk, schema))
}

/// `text`'s type per kind the policy is checked against, in the selection's order; `Err` is
/// cel-go's issues text (or the environment's error). Kinds whose schema does not resolve
/// are left out, as `check_policy` skips them.
pub fn types_per_kind(
    policy: &ValidatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
    text: &str,
) -> Vec<(Gvk, Result<OutputType, String>)> {
    types_per_kind_of(&Shape::validating(policy), false, options, backends, text)
}

/// [`types_per_kind`] of either policy kind, `patch_types` for the text of a mutation
/// (`applyConfiguration`, `jsonPatch`), which is compiled with the patch types
/// ([`super::expressions::ExpressionField::has_patch_types`]).
pub fn types_per_kind_of(
    shape: &Shape<'_>,
    patch_types: bool,
    options: &CheckOptions,
    backends: &Backends<'_>,
    text: &str,
) -> Vec<(Gvk, Result<OutputType, String>)> {
    let kinds = object_types_of(shape, options, backends);
    let params = params_type(shape.param_kind, backends.schemas);
    let variables = variable_pairs(shape.variables);
    let parsed = backends.checker.parse(text);
    let mut out = Vec::new();
    for (gvk, object) in kinds {
        let request = EnvRequest {
            gvk: &gvk,
            object: object.as_ref().map_or(ObjectDecl::Dyn, ObjectDecl::Typed),
            params: match &params {
                None => ParamsDecl::Absent,
                Some(None) => ParamsDecl::Dyn,
                Some(Some(t)) => ParamsDecl::Typed(t),
            },
            patch_types,
            mutating: shape.mutating,
        };
        let result = backends.checker.environment(&request).and_then(|mut env| {
            for (name, expression) in &variables {
                let ty = backends
                    .checker
                    .parse(expression)
                    .and_then(|p| env.check(&p))
                    .map_or(OutputType::Dyn, |t| t.variable_decl_type());
                env.declare_variable(name, &ty);
            }
            match &parsed {
                Ok(p) => env.check(p).map_err(|i| i.render()),
                Err(issues) => Err(issues.render()),
            }
        });
        out.push((gvk, result));
    }
    out
}
