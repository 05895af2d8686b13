//! The `vapcheck.io/ignore` annotation in the controller ([`crate::suppress`], the matcher
//! `vapcheck check` uses too). A suppressed finding makes no Warning Event, does not make
//! `ExpressionsValid` `False` and is not counted in the per-policy finding gauges;
//! `status.typeChecking` (upstream's text, in strict mode byte-identical to
//! kube-controller-manager's) is never changed. The policy report keeps it, as a `skip`
//! marked suppressed ([`crate::reports::policy_entries`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::events::{Event, EventType};

use crate::config;
use crate::metrics::PolicyState;
use crate::policy::{Mode, PolicyStatus};
use crate::suppress::{self, ANNOTATION, Applied, Directive, REASON_ANNOTATION};

/// The reason of the Warning Event for an annotation that does not parse.
pub const REASON_INVALID: &str = "InvalidSuppression";

/// The object's suppression, parsed (`Err` names the annotation and the bad entry).
pub(super) fn directive(meta: &ObjectMeta) -> Result<Option<Directive>, String> {
    let annotations = meta.annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    suppress::from_annotations(get(ANNOTATION), get(REASON_ANNOTATION))
}

/// Applies a ValidatingAdmissionPolicy's annotation to its computed status
/// ([`suppress::apply_to_status`]): what is left to count, and the error of an annotation that
/// does not parse (then nothing is suppressed).
pub(super) fn apply_validating(
    meta: &ObjectMeta,
    computed: &mut PolicyStatus,
    mode: config::Mode,
) -> (Applied, Option<String>) {
    let unsuppressed = Applied {
        suppressed: Vec::new(),
        warnings: computed.expression_warnings.len(),
        runtime: computed.runtime.len(),
    };
    match directive(meta) {
        Ok(None) => (unsuppressed, None),
        Ok(Some(d)) => {
            let mode = match mode {
                config::Mode::Strict => Mode::Strict,
                config::Mode::Extended => Mode::Extended,
            };
            (suppress::apply_to_status(computed, &d, mode), None)
        }
        Err(e) => (unsuppressed, Some(e)),
    }
}

/// Applies a MutatingAdmissionPolicy's annotation: what its Events and metrics count (a MAP
/// has no status), that is `computed` without the suppressed type-checking warnings (VAP100)
/// and runtime findings (VAP110; the MAP check finds none today), and the error of an
/// annotation that does not parse (then nothing is suppressed). `computed` itself is left
/// whole for the report, which shows the suppressed findings as such.
pub(super) fn apply_mutating(
    meta: &ObjectMeta,
    computed: &PolicyStatus,
) -> (PolicyStatus, Option<String>) {
    match directive(meta) {
        Ok(None) => (computed.clone(), None),
        Ok(Some(d)) => (without_suppressed(computed, &d), None),
        Err(e) => (computed.clone(), Some(e)),
    }
}

/// `computed` without the findings `d` suppresses.
fn without_suppressed(computed: &PolicyStatus, d: &Directive) -> PolicyStatus {
    let covered = |rule: &str, field_ref: &str| d.find(rule, field_ref).is_some();
    let mut counted = computed.clone();
    counted
        .expression_warnings
        .retain(|w| !covered(suppress::RULE_TYPE_WARNING, &w.field_ref));
    counted
        .expression_results
        .retain(|r| !covered(suppress::RULE_TYPE_WARNING, &r.field_ref));
    counted
        .runtime
        .retain(|f| !covered(suppress::RULE_RUNTIME_ERROR, &f.field_ref));
    counted
}

/// The Warning Event for an annotation that does not parse.
pub(super) fn invalid_event(error: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: REASON_INVALID.to_owned(),
        note: Some(super::events::bounded_note(&format!(
            "{error}; nothing is suppressed"
        ))),
        action: "TypeCheck".to_owned(),
        secondary: None,
    }
}

/// The `vapcheck_policies` state of a checked policy once its suppressed findings are left
/// out: a policy whose findings are all suppressed is `clean` (`partial` with kinds skipped).
pub(super) fn state(state: PolicyState, computed: &PolicyStatus, applied: &Applied) -> PolicyState {
    if state != PolicyState::Warnings || applied.warnings > 0 || applied.runtime > 0 {
        return state;
    }
    if computed.skipped.is_empty() {
        PolicyState::Clean
    } else {
        PolicyState::Partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{SkipReason, SkipSubject, Skipped};

    #[test]
    fn a_map_counts_what_is_not_suppressed_and_keeps_the_rest_for_its_report() {
        use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
        let computed = PolicyStatus {
            expression_warnings: (0..2)
                .map(|i| ExpressionWarning {
                    field_ref: format!("spec.mutations[{i}].applyConfiguration.expression"),
                    warning: format!("w{i}"),
                })
                .collect(),
            ..PolicyStatus::default()
        };
        let meta = |ignore: Option<&str>| ObjectMeta {
            annotations: ignore.map(|v| [(ANNOTATION.to_owned(), v.to_owned())].into()),
            ..ObjectMeta::default()
        };
        let (counted, invalid) = apply_mutating(&meta(Some("VAP100@spec.mutations[1]")), &computed);
        assert_eq!(invalid, None);
        let left: Vec<&str> = counted
            .expression_warnings
            .iter()
            .map(|w| w.warning.as_str())
            .collect();
        assert_eq!(left, ["w0"]);
        let (counted, invalid) = apply_mutating(&meta(Some("VAP100,")), &computed);
        assert_eq!(counted.expression_warnings.len(), 2);
        assert!(invalid.is_some_and(|e| e.contains("entry \"\"")));
        let (counted, invalid) = apply_mutating(&meta(None), &computed);
        assert_eq!((counted.expression_warnings.len(), invalid), (2, None));
    }

    #[test]
    fn all_suppressed_is_clean_or_partial() {
        let none_left = Applied {
            suppressed: vec!["VAP100 spec.validations[0].expression".to_owned()],
            warnings: 0,
            runtime: 0,
        };
        let one_left = Applied {
            warnings: 1,
            ..none_left.clone()
        };
        let clean = PolicyStatus::default();
        let skipped = PolicyStatus {
            skipped: vec![Skipped {
                subject: SkipSubject::Rule(0),
                reason: SkipReason::Wildcard,
            }],
            ..PolicyStatus::default()
        };
        assert_eq!(
            state(PolicyState::Warnings, &clean, &none_left),
            PolicyState::Clean
        );
        assert_eq!(
            state(PolicyState::Warnings, &skipped, &none_left),
            PolicyState::Partial
        );
        assert_eq!(
            state(PolicyState::Warnings, &clean, &one_left),
            PolicyState::Warnings
        );
        assert_eq!(
            state(PolicyState::Failed, &clean, &none_left),
            PolicyState::Failed
        );
    }
}
