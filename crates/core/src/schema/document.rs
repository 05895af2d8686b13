//! One OpenAPI v3 document as served at `/openapi/v3/apis/<group>/<version>`: its component
//! schemas, which component holds which kind, the resources its paths describe, and the
//! converted types of its kinds (computed on first use and kept for the document's life).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value};

use super::convert::{Components, ConvertError, ConvertOptions, Limits};
use super::gvk::{GroupVersion, GroupVersionKind};
use super::mapper::{ResourceInfo, SubresourceInfo};
use super::types::{DeclType, RootType};

/// The GVK extension on component schemas and operations.
pub const EXT_GVK: &str = "x-kubernetes-group-version-kind";

/// Largest document accepted, in bytes (the biggest built-in document, `api/v1`, is about 1.3 MB).
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024 * 1024;

/// Nesting depth beyond which a document is rejected by validation.
const MAX_VALIDATION_DEPTH: usize = 256;

/// Why a kind of a document has no type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The document does not declare the kind.
    #[error("kind {kind:?} is not declared by any schema of the OpenAPI document for {gv}")]
    NotDeclared {
        /// The kind.
        kind: String,
        /// The document's group-version.
        gv: GroupVersion,
    },
    /// The document as a whole is unusable.
    #[error("the OpenAPI document for {gv} is malformed: {reason}")]
    Malformed {
        /// The document's group-version.
        gv: GroupVersion,
        /// What is wrong and where.
        reason: String,
    },
    /// The kind's schema could not be converted.
    #[error("schema {component:?} of the OpenAPI document for {gv}: {error}")]
    Convert {
        /// The document's group-version.
        gv: GroupVersion,
        /// The component holding the kind.
        component: String,
        /// The conversion error.
        error: ConvertError,
    },
}

impl KindError {
    /// Whether upstream treats this as "schema not found" (the kind is dropped silently) rather
    /// than as an internal error. Missing `$ref` targets wrap ErrSchemaNotFound upstream.
    pub fn is_not_found(&self) -> bool {
        match self {
            KindError::NotDeclared { .. } => true,
            KindError::Convert { error, .. } => {
                matches!(
                    error,
                    ConvertError::MissingRef { .. } | ConvertError::RootNotFound(_)
                )
            }
            KindError::Malformed { .. } => false,
        }
    }
}

/// A parsed OpenAPI v3 document for one group-version.
///
/// A built-in document ([`OpenApiDocument::built_in`]) is read lazily: its kinds and resources
/// come from the index generated with the embedded data, and its component schemas are
/// decompressed and parsed the first time a kind of it is resolved, so that a run that needs a
/// few kinds does not parse every document.
#[derive(Debug)]
pub struct OpenApiDocument {
    gv: GroupVersion,
    hash: String,
    /// Every GVK a component declares (also of other group-versions) → component name.
    kinds: HashMap<GroupVersionKind, String>,
    resources: Vec<ResourceInfo>,
    /// The component schemas, and why the document is unusable if it is; set on construction,
    /// or on first use for a built-in document.
    body: OnceLock<Body>,
    /// Where a built-in document's text is: (Kubernetes minor, path in the embedded data).
    built_in: Option<(String, String)>,
    cache: Mutex<HashMap<GroupVersionKind, Result<Arc<RootType>, KindError>>>,
}

/// What a document's component schemas are.
#[derive(Debug, Default)]
struct Body {
    /// By name; equal schemas are one value shared by every document that has them
    /// ([`intern`]).
    schemas: HashMap<String, Arc<Value>>,
    malformed: Option<String>,
}

/// The component schemas held by some document, by a hash of their text: every document of a
/// CRD repeats the same apimachinery schemas (`ObjectMeta`, `ManagedFieldsEntry`, `Status`,
/// `DeleteOptions`, ...), which were most of the memory a document kept (heaptrack, 1,000 CRDs
/// in 200 groups in e2e/bench/crds: 39 MB of the 59 MB heap peak in the parsed schemas). Held
/// weakly: a schema no document holds any more is dropped.
static INTERNED: Mutex<Option<Interned>> = Mutex::new(None);

#[derive(Default)]
struct Interned {
    schemas: HashMap<u64, Vec<std::sync::Weak<Value>>>,
    /// When the table is swept of dropped schemas next (its size then).
    sweep_at: usize,
}

/// `schema` as a value shared with every other document that has an equal one.
fn intern(schema: Value) -> Arc<Value> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // serde_json's text of a value is canonical for equal values (its maps are ordered).
    schema.to_string().hash(&mut hasher);
    let key = hasher.finish();
    let mut guard = INTERNED.lock().unwrap_or_else(|p| p.into_inner());
    let table = guard.get_or_insert_with(Interned::default);
    let same = table.schemas.entry(key).or_default();
    if let Some(existing) = same
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|e| **e == schema)
    {
        return existing;
    }
    let shared = Arc::new(schema);
    same.push(Arc::downgrade(&shared));
    if table.schemas.len() >= table.sweep_at {
        table.schemas.retain(|_, v| {
            v.retain(|w| w.strong_count() > 0);
            !v.is_empty()
        });
        table.sweep_at = (table.schemas.len() * 2).max(1024);
    }
    shared
}

/// What a built-in document's index records of it (generated from the document itself by
/// [`OpenApiDocument::index`]; `tests`: the committed index equals a fresh one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DocumentIndex {
    /// The group-version.
    pub group: String,
    /// The version.
    pub version: String,
    /// The content hash the document is loaded with.
    pub hash: String,
    /// Every GVK a component declares → component name, sorted.
    pub kinds: Vec<(GroupVersionKind, String)>,
    /// The resources of its paths.
    pub resources: Vec<ResourceInfo>,
}

impl OpenApiDocument {
    /// Parses a document from JSON bytes. `hash` identifies the content (the `?hash=` of the
    /// document URL, or a content hash). Never fails: a malformed document is kept and every
    /// kind resolved through it reports why.
    pub fn from_slice(gv: GroupVersion, hash: impl Into<String>, bytes: &[u8]) -> Self {
        let hash = hash.into();
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Self::malformed(
                gv,
                hash,
                format!(
                    "document is {} bytes, more than the limit of {MAX_DOCUMENT_BYTES}",
                    bytes.len()
                ),
            );
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => Self::from_value(gv, hash, v),
            Err(e) => Self::malformed(gv, hash, format!("invalid JSON: {e}")),
        }
    }

    /// Builds a document from an already parsed JSON value.
    pub fn from_value(gv: GroupVersion, hash: impl Into<String>, mut value: Value) -> Self {
        let hash = hash.into();
        let mut schemas = match value.pointer_mut("/components/schemas").map(Value::take) {
            Some(Value::Object(m)) => m,
            Some(Value::Null) | None => Map::new(),
            Some(_) => {
                return Self::malformed(gv, hash, "components.schemas is not an object".into());
            }
        };
        let mut malformed = None;
        for (name, schema) in &schemas {
            if let Err(e) = validate_schema(schema, 0) {
                malformed = Some(format!("components.schemas[{name:?}]{e}"));
                break;
            }
        }
        let mut kinds = HashMap::new();
        if malformed.is_none() {
            for schema in schemas.values_mut() {
                strip_documentation(schema, 0);
            }
            match index_kinds(&schemas) {
                Ok(k) => kinds = k,
                Err(e) => malformed = Some(e),
            }
        }
        let resources = value
            .get("paths")
            .map(|p| resources_from_paths(&gv, p))
            .unwrap_or_default();
        let schemas = schemas.into_iter().map(|(k, v)| (k, intern(v))).collect();
        OpenApiDocument {
            gv,
            hash,
            kinds,
            resources,
            body: OnceLock::from(Body { schemas, malformed }),
            built_in: None,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// A built-in document of Kubernetes `minor` at `path` of the embedded data, known by its
    /// index; its schemas are read on first use.
    pub fn built_in(minor: &str, path: &str, index: DocumentIndex) -> Self {
        OpenApiDocument {
            gv: GroupVersion::new(index.group, index.version),
            hash: index.hash,
            kinds: index.kinds.into_iter().collect(),
            resources: index.resources,
            body: OnceLock::new(),
            built_in: Some((minor.to_owned(), path.to_owned())),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// What an index of built-in documents records of this one; `None` when it is malformed
    /// (a built-in document never is).
    pub fn index(&self) -> Option<DocumentIndex> {
        if self.malformed_reason().is_some() {
            return None;
        }
        let mut kinds: Vec<(GroupVersionKind, String)> = self
            .kinds
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        kinds.sort();
        Some(DocumentIndex {
            group: self.gv.group.clone(),
            version: self.gv.version.clone(),
            hash: self.hash.clone(),
            kinds,
            resources: self.resources.clone(),
        })
    }

    fn body(&self) -> &Body {
        self.body.get_or_init(|| {
            let Some((minor, path)) = &self.built_in else {
                return Body::default();
            };
            // Only the component schemas: the paths, most of a document's text, are what the
            // index already holds (its resources), and are skipped without being built.
            #[derive(serde::Deserialize)]
            struct Text {
                #[serde(default)]
                components: Option<ComponentsText>,
            }
            #[derive(serde::Deserialize)]
            struct ComponentsText {
                #[serde(default)]
                schemas: Option<Value>,
            }
            let parsed = super::embedded::document(minor, path).and_then(|bytes| {
                serde_json::from_slice::<Text>(&bytes)
                    .map_err(|e| format!("embedded OpenAPI data: {path}: {e}"))
            });
            match parsed {
                Ok(text) => {
                    let schemas = text.components.and_then(|c| c.schemas);
                    let value = serde_json::json!({"components": {"schemas": schemas}});
                    let parsed = Self::from_value(self.gv.clone(), "", value);
                    parsed.body.into_inner().unwrap_or_default()
                }
                Err(reason) => Body {
                    schemas: HashMap::new(),
                    malformed: Some(reason),
                },
            }
        })
    }

    /// A document that could not be obtained or parsed; every kind resolved through it reports
    /// `reason`.
    pub fn unusable(gv: GroupVersion, hash: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::malformed(gv, hash.into(), reason.into())
    }

    fn malformed(gv: GroupVersion, hash: String, reason: String) -> Self {
        OpenApiDocument {
            gv,
            hash,
            kinds: HashMap::new(),
            resources: Vec::new(),
            body: OnceLock::from(Body {
                schemas: HashMap::new(),
                malformed: Some(reason),
            }),
            built_in: None,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The group-version this document describes.
    pub fn group_version(&self) -> &GroupVersion {
        &self.gv
    }

    /// The content hash the document was loaded with.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Why the whole document is unusable, if it is.
    pub fn malformed_reason(&self) -> Option<&str> {
        self.body().malformed.as_deref()
    }

    /// The kinds of this group-version that a component declares, sorted.
    pub fn kinds(&self) -> Vec<&str> {
        let mut k: Vec<&str> = self
            .kinds
            .keys()
            .filter(|g| g.group == self.gv.group && g.version == self.gv.version)
            .map(|g| g.kind.as_str())
            .collect();
        k.sort_unstable();
        k
    }

    /// The resources described by the document's paths, in path order.
    pub fn resources(&self) -> &[ResourceInfo] {
        &self.resources
    }

    /// The component schemas.
    pub fn components(&self) -> Components<'_> {
        Components::shared(&self.body().schemas)
    }

    /// The component schemas, copied.
    pub fn schemas(&self) -> Map<String, Value> {
        self.body()
            .schemas
            .iter()
            .map(|(k, v)| (k.clone(), Value::clone(v)))
            .collect()
    }

    /// GVKs of other group-versions that components of this document declare, sorted (e.g.
    /// `autoscaling/v1 Scale` in `apps/v1`, for the scale subresources).
    pub fn foreign_kinds(&self) -> Vec<&GroupVersionKind> {
        let mut k: Vec<&GroupVersionKind> = self
            .kinds
            .keys()
            .filter(|g| g.group != self.gv.group || g.version != self.gv.version)
            .collect();
        k.sort_unstable();
        k
    }

    /// Whether a component declares `gvk`.
    pub fn declares(&self, gvk: &GroupVersionKind) -> bool {
        self.kinds.contains_key(gvk)
    }

    /// The converted type of `kind` of this document's group-version, computed once per
    /// document and kind.
    pub fn resolve(
        &self,
        kind: &str,
        limits: Limits,
        options: ConvertOptions,
    ) -> Result<Arc<RootType>, KindError> {
        self.resolve_gvk(&self.gv.with_kind(kind), limits, options)
    }

    /// The converted type of any GVK a component of this document declares (see
    /// [`OpenApiDocument::foreign_kinds`]), computed once per document and GVK.
    pub fn resolve_gvk(
        &self,
        gvk: &GroupVersionKind,
        limits: Limits,
        options: ConvertOptions,
    ) -> Result<Arc<RootType>, KindError> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = cache.get(gvk) {
            return hit.clone();
        }
        let result = self.convert(gvk, limits, options);
        cache.insert(gvk.clone(), result.clone());
        result
    }

    fn convert(
        &self,
        gvk: &GroupVersionKind,
        limits: Limits,
        options: ConvertOptions,
    ) -> Result<Arc<RootType>, KindError> {
        let kind = gvk.kind.as_str();
        if let Some(reason) = &self.body().malformed {
            return Err(KindError::Malformed {
                gv: self.gv.clone(),
                reason: reason.clone(),
            });
        }
        let component = self.kinds.get(gvk).ok_or_else(|| KindError::NotDeclared {
            kind: kind.to_owned(),
            gv: self.gv.clone(),
        })?;
        let converted = self
            .components()
            .convert_root_sized(component, kind, limits, options)
            .map_err(|error| KindError::Convert {
                gv: self.gv.clone(),
                component: component.clone(),
                error,
            })?;
        Ok(Arc::new(match converted {
            Some((t, sizes)) => RootType::new(t).with_sizes(sizes),
            // Upstream declares object/oldObject/params as dyn when the schema is not exposed.
            None => RootType::untyped(DeclType::Dyn),
        }))
    }
}

/// Maps each GVK to the component whose GVK extension lists it. When several do, the smallest
/// name wins (upstream takes whichever its map iteration meets first).
fn index_kinds(schemas: &Map<String, Value>) -> Result<HashMap<GroupVersionKind, String>, String> {
    let mut kinds: HashMap<GroupVersionKind, String> = HashMap::new();
    for (name, schema) in schemas {
        if schema.get(EXT_GVK).is_some_and(Value::is_object) {
            // Upstream decodes the component extension into a list; an object fails.
            return Err(format!(
                "components.schemas[{name:?}].{EXT_GVK}: not a list"
            ));
        }
        for gvk in
            gvks_of(schema).map_err(|e| format!("components.schemas[{name:?}].{EXT_GVK}: {e}"))?
        {
            match kinds.get_mut(&gvk) {
                Some(existing) if existing.as_str() <= name.as_str() => {}
                Some(existing) => *existing = name.clone(),
                None => {
                    kinds.insert(gvk, name.clone());
                }
            }
        }
    }
    Ok(kinds)
}

/// Reads `x-kubernetes-group-version-kind` (a list of {group, version, kind}, or one object on
/// operations). Absent → empty. Missing fields read as "" like Go's JSON decoding.
pub fn gvks_of(v: &Value) -> Result<Vec<GroupVersionKind>, String> {
    let Some(ext) = v.get(EXT_GVK) else {
        return Ok(Vec::new());
    };
    let one = |e: &Value| -> Result<GroupVersionKind, String> {
        let obj = e.as_object().ok_or("entry is not an object")?;
        let field = |k: &str| -> Result<String, String> {
            // Go's encoding/json matches field names case-insensitively.
            let found = obj
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
                .map(|(_, v)| v);
            match found {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("{k} is not a string")),
            }
        };
        Ok(GroupVersionKind::new(
            field("group")?,
            field("version")?,
            field("kind")?,
        ))
    };
    match ext {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => a.iter().map(one).collect(),
        Value::Object(_) => Ok(vec![one(ext)?]),
        _ => Err("not a list".into()),
    }
}

/// Documentation keys of a schema node; they never influence typing.
const DOCUMENTATION_KEYS: [&str; 4] = ["description", "example", "externalDocs", "title"];

/// Removes documentation from a (validated) schema and its sub-schemas, to keep documents held
/// in memory small. Property names are not touched (a property may be called `description`).
fn strip_documentation(v: &mut Value, depth: usize) {
    let Value::Object(obj) = v else { return };
    if depth > MAX_VALIDATION_DEPTH {
        return;
    }
    for key in DOCUMENTATION_KEYS {
        obj.remove(key);
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for p in props.values_mut() {
            strip_documentation(p, depth + 1);
        }
    }
    for key in ["additionalProperties", "items", "not"] {
        if let Some(child) = obj.get_mut(key) {
            match child {
                Value::Array(a) => a.iter_mut().for_each(|c| strip_documentation(c, depth + 1)),
                other => strip_documentation(other, depth + 1),
            }
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(Value::Array(a)) = obj.get_mut(key) {
            a.iter_mut().for_each(|c| strip_documentation(c, depth + 1));
        }
    }
}

/// Checks the parts of a schema that upstream decodes into typed Go fields and uses for typing;
/// a wrong JSON type there makes upstream's decoding of the whole document fail.
fn validate_schema(v: &Value, depth: usize) -> Result<(), String> {
    if depth > MAX_VALIDATION_DEPTH {
        return Err(format!(
            ": nested deeper than {MAX_VALIDATION_DEPTH} levels"
        ));
    }
    let Some(obj) = v.as_object() else {
        return Err(": schema is not an object".into());
    };
    let at = |k: &str, e: String| format!(".{k}{e}");
    for (key, val) in obj {
        match key.as_str() {
            "type" => match val {
                Value::String(_) | Value::Null => {}
                Value::Array(a) if a.iter().all(Value::is_string) => {}
                _ => return Err(".type: must be a string or a list of strings".into()),
            },
            "format" | "$ref" if !val.is_string() && !val.is_null() => {
                return Err(format!(".{key}: must be a string"));
            }
            "required"
                if !(val.is_null()
                    || val
                        .as_array()
                        .is_some_and(|a| a.iter().all(Value::is_string))) =>
            {
                return Err(".required: must be a list of strings".into());
            }
            "properties" => match val {
                Value::Null => {}
                Value::Object(m) => {
                    for (p, s) in m {
                        validate_schema(s, depth + 1)
                            .map_err(|e| format!(".properties[{p:?}]{e}"))?;
                    }
                }
                _ => return Err(".properties: must be an object".into()),
            },
            "additionalProperties" => match val {
                Value::Bool(_) | Value::Null => {}
                other => validate_schema(other, depth + 1).map_err(|e| at(key, e))?,
            },
            "items" => match val {
                Value::Null => {}
                Value::Array(a) => {
                    for (i, s) in a.iter().enumerate() {
                        validate_schema(s, depth + 1).map_err(|e| format!(".items[{i}]{e}"))?;
                    }
                }
                other => validate_schema(other, depth + 1).map_err(|e| at(key, e))?,
            },
            "allOf" | "oneOf" | "anyOf" => match val {
                Value::Null => {}
                Value::Array(a) => {
                    for (i, s) in a.iter().enumerate() {
                        validate_schema(s, depth + 1).map_err(|e| format!(".{key}[{i}]{e}"))?;
                    }
                }
                _ => return Err(format!(".{key}: must be a list of schemas")),
            },
            "not" if !val.is_null() => {
                validate_schema(val, depth + 1).map_err(|e| at(key, e))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Derives resources from the document's paths: `/api/v1/...` or `/apis/<g>/<v>/...`,
/// optionally `namespaces/{namespace}/`, then `<plural>`, `<plural>/{name}` or
/// `<plural>/{name}/<subresource>`; the kind of each comes from the operations'
/// `x-kubernetes-group-version-kind`. Deprecated `watch/` paths and deeper paths are skipped.
/// OpenAPI documents carry no singular names; the singular is guessed from the kind the way
/// the RESTMapper does when discovery omits it.
fn resources_from_paths(gv: &GroupVersion, paths: &Value) -> Vec<ResourceInfo> {
    let Some(paths) = paths.as_object() else {
        return Vec::new();
    };
    let prefix = format!("/{}/", gv.openapi_path());
    let mut out: Vec<ResourceInfo> = Vec::new();
    for (path, item) in paths {
        let Some(rest) = path.strip_prefix(&prefix) else {
            continue;
        };
        let (rest, namespaced) = match rest.strip_prefix("namespaces/{namespace}/") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let (plural, sub) = match segments.as_slice() {
            [p] if !p.is_empty() => (*p, None),
            [p, "{name}"] => (*p, None),
            [p, "{name}", s] if !s.is_empty() => (*p, Some(*s)),
            _ => continue,
        };
        if plural == "watch" || plural.starts_with('{') {
            continue;
        }
        let Some(kind) = operation_kind(item) else {
            continue;
        };
        let idx = match out.iter().position(|r| r.plural == plural) {
            Some(i) => i,
            None => {
                out.push(ResourceInfo {
                    plural: plural.to_owned(),
                    singular: String::new(),
                    kind: String::new(),
                    namespaced,
                    subresources: Vec::new(),
                });
                out.len() - 1
            }
        };
        let res = &mut out[idx];
        res.namespaced |= namespaced;
        match sub {
            None => {
                if res.kind.is_empty() && kind.group == gv.group && kind.version == gv.version {
                    res.kind = kind.kind.clone();
                    res.singular = kind.kind.to_lowercase();
                }
            }
            Some(s) => {
                if !res.subresources.iter().any(|x| x.name == s) {
                    res.subresources.push(SubresourceInfo {
                        name: s.to_owned(),
                        kind,
                    });
                }
            }
        }
    }
    out.retain(|r| !r.kind.is_empty());
    for r in &mut out {
        r.subresources.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

/// The GVK of a path item: from its get, put, post, patch, connect or delete operation, in that
/// order of preference.
fn operation_kind(item: &Value) -> Option<GroupVersionKind> {
    ["get", "put", "post", "patch", "head", "options", "delete"]
        .iter()
        .filter_map(|m| item.get(*m))
        .find_map(|op| gvks_of(op).ok().and_then(|g| g.into_iter().next()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(v: Value) -> OpenApiDocument {
        OpenApiDocument::from_value(GroupVersion::new("example.com", "v1"), "h", v)
    }

    #[test]
    fn kinds_are_indexed_for_own_group_version_only() {
        let d = doc(json!({"components": {"schemas": {
            "a.Foo": {"type": "object", EXT_GVK: [{"group": "example.com", "version": "v1", "kind": "Foo"}]},
            "a.Del": {"type": "object", EXT_GVK: [
                {"group": "other", "version": "v1", "kind": "DeleteOptions"},
                {"group": "example.com", "version": "v1", "kind": "DeleteOptions"}]},
            "b.Scale": {"type": "object", EXT_GVK: [{"group": "autoscaling", "version": "v1", "kind": "Scale"}]}
        }}}));
        assert_eq!(d.kinds(), ["DeleteOptions", "Foo"]);
        assert!(d.malformed_reason().is_none());
    }

    #[test]
    fn malformed_documents_name_the_place() {
        let d = doc(json!({"components": {"schemas": {
            "a.Foo": {"type": "object", "properties": {"x": {"type": 5}}}
        }}}));
        let reason = d.malformed_reason().unwrap_or_default();
        assert!(
            reason.contains("a.Foo") && reason.contains("properties[\"x\"].type"),
            "{reason}"
        );
        let err = d
            .resolve("Foo", Limits::default(), ConvertOptions::default())
            .unwrap_err();
        assert!(!err.is_not_found());
        assert!(err.to_string().contains("example.com/v1"), "{err}");

        let bad_gvk =
            doc(json!({"components": {"schemas": {"a.Foo": {"type": "object", EXT_GVK: 3}}}}));
        assert!(bad_gvk.malformed_reason().is_some());
        let not_json =
            OpenApiDocument::from_slice(GroupVersion::new("g", "v1"), "h", b"{\"components\":");
        assert!(
            not_json
                .malformed_reason()
                .unwrap_or_default()
                .starts_with("invalid JSON")
        );
        let schemas_not_object = doc(json!({"components": {"schemas": []}}));
        assert!(schemas_not_object.malformed_reason().is_some());
    }

    #[test]
    fn documentation_is_dropped_but_properties_named_like_it_stay() {
        let d = doc(json!({"components": {"schemas": {
            "a.Foo": {"type": "object", "description": "docs", "title": "t",
                "properties": {"description": {"type": "string", "description": "d"},
                               "title": {"type": "object", "properties": {"example": {"type": "integer"}}}},
                EXT_GVK: [{"group": "example.com", "version": "v1", "kind": "Foo"}]}
        }}}));
        let foo = &d.schemas()["a.Foo"];
        assert!(foo.get("description").is_none() && foo.get("title").is_none());
        assert!(foo.pointer("/properties/description/description").is_none());
        let t = d
            .resolve("Foo", Limits::default(), ConvertOptions::default())
            .expect("typed");
        assert_eq!(
            t.root()
                .at_path("description")
                .map(ToString::to_string)
                .as_deref(),
            Some("string")
        );
        assert_eq!(
            t.root()
                .at_path("title.example")
                .map(ToString::to_string)
                .as_deref(),
            Some("int")
        );
    }

    #[test]
    fn undeclared_kind_is_not_found() {
        let d = doc(json!({"components": {"schemas": {}}}));
        let err = d
            .resolve("Foo", Limits::default(), ConvertOptions::default())
            .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(
            err.to_string(),
            "kind \"Foo\" is not declared by any schema of the OpenAPI document for example.com/v1"
        );
    }

    #[test]
    fn resources_come_from_paths() {
        let gvk = |g: &str, k: &str| json!({"group": g, "version": "v1", "kind": k});
        let d = doc(json!({"paths": {
            "/apis/example.com/v1/namespaces/{namespace}/widgets": {"get": {EXT_GVK: gvk("example.com", "Widget")}},
            "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}": {"get": {EXT_GVK: gvk("example.com", "Widget")}},
            "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale": {"put": {EXT_GVK: gvk("autoscaling", "Scale")}},
            "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status": {"get": {EXT_GVK: gvk("example.com", "Widget")}},
            "/apis/example.com/v1/watch/namespaces/{namespace}/widgets": {"get": {EXT_GVK: gvk("example.com", "Widget")}},
            "/apis/example.com/v1/gadgets/{name}/proxy/{path}": {"get": {EXT_GVK: gvk("example.com", "GadgetProxyOptions")}},
            "/apis/example.com/v1/gadgets": {"get": {EXT_GVK: gvk("example.com", "Gadget")}},
            "/apis/example.com/v1/": {"get": {}}
        }}));
        let r = d.resources();
        assert_eq!(r.len(), 2, "{r:?}");
        let widgets = r.iter().find(|x| x.plural == "widgets").expect("widgets");
        assert_eq!(
            (
                widgets.kind.as_str(),
                widgets.singular.as_str(),
                widgets.namespaced
            ),
            ("Widget", "widget", true)
        );
        let subs: Vec<_> = widgets
            .subresources
            .iter()
            .map(|s| (s.name.as_str(), s.kind.to_string()))
            .collect();
        assert_eq!(
            subs,
            [
                ("scale", "autoscaling/v1, Kind=Scale".to_owned()),
                ("status", "example.com/v1, Kind=Widget".to_owned())
            ]
        );
        let gadgets = r.iter().find(|x| x.plural == "gadgets").expect("gadgets");
        assert!(!gadgets.namespaced);
    }
}
