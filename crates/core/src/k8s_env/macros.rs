//! The `sortBy` receiver macro of cel-go's lists extension (version 2 and later), which the
//! `cel` parser leaves as a plain call.
//!
//! cel-go v0.29.2 `ext/lists.go` `sortByMacro` expands `target.sortBy(v, key)` to
//!
//! ```text
//! cel.bind(@__sortBy_input__, target,
//!     @__sortBy_input__.@sortByAssociatedKeys(@__sortBy_input__.map(v, key)))
//! ```
//!
//! i.e. a comprehension over `[]` whose accumulator `@__sortBy_input__` is initialised with
//! the target and whose result calls `@sortByAssociatedKeys` with the list of keys computed
//! by a `map` comprehension (parser/macro.go `MakeMap`). The checker types exactly that.

use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr};

use crate::cel::{CallMacro, EnvBuilder, MacroChecker, Synth, SynthComprehension, Type};

const INPUT_VAR: &str = "@__sortBy_input__";
/// cel-go's accumulator name for macros (`AccuIdentName`).
const ACCU_VAR: &str = "@result";

fn input<'e>() -> Synth<'e> {
    Synth::Ident(INPUT_VAR.to_string())
}

/// `cel.bind(@__sortBy_input__, target, result)` as cel-go ext/lists.go `sortByMacro` builds it:
/// a comprehension over `[]` whose accumulator is initialised with the target.
fn bind<'e>(target: &'e IdedExpr, result: Synth<'e>) -> SynthComprehension<'e> {
    SynthComprehension {
        iter_range: Synth::List(vec![]),
        iter_var: "#unused".to_string(),
        iter_var2: None,
        accu_var: INPUT_VAR.to_string(),
        accu_init: Synth::Real(target),
        loop_cond: Synth::Literal(Type::bool()),
        loop_step: input(),
        result,
    }
}

/// `range.map(var, key)` (parser/macro.go `MakeMap`).
fn map_keys<'e>(range: Synth<'e>, var: &str, key: &'e IdedExpr) -> SynthComprehension<'e> {
    let accu = || Synth::Ident(ACCU_VAR.to_string());
    SynthComprehension {
        iter_range: range,
        iter_var: var.to_owned(),
        iter_var2: None,
        accu_var: ACCU_VAR.to_string(),
        accu_init: Synth::List(vec![]),
        loop_cond: Synth::Literal(Type::bool()),
        loop_step: Synth::Call("_+_", vec![accu(), Synth::List(vec![Synth::Real(key)])]),
        result: accu(),
    }
}

/// Registers the `sortBy` macro.
pub fn add_sort_by(b: &mut EnvBuilder) {
    b.add_call_macro(Arc::new(SortBy));
}

/// `target.sortBy(var, keyExpr)`.
#[derive(Debug)]
pub struct SortBy;

impl CallMacro for SortBy {
    fn name(&self) -> &str {
        "sortBy"
    }

    fn matches(&self, receiver: bool, arg_count: usize) -> bool {
        receiver && arg_count == 2
    }

    fn expansion_error(
        &self,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(u64, String)> {
        let target = target?;
        // cel-go ext/lists.go sortByMacro: the target kinds it accepts (a `has()` test is a
        // select, an expanded macro a comprehension).
        if !matches!(
            target.expr,
            Expr::List(_)
                | Expr::Select(_)
                | Expr::Ident(_)
                | Expr::Comprehension(_)
                | Expr::Call(_)
        ) {
            return Some((
                target.id,
                "sortBy can only be applied to a list, identifier, comprehension, call or select expression"
                    .to_string(),
            ));
        }
        // parser/macro.go MakeMap.
        let first = args.first()?;
        match &first.expr {
            Expr::Ident(v) if v == ACCU_VAR || v == "__result__" => Some((
                first.id,
                "iteration variable overwrites accumulator variable".to_string(),
            )),
            Expr::Ident(_) => None,
            _ => Some((first.id, "argument is not an identifier".to_string())),
        }
    }

    /// The expansion of the module documentation, for the cost estimator.
    fn expansion<'e>(
        &self,
        target: Option<&'e IdedExpr>,
        args: &'e [IdedExpr],
    ) -> Option<Synth<'e>> {
        let (Some(target), [var, key]) = (target, args) else {
            return None;
        };
        let Expr::Ident(var) = &var.expr else {
            return None;
        };
        let keys = map_keys(input(), var, key);
        Some(Synth::Comprehension(Box::new(bind(
            target,
            Synth::MemberCall(
                "@sortByAssociatedKeys",
                vec![input(), Synth::Comprehension(Box::new(keys))],
            ),
        ))))
    }

    fn check(
        &self,
        ctx: &mut dyn MacroChecker,
        call_id: u64,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Type {
        let (Some(target), [var, key]) = (target, args) else {
            return Type::error();
        };
        let Expr::Ident(var) = &var.expr else {
            return Type::error();
        };
        // The bind: `[]` range, accumulator initialised with the target. Its result is the
        // `@sortByAssociatedKeys` call below, whose type is computed after the bind's other
        // parts in the same order as cel-go (the key comprehension cannot see the bind's
        // variables: their names are not valid identifiers).
        let input_t = ctx.check_synth_comprehension(call_id, &bind(target, input()));
        // `@__sortBy_input__.map(var, key)` (parser/macro.go MakeMap).
        let keys = map_keys(Synth::Literal(input_t.clone()), var, key);
        let keys_t = ctx.check_synth_comprehension(call_id, &keys);
        ctx.check_synth(
            call_id,
            &Synth::MemberCall(
                "@sortByAssociatedKeys",
                vec![Synth::Literal(input_t), Synth::Literal(keys_t)],
            ),
        )
    }
}
