//! OpenAPI v3 schemas to CEL types, and the trait of the sources that supply schemas.
//!
//! - [`types`]: the declaration-type model ([`DeclType`], [`ObjectType`], [`RootType`]) with
//!   deterministic, path-derived object type names.
//! - [`convert`]: upstream's `SchemaDeclType` + ref inlining over an OpenAPI v3 document.
//! - [`escape`]: property-name escaping.
//! - [`document`], [`mapper`], [`crd`]: OpenAPI documents, RESTMapper semantics, CRD manifests.
//! - [`discovery`]: the one discovery snapshot ([`ApiGroupResources`]) the mapper, the sources
//!   and the policy checks read.
//! - [`source`]: the [`SchemaSource`] trait and [`Catalog`]; `files` and `live`, which do I/O,
//!   implement it in the sources crate (crates/sources/src/schema).
//!
//! Design notes and the list of deliberate upstream facts are in `docs/schemas.md`.

pub mod convert;
pub mod crd;
pub mod describe;
pub mod discovery;
pub mod document;
pub mod embedded;
pub mod escape;
pub mod gvk;
pub mod mapper;
pub mod sizes;
pub mod source;
pub mod types;

pub use convert::{Components, ConvertError, ConvertOptions, Limits};
pub use discovery::{ApiGroupResources, ApiResource, ApiVersionResources};
pub use document::DocumentIndex;
pub use document::{KindError, OpenApiDocument};
pub use gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
pub use mapper::{ResourceInfo, RestMapper, SubresourceInfo};
pub use source::{Catalog, SchemaError, SchemaErrorKind, SchemaSource};
pub use types::{DeclType, ObjectType, RootType, Scalar};
