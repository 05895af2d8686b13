//! The core's schemas ([`vapcheck_core::schema`], re-exported whole) and the sources of them
//! that do I/O: [`files`] (`--openapi` folders and CRD files) and [`live`] (the API server).

pub use vapcheck_core::schema::*;

pub mod embedded;
pub mod files;
pub mod live;

pub use files::{FilesConfig, FilesError, FilesSource};
pub use live::{Changes, LiveError, LiveSource};
