//! The AST walk of runtime safety ([`crate::policy::runtime`]): every chain of selections and
//! indexes rooted at `object` or `oldObject`, with the guards that make each step present
//! where it is evaluated.
//!
//! Read-only over the AST. The evaluation order follows cel-go v0.29.2
//! (`interpreter/interpretable.go`): `a && b` is false when either side is false, whatever
//! the other's error, so `b` matters only where `a` is true and `a` only where `b` is; `a || b`
//! likewise with false; `c ? x : y` evaluates `x` where `c` and `y` where `!c`. Comprehensions
//! (`all`, `exists`, `map`, `filter`, ...) are expanded by the parser into the same calls, so
//! `map(x, p, t)` evaluates `t` where `p`. A variable (`variables.v`) is evaluated where it is
//! used (k8s.io/apiserver v0.37.1 `pkg/cel/lazy`), so its expression is walked at each use,
//! under the use's guards.
//!
//! Guards: `has(e.f)`, `'k' in e`, `e.?f....hasValue()`, `e.?f.orValue(false)` (true only when
//! present), `request.operation` compared with a literal (`==`, `!=`, `in [...]`), and
//! `object != null` / `oldObject != null`; `!`, `&&` and `||` of them. Anything else says
//! nothing. MatchConditions guard the other expressions (all must be true for those to run)
//! and each other (a false condition wins over another's error: k8s.io/apiserver v0.37.1
//! `pkg/admission/plugin/webhook/matchconditions/matcher.go`, `Matcher.Match`).

use std::rc::Rc;
use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use crate::cel::ParsedExpr;
use crate::cel::parse::for_each_child;
use crate::policy::narrowing::Pos;
use crate::policy::runtime::{Chain, Cond, Ops, Origin, Root, Seg, Step, Term};

/// How many times the expressions of variables are walked in all (each use walks its
/// variable again, under the use's guards); past it, uses are not followed (fewer findings,
/// never wrong ones).
const VARIABLE_WALKS: usize = 256;

/// A known-present path.
type Path = (Root, Vec<Seg>);

/// What holds where a node is evaluated. The paths are shared: [`Known::with`] at every
/// `&&`, `||` and `?:` copies the pointers, not the paths.
#[derive(Debug, Clone)]
struct Known {
    present: Vec<Rc<Path>>,
    ops: Ops,
}

impl Known {
    fn all() -> Known {
        Known {
            present: Vec::new(),
            ops: Ops::ALL,
        }
    }

    fn with(&self, f: &Known) -> Known {
        let mut present = self.present.clone();
        present.extend(f.present.iter().cloned());
        Known {
            present,
            ops: self.ops.and(f.ops),
        }
    }

    fn covers(&self, root: Root, path: &[Seg]) -> bool {
        // `m.k` and `m['k']` look up the same key of a map (`'k' in params.data` guards
        // `params.data.k`).
        let same = |a: &Seg, b: &Seg| match (a, b) {
            (Seg::Field(x) | Seg::Key(x), Seg::Field(y) | Seg::Key(y)) => x == y,
            _ => a == b,
        };
        self.present.iter().any(|rp| {
            let (r, p) = &**rp;
            *r == root && p.len() >= path.len() && p.iter().zip(path).all(|(a, b)| same(a, b))
        })
    }
}

/// What a comprehension variable stands for.
#[derive(Debug, Clone, Default)]
struct Bound {
    /// Each element of the list at a path (ending with [`Seg::Item`]).
    elem: Option<Path>,
    /// Each key of the map at a path.
    keys_of: Option<Path>,
    /// A comprehension's accumulator, with its initial boolean value (its value at the first
    /// element, where a finding's witness fails).
    accu: Option<bool>,
}

type Scope = Vec<(String, Bound)>;

/// One expression being walked.
struct Text<'a> {
    parsed: &'a ParsedExpr,
    origin: Origin,
    /// Distinguishes this expression's comprehension ids from another's.
    tag: u64,
}

struct Walker<'a> {
    variables: &'a [(&'a str, &'a ParsedExpr)],
    /// Variables being walked inside one another.
    nesting: usize,
    budget: usize,
    out: Vec<Chain>,
}

/// Expressions (and matchConditions, variables) nested deeper than this are not analysed: no
/// chains, so no findings, rather than a deep recursion on the controller's 2 MiB check
/// threads (cel-go's parser allows 250 levels).
pub const MAX_ANALYSED_DEPTH: usize = 48;

/// Every chain of `site` (and of the variables it uses, [`Origin::Variable`]), given the
/// expressions that must have a value for its result to matter (`conditions`: the
/// matchConditions, true, for a matchCondition the others; for a messageExpression also its
/// validation, false: the message is used only when the validation denies).
pub fn access_chains(
    site: &ParsedExpr,
    conditions: &[(&ParsedExpr, bool)],
    variables: &[(&str, &ParsedExpr)],
) -> Vec<Chain> {
    let too_deep = |p: &ParsedExpr| p.depth() > MAX_ANALYSED_DEPTH;
    if too_deep(site) || conditions.iter().any(|(c, _)| too_deep(c)) {
        return Vec::new();
    }
    let mut w = Walker {
        variables,
        nesting: 0,
        budget: VARIABLE_WALKS,
        out: Vec::new(),
    };
    let mut known = Known::all();
    let mut conds = Vec::new();
    for (c, value) in conditions {
        known = known.with(&w.facts(c.expr(), *value, &Vec::new()));
        let cond = w.cond(c.expr(), &Vec::new(), 0);
        conds.push(Arc::new(if *value {
            cond
        } else {
            Cond::Not(Box::new(cond))
        }));
    }
    let t = Text {
        parsed: site,
        origin: Origin::Site,
        tag: 0,
    };
    w.walk(&t, site.expr(), &known, &conds, &Vec::new());
    w.out
}

fn string_lit(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

fn is_ident(e: &IdedExpr, name: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == name)
}

/// `request.operation`.
fn is_operation(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Select(s) if !s.test && s.field == "operation" && is_ident(&s.operand, "request"))
}

fn is_null(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Literal(LiteralValue::Null))
}

/// The operations in a literal list of names.
fn op_list(e: &IdedExpr) -> Option<Ops> {
    let Expr::List(l) = &e.expr else {
        return None;
    };
    l.elements
        .iter()
        .try_fold(Ops(0), |acc, x| Some(acc.or(Ops::named(string_lit(x)?)?)))
}

/// A raw step of a chain while it is collected.
struct RawStep<'e> {
    seg: Seg,
    node: &'e IdedExpr,
    optional: bool,
    index: bool,
}

impl<'a> Walker<'a> {
    fn variable(&self, name: &str) -> Option<(usize, &'a ParsedExpr)> {
        self.variables
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == name)
            .map(|(i, (_, p))| (i, *p))
    }

    /// `variables.<name>` whose expression is a plain path: that path.
    fn alias(&self, name: &str, depth: usize) -> Option<Path> {
        if depth > 8 {
            return None;
        }
        let (_, p) = self.variable(name)?;
        if p.depth() > MAX_ANALYSED_DEPTH {
            return None;
        }
        self.resolve(p.expr(), &Vec::new(), false, depth + 1)
    }

    /// The path `e` denotes, when it is a chain from a root (`optional_ok`: `.?` steps
    /// allowed).
    fn resolve(
        &self,
        e: &IdedExpr,
        scope: &Scope,
        optional_ok: bool,
        depth: usize,
    ) -> Option<Path> {
        match &e.expr {
            Expr::Ident(n) if n == "object" => Some((Root::Object, Vec::new())),
            Expr::Ident(n) if n == "oldObject" => Some((Root::OldObject, Vec::new())),
            Expr::Ident(n) if n == "namespaceObject" => Some((Root::NamespaceObject, Vec::new())),
            Expr::Ident(n) if n == "params" => Some((Root::Params, Vec::new())),
            Expr::Ident(n) => scope.iter().rev().find(|(v, _)| v == n)?.1.elem.clone(),
            Expr::Select(s) if !s.test => {
                if is_ident(&s.operand, "variables") {
                    return self.alias(&s.field, depth);
                }
                let (r, mut p) = self.resolve(&s.operand, scope, optional_ok, depth)?;
                p.push(Seg::Field(s.field.clone()));
                Some((r, p))
            }
            Expr::Call(c) if c.target.is_none() && c.args.len() == 2 => {
                let opt = c.func_name == "_?._" || c.func_name == "_[?_]";
                if !(c.func_name == "_[_]" || (opt && optional_ok)) {
                    return None;
                }
                let k = string_lit(&c.args[1])?;
                let (r, mut p) = self.resolve(&c.args[0], scope, optional_ok, depth)?;
                p.push(if c.func_name == "_?._" {
                    Seg::Field(k.to_owned())
                } else {
                    Seg::Key(k.to_owned())
                });
                Some((r, p))
            }
            _ => None,
        }
    }

    /// What holds where `e` evaluates to `positive`.
    fn facts(&self, e: &IdedExpr, positive: bool, scope: &Scope) -> Known {
        let none = Known::all();
        match &e.expr {
            Expr::Select(s) if s.test => {
                if !positive {
                    return none;
                }
                match self.resolve(&s.operand, scope, false, 0) {
                    Some((r, mut p)) => {
                        p.push(Seg::Field(s.field.clone()));
                        Known {
                            present: vec![Rc::new((r, p))],
                            ops: Ops::ALL,
                        }
                    }
                    None => none,
                }
            }
            Expr::Call(c) if c.target.is_none() => {
                match (c.func_name.as_str(), c.args.as_slice()) {
                    ("!_", [a]) => self.facts(a, !positive, scope),
                    ("_&&_", args) | ("_||_", args) if (c.func_name == "_&&_") == positive => {
                        // Every operand has the value: all facts hold.
                        args.iter()
                            .fold(Known::all(), |k, a| k.with(&self.facts(a, positive, scope)))
                    }
                    ("_&&_", args) | ("_||_", args) => {
                        // One operand has the value: only the union of the operations is known.
                        let ops = args
                            .iter()
                            .fold(Ops(0), |o, a| o.or(self.facts(a, positive, scope).ops));
                        Known {
                            present: Vec::new(),
                            ops,
                        }
                    }
                    ("_==_" | "_!=_", [a, b]) => {
                        let eq = (c.func_name == "_==_") == positive;
                        let op = |x: &IdedExpr, y: &IdedExpr| {
                            is_operation(x)
                                .then(|| string_lit(y).and_then(Ops::named))
                                .flatten()
                        };
                        if let Some(o) = op(a, b).or_else(|| op(b, a)) {
                            return Known {
                                present: Vec::new(),
                                ops: if eq { o } else { o.complement() },
                            };
                        }
                        // `object != null`: not a DELETE; `oldObject != null`: not a CREATE or
                        // CONNECT.
                        let root = |x: &IdedExpr, y: &IdedExpr| {
                            (is_null(y) && (is_ident(x, "object") || is_ident(x, "oldObject")))
                                .then(|| is_ident(x, "object"))
                        };
                        match root(a, b).or_else(|| root(b, a)) {
                            Some(object) if !eq => Known {
                                present: Vec::new(),
                                ops: if object {
                                    Ops::DELETE.complement()
                                } else {
                                    Ops::CREATE.or(Ops::CONNECT).complement()
                                },
                            },
                            _ => none,
                        }
                    }
                    ("@in", [k, m]) => {
                        if is_operation(k) {
                            return match op_list(m) {
                                Some(o) => Known {
                                    present: Vec::new(),
                                    ops: if positive { o } else { o.complement() },
                                },
                                None => none,
                            };
                        }
                        if !positive {
                            return none;
                        }
                        // `'k' in x.?f.orValue({})` (a rewrite of `'k' in x.f`): true only when
                        // `x.f` is present and has the key.
                        let map = match &m.expr {
                            Expr::Call(c) if c.func_name == "orValue" && c.args.len() == 1 => c
                                .target
                                .as_deref()
                                .and_then(|t| self.resolve(t, scope, true, 0)),
                            _ => self.resolve(m, scope, false, 0),
                        };
                        match (string_lit(k), map) {
                            (Some(k), Some((r, mut p))) => {
                                p.push(Seg::Key(k.to_owned()));
                                Known {
                                    present: vec![Rc::new((r, p))],
                                    ops: Ops::ALL,
                                }
                            }
                            _ => none,
                        }
                    }
                    _ => none,
                }
            }
            Expr::Call(c) if positive => {
                // `x.?f.hasValue()`, `x.?f.orValue(false)`.
                let Some(target) = c.target.as_deref() else {
                    return none;
                };
                let present = match (c.func_name.as_str(), c.args.as_slice()) {
                    ("hasValue", []) => true,
                    ("orValue", [d]) => {
                        matches!(&d.expr, Expr::Literal(LiteralValue::Boolean(b)) if !**b)
                    }
                    _ => false,
                };
                match present
                    .then(|| self.resolve(target, scope, true, 0))
                    .flatten()
                {
                    Some(p) => Known {
                        present: vec![Rc::new(p)],
                        ops: Ops::ALL,
                    },
                    None => none,
                }
            }
            _ => none,
        }
    }

    /// The chain whose last node is `e`: its root, base path, first node and steps.
    fn collect<'e>(
        &self,
        e: &'e IdedExpr,
        scope: &Scope,
    ) -> Option<(Root, Vec<Seg>, &'e IdedExpr, Vec<RawStep<'e>>)> {
        let mut steps = Vec::new();
        let mut cur = e;
        loop {
            match &cur.expr {
                Expr::Select(s) if !s.test => {
                    if is_ident(&s.operand, "variables") {
                        let (r, base) = self.alias(&s.field, 0)?;
                        steps.reverse();
                        return Some((r, base, &s.operand, steps));
                    }
                    steps.push(RawStep {
                        seg: Seg::Field(s.field.clone()),
                        node: cur,
                        optional: false,
                        index: false,
                    });
                    cur = &s.operand;
                }
                Expr::Call(c) if c.target.is_none() && c.args.len() == 2 => {
                    let f = c.func_name.as_str();
                    let seg = match (f, string_lit(&c.args[1]), &c.args[1].expr) {
                        ("_?._", Some(k), _) => Seg::Field(k.to_owned()),
                        ("_[_]" | "_[?_]", Some(k), _) => Seg::Key(k.to_owned()),
                        ("_[_]", None, Expr::Ident(v)) => {
                            // `m[k]` over the keys of `m` itself.
                            let keys_of = &scope.iter().rev().find(|(n, _)| n == v)?.1.keys_of;
                            if keys_of.is_none()
                                || self.resolve(&c.args[0], scope, false, 0) != *keys_of
                            {
                                return None;
                            }
                            Seg::IterKey
                        }
                        _ => return None,
                    };
                    steps.push(RawStep {
                        seg,
                        node: cur,
                        optional: f == "_?._" || f == "_[?_]",
                        index: f != "_?._",
                    });
                    cur = &c.args[0];
                }
                Expr::Ident(_) => {
                    let (r, base) = self.resolve(cur, scope, false, 0)?;
                    steps.reverse();
                    return Some((r, base, cur, steps));
                }
                _ => return None,
            }
        }
    }

    fn record(
        &mut self,
        t: &Text<'_>,
        e: &IdedExpr,
        known: &Known,
        conds: &[Arc<Cond>],
        scope: &Scope,
    ) -> bool {
        let Some((root, base, first, raw)) = self.collect(e, scope) else {
            return false;
        };
        if raw.is_empty() {
            return false;
        }
        let text = t.parsed.source().text();
        let Some(start) = t.parsed.offset(first.id) else {
            return false;
        };
        let mut steps = Vec::with_capacity(raw.len());
        // The path to each step, for the guards' paths (none known: nothing to compare).
        let compare = !known.present.is_empty();
        let mut path = if compare { base.clone() } else { Vec::new() };
        let mut optional = false;
        for r in raw {
            optional |= r.optional;
            if compare {
                path.push(r.seg.clone());
            }
            // The node's offset, looked up once (`ParsedExpr::location` is its location).
            let offset = t.parsed.offset(r.node.id);
            let Some((punct, end)) = step_span(text, offset, r.index) else {
                return false;
            };
            steps.push(Step {
                guarded: matches!(r.seg, Seg::IterKey) || (compare && known.covers(root, &path)),
                seg: r.seg,
                pos: offset.map(|b| {
                    let l = t.parsed.source().location_of_byte(b);
                    Pos {
                        line: l.line,
                        column: l.column,
                    }
                }),
                punct,
                end,
                optional,
            });
        }
        self.out.push(Chain {
            origin: t.origin,
            root,
            base,
            start: start.min(text.len()),
            steps,
            ops: known.ops,
            conds: conds.to_vec(),
        });
        true
    }

    fn walk(
        &mut self,
        t: &Text<'_>,
        e: &IdedExpr,
        known: &Known,
        conds: &[Arc<Cond>],
        scope: &Scope,
    ) {
        // A chain: recorded once, at its last node; its dynamic parts are walked below.
        let chain = self.record(t, e, known, conds, scope);
        let with = |c: Cond| -> Vec<Arc<Cond>> {
            let mut v = Vec::with_capacity(conds.len() + 1);
            v.extend(conds.iter().cloned());
            v.push(Arc::new(c));
            v
        };
        match &e.expr {
            Expr::Select(s) if !s.test && is_ident(&s.operand, "variables") => {
                self.use_variable(&s.field, known, conds);
            }
            Expr::Call(c)
                if c.target.is_none()
                    && c.args.len() == 2
                    && (c.func_name == "_&&_" || c.func_name == "_||_") =>
            {
                let and = c.func_name == "_&&_";
                let fa = self.facts(&c.args[0], and, scope);
                let fb = self.facts(&c.args[1], and, scope);
                // Each side decides the result only where the other is true (`&&`) or false
                // (`||`).
                let side = |x: &IdedExpr| {
                    let c = self.cond(x, scope, 0);
                    if and { c } else { Cond::Not(Box::new(c)) }
                };
                let (ca, cb) = (side(&c.args[0]), side(&c.args[1]));
                self.walk(t, &c.args[0], &known.with(&fb), &with(cb), scope);
                self.walk(t, &c.args[1], &known.with(&fa), &with(ca), scope);
            }
            Expr::Call(c) if c.target.is_none() && c.func_name == "_?_:_" && c.args.len() == 3 => {
                let yes = self.facts(&c.args[0], true, scope);
                let no = self.facts(&c.args[0], false, scope);
                let cc = self.cond(&c.args[0], scope, 0);
                self.walk(t, &c.args[0], known, conds, scope);
                self.walk(t, &c.args[1], &known.with(&yes), &with(cc.clone()), scope);
                self.walk(
                    t,
                    &c.args[2],
                    &known.with(&no),
                    &with(Cond::Not(Box::new(cc))),
                    scope,
                );
            }
            Expr::Comprehension(c) => {
                self.walk(t, &c.iter_range, known, conds, scope);
                let mut inner = scope.clone();
                let range = self.resolve(&c.iter_range, scope, false, 0);
                let elem = range.clone().map(|(r, mut p)| {
                    p.push(Seg::Item((t.tag << 32) | e.id));
                    (r, p)
                });
                match &c.iter_var2 {
                    // `l.all(i, v, ...)`: index and element; `m.all(k, v, ...)`: key and
                    // value (only a list's element is followed).
                    Some(v2) => {
                        let keys = Bound {
                            keys_of: range,
                            ..Bound::default()
                        };
                        inner.push((c.iter_var.clone(), keys));
                        let values = Bound {
                            elem,
                            ..Bound::default()
                        };
                        inner.push((v2.clone(), values));
                    }
                    None => inner.push((
                        c.iter_var.clone(),
                        Bound {
                            elem,
                            keys_of: range,
                            accu: None,
                        },
                    )),
                }
                let init = match &c.accu_init.expr {
                    Expr::Literal(LiteralValue::Boolean(b)) => Some(**b),
                    _ => None,
                };
                inner.push((
                    c.accu_var.clone(),
                    Bound {
                        accu: init,
                        ..Bound::default()
                    },
                ));
                for ch in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(t, ch, known, conds, &inner);
                }
            }
            _ => {
                for_each_child(e, |ch| {
                    // The steps of a recorded chain are not chains of their own; their
                    // operands down to the root need no walk, their index keys do.
                    if chain && is_chain_link(e, ch) {
                        self.walk_chain_rest(t, ch, known, conds, scope);
                    } else {
                        self.walk(t, ch, known, conds, scope);
                    }
                });
            }
        }
    }

    /// The condition `e` is true, as far as it can be decided on a witness request.
    fn cond(&self, e: &IdedExpr, scope: &Scope, depth: usize) -> Cond {
        if depth > 16 {
            return Cond::Unknown;
        }
        let d = depth + 1;
        match &e.expr {
            Expr::Literal(LiteralValue::Boolean(b)) => Cond::Const(**b),
            Expr::Ident(n) => match scope.iter().rev().find(|(v, _)| v == n) {
                Some((_, b)) => b.accu.map_or(Cond::Unknown, Cond::Const),
                None => Cond::Unknown,
            },
            Expr::Select(s) if s.test => match self.resolve(&s.operand, scope, false, 0) {
                Some((r, mut p)) if no_items(&p) => {
                    p.push(Seg::Field(s.field.clone()));
                    Cond::Has(r, p)
                }
                _ => Cond::Unknown,
            },
            Expr::Select(s) if is_ident(&s.operand, "variables") => match self.variable(&s.field) {
                Some((_, p)) => self.cond(p.expr(), &Vec::new(), d),
                None => Cond::Unknown,
            },
            Expr::Call(c) if c.target.is_none() => {
                match (c.func_name.as_str(), c.args.as_slice()) {
                    ("!_", [a]) => Cond::Not(Box::new(self.cond(a, scope, d))),
                    ("_&&_", args) => {
                        Cond::And(args.iter().map(|a| self.cond(a, scope, d)).collect())
                    }
                    ("_||_", args) => {
                        Cond::Or(args.iter().map(|a| self.cond(a, scope, d)).collect())
                    }
                    ("_==_", [a, b]) => match (self.term(a, scope), self.term(b, scope)) {
                        (Some(a), Some(b)) => Cond::Eq(a, b),
                        _ => Cond::Unknown,
                    },
                    ("_!=_", [a, b]) => match (self.term(a, scope), self.term(b, scope)) {
                        (Some(a), Some(b)) => Cond::Not(Box::new(Cond::Eq(a, b))),
                        _ => Cond::Unknown,
                    },
                    ("@in", [k, m]) => {
                        if let Expr::List(l) = &m.expr {
                            let items: Option<Vec<Term>> =
                                l.elements.iter().map(|x| self.term(x, scope)).collect();
                            return match (self.term(k, scope), items) {
                                (Some(k), Some(items)) => Cond::In(k, items),
                                _ => Cond::Unknown,
                            };
                        }
                        match (string_lit(k), self.resolve(m, scope, false, 0)) {
                            (Some(k), Some((r, mut p))) if no_items(&p) => {
                                p.push(Seg::Key(k.to_owned()));
                                Cond::Has(r, p)
                            }
                            _ => Cond::Unknown,
                        }
                    }
                    _ => Cond::Unknown,
                }
            }
            Expr::Call(c) => {
                let Some(target) = c.target.as_deref() else {
                    return Cond::Unknown;
                };
                match (c.func_name.as_str(), c.args.as_slice()) {
                    ("hasValue", []) => match self.resolve(target, scope, true, 0) {
                        Some((r, p)) if no_items(&p) => Cond::Has(r, p),
                        _ => Cond::Unknown,
                    },
                    (f @ ("contains" | "startsWith" | "endsWith"), [arg]) => {
                        let f: &'static str = match f {
                            "contains" => "contains",
                            "startsWith" => "startsWith",
                            _ => "endsWith",
                        };
                        match (self.term(target, scope), self.term(arg, scope)) {
                            (Some(a), Some(b)) => Cond::Str(f, a, b),
                            _ => Cond::Unknown,
                        }
                    }
                    _ => Cond::Unknown,
                }
            }
            _ => match self.term(e, scope) {
                Some(t @ Term::Path(..)) => Cond::Bool(t),
                _ => Cond::Unknown,
            },
        }
    }

    /// A value a condition compares.
    fn term(&self, e: &IdedExpr, scope: &Scope) -> Option<Term> {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => Some(Term::Lit(s.inner().into())),
            Expr::Literal(LiteralValue::Int(i)) => Some(Term::Lit((**i).into())),
            Expr::Literal(LiteralValue::Boolean(b)) => Some(Term::Lit((**b).into())),
            Expr::Literal(LiteralValue::Null) => Some(Term::Lit(serde_json::Value::Null)),
            Expr::Select(s) if !s.test && is_ident(&s.operand, "request") => match s.field.as_str()
            {
                "operation" => Some(Term::Operation),
                "namespace" => Some(Term::RequestNamespace),
                "name" => Some(Term::RequestName),
                _ => None,
            },
            Expr::Select(s)
                if !s.test
                    && matches!(&s.operand.expr, Expr::Select(k) if !k.test && k.field == "kind" && is_ident(&k.operand, "request")) =>
            {
                match s.field.as_str() {
                    "group" => Some(Term::RequestKind("group")),
                    "version" => Some(Term::RequestKind("version")),
                    "kind" => Some(Term::RequestKind("kind")),
                    _ => None,
                }
            }
            _ => match self.resolve(e, scope, false, 0) {
                Some((r, p)) if no_items(&p) => Some(Term::Path(r, p)),
                _ => None,
            },
        }
    }

    /// The parts of a recorded chain below its last node: no more chains, but index keys,
    /// `variables.<name>` uses and calls are walked.
    fn walk_chain_rest(
        &mut self,
        t: &Text<'_>,
        e: &IdedExpr,
        known: &Known,
        conds: &[Arc<Cond>],
        scope: &Scope,
    ) {
        match &e.expr {
            Expr::Select(s) if !s.test && is_ident(&s.operand, "variables") => {
                self.use_variable(&s.field, known, conds);
            }
            Expr::Select(s) if !s.test => self.walk_chain_rest(t, &s.operand, known, conds, scope),
            Expr::Call(c)
                if c.target.is_none()
                    && c.args.len() == 2
                    && matches!(c.func_name.as_str(), "_?._" | "_[_]" | "_[?_]") =>
            {
                self.walk_chain_rest(t, &c.args[0], known, conds, scope);
                self.walk(t, &c.args[1], known, conds, scope);
            }
            _ => {}
        }
    }

    fn use_variable(&mut self, name: &str, known: &Known, conds: &[Arc<Cond>]) {
        if self.budget == 0 {
            return;
        }
        let Some((i, p)) = self.variable(name) else {
            return;
        };
        // A variable too deep, or used inside more than 4 others being walked: not followed
        // (fewer findings, and a bounded stack).
        if p.depth() > MAX_ANALYSED_DEPTH || self.nesting >= 4 {
            return;
        }
        self.budget -= 1;
        self.nesting += 1;
        let t = Text {
            parsed: p,
            origin: Origin::Variable(i),
            tag: 2_000 + i as u64,
        };
        self.walk(&t, p.expr(), known, conds, &Vec::new());
        self.nesting -= 1;
    }
}

/// Whether a path has no list step (a condition on it names one value).
fn no_items(p: &[Seg]) -> bool {
    !p.iter().any(|s| matches!(s, Seg::Item(_) | Seg::IterKey))
}

/// Whether `child` is the chain operand of `parent` (a selection's operand, an index's map).
fn is_chain_link(parent: &IdedExpr, child: &IdedExpr) -> bool {
    match &parent.expr {
        Expr::Select(s) => std::ptr::eq(&*s.operand, child),
        Expr::Call(c) => c.args.first().is_some_and(|a| std::ptr::eq(a, child)),
        _ => false,
    }
}

/// The `.` or `[` of a step and the byte just after the step's text, from the node's offset.
fn step_span(text: &str, offset: Option<usize>, index: bool) -> Option<(usize, usize)> {
    let off = offset?;
    let bytes = text.as_bytes();
    if index {
        // The node is at `[`.
        if bytes.get(off) != Some(&b'[') {
            return None;
        }
        return Some((off, matching_close(text, off)? + 1));
    }
    // The node is at `.` (cel-go records a selection at its operator).
    if bytes.get(off) != Some(&b'.') {
        return None;
    }
    let mut i = off + 1;
    if bytes.get(i) == Some(&b'?') {
        i += 1;
    }
    while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    if bytes.get(i) == Some(&b'`') {
        let close = text.get(i + 1..)?.find('`')?;
        return Some((off, i + 1 + close + 1));
    }
    let start = i;
    while bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        i += 1;
    }
    (i > start).then_some((off, i))
}

/// The `]` matching the `[` at `open`, skipping string literals.
fn matching_close(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    let mut quote: Option<u8> = None;
    while let Some(&b) = bytes.get(i) {
        match quote {
            Some(q) => {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'\'' | b'"' => quote = Some(b),
                b'[' | b'(' | b'{' => depth += 1,
                b']' | b')' | b'}' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return (b == b']').then_some(i);
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ParsedExpr {
        crate::cel::parse::parse(s).expect("parses")
    }

    /// The unguarded, non-optional steps of `site`, as `root.path` text up to the step.
    fn unguarded(site: &str, conditions: &[&str], variables: &[(&str, &str)]) -> Vec<String> {
        let p = parse(site);
        let cs: Vec<ParsedExpr> = conditions
            .iter()
            .map(|c| parse(c.strip_prefix("false: ").unwrap_or(c)))
            .collect();
        let vs: Vec<(&str, ParsedExpr)> = variables.iter().map(|(n, e)| (*n, parse(e))).collect();
        // A condition written `false: e` must be false (a messageExpression's validation).
        let csr: Vec<(&ParsedExpr, bool)> = cs
            .iter()
            .zip(conditions)
            .map(|(c, t)| (c, !t.starts_with("false: ")))
            .collect();
        let vsr: Vec<(&str, &ParsedExpr)> = vs.iter().map(|(n, p)| (*n, p)).collect();
        let mut out = Vec::new();
        for c in access_chains(&p, &csr, &vsr) {
            let text = match c.origin {
                Origin::Site => site,
                Origin::Variable(i) => variables[i].1,
            };
            for s in &c.steps {
                if !s.guarded && !s.optional {
                    out.push(format!("{}|{}", &text[c.start..s.end], ops_name(c.ops)));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    fn ops_name(o: Ops) -> String {
        if o == Ops::ALL {
            return "*".into();
        }
        let mut s = String::new();
        for (n, x) in [
            ("C", Ops::CREATE),
            ("U", Ops::UPDATE),
            ("D", Ops::DELETE),
            ("X", Ops::CONNECT),
        ] {
            if o.has(x) {
                s.push_str(n);
            }
        }
        s
    }

    fn u(v: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn unguarded_selections() {
        assert_eq!(
            unguarded("object.spec.securityContext.runAsNonRoot == true", &[], &[]),
            u(&[
                "object.spec|*",
                "object.spec.securityContext|*",
                "object.spec.securityContext.runAsNonRoot|*"
            ])
        );
        assert_eq!(
            unguarded("object.metadata.labels['team'] != ''", &[], &[]),
            u(&[
                "object.metadata|*",
                "object.metadata.labels|*",
                "object.metadata.labels['team']|*"
            ])
        );
    }

    #[test]
    fn guard_forms() {
        // has() guards the field and its parents.
        assert_eq!(
            unguarded(
                "has(object.spec.securityContext.runAsNonRoot) && object.spec.securityContext.runAsNonRoot",
                &[],
                &[]
            ),
            u(&["object.spec|*", "object.spec.securityContext|*"])
        );
        // Either side of && guards the other.
        assert_eq!(
            unguarded("object.spec.x.y == 1 && has(object.spec.x)", &[], &[]),
            u(&["object.spec|*", "object.spec.x.y|*"])
        );
        // ||: the negation of the other side.
        assert_eq!(
            unguarded("!has(object.spec.x) || object.spec.x == 1", &[], &[]),
            u(&["object.spec|*"])
        );
        // ?: branches.
        assert_eq!(
            unguarded(
                "has(object.spec.x) ? object.spec.x : object.spec.y",
                &[],
                &[]
            ),
            u(&["object.spec|*", "object.spec.y|*"])
        );
        // in, also on the rewrite of an optional map.
        assert_eq!(
            unguarded(
                "'a' in object.metadata.?labels.orValue({}) && object.metadata.labels['a'] == 'b'",
                &[],
                &[]
            ),
            u(&["object.metadata|*"])
        );
        assert_eq!(
            unguarded(
                "'team' in object.metadata.labels && object.metadata.labels['team'] == 'a'",
                &[],
                &[]
            ),
            u(&["object.metadata|*", "object.metadata.labels|*"])
        );
        // Optional chains never fail; hasValue() guards.
        assert_eq!(
            unguarded(
                "object.metadata.?labels['team'].orValue('') == 'a'",
                &[],
                &[]
            ),
            u(&["object.metadata|*"])
        );
        assert_eq!(
            unguarded(
                "object.spec.?x.hasValue() && object.spec.x.z == 1",
                &[],
                &[]
            ),
            u(&["object.spec|*", "object.spec.x.z|*"])
        );
        // matchConditions guard (the field and its parents: where `spec` is absent the
        // condition itself fails, and the expression is not evaluated).
        assert_eq!(
            unguarded("object.spec.x == 1", &["has(object.spec.x)"], &[]),
            u(&[])
        );
    }

    #[test]
    fn message_expressions_are_guarded_by_their_validation_being_false() {
        // The validation is false only where the labels are present.
        assert_eq!(
            unguarded(
                "string(object.metadata.labels.size())",
                &["false: !has(object.metadata.labels) || object.metadata.labels.size() < 9"],
                &[]
            ),
            u(&[])
        );
        // A false validation that says nothing of the field.
        assert_eq!(
            unguarded(
                "object.metadata.labels['team']",
                &["false: object.metadata.name.startsWith('team-')"],
                &[]
            ),
            u(&[
                "object.metadata|*",
                "object.metadata.labels|*",
                "object.metadata.labels['team']|*"
            ])
        );
        // `has(x) && ...` false says nothing either; true it guards.
        assert_eq!(
            unguarded("object.spec.x", &["false: has(object.spec.x) && true"], &[]),
            u(&["object.spec.x|*", "object.spec|*"])
        );
    }

    #[test]
    fn namespace_object_chains() {
        // Recorded like object's; whether the root is null is decided per kind (runtime_check).
        assert_eq!(
            unguarded("namespaceObject.metadata.name != 'kube-system'", &[], &[]),
            u(&[
                "namespaceObject.metadata.name|*",
                "namespaceObject.metadata|*"
            ])
        );
        // The other side of `||` must be false for it to decide: `namespaceObject != null`.
        assert_only_where_not_null(
            "namespaceObject == null || namespaceObject.metadata.name != 'x'",
            Root::NamespaceObject,
        );
    }

    /// The chain of `root` in `expression` is evaluated only where `root != null`.
    fn assert_only_where_not_null(expression: &str, root: Root) {
        let p = parse(expression);
        let chains = access_chains(&p, &[], &[]);
        let chain = chains
            .iter()
            .find(|c| c.root == root)
            .unwrap_or_else(|| panic!("a {root:?} chain in {expression}"));
        assert_eq!(
            chain.conds,
            vec![Arc::new(Cond::Not(Box::new(Cond::Eq(
                Term::Path(root, vec![]),
                Term::Lit(serde_json::Value::Null)
            ))))],
            "{expression}"
        );
    }

    #[test]
    fn params_chains_and_their_guards() {
        // Unguarded: every step (null params fails at the first, a param object without the
        // key at the last; which one is decided per binding in runtime_check).
        assert_eq!(
            unguarded("params.data.maxReplicas == '3'", &[], &[]),
            u(&["params.data.maxReplicas|*", "params.data|*"])
        );
        // has() of the key guards it (its own operand chain is still an access).
        assert_eq!(
            unguarded(
                "has(params.data.maxReplicas) && params.data.maxReplicas == '3'",
                &[],
                &[]
            ),
            u(&["params.data|*"])
        );
        // `in` on the map.
        assert_eq!(
            unguarded(
                "!('maxReplicas' in params.data) || params.data.maxReplicas == '3'",
                &[],
                &[]
            ),
            u(&["params.data|*"])
        );
        // Optional selections never fail.
        assert_eq!(
            unguarded("params.data.?maxReplicas.orValue('') == '3'", &[], &[]),
            u(&["params.data|*"])
        );
        assert_eq!(
            unguarded("params.?data.?maxReplicas.orValue('') == '3'", &[], &[]),
            u(&[])
        );
        assert_eq!(
            unguarded("params.?data.maxReplicas.orValue('') == '3'", &[], &[]),
            u(&[])
        );
        // A matchCondition guards.
        assert_eq!(
            unguarded(
                "params.data.maxReplicas == '3'",
                &["has(params.data.maxReplicas)"],
                &[]
            ),
            u(&[])
        );
        // `params == null ||`: the chain is evaluated only where params is not null.
        assert_only_where_not_null("params == null || params.data.x == 'a'", Root::Params);
    }

    #[test]
    fn comprehensions() {
        assert_eq!(
            unguarded(
                "object.spec.containers.all(c, c.securityContext.privileged == false)",
                &[],
                &[]
            ),
            u(&[
                "c.securityContext.privileged|*",
                "c.securityContext|*",
                "object.spec.containers|*",
                "object.spec|*"
            ])
        );
        assert_eq!(
            unguarded(
                "object.spec.containers.all(c, !has(c.securityContext) || c.securityContext.privileged == false)",
                &[],
                &[]
            ),
            u(&[
                "c.securityContext.privileged|*",
                "object.spec.containers|*",
                "object.spec|*"
            ])
        );
        // A map's own keys.
        assert_eq!(
            unguarded(
                "object.metadata.labels.all(k, object.metadata.labels[k] != '')",
                &[],
                &[]
            ),
            u(&["object.metadata.labels|*", "object.metadata|*"])
        );
    }

    #[test]
    fn operations() {
        assert_eq!(
            unguarded(
                "request.operation == 'DELETE' || object.spec.x == 1",
                &[],
                &[]
            ),
            u(&["object.spec.x|CUX", "object.spec|CUX"])
        );
        assert_eq!(
            unguarded(
                "oldObject != null && oldObject.spec == object.spec",
                &[],
                &[]
            ),
            u(&["object.spec|UD", "oldObject.spec|UD"])
        );
        assert_eq!(
            unguarded(
                "object.spec == 1",
                &["request.operation in ['CREATE', 'UPDATE']"],
                &[]
            ),
            u(&["object.spec|CU"])
        );
    }

    #[test]
    fn variables_are_walked_where_used() {
        assert_eq!(
            unguarded(
                "has(object.spec.x) && variables.v == 1",
                &[],
                &[("v", "object.spec.x.y")]
            ),
            u(&["object.spec|*", "object.spec.x.y|*"])
        );
        // An alias: the chain goes on from the variable's path.
        assert_eq!(
            unguarded("variables.spec.x == 1", &[], &[("spec", "object.spec")]),
            u(&["object.spec|*", "variables.spec.x|*"])
        );
        // Unused variables are not evaluated.
        assert_eq!(unguarded("true", &[], &[("v", "object.spec.x")]), u(&[]));
    }
}
