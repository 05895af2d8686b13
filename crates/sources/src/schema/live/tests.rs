//! The live source against an in-process fake API server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;

/// A fake API server: path-and-query → JSON body (404 otherwise), recording every request.
#[derive(Clone, Default)]
struct Fake {
    routes: Arc<Mutex<HashMap<String, (u16, String)>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn set(&self, path: &str, body: Value) {
        self.routes
            .lock()
            .expect("lock")
            .insert(path.to_owned(), (200, body.to_string()));
    }
    fn set_status(&self, path: &str, status: u16) {
        self.routes.lock().expect("lock").insert(
            path.to_owned(),
            (
                status,
                json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": format!("fake answer {status}"), "code": status,
                })
                .to_string(),
            ),
        );
    }
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().expect("lock"))
    }
    fn client(&self) -> kube::Client {
        let fake = self.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let fake = fake.clone();
            async move {
                let key = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_default();
                fake.log.lock().expect("lock").push(key.clone());
                let (status, body) = fake
                    .routes
                    .lock()
                    .expect("lock")
                    .get(&key)
                    .cloned()
                    .unwrap_or((404, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"not found","reason":"NotFound","code":404}"#.to_owned()));
                let resp = http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                    .expect("response");
                Ok::<_, std::convert::Infallible>(resp)
            }
        });
        kube::Client::new(svc, "default")
    }
}

fn index(entries: &[(&str, &str)]) -> Value {
    let paths: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(p, h)| {
            (
                (*p).to_owned(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")}),
            )
        })
        .collect();
    json!({"paths": Value::Object(paths)})
}

fn widget_doc(extra_field: &str) -> Value {
    json!({"components": {"schemas": {
        "com.example.v1.Widget": {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                "spec": {"type": "object", "properties": {extra_field: {"type": "integer"}}}
            },
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}]
        },
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
            "name": {"type": "string"}, "generateName": {"type": "string"}, "namespace": {"type": "string"}}}
    }}})
}

fn core_doc() -> Value {
    json!({"components": {"schemas": {
        "io.k8s.api.core.v1.ConfigMap": {
            "type": "object",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "data": {"type": "object", "additionalProperties": {"type": "string"}}},
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}]
        }
    }}})
}

/// A server with the core and the widget document (hashes `c1`, `w1`) and discovery, and a
/// source over it that has not polled yet.
fn core_and_widget() -> (Fake, LiveSource) {
    let fake = Fake::default();
    fake.set(
        "/openapi/v3",
        index(&[("api/v1", "c1"), ("apis/example.com/v1", "w1")]),
    );
    fake.set("/openapi/v3/api/v1?hash=c1", core_doc());
    fake.set(
        "/openapi/v3/apis/example.com/v1?hash=w1",
        widget_doc("replicas"),
    );
    discovery(&fake);
    let src = LiveSource::new(fake.client(), Limits::default(), ConvertOptions::default());
    (fake, src)
}

fn discovery(fake: &Fake) {
    fake.set(
        "/api",
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {}, "versions": [{"version": "v1", "resources": [
                {"resource": "configmaps", "singularResource": "configmap", "scope": "Namespaced",
                 "responseKind": {"group": "", "version": "v1", "kind": "ConfigMap"}, "verbs": ["get"]}
            ]}]}
        ]}),
    );
    fake.set(
        "/apis",
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {"name": "example.com"}, "versions": [{"version": "v1", "resources": [
                {"resource": "widgets", "singularResource": "widget", "scope": "Namespaced",
                 "responseKind": {"group": "example.com", "version": "v1", "kind": "Widget"}, "verbs": ["get"],
                 "subresources": [
                    {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get"]},
                    {"subresource": "status", "responseKind": {"group": "example.com", "version": "v1", "kind": "Widget"}, "verbs": ["get"]}
                 ]}
            ]}]}
        ]}),
    );
}

fn gvk(g: &str, v: &str, k: &str) -> GroupVersionKind {
    GroupVersionKind::new(g, v, k)
}

#[tokio::test]
async fn first_poll_reads_everything_and_types_kinds() {
    let (fake, src) = core_and_widget();
    // Paths that are not group-versions are ignored.
    fake.set(
        "/openapi/v3",
        index(&[
            ("api/v1", "c1"),
            ("apis/example.com/v1", "w1"),
            ("version", "x"),
        ]),
    );

    let before = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .unwrap_err();
    assert_eq!(before.kind, SchemaErrorKind::Unavailable);

    let changes = src.poll().await.expect("poll");
    assert_eq!(
        changes.added,
        [
            GroupVersion::new("", "v1"),
            GroupVersion::new("example.com", "v1")
        ]
    );
    assert!(changes.changed.is_empty() && changes.removed.is_empty());

    let w = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .expect("widget");
    assert_eq!(
        w.root()
            .at_path("spec.replicas")
            .map(ToString::to_string)
            .as_deref(),
        Some("int")
    );
    // Reserved words are only reachable escaped.
    assert_eq!(
        w.root()
            .at_path("metadata.__namespace__")
            .map(ToString::to_string)
            .as_deref(),
        Some("string")
    );
    assert_eq!(
        w.root()
            .at_path("metadata.namespace")
            .map(ToString::to_string)
            .as_deref(),
        None
    );
    let cm = src.resolve(&gvk("", "v1", "ConfigMap")).expect("configmap");
    assert_eq!(
        cm.root()
            .at_path("data['k']")
            .map(ToString::to_string)
            .as_deref(),
        Some("string")
    );

    let kinds = |r: &str| -> Vec<String> {
        src.kinds_for(&GroupVersionResource::new("example.com", "v1", r))
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(kinds("widgets"), ["example.com/v1, Kind=Widget"]);
    assert_eq!(kinds("widget"), ["example.com/v1, Kind=Widget"]);
    assert_eq!(kinds("widgets/scale"), ["autoscaling/v1, Kind=Scale"]);

    let missing = src
        .resolve(&gvk("example.com", "v1", "Gadget"))
        .unwrap_err();
    assert!(missing.is_not_found());
    assert!(missing.to_string().contains("Gadget"), "{missing}");
    let no_gv = src.resolve(&gvk("nope.io", "v1", "Thing")).unwrap_err();
    assert!(no_gv.is_not_found());
    assert_eq!(
        no_gv.to_string(),
        "nope.io/v1, Kind=Thing: schema not found: no OpenAPI document for group-version nope.io/v1 (path apis/nope.io/v1)"
    );
}

#[tokio::test]
async fn unchanged_index_costs_one_request_and_keeps_types() {
    let (fake, src) = core_and_widget();
    src.poll().await.expect("poll");
    let first = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .expect("widget");
    fake.take_log();

    let changes = src.poll().await.expect("poll");
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(fake.take_log(), ["/openapi/v3"]);
    let again = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .expect("widget");
    assert!(Arc::ptr_eq(&first, &again), "converted once per hash");
}

#[tokio::test]
async fn changed_added_and_removed_documents_are_reported() {
    let (fake, src) = core_and_widget();
    src.poll().await.expect("poll");
    let core_before = src.resolve(&gvk("", "v1", "ConfigMap")).expect("cm");
    fake.take_log();

    // The widget CRD changes its schema; a new group appears; nothing else changes.
    fake.set(
        "/openapi/v3",
        index(&[
            ("api/v1", "c1"),
            ("apis/example.com/v1", "w2"),
            ("apis/other.io/v1", "o1"),
        ]),
    );
    fake.set(
        "/openapi/v3/apis/example.com/v1?hash=w2",
        widget_doc("maxRetries"),
    );
    fake.set(
        "/openapi/v3/apis/other.io/v1?hash=o1",
        json!({"components": {"schemas": {}}}),
    );
    let changes = src.poll().await.expect("poll");
    assert_eq!(changes.changed, [GroupVersion::new("example.com", "v1")]);
    assert_eq!(changes.added, [GroupVersion::new("other.io", "v1")]);
    let mut log = fake.take_log();
    log.sort();
    assert_eq!(
        log,
        [
            "/api",
            "/apis",
            "/openapi/v3",
            "/openapi/v3/apis/example.com/v1?hash=w2",
            "/openapi/v3/apis/other.io/v1?hash=o1"
        ]
    );
    let w = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .expect("widget");
    assert!(w.root().at_path("spec.maxRetries").is_some());
    assert!(w.root().at_path("spec.replicas").is_none());
    let core_after = src.resolve(&gvk("", "v1", "ConfigMap")).expect("cm");
    assert!(
        Arc::ptr_eq(&core_before, &core_after),
        "unchanged documents keep their types"
    );

    fake.set("/openapi/v3", index(&[("api/v1", "c1")]));
    let changes = src.poll().await.expect("poll");
    assert_eq!(
        changes.removed,
        [
            GroupVersion::new("example.com", "v1"),
            GroupVersion::new("other.io", "v1")
        ]
    );
    assert!(
        src.resolve(&gvk("example.com", "v1", "Widget"))
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn failures_are_reported_and_retried() {
    let fake = Fake::default();
    fake.set(
        "/openapi/v3",
        index(&[("api/v1", "c1"), ("apis/example.com/v1", "w1")]),
    );
    fake.set("/openapi/v3/api/v1?hash=c1", core_doc());
    fake.set_status("/openapi/v3/apis/example.com/v1?hash=w1", 503);
    discovery(&fake);
    let src = LiveSource::new(fake.client(), Limits::default(), ConvertOptions::default());
    let changes = src.poll().await.expect("poll");
    assert_eq!(changes.failed, [GroupVersion::new("example.com", "v1")]);
    let e = src
        .resolve(&gvk("example.com", "v1", "Widget"))
        .unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::Unavailable);
    // The request without its hash, and the server's answer as an HTTP code.
    assert!(
        e.to_string()
            .contains("GET /openapi/v3/apis/example.com/v1: HTTP 503: fake answer 503"),
        "{e}"
    );
    assert!(!e.to_string().contains("hash="), "{e}");
    assert!(src.resolve(&gvk("", "v1", "ConfigMap")).is_ok());

    // Failing again: retried, reported as failed, but nothing was added or changed (so the
    // controller does not re-check its policies on every poll).
    fake.take_log();
    let changes = src.poll().await.expect("poll");
    assert_eq!(changes.failed, [GroupVersion::new("example.com", "v1")]);
    assert!(
        changes.added.is_empty() && changes.changed.is_empty(),
        "{changes:?}"
    );
    assert!(
        fake.take_log()
            .contains(&"/openapi/v3/apis/example.com/v1?hash=w1".to_owned())
    );

    // Back: the group-version counts as added, which re-checks the policies of its kinds.
    fake.set(
        "/openapi/v3/apis/example.com/v1?hash=w1",
        widget_doc("replicas"),
    );
    let changes = src.poll().await.expect("poll");
    assert!(changes.failed.is_empty());
    assert_eq!(changes.added, [GroupVersion::new("example.com", "v1")]);
    assert!(src.resolve(&gvk("example.com", "v1", "Widget")).is_ok());

    // A malformed document is kept; its kinds say why they cannot be typed.
    fake.set(
        "/openapi/v3",
        index(&[("api/v1", "c2"), ("apis/example.com/v1", "w1")]),
    );
    fake.routes.lock().expect("lock").insert(
        "/openapi/v3/api/v1?hash=c2".into(),
        (200, "{not json".into()),
    );
    src.poll().await.expect("poll");
    let e = src.resolve(&gvk("", "v1", "ConfigMap")).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::Invalid);
    assert!(e.to_string().contains("invalid JSON"), "{e}");

    // An unreachable index fails the poll and keeps the previous snapshot.
    fake.set_status("/openapi/v3", 500);
    assert!(src.poll().await.is_err());
    assert!(src.resolve(&gvk("example.com", "v1", "Widget")).is_ok());
}

#[test]
fn index_parsing_and_hashes() {
    let idx = parse_index(&json!({"paths": {
        "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=AB&x=1"},
        "apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1"},
        ".well-known/openid-configuration": {"serverRelativeURL": "/x?hash=1"},
        "apis/bad": {"nothing": true}
    }}));
    assert_eq!(idx.len(), 2);
    assert_eq!(idx[&GroupVersion::new("", "v1")].1, "AB");
    assert_eq!(
        idx[&GroupVersion::new("apps", "v1")].1,
        "/openapi/v3/apis/apps/v1"
    );
}
