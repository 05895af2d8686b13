//! The controller's runtime: the kube-runtime controller over ValidatingAdmissionPolicies,
//! the schema poll that re-enqueues what a changed group-version can affect, leader election,
//! the signal handling and [`main`], which starts it all.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::runtime::controller;
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::health::{ElectionState, Health, HttpServers, Readiness, Shutdown};
use crate::metrics::{Metrics, WatchRestartReason};

use super::index::TriggerIndex;
use super::inputs::LiveInputs;
use super::status::FIELD_MANAGER;
use super::stored::StoredPolicy;

use super::reconcile::{error_policy, reconcile};
use super::{Context, lock};
use super::{bindings, engines, event_queue, inputs, lease, mutating, reports, watch, webhooks};

/// Runs one controller instance until `stop` completes (then finishes in-flight reconciles).
pub(super) async fn run_controller(
    ctx: Arc<Context>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    // Decoded straight into the packed form the store keeps (stored.rs).
    let api: Api<StoredPolicy> = Api::all(ctx.client.clone());
    let rx = ctx.triggers.subscribe();
    let triggers = watch::trigger_stream(rx, "re-check triggers lagged");
    // The policy watch, with a bounded backoff (kube's default grows to 30 s and, in the
    // controller, also pauses the re-check triggers), counted in the watch metrics.
    let status = ctx.metrics.watch_status().clone();
    status.start();
    let metrics = ctx.metrics.clone();
    let (reader, writer) = reflector::store();
    // One list request, not pages of 500 (kube's default): with paginated relists after a
    // kube-apiserver restart (1.37.1, which serves continuations from watch-cache snapshots),
    // changes made during the relist were lost for good once there were more than 500
    // policies (e2e_faults at 300 initial policies failed 3 runs out of 3 at the fourth
    // restart; unpaginated it passed). The cost is one large response per relist.
    let watch_config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    };
    let policies = watcher(api, watch_config)
        .backoff(watch::WatchBackoff::default())
        .map(move |event| {
            match &event {
                Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                    metrics.watch_status().succeeded();
                }
                Ok(_) => {}
                Err(e) => {
                    let reason = if watch::is_expired(e) {
                        WatchRestartReason::Expired
                    } else {
                        WatchRestartReason::Error
                    };
                    warn!(error = %e, reason = reason.as_str(), "the policy list/watch failed; retrying");
                    metrics.watch_failed(reason, &e.to_string());
                }
            }
            event
        })
        // Only what the controller reads goes into the store: StoredPolicy slims and packs
        // each object as it is decoded (stored.rs, slim.rs).
        .reflect(writer)
        .applied_objects()
        // Errors are handled above; passed on they would make the controller back off once more.
        .filter_map(|object| futures::future::ready(object.ok().map(Ok)));
    // When the watch works again, retry at once every policy whose reconcile failed meanwhile
    // (their own backoff may have grown to minutes during the outage).
    let _retry_failed = AbortOnDrop(tokio::spawn(retry_failed_on_recovery(Arc::clone(&ctx))));
    let controller = Controller::for_stream(policies, reader)
        .with_config(controller::Config::default().concurrency(ctx.config.concurrency))
        .reconcile_on(triggers)
        .graceful_shutdown_on(stop);
    *lock(&ctx.store) = Some(controller.store());
    let _bindings = AbortOnDrop(tokio::spawn(bindings::watch_bindings(Arc::clone(&ctx))));
    let _orphans = AbortOnDrop(tokio::spawn(bindings::watch_orphans(Arc::clone(&ctx))));
    let _mutating = AbortOnDrop(tokio::spawn(mutating::run(Arc::clone(&ctx))));
    let _webhooks = AbortOnDrop(tokio::spawn(webhooks::run(Arc::clone(&ctx))));
    let _engines = AbortOnDrop(tokio::spawn(engines::run(Arc::clone(&ctx))));
    ctx.metrics
        .set_max_concurrent_reconciles(ctx.config.concurrency);
    controller
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            if let Err(e) = result {
                match e {
                    controller::Error::ReconcilerFailed(..) => {}
                    // A requeue (re-check period, retry, trigger) for a policy deleted since:
                    // nothing to do, and not a fault.
                    controller::Error::ObjectNotFound(object) => {
                        debug!(policy = %object.name, "not reconciled: the policy was deleted");
                    }
                    other => warn!(error = %other, "controller"),
                }
            }
        })
        .await;
    *lock(&ctx.store) = None;
    ctx.bindings.clear();
    ctx.engines.clear();
    status.stop();
}

/// Aborts the task when dropped (also when the owning task is aborted).
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Re-enqueues, with a fresh backoff, the policies whose last reconcile failed, each time the
/// policy watch recovers.
pub(super) async fn retry_failed_on_recovery(ctx: Arc<Context>) {
    loop {
        ctx.metrics.watch_status().recovered().await;
        let failed: Vec<String> = lock(&ctx.failures).drain().map(|(name, _)| name).collect();
        if failed.is_empty() {
            continue;
        }
        info!(
            policies = failed.len(),
            "the policy watch works again; retrying failed policies now"
        );
        for name in failed {
            ctx.trigger(name);
        }
    }
}

/// Polls the schemas every `schemaPollInterval` and re-enqueues the affected policies.
pub(super) async fn poll_schemas(ctx: Arc<Context>, shutdown: Shutdown) {
    let period = ctx.config.schema_poll_interval.get();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = ticker.tick() => {}
        }
        ctx.forget_deleted();
        ctx.mutating.forget_deleted(&ctx.metrics);
        let refreshed = ctx.inputs.refresh().await;
        // After the refresh: the report API is detected in the discovery just read.
        reports::sweep(&ctx).await;
        ctx.metrics.schema_fetch(inputs::fetch_result(&refreshed));
        ctx.metrics.set_schema_cache_kinds(ctx.inputs.kind_count());
        match refreshed {
            Ok(changes) if changes.is_empty() => {}
            // Only documents that keep failing: counted in `vapcheck_schema_fetches_total`,
            // and the affected policies already say so in their status.
            Ok(changes) if changes.affected().next().is_none() => {
                debug!(failed = ?changes.failed, "schema documents still failing");
            }
            Ok(changes) => {
                ctx.webhooks.schemas_changed();
                ctx.engines.schemas_changed();
                // Validating and mutating policies: the same index rules, each kind its own
                // names and queue.
                let validating = enqueue_affected(&ctx.index, &changes, |name| ctx.trigger(name));
                let mutating = enqueue_affected(&ctx.mutating.index, &changes, |name| {
                    ctx.metrics.workqueue_add();
                    // No receiver (standby) is fine: the new leader checks everything.
                    let _ = ctx.mutating.triggers.send(name);
                });
                info!(
                    added = changes.added.len(),
                    changed = changes.changed.len(),
                    removed = changes.removed.len(),
                    policies = validating,
                    mutating_policies = mutating,
                    "schemas changed; re-checking affected policies"
                );
            }
            Err(e) => warn!(error = %e, "schema poll failed; keeping the previous schemas"),
        }
    }
}

/// Re-enqueues with `trigger` the policies of `index` that `changes` can affect; returns how
/// many.
pub(super) fn enqueue_affected(
    index: &Mutex<TriggerIndex>,
    changes: &crate::schema::Changes,
    trigger: impl Fn(String),
) -> usize {
    let affected = lock(index).affected(changes.affected());
    let n = affected.len();
    for name in affected {
        trigger(name);
    }
    n
}

/// This replica's leader election identity: `POD_NAME`, else host name and process id.
pub fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
    {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "vapcheck".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Runs the controller (and, with leader election, the lease) until `shutdown` is triggered.
pub async fn run(
    ctx: Arc<Context>,
    readiness: Readiness,
    lease_namespace: String,
    identity: String,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let poller = tokio::spawn(poll_schemas(Arc::clone(&ctx), shutdown.clone()));
    let publisher = lock(&ctx.queued_events).take().map(|queued| {
        tokio::spawn(event_queue::publish_with_recorder(
            queued,
            ctx.fence.clone(),
            ctx.recorder.clone(),
            ctx.client.clone(),
            ctx.identity.clone(),
        ))
    });
    let election = ctx.config.leader_election.clone();
    let result = if !election.enabled {
        ctx.fence.allow_always();
        readiness.set_election(ElectionState::Leading);
        ctx.metrics.set_leader(&election.lease_name, true);
        run_controller(Arc::clone(&ctx), shutdown_future(&shutdown)).await;
        Ok(())
    } else {
        lead(&ctx, &readiness, &lease_namespace, &identity, &shutdown).await
    };
    poller.abort();
    if let Some(publisher) = publisher {
        publisher.abort();
    }
    result
}

/// A `Send + Sync` future that completes on shutdown (what `graceful_shutdown_on` takes).
pub(super) fn shutdown_future(
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + Send + Sync + 'static {
    let shutdown = shutdown.clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown.wait().await;
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

pub(super) async fn lead(
    ctx: &Arc<Context>,
    readiness: &Readiness,
    namespace: &str,
    identity: &str,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let election = &ctx.config.leader_election;
    let lease_name = election.lease_name.clone();
    let timing = lease::Timing {
        lease_duration: election.lease_duration.get(),
        renew_deadline: election.renew_deadline.get(),
    };
    let elector = lease::Elector::new(
        Api::namespaced(ctx.client.clone(), namespace),
        &lease_name,
        identity,
        FIELD_MANAGER,
        timing,
        ctx.fence.clone(),
    );
    let (leading_tx, mut leading_rx) = tokio::sync::watch::channel(false);
    let mut lease_task = tokio::spawn(elector.run(leading_tx));
    readiness.set_election(ElectionState::Standby);
    ctx.metrics.set_leader(&lease_name, false);
    info!(lease = %format!("{namespace}/{lease_name}"), identity, "waiting for the lease");
    let mut running: Option<(tokio::task::JoinHandle<()>, Shutdown)> = None;
    loop {
        let leading = *leading_rx.borrow_and_update();
        match (leading, running.is_some()) {
            (true, false) => {
                info!(identity, "acquired the lease; starting the controller");
                readiness.set_election(ElectionState::Leading);
                ctx.metrics.set_leader(&lease_name, true);
                let stop = Shutdown::default();
                let task = tokio::spawn(run_controller(Arc::clone(ctx), shutdown_future(&stop)));
                running = Some((task, stop));
            }
            (false, true) => {
                // The fence already stops writes; stop the controller too (its next leader
                // term starts with a fresh list).
                warn!(identity, "lost the lease; stopping all writes");
                ctx.fence.revoke();
                readiness.set_election(ElectionState::Standby);
                ctx.metrics.set_leader(&lease_name, false);
                if let Some((task, _)) = running.take() {
                    task.abort();
                    let _ = task.await;
                }
                *lock(&ctx.store) = None;
                ctx.metrics.watch_status().stop();
            }
            _ => {}
        }
        tokio::select! {
            _ = shutdown.wait() => break,
            changed = leading_rx.changed() => {
                if changed.is_err() {
                    error!("the leader election task stopped");
                    readiness.set_election(ElectionState::Failed);
                    break;
                }
            }
        }
    }
    // Graceful: let in-flight reconciles finish, then release the lease.
    if let Some((task, stop)) = running.take() {
        stop.trigger();
        if tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .is_err()
        {
            warn!("in-flight reconciles did not finish within 20s");
        }
    }
    ctx.fence.revoke();
    ctx.metrics.set_leader(&lease_name, false);
    // Dropping the receiver makes the elector release the lease and return.
    drop(leading_rx);
    if tokio::time::timeout(Duration::from_secs(10), &mut lease_task)
        .await
        .is_err()
    {
        warn!("releasing the lease timed out");
        lease_task.abort();
    }
    Ok(())
}

/// The whole `vapcheck controller` process: client, start-up checks, metrics and health
/// servers, signal handling, schema polling, leader election and the controller. Returns when
/// SIGTERM or SIGINT was handled (Ok) or start-up failed (Err, with a message for humans).
pub async fn main(config: Config) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let health = Health::default();
    let readiness = health.readiness();
    let shutdown = Shutdown::default();

    let mut kube_config = kube::Config::infer().await.map_err(|e| {
        anyhow::anyhow!(
            "no Kubernetes cluster to talk to: neither an in-cluster service account nor a usable KUBECONFIG ({e})"
        )
    })?;
    // No silent retries in the client: kube-client 5's default retries 429, 503 and 504 up to
    // 15 times, each pause the larger of Retry-After and a doubling backoff capped at 1,000 s
    // (kube-client `client/retry.rs`, `RetryPolicy::server_retry`), with nothing logged or
    // counted meanwhile. kube-apiserver answers 429 while a watch cache is re-initialising
    // (k8s.io/apiserver `storage/cacher/cacher.go`, `Cacher.GetList`: "storage is
    // (re)initializing"), so after an etcd restart a list could stall silently for longer than
    // the recovery bound. Failures surface instead, where vapcheck's own bounded backoffs handle
    // them and the metrics count them: the watches' (`watch.rs`, at most 2 s), the reconciles'
    // (`error_policy`, with a retry at once when the policy watch recovers), the lease's.
    kube_config.default_retry = false;
    let url = kube_config.cluster_url.clone();
    let kubeconfig_namespace = kube_config.default_namespace.clone();
    let host = url.host().unwrap_or_default().to_owned();
    let client = kube::client::ClientBuilder::try_from(kube_config)
        .map_err(|e| anyhow::anyhow!("cannot build a client for {url}: {e}"))?
        .with_layer(&metrics.rest_client_layer(host))
        .build();
    let server = client
        .apiserver_version()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the Kubernetes API server at {url}: {e}"))?;
    info!(server = %url, version = %server.git_version, "connected");

    let lease_namespace = crate::config::resolve_lease_namespace(
        &config.leader_election.lease_namespace,
        Some(&kubeconfig_namespace),
    );
    let needs_lease = config
        .leader_election
        .enabled
        .then_some(lease_namespace.as_str());
    let missing = crate::health::preflight::check_permissions(
        &client,
        needs_lease,
        config.metrics.secure.enabled && config.metrics.secure.authorize,
    )
    .await
    .map_err(|e| anyhow::anyhow!("cannot check this identity's permissions: {e}"))?;
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
        anyhow::bail!("{}", list.join("; "));
    }

    readiness.attach_watch(metrics.watch_status().clone());
    let servers = HttpServers::bind(
        &config,
        metrics.clone(),
        health.clone(),
        Some(client.clone()),
    )
    .await?;
    info!(
        metrics = %servers.metrics_addr().map(|a| a.to_string()).unwrap_or_default(),
        health = %servers.health_addr().map(|a| a.to_string()).unwrap_or_default(),
        "serving metrics and health probes"
    );
    let http = tokio::spawn(servers.run(shutdown.clone()));
    let heartbeat = health.spawn_heartbeat(Duration::from_secs(5));

    // Signals: the first SIGTERM/SIGINT starts the graceful shutdown.
    {
        let shutdown = shutdown.clone();
        let readiness = readiness.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            info!("shutting down");
            readiness.set_shutting_down();
            shutdown.trigger();
        });
    }

    let inputs = Arc::new(
        LiveInputs::new(client.clone(), &config, &server).map_err(|e| anyhow::anyhow!(e))?,
    );
    // The first read of discovery and schemas; retried until it works or we are stopped.
    let mut delay = Duration::from_millis(500);
    loop {
        // Counted like the later polls, so the first fetch (and its failures) show.
        let refreshed = inputs.refresh().await;
        metrics.schema_fetch(inputs::fetch_result(&refreshed));
        match refreshed {
            Ok(_) => break,
            Err(e) => {
                warn!(error = %e, "reading discovery and schemas failed; retrying");
                tokio::select! {
                    _ = shutdown.wait() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
    metrics.set_schema_cache_kinds(inputs.kind_count());
    readiness.set_caches_synced(true);

    let identity = identity();
    let ctx = Context::new(client, config, inputs, metrics, identity.clone());
    let result = run(ctx, readiness, lease_namespace, identity, shutdown.clone()).await;
    shutdown.trigger();
    heartbeat.abort();
    let _ = http.await;
    result
}

pub(super) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
