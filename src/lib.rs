//! vapcheck: type-checks the CEL expressions of Kubernetes ValidatingAdmissionPolicies.
//!
//! The workspace is layered into crates (docs/architecture.md): the checker ([`cel`], the
//! crate `vapcheck-cel`), the analysis core with no I/O (`vapcheck-core`: [`k8s_env`],
//! [`schema`] conversion, [`policy`] and the rest re-exported below under their old paths),
//! the sources that read files and the cluster (`vapcheck-sources`: [`schema::files`],
//! [`schema::live`], [`sources`]), and this crate, the front ends and the runtime shell (the
//! controller, metrics, configuration and the binary in `main.rs`).

/// The checker layer, the crate `vapcheck-cel` (crates/cel): cel-go v0.29.2's checker, cost
/// estimator, standard library and validators, with no Kubernetes in it.
pub use vapcheck_cel as cel;

// The core layer, the crate `vapcheck-core` (crates/core), under its modules' old paths.
pub use vapcheck_core::{
    analysis, apiserver, bindings, engine, engines, finding, k8s_env, mutating, policy, reports,
    suppress, webhooks,
};

/// The schemas: the core's types and conversion (`vapcheck_core::schema`) and the sources of
/// them that do I/O (`vapcheck_sources::schema`: `files`, `live`, `embedded::write_folder`).
pub mod schema {
    pub use vapcheck_sources::schema::*;

    /// The YAML files below `dir` of the shared folder (e.g. `corpus/policies`), sorted. Tests.
    #[cfg(test)]
    pub(crate) fn shared_yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).expect("corpus folder") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    out.push(path);
                }
            }
        }
        let mut files = Vec::new();
        // The read-only `shared/` folder beside the repository (tests only).
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
        walk(&shared.join(dir), &mut files);
        files.sort();
        files
    }
}

/// Reading the API server's aggregated discovery, the crate `vapcheck-sources`
/// (crates/sources/src/discovery.rs).
pub use vapcheck_sources::discovery as sources;

pub mod cli;
pub mod config;
pub mod controller;
pub mod health;
pub mod lsp;
pub mod metrics;

/// The Kubernetes release vapcheck is pinned to (major.minor.patch), read from
/// `e2e/cluster/kubernetes.version`, the single place that records it.
pub const KUBERNETES_VERSION: &str = include_str!("../e2e/cluster/kubernetes.version").trim_ascii();
