//! Test support shared by the controller's corpus tests (`findings_corpus`, `inputs`): the
//! offline backends of the built-in Kubernetes 1.37 kinds, as `vapcheck check` uses them by
//! default, and the corpus files' texts.

use crate::policy::{Backends, DiscoveryRestMapper};

/// The schemas, checker and REST mapper of the built-in 1.37 kinds (written to a scratch
/// `--openapi` folder, read back, and the folder removed).
pub(super) struct BuiltIn {
    schemas: Box<dyn crate::policy::SchemaSource>,
    checker: Box<dyn crate::policy::ExpressionChecker>,
    mapper: DiscoveryRestMapper,
}

impl BuiltIn {
    /// Loads them; `name` keeps concurrent tests' scratch folders apart.
    pub(super) fn load(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("vapcheck-{name}-{}", std::process::id()));
        crate::schema::embedded::write_folder("1.37", &dir).expect("built-in schemas");
        let options = crate::cli::SchemaOptions {
            openapi: Some(dir.clone()),
            ..crate::cli::SchemaOptions::default()
        };
        let (schemas, checker) = crate::cli::offline_backends(&options).expect("backends");
        let mapper = DiscoveryRestMapper::new(
            crate::cli::discovery::offline_discovery(Some(&dir), None, &[]).expect("discovery"),
        );
        let _ = std::fs::remove_dir_all(&dir);
        Self {
            schemas,
            checker,
            mapper,
        }
    }

    /// The backends over them.
    pub(super) fn backends(&self) -> Backends<'_> {
        Backends {
            rest_mapper: &self.mapper,
            discovery: Some(&self.mapper),
            schemas: self.schemas.as_ref(),
            checker: self.checker.as_ref(),
        }
    }
}

/// The YAML files of `../shared/<dir>`, each as (path, text).
pub(super) fn corpus_texts(dir: &str) -> Vec<(String, String)> {
    crate::schema::shared_yaml_files(dir)
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("corpus file");
            (p.display().to_string(), text)
        })
        .collect()
}
