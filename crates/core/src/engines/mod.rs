//! The policy engines whose objects hold Kubernetes CEL: Gatekeeper's ConstraintTemplates with
//! `engine: K8sNativeValidation` ([`gatekeeper`]) and Kyverno's ValidatingPolicies
//! ([`kyverno`]). Core layer: pure, no I/O.

pub mod gatekeeper;
pub mod kyverno;
