//! The CEL type checker: types, declarations, the standard library, the checker and
//! cel-go compatible error display. Knows nothing about Kubernetes.
//!
//! It mirrors cel-go v0.29.2 (the version Kubernetes 1.37 uses): same verdicts, same deduced
//! types, same error texts and positions. Entry point: [`compile`] (parse, then check if the
//! parse succeeded, then the AST validators if the check succeeded).
//!
//! ```
//! use std::sync::Arc;
//! use vapcheck_cel::{compile, Env, EnvBuilder, EnvOptions, Type};
//!
//! let base = Arc::new(EnvBuilder::standard(EnvOptions::kubernetes()).build());
//! let mut overlay = Env::extend(&base);
//! overlay.add_variable("object", Type::dyn_type()).unwrap();
//! let env = overlay.build();
//! let ok = compile(&env, "object.spec.replicas > 1").unwrap();
//! assert_eq!(ok.result_type().to_string(), "bool");
//! let err = compile(&env, "objects.spec").unwrap_err();
//! assert_eq!(
//!     err.to_display_string(),
//!     "ERROR: <input>:1:1: undeclared reference to 'objects' (in container '')\n | objects.spec\n | ^"
//! );
//! ```

pub mod checker;
pub mod cost;
pub mod env;
pub mod errors;
pub mod macros;
pub mod parse;
pub mod stdlib;
pub mod types;
pub mod validators;

pub use checker::{CheckedTypes, Checker};
pub use env::{
    Env, EnvBuilder, EnvError, EnvOptions, FunctionDecl, OverloadDecl, StructTypes, TypeProvider,
};
pub use errors::{CelError, Issues, Location, Source};
pub use macros::{
    CallMacro, MacroChecker, OptMapMacro, Synth, SynthComprehension, TwoVarComprehension,
};
pub use parse::{ParsedExpr, parse, parse_with_options};
pub use stdlib::add_two_var_comprehensions;
pub use types::{Kind, Type, TypeKind};

/// A parsed and type-checked expression.
#[derive(Debug)]
pub struct CompiledExpr {
    /// The parsed expression.
    pub parsed: ParsedExpr,
    /// The deduced types.
    pub types: CheckedTypes,
}

impl CompiledExpr {
    /// The deduced type of the whole expression.
    pub fn result_type(&self) -> &Type {
        self.types.result_type()
    }
}

/// The cel-go parse-time errors of call-shaped macros the `cel` parser leaves unexpanded
/// (e.g. `argument must be a simple name` for `x.all(1, v, true)`).
pub fn macro_expansion_errors(env: &Env, parsed: &ParsedExpr) -> Option<Issues> {
    use cel::common::ast::Expr;
    let mut issues = Issues::new(parsed.source().clone());
    parse::walk(parsed.expr(), |e| {
        if let Expr::Call(call) = &e.expr
            && let Some(m) = env.find_call_macro(&call.func_name)
            && m.matches(call.target.is_some(), call.args.len())
            && let Some((id, msg)) = m.expansion_error(call.target.as_deref(), &call.args)
        {
            issues.report(parsed.location(id), id, msg);
        }
    });
    (!issues.is_empty()).then_some(issues)
}

/// Type-checks an already parsed expression, then runs the AST validators if the check
/// produced no error (cel-go `Env.Check`).
pub fn check(env: &Env, parsed: &ParsedExpr) -> Result<CheckedTypes, Issues> {
    let (types, mut issues) = checker::check(env, parsed);
    if !issues.is_empty() {
        return Err(issues);
    }
    validators::validate(env.options(), parsed, &types, &mut issues);
    if issues.is_empty() {
        Ok(types)
    } else {
        Err(issues)
    }
}

/// cel-go `Env.Compile`: parse (optional syntax only with `optional_types`); if that
/// succeeded, check; if that succeeded, validate.
pub fn compile(env: &Env, text: &str) -> Result<CompiledExpr, Issues> {
    let parsed = parse::parse_with_options(text, env.options().optional_types)?;
    if let Some(issues) = macro_expansion_errors(env, &parsed) {
        return Err(issues);
    }
    let types = check(env, &parsed)?;
    Ok(CompiledExpr { parsed, types })
}

#[cfg(test)]
mod tests;
