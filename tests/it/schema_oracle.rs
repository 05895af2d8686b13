//! The schema conversion against upstream's own results.
//!
//! `tests/fixtures/schema-oracle/*.tsv` are produced by `e2e/oracle/cmd/schemaoracle` (Go, linked
//! against Kubernetes 1.37.1): for every kind, upstream's `PopulateRefs` + `SchemaDeclType` +
//! `MaybeAssignTypeName(<Kind>)` rendered canonically, with its FNV-1a 64 hash and length.
//! Here the same kinds are converted by vapcheck and rendered the same way.

use std::path::PathBuf;

use crate::support::shared_dir;
use vapcheck::schema::{
    ConvertOptions, DeclType, FilesConfig, FilesSource, GroupVersionKind, GroupVersionResource,
    Limits, RootType, SchemaSource, files::fnv1a64,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct OracleRow {
    gvk: GroupVersionKind,
    hash: String,
    len: usize,
}

fn oracle(name: &str) -> Vec<OracleRow> {
    let text =
        std::fs::read_to_string(fixtures().join("schema-oracle").join(name)).expect("oracle file");
    text.lines()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), 4, "{l}");
            let parts: Vec<&str> = cols[0].split('/').collect();
            let group = if parts[0] == "core" { "" } else { parts[0] };
            OracleRow {
                gvk: GroupVersionKind::new(group, parts[1], parts[2]),
                hash: cols[2].to_owned(),
                len: cols[3].parse().expect("len"),
            }
        })
        .collect()
}

/// The oracle's rendering: `-` for a nil declaration type.
fn render(t: &RootType) -> String {
    if t.is_typed() {
        t.root().canonical()
    } else {
        "-".to_owned()
    }
}

fn builtin() -> FilesSource {
    FilesSource::load(&FilesConfig {
        openapi_dir: Some(shared_dir().join("openapi/v1.35")),
        ..FilesConfig::default()
    })
    .expect("load v1.35 documents")
}

fn compare(source: &FilesSource, rows: &[OracleRow]) {
    let mut mismatches = Vec::new();
    for row in rows {
        match source.resolve(&row.gvk) {
            Ok(t) => {
                let c = render(&t);
                let h = format!("{:016x}", fnv1a64(c.as_bytes()));
                if h != row.hash || c.len() != row.len {
                    mismatches.push(format!(
                        "{}: len {} vs upstream {}",
                        row.gvk,
                        c.len(),
                        row.len
                    ));
                }
            }
            Err(e) => mismatches.push(format!("{e}")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} kinds differ from upstream:\n{}",
        mismatches.len(),
        rows.len(),
        mismatches.join("\n")
    );
}

#[test]
fn every_kind_of_the_v1_35_documents_converts_exactly_as_upstream() {
    let source = builtin();
    let rows = oracle("published-v1.35.tsv");
    let kinds = source.catalog().kinds();
    assert_eq!(kinds.len(), 243, "kinds declared by the v1.35 documents");
    let mut oracle_kinds: Vec<GroupVersionKind> = rows.iter().map(|r| r.gvk.clone()).collect();
    oracle_kinds.sort();
    assert_eq!(kinds, oracle_kinds);
    for gvk in &kinds {
        let t = source.resolve(gvk).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.is_typed(), "{gvk}");
    }
    compare(&source, &rows);
}

#[test]
fn crd_manifests_convert_as_the_api_server_publishes_them() {
    let source = FilesSource::load(&FilesConfig {
        crd_paths: vec![fixtures().join("crds")],
        ..FilesConfig::default()
    })
    .expect("load CRDs");
    let rows = oracle("crds.tsv");
    assert_eq!(rows.len(), 8);
    compare(&source, &rows);
}

fn at(t: &RootType, path: &str) -> Option<String> {
    t.root().at_path(path).map(ToString::to_string)
}

fn gvk(g: &str, v: &str, k: &str) -> GroupVersionKind {
    GroupVersionKind::new(g, v, k)
}

#[test]
fn subresource_kinds_resolve_like_kcm_definitions() {
    // Published only beside their parent resources; KCM finds them in its compiled-in
    // definitions. The result equals KCM 1.37.1's.
    let source = builtin();
    // (TokenRequest gained `spec.attestations` in 1.37, so only its presence is checked.)
    let wanted = ["autoscaling/v1/Scale", "policy/v1/Eviction"];
    let rows: Vec<OracleRow> = oracle("definitions-k8s-1.37.1.tsv")
        .into_iter()
        .filter(|r| {
            wanted.contains(&format!("{}/{}/{}", r.gvk.group, r.gvk.version, r.gvk.kind).as_str())
        })
        .collect();
    assert_eq!(rows.len(), 2);
    compare(&source, &rows);
    let token = source
        .resolve(&gvk("authentication.k8s.io", "v1", "TokenRequest"))
        .expect("TokenRequest");
    assert_eq!(at(&token, "spec.audiences[0]").as_deref(), Some("string"));
    let scale = source
        .resolve(&gvk("autoscaling", "v1", "Scale"))
        .expect("Scale");
    assert_eq!(at(&scale, "spec.replicas").as_deref(), Some("int"));
}

#[test]
fn deployment_field_paths_type_as_upstream() {
    let source = builtin();
    let d = source
        .resolve(&gvk("apps", "v1", "Deployment"))
        .expect("Deployment");
    let c = "spec.template.spec.containers[0]";
    assert_eq!(at(&d, "spec.replicas").as_deref(), Some("int"));
    assert_eq!(at(&d, &format!("{c}.image")).as_deref(), Some("string"));
    assert_eq!(
        at(&d, &format!("{c}.ports[0].containerPort")).as_deref(),
        Some("int")
    );
    assert_eq!(
        at(&d, "spec.strategy.rollingUpdate.maxSurge").as_deref(),
        Some("dyn")
    );
    assert_eq!(at(&d, "metadata.labels['app']").as_deref(), Some("string"));
    assert_eq!(
        at(&d, "metadata.creationTimestamp").as_deref(),
        Some("timestamp")
    );
    assert_eq!(at(&d, "metadata.__namespace__").as_deref(), Some("string"));
    assert_eq!(at(&d, "metadata.namespace"), None);
    assert_eq!(
        at(&d, "status.conditions[0].lastUpdateTime").as_deref(),
        Some("timestamp")
    );
    assert_eq!(
        at(&d, &format!("{c}.securityContext")).as_deref(),
        Some("Deployment.spec.template.spec.containers.@idx.securityContext")
    );
    // Quantity is published (and compiled into KCM 1.37.1) as oneOf string/number without a
    // type, so upstream hides every map of quantities: `resources` only has `claims`.
    let resources = d
        .root()
        .at_path(&format!("{c}.resources"))
        .and_then(DeclType::as_object)
        .expect("object");
    let fields: Vec<&str> = resources.fields().map(|(n, _)| n).collect();
    assert_eq!(fields, ["claims"]);
    assert_eq!(at(&d, &format!("{c}.resources.limits['cpu']")), None);
    assert_eq!(at(&d, "spec.template.spec.overhead"), None);

    // The opt-in deviation types them as strings.
    let typed = FilesSource::load(&FilesConfig {
        openapi_dir: Some(shared_dir().join("openapi/v1.35")),
        options: ConvertOptions {
            quantity_as_string: true,
        },
        ..FilesConfig::default()
    })
    .expect("load");
    let d = typed
        .resolve(&gvk("apps", "v1", "Deployment"))
        .expect("Deployment");
    assert_eq!(
        at(&d, &format!("{c}.resources.limits['cpu']")).as_deref(),
        Some("string")
    );
    assert_eq!(
        at(&d, &format!("{c}.resources.requests")).as_deref(),
        Some("map(string, string)")
    );
}

#[test]
fn recursive_builtin_schemas_are_cut_with_empty_objects() {
    let source = builtin();
    let crd = source
        .resolve(&gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        ))
        .expect("CRD kind");
    let s = "spec.versions[0].schema.openAPIV3Schema";
    assert_eq!(at(&crd, &format!("{s}.type")).as_deref(), Some("string"));
    // JSONSchemaProps refers to itself: the inner occurrences are objects with no fields.
    let inner = crd
        .root()
        .at_path(&format!("{s}.properties['x']"))
        .and_then(DeclType::as_object)
        .expect("object");
    assert_eq!(inner.fields().len(), 0);
    // JSON, JSONSchemaPropsOrArray/OrBool have no type: hidden.
    assert_eq!(at(&crd, &format!("{s}.default")), None);
    assert_eq!(at(&crd, &format!("{s}.items")), None);
    assert_eq!(at(&crd, &format!("{s}.additionalProperties")), None);
}

#[test]
fn types_with_custom_openapi_definitions() {
    let source = builtin();
    let rev = source
        .resolve(&gvk("apps", "v1", "ControllerRevision"))
        .expect("ControllerRevision");
    // RawExtension and FieldsV1 are `type: object` without properties: objects with no fields.
    let data = rev
        .root()
        .at_path("data")
        .and_then(DeclType::as_object)
        .expect("object");
    assert_eq!(
        (data.name(), data.fields().len()),
        ("ControllerRevision.data", 0)
    );
    let f = rev
        .root()
        .at_path("metadata.managedFields[0].fieldsV1")
        .and_then(DeclType::as_object)
        .expect("object");
    assert_eq!(f.fields().len(), 0);
    // Time and MicroTime are date-time strings.
    assert_eq!(
        at(&rev, "metadata.managedFields[0].time").as_deref(),
        Some("timestamp")
    );
    let lease = source
        .resolve(&gvk("coordination.k8s.io", "v1", "Lease"))
        .expect("Lease");
    assert_eq!(at(&lease, "spec.renewTime").as_deref(), Some("timestamp"));
    // IntOrString is dyn.
    let svc = source.resolve(&gvk("", "v1", "Service")).expect("Service");
    assert_eq!(at(&svc, "spec.ports[0].targetPort").as_deref(), Some("dyn"));
    // Byte strings.
    let secret = source.resolve(&gvk("", "v1", "Secret")).expect("Secret");
    assert_eq!(at(&secret, "data['k']").as_deref(), Some("bytes"));
}

#[test]
fn type_registry_answers_provider_queries() {
    let source = builtin();
    let pod = source.resolve(&gvk("", "v1", "Pod")).expect("Pod");
    assert!(pod.find_type("Pod").is_some());
    assert_eq!(
        pod.find_field("Pod.spec", "containers")
            .map(ToString::to_string)
            .as_deref(),
        Some("list(Pod.spec.containers.@idx)")
    );
    assert_eq!(
        pod.find_field("Pod.spec.containers.@idx", "name")
            .map(ToString::to_string)
            .as_deref(),
        Some("string")
    );
    assert!(pod.find_field("Pod.spec", "nope").is_none());
    assert!(pod.object_count() > 100);
    // Shared: resolving twice gives the same allocation.
    let again = source.resolve(&gvk("", "v1", "Pod")).expect("Pod");
    assert!(std::sync::Arc::ptr_eq(&pod, &again));
}

#[test]
fn resources_map_to_kinds_like_the_rest_mapper() {
    let source = builtin();
    let kinds = |g: &str, v: &str, r: &str| -> Vec<String> {
        source
            .kinds_for(&GroupVersionResource::new(g, v, r))
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        kinds("apps", "v1", "deployments"),
        ["apps/v1, Kind=Deployment"]
    );
    assert_eq!(
        kinds("apps", "v1", "deployment"),
        ["apps/v1, Kind=Deployment"]
    );
    assert_eq!(
        kinds("apps", "v1", "deployments/scale"),
        ["autoscaling/v1, Kind=Scale"]
    );
    assert_eq!(
        kinds("apps", "v1", "deployments/status"),
        ["apps/v1, Kind=Deployment"]
    );
    assert_eq!(
        kinds("", "v1", "pods/eviction"),
        ["policy/v1, Kind=Eviction"]
    );
    assert_eq!(kinds("", "v1", "pods/exec"), ["/v1, Kind=PodExecOptions"]);
    assert_eq!(
        kinds("", "v1", "namespaces/finalize"),
        ["/v1, Kind=Namespace"]
    );
    assert_eq!(
        kinds("", "v1", "serviceaccounts/token"),
        ["authentication.k8s.io/v1, Kind=TokenRequest"]
    );
    // The empty (core) group means "any group" to the RESTMapper.
    assert_eq!(
        kinds("", "v1", "events"),
        ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
    );
    assert_eq!(kinds("", "v1", "endpoints"), ["/v1, Kind=Endpoints"]);
    assert!(kinds("apps", "v1", "nosuchthings").is_empty());
    assert_eq!(
        kinds("apps", "v1", "deploymentlists"),
        ["apps/v1, Kind=DeploymentList"]
    );
}

#[test]
fn crd_kinds_resources_and_errors() {
    let source = FilesSource::load(&FilesConfig {
        crd_paths: vec![
            fixtures().join("crds"),
            fixtures().join("crds-invalid/nonstructural.yaml"),
        ],
        ..FilesConfig::default()
    })
    .expect("load CRDs");
    let w = source
        .resolve(&gvk("example.com", "v1", "Widget"))
        .expect("Widget");
    assert_eq!(at(&w, "spec.maxSurge").as_deref(), Some("dyn"));
    assert_eq!(at(&w, "spec.ports[0].targetPort").as_deref(), Some("dyn"));
    assert_eq!(at(&w, "spec.__in__").as_deref(), Some("bool"));
    assert_eq!(at(&w, "spec.foo__dash__bar").as_deref(), Some("string"));
    assert_eq!(
        at(&w, "spec.a__dot__b__slash__c").as_deref(),
        Some("string")
    );
    assert_eq!(at(&w, "spec.x__underscores__y").as_deref(), Some("string"));
    assert_eq!(at(&w, "spec.payload").as_deref(), Some("bytes"));
    assert_eq!(at(&w, "spec.timeout").as_deref(), Some("duration"));
    assert_eq!(at(&w, "spec.day").as_deref(), Some("timestamp"));
    assert_eq!(
        at(&w, "spec.template.metadata.labels['a']").as_deref(),
        Some("string")
    );
    assert_eq!(
        at(&w, "spec.template.spec"),
        None,
        "preserve-unknown-fields exposes nothing"
    );
    assert_eq!(at(&w, "spec.anything"), None);
    assert_eq!(at(&w, "spec.extra.known").as_deref(), Some("string"));
    // The user's metadata schema is replaced by ObjectMeta.
    assert_eq!(at(&w, "metadata.uid").as_deref(), Some("string"));
    let kinds = |g: &str, v: &str, r: &str| -> Vec<String> {
        source
            .kinds_for(&GroupVersionResource::new(g, v, r))
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        kinds("example.com", "v1", "widgets"),
        ["example.com/v1, Kind=Widget"]
    );
    assert_eq!(
        kinds("example.com", "v1beta1", "widget"),
        ["example.com/v1beta1, Kind=Widget"]
    );
    assert!(
        kinds("example.com", "v1alpha1", "widgets").is_empty(),
        "not served"
    );
    assert_eq!(
        kinds("example.com", "v1", "widgets/scale"),
        ["autoscaling/v1, Kind=Scale"]
    );
    assert_eq!(
        kinds("policy.example.org", "v2", "clusterpolicies"),
        ["policy.example.org/v2, Kind=ClusterPolicy"]
    );
    assert_eq!(
        kinds("policy.example.org", "v2", "clusterpolicy"),
        ["policy.example.org/v2, Kind=ClusterPolicy"]
    );

    let e = source
        .resolve(&gvk("example.com", "v1", "Gadget"))
        .unwrap_err();
    assert!(!e.is_not_found());
    assert!(
        e.to_string()
            .starts_with("example.com/v1, Kind=Gadget: schema not usable:"),
        "{e}"
    );
    assert!(e.to_string().contains("properties[\"spec\"].type"), "{e}");
    assert!(
        source
            .resolve(&gvk("example.com", "v1alpha1", "Widget"))
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn limits_apply_to_builtin_kinds() {
    let source = FilesSource::load(&FilesConfig {
        openapi_dir: Some(shared_dir().join("openapi/v1.35")),
        limits: Limits {
            max_nodes: 1_000,
            max_depth: 128,
        },
        ..FilesConfig::default()
    })
    .expect("load");
    let e = source
        .resolve(&gvk("apps", "v1", "Deployment"))
        .unwrap_err();
    assert!(!e.is_not_found());
    assert!(e.to_string().contains("more than 1000 type nodes"), "{e}");
    assert!(source.resolve(&gvk("", "v1", "ConfigMap")).is_ok());
}

/// The compiled-in 1.37 documents (`vapcheck check` without `--openapi`) against KCM 1.37.1's
/// own definitions: every kind both know converts to exactly the declaration type KCM uses.
#[test]
fn embedded_1_37_documents_convert_exactly_as_kcm_1_37_1_definitions() {
    let dir = std::env::temp_dir().join(format!("vapcheck-embedded-oracle-{}", std::process::id()));
    vapcheck::schema::embedded::write_folder("1.37", &dir).expect("write the built-in documents");
    let source = FilesSource::load(&FilesConfig {
        openapi_dir: Some(dir.clone()),
        ..FilesConfig::default()
    })
    .expect("load the built-in documents");
    let _ = std::fs::remove_dir_all(&dir);
    let kinds = source.catalog().kinds();
    let rows: Vec<OracleRow> = oracle("definitions-k8s-1.37.1.tsv")
        .into_iter()
        .filter(|r| kinds.contains(&r.gvk))
        .collect();
    println!(
        "embedded 1.37: {} kinds declared, {} of them in KCM 1.37.1's definitions, compared",
        kinds.len(),
        rows.len()
    );
    assert_eq!(
        kinds.len(),
        263,
        "kinds declared by the embedded 1.37 documents"
    );
    // Of the 263 kinds the embedded 1.37 documents declare, those KCM 1.37.1's definitions also
    // have: a change to the embedded documents (scripts/gen-embedded-openapi) or to the
    // oracle's definitions file changes it.
    assert_eq!(rows.len(), 259, "kinds in common");
    compare(&source, &rows);
}
