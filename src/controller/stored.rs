//! What the controller's policy store holds of each ValidatingAdmissionPolicy (issue 17,
//! memory). The reflector store keeps every policy for the life of the process, and a typed
//! `ValidatingAdmissionPolicy` (spec and status as `String`s, vectors and maps) was the largest
//! part of the live heap at 5,000 policies (docs/controller.md, "Memory").
//!
//! [`StoredPolicy`] keeps:
//! - `metadata`, slim ([`super::slim::slim_meta`]): names, uid, resource version, generation,
//!   deletion timestamp, labels and annotations (the store key, object references for Events,
//!   the `AcceptedOnCreate` check of annotations, and the managed fields that
//!   [`super::status::overwritten_by_other_manager`] reads);
//! - `spec.paramKind`, unpacked (read for every stored policy when a param kind's watch
//!   changes, [`super::bindings`]);
//! - spec and status as one deflate-compressed JSON document, unpacked by
//!   [`StoredPolicy::unpack`] at the start of each reconcile (the check needs the whole spec,
//!   the status diff the whole status).
//!
//! It deserialises from the API server's JSON like `ValidatingAdmissionPolicy` (it is read
//! through that type), slimmed and packed as each object is decoded, so neither a list
//! response nor a watch event keeps a typed copy beside the packed one.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use k8s_openapi::api::admissionregistration::v1::{
    ParamKind, ValidatingAdmissionPolicy, ValidatingAdmissionPolicySpec,
    ValidatingAdmissionPolicyStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

use super::slim::slim_meta;

/// A policy as the controller's store keeps it (see the module docs).
#[derive(Clone, Debug)]
pub struct StoredPolicy {
    /// The policy's metadata, slim.
    pub metadata: ObjectMeta,
    /// `spec.paramKind`.
    pub param_kind: Option<ParamKind>,
    /// Deflate-compressed JSON of [`Body`], or why packing failed (reported by `unpack`).
    packed: Result<Box<[u8]>, String>,
}

/// The packed part of a policy.
#[derive(Serialize, Deserialize)]
struct Body {
    spec: Option<ValidatingAdmissionPolicySpec>,
    status: Option<ValidatingAdmissionPolicyStatus>,
}

impl StoredPolicy {
    /// Slims and packs `policy`.
    pub fn pack(policy: ValidatingAdmissionPolicy) -> StoredPolicy {
        let ValidatingAdmissionPolicy {
            mut metadata,
            spec,
            status,
        } = policy;
        slim_meta(&mut metadata);
        let param_kind = spec.as_ref().and_then(|s| s.param_kind.clone());
        let packed = deflate(&Body { spec, status });
        StoredPolicy {
            metadata,
            param_kind,
            packed,
        }
    }

    /// The policy again: slim metadata, the whole spec and status.
    pub fn unpack(&self) -> Result<ValidatingAdmissionPolicy, String> {
        let packed = self.packed.as_ref().map_err(Clone::clone)?;
        let mut json = Vec::with_capacity(packed.len() * 4);
        DeflateDecoder::new(&packed[..])
            .read_to_end(&mut json)
            .map_err(|e| format!("unpacking the stored policy: {e}"))?;
        let body: Body = serde_json::from_slice(&json)
            .map_err(|e| format!("unpacking the stored policy: {e}"))?;
        Ok(ValidatingAdmissionPolicy {
            metadata: self.metadata.clone(),
            spec: body.spec,
            status: body.status,
        })
    }

    /// Bytes of the packed spec and status (for tests and measurements).
    pub fn packed_len(&self) -> usize {
        self.packed.as_ref().map_or(0, |p| p.len())
    }
}

fn deflate(body: &Body) -> Result<Box<[u8]>, String> {
    let json = serde_json::to_vec(body).map_err(|e| format!("packing the policy: {e}"))?;
    // Level 1: the bodies are small and written at every status change; the ratio of higher
    // levels is barely better on policy JSON.
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(json.len() / 3), Compression::fast());
    encoder
        .write_all(&json)
        .map_err(|e| format!("packing the policy: {e}"))?;
    let out = encoder
        .finish()
        .map_err(|e| format!("packing the policy: {e}"))?;
    Ok(out.into_boxed_slice())
}

impl<'de> Deserialize<'de> for StoredPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ValidatingAdmissionPolicy::deserialize(deserializer).map(StoredPolicy::pack)
    }
}

impl k8s_openapi::Resource for StoredPolicy {
    const API_VERSION: &'static str =
        <ValidatingAdmissionPolicy as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <ValidatingAdmissionPolicy as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <ValidatingAdmissionPolicy as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <ValidatingAdmissionPolicy as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str =
        <ValidatingAdmissionPolicy as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <ValidatingAdmissionPolicy as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for StoredPolicy {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::slim::LAST_APPLIED;
    use kube::ResourceExt;

    fn corpus_like() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {
                "name": "p",
                "uid": "u-1",
                "resourceVersion": "42",
                "generation": 3,
                "annotations": {LAST_APPLIED: "{\"a\":1}", "team": "x"},
                "managedFields": [{
                    "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:validations": {}}}
                }]
            },
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]
                }]},
                "validations": [
                    {"expression": "object.spec.replicas <= params.data.max", "message": "too many"},
                    {"expression": "object.metadata.name.startsWith('x')"}
                ],
                "failurePolicy": "Fail"
            },
            "status": {
                "observedGeneration": 3,
                "typeChecking": {"expressionWarnings": [
                    {"fieldRef": "spec.validations[0].expression", "warning": "w"}
                ]},
                "conditions": [{
                    "type": "TypeChecked", "status": "True", "reason": "AllKindsChecked",
                    "message": "m", "lastTransitionTime": "2026-11-25T10:00:00Z"
                }]
            }
        })
    }

    #[test]
    fn unpack_gives_back_the_slim_policy() {
        let json = corpus_like();
        let stored: StoredPolicy = serde_json::from_value(json.clone()).unwrap();
        let mut want: ValidatingAdmissionPolicy = serde_json::from_value(json).unwrap();
        slim_meta(&mut want.metadata);
        let got = stored.unpack().unwrap();
        assert_eq!(got, want);
        assert_eq!(stored.name_any(), "p");
        assert_eq!(
            stored.param_kind.as_ref().and_then(|p| p.kind.as_deref()),
            Some("ConfigMap")
        );
        // slim_meta ran: kubectl's managed fields are gone, the last-applied value emptied.
        assert!(got.metadata.managed_fields.is_none());
        assert_eq!(
            got.metadata.annotations.as_ref().unwrap().get(LAST_APPLIED),
            Some(&String::new())
        );
    }

    #[test]
    fn a_policy_without_spec_or_status_round_trips() {
        let json = serde_json::json!({"metadata": {"name": "bare"}});
        let stored: StoredPolicy = serde_json::from_value(json).unwrap();
        let got = stored.unpack().unwrap();
        assert_eq!(got.spec, None);
        assert_eq!(got.status, None);
        assert_eq!(stored.param_kind, None);
    }

    #[test]
    fn the_packed_body_is_smaller_than_its_json() {
        let json = corpus_like();
        let stored: StoredPolicy = serde_json::from_value(json.clone()).unwrap();
        let plain = serde_json::to_vec(&serde_json::json!({
            "spec": json["spec"], "status": json["status"]
        }))
        .unwrap();
        assert!(stored.packed_len() > 0);
        assert!(
            stored.packed_len() < plain.len(),
            "{} packed vs {} plain",
            stored.packed_len(),
            plain.len()
        );
    }

    #[test]
    fn a_list_response_decodes_into_stored_policies() {
        let list = serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyList",
            "metadata": {"resourceVersion": "7"},
            "items": [corpus_like(), {"metadata": {"name": "q"}, "spec": {}}]
        });
        let parsed: kube::core::ObjectList<StoredPolicy> = serde_json::from_value(list).unwrap();
        let names: Vec<String> = parsed.items.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["p", "q"]);
        assert!(parsed.items[1].unpack().unwrap().spec.is_some());
    }
}
