//! The `BindingsEffective` condition the controller writes on a ValidatingAdmissionPolicy: what
//! its bindings will do, one sentence per binding (pure; the controller supplies the reports of
//! [`super::analyse`] over the bindings and params it watches).

use crate::policy::status::{PolicyCondition, bounded_message};
use crate::policy::{Gvk, PolicyStatus};

use super::{BindingReport, Verdict};

/// Condition type: whether every binding of the policy evaluates its expressions.
pub const BINDINGS_EFFECTIVE: &str = "BindingsEffective";
/// `BindingsEffective=False`: no binding binds the policy, so it evaluates no request.
pub const REASON_NO_BINDINGS: &str = "NoBindings";
/// `BindingsEffective=False`: a binding denies every request it matches (a configuration error
/// with `failurePolicy: Fail`).
pub const REASON_DENIES_ALL: &str = "DeniesAllMatchingRequests";
/// `BindingsEffective=False`: a binding never evaluates anything.
pub const REASON_INACTIVE: &str = "Inactive";
/// `BindingsEffective=True`: every binding evaluates the policy's expressions.
pub const REASON_EVALUATES: &str = "Evaluates";
/// `BindingsEffective=Unknown`: vapcheck could not read the objects of the policy's param kind.
pub const REASON_PARAMS_UNAVAILABLE: &str = "ParamsUnavailable";
/// `BindingsEffective=Unknown`: the bindings could not be read (not listed yet, or no access).
pub const REASON_NOT_EVALUATED: &str = "NotEvaluated";

/// The condition for a policy of `generation` from the reports of the bindings that name it
/// (in any order; the message lists them by binding name). `params_unavailable` says why the
/// param objects could not be read (then the verdicts that depend on them are not known).
pub fn bindings_condition(
    generation: Option<i64>,
    reports: &[BindingReport],
    params_unavailable: Option<&str>,
) -> PolicyCondition {
    let mk = |status: &str, reason: &str, message: String| PolicyCondition {
        type_: BINDINGS_EFFECTIVE.into(),
        status: status.into(),
        observed_generation: generation,
        reason: reason.into(),
        message,
    };
    if let Some(why) = params_unavailable {
        return mk(
            "Unknown",
            REASON_PARAMS_UNAVAILABLE,
            bounded_message(why, &[]),
        );
    }
    if reports.is_empty() {
        return mk(
            "False",
            REASON_NO_BINDINGS,
            "no ValidatingAdmissionPolicyBinding names this policy, so it evaluates no request"
                .into(),
        );
    }
    let mut sorted: Vec<&BindingReport> = reports.iter().collect();
    sorted.sort_by(|a, b| a.binding.cmp(&b.binding));
    // Bindings that need attention first, then the others, each with the analysis' sentence.
    let rank = |r: &&BindingReport| match r.verdict {
        Verdict::DeniesAllMatching => 0,
        Verdict::Inactive => 1,
        Verdict::EvaluatesWithWarnings(_) => 2,
        Verdict::Evaluates => 3,
    };
    sorted.sort_by_key(rank);
    let items: Vec<String> = sorted.iter().map(|r| r.reason.clone()).collect();
    let count = |v: fn(&Verdict) -> bool| sorted.iter().filter(|r| v(&r.verdict)).count();
    let denies = count(|v| matches!(v, Verdict::DeniesAllMatching));
    let inactive = count(|v| matches!(v, Verdict::Inactive));
    let n = sorted.len();
    let (status, reason, prefix) = if denies > 0 {
        (
            "False",
            REASON_DENIES_ALL,
            format!("{denies} of {n} binding(s) deny every request they match: "),
        )
    } else if inactive > 0 {
        (
            "False",
            REASON_INACTIVE,
            format!("{inactive} of {n} binding(s) do nothing: "),
        )
    } else {
        (
            "True",
            REASON_EVALUATES,
            format!("{n} binding(s) evaluate the policy: "),
        )
    };
    mk(status, reason, bounded_message(&prefix, &items))
}

/// `BindingsEffective=Unknown` when the bindings or params could not be read: `why`.
pub fn not_evaluated(generation: Option<i64>, why: &str) -> PolicyCondition {
    PolicyCondition {
        type_: BINDINGS_EFFECTIVE.into(),
        status: "Unknown".into(),
        observed_generation: generation,
        reason: REASON_NOT_EVALUATED.into(),
        message: bounded_message(why, &[]),
    }
}

/// An Event to publish on a binding when its verdict changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingEvent {
    /// `Warning` (true) for a binding that denies everything or does nothing, else `Normal`.
    pub warning: bool,
    /// The verdict's reason (as in the condition).
    pub reason: &'static str,
    /// The analysis' sentence, at most [`crate::policy::status::MAX_CONDITION_MESSAGE`] bytes.
    pub note: String,
}

/// The Event for `report`'s verdict.
pub fn binding_event(report: &BindingReport) -> BindingEvent {
    let (warning, reason) = match report.verdict {
        Verdict::DeniesAllMatching => (true, REASON_DENIES_ALL),
        Verdict::Inactive => (true, REASON_INACTIVE),
        Verdict::Evaluates | Verdict::EvaluatesWithWarnings(_) => (false, REASON_EVALUATES),
    };
    BindingEvent {
        warning,
        reason,
        note: bounded_message(&report.reason, &[]),
    }
}

/// The checked kinds on which type checking found warnings (the analysis'
/// [`super::PolicyInput::warning_kinds`]): each warning line starts with `<kind>: `.
pub fn warning_kinds(status: &PolicyStatus) -> Vec<Gvk> {
    status
        .checked_kinds
        .iter()
        .filter(|g| {
            let prefix = format!("{g}: ");
            status
                .expression_warnings
                .iter()
                .any(|w| w.warning.lines().any(|l| l.starts_with(&prefix)))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(binding: &str, verdict: Verdict) -> BindingReport {
        BindingReport {
            binding: binding.into(),
            policy: "p".into(),
            policy_exists: true,
            failure_policy: "Fail".into(),
            validation_actions: vec!["Deny".into()],
            params: vec![],
            overlap: None,
            reason: format!("binding {binding:?} of policy \"p\": {verdict}"),
            verdict,
            denial_message: None,
            notes: vec![],
        }
    }

    #[test]
    fn no_bindings() {
        let c = bindings_condition(Some(3), &[], None);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_NO_BINDINGS)
        );
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(c.type_, BINDINGS_EFFECTIVE);
    }

    #[test]
    fn a_denying_binding_wins_and_comes_first() {
        let c = bindings_condition(
            None,
            &[
                report("a", Verdict::Evaluates),
                report("z", Verdict::DeniesAllMatching),
                report("m", Verdict::Inactive),
            ],
            None,
        );
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_DENIES_ALL)
        );
        assert_eq!(
            c.message,
            "1 of 3 binding(s) deny every request they match: binding \"z\" of policy \"p\": denies all matching requests; binding \"m\" of policy \"p\": inactive; binding \"a\" of policy \"p\": evaluates"
        );
    }

    #[test]
    fn inactive_without_denial() {
        let c = bindings_condition(
            None,
            &[
                report("b", Verdict::Inactive),
                report("a", Verdict::Evaluates),
            ],
            None,
        );
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", REASON_INACTIVE)
        );
        assert!(
            c.message
                .starts_with("1 of 2 binding(s) do nothing: binding \"b\"")
        );
    }

    #[test]
    fn all_evaluate() {
        let c = bindings_condition(
            None,
            &[
                report("b", Verdict::EvaluatesWithWarnings(vec![])),
                report("a", Verdict::Evaluates),
            ],
            None,
        );
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", REASON_EVALUATES)
        );
        assert!(
            c.message
                .starts_with("2 binding(s) evaluate the policy: binding \"b\"")
        );
    }

    #[test]
    fn params_unavailable_is_unknown() {
        let c = bindings_condition(
            None,
            &[report("a", Verdict::DeniesAllMatching)],
            Some("cannot list configmaps: forbidden"),
        );
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "Unknown",
                REASON_PARAMS_UNAVAILABLE,
                "cannot list configmaps: forbidden"
            )
        );
    }

    #[test]
    fn events_per_verdict() {
        let e = binding_event(&report("a", Verdict::DeniesAllMatching));
        assert_eq!((e.warning, e.reason), (true, REASON_DENIES_ALL));
        assert_eq!(
            e.note,
            "binding \"a\" of policy \"p\": denies all matching requests"
        );
        let e = binding_event(&report("a", Verdict::Inactive));
        assert_eq!((e.warning, e.reason), (true, REASON_INACTIVE));
        let e = binding_event(&report("a", Verdict::EvaluatesWithWarnings(vec![])));
        assert_eq!((e.warning, e.reason), (false, REASON_EVALUATES));
        let c = not_evaluated(Some(1), "the bindings have not been listed yet");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", REASON_NOT_EVALUATED)
        );
    }

    #[test]
    fn long_messages_are_bounded() {
        let reports: Vec<_> = (0..200)
            .map(|i| report(&format!("binding-{i:03}"), Verdict::Evaluates))
            .collect();
        let c = bindings_condition(None, &reports, None);
        assert!(c.message.len() <= crate::policy::status::MAX_CONDITION_MESSAGE);
        assert!(c.message.ends_with("more"), "{}", c.message);
    }
}
