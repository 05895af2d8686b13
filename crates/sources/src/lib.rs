//! vapcheck-sources: the sources of schemas and discovery that do I/O, over the I/O-free
//! core (`vapcheck-core`): OpenAPI folders and CRD files ([`schema::files`]), the live API
//! server ([`schema::live`]), the built-in documents laid out on disk
//! ([`schema::embedded::write_folder`]), and the API server's aggregated discovery
//! ([`discovery`]). `vapcheck` re-exports [`schema`] as `crate::schema` and [`discovery`] as
//! `crate::sources` (docs/architecture.md).

// The core's modules under the names the moved files use (`crate::policy::...`).
use vapcheck_core::policy;

pub mod discovery;
pub mod schema;
