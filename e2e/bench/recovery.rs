//! Recovery side by side (issue 17): N policies on a fresh control plane with either
//! kube-controller-manager's ValidatingAdmissionPolicy status controller alone or vapcheck alone
//! running and converged; then R rounds of: kube-apiserver killed with SIGKILL and restarted on
//! the same port and data (`e2e/cluster/restart`, D seconds down), M policies given a new
//! generation right after `/readyz` passes, and the time from `/readyz` until every policy's
//! status is written for its generation again (`status.observedGeneration ==
//! metadata.generation`, which both controllers write). Printed per side: each round's time and
//! the median; then KCM/vapcheck. vapcheck must recover within 10 s each round (issue 17's bound;
//! `e2e_faults` asserts the same with churn and leader election).
//!
//! Run by `e2e/bench/recovery` (see e2e/bench/README.md): `VAPCHECK_BENCH_N` (default 100),
//! `VAPCHECK_BENCH_RESTARTS` (default 3), `VAPCHECK_BENCH_CHANGED` (M, default 10),
//! `VAPCHECK_BENCH_DOWN_SECONDS` (default 8), `VAPCHECK_BENCH_SIDES` (`both`, `vapcheck` or
//! `kcm`), `VAPCHECK_BENCH_BIN` (the vapcheck binary).

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use common::{Side, converged, create_policies, env_number, start};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::api::{Api, ListParams, Patch, PatchParams};
use support::{Cluster, UpOptions};

/// vapcheck's bound after each restart.
const BOUND: Duration = Duration::from_secs(10);

struct Plan {
    n: usize,
    restarts: usize,
    changed: usize,
    down: u64,
}

/// Waits until every policy has a status for its generation; fails after `timeout`.
async fn wait_converged(
    api: &Api<ValidatingAdmissionPolicy>,
    side: Side,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        // Errors right after a restart (connection refused) are retried until the timeout.
        if let Ok((done, total)) = converged(api).await
            && done == total
        {
            return Ok(());
        }
        if started.elapsed() > timeout {
            let (done, total) = converged(api).await.unwrap_or_default();
            bail!("{side:?}: {what}: {done} of {total} statuses after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Gives `count` policies (from the `round`-th on, cycling) a new generation: their
/// `failurePolicy` flips between Fail and Ignore.
async fn new_generations(
    api: &Api<ValidatingAdmissionPolicy>,
    count: usize,
    round: usize,
) -> anyhow::Result<()> {
    let list = api.list(&ListParams::default()).await?.items;
    let total = list.len().max(1);
    for i in 0..count.min(list.len()) {
        let p = &list[(round * count + i) % total];
        let name = p.metadata.name.clone().context("a policy without a name")?;
        let flipped = match p.spec.as_ref().and_then(|s| s.failure_policy.as_deref()) {
            Some("Ignore") => "Fail",
            _ => "Ignore",
        };
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"failurePolicy": flipped}})),
        )
        .await
        .with_context(|| format!("changing {name}"))?;
    }
    Ok(())
}

/// One side: its recovery time after each restart.
async fn run_side(side: Side, plan: &Plan) -> anyhow::Result<Vec<Duration>> {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(UpOptions::default())).await??;
    let client = cluster.client().await?;
    create_policies(&client, plan.n).await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let log = std::env::temp_dir().join(format!(
        "vapcheck-bench-recovery-{}-{side:?}.log",
        std::process::id()
    ));
    let child = start(side, cluster.kubeconfig(), &log)?;
    eprintln!(
        "bench: {side:?} (pid {}) logs to {}",
        child.0.id(),
        log.display()
    );
    wait_converged(&api, side, "first convergence", Duration::from_secs(600)).await?;
    let mut times = Vec::new();
    for round in 0..plan.restarts {
        let kubeconfig = cluster.kubeconfig().to_owned();
        let down = plan.down;
        let ready_ms = tokio::task::spawn_blocking(move || {
            support::restart(&kubeconfig, "kube-apiserver", down)
        })
        .await??;
        new_generations(&api, plan.changed, round).await?;
        wait_converged(
            &api,
            side,
            &format!("after restart {}", round + 1),
            Duration::from_secs(300),
        )
        .await?;
        let took =
            Duration::from_millis(u64::try_from(support::unix_ms().saturating_sub(ready_ms))?);
        eprintln!(
            "bench: {side:?}: restart {}/{}: converged {:.2}s after kube-apiserver was ready",
            round + 1,
            plan.restarts,
            took.as_secs_f64()
        );
        times.push(took);
    }
    drop(child);
    tokio::task::spawn_blocking(move || cluster.stop()).await?;
    Ok(times)
}

/// The middle time (the mean of the two middle ones for an even count).
fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    let n = sorted.len();
    match n {
        0 => Duration::ZERO,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark (minutes, two control planes): run by e2e/bench/recovery"]
async fn recovery_kcm_vs_vapcheck() -> anyhow::Result<()> {
    let plan = Plan {
        n: env_number("VAPCHECK_BENCH_N", 100) as usize,
        restarts: env_number("VAPCHECK_BENCH_RESTARTS", 3) as usize,
        changed: env_number("VAPCHECK_BENCH_CHANGED", 10) as usize,
        down: env_number("VAPCHECK_BENCH_DOWN_SECONDS", 8),
    };
    if plan.restarts == 0 {
        bail!("VAPCHECK_BENCH_RESTARTS must be at least 1");
    }
    let (kcm, vap) = common::sides()?;
    let kcm = if kcm {
        Some(run_side(Side::Kcm, &plan).await?)
    } else {
        None
    };
    let vap = if vap {
        Some(run_side(Side::Vapcheck, &plan).await?)
    } else {
        None
    };
    println!(
        "recovery, {} policies, {} restarts of kube-apiserver ({} s down), {} policies changed after each (nproc {}, load {})",
        plan.n,
        plan.restarts,
        plan.down,
        plan.changed,
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    for (name, times) in [("kube-controller-manager", &kcm), ("vapcheck", &vap)] {
        if let Some(times) = times {
            let each: Vec<String> = times
                .iter()
                .map(|t| format!("{:.2}", t.as_secs_f64()))
                .collect();
            println!(
                "{name:<24} median {:>7.2} s after /readyz  [{}]",
                median(times).as_secs_f64(),
                each.join(" ")
            );
        }
    }
    if let (Some(k), Some(v)) = (&kcm, &vap) {
        println!(
            "{:<24} {:>7.1}x",
            "KCM / vapcheck (median)",
            median(k).as_secs_f64() / median(v).as_secs_f64().max(0.001)
        );
    }
    if let Some(v) = &vap {
        for (i, took) in v.iter().enumerate() {
            if *took > BOUND {
                bail!(
                    "vapcheck: restart {}: converged {took:?} after kube-apiserver was ready (bound {BOUND:?})",
                    i + 1
                );
            }
        }
    }
    Ok(())
}
