//! Acceptance test of the deployment (issue 8): `manifests/` minus the Deployment applied to a
//! real API server, then `vapcheck controller` run as the pod would run it — with a token of
//! the `vapcheck` ServiceAccount only, the shipped configuration file, `POD_NAMESPACE` — to
//! prove the RBAC is sufficient (it starts, gets ready, writes a policy's status) and not too
//! broad (what it must not do is forbidden), and that `/metrics` parses strictly and carries
//! the values an operator's dashboards and alerts read.
//!
//! One test on purpose: the metric values asserted (one policy with warnings) hold only while
//! nothing else creates policies in this test binary's cluster.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};
use support::{apply_yaml, parse_yaml_documents, repo_root, shared_cluster, wait_for};

const NAMESPACE: &str = "vapcheck-system";
const SERVICE_ACCOUNT: &str = "vapcheck";
/// The Lease name of the shipped configuration (`leaderElection.leaseName`).
const LEASE: &str = "vapcheck";
const POLICY: &str = "replicas-example.deployment.e2e.vapcheck.dev";
const DEADLINE: Duration = Duration::from_secs(60);

/// Upstream's warning for the documentation example, byte for byte with its final newline
/// (apiserver v0.37.1 pkg/admission/plugin/policy/validating/typechecking.go formats each
/// kind's issues as `"%v: %s\n"`; the controller e2e compares the text with the real one).
const REPLICAS_WARNING: &str = "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n";

/// What `kubectl kustomize manifests/` would render, minus the Deployment: the listed
/// resources with the kustomization's namespace and common labels, and the generated ConfigMap
/// (named without kustomize's content hash, which only serves to roll the Deployment).
/// Returns the objects and the configuration file text the ConfigMap carries.
fn render_manifests() -> anyhow::Result<(Vec<Value>, String)> {
    let dir = repo_root().join("manifests");
    let kustomization_text = std::fs::read_to_string(dir.join("kustomization.yaml"))?;
    let kustomization = parse_yaml_documents(&kustomization_text)?
        .into_iter()
        .next()
        .context("empty kustomization.yaml")?;
    let namespace = kustomization["namespace"]
        .as_str()
        .context("kustomization has no namespace")?;
    ensure!(
        namespace == NAMESPACE,
        "kustomization namespace {namespace}"
    );
    let mut labels = serde_json::Map::new();
    for entry in kustomization["labels"].as_array().into_iter().flatten() {
        if let Some(pairs) = entry["pairs"].as_object() {
            labels.extend(pairs.clone());
        }
    }
    let cluster_scoped = ["Namespace", "ClusterRole", "ClusterRoleBinding"];
    let mut objects = Vec::new();
    let mut skipped_deployment = false;
    for resource in kustomization["resources"].as_array().into_iter().flatten() {
        let file = resource.as_str().context("resource is not a string")?;
        let text = std::fs::read_to_string(dir.join(file)).with_context(|| file.to_owned())?;
        for mut object in parse_yaml_documents(&text)? {
            if object["kind"] == "Deployment" {
                skipped_deployment = true;
                continue;
            }
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            let metadata = object["metadata"]
                .as_object_mut()
                .with_context(|| format!("{file}: no metadata"))?;
            if !cluster_scoped.contains(&kind.as_str()) {
                metadata.insert("namespace".into(), json!(namespace));
            }
            let object_labels = metadata
                .entry("labels")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .context("labels is not a map")?;
            for (k, v) in &labels {
                object_labels.insert(k.clone(), v.clone());
            }
            objects.push(object);
        }
    }
    ensure!(skipped_deployment, "manifests/ lists no Deployment");

    let mut config_text = None;
    for generator in kustomization["configMapGenerator"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = generator["name"].as_str().context("generator name")?;
        let mut data = serde_json::Map::new();
        for entry in generator["files"].as_array().into_iter().flatten() {
            let entry = entry.as_str().context("generator file")?;
            let (key, path) = entry.split_once('=').unwrap_or((entry, entry));
            let text = std::fs::read_to_string(dir.join(path)).with_context(|| path.to_owned())?;
            if key == "vapcheck.yaml" {
                config_text = Some(text.clone());
            }
            data.insert(key.to_owned(), json!(text));
        }
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": data,
        }));
    }
    let config_text = config_text.context("no configMapGenerator carries vapcheck.yaml")?;
    Ok((objects, config_text))
}

async fn client_from(kubeconfig: &Path) -> anyhow::Result<Client> {
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig)?,
        &KubeConfigOptions::default(),
    )
    .await?;
    Ok(Client::try_from(config)?)
}

/// The controller child process, stopped with SIGKILL on drop if the test did not stop it.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address logged after `key=` on the "serving metrics and health probes" line.
    fn logged_addr(&self, key: &str) -> Option<String> {
        self.log_text()
            .lines()
            .find(|l| l.contains("serving metrics and health probes"))
            .and_then(|l| l.split(&format!("{key}=")).nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `GET path` over HTTP/1.0 (so the body is neither chunked nor kept alive): status code,
/// headers (lower-cased names) and body.
fn http_get(
    addr: &str,
    path: &str,
    accept: Option<&str>,
) -> anyhow::Result<(u16, BTreeMap<String, String>, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{accept}\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of headers in {text:?}"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("bad status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers, body.to_owned()))
}

/// One sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `name="value",...` (the part between the braces), escapes `\\`, `\"`, `\n` only.
fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once("=\"")
            .ok_or(format!("bad labels {text:?}"))?;
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        let mut value = String::new();
        let mut end = None;
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?} in {text:?}")),
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.ok_or(format!("unterminated label value in {text:?}"))?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("duplicate label {name}"));
        }
        rest = &after[end + 1..];
        if !rest.is_empty() {
            rest = rest
                .strip_prefix(',')
                .ok_or(format!("no comma between labels in {text:?}"))?;
        }
    }
    Ok(labels)
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text.parse().map_err(|_| format!("bad value {text:?}")),
    }
}

/// A strict parser of the Prometheus text format 0.0.4 (and, with `openmetrics`, of
/// OpenMetrics 1.0 as prometheus-client writes it): every line is a HELP, TYPE (or UNIT) line
/// or a sample; every sample follows the `# TYPE` of its own family (counter, gauge, untyped
/// sample named as the family; histogram `_bucket` with `le`, `_sum`, `_count`; in OpenMetrics
/// counters end in `_total`/`_created`); names, labels, values well-formed; no family
/// declared twice, no series repeated; histograms end with a `+Inf` bucket.
fn parse_exposition(text: &str, openmetrics: bool) -> Result<Vec<Sample>, String> {
    if !text.ends_with('\n') {
        return Err("no final newline".into());
    }
    let mut lines: Vec<&str> = text.lines().collect();
    if openmetrics && lines.pop() != Some("# EOF") {
        return Err("OpenMetrics output does not end with # EOF".into());
    }
    let mut families = BTreeSet::new();
    let mut current: Option<(String, String)> = None;
    let mut series = BTreeSet::new();
    let mut samples = Vec::new();
    for line in lines {
        if line.is_empty() {
            return Err("empty line".into());
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !is_metric_name(name) {
                return Err(format!("bad HELP line {line:?}"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or(format!("bad TYPE line {line:?}"))?;
            let kinds: &[&str] = if openmetrics {
                &[
                    "counter",
                    "gauge",
                    "histogram",
                    "summary",
                    "unknown",
                    "info",
                    "stateset",
                    "gaugehistogram",
                ]
            } else {
                &["counter", "gauge", "histogram", "summary", "untyped"]
            };
            if !is_metric_name(name) || !kinds.contains(&kind) {
                return Err(format!("bad TYPE line {line:?}"));
            }
            if !families.insert(name.to_owned()) {
                return Err(format!("family {name} declared twice"));
            }
            current = Some((name.to_owned(), kind.to_owned()));
            continue;
        }
        if openmetrics && line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with('#') {
            return Err(format!("unexpected comment {line:?}"));
        }
        let (name, labels, value) = match line.split_once('{') {
            Some((name, rest)) => {
                let (labels, value) = rest
                    .rsplit_once("} ")
                    .ok_or(format!("bad sample {line:?}"))?;
                (name, parse_labels(labels)?, value)
            }
            None => {
                let (name, value) = line.split_once(' ').ok_or(format!("bad sample {line:?}"))?;
                (name, BTreeMap::new(), value)
            }
        };
        if !is_metric_name(name) {
            return Err(format!("bad metric name in {line:?}"));
        }
        // No timestamps are expected from a controller: exactly one value.
        let value = parse_value(value)?;
        let (family, kind) = current
            .as_ref()
            .ok_or(format!("sample without # TYPE: {line:?}"))?;
        let suffix = name.strip_prefix(family.as_str());
        let belongs = match (kind.as_str(), suffix) {
            (_, None) => false,
            ("histogram", Some("_bucket")) => labels.contains_key("le"),
            ("histogram", Some("_sum" | "_count")) => true,
            ("counter", Some("_total" | "_created")) if openmetrics => true,
            ("counter", Some("")) => !openmetrics,
            (_, Some(s)) => s.is_empty(),
        };
        if !belongs {
            return Err(format!(
                "sample {name} outside its family {family} ({kind})"
            ));
        }
        if !series.insert(format!("{name}{labels:?}")) {
            return Err(format!("duplicate series {line:?}"));
        }
        samples.push((name.to_owned(), labels, value));
    }
    // Every histogram series ends with a +Inf bucket equal to its count.
    for (name, labels, value) in &samples {
        if let Some(family) = name.strip_suffix("_count") {
            let inf = samples.iter().find(|(n, l, _)| {
                *n == format!("{family}_bucket")
                    && l.get("le").map(String::as_str) == Some("+Inf")
                    && l.iter().filter(|(k, _)| *k != "le").eq(labels.iter())
            });
            if let Some((_, _, bucket)) = inf
                && bucket != value
            {
                return Err(format!(
                    "{name}{labels:?}: +Inf bucket {bucket} != count {value}"
                ));
            }
        }
    }
    Ok(samples)
}

fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.2)
}

fn forbidden<T>(what: &str, result: Result<T, kube::Error>) -> anyhow::Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 && status.is_forbidden() => {
            eprintln!("e2e: {what}: forbidden, as it must be ({})", status.message);
            Ok(())
        }
        Err(other) => bail!("{what}: expected 403 Forbidden, got {other}"),
        Ok(_) => bail!("{what}: expected 403 Forbidden, but the ServiceAccount was allowed"),
    }
}

async fn manifests_rbac_is_sufficient_and_least_privilege_and_metrics_parse() -> anyhow::Result<()>
{
    let cluster = shared_cluster()?;
    let admin = cluster.client().await?;

    // 1. The manifests minus the Deployment, then a token of the ServiceAccount.
    let (objects, config_text) = render_manifests()?;
    let kinds: Vec<String> = objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect();
    eprintln!("e2e: applying {}", kinds.join(", "));
    for object in &objects {
        apply_yaml(&admin, &serde_json::to_string(object)?).await?;
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    let stored = config_maps.get("vapcheck-config").await?;
    let mounted = stored
        .data
        .and_then(|d| d.get("vapcheck.yaml").cloned())
        .context("ConfigMap has no vapcheck.yaml")?;
    ensure!(mounted == config_text);

    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    let token = accounts
        .create_token_request(
            SERVICE_ACCOUNT,
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
        .context("TokenRequest for the vapcheck ServiceAccount")?
        .status
        .context("TokenRequest has no status")?
        .token
        .filter(|t| !t.is_empty())
        .context("TokenRequest returned no token")?;

    let dir = std::env::temp_dir().join(format!("vapcheck-e2e-deployment-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("vapcheck.kubeconfig");
    std::fs::write(
        &kubeconfig,
        support::token_kubeconfig(cluster.kubeconfig(), &token)?,
    )?;
    // What the Deployment mounts at /etc/vapcheck/vapcheck.yaml.
    let config_file = dir.join("vapcheck.yaml");
    std::fs::write(&config_file, &mounted)?;
    let sa = client_from(&kubeconfig).await?;

    // 2. vapcheck as the pod runs it: the ServiceAccount's identity, the shipped configuration,
    // POD_NAMESPACE for the Lease; loopback ports and short intervals from flags.
    let log = dir.join("vapcheck.log");
    let child = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args([
            "controller",
            "--config",
            config_file.to_str().context("temp path is not UTF-8")?,
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
            "--schema-poll-interval",
            "1s",
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "2s",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", NAMESPACE)
        .env("POD_NAME", "vapcheck-e2e-0")
        .env_remove("RUST_LOG")
        .env_remove("VAPCHECK_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting vapcheck controller")?;
    let mut controller = Controller { child, log };
    eprintln!(
        "e2e: vapcheck (pid {}) logs to {}",
        controller.child.id(),
        controller.log.display()
    );

    let started = Instant::now();
    // Not `wait_for`: an exit (a failed preflight names the missing permission) ends the wait.
    let health_addr = loop {
        if let Some(status) = controller.child.try_wait()? {
            bail!(
                "vapcheck exited early ({status}):\n{}",
                controller.log_text()
            );
        }
        if let Some(addr) = controller.logged_addr("health") {
            break addr;
        }
        ensure!(
            started.elapsed() < DEADLINE,
            "vapcheck did not start serving within {DEADLINE:?}:\n{}",
            controller.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let metrics_addr = controller
        .logged_addr("metrics")
        .context("no metrics address logged")?;
    wait_for("/readyz 200", DEADLINE, || {
        let got = http_get(&health_addr, "/readyz", None);
        async move { Ok((got?.0 == 200).then_some(())) }
    })
    .await
    .with_context(|| controller.log_text())?;
    eprintln!("e2e: ready after {:.1?}", started.elapsed());
    let (_, _, body) = http_get(&health_addr, "/readyz", None)?;
    for line in [
        "[+]caches-synced ok",
        "[+]leader-election ok",
        "[+]shutdown ok",
        "readyz check passed",
    ] {
        ensure!(body.lines().any(|l| l == line), "/readyz body {body:?}");
    }
    let (code, _, body) = http_get(&health_addr, "/healthz", None)?;
    ensure!(code == 200, "/healthz {code}: {body}");

    // It holds the Lease in its own namespace, under its pod name.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), NAMESPACE);
    let holder = leases
        .get(LEASE)
        .await?
        .spec
        .and_then(|s| s.holder_identity)
        .context("lease has no holder")?;
    ensure!(holder == "vapcheck-e2e-0", "lease holder {holder}");

    // The documentation example, applied by the admin: vapcheck writes its conditions.
    let policy_yaml = format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {POLICY}
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  validations:
    - expression: "object.replicas > 1"
"#
    );
    apply_yaml(&admin, &policy_yaml).await?;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    let status = wait_for(
        "ExpressionsValid=False and the warning",
        DEADLINE,
        || async {
            let policy = policies.get(POLICY).await?;
            let generation = policy.metadata.generation;
            let status = policy.status.unwrap_or_default();
            let invalid = status.conditions.iter().flatten().any(|c| {
                c.type_ == "ExpressionsValid"
                    && c.status == "False"
                    && c.observed_generation == generation
            });
            let warned = status
                .type_checking
                .as_ref()
                .and_then(|t| t.expression_warnings.as_ref())
                .is_some_and(|w| {
                    w.len() == 1
                        && w[0].warning == REPLICAS_WARNING
                        && w[0].field_ref == "spec.validations[0].expression"
                });
            ensure!(invalid && warned, "status so far: {status:#?}");
            Ok(Some(status))
        },
    )
    .await
    .with_context(|| controller.log_text())?;
    let valid = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "ExpressionsValid")
        .context("no ExpressionsValid")?;
    eprintln!(
        "e2e: ExpressionsValid={} reason={} message={:?}",
        valid.status, valid.reason, valid.message
    );
    // The status was written by vapcheck, i.e. with the ServiceAccount's token.
    let policy = policies.get(POLICY).await?;
    let managers: Vec<String> = policy
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter_map(|f| f.manager.clone())
        .collect();
    // docs/operations.md: vapcheck's field manager is `vapcheck`.
    ensure!(
        managers.iter().any(|m| m == "vapcheck"),
        "status managers {managers:?}"
    );

    // 3. Not too broad: what the ServiceAccount must not do.
    let sa_policies: Api<ValidatingAdmissionPolicy> = Api::all(sa.clone());
    // No `get` either: vapcheck lists and watches, it never reads one policy by name.
    forbidden("get a policy", sa_policies.get(POLICY).await)?;
    let mut edited = policies.get(POLICY).await?;
    if let Some(spec) = edited.spec.as_mut() {
        spec.failure_policy = Some("Ignore".into());
    }
    forbidden(
        "update a policy's spec",
        sa_policies
            .replace(POLICY, &PostParams::default(), &edited)
            .await,
    )?;
    forbidden(
        "patch a policy's spec",
        sa_policies
            .patch(
                POLICY,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"failurePolicy": "Ignore"}})),
            )
            .await,
    )?;
    forbidden(
        "delete a policy",
        sa_policies.delete(POLICY, &Default::default()).await,
    )?;
    forbidden(
        "list secrets in all namespaces",
        Api::<Secret>::all(sa.clone())
            .list(&ListParams::default())
            .await,
    )?;
    forbidden(
        "list secrets in its own namespace",
        Api::<Secret>::namespaced(sa.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await,
    )?;
    let foreign_lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "vapcheck-e2e-foreign"},
        "spec": {"holderIdentity": "intruder"}
    }))?;
    forbidden(
        "create a lease in another namespace",
        Api::<Lease>::namespaced(sa.clone(), "default")
            .create(&PostParams::default(), &foreign_lease)
            .await,
    )?;
    forbidden(
        "create a lease in kube-system",
        Api::<Lease>::namespaced(sa.clone(), "kube-system")
            .create(&PostParams::default(), &foreign_lease)
            .await,
    )?;
    forbidden(
        "delete its own lease",
        Api::<Lease>::namespaced(sa.clone(), NAMESPACE)
            .delete(LEASE, &Default::default())
            .await,
    )?;

    // MutatingAdmissionPolicies (issue 12): read, never written.
    let sa_maps: Api<k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy> =
        Api::all(sa.clone());
    sa_maps
        .list(&ListParams::default())
        .await
        .context("the ServiceAccount cannot list MutatingAdmissionPolicies")?;
    forbidden(
        "delete a MutatingAdmissionPolicy",
        sa_maps
            .delete("any.e2e.vapcheck.dev", &Default::default())
            .await,
    )?;
    forbidden(
        "patch a MutatingAdmissionPolicy",
        sa_maps
            .patch(
                "any.e2e.vapcheck.dev",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"failurePolicy": "Ignore"}})),
            )
            .await,
    )?;
    wait_for(
        "vapcheck watching MutatingAdmissionPolicies",
        DEADLINE,
        || {
            let watching = controller
                .log_text()
                .contains("watching MutatingAdmissionPolicies");
            async move { Ok(watching.then_some(())) }
        },
    )
    .await?;

    // 4. /metrics: strict parse of both formats and the values dashboards and alerts use.
    let samples = wait_for("the metrics to reflect the bad policy", DEADLINE, || {
        let got = http_get(&metrics_addr, "/metrics", None);
        async move {
            let (code, headers, body) = got?;
            ensure!(code == 200, "/metrics {code}: {body}");
            let content_type = headers.get("content-type").cloned().unwrap_or_default();
            ensure!(
                content_type.starts_with("text/plain") && content_type.contains("version=0.0.4"),
                "content type {content_type:?}"
            );
            let samples = parse_exposition(&body, false)
                .map_err(|e| anyhow!("/metrics does not parse: {e}"))?;
            let ready = sample(
                &samples,
                "vapcheck_policies",
                &[("kind", "ValidatingAdmissionPolicy"), ("state", "warnings")],
            ) == Some(1.0)
                && sample(
                    &samples,
                    "vapcheck_policy_expression_warnings",
                    &[("kind", "ValidatingAdmissionPolicy"), ("policy", POLICY)],
                ) == Some(1.0);
            Ok(ready.then_some(samples))
        }
    })
    .await?;
    let get = |name: &str, labels: &[(&str, &str)]| {
        sample(&samples, name, labels).with_context(|| format!("no sample {name} {labels:?}"))
    };
    for state in ["clean", "partial", "failed"] {
        let n = get(
            "vapcheck_policies",
            &[("kind", "ValidatingAdmissionPolicy"), ("state", state)],
        )?;
        ensure!(
            n == 0.0,
            "vapcheck_policies{{kind=ValidatingAdmissionPolicy,state={state:?}}} = {n}"
        );
    }
    let successes = get(
        "controller_runtime_reconcile_total",
        &[("controller", "vapcheck"), ("result", "success")],
    )?;
    ensure!(successes > 0.0, "no successful reconciles counted");
    ensure!(get("leader_election_master_status", &[("name", LEASE)])? == 1.0);
    let requests: f64 = samples
        .iter()
        .filter(|(n, _, _)| n == "rest_client_requests_total")
        .map(|s| s.2)
        .sum();
    ensure!(requests > 0.0, "no rest_client_requests_total");
    ensure!(
        samples
            .iter()
            .any(|(n, l, _)| n == "rest_client_requests_total"
                && l.get("code").map(String::as_str) == Some("200")),
        "no rest_client_requests_total with code 200"
    );
    let start = get("process_start_time_seconds", &[])?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    ensure!(
        start > now - 600.0 && start <= now + 1.0,
        "process_start_time_seconds {start} vs now {now}"
    );
    ensure!(get("process_resident_memory_bytes", &[])? > 0.0);
    let writes: f64 = samples
        .iter()
        .filter(|(n, _, _)| n == "vapcheck_status_writes_total")
        .map(|s| s.2)
        .sum();
    ensure!(writes >= 1.0, "vapcheck_status_writes_total {writes}");
    ensure!(
        samples.iter().any(|(n, _, _)| n == "vapcheck_build_info"),
        "no vapcheck_build_info"
    );
    // The alerts of manifests/monitoring select these series; with one policy with warnings
    // and a leader, VapcheckPolicyExpressionWarnings would fire and VapcheckNoLeader would not.
    let rules =
        std::fs::read_to_string(repo_root().join("manifests/monitoring/prometheusrule.yaml"))?;
    for selector in [
        "controller_runtime_reconcile_errors_total{controller=\"vapcheck\"}",
        "max by (kind, policy) (vapcheck_policy_expression_warnings) > 0",
        "leader_election_master_status{name=\"vapcheck\"}",
        "vapcheck_schema_fetches_total{result=~\"error|forbidden\"}",
    ] {
        ensure!(
            rules.contains(selector),
            "the alerts no longer use {selector}"
        );
    }
    get(
        "controller_runtime_reconcile_errors_total",
        &[("controller", "vapcheck")],
    )?;
    // The first fetch counts (the poll interval has not passed for sure), and the
    // ServiceAccount may read every OpenAPI document: no forbidden or failed fetches.
    ensure!(get("vapcheck_schema_fetches_total", &[("result", "success")])? >= 1.0);
    for result in ["forbidden", "not_found", "error"] {
        let n = sample(
            &samples,
            "vapcheck_schema_fetches_total",
            &[("result", result)],
        );
        ensure!(
            n.unwrap_or(0.0) == 0.0,
            "vapcheck_schema_fetches_total{{result={result:?}}} = {n:?}"
        );
    }
    ensure!(get("vapcheck_schema_cache_kinds", &[])? > 0.0);
    let most_warnings = samples
        .iter()
        .filter(|(n, _, _)| n == "vapcheck_policy_expression_warnings")
        .map(|s| s.2)
        .fold(0.0, f64::max);
    ensure!(most_warnings > 0.0, "the warnings alert would not fire");
    eprintln!(
        "e2e: /metrics parsed, {} samples; reconcile successes {successes}, API requests {requests}",
        samples.len()
    );
    let (code, headers, body) = http_get(
        &metrics_addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0"),
    )?;
    ensure!(code == 200, "/metrics (OpenMetrics) {code}");
    let content_type = headers.get("content-type").cloned().unwrap_or_default();
    ensure!(
        content_type.starts_with("application/openmetrics-text"),
        "OpenMetrics content type {content_type:?}"
    );
    let open = parse_exposition(&body, true)
        .map_err(|e| anyhow!("OpenMetrics /metrics does not parse: {e}"))?;
    ensure!(
        sample(
            &open,
            "vapcheck_policies",
            &[("kind", "ValidatingAdmissionPolicy"), ("state", "warnings")]
        ) == Some(1.0),
        "OpenMetrics vapcheck_policies"
    );

    // 5. SIGTERM: a clean exit with status 0 within a few seconds.
    let pid = i32::try_from(controller.child.id())?;
    // SAFETY: kill(2) on our own child's pid.
    ensure!(
        unsafe { libc::kill(pid, libc::SIGTERM) } == 0,
        "kill failed"
    );
    let stopping = Instant::now();
    let status = loop {
        if let Some(status) = controller.child.try_wait()? {
            break status;
        }
        if stopping.elapsed() > Duration::from_secs(10) {
            bail!(
                "vapcheck did not exit within 10 s of SIGTERM:\n{}",
                controller.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "e2e: vapcheck exited {status} {:.1?} after SIGTERM",
        stopping.elapsed()
    );
    ensure!(
        status.success(),
        "exit {status}:\n{}",
        controller.log_text()
    );
    // docs/operations.md: a stopping leader releases its Lease, so a standby takes over at once.
    let lease = leases.get(LEASE).await?;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    ensure!(
        holder.is_empty(),
        "the stopped leader did not release the lease (holder {holder:?})"
    );
    let log = controller.log_text();
    ensure!(
        !log.contains("ERROR") && !log.contains("Forbidden"),
        "vapcheck logged errors:\n{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio manifests_rbac_is_sufficient_and_least_privilege_and_metrics_parse,
}
