//! The status vapcheck computes for a policy: upstream's `typeChecking` warnings plus the
//! `TypeChecked` and `ExpressionsValid` conditions.

use k8s_openapi::api::admissionregistration::v1::{
    ExpressionWarning, TypeChecking, ValidatingAdmissionPolicyStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;

use super::gvk::Gvk;
use super::kinds::Skipped;
use super::narrowing::{Classified, FindingClass};
use super::runtime::RuntimeFinding;

/// Condition type: whether checking of this generation ran.
pub const TYPE_CHECKED: &str = "TypeChecked";
/// Condition type: whether the expressions are free of warnings.
pub const EXPRESSIONS_VALID: &str = "ExpressionsValid";

/// `TypeChecked=True`: every matched kind was checked.
pub const REASON_ALL_KINDS_CHECKED: &str = "AllKindsChecked";
/// `TypeChecked=True`: some matched kinds or rules were not checked (the message says which).
pub const REASON_SOME_KINDS_SKIPPED: &str = "SomeKindsSkipped";
/// `TypeChecked=False`: kinds were selected but no schema could be fetched for any of them.
pub const REASON_SCHEMA_UNAVAILABLE: &str = "SchemaUnavailable";
/// `ExpressionsValid=True`.
pub const REASON_NO_WARNINGS: &str = "NoWarnings";
/// `ExpressionsValid=False`.
pub const REASON_EXPRESSION_WARNINGS: &str = "ExpressionWarnings";
/// `ExpressionsValid=True` in extended mode: every warning is static typing only (the
/// expressions work at admission time).
pub const REASON_STATIC_TYPING_ONLY: &str = "StaticTypingOnly";
/// `ExpressionsValid` reason (extended mode): no warning fails at admission, but an
/// expression errors on valid objects ([`super::runtime`]).
pub const REASON_ERRORS_ON_VALID_OBJECTS: &str = "ErrorsOnValidObjects";
/// `ExpressionsValid=Unknown`: checking could not run.
pub const REASON_NOT_CHECKED: &str = "NotChecked";

/// Longest condition message vapcheck writes, in bytes (the API allows 32768; a readable
/// message is far shorter).
pub const MAX_CONDITION_MESSAGE: usize = 1024;

/// A condition without `lastTransitionTime` (which needs a clock; see
/// [`PolicyStatus::to_k8s_status`]). Serialises like `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCondition {
    /// `TypeChecked` or `ExpressionsValid`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The policy generation this condition was computed for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable, at most [`MAX_CONDITION_MESSAGE`] bytes.
    pub message: String,
}

/// The results of one expression, per kind: what one `expressionWarnings` entry says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionResults {
    /// The entry's `fieldRef`.
    pub field_ref: String,
    /// Each kind's result, in the entry's order.
    pub kinds: Vec<super::render::KindResult>,
}

/// Everything vapcheck computed for one policy.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyStatus {
    /// `metadata.generation` of the checked policy.
    pub observed_generation: Option<i64>,
    /// `status.typeChecking.expressionWarnings`, in upstream order (empty: `typeChecking: {}`).
    pub expression_warnings: Vec<ExpressionWarning>,
    /// The same warnings as data: for each entry of `expression_warnings`, in the same order,
    /// the results per kind its text is rendered from ([`super::render_warning`]).
    pub expression_results: Vec<ExpressionResults>,
    /// `TypeChecked` then `ExpressionsValid`.
    pub conditions: Vec<PolicyCondition>,
    /// How many expressions were checked (`ExpressionsValid`'s count; the condition is
    /// computed again from it when findings are suppressed, [`crate::suppress`]).
    pub expressions_checked: usize,
    /// Kinds the expressions were checked against, in checking order.
    pub checked_kinds: Vec<Gvk>,
    /// Everything matched but not checked, with reasons.
    pub skipped: Vec<Skipped>,
    /// Extended mode: every finding with its runtime class (empty in strict mode).
    pub findings: Vec<Classified>,
    /// Extended mode: expressions that error at admission on valid objects
    /// ([`super::runtime`]; empty in strict mode).
    pub runtime: Vec<super::runtime::RuntimeFinding>,
    /// Extended mode: the worst-case cost estimates and the limits they can exceed (empty in
    /// strict mode).
    pub cost: super::cost::PolicyCost,
}

impl PolicyStatus {
    /// Moves into `self` the type-checking warnings (with their per-kind results), the
    /// classified findings and the cost estimates of `from` whose field `remap` maps, at the
    /// mapped field: for an admission object checked as the policy it stands for (a webhook's
    /// match conditions, a Gatekeeper template's code). What `remap` does not map is dropped;
    /// the runtime findings and the cost findings, which each caller words for its own object,
    /// stay in `from`.
    pub fn take_remapped(
        &mut self,
        from: &mut PolicyStatus,
        remap: &dyn Fn(&str) -> Option<String>,
    ) {
        let warnings = std::mem::take(&mut from.expression_warnings);
        let results = std::mem::take(&mut from.expression_results);
        for (mut w, mut r) in warnings.into_iter().zip(results) {
            if let Some(f) = remap(&w.field_ref) {
                w.field_ref = f.clone();
                r.field_ref = f;
                self.expression_warnings.push(w);
                self.expression_results.push(r);
            }
        }
        for mut f in std::mem::take(&mut from.findings) {
            if let Some(n) = remap(&f.field_ref) {
                f.field_ref = n;
                self.findings.push(f);
            }
        }
        for mut e in std::mem::take(&mut from.cost.expressions) {
            if let Some(n) = remap(&e.field_ref) {
                e.field_ref = n;
                self.cost.expressions.push(e);
            }
        }
    }

    /// `status.typeChecking` as upstream writes it: `expressionWarnings` omitted (`{}`) when
    /// there are none.
    pub fn type_checking(&self) -> TypeChecking {
        TypeChecking {
            expression_warnings: (!self.expression_warnings.is_empty())
                .then(|| self.expression_warnings.clone()),
        }
    }

    /// The full API status, with `now` as every condition's `lastTransitionTime` (the
    /// controller keeps the previous time when a condition's status did not change).
    pub fn to_k8s_status(&self, now: &Time) -> ValidatingAdmissionPolicyStatus {
        ValidatingAdmissionPolicyStatus {
            observed_generation: self.observed_generation,
            type_checking: Some(self.type_checking()),
            conditions: Some(
                self.conditions
                    .iter()
                    .map(|c| Condition {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        observed_generation: c.observed_generation,
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: now.clone(),
                    })
                    .collect(),
            ),
        }
    }

    /// Whether there is at least one warning.
    pub fn has_warnings(&self) -> bool {
        !self.expression_warnings.is_empty()
    }
}

/// The condition type telling whether kube-apiserver would accept the stored policy if it
/// were created now (the controller only; `vapcheck check` prints `apiServer` instead).
pub const ACCEPTED_ON_CREATE: &str = "AcceptedOnCreate";
/// Reason of `AcceptedOnCreate=True`.
pub const REASON_ACCEPTED: &str = "Accepted";
/// Reason of `AcceptedOnCreate=False`.
pub const REASON_REJECTED_ON_CREATE: &str = "RejectedOnCreate";

/// The `AcceptedOnCreate` condition: `causes` are the API server's field errors for a create
/// of the stored policy (`crate::apiserver::validate_policy_create`); the message lists the
/// first line of each.
pub fn accepted_on_create_condition(
    generation: Option<i64>,
    server_minor: u32,
    causes: &[String],
) -> PolicyCondition {
    let mk = |status: &str, reason: &str, message: String| PolicyCondition {
        type_: ACCEPTED_ON_CREATE.into(),
        status: status.into(),
        observed_generation: generation,
        reason: reason.into(),
        message,
    };
    if causes.is_empty() {
        return mk(
            "True",
            REASON_ACCEPTED,
            format!("kube-apiserver 1.{server_minor} accepts this policy on create"),
        );
    }
    let firsts: Vec<String> = causes
        .iter()
        .map(|c| c.lines().next().unwrap_or_default().to_owned())
        .collect();
    mk(
        "False",
        REASON_REJECTED_ON_CREATE,
        bounded_message(
            &format!(
                "kube-apiserver 1.{server_minor} rejects this policy on create, and any update that changes these expressions: "
            ),
            &firsts,
        ),
    )
}

/// `prefix` followed by `items` joined with `, `, cut to [`MAX_CONDITION_MESSAGE`] bytes with
/// a count of what was left out.
pub fn bounded_message(prefix: &str, items: &[String]) -> String {
    let mut msg = prefix.to_owned();
    for (i, item) in items.iter().enumerate() {
        // Items (e.g. `apps/v1, Kind=Deployment`) contain commas: separate them with `; `.
        let sep = if i == 0 { "" } else { "; " };
        let rest = items.len() - i;
        // Room for the separator, the item, and a possible "and N more" tail.
        let tail = format!("; and {} more", rest);
        if msg.len() + sep.len() + item.len() + tail.len() > MAX_CONDITION_MESSAGE {
            if i == 0 {
                msg.push_str(&format!("{} not listed", plural(items.len(), "item")));
            } else {
                msg.push_str(&format!("; and {rest} more"));
            }
            return truncate(msg);
        }
        msg.push_str(sep);
        msg.push_str(item);
    }
    truncate(msg)
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_CONDITION_MESSAGE {
        let mut end = MAX_CONDITION_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The `TypeChecked` condition.
///
/// `schema_unavailable` holds the kinds whose schema lookup failed (not "not found"); when
/// kinds were selected and all failed that way, the condition is `False/SchemaUnavailable`.
pub fn type_checked_condition(
    generation: Option<i64>,
    checked: &[Gvk],
    skipped: &[Skipped],
    all_schemas_failed: bool,
) -> PolicyCondition {
    let mk = |status: &str, reason: &str, message: String| PolicyCondition {
        type_: TYPE_CHECKED.into(),
        status: status.into(),
        observed_generation: generation,
        reason: reason.into(),
        message,
    };
    let skipped_items: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    if all_schemas_failed {
        return mk(
            "False",
            REASON_SCHEMA_UNAVAILABLE,
            bounded_message("no schema could be fetched: ", &skipped_items),
        );
    }
    let checked_items: Vec<String> = checked.iter().map(ToString::to_string).collect();
    let checked_text = if checked.is_empty() {
        "checked no kinds".to_owned()
    } else {
        format!("checked {}", plural(checked.len(), "kind"))
    };
    if skipped.is_empty() {
        let msg = if checked.is_empty() {
            "the policy matches no kinds to check".to_owned()
        } else {
            bounded_message(&format!("{checked_text}: "), &checked_items)
        };
        return mk("True", REASON_ALL_KINDS_CHECKED, msg);
    }
    mk(
        "True",
        REASON_SOME_KINDS_SKIPPED,
        bounded_message(&format!("{checked_text}. Not checked: "), &skipped_items),
    )
}

/// The `ExpressionsValid` condition. `ran` is false when checking could not run
/// (`TypeChecked=False`), which makes this condition `Unknown`.
pub fn expressions_valid_condition(
    generation: Option<i64>,
    warnings: &[ExpressionWarning],
    expressions_checked: usize,
    ran: bool,
) -> PolicyCondition {
    let mk = |status: &str, reason: &str, message: String| PolicyCondition {
        type_: EXPRESSIONS_VALID.into(),
        status: status.into(),
        observed_generation: generation,
        reason: reason.into(),
        message,
    };
    if !ran {
        return mk(
            "Unknown",
            REASON_NOT_CHECKED,
            "expressions were not checked, see the TypeChecked condition".into(),
        );
    }
    if warnings.is_empty() {
        return mk(
            "True",
            REASON_NO_WARNINGS,
            format!(
                "{} checked, no warnings",
                plural(expressions_checked, "expression")
            ),
        );
    }
    let refs: Vec<String> = warnings.iter().map(|w| w.field_ref.clone()).collect();
    mk(
        "False",
        REASON_EXPRESSION_WARNINGS,
        bounded_message(
            &format!("{} with warnings: ", plural(warnings.len(), "expression")),
            &refs,
        ),
    )
}

/// The extended mode's `ExpressionsValid`: `False` only when some finding fails at
/// admission. With every warning failing the message is the strict one; otherwise each
/// fieldRef is followed by its class (`fails at admission` or `static typing only`, the
/// latter also for upstream findings in branches not evaluated for their kind).
///
/// Runtime-safety findings (`runtime`) make it `False` too: with reason `ExpressionWarnings`
/// when some warning fails at admission, otherwise `ErrorsOnValidObjects`; the message then
/// goes on with `<n> failing on valid objects: <fieldRef> (<error>): <consequence>` (the
/// consequence by failure policy, as in `-o json`'s `consequence`).
pub fn expressions_valid_condition_classified(
    generation: Option<i64>,
    warnings: &[ExpressionWarning],
    findings: &[Classified],
    runtime: &[RuntimeFinding],
    expressions_checked: usize,
    ran: bool,
) -> PolicyCondition {
    let base = expressions_valid_typing(generation, warnings, findings, expressions_checked, ran);
    if !ran || runtime.is_empty() {
        return base;
    }
    // One item per expression: `<fieldRef> (<error>, <error>): <consequence>` (what
    // kube-apiserver does with such requests, by the failure policy; a variable used by sites
    // of different kinds may have several, joined with ` / `).
    let mut grouped: Vec<(&str, Vec<&str>, Vec<&str>)> = Vec::new();
    for f in runtime {
        match grouped.iter_mut().find(|(r, _, _)| *r == f.field_ref) {
            Some((_, errors, consequences)) => {
                if !errors.contains(&f.error.as_str()) {
                    errors.push(&f.error);
                }
                if !consequences.contains(&f.consequence.as_str()) {
                    consequences.push(&f.consequence);
                }
            }
            None => grouped.push((&f.field_ref, vec![&f.error], vec![&f.consequence])),
        }
    }
    let items: Vec<String> = grouped
        .iter()
        .map(|(r, errors, consequences)| {
            format!("{r} ({}): {}", errors.join(", "), consequences.join(" / "))
        })
        .collect();
    let reason = if base.reason == REASON_EXPRESSION_WARNINGS {
        REASON_EXPRESSION_WARNINGS
    } else {
        REASON_ERRORS_ON_VALID_OBJECTS
    };
    let failing = format!(
        "{} failing on valid objects: ",
        plural(items.len(), "expression")
    );
    let prefix = if warnings.is_empty() {
        failing
    } else {
        // The typing part is bounded on its own; the runtime part follows it.
        format!("{}. {failing}", base.message)
    };
    PolicyCondition {
        type_: EXPRESSIONS_VALID.into(),
        status: "False".into(),
        observed_generation: generation,
        reason: reason.into(),
        message: bounded_message(&prefix, &items),
    }
}

/// The typing part of [`expressions_valid_condition_classified`].
fn expressions_valid_typing(
    generation: Option<i64>,
    warnings: &[ExpressionWarning],
    findings: &[Classified],
    expressions_checked: usize,
    ran: bool,
) -> PolicyCondition {
    let fails = |field_ref: &str| {
        findings
            .iter()
            .any(|f| f.field_ref == field_ref && f.class == FindingClass::FailsAtAdmission)
    };
    if !ran || warnings.iter().all(|w| fails(&w.field_ref)) {
        return expressions_valid_condition(generation, warnings, expressions_checked, ran);
    }
    let items: Vec<String> = warnings
        .iter()
        .map(|w| {
            let class = if fails(&w.field_ref) {
                FindingClass::FailsAtAdmission
            } else {
                FindingClass::StaticTypingOnly
            };
            format!("{} ({class})", w.field_ref)
        })
        .collect();
    let failing = warnings.iter().filter(|w| fails(&w.field_ref)).count();
    let with = plural(warnings.len(), "expression");
    let (status, reason, prefix) = if failing > 0 {
        (
            "False",
            REASON_EXPRESSION_WARNINGS,
            format!("{with} with warnings, {failing} failing at admission: "),
        )
    } else {
        (
            "True",
            REASON_STATIC_TYPING_ONLY,
            format!("{with} with warnings, none failing at admission: "),
        )
    };
    PolicyCondition {
        type_: EXPRESSIONS_VALID.into(),
        status: status.into(),
        observed_generation: generation,
        reason: reason.into(),
        message: bounded_message(&prefix, &items),
    }
}

/// Checks the promise of extended mode ([`super::check_policy`]): every upstream (strict) entry
/// is kept, with upstream's text as the prefix of the extended entry of the same `fieldRef`.
/// `Err` names the first entry that is lost or changed. Used by the fuzz targets
/// (`fuzz/fuzz_targets/policy.rs`, `k8s_expr.rs`) on arbitrary input.
pub fn extended_keeps_strict(
    strict: &[ExpressionWarning],
    extended: &[ExpressionWarning],
) -> Result<(), String> {
    for s in strict {
        match extended.iter().find(|e| e.field_ref == s.field_ref) {
            None => return Err(format!("extended mode lost the entry of {}", s.field_ref)),
            Some(e) if !e.warning.starts_with(&s.warning) => {
                return Err(format!(
                    "extended mode changed upstream's text of {}: {:?} is not a prefix of {:?}",
                    s.field_ref, s.warning, e.warning
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::kinds::{SkipReason, SkipSubject};

    #[test]
    fn type_checked_variants() {
        let k = [Gvk::new("apps", "v1", "Deployment")];
        let c = type_checked_condition(Some(3), &k, &[], false);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "AllKindsChecked")
        );
        assert_eq!(c.message, "checked 1 kind: apps/v1, Kind=Deployment");
        assert_eq!(c.observed_generation, Some(3));
        let s = [Skipped {
            subject: SkipSubject::Rule(1),
            reason: SkipReason::Wildcard,
        }];
        let c = type_checked_condition(Some(3), &k, &s, false);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "SomeKindsSkipped")
        );
        assert_eq!(
            c.message,
            "checked 1 kind. Not checked: resourceRules[1] (wildcard)"
        );
        let s = [Skipped {
            subject: SkipSubject::Gvk(Gvk::new("", "v1", "Pod")),
            reason: SkipReason::SchemaError("connection refused".into()),
        }];
        let c = type_checked_condition(None, &[], &s, true);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "SchemaUnavailable")
        );
        assert_eq!(
            c.message,
            "no schema could be fetched: /v1, Kind=Pod (schema error: connection refused)"
        );
        let c = type_checked_condition(None, &[], &[], false);
        assert_eq!(c.message, "the policy matches no kinds to check");
    }

    #[test]
    fn expressions_valid_variants() {
        let c = expressions_valid_condition(Some(1), &[], 2, true);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("True", "NoWarnings", "2 expressions checked, no warnings")
        );
        let w = [ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "x".into(),
        }];
        let c = expressions_valid_condition(Some(1), &w, 2, true);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "False",
                "ExpressionWarnings",
                "1 expression with warnings: spec.validations[0].expression"
            )
        );
        let c = expressions_valid_condition(Some(1), &w, 2, false);
        assert_eq!(c.status, "Unknown");
    }

    #[test]
    fn messages_are_bounded() {
        let items: Vec<String> = (0..500)
            .map(|i| format!("spec.validations[{i}].expression"))
            .collect();
        let m = bounded_message("500 expressions with warnings: ", &items);
        assert!(m.len() <= MAX_CONDITION_MESSAGE, "{}", m.len());
        assert!(m.ends_with(" more"), "{m}");
        let huge = vec!["é".repeat(2000)];
        let m = bounded_message("x: ", &huge);
        assert!(m.len() <= MAX_CONDITION_MESSAGE);
        assert_eq!(m, "x: 1 item not listed");
    }

    #[test]
    fn extended_keeps_strict_entries_as_prefixes() {
        let w = |f: &str, t: &str| ExpressionWarning {
            field_ref: f.into(),
            warning: t.into(),
        };
        let strict = [w("spec.validations[0].expression", "ERROR: a")];
        let longer = [
            w("spec.variables[0].expression", "ERROR: v"),
            w("spec.validations[0].expression", "ERROR: a\nERROR: b"),
        ];
        assert_eq!(extended_keeps_strict(&strict, &longer), Ok(()));
        assert_eq!(extended_keeps_strict(&[], &longer), Ok(()));
        let lost = extended_keeps_strict(&strict, &longer[..1]).unwrap_err();
        assert_eq!(
            lost,
            "extended mode lost the entry of spec.validations[0].expression"
        );
        let changed =
            extended_keeps_strict(&strict, &[w("spec.validations[0].expression", "ERROR: b")])
                .unwrap_err();
        assert!(changed.contains("changed upstream's text"), "{changed}");
    }

    #[test]
    fn empty_type_checking_serialises_as_empty_object() {
        let s = PolicyStatus::default();
        assert_eq!(serde_json::to_string(&s.type_checking()).unwrap(), "{}");
    }
}

#[cfg(test)]
mod k8s_status_tests {
    use super::*;

    #[test]
    fn to_k8s_status_carries_everything() {
        let now: Time = serde_json::from_str("\"2026-11-21T15:00:00Z\"").unwrap();
        let w = vec![ExpressionWarning {
            field_ref: "f".into(),
            warning: "w".into(),
        }];
        let s = PolicyStatus {
            observed_generation: Some(7),
            conditions: vec![expressions_valid_condition(Some(7), &w, 1, true)],
            expression_warnings: w,
            ..PolicyStatus::default()
        };
        let k = serde_json::to_value(s.to_k8s_status(&now)).unwrap();
        assert_eq!(
            k,
            serde_json::json!({
                "observedGeneration": 7,
                "typeChecking": {"expressionWarnings": [{"fieldRef": "f", "warning": "w"}]},
                "conditions": [{
                    "type": "ExpressionsValid", "status": "False", "observedGeneration": 7,
                    "reason": "ExpressionWarnings", "message": "1 expression with warnings: f",
                    "lastTransitionTime": "2026-11-21T15:00:00Z"
                }]
            })
        );
    }
}
