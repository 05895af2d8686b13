//! What a caller that checks the same folder again and again (the editor server,
//! `crate::lsp`) keeps from one check to the next, so that an edit re-checks only the
//! policies it changed: the backends (schemas, REST mapping, the CEL checker), the status
//! of every policy checked with them, and kube-apiserver's verdict on every validating policy
//! and binding (which depends only on the object, its stored version and the server version).
//!
//! A policy's status ([`crate::policy::check_policy`],
//! [`crate::mutating::check_mutating_policy`]) depends only on the policy object, the check
//! options and the backends; its place in the file, its bindings and their params are applied
//! afterwards, to every entry, on each check. So a status is kept by the policy's content and
//! the options, and all of them are dropped when the backends are loaded again (other schema
//! options, or the caller's [`Reuse::forget`] after a file on disk changed: a CRD the settings
//! name is read from disk). What is taken from here is what checking again would give.

use super::{BackendProvider, LoadedBackends, SchemaOptions};
use crate::analysis::{Kept, Memo};

/// The backends and statuses kept between checks, and how the last check used them.
#[derive(Default)]
pub struct Reuse {
    loaded: Option<Loaded>,
    /// Of the last check: how many policies were checked.
    pub checked: usize,
    /// Of the last check: how many policies' statuses were taken from the one before.
    pub reused: usize,
    /// The places of the last check's findings in their documents (they depend only on the
    /// documents' text: kept when the backends are loaded again).
    pub(super) places: super::emit::locate::Places,
}

struct Loaded {
    options: SchemaOptions,
    backends: LoadedBackends,
    /// The statuses and the API server's verdicts of the last check.
    kept: Kept,
}

impl Reuse {
    /// Drops the backends and every status kept: the next check loads them again.
    pub fn forget(&mut self) {
        self.loaded = None;
    }

    /// The backends kept, if any.
    pub fn loaded(&self) -> Option<&LoadedBackends> {
        self.loaded.as_ref().map(|l| &l.backends)
    }

    /// The backends loaded with `options`: those kept when they were loaded with the same
    /// options, else loaded now by `provider` (the statuses kept are then dropped).
    pub fn backends(
        &mut self,
        options: &SchemaOptions,
        provider: &dyn BackendProvider,
    ) -> Result<&LoadedBackends, String> {
        Ok(&load(&mut self.loaded, options, provider)?.backends)
    }

    /// Starts a check with the backends of `options` (the counts are the caller's to reset):
    /// the backends, and the statuses to reuse in it ([`Memo`], which drops those the check
    /// does not ask for: a policy edited away is not kept).
    pub(super) fn begin(
        &mut self,
        options: &SchemaOptions,
        provider: &dyn BackendProvider,
    ) -> Result<(&LoadedBackends, Memo<'_>), String> {
        let Reuse {
            loaded,
            checked,
            reused,
            ..
        } = self;
        let Loaded { backends, kept, .. } = load(loaded, options, provider)?;
        Ok((&*backends, Memo::new(kept, checked, reused)))
    }
}

/// The backends kept in `loaded` when loaded with `options`, else loaded now by `provider`
/// (with no statuses).
fn load<'a>(
    loaded: &'a mut Option<Loaded>,
    options: &SchemaOptions,
    provider: &dyn BackendProvider,
) -> Result<&'a mut Loaded, String> {
    if loaded.as_ref().is_some_and(|l| l.options != *options) {
        *loaded = None;
    }
    if loaded.is_none() {
        *loaded = Some(Loaded {
            options: options.clone(),
            backends: provider.load(options)?,
            kept: Kept::default(),
        });
    }
    loaded
        .as_mut()
        .ok_or_else(|| "the backends were not loaded".to_owned())
}
