//! The core's built-in OpenAPI documents ([`vapcheck_core::schema::embedded`], re-exported
//! whole), and [`write_folder`], which lays a version out on disk the way `--openapi` reads it.

use std::path::Path;

pub use vapcheck_core::schema::embedded::*;

/// Writes the documents of `minor` under `dir` (created), as `--openapi DIR` expects them.
pub fn write_folder(minor: &str, dir: &Path) -> Result<(), String> {
    for (path, text) in documents(minor)? {
        let file = dir.join(&path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}
