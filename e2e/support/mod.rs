//! Helpers shared by the cluster (e2e) tests.
//!
//! Each group of the e2e executable (a module of e2e/tests/main.rs, run by e2e/tests/runner.rs in
//! a process of its own) gets one fresh control plane from `e2e/cluster/up
//! --with-upstream-controller` ([`shared_cluster`]), started on first use and stopped when the
//! group's process exits: by an `atexit` hook after its last test, and by `up`'s owner watchdog if
//! the process dies without running it (a kill, an abort). The benchmarks in e2e/bench include
//! this file too, one executable each. Setting `VAPCHECK_E2E_KUBECONFIG` to a kubeconfig path runs the tests
//! against that cluster instead and starts nothing (see docs/cluster.md).
//!
//! Tests in one group run in parallel against the same cluster, so every test names its own
//! objects.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyStatus,
};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Client, Config};

pub mod scrape;

/// The environment variable that points the tests at an existing cluster's kubeconfig.
pub const KUBECONFIG_ENV: &str = "VAPCHECK_E2E_KUBECONFIG";

/// The field manager used for server-side apply by the tests.
pub const FIELD_MANAGER: &str = "vapcheck-e2e";

/// Whether to rewrite a recorded file instead of comparing with it: `VAPCHECK_BLESS=1`, the same
/// rule as `tests/it/support.rs`'s `bless`. Under CI (`CI` set, not empty, not `false`) a
/// requested rewrite fails the test instead: CI compares and never records.
pub fn bless() -> bool {
    let wanted = std::env::var_os("VAPCHECK_BLESS").is_some_and(|v| v == "1");
    let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(
        !(wanted && under_ci),
        "VAPCHECK_BLESS=1 under CI: recorded files are compared in CI, never rewritten"
    );
    wanted
}

/// The repository root (where `Cargo.toml` is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The read-only `shared/` folder that sits beside the repository: `$VAPCHECK_SHARED`, else
/// `<repo>/../shared`, else `/work/shared` (for worktrees that are not next to it).
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VAPCHECK_SHARED") {
        return PathBuf::from(dir);
    }
    let beside = repo_root().join("../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// A control plane the tests talk to.
#[derive(Debug)]
pub struct Cluster {
    kubeconfig: PathBuf,
    /// Started by this process (and so stopped by it), as opposed to given by the environment.
    owned: bool,
    stopped: AtomicBool,
}

/// How to start a private cluster with [`Cluster::start`].
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// Run kube-controller-manager with the upstream ValidatingAdmissionPolicy status controller.
    pub with_upstream_controller: bool,
    /// More kube-apiserver flags (`VAPCHECK_APISERVER_EXTRA_ARGS` of `e2e/cluster/up`).
    pub apiserver_extra_args: Option<String>,
}

impl Cluster {
    /// Starts a new control plane with `e2e/cluster/up` and waits until it is ready. Its output
    /// is passed through to stderr (a cold build of the binaries takes a while); on failure the
    /// error carries the last lines of it, which include the failing component's log.
    ///
    /// The cluster is stopped when the value is dropped, or by `up`'s watchdog once this process
    /// has exited.
    pub fn start(options: UpOptions) -> anyhow::Result<Cluster> {
        let script = repo_root().join("e2e/cluster/up");
        let mut command = Command::new(&script);
        if options.with_upstream_controller {
            command.arg("--with-upstream-controller");
        }
        if let Some(args) = &options.apiserver_extra_args {
            command.env("VAPCHECK_APISERVER_EXTRA_ARGS", args);
        }
        command
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = command
            .spawn()
            .with_context(|| format!("running {}", script.display()))?;

        // Pass stderr through while keeping its tail for the error message.
        let stderr = child
            .stderr
            .take()
            .context("stderr of up was not captured")?;
        let tail = std::thread::spawn(move || {
            let mut tail: Vec<String> = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                tail.push(line);
                if tail.len() > 60 {
                    tail.remove(0);
                }
            }
            tail
        });
        let output = child
            .wait_with_output()
            .context("waiting for e2e/cluster/up")?;
        let tail = tail.join().unwrap_or_default();
        if !output.status.success() {
            bail!(
                "e2e/cluster/up failed ({}) after {:.0?}; its last output:\n{}",
                output.status,
                started.elapsed(),
                tail.join("\n")
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let kubeconfig = stdout
            .lines()
            .last()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .context("e2e/cluster/up printed no kubeconfig path")?;
        eprintln!(
            "e2e: control plane ready in {:.1?}: {kubeconfig}",
            started.elapsed()
        );
        Ok(Cluster {
            kubeconfig: PathBuf::from(kubeconfig),
            owned: true,
            stopped: AtomicBool::new(false),
        })
    }

    /// A cluster that already runs, reached through `kubeconfig`; [`Cluster::stop`] leaves it alone.
    pub fn existing(kubeconfig: impl Into<PathBuf>) -> Cluster {
        Cluster {
            kubeconfig: kubeconfig.into(),
            owned: false,
            stopped: AtomicBool::new(false),
        }
    }

    /// Path of the admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Whether this process started the cluster (rather than being pointed at one).
    pub fn is_owned(&self) -> bool {
        self.owned
    }

    /// A client with the admin credentials of the kubeconfig (its current context).
    pub async fn client(&self) -> anyhow::Result<Client> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .with_context(|| format!("reading {}", self.kubeconfig.display()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", self.kubeconfig.display()))?;
        Client::try_from(config).context("building a Kubernetes client")
    }

    /// Stops the cluster with `e2e/cluster/down` if this process started it; does nothing the
    /// second time. Returns once none of its processes runs.
    pub fn stop(&self) {
        if !self.owned || self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let script = repo_root().join("e2e/cluster/down");
        match Command::new(&script)
            .arg(&self.kubeconfig)
            .stdin(Stdio::null())
            .status()
        {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("e2e: {} exited with {status}", script.display()),
            Err(err) => eprintln!("e2e: could not run {}: {err}", script.display()),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
static SHARED_INIT: Mutex<()> = Mutex::new(());

unsafe extern "C" {
    /// C's `atexit` (libc is always linked by std): runs the callback when the process exits
    /// normally, which is how the test harness ends, passing or failing.
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn stop_shared_cluster() {
    if let Some(Ok(cluster)) = SHARED.get() {
        cluster.stop();
    }
}

/// The cluster of this group (or benchmark), with the upstream status controller running: the one named by
/// `VAPCHECK_E2E_KUBECONFIG`, or else one started on first use and stopped at exit.
pub fn shared_cluster() -> anyhow::Result<&'static Cluster> {
    // The lock makes concurrent first calls wait for one start instead of starting several.
    let _guard = SHARED_INIT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let result = SHARED.get_or_init(|| {
        if let Some(path) = std::env::var_os(KUBECONFIG_ENV).filter(|p| !p.is_empty()) {
            return Ok(Cluster::existing(path));
        }
        let cluster = Cluster::start(UpOptions {
            with_upstream_controller: true,
            ..UpOptions::default()
        })
        .map_err(|err| format!("{err:#}"))?;
        // SAFETY: registers a plain `extern "C" fn` without arguments, as atexit expects.
        if unsafe { atexit(stop_shared_cluster) } != 0 {
            eprintln!("e2e: atexit failed; the watchdog of e2e/cluster/up will stop the cluster");
        }
        Ok(cluster)
    });
    result.as_ref().map_err(|err| anyhow!("{err}"))
}

/// Polls `check` until it returns `Ok(Some(value))` or `timeout` has passed. `Ok(None)` means
/// "not yet"; an `Err` is remembered and reported if the deadline passes (API errors are often
/// transient right after a change). The error names `what` and the last observation.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last_error = match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => None,
            Err(err) => Some(err),
        };
        if Instant::now() >= deadline {
            return Err(match last_error {
                Some(err) => err.context(format!("timed out after {timeout:?} waiting for {what}")),
                None => anyhow!("timed out after {timeout:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Splits a multi-document YAML text into its non-empty documents, as JSON values.
pub fn parse_yaml_documents(yaml: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).context("parsing YAML")?;
    Ok(documents.into_iter().filter(|doc| !doc.is_null()).collect())
}

/// Applies every document of `yaml` with server-side apply (field manager [`FIELD_MANAGER`],
/// conflicts forced), like `kubectl apply --server-side -f`. Kinds are resolved by discovery, so
/// custom resources work once their CRD is established. Namespaced objects without a namespace
/// go to `default`. Returns the objects as the server stored them.
pub async fn apply_yaml(client: &Client, yaml: &str) -> anyhow::Result<Vec<DynamicObject>> {
    let mut applied = Vec::new();
    for document in parse_yaml_documents(yaml)? {
        let object: DynamicObject =
            serde_json::from_value(document).context("a YAML document is not an object")?;
        let types = object
            .types
            .as_ref()
            .context("a YAML document has no apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(types)
            .with_context(|| format!("bad apiVersion {:?}", types.api_version))?;
        let name = object
            .metadata
            .name
            .clone()
            .with_context(|| format!("a {} has no metadata.name", types.kind))?;
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("discovering {}/{}", types.api_version, types.kind))?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => {
                let namespace = object.metadata.namespace.as_deref().unwrap_or("default");
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
        };
        let stored = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .with_context(|| format!("applying {} {name}", types.kind))?;
        applied.push(stored);
    }
    Ok(applied)
}

/// The status of the ValidatingAdmissionPolicy `name`, if it has one yet.
pub async fn vap_status(
    client: &Client,
    name: &str,
) -> anyhow::Result<Option<ValidatingAdmissionPolicyStatus>> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let policy = api
        .get(name)
        .await
        .with_context(|| format!("reading ValidatingAdmissionPolicy {name}"))?;
    Ok(policy.status)
}

/// Waits until the policy `name` has a status with type checking results for its current
/// generation (what both the upstream controller and vapcheck write), and returns it.
pub async fn wait_for_type_checking(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<ValidatingAdmissionPolicyStatus> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    wait_for(
        &format!("status.typeChecking of ValidatingAdmissionPolicy {name}"),
        timeout,
        || async {
            let policy = api.get(name).await?;
            let generation = policy.metadata.generation;
            Ok(policy.status.filter(|status| {
                status.type_checking.is_some() && status.observed_generation == generation
            }))
        },
    )
    .await
}

/// A running `vapcheck controller` child process (the built binary, with the cluster's
/// kubeconfig, short intervals and `extra` flags); stopped with SIGTERM on drop.
pub struct Vapcheck {
    child: Child,
    log: PathBuf,
}

impl Vapcheck {
    pub fn start(kubeconfig: &Path, label: &str, extra: &[&str]) -> anyhow::Result<Vapcheck> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let log = std::env::temp_dir().join(format!(
            "vapcheck-e2e-{label}-{}-{}.log",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let file = std::fs::File::create(&log).with_context(|| log.display().to_string())?;
        let mut args = vec![
            "controller",
            "--schema-poll-interval",
            "1s",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "2s",
        ];
        args.extend_from_slice(extra);
        let child = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("starting vapcheck controller")?;
        eprintln!(
            "e2e: vapcheck {label} (pid {}) logs to {}",
            child.id(),
            log.display()
        );
        Ok(Vapcheck { child, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: i32) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    /// SIGTERM, then wait up to 20 s (SIGKILL after that).
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        self.signal(libc::SIGTERM);
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

impl Drop for Vapcheck {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The metrics address `vapcheck` logged (`serving metrics and health probes ... metrics=<addr>`).
pub fn metrics_addr(vapcheck: &Vapcheck) -> anyhow::Result<String> {
    vapcheck
        .log_text()
        .lines()
        .find(|l| l.contains("serving metrics and health probes"))
        .and_then(|l| l.split("metrics=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .context("vapcheck did not log its metrics address")
}

/// A plain HTTP/1.1 GET of `path` on `addr`; the whole response, headers included.
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
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

/// A server-side dry-run create (`POST <uri>` with `dryRun=All` in `uri`) of `body`:
/// `Ok(None)` when admitted, `Ok(Some("HTTP <code>: <message>"))` when refused.
pub async fn dry_run_create(
    client: &Client,
    uri: &str,
    body: &serde_json::Value,
) -> anyhow::Result<Option<String>> {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .method(http::Method::POST)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body)?))?;
    let response = client.send(req).await.context("sending a dry-run create")?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    if (200..300).contains(&code) {
        return Ok(None);
    }
    let status: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("HTTP {code}: {}", String::from_utf8_lossy(&bytes)))?;
    Ok(Some(format!(
        "HTTP {code}: {}",
        status["message"].as_str().unwrap_or_default()
    )))
}

/// The entries `vapcheck check -o json --kubeconfig <kubeconfig> <file>` prints (the built
/// binary, against a live cluster). Exit codes 0, 1 and 3 are results (README, "Exit code");
/// anything else fails with vapcheck's stderr.
pub fn check_json(kubeconfig: &Path, file: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let output = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .arg(file)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .context("running vapcheck check")?;
    if !matches!(output.status.code(), Some(0 | 1 | 3)) {
        bail!(
            "vapcheck check failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "vapcheck ({}) printed no JSON; stderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// What `vapcheck check -o json --kubeconfig <kubeconfig> <file>` says about each binding of
/// `kind` (`ValidatingAdmissionPolicyBinding` or `MutatingAdmissionPolicyBinding`): name →
/// (verdict, `effect.denialMessage`). Each is also printed, prefixed with `log`.
pub fn binding_verdicts(
    kubeconfig: &Path,
    file: &Path,
    kind: &str,
    log: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, (String, serde_json::Value)>> {
    let entries = check_json(kubeconfig, file)?;
    Ok(entries
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| {
            eprintln!(
                "{log}: vapcheck: {}: {}: {}",
                e["name"].as_str().unwrap_or_default(),
                e["verdict"].as_str().unwrap_or_default(),
                e["reason"].as_str().unwrap_or_default()
            );
            (
                e["name"].as_str().unwrap_or_default().to_owned(),
                (
                    e["verdict"].as_str().unwrap_or_default().to_owned(),
                    e["effect"]["denialMessage"].clone(),
                ),
            )
        })
        .collect())
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Kills `component` (kube-apiserver or etcd), keeps it down for `down`, starts it again;
/// returns the Unix time in milliseconds at which kube-apiserver's /readyz passed.
pub fn restart(kubeconfig: &Path, component: &str, down: u64) -> anyhow::Result<u128> {
    let script = repo_root().join("e2e/cluster/restart");
    let out = Command::new(&script)
        .args(["--component", component])
        .arg("--down")
        .arg(down.to_string())
        .arg(kubeconfig)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .context("e2e/cluster/restart printed no ready time")
}

/// The whole `status` vapcheck computes for each policy now (`vapcheck check -o json` over
/// the live cluster), keyed by name: warnings and conditions (type, status, reason, message).
pub fn fresh_check(
    kubeconfig: &Path,
    policies: &[ValidatingAdmissionPolicy],
) -> anyhow::Result<std::collections::BTreeMap<String, serde_json::Value>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("policies.json");
    let mut text = String::new();
    for p in policies {
        let mut p = p.clone();
        p.metadata.managed_fields = None;
        p.status = None;
        text.push_str(&serde_json::to_string(&p)?);
        text.push('\n');
    }
    std::fs::write(&file, text)?;
    let printed = check_json(kubeconfig, &file)?;
    Ok(printed
        .into_iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            (name, comparable(&e["status"]))
        })
        .collect())
}

/// The parts of a status that a fresh check determines.
pub fn comparable(status: &serde_json::Value) -> serde_json::Value {
    let warnings = status["typeChecking"]["expressionWarnings"].clone();
    let mut conditions: Vec<serde_json::Value> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| matches!(c["type"].as_str(), Some("TypeChecked" | "ExpressionsValid")))
        .map(|c| {
            serde_json::json!({
                "type": c["type"], "status": c["status"],
                "reason": c["reason"], "message": c["message"],
            })
        })
        .collect();
    conditions.sort_by_key(|c| c["type"].to_string());
    let warnings = if warnings.as_array().is_some_and(|w| w.is_empty()) {
        serde_json::Value::Null
    } else {
        warnings
    };
    serde_json::json!({"expressionWarnings": warnings, "conditions": conditions})
}

/// Asserts that the stored status of every policy of `policies` equals what a fresh
/// `vapcheck check` of the same policy computes now ([`comparable`] parts).
pub fn assert_equal_to_fresh_check(
    kubeconfig: &Path,
    policies: &[ValidatingAdmissionPolicy],
) -> anyhow::Result<()> {
    let fresh = fresh_check(kubeconfig, policies)?;
    assert_eq!(fresh.len(), policies.len(), "entries of the fresh check");
    for p in policies {
        let name = p.metadata.name.clone().unwrap_or_default();
        let stored = comparable(&serde_json::to_value(p.status.clone().unwrap_or_default())?);
        assert_eq!(
            Some(&stored),
            fresh.get(&name),
            "{name}: stored status vs a fresh check"
        );
    }
    Ok(())
}

/// Runs one of the project's tool scripts (`scripts/helm-path`, ...) and returns the path it
/// prints; its stderr is in the error when it fails.
pub fn script_output(script: &str) -> anyhow::Result<PathBuf> {
    let out = Command::new(repo_root().join(script))
        .output()
        .with_context(|| format!("running {script}"))?;
    if !out.status.success() {
        bail!(
            "{script} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// The pinned helm: `$VAPCHECK_HELM` (make test), else built and cached by scripts/helm-path.
pub fn helm() -> anyhow::Result<PathBuf> {
    match std::env::var_os("VAPCHECK_HELM") {
        Some(path) => Ok(PathBuf::from(path)),
        None => script_output("scripts/helm-path"),
    }
}

/// `helm template <release> charts/vapcheck --namespace <namespace> <args>`: the rendered
/// objects.
pub fn helm_template(
    release: &str,
    namespace: &str,
    args: &[&str],
) -> anyhow::Result<Vec<serde_json::Value>> {
    let out = Command::new(helm()?)
        .args(["template", release])
        .arg(repo_root().join("charts/vapcheck"))
        .args(["--namespace", namespace])
        .args(args)
        .output()
        .context("running helm template")?;
    if !out.status.success() {
        bail!(
            "helm template {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse_yaml_documents(&String::from_utf8(out.stdout)?)
}

/// The cluster entry of a kubeconfig's current context.
pub fn current_cluster(kubeconfig: &Path) -> anyhow::Result<kube::config::Cluster> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let current = kubeconfig
        .current_context
        .clone()
        .context("the kubeconfig has no current context")?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .context("current context not found")?;
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .context("cluster of the current context not found")
}

/// A kubeconfig (JSON, which is YAML) that authenticates as user `vapcheck` with `token` only,
/// for the admin kubeconfig's server and CA.
pub fn token_kubeconfig(admin: &Path, token: &str) -> anyhow::Result<String> {
    let cluster = current_cluster(admin)?;
    let mut entry = serde_json::json!({"server": cluster.server.context("cluster has no server")?});
    if let Some(data) = cluster.certificate_authority_data {
        entry["certificate-authority-data"] = serde_json::json!(data);
    } else if let Some(file) = cluster.certificate_authority {
        entry["certificate-authority"] = serde_json::json!(file);
    } else {
        bail!("admin kubeconfig has no CA");
    }
    Ok(serde_json::to_string_pretty(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": entry}],
        "users": [{"name": "vapcheck", "user": {"token": token}}],
        "contexts": [{"name": "vapcheck", "context": {"cluster": "e2e", "user": "vapcheck"}}],
        "current-context": "vapcheck",
    }))?)
}
