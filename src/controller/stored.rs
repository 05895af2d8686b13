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
//! It deserialises from the API server's JSON: the metadata typed and slimmed, `paramKind`
//! typed, and spec and status kept as their JSON text, which is packed as it is, so neither a
//! list response nor a watch event builds a typed spec and status only to encode them again
//! (the text is decoded, typed, when a reconcile unpacks it).

use std::io::Read;

use flate2::read::DeflateDecoder;
use flate2::{Compress, Compression, FlushCompress, Status};
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
    deflate_bytes(&json)
}

fn deflate_bytes(json: &[u8]) -> Result<Box<[u8]>, String> {
    thread_local! {
        /// One compressor per thread, reset for each body: a new one allocates (and the
        /// allocator maps and unmaps) a few hundred KiB of tables for every watch event,
        /// about 1 % of the controller's CPU at a 5,000-policy cold start.
        static COMPRESSOR: std::cell::RefCell<Compress> = std::cell::RefCell::new(new_compressor());
    }
    COMPRESSOR.with(|kept| match kept.try_borrow_mut() {
        Ok(mut c) => compress(&mut c, json),
        Err(_) => compress(&mut new_compressor(), json),
    })
}

/// Raw deflate (no zlib header), level 1: the bodies are small and written at every status
/// change; the ratio of higher levels is barely better on policy JSON.
fn new_compressor() -> Compress {
    Compress::new(Compression::fast(), false)
}

/// Compresses `input` as one whole stream with `c` (reset first).
fn compress(c: &mut Compress, input: &[u8]) -> Result<Box<[u8]>, String> {
    c.reset();
    let mut out: Vec<u8> = Vec::with_capacity(input.len() / 3 + 64);
    loop {
        let consumed = usize::try_from(c.total_in()).unwrap_or(input.len());
        let rest = input.get(consumed..).unwrap_or_default();
        match c.compress_vec(rest, &mut out, FlushCompress::Finish) {
            Ok(Status::StreamEnd) => return Ok(out.into_boxed_slice()),
            // Out of room: more, so each round makes progress.
            Ok(Status::Ok | Status::BufError) => out.reserve(out.capacity().max(256)),
            Err(e) => return Err(format!("packing the policy: {e}")),
        }
    }
}

/// A policy as the API server sends it, with spec and status kept as their JSON text: the
/// store packs that text as it is, so a watch event or list item is never decoded into typed
/// spec and status only to be encoded again (7.8 % of the controller's profile samples were
/// in that decode at a 5,000-policy cold start, docs/controller.md). The text is decoded, typed, by
/// [`StoredPolicy::unpack`].
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    status: Option<Box<serde_json::value::RawValue>>,
}

/// `spec.paramKind` alone (the rest of the spec is skipped).
#[derive(Deserialize)]
struct ParamKindOnly {
    #[serde(rename = "paramKind", default)]
    param_kind: Option<ParamKind>,
}

impl StoredPolicy {
    /// Slims the metadata and packs spec and status from their JSON text.
    fn pack_wire(wire: Wire) -> Result<StoredPolicy, serde_json::Error> {
        let Wire {
            mut metadata,
            spec,
            status,
        } = wire;
        slim_meta(&mut metadata);
        let param_kind = match &spec {
            Some(spec) => serde_json::from_str::<ParamKindOnly>(spec.get())?.param_kind,
            None => None,
        };
        fn text(raw: &Option<Box<serde_json::value::RawValue>>) -> &[u8] {
            raw.as_ref().map_or("null", |r| r.get()).as_bytes()
        }
        let (spec, status) = (text(&spec), text(&status));
        let mut json = Vec::with_capacity(spec.len() + status.len() + 20);
        json.extend_from_slice(b"{\"spec\":");
        json.extend_from_slice(spec);
        json.extend_from_slice(b",\"status\":");
        json.extend_from_slice(status);
        json.push(b'}');
        Ok(StoredPolicy {
            metadata,
            param_kind,
            packed: deflate_bytes(&json),
        })
    }
}

impl<'de> Deserialize<'de> for StoredPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        StoredPolicy::pack_wire(wire).map_err(serde::de::Error::custom)
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

    /// The one compressor of a thread, reset between bodies, packs one body after another
    /// (small, incompressible and large ones, whose output outgrows the first buffer) so
    /// that each unpacks to itself.
    #[test]
    fn bodies_packed_one_after_another_unpack_to_themselves() {
        // Pseudo-random text: deflate cannot shrink it, so the output needs more room than
        // the first guess (a third of the input).
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: String = (0..200_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'!' + u8::try_from(state % 90).unwrap_or(0))
            })
            .collect();
        let with_expression = |name: &str, expression: &str| {
            serde_json::json!({
                "metadata": {"name": name},
                "spec": {"validations": [{"expression": expression}]}
            })
        };
        let bodies = [
            corpus_like(),
            with_expression("noise", &noise),
            with_expression("small", "true"),
            with_expression("long", &"object.spec.replicas > 1 && ".repeat(5_000)),
            corpus_like(),
        ];
        for json in bodies {
            let stored: StoredPolicy = serde_json::from_value(json.clone()).unwrap();
            let back = stored.unpack().expect("unpacks");
            let want: ValidatingAdmissionPolicy = serde_json::from_value(json).unwrap();
            assert_eq!(back.spec, want.spec, "{:?}", want.metadata.name);
            assert_eq!(back.status, want.status, "{:?}", want.metadata.name);
        }
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

    /// For every corpus policy (with a status added), what the store keeps when it reads the
    /// API server's JSON text equals what packing the typed policy keeps: same metadata,
    /// paramKind, and spec and status after unpacking.
    #[test]
    fn packing_the_json_text_keeps_what_packing_the_typed_policy_keeps() {
        use crate::cli::input::{InputObject, read_objects};
        let files = crate::schema::shared_yaml_files("corpus/policies");
        let status = serde_json::json!({
            "observedGeneration": 2,
            "typeChecking": {"expressionWarnings": [
                {"fieldRef": "spec.validations[0].expression", "warning": "w \"quoted\" \u{e9}"}
            ]},
            "conditions": [{
                "type": "TypeChecked", "status": "True", "reason": "AllKindsChecked",
                "message": "m", "lastTransitionTime": "2026-11-25T10:00:00Z",
                "observedGeneration": 2
            }]
        });
        let mut compared = 0;
        let mut with_param_kind = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).expect("corpus file");
            let source = file.display().to_string();
            for object in read_objects(&source, &text).expect("corpus file reads") {
                let InputObject::Policy(p) = object else {
                    continue;
                };
                let mut json = serde_json::to_value(&p.policy).expect("encodes");
                json["status"] = status.clone();
                json["metadata"]["managedFields"] = serde_json::json!([{
                    "manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}
                }]);
                let text = serde_json::to_string(&json).expect("encodes");
                let from_text: StoredPolicy = serde_json::from_str(&text).expect("decodes");
                let typed: ValidatingAdmissionPolicy =
                    serde_json::from_str(&text).expect("decodes typed");
                let packed = StoredPolicy::pack(typed);
                assert_eq!(from_text.metadata, packed.metadata, "{source}");
                assert_eq!(from_text.param_kind, packed.param_kind, "{source}");
                assert_eq!(
                    from_text.unpack().expect("unpacks"),
                    packed.unpack().expect("unpacks"),
                    "{source}"
                );
                compared += 1;
                with_param_kind += usize::from(from_text.param_kind.is_some());
            }
        }
        assert_eq!(compared, 263, "corpus policies compared");
        assert!(with_param_kind > 0, "no corpus policy has a paramKind");
    }
}
