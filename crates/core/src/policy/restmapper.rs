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

/// The discovery snapshot (the schema layer's one type: groups, versions, resources and
/// subresources in discovery order).
pub use crate::schema::discovery::{ApiGroupResources, ApiResource, ApiVersionResources};

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
/// snapshot, subresources not mapped, with apimachinery's errors.
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
        let mapper = crate::schema::RestMapper::new(groups.iter());
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
        // A `/` names a subresource, which maps to nothing here (client-go's mapper does not
        // list subresources).
        if resource.contains('/') {
            return Err(MappingError::NoMatch(gvr.clone()));
        }
        // MultiRESTMapper: every per-group-version mapper answers independently; results are
        // concatenated in discovery order without duplicates.
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

    /// `(name, singular, kind, kind's group/version when it differs, namespaced)`.
    type Row<'a> = (&'a str, &'a str, &'a str, Option<(&'a str, &'a str)>, bool);

    fn version(version: &str, rows: &[Row<'_>]) -> ApiVersionResources {
        let resources = rows
            .iter()
            .map(|&(name, singular, kind, gv, namespaced)| ApiResource {
                name: name.into(),
                singular_name: singular.into(),
                kind: kind.into(),
                group: gv.map(|(g, _)| g.to_owned()),
                version: gv.map(|(_, v)| v.to_owned()),
                namespaced,
            })
            .collect();
        ApiVersionResources {
            version: version.into(),
            resources,
        }
    }

    /// A small cluster: core v1, apps v1, events.k8s.io v1, autoscaling v2/v1, policy v1.
    pub(crate) fn sample_discovery() -> Vec<ApiGroupResources> {
        let hpa: &[Row<'_>] = &[(
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            "HorizontalPodAutoscaler",
            None,
            true,
        )];
        let group = |name: &str, versions| ApiGroupResources::with_versions(name.into(), versions);
        vec![
            group(
                "",
                vec![version(
                    "v1",
                    &[
                        ("configmaps", "configmap", "ConfigMap", None, true),
                        ("endpoints", "endpoints", "Endpoints", None, true),
                        ("events", "event", "Event", None, true),
                        ("namespaces", "namespace", "Namespace", None, false),
                        ("pods", "pod", "Pod", None, true),
                        (
                            "pods/eviction",
                            "",
                            "Eviction",
                            Some(("policy", "v1")),
                            true,
                        ),
                        ("pods/status", "", "Pod", None, true),
                        ("secrets", "secret", "Secret", None, true),
                        ("services", "service", "Service", None, true),
                        // a legacy server without singular names
                        ("serviceaccounts", "", "ServiceAccount", None, true),
                    ],
                )],
            ),
            group(
                "apps",
                vec![version(
                    "v1",
                    &[
                        ("daemonsets", "daemonset", "DaemonSet", None, true),
                        ("deployments", "deployment", "Deployment", None, true),
                        (
                            "deployments/scale",
                            "",
                            "Scale",
                            Some(("autoscaling", "v1")),
                            true,
                        ),
                        ("deployments/status", "", "Deployment", None, true),
                        ("replicasets", "replicaset", "ReplicaSet", None, true),
                        ("statefulsets", "statefulset", "StatefulSet", None, true),
                    ],
                )],
            ),
            group(
                "events.k8s.io",
                vec![version("v1", &[("events", "event", "Event", None, true)])],
            ),
            group("autoscaling", vec![version("v2", hpa), version("v1", hpa)]),
            group(
                "policy",
                vec![version(
                    "v1",
                    &[(
                        "poddisruptionbudgets",
                        "poddisruptionbudget",
                        "PodDisruptionBudget",
                        None,
                        true,
                    )],
                )],
            ),
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
}
