//! The statuses of the policies checked before, taken instead of checking again: a caller that
//! checks the same folder again and again (the editor server, through `crate::cli::reuse`)
//! keeps them from one check to the next with the same backends.
//!
//! A policy's status ([`super::analyse_policy`], [`super::analyse_mutating_policy`]) depends
//! only on the policy object, the params its bindings evaluate it with, the check options and
//! the backends; so a status is kept by the serialised object and the options, and the caller
//! drops them all when the backends change. kube-apiserver's verdict on a validating policy
//! or binding depends only on the object, its stored version and the server's version (no
//! backends: [`crate::apiserver::validate_policy_create`] compiles in its own environments),
//! so it is kept by those.

use std::collections::HashMap;

use super::entry::ApiServerVerdict;
use crate::policy::{CheckOptions, PolicyStatus};

/// What a caller keeps between checks: the statuses and the API server's verdicts, each by
/// its key ([`Memo::status`], [`Memo::verdict`]).
#[derive(Default)]
pub struct Kept {
    /// Policy statuses.
    pub statuses: HashMap<String, PolicyStatus>,
    /// Verdicts on validating policies and bindings.
    pub verdicts: HashMap<String, ApiServerVerdict>,
}

/// The results of one check: those kept from the last check, and those of this one (left in
/// the caller's maps for the next).
pub struct Memo<'a> {
    old: Kept,
    kept: &'a mut Kept,
    checked: &'a mut usize,
    reused: &'a mut usize,
}

/// The value kept for `key` in this check's `now` or the last check's `old` (moved to `now`),
/// else `make()`'s (kept in `now`); whether it was kept.
fn take_or_make<V: Clone>(
    now: &mut HashMap<String, V>,
    old: &mut HashMap<String, V>,
    key: String,
    make: impl FnOnce() -> V,
) -> (V, bool) {
    if let Some(v) = now.get(&key) {
        return (v.clone(), true);
    }
    let (v, was_kept) = match old.remove(&key) {
        Some(v) => (v, true),
        None => (make(), false),
    };
    now.insert(key, v.clone());
    (v, was_kept)
}

impl<'a> Memo<'a> {
    /// A check that takes the results in `kept` (the last check's) and leaves its own there
    /// (those it does not ask for are dropped: a policy edited away is not kept); it counts
    /// the policies checked and those reused in `checked` and `reused`.
    pub fn new(kept: &'a mut Kept, checked: &'a mut usize, reused: &'a mut usize) -> Memo<'a> {
        Memo {
            old: std::mem::take(kept),
            kept,
            checked,
            reused,
        }
    }

    /// The status of the policy `object` (serialised as the key, with `options`): the one kept
    /// for the same key, else `check()`'s. An object that does not serialise is checked.
    pub fn status<T: serde::Serialize>(
        &mut self,
        object: &T,
        options: &CheckOptions,
        check: impl FnOnce() -> PolicyStatus,
    ) -> PolicyStatus {
        let Ok(json) = serde_json::to_string(object) else {
            *self.checked += 1;
            return check();
        };
        let key = format!("{}\n{options:?}\n{json}", std::any::type_name::<T>());
        let (status, was_kept) =
            take_or_make(&mut self.kept.statuses, &mut self.old.statuses, key, check);
        if was_kept {
            *self.reused += 1;
        } else {
            *self.checked += 1;
        }
        status
    }

    /// kube-apiserver's verdict on `object` (of kind `kind`, with its stored version `stored`,
    /// by the API server of minor version `server_minor`; all serialised as the key): the one
    /// kept for the same key, else `verdict()`'s. An object that does not serialise is
    /// verdicted again. Not counted: the counts are of type checks.
    pub fn verdict<T: serde::Serialize>(
        &mut self,
        kind: &str,
        object: &T,
        stored: Option<&T>,
        server_minor: u32,
        verdict: impl FnOnce() -> ApiServerVerdict,
    ) -> ApiServerVerdict {
        let (Ok(json), Ok(stored)) = (
            serde_json::to_string(object),
            serde_json::to_string(&stored),
        ) else {
            return verdict();
        };
        let key = format!("{kind}\n{server_minor}\n{stored}\n{json}");
        take_or_make(
            &mut self.kept.verdicts,
            &mut self.old.verdicts,
            key,
            verdict,
        )
        .0
    }
}
