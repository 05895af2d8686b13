//! The statuses of the policies checked before, taken instead of checking again: a caller that
//! checks the same folder again and again (the editor server, through `crate::cli::reuse`)
//! keeps them from one check to the next with the same backends.
//!
//! A policy's status ([`super::analyse_policy`], [`super::analyse_mutating_policy`]) depends
//! only on the policy object, the params its bindings evaluate it with, the check options and
//! the backends; so a status is kept by the serialised object and the options, and the caller
//! drops them all when the backends change.

use std::collections::HashMap;

use crate::policy::{CheckOptions, PolicyStatus};

/// The statuses of one check: those kept from the last check, and those of this one (left in
/// the caller's map for the next).
pub struct Memo<'a> {
    kept: HashMap<String, PolicyStatus>,
    statuses: &'a mut HashMap<String, PolicyStatus>,
    checked: &'a mut usize,
    reused: &'a mut usize,
}

impl<'a> Memo<'a> {
    /// A check that takes the statuses in `statuses` (the last check's) and leaves its own
    /// there (the statuses it does not ask for are dropped: a policy edited away is not
    /// kept); it counts the policies checked and those reused in `checked` and `reused`.
    pub fn new(
        statuses: &'a mut HashMap<String, PolicyStatus>,
        checked: &'a mut usize,
        reused: &'a mut usize,
    ) -> Memo<'a> {
        Memo {
            kept: std::mem::take(statuses),
            statuses,
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
