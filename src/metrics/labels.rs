//! The bounded label values of the families: one enum per label, with every value.

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

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
