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

/// The discovery snapshot of an offline run: the OpenAPI folder (if any), else the built-in
/// documents of Kubernetes `built_in` (if given), merged with the CRDs.
pub fn offline_discovery(
    openapi: Option<&Path>,
    built_in: Option<&str>,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<ApiGroupResources>, String> {
    let mut snapshots = Vec::new();
    if let Some(dir) = openapi {
        let docs = load_openapi_documents(dir)?;
        snapshots.push(discovery_from_openapi(&docs));
    } else if let Some(minor) = built_in {
        let json = crate::schema::embedded::discovery_json(minor)?;
        snapshots.push(
            serde_json::from_str(json)
                .map_err(|e| format!("built-in discovery of Kubernetes {minor}: {e}"))?,
        );
    }
    snapshots.push(discovery_from_crds(crds));
    Ok(merge_discovery(snapshots))
}

/// `data/embedded-index/<minor>.json` for each Kubernetes minor built in: what is derived from
/// its documents (each document's index, and the discovery snapshot of all of them), so that a
/// run reads only the documents of the kinds it needs (src/schema/embedded.rs).
pub fn embedded_index() -> Result<Vec<(String, String)>, String> {
    use crate::schema::{GroupVersion, OpenApiDocument};
    let mut out = Vec::new();
    for (minor, _) in crate::schema::embedded::versions()? {
        let mut documents = serde_json::Map::new();
        let mut values = Vec::new();
        for (path, bytes) in crate::schema::embedded::documents(&minor)? {
            let value: Value =
                serde_json::from_slice(&bytes).map_err(|e| format!("{minor} {path}: {e}"))?;
            let (group, version) = document_group_version(&path)
                .ok_or_else(|| format!("{minor} {path}: not an OpenAPI document path"))?;
            let hash = format!("{:016x}", crate::schema::files::fnv1a64(&bytes));
            let doc =
                OpenApiDocument::from_value(GroupVersion::new(group, version), hash, value.clone());
            let index = doc
                .index()
                .ok_or_else(|| format!("{minor} {path}: malformed"))?;
            documents.insert(
                path,
                serde_json::to_value(index).map_err(|e| e.to_string())?,
            );
            values.push(value);
        }
        let discovery = discovery_from_openapi(&values);
        let entry = serde_json::json!({"documents": documents, "discovery": discovery});
        out.push((minor, format!("{entry}\n")));
    }
    Ok(out)
}

/// `api/v1.json` → ("", "v1"); `apis/apps/v1.json` → ("apps", "v1").
fn document_group_version(path: &str) -> Option<(String, String)> {
    let rest = path.strip_suffix(".json")?;
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => Some((String::new(), (*v).to_owned())),
        ["apis", g, v] => Some(((*g).to_owned(), (*v).to_owned())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn embedded_index_is_current() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data/embedded-index");
        let generated = super::embedded_index().expect("index");
        let minors: Vec<&str> = generated.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            minors,
            crate::schema::embedded::indexed_versions(),
            "src/schema/embedded.rs INDEX lists every built-in version"
        );
        // Only VAPCHECK_BLESS=1 rewrites the files, and never under CI (tests/it/support.rs).
        let bless = std::env::var_os("VAPCHECK_BLESS").is_some_and(|v| v == "1");
        let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
        assert!(
            !(bless && under_ci),
            "VAPCHECK_BLESS=1 under CI: generated files are never rewritten in CI"
        );
        for (minor, text) in &generated {
            let path = format!("{dir}/{minor}.json");
            if bless {
                std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
            }
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == *text,
                "{path} is stale; run `VAPCHECK_BLESS=1 cargo test --lib cli::discovery` to regenerate"
            );
        }
    }
}
