//! The CEL backends of the policy layer: [`crate::policy`]'s seams ([`SchemaSource`],
//! [`ExpressionChecker`], [`CheckEnv`]) implemented with the schema conversion
//! ([`crate::schema`]), the CEL checker ([`crate::cel`]) and the Kubernetes environment
//! ([`crate::k8s_env`]).
//!
//! Pure like the modules it joins: schemas come from a [`schema::SchemaSource`] that has
//! already done its I/O.

use std::sync::Arc;

use crate::cel::{self, Type, TypeKind, TypeProvider};
use crate::k8s_env::{self, KindDecls, KubeVersion, Params, PolicyEnv, Target};
use crate::policy::narrowing::Pos;
use crate::policy::{
    self, CheckEnv, EnvRequest, ExpressionChecker, Gvk, Issue, Issues, ObjectDecl, OutputType,
    ParamsDecl, ParsedExpr, SchemaLookup, SchemaType, Severity,
};
use crate::schema::{self, DeclType, RootType, Scalar};

/// The CEL type of a converted schema node. Object types are referred to by name; their
/// fields come from a [`RootTypes`] provider.
pub fn cel_type(decl: &DeclType) -> Type {
    match decl {
        DeclType::Scalar(s) => match s {
            Scalar::Bool => Type::bool(),
            Scalar::Int => Type::int(),
            Scalar::Double => Type::double(),
            Scalar::String => Type::string(),
            Scalar::Bytes => Type::bytes(),
            Scalar::Duration => Type::duration(),
            Scalar::Timestamp => Type::timestamp(),
        },
        DeclType::Dyn => Type::dyn_type(),
        DeclType::List(e) => Type::list(cel_type(e)),
        DeclType::Map(v) => Type::map(Type::string(), cel_type(v)),
        DeclType::Object(o) => Type::object(o.name()),
    }
}

/// A type provider over the object types of converted schemas (upstream's
/// `DeclTypeProvider` over the root `DeclType` of a kind, and of its params kind).
#[derive(Debug, Clone, Default)]
pub struct RootTypes {
    roots: Vec<Arc<RootType>>,
    /// Properties without a CEL type are `dyn` fields (MutatingAdmissionPolicies).
    unexposed_as_dyn: bool,
}

impl RootTypes {
    /// A provider over the given roots; the first that knows a type name answers.
    pub fn new(roots: impl IntoIterator<Item = Arc<RootType>>) -> Self {
        Self {
            roots: roots.into_iter().collect(),
            unexposed_as_dyn: false,
        }
    }

    /// The same provider, declaring the properties the conversion could not type, and any
    /// field of an object that keeps unknown fields, as `dyn` fields instead of leaving them
    /// undefined. Upstream's type checker of
    /// ValidatingAdmissionPolicies leaves them undefined; no upstream component type-checks
    /// MutatingAdmissionPolicies, whose `object` is an unstructured value at admission
    /// (compile.go `createEnvForOpts` declares it `dyn`) that has these properties.
    pub fn with_unexposed_as_dyn(mut self) -> Self {
        self.unexposed_as_dyn = true;
        self
    }
}

impl TypeProvider for RootTypes {
    /// Known object types. The checker needs them for field selection, as cel-go does.
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        self.roots
            .iter()
            .find_map(|r| r.find_type(name))
            .and_then(DeclType::as_object)
            .map(|o| Type::object(o.name()))
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        let root = self
            .roots
            .iter()
            .find(|r| r.find_type(struct_name).is_some())?;
        match root.find_field(struct_name, field) {
            Some(t) => Some(cel_type(t)),
            None if self.unexposed_as_dyn
                && root
                    .find_type(struct_name)
                    .and_then(DeclType::as_object)
                    .is_some_and(|o| o.is_unexposed(field) || o.preserves_unknown_fields()) =>
            {
                Some(Type::dyn_type())
            }
            None => None,
        }
    }

    /// Never: upstream names these types `<Kind><random digits>`, so no expression can name
    /// them (`Deployment{}` is an undeclared reference there); ours have no digits and must
    /// not become nameable because of it.
    fn is_nameable(&self, _name: &str) -> bool {
        false
    }
}

/// [`policy::SchemaSource`] over a [`schema::SchemaSource`].
pub struct Schemas {
    source: Arc<dyn schema::SchemaSource>,
}

impl Schemas {
    /// Wraps a schema source.
    pub fn new(source: Arc<dyn schema::SchemaSource>) -> Self {
        Self { source }
    }
}

impl policy::SchemaSource for Schemas {
    fn resolve(&self, gvk: &Gvk) -> Result<SchemaLookup, policy::SchemaError> {
        match self.source.resolve(gvk) {
            Ok(root) if root.is_typed() => Ok(SchemaLookup::Typed(SchemaType(root))),
            Ok(_) => Ok(SchemaLookup::Untyped),
            Err(e) if e.is_not_found() => Err(policy::SchemaError::NotFound),
            Err(e) => Err(policy::SchemaError::Failed(e.to_string())),
        }
    }
}

/// [`ExpressionChecker`] in the Kubernetes environment of one [`Target`].
pub struct KubeChecker {
    target: Target,
    base: Arc<cel::Env>,
    /// For [`CheckEnv::notes`]: the pinned release's environment in extended mode, when the
    /// target is an older version.
    newer: Option<(Target, Arc<cel::Env>)>,
    /// Whether [`CheckEnv::cost`] may reuse another kind's estimate of the same expression
    /// when it is necessarily the same (docs/cost.md); on by default.
    reuse_estimates: bool,
}

impl KubeChecker {
    /// A checker for `target`; builds (or takes from the process-wide cache) its base
    /// environment.
    pub fn new(target: Target) -> Result<Self, String> {
        let base = k8s_env::base_env(target).map_err(|e| e.to_string())?;
        Ok(Self {
            target,
            base,
            newer: None,
            reuse_estimates: true,
        })
    }

    /// A checker whose environments extend `base` instead of the Kubernetes environment of
    /// `target` (another engine's environment built on it: Kyverno's,
    /// `crate::engines::kyverno::env`).
    pub fn with_base(target: Target, base: Arc<cel::Env>) -> Self {
        Self {
            target,
            base,
            newer: None,
            reuse_estimates: true,
        }
    }

    /// The same checker, estimating every expression for every kind afresh instead of reusing
    /// another kind's estimate when it is necessarily the same (which gives the same numbers
    /// and reasons: a test compares the two over the corpus).
    pub fn without_estimate_reuse(mut self) -> Self {
        self.reuse_estimates = false;
        self
    }

    /// A checker that checks exactly as upstream does at `version` and, in the notes of
    /// extended mode, names every function `version` does not have yet together with the
    /// version that introduced it (upstream itself only says `undeclared reference` or
    /// `found no matching overload`).
    pub fn with_version_notes(version: KubeVersion) -> Result<Self, String> {
        let mut checker = Self::new(Target {
            version,
            mode: k8s_env::Mode::Upstream,
        })?;
        if version < KubeVersion::PINNED {
            let newer = Target {
                version,
                mode: k8s_env::Mode::Extended,
            };
            let base = k8s_env::base_env(newer).map_err(|e| e.to_string())?;
            checker.newer = Some((newer, base));
        }
        Ok(checker)
    }
}

/// The converted root type behind a [`SchemaType`] made by [`Schemas`].
fn root_of(t: &SchemaType) -> Result<Arc<RootType>, String> {
    Arc::clone(&t.0)
        .downcast::<RootType>()
        .map_err(|_| "schema type from another backend".to_owned())
}

/// Walks all but the last step of `path` from the root of `object` through object fields and
/// answers `test` on the object reached and the last step; `false` when `path` is empty, the
/// schema is another backend's, or a step is not an object field.
fn test_last_field(
    object: &SchemaType,
    path: &[String],
    test: impl FnOnce(&schema::types::ObjectType, &str) -> bool,
) -> bool {
    let Ok(root) = root_of(object) else {
        return false;
    };
    let Some((last, steps)) = path.split_last() else {
        return false;
    };
    let mut t = root.root();
    for step in steps {
        match t {
            DeclType::Object(o) => match o.field(step) {
                Some(f) => t = f,
                None => return false,
            },
            _ => return false,
        }
    }
    match t {
        DeclType::Object(o) => test(o, last),
        _ => false,
    }
}

/// The successful parses of [`KubeChecker::parse`] in `parsed` (a policy's type check,
/// [`policy::check_policy_parsed`]) as the create-time validation's
/// [`k8s_env::apiserver::Parses`]: both are `cel::parse` of the same text. A parse made by
/// another checker (not a `cel::ParsedExpr`) is left out, so it is parsed again there.
pub fn apiserver_parses(parsed: &policy::ParsedTexts<'_>) -> k8s_env::apiserver::Parses {
    let parses = k8s_env::apiserver::Parses::new();
    for (text, p) in parsed {
        if let Ok(p) = p
            && let Ok(cel) = Arc::downcast::<cel::ParsedExpr>(Arc::clone(&p.0))
        {
            parses.keep(text, cel);
        }
    }
    parses
}

impl ExpressionChecker for KubeChecker {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        cel::parse(expression)
            .map(|p| ParsedExpr(Arc::new(p)))
            .map_err(|issues| Issues::from_cel(&issues))
    }

    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        let mut roots = Vec::new();
        let mut object_root = None;
        let mut params_root = None;
        let object = match request.object {
            ObjectDecl::Typed(t) => {
                let root = root_of(t)?;
                let ty = cel_type(root.root());
                object_root = Some(Arc::clone(&root));
                roots.push(root);
                Some(ty)
            }
            ObjectDecl::Dyn => None,
        };
        let params = match request.params {
            ParamsDecl::Absent => Params::Absent,
            ParamsDecl::Dyn => Params::Untyped,
            ParamsDecl::Typed(t) => {
                let root = root_of(t)?;
                let ty = cel_type(root.root());
                params_root = Some(Arc::clone(&root));
                roots.push(root);
                Params::Typed(ty)
            }
        };
        let types: Option<Arc<dyn TypeProvider>> = (!roots.is_empty()).then(|| {
            let provider = RootTypes::new(roots);
            let provider = if request.mutating {
                provider.with_unexposed_as_dyn()
            } else {
                provider
            };
            Arc::new(provider) as Arc<dyn TypeProvider>
        });
        let decls = KindDecls {
            object,
            params,
            types,
            patch_types: request.patch_types,
        };
        let newer = match &self.newer {
            Some((target, base)) => Some(
                PolicyEnv::with_base(*target, base, decls.clone()).map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let env =
            PolicyEnv::with_base(self.target, &self.base, decls).map_err(|e| e.to_string())?;
        Ok(Box::new(KindEnv {
            env,
            base: Arc::clone(&self.base),
            reuse: self.reuse_estimates,
            newer,
            object_root,
            params_root,
            checked: std::cell::RefCell::new(Vec::new()),
            spent: std::cell::RefCell::new(Vec::new()),
            answers: std::cell::RefCell::new(None),
        }))
    }

    fn guards(&self, parsed: &ParsedExpr) -> Option<crate::policy::narrowing::Guards> {
        downcast(parsed)
            .ok()
            .map(crate::k8s_env::narrowing::analyze)
    }

    fn is_required_field(&self, object: &SchemaType, path: &[String]) -> bool {
        test_last_field(object, path, |o, last| {
            o.field(last).is_some() && o.is_required(last)
        })
    }

    fn fields_at(&self, object: &SchemaType, path: &[String]) -> Option<Vec<(String, String)>> {
        let root = root_of(object).ok()?;
        let mut t = root.root();
        for step in path {
            match t {
                DeclType::Object(o) => t = o.field(step)?,
                _ => return None,
            }
        }
        match t {
            DeclType::Object(o) => Some(
                o.fields()
                    .map(|(name, t)| (name.to_owned(), output_type(&cel_type(t)).to_string()))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn functions(&self) -> Vec<policy::backend::FunctionOverload> {
        // The version of each overload of Kubernetes' libraries (k8s_env::decls, from
        // base.go); the standard library's are in every version.
        let since: std::collections::HashMap<&str, u32> = k8s_env::decls::all_rows()
            .map(|r| (r.id, r.since_minor))
            .collect();
        let mut out = Vec::new();
        for f in self.base.functions() {
            for o in f.overloads() {
                let args = o.arg_types();
                let (receiver, rest) = match (o.is_member(), args.split_first()) {
                    (true, Some((r, rest))) => (Some(r), rest),
                    _ => (None, args),
                };
                let list = rest
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                let signature = match receiver {
                    Some(r) => format!("{r}.{}({list}) -> {}", f.name(), o.result_type()),
                    None => format!("{}({list}) -> {}", f.name(), o.result_type()),
                };
                out.push(policy::backend::FunctionOverload {
                    name: f.name().to_owned(),
                    receiver: receiver.map(ToString::to_string),
                    any_receiver: receiver.is_some_and(|r| r.kind() == cel::Kind::TypeParam),
                    signature,
                    since_minor: since.get(o.id()).copied().filter(|m| *m > 0),
                });
            }
        }
        out
    }

    fn is_absent_field(&self, object: &SchemaType, path: &[String]) -> bool {
        // A property without a CEL type (`is_unexposed`) still exists in objects.
        test_last_field(object, path, |o, last| {
            !o.preserves_unknown_fields() && o.field(last).is_none() && !o.is_unexposed(last)
        })
    }

    fn access_chains(
        &self,
        site: &ParsedExpr,
        conditions: &[(&ParsedExpr, bool)],
        variables: &[(&str, &ParsedExpr)],
    ) -> Option<Vec<crate::policy::runtime::Chain>> {
        let site = downcast(site).ok()?;
        let conditions: Vec<(&cel::ParsedExpr, bool)> = conditions
            .iter()
            .filter_map(|(c, v)| Some((downcast(c).ok()?, *v)))
            .collect();
        let variables: Vec<(&str, &cel::ParsedExpr)> = variables
            .iter()
            .filter_map(|(n, p)| Some((*n, downcast(p).ok()?)))
            .collect();
        Some(crate::k8s_env::presence::access_chains(
            site,
            &conditions,
            &variables,
        ))
    }

    fn witnesses(
        &self,
        gvk: &crate::policy::Gvk,
    ) -> Option<&'static crate::policy::runtime::KindWitnesses> {
        // The objects were recorded from the pinned release's API server; other target
        // versions get none.
        if self.target.version != crate::k8s_env::KubeVersion::PINNED {
            return None;
        }
        crate::k8s_env::witnesses::of(gvk)
    }

    fn zero_value(
        &self,
        object: &SchemaType,
        path: &[crate::policy::runtime::Seg],
    ) -> Option<&'static str> {
        use crate::policy::runtime::Seg;
        use schema::types::Scalar;
        let root = root_of(object).ok()?;
        let mut t = root.root().clone();
        for seg in path {
            t = match (seg, &t) {
                (Seg::Field(f) | Seg::Key(f), DeclType::Object(o)) => o.field(f)?.clone(),
                (Seg::Field(_) | Seg::Key(_) | Seg::IterKey, DeclType::Map(v)) => (**v).clone(),
                (Seg::Item(_), DeclType::List(e)) => (**e).clone(),
                _ => return None,
            };
        }
        Some(match t {
            DeclType::Scalar(Scalar::Bool) => "false",
            DeclType::Scalar(Scalar::Int) => "0",
            DeclType::Scalar(Scalar::Double) => "0.0",
            DeclType::Scalar(Scalar::String) => "''",
            DeclType::Scalar(Scalar::Bytes) => "b''",
            DeclType::List(_) => "[]",
            DeclType::Map(_) => "{}",
            _ => return None,
        })
    }

    fn patch_literals(&self, parsed: &ParsedExpr) -> Option<crate::policy::literal::Literals> {
        downcast(parsed)
            .ok()
            .map(crate::k8s_env::mutation::patch_literals)
    }
}

/// One kind's environment ([`CheckEnv`]).
struct KindEnv {
    env: PolicyEnv,
    /// The checker's base environment (its call-shaped macros are the only part of the
    /// environment the estimator reads; an estimate is reused only with the same one).
    base: Arc<cel::Env>,
    /// [`KubeChecker::without_estimate_reuse`] unless `false`.
    reuse: bool,
    /// The same declarations in the pinned release's extended environment (for notes).
    newer: Option<PolicyEnv>,
    /// The kind's converted schema (its sizes size `object`/`oldObject` for [`CheckEnv::cost`]).
    object_root: Option<Arc<RootType>>,
    /// The params kind's converted schema (sizes `params`).
    params_root: Option<Arc<RootType>>,
    /// The checked types of the expressions [`CheckEnv::check`] accepted (by address) whose
    /// estimate [`CheckEnv::cost`] has not taken yet: the policy layer asks for the estimate
    /// right after the check, except for variables, which it checks first (each in the
    /// environment of the variables before it) and estimates later with the other sites.
    /// Taking their types from that check saves a second one and estimates each variable with
    /// the types it was checked with, as the oracle's golden does (`variables[:i]`).
    checked: std::cell::RefCell<Vec<(usize, crate::cel::CheckedTypes)>>,
    /// The types [`CheckEnv::cost`] took and used, freed with the environment (as the ones no
    /// estimate takes are): freeing each right after its estimate, between the checks, took
    /// more time in the benchmark (docs/cost.md).
    spent: std::cell::RefCell<Vec<crate::cel::CheckedTypes>>,
    /// The size answers of this environment's roots ([`RootAnswers`]) while it estimates:
    /// taken from the thread's table once instead of once per estimate, given back on drop.
    answers: std::cell::RefCell<Option<crate::k8s_env::cost::SizeAnswers>>,
}

impl Drop for KindEnv {
    fn drop(&mut self) {
        if let Some(answers) = self.answers.get_mut().take() {
            keep_root_answers(
                self.object_root.as_ref(),
                self.params_root.as_ref(),
                answers,
            );
        }
    }
}

/// The schema size lookups and the reasons of unbounded paths [`CheckEnv::cost`] made
/// (`k8s_env::cost::SizeAnswers`), per pair of roots (the kind's and the params kind's
/// converted schemas), for the estimates that follow on this thread: the expressions of the
/// policies of a kind size the same paths again and again, and following them through the
/// schema (cold memory, binary searches by field name) and rendering their reasons showed in
/// the benchmark's profile (docs/cost.md). An answer is a function of the schema and the path
/// only, so it does not depend on which policy asked.
struct RootAnswers {
    /// The roots, weakly: the answers are for them only while they live, and a weak reference
    /// keeps their address from being reused by another schema.
    object: Option<std::sync::Weak<RootType>>,
    params: Option<std::sync::Weak<RootType>>,
    answers: crate::k8s_env::cost::SizeAnswers,
}

thread_local! {
    /// By the addresses of the roots ([`root_address`]).
    static ROOT_ANSWERS: std::cell::RefCell<crate::cel::env::FastMap<(usize, usize), RootAnswers>> =
        std::cell::RefCell::default();
}

/// Beyond this many pairs of roots, the answers of the roots that are gone are dropped (and
/// all of them if that is not enough).
const ROOT_ANSWERS_MAX: usize = 1024;

/// The address of a root (0: none); the key of its answers.
fn root_address(root: Option<&Arc<RootType>>) -> usize {
    root.map_or(0, |r| Arc::as_ptr(r) as usize)
}

/// Takes the answers kept for these roots (empty when there are none).
fn take_root_answers(
    object: Option<&Arc<RootType>>,
    params: Option<&Arc<RootType>>,
) -> crate::k8s_env::cost::SizeAnswers {
    let key = (root_address(object), root_address(params));
    // The entry holds weak references to the roots, so no other root can have had their
    // addresses since it was made: the same address is the same root.
    ROOT_ANSWERS
        .with(|all| all.borrow_mut().remove(&key))
        .map(|r| r.answers)
        .unwrap_or_default()
}

/// Keeps the answers for these roots.
fn keep_root_answers(
    object: Option<&Arc<RootType>>,
    params: Option<&Arc<RootType>>,
    answers: crate::k8s_env::cost::SizeAnswers,
) {
    let key = (root_address(object), root_address(params));
    ROOT_ANSWERS.with(|all| {
        let mut all = all.borrow_mut();
        if all.len() >= ROOT_ANSWERS_MAX {
            let alive = |w: &Option<std::sync::Weak<RootType>>| {
                w.as_ref().is_none_or(|w| w.strong_count() > 0)
            };
            all.retain(|_, r| alive(&r.object) && alive(&r.params));
            if all.len() >= ROOT_ANSWERS_MAX {
                all.clear();
            }
        }
        all.insert(
            key,
            RootAnswers {
                object: object.map(Arc::downgrade),
                params: params.map(Arc::downgrade),
                answers,
            },
        );
    })
}

/// One estimate of an expression, kept for the other kinds of its policy ([`reuse_estimate`]).
struct Estimated {
    /// The checked types it was made with.
    types: crate::cel::CheckedTypes,
    /// The schema size answers it used.
    sizes: crate::k8s_env::cost::SizeTrace,
    /// The paths the size estimator recorded (for the reasons, rendered per kind).
    recorded: Vec<Vec<std::rc::Rc<str>>>,
    /// Minimum and maximum; `None` when the expression could not be estimated.
    estimate: Option<(u64, u64)>,
}

/// The estimates kept for one parsed expression.
struct EstimatesOf {
    /// The expression (weakly: while the reference exists, no other allocation has its
    /// address, the key of [`ESTIMATES`]).
    parsed: std::sync::Weak<dyn std::any::Any + Send + Sync>,
    /// The base environment they were made in (likewise).
    base: std::sync::Weak<cel::Env>,
    /// At most [`ESTIMATES_PER_EXPRESSION`].
    estimated: Vec<Estimated>,
}

/// Different estimates kept per expression (the kinds of a policy whose types or sizes
/// differ).
const ESTIMATES_PER_EXPRESSION: usize = 2;
/// Beyond this many expressions, those that are gone are dropped (and all if that is not
/// enough). Small: a policy has far fewer expressions, and the estimates of the policies
/// checked before only take memory (and cache) until they are dropped.
const ESTIMATES_MAX: usize = 64;

thread_local! {
    /// The estimates of the expressions checked last on this thread, by the address of the
    /// parsed expression: the policy layer estimates each expression of a policy once per
    /// matched kind, and those estimates are often identical (the same fields of
    /// `spec.template` in Deployments, StatefulSets, DaemonSets...; docs/cost.md).
    static ESTIMATES: std::cell::RefCell<crate::cel::env::FastMap<usize, EstimatesOf>> =
        std::cell::RefCell::default();
}

fn parsed_address(parsed: &ParsedExpr) -> usize {
    Arc::as_ptr(&parsed.0).cast::<()>() as usize
}

/// The estimate of `parsed` made for another kind, when it is necessarily the estimate for
/// this one: cel-go's estimator (`checker/cost.go`, ported in `crate::cel::cost`) with
/// Kubernetes' library estimator is a function of the parsed expression, the call-shaped macros
/// of the environment (`base`), the checked types (read through their structure, equality and
/// a few names: `k8s_env::cost::estimators_read_type_name`), and the size estimator's answers
/// for the paths it asks about (a function of the path and the schemas). So when `types` equal
/// the earlier kind's up to object names renamed one to one and the schemas answer every path
/// the earlier estimate asked about alike, every step of the walk would be the same, and so
/// would be the minimum, the maximum and the recorded paths (their reasons are rendered with
/// this kind's schemas). The earlier estimate checked nothing else. The result is
/// `Some(estimate)` when reused (`estimate` `None`: the expression could not be estimated).
fn reuse_estimate(
    parsed: &ParsedExpr,
    base: &Arc<cel::Env>,
    types: &crate::cel::CheckedTypes,
    sizes: &crate::k8s_env::cost::SchemaSizeEstimator<'_>,
    memo: &std::cell::RefCell<crate::k8s_env::cost::PathMemo<'_>>,
) -> Option<Option<Estimate>> {
    ESTIMATES.with(|all| {
        let all = all.borrow();
        let of = all.get(&parsed_address(parsed))?;
        if of.parsed.strong_count() == 0 || !std::ptr::eq(of.base.as_ptr(), Arc::as_ptr(base)) {
            return None;
        }
        let keep = crate::k8s_env::cost::estimators_read_type_name;
        let earlier = of.estimated.iter().find(|e| {
            e.types.same_up_to_object_names(types, &keep) && sizes.answers_alike(&e.sizes)
        })?;
        REUSED.with(|n| n.set(n.get() + 1));
        Some(earlier.estimate.map(|(min, max)| {
            let unbounded =
                crate::k8s_env::cost::unbounded_reasons_memo(sizes, &earlier.recorded, memo);
            (min, max, unbounded)
        }))
    })
}

/// An estimate's minimum, maximum and the reasons of its unbounded paths.
type Estimate = (u64, u64, Vec<Arc<str>>);

/// Keeps an estimate of `parsed` for the other kinds ([`reuse_estimate`]); gives its types
/// back when it is not kept (the expression has enough estimates already).
fn keep_estimate(
    parsed: &ParsedExpr,
    base: &Arc<cel::Env>,
    estimated: Estimated,
) -> Option<crate::cel::CheckedTypes> {
    ESTIMATES.with(|all| {
        let mut all = all.borrow_mut();
        let key = parsed_address(parsed);
        let current = all.get(&key).is_some_and(|of| {
            of.parsed.strong_count() > 0 && std::ptr::eq(of.base.as_ptr(), Arc::as_ptr(base))
        });
        if !current {
            if all.len() >= ESTIMATES_MAX {
                all.retain(|_, of| of.parsed.strong_count() > 0);
                if all.len() >= ESTIMATES_MAX {
                    all.clear();
                }
            }
            all.insert(
                key,
                EstimatesOf {
                    parsed: Arc::downgrade(&parsed.0),
                    base: Arc::downgrade(base),
                    estimated: Vec::new(),
                },
            );
        }
        let of = all.get_mut(&key)?;
        if of.estimated.len() >= ESTIMATES_PER_EXPRESSION {
            return Some(estimated.types);
        }
        of.estimated.push(estimated);
        None
    })
}

/// Forgets what the estimates of this thread kept for the next ones (the schema size answers
/// of each pair of roots, the estimates of the last expressions and the estimator's buffers),
/// as in a new `vapcheck check` process: the cost benchmark starts each round from here, so
/// that it measures what one run of the command does rather than a thread that has sized
/// every path of the corpus already (docs/cost.md).
pub fn forget_cost_memos() {
    ROOT_ANSWERS.with(|all| all.borrow_mut().clear());
    ESTIMATES.with(|all| all.borrow_mut().clear());
    crate::cel::cost::forget_buffers();
}

thread_local! {
    static REUSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many estimates [`CheckEnv::cost`] took from another kind's estimate of the same
/// expression on this thread (docs/cost.md), for tests and the benchmark.
pub fn reused_estimates() -> u64 {
    REUSED.with(std::cell::Cell::get)
}

/// The address of a parsed expression (the policy layer keeps each one alive in an `Arc` for
/// the whole check, so an address names one expression).
fn address(parsed: &cel::ParsedExpr) -> usize {
    std::ptr::from_ref(parsed) as usize
}

fn downcast(parsed: &ParsedExpr) -> Result<&cel::ParsedExpr, String> {
    parsed
        .0
        .downcast_ref::<cel::ParsedExpr>()
        .ok_or_else(|| "parsed expression from another backend".to_owned())
}

impl CheckEnv for KindEnv {
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, Issues> {
        let parsed = downcast(parsed).map_err(|e| Issues::one(Issue::plain(e)))?;
        match self.env.check(parsed) {
            Ok(types) => {
                let out = output_type(types.result_type());
                let at = address(parsed);
                let mut checked = self.checked.borrow_mut();
                checked.retain(|(a, _)| *a != at);
                checked.push((at, types));
                Ok(out)
            }
            Err(issues) => Err(Issues::from_cel(&issues)),
        }
    }

    fn declare_variable(&mut self, name: &str, ty: &OutputType) {
        let ty = from_output_type(ty);
        self.env.declare_variable(name, Some(&ty));
        if let Some(newer) = &mut self.newer {
            newer.declare_variable(name, Some(&ty));
        }
    }

    /// cel-go's estimate with Kubernetes' estimator and the schemas' sizes
    /// (`k8s_env::cost::estimate_cost_sized`), with the unbounded schema paths it used.
    fn cost(&self, parsed_expr: &ParsedExpr) -> Option<crate::policy::CostOutcome> {
        let parsed = downcast(parsed_expr).ok()?;
        let at = address(parsed);
        let cached = {
            let mut checked = self.checked.borrow_mut();
            checked
                .iter()
                .position(|(a, _)| *a == at)
                .map(|i| checked.swap_remove(i).1)
        };
        let types = match cached {
            Some(t) => t,
            None => self.env.check(parsed).ok()?,
        };
        let (object, params) = (self.object_root.as_ref(), self.params_root.as_ref());
        // The answers kept for these roots: taken from the thread's table by the first
        // estimate of this environment and given back when it is dropped.
        let answers = self
            .answers
            .borrow_mut()
            .take()
            .unwrap_or_else(|| take_root_answers(object, params));
        let memo = std::cell::RefCell::new(crate::k8s_env::cost::PathMemo::with_answers(answers));
        let recorded = std::cell::RefCell::new(Vec::new());
        let sizes = crate::k8s_env::cost::SchemaSizeEstimator {
            object: self.object_root.as_deref().and_then(RootType::sizes),
            params: self.params_root.as_deref().and_then(RootType::sizes),
            record: Some(&recorded),
            memo: Some(&memo),
        };
        let reused = if self.reuse {
            reuse_estimate(parsed_expr, &self.base, &types, &sizes, &memo)
        } else {
            None
        };
        let estimate = match reused {
            Some(reused) => {
                self.spent.borrow_mut().push(types);
                reused
            }
            None => {
                if self.reuse {
                    memo.borrow_mut().start_trace();
                }
                let estimate = crate::k8s_env::cost::estimate_cost_sized(
                    self.env.env(),
                    parsed,
                    &types,
                    &sizes,
                )
                .ok()
                .map(|e| {
                    let unbounded = crate::k8s_env::cost::unbounded_reasons_memo(
                        &sizes,
                        &recorded.borrow(),
                        &memo,
                    );
                    (e.min, e.max, unbounded)
                });
                let trace = memo.borrow_mut().take_trace();
                let kept = if !self.reuse {
                    Some(types)
                } else {
                    keep_estimate(
                        parsed_expr,
                        &self.base,
                        Estimated {
                            types,
                            sizes: trace,
                            recorded: recorded.take(),
                            estimate: estimate.as_ref().map(|(min, max, _)| (*min, *max)),
                        },
                    )
                };
                if let Some(types) = kept {
                    self.spent.borrow_mut().push(types);
                }
                estimate
            }
        };
        *self.answers.borrow_mut() = Some(memo.borrow_mut().take_answers());
        let (min, max, unbounded) = estimate?;
        Some(crate::policy::CostOutcome {
            min,
            max,
            unbounded,
        })
    }

    /// The functions the target version lacks, found by checking in the pinned release's
    /// environment (`k8s_env::version_warnings`), as `WARNING: <input>:L:C: function 'f'
    /// (library l) was introduced in Kubernetes 1.N; the target version is 1.M` lines.
    fn notes(&self, parsed: &ParsedExpr) -> Option<Issues> {
        let newer = self.newer.as_ref()?;
        let parsed = downcast(parsed).ok()?;
        let types = newer.check(parsed).ok()?;
        let mut warnings = newer.version_warnings_of(parsed, &types);
        // In source order, as cel-go sorts its errors.
        warnings.sort_by_key(|w| w.location.map(|l| (l.line, l.column)));
        if warnings.is_empty() {
            return None;
        }
        Some(Issues::from_blocks(
            warnings.iter().map(|w| {
                (
                    Severity::Warning,
                    w.location.map(|l| Pos {
                        line: l.line,
                        column: l.column,
                    }),
                    w.message(),
                    w.to_display_string(parsed.source()),
                )
            }),
            None,
        ))
    }
}

/// The policy layer's view of a deduced type.
pub fn output_type(t: &Type) -> OutputType {
    match t.type_kind() {
        TypeKind::Bool => OutputType::Bool,
        TypeKind::Int => OutputType::Int,
        TypeKind::Uint => OutputType::Uint,
        TypeKind::Double => OutputType::Double,
        TypeKind::String => OutputType::String,
        TypeKind::Bytes => OutputType::Bytes,
        TypeKind::Duration => OutputType::Duration,
        TypeKind::Timestamp => OutputType::Timestamp,
        TypeKind::Null => OutputType::Null,
        TypeKind::Dyn => OutputType::Dyn,
        TypeKind::Any => OutputType::Any,
        TypeKind::List(e) => OutputType::List(Box::new(output_type(e))),
        TypeKind::Map(k, v) => OutputType::Map(Box::new(output_type(k)), Box::new(output_type(v))),
        _ => OutputType::Other(t.to_string()),
    }
}

/// The inverse of [`output_type`] for the types a variable can be declared with (object,
/// opaque and other types were already turned into `dyn` by the policy layer).
fn from_output_type(t: &OutputType) -> Type {
    match t {
        OutputType::Bool => Type::bool(),
        OutputType::Int => Type::int(),
        OutputType::Uint => Type::uint(),
        OutputType::Double => Type::double(),
        OutputType::String => Type::string(),
        OutputType::Bytes => Type::bytes(),
        OutputType::Duration => Type::duration(),
        OutputType::Timestamp => Type::timestamp(),
        OutputType::Null => Type::null(),
        OutputType::Any => Type::any(),
        OutputType::List(e) => Type::list(from_output_type(e)),
        OutputType::Map(k, v) => Type::map(from_output_type(k), from_output_type(v)),
        OutputType::Dyn | OutputType::Other(_) => Type::dyn_type(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CheckOptions, Mode as PolicyMode};

    /// Extended mode names the functions an older target lacks, after upstream's own errors;
    /// strict mode and the pinned release say only what upstream says.
    #[test]
    fn functions_newer_than_the_target_are_named_in_extended_mode() {
        let text = "semver('1.2.3').isGreaterThan(semver('1.0.0'))";
        let parsed_ok = |checker: &KubeChecker| {
            let mut env = checker
                .environment(&EnvRequest {
                    gvk: &Gvk::new("apps", "v1", "Deployment"),
                    object: ObjectDecl::Dyn,
                    params: ParamsDecl::Absent,
                    patch_types: false,
                    mutating: false,
                })
                .unwrap_or_else(|e| panic!("{e}"));
            env.declare_variable("x", &OutputType::Int);
            let parsed = checker.parse(text).unwrap_or_else(|e| panic!("{e}"));
            (env.check(&parsed), env.notes(&parsed))
        };
        let old = KubeChecker::with_version_notes(KubeVersion::new(32).expect("1.32"))
            .unwrap_or_else(|e| panic!("{e}"));
        let (result, notes) = parsed_ok(&old);
        let err = result.expect_err("semver is not in 1.32");
        assert!(
            err.render().starts_with(
                "ERROR: <input>:1:7: undeclared reference to 'semver' (in container '')"
            ),
            "{err}"
        );
        let notes = notes.expect("notes for 1.32");
        assert_eq!(
            notes
                .render()
                .lines()
                .filter(|l| l.starts_with("WARNING: "))
                .collect::<Vec<_>>(),
            [
                "WARNING: <input>:1:7: function 'semver' (library kubernetes.Semver) was introduced in Kubernetes 1.33; the target version is 1.32",
                "WARNING: <input>:1:30: function 'isGreaterThan' (library kubernetes.Semver) was introduced in Kubernetes 1.33; the target version is 1.32",
                "WARNING: <input>:1:37: function 'semver' (library kubernetes.Semver) was introduced in Kubernetes 1.33; the target version is 1.32",
            ]
        );
        let pinned =
            KubeChecker::with_version_notes(KubeVersion::PINNED).unwrap_or_else(|e| panic!("{e}"));
        let (result, notes) = parsed_ok(&pinned);
        assert_eq!(result, Ok(OutputType::Bool));
        assert_eq!(notes, None);
    }

    /// Through the policy layer: the notes are an extra block in extended mode only; strict
    /// mode keeps upstream's text alone.
    #[test]
    fn notes_appear_in_extended_mode_only() {
        struct Untyped;
        impl policy::SchemaSource for Untyped {
            fn resolve(&self, _gvk: &Gvk) -> Result<SchemaLookup, policy::SchemaError> {
                Ok(SchemaLookup::Untyped)
            }
        }
        let policy: k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "generation": 1},
                "spec": {
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["apps"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["deployments"]}]},
                    "validations": [{"expression": "semver('1.0.0').major() == 1"}]
                }
            }))
            .unwrap_or_else(|e| panic!("{e}"));
        let mapper = crate::policy::DiscoveryRestMapper::new(
            crate::policy::restmapper::tests::sample_discovery(),
        );
        let checker = KubeChecker::with_version_notes(KubeVersion::new(32).expect("1.32"))
            .unwrap_or_else(|e| panic!("{e}"));
        let backends = crate::policy::Backends {
            rest_mapper: &mapper,
            discovery: None,
            schemas: &Untyped,
            checker: &checker,
        };
        let warning = |mode| {
            let options = CheckOptions {
                mode,
                ..CheckOptions::default()
            };
            let status = crate::policy::check_policy(&policy, &options, &backends);
            status.expression_warnings[0].warning.clone()
        };
        let strict = warning(PolicyMode::Strict);
        let extended = warning(PolicyMode::Extended);
        assert!(!strict.contains("WARNING"), "{strict}");
        assert!(extended.starts_with(&strict), "{extended}");
        assert!(
            extended[strict.len()..].contains(
                "WARNING: <input>:1:7: function 'semver' (library kubernetes.Semver) was introduced in Kubernetes 1.33; the target version is 1.32"
            ),
            "{extended}"
        );
    }
}
