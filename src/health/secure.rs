//! HTTPS for `/metrics` with Kubernetes authentication and authorization.
//!
//! Works like controller-runtime's secure metrics serving (`filters.WithAuthenticationAndAuthorization`):
//! the scraper sends `Authorization: Bearer <token>`; vapcheck asks the API server whether the
//! token is valid (TokenReview) and whether its user may `get` the non-resource URL `/metrics`
//! (SubjectAccessReview). 401 without or with an invalid token, 403 when not allowed, 500
//! when the API server cannot be asked. Results are cached: token reviews for 1 minute,
//! allowed decisions for 5 minutes, denied ones for 30 seconds (controller-runtime's values).
//!
//! TLS: a PEM certificate chain and key from files, reloaded when the files change (checked at
//! most every 10 s, like controller-runtime's certwatcher, so cert-manager rotations need no
//! restart), or a self-signed certificate generated at start-up. Only HTTP/1.1 is offered (no
//! HTTP/2, as controller-runtime's default).

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

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
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
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

impl Reviewer for KubeReviewer {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async move {
            let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_owned(),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let answer = api
                .create(&kube::api::PostParams::default(), &review)
                .await
                .map_err(|e| format!("TokenReview failed: {e}"))?;
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
            let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
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
            let answer = api
                .create(&kube::api::PostParams::default(), &review)
                .await
                .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
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

/// Loads a PEM certificate chain and private key.
pub fn load_pem(
    cert_file: &Path,
    key_file: &Path,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let cert_pem = std::fs::read(cert_file)
        .map_err(|e| anyhow::anyhow!("metrics.secure.certFile {}: {e}", cert_file.display()))?;
    let key_pem = std::fs::read(key_file)
        .map_err(|e| anyhow::anyhow!("metrics.secure.keyFile {}: {e}", key_file.display()))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "metrics.secure.certFile {}: not PEM certificates: {e}",
                cert_file.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!(
            "metrics.secure.certFile {}: no certificate found",
            cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        anyhow::anyhow!(
            "metrics.secure.keyFile {}: no PEM private key: {e}",
            key_file.display()
        )
    })?;
    Ok((certs, key))
}

/// A self-signed certificate for `localhost` and the pod's host name.
pub fn self_signed() -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
    {
        names.push(host);
    }
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| anyhow::anyhow!("cannot generate a self-signed certificate: {e}"))?;
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("generated key: {e}"))?;
    Ok((vec![generated.cert.der().clone()], key))
}

/// A rustls server configuration offering only HTTP/1.1.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| anyhow::anyhow!("metrics TLS certificate or key rejected: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How often [`ReloadingCert`] looks at the files.
pub const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The TLS configuration from `metrics.secure`: files when given (reloaded on change), else
/// self-signed.
pub fn tls_from_config(
    secure: &crate::config::SecureMetrics,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    if secure.cert_file.is_empty() {
        let (certs, key) = self_signed()?;
        return server_config(certs, key);
    }
    let resolver = ReloadingCert::new(
        PathBuf::from(&secure.cert_file),
        PathBuf::from(&secure.key_file),
        CERT_RELOAD_INTERVAL,
    )?;
    server_config_with_resolver(Arc::new(resolver))
}

/// A rustls server configuration using `resolver`, offering only HTTP/1.1.
pub fn server_config_with_resolver(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Modification time and length of both files: a change of either means "reload".
type FileStamp = (Option<SystemTime>, u64, Option<SystemTime>, u64);

#[derive(Debug)]
struct ReloadState {
    last_check: Instant,
    stamp: FileStamp,
    current: Arc<rustls::sign::CertifiedKey>,
}

/// A certificate read from PEM files and read again when they change. A change that does not
/// load (half-written files, mismatched key) keeps the previous certificate and is logged.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    interval: Duration,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<ReloadState>,
}

impl ReloadingCert {
    /// Loads the files once (an error here is a start-up error) and checks them again at most
    /// every `interval`.
    pub fn new(cert_file: PathBuf, key_file: PathBuf, interval: Duration) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = file_stamp(&cert_file, &key_file);
        let current = load_certified(&cert_file, &key_file, &provider)?;
        Ok(ReloadingCert {
            cert_file,
            key_file,
            interval,
            provider,
            state: Mutex::new(ReloadState {
                last_check: Instant::now(),
                stamp,
                current,
            }),
        })
    }

    /// The certificate to serve now, reloading it first when the files changed.
    pub fn current(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut state = self.state.lock().ok()?;
        if state.last_check.elapsed() >= self.interval {
            state.last_check = Instant::now();
            let stamp = file_stamp(&self.cert_file, &self.key_file);
            if stamp != state.stamp {
                match load_certified(&self.cert_file, &self.key_file, &self.provider) {
                    Ok(loaded) => {
                        tracing::info!(cert = %self.cert_file.display(), "metrics certificate reloaded");
                        state.current = loaded;
                        state.stamp = stamp;
                    }
                    Err(e) => {
                        // Keep serving the old certificate; try again at the next check.
                        tracing::warn!(error = %e, "metrics certificate not reloaded");
                    }
                }
            }
        }
        Some(state.current.clone())
    }
}

impl rustls::server::ResolvesServerCert for ReloadingCert {
    fn resolve(
        &self,
        _client_hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.current()
    }
}

fn file_stamp(cert: &Path, key: &Path) -> FileStamp {
    let meta = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.modified().ok(), m.len()))
            .unwrap_or((None, 0))
    };
    let (cm, cl) = meta(cert);
    let (km, kl) = meta(key);
    (cm, cl, km, kl)
}

fn load_certified(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> anyhow::Result<Arc<rustls::sign::CertifiedKey>> {
    let (certs, key_der) = load_pem(cert, key)?;
    let certified =
        rustls::sign::CertifiedKey::from_der(certs, key_der, provider).map_err(|e| {
            anyhow::anyhow!(
                "metrics.secure.certFile {} / keyFile {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(Arc::new(certified))
}

/// A listener that accepts TCP connections and completes TLS handshakes concurrently (a slow
/// client cannot hold up others), for `axum::serve`.
pub struct TlsListener {
    local: SocketAddr,
    rx: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        SocketAddr,
    )>,
    _acceptor_task: AbortOnDrop,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local", &self.local)
            .finish()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl TlsListener {
    /// Starts accepting on `listener` with `config`.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly.
                        tracing::warn!(error = %e, "metrics accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            local,
            rx,
            _acceptor_task: AbortOnDrop(task),
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The acceptor task ended (only when aborted): never yield another connection.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
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
        assert_eq!(
            status_of(router.clone(), None).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status_of(router.clone(), Some("Basic abc")).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status_of(router.clone(), Some("Bearer wrong")).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status_of(router.clone(), Some("Bearer other-token")).await,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            status_of(router.clone(), Some("Bearer prom-token")).await,
            StatusCode::OK
        );
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

    #[test]
    fn self_signed_certificate_makes_a_server_config() {
        let (certs, key) = self_signed().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(certs.len(), 1);
        let config = server_config(certs, key).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn pem_files_load_and_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let cert_pem = pem_encode("CERTIFICATE", generated.cert.der());
        let key_pem = pem_encode("PRIVATE KEY", &generated.signing_key.serialize_der());
        let (c, k) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&c, cert_pem).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&k, key_pem).unwrap_or_else(|e| panic!("{e}"));
        let (certs, key) = load_pem(&c, &k).unwrap_or_else(|e| panic!("{e}"));
        assert!(server_config(certs, key).is_ok());
        let e = load_pem(&dir.path().join("missing.crt"), &k)
            .err()
            .unwrap_or_else(|| panic!("error"));
        assert!(e.to_string().contains("metrics.secure.certFile"), "{e}");
        let e = load_pem(&c, &c).err().unwrap_or_else(|| panic!("error"));
        assert!(e.to_string().contains("metrics.secure.keyFile"), "{e}");
    }

    fn pem_encode(label: &str, der: &[u8]) -> String {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut b64 = String::new();
        for chunk in der.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| {
                acc | (u32::from(*b) << (16 - 8 * i as u32))
            });
            for i in 0..4 {
                if i <= chunk.len() {
                    b64.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    b64.push('=');
                }
            }
        }
        let body: Vec<String> = b64
            .as_bytes()
            .chunks(64)
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            body.join("\n")
        )
    }

    #[tokio::test]
    async fn https_metrics_serve_with_a_configured_certificate() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let (c, k) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&c, pem_encode("CERTIFICATE", generated.cert.der()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            &k,
            pem_encode("PRIVATE KEY", &generated.signing_key.serialize_der()),
        )
        .unwrap_or_else(|e| panic!("{e}"));

        let mut config = crate::config::Config::default();
        config.metrics.bind_address = "127.0.0.1:0".to_owned();
        config.health.bind_address = "127.0.0.1:0".to_owned();
        config.metrics.secure.enabled = true;
        config.metrics.secure.authorize = true;
        config.metrics.secure.cert_file = c.display().to_string();
        config.metrics.secure.key_file = k.display().to_string();
        let metrics = crate::metrics::Metrics::new();
        let health = super::super::Health::default();
        let e = super::super::HttpServers::bind(&config, metrics.clone(), health.clone(), None)
            .await
            .err()
            .unwrap_or_else(|| panic!("authorize without a client must fail"));
        assert!(e.to_string().contains("metrics.secure.authorize"), "{e}");

        config.metrics.secure.authorize = false;
        let servers = super::super::HttpServers::bind(&config, metrics, health, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = servers.metrics_addr().unwrap_or_else(|e| panic!("{e}"));
        let shutdown = super::super::Shutdown::default();
        let task = tokio::spawn(servers.run(shutdown.clone()));

        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(generated.cert.der().clone())
            .unwrap_or_else(|e| panic!("{e}"));
        let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("{e}"))
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let name =
            rustls::pki_types::ServerName::try_from("localhost").unwrap_or_else(|e| panic!("{e}"));
        let mut tls = connector
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake: {e}"));
        tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut response = String::new();
        let _ = tls.read_to_string(&mut response).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains("vapcheck_build_info"), "{response}");

        // Plain HTTP on the TLS port gets no HTTP answer.
        let mut plain = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        plain
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
        assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));

        shutdown.trigger();
        let done = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(done, Ok(Ok(Ok(())))), "servers stop on shutdown");
    }

    #[tokio::test]
    async fn https_metrics_refuse_the_health_address() {
        let mut config = crate::config::Config::default();
        config.metrics.bind_address = "127.0.0.1:18443".to_owned();
        config.health.bind_address = "127.0.0.1:18443".to_owned();
        config.metrics.secure.enabled = true;
        let e = super::super::HttpServers::bind(
            &config,
            crate::metrics::Metrics::new(),
            super::super::Health::default(),
            None,
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("must fail"));
        assert!(e.to_string().contains("metrics.bindAddress"), "{e}");
    }

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, CertificateDer<'static>) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&c, pem_encode("CERTIFICATE", generated.cert.der()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            &k,
            pem_encode("PRIVATE KEY", &generated.signing_key.serialize_der()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (c, k, generated.cert.der().clone())
    }

    fn bump_mtime(path: &Path, secs: u64) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{e}"));
        let when = SystemTime::now() + Duration::from_secs(secs);
        file.set_modified(when).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn certificate_files_are_reloaded_when_they_change() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (c, k, first) = write_pair(dir.path(), "first.example");
        let reloading = ReloadingCert::new(c.clone(), k.clone(), Duration::ZERO)
            .unwrap_or_else(|e| panic!("{e}"));
        let served = |r: &ReloadingCert| r.current().map(|ck| ck.cert[0].clone());
        assert_eq!(served(&reloading), Some(first.clone()));

        // A half-written update (garbage) keeps the old certificate.
        std::fs::write(&c, "not a certificate").unwrap_or_else(|e| panic!("{e}"));
        bump_mtime(&c, 2);
        assert_eq!(served(&reloading), Some(first.clone()));

        // A complete new pair is picked up.
        let (c2, k2, second) = write_pair(dir.path(), "second.example");
        bump_mtime(&c2, 4);
        bump_mtime(&k2, 4);
        assert_ne!(first, second);
        assert_eq!(served(&reloading), Some(second));

        // The initial load must succeed.
        std::fs::write(&k, "garbage").unwrap_or_else(|e| panic!("{e}"));
        assert!(ReloadingCert::new(c, k, Duration::ZERO).is_err());
    }
}
