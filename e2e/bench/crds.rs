//! Scale along the CRD axis (issue 30, item 6): Crossplane-sized clusters reach thousands of
//! CustomResourceDefinitions, and users report API-server trouble around 2,000. On one fresh
//! control plane:
//!
//! 1. `VAPCHECK_BENCH_POLICIES` policies (default 500): the corpus cycled (its wildcard rules
//!    included), plus `VAPCHECK_BENCH_CRD_POLICIES` (default 50) that each match the first
//!    kind of one bench CRD group and select a field the CRD's schema does not have
//!    (`object.spec.sizez`), and `VAPCHECK_BENCH_WILDCARD_POLICIES` (default 10) that match
//!    every resource (`apiGroups: ["*"]`, `resources: ["*"]`);
//! 2. `vapcheck controller` (the release build, default settings but the schema poll
//!    interval, `VAPCHECK_BENCH_POLL`, default 60s as shipped) converges on them;
//! 3. `VAPCHECK_BENCH_CRDS` CRDs (default 2,000; 5 kinds per group) are created in a burst
//!    (16 at a time);
//! 4. the clock stops when every CRD-matching policy's status names the undefined field, which
//!    it can only once vapcheck has the CRD's schema: its status is current.
//!
//! Printed: the burst's time, the time until every status is current (from the burst's
//! start), vapcheck's peak RSS before and after the burst and its growth per CRD, its CPU
//! time, and the OpenAPI documents it downloaded (from its `schemas changed` log lines). Fails
//! when a status is not current within `VAPCHECK_BENCH_TIMEOUT` (default 900 s) or the peak
//! RSS after the burst is not under `VAPCHECK_BENCH_MAX_RSS_MIB` (default 192).
//!
//! Run by `e2e/bench/crds` (see e2e/bench/README.md).

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use common::{
    converged, cpu_seconds, create_policies, env_number, proc_status_mib, start_vapcheck,
};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use support::{Cluster, UpOptions};

const KINDS_PER_GROUP: usize = 5;
const GROUP_SUFFIX: &str = "crds.bench.vapcheck.dev";

fn group(g: usize) -> String {
    format!("g{g:04}.{GROUP_SUFFIX}")
}

fn crd(g: usize, k: usize) -> anyhow::Result<CustomResourceDefinition> {
    let group = group(g);
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widget{k}s.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": format!("Widget{k}"),
                "listKind": format!("Widget{k}List"),
                "plural": format!("widget{k}s"),
                "singular": format!("widget{k}"),
            },
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "properties": {
                                "size": { "type": "integer" },
                                "owner": { "type": "string" },
                                "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                            },
                        },
                    },
                }},
            }],
        },
    }))?)
}

fn policy(
    name: &str,
    groups: &str,
    resources: &str,
    expression: &str,
) -> anyhow::Result<ValidatingAdmissionPolicy> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": name },
        "spec": {
            "matchConstraints": { "resourceRules": [{
                "apiGroups": [groups],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resources],
            }]},
            "validations": [{ "expression": expression }],
        },
    }))?)
}

/// Creates `objects` 16 at a time.
async fn create_all<K>(api: &Api<K>, objects: Vec<K>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let results: Vec<Result<K, kube::Error>> =
        futures::stream::iter(objects.into_iter().map(|o| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &o).await }
        }))
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        r.context("creating a bench object")?;
    }
    Ok(())
}

/// How many of the CRD-matching policies name the undefined field in their status.
async fn current(api: &Api<ValidatingAdmissionPolicy>, n: usize) -> anyhow::Result<usize> {
    let list = api.list(&ListParams::default()).await?;
    let count = list
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("crd-bench-"))
        })
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.type_checking.as_ref())
                .and_then(|t| t.expression_warnings.as_ref())
                .is_some_and(|w| {
                    w.iter()
                        .any(|w| w.warning.contains("undefined field 'sizez'"))
                })
        })
        .count();
    ensure!(count <= n, "{count} current of {n} CRD-matching policies");
    Ok(count)
}

/// OpenAPI documents downloaded, from the `schemas changed` lines of vapcheck's log (the
/// added and changed group-versions of each poll).
fn downloads(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("schemas changed"))
        .map(|l| {
            ["added=", "changed="]
                .iter()
                .filter_map(|key| {
                    let rest = &l[l.find(key)? + key.len()..];
                    rest.split(|c: char| !c.is_ascii_digit())
                        .next()?
                        .parse::<usize>()
                        .ok()
                })
                .sum::<usize>()
        })
        .sum()
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut done: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = Instant::now();
    let mut last_print = Instant::now();
    loop {
        if done().await? {
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            bail!("{what}: not within {timeout:?}");
        }
        if last_print.elapsed() > Duration::from_secs(15) {
            eprintln!("bench: waiting for {what} ({:.0?})", started.elapsed());
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark (minutes, one control plane): run by e2e/bench/crds"]
async fn crd_burst_while_policies_are_watched() -> anyhow::Result<()> {
    let n_policies = env_number("VAPCHECK_BENCH_POLICIES", 500) as usize;
    let n_crd_policies = env_number("VAPCHECK_BENCH_CRD_POLICIES", 50) as usize;
    let n_crds = env_number("VAPCHECK_BENCH_CRDS", 2000) as usize;
    let wildcard = env_number("VAPCHECK_BENCH_WILDCARD_POLICIES", 10) as usize;
    let timeout = Duration::from_secs(env_number("VAPCHECK_BENCH_TIMEOUT", 900));
    let max_rss = env_number("VAPCHECK_BENCH_MAX_RSS_MIB", 192) as f64;
    let poll = std::env::var("VAPCHECK_BENCH_POLL").unwrap_or_else(|_| "60s".to_owned());
    let groups = n_crds.div_ceil(KINDS_PER_GROUP);
    ensure!(
        n_crd_policies <= groups && n_crd_policies + wildcard <= n_policies,
        "VAPCHECK_BENCH_CRD_POLICIES ({n_crd_policies}) must be at most the CRD groups ({groups}) and leave room in VAPCHECK_BENCH_POLICIES ({n_policies}) for {wildcard} wildcard policies"
    );

    let cluster = tokio::task::spawn_blocking(|| Cluster::start(UpOptions::default())).await??;
    let client: Client = cluster.client().await?;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let corpus_n = n_policies - n_crd_policies - wildcard;
    create_policies(&client, corpus_n).await?;
    let mut own = Vec::new();
    for g in 0..n_crd_policies {
        own.push(policy(
            &format!("crd-bench-{g:04}"),
            &group(g),
            "widget0s",
            "object.spec.sizez > 0",
        )?);
    }
    for w in 0..wildcard {
        own.push(policy(
            &format!("wildcard-bench-{w:02}"),
            "*",
            "*",
            "object.metadata.name != ''",
        )?);
    }
    create_all(&policies, own).await?;
    let (_, total) = converged(&policies).await?;
    ensure!(
        total == n_policies,
        "{total} policies created, want {n_policies}"
    );

    let log = std::env::temp_dir().join(format!("vapcheck-bench-crds-{}.log", std::process::id()));
    // Warnings, and the controller's info lines (the `schemas changed` counts).
    let child = start_vapcheck(
        cluster.kubeconfig(),
        &log,
        &["--schema-poll-interval", &poll],
        "warn,vapcheck::controller=info",
    )?;
    let pid = child.0.id();
    eprintln!("bench: vapcheck (pid {pid}) logs to {}", log.display());
    let settle = wait_until("every policy's status", timeout, || async {
        let (done, total) = converged(&policies).await?;
        Ok(done == total)
    })
    .await?;
    let rss_before = proc_status_mib(pid, "VmHWM")?;
    let cpu_before = cpu_seconds(pid)?;
    let log_before = std::fs::read_to_string(&log).unwrap_or_default().len();
    eprintln!(
        "bench: {n_policies} policies converged in {settle:.1?}; peak RSS {rss_before:.1} MiB"
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut objects = Vec::new();
    for i in 0..n_crds {
        objects.push(crd(i / KINDS_PER_GROUP, i % KINDS_PER_GROUP)?);
    }
    let burst = Instant::now();
    create_all(&crds, objects).await?;
    let created = burst.elapsed();
    eprintln!("bench: {n_crds} CRDs created in {created:.1?}");
    wait_until(
        "every CRD-matching policy's status current",
        timeout,
        || async { Ok(current(&policies, n_crd_policies).await? == n_crd_policies) },
    )
    .await?;
    let until_current = burst.elapsed();
    // Memory is read once every bench group's document is in (statuses can be current
    // before the documents of groups no policy matches are downloaded).
    wait_until(
        "every bench group's OpenAPI document downloaded",
        timeout,
        || async {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            Ok(downloads(text.get(log_before..).unwrap_or_default()) >= groups)
        },
    )
    .await?;
    let until_downloaded = burst.elapsed();
    let rss_after = proc_status_mib(pid, "VmHWM")?;
    let rss_now = proc_status_mib(pid, "VmRSS")?;
    let cpu = cpu_seconds(pid)? - cpu_before;
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let documents = downloads(log_text.get(log_before..).unwrap_or_default());
    let (done, total) = converged(&policies).await?;
    ensure!(
        done == total,
        "after the burst: {done} of {total} statuses current"
    );
    drop(child);
    tokio::task::spawn_blocking(move || cluster.stop()).await?;

    println!(
        "CRD burst: {n_crds} CRDs in {groups} groups while {n_policies} policies are watched ({n_crd_policies} match a bench CRD, {wildcard} every resource), poll {poll} (nproc {}, load {})",
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "  CRDs created in              {:>8.1} s",
        created.as_secs_f64()
    );
    println!(
        "  every status current after   {:>8.1} s",
        until_current.as_secs_f64()
    );
    println!(
        "  every document downloaded    {:>8.1} s",
        until_downloaded.as_secs_f64()
    );
    println!("  vapcheck CPU during it       {cpu:>8.2} s");
    println!("  peak RSS before / after      {rss_before:>8.1} / {rss_after:.1} MiB");
    println!("  RSS then                     {rss_now:>8.1} MiB");
    println!(
        "  growth per CRD               {:>8.1} KiB",
        (rss_after - rss_before) * 1024.0 / n_crds as f64
    );
    println!("  OpenAPI documents downloaded {documents:>8}");
    ensure!(
        rss_after < max_rss,
        "vapcheck's peak RSS {rss_after:.1} MiB after {n_crds} CRDs is not under {max_rss} MiB"
    );
    Ok(())
}
