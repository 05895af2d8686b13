//! What `vapcheck check` found for each object it read ([`CheckedPolicy`]: the API server's
//! verdict, the computed status, a binding's effect, a webhook configuration's advice), that
//! the findings are produced from ([`super::emit::findings`]) and every output format renders
//! ([`super::emit`]).

#[cfg(test)]
use crate::policy::PolicyStatus;

#[cfg(test)]
use super::input::Origin;

/// The entry types live in the core ([`crate::analysis::entry`]); these paths stay.
pub use crate::analysis::entry::{ApiServerVerdict, CheckedPolicy, STATIC_MANIFESTS_KIND};

/// The policy engines whose own admission, not kube-apiserver's, decides whether their objects
/// are accepted.
pub(crate) const ENGINES: [&str; 2] = ["Gatekeeper", "Kyverno"];

/// The engine that refuses an object of `kind` when it is refused (`None`: kube-apiserver):
/// Gatekeeper's driver refuses a ConstraintTemplate (`super::gatekeeper`), Kyverno's policy
/// webhook a Kyverno policy (`super::kyverno`).
pub(crate) fn engine_of(kind: &str) -> Option<&'static str> {
    if kind == super::gatekeeper::KIND {
        Some(ENGINES[0])
    } else if super::kyverno::is_kind(kind) {
        Some(ENGINES[1])
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! A sample of checked objects for the emitters' tests.
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;

    use super::*;
    use crate::policy::status::{expressions_valid_condition, type_checked_condition};
    use crate::policy::{Gvk, SkipReason, SkipSubject, Skipped};

    /// A policy with a warning and a kind not checked, one without, and a binding the API
    /// server rejects.
    pub(crate) fn sample() -> Vec<CheckedPolicy> {
        let kinds = [Gvk::new("apps", "v1", "Deployment")];
        let warnings = vec![ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n".into(),
        }];
        let skipped = [Skipped {
            subject: SkipSubject::Rule(1),
            reason: SkipReason::Wildcard,
        }];
        let bad = PolicyStatus {
            observed_generation: Some(2),
            conditions: vec![
                type_checked_condition(Some(2), &kinds, &skipped, false),
                expressions_valid_condition(Some(2), &warnings, 1, true),
            ],
            expression_warnings: warnings,
            expression_results: Vec::new(),
            checked_kinds: kinds.to_vec(),
            skipped: skipped.to_vec(),
            findings: Vec::new(),
            runtime: Vec::new(),
            cost: Default::default(),
            expressions_checked: 1,
        };
        let good = PolicyStatus {
            observed_generation: None,
            conditions: vec![
                type_checked_condition(None, &kinds, &[], false),
                expressions_valid_condition(None, &[], 1, true),
            ],
            checked_kinds: kinds.to_vec(),
            ..PolicyStatus::default()
        };
        let at = |document| Origin {
            source: "p.yaml".into(),
            document,
            item: None,
        };
        vec![
            CheckedPolicy::new(
                super::super::input::POLICY_KIND,
                "bad".into(),
                at(1),
                ApiServerVerdict::new(37, false, Vec::new()),
                Some(bad),
            ),
            CheckedPolicy::new(
                super::super::input::POLICY_KIND,
                "good".into(),
                at(2),
                ApiServerVerdict::new(37, false, Vec::new()),
                Some(good),
            ),
            CheckedPolicy::new(
                super::super::input::BINDING_KIND,
                "bind".into(),
                at(3),
                ApiServerVerdict::new(
                    37,
                    false,
                    vec![crate::finding::Cause::new(
                        "spec.validationActions",
                        "spec.validationActions: Required value",
                    )],
                ),
                None,
            ),
        ]
    }
}
