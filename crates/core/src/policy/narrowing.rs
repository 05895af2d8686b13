//! Kind narrowing and runtime classes of findings (issue 14).
//!
//! The cel-go-compatible checker types every expression once per kind, with no knowledge of
//! guards: `object.kind == 'Pod' ? object.spec.containers : object.spec.template.spec.containers`
//! gets `undefined field 'template'` on Pod although that branch never runs for a Pod. The
//! backend's AST analysis ([`Guards`], made by `k8s_env::narrowing`) records, for each AST
//! node, the condition under which CEL evaluates it; this module evaluates that condition for
//! one kind and decides, for each finding, its [`FindingClass`]:
//!
//! * [`FindingClass::Unreachable`]: the node is not evaluated for this kind (its guard is
//!   false for the kind). Extended mode drops such findings from its own (non-upstream) text.
//! * [`FindingClass::StaticTypingOnly`]: the static type is wrong but the admission-time
//!   evaluation, on dynamic values, works (list concatenation of two schema paths, a
//!   conditional of an object and a map, `null` equality, `has()` of a field the kind lacks).
//! * [`FindingClass::FailsAtAdmission`]: an evaluation error or a wrong result for a valid
//!   object of the kind.
//!
//! Nothing here changes what the checker says; strict mode never uses it.

use std::fmt;
use std::sync::Arc;

use super::gvk::Gvk;
use super::issues::Issue;

/// A node position: 1-based line, 0-based column in code points (cel-go `common.Location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 0-based column.
    pub column: usize,
}

/// An atomic guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Atom {
    /// `object.kind == 'X'`, `oldObject.kind == 'X'` or `request.kind.kind == 'X'`.
    KindIs(String),
    /// `object.apiVersion == 'g/v'` (also `oldObject`), `request.kind.group == 'g'`,
    /// `request.kind.version == 'v'`. The validating plugin converts the object to the kind
    /// the policy matched and names that kind in `request.kind` (k8s.io/apiserver v0.37.1
    /// `pkg/admission/plugin/policy/validating/dispatcher.go`, `Dispatch`:
    /// `NewVersionedAttributes(a, matchKind, o)`; `pkg/admission/plugin/cel/condition.go`,
    /// `CreateAdmissionRequest`: `Kind` is the equivalent kind, the request's own is
    /// `requestKind`), so these are the checked kind's group and version.
    GvkIs(GvkPart, String),
    /// `has(e.f)`: the position of the presence test and those of every node of `e`. For a
    /// kind where the checker reports `f` undefined (an error at `test`) and nothing inside
    /// `e`, the test is false for every valid object. An error inside `e` says nothing: `e`
    /// may fail at run time, and an error does not make a guard false.
    Has {
        /// The presence test.
        test: Option<Pos>,
        /// The nodes of its operand.
        operand: Vec<Pos>,
        /// `has(object.a.b)`: the field path `[object, a, b]` (plain field selections from
        /// `object` or `oldObject`, the root first).
        path: Option<Vec<String>>,
    },
    /// `e.?f.g.hasValue()` (and `orValue(<bool>)`): an optional field-selection chain is
    /// present. `tests` are the positions of the selections from the first `.?` on, `operand`
    /// those of every node of `e`. Once a selection is optional, cel-go tests every later one
    /// for presence instead of failing (cel-go v0.29.2 `interpreter/attributes.go`,
    /// `applyQualifiers`: `isOpt = isOpt || qual.IsOptional()`, then `QualifyIfPresent`; a
    /// missing field gives `optional.none()`). So where the checker reports a field of the
    /// chain undefined (an error at one of `tests`) and nothing inside `e`, the chain is
    /// `optional.none()` for every valid object and `hasValue()` is false, as for `has()`.
    Present {
        /// The optional selections.
        tests: Vec<Pos>,
        /// The nodes of the chain's non-optional operand.
        operand: Vec<Pos>,
    },
    /// `'k' in object.a` (also `oldObject`): the map-key test of a field. `path` is
    /// `[object, a, k]`, `operand` the positions of the nodes of `object.a`. False for a kind
    /// whose schema at `object.a` is a closed object without a property `k` (then no valid
    /// object has the key: built-in objects are Go structs, whose `in` is `found` of
    /// `lookupField`, k8s.io/apiserver v0.37.1 `pkg/cel/common/valuesschemalesstyped.go`,
    /// `reflectSchemalessTypedStruct.Contains`; custom resources are pruned to their schema);
    /// true like `has()` when `k` is required.
    HasKey {
        /// The nodes of the map operand.
        operand: Vec<Pos>,
        /// The field path, the root first.
        path: Vec<String>,
    },
}

/// What a kind's schema says about a field path from `object` (field names only, the root
/// not included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Every step before the last is a field of an object type, and the last is listed in
    /// its parent's `required` (`ExpressionChecker::is_required_field`).
    Required,
    /// Every step before the last is a field of an object type, and the parent is a closed
    /// object type (not `x-kubernetes-preserve-unknown-fields`) that declares no property of
    /// that name (`ExpressionChecker::is_absent_field`).
    Absent,
    /// Anything else.
    Unknown,
}

/// The part of a group/version/kind a guard compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GvkPart {
    /// `Kind`.
    Kind,
    /// `group/version` (`version` for the core group).
    ApiVersion,
    /// The group (`""` for the core group).
    Group,
    /// The version.
    Version,
}

/// A condition over atoms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Formula {
    /// Always true (no guard).
    True,
    /// Anything (an expression the analysis does not understand).
    Unknown,
    /// An atom.
    Atom(Atom),
    /// Negation.
    Not(Box<Formula>),
    /// Conjunction.
    And(Vec<Formula>),
    /// Disjunction.
    Or(Vec<Formula>),
    /// A formula shared with other nodes' guards (the analysis shares a parent's guard
    /// instead of copying it).
    Shared(Arc<Formula>),
}

/// Three-valued truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    /// Always true for the kind.
    True,
    /// Never true for the kind.
    False,
    /// Not known.
    Unknown,
}

impl Formula {
    /// `self && other`, simplified.
    pub fn and(self, other: Formula) -> Formula {
        match (self, other) {
            (Formula::True, f) | (f, Formula::True) => f,
            (Formula::Unknown, f) | (f, Formula::Unknown) => f,
            (Formula::And(mut a), Formula::And(b)) => {
                a.extend(b);
                Formula::And(a)
            }
            (Formula::And(mut a), f) | (f, Formula::And(mut a)) => {
                a.push(f);
                Formula::And(a)
            }
            (a, b) => Formula::And(vec![a, b]),
        }
    }

    /// `!self`.
    pub fn negate(self) -> Formula {
        match self {
            Formula::Unknown => Formula::Unknown,
            Formula::Not(f) => *f,
            f => Formula::Not(Box::new(f)),
        }
    }

    /// The truth of the formula for objects of `kind`, where the checker reported errors at
    /// `errors` (positions of this expression's findings for the kind).
    pub fn eval(&self, kind: &str, errors: &[Pos]) -> Truth {
        self.eval_in(&Facts {
            kind,
            group_version: None,
            errors,
            presence: &|_| Presence::Unknown,
            node_operand: None,
        })
    }

    /// The truth of the formula under `facts`.
    pub fn eval_in(&self, facts: &Facts<'_>) -> Truth {
        let (kind, errors) = (facts.kind, facts.errors);
        match self {
            Formula::True => Truth::True,
            Formula::Unknown => Truth::Unknown,
            Formula::Atom(Atom::KindIs(k)) => {
                if k == kind {
                    Truth::True
                } else {
                    Truth::False
                }
            }
            Formula::Atom(Atom::GvkIs(part, value)) => match facts.group_version {
                None => Truth::Unknown,
                Some((group, version)) => {
                    let holds = match part {
                        GvkPart::Kind => value == kind,
                        GvkPart::Group => value == group,
                        GvkPart::Version => value == version,
                        GvkPart::ApiVersion => match value.split_once('/') {
                            Some((g, v)) => !g.is_empty() && g == group && v == version,
                            None => group.is_empty() && value == version,
                        },
                    };
                    if holds { Truth::True } else { Truth::False }
                }
            },
            Formula::Atom(Atom::Has {
                test,
                operand,
                path,
            }) => {
                if test.is_some_and(|t| errors.contains(&t))
                    && !operand.iter().any(|p| errors.contains(p))
                {
                    Truth::False
                } else if let Some(path) = path
                    && !operand.iter().any(|p| errors.contains(p))
                    && facts.required_present(path)
                {
                    Truth::True
                } else {
                    Truth::Unknown
                }
            }
            Formula::Atom(Atom::Present { tests, operand }) => {
                if tests.iter().any(|t| errors.contains(t))
                    && !operand.iter().any(|p| errors.contains(p))
                {
                    Truth::False
                } else {
                    Truth::Unknown
                }
            }
            Formula::Atom(Atom::HasKey { operand, path }) => {
                if operand.iter().any(|p| errors.contains(p)) {
                    Truth::Unknown
                } else if facts.schema_says(path) == Presence::Absent {
                    Truth::False
                } else if facts.required_present(path) {
                    Truth::True
                } else {
                    Truth::Unknown
                }
            }
            Formula::Shared(f) => f.eval_in(facts),
            Formula::Not(f) => match f.eval_in(facts) {
                Truth::True => Truth::False,
                Truth::False => Truth::True,
                Truth::Unknown => Truth::Unknown,
            },
            Formula::And(fs) => {
                let mut all_true = true;
                for f in fs {
                    match f.eval_in(facts) {
                        Truth::False => return Truth::False,
                        Truth::Unknown => all_true = false,
                        Truth::True => {}
                    }
                }
                if all_true {
                    Truth::True
                } else {
                    Truth::Unknown
                }
            }
            Formula::Or(fs) => {
                let mut all_false = true;
                for f in fs {
                    match f.eval_in(facts) {
                        Truth::True => return Truth::True,
                        Truth::Unknown => all_false = false,
                        Truth::False => {}
                    }
                }
                if all_false {
                    Truth::False
                } else {
                    Truth::Unknown
                }
            }
        }
    }
}

/// What is known, for one kind, when a guard is evaluated for one node.
pub struct Facts<'a> {
    /// The kind (`Kind`).
    pub kind: &'a str,
    /// Its group and version, when known.
    pub group_version: Option<(&'a str, &'a str)>,
    /// The positions of the expression's findings for the kind.
    pub errors: &'a [Pos],
    /// What the kind's schema says about a field path (field names from the root of
    /// `object`, which `oldObject` shares).
    pub presence: &'a dyn Fn(&[String]) -> Presence,
    /// The node whose guard is evaluated, when it is a field selection on a plain field path
    /// from `object` or `oldObject`: that path, the root first (`object.spec.containers` →
    /// `[object, spec]`).
    pub node_operand: Option<&'a [String]>,
}

impl Facts<'_> {
    /// `has(object.<path>)` is true whenever the node is evaluated.
    ///
    /// The last field is required in its parent's schema, so it is present whenever its
    /// parent is: in the pinned release the request's object reaches validating admission
    /// only after the registry's strategy validation (k8s.io/apiserver v0.37.1
    /// `pkg/registry/generic/registry/store.go`, `Store.Create`: `rest.BeforeCreate` (which
    /// runs `strategy.Validate`) before `createValidation`; `Store.Update`:
    /// `rest.BeforeUpdate` before `updateValidation`), which rejects a custom resource
    /// without a required field; a built-in object is a Go struct whose required fields are
    /// the ones without `omitempty`, and CEL sees such a field whatever its value
    /// (`pkg/cel/common/valuesschemalesstyped.go`, `lookupField`: a field is absent only
    /// when `CanOmit`, i.e. `omitempty` and empty). The parent itself may be absent (then
    /// `has()` is an error, not false): the node must select on a path that starts with the
    /// parent's, so that it fails on the same missing parent whatever the guard says.
    /// `DELETE` requests have a null `object` and `CREATE` requests a null `oldObject`; there
    /// every node on such a path fails alike, guarded or not. `oldObject` is the stored
    /// object, which passed the same validation when it was written.
    fn required_present(&self, path: &[String]) -> bool {
        let Some((_, parent)) = path.split_last() else {
            return false;
        };
        !parent.is_empty()
            && self
                .node_operand
                .is_some_and(|node| node.starts_with(parent))
            && self.schema_says(path) == Presence::Required
    }

    /// [`Facts::presence`] of a path whose first element is the root (`object`/`oldObject`).
    fn schema_says(&self, path: &[String]) -> Presence {
        match path.split_first() {
            Some((_, fields)) if !fields.is_empty() => (self.presence)(fields),
            _ => Presence::Unknown,
        }
    }
}

/// One AST node as the narrowing analysis sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedNode {
    /// Its position (`None`: no recorded position).
    pub pos: Option<Pos>,
    /// When CEL evaluates it.
    pub guard: Arc<Formula>,
    /// It is the presence test of a `has()` macro.
    pub has_test: bool,
    /// A field selection `object.<path>.f` or `oldObject.<path>.f` (plain field
    /// selections): the root and `path` (`[object, spec]`).
    pub operand_path: Option<Vec<String>>,
    /// An optional field selection: `e.?f`, or `.f` after one (`e.?f.g`). cel-go tests such
    /// a field for presence (`optional.none()` when missing) instead of failing.
    pub optional_select: bool,
    /// `variables.<name>`: the name (a use of the variable).
    pub variable: Option<String>,
    /// The identifier `variables` itself.
    pub variables_ident: bool,
}

/// The analysis of one expression: every node with its guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guards {
    /// The nodes, in any order.
    pub nodes: Vec<GuardedNode>,
    /// What the analysis knows about the value of the whole expression (a matchCondition's
    /// formula).
    pub root: Formula,
}

impl Guards {
    fn at(&self, pos: Pos) -> impl Iterator<Item = &GuardedNode> {
        self.nodes.iter().filter(move |n| n.pos == Some(pos))
    }

    /// The nodes at `pos`, in [`Guards::nodes`] order (what [`unreachable_among`] takes: the
    /// lookup done once for a position asked about for several kinds).
    pub fn nodes_at(&self, pos: Pos) -> Vec<&GuardedNode> {
        self.at(pos).collect()
    }
}

/// What a finding means at admission time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingClass {
    /// An evaluation error or a wrong result for some valid object of the kind.
    FailsAtAdmission,
    /// The static type is wrong; evaluation on dynamic values works.
    StaticTypingOnly,
    /// The node is never evaluated for objects of the kind.
    Unreachable,
}

impl fmt::Display for FindingClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FindingClass::FailsAtAdmission => "fails at admission",
            FindingClass::StaticTypingOnly => "static typing only",
            FindingClass::Unreachable => "unreachable",
        })
    }
}

/// One type-checking issue of a policy classified by the narrowing (what it means at
/// admission time): the `findings` of the extended status. Not a `finding::Finding`,
/// which is what the outputs read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The expression's fieldRef.
    pub field_ref: String,
    /// The kind it was checked for.
    pub gvk: Gvk,
    /// Part of upstream's (strict) text.
    pub upstream: bool,
    /// Its class.
    pub class: FindingClass,
    /// Why, in a few words.
    pub why: &'static str,
    /// The first line of the finding.
    pub message: String,
}

/// Why of `has()` of a field the kind does not have ([`FindingClass::StaticTypingOnly`]).
pub const WHY_HAS_ABSENT: &str = "has() of a field the kind does not have is false at run time";
/// Why of an optional selection of a field the kind does not have.
pub const WHY_OPTIONAL_ABSENT: &str =
    "an optional selection of a field the kind does not have is none at run time";
/// Why of a presence test (`has()`, optional selection) of a field no checked kind has.
pub const WHY_NO_KIND_HAS_FIELD: &str =
    "no checked kind has this field: the presence test never finds it (wrong result)";

/// Whether the nodes at `pos` are never evaluated for objects of `gvk` (every node there has
/// a guard that is false for the kind). `errors` and `presence` as in [`classify`].
pub fn unreachable_at(
    guards: &Guards,
    pos: Pos,
    gvk: &Gvk,
    errors: &[Pos],
    presence: &dyn Fn(&[String]) -> Presence,
) -> bool {
    unreachable_among(guards.at(pos), gvk, errors, presence)
}

/// [`unreachable_at`] of the nodes at one position (e.g. [`Guards::nodes_at`], looked up
/// once for several kinds): there is one, and every one has a guard that is false for `gvk`.
pub fn unreachable_among<'g>(
    nodes: impl IntoIterator<Item = &'g GuardedNode>,
    gvk: &Gvk,
    errors: &[Pos],
    presence: &dyn Fn(&[String]) -> Presence,
) -> bool {
    let mut nodes = nodes.into_iter().peekable();
    nodes.peek().is_some()
        && nodes.all(|n| {
            n.guard.eval_in(&Facts {
                kind: &gvk.kind,
                group_version: Some((&gvk.group, &gvk.version)),
                errors,
                presence,
                node_operand: n.operand_path.as_deref(),
            }) == Truth::False
        })
}

/// Classifies one finding of `kind` (its `Kind`), given the expression's guards and the
/// positions of all findings of the expression for that kind.
///
/// `presence` tells what the kind's schema says about a field path from `object`
/// ([`Facts::presence`]).
pub fn classify(
    issue: &Issue,
    guards: Option<&Guards>,
    gvk: &Gvk,
    errors: &[Pos],
    presence: &dyn Fn(&[String]) -> Presence,
) -> (FindingClass, &'static str) {
    let nodes: Vec<&GuardedNode> = match (guards, issue.pos) {
        (Some(g), Some(p)) => g.at(p).collect(),
        _ => Vec::new(),
    };
    if let (Some(g), Some(p)) = (guards, issue.pos)
        && unreachable_at(g, p, gvk, errors, presence)
    {
        return (
            FindingClass::Unreachable,
            "guarded by a condition that is false for this kind",
        );
    }
    let msg = issue.message.as_str();
    if msg.starts_with("undefined field") {
        if nodes.iter().any(|n| n.optional_select) {
            return (FindingClass::StaticTypingOnly, WHY_OPTIONAL_ABSENT);
        }
        if nodes.iter().any(|n| n.has_test) {
            return (FindingClass::StaticTypingOnly, WHY_HAS_ABSENT);
        }
        return (FindingClass::FailsAtAdmission, "no such key at run time");
    }
    if let Some(rest) = msg.strip_prefix("found no matching overload for '") {
        let (op, args) = rest.split_once("' applied to '(").unwrap_or((rest, ""));
        let args = args.strip_suffix(")'").unwrap_or(args);
        match op {
            "_+_" if args.starts_with("list(") && args.contains(", list(") => {
                return (
                    FindingClass::StaticTypingOnly,
                    "list concatenation of dynamic lists works at run time",
                );
            }
            "_?_:_" if args.starts_with("bool, ") => {
                return (
                    FindingClass::StaticTypingOnly,
                    "a conditional returns either dynamic value at run time",
                );
            }
            "_==_" | "_!=_"
                if args.starts_with("null, ")
                    || args.ends_with(", null")
                    || args.starts_with("null_type, ")
                    || args.ends_with(", null_type") =>
            {
                return (
                    FindingClass::StaticTypingOnly,
                    "equality with null is defined for every value at run time",
                );
            }
            // `'k' in object.metadata`: admission objects are maps at run time
            // (apiserver admission/conversion.go `LazyObject.CELValue`), and `in` on a map
            // tests its keys. Schema object types are named after their kind (`Pod.spec`).
            "@in"
                if args.starts_with("string, ")
                    && args["string, ".len()..].starts_with(|c: char| c.is_ascii_uppercase()) =>
            {
                return (
                    FindingClass::StaticTypingOnly,
                    "`in` on an object tests its keys at run time",
                );
            }
            "_==_" | "_!=_" => {
                return (
                    FindingClass::FailsAtAdmission,
                    "values of different types are never equal: wrong result",
                );
            }
            _ => {
                return (
                    FindingClass::FailsAtAdmission,
                    "no such overload at run time",
                );
            }
        }
    }
    if msg.starts_with("undeclared reference") {
        return (FindingClass::FailsAtAdmission, "undeclared reference");
    }
    if msg.starts_with("must evaluate to") {
        return (FindingClass::FailsAtAdmission, "wrong result type");
    }
    if issue.text.starts_with("WARNING: ") {
        return (
            FindingClass::FailsAtAdmission,
            "function missing in the target Kubernetes version",
        );
    }
    (FindingClass::FailsAtAdmission, "type error")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::issues::Severity;

    /// An error at `column` (0-based) of line 1.
    fn error(column: usize, message: &str) -> Issue {
        Issue {
            severity: Severity::Error,
            pos: Some(Pos { line: 1, column }),
            message: message.to_owned(),
            text: format!("ERROR: <input>:1:{}: {message}", column + 1),
        }
    }

    fn two() -> Vec<Issue> {
        vec![
            error(6, "undefined field 'replicas'"),
            error(
                19,
                "found no matching overload for '_+_' applied to '(list(A), list(B))'",
            ),
        ]
    }

    #[test]
    fn three_valued_guards() {
        let pod = Formula::Atom(Atom::KindIs("Pod".into()));
        let p = Pos { line: 1, column: 3 };
        let has = Formula::Atom(Atom::Has {
            test: Some(p),
            operand: vec![Pos { line: 1, column: 9 }],
            path: None,
        });
        assert_eq!(pod.eval("Pod", &[]), Truth::True);
        assert_eq!(pod.eval("Deployment", &[]), Truth::False);
        assert_eq!(pod.clone().negate().eval("Deployment", &[]), Truth::True);
        assert_eq!(has.eval("Pod", &[]), Truth::Unknown);
        assert_eq!(has.eval("Pod", &[p]), Truth::False);
        // An error inside the operand: the test may fail, not a guard.
        assert_eq!(
            has.eval("Pod", &[p, Pos { line: 1, column: 9 }]),
            Truth::Unknown
        );
        let or = Formula::Or(vec![pod.clone(), has.clone()]);
        assert_eq!(or.eval("Deployment", &[p]), Truth::False);
        assert_eq!(or.eval("Deployment", &[]), Truth::Unknown);
        assert_eq!(Formula::True.and(pod).eval("Job", &[]), Truth::False);
    }

    #[test]
    fn classes() {
        let issues = two();
        assert_eq!(
            classify(&issues[0], None, &Gvk::new("", "v1", "Pod"), &[], &|_| {
                Presence::Unknown
            })
            .0,
            FindingClass::FailsAtAdmission
        );
        assert_eq!(
            classify(&issues[1], None, &Gvk::new("", "v1", "Pod"), &[], &|_| {
                Presence::Unknown
            })
            .0,
            FindingClass::StaticTypingOnly
        );
        let eq = [error(
            0,
            "found no matching overload for '_==_' applied to '(string, bool)'",
        )];
        assert_eq!(
            classify(&eq[0], None, &Gvk::new("", "v1", "Pod"), &[], &|_| {
                Presence::Unknown
            })
            .0,
            FindingClass::FailsAtAdmission
        );
        let cond = [error(
            0,
            "found no matching overload for '_?_:_' applied to '(string, bool, bool)'",
        )];
        assert_eq!(
            classify(&cond[0], None, &Gvk::new("", "v1", "Pod"), &[], &|_| {
                Presence::Unknown
            })
            .0,
            FindingClass::FailsAtAdmission
        );
        let inobj = [error(
            0,
            "found no matching overload for '@in' applied to '(string, ConfigMap.metadata)'",
        )];
        assert_eq!(
            classify(
                &inobj[0],
                None,
                &Gvk::new("", "v1", "ConfigMap"),
                &[],
                &|_| Presence::Unknown
            )
            .0,
            FindingClass::StaticTypingOnly
        );
        let null = [error(
            0,
            "found no matching overload for '_!=_' applied to '(string, null)'",
        )];
        assert_eq!(
            classify(&null[0], None, &Gvk::new("", "v1", "Pod"), &[], &|_| {
                Presence::Unknown
            })
            .0,
            FindingClass::StaticTypingOnly
        );
        let g = Guards {
            nodes: vec![GuardedNode {
                pos: Some(Pos { line: 1, column: 6 }),
                guard: Arc::new(Formula::Atom(Atom::KindIs("Deployment".into()))),
                has_test: false,
                operand_path: None,
                optional_select: false,
                variable: None,
                variables_ident: false,
            }],
            root: Formula::Unknown,
        };
        assert_eq!(
            classify(
                &issues[0],
                Some(&g),
                &Gvk::new("", "v1", "Pod"),
                &[],
                &|_| Presence::Unknown
            )
            .0,
            FindingClass::Unreachable
        );
        assert_eq!(
            classify(
                &issues[0],
                Some(&g),
                &Gvk::new("", "v1", "Deployment"),
                &[],
                &|_| Presence::Unknown
            )
            .0,
            FindingClass::FailsAtAdmission
        );
    }
}
