//! Reusing an estimate across the kinds of a policy (docs/cost.md, "fifth round") changes
//! nothing: every policy of `shared/corpus/policies`, checked in extended mode with the
//! offline schemas of `shared/openapi/v1.35` (as `vapcheck check` and the benchmark do), gets
//! the same cost report (estimates, budgets, findings and their reasons) with the reuse as
//! with every expression estimated afresh for every kind, and the reuse does happen.

use std::sync::Arc;

use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::engine::{KubeChecker, Schemas, reused_estimates};
use vapcheck::k8s_env::KubeVersion;
use vapcheck::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode, check_policy};
use vapcheck::schema::{FilesConfig, FilesSource};

#[test]
fn reused_estimates_equal_fresh_ones_over_the_corpus() {
    let shared = crate::support::shared_dir();
    let dir = shared.join("corpus/policies");
    let mut files = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("corpus folder {}: {e}", d.display()))
        {
            let p = e.expect("corpus entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let policies = read_inputs(&files, &mut std::io::empty()).expect("corpus reads");
    // The ValidatingAdmissionPolicies of shared/corpus/policies that `vapcheck check` reads: a
    // policy added to or removed from the shared corpus changes it.
    assert_eq!(policies.len(), 263, "corpus policies read");

    let openapi = shared.join("openapi/v1.35");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&openapi), None, &[]).expect("openapi"));
    let files = FilesSource::load(&FilesConfig {
        openapi_dir: Some(openapi),
        ..FilesConfig::default()
    })
    .expect("schemas load");
    let schemas = Schemas::new(Arc::new(files));
    let reusing = KubeChecker::with_version_notes(KubeVersion::PINNED).expect("checker");
    let fresh = KubeChecker::with_version_notes(KubeVersion::PINNED)
        .expect("checker")
        .without_estimate_reuse();
    let options = CheckOptions {
        mode: Mode::Extended,
        ..CheckOptions::default()
    };
    let backends = |checker| Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: &schemas,
        checker,
    };
    let (reusing, fresh) = (backends(&reusing), backends(&fresh));
    let before = reused_estimates();
    let (mut estimates, mut findings, mut reasons) = (0, 0, 0);
    for p in &policies {
        let got = check_policy(&p.policy, &options, &reusing).cost;
        let want = check_policy(&p.policy, &options, &fresh).cost;
        assert_eq!(got, want, "{}", p.origin);
        estimates += want.expressions.iter().map(|e| e.gvks.len()).sum::<usize>();
        findings += want.findings.len();
        reasons += want
            .expressions
            .iter()
            .map(|e| e.unbounded.len())
            .sum::<usize>();
    }
    let reused = reused_estimates() - before;
    println!(
        "{} policies: {estimates} estimates (expression x kind), {reused} reused, \
         {findings} findings, {reasons} reasons: identical with and without reuse",
        policies.len()
    );
    // The corpus has policies matching several kinds with the same fields (docs/cost.md). The
    // estimates change with the corpus or with the kinds a policy's rules resolve to (the
    // OpenAPI documents, the REST mapping); the reused ones also when the reuse rule changes
    // (engine.rs, `CheckEnv::cost`); findings and reasons when the cost model or its limits do.
    assert_eq!(estimates, 2961, "estimates (expression x kind)");
    assert_eq!(reused, 2459, "estimates reused from another kind");
    assert_eq!((findings, reasons), (514, 913), "cost findings and reasons");
}
