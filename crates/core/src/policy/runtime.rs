//! Runtime safety (issue 31): field selections and map indexes that evaluate to an error on
//! valid objects.
//!
//! CEL in admission reads objects as maps built from their JSON (k8s.io/apiserver v0.37.1
//! `pkg/cel/common/values.go`, `unstructuredMap.Get`: a property the object does not set is
//! not there). Selecting it (`object.spec.securityContext.runAsNonRoot` on a Pod that does not
//! set `runAsNonRoot`) is an evaluation error, `no such key: runAsNonRoot`, that the type
//! checker cannot see. The same holds for a map key (`object.metadata.labels['team']`), and
//! for every selection on `object` in a DELETE request (`object` is null) and on `oldObject`
//! in a CREATE request.
//!
//! The analysis is in two parts:
//!
//! * the backend's AST walk ([`super::ExpressionChecker::access_chains`], made by
//!   `k8s_env::presence`) finds every chain of selections and indexes rooted at `object` or
//!   `oldObject` (also through comprehension variables and `variables.<name>` aliases), with,
//!   for each step, whether a guard makes it present where it is evaluated;
//! * [`witnessed`] looks, for each unguarded step and each checked kind, for a witness: a
//!   small valid object of the kind, as kube-apiserver 1.37.1 admits it (defaulted), whose
//!   prefix of the chain is present and whose step is absent. A finding is reported only with
//!   a witness: no witness, no finding.
//!
//! Nothing here changes what the checker says; strict mode never uses it.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::narrowing::Pos;

/// The root of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Root {
    /// `object`.
    #[serde(rename = "object")]
    Object,
    /// `oldObject`.
    #[serde(rename = "oldObject")]
    OldObject,
    /// `namespaceObject` (null for cluster-scoped kinds and Namespaces).
    #[serde(rename = "namespaceObject")]
    NamespaceObject,
    /// `params` (null for a binding without `paramRef`; otherwise the param object the
    /// binding's `paramRef` resolves to).
    #[serde(rename = "params")]
    Params,
}

impl Root {
    /// The variable's name.
    pub fn name(self) -> &'static str {
        match self {
            Root::Object => "object",
            Root::OldObject => "oldObject",
            Root::NamespaceObject => "namespaceObject",
            Root::Params => "params",
        }
    }
}

/// One step of a path from a root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    /// A field selection `.f` (or `['f']` on an object).
    Field(String),
    /// A constant map key `['k']`.
    Key(String),
    /// Each element of a list a comprehension iterates (its variable); the number tells
    /// comprehensions apart.
    Item(u64),
    /// A key of the map a comprehension iterates (always present in that map).
    IterKey,
}

/// Request operations, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ops(pub u8);

impl Ops {
    /// `CREATE`.
    pub const CREATE: Ops = Ops(1);
    /// `UPDATE`.
    pub const UPDATE: Ops = Ops(2);
    /// `DELETE`.
    pub const DELETE: Ops = Ops(4);
    /// `CONNECT`.
    pub const CONNECT: Ops = Ops(8);
    /// Every operation.
    pub const ALL: Ops = Ops(15);

    /// The operation named `name` (`*`: all).
    pub fn named(name: &str) -> Option<Ops> {
        Some(match name {
            "CREATE" => Ops::CREATE,
            "UPDATE" => Ops::UPDATE,
            "DELETE" => Ops::DELETE,
            "CONNECT" => Ops::CONNECT,
            "*" => Ops::ALL,
            _ => return None,
        })
    }

    /// The first of CREATE, UPDATE and DELETE in the set, by name (the operation a witness
    /// request is tried with).
    pub fn first_witnessed(self) -> Option<&'static str> {
        [
            (Ops::CREATE, "CREATE"),
            (Ops::UPDATE, "UPDATE"),
            (Ops::DELETE, "DELETE"),
        ]
        .into_iter()
        .find(|(o, _)| self.has(*o))
        .map(|(_, n)| n)
    }

    /// Set intersection.
    pub fn and(self, o: Ops) -> Ops {
        Ops(self.0 & o.0)
    }

    /// Set union.
    pub fn or(self, o: Ops) -> Ops {
        Ops(self.0 | o.0)
    }

    /// The complement.
    pub fn complement(self) -> Ops {
        Ops(!self.0 & Ops::ALL.0)
    }

    /// Whether `o` is in the set.
    pub fn has(self, o: Ops) -> bool {
        self.0 & o.0 == o.0 && o.0 != 0
    }
}

/// Where an access chain is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// In the analysed expression itself.
    Site,
    /// In `spec.variables[i].expression`, reached through a use of the variable.
    Variable(usize),
}

/// A value in a [`Cond`].
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// The value at a path from a root (no list steps).
    Path(Root, Vec<Seg>),
    /// A literal.
    Lit(Value),
    /// `request.operation`.
    Operation,
    /// `request.kind.group`, `.version`, `.kind`.
    RequestKind(&'static str),
    /// `request.namespace`.
    RequestNamespace,
    /// `request.name`.
    RequestName,
}

/// A condition under which a chain is evaluated, as far as it can be decided on a witness
/// request; [`Cond::Unknown`] for anything else.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// A boolean literal (also a comprehension's accumulator at its first element).
    Const(bool),
    /// Not decidable here.
    Unknown,
    /// Negation.
    Not(Box<Cond>),
    /// Conjunction.
    And(Vec<Cond>),
    /// Disjunction.
    Or(Vec<Cond>),
    /// `has()` of the path (its last step's presence; an error when its parent is absent).
    Has(Root, Vec<Seg>),
    /// `a == b`.
    Eq(Term, Term),
    /// `a in [b, c, ...]`.
    In(Term, Vec<Term>),
    /// `a.contains(b)`, `a.startsWith(b)`, `a.endsWith(b)` on strings.
    Str(&'static str, Term, Term),
    /// A boolean value.
    Bool(Term),
}

/// The request a witness makes, as conditions see it.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `object` (`None`: null).
    pub object: Option<&'a Value>,
    /// `oldObject` (`None`: null).
    pub old_object: Option<&'a Value>,
    /// `request.operation`.
    pub operation: &'a str,
    /// `request.kind` (group, version, kind).
    pub kind: (&'a str, &'a str, &'a str),
    /// `request.namespace`.
    pub namespace: &'a str,
    /// `request.name`.
    pub name: &'a str,
    /// `namespaceObject` is null (a cluster-scoped kind or a Namespace); otherwise it is a
    /// Namespace the witness does not describe (conditions on it are not decided).
    pub namespace_object_null: bool,
    /// `params`: `None` when not known (no binding is looked at), `Some(None)` when null (a
    /// binding without `paramRef`), `Some(Some(p))` the param object of one binding.
    pub params: Option<Option<&'a Value>>,
}

impl Request<'_> {
    fn root(&self, r: Root) -> Option<&Value> {
        match r {
            Root::Object => self.object,
            Root::OldObject => self.old_object,
            Root::NamespaceObject => None,
            Root::Params => self.params.flatten(),
        }
    }

    /// Whether root `r` is null in this request (`None`: not known).
    fn root_is_null(&self, r: Root) -> Option<bool> {
        match r {
            Root::Object => Some(self.object.is_none()),
            Root::OldObject => Some(self.old_object.is_none()),
            Root::NamespaceObject => self.namespace_object_null.then_some(true),
            Root::Params => self.params.map(|p| p.is_none()),
        }
    }

    /// The value at `path`; `None` where evaluation errors (an absent step, a null root).
    fn value(&self, t: &Term) -> Option<Value> {
        Some(match t {
            Term::Lit(v) => v.clone(),
            Term::Operation => Value::from(self.operation),
            Term::RequestKind(part) => Value::from(match *part {
                "group" => self.kind.0,
                "version" => self.kind.1,
                _ => self.kind.2,
            }),
            Term::RequestNamespace => Value::from(self.namespace),
            Term::RequestName => Value::from(self.name),
            // `object == null` and the like.
            Term::Path(r, path) if path.is_empty() && self.root_is_null(*r)? => Value::Null,
            Term::Path(r, path) => {
                let mut cur = self.root(*r)?;
                for seg in path {
                    match (seg, cur) {
                        (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => cur = m.get(f)?,
                        _ => return None,
                    }
                }
                cur.clone()
            }
        })
    }

    /// The truth of `c` for this request: `None` when it is not decided here or errors.
    pub fn eval(&self, c: &Cond) -> Option<bool> {
        match c {
            Cond::Const(b) => Some(*b),
            Cond::Unknown => None,
            Cond::Not(c) => self.eval(c).map(|b| !b),
            // cel-go: false wins over an error in `&&`, true in `||`.
            Cond::And(cs) => {
                let vs: Vec<Option<bool>> = cs.iter().map(|c| self.eval(c)).collect();
                if vs.contains(&Some(false)) {
                    Some(false)
                } else if vs.iter().all(|v| *v == Some(true)) {
                    Some(true)
                } else {
                    None
                }
            }
            Cond::Or(cs) => {
                let vs: Vec<Option<bool>> = cs.iter().map(|c| self.eval(c)).collect();
                if vs.contains(&Some(true)) {
                    Some(true)
                } else if vs.iter().all(|v| *v == Some(false)) {
                    Some(false)
                } else {
                    None
                }
            }
            Cond::Has(r, path) => {
                let (last, parent) = path.split_last()?;
                let mut cur = self.root(*r)?;
                for seg in parent {
                    match (seg, cur) {
                        (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => cur = m.get(f)?,
                        _ => return None,
                    }
                }
                match (last, cur) {
                    (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => Some(m.contains_key(f)),
                    _ => None,
                }
            }
            Cond::Eq(a, b) => Some(self.value(a)? == self.value(b)?),
            Cond::In(a, list) => {
                let a = self.value(a)?;
                let mut values = Vec::new();
                for t in list {
                    values.push(self.value(t)?);
                }
                Some(values.contains(&a))
            }
            Cond::Str(f, a, b) => {
                let (a, b) = (self.value(a)?, self.value(b)?);
                let (a, b) = (a.as_str()?, b.as_str()?);
                Some(match *f {
                    "contains" => a.contains(b),
                    "startsWith" => a.starts_with(b),
                    _ => a.ends_with(b),
                })
            }
            Cond::Bool(t) => self.value(t)?.as_bool(),
        }
    }
}

/// One selection or index of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What it selects.
    pub seg: Seg,
    /// The node's position (the `.` or `[`), as cel-go reports positions.
    pub pos: Option<Pos>,
    /// Byte offset of the `.` or `[` in the expression text.
    pub punct: usize,
    /// Byte offset just after the step's text (`.f`, `['k']`).
    pub end: usize,
    /// A presence test rather than an access (`.?f`, `[?'k']`, or any step after one): it
    /// never fails.
    pub optional: bool,
    /// A guard makes it present wherever it is evaluated (`has()`, `in`, `.?`/`hasValue()`,
    /// matchConditions, a comprehension's own keys).
    pub guarded: bool,
}

/// A maximal chain of selections and indexes from `object` or `oldObject`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// The expression it is written in.
    pub origin: Origin,
    /// Its root variable.
    pub root: Root,
    /// The path of the chain's first operand from the root (a comprehension variable's or a
    /// variable alias' path); empty when the chain starts at the root itself.
    pub base: Vec<Seg>,
    /// Byte offset of the chain's text in its expression.
    pub start: usize,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The operations for which it can be evaluated (guards on `request.operation`,
    /// `object != null`, ...).
    pub ops: Ops,
    /// What must be true for it to be evaluated and for its error to decide the expression's
    /// result (the other side of `&&` and `||`, the branch condition of `?:`, the
    /// matchConditions); a finding needs a witness on which all are true.
    /// Shared between the chains of one walk (a chain inside `a && (b && c)` has the
    /// conditions of the chains beside it and more).
    pub conds: Vec<Arc<Cond>>,
}

impl Chain {
    /// Whether the chain starts at the root variable itself (a null root fails at its first
    /// step).
    pub fn direct(&self) -> bool {
        self.base.is_empty()
    }

    /// The path from the root up to and including step `i`.
    pub fn path_to(&self, i: usize) -> Vec<Seg> {
        let mut p = self.base.clone();
        p.extend(self.steps.iter().take(i + 1).map(|s| s.seg.clone()));
        p
    }

    /// The path from the root through every step: [`Chain::path_to`] of step `i` is its
    /// first `base.len() + i + 1` segments ([`Chain::prefix_len`]).
    pub fn full_path(&self) -> Vec<Seg> {
        let mut p = Vec::with_capacity(self.base.len() + self.steps.len());
        p.extend(self.base.iter().cloned());
        p.extend(self.steps.iter().map(|s| s.seg.clone()));
        p
    }

    /// The length of [`Chain::path_to`] of step `i`.
    pub fn prefix_len(&self, i: usize) -> usize {
        self.base.len() + (i + 1).min(self.steps.len())
    }
}

/// A small valid object of a kind, as kube-apiserver admits it.
#[derive(Debug, Clone, PartialEq)]
pub struct WitnessObject {
    /// What the user creates (applied with `kubectl create`).
    pub input: Value,
    /// The same object as the validating admission plugins see it on CREATE: defaulted and
    /// with the server-set metadata, as recorded from the pinned release's API server.
    pub admitted: Value,
}

/// The witness objects of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct KindWitnesses {
    /// The kind's resource (`pods`).
    pub resource: String,
    /// Whether it is namespaced.
    pub namespaced: bool,
    /// The objects.
    pub objects: Vec<WitnessObject>,
}

/// The class of a runtime-safety finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RuntimeClass {
    /// A field that valid objects may omit.
    AbsentField,
    /// A map key that valid objects may omit.
    AbsentKey,
    /// `object` in a DELETE request, `oldObject` in a CREATE request: null.
    NullRoot,
    /// A variable the environment declares but the plugin never binds, so null in every
    /// request: `namespaceObject` in a webhook's match conditions (k8s.io/apiserver v0.37.1
    /// `admission/plugin/webhook/matchconditions/matcher.go` `Match` passes no namespace).
    Unbound,
    /// `namespaceObject` in a request for a cluster-scoped kind or a Namespace: null
    /// (k8s.io/apiserver v0.37.1 `admission/plugin/policy/validating/dispatcher.go`,
    /// `Dispatch`: no namespace is looked up for them).
    NullNamespaceObject,
    /// A label or the annotations of the request's namespace (`namespaceObject` of a
    /// namespaced kind), which namespaces may omit.
    AbsentNamespaceField,
    /// `params` in a request a binding without `paramRef` matches: null (k8s.io/apiserver
    /// v0.37.1 `admission/plugin/policy/generic/policy_dispatcher.go`, `CollectParams`).
    NullParams,
    /// A key or field the param object a binding's `paramRef` resolves to does not have.
    AbsentParamField,
}

impl fmt::Display for RuntimeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuntimeClass::AbsentField => "absent field",
            RuntimeClass::AbsentKey => "absent map key",
            RuntimeClass::NullRoot => "null object",
            RuntimeClass::Unbound => "never bound for webhooks",
            RuntimeClass::NullNamespaceObject => "namespaceObject is null",
            RuntimeClass::AbsentNamespaceField => "absent from the namespace",
            RuntimeClass::NullParams => "params is null: the binding has no paramRef",
            RuntimeClass::AbsentParamField => "absent from that param object",
        })
    }
}

/// The object and request on which an expression errors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Witness {
    /// The request operation: `CREATE` (create the object), `UPDATE` (create it, then update
    /// it: `oldObject` is the object as created) or `DELETE` (create it, then delete it).
    pub operation: &'static str,
    /// The object to create (before defaulting).
    pub object: Value,
    /// For a finding on `params` with a param object: that object, as the input gives it
    /// (create it, and bind the policy with a `paramRef` to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A text edit of the expression: replace bytes `start..end` with `replacement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Edit {
    /// Byte offset in the expression.
    pub start: usize,
    /// Byte offset in the expression (exclusive).
    pub end: usize,
    /// The new text.
    pub replacement: String,
}

/// One runtime-safety finding: an expression that errors at admission on a valid object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeFinding {
    /// The expression's fieldRef (a variable's, when the access is in a variable).
    pub field_ref: String,
    /// The kinds whose witnesses make it fail (`apps/v1, Kind=Deployment`), in checking
    /// order.
    pub kinds: Vec<String>,
    /// Its class.
    pub class: RuntimeClass,
    /// The position of the failing selection or index in the expression (1-based line,
    /// 0-based column).
    #[serde(skip)]
    pub pos: Option<Pos>,
    /// The access, as written, up to the failing step.
    pub access: String,
    /// The evaluation error kube-apiserver reports (`no such key: runAsNonRoot`).
    pub error: String,
    /// What happens at admission, by the policy's failure policy.
    pub consequence: String,
    /// For a messageExpression: the message kube-apiserver denies with instead (the
    /// validation's `message`, or `failed expression: <expression>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_message: Option<String>,
    /// For a finding on `params`: the binding it holds for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// For [`RuntimeClass::AbsentParamField`]: the param object (`namespace/name` or
    /// `name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// The object and request on which it fails (the first kind's).
    pub witness: Witness,
    /// A rewrite of the expression that does not fail there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Edit>,
    /// The expression with [`RuntimeFinding::fix`] applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed_expression: Option<String>,
}

impl RuntimeFinding {
    /// One line: `` `object.spec.x` fails with "no such key: x" on valid Pod objects that
    /// omit it (absent field); <consequence>``.
    pub fn text_without_field(&self) -> String {
        let kinds: Vec<&str> = self
            .kinds
            .iter()
            .map(|k| k.rsplit_once("Kind=").map_or(k.as_str(), |(_, k)| k))
            .collect();
        let on = match self.class {
            RuntimeClass::NullRoot => format!("in {} requests", self.witness.operation),
            RuntimeClass::Unbound => "in every request".to_owned(),
            RuntimeClass::NullNamespaceObject => format!("in {} requests", kinds.join(", ")),
            RuntimeClass::AbsentNamespaceField => {
                format!("in {} requests whose namespace omits it", kinds.join(", "))
            }
            RuntimeClass::NullParams => format!(
                "in {} requests binding '{}' matches",
                kinds.join(", "),
                self.binding.as_deref().unwrap_or_default()
            ),
            RuntimeClass::AbsentParamField => format!(
                "in {} requests binding '{}' matches, with its param '{}'",
                kinds.join(", "),
                self.binding.as_deref().unwrap_or_default(),
                self.param.as_deref().unwrap_or_default()
            ),
            _ => format!("on valid {} objects that omit it", kinds.join(", ")),
        };
        format!(
            "`{}` fails with \"{}\" {on} ({}); {}",
            self.access, self.error, self.class, self.consequence
        )
    }

    /// [`RuntimeFinding::text_without_field`] after the fieldRef.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field_ref, self.text_without_field())
    }
}

/// Which outcomes a step can have for one witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Some instance of the prefix is present and the step is absent from it.
    Fails,
    /// The step is present wherever the prefix is.
    Present,
}

/// The values at `path` in `v` (lists expand at [`Seg::Item`]): for each instance of the
/// parent that is present, whether the last step is. `None` when the parent is never
/// present (the step is not reached).
fn reach(v: &Value, path: &[Seg]) -> Option<Reach> {
    let (last, parent) = path.split_last()?;
    if !parent.iter().any(|s| matches!(s, Seg::Item(_))) {
        // No list to expand: one instance of the parent at most, followed without collecting
        // (the same answer as the expansion below).
        let mut cur = v;
        for seg in parent {
            cur = match (seg, cur) {
                (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => m.get(f)?,
                _ => return None,
            };
        }
        let absent = match (last, cur) {
            (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => !m.contains_key(f),
            _ => false,
        };
        return Some(if absent { Reach::Fails } else { Reach::Present });
    }
    reach_expanded(v, path)
}

/// [`reach`] by expanding every instance of each step (what a path with list steps needs).
fn reach_expanded(v: &Value, path: &[Seg]) -> Option<Reach> {
    let (last, parent) = path.split_last()?;
    let mut cur: Vec<&Value> = vec![v];
    for seg in parent {
        let mut next = Vec::new();
        for c in cur {
            match (seg, c) {
                (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => next.extend(m.get(f)),
                (Seg::Item(_), Value::Array(a)) => next.extend(a.iter()),
                _ => {}
            }
        }
        cur = next;
    }
    if cur.is_empty() {
        return None;
    }
    let absent = cur.iter().any(|c| match (last, c) {
        (Seg::Field(f) | Seg::Key(f), Value::Object(m)) => !m.contains_key(f),
        // A comprehension's own keys are present; an element of a list is not selected.
        _ => false,
    });
    Some(if absent { Reach::Fails } else { Reach::Present })
}

/// Whether `path` is reached in `v` and its last step absent there.
pub fn fails_at(v: &Value, path: &[Seg]) -> bool {
    reach(v, path) == Some(Reach::Fails)
}

/// Whether the value at `path` (no list steps) can be set in `v`: every parent is an object.
fn set_at(v: &mut Value, path: &[Seg], value: Value) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    let mut cur = v;
    for seg in parent {
        let (Seg::Field(f) | Seg::Key(f)) = seg else {
            return false;
        };
        let Value::Object(m) = cur else {
            return false;
        };
        cur = m
            .entry(f.clone())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    let (Seg::Field(f) | Seg::Key(f)) = last else {
        return false;
    };
    match cur {
        Value::Object(m) => {
            m.insert(f.clone(), value);
            true
        }
        _ => false,
    }
}

/// The key a synthesized map holds (a valid label key, annotation key and ConfigMap key).
pub const WITNESS_KEY: &str = "vapcheck-witness";

/// A witness for step `path` (the path from the root up to and including the step): the
/// first object of `objects` where the step is reached and absent. For a constant map key
/// whose map no object has, the first object with the map holding only [`WITNESS_KEY`]
/// (maps are omitted when empty, so a present map has a key).
pub fn witness_for(
    objects: &[WitnessObject],
    path: &[Seg],
    evaluated: &dyn Fn(&Value) -> bool,
) -> Option<Value> {
    for o in objects {
        if reach(&o.admitted, path) == Some(Reach::Fails) && evaluated(&o.admitted) {
            return Some(o.input.clone());
        }
    }
    let (Seg::Key(k), parent) = path.split_last()? else {
        return None;
    };
    if k == WITNESS_KEY || parent.iter().any(|s| !matches!(s, Seg::Field(_))) {
        return None;
    }
    for o in objects {
        let mut admitted = o.admitted.clone();
        let map = serde_json::json!({ WITNESS_KEY: "true" });
        if !set_at(&mut admitted, parent, map.clone()) {
            continue;
        }
        if reach(&admitted, path) == Some(Reach::Fails) && evaluated(&admitted) {
            let mut input = o.input.clone();
            if set_at(&mut input, parent, map) {
                return Some(input);
            }
        }
    }
    None
}

/// Whether step `path` is present in every object of `objects` where its parent is (a field
/// the API server always sets, as the recorded objects show).
pub fn always_present(objects: &[WitnessObject], path: &[Seg]) -> bool {
    !objects.is_empty()
        && objects
            .iter()
            .all(|o| reach(&o.admitted, path) == Some(Reach::Present))
}

/// The rewrite of `chain` that makes step `i` (and every later one) a presence test and
/// gives the chain `zero` when a step is absent: `object.spec.securityContext.runAsNonRoot`
/// → `object.spec.securityContext.?runAsNonRoot.orValue(false)`. Once a selection is
/// optional, cel-go tests every later one for presence (v0.29.2 `interpreter/attributes.go`,
/// `applyQualifiers`), so one `.?` covers the rest of the chain. `text` is the expression.
pub fn optional_rewrite(text: &str, chain: &Chain, i: usize, zero: &str) -> Option<Edit> {
    let step = chain.steps.get(i)?;
    let last = chain.steps.last()?;
    let start = step.punct;
    let end = last.end;
    let body = text.get(start..end)?;
    let replacement = match step.seg {
        Seg::Field(_) => {
            let rest = body.strip_prefix('.')?;
            format!(".?{rest}.orValue({zero})")
        }
        Seg::Key(_) => {
            let rest = body.strip_prefix('[')?;
            format!("[?{rest}.orValue({zero})")
        }
        _ => return None,
    };
    Some(Edit {
        start,
        end,
        replacement,
    })
}

/// `text` with `edit` applied.
pub fn apply(text: &str, edit: &Edit) -> Option<String> {
    Some(format!(
        "{}{}{}",
        text.get(..edit.start)?,
        edit.replacement,
        text.get(edit.end..)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> Seg {
        Seg::Field(s.into())
    }

    fn pod() -> WitnessObject {
        WitnessObject {
            input: json!({"kind": "Pod", "spec": {"containers": [{"name": "c"}]}}),
            admitted: json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {
                "securityContext": {}, "containers": [{"name": "c", "image": "i"}]}}),
        }
    }

    #[test]
    fn witnesses_need_a_present_parent_and_an_absent_step() {
        let objs = [pod()];
        // securityContext is always set; runAsNonRoot is not.
        assert!(always_present(&objs, &[f("spec"), f("securityContext")]));
        assert!(witness_for(&objs, &[f("spec"), f("securityContext")], &|_| true).is_none());
        assert!(
            witness_for(
                &objs,
                &[f("spec"), f("securityContext"), f("runAsNonRoot")],
                &|_| true
            )
            .is_some()
        );
        // The parent is never present: not reached, no witness for this step.
        assert!(
            witness_for(
                &objs,
                &[f("spec"), f("affinity"), f("nodeAffinity")],
                &|_| true
            )
            .is_none()
        );
        // List elements.
        let item = [
            f("spec"),
            f("containers"),
            Seg::Item(1),
            f("securityContext"),
        ];
        assert!(witness_for(&objs, &item, &|_| true).is_some());
        let name = [f("spec"), f("containers"), Seg::Item(1), f("name")];
        assert!(witness_for(&objs, &name, &|_| true).is_none());
        assert!(always_present(&objs, &name));
    }

    #[test]
    fn reach_without_list_steps_is_the_expansion() {
        let v = json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {
            "containers": [{"name": "c"}], "replicas": 1}});
        let k = |s: &str| Seg::Key(s.into());
        let paths: Vec<Vec<Seg>> = vec![
            vec![],
            vec![f("metadata")],
            vec![f("status")],
            vec![f("metadata"), f("name")],
            vec![f("metadata"), f("namespace")],
            vec![f("metadata"), f("labels"), k("a")],
            vec![f("metadata"), f("labels"), k("b")],
            vec![f("metadata"), f("annotations"), k("b")],
            vec![f("metadata"), f("name"), f("x")],
            vec![f("spec"), f("replicas"), f("x")],
            vec![f("spec"), f("containers"), f("name")],
            vec![f("metadata"), Seg::IterKey],
            vec![f("metadata"), Seg::IterKey, f("x")],
            vec![f("spec"), f("containers"), Seg::Item(1), f("name")],
            vec![f("spec"), f("containers"), Seg::Item(1), f("image")],
        ];
        let answers: Vec<Option<Reach>> = paths.iter().map(|p| reach(&v, p)).collect();
        for (p, a) in paths.iter().zip(&answers) {
            assert_eq!(*a, reach_expanded(&v, p), "{p:?}");
        }
        let fails = answers.iter().filter(|a| **a == Some(Reach::Fails)).count();
        let present = answers
            .iter()
            .filter(|a| **a == Some(Reach::Present))
            .count();
        assert_eq!((fails, present), (4, 8));
    }

    #[test]
    fn map_keys_get_a_synthesized_map() {
        let objs = [pod()];
        let labels = [f("metadata"), f("labels")];
        assert!(witness_for(&objs, &labels, &|_| true).is_some());
        let team = [f("metadata"), f("labels"), Seg::Key("team".into())];
        let w = witness_for(&objs, &team, &|_| true).expect("a witness");
        assert_eq!(w["metadata"]["labels"], json!({WITNESS_KEY: "true"}));
        assert_eq!(w["spec"], json!({"containers": [{"name": "c"}]}));
    }

    #[test]
    fn rewrites() {
        let text = "object.spec.securityContext.runAsNonRoot == true";
        let chain = Chain {
            origin: Origin::Site,
            root: Root::Object,
            base: vec![],
            start: 0,
            steps: vec![
                Step {
                    seg: f("spec"),
                    pos: None,
                    punct: 6,
                    end: 11,
                    optional: false,
                    guarded: false,
                },
                Step {
                    seg: f("securityContext"),
                    pos: None,
                    punct: 11,
                    end: 27,
                    optional: false,
                    guarded: false,
                },
                Step {
                    seg: f("runAsNonRoot"),
                    pos: None,
                    punct: 27,
                    end: 40,
                    optional: false,
                    guarded: false,
                },
            ],
            ops: Ops::ALL,
            conds: Vec::new(),
        };
        let e = optional_rewrite(text, &chain, 2, "false").expect("edit");
        assert_eq!(
            apply(text, &e).as_deref(),
            Some("object.spec.securityContext.?runAsNonRoot.orValue(false) == true")
        );
        let e = optional_rewrite(text, &chain, 1, "false").expect("edit");
        assert_eq!(
            apply(text, &e).as_deref(),
            Some("object.spec.?securityContext.runAsNonRoot.orValue(false) == true")
        );
    }

    #[test]
    fn null_roots_in_conditions() {
        let pod = json!({"metadata": {"name": "p"}});
        let request = |object, namespace_object_null| Request {
            object,
            old_object: None,
            operation: "CREATE",
            kind: ("", "v1", "Pod"),
            namespace: "",
            name: "p",
            namespace_object_null,
            params: None,
        };
        let null = |r| Cond::Eq(Term::Path(r, vec![]), Term::Lit(Value::Null));
        let r = request(Some(&pod), true);
        assert_eq!(r.eval(&null(Root::OldObject)), Some(true));
        assert_eq!(r.eval(&null(Root::Object)), Some(false));
        assert_eq!(r.eval(&null(Root::NamespaceObject)), Some(true));
        // A Namespace the witness does not describe: not decided.
        let r = request(Some(&pod), false);
        assert_eq!(r.eval(&null(Root::NamespaceObject)), None);
        let name = Term::Path(Root::NamespaceObject, vec![f("metadata"), f("name")]);
        assert_eq!(r.eval(&Cond::Eq(name, Term::Lit("x".into()))), None);
        // object is null on DELETE.
        let r = request(None, false);
        assert_eq!(r.eval(&null(Root::Object)), Some(true));
        // params: not known without a binding, null without paramRef, else the object.
        assert_eq!(r.eval(&null(Root::Params)), None);
        let cm = json!({"data": {"a": "1"}});
        let key = |k: &str| Cond::Has(Root::Params, vec![f("data"), Seg::Key(k.into())]);
        let with = |params| Request {
            params,
            ..request(Some(&pod), false)
        };
        assert_eq!(with(Some(None)).eval(&null(Root::Params)), Some(true));
        assert_eq!(with(Some(Some(&cm))).eval(&null(Root::Params)), Some(false));
        assert_eq!(with(Some(Some(&cm))).eval(&key("a")), Some(true));
        assert_eq!(with(Some(Some(&cm))).eval(&key("b")), Some(false));
        // has() on null params errors: not decided.
        assert_eq!(with(Some(None)).eval(&key("a")), None);
    }

    #[test]
    fn ops() {
        let cu = Ops::CREATE.or(Ops::UPDATE);
        assert!(cu.has(Ops::CREATE));
        assert!(!cu.has(Ops::DELETE));
        assert_eq!(cu.complement(), Ops::DELETE.or(Ops::CONNECT));
        assert_eq!(Ops::named("*"), Some(Ops::ALL));
    }
}
