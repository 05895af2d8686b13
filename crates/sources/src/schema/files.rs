//! Schemas from files: a folder laid out like the API server's `/openapi/v3`
//! (`api/v1.json`, `apis/<group>/<version>.json`) plus CustomResourceDefinition manifests.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::convert::{ConvertOptions, Limits};
use super::crd::{self, CrdVersion};
use super::document::{MAX_DOCUMENT_BYTES, OpenApiDocument};
use super::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
use super::source::{Catalog, SchemaError, SchemaErrorKind, SchemaSource};
use super::types::RootType;

/// A problem loading files; names the file.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A file or folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The built-in schemas could not be read.
    #[error("{0}")]
    BuiltIn(String),
    /// A CRD manifest could not be used.
    #[error("{path}: {reason}")]
    Crd {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// FNV-1a 64, used as the content hash of files (not cryptographic; only change detection).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Schemas read from files.
#[derive(Debug)]
pub struct FilesSource {
    catalog: Catalog,
    /// CRD versions whose schema is unusable, with the reason.
    crd_errors: HashMap<GroupVersionKind, String>,
}

/// What to load.
#[derive(Debug, Clone, Default)]
pub struct FilesConfig {
    /// A folder laid out like `/openapi/v3`; optional.
    pub openapi_dir: Option<PathBuf>,
    /// The built-in documents of this Kubernetes minor (`1.37`), under those of `openapi_dir`.
    pub built_in: Option<String>,
    /// CRD manifests: files, or folders searched (non-recursively) for `*.yaml`, `*.yml`, `*.json`.
    pub crd_paths: Vec<PathBuf>,
    /// Conversion bounds.
    pub limits: Limits,
    /// Conversion options.
    pub options: ConvertOptions,
}

impl FilesSource {
    /// Loads the documents and manifests. Malformed OpenAPI documents do not fail the load (their
    /// kinds report why they cannot be typed); unreadable paths and unusable CRD manifests do.
    pub fn load(config: &FilesConfig) -> Result<Self, FilesError> {
        let mut documents: BTreeMap<GroupVersion, OpenApiDocument> = BTreeMap::new();
        if let Some(minor) = &config.built_in {
            for doc in super::embedded::built_in_documents(minor).map_err(FilesError::BuiltIn)? {
                documents.insert(doc.group_version().clone(), doc);
            }
        }
        if let Some(dir) = &config.openapi_dir {
            for (gv, path) in list_documents(dir)? {
                let doc = match read_limited(&path)? {
                    Some(bytes) => {
                        let hash = format!("{:016x}", fnv1a64(&bytes));
                        OpenApiDocument::from_slice(gv.clone(), hash, &bytes)
                    }
                    None => OpenApiDocument::unusable(
                        gv.clone(),
                        "",
                        format!(
                            "{} is larger than {MAX_DOCUMENT_BYTES} bytes",
                            path.display()
                        ),
                    ),
                };
                documents.insert(gv, doc);
            }
        }
        let mut crd_versions: Vec<CrdVersion> = Vec::new();
        for path in expand_crd_paths(&config.crd_paths)? {
            let text = std::fs::read_to_string(&path).map_err(|source| FilesError::Io {
                path: path.clone(),
                source,
            })?;
            let crds = crd::crds_from_text(&text).map_err(|reason| FilesError::Crd {
                path: path.clone(),
                reason,
            })?;
            for c in &crds {
                crd_versions.extend(crd::crd_versions(c).map_err(|reason| FilesError::Crd {
                    path: path.clone(),
                    reason,
                })?);
            }
        }
        Ok(Self::assemble(
            documents,
            crd_versions,
            config.limits,
            config.options,
        ))
    }

    /// Builds a source from in-memory parts (documents keyed by group-version, and CRD objects).
    pub fn from_parts(
        documents: impl IntoIterator<Item = OpenApiDocument>,
        crds: &[Value],
        limits: Limits,
        options: ConvertOptions,
    ) -> Result<Self, String> {
        let docs = documents
            .into_iter()
            .map(|d| (d.group_version().clone(), d))
            .collect();
        let mut versions = Vec::new();
        for c in crds {
            versions.extend(crd::crd_versions(c)?);
        }
        Ok(Self::assemble(docs, versions, limits, options))
    }

    fn assemble(
        mut documents: BTreeMap<GroupVersion, OpenApiDocument>,
        crd_versions: Vec<CrdVersion>,
        limits: Limits,
        options: ConvertOptions,
    ) -> Self {
        let mut crd_errors = HashMap::new();
        let mut crd_docs: BTreeMap<GroupVersion, Map<String, Value>> = BTreeMap::new();
        let mut crd_resources: BTreeMap<GroupVersion, Vec<super::mapper::ResourceInfo>> =
            BTreeMap::new();
        for v in crd_versions {
            let gv = v.gvk.group_version();
            let comps = crd_docs
                .entry(gv.clone())
                .or_insert_with(crd::meta_components);
            match v.schema {
                Ok(s) => {
                    comps.insert(crd::model_name(&v.gvk), s);
                }
                Err(reason) => {
                    crd_errors.insert(v.gvk.clone(), reason);
                }
            }
            comps.insert(crd::model_name(&v.list_gvk), v.list_schema);
            crd_resources.entry(gv).or_default().push(v.resource);
        }
        // Resources of the folder's documents, then CRDs (a CRD wins over a document of the same
        // group-version: its schemas are added to that document's components).
        let mut resources: BTreeMap<GroupVersion, Vec<super::mapper::ResourceInfo>> = documents
            .iter()
            .map(|(gv, d)| (gv.clone(), d.resources().to_vec()))
            .collect();
        for (gv, comps) in crd_docs {
            let merged = match documents.remove(&gv) {
                Some(existing) if existing.malformed_reason().is_none() => {
                    let mut all = existing.schemas();
                    all.extend(comps);
                    all
                }
                _ => comps,
            };
            let value = serde_json::json!({"components": {"schemas": Value::Object(merged)}});
            let bytes = value.to_string();
            let hash = format!("{:016x}", fnv1a64(bytes.as_bytes()));
            documents.insert(
                gv.clone(),
                OpenApiDocument::from_value(gv.clone(), hash, value),
            );
            let list = resources.entry(gv.clone()).or_default();
            for r in crd_resources.remove(&gv).unwrap_or_default() {
                list.retain(|x| x.plural != r.plural);
                list.push(r);
            }
        }
        let catalog = Catalog::new(
            documents.into_values().map(Arc::new),
            &super::discovery::from_resource_infos(resources),
            limits,
            options,
        );
        FilesSource {
            catalog,
            crd_errors,
        }
    }

    /// The underlying catalog (documents and resource mapping).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}

impl SchemaSource for FilesSource {
    fn resolve(&self, gvk: &GroupVersionKind) -> Result<Arc<RootType>, SchemaError> {
        if let Some(reason) = self.crd_errors.get(gvk) {
            return Err(SchemaError::new(
                gvk,
                SchemaErrorKind::Invalid,
                reason.clone(),
            ));
        }
        self.catalog.resolve(gvk)
    }

    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
        self.catalog.kinds_for(gvr)
    }
}

/// Reads a document unless it is larger than [`MAX_DOCUMENT_BYTES`] (`Ok(None)`).
fn read_limited(path: &Path) -> Result<Option<Vec<u8>>, FilesError> {
    let io = |source| FilesError::Io {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_DOCUMENT_BYTES as u64 {
        return Ok(None);
    }
    std::fs::read(path).map(Some).map_err(io)
}

/// `api/<v>.json` and `apis/<group>/<v>.json` under `dir`.
fn list_documents(dir: &Path) -> Result<Vec<(GroupVersion, PathBuf)>, FilesError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| FilesError::Io { path, source }
    };
    let mut out = Vec::new();
    let json_stem = |p: &Path| -> Option<String> {
        (p.extension()?.to_str()? == "json").then(|| p.file_stem()?.to_str().map(str::to_owned))?
    };
    // Reading the folder itself must work; the sub-folders are optional.
    std::fs::read_dir(dir).map_err(io(dir))?;
    let core = dir.join("api");
    if core.is_dir() {
        for e in std::fs::read_dir(&core).map_err(io(&core))? {
            let p = e.map_err(io(&core))?.path();
            if let Some(v) = json_stem(&p) {
                out.push((GroupVersion::new("", v), p));
            }
        }
    }
    let apis = dir.join("apis");
    if apis.is_dir() {
        for g in std::fs::read_dir(&apis).map_err(io(&apis))? {
            let gdir = g.map_err(io(&apis))?.path();
            let Some(group) = gdir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                continue;
            };
            if !gdir.is_dir() {
                continue;
            }
            for e in std::fs::read_dir(&gdir).map_err(io(&gdir))? {
                let p = e.map_err(io(&gdir))?.path();
                if let Some(v) = json_stem(&p) {
                    out.push((GroupVersion::new(group.clone(), v), p));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn expand_crd_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FilesError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            for e in std::fs::read_dir(p).map_err(|source| FilesError::Io {
                path: p.clone(),
                source,
            })? {
                let f = e
                    .map_err(|source| FilesError::Io {
                        path: p.clone(),
                        source,
                    })?
                    .path();
                let ext = f.extension().and_then(|x| x.to_str()).unwrap_or("");
                if f.is_file() && matches!(ext, "yaml" | "yml" | "json") {
                    found.push(f);
                }
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}
