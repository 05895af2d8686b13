//! Kubernetes environment timings: building the base environment of each version (uncached),
//! the cached lookup, the per-kind overlay, and checking every expression of the policy corpus
//! (`shared/corpus/policies`) with `object`, `oldObject` and `params` as `dyn`.
//! Run with `cargo bench --bench k8s_env`.

mod common;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vapcheck::k8s_env::{
    KindDecls, KubeVersion, Mode, Params, PolicyEnv, Target, base_env, build_base_env, compile,
};

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// One policy: whether it has params, its variables and its other expressions.
struct Policy {
    has_params: bool,
    variables: Vec<(String, String)>,
    expressions: Vec<String>,
}

fn load_corpus() -> Vec<Policy> {
    let mut files = Vec::new();
    collect_files(&common::shared_dir().join("corpus/policies"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(docs) = serde_saphyr::from_multiple::<serde_json::Value>(&text) else {
            continue;
        };
        for d in docs
            .iter()
            .filter(|d| d["kind"] == "ValidatingAdmissionPolicy")
        {
            let spec = &d["spec"];
            let arr = |k: &str| spec[k].as_array().cloned().unwrap_or_default();
            let s = |v: &serde_json::Value, k: &str| v[k].as_str().map(str::to_string);
            let variables = arr("variables")
                .iter()
                .filter_map(|v| Some((s(v, "name")?, s(v, "expression")?)))
                .collect();
            let mut expressions = Vec::new();
            for v in arr("validations") {
                expressions.extend(s(&v, "expression"));
                expressions.extend(s(&v, "messageExpression").filter(|e| !e.is_empty()));
            }
            for v in arr("matchConditions") {
                expressions.extend(s(&v, "expression"));
            }
            for v in arr("auditAnnotations") {
                expressions.extend(s(&v, "valueExpression"));
            }
            out.push(Policy {
                has_params: !spec["paramKind"].is_null(),
                variables,
                expressions,
            });
        }
    }
    out
}

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n.max(1) as f64
}

fn main() {
    // Base environment construction, uncached, for every supported version.
    let rounds = 20;
    for minor in KubeVersion::MIN.minor()..=KubeVersion::PINNED.minor() {
        let v = KubeVersion::new(minor).expect("supported");
        let start = Instant::now();
        for _ in 0..rounds {
            black_box(build_base_env(v).expect("builds"));
        }
        println!(
            "build base env {v}:        {:8.1} µs (uncached, {rounds} runs)",
            per(start.elapsed(), rounds)
        );
    }
    let target = Target::upstream();
    let start = Instant::now();
    black_box(base_env(target).expect("builds"));
    println!(
        "first base_env(1.37):       {:8.1} µs (builds and caches)",
        per(start.elapsed(), 1)
    );
    let n = 100_000;
    let start = Instant::now();
    for _ in 0..n {
        black_box(base_env(target).expect("cached"));
    }
    println!(
        "cached base_env(1.37):      {:8.3} µs ({n} runs)",
        per(start.elapsed(), n)
    );
    let start = Instant::now();
    for _ in 0..n {
        black_box(PolicyEnv::new(target, KindDecls::untyped(Params::Untyped)).expect("env"));
    }
    println!(
        "per-kind overlay:           {:8.3} µs ({n} runs)",
        per(start.elapsed(), n)
    );

    // Corpus: per policy, one overlay, its variables, then every expression.
    let corpus = load_corpus();
    let total: usize = corpus
        .iter()
        .map(|p| p.variables.len() + p.expressions.len())
        .sum();
    for mode in [Mode::Upstream, Mode::Extended] {
        let target = Target {
            version: KubeVersion::PINNED,
            mode,
        };
        let rounds = 20;
        let mut ok = 0;
        let start = Instant::now();
        for _ in 0..rounds {
            ok = 0;
            for p in &corpus {
                let params = if p.has_params {
                    Params::Untyped
                } else {
                    Params::Absent
                };
                let mut env =
                    PolicyEnv::new(target, KindDecls::untyped(params)).expect("env builds");
                for (name, expr) in &p.variables {
                    ok += usize::from(env.add_variable(name, expr).result.is_ok());
                }
                for e in &p.expressions {
                    match env.compile(e) {
                        Ok(c) => {
                            ok += 1;
                            black_box(env.version_warnings(&c));
                        }
                        Err(i) => {
                            black_box(i);
                        }
                    }
                }
            }
        }
        println!(
            "corpus {mode:?}: {} policies, {total} expressions ({ok} ok): {:8.2} µs/expression incl. overlays ({} runs)",
            corpus.len(),
            per(start.elapsed(), total * rounds),
            total * rounds
        );
    }
    // Check time alone, against one shared overlay.
    let env = PolicyEnv::new(Target::upstream(), KindDecls::untyped(Params::Untyped))
        .expect("env builds");
    let exprs: Vec<&String> = corpus.iter().flat_map(|p| &p.expressions).collect();
    let rounds = 20;
    let start = Instant::now();
    for _ in 0..rounds {
        for e in &exprs {
            black_box(compile(env.env(), e).is_ok());
        }
    }
    println!(
        "compile (parse+check+validate) only: {:8.2} µs/expression ({} runs)",
        per(start.elapsed(), exprs.len() * rounds),
        exprs.len() * rounds
    );
    let parsed: Vec<_> = exprs
        .iter()
        .filter_map(|e| vapcheck::cel::parse(e).ok())
        .collect();
    let start = Instant::now();
    for _ in 0..rounds {
        for e in &exprs {
            black_box(vapcheck::cel::parse(e).is_ok());
        }
    }
    println!(
        "  of which parse:                    {:8.2} µs/expression",
        per(start.elapsed(), exprs.len() * rounds)
    );
    let start = Instant::now();
    for _ in 0..rounds {
        for p in &parsed {
            black_box(vapcheck::cel::check(env.env(), p).is_ok());
        }
    }
    println!(
        "  check (+built-in validators) only: {:8.2} µs/expression",
        per(start.elapsed(), parsed.len() * rounds)
    );
}
