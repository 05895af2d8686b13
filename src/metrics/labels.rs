//! The bounded label values of the families: one enum per label, with every value. A
//! policy's state is derived from the classes of its findings ([`PolicyState::of_findings`]).

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::finding::{Analysed, Class, Finding, ObjectRef, produce};
use crate::policy::PolicyStatus;

macro_rules! label_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                encoder.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// Outcome of one reconcile (`controller_runtime_reconcile_total{result}`).
    ReconcileResult {
        /// Done; nothing scheduled beyond the periodic re-check.
        Success => "success",
        /// The reconcile returned an error (also counted in `..._errors_total`).
        Error => "error",
        /// Requeued at once (rate-limited).
        Requeue => "requeue",
        /// Requeued after a delay.
        RequeueAfter => "requeue_after",
    }
}

label_enum! {
    /// A policy's check state (`vapcheck_policies{state}`).
    PolicyState {
        /// Every expression type-checks against every kind.
        Clean => "clean",
        /// At least one expression warning.
        Warnings => "warnings",
        /// Checked, but some kinds were skipped (no schema, limit, ...).
        Partial => "partial",
        /// Could not be checked at all (internal error, unusable policy).
        Failed => "failed",
    }
}

impl PolicyState {
    /// The state of a policy from the classes of its findings ([`crate::finding::Class`]):
    /// `failed` when its type check could not run; else `warnings` with a finding that fails
    /// at admission or errors on valid objects, `partial` with a kind not checked, `clean`
    /// without either.
    pub fn of_findings<'a>(failed: bool, findings: impl IntoIterator<Item = &'a Finding>) -> Self {
        if failed {
            return PolicyState::Failed;
        }
        let mut state = PolicyState::Clean;
        for f in findings {
            match f.class {
                Class::FailsAtAdmission | Class::ErrorsOnValidObjects => {
                    return PolicyState::Warnings;
                }
                Class::NotChecked => state = PolicyState::Partial,
                _ => {}
            }
        }
        state
    }

    /// The state of a checked policy (both policy kinds, the engines' policies): from the
    /// findings [`crate::finding::produce`] makes of its status, `failed` when its
    /// `TypeChecked` condition is not `True`.
    pub fn of_status(status: &PolicyStatus) -> Self {
        let failed = status
            .conditions
            .iter()
            .any(|c| c.type_ == crate::policy::status::TYPE_CHECKED && c.status != "True");
        // The classes of a status's findings do not depend on the object they are on.
        let object = ObjectRef::in_cluster("", "");
        let findings = produce(Analysed {
            object: &object,
            engine: None,
            static_manifests: false,
            undecoded: None,
            causes: &[],
            status: Some(status),
            advice: &[],
        });
        Self::of_findings(failed, &findings)
    }
}

label_enum! {
    /// The kind of a checked policy (`kind` label of the per-policy metrics).
    PolicyKind {
        /// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy.
        Validating => "ValidatingAdmissionPolicy",
        /// `admissionregistration.k8s.io/v1` MutatingAdmissionPolicy.
        Mutating => "MutatingAdmissionPolicy",
        /// Kyverno's `policies.kyverno.io/v1` ValidatingPolicy.
        KyvernoValidating => "ValidatingPolicy",
        /// Kyverno's `policies.kyverno.io/v1` NamespacedValidatingPolicy (series named
        /// `<namespace>/<name>`).
        KyvernoNamespacedValidating => "NamespacedValidatingPolicy",
        /// Gatekeeper's `templates.gatekeeper.sh/v1` ConstraintTemplate.
        GatekeeperTemplate => "ConstraintTemplate",
    }
}

label_enum! {
    /// Why a kind was not checked (`vapcheck_kinds_skipped_total{reason}`).
    SkipReason {
        /// Above `kindLimit`.
        KindLimit => "kind_limit",
        /// A wildcard rule that was not expanded.
        Wildcard => "wildcard",
        /// A subresource (no schema of its own).
        Subresource => "subresource",
        /// The resource is not served by the cluster.
        NotFound => "not_found",
        /// The kind is served but has no usable schema.
        NoSchema => "no_schema",
    }
}

label_enum! {
    /// Why the policy watch had to be restarted (`vapcheck_watch_restarts_total{reason}`).
    WatchRestartReason {
        /// 410 Gone: the resource version expired; the watcher lists again.
        Expired => "expired",
        /// Any other list or watch failure (API server unreachable, 5xx, 403, ...).
        Error => "error",
    }
}

label_enum! {
    /// Outcome of one OpenAPI schema fetch (`vapcheck_schema_fetches_total{result}`).
    SchemaFetchResult {
        /// Fetched and parsed.
        Success => "success",
        /// The hash was unchanged; nothing downloaded.
        Unchanged => "unchanged",
        /// 404.
        NotFound => "not_found",
        /// 401 or 403.
        Forbidden => "forbidden",
        /// Any other failure (network, 5xx, unparsable document).
        Error => "error",
    }
}

label_enum! {
    /// Outcome of one status write (`vapcheck_status_writes_total{result}`).
    StatusWriteResult {
        /// Applied.
        Success => "success",
        /// The computed status equals the current one; no request sent.
        Unchanged => "unchanged",
        /// The policy was deleted meanwhile (404).
        NotFound => "not_found",
        /// 409 conflict.
        Conflict => "conflict",
        /// Any other failure.
        Error => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::status::{PolicyCondition, TYPE_CHECKED};
    use crate::policy::{SkipReason as Skip, SkipSubject, Skipped};

    /// The state follows the findings' classes: a finding that fails at admission (or errors
    /// on valid objects) over a kind not checked, a failed type check over both.
    #[test]
    fn a_policy_state_is_the_classes_of_its_findings() {
        let clean = PolicyStatus::default();
        assert_eq!(PolicyState::of_status(&clean), PolicyState::Clean);
        let skipped = PolicyStatus {
            skipped: vec![Skipped {
                subject: SkipSubject::Rule(0),
                reason: Skip::Wildcard,
            }],
            ..PolicyStatus::default()
        };
        assert_eq!(PolicyState::of_status(&skipped), PolicyState::Partial);
        let failed = PolicyStatus {
            conditions: vec![PolicyCondition {
                type_: TYPE_CHECKED.into(),
                status: "False".into(),
                observed_generation: None,
                reason: "R".into(),
                message: "m".into(),
            }],
            ..skipped.clone()
        };
        assert_eq!(PolicyState::of_status(&failed), PolicyState::Failed);
        let finding = |class| Finding {
            class,
            ..produce(Analysed {
                object: &ObjectRef::in_cluster("", ""),
                engine: None,
                static_manifests: false,
                undecoded: None,
                causes: &[],
                status: Some(&skipped),
                advice: &[],
            })
            .remove(0)
        };
        let partial = finding(Class::NotChecked);
        let warning = finding(Class::FailsAtAdmission);
        let runtime = finding(Class::ErrorsOnValidObjects);
        assert_eq!(
            PolicyState::of_findings(false, [&partial, &warning]),
            PolicyState::Warnings
        );
        assert_eq!(
            PolicyState::of_findings(false, [&runtime, &partial]),
            PolicyState::Warnings
        );
        assert_eq!(
            PolicyState::of_findings(false, [&partial]),
            PolicyState::Partial
        );
        assert_eq!(
            PolicyState::of_findings(true, [&warning]),
            PolicyState::Failed
        );
    }
}
