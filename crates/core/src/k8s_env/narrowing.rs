//! Kind narrowing over a parsed expression: the guard under which CEL evaluates each node.
//!
//! Read-only over the AST; the cel-go-compatible checker is not involved. The rules follow
//! cel-go's evaluation (interpreter/interpretable.go, v0.29): `_&&_` and `_||_` are
//! commutative with respect to errors (`false && error` and `error && false` are both
//! `false`), so each operand of `a && b` is evaluated only where it can matter: `a` under `b`,
//! `b` under `a`; of `a || b`, each under the other's negation. `c ? x : y` evaluates `x`
//! only when `c`, `y` only when `!c`. Atoms: `object.kind`, `oldObject.kind` and
//! `request.kind.kind` compared with a string literal (`==`, `!=`, `in [...]`), the same for
//! `apiVersion` and `request.kind.group`/`version`, `has()`, `e.?f.hasValue()` and
//! `e.?f.orValue(<bool literal>)`, and `'k' in object.<path>`.

use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue};

use crate::cel::ParsedExpr;
use crate::cel::parse::children;
use crate::policy::narrowing::{Atom, Formula, GuardedNode, Guards, GvkPart, Pos};
use crate::schema::escape::escape;

/// Node positions. `ParsedExpr::location` counts the characters of the line before a node;
/// for ASCII text (nearly every expression) a column is the byte distance from the line's
/// start, computed here without rescanning the line for every node.
struct Locator<'a> {
    parsed: &'a ParsedExpr,
    /// Byte offsets where lines start (after each `\n`, as `cel::errors::Source`); `None`
    /// for non-ASCII text.
    ascii_line_starts: Option<Vec<usize>>,
}

impl<'a> Locator<'a> {
    fn new(parsed: &'a ParsedExpr) -> Self {
        let text = parsed.source().text();
        let ascii_line_starts = text.is_ascii().then(|| {
            std::iter::once(0)
                .chain(
                    text.bytes()
                        .enumerate()
                        .filter(|(_, b)| *b == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .collect()
        });
        Locator {
            parsed,
            ascii_line_starts,
        }
    }

    fn pos(&self, e: &IdedExpr) -> Option<Pos> {
        let Some(starts) = &self.ascii_line_starts else {
            return self.parsed.location(e.id).map(|l| Pos {
                line: l.line,
                column: l.column,
            });
        };
        let byte = self
            .parsed
            .offset(e.id)?
            .min(self.parsed.source().text().len());
        let line = match starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        Some(Pos {
            line: line + 1,
            column: byte - starts.get(line).copied().unwrap_or(0),
        })
    }
}

fn pos_of(loc: &Locator<'_>, e: &IdedExpr) -> Option<Pos> {
    loc.pos(e)
}

/// `object.kind`, `oldObject.kind`, `request.kind.kind` ([`GvkPart::Kind`]);
/// `object.apiVersion`, `oldObject.apiVersion` ([`GvkPart::ApiVersion`]);
/// `request.kind.group`, `request.kind.version` ([`GvkPart::Group`], [`GvkPart::Version`]).
fn gvk_ref(e: &IdedExpr) -> Option<GvkPart> {
    let Expr::Select(s) = &e.expr else {
        return None;
    };
    if s.test {
        return None;
    }
    match &s.operand.expr {
        Expr::Ident(name) if name == "object" || name == "oldObject" => match s.field.as_str() {
            "kind" => Some(GvkPart::Kind),
            "apiVersion" => Some(GvkPart::ApiVersion),
            _ => None,
        },
        Expr::Select(inner)
            if !inner.test
                && inner.field == "kind"
                && matches!(&inner.operand.expr, Expr::Ident(n) if n == "request") =>
        {
            match s.field.as_str() {
                "kind" => Some(GvkPart::Kind),
                "group" => Some(GvkPart::Group),
                "version" => Some(GvkPart::Version),
                _ => None,
            }
        }
        _ => None,
    }
}

fn gvk_atom(part: GvkPart, value: &str) -> Formula {
    Formula::Atom(match part {
        GvkPart::Kind => Atom::KindIs(value.to_owned()),
        part => Atom::GvkIs(part, value.to_owned()),
    })
}

/// `object.a.b` (plain field selections from `object` or `oldObject`): `[object, a, b]`.
fn object_path(e: &IdedExpr) -> Option<Vec<String>> {
    match &e.expr {
        Expr::Ident(name) if name == "object" || name == "oldObject" => Some(vec![name.clone()]),
        Expr::Select(s) if !s.test => {
            let mut p = object_path(&s.operand)?;
            p.push(s.field.clone());
            Some(p)
        }
        _ => None,
    }
}

/// `e.?f` (the parser's `_?._(e, 'f')`): `e`.
fn opt_select_operand(e: &IdedExpr) -> Option<&IdedExpr> {
    match &e.expr {
        Expr::Call(c)
            if c.target.is_none()
                && c.func_name == "_?._"
                && c.args.len() == 2
                && matches!(&c.args[1].expr, Expr::Literal(LiteralValue::String(_))) =>
        {
            Some(&c.args[0])
        }
        _ => None,
    }
}

/// Whether evaluating `e` tests its last field for presence: `e` is `x.?f`, or `x.f` where
/// `x` is such a selection (cel-go v0.29.2 `interpreter/attributes.go`, `applyQualifiers`).
fn is_optional_select(e: &IdedExpr) -> bool {
    let mut cur = e;
    loop {
        if opt_select_operand(cur).is_some() {
            return true;
        }
        match &cur.expr {
            Expr::Select(s) if !s.test => cur = &s.operand,
            _ => return false,
        }
    }
}

/// An optional chain `x.?a.b.?c.d`: the positions of its optional selections (`.?a` and
/// everything after it) and the innermost non-optional operand `x`.
fn optional_chain<'a>(parsed: &Locator<'_>, e: &'a IdedExpr) -> Option<(Vec<Pos>, &'a IdedExpr)> {
    let mut tests = Vec::new();
    let mut found: Option<(usize, &IdedExpr)> = None;
    let mut cur = e;
    loop {
        if let Some(operand) = opt_select_operand(cur) {
            tests.extend(pos_of(parsed, cur));
            found = Some((tests.len(), operand));
            cur = operand;
            continue;
        }
        match &cur.expr {
            Expr::Select(s) if !s.test => {
                tests.extend(pos_of(parsed, cur));
                cur = &s.operand;
            }
            _ => break,
        }
    }
    let (n, operand) = found?;
    tests.truncate(n);
    Some((tests, operand))
}

/// A string literal, or the comprehension variable `bind.0` standing for `bind.1`.
fn string_value<'a>(e: &'a IdedExpr, bind: Option<(&str, &'a str)>) -> Option<&'a str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        Expr::Ident(name) => bind.and_then(|(var, value)| (name == var).then_some(value)),
        _ => None,
    }
}

/// The positions of `e` and all its descendants.
fn subtree_positions(parsed: &Locator<'_>, e: &IdedExpr) -> Vec<Pos> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(n) = stack.pop() {
        out.extend(pos_of(parsed, n));
        stack.extend(children(n));
    }
    out
}

/// What the analysis knows about the value of a boolean expression.
fn formula(parsed: &Locator<'_>, e: &IdedExpr) -> Formula {
    formula_bound(parsed, e, None)
}

/// [`formula`] with a comprehension variable bound to a string (for
/// `['A', 'B'].all(k, object.kind != k)` and `.exists(k, object.kind == k)`).
fn formula_bound(parsed: &Locator<'_>, e: &IdedExpr, bind: Option<(&str, &str)>) -> Formula {
    match &e.expr {
        Expr::Select(s) if s.test => Formula::Atom(Atom::Has {
            test: pos_of(parsed, e),
            operand: subtree_positions(parsed, &s.operand),
            path: object_path(&s.operand).map(|mut p| {
                p.push(s.field.clone());
                p
            }),
        }),
        Expr::Call(c) if c.target.is_none() => {
            let args = &c.args;
            match (c.func_name.as_str(), args.len()) {
                ("_&&_", _) => Formula::And(
                    args.iter()
                        .map(|a| formula_bound(parsed, a, bind))
                        .collect(),
                ),
                ("_||_", _) => Formula::Or(
                    args.iter()
                        .map(|a| formula_bound(parsed, a, bind))
                        .collect(),
                ),
                ("!_", 1) => formula_bound(parsed, &args[0], bind).negate(),
                ("_==_" | "_!=_", 2) => {
                    let lit = match (gvk_ref(&args[0]), gvk_ref(&args[1])) {
                        (Some(part), _) => string_value(&args[1], bind).map(|v| (part, v)),
                        (None, Some(part)) => string_value(&args[0], bind).map(|v| (part, v)),
                        _ => None,
                    };
                    match lit {
                        Some((part, v)) => {
                            let f = gvk_atom(part, v);
                            if c.func_name == "_!=_" { f.negate() } else { f }
                        }
                        None => Formula::Unknown,
                    }
                }
                ("@in", 2) => match (gvk_ref(&args[0]), &args[1].expr) {
                    (Some(part), Expr::List(l)) => {
                        let values: Option<Vec<Formula>> = l
                            .elements
                            .iter()
                            .map(|x| string_value(x, bind).map(|v| gvk_atom(part, v)))
                            .collect();
                        values.map(Formula::Or).unwrap_or(Formula::Unknown)
                    }
                    _ => key_test(parsed, &args[0], &args[1], bind),
                },
                _ => Formula::Unknown,
            }
        }
        // `e.?f.hasValue()`; `e.?f.orValue(false)` is `hasValue() && <value>`,
        // `e.?f.orValue(true)` is `!hasValue() || <value>`.
        Expr::Call(c) if c.target.is_some() => {
            let Some(target) = c.target.as_deref() else {
                return Formula::Unknown;
            };
            let present = || {
                optional_chain(parsed, target).map(|(tests, operand)| {
                    Formula::Atom(Atom::Present {
                        tests,
                        operand: subtree_positions(parsed, operand),
                    })
                })
            };
            match (c.func_name.as_str(), c.args.as_slice()) {
                ("hasValue", []) => present().unwrap_or(Formula::Unknown),
                ("orValue", [default]) => match (&default.expr, present()) {
                    (Expr::Literal(LiteralValue::Boolean(b)), Some(p)) => {
                        if **b {
                            Formula::Or(vec![p.negate(), Formula::Unknown])
                        } else {
                            Formula::And(vec![p, Formula::Unknown])
                        }
                    }
                    _ => Formula::Unknown,
                },
                _ => Formula::Unknown,
            }
        }
        Expr::Comprehension(c) => comprehension_formula(parsed, c).unwrap_or(Formula::Unknown),
        _ => Formula::Unknown,
    }
}

/// `'k' in object.a` (a string literal, or a comprehension variable bound to one; a key that
/// is its own CEL field name, so that the schema's field names can answer for it).
fn key_test(
    parsed: &Locator<'_>,
    key: &IdedExpr,
    map: &IdedExpr,
    bind: Option<(&str, &str)>,
) -> Formula {
    let (Some(key), Some(mut path)) = (string_value(key, bind), object_path(map)) else {
        return Formula::Unknown;
    };
    if escape(key).as_deref() != Some(key) {
        return Formula::Unknown;
    }
    path.push(key.to_owned());
    Formula::Atom(Atom::HasKey {
        operand: subtree_positions(parsed, map),
        path,
    })
}

/// `[lits].all(v, p)` (accumulator `true`, step `acc && p`) is the conjunction of `p` over
/// the literals; `[lits].exists(v, p)` (`false`, `acc || p`) their disjunction.
fn comprehension_formula(parsed: &Locator<'_>, c: &ComprehensionExpr) -> Option<Formula> {
    if c.iter_var2.is_some() {
        return None;
    }
    let Expr::List(list) = &c.iter_range.expr else {
        return None;
    };
    let values: Option<Vec<&str>> = list
        .elements
        .iter()
        .map(|x| match &x.expr {
            Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
            _ => None,
        })
        .collect();
    let values = values?;
    let init = match &c.accu_init.expr {
        Expr::Literal(LiteralValue::Boolean(b)) => **b,
        _ => return None,
    };
    let Expr::Call(step) = &c.loop_step.expr else {
        return None;
    };
    let op = if init { "_&&_" } else { "_||_" };
    if step.func_name != op || step.args.len() != 2 || step.target.is_some() {
        return None;
    }
    let is_acc = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
    let pred = match (&step.args[0], &step.args[1]) {
        (a, p) if is_acc(a) => p,
        (p, a) if is_acc(a) => p,
        _ => return None,
    };
    let fs: Vec<Formula> = values
        .iter()
        .map(|v| formula_bound(parsed, pred, Some((c.iter_var.as_str(), v))))
        .collect();
    Some(if init {
        Formula::And(fs)
    } else {
        Formula::Or(fs)
    })
}

/// `guard && f`, sharing `guard` (most nodes inherit their parent's guard unchanged, so the
/// guards are shared rather than copied: the analysis stays linear in the expression's size).
fn conj(guard: &Arc<Formula>, fs: &[&Arc<Formula>]) -> Arc<Formula> {
    let unknown = fs.iter().any(|f| matches!(f.as_ref(), Formula::Unknown));
    let fs: Vec<&Arc<Formula>> = fs
        .iter()
        .copied()
        .filter(|f| !matches!(f.as_ref(), Formula::True | Formula::Unknown))
        .collect();
    match (guard.as_ref(), fs.as_slice()) {
        // Nothing known under no guard: not "always evaluated" (as `Formula::and`).
        (Formula::True, []) if unknown => Arc::new(Formula::Unknown),
        (_, []) => Arc::clone(guard),
        (Formula::True, [f]) => Arc::clone(f),
        (Formula::True, _) => Arc::new(Formula::And(
            fs.iter().map(|f| Formula::Shared(Arc::clone(f))).collect(),
        )),
        _ => Arc::new(Formula::And(
            std::iter::once(guard)
                .chain(fs)
                .map(|f| Formula::Shared(Arc::clone(f)))
                .collect(),
        )),
    }
}

/// Every node of `parsed` with the guard under which it is evaluated.
pub fn analyze(expr: &ParsedExpr) -> Guards {
    let loc = Locator::new(expr);
    let parsed = &loc;
    let mut nodes = Vec::new();
    let mut stack: Vec<(&IdedExpr, Arc<Formula>)> = vec![(expr.expr(), Arc::new(Formula::True))];
    while let Some((e, guard)) = stack.pop() {
        nodes.push(GuardedNode {
            pos: pos_of(parsed, e),
            guard: Arc::clone(&guard),
            has_test: matches!(&e.expr, Expr::Select(s) if s.test),
            operand_path: match &e.expr {
                Expr::Select(s) if !s.test => object_path(&s.operand),
                _ => None,
            },
            optional_select: is_optional_select(e),
            variable: match &e.expr {
                Expr::Select(s)
                    if !s.test && matches!(&s.operand.expr, Expr::Ident(n) if n == "variables") =>
                {
                    Some(s.field.clone())
                }
                _ => None,
            },
            variables_ident: matches!(&e.expr, Expr::Ident(n) if n == "variables"),
        });
        match &e.expr {
            Expr::Call(c)
                if c.target.is_none()
                    && (c.func_name == "_&&_" || c.func_name == "_||_")
                    && c.args.len() >= 2 =>
            {
                let and = c.func_name == "_&&_";
                let fs: Vec<Arc<Formula>> = c
                    .args
                    .iter()
                    .map(|a| {
                        let f = formula(parsed, a);
                        Arc::new(if and { f } else { f.negate() })
                    })
                    .collect();
                for (i, a) in c.args.iter().enumerate() {
                    let others: Vec<&Arc<Formula>> = fs
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, f)| f)
                        .collect();
                    stack.push((a, conj(&guard, &others)));
                }
            }
            Expr::Call(c) if c.target.is_none() && c.func_name == "_?_:_" && c.args.len() == 3 => {
                let f = formula(parsed, &c.args[0]);
                let not_f = Arc::new(f.clone().negate());
                let f = Arc::new(f);
                stack.push((&c.args[0], Arc::clone(&guard)));
                stack.push((&c.args[1], conj(&guard, &[&f])));
                stack.push((&c.args[2], conj(&guard, &[&not_f])));
            }
            _ => {
                for ch in children(e) {
                    stack.push((ch, Arc::clone(&guard)));
                }
            }
        }
    }
    Guards {
        nodes,
        root: formula(parsed, expr.expr()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::narrowing::{Presence, Truth};

    fn guard_at(g: &Guards, column: usize) -> Vec<&Formula> {
        g.nodes
            .iter()
            .filter(|n| n.pos == Some(Pos { line: 1, column }))
            .map(|n| &*n.guard)
            .collect()
    }

    #[test]
    fn kind_guards_of_ternary_and_logic() {
        let text = "object.kind == 'Pod' ? object.spec.a : object.spec.b";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let a = text.find(".a").unwrap();
        let b = text.find(".b").unwrap();
        for f in guard_at(&g, a) {
            assert_eq!(f.eval("Pod", &[]), Truth::True);
            assert_eq!(f.eval("Deployment", &[]), Truth::False);
        }
        for f in guard_at(&g, b) {
            assert_eq!(f.eval("Pod", &[]), Truth::False);
        }
        assert!(!guard_at(&g, a).is_empty() && !guard_at(&g, b).is_empty());

        let text = "request.kind.kind != 'Pod' || object.spec.a";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let a = text.find(".a").unwrap();
        for f in guard_at(&g, a) {
            assert_eq!(f.eval("Deployment", &[]), Truth::False);
            assert_eq!(f.eval("Pod", &[]), Truth::True);
        }

        let text = "object.kind in ['Job', 'CronJob'] && object.spec.a";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let a = text.find(".a").unwrap();
        for f in guard_at(&g, a) {
            assert_eq!(f.eval("Pod", &[]), Truth::False);
            assert_eq!(f.eval("Job", &[]), Truth::True);
        }
    }

    #[test]
    fn kind_lists_in_all_and_exists() {
        for text in [
            "['Deployment', 'Job'].all(k, object.kind != k) || object.spec.a",
            "!['Deployment', 'Job'].exists(k, k == object.kind) || object.spec.a",
        ] {
            let p = crate::cel::parse(text).unwrap();
            let g = analyze(&p);
            let a = text.rfind(".a").unwrap();
            assert!(!guard_at(&g, a).is_empty());
            for f in guard_at(&g, a) {
                assert_eq!(f.eval("Pod", &[]), Truth::False, "{text}");
                assert_eq!(f.eval("Job", &[]), Truth::True, "{text}");
            }
        }
    }

    #[test]
    fn has_guards_and_presence_tests() {
        let text = "has(object.spec.template) && object.spec.template.x";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let tests: Vec<&GuardedNode> = g.nodes.iter().filter(|n| n.has_test).collect();
        assert_eq!(tests.len(), 1);
        let has_pos = tests[0].pos.unwrap();
        let x = text.rfind(".template").unwrap();
        for f in guard_at(&g, x) {
            assert_eq!(f.eval("Pod", &[has_pos]), Truth::False);
            assert_eq!(f.eval("Deployment", &[]), Truth::Unknown);
        }
    }

    #[test]
    fn negative_has_of_a_required_field() {
        use crate::policy::narrowing::Facts;
        let text = "!has(object.spec.template) && object.spec.containers.size() > 0";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let c = text.find(".containers").unwrap();
        let nodes: Vec<&GuardedNode> = g
            .nodes
            .iter()
            .filter(|n| n.pos == Some(Pos { line: 1, column: c }))
            .collect();
        assert_eq!(nodes.len(), 1);
        let node = nodes[0];
        assert_eq!(
            node.operand_path.as_deref(),
            Some(&["object".to_owned(), "spec".to_owned()][..])
        );
        let template_required = |path: &[String]| {
            if path == ["spec", "template"] {
                Presence::Required
            } else {
                Presence::Unknown
            }
        };
        let facts = |presence: &dyn Fn(&[String]) -> Presence| {
            node.guard.eval_in(&Facts {
                kind: "Deployment",
                group_version: Some(("apps", "v1")),
                errors: &[],
                presence,
                node_operand: node.operand_path.as_deref(),
            })
        };
        assert_eq!(facts(&template_required), Truth::False);
        assert_eq!(facts(&|_| Presence::Unknown), Truth::Unknown);
        // A node that does not read through `object.spec` is not narrowed: `spec` itself may
        // be missing, and then `has()` is an error, not false.
        let text = "!has(object.spec.template) && object.metadata.x == 'a'";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let x = text.find(".x").unwrap();
        for n in g
            .nodes
            .iter()
            .filter(|n| n.pos == Some(Pos { line: 1, column: x }))
        {
            let t = n.guard.eval_in(&Facts {
                kind: "Deployment",
                group_version: Some(("apps", "v1")),
                errors: &[],
                presence: &template_required,
                node_operand: n.operand_path.as_deref(),
            });
            assert_eq!(t, Truth::Unknown);
        }
    }

    #[test]
    fn api_version_and_request_kind_guards() {
        use crate::policy::narrowing::Facts;
        for text in [
            "object.apiVersion == 'apps/v1' ? object.spec.a : true",
            "request.kind.group == 'apps' && object.spec.a",
            "request.kind.version in ['v1'] && request.kind.group != '' && object.spec.a",
        ] {
            let p = crate::cel::parse(text).unwrap();
            let g = analyze(&p);
            let a = text.rfind(".a").unwrap();
            let nodes: Vec<&GuardedNode> = g
                .nodes
                .iter()
                .filter(|n| n.pos == Some(Pos { line: 1, column: a }))
                .collect();
            assert_eq!(nodes.len(), 1, "{text}");
            let at = |kind: &str, group: &str, version: &str| {
                nodes[0].guard.eval_in(&Facts {
                    kind,
                    group_version: Some((group, version)),
                    errors: &[],
                    presence: &|_| Presence::Unknown,
                    node_operand: None,
                })
            };
            assert_eq!(at("Pod", "", "v1"), Truth::False, "{text}");
            assert_eq!(at("Deployment", "apps", "v1"), Truth::True, "{text}");
            // Without the group and version nothing is known.
            assert_eq!(nodes[0].guard.eval("Pod", &[]), Truth::Unknown, "{text}");
        }
        // `v1` is the core group's apiVersion only.
        let p = crate::cel::parse("object.apiVersion == 'v1'").unwrap();
        let g = analyze(&p);
        let facts = |group: &'static str| Facts {
            kind: "X",
            group_version: Some((group, "v1")),
            errors: &[],
            presence: &|_| Presence::Unknown,
            node_operand: None,
        };
        assert_eq!(g.root.eval_in(&facts("")), Truth::True);
        assert_eq!(g.root.eval_in(&facts("apps")), Truth::False);
    }

    /// Every guard form of issue 14, alone and under `&&`, `||`, `!` and `?:`: the guard of
    /// the node `object.spec.template.x` (the `.x` selection, or `.containers` where noted)
    /// for a Pod (no `spec.template`, no `spec.paused`: the checker reports those fields
    /// undefined where they are selected) and a Deployment (`spec.template` required).
    #[test]
    fn every_guard_form() {
        use crate::policy::narrowing::{Facts, Presence};
        use Truth::{False, True, Unknown};
        // (expression, node marker (last occurrence), Pod, Deployment)
        let cases: &[(&str, &str, Truth, Truth)] = &[
            (
                "object.kind == 'Deployment' && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "object.kind != 'Deployment' || object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "!(object.kind == 'Deployment') ? true : object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "object.kind in ['Deployment', 'Job'] ? object.spec.template.x : true",
                ".x",
                False,
                True,
            ),
            (
                "request.kind.kind == 'Deployment' ? object.spec.template.x : true",
                ".x",
                False,
                True,
            ),
            (
                "oldObject.kind == 'Deployment' && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "object.apiVersion == 'apps/v1' && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "request.kind.group != 'apps' || object.spec.template.x",
                ".x",
                False,
                True,
            ),
            // has(): false where the field is undefined; true where it is required.
            (
                "has(object.spec.template) && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "!has(object.spec.template) || object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "has(object.spec.template) ? object.spec.template.x : true",
                ".x",
                False,
                True,
            ),
            (
                "!has(object.spec.template) ? true : object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "!has(object.spec.template) && object.spec.containers",
                ".containers",
                True,
                False,
            ),
            // oldObject: the same, on paths through oldObject only.
            (
                "!has(oldObject.spec.template) && oldObject.spec.containers",
                ".containers",
                True,
                False,
            ),
            (
                "!has(oldObject.spec.template) && object.spec.containers",
                ".containers",
                True,
                Unknown,
            ),
            (
                "has(oldObject.spec.template) && object.spec.template.x",
                ".x",
                False,
                Unknown,
            ),
            // Optional chains: false where a field of the chain is undefined.
            (
                "object.?spec.template.hasValue() && object.spec.template.x",
                ".x",
                False,
                Unknown,
            ),
            (
                "!object.?spec.template.hasValue() || object.spec.template.x",
                ".x",
                False,
                Unknown,
            ),
            (
                "object.?spec.?template.hasValue() ? object.spec.template.x : true",
                ".x",
                False,
                Unknown,
            ),
            (
                "!object.?spec.?template.hasValue() ? true : object.spec.template.x",
                ".x",
                False,
                Unknown,
            ),
            (
                "object.?spec.paused.orValue(false) ? object.spec.template.x : true",
                ".x",
                False,
                Unknown,
            ),
            (
                "object.?spec.paused.orValue(true) ? true : object.spec.template.x",
                ".x",
                False,
                Unknown,
            ),
            (
                "object.?spec.paused.orValue(true) ? object.spec.template.x : true",
                ".x",
                True,
                Unknown,
            ),
            (
                "object.?spec.paused.orValue(x) ? object.spec.template.x : true",
                ".x",
                Unknown,
                Unknown,
            ),
            // Map-key tests: false where the schema has no such property; true where required.
            (
                "'template' in object.spec && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "!('template' in object.spec) || object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "'template' in object.spec ? object.spec.template.x : true",
                ".x",
                False,
                True,
            ),
            (
                "['template'].exists(k, k in object.spec) && object.spec.template.x",
                ".x",
                False,
                True,
            ),
            (
                "!('template' in object.spec) && object.spec.containers",
                ".containers",
                True,
                False,
            ),
            (
                "'template' in object.metadata.labels && object.spec.template.x",
                ".x",
                Unknown,
                Unknown,
            ),
            // Combinations.
            (
                "object.kind == 'Pod' || (has(object.spec.template) && object.spec.template.x)",
                ".x",
                False,
                True,
            ),
            (
                "object.kind == 'Deployment' ? (has(object.spec.template) ? object.spec.template.x : true) : true",
                ".x",
                False,
                True,
            ),
            ("x || object.spec.template.x", ".x", Unknown, Unknown),
        ];
        for &(text, marker, pod, deployment) in cases {
            let p = crate::cel::parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            let g = analyze(&p);
            let column = text.rfind(marker).unwrap();
            let nodes: Vec<&GuardedNode> = g
                .nodes
                .iter()
                .filter(|n| n.pos == Some(Pos { line: 1, column }))
                .collect();
            assert_eq!(nodes.len(), 1, "{text}");
            let node = nodes[0];
            // A Pod: the checker reports `template` and `paused` undefined at the presence
            // tests and optional selections that name them.
            let pod_errors: Vec<Pos> = ["(object.spec.template)", "(oldObject.spec.template)"]
                .iter()
                .filter_map(|m| text.find(m))
                .chain(
                    [".template.hasValue", ".?template", ".paused"]
                        .iter()
                        .filter_map(|m| text.find(m)),
                )
                .map(|column| Pos { line: 1, column })
                .collect();
            let pod_presence = |path: &[String]| match path {
                [s, t] if s == "spec" && (t == "template" || t == "paused") => Presence::Absent,
                _ => Presence::Unknown,
            };
            let deployment_presence = |path: &[String]| match path {
                [s, t] if s == "spec" && t == "template" => Presence::Required,
                _ => Presence::Unknown,
            };
            let at = |kind: &str,
                      group: &str,
                      errors: &[Pos],
                      presence: &dyn Fn(&[String]) -> Presence| {
                node.guard.eval_in(&Facts {
                    kind,
                    group_version: Some((group, "v1")),
                    errors,
                    presence,
                    node_operand: node.operand_path.as_deref(),
                })
            };
            assert_eq!(
                at("Pod", "", &pod_errors, &pod_presence),
                pod,
                "Pod: {text}"
            );
            assert_eq!(
                at("Deployment", "apps", &[], &deployment_presence),
                deployment,
                "Deployment: {text}"
            );
        }
    }

    /// matchConditions: the formula of a whole expression ([`Guards::root`]).
    #[test]
    fn match_condition_formulas() {
        use crate::policy::narrowing::{Facts, Presence};
        for (text, pod, deployment) in [
            (
                "request.kind.kind == 'Deployment'",
                Truth::False,
                Truth::True,
            ),
            (
                "object.kind != 'Pod' && request.kind.group == 'apps'",
                Truth::False,
                Truth::True,
            ),
            ("!(object.kind in ['Pod'])", Truth::False, Truth::True),
            ("has(object.spec.template)", Truth::False, Truth::Unknown),
            (
                "object.?spec.template.hasValue()",
                Truth::False,
                Truth::Unknown,
            ),
            ("'template' in object.spec", Truth::False, Truth::Unknown),
            (
                "request.kind.kind == 'Pod' ? false : true",
                Truth::Unknown,
                Truth::Unknown,
            ),
        ] {
            let p = crate::cel::parse(text).unwrap();
            let g = analyze(&p);
            let pod_errors: Vec<Pos> = ["(object.spec.template)", ".template.hasValue"]
                .iter()
                .filter_map(|m| text.find(m))
                .map(|column| Pos { line: 1, column })
                .collect();
            let absent = |path: &[String]| {
                if path == ["spec", "template"] {
                    Presence::Absent
                } else {
                    Presence::Unknown
                }
            };
            let pod_facts = Facts {
                kind: "Pod",
                group_version: Some(("", "v1")),
                errors: &pod_errors,
                presence: &absent,
                node_operand: None,
            };
            let deployment_facts = Facts {
                kind: "Deployment",
                group_version: Some(("apps", "v1")),
                errors: &[],
                presence: &|_| Presence::Unknown,
                node_operand: None,
            };
            assert_eq!(g.root.eval_in(&pod_facts), pod, "Pod: {text}");
            assert_eq!(
                g.root.eval_in(&deployment_facts),
                deployment,
                "Deployment: {text}"
            );
        }
    }

    #[test]
    fn optional_selections_are_marked() {
        let text = "object.?spec.template.x.orValue(1) + object.spec.y";
        let p = crate::cel::parse(text).unwrap();
        let g = analyze(&p);
        let at = |column: usize| {
            g.nodes
                .iter()
                .filter(|n| n.pos == Some(Pos { line: 1, column }))
                .any(|n| n.optional_select)
        };
        assert!(at(text.find(".?spec").unwrap()));
        assert!(at(text.find(".template").unwrap()));
        assert!(at(text.find(".x").unwrap()));
        assert!(!at(text.rfind(".spec").unwrap()));
        assert!(!at(text.find(".y").unwrap()));
    }

    /// The positions of the fast path are `ParsedExpr::location`'s (ASCII, several lines),
    /// and non-ASCII text takes `location` itself.
    #[test]
    fn positions_agree_with_the_parser() {
        for text in [
            "object.kind == 'Pod' &&\n  has(object.spec.template) ?\n object.?spec.x.orValue(1) : 2",
            "'é' == object.metadata.name && object.spec.x",
        ] {
            let p = crate::cel::parse(text).unwrap();
            let loc = Locator::new(&p);
            assert_eq!(loc.ascii_line_starts.is_some(), text.is_ascii());
            let mut stack = vec![p.expr()];
            let mut n = 0;
            while let Some(e) = stack.pop() {
                let want = p.location(e.id).map(|l| Pos {
                    line: l.line,
                    column: l.column,
                });
                assert_eq!(loc.pos(e), want, "{text}");
                n += 1;
                stack.extend(children(e));
            }
            assert!(n > 5);
        }
    }
}
