//! The schema field's description in the hover of a selection of `object` or `oldObject`
//! (`object.spec.replicas`): read from the OpenAPI document of each kind the policy is checked
//! against, as published — the embedded documents of the target Kubernetes version, or the
//! `--openapi` folder of the settings — through [`crate::schema::describe`]. The documents the
//! checks hold have their documentation dropped, so the hover parses its own copy of a
//! document once and keeps it (one per group-version hovered, for the life of the server).
//! A custom resource that no published document declares is described by its
//! CustomResourceDefinition in the settings' CRD files (`crds:`), read again when a file
//! changes on disk ([`crate::schema::describe::crd_field_description`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use serde_json::Value;

use crate::cli::CustomResourceDefinition;
use crate::cli::SchemaOptions;
use crate::policy::probe::{Shape, object_types_of};
use crate::policy::{Backends, CheckOptions, Gvk};
use crate::schema::describe::{
    crd_field_description, declares_kind, document_path, field_description,
};

/// Where the published documents come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// The embedded documents of a Kubernetes minor (`1.37`).
    BuiltIn(String),
    /// An `--openapi` folder (`api/v1.json`, `apis/<group>/<version>.json`).
    Folder(PathBuf),
}

impl Source {
    /// The source the settings' schemas come from; `None` for a cluster (the server never
    /// talks to one) or no source.
    pub fn of(options: &SchemaOptions) -> Option<Self> {
        match (&options.openapi, &options.built_in) {
            (Some(folder), _) => Some(Self::Folder(folder.clone())),
            (None, Some(minor)) => Some(Self::BuiltIn(minor.clone())),
            (None, None) => None,
        }
    }
}

/// Where the hover's descriptions come from: the published documents, then the CRD files.
#[derive(Debug, Clone, Default)]
pub struct Descriptions {
    /// The published documents.
    pub published: Option<Source>,
    /// The CustomResourceDefinitions of the settings' CRD files.
    pub crds: Vec<Arc<CustomResourceDefinition>>,
}

impl Descriptions {
    /// The descriptions of the settings' schema source and CRD files (a CRD file that cannot
    /// be read gives none: `check` reports it).
    pub fn of(options: &SchemaOptions) -> Self {
        Self {
            published: Source::of(options),
            crds: options.crds.iter().flat_map(|p| crds_of(p)).collect(),
        }
    }
}

/// A CRD file's definitions, under its path and modification time.
type CrdFiles = HashMap<PathBuf, (Option<SystemTime>, Vec<Arc<CustomResourceDefinition>>)>;

/// The CustomResourceDefinitions of the file at `path`, read again when its modification time
/// changes; none when it cannot be read.
fn crds_of(path: &std::path::Path) -> Vec<Arc<CustomResourceDefinition>> {
    static FILES: OnceLock<Mutex<CrdFiles>> = OnceLock::new();
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut files = FILES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((at, crds)) = files.get(path)
        && *at == modified
    {
        return crds.clone();
    }
    let crds: Vec<Arc<CustomResourceDefinition>> = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| crate::cli::input::read_crds(&path.display().to_string(), &text).ok())
        .unwrap_or_default()
        .into_iter()
        .map(Arc::new)
        .collect();
    files.insert(path.to_path_buf(), (modified, crds.clone()));
    crds
}

/// A parsed document, under its source, path and (for a folder's file) modification time.
type Key = (Source, String, Option<SystemTime>);

fn documents() -> &'static Mutex<HashMap<Key, Option<Arc<Value>>>> {
    static DOCUMENTS: OnceLock<Mutex<HashMap<Key, Option<Arc<Value>>>>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The published document of `gvk`'s group-version; `None` when there is none or it does not
/// parse (the hover then has no description).
fn document(source: &Source, gvk: &Gvk) -> Option<Arc<Value>> {
    let path = document_path(gvk);
    let modified = match source {
        Source::BuiltIn(_) => None,
        Source::Folder(folder) => std::fs::metadata(folder.join(&path))
            .and_then(|m| m.modified())
            .ok(),
    };
    let key = (source.clone(), path, modified);
    let mut cache = documents().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = cache.get(&key) {
        return found.clone();
    }
    let bytes = match source {
        Source::BuiltIn(minor) => crate::schema::embedded::document(minor, &key.1).ok(),
        Source::Folder(folder) => std::fs::read(folder.join(&key.1)).ok(),
    };
    let parsed = bytes
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(Arc::new);
    // A folder's older versions of the same file are not needed again.
    cache.retain(|(s, p, _), _| !(s == &key.0 && p == &key.1));
    cache.insert(key, parsed.clone());
    parsed
}

/// The property names of a selection of `object` or `oldObject` (`object.?spec.replicas`:
/// `["spec", "replicas"]`); `None` for any other selection.
fn object_path(selection: &str) -> Option<Vec<&str>> {
    let mut names = selection.split('.').map(|n| n.trim_start_matches('?'));
    let root = names.next()?;
    if root != "object" && root != "oldObject" {
        return None;
    }
    let path: Vec<&str> = names.collect();
    (!path.is_empty() && path.iter().all(|n| !n.is_empty())).then_some(path)
}

/// The hover's description section of `selection` (Markdown, ending in a blank line), or the
/// empty string when no kind's document describes it: the description alone when every
/// described kind has the same one, else one item per kind.
pub fn section(
    shape: &Shape<'_>,
    selection: &str,
    options: &CheckOptions,
    backends: &Backends<'_>,
    descriptions: &Descriptions,
) -> String {
    let Some(path) = object_path(selection) else {
        return String::new();
    };
    let described: Vec<(Gvk, String)> = object_types_of(shape, options, backends)
        .into_iter()
        .filter_map(|(gvk, _)| {
            let published = descriptions
                .published
                .as_ref()
                .and_then(|source| document(source, &gvk));
            let text = match published {
                // A document that declares the kind is its description, even when it has
                // none for the field.
                Some(doc) if declares_kind(&doc, &gvk) => field_description(&doc, &gvk, &path),
                _ => descriptions
                    .crds
                    .iter()
                    .find_map(|crd| crd_field_description(crd, &gvk, &path)),
            }?;
            Some((gvk, text))
        })
        .collect();
    let mut out = String::new();
    match described.as_slice() {
        [] => {}
        [(_, only), rest @ ..] if rest.iter().all(|(_, t)| t == only) => {
            let _ = writeln!(out, "{only}\n");
        }
        all => {
            for (gvk, text) in all {
                let _ = writeln!(out, "- `{gvk}`: {text}");
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_selections_of_the_object_have_a_path() {
        assert_eq!(
            object_path("object.spec.replicas"),
            Some(vec!["spec", "replicas"])
        );
        assert_eq!(
            object_path("oldObject.?spec.?replicas"),
            Some(vec!["spec", "replicas"])
        );
        assert_eq!(object_path("object"), None);
        assert_eq!(object_path("params.spec"), None);
        assert_eq!(object_path("request.userInfo"), None);
        assert_eq!(object_path("object..spec"), None);
    }

    #[test]
    fn the_source_follows_the_settings() {
        let mut options = SchemaOptions {
            built_in: Some("1.36".into()),
            ..SchemaOptions::default()
        };
        assert_eq!(Source::of(&options), Some(Source::BuiltIn("1.36".into())));
        options.openapi = Some(PathBuf::from("/o"));
        assert_eq!(Source::of(&options), Some(Source::Folder("/o".into())));
        assert_eq!(Source::of(&SchemaOptions::default()), None);
    }
}
