//! Bad input never panics, hangs or grows without bound: the kind is reported as not checkable,
//! with a reason that names it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use vapcheck::schema::{
    FilesConfig, FilesError, FilesSource, GroupVersionKind, SchemaErrorKind, SchemaSource,
    document::MAX_DOCUMENT_BYTES,
};

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn kind_doc(group: &str, kind: &str, schema: serde_json::Value) -> String {
    let mut s = schema;
    s["x-kubernetes-group-version-kind"] = json!([{"group": group, "version": "v1", "kind": kind}]);
    json!({"components": {"schemas": {format!("x.{kind}"): s}}}).to_string()
}

fn gvk(g: &str, k: &str) -> GroupVersionKind {
    GroupVersionKind::new(g, "v1", k)
}

#[test]
fn broken_documents_report_per_kind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    write(d, "api/v1.json", "{\"components\": {\"schemas\": {");
    write(d, "api/README.txt", "not a document");
    // Missing $ref target next to a good kind.
    write(
        d,
        "apis/a.io/v1.json",
        &json!({"components": {"schemas": {
            "x.Foo": {"type": "object", "properties": {"spec": {"$ref": "#/components/schemas/x.Missing"}},
                      "x-kubernetes-group-version-kind": [{"group": "a.io", "version": "v1", "kind": "Foo"}]},
            "x.Bar": {"type": "object", "properties": {"spec": {"type": "string"}},
                      "x-kubernetes-group-version-kind": [{"group": "a.io", "version": "v1", "kind": "Bar"}]}
        }}})
        .to_string(),
    );
    // A schema field of the wrong JSON type.
    write(
        d,
        "apis/b.io/v1.json",
        &kind_doc(
            "b.io",
            "Foo",
            json!({"type": "object", "properties": {"x": {"type": 5}}}),
        ),
    );
    // Nesting deeper than the JSON parser accepts.
    let mut deep = String::from(
        r#"{"components":{"schemas":{"x.Foo":{"x-kubernetes-group-version-kind":[{"group":"c.io","version":"v1","kind":"Foo"}],"type":"object","properties":{"x":"#,
    );
    for _ in 0..300 {
        deep.push_str(r#"{"type":"object","properties":{"x":"#);
    }
    deep.push_str(r#"{"type":"string"}"#);
    deep.push_str(&"}}".repeat(300));
    deep.push_str("}}}}}");
    write(d, "apis/c.io/v1.json", &deep);
    // Exponential expansion: each component references the next one twice, 40 levels.
    let mut schemas = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/components/schemas/L{}", i + 1);
        schemas.insert(
            format!("L{i}"),
            json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
        );
    }
    schemas.insert("L40".into(), json!({"type": "string"}));
    schemas["L0"]["x-kubernetes-group-version-kind"] =
        json!([{"group": "e.io", "version": "v1", "kind": "Foo"}]);
    write(
        d,
        "apis/e.io/v1.json",
        &json!({"components": {"schemas": schemas}}).to_string(),
    );
    // Larger than the limit (sparse: nothing is written).
    let huge = d.join("apis/f.io/v1.json");
    std::fs::create_dir_all(huge.parent().expect("parent")).expect("mkdir");
    std::fs::File::create(&huge)
        .expect("create")
        .set_len(MAX_DOCUMENT_BYTES as u64 + 1)
        .expect("set_len");
    // Not a document at all.
    write(d, "apis/g.io/v1.json", "[1, 2, 3]");

    let started = Instant::now();
    let src = FilesSource::load(&FilesConfig {
        openapi_dir: Some(d.to_owned()),
        ..FilesConfig::default()
    })
    .expect("a broken document does not fail the load");

    let e = src.resolve(&gvk("", "Pod")).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::Invalid);
    assert!(e.to_string().starts_with("/v1, Kind=Pod: schema not usable: the OpenAPI document for v1 is malformed: invalid JSON"), "{e}");

    let e = src.resolve(&gvk("a.io", "Foo")).unwrap_err();
    assert!(
        e.is_not_found(),
        "upstream wraps ErrSchemaNotFound for a missing $ref"
    );
    assert!(
        e.to_string().contains("x.Missing") && e.to_string().contains("Kind=Foo"),
        "{e}"
    );
    assert!(src.resolve(&gvk("a.io", "Bar")).is_ok());

    let e = src.resolve(&gvk("b.io", "Foo")).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::Invalid);
    assert!(
        e.to_string()
            .contains("properties[\"x\"].type: must be a string or a list of strings"),
        "{e}"
    );

    let e = src.resolve(&gvk("c.io", "Foo")).unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");

    let e = src.resolve(&gvk("e.io", "Foo")).unwrap_err();
    assert_eq!(e.kind, SchemaErrorKind::Invalid);
    assert!(e.to_string().contains("more than 500000 type nodes"), "{e}");

    let e = src.resolve(&gvk("f.io", "Foo")).unwrap_err();
    assert!(e.to_string().contains("larger than"), "{e}");

    let e = src.resolve(&gvk("g.io", "Foo")).unwrap_err();
    assert!(e.is_not_found(), "{e}");

    assert!(started.elapsed() < Duration::from_secs(60), "bounded work");
}

#[test]
fn unreadable_inputs_fail_the_load_with_the_path() {
    let missing = Path::new("/nonexistent/vapcheck/openapi");
    let e = FilesSource::load(&FilesConfig {
        openapi_dir: Some(missing.to_owned()),
        ..FilesConfig::default()
    })
    .unwrap_err();
    assert!(matches!(e, FilesError::Io { .. }));
    assert!(
        e.to_string().starts_with("/nonexistent/vapcheck/openapi:"),
        "{e}"
    );

    let tmp = tempfile::tempdir().expect("tempdir");
    write(
        tmp.path(),
        "bad.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: [\n",
    );
    let e = FilesSource::load(&FilesConfig {
        crd_paths: vec![tmp.path().join("bad.yaml")],
        ..FilesConfig::default()
    })
    .unwrap_err();
    assert!(matches!(e, FilesError::Crd { .. }));
    assert!(e.to_string().contains("bad.yaml"), "{e}");
}

#[test]
fn yaml_alias_bombs_are_refused_quickly() {
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    write(tmp.path(), "bomb.yaml", &bomb);
    let started = Instant::now();
    let r = FilesSource::load(&FilesConfig {
        crd_paths: vec![tmp.path().join("bomb.yaml")],
        ..FilesConfig::default()
    });
    assert!(r.is_err());
    assert!(started.elapsed() < Duration::from_secs(30));
}
