//! Start-up permission check: one SelfSubjectAccessReview per permission the controller needs,
//! so a missing RBAC rule fails at start with the verb and resource named.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

/// One permission: verb on `group`/`resource`[/`subresource`], optionally in a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// `get`, `list`, `watch`, `patch`, `create`, `update`.
    pub verb: &'static str,
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Plural resource name.
    pub resource: &'static str,
    /// Subresource, e.g. `status`.
    pub subresource: Option<&'static str>,
    /// Namespace for namespaced resources; `None` means all namespaces or cluster-scoped.
    pub namespace: Option<String>,
}

impl std::fmt::Display for Permission {
    /// `patch validatingadmissionpolicies/status (group admissionregistration.k8s.io)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(s) = self.subresource {
            write!(f, "/{s}")?;
        }
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, " (group {group}")?;
        if let Some(ns) = &self.namespace {
            write!(f, ", namespace {ns}")?;
        }
        write!(f, ")")
    }
}

/// The permissions `vapcheck controller` needs; the Lease ones only with leader election.
pub fn required(lease_namespace: Option<&str>) -> Vec<Permission> {
    const VAP: &str = "admissionregistration.k8s.io";
    let p = |verb, group, resource, subresource, namespace: Option<&str>| Permission {
        verb,
        group,
        resource,
        subresource,
        namespace: namespace.map(str::to_owned),
    };
    let mut out = vec![
        p("list", VAP, "validatingadmissionpolicies", None, None),
        p("watch", VAP, "validatingadmissionpolicies", None, None),
        p(
            "patch",
            VAP,
            "validatingadmissionpolicies",
            Some("status"),
            None,
        ),
        p("create", "events.k8s.io", "events", None, Some("default")),
    ];
    if let Some(ns) = lease_namespace {
        for verb in ["get", "create", "update"] {
            out.push(p(verb, "coordination.k8s.io", "leases", None, Some(ns)));
        }
    }
    out
}

/// Asks the API server about each permission; fails naming every one that is denied.
pub async fn check_permissions(
    client: &kube::Client,
    permissions: &[Permission],
) -> anyhow::Result<()> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    for perm in permissions {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(perm.verb.to_owned()),
                    group: Some(perm.group.to_owned()),
                    resource: Some(perm.resource.to_owned()),
                    subresource: perm.subresource.map(str::to_owned),
                    namespace: perm.namespace.clone(),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| anyhow::anyhow!("cannot check RBAC permission ({perm}): {e}"))?;
        if !answer.status.is_some_and(|s| s.allowed) {
            denied.push(perm.to_string());
        }
    }
    if denied.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "missing RBAC permission: cannot {} (docs/controller.md lists what vapcheck needs)",
            denied.join("; cannot ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_name_verb_and_resource() {
        let perms = required(Some("vapcheck-system"));
        let text: Vec<String> = perms.iter().map(ToString::to_string).collect();
        assert!(
            text.contains(
                &"patch validatingadmissionpolicies/status (group admissionregistration.k8s.io)"
                    .to_owned()
            )
        );
        assert!(text.contains(
            &"update leases (group coordination.k8s.io, namespace vapcheck-system)".to_owned()
        ));
        assert_eq!(required(None).len(), 4);
    }
}
