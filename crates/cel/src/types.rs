//! The CEL type model, mirroring cel-go v0.29.2 `common/types/types.go` and the printing of
//! `checker/format.go` (`FormatCELType`).
//!
//! A [`Type`] is a cheap-to-clone handle (an `Arc`). Equality (`==`) is structural; the
//! cel-go notions of exact equality and assignability are [`Type::is_exact`] and
//! [`Type::is_assignable_from`].

use std::fmt;
use std::sync::{Arc, LazyLock};

/// The general category of a type, as cel-go's `types.Kind`.
///
/// A nullable wrapper type has the kind of the type it wraps (as in cel-go).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `dyn`.
    Dyn,
    /// `google.protobuf.Any` (printed `any`).
    Any,
    /// `bool`.
    Bool,
    /// `bytes`.
    Bytes,
    /// `double`.
    Double,
    /// `duration`.
    Duration,
    /// The error type (printed `!error!`).
    Error,
    /// `int`.
    Int,
    /// `list(T)`.
    List,
    /// `map(K, V)`.
    Map,
    /// `null_type` (printed `null`).
    Null,
    /// An opaque type with parameters, e.g. `optional_type(T)` or `kubernetes.Quantity`.
    Opaque,
    /// `string`.
    String,
    /// A named object (struct/message) type whose fields come from a type provider.
    Struct,
    /// `timestamp`.
    Timestamp,
    /// `type` or `type(T)`.
    Type,
    /// A type parameter such as `A` or a checker type variable `_var0`.
    TypeParam,
    /// `uint`.
    Uint,
}

/// The structure of a [`Type`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TypeKind {
    /// `dyn`.
    Dyn,
    /// `google.protobuf.Any`.
    Any,
    /// `bool`.
    Bool,
    /// `bytes`.
    Bytes,
    /// `double`.
    Double,
    /// `duration` (`google.protobuf.Duration`).
    Duration,
    /// The error type.
    Error,
    /// `int`.
    Int,
    /// `list(elem)`.
    List(Type),
    /// `map(key, value)`.
    Map(Type, Type),
    /// `null_type`.
    Null,
    /// An opaque (abstract) type with a name and parameters.
    Opaque(Arc<str>, Vec<Type>),
    /// `string`.
    String,
    /// A named object type.
    Struct(Arc<str>),
    /// `timestamp` (`google.protobuf.Timestamp`).
    Timestamp,
    /// `type` (None) or `type(T)`.
    Type(Option<Type>),
    /// A type parameter.
    TypeParam(Arc<str>),
    /// `uint`.
    Uint,
    /// A nullable wrapper of a primitive (`google.protobuf.Int64Value` is `wrapper(int)`).
    Wrapper(Type),
}

/// A CEL type. Cloning is cheap.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Type(Arc<TypeKind>);

macro_rules! static_type {
    ($name:ident, $variant:expr, $doc:literal) => {
        #[doc = $doc]
        pub fn $name() -> Type {
            static T: LazyLock<Type> = LazyLock::new(|| Type(Arc::new($variant)));
            T.clone()
        }
    };
}

impl Type {
    static_type!(dyn_type, TypeKind::Dyn, "The `dyn` type.");
    static_type!(any, TypeKind::Any, "The `google.protobuf.Any` type.");
    static_type!(bool, TypeKind::Bool, "The `bool` type.");
    static_type!(bytes, TypeKind::Bytes, "The `bytes` type.");
    static_type!(double, TypeKind::Double, "The `double` type.");
    static_type!(duration, TypeKind::Duration, "The `duration` type.");
    static_type!(error, TypeKind::Error, "The error type (`!error!`).");
    static_type!(int, TypeKind::Int, "The `int` type.");
    static_type!(null, TypeKind::Null, "The `null_type` type.");
    static_type!(string, TypeKind::String, "The `string` type.");
    static_type!(timestamp, TypeKind::Timestamp, "The `timestamp` type.");
    static_type!(uint, TypeKind::Uint, "The `uint` type.");
    static_type!(type_type, TypeKind::Type(None), "The plain `type` type.");

    /// A type from its structure.
    pub fn new(kind: TypeKind) -> Type {
        Type(Arc::new(kind))
    }
    /// `list(elem)`.
    pub fn list(elem: Type) -> Type {
        Type::new(TypeKind::List(elem))
    }
    /// `map(key, value)`.
    pub fn map(key: Type, value: Type) -> Type {
        Type::new(TypeKind::Map(key, value))
    }
    /// A named object type, e.g. `kubernetes.AdmissionRequest`.
    pub fn object(name: impl Into<Arc<str>>) -> Type {
        Type::new(TypeKind::Struct(name.into()))
    }
    /// An opaque type, e.g. `Type::opaque("net.IP", vec![])`.
    pub fn opaque(name: impl Into<Arc<str>>, params: Vec<Type>) -> Type {
        Type::new(TypeKind::Opaque(name.into(), params))
    }
    /// `optional_type(t)`.
    pub fn optional(t: Type) -> Type {
        Type::opaque("optional_type", vec![t])
    }
    /// `type(t)`.
    pub fn type_of(t: Type) -> Type {
        Type::new(TypeKind::Type(Some(t)))
    }
    /// A type parameter named `name`.
    pub fn type_param(name: impl Into<Arc<str>>) -> Type {
        Type::new(TypeKind::TypeParam(name.into()))
    }
    /// A nullable wrapper of a primitive type (`wrapper(int)`).
    pub fn wrapper(t: Type) -> Type {
        Type::new(TypeKind::Wrapper(t))
    }

    /// The structure of this type.
    pub fn type_kind(&self) -> &TypeKind {
        &self.0
    }

    /// The kind (wrappers report the kind of the wrapped type, as in cel-go).
    pub fn kind(&self) -> Kind {
        match &*self.0 {
            TypeKind::Dyn => Kind::Dyn,
            TypeKind::Any => Kind::Any,
            TypeKind::Bool => Kind::Bool,
            TypeKind::Bytes => Kind::Bytes,
            TypeKind::Double => Kind::Double,
            TypeKind::Duration => Kind::Duration,
            TypeKind::Error => Kind::Error,
            TypeKind::Int => Kind::Int,
            TypeKind::List(_) => Kind::List,
            TypeKind::Map(_, _) => Kind::Map,
            TypeKind::Null => Kind::Null,
            TypeKind::Opaque(_, _) => Kind::Opaque,
            TypeKind::String => Kind::String,
            TypeKind::Struct(_) => Kind::Struct,
            TypeKind::Timestamp => Kind::Timestamp,
            TypeKind::Type(_) => Kind::Type,
            TypeKind::TypeParam(_) => Kind::TypeParam,
            TypeKind::Uint => Kind::Uint,
            TypeKind::Wrapper(t) => t.kind(),
        }
    }

    /// The runtime type name (cel-go `Type.TypeName()`): `int`, `list`, `map`,
    /// `google.protobuf.Duration`, an object or opaque name, a type parameter name, ...
    pub fn type_name(&self) -> &str {
        match &*self.0 {
            TypeKind::Dyn => "dyn",
            TypeKind::Any => "google.protobuf.Any",
            TypeKind::Bool => "bool",
            TypeKind::Bytes => "bytes",
            TypeKind::Double => "double",
            TypeKind::Duration => "google.protobuf.Duration",
            TypeKind::Error => "error",
            TypeKind::Int => "int",
            TypeKind::List(_) => "list",
            TypeKind::Map(_, _) => "map",
            TypeKind::Null => "null_type",
            TypeKind::Opaque(n, _) => n,
            TypeKind::String => "string",
            TypeKind::Struct(n) => n,
            TypeKind::Timestamp => "google.protobuf.Timestamp",
            TypeKind::Type(_) => "type",
            TypeKind::TypeParam(n) => n,
            TypeKind::Uint => "uint",
            TypeKind::Wrapper(t) => t.type_name(),
        }
    }

    /// Parameters stored in a slice (everything but maps, whose two parameters are separate).
    fn slice_params(&self) -> &[Type] {
        match &*self.0 {
            TypeKind::List(e) => std::slice::from_ref(e),
            TypeKind::Opaque(_, p) => p,
            TypeKind::Type(Some(t)) => std::slice::from_ref(t),
            TypeKind::Wrapper(t) => t.slice_params(),
            _ => &[],
        }
    }

    /// The parameters as owned handles (works for every kind, maps included).
    pub fn params(&self) -> Vec<Type> {
        match &*self.0 {
            TypeKind::Map(k, v) => vec![k.clone(), v.clone()],
            _ => self.slice_params().to_vec(),
        }
    }

    /// Number of type parameters.
    pub fn param_count(&self) -> usize {
        match &*self.0 {
            TypeKind::Map(_, _) => 2,
            _ => self.slice_params().len(),
        }
    }

    /// The `i`-th parameter, if any.
    pub fn param(&self, i: usize) -> Option<&Type> {
        match &*self.0 {
            TypeKind::Map(k, v) => match i {
                0 => Some(k),
                1 => Some(v),
                _ => None,
            },
            _ => self.slice_params().get(i),
        }
    }

    /// Whether this is `dyn` or `any` (cel-go checker `isDyn`).
    pub fn is_dyn(&self) -> bool {
        matches!(self.kind(), Kind::Dyn | Kind::Any)
    }

    /// Whether this is the error type.
    pub fn is_error(&self) -> bool {
        self.kind() == Kind::Error
    }

    /// Whether this is `dyn`, `any` or error.
    pub fn is_dyn_or_error(&self) -> bool {
        self.is_dyn() || self.is_error()
    }

    /// Whether this is a nullable wrapper type.
    pub fn is_wrapper(&self) -> bool {
        matches!(&*self.0, TypeKind::Wrapper(_))
    }

    /// `Some(T)` when this is `optional_type(T)`.
    pub fn optional_param(&self) -> Option<&Type> {
        match &*self.0 {
            TypeKind::Opaque(n, p) if &**n == "optional_type" && p.len() == 1 => p.first(),
            _ => None,
        }
    }

    /// cel-go `Type.IsExactType`: same kind, name and (recursively) parameters.
    pub fn is_exact(&self, other: &Type) -> bool {
        self.is_type_internal(other, true)
    }

    /// cel-go `Type.IsEquivalentType`: as [`Type::is_exact`] but ignoring type parameter names.
    pub fn is_equivalent(&self, other: &Type) -> bool {
        self.is_type_internal(other, false)
    }

    fn is_type_internal(&self, other: &Type, check_param_name: bool) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if self.kind() != other.kind() || self.param_count() != other.param_count() {
            return false;
        }
        if (check_param_name || self.kind() != Kind::TypeParam)
            && self.type_name() != other.type_name()
        {
            return false;
        }
        (0..self.param_count()).all(|i| match (self.param(i), other.param(i)) {
            (Some(a), Some(b)) => a.is_type_internal(b, check_param_name),
            _ => false,
        })
    }

    /// cel-go `Type.IsAssignableType`: whether a value of `from` may be used where `self` is
    /// expected, without type-parameter unification (that is the checker's job).
    pub fn is_assignable_from(&self, from: &Type) -> bool {
        if let TypeKind::Wrapper(w) = &*self.0 {
            return Type::null().default_is_assignable(from) || w.is_assignable_from(from);
        }
        self.default_is_assignable(from)
    }

    fn default_is_assignable(&self, from: &Type) -> bool {
        if Arc::ptr_eq(&self.0, &from.0)
            || matches!(self.kind(), Kind::Dyn | Kind::Any | Kind::TypeParam)
        {
            return true;
        }
        if self.kind() != from.kind()
            || self.type_name() != from.type_name()
            || self.param_count() != from.param_count()
        {
            return false;
        }
        (0..self.param_count()).all(|i| match (self.param(i), from.param(i)) {
            (Some(a), Some(b)) => a.is_assignable_from(b),
            _ => false,
        })
    }

    /// cel-go `Type.DeclaredTypeName`: the type name, or `wrapper(name)` for wrappers.
    pub fn declared_type_name(&self) -> String {
        if self.is_wrapper() {
            format!("wrapper({})", self.type_name())
        } else {
            self.type_name().to_string()
        }
    }

    /// Parses a type as printed by [`fmt::Display`] (cel-go `FormatCELType` syntax).
    ///
    /// Bare names that are not built-in types parse as object types; names of the form
    /// `_varN` and single upper-case ASCII letters parse as type parameters (printing does
    /// not distinguish these, so this is a convention).
    pub fn parse(text: &str) -> Result<Type, String> {
        let mut p = TypeParser {
            s: text.as_bytes(),
            i: 0,
            text,
            depth: 0,
        };
        let t = p.parse_type()?;
        p.skip_ws();
        if p.i != p.s.len() {
            return Err(format!(
                "unexpected trailing input at byte {} in '{text}'",
                p.i
            ));
        }
        Ok(t)
    }
}

impl TypeKind {
    /// Whether this is a variant without types or names inside.
    fn holds_no_type(&self) -> bool {
        !matches!(
            self,
            TypeKind::List(_)
                | TypeKind::Map(..)
                | TypeKind::Opaque(..)
                | TypeKind::Struct(_)
                | TypeKind::Type(_)
                | TypeKind::TypeParam(_)
                | TypeKind::Wrapper(_)
        )
    }
}

/// A one-to-one correspondence between the object type names of two typings of the same
/// expression (for instance the kinds' schema types `Deployment.spec` and `StatefulSet.spec`),
/// built while comparing their types with [`ObjectRenaming::same`]. Two types correspond when
/// they are equal after renaming object names along it; a name may only pair with a different
/// one when `keep` says neither is read by name. Everything that depends on types only through
/// their structure, equality between types and the names `keep` lists sees the two typings
/// alike (the cost estimator: `crate::cost`, docs/cost.md).
#[derive(Default)]
pub struct ObjectRenaming {
    /// (name in the first typing, name in the second), identical pairs included.
    pairs: Vec<(Arc<str>, Arc<str>)>,
}

impl ObjectRenaming {
    /// Pairs `a` with `b`; `false` when either is already paired with another name, or they
    /// differ and `keep` holds for one of them.
    fn pair(&mut self, a: &Arc<str>, b: &Arc<str>, keep: &dyn Fn(&str) -> bool) -> bool {
        let eq = |x: &Arc<str>, y: &Arc<str>| Arc::ptr_eq(x, y) || x == y;
        for (l, r) in &self.pairs {
            let (left, right) = (eq(l, a), eq(r, b));
            if left || right {
                return left && right;
            }
        }
        if !eq(a, b) && (keep(a) || keep(b)) {
            return false;
        }
        self.pairs.push((Arc::clone(a), Arc::clone(b)));
        true
    }

    /// Whether `a` (of the first typing) and `b` (of the second) are the same type once object
    /// names are renamed along this correspondence, extending it with the new pairs.
    #[inline]
    pub fn same(&mut self, a: &Type, b: &Type, keep: &dyn Fn(&str) -> bool) -> bool {
        // Most nodes have the same shared type without names in both typings (`string`,
        // `bool`, ...): no need to look further.
        if Arc::ptr_eq(&a.0, &b.0) && a.0.holds_no_type() {
            return true;
        }
        self.same_parts(a, b, keep)
    }

    fn same_parts(&mut self, a: &Type, b: &Type, keep: &dyn Fn(&str) -> bool) -> bool {
        match (a.type_kind(), b.type_kind()) {
            (TypeKind::Struct(x), TypeKind::Struct(y)) => self.pair(x, y, keep),
            (TypeKind::List(x), TypeKind::List(y))
            | (TypeKind::Wrapper(x), TypeKind::Wrapper(y)) => self.same(x, y, keep),
            (TypeKind::Map(k1, v1), TypeKind::Map(k2, v2)) => {
                self.same(k1, k2, keep) && self.same(v1, v2, keep)
            }
            (TypeKind::Opaque(n1, p1), TypeKind::Opaque(n2, p2)) => {
                n1 == n2
                    && p1.len() == p2.len()
                    && p1.iter().zip(p2).all(|(x, y)| self.same(x, y, keep))
            }
            (TypeKind::Type(x), TypeKind::Type(y)) => match (x, y) {
                (None, None) => true,
                (Some(x), Some(y)) => self.same(x, y, keep),
                _ => false,
            },
            // The other variants hold no type: equal or not as they are (and different
            // variants are never equal).
            (x, y) => x == y,
        }
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Type({self})")
    }
}

/// Prints exactly as cel-go `checker.FormatCELType`.
impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            Kind::Any => return f.write_str("any"),
            Kind::Duration => return f.write_str("duration"),
            Kind::Error => return f.write_str("!error!"),
            Kind::Null => return f.write_str("null"),
            Kind::Timestamp => return f.write_str("timestamp"),
            Kind::TypeParam => return f.write_str(self.type_name()),
            _ => {}
        }
        let n = self.param_count();
        if n == 0 {
            if self.is_wrapper() {
                return write!(f, "wrapper({})", self.type_name());
            }
            return f.write_str(self.type_name());
        }
        f.write_str(self.type_name())?;
        f.write_str("(")?;
        for i in 0..n {
            if i > 0 {
                f.write_str(", ")?;
            }
            if let Some(p) = self.param(i) {
                write!(f, "{p}")?;
            }
        }
        f.write_str(")")
    }
}

struct TypeParser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
    depth: usize,
}

impl TypeParser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i] == b' ' {
            self.i += 1;
        }
    }

    fn name(&mut self) -> Result<&str, String> {
        self.skip_ws();
        let start = self.i;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'!' || c >= 0x80 {
                self.i += 1;
            } else {
                break;
            }
        }
        if start == self.i {
            return Err(format!(
                "expected a type name at byte {start} in '{}'",
                self.text
            ));
        }
        self.text
            .get(start..self.i)
            .ok_or_else(|| format!("invalid UTF-8 boundary in '{}'", self.text))
    }

    fn parse_type(&mut self) -> Result<Type, String> {
        self.depth += 1;
        if self.depth > 64 {
            return Err("type nesting too deep".to_string());
        }
        let name = self.name()?.to_string();
        self.skip_ws();
        let mut params = Vec::new();
        if self.i < self.s.len() && self.s[self.i] == b'(' {
            self.i += 1;
            loop {
                params.push(self.parse_type()?);
                self.skip_ws();
                match self.s.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => {
                        return Err(format!(
                            "expected ',' or ')' at byte {} in '{}'",
                            self.i, self.text
                        ));
                    }
                }
            }
        }
        self.depth -= 1;
        let wrong = |n: usize| format!("'{name}' takes {n} parameter(s), got {}", params.len());
        let t = match (name.as_str(), params.len()) {
            ("list", 1) => Type::list(params.remove(0)),
            ("list", _) => return Err(wrong(1)),
            ("map", 2) => {
                let v = params.remove(1);
                Type::map(params.remove(0), v)
            }
            ("map", _) => return Err(wrong(2)),
            ("type", 0) => Type::type_type(),
            ("type", 1) => Type::type_of(params.remove(0)),
            ("type", _) => return Err(wrong(1)),
            ("wrapper", 1) => {
                let inner = params.remove(0);
                match inner.kind() {
                    Kind::Bool
                    | Kind::Bytes
                    | Kind::Double
                    | Kind::Int
                    | Kind::String
                    | Kind::Uint
                        if !inner.is_wrapper() =>
                    {
                        Type::wrapper(inner)
                    }
                    _ => return Err(format!("wrapper of non-primitive type '{inner}'")),
                }
            }
            (_, n) if n > 0 => Type::opaque(name.as_str(), params),
            ("dyn", _) => Type::dyn_type(),
            ("any", _) => Type::any(),
            ("bool", _) => Type::bool(),
            ("bytes", _) => Type::bytes(),
            ("double", _) => Type::double(),
            ("duration", _) => Type::duration(),
            ("!error!", _) => Type::error(),
            ("int", _) => Type::int(),
            ("null", _) => Type::null(),
            ("string", _) => Type::string(),
            ("timestamp", _) => Type::timestamp(),
            ("uint", _) => Type::uint(),
            (n, _) if is_type_param_name(n) => Type::type_param(n),
            (n, _) if n.contains('!') => return Err(format!("invalid type name '{n}'")),
            (n, _) => Type::object(n),
        };
        Ok(t)
    }
}

fn is_type_param_name(n: &str) -> bool {
    (n.len() == 1 && n.as_bytes()[0].is_ascii_uppercase())
        || n.strip_prefix("_var")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Object names correspond one to one, never a name `keep` lists, and only where the rest
    // of the types is equal.
    #[test]
    fn object_renaming_is_a_bijection_of_free_names() {
        let keep = |n: &str| n.starts_with("kubernetes.");
        let o = |n: &str| Type::object(n);
        let mut r = ObjectRenaming::default();
        assert!(r.same(&o("Deployment"), &o("StatefulSet"), &keep));
        assert!(r.same(
            &Type::list(o("Deployment")),
            &Type::list(o("StatefulSet")),
            &keep
        ));
        assert!(r.same(&o("Deployment.spec"), &o("StatefulSet.spec"), &keep));
        assert!(r.same(&Type::string(), &Type::string(), &keep));
        // Deployment already stands for StatefulSet, and StatefulSet for Deployment.
        assert!(!r.same(&o("Deployment"), &o("DaemonSet"), &keep));
        assert!(!r.same(&o("ReplicaSet"), &o("StatefulSet"), &keep));
        // Two names may not become one (`a == b` would change): the identity counts too.
        let mut r = ObjectRenaming::default();
        assert!(r.same(&o("A"), &o("A"), &keep));
        assert!(!r.same(&o("B"), &o("A"), &keep));
        // Names the estimators read stay as they are.
        let mut r = ObjectRenaming::default();
        assert!(!r.same(&o("kubernetes.URL"), &o("X"), &keep));
        assert!(!r.same(&o("X"), &o("kubernetes.URL"), &keep));
        assert!(r.same(&o("kubernetes.URL"), &o("kubernetes.URL"), &keep));
        // Structure must match.
        let mut r = ObjectRenaming::default();
        assert!(!r.same(&Type::list(o("A")), &o("A"), &keep));
        assert!(!r.same(&Type::int(), &Type::uint(), &keep));
        assert!(!r.same(
            &Type::map(Type::string(), o("A")),
            &Type::map(Type::int(), o("A")),
            &keep
        ));
    }

    #[test]
    fn prints_like_format_cel_type() {
        let cases = [
            (Type::int(), "int"),
            (Type::uint(), "uint"),
            (Type::dyn_type(), "dyn"),
            (Type::any(), "any"),
            (Type::null(), "null"),
            (Type::error(), "!error!"),
            (Type::duration(), "duration"),
            (Type::timestamp(), "timestamp"),
            (Type::type_type(), "type"),
            (Type::type_of(Type::int()), "type(int)"),
            (Type::list(Type::string()), "list(string)"),
            (
                Type::map(Type::string(), Type::dyn_type()),
                "map(string, dyn)",
            ),
            (Type::optional(Type::int()), "optional_type(int)"),
            (
                Type::object("kubernetes.AdmissionRequest"),
                "kubernetes.AdmissionRequest",
            ),
            (Type::opaque("net.IP", vec![]), "net.IP"),
            (Type::wrapper(Type::int()), "wrapper(int)"),
            (Type::type_param("_var0"), "_var0"),
            (Type::list(Type::duration()), "list(duration)"),
        ];
        for (t, s) in cases {
            assert_eq!(t.to_string(), s);
            assert_eq!(Type::parse(s).map(|p| p.to_string()), Ok(s.to_string()));
        }
    }

    #[test]
    fn exactness_and_assignability() {
        assert!(Type::wrapper(Type::int()).is_exact(&Type::int()));
        assert!(Type::wrapper(Type::int()).is_assignable_from(&Type::null()));
        assert!(!Type::int().is_assignable_from(&Type::null()));
        assert!(Type::list(Type::dyn_type()).is_assignable_from(&Type::list(Type::int())));
        assert!(!Type::list(Type::int()).is_assignable_from(&Type::list(Type::dyn_type())));
        assert!(Type::map(Type::string(), Type::int()).param(1) == Some(&Type::int()));
        assert!(Type::parse("list(").is_err());
        assert!(Type::parse("map(int)").is_err());
    }
}
