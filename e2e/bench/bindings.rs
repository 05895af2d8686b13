//! Bindings at scale (issue 13): 200 ValidatingAdmissionPolicies with a ConfigMap `paramKind`,
//! 1,000 bindings (5 per policy) and 1,000 param ConfigMaps on a fresh control plane. Proves
//! that every policy's `BindingsEffective` condition is right at that size and measures what the
//! bindings and params add to vapcheck's memory.
//!
//! Three steps, one fresh control plane:
//!
//! 1. the 200 policies alone; `vapcheck controller` (process A) starts cold and the bench waits
//!    until every policy says `NoBindings`; A's peak RSS is the baseline;
//! 2. the 1,000 param ConfigMaps and the 1,000 bindings are created while A runs; the bench
//!    waits until every condition is the expected one (the time is printed: the live path);
//! 3. A stops; process B starts cold with everything present; once every condition is right
//!    again, B's peak RSS minus A's is what bindings and params add. It must be under
//!    `VAPCHECK_BENCH_MAX_ADDED_MIB` (default 20, the bound).
//!
//! The expected verdicts, by construction (policy index `i`, binding index `j`):
//! `i < 50`: every binding names its ConfigMap → `True/Evaluates`;
//! `50 <= i < 100`: every binding selects the policy's 5 ConfigMaps by label → `True/Evaluates`;
//! `100 <= i < 150`: binding 0 names a ConfigMap that does not exist, with
//! `parameterNotFoundAction: Deny` → `False/DeniesAllMatchingRequests` naming binding 0;
//! `150 <= i < 200`: the same with `Allow` → `False/Inactive` naming binding 0. What the API
//! server does in each of these cases is proven by `e2e_binding_verdicts` and
//! `e2e_binding_controller`; this bench is about scale.
//!
//! Run by `e2e/bench/bindings` (see e2e/bench/README.md). `VAPCHECK_BENCH_BIN` replaces the
//! vapcheck binary; `VAPCHECK_BENCH_TIMEOUT` bounds each wait (seconds, default 300).

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use common::{env_number, proc_status_mib};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{Cluster, UpOptions};

const POLICIES: usize = 200;
const BINDINGS_PER_POLICY: usize = 5;
const NS: &str = "bench13-params";
const PARALLEL_CREATES: usize = 16;

fn policy_name(i: usize) -> String {
    format!("bench13-{i:03}.e2e.vapcheck.dev")
}

fn binding_name(i: usize, j: usize) -> String {
    format!("bench13-{i:03}-{j}.e2e.vapcheck.dev")
}

fn policy(i: usize) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(i)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                // Only objects labelled for this policy: the bench's own ConfigMaps never match.
                "objectSelector": {"matchLabels": {"bench13-target": i.to_string()}},
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]
                }]
            },
            "validations": [{
                "expression": "object.metadata.name != 'rejected-' + params.metadata.name"
            }]
        }
    })
}

/// What the policy's condition must say, and the binding its message must name.
fn expected(i: usize) -> (&'static str, &'static str, Option<String>) {
    match i {
        0..100 => ("True", "Evaluates", None),
        100..150 => (
            "False",
            "DeniesAllMatchingRequests",
            Some(binding_name(i, 0)),
        ),
        _ => ("False", "Inactive", Some(binding_name(i, 0))),
    }
}

fn binding(i: usize, j: usize) -> Value {
    let param_ref = match (i, j) {
        (0..50, _) | (100.., 1..) => json!({
            "name": format!("p-{i:03}-{j}"), "namespace": NS,
            "parameterNotFoundAction": "Deny"
        }),
        (50..100, _) => json!({
            "selector": {"matchLabels": {"bench13-policy": i.to_string()}},
            "namespace": NS, "parameterNotFoundAction": "Deny"
        }),
        (100..150, 0) => json!({
            "name": format!("absent-{i:03}"), "namespace": NS,
            "parameterNotFoundAction": "Deny"
        }),
        _ => json!({
            "name": format!("absent-{i:03}"), "namespace": NS,
            "parameterNotFoundAction": "Allow"
        }),
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": binding_name(i, j)},
        "spec": {
            "policyName": policy_name(i),
            "validationActions": ["Deny"],
            "paramRef": param_ref
        }
    })
}

fn param(i: usize, j: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": format!("p-{i:03}-{j}"), "namespace": NS,
            "labels": {"bench13-policy": i.to_string()}
        },
        "data": {"limit": j.to_string()}
    })
}

/// Creates every object of `objects` (group, version, kind, plural, namespace, body).
async fn create_all(
    client: &Client,
    what: &str,
    gvk: (&str, &str, &str),
    plural: &str,
    namespace: Option<&str>,
    objects: Vec<Value>,
) -> anyhow::Result<()> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let started = Instant::now();
    let n = objects.len();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(objects.into_iter().map(|o| {
        let api = api.clone();
        async move {
            let object: DynamicObject = serde_json::from_value(o)?;
            let name = object.metadata.name.clone().unwrap_or_default();
            api.create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("creating {name}"))?;
            Ok(())
        }
    }))
    .buffer_unordered(PARALLEL_CREATES)
    .collect()
    .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    eprintln!("bench13: {n} {what} created in {:.1?}", started.elapsed());
    Ok(())
}

/// The policies whose `BindingsEffective` condition is not yet what `want` says, with what
/// each says now (the first few), or an empty list.
async fn wrong_conditions(
    api: &Api<ValidatingAdmissionPolicy>,
    want: impl Fn(usize) -> (&'static str, &'static str, Option<String>),
) -> anyhow::Result<Vec<String>> {
    let list = api.list(&ListParams::default()).await?;
    let mut wrong = Vec::new();
    let mut seen = 0;
    for p in &list.items {
        let Some(i) = p
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.strip_prefix("bench13-"))
            .and_then(|n| n.get(..3))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        seen += 1;
        let (status, reason, names) = want(i);
        let condition = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "BindingsEffective"));
        let ok = condition.is_some_and(|c| {
            c.status == status
                && c.reason == reason
                && names
                    .as_ref()
                    .is_none_or(|b| c.message.contains(b.as_str()))
        });
        if !ok {
            wrong.push(format!(
                "{i}: {}",
                condition.map_or("no condition".to_owned(), |c| format!(
                    "{}/{}: {}",
                    c.status, c.reason, c.message
                ))
            ));
        }
    }
    if seen != POLICIES {
        bail!("{seen} bench policies listed, want {POLICIES}");
    }
    Ok(wrong)
}

async fn wait_until_right(
    api: &Api<ValidatingAdmissionPolicy>,
    what: &str,
    timeout: Duration,
    child: &mut Child,
    log: &Path,
    want: impl Fn(usize) -> (&'static str, &'static str, Option<String>) + Copy,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let wrong = wrong_conditions(api, want).await?;
        if wrong.is_empty() {
            return Ok(started.elapsed());
        }
        if let Ok(Some(exit)) = child.try_wait() {
            bail!("vapcheck exited ({exit}; log {})", log.display());
        }
        if started.elapsed() > timeout {
            bail!(
                "{what}: {} of {POLICIES} conditions still wrong after {timeout:?}, e.g. {}",
                wrong.len(),
                wrong
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Removes the status of every bench policy (no status controller runs meanwhile).
async fn clear_statuses(api: &Api<ValidatingAdmissionPolicy>) -> anyhow::Result<()> {
    let patch = kube::api::Patch::Merge(json!({"status": null}));
    for i in 0..POLICIES {
        api.patch_status(&policy_name(i), &kube::api::PatchParams::default(), &patch)
            .await
            .with_context(|| format!("clearing the status of {}", policy_name(i)))?;
    }
    Ok(())
}

struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(kubeconfig: &Path, label: &str) -> anyhow::Result<Controller> {
        let bin = std::env::var_os("VAPCHECK_BENCH_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_vapcheck")));
        let log = std::env::temp_dir().join(format!(
            "vapcheck-bench13-{}-{label}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
        let child = Command::new(&bin)
            .args([
                "controller",
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-bind-address",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("VAPCHECK_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        eprintln!(
            "bench13: vapcheck {label} (pid {}) logs to {}",
            child.id(),
            log.display()
        );
        Ok(Controller { child, log })
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark (a fresh control plane, 2,201 objects): run by e2e/bench/bindings"]
async fn thousand_bindings_conditions_and_memory() -> anyhow::Result<()> {
    let timeout = Duration::from_secs(env_number("VAPCHECK_BENCH_TIMEOUT", 300));
    let max_added = env_number("VAPCHECK_BENCH_MAX_ADDED_MIB", 20) as f64;
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(UpOptions::default())).await??;
    let client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());

    create_all(
        &client,
        "namespace",
        ("", "v1", "Namespace"),
        "namespaces",
        None,
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})],
    )
    .await?;
    create_all(
        &client,
        "policies",
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        ),
        "validatingadmissionpolicies",
        None,
        (0..POLICIES).map(policy).collect(),
    )
    .await?;

    // 1. The policies alone: the baseline.
    let mut a = Controller::start(cluster.kubeconfig(), "policies-only")?;
    let no_bindings = |_: usize| ("False", "NoBindings", None);
    let converge_a = wait_until_right(
        &api,
        "policies only",
        timeout,
        &mut a.child,
        &a.log.clone(),
        no_bindings,
    )
    .await?;
    let base_peak = proc_status_mib(a.child.id(), "VmHWM")?;
    let base_rss = proc_status_mib(a.child.id(), "VmRSS")?;
    eprintln!(
        "bench13: A: {POLICIES} policies NoBindings after {converge_a:.1?}; peak {base_peak:.1} MiB, RSS {base_rss:.1} MiB"
    );

    // 2. Params and bindings created while A runs.
    let created = Instant::now();
    create_all(
        &client,
        "param ConfigMaps",
        ("", "v1", "ConfigMap"),
        "configmaps",
        Some(NS),
        (0..POLICIES)
            .flat_map(|i| (0..BINDINGS_PER_POLICY).map(move |j| param(i, j)))
            .collect(),
    )
    .await?;
    create_all(
        &client,
        "bindings",
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        ),
        "validatingadmissionpolicybindings",
        None,
        (0..POLICIES)
            .flat_map(|i| (0..BINDINGS_PER_POLICY).map(move |j| binding(i, j)))
            .collect(),
    )
    .await?;
    let live = wait_until_right(
        &api,
        "live",
        timeout,
        &mut a.child,
        &a.log.clone(),
        expected,
    )
    .await?;
    let live_total = created.elapsed();
    let live_rss = proc_status_mib(a.child.id(), "VmRSS")?;
    eprintln!(
        "bench13: A: every condition right {live:.1?} after the last create ({live_total:.1?} after the first); RSS {live_rss:.1} MiB"
    );
    drop(a);

    // 3. Everything present, cold. The statuses A wrote are removed first, so that B's
    // conditions are B's own work.
    clear_statuses(&api).await?;
    if wrong_conditions(&api, expected).await?.len() != POLICIES {
        bail!("the statuses A wrote are still there");
    }
    let mut b = Controller::start(cluster.kubeconfig(), "with-bindings")?;
    let converge_b = wait_until_right(
        &api,
        "cold with bindings",
        timeout,
        &mut b.child,
        &b.log.clone(),
        expected,
    )
    .await?;
    let peak = proc_status_mib(b.child.id(), "VmHWM")?;
    let rss = proc_status_mib(b.child.id(), "VmRSS")?;
    drop(b);
    tokio::task::spawn_blocking(move || cluster.stop()).await?;

    let added = peak - base_peak;
    println!(
        "bindings at scale: {POLICIES} policies, {} bindings, {} params (nproc {}, load {})",
        POLICIES * BINDINGS_PER_POLICY,
        POLICIES * BINDINGS_PER_POLICY,
        std::thread::available_parallelism()
            .map(|p| p.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "{:<34} {:>10} {:>12} {:>10}",
        "", "converge s", "peak MiB", "RSS MiB"
    );
    println!(
        "{:<34} {:>10.1} {:>12.1} {:>10.1}",
        "A: policies only (cold)",
        converge_a.as_secs_f64(),
        base_peak,
        base_rss
    );
    println!(
        "{:<34} {:>10.1} {:>12} {:>10.1}",
        "A: + bindings and params (live)",
        live.as_secs_f64(),
        "",
        live_rss
    );
    println!(
        "{:<34} {:>10.1} {:>12.1} {:>10.1}",
        "B: everything present (cold)",
        converge_b.as_secs_f64(),
        peak,
        rss
    );
    println!("added by bindings and params: {added:.1} MiB peak (bound {max_added} MiB)");
    if added >= max_added {
        bail!("bindings and params add {added:.1} MiB of peak RSS, not under {max_added} MiB");
    }
    Ok(())
}
