//! The admission variables of ValidatingAdmissionPolicy expressions: the hand-built
//! `request` and `namespaceObject` types, `authorizer`, `object`/`oldObject`/`params`, and the
//! `variables` composition.
//!
//! Sources: Kubernetes 1.37.1 `k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`
//! (`BuildRequestType`, `BuildNamespaceType`, variable names), `composition.go`
//! (`kubernetes.variables`, `convertCelTypeToDeclType`) and
//! `pkg/admission/plugin/policy/validating/typechecking.go` (`buildEnvSet`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::cel::{StructTypes, Type, TypeKind, TypeProvider};

/// `object` (compile.go `ObjectVarName`).
pub const OBJECT_VAR: &str = "object";
/// `oldObject` (compile.go `OldObjectVarName`).
pub const OLD_OBJECT_VAR: &str = "oldObject";
/// `params` (compile.go `ParamsVarName`).
pub const PARAMS_VAR: &str = "params";
/// `request` (compile.go `RequestVarName`).
pub const REQUEST_VAR: &str = "request";
/// `namespaceObject` (compile.go `NamespaceVarName`).
pub const NAMESPACE_VAR: &str = "namespaceObject";
/// `authorizer` (compile.go `AuthorizerVarName`).
pub const AUTHORIZER_VAR: &str = "authorizer";
/// `variables` (composition.go).
pub const VARIABLES_VAR: &str = "variables";

/// The type name of `request`.
pub const REQUEST_TYPE: &str = "kubernetes.AdmissionRequest";
/// The type name of `namespaceObject`.
pub const NAMESPACE_TYPE: &str = "kubernetes.Namespace";
/// The type name of `authorizer` (pkg/cel/library/authz.go `AuthorizerType`).
pub const AUTHORIZER_TYPE: &str = "kubernetes.authorization.Authorizer";
/// The type name of `variables` (composition.go `variablesTypeName`).
pub const VARIABLES_TYPE: &str = "kubernetes.variables";

/// The hand-built object types of `request` and `namespaceObject` (compile.go
/// `BuildRequestType`, `BuildNamespaceType`), with their raw field names.
pub fn request_and_namespace_types() -> StructTypes {
    let s = Type::string;
    let ls = || Type::list(Type::string());
    let gvk = "kubernetes.GroupVersionKind";
    let gvr = "kubernetes.GroupVersionResource";
    let user = "kubernetes.UserInfo";
    let mut t = StructTypes::new();
    t.add_type(gvk, [("group", s()), ("version", s()), ("kind", s())]);
    t.add_type(gvr, [("group", s()), ("version", s()), ("resource", s())]);
    t.add_type(
        user,
        [
            ("username", s()),
            ("uid", s()),
            ("groups", ls()),
            ("extra", Type::map(s(), ls())),
        ],
    );
    t.add_type(
        REQUEST_TYPE,
        [
            ("kind", Type::object(gvk)),
            ("resource", Type::object(gvr)),
            ("subResource", s()),
            ("requestKind", Type::object(gvk)),
            ("requestResource", Type::object(gvr)),
            ("requestSubResource", s()),
            ("name", s()),
            ("namespace", s()),
            ("operation", s()),
            ("userInfo", Type::object(user)),
            ("dryRun", Type::bool()),
            ("options", Type::dyn_type()),
        ],
    );
    let spec = "kubernetes.NamespaceSpec";
    let cond = "kubernetes.NamespaceCondition";
    let status = "kubernetes.NamespaceStatus";
    let meta = "kubernetes.NamespaceMetadata";
    t.add_type(spec, [("finalizers", ls())]);
    t.add_type(
        cond,
        [
            ("status", s()),
            ("type", s()),
            ("lastTransitionTime", Type::timestamp()),
            ("message", s()),
            ("reason", s()),
        ],
    );
    t.add_type(
        status,
        [
            ("conditions", Type::list(Type::object(cond))),
            ("phase", s()),
        ],
    );
    t.add_type(
        meta,
        [
            ("name", s()),
            ("generateName", s()),
            ("namespace", s()),
            ("labels", Type::map(s(), s())),
            ("annotations", Type::map(s(), s())),
            ("UID", s()),
            ("creationTimestamp", Type::timestamp()),
            ("deletionGracePeriodSeconds", Type::int()),
            ("deletionTimestamp", Type::timestamp()),
            ("generation", Type::int()),
            ("resourceVersion", s()),
            ("finalizers", ls()),
        ],
    );
    t.add_type(
        NAMESPACE_TYPE,
        [
            ("metadata", Type::object(meta)),
            ("spec", Type::object(spec)),
            ("status", Type::object(status)),
        ],
    );
    t
}

/// Declares `request` and `namespaceObject` with their hand-built types (shared by the
/// type checker's and the API server's environments).
pub fn add_request_and_namespace(
    b: &mut crate::cel::EnvBuilder,
) -> Result<(), crate::cel::EnvError> {
    b.add_provider(Arc::new(request_and_namespace_types()));
    b.add_variable(NAMESPACE_VAR, Type::object(NAMESPACE_TYPE))?;
    b.add_variable(REQUEST_VAR, Type::object(REQUEST_TYPE))?;
    Ok(())
}

/// How `params` is declared (typechecking.go `buildEnvSet`).
#[derive(Clone, Debug, PartialEq)]
pub enum Params {
    /// The policy has no (parseable) `paramKind`: `params` is not declared at all, so every
    /// use is `undeclared reference to 'params' (in container '')`.
    Absent,
    /// `paramKind` is set but its schema is unknown (or has no type): `params` is `dyn`.
    Untyped,
    /// `paramKind`'s schema converted to a CEL type (its object types must be known to the
    /// type provider given with it).
    Typed(Type),
}

/// The reserved words of the CEL grammar (Kubernetes pkg/cel/escaping.go
/// `celReservedSymbols`), shared with the schema conversion that escapes them.
pub use crate::schema::escape::CEL_RESERVED_SYMBOLS;

/// Wraps the caller's provider of object/params types with the keyword fallback of
/// Kubernetes' `DeclTypeProvider.FindStructFieldType`: a field that is not found and is a
/// reserved word (e.g. `namespace`) is looked up as `__namespace__`. Kubernetes turns it on
/// for environments whose compatibility version is at least 1.31, which includes the
/// StoredExpressions environment the type checker uses (environment.go
/// `filterAndBuildOpts`).
pub struct KeywordFieldNames {
    inner: Arc<dyn TypeProvider>,
}

impl KeywordFieldNames {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn TypeProvider>) -> Self {
        Self { inner }
    }
}

impl TypeProvider for KeywordFieldNames {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        self.inner.find_struct_type(name)
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        self.inner
            .find_struct_field_type(struct_name, field)
            .or_else(|| {
                if CEL_RESERVED_SYMBOLS.contains(&field) {
                    self.inner
                        .find_struct_field_type(struct_name, &format!("__{field}__"))
                } else {
                    None
                }
            })
    }

    fn find_ident(&self, name: &str) -> Option<Type> {
        self.inner.find_ident(name)
    }

    fn is_nameable(&self, name: &str) -> bool {
        self.inner.is_nameable(name)
    }
}

/// The `kubernetes.variables` object type: one field per composited variable compiled so
/// far, with the variable's converted type (composition.go `compositionState.AddField`).
#[derive(Clone, Debug, Default)]
pub struct VariablesType {
    fields: HashMap<String, Type>,
}

impl VariablesType {
    /// No variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or, for a repeated name, replaces) the field `name` with the converted form of
    /// the variable's deduced type (`None` when the variable failed to compile: `dyn`).
    pub fn add(&mut self, name: &str, deduced: Option<&Type>) {
        let t = deduced.map_or_else(Type::dyn_type, variable_field_type);
        self.fields.insert(name.to_string(), t);
    }

    /// The type of field `name`, if declared.
    pub fn get(&self, name: &str) -> Option<&Type> {
        self.fields.get(name)
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

impl TypeProvider for VariablesType {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        (name == VARIABLES_TYPE).then(|| Type::object(VARIABLES_TYPE))
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        if struct_name != VARIABLES_TYPE {
            return None;
        }
        // The keyword fallback applies to every DeclType of the provider; variable names
        // are CEL identifiers, so `__x__` only matches a variable literally named so.
        self.fields.get(field).cloned().or_else(|| {
            if CEL_RESERVED_SYMBOLS.contains(&field) {
                self.fields.get(&format!("__{field}__")).cloned()
            } else {
                None
            }
        })
    }
}

/// composition.go `convertCelTypeToDeclType` followed by `DeclType.CelType()`: primitive
/// types, `dyn`, `any` and `null` are kept; lists and maps are rebuilt from their converted
/// parameters; everything else (object and opaque types, optionals, `type`, wrappers) becomes
/// `dyn`.
pub fn variable_field_type(t: &Type) -> Type {
    match t.type_kind() {
        TypeKind::Any
        | TypeKind::Bool
        | TypeKind::Bytes
        | TypeKind::Double
        | TypeKind::Duration
        | TypeKind::Int
        | TypeKind::Null
        | TypeKind::String
        | TypeKind::Timestamp
        | TypeKind::Uint
        | TypeKind::Dyn => t.clone(),
        TypeKind::List(e) => Type::list(variable_field_type(e)),
        TypeKind::Map(k, v) => Type::map(variable_field_type(k), variable_field_type(v)),
        _ => Type::dyn_type(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_types_convert_like_composition_go() {
        let cases = [
            ("int", "int"),
            ("list(string)", "list(string)"),
            ("map(string, list(int))", "map(string, list(int))"),
            ("kubernetes.Quantity", "dyn"),
            ("list(kubernetes.URL)", "list(dyn)"),
            ("optional_type(int)", "dyn"),
            ("type(int)", "dyn"),
            ("wrapper(int)", "dyn"),
            ("null", "null"),
            ("any", "any"),
            ("timestamp", "timestamp"),
        ];
        for (from, to) in cases {
            let t = Type::parse(from).expect("valid type");
            assert_eq!(variable_field_type(&t).to_string(), to, "{from}");
        }
        let ip = Type::opaque("net.IP", vec![]);
        assert_eq!(variable_field_type(&ip).to_string(), "dyn");
    }

    #[test]
    fn variables_type_fields() {
        let mut v = VariablesType::new();
        assert!(v.is_empty());
        v.add("a", Some(&Type::int()));
        v.add("b", None);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v.find_struct_field_type(VARIABLES_TYPE, "a"),
            Some(Type::int())
        );
        assert_eq!(
            v.find_struct_field_type(VARIABLES_TYPE, "b"),
            Some(Type::dyn_type())
        );
        assert_eq!(v.find_struct_field_type(VARIABLES_TYPE, "c"), None);
        v.add("a", Some(&Type::string()));
        assert_eq!(v.get("a"), Some(&Type::string()));
    }

    #[test]
    fn keyword_fallback() {
        let inner = StructTypes::new().with_type("T", [("__namespace__", Type::string())]);
        let p = KeywordFieldNames::new(Arc::new(inner));
        assert_eq!(
            p.find_struct_field_type("T", "namespace"),
            Some(Type::string())
        );
        assert_eq!(p.find_struct_field_type("T", "other"), None);
    }
}
