//! REST mapping (resource → kinds) and API discovery, as the policy layer needs them.
//!
//! [`RestMapper`] is the seam through which `typesToCheck` resolves resources; the controller
//! plugs in a discovery-backed implementation. [`DiscoveryRestMapper`] is a pure
//! implementation over a discovery snapshot that mirrors client-go's
//! `restmapper.NewDiscoveryRESTMapper` (a priority mapper over one apimachinery
//! `DefaultRESTMapper` per group version) for the parts that decide `KindsFor` results.

use std::sync::Arc;

use super::gvk::{Gvk, Gvr};

/// Why a resource could not be mapped to kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// No kind serves this resource (apimachinery `NoResourceMatchError`).
    // apimachinery v0.37.1 pkg/api/meta/errors.go: NoResourceMatchError.Error
    #[error("no matches for {0}")]
    NoMatch(Gvr),
    /// The mapper could not answer (discovery failed, invalid input, ...).
    #[error("{0}")]
    Failed(String),
}

/// Maps a resource to the kinds that serve it (apimachinery `meta.RESTMapper.KindsFor`).
///
/// Implementations must mirror apimachinery semantics where they matter: the resource is
/// matched case-insensitively (lower-cased first) against both the plural and the singular
/// name; an empty group or version matches any group or version.
pub trait RestMapper: Send + Sync {
    /// Every kind that serves `gvr`, in the mapper's preference order.
    fn kinds_for(&self, gvr: &Gvr) -> Result<Vec<Gvk>, MappingError>;

    /// Drops cached discovery data so the next lookup sees fresh data
    /// (`meta.ResettableRESTMapper.Reset`). The default does nothing, like a mapper that is
    /// not resettable upstream.
    fn reset(&self) {}
}

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

/// A discovery snapshot: every group, version and resource the API server serves. Used by
/// the extended mode to expand wildcard rules and to find the kinds of subresources.
pub trait Discovery: Send + Sync {
    /// All groups in discovery order, or why they could not be listed.
    fn api_groups(&self) -> Result<Arc<Vec<ApiGroupResources>>, String>;
}

/// apimachinery `UnsafeGuessKindToResource` (the schema module's implementation, shared).
pub use crate::schema::mapper::guess_resource_for_kind;

/// A REST mapper over a discovery snapshot, mirroring client-go
/// `restmapper.NewDiscoveryRESTMapper` for `KindsFor`: the crate's one mapper
/// ([`crate::schema::RestMapper`]: one mapper per group version in discovery order, each
/// resource under its plural and its singular name, guessed from the kind when discovery has
/// none, plus the `<Kind>List` and `List` kinds client-go registers by guessing) over the
/// snapshot's resources, subresources left out, with apimachinery's errors.
#[derive(Debug, Clone)]
pub struct DiscoveryRestMapper {
    groups: Arc<Vec<ApiGroupResources>>,
    mapper: crate::schema::RestMapper,
}

impl DiscoveryRestMapper {
    /// Builds the mapper from a discovery snapshot.
    pub fn new(groups: Vec<ApiGroupResources>) -> Self {
        Self::from_shared(Arc::new(groups))
    }

    /// Builds the mapper from a shared discovery snapshot.
    pub fn from_shared(groups: Arc<Vec<ApiGroupResources>>) -> Self {
        let versions = groups.iter().flat_map(|group| {
            group
                .versions
                .iter()
                .map(|version| crate::schema::GroupVersionResources {
                    gv: crate::schema::GroupVersion::new(
                        group.name.clone(),
                        version.version.clone(),
                    ),
                    // Subresources are not mapped (client-go skips them).
                    resources: version
                        .resources
                        .iter()
                        .filter(|r| !r.name.contains('/'))
                        .map(|r| crate::schema::ResourceInfo {
                            plural: r.name.clone(),
                            singular: r.singular_name.clone(),
                            kind: r.kind.clone(),
                            namespaced: r.namespaced,
                            subresources: Vec::new(),
                        })
                        .collect(),
                })
                .collect::<Vec<_>>()
        });
        let mapper = crate::schema::RestMapper::new(versions);
        Self { groups, mapper }
    }
}

impl RestMapper for DiscoveryRestMapper {
    fn kinds_for(&self, gvr: &Gvr) -> Result<Vec<Gvk>, MappingError> {
        // apimachinery coerceResourceForMatching: lower-case, `__internal` version → "".
        let resource = gvr.resource.to_lowercase();
        let version = if gvr.version == "__internal" {
            ""
        } else {
            gvr.version.as_str()
        };
        if resource.is_empty() {
            // apimachinery v0.37.1 pkg/api/meta/restmapper.go: KindsFor
            return Err(MappingError::Failed(format!(
                "a resource must be present, got: {}",
                Gvr::new(gvr.group.clone(), version, resource)
            )));
        }
        // MultiRESTMapper: every per-group-version mapper answers independently; results are
        // concatenated in discovery order without duplicates. A `/` names a subresource,
        // which maps to nothing here.
        let out = self
            .mapper
            .kinds_for(&Gvr::new(gvr.group.clone(), version, resource));
        if out.is_empty() {
            return Err(MappingError::NoMatch(gvr.clone()));
        }
        Ok(out)
    }
}

impl Discovery for DiscoveryRestMapper {
    fn api_groups(&self) -> Result<Arc<Vec<ApiGroupResources>>, String> {
        Ok(Arc::clone(&self.groups))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn res(name: &str, singular: &str, kind: &str) -> ApiResource {
        ApiResource {
            name: name.into(),
            singular_name: singular.into(),
            kind: kind.into(),
            namespaced: true,
            ..ApiResource::default()
        }
    }

    /// A small cluster: core v1, apps v1, events.k8s.io v1, autoscaling v1/v2, policy v1.
    pub(crate) fn sample_discovery() -> Vec<ApiGroupResources> {
        let sub =
            |name: &str, kind: &str, group: Option<&str>, version: Option<&str>| ApiResource {
                name: name.into(),
                kind: kind.into(),
                group: group.map(str::to_owned),
                version: version.map(str::to_owned),
                namespaced: true,
                ..ApiResource::default()
            };
        vec![
            ApiGroupResources {
                name: String::new(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![
                        res("configmaps", "configmap", "ConfigMap"),
                        res("endpoints", "endpoints", "Endpoints"),
                        res("events", "event", "Event"),
                        ApiResource {
                            namespaced: false,
                            ..res("namespaces", "namespace", "Namespace")
                        },
                        res("pods", "pod", "Pod"),
                        sub("pods/eviction", "Eviction", Some("policy"), Some("v1")),
                        sub("pods/status", "Pod", None, None),
                        res("secrets", "secret", "Secret"),
                        res("services", "service", "Service"),
                        // a legacy server without singular names
                        res("serviceaccounts", "", "ServiceAccount"),
                    ],
                }],
            },
            ApiGroupResources {
                name: "apps".into(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![
                        res("daemonsets", "daemonset", "DaemonSet"),
                        res("deployments", "deployment", "Deployment"),
                        sub(
                            "deployments/scale",
                            "Scale",
                            Some("autoscaling"),
                            Some("v1"),
                        ),
                        sub("deployments/status", "Deployment", None, None),
                        res("replicasets", "replicaset", "ReplicaSet"),
                        res("statefulsets", "statefulset", "StatefulSet"),
                    ],
                }],
            },
            ApiGroupResources {
                name: "events.k8s.io".into(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![res("events", "event", "Event")],
                }],
            },
            ApiGroupResources {
                name: "autoscaling".into(),
                preferred_version: "v2".into(),
                versions: vec![
                    ApiVersionResources {
                        version: "v2".into(),
                        resources: vec![res(
                            "horizontalpodautoscalers",
                            "horizontalpodautoscaler",
                            "HorizontalPodAutoscaler",
                        )],
                    },
                    ApiVersionResources {
                        version: "v1".into(),
                        resources: vec![res(
                            "horizontalpodautoscalers",
                            "horizontalpodautoscaler",
                            "HorizontalPodAutoscaler",
                        )],
                    },
                ],
            },
            ApiGroupResources {
                name: "policy".into(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![res(
                        "poddisruptionbudgets",
                        "poddisruptionbudget",
                        "PodDisruptionBudget",
                    )],
                }],
            },
        ]
    }

    fn kinds(
        m: &DiscoveryRestMapper,
        g: &str,
        v: &str,
        r: &str,
    ) -> Result<Vec<String>, MappingError> {
        m.kinds_for(&Gvr::new(g, v, r))
            .map(|v| v.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn plural_singular_and_case() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        assert_eq!(
            kinds(&m, "apps", "v1", "deployments").unwrap(),
            ["apps/v1, Kind=Deployment"]
        );
        assert_eq!(
            kinds(&m, "apps", "v1", "deployment").unwrap(),
            ["apps/v1, Kind=Deployment"]
        );
        assert_eq!(
            kinds(&m, "apps", "v1", "Deployments").unwrap(),
            ["apps/v1, Kind=Deployment"]
        );
        // guessed singular for a resource without one
        assert_eq!(
            kinds(&m, "", "v1", "serviceaccount").unwrap(),
            ["/v1, Kind=ServiceAccount"]
        );
        // client-go registers guessed `<Kind>List` resources too
        assert_eq!(
            kinds(&m, "apps", "v1", "deploymentlists").unwrap(),
            ["apps/v1, Kind=DeploymentList"]
        );
    }

    #[test]
    fn core_group_matches_every_group_with_that_version() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        assert_eq!(
            kinds(&m, "", "v1", "events").unwrap(),
            ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
        );
        assert_eq!(kinds(&m, "", "v1", "pods").unwrap(), ["/v1, Kind=Pod"]);
    }

    #[test]
    fn group_without_version_and_prefix() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        assert_eq!(
            kinds(&m, "autoscaling", "", "horizontalpodautoscalers").unwrap(),
            [
                "autoscaling/v2, Kind=HorizontalPodAutoscaler",
                "autoscaling/v1, Kind=HorizontalPodAutoscaler"
            ]
        );
        assert_eq!(
            kinds(&m, "events", "", "events").unwrap(),
            ["events.k8s.io/v1, Kind=Event"]
        );
    }

    #[test]
    fn errors() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        assert_eq!(
            m.kinds_for(&Gvr::new("apps", "v1", "nopes")),
            Err(MappingError::NoMatch(Gvr::new("apps", "v1", "nopes")))
        );
        assert_eq!(
            MappingError::NoMatch(Gvr::new("apps", "v1", "nopes")).to_string(),
            "no matches for apps/v1, Resource=nopes"
        );
        assert!(matches!(
            m.kinds_for(&Gvr::new("apps", "v1", "")),
            Err(MappingError::Failed(_))
        ));
        // subresources are not mapped
        assert!(
            m.kinds_for(&Gvr::new("apps", "v1", "deployments/scale"))
                .is_err()
        );
    }

    #[test]
    fn guessing() {
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
    }
}
