//! Group/version/kind and group/version/resource identifiers, and the priority order of API
//! versions.

use std::cmp::Ordering;
use std::fmt;

/// An API group and version. The core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    /// API group, `""` for the core group.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
}

impl GroupVersion {
    /// Builds a group-version.
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        GroupVersion {
            group: group.into(),
            version: version.into(),
        }
    }

    /// Parses an `apiVersion` (`v1`, `apps/v1`) the way apimachinery `ParseGroupVersion` does:
    /// empty → empty group-version; no slash → core group; one slash → group/version; more
    /// slashes → `None`.
    pub fn parse_api_version(api_version: &str) -> Option<Self> {
        if api_version.is_empty() || api_version == "/" {
            return Some(GroupVersion::new("", ""));
        }
        match api_version.split_once('/') {
            None => Some(GroupVersion::new("", api_version)),
            Some((g, v)) if !v.contains('/') => Some(GroupVersion::new(g, v)),
            Some(_) => None,
        }
    }

    /// The `/openapi/v3` path key of this group-version: `api/v1` or `apis/<group>/<version>`
    /// (resolver/discovery.go `resourcePathFromGV`).
    pub fn openapi_path(&self) -> String {
        if self.group.is_empty() {
            format!("api/{}", self.version)
        } else {
            format!("apis/{}/{}", self.group, self.version)
        }
    }

    /// The inverse of [`GroupVersion::openapi_path`].
    pub fn from_openapi_path(path: &str) -> Option<Self> {
        let path = path.trim_start_matches('/');
        if let Some(v) = path.strip_prefix("api/") {
            return (!v.is_empty() && !v.contains('/')).then(|| GroupVersion::new("", v));
        }
        let rest = path.strip_prefix("apis/")?;
        let (g, v) = rest.split_once('/')?;
        (!g.is_empty() && !v.is_empty() && !v.contains('/')).then(|| GroupVersion::new(g, v))
    }

    /// The kind `kind` in this group-version.
    pub fn with_kind(&self, kind: impl Into<String>) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: kind.into(),
        }
    }
}

impl fmt::Display for GroupVersion {
    /// `v1` or `apps/v1` (apimachinery `GroupVersion.String`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.version)
        } else {
            write!(f, "{}/{}", self.group, self.version)
        }
    }
}

/// A kind in a group-version.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct GroupVersionKind {
    /// API group, `""` for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The group-version part.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }

    /// True when all three parts are empty (apimachinery `GroupVersionKind.Empty`).
    pub fn is_empty(&self) -> bool {
        self.group.is_empty() && self.version.is_empty() && self.kind.is_empty()
    }

    /// The GVK of an `apiVersion` plus a kind (e.g. a `paramKind`); `None` when the
    /// apiVersion does not parse ([`GroupVersion::parse_api_version`]).
    pub fn from_api_version(api_version: &str, kind: &str) -> Option<Self> {
        GroupVersion::parse_api_version(api_version).map(|gv| gv.with_kind(kind))
    }
}

impl fmt::Display for GroupVersionKind {
    /// apimachinery `GroupVersionKind.String`: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A resource in a group-version; `resource` may name a subresource as `deployments/scale`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// API group, `""` for the core group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural or singular resource name, optionally `/subresource`.
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a GVR.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        GroupVersionResource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupVersionResource {
    /// apimachinery `GroupVersionResource.String`: `apps/v1, Resource=deployments`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Resource={}",
            self.group, self.version, self.resource
        )
    }
}

/// The order of API versions by Kubernetes priority, highest first: apimachinery v0.37.1
/// `pkg/version/helpers.go` `CompareKubeAwareVersionStrings` (GA before beta before alpha,
/// then the higher major, then the higher minor; versions that do not look like Kubernetes
/// versions last, in byte order), as discovery, `kubectl` and the RESTMapper sort versions.
///
/// The order is kube-rs's [`kube_core::Version::priority`], which is upstream's for every
/// version upstream's `kubeVersionRegex` (`^v(\d+)(?:(alpha|beta)(\d+))?$`) accepts. The one
/// difference, `v1alpha` or `v1beta` without a minor (a pre-release to kube-rs, not a
/// Kubernetes version to upstream), is mapped to upstream's reading here. Numbers beyond
/// `u32` are not Kubernetes versions to kube-rs and are to upstream (`strconv.Atoi`); no API
/// version has one. `tests/it/version_priority.rs` holds this to a transcription of upstream
/// over the versions of the embedded schemas and the corpora.
pub fn compare_version_priority(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    version_priority(b).cmp(&version_priority(a))
}

/// The priority of one version (greater is preferred); see [`compare_version_priority`].
fn version_priority(v: &str) -> impl Ord + use<> {
    let parsed = match kube_core::Version::parse(v) {
        kube_core::Version::Alpha(_, None) | kube_core::Version::Beta(_, None) => {
            kube_core::Version::Nonconformant(v.to_owned())
        }
        other => other,
    };
    parsed.priority()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_apimachinery() {
        assert_eq!(
            GroupVersionKind::new("", "v1", "Pod").to_string(),
            "/v1, Kind=Pod"
        );
        assert_eq!(
            GroupVersionKind::new("apps", "v1", "Deployment").to_string(),
            "apps/v1, Kind=Deployment"
        );
        assert_eq!(GroupVersion::new("", "v1").to_string(), "v1");
        assert_eq!(
            GroupVersionResource::new("apps", "v1", "deployments").to_string(),
            "apps/v1, Resource=deployments"
        );
    }

    #[test]
    fn openapi_paths_round_trip() {
        for gv in [GroupVersion::new("", "v1"), GroupVersion::new("apps", "v1")] {
            assert_eq!(
                GroupVersion::from_openapi_path(&gv.openapi_path()),
                Some(gv)
            );
        }
        assert_eq!(GroupVersion::from_openapi_path("apis/apps"), None);
        assert_eq!(GroupVersion::from_openapi_path("version"), None);
        assert_eq!(GroupVersion::from_openapi_path("apis/a/b/c"), None);
    }

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut v = vec![
            "v1alpha1",
            "foo",
            "v1beta2",
            "v2",
            "v1",
            "v1beta1",
            "v10alpha3",
            "v10",
            "v2beta1",
            "bar",
            "v1beta",
            "v0",
            "v1alpha",
        ];
        v.sort_by(|a, b| compare_version_priority(a, b));
        assert_eq!(
            v,
            [
                "v10",
                "v2",
                "v1",
                "v0",
                "v2beta1",
                "v1beta2",
                "v1beta1",
                "v10alpha3",
                "v1alpha1",
                "bar",
                "foo",
                "v1alpha",
                "v1beta"
            ]
        );
    }

    #[test]
    fn api_versions_parse() {
        assert_eq!(
            GroupVersion::parse_api_version("v1"),
            Some(GroupVersion::new("", "v1"))
        );
        assert_eq!(
            GroupVersion::parse_api_version("apps/v1"),
            Some(GroupVersion::new("apps", "v1"))
        );
        assert_eq!(
            GroupVersion::parse_api_version(""),
            Some(GroupVersion::new("", ""))
        );
        assert_eq!(GroupVersion::parse_api_version("a/b/c"), None);
    }
}
