//! Resource → kind mapping with the semantics of the discovery-backed RESTMapper that
//! kube-controller-manager gives the type checker: the one REST mapper of the crate (the
//! schema sources' catalog and, through `policy::DiscoveryRestMapper`, every discovery
//! snapshot the policy checks map resources with).
//!
//! Sources: client-go v0.37.1 `restmapper/discovery.go` (`NewDiscoveryRESTMapper`: one
//! `DefaultRESTMapper` per group-version in discovery order, subresources skipped, guessed
//! singular when discovery has none, plus guessed `<Kind>List` and `List` entries) and
//! apimachinery v0.37.1 `pkg/api/meta/restmapper.go` (`KindsFor`, `UnsafeGuessKindToResource`),
//! `multirestmapper.go` (union in mapper order, duplicates removed).

use std::collections::HashMap;

use super::discovery::{ApiGroupResources, ApiVersionResources};
use super::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};

/// A resource of a group-version as an OpenAPI document's paths ([`super::DocumentIndex`] of the
/// embedded schemas) and a CRD manifest give it; [`super::discovery::from_resource_infos`] turns
/// these into the discovery snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResourceInfo {
    /// Plural name, e.g. `deployments`.
    pub plural: String,
    /// Singular name, e.g. `deployment`; empty when unknown (then guessed from the kind).
    pub singular: String,
    /// Kind, in the resource's own group-version.
    pub kind: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// Subresources, by name.
    pub subresources: Vec<SubresourceInfo>,
}

/// A subresource and the kind it takes and returns (e.g. `scale` → `autoscaling/v1 Scale`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SubresourceInfo {
    /// Subresource name, e.g. `scale`.
    pub name: String,
    /// Its kind.
    pub kind: GroupVersionKind,
}

/// One DefaultRESTMapper: resource (plural or singular) → kind, for one group-version.
#[derive(Debug, Clone)]
struct VersionMapper {
    gv: GroupVersion,
    resource_to_kind: HashMap<String, String>,
    /// plural → subresource name → kind
    subresources: HashMap<String, Vec<SubresourceInfo>>,
    /// singular → plural
    singular_to_plural: HashMap<String, String>,
}

/// Maps resources to kinds like KCM's RESTMapper, and subresources to their kinds.
#[derive(Debug, Clone, Default)]
pub struct RestMapper {
    mappers: Vec<VersionMapper>,
}

/// apimachinery `UnsafeGuessKindToResource`: (plural, singular) for a kind.
pub fn guess_resource_for_kind(kind: &str) -> (String, String) {
    if kind.is_empty() {
        return (String::new(), String::new());
    }
    let singular = kind.to_lowercase();
    // unpluralizedSuffixes
    if singular.ends_with("endpoints") {
        return (singular.clone(), singular);
    }
    let plural = if singular.ends_with('s') {
        format!("{singular}es")
    } else if let Some(stem) = singular.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{singular}s")
    };
    (plural, singular)
}

impl RestMapper {
    /// Builds the mapper from a discovery snapshot: one mapper per group-version in discovery
    /// order (the order matters only for the order of [`RestMapper::kinds_for`] results, as
    /// upstream). `<resource>/<subresource>` entries are not mapped as resources (client-go
    /// skips them) but give the kinds of subresources; entries without a kind are skipped.
    pub fn new<'a>(groups: impl IntoIterator<Item = &'a ApiGroupResources>) -> Self {
        let mappers = groups
            .into_iter()
            .flat_map(|group| {
                group
                    .versions
                    .iter()
                    .map(|version| VersionMapper::new(&group.name, version))
            })
            .collect();
        RestMapper { mappers }
    }

    /// The group-versions known to the mapper, in order.
    pub fn group_versions(&self) -> impl Iterator<Item = &GroupVersion> {
        self.mappers.iter().map(|m| &m.gv)
    }

    /// `RESTMapper.KindsFor`: the kinds a (possibly partial) resource maps to. The resource is
    /// lower-cased and may be plural or singular. An empty group means "any group" (so
    /// `""/v1/events` also matches `events.k8s.io/v1`), as in apimachinery. With a group but no
    /// version, every group with that prefix (`storage` matches `storage.k8s.io`): upstream's
    /// `DefaultRESTMapper.KindsFor` prefers an exact group within one mapper, and each mapper
    /// holds one group-version, so across the `MultiRESTMapper` the prefix rule alone is its
    /// answer. Empty when nothing matches (upstream: NoResourceMatchError).
    ///
    /// Beyond upstream: `resource/subresource` maps to the subresource's kind
    /// (`deployments/scale` → `autoscaling/v1, Kind=Scale`).
    pub fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
        let resource = gvr.resource.to_lowercase();
        if resource.is_empty() {
            return Vec::new();
        }
        let (resource, sub) = match resource.split_once('/') {
            Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
            None => (resource, None),
        };
        let has_group = !gvr.group.is_empty();
        let has_version = !gvr.version.is_empty();
        let mut out: Vec<GroupVersionKind> = Vec::new();
        let mut push = |g: GroupVersionKind| {
            if !out.contains(&g) {
                out.push(g);
            }
        };
        for m in &self.mappers {
            let group_ok = match (has_group, has_version) {
                (true, true) => m.gv.group == gvr.group && m.gv.version == gvr.version,
                (true, false) => m.gv.group.starts_with(&gvr.group),
                (false, true) => m.gv.version == gvr.version,
                (false, false) => true,
            };
            if !group_ok {
                continue;
            }
            let Some(kind) = m.resource_to_kind.get(&resource) else {
                continue;
            };
            match &sub {
                None => push(m.gv.with_kind(kind.clone())),
                Some(s) => {
                    let plural = m.singular_to_plural.get(&resource).unwrap_or(&resource);
                    if let Some(k) = m
                        .subresources
                        .get(plural)
                        .and_then(|subs| subs.iter().find(|x| &x.name == s))
                    {
                        push(k.kind.clone());
                    }
                }
            }
        }
        out
    }
}

impl VersionMapper {
    /// client-go `NewDiscoveryRESTMapper`'s mapper of one group-version.
    fn new(group: &str, version: &ApiVersionResources) -> Self {
        let mut m = VersionMapper {
            gv: GroupVersion::new(group, version.version.clone()),
            resource_to_kind: HashMap::new(),
            subresources: HashMap::new(),
            singular_to_plural: HashMap::new(),
        };
        for r in version.resources.iter().filter(|r| !r.kind.is_empty()) {
            if let Some((plural, sub)) = r.name.split_once('/') {
                let subresources: &mut Vec<SubresourceInfo> =
                    m.subresources.entry(plural.to_owned()).or_default();
                subresources.push(SubresourceInfo {
                    name: sub.to_owned(),
                    kind: r.kind_in(&m.gv),
                });
                continue;
            }
            let singular = if r.singular_name.is_empty() {
                guess_resource_for_kind(&r.kind).1
            } else {
                r.singular_name.clone()
            };
            // AddSpecific(lower-case kind) then AddSpecific(kind): the second wins.
            m.add(&r.name, &singular, &r.kind);
            let list_kind = format!("{}List", r.kind);
            let (lp, ls) = guess_resource_for_kind(&list_kind);
            m.add(&lp, &ls, &list_kind);
        }
        let (lp, ls) = guess_resource_for_kind("List");
        m.add(&lp, &ls, "List");
        m
    }

    fn add(&mut self, plural: &str, singular: &str, kind: &str) {
        self.resource_to_kind
            .insert(plural.to_owned(), kind.to_owned());
        self.resource_to_kind
            .insert(singular.to_owned(), kind.to_owned());
        self.singular_to_plural
            .insert(singular.to_owned(), plural.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::discovery::ApiResource;

    fn res(name: &str, singular: &str, kind: &str) -> ApiResource {
        ApiResource {
            name: name.into(),
            singular_name: singular.into(),
            kind: kind.into(),
            namespaced: true,
            ..ApiResource::default()
        }
    }

    fn group(name: &str, resources: Vec<ApiResource>) -> ApiGroupResources {
        ApiGroupResources::with_versions(
            name.into(),
            vec![ApiVersionResources {
                version: "v1".into(),
                resources,
            }],
        )
    }

    fn mapper() -> RestMapper {
        let scale = ApiResource {
            group: Some("autoscaling".into()),
            version: Some("v1".into()),
            ..res("deployments/scale", "", "Scale")
        };
        RestMapper::new(&[
            group(
                "",
                vec![
                    res("events", "", "Event"),
                    res("endpoints", "endpoints", "Endpoints"),
                    res("pods", "pod", "Pod"),
                ],
            ),
            group(
                "apps",
                vec![
                    res("deployments", "deployment", "Deployment"),
                    scale,
                    // Without a kind: not mapped.
                    res("deployments/status", "", ""),
                ],
            ),
            group("events.k8s.io", vec![res("events", "event", "Event")]),
            group(
                "storage.k8s.io",
                vec![res("storageclasses", "storageclass", "StorageClass")],
            ),
        ])
    }

    fn kinds(m: &RestMapper, g: &str, v: &str, r: &str) -> Vec<String> {
        m.kinds_for(&GroupVersionResource::new(g, v, r))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn fully_qualified_plural_and_singular() {
        let m = mapper();
        assert_eq!(
            kinds(&m, "apps", "v1", "deployments"),
            ["apps/v1, Kind=Deployment"]
        );
        assert_eq!(
            kinds(&m, "apps", "v1", "Deployment"),
            ["apps/v1, Kind=Deployment"]
        );
        assert!(kinds(&m, "apps", "v2", "deployments").is_empty());
        assert!(kinds(&m, "apps", "v1", "").is_empty());
    }

    #[test]
    fn empty_group_matches_every_group() {
        let m = mapper();
        assert_eq!(
            kinds(&m, "", "v1", "events"),
            ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
        );
        // Guessed singular for the core events (discovery gave none): "event".
        assert_eq!(
            kinds(&m, "", "v1", "event"),
            ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
        );
    }

    #[test]
    fn list_kinds_are_guessed() {
        let m = mapper();
        assert_eq!(
            kinds(&m, "apps", "v1", "deploymentlists"),
            ["apps/v1, Kind=DeploymentList"]
        );
        assert_eq!(kinds(&m, "apps", "v1", "lists"), ["apps/v1, Kind=List"]);
        assert_eq!(
            kinds(&m, "", "v1", "endpointslists"),
            ["/v1, Kind=EndpointsList"]
        );
    }

    #[test]
    fn group_prefix_when_no_version() {
        let m = mapper();
        assert_eq!(
            kinds(&m, "storage", "", "storageclasses"),
            ["storage.k8s.io/v1, Kind=StorageClass"]
        );
        assert_eq!(
            kinds(&m, "apps", "", "deployments"),
            ["apps/v1, Kind=Deployment"]
        );
    }

    #[test]
    fn subresources_map_to_their_kind() {
        let m = mapper();
        assert_eq!(
            kinds(&m, "apps", "v1", "deployments/scale"),
            ["autoscaling/v1, Kind=Scale"]
        );
        assert_eq!(
            kinds(&m, "apps", "v1", "deployment/scale"),
            ["autoscaling/v1, Kind=Scale"]
        );
        assert!(kinds(&m, "apps", "v1", "deployments/status").is_empty());
    }

    #[test]
    fn guesses_follow_apimachinery() {
        assert_eq!(
            guess_resource_for_kind("Policy"),
            ("policies".into(), "policy".into())
        );
        assert_eq!(
            guess_resource_for_kind("Ingress"),
            ("ingresses".into(), "ingress".into())
        );
        assert_eq!(
            guess_resource_for_kind("Endpoints"),
            ("endpoints".into(), "endpoints".into())
        );
        assert_eq!(
            guess_resource_for_kind("Pod"),
            ("pods".into(), "pod".into())
        );
        assert_eq!(guess_resource_for_kind(""), (String::new(), String::new()));
    }
}
