//! Cold start side by side (issue 17): N policies on a fresh control plane, then either
//! kube-controller-manager's ValidatingAdmissionPolicy status controller alone or vapcheck
//! alone (the other one is not running), until every policy's status is written for its
//! generation (`status.observedGeneration == metadata.generation`; followed on a watch,
//! [`common::Progress`], and confirmed by a list). Printed per side: wall time
//! to converge (from the controller's start), CPU-seconds (`utime + stime` of the process, at
//! convergence) and peak RSS (`VmHWM`, read after convergence); then the ratios.
//!
//! Run by `e2e/bench/cold` (see e2e/bench/README.md): `VAPCHECK_BENCH_N` policies (default
//! 500), `VAPCHECK_BENCH_SIDES` (`both`, `vapcheck` or `kcm`), `VAPCHECK_BENCH_BIN` (the
//! vapcheck binary, default the one cargo built with this test), `VAPCHECK_BENCH_TIMEOUT`
//! (seconds per side, default 600), `VAPCHECK_BENCH_MAX_RSS_MIB` (vapcheck's peak RSS bound,
//! default 64), `VAPCHECK_BENCH_WRAPPER` (a command put in front of vapcheck, e.g.
//! `heaptrack -o /tmp/vapcheck`; the RSS is then the wrapper's and is not asserted).
//!
//! The policies are the corpus (`shared/corpus/policies`) cycled with renamed copies; the
//! ones kube-apiserver refuses as invalid are left out of the cycle.

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use common::{
    Progress, Side, converged, cpu_seconds, create_policies, env_number, proc_status_mib, start,
};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::api::Api;
use support::{Cluster, UpOptions};

struct Measured {
    wall: Duration,
    cpu_s: f64,
    peak_rss_mib: f64,
}

async fn run_side(side: Side, n: usize, timeout: Duration) -> anyhow::Result<Measured> {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(UpOptions::default())).await??;
    let client = cluster.client().await?;
    let created = Instant::now();
    let templates = create_policies(&client, n).await?;
    eprintln!(
        "bench: {side:?}: {n} policies created in {:.1?} ({templates} corpus templates)",
        created.elapsed()
    );
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let (done, total) = converged(&api).await?;
    if total != n || done != 0 {
        bail!(
            "before the controller starts: {done} of {total} policies have a status, want 0 of {n}"
        );
    }
    let log = std::env::temp_dir().join(format!(
        "vapcheck-bench-{}-{side:?}.log",
        std::process::id()
    ));
    let progress = Progress::start(&api).await?;
    let started = Instant::now();
    let mut child = start(side, cluster.kubeconfig(), &log)?;
    let pid = child.0.id();
    eprintln!("bench: {side:?} (pid {pid}) logs to {}", log.display());
    let mut last_print = Instant::now();
    let wall = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (done, total) = progress.counts();
        if done == total {
            // The watch says so; the time is when it saw the last write. One list confirms.
            let at = started.elapsed();
            let (listed_done, listed_total) = converged(&api).await?;
            if listed_done == listed_total && listed_total == n {
                break at;
            }
            eprintln!(
                "bench: {side:?}: the watch saw {done} of {total} converged, a list {listed_done} of {listed_total}; waiting on"
            );
        }
        if started.elapsed() > timeout {
            bail!(
                "{side:?} did not converge within {timeout:?}: {done} of {total} statuses written (log {})",
                log.display()
            );
        }
        if let Ok(Some(exit)) = child.0.try_wait() {
            bail!("{side:?} exited ({exit}; log {})", log.display());
        }
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("{side:?} exited (log {})", log.display());
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "bench: {side:?}: {done}/{total} after {:.0?}",
                started.elapsed()
            );
            last_print = Instant::now();
        }
    };
    drop(progress);
    let cpu_s = cpu_seconds(pid)?;
    let peak_rss_mib = proc_status_mib(pid, "VmHWM")?;
    drop(child);
    tokio::task::spawn_blocking(move || cluster.stop()).await?;
    eprintln!(
        "bench: {side:?}: converged in {wall:.1?}, {cpu_s:.2} CPU-s, peak RSS {peak_rss_mib:.1} MiB"
    );
    Ok(Measured {
        wall,
        cpu_s,
        peak_rss_mib,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark (minutes, two control planes): run by e2e/bench/cold"]
async fn cold_start_kcm_vs_vapcheck() -> anyhow::Result<()> {
    let n = env_number("VAPCHECK_BENCH_N", 500) as usize;
    let timeout = Duration::from_secs(env_number("VAPCHECK_BENCH_TIMEOUT", 600));
    let max_rss = env_number("VAPCHECK_BENCH_MAX_RSS_MIB", 64) as f64;
    let wrapped = std::env::var("VAPCHECK_BENCH_WRAPPER").is_ok_and(|w| !w.trim().is_empty());
    let (kcm, vap) = common::sides()?;
    let kcm = if kcm {
        Some(run_side(Side::Kcm, n, timeout).await?)
    } else {
        None
    };
    let vap = if vap {
        Some(run_side(Side::Vapcheck, n, timeout).await?)
    } else {
        None
    };
    println!(
        "cold start, {n} policies, fresh control plane per side (nproc {}, load {})",
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "{:<22} {:>12} {:>12} {:>14}",
        "", "converge s", "CPU-s", "peak RSS MiB"
    );
    for (name, m) in [("kube-controller-manager", &kcm), ("vapcheck", &vap)] {
        if let Some(m) = m {
            println!(
                "{name:<22} {:>12.1} {:>12.2} {:>14.1}",
                m.wall.as_secs_f64(),
                m.cpu_s,
                m.peak_rss_mib
            );
        }
    }
    if let (Some(k), Some(v)) = (&kcm, &vap) {
        println!(
            "{:<22} {:>11.1}x {:>11.1}x {:>13.1}x",
            "KCM / vapcheck",
            k.wall.as_secs_f64() / v.wall.as_secs_f64(),
            k.cpu_s / v.cpu_s.max(0.01),
            k.peak_rss_mib / v.peak_rss_mib
        );
    }
    if let Some(v) = &vap
        && !wrapped
        && v.peak_rss_mib >= max_rss
    {
        bail!(
            "vapcheck's peak RSS {:.1} MiB at {n} policies is not under {max_rss} MiB",
            v.peak_rss_mib
        );
    }
    Ok(())
}
