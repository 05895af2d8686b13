//! `check_policy`: the whole computation of a policy's status over the backend traits.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    ExpressionWarning, MatchResources, ParamKind, ValidatingAdmissionPolicy,
};

use super::backend::{
    EnvRequest, ExpressionChecker, ObjectDecl, ParamsDecl, ParsedExpr, SchemaError, SchemaLookup,
    SchemaSource, SchemaType,
};
use super::cost::{CostOutcome, analyze as analyze_cost};
use super::expressions::{ExpressionField, ExpressionSite, Mode, expression_sites};
use super::gvk::Gvk;
use super::issues::{Issue, Issues};
use super::kinds::{
    DEFAULT_EXTENDED_KIND_LIMIT, KindSelection, ResetOnce, SkipReason, SkipSubject, Skipped,
    extend_selection, types_to_check_with,
};
use super::narrowing::{
    Classified, Facts, FindingClass, Guards, Pos, Presence, Truth, WHY_HAS_ABSENT,
    WHY_NO_KIND_HAS_FIELD, WHY_OPTIONAL_ABSENT, classify,
};
use super::render::{KindOutcome, KindResult, render_warning};
use super::restmapper::{Discovery, RestMapper};
use super::runtime_check::{KindView, ParamBinding, PolicyView, findings as runtime_findings};
use super::status::{
    ExpressionResults, PolicyStatus, expressions_valid_condition,
    expressions_valid_condition_classified, type_checked_condition,
};
use super::types::OutputType;

/// How to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    /// Strict or extended.
    pub mode: Mode,
    /// Extended mode: the most kinds checked per policy (strict always uses upstream's rule).
    pub kind_limit: usize,
    /// Extended mode: estimate each expression's CEL cost (docs/cost.md). Off, the status and
    /// the reports carry no estimates and no cost findings.
    pub estimate_costs: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Extended,
            kind_limit: DEFAULT_EXTENDED_KIND_LIMIT,
            estimate_costs: true,
        }
    }
}

/// The backends `check_policy` runs on.
#[derive(Clone, Copy)]
pub struct Backends<'a> {
    /// Resource → kinds.
    pub rest_mapper: &'a dyn RestMapper,
    /// Discovery for the extended mode's wildcard and subresource expansion (optional).
    pub discovery: Option<&'a dyn Discovery>,
    /// Kind → schema type.
    pub schemas: &'a dyn SchemaSource,
    /// Parser and per-kind environments.
    pub checker: &'a dyn ExpressionChecker,
}

/// A kind whose schema was resolved.
struct ResolvedKind {
    gvk: Gvk,
    object: Option<SchemaType>,
    /// Checked by upstream too (strict selection).
    upstream: bool,
}

/// The results of one expression, split into what upstream reports and what it does not.
#[derive(Default)]
struct SiteResults {
    upstream: Vec<KindResult>,
    extra: Vec<KindResult>,
}

/// The positions of the findings (upstream's and extended mode's) of one site for `gvk`.
fn finding_positions(res: &SiteResults, gvk: &Gvk) -> Vec<Pos> {
    res.upstream
        .iter()
        .chain(&res.extra)
        .filter(|r| &r.gvk == gvk)
        .flat_map(|r| match &r.outcome {
            KindOutcome::Issues(issues) => issues.0.as_slice(),
            KindOutcome::Error(_) => &[],
        })
        .filter_map(|i| i.pos)
        .collect()
}

/// The params declaration for a policy (upstream `paramsGVK` + `declType`): no `paramKind`,
/// an unparseable `apiVersion` or an empty GVK → absent; otherwise typed when the schema
/// resolves to a type, `dyn` when it does not.
pub(super) fn params_type(
    pk: Option<&ParamKind>,
    schemas: &dyn SchemaSource,
) -> Option<Option<SchemaType>> {
    let pk = pk?;
    let gvk = Gvk::from_api_version(
        pk.api_version.as_deref().unwrap_or(""),
        pk.kind.as_deref().unwrap_or(""),
    )?;
    if gvk.is_empty() {
        return None;
    }
    Some(match schemas.resolve(&gvk) {
        Ok(SchemaLookup::Typed(t)) => Some(t),
        Ok(SchemaLookup::Untyped) | Err(_) => None,
    })
}

/// What [`check_input`] checks of one policy: the parts shared by ValidatingAdmissionPolicies
/// and MutatingAdmissionPolicies.
pub struct PolicyInput<'p> {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `spec.matchConstraints`.
    pub constraints: Option<&'p MatchResources>,
    /// `spec.paramKind`.
    pub param_kind: Option<&'p ParamKind>,
    /// The expressions to check, in output order.
    pub sites: Vec<ExpressionSite<'p>>,
    /// `spec.variables` as `(name, expression)`, in order.
    pub variables: Vec<(&'p str, &'p str)>,
    /// A MutatingAdmissionPolicy ([`EnvRequest::mutating`]).
    pub mutating: bool,
    /// `spec.failurePolicy` (`Fail` when absent).
    pub failure_policy: Option<&'p str>,
    /// `spec.validations[i].message`, by validation index (empty for a
    /// MutatingAdmissionPolicy).
    pub messages: Vec<Option<&'p str>>,
    /// For a policy with a `paramKind`: the `params` each of its bindings evaluates it with
    /// (runtime safety on `params`, step 5c; empty: not analysed).
    pub param_bindings: Vec<ParamBinding>,
}

/// `spec.variables` as `(name, expression)` pairs, in order (both policy kinds use the same
/// `Variable` type).
pub fn variable_pairs(
    variables: Option<&[k8s_openapi::api::admissionregistration::v1::Variable]>,
) -> Vec<(&str, &str)> {
    variables
        .unwrap_or_default()
        .iter()
        .map(|v| (v.name.as_str(), v.expression.as_str()))
        .collect()
}

/// A check run after an expression type-checked for one kind, in extended mode (the
/// MutatingAdmissionPolicy literal analysis): the kind, its schema type (`None`: untyped),
/// the site and the parsed expression → cel-go-formatted issues, or `None`.
pub type ExtraCheck<'a> =
    dyn Fn(&Gvk, Option<&SchemaType>, &ExpressionSite<'_>, &ParsedExpr) -> Option<Issues> + 'a;

/// Computes the status of one policy.
///
/// Steps, as kube-controller-manager's `TypeChecker.Check` plus the extended additions:
/// 1. select kinds ([`types_to_check`](super::kinds::types_to_check) or
///    [`types_to_check_extended`](super::kinds::types_to_check_extended));
/// 2. resolve each kind's schema once; kinds without one are skipped (and reported);
/// 3. resolve `params` once;
/// 4. parse each distinct expression once (variables included);
/// 5. per kind: build its environment once, type the variables in order (each declared with
///    its converted output type, `dyn` when it fails), then check every expression;
/// 6. render warnings per expression in upstream order, then the conditions.
///
/// In extended mode every upstream entry keeps upstream's text as its prefix; extra
/// per-kind blocks (result types, extra kinds) follow it in the same entry.
pub fn check_policy(
    policy: &ValidatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> PolicyStatus {
    check_policy_parsed(policy, options, backends, &mut ParsedTexts::new())
}

/// The parses of a policy's expression texts ([`ExpressionChecker::parse`]), by text.
pub type ParsedTexts<'p> = HashMap<&'p str, Result<ParsedExpr, Issues>>;

/// [`check_policy`], leaving in `parsed` the parses it made (for the next pass over the same
/// policy: the create-time validation parses the same texts). Texts already in `parsed` are
/// not parsed again; `parsed` must hold only [`Backends::checker`]'s parses of those texts.
pub fn check_policy_parsed<'p>(
    policy: &'p ValidatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
    parsed: &mut ParsedTexts<'p>,
) -> PolicyStatus {
    check_policy_with_params(policy, options, backends, parsed, Vec::new())
}

/// [`check_policy_parsed`] knowing what `params` each binding of the policy evaluates it with
/// (`vapcheck check`, where the bindings and param objects are in the input): in extended
/// mode a policy with a `paramKind` then gets the runtime findings of its `params` chains,
/// per binding.
pub fn check_policy_with_params<'p>(
    policy: &'p ValidatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
    parsed: &mut ParsedTexts<'p>,
    param_bindings: Vec<ParamBinding>,
) -> PolicyStatus {
    let spec = policy.spec.as_ref();
    let input = PolicyInput {
        generation: policy.metadata.generation,
        constraints: spec.and_then(|s| s.match_constraints.as_ref()),
        param_kind: spec.and_then(|s| s.param_kind.as_ref()),
        sites: expression_sites(policy, options.mode),
        variables: variable_pairs(spec.and_then(|s| s.variables.as_deref())),
        mutating: false,
        failure_policy: spec.and_then(|s| s.failure_policy.as_deref()),
        messages: spec
            .and_then(|s| s.validations.as_deref())
            .unwrap_or_default()
            .iter()
            .map(|v| v.message.as_deref())
            .collect(),
        param_bindings,
    };
    check_input_parsed(&input, options, backends, None, parsed)
}

/// [`check_policy`] over the shared parts of a policy ([`PolicyInput`]), with an optional
/// extra per-kind check of each expression (extended mode only).
pub fn check_input(
    input: &PolicyInput<'_>,
    options: &CheckOptions,
    backends: &Backends<'_>,
    extra: Option<&ExtraCheck<'_>>,
) -> PolicyStatus {
    check_input_parsed(input, options, backends, extra, &mut ParsedTexts::new())
}

/// [`check_input`] with the parses of `parsed` (see [`check_policy_parsed`]).
pub fn check_input_parsed<'p>(
    input: &PolicyInput<'p>,
    options: &CheckOptions,
    backends: &Backends<'_>,
    extra: Option<&ExtraCheck<'_>>,
    parsed: &mut ParsedTexts<'p>,
) -> PolicyStatus {
    let generation = input.generation;
    let mode = options.mode;
    let constraints = input.constraints;
    let mut reset = ResetOnce::default();
    let strict_selection = types_to_check_with(&constraints, backends.rest_mapper, &mut reset);
    let selection = match mode {
        Mode::Strict => strict_selection.clone(),
        Mode::Extended => extend_selection(
            &constraints,
            strict_selection.kinds.clone(),
            backends.rest_mapper,
            backends.discovery,
            options.kind_limit,
            &mut reset,
        ),
    };
    let KindSelection { kinds, mut skipped } = selection;

    // 2. schemas
    let mut resolved = Vec::with_capacity(kinds.len());
    let mut schema_failures = 0usize;
    for gvk in kinds {
        match backends.schemas.resolve(&gvk) {
            Ok(lookup) => {
                let object = match lookup {
                    SchemaLookup::Typed(t) => Some(t),
                    SchemaLookup::Untyped => None,
                };
                let upstream = strict_selection.kinds.contains(&gvk);
                resolved.push(ResolvedKind {
                    gvk,
                    object,
                    upstream,
                });
            }
            Err(SchemaError::NotFound) => {
                skipped.push(Skipped {
                    subject: SkipSubject::Gvk(gvk),
                    reason: SkipReason::NoSchema,
                });
            }
            Err(SchemaError::Failed(e)) => {
                schema_failures += 1;
                skipped.push(Skipped {
                    subject: SkipSubject::Gvk(gvk),
                    reason: SkipReason::SchemaError(e),
                });
            }
        }
    }
    let all_schemas_failed = resolved.is_empty() && schema_failures > 0;

    // 3. params (only looked up when there is a kind to check)
    let params = if resolved.is_empty() {
        None
    } else {
        params_type(input.param_kind, backends.schemas)
    };

    // 4. parse once per distinct expression
    let sites = &input.sites;
    let variables = &input.variables;
    // Nothing to check against: no parsing either (upstream compiles only per kind).
    if !resolved.is_empty() {
        let texts = sites
            .iter()
            .map(|s| s.expression)
            .chain(variables.iter().map(|(_, e)| *e));
        for text in texts {
            parsed
                .entry(text)
                .or_insert_with(|| backends.checker.parse(text));
        }
    }

    // 5. per kind
    let mut results: Vec<SiteResults> = sites.iter().map(|_| SiteResults::default()).collect();
    let mut estimates: Vec<Vec<(ExpressionField, Arc<Gvk>, CostOutcome)>> =
        sites.iter().map(|_| Vec::new()).collect();
    for kind in &resolved {
        check_kind(
            kind,
            mode,
            sites,
            variables,
            parsed,
            params.as_ref(),
            backends.checker,
            extra,
            input.mutating,
            options.estimate_costs,
            &mut results,
            &mut estimates,
        );
    }
    // Extended mode: the cost estimates, in site order then kind order.
    let cost = analyze_cost(estimates.into_iter().flatten().collect());

    // 5b. extended mode: kind narrowing and runtime classes (docs/extended-mode.md)
    let guards: HashMap<&str, Guards> = if mode == Mode::Extended {
        parsed
            .iter()
            .filter_map(|(text, p)| {
                let g = backends.checker.guards(p.as_ref().ok()?)?;
                Some((*text, g))
            })
            .collect()
    } else {
        HashMap::new()
    };

    // 6. warnings and conditions
    let mut expression_warnings = Vec::new();
    let mut expression_results = Vec::new();
    let mut findings = Vec::new();
    // Required fields are guaranteed only after the registry's validation, which runs after
    // mutating admission: MutatingAdmissionPolicies get no required-field facts.
    // Absent fields: custom resources are pruned when decoded, built-in objects are Go
    // structs; kept to validating policies like required fields (no e2e for mutations yet).
    let presence = |gvk: &Gvk, path: &[String]| {
        if input.mutating {
            return Presence::Unknown;
        }
        let Some(t) = resolved
            .iter()
            .find(|k| k.gvk == *gvk)
            .and_then(|k| k.object.as_ref())
        else {
            return Presence::Unknown;
        };
        if backends.checker.is_required_field(t, path) {
            Presence::Required
        } else if backends.checker.is_absent_field(t, path) {
            Presence::Absent
        } else {
            Presence::Unknown
        }
    };
    // 5c. extended mode: runtime safety (issue 31), for validating and mutating policies
    // without params, and for a policy with a paramKind whose bindings are known: its
    // `params` chains, with the params each binding evaluates it with (null without a
    // paramRef, k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/generic/
    // policy_dispatcher.go `CollectParams`; otherwise the param objects).
    let runtime = if mode == Mode::Extended
        && (input.param_kind.is_none() || !input.param_bindings.is_empty())
    {
        let kinds: Vec<KindView<'_>> = resolved
            .iter()
            .map(|k| KindView {
                gvk: &k.gvk,
                object: k.object.as_ref(),
                errors: results
                    .iter()
                    .map(|r| finding_positions(r, &k.gvk))
                    .collect(),
            })
            .collect();
        let view = PolicyView {
            constraints: input.constraints,
            failure_policy: input.failure_policy,
            sites,
            variables,
            messages: &input.messages,
            has_param_kind: input.param_kind.is_some(),
            param_bindings: &input.param_bindings,
        };
        runtime_findings(&view, &kinds, backends.checker, parsed, &guards, &presence)
    } else {
        Vec::new()
    };
    let excluded = if mode == Mode::Extended && !input.mutating {
        excluded_by_match_conditions(sites, &results, &guards, &resolved, &presence)
    } else {
        Vec::new()
    };
    // A variable is evaluated where it is used; matchConditions may use it too.
    let conditions_use_variables = sites.iter().any(|s| {
        matches!(s.field, ExpressionField::MatchCondition(_)) && s.expression.contains("variables")
    });
    let unused_variables = if mode == Mode::Extended {
        variables_not_evaluated(sites, variables, &results, &guards, &resolved, &presence)
    } else {
        Vec::new()
    };
    let checked: Vec<Gvk> = resolved.iter().map(|k| k.gvk.clone()).collect();
    for (site, res) in sites.iter().zip(results) {
        let behind_conditions = match site.field {
            ExpressionField::MatchCondition(_) => false,
            ExpressionField::Variable(_) => !conditions_use_variables,
            _ => true,
        };
        let skip_kind = |gvk: &Gvk| {
            (behind_conditions && excluded.contains(gvk))
                || matches!(site.field, ExpressionField::Variable(i)
                    if unused_variables.contains(&(i, gvk.clone())))
        };
        let all: Vec<KindResult> = if mode == Mode::Extended {
            narrow_site(
                &site.field.to_string(),
                res,
                guards.get(site.expression),
                input.mutating,
                &presence,
                &skip_kind,
                &checked,
                &mut findings,
            )
        } else {
            res.upstream.into_iter().chain(res.extra).collect()
        };
        if all.is_empty() {
            continue;
        }
        expression_warnings.push(ExpressionWarning {
            field_ref: site.field.to_string(),
            warning: render_warning(&all),
        });
        expression_results.push(ExpressionResults {
            field_ref: site.field.to_string(),
            kinds: all,
        });
    }
    let checked_kinds = checked;
    let conditions = vec![
        type_checked_condition(generation, &checked_kinds, &skipped, all_schemas_failed),
        match mode {
            Mode::Strict => expressions_valid_condition(
                generation,
                &expression_warnings,
                sites.len(),
                !all_schemas_failed,
            ),
            Mode::Extended => expressions_valid_condition_classified(
                generation,
                &expression_warnings,
                &findings,
                &runtime,
                sites.len(),
                !all_schemas_failed,
            ),
        },
    ];
    PolicyStatus {
        observed_generation: generation,
        expression_warnings,
        expression_results,
        conditions,
        expressions_checked: sites.len(),
        checked_kinds,
        skipped,
        findings,
        runtime,
        cost,
    }
}

/// Extended mode: classifies every finding of one expression ([`classify`]) and drops, from
/// the results upstream does not report, the findings in branches not evaluated for their
/// kind. Upstream's results keep their text (strict's text is a prefix of extended's).
///
/// MutatingAdmissionPolicies (`mutating`) have no upstream text to keep: every finding in a
/// branch not evaluated for its kind is dropped, and so is every static-typing-only finding
/// that involves an `Object` type ([`is_patch_typing_artefact`]).
#[allow(clippy::too_many_arguments)]
fn narrow_site(
    field_ref: &str,
    res: SiteResults,
    guards: Option<&Guards>,
    mutating: bool,
    presence: &dyn Fn(&Gvk, &[String]) -> Presence,
    skip_kind: &dyn Fn(&Gvk) -> bool,
    checked: &[Gvk],
    findings: &mut Vec<Classified>,
) -> Vec<KindResult> {
    fn issues_of(r: &KindResult) -> &[Issue] {
        match &r.outcome {
            KindOutcome::Issues(issues) => &issues.0,
            KindOutcome::Error(_) => &[],
        }
    }
    let mut errors: HashMap<Gvk, Vec<Pos>> = HashMap::new();
    for r in res.upstream.iter().chain(&res.extra) {
        errors
            .entry(r.gvk.clone())
            .or_default()
            .extend(issues_of(r).iter().filter_map(|i| i.pos));
    }
    let tagged = res
        .upstream
        .into_iter()
        .map(|r| (r, true))
        .chain(res.extra.into_iter().map(|r| (r, false)));
    let mut out = Vec::new();
    for (r, upstream) in tagged {
        let errs = errors.get(&r.gvk).map(Vec::as_slice).unwrap_or_default();
        let issues = match &r.outcome {
            KindOutcome::Error(e) => {
                findings.push(Classified {
                    field_ref: field_ref.to_owned(),
                    gvk: r.gvk.clone(),
                    upstream,
                    class: FindingClass::FailsAtAdmission,
                    why: "type checking error",
                    message: e.lines().next().unwrap_or_default().to_owned(),
                });
                out.push(r);
                continue;
            }
            KindOutcome::Issues(issues) => issues.0.as_slice(),
        };
        let mut kept: Vec<&Issue> = Vec::with_capacity(issues.len());
        for issue in issues {
            let (class, why) = if skip_kind(&r.gvk) {
                (
                    FindingClass::Unreachable,
                    "a matchCondition, or the guards of every use, is false for this kind",
                )
            } else {
                let (class, why) = classify(issue, guards, &r.gvk, errs, &|path: &[String]| {
                    presence(&r.gvk, path)
                });
                // A presence test of a field that no checked kind has never finds it: a
                // typo rather than a field of another kind.
                let everywhere = |p: Pos| {
                    checked
                        .iter()
                        .all(|k| errors.get(k).is_some_and(|e| e.contains(&p)))
                };
                if (why == WHY_HAS_ABSENT || why == WHY_OPTIONAL_ABSENT)
                    && issue.pos.is_some_and(everywhere)
                {
                    (FindingClass::FailsAtAdmission, WHY_NO_KIND_HAS_FIELD)
                } else {
                    (class, why)
                }
            };
            findings.push(Classified {
                field_ref: field_ref.to_owned(),
                gvk: r.gvk.clone(),
                upstream,
                class,
                why,
                message: issue.text.lines().next().unwrap_or_default().to_owned(),
            });
            let keep = if mutating {
                class != FindingClass::Unreachable
                    && !(class == FindingClass::StaticTypingOnly
                        && is_patch_typing_artefact(&issue.message))
            } else {
                upstream || class != FindingClass::Unreachable
            };
            if keep {
                kept.push(issue);
            }
        }
        if kept.len() == issues.len() {
            out.push(r);
        } else if !kept.is_empty() {
            let kept = Issues(kept.into_iter().cloned().collect());
            out.push(KindResult {
                gvk: r.gvk,
                outcome: KindOutcome::Issues(kept),
            });
        }
    }
    out
}

/// The kinds for which some matchCondition is false for every object (its whole expression's
/// formula, [`Guards::root`], evaluates to false). The validating plugin evaluates a policy's
/// matchConditions first and returns no decision when they do not all hold, before any
/// validation, messageExpression or auditAnnotation is evaluated (k8s.io/apiserver v0.37.1
/// `pkg/admission/plugin/policy/validating/validator.go`, `validator.Validate`: `celMatcher.Match`,
/// then `validationFilter.ForInput`, `messageFilter.ForInput`, `auditAnnotationFilter.ForInput`).
fn excluded_by_match_conditions(
    sites: &[ExpressionSite<'_>],
    results: &[SiteResults],
    guards: &HashMap<&str, Guards>,
    resolved: &[ResolvedKind],
    presence: &dyn Fn(&Gvk, &[String]) -> Presence,
) -> Vec<Gvk> {
    let mut out = Vec::new();
    for (site, res) in sites.iter().zip(results) {
        if !matches!(site.field, ExpressionField::MatchCondition(_)) {
            continue;
        }
        let Some(g) = guards.get(site.expression) else {
            continue;
        };
        for kind in resolved {
            let errors = finding_positions(res, &kind.gvk);
            let facts = Facts {
                kind: &kind.gvk.kind,
                group_version: Some((&kind.gvk.group, &kind.gvk.version)),
                errors: &errors,
                presence: &|path: &[String]| presence(&kind.gvk, path),
                node_operand: None,
            };
            if g.root.eval_in(&facts) == Truth::False && !out.contains(&kind.gvk) {
                out.push(kind.gvk.clone());
            }
        }
    }
    out
}

/// `(variable index, kind)` pairs where the variable is never evaluated for the kind. A
/// variable is evaluated lazily, when an expression reads `variables.<name>` (k8s.io/apiserver
/// v0.37.1 `pkg/admission/plugin/cel/composition.go`, `compositionContext.Variables`: a
/// `lazy.MapValue` whose entries call `variableAccessor.Callback` on first access). Conservative:
/// the variable has at least one use, every use is a plain `variables.<name>` in a
/// validation, messageExpression, auditAnnotation, matchCondition or mutation (none in another
/// variable), no expression uses `variables` in any other way, and the guard of every use is
/// false for the kind (with that expression's own findings for the kind).
fn variables_not_evaluated(
    sites: &[ExpressionSite<'_>],
    variables: &[(&str, &str)],
    results: &[SiteResults],
    guards: &HashMap<&str, Guards>,
    resolved: &[ResolvedKind],
    presence: &dyn Fn(&Gvk, &[String]) -> Presence,
) -> Vec<(usize, Gvk)> {
    let mut out = Vec::new();
    if variables.is_empty() {
        return out;
    }
    // Every site must be analysed and use `variables` only as `variables.<name>`.
    let mut analysed = Vec::with_capacity(sites.len());
    for site in sites {
        let Some(g) = guards.get(site.expression) else {
            return out;
        };
        let idents = g.nodes.iter().filter(|n| n.variables_ident).count();
        let uses = g.nodes.iter().filter(|n| n.variable.is_some()).count();
        if idents != uses {
            return out;
        }
        analysed.push(g);
    }
    for (vi, (name, _)) in variables.iter().enumerate() {
        let used_by_variable = sites.iter().zip(&analysed).any(|(s, g)| {
            matches!(s.field, ExpressionField::Variable(_))
                && g.nodes.iter().any(|n| n.variable.as_deref() == Some(*name))
        });
        if used_by_variable {
            continue;
        }
        // The uses, per site (computed once for every kind).
        let uses_by_site: Vec<(&SiteResults, Vec<&super::narrowing::GuardedNode>)> = sites
            .iter()
            .zip(&analysed)
            .zip(results)
            .filter(|((site, _), _)| !matches!(site.field, ExpressionField::Variable(_)))
            .map(|((_, g), res)| {
                let uses = g
                    .nodes
                    .iter()
                    .filter(|n| n.variable.as_deref() == Some(*name))
                    .collect::<Vec<_>>();
                (res, uses)
            })
            .filter(|(_, uses)| !uses.is_empty())
            .collect();
        if uses_by_site.is_empty() {
            continue;
        }
        for kind in resolved {
            let mut all_false = true;
            for (res, uses) in &uses_by_site {
                let errors = finding_positions(res, &kind.gvk);
                for n in uses {
                    let facts = Facts {
                        kind: &kind.gvk.kind,
                        group_version: Some((&kind.gvk.group, &kind.gvk.version)),
                        errors: &errors,
                        presence: &|path: &[String]| presence(&kind.gvk, path),
                        node_operand: n.operand_path.as_deref(),
                    };
                    if n.guard.eval_in(&facts) != Truth::False {
                        all_false = false;
                        break;
                    }
                }
                if !all_false {
                    break;
                }
            }
            if all_false {
                out.push((vi, kind.gvk.clone()));
            }
        }
    }
    out
}

/// Whether a checker message is about a type `Object` or `Object.<path>` (the patch types of
/// MutatingAdmissionPolicies), e.g. `found no matching overload for '_+_' applied to
/// '(list(Object.spec.x), list(Job.spec.x.@idx))'`. vapcheck types `object` with the kind's
/// schema, where the same path has a schema type distinct from its `Object` type; upstream
/// declares `object` `dyn` for MAPs (k8s.io/apiserver v0.37.1 admission/plugin/cel/compile.go
/// `createEnvForOpts`), so a static-typing-only mismatch between the two is no mistake.
fn is_patch_typing_artefact(message: &str) -> bool {
    message.match_indices("Object").any(|(i, _)| {
        let before = message[..i].chars().next_back();
        let after = message[i + "Object".len()..].chars().next();
        matches!(before, Some('(' | ' ')) && matches!(after, Some('.' | ')' | ',' | '\''))
    })
}

#[allow(clippy::too_many_arguments)]
fn check_kind(
    kind: &ResolvedKind,
    mode: Mode,
    sites: &[ExpressionSite<'_>],
    variables: &[(&str, &str)],
    parsed: &HashMap<&str, Result<ParsedExpr, Issues>>,
    params: Option<&Option<SchemaType>>,
    checker: &dyn ExpressionChecker,
    extra: Option<&ExtraCheck<'_>>,
    mutating: bool,
    estimate_costs: bool,
    results: &mut [SiteResults],
    estimates: &mut [Vec<(ExpressionField, Arc<Gvk>, CostOutcome)>],
) {
    // One shared copy of the kind for all its estimates.
    let mut shared_gvk: Option<Arc<Gvk>> = None;
    let object = match &kind.object {
        Some(t) => ObjectDecl::Typed(t),
        None => ObjectDecl::Dyn,
    };
    let params = match params {
        None => ParamsDecl::Absent,
        Some(None) => ParamsDecl::Dyn,
        Some(Some(t)) => ParamsDecl::Typed(t),
    };
    let push = |results: &mut [SiteResults],
                i: usize,
                field: ExpressionField,
                outcome: KindOutcome,
                upstream: bool| {
        let r = KindResult {
            gvk: kind.gvk.clone(),
            outcome,
        };
        // Upstream entries only ever hold upstream results for upstream kinds.
        if upstream && kind.upstream && field.is_upstream() {
            results[i].upstream.push(r);
        } else if mode == Mode::Extended {
            results[i].extra.push(r);
        }
    };
    let request = |patch_types: bool| EnvRequest {
        gvk: &kind.gvk,
        object,
        params,
        patch_types,
        mutating,
    };
    // Mutations are compiled with the patch types, variables and match conditions without
    // (k8s.io/apiserver v0.37.1 mutating/compilation.go compilePolicy): a second environment
    // when the policy has mutations.
    let needs_patch_env = sites.iter().any(|s| s.field.has_patch_types());
    let envs = checker.environment(&request(false)).and_then(|env| {
        let patch = if needs_patch_env {
            Some(checker.environment(&request(true))?)
        } else {
            None
        };
        Ok((env, patch))
    });
    let (mut env, mut patch_env) = match envs {
        Ok(envs) => envs,
        Err(e) => {
            // upstream typeCheckingCompiler.CompileCELExpression: "fail to build env: %v",
            // rendered as a `type checking error`.
            for (i, site) in sites.iter().enumerate() {
                push(
                    results,
                    i,
                    site.field,
                    KindOutcome::Error(format!("fail to build env: {e}")),
                    true,
                );
            }
            return;
        }
    };
    let check = |env: &dyn super::backend::CheckEnv, text: &str| -> Result<OutputType, Issues> {
        match parsed.get(text) {
            Some(Ok(p)) => env.check(p),
            Some(Err(issues)) => Err(issues.clone()),
            // Every text was parsed above; an absent entry cannot happen, but stay total.
            None => Err(Issues::one(Issue::plain(format!(
                "internal: expression {text:?} was not parsed"
            )))),
        }
    };
    // Variables, in order (composition.go CompileAndStoreVariables).
    let mut variable_results = Vec::with_capacity(variables.len());
    for (name, text) in variables {
        let result = check(env.as_ref(), text);
        let ty = match &result {
            Ok(t) => t.variable_decl_type(),
            Err(_) => OutputType::Dyn,
        };
        env.declare_variable(name, &ty);
        if let Some(p) = patch_env.as_mut() {
            p.declare_variable(name, &ty);
        }
        variable_results.push(result);
    }
    for (i, site) in sites.iter().enumerate() {
        let result = match site.field {
            ExpressionField::Variable(vi) => variable_results
                .get(vi)
                .cloned()
                .unwrap_or_else(|| check(env.as_ref(), site.expression)),
            f if f.has_patch_types() => match &patch_env {
                Some(p) => check(p.as_ref(), site.expression),
                None => check(env.as_ref(), site.expression),
            },
            _ => check(env.as_ref(), site.expression),
        };
        if mode == Mode::Extended
            && let Some(Ok(p)) = parsed.get(site.expression)
            && let Some(notes) = env.notes(p)
        {
            push(results, i, site.field, KindOutcome::Issues(notes), false);
        }
        match result {
            Err(issues) => push(results, i, site.field, KindOutcome::Issues(issues), true),
            Ok(out) => {
                if mode == Mode::Extended
                    && let Some(msg) = site.field.expected_type().mismatch(&out)
                {
                    push(
                        results,
                        i,
                        site.field,
                        KindOutcome::Issues(Issues::one(Issue::plain(msg))),
                        false,
                    );
                }
                if mode == Mode::Extended
                    && let Some(extra) = extra
                    && let Some(Ok(p)) = parsed.get(site.expression)
                    && let Some(issues) = extra(&kind.gvk, kind.object.as_ref(), site, p)
                {
                    push(results, i, site.field, KindOutcome::Issues(issues), false);
                }
                // Cost estimates: validating policies only (docs/cost.md).
                if mode == Mode::Extended
                    && !mutating
                    && estimate_costs
                    && let Some(Ok(p)) = parsed.get(site.expression)
                    && let Some(c) = env.cost(p)
                {
                    let gvk = shared_gvk.get_or_insert_with(|| Arc::new(kind.gvk.clone()));
                    estimates[i].push((site.field, Arc::clone(gvk), c));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use k8s_openapi::api::admissionregistration::v1::{
        AuditAnnotation, MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind,
        ValidatingAdmissionPolicySpec, Validation, Variable,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::policy::fakes::{FakeChecker, FakeSchema, FakeSchemas};
    use crate::policy::restmapper::DiscoveryRestMapper;
    use crate::policy::restmapper::tests::sample_discovery;

    use crate::policy::fakes::rule;

    fn validation(expr: &str, msg: Option<&str>) -> Validation {
        Validation {
            expression: expr.into(),
            message_expression: msg.map(Into::into),
            ..Default::default()
        }
    }

    fn policy(
        rules: Vec<NamedRuleWithOperations>,
        validations: Vec<Validation>,
    ) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            metadata: ObjectMeta {
                name: Some("p".into()),
                generation: Some(4),
                ..Default::default()
            },
            spec: Some(ValidatingAdmissionPolicySpec {
                match_constraints: Some(MatchResources {
                    resource_rules: Some(rules),
                    ..Default::default()
                }),
                validations: Some(validations),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn deploy() -> Gvk {
        Gvk::new("apps", "v1", "Deployment")
    }
    fn rs() -> Gvk {
        Gvk::new("apps", "v1", "ReplicaSet")
    }

    fn schemas() -> FakeSchemas {
        let spec = FakeSchema::with(&[
            ("spec", OutputType::Other("X.spec".into())),
            ("name", OutputType::String),
            ("paused", OutputType::Bool),
        ]);
        FakeSchemas::default()
            .typed(deploy(), spec.clone())
            .typed(rs(), spec)
    }

    struct World {
        mapper: DiscoveryRestMapper,
        schemas: FakeSchemas,
        checker: FakeChecker,
    }

    impl World {
        fn new() -> Self {
            Self {
                mapper: DiscoveryRestMapper::new(sample_discovery()),
                schemas: schemas(),
                checker: FakeChecker::default(),
            }
        }
        fn run(&self, p: &ValidatingAdmissionPolicy, mode: Mode) -> PolicyStatus {
            let backends = Backends {
                rest_mapper: &self.mapper,
                discovery: Some(&self.mapper),
                schemas: &self.schemas,
                checker: &self.checker,
            };
            check_policy(
                p,
                &CheckOptions {
                    mode,
                    kind_limit: 100,
                    ..CheckOptions::default()
                },
                &backends,
            )
        }
    }

    fn warnings(s: &PolicyStatus) -> Vec<(String, String)> {
        s.expression_warnings
            .iter()
            .map(|w| (w.field_ref.clone(), w.warning.clone()))
            .collect()
    }

    fn apps_rule() -> NamedRuleWithOperations {
        rule(&["apps"], &["v1"], &["replicasets", "deployments"])
    }

    #[test]
    fn strict_renders_each_kind_in_order_and_skips_clean_expressions() {
        let w = World::new();
        let p = policy(
            vec![apps_rule()],
            vec![
                validation("object.replicas", None),
                validation("object.paused", Some("object.name")),
            ],
        );
        let s = w.run(&p, Mode::Strict);
        assert_eq!(
            warnings(&s),
            [(
                "spec.validations[0].expression".to_owned(),
                "apps/v1, Kind=Deployment: ERROR: <input>:1:1: undefined field 'replicas'\n\n\
                 apps/v1, Kind=ReplicaSet: ERROR: <input>:1:1: undefined field 'replicas'\n"
                    .to_owned()
            )]
        );
        assert_eq!(s.observed_generation, Some(4));
        assert_eq!(s.checked_kinds, [deploy(), rs()]);
        let types: Vec<(&str, &str, &str)> = s
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("TypeChecked", "True", "AllKindsChecked"),
                ("ExpressionsValid", "False", "ExpressionWarnings")
            ]
        );
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(4))
        );
    }

    #[test]
    fn no_warnings_gives_empty_type_checking() {
        let w = World::new();
        let p = policy(vec![apps_rule()], vec![validation("object.paused", None)]);
        let s = w.run(&p, Mode::Strict);
        assert!(s.expression_warnings.is_empty());
        assert_eq!(serde_json::to_string(&s.type_checking()).unwrap(), "{}");
        assert_eq!(s.conditions[1].reason, "NoWarnings");
    }

    #[test]
    fn strict_ignores_other_fields_and_result_types_extended_reports_them() {
        let w = World::new();
        let mut p = policy(
            vec![rule(&["apps"], &["v1"], &["deployments"])],
            vec![validation("object.name", Some("object.paused"))],
        );
        let spec = p.spec.as_mut().unwrap();
        spec.match_conditions = Some(vec![MatchCondition {
            name: "m".into(),
            expression: "'x'".into(),
        }]);
        spec.variables = Some(vec![Variable {
            name: "v".into(),
            expression: "object.nope".into(),
        }]);
        spec.audit_annotations = Some(vec![
            AuditAnnotation {
                key: "a".into(),
                value_expression: "null".into(),
            },
            AuditAnnotation {
                key: "b".into(),
                value_expression: "1".into(),
            },
        ]);
        let strict = w.run(&p, Mode::Strict);
        assert!(
            strict.expression_warnings.is_empty(),
            "{:?}",
            strict.expression_warnings
        );
        let ext = w.run(&p, Mode::Extended);
        let k = "apps/v1, Kind=Deployment: ";
        assert_eq!(
            warnings(&ext),
            [
                (
                    "spec.validations[0].expression".into(),
                    format!("{k}must evaluate to bool but got string\n")
                ),
                (
                    "spec.validations[0].messageExpression".into(),
                    format!("{k}must evaluate to string but got bool\n")
                ),
                (
                    "spec.matchConditions[0].expression".into(),
                    format!("{k}must evaluate to bool but got string\n")
                ),
                (
                    "spec.variables[0].expression".into(),
                    format!("{k}ERROR: <input>:1:1: undefined field 'nope'\n")
                ),
                (
                    "spec.auditAnnotations[1].valueExpression".into(),
                    format!("{k}must evaluate to one of [string null_type] but got int\n")
                ),
            ]
        );
    }

    #[test]
    fn variables_are_typed_in_order_and_converted() {
        let w = World::new();
        let mut p = policy(
            vec![rule(&["apps"], &["v1"], &["deployments"])],
            vec![
                validation("variables.later == 1", None), // `later` references a later variable: dyn, no error
                validation("variables.obj == 1", None),   // object type → dyn, no error
                validation("variables.missing", None),    // never declared
                validation("variables.num", None),        // int: only extended complains
                validation("variables.broken == 1", None), // failed variable → dyn
            ],
        );
        p.spec.as_mut().unwrap().variables = Some(vec![
            Variable {
                name: "num".into(),
                expression: "1".into(),
            },
            Variable {
                name: "later".into(),
                expression: "variables.obj".into(),
            },
            Variable {
                name: "obj".into(),
                expression: "object.spec".into(),
            },
            Variable {
                name: "broken".into(),
                expression: "nope".into(),
            },
        ]);
        let s = w.run(&p, Mode::Strict);
        assert_eq!(
            warnings(&s),
            [(
                "spec.validations[2].expression".to_owned(),
                "apps/v1, Kind=Deployment: ERROR: <input>:1:1: undefined field 'missing'\n"
                    .to_owned()
            )]
        );
        let s = w.run(&p, Mode::Extended);
        let refs: Vec<String> = s
            .expression_warnings
            .iter()
            .map(|w| w.field_ref.clone())
            .collect();
        assert_eq!(
            refs,
            [
                "spec.validations[2].expression",
                "spec.validations[3].expression",
                "spec.variables[1].expression",
                "spec.variables[3].expression",
            ]
        );
    }

    #[test]
    fn each_expression_is_parsed_once_and_each_kind_gets_one_environment() {
        let w = World::new();
        let mut p = policy(
            vec![apps_rule()],
            vec![
                validation("object.paused", Some("object.name")),
                validation("object.paused", None),
            ],
        );
        p.spec.as_mut().unwrap().variables = Some(vec![Variable {
            name: "v".into(),
            expression: "object.name".into(),
        }]);
        w.run(&p, Mode::Extended);
        assert_eq!(w.checker.parses.load(Ordering::SeqCst), 2);
        assert_eq!(w.checker.envs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn parse_errors_are_repeated_for_every_kind() {
        let w = World::new();
        let p = policy(vec![apps_rule()], vec![validation("object.@", None)]);
        let s = w.run(&p, Mode::Strict);
        let issue = "ERROR: <input>:1:8: Syntax error: token recognition error at: '@'\n | object.@\n | .......^";
        assert_eq!(
            s.expression_warnings[0].warning,
            format!("apps/v1, Kind=Deployment: {issue}\n\napps/v1, Kind=ReplicaSet: {issue}\n")
        );
    }

    #[test]
    fn environment_failures_are_type_checking_errors() {
        let mut w = World::new();
        w.checker.env_error = Some("boom".into());
        let p = policy(
            vec![rule(&["apps"], &["v1"], &["deployments"])],
            vec![validation("true", None)],
        );
        let s = w.run(&p, Mode::Strict);
        assert_eq!(
            s.expression_warnings[0].warning,
            "apps/v1, Kind=Deployment: type checking error: fail to build env: boom\n"
        );
    }

    #[test]
    fn schemas_missing_untyped_and_failing() {
        let mut w = World::new();
        w.schemas = FakeSchemas::default().untyped(deploy());
        let p = policy(vec![apps_rule()], vec![validation("object.anything", None)]);
        let s = w.run(&p, Mode::Strict);
        // Deployment untyped → object is dyn → no warning; ReplicaSet has no schema → skipped.
        assert!(s.expression_warnings.is_empty());
        assert_eq!(s.checked_kinds, [deploy()]);
        assert_eq!(s.conditions[0].reason, "SomeKindsSkipped");
        assert!(
            s.conditions[0]
                .message
                .contains("apps/v1, Kind=ReplicaSet (no schema)"),
            "{}",
            s.conditions[0].message
        );

        w.schemas = FakeSchemas::default()
            .failing(deploy(), "connection refused")
            .failing(rs(), "connection refused");
        let s = w.run(&p, Mode::Strict);
        assert_eq!(
            (
                s.conditions[0].status.as_str(),
                s.conditions[0].reason.as_str()
            ),
            ("False", "SchemaUnavailable")
        );
        assert_eq!(s.conditions[1].status, "Unknown");
    }

    #[test]
    fn params_absent_dyn_or_typed() {
        let w = World::new();
        let base = policy(
            vec![rule(&["apps"], &["v1"], &["deployments"])],
            vec![validation("params.limit == 1", None)],
        );
        let s = w.run(&base, Mode::Strict);
        assert!(
            s.expression_warnings[0]
                .warning
                .contains("undeclared reference to 'params'")
        );

        let with_kind = |api_version: &str, kind: &str| {
            let mut p = base.clone();
            p.spec.as_mut().unwrap().param_kind = Some(ParamKind {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            });
            p
        };
        // unresolved param schema → dyn → no warning
        assert!(
            w.run(&with_kind("example.com/v1", "Cfg"), Mode::Strict)
                .expression_warnings
                .is_empty()
        );
        // unparseable apiVersion → params not declared
        assert!(
            !w.run(&with_kind("a/b/c", "Cfg"), Mode::Strict)
                .expression_warnings
                .is_empty()
        );
        // typed params
        let mut w2 = World::new();
        w2.schemas = schemas().typed(
            Gvk::new("example.com", "v1", "Cfg"),
            FakeSchema::with(&[("other", OutputType::Int)]),
        );
        let s = w2.run(&with_kind("example.com/v1", "Cfg"), Mode::Strict);
        assert!(
            s.expression_warnings[0]
                .warning
                .contains("undefined field 'limit'")
        );
    }

    #[test]
    fn extended_keeps_upstream_text_as_prefix() {
        let w = World::new();
        let p = policy(
            vec![
                rule(&["apps"], &["v1"], &["deployments", "deployments/status"]),
                rule(&["*"], &["v1"], &["replicasets"]),
            ],
            vec![validation("object.replicas", None), validation("1", None)],
        );
        let strict = w.run(&p, Mode::Strict);
        let ext = w.run(&p, Mode::Extended);
        assert_eq!(strict.checked_kinds, [deploy()]);
        assert_eq!(ext.checked_kinds, [deploy(), rs()]);
        let s0 = &strict.expression_warnings[0].warning;
        let e0 = &ext.expression_warnings[0].warning;
        assert!(e0.starts_with(s0.as_str()), "{e0}");
        assert_eq!(
            e0,
            &format!(
                "{s0}\napps/v1, Kind=ReplicaSet: ERROR: <input>:1:1: undefined field 'replicas'\n"
            )
        );
        // `1` is fine for strict, a result-type warning per kind in extended
        assert_eq!(strict.expression_warnings.len(), 1);
        assert_eq!(
            ext.expression_warnings[1].field_ref,
            "spec.validations[1].expression"
        );
        assert_eq!(
            ext.expression_warnings[1].warning,
            "apps/v1, Kind=Deployment: must evaluate to bool but got int\n\n\
             apps/v1, Kind=ReplicaSet: must evaluate to bool but got int\n"
        );
        assert_eq!(strict.conditions[0].reason, "SomeKindsSkipped");
    }

    #[test]
    fn nothing_is_parsed_without_kinds() {
        let w = World::new();
        let p = policy(
            vec![rule(&["*"], &["v1"], &["pods"])],
            vec![validation("object.@", None)],
        );
        let s = w.run(&p, Mode::Strict);
        assert!(s.expression_warnings.is_empty());
        assert_eq!(w.checker.parses.load(Ordering::SeqCst), 0);
        assert_eq!(
            s.conditions[0].message,
            "checked no kinds. Not checked: resourceRules[0] (wildcard)"
        );
    }

    #[test]
    fn schema_lookups_happen_once_per_kind() {
        let w = World::new();
        let p = policy(
            vec![apps_rule()],
            vec![validation("true", None), validation("false", None)],
        );
        w.run(&p, Mode::Strict);
        assert_eq!(w.schemas.lookups.load(Ordering::SeqCst), 2);
    }
}
