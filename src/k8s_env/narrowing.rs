//! Kind narrowing over a parsed expression: the guard under which CEL evaluates each node.
//!
//! Read-only over the AST; the cel-go-compatible checker is not involved. The rules follow
//! cel-go's evaluation (interpreter/interpretable.go, v0.29): `_&&_` and `_||_` are
//! commutative with respect to errors (`false && error` and `error && false` are both
//! `false`), so each operand of `a && b` is evaluated only where it can matter: `a` under `b`,
//! `b` under `a`; of `a || b`, each under the other's negation. `c ? x : y` evaluates `x`
//! only when `c`, `y` only when `!c`. Atoms: `object.kind`, `oldObject.kind` and
//! `request.kind.kind` compared with a string literal (`==`, `!=`, `in [...]`), and `has()`.

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, LiteralValue};

use crate::cel::ParsedExpr;
use crate::cel::parse::children;
use crate::policy::narrowing::{Atom, Formula, GuardedNode, Guards, GvkPart, Pos};

fn pos_of(parsed: &ParsedExpr, e: &IdedExpr) -> Option<Pos> {
    parsed.location(e.id).map(|l| Pos {
        line: l.line,
        column: l.column,
    })
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

/// `object.a.b` (plain field selections from `object`): `[a, b]`.
fn object_path(e: &IdedExpr) -> Option<Vec<String>> {
    match &e.expr {
        Expr::Ident(name) if name == "object" => Some(Vec::new()),
        Expr::Select(s) if !s.test => {
            let mut p = object_path(&s.operand)?;
            p.push(s.field.clone());
            Some(p)
        }
        _ => None,
    }
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
fn subtree_positions(parsed: &ParsedExpr, e: &IdedExpr) -> Vec<Pos> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(n) = stack.pop() {
        out.extend(pos_of(parsed, n));
        stack.extend(children(n));
    }
    out
}

/// What the analysis knows about the value of a boolean expression.
fn formula(parsed: &ParsedExpr, e: &IdedExpr) -> Formula {
    formula_bound(parsed, e, None)
}

/// [`formula`] with a comprehension variable bound to a string (for
/// `['A', 'B'].all(k, object.kind != k)` and `.exists(k, object.kind == k)`).
fn formula_bound(parsed: &ParsedExpr, e: &IdedExpr, bind: Option<(&str, &str)>) -> Formula {
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
                    _ => Formula::Unknown,
                },
                _ => Formula::Unknown,
            }
        }
        Expr::Comprehension(c) => comprehension_formula(parsed, c).unwrap_or(Formula::Unknown),
        _ => Formula::Unknown,
    }
}

/// `[lits].all(v, p)` (accumulator `true`, step `acc && p`) is the conjunction of `p` over
/// the literals; `[lits].exists(v, p)` (`false`, `acc || p`) their disjunction.
fn comprehension_formula(parsed: &ParsedExpr, c: &ComprehensionExpr) -> Option<Formula> {
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

/// Every node of `parsed` with the guard under which it is evaluated.
pub fn analyze(parsed: &ParsedExpr) -> Guards {
    let mut nodes = Vec::new();
    let mut stack: Vec<(&IdedExpr, Formula)> = vec![(parsed.expr(), Formula::True)];
    while let Some((e, guard)) = stack.pop() {
        nodes.push(GuardedNode {
            pos: pos_of(parsed, e),
            guard: guard.clone(),
            has_test: matches!(&e.expr, Expr::Select(s) if s.test),
            operand_path: match &e.expr {
                Expr::Select(s) if !s.test => object_path(&s.operand),
                _ => None,
            },
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
                let fs: Vec<Formula> = c
                    .args
                    .iter()
                    .map(|a| {
                        let f = formula(parsed, a);
                        if and { f } else { f.negate() }
                    })
                    .collect();
                for (i, a) in c.args.iter().enumerate() {
                    let mut g = guard.clone();
                    for (j, f) in fs.iter().enumerate() {
                        if i != j {
                            g = g.and(f.clone());
                        }
                    }
                    stack.push((a, g));
                }
            }
            Expr::Call(c) if c.target.is_none() && c.func_name == "_?_:_" && c.args.len() == 3 => {
                let f = formula(parsed, &c.args[0]);
                stack.push((&c.args[0], guard.clone()));
                stack.push((&c.args[1], guard.clone().and(f.clone())));
                stack.push((&c.args[2], guard.and(f.negate())));
            }
            _ => {
                for ch in children(e) {
                    stack.push((ch, guard.clone()));
                }
            }
        }
    }
    Guards {
        nodes,
        root: formula(parsed, parsed.expr()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::narrowing::Truth;

    fn guard_at(g: &Guards, column: usize) -> Vec<&Formula> {
        g.nodes
            .iter()
            .filter(|n| n.pos == Some(Pos { line: 1, column }))
            .map(|n| &n.guard)
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
        assert_eq!(node.operand_path.as_deref(), Some(&["spec".to_owned()][..]));
        let template_required = |path: &[String]| path == ["spec", "template"];
        let facts = |required: &dyn Fn(&[String]) -> bool| {
            node.guard.eval_in(&Facts {
                kind: "Deployment",
                group_version: Some(("apps", "v1")),
                errors: &[],
                required,
                node_operand: node.operand_path.as_deref(),
            })
        };
        assert_eq!(facts(&template_required), Truth::False);
        assert_eq!(facts(&|_| false), Truth::Unknown);
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
                required: &template_required,
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
                    required: &|_| false,
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
            required: &|_| false,
            node_operand: None,
        };
        assert_eq!(g.root.eval_in(&facts("")), Truth::True);
        assert_eq!(g.root.eval_in(&facts("apps")), Truth::False);
    }
}
