//! Health probes and the HTTP servers for `/healthz`, `/readyz` and `/metrics` (axum 0.8).
//!
//! - `/healthz` (liveness): the process is up and its async runtime is responsive. A
//!   heartbeat task ([`Health::spawn_heartbeat`]) stamps the time every period; when the stamp
//!   is older than the allowed stall, `/healthz` fails and the kubelet restarts the pod.
//! - `/readyz` (readiness): the controller's caches are synced **and** it is either leading or
//!   standing by ready to lead, and it is not shutting down. The controller flips these through
//!   the [`Readiness`] handle. The body lists each check as `[+]name ok` / `[-]name reason`,
//!   like the Kubernetes API server's verbose probes.
//! - `/metrics`: [`Metrics`] in OpenMetrics or classic text, chosen by the `Accept` header;
//!   served on its own address (or together with the probes when both addresses are equal),
//!   optionally over HTTPS ([`secure`]) with TokenReview/SubjectAccessReview ([`authz`]).
//!
//! Both servers stop gracefully when the shutdown future completes.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

pub mod authz;
pub mod preflight;
pub mod secure;

/// Where the replica stands in leader election, as far as readiness is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionState {
    /// Not yet known (lease manager starting).
    Starting = 0,
    /// This replica holds the lease (or leader election is disabled).
    Leading = 1,
    /// Another replica leads; this one watches the lease and can take over.
    Standby = 2,
    /// The lease cannot be read or written (no API server, no RBAC permission).
    Failed = 3,
}

impl ElectionState {
    fn from_u8(v: u8) -> ElectionState {
        match v {
            1 => ElectionState::Leading,
            2 => ElectionState::Standby,
            3 => ElectionState::Failed,
            _ => ElectionState::Starting,
        }
    }

    /// The word used in `/readyz` bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            ElectionState::Starting => "starting",
            ElectionState::Leading => "leading",
            ElectionState::Standby => "standby",
            ElectionState::Failed => "failed",
        }
    }
}

#[derive(Debug)]
struct ReadinessInner {
    caches_synced: AtomicBool,
    election: AtomicU8,
    shutting_down: AtomicBool,
    /// The controller's policy watch, once attached ([`Readiness::attach_watch`]).
    watch: std::sync::OnceLock<crate::metrics::WatchStatus>,
}

/// How long the policy watch of a running controller may fail before `/readyz` does: a 410
/// relist or a reconnect after an API server restart takes well under this.
pub const WATCH_READY_GRACE: Duration = Duration::from_secs(5);

/// The readiness handle the controller flips. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct Readiness {
    inner: Arc<ReadinessInner>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            inner: Arc::new(ReadinessInner {
                caches_synced: AtomicBool::new(false),
                election: AtomicU8::new(ElectionState::Starting as u8),
                shutting_down: AtomicBool::new(false),
                watch: std::sync::OnceLock::new(),
            }),
        }
    }
}

impl Readiness {
    /// Whether the watch caches (policies, CRDs, APIServices, schemas) are synced.
    pub fn set_caches_synced(&self, synced: bool) {
        self.inner.caches_synced.store(synced, Ordering::SeqCst);
    }

    /// The leader election state; set [`ElectionState::Leading`] when election is disabled.
    pub fn set_election(&self, state: ElectionState) {
        self.inner.election.store(state as u8, Ordering::SeqCst);
    }

    /// Marks the process as shutting down: `/readyz` fails from now on.
    pub fn set_shutting_down(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Makes `/readyz` fail while the controller's policy watch has been failing for longer
    /// than [`WATCH_READY_GRACE`]. The first call wins.
    pub fn attach_watch(&self, watch: crate::metrics::WatchStatus) {
        let _ = self.inner.watch.set(watch);
    }

    /// The current election state.
    pub fn election(&self) -> ElectionState {
        ElectionState::from_u8(self.inner.election.load(Ordering::SeqCst))
    }

    /// Whether `/readyz` succeeds now.
    pub fn is_ready(&self) -> bool {
        self.checks().iter().all(|c| c.1.is_none())
    }

    /// Each readiness check: name and, when failing, the reason.
    pub fn checks(&self) -> [(&'static str, Option<String>); 4] {
        let caches = if self.inner.caches_synced.load(Ordering::SeqCst) {
            None
        } else {
            Some("caches not synced yet".to_owned())
        };
        let election = match self.election() {
            ElectionState::Leading | ElectionState::Standby => None,
            other => Some(format!("leader election {}", other.as_str())),
        };
        let shutdown = if self.inner.shutting_down.load(Ordering::SeqCst) {
            Some("shutting down".to_owned())
        } else {
            None
        };
        let watch = self
            .inner
            .watch
            .get()
            .and_then(|w| w.broken_for())
            .filter(|(broken, _)| *broken > WATCH_READY_GRACE)
            .map(|(broken, error)| {
                format!(
                    "the policy list/watch has been failing for {}s: {error}",
                    broken.as_secs()
                )
            });
        [
            ("caches-synced", caches),
            ("leader-election", election),
            ("policy-watch", watch),
            ("shutdown", shutdown),
        ]
    }
}

#[derive(Debug)]
struct LivenessInner {
    base: Instant,
    /// Time of the last heartbeat in milliseconds on the [`Health::now_ms`] clock;
    /// `u64::MAX` before the first.
    last_beat_ms: AtomicU64,
    max_stall: Duration,
}

/// Liveness and readiness of the process. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct Health {
    liveness: Arc<LivenessInner>,
    readiness: Readiness,
}

impl Default for Health {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl Health {
    /// `max_stall`: how old the last heartbeat may be before `/healthz` fails.
    pub fn new(max_stall: Duration) -> Health {
        Health {
            liveness: Arc::new(LivenessInner {
                base: Instant::now(),
                last_beat_ms: AtomicU64::new(u64::MAX),
                max_stall,
            }),
            readiness: Readiness::default(),
        }
    }

    /// The readiness handle for the controller.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Milliseconds since `base`, shifted by one day so that stamps in the past never
    /// underflow.
    fn now_ms(&self) -> u64 {
        const DAY_MS: u64 = 86_400_000;
        u64::try_from(self.liveness.base.elapsed().as_millis())
            .unwrap_or(u64::MAX / 2)
            .saturating_add(DAY_MS)
    }

    /// Stamps the heartbeat now.
    pub fn beat(&self) {
        let now = self.now_ms();
        self.liveness.last_beat_ms.store(now, Ordering::SeqCst);
    }

    /// Spawns the heartbeat task on the current tokio runtime: it beats every `period`
    /// (choose it well below `max_stall`). A runtime too busy or blocked to run it makes
    /// `/healthz` fail.
    pub fn spawn_heartbeat(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let health = self.clone();
        health.beat();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                health.beat();
            }
        })
    }

    /// `None` when alive, else how long the heartbeat has been stalled. Before the first
    /// heartbeat the process counts as alive.
    pub fn stalled_for(&self) -> Option<Duration> {
        let last = self.liveness.last_beat_ms.load(Ordering::SeqCst);
        if last == u64::MAX {
            return None;
        }
        let since = Duration::from_millis(self.now_ms().saturating_sub(last));
        (since > self.liveness.max_stall).then_some(since)
    }

    #[cfg(test)]
    fn set_last_beat_ago(&self, ago: Duration) {
        let at = self.now_ms().saturating_sub(ago.as_millis() as u64);
        self.liveness.last_beat_ms.store(at, Ordering::SeqCst);
    }
}

async fn healthz(State(health): State<Health>) -> Response {
    match health.stalled_for() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(d) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "[-]heartbeat: event loop stalled for {:.1}s\nhealthz check failed\n",
                d.as_secs_f64()
            ),
        )
            .into_response(),
    }
}

async fn readyz(State(health): State<Health>) -> Response {
    let mut body = String::new();
    let mut ok = true;
    for (name, failure) in health.readiness.checks() {
        match failure {
            None => body.push_str(&format!("[+]{name} ok\n")),
            Some(reason) => {
                ok = false;
                body.push_str(&format!("[-]{name} failed: {reason}\n"));
            }
        }
    }
    if ok {
        body.push_str("readyz check passed\n");
        (StatusCode::OK, body).into_response()
    } else {
        body.push_str("readyz check failed\n");
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

async fn metrics_handler(State(metrics): State<Metrics>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Encoding walks every series; keep it off the async workers.
    let encoded =
        tokio::task::spawn_blocking(move || metrics.encode_for_accept(accept.as_deref())).await;
    match encoded {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n").into_response(),
    }
}

/// The router with `/healthz`, `/livez` (alias) and `/readyz`.
pub fn health_router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

/// The router with `/metrics` (plain, no authentication).
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .with_state(metrics)
}

/// Binds a listener, with an error that names what it is for and the address.
pub async fn bind(what: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for {what} on {addr}: {e}"))
}

/// Serves `router` on `listener` (a `TcpListener` or a [`secure::TlsListener`]) until
/// `shutdown` completes, then finishes in-flight requests.
pub async fn serve<L>(
    listener: L,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// A shutdown signal that many servers can wait on. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown {
            tx: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }
}

impl Shutdown {
    /// Triggers the shutdown; every [`Shutdown::wait`] future completes.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the shutdown was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Completes once [`Shutdown::trigger`] was called (at once if it already was).
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            // An error means the sender is gone, which also ends the wait.
            let _ = rx.wait_for(|triggered| *triggered).await;
        }
    }
}

/// The bound HTTP servers; [`HttpServers::run`] serves them.
#[derive(Debug)]
pub struct HttpServers {
    metrics: Option<TcpListener>,
    metrics_tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    health: TcpListener,
    metrics_router: Router,
    health_router: Router,
}

impl HttpServers {
    /// Binds the metrics and health listeners from the configuration. When both addresses
    /// are equal (and not port 0), one plain-HTTP listener serves all three paths. With
    /// `metrics.secure.enabled`, `/metrics` is served over HTTPS on its own address and, with
    /// `metrics.secure.authorize`, needs `client` for TokenReview and SubjectAccessReview.
    /// Fails with a message naming the key or address (port taken, bad certificate, ...).
    pub async fn bind(
        config: &crate::config::Config,
        metrics: Metrics,
        health: Health,
        client: Option<kube::Client>,
    ) -> anyhow::Result<HttpServers> {
        let metrics_addr = config.metrics_addr()?;
        let health_addr = config.health_addr()?;
        let shared = metrics_addr == health_addr && metrics_addr.port() != 0;
        let secure = &config.metrics.secure;
        let mut router = metrics_router(metrics);
        let mut metrics_tls = None;
        if secure.enabled {
            if shared {
                anyhow::bail!(
                    "invalid config: key `metrics.bindAddress`: HTTPS metrics need an address of their own, not health.bindAddress ({health_addr})"
                );
            }
            metrics_tls = Some(secure::tls_from_config(secure)?);
            if secure.authorize {
                let client = client.ok_or_else(|| {
                    anyhow::anyhow!(
                        "metrics.secure.authorize needs a Kubernetes client for TokenReview and SubjectAccessReview"
                    )
                })?;
                router = authz::protect(
                    router,
                    authz::MetricsAuth::new(authz::KubeReviewer::new(client)),
                );
            }
        }
        let health_listener = bind("health probes", health_addr).await?;
        let metrics_listener = if shared {
            None
        } else {
            Some(bind("metrics", metrics_addr).await?)
        };
        Ok(HttpServers {
            metrics: metrics_listener,
            metrics_tls,
            health: health_listener,
            metrics_router: router,
            health_router: health_router(health),
        })
    }

    /// The actual metrics address (differs from the configured one with port 0).
    pub fn metrics_addr(&self) -> std::io::Result<SocketAddr> {
        self.metrics.as_ref().unwrap_or(&self.health).local_addr()
    }

    /// The actual health address.
    pub fn health_addr(&self) -> std::io::Result<SocketAddr> {
        self.health.local_addr()
    }

    /// Serves until `shutdown` is triggered, then drains in-flight requests.
    pub async fn run(self, shutdown: Shutdown) -> std::io::Result<()> {
        match self.metrics {
            None => {
                let router = self.health_router.merge(self.metrics_router);
                serve(self.health, router, shutdown.wait()).await
            }
            Some(metrics_listener) => {
                let metrics_server = async {
                    match self.metrics_tls {
                        Some(tls) => {
                            let listener = secure::TlsListener::new(metrics_listener, tls)?;
                            serve(listener, self.metrics_router, shutdown.wait()).await
                        }
                        None => serve(metrics_listener, self.metrics_router, shutdown.wait()).await,
                    }
                };
                let (a, b) = tokio::join!(
                    serve(self.health, self.health_router, shutdown.wait()),
                    metrics_server,
                );
                a.and(b)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get_path(
        router: Router,
        path: &str,
        accept: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut req = Request::get(path);
        if let Some(a) = accept {
            req = req.header(header::ACCEPT, a);
        }
        let resp = router
            .oneshot(req.body(Body::empty()).unwrap_or_default())
            .await
            .unwrap_or_else(|e| match e {});
        let status = resp.status();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&bytes).into_owned(), ct)
    }

    #[tokio::test]
    async fn healthz_ok_until_the_heartbeat_stalls() {
        let health = Health::new(Duration::from_secs(5));
        let (status, body, _) = get_path(health_router(health.clone()), "/healthz", None).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "alive before the first beat: {body}"
        );
        health.beat();
        let (status, _, _) = get_path(health_router(health.clone()), "/healthz", None).await;
        assert_eq!(status, StatusCode::OK);
        health.set_last_beat_ago(Duration::from_secs(60));
        let (status, body, _) = get_path(health_router(health.clone()), "/healthz", None).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("stalled"), "{body}");
        let (status, _, _) = get_path(health_router(health.clone()), "/livez", None).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn heartbeat_task_keeps_healthz_green() {
        let health = Health::new(Duration::from_millis(500));
        health.set_last_beat_ago(Duration::from_secs(60));
        assert!(health.stalled_for().is_some());
        let task = health.spawn_heartbeat(Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(health.stalled_for(), None);
        task.abort();
    }

    #[tokio::test]
    async fn readyz_fails_while_the_policy_watch_of_a_running_controller_is_broken() {
        let health = Health::default();
        let ready = health.readiness();
        ready.set_caches_synced(true);
        ready.set_election(ElectionState::Leading);
        let watch = crate::metrics::WatchStatus::default();
        ready.attach_watch(watch.clone());
        let router = || health_router(health.clone());
        watch.start();
        let (status, body, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("[+]policy-watch ok"), "{body}");

        // A failure shorter than the grace (a 410 relist, a reconnect) keeps it ready.
        watch.failed("connection refused");
        assert!(ready.is_ready());
        watch.backdate_failure(WATCH_READY_GRACE + Duration::from_secs(1));
        let (status, body, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            body.contains("[-]policy-watch failed: the policy list/watch has been failing for 6s: connection refused"),
            "{body}"
        );

        // Working again: ready at once.
        watch.succeeded();
        assert!(ready.is_ready());

        // A standby runs no watch: an old failure does not count.
        watch.failed("gone");
        watch.backdate_failure(Duration::from_secs(60));
        assert!(!ready.is_ready());
        watch.stop();
        assert!(ready.is_ready());
    }

    #[tokio::test]
    async fn readyz_needs_synced_caches_and_an_election_state() {
        let health = Health::default();
        let ready = health.readiness();
        let router = || health_router(health.clone());
        let (status, body, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-]caches-synced"), "{body}");
        assert!(
            body.contains("[-]leader-election failed: leader election starting"),
            "{body}"
        );

        ready.set_caches_synced(true);
        ready.set_election(ElectionState::Standby);
        let (status, body, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("[+]leader-election ok"));

        ready.set_election(ElectionState::Leading);
        assert!(ready.is_ready());
        ready.set_election(ElectionState::Failed);
        let (status, _, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);

        ready.set_election(ElectionState::Leading);
        ready.set_shutting_down();
        let (status, body, _) = get_path(router(), "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-]shutdown failed: shutting down"), "{body}");
    }

    #[tokio::test]
    async fn metrics_endpoint_negotiates_the_format() {
        let metrics = Metrics::new();
        metrics.set_leader("vapcheck", true);
        let (status, body, ct) = get_path(metrics_router(metrics.clone()), "/metrics", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct, crate::metrics::PROMETHEUS_TEXT_CONTENT_TYPE);
        assert!(
            body.contains("# TYPE controller_runtime_reconcile_total counter"),
            "{body}"
        );
        assert!(body.contains("leader_election_master_status{name=\"vapcheck\"} 1"));
        let (_, body, ct) = get_path(
            metrics_router(metrics),
            "/metrics",
            Some("application/openmetrics-text; version=1.0.0"),
        )
        .await;
        assert_eq!(ct, crate::metrics::OPENMETRICS_CONTENT_TYPE);
        assert!(body.ends_with("# EOF\n"));
    }

    #[tokio::test]
    async fn unknown_path_is_404() {
        let (status, _, _) = get_path(health_router(Health::default()), "/metrics", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    async fn http_get(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream
            .write_all(req.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        stream
            .read_to_string(&mut out)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        out
    }

    #[tokio::test]
    async fn servers_bind_serve_and_shut_down() {
        let mut config = crate::config::Config::default();
        config.metrics.bind_address = "127.0.0.1:0".to_owned();
        config.health.bind_address = "127.0.0.1:0".to_owned();
        let health = Health::default();
        health.readiness().set_caches_synced(true);
        health.readiness().set_election(ElectionState::Leading);
        let servers = HttpServers::bind(&config, Metrics::new(), health, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (maddr, haddr) = (
            servers.metrics_addr().unwrap_or_else(|e| panic!("{e}")),
            servers.health_addr().unwrap_or_else(|e| panic!("{e}")),
        );
        assert_ne!(maddr, haddr);
        let shutdown = Shutdown::default();
        let task = tokio::spawn(servers.run(shutdown.clone()));
        let resp = http_get(maddr, "/metrics").await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.contains("vapcheck_build_info"), "{resp}");
        let resp = http_get(haddr, "/readyz").await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        let resp = http_get(haddr, "/metrics").await;
        assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
        shutdown.trigger();
        let done = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(done, Ok(Ok(Ok(())))), "servers stop on shutdown");
    }

    #[tokio::test]
    async fn same_address_serves_everything_on_one_listener() {
        // Reserve a free port, then configure both endpoints on it.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = probe.local_addr().unwrap_or_else(|e| panic!("{e}"));
        drop(probe);
        let mut config = crate::config::Config::default();
        config.metrics.bind_address = addr.to_string();
        config.health.bind_address = addr.to_string();
        let servers = HttpServers::bind(&config, Metrics::new(), Health::default(), None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let shutdown = Shutdown::default();
        let task = tokio::spawn(servers.run(shutdown.clone()));
        assert!(http_get(addr, "/metrics").await.starts_with("HTTP/1.1 200"));
        assert!(http_get(addr, "/healthz").await.starts_with("HTTP/1.1 200"));
        shutdown.trigger();
        let done = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(done, Ok(Ok(Ok(())))));
    }

    #[tokio::test]
    async fn taken_port_names_the_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = taken.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let err = bind("metrics", addr)
            .await
            .err()
            .unwrap_or_else(|| panic!("bind should fail"));
        let text = err.to_string();
        assert!(
            text.contains("metrics") && text.contains(&addr.to_string()),
            "{text}"
        );
    }

    #[tokio::test]
    async fn shutdown_wait_completes_after_trigger() {
        let s = Shutdown::default();
        let waiter = s.wait();
        assert!(!s.is_triggered());
        s.trigger();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap_or_else(|_| panic!("wait did not complete"));
        // A wait created after the trigger completes at once.
        tokio::time::timeout(Duration::from_secs(1), s.wait())
            .await
            .unwrap_or_else(|_| panic!("late wait did not complete"));
    }
}
