//! The live schema source against a real API server (project issue #5, last test bullet):
//! [`vapcheck::schema::LiveSource`] polled while a CRD is installed, changed and deleted.
//!
//! - the first poll resolves built-in kinds and maps subresources (`deployments/scale` →
//!   `autoscaling/v1 Scale`);
//! - installing a CRD reports exactly its group-version as added, and its kind resolves (escaped
//!   property names, int-or-string as `dyn`, nested objects) under its plural and singular names;
//! - changing its schema reports exactly that group-version as changed, with the new field typed
//!   and the removed one gone;
//! - deleting it reports exactly that group-version as removed, and the kind stops resolving;
//! - a poll in between, with nothing changed, reports nothing and downloads no document and no
//!   discovery (the requests are counted by a tower layer on the client).
//!
//! Run with `cargo test --test e2e -- --group schema_live --nocapture` (see docs/schemas.md).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use support::{apply_yaml, shared_cluster, wait_for};
use vapcheck::schema::{
    Changes, ConvertOptions, DeclType, GroupVersion, GroupVersionKind, GroupVersionResource,
    Limits, LiveSource, RootType, Scalar, SchemaErrorKind, SchemaSource,
};

/// How long a CRD change may take to show in `/openapi/v3`, discovery and the poll.
const CRD_DEADLINE: Duration = Duration::from_secs(90);

/// The test CRD's name, group and version.
const CRD_NAME: &str = "gizmos.e2e.vapcheck.dev";
const GROUP: &str = "e2e.vapcheck.dev";
const VERSION: &str = "v1";

/// The test CRD with `spec_properties` (YAML, indented for its place) as `spec`'s properties.
fn gizmo_crd(spec_properties: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {CRD_NAME}
spec:
  group: {GROUP}
  scope: Namespaced
  names:
    plural: gizmos
    singular: gizmo
    kind: Gizmo
    listKind: GizmoList
  versions:
    - name: {VERSION}
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
{spec_properties}"#
    )
}

/// The first schema: a property with a dash, an int-or-string, a nested object.
const FIRST_PROPERTIES: &str = r#"                max-surge:
                  type: string
                port:
                  x-kubernetes-int-or-string: true
                limits:
                  type: object
                  properties:
                    cpu:
                      type: string
                    replicas:
                      type: integer
"#;

/// The second schema: `spec.color` added, `spec.limits.replicas` removed.
const SECOND_PROPERTIES: &str = r#"                max-surge:
                  type: string
                port:
                  x-kubernetes-int-or-string: true
                color:
                  type: string
                limits:
                  type: object
                  properties:
                    cpu:
                      type: string
"#;

/// The paths of the requests a client sent, in order.
#[derive(Clone, Default)]
struct RequestLog(Arc<Mutex<Vec<String>>>);

impl RequestLog {
    fn record(&self, path: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_owned());
    }

    /// The requests since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What one poll asked the server for.
#[derive(Debug)]
struct Requests {
    index: usize,
    documents: Vec<String>,
    discovery: usize,
    other: Vec<String>,
}

impl Requests {
    fn of(paths: Vec<String>) -> Requests {
        let mut r = Requests {
            index: 0,
            documents: Vec::new(),
            discovery: 0,
            other: Vec::new(),
        };
        for path in paths {
            match path.as_str() {
                "/openapi/v3" => r.index += 1,
                "/api" | "/apis" => r.discovery += 1,
                p if p.starts_with("/openapi/v3/") => r.documents.push(path),
                _ => r.other.push(path),
            }
        }
        r
    }
}

/// An admin client whose every request path is recorded in the returned log.
async fn counting_client(kubeconfig: &std::path::Path) -> anyhow::Result<(Client, RequestLog)> {
    let kubeconfig_file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig_file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))?;
    let log = RequestLog::default();
    let recorder = log.clone();
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        recorder.record(req.uri().path());
        req
    });
    let client = kube::client::ClientBuilder::try_from(config)
        .context("building a Kubernetes client")?
        .with_layer(&layer)
        .build();
    Ok((client, log))
}

/// Polls until a poll reports something, and returns it with the requests of that poll.
async fn poll_until_changed(
    live: &LiveSource,
    log: &RequestLog,
    what: &str,
) -> anyhow::Result<(Changes, Requests)> {
    let deadline = Instant::now() + CRD_DEADLINE;
    loop {
        log.take();
        let changes = live
            .poll()
            .await
            .with_context(|| format!("polling ({what})"))?;
        let requests = Requests::of(log.take());
        if !changes.is_empty() {
            return Ok((changes, requests));
        }
        if Instant::now() >= deadline {
            bail!("no change reported within {CRD_DEADLINE:?} after {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The type at `path` (from the object root) of a resolved kind, rendered canonically.
fn type_at(root: &RootType, path: &str) -> Option<String> {
    root.root().at_path(path).map(DeclType::canonical)
}

/// Waits until the CRD is gone (a leftover of an earlier run on a reused cluster).
async fn delete_crd_and_wait(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(CRD_NAME).await?.is_some() {
        crds.delete(CRD_NAME, &DeleteParams::default()).await?;
    }
    wait_for("the CRD to be gone", CRD_DEADLINE, || async {
        Ok(crds.get_opt(CRD_NAME).await?.is_none().then_some(()))
    })
    .await
}

/// Waits until the CRD is established and its group-version is in both the `/openapi/v3` index
/// and aggregated discovery, so that one poll sees both (a poll re-reads discovery only when a
/// document changed).
async fn wait_until_published(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for("the CRD to be established", CRD_DEADLINE, || async {
        let crd = crds.get(CRD_NAME).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(established.then_some(()))
    })
    .await?;
    wait_for(
        "the CRD in /openapi/v3 and aggregated discovery",
        CRD_DEADLINE,
        || async {
            let index: serde_json::Value = client
                .request(http::Request::get("/openapi/v3").body(Vec::new())?)
                .await?;
            let published = index["paths"]
                .get(format!("apis/{GROUP}/{VERSION}"))
                .is_some();
            let groups = client.list_api_groups_aggregated().await?;
            let served = groups.items.iter().any(|g| {
                g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(GROUP)
                    && g.versions.iter().any(|v| {
                        v.version.as_deref() == Some(VERSION)
                            && v.resources
                                .iter()
                                .any(|r| r.resource.as_deref() == Some("gizmos"))
                    })
            });
            Ok((published && served).then_some(()))
        },
    )
    .await
}

/// Asserts that a poll with nothing changed reports nothing and reads only the index.
async fn assert_steady(live: &LiveSource, log: &RequestLog, when: &str) -> anyhow::Result<()> {
    log.take();
    let started = Instant::now();
    let changes = live.poll().await.context("steady-state poll")?;
    let requests = Requests::of(log.take());
    println!(
        "steady poll ({when}): {:.0?}, requests {requests:?}",
        started.elapsed()
    );
    ensure!(
        changes.is_empty(),
        "{when}: a poll with nothing changed reported {changes:?}"
    );
    ensure!(
        requests.index == 1
            && requests.documents.is_empty()
            && requests.discovery == 0
            && requests.other.is_empty(),
        "{when}: a poll with nothing changed sent {requests:?}"
    );
    Ok(())
}

async fn live_source_follows_a_crd_through_install_change_and_delete() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = shared_cluster()?;
    let (client, log) = counting_client(cluster.kubeconfig()).await?;
    println!("cluster ready: {:.1?}", started.elapsed());
    delete_crd_and_wait(&client).await?;

    let gv = GroupVersion::new(GROUP, VERSION);
    let gizmo = GroupVersionKind::new(GROUP, VERSION, "Gizmo");
    let live = LiveSource::new(client.clone(), Limits::default(), ConvertOptions::default());

    // First poll: everything is added; built-in kinds resolve and subresources map.
    log.take();
    let t = Instant::now();
    let first = live.poll().await.context("first poll")?;
    let requests = Requests::of(log.take());
    println!(
        "first poll: {:.1?}, {} group-versions added, {} documents downloaded, {} discovery requests",
        t.elapsed(),
        first.added.len(),
        requests.documents.len(),
        requests.discovery
    );
    ensure!(first.failed.is_empty(), "failed: {:?}", first.failed);
    ensure!(
        first.changed.is_empty() && first.removed.is_empty(),
        "first poll: {first:?}"
    );
    ensure!(
        first.added.contains(&GroupVersion::new("apps", "v1"))
            && first.added.contains(&GroupVersion::new("", "v1")),
        "first poll added {:?}",
        first.added
    );
    ensure!(
        !first.added.contains(&gv),
        "the test group-version is there before the CRD: {:?}",
        first.added
    );
    ensure!(
        requests.documents.len() == first.added.len(),
        "first poll downloaded {} documents for {} group-versions",
        requests.documents.len(),
        first.added.len()
    );
    let deployment = live
        .resolve(&GroupVersionKind::new("apps", "v1", "Deployment"))
        .context("resolving apps/v1 Deployment")?;
    let containers = deployment
        .root()
        .at_path("spec.template.spec.containers")
        .context("Deployment has no spec.template.spec.containers")?;
    ensure!(
        matches!(containers, DeclType::List(e) if e.as_object().is_some()),
        "spec.template.spec.containers is {}",
        containers.canonical()
    );
    let image = type_at(&deployment, "spec.template.spec.containers[0].image");
    ensure!(
        image.as_deref() == Some("string"),
        "spec.template.spec.containers[0].image is {image:?}"
    );
    ensure!(
        live.kinds_for(&GroupVersionResource::new(
            "apps",
            "v1",
            "deployments/scale"
        )) == [GroupVersionKind::new("autoscaling", "v1", "Scale")],
        "deployments/scale maps to {:?}",
        live.kinds_for(&GroupVersionResource::new(
            "apps",
            "v1",
            "deployments/scale"
        ))
    );
    ensure!(
        live.kinds_for(&GroupVersionResource::new("apps", "v1", "deployments"))
            == [GroupVersionKind::new("apps", "v1", "Deployment")],
        "deployments does not map to apps/v1 Deployment"
    );
    let err = live
        .resolve(&gizmo)
        .err()
        .context("Gizmo resolves before its CRD exists")?;
    ensure!(err.kind == SchemaErrorKind::NotFound, "{err}");
    assert_steady(&live, &log, "after the first poll").await?;

    // Install the CRD: exactly its group-version is added, and one document is downloaded.
    let t = Instant::now();
    apply_yaml(&client, &gizmo_crd(FIRST_PROPERTIES)).await?;
    wait_until_published(&client).await?;
    let published = t.elapsed();
    let (changes, requests) = poll_until_changed(&live, &log, "installing the CRD").await?;
    println!(
        "install: published after {published:.1?}, reported after {:.1?}: {changes:?}, requests {requests:?}",
        t.elapsed()
    );
    ensure!(
        changes
            == Changes {
                added: vec![gv.clone()],
                ..Changes::default()
            },
        "installing the CRD reported {changes:?}"
    );
    ensure!(
        requests.documents.len() == 1 && requests.documents[0].starts_with("/openapi/v3/apis/e2e"),
        "installing the CRD downloaded {:?}",
        requests.documents
    );
    let root = live.resolve(&gizmo).context("resolving Gizmo")?;
    ensure!(root.is_typed(), "Gizmo resolved untyped");
    let expect = [
        ("spec.max__dash__surge", Some("string".to_owned())),
        ("spec.port", Some("dyn".to_owned())),
        ("spec.limits.cpu", Some("string".to_owned())),
        ("spec.limits.replicas", Some("int".to_owned())),
        ("spec.color", None),
        ("metadata.name", Some("string".to_owned())),
    ];
    for (path, want) in &expect {
        let got = type_at(&root, path);
        ensure!(&got == want, "Gizmo {path}: {got:?}, expected {want:?}");
    }
    ensure!(
        root.root()
            .at_path("spec.limits")
            .is_some_and(|t| t.as_object().is_some()),
        "Gizmo spec.limits is not an object"
    );
    ensure!(
        matches!(
            root.root().at_path("spec.limits.replicas"),
            Some(DeclType::Scalar(Scalar::Int))
        ),
        "Gizmo spec.limits.replicas is not an int"
    );
    for resource in ["gizmos", "gizmo"] {
        let kinds = live.kinds_for(&GroupVersionResource::new(GROUP, VERSION, resource));
        ensure!(
            kinds == [gizmo.clone()],
            "{resource} maps to {kinds:?}, expected [{gizmo}]"
        );
    }
    assert_steady(&live, &log, "after installing the CRD").await?;

    // Change the schema: exactly its group-version is changed.
    let t = Instant::now();
    apply_yaml(&client, &gizmo_crd(SECOND_PROPERTIES)).await?;
    let (changes, requests) = poll_until_changed(&live, &log, "changing the CRD").await?;
    println!(
        "change: reported after {:.1?}: {changes:?}, requests {requests:?}",
        t.elapsed()
    );
    ensure!(
        changes
            == Changes {
                changed: vec![gv.clone()],
                ..Changes::default()
            },
        "changing the CRD reported {changes:?}"
    );
    ensure!(
        requests.documents.len() == 1,
        "changing the CRD downloaded {:?}",
        requests.documents
    );
    let root = live
        .resolve(&gizmo)
        .context("resolving Gizmo after the change")?;
    let expect = [
        ("spec.max__dash__surge", Some("string".to_owned())),
        ("spec.port", Some("dyn".to_owned())),
        ("spec.limits.cpu", Some("string".to_owned())),
        ("spec.limits.replicas", None),
        ("spec.color", Some("string".to_owned())),
    ];
    for (path, want) in &expect {
        let got = type_at(&root, path);
        ensure!(
            &got == want,
            "Gizmo after the change, {path}: {got:?}, expected {want:?}"
        );
    }
    assert_steady(&live, &log, "after changing the CRD").await?;

    // Delete the CRD: exactly its group-version is removed and the kind no longer resolves.
    let t = Instant::now();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(CRD_NAME, &DeleteParams::default()).await?;
    let (changes, requests) = poll_until_changed(&live, &log, "deleting the CRD").await?;
    println!(
        "delete: reported after {:.1?}: {changes:?}, requests {requests:?}",
        t.elapsed()
    );
    ensure!(
        changes
            == Changes {
                removed: vec![gv.clone()],
                ..Changes::default()
            },
        "deleting the CRD reported {changes:?}"
    );
    ensure!(
        requests.documents.is_empty(),
        "deleting the CRD downloaded {:?}",
        requests.documents
    );
    let err = live
        .resolve(&gizmo)
        .err()
        .context("Gizmo still resolves after its CRD was deleted")?;
    ensure!(
        err.kind == SchemaErrorKind::NotFound,
        "Gizmo after deletion: {err}"
    );
    let message = err.to_string();
    ensure!(
        message.contains("e2e.vapcheck.dev/v1, Kind=Gizmo"),
        "the error does not name the kind: {message}"
    );
    println!("Gizmo after deletion: {message}");
    // Built-in kinds are untouched.
    live.resolve(&GroupVersionKind::new("apps", "v1", "Deployment"))
        .context("resolving apps/v1 Deployment after the CRD was deleted")?;
    assert_steady(&live, &log, "after deleting the CRD").await?;

    println!("total: {:.1?}", started.elapsed());
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio live_source_follows_a_crd_through_install_change_and_delete,
}
