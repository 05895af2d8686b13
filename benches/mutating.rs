//! Issue 12's benchmark: checking a MutatingAdmissionPolicy costs no more per expression than
//! checking a ValidatingAdmissionPolicy.
//!
//! Both corpora are checked in-process as `vapcheck check` does by default, with the same
//! backends: the built-in schemas of Kubernetes 1.37 (written once to a temporary folder,
//! converted by `crates/core/src/schema`), the same REST mapper and the same CEL checker. The MAP corpus is
//! `../shared/corpus/mutating` (the files that deserialise), the VAP corpus
//! `../shared/corpus/policies`.
//!
//! 1. For each mode the time of checking the whole corpus is divided by its number of
//!    expression×kind checks (Σ expressions × checked kinds, as `tests/it/mutating_findings.rs`
//!    counts them) and by its number of expressions; the ratio is MAP / VAP.
//! 2. Where the time goes: one more set of passes through a timing wrapper around the checker
//!    backend, which splits it into parsing (once per expression, whatever the number of
//!    kinds: per byte of expression text), the per-kind steps (environment, type check, cost,
//!    notes, guards, and for MAPs the literal checks of `crates/core/src/mutating/schema.rs`, per
//!    expression×kind), and the rest (kind selection, schema lookups, rendering, per policy).
//!
//! Run: `cargo bench --bench mutating`.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_all;
use vapcheck::cli::{SchemaOptions, mutating, read_inputs};
use vapcheck::mutating::{check_mutating_policy, mutation_sites};
use vapcheck::policy::Issues;
use vapcheck::policy::narrowing::Guards;
use vapcheck::policy::{
    Backends, CheckEnv, CheckOptions, CostOutcome, DiscoveryRestMapper, EnvRequest,
    ExpressionChecker, Mode, OutputType, ParsedExpr, SchemaType, check_policy, expression_sites,
};

/// Every MAP of the corpus that deserialises (as tests/it/mutating_findings.rs reads them).
fn read_maps(dir: &Path) -> Vec<MutatingAdmissionPolicy> {
    let files = common::files_under(dir, |p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".policy.yaml"))
    });
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("corpus file");
        let name = path.display().to_string();
        let Ok((_, others)) = read_all(&name, &text) else {
            continue;
        };
        let Ok(objects) = mutating::read(&others) else {
            continue;
        };
        out.extend(mutating::policies(&objects).map(|(_, p)| p.clone()));
    }
    out
}

/// What one pass over a corpus does and how long it takes.
struct Measured {
    policies: usize,
    expressions: usize,
    checks: usize,
    /// Mean time of one pass over the whole corpus.
    pass: Duration,
    passes: u32,
}

impl Measured {
    fn per_check_ns(&self) -> f64 {
        self.pass.as_secs_f64() * 1e9 / self.checks.max(1) as f64
    }
    fn per_expression_ns(&self) -> f64 {
        self.pass.as_secs_f64() * 1e9 / self.expressions.max(1) as f64
    }
}

/// Runs `pass` (which returns expressions and expression×kind checks) once to warm up, then
/// until at least 3 passes and 3 s.
fn measure(policies: usize, mut pass: impl FnMut() -> (usize, usize)) -> Measured {
    let (expressions, checks) = pass();
    let start = Instant::now();
    let mut passes = 0u32;
    while passes < 3 || start.elapsed() < Duration::from_secs(3) {
        let again = std::hint::black_box(pass());
        assert_eq!(again, (expressions, checks), "a pass is not deterministic");
        passes += 1;
    }
    Measured {
        policies,
        expressions,
        checks,
        pass: start.elapsed() / passes,
        passes,
    }
}

/// Time spent in each backend call (summed over passes).
#[derive(Default)]
struct Split {
    parse: Duration,
    parsed_bytes: usize,
    /// Environments, type checks, cost, notes, guards.
    per_kind: Duration,
    /// `patch_literals` plus nothing else: the literal model of MAP mutations.
    literals: Duration,
}

type Shared = Arc<Mutex<Split>>;

fn add(split: &Shared, f: impl FnOnce(&mut Split)) {
    if let Ok(mut s) = split.lock() {
        f(&mut s);
    }
}

/// The real checker, timed.
struct Timed<'a> {
    inner: &'a dyn ExpressionChecker,
    split: Shared,
}

struct TimedEnv {
    inner: Box<dyn CheckEnv>,
    split: Shared,
}

impl TimedEnv {
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        add(&self.split, |s| s.per_kind += start.elapsed());
        out
    }
}

impl CheckEnv for TimedEnv {
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, Issues> {
        self.time(|| self.inner.check(parsed))
    }
    fn declare_variable(&mut self, name: &str, ty: &OutputType) {
        self.inner.declare_variable(name, ty);
    }
    fn notes(&self, parsed: &ParsedExpr) -> Option<Issues> {
        self.time(|| self.inner.notes(parsed))
    }
    fn cost(&self, parsed: &ParsedExpr) -> Option<CostOutcome> {
        self.time(|| self.inner.cost(parsed))
    }
}

impl ExpressionChecker for Timed<'_> {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        let start = Instant::now();
        let out = self.inner.parse(expression);
        add(&self.split, |s| {
            s.parse += start.elapsed();
            s.parsed_bytes += expression.len();
        });
        out
    }
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        let start = Instant::now();
        let inner = self.inner.environment(request);
        add(&self.split, |s| s.per_kind += start.elapsed());
        Ok(Box::new(TimedEnv {
            inner: inner?,
            split: Arc::clone(&self.split),
        }))
    }
    fn guards(&self, parsed: &ParsedExpr) -> Option<Guards> {
        let start = Instant::now();
        let out = self.inner.guards(parsed);
        add(&self.split, |s| s.per_kind += start.elapsed());
        out
    }
    fn is_required_field(&self, object: &SchemaType, path: &[String]) -> bool {
        self.inner.is_required_field(object, path)
    }
    fn patch_literals(&self, parsed: &ParsedExpr) -> Option<vapcheck::policy::literal::Literals> {
        let start = Instant::now();
        let out = self.inner.patch_literals(parsed);
        add(&self.split, |s| s.literals += start.elapsed());
        out
    }
}

fn main() {
    let shared = common::shared_dir();
    let maps = read_maps(&shared.join("corpus/mutating"));
    let vap_files = common::files_under(&shared.join("corpus/policies"), |_| true);
    let vaps: Vec<ValidatingAdmissionPolicy> = read_inputs(&vap_files, &mut std::io::empty())
        .expect("the VAP corpus reads")
        .into_iter()
        .map(|p| p.policy)
        .collect();

    let dir = std::env::temp_dir().join(format!("vapcheck-bench-mutating-{}", std::process::id()));
    vapcheck::schema::embedded::write_folder("1.37", &dir).expect("built-in schemas");
    let options = SchemaOptions {
        openapi: Some(dir.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&dir), None, &[]).expect("discovery"));
    let backends = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    };
    // One pass over a corpus with `b`: (expressions, expression×kind checks).
    let map_pass = |b: &Backends<'_>, o: &CheckOptions| {
        maps.iter().fold((0, 0), |(e, c), p| {
            let sites = mutation_sites(p, o.mode).len();
            let status = check_mutating_policy(p, o, b);
            (e + sites, c + sites * status.checked_kinds.len())
        })
    };
    let vap_pass = |b: &Backends<'_>, o: &CheckOptions| {
        vaps.iter().fold((0, 0), |(e, c), p| {
            let sites = expression_sites(p, o.mode).len();
            let status = check_policy(p, o, b);
            (e + sites, c + sites * status.checked_kinds.len())
        })
    };

    println!(
        "schemas: built-in Kubernetes 1.37; MAP corpus {} policies, VAP corpus {} policies",
        maps.len(),
        vaps.len()
    );
    println!(
        "{:<9} {:<4} {:>8} {:>11} {:>7} {:>10} {:>14} {:>12}",
        "mode", "kind", "policies", "expressions", "checks", "ms/pass", "ns/expr×kind", "ns/expr"
    );
    let modes = [Mode::Strict, Mode::Extended];
    for mode in modes {
        let o = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        let map = measure(maps.len(), || map_pass(&backends, &o));
        let vap = measure(vaps.len(), || vap_pass(&backends, &o));
        for (kind, m) in [("MAP", &map), ("VAP", &vap)] {
            println!(
                "{:<9} {kind:<4} {:>8} {:>11} {:>7} {:>10.2} {:>14.0} {:>12.0}   ({} passes)",
                mode.to_string(),
                m.policies,
                m.expressions,
                m.checks,
                m.pass.as_secs_f64() * 1e3,
                m.per_check_ns(),
                m.per_expression_ns(),
                m.passes
            );
        }
        println!(
            "{:<9} MAP/VAP per expression×kind: {:.2}, per expression: {:.2}",
            mode.to_string(),
            map.per_check_ns() / vap.per_check_ns(),
            map.per_expression_ns() / vap.per_expression_ns()
        );
    }

    println!();
    println!(
        "where the time goes (5 timed passes; parse once per expression, per-kind steps per expression×kind)"
    );
    println!(
        "{:<9} {:<4} {:>10} {:>11} {:>11} {:>14} {:>11} {:>12} {:>12}",
        "mode",
        "kind",
        "ms/pass",
        "parse %",
        "ns/byte",
        "bytes/expr",
        "kinds/expr",
        "µs/expr×kind",
        "literals %"
    );
    for mode in modes {
        let o = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        for kind in ["MAP", "VAP"] {
            let split: Shared = Arc::default();
            let timed = Timed {
                inner: checker.as_ref(),
                split: Arc::clone(&split),
            };
            let b = Backends {
                checker: &timed,
                ..backends
            };
            let passes = 5u32;
            let start = Instant::now();
            let mut counts = (0, 0);
            for _ in 0..passes {
                counts = if kind == "MAP" {
                    map_pass(&b, &o)
                } else {
                    vap_pass(&b, &o)
                };
            }
            let total = start.elapsed();
            let (expressions, checks) = counts;
            let s = split.lock().map(|s| Split { ..*s }).unwrap_or_default();
            let pct = |d: Duration| 100.0 * d.as_secs_f64() / total.as_secs_f64();
            println!(
                "{:<9} {kind:<4} {:>10.2} {:>11.1} {:>11.0} {:>14.0} {:>11.2} {:>12.1} {:>12.1}",
                mode.to_string(),
                total.as_secs_f64() * 1e3 / f64::from(passes),
                pct(s.parse),
                s.parse.as_secs_f64() * 1e9 / s.parsed_bytes.max(1) as f64,
                s.parsed_bytes as f64 / f64::from(passes) / expressions.max(1) as f64,
                checks as f64 / expressions.max(1) as f64,
                (s.per_kind + s.literals).as_secs_f64() * 1e6
                    / f64::from(passes)
                    / checks.max(1) as f64,
                pct(s.literals)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
