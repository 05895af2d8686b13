//! Replays the oracle's golden file `tests/golden/upstream-cost-typed-1.37.jsonl`: cel-go's
//! `Env.EstimateCost` with Kubernetes' `library.CostEstimator` whose size estimator reads
//! upstream's `DeclType.MaxElements` (apiextensions-apiserver's `sizeEstimator` rooted at
//! `object`/`oldObject`/`params`), with the kinds typed by `common.SchemaDeclType` from the
//! published OpenAPI v3 documents of Kubernetes 1.37.1 plus the fixture document
//! `tests/fixtures/cost-openapi` (see docs/cost.md). vapcheck types the same documents (its
//! embedded 1.37 schemas and the fixture) with `crates/core/src/schema/` and estimates with
//! `k8s_env::cost::estimate_cost_sized`; every min and max must be identical.

use std::sync::Arc;

use vapcheck::engine::{RootTypes, cel_type};
use vapcheck::k8s_env::cost::{SchemaSizeEstimator, estimate_cost_sized};
use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};
use vapcheck::schema::{FilesConfig, FilesSource, GroupVersionKind, SchemaSource};

/// Expected counts: golden entries, entries whose object kind has no schema (both sides), whose
/// expression does not compile (both sides), and identical estimates. Change only together with
/// docs/cost.md.
const ENTRIES: usize = 1972;
const NO_SCHEMA: usize = 1;
const NOT_COMPILING: usize = 778;
const IDENTICAL: usize = 1193;

fn gvk_of(s: &str) -> GroupVersionKind {
    let (gv, kind) = s.split_once(", Kind=").expect("gvk with Kind=");
    let (group, version) = gv.split_once('/').expect("gvk with /");
    GroupVersionKind::new(group, version, kind)
}

/// The embedded Kubernetes 1.37 documents plus the fixture document, laid out for `--openapi`.
fn source() -> (tempfile::TempDir, FilesSource) {
    let dir = tempfile::tempdir().expect("temp dir");
    vapcheck::schema::embedded::write_folder("1.37", dir.path()).expect("embedded 1.37");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/cost-openapi/apis__cost.vapcheck.dev__v1_openapi.json"
    );
    let target = dir.path().join("apis/cost.vapcheck.dev");
    std::fs::create_dir_all(&target).expect("mkdir");
    std::fs::copy(fixture, target.join("v1.json")).expect("copy fixture");
    let source = FilesSource::load(&FilesConfig {
        openapi_dir: Some(dir.path().to_path_buf()),
        ..FilesConfig::default()
    })
    .expect("documents load");
    (dir, source)
}

/// The committed golden entries (cel-go's estimates), in file order.
fn golden_cases() -> Vec<serde_json::Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/upstream-cost-typed-1.37.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("golden file is committed");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

#[test]
fn typed_cost_estimates_match_cel_go() {
    let cases = golden_cases();
    let (_dir, source) = source();
    let (mut identical, mut no_schema, mut not_compiling) = (0, 0, 0);
    let mut differences = Vec::new();
    for case in &cases {
        let input = &case["input"];
        let output = &case["output"];
        let id = input["id"].as_str().unwrap_or("?");
        let expr = input["expr"].as_str().expect("expr");
        let gvk = gvk_of(input["gvk"].as_str().expect("gvk"));
        let root = match source.resolve(&gvk) {
            Ok(r) => r,
            Err(e) => {
                assert_eq!(
                    output["schemaFound"], false,
                    "{id}: vapcheck has no schema ({e}), upstream has one"
                );
                no_schema += 1;
                continue;
            }
        };
        assert_eq!(output["schemaFound"], true, "{id}: schema found");
        assert_eq!(
            output.get("objectDyn").is_some(),
            !root.is_typed(),
            "{id}: object typed"
        );
        let mut roots = vec![root.clone()];
        let object = root.is_typed().then(|| cel_type(root.root()));
        let mut params_root = None;
        let params = match input["paramsGvk"].as_str() {
            None => Params::Absent,
            Some(g) => match source.resolve(&gvk_of(g)) {
                Ok(r) if r.is_typed() => {
                    let t = cel_type(r.root());
                    params_root = Some(r.clone());
                    roots.push(r);
                    Params::Typed(t)
                }
                _ => Params::Untyped,
            },
        };
        let mut env = PolicyEnv::new(
            Target::upstream(),
            KindDecls {
                object,
                params,
                types: Some(Arc::new(RootTypes::new(roots))),
                patch_types: false,
            },
        )
        .expect("env builds");
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
        // With the recorder and the path memo on, as `vapcheck check` runs it: neither
        // changes any estimate.
        let recorded = std::cell::RefCell::new(Vec::new());
        let memo = std::cell::RefCell::default();
        let sizes = SchemaSizeEstimator {
            object: root.is_typed().then(|| root.sizes()).flatten(),
            params: params_root.as_ref().and_then(|r| r.sizes()),
            record: Some(&recorded),
            memo: Some(&memo),
        };
        let want = (
            output["min"].as_u64().expect("min"),
            output["max"].as_u64().expect("max"),
        );
        match estimate_cost_sized(env.env(), &compiled.parsed, &compiled.types, &sizes) {
            Ok(got) if (got.min, got.max) == want => identical += 1,
            Ok(got) => differences.push(format!(
                "{id}: {expr:?}: cel-go {want:?}, vapcheck ({}, {})",
                got.min, got.max
            )),
            Err(u) => differences.push(format!("{id}: {expr:?}: cel-go {want:?}, vapcheck {u}")),
        }
    }
    let compared = cases.len() - no_schema - not_compiling;
    println!(
        "typed cost: {identical}/{compared} identical ({no_schema} entries without a schema, \
         {not_compiling} do not compile)"
    );
    for d in differences.iter().take(40) {
        println!("  {d}");
    }
    assert!(
        differences.is_empty(),
        "{} estimates differ",
        differences.len()
    );
    assert_eq!(cases.len(), ENTRIES, "golden entries");
    assert_eq!(no_schema, NO_SCHEMA, "entries without a schema");
    assert_eq!(not_compiling, NOT_COMPILING, "entries that do not compile");
    assert_eq!(identical, IDENTICAL, "identical estimates");
}

/// The same golden estimates through the backend the policy layer uses
/// (`vapcheck::engine::KubeChecker`, `CheckEnv::cost`), one parse per expression checked for
/// each of its kinds in turn as `check_policy` does: the backend reuses the estimate of an
/// earlier kind when it is necessarily the same (docs/cost.md). Every min and max must still
/// be cel-go's, and the reasons those of a backend that estimates every kind afresh. The
/// entries with variables are left to the test above (the policy layer declares variables by
/// their output type).
#[test]
fn typed_cost_estimates_reused_across_kinds_match_cel_go() {
    use vapcheck::engine::{KubeChecker, reused_estimates};
    use vapcheck::policy::{EnvRequest, ExpressionChecker, ObjectDecl, ParamsDecl, SchemaType};

    // (expression, params kind) -> the entries, in file order.
    type Group = ((String, Option<String>), Vec<serde_json::Value>);
    let mut groups: Vec<Group> = Vec::new();
    for case in golden_cases() {
        let input = &case["input"];
        if input["variables"].as_array().is_some_and(|v| !v.is_empty()) {
            continue;
        }
        let key = (
            input["expr"].as_str().expect("expr").to_owned(),
            input["paramsGvk"].as_str().map(str::to_owned),
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(case),
            None => groups.push((key, vec![case])),
        }
    }
    let (_dir, source) = source();
    let reusing = KubeChecker::new(Target::upstream()).expect("checker");
    let fresh = KubeChecker::new(Target::upstream())
        .expect("checker")
        .without_estimate_reuse();
    let before = reused_estimates();
    let (mut compared, mut several_kinds) = (0, 0);
    for ((expr, params_gvk), cases) in &groups {
        let parsed = reusing.parse(expr).expect("parses");
        let params_root = params_gvk.as_deref().map(|g| source.resolve(&gvk_of(g)));
        let params_type = match &params_root {
            Some(Ok(r)) if r.is_typed() => Some(SchemaType(r.clone())),
            _ => None,
        };
        let params = match (&params_root, &params_type) {
            (None, _) => ParamsDecl::Absent,
            (Some(_), None) => ParamsDecl::Dyn,
            (Some(_), Some(t)) => ParamsDecl::Typed(t),
        };
        if cases.len() > 1 {
            several_kinds += 1;
        }
        for case in cases {
            let (input, output) = (&case["input"], &case["output"]);
            let id = input["id"].as_str().unwrap_or("?");
            let gvk = gvk_of(input["gvk"].as_str().expect("gvk"));
            let Ok(root) = source.resolve(&gvk) else {
                continue;
            };
            let object = root.is_typed().then(|| SchemaType(root.clone()));
            let request = EnvRequest {
                gvk: &gvk,
                object: match &object {
                    Some(t) => ObjectDecl::Typed(t),
                    None => ObjectDecl::Dyn,
                },
                params,
                patch_types: false,
                mutating: false,
            };
            let env = reusing.environment(&request).expect("env");
            let checked = env.check(&parsed);
            if output.get("issues").is_some() {
                assert!(checked.is_err(), "{id}: cel-go rejects {expr:?}");
                continue;
            }
            checked.unwrap_or_else(|e| panic!("{id}: {expr:?} does not compile: {e}"));
            let got = env.cost(&parsed).expect("estimated");
            let want = (
                output["min"].as_u64().expect("min"),
                output["max"].as_u64().expect("max"),
            );
            assert_eq!((got.min, got.max), want, "{id}: {expr:?}");
            let fresh_env = fresh.environment(&request).expect("env");
            fresh_env.check(&parsed).expect("checks");
            assert_eq!(Some(got), fresh_env.cost(&parsed), "{id}: {expr:?}");
            compared += 1;
        }
    }
    let reused = reused_estimates() - before;
    println!(
        "typed cost through the backend: {compared} estimates identical to cel-go's, {reused} \
         of them reused from another kind ({several_kinds} expressions with several kinds)"
    );
    // The entries without variables that compile and have a schema.
    assert_eq!(compared, 685, "estimates compared");
    // Of the 685: those the backend takes from another kind's estimate of the same expression.
    // A change to the reuse rule (engine.rs, `CheckEnv::cost`) or to the golden cases
    // (tests/golden, regenerated by the oracle) changes it.
    assert_eq!(reused, 296, "estimates reused from another kind");
}
