//! The OpenAPI `description` of a field of a kind, for the editor's hover: the schema
//! documents the checks load drop their documentation ([`super::document`],
//! `strip_documentation`), so the description is read from the document as published
//! (kube-apiserver's `/openapi/v3/apis/<group>/<version>`, the embedded copy of it, or an
//! `--openapi` folder's file), or for a custom resource from its CustomResourceDefinition
//! ([`crd_field_description`]). No I/O: the caller hands over the parsed document.
//!
//! The walk follows what kube-openapi publishes for built-in kinds
//! (k8s.io/kube-openapi `pkg/builder3`, and k8s.io/apiextensions-apiserver's
//! `pkg/controller/openapi/builder` for CRDs): the root schema of a kind is the component
//! whose `x-kubernetes-group-version-kind` names it; a property that is an object is
//! `{"allOf": [{"$ref": "#/components/schemas/NAME"}], "description": ...}` (or a bare
//! `$ref`), a list's elements are its `items`, a map's values its `additionalProperties`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::gvk::GroupVersionKind;

/// How deep a walk may go (a `$ref` cycle or a pathological document ends there).
const MAX_STEPS: usize = 64;

/// The path of the document of `gvk` in an `/openapi/v3` layout: `api/v1.json` for the core
/// group, `apis/<group>/<version>.json` otherwise (as `--openapi` folders and the embedded
/// data lay them out).
pub fn document_path(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("api/{}.json", gvk.version)
    } else {
        format!("apis/{}/{}.json", gvk.group, gvk.version)
    }
}

/// The description of the field at `path` (property names from the kind's root: `["spec",
/// "replicas"]`) of `gvk` in `document`; for the empty path, the kind's own. `None` when
/// the document does not declare the kind, a name on the path is not a property, or the
/// field has no description.
pub fn field_description(
    document: &Value,
    gvk: &GroupVersionKind,
    path: &[&str],
) -> Option<String> {
    let schemas = document.pointer("/components/schemas")?.as_object()?;
    let mut node = schemas.values().find(|s| declares(s, gvk))?;
    // The description of the property itself (kube-openapi puts it beside the `allOf` of a
    // referenced type), else its type's.
    let mut own = text(node);
    for name in path {
        let resolved = resolve(schemas, node)?;
        node = resolved.get("properties")?.get(*name)?;
        own = text(node);
    }
    own.or_else(|| resolve(schemas, node).and_then(text))
}

/// The description of the field at `path` of `gvk` in `crd`: the `description` of the
/// property in the version's `schema.openAPIV3Schema` (for the empty path, the schema's own),
/// which apiextensions-apiserver publishes as written (k8s.io/apiextensions-apiserver
/// `pkg/controller/openapi/builder`, `BuildOpenAPIV3`). `None` when `crd` does not define
/// `gvk` or has no schema for its version, a name on the path is not a property, the field
/// has no description, or the path starts at `metadata`, `apiVersion` or `kind` (the
/// published schema replaces those by ObjectMeta's and the standard fields', not the CRD's).
pub fn crd_field_description(
    crd: &CustomResourceDefinition,
    gvk: &GroupVersionKind,
    path: &[&str],
) -> Option<String> {
    if crd.spec.group != gvk.group || crd.spec.names.kind != gvk.kind {
        return None;
    }
    if matches!(path.first(), Some(&("metadata" | "apiVersion" | "kind"))) {
        return None;
    }
    let version = crd.spec.versions.iter().find(|v| v.name == gvk.version)?;
    let mut node = version.schema.as_ref()?.open_api_v3_schema.as_ref()?;
    for name in path {
        node = node.properties.as_ref()?.get(*name)?;
    }
    node.description
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A schema node's `description`, trimmed; `None` when it has none or it is blank.
fn text(v: &Value) -> Option<String> {
    v.get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `node` with its `$ref` (bare, or the single element of an `allOf`) followed to the
/// component it names, repeatedly.
fn resolve<'d>(schemas: &'d serde_json::Map<String, Value>, node: &'d Value) -> Option<&'d Value> {
    let mut node = node;
    for _ in 0..MAX_STEPS {
        let target = node.get("$ref").and_then(Value::as_str).or_else(|| {
            match node
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                Some([only]) => only.get("$ref").and_then(Value::as_str),
                _ => None,
            }
        });
        let Some(target) = target else {
            return Some(node);
        };
        let name = target.strip_prefix("#/components/schemas/")?;
        node = schemas.get(name)?;
    }
    None
}

/// Whether `document` declares `gvk` (one of its components is the kind's root schema).
pub fn declares_kind(document: &Value, gvk: &GroupVersionKind) -> bool {
    document
        .pointer("/components/schemas")
        .and_then(Value::as_object)
        .is_some_and(|schemas| schemas.values().any(|s| declares(s, gvk)))
}

/// Whether the component `schema` is the root schema of `gvk`.
fn declares(schema: &Value, gvk: &GroupVersionKind) -> bool {
    let Some(list) = schema
        .get("x-kubernetes-group-version-kind")
        .and_then(Value::as_array)
    else {
        return false;
    };
    list.iter().any(|e| {
        let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
        field("group") == gvk.group && field("version") == gvk.version && field("kind") == gvk.kind
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind::new(group, version, kind)
    }

    fn embedded(path: &str) -> Value {
        let bytes = crate::schema::embedded::document("1.37", path).expect("embedded document");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn descriptions_of_built_in_fields_as_published() {
        let apps = embedded("apis/apps/v1.json");
        let deployment = gvk("apps", "v1", "Deployment");
        let replicas = field_description(&apps, &deployment, &["spec", "replicas"]);
        assert_eq!(
            replicas.as_deref(),
            Some(
                "Number of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1."
            )
        );
        // A property whose type is a reference: its own description.
        let spec = field_description(&apps, &deployment, &["spec"]);
        assert_eq!(
            spec.as_deref(),
            Some("Specification of the desired behavior of the Deployment.")
        );
        // Through a referenced type (ObjectMeta) to one of its fields.
        let name = field_description(&apps, &deployment, &["metadata", "name"]);
        assert!(
            name.as_deref()
                .is_some_and(|d| d.starts_with("Name must be unique within a namespace.")),
            "{name:?}"
        );
        assert_eq!(
            field_description(&apps, &deployment, &["spec", "replicsa"]),
            None
        );
        assert_eq!(
            field_description(&apps, &gvk("apps", "v1", "NoSuchKind"), &[]),
            None
        );
        let core = embedded(&document_path(&gvk("", "v1", "Pod")));
        let pod = field_description(&core, &gvk("", "v1", "Pod"), &["spec", "nodeName"]);
        assert!(
            pod.as_deref().is_some_and(
                |d| d.starts_with("NodeName indicates in which node this pod is scheduled.")
            ),
            "{pod:?}"
        );
    }

    #[test]
    fn document_paths_follow_the_openapi_v3_layout() {
        assert_eq!(document_path(&gvk("", "v1", "Pod")), "api/v1.json");
        assert_eq!(
            document_path(&gvk("apps", "v1", "Deployment")),
            "apis/apps/v1.json"
        );
    }

    #[test]
    fn reference_cycles_end() {
        let doc = serde_json::json!({"components": {"schemas": {
            "A": {"$ref": "#/components/schemas/A",
                  "x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "K"}]}
        }}});
        assert_eq!(field_description(&doc, &gvk("g", "v1", "K"), &["x"]), None);
    }

    #[test]
    fn descriptions_of_custom_resource_fields_from_the_crd() {
        let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": " A widget. ",
                        "properties": {
                            "metadata": {"type": "object", "description": "ignored"},
                            "spec": {"type": "object", "properties": {
                                "size": {"type": "integer", "description": "How big."},
                                "color": {"type": "string", "description": "  "}}}}}}}]}
        }))
        .expect("CRD");
        let widget = gvk("example.com", "v1", "Widget");
        let at = |path: &[&str]| crd_field_description(&crd, &widget, path);
        assert_eq!(at(&["spec", "size"]).as_deref(), Some("How big."));
        assert_eq!(at(&[]).as_deref(), Some("A widget."));
        assert_eq!(at(&["spec"]), None);
        assert_eq!(at(&["spec", "color"]), None);
        assert_eq!(at(&["spec", "weight"]), None);
        assert_eq!(at(&["metadata"]), None);
        let other_version = gvk("example.com", "v2", "Widget");
        assert_eq!(
            crd_field_description(&crd, &other_version, &["spec", "size"]),
            None
        );
        let other_kind = gvk("example.com", "v1", "Gadget");
        assert_eq!(
            crd_field_description(&crd, &other_kind, &["spec", "size"]),
            None
        );
    }
}
