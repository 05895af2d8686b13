//! Cost of checking the whole corpus: first the policy layer alone (reading, kind selection,
//! orchestration, rendering) with a REST mapper built from `../shared/openapi/v1.35` and a
//! trivial checker (every expression is `bool`), so CEL checking time is excluded; then the
//! real thing, `vapcheck check --openapi ../shared/openapi/v1.35` in-process (schemas
//! converted by `crates/core/src/schema`, expressions parsed once per policy and checked per kind in the
//! Kubernetes environment); and kube-apiserver's create-time verdict for every policy.
//!
//! Run: `cargo bench --bench policy_layer`.

mod common;

use std::sync::Arc;
use std::time::Instant;

use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::Issues;
use vapcheck::policy::{
    Backends, CheckEnv, CheckOptions, DiscoveryRestMapper, EnvRequest, ExpressionChecker, Gvk,
    Mode, OutputType, ParsedExpr, SchemaError, SchemaLookup, SchemaSource, check_policy,
    types_to_check,
};

struct AllUntyped;

impl SchemaSource for AllUntyped {
    fn resolve(&self, _gvk: &Gvk) -> Result<SchemaLookup, SchemaError> {
        Ok(SchemaLookup::Untyped)
    }
}

struct BoolChecker;
struct BoolEnv;

impl ExpressionChecker for BoolChecker {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        Ok(ParsedExpr(Arc::new(expression.len())))
    }
    fn environment(&self, _request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        Ok(Box::new(BoolEnv))
    }
}

impl CheckEnv for BoolEnv {
    fn check(&self, _parsed: &ParsedExpr) -> Result<OutputType, Issues> {
        Ok(OutputType::Bool)
    }
    fn declare_variable(&mut self, _name: &str, _ty: &OutputType) {}
}

fn time<T>(label: &str, per: usize, iterations: u32, mut f: impl FnMut() -> T) {
    // warm-up
    std::hint::black_box(f());
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(f());
    }
    let total = start.elapsed();
    let per_iter = total / iterations;
    let per_item = per_iter.as_nanos() / per.max(1) as u128;
    println!(
        "{label:<40} {:>10.3} ms/run  {:>8} ns/policy",
        per_iter.as_secs_f64() * 1e3,
        per_item
    );
}

fn main() {
    let shared = common::shared_dir();
    let files = common::policy_corpus_files();
    let policies = read_inputs(&files, &mut std::io::empty()).expect("corpus reads");
    let n = policies.len();
    println!("corpus: {} files, {n} policies", files.len());

    let t = Instant::now();
    let groups =
        offline_discovery(Some(&shared.join("openapi/v1.35")), None, &[]).expect("openapi folder");
    println!(
        "{:<40} {:>10.3} ms (once)",
        "discovery from openapi/v1.35",
        t.elapsed().as_secs_f64() * 1e3
    );
    let mapper = DiscoveryRestMapper::new(groups);

    time("read corpus (YAML → policies)", n, 20, || {
        read_inputs(&files, &mut std::io::empty()).map(|p| p.len())
    });
    time("typesToCheck (strict)", n, 50, || {
        policies
            .iter()
            .map(|p| types_to_check(&p.policy, &mapper).kinds.len())
            .sum::<usize>()
    });
    let backends = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: &AllUntyped,
        checker: &BoolChecker,
    };
    for mode in [Mode::Strict, Mode::Extended] {
        let options = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        time(
            &format!("check_policy ({mode}, trivial checker)"),
            n,
            50,
            || {
                policies
                    .iter()
                    .map(|p| {
                        check_policy(&p.policy, &options, &backends)
                            .expression_warnings
                            .len()
                    })
                    .sum::<usize>()
            },
        );
    }

    // What kube-apiserver 1.37 answers on create, for every corpus policy (defaulting, field
    // validation, every expression compiled in the API server's environment).
    let server = vapcheck::apiserver::Server::PINNED;
    time("apiServer verdict (create, 1.37)", n, 10, || {
        policies
            .iter()
            .map(|p| vapcheck::apiserver::validate_policy_create(&p.policy, server).len())
            .sum::<usize>()
    });

    let options = vapcheck::cli::SchemaOptions {
        openapi: Some(shared.join("openapi/v1.35")),
        ..vapcheck::cli::SchemaOptions::default()
    };
    let t = Instant::now();
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    println!(
        "{:<40} {:>10.3} ms (once)",
        "load schemas and build the environment",
        t.elapsed().as_secs_f64() * 1e3
    );
    let real = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    };
    for mode in [Mode::Strict, Mode::Extended] {
        let options = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        time(
            &format!("check_policy ({mode}, real checker)"),
            n,
            5,
            || {
                policies
                    .iter()
                    .map(|p| {
                        check_policy(&p.policy, &options, &real)
                            .expression_warnings
                            .len()
                    })
                    .sum::<usize>()
            },
        );
    }
}
