//! The one discovery snapshot: what an API server serves (groups, versions, resources and
//! subresources with their kind and scope), in discovery order. Built from aggregated discovery
//! (kube-core's typed `apidiscovery.k8s.io/v2` documents, [`from_aggregated`]), from an
//! `/openapi/v3` folder and CRDs (`policy::discovery`), from the resources of OpenAPI documents
//! and CRD manifests ([`from_resource_infos`], the files source) and from a live server (the live
//! source); read by the one REST mapper ([`super::RestMapper`]), the schema catalog and the
//! policy checks (`policy::ApiGroupResources` is this type).

use std::collections::BTreeMap;

use super::gvk::{GroupVersion, GroupVersionKind, compare_version_priority};
use super::mapper::ResourceInfo;

/// kube-core's typed aggregated discovery (k8s.io/api `apidiscovery/v2`), no client.
type APIGroupDiscoveryList = kube_core::discovery::v2::APIGroupDiscoveryList;
type DiscoveryKind = kube_core::discovery::v2::GroupVersionKind;

/// One resource or subresource of a group version, as served by API discovery
/// (`metav1.APIResource`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ApiResource {
    /// Plural name; subresources are `<resource>/<subresource>`, e.g. `deployments/scale`.
    pub name: String,
    /// Singular name; empty for servers that do not publish one (then guessed from the kind).
    pub singular_name: String,
    /// The kind served (for subresources: the subresource's kind, e.g. `Scale`).
    pub kind: String,
    /// Group of the kind when it differs from the group version being listed (subresources).
    pub group: Option<String>,
    /// Version of the kind when it differs from the group version being listed.
    pub version: Option<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

impl ApiResource {
    /// The kind served, listed under `gv`: `metav1.APIResource`'s empty group and version mean
    /// those of the containing list.
    pub fn kind_in(&self, gv: &GroupVersion) -> GroupVersionKind {
        GroupVersionKind::new(
            self.group.clone().unwrap_or_else(|| gv.group.clone()),
            self.version.clone().unwrap_or_else(|| gv.version.clone()),
            self.kind.clone(),
        )
    }

    /// A resource of `kind` listed under `gv`, with `group` and `version` set only when the
    /// kind's group version differs from `gv` (as API discovery writes subresources).
    fn of_kind(name: String, kind: &GroupVersionKind, gv: &GroupVersion) -> Self {
        let differs = kind.group != gv.group || kind.version != gv.version;
        ApiResource {
            name,
            singular_name: String::new(),
            kind: kind.kind.clone(),
            group: differs.then(|| kind.group.clone()),
            version: differs.then(|| kind.version.clone()),
            namespaced: false,
        }
    }
}

/// The resources of one version of an API group.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ApiVersionResources {
    /// Version, e.g. `v1`.
    pub version: String,
    /// Resources and subresources in discovery order.
    pub resources: Vec<ApiResource>,
}

/// One API group with its versions, in discovery order (`restmapper.APIGroupResources`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ApiGroupResources {
    /// Group name, `""` for the core group.
    pub name: String,
    /// Preferred version.
    pub preferred_version: String,
    /// Versions in discovery order.
    pub versions: Vec<ApiVersionResources>,
}

impl ApiGroupResources {
    /// A group whose versions are given in preference order (the first is preferred).
    pub fn with_versions(name: String, versions: Vec<ApiVersionResources>) -> Self {
        let preferred_version = versions
            .first()
            .map(|v| v.version.clone())
            .unwrap_or_default();
        ApiGroupResources {
            name,
            preferred_version,
            versions,
        }
    }
}

/// Reads aggregated discovery documents (`/api` then `/apis`, `apidiscovery.k8s.io/v2`
/// `APIGroupDiscoveryList`, kube-core's types of k8s.io/api `apidiscovery/v2`). Groups and
/// versions keep their order (the first version is the preferred one); resources and versions
/// without a name are skipped; an empty `responseKind` group or version means the listing
/// group version (client-go v0.37.1 `discovery/aggregated_discovery.go`,
/// `convertAPIResource` / `convertAPISubresource`, and `metav1.APIResource`'s "empty implies
/// the containing list"); subresources become `<resource>/<subresource>` entries.
pub fn from_aggregated(lists: &[APIGroupDiscoveryList]) -> Vec<ApiGroupResources> {
    let mut out = Vec::new();
    for group in lists.iter().flat_map(|list| &list.items) {
        let name = group
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        let mut versions = Vec::new();
        for v in &group.versions {
            let Some(version) = v.version.clone() else {
                continue;
            };
            let gv = GroupVersion::new(name.clone(), version);
            let mut resources = Vec::new();
            for r in &v.resources {
                let Some(resource) = &r.resource else {
                    continue;
                };
                let namespaced = r.scope.as_deref() == Some("Namespaced");
                resources.push(ApiResource {
                    singular_name: r.singular_resource.clone().unwrap_or_default(),
                    namespaced,
                    ..listed(resource.clone(), r.response_kind.as_ref(), &gv)
                });
                for sub in &r.subresources {
                    let Some(sub_name) = &sub.subresource else {
                        continue;
                    };
                    resources.push(ApiResource {
                        namespaced,
                        ..listed(
                            format!("{resource}/{sub_name}"),
                            sub.response_kind.as_ref(),
                            &gv,
                        )
                    });
                }
            }
            versions.push(ApiVersionResources {
                version: gv.version,
                resources,
            });
        }
        out.push(ApiGroupResources::with_versions(name, versions));
    }
    out
}

/// Reads one aggregated discovery document as JSON with kube-core's typed form, as
/// [`from_aggregated`] does; a document without `items` is an error, and so is one whose
/// fields have the wrong types.
pub fn parse_aggregated(list: &serde_json::Value) -> Result<Vec<ApiGroupResources>, String> {
    if !list.get("items").is_some_and(serde_json::Value::is_array) {
        return Err("APIGroupDiscoveryList without items".into());
    }
    let typed = <APIGroupDiscoveryList as serde::Deserialize>::deserialize(list)
        .map_err(|e| format!("APIGroupDiscoveryList: {e}"))?;
    Ok(from_aggregated(std::slice::from_ref(&typed)))
}

/// A discovery entry of `name` under `gv` for a `responseKind` (empty kind when there is none).
fn listed(name: String, kind: Option<&DiscoveryKind>, gv: &GroupVersion) -> ApiResource {
    let field = |f: fn(&DiscoveryKind) -> &Option<String>| {
        kind.and_then(|k| f(k).clone()).filter(|s| !s.is_empty())
    };
    let kind = GroupVersionKind::new(
        field(|k| &k.group).unwrap_or_else(|| gv.group.clone()),
        field(|k| &k.version).unwrap_or_else(|| gv.version.clone()),
        field(|k| &k.kind).unwrap_or_default(),
    );
    ApiResource::of_kind(name, &kind, gv)
}

/// The snapshot of the resources of OpenAPI documents and CRD manifests (the files source), in
/// discovery order as far as files allow: the core group first, then groups by name; within a
/// group, versions by Kubernetes priority (GA, beta, alpha). Each resource is followed by its
/// subresources.
pub fn from_resource_infos(
    resources: BTreeMap<GroupVersion, Vec<ResourceInfo>>,
) -> Vec<ApiGroupResources> {
    let mut list: Vec<(GroupVersion, Vec<ResourceInfo>)> = resources.into_iter().collect();
    list.sort_by(|(a, _), (b, _)| {
        (!a.group.is_empty(), &a.group)
            .cmp(&(!b.group.is_empty(), &b.group))
            .then_with(|| compare_version_priority(&a.version, &b.version))
    });
    let mut out: Vec<ApiGroupResources> = Vec::new();
    for (gv, infos) in list {
        let version = ApiVersionResources {
            version: gv.version.clone(),
            resources: infos.iter().flat_map(|r| entries_of(r, &gv)).collect(),
        };
        match out.last_mut() {
            Some(group) if group.name == gv.group => group.versions.push(version),
            _ => out.push(ApiGroupResources::with_versions(gv.group, vec![version])),
        }
    }
    out
}

/// A resource of a document or CRD and its subresources as discovery entries.
fn entries_of(r: &ResourceInfo, gv: &GroupVersion) -> Vec<ApiResource> {
    let mut out = vec![ApiResource {
        name: r.plural.clone(),
        singular_name: r.singular.clone(),
        kind: r.kind.clone(),
        group: None,
        version: None,
        namespaced: r.namespaced,
    }];
    out.extend(r.subresources.iter().map(|s| ApiResource {
        namespaced: r.namespaced,
        ..ApiResource::of_kind(format!("{}/{}", r.plural, s.name), &s.kind, gv)
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SubresourceInfo;

    #[test]
    fn resource_infos_round_trip_through_entries() {
        let info = ResourceInfo {
            plural: "deployments".into(),
            singular: "deployment".into(),
            kind: "Deployment".into(),
            namespaced: true,
            subresources: vec![
                SubresourceInfo {
                    name: "scale".into(),
                    kind: GroupVersionKind::new("autoscaling", "v1", "Scale"),
                },
                SubresourceInfo {
                    name: "status".into(),
                    kind: GroupVersionKind::new("apps", "v1", "Deployment"),
                },
            ],
        };
        let gv = GroupVersion::new("apps", "v1");
        let mut map = BTreeMap::new();
        map.insert(GroupVersion::new("apps", "v1beta1"), vec![info.clone()]);
        map.insert(gv.clone(), vec![info]);
        map.insert(GroupVersion::new("", "v1"), Vec::new());
        let d = from_resource_infos(map);
        let order: Vec<(&str, Vec<&str>)> = d
            .iter()
            .map(|g| {
                let versions = g.versions.iter().map(|v| v.version.as_str()).collect();
                (g.name.as_str(), versions)
            })
            .collect();
        assert_eq!(order, [("", vec!["v1"]), ("apps", vec!["v1", "v1beta1"])]);
        assert_eq!(d[1].preferred_version, "v1");
        let kinds: Vec<String> = d[1].versions[0]
            .resources
            .iter()
            .map(|r| format!("{} {} ns={}", r.name, r.kind_in(&gv), r.namespaced))
            .collect();
        assert_eq!(
            kinds,
            [
                "deployments apps/v1, Kind=Deployment ns=true",
                "deployments/scale autoscaling/v1, Kind=Scale ns=true",
                "deployments/status apps/v1, Kind=Deployment ns=true",
            ]
        );
        assert_eq!(d[1].versions[0].resources[2].group, None);
    }

    #[test]
    fn embedded_snapshot_maps_built_in_resources() {
        let d = crate::schema::embedded::discovery("1.37").expect("built-in discovery");
        let m = crate::schema::RestMapper::new(&d);
        let kinds = |r: &str| {
            m.kinds_for(&crate::schema::GroupVersionResource::new("apps", "v1", r))
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds("deployments"), ["apps/v1, Kind=Deployment"]);
        assert_eq!(kinds("deployments/scale"), ["autoscaling/v1, Kind=Scale"]);
        assert!(crate::schema::embedded::discovery("0.1").is_err());
    }
}
