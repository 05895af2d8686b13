//! The environments kube-apiserver compiles admission policy expressions in when a policy is
//! created or updated (as opposed to the status controller's type-checking environment of
//! the rest of this module).
//!
//! Source: Kubernetes 1.37.1 `k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`
//! (`NewCompiler`, `mustBuildEnvs`, `createEnvForOpts`, `CompileCELExpression`),
//! `composition.go` (`NewCompositedCompiler`, `CompileAndStoreVariable`) and
//! `k8s.io/apiserver/pkg/cel/environment/base.go` (`DefaultCompatibilityVersion`):
//!
//! * `object`, `oldObject` (and `params` when declared) are `dyn`; `request` and
//!   `namespaceObject` are the hand-built object types; `authorizer` and the runtime variable
//!   `authorizer.requestResource` are declared only where the caller asks for the authorizer.
//! * Two library sets ([`EnvKind`]): new expressions are compiled with the libraries of the
//!   server's minimum compatibility version (one minor older than the server), expressions
//!   already stored in the object being updated with every library of the server
//!   (StoredExpressions).
//! * With `spec.variables`, the composited compiler adds `variables` (`kubernetes.variables`)
//!   whose fields are the variables compiled so far.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::cel::{
    CheckedTypes, Env, EnvBuilder, EnvError, EnvOptions, FunctionDecl, Issues, OverloadDecl,
    ParsedExpr, Type, TypeProvider,
};

use super::admission::{self, VariablesType};
use super::libraries::{self, LibrarySelection};

/// The type of `authorizer.requestResource` (pkg/cel/library/authz.go `ResourceCheckType`).
pub const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";
/// The runtime variable `authorizer.requestResource` (compile.go).
pub const REQUEST_RESOURCE_AUTHORIZER_VAR: &str = "authorizer.requestResource";

/// Which library set (environment/base.go `environment.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnvKind {
    /// `NewExpressions`: the libraries of the server's minimum compatibility version.
    New,
    /// `StoredExpressions`: every library the server has.
    Stored,
}

/// Which optional variables are declared (compile.go `OptionalVariableDeclarations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decls {
    /// `params` is declared (`dyn`).
    pub has_params: bool,
    /// `authorizer` and `authorizer.requestResource` are declared.
    pub has_authorizer: bool,
    /// The mutation types (`HasPatchTypes`, compile.go `hasPatchTypes`): the `Object` and
    /// `Object.<path>` types of apply configurations, `JSONPatch`, and the
    /// `jsonpatch.escapeKey` function. Declared for MutatingAdmissionPolicy mutations only.
    pub has_patch_types: bool,
}

/// The library minor version kube-apiserver 1.`server_minor` compiles with for `kind`:
/// `DefaultCompatibilityVersion` is the binary's version minus one minor.
pub fn library_minor(server_minor: u32, kind: EnvKind) -> u32 {
    match kind {
        EnvKind::New => server_minor.saturating_sub(1),
        EnvKind::Stored => server_minor,
    }
}

type Key = (u32, Decls);

fn cache() -> &'static Mutex<HashMap<Key, Arc<Env>>> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<Env>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The environment (without `variables`) for library version `1.<lib_minor>` and `decls`;
/// built once per process per combination.
pub fn env(lib_minor: u32, decls: Decls) -> Result<Arc<Env>, EnvError> {
    let key = (lib_minor, decls);
    if let Some(e) = cache().lock().map_err(|_| poisoned())?.get(&key) {
        return Ok(e.clone());
    }
    let built = Arc::new(build_env(lib_minor, decls)?);
    cache()
        .lock()
        .map_err(|_| poisoned())?
        .insert(key, built.clone());
    Ok(built)
}

fn poisoned() -> EnvError {
    EnvError("apiserver environment cache poisoned".into())
}

/// Builds [`env`] without the cache (compile.go `createEnvForOpts` on the base env set).
pub fn build_env(lib_minor: u32, decls: Decls) -> Result<Env, EnvError> {
    let mut b = EnvBuilder::standard(EnvOptions::kubernetes());
    libraries::add_libraries(&mut b, LibrarySelection { minor: lib_minor })?;
    admission::add_request_and_namespace(&mut b)?;
    b.add_variable(admission::OBJECT_VAR, Type::dyn_type())?;
    b.add_variable(admission::OLD_OBJECT_VAR, Type::dyn_type())?;
    if decls.has_params {
        b.add_variable(admission::PARAMS_VAR, Type::dyn_type())?;
    }
    if decls.has_authorizer {
        b.add_variable(
            admission::AUTHORIZER_VAR,
            Type::object(admission::AUTHORIZER_TYPE),
        )?;
        b.add_variable(
            REQUEST_RESOURCE_AUTHORIZER_VAR,
            Type::object(RESOURCE_CHECK_TYPE),
        )?;
    }
    if decls.has_patch_types {
        b.add_provider(Arc::new(PatchTypes));
        b.add_function(FunctionDecl::new(
            JSONPATCH_ESCAPE_KEY,
            vec![OverloadDecl::global(
                "string_jsonpatch_escapeKey_string",
                vec![Type::string()],
                Type::string(),
            )],
        ))?;
    }
    Ok(b.build())
}

/// The apply-configuration object type (k8s.io/apiserver/pkg/cel/mutation/typeresolver.go
/// `ObjectTypeName`): `Object`, and `Object.spec`, `Object.spec.containers.item`, ... for
/// nested values.
pub const OBJECT_TYPE: &str = "Object";
/// The JSON patch operation type (typeresolver.go `JSONPatchTypeName`).
pub const JSONPATCH_TYPE: &str = "JSONPatch";
/// k8s.io/apiserver/pkg/cel/library/jsonpatch.go: `jsonpatch.escapeKey(string) -> string`.
pub const JSONPATCH_ESCAPE_KEY: &str = "jsonpatch.escapeKey";

/// The types of `DynamicTypeResolver` (mutation/typeresolver.go), as the API server's
/// compile sees them:
/// * `Object` and every name starting `Object.`: object types whose every field is `dyn`
///   (mutation/dynamic/objects.go `ObjectType.Field`: all field names are allowed);
/// * `JSONPatch` (mutation/jsonpatch.go `JSONPatchType.Field`): `op`, `path` and `from` are
///   strings, `value` is `dyn`.
#[derive(Debug, Clone, Copy)]
pub struct PatchTypes;

impl TypeProvider for PatchTypes {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        let known = name == JSONPATCH_TYPE
            || name == OBJECT_TYPE
            || name
                .strip_prefix(OBJECT_TYPE)
                .is_some_and(|rest| rest.starts_with('.'));
        known.then(|| Type::object(name))
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        if struct_name == JSONPATCH_TYPE {
            // Any other name is a field too, whose type is a nil `*types.Type`: cel-go's
            // checker prints it as '' and assigns nothing of a known type to it (measured on
            // kube-apiserver 1.37.1: "expected type of field 'foo' is '' but provided type is
            // 'int'"). An object type without a name behaves so here.
            return Some(match field {
                "op" | "path" | "from" => Type::string(),
                "value" => Type::dyn_type(),
                _ => Type::object(""),
            });
        }
        self.find_struct_type(struct_name).map(|_| Type::dyn_type())
    }
}

/// The composited compiler's state (composition.go `compositionState`): the `variables`
/// fields compiled so far, shared by every environment the policy's expressions use.
#[derive(Clone, Debug, Default)]
pub struct Composition {
    variables: VariablesType,
}

impl Composition {
    /// No variables yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `CompileAndStoreVariable`'s `AddField`: the compiled type, or `dyn` when the
    /// variable failed to compile.
    pub fn add_field(&mut self, name: &str, output: Option<&Type>) {
        self.variables.add(name, output);
    }
}

/// Compiles `expression` as `CompileCELExpression` does (cel-go `Env.Compile` with the
/// library validators), in the environment for `lib_minor` and `decls`, with `variables`
/// declared when `composition` is given; the parse comes from `parses`. Returns the checked
/// types (the caller reads the output type).
pub fn compile(
    lib_minor: u32,
    decls: Decls,
    composition: Option<&Composition>,
    expression: &str,
    parses: &Parses,
) -> Result<Result<CheckedTypes, Issues>, EnvError> {
    // The environment is built before the expression is parsed, as `env.Compile` needs it:
    // an environment error wins over a parse error.
    let base = env(lib_minor, decls)?;
    let composited;
    let env: &Env = match composition {
        None => &base,
        Some(c) => {
            composited = Env::extend(&base)
                .variable(
                    admission::VARIABLES_VAR,
                    Type::object(admission::VARIABLES_TYPE),
                )?
                .provider(Arc::new(c.variables.clone()))
                .build();
            &composited
        }
    };
    Ok(parses
        .parse(expression)
        .and_then(|parsed| super::check(env, &parsed)))
}

/// The parses of the expression texts of one policy, shared by the passes over it.
///
/// The controller type-checks a policy and then works out what kube-apiserver answers to its
/// create ([`crate::apiserver::validate_policy_create`]); both parse the same texts with
/// [`crate::cel::parse`], and parsing is the largest part of either pass (docs/controller.md,
/// "CPU at cold start"). That parse does not depend on the environment (macros are applied
/// when an environment checks it, [`crate::cel::macro_expansion_errors`]): it is a pure
/// function of the text, so sharing it changes no result.
#[derive(Default)]
pub struct Parses {
    by_text: Mutex<HashMap<Box<str>, Parse>>,
}

/// One text's parse, or its issues.
type Parse = Result<Arc<ParsedExpr>, Issues>;

impl Parses {
    /// No parses yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The parse of `text`: the kept one, or a new one (kept).
    pub fn parse(&self, text: &str) -> Result<Arc<ParsedExpr>, Issues> {
        if let Some(kept) = lock_parses(&self.by_text).get(text) {
            return kept.clone();
        }
        // Parsed without the lock held: a parse can take milliseconds.
        let parsed = crate::cel::parse(text).map(Arc::new);
        lock_parses(&self.by_text).insert(text.into(), parsed.clone());
        parsed
    }

    /// Keeps `parsed` as the parse of `text` (made by the caller with [`crate::cel::parse`]).
    pub fn keep(&self, text: &str, parsed: Arc<ParsedExpr>) {
        lock_parses(&self.by_text).insert(text.into(), Ok(parsed));
    }

    /// How many texts are kept.
    pub fn len(&self) -> usize {
        lock_parses(&self.by_text).len()
    }

    /// Whether no text is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Parses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Parses({} texts)", self.len())
    }
}

/// Locks the parse map; a panic elsewhere while it was held leaves only complete entries.
fn lock_parses<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// cel-go `Type.String()` of a deduced type (what `must evaluate to bool but got %v`
/// prints): `null_type`, `google.protobuf.Timestamp`, `list(int)`, `map(string, dyn)`.
pub fn go_type_string(t: &Type) -> String {
    use crate::cel::TypeKind as K;
    let params = |ps: &[&Type]| {
        ps.iter()
            .map(|p| go_type_string(p))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match t.type_kind() {
        K::Dyn => "dyn".into(),
        K::Any => "google.protobuf.Any".into(),
        K::Bool => "bool".into(),
        K::Bytes => "bytes".into(),
        K::Double => "double".into(),
        K::Duration => "google.protobuf.Duration".into(),
        K::Error => "error".into(),
        K::Int => "int".into(),
        K::List(e) => format!("list({})", params(&[e])),
        K::Map(k, v) => format!("map({})", params(&[k, v])),
        K::Null => "null_type".into(),
        K::Opaque(name, ps) if ps.is_empty() => name.to_string(),
        K::Opaque(name, ps) => {
            let refs: Vec<&Type> = ps.iter().collect();
            format!("{name}({})", params(&refs))
        }
        K::String => "string".into(),
        K::Struct(name) => name.to_string(),
        K::Timestamp => "google.protobuf.Timestamp".into(),
        K::Type(None) => "type".into(),
        K::Type(Some(p)) => format!("type({})", params(&[p])),
        K::TypeParam(name) => format!("<{name}>"),
        K::Uint => "uint".into(),
        K::Wrapper(p) => format!("wrapper({})", params(&[p])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lib: u32, decls: Decls, e: &str) -> Result<String, String> {
        match compile(lib, decls, None, e, &Parses::new()).expect("env builds") {
            Ok(c) => Ok(go_type_string(c.result_type())),
            Err(i) => Err(i.to_display_string()),
        }
    }

    const FULL: Decls = Decls {
        has_params: true,
        has_authorizer: true,
        has_patch_types: false,
    };
    const BARE: Decls = Decls {
        has_params: false,
        has_authorizer: false,
        has_patch_types: false,
    };
    const PATCH: Decls = Decls {
        has_params: false,
        has_authorizer: true,
        has_patch_types: true,
    };

    #[test]
    fn dyn_object_and_optional_declarations() {
        assert_eq!(check(36, FULL, "object.spec.replicas").unwrap(), "dyn");
        assert_eq!(check(36, FULL, "object.x > 1").unwrap(), "bool");
        assert!(check(36, FULL, "params.max").is_ok());
        assert!(
            check(36, BARE, "params.max")
                .unwrap_err()
                .contains("undeclared reference to 'params'")
        );
        assert!(check(36, BARE, "authorizer.group('')").is_err());
        assert_eq!(
            check(
                36,
                FULL,
                "authorizer.requestResource.check('get').allowed()"
            )
            .unwrap(),
            "bool"
        );
        assert!(
            check(36, FULL, "request.uid == ''")
                .unwrap_err()
                .contains("undefined field 'uid'")
        );
        assert_eq!(check(36, FULL, "null").unwrap(), "null_type");
        assert_eq!(check(36, FULL, "[1]").unwrap(), "list(int)");
    }

    #[test]
    fn new_expressions_lag_one_minor() {
        assert_eq!(library_minor(37, EnvKind::New), 36);
        assert_eq!(library_minor(37, EnvKind::Stored), 37);
        assert!(check(37, FULL, "[1, 2].includes(1)").is_ok());
        assert!(check(36, FULL, "[1, 2].includes(1)").is_err());
    }

    #[test]
    fn patch_types_only_when_declared() {
        assert_eq!(check(36, PATCH, "Object{}").unwrap(), "Object");
        assert_eq!(
            check(36, PATCH, "Object{spec: Object.spec{replicas: 3}}").unwrap(),
            "Object"
        );
        assert_eq!(
            check(36, PATCH, "Object.spec.template{}").unwrap(),
            "Object.spec.template"
        );
        assert_eq!(
            check(
                36,
                PATCH,
                "[JSONPatch{op: 'add', path: '/a/' + jsonpatch.escapeKey('b/c'), value: 1}]"
            )
            .unwrap(),
            "list(JSONPatch)"
        );
        let e = check(36, PATCH, "[JSONPatch{op: 1}]").unwrap_err();
        assert!(e.contains("expected type of field 'op' is 'string'"), "{e}");
        let e = check(36, PATCH, "[JSONPatch{op: 'add', path: '/a', foo: 1}]").unwrap_err();
        assert!(
            e.contains("expected type of field 'foo' is '' but provided type is 'int'"),
            "{e}"
        );
        assert!(check(36, FULL, "Object{}").is_err());
        assert!(check(36, FULL, "jsonpatch.escapeKey('a')").is_err());
        assert!(check(36, PATCH, "Objects{}").is_err());
    }

    #[test]
    fn composition_declares_variables() {
        let mut c = Composition::new();
        c.add_field("a", Some(&Type::int()));
        let r = compile(36, FULL, Some(&c), "variables.a > 'x'", &Parses::new()).unwrap();
        assert!(r.is_err());
        let r = compile(36, FULL, None, "variables.a > 1", &Parses::new()).unwrap();
        assert!(
            r.unwrap_err()
                .to_display_string()
                .contains("undeclared reference to 'variables'")
        );
    }
}
