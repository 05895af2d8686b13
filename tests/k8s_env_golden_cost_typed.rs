//! Replays the oracle's golden file `tests/golden/upstream-cost-typed-1.37.jsonl`: cel-go's
//! `Env.EstimateCost` with Kubernetes' `library.CostEstimator` whose size estimator reads
//! upstream's `DeclType.MaxElements` (apiextensions-apiserver's `sizeEstimator` rooted at
//! `object`/`oldObject`/`params`), with the kinds typed by `common.SchemaDeclType` from the
//! published OpenAPI v3 documents of Kubernetes 1.37.1 plus the fixture document
//! `tests/fixtures/cost-openapi` (see docs/cost.md). vapcheck types the same documents (its
//! embedded 1.37 schemas and the fixture) with `src/schema/` and estimates with
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

#[test]
fn typed_cost_estimates_match_cel_go() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/upstream-cost-typed-1.37.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("golden file is committed");
    let cases: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect();
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
