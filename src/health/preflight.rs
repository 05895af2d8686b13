//! Start-up permission check: asks the API server (SelfSubjectAccessReview) whether the
//! controller's identity has every permission it needs, so a missing RBAC rule is reported at
//! start-up naming the verb and resource, not later as a failing reconcile.
//!
//! [`REQUIRED_PERMISSIONS`] is the single list: `tests/it/manifests.rs` checks that
//! `manifests/` grants each entry.

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};

/// Where a permission applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Cluster-wide (a ClusterRole).
    Cluster,
    /// In the Lease namespace only (a Role).
    LeaseNamespace,
}

/// One permission the controller needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// The verb (`get`, `list`, `watch`, `patch`, `create`, `update`).
    pub verb: &'static str,
    /// API group (`""` for core); empty for non-resource URLs.
    pub group: &'static str,
    /// Resource, with `/subresource` when there is one; empty for non-resource URLs.
    pub resource: &'static str,
    /// Non-resource URL (`/openapi/v3`); empty for resources.
    pub url: &'static str,
    /// Where it applies.
    pub scope: Scope,
    /// Only needed when `/metrics` authorizes scrapers (`metrics.secure.authorize`).
    pub secure_metrics_only: bool,
    /// What it is for, for the error message.
    pub why: &'static str,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.url.is_empty() {
            return write!(f, "{} on non-resource URL {}", self.verb, self.url);
        }
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        write!(f, "{} {} ({group})", self.verb, self.resource)?;
        if self.scope == Scope::LeaseNamespace {
            f.write_str(" in the lease namespace")?;
        }
        Ok(())
    }
}

const fn res(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    why: &'static str,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        url: "",
        scope: Scope::Cluster,
        secure_metrics_only: false,
        why,
    }
}

const fn url(path: &'static str) -> Permission {
    Permission {
        verb: "get",
        group: "",
        resource: "",
        url: path,
        scope: Scope::Cluster,
        secure_metrics_only: false,
        why: "to discover APIs and read their OpenAPI schemas",
    }
}

const fn lease(verb: &'static str) -> Permission {
    Permission {
        verb,
        group: "coordination.k8s.io",
        resource: "leases",
        url: "",
        scope: Scope::LeaseNamespace,
        secure_metrics_only: false,
        why: "for leader election",
    }
}

const fn review(group: &'static str, resource: &'static str) -> Permission {
    Permission {
        verb: "create",
        group,
        resource,
        url: "",
        scope: Scope::Cluster,
        secure_metrics_only: true,
        why: "to authorize metrics scrapers (metrics.secure.authorize)",
    }
}

const VAP: &str = "validatingadmissionpolicies";
const ADM: &str = "admissionregistration.k8s.io";

/// Every permission `vapcheck controller` needs to start: each one is a request the code makes
/// (docs/rbac.md names the request and the e2e check, `e2e/tests/rbac.rs`, that fails without
/// it). The bindings, param kinds and MutatingAdmissionPolicies are not here: without them the
/// controller runs degraded and says so (conditions, `vapcheck_watch_forbidden`, log).
pub const REQUIRED_PERMISSIONS: &[Permission] = &[
    // The policy watch (kube-runtime `watcher`: list, then watch).
    res("list", ADM, VAP, "to read policies"),
    res("watch", ADM, VAP, "to follow policy changes"),
    res(
        "patch",
        ADM,
        "validatingadmissionpolicies/status",
        "to write policy status",
    ),
    // kube-runtime `Recorder::publish` creates an Event (and patches the series of a repeated
    // one: `patch` is not checked here, a refusal only loses the repeat count, logged).
    res(
        "create",
        "events.k8s.io",
        "events",
        "to record events on policies",
    ),
    // Granted to every authenticated user by the bootstrap ClusterRole `system:discovery`
    // (kubernetes v1.37.1 plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go,
    // `ClusterRoles` and `ClusterRoleBindings`); checked in case a cluster removed that binding.
    url("/openapi/v3"),
    url("/openapi/v3/apis/apps/v1"),
    url("/api"),
    url("/apis"),
    url("/apis/admissionregistration.k8s.io/v1"),
    // `lease::Elector`: get_opt, create, replace (an update).
    lease("get"),
    lease("create"),
    lease("update"),
    review("authentication.k8s.io", "tokenreviews"),
    review("authorization.k8s.io", "subjectaccessreviews"),
];

/// A permission the API server denied, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The permission.
    pub permission: Permission,
    /// The API server's reason, if it gave one.
    pub reason: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "missing RBAC permission: {}, needed {}",
            self.permission, self.permission.why
        )?;
        if !self.reason.is_empty() {
            write!(f, " ({})", self.reason)?;
        }
        Ok(())
    }
}

fn review_spec(p: &Permission, lease_namespace: &str) -> SelfSubjectAccessReviewSpec {
    if !p.url.is_empty() {
        return SelfSubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(p.url.to_owned()),
                verb: Some(p.verb.to_owned()),
            }),
            resource_attributes: None,
        };
    }
    let (resource, subresource) = match p.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (p.resource, None),
    };
    SelfSubjectAccessReviewSpec {
        non_resource_attributes: None,
        resource_attributes: Some(ResourceAttributes {
            group: Some(p.group.to_owned()),
            resource: Some(resource.to_owned()),
            subresource,
            verb: Some(p.verb.to_owned()),
            namespace: (p.scope == Scope::LeaseNamespace).then(|| lease_namespace.to_owned()),
            ..ResourceAttributes::default()
        }),
    }
}

/// Asks the API server about every needed permission: the Lease ones only with a
/// `lease_namespace` (leader election on), the secure-metrics ones only when
/// `secure_metrics_authorize`. Returns the denied ones; `Err` when the API server cannot be
/// asked at all (no cluster, bad credentials).
pub async fn check_permissions(
    client: &kube::Client,
    lease_namespace: Option<&str>,
    secure_metrics_authorize: bool,
) -> Result<Vec<Missing>, kube::Error> {
    let api: kube::Api<SelfSubjectAccessReview> = kube::Api::all(client.clone());
    let mut missing = Vec::new();
    for p in REQUIRED_PERMISSIONS {
        if p.secure_metrics_only && !secure_metrics_authorize {
            continue;
        }
        let lease_scoped = p.scope == Scope::LeaseNamespace;
        if lease_scoped && lease_namespace.is_none() {
            continue;
        }
        let lease_namespace = lease_namespace.unwrap_or_default();
        let review = SelfSubjectAccessReview {
            spec: review_spec(p, lease_namespace),
            ..SelfSubjectAccessReview::default()
        };
        let answer = api
            .create(&kube::api::PostParams::default(), &review)
            .await?;
        let status = answer.status.unwrap_or_default();
        if !status.allowed {
            missing.push(Missing {
                permission: *p,
                reason: status
                    .reason
                    .or(status.evaluation_error)
                    .unwrap_or_default(),
            });
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn denied_permissions_are_named() {
        let seen: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let log = seen.clone();
        let fake = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let bytes = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let mut body: serde_json::Value =
                    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                if let Ok(mut l) = log.lock() {
                    l.push(body["spec"].clone());
                }
                let attrs = &body["spec"]["resourceAttributes"];
                let denied = attrs["subresource"] == "status"
                    || (attrs["resource"] == "leases" && attrs["verb"] == "create");
                body["status"] = if denied {
                    serde_json::json!({"allowed": false, "reason": "no RBAC policy matched"})
                } else {
                    serde_json::json!({"allowed": true})
                };
                http::Response::builder()
                    .status(201)
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .map_err(|e| std::io::Error::other(e.to_string()))
            }
        });
        let client = kube::Client::new(fake, "default");
        let missing = check_permissions(&client, Some("vapcheck-system"), false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let texts: Vec<String> = missing.iter().map(ToString::to_string).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert_eq!(
            texts[0],
            "missing RBAC permission: patch validatingadmissionpolicies/status (admissionregistration.k8s.io), needed to write policy status (no RBAC policy matched)"
        );
        assert!(texts[1].starts_with(
            "missing RBAC permission: create leases (coordination.k8s.io) in the lease namespace"
        ));
        let specs = seen.lock().map(|s| s.clone()).unwrap_or_default();
        let secure_only = REQUIRED_PERMISSIONS
            .iter()
            .filter(|p| p.secure_metrics_only)
            .count();
        assert_eq!(specs.len(), REQUIRED_PERMISSIONS.len() - secure_only);
        let lease = specs
            .iter()
            .find(|s| s["resourceAttributes"]["resource"] == "leases")
            .unwrap_or_else(|| panic!("lease review"));
        assert_eq!(lease["resourceAttributes"]["namespace"], "vapcheck-system");
        assert!(
            specs
                .iter()
                .any(|s| s["nonResourceAttributes"]["path"] == "/openapi/v3")
        );
        let status_review = specs
            .iter()
            .find(|s| s["resourceAttributes"]["subresource"] == "status")
            .unwrap_or_else(|| panic!("status review"));
        assert_eq!(
            status_review["resourceAttributes"]["resource"],
            "validatingadmissionpolicies"
        );
    }

    #[tokio::test]
    async fn unreachable_api_server_is_an_error() {
        let fake = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                "connection refused",
            ))
        });
        let client = kube::Client::new(fake, "default");
        assert!(check_permissions(&client, Some("x"), true).await.is_err());
    }
}
