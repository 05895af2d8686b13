//! vapcheck-core: the analysis core of vapcheck, with no I/O — the Kubernetes CEL environment
//! ([`k8s_env`]), OpenAPI schemas to CEL types ([`schema`]), policy checking ([`policy`],
//! [`mutating`], [`engine`], [`engines`]), kube-apiserver's validation ([`apiserver`]), what
//! bindings and webhooks will do ([`bindings`], [`webhooks`]), and the findings, reports and
//! suppressions ([`finding`], [`reports`], [`suppress`]). The sources that read files and the
//! cluster are the crate `vapcheck-sources`; the front ends and the runtime are `vapcheck`
//! (docs/architecture.md).

/// The checker layer, the crate `vapcheck-cel` (crates/cel): cel-go v0.29.2's checker, cost
/// estimator, standard library and validators, with no Kubernetes in it.
pub use vapcheck_cel as cel;

pub mod analysis;
pub mod apiserver;
pub mod bindings;
pub mod engine;
pub mod engines;
pub mod finding;
pub mod k8s_env;
pub mod mutating;
pub mod policy;
pub mod reports;
pub mod schema;
pub mod suppress;
pub mod webhooks;
