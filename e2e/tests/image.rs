//! The container image run for real (issue 30): the Dockerfile's `scratch` target, built with
//! buildah by scripts/build-image (nothing pulled; `make test` passes the OCI layout it wrote as
//! `VAPCHECK_IMAGE_OCI`), is unpacked with umoci and its binary is run from the image's own root
//! filesystem the way the chart's Deployment runs the pod:
//!
//! - the image's entry point with the Deployment's `args`, as the user of the image's config,
//!   which must be the Deployment's `runAsUser`/`runAsGroup` (65532), no supplementary groups, no
//!   capabilities, `no_new_privs`;
//! - in its own mount namespace, chrooted into the unpacked root filesystem, mounted read-only
//!   (`readOnlyRootFilesystem: true`), with what a container runtime and the kubelet add: the
//!   ServiceAccount token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount,
//!   the chart's ConfigMap at /etc/vapcheck (both read-only), an emptyDir-like tmpfs at /tmp,
//!   /proc and a /dev with null, zero, random and urandom; the environment a pod gets
//!   (`KUBERNETES_SERVICE_HOST`/`PORT`, `POD_NAMESPACE`, `POD_NAME`, the image's `PATH`) and
//!   nothing else, so the client configuration is the in-cluster one;
//! - against this test binary's control plane with the chart's ServiceAccount and RBAC (the chart
//!   rendered with charts/vapcheck/ci/monitoring-values.yaml: secure, authorized metrics).
//!
//! Asserted: the image's config and files (exactly the expected ones; the binary static, the CA
//! bundle the build machine's); the process's identity and read-only root as the kernel reports
//! them; readiness; every sample of config/samples converged (stored status equal to a fresh
//! `vapcheck check` of it, written by the field manager `vapcheck`); `/metrics` over HTTPS
//! answering 401 without a token, 403 to a ServiceAccount without the chart's metrics-reader
//! ClusterRole and 200 with the samples' counts to one bound to it; no error or 403 in the log; a
//! clean exit on SIGTERM. The image's size and the start times are printed (docs/image.md).
//!
//! Needs root (a mount namespace, chroot, setuid), and unshare, setpriv, mount, chroot, base64
//! and umoci; under CI a missing one fails the test, elsewhere the test says so and passes.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use kube::{Api, Client};
use serde_json::Value;
use support::scrape::https_get_metrics;
use support::{apply_yaml, comparable, fresh_check, repo_root, shared_cluster, wait_for};

const NAMESPACE: &str = "vapcheck-system";
const SCRAPER_NAMESPACE: &str = "vapcheck-e2e-image-scraper";
const POD_NAME: &str = "vapcheck-image-e2e-0";
const DEADLINE: Duration = Duration::from_secs(90);
const SERVICE_ACCOUNT_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

/// Runs in a new mount namespace (`unshare --mount`, private propagation) as root: mounts what a
/// container runtime and the kubelet mount, makes the root filesystem read-only, then runs the
/// command as `uid:gid` inside it. `$1` root, `$2` ServiceAccount folder, `$3` configuration
/// folder, `$4` uid, `$5` gid; the rest is the command. Everything ends with the process.
const RUN_IN_ROOTFS: &str = r#"
root=$1 secrets=$2 config=$3 uid=$4 gid=$5
shift 5
mount --bind "$root" "$root"
mount --bind "$secrets" "$root/var/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$root/var/run/secrets/kubernetes.io/serviceaccount"
mount --bind "$config" "$root/etc/vapcheck"
mount -o remount,bind,ro "$root/etc/vapcheck"
mount -t tmpfs -o size=16m,mode=1777,nosuid,nodev tmpfs "$root/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o size=64k,mode=755,nosuid tmpfs "$root/dev"
mknod -m 666 "$root/dev/null" c 1 3
mknod -m 666 "$root/dev/zero" c 1 5
mknod -m 666 "$root/dev/random" c 1 8
mknod -m 666 "$root/dev/urandom" c 1 9
mount -o remount,bind,ro "$root"
exec setpriv --no-new-privs chroot --userspec="$uid:$gid" --groups="$gid" "$root" "$@"
"#;

fn under_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Whether `program` is an executable on PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    })
}

/// What this test needs and does not have.
fn missing_prerequisites() -> Vec<String> {
    let mut missing = Vec::new();
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (a mount namespace, chroot and setuid to 65532)".to_owned());
    }
    for program in [
        "unshare", "setpriv", "mount", "mknod", "chroot", "base64", "umoci",
    ] {
        if !on_path(program) {
            missing.push(format!("{program} on PATH"));
        }
    }
    missing
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .with_context(|| format!("the chart rendered no {kind} {name}"))
}

/// A blob of an OCI image layout, parsed as JSON.
fn blob_json(oci: &Path, descriptor: &Value) -> anyhow::Result<Value> {
    let digest = descriptor["digest"]
        .as_str()
        .context("descriptor without digest")?;
    let hex = digest
        .strip_prefix("sha256:")
        .with_context(|| format!("digest {digest}"))?;
    let path = oci.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
    ensure!(
        Some(bytes.len() as u64) == descriptor["size"].as_u64(),
        "{digest}: size differs from its descriptor"
    );
    Ok(serde_json::from_slice(&bytes)?)
}

/// Whether the ELF file at `path` names a program interpreter (a dynamic loader): false for a
/// static executable. ELF64 little-endian only (x86_64).
fn has_interpreter(path: &Path) -> anyhow::Result<bool> {
    let elf = std::fs::read(path)?;
    ensure!(
        elf.len() > 64 && elf[..4] == *b"\x7fELF" && elf[4] == 2 && elf[5] == 1,
        "{} is not an ELF64 little-endian file",
        path.display()
    );
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into()?) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    Ok((0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        elf.get(o..o + 4)
            .is_some_and(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]) == PT_INTERP)
    }))
}

/// Every path under `root` (relative, `/` for folders) and the total size of its files.
fn tree(root: &Path) -> anyhow::Result<(BTreeSet<String>, u64)> {
    let mut paths = BTreeSet::new();
    let mut bytes = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let relative = path.strip_prefix(root)?.display().to_string();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                paths.insert(format!("{relative}/"));
                stack.push(path);
            } else {
                bytes += entry.metadata()?.len();
                paths.insert(relative);
            }
        }
    }
    Ok((paths, bytes))
}

/// A TokenRequest token (one hour) of the ServiceAccount `namespace/name`.
async fn token(client: &Client, namespace: &str, name: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    accounts
        .create_token_request(
            name,
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("TokenRequest for {namespace}/{name}"))?
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("TokenRequest returned no token")
}

/// The API server's address and CA certificate (PEM) from the admin kubeconfig.
fn server_and_ca(kubeconfig: &Path) -> anyhow::Result<(String, u16, Vec<u8>)> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let current = kubeconfig.current_context.clone().context("no context")?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .context("current context not found")?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .context("cluster not found")?;
    let server: http::Uri = cluster.server.context("no server")?.parse()?;
    let host = server.host().context("server has no host")?.to_owned();
    let port = server.port_u16().unwrap_or(443);
    let data = cluster
        .certificate_authority_data
        .context("the admin kubeconfig has no certificate-authority-data")?;
    let mut decode = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    decode
        .stdin
        .take()
        .context("no stdin")?
        .write_all(data.as_bytes())?;
    let out = decode.wait_with_output()?;
    ensure!(out.status.success(), "base64 -d of the CA failed");
    Ok((host, port, out.stdout))
}

/// The value of the sample `name{labels}` (labels in any order) of a text exposition.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            if metric != name {
                return None;
            }
            let got: BTreeSet<(String, String)> = rest
                .strip_suffix('}')?
                .split("\",")
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once("=\""))
                .map(|(k, v)| (k.to_owned(), v.trim_end_matches('"').to_owned()))
                .collect();
            let want: BTreeSet<(String, String)> = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            (got == want).then(|| value.parse().ok()).flatten()
        })
}

/// A field of /proc/PID/status (`Uid`, `CapEff`, ...), whitespace-normalised.
fn proc_status(pid: u32, field: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .with_context(|| format!("/proc/{pid}/status has no {field}"))
}

/// The controller: the unshare/chroot chain, which `exec`s into vapcheck (same pid); killed on
/// drop if still running.
struct Pod {
    child: Child,
    log: PathBuf,
}

impl Pod {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn logged_addr(&self, key: &str) -> Option<String> {
        self.log_text()
            .lines()
            .find(|l| l.contains("serving metrics and health probes"))
            .and_then(|l| l.split(&format!("{key}=")).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Plain HTTP GET (health probes): status code and body.
fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    support::scrape::parse_response(&text)
}

async fn image_rootfs_runs_as_65532_read_only_with_the_charts_rbac() -> anyhow::Result<()> {
    let missing = missing_prerequisites();
    if !missing.is_empty() {
        let message = format!(
            "the image test needs {} (docs/image.md)",
            missing.join(", ")
        );
        ensure!(!under_ci(), "{message}");
        eprintln!("e2e: SKIPPED outside CI: {message}");
        return Ok(());
    }

    // 1. The image: its OCI layout, config and single layer.
    let oci = match std::env::var_os("VAPCHECK_IMAGE_OCI") {
        Some(path) => PathBuf::from(path),
        None => support::script_output("scripts/build-image")?,
    };
    let version = env!("CARGO_PKG_VERSION");
    let index: Value = serde_json::from_slice(&std::fs::read(oci.join("index.json"))?)?;
    let manifests = index["manifests"]
        .as_array()
        .context("index without manifests")?;
    ensure!(
        manifests.len() == 1,
        "{} manifests in {}",
        manifests.len(),
        oci.display()
    );
    ensure!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"] == version,
        "the image is not tagged {version}: {}",
        manifests[0]
    );
    let manifest = blob_json(&oci, &manifests[0])?;
    let image_config = blob_json(&oci, &manifest["config"])?;
    let config = &image_config["config"];
    ensure!(
        config["User"] == "65532:65532",
        "image user {}",
        config["User"]
    );
    ensure!(
        config["Entrypoint"] == serde_json::json!(["/usr/local/bin/vapcheck"])
            && config["Cmd"] == serde_json::json!(["controller"]),
        "entry point {} command {}",
        config["Entrypoint"],
        config["Cmd"]
    );
    ensure!(
        image_config["architecture"] == "amd64" && image_config["os"] == "linux",
        "platform {} {}",
        image_config["os"],
        image_config["architecture"]
    );
    let layers = manifest["layers"].as_array().context("no layers")?;
    ensure!(
        layers.len() == 1,
        "{} layers, expected the one COPY",
        layers.len()
    );
    let compressed = layers[0]["size"].as_u64().context("layer size")?;

    // 2. Unpacked with umoci: exactly the expected files.
    let dir = std::env::temp_dir().join(format!("vapcheck-e2e-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let bundle = dir.join("bundle");
    let out = Command::new("umoci")
        .arg("unpack")
        .arg("--image")
        .arg(format!("{}:{version}", oci.display()))
        .arg(&bundle)
        .output()?;
    ensure!(
        out.status.success(),
        "umoci unpack failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rootfs = bundle.join("rootfs");
    let (files, unpacked) = tree(&rootfs)?;
    let expected: BTreeSet<String> = [
        "etc/",
        "etc/group",
        "etc/passwd",
        "etc/ssl/",
        "etc/ssl/certs/",
        "etc/ssl/certs/ca-certificates.crt",
        "tmp/",
        "usr/",
        "usr/local/",
        "usr/local/bin/",
        "usr/local/bin/vapcheck",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    ensure!(files == expected, "the image's files: {files:#?}");
    let binary = rootfs.join("usr/local/bin/vapcheck");
    ensure!(
        !has_interpreter(&binary)?,
        "the image's binary is not static"
    );
    ensure!(
        std::fs::read(rootfs.join("etc/ssl/certs/ca-certificates.crt"))?
            == std::fs::read("/etc/ssl/certs/ca-certificates.crt")?,
        "the image's CA bundle is not this machine's /etc/ssl/certs/ca-certificates.crt"
    );
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd"))?;
    ensure!(
        passwd
            .lines()
            .any(|l| l == "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"),
        "/etc/passwd: {passwd}"
    );
    // umoci's runtime configuration carries the image's user and command.
    let runtime: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json"))?)?;
    ensure!(
        runtime["process"]["user"]["uid"] == 65532 && runtime["process"]["user"]["gid"] == 65532,
        "umoci's process user {}",
        runtime["process"]["user"]
    );
    let binary_bytes = std::fs::metadata(&binary)?.len();
    eprintln!(
        "e2e: image oci:{}:{version}: layer {compressed} bytes compressed, {unpacked} bytes unpacked (binary {binary_bytes})",
        oci.display()
    );

    // 3. The chart (monitoring case) minus the Deployment and the monitoring.coreos.com kinds;
    // a scraper bound to the metrics-reader ClusterRole and one that is not.
    let objects = support::helm_template(
        "vapcheck",
        NAMESPACE,
        &[
            "--values",
            &repo_root()
                .join("charts/vapcheck/ci/monitoring-values.yaml")
                .to_string_lossy(),
        ],
    )?;
    let cluster = shared_cluster()?;
    let admin = cluster.client().await?;
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if !matches!(kind, "Deployment" | "ServiceMonitor" | "PrometheusRule") {
            apply_yaml(&admin, &serde_json::to_string(object)?).await?;
        }
    }
    let reader_role = find(&objects, "ClusterRole", "vapcheck-metrics-reader")?;
    ensure!(
        reader_role["rules"]
            == serde_json::json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
        "metrics-reader rules {}",
        reader_role["rules"]
    );
    apply_yaml(
        &admin,
        &format!(
            r#"
apiVersion: v1
kind: Namespace
metadata:
  name: {SCRAPER_NAMESPACE}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: reader
  namespace: {SCRAPER_NAMESPACE}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: not-reader
  namespace: {SCRAPER_NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vapcheck-e2e-image-metrics-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vapcheck-metrics-reader
subjects:
  - kind: ServiceAccount
    name: reader
    namespace: {SCRAPER_NAMESPACE}
"#
        ),
    )
    .await?;

    // The pod as the Deployment describes it.
    let deployment = find(&objects, "Deployment", "vapcheck")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    ensure!(
        pod["securityContext"]["runAsUser"] == 65532
            && pod["securityContext"]["runAsGroup"] == 65532
            && pod["serviceAccountName"] == "vapcheck"
            && container["securityContext"]["readOnlyRootFilesystem"] == true,
        "the Deployment no longer runs as this test does: {pod}"
    );
    let mounts: BTreeMap<&str, &str> = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m["name"].as_str()?, m["mountPath"].as_str()?)))
        .collect();
    ensure!(
        mounts == BTreeMap::from([("config", "/etc/vapcheck"), ("tmp", "/tmp")]),
        "the Deployment's mounts {mounts:?}"
    );
    let args: Vec<String> = container["args"]
        .as_array()
        .context("the container has no args")?
        .iter()
        .map(|a| a.as_str().map(str::to_owned).context("arg is not a string"))
        .collect::<anyhow::Result<_>>()?;
    ensure!(
        args == ["controller", "--config=/etc/vapcheck/vapcheck.yaml"],
        "args {args:?}"
    );
    let config_text = find(&objects, "ConfigMap", "vapcheck-config")?["data"]["vapcheck.yaml"]
        .as_str()
        .context("no vapcheck.yaml in the ConfigMap")?;

    // What the kubelet mounts: the ServiceAccount's token, the cluster CA, the namespace; the
    // ConfigMap. Mount points are created in the unpacked root, as a runtime does in its
    // writable layer; the root itself is mounted read-only below.
    let (host, port, ca) = server_and_ca(cluster.kubeconfig())?;
    let secrets = dir.join("serviceaccount");
    std::fs::create_dir_all(&secrets)?;
    std::fs::write(
        secrets.join("token"),
        token(&admin, NAMESPACE, "vapcheck").await?,
    )?;
    std::fs::write(secrets.join("ca.crt"), &ca)?;
    std::fs::write(secrets.join("namespace"), NAMESPACE)?;
    let config_dir = dir.join("config");
    std::fs::create_dir_all(&config_dir)?;
    std::fs::write(config_dir.join("vapcheck.yaml"), config_text)?;
    for mount_point in [SERVICE_ACCOUNT_DIR, "etc/vapcheck", "proc", "dev"] {
        std::fs::create_dir_all(rootfs.join(mount_point))?;
    }
    let path_env = config["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(|e| e.strip_prefix("PATH="))
        .context("the image sets no PATH")?;

    // 4. Run: the image's entry point, the Deployment's args, loopback ports instead of the
    // container ports (the control plane's host network is shared).
    let (uid, gid) = ("65532", "65532");
    let log = dir.join("vapcheck.log");
    let started = Instant::now();
    let child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-euc",
            RUN_IN_ROOTFS,
            "sh",
        ])
        .arg(&rootfs)
        .arg(&secrets)
        .arg(&config_dir)
        .args([uid, gid, "/usr/local/bin/vapcheck"])
        .args(&args)
        .args([
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
        ])
        .env_clear()
        .env("PATH", path_env)
        .env("KUBERNETES_SERVICE_HOST", &host)
        .env("KUBERNETES_SERVICE_PORT", port.to_string())
        .env("POD_NAMESPACE", NAMESPACE)
        .env("POD_NAME", POD_NAME)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting unshare")?;
    let mut pod = Pod { child, log };
    let pid = pod.child.id();
    eprintln!(
        "e2e: the image's vapcheck (pid {pid}) logs to {}",
        pod.log.display()
    );
    let health_addr = loop {
        if let Some(status) = pod.child.try_wait()? {
            bail!("vapcheck exited early ({status}):\n{}", pod.log_text());
        }
        if let Some(addr) = pod.logged_addr("health") {
            break addr;
        }
        ensure!(
            started.elapsed() < DEADLINE,
            "vapcheck did not start serving within {DEADLINE:?}:\n{}",
            pod.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let serving = started.elapsed();
    let metrics_addr = pod
        .logged_addr("metrics")
        .context("no metrics address logged")?;
    wait_for("/readyz 200", DEADLINE, || {
        let got = http_get(&health_addr, "/readyz");
        async move { Ok((got?.0 == 200).then_some(())) }
    })
    .await
    .with_context(|| pod.log_text())?;
    let ready = started.elapsed();
    eprintln!(
        "e2e: the image's vapcheck serves probes {:.0} ms and is ready {:.0} ms after the start",
        serving.as_secs_f64() * 1000.0,
        ready.as_secs_f64() * 1000.0
    );

    // Who and where it runs, as the kernel says.
    ensure!(
        std::fs::read_link(format!("/proc/{pid}/root"))? == rootfs,
        "the process's root is not the unpacked root filesystem"
    );
    ensure!(
        std::fs::read_link(format!("/proc/{pid}/exe"))? == binary,
        "the process does not run the image's binary"
    );
    for (field, want) in [
        ("Uid", "65532 65532 65532 65532"),
        ("Gid", "65532 65532 65532 65532"),
        ("Groups", "65532"),
        ("CapInh", "0000000000000000"),
        ("CapPrm", "0000000000000000"),
        ("CapEff", "0000000000000000"),
        ("CapAmb", "0000000000000000"),
        ("NoNewPrivs", "1"),
    ] {
        let got = proc_status(pid, field)?;
        ensure!(
            got == want,
            "/proc/{pid}/status {field}: {got:?}, expected {want:?}"
        );
    }
    // mountinfo fields: id parent major:minor root mount-point options ...
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    let options_at = |mount_point: &str| {
        mountinfo
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .rfind(|f| f.len() > 5 && f[4] == mount_point)
            .map(|f| f[5].split(',').map(str::to_owned).collect::<BTreeSet<_>>())
    };
    for (mount_point, writable) in [
        ("/", false),
        ("/var/run/secrets/kubernetes.io/serviceaccount", false),
        ("/etc/vapcheck", false),
        ("/tmp", true),
    ] {
        let options = options_at(mount_point)
            .with_context(|| format!("{mount_point} is not a mount point:\n{mountinfo}"))?;
        let want = if writable { "rw" } else { "ro" };
        ensure!(
            options.contains(want),
            "{mount_point} mounted {options:?}, expected {want}"
        );
    }

    // 5. The samples converge: each stored status equals a fresh check, written by vapcheck.
    let mut names = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("config/samples"))? {
        let text = std::fs::read_to_string(entry?.path())?;
        for applied in apply_yaml(&admin, &text).await? {
            names.push(applied.metadata.name.context("no name")?);
        }
    }
    names.sort();
    ensure!(
        names
            == [
                "deploy-replica-policy.example.com",
                "no-nodeport-services.example.com",
                "require-owner-label.example.com",
            ],
        "samples {names:?}"
    );
    let policies_api: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    let mut specs = Vec::new();
    for name in &names {
        specs.push(policies_api.get(name).await?);
    }
    // What vapcheck computes for them now (the test's own build, `vapcheck check -o json` over
    // the same cluster); the statuses must come to equal it.
    let fresh = fresh_check(cluster.kubeconfig(), &specs)?;
    ensure!(fresh.len() == names.len(), "fresh check: {fresh:#?}");
    let policies = wait_for("the samples' statuses from vapcheck", DEADLINE, || async {
        let mut policies = Vec::new();
        for name in &names {
            let policy = policies_api.get(name).await?;
            let status = policy.status.clone().unwrap_or_default();
            let current = status.observed_generation == policy.metadata.generation
                && status.conditions.iter().flatten().any(|c| {
                    c.type_ == "ExpressionsValid"
                        && c.observed_generation == policy.metadata.generation
                });
            let by_vapcheck = policy.metadata.managed_fields.iter().flatten().any(|f| {
                f.subresource.as_deref() == Some("status")
                    && f.manager.as_deref() == Some("vapcheck")
            });
            let stored = comparable(&serde_json::to_value(&status)?);
            ensure!(
                current && by_vapcheck && Some(&stored) == fresh.get(name),
                "{name}: stored (current {current}, by vapcheck {by_vapcheck}) {stored:#} vs a fresh check {:#}",
                fresh.get(name).unwrap_or(&Value::Null)
            );
            policies.push(policy);
        }
        Ok(Some(policies))
    })
    .await
    .with_context(|| pod.log_text())?;
    let mut summary = BTreeMap::new();
    for policy in &policies {
        let name = policy.metadata.name.clone().unwrap_or_default();
        let status = policy.status.clone().unwrap_or_default();
        let warnings = status
            .type_checking
            .and_then(|t| t.expression_warnings)
            .map(|w| w.iter().map(|w| w.field_ref.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        let valid = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "ExpressionsValid")
            .map(|c| c.status.clone())
            .unwrap_or_default();
        summary.insert(name, (valid, warnings));
    }
    let want = |valid: &str, warnings: &[&str]| {
        (
            valid.to_owned(),
            warnings.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>(),
        )
    };
    let expected = BTreeMap::from([
        (
            "deploy-replica-policy.example.com".to_owned(),
            want("False", &["spec.validations[0].expression"]),
        ),
        (
            "no-nodeport-services.example.com".to_owned(),
            want("False", &["spec.validations[0].messageExpression"]),
        ),
        (
            "require-owner-label.example.com".to_owned(),
            want("True", &[]),
        ),
    ]);
    ensure!(summary == expected, "the samples' statuses: {summary:#?}");
    let converged = started.elapsed();
    eprintln!(
        "e2e: the samples converged {:.1} s after the start (peak RSS {}): {summary:?}",
        converged.as_secs_f64(),
        proc_status(pid, "VmHWM")?
    );

    // 6. /metrics over HTTPS: only for a token allowed to get /metrics.
    let reader = token(&admin, SCRAPER_NAMESPACE, "reader").await?;
    let not_reader = token(&admin, SCRAPER_NAMESPACE, "not-reader").await?;
    let (code, body) = https_get_metrics(&metrics_addr, None)?;
    ensure!(code == 401, "no token: {code} {body}");
    let (code, body) = https_get_metrics(&metrics_addr, Some(&not_reader))?;
    ensure!(
        code == 403,
        "token without the metrics-reader role: {code} {body}"
    );
    let scrape = wait_for("the samples' counts in /metrics", DEADLINE, || {
        let got = https_get_metrics(&metrics_addr, Some(&reader));
        async move {
            let (code, body) = got?;
            ensure!(
                code == 200,
                "token with the metrics-reader role: {code} {body}"
            );
            let count = |state| {
                sample(
                    &body,
                    "vapcheck_policies",
                    &[("kind", "ValidatingAdmissionPolicy"), ("state", state)],
                )
            };
            Ok((count("warnings") == Some(2.0) && count("clean") == Some(1.0)).then_some(body))
        }
    })
    .await
    .with_context(|| pod.log_text())?;
    for (name, labels, want) in [
        (
            "vapcheck_policies",
            &[("kind", "ValidatingAdmissionPolicy"), ("state", "partial")][..],
            0.0,
        ),
        (
            "vapcheck_policies",
            &[("kind", "ValidatingAdmissionPolicy"), ("state", "failed")][..],
            0.0,
        ),
        (
            "leader_election_master_status",
            &[("name", "vapcheck")][..],
            1.0,
        ),
        (
            "vapcheck_policy_expression_warnings",
            &[
                ("kind", "ValidatingAdmissionPolicy"),
                ("policy", "deploy-replica-policy.example.com"),
            ][..],
            1.0,
        ),
        (
            "vapcheck_policy_expression_warnings",
            &[
                ("kind", "ValidatingAdmissionPolicy"),
                ("policy", "no-nodeport-services.example.com"),
            ][..],
            1.0,
        ),
    ] {
        let got = sample(&scrape, name, labels);
        ensure!(
            got == Some(want),
            "{name}{labels:?} = {got:?}, expected {want}"
        );
    }
    // Process metrics come from /proc/self: present in the root filesystem's /proc.
    let start_time = sample(&scrape, "process_start_time_seconds", &[])
        .context("no process_start_time_seconds")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    ensure!(
        (now - 600.0..=now + 1.0).contains(&start_time),
        "process_start_time_seconds {start_time} vs now {now}"
    );
    let forbidden_fetches = sample(
        &scrape,
        "vapcheck_schema_fetches_total",
        &[("result", "forbidden")],
    );
    ensure!(
        forbidden_fetches.unwrap_or(0.0) == 0.0,
        "forbidden schema fetches: {forbidden_fetches:?}"
    );

    // 7. SIGTERM: exit 0, nothing wrong in the log.
    // SAFETY: kill(2) on our own child's pid.
    ensure!(
        unsafe { libc::kill(i32::try_from(pid)?, libc::SIGTERM) } == 0,
        "kill failed"
    );
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = pod.child.try_wait()? {
            break status;
        }
        ensure!(
            stopping.elapsed() < Duration::from_secs(10),
            "vapcheck did not exit within 10 s of SIGTERM:\n{}",
            pod.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = pod.log_text();
    ensure!(status.success(), "exit {status}:\n{log}");
    ensure!(
        !log.contains("ERROR") && !log.contains("Forbidden") && !log.contains("forbidden"),
        "vapcheck logged errors:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio image_rootfs_runs_as_65532_read_only_with_the_charts_rbac,
}
