//! Fault tests of `vapcheck controller` on a real control plane: kube-apiserver (or etcd)
//! killed with SIGKILL and restarted (same port, same data) several times while policies are
//! created, changed and deleted right before each kill and right after each restart. After
//! every restart, every change must be reflected within [`BOUND`] of the API server being ready
//! again (its `/readyz` passing), and at the end every status must equal what a fresh
//! `vapcheck check` of the same policy computes.
//!
//! Two replicas run (leader election with a 4 s lease), so each 8 s outage also makes the
//! leader's write fence run out; whichever replica wins the lease after the restart must
//! catch up. A restarted API server starts a new watch cache, so resuming the old watch fails
//! with 410 Gone: the test asserts that the relist path ran (`vapcheck_watch_restarts_total
//! {reason="expired"}`).
//!
//! In a fourth scenario the API server stays up and the leading vapcheck process is killed
//! with SIGKILL instead, each round: the standby must take the lease once it has expired
//! (4 s), list and check everything, and reflect every change within [`BOUND`] of the lease's
//! expiry; a new standby replaces the dead leader.
//!
//! A schema download failing transiently is the last test: vapcheck talks to the API server
//! through `kubectl proxy`, started first with `--reject-paths` for one `/openapi/v3` document
//! and later for the whole index, then restarted without; statuses must show the failure
//! (`SchemaUnavailable`), keep the previous schemas while the index fails, and catch up within
//! [`BOUND`] of the proxy serving everything again.
//!
//! Size: `VAPCHECK_FAULT_RESTARTS` (default 3), `VAPCHECK_FAULT_POLICIES` (initial policies,
//! default 12), `VAPCHECK_FAULT_CHURN` (policies created and flipped before each kill and
//! again after each restart; default a sixth of the initial policies, at least 2: at 5,000
//! policies set it, since the test writes them one by one and the bound runs meanwhile),
//! `VAPCHECK_FAULT_DOWN_SECONDS` (default 8). `VAPCHECK_FAULT_BIN` runs another
//! vapcheck binary (to measure an older build; the bound is then reported, not asserted, if
//! `VAPCHECK_FAULT_MEASURE_ONLY=1`).

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyStatus,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use support::{Cluster, UpOptions, wait_for};

/// Every change must show within this long after the API server is ready again.
const BOUND: Duration = Duration::from_secs(10);
const LABEL: &str = "faults.e2e.vapcheck.dev/test";
const CLEAN: &str = "object.spec.replicas > 1";
const TYPO: &str = "object.replicas > 1";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A `vapcheck controller` child process; SIGTERM (then SIGKILL) on drop.
struct Replica {
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(kubeconfig: &Path, label: &str, extra: &[&str]) -> anyhow::Result<Replica> {
        // The tests of this file run in parallel in one process, and two scenarios use the
        // same labels: a counter keeps each replica's log apart.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "vapcheck-e2e-faults-{label}-{}-{n}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
        let bin = std::env::var_os("VAPCHECK_FAULT_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_vapcheck")));
        let child = Command::new(&bin)
            .args([
                "controller",
                "--schema-poll-interval",
                "1s",
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-bind-address",
                "127.0.0.1:0",
                "--lease-name",
                "vapcheck-faults",
                "--lease-duration",
                "4s",
                "--renew-deadline",
                "2s",
            ])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        eprintln!(
            "e2e: vapcheck {label} (pid {}) logs to {}",
            child.id(),
            log.display()
        );
        Ok(Replica { child, log })
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (std's `Child::kill`), reaped at once; returns the log. Drop does not signal
    /// the process again (its pid may be reused once reaped).
    fn kill_now(mut self) -> anyhow::Result<PathBuf> {
        self.child.kill().context("SIGKILL to the leader")?;
        self.child.wait().context("reaping the leader")?;
        let log = self.log.clone();
        std::mem::forget(self);
        Ok(log)
    }

    /// `metrics=` or `health=` address from the start-up log line.
    fn address(&self, key: &str) -> Option<String> {
        self.log_text()
            .lines()
            .find(|l| l.contains("serving metrics and health probes"))
            .and_then(|l| l.split(&format!("{key}=")).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text)
}

/// The value of the first sample line starting with `series` in a metrics text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn policy(name: &str, expression: &str) -> anyhow::Result<ValidatingAdmissionPolicy> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]
            }]},
            "validations": [{"expression": expression, "message": "must be replicated"}]
        }
    }))?)
}

/// The policies the test expects to exist: name → whether its expression has the typo.
type Expected = BTreeMap<String, bool>;

struct Churn {
    api: Api<ValidatingAdmissionPolicy>,
    expected: Expected,
    next: usize,
}

impl Churn {
    async fn put(&mut self, name: &str, typo: bool) -> anyhow::Result<()> {
        let object = policy(name, if typo { TYPO } else { CLEAN })?;
        self.api
            .patch(
                name,
                &PatchParams::apply(support::FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .with_context(|| format!("applying {name}"))?;
        self.expected.insert(name.to_owned(), typo);
        Ok(())
    }

    async fn create(&mut self, n: usize) -> anyhow::Result<()> {
        for _ in 0..n {
            let name = format!("p{:04}.faults.e2e.vapcheck.dev", self.next);
            let typo = self.next.is_multiple_of(2);
            self.next += 1;
            self.put(&name, typo).await?;
        }
        Ok(())
    }

    /// Flips the expression of `n` policies (warnings appear or clear; generation changes).
    async fn flip(&mut self, n: usize, round: usize) -> anyhow::Result<()> {
        let names: Vec<(String, bool)> = self
            .expected
            .iter()
            .skip(round % 3)
            .step_by(3)
            .take(n)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (name, typo) in names {
            self.put(&name, !typo).await?;
        }
        Ok(())
    }

    async fn delete(&mut self, n: usize) -> anyhow::Result<()> {
        let names: Vec<String> = self.expected.keys().take(n).cloned().collect();
        for name in names {
            self.api
                .delete(&name, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting {name}"))?;
            self.expected.remove(&name);
        }
        Ok(())
    }

    /// One round of changes: `n` creations, `n` flips, one deletion.
    async fn round(&mut self, n: usize, round: usize) -> anyhow::Result<()> {
        self.create(n).await?;
        self.flip(n, round).await?;
        self.delete(1).await
    }
}

fn condition<'a>(
    status: &'a ValidatingAdmissionPolicyStatus,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether a stored policy shows vapcheck's result for its current generation and spec.
fn converged(p: &ValidatingAdmissionPolicy, typo: bool) -> bool {
    let generation = p.metadata.generation;
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    let warnings = s
        .type_checking
        .as_ref()
        .and_then(|t| t.expression_warnings.as_ref())
        .map_or(0, Vec::len);
    s.observed_generation == generation
        && condition(s, "TypeChecked").is_some_and(|c| c.observed_generation == generation)
        && condition(s, "ExpressionsValid").is_some_and(|c| {
            c.observed_generation == generation && c.status == if typo { "False" } else { "True" }
        })
        && (warnings > 0) == typo
}

/// Lists the test's policies; the names of those not (yet) as expected, and the ones that
/// should not exist.
async fn pending(
    api: &Api<ValidatingAdmissionPolicy>,
    expected: &Expected,
) -> anyhow::Result<Vec<String>> {
    let listed = api.list(&ListParams::default().labels(LABEL)).await?;
    let mut seen = BTreeMap::new();
    for p in &listed.items {
        seen.insert(p.metadata.name.clone().unwrap_or_default(), p);
    }
    let mut out = Vec::new();
    for (name, typo) in expected {
        if !seen.get(name).is_some_and(|p| converged(p, *typo)) {
            out.push(name.clone());
        }
    }
    for name in seen.keys() {
        if !expected.contains_key(name) {
            out.push(format!("{name} (deleted, still listed)"));
        }
    }
    Ok(out)
}

/// After an etcd restart, kube-apiserver's watch cache of ValidatingAdmissionPolicies lists
/// again only when its reflector's backoff (client-go `tools/cache/reflector.go`: 800 ms
/// doubling to 30 s, jittered) runs out, which can be seconds after `/readyz` passes; until
/// then no watch, vapcheck's or kube-controller-manager's, delivers a change. Writes a probe
/// policy (not one of the test's) and returns the Unix time in milliseconds at which a list
/// served from the watch cache (`resourceVersion=0`) shows the write.
async fn watch_cache_caught_up(
    api: &Api<ValidatingAdmissionPolicy>,
    round: usize,
) -> anyhow::Result<u128> {
    let name = "probe.faults.e2e.vapcheck.dev";
    let mut probe = policy(name, CLEAN)?;
    probe.metadata.labels = None;
    probe.metadata.annotations = Some(
        [(
            "faults.e2e.vapcheck.dev/round".to_owned(),
            round.to_string(),
        )]
        .into(),
    );
    api.patch(
        name,
        &PatchParams::apply(support::FIELD_MANAGER).force(),
        &Patch::Apply(&probe),
    )
    .await
    .context("writing the watch-cache probe")?;
    let listed = ListParams::default()
        .match_any()
        .fields(&format!("metadata.name={name}"));
    wait_for(
        "the watch cache to show the probe",
        Duration::from_secs(60),
        || {
            let listed = listed.clone();
            async move {
                let seen = api.list(&listed).await?.items.iter().any(|p| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("faults.e2e.vapcheck.dev/round"))
                        .is_some_and(|r| *r == round.to_string())
                });
                Ok(seen.then(support::unix_ms))
            }
        },
    )
    .await
}

/// What the replicas report, for the error message of a failed wait: `/readyz` and the
/// controller, work-queue, API client and watch series of `/metrics`.
fn diagnostics(replicas: &[Replica]) -> String {
    let mut out = String::new();
    for r in replicas {
        out.push_str(&format!("--- {} ---\n", r.log.display()));
        if let Some(h) = r.address("health") {
            out.push_str(&http_get(&h, "/readyz").unwrap_or_else(|e| e.to_string()));
            out.push('\n');
        }
        // Unread bytes on the replica's connections (Recv-Q) tell a stalled reader from a
        // server that sends nothing.
        if let Ok(ss) = Command::new("ss").args(["-tnp"]).output() {
            let pid = format!("pid={},", r.child.id());
            for line in String::from_utf8_lossy(&ss.stdout)
                .lines()
                .filter(|l| l.contains(&pid))
            {
                out.push_str(line);
                out.push('\n');
            }
        }
        if let Some(m) = r.address("metrics") {
            let text = http_get(&m, "/metrics").unwrap_or_else(|e| e.to_string());
            for line in text.lines().filter(|l| {
                !l.starts_with('#')
                    && (l.starts_with("controller_runtime_active_workers")
                        || l.starts_with("controller_runtime_reconcile_total")
                        || l.starts_with("workqueue_") && !l.contains("_bucket")
                        || l.starts_with("rest_client_requests_total")
                        || l.starts_with("vapcheck_watch")
                        || l.starts_with("vapcheck_status_writes_total")
                        || l.starts_with("leader_election"))
            }) {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

async fn wait_converged(
    api: &Api<ValidatingAdmissionPolicy>,
    expected: &Expected,
    what: &str,
    limit: Duration,
    replicas: &[Replica],
) -> anyhow::Result<()> {
    let waited = wait_for(what, limit, || async {
        let left = pending(api, expected).await?;
        Ok(left.is_empty().then_some(()))
    })
    .await;
    if let Err(e) = waited {
        let left = pending(api, expected).await.unwrap_or_default();
        if let Some(secs) = std::env::var("VAPCHECK_FAULT_PAUSE_ON_FAILURE")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            eprintln!("e2e: not converged; pausing {secs}s for inspection");
            tokio::time::sleep(Duration::from_secs(secs)).await;
        }
        return Err(e.context(format!(
            "not converged: {left:?}\n{}",
            diagnostics(replicas)
        )));
    }
    Ok(())
}

/// How the replicas of a scenario run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// One replica without leader election: its watch lives through every outage and resumes
    /// with a resource version the restarted API server no longer has (410 Gone, relist).
    OneReplicaWatchResumes,
    /// Two replicas with a 4 s lease: each 8 s outage runs the leader's write fence out; a
    /// replica takes the lease again after the restart and starts with a fresh list.
    TwoReplicasLeaseLost,
    /// One replica with leader election: etcd is killed instead, kube-apiserver stays up but
    /// can neither read nor write; the lease cannot be renewed, so the write fence runs out,
    /// and the replica must lead again and catch up once etcd is back.
    EtcdRestarts,
    /// Two replicas with a 4 s lease; each round kills the leader process with SIGKILL (the
    /// API server stays up), so the standby must take the lease once it expires, list and
    /// check everything, and catch up. A new standby replaces the dead leader every round.
    LeaderKilled,
}

impl Scenario {
    /// The component each round kills.
    fn component(self) -> &'static str {
        match self {
            Scenario::EtcdRestarts => "etcd",
            Scenario::LeaderKilled => "the leading vapcheck",
            _ => "kube-apiserver",
        }
    }
}

async fn one_replica_watch_expires_410_across_apiserver_restarts_and_converges_within_bound()
-> anyhow::Result<()> {
    run(Scenario::OneReplicaWatchResumes).await
}

async fn two_replicas_lose_and_retake_the_lease_across_apiserver_restarts_and_converge_within_bound()
-> anyhow::Result<()> {
    run(Scenario::TwoReplicasLeaseLost).await
}

async fn one_leader_converges_within_bound_across_etcd_restarts() -> anyhow::Result<()> {
    run(Scenario::EtcdRestarts).await
}

async fn standby_takes_over_from_a_killed_leader_and_converges_within_bound() -> anyhow::Result<()>
{
    run(Scenario::LeaderKilled).await
}

/// The lease duration the replicas run with (`Replica::start`).
const LEASE: Duration = Duration::from_secs(4);

/// When the lease expires unless renewed: `renewTime + leaseDurationSeconds`, in Unix ms.
async fn lease_expiry_ms(client: &Client) -> anyhow::Result<u128> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let spec = leases
        .get("vapcheck-faults")
        .await?
        .spec
        .context("the lease has no spec")?;
    let renewed = spec.renew_time.context("the lease has no renewTime")?.0;
    let duration = spec
        .lease_duration_seconds
        .context("the lease has no leaseDurationSeconds")?;
    let renewed_ms = u128::try_from(renewed.as_millisecond()).context("renewTime before 1970")?;
    Ok(renewed_ms + u128::try_from(duration)? * 1000)
}

/// The index in `replicas` of the lease holder (its identity ends with `-<pid>`).
async fn leader_index(client: &Client, replicas: &[Replica]) -> anyhow::Result<usize> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let pids: Vec<u32> = replicas.iter().map(Replica::pid).collect();
    wait_for(
        "a replica to hold the lease",
        Duration::from_secs(30),
        || async {
            let holder = leases
                .get_opt("vapcheck-faults")
                .await?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .unwrap_or_default();
            Ok(pids
                .iter()
                .position(|pid| holder.ends_with(&format!("-{pid}"))))
        },
    )
    .await
}

async fn run(scenario: Scenario) -> anyhow::Result<()> {
    let restarts = env_number("VAPCHECK_FAULT_RESTARTS", 3) as usize;
    let initial = env_number("VAPCHECK_FAULT_POLICIES", 12) as usize;
    let down = env_number("VAPCHECK_FAULT_DOWN_SECONDS", 8);
    let measure_only = std::env::var("VAPCHECK_FAULT_MEASURE_ONLY").is_ok_and(|v| v == "1");
    let per_round = env_number("VAPCHECK_FAULT_CHURN", (initial as u64 / 6).max(2)) as usize;

    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: false,
            ..UpOptions::default()
        })
    })
    .await??;
    let client: Client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let mut replicas = match scenario {
        Scenario::OneReplicaWatchResumes => vec![Replica::start(
            cluster.kubeconfig(),
            "single",
            &["--leader-election", "false"],
        )?],
        Scenario::EtcdRestarts => vec![Replica::start(cluster.kubeconfig(), "leader", &[])?],
        Scenario::TwoReplicasLeaseLost | Scenario::LeaderKilled => vec![
            Replica::start(cluster.kubeconfig(), "ha-a", &[])?,
            Replica::start(cluster.kubeconfig(), "ha-b", &[])?,
        ],
    };
    // The logs of the leaders killed in `LeaderKilled`.
    let mut dead_logs: Vec<PathBuf> = Vec::new();

    let mut churn = Churn {
        api: api.clone(),
        expected: Expected::new(),
        next: 0,
    };
    churn.create(initial).await?;
    wait_converged(
        &api,
        &churn.expected,
        "the initial policies",
        Duration::from_secs(90),
        &replicas,
    )
    .await?;

    let mut recoveries = Vec::new();
    for round in 0..restarts {
        // Changes just before the kill: in odd rounds the kill follows at once (the leader
        // may not even see them before the outage), in even rounds after 300 ms (it sees them
        // and may be writing when the server dies).
        churn.round(per_round, 2 * round).await?;
        if round % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let ready_ms = if scenario == Scenario::LeaderKilled {
            let leader = replicas.remove(leader_index(&client, &replicas).await?);
            let pid = leader.pid();
            let killed_ms = support::unix_ms();
            dead_logs.push(leader.kill_now()?);
            eprintln!(
                "e2e: {scenario:?}: round {}: killed the leader (pid {pid})",
                round + 1
            );
            replicas.push(Replica::start(
                cluster.kubeconfig(),
                &format!("ha-r{}", round + 1),
                &[],
            )?);
            // The bound runs from when the dead leader's lease expires (no replica may take
            // it over sooner): its last renewal plus the lease duration, at most `LEASE` after
            // the kill.
            killed_ms + LEASE.as_millis()
        } else {
            let kubeconfig = cluster.kubeconfig().to_owned();
            let component = scenario.component();
            tokio::task::spawn_blocking(move || support::restart(&kubeconfig, component, down))
                .await??
        };
        // Changes right after the restart.
        churn.round(per_round, 2 * round + 1).await?;
        // The dead leader's last renewal (read after the changes, so that a renewal it sent
        // right before it died has landed).
        let ready_ms = if scenario == Scenario::LeaderKilled {
            lease_expiry_ms(&client).await?.min(ready_ms)
        } else {
            ready_ms
        };
        // After an etcd outage, /readyz passing does not mean watches deliver again: measure
        // from when kube-apiserver's watch cache has caught up too (`watch_cache_caught_up`).
        let from_ms = if scenario == Scenario::EtcdRestarts {
            let caught_up = watch_cache_caught_up(&api, round).await?;
            eprintln!(
                "e2e: {scenario:?}: restart {}: the watch cache caught up {:.1}s after /readyz",
                round + 1,
                caught_up.saturating_sub(ready_ms) as f64 / 1000.0
            );
            caught_up.max(ready_ms)
        } else {
            ready_ms
        };
        let limit = if measure_only {
            Duration::from_secs(180)
        } else if scenario == Scenario::LeaderKilled {
            LEASE + BOUND + Duration::from_secs(2)
        } else {
            BOUND + Duration::from_secs(2)
        };
        wait_converged(
            &api,
            &churn.expected,
            &format!("convergence after restart {}", round + 1),
            limit,
            &replicas,
        )
        .await?;
        let now = support::unix_ms();
        let took = Duration::from_millis(u64::try_from(now.saturating_sub(from_ms))?);
        eprintln!(
            "e2e: {scenario:?}: restart {}/{restarts}: {} policies converged {:.1}s after {}{}",
            round + 1,
            churn.expected.len(),
            now.saturating_sub(ready_ms) as f64 / 1000.0,
            if scenario == Scenario::LeaderKilled {
                "the killed leader's lease expired"
            } else {
                "kube-apiserver was ready"
            },
            if from_ms > ready_ms {
                format!(
                    ", {:.1}s after its watch cache caught up",
                    took.as_secs_f64()
                )
            } else {
                String::new()
            }
        );
        recoveries.push(took);
    }
    eprintln!("e2e: {scenario:?}: recovery times after each restart: {recoveries:?}");
    if !measure_only {
        for (i, took) in recoveries.iter().enumerate() {
            assert!(
                *took <= BOUND,
                "restart {}: converged {took:?} after the API server was ready (bound {BOUND:?})",
                i + 1
            );
        }
    }

    // Every final status equals a fresh check of the same policy.
    let listed = api.list(&ListParams::default().labels(LABEL)).await?.items;
    assert_eq!(listed.len(), churn.expected.len());
    support::assert_equal_to_fresh_check(cluster.kubeconfig(), &listed)?;

    if measure_only {
        return Ok(());
    }
    // The watch metrics saw the restarts; the leader is ready and its watch healthy.
    let texts: Vec<String> = replicas
        .iter()
        .filter_map(|r| r.address("metrics"))
        .filter_map(|m| http_get(&m, "/metrics").ok())
        .collect();
    assert_eq!(texts.len(), replicas.len(), "metrics of every replica");
    let total = |reason: &str| -> f64 {
        texts
            .iter()
            .filter_map(|t| {
                sample(
                    t,
                    &format!("vapcheck_watch_restarts_total{{reason=\"{reason}\"}}"),
                )
            })
            .sum()
    };
    let (expired, errors) = (total("expired"), total("error"));
    eprintln!("e2e: {scenario:?}: watch restarts: expired {expired}, error {errors}");
    // An etcd outage need not break the watch: kube-apiserver keeps it open and its watch
    // cache resumes from etcd.
    if !matches!(scenario, Scenario::EtcdRestarts | Scenario::LeaderKilled) {
        assert!(
            expired + errors >= restarts as f64,
            "watch restarts {expired} + {errors}"
        );
    }
    if scenario == Scenario::OneReplicaWatchResumes {
        assert!(expired >= 1.0, "no 410 relist was counted");
    }
    let leader = replicas
        .iter()
        .zip(&texts)
        .find(|(_, t)| {
            scenario == Scenario::OneReplicaWatchResumes
                || sample(t, "leader_election_master_status{") == Some(1.0)
        })
        .map(|(r, _)| r)
        .context("no replica reports leading")?;
    let metrics = http_get(
        &leader.address("metrics").context("metrics address")?,
        "/metrics",
    )?;
    let since = sample(&metrics, "vapcheck_watch_seconds_since_last_success ")
        .context("vapcheck_watch_seconds_since_last_success missing")?;
    assert!(since < 60.0, "{since}");
    let ready = http_get(
        &leader.address("health").context("health address")?,
        "/readyz",
    )?;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    assert!(ready.contains("[+]policy-watch ok"), "{ready}");
    if matches!(
        scenario,
        Scenario::TwoReplicasLeaseLost | Scenario::EtcdRestarts
    ) {
        // The fence ran out during the outages and a replica led again afterwards.
        let logs: String = replicas.iter().map(Replica::log_text).collect();
        assert!(logs.contains("this replica may have lost it"), "{logs}");
        assert!(
            logs.matches("acquired the lease").count() > restarts,
            "{logs}"
        );
    }
    if scenario == Scenario::LeaderKilled {
        // The first leader, then one new leader after each kill.
        let mut logs: String = replicas.iter().map(Replica::log_text).collect();
        for log in &dead_logs {
            logs.push_str(&std::fs::read_to_string(log)?);
        }
        assert!(
            logs.matches("acquired the lease").count() > restarts,
            "{logs}"
        );
    }
    for r in &replicas {
        let log = r.log_text();
        assert!(!log.contains("panicked"), "{log}");
        // Policies are deleted while their statuses are written and their re-checks are
        // queued: that is no fault, and is not logged as one (the API server's answer to an
        // apply to a deleted policy's status, and kube-runtime's requeue of a deleted one).
        for fault in ["name must be provided", "not found in local store"] {
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(fault)).collect();
            assert!(lines.is_empty(), "{lines:#?}");
        }
    }
    drop(replicas);
    Ok(())
}

/// The names among `expected` whose stored policy is not (yet) as expected; other policies
/// are not looked at.
async fn pending_among(
    api: &Api<ValidatingAdmissionPolicy>,
    expected: &Expected,
) -> anyhow::Result<Vec<String>> {
    let listed = api.list(&ListParams::default().labels(LABEL)).await?.items;
    Ok(expected
        .iter()
        .filter(|(name, typo)| {
            !listed
                .iter()
                .any(|p| p.metadata.name.as_ref() == Some(*name) && converged(p, **typo))
        })
        .map(|(name, _)| name.clone())
        .collect())
}

/// `kubectl proxy` in front of the test's API server on a fixed loopback port, rejecting the
/// paths matching `reject` (kubectl answers those with 403 Forbidden); killed on drop.
struct Proxy {
    child: Child,
}

impl Proxy {
    /// `$VAPCHECK_KUBECTL` (make test sets it to the kubectl of the pinned release, see
    /// scripts/kubectl-path), else `kubectl` on PATH.
    fn kubectl() -> PathBuf {
        std::env::var_os("VAPCHECK_KUBECTL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("kubectl"))
    }

    /// Starts the proxy on `port` and waits until it accepts connections.
    fn start(kubeconfig: &Path, port: u16, reject: &str) -> anyhow::Result<Proxy> {
        let kubectl = Proxy::kubectl();
        let child = Command::new(&kubectl)
            .arg("proxy")
            .arg(format!("--port={port}"))
            .arg("--address=127.0.0.1")
            .arg(format!("--reject-paths={reject}"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "starting {} proxy (set VAPCHECK_KUBECTL or run scripts/kubectl-path)",
                    kubectl.display()
                )
            })?;
        let mut proxy = Proxy { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(proxy);
            }
            if let Ok(Some(status)) = proxy.child.try_wait() {
                bail!("kubectl proxy on port {port} exited: {status}");
            }
            if Instant::now() > deadline {
                bail!("kubectl proxy did not listen on port {port} within 20 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound and released; the proxy binds it right after).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A policy on `resource` of `group`/`version` with one validation.
fn policy_on(
    name: &str,
    group: &str,
    resource: &str,
    expression: &str,
) -> anyhow::Result<ValidatingAdmissionPolicy> {
    let mut p = policy(name, expression)?;
    let rules = serde_json::json!([{
        "apiGroups": [group], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": [resource]
    }]);
    if let Some(constraints) = p.spec.as_mut().and_then(|s| s.match_constraints.as_mut()) {
        constraints.resource_rules = Some(serde_json::from_value(rules)?);
    }
    Ok(p)
}

const WIDGET_GROUP: &str = "faults.e2e.vapcheck.dev";

/// The widgets CRD; `with_color` adds `spec.color` to its schema.
fn widget_crd(with_color: bool) -> String {
    let color = if with_color {
        "\n                color: {type: string}"
    } else {
        ""
    };
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{WIDGET_GROUP}
spec:
  group: {WIDGET_GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
                size: {{type: integer}}{color}
"#
    )
}

/// The `TypeChecked` condition's reason of a stored policy, if written for its generation.
async fn type_checked_reason(
    api: &Api<ValidatingAdmissionPolicy>,
    name: &str,
) -> anyhow::Result<Option<(String, String)>> {
    let p = api.get(name).await?;
    let generation = p.metadata.generation;
    Ok(p.status
        .as_ref()
        .filter(|s| s.observed_generation == generation)
        .and_then(|s| condition(s, "TypeChecked"))
        .map(|c| (c.reason.clone(), c.message.clone())))
}

/// Waits until every policy of `expected` shows its result; returns how long that took.
async fn converge_timed(
    api: &Api<ValidatingAdmissionPolicy>,
    expected: &Expected,
    what: &str,
    replicas: &[Replica],
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    wait_converged(
        api,
        expected,
        what,
        BOUND + Duration::from_secs(2),
        replicas,
    )
    .await?;
    let took = started.elapsed();
    assert!(took <= BOUND, "{what}: took {took:?} (bound {BOUND:?})");
    Ok(took)
}

async fn schema_downloads_failing_transiently_show_and_recover_within_bound() -> anyhow::Result<()>
{
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: false,
            ..UpOptions::default()
        })
    })
    .await??;
    let client: Client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    support::apply_yaml(&client, &widget_crd(false)).await?;

    // vapcheck's kubeconfig points at the proxy (plain HTTP on loopback; kubectl proxy adds
    // the cluster's credentials).
    let port = free_port()?;
    let dir = tempfile::tempdir()?;
    let proxied = dir.path().join("kubeconfig");
    std::fs::write(
        &proxied,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: proxy}}\ncurrent-context: proxy\nusers:\n- name: proxy\n  user: {{}}\n"
        ),
    )?;

    // Phase 1: the apps/v1 document fails (403 from the proxy) from the start.
    let apps_document = "^/openapi/v3/apis/apps/v1$";
    let mut proxy = Proxy::start(cluster.kubeconfig(), port, apps_document)?;
    let replicas = vec![Replica::start(
        &proxied,
        "schema-fault",
        &["--leader-election", "false"],
    )?];
    let mut churn = Churn {
        api: api.clone(),
        expected: Expected::new(),
        next: 0,
    };
    let deployments = "deployments.faults.e2e.vapcheck.dev";
    let widgets = "widgets.faults.e2e.vapcheck.dev";
    let config_maps = "configmaps.faults.e2e.vapcheck.dev";
    churn.put(deployments, true).await?;
    for (name, group, resource, expression) in [
        (
            widgets,
            WIDGET_GROUP,
            "widgets",
            "object.spec.color == 'red'",
        ),
        (config_maps, "", "configmaps", "object.datum.size() < 10"),
    ] {
        api.patch(
            name,
            &PatchParams::apply(support::FIELD_MANAGER).force(),
            &Patch::Apply(&policy_on(name, group, resource, expression)?),
        )
        .await?;
        churn.expected.insert(name.to_owned(), true);
    }
    // The kinds whose documents download are checked (both typos found) ...
    let others: Expected = churn
        .expected
        .iter()
        .filter(|(k, _)| k.as_str() != deployments)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    wait_for(
        "the policies whose schemas download",
        Duration::from_secs(60),
        || async { Ok(pending_among(&api, &others).await?.is_empty().then_some(())) },
    )
    .await?;
    // ... and the Deployment policy says its schema could not be fetched.
    let (reason, message) = wait_for(
        "the Deployment policy's SchemaUnavailable",
        Duration::from_secs(30),
        || async { type_checked_reason(&api, deployments).await },
    )
    .await?;
    eprintln!("e2e: apps/v1 document refused: TypeChecked {reason}: {message}");
    assert_eq!(reason, "SchemaUnavailable", "{message}");
    assert!(
        message.contains("GET /openapi/v3/apis/apps/v1: HTTP 403: Forbidden"),
        "{message}"
    );

    // Phase 2: the proxy serves everything again; the Deployment policy is checked.
    drop(proxy);
    proxy = Proxy::start(cluster.kubeconfig(), port, "^$")?;
    let took = converge_timed(
        &api,
        &churn.expected,
        "after the apps/v1 document came back",
        &replicas,
    )
    .await?;
    eprintln!(
        "e2e: apps/v1 document back: converged in {:.2}s",
        took.as_secs_f64()
    );

    // Phase 3: the whole /openapi/v3 tree fails while the widgets CRD gains `spec.color`:
    // vapcheck keeps the previous schemas (the widget typo stays) ...
    drop(proxy);
    proxy = Proxy::start(cluster.kubeconfig(), port, "^/openapi/v3")?;
    support::apply_yaml(&client, &widget_crd(true)).await?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still: Expected = [(widgets.to_owned(), true)].into();
    assert!(
        pending_among(&api, &still).await?.is_empty(),
        "the widget policy changed while no schema could be read"
    );
    let metrics = http_get(
        &replicas[0].address("metrics").context("metrics address")?,
        "/metrics",
    )?;
    // The failed polls are counted: the apps/v1 document as `error` (the rest of the poll
    // worked), the refused index as `forbidden` (kubectl proxy answers 403).
    let count = |result: &str| {
        sample(
            &metrics,
            &format!("vapcheck_schema_fetches_total{{result=\"{result}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let (errors, forbidden) = (count("error"), count("forbidden"));
    eprintln!("e2e: schema fetches: error {errors}, forbidden {forbidden}");
    assert!(errors >= 1.0, "apps/v1 failures counted: {errors}");
    assert!(forbidden >= 3.0, "index refusals counted: {forbidden}");
    // ... and catches up once the proxy serves the index again.
    drop(proxy);
    let _proxy = Proxy::start(cluster.kubeconfig(), port, "^$")?;
    churn.expected.insert(widgets.to_owned(), false);
    let took = converge_timed(
        &api,
        &churn.expected,
        "after /openapi/v3 came back",
        &replicas,
    )
    .await?;
    eprintln!(
        "e2e: /openapi/v3 back: converged in {:.2}s",
        took.as_secs_f64()
    );

    // Every final status equals a fresh check (straight to the API server, no proxy).
    let listed = api.list(&ListParams::default().labels(LABEL)).await?.items;
    assert_eq!(listed.len(), churn.expected.len());
    support::assert_equal_to_fresh_check(cluster.kubeconfig(), &listed)?;
    for r in &replicas {
        assert!(!r.log_text().contains("panicked"), "{}", r.log_text());
    }
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio one_replica_watch_expires_410_across_apiserver_restarts_and_converges_within_bound,
    tokio two_replicas_lose_and_retake_the_lease_across_apiserver_restarts_and_converge_within_bound,
    tokio one_leader_converges_within_bound_across_etcd_restarts,
    tokio standby_takes_over_from_a_killed_leader_and_converges_within_bound,
    tokio schema_downloads_failing_transiently_show_and_recover_within_bound,
}
