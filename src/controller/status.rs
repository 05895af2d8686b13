//! What vapcheck writes into a policy's status, and whether a write is needed (pure).

use k8s_openapi::api::admissionregistration::v1::{
    ExpressionWarning, TypeChecking, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Value, json};

use crate::config::StatusMode;
use crate::policy::PolicyStatus;

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "vapcheck";

/// The field manager of kube-controller-manager's ValidatingAdmissionPolicy status controller
/// (k8s.io/kubernetes v1.37.1 pkg/controller/validatingadmissionpolicystatus/controller.go).
pub const UPSTREAM_FIELD_MANAGER: &str = "validatingadmissionpolicy-status";

/// The status vapcheck wants on the policy: the computed one, with each condition's
/// `lastTransitionTime` carried over from `existing` when its status did not change (else
/// `now`). In [`StatusMode::ConditionsOnly`] only the conditions are set.
pub fn desired_status(
    computed: &PolicyStatus,
    existing: Option<&ValidatingAdmissionPolicyStatus>,
    mode: StatusMode,
    now: &Time,
) -> ValidatingAdmissionPolicyStatus {
    let mut status = computed.to_k8s_status(now);
    if let Some(conditions) = status.conditions.as_mut() {
        for c in conditions.iter_mut() {
            if let Some(old) = find_condition(existing, &c.type_)
                && old.status == c.status
            {
                c.last_transition_time = old.last_transition_time.clone();
            }
        }
    }
    if mode == StatusMode::ConditionsOnly {
        status.observed_generation = None;
        status.type_checking = None;
    }
    status
}

fn find_condition<'a>(
    status: Option<&'a ValidatingAdmissionPolicyStatus>,
    type_: &str,
) -> Option<&'a Condition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The warnings of a status (`None` and an empty list are the same).
pub fn warnings_of(status: Option<&ValidatingAdmissionPolicyStatus>) -> &[ExpressionWarning] {
    status
        .and_then(|s| s.type_checking.as_ref())
        .and_then(|t: &TypeChecking| t.expression_warnings.as_deref())
        .unwrap_or(&[])
}

/// Whether `existing` already says what `desired` says, ignoring `lastTransitionTime` and
/// conditions of other types. In [`StatusMode::Full`] `observedGeneration` and the warnings
/// must match too.
pub fn is_up_to_date(
    existing: Option<&ValidatingAdmissionPolicyStatus>,
    desired: &ValidatingAdmissionPolicyStatus,
    mode: StatusMode,
) -> bool {
    if mode == StatusMode::Full {
        let generation = existing.and_then(|s| s.observed_generation);
        if generation != desired.observed_generation
            || warnings_of(existing) != warnings_of(Some(desired))
            || existing.and_then(|s| s.type_checking.as_ref()).is_none()
        {
            return false;
        }
    }
    desired.conditions.iter().flatten().all(|want| {
        find_condition(existing, &want.type_).is_some_and(|have| {
            have.status == want.status
                && have.reason == want.reason
                && have.message == want.message
                && have.observed_generation == want.observed_generation
        })
    })
}

/// The server-side apply body for `/status`.
pub fn apply_body(desired: &ValidatingAdmissionPolicyStatus) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "status": desired,
    })
}

/// Whether a field manager other than vapcheck touched `status.typeChecking` after vapcheck's
/// last status write (from `metadata.managedFields`). Used for logging why vapcheck re-applies.
pub fn overwritten_by_other_manager(policy: &ValidatingAdmissionPolicy) -> Option<String> {
    let fields = policy.metadata.managed_fields.as_ref()?;
    let ours = fields
        .iter()
        .filter(|f| f.manager.as_deref() == Some(FIELD_MANAGER))
        .filter_map(|f| f.time.as_ref().map(|t| t.0))
        .max();
    fields
        .iter()
        .filter(|f| f.manager.as_deref() != Some(FIELD_MANAGER))
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter(|f| {
            f.fields_v1
                .as_ref()
                .and_then(|v| v.0.pointer("/f:status/f:typeChecking"))
                .is_some()
        })
        .find(|f| match (ours, f.time.as_ref()) {
            (Some(ours), Some(t)) => t.0 >= ours,
            _ => true,
        })
        .and_then(|f| f.manager.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicyCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        FieldsV1, ManagedFieldsEntry, ObjectMeta,
    };
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("valid timestamp"))
    }

    fn computed(warnings: &[&str], valid: &str) -> PolicyStatus {
        PolicyStatus {
            observed_generation: Some(2),
            expression_warnings: warnings
                .iter()
                .map(|w| ExpressionWarning {
                    field_ref: "spec.validations[0].expression".into(),
                    warning: (*w).into(),
                })
                .collect(),
            conditions: vec![
                PolicyCondition {
                    type_: "TypeChecked".into(),
                    status: "True".into(),
                    observed_generation: Some(2),
                    reason: "AllKindsChecked".into(),
                    message: "checked".into(),
                },
                PolicyCondition {
                    type_: "ExpressionsValid".into(),
                    status: valid.into(),
                    observed_generation: Some(2),
                    reason: "R".into(),
                    message: "m".into(),
                },
            ],
            ..PolicyStatus::default()
        }
    }

    #[test]
    fn transition_time_is_kept_while_the_status_stays() {
        let first = desired_status(&computed(&["w"], "False"), None, StatusMode::Full, &t(100));
        let again = desired_status(
            &computed(&["w"], "False"),
            Some(&first),
            StatusMode::Full,
            &t(200),
        );
        let times: Vec<_> = again
            .conditions
            .iter()
            .flatten()
            .map(|c| c.last_transition_time.clone())
            .collect();
        assert_eq!(times, vec![t(100), t(100)]);
        let flipped = desired_status(
            &computed(&[], "True"),
            Some(&first),
            StatusMode::Full,
            &t(300),
        );
        let conditions = flipped.conditions.unwrap_or_default();
        assert_eq!(conditions[0].last_transition_time, t(100));
        assert_eq!(conditions[1].last_transition_time, t(300));
    }

    #[test]
    fn unchanged_result_needs_no_write_even_with_other_times() {
        let existing = desired_status(&computed(&["w"], "False"), None, StatusMode::Full, &t(1));
        let desired = desired_status(&computed(&["w"], "False"), None, StatusMode::Full, &t(9));
        assert!(is_up_to_date(Some(&existing), &desired, StatusMode::Full));
        let other = desired_status(&computed(&["x"], "False"), None, StatusMode::Full, &t(9));
        assert!(!is_up_to_date(Some(&existing), &other, StatusMode::Full));
        assert!(!is_up_to_date(None, &desired, StatusMode::Full));
    }

    #[test]
    fn conditions_only_ignores_type_checking_and_generation() {
        let mut existing =
            desired_status(&computed(&["w"], "False"), None, StatusMode::Full, &t(1));
        existing.type_checking = Some(TypeChecking::default());
        existing.observed_generation = Some(7);
        let desired = desired_status(
            &computed(&["w"], "False"),
            Some(&existing),
            StatusMode::ConditionsOnly,
            &t(2),
        );
        assert_eq!(desired.type_checking, None);
        assert_eq!(desired.observed_generation, None);
        assert!(is_up_to_date(
            Some(&existing),
            &desired,
            StatusMode::ConditionsOnly
        ));
        assert!(!is_up_to_date(Some(&existing), &desired, StatusMode::Full));
        let body = apply_body(&desired);
        assert_eq!(body.pointer("/status/typeChecking"), None);
        assert!(body.pointer("/status/conditions/1").is_some());
    }

    #[test]
    fn missing_type_checking_is_a_difference_in_full_mode() {
        let mut existing = desired_status(&computed(&[], "True"), None, StatusMode::Full, &t(1));
        let desired = existing.clone();
        existing.type_checking = None;
        assert!(!is_up_to_date(Some(&existing), &desired, StatusMode::Full));
    }

    fn entry(manager: &str, secs: i64, type_checking: bool) -> ManagedFieldsEntry {
        let fields = if type_checking {
            json!({"f:status": {"f:typeChecking": {}}})
        } else {
            json!({"f:status": {"f:conditions": {}}})
        };
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            subresource: Some("status".into()),
            time: Some(t(secs)),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn other_manager_detected_only_when_later() {
        let policy = |entries| ValidatingAdmissionPolicy {
            metadata: ObjectMeta {
                managed_fields: Some(entries),
                ..ObjectMeta::default()
            },
            ..ValidatingAdmissionPolicy::default()
        };
        let later = policy(vec![
            entry(FIELD_MANAGER, 10, true),
            entry(UPSTREAM_FIELD_MANAGER, 20, true),
        ]);
        assert_eq!(
            overwritten_by_other_manager(&later).as_deref(),
            Some(UPSTREAM_FIELD_MANAGER)
        );
        let earlier = policy(vec![
            entry(FIELD_MANAGER, 30, true),
            entry(UPSTREAM_FIELD_MANAGER, 20, true),
        ]);
        assert_eq!(overwritten_by_other_manager(&earlier), None);
        let other_fields = policy(vec![
            entry(FIELD_MANAGER, 10, true),
            entry("someone", 20, false),
        ]);
        assert_eq!(overwritten_by_other_manager(&other_fields), None);
    }
}
