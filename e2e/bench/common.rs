//! Shared by the benchmarks on a real control plane (`e2e/bench/*.rs`): numbers from the
//! environment, the corpus policies created under new names, convergence, the controllers
//! (kube-controller-manager or vapcheck) and their CPU time and memory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use vapcheck::cli::input::read_policies;

use super::support;

const PARALLEL_CREATES: usize = 16;

pub fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}")),
        Err(_) => default,
    }
}

/// The corpus policies, in a fixed order.
pub fn corpus() -> anyhow::Result<Vec<ValidatingAdmissionPolicy>> {
    let root = support::shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let source = path.display().to_string();
        let policies = read_policies(&source, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
        out.extend(policies.into_iter().map(|p| p.policy));
    }
    if out.is_empty() {
        bail!("no policies under {}", root.display());
    }
    Ok(out)
}

/// Creates `n` policies named `bench-00000`.. from the corpus, cycled. A template the API
/// server refuses (422) is dropped from the cycle (its name is skipped, not reused).
pub async fn create_policies(client: &Client, n: usize) -> anyhow::Result<usize> {
    let mut templates = corpus()?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let mut created = 0usize;
    let mut next_name = 0usize;
    let mut next_template = 0usize;
    while created < n {
        if templates.is_empty() {
            bail!("the API server refused every corpus policy");
        }
        let batch: Vec<(usize, usize)> = (0..(n - created).min(256))
            .map(|k| (next_name + k, (next_template + k) % templates.len()))
            .collect();
        next_name += batch.len();
        next_template = (next_template + batch.len()) % templates.len();
        let results: Vec<(usize, usize, Result<(), kube::Error>)> =
            futures::stream::iter(batch.into_iter().map(|(i, t)| {
                let api = api.clone();
                let object = ValidatingAdmissionPolicy {
                    metadata: ObjectMeta {
                        name: Some(format!("bench-{i:05}")),
                        ..ObjectMeta::default()
                    },
                    spec: templates[t].spec.clone(),
                    status: None,
                };
                async move {
                    let r = api
                        .create(&PostParams::default(), &object)
                        .await
                        .map(|_| ());
                    (i, t, r)
                }
            }))
            .buffer_unordered(PARALLEL_CREATES)
            .collect()
            .await;
        let mut refused: Vec<usize> = Vec::new();
        for (i, t, r) in results {
            match r {
                Ok(()) => created += 1,
                Err(kube::Error::Api(s)) if s.code == 422 => refused.push(t),
                Err(e) => return Err(e).context(format!("creating bench-{i:05}")),
            }
        }
        refused.sort_unstable();
        refused.dedup();
        for t in refused.into_iter().rev() {
            templates.remove(t);
        }
        if !templates.is_empty() {
            next_template %= templates.len();
        }
    }
    Ok(templates.len())
}

/// How many of the policies have a status for their current generation, and how many there
/// are (what "converged" means in every bench: both controllers write
/// `status.observedGeneration`).
pub async fn converged(api: &Api<ValidatingAdmissionPolicy>) -> anyhow::Result<(usize, usize)> {
    let list = api.list(&ListParams::default()).await?;
    let total = list.items.len();
    let done = list.items.iter().filter(|p| has_current_status(p)).count();
    Ok((done, total))
}

/// Whether `p`'s status is for its current generation (what [`converged`] counts).
fn has_current_status(p: &ValidatingAdmissionPolicy) -> bool {
    let generation = p.metadata.generation;
    generation.is_some() && p.status.as_ref().and_then(|s| s.observed_generation) == generation
}

/// Convergence followed from a watch of the policies, so that waiting for it costs the API
/// server one watch event per write instead of a list of every policy twice a second. At
/// 5,000 policies those lists cost the bench process itself 6.9 CPU-s in a 44 s run of
/// vapcheck, besides the API server's work of encoding them (docs/controller.md, "What bounds
/// the cold start"), on the 2 cores the controller under test and the API server need. A
/// count the watch reports is confirmed by one [`converged`] list before a bench relies on
/// it.
pub struct Progress {
    /// kube-runtime's reflector store of the policies (it swaps in each re-list whole).
    store: kube::runtime::reflector::Store<ValidatingAdmissionPolicy>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Starts watching; the counts are those of the initial list once it has arrived.
    pub async fn start(api: &Api<ValidatingAdmissionPolicy>) -> anyhow::Result<Progress> {
        use kube::runtime::{WatchStreamExt, reflector, watcher};
        let (store, writer) = reflector::store();
        // The watcher retries by itself (with backoff); the bench's timeout bounds the wait.
        let stream =
            reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff();
        let task = tokio::spawn(stream.for_each(|_| async {}));
        tokio::time::timeout(Duration::from_secs(120), store.wait_until_ready())
            .await
            .context("the watch of the policies did not list them within 120 s")?
            .context("the watch of the policies ended before its first list")?;
        Ok(Progress { store, task })
    }

    /// How many policies have a status for their current generation, and how many there are,
    /// as last seen on the watch.
    pub fn counts(&self) -> (usize, usize) {
        let policies = self.store.state();
        let done = policies.iter().filter(|p| has_current_status(p)).count();
        (done, policies.len())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A memory line of `/proc/<pid>/status` (`VmHWM` for the peak resident set, `VmRSS` for the
/// current one) in MiB.
pub fn proc_status_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?
        .parse()?;
    Ok(kib / 1024.0)
}

/// `utime + stime` of `pid` in seconds.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc/pid/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime field 15.
    let utime: f64 = fields[11].parse()?;
    let stime: f64 = fields[12].parse()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((utime + stime) / ticks)
}

/// A controller process of a bench; SIGTERM (then SIGKILL after 20 s) on drop.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Which controller a bench side runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Kcm,
    Vapcheck,
}

/// A value of the control plane instance's `instance.env` (written by e2e/cluster/up).
pub fn instance_env(kubeconfig: &Path, key: &str) -> anyhow::Result<String> {
    let env = kubeconfig
        .parent()
        .context("kubeconfig has no parent")?
        .join("instance.env");
    let text = std::fs::read_to_string(&env).with_context(|| env.display().to_string())?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_owned)
        .with_context(|| format!("{key} not in {}", env.display()))
}

/// Starts `side` against the control plane of `kubeconfig`, logging to `log`: kube-controller-
/// manager with only the ValidatingAdmissionPolicy status controller, or `vapcheck controller`
/// (`VAPCHECK_BENCH_BIN`, behind `VAPCHECK_BENCH_WRAPPER` if set).
pub fn start(side: Side, kubeconfig: &Path, log: &Path) -> anyhow::Result<Killed> {
    if side == Side::Vapcheck {
        return start_vapcheck(kubeconfig, log, &[], "warn");
    }
    let instance = kubeconfig.parent().context("kubeconfig has no parent")?;
    let file = std::fs::File::create(log).with_context(|| log.display().to_string())?;
    let bin = PathBuf::from(instance_env(kubeconfig, "BIN_DIR")?).join("kube-controller-manager");
    // The flags of e2e/cluster/up --with-upstream-controller, serving nothing.
    let child = Command::new(&bin)
        .arg(format!(
            "--kubeconfig={}",
            instance.join("kcm.kubeconfig").display()
        ))
        .args([
            "--controllers=validatingadmissionpolicy-status-controller",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--profiling=false",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    Ok(Killed(child))
}

/// Starts `vapcheck controller` (`VAPCHECK_BENCH_BIN`, behind `VAPCHECK_BENCH_WRAPPER` if set)
/// against the control plane of `kubeconfig` with `RUST_LOG=rust_log` and the flags `extra`,
/// serving metrics and health on free loopback ports, logging to `log`.
pub fn start_vapcheck(
    kubeconfig: &Path,
    log: &Path,
    extra: &[&str],
    rust_log: &str,
) -> anyhow::Result<Killed> {
    let file = std::fs::File::create(log).with_context(|| log.display().to_string())?;
    let bin = std::env::var_os("VAPCHECK_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_vapcheck")));
    let wrapper = std::env::var("VAPCHECK_BENCH_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut command = match words.next() {
        Some(first) => {
            let mut c = Command::new(first);
            c.args(words).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let child = command
        .args([
            "controller",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", rust_log)
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    Ok(Killed(child))
}

/// Which sides a side-by-side bench runs, from `VAPCHECK_BENCH_SIDES` (`both`, the default,
/// `kcm` or `vapcheck`): (kube-controller-manager, vapcheck).
pub fn sides() -> anyhow::Result<(bool, bool)> {
    let sides = std::env::var("VAPCHECK_BENCH_SIDES").unwrap_or_else(|_| "both".to_owned());
    Ok(match sides.as_str() {
        "both" => (true, true),
        "kcm" => (true, false),
        "vapcheck" => (false, true),
        other => bail!("VAPCHECK_BENCH_SIDES must be both, kcm or vapcheck, got {other:?}"),
    })
}
