//! `vapcheck check` and Kyverno's ValidatingPolicies, MutatingPolicies, DeletingPolicies and
//! their namespaced variants (`policies.kyverno.io` v1alpha1, v1beta1, v1): what Kyverno's policy webhook answers when
//! the policy is created (the `apiServer` block, its causes being Kyverno's errors) and
//! vapcheck's type checking of its CEL (the `status`), by [`crate::engines::kyverno`];
//! docs/engines.md.
//!
//! The policies are picked from the input's other objects, as Gatekeeper's templates are
//! ([`super::gatekeeper`]).

use crate::apiserver::Server;
use crate::engines::kyverno::deleting::{self, DeletingPolicy};
use crate::engines::kyverno::generating::{self, GeneratingPolicy};
use crate::engines::kyverno::mutating::{self, MutatingPolicy};
use crate::engines::kyverno::{self, ValidatingPolicy};

use super::entry::{ApiServerVerdict, CheckedPolicy};
use super::input::{InputOther, Sourced, Undecoded, decode_others};

/// Whether `kind` is one this module reports (for the text output's "REJECTED by Kyverno").
pub fn is_kind(kind: &str) -> bool {
    kyverno::VALIDATING_KINDS.contains(&kind)
        || mutating::MUTATING_KINDS.contains(&kind)
        || deleting::DELETING_KINDS.contains(&kind)
        || generating::GENERATING_KINDS.contains(&kind)
}

/// A Kyverno policy of a kind vapcheck reads.
#[derive(Debug, Clone, PartialEq)]
pub enum KyvernoPolicy {
    /// A ValidatingPolicy or NamespacedValidatingPolicy (boxed, as the other: both are large).
    Validating(Box<ValidatingPolicy>),
    /// A MutatingPolicy or NamespacedMutatingPolicy.
    Mutating(Box<MutatingPolicy>),
    /// A DeletingPolicy or NamespacedDeletingPolicy.
    Deleting(Box<DeletingPolicy>),
    /// A GeneratingPolicy or NamespacedGeneratingPolicy.
    Generating(Box<GeneratingPolicy>),
}

/// A Kyverno policy, with where it came from.
pub type PolicyObject = Sourced<KyvernoPolicy>;

/// The Kyverno policies among `others`, in input order, and each with a field of the wrong
/// type as an [`Undecoded`].
pub fn read_lenient(others: &[InputOther]) -> (Vec<PolicyObject>, Vec<Undecoded>) {
    decode_others(
        others,
        |o| {
            kyverno::is_validating_policy(o.api_version(), o.kind())
                || mutating::is_mutating_policy(o.api_version(), o.kind())
                || deleting::is_deleting_policy(o.api_version(), o.kind())
                || generating::is_generating_policy(o.api_version(), o.kind())
        },
        |v| {
            let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            if mutating::MUTATING_KINDS.contains(&kind) {
                mutating::read_mutating_policy(v).map(|p| KyvernoPolicy::Mutating(Box::new(p)))
            } else if deleting::DELETING_KINDS.contains(&kind) {
                deleting::read_deleting_policy(v).map(|p| KyvernoPolicy::Deleting(Box::new(p)))
            } else if generating::GENERATING_KINDS.contains(&kind) {
                generating::read_generating_policy(v)
                    .map(|p| KyvernoPolicy::Generating(Box::new(p)))
            } else {
                kyverno::read_validating_policy(v).map(|p| KyvernoPolicy::Validating(Box::new(p)))
            }
        },
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
    let (kind, name, causes, status) = match &object.object {
        KyvernoPolicy::Validating(p) => (
            p.kind,
            &p.name,
            kyverno::validate_causes(p),
            backends.map(|b| kyverno::type_check(p, options, b)),
        ),
        KyvernoPolicy::Mutating(p) => (
            p.kind,
            &p.name,
            mutating::validate_causes(p),
            backends.map(|b| mutating::type_check(p, options, b)),
        ),
        KyvernoPolicy::Deleting(p) => (
            p.kind,
            &p.name,
            deleting::validate_causes(p),
            backends.map(|b| deleting::type_check(p, options, b)),
        ),
        KyvernoPolicy::Generating(p) => (
            p.kind,
            &p.name,
            generating::validate_causes(p),
            backends.map(|b| generating::type_check(p, options, b)),
        ),
    };
    CheckedPolicy::new(
        kind,
        name.clone(),
        object.origin.clone(),
        ApiServerVerdict::new(server.minor, false, causes),
        status,
    )
}
