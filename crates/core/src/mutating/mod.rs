//! Type-checking MutatingAdmissionPolicies (issue 12): the kinds, environments, rendering
//! and narrowing of [`crate::policy`], plus the mutation-specific checks of
//! [`schema`] (apply configurations and JSON patches against the matched kind's schema).
//!
//! Pure: everything that parses, resolves schemas or type-checks sits behind the backend
//! traits of [`crate::policy`]. Entry point: [`check_mutating_policy`]. See
//! `docs/mutating.md`.
//!
//! Upstream reference (k8s.io/apiserver v0.37.1): `pkg/admission/plugin/policy/mutating/
//! compilation.go` `compilePolicy` compiles variables and match conditions in the admission
//! environment (`object`, `oldObject`, `request`, `namespaceObject`, `authorizer`,
//! `authorizer.requestResource`, `variables`, and `params` when `paramKind` is set) and every
//! mutation in the same environment plus the patch types (`HasPatchTypes`). Nothing upstream
//! type-checks a MAP against schemas: vapcheck types `object`, `oldObject` and `params` with
//! the kinds' schemas as kube-controller-manager does for ValidatingAdmissionPolicies.

pub use crate::policy::literal;
pub mod schema;

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy;

use crate::policy::{
    Backends, CheckOptions, ExpressionChecker, ExpressionField, ExpressionSite, Gvk, Issues, Mode,
    ParsedExpr, ParsedTexts, PolicyInput, SchemaType, check_input_parsed, status::PolicyStatus,
};
use crate::schema::RootType;

/// The expressions of a MAP checked in `mode`, in output order.
///
/// Strict: every mutation's expression (`spec.mutations[i].applyConfiguration.expression`
/// or `spec.mutations[i].jsonPatch.expression`, by its `patchType` as compilation.go
/// `compilePolicy` selects it: a mutation whose `patchType` does not match a present
/// configuration is not compiled). Extended: then every `spec.matchConditions[i].expression`
/// and `spec.variables[i].expression`.
pub fn mutation_sites(policy: &MutatingAdmissionPolicy, mode: Mode) -> Vec<ExpressionSite<'_>> {
    let mut out = Vec::new();
    let Some(spec) = policy.spec.as_ref() else {
        return out;
    };
    for (i, m) in spec.mutations.iter().flatten().enumerate() {
        match m.patch_type.as_str() {
            "ApplyConfiguration" => {
                if let Some(a) = &m.apply_configuration
                    && let Some(e) = a.expression.as_deref()
                {
                    out.push(ExpressionSite {
                        field: ExpressionField::ApplyConfiguration(i),
                        expression: e,
                    });
                }
            }
            "JSONPatch" => {
                if let Some(j) = &m.json_patch
                    && let Some(e) = j.expression.as_deref()
                {
                    out.push(ExpressionSite {
                        field: ExpressionField::JsonPatch(i),
                        expression: e,
                    });
                }
            }
            _ => {}
        }
    }
    if mode == Mode::Extended {
        crate::policy::expressions::push_condition_and_variable_sites(
            &mut out,
            spec.match_conditions
                .iter()
                .flatten()
                .map(|m| m.expression.as_str()),
            spec.variables
                .iter()
                .flatten()
                .map(|v| v.expression.as_str()),
        );
    }
    out
}

/// The mutation-specific findings of one expression for one kind, as cel-go reports issues
/// (`ERROR: <input>:L:C: message` with the source line and a caret), or `None`.
pub fn literal_issues(
    checker: &dyn ExpressionChecker,
    schema: Option<&SchemaType>,
    site: &ExpressionSite<'_>,
    parsed: &ParsedExpr,
) -> Option<Issues> {
    let root = schema.and_then(|t| Arc::clone(&t.0).downcast::<RootType>().ok())?;
    if !root.is_typed() {
        return None;
    }
    let literals = checker.patch_literals(parsed)?;
    let mut issues = Vec::new();
    match site.field {
        ExpressionField::ApplyConfiguration(_) => {
            schema::check_apply_configuration(root.root(), &literals, &mut issues);
        }
        ExpressionField::JsonPatch(_) => {
            schema::check_json_patches(root.root(), &literals, &mut issues);
        }
        _ => return None,
    }
    render_issues(site.expression, &issues)
}

/// The issues as cel-go reports them (sorted by position, its `Errors.ToDisplayString` text).
pub fn render_issues(text: &str, issues: &[schema::Issue]) -> Option<Issues> {
    if issues.is_empty() {
        return None;
    }
    let mut out = crate::cel::Issues::new(Arc::new(crate::cel::Source::new(text)));
    for (at, message) in issues {
        let location = at.map(|a| crate::cel::Location {
            line: a.line,
            column: a.column,
        });
        out.report(location, 0, message.clone());
    }
    Some(Issues::from_cel(&out))
}

/// Computes the status of one MutatingAdmissionPolicy: the kinds exactly as for
/// ValidatingAdmissionPolicies ([`crate::policy::kinds`]), `object`/`oldObject`/`params`
/// typed by their schemas, the mutations compiled with the patch types, and — in extended
/// mode — the result types (`Object`, `list(JSONPatch)`) and the literal checks of
/// [`schema`].
pub fn check_mutating_policy(
    policy: &MutatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> PolicyStatus {
    check_mutating_policy_parsed(policy, options, backends, &mut ParsedTexts::new())
}

/// [`check_mutating_policy`], leaving in `parsed` the parses it made
/// ([`crate::policy::check::check_policy_parsed`]).
pub fn check_mutating_policy_parsed<'p>(
    policy: &'p MutatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
    parsed: &mut ParsedTexts<'p>,
) -> PolicyStatus {
    let spec = policy.spec.as_ref();
    let input = PolicyInput {
        generation: policy.metadata.generation,
        constraints: spec.and_then(|s| s.match_constraints.as_ref()),
        param_kind: spec.and_then(|s| s.param_kind.as_ref()),
        sites: mutation_sites(policy, options.mode),
        variables: crate::policy::check::variable_pairs(spec.and_then(|s| s.variables.as_deref())),
        mutating: true,
        failure_policy: spec.and_then(|s| s.failure_policy.as_deref()),
        messages: Vec::new(),
        param_bindings: Vec::new(),
    };
    let checker = backends.checker;
    let extra =
        |_gvk: &Gvk,
         schema: Option<&SchemaType>,
         site: &ExpressionSite<'_>,
         parsed: &ParsedExpr| { literal_issues(checker, schema, site, parsed) };
    check_input_parsed(&input, options, backends, Some(&extra), parsed)
}

#[cfg(test)]
mod tests;
