//! Fuzzes the schema conversion: bytes → an OpenAPI v3 document (JSON,
//! `OpenApiDocument::from_slice`, first byte even; its group-version is the one of its first
//! `x-kubernetes-group-version-kind`, else `example.com/v1`) or CRD manifests (YAML/JSON,
//! `crds_from_text` + `FilesSource::from_parts`, first byte odd) → every kind they declare
//! resolved → the declaration type rendered canonically and converted to a CEL type. No input
//! may panic, and conversion is deterministic: the same bytes converted twice (two sources)
//! give the same canonical rendering or the same error.
//! Seeds: fuzz/seeds/schema (fuzz/make-seeds: the CRD fixtures and the two smallest published
//! v1.35 documents).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vapcheck::schema::crd::crds_from_text;
use vapcheck::schema::{
    ConvertOptions, FilesSource, GroupVersion, Limits, OpenApiDocument, SchemaSource,
};

/// The group-version a document describes (its first component with a GVK), else
/// `example.com/v1`.
fn group_version_of(bytes: &[u8]) -> GroupVersion {
    let found = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/components/schemas")?
                .as_object()?
                .values()
                .find_map(|s| {
                    let gvk = s
                        .get("x-kubernetes-group-version-kind")?
                        .as_array()?
                        .first()?;
                    let group = gvk.get("group")?.as_str()?;
                    let version = gvk.get("version")?.as_str()?;
                    GroupVersion::parse_api_version(&if group.is_empty() {
                        version.to_owned()
                    } else {
                        format!("{group}/{version}")
                    })
                })
        });
    found.unwrap_or_else(|| {
        GroupVersion::parse_api_version("example.com/v1").expect("group version")
    })
}

/// Every kind of one conversion, rendered: `(gvk, canonical or error)`, sorted.
fn convert(data: &[u8]) -> Vec<(String, String)> {
    let (mode, rest) = match data.split_first() {
        Some(x) => x,
        None => return Vec::new(),
    };
    let source = if mode % 2 == 0 {
        let doc = OpenApiDocument::from_slice(group_version_of(rest), "fuzz", rest);
        FilesSource::from_parts([doc], &[], Limits::default(), ConvertOptions::default())
    } else {
        let Ok(text) = std::str::from_utf8(rest) else {
            return Vec::new();
        };
        let Ok(crds) = crds_from_text(text) else {
            return Vec::new();
        };
        FilesSource::from_parts([], &crds, Limits::default(), ConvertOptions::default())
    };
    let Ok(source) = source else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for gvk in source.catalog().kinds() {
        let rendered = match source.resolve(&gvk) {
            Ok(root) => {
                let cel = vapcheck::engine::cel_type(root.root());
                format!("{} / {cel}", root.root().canonical())
            }
            Err(e) => format!("error: {e}"),
        };
        out.push((gvk.to_string(), rendered));
    }
    out.sort();
    out
}

fuzz_target!(|data: &[u8]| {
    let first = convert(data);
    assert_eq!(
        first,
        convert(data),
        "converting the same bytes twice differs"
    );
});
