//! Call-shaped macros: calls the `cel` parser leaves unexpanded but cel-go expands into a
//! comprehension (cel-go's `optMap`/`optFlatMap` of the optional library, the two-variable
//! comprehensions of `ext.TwoVarComprehensions()`, and those the layers above add). The
//! environment ([`crate::env`]) holds them and the checker ([`crate::checker`]) types them
//! through [`MacroChecker`], the part of the checker a macro drives, so that neither of those
//! modules needs the other's definitions here and the three form no import cycle.

use cel::common::ast::{Expr, IdedExpr};

use super::types::Type;

/// What a [`CallMacro`] may ask of the checker while typing its call
/// ([`crate::checker::Checker`] implements it).
pub trait MacroChecker {
    /// Checks a real AST node and returns its (unsubstituted) type.
    fn check_expr(&mut self, e: &IdedExpr) -> Type;

    /// Types a synthetic expression; errors on synthetic parts are reported at `loc_id`.
    fn check_synth(&mut self, loc_id: u64, s: &Synth<'_>) -> Type;

    /// Types a comprehension built from synthetic parts, exactly like a parsed one; errors on
    /// synthetic parts are reported at `loc_id`.
    fn check_synth_comprehension(&mut self, loc_id: u64, comp: &SynthComprehension<'_>) -> Type;

    /// The type of a call of the function `name` with `args` (expression id and type of each,
    /// the receiver first when `member`), resolved against its overloads as for a call node
    /// `call_id`: the error type when the function is not declared (nothing is reported) or
    /// when no overload matches (the resolution reports that).
    fn resolve_call(
        &mut self,
        call_id: u64,
        name: &str,
        member: bool,
        args: &[(u64, Type)],
    ) -> Type;
}

/// A call-shaped macro: a call the `cel` parser leaves unexpanded but cel-go expands into a
/// comprehension (two-variable `all`, `transformList`, `optMap`, ...). The checker calls
/// [`CallMacro::check`] instead of resolving the call as a function.
pub trait CallMacro: Send + Sync {
    /// The function name, e.g. `transformList`.
    fn name(&self) -> &str;

    /// Whether a call with this shape is this macro (`receiver`: called as `x.f(...)`).
    fn matches(&self, receiver: bool, arg_count: usize) -> bool;

    /// The expansion error cel-go's parser would report for this call, as (expression id,
    /// message), e.g. `argument must be a simple name`. Checked after parsing succeeds.
    fn expansion_error(
        &self,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(u64, String)>;

    /// The expression cel-go's macro expands the call into (usually a
    /// [`Synth::Comprehension`]), for the cost estimator ([`crate::cost`]); `None` if
    /// this macro does not describe it (the estimator then reports the call as unsupported).
    fn expansion<'e>(
        &self,
        _target: Option<&'e IdedExpr>,
        _args: &'e [IdedExpr],
    ) -> Option<Synth<'e>> {
        None
    }

    /// Types the call the way cel-go types its expansion; returns the type of the call node.
    fn check(
        &self,
        ctx: &mut dyn MacroChecker,
        call_id: u64,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Type;
}

/// A piece of a macro expansion that has no node in the parsed AST: the checker types it
/// like the node cel-go's macro would have built. Errors on synthetic nodes are reported at
/// the location of the macro call (as cel-go does for macro-generated ids).
#[derive(Clone, Debug)]
pub enum Synth<'e> {
    /// A real node of the parsed AST.
    Real(&'e IdedExpr),
    /// An identifier (the accumulator or an iteration variable).
    Ident(String),
    /// A literal of the given type.
    Literal(Type),
    /// A global call of a function.
    Call(&'static str, Vec<Synth<'e>>),
    /// A member call `args[0].f(args[1..])`.
    MemberCall(&'static str, Vec<Synth<'e>>),
    /// A list literal.
    List(Vec<Synth<'e>>),
    /// An empty map literal.
    EmptyMap,
    /// A nested comprehension.
    Comprehension(Box<SynthComprehension<'e>>),
}

/// A comprehension made of synthetic parts (see [`Synth`]).
#[derive(Clone, Debug)]
pub struct SynthComprehension<'e> {
    /// The range.
    pub iter_range: Synth<'e>,
    /// The first iteration variable.
    pub iter_var: String,
    /// The second iteration variable (two-variable comprehensions).
    pub iter_var2: Option<String>,
    /// The accumulator variable name.
    pub accu_var: String,
    /// The accumulator initializer.
    pub accu_init: Synth<'e>,
    /// The loop condition.
    pub loop_cond: Synth<'e>,
    /// The loop step.
    pub loop_step: Synth<'e>,
    /// The result.
    pub result: Synth<'e>,
}

// ----- built-in call-shaped macros -----

/// `x.optMap(v, e)` / `x.optFlatMap(v, e)` of the optional library (cel-go cel/library.go
/// optMap/optFlatMap), which the `cel` parser does not expand.
pub struct OptMapMacro {
    /// `optFlatMap` when true, `optMap` otherwise.
    pub flat: bool,
}

fn simple_name(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Ident(n) => Some(n),
        _ => None,
    }
}

impl CallMacro for OptMapMacro {
    fn name(&self) -> &str {
        if self.flat { "optFlatMap" } else { "optMap" }
    }

    fn matches(&self, receiver: bool, arg_count: usize) -> bool {
        receiver && arg_count == 2
    }

    fn expansion_error(
        &self,
        _target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(u64, String)> {
        let first = args.first()?;
        if simple_name(first).is_none() {
            return Some((
                first.id,
                format!(
                    "{}() variable name must be a simple identifier",
                    self.name()
                ),
            ));
        }
        None
    }

    /// cel-go's expansion: `target.hasValue() ? optional.of(cel.bind(v, target.value(),
    /// body)) : optional.none()` (optFlatMap: without `optional.of`).
    fn expansion<'e>(
        &self,
        target: Option<&'e IdedExpr>,
        args: &'e [IdedExpr],
    ) -> Option<Synth<'e>> {
        let (Some(target), [var, body]) = (target, args) else {
            return None;
        };
        let var = simple_name(var)?;
        let bind = Synth::Comprehension(Box::new(SynthComprehension {
            iter_range: Synth::List(vec![]),
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: var.to_string(),
            accu_init: Synth::MemberCall("value", vec![Synth::Real(target)]),
            loop_cond: Synth::Literal(Type::bool()),
            loop_step: Synth::Ident(var.to_string()),
            result: Synth::Real(body),
        }));
        let then = if self.flat {
            bind
        } else {
            Synth::Call("optional.of", vec![bind])
        };
        Some(Synth::Call(
            "_?_:_",
            vec![
                Synth::MemberCall("hasValue", vec![Synth::Real(target)]),
                then,
                Synth::Call("optional.none", vec![]),
            ],
        ))
    }

    fn check(
        &self,
        ctx: &mut dyn MacroChecker,
        call_id: u64,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Type {
        let (Some(target), [var, body]) = (target, args) else {
            return Type::error();
        };
        let Some(var) = simple_name(var) else {
            return Type::error();
        };
        // target.hasValue() ? optional.of(<comprehension>) : optional.none()   (optMap)
        // target.hasValue() ? <comprehension> : optional.none()                (optFlatMap)
        let comp = SynthComprehension {
            iter_range: Synth::List(vec![]),
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: var.to_string(),
            accu_init: Synth::MemberCall("value", vec![Synth::Real(target)]),
            loop_cond: Synth::Literal(Type::bool()),
            loop_step: Synth::Ident(var.to_string()),
            result: Synth::Real(body),
        };
        // Evaluate in cel-go's argument order: condition, then branches.
        let has_value = {
            let t = ctx.check_expr(target);
            ctx.resolve_call(call_id, "hasValue", true, &[(target.id, t)])
        };
        let comp_t = ctx.check_synth_comprehension(call_id, &comp);
        let then_t = if self.flat {
            comp_t
        } else {
            ctx.resolve_call(call_id, "optional.of", false, &[(call_id, comp_t)])
        };
        let none_t = ctx.resolve_call(call_id, "optional.none", false, &[]);
        ctx.resolve_call(
            call_id,
            "_?_:_",
            false,
            &[(call_id, has_value), (call_id, then_t), (call_id, none_t)],
        )
    }
}

/// The two-variable comprehension macros of cel-go ext/comprehensions.go
/// (`TwoVarComprehensions`): `all`, `exists`, `existsOne`, `exists_one` with three
/// arguments, and `transformList`, `transformMap`, `transformMapEntry` with three or four.
pub struct TwoVarComprehension {
    name: &'static str,
}

impl TwoVarComprehension {
    /// All the macros of the library.
    pub fn all_macros() -> Vec<TwoVarComprehension> {
        [
            "all",
            "exists",
            "existsOne",
            "exists_one",
            "transformList",
            "transformMap",
            "transformMapEntry",
        ]
        .into_iter()
        .map(|name| TwoVarComprehension { name })
        .collect()
    }
}

impl CallMacro for TwoVarComprehension {
    fn name(&self) -> &str {
        self.name
    }

    fn matches(&self, receiver: bool, arg_count: usize) -> bool {
        receiver
            && match self.name {
                "transformList" | "transformMap" | "transformMapEntry" => {
                    arg_count == 3 || arg_count == 4
                }
                _ => arg_count == 3,
            }
    }

    fn expansion_error(
        &self,
        _target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(u64, String)> {
        let (a0, a1) = (args.first()?, args.get(1)?);
        // cel-go ext/comprehensions.go extractIterVars
        let Some(v1) = simple_name(a0) else {
            return Some((a0.id, "argument must be a simple name".to_string()));
        };
        let Some(v2) = simple_name(a1) else {
            return Some((a1.id, "argument must be a simple name".to_string()));
        };
        if v1 == v2 {
            return Some((a1.id, format!("duplicate variable name: {v1}")));
        }
        if v1 == "@result" || v1 == "__result__" {
            return Some((
                a0.id,
                "iteration variable overwrites accumulator variable".to_string(),
            ));
        }
        if v2 == "@result" || v2 == "__result__" {
            return Some((
                a1.id,
                "iteration variable overwrites accumulator variable".to_string(),
            ));
        }
        None
    }

    fn check(
        &self,
        ctx: &mut dyn MacroChecker,
        call_id: u64,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Type {
        match self.comprehension(target, args) {
            Some(comp) => ctx.check_synth_comprehension(call_id, &comp),
            None => Type::error(),
        }
    }

    fn expansion<'e>(
        &self,
        target: Option<&'e IdedExpr>,
        args: &'e [IdedExpr],
    ) -> Option<Synth<'e>> {
        let comp = self.comprehension(target, args)?;
        Some(Synth::Comprehension(Box::new(comp)))
    }
}

impl TwoVarComprehension {
    /// The comprehension cel-go's `ext.TwoVarComprehensions` macros expand the call into.
    fn comprehension<'e>(
        &self,
        target: Option<&'e IdedExpr>,
        args: &'e [IdedExpr],
    ) -> Option<SynthComprehension<'e>> {
        let target = target?;
        let (Some(v1), Some(v2)) = (
            args.first().and_then(simple_name),
            args.get(1).and_then(simple_name),
        ) else {
            return None;
        };
        let accu = || Synth::Ident("@result".to_string());
        let (init, cond, step, result) = match self.name {
            "all" => (
                Synth::Literal(Type::bool()),
                Synth::Call("@not_strictly_false", vec![accu()]),
                Synth::Call("_&&_", vec![accu(), Synth::Real(&args[2])]),
                accu(),
            ),
            "exists" => (
                Synth::Literal(Type::bool()),
                Synth::Call("@not_strictly_false", vec![Synth::Call("!_", vec![accu()])]),
                Synth::Call("_||_", vec![accu(), Synth::Real(&args[2])]),
                accu(),
            ),
            "existsOne" | "exists_one" => (
                Synth::Literal(Type::int()),
                Synth::Literal(Type::bool()),
                Synth::Call(
                    "_?_:_",
                    vec![
                        Synth::Real(&args[2]),
                        Synth::Call("_+_", vec![accu(), Synth::Literal(Type::int())]),
                        accu(),
                    ],
                ),
                Synth::Call("_==_", vec![accu(), Synth::Literal(Type::int())]),
            ),
            _ => {
                let (filter, transform) = if args.len() == 4 {
                    (Some(&args[2]), &args[3])
                } else {
                    (None, &args[2])
                };
                let (init, mut step) = match self.name {
                    "transformList" => (
                        Synth::List(vec![]),
                        Synth::Call(
                            "_+_",
                            vec![accu(), Synth::List(vec![Synth::Real(transform)])],
                        ),
                    ),
                    "transformMap" => (
                        Synth::EmptyMap,
                        Synth::Call(
                            "cel.@mapInsert",
                            vec![accu(), Synth::Ident(v1.to_string()), Synth::Real(transform)],
                        ),
                    ),
                    _ => (
                        Synth::EmptyMap,
                        Synth::Call("cel.@mapInsert", vec![accu(), Synth::Real(transform)]),
                    ),
                };
                if let Some(filter) = filter {
                    step = Synth::Call("_?_:_", vec![Synth::Real(filter), step, accu()]);
                }
                (init, Synth::Literal(Type::bool()), step, accu())
            }
        };
        Some(SynthComprehension {
            iter_range: Synth::Real(target),
            iter_var: v1.to_string(),
            iter_var2: Some(v2.to_string()),
            accu_var: "@result".to_string(),
            accu_init: init,
            loop_cond: cond,
            loop_step: step,
            result,
        })
    }
}
