//! vapcheck: type-checks the CEL expressions of Kubernetes ValidatingAdmissionPolicies.
//!
//! The crate is a functional core with no I/O ([`cel`], [`k8s_env`], [`schema`] conversion,
//! [`policy`]) and a thin shell around it (the controller, metrics, configuration and the
//! binary in `main.rs`).

/// The checker layer, the crate `vapcheck-cel` (crates/cel): cel-go v0.29.2's checker, cost
/// estimator, standard library and validators, with no Kubernetes in it.
pub use vapcheck_cel as cel;

pub mod analysis;
pub mod apiserver;
pub mod bindings;
pub mod cli;
pub mod config;
pub mod controller;
pub mod engine;
pub mod engines;
pub mod finding;
pub mod health;
pub mod k8s_env;
pub mod lsp;
pub mod metrics;
pub mod mutating;
pub mod policy;
pub mod reports;
pub mod schema;
pub mod sources;
pub mod suppress;
pub mod webhooks;

/// The Kubernetes release vapcheck is pinned to (major.minor.patch), read from
/// `e2e/cluster/kubernetes.version`, the single place that records it.
pub const KUBERNETES_VERSION: &str = include_str!("../e2e/cluster/kubernetes.version").trim_ascii();
