//! CEL declaration types computed from OpenAPI schemas (the model of upstream `DeclType`).
//!
//! Upstream (k8s.io/apiserver v0.37.1 `pkg/cel/types.go`) has one `DeclType` struct for lists,
//! maps, objects and scalars. Here it is an enum. Object types carry a deterministic,
//! path-derived name (`Deployment.spec.template`, `….containers.@idx`, `….labels.@elem`);
//! upstream derives the same names from a root name with random digits appended
//! (`Deployment123456789`), which we leave out.
//!
//! Object types are reference counted so that a [`RootType`] can index every object type by name
//! without copying, and so that whole trees are cheap to share between threads.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// A scalar CEL type produced by the conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// `bool` (`type: boolean`).
    Bool,
    /// `int` (`type: integer`, any format).
    Int,
    /// `double` (`type: number`, any format).
    Double,
    /// `string` (`type: string` with no special format).
    String,
    /// `bytes` (`type: string, format: byte`).
    Bytes,
    /// `google.protobuf.Duration` (`type: string, format: duration`).
    Duration,
    /// `google.protobuf.Timestamp` (`type: string, format: date` or `date-time`).
    Timestamp,
}

impl Scalar {
    /// The CEL name of the type, as upstream's `DeclType.TypeName()` spells it.
    pub fn cel_name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::Int => "int",
            Scalar::Double => "double",
            Scalar::String => "string",
            Scalar::Bytes => "bytes",
            Scalar::Duration => "duration",
            Scalar::Timestamp => "timestamp",
        }
    }
}

/// The CEL declaration type of a schema node.
#[derive(Debug, Clone, PartialEq)]
pub enum DeclType {
    /// A scalar.
    Scalar(Scalar),
    /// `dyn`: `x-kubernetes-int-or-string` / `format: int-or-string`.
    Dyn,
    /// `list(elem)`.
    List(Arc<DeclType>),
    /// `map(string, value)`; OpenAPI map keys are always strings.
    Map(Arc<DeclType>),
    /// A named object type with declared fields.
    Object(Arc<ObjectType>),
}

impl DeclType {
    /// The object type, if this is one.
    pub fn as_object(&self) -> Option<&ObjectType> {
        match self {
            DeclType::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The element type of a list or the value type of a map.
    pub fn elem(&self) -> Option<&DeclType> {
        match self {
            DeclType::List(e) | DeclType::Map(e) => Some(e),
            _ => None,
        }
    }

    /// Follows a field-path like `spec.template.spec.containers[0].resources.limits['cpu']`
    /// (also `[*]`, `["k"]`) through objects, lists and maps, the way the CEL checker would
    /// type the selections. A field of an object must exist; any index into a list gives its
    /// element; any field or key of a map gives its value type (upstream
    /// `DeclTypeProvider.FindStructFieldType`). Returns `None` when a step does not type-check.
    pub fn at_path(&self, path: &str) -> Option<&DeclType> {
        let mut current = self;
        for step in parse_path(path)? {
            current = match (current, step) {
                (DeclType::Object(o), PathStep::Field(f)) => o.field(&f)?,
                (DeclType::Map(v), PathStep::Field(_) | PathStep::Key) => v,
                (DeclType::List(e), PathStep::Index) => e,
                _ => return None,
            };
        }
        Some(current)
    }

    /// A canonical, fully expanded rendering used to compare with upstream's output:
    /// scalars by CEL name, `dyn`, `[elem]`, `{value}`, and
    /// `<name>(field:type,…)` with fields in byte order. The same rendering is produced by
    /// `e2e/oracle/cmd/schemaoracle` from the upstream Go code.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        self.write_canonical(&mut out);
        out
    }

    fn write_canonical(&self, out: &mut String) {
        match self {
            DeclType::Scalar(s) => out.push_str(s.cel_name()),
            DeclType::Dyn => out.push_str("dyn"),
            DeclType::List(e) => {
                out.push('[');
                e.write_canonical(out);
                out.push(']');
            }
            DeclType::Map(e) => {
                out.push('{');
                e.write_canonical(out);
                out.push('}');
            }
            DeclType::Object(o) => {
                out.push('<');
                out.push_str(&o.name);
                out.push_str(">(");
                for (i, (name, ty)) in o.fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(name);
                    out.push(':');
                    ty.write_canonical(out);
                }
                out.push(')');
            }
        }
    }

    /// Number of type nodes in this tree (objects, lists, maps and leaves).
    pub fn node_count(&self) -> usize {
        match self {
            DeclType::Scalar(_) | DeclType::Dyn => 1,
            DeclType::List(e) | DeclType::Map(e) => 1 + e.node_count(),
            DeclType::Object(o) => 1 + o.fields.iter().map(|(_, t)| t.node_count()).sum::<usize>(),
        }
    }
}

impl fmt::Display for DeclType {
    /// CEL-style rendering: `int`, `dyn`, `list(string)`, `map(string, int)`, or the object name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeclType::Scalar(s) => f.write_str(s.cel_name()),
            DeclType::Dyn => f.write_str("dyn"),
            DeclType::List(e) => write!(f, "list({e})"),
            DeclType::Map(e) => write!(f, "map(string, {e})"),
            DeclType::Object(o) => f.write_str(&o.name),
        }
    }
}

/// An object type: a name and its fields, keyed by escaped CEL field name.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectType {
    name: String,
    /// Sorted by field name (byte order), unique.
    fields: Vec<(String, DeclType)>,
    /// Properties the schema declares but the conversion gives no type (upstream drops them:
    /// e.g. maps of `resource.Quantity`), by escaped name (the raw name when it has no
    /// escaped form); sorted. Not fields for CEL; known to exist for apply configurations.
    unexposed: Vec<String>,
    /// `x-kubernetes-preserve-unknown-fields: true`: the API server keeps fields the schema
    /// does not declare (upstream's CEL conversion ignores the extension).
    preserves_unknown: bool,
    /// The schema's `required` property names that have a CEL field (escaped); sorted.
    required: Vec<String>,
}

impl ObjectType {
    /// Builds an object type. Fields are sorted by name; for duplicate names the last wins.
    pub fn new(name: impl Into<String>, mut fields: Vec<(String, DeclType)>) -> Self {
        // Stable sort keeps insertion order among equal names; keep the last of each run.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        let mut deduped: Vec<(String, DeclType)> = Vec::with_capacity(fields.len());
        for f in fields {
            match deduped.last_mut() {
                Some(last) if last.0 == f.0 => *last = f,
                _ => deduped.push(f),
            }
        }
        deduped.shrink_to_fit();
        ObjectType {
            name: name.into(),
            fields: deduped,
            unexposed: Vec::new(),
            preserves_unknown: false,
            required: Vec::new(),
        }
    }

    /// The same type, recording the schema's `required` properties (escaped names).
    pub fn with_required(mut self, mut names: Vec<String>) -> Self {
        names.sort();
        names.dedup();
        self.required = names;
        self
    }

    /// Whether the schema lists the field `name` (escaped) in `required`.
    pub fn is_required(&self, name: &str) -> bool {
        self.required
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    }

    /// The same type, marked as keeping undeclared fields
    /// (`x-kubernetes-preserve-unknown-fields`).
    pub fn with_preserved_unknown_fields(mut self, preserves: bool) -> Self {
        self.preserves_unknown = preserves;
        self
    }

    /// Whether the schema keeps fields it does not declare.
    pub fn preserves_unknown_fields(&self) -> bool {
        self.preserves_unknown
    }

    /// The same type, recording properties the schema declares without a CEL type.
    pub fn with_unexposed(mut self, mut names: Vec<String>) -> Self {
        names.sort();
        names.dedup();
        self.unexposed = names;
        self
    }

    /// Whether the schema declares a property `name` (escaped) that has no CEL type.
    pub fn is_unexposed(&self, name: &str) -> bool {
        self.unexposed
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    }

    /// The type name, e.g. `Deployment.spec.template`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type of the field with this escaped CEL name (binary search).
    pub fn field(&self, name: &str) -> Option<&DeclType> {
        self.fields
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.fields[i].1)
    }

    /// The fields, sorted by escaped name.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&str, &DeclType)> {
        self.fields.iter().map(|(n, t)| (n.as_str(), t))
    }
}

/// The converted type of one kind: the root declaration type plus an index of every object type
/// in it by name. This is what a CEL type provider consults.
#[derive(Debug)]
pub struct RootType {
    root: DeclType,
    by_name: HashMap<String, DeclType>,
    typed: bool,
    sizes: Option<super::sizes::SizeNode>,
}

impl RootType {
    /// Indexes `root`. Object names are unique by construction (they are paths).
    pub fn new(root: DeclType) -> Self {
        let mut by_name = HashMap::new();
        let mut pending: Vec<&DeclType> = vec![&root];
        while let Some(t) = pending.pop() {
            match t {
                DeclType::Object(o) => {
                    by_name.insert(o.name.clone(), t.clone());
                    pending.extend(o.fields.iter().map(|(_, f)| f));
                }
                DeclType::List(e) | DeclType::Map(e) => pending.push(e),
                DeclType::Scalar(_) | DeclType::Dyn => {}
            }
        }
        RootType {
            root,
            by_name,
            typed: true,
            sizes: None,
        }
    }

    /// Attaches the size bounds computed with `root` (same shape; see
    /// [`super::Components::convert_root_sized`]).
    pub fn with_sizes(mut self, sizes: super::sizes::SizeNode) -> Self {
        self.sizes = Some(sizes);
        self
    }

    /// The size bounds of [`RootType::root`] (upstream `DeclType.MaxElements` and
    /// `MinSerializedSize` of every node), when the conversion computed them.
    pub fn sizes(&self) -> Option<&super::sizes::SizeNode> {
        self.sizes.as_ref()
    }

    /// A root whose schema upstream does not expose (its `SchemaDeclType` is nil, e.g. no
    /// `type`); upstream then declares `object`/`oldObject`/`params` as `dyn`, which is what
    /// `root` should be.
    pub fn untyped(root: DeclType) -> Self {
        let mut r = RootType::new(root);
        r.typed = false;
        r
    }

    /// False when the schema was not exposed and [`RootType::root`] is only a stand-in (`dyn`).
    pub fn is_typed(&self) -> bool {
        self.typed
    }

    /// The type of `object`/`oldObject`/`params` for this kind.
    pub fn root(&self) -> &DeclType {
        &self.root
    }

    /// The object type with this name (`FindStructType`).
    pub fn find_type(&self, name: &str) -> Option<&DeclType> {
        self.by_name.get(name)
    }

    /// The type of `field` (escaped CEL name) in the object type `type_name`
    /// (`FindStructFieldType`, with keyword recognition off as in the VAP environment).
    pub fn find_field(&self, type_name: &str, field: &str) -> Option<&DeclType> {
        self.by_name.get(type_name)?.as_object()?.field(field)
    }

    /// Names of all object types, in no particular order.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Number of named object types.
    pub fn object_count(&self) -> usize {
        self.by_name.len()
    }
}

enum PathStep {
    Field(String),
    Key,
    Index,
}

/// Parses `a.b[0].c['k']["k"][*]`. Returns `None` on malformed input.
fn parse_path(path: &str) -> Option<Vec<PathStep>> {
    let mut steps = Vec::new();
    let mut rest = path;
    let mut first = true;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inner = &r[..close];
            let quoted = |q: char| inner.strip_prefix(q).and_then(|s| s.strip_suffix(q));
            if quoted('\'').or_else(|| quoted('"')).is_some() {
                steps.push(PathStep::Key);
            } else if inner == "*"
                || (!inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()))
            {
                steps.push(PathStep::Index);
            } else {
                return None;
            }
            rest = &r[close + 1..];
        } else {
            let r = if first { rest } else { rest.strip_prefix('.')? };
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(PathStep::Field(r[..end].to_owned()));
            rest = &r[end..];
        }
        first = false;
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, fields: Vec<(&str, DeclType)>) -> DeclType {
        DeclType::Object(Arc::new(ObjectType::new(
            name,
            fields.into_iter().map(|(n, t)| (n.to_owned(), t)).collect(),
        )))
    }

    #[test]
    fn fields_are_sorted_and_found() {
        let o = ObjectType::new(
            "X",
            vec![
                ("b".into(), DeclType::Scalar(Scalar::Int)),
                ("a".into(), DeclType::Dyn),
                ("b".into(), DeclType::Scalar(Scalar::String)),
            ],
        );
        let names: Vec<_> = o.fields().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(o.field("b"), Some(&DeclType::Scalar(Scalar::String)));
        assert_eq!(o.field("c"), None);
    }

    #[test]
    fn registry_indexes_nested_objects() {
        let inner = obj(
            "K.spec.items.@idx",
            vec![("x", DeclType::Scalar(Scalar::Int))],
        );
        let root = obj(
            "K",
            vec![(
                "spec",
                obj("K.spec", vec![("items", DeclType::List(Arc::new(inner)))]),
            )],
        );
        let r = RootType::new(root);
        assert_eq!(r.object_count(), 3);
        assert!(r.find_type("K.spec").is_some());
        assert_eq!(
            r.find_field("K.spec.items.@idx", "x"),
            Some(&DeclType::Scalar(Scalar::Int))
        );
        assert_eq!(r.find_field("K.spec", "nope"), None);
        assert_eq!(r.find_field("nope", "x"), None);
        assert_eq!(
            r.root()
                .at_path("spec.items[3].x")
                .map(ToString::to_string)
                .as_deref(),
            Some("int")
        );
        assert_eq!(
            r.root()
                .at_path("spec.items[*]")
                .map(ToString::to_string)
                .as_deref(),
            Some("K.spec.items.@idx")
        );
        assert!(r.root().at_path("spec.items.x").is_none());
        assert!(r.root().at_path("spec..items").is_none());
        assert_eq!(
            r.root().canonical(),
            "<K>(spec:<K.spec>(items:[<K.spec.items.@idx>(x:int)]))"
        );
        assert_eq!(r.root().node_count(), 5);
    }

    #[test]
    fn display_uses_cel_spelling() {
        let t = DeclType::Map(Arc::new(DeclType::List(Arc::new(DeclType::Scalar(
            Scalar::Timestamp,
        )))));
        assert_eq!(t.to_string(), "map(string, list(timestamp))");
        assert_eq!(DeclType::Dyn.to_string(), "dyn");
    }

    #[test]
    fn map_selection_yields_value_type() {
        let root = obj(
            "K",
            vec![(
                "labels",
                DeclType::Map(Arc::new(DeclType::Scalar(Scalar::String))),
            )],
        );
        assert_eq!(
            root.at_path("labels['a']")
                .map(ToString::to_string)
                .as_deref(),
            Some("string")
        );
        assert_eq!(
            root.at_path("labels.a").map(ToString::to_string).as_deref(),
            Some("string")
        );
        assert_eq!(
            root.at_path("labels[\"a.b\"]")
                .map(ToString::to_string)
                .as_deref(),
            Some("string")
        );
        assert!(root.at_path("labels[x]").is_none());
    }
}
