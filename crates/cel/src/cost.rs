//! Static cost estimation, ported from cel-go v0.29.2 `checker/cost.go` (`checker.Cost`).
//!
//! [`estimate_cost`] walks a checked expression and returns the minimum and maximum cost
//! cel-go's estimator computes for it, with the same hooks: a [`CostEstimator`] gives sizes
//! of variables/fields ([`CostEstimator::estimate_size`]) and costs of library calls
//! ([`CostEstimator::estimate_call_cost`]). Knows nothing about Kubernetes.
//!
//! The `cel` parser expands the standard macros into the same comprehensions as cel-go. Calls
//! the `cel` parser leaves unexpanded (call-shaped macros such as two-variable
//! comprehensions, `optMap`, `cel.bind`) are not estimated: [`estimate_cost`] returns
//! [`Unsupported`] naming the call.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Add;
use std::rc::Rc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};

use super::checker::CheckedTypes;
use super::env::{Env, WordMap};
use super::macros::{Synth, SynthComprehension};
use super::parse::ParsedExpr;
use super::types::{Kind, Type};

/// cel-go `common.SelectAndIdentCost`.
pub const SELECT_AND_IDENT_COST: u64 = 1;
/// cel-go `common.ConstCost`.
pub const CONST_COST: u64 = 0;
/// cel-go `common.ListCreateBaseCost`.
pub const LIST_CREATE_BASE_COST: u64 = 10;
/// cel-go `common.MapCreateBaseCost`.
pub const MAP_CREATE_BASE_COST: u64 = 30;
/// cel-go `common.StructCreateBaseCost`.
pub const STRUCT_CREATE_BASE_COST: u64 = 40;
/// cel-go `common.StringTraversalCostFactor`.
pub const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
/// cel-go `common.RegexStringLengthCostFactor`.
pub const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;

/// cel-go `checker/cost.go` `addUint64NoOverflow`.
fn add_sat(x: u64, y: u64) -> u64 {
    x.saturating_add(y)
}

/// cel-go `checker/cost.go` `multiplyUint64NoOverflow`.
fn mul_sat(x: u64, y: u64) -> u64 {
    x.saturating_mul(y)
}

/// cel-go `checker/cost.go` `multiplyByCostFactor`: ceil(x * y), saturating at u64::MAX.
pub fn multiply_by_cost_factor(x: u64, y: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && y > 0.0 && xf > (u64::MAX as f64) / y {
        return u64::MAX;
    }
    let ceil = (xf * y).ceil();
    if ceil >= 18_446_744_073_709_551_616.0 {
        return u64::MAX;
    }
    ceil as u64
}

/// cel-go `checker.SizeEstimate`: the minimum and maximum size of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeEstimate {
    /// Minimum.
    pub min: u64,
    /// Maximum.
    pub max: u64,
}

/// cel-go `checker.CostEstimate`: the minimum and maximum cost of an evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CostEstimate {
    /// Minimum.
    pub min: u64,
    /// Maximum.
    pub max: u64,
}

/// cel-go `SizeEstimate.Add` (saturating).
impl Add for SizeEstimate {
    type Output = SizeEstimate;
    fn add(self, o: SizeEstimate) -> SizeEstimate {
        SizeEstimate {
            min: add_sat(self.min, o.min),
            max: add_sat(self.max, o.max),
        }
    }
}

impl SizeEstimate {
    /// cel-go `UnknownSizeEstimate`: 0 to u64::MAX.
    pub const UNKNOWN: SizeEstimate = SizeEstimate {
        min: 0,
        max: u64::MAX,
    };
    /// cel-go `FixedSizeEstimate`.
    pub fn fixed(n: u64) -> Self {
        SizeEstimate { min: n, max: n }
    }
    /// cel-go `SizeEstimate.Multiply`.
    pub fn multiply(self, o: SizeEstimate) -> Self {
        SizeEstimate {
            min: mul_sat(self.min, o.min),
            max: mul_sat(self.max, o.max),
        }
    }
    /// cel-go `SizeEstimate.MultiplyByCostFactor`.
    pub fn multiply_by_cost_factor(self, f: f64) -> CostEstimate {
        CostEstimate {
            min: multiply_by_cost_factor(self.min, f),
            max: multiply_by_cost_factor(self.max, f),
        }
    }
    /// cel-go `SizeEstimate.MultiplyByCost`.
    pub fn multiply_by_cost(self, c: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: mul_sat(self.min, c.min),
            max: mul_sat(self.max, c.max),
        }
    }
    /// cel-go `SizeEstimate.Union`.
    pub fn union(self, o: SizeEstimate) -> Self {
        SizeEstimate {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
    /// cel-go `SizeEstimate.AsCost` / `checker.CostEstimate(size)`.
    pub fn as_cost(self) -> CostEstimate {
        CostEstimate {
            min: self.min,
            max: self.max,
        }
    }
}

/// cel-go `CostEstimate.Add` (saturating).
impl Add for CostEstimate {
    type Output = CostEstimate;
    fn add(self, o: CostEstimate) -> CostEstimate {
        CostEstimate {
            min: add_sat(self.min, o.min),
            max: add_sat(self.max, o.max),
        }
    }
}

impl CostEstimate {
    /// cel-go `FixedCostEstimate`.
    pub fn fixed(n: u64) -> Self {
        CostEstimate { min: n, max: n }
    }
    /// cel-go `CostEstimate.Multiply`.
    pub fn multiply(self, o: CostEstimate) -> Self {
        CostEstimate {
            min: mul_sat(self.min, o.min),
            max: mul_sat(self.max, o.max),
        }
    }
    /// cel-go `CostEstimate.MultiplyByCostFactor`.
    pub fn multiply_by_cost_factor(self, f: f64) -> Self {
        CostEstimate {
            min: multiply_by_cost_factor(self.min, f),
            max: multiply_by_cost_factor(self.max, f),
        }
    }
    /// cel-go `CostEstimate.Union`.
    pub fn union(self, o: CostEstimate) -> Self {
        CostEstimate {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// cel-go `checker.CallEstimate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallEstimate {
    /// The cost of the call itself (without its arguments).
    pub cost: CostEstimate,
    /// The size of the result, if known.
    pub result_size: Option<SizeEstimate>,
}

/// cel-go `checker.AstNode`: what an estimator learns about a node.
#[derive(Clone, Debug)]
pub struct AstNode<'e> {
    /// The field path (`object`, `spec`, `containers`, `@items`, ...); empty if unknown.
    /// Shared strings: the estimator builds a node for every argument of every call, and
    /// copying the steps was a large part of its time (docs/cost.md, benchmark); borrowed
    /// when the node only lives for one question to the estimator.
    pub path: Cow<'e, [Rc<str>]>,
    /// The checked type.
    pub ty: Type,
    /// The expression (None for synthetic nodes such as list elements).
    pub expr: Option<&'e IdedExpr>,
    /// The size the estimator already computed for this node.
    pub computed_size: Option<SizeEstimate>,
}

/// cel-go `checker.CostEstimator`.
pub trait CostEstimator {
    /// The size of a variable or field, if the estimator knows it.
    fn estimate_size(&self, node: &AstNode<'_>) -> Option<SizeEstimate>;
    /// The cost of a library call, if the estimator knows it (argument costs are added by
    /// the caller).
    fn estimate_call_cost(
        &self,
        function: &str,
        overload_id: &str,
        target: Option<&AstNode<'_>>,
        args: &[AstNode<'_>],
    ) -> Option<CallEstimate>;
}

/// An estimator that knows nothing (every hook answers `None`).
pub struct NoEstimator;

impl CostEstimator for NoEstimator {
    fn estimate_size(&self, _: &AstNode<'_>) -> Option<SizeEstimate> {
        None
    }
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

/// cel-go `checker.FunctionEstimator`: the cost of one overload, given the estimator, the
/// target and the arguments (argument costs are added by the caller).
pub type FunctionEstimator =
    fn(&dyn CostEstimator, Option<&AstNode<'_>>, &[AstNode<'_>]) -> Option<CallEstimate>;

/// cel-go `checker.CostOption`s: the presence test cost and per-overload estimators (what
/// libraries register with `cel.CostEstimatorOptions`).
#[derive(Clone)]
pub struct CostOptions {
    /// cel-go `checker.PresenceTestHasCost` (default true: `has()` costs 1).
    pub presence_test_has_cost: bool,
    /// cel-go `checker.OverloadCostEstimate`, by overload id (with a fast hash: the
    /// estimator looks up every overload of every call; SipHash showed in the benchmark's
    /// profile, docs/cost.md).
    pub(crate) overload_estimators: WordMap<String, FunctionEstimator>,
}

impl Default for CostOptions {
    fn default() -> Self {
        CostOptions {
            presence_test_has_cost: true,
            overload_estimators: WordMap::default(),
        }
    }
}

impl CostOptions {
    /// Adds the estimators of cel-go's `ext.Sets()` (ext/sets.go `CompileOptions`).
    pub fn with_ext_sets(mut self) -> Self {
        for (id, f) in ext::SETS {
            self.overload_estimators.insert(id.to_string(), *f);
        }
        self
    }

    /// Adds the estimators of cel-go's `ext.Lists()` at version 3 or later (ext/lists.go
    /// `CompileOptions`).
    pub fn with_ext_lists_v3(mut self) -> Self {
        for (id, f) in ext::LISTS {
            self.overload_estimators.insert(id.to_string(), *f);
        }
        for t in ext::COMPARABLE_TYPE_NAMES {
            let f: FunctionEstimator = if *t == "string" || *t == "bytes" {
                ext::LIST_SORT_STRINGS
            } else {
                ext::LIST_SORT
            };
            self.overload_estimators.insert(format!("list_{t}_sort"), f);
            let g: FunctionEstimator = if *t == "string" || *t == "bytes" {
                ext::LIST_SORT_BY_STRINGS
            } else {
                ext::LIST_SORT_BY
            };
            self.overload_estimators
                .insert(format!("list_{t}_sortByAssociatedKeys"), g);
        }
        self
    }
}

/// Whether the estimator reads an object type's name, beyond comparing types with each other:
/// a `sortBy` key type is looked up by name among cel-go ext/lists.go's comparable types
/// ([`Coster::sort_by_overloads`]). Every other decision depends on the kinds of types, on
/// whether two types are equal, and on the estimator's hooks.
pub fn reads_type_name(name: &str) -> bool {
    ext::COMPARABLE_TYPE_NAMES.contains(&name)
}

/// A construct the estimator does not handle (a call-shaped macro left unexpanded by the
/// `cel` parser); carries the function name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cost estimation of the call-shaped macro '{}' is not supported",
            self.0
        )
    }
}

/// cel-go `checker/cost.go` `entrySizeEstimate`.
#[derive(Clone, Copy, Debug)]
struct EntrySize {
    container: Kind,
    key: SizeEstimate,
    val: SizeEstimate,
}

/// cel-go `entrySizeEstimate.union` (nil if either is nil).
fn entry_union(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
    let (a, b) = (a?, b?);
    Some(EntrySize {
        container: a.container,
        key: a.key.union(b.key),
        val: a.val.union(b.val),
    })
}

/// A field path as cel-go holds it: a Go `[]string`. cel-go builds paths with
/// `append(c.getPath(x), step)` and stores the results, so two paths appended to the same
/// slice share its backing array when it has spare capacity, and the later `append`
/// overwrites the element the earlier one wrote (e.g. `pushIterKey`'s `@keys` becomes
/// `pushIterValue`'s `@values` for the key variable of a two-variable comprehension whose
/// range path has spare capacity). This type reproduces Go's slice semantics (length,
/// capacity, shared backing array, and the capacity `append` picks: runtime `growslice` /
/// `nextslicecap` / `roundupsize` of Go 1.26 for 16-byte elements) so that the estimator sees
/// the same paths as cel-go.
#[derive(Clone, Debug, Default)]
struct GoPath {
    /// The backing array (`None` for a nil slice); its length is how far it was written.
    buf: Option<Rc<RefCell<Vec<Rc<str>>>>>,
    len: usize,
    cap: usize,
}

/// Go 1.26 `internal/runtime/gc` `SizeClassToSize`.
const GO_SIZE_CLASSES: [usize; 68] = [
    0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
    352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792,
    2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728,
    10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672,
    32768,
];

/// Go 1.26 runtime `roundupsize(size, noscan=false)` (msize.go): the size class of a small
/// object (with the 8-byte malloc header above 512 bytes, subtracted again), or whole pages.
fn go_roundupsize(size: usize) -> usize {
    const MAX_SMALL_SIZE: usize = 32768;
    const MALLOC_HEADER_SIZE: usize = 8;
    const MIN_SIZE_FOR_MALLOC_HEADER: usize = 512;
    const PAGE_SIZE: usize = 8192;
    if size <= MAX_SMALL_SIZE - MALLOC_HEADER_SIZE {
        let req = if size > MIN_SIZE_FOR_MALLOC_HEADER {
            size + MALLOC_HEADER_SIZE
        } else {
            size
        };
        let class = GO_SIZE_CLASSES
            .iter()
            .copied()
            .find(|c| *c >= req)
            .unwrap_or(MAX_SMALL_SIZE);
        return class - (req - size);
    }
    size.checked_next_multiple_of(PAGE_SIZE).unwrap_or(size)
}

/// Go 1.26 runtime `nextslicecap` followed by `growslice`'s rounding for `[]string`.
fn go_grow_cap(new_len: usize, old_cap: usize) -> usize {
    const ELEM: usize = 16;
    let double = old_cap.saturating_mul(2);
    let cap = if new_len > double {
        new_len
    } else if old_cap < 256 {
        double
    } else {
        let mut c = old_cap;
        while c < new_len {
            c = c.saturating_add((c + 3 * 256) >> 2);
        }
        c
    };
    match cap.checked_mul(ELEM) {
        Some(bytes) => go_roundupsize(bytes) / ELEM,
        None => cap,
    }
}

impl GoPath {
    /// `[]string{name}`.
    fn single(name: impl Into<Rc<str>>) -> Self {
        GoPath {
            buf: Some(Rc::new(RefCell::new(vec![name.into()]))),
            len: 1,
            cap: 1,
        }
    }

    /// Go's `append(p, step)`.
    fn append(&self, step: impl Into<Rc<str>>) -> GoPath {
        let step = step.into();
        match &self.buf {
            Some(buf) if self.len < self.cap => {
                let mut b = buf.borrow_mut();
                if b.len() > self.len {
                    b[self.len] = step;
                } else {
                    b.push(step);
                }
                GoPath {
                    buf: Some(Rc::clone(buf)),
                    len: self.len + 1,
                    cap: self.cap,
                }
            }
            _ => {
                let new_len = self.len + 1;
                let cap = go_grow_cap(new_len, self.cap);
                // The whole capacity at once: later appends within it write in place.
                let mut v = Vec::with_capacity(cap);
                if let Some(buf) = &self.buf {
                    v.extend(buf.borrow().iter().take(self.len).cloned());
                }
                v.push(step);
                GoPath {
                    buf: Some(Rc::new(RefCell::new(v))),
                    len: new_len,
                    cap,
                }
            }
        }
    }

    /// The elements as they read now.
    fn to_vec(&self) -> Vec<Rc<str>> {
        match &self.buf {
            Some(buf) => buf.borrow().iter().take(self.len).cloned().collect(),
            None => Vec::new(),
        }
    }

    /// The first element.
    fn first_is(&self, f: impl Fn(&str) -> bool) -> bool {
        match &self.buf {
            Some(buf) if self.len > 0 => buf.borrow().first().is_some_and(|p| f(p)),
            _ => false,
        }
    }
}

/// cel-go `checker/cost.go` `localVar`.
#[derive(Clone, Debug)]
struct LocalVar {
    path: GoPath,
    size: Option<SizeEstimate>,
    entry_size: Option<EntrySize>,
}

/// cel-go `checker/cost.go` `coster`.
struct Coster<'a> {
    env: &'a Env,
    types: &'a CheckedTypes,
    estimator: &'a dyn CostEstimator,
    // The maps are keyed by node id ([`IdMap`]) or variable name, and come from the last
    // estimate on this thread ([`Buffers`]): the estimate runs for every expression and kind
    // of every checked policy (docs/cost.md, benchmark), and allocating, growing and freeing
    // its maps was a large part of its time. (`steps` of this estimate are `Buffers::steps`
    // too: one string per step, shared by the estimates of a thread.)
    paths: IdMap<GoPath>,
    locals: WordMap<String, Vec<LocalVar>>,
    sizes: IdMap<SizeEstimate>,
    entry_sizes: IdMap<EntrySize>,
    presence_test_cost: CostEstimate,
    overload_estimators: &'a WordMap<String, FunctionEstimator>,
    unsupported: Option<Unsupported>,
    /// The path steps, one shared string each (a path step is appended for every select and
    /// iteration variable; allocating a string each time was a large part of the estimate's
    /// time, docs/cost.md).
    steps: WordMap<Rc<str>, ()>,
    /// The one-step path of each root variable (cel-go `costIdent`'s `[]string{e.Name()}`:
    /// its length equals its capacity, so every `append` to it copies, and sharing one
    /// backing array between the identifiers of the same name reads the same as Go's fresh
    /// slice each time).
    roots: WordMap<Rc<str>, GoPath>,
    /// Overload ids of the calls of macro expansions (not in the checker's records).
    synth_overloads: WordMap<u64, Vec<String>>,
    next_synth_id: u64,
}

/// Estimates the cost of a checked expression (cel-go `checker.Cost` with the default
/// options: a presence test costs 1).
pub fn estimate_cost(
    env: &Env,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
    estimator: &dyn CostEstimator,
) -> Result<CostEstimate, Unsupported> {
    estimate_cost_with(env, parsed, types, estimator, &CostOptions::default())
}

/// [`estimate_cost`] with cost options (cel-go `checker.Cost(ast, estimator, opts...)`).
pub fn estimate_cost_with(
    env: &Env,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
    estimator: &dyn CostEstimator,
    options: &CostOptions,
) -> Result<CostEstimate, Unsupported> {
    let b = BUFFERS.with(|b| b.borrow_mut().take()).unwrap_or_default();
    let mut c = Coster {
        overload_estimators: &options.overload_estimators,
        env,
        types,
        estimator,
        paths: b.paths,
        locals: b.locals,
        sizes: b.sizes,
        entry_sizes: b.entry_sizes,
        presence_test_cost: CostEstimate::fixed(u64::from(options.presence_test_has_cost)),
        unsupported: None,
        steps: b.steps,
        roots: b.roots,
        synth_overloads: b.synth_overloads,
        next_synth_id: 1 << 48,
    };
    let cost = c.cost(parsed.expr());
    let unsupported = c.unsupported.take();
    Buffers {
        paths: c.paths,
        locals: c.locals,
        sizes: c.sizes,
        entry_sizes: c.entry_sizes,
        steps: c.steps,
        roots: c.roots,
        synth_overloads: c.synth_overloads,
    }
    .keep();
    match unsupported {
        Some(u) => Err(u),
        None => Ok(cost),
    }
}

/// A map keyed by node id: a vector for the parser's ids (consecutive from 1), a hash map for
/// the ids of synthetic nodes (above `1 << 48`). The estimator looks up a node's path and
/// sizes several times per node; hashing the ids showed in the benchmark's profile
/// (docs/cost.md).
struct IdMap<V> {
    dense: Vec<Option<V>>,
    sparse: WordMap<u64, V>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            dense: Vec::new(),
            sparse: WordMap::default(),
        }
    }
}

impl<V> IdMap<V> {
    /// Ids below this are kept in the vector.
    const DENSE: u64 = 1 << 16;

    fn get(&self, id: &u64) -> Option<&V> {
        if *id < Self::DENSE {
            self.dense.get(*id as usize)?.as_ref()
        } else {
            self.sparse.get(id)
        }
    }

    fn insert(&mut self, id: u64, v: V) {
        if id < Self::DENSE {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i] = Some(v);
        } else {
            self.sparse.insert(id, v);
        }
    }

    /// Empties the map; `false` when it grew too large to keep for the next estimate.
    fn clear(&mut self) -> bool {
        self.dense.clear();
        self.sparse.clear();
        self.dense.capacity() <= 4096 && self.sparse.capacity() <= 1024
    }
}

/// The maps of one estimate, kept (empty) for the next estimate on the same thread: the
/// estimate runs for every expression and kind of every checked policy, and allocating and
/// freeing its maps each time was a large part of its time (docs/cost.md, benchmark). None
/// of them carries anything from one estimate into the next except `steps` and `roots`,
/// which only share strings (a step's string and a root's one-step path read the same
/// whichever estimate made them).
#[derive(Default)]
struct Buffers {
    paths: IdMap<GoPath>,
    locals: WordMap<String, Vec<LocalVar>>,
    sizes: IdMap<SizeEstimate>,
    entry_sizes: IdMap<EntrySize>,
    steps: WordMap<Rc<str>, ()>,
    roots: WordMap<Rc<str>, GoPath>,
    synth_overloads: WordMap<u64, Vec<String>>,
}

thread_local! {
    static BUFFERS: RefCell<Option<Buffers>> = const { RefCell::new(None) };
}

/// Drops the maps this thread kept for its next estimate (`engine::forget_cost_memos`).
pub fn forget_buffers() {
    BUFFERS.with(|b| *b.borrow_mut() = None);
}

impl Buffers {
    /// Empties the maps and keeps them for the next estimate on this thread, unless one grew
    /// large (a large expression must not pin its memory).
    fn keep(mut self) {
        let mut small = self.paths.clear();
        small &= self.sizes.clear();
        small &= self.entry_sizes.clear();
        self.synth_overloads.clear();
        // Every local variable was popped again; keep the names (each estimate uses the same
        // few, `@result`, `@it`, ...) with their empty stacks.
        for v in self.locals.values_mut() {
            v.clear();
        }
        small &= self.locals.len() <= 64 && self.synth_overloads.capacity() <= 1024;
        if self.steps.len() > 4096 {
            self.steps.clear();
            self.roots.clear();
        }
        small &= self.steps.capacity() <= 8192;
        if small {
            BUFFERS.with(|b| *b.borrow_mut() = Some(self));
        }
    }
}

/// The overload ids cel-go switches on in `coster.functionCost`.
mod ids {
    pub const EXT_FORMAT_STRING: &str = "string_format";
    pub const STRING_TO_BYTES: &str = "string_to_bytes";
    pub const BYTES_TO_STRING: &str = "bytes_to_string";
    pub const EXT_QUOTE_STRING: &str = "strings_quote";
    pub const STARTS_WITH_STRING: &str = "starts_with_string";
    pub const ENDS_WITH_STRING: &str = "ends_with_string";
    pub const IN_LIST: &str = "in_list";
    pub const MATCHES: &str = "matches";
    pub const MATCHES_STRING: &str = "matches_string";
    pub const CONTAINS_STRING: &str = "contains_string";
    pub const LOGICAL_OR: &str = "logical_or";
    pub const LOGICAL_AND: &str = "logical_and";
    pub const CONDITIONAL: &str = "conditional";
    pub const ADD_STRING: &str = "add_string";
    pub const ADD_BYTES: &str = "add_bytes";
    pub const ADD_LIST: &str = "add_list";
    pub const INDEX_LIST: &str = "index_list";
    pub const INDEX_MAP: &str = "index_map";
    pub const COMPARE_SIZED: &[&str] = &[
        "less_string",
        "greater_string",
        "less_equals_string",
        "greater_equals_string",
        "less_bytes",
        "greater_bytes",
        "less_equals_bytes",
        "greater_equals_bytes",
        "equals",
        "not_equals",
    ];
}

impl<'a> Coster<'a> {
    /// cel-go `ast.AST.GetType`: dyn when the node has no type.
    fn get_type(&self, e: &IdedExpr) -> Type {
        self.types
            .type_of(e.id)
            .cloned()
            .unwrap_or_else(Type::dyn_type)
    }

    fn peek_local(&self, name: &str) -> Option<&LocalVar> {
        self.locals.get(name).and_then(|v| v.last())
    }

    fn push_local(&mut self, name: &str, v: LocalVar) {
        match self.locals.get_mut(name) {
            Some(stack) => stack.push(v),
            None => {
                self.locals.insert(name.to_string(), vec![v]);
            }
        }
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(v) = self.locals.get_mut(name) {
            v.pop();
        }
    }

    /// The shared string of a path step.
    fn step(&mut self, s: &str) -> Rc<str> {
        if let Some((k, ())) = self.steps.get_key_value(s) {
            return Rc::clone(k);
        }
        let k: Rc<str> = Rc::from(s);
        self.steps.insert(Rc::clone(&k), ());
        k
    }

    /// The path of an identifier that is not a local variable (cel-go `coster.costIdent`).
    fn root_path(&mut self, name: &str) -> GoPath {
        if let Some(p) = self.roots.get(name) {
            return p.clone();
        }
        let k: Rc<str> = self.step(name);
        let p = GoPath::single(Rc::clone(&k));
        self.roots.insert(k, p.clone());
        p
    }

    /// [`Coster::get_path`] without copying the path (`None`: nil).
    fn path_ref(&self, e: &IdedExpr) -> Option<&GoPath> {
        if let Expr::Ident(n) = &e.expr
            && let Some(v) = self.peek_local(n)
        {
            return Some(&v.path);
        }
        self.paths.get(&e.id)
    }

    /// cel-go `coster.getPath`.
    fn get_path(&self, e: &IdedExpr) -> GoPath {
        if let Expr::Ident(n) = &e.expr
            && let Some(v) = self.peek_local(n)
        {
            return v.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    /// cel-go `coster.pushIterKey` / `pushIterValue` / `pushIterSingle`.
    fn push_iter(&mut self, name: &str, range: &IdedExpr, which: IterVar) {
        let entry = self.compute_entry_size(range);
        let mut container = entry.map_or(Kind::Error, |e| e.container);
        if entry.is_none() {
            container = self.get_type(range).kind();
        }
        let is_list = container == Kind::List;
        let (size, sub) = match which {
            IterVar::Key => (
                entry.map(|e| e.key),
                if is_list { "@indices" } else { "@keys" },
            ),
            IterVar::Value => (
                entry.map(|e| e.val),
                if is_list { "@items" } else { "@values" },
            ),
            IterVar::Single if is_list => (entry.map(|e| e.val), "@items"),
            IterVar::Single => (entry.map(|e| e.key), "@keys"),
        };
        let sub = self.step(sub);
        let path = self.get_path(range).append(sub);
        self.push_local(
            name,
            LocalVar {
                path,
                size,
                entry_size: None,
            },
        );
    }

    /// cel-go `coster.pushLocalVar`.
    fn push_local_var(&mut self, name: &str, e: &IdedExpr) {
        let path = self.get_path(e);
        let entry_size = self.compute_entry_size(e);
        let size = self.compute_size(e);
        self.push_local(
            name,
            LocalVar {
                path,
                size,
                entry_size,
            },
        );
    }

    /// cel-go `coster.cost`.
    fn cost(&mut self, e: &IdedExpr) -> CostEstimate {
        match &e.expr {
            Expr::Literal(_) => CostEstimate::fixed(CONST_COST),
            Expr::Ident(name) => {
                // cel-go `coster.costIdent`.
                let path = match self.peek_local(name) {
                    Some(v) => v.path.clone(),
                    None => self.root_path(name),
                };
                self.paths.insert(e.id, path);
                CostEstimate::fixed(SELECT_AND_IDENT_COST)
            }
            Expr::Select(sel) => {
                // cel-go `coster.costSelect`.
                let mut sum = CostEstimate::default();
                if sel.test {
                    sum = sum.add(self.presence_test_cost);
                    return sum.add(self.cost(&sel.operand));
                }
                sum = sum.add(self.cost(&sel.operand));
                match self.get_type(&sel.operand).kind() {
                    Kind::Map | Kind::Struct | Kind::TypeParam => {
                        sum = sum.add(CostEstimate::fixed(SELECT_AND_IDENT_COST));
                    }
                    _ => {}
                }
                let step = self.step(&sel.field);
                let path = self.get_path(&sel.operand).append(step);
                self.paths.insert(e.id, path);
                sum
            }
            Expr::Call(_) => self.cost_call(e),
            Expr::List(list) => {
                // cel-go `coster.costCreateList`.
                let mut sum = CostEstimate::default();
                let mut item = SizeEstimate {
                    min: if list.elements.is_empty() {
                        0
                    } else {
                        u64::MAX
                    },
                    max: 0,
                };
                for el in &list.elements {
                    sum = sum.add(self.cost(el));
                    item = item.union(self.size_or_unknown(el));
                }
                self.entry_sizes.insert(
                    e.id,
                    EntrySize {
                        container: Kind::List,
                        key: SizeEstimate::fixed(1),
                        val: item,
                    },
                );
                sum.add(CostEstimate::fixed(LIST_CREATE_BASE_COST))
            }
            Expr::Map(map) => {
                // cel-go `coster.costCreateMap`.
                let mut sum = CostEstimate::default();
                let empty_min = if map.entries.is_empty() { 0 } else { u64::MAX };
                let mut key = SizeEstimate {
                    min: empty_min,
                    max: 0,
                };
                let mut val = key;
                for ent in &map.entries {
                    if let EntryExpr::MapEntry(me) = &ent.expr {
                        sum = sum.add(self.cost(&me.key));
                        sum = sum.add(self.cost(&me.value));
                        key = key.union(self.size_or_unknown(&me.key));
                        val = val.union(self.size_or_unknown(&me.value));
                    }
                }
                self.entry_sizes.insert(
                    e.id,
                    EntrySize {
                        container: Kind::Map,
                        key,
                        val,
                    },
                );
                sum.add(CostEstimate::fixed(MAP_CREATE_BASE_COST))
            }
            Expr::Struct(st) => {
                // cel-go `coster.costCreateStruct`.
                let mut sum = CostEstimate::default();
                for ent in &st.entries {
                    if let EntryExpr::StructField(f) = &ent.expr {
                        sum = sum.add(self.cost(&f.value));
                    }
                }
                sum.add(CostEstimate::fixed(STRUCT_CREATE_BASE_COST))
            }
            Expr::Comprehension(comp) => {
                if is_bind(comp) {
                    // cel-go `coster.costBind`.
                    let mut sum = self.cost(&comp.iter_range);
                    sum = sum.add(self.cost(&comp.accu_init));
                    self.push_local_var(&comp.accu_var, &comp.accu_init);
                    sum = sum.add(self.cost(&comp.result));
                    self.pop_local(&comp.accu_var);
                    self.copy_size_estimates(e, &comp.result);
                    return sum;
                }
                // cel-go `coster.costComprehension`.
                let mut sum = self.cost(&comp.iter_range);
                sum = sum.add(self.cost(&comp.accu_init));
                self.push_local_var(&comp.accu_var, &comp.accu_init);
                if let Some(v2) = &comp.iter_var2 {
                    self.push_iter(&comp.iter_var, &comp.iter_range, IterVar::Key);
                    self.push_iter(v2, &comp.iter_range, IterVar::Value);
                } else {
                    self.push_iter(&comp.iter_var, &comp.iter_range, IterVar::Single);
                }
                let loop_cost = self.cost(&comp.loop_cond);
                let step_cost = self.cost(&comp.loop_step);
                self.pop_local(&comp.iter_var);
                if let Some(v2) = &comp.iter_var2 {
                    self.pop_local(v2);
                }
                sum = sum.add(self.cost(&comp.result));
                self.pop_local(&comp.accu_var);
                let range_cnt = self.size_or_unknown(&comp.iter_range);
                sum = sum.add(range_cnt.multiply_by_cost(step_cost.add(loop_cost)));
                match &comp.accu_init.expr {
                    Expr::Literal(_) => {
                        if let Some(s) = self.compute_size(&comp.accu_init) {
                            self.sizes.insert(e.id, s);
                        }
                    }
                    Expr::List(_) | Expr::Map(_) => {
                        self.sizes.insert(e.id, range_cnt);
                        if let Some(es) = self.compute_entry_size(&comp.loop_step) {
                            self.entry_sizes.insert(e.id, es);
                        }
                    }
                    _ => {}
                }
                sum
            }
            Expr::Unspecified => CostEstimate::default(),
        }
    }

    /// A synthetic node id (above every parsed id).
    fn fresh_id(&mut self) -> u64 {
        self.next_synth_id += 1;
        self.next_synth_id
    }

    /// Builds the comprehension a call-shaped macro describes, with id `id`.
    fn build_comprehension(&mut self, id: u64, c: &SynthComprehension<'_>) -> IdedExpr {
        let iter_range = self.build_synth(&c.iter_range);
        let accu_init = self.build_synth(&c.accu_init);
        let mut loop_cond = self.build_synth(&c.loop_cond);
        // cel.bind-shaped expansions (`[]` range, own accumulator) have a `false` condition.
        if matches!(&c.iter_range, Synth::List(l) if l.is_empty())
            && c.accu_var != "@result"
            && let Expr::Literal(LiteralValue::Boolean(_)) = &loop_cond.expr
        {
            loop_cond.expr = Expr::Literal(LiteralValue::Boolean(false.into()));
        }
        let loop_step = self.build_synth(&c.loop_step);
        let result = self.build_synth(&c.result);
        IdedExpr {
            id,
            expr: Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var: c.iter_var.clone(),
                iter_var2: c.iter_var2.clone(),
                accu_var: c.accu_var.clone(),
                accu_init,
                loop_cond,
                loop_step,
                result,
            })),
        }
    }

    /// Builds a synthetic node; calls get the overload id cel-go's checker would record.
    fn build_synth(&mut self, s: &Synth<'_>) -> IdedExpr {
        let expr = match s {
            Synth::Real(e) => return (*e).clone(),
            Synth::Ident(n) => Expr::Ident(n.clone()),
            // Only the kind of a synthetic literal matters for the estimate (scalars have size
            // 1); the two-variable macros use `true` conditions.
            Synth::Literal(t) => Expr::Literal(match t.kind() {
                Kind::Int => LiteralValue::Int(1.into()),
                _ => LiteralValue::Boolean(true.into()),
            }),
            Synth::Call(f, args) | Synth::MemberCall(f, args) => {
                let overload = match (*f, args.as_slice()) {
                    ("_&&_", _) => "logical_and",
                    ("_||_", _) => "logical_or",
                    ("!_", _) => "logical_not",
                    ("@not_strictly_false", _) => "not_strictly_false",
                    ("_?_:_", _) => "conditional",
                    ("_==_", _) => "equals",
                    ("_+_", [_, Synth::List(_)]) => "add_list",
                    ("_+_", _) => "add_int64",
                    ("cel.@mapInsert", [_, _, _]) => "@mapInsert_map_key_value",
                    ("cel.@mapInsert", _) => "@mapInsert_map_map",
                    ("hasValue", _) => "optional_hasValue",
                    ("value", _) => "optional_value",
                    ("optional.of", _) => "optional_of",
                    ("optional.none", _) => "optional_none",
                    _ => "",
                };
                let mut overloads: Vec<String> = Vec::new();
                if !overload.is_empty() {
                    overloads.push(overload.to_string());
                } else if *f == "@sortByAssociatedKeys" {
                    overloads = self.sort_by_overloads(args);
                }
                let mut built: Vec<IdedExpr> = args.iter().map(|a| self.build_synth(a)).collect();
                let target = if matches!(s, Synth::MemberCall(..)) && !built.is_empty() {
                    Some(Box::new(built.remove(0)))
                } else {
                    None
                };
                let id = self.fresh_id();
                if !overloads.is_empty() {
                    self.synth_overloads.insert(id, overloads);
                }
                return IdedExpr {
                    id,
                    expr: Expr::Call(CallExpr {
                        func_name: f.to_string(),
                        target,
                        args: built,
                    }),
                };
            }
            Synth::List(elems) => {
                let elements = elems.iter().map(|a| self.build_synth(a)).collect();
                Expr::List(ListExpr {
                    elements,
                    optional_indices: Vec::new(),
                })
            }
            Synth::EmptyMap => Expr::Map(MapExpr {
                entries: Vec::new(),
            }),
            Synth::Comprehension(c) => {
                let id = self.fresh_id();
                return self.build_comprehension(id, c);
            }
        };
        IdedExpr {
            id: self.fresh_id(),
            expr,
        }
    }

    /// The overload ids of cel-go ext/lists.go `@sortByAssociatedKeys`
    /// (`list_<key type>_sortByAssociatedKeys`) that match the key type of a `sortBy`
    /// expansion (every comparable type when the key is `dyn`).
    fn sort_by_overloads(&self, args: &[Synth<'_>]) -> Vec<String> {
        let key_type = match args.get(1) {
            Some(Synth::Comprehension(c)) => match &c.loop_step {
                Synth::Call(_, a) => match a.get(1) {
                    Some(Synth::List(l)) => match l.first() {
                        Some(Synth::Real(k)) => self.types.type_of(k.id).cloned(),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        }
        .unwrap_or_else(Type::dyn_type);
        let name = match key_type.kind() {
            Kind::Duration => "google.protobuf.Duration",
            Kind::Timestamp => "google.protobuf.Timestamp",
            _ => key_type.type_name(),
        };
        let names: Vec<&str> = if ext::COMPARABLE_TYPE_NAMES.contains(&name) {
            vec![name]
        } else {
            ext::COMPARABLE_TYPE_NAMES.to_vec()
        };
        names
            .into_iter()
            .map(|t| format!("list_{t}_sortByAssociatedKeys"))
            .collect()
    }

    /// cel-go `coster.newAstNode`.
    fn new_node<'e>(&mut self, e: &'e IdedExpr) -> AstNode<'e> {
        // "only provide paths to root vars; omit accumulator vars"
        let path = match self.path_ref(e) {
            Some(p) if !p.first_is(|p| p == "@result" || p == "@__result__") => p.to_vec(),
            _ => Vec::new(),
        };
        AstNode {
            path: Cow::Owned(path),
            ty: self.get_type(e),
            expr: Some(e),
            computed_size: self.compute_size(e),
        }
    }

    /// cel-go `coster.costCall` (with `maybeUnwrapDynCall`).
    fn cost_call(&mut self, e: &IdedExpr) -> CostEstimate {
        let Expr::Call(call) = &e.expr else {
            return CostEstimate::default();
        };
        if let Some(m) = self.env.find_call_macro(&call.func_name)
            && m.matches(call.target.is_some(), call.args.len())
        {
            if let Some(expansion) = m.expansion(call.target.as_deref(), &call.args) {
                // Cost the expression cel-go's macro expands the call into; its root keeps
                // the call's id (as the checker types it).
                let built = match &expansion {
                    Synth::Comprehension(c) => self.build_comprehension(e.id, c),
                    other => {
                        let mut b = self.build_synth(other);
                        if let Some(o) = self.synth_overloads.remove(&b.id) {
                            self.synth_overloads.insert(e.id, o);
                        }
                        b.id = e.id;
                        b
                    }
                };
                return self.cost(&built);
            }
            self.unsupported
                .get_or_insert_with(|| Unsupported(call.func_name.clone()));
            return CostEstimate::default();
        }
        // A member-shaped call cel-go resolved as a qualified global function: cel-go's
        // checker rewrote it into a global call without a target.
        let types = self.types;
        let qualified = types.qualified_call(e.id);
        let function = qualified.unwrap_or(&call.func_name);
        if function == "dyn" && call.args.len() == 1 {
            // cel-go `coster.maybeUnwrapDynCall`.
            let arg_cost = self.cost(&call.args[0]);
            self.copy_size_estimates(e, &call.args[0]);
            return CostEstimate::fixed(1).add(arg_cost);
        }
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut arg_nodes = Vec::with_capacity(call.args.len());
        for a in &call.args {
            arg_costs.push(self.cost(a));
            arg_nodes.push(self.new_node(a));
        }
        let overload_ids: Vec<std::borrow::Cow<'a, str>> = match self.synth_overloads.get(&e.id) {
            Some(ids) => ids.iter().map(|s| s.clone().into()).collect(),
            None => types
                .overload_ids(e.id)
                .iter()
                .map(|s| std::borrow::Cow::Borrowed(&**s))
                .collect(),
        };
        if overload_ids.is_empty() {
            return CostEstimate::default();
        }
        let mut sum = CostEstimate::default();
        let target = match (&call.target, &qualified) {
            (Some(t), None) => {
                sum = sum.add(self.cost(t));
                Some(self.new_node(t))
            }
            _ => None,
        };
        let mut fn_cost = CostEstimate {
            min: u64::MAX,
            max: 0,
        };
        let mut result_size: Option<SizeEstimate> = None;
        for overload in &overload_ids {
            let oc = self.function_cost(
                e,
                function,
                overload,
                target.as_ref(),
                &arg_nodes,
                &arg_costs,
            );
            fn_cost = fn_cost.union(oc.cost);
            if let Some(rs) = oc.result_size {
                result_size = Some(match result_size {
                    None => rs,
                    Some(r) => r.union(rs),
                });
            }
            match overload.as_ref() {
                ids::INDEX_LIST | ids::INDEX_MAP if !call.args.is_empty() => {
                    result_size = self.compute_entry_size(&call.args[0]).map(|s| s.val);
                    let step = self.step(if overload.as_ref() == ids::INDEX_LIST {
                        "@items"
                    } else {
                        "@values"
                    });
                    let path = self.get_path(&call.args[0]).append(step);
                    self.paths.insert(e.id, path);
                }
                _ => {}
            }
            if result_size.is_none() {
                result_size = self.compute_size(e);
            }
        }
        if let Some(rs) = result_size {
            self.sizes.insert(e.id, rs);
        }
        sum.add(fn_cost)
    }

    /// cel-go `coster.functionCost`.
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        function: &str,
        overload_id: &str,
        target: Option<&AstNode<'_>>,
        args: &[AstNode<'_>],
        arg_costs: &[CostEstimate],
    ) -> CallEstimate {
        let arg_sum = arg_costs
            .iter()
            .fold(CostEstimate::default(), |s, c| s.add(*c));
        if let Some(f) = self.overload_estimators.get(overload_id)
            && let Some(est) = f(self.estimator, target, args)
        {
            return CallEstimate {
                cost: est.cost.add(arg_sum),
                result_size: est.result_size,
            };
        }
        if let Some(est) = self
            .estimator
            .estimate_call_cost(function, overload_id, target, args)
        {
            return CallEstimate {
                cost: est.cost.add(arg_sum),
                result_size: est.result_size,
            };
        }
        let size = |n: &AstNode<'_>| n.computed_size.unwrap_or(SizeEstimate::UNKNOWN);
        let plain = |c: CostEstimate| CallEstimate {
            cost: c.add(arg_sum),
            result_size: None,
        };
        match overload_id {
            ids::EXT_FORMAT_STRING => {
                if let Some(t) = target {
                    return plain(size(t).multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR));
                }
            }
            ids::STRING_TO_BYTES | ids::BYTES_TO_STRING | ids::EXT_QUOTE_STRING
                if args.len() == 1 =>
            {
                let sz = size(&args[0]);
                let result = match overload_id {
                    ids::STRING_TO_BYTES => SizeEstimate {
                        min: sz.min,
                        max: sz.max.wrapping_mul(4),
                    },
                    ids::BYTES_TO_STRING => SizeEstimate {
                        min: sz.min / 4,
                        max: sz.max,
                    },
                    _ => SizeEstimate {
                        min: sz.min.wrapping_add(2),
                        max: sz.max.wrapping_mul(2).wrapping_add(2),
                    },
                };
                return CallEstimate {
                    cost: sz
                        .multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR)
                        .add(arg_sum),
                    result_size: Some(result),
                };
            }
            ids::STARTS_WITH_STRING | ids::ENDS_WITH_STRING if args.len() == 1 => {
                return plain(size(&args[0]).multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR));
            }
            ids::IN_LIST if args.len() == 2 => {
                return plain(size(&args[1]).multiply_by_cost_factor(1.0));
            }
            ids::MATCHES | ids::MATCHES_STRING => {
                let pair = if overload_id == ids::MATCHES_STRING && args.len() == 1 {
                    target.map(|t| (t, &args[0]))
                } else if overload_id == ids::MATCHES && target.is_none() && args.len() == 2 {
                    Some((&args[0], &args[1]))
                } else {
                    None
                };
                if let Some((s, re)) = pair {
                    let str_cost = size(s)
                        .add(SizeEstimate::fixed(1))
                        .multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR);
                    let re_cost = size(re).multiply_by_cost_factor(REGEX_STRING_LENGTH_COST_FACTOR);
                    return plain(str_cost.multiply(re_cost));
                }
            }
            ids::CONTAINS_STRING if args.len() == 1 => {
                if let Some(t) = target {
                    let s = size(t).multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR);
                    let sub = size(&args[0]).multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR);
                    return plain(s.multiply(sub));
                }
            }
            ids::LOGICAL_OR | ids::LOGICAL_AND => {
                let (l, r) = (arg_costs[0], arg_costs[1]);
                return CallEstimate {
                    cost: CostEstimate {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    result_size: None,
                };
            }
            ids::CONDITIONAL => {
                let sz = size(&args[1]).union(size(&args[2]));
                let es = entry_union(
                    args[1].expr.and_then(|x| self.compute_entry_size(x)),
                    args[2].expr.and_then(|x| self.compute_entry_size(x)),
                );
                if let Some(es) = es {
                    self.entry_sizes.insert(e.id, es);
                }
                return CallEstimate {
                    cost: arg_costs[0].add(arg_costs[1].union(arg_costs[2])),
                    result_size: Some(sz),
                };
            }
            ids::ADD_STRING | ids::ADD_BYTES | ids::ADD_LIST if args.len() == 2 => {
                let result = size(&args[0]).add(size(&args[1]));
                let es = entry_union(
                    args[0].expr.and_then(|x| self.compute_entry_size(x)),
                    args[1].expr.and_then(|x| self.compute_entry_size(x)),
                );
                if let Some(es) = es {
                    self.entry_sizes.insert(e.id, es);
                }
                let cost = if overload_id == ids::ADD_LIST {
                    CostEstimate::fixed(1)
                } else {
                    result.multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR)
                };
                return CallEstimate {
                    cost: cost.add(arg_sum),
                    result_size: Some(result),
                };
            }
            id if ids::COMPARE_SIZED.contains(&id) => {
                let smallest_max = size(&args[0]).max.min(size(&args[1]).max);
                let min = u64::from(smallest_max > 0);
                return plain(
                    CostEstimate {
                        min,
                        max: smallest_max,
                    }
                    .multiply_by_cost_factor(STRING_TRAVERSAL_COST_FACTOR),
                );
            }
            _ => {}
        }
        plain(CostEstimate::fixed(1))
    }

    /// cel-go `coster.sizeOrUnknown` for an expression.
    fn size_or_unknown(&mut self, e: &IdedExpr) -> SizeEstimate {
        self.compute_size(e).unwrap_or(SizeEstimate::UNKNOWN)
    }

    /// cel-go `coster.copySizeEstimates`.
    fn copy_size_estimates(&mut self, dst: &IdedExpr, src: &IdedExpr) {
        if let Some(s) = self.compute_size(src) {
            self.sizes.insert(dst.id, s);
        }
        if let Some(s) = self.compute_entry_size(src) {
            self.entry_sizes.insert(dst.id, s);
        }
    }

    /// cel-go `coster.computeSize`.
    fn compute_size(&mut self, e: &IdedExpr) -> Option<SizeEstimate> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = compute_expr_size(e) {
            return Some(s);
        }
        let (estimated, scalar) = {
            // The path as it reads now, borrowed from its backing array rather than copied
            // (a node is sized many times; copying showed in the benchmark's profile,
            // docs/cost.md). The estimator cannot reach the array, so nothing writes it
            // while it is borrowed.
            let buf = self
                .path_ref(e)
                .and_then(|p| Some((p.buf.as_ref()?.borrow(), p.len)));
            let path: &[Rc<str>] = match &buf {
                Some((b, len)) => &b[..(*len).min(b.len())],
                None => &[],
            };
            let node = AstNode {
                path: Cow::Borrowed(path),
                ty: self.get_type(e),
                expr: Some(e),
                computed_size: None,
            };
            (self.estimator.estimate_size(&node), is_scalar(&node.ty))
        };
        if let Some(s) = estimated {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if scalar {
            return Some(SizeEstimate::fixed(1));
        }
        if let Expr::Ident(n) = &e.expr
            && let Some(v) = self.peek_local(n)
            && v.size.is_some()
        {
            return v.size;
        }
        None
    }

    /// cel-go `coster.computeEntrySize`.
    fn compute_entry_size(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(s) = self.entry_sizes.get(&e.id) {
            return Some(*s);
        }
        if let Expr::Ident(n) = &e.expr
            && let Some(v) = self.peek_local(n)
        {
            return v.entry_size;
        }
        None
    }
}

/// Ports of the cost estimators cel-go's extension libraries register.
mod ext {
    use super::*;

    /// cel-go ext/costs.go `estimateSize`.
    fn size(est: &dyn CostEstimator, n: &AstNode<'_>) -> SizeEstimate {
        n.computed_size
            .or_else(|| est.estimate_size(n))
            .unwrap_or(SizeEstimate::UNKNOWN)
    }

    /// cel-go ext/costs.go `nodeAsUintValue`.
    fn node_as_uint(n: &AstNode<'_>, default: u64) -> u64 {
        match n.expr.map(|e| &e.expr) {
            Some(Expr::Literal(LiteralValue::Int(i))) => (*i.inner()).max(0) as u64,
            _ => default,
        }
    }

    /// cel-go ext/lists.go `estimateListCall` with allocation
    /// (`estimateAllocatingListCall`).
    fn allocating_list_call(factor: f64, list_size: SizeEstimate) -> Option<CallEstimate> {
        let cost = list_size
            .multiply_by_cost_factor(factor)
            .add(CostEstimate::fixed(1))
            .add(CostEstimate::fixed(LIST_CREATE_BASE_COST));
        Some(CallEstimate {
            cost,
            result_size: Some(list_size),
        })
    }

    /// cel-go ext/sets.go `estimateSetsCost`.
    fn sets_cost(
        est: &dyn CostEstimator,
        args: &[AstNode<'_>],
        factor: f64,
    ) -> Option<CallEstimate> {
        if args.len() != 2 {
            return None;
        }
        let product = size(est, &args[0]).multiply(size(est, &args[1]));
        Some(CallEstimate {
            cost: product
                .multiply_by_cost_factor(factor)
                .add(CostEstimate::fixed(1)),
            result_size: None,
        })
    }

    pub(super) const SETS: &[(&str, FunctionEstimator)] = &[
        ("list_sets_contains_list", |e, _, a| sets_cost(e, a, 1.0)),
        ("list_sets_intersects_list", |e, _, a| sets_cost(e, a, 1.0)),
        ("list_sets_equivalent_list", |e, _, a| sets_cost(e, a, 2.0)),
    ];

    /// cel-go ext/lists.go `comparableTypes` (type names).
    pub(super) const COMPARABLE_TYPE_NAMES: &[&str] = &[
        "int",
        "uint",
        "double",
        "bool",
        "google.protobuf.Duration",
        "google.protobuf.Timestamp",
        "string",
        "bytes",
    ];

    /// cel-go ext/lists.go `estimateListSlice`.
    fn list_slice(
        est: &dyn CostEstimator,
        t: Option<&AstNode<'_>>,
        a: &[AstNode<'_>],
    ) -> Option<CallEstimate> {
        let t = t?;
        if a.len() != 2 {
            return None;
        }
        let sz = size(est, t);
        let (start, end) = (node_as_uint(&a[0], 0), node_as_uint(&a[1], sz.max));
        allocating_list_call(1.0, SizeEstimate::fixed(end.wrapping_sub(start)))
    }

    /// cel-go ext/lists.go `estimateListsRange`.
    fn lists_range(
        _: &dyn CostEstimator,
        t: Option<&AstNode<'_>>,
        a: &[AstNode<'_>],
    ) -> Option<CallEstimate> {
        if t.is_some() || a.len() != 1 {
            return None;
        }
        allocating_list_call(1.0, SizeEstimate::fixed(node_as_uint(&a[0], u64::MAX)))
    }

    /// The receiver's size for a call on a list with no arguments (`reverse()`, `distinct()`,
    /// `sort()`), the shape cel-go's estimators below check first.
    fn receiver_size(
        est: &dyn CostEstimator,
        t: Option<&AstNode<'_>>,
        a: &[AstNode<'_>],
    ) -> Option<SizeEstimate> {
        let t = t?;
        a.is_empty().then(|| size(est, t))
    }

    /// The key list's size for `sortByAssociatedKeys(keys)` on a list.
    fn keys_size(
        est: &dyn CostEstimator,
        t: Option<&AstNode<'_>>,
        a: &[AstNode<'_>],
    ) -> Option<SizeEstimate> {
        t?;
        match a {
            [keys] => Some(size(est, keys)),
            _ => None,
        }
    }

    /// An allocating list call whose cost grows with the square of `sz` (a sort, `distinct`).
    fn quadratic(factor: f64, sz: SizeEstimate) -> Option<CallEstimate> {
        allocating_list_call(factor, sz.multiply(sz))
    }

    /// cel-go ext/lists.go `estimateListReverse`.
    const LIST_REVERSE: FunctionEstimator =
        |e, t, a| receiver_size(e, t, a).and_then(|sz| allocating_list_call(1.0, sz));

    /// cel-go ext/lists.go `estimateListFlatten`.
    fn list_flatten(
        est: &dyn CostEstimator,
        t: Option<&AstNode<'_>>,
        a: &[AstNode<'_>],
    ) -> Option<CallEstimate> {
        let t = t?;
        if a.len() > 1 {
            return None;
        }
        let depth = a.first().map_or(1, |d| node_as_uint(d, u64::MAX));
        allocating_list_call(depth as f64, size(est, t))
    }

    /// cel-go ext/lists.go `estimateListDistinct`.
    const LIST_DISTINCT: FunctionEstimator =
        |e, t, a| receiver_size(e, t, a).and_then(|sz| quadratic(2.0, sz));

    /// cel-go ext/lists.go `estimateListSort` / `estimateListSortCost` (non-string elements).
    pub(super) const LIST_SORT: FunctionEstimator =
        |e, t, a| receiver_size(e, t, a).and_then(|sz| quadratic(2.0, sz));

    /// cel-go ext/lists.go `estimateListSortCost` for string and bytes elements.
    pub(super) const LIST_SORT_STRINGS: FunctionEstimator = |e, t, a| {
        receiver_size(e, t, a).and_then(|sz| quadratic(2.0 + STRING_TRAVERSAL_COST_FACTOR, sz))
    };

    /// cel-go ext/lists.go `estimateListSortBy` (non-string keys): sorts by the key list.
    pub(super) const LIST_SORT_BY: FunctionEstimator =
        |e, t, a| keys_size(e, t, a).and_then(|sz| quadratic(2.0, sz));

    /// cel-go ext/lists.go `estimateListSortBy` for string and bytes keys.
    pub(super) const LIST_SORT_BY_STRINGS: FunctionEstimator = |e, t, a| {
        keys_size(e, t, a).and_then(|sz| quadratic(2.0 + STRING_TRAVERSAL_COST_FACTOR, sz))
    };

    pub(super) const LISTS: &[(&str, FunctionEstimator)] = &[
        ("list_slice", list_slice),
        ("list_flatten", list_flatten),
        ("list_flatten_int", list_flatten),
        ("lists_range", lists_range),
        ("list_reverse", LIST_REVERSE),
        ("list_distinct", LIST_DISTINCT),
    ];
}

#[derive(Clone, Copy)]
enum IterVar {
    Key,
    Value,
    Single,
}

/// cel-go `coster.isBind`.
fn is_bind(comp: &cel::common::ast::ComprehensionExpr) -> bool {
    matches!(&comp.iter_range.expr, Expr::List(l) if l.elements.is_empty())
        && matches!(&comp.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        && comp.accu_var != "@result"
}

/// cel-go `checker/cost.go` `computeExprSize`.
fn compute_expr_size(e: &IdedExpr) -> Option<SizeEstimate> {
    let v = match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => s.inner().chars().count() as u64,
        Expr::Literal(LiteralValue::Bytes(b)) => b.inner().len() as u64,
        Expr::Literal(_) => 1,
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(SizeEstimate::fixed(v))
}

/// cel-go `checker/cost.go` `isScalar`.
fn is_scalar(t: &Type) -> bool {
    match t.kind() {
        Kind::Bool | Kind::Double | Kind::Duration | Kind::Int | Kind::Timestamp | Kind::Uint => {
            true
        }
        Kind::Opaque => match t.type_kind() {
            super::types::TypeKind::Opaque(name, params) if &**name == "optional_type" => {
                params.first().is_some_and(is_scalar)
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EnvBuilder, EnvOptions, compile};
    use std::sync::Arc;

    fn cost_of(text: &str) -> CostEstimate {
        let mut b = EnvBuilder::standard(EnvOptions::kubernetes());
        b.add_variable("s", Type::string()).unwrap();
        b.add_variable("l", Type::list(Type::string())).unwrap();
        let env = Arc::new(b.build());
        let c = compile(&env, text).unwrap();
        estimate_cost(&env, &c.parsed, &c.types, &NoEstimator).unwrap()
    }

    #[test]
    fn go_path_reproduces_slice_aliasing() {
        // [object](cap 1) -> spec (cap 2) -> labels (len 3, cap 4): spare capacity.
        let p = GoPath::single("object").append("spec").append("labels");
        assert_eq!((p.len, p.cap), (3, 4));
        let keys = p.append("@keys");
        let values = p.append("@values");
        // Both share p's backing array: the key path now reads @values, as in cel-go.
        let strs =
            |p: &GoPath| -> Vec<String> { p.to_vec().iter().map(|s| s.to_string()).collect() };
        assert_eq!(strs(&keys), ["object", "spec", "labels", "@values"]);
        assert_eq!(strs(&values), ["object", "spec", "labels", "@values"]);
        // A full slice reallocates: no sharing.
        let full = values.append("x");
        let other = values.append("y");
        assert_eq!((full.len, full.cap), (5, 8));
        assert_eq!(&*full.to_vec()[4], "x");
        assert_eq!(&*other.to_vec()[4], "y");
        assert_eq!(GoPath::default().append("a").cap, 1);
        // Go 1.26 growth: doubling up to 256 elements, size classes above 512 bytes.
        // Checked against go1.26: cap(append(make([]string, 32), "x")) == 71, and 591 for 256.
        assert_eq!(go_grow_cap(33, 32), 71);
        assert_eq!(go_grow_cap(257, 256), 591);
        assert_eq!(go_grow_cap(5, 1), 5);
    }

    #[test]
    fn cost_basics() {
        assert_eq!(cost_of("1"), CostEstimate::fixed(0));
        assert_eq!(cost_of("s"), CostEstimate::fixed(1));
        assert_eq!(cost_of("1 + 2"), CostEstimate::fixed(1));
        assert_eq!(cost_of("true || s == 'a'").min, 0);
        assert_eq!(cost_of("[1, 2, 3]"), CostEstimate::fixed(10));
        assert_eq!(cost_of("l.all(x, x == 'a')").max, u64::MAX);
        assert_eq!(
            cost_of("[1, 2].all(x, x > 0)"),
            CostEstimate { min: 17, max: 21 }
        );
    }

    #[test]
    fn cost_factor_saturates() {
        assert_eq!(
            multiply_by_cost_factor(u64::MAX, 0.1),
            1_844_674_407_370_955_264
        );
        assert_eq!(multiply_by_cost_factor(u64::MAX, 2.0), u64::MAX);
        assert_eq!(multiply_by_cost_factor(11, 0.1), 2);
        assert_eq!(multiply_by_cost_factor(0, 0.1), 0);
    }
}
