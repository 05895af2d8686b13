//! Replays every `vap` case of the oracle's golden file
//! `tests/golden/upstream-exprs-1.37.jsonl` (the real 1.37.1 `TypeChecker` on Deployment, Pod,
//! ConfigMap, a `Widget` CRD, with params and variables) with the kinds typed by
//! `crates/core/src/schema/` from the published OpenAPI v3 documents in `shared/openapi/v1.35` and the
//! cases' CRD manifests, bridged to a `cel::TypeProvider`
//! here. Compared: the per-GVK warning text byte for byte, or the deduced type. The oracle
//! names root types `<Kind>` (upstream appends random digits), as `crates/core/src/schema/` does.
//!
//! This checks the combination of the environment with converted schemas; cases exercising
//! the parser are left to `crates/cel/src/`'s tests.

use crate::golden_support::{Tally, golden};

use std::sync::Arc;

use vapcheck::engine::{RootTypes, cel_type};
use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};
use vapcheck::schema::{FilesConfig, FilesSource, GroupVersion, GroupVersionKind, SchemaSource};

/// `"apps/v1, Kind=Deployment"` or `{"group","version","kind"}`.
fn gvk_of(v: &serde_json::Value) -> Option<GroupVersionKind> {
    if let Some(s) = v.as_str() {
        let (gv, kind) = s.split_once(", Kind=")?;
        let (group, version) = gv.split_once('/')?;
        return Some(GroupVersionKind::new(group, version, kind));
    }
    Some(GroupVersionKind::new(
        v["group"].as_str()?,
        v["version"].as_str()?,
        v["kind"].as_str()?,
    ))
}

/// Writes each CRD manifest of a case to its own file in `dir`.
fn crds_paths(dir: &tempfile::TempDir, crds: &serde_json::Value) -> Vec<std::path::PathBuf> {
    crds.as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, crd)| {
            let p = dir.path().join(format!("crd-{i}.json"));
            std::fs::write(&p, crd.to_string()).expect("write CRD");
            p
        })
        .collect()
}

#[test]
fn typed_vap_cases_match_kcm() {
    let shared = crate::support::shared_dir();
    let source = FilesSource::load(&FilesConfig {
        openapi_dir: Some(shared.join("openapi/v1.35")),
        ..FilesConfig::default()
    })
    .expect("OpenAPI documents load");
    let mut tally = Tally::default();
    let mut crd_sources: std::collections::HashMap<String, FilesSource> =
        std::collections::HashMap::new();
    for case in golden() {
        let input = &case["input"];
        let output = &case["output"];
        if input["env"] != "vap" || output["schemaFound"] == false {
            continue;
        }
        let expr = input["expr"].as_str().unwrap_or_default();
        let want = output["warning"].as_str().unwrap_or_default();
        let Some(gvk) = gvk_of(&input["gvk"]) else {
            panic!("bad gvk in {}", input["id"]);
        };
        // CRD cases: the documents plus the case's CRD manifests (loaded once per distinct set).
        let crd_source;
        let source: &FilesSource = match input.get("crds") {
            None => &source,
            Some(crds) => {
                let key = crds.to_string();
                if !crd_sources.contains_key(&key) {
                    let dir = tempfile::tempdir().expect("temp dir");
                    let loaded = FilesSource::load(&FilesConfig {
                        openapi_dir: Some(shared.join("openapi/v1.35")),
                        crd_paths: crds_paths(&dir, crds),
                        ..FilesConfig::default()
                    })
                    .unwrap_or_else(|e| panic!("{}: CRDs load: {e}", input["id"]));
                    crd_sources.insert(key.clone(), loaded);
                }
                crd_source = crd_sources.get(&key).expect("just inserted");
                crd_source
            }
        };
        let root = source
            .resolve(&gvk)
            .unwrap_or_else(|e| panic!("{}: {e}", input["id"]));
        let mut roots = vec![root.clone()];
        let object = root.is_typed().then(|| cel_type(root.root()));
        let params_gvk = if let Some(pk) = input.get("paramKind") {
            GroupVersion::parse_api_version(pk["apiVersion"].as_str().unwrap_or_default())
                .map(|gv| gv.with_kind(pk["kind"].as_str().unwrap_or_default()))
        } else {
            input.get("paramsGvk").and_then(gvk_of)
        };
        let params = match params_gvk {
            None => Params::Absent,
            Some(g) if g.group.is_empty() && g.version.is_empty() && g.kind.is_empty() => {
                Params::Absent
            }
            Some(g) => match source.resolve(&g) {
                Ok(r) if r.is_typed() => {
                    let t = cel_type(r.root());
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
        let variables: Vec<(String, String)> = input["variables"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                (
                    v["name"].as_str().unwrap_or_default().to_string(),
                    v["expression"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        env.add_variables(variables.iter().map(|(n, e)| (n.as_str(), e.as_str())));
        let (warning, ty) = match env.compile(expr) {
            Ok(c) => (String::new(), c.result_type().to_string()),
            Err(i) => (i.to_display_string(), String::new()),
        };
        let want_warning = want
            .split_once(": ")
            .map(|(_, rest)| rest.strip_suffix('\n').unwrap_or(rest))
            .unwrap_or("");
        let want_type = output["type"].as_str().unwrap_or_default();
        tally.add(
            input["id"].as_str().unwrap_or_default(),
            want_warning,
            &warning,
            warning == want_warning && (!want_warning.is_empty() || ty == want_type),
            || format!("{}: {expr:?}\n  want: {want_warning:?} {want_type:?}\n  got:  {warning:?} {ty:?}", input["id"]),
        );
    }
    // Exact counts: a case that stops being compared, or a new difference, fails here.
    tally.assert("typed vap cases", (639, 55, 1), &["vap-1", "vap-58"]);
}
