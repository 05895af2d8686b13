//! Per-policy check time, vapcheck against upstream, side by side in one run (issue 17).
//!
//! Upstream: `e2e/oracle/bin/checkbench` (built by `e2e/oracle/build`), kube-controller-manager
//! 1.37.1's `TypeChecker.Check` with its schema resolver and a discovery REST mapper, started
//! once and kept warm. vapcheck: `check_policy` in strict mode (the same computation, whose
//! text equals upstream's) with the built-in 1.37 schemas, in this process. Both check every
//! policy of `shared/corpus/policies` once untimed (start-up, first schema conversions), then
//! `VAPCHECK_BENCH_ROUNDS` (10) timed rounds. Both sides' `status.typeChecking` are compared
//! policy by policy, so the two sides are shown to do the same work; a difference fails.
//!
//! Run: `e2e/oracle/build && cargo bench --bench upstream_per_policy` (e2e/bench/README.md).

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
use vapcheck::cli::{BackendProvider, OfflineProvider, SchemaOptions, read_inputs};
use vapcheck::policy::{Backends, CheckOptions, Mode, check_policy};

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Upstream {
    policies: usize,
    rounds: u32,
    total_ns: u64,
    type_checking: Vec<Vec<Warning>>,
}

#[derive(serde::Deserialize, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
struct Warning {
    field_ref: String,
    warning: String,
}

fn same(mine: &[ExpressionWarning], theirs: &[Warning]) -> bool {
    mine.len() == theirs.len()
        && mine
            .iter()
            .zip(theirs)
            .all(|(m, t)| m.field_ref == t.field_ref && m.warning == t.warning)
}

fn main() {
    let rounds = u32::try_from(common::rounds(10)).expect("a sane number of rounds");
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let oracle = std::env::var_os("CHECKBENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("e2e/oracle/bin/checkbench"));
    assert!(
        oracle.is_file(),
        "{} not found: run e2e/oracle/build first",
        oracle.display()
    );

    let files = common::policy_corpus_files();
    let policies = read_inputs(&files, &mut std::io::empty()).expect("corpus reads");
    let mut input = tempfile::NamedTempFile::new().expect("temporary file");
    for p in &policies {
        serde_json::to_writer(&mut input, &p.policy).expect("policy as JSON");
        writeln!(input).expect("write");
    }
    input.flush().expect("flush");

    let out = Command::new(&oracle)
        .arg(format!("-rounds={rounds}"))
        .arg(input.path())
        .output()
        .expect("checkbench runs");
    assert!(
        out.status.success(),
        "checkbench failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let upstream: Upstream = serde_json::from_slice(&out.stdout).expect("checkbench's JSON");
    assert_eq!(
        (upstream.policies, upstream.rounds),
        (policies.len(), rounds)
    );

    let builtin = tempfile::tempdir().expect("temporary folder");
    vapcheck::schema::embedded::write_folder("1.37", builtin.path()).expect("built-in schemas");
    let factory = |options: &SchemaOptions, _: &[_]| vapcheck::cli::offline_backends(options);
    let loaded = OfflineProvider { factory: &factory }
        .load(&SchemaOptions {
            openapi: Some(builtin.path().to_path_buf()),
            ..SchemaOptions::default()
        })
        .expect("offline backends");
    let backends = Backends {
        rest_mapper: loaded.rest_mapper.as_ref(),
        discovery: loaded.discovery.as_deref(),
        schemas: loaded.schemas.as_ref(),
        checker: loaded.checker.as_ref(),
    };
    let strict = CheckOptions {
        mode: Mode::Strict,
        ..CheckOptions::default()
    };
    let first: Vec<_> = policies
        .iter()
        .map(|p| check_policy(&p.policy, &strict, &backends))
        .collect();
    let start = Instant::now();
    for _ in 0..rounds {
        for p in &policies {
            std::hint::black_box(check_policy(&p.policy, &strict, &backends));
        }
    }
    let ours_ns = start.elapsed().as_nanos() as f64;

    let differ: Vec<_> = policies
        .iter()
        .zip(&first)
        .zip(&upstream.type_checking)
        .filter(|((_, mine), theirs)| !same(&mine.expression_warnings, theirs))
        .map(|((p, _), _)| p.origin.to_string())
        .collect();

    let checks = (policies.len() as u32 * rounds) as f64;
    let theirs_us = upstream.total_ns as f64 / checks / 1e3;
    let ours_us = ours_ns / checks / 1e3;
    println!(
        "per-policy check, {} corpus policies x {rounds} rounds, warm (one untimed round first), {}",
        policies.len(),
        if cfg!(debug_assertions) {
            "debug build (a smoke run: the numbers are cargo bench's)"
        } else {
            "optimised build"
        }
    );
    println!("{:<44} {:>12} {:>14}", "", "total ms", "µs per policy");
    println!(
        "{:<44} {:>12.1} {:>14.1}",
        "upstream TypeChecker.Check (Go, KCM 1.37.1)",
        upstream.total_ns as f64 / 1e6,
        theirs_us
    );
    println!(
        "{:<44} {:>12.1} {:>14.1}",
        "vapcheck check_policy (strict)",
        ours_ns / 1e6,
        ours_us
    );
    println!(
        "{:<44} {:>11.1}x",
        "upstream / vapcheck",
        theirs_us / ours_us
    );
    println!(
        "typeChecking identical for {}/{} policies",
        policies.len() - differ.len(),
        policies.len()
    );
    assert!(
        differ.is_empty(),
        "the two sides computed different statuses for: {}",
        differ.join(", ")
    );
}
