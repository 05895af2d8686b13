//! The integration tests, in one test binary (one link step instead of one per file).
//! Each module is the test file of the same name; shared helpers are in `support` and
//! `golden_support`. Run one file's tests with `cargo test --test it <module>::`.

mod cel_conformance;
mod cel_oracle_diff;
mod cel_proptest;
mod check_bindings_cli;
mod check_cli;
mod check_cli_config;
mod check_cli_documents;
mod check_cli_gate;
mod check_cli_gatekeeper;
mod check_cli_suppress;
mod check_mutating_verdicts;
mod ci_formats;
mod cost_reuse;
mod embedded_schemas;
mod extended_findings;
mod gatekeeper_oracle;
mod golden_support;
mod k8s_env_corpus;
mod k8s_env_golden_corpus;
mod k8s_env_golden_cost;
mod k8s_env_golden_cost_typed;
mod k8s_env_golden_exprs;
mod k8s_env_golden_vap;
mod k8s_env_golden_vap_typed;
mod k8s_env_proptest;
mod k8s_env_typechecking;
mod k8s_env_upstream_functions;
mod layering;
mod lsp;
mod manifests;
mod mutating_bad_input;
mod mutating_findings;
mod offline_discovery;
mod pipeline_fixtures;
mod runtime_safety;
mod schema_bad_input;
mod schema_oracle;
mod schema_proptest;
mod stack_2mib;
mod static_manifests;
mod support;
mod textproto;
mod upstream_corpus_status;
mod upstream_discovery;
