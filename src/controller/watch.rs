//! The backoff of the policy watch, and how its errors are classified.
//!
//! kube-runtime's `DefaultBackoff` (client-go's reflector numbers: 800 ms doubling to 30 s,
//! reset only after 120 s without an error) is kind to a struggling API server, but after a
//! few API server restarts in a row it leaves the watch asleep for up to 30 s after the server
//! is back, and in a `Controller` the same backoff also pauses the re-check triggers. vapcheck
//! is one client with one watch, so it retries sooner: [`WatchBackoff`] starts at 250 ms,
//! doubles, and never waits more than [`WATCH_BACKOFF_MAX`] (with jitter below it). The
//! stream resets it on every successful item (`StreamBackoff`).

use std::time::Duration;

use kube::runtime::utils::Backoff;
use kube::runtime::watcher;

/// The first pause after a list or watch failure.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(250);

/// The longest pause between two list or watch attempts.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Exponential backoff from [`WATCH_BACKOFF_MIN`] to [`WATCH_BACKOFF_MAX`]; each pause is
/// shortened by a random 0–25 % so that replicas do not retry in lockstep.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
    seed: u64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ u64::from(std::process::id()).rotate_left(32);
        WatchBackoff {
            next: WATCH_BACKOFF_MIN,
            seed: seed | 1,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let pause = jittered(self.next, &mut self.seed);
        self.next = (self.next * 2).min(WATCH_BACKOFF_MAX);
        Some(pause)
    }
}

/// `pause` less a random part of up to a quarter, drawn from `seed` (xorshift64: enough
/// randomness to keep retries apart), which it advances.
pub(crate) fn jittered(pause: Duration, seed: &mut u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    let jitter = (*seed % 1000) as f64 / 1000.0 * 0.25;
    pause.mul_f64(1.0 - jitter)
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_BACKOFF_MIN;
    }
}

/// The re-check triggers of a controller as the object references `reconcile_on` takes: each
/// policy name sent on `rx`, until the sender is gone. A receiver that fell behind logs
/// `lagged` (with how many names it missed) and goes on with the next.
pub fn trigger_stream<K>(
    rx: tokio::sync::broadcast::Receiver<String>,
    lagged: &'static str,
) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()> + 'static,
{
    use tokio::sync::broadcast::error::RecvError;
    futures::stream::unfold(rx, move |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(name) => return Some((kube::runtime::reflector::ObjectRef::new(&name), rx)),
                Err(RecvError::Lagged(n)) => tracing::warn!(missed = n, "{lagged}"),
                Err(RecvError::Closed) => return None,
            }
        }
    })
}

/// Whether the watcher failed because its resource version expired (410 Gone); it lists
/// again on its next step.
pub fn is_expired(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::InitialListFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// What [`watch_with_refusals`] hands its caller.
pub enum Watched<K> {
    /// A watcher event, in order (apply it to the caller's store).
    Event(watcher::Event<K>),
    /// The API server started refusing (403) the list (`list`: nothing can be known) or only
    /// the watch (the lists still work: the objects are re-listed after each refusal).
    Refused { list: bool },
    /// The list (`list`), or the watch, is allowed again.
    Allowed { list: bool },
}

/// How long a watch must run without a refusal after a list before the watch counts as
/// allowed again (a refused watch is refused within milliseconds of the list).
pub const WATCH_ALLOWED_AFTER: Duration = Duration::from_secs(3);

/// Whether a list/watch error is the API server's refusal (403 Forbidden).
pub fn refused(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 403
    )
}

/// Whether `e` is the API server's answer while the watch cache of a resource is still
/// filling, as right after its CRD is established: a 429 `storage is (re)initializing`
/// (k8s.io/apiserver v0.37.1 `pkg/storage/cacher/ready.go`, `check`, made a
/// `NewTooManyRequests` by `cacher.go`'s `Watch` and `GetList`). It passes by itself: logged
/// at info, not as a warning.
pub fn cache_initializing(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 429 && s.message.starts_with("storage is (re)initializing")
    )
}

/// Lists and watches `api` forever, handing every event to `on`, and survives refusals
/// (403, e.g. an RBAC rule removed or revoked while vapcheck runs): the first refusal of the
/// list or of the watch is logged (naming `resource` and the API server's reason) and handed
/// to `on` once, `vapcheck_watch_forbidden{resource}` says 1 while either is refused, and the
/// watcher starts afresh with a list after [`WatchBackoff`]'s pause. A list that completes
/// after a refused list is `Allowed { list: true }`; a watch that runs
/// [`WATCH_ALLOWED_AFTER`] without a refusal after a refused watch is `Allowed { list: false }`
/// (an allowed watch shows nothing when nothing changes, and a fresh list would not tell).
///
/// An established watch is not ended by an RBAC change: kube-apiserver authorizes a request
/// when it starts (k8s.io/apiserver v0.37.1 `pkg/endpoints/filters/authorization.go`,
/// `withAuthorization`), so a revoked permission shows at the next list or watch (the
/// watch's timeout, an API server restart).
pub async fn watch_with_refusals<K>(
    api: kube::Api<K>,
    resource: &str,
    metrics: &crate::metrics::Metrics,
    slim: fn(&mut K),
    mut on: impl FnMut(Watched<K>),
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use tracing::{debug, info, warn};

    let config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let (mut list_refused, mut watch_refused) = (false, false);
    let mut pause = WatchBackoff::default();
    metrics.set_watch_forbidden(resource, false);
    loop {
        let mut stream = std::pin::pin!(
            watcher(api.clone(), config.clone())
                .backoff(WatchBackoff::default())
                .modify(slim)
        );
        // When the last list completed while the watch was refused.
        let mut listed_at: Option<tokio::time::Instant> = None;
        loop {
            let confirm = listed_at.map(|t| t + WATCH_ALLOWED_AFTER);
            let next = tokio::select! {
                next = stream.next() => next,
                () = tokio::time::sleep_until(confirm.unwrap_or_else(tokio::time::Instant::now)),
                    if watch_refused && confirm.is_some() => {
                    watch_refused = false;
                    listed_at = None;
                    info!(resource = %resource, "vapcheck may watch again");
                    metrics.set_watch_forbidden(resource, list_refused);
                    pause = WatchBackoff::default();
                    on(Watched::Allowed { list: false });
                    continue;
                }
            };
            let Some(next) = next else { break };
            match next {
                Ok(event) => {
                    let done = matches!(event, watcher::Event::InitDone);
                    on(Watched::Event(event));
                    if done {
                        if watch_refused {
                            listed_at = Some(tokio::time::Instant::now());
                        } else {
                            pause = WatchBackoff::default();
                        }
                        if list_refused {
                            list_refused = false;
                            info!(resource = %resource, "vapcheck may list again");
                            metrics.set_watch_forbidden(resource, watch_refused);
                            on(Watched::Allowed { list: true });
                        }
                    }
                }
                Err(e) if refused(&e) => {
                    let list = matches!(e, watcher::Error::InitialListFailed(_));
                    let flag = if list {
                        &mut list_refused
                    } else {
                        &mut watch_refused
                    };
                    if std::mem::replace(flag, true) {
                        debug!(resource = %resource, error = %e, "still refused");
                    } else {
                        warn!(
                            resource = %resource,
                            error = %e,
                            "the API server refuses vapcheck's {} (403); retrying",
                            if list { "list" } else { "watch" }
                        );
                        metrics.set_watch_forbidden(resource, true);
                        on(Watched::Refused { list });
                    }
                    break;
                }
                Err(e) if cache_initializing(&e) => {
                    info!(resource = %resource, error = %e, "the API server's cache of the resource is still filling; retrying")
                }
                Err(e) => {
                    warn!(resource = %resource, error = %e, "the list/watch failed; retrying")
                }
            }
        }
        tokio::time::sleep(pause.next().unwrap_or(WATCH_BACKOFF_MAX)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn backoff_grows_to_the_cap_and_resets() {
        let mut b = WatchBackoff::default();
        let pauses: Vec<Duration> = (&mut b).take(20).collect();
        assert!(pauses[0] <= WATCH_BACKOFF_MIN && pauses[0] >= WATCH_BACKOFF_MIN.mul_f64(0.75));
        assert!(pauses.iter().all(|p| *p <= WATCH_BACKOFF_MAX), "{pauses:?}");
        assert!(
            pauses[10..]
                .iter()
                .all(|p| *p >= WATCH_BACKOFF_MAX.mul_f64(0.75)),
            "{pauses:?}"
        );
        // Five restarts in a row never add up to a long sleep: the sum of the first 20
        // pauses is bounded by 20 × the cap.
        assert!(pauses.iter().sum::<Duration>() <= WATCH_BACKOFF_MAX * 20);
        b.reset();
        assert!(b.next().is_some_and(|p| p <= WATCH_BACKOFF_MIN));
    }

    #[test]
    fn expired_means_410() {
        let status = |code: u16| kube::core::Status {
            code,
            ..kube::core::Status::default()
        };
        assert!(is_expired(&watcher::Error::WatchError(Box::new(status(
            410
        )))));
        assert!(!is_expired(&watcher::Error::WatchError(Box::new(status(
            500
        )))));
        assert!(is_expired(&watcher::Error::WatchStartFailed(
            kube::Error::Api(Box::new(status(410)))
        )));
        assert!(!is_expired(&watcher::Error::NoResourceVersion));
    }

    #[test]
    fn a_filling_watch_cache_is_told_apart() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.to_owned(),
                ..kube::core::Status::default()
            }))
        };
        // The API server's text, as a test of this run logged it right after a CRD.
        let filling = status(429, "storage is (re)initializing");
        assert!(cache_initializing(&watcher::Error::InitialListFailed(
            filling
        )));
        assert!(cache_initializing(&watcher::Error::WatchStartFailed(
            status(429, "storage is (re)initializing: etcd is down")
        )));
        assert!(!cache_initializing(&watcher::Error::InitialListFailed(
            status(429, "too many requests, please try again later")
        )));
        assert!(!cache_initializing(&watcher::Error::InitialListFailed(
            status(500, "storage is (re)initializing")
        )));
    }

    /// A fake API server for ConfigMaps: a list answers 200 (no items) or 403, a watch 403
    /// or never answers (an allowed watch with nothing to say).
    fn fake_api(list_allowed: Arc<AtomicBool>, watch_allowed: Arc<AtomicBool>) -> kube::Client {
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let watch = req.uri().query().is_some_and(|q| q.contains("watch=true"));
            let allowed = if watch { &watch_allowed } else { &list_allowed }.load(Ordering::SeqCst);
            async move {
                if allowed && watch {
                    std::future::pending::<()>().await;
                }
                let (code, body) = if allowed {
                    (
                        200,
                        r#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]}"#,
                    )
                } else {
                    (
                        403,
                        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"u\" cannot list resource \"configmaps\"","reason":"Forbidden","code":403}"#,
                    )
                };
                http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.as_bytes().to_vec()))
                    .map_err(|e| std::io::Error::other(e.to_string()))
            }
        });
        kube::Client::new(service, "default")
    }

    fn what(w: &Watched<ConfigMap>) -> &'static str {
        match w {
            Watched::Event(watcher::Event::Init) => "init",
            Watched::Event(watcher::Event::InitDone) => "init-done",
            Watched::Event(_) => "object",
            Watched::Refused { list: true } => "list refused",
            Watched::Refused { list: false } => "watch refused",
            Watched::Allowed { list: true } => "list allowed",
            Watched::Allowed { list: false } => "watch allowed",
        }
    }

    fn forbidden_gauge(metrics: &crate::metrics::Metrics) -> Option<String> {
        metrics
            .encode_prometheus_text()
            .lines()
            .find_map(|l| l.strip_prefix("vapcheck_watch_forbidden{resource=\"configmaps\"} "))
            .map(str::to_owned)
    }

    async fn next(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<&'static str>,
    ) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test]
    async fn a_refusal_is_reported_once_and_its_end_too() {
        let list = Arc::new(AtomicBool::new(false));
        let watch = Arc::new(AtomicBool::new(false));
        let metrics = crate::metrics::Metrics::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn({
            let api: kube::Api<ConfigMap> =
                kube::Api::all(fake_api(Arc::clone(&list), Arc::clone(&watch)));
            let metrics = metrics.clone();
            async move {
                watch_with_refusals(
                    api,
                    "configmaps",
                    &metrics,
                    |_| {},
                    |w| {
                        let _ = tx.send(what(&w));
                    },
                )
                .await;
            }
        });
        // Refused from the start: said once, however often the list is retried (about 4
        // times in 3 s: 250 ms doubling; each attempt starts with the watcher's Init).
        assert_eq!(next(&mut rx).await, Some("init"));
        assert_eq!(next(&mut rx).await, Some("list refused"));
        assert_eq!(forbidden_gauge(&metrics).as_deref(), Some("1"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut retries = 0;
        while let Ok(w) = rx.try_recv() {
            assert_eq!(w, "init", "the refusal was reported again");
            retries += 1;
        }
        assert!((2..=6).contains(&retries), "{retries} retries in 3 s");
        // The list allowed, the watch still refused: the list's events, then the list's end
        // of refusal, then the watch's refusal; the gauge stays 1.
        list.store(true, Ordering::SeqCst);
        let mut seen = Vec::new();
        while seen.last() != Some(&"watch refused") {
            let w = next(&mut rx).await;
            seen.push(w.unwrap_or_else(|| panic!("nothing reported within 60 s after {seen:?}")));
        }
        assert_eq!(
            seen[seen.len() - 4..],
            ["init", "init-done", "list allowed", "watch refused"]
        );
        assert!(
            seen[..seen.len() - 4].iter().all(|w| *w == "init"),
            "{seen:?}"
        );
        assert_eq!(forbidden_gauge(&metrics).as_deref(), Some("1"));
        // The watch allowed: re-listed (every 2 s at most meanwhile), and once a watch has run
        // WATCH_ALLOWED_AFTER without a refusal, allowed; the gauge is 0.
        watch.store(true, Ordering::SeqCst);
        let mut seen = Vec::new();
        while seen.last() != Some(&"watch allowed") {
            let w = next(&mut rx).await;
            seen.push(w.unwrap_or_else(|| panic!("nothing reported within 60 s after {seen:?}")));
        }
        assert_eq!(
            seen[seen.len() - 3..],
            ["init", "init-done", "watch allowed"]
        );
        assert!(
            seen[..seen.len() - 3]
                .chunks(2)
                .all(|c| c == ["init", "init-done"]),
            "{seen:?}"
        );
        assert_eq!(forbidden_gauge(&metrics).as_deref(), Some("0"));
        task.abort();
    }
}
