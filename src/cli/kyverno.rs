//! `vapcheck check` and Kyverno's ValidatingPolicies and NamespacedValidatingPolicies
//! (`policies.kyverno.io` v1alpha1, v1beta1, v1): what Kyverno's policy webhook answers when
//! the policy is created (the `apiServer` block, its causes being Kyverno's errors) and
//! vapcheck's type checking of its CEL (the `status`), by [`crate::engines::kyverno`];
//! docs/engines.md.
//!
//! The policies are picked from the input's other objects, as Gatekeeper's templates are
//! ([`super::gatekeeper`]).

use crate::apiserver::Server;
use crate::engines::kyverno::{self, ValidatingPolicy};

use super::input::{InputOther, Sourced, Undecoded, decode_others};
use super::output::{ApiServerVerdict, CheckedPolicy};

/// Whether `kind` is one this module reports (for the text output's "REJECTED by Kyverno").
pub fn is_kind(kind: &str) -> bool {
    kyverno::VALIDATING_KINDS.contains(&kind)
}

/// A Kyverno validating policy, with where it came from.
pub type PolicyObject = Sourced<ValidatingPolicy>;

/// The validating policies among `others`, in input order, and each with a field of the wrong
/// type as an [`Undecoded`].
pub fn read_lenient(others: &[InputOther]) -> (Vec<PolicyObject>, Vec<Undecoded>) {
    decode_others(
        others,
        |o| kyverno::is_validating_policy(o.api_version(), o.kind()),
        kyverno::read_validating_policy,
    )
}

/// What Kyverno answers to the policy and, with schema backends, vapcheck's type checking of
/// its expressions.
pub fn check(
    object: &PolicyObject,
    server: Server,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> CheckedPolicy {
    let policy = &object.object;
    let causes = kyverno::validate(policy);
    let status = backends.map(|b| kyverno::type_check(policy, options, b));
    CheckedPolicy {
        kind: policy.kind,
        name: policy.name.clone(),
        origin: object.origin.clone(),
        api_server: ApiServerVerdict {
            server_minor: server.minor,
            update: false,
            causes,
            static_dir: None,
        },
        status,
        bound_by: None,
        effect: None,
        advice: Vec::new(),
        undecoded: None,
    }
}
