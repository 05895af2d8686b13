//! OpenAPI v3 schemas to CEL types, and the sources that supply schemas.
//!
//! - [`types`]: the declaration-type model ([`DeclType`], [`ObjectType`], [`RootType`]) with
//!   deterministic, path-derived object type names.
//! - [`convert`]: upstream's `SchemaDeclType` + ref inlining over an OpenAPI v3 document.
//! - [`escape`]: property-name escaping.
//! - [`document`], [`mapper`], [`crd`]: OpenAPI documents, RESTMapper semantics, CRD manifests.
//! - [`discovery`]: the one discovery snapshot ([`ApiGroupResources`]) the mapper, the sources
//!   and the policy checks read.
//! - [`source`]: the [`SchemaSource`] trait and [`Catalog`]; [`files`] and [`live`] implement it.
//!
//! Design notes and the list of deliberate upstream facts are in `docs/schemas.md`.

pub mod convert;
pub mod crd;
pub mod discovery;
pub mod document;
pub mod embedded;
pub mod escape;
pub mod files;
pub mod gvk;
pub mod live;
pub mod mapper;
pub mod sizes;
pub mod source;
pub mod types;

pub use convert::{Components, ConvertError, ConvertOptions, Limits};
pub use discovery::{ApiGroupResources, ApiResource, ApiVersionResources};
pub use document::DocumentIndex;
pub use document::{KindError, OpenApiDocument};
pub use files::{FilesConfig, FilesError, FilesSource};
pub use gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
pub use live::{Changes, LiveError, LiveSource};
pub use mapper::{ResourceInfo, RestMapper, SubresourceInfo};
pub use source::{Catalog, SchemaError, SchemaErrorKind, SchemaSource};
pub use types::{DeclType, ObjectType, RootType, Scalar};

/// The YAML files below `dir` of the shared folder (e.g. `corpus/policies`), sorted. Tests.
#[cfg(test)]
pub(crate) fn shared_yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("corpus folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    // The read-only `shared/` folder beside the repository (tests only).
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    walk(&shared.join(dir), &mut files);
    files.sort();
    files
}
