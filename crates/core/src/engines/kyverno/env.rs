//! Kyverno's CEL environment for ValidatingPolicies, as
//! `pkg/cel/policies/vpol/compiler/compiler.go` `(*compilerImpl).createBaseVpolEnv` builds it
//! (Kyverno v1.19.1) and `compileForKubernetes` reads it (`environment.StoredExpressions`):
//!
//! - the Kubernetes base environment of the k8s.io/apiserver Kyverno is built with (v0.36.3:
//!   `environment.MustBaseEnvSet` in StoredExpressions mode declares every library that
//!   release knows, whatever the compatibility version; [`crate::k8s_env`] at 1.36 in upstream
//!   mode);
//! - `pkg/cel/compiler/env.go` `DefaultEnvOptionsWithCompat`: cel-go's encoders, math, protos
//!   and regex extensions beside the libraries Kubernetes declares too, and the `orValue`
//!   compatibility macro (`OrValueCompatEnvOptions`: every `x.orValue(y)` becomes
//!   `__orValueCompat__(x, y)`, of type `dyn`);
//! - `namespaceObject`, `object` and `oldObject` (`dyn`), `request` (Kubernetes'
//!   `AdmissionRequest` with `object` and `oldObject` fields of type `dyn`:
//!   `pkg/cel/compiler/request.go` `BuildRequestType`), `variables`, and `exceptions`
//!   (`libs.Exception`: `pkg/cel/libs/variables.go`); no `authorizer` and no `params`;
//! - Kyverno's libraries from github.com/kyverno/sdk `extensions/cel/libs/*/lib.go`
//!   (`globalcontext`, `resource`, `image`, `imagedata`, `user`, `hash`, `math`, `json`,
//!   `yaml`, `random`, `x509`, `time`, `transform`, `gzip`, `http`), whose declarations are
//!   the table of [`super::decls`]. `resource` declares other overloads in a namespaced policy
//!   (`namespacedEnv`: no namespace argument), so there are two environments.

use std::sync::{Arc, OnceLock};

use cel::common::ast::IdedExpr;

use crate::cel::{
    CallMacro, Env, EnvBuilder, EnvError, EnvOptions, MacroChecker, Synth, Type, TypeProvider,
};
use crate::k8s_env::{
    KindDecls, KubeVersion, Mode, Params, PolicyEnv, Target, admission, libraries,
};

use super::decls::{self, Variant};

/// The Kubernetes libraries Kyverno v1.19.1 is built with: k8s.io/apiserver v0.36.3.
pub const KUBERNETES_MINOR: u32 = 36;

/// The target of Kyverno's environment: the Kubernetes 1.36 libraries, as upstream declares
/// them (not the target cluster's: Kyverno compiles with its own).
pub fn target() -> Result<Target, EnvError> {
    let version = KubeVersion::new(KUBERNETES_MINOR).map_err(|e| EnvError(e.to_string()))?;
    Ok(Target {
        version,
        mode: Mode::Upstream,
    })
}

static ENVS: [OnceLock<Result<Arc<Env>, EnvError>>; 2] = [const { OnceLock::new() }; 2];

/// Kyverno's base environment (cluster-wide or namespaced policy), built once and cached.
pub fn base_env(namespaced: bool) -> Result<Arc<Env>, EnvError> {
    ENVS[usize::from(namespaced)]
        .get_or_init(|| build_base_env(namespaced).map(Arc::new))
        .clone()
}

/// The environment the verdict compiles in: [`base_env`] with `object` and `oldObject` `dyn`
/// and no `params`.
pub fn verdict_env(namespaced: bool) -> Result<PolicyEnv, EnvError> {
    PolicyEnv::with_base(
        target()?,
        &base_env(namespaced)?,
        KindDecls::untyped(Params::Absent),
    )
}

/// The environment a MutatingPolicy's verdict compiles in
/// (`pkg/cel/policies/mpol/compiler/compiler.go` `(*compilerImpl).newExtendedEnv`): Kyverno's
/// environment as for a ValidatingPolicy, plus the mutation types for every expression (not
/// only the mutations, as in Kubernetes): `cel.Types(applyConfigObjectType)`,
/// `cel.Types(jsonPatchType)`, `mutation.DynamicTypeResolver` and `library.JSONPatch`
/// (`jsonpatch.escapeKey`).
pub fn mutating_verdict_env(namespaced: bool) -> Result<PolicyEnv, EnvError> {
    let mut decls = KindDecls::untyped(Params::Absent);
    decls.patch_types = true;
    PolicyEnv::with_base(target()?, &base_env(namespaced)?, decls)
}

/// The checker backend of vapcheck's typed check in Kyverno's environment.
pub fn checker(namespaced: bool) -> Result<crate::engine::KubeChecker, EnvError> {
    Ok(crate::engine::KubeChecker::with_base(
        target()?,
        base_env(namespaced)?,
    ))
}

/// Builds (without caching) [`base_env`].
pub fn build_base_env(namespaced: bool) -> Result<Env, EnvError> {
    build_env(namespaced, Flavor::Validating)
}

/// Which of Kyverno's compilers an environment is built as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// `createBaseVpolEnv` (and `newExtendedEnv`'s base): Kubernetes' base environment set
    /// extended.
    Validating,
    /// `pkg/cel/policies/dpol/compiler/compiler.go` `(*compilerImpl).createBaseDpolEnv`.
    Deleting,
    /// `pkg/cel/policies/gpol/compiler/compiler.go` `(*compilerImpl).createBaseGpolEnv`.
    Generating,
}

static GENERATING_ENVS: [OnceLock<Result<Arc<Env>, EnvError>>; 2] = [const { OnceLock::new() }; 2];

/// The base environment of a GeneratingPolicy (`createBaseGpolEnv`, cluster-wide or
/// namespaced policy), built once and cached: as [`deleting_base_env`] (`cel.NewEnv`, not
/// Kubernetes' base environment set; no `user` library) but
///
/// - `DynamicResourceEnvOptionsWithCompat`: no `HomogeneousAggregateLiterals`, so a list or
///   map literal may mix value types;
/// - `exceptions` is `libs.Exception` with its fields (`ext.NativeTypes`), as for a
///   ValidatingPolicy; no `mutation.DynamicTypeResolver`;
/// - the generator library (github.com/kyverno/sdk `extensions/cel/libs/generator/lib.go`):
///   `generator` and its `Apply`/`apply` ([`GENERATOR_OVERLOADS`]).
pub fn generating_base_env(namespaced: bool) -> Result<Arc<Env>, EnvError> {
    GENERATING_ENVS[usize::from(namespaced)]
        .get_or_init(|| build_env(namespaced, Flavor::Generating).map(Arc::new))
        .clone()
}

/// The environment a GeneratingPolicy's verdict compiles in: [`generating_base_env`] with
/// `object` and `oldObject` `dyn` and no `params`.
pub fn generating_verdict_env(namespaced: bool) -> Result<PolicyEnv, EnvError> {
    PolicyEnv::with_base(
        target()?,
        &generating_base_env(namespaced)?,
        KindDecls::untyped(Params::Absent),
    )
}

/// The checker backend of vapcheck's typed check of a GeneratingPolicy.
pub fn generating_checker(namespaced: bool) -> Result<crate::engine::KubeChecker, EnvError> {
    Ok(crate::engine::KubeChecker::with_base(
        target()?,
        generating_base_env(namespaced)?,
    ))
}

/// The generator library's variable (`cel.Variable("generator", ContextType)`,
/// `ContextType = types.NewOpaqueType("generator.Context")`).
pub const GENERATOR_VARIABLE: (&str, &str) = ("generator", "opaque:generator.Context");

/// The generator library's overloads (`clusterEnv`: a namespace and the resources;
/// `namespacedEnv`: the resources only, generated in the policy's namespace), `apply` beside
/// `Apply` from library version 1.18.
pub const GENERATOR_OVERLOADS: &[decls::OverloadRow] = &[
    decls::OverloadRow {
        variant: Variant::Cluster,
        function: "Apply",
        id: "generator_apply_string_list_pascal",
        member: true,
        args: &[
            "opaque:generator.Context",
            "string",
            "list(map(string, any))",
        ],
        result: "bool",
    },
    decls::OverloadRow {
        variant: Variant::Cluster,
        function: "apply",
        id: "generator_apply_string_list_camel",
        member: true,
        args: &[
            "opaque:generator.Context",
            "string",
            "list(map(string, any))",
        ],
        result: "bool",
    },
    decls::OverloadRow {
        variant: Variant::Namespaced,
        function: "Apply",
        id: "generator_apply_list_pascal",
        member: true,
        args: &["opaque:generator.Context", "list(map(string, any))"],
        result: "bool",
    },
    decls::OverloadRow {
        variant: Variant::Namespaced,
        function: "apply",
        id: "generator_apply_list_camel",
        member: true,
        args: &["opaque:generator.Context", "list(map(string, any))"],
        result: "bool",
    },
];

static DELETING_ENVS: [OnceLock<Result<Arc<Env>, EnvError>>; 2] = [const { OnceLock::new() }; 2];

/// The base environment of a DeletingPolicy (`createBaseDpolEnv`, cluster-wide or namespaced
/// policy), built once and cached. Unlike [`base_env`] it does not extend Kubernetes' base
/// environment set: `cel.NewEnv()` extended with `DefaultEnvOptionsWithCompat` only, so
///
/// - the Kubernetes libraries are the ones `defaultEnvOptionsWithHomogeneousAggregateEnforcement`
///   lists: no `authz` and `authzSelectors` libraries, no two-variable comprehensions
///   (`ext.TwoVarComprehensions`), and none of base.go's AST validators (a bad `duration`,
///   `timestamp` or regular expression literal is not refused at compile);
/// - Kyverno's libraries are those of [`base_env`] but `user` (not in `libEnvOpts`), at
///   `compiler.KyvernoVersion` (1.18, what `Latest()` is for each of them);
/// - `exceptions` is of type `compiler.Exception`, an object type no provider knows (no
///   `ext.NativeTypes`), `resource` is declared as the resource library declares it;
/// - `mutation.DynamicTypeResolver` resolves `Object`, `Object.<field>...` and `JSONPatch`
///   (`common.ResolverEnvOption`), without `jsonpatch.escapeKey`.
pub fn deleting_base_env(namespaced: bool) -> Result<Arc<Env>, EnvError> {
    DELETING_ENVS[usize::from(namespaced)]
        .get_or_init(|| build_env(namespaced, Flavor::Deleting).map(Arc::new))
        .clone()
}

/// The environment a DeletingPolicy's verdict compiles in: [`deleting_base_env`] with
/// `object` and `oldObject` `dyn` and no `params`.
pub fn deleting_verdict_env(namespaced: bool) -> Result<PolicyEnv, EnvError> {
    PolicyEnv::with_base(
        target()?,
        &deleting_base_env(namespaced)?,
        KindDecls::untyped(Params::Absent),
    )
}

/// The checker backend of vapcheck's typed check of a DeletingPolicy.
pub fn deleting_checker(namespaced: bool) -> Result<crate::engine::KubeChecker, EnvError> {
    Ok(crate::engine::KubeChecker::with_base(
        target()?,
        deleting_base_env(namespaced)?,
    ))
}

/// Whether the rows of the table for a function or an object type's fields are left out of
/// the flavor's environment: the `user` library's (its functions and `user.ServiceAccount`'s
/// fields) in the DeletingPolicy and GeneratingPolicy environments, and `libs.Exception`'s
/// fields in the DeletingPolicy one.
fn leaves_out(flavor: Flavor, function_or_object: &str) -> bool {
    match flavor {
        Flavor::Validating => false,
        Flavor::Deleting => {
            USER_LIBRARY.contains(&function_or_object) || function_or_object == "libs.Exception"
        }
        Flavor::Generating => USER_LIBRARY.contains(&function_or_object),
    }
}

/// The functions and object type of the `user` library (github.com/kyverno/sdk
/// `extensions/cel/libs/user/lib.go`), which only the ValidatingPolicy and MutatingPolicy
/// environments have.
pub const USER_LIBRARY: &[&str] = &[
    "parseServiceAccount",
    "user.parseServiceAccount",
    "user.ServiceAccount",
];

/// The type of `exceptions` in a DeletingPolicy's environment.
pub const DELETING_EXCEPTION_TYPE: &str = "compiler.Exception";

fn build_env(namespaced: bool, flavor: Flavor) -> Result<Env, EnvError> {
    let version = target()?.version;
    let deleting = flavor == Flavor::Deleting;
    // Both build on `cel.NewEnv()`, not on Kubernetes' base environment set.
    let own = flavor != Flavor::Validating;
    let options = if own {
        EnvOptions {
            validate_duration_literals: false,
            validate_timestamp_literals: false,
            validate_regex_literals: false,
            homogeneous_aggregate_literals: flavor != Flavor::Generating,
            ..EnvOptions::kubernetes()
        }
    } else {
        EnvOptions::kubernetes()
    };
    let mut b = EnvBuilder::standard(options);
    let selection = libraries::LibrarySelection {
        minor: version.minor(),
    };
    for lib in selection.ordered() {
        use crate::k8s_env::decls::Library;
        if own
            && matches!(
                lib,
                Library::Authz | Library::AuthzSelectors | Library::TwoVarComprehensions
            )
        {
            continue;
        }
        libraries::add_library(&mut b, lib, version.minor())?;
    }
    let variant = if namespaced {
        Variant::Namespaced
    } else {
        Variant::Cluster
    };
    // admission::add_request_and_namespace, with Kyverno's request type and object types.
    b.add_provider(Arc::new(KyvernoTypes::new(variant, flavor)?));
    b.add_variable(
        admission::NAMESPACE_VAR,
        Type::object(admission::NAMESPACE_TYPE),
    )?;
    b.add_variable(
        admission::REQUEST_VAR,
        Type::object(admission::REQUEST_TYPE),
    )?;
    for v in decls::VARIABLES.iter().filter(|v| v.variant.holds(variant)) {
        let ty = if deleting && v.name == "exceptions" {
            Type::object(DELETING_EXCEPTION_TYPE)
        } else {
            table_type(v.ty)?
        };
        b.add_variable(v.name, ty)?;
    }
    if deleting {
        b.add_provider(Arc::new(crate::k8s_env::mutation::PatchTypes));
    }
    let generating = flavor == Flavor::Generating;
    if generating {
        b.add_variable(GENERATOR_VARIABLE.0, table_type(GENERATOR_VARIABLE.1)?)?;
    }
    libraries::add_grouped(
        &mut b,
        decls::OVERLOADS
            .iter()
            .filter(|r| r.variant.holds(variant))
            .filter(|r| !(own && leaves_out(flavor, r.function)))
            .chain(
                GENERATOR_OVERLOADS
                    .iter()
                    .filter(|r| generating && r.variant.holds(variant)),
            )
            .map(|row| {
                let decl =
                    libraries::decl_of(row.id, row.member, row.args, row.result, table_type)?;
                Ok((row.function, decl))
            }),
    )?;
    b.add_call_macro(Arc::new(OrValueCompat));
    Ok(b.build())
}

/// A type of the table: cel-go's syntax, `opaque:` before an opaque type's name, `any` for
/// `google.protobuf.Any`.
pub fn table_type(text: &str) -> Result<Type, EnvError> {
    let text = text.trim();
    let bad = || EnvError(format!("bad type in Kyverno's table: {text}"));
    let (name, args) = match text.find('(') {
        Some(open) if text.ends_with(')') => {
            let inner = &text[open + 1..text.len() - 1];
            let mut parts = Vec::new();
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in inner.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.checked_sub(1).ok_or_else(bad)?,
                    ',' if depth == 0 => {
                        parts.push(table_type(&inner[start..i])?);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(table_type(&inner[start..])?);
            (&text[..open], parts)
        }
        Some(_) => return Err(bad()),
        None => (text, Vec::new()),
    };
    if let Some(opaque) = name.strip_prefix("opaque:") {
        return Ok(Type::opaque(opaque.to_owned(), args));
    }
    match (name, args.as_slice()) {
        ("any", []) => Ok(Type::any()),
        ("list", [e]) => Ok(Type::list(e.clone())),
        ("map", [k, v]) => Ok(Type::map(k.clone(), v.clone())),
        ("optional_type", [t]) => Ok(Type::optional(t.clone())),
        ("type", [t]) => Ok(Type::type_of(t.clone())),
        (_, []) => Type::parse(name).map_err(|e| EnvError(format!("{}: {e}", bad().0))),
        _ => Err(bad()),
    }
}

/// The object types Kyverno adds: `request`'s `object` and `oldObject` fields
/// (`BuildRequestType`) and the libraries' native types of [`decls::FIELDS`]
/// (`libs.Exception`, `user.ServiceAccount`), over Kubernetes' `request` and `namespaceObject`
/// types.
struct KyvernoTypes {
    kubernetes: crate::cel::StructTypes,
    /// Object type, field, type.
    fields: Vec<(&'static str, &'static str, Type)>,
}

impl KyvernoTypes {
    /// Without the fields the flavor leaves out ([`leaves_out`]).
    fn new(variant: Variant, flavor: Flavor) -> Result<Self, EnvError> {
        let fields = decls::FIELDS
            .iter()
            .filter(|f| f.variant.holds(variant))
            .filter(|f| !leaves_out(flavor, f.object))
            .map(|f| Ok((f.object, f.field, table_type(f.ty)?)))
            .collect::<Result<Vec<_>, EnvError>>()?;
        Ok(Self {
            kubernetes: admission::request_and_namespace_types(),
            fields,
        })
    }
}

impl TypeProvider for KyvernoTypes {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        if self.fields.iter().any(|(o, _, _)| *o == name) {
            return Some(Type::object(name.to_owned()));
        }
        self.kubernetes.find_struct_type(name)
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        if struct_name == admission::REQUEST_TYPE && matches!(field, "object" | "oldObject") {
            return Some(Type::dyn_type());
        }
        if self.fields.iter().any(|(o, _, _)| *o == struct_name) {
            return self
                .fields
                .iter()
                .find(|(o, f, _)| *o == struct_name && *f == field)
                .map(|(_, _, t)| t.clone());
        }
        self.kubernetes.find_struct_field_type(struct_name, field)
    }
}

/// `pkg/cel/compiler/env.go` `orValueCompatMacro`: `x.orValue(y)` is
/// `__orValueCompat__(x, y)` (`dyn`, whatever `x` is).
struct OrValueCompat;

/// The function the macro calls.
pub const OR_VALUE_COMPAT: &str = "__orValueCompat__";

impl CallMacro for OrValueCompat {
    fn name(&self) -> &str {
        "orValue"
    }

    fn matches(&self, receiver: bool, arg_count: usize) -> bool {
        receiver && arg_count == 1
    }

    fn expansion_error(
        &self,
        _target: Option<&IdedExpr>,
        _args: &[IdedExpr],
    ) -> Option<(u64, String)> {
        None
    }

    fn expansion<'e>(
        &self,
        target: Option<&'e IdedExpr>,
        args: &'e [IdedExpr],
    ) -> Option<Synth<'e>> {
        let (Some(target), [arg]) = (target, args) else {
            return None;
        };
        Some(Synth::Call(
            OR_VALUE_COMPAT,
            vec![Synth::Real(target), Synth::Real(arg)],
        ))
    }

    fn check(
        &self,
        ctx: &mut dyn MacroChecker,
        call_id: u64,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Type {
        let (Some(target), [arg]) = (target, args) else {
            return Type::error();
        };
        ctx.check_synth(
            call_id,
            &Synth::Call(OR_VALUE_COMPAT, vec![Synth::Real(target), Synth::Real(arg)]),
        )
    }
}
