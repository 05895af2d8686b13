//! One test per conversion rule of schemas.go / refs.go.

use serde_json::{Value, json};

use super::*;

/// Converts `root` (placed in a document as component `Root`, next to `others`) as kind `K`.
fn conv_with(
    root: Value,
    others: Value,
    options: ConvertOptions,
) -> Result<Option<DeclType>, ConvertError> {
    let mut schemas = match others {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    schemas.insert("Root".into(), root);
    Components::new(&schemas).convert_root("Root", "K", Limits::default(), options)
}

fn conv(root: Value) -> Option<DeclType> {
    conv_with(root, json!({}), ConvertOptions::default()).expect("converts")
}

/// Canonical rendering, `-` for "not exposed".
fn canon(root: Value) -> String {
    conv(root)
        .map(|t| t.canonical())
        .unwrap_or_else(|| "-".into())
}

/// The canonical form of the root object's field `f` when the root is a complete resource.
fn field(prop: Value) -> String {
    let t = conv(resource(json!({"f": prop}))).expect("object");
    t.as_object()
        .and_then(|o| o.field("f"))
        .map(DeclType::canonical)
        .unwrap_or_else(|| "-".into())
}

/// An object with full type meta, so WithTypeAndObjectMeta leaves it alone.
fn resource(extra: Value) -> Value {
    let mut props = json!({
        "kind": {"type": "string"},
        "apiVersion": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut props, extra) {
        p.extend(e);
    }
    json!({"type": "object", "properties": props})
}

const META: &str =
    "apiVersion:string,kind:string,metadata:<K.metadata>(generateName:string,name:string)";

#[test]
fn scalars_and_formats() {
    assert_eq!(field(json!({"type": "boolean"})), "bool");
    assert_eq!(field(json!({"type": "integer", "format": "int32"})), "int");
    assert_eq!(
        field(json!({"type": "number", "format": "double"})),
        "double"
    );
    assert_eq!(field(json!({"type": "string"})), "string");
    assert_eq!(field(json!({"type": "string", "format": "byte"})), "bytes");
    assert_eq!(
        field(json!({"type": "string", "format": "duration"})),
        "duration"
    );
    assert_eq!(
        field(json!({"type": "string", "format": "date"})),
        "timestamp"
    );
    assert_eq!(
        field(json!({"type": "string", "format": "date-time"})),
        "timestamp"
    );
    assert_eq!(
        field(json!({"type": "string", "format": "quantity"})),
        "string"
    );
    assert_eq!(field(json!({"type": "string", "format": "uuid"})), "string");
    // Unknown types and "null" are not exposed.
    assert_eq!(field(json!({"type": "null"})), "-");
    assert_eq!(field(json!({"type": "file"})), "-");
}

#[test]
fn int_or_string_is_dyn_and_checked_first() {
    assert_eq!(field(json!({"x-kubernetes-int-or-string": true})), "dyn");
    assert_eq!(field(json!({"format": "int-or-string"})), "dyn");
    // Before the type switch: even an array with int-or-string is dyn.
    assert_eq!(
        field(json!({"type": "array", "x-kubernetes-int-or-string": true})),
        "dyn"
    );
    // Only the boolean true counts, and the key is case-sensitive.
    assert_eq!(field(json!({"x-kubernetes-int-or-string": "true"})), "-");
    assert_eq!(field(json!({"X-Kubernetes-Int-Or-String": true})), "-");
    assert_eq!(
        field(json!({"x-kubernetes-int-or-string": false, "type": "integer"})),
        "int"
    );
}

#[test]
fn no_type_hides_the_property() {
    assert_eq!(field(json!({"description": "anything"})), "-");
    // The published Quantity: oneOf without a type.
    assert_eq!(
        field(json!({"oneOf": [{"type": "string"}, {"type": "number"}]})),
        "-"
    );
    assert_eq!(
        field(json!({"anyOf": [{"type": "integer"}, {"type": "string"}]})),
        "-"
    );
    assert_eq!(field(json!({"type": []})), "-");
}

#[test]
fn quantity_as_string_option_is_opt_in() {
    let root = resource(
        json!({"q": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                               "n": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
                               "o": {"oneOf": [{"type": "string"}, {"type": "object"}]}}),
    );
    let opt = ConvertOptions {
        quantity_as_string: true,
    };
    let t = conv_with(root, json!({}), opt).expect("ok").expect("typed");
    let o = t.as_object().expect("object");
    assert_eq!(o.field("q"), Some(&DeclType::Scalar(Scalar::String)));
    assert_eq!(o.field("n"), None);
    assert_eq!(o.field("o"), None);
}

#[test]
fn first_entry_of_a_type_list_wins() {
    assert_eq!(field(json!({"type": ["integer", "string"]})), "int");
    assert_eq!(field(json!({"type": ["null", "string"]})), "-");
}

#[test]
fn arrays() {
    assert_eq!(
        field(json!({"type": "array", "items": {"type": "string"}})),
        "[string]"
    );
    // Without items, or items given as a list, or unexposed items: the array is hidden.
    assert_eq!(field(json!({"type": "array"})), "-");
    assert_eq!(
        field(json!({"type": "array", "items": [{"type": "string"}]})),
        "-"
    );
    assert_eq!(
        field(json!({"type": "array", "items": {"description": "untyped"}})),
        "-"
    );
    assert_eq!(
        field(
            json!({"type": "array", "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}}})
        ),
        "[[<K.f.@idx.@idx>(a:int)]]"
    );
}

#[test]
fn maps() {
    assert_eq!(
        field(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        "{string}"
    );
    // additionalProperties wins over properties.
    assert_eq!(
        field(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}})
        ),
        "{int}"
    );
    // An unexposed value type hides the whole map; {} is a schema without a type.
    assert_eq!(
        field(json!({"type": "object", "additionalProperties": {}})),
        "-"
    );
    // A boolean additionalProperties is ignored: plain object.
    assert_eq!(
        field(
            json!({"type": "object", "additionalProperties": true, "properties": {"a": {"type": "string"}}})
        ),
        "<K.f>(a:string)"
    );
    assert_eq!(
        field(json!({"type": "object", "additionalProperties": false})),
        "<K.f>()"
    );
    assert_eq!(
        field(
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "boolean"}}}})
        ),
        "{<K.f.@elem>(x:bool)}"
    );
}

#[test]
fn objects() {
    assert_eq!(field(json!({"type": "object"})), "<K.f>()");
    assert_eq!(
        field(json!({"type": "object", "properties": {}})),
        "<K.f>()"
    );
    // Unexposed properties are dropped, the rest kept and sorted.
    assert_eq!(
        field(
            json!({"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}, "u": {}}})
        ),
        "<K.f>(a:int,z:string)"
    );
    // preserve-unknown-fields changes nothing.
    assert_eq!(
        field(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
        "<K.f>()"
    );
    assert_eq!(
        field(json!({"x-kubernetes-preserve-unknown-fields": true})),
        "-"
    );
}

#[test]
fn property_names_are_escaped_in_fields_and_type_names() {
    assert_eq!(
        field(json!({"type": "object", "properties": {
            "namespace": {"type": "string"},
            "foo-bar": {"type": "object", "properties": {"x": {"type": "string"}}},
            "a.b/c": {"type": "string"},
            "x__y": {"type": "string"},
            "1st": {"type": "string"},
            "white space": {"type": "string"},
            "": {"type": "string"}
        }})),
        "<K.f>(__namespace__:string,a__dot__b__slash__c:string,foo__dash__bar:<K.f.foo__dash__bar>(x:string),x__underscores__y:string)"
    );
}

#[test]
fn root_without_type_meta_gets_the_minimal_one() {
    assert_eq!(
        canon(json!({"type": "object", "properties": {"spec": {"type": "string"}}})),
        format!("<K>({META},spec:string)")
    );
    // A richer metadata is replaced as soon as any condition fails (here: kind missing).
    assert_eq!(
        canon(json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}
        }})),
        format!("<K>({META})")
    );
    // kind as a type list containing string counts.
    let ok = canon(json!({"type": "object", "properties": {
        "kind": {"type": ["integer", "string"]},
        "apiVersion": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}, "uid": {"type": "string"}}}
    }}));
    assert_eq!(
        ok,
        "<K>(apiVersion:string,kind:int,metadata:<K.metadata>(generateName:string,name:string,uid:string))"
    );
    // Complete type meta: used unchanged.
    assert_eq!(canon(resource(json!({}))), format!("<K>({META})"));
    // A root without type or with another type: the added properties do not matter.
    assert_eq!(canon(json!({"properties": {}})), "-");
    assert_eq!(canon(json!({"type": "string"})), "string");
    assert_eq!(
        canon(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        "{string}"
    );
}

#[test]
fn type_meta_check_sees_through_refs() {
    let others = json!({
        "Meta": {"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}, "uid": {"type": "string"}}},
        "Str": {"type": "string"}
    });
    let root = json!({"type": "object", "properties": {
        "kind": {"$ref": "#/components/schemas/Str"},
        "apiVersion": {"allOf": [{"$ref": "#/components/schemas/Str"}], "description": "d"},
        "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "default": {}}
    }});
    let t = conv_with(root, others, ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    assert_eq!(
        t.canonical(),
        "<K>(apiVersion:string,kind:string,metadata:<K.metadata>(generateName:string,name:string,uid:string))"
    );
}

#[test]
fn embedded_resources_get_type_meta() {
    let root = resource(json!({
        "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "string"}}},
        "list": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "x-kubernetes-embedded-resource": true}},
        "plain": {"type": "object", "properties": {"spec": {"type": "string"}}}
    }));
    let t = conv(root).expect("typed");
    let f = |n: &str| {
        t.as_object()
            .and_then(|o| o.field(n))
            .map(DeclType::canonical)
            .unwrap_or_default()
    };
    assert_eq!(
        f("tmpl"),
        "<K.tmpl>(apiVersion:string,kind:string,metadata:<K.tmpl.metadata>(generateName:string,name:string),spec:string)"
    );
    assert_eq!(
        f("list"),
        "[<K.list.@idx>(apiVersion:string,kind:string,metadata:<K.list.@idx.metadata>(generateName:string,name:string))]"
    );
    assert_eq!(
        f("map"),
        "{<K.map.@elem>(apiVersion:string,kind:string,metadata:<K.map.@elem.metadata>(generateName:string,name:string))}"
    );
    assert_eq!(f("plain"), "<K.plain>(spec:string)");
    // The embedded flag is read on the referenced schema, not beside the reference.
    let others = json!({"E": {"type": "object", "x-kubernetes-embedded-resource": true}, "P": {"type": "object"}});
    let root = resource(json!({
        "viaRef": {"$ref": "#/components/schemas/E"},
        "besideRef": {"allOf": [{"$ref": "#/components/schemas/P"}], "x-kubernetes-embedded-resource": true}
    }));
    let t = conv_with(root, others, ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    let o = t.as_object().expect("object");
    assert_eq!(
        o.field("viaRef")
            .and_then(DeclType::as_object)
            .map(|x| x.fields().len()),
        Some(3)
    );
    assert_eq!(
        o.field("besideRef").map(DeclType::canonical).as_deref(),
        Some("<K.besideRef>()")
    );
}

#[test]
fn refs_are_inlined_including_allof_wrapped() {
    let others = json!({
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "integer"},
        "Alias": {"$ref": "#/components/schemas/B"},
        "Wrapped": {"allOf": [{"description": "x"}, {"allOf": [{"$ref": "#/components/schemas/B"}]}]}
    });
    let root = resource(json!({
        "a": {"$ref": "#/components/schemas/A"},
        "w": {"allOf": [{"$ref": "#/components/schemas/A"}], "type": "string"},
        "alias": {"$ref": "#/components/schemas/Alias"},
        "nested": {"$ref": "#/components/schemas/Wrapped"},
        "bare": {"$ref": "B"}
    }));
    let t = conv_with(root, others, ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    let f = |n: &str| {
        t.as_object()
            .and_then(|o| o.field(n))
            .map(DeclType::canonical)
            .unwrap_or_else(|| "-".into())
    };
    assert_eq!(f("a"), "<K.a>(b:int)");
    // The whole schema is replaced by the target: the sibling type is lost.
    assert_eq!(f("w"), "<K.w>(b:int)");
    // A reference to a reference is followed only once (refs.go does not re-resolve the target).
    assert_eq!(f("alias"), "-");
    // The referenced schema's own allOf is not searched either.
    assert_eq!(f("nested"), "-");
    // Without the prefix, the reference is looked up as a plain name.
    assert_eq!(f("bare"), "int");
}

#[test]
fn cycles_become_empty_objects() {
    let others = json!({
        "Node": {"type": "object", "properties": {
            "value": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
            "byName": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Node"}}
        }}
    });
    let root = resource(json!({"tree": {"$ref": "#/components/schemas/Node"}}));
    let t = conv_with(root, others, ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    assert_eq!(
        t.as_object()
            .and_then(|o| o.field("tree"))
            .map(DeclType::canonical)
            .as_deref(),
        Some(
            "<K.tree>(byName:{<K.tree.byName.@elem>()},children:[<K.tree.children.@idx>()],value:string)"
        )
    );
    // A reference back to the root component: the discovery resolver marks the root visited by
    // its bare component name, while the reference is spelled `#/components/schemas/Root`, so
    // the root is expanded once more before the cycle is cut.
    let mut schemas = Map::new();
    schemas.insert(
        "Root".into(),
        json!({"type": "object", "properties": {"self": {"$ref": "#/components/schemas/Root"}, "kind": {"type": "string"}}}),
    );
    let t = Components::new(&schemas)
        .convert_root("Root", "K", Limits::default(), ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    assert_eq!(
        t.as_object()
            .and_then(|o| o.field("self"))
            .map(DeclType::canonical)
            .as_deref(),
        Some("<K.self>(kind:string,self:<K.self.self>())")
    );
}

#[test]
fn mutual_recursion_expands_until_a_repeat() {
    let others = json!({
        "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
        "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}}
    });
    let root = resource(
        json!({"a": {"$ref": "#/components/schemas/A"}, "b": {"$ref": "#/components/schemas/B"}}),
    );
    let t = conv_with(root, others, ConvertOptions::default())
        .expect("ok")
        .expect("typed");
    let o = t.as_object().expect("object");
    assert_eq!(
        o.field("a").map(DeclType::canonical).as_deref(),
        Some("<K.a>(b:<K.a.b>(a:<K.a.b.a>()))")
    );
    assert_eq!(
        o.field("b").map(DeclType::canonical).as_deref(),
        Some("<K.b>(a:<K.b.a>(b:<K.b.a.b>()))")
    );
}

#[test]
fn missing_refs_fail_the_kind_even_in_untyped_parts() {
    let missing = |root: Value| conv_with(root, json!({}), ConvertOptions::default());
    let e = missing(resource(
        json!({"a": {"$ref": "#/components/schemas/Nope"}}),
    ))
    .unwrap_err();
    assert_eq!(
        e,
        ConvertError::MissingRef {
            reference: "#/components/schemas/Nope".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "cannot resolve $ref \"#/components/schemas/Nope\": no such component"
    );
    // Under a map's properties (not typed, but inlined upstream) and under non-array items.
    assert!(
        missing(resource(
            json!({"m": {"type": "object", "additionalProperties": {"type": "string"},
        "properties": {"x": {"$ref": "Nope"}}}})
        ))
        .is_err()
    );
    assert!(
        missing(resource(
            json!({"s": {"type": "string", "items": {"$ref": "Nope"}}})
        ))
        .is_err()
    );
    // Not under oneOf/not (refs.go does not walk those).
    assert!(
        missing(resource(
            json!({"s": {"type": "string", "oneOf": [{"$ref": "Nope"}], "not": {"$ref": "Nope"}}})
        ))
        .is_ok()
    );
    // The root component itself must exist.
    let schemas = Map::new();
    assert_eq!(
        Components::new(&schemas).convert_root(
            "X",
            "K",
            Limits::default(),
            ConvertOptions::default()
        ),
        Err(ConvertError::RootNotFound("X".into()))
    );
}

#[test]
fn limits_bound_size_and_depth() {
    // A ladder of components, each referencing the next twice: 2^30 nodes if expanded.
    let mut schemas = Map::new();
    for i in 0..30 {
        let next = format!("#/components/schemas/L{}", i + 1);
        schemas.insert(
            format!("L{i}"),
            json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
        );
    }
    schemas.insert("L30".into(), json!({"type": "string"}));
    let limits = Limits {
        max_nodes: 10_000,
        max_depth: 128,
    };
    let e = Components::new(&schemas)
        .convert_root("L0", "K", limits, ConvertOptions::default())
        .unwrap_err();
    assert_eq!(e, ConvertError::TooLarge(10_000));

    // Deep inline nesting.
    let mut deep = json!({"type": "string"});
    for _ in 0..100 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    let mut schemas = Map::new();
    schemas.insert("D".into(), deep);
    let limits = Limits {
        max_nodes: 10_000,
        max_depth: 50,
    };
    let e = Components::new(&schemas)
        .convert_root("D", "K", limits, ConvertOptions::default())
        .unwrap_err();
    assert!(
        matches!(e, ConvertError::TooDeep { limit: 50, .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("schema nests deeper than 50 levels at K.x.x"),
        "{e}"
    );
    let ok = Components::new(&schemas).convert_root(
        "D",
        "K",
        Limits::default(),
        ConvertOptions::default(),
    );
    assert!(ok.is_ok());
}

#[test]
fn registry_lookups_work_on_converted_types() {
    let root = resource(json!({"spec": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}}));
    let r = crate::schema::types::RootType::new(conv(root).expect("typed"));
    assert!(r.find_type("K").is_some());
    assert!(r.find_type("K.metadata").is_some());
    assert_eq!(
        r.find_field("K.spec.items.@idx", "n"),
        Some(&DeclType::Scalar(Scalar::Int))
    );
    assert_eq!(
        r.find_field("K.spec", "items")
            .map(ToString::to_string)
            .as_deref(),
        Some("list(K.spec.items.@idx)")
    );
}

/// The size bounds of field `f` of a complete resource: (MaxElements, MinSerializedSize).
fn sizes_of(prop: Value) -> (i64, i64) {
    let schemas = match json!({"Root": resource(json!({"f": prop}))}) {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    let (_, sizes) = Components::new(&schemas)
        .convert_root_sized("Root", "K", Limits::default(), ConvertOptions::default())
        .expect("converts")
        .expect("exposed");
    let f = sizes.field("f").expect("field f");
    (f.max_elements, f.min_serialized_size)
}

#[test]
fn sizes_follow_schemas_go() {
    let req = 3 * 1024 * 1024;
    // strings: maxLength x 4, enum's longest value, else the request size.
    assert_eq!(sizes_of(json!({"type": "string", "maxLength": 5})), (20, 2));
    assert_eq!(sizes_of(json!({"type": "string", "maxLength": -5})), (0, 2));
    assert_eq!(
        sizes_of(json!({"type": "string", "enum": ["a", "abc", 7, null]})),
        (3, 2)
    );
    assert_eq!(sizes_of(json!({"type": "string"})), (req - 2, 2));
    // byte: maxLength as is; formats with fixed sizes.
    assert_eq!(
        sizes_of(json!({"type": "string", "format": "byte", "maxLength": 5})),
        (5, 2)
    );
    assert_eq!(
        sizes_of(json!({"type": "string", "format": "duration", "maxLength": 1})),
        (32, 3)
    );
    assert_eq!(
        sizes_of(json!({"type": "string", "format": "date"})),
        (12, 12)
    );
    assert_eq!(
        sizes_of(json!({"type": "string", "format": "date-time"})),
        (32, 21)
    );
    assert_eq!(
        sizes_of(json!({"x-kubernetes-int-or-string": true, "maxLength": 3})),
        (12, 1)
    );
    assert_eq!(
        sizes_of(json!({"x-kubernetes-int-or-string": true})),
        (req - 2, 1)
    );
    assert_eq!(sizes_of(json!({"type": "boolean"})), (0, 4));
    assert_eq!(sizes_of(json!({"type": "integer"})), (0, 1));
    // lists and maps: declared bounds, else (3 MiB - 2) / (min + 1) and / (min + 6).
    assert_eq!(
        sizes_of(json!({"type": "array", "maxItems": 7, "items": {"type": "integer"}})),
        (7, 2)
    );
    assert_eq!(
        sizes_of(json!({"type": "array", "items": {"type": "boolean"}})),
        ((req - 2) / 5, 2)
    );
    assert_eq!(
        sizes_of(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        ((req - 2) / 8, 2)
    );
    assert_eq!(
        sizes_of(json!({"type": "object", "maxProperties": 2,
            "additionalProperties": {"type": "string"}})),
        (2, 2)
    );
    // objects: 2 + len(name) + min + 4 per required property without a default, including
    // properties whose names CEL cannot expose.
    assert_eq!(
        sizes_of(
            json!({"type": "object", "required": ["a", "b", "1x", "c"], "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer", "default": 1},
            "1x": {"type": "boolean"},
            "c": {"type": "string", "default": null},
            "d": {"type": "string"}}})
        ),
        (0, 2 + (1 + 2 + 4) + (2 + 4 + 4) + (1 + 2 + 4))
    );
}
