//! Steady state (issue 17): N policies on a fresh control plane, vapcheck with a full re-check
//! every 5 s and a schema poll every second; once every status is written, a window of
//! `VAPCHECK_BENCH_STEADY_SECONDS` (default 600) in which nothing changes. In that window
//! vapcheck must write no status and download no OpenAPI document, while it keeps re-checking.
//! Measured from vapcheck's own metrics (`vapcheck_status_writes_total`,
//! `vapcheck_schema_fetches_total`, the count of `vapcheck_typecheck_duration_seconds`) and,
//! independently, from the API server: the `resourceVersion` of every policy before and after.
//!
//! Run by `e2e/bench/steady [N] [SECONDS]` (e2e/bench/README.md): `VAPCHECK_BENCH_N` policies
//! (default 500, cycled from the corpus as in the cold-start bench, named `bench-00000`..).

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use common::{create_policies, env_number};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::api::{Api, ListParams};
use support::{Cluster, UpOptions, Vapcheck};

/// Sum of the samples of every series whose line starts with `series`.
fn total(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

struct Snapshot {
    writes: f64,
    failed_writes: f64,
    downloads: f64,
    polls: f64,
    checks: f64,
    versions: BTreeMap<String, String>,
}

async fn snapshot(
    api: &Api<ValidatingAdmissionPolicy>,
    metrics_addr: &str,
) -> anyhow::Result<Snapshot> {
    let text = support::http_get(metrics_addr, "/metrics")?;
    let list = api.list(&ListParams::default()).await?;
    Ok(Snapshot {
        writes: total(&text, "vapcheck_status_writes_total{result=\"success\"}"),
        failed_writes: total(&text, "vapcheck_status_writes_total{result=\"conflict\"}")
            + total(&text, "vapcheck_status_writes_total{result=\"error\"}"),
        downloads: total(&text, "vapcheck_schema_fetches_total{result=\"success\"}")
            + total(&text, "vapcheck_schema_fetches_total{result=\"error\"}"),
        polls: total(&text, "vapcheck_schema_fetches_total{"),
        checks: total(&text, "vapcheck_typecheck_duration_seconds_count"),
        versions: list
            .items
            .into_iter()
            .map(|p| {
                (
                    p.metadata.name.unwrap_or_default(),
                    p.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark (minutes): run by e2e/bench/steady"]
async fn steady_state_writes_and_downloads_nothing() -> anyhow::Result<()> {
    let n = env_number("VAPCHECK_BENCH_N", 500) as usize;
    let window = Duration::from_secs(env_number("VAPCHECK_BENCH_STEADY_SECONDS", 600));
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(UpOptions::default())).await??;
    let client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    create_policies(&client, n).await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "steady",
        &["--recheck-period", "5s", "--leader-election", "false"],
    )?;
    let started = Instant::now();
    support::wait_for("every status written", Duration::from_secs(600), || {
        let api = api.clone();
        async move {
            let (done, _) = common::converged(&api).await?;
            Ok((done == n).then_some(()))
        }
    })
    .await?;
    eprintln!(
        "bench: {n} statuses written {:.1?} after vapcheck started",
        started.elapsed()
    );
    // Let the last writes and the first schema poll settle before the window opens.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let addr = support::metrics_addr(&vapcheck)?;
    let before = snapshot(&api, &addr).await?;
    eprintln!("bench: steady window of {window:?} starts");
    tokio::time::sleep(window).await;
    let after = snapshot(&api, &addr).await?;
    let changed = before
        .versions
        .iter()
        .filter(|(name, rv)| after.versions.get(*name) != Some(*rv))
        .count();
    let rechecks = after.checks - before.checks;
    println!(
        "steady state, {n} policies, {window:?}, re-check period 5 s, schema poll 1 s (nproc {}, load {})",
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!("policy checks (re-checks)            {rechecks:>10}");
    println!(
        "schema polls                         {:>10}",
        after.polls - before.polls
    );
    println!(
        "OpenAPI downloads                    {:>10}",
        after.downloads - before.downloads
    );
    println!(
        "status writes (vapcheck's metric)    {:>10}",
        after.writes - before.writes + after.failed_writes - before.failed_writes
    );
    println!("policies changed (resourceVersion)   {changed:>10}");
    if rechecks < n as f64 {
        bail!("only {rechecks} checks in the window: the periodic re-check did not run");
    }
    if after.writes != before.writes || after.failed_writes != before.failed_writes {
        bail!("vapcheck wrote statuses in steady state");
    }
    if after.downloads != before.downloads {
        bail!("vapcheck downloaded OpenAPI documents in steady state");
    }
    if changed != 0 {
        bail!("{changed} policies changed in steady state");
    }
    drop(vapcheck);
    tokio::task::spawn_blocking(move || cluster.stop()).await?;
    Ok(())
}
