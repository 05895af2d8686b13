//! The Helm chart against a real kube-apiserver (issue 20): the chart rendered with its
//! default values and with each values file of its test matrix (charts/vapcheck/ci/) is
//! accepted object by object by a server-side dry-run apply with strict field validation; the
//! monitoring.coreos.com kinds are checked against the CRDs of the pinned prometheus-operator
//! release (scripts/prometheus-operator-crds), installed into this test's cluster. Each
//! rendering's configuration file is also loaded by vapcheck's own configuration parser.
//! `kubectl apply -k` of manifests/ and manifests/monitoring/ passes a server dry run as well.
//! Then the Helm life cycle of docs/operations.md runs for real: `helm install` (monitoring
//! on) into the existing namespace, `helm upgrade --reuse-values` to one replica, `helm
//! uninstall`.

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;
use support::{apply_yaml, parse_yaml_documents, repo_root, shared_cluster, wait_for};
use vapcheck::config::{Config, StatusMode};

const NAMESPACE: &str = "vapcheck-system";

/// `helm template` of charts/vapcheck (release `vapcheck` in vapcheck-system) with the values
/// file `values`, if any.
fn render(helm: &PathBuf, values: Option<&str>) -> anyhow::Result<Vec<Value>> {
    let mut command = Command::new(helm);
    command
        .args(["template", "vapcheck"])
        .arg(repo_root().join("charts/vapcheck"))
        .args(["--namespace", NAMESPACE]);
    if let Some(values) = values {
        command.arg("--values").arg(repo_root().join(values));
    }
    let out = command.output().context("running helm template")?;
    ensure!(
        out.status.success(),
        "helm template {values:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_yaml_documents(&String::from_utf8(out.stdout)?)
}

/// Server-side apply with `dryRun=All` and strict field validation: what `kubectl apply
/// --server-side --dry-run=server` does. Returns the API server's error, if any.
async fn dry_run_apply(client: &Client, object: &Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(object.clone())?;
    let types = object.types.as_ref().context("no apiVersion/kind")?;
    let gvk = GroupVersionKind::try_from(types)?;
    let name = object.metadata.name.clone().context("no metadata.name")?;
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discovering {}/{}", types.api_version, types.kind))?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object
                .metadata
                .namespace
                .as_deref()
                .context("namespaced object without namespace")?,
            &resource,
        ),
    };
    let mut params = PatchParams::apply("vapcheck-e2e-chart").dry_run();
    params.field_validation = Some(ValidationDirective::Strict);
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .with_context(|| format!("dry-run apply of {} {name}", types.kind))?;
    Ok(())
}

fn kinds(objects: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for o in objects {
        *out.entry(o["kind"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    out
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// The configuration file of a rendering, loaded by vapcheck itself.
fn config_of(objects: &[Value]) -> anyhow::Result<Config> {
    let text = find(objects, "ConfigMap", "vapcheck-config")
        .and_then(|cm| cm["data"]["vapcheck.yaml"].as_str())
        .context("no vapcheck-config ConfigMap with vapcheck.yaml")?;
    Config::from_yaml_str(text)
        .and_then(Config::validated)
        .map_err(|e| anyhow::anyhow!("vapcheck rejects the chart's configuration: {e}\n{text}"))
}

async fn chart_renderings_pass_server_side_dry_run_and_helm_installs_upgrades_uninstalls()
-> anyhow::Result<()> {
    let helm = support::helm()?;
    let crds = support::script_output("scripts/prometheus-operator-crds")?;
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;

    // The prometheus-operator CRDs of the pinned release, for real.
    for file in [
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
    ] {
        let text = std::fs::read_to_string(crds.join(file))
            .with_context(|| format!("{}", crds.join(file).display()))?;
        apply_yaml(&client, &text).await?;
    }
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in [
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
    ] {
        wait_for(
            &format!("CRD {name} established"),
            Duration::from_secs(60),
            || {
                let crd_api = crd_api.clone();
                async move {
                    let crd = crd_api.get(name).await?;
                    let established = crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    Ok(established.then_some(()))
                }
            },
        )
        .await?;
    }

    // The default rendering creates the namespace; the dry runs of namespaced objects need it.
    let defaults = render(&helm, None)?;
    let namespace = find(&defaults, "Namespace", NAMESPACE).context("no Namespace rendered")?;
    apply_yaml(&client, &serde_json::to_string(namespace)?).await?;

    let mut cases = vec![(None, defaults)];
    let mut files: Vec<String> = std::fs::read_dir(repo_root().join("charts/vapcheck/ci"))?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with("-values.yaml"))
        .map(|n| format!("charts/vapcheck/ci/{n}"))
        .collect();
    files.sort();
    ensure!(
        files.len() >= 4,
        "the test matrix has {} values files",
        files.len()
    );
    for file in files {
        let objects = render(&helm, Some(&file))?;
        cases.push((Some(file), objects));
    }

    let mut accepted = 0;
    for (values, objects) in &cases {
        let name = values.as_deref().unwrap_or("default values");
        for object in objects {
            dry_run_apply(&client, object)
                .await
                .with_context(|| format!("chart with {name}"))?;
            accepted += 1;
        }
        let config = config_of(objects).with_context(|| name.to_owned())?;
        let kinds = kinds(objects);
        let deployment = find(objects, "Deployment", "vapcheck").context("no Deployment")?;
        let replicas = deployment["spec"]["replicas"].as_i64().unwrap_or(0);
        let monitoring = ["ServiceMonitor", "PrometheusRule"]
            .iter()
            .all(|k| kinds.contains_key(*k))
            && find(objects, "ConfigMap", "vapcheck-dashboard").is_some();
        eprintln!(
            "e2e: chart with {name}: {} objects accepted by dry run {kinds:?}",
            objects.len()
        );
        // What each values file is about shows in the rendering.
        match values.as_deref() {
            None => {
                ensure!(
                    replicas == 2 && !monitoring && kinds.get("PodDisruptionBudget") == Some(&1)
                );
                ensure!(
                    config == Config::default(),
                    "the default rendering ships the default configuration"
                );
            }
            Some(f) if f.ends_with("monitoring-values.yaml") => {
                ensure!(monitoring, "{f}: no monitoring objects");
                let sm = find(objects, "ServiceMonitor", "vapcheck").context("ServiceMonitor")?;
                let endpoint = &sm["spec"]["endpoints"][0];
                ensure!(
                    endpoint["scheme"] == "https" && endpoint["bearerTokenFile"].is_string(),
                    "{endpoint}"
                );
                ensure!(config.metrics.secure.enabled && config.metrics_addr()?.port() == 8443);
                let port = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0];
                ensure!(
                    port["name"] == "metrics" && port["containerPort"] == 8443,
                    "{port}"
                );
            }
            Some(f) if f.ends_with("single-replica-values.yaml") => {
                ensure!(
                    replicas == 1 && !kinds.contains_key("PodDisruptionBudget") && !monitoring,
                    "{f}: {kinds:?}"
                );
            }
            Some(f) if f.ends_with("conditions-only-values.yaml") => {
                ensure!(
                    config.status_mode == StatusMode::ConditionsOnly && config.kind_limit == 10,
                    "{f}: {config:?}"
                );
            }
            Some(f) if f.ends_with("param-kinds-values.yaml") => {
                let role = find(objects, "ClusterRole", "vapcheck").context("ClusterRole")?;
                let grants = serde_json::to_string(&role["rules"])?;
                ensure!(
                    grants.contains(
                        r#"{"apiGroups":[""],"resources":["configmaps"],"verbs":["list","watch"]}"#
                    ) && grants.contains(r#""resources":["replicalimits","namespacequotas"]"#),
                    "{f}: {grants}"
                );
                ensure!(monitoring && replicas == 2, "{f}");
            }
            Some(other) => bail!("{other}: the test does not know what this values file is about"),
        }
    }

    // The dry run validates: an object the CRD's schema forbids is refused.
    let (_, with_monitoring) = cases
        .iter()
        .find(|(v, _)| {
            v.as_deref()
                .is_some_and(|f| f.ends_with("monitoring-values.yaml"))
        })
        .context("no monitoring case")?;
    let mut bad = find(with_monitoring, "ServiceMonitor", "vapcheck")
        .cloned()
        .context("ServiceMonitor")?;
    bad["spec"]["endpoints"][0]["scrapeInterval"] = Value::from("30s");
    let refused = dry_run_apply(&client, &bad).await;
    ensure!(
        refused
            .as_ref()
            .is_err_and(|e| format!("{e:#}").contains("scrapeInterval")),
        "an unknown ServiceMonitor field was accepted: {refused:?}"
    );
    eprintln!(
        "e2e: {accepted} rendered objects accepted; an unknown field is refused: {:#}",
        refused.err().map(|e| format!("{e:#}")).unwrap_or_default()
    );

    // The kustomize installation (manifests/, the chart's default rendering) is accepted too.
    let kubectl = match std::env::var_os("VAPCHECK_KUBECTL") {
        Some(path) => PathBuf::from(path),
        None => support::script_output("scripts/kubectl-path")?,
    };
    for dir in ["manifests", "manifests/monitoring"] {
        let out = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(["apply", "--server-side", "--dry-run=server", "-k"])
            .arg(repo_root().join(dir))
            .output()
            .context("running kubectl apply -k")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        ensure!(
            out.status.success(),
            "kubectl apply -k {dir} --dry-run=server failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let applied = stdout
            .lines()
            .filter(|l| l.contains("(server dry run)"))
            .count();
        ensure!(applied >= 3, "kubectl apply -k {dir}: {stdout}");
        eprintln!("e2e: kubectl apply -k {dir}: {applied} objects accepted by dry run");
    }

    // The documented Helm life cycle (docs/operations.md), for real: install into the existing
    // namespace with monitoring on, upgrade to one replica, uninstall.
    let helm_run = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new(&helm)
            .args(args)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(["--namespace", NAMESPACE])
            .current_dir(repo_root())
            .output()
            .with_context(|| format!("helm {args:?}"))?;
        ensure!(
            out.status.success(),
            "helm {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    helm_run(&[
        "install",
        "vapcheck",
        "charts/vapcheck",
        "--set",
        "namespace.create=false",
        "--values",
        "charts/vapcheck/ci/monitoring-values.yaml",
    ])?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let (rule_resource, _) = kube::discovery::pinned_kind(
        &client,
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "PrometheusRule"),
    )
    .await?;
    let rules: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &rule_resource);
    let installed = deployments.get("vapcheck").await?;
    ensure!(installed.spec.replicas == Some(2));
    ensure!(
        pdbs.get_opt("vapcheck").await?.is_some(),
        "no PDB after install"
    );
    ensure!(
        rules.get_opt("vapcheck").await?.is_some(),
        "no PrometheusRule after install"
    );
    helm_run(&[
        "upgrade",
        "vapcheck",
        "charts/vapcheck",
        "--reuse-values",
        "--set",
        "replicaCount=1",
    ])?;
    let upgraded = deployments.get("vapcheck").await?;
    ensure!(
        upgraded.spec.replicas == Some(1),
        "upgrade kept the replicas"
    );
    ensure!(
        pdbs.get_opt("vapcheck").await?.is_none(),
        "the PDB outlived replicaCount=1"
    );
    ensure!(
        rules.get_opt("vapcheck").await?.is_some(),
        "--reuse-values lost the monitoring values"
    );
    let status = helm_run(&["status", "vapcheck"])?;
    ensure!(
        status.contains("REVISION: 2") && status.contains("STATUS: deployed"),
        "{status}"
    );
    helm_run(&["uninstall", "vapcheck"])?;
    wait_for(
        "the uninstalled objects to be gone",
        Duration::from_secs(30),
        || {
            let (deployments, cluster_roles, rules) =
                (deployments.clone(), cluster_roles.clone(), rules.clone());
            async move {
                let left = deployments.get_opt("vapcheck").await?.is_some()
                    || cluster_roles.get_opt("vapcheck").await?.is_some()
                    || rules.get_opt("vapcheck").await?.is_some();
                Ok((!left).then_some(()))
            }
        },
    )
    .await?;
    eprintln!("e2e: helm install, upgrade (revision 2: one replica, no PDB) and uninstall work");
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio chart_renderings_pass_server_side_dry_run_and_helm_installs_upgrades_uninstalls,
}
