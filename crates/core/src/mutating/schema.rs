//! The literals of a mutation against the matched kind's schema: field names, value types,
//! nested `Object.<path>` type names, and JSON Patch operations and paths.
//!
//! Upstream does none of this when it compiles a MutatingAdmissionPolicy: its `Object` types
//! accept every field name with type `dyn` (k8s.io/apiserver v0.37.1
//! pkg/cel/mutation/dynamic/objects.go `ObjectType.Field`), so each mistake found here is
//! found by the API server only when a matching request is mutated:
//!
//! * apply configurations (mutating/patch/smd.go `applyConfigPatcher.Patch`):
//!   nested type names are compared with their field path (objects.go
//!   `CheckTypeNamesMatchFieldPathNames`, "type mismatch: unexpected type name ..."), then the
//!   patch is converted to a typed value with the kind's schema (`ApplyStructuredMergeDiff`,
//!   `typeConverter.ObjectToTyped`: "failed to convert patch object to typed object: ..." for
//!   unknown fields and wrong value types);
//! * JSON patches (mutating/patch/json_patch.go `jsonPatcher.Patch`): the fields of
//!   `JSONPatch` (pkg/cel/mutation/jsonpatch.go `JSONPatchType.Val`: "unexpected JSONPatchType
//!   field"), the operation (gopkg.in/evanphx/json-patch.v4 `Patch.Apply`: "Unexpected kind"),
//!   and the patched document decoded strictly into the kind (`json.SerializerOptions{Strict:
//!   true}`) — a path to a field the schema does not have is an unknown field there (built-in
//!   kinds) or pruned (custom resources).
//!
//! Messages name the schema in CEL terms, as cel-go names types (`list(string)`,
//! `map(string, string)`); object types are named by their `Object.<path>` name. cel-go's own
//! wording is used where a typed cel-go environment would report the same mistake
//! (`undefined field '<f>'`, `expected type of field '<f>' is '<t>' but provided type is
//! '<u>'`, checker/errors.go `undefinedField` and `fieldTypeMismatch`).

use crate::schema::escape::escape;
use crate::schema::{DeclType, Scalar};

use super::literal::{At, Field, Literals, Message, Value};

/// One finding: where, and the message.
pub type Issue = (Option<At>, String);

/// The JSON Patch operations gopkg.in/evanphx/json-patch.v4 `Patch.Apply` performs (any
/// other `op` is "Unexpected kind").
pub const JSON_PATCH_OPS: [&str; 6] = ["add", "remove", "replace", "move", "copy", "test"];

/// The object type behind `t`, if any, and whether vapcheck can check it: objects without
/// declared fields (`x-kubernetes-preserve-unknown-fields` without properties) and the
/// reduced `metadata` of resources whose schema does not declare ObjectMeta (only `name`
/// and `generateName`, apiserver pkg/cel/common/schemas.go `WithTypeAndObjectMeta`) are not
/// what the API server applies the patch with, so they are not checked.
fn checkable(t: &DeclType) -> Option<&crate::schema::ObjectType> {
    let o = t.as_object()?;
    let names: Vec<&str> = o.fields().map(|(n, _)| n).collect();
    if names.is_empty() || names == ["generateName", "name"] {
        return None;
    }
    Some(o)
}

/// The type of field `name` (as written in CEL or JSON) of object `o`. `Err(())` when the
/// schema has no such field; `Ok(None)` when the name is one upstream's conversion does not
/// expose (so vapcheck cannot tell).
fn field_of<'t>(o: &'t crate::schema::ObjectType, name: &str) -> Result<Option<&'t DeclType>, ()> {
    let Some(esc) = escape(name) else {
        return Ok(None);
    };
    match o.field(&esc) {
        Some(t) => Ok(Some(t)),
        // The schema has it, without a CEL type (e.g. a map of quantities), or keeps unknown
        // fields (x-kubernetes-preserve-unknown-fields): not checked.
        None if o.is_unexposed(&esc) || o.preserves_unknown_fields() => Ok(None),
        None => Err(()),
    }
}

/// cel-go's display of a schema type, object types named `object_name`.
fn display(t: &DeclType, object_name: &str) -> String {
    match t {
        DeclType::Scalar(s) => match s {
            Scalar::Duration => "google.protobuf.Duration".into(),
            Scalar::Timestamp => "google.protobuf.Timestamp".into(),
            other => other.cel_name().into(),
        },
        DeclType::Dyn => "dyn".into(),
        DeclType::List(e) => format!("list({})", display(e, object_name)),
        DeclType::Map(v) => format!("map(string, {})", display(v, object_name)),
        DeclType::Object(_) => object_name.into(),
    }
}

/// cel-go's display of a literal's type (element types of lists and maps from their first
/// element, `dyn` when empty or unknown).
fn value_display(v: &Value) -> String {
    match v {
        Value::List(items, _) => format!(
            "list({})",
            items.first().map_or_else(|| "dyn".into(), value_display)
        ),
        Value::Map(entries, _) => format!(
            "map(string, {})",
            entries
                .first()
                .map_or_else(|| "dyn".into(), |(_, v)| value_display(v))
        ),
        other => other.type_name().unwrap_or_else(|| "dyn".into()),
    }
}

/// Whether a literal of this shape can be stored in a field of type `t` (SMD's typed
/// conversion: numbers are one scalar kind, strings hold bytes, durations and timestamps;
/// `dyn` — int-or-string — holds anything; `null` is accepted everywhere).
fn fits(v: &Value, t: &DeclType) -> bool {
    use DeclType as D;
    match (v, t) {
        (Value::Unknown | Value::Null(_), _) | (_, D::Dyn) => true,
        (Value::Message(_), D::Object(_) | D::Map(_)) => true,
        (Value::Map(..), D::Object(_) | D::Map(_)) => true,
        (Value::List(..), D::List(_)) => true,
        (Value::Str(..) | Value::StrPrefix(..) | Value::Bytes(_), D::Scalar(s)) => matches!(
            s,
            Scalar::String | Scalar::Bytes | Scalar::Duration | Scalar::Timestamp
        ),
        (Value::Int(_), D::Scalar(s)) => matches!(s, Scalar::Int | Scalar::Double),
        // A double literal in an integer field may still be integral (3.0): not reported.
        (Value::Double(_), D::Scalar(s)) => matches!(s, Scalar::Int | Scalar::Double),
        (Value::Bool(_), D::Scalar(s)) => *s == Scalar::Bool,
        _ => false,
    }
}

struct Checker<'o> {
    out: &'o mut Vec<Issue>,
}

impl Checker<'_> {
    /// A message literal stored where the schema has `t`; `expected` is the type name the
    /// API server requires for it (objects.go `typeCheck`: the root's name followed by the
    /// field names, lists and maps transparent), `None` when not checked.
    fn message(&mut self, m: &Message, t: &DeclType, expected: Option<&str>) {
        if let Some(exp) = expected
            && m.type_name != exp
        {
            self.out.push((
                m.at,
                format!(
                    "unexpected type name \"{}\", expected \"{exp}\", which matches field name path from root Object type",
                    m.type_name
                ),
            ));
        }
        let path = expected.unwrap_or(&m.type_name).to_owned();
        match t {
            DeclType::Map(v) => {
                for f in &m.fields {
                    self.value(&f.value, v, &format!("{path}.{}", f.name), f);
                }
            }
            _ => {
                let Some(o) = checkable(t) else { return };
                for f in &m.fields {
                    match field_of(o, &f.name) {
                        Err(()) => self
                            .out
                            .push((f.at, format!("undefined field '{}'", f.name))),
                        Ok(None) => {}
                        Ok(Some(ft)) => {
                            self.value(&f.value, ft, &format!("{path}.{}", f.name), f);
                        }
                    }
                }
            }
        }
    }

    /// The value of field `f`, whose schema type is `t` and whose expected type name path is
    /// `path`.
    fn value(&mut self, v: &Value, t: &DeclType, path: &str, f: &Field) {
        if !fits(v, t) {
            self.out.push((
                f.at,
                format!(
                    "expected type of field '{}' is '{}' but provided type is '{}'",
                    f.name,
                    display(t, path),
                    value_display(v)
                ),
            ));
            return;
        }
        self.nested(v, t, Some(path), f);
    }

    /// Descends into lists, maps and messages of a value that fits `t`.
    fn nested(&mut self, v: &Value, t: &DeclType, path: Option<&str>, f: &Field) {
        match (v, t) {
            (Value::Message(m), _) => self.message(m, t, path),
            (Value::List(items, _), DeclType::List(e)) => {
                for item in items {
                    if fits(item, e) {
                        self.nested(item, e, path, f);
                    } else {
                        self.out.push((
                            item.at().or(f.at),
                            format!(
                                "expected type of list element of field '{}' is '{}' but provided type is '{}'",
                                f.name,
                                display(e, path.unwrap_or("Object")),
                                value_display(item)
                            ),
                        ));
                    }
                }
            }
            (Value::Map(entries, _), DeclType::Map(vt)) => {
                for (_, val) in entries {
                    if fits(val, vt) {
                        self.nested(val, vt, path, f);
                    } else {
                        self.out.push((
                            val.at().or(f.at),
                            format!(
                                "expected type of map value of field '{}' is '{}' but provided type is '{}'",
                                f.name,
                                display(vt, path.unwrap_or("Object")),
                                value_display(val)
                            ),
                        ));
                    }
                }
            }
            (Value::Map(entries, _), DeclType::Object(_)) => {
                let Some(o) = checkable(t) else { return };
                for (key, val) in entries {
                    let Some(key) = key else { continue };
                    let pseudo = Field {
                        name: key.clone(),
                        at: val.at().or(f.at),
                        optional: false,
                        value: Value::Unknown,
                    };
                    match field_of(o, key) {
                        Err(()) => self
                            .out
                            .push((pseudo.at, format!("undefined field '{key}'"))),
                        Ok(None) => {}
                        // Messages inside map literals are named by path without the keys
                        // (objects.go typeCheck); vapcheck does not check their names.
                        Ok(Some(ft)) => {
                            if fits(val, ft) {
                                self.nested(val, ft, None, &pseudo);
                            } else {
                                self.value(val, ft, "", &pseudo);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Resolves the type named `Object.<a>.<b>…` in the kind's schema (lists and maps
/// transparent). `Err` names the first field that does not exist.
fn resolve_type_name<'t>(root: &'t DeclType, name: &str) -> Result<Option<&'t DeclType>, String> {
    let mut t = root;
    let Some(rest) = name.strip_prefix("Object") else {
        return Ok(None);
    };
    for seg in rest.split('.').skip(1) {
        while let DeclType::List(e) | DeclType::Map(e) = t {
            t = e;
        }
        let Some(o) = checkable(t) else {
            return Ok(None);
        };
        match field_of(o, seg) {
            Err(()) => return Err(seg.to_owned()),
            Ok(None) => return Ok(None),
            Ok(Some(ft)) => t = ft,
        }
    }
    while let DeclType::List(e) | DeclType::Map(e) = t {
        t = e;
    }
    Ok(Some(t))
}

/// Checks the top-level `Object…{}` literals of an apply configuration against the kind's
/// root type.
pub fn check_apply_configuration(root: &DeclType, literals: &Literals, out: &mut Vec<Issue>) {
    let mut c = Checker { out };
    for m in &literals.objects {
        match resolve_type_name(root, &m.type_name) {
            Ok(Some(t)) => c.message(m, t, Some(&m.type_name)),
            Ok(None) => {}
            Err(field) => c.out.push((
                m.at,
                format!(
                    "type '{}' names no field of the schema: undefined field '{field}'",
                    m.type_name
                ),
            )),
        }
    }
}

/// RFC 6901 unescaping of one JSON Pointer segment (`~1` → `/`, then `~0` → `~`, as
/// evanphx/json-patch.v4 `decodePatchKey` does).
pub fn unescape_segment(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

/// Where a JSON Pointer leads in the schema.
enum Target<'t> {
    /// To a node of this type.
    Type(&'t DeclType),
    /// Somewhere vapcheck cannot follow (int-or-string, unchecked objects).
    Unknown,
}

/// Follows the segments of a JSON Pointer (already split, unescaped) from the root.
fn follow<'t>(
    root: &'t DeclType,
    segments: &[String],
    op: Option<&str>,
) -> Result<Target<'t>, String> {
    let mut t = root;
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match t {
            DeclType::Dyn => return Ok(Target::Unknown),
            DeclType::Map(v) => t = v,
            DeclType::List(e) => {
                if seg == "-" {
                    if !last || !matches!(op, Some("add" | "move" | "copy") | None) {
                        return Err(format!(
                            "'-' (the end of the list) is only valid as the last segment of an add, move or copy target, not for op {:?}",
                            op.unwrap_or_default()
                        ));
                    }
                } else if seg.is_empty() || !seg.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("'{seg}' is not an index of a list"));
                }
                t = e;
            }
            DeclType::Object(_) => {
                let Some(o) = checkable(t) else {
                    return Ok(Target::Unknown);
                };
                match field_of(o, seg) {
                    Err(()) => return Err(format!("undefined field '{seg}'")),
                    Ok(None) => return Ok(Target::Unknown),
                    Ok(Some(ft)) => t = ft,
                }
            }
            DeclType::Scalar(s) => {
                return Err(format!(
                    "'{seg}' is below a {} value, which has no fields",
                    s.cel_name()
                ));
            }
        }
    }
    Ok(Target::Type(t))
}

fn str_field<'m>(m: &'m Message, name: &str) -> Option<&'m Field> {
    m.fields.iter().find(|f| f.name == name)
}

/// Checks a path (or `from`) value against the schema; returns the target for a complete
/// literal path.
fn check_pointer<'t>(
    root: &'t DeclType,
    f: &Field,
    op: Option<&str>,
    out: &mut Vec<Issue>,
) -> Option<Target<'t>> {
    let (text, complete) = match &f.value {
        Value::Str(s, _) => (s.as_str(), true),
        Value::StrPrefix(s, _) => (s.as_str(), false),
        _ => return None,
    };
    if text.is_empty() {
        return complete.then_some(Target::Type(root));
    }
    let Some(rest) = text.strip_prefix('/') else {
        out.push((
            f.at,
            format!(
                "JSON Patch {} {text:?} must start with '/' (RFC 6901)",
                f.name
            ),
        ));
        return None;
    };
    let mut raw: Vec<&str> = rest.split('/').collect();
    if !complete {
        // Only the segments before the last '/' of a prefix are known.
        raw.pop();
    }
    let segments: Vec<String> = raw.iter().map(|s| unescape_segment(s)).collect();
    // A prefix's `-` is not the last segment of the final path.
    let op = if complete { op } else { None };
    match follow(root, &segments, op) {
        Ok(t) => complete.then_some(t),
        Err(e) => {
            out.push((f.at, format!("JSON Patch {} {text:?}: {e}", f.name)));
            None
        }
    }
}

/// Checks the `JSONPatch{}` literals of a JSON patch expression against the kind's root type.
pub fn check_json_patches(root: &DeclType, literals: &Literals, out: &mut Vec<Issue>) {
    for m in &literals.patches {
        for f in &m.fields {
            if !matches!(f.name.as_str(), "op" | "path" | "from" | "value") {
                out.push((f.at, format!("unexpected JSONPatchType field: {}", f.name)));
            }
        }
        let op = match str_field(m, "op").map(|f| (&f.value, f)) {
            Some((Value::Str(op, _), f)) => {
                if !JSON_PATCH_OPS.contains(&op.as_str()) {
                    out.push((
                        f.at,
                        format!(
                            "unknown JSON Patch op {op:?} (one of {})",
                            JSON_PATCH_OPS.join(", ")
                        ),
                    ));
                    continue;
                }
                Some(op.as_str())
            }
            Some(_) => None,
            None => {
                out.push((
                    m.at,
                    format!(
                        "JSONPatch without op (one of {})",
                        JSON_PATCH_OPS.join(", ")
                    ),
                ));
                continue;
            }
        };
        let target = str_field(m, "path").and_then(|f| check_pointer(root, f, op, out));
        if matches!(op, Some("move" | "copy"))
            && let Some(from) = str_field(m, "from")
        {
            check_pointer(root, from, Some("from"), out);
        }
        let (Some(Target::Type(t)), Some(value)) = (target, str_field(m, "value")) else {
            continue;
        };
        if !matches!(op, Some("add" | "replace" | "test")) {
            continue;
        }
        // `-` and list indexes name an element: the element type is what `follow` returned.
        let mut c = Checker { out };
        let shown = Field {
            name: match &str_field(m, "path").map(|p| &p.value) {
                Some(Value::Str(p, _)) => p.rsplit('/').next().unwrap_or_default().to_owned(),
                _ => String::new(),
            },
            at: value.at,
            optional: false,
            value: Value::Unknown,
        };
        if fits(&value.value, t) {
            // A message's root name is its own (objects.go typeCheck starts from it).
            match &value.value {
                Value::Message(msg) => c.message(msg, t, None),
                other => c.nested(other, t, None, &shown),
            }
        } else {
            c.value(&value.value, t, "Object", &shown);
        }
    }
}
