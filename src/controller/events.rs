//! Which Kubernetes Event (if any) a status change deserves (pure).
//!
//! The decision compares the `ExpressionsValid` condition the policy had before the write with
//! the one being written, so an event is emitted only when the warnings appear, change or clear,
//! never once per reconcile, and a restarted controller does not repeat old events.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyStatus;

use crate::policy::PolicyCondition;
use crate::policy::status::EXPRESSIONS_VALID;

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
