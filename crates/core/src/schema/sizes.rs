//! The size bounds upstream attaches to each declaration type (`DeclType.MaxElements` and
//! `DeclType.MinSerializedSize`, k8s.io/apiserver v0.37.1 `pkg/cel/types.go`), computed by
//! [`super::convert`] with the rules of `pkg/cel/common/schemas.go` `SchemaDeclType`.
//!
//! A [`SizeNode`] tree has the shape of the [`super::DeclType`] tree it was computed with; it
//! is kept beside it (in [`super::RootType`]) so that the type model stays unchanged. Cost
//! estimation walks it by cel-go field path (`spec`, `containers`, `@items`, ...), the way
//! apiextensions-apiserver's `sizeEstimator.EstimateSize` walks `DeclType`s.

/// k8s.io/apiserver v0.37.1 `pkg/apis/cel/config.go` `MaxRequestSizeBytes` (3 MiB), which
/// `pkg/cel/limits.go` re-exports as `DefaultMaxRequestSizeBytes` and `pkg/cel/common/schemas.go`
/// uses as `maxRequestSizeBytes`.
pub const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;
/// `pkg/cel/limits.go` `MaxDurationSizeJSON`.
pub const MAX_DURATION_SIZE_JSON: i64 = 32;
/// `pkg/cel/limits.go` `MaxDatetimeSizeJSON`.
pub const MAX_DATETIME_SIZE_JSON: i64 = 32;
/// `pkg/cel/limits.go` `MinDurationSizeJSON`.
pub const MIN_DURATION_SIZE_JSON: i64 = 3;
/// `pkg/cel/limits.go` `JSONDateSize`.
pub const JSON_DATE_SIZE: i64 = 12;
/// `pkg/cel/limits.go` `MinDatetimeSizeJSON`.
pub const MIN_DATETIME_SIZE_JSON: i64 = 21;
/// `pkg/cel/limits.go` `MinStringSize`.
pub const MIN_STRING_SIZE: i64 = 2;
/// `pkg/cel/limits.go` `MinBoolSize`.
pub const MIN_BOOL_SIZE: i64 = 4;
/// `pkg/cel/limits.go` `MinNumberSize`.
pub const MIN_NUMBER_SIZE: i64 = 1;

/// Where a node's `MaxElements` comes from; used to explain large estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A declared `maxItems`, `maxProperties` or `maxLength`.
    Declared,
    /// The longest value of a string `enum` (`estimateMaxStringEnumLength`).
    Enum,
    /// A fixed size of the string format (`duration`, `date`, `date-time`).
    Format,
    /// No declared bound: the default derived from the 3 MiB request size
    /// (`estimateMaxStringLengthPerRequest`, `estimateMaxArrayItemsFromMinSize`,
    /// `estimateMaxAdditionalPropertiesFromMinSize`).
    Request,
    /// The type has no elements (objects, numbers, booleans): `MaxElements` is 0.
    NotApplicable,
}

/// The shape of a [`SizeNode`].
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A scalar or `dyn` (int-or-string).
    Leaf,
    /// A list; its element.
    List(Box<SizeNode>),
    /// A map; its value (keys are `string`, whose `MaxElements` is 0 upstream).
    Map(Box<SizeNode>),
    /// An object; its exposed fields by escaped name, sorted by the length of the name, then
    /// the name ([`by_length_then_name`]: a lookup compares the bytes of names of its own
    /// length only; the cost estimator looks fields up for every sized node).
    Object(Vec<(String, SizeNode)>),
}

/// The size bounds of one declaration type node.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeNode {
    /// `DeclType.MaxElements`: items of a list, properties of a map, bytes of a string.
    pub max_elements: i64,
    /// `DeclType.MinSerializedSize`.
    pub min_serialized_size: i64,
    /// Where `max_elements` comes from.
    pub bound: Bound,
    /// The children.
    pub shape: Shape,
}

impl SizeNode {
    /// A node without elements (`MaxElements` 0).
    pub fn scalar(min_serialized_size: i64) -> Self {
        SizeNode {
            max_elements: 0,
            min_serialized_size,
            bound: Bound::NotApplicable,
            shape: Shape::Leaf,
        }
    }

    /// An object with these fields (sorted here) and minimum size.
    pub fn object(min_serialized_size: i64, mut fields: Vec<(String, SizeNode)>) -> Self {
        fields.sort_by(|a, b| by_length_then_name(&a.0, &b.0));
        fields.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        SizeNode {
            max_elements: 0,
            min_serialized_size,
            bound: Bound::NotApplicable,
            shape: Shape::Object(fields),
        }
    }

    /// The field of an object.
    pub fn field(&self, name: &str) -> Option<&SizeNode> {
        match &self.shape {
            Shape::Object(fields) => fields
                .binary_search_by(|(n, _)| by_length_then_name(n, name))
                .ok()
                .map(|i| &fields[i].1),
            _ => None,
        }
    }

    /// Follows a cel-go field path (without its root variable) the way apiextensions-apiserver
    /// v0.37.1 `pkg/apiserver/schema/cel/compilation.go` `sizeEstimator.EstimateSize` does:
    /// `@items`/`@values` go to the element type, `@keys` to the key type of a map (upstream's
    /// `StringType`, which has no elements), any other step to the field of that name.
    /// Returns the node reached by each step (empty path: empty vector), or `None` when a
    /// step does not exist.
    pub fn walk<S: AsRef<str>>(&self, path: &[S]) -> Option<Vec<&SizeNode>> {
        let mut out = Vec::with_capacity(path.len());
        let mut current = self;
        for step in path {
            current = current.step(step.as_ref())?;
            out.push(current);
        }
        Some(out)
    }

    /// One step of [`SizeNode::walk`].
    pub fn step(&self, step: &str) -> Option<&SizeNode> {
        static MAP_KEY: SizeNode = SizeNode {
            max_elements: 0,
            min_serialized_size: MIN_STRING_SIZE,
            bound: Bound::NotApplicable,
            shape: Shape::Leaf,
        };
        match (step, &self.shape) {
            ("@items" | "@values", Shape::List(e) | Shape::Map(e)) => Some(e),
            ("@items" | "@values", _) => None,
            ("@keys", Shape::Map(_)) => Some(&MAP_KEY),
            ("@keys", _) => None,
            (name, _) => self.field(name),
        }
    }

    /// The node at the end of [`SizeNode::walk`] (without collecting the nodes on the way:
    /// the cost estimator asks for every sized node).
    pub fn at_path<S: AsRef<str>>(&self, path: &[S]) -> Option<&SizeNode> {
        path.iter().try_fold(self, |n, step| n.step(step.as_ref()))
    }
}

/// The order of an object's fields in [`Shape::Object`].
fn by_length_then_name(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// `pkg/cel/common/schemas.go` `zeroIfNegative`.
pub fn zero_if_negative(v: i64) -> i64 {
    v.max(0)
}

/// `pkg/cel/common/schemas.go` `estimateMaxArrayItemsFromMinSize`.
pub fn estimate_max_array_items_from_min_size(min_size: i64) -> i64 {
    // `minSize + 1` cannot be 0: minimum sizes are at least 1.
    (MAX_REQUEST_SIZE_BYTES - 2)
        .checked_div(min_size.wrapping_add(1))
        .unwrap_or(0)
}

/// `pkg/cel/common/schemas.go` `estimateMaxAdditionalPropertiesFromMinSize`.
pub fn estimate_max_additional_properties_from_min_size(min_size: i64) -> i64 {
    (MAX_REQUEST_SIZE_BYTES - 2)
        .checked_div(min_size.wrapping_add(6))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(max: i64, elem: SizeNode) -> SizeNode {
        SizeNode {
            max_elements: max,
            min_serialized_size: 2,
            bound: Bound::Declared,
            shape: Shape::List(Box::new(elem)),
        }
    }

    #[test]
    fn request_defaults_match_upstream_arithmetic() {
        // (3 MiB - 2) / (2 + 1) for a list of strings; / (2 + 6) for a map of strings.
        assert_eq!(estimate_max_array_items_from_min_size(2), 1_048_575);
        assert_eq!(estimate_max_additional_properties_from_min_size(2), 393_215);
        assert_eq!(estimate_max_array_items_from_min_size(-1), 0);
        assert_eq!(zero_if_negative(-5), 0);
    }

    #[test]
    fn walk_follows_fields_items_and_keys() {
        let s = SizeNode {
            max_elements: 40,
            min_serialized_size: 2,
            bound: Bound::Declared,
            shape: Shape::Leaf,
        };
        let root = SizeNode::object(
            2,
            vec![
                ("b".into(), list(3, s.clone())),
                ("a".into(), SizeNode::scalar(1)),
            ],
        );
        assert_eq!(root.at_path(&["b", "@items"]).unwrap().max_elements, 40);
        assert_eq!(root.at_path(&["b"]).unwrap().max_elements, 3);
        assert_eq!(root.at_path::<&str>(&[]).unwrap().max_elements, 0);
        assert!(root.at_path(&["b", "@keys"]).is_none());
        assert!(root.at_path(&["c"]).is_none());
        assert!(root.at_path(&["a", "@items"]).is_none());
        let maxes: Vec<i64> = root
            .walk(&["b", "@items"])
            .unwrap()
            .iter()
            .map(|n| n.max_elements)
            .collect();
        assert_eq!(maxes, [3, 40]);
        let map = SizeNode {
            max_elements: 7,
            min_serialized_size: 2,
            bound: Bound::Request,
            shape: Shape::Map(Box::new(s)),
        };
        assert_eq!(map.at_path(&["@keys"]).unwrap().max_elements, 0);
        assert_eq!(map.at_path(&["@values"]).unwrap().max_elements, 40);
        assert_eq!(map.at_path(&["anything"]), None);
    }

    #[test]
    fn fields_are_found_whatever_their_length() {
        let names = [
            "spec",
            "a",
            "metadata",
            "ab",
            "b",
            "apiVersion",
            "zz",
            "kind",
            "x",
        ];
        let root = SizeNode::object(
            2,
            names
                .iter()
                .enumerate()
                .map(|(i, n)| ((*n).to_owned(), SizeNode::scalar(i as i64)))
                .collect(),
        );
        for (i, n) in names.iter().enumerate() {
            assert_eq!(
                root.field(n).map(|f| f.min_serialized_size),
                Some(i as i64),
                "{n}"
            );
        }
        for absent in ["", "c", "spe", "specs", "metadatA", "zzz"] {
            assert!(root.field(absent).is_none(), "{absent}");
        }
    }
}
