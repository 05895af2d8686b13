//! The seams between the pure policy layer and the parts it does not own: schema lookup
//! (`src/schema/`) and CEL checking in the Kubernetes environment (`crates/cel/src/`,
//! `src/k8s_env/`). The REST mapper and discovery seams live in
//! [`restmapper`](super::restmapper).
//!
//! Backend values (a converted schema type, a parsed expression) are opaque to the policy
//! layer: it only passes them back to the backend that made them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::gvk::Gvk;
use super::issues::Issues;
use super::types::OutputType;

/// A backend's CEL object type for a kind's root object (for upstream: the `DeclType` that
/// `SchemaDeclType(schema, true)` returns, renamed `<Kind><N>`).
#[derive(Clone)]
pub struct SchemaType(pub Arc<dyn Any + Send + Sync>);

impl fmt::Debug for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SchemaType(..)")
    }
}

/// A backend's parsed expression (an AST). Produced by [`ExpressionChecker::parse`] once per
/// distinct expression of a policy and checked in every kind's environment.
#[derive(Clone)]
pub struct ParsedExpr(pub Arc<dyn Any + Send + Sync>);

impl fmt::Debug for ParsedExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ParsedExpr(..)")
    }
}

/// A successfully resolved schema.
#[derive(Debug, Clone)]
pub enum SchemaLookup {
    /// The schema converts to a CEL type.
    Typed(SchemaType),
    /// The schema exists but converts to no type (upstream: `SchemaDeclType` returns nil, e.g.
    /// a schema without `type`); the object is then declared `dyn` and the kind still checked.
    Untyped,
}

/// Why a kind's schema is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// No schema for this kind (upstream `resolver.ErrSchemaNotFound`): the kind is skipped.
    #[error("schema not found")]
    NotFound,
    /// The source failed (network, malformed document, ...): the kind is skipped; if every
    /// kind fails this way the policy's `TypeChecked` condition is `False/SchemaUnavailable`.
    #[error("{0}")]
    Failed(String),
}

/// Resolves the schema of a kind (upstream `resolver.SchemaResolver.ResolveSchema` followed by
/// `SchemaDeclType(.., true)` and `MaybeAssignTypeName`).
pub trait SchemaSource: Send + Sync {
    /// The CEL type of `gvk`'s root object.
    fn resolve(&self, gvk: &Gvk) -> Result<SchemaLookup, SchemaError>;
}

/// How `object` and `oldObject` are declared.
#[derive(Debug, Clone, Copy)]
pub enum ObjectDecl<'a> {
    /// Typed by the kind's schema.
    Typed(&'a SchemaType),
    /// `dyn` (the schema converted to no type).
    Dyn,
}

/// How `params` is declared.
#[derive(Debug, Clone, Copy)]
pub enum ParamsDecl<'a> {
    /// No `paramKind` (or an unparseable one): `params` is not declared.
    Absent,
    /// `paramKind` set but its schema unresolved or untyped: `params` is `dyn`.
    Dyn,
    /// Typed by the param kind's schema.
    Typed(&'a SchemaType),
}

/// What one kind's environment declares besides the fixed admission variables
/// (`request`, `namespaceObject`, `authorizer`, and `variables` as an object type
/// `kubernetes.variables` that starts with no fields).
#[derive(Debug, Clone, Copy)]
pub struct EnvRequest<'a> {
    /// The kind being checked.
    pub gvk: &'a Gvk,
    /// `object` / `oldObject`.
    pub object: ObjectDecl<'a>,
    /// `params`.
    pub params: ParamsDecl<'a>,
    /// Declare the patch types of MutatingAdmissionPolicy mutations (`Object`, `JSONPatch`,
    /// `jsonpatch.escapeKey`; k8s.io/apiserver v0.37.1 admission/plugin/cel/compile.go
    /// `hasPatchTypes`).
    pub patch_types: bool,
    /// The policy is a MutatingAdmissionPolicy: schema properties the conversion gives no
    /// type are `dyn` fields rather than undefined (docs/mutating.md).
    pub mutating: bool,
}

/// One overload of a function of the environment ([`ExpressionChecker::functions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionOverload {
    /// The function's name, e.g. `startsWith`, `math.greatest`.
    pub name: String,
    /// For a member overload (`x.f(...)`), its receiver's type as cel-go displays it
    /// (`string`, `list(A)`; a type parameter such as `A` for any type).
    pub receiver: Option<String>,
    /// Whether the receiver is a type parameter: the overload applies to a value of any type.
    pub any_receiver: bool,
    /// The signature: `string.startsWith(string) -> bool`, `size(list(A)) -> int`.
    pub signature: String,
    /// The Kubernetes minor version (1.x) from which the overload exists, when the backend
    /// knows it and it is not in every version.
    pub since_minor: Option<u32>,
}

/// Parses expressions and builds per-kind checking environments (upstream: the
/// StoredExpressions environment of `buildEnvSet` plus a composited compiler).
pub trait ExpressionChecker: Send + Sync {
    /// Parses an expression. `Err` carries the parse issues, in cel-go's order and text
    /// ([`Issues::render`] is cel-go's `issues.String()`). Called once per distinct expression
    /// of a policy.
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues>;

    /// A fresh environment for one kind of one policy (called once per kind per policy; an
    /// implementation should cache the per-kind base environment across policies and only
    /// add the policy's `params` and `variables`). `Err` is an internal error; it is reported
    /// as `type checking error: fail to build env: <err>` for every expression.
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String>;

    /// Extended mode only: the kind-narrowing analysis of a parsed expression (the guard of
    /// each AST node, [`Guards`](super::narrowing::Guards)). `None`: no analysis, every
    /// finding counts for every kind.
    fn guards(&self, _parsed: &ParsedExpr) -> Option<super::narrowing::Guards> {
        None
    }

    /// Extended mode only: whether `path` (field names from the root of `object`) names a
    /// field that the schema lists in `required` of its parent object, every earlier step
    /// being a field of an object type. `false` when unknown.
    fn is_required_field(&self, _object: &SchemaType, _path: &[String]) -> bool {
        false
    }

    /// Extended mode only: whether `path` (field names from the root of `object`) names a
    /// field no valid object has: every step before the last is a field of an object type,
    /// and the last step's parent is an object type that keeps no undeclared fields (not
    /// `x-kubernetes-preserve-unknown-fields`) and declares no property of that name.
    /// `false` when unknown.
    fn is_absent_field(&self, _object: &SchemaType, _path: &[String]) -> bool {
        false
    }

    /// Extended mode only: the access chains of `site` for runtime safety
    /// ([`crate::policy::runtime`]), with `conditions` (parsed expressions that must have the
    /// given value for `site`'s result to matter: matchConditions true, a messageExpression's
    /// validation false) and the policy's parsed `variables`. `None`: no analysis.
    fn access_chains(
        &self,
        _site: &ParsedExpr,
        _conditions: &[(&ParsedExpr, bool)],
        _variables: &[(&str, &ParsedExpr)],
    ) -> Option<Vec<crate::policy::runtime::Chain>> {
        None
    }

    /// Extended mode only: the witness objects of a kind ([`crate::policy::runtime`]) and its
    /// resource name; `None` when there are none.
    fn witnesses(
        &self,
        _gvk: &super::gvk::Gvk,
    ) -> Option<&'static crate::policy::runtime::KindWitnesses> {
        None
    }

    /// Extended mode only: the CEL literal of the zero value of the field at `path` (from the
    /// root of `object`), for a rewrite `….orValue(<zero>)`: `''`, `0`, `false`, `[]`, `{}`
    /// for a map. `None` when unknown or an object type (whose literal is not a map).
    fn zero_value(
        &self,
        _object: &SchemaType,
        _path: &[crate::policy::runtime::Seg],
    ) -> Option<&'static str> {
        None
    }

    /// Editor completion (`crate::lsp`): the fields of the object type reached by `path`
    /// (field names from the root of `object`, each step a field of an object type), by
    /// name, each with its type as [`OutputType`] displays it. `None` when the path does not
    /// reach an object type or the backend does not know.
    fn fields_at(&self, _object: &SchemaType, _path: &[String]) -> Option<Vec<(String, String)>> {
        None
    }

    /// Editor completion and hover (`crate::lsp`): every overload of the functions of the
    /// target version's environment, by function name. Empty when the backend does not
    /// know.
    fn functions(&self) -> Vec<FunctionOverload> {
        Vec::new()
    }

    /// MutatingAdmissionPolicy mutations: the `Object…{}` and `JSONPatch{}` literals of a
    /// parsed expression ([`crate::policy::literal`]). `None`: no analysis.
    fn patch_literals(&self, _parsed: &ParsedExpr) -> Option<crate::policy::literal::Literals> {
        None
    }
}

/// One kind's environment, extended as the policy's variables are compiled.
pub trait CheckEnv {
    /// Type-checks a parsed expression and runs the AST validators (the part of cel-go's
    /// `env.Compile` after parsing). `Ok` is the output type; `Err` the issues, in cel-go's
    /// order and text.
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, Issues>;

    /// Adds (or replaces) the field `name` of `variables` with type `ty` (already converted
    /// with [`OutputType::variable_decl_type`]).
    fn declare_variable(&mut self, name: &str, ty: &OutputType);

    /// Extended mode only: what upstream does not say about an expression but a user should
    /// know, as warnings in cel-go's display format (e.g. a function the target Kubernetes
    /// version does not have yet, with the version that introduced it). `None` when there is
    /// nothing.
    fn notes(&self, _parsed: &ParsedExpr) -> Option<Issues> {
        None
    }

    /// Extended mode only: the worst-case cost estimate of an expression that checks in this
    /// environment, with the sizes of the kinds' schemas (docs/cost.md). `None` when the
    /// backend does not estimate (or the expression does not check).
    fn cost(&self, _parsed: &ParsedExpr) -> Option<super::cost::CostOutcome> {
        None
    }
}
