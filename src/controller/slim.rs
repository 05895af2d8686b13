//! What the controller keeps of each watched object (issue 17, memory): the reflector stores
//! hold every policy, binding and param object for the life of the process, and most of an
//! object's bytes are bookkeeping the controller never reads. Applied to every watch event
//! with kube's `WatchStreamExt::modify`, before the object reaches a store.
//!
//! - `metadata.managedFields`: the controller reads them only to log which manager overwrote
//!   `status.typeChecking` after vapcheck ([`super::status::overwritten_by_other_manager`]).
//!   Kept: one entry for vapcheck (its manager name and the latest time of its entries, all
//!   that is read of them) and the other managers' `status` entries that own
//!   `status.typeChecking`, with only manager, subresource, time and `fieldsV1` reduced to
//!   `{"f:status":{"f:typeChecking":{}}}`; `overwritten_by_other_manager` answers the same on
//!   the slim object (tested below). Before, vapcheck's own entries were kept whole with a
//!   `fieldsV1` of two nested `serde_json` maps: the stored policies' managed fields were
//!   6.8 MiB of the heap at 5,000 policies (heaptrack, docs/controller.md, "Memory").
//! - the `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of the whole
//!   object as last applied by kubectl): its value is emptied, its key kept. The only reader of
//!   a policy's annotations is the `AcceptedOnCreate` check (key syntax and total size); the
//!   key is valid, and a stored object's annotations are within the size limit, so the check
//!   gives the same answer.
//!
//! Param objects are watched as metadata only (`PartialObjectMeta`); their managed fields
//! and last-applied annotation go the same way ([`slim_meta`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
use serde_json::json;

use super::status::FIELD_MANAGER;

/// The annotation `kubectl apply` writes.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from `meta` what no part of the controller reads (see the module docs).
pub fn slim_meta(meta: &mut ObjectMeta) {
    if let Some(annotations) = meta.annotations.as_mut()
        && let Some(value) = annotations.get_mut(LAST_APPLIED)
    {
        *value = String::new();
    }
    if let Some(fields) = meta.managed_fields.take() {
        // vapcheck's entries: only the latest time is read, so they become one entry with the
        // manager and that time.
        let mut ours: Option<ManagedFieldsEntry> = None;
        let mut kept = Vec::new();
        for f in fields {
            if f.manager.as_deref() == Some(FIELD_MANAGER) {
                let previous = ours.take().and_then(|o| o.time);
                let time = match (previous, f.time) {
                    (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
                    (a, b) => a.or(b),
                };
                ours = Some(ManagedFieldsEntry {
                    manager: f.manager,
                    time,
                    ..ManagedFieldsEntry::default()
                });
                continue;
            }
            let owns_type_checking = f
                .fields_v1
                .as_ref()
                .and_then(|v| v.0.pointer("/f:status/f:typeChecking"))
                .is_some();
            if f.subresource.as_deref() == Some("status") && owns_type_checking {
                kept.push(ManagedFieldsEntry {
                    manager: f.manager,
                    subresource: f.subresource,
                    time: f.time,
                    fields_v1: Some(FieldsV1(json!({"f:status": {"f:typeChecking": {}}}))),
                    ..ManagedFieldsEntry::default()
                });
            }
        }
        kept.extend(ours);
        kept.shrink_to_fit();
        meta.managed_fields = (!kept.is_empty()).then_some(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::status::{UPSTREAM_FIELD_MANAGER, overwritten_by_other_manager};
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::Value;

    fn entry(
        manager: &str,
        subresource: Option<&str>,
        secs: i64,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            subresource: subresource.map(Into::into),
            time: Some(Time(Timestamp::from_second(secs).unwrap())),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    fn policy(entries: Vec<ManagedFieldsEntry>) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            metadata: ObjectMeta {
                managed_fields: Some(entries),
                ..ObjectMeta::default()
            },
            ..ValidatingAdmissionPolicy::default()
        }
    }

    fn spec_fields() -> Value {
        json!({"f:spec": {"f:validations": {}, "f:matchConstraints": {"f:resourceRules": {}}}})
    }

    fn type_checking() -> Value {
        json!({"f:status": {"f:typeChecking": {".": {}, "f:expressionWarnings": {}}, "f:observedGeneration": {}}})
    }

    fn conditions() -> Value {
        json!({"f:status": {"f:conditions": {}}})
    }

    /// Every combination of a few entries: the slim object gives the same answer.
    #[test]
    fn overwritten_by_other_manager_answers_the_same_on_the_slim_object() {
        let pool = [
            entry("kubectl", None, 5, spec_fields()),
            entry(FIELD_MANAGER, Some("status"), 10, type_checking()),
            entry(FIELD_MANAGER, Some("status"), 30, conditions()),
            entry(UPSTREAM_FIELD_MANAGER, Some("status"), 20, type_checking()),
            entry(UPSTREAM_FIELD_MANAGER, Some("status"), 40, type_checking()),
            entry("someone", Some("status"), 50, conditions()),
            entry("someone", None, 60, type_checking()),
        ];
        let mut answers = std::collections::BTreeSet::new();
        for mask in 0u32..(1 << pool.len()) {
            let entries: Vec<_> = pool
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, e)| e.clone())
                .collect();
            let full = policy(entries);
            let mut slim = full.clone();
            slim_meta(&mut slim.metadata);
            let answer = overwritten_by_other_manager(&full);
            assert_eq!(
                overwritten_by_other_manager(&slim),
                answer,
                "entries {mask:#b}"
            );
            answers.insert(answer);
        }
        // Both answers occur, so the comparison is not vacuous.
        assert!(answers.contains(&None));
        assert!(answers.contains(&Some(UPSTREAM_FIELD_MANAGER.to_owned())));
    }

    #[test]
    fn keeps_only_status_and_own_entries_with_minimal_fields() {
        let mut p = policy(vec![
            entry("kubectl", None, 5, spec_fields()),
            entry(FIELD_MANAGER, Some("status"), 10, type_checking()),
            entry(FIELD_MANAGER, Some("status"), 30, conditions()),
            entry("someone", Some("status"), 50, conditions()),
            entry(UPSTREAM_FIELD_MANAGER, Some("status"), 60, type_checking()),
        ]);
        slim_meta(&mut p.metadata);
        let kept = p.metadata.managed_fields.unwrap();
        let minimal = Some(json!({"f:status": {"f:typeChecking": {}}}));
        let summary: Vec<_> = kept
            .iter()
            .map(|f| {
                (
                    f.manager.as_deref(),
                    f.time.as_ref().map(|t| t.0.as_second()),
                    f.fields_v1.as_ref().map(|v| v.0.clone()),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (Some(UPSTREAM_FIELD_MANAGER), Some(60), minimal),
                // vapcheck's two entries as one, with the later time.
                (Some(FIELD_MANAGER), Some(30), None),
            ]
        );

        let mut only_spec = policy(vec![entry("kubectl", None, 5, spec_fields())]);
        slim_meta(&mut only_spec.metadata);
        assert_eq!(only_spec.metadata.managed_fields, None);
    }

    #[test]
    fn last_applied_value_is_emptied_other_annotations_kept() {
        let mut meta = ObjectMeta {
            annotations: Some(
                [
                    (LAST_APPLIED.to_owned(), "{\"big\":\"copy\"}".to_owned()),
                    ("team".to_owned(), "a".to_owned()),
                ]
                .into_iter()
                .collect(),
            ),
            ..ObjectMeta::default()
        };
        slim_meta(&mut meta);
        let annotations = meta.annotations.unwrap();
        assert_eq!(annotations.get(LAST_APPLIED).map(String::as_str), Some(""));
        assert_eq!(annotations.get("team").map(String::as_str), Some("a"));
    }
}
