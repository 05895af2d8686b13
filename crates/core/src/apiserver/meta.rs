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

/// Who validates the object: the REST API on create, or the static-manifest loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaContext {
    /// `rest.BeforeCreate` runs first: it generates a name from `generateName` and clears
    /// `metadata.namespace` of cluster-scoped kinds.
    RestCreate,
    /// The static-manifest loader validates the object as written
    /// (`defaultAndValidateVAP` in pkg/admission/plugin/policy/manifest/loader of
    /// k8s.io/kubernetes): no generated name, and a namespace is an error.
    StaticManifest,
}

/// `ValidateObjectMeta(meta, false, NameIsDNSSubdomain, "metadata")`, on the object as the
/// API server validates it in `context`.
pub fn validate_object_meta(meta: &ObjectMeta, context: MetaContext) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or_default();
    let generated = match context {
        MetaContext::RestCreate => effective_name(meta),
        MetaContext::StaticManifest => meta.name.clone(),
    };
    let name = generated.as_deref().unwrap_or_default();
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
    // `metadata.namespace` on these cluster-scoped kinds: the REST API clears it before
    // validation (rest.BeforeCreate), so it is accepted (seen on the 1.37.1 API server); the
    // static-manifest loader does not (`Forbidden: not allowed on this type`, seen with the
    // oracle's cmd/staticmanifests).
    if context == MetaContext::StaticManifest
        && meta.namespace.as_deref().is_some_and(|n| !n.is_empty())
    {
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
            cel: None,
        });
    }
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, "metadata.labels"));
    }
    if let Some(annotations) = &meta.annotations {
        errs.extend(validate_annotations(annotations, "metadata.annotations"));
    }
    for (i, r) in meta.owner_references.iter().flatten().enumerate() {
        errs.extend(validate_owner_reference(
            r,
            &format!("metadata.ownerReferences[{i}]"),
        ));
    }
    // ValidateFinalizers / ValidateFinalizerName (the orphan/foreground pair rule is not
    // reproduced).
    for f in meta.finalizers.iter().flatten() {
        for msg in is_qualified_name(f) {
            errs.push(FieldError::invalid("metadata.finalizers", f, msg));
        }
    }
    errs
}

/// The name the API server gives an object created with only `generateName`
/// (`names.SimpleNameGenerator`: the prefix, truncated to 58 characters, and 5 random
/// alphanumerics); a fixed suffix stands for the random one.
pub fn effective_name(meta: &ObjectMeta) -> Option<String> {
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(n), _) if !n.is_empty() => Some(n.to_owned()),
        (_, Some(g)) if !g.is_empty() => {
            let prefix: String = g.chars().take(58).collect();
            Some(format!("{prefix}x7k2q"))
        }
        _ => meta.name.clone(),
    }
}

/// `validateOwnerReference`. The controller-uniqueness and banned-owner rules are not
/// reproduced.
fn validate_owner_reference(
    r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if r.api_version.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiVersion"),
            "must not be empty",
        ));
    } else if r.api_version.matches('/').count() > 1
        || r.api_version.rsplit('/').next().is_none_or(str::is_empty)
    {
        errs.push(FieldError::invalid(
            format!("{path}.apiVersion"),
            &r.api_version,
            "must be <group>/<version> or <version>",
        ));
    }
    for (field, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
        if value.is_empty() {
            errs.push(FieldError::required(
                format!("{path}.{field}"),
                "must not be empty",
            ));
        }
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
