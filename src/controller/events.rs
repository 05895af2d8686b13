//! Which Kubernetes Events (if any) a check result deserves (pure).
//!
//! ValidatingAdmissionPolicies ([`event_for`]): the decision compares the `ExpressionsValid`
//! condition the policy had before the write with the one being written, so an event is
//! emitted only when the warnings appear, change or clear, never once per reconcile, and a
//! restarted controller does not repeat old events.
//!
//! MutatingAdmissionPolicies have no status field ([`finding_events`]): the findings are
//! reported only as Events, one per expression (fieldRef) whose finding is new or changed,
//! compared with an in-memory [`FindingRecord`] of what this process last reported for the
//! policy. Nothing is written to the policy. After a restart (or when another replica takes
//! the lease) the record is empty: each current finding is reported once more, and findings
//! fixed while no replica ran get no `Normal` Event (docs/mutating.md, "In the cluster").
//!
//! Both are emitters over what the check found: a MutatingAdmissionPolicy's (and an engine's
//! policy's) Events over its findings ([`events_of_findings`], [`record_of_findings`]), each
//! note upstream's text of the field as the findings carry it
//! ([`crate::finding::TypeChecking::field_text`], rendered from the per-kind results); a
//! ValidatingAdmissionPolicy's over its `ExpressionsValid` condition (its message, not a
//! finding).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::admissionregistration::v1::{
    ExpressionWarning, ValidatingAdmissionPolicyStatus,
};

use crate::finding::Finding;
use crate::policy::PolicyCondition;
use crate::policy::status::EXPRESSIONS_VALID;

/// The most bytes an Event's note may have: `NoteLengthLimit` of k8s.io/kubernetes
/// `pkg/apis/core/validation/events.go` (v1.37.1), checked as Go's `len` (bytes).
pub const MAX_EVENT_NOTE: usize = 1024;

/// Reason of the Warning Event for a finding on an expression that had none.
pub const REASON_FINDING: &str = "ExpressionWarning";
/// Reason of the Warning Event for an expression whose finding changed.
pub const REASON_FINDING_CHANGED: &str = "ExpressionWarningChanged";
/// Reason of the Normal Event for an expression whose finding went away while others remain.
pub const REASON_FINDING_RESOLVED: &str = "ExpressionWarningResolved";
/// Reason of the Normal Event when the last finding went away.
pub const REASON_FINDINGS_CLEARED: &str = "ExpressionWarningsCleared";

/// What was last reported on one MutatingAdmissionPolicy: fieldRef → hash of the finding's
/// text (the text itself is not kept).
pub type FindingRecord = BTreeMap<String, u64>;

/// One Event for a MutatingAdmissionPolicy's findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindingEvent {
    /// `Warning` (true) or `Normal` (false).
    pub warning: bool,
    /// One of the `REASON_*` constants.
    pub reason: &'static str,
    /// The expression the Event is about (`None` for [`REASON_FINDINGS_CLEARED`]).
    pub field_ref: Option<String>,
    /// `<fieldRef>: <finding>` (the finding names the kind: `group/version, Kind=K: ERROR ...`),
    /// at most [`MAX_EVENT_NOTE`] bytes.
    pub note: String,
}

/// The record of `findings` (`status.typeChecking.expressionWarnings`).
pub fn record_of(findings: &[ExpressionWarning]) -> FindingRecord {
    record_of_texts(&texts_of(findings))
}

/// The record of a policy's findings ([`crate::finding::produce_status`]): its type-checking
/// warnings, one per field with upstream's text of the field.
pub fn record_of_findings(findings: &[Finding]) -> FindingRecord {
    record_of_texts(&crate::finding::expression_warnings(findings))
}

/// `(fieldRef, warning)` of each of `warnings`.
fn texts_of(warnings: &[ExpressionWarning]) -> Vec<(&str, &str)> {
    warnings
        .iter()
        .map(|w| (w.field_ref.as_str(), w.warning.as_str()))
        .collect()
}

fn record_of_texts(texts: &[(&str, &str)]) -> FindingRecord {
    texts
        .iter()
        .map(|(field_ref, text)| ((*field_ref).to_owned(), text_hash(text)))
        .collect()
}

fn text_hash(text: &str) -> u64 {
    // SipHash with fixed keys: stable within a process, which is all the record needs.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The Events for going from `before` (what this process last reported; `None`: nothing
/// yet) to `findings` (`status.typeChecking.expressionWarnings`), in fieldRef order.
pub fn finding_events(
    before: Option<&FindingRecord>,
    findings: &[ExpressionWarning],
) -> Vec<FindingEvent> {
    events_of_texts(before, texts_of(findings))
}

/// The Events for going from `before` to a policy's findings
/// ([`crate::finding::produce_status`]): those of its type-checking warnings, one per field
/// with upstream's text of the field ([`crate::finding::expression_warnings`]), in fieldRef
/// order.
pub fn events_of_findings(
    before: Option<&FindingRecord>,
    findings: &[Finding],
) -> Vec<FindingEvent> {
    events_of_texts(before, crate::finding::expression_warnings(findings))
}

/// The Events for going from `before` to the fields' texts `current` (`(fieldRef, text)`).
fn events_of_texts(
    before: Option<&FindingRecord>,
    mut current: Vec<(&str, &str)>,
) -> Vec<FindingEvent> {
    let empty = FindingRecord::new();
    let old = before.unwrap_or(&empty);
    current.sort_by(|a, b| a.0.cmp(b.0));
    current.dedup_by(|a, b| a.0 == b.0);
    let mut out = Vec::new();
    for (field_ref, text) in &current {
        let reason = match old.get(*field_ref) {
            None => REASON_FINDING,
            Some(h) if *h != text_hash(text) => REASON_FINDING_CHANGED,
            Some(_) => continue,
        };
        out.push(FindingEvent {
            warning: true,
            reason,
            field_ref: Some((*field_ref).to_owned()),
            note: bounded_note(&format!("{field_ref}: {}", text.trim_end())),
        });
    }
    if current.is_empty() {
        if !old.is_empty() {
            out.push(FindingEvent {
                warning: false,
                reason: REASON_FINDINGS_CLEARED,
                field_ref: None,
                note: "no expression warnings".to_owned(),
            });
        }
        return out;
    }
    for field_ref in old.keys() {
        if !current.iter().any(|(f, _)| *f == field_ref.as_str()) {
            out.push(FindingEvent {
                warning: false,
                reason: REASON_FINDING_RESOLVED,
                field_ref: Some(field_ref.clone()),
                note: bounded_note(&format!("{field_ref}: no warnings")),
            });
        }
    }
    out
}

/// `text` cut to [`MAX_EVENT_NOTE`] bytes at a character boundary, ending with ` ...` when
/// cut.
pub fn bounded_note(text: &str) -> String {
    if text.len() <= MAX_EVENT_NOTE {
        return text.to_owned();
    }
    const MORE: &str = " ...";
    let mut end = MAX_EVENT_NOTE - MORE.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MORE}", &text[..end])
}

/// An event to publish on the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEvent {
    /// `Warning` (true) or `Normal` (false).
    pub warning: bool,
    /// `ExpressionWarnings`, `ExpressionWarningsChanged` or `ExpressionWarningsCleared`.
    pub reason: &'static str,
    /// The short summary (the condition message).
    pub note: String,
}

/// The event for going from `before` (the status on the object) to `after` (vapcheck's new
/// `ExpressionsValid` condition), if any.
pub fn event_for(
    before: Option<&ValidatingAdmissionPolicyStatus>,
    after: Option<&PolicyCondition>,
) -> Option<PolicyEvent> {
    let after = after?;
    let before = before
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == EXPRESSIONS_VALID));
    let had = before.is_some_and(|c| c.status == "False");
    let has = after.status == "False";
    match (had, has) {
        (false, true) => Some(PolicyEvent {
            warning: true,
            reason: "ExpressionWarnings",
            note: after.message.clone(),
        }),
        (true, true) if before.is_some_and(|c| c.message != after.message) => Some(PolicyEvent {
            warning: true,
            reason: "ExpressionWarningsChanged",
            note: after.message.clone(),
        }),
        (true, false) if after.status == "True" => Some(PolicyEvent {
            warning: false,
            reason: "ExpressionWarningsCleared",
            note: after.message.clone(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;

    fn cond(status: &str, message: &str) -> PolicyCondition {
        PolicyCondition {
            type_: EXPRESSIONS_VALID.into(),
            status: status.into(),
            observed_generation: Some(1),
            reason: "R".into(),
            message: message.into(),
        }
    }

    fn status(status: &str, message: &str) -> ValidatingAdmissionPolicyStatus {
        ValidatingAdmissionPolicyStatus {
            conditions: Some(vec![Condition {
                type_: EXPRESSIONS_VALID.into(),
                status: status.into(),
                message: message.into(),
                reason: "R".into(),
                observed_generation: Some(1),
                last_transition_time: Time(Timestamp::UNIX_EPOCH),
            }]),
            ..ValidatingAdmissionPolicyStatus::default()
        }
    }

    fn finding(field_ref: &str, warning: &str) -> ExpressionWarning {
        ExpressionWarning {
            field_ref: field_ref.into(),
            warning: warning.into(),
        }
    }

    const APPLY: &str = "spec.mutations[0].applyConfiguration.expression";
    const PATCH: &str = "spec.mutations[1].jsonPatch.expression";

    #[test]
    fn mutating_findings_new_same_changed_resolved_cleared() {
        let a = finding(APPLY, "apps/v1, Kind=Deployment: ERROR: a\n");
        let first = finding_events(None, std::slice::from_ref(&a));
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].reason, REASON_FINDING);
        assert!(first[0].warning);
        assert_eq!(first[0].field_ref.as_deref(), Some(APPLY));
        assert_eq!(
            first[0].note,
            format!("{APPLY}: apps/v1, Kind=Deployment: ERROR: a")
        );
        let rec = record_of(std::slice::from_ref(&a));
        // The same findings again: nothing.
        assert!(finding_events(Some(&rec), std::slice::from_ref(&a)).is_empty());
        // A changed message and a new expression.
        let a2 = finding(APPLY, "apps/v1, Kind=Deployment: ERROR: b");
        let b = finding(PATCH, "apps/v1, Kind=Deployment: ERROR: c");
        let ev = finding_events(Some(&rec), &[b.clone(), a2.clone()]);
        let reasons: Vec<_> = ev
            .iter()
            .map(|e| (e.reason, e.field_ref.as_deref()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (REASON_FINDING_CHANGED, Some(APPLY)),
                (REASON_FINDING, Some(PATCH))
            ]
        );
        // One fixed, one left.
        let rec = record_of(&[a2, b.clone()]);
        let ev = finding_events(Some(&rec), std::slice::from_ref(&b));
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].reason, ev[0].warning, ev[0].field_ref.as_deref()),
            (REASON_FINDING_RESOLVED, false, Some(APPLY))
        );
        // All fixed.
        let rec = record_of(std::slice::from_ref(&b));
        let ev = finding_events(Some(&rec), &[]);
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0].reason, ev[0].warning),
            (REASON_FINDINGS_CLEARED, false)
        );
        // Clean from the start (or after a restart): nothing.
        assert!(finding_events(None, &[]).is_empty());
        assert!(finding_events(Some(&FindingRecord::new()), &[]).is_empty());
    }

    #[test]
    fn event_notes_stay_within_the_api_limit() {
        let long = "é".repeat(2000);
        let ev = finding_events(None, &[finding(APPLY, &long)]);
        assert!(ev[0].note.len() <= MAX_EVENT_NOTE, "{}", ev[0].note.len());
        assert!(ev[0].note.ends_with(" ..."));
        assert!(ev[0].note.starts_with(APPLY));
        assert_eq!(bounded_note("short"), "short");
    }

    #[test]
    fn appear_change_clear_and_quiet() {
        let appear = event_for(None, Some(&cond("False", "1 expression with warnings: a")));
        assert_eq!(appear.map(|e| e.reason), Some("ExpressionWarnings"));
        let before = status("False", "1 expression with warnings: a");
        assert_eq!(
            event_for(
                Some(&before),
                Some(&cond("False", "1 expression with warnings: a"))
            ),
            None
        );
        assert_eq!(
            event_for(
                Some(&before),
                Some(&cond("False", "2 expressions with warnings: a, b"))
            )
            .map(|e| e.reason),
            Some("ExpressionWarningsChanged")
        );
        let cleared = event_for(Some(&before), Some(&cond("True", "no warnings")));
        assert_eq!(
            cleared.as_ref().map(|e| (e.reason, e.warning)),
            Some(("ExpressionWarningsCleared", false))
        );
        assert_eq!(event_for(None, Some(&cond("True", "no warnings"))), None);
        assert_eq!(event_for(Some(&before), Some(&cond("Unknown", "x"))), None);
    }
}
