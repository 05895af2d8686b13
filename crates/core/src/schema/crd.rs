//! CustomResourceDefinition manifests → the OpenAPI v3 schemas the API server publishes for
//! them.
//!
//! Source: apiextensions-apiserver v0.37.1 `pkg/controller/openapi/builder/builder.go`
//! (`buildKubeNative`, `addEmbeddedProperties`, `addTypeMetaProperties`, `buildListSchema`,
//! `gvkToModelName`) and `pkg/controller/openapiv3/controller.go` (v3 documents keep value
//! validations such as `format`). For each served version the published kind schema is the
//! version's `openAPIV3Schema` with:
//! - `metadata` replaced by a reference to `ObjectMeta`, `apiVersion` and `kind` set to strings;
//! - the same three properties set on every schema with `x-kubernetes-embedded-resource: true`;
//! - the `x-kubernetes-group-version-kind` extension;
//! - no schema at all → `{type: object}`.
//!
//! A version whose schema is not structural (a node without `type` that is neither
//! int-or-string nor preserve-unknown-fields, a root that is not an object, `items` given as a
//! list) is refused by the API server for `apiextensions.k8s.io/v1`; such a version is reported
//! as not usable instead of guessed at.

use serde_json::{Map, Value, json};

use super::convert::COMPONENT_REF_PREFIX;
use super::document::EXT_GVK;
use super::gvk::{GroupVersion, GroupVersionKind};
use super::mapper::{ResourceInfo, SubresourceInfo};

/// Component name of `ObjectMeta`.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// Component name of `ListMeta`.
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// `ObjectMeta`, `ListMeta` and what they reference, as published by Kubernetes 1.35
/// (descriptions removed). CRD documents reference these.
const META_V1: &str = include_str!("meta_v1.json");

/// The meta/v1 component schemas CRD documents reference.
pub fn meta_components() -> Map<String, Value> {
    match serde_json::from_str::<Value>(META_V1) {
        Ok(Value::Object(m)) => m,
        // The file is part of the source tree and checked by a unit test.
        _ => Map::new(),
    }
}

/// `gvkToModelName`: the group reversed by dots, then version and kind.
pub fn model_name(gvk: &GroupVersionKind) -> String {
    let mut parts: Vec<&str> = gvk.group.split('.').collect();
    parts.reverse();
    format!("{}.{}.{}", parts.join("."), gvk.version, gvk.kind)
}

/// One served version of a CRD, as it would appear in the API server's OpenAPI v3 document.
#[derive(Debug, Clone)]
pub struct CrdVersion {
    /// The kind of this version.
    pub gvk: GroupVersionKind,
    /// The list kind.
    pub list_gvk: GroupVersionKind,
    /// The resource (plural, singular, subresources).
    pub resource: ResourceInfo,
    /// The published kind schema, or why the version is unusable.
    pub schema: Result<Value, String>,
    /// The published list schema.
    pub list_schema: Value,
}

/// Reads CRDs from YAML or JSON text: any number of documents separated by `---`, each a
/// `CustomResourceDefinition` (apiextensions.k8s.io/v1) or a `List` of them. Other objects are
/// ignored. Errors name the document index and the problem.
pub fn crds_from_text(text: &str) -> Result<Vec<Value>, String> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: 256,
            max_nodes: 2_000_000,
            max_events: 5_000_000,
            max_documents: 10_000,
            // Anchors are rare in CRD manifests; this bounds alias expansion (YAML bombs).
            max_recorded_anchor_events: 100_000,
        },
    };
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for doc in docs {
        collect_crds(doc, &mut out);
    }
    Ok(out)
}

fn collect_crds(doc: Value, out: &mut Vec<Value>) {
    match (
        doc.get("apiVersion").and_then(Value::as_str),
        doc.get("kind").and_then(Value::as_str),
    ) {
        (Some("apiextensions.k8s.io/v1"), Some("CustomResourceDefinition")) => out.push(doc),
        (_, Some("List")) | (_, Some("CustomResourceDefinitionList")) => {
            if let Some(Value::Array(items)) = doc.get("items") {
                for item in items {
                    collect_crds(item.clone(), out);
                }
            }
        }
        _ => {}
    }
}

/// The served versions of one CRD object. Errors describe what is missing.
pub fn crd_versions(crd: &Value) -> Result<Vec<CrdVersion>, String> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    let err = |what: &str| format!("CustomResourceDefinition {name:?}: {what}");
    let spec = crd.get("spec").ok_or_else(|| err("no spec"))?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or_else(|| err("no spec.group"))?;
    let names = spec.get("names").ok_or_else(|| err("no spec.names"))?;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let kind = text(names, "kind");
    let plural = text(names, "plural");
    if kind.is_empty() || plural.is_empty() {
        return Err(err("spec.names.kind and spec.names.plural are required"));
    }
    let singular = match text(names, "singular") {
        s if s.is_empty() => kind.to_lowercase(),
        s => s,
    };
    let list_kind = match text(names, "listKind") {
        s if s.is_empty() => format!("{kind}List"),
        s => s,
    };
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or_else(|| err("no spec.versions"))?;
    let mut out = Vec::new();
    for v in versions {
        let vname = text(v, "name");
        if vname.is_empty() {
            return Err(err("a version has no name"));
        }
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let gv = GroupVersion::new(group, vname.clone());
        let gvk = gv.with_kind(kind.clone());
        let list_gvk = gv.with_kind(list_kind.clone());
        let mut subresources = Vec::new();
        if v.pointer("/subresources/scale")
            .is_some_and(|s| !s.is_null())
        {
            subresources.push(SubresourceInfo {
                name: "scale".into(),
                kind: GroupVersionKind::new("autoscaling", "v1", "Scale"),
            });
        }
        if v.pointer("/subresources/status")
            .is_some_and(|s| !s.is_null())
        {
            subresources.push(SubresourceInfo {
                name: "status".into(),
                kind: gvk.clone(),
            });
        }
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            None | Some(Value::Null) => Ok(json!({"type": "object", EXT_GVK: [gvk_json(&gvk)]})),
            Some(s) => check_structural(s, "openAPIV3Schema", true)
                .map(|()| published_kind_schema(s, &gvk))
                .map_err(|e| {
                    err(&format!(
                        "schema of version {vname:?} is not structural: {e}"
                    ))
                }),
        };
        out.push(CrdVersion {
            resource: ResourceInfo {
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                subresources,
            },
            list_schema: list_schema(&gvk, &list_gvk),
            schema,
            gvk,
            list_gvk,
        });
    }
    Ok(out)
}

fn gvk_json(gvk: &GroupVersionKind) -> Value {
    json!({"group": gvk.group, "version": gvk.version, "kind": gvk.kind})
}

fn meta_ref() -> Value {
    json!({"$ref": format!("{COMPONENT_REF_PREFIX}{OBJECT_META}")})
}

fn published_kind_schema(schema: &Value, gvk: &GroupVersionKind) -> Value {
    let mut s = schema.clone();
    add_embedded_properties(&mut s, 0);
    if let Value::Object(obj) = &mut s {
        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert("metadata".into(), meta_ref());
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
        }
        obj.insert(EXT_GVK.into(), json!([gvk_json(gvk)]));
    }
    s
}

/// `addEmbeddedProperties`: every schema marked as an embedded resource gets apiVersion, kind
/// and an ObjectMeta reference.
fn add_embedded_properties(s: &mut Value, depth: usize) {
    if depth > 256 {
        return;
    }
    let Value::Object(obj) = s else { return };
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for p in props.values_mut() {
            add_embedded_properties(p, depth + 1);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = obj.get_mut(key) {
            add_embedded_properties(child, depth + 1);
        }
    }
    if obj.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
            props.insert("metadata".into(), meta_ref());
        }
    }
}

fn list_schema(gvk: &GroupVersionKind, list_gvk: &GroupVersionKind) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "items": {"$ref": format!("{COMPONENT_REF_PREFIX}{}", model_name(gvk))}},
            "metadata": {"$ref": format!("{COMPONENT_REF_PREFIX}{LIST_META}")},
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"}
        },
        EXT_GVK: [gvk_json(list_gvk)]
    })
}

/// The structural-schema rules that matter for typing.
fn check_structural(s: &Value, at: &str, root: bool) -> Result<(), String> {
    fn walk(s: &Value, at: &str, root: bool, depth: usize) -> Result<(), String> {
        if depth > 256 {
            return Err(format!("{at}: nested deeper than 256 levels"));
        }
        let obj = s
            .as_object()
            .ok_or_else(|| format!("{at}: not an object"))?;
        let flag = |k: &str| obj.get(k) == Some(&Value::Bool(true));
        let ty = obj.get("type");
        if root && ty.and_then(Value::as_str) != Some("object") {
            return Err(format!("{at}.type: must be object at the root"));
        }
        match ty {
            Some(Value::String(t)) if !t.is_empty() => {}
            None | Some(Value::Null)
                if flag("x-kubernetes-int-or-string")
                    || flag("x-kubernetes-preserve-unknown-fields") => {}
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(format!("{at}.type: must not be empty for specified fields"));
            }
            Some(_) => return Err(format!("{at}.type: must be a string")),
        }
        if obj.contains_key("$ref") {
            return Err(format!("{at}.$ref: not allowed"));
        }
        if let Some(props) = obj.get("properties") {
            let props = props
                .as_object()
                .ok_or_else(|| format!("{at}.properties: not an object"))?;
            for (name, p) in props {
                walk(p, &format!("{at}.properties[{name:?}]"), false, depth + 1)?;
            }
        }
        match obj.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(_)) => {
                return Err(format!("{at}.items: must be a schema, not a list"));
            }
            Some(i) => walk(i, &format!("{at}.items"), false, depth + 1)?,
        }
        match obj.get("additionalProperties") {
            None | Some(Value::Null) | Some(Value::Bool(_)) => {}
            Some(a) => walk(a, &format!("{at}.additionalProperties"), false, depth + 1)?,
        }
        Ok(())
    }
    walk(s, at, root, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_library_parses() {
        let m = meta_components();
        assert!(m.contains_key(OBJECT_META) && m.contains_key(LIST_META));
        assert_eq!(m.len(), 6);
    }

    #[test]
    fn model_names_reverse_the_group() {
        assert_eq!(
            model_name(&GroupVersionKind::new(
                "stable.example.com",
                "v1",
                "CronTab"
            )),
            "com.example.stable.v1.CronTab"
        );
    }

    #[test]
    fn versions_and_defaults() {
        let crds = crds_from_text(
            r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}, scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          metadata: {type: object, properties: {name: {type: string, maxLength: 5}}}
          spec: {type: object}
  - name: v0
    served: false
    storage: false
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
"#,
        )
        .expect("parses");
        assert_eq!(crds.len(), 1);
        let versions = crd_versions(&crds[0]).expect("valid");
        assert_eq!(versions.len(), 1);
        let v = &versions[0];
        assert_eq!(v.gvk.to_string(), "example.com/v1, Kind=Widget");
        assert_eq!(v.list_gvk.kind, "WidgetList");
        assert_eq!(v.resource.singular, "widget");
        assert!(!v.resource.namespaced);
        let subs: Vec<_> = v
            .resource
            .subresources
            .iter()
            .map(|s| s.kind.to_string())
            .collect();
        assert_eq!(
            subs,
            ["autoscaling/v1, Kind=Scale", "example.com/v1, Kind=Widget"]
        );
        let schema = v.schema.as_ref().expect("structural");
        assert_eq!(
            schema.pointer("/properties/metadata/$ref"),
            Some(&json!(format!("{COMPONENT_REF_PREFIX}{OBJECT_META}")))
        );
        assert_eq!(
            schema.pointer("/properties/kind/type"),
            Some(&json!("string"))
        );
        assert_eq!(
            schema.pointer(&format!("/{EXT_GVK}/0/kind")),
            Some(&json!("Widget"))
        );
    }

    #[test]
    fn non_structural_versions_are_refused() {
        for (schema, needle) in [
            (
                json!({"type": "object", "properties": {"a": {"description": "no type"}}}),
                "properties[\"a\"].type",
            ),
            (json!({"type": "string"}), "root"),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}),
                "items",
            ),
        ] {
            let e = check_structural(&schema, "openAPIV3Schema", true).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        let ok = json!({"type": "object", "properties": {
            "a": {"x-kubernetes-int-or-string": true},
            "b": {"x-kubernetes-preserve-unknown-fields": true}}});
        assert!(check_structural(&ok, "s", true).is_ok());
    }

    #[test]
    fn bad_yaml_is_an_error() {
        assert!(crds_from_text("a: [").is_err());
        let e = crd_versions(
            &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x"}, "spec": {"group": "g"}}),
        )
        .unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
    }
}
