//! Group/version/kind and group/version/resource triples, ordered and printed the way
//! apimachinery does it.

use std::cmp::Ordering;
use std::fmt;

/// A group, version and kind (`schema.GroupVersionKind` in apimachinery). The core group is
/// the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl Gvk {
    /// Builds a GVK from its three parts.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// True when all three parts are empty (apimachinery `GroupVersionKind.Empty`).
    pub fn is_empty(&self) -> bool {
        self.group.is_empty() && self.version.is_empty() && self.kind.is_empty()
    }

    /// The GVK of a `paramKind`: `apiVersion` parsed as `group/version` (or a bare version for
    /// the core group) plus the kind. `None` when the apiVersion does not parse, mirroring
    /// apimachinery `schema.ParseGroupVersion` (empty string → empty group version; more than
    /// one `/` → error).
    pub fn from_api_version(api_version: &str, kind: &str) -> Option<Self> {
        let (group, version) = parse_group_version(api_version)?;
        Some(Self::new(group, version, kind))
    }
}

/// apimachinery `schema.ParseGroupVersion`: `""` → ("", ""), `"v1"` → ("", "v1"),
/// `"apps/v1"` → ("apps", "v1"), anything with two or more `/` → error (`None`).
pub fn parse_group_version(gv: &str) -> Option<(&str, &str)> {
    if gv.is_empty() || gv == "/" {
        return Some(("", ""));
    }
    match gv.matches('/').count() {
        0 => Some(("", gv)),
        1 => gv.split_once('/'),
        _ => None,
    }
}

/// apimachinery `GroupVersionKind.String()`: `<group>/<version>, Kind=<kind>`; the core group
/// prints as `/v1, Kind=Pod`.
impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Byte-wise comparison of group, then version, then kind (upstream `sortGVKList`).
impl Ord for Gvk {
    fn cmp(&self, other: &Self) -> Ordering {
        self.group
            .as_bytes()
            .cmp(other.group.as_bytes())
            .then_with(|| self.version.as_bytes().cmp(other.version.as_bytes()))
            .then_with(|| self.kind.as_bytes().cmp(other.kind.as_bytes()))
    }
}

impl PartialOrd for Gvk {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A group, version and resource (`schema.GroupVersionResource`). `resource` may name a
/// subresource as `pods/status` only in the extended mode's own bookkeeping; the REST mapper
/// is only ever asked about plain resources.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (plural or singular name, any case).
    pub resource: String,
}

impl Gvr {
    /// Builds a GVR from its three parts.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
}

/// apimachinery `GroupVersionResource.String()`: `<group>/<version>, Resource=<resource>`.
impl fmt::Display for Gvr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Resource={}",
            self.group, self.version, self.resource
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_apimachinery() {
        assert_eq!(Gvk::new("", "v1", "Pod").to_string(), "/v1, Kind=Pod");
        assert_eq!(
            Gvk::new("apps", "v1", "Deployment").to_string(),
            "apps/v1, Kind=Deployment"
        );
        assert_eq!(
            Gvr::new("apps", "v1", "deployments").to_string(),
            "apps/v1, Resource=deployments"
        );
    }

    #[test]
    fn ordering_is_bytewise_group_version_kind() {
        let mut v = [
            Gvk::new("apps", "v1", "ReplicaSet"),
            Gvk::new("", "v1", "Pod"),
            Gvk::new("apps", "v1", "Deployment"),
            Gvk::new("Apps", "v1", "Zeta"),
            Gvk::new("", "v1", "ConfigMap"),
            Gvk::new("apps", "v1beta1", "Deployment"),
        ];
        v.sort();
        let s: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            s,
            [
                "/v1, Kind=ConfigMap",
                "/v1, Kind=Pod",
                "Apps/v1, Kind=Zeta",
                "apps/v1, Kind=Deployment",
                "apps/v1, Kind=ReplicaSet",
                "apps/v1beta1, Kind=Deployment",
            ]
        );
    }

    #[test]
    fn parse_group_version_cases() {
        assert_eq!(parse_group_version(""), Some(("", "")));
        assert_eq!(parse_group_version("v1"), Some(("", "v1")));
        assert_eq!(parse_group_version("apps/v1"), Some(("apps", "v1")));
        assert_eq!(parse_group_version("a/b/c"), None);
        assert_eq!(
            Gvk::from_api_version("example.com/v1", "Cfg"),
            Some(Gvk::new("example.com", "v1", "Cfg"))
        );
    }
}
