//! Tests of `e2e/cluster/up` and `down` themselves: a bad set-up must fail within a deadline,
//! with a message that says what is wrong, and leave no process behind.
//!
//! They use the cached binaries (building them first if needed, through `e2e/cluster/build`) and
//! keep their instances in a temporary `VAPCHECK_CACHE`, so nothing of them can outlive the test
//! unnoticed.

use crate::support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

fn script(name: &str) -> PathBuf {
    support::repo_root().join("e2e/cluster").join(name)
}

/// The folder with the control-plane binaries, built once per test binary.
fn bin_dir() -> anyhow::Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let output = Command::new(script("build"))
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|err| format!("running e2e/cluster/build: {err}"))?;
        if !output.status.success() {
            return Err(format!("e2e/cluster/build failed: {}", output.status));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let dir = stdout.lines().last().unwrap_or_default().trim();
        if dir.is_empty() {
            return Err("e2e/cluster/build printed no folder".to_owned());
        }
        Ok(PathBuf::from(dir))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// Runs `up` with `args` and `env`, instances in `cache`; fails if it takes longer than `limit`.
fn run_up(
    cache: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> anyhow::Result<Output> {
    run_up_with_bin(cache, &bin_dir()?, args, env, limit)
}

/// [`run_up`] with the binaries taken from `bin`.
fn run_up_with_bin(
    cache: &Path,
    bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> anyhow::Result<Output> {
    let mut command = Command::new(script("up"));
    command
        .args(args)
        // Stop the instance if this test binary dies before `down` ran.
        .args(["--owner-pid", &std::process::id().to_string()])
        .env("VAPCHECK_CACHE", cache)
        .env("VAPCHECK_BIN_DIR", bin)
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let started = Instant::now();
    let output = command.output().context("running e2e/cluster/up")?;
    let took = started.elapsed();
    eprintln!(
        "up {args:?} took {took:.1?}, exit {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    if took > limit {
        bail!("e2e/cluster/up took {took:?}, more than {limit:?}");
    }
    Ok(output)
}

/// Processes whose command line mentions `dir` (every component names its instance folder).
fn processes_under(dir: &Path) -> anyhow::Result<Vec<String>> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").context("reading /proc")? {
        let Ok(entry) = entry else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    Ok(found)
}

/// Runs `down` for every instance under a cache folder when dropped, so that a failing test
/// stops what it started before its temporary folder goes away.
struct DownAll(PathBuf);

impl Drop for DownAll {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.0.join("instances")) else {
            return;
        };
        for entry in entries.flatten() {
            let kubeconfig = entry.path().join("admin.kubeconfig");
            if entry.path().join("pids").exists() && !entry.path().join("stopped").exists() {
                let _ = Command::new(script("down"))
                    .args(["--quiet"])
                    .arg(&kubeconfig)
                    .status();
            }
        }
    }
}

fn a_port_in_use_is_reported_before_anything_starts() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let _down = DownAll(cache.path().to_owned());
    let busy = TcpListener::bind("127.0.0.1:0")?;
    let port = busy.local_addr()?.port().to_string();

    let output = run_up(
        cache.path(),
        &["--apiserver-port", &port],
        &[],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "port 127.0.0.1:{port} (wanted for apiserver) is already in use"
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no kubeconfig may be printed");
    assert_eq!(processes_under(cache.path())?, Vec::<String>::new());
    Ok(())
}

fn a_missing_go_is_reported_when_a_build_is_needed() -> anyhow::Result<()> {
    // An empty cache and no bin folder override force a build. PATH keeps its folders, but a
    // folder that holds `go` is replaced by a copy made of symlinks to everything else in it.
    let cache = tempfile::tempdir()?;
    let shadows = tempfile::tempdir()?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = Vec::new();
    for (i, dir) in std::env::split_paths(&path).enumerate() {
        if !dir.join("go").exists() {
            dirs.push(dir);
            continue;
        }
        let shadow = shadows.path().join(i.to_string());
        std::fs::create_dir(&shadow)?;
        for entry in std::fs::read_dir(&dir)?.flatten() {
            if entry.file_name() != "go" {
                std::os::unix::fs::symlink(entry.path(), shadow.join(entry.file_name()))?;
            }
        }
        dirs.push(shadow);
    }
    let without_go = std::env::join_paths(dirs)?;

    let started = Instant::now();
    let output = Command::new(script("up"))
        .env("VAPCHECK_CACHE", cache.path())
        .env_remove("VAPCHECK_BIN_DIR")
        .env("PATH", &without_go)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("error: 'go' was not found on PATH"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    Ok(())
}

fn an_api_server_that_never_gets_ready_is_stopped_and_its_log_shown() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let _down = DownAll(cache.path().to_owned());
    // The real etcd and clustertool, and a kube-apiserver that runs but never answers.
    let bin = tempfile::tempdir()?;
    let real = bin_dir()?;
    for name in ["etcd", "clustertool", "kube-controller-manager"] {
        std::os::unix::fs::symlink(real.join(name), bin.path().join(name))?;
    }
    let fake = bin.path().join("kube-apiserver");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'fake kube-apiserver: never ready'\nwhile :; do sleep 1; done\n",
    )?;
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;

    let output = run_up_with_bin(
        cache.path(),
        bin.path(),
        &["--timeout", "5"],
        &[],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("error: kube-apiserver did not become ready"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kube-apiserver not ready within 5s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fake kube-apiserver: never ready"),
        "the log tail is missing: {stderr}"
    );
    assert!(output.stdout.is_empty(), "no kubeconfig may be printed");
    assert_eq!(processes_under(cache.path())?, Vec::<String>::new());
    Ok(())
}

fn an_api_server_that_exits_at_start_is_reported_with_its_log() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let _down = DownAll(cache.path().to_owned());
    let output = run_up(
        cache.path(),
        &[],
        &[("VAPCHECK_APISERVER_EXTRA_ARGS", "--no-such-flag")],
        Duration::from_secs(60),
    )?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("kube-apiserver exited before it was ready"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown flag: --no-such-flag"),
        "the log tail is missing: {stderr}"
    );
    assert!(output.stdout.is_empty(), "no kubeconfig may be printed");
    assert_eq!(processes_under(cache.path())?, Vec::<String>::new());
    Ok(())
}

fn two_instances_run_side_by_side_and_down_stops_each() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let _down = DownAll(cache.path().to_owned());
    let mut kubeconfigs = Vec::new();
    for _ in 0..2 {
        let output = run_up(cache.path(), &[], &[], Duration::from_secs(150))?;
        if !output.status.success() {
            bail!("up failed: {}", String::from_utf8_lossy(&output.stderr));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let kubeconfig = stdout
            .lines()
            .last()
            .context("no kubeconfig path")?
            .trim()
            .to_owned();
        kubeconfigs.push(kubeconfig);
    }
    let servers: Vec<String> = kubeconfigs
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines()
                .find_map(|line| line.trim().strip_prefix("server: ").map(str::to_owned))
                .unwrap_or_default()
        })
        .collect();
    assert_ne!(servers[0], "");
    assert_ne!(
        servers[0], servers[1],
        "both instances got the same address"
    );
    assert!(!processes_under(cache.path())?.is_empty());

    for kubeconfig in &kubeconfigs {
        let status = Command::new(script("down")).arg(kubeconfig).status()?;
        assert!(status.success());
    }
    assert_eq!(processes_under(cache.path())?, Vec::<String>::new());
    Ok(())
}

fn apiserver_pid(instance: &Path) -> anyhow::Result<u32> {
    let pids = std::fs::read_to_string(instance.join("pids"))?;
    pids.lines()
        .find_map(|l| l.strip_prefix("kube-apiserver "))
        .and_then(|p| p.trim().parse().ok())
        .context("no kube-apiserver in pids")
}

/// A live (not zombie) process.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn restart_apiserver_kills_and_restarts_it_on_the_same_port_and_etcd() -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};

    let cache = tempfile::tempdir()?;
    let _down = DownAll(cache.path().to_owned());
    let output = run_up(cache.path(), &[], &[], Duration::from_secs(150))?;
    if !output.status.success() {
        bail!("up failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let kubeconfig = PathBuf::from(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .context("no kubeconfig path")?
            .trim(),
    );
    let instance = kubeconfig.parent().context("instance folder")?.to_owned();
    let cluster = support::Cluster::existing(&kubeconfig);
    let runtime = tokio::runtime::Runtime::new()?;
    let maps = || async {
        let client = cluster.client().await?;
        anyhow::Ok(Api::<ConfigMap>::namespaced(client, "default"))
    };
    let mut map = ConfigMap::default();
    map.metadata.name = Some("survives-restart".to_owned());
    runtime.block_on(async {
        anyhow::Ok(maps().await?.create(&PostParams::default(), &map).await?)
    })?;
    let old = apiserver_pid(&instance)?;
    assert!(running(old));

    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let restarted = Command::new(script("restart"))
        .args(["--down", "1"])
        .arg(&kubeconfig)
        .env("VAPCHECK_CACHE", cache.path())
        .env("VAPCHECK_BIN_DIR", bin_dir()?)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&restarted.stderr);
    assert!(restarted.status.success(), "{stderr}");
    assert!(stderr.contains("with SIGKILL"), "{stderr}");
    let ready_ms: u128 = String::from_utf8_lossy(&restarted.stdout)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .context("no ready time printed")?;
    // Down for at least the second asked for.
    assert!(
        ready_ms >= before.as_millis() + 1000,
        "{ready_ms} vs {before:?}"
    );
    let new = apiserver_pid(&instance)?;
    assert_ne!(old, new);
    assert!(!running(old), "the old kube-apiserver still runs");
    assert!(running(new));
    // Same address (the kubeconfig is unchanged) and same etcd: the object is still there.
    let got =
        runtime.block_on(async { anyhow::Ok(maps().await?.get("survives-restart").await?) })?;
    assert_eq!(got.metadata.name.as_deref(), Some("survives-restart"));

    let status = Command::new(script("down")).arg(&kubeconfig).status()?;
    assert!(status.success());
    assert_eq!(processes_under(cache.path())?, Vec::<String>::new());
    Ok(())
}

/// Unit tests of the harness in e2e/support (kept here so that they run once, not in every
/// e2e binary).
mod support_tests {
    use super::support::{parse_yaml_documents, wait_for};
    use anyhow::anyhow;
    use std::time::Duration;

    pub(super) fn yaml_documents_are_split_and_empty_ones_dropped() {
        let docs = parse_yaml_documents("a: 1\n---\n---\nb: [2]\n").expect("valid YAML");
        assert_eq!(
            docs,
            vec![serde_json::json!({"a": 1}), serde_json::json!({"b": [2]})]
        );
    }

    pub(super) fn bad_yaml_is_an_error() {
        assert!(parse_yaml_documents("a: [1\n").is_err());
    }

    pub(super) async fn wait_for_returns_the_first_value() {
        let mut calls = 0;
        let value = wait_for("three calls", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { Ok((n >= 3).then_some(n)) }
        })
        .await
        .expect("ready on the third call");
        assert_eq!(value, 3);
    }

    pub(super) async fn wait_for_times_out_with_the_last_error() {
        let err = wait_for::<(), _, _>("never", Duration::from_millis(300), || async {
            Err(anyhow!("still broken"))
        })
        .await
        .expect_err("must time out");
        let text = format!("{err:#}");
        assert!(text.contains("waiting for never"), "{text}");
        assert!(text.contains("still broken"), "{text}");
    }
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    sync a_port_in_use_is_reported_before_anything_starts,
    sync a_missing_go_is_reported_when_a_build_is_needed,
    sync an_api_server_that_never_gets_ready_is_stopped_and_its_log_shown,
    sync an_api_server_that_exits_at_start_is_reported_with_its_log,
    sync two_instances_run_side_by_side_and_down_stops_each,
    sync restart_apiserver_kills_and_restarts_it_on_the_same_port_and_etcd,
    sync support_tests::yaml_documents_are_split_and_empty_ones_dropped,
    sync support_tests::bad_yaml_is_an_error,
    tokio support_tests::wait_for_returns_the_first_value,
    tokio support_tests::wait_for_times_out_with_the_last_error,
}
