//! `metadata` of a cluster-scoped object on create: apimachinery 0.37.1
//! `pkg/api/validation/objectmeta.go` `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`
//! and `requiresNamespace = false`, and `pkg/apis/meta/v1/validation` `ValidateLabels`.
//!
//! Not reproduced: `ownerReferences`, `finalizers` and `managedFields` (a policy manifest
//! does not carry them; the API server checks them as for every kind).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::field::FieldError;
use super::names::{is_label_value, is_qualified_name, name_is_dns_subdomain};

/// `TotalAnnotationSizeLimitB`: 256 KiB.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateObjectMeta(meta, false, NameIsDNSSubdomain, "metadata")`.
pub fn validate_object_meta(meta: &ObjectMeta) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or_default();
    let name = meta.name.as_deref().unwrap_or_default();
    if !generate_name.is_empty() {
        for msg in name_is_dns_subdomain(generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                msg,
            ));
        }
    }
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in name_is_dns_subdomain(name, false) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    if meta.namespace.as_deref().is_some_and(|n| !n.is_empty()) {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(generation) = meta.generation
        && generation < 0
    {
        errs.push(FieldError {
            kind: super::field::ErrorType::Invalid,
            field: "metadata.generation".into(),
            value: super::field::BadValue::Json(serde_json::Value::from(generation)),
            detail: "must be greater than or equal to 0".into(),
        });
    }
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, "metadata.labels"));
    }
    if let Some(annotations) = &meta.annotations {
        errs.extend(validate_annotations(annotations, "metadata.annotations"));
    }
    errs
}

/// `v1validation.ValidateLabels`. Upstream iterates a Go map (random order); with more than
/// one bad label the API server's order varies from request to request. Here: key order.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        for msg in is_label_value(v) {
            errs.push(FieldError::invalid(path, v, msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (checked lower-cased), total size at most
/// 256 KiB.
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}
