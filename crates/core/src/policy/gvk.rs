//! Group/version/kind and group/version/resource triples, ordered and printed the way
//! apimachinery does it.

/// A group, version and kind (apimachinery `schema.GroupVersionKind`): the schema module's
/// type. Its derived order is the byte-wise order of group, then version, then kind (upstream
/// `sortGVKList`); it prints as `apps/v1, Kind=Deployment` (`/v1, Kind=Pod` for the core
/// group).
pub use crate::schema::gvk::GroupVersionKind as Gvk;
/// A group, version and resource (apimachinery `schema.GroupVersionResource`), printed as
/// `apps/v1, Resource=deployments`. `resource` names a subresource as `pods/status` only in
/// the extended mode's own bookkeeping; the REST mapper is only asked about plain resources.
pub use crate::schema::gvk::GroupVersionResource as Gvr;

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
        use crate::schema::GroupVersion;
        let parse = |gv| GroupVersion::parse_api_version(gv).map(|g| (g.group, g.version));
        let pair = |g: &str, v: &str| Some((g.to_owned(), v.to_owned()));
        assert_eq!(parse(""), pair("", ""));
        assert_eq!(parse("v1"), pair("", "v1"));
        assert_eq!(parse("apps/v1"), pair("apps", "v1"));
        assert_eq!(parse("a/b/c"), None);
        assert_eq!(
            Gvk::from_api_version("example.com/v1", "Cfg"),
            Some(Gvk::new("example.com", "v1", "Cfg"))
        );
    }
}
