//! The schema-source abstraction and the catalog that both sources are built on.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::convert::{ConvertOptions, Limits};
use super::discovery::ApiGroupResources;
use super::document::{KindError, OpenApiDocument};
use super::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
use super::mapper::RestMapper;
use super::types::RootType;

/// Class of a [`SchemaError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaErrorKind {
    /// Upstream's ErrSchemaNotFound: the kind is skipped silently.
    NotFound,
    /// The schema exists but cannot be used (malformed, too large); upstream logs an internal
    /// error and skips the kind.
    Invalid,
    /// The source could not be read (I/O, API server unreachable).
    Unavailable,
}

/// Why a kind has no type. Names the kind and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// The kind asked for.
    pub gvk: GroupVersionKind,
    /// Class of the error.
    pub kind: SchemaErrorKind,
    /// Human-readable reason.
    pub reason: String,
}

impl SchemaError {
    /// Builds an error.
    pub fn new(gvk: &GroupVersionKind, kind: SchemaErrorKind, reason: impl Into<String>) -> Self {
        SchemaError {
            gvk: gvk.clone(),
            kind,
            reason: reason.into(),
        }
    }

    /// Whether this is "schema not found" (see [`SchemaErrorKind::NotFound`]).
    pub fn is_not_found(&self) -> bool {
        self.kind == SchemaErrorKind::NotFound
    }

    pub(crate) fn from_kind_error(gvk: &GroupVersionKind, e: &KindError) -> Self {
        let kind = if e.is_not_found() {
            SchemaErrorKind::NotFound
        } else {
            SchemaErrorKind::Invalid
        };
        SchemaError::new(gvk, kind, e.to_string())
    }
}

impl std::error::Error for SchemaError {}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.kind {
            SchemaErrorKind::NotFound => "schema not found",
            SchemaErrorKind::Invalid => "schema not usable",
            SchemaErrorKind::Unavailable => "schema source unavailable",
        };
        write!(f, "{}: {class}: {}", self.gvk, self.reason)
    }
}

/// Where the types of kinds come from. Synchronous and free of I/O at call time, so the
/// functional core can use it; the live source does its I/O in `poll`.
pub trait SchemaSource: Send + Sync {
    /// The converted type of a kind (`object`, `oldObject`, `params`). Shared; cheap to call
    /// repeatedly (converted once per kind and document hash).
    fn resolve(&self, gvk: &GroupVersionKind) -> Result<Arc<RootType>, SchemaError>;

    /// The kinds a resource maps to, with RESTMapper `KindsFor` semantics (see
    /// [`RestMapper::kinds_for`]); empty when it maps to none.
    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind>;
}

/// An immutable set of OpenAPI documents plus the resource mapping: the state both the files
/// source and each poll of the live source produce.
#[derive(Debug, Clone)]
pub struct Catalog {
    documents: HashMap<GroupVersion, Arc<OpenApiDocument>>,
    /// GVKs not declared by their own group-version's document → the first document (in
    /// group-version order) that declares them.
    foreign: HashMap<GroupVersionKind, GroupVersion>,
    mapper: RestMapper,
    limits: Limits,
    options: ConvertOptions,
}

impl Catalog {
    /// Builds a catalog. `resources` (a discovery snapshot) gives the resource mapping in
    /// discovery order.
    pub fn new(
        documents: impl IntoIterator<Item = Arc<OpenApiDocument>>,
        resources: &[ApiGroupResources],
        limits: Limits,
        options: ConvertOptions,
    ) -> Self {
        let documents: HashMap<GroupVersion, Arc<OpenApiDocument>> = documents
            .into_iter()
            .map(|d| (d.group_version().clone(), d))
            .collect();
        let mut sorted: Vec<&Arc<OpenApiDocument>> = documents.values().collect();
        sorted.sort_by(|a, b| a.group_version().cmp(b.group_version()));
        let mut foreign = HashMap::new();
        for d in sorted {
            for gvk in d.foreign_kinds() {
                let own_declares = documents
                    .get(&gvk.group_version())
                    .is_some_and(|o| o.declares(gvk));
                if !own_declares && !foreign.contains_key(gvk) {
                    foreign.insert(gvk.clone(), d.group_version().clone());
                }
            }
        }
        Catalog {
            documents,
            foreign,
            mapper: RestMapper::new(resources),
            limits,
            options,
        }
    }

    /// The document of a group-version.
    pub fn document(&self, gv: &GroupVersion) -> Option<&Arc<OpenApiDocument>> {
        self.documents.get(gv)
    }

    /// All documents, sorted by group-version.
    pub fn documents(&self) -> Vec<&Arc<OpenApiDocument>> {
        let mut d: Vec<_> = self.documents.values().collect();
        d.sort_by(|a, b| a.group_version().cmp(b.group_version()));
        d
    }

    /// Every kind declared by a document of its own group-version, sorted.
    pub fn kinds(&self) -> Vec<GroupVersionKind> {
        let mut out: Vec<GroupVersionKind> = self
            .documents
            .values()
            .flat_map(|d| {
                d.kinds()
                    .into_iter()
                    .map(|k| d.group_version().with_kind(k))
            })
            .collect();
        out.sort();
        out
    }

    /// The resource mapping.
    pub fn mapper(&self) -> &RestMapper {
        &self.mapper
    }

    /// The conversion bounds used.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The conversion options used.
    pub fn options(&self) -> ConvertOptions {
        self.options
    }
}

impl SchemaSource for Catalog {
    /// The kind's own group-version document first (upstream's discovery resolver). If that does
    /// not declare it, the first other document that does: built-in subresource kinds such as
    /// `autoscaling/v1 Scale`, `policy/v1 Eviction` or `authentication.k8s.io/v1 TokenRequest`
    /// are only published beside their parent resource, while KCM finds them in its compiled-in
    /// definitions.
    fn resolve(&self, gvk: &GroupVersionKind) -> Result<Arc<RootType>, SchemaError> {
        if let Some(doc) = self.foreign.get(gvk).and_then(|gv| self.documents.get(gv)) {
            return doc
                .resolve_gvk(gvk, self.limits, self.options)
                .map_err(|e| SchemaError::from_kind_error(gvk, &e));
        }
        let gv = gvk.group_version();
        let doc = self.documents.get(&gv).ok_or_else(|| {
            SchemaError::new(
                gvk,
                SchemaErrorKind::NotFound,
                format!(
                    "no OpenAPI document for group-version {gv} (path {})",
                    gv.openapi_path()
                ),
            )
        })?;
        doc.resolve(&gvk.kind, self.limits, self.options)
            .map_err(|e| SchemaError::from_kind_error(gvk, &e))
    }

    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
        self.mapper.kinds_for(gvr)
    }
}
