//! Discovery snapshots without a cluster: from OpenAPI v3 group-version documents (the
//! layout of `/openapi/v3`) and from CustomResourceDefinitions. Pure: callers read the files.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::restmapper::{ApiGroupResources, ApiResource, ApiVersionResources};
use crate::schema::gvk::compare_version_priority;

/// Collects resources per group and version; turns them into a sorted snapshot.
#[derive(Default)]
struct Builder {
    groups: BTreeMap<String, BTreeMap<String, BTreeMap<String, ApiResource>>>,
}

impl Builder {
    fn add(&mut self, group: &str, version: &str, resource: ApiResource) {
        let resources = self
            .groups
            .entry(group.to_owned())
            .or_default()
            .entry(version.to_owned())
            .or_default();
        match resources.get_mut(&resource.name) {
            Some(existing) => existing.namespaced |= resource.namespaced,
            None => {
                resources.insert(resource.name.clone(), resource);
            }
        }
    }

    /// Core group first, then groups by name; versions by Kubernetes priority; resources by
    /// name (subresources right after their resource).
    fn finish(self) -> Vec<ApiGroupResources> {
        let mut out: Vec<ApiGroupResources> = self
            .groups
            .into_iter()
            .map(|(name, versions)| {
                let mut versions: Vec<ApiVersionResources> = versions
                    .into_iter()
                    .map(|(version, resources)| ApiVersionResources {
                        version,
                        resources: resources.into_values().collect(),
                    })
                    .collect();
                versions.sort_by(|a, b| compare_version_priority(&a.version, &b.version));
                ApiGroupResources::with_versions(name, versions)
            })
            .collect();
        // BTreeMap order already puts "" (core) first.
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

fn gvk_of_operation(path_item: &Value) -> Option<(String, String, String)> {
    for method in ["get", "put", "post", "patch", "delete"] {
        if let Some(gvk) = path_item
            .get(method)
            .and_then(|op| op.get("x-kubernetes-group-version-kind"))
        {
            let s = |k: &str| gvk.get(k).and_then(Value::as_str).map(str::to_owned);
            if let (Some(g), Some(v), Some(k)) = (s("group"), s("version"), s("kind")) {
                return Some((g, v, k));
            }
        }
    }
    None
}

/// The kind of an OpenAPI v3 body schema: `{"$ref": "#/components/schemas/<name>"}` (or an
/// `allOf` holding just that) pointing at a component of `doc` with exactly one
/// `x-kubernetes-group-version-kind`.
fn gvk_of_body_schema(doc: &Value, schema: &Value) -> Option<(String, String, String)> {
    let reference = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r,
        None => match schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([only]) => only.get("$ref").and_then(Value::as_str)?,
            _ => return None,
        },
    };
    let name = reference.strip_prefix("#/components/schemas/")?;
    let component = doc.get("components")?.get("schemas")?.get(name)?;
    let gvk = match component.get("x-kubernetes-group-version-kind")? {
        Value::Array(list) => match list.as_slice() {
            [one] => one,
            _ => return None,
        },
        other => other,
    };
    let s = |k: &str| gvk.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((s("group")?, s("version")?, s("kind")?))
}

/// The kind of the body a subresource path exchanges: the `application/json` schema of the
/// `200`/`201` response of `get`, `put` or `post`, then of their request body. Needed because the
/// CRD OpenAPI builder (apiextensions-apiserver v0.37.1 `pkg/controller/openapi/builder`) puts
/// the CRD's own kind in `x-kubernetes-group-version-kind` on every route, `/scale` included,
/// while the body there is `autoscaling/v1 Scale`. For built-in subresources the body kind and
/// the operation's kind agree wherever there is a body (checked on the v1.35 documents).
fn gvk_of_subresource_body(doc: &Value, path_item: &Value) -> Option<(String, String, String)> {
    let json_schema = |v: Option<&Value>| {
        v.and_then(|b| b.get("content"))
            .and_then(|c| c.get("application/json"))
            .and_then(|m| m.get("schema"))
            .and_then(|schema| gvk_of_body_schema(doc, schema))
    };
    for method in ["get", "put", "post"] {
        let Some(op) = path_item.get(method) else {
            continue;
        };
        let responses = op.get("responses");
        for code in ["200", "201"] {
            if let Some(gvk) = json_schema(responses.and_then(|r| r.get(code))) {
                return Some(gvk);
            }
        }
        if let Some(gvk) = json_schema(op.get("requestBody")) {
            return Some(gvk);
        }
    }
    None
}

/// Builds a discovery snapshot from OpenAPI v3 documents of group versions (`api/v1`,
/// `apis/<group>/<version>`), reading their `paths`:
/// `/api/v1[/namespaces/{namespace}]/<resource>[/{name}[/<subresource>]]` and the
/// `/apis/<group>/<version>/...` equivalent; `watch/` paths are ignored. The kind comes from
/// the operations' `x-kubernetes-group-version-kind` (subresources keep theirs, e.g.
/// `deployments/scale` → `autoscaling/v1 Scale`), except that a subresource whose request or
/// response body is a kind takes that kind (a CRD's `widgets/scale` → `autoscaling/v1 Scale`,
/// where the operation names `Widget`). Singular names are not published in
/// OpenAPI, so they are left empty (the REST mapper guesses them from the kind, as
/// client-go does for servers without singular names).
pub fn discovery_from_openapi<'a>(
    documents: impl IntoIterator<Item = &'a Value>,
) -> Vec<ApiGroupResources> {
    let mut b = Builder::default();
    for doc in documents {
        let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
            continue;
        };
        for (path, item) in paths {
            let (group, version, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
                ("", "v1", rest)
            } else if let Some(rest) = path.strip_prefix("/apis/") {
                let mut it = rest.splitn(3, '/');
                match (it.next(), it.next(), it.next()) {
                    (Some(g), Some(v), Some(r)) => (g, v, r),
                    _ => continue,
                }
            } else {
                continue;
            };
            let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
            if segments.first() == Some(&"watch") {
                continue;
            }
            let (namespaced, segments) = match segments.as_slice() {
                ["namespaces", "{namespace}", tail @ ..] if !tail.is_empty() => (true, tail),
                s => (false, s),
            };
            let (name, is_subresource) = match segments {
                [resource] | [resource, "{name}"] => ((*resource).to_owned(), false),
                [resource, "{name}", sub, ..] => (format!("{resource}/{sub}"), true),
                _ => continue,
            };
            if name.starts_with('{') {
                continue;
            }
            let body_kind = is_subresource
                .then(|| gvk_of_subresource_body(doc, item))
                .flatten();
            let Some((kg, kv, kind)) = body_kind.or_else(|| gvk_of_operation(item)) else {
                continue;
            };
            // Like API discovery: group and version are given when the kind's group version
            // differs from the one listed.
            let differs = kg != group || kv != version;
            let resource = ApiResource {
                name,
                singular_name: String::new(),
                kind,
                group: differs.then_some(kg),
                version: differs.then_some(kv),
                namespaced,
            };
            b.add(group, version, resource);
        }
    }
    b.finish()
}

/// Builds a discovery snapshot from CustomResourceDefinitions: every served version lists the
/// resource (plural, singular, kind, scope) and its `status` and `scale` subresources
/// (`scale` has kind `autoscaling/v1 Scale`).
pub fn discovery_from_crds(crds: &[CustomResourceDefinition]) -> Vec<ApiGroupResources> {
    let mut b = Builder::default();
    for crd in crds {
        let spec = &crd.spec;
        let namespaced = spec.scope == "Namespaced";
        for v in spec.versions.iter().filter(|v| v.served) {
            let base = ApiResource {
                name: spec.names.plural.clone(),
                singular_name: spec.names.singular.clone().unwrap_or_default(),
                kind: spec.names.kind.clone(),
                group: None,
                version: None,
                namespaced,
            };
            b.add(&spec.group, &v.name, base.clone());
            if let Some(sub) = &v.subresources {
                if sub.status.is_some() {
                    b.add(
                        &spec.group,
                        &v.name,
                        ApiResource {
                            name: format!("{}/status", base.name),
                            singular_name: String::new(),
                            ..base.clone()
                        },
                    );
                }
                if sub.scale.is_some() {
                    b.add(
                        &spec.group,
                        &v.name,
                        ApiResource {
                            name: format!("{}/scale", base.name),
                            singular_name: String::new(),
                            kind: "Scale".into(),
                            group: Some("autoscaling".into()),
                            version: Some("v1".into()),
                            namespaced,
                        },
                    );
                }
            }
        }
    }
    b.finish()
}

/// Reads one legacy `APIResourceList` (`/api/v1`, `/apis/<group>/<version>`): the group and
/// version come from its `groupVersion`; each resource's `name`, `singularName`, `kind`,
/// `namespaced` and, for subresources of another group version, `group` and `version`.
/// Order is kept (client-go builds its mapper in discovery order).
pub fn discovery_from_resource_list(list: &Value) -> Result<ApiGroupResources, String> {
    let gv = list
        .get("groupVersion")
        .and_then(Value::as_str)
        .ok_or("APIResourceList without groupVersion")?;
    let crate::schema::GroupVersion { group, version } =
        crate::schema::GroupVersion::parse_api_version(gv)
            .ok_or_else(|| format!("invalid groupVersion {gv:?}"))?;
    let resources = list
        .get("resources")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter_map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            Some(ApiResource {
                name: s("name")?,
                singular_name: s("singularName").unwrap_or_default(),
                kind: s("kind")?,
                group: s("group"),
                version: s("version"),
                namespaced: r
                    .get("namespaced")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect();
    Ok(ApiGroupResources::with_versions(
        group.to_owned(),
        vec![ApiVersionResources {
            version: version.to_owned(),
            resources,
        }],
    ))
}

/// Reads an aggregated discovery document (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`,
/// what `/api` and `/apis` serve to clients asking for it): the schema layer's
/// [`crate::schema::discovery::parse_aggregated`], which the live schema source reads the same
/// documents with.
pub fn discovery_from_aggregated(list: &Value) -> Result<Vec<ApiGroupResources>, String> {
    crate::schema::discovery::parse_aggregated(list)
}

/// Merges snapshots; for a resource present in several, the first one wins.
pub fn merge_discovery(
    snapshots: impl IntoIterator<Item = Vec<ApiGroupResources>>,
) -> Vec<ApiGroupResources> {
    let mut b = Builder::default();
    for snapshot in snapshots {
        for g in snapshot {
            for v in g.versions {
                for r in v.resources {
                    b.add(&g.name, &v.version, r);
                }
            }
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::gvk::Gvr;
    use crate::policy::restmapper::{DiscoveryRestMapper, RestMapper};

    #[test]
    fn openapi_paths_give_resources_subresources_and_scope() {
        let gvk = |g: &str, v: &str, k: &str| serde_json::json!({"get": {"x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": k}}});
        let doc = serde_json::json!({"paths": {
            "/apis/apps/v1/": {},
            "/apis/apps/v1/deployments": gvk("apps", "v1", "Deployment"),
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}": gvk("apps", "v1", "Deployment"),
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale": gvk("autoscaling", "v1", "Scale"),
            "/apis/apps/v1/watch/namespaces/{namespace}/deployments": gvk("apps", "v1", "WatchEvent"),
        }});
        let core = serde_json::json!({"paths": {
            "/api/v1/namespaces": gvk("", "v1", "Namespace"),
            "/api/v1/namespaces/{name}/finalize": gvk("", "v1", "Namespace"),
            "/api/v1/namespaces/{namespace}/pods/{name}/status": gvk("", "v1", "Pod"),
            "/api/v1/nodes/{name}/proxy/{path}": gvk("", "v1", "NodeProxyOptions"),
        }});
        let d = discovery_from_openapi([&doc, &core]);
        let listed: Vec<String> = d
            .iter()
            .flat_map(|g| {
                g.versions.iter().flat_map(move |v| {
                    v.resources.iter().map(move |r| {
                        format!(
                            "{}/{} {} {} {:?}/{:?} ns={}",
                            g.name, v.version, r.name, r.kind, r.group, r.version, r.namespaced
                        )
                    })
                })
            })
            .collect();
        assert_eq!(
            listed,
            [
                "/v1 namespaces Namespace None/None ns=false",
                "/v1 namespaces/finalize Namespace None/None ns=false",
                "/v1 nodes/proxy NodeProxyOptions None/None ns=false",
                "/v1 pods/status Pod None/None ns=true",
                "apps/v1 deployments Deployment None/None ns=true",
                "apps/v1 deployments/scale Scale Some(\"autoscaling\")/Some(\"v1\") ns=true",
            ]
        );
        let m = DiscoveryRestMapper::new(d);
        assert_eq!(
            m.kinds_for(&Gvr::new("apps", "v1", "deployment"))
                .map(|k| k[0].to_string()),
            Ok("apps/v1, Kind=Deployment".to_owned())
        );
    }

    /// A CRD document as the API server publishes it: every route names the CRD's kind, the
    /// scale route's bodies are `autoscaling/v1 Scale`.
    #[test]
    fn crd_scale_subresource_takes_the_kind_of_its_body() {
        let widget = serde_json::json!({"group": "example.com", "version": "v1", "kind": "Widget"});
        let body = |name: &str| serde_json::json!({"content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}});
        let doc = serde_json::json!({
            "paths": {
                "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}": {
                    "get": {"x-kubernetes-group-version-kind": widget, "responses": {"200": body("com.example.v1.Widget")}}
                },
                "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale": {
                    "get": {"x-kubernetes-group-version-kind": widget, "responses": {"200": body("io.k8s.api.autoscaling.v1.Scale")}},
                    "put": {"x-kubernetes-group-version-kind": widget, "requestBody": body("io.k8s.api.autoscaling.v1.Scale")}
                },
                "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status": {
                    "get": {"x-kubernetes-group-version-kind": widget, "responses": {"200": body("com.example.v1.Widget")}}
                },
                // No body kind (a string, or a component without a kind): the operation's kind.
                "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/log": {
                    "get": {"x-kubernetes-group-version-kind": widget, "responses": {"200": body("com.example.v1.Plain")}}
                },
                "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/proxy": {
                    "get": {"x-kubernetes-group-version-kind": widget, "responses": {"200": {"content": {"*/*": {"schema": {"type": "string"}}}}}}
                }
            },
            "components": {"schemas": {
                "com.example.v1.Widget": {"type": "object", "x-kubernetes-group-version-kind": [widget]},
                "com.example.v1.Plain": {"type": "object"},
                "io.k8s.api.autoscaling.v1.Scale": {"type": "object", "x-kubernetes-group-version-kind": [
                    {"group": "autoscaling", "version": "v1", "kind": "Scale"}
                ]}
            }}
        });
        let d = discovery_from_openapi([&doc]);
        let listed: Vec<String> = d[0].versions[0]
            .resources
            .iter()
            .map(|r| format!("{} {} {:?}/{:?}", r.name, r.kind, r.group, r.version))
            .collect();
        assert_eq!(
            listed,
            [
                "widgets Widget None/None",
                "widgets/log Widget None/None",
                "widgets/proxy Widget None/None",
                "widgets/scale Scale Some(\"autoscaling\")/Some(\"v1\")",
                "widgets/status Widget None/None",
            ]
        );
        // The resource itself still maps to its own kind.
        let m = DiscoveryRestMapper::new(d);
        assert_eq!(
            m.kinds_for(&Gvr::new("example.com", "v1", "widgets"))
                .map(|k| k[0].to_string()),
            Ok("example.com/v1, Kind=Widget".to_owned())
        );
    }

    #[test]
    fn aggregated_and_legacy_formats() {
        let agg = serde_json::json!({"kind": "APIGroupDiscoveryList", "items": [{
            "metadata": {"name": "apps"},
            "versions": [{"version": "v1", "resources": [{
                "resource": "deployments", "singularResource": "deployment", "scope": "Namespaced",
                "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                "subresources": [
                    {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}},
                    {"subresource": "status", "responseKind": {"group": "", "version": "", "kind": "Deployment"}}
                ]
            }]}]
        }]});
        let d = discovery_from_aggregated(&agg).unwrap();
        let r = &d[0].versions[0].resources;
        assert_eq!(r.len(), 3);
        assert_eq!(
            (
                r[0].name.as_str(),
                r[0].singular_name.as_str(),
                r[0].namespaced
            ),
            ("deployments", "deployment", true)
        );
        assert_eq!(
            (
                r[1].name.as_str(),
                r[1].kind.as_str(),
                r[1].group.as_deref()
            ),
            ("deployments/scale", "Scale", Some("autoscaling"))
        );
        assert_eq!(
            (r[2].name.as_str(), r[2].group.as_deref()),
            ("deployments/status", None)
        );

        let legacy = serde_json::json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod"},
            {"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy", "version": "v1", "kind": "Eviction"}
        ]});
        let g = discovery_from_resource_list(&legacy).unwrap();
        assert_eq!(
            (g.name.as_str(), g.versions[0].version.as_str()),
            ("", "v1")
        );
        assert_eq!(g.versions[0].resources[1].group.as_deref(), Some("policy"));
        assert!(discovery_from_resource_list(&serde_json::json!({})).is_err());
        assert!(discovery_from_aggregated(&serde_json::json!({})).is_err());
    }

    #[test]
    fn crds_list_served_versions_and_subresources() {
        let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.r", "statusReplicasPath": ".status.r"}}},
                    {"name": "v1beta1", "served": false, "storage": false}
                ]}
        }))
        .unwrap();
        let d = discovery_from_crds(&[crd]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].versions.len(), 1);
        let names: Vec<&str> = d[0].versions[0]
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(names, ["widgets", "widgets/scale", "widgets/status"]);
        let merged = merge_discovery([d.clone(), d]);
        assert_eq!(merged[0].versions[0].resources.len(), 3);
    }
}
