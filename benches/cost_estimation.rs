//! What cost estimation (docs/cost.md) adds to checking the whole corpus: every policy of
//! `../shared/corpus/policies` through `check_policy` in extended mode with the real checker
//! and the offline schemas of `../shared/openapi/v1.35` (as `benches/policy_layer.rs`), once
//! with the estimates and once without, alternating, several rounds. Prints the median time of
//! each, and the ratio: of the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), which a shared,
//! loaded machine disturbs far less than the wall-clock time, also printed.
//!
//! Estimation is switched off by a wrapper around the real [`ExpressionChecker`] whose
//! environments answer [`CheckEnv::cost`] with `None` (as a backend that does not estimate);
//! both runs go through the same wrapper, which delegates every other method, so the only
//! difference is the estimate (and the policy layer's sums and findings over it).
//!
//! Run: `cargo bench --bench cost_estimation` (`VAPCHECK_BENCH_ROUNDS=<n>` rounds, default 7).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::{
    Backends, CheckEnv, CheckOptions, CostOutcome, DiscoveryRestMapper, EnvRequest,
    ExpressionChecker, Mode, OutputType, ParsedExpr, SchemaType, check_policy,
};

/// The real checker, with or without cost estimates.
struct Switch<'a> {
    inner: &'a dyn ExpressionChecker,
    estimate: bool,
}

struct SwitchEnv {
    inner: Box<dyn CheckEnv>,
    estimate: bool,
}

// Every method of both traits is delegated (a method left to its default would make one run
// do less work than the other).
impl ExpressionChecker for Switch<'_> {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, String> {
        self.inner.parse(expression)
    }
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        Ok(Box::new(SwitchEnv {
            inner: self.inner.environment(request)?,
            estimate: self.estimate,
        }))
    }
    fn guards(&self, parsed: &ParsedExpr) -> Option<vapcheck::policy::narrowing::Guards> {
        self.inner.guards(parsed)
    }
    fn is_required_field(&self, object: &SchemaType, path: &[String]) -> bool {
        self.inner.is_required_field(object, path)
    }
    fn patch_literals(&self, parsed: &ParsedExpr) -> Option<vapcheck::mutating::literal::Literals> {
        self.inner.patch_literals(parsed)
    }
}

impl CheckEnv for SwitchEnv {
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, String> {
        self.inner.check(parsed)
    }
    fn declare_variable(&mut self, name: &str, ty: &OutputType) {
        self.inner.declare_variable(name, ty);
    }
    fn notes(&self, parsed: &ParsedExpr) -> Option<String> {
        self.inner.notes(parsed)
    }
    fn cost(&self, parsed: &ParsedExpr) -> Option<CostOutcome> {
        if !self.estimate {
            return None;
        }
        let start = Instant::now();
        let out = self.inner.cost(parsed);
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        IN_COST.fetch_add(nanos, Ordering::Relaxed);
        out
    }
}

/// Time spent inside the backend's [`CheckEnv::cost`] (the estimates themselves; the rest of
/// the difference is the policy layer's sums and findings).
static IN_COST: AtomicU64 = AtomicU64::new(0);

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Wall-clock and CPU time of one run.
#[derive(Clone, Copy)]
struct Took {
    wall: Duration,
    cpu: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let shared = vapcheck::schema::shared_dir();
    let files = common::policy_corpus_files();
    let policies = read_inputs(&files, &mut std::io::empty()).expect("corpus reads");
    let rounds = common::rounds(7);

    let groups =
        offline_discovery(Some(&shared.join("openapi/v1.35")), &[]).expect("openapi folder");
    let mapper = DiscoveryRestMapper::new(groups);
    let options = vapcheck::cli::SchemaOptions {
        openapi: Some(shared.join("openapi/v1.35")),
        ..vapcheck::cli::SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::engine::offline_backends(&options).expect("backends");
    let with = Switch {
        inner: checker.as_ref(),
        estimate: true,
    };
    let without = Switch {
        inner: checker.as_ref(),
        estimate: false,
    };
    let options = CheckOptions {
        mode: Mode::Extended,
        ..CheckOptions::default()
    };
    // One corpus check; returns the number of expression estimates, to prove what ran.
    let run = |checker: &dyn ExpressionChecker| -> (Took, usize) {
        let b = Backends {
            rest_mapper: &mapper,
            discovery: Some(&mapper),
            schemas: schemas.as_ref(),
            checker,
        };
        let start = Instant::now();
        let cpu = thread_cpu();
        let estimates: usize = policies
            .iter()
            .map(|p| {
                let status = check_policy(&p.policy, &options, &b);
                std::hint::black_box(&status);
                status
                    .cost
                    .expressions
                    .iter()
                    .map(|e| e.gvks.len())
                    .sum::<usize>()
            })
            .sum();
        let took = Took {
            wall: start.elapsed(),
            cpu: thread_cpu().saturating_sub(cpu),
        };
        (took, estimates)
    };

    println!(
        "corpus: {} files, {} policies; {rounds} rounds; load average before: {}",
        files.len(),
        policies.len(),
        loadavg()
    );
    // Warm-up (schema conversion caches, allocator).
    let (_, with_estimates) = run(&with);
    let (_, without_estimates) = run(&without);
    println!(
        "estimates (expression × kind) per corpus check: {with_estimates} with, {without_estimates} without"
    );
    assert!(with_estimates > 0, "the corpus check made no estimates");
    assert_eq!(without_estimates, 0, "estimation was not switched off");

    let (mut t_with, mut t_without) = (Vec::new(), Vec::new());
    IN_COST.store(0, Ordering::Relaxed);
    for round in 0..rounds {
        // Alternate the order so that a load change does not favour one side.
        if round % 2 == 0 {
            t_with.push(run(&with).0);
            t_without.push(run(&without).0);
        } else {
            t_without.push(run(&without).0);
            t_with.push(run(&with).0);
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let report = |what: &str, pick: fn(&Took) -> Duration| -> f64 {
        let all = |v: &[Took]| {
            v.iter()
                .map(|t| format!("{:.1}", ms(pick(t))))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let wo = ms(median(t_without.iter().map(pick).collect()));
        let w = ms(median(t_with.iter().map(pick).collect()));
        println!(
            "{what:<4} without estimates: median {wo:>8.1} ms  [{}]",
            all(&t_without)
        );
        println!(
            "{what:<4} with estimates:    median {w:>8.1} ms  [{}]",
            all(&t_with)
        );
        w / wo
    };
    let cpu_ratio = report("cpu", |t| t.cpu);
    let wall_ratio = report("wall", |t| t.wall);
    println!(
        "inside CheckEnv::cost: {:.1} ms wall per corpus check (mean)",
        IN_COST.load(Ordering::Relaxed) as f64 / 1e6 / rounds as f64
    );
    println!(
        "estimation adds {:+.1}% CPU time (ratio {cpu_ratio:.3}), {:+.1}% wall-clock time \
         (ratio {wall_ratio:.3}); load average after: {}",
        (cpu_ratio - 1.0) * 100.0,
        (wall_ratio - 1.0) * 100.0,
        loadavg()
    );
}
