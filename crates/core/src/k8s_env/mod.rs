//! The Kubernetes CEL environment: extension libraries, Kubernetes libraries and the
//! admission variables of ValidatingAdmissionPolicy expressions, as Kubernetes 1.37.1's
//! type checker (kube-controller-manager's ValidatingAdmissionPolicy status controller)
//! declares them.
//!
//! * [`base_env`] — the libraries for one [`Target`] (Kubernetes minor version and
//!   [`Mode`]) plus `request`, `namespaceObject` and `authorizer`; built once per target and
//!   cached.
//! * [`PolicyEnv`] — the per-kind overlay: `object`, `oldObject`, `params` (typed through a
//!   caller-supplied [`TypeProvider`]) and the `variables` composition.
//! * [`version_warnings`] — in [`Mode::Extended`], the functions and macros an expression
//!   uses that the target cluster version does not have yet.
//!
//! ```
//! use vapcheck_core::k8s_env::{KindDecls, KubeVersion, Mode, Params, PolicyEnv, Target};
//!
//! let target = Target::upstream();
//! let mut env = PolicyEnv::new(target, KindDecls::untyped(Params::Untyped)).unwrap();
//! env.add_variable("replicas", "object.spec.replicas");
//! assert!(env.compile("variables.replicas > 1 && params.max > 0").is_ok());
//! let err = env.compile("authorizer.allowed()").unwrap_err();
//! assert!(err.to_display_string().contains(
//!     "found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'"
//! ));
//! # let _ = (KubeVersion::PINNED, Mode::Upstream);
//! ```

pub mod admission;
pub mod apiserver;
pub mod cost;
pub mod decls;
pub mod format_validator;
pub mod libraries;
pub mod macros;
pub mod mutation;
pub mod narrowing;
pub mod plan;
pub mod presence;
pub mod release;
pub mod versions;
pub mod witnesses;

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::cel::{
    CheckedTypes, CompiledExpr, Env, EnvBuilder, EnvError, EnvOptions, Issues, ParsedExpr, Type,
    TypeProvider,
};

pub use admission::{KeywordFieldNames, Params, VariablesType, variable_field_type};
pub use release::KubernetesVersion;
pub use versions::{VersionWarning, version_warnings, version_warnings_of};

/// A Kubernetes minor version (`1.<minor>`) that the environment can be built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    minor: u32,
}

impl KubeVersion {
    /// The oldest supported version, 1.30.
    pub const MIN: KubeVersion = KubeVersion { minor: 30 };
    /// The pinned release's minor version, 1.37 (see `vapcheck::KUBERNETES_VERSION`).
    pub const PINNED: KubeVersion = KubeVersion { minor: 37 };

    /// `1.<minor>`, if within [`KubeVersion::MIN`]..=[`KubeVersion::PINNED`].
    pub fn new(minor: u32) -> Result<Self, VersionError> {
        if (Self::MIN.minor..=Self::PINNED.minor).contains(&minor) {
            Ok(Self { minor })
        } else {
            Err(VersionError(format!(
                "Kubernetes 1.{minor} is not supported (supported: {}..{})",
                Self::MIN,
                Self::PINNED
            )))
        }
    }

    /// The minor version number.
    pub fn minor(&self) -> u32 {
        self.minor
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

/// An unsupported or malformed Kubernetes version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionError(pub String);

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VersionError {}

/// Which environment to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Exactly what upstream's type checker of the target version declares (the
    /// StoredExpressions environment): libraries newer than the target are absent, so using
    /// them is an ordinary `undeclared reference` / `found no matching overload` error.
    Upstream,
    /// Every library of the pinned release is declared, so expressions type-check as far as
    /// possible; [`version_warnings`] then reports what the target version lacks.
    Extended,
}

impl std::str::FromStr for Mode {
    type Err = VersionError;

    /// `upstream` or `extended`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "upstream" => Ok(Mode::Upstream),
            "extended" => Ok(Mode::Extended),
            other => Err(VersionError(format!(
                "unknown mode '{other}' (expected 'upstream' or 'extended')"
            ))),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Upstream => "upstream",
            Mode::Extended => "extended",
        })
    }
}

/// A Kubernetes version and a [`Mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// The Kubernetes version of the cluster the policies are meant for.
    pub version: KubeVersion,
    /// How the environment treats libraries newer than `version`.
    pub mode: Mode,
}

impl Target {
    /// Upstream mode at the pinned release (what KCM 1.37.1 checks with).
    pub fn upstream() -> Self {
        Self {
            version: KubeVersion::PINNED,
            mode: Mode::Upstream,
        }
    }

    /// The libraries' version: the target version in upstream mode, the pinned release in
    /// extended mode.
    pub fn library_version(&self) -> KubeVersion {
        match self.mode {
            Mode::Upstream => self.version,
            Mode::Extended => KubeVersion::PINNED,
        }
    }
}

const VERSIONS: usize = (KubeVersion::PINNED.minor - KubeVersion::MIN.minor + 1) as usize;

/// The cache: one slot per library version (an extended env equals the upstream env of the
/// pinned release, so both share a slot).
static BASE_ENVS: [OnceLock<Result<Arc<Env>, EnvError>>; VERSIONS] =
    [const { OnceLock::new() }; VERSIONS];

/// The environment shared by every policy of `target`: the CEL standard library, the
/// libraries enabled at the target's library version, and the policy-independent admission
/// variables `request` (`kubernetes.AdmissionRequest`), `namespaceObject`
/// (`kubernetes.Namespace`) and `authorizer` (`kubernetes.authorization.Authorizer`).
///
/// Built on first use and cached for the life of the process.
pub fn base_env(target: Target) -> Result<Arc<Env>, EnvError> {
    let version = target.library_version();
    let slot = (version.minor - KubeVersion::MIN.minor) as usize;
    let cell = BASE_ENVS
        .get(slot)
        .ok_or_else(|| EnvError(format!("unsupported version {version}")))?;
    cell.get_or_init(|| build_base_env(version).map(Arc::new))
        .clone()
}

/// Builds (without caching) the environment [`base_env`] returns for library version
/// `version`.
pub fn build_base_env(version: KubeVersion) -> Result<Env, EnvError> {
    let mut b = EnvBuilder::standard(EnvOptions::kubernetes());
    libraries::add_libraries(
        &mut b,
        libraries::LibrarySelection {
            minor: version.minor,
        },
    )?;
    admission::add_request_and_namespace(&mut b)?;
    b.add_variable(
        admission::AUTHORIZER_VAR,
        Type::object(admission::AUTHORIZER_TYPE),
    )?;
    Ok(b.build())
}

/// cel-go `Env.Compile` for an environment built with this module's libraries: parse,
/// macro expansion errors, check, then the AST validators — the built-in ones of
/// [`crate::cel::validators`] followed by the library validators (the strings extension's
/// format validator when the environment declares that library), all of which report before
/// the result is returned, as in cel-go.
///
/// Use this instead of [`crate::cel::compile`] on environments that contain the strings
/// extension.
pub fn compile(env: &Env, text: &str) -> Result<CompiledExpr, Issues> {
    let parsed = crate::cel::parse(text)?;
    let types = check(env, &parsed)?;
    Ok(CompiledExpr { parsed, types })
}

/// [`compile`] after parsing: for an expression parsed once (`crate::cel::parse`) and checked
/// in several environments (one per matched kind). Reports the macro expansion errors of
/// `env`'s call-shaped macros, then checks and validates.
pub fn check(env: &Env, parsed: &ParsedExpr) -> Result<CheckedTypes, Issues> {
    if let Some(issues) = crate::cel::macro_expansion_errors(env, parsed) {
        return Err(issues);
    }
    let (types, mut issues) = crate::cel::checker::check(env, parsed);
    if !issues.is_empty() {
        return Err(issues);
    }
    crate::cel::validators::validate(env.options(), parsed, &types, &mut issues);
    if format_validator::enabled(env) {
        format_validator::StringFormatValidator.validate(parsed, &types, &mut issues);
    }
    if issues.is_empty() {
        Ok(types)
    } else {
        Err(issues)
    }
}

/// What varies per matched kind: the types of `object`/`oldObject` and `params`.
#[derive(Clone)]
pub struct KindDecls {
    /// The root type of the matched kind (`None`: `object` and `oldObject` are `dyn`, as
    /// upstream does when the schema has no type).
    pub object: Option<Type>,
    /// How `params` is declared.
    pub params: Params,
    /// Knows the object types mentioned by `object` and `params` (e.g. the schema module's
    /// converted OpenAPI types). Wrapped in [`KeywordFieldNames`] when the target version
    /// has the reserved-word field fallback (1.31 and later).
    pub types: Option<Arc<dyn TypeProvider>>,
    /// The mutations of a MutatingAdmissionPolicy: `Object`, `JSONPatch` and
    /// `jsonpatch.escapeKey` are declared ([`mutation::add_patch_types`]).
    pub patch_types: bool,
}

impl KindDecls {
    /// `object`/`oldObject` as `dyn`, no type provider.
    pub fn untyped(params: Params) -> Self {
        Self {
            object: None,
            params,
            types: None,
            patch_types: false,
        }
    }
}

impl fmt::Debug for KindDecls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KindDecls")
            .field("object", &self.object)
            .field("params", &self.params)
            .field("types", &self.types.as_ref().map(|_| "<provider>"))
            .field("patch_types", &self.patch_types)
            .finish()
    }
}

/// The outcome of compiling one composited variable.
#[derive(Debug)]
pub struct VariableOutcome {
    /// The variable name.
    pub name: String,
    /// The deduced type, or the issues (upstream discards them and declares the variable as
    /// `dyn`).
    pub result: Result<Type, Issues>,
    /// The type the field of `variables` received.
    pub field_type: Type,
}

/// The environment of one policy for one matched kind: [`base_env`] plus `object`,
/// `oldObject`, `params` and `variables`.
pub struct PolicyEnv {
    target: Target,
    kind_env: Arc<Env>,
    variables: VariablesType,
    env: Env,
}

impl fmt::Debug for PolicyEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyEnv")
            .field("target", &self.target)
            .field("variables", &self.variables)
            .finish()
    }
}

impl PolicyEnv {
    /// The environment for one kind, with no composited variables yet (`variables` is
    /// declared, with no fields).
    pub fn new(target: Target, kind: KindDecls) -> Result<Self, EnvError> {
        Self::with_base(target, &base_env(target)?, kind)
    }

    /// As [`PolicyEnv::new`], on an explicitly given base (normally [`base_env`]).
    pub fn with_base(target: Target, base: &Arc<Env>, kind: KindDecls) -> Result<Self, EnvError> {
        let mut b = Env::extend(base);
        if let Some(p) = kind.types {
            if target.library_version().minor() >= 31 {
                b.add_provider(Arc::new(KeywordFieldNames::new(p)));
            } else {
                b.add_provider(p);
            }
        }
        if kind.patch_types {
            mutation::add_patch_types(&mut b)?;
        }
        let object = kind.object.unwrap_or_else(Type::dyn_type);
        b.add_variable(admission::OBJECT_VAR, object.clone())?;
        b.add_variable(admission::OLD_OBJECT_VAR, object)?;
        match kind.params {
            Params::Absent => {}
            Params::Untyped => {
                b.add_variable(admission::PARAMS_VAR, Type::dyn_type())?;
            }
            Params::Typed(t) => {
                b.add_variable(admission::PARAMS_VAR, t)?;
            }
        }
        b.add_variable(
            admission::VARIABLES_VAR,
            Type::object(admission::VARIABLES_TYPE),
        )?;
        let kind_env = Arc::new(b.build());
        let variables = VariablesType::new();
        let env = Self::variables_overlay(&kind_env, &variables);
        Ok(Self {
            target,
            kind_env,
            variables,
            env,
        })
    }

    fn variables_overlay(kind_env: &Arc<Env>, variables: &VariablesType) -> Env {
        Env::extend(kind_env)
            .provider(Arc::new(variables.clone()))
            .build()
    }

    /// Compiles one `spec.variables` entry in the current environment (which sees only the
    /// variables added before it) and adds its field to `variables`: the deduced type
    /// converted by [`variable_field_type`], or `dyn` if it failed to compile.
    pub fn add_variable(&mut self, name: &str, expression: &str) -> VariableOutcome {
        let result = self.compile(expression).map(|c| c.result_type().clone());
        self.variables.add(name, result.as_ref().ok());
        let field_type = self
            .variables
            .get(name)
            .cloned()
            .unwrap_or_else(Type::dyn_type);
        self.env = Self::variables_overlay(&self.kind_env, &self.variables);
        VariableOutcome {
            name: name.to_string(),
            result,
            field_type,
        }
    }

    /// Declares the field `name` of `variables` with an already deduced type (converted by
    /// [`variable_field_type`]; `None` declares it `dyn`), for callers that compile the
    /// variable's expression themselves.
    pub fn declare_variable(&mut self, name: &str, deduced: Option<&Type>) {
        self.variables.add(name, deduced);
        self.env = Self::variables_overlay(&self.kind_env, &self.variables);
    }

    /// [`PolicyEnv::add_variable`] for each `(name, expression)` in `spec.variables` order.
    pub fn add_variables<'a>(
        &mut self,
        variables: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<VariableOutcome> {
        variables
            .into_iter()
            .map(|(n, e)| self.add_variable(n, e))
            .collect()
    }

    /// The `cel` environment (with the variables added so far).
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The target this environment was built for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The `kubernetes.variables` type so far.
    pub fn variables(&self) -> &VariablesType {
        &self.variables
    }

    /// cel-go `Env.Compile` of `expression` in this environment (the text of the error is
    /// `Issues::to_display_string`, exactly upstream's `issues.String()`). See [`compile`].
    pub fn compile(&self, expression: &str) -> Result<CompiledExpr, Issues> {
        compile(&self.env, expression)
    }

    /// [`check`] of an already parsed expression in this environment.
    pub fn check(&self, parsed: &ParsedExpr) -> Result<CheckedTypes, Issues> {
        check(&self.env, parsed)
    }

    /// [`PolicyEnv::version_warnings`] for a parsed expression checked by [`PolicyEnv::check`].
    pub fn version_warnings_of(
        &self,
        parsed: &ParsedExpr,
        types: &CheckedTypes,
    ) -> Vec<VersionWarning> {
        match self.target.mode {
            Mode::Upstream => Vec::new(),
            Mode::Extended => version_warnings_of(&self.env, parsed, types, self.target.version),
        }
    }

    /// The [`version_warnings`] of an expression compiled in this environment (always empty
    /// in [`Mode::Upstream`]).
    pub fn version_warnings(&self, compiled: &CompiledExpr) -> Vec<VersionWarning> {
        match self.target.mode {
            Mode::Upstream => Vec::new(),
            Mode::Extended => version_warnings(&self.env, compiled, self.target.version),
        }
    }
}

#[cfg(test)]
mod tests;
