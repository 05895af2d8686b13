//! Discovery for offline runs: read an `/openapi/v3`-style folder and CRD files into a
//! discovery snapshot (the parsing itself is pure, in [`crate::policy::discovery`]).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::policy::ApiGroupResources;
use crate::policy::discovery::{discovery_from_crds, discovery_from_openapi, merge_discovery};

use super::input::read_crds;

/// Reads `<dir>/api/v1.json` and every `<dir>/apis/<group>/<version>.json` (files that are
/// missing are skipped; unreadable or invalid ones are errors naming the file).
pub fn load_openapi_documents(dir: &Path) -> Result<Vec<Value>, String> {
    let mut files = Vec::new();
    let core = dir.join("api").join("v1.json");
    if core.is_file() {
        files.push(core);
    }
    let apis = dir.join("apis");
    if apis.is_dir() {
        let groups = std::fs::read_dir(&apis).map_err(|e| format!("{}: {e}", apis.display()))?;
        for g in groups {
            let g = g.map_err(|e| format!("{}: {e}", apis.display()))?.path();
            if !g.is_dir() {
                continue;
            }
            for v in std::fs::read_dir(&g).map_err(|e| format!("{}: {e}", g.display()))? {
                let v = v.map_err(|e| format!("{}: {e}", g.display()))?.path();
                if v.extension().is_some_and(|e| e == "json") {
                    files.push(v);
                }
            }
        }
    }
    if files.is_empty() {
        return Err(format!(
            "{}: no OpenAPI v3 documents (expected api/v1.json or apis/<group>/<version>.json)",
            dir.display()
        ));
    }
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("{}: cannot read: {e}", f.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", f.display()))
        })
        .collect()
}

/// Reads the CRDs of every `--crd` file.
pub fn load_crds(files: &[impl AsRef<Path>]) -> Result<Vec<CustomResourceDefinition>, String> {
    let mut out = Vec::new();
    for f in files {
        let f = f.as_ref();
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("{}: cannot read: {e}", f.display()))?;
        out.extend(read_crds(&f.display().to_string(), &text).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// The discovery snapshot of an offline run: the OpenAPI folder (if any) merged with the CRDs.
pub fn offline_discovery(
    openapi: Option<&Path>,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<ApiGroupResources>, String> {
    let mut snapshots = Vec::new();
    if let Some(dir) = openapi {
        let docs = load_openapi_documents(dir)?;
        snapshots.push(discovery_from_openapi(&docs));
    }
    snapshots.push(discovery_from_crds(crds));
    Ok(merge_discovery(snapshots))
}
