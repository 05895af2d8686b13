//! Parse / check / parse+check timings of the CEL expressions of the policy corpus
//! (`shared/corpus/policies`). Run with `cargo bench --bench cel`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vapcheck::cel::{Env, EnvBuilder, EnvOptions, StructTypes, Type, check, parse};

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

fn collect_expressions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expression" | "messageExpression", serde_json::Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => collect_expressions(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_expressions(x, out)),
        _ => {}
    }
}

fn env() -> Env {
    let base = Arc::new(EnvBuilder::standard(EnvOptions::kubernetes()).build());
    let mut b = Env::extend(&base);
    for n in [
        "object",
        "oldObject",
        "params",
        "namespaceObject",
        "variables",
        "authorizer",
    ] {
        b.add_variable(n, Type::dyn_type()).expect("variable");
    }
    b.add_variable("request", Type::object("kubernetes.AdmissionRequest"))
        .expect("variable");
    b.add_provider(Arc::new(StructTypes::new().with_type(
        "kubernetes.AdmissionRequest",
        [
            ("operation", Type::string()),
            ("name", Type::string()),
            ("namespace", Type::string()),
            ("userInfo", Type::map(Type::string(), Type::dyn_type())),
        ],
    )));
    b.build()
}

fn time<F: FnMut()>(iterations: usize, mut f: F) -> Duration {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed()
}

fn main() {
    let mut files = Vec::new();
    collect_files(&common::shared_dir().join("corpus/policies"), &mut files);
    files.sort();
    let mut exprs = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let Ok(docs) = serde_saphyr::from_multiple::<serde_json::Value>(&text) else {
            continue;
        };
        for d in &docs {
            collect_expressions(d, &mut exprs);
        }
    }
    let env = env();
    let parsed: Vec<_> = exprs.iter().filter_map(|e| parse(e).ok()).collect();
    let ok = parsed.iter().filter(|p| check(&env, p).is_ok()).count();
    println!(
        "corpus: {} files, {} expressions, {} parse, {} check cleanly against the bench env",
        files.len(),
        exprs.len(),
        parsed.len(),
        ok
    );
    if exprs.is_empty() {
        return;
    }
    let rounds = 20;
    let n = exprs.len() * rounds;
    let t_parse = time(rounds, || {
        for e in &exprs {
            std::hint::black_box(parse(e).is_ok());
        }
    });
    let m = parsed.len() * rounds;
    let t_check = time(rounds, || {
        for p in &parsed {
            std::hint::black_box(check(&env, p).is_ok());
        }
    });
    let t_both = time(rounds, || {
        for e in &exprs {
            if let Ok(p) = parse(e) {
                std::hint::black_box(check(&env, &p).is_ok());
            }
        }
    });
    let per = |d: Duration, k: usize| d.as_secs_f64() * 1e6 / k.max(1) as f64;
    println!(
        "parse:        {:8.2} µs/expression ({n} runs)",
        per(t_parse, n)
    );
    println!(
        "check:        {:8.2} µs/expression ({m} runs)",
        per(t_check, m)
    );
    println!(
        "parse+check:  {:8.2} µs/expression ({n} runs)",
        per(t_both, n)
    );
}
