//! Kubernetes authentication and authorization of `/metrics` scrapers.
//!
//! Works like controller-runtime's secure metrics serving (`filters.WithAuthenticationAndAuthorization`):
//! the scraper sends `Authorization: Bearer <token>`; vapcheck asks the API server whether the
//! token is valid (TokenReview) and whether its user may `get` the non-resource URL `/metrics`
//! (SubjectAccessReview). 401 without or with an invalid token, 403 when not allowed, 500
//! when the API server cannot be asked. Results are cached: token reviews for 1 minute,
//! allowed decisions for 5 minutes, denied ones for 30 seconds (controller-runtime's values).
//! The TLS side of the metrics server is in [`super::secure`].

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

/// controller-runtime's cache lifetimes.
const TOKEN_TTL: Duration = Duration::from_secs(60);
const ALLOW_TTL: Duration = Duration::from_secs(300);
const DENY_TTL: Duration = Duration::from_secs(30);
/// Bound on cached tokens and decisions; the cache is emptied when full.
const CACHE_CAPACITY: usize = 1024;

/// The authenticated user of a token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    /// User name, e.g. `system:serviceaccount:monitoring:prometheus`.
    pub name: String,
    /// UID, may be empty.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// Asks someone (normally the API server) about tokens and permissions.
pub trait Reviewer: Send + Sync + 'static {
    /// The user of a valid token; `Ok(None)` for an invalid one.
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>>;
    /// Whether `user` may `verb` the non-resource URL `path`.
    fn authorize<'a>(
        &'a self,
        user: &'a User,
        path: &'a str,
        verb: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// [`Reviewer`] through TokenReview and SubjectAccessReview on the API server. Needs `create`
/// on `authentication.k8s.io/tokenreviews` and `authorization.k8s.io/subjectaccessreviews`.
#[derive(Clone)]
pub struct KubeReviewer {
    client: kube::Client,
}

impl std::fmt::Debug for KubeReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeReviewer")
    }
}

impl KubeReviewer {
    /// Uses `client` for the reviews.
    pub fn new(client: kube::Client) -> Self {
        KubeReviewer { client }
    }
}

impl KubeReviewer {
    /// Creates the cluster-scoped review object `review` (a TokenReview or a
    /// SubjectAccessReview, which the API server answers in the created object's status).
    async fn create<K>(&self, review: &K, what: &str) -> Result<K, String>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        kube::Api::<K>::all(self.client.clone())
            .create(&kube::api::PostParams::default(), review)
            .await
            .map_err(|e| format!("{what} failed: {e}"))
    }
}

impl Reviewer for KubeReviewer {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_owned(),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = self.create(&review, "TokenReview").await?;
            let Some(status) = answer.status else {
                return Ok(None);
            };
            if status.authenticated != Some(true) {
                return Ok(None);
            }
            let info = status.user.unwrap_or_default();
            Ok(Some(User {
                name: info.username.unwrap_or_default(),
                uid: info.uid.unwrap_or_default(),
                groups: info.groups.unwrap_or_default(),
                extra: info.extra.unwrap_or_default(),
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a User,
        path: &'a str,
        verb: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.name.clone()),
                    uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                    groups: Some(user.groups.clone()),
                    extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some(path.to_owned()),
                        verb: Some(verb.to_owned()),
                    }),
                    resource_attributes: None,
                },
                ..SubjectAccessReview::default()
            };
            let answer = self.create(&review, "SubjectAccessReview").await?;
            Ok(answer.status.map(|s| s.allowed).unwrap_or(false))
        })
    }
}

#[derive(Debug)]
struct TtlCache<V> {
    hasher: RandomState,
    entries: Mutex<HashMap<u64, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    fn new() -> Self {
        TtlCache {
            hasher: RandomState::new(),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Keys are hashed with a per-process random key, so tokens are not kept in memory.
    fn key(&self, parts: &[&str]) -> u64 {
        self.hasher.hash_one(parts)
    }

    fn get(&self, key: u64) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let (expires, value) = entries.get(&key)?;
        (Instant::now() < *expires).then(|| value.clone())
    }

    fn put(&self, key: u64, value: V, ttl: Duration) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= CACHE_CAPACITY {
                let now = Instant::now();
                entries.retain(|_, (expires, _)| *expires > now);
                if entries.len() >= CACHE_CAPACITY {
                    entries.clear();
                }
            }
            entries.insert(key, (Instant::now() + ttl, value));
        }
    }
}

/// Authentication and authorization in front of `/metrics`.
#[derive(Clone)]
pub struct MetricsAuth {
    reviewer: Arc<dyn Reviewer>,
    tokens: Arc<TtlCache<Option<User>>>,
    decisions: Arc<TtlCache<bool>>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsAuth")
    }
}

impl MetricsAuth {
    /// Uses `reviewer` for tokens and permissions.
    pub fn new(reviewer: impl Reviewer) -> Self {
        MetricsAuth {
            reviewer: Arc::new(reviewer),
            tokens: Arc::new(TtlCache::new()),
            decisions: Arc::new(TtlCache::new()),
        }
    }

    /// Checks a request for `path` with `verb`; `Err` is the HTTP answer to send instead.
    pub async fn check(
        &self,
        authorization: Option<&str>,
        path: &str,
        verb: &str,
    ) -> Result<User, (StatusCode, &'static str)> {
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or((StatusCode::UNAUTHORIZED, "Unauthorized\n"))?;
        let token_key = self.tokens.key(&[token]);
        let user = match self.tokens.get(token_key) {
            Some(cached) => cached,
            None => {
                let answer = self.reviewer.authenticate(token).await.map_err(|e| {
                    tracing::warn!(error = %e, "metrics authentication failed");
                    (StatusCode::INTERNAL_SERVER_ERROR, "Authentication failed\n")
                })?;
                self.tokens.put(token_key, answer.clone(), TOKEN_TTL);
                answer
            }
        };
        let user = user.ok_or((StatusCode::UNAUTHORIZED, "Unauthorized\n"))?;
        let groups = user.groups.join(",");
        let decision_key = self
            .decisions
            .key(&[&user.name, &user.uid, &groups, path, verb]);
        let allowed = match self.decisions.get(decision_key) {
            Some(cached) => cached,
            None => {
                let allowed = self
                    .reviewer
                    .authorize(&user, path, verb)
                    .await
                    .map_err(|e| {
                        tracing::warn!(error = %e, "metrics authorization failed");
                        (StatusCode::INTERNAL_SERVER_ERROR, "Authorization failed\n")
                    })?;
                let ttl = if allowed { ALLOW_TTL } else { DENY_TTL };
                self.decisions.put(decision_key, allowed, ttl);
                allowed
            }
        };
        if allowed {
            Ok(user)
        } else {
            tracing::debug!(user = %user.name, path, "metrics access denied");
            Err((StatusCode::FORBIDDEN, "Forbidden\n"))
        }
    }
}

async fn auth_middleware(State(auth): State<MetricsAuth>, req: Request, next: Next) -> Response {
    let header_value = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let verb = match *req.method() {
        axum::http::Method::GET => "get",
        axum::http::Method::HEAD => "head",
        axum::http::Method::POST => "post",
        axum::http::Method::PUT => "put",
        axum::http::Method::PATCH => "patch",
        axum::http::Method::DELETE => "delete",
        _ => "unknown",
    };
    let path = req.uri().path().to_owned();
    match auth.check(header_value.as_deref(), &path, verb).await {
        Ok(_) => next.run(req).await,
        Err((status, text)) => (status, text).into_response(),
    }
}

/// Wraps `router` (normally [`super::metrics_router`]) with the authentication and
/// authorization check.
pub fn protect(router: Router, auth: MetricsAuth) -> Router {
    router.layer(axum::middleware::from_fn_with_state(auth, auth_middleware))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::ServiceExt;

    /// A reviewer with one valid token per user, counting calls.
    #[derive(Default)]
    struct FakeReviewer {
        authn_calls: AtomicUsize,
        authz_calls: AtomicUsize,
        fail: bool,
    }

    impl Reviewer for Arc<FakeReviewer> {
        fn authenticate<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Option<User>, String>> {
            Box::pin(async move {
                self.authn_calls.fetch_add(1, Ordering::SeqCst);
                if self.fail {
                    return Err("connection refused".to_owned());
                }
                Ok(match token {
                    "prom-token" => Some(User {
                        name: "system:serviceaccount:monitoring:prometheus".into(),
                        ..User::default()
                    }),
                    "other-token" => Some(User {
                        name: "system:serviceaccount:default:other".into(),
                        ..User::default()
                    }),
                    _ => None,
                })
            })
        }

        fn authorize<'a>(
            &'a self,
            user: &'a User,
            path: &'a str,
            verb: &'a str,
        ) -> BoxFuture<'a, Result<bool, String>> {
            Box::pin(async move {
                self.authz_calls.fetch_add(1, Ordering::SeqCst);
                Ok(user.name.ends_with(":prometheus") && path == "/metrics" && verb == "get")
            })
        }
    }

    async fn status_of(router: Router, auth: Option<&str>) -> StatusCode {
        let mut req = axum::http::Request::get("/metrics");
        if let Some(a) = auth {
            req = req.header(header::AUTHORIZATION, a);
        }
        router
            .oneshot(req.body(Body::empty()).unwrap_or_default())
            .await
            .map(|r| r.status())
            .unwrap_or_else(|e| match e {})
    }

    #[tokio::test]
    async fn tokens_are_authenticated_and_authorized_with_caching() {
        let fake = Arc::new(FakeReviewer::default());
        let router = protect(
            super::super::metrics_router(crate::metrics::Metrics::new()),
            MetricsAuth::new(fake.clone()),
        );
        for (auth, status) in [
            (None, StatusCode::UNAUTHORIZED),
            (Some("Basic abc"), StatusCode::UNAUTHORIZED),
            (Some("Bearer wrong"), StatusCode::UNAUTHORIZED),
            (Some("Bearer other-token"), StatusCode::FORBIDDEN),
            (Some("Bearer prom-token"), StatusCode::OK),
        ] {
            assert_eq!(status_of(router.clone(), auth).await, status, "{auth:?}");
        }
        let (authn, authz) = (
            fake.authn_calls.load(Ordering::SeqCst),
            fake.authz_calls.load(Ordering::SeqCst),
        );
        assert_eq!((authn, authz), (3, 2));
        // Cached: no further reviews.
        assert_eq!(
            status_of(router.clone(), Some("Bearer prom-token")).await,
            StatusCode::OK
        );
        assert_eq!(
            status_of(router, Some("Bearer other-token")).await,
            StatusCode::FORBIDDEN
        );
        assert_eq!(fake.authn_calls.load(Ordering::SeqCst), 3);
        assert_eq!(fake.authz_calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn review_errors_are_500() {
        let fake = Arc::new(FakeReviewer {
            fail: true,
            ..FakeReviewer::default()
        });
        let router = protect(
            super::super::metrics_router(crate::metrics::Metrics::new()),
            MetricsAuth::new(fake),
        );
        assert_eq!(
            status_of(router, Some("Bearer prom-token")).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[tokio::test]
    async fn kube_reviewer_sends_token_and_subject_access_reviews() {
        let seen: Arc<Mutex<Vec<(String, serde_json::Value)>>> = Arc::default();
        let log = seen.clone();
        let fake = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let path = req.uri().path().to_owned();
                let bytes = http_body_util::BodyExt::collect(req.into_body())
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let body: serde_json::Value =
                    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
                if let Ok(mut l) = log.lock() {
                    l.push((path.clone(), body.clone()));
                }
                let mut answer = body;
                if path.ends_with("/tokenreviews") {
                    let ok = answer["spec"]["token"] == "good";
                    answer["status"] = serde_json::json!({
                        "authenticated": ok,
                        "user": {"username": "alice", "groups": ["g1"], "uid": "u1"}
                    });
                } else {
                    answer["status"] = serde_json::json!({"allowed": true});
                }
                http::Response::builder()
                    .status(201)
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .map_err(|e| std::io::Error::other(e.to_string()))
            }
        });
        let reviewer = KubeReviewer::new(kube::Client::new(fake, "default"));
        assert_eq!(reviewer.authenticate("bad").await, Ok(None));
        let user = reviewer
            .authenticate("good")
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("good token"));
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["g1"]);
        assert_eq!(reviewer.authorize(&user, "/metrics", "get").await, Ok(true));
        let log = seen.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(log.len(), 3);
        assert_eq!(log[0].0, "/apis/authentication.k8s.io/v1/tokenreviews");
        assert_eq!(
            log[2].0,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        );
        let sar = &log[2].1["spec"];
        assert_eq!(sar["user"], "alice");
        assert_eq!(sar["uid"], "u1");
        assert_eq!(sar["nonResourceAttributes"]["path"], "/metrics");
        assert_eq!(sar["nonResourceAttributes"]["verb"], "get");
    }
}
