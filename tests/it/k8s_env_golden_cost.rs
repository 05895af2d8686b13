//! Replays the oracle's golden file `tests/golden/upstream-cost-1.37.jsonl`: cel-go's
//! `Env.EstimateCost` with Kubernetes' `library.CostEstimator` (object, oldObject and params
//! `dyn`, no size estimator, as kube-apiserver compiles admission policies) for the
//! hand-written expressions of `e2e/oracle/testdata/cost_exprs.py`, every expression of the
//! shared corpus and every distinct expression of the cel-spec conformance suite as a policy
//! expression (ids `cel-spec <file>/<section>/<test>`). vapcheck's min/max must be identical,
//! and an expression cel-go does not compile must not compile for vapcheck either (and the
//! other way round); the known differing classes are listed in `KNOWN_DIFFERENCES`
//! (docs/cost.md) and counted exactly.

use std::collections::BTreeMap;

use vapcheck::k8s_env::cost::estimate_cost;
use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};

/// Expected number of golden entries, of entries whose expression does not compile (for
/// both), and of identical estimates. Change only together with docs/cost.md.
const ENTRIES: usize = 3127;
const NOT_COMPILING: usize = 847;
const IDENTICAL: usize = 2280;
/// Of those, the cel-spec conformance expressions (`e2e/oracle/testdata/cost.py` prints why
/// the ones that do not compile do not) and those of them that compile.
const CONFORMANCE_ENTRIES: usize = 2192;
const CONFORMANCE_COMPILING: usize = 1347;

/// The classes of known differences (reason -> count), see docs/cost.md.
/// None: every estimate is identical. A future difference must be listed here by class
/// (and in docs/cost.md), never skipped.
const KNOWN_DIFFERENCES: &[(&str, usize)] = &[];

fn golden() -> Vec<serde_json::Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/upstream-cost-1.37.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("golden file is committed");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

#[test]
fn cost_estimates_match_cel_go() {
    let cases = golden();
    let mut identical = 0;
    let mut not_compiling = 0;
    let (mut conformance, mut conformance_compiling, mut conformance_identical) = (0, 0, 0);
    let mut differences: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for case in &cases {
        let input = &case["input"];
        let output = &case["output"];
        let id = input["id"].as_str().unwrap_or("?");
        let expr = input["expr"].as_str().expect("expr");
        let is_conformance = id.starts_with("cel-spec ");
        conformance += usize::from(is_conformance);
        let params = if input.get("paramKind").is_some() {
            Params::Untyped
        } else {
            Params::Absent
        };
        let mut env =
            PolicyEnv::new(Target::upstream(), KindDecls::untyped(params)).expect("policy env");
        for v in input["variables"].as_array().into_iter().flatten() {
            env.add_variable(
                v["name"].as_str().unwrap_or(""),
                v["expression"].as_str().unwrap_or(""),
            );
        }
        let compiled = env.compile(expr);
        if output.get("issues").is_some() {
            assert!(
                compiled.is_err(),
                "{id}: cel-go rejects {expr:?}, vapcheck compiles it"
            );
            not_compiling += 1;
            continue;
        }
        let compiled = compiled.unwrap_or_else(|e| {
            panic!("{id}: {expr:?} does not compile: {}", e.to_display_string())
        });
        conformance_compiling += usize::from(is_conformance);
        let want = (
            output["min"].as_u64().expect("min"),
            output["max"].as_u64().expect("max"),
        );
        match estimate_cost(env.env(), &compiled.parsed, &compiled.types) {
            Ok(got) if (got.min, got.max) == want => {
                identical += 1;
                conformance_identical += usize::from(is_conformance);
            }
            Ok(got) => differences
                .entry("different estimate".into())
                .or_default()
                .push(format!(
                    "{id}: {expr:?}: cel-go {want:?}, vapcheck ({}, {})",
                    got.min, got.max
                )),
            Err(u) => differences
                .entry(u.to_string())
                .or_default()
                .push(format!("{id}: {expr:?}: cel-go {want:?}")),
        }
    }
    let compared = cases.len() - not_compiling;
    println!("cost: {identical}/{compared} identical ({not_compiling} entries do not compile)");
    println!(
        "cost: of which cel-spec conformance: {conformance_identical}/{conformance_compiling} \
         identical ({} of {conformance} distinct expressions do not compile)",
        conformance - conformance_compiling
    );
    for (class, entries) in &differences {
        println!("  {class}: {}", entries.len());
        for e in entries.iter().take(20) {
            println!("    {e}");
        }
    }
    let classes: Vec<(&str, usize)> = differences
        .iter()
        .map(|(k, v)| (k.as_str(), v.len()))
        .collect();
    assert_eq!(cases.len(), ENTRIES, "golden entries");
    assert_eq!(not_compiling, NOT_COMPILING, "entries that do not compile");
    assert_eq!(
        conformance, CONFORMANCE_ENTRIES,
        "cel-spec conformance entries"
    );
    assert_eq!(
        conformance_compiling, CONFORMANCE_COMPILING,
        "cel-spec conformance entries that compile"
    );
    assert_eq!(classes, KNOWN_DIFFERENCES, "differing classes");
    assert_eq!(identical, IDENTICAL, "identical estimates");
}
