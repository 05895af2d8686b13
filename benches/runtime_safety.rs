//! What the runtime-safety analysis (issue 31, docs/runtime-safety.md) adds to checking the
//! corpora: every ValidatingAdmissionPolicy and MutatingAdmissionPolicy of
//! `../shared/corpus/policies`, `../shared/corpus/mutating` and the binding sets of
//! `../shared/corpus/bindings`, through `check_policy` / `check_mutating_policy` in extended
//! mode (the default of `vapcheck check`) with the built-in schemas of the pinned release (the
//! witnesses exist for it only), with and without the analysis.
//!
//! The analysis is switched off by a wrapper around the real [`ExpressionChecker`] that answers
//! [`ExpressionChecker::access_chains`] with `None` (a backend without the analysis:
//! `runtime_check::findings` then returns nothing and looks at no witness). Both halves go
//! through the same wrapper, which delegates every other method, so the only difference is
//! the analysis. The rounds are paired as in `benches/cost_estimation.rs`: every policy is
//! checked without and with the analysis back to back (which goes first alternates from one
//! policy to the next and from one round to the next), each half's thread CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`) and wall-clock time summed over the policies, each round
//! starting with no cost estimates kept (`engine::forget_cost_memos`, as one `vapcheck check`
//! process). Prints each round's ratio (with / without) and their median, the number this bench
//! reports, against the issue's target (at most 5%).
//!
//! Run: `cargo bench --bench runtime_safety` (`VAPCHECK_BENCH_ROUNDS=<n>` rounds, default 11;
//! or `-- <n>`). Under `cargo test --bench runtime_safety` (a debug build, `make bench-smoke`)
//! it runs one round and judges nothing.

mod common;
use common::{Took, thread_cpu};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::{InputObject, read_all};
use vapcheck::cli::{SchemaOptions, mutating};
use vapcheck::mutating::check_mutating_policy;
use vapcheck::policy::narrowing::Guards;
use vapcheck::policy::runtime::{Chain, KindWitnesses, Seg};
use vapcheck::policy::{
    Backends, CheckEnv, CheckOptions, DiscoveryRestMapper, EnvRequest, ExpressionChecker, Gvk,
    Issues, Mode, ParsedExpr, PolicyStatus, SchemaType, check_policy,
};

/// The real checker, with or without the runtime-safety analysis.
struct Switch<'a> {
    inner: &'a dyn ExpressionChecker,
    analyse: bool,
}

// Every method is delegated (a method left to its default would make the check do less work
// than the real one), but `access_chains` when the analysis is off.
impl ExpressionChecker for Switch<'_> {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        self.inner.parse(expression)
    }
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        self.inner.environment(request)
    }
    fn guards(&self, parsed: &ParsedExpr) -> Option<Guards> {
        self.inner.guards(parsed)
    }
    fn is_required_field(&self, object: &SchemaType, path: &[String]) -> bool {
        self.inner.is_required_field(object, path)
    }
    fn is_absent_field(&self, object: &SchemaType, path: &[String]) -> bool {
        self.inner.is_absent_field(object, path)
    }
    fn access_chains(
        &self,
        site: &ParsedExpr,
        conditions: &[(&ParsedExpr, bool)],
        variables: &[(&str, &ParsedExpr)],
    ) -> Option<Vec<Chain>> {
        if !self.analyse {
            return None;
        }
        self.inner.access_chains(site, conditions, variables)
    }
    fn witnesses(&self, gvk: &Gvk) -> Option<&'static KindWitnesses> {
        self.inner.witnesses(gvk)
    }
    fn zero_value(&self, object: &SchemaType, path: &[Seg]) -> Option<&'static str> {
        self.inner.zero_value(object, path)
    }
    fn fields_at(&self, object: &SchemaType, path: &[String]) -> Option<Vec<(String, String)>> {
        self.inner.fields_at(object, path)
    }
    fn patch_literals(&self, parsed: &ParsedExpr) -> Option<vapcheck::policy::literal::Literals> {
        self.inner.patch_literals(parsed)
    }
}

/// One policy of the corpora.
enum Policy {
    Validating(ValidatingAdmissionPolicy),
    Mutating(MutatingAdmissionPolicy),
}

/// The YAML and JSON files under `dir` (any depth).
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    common::files_under(dir, |p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
    })
}

/// Every policy of `files`, read one file at a time (a file that does not read is left out, as
/// `vapcheck check` reports it and checks nothing of it).
fn read_policies(files: &[PathBuf]) -> Vec<Policy> {
    let mut out = Vec::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok((objects, others)) = read_all(&path.display().to_string(), &text) else {
            continue;
        };
        out.extend(objects.into_iter().filter_map(|o| match o {
            InputObject::Policy(p) => Some(Policy::Validating(p.policy)),
            InputObject::Binding(_) => None,
        }));
        if let Ok(maps) = mutating::read(&others) {
            out.extend(mutating::policies(&maps).map(|(_, p)| Policy::Mutating(p.clone())));
        }
    }
    out
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let shared = common::shared_dir();
    let mut files = yaml_files(&shared.join("corpus/policies"));
    files.extend(yaml_files(&shared.join("corpus/mutating")));
    files.extend(yaml_files(&shared.join("corpus/bindings")));
    let policies = read_policies(&files);
    let rounds = common::rounds(11);
    let maps = policies
        .iter()
        .filter(|p| matches!(p, Policy::Mutating(_)))
        .count();

    let dir = std::env::temp_dir().join(format!("vapcheck-bench-runtime-{}", std::process::id()));
    vapcheck::schema::embedded::write_folder("1.37", &dir).expect("built-in schemas");
    let options = SchemaOptions {
        openapi: Some(dir.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&dir), None, &[]).expect("discovery"));
    let with = Switch {
        inner: checker.as_ref(),
        analyse: true,
    };
    let without = Switch {
        inner: checker.as_ref(),
        analyse: false,
    };
    let backends = |checker| Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker,
    };
    let (b_with, b_without) = (backends(&with), backends(&without));
    let options = CheckOptions {
        mode: Mode::Extended,
        ..CheckOptions::default()
    };
    // One policy's check, timed; returns its number of runtime findings, to prove what ran.
    let check = |p: &Policy, b: &Backends<'_>| -> (Took, usize) {
        let start = Instant::now();
        let cpu = thread_cpu();
        let status: PolicyStatus = match p {
            Policy::Validating(p) => check_policy(p, &options, b),
            Policy::Mutating(p) => check_mutating_policy(p, &options, b),
        };
        let took = Took {
            wall: start.elapsed(),
            cpu: thread_cpu().saturating_sub(cpu),
        };
        (took, std::hint::black_box(&status).runtime.len())
    };
    let run = |b: &Backends<'_>| -> usize { policies.iter().map(|p| check(p, b).1).sum() };

    println!(
        "corpora: {} files, {} policies ({} validating, {maps} mutating); schemas: built-in \
         Kubernetes 1.37; {rounds} rounds; load average before: {}",
        files.len(),
        policies.len(),
        policies.len() - maps,
        loadavg()
    );
    // Warm-up (schema conversion caches, allocator), and what each half finds.
    let found = run(&b_with);
    let none = run(&b_without);
    println!("runtime findings per corpus check: {found} with the analysis, {none} without");
    assert!(found > 0, "the analysis found nothing on the corpora");
    assert_eq!(none, 0, "the analysis was not switched off");

    let (mut t_with, mut t_without) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (mut w, mut wo) = (Took::default(), Took::default());
        vapcheck::engine::forget_cost_memos();
        for (i, p) in policies.iter().enumerate() {
            let first_with = (i + round) % 2 == 0;
            for half in [first_with, !first_with] {
                if half {
                    w += check(p, &b_with).0;
                } else {
                    wo += check(p, &b_without).0;
                }
            }
        }
        t_with.push(w);
        t_without.push(wo);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let report = |what: &str, pick: fn(&Took) -> Duration| -> f64 {
        let all = |v: &[Took]| {
            v.iter()
                .map(|t| format!("{:.1}", ms(pick(t))))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let median = |v: &[Took]| {
            let mut d: Vec<Duration> = v.iter().map(pick).collect();
            d.sort();
            ms(d[d.len() / 2])
        };
        println!(
            "{what:<4} without the analysis: median {:>8.1} ms  [{}]",
            median(&t_without),
            all(&t_without)
        );
        println!(
            "{what:<4} with the analysis:    median {:>8.1} ms  [{}]",
            median(&t_with),
            all(&t_with)
        );
        let mut ratios: Vec<f64> = t_with
            .iter()
            .zip(&t_without)
            .map(|(a, b)| pick(a).as_secs_f64() / pick(b).as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "{what:<4} ratio of each round (sorted): [{}]",
            ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        ratios[ratios.len() / 2]
    };
    let cpu_ratio = report("cpu", |t| t.cpu);
    let wall_ratio = report("wall", |t| t.wall);
    println!(
        "runtime safety adds {:+.1}% CPU time (median ratio {cpu_ratio:.3}), {:+.1}% wall-clock \
         time (median ratio {wall_ratio:.3}); load average after: {}",
        (cpu_ratio - 1.0) * 100.0,
        (wall_ratio - 1.0) * 100.0,
        loadavg()
    );
    // Issue 31's target: the analysis adds at most 5% to checking the corpus. Judged on an
    // optimised build only (`cargo bench`), not on the debug smoke run.
    println!(
        "target: the analysis adds at most 5% (CPU median ratio at most 1.050): {}",
        if cfg!(debug_assertions) {
            "not judged (a debug build)"
        } else if cpu_ratio <= 1.05 {
            "met in this run"
        } else {
            "NOT met in this run"
        }
    );
    let _ = std::fs::remove_dir_all(&dir);
}
