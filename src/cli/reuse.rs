//! What a caller that checks the same folder again and again (the editor server,
//! `crate::lsp`) keeps from one check to the next, so that an edit re-checks only the
//! policies it changed: the backends (schemas, REST mapping, the CEL checker) and the status
//! of every policy checked with them.
//!
//! A policy's status ([`crate::policy::check_policy`],
//! [`crate::mutating::check_mutating_policy`]) depends only on the policy object, the check
//! options and the backends; its place in the file, its bindings and their params are applied
//! afterwards, to every entry, on each check. So a status is kept by the policy's content and
//! the options, and all of them are dropped when the backends are loaded again (other schema
//! options, or the caller's [`Reuse::forget`] after a file on disk changed: a CRD the settings
//! name is read from disk). What is taken from here is what checking again would give.

use std::collections::HashMap;

use super::{BackendProvider, LoadedBackends, SchemaOptions};
use crate::policy::PolicyStatus;

/// The backends and statuses kept between checks, and how the last check used them.
#[derive(Default)]
pub struct Reuse {
    loaded: Option<Loaded>,
    /// Of the last check: how many policies were checked.
    pub checked: usize,
    /// Of the last check: how many policies' statuses were taken from the one before.
    pub reused: usize,
}

struct Loaded {
    options: SchemaOptions,
    backends: LoadedBackends,
    statuses: HashMap<String, PolicyStatus>,
}

/// The backends of one check and the statuses to reuse in it ([`Reuse::begin`]).
pub(super) struct Pass<'a> {
    pub backends: &'a LoadedBackends,
    kept: HashMap<String, PolicyStatus>,
    statuses: &'a mut HashMap<String, PolicyStatus>,
    checked: &'a mut usize,
    reused: &'a mut usize,
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

    /// Starts a check with the backends of `options` (the counts are the caller's to reset). The statuses the check does not ask for
    /// are dropped (a policy edited away is not kept).
    pub(super) fn begin(
        &mut self,
        options: &SchemaOptions,
        provider: &dyn BackendProvider,
    ) -> Result<Pass<'_>, String> {
        let Reuse {
            loaded,
            checked,
            reused,
        } = self;
        let Loaded {
            backends, statuses, ..
        } = load(loaded, options, provider)?;
        Ok(Pass {
            backends,
            kept: std::mem::take(statuses),
            statuses,
            checked,
            reused,
        })
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
            statuses: HashMap::new(),
        });
    }
    loaded
        .as_mut()
        .ok_or_else(|| "the backends were not loaded".to_owned())
}

impl Pass<'_> {
    /// The status of the policy `object` (serialised as the key, with `options`): the one kept
    /// for the same key, else `check()`'s. An object that does not serialise is checked.
    pub fn status<T: serde::Serialize>(
        &mut self,
        object: &T,
        options: &crate::policy::CheckOptions,
        check: impl FnOnce() -> PolicyStatus,
    ) -> PolicyStatus {
        let Ok(json) = serde_json::to_string(object) else {
            *self.checked += 1;
            return check();
        };
        let key = format!("{}\n{options:?}\n{json}", std::any::type_name::<T>());
        if let Some(s) = self.statuses.get(&key) {
            *self.reused += 1;
            return s.clone();
        }
        let status = match self.kept.remove(&key) {
            Some(s) => {
                *self.reused += 1;
                s
            }
            None => {
                *self.checked += 1;
                check()
            }
        };
        self.statuses.insert(key, status.clone());
        status
    }
}
