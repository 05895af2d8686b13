//! Random schemas and names: conversion never panics, stays within its limits, and produces
//! well-formed, indexable types; escaping yields CEL identifiers and never merges two names.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use vapcheck::schema::{
    Components, ConvertError, ConvertOptions, DeclType, Limits, RootType, escape::escape,
};

const COMPONENTS: [&str; 4] = ["A", "B", "C", "D"];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec!["string", "integer", "number", "boolean", "null", "weird", ""])
            .prop_map(|t| json!({"type": t})),
        prop::sample::select(vec!["byte", "duration", "date", "date-time", "int-or-string", "quantity"])
            .prop_map(|f| json!({"type": "string", "format": f})),
        Just(json!({"x-kubernetes-int-or-string": true})),
        Just(json!({"oneOf": [{"type": "string"}, {"type": "number"}]})),
        Just(json!({})),
        prop::sample::select(COMPONENTS.to_vec()).prop_map(|c| json!({"$ref": format!("#/components/schemas/{c}")})),
        prop::sample::select(COMPONENTS.to_vec())
            .prop_map(|c| json!({"allOf": [{"$ref": format!("#/components/schemas/{c}")}], "description": "d"})),
        Just(json!({"$ref": "#/components/schemas/Missing"})),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}",
        prop::sample::select(vec![
            "kind",
            "apiVersion",
            "metadata",
            "name",
            "generateName",
            "namespace",
            "in"
        ])
        .prop_map(str::to_owned),
        "[a-zA-Z0-9_./ -]{0,6}",
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            (prop::collection::btree_map(name(), inner.clone(), 0..5), any::<bool>(), any::<bool>()).prop_map(
                |(props, typed, embedded)| {
                    let mut o = json!({"properties": props});
                    if typed {
                        o["type"] = json!("object");
                    }
                    if embedded {
                        o["x-kubernetes-embedded-resource"] = json!(true);
                    }
                    o
                }
            ),
            inner.clone().prop_map(|i| json!({"type": "array", "items": i})),
            inner.clone().prop_map(|i| json!({"type": "object", "additionalProperties": i})),
            (inner.clone(), any::<bool>()).prop_map(|(i, b)| json!({"type": ["object", "string"], "additionalProperties": b, "properties": {"p": i}})),
        ]
    })
}

fn check_names(t: &DeclType, prefix: &str, seen: &mut HashMap<String, usize>) {
    match t {
        DeclType::Object(o) => {
            assert!(o.name().starts_with(prefix), "{} under {prefix}", o.name());
            *seen.entry(o.name().to_owned()).or_default() += 1;
            let mut last: Option<&str> = None;
            for (f, ft) in o.fields() {
                assert!(last.is_none_or(|l| l < f), "fields sorted and unique");
                assert!(is_cel_ident(f), "{f}");
                last = Some(f);
                check_names(ft, prefix, seen);
            }
        }
        DeclType::List(e) | DeclType::Map(e) => check_names(e, prefix, seen),
        DeclType::Scalar(_) | DeclType::Dyn => {}
    }
}

fn is_cel_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn conversion_is_total_and_bounded(
        root in schema(),
        comps in prop::collection::vec(schema(), 4),
        quantity in any::<bool>(),
    ) {
        let mut schemas = Map::new();
        for (n, s) in COMPONENTS.iter().zip(comps) {
            schemas.insert((*n).to_owned(), s);
        }
        schemas.insert("Root".into(), root);
        let limits = Limits { max_nodes: 20_000, max_depth: 40 };
        let options = ConvertOptions { quantity_as_string: quantity };
        match Components::new(&schemas).convert_root("Root", "Kind", limits, options) {
            Ok(Some(t)) => {
                prop_assert!(t.node_count() <= limits.max_nodes);
                let mut seen = HashMap::new();
                check_names(&t, "Kind", &mut seen);
                // Object names are paths, hence unique; the registry finds every one.
                prop_assert!(seen.values().all(|n| *n == 1));
                let r = RootType::new(t);
                prop_assert_eq!(r.object_count(), seen.len());
                for n in seen.keys() {
                    prop_assert!(r.find_type(n).is_some());
                }
            }
            Ok(None) => {}
            Err(ConvertError::MissingRef { reference }) => prop_assert!(reference.ends_with("Missing")),
            Err(ConvertError::TooLarge(_) | ConvertError::TooDeep { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    #[test]
    fn escaping_gives_distinct_cel_identifiers(a in "[ -~]{0,8}", b in "[ -~]{0,8}") {
        let ea = escape(&a);
        let eb = escape(&b);
        if let Some(x) = &ea {
            prop_assert!(is_cel_ident(x), "{x}");
        }
        if a != b && ea.is_some() {
            prop_assert_ne!(ea, eb);
        }
    }
}
