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

use super::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};

/// A resource of a group-version.
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

/// The resources of one group-version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupVersionResources {
    /// The group-version.
    pub gv: GroupVersion,
    /// Its resources.
    pub resources: Vec<ResourceInfo>,
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
    /// Builds the mapper from group-versions in discovery order (the order matters only for the
    /// order of [`RestMapper::kinds_for`] results, as upstream).
    pub fn new(group_versions: impl IntoIterator<Item = GroupVersionResources>) -> Self {
        let mappers = group_versions
            .into_iter()
            .map(|gvr| {
                let mut m = VersionMapper {
                    gv: gvr.gv,
                    resource_to_kind: HashMap::new(),
                    subresources: HashMap::new(),
                    singular_to_plural: HashMap::new(),
                };
                for r in gvr.resources {
                    if r.plural.contains('/') {
                        continue;
                    }
                    let singular = if r.singular.is_empty() {
                        guess_resource_for_kind(&r.kind).1
                    } else {
                        r.singular.clone()
                    };
                    // AddSpecific(lower-case kind) then AddSpecific(kind): the second wins.
                    m.add(&r.plural, &singular, &r.kind);
                    let list_kind = format!("{}List", r.kind);
                    let (lp, ls) = guess_resource_for_kind(&list_kind);
                    m.add(&lp, &ls, &list_kind);
                    m.subresources.insert(r.plural.clone(), r.subresources);
                }
                let (lp, ls) = guess_resource_for_kind("List");
                m.add(&lp, &ls, "List");
                m
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

    fn res(plural: &str, singular: &str, kind: &str) -> ResourceInfo {
        ResourceInfo {
            plural: plural.into(),
            singular: singular.into(),
            kind: kind.into(),
            namespaced: true,
            subresources: Vec::new(),
        }
    }

    fn mapper() -> RestMapper {
        let mut deployments = res("deployments", "deployment", "Deployment");
        deployments.subresources.push(SubresourceInfo {
            name: "scale".into(),
            kind: GroupVersionKind::new("autoscaling", "v1", "Scale"),
        });
        RestMapper::new([
            GroupVersionResources {
                gv: GroupVersion::new("", "v1"),
                resources: vec![
                    res("events", "", "Event"),
                    res("endpoints", "endpoints", "Endpoints"),
                    res("pods", "pod", "Pod"),
                ],
            },
            GroupVersionResources {
                gv: GroupVersion::new("apps", "v1"),
                resources: vec![deployments],
            },
            GroupVersionResources {
                gv: GroupVersion::new("events.k8s.io", "v1"),
                resources: vec![res("events", "event", "Event")],
            },
            GroupVersionResources {
                gv: GroupVersion::new("storage.k8s.io", "v1"),
                resources: vec![res("storageclasses", "storageclass", "StorageClass")],
            },
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
