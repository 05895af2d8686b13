//! Replays the oracle's per-GVK results of the policy corpus
//! (`tests/golden/upstream-corpus-1.37.jsonl`: every checked expression of the 263 corpus
//! policies, for every kind upstream's `typesToCheck` picked, as the real 1.37.1 checker
//! reported it) with the kinds typed by `crates/core/src/schema/` from `shared/openapi/v1.35`, params
//! from the policy's `paramKind`, and the policy's variables. Compared: the warning text
//! (without the `<gvk>: ` prefix) byte for byte.

use std::sync::Arc;

use vapcheck::engine::{RootTypes, cel_type};
use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};
use vapcheck::schema::{FilesConfig, FilesSource, GroupVersion, GroupVersionKind, SchemaSource};

/// `"apps/v1, Kind=Deployment"` (core group: `"/v1, Kind=Pod"`).
fn gvk_of(s: &str) -> Option<GroupVersionKind> {
    let (gv, kind) = s.split_once(", Kind=")?;
    let (group, version) = gv.split_once('/')?;
    Some(GroupVersionKind::new(group, version, kind))
}

#[test]
fn corpus_per_gvk_warnings_match_kcm() {
    let shared = crate::support::shared_dir();
    let source = FilesSource::load(&FilesConfig {
        openapi_dir: Some(shared.join("openapi/v1.35")),
        ..FilesConfig::default()
    })
    .expect("OpenAPI documents load");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/upstream-corpus-1.37.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("golden file is committed");
    let mut compared = 0;
    let mut no_schema = 0;
    let mut mismatches = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let g: serde_json::Value = serde_json::from_str(line).expect("valid JSON line");
        let policy_ref = g["policy"].as_str().unwrap_or_default();
        let (file, index) = policy_ref.rsplit_once('#').unwrap_or((policy_ref, "0"));
        let index: usize = index.parse().expect("document index");
        let yaml = std::fs::read_to_string(shared.join("corpus/policies").join(file))
            .expect("corpus policy");
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).expect("valid YAML");
        let spec = &docs[index]["spec"];
        let Some(gvk) = g["gvk"].as_str().and_then(gvk_of) else {
            panic!("bad gvk in {line}");
        };
        let Ok(root) = source.resolve(&gvk) else {
            no_schema += 1;
            continue;
        };
        let mut roots = vec![root.clone()];
        let object = (root.is_typed() && g["objectDyn"] != true).then(|| cel_type(root.root()));
        let params = match spec.get("paramKind").filter(|p| !p.is_null()) {
            None => Params::Absent,
            Some(pk) => {
                match GroupVersion::parse_api_version(pk["apiVersion"].as_str().unwrap_or_default())
                {
                    None => Params::Absent,
                    Some(gv) => {
                        let pg = gv.with_kind(pk["kind"].as_str().unwrap_or_default());
                        match source.resolve(&pg) {
                            Ok(r) if r.is_typed() => {
                                let t = cel_type(r.root());
                                roots.push(r);
                                Params::Typed(t)
                            }
                            _ => Params::Untyped,
                        }
                    }
                }
            }
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
        for v in spec["variables"].as_array().into_iter().flatten() {
            let _ = env.add_variable(
                v["name"].as_str().unwrap_or_default(),
                v["expression"].as_str().unwrap_or_default(),
            );
        }
        let expr = g["expression"].as_str().unwrap_or_default();
        let warning = env
            .compile(expr)
            .err()
            .map(|i| i.to_display_string())
            .unwrap_or_default();
        let want = g["warning"].as_str().unwrap_or_default();
        let want = want
            .split_once(": ")
            .map(|(_, rest)| rest.strip_suffix('\n').unwrap_or(rest))
            .unwrap_or("");
        if warning != want {
            mismatches.push(format!(
                "{policy_ref} {} {}:\n  want: {want:?}\n  got:  {warning:?}",
                g["fieldRef"].as_str().unwrap_or_default(),
                g["gvk"].as_str().unwrap_or_default()
            ));
        }
        compared += 1;
    }
    println!("compared {compared} per-GVK results, {no_schema} kinds without a v1.35 schema");
    for m in &mismatches {
        println!("{m}");
    }
    // Exact counts: every line of the golden file is compared.
    assert_eq!(compared, 1494, "per-GVK results compared");
    assert_eq!(no_schema, 0, "kinds without a v1.35 schema");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} results differ",
        mismatches.len()
    );
}
