//! Kubernetes' library cost estimator, ported from k8s.io/apiserver v0.37.1
//! `pkg/cel/library/cost.go` (`CostEstimator.EstimateCallCost`, `sizeEstimate`,
//! `listElementNode`, `selectorCostEstimate`).
//!
//! [`KubeCostEstimator`] plugs into the cel-go estimator port ([`crate::cel::cost`]). Sizes of
//! variables come from an optional inner size estimator; kube-apiserver compiles admission
//! policies with `object`, `oldObject` and `params` as `dyn` and no size estimator, which is
//! what [`KubeCostEstimator::default`] does.

use std::ops::Add;

use crate::cel::cost::{
    AstNode, CallEstimate, CostEstimate, CostEstimator, CostOptions, LIST_CREATE_BASE_COST,
    REGEX_STRING_LENGTH_COST_FACTOR, STRING_TRAVERSAL_COST_FACTOR, STRUCT_CREATE_BASE_COST,
    SizeEstimate,
};
use crate::cel::{CheckedTypes, Env, Kind, ParsedExpr, Type, TypeKind};
use crate::schema::sizes::{Bound, Shape, SizeNode};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// k8s.io/apiserver `pkg/cel/limits.go` `MaxNameFormatRegexSize`.
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
/// k8s.io/apiserver `pkg/cel/limits.go` `MaxFormatSize`.
const MAX_FORMAT_SIZE: u64 = 64;

/// k8s.io/apiserver `pkg/cel/library/cost.go` `CostEstimator`.
#[derive(Default)]
pub struct KubeCostEstimator<'s> {
    /// The size estimator (`CostEstimator.SizeEstimator`); `None` as for admission policies.
    pub size_estimator: Option<&'s dyn CostEstimator>,
}

/// Estimates an expression checked in a Kubernetes environment with
/// [`KubeCostEstimator::default`] (cel-go `Env.EstimateCost` with
/// `&library.CostEstimator{}`).
pub fn estimate_cost(
    env: &Env,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
) -> Result<CostEstimate, crate::cel::cost::Unsupported> {
    static OPTIONS: std::sync::LazyLock<CostOptions> = std::sync::LazyLock::new(kube_cost_options);
    crate::cel::cost::estimate_cost_with(
        env,
        parsed,
        types,
        &KubeCostEstimator::default(),
        &OPTIONS,
    )
}

/// The sizes of the variables of an admission policy, from the matched kind's and the
/// parameter kind's schemas ([`crate::schema::RootType::sizes`]).
///
/// kube-apiserver has no such estimator for admission policies (it compiles `object`,
/// `oldObject` and `params` as `dyn`); this is apiextensions-apiserver v0.37.1's
/// `pkg/apiserver/schema/cel/compilation.go` `sizeEstimator` (which CRD validation rules use
/// with `self` as the root), with `object` and `oldObject` rooted at the matched kind and
/// `params` at the parameter kind. Every other variable is unknown (`None`).
#[derive(Clone, Copy, Default)]
pub struct SchemaSizeEstimator<'s> {
    /// The matched kind's sizes (`object`, `oldObject`).
    pub object: Option<&'s SizeNode>,
    /// The parameter kind's sizes (`params`).
    pub params: Option<&'s SizeNode>,
    /// When set, every path of a list, map, string or bytes whose size was answered from a
    /// default derived from the request size (no `maxItems`/`maxProperties`/`maxLength`), or
    /// not answered at all (not typed by a schema: `request`, `variables`, `dyn` parts), is
    /// recorded here, once (for the reasons of cost findings; does not change any estimate).
    /// The steps are the estimator's shared strings (copying them for every recorded path
    /// showed in the benchmark's profile, docs/cost.md).
    pub record: Option<&'s RefCell<Vec<Vec<Rc<str>>>>>,
    /// When set, the answers of the paths looked up before (by this estimate, or by earlier
    /// ones with the same roots: [`PathMemo::with_answers`]), and the nodes of the last path
    /// followed, so that the next new path (usually a neighbour: `spec.containers`, then
    /// `spec.containers[*].image`) resumes from their common prefix instead of walking from
    /// the root (does not change any answer).
    pub memo: Option<&'s RefCell<PathMemo<'s>>>,
}

/// The last path [`SchemaSizeEstimator`] followed and the node each of its steps reached,
/// and the answers of the paths looked up before ([`SizeAnswers`]).
#[derive(Default)]
pub struct PathMemo<'s> {
    /// The root the path starts from.
    root: Option<&'s SizeNode>,
    /// The steps (after the root variable).
    steps: Vec<Rc<str>>,
    /// The node reached by each step.
    nodes: Vec<&'s SizeNode>,
    /// The answer of every path looked up, by path.
    answers: SizeAnswers,
    /// While tracing ([`PathMemo::start_trace`]): each path looked up and its answer, once.
    trace: Option<Vec<Traced>>,
}

/// A path looked up, and its answer ([`SizeTrace`]).
type Traced = (Rc<[Rc<str>]>, Found);

/// The schema size answers one estimate used ([`PathMemo::start_trace`]): every path it
/// looked up, once, with the answer. An estimate is a function of the checked expression and
/// of these answers (docs/cost.md), so another kind that answers every path alike gets the
/// same estimate ([`SchemaSizeEstimator::answers_alike`]).
#[derive(Default)]
pub struct SizeTrace(Vec<Traced>);

impl<'s> PathMemo<'s> {
    /// A memo that starts with the answers of earlier estimates (with the same roots:
    /// [`SizeAnswers`]).
    pub fn with_answers(answers: SizeAnswers) -> Self {
        PathMemo {
            answers,
            ..PathMemo::default()
        }
    }

    /// Takes the answers, to keep them for the next estimate with the same roots.
    pub fn take_answers(&mut self) -> SizeAnswers {
        std::mem::take(&mut self.answers)
    }

    /// Starts recording the paths looked up and their answers ([`SizeTrace`]), each once.
    pub fn start_trace(&mut self) {
        self.answers.stamp += 1;
        self.trace = Some(Vec::new());
    }

    /// Stops recording and returns what was recorded since [`PathMemo::start_trace`].
    pub fn take_trace(&mut self) -> SizeTrace {
        SizeTrace(self.trace.take().unwrap_or_default())
    }

    /// [`SizeNode::at_path`] from `root`, resuming from the longest prefix `rest` shares with
    /// the last path.
    fn at_path(&mut self, root: &'s SizeNode, rest: &[Rc<str>]) -> Option<&'s SizeNode> {
        if !self.root.is_some_and(|r| std::ptr::eq(r, root)) {
            self.root = Some(root);
            self.steps.clear();
            self.nodes.clear();
        }
        let common = self
            .steps
            .iter()
            .zip(rest)
            .take_while(|(a, b)| Rc::ptr_eq(a, b) || ***a == ***b)
            .count();
        self.steps.truncate(common);
        self.nodes.truncate(common);
        let mut current = match common.checked_sub(1) {
            Some(i) => self.nodes[i],
            None => root,
        };
        for step in &rest[common..] {
            current = current.step(step)?;
            self.steps.push(Rc::clone(step));
            self.nodes.push(current);
        }
        Some(current)
    }
}

/// What a schema size lookup found at a path: the node's `MaxElements` and where it comes
/// from, or nothing (`None`: no root, or a step that does not exist).
type Found = Option<(i64, Bound)>;

/// The answers of [`SchemaSizeEstimator`]'s lookups by path (root variable included), and
/// the reason rendered for each ([`unbounded_reasons_memo`]), kept from one estimate to the
/// next of the same kind environment: the expressions of a policy size the same paths again
/// and again, and following them through the schema (binary searches by field name) and
/// rendering their reasons showed in the benchmark's profile (docs/cost.md). An answer only
/// depends on the roots and the path, so the answers must only ever be used with one pair of
/// roots (the estimator checks their addresses and starts afresh when they change).
///
/// The paths are keyed by the addresses of their shared step strings (the estimator makes
/// one string per step, `cel::cost`): an entry holds its steps, so an address names the same
/// string for as long as the entry lives. The same step text under another address is
/// another key, whose answer is the same (it is computed from the text).
#[derive(Default)]
pub struct SizeAnswers {
    /// The addresses of the roots the answers are for (`object`, `params`).
    roots: Option<(usize, usize)>,
    /// Entries by [`path_key`].
    entries: crate::cel::env::WordMap<u64, Vec<Answer>>,
    /// Number of entries.
    len: usize,
    /// The number of the current trace ([`PathMemo::start_trace`]).
    stamp: u64,
}

/// One path's answer.
struct Answer {
    path: Rc<[Rc<str>]>,
    found: Found,
    /// The trace that last recorded it ([`SizeAnswers::stamp`]; 0: none).
    stamp: u64,
    /// The rendered reason, once asked for (`Some(None)`: the path has none).
    reason: Option<Option<Arc<str>>>,
}

/// The key of a path in [`SizeAnswers`]: a mix of its steps' addresses.
fn path_key(path: &[Rc<str>]) -> u64 {
    path.iter().fold(path.len() as u64, |h, s| {
        let a = Rc::as_ptr(s).cast::<u8>() as usize as u64;
        (h.rotate_left(5) ^ a).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

/// Whether two paths are the same strings (by address).
fn same_strings(a: &[Rc<str>], b: &[Rc<str>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Rc::ptr_eq(x, y))
}

impl SizeAnswers {
    /// At most this many paths are kept (a kind environment's policy has far fewer).
    const MAX: usize = 4096;

    /// Starts afresh unless the answers are for these roots.
    fn for_roots(&mut self, object: Option<&SizeNode>, params: Option<&SizeNode>) {
        let addr = |n: Option<&SizeNode>| n.map_or(0, |n| std::ptr::from_ref(n) as usize);
        let roots = (addr(object), addr(params));
        if self.roots != Some(roots) {
            self.roots = Some(roots);
            self.entries.clear();
            self.len = 0;
        }
    }

    fn get_mut(&mut self, path: &[Rc<str>]) -> Option<&mut Answer> {
        self.entries
            .get_mut(&path_key(path))?
            .iter_mut()
            .find(|a| same_strings(&a.path, path))
    }

    fn insert(&mut self, path: &[Rc<str>], found: Found) {
        if self.len >= Self::MAX {
            self.entries.clear();
            self.len = 0;
        }
        self.entries
            .entry(path_key(path))
            .or_default()
            .push(Answer {
                path: Rc::from(path),
                found,
                stamp: 0,
                reason: None,
            });
        self.len += 1;
    }
}

/// The reasons behind recorded paths ([`SchemaSizeEstimator::record`]), deduplicated and
/// sorted: "`spec.containers` has no maxItems", "`spec.containers[*].image` has no
/// maxLength", "`spec.names` of the params kind has no maxItems".
pub fn unbounded_reasons(sizes: &SchemaSizeEstimator<'_>, paths: &[Vec<Rc<str>>]) -> Vec<Arc<str>> {
    let reasons = paths.iter().filter_map(|p| render_reason(sizes, p));
    sorted_unique(reasons.collect())
}

/// [`unbounded_reasons`], taking the reason of a path from `memo`'s answers when it was
/// rendered before (by an earlier estimate with the same roots: [`SizeAnswers`]), and
/// keeping the new ones there. `memo` must be the one `sizes` used for the estimate that
/// recorded `paths`.
pub fn unbounded_reasons_memo(
    sizes: &SchemaSizeEstimator<'_>,
    paths: &[Vec<Rc<str>>],
    memo: &RefCell<PathMemo<'_>>,
) -> Vec<Arc<str>> {
    let mut memo = memo.borrow_mut();
    memo.answers.for_roots(sizes.object, sizes.params);
    let mut reasons = Vec::with_capacity(paths.len());
    for path in paths {
        let reason = match memo.answers.get_mut(path) {
            Some(answer) => answer
                .reason
                .get_or_insert_with(|| render_reason(sizes, path))
                .clone(),
            None => render_reason(sizes, path),
        };
        reasons.extend(reason);
    }
    sorted_unique(reasons)
}

/// Sorted, without repetitions (two paths can have the same reason).
fn sorted_unique(mut reasons: Vec<Arc<str>>) -> Vec<Arc<str>> {
    reasons.sort_unstable();
    reasons.dedup();
    reasons
}

/// The reason of one recorded path (`None` for an empty path).
fn render_reason(sizes: &SchemaSizeEstimator<'_>, path: &[Rc<str>]) -> Option<Arc<str>> {
    let (root, rest) = path.split_first()?;
    let node = sizes.root(root).and_then(|r| r.at_path(rest));
    // `spec.containers[*].image`: `[*]` for list items and map values, `[key]` for map keys.
    let mut rendered = String::with_capacity(64);
    for step in rest {
        match &**step {
            "@items" | "@values" => rendered.push_str("[*]"),
            "@keys" => rendered.push_str("[key]"),
            field => {
                if !rendered.is_empty() {
                    rendered.push('.');
                }
                rendered.push_str(field);
            }
        }
    }
    let mut out = String::with_capacity(rendered.len() + root.len() + 48);
    out.push('`');
    match node {
        Some(node) => {
            let missing = match node.shape {
                Shape::List(_) => "maxItems",
                Shape::Map(_) => "maxProperties",
                Shape::Leaf | Shape::Object(_) => "maxLength",
            };
            out.push_str(&rendered);
            out.push('`');
            if &**root == "params" {
                out.push_str(" of the params kind");
            }
            out.push_str(" has no ");
            out.push_str(missing);
        }
        None => {
            out.push_str(root);
            if !rendered.is_empty() && !rendered.starts_with('[') {
                out.push('.');
            }
            out.push_str(&rendered);
            out.push_str("` has no known size (no schema)");
        }
    }
    Some(Arc::from(out))
}

impl<'s> SchemaSizeEstimator<'s> {
    /// The root node of a variable name.
    pub fn root(&self, variable: &str) -> Option<&'s SizeNode> {
        match variable {
            "object" | "oldObject" => self.object,
            "params" => self.params,
            _ => None,
        }
    }

    /// What the schemas have at `path` (root variable first, not empty): from the memo's
    /// answers when it has them (recording the path in its trace, once per trace), else
    /// looked up (and kept in the memo).
    fn found(&self, path: &[Rc<str>]) -> Found {
        let (root, rest) = path.split_first()?;
        let Some(memo) = self.memo else {
            return self
                .root(root)
                .and_then(|r| r.at_path(rest))
                .map(|n| (n.max_elements, n.bound));
        };
        let mut memo = memo.borrow_mut();
        let memo = &mut *memo;
        memo.answers.for_roots(self.object, self.params);
        let stamp = memo.answers.stamp;
        if let Some(answer) = memo.answers.get_mut(path) {
            let found = answer.found;
            if let Some(trace) = &mut memo.trace
                && answer.stamp != stamp
            {
                answer.stamp = stamp;
                trace.push((Rc::clone(&answer.path), found));
            }
            return found;
        }
        let found = self
            .root(root)
            .and_then(|r| memo.at_path(r, rest))
            .map(|n| (n.max_elements, n.bound));
        memo.answers.insert(path, found);
        if let Some(trace) = &mut memo.trace
            && let Some(answer) = memo.answers.get_mut(path)
        {
            answer.stamp = stamp;
            trace.push((Rc::clone(&answer.path), found));
        }
        found
    }

    /// Whether these schemas answer every path of `trace` (another estimate's, with other
    /// roots) as it records. Looks the paths up (and keeps them) in the memo, not traced.
    pub fn answers_alike(&self, trace: &SizeTrace) -> bool {
        let tracing = self
            .memo
            .map(|m| m.borrow_mut().trace.take())
            .unwrap_or_default();
        let alike = trace
            .0
            .iter()
            .all(|(path, found)| self.found(path) == *found);
        if let Some(memo) = self.memo {
            memo.borrow_mut().trace = tracing;
        }
        alike
    }
}

/// Whether the cost estimators (cel-go's port, `crate::cel::cost`, and Kubernetes' here) read
/// an object type's name, beyond comparing types with each other: `_==_` of the Kubernetes
/// library types (`CostEstimator.EstimateCallCost`, `kubernetes.*`) and the key types of
/// `sortBy` (`crate::cel::cost::reads_type_name`). Two kinds whose checked types differ only
/// in other object names get the same estimate (docs/cost.md).
pub fn estimators_read_type_name(name: &str) -> bool {
    name.starts_with("kubernetes.") || crate::cel::cost::reads_type_name(name)
}

/// Adds a path to the recorded ones unless it is there already (the estimator sizes the same
/// node several times).
fn record_path(record: &RefCell<Vec<Vec<Rc<str>>>>, path: &[Rc<str>]) {
    let mut record = record.borrow_mut();
    let same = |p: &Vec<Rc<str>>| {
        p.len() == path.len()
            && p.iter()
                .zip(path)
                .all(|(a, b)| Rc::ptr_eq(a, b) || **a == **b)
    };
    if !record.iter().any(same) {
        record.push(path.to_vec());
    }
}

impl<'s> CostEstimator for SchemaSizeEstimator<'s> {
    /// `sizeEstimator.EstimateSize`: follows the path from its root and answers
    /// `{Min: 0, Max: uint64(MaxElements)}`; `None` for an empty or unknown path.
    fn estimate_size(&self, node: &AstNode<'_>) -> Option<SizeEstimate> {
        let (_, rest) = node.path.split_first()?;
        let found = self.found(&node.path);
        if found.is_none()
            && let Some(record) = self.record
            && matches!(
                node.ty.kind(),
                Kind::List | Kind::Map | Kind::String | Kind::Bytes
            )
        {
            record_path(record, &node.path);
        }
        let (max_elements, bound) = found?;
        if let Some(record) = self.record
            && bound == Bound::Request
            && !rest.is_empty()
        {
            record_path(record, &node.path);
        }
        // Go's uint64(int64) conversion.
        Some(SizeEstimate {
            min: 0,
            max: max_elements as u64,
        })
    }

    /// `sizeEstimator.EstimateCallCost` returns nil.
    fn estimate_call_cost(
        &self,
        _: &str,
        _: &str,
        _: Option<&AstNode<'_>>,
        _: &[AstNode<'_>],
    ) -> Option<CallEstimate> {
        None
    }
}

/// [`estimate_cost`] with the schema sizes: cel-go `Env.EstimateCost` with
/// `&library.CostEstimator{SizeEstimator: sizes}`.
pub fn estimate_cost_sized(
    env: &Env,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
    sizes: &SchemaSizeEstimator<'_>,
) -> Result<CostEstimate, crate::cel::cost::Unsupported> {
    static OPTIONS: std::sync::LazyLock<CostOptions> = std::sync::LazyLock::new(kube_cost_options);
    crate::cel::cost::estimate_cost_with(
        env,
        parsed,
        types,
        &KubeCostEstimator {
            size_estimator: Some(sizes),
        },
        &OPTIONS,
    )
}

/// The cost options of the Kubernetes environment: k8s.io/apiserver
/// `pkg/cel/environment/base.go` sets `checker.PresenceTestHasCost(false)`, and the
/// extension libraries it enables register their estimators (`ext.Sets()`, `ext.Lists()` at
/// version 3; the strings library at version 2 registers none).
pub fn kube_cost_options() -> CostOptions {
    let mut o = CostOptions::default().with_ext_sets().with_ext_lists_v3();
    o.presence_test_has_cost = false;
    o
}

/// `pkg/cel/library/cost.go` `selectorCostEstimate`.
fn selector_cost_estimate(len: SizeEstimate) -> CostEstimate {
    let parse = len.multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR);
    let requirements = len.multiply_by_cost_factor(0.5);
    let requirement_cost = requirements
        .multiply_by_cost_factor((LIST_CREATE_BASE_COST + STRUCT_CREATE_BASE_COST) as f64);
    CostEstimate::fixed(LIST_CREATE_BASE_COST)
        .add(parse)
        .add(requirement_cost)
}

fn fixed(n: u64) -> Option<CallEstimate> {
    Some(CallEstimate {
        cost: CostEstimate::fixed(n),
        result_size: None,
    })
}

fn cost_only(cost: CostEstimate) -> Option<CallEstimate> {
    Some(CallEstimate {
        cost,
        result_size: None,
    })
}

fn object_name(t: &Type) -> Option<&str> {
    match t.type_kind() {
        TypeKind::Struct(n) => Some(n),
        _ => None,
    }
}

impl KubeCostEstimator<'_> {
    /// `pkg/cel/library/cost.go` `CostEstimator.sizeEstimate`.
    fn size(&self, n: &AstNode<'_>) -> SizeEstimate {
        n.computed_size
            .or_else(|| self.estimate_size(n))
            .unwrap_or(SizeEstimate::UNKNOWN)
    }

    /// `pkg/cel/library/cost.go` `CostEstimator.listElementNode`.
    fn list_element_node<'e>(&self, list: &AstNode<'e>) -> Option<AstNode<'e>> {
        let elem = match list.ty.type_kind() {
            TypeKind::List(e) => e.clone(),
            TypeKind::Map(k, _) => k.clone(),
            TypeKind::Opaque(_, params) => params.first()?.clone(),
            TypeKind::Type(Some(t)) => t.clone(),
            _ => return None,
        };
        let mut path = list.path.to_vec();
        if !path.is_empty() {
            thread_local! {
                // One shared string for the step (the nodes of list elements are built often).
                static ITEMS: Rc<str> = Rc::from("@items");
            }
            path.push(ITEMS.with(Rc::clone));
        }
        Some(AstNode {
            path: std::borrow::Cow::Owned(path),
            ty: elem,
            expr: None,
            computed_size: None,
        })
    }
}

impl CostEstimator for KubeCostEstimator<'_> {
    /// `pkg/cel/library/cost.go` `CostEstimator.EstimateSize`.
    fn estimate_size(&self, node: &AstNode<'_>) -> Option<SizeEstimate> {
        self.size_estimator.and_then(|s| s.estimate_size(node))
    }

    /// `pkg/cel/library/cost.go` `CostEstimator.EstimateCallCost`.
    fn estimate_call_cost(
        &self,
        function: &str,
        overload_id: &str,
        target: Option<&AstNode<'_>>,
        args: &[AstNode<'_>],
    ) -> Option<CallEstimate> {
        let trav = STRING_TRAVERSAL_COST_FACTOR;
        match function {
            "check" => fixed(350_000),
            "serviceAccount" | "path" | "group" | "resource" | "subresource" | "namespace"
            | "name" | "allowed" | "reason" | "error" | "errored" => fixed(1),
            "fieldSelector" | "labelSelector" if args.len() == 1 => {
                cost_only(selector_cost_estimate(self.size(&args[0])))
            }
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
                let target = target?;
                let mut el_cost = CostEstimate::fixed(1);
                if let Some(el) = self.list_element_node(target) {
                    if matches!(el.ty.type_kind(), TypeKind::String | TypeKind::Bytes) {
                        let sz = self.size(&el);
                        el_cost = el_cost.add(sz.multiply_by_cost_factor(trav));
                    }
                    cost_only(self.size(target).multiply_by_cost(el_cost))
                } else if function == "includes" {
                    cost_only(self.size(target).multiply_by_cost(el_cost))
                } else {
                    cost_only(self.size(target).multiply_by_cost_factor(trav))
                }
            }
            "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
                let sz = self.size(&args[0]);
                Some(CallEstimate {
                    cost: sz.multiply_by_cost_factor(trav),
                    result_size: Some(sz),
                })
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let sz = self.size(target?);
                Some(CallEstimate {
                    cost: sz.multiply_by_cost_factor(trav),
                    result_size: Some(sz),
                })
            }
            "replace" if target.is_some() && args.len() >= 2 => {
                let sz = self.size(target?);
                let to_replace = self.size(&args[0]);
                let replace_with = self.size(&args[1]);
                // The largest result: the fewest characters per replacement; the smallest: the
                // most.
                let (count_max, retained_max) =
                    replacement_bound(sz.max, to_replace.min, replace_with.max <= to_replace.min);
                let (count_min, retained_min) =
                    replacement_bound(sz.min, to_replace.max, to_replace.max <= replace_with.min);
                let count = SizeEstimate {
                    min: count_min,
                    max: count_max,
                };
                let retained = SizeEstimate {
                    min: retained_min,
                    max: retained_max,
                };
                let size = count.multiply(replace_with).add(retained);
                Some(CallEstimate {
                    cost: sz.multiply_by_cost_factor(2.0 * trav),
                    result_size: Some(size),
                })
            }
            "split" => {
                let sz = self.size(target?);
                let mut max = sz.max;
                if args.len() > 1
                    && let Some(e) = args[1].expr
                    && let cel::common::ast::Expr::Literal(cel::common::ast::LiteralValue::Int(i)) =
                        &e.expr
                {
                    max = *i.inner() as u64;
                }
                Some(CallEstimate {
                    cost: sz.multiply_by_cost_factor(2.0 * trav),
                    result_size: Some(SizeEstimate { min: 0, max }),
                })
            }
            "join" => {
                let target = target?;
                let mut sz = SizeEstimate { min: 0, max: 0 };
                let list_size = self.size(target);
                if let Some(el) = self.list_element_node(target) {
                    sz = list_size.multiply(self.size(&el));
                }
                if let Some(sep) = args.first() {
                    let sep_size = self.size(sep);
                    let seps = SizeEstimate {
                        min: list_size.min.saturating_sub(1),
                        max: list_size.max.saturating_sub(1),
                    };
                    sz = sz.add(sep_size.multiply(seps));
                }
                Some(CallEstimate {
                    cost: sz.multiply_by_cost_factor(trav),
                    result_size: Some(sz),
                })
            }
            "find" | "findAll" if target.is_some() && !args.is_empty() => {
                let sz = self.size(target?);
                let str_cost = sz.add(SizeEstimate::fixed(1)).multiply_by_cost_factor(trav);
                let re_cost = self
                    .size(&args[0])
                    .multiply_by_cost_factor(REGEX_STRING_LENGTH_COST_FACTOR);
                Some(CallEstimate {
                    cost: str_cost.multiply(re_cost),
                    result_size: Some(SizeEstimate {
                        min: 0,
                        max: sz.max,
                    }),
                })
            }
            "cidr" | "isIP" | "isCIDR" | "quantity" | "isQuantity" | "semver" | "isSemver"
                if !args.is_empty() =>
            {
                cost_only(self.size(&args[0]).multiply_by_cost_factor(trav))
            }
            "ip" if overload_id == "cidr_ip" => fixed(1),
            "ip" if !args.is_empty() => {
                cost_only(self.size(&args[0]).multiply_by_cost_factor(trav))
            }
            "ip.isCanonical" if !args.is_empty() => {
                cost_only(self.size(&args[0]).multiply_by_cost_factor(2.0 * trav))
            }
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => fixed(1),
            "containsIP" | "containsCIDR" if !args.is_empty() => {
                let sz = SizeEstimate { min: 4, max: 16 };
                let mut cost = sz.add(sz).multiply_by_cost_factor(trav);
                if function == "containsCIDR" {
                    cost = cost.add(sz.multiply_by_cost_factor(trav));
                    cost = cost.add(CostEstimate::fixed(1));
                }
                if overload_id == "cidr_contains_ip_string"
                    || overload_id == "cidr_contains_cidr_string"
                {
                    cost = cost.add(self.size(&args[0]).as_cost().multiply_by_cost_factor(trav));
                }
                cost_only(cost)
            }
            "validate" if !args.is_empty() => cost_only(
                self.size(&args[0])
                    .multiply_by_cost_factor(trav)
                    .multiply_by_cost_factor(
                        MAX_NAME_FORMAT_REGEX_SIZE * REGEX_STRING_LENGTH_COST_FACTOR,
                    ),
            ),
            "format.named" => fixed(1),
            "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "isGreaterThan"
            | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor" | "patch" => fixed(1),
            "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath" | "getQuery" => {
                fixed(1)
            }
            "_==_" if args.len() == 2 => {
                let (lhs, rhs) = (&args[0], &args[1]);
                if lhs.ty != rhs.ty {
                    return None;
                }
                match lhs.ty.type_kind() {
                    TypeKind::Opaque(n, _) if &**n == "net.IP" || &**n == "net.CIDR" => fixed(1),
                    TypeKind::Struct(_) => match object_name(&lhs.ty)? {
                        "kubernetes.Quantity"
                        | "kubernetes.authorization.Authorizer"
                        | "kubernetes.authorization.PathCheck"
                        | "kubernetes.authorization.GroupCheck"
                        | "kubernetes.authorization.ResourceCheck"
                        | "kubernetes.authorization.Decision"
                        | "kubernetes.Semver" => fixed(1),
                        "kubernetes.NamedFormat" => cost_only(
                            CostEstimate {
                                min: 1,
                                max: MAX_FORMAT_SIZE,
                            }
                            .multiply_by_cost_factor(trav),
                        ),
                        "kubernetes.URL" => {
                            // Upstream reads rhs.ComputedSize() twice (kept).
                            let size = rhs
                                .computed_size
                                .map_or(SizeEstimate::fixed(1), |r| r.union(r));
                            cost_only(
                                CostEstimate {
                                    min: 1,
                                    max: size.max,
                                }
                                .multiply_by_cost_factor(trav),
                            )
                        }
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Go `uint64(math.Ceil(float64(a) / float64(b)))`.
/// One bound of `replace`'s (replacement count, retained size) for a string of `size`
/// characters and a searched string of `to_replace` characters (the same computation for the
/// max and the min in `CostEstimator.EstimateCallCost`, case `replace`): an
/// empty searched string matches between every two characters, and `no_growth` (the
/// replacement is not longer than the searched string) keeps the input's size.
fn replacement_bound(size: u64, to_replace: u64, no_growth: bool) -> (u64, u64) {
    if to_replace == 0 {
        (size.saturating_add(1), size)
    } else if no_growth {
        (0, size)
    } else {
        (go_ceil_div(size, to_replace), 0)
    }
}

fn go_ceil_div(a: u64, b: u64) -> u64 {
    let v = ((a as f64) / (b as f64)).ceil();
    if v >= 18_446_744_073_709_551_616.0 {
        // Go's float->uint64 conversion of an out-of-range value is implementation
        // specific; on amd64 it gives 1<<63.
        1 << 63
    } else {
        v as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s_env::{KindDecls, Params, PolicyEnv, Target};

    fn cost(text: &str) -> (u64, u64) {
        let env =
            PolicyEnv::new(Target::upstream(), KindDecls::untyped(Params::Absent)).expect("env");
        let c = env.compile(text).expect("compiles");
        let est = estimate_cost(env.env(), &c.parsed, &c.types).expect("estimated");
        (est.min, est.max)
    }

    fn leaf(max: i64, bound: Bound) -> SizeNode {
        SizeNode {
            max_elements: max,
            min_serialized_size: 2,
            bound,
            shape: Shape::Leaf,
        }
    }

    fn list(max: i64, bound: Bound, elem: SizeNode) -> SizeNode {
        SizeNode {
            max_elements: max,
            min_serialized_size: 2,
            bound,
            shape: Shape::List(Box::new(elem)),
        }
    }

    // The answers kept from one estimate to the next give the sizes and reasons of a fresh
    // lookup, also for the same steps under other addresses and after the roots change.
    #[test]
    fn kept_answers_read_like_fresh_lookups() {
        let object = SizeNode::object(
            2,
            vec![
                (
                    "containers".into(),
                    list(241_978, Bound::Request, leaf(3_145_726, Bound::Request)),
                ),
                ("name".into(), leaf(253, Bound::Declared)),
            ],
        );
        let params = SizeNode::object(
            2,
            vec![(
                "names".into(),
                list(1_048_575, Bound::Request, leaf(8, Bound::Declared)),
            )],
        );
        let step = |s: &str| -> Rc<str> { Rc::from(s) };
        let (obj, cont, items, name, par, names, req) = (
            step("object"),
            step("containers"),
            step("@items"),
            step("name"),
            step("params"),
            step("names"),
            step("request"),
        );
        let paths: Vec<Vec<Rc<str>>> = vec![
            vec![obj.clone(), cont.clone()],
            vec![obj.clone(), cont.clone(), items.clone()],
            vec![obj.clone(), name.clone()],
            vec![par.clone(), names.clone()],
            vec![req.clone()],
            vec![obj.clone(), step("missing")],
            // The same steps under other addresses.
            vec![step("object"), step("containers")],
        ];
        let node = |p: &Vec<Rc<str>>| AstNode {
            path: std::borrow::Cow::Owned(p.clone()),
            ty: Type::list(Type::string()),
            expr: None,
            computed_size: None,
        };
        let fresh_record = RefCell::new(Vec::new());
        let fresh = SchemaSizeEstimator {
            object: Some(&object),
            params: Some(&params),
            record: Some(&fresh_record),
            memo: None,
        };
        let want: Vec<Option<SizeEstimate>> = paths
            .iter()
            .map(|p| fresh.estimate_size(&node(p)))
            .collect();
        let want_reasons = unbounded_reasons(&fresh, &fresh_record.borrow());
        assert_eq!(
            want_reasons.iter().map(|r| &**r).collect::<Vec<_>>(),
            [
                "`containers[*]` has no maxLength",
                "`containers` has no maxItems",
                "`names` of the params kind has no maxItems",
                "`object.missing` has no known size (no schema)",
                "`request` has no known size (no schema)",
            ]
        );
        let mut answers = SizeAnswers::default();
        for round in 0..3 {
            let record = RefCell::new(Vec::new());
            let memo = RefCell::new(PathMemo::with_answers(std::mem::take(&mut answers)));
            // The third round swaps the roots: the kept answers must not be used.
            let (o, p) = if round == 2 {
                (Some(&params), Some(&object))
            } else {
                (Some(&object), Some(&params))
            };
            let sizes = SchemaSizeEstimator {
                object: o,
                params: p,
                record: Some(&record),
                memo: Some(&memo),
            };
            let got: Vec<Option<SizeEstimate>> = paths
                .iter()
                .map(|p| sizes.estimate_size(&node(p)))
                .collect();
            let reasons = unbounded_reasons_memo(&sizes, &record.borrow(), &memo);
            let plain_record = RefCell::new(Vec::new());
            let plain = SchemaSizeEstimator {
                record: Some(&plain_record),
                memo: None,
                ..sizes
            };
            let plain_got: Vec<Option<SizeEstimate>> = paths
                .iter()
                .map(|p| plain.estimate_size(&node(p)))
                .collect();
            assert_eq!(got, plain_got, "round {round}");
            assert_eq!(
                reasons,
                unbounded_reasons(&plain, &plain_record.borrow()),
                "round {round}"
            );
            if round < 2 {
                assert_eq!(got, want, "round {round}");
                assert_eq!(reasons, want_reasons, "round {round}");
            } else {
                assert_ne!(got, want);
            }
            answers = memo.borrow_mut().take_answers();
        }
    }

    // The expected numbers are cel-go's (tests/golden/upstream-cost-1.37.jsonl).
    #[test]
    fn cost_of_kubernetes_library_calls() {
        assert_eq!(
            cost("authorizer.group('apps').resource('deployments').check('get').allowed()"),
            (350_004, 350_004)
        );
        assert_eq!(cost("has(object.spec)"), (1, 1));
        assert_eq!(
            cost("quantity('1Gi').isGreaterThan(quantity('1Mi'))"),
            (3, 3)
        );
        assert_eq!(cost("[2, 1].sortBy(x, -x)"), (80, 80));
        assert_eq!(
            cost("object.spec.containers.all(c, c.image.startsWith('r/'))"),
            (2, u64::MAX)
        );
    }
}
