//! The cluster (e2e) tests, in one test executable (`cargo test --test e2e`).
//!
//! Each module below was a test executable of its own and is now a *group*: its tests share one
//! process, so a group still gets its own control plane (`support::shared_cluster`, or the ones
//! its tests start with their own flags), started on first use and stopped when the group's
//! process exits. The runner (`runner.rs`, `harness = false`) runs each group in a child process
//! of this executable, a few groups at a time, and prints what cargo's test harness prints
//! (`test <group>::<name> ... ok`, one `test result:` line). See docs/cluster.md.

// Each module lists its tests with this macro (see `runner::Test`): a test function that is not
// in the list is never called, which the build reports as dead code.
macro_rules! e2e_tests {
    ($($(#[ignore = $why:literal])? $kind:ident $test:path),* $(,)?) => {
        pub(crate) fn tests() -> Vec<crate::runner::Test> {
            vec![$(crate::runner::Test::new(
                stringify!($test),
                &[$($why)?],
                || crate::runner::$kind($test),
            )),*]
        }
    };
}

mod runner;

// The support code, compiled once for every group. It is also included by the benchmarks in
// e2e/bench, which do not use all of it.
#[path = "../support/map_truth.rs"]
mod map_truth;
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;
#[allow(dead_code)]
#[path = "../support/apiserver_truth.rs"]
mod truth;
#[allow(dead_code)]
#[path = "../support/webhook_server.rs"]
mod webhook_server;
#[path = "../support/webhook_truth.rs"]
mod webhook_truth;

mod apiserver_verdicts;
mod binding_controller;
mod binding_verdicts;
mod chart;
mod cluster_scripts;
mod conformance;
mod controller;
mod cost_limits;
mod deployment;
mod engine_controller;
mod faults;
mod image;
mod map_binding_controller;
mod map_binding_verdicts;
mod map_controller;
mod prometheus;
mod rbac;
mod reports;
mod runtime_classes;
mod runtime_safety;
mod schema_live;
mod static_manifests;
mod upstream;
mod webhook_controller;
mod webhooks;

/// Every group: its name (the module's, which prefixes its tests' names) and its tests.
fn groups() -> Vec<runner::Group> {
    macro_rules! group {
        ($($module:ident),* $(,)?) => {
            vec![$(runner::Group { name: stringify!($module), tests: $module::tests() }),*]
        };
    }
    group![
        apiserver_verdicts,
        binding_controller,
        binding_verdicts,
        chart,
        cluster_scripts,
        conformance,
        controller,
        cost_limits,
        deployment,
        engine_controller,
        faults,
        image,
        map_binding_controller,
        map_binding_verdicts,
        map_controller,
        prometheus,
        rbac,
        reports,
        runtime_classes,
        runtime_safety,
        schema_live,
        static_manifests,
        upstream,
        webhook_controller,
        webhooks,
    ]
}

fn main() {
    std::process::exit(runner::main(groups()));
}
