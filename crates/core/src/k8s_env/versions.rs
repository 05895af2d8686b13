//! Extended mode: which functions and macros of a checked expression the target Kubernetes
//! version does not have yet.
//!
//! The pass walks the checked AST. For every call it finds the overloads cel-go's checker
//! would have matched (same function — namespaced names such as `lists.range` resolved as
//! the checker does —, same receiver style and arity, argument types compatible with the
//! deduced ones, `dyn` and type parameters matching anything) and looks up when each was
//! introduced ([`super::decls`]; overloads not in the tables, i.e. the standard library,
//! always existed). A call is reported when every matching overload is newer than the
//! target. Call-shaped macros (two-variable comprehensions, `sortBy`) are reported by name.

use cel::common::ast::{Expr, IdedExpr};

use crate::cel::{
    CelError, CheckedTypes, CompiledExpr, Env, Location, ParsedExpr, Source, Type, TypeKind,
};

use super::KubeVersion;
use super::decls::{self, Library};

/// A function or macro used by an expression that the target version lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionWarning {
    /// The call node.
    pub expr_id: u64,
    /// Where the call is (the position cel-go would report an error on it).
    pub location: Option<Location>,
    /// The function or macro name as written (`includes`, `lists.range`, `transformList`).
    pub function: String,
    /// The Kubernetes version that introduced it.
    pub introduced: KubeVersion,
    /// The library that declares it (upstream library name, e.g. `kubernetes.lists`).
    pub library: &'static str,
    /// The target version.
    pub target: KubeVersion,
}

impl VersionWarning {
    /// The human-readable text, e.g. `function 'includes' (library kubernetes.lists) was
    /// introduced in Kubernetes 1.37; the target version is 1.33`.
    pub fn message(&self) -> String {
        format!(
            "{} '{}' (library {}) was introduced in Kubernetes {}; the target version is {}",
            if self.is_macro() { "macro" } else { "function" },
            self.function,
            self.library,
            self.introduced,
            self.target
        )
    }

    /// The warning in cel-go's error layout with `WARNING` instead of `ERROR`:
    /// `WARNING: <input>:1:5: <message>` followed by the snippet and caret lines.
    pub fn to_display_string(&self, source: &Source) -> String {
        let as_error = CelError {
            location: self.location,
            message: self.message(),
            expr_id: self.expr_id,
        };
        let text = as_error.to_display_string(source);
        match text.strip_prefix("ERROR:") {
            Some(rest) => format!("WARNING:{rest}"),
            None => text,
        }
    }

    fn is_macro(&self) -> bool {
        MACROS.iter().any(|m| m.name == self.function)
    }
}

/// A call-shaped macro and the library that adds it.
struct MacroRow {
    name: &'static str,
    arities: &'static [usize],
    library: Library,
}

/// Receiver-style macros added by versioned libraries (cel-go ext/comprehensions.go,
/// ext/lists.go). `arities` counts the arguments without the receiver.
const MACROS: &[MacroRow] = &[
    MacroRow {
        name: "all",
        arities: &[3],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "exists",
        arities: &[3],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "existsOne",
        arities: &[3],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "exists_one",
        arities: &[3],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "transformList",
        arities: &[3, 4],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "transformMap",
        arities: &[3, 4],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "transformMapEntry",
        arities: &[3, 4],
        library: Library::TwoVarComprehensions,
    },
    MacroRow {
        name: "sortBy",
        arities: &[2],
        library: Library::ExtLists,
    },
];

/// The minor version an overload id was introduced in, and its library (`None`: not in the
/// tables, i.e. part of the standard or optional library, always available).
fn overload_origin(id: &str) -> Option<(u32, Library)> {
    decls::all_rows()
        .find(|r| r.id == id)
        .map(|r| (r.since_minor, r.library))
}

/// cel-go `containers.ToQualifiedName`.
fn qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => Some(format!("{}.{}", qualified_name(&s.operand)?, s.field)),
        _ => None,
    }
}

/// Whether a value of type `actual` may match a parameter declared as `declared`, treating
/// `dyn`, `any`, errors and type parameters on either side as matching anything.
fn loosely_matches(declared: &Type, actual: &Type) -> bool {
    let open = |t: &Type| t.is_dyn_or_error() || matches!(t.type_kind(), TypeKind::TypeParam(_));
    if open(declared) || open(actual) {
        return true;
    }
    if declared.kind() != actual.kind()
        || declared.type_name() != actual.type_name()
        || declared.param_count() != actual.param_count()
    {
        // A nullable wrapper accepts null and its primitive.
        return declared.is_wrapper() && declared.is_assignable_from(actual);
    }
    (0..declared.param_count()).all(|i| match (declared.param(i), actual.param(i)) {
        (Some(d), Some(a)) => loosely_matches(d, a),
        _ => false,
    })
}

/// The functions and macros `compiled` uses that `target` does not have, in AST pre-order.
/// `env` must be the environment `compiled` was checked in.
pub fn version_warnings(
    env: &Env,
    compiled: &CompiledExpr,
    target: KubeVersion,
) -> Vec<VersionWarning> {
    version_warnings_of(env, &compiled.parsed, &compiled.types, target)
}

/// [`version_warnings`] for an expression parsed once and checked in `env`.
pub fn version_warnings_of(
    env: &Env,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
    target: KubeVersion,
) -> Vec<VersionWarning> {
    let mut out = Vec::new();
    let mut report = |e: &IdedExpr, function: String, since: u32, library: Library| {
        if since > target.minor() {
            out.push(VersionWarning {
                expr_id: e.id,
                location: parsed.location(e.id),
                function,
                introduced: KubeVersion::new(since).unwrap_or(KubeVersion::PINNED),
                library: decls::library_info(library).name,
                target,
            });
        }
    };
    crate::cel::parse::walk(parsed.expr(), |e| {
        let Expr::Call(call) = &e.expr else { return };
        // Call-shaped macros.
        if call.target.is_some()
            && let Some(m) = MACROS
                .iter()
                .find(|m| m.name == call.func_name && m.arities.contains(&call.args.len()))
            && env.find_call_macro(m.name).is_some()
        {
            let since = decls::library_info(m.library).since_minor;
            report(e, m.name.to_string(), since, m.library);
            return;
        }
        // Namespaced global functions written as member calls (`lists.range(3)`).
        let mut name = call.func_name.clone();
        let mut args: Vec<&IdedExpr> = Vec::new();
        let mut member = false;
        if let Some(t) = call.target.as_deref() {
            let qualified = qualified_name(t)
                .map(|q| format!("{q}.{}", call.func_name))
                .filter(|q| env.find_function(q).is_some());
            match qualified {
                Some(q) => name = q,
                None => {
                    member = true;
                    args.push(t);
                }
            }
        }
        args.extend(call.args.iter());
        let Some(function) = env.find_function(&name) else {
            return;
        };
        let actual: Vec<Type> = args
            .iter()
            .map(|a| types.type_of(a.id).cloned().unwrap_or_else(Type::dyn_type))
            .collect();
        let mut earliest_match: Option<(u32, Library)> = None;
        for o in function.overloads() {
            if o.is_member() != member || o.arg_types().len() != actual.len() {
                continue;
            }
            if !o
                .arg_types()
                .iter()
                .zip(&actual)
                .all(|(d, a)| loosely_matches(d, a))
            {
                continue;
            }
            match overload_origin(o.id()) {
                // An always-available overload matches: nothing to report.
                None => return,
                Some((since, lib)) => {
                    if since <= target.minor() {
                        return;
                    }
                    if earliest_match.is_none_or(|(s, _)| since < s) {
                        earliest_match = Some((since, lib));
                    }
                }
            }
        }
        if let Some((since, lib)) = earliest_match {
            report(e, name, since, lib);
        }
    });
    out
}
