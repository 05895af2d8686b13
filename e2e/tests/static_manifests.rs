//! `vapcheck check --static-manifests DIR` against the real kube-apiserver 1.37.1: a
//! control plane is started with the ValidatingAdmissionPolicy plugin's `staticManifestsDir`
//! set to a fixture folder (tests/fixtures/static-manifests).
//!
//! - A folder vapcheck rejects stops kube-apiserver from starting, and the error it prints
//!   holds exactly the line vapcheck printed (`failed to load static policy manifests from
//!   "DIR": ...`, the loader's first error).
//! - A folder vapcheck loads starts, and its policy is enforced: a Deployment over the limit
//!   is denied by the static policy, one under it is admitted.
//!
//! `cargo test --test e2e -- --group static_manifests --nocapture`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::PostParams;
use support::{Cluster, UpOptions, repo_root, wait_for};

fn fixture(case: &str) -> PathBuf {
    repo_root()
        .join("tests/fixtures/static-manifests")
        .join(case)
}

/// `vapcheck check -o json --static-manifests DIR`: (exit code, the folder's causes).
fn vapcheck(dir: &Path) -> anyhow::Result<(i32, Vec<String>)> {
    let openapi = support::shared_dir().join("openapi/v1.35");
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json", "--openapi"])
        .arg(&openapi)
        .arg("--static-manifests")
        .arg(dir)
        .output()
        .context("running vapcheck")?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "vapcheck printed no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let folder = &json[0];
    if folder["kind"] != "StaticManifests" {
        bail!("the first entry is not the folder: {folder}");
    }
    let causes = folder["apiServer"]["causes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| c.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok((out.status.code().unwrap_or(-1), causes))
}

/// An AdmissionConfiguration that gives the ValidatingAdmissionPolicy plugin `dir`
/// (k8s.io/apiserver pkg/admission/plugin/policy/config/apis/policyconfig/v1).
fn admission_config(dir: &Path, into: &Path) -> anyhow::Result<String> {
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\n\
         kind: AdmissionConfiguration\n\
         plugins:\n\
         - name: ValidatingAdmissionPolicy\n\
         \x20 configuration:\n\
         \x20   apiVersion: apiserver.config.k8s.io/v1\n\
         \x20   kind: ValidatingAdmissionPolicyConfiguration\n\
         \x20   staticManifestsDir: {}\n",
        dir.display()
    );
    std::fs::write(into, text)?;
    Ok(format!(
        "--admission-control-config-file={}",
        into.display()
    ))
}

fn start_with(dir: &Path, name: &str) -> anyhow::Result<Cluster> {
    let config = std::env::temp_dir().join(format!(
        "vapcheck-static-{}-{name}.yaml",
        std::process::id()
    ));
    let args = admission_config(dir, &config)?;
    Cluster::start(UpOptions {
        with_upstream_controller: false,
        apiserver_extra_args: Some(args),
    })
}

fn a_folder_vapcheck_rejects_stops_kube_apiserver_with_the_same_error() -> anyhow::Result<()> {
    let dir = fixture("binding-without-policy");
    let (code, causes) = vapcheck(&dir)?;
    assert_eq!(code, 3, "vapcheck rejects the folder");
    let expected = format!(
        "failed to load static policy manifests from {:?}: {}",
        dir.display().to_string(),
        causes.first().context("no cause")?
    );
    let err = match start_with(&dir, "rejected") {
        Ok(_) => bail!("kube-apiserver started with a folder vapcheck rejects"),
        Err(e) => format!("{e:#}"),
    };
    // kube-apiserver logs the error quoted (`err="..."`, klog's structured form).
    let quoted = format!("{expected:?}");
    let quoted = &quoted[1..quoted.len() - 1];
    assert!(
        err.contains(&expected) || err.contains(quoted),
        "kube-apiserver's error does not hold vapcheck's line {expected:?}:\n{err}"
    );
    println!("static manifests: kube-apiserver refused to start with: {expected}");
    Ok(())
}

async fn a_folder_vapcheck_loads_is_enforced() -> anyhow::Result<()> {
    let dir = fixture("accepted");
    let (code, causes) = vapcheck(&dir)?;
    assert_eq!((code, causes.len()), (0, 0), "vapcheck loads the folder");
    let cluster = tokio::task::spawn_blocking(move || start_with(&dir, "accepted")).await??;
    let client = cluster.client().await?;
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let deployment = |replicas: i32| -> anyhow::Result<Deployment> {
        Ok(serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": format!("static-{replicas}")},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "s"}},
                "template": {
                    "metadata": {"labels": {"app": "s"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))?)
    };
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let denied = wait_for(
        "the static policy to deny 10 replicas",
        std::time::Duration::from_secs(30),
        || {
            let deployments = deployments.clone();
            let dry_run = dry_run.clone();
            let d = deployment(10);
            async move {
                match deployments.create(&dry_run, &d?).await {
                    Err(kube::Error::Api(s)) if s.message.contains("replicas.static.k8s.io") => {
                        Ok(Some(s.message))
                    }
                    _ => Ok(None),
                }
            }
        },
    )
    .await?;
    deployments
        .create(&dry_run, &deployment(3)?)
        .await
        .context("3 replicas must be admitted")?;
    println!("static manifests: the loaded policy is enforced: {denied}");
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    sync a_folder_vapcheck_rejects_stops_kube_apiserver_with_the_same_error,
    tokio_multi_thread a_folder_vapcheck_loads_is_enforced,
}
