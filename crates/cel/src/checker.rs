//! The type checker, following cel-go v0.29.2 `checker/checker.go` and `checker/types.go`:
//! the same unification and assignability rules, `dyn` handling, type substitution, overload
//! resolution order and error reporting (templates of `checker/errors.go`).
//!
//! The checker recurses over the AST. The depth it may reach is bounded by
//! [`MAX_CHECK_DEPTH`], enforced before checking starts, so it cannot overflow the stack.

use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::env::{Env, FastMap, FunctionDecl, OverloadDecl};
use super::errors::{Issues, Location};
use super::macros::{MacroChecker, Synth, SynthComprehension};
use super::parse::ParsedExpr;
use super::types::{Kind, ObjectRenaming, Type, TypeKind};

/// The deepest AST the checker accepts (nodes on the longest root-to-leaf path). Deeper
/// expressions get one error instead of being checked (cel-go has no such limit; real
/// expressions are far below it).
pub const MAX_CHECK_DEPTH: usize = 1000;

/// cel-go checker/env.go crossTypeNumericComparisonOverloads: filtered out unless the
/// CrossTypeNumericComparisons option is on.
const CROSS_TYPE_NUMERIC_OVERLOADS: &[&str] = &[
    "less_double_int64",
    "less_double_uint64",
    "less_equals_double_int64",
    "less_equals_double_uint64",
    "greater_double_int64",
    "greater_double_uint64",
    "greater_equals_double_int64",
    "greater_equals_double_uint64",
    "less_int64_double",
    "less_int64_uint64",
    "less_equals_int64_double",
    "less_equals_int64_uint64",
    "greater_int64_double",
    "greater_int64_uint64",
    "greater_equals_int64_double",
    "greater_equals_int64_uint64",
    "less_uint64_double",
    "less_uint64_int64",
    "less_equals_uint64_double",
    "less_equals_uint64_int64",
    "greater_uint64_double",
    "greater_uint64_int64",
    "greater_equals_uint64_double",
    "greater_equals_uint64_int64",
];

/// The result of checking: the type of every node (by expression id) and of the whole
/// expression.
#[derive(Clone, Debug)]
pub struct CheckedTypes {
    types: Vec<Option<Type>>,
    result: Type,
    /// The overload ids of every matching overload of each resolved call (cel-go's reference
    /// map, `ast.AST.GetOverloadIDs`), by call id.
    overloads: FastMap<u64, Vec<Arc<str>>>,
    /// Member-shaped calls resolved as a qualified global function (`strings.quote(x)`):
    /// cel-go rewrites them into global calls.
    qualified_calls: FastMap<u64, Arc<str>>,
}

/// Whether two maps are equal; first walking them side by side, which decides without a
/// lookup when they were filled in the same order (the same expression checked twice), then
/// by lookups.
fn same_map<V: PartialEq>(a: &FastMap<u64, V>, b: &FastMap<u64, V>) -> bool {
    a.len() == b.len()
        && (a
            .iter()
            .zip(b)
            .all(|((k1, v1), (k2, v2))| k1 == k2 && v1 == v2)
            || a == b)
}

impl CheckedTypes {
    /// The deduced type of the whole expression.
    pub fn result_type(&self) -> &Type {
        &self.result
    }

    /// The deduced type of the node with expression id `id`, if the checker typed it.
    pub fn type_of(&self, id: u64) -> Option<&Type> {
        self.types.get(usize::try_from(id).ok()?)?.as_ref()
    }

    /// The ids of the overloads that matched the call with id `id`, in declaration order
    /// (cel-go `ast.AST.GetOverloadIDs`); empty if the node is not a resolved function call.
    /// For a call-shaped macro the list holds what the calls of its synthetic expansion
    /// matched (they are typed at the macro call's id), which is not meaningful on its own.
    pub fn overload_ids(&self, id: u64) -> &[Arc<str>] {
        self.overloads.get(&id).map_or(&[], |v| v.as_slice())
    }

    /// The qualified function name when the member-shaped call `id` was resolved as a global
    /// function of that name (cel-go rewrites `strings.quote(x)` into a global call).
    pub fn qualified_call(&self, id: u64) -> Option<&str> {
        self.qualified_calls.get(&id).map(|s| &**s)
    }

    /// Whether `other` types the same expression as `self` up to the names of object types:
    /// the same overloads and qualified calls for every call, and for every node the same type
    /// once object names are renamed one to one ([`ObjectRenaming`]; `keep` lists the names
    /// that must not be renamed). Used to reuse a cost estimate across the kinds of a policy
    /// (docs/cost.md): the estimator reads types only through their structure, equality between
    /// types and the names `keep` lists.
    pub fn same_up_to_object_names(
        &self,
        other: &CheckedTypes,
        keep: &dyn Fn(&str) -> bool,
    ) -> bool {
        if self.types.len() != other.types.len()
            || !same_map(&self.overloads, &other.overloads)
            || !same_map(&self.qualified_calls, &other.qualified_calls)
        {
            return false;
        }
        let mut names = ObjectRenaming::default();
        self.types
            .iter()
            .zip(&other.types)
            .all(|(a, b)| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => names.same(a, b, keep),
                _ => false,
            })
            && names.same(&self.result, &other.result, keep)
    }

    /// All (id, type) pairs in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Type)> {
        self.types
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().map(|t| (i as u64, t)))
    }
}

#[derive(Default)]
struct Mapping {
    map: super::env::FastMap<Arc<str>, Type>,
    trail: Vec<(Arc<str>, Option<Type>)>,
}

impl Mapping {
    fn find(&self, t: &Type) -> Option<&Type> {
        match t.type_kind() {
            TypeKind::TypeParam(n) => self.map.get(n),
            _ => None,
        }
    }

    fn add(&mut self, from: &Type, to: Type) {
        if let TypeKind::TypeParam(n) = from.type_kind() {
            let old = self.map.insert(n.clone(), to);
            self.trail.push((n.clone(), old));
        }
    }

    fn rollback(&mut self, mark: usize) {
        while self.trail.len() > mark {
            if let Some((k, old)) = self.trail.pop() {
                match old {
                    Some(v) => {
                        self.map.insert(k, v);
                    }
                    None => {
                        self.map.remove(&k);
                    }
                }
            }
        }
    }
}

/// The checker state. Public so that [`CallMacro`] implementations can drive it.
pub struct Checker<'a> {
    env: &'a Env,
    parsed: &'a ParsedExpr,
    issues: Issues,
    types: Vec<Option<Type>>,
    mapping: Mapping,
    free_type_var_counter: usize,
    locals: Vec<Vec<(String, Type)>>,
    filter_cross_type_numeric: bool,
    overloads: FastMap<u64, Vec<Arc<str>>>,
    qualified_calls: FastMap<u64, Arc<str>>,
}

/// Type-checks a parsed expression against `env` (cel-go `checker.Check`). Returns the types
/// and the errors (empty when the expression is well typed).
pub fn check(env: &Env, parsed: &ParsedExpr) -> (CheckedTypes, Issues) {
    let mut c = Checker {
        env,
        parsed,
        issues: Issues::new(parsed.source().clone()),
        types: vec![None; parsed.max_id().saturating_add(1).min(1 << 24) as usize],
        mapping: Mapping::default(),
        free_type_var_counter: 0,
        locals: Vec::new(),
        filter_cross_type_numeric: !env.options().cross_type_numeric_comparisons,
        overloads: FastMap::default(),
        qualified_calls: FastMap::default(),
    };
    if parsed.depth() > MAX_CHECK_DEPTH {
        c.issues.report(
            None,
            0,
            format!("expression nesting exceeds the type checker limit of {MAX_CHECK_DEPTH}"),
        );
        let types = CheckedTypes {
            types: Vec::new(),
            result: Type::error(),
            overloads: FastMap::default(),
            qualified_calls: FastMap::default(),
        };
        return (types, c.issues);
    }
    let root = parsed.expr();
    c.check(root);
    // cel-go: substitute every type, binding free type parameters to dyn.
    let mut types = std::mem::take(&mut c.types);
    for t in types.iter_mut().flatten() {
        *t = c.substitute(t, true);
    }
    let result = types
        .get(root.id as usize)
        .and_then(|t| t.clone())
        .unwrap_or_else(Type::error);
    let (overloads, qualified_calls) = (c.overloads, c.qualified_calls);
    (
        CheckedTypes {
            types,
            result,
            overloads,
            qualified_calls,
        },
        c.issues,
    )
}

fn literal_type(l: &LiteralValue) -> Type {
    match l {
        LiteralValue::Boolean(_) => Type::bool(),
        LiteralValue::Bytes(_) => Type::bytes(),
        LiteralValue::Double(_) => Type::double(),
        LiteralValue::Int(_) => Type::int(),
        LiteralValue::Null => Type::null(),
        LiteralValue::String(_) => Type::string(),
        LiteralValue::UInt(_) => Type::uint(),
    }
}

/// cel-go `containers.ToQualifiedName`.
fn to_qualified_name(e: &IdedExpr) -> Option<String> {
    match &e.expr {
        Expr::Ident(n) => Some(n.clone()),
        Expr::Select(s) if !s.test => {
            let prefix = to_qualified_name(&s.operand)?;
            Some(format!("{prefix}.{}", s.field))
        }
        _ => None,
    }
}

/// The string value of a string literal node.
pub fn string_literal(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

fn is_equal_or_less_specific(t1: &Type, t2: &Type) -> bool {
    let (k1, k2) = (t1.kind(), t2.kind());
    if t1.is_dyn() || k1 == Kind::TypeParam {
        return true;
    }
    if t2.is_dyn() || k2 == Kind::TypeParam {
        return false;
    }
    if k1 != k2 {
        return false;
    }
    match k1 {
        Kind::Opaque => {
            t1.type_name() == t2.type_name()
                && t1.param_count() == t2.param_count()
                && (0..t1.param_count()).all(|i| match (t1.param(i), t2.param(i)) {
                    (Some(a), Some(b)) => is_equal_or_less_specific(a, b),
                    _ => false,
                })
        }
        Kind::List | Kind::Map => (0..t1.param_count()).all(|i| match (t1.param(i), t2.param(i)) {
            (Some(a), Some(b)) => is_equal_or_less_specific(a, b),
            _ => false,
        }),
        Kind::Type => true,
        _ => t1.is_exact(t2),
    }
}

fn most_general(t1: &Type, t2: &Type) -> Type {
    if is_equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

fn is_legacy_nullable(t: &Type) -> bool {
    matches!(
        t.kind(),
        Kind::Opaque | Kind::Struct | Kind::Any | Kind::Duration | Kind::Timestamp
    )
}

fn is_assignable_null(t: &Type) -> bool {
    is_legacy_nullable(t) || t.is_assignable_from(&Type::null())
}

/// Formats argument types as in cel-go `formatFunctionDeclType` without a result type.
fn format_call_signature(arg_types: &[Type], is_instance: bool) -> String {
    let mut out = String::new();
    let mut args = arg_types;
    if is_instance && let Some((first, rest)) = arg_types.split_first() {
        out.push_str(&first.to_string());
        out.push('.');
        args = rest;
    }
    out.push('(');
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&a.to_string());
    }
    out.push(')');
    out
}

impl<'a> Checker<'a> {
    // ----- public helpers for call macros -----

    /// The environment being checked against.
    pub fn env(&self) -> &'a Env {
        self.env
    }

    /// The location (for error reports) of the node `id`.
    pub fn location(&self, id: u64) -> Option<Location> {
        self.parsed.location(id)
    }

    /// Reports an error at the location of node `id`.
    pub fn report(&mut self, id: u64, message: String) {
        let loc = self.location(id);
        self.issues.report(loc, id, message);
    }

    /// Checks a real AST node and returns its (unsubstituted) type.
    pub fn check_expr(&mut self, e: &IdedExpr) -> Type {
        self.check(e);
        self.get_type(e.id)
    }

    /// cel-go `substitute`: replaces bound type parameters (and unbound ones by `dyn` when
    /// `type_param_to_dyn`).
    pub fn substitute(&self, t: &Type, type_param_to_dyn: bool) -> Type {
        self.substitute_depth(t, type_param_to_dyn, 0)
    }

    /// cel-go `isAssignable`: whether `t2` may be used as `t1`, updating type substitutions on
    /// success.
    pub fn is_assignable(&mut self, t1: &Type, t2: &Type) -> bool {
        let mark = self.mapping.trail.len();
        if self.internal_is_assignable(t1, t2) {
            self.mapping.trail.truncate(mark);
            true
        } else {
            self.mapping.rollback(mark);
            false
        }
    }

    /// A fresh type variable `_varN`.
    pub fn new_type_var(&mut self) -> Type {
        /// `_var0` .. `_var255`, built once.
        static CACHE: LazyLock<Vec<Type>> = LazyLock::new(|| {
            (0..256)
                .map(|i| Type::type_param(format!("_var{i}")))
                .collect()
        });
        let n = self.free_type_var_counter;
        self.free_type_var_counter += 1;
        match CACHE.get(n) {
            Some(t) => t.clone(),
            None => Type::type_param(format!("_var{n}")),
        }
    }

    /// Types a comprehension built from synthetic parts, exactly like a parsed one; errors on
    /// synthetic parts are reported at `loc_id`.
    pub fn check_synth_comprehension(
        &mut self,
        loc_id: u64,
        comp: &SynthComprehension<'_>,
    ) -> Type {
        let range_t = self.check_synth(loc_id, &comp.iter_range);
        let accu_t = self.check_synth(loc_id, &comp.accu_init);
        let range_t = self.substitute(&range_t, false);
        let range_id = match &comp.iter_range {
            Synth::Real(e) => e.id,
            _ => loc_id,
        };
        self.enter_scope();
        self.add_local(&comp.accu_var, accu_t.clone());
        let (v1, v2) = self.comprehension_var_types(range_id, &range_t, comp.iter_var2.is_some());
        self.enter_scope();
        self.add_local(&comp.iter_var, v1);
        if let (Some(n), Some(t)) = (&comp.iter_var2, v2) {
            self.add_local(n, t);
        }
        let cond_t = self.check_synth(loc_id, &comp.loop_cond);
        let cond_id = synth_id(&comp.loop_cond, loc_id);
        self.assert_type(cond_id, &Type::bool(), &cond_t);
        let step_t = self.check_synth(loc_id, &comp.loop_step);
        let step_id = synth_id(&comp.loop_step, loc_id);
        self.assert_type(step_id, &accu_t, &step_t);
        self.exit_scope();
        let result_t = self.check_synth(loc_id, &comp.result);
        self.exit_scope();
        self.substitute(&result_t, false)
    }

    /// Types a synthetic expression (see [`Synth`]).
    pub fn check_synth(&mut self, loc_id: u64, s: &Synth<'_>) -> Type {
        match s {
            Synth::Real(e) => self.check_expr(e),
            Synth::Literal(t) => t.clone(),
            Synth::Ident(name) => match self.resolve_simple_ident(name) {
                Some(t) => t,
                None => {
                    let msg = self.undeclared(name);
                    self.report(loc_id, msg);
                    Type::error()
                }
            },
            Synth::List(elems) => {
                let mut elems_t: Option<Type> = None;
                for el in elems {
                    let t = self.check_synth(loc_id, el);
                    elems_t = Some(self.join_types(elems_t, t));
                }
                let elem = match elems_t {
                    Some(t) => t,
                    None => self.new_type_var(),
                };
                Type::list(elem)
            }
            Synth::Comprehension(c) => self.check_synth_comprehension(loc_id, c),
            Synth::EmptyMap => {
                let k = self.new_type_var();
                let v = self.new_type_var();
                Type::map(k, v)
            }
            Synth::Call(name, args) | Synth::MemberCall(name, args) => {
                let member = matches!(s, Synth::MemberCall(..));
                let mut arg_info = Vec::with_capacity(args.len());
                for a in args {
                    let t = self.check_synth(loc_id, a);
                    arg_info.push((synth_id(a, loc_id), t));
                }
                match self.lookup_function(name) {
                    Some(f) => self
                        .resolve_overload(loc_id, f, member, &arg_info)
                        .unwrap_or_else(Type::error),
                    None => {
                        let msg = self.undeclared(name);
                        self.report(loc_id, msg);
                        Type::error()
                    }
                }
            }
        }
    }

    // ----- scopes -----

    fn enter_scope(&mut self) {
        // cel-go checker/env.go enterScope builds a new Env without filteredOverloadIDs, so the
        // cross-type numeric overloads are enabled from the first comprehension on.
        self.filter_cross_type_numeric = false;
        self.locals.push(Vec::new());
    }

    fn exit_scope(&mut self) {
        self.locals.pop();
    }

    fn add_local(&mut self, name: &str, t: Type) {
        if let Some(scope) = self.locals.last_mut() {
            if let Some(slot) = scope.iter_mut().find(|(n, _)| n == name) {
                slot.1 = t;
            } else {
                scope.push((name.to_string(), t));
            }
        }
    }

    fn lookup_local(&self, name: &str) -> Option<&Type> {
        self.locals
            .iter()
            .rev()
            .find_map(|s| s.iter().rev().find(|(n, _)| n == name).map(|(_, t)| t))
    }

    // ----- name resolution (cel-go checker/env.go) -----

    fn lookup_global_ident(&self, candidate: &str) -> Option<Type> {
        if let Some(t) = self.env.find_ident(candidate) {
            return Some(t.clone());
        }
        if let Some(t) = self.env.find_provider_ident(candidate) {
            return Some(Type::type_of(t));
        }
        if let Some(t) = self.env.find_nameable_struct_type(candidate) {
            return Some(Type::type_of(t));
        }
        None
    }

    fn resolve_simple_ident(&self, name: &str) -> Option<Type> {
        let local = self.lookup_local(name);
        if let Some(t) = local
            && !name.starts_with('.')
        {
            return Some(t.clone());
        }
        if self.env.options().container.is_empty() && !name.starts_with('.') {
            return self.lookup_global_ident(name);
        }
        self.env
            .candidate_names(name)
            .iter()
            .find_map(|c| self.lookup_global_ident(c))
    }

    fn resolve_qualified_ident(&self, qualifiers: &[&str]) -> Option<Type> {
        let first = qualifiers.first()?;
        if qualifiers.len() == 1 {
            return self.resolve_simple_ident(first);
        }
        if self.lookup_local(first).is_some() && !first.starts_with('.') {
            return None;
        }
        let name = qualifiers.join(".");
        if self.env.options().container.is_empty() && !name.starts_with('.') {
            return self.lookup_global_ident(&name);
        }
        self.env
            .candidate_names(&name)
            .iter()
            .find_map(|c| self.lookup_global_ident(c))
    }

    fn resolve_type_ident(&self, name: &str) -> Option<(String, Type)> {
        for c in self.env.candidate_names(name) {
            if let Some(t) = self.env.find_provider_ident(&c) {
                return Some((c, Type::type_of(t)));
            }
            if let Some(t) = self.env.find_nameable_struct_type(&c) {
                return Some((c, Type::type_of(t)));
            }
        }
        None
    }

    fn lookup_function(&self, name: &str) -> Option<&'a FunctionDecl> {
        if self.env.options().container.is_empty() && !name.starts_with('.') {
            return self.env.find_function(name);
        }
        self.env
            .candidate_names(name)
            .iter()
            .find_map(|c| self.env.find_function(c))
    }

    fn undeclared(&self, name: &str) -> String {
        // cel-go v0.29.2 checker/errors.go: undeclaredReference
        format!(
            "undeclared reference to '{name}' (in container '{}')",
            self.env.options().container
        )
    }

    // ----- types of nodes -----

    fn set_type(&mut self, id: u64, t: Type) {
        let Ok(i) = usize::try_from(id) else { return };
        if i >= self.types.len() {
            if i > (1 << 24) {
                return;
            }
            self.types.resize(i + 1, None);
        }
        self.types[i] = Some(t);
    }

    fn get_type(&self, id: u64) -> Type {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.types.get(i))
            .and_then(|t| t.clone())
            .unwrap_or_else(Type::error)
    }

    fn assert_type(&mut self, id: u64, expected: &Type, actual: &Type) {
        if !self.is_assignable(expected, actual) {
            // cel-go v0.29.2 checker/errors.go: typeMismatch
            self.report(
                id,
                format!("expected type '{expected}' but found '{actual}'"),
            );
        }
    }

    // ----- the checker proper -----

    fn check(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Literal(l) => self.set_type(e.id, literal_type(l)),
            Expr::Ident(name) => self.check_ident(e.id, name),
            Expr::Select(sel) => {
                if !sel.test
                    && let Some(q) = qualifiers(e)
                    && let Some(t) = self.resolve_qualified_ident(&q)
                {
                    self.set_type(e.id, t);
                    return;
                }
                let mut result = self.check_select_field(e.id, &sel.operand, &sel.field, false);
                if sel.test {
                    result = Type::bool();
                }
                let t = self.substitute(&result, false);
                self.set_type(e.id, t);
            }
            Expr::Call(call) => {
                self.check_call(e, &call.func_name, call.target.as_deref(), &call.args)
            }
            Expr::List(list) => {
                let mut elems_t: Option<Type> = None;
                for (i, el) in list.elements.iter().enumerate() {
                    self.check(el);
                    let mut t = self.get_type(el.id);
                    if list.optional_indices.contains(&i) {
                        t = self.unwrap_optional_entry(el.id, t);
                    }
                    elems_t = Some(self.join_types(elems_t, t));
                }
                let elem = match elems_t {
                    Some(t) => t,
                    None => self.new_type_var(),
                };
                self.set_type(e.id, Type::list(elem));
            }
            Expr::Map(map) => {
                let mut key_t: Option<Type> = None;
                let mut val_t: Option<Type> = None;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        continue;
                    };
                    self.check(&me.key);
                    let kt = self.get_type(me.key.id);
                    key_t = Some(self.join_types(key_t, kt));
                    self.check(&me.value);
                    let mut vt = self.get_type(me.value.id);
                    if me.optional {
                        vt = self.unwrap_optional_entry(me.value.id, vt);
                    }
                    val_t = Some(self.join_types(val_t, vt));
                }
                let (k, v) = match (key_t, val_t) {
                    (Some(k), Some(v)) => (k, v),
                    _ => (self.new_type_var(), self.new_type_var()),
                };
                self.set_type(e.id, Type::map(k, v));
            }
            Expr::Struct(s) => self.check_struct(e.id, &s.type_name, &s.entries),
            Expr::Comprehension(comp) => {
                let synth = SynthComprehension {
                    iter_range: Synth::Real(&comp.iter_range),
                    iter_var: comp.iter_var.clone(),
                    iter_var2: comp.iter_var2.clone(),
                    accu_var: comp.accu_var.clone(),
                    accu_init: Synth::Real(&comp.accu_init),
                    loop_cond: Synth::Real(&comp.loop_cond),
                    loop_step: Synth::Real(&comp.loop_step),
                    result: Synth::Real(&comp.result),
                };
                let t = self.check_synth_comprehension(e.id, &synth);
                self.set_type(e.id, t);
            }
            Expr::Unspecified => {
                // cel-go v0.29.2 checker/errors.go: unexpectedASTType
                self.report(e.id, "unexpected unspecified type: Expr".to_string());
            }
        }
    }

    fn unwrap_optional_entry(&mut self, id: u64, t: Type) -> Type {
        match t.optional_param() {
            Some(inner) => inner.clone(),
            None => {
                if !t.is_dyn() {
                    let expected = Type::optional(t.clone());
                    self.report(id, format!("expected type '{expected}' but found '{t}'"));
                }
                t
            }
        }
    }

    fn check_ident(&mut self, id: u64, name: &str) {
        match self.resolve_simple_ident(name) {
            Some(t) => self.set_type(id, t),
            None => {
                self.set_type(id, Type::error());
                let msg = self.undeclared(name);
                self.report(id, msg);
            }
        }
    }

    fn check_select_field(
        &mut self,
        id: u64,
        operand: &IdedExpr,
        field: &str,
        optional: bool,
    ) -> Type {
        self.check(operand);
        let operand_t = self.get_type(operand.id);
        let operand_t = self.substitute(&operand_t, false);
        let (target, is_opt) = match operand_t.optional_param() {
            Some(p) => (p.clone(), true),
            None => (operand_t.clone(), false),
        };
        let result = match target.kind() {
            Kind::Map => target.param(1).cloned().unwrap_or_else(Type::dyn_type),
            Kind::Struct => self
                .lookup_field_type(id, target.type_name(), field)
                .unwrap_or_else(Type::error),
            Kind::TypeParam => {
                self.is_assignable(&Type::dyn_type(), &target);
                Type::dyn_type()
            }
            _ => {
                if !target.is_dyn_or_error() {
                    // cel-go v0.29.2 checker/errors.go: typeDoesNotSupportFieldSelection
                    self.report(
                        id,
                        format!("type '{target}' does not support field selection"),
                    );
                }
                Type::dyn_type()
            }
        };
        if is_opt || optional {
            Type::optional(result)
        } else {
            result
        }
    }

    fn lookup_field_type(&mut self, id: u64, struct_name: &str, field: &str) -> Option<Type> {
        match self.env.find_struct_field_type(struct_name, field) {
            None => {
                // cel-go v0.29.2 checker/errors.go: unexpectedFailedResolution
                self.report(
                    id,
                    format!("unexpected failed resolution of '{struct_name}'"),
                );
                None
            }
            Some(None) => {
                // cel-go v0.29.2 checker/errors.go: undefinedField
                self.report(id, format!("undefined field '{field}'"));
                None
            }
            Some(Some(t)) => Some(t),
        }
    }

    fn check_call(
        &mut self,
        e: &IdedExpr,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) {
        if name == "_?._" {
            self.check_opt_select(e, target, args);
            return;
        }
        if let Some(m) = self.env.find_call_macro(name)
            && m.matches(target.is_some(), args.len())
        {
            let m = m.clone();
            let t = m.check(self, e.id, target, args);
            self.set_type(e.id, t);
            return;
        }
        for a in args {
            self.check(a);
        }
        let mut arg_info: Vec<(u64, Type)> = Vec::with_capacity(args.len() + 1);
        match target {
            None => {
                let Some(f) = self.lookup_function(name) else {
                    let msg = self.undeclared(name);
                    self.report(e.id, msg);
                    self.set_type(e.id, Type::error());
                    return;
                };
                arg_info.extend(args.iter().map(|a| (a.id, self.get_type(a.id))));
                let t = self
                    .resolve_overload(e.id, f, false, &arg_info)
                    .unwrap_or_else(Type::error);
                self.set_type(e.id, t);
            }
            Some(target) => {
                if let Some(prefix) = to_qualified_name(target) {
                    let qualified = format!("{prefix}.{name}");
                    if let Some(f) = self.lookup_function(&qualified) {
                        self.qualified_calls.insert(e.id, qualified.as_str().into());
                        arg_info.extend(args.iter().map(|a| (a.id, self.get_type(a.id))));
                        let t = self
                            .resolve_overload(e.id, f, false, &arg_info)
                            .unwrap_or_else(Type::error);
                        self.set_type(e.id, t);
                        return;
                    }
                }
                self.check(target);
                let Some(f) = self.lookup_function(name) else {
                    self.set_type(e.id, Type::error());
                    let msg = self.undeclared(name);
                    self.report(e.id, msg);
                    return;
                };
                arg_info.push((target.id, self.get_type(target.id)));
                arg_info.extend(args.iter().map(|a| (a.id, self.get_type(a.id))));
                let t = self
                    .resolve_overload(e.id, f, true, &arg_info)
                    .unwrap_or_else(Type::error);
                self.set_type(e.id, t);
            }
        }
    }

    fn check_opt_select(&mut self, e: &IdedExpr, target: Option<&IdedExpr>, args: &[IdedExpr]) {
        if args.len() != 2 || target.is_some() {
            let t = if target.is_some() {
                " member call with"
            } else {
                ""
            };
            // cel-go v0.29.2 checker/errors.go: notAnOptionalFieldSelectionCall
            self.report(
                e.id,
                format!("unsupported optional field selection: incorrect signature.{t} argument count: {}", args.len()),
            );
            return;
        }
        let Some(field) = string_literal(&args[1]) else {
            // cel-go v0.29.2 checker/errors.go: notAnOptionalFieldSelection (prints the Go
            // expression value; we print the node id, the only stable part of it).
            self.report(
                args[1].id,
                format!("unsupported optional field selection: id:{}", args[1].id),
            );
            return;
        };
        let result = self.check_select_field(e.id, &args[0], field, true);
        let t = self.substitute(&result, false);
        self.set_type(e.id, t);
        // cel-go checker.go checkOptSelect: the call references `select_optional_field`.
        self.overloads
            .insert(e.id, vec!["select_optional_field".into()]);
    }

    /// cel-go `resolveOverload`. `args` holds (node id, type) of the receiver (when `member`)
    /// followed by the arguments. Returns the result type, or `None` after reporting.
    fn resolve_overload(
        &mut self,
        call_id: u64,
        f: &FunctionDecl,
        member: bool,
        args: &[(u64, Type)],
    ) -> Option<Type> {
        let mut result: Option<Type> = None;
        for o in f.overloads() {
            if self.filter_cross_type_numeric && CROSS_TYPE_NUMERIC_OVERLOADS.contains(&o.id()) {
                continue;
            }
            if member != o.is_member() {
                continue;
            }
            if f.name() == "_&&_" || f.name() == "_||_" {
                let mut failed = false;
                for (id, t) in args {
                    if !self.is_assignable(t, &Type::bool()) {
                        self.report(*id, format!("expected type 'bool' but found '{t}'"));
                        failed = true;
                    }
                }
                if failed {
                    return None;
                }
                self.overloads.insert(call_id, vec![o.id().into()]);
                return Some(Type::bool());
            }
            if o.arg_types().len() != args.len() {
                // Cannot match; cel-go still allocates the overload's type variables.
                self.free_type_var_counter += o.type_params().len();
                continue;
            }
            let mark = self.mapping.trail.len();
            let (ok, cand_result) = if o.type_params().is_empty() {
                let ok = args
                    .iter()
                    .zip(o.arg_types())
                    .all(|((_, a), c)| self.internal_is_assignable(a, c));
                (ok, o.result_type().clone())
            } else {
                let (cand_args, cand_result) = self.instantiate(o);
                let ok = args
                    .iter()
                    .zip(&cand_args)
                    .all(|((_, a), c)| self.internal_is_assignable(a, c));
                (ok, cand_result)
            };
            if ok {
                self.overloads
                    .entry(call_id)
                    .or_default()
                    .push(o.id().into());
                self.mapping.trail.truncate(mark);
                let fn_result = self.substitute(&cand_result, false);
                result = Some(match result {
                    None => fn_result,
                    Some(r) if !r.is_dyn() && !fn_result.is_exact(&r) => Type::dyn_type(),
                    Some(r) => r,
                });
            } else {
                self.mapping.rollback(mark);
            }
        }
        if result.is_none() {
            let arg_types: Vec<Type> = args.iter().map(|(_, t)| self.substitute(t, true)).collect();
            let sig = format_call_signature(&arg_types, member);
            // cel-go v0.29.2 checker/errors.go: noMatchingOverload
            self.report(
                call_id,
                format!(
                    "found no matching overload for '{}' applied to '{sig}'",
                    f.name()
                ),
            );
        }
        result
    }

    fn instantiate(&mut self, o: &OverloadDecl) -> (Vec<Type>, Type) {
        if o.type_params().is_empty() {
            return (o.arg_types().to_vec(), o.result_type().clone());
        }
        let mut subs: Vec<(Arc<str>, Type)> = Vec::with_capacity(o.type_params().len());
        for p in o.type_params() {
            let v = self.new_type_var();
            subs.push((p.clone(), v));
        }
        let args = o
            .arg_types()
            .iter()
            .map(|t| replace_params(t, &subs))
            .collect();
        (args, replace_params(o.result_type(), &subs))
    }

    fn check_struct(
        &mut self,
        id: u64,
        type_name: &str,
        entries: &[cel::common::ast::IdedEntryExpr],
    ) {
        let Some((resolved_name, ident_t)) = self.resolve_type_ident(type_name) else {
            let msg = self.undeclared(type_name);
            self.report(id, msg);
            self.set_type(id, Type::error());
            return;
        };
        let mut result = Type::error();
        let mut name = resolved_name;
        if let Some(inner) = ident_t.param(0) {
            if let Some(wkt) = well_known_type_name(inner) {
                name = wkt.to_string();
                result = inner.clone();
            } else if inner.kind() == Kind::Struct {
                name = inner.declared_type_name();
                result = inner.clone();
            } else {
                // cel-go v0.29.2 checker/errors.go: notAMessageType
                self.report(
                    id,
                    format!("'{}' is not a message type", inner.declared_type_name()),
                );
            }
        }
        self.set_type(id, result);
        for entry in entries {
            let EntryExpr::StructField(field) = &entry.expr else {
                continue;
            };
            self.check(&field.value);
            let field_t = self
                .lookup_field_type(entry.id, &name, &field.field)
                .unwrap_or_else(Type::error);
            let mut val_t = self.get_type(field.value.id);
            if field.optional {
                val_t = self.unwrap_optional_entry(field.value.id, val_t);
            }
            if !self.is_assignable(&field_t, &val_t) {
                // cel-go v0.29.2 checker/errors.go: fieldTypeMismatch
                self.report(
                    entry.id,
                    format!(
                        "expected type of field '{}' is '{field_t}' but provided type is '{val_t}'",
                        field.field
                    ),
                );
            }
        }
    }

    fn comprehension_var_types(
        &mut self,
        range_id: u64,
        range_t: &Type,
        two: bool,
    ) -> (Type, Option<Type>) {
        match range_t.kind() {
            Kind::List => {
                let elem = range_t.param(0).cloned().unwrap_or_else(Type::dyn_type);
                if two {
                    (Type::int(), Some(elem))
                } else {
                    (elem, None)
                }
            }
            Kind::Map => {
                let k = range_t.param(0).cloned().unwrap_or_else(Type::dyn_type);
                let v = range_t.param(1).cloned().unwrap_or_else(Type::dyn_type);
                (k, two.then_some(v))
            }
            Kind::Dyn | Kind::Error | Kind::TypeParam => {
                self.is_assignable(&Type::dyn_type(), range_t);
                (Type::dyn_type(), two.then(Type::dyn_type))
            }
            _ => {
                // cel-go v0.29.2 checker/errors.go: notAComprehensionRange
                self.report(
                    range_id,
                    format!(
                        "expression of type '{range_t}' cannot be range of a comprehension (must be list, map, or dynamic)"
                    ),
                );
                (Type::error(), two.then(Type::error))
            }
        }
    }

    fn join_types(&mut self, previous: Option<Type>, current: Type) -> Type {
        match previous {
            None => current,
            Some(prev) => {
                if self.is_assignable(&prev, &current) {
                    most_general(&prev, &current)
                } else {
                    // cel-go's cel.Env never configures homogeneous element types in the
                    // checker, so mixed literals are list(dyn)/map(_, dyn) here; the
                    // homogeneous-literal validator reports them instead.
                    Type::dyn_type()
                }
            }
        }
    }

    // ----- unification (cel-go checker/types.go) -----

    fn internal_is_assignable(&mut self, t1: &Type, t2: &Type) -> bool {
        let (k1, k2) = (t1.kind(), t2.kind());
        if k2 == Kind::TypeParam {
            let (valid, has_sub) = self.is_valid_type_substitution(t1, t2);
            if valid {
                return true;
            }
            if has_sub {
                return false;
            }
        }
        if k1 == Kind::TypeParam {
            return self.is_valid_type_substitution(t2, t1).0;
        }
        if t1.is_dyn_or_error() || t2.is_dyn_or_error() {
            return true;
        }
        if k1 == Kind::Null {
            return is_assignable_null(t2);
        }
        if k2 == Kind::Null {
            return is_assignable_null(t1);
        }
        match k1 {
            Kind::Bool
            | Kind::Bytes
            | Kind::Double
            | Kind::Int
            | Kind::String
            | Kind::Uint
            | Kind::Any
            | Kind::Duration
            | Kind::Timestamp
            | Kind::Struct => t2.is_assignable_from(t1),
            Kind::Type => k2 == Kind::Type,
            Kind::Opaque | Kind::List | Kind::Map => {
                k1 == k2
                    && t1.type_name() == t2.type_name()
                    && t1.param_count() == t2.param_count()
                    && (0..t1.param_count()).all(|i| match (t1.param(i), t2.param(i)) {
                        (Some(a), Some(b)) => self.internal_is_assignable(a, b),
                        _ => false,
                    })
            }
            _ => false,
        }
    }

    fn is_valid_type_substitution(&mut self, t1: &Type, t2: &Type) -> (bool, bool) {
        if t1.kind() == t2.kind() && t1.is_exact(t2) {
            return (true, true);
        }
        if let Some(t2_sub) = self.mapping.find(t2).cloned() {
            if t1.kind() == t2_sub.kind() && t1.is_exact(&t2_sub) {
                return (true, true);
            }
            if self.internal_is_assignable(t1, &t2_sub) {
                let t2_new = most_general(t1, &t2_sub);
                if self.not_referenced_in(t2, &t2_new, 0) {
                    self.mapping.add(t2, t2_new);
                }
                return (true, true);
            }
            return (false, true);
        }
        if self.not_referenced_in(t2, t1, 0) {
            self.mapping.add(t2, t1.clone());
            return (true, false);
        }
        (false, false)
    }

    fn not_referenced_in(&self, t: &Type, within: &Type, depth: usize) -> bool {
        if depth > 256 {
            return false;
        }
        if t.is_exact(within) {
            return false;
        }
        match within.kind() {
            Kind::TypeParam => match self.mapping.find(within) {
                None => true,
                Some(sub) => self.not_referenced_in(t, sub, depth + 1),
            },
            Kind::Opaque | Kind::List | Kind::Map | Kind::Type => {
                (0..within.param_count()).all(|i| {
                    within
                        .param(i)
                        .is_none_or(|p| self.not_referenced_in(t, p, depth + 1))
                })
            }
            _ => true,
        }
    }

    fn substitute_depth(&self, t: &Type, to_dyn: bool, depth: usize) -> Type {
        if depth > 256 {
            return Type::dyn_type();
        }
        if let Some(sub) = self.mapping.find(t) {
            return self.substitute_depth(sub, to_dyn, depth + 1);
        }
        match t.type_kind() {
            TypeKind::TypeParam(_) if to_dyn => Type::dyn_type(),
            TypeKind::Opaque(name, params) => {
                if params.is_empty() {
                    return t.clone();
                }
                Type::opaque(
                    name.clone(),
                    params
                        .iter()
                        .map(|p| self.substitute_depth(p, to_dyn, depth + 1))
                        .collect(),
                )
            }
            TypeKind::List(e) => {
                if !has_type_params(e) {
                    return t.clone();
                }
                Type::list(self.substitute_depth(e, to_dyn, depth + 1))
            }
            TypeKind::Map(k, v) => {
                if !has_type_params(k) && !has_type_params(v) {
                    return t.clone();
                }
                Type::map(
                    self.substitute_depth(k, to_dyn, depth + 1),
                    self.substitute_depth(v, to_dyn, depth + 1),
                )
            }
            TypeKind::Type(Some(p)) => Type::type_of(self.substitute_depth(p, to_dyn, depth + 1)),
            _ => t.clone(),
        }
    }
}

fn has_type_params(t: &Type) -> bool {
    match t.type_kind() {
        TypeKind::TypeParam(_) => true,
        TypeKind::List(e) => has_type_params(e),
        TypeKind::Map(k, v) => has_type_params(k) || has_type_params(v),
        TypeKind::Opaque(_, p) => p.iter().any(has_type_params),
        TypeKind::Type(Some(p)) => has_type_params(p),
        _ => false,
    }
}

fn replace_params(t: &Type, subs: &[(Arc<str>, Type)]) -> Type {
    match t.type_kind() {
        TypeKind::TypeParam(n) => subs
            .iter()
            .find(|(k, _)| k == n)
            .map_or_else(|| t.clone(), |(_, v)| v.clone()),
        TypeKind::List(e) => Type::list(replace_params(e, subs)),
        TypeKind::Map(k, v) => Type::map(replace_params(k, subs), replace_params(v, subs)),
        TypeKind::Opaque(n, p) if !p.is_empty() => Type::opaque(
            n.clone(),
            p.iter().map(|x| replace_params(x, subs)).collect(),
        ),
        TypeKind::Type(Some(p)) => Type::type_of(replace_params(p, subs)),
        _ => t.clone(),
    }
}

fn synth_id(s: &Synth<'_>, loc_id: u64) -> u64 {
    match s {
        Synth::Real(e) => e.id,
        _ => loc_id,
    }
}

/// cel-go checker.go computeQualifiers.
fn qualifiers(e: &IdedExpr) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut cur = e;
    loop {
        match &cur.expr {
            Expr::Select(s) => {
                if s.test {
                    return None;
                }
                out.push(s.field.as_str());
                cur = &s.operand;
                if let Expr::Ident(n) = &cur.expr {
                    out.push(n.as_str());
                    out.reverse();
                    return Some(out);
                }
            }
            _ => return None,
        }
    }
}

/// cel-go checker.go isWellKnownType + getWellKnownTypeName.
fn well_known_type_name(t: &Type) -> Option<&'static str> {
    let name = match t.kind() {
        Kind::Any => "google.protobuf.Any",
        Kind::Timestamp => "google.protobuf.Timestamp",
        Kind::Duration => "google.protobuf.Duration",
        Kind::Dyn => "google.protobuf.Value",
        Kind::Null => "google.protobuf.NullValue",
        Kind::Bool if t.is_wrapper() => "google.protobuf.BoolValue",
        Kind::Bytes if t.is_wrapper() => "google.protobuf.BytesValue",
        Kind::Double if t.is_wrapper() => "google.protobuf.DoubleValue",
        Kind::Int if t.is_wrapper() => "google.protobuf.Int64Value",
        Kind::String if t.is_wrapper() => "google.protobuf.StringValue",
        Kind::Uint if t.is_wrapper() => "google.protobuf.UInt64Value",
        Kind::List if t.param(0).is_some_and(|p| p.kind() == Kind::Dyn) => {
            "google.protobuf.ListValue"
        }
        Kind::Map
            if t.param(0).is_some_and(|p| p.kind() == Kind::String)
                && t.param(1).is_some_and(|p| p.kind() == Kind::Dyn) =>
        {
            "google.protobuf.Struct"
        }
        _ => return None,
    };
    Some(name)
}

/// What a call-shaped macro drives of the checker: the same methods its own nodes use.
impl MacroChecker for Checker<'_> {
    fn check_expr(&mut self, e: &IdedExpr) -> Type {
        Checker::check_expr(self, e)
    }

    fn check_synth(&mut self, loc_id: u64, s: &Synth<'_>) -> Type {
        Checker::check_synth(self, loc_id, s)
    }

    fn check_synth_comprehension(&mut self, loc_id: u64, comp: &SynthComprehension<'_>) -> Type {
        Checker::check_synth_comprehension(self, loc_id, comp)
    }

    fn resolve_call(
        &mut self,
        call_id: u64,
        name: &str,
        member: bool,
        args: &[(u64, Type)],
    ) -> Type {
        match self.lookup_function(name) {
            Some(f) => self
                .resolve_overload(call_id, f, member, args)
                .unwrap_or_else(Type::error),
            None => Type::error(),
        }
    }
}
