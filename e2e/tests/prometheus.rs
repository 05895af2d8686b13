//! A real Prometheus scraping vapcheck (issue 20): the chart rendered with
//! `charts/vapcheck/ci/monitoring-values.yaml` (secure metrics on) is applied to the local
//! control plane minus the Deployment, `vapcheck controller` runs as the pod would (the
//! ServiceAccount's token, the rendered configuration file), and Prometheus (the pinned Debian
//! package, scripts/prometheus-path) scrapes it the way the chart's ServiceMonitor says — HTTPS
//! with the generated certificate (`insecureSkipVerify`), the bearer token of a ServiceAccount
//! bound to the metrics-reader ClusterRole — and evaluates the rules of the chart's
//! PrometheusRule. Asserted: the target is up; a scraper without the role gets 403 and its
//! target is down; a broken policy makes VapcheckPolicyExpressionWarnings fire with the
//! policy's name and the fix resolves it; `promtool check metrics` accepts a real scrape;
//! every query of the Grafana dashboard returns at least one series.
//!
//! Scrapes and rule evaluations run every second, and the rules' `for` durations are
//! shortened to two seconds (the only change made to the shipped rules, checked below).

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use support::scrape::{https_get_metrics, parse_response};
use support::{apply_yaml, repo_root, shared_cluster, wait_for};

const NAMESPACE: &str = "vapcheck-system";
const SCRAPER_NAMESPACE: &str = "vapcheck-e2e-monitoring";
const POLICY: &str = "replicas.prometheus.e2e.vapcheck.dev";
const WEBHOOK_NAME: &str = "webhooks.prometheus.e2e.vapcheck.dev";
const WEBHOOK_WITHOUT_SERVICE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: webhooks.prometheus.e2e.vapcheck.dev
webhooks:
  - name: missing.prometheus.e2e.vapcheck.dev
    clientConfig:
      service: {namespace: default, name: missing-hook, port: 443}
    rules:
      - apiGroups: [prometheus.e2e.vapcheck.dev]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [widgets]
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
"#;
const DEADLINE: Duration = Duration::from_secs(90);
/// Scrape and rule evaluation interval, and the `for` of every rule in this test.
const INTERVAL: &str = "1s";
const FOR: &str = "2s";

fn find<'a>(objects: &'a [Value], kind: &str) -> anyhow::Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .with_context(|| format!("the chart rendered no {kind}"))
}

/// A TokenRequest token of the ServiceAccount `namespace/name`.
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

/// A child process killed (if still running) when dropped, with its log file.
struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &'static str, mut command: Command, log: PathBuf) -> anyhow::Result<Process> {
        let child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log)?)
            .stderr(std::fs::File::create(log.with_extension("stderr.log"))?)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        eprintln!("e2e: {name} (pid {}) logs to {}", child.id(), log.display());
        Ok(Process { name, child, log })
    }

    fn log_text(&self) -> String {
        let out = std::fs::read_to_string(&self.log).unwrap_or_default();
        let err =
            std::fs::read_to_string(self.log.with_extension("stderr.log")).unwrap_or_default();
        format!("---- {} output ----\n{out}{err}", self.name)
    }

    fn ensure_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited ({status}):\n{}", self.name, self.log_text());
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Percent-encoding of a query parameter value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` on Prometheus' HTTP API; the `data` of a successful answer.
fn prometheus_api(addr: &str, path: &str) -> anyhow::Result<Value> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (code, body) = parse_response(&text)?;
    let answer: Value =
        serde_json::from_str(&body).with_context(|| format!("{path}: {code} {body}"))?;
    ensure!(
        code == 200 && answer["status"] == "success",
        "{path}: {code} {body}"
    );
    Ok(answer["data"].clone())
}

/// The result vector of an instant query.
fn query(addr: &str, promql: &str) -> anyhow::Result<Vec<Value>> {
    let data = prometheus_api(addr, &format!("/api/v1/query?query={}", encode(promql)))?;
    Ok(data["result"].as_array().cloned().unwrap_or_default())
}

/// The active target of scrape job `job`.
fn target(addr: &str, job: &str) -> anyhow::Result<Option<Value>> {
    let data = prometheus_api(addr, "/api/v1/targets?state=active")?;
    Ok(data["activeTargets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["labels"]["job"] == job)
        .cloned())
}

/// The active (pending or firing) alerts named `name`.
fn alerts(addr: &str, name: &str) -> anyhow::Result<Vec<Value>> {
    let data = prometheus_api(addr, "/api/v1/alerts")?;
    Ok(data["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == name)
        .cloned()
        .collect())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The rules of the chart's PrometheusRule with every `for` set to [`FOR`]; checks that
/// nothing else differs from the shipped spec.
fn test_rules(rule: &Value) -> anyhow::Result<Value> {
    let mut spec = rule["spec"].clone();
    let mut alerts = 0;
    for group in spec["groups"].as_array_mut().into_iter().flatten() {
        group["interval"] = json!(INTERVAL);
        for r in group["rules"].as_array_mut().into_iter().flatten() {
            if r.get("for").is_some() {
                r["for"] = json!(FOR);
            }
            alerts += usize::from(r.get("alert").is_some());
        }
    }
    ensure!(alerts >= 5, "the PrometheusRule has {alerts} alerts");
    // Only `for` (and the group interval) changed.
    let mut back = spec.clone();
    for (g, group) in back["groups"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .enumerate()
    {
        group.as_object_mut().context("group")?.remove("interval");
        for (i, r) in group["rules"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(shipped) = rule["spec"]["groups"][g]["rules"][i].get("for") {
                r["for"] = shipped.clone();
            }
        }
    }
    ensure!(back == rule["spec"], "the test changed more than `for`");
    Ok(spec)
}

fn policy_yaml(expression: &str) -> String {
    format!(
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
    - expression: "{expression}"
"#
    )
}

async fn prometheus_scrapes_vapcheck_and_evaluates_the_shipped_alerts() -> anyhow::Result<()> {
    let prometheus_bin = support::script_output("scripts/prometheus-path")?;
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

    // 1. The rendered chart minus the Deployment (run below as a process) and the
    // monitoring.coreos.com objects (turned into Prometheus' own configuration below).
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if !matches!(kind, "Deployment" | "ServiceMonitor" | "PrometheusRule") {
            apply_yaml(&admin, &serde_json::to_string(object)?).await?;
        }
    }
    let config_text = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "vapcheck-config")
        .and_then(|o| o["data"]["vapcheck.yaml"].as_str())
        .context("no vapcheck-config ConfigMap")?
        .to_owned();
    let config = vapcheck::config::Config::from_yaml_str(&config_text)
        .map_err(|e| anyhow!("rendered configuration: {e}"))?;
    ensure!(
        config.metrics.secure.enabled && config.metrics.secure.authorize,
        "the monitoring case has secure, authorized metrics"
    );

    // Two scrapers: one bound to the metrics-reader ClusterRole, one not.
    let reader_role = objects
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-metrics-reader"))
        })
        .and_then(|o| o["metadata"]["name"].as_str())
        .context("no metrics-reader ClusterRole")?;
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
  name: prometheus
  namespace: {SCRAPER_NAMESPACE}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prometheus-without-role
  namespace: {SCRAPER_NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vapcheck-e2e-prometheus-metrics-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {reader_role}
subjects:
  - kind: ServiceAccount
    name: prometheus
    namespace: {SCRAPER_NAMESPACE}
"#
        ),
    )
    .await?;

    let dir = std::env::temp_dir().join(format!("vapcheck-e2e-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let vapcheck_token = token(&admin, NAMESPACE, "vapcheck").await?;
    let reader_token = token(&admin, SCRAPER_NAMESPACE, "prometheus").await?;
    let other_token = token(&admin, SCRAPER_NAMESPACE, "prometheus-without-role").await?;
    std::fs::write(dir.join("reader.token"), &reader_token)?;
    std::fs::write(dir.join("other.token"), &other_token)?;
    let kubeconfig = dir.join("vapcheck.kubeconfig");
    std::fs::write(
        &kubeconfig,
        support::token_kubeconfig(cluster.kubeconfig(), &vapcheck_token)?,
    )?;
    let config_file = dir.join("vapcheck.yaml");
    std::fs::write(&config_file, &config_text)?;

    // 2. vapcheck as the pod runs it, on loopback ports.
    let mut command = Command::new(env!("CARGO_BIN_EXE_vapcheck"));
    command
        .arg("controller")
        .arg("--config")
        .arg(&config_file)
        .args([
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
            "--schema-poll-interval",
            "2s",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", NAMESPACE)
        .env("POD_NAME", "vapcheck-prometheus-e2e-0")
        .env_remove("RUST_LOG")
        .env_remove("VAPCHECK_CONFIG");
    let mut vapcheck = Process::spawn("vapcheck", command, dir.join("vapcheck.log"))?;
    let started = Instant::now();
    let metrics_addr = loop {
        vapcheck.ensure_running()?;
        let logged = vapcheck
            .log_text()
            .lines()
            .find(|l| l.contains("serving metrics and health probes"))
            .and_then(|l| l.split("metrics=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        if let Some(addr) = logged {
            break addr;
        }
        ensure!(
            started.elapsed() < DEADLINE,
            "vapcheck did not start serving:\n{}",
            vapcheck.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The secure path by hand: 401 without a token, 403 for the scraper without the role,
    // 200 for the one with it.
    let (code, body) = https_get_metrics(&metrics_addr, None)?;
    ensure!(code == 401, "no token: {code} {body}");
    let (code, body) = https_get_metrics(&metrics_addr, Some(&other_token))?;
    ensure!(code == 403, "token without the role: {code} {body}");
    let (code, scrape) = https_get_metrics(&metrics_addr, Some(&reader_token))?;
    ensure!(code == 200, "token with the role: {code} {scrape}");

    // 3. Prometheus, configured from the chart's ServiceMonitor endpoint and PrometheusRule.
    let monitor = find(&objects, "ServiceMonitor")?;
    let endpoint = &monitor["spec"]["endpoints"][0];
    ensure!(
        endpoint["scheme"] == "https"
            && endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
            && endpoint["tlsConfig"]["insecureSkipVerify"] == true,
        "the ServiceMonitor does not scrape as this test does: {endpoint}"
    );
    let rules = test_rules(find(&objects, "PrometheusRule")?)?;
    std::fs::write(
        dir.join("vapcheck.rules.yaml"),
        serde_json::to_string(&rules)?,
    )?;
    let job = |name: &str, token_file: &str| {
        json!({
            "job_name": name,
            "scheme": endpoint["scheme"],
            "metrics_path": endpoint["path"],
            "scrape_interval": INTERVAL,
            "scrape_timeout": INTERVAL,
            // The ServiceMonitor's bearerTokenFile: the scraper's own ServiceAccount token.
            "authorization": {"type": "Bearer", "credentials_file": dir.join(token_file)},
            "tls_config": {"insecure_skip_verify": endpoint["tlsConfig"]["insecureSkipVerify"]},
            "static_configs": [{"targets": [metrics_addr]}],
        })
    };
    let prometheus_config = json!({
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [dir.join("vapcheck.rules.yaml")],
        "scrape_configs": [job("vapcheck", "reader.token"), job("vapcheck-without-role", "other.token")],
    });
    std::fs::write(
        dir.join("prometheus.yml"),
        serde_json::to_string_pretty(&prometheus_config)?,
    )?;
    let check = Command::new(prometheus_bin.join("promtool"))
        .arg("check")
        .arg("config")
        .arg(dir.join("prometheus.yml"))
        .output()?;
    ensure!(
        check.status.success(),
        "promtool check config: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let prometheus_addr = format!("127.0.0.1:{}", free_port()?);
    let mut command = Command::new(prometheus_bin.join("prometheus"));
    command
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={prometheus_addr}"));
    let mut prometheus = Process::spawn("prometheus", command, dir.join("prometheus.log"))?;

    // The target is up; the scraper without the role is refused and its target is down.
    let up = wait_for("the vapcheck target to be up", DEADLINE, || {
        let running = prometheus.ensure_running();
        let got = target(&prometheus_addr, "vapcheck");
        async move {
            running?;
            Ok(got?.filter(|t| t["health"] == "up"))
        }
    })
    .await
    .with_context(|| prometheus.log_text())?;
    eprintln!(
        "e2e: target up: {} {}",
        up["scrapeUrl"], up["lastScrapeDuration"]
    );
    let down = wait_for("the target without the role to be down", DEADLINE, || {
        let got = target(&prometheus_addr, "vapcheck-without-role");
        async move { Ok(got?.filter(|t| t["health"] == "down")) }
    })
    .await?;
    let last_error = down["lastError"].as_str().unwrap_or_default();
    ensure!(last_error.contains("403"), "lastError {last_error:?}");
    eprintln!("e2e: target without the role is down: {last_error}");
    wait_for(
        "up{job=\"vapcheck\"} == 1 and up{job=\"vapcheck-without-role\"} == 0",
        DEADLINE,
        || {
            let got = query(
                &prometheus_addr,
                r#"up{job="vapcheck"} == 1 or up{job="vapcheck-without-role"} == 0"#,
            );
            async move { Ok((got?.len() == 2).then_some(())) }
        },
    )
    .await?;

    // 4. A broken policy: the alert fires with its name; the fix resolves it.
    apply_yaml(&admin, &policy_yaml("object.replicas > 1")).await?;
    let firing = wait_for("VapcheckPolicyExpressionWarnings firing", DEADLINE, || {
        let got = alerts(&prometheus_addr, "VapcheckPolicyExpressionWarnings");
        async move {
            Ok(got?
                .into_iter()
                .find(|a| a["labels"]["policy"] == POLICY && a["state"] == "firing"))
        }
    })
    .await
    .with_context(|| vapcheck.log_text())?;
    let runbook = firing["annotations"]["runbook_url"]
        .as_str()
        .unwrap_or_default();
    ensure!(
        runbook.ends_with("docs/operations.md#vapcheckpolicyexpressionwarnings"),
        "runbook_url {runbook:?}"
    );
    ensure!(
        firing["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains(POLICY)),
        "summary {}",
        firing["annotations"]["summary"]
    );
    eprintln!("e2e: firing: {}", firing["labels"]);

    // A webhook that cannot be called (its Service does not exist; failurePolicy Ignore and a
    // rule on a resource nothing serves, so that it intercepts nothing), so that the per-webhook
    // families and the dashboard's webhook panel have a series.
    apply_yaml(&admin, WEBHOOK_WITHOUT_SERVICE).await?;

    // 5. promtool check metrics on a real scrape (while a policy has warnings, so that every
    // family with per-policy series is present).
    let (code, scrape) = https_get_metrics(&metrics_addr, Some(&reader_token))?;
    ensure!(
        code == 200 && scrape.contains("vapcheck_policy_expression_warnings{"),
        "{code}"
    );
    let mut promtool = Command::new(prometheus_bin.join("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    promtool
        .stdin
        .take()
        .context("promtool stdin")?
        .write_all(scrape.as_bytes())?;
    let checked = promtool.wait_with_output()?;
    ensure!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics ({}): {}{}",
        checked.status,
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    eprintln!(
        "e2e: promtool check metrics: clean ({} lines)",
        scrape.lines().count()
    );

    // 6. Every query of the dashboard returns at least one series.
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(
        repo_root().join("charts/vapcheck/dashboards/vapcheck.json"),
    )?)?;
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().context("a target without expr")?;
            // Grafana's $__rate_interval: at least four scrape intervals.
            queries.push((
                panel["title"].as_str().unwrap_or_default().to_owned(),
                expr.replace("$__rate_interval", "30s"),
            ));
        }
    }
    ensure!(queries.len() >= 15, "{} dashboard queries", queries.len());
    wait_for("every dashboard query to return a series", DEADLINE, || {
        let empty: Vec<String> = queries
            .iter()
            .filter(|(_, q)| query(&prometheus_addr, q).map_or(true, |r| r.is_empty()))
            .map(|(title, q)| format!("{title}: {q}"))
            .collect();
        async move {
            ensure!(empty.is_empty(), "no series for {empty:#?}");
            Ok(Some(()))
        }
    })
    .await?;
    eprintln!("e2e: all {} dashboard queries return series", queries.len());
    let webhooks: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = kube::Api::all(admin.clone());
    webhooks
        .delete(WEBHOOK_NAME, &kube::api::DeleteParams::default())
        .await?;

    // 7. The fix resolves the alert.
    apply_yaml(&admin, &policy_yaml("object.spec.replicas > 1")).await?;
    wait_for(
        "VapcheckPolicyExpressionWarnings resolved",
        DEADLINE,
        || {
            let got = alerts(&prometheus_addr, "VapcheckPolicyExpressionWarnings");
            async move {
                let active: Vec<Value> = got?
                    .into_iter()
                    .filter(|a| a["labels"]["policy"] == POLICY)
                    .collect();
                ensure!(active.is_empty(), "still active: {active:?}");
                Ok(Some(()))
            }
        },
    )
    .await
    .with_context(|| vapcheck.log_text())?;
    let value = query(
        &prometheus_addr,
        &format!(
            r#"vapcheck_policy_expression_warnings{{kind="ValidatingAdmissionPolicy",policy="{POLICY}"}}"#
        ),
    )?;
    ensure!(
        value.len() == 1 && value[0]["value"][1] == "0",
        "warnings after the fix: {value:?}"
    );
    eprintln!("e2e: resolved after the fix");

    // No other alert fired meanwhile (a healthy vapcheck with a leader).
    let others: Vec<Value> = prometheus_api(&prometheus_addr, "/api/v1/alerts")?["alerts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure!(others.is_empty(), "unexpected alerts: {others:?}");
    vapcheck.ensure_running()?;
    prometheus.ensure_running()?;
    drop(prometheus);
    drop(vapcheck);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio prometheus_scrapes_vapcheck_and_evaluates_the_shipped_alerts,
}
