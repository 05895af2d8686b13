//! Runtime safety over one policy ([`super::runtime`]): the chains of its validations and
//! matchConditions (and of the variables they use), tested against each checked kind's
//! witness objects. Called by [`super::check_input_parsed`] in extended mode.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

use k8s_openapi::api::admissionregistration::v1::MatchResources;

use super::backend::{ExpressionChecker, ParsedExpr, SchemaType};
use super::expressions::{ExpressionField, ExpressionSite};
use super::gvk::Gvk;
use super::issues::Issues;
use super::narrowing::{GuardedNode, Guards, Pos, Presence, unreachable_among};
use super::runtime::{
    Chain, Edit, KindWitnesses, Ops, Origin, Request, Root, RuntimeClass, RuntimeFinding, Seg,
    Witness, always_present, apply, fails_at, optional_rewrite, witness_for,
};

/// One checked kind, as the runtime analysis needs it.
pub struct KindView<'a> {
    /// The kind.
    pub gvk: &'a Gvk,
    /// Its schema, when typed.
    pub object: Option<&'a SchemaType>,
    /// The positions of the checker's findings per site (same order as the sites), for the
    /// kind.
    pub errors: Vec<Vec<Pos>>,
}

/// The policy, as the runtime analysis needs it.
pub struct PolicyView<'a, 'p> {
    /// `spec.matchConstraints`.
    pub constraints: Option<&'p MatchResources>,
    /// `spec.failurePolicy` (`Fail` when absent).
    pub failure_policy: Option<&'p str>,
    /// The checked expressions.
    pub sites: &'a [ExpressionSite<'p>],
    /// `spec.variables` as `(name, expression)`.
    pub variables: &'a [(&'p str, &'p str)],
    /// `spec.validations[i].message`, by validation index (what an erroring
    /// messageExpression falls back to).
    pub messages: &'a [Option<&'p str>],
    /// The policy has a `paramKind`: only chains on `params` are analysed, once per binding
    /// of [`PolicyView::param_bindings`].
    pub has_param_kind: bool,
    /// The `params` each binding of the policy evaluates it with.
    pub param_bindings: &'a [ParamBinding],
}

/// What one binding of a policy with a `paramKind` evaluates the policy with (k8s.io/apiserver
/// v0.37.1 pkg/admission/plugin/policy/generic/policy_dispatcher.go, `CollectParams`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParamBinding {
    /// The binding's name.
    pub binding: String,
    /// `None`: the binding has no `paramRef`, so `params` is null. Otherwise one param object
    /// its `paramRef` resolves to: its id (`namespace/name` or `name`) and the object as
    /// the input gives it.
    pub param: Option<(String, serde_json::Value)>,
}

/// Whether the param object's `path` is one whose absence the analysis trusts: a key of a v1
/// ConfigMap's `data` or `binaryData` (or the map itself). The API server defaults nothing
/// there and stores the maps as given (an empty map is dropped, see [`stored_param`]);
/// other fields (server-set metadata, a custom resource's schema defaults) are not
/// reported.
fn trusted_param_path(param: &serde_json::Value, path: &[Seg]) -> bool {
    param["apiVersion"] == "v1"
        && param["kind"] == "ConfigMap"
        && matches!(path, [Seg::Field(f), ..] if f == "data" || f == "binaryData")
        && path.len() <= 2
}

/// A ConfigMap param as the API server stores it: `data` and `binaryData` are Go maps with
/// `omitempty`, so an empty one is not there.
fn stored_param(param: &serde_json::Value) -> serde_json::Value {
    let mut p = param.clone();
    if let Some(m) = p.as_object_mut() {
        for f in ["data", "binaryData"] {
            if m.get(f)
                .is_some_and(|v| v.is_null() || v.as_object().is_some_and(|o| o.is_empty()))
            {
                m.remove(f);
            }
        }
    }
    p
}

/// The operations the policy's rules match for `resource` of `gvk`'s group.
fn matched_ops(constraints: Option<&MatchResources>, gvk: &Gvk, resource: &str) -> Ops {
    let rules = constraints
        .and_then(|c| c.resource_rules.as_deref())
        .unwrap_or_default();
    let mut ops = Ops(0);
    for r in rules {
        let groups = r.api_groups.as_deref().unwrap_or_default();
        let resources = r.resources.as_deref().unwrap_or_default();
        let group_ok = groups.iter().any(|g| g == "*" || *g == gvk.group);
        let resource_ok = resources
            .iter()
            .any(|x| x == "*" || x == "*/*" || x == resource);
        if group_ok && resource_ok {
            for o in r.operations.as_deref().unwrap_or_default() {
                ops = ops.or(Ops::named(o).unwrap_or_default());
            }
        }
    }
    ops
}

/// Labels that satisfy `spec.matchConstraints.objectSelector`: its `matchLabels`, and for
/// `In` and `Exists` requirements the key with the first value (`true` for `Exists`).
/// `NotIn` and `DoesNotExist` hold for objects without the label.
fn selector_labels(constraints: Option<&MatchResources>) -> Vec<(String, String)> {
    let Some(sel) = constraints.and_then(|c| c.object_selector.as_ref()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for r in sel.match_expressions.iter().flatten() {
        let value = match r.operator.as_str() {
            "In" => r.values.iter().flatten().next().cloned(),
            "Exists" => Some("true".to_owned()),
            _ => None,
        };
        if let Some(v) = value {
            out.push((r.key.clone(), v));
        }
    }
    out
}

/// Labels that satisfy `spec.matchConstraints.namespaceSelector` (as [`selector_labels`]).
fn namespace_selector_labels(constraints: Option<&MatchResources>) -> Vec<(String, String)> {
    let namespace_only = constraints.map(|c| MatchResources {
        object_selector: c.namespace_selector.clone(),
        ..MatchResources::default()
    });
    selector_labels(namespace_only.as_ref())
}

/// The namespace of a request for a namespaced kind, as `namespaceObject` holds it: the
/// Namespace witness as admitted, with the labels the policy's namespaceSelector requires,
/// cut to what k8s.io/apiserver v0.37.1 pkg/admission/plugin/cel/condition.go
/// `CreateNamespaceObject` keeps (`spec`, `status` and these fields of `metadata`; no
/// `managedFields`, no `apiVersion` or `kind`).
fn namespace_object(
    checker: &dyn ExpressionChecker,
    labels: &[(String, String)],
) -> Option<serde_json::Value> {
    const KEPT: [&str; 12] = [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let ns = checker.witnesses(&Gvk::new("", "v1", "Namespace"))?;
    let admitted = &ns.objects.first()?.admitted;
    let mut out = serde_json::Map::new();
    let meta: serde_json::Map<String, serde_json::Value> = admitted["metadata"]
        .as_object()?
        .iter()
        .filter(|(k, _)| KEPT.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert("metadata".into(), serde_json::Value::Object(meta));
    for f in ["spec", "status"] {
        if let Some(v) = admitted.get(f) {
            out.insert(f.into(), v.clone());
        }
    }
    let mut out = serde_json::Value::Object(out);
    add_labels(&mut out, labels);
    Some(out)
}

/// Adds `labels` to `metadata.labels` of `object`.
fn add_labels(object: &mut serde_json::Value, labels: &[(String, String)]) {
    let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
        return;
    };
    let map = meta
        .entry("labels")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(map) = map.as_object_mut() {
        for (k, v) in labels {
            map.insert(k.clone(), serde_json::Value::from(v.as_str()));
        }
    }
}

/// The name a failing step reports (`no such key: <name>`).
fn seg_name(seg: &Seg) -> Option<&str> {
    match seg {
        Seg::Field(f) | Seg::Key(f) => Some(f),
        _ => None,
    }
}

/// The message kube-apiserver denies with when validation `expression`'s messageExpression
/// errors (or gives no usable string): the validation's `message`, trimmed, else `failed
/// expression: <expression>` (k8s.io/apiserver v0.37.1
/// pkg/admission/plugin/policy/validating/validator.go, `Validate`: the messageExpression's
/// error is only logged).
pub fn fallback_message(message: Option<&str>, expression: &str) -> String {
    match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.to_owned(),
        None => format!("failed expression: {}", expression.trim()),
    }
}

/// What happens at admission when the expression at `entry` errors (`fallback`: for a
/// messageExpression, the message used instead).
fn consequence(entry: &ExpressionField, fail: bool, fallback: Option<&str>) -> String {
    // k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/mutating/dispatcher.go
    // (`dispatchInvocations`: a mutation's error is a policy error) and
    // pkg/admission/plugin/policy/generic/policy_dispatcher.go (`Dispatch`: with Ignore the
    // error is dropped, the other mutations still apply).
    match (entry, fail) {
        (ExpressionField::ApplyConfiguration(_) | ExpressionField::JsonPatch(_), true) => {
            return "kube-apiserver denies such requests (a mutation error, failurePolicy Fail)"
                .into();
        }
        (ExpressionField::ApplyConfiguration(_) | ExpressionField::JsonPatch(_), false) => {
            return "the mutation is not applied to such requests (failurePolicy Ignore)".into();
        }
        _ => {}
    }
    if let (ExpressionField::ValidationMessageExpression(_), Some(m)) = (entry, fallback) {
        // validator.go `Validate`: the messageExpression is used only when its validation
        // is false, and then the request is denied whatever the failure policy; its error
        // is logged and the static message is used.
        return format!(
            "kube-apiserver still denies such requests, with the message \"{m}\" instead of this expression's (its error is only logged; the failure policy does not apply)"
        );
    }
    // k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/validating/validator.go
    // (`Validate`: an auditAnnotation's evaluation error gives
    // `auditAnnotationEvaluationForError(failPolicy)`, Error for Fail, Exclude for Ignore) and
    // dispatcher.go (`Dispatch`: `AuditAnnotationActionError` appends a Deny decision with the
    // error as its message; Exclude leaves the annotation out).
    match (entry, fail) {
        (ExpressionField::AuditAnnotation(_), true) => {
            return "kube-apiserver denies such requests (an auditAnnotation error, failurePolicy Fail)".into();
        }
        (ExpressionField::AuditAnnotation(_), false) => {
            return "the audit annotation is left out for such requests (failurePolicy Ignore)"
                .into();
        }
        _ => {}
    }
    // k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/validating/validator.go
    // (`Validate`: an evaluation error gives `policyDecisionActionForError(failPolicy)`, Deny
    // for Fail, Admit for Ignore) and pkg/admission/plugin/policy/generic/policy_dispatcher.go
    // (a matchCondition error follows the failure policy; Ignore skips the policy).
    match (entry, fail) {
        (ExpressionField::MatchCondition(_), true) => {
            "kube-apiserver denies such requests (a matchCondition error, failurePolicy Fail)"
                .into()
        }
        (ExpressionField::MatchCondition(_), false) => {
            "the policy is skipped for such requests (failurePolicy Ignore)".into()
        }
        (_, true) => "kube-apiserver denies such requests (failurePolicy Fail)".into(),
        (_, false) => "the validation admits such requests unchecked (failurePolicy Ignore)".into(),
    }
}

/// The rewrite of a whole expression that keeps a null root out: `<guard> || (<e>)` for a
/// validation, `<guard> && (<e>)` for a matchCondition (not evaluated for that operation).
fn null_root_fix(entry: &ExpressionField, root: Root, text: &str) -> Option<Edit> {
    let op = match root {
        Root::Object => "DELETE",
        Root::OldObject => "CREATE",
        Root::Params => {
            let replacement = match entry {
                ExpressionField::ValidationExpression(_) => format!("params == null || ({text})"),
                ExpressionField::MatchCondition(_) => format!("params != null && ({text})"),
                _ => return None,
            };
            return Some(Edit {
                start: 0,
                end: text.len(),
                replacement,
            });
        }
        Root::NamespaceObject => {
            let replacement = match entry {
                ExpressionField::ValidationExpression(_) => {
                    format!("namespaceObject == null || ({text})")
                }
                ExpressionField::MatchCondition(_) => {
                    format!("namespaceObject != null && ({text})")
                }
                _ => return None,
            };
            return Some(Edit {
                start: 0,
                end: text.len(),
                replacement,
            });
        }
    };
    let replacement = match entry {
        ExpressionField::ValidationExpression(_) => {
            format!("request.operation == '{op}' || ({text})")
        }
        ExpressionField::MatchCondition(_) => format!("request.operation != '{op}' && ({text})"),
        _ => return None,
    };
    Some(Edit {
        start: 0,
        end: text.len(),
        replacement,
    })
}

/// One chain of an analysed expression with what its analysis looks up for every kind, once:
/// the expression it is written in, the guards of the nodes at its steps, its path.
struct ChainView<'a> {
    chain: &'a Chain,
    /// The expression's field (a variable's for a chain in a variable).
    field: ExpressionField,
    /// The expression's text.
    text: &'a str,
    /// The index of `field` among the sites (whose per-kind errors are the chain's).
    site: Option<usize>,
    /// The kind-narrowing analysis of `text`.
    guards: Option<&'a Guards>,
    /// Per step: the guarded nodes at its position (filled when first asked).
    at: Vec<OnceCell<Vec<&'a GuardedNode>>>,
    /// [`Chain::full_path`] (filled when first asked).
    path: OnceCell<Vec<Seg>>,
}

impl<'a> ChainView<'a> {
    fn new(
        chain: &'a Chain,
        field: ExpressionField,
        text: &'a str,
        site: Option<usize>,
        guards: Option<&'a Guards>,
    ) -> Self {
        ChainView {
            chain,
            field,
            text,
            site,
            guards,
            at: chain.steps.iter().map(|_| OnceCell::new()).collect(),
            path: OnceCell::new(),
        }
    }

    /// [`Chain::path_to`] of step `i`.
    fn path_to(&self, i: usize) -> &[Seg] {
        let path = self.path.get_or_init(|| self.chain.full_path());
        &path[..self.chain.prefix_len(i).min(path.len())]
    }

    /// The nodes at step `i`'s position; `None` when the expression has no guards or the
    /// step no position (then it is reachable).
    fn nodes_at(&self, i: usize) -> Option<&[&'a GuardedNode]> {
        let guards = self.guards?;
        let pos = self.chain.steps.get(i)?.pos?;
        Some(self.at.get(i)?.get_or_init(|| guards.nodes_at(pos)))
    }
}

/// Every runtime-safety finding of a validating policy (see the module docs). `parsed` gives
/// the parse of an expression text, `guards` its kind-narrowing analysis.
pub fn findings(
    policy: &PolicyView<'_, '_>,
    kinds: &[KindView<'_>],
    checker: &dyn ExpressionChecker,
    parsed_texts: &HashMap<&str, Result<ParsedExpr, Issues>>,
    guard_texts: &HashMap<&str, Guards>,
    presence: &dyn Fn(&Gvk, &[String]) -> Presence,
) -> Vec<RuntimeFinding> {
    let parsed = |t: &str| parsed_texts.get(t).and_then(|r| r.as_ref().ok());
    let guards = |t: &str| guard_texts.get(t);
    let sites = policy.sites;
    let Some(variables) = policy
        .variables
        .iter()
        .map(|(n, e)| Some((*n, parsed(e)?)))
        .collect::<Option<Vec<_>>>()
    else {
        // A variable that does not parse: the policy is rejected on create; nothing to add.
        return Vec::new();
    };
    let conditions: Vec<(usize, &ParsedExpr)> = sites
        .iter()
        .filter_map(|s| match s.field {
            ExpressionField::MatchCondition(i) => Some((i, parsed(s.expression)?)),
            _ => None,
        })
        .collect();
    let validation = |i: usize| {
        sites.iter().find_map(|s| match s.field {
            ExpressionField::ValidationExpression(j) if j == i => Some(s.expression),
            _ => None,
        })
    };
    let mut entries: Vec<(usize, Vec<Chain>)> = Vec::new();
    for (si, s) in sites.iter().enumerate() {
        let (own, denied) = match s.field {
            ExpressionField::ValidationExpression(_) => (None, None),
            // Mutations are applied in order, each to the object the one before returned
            // (k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/mutating/dispatcher.go,
            // `dispatchInvocations`): only the first one sees the object as admitted.
            ExpressionField::ApplyConfiguration(0) | ExpressionField::JsonPatch(0) => (None, None),
            ExpressionField::MatchCondition(i) => (Some(i), None),
            // auditAnnotations are evaluated for every request the matchConditions let
            // through, whatever the validations' results (k8s.io/apiserver v0.37.1
            // pkg/admission/plugin/policy/validating/validator.go, `Validate`).
            ExpressionField::AuditAnnotation(_) => (None, None),
            // A messageExpression matters only where its validation is false.
            ExpressionField::ValidationMessageExpression(i) => {
                match validation(i).and_then(parsed) {
                    Some(v) => (None, Some(v)),
                    None => continue,
                }
            }
            _ => continue,
        };
        let Some(p) = parsed(s.expression) else {
            continue;
        };
        let mut others: Vec<(&ParsedExpr, bool)> = conditions
            .iter()
            .filter(|(i, _)| Some(*i) != own)
            .map(|(_, p)| (*p, true))
            .collect();
        others.extend(denied.map(|v| (v, false)));
        match checker.access_chains(p, &others, &variables) {
            Some(chains) => entries.push((si, chains)),
            None => return Vec::new(),
        }
    }
    // Findings are made from witnesses only: with no chain, or no checked kind that has
    // witnesses, there are none.
    let witnessed: Vec<(&KindView<'_>, &'static KindWitnesses)> = kinds
        .iter()
        .filter_map(|k| Some((k, checker.witnesses(k.gvk)?)))
        .collect();
    if witnessed.is_empty() || entries.iter().all(|(_, chains)| chains.is_empty()) {
        return Vec::new();
    }
    // Per entry: the message a messageExpression falls back to, and its chains' views.
    let views: Vec<(usize, Option<String>, Vec<ChainView<'_>>)> = entries
        .iter()
        .map(|(si, chains)| {
            let entry = &sites[*si].field;
            let fallback = match entry {
                ExpressionField::ValidationMessageExpression(i) => validation(*i)
                    .map(|e| fallback_message(policy.messages.get(*i).copied().flatten(), e)),
                _ => None,
            };
            let chains = chains
                .iter()
                .filter_map(|chain| {
                    let (field, text) = match chain.origin {
                        Origin::Site => (*entry, sites[*si].expression),
                        Origin::Variable(i) => {
                            let (_, e) = policy.variables.get(i)?;
                            (ExpressionField::Variable(i), *e)
                        }
                    };
                    let site = sites.iter().position(|s| s.field == field);
                    Some(ChainView::new(chain, field, text, site, guards(text)))
                })
                .collect();
            (*si, fallback, chains)
        })
        .collect();
    let fail = policy.failure_policy != Some("Ignore");
    let mut out: Vec<RuntimeFinding> = Vec::new();
    let labels = selector_labels(policy.constraints);
    // Read only for a namespaceObject chain.
    let namespace = entries
        .iter()
        .any(|(_, chains)| chains.iter().any(|c| c.root == Root::NamespaceObject))
        .then(|| namespace_object(checker, &namespace_selector_labels(policy.constraints)))
        .flatten();
    for &(kind, shared) in &witnessed {
        // A witness must be one the policy matches: it carries the labels the policy's
        // objectSelector requires (a copy only then).
        let w: Cow<'_, KindWitnesses> = if labels.is_empty() {
            Cow::Borrowed(shared)
        } else {
            let mut w = shared.clone();
            for o in &mut w.objects {
                for v in [&mut o.input, &mut o.admitted] {
                    add_labels(v, &labels);
                }
            }
            Cow::Owned(w)
        };
        let ops = matched_ops(policy.constraints, kind.gvk, &w.resource);
        // k8s.io/apiserver v0.37.1 admission/plugin/policy/validating/dispatcher.go
        // (`Dispatch`; mutating/dispatcher.go `dispatchInvocations` alike): no namespace is looked up for a cluster-scoped kind (the request has
        // no namespace) nor for a v1 Namespace (whose request names itself).
        let namespace_object_null = !w.namespaced
            || (kind.gvk.group.is_empty()
                && kind.gvk.version == "v1"
                && kind.gvk.kind == "Namespace");
        let kind_name = kind.gvk.to_string();
        for (si, fallback, chains) in &views {
            let entry = &sites[*si].field;
            let mut null_done: HashSet<(Origin, Root)> = HashSet::new();
            // Null params: the first chain evaluated fails, once per expression and binding.
            let mut params_done: HashSet<(Origin, &str)> = HashSet::new();
            for cv in chains {
                let (chain, field, text) = (cv.chain, cv.field, cv.text);
                let errors: &[Pos] = cv
                    .site
                    .and_then(|i| kind.errors.get(i))
                    .map_or(&[], |e| e.as_slice());
                // A chain with a type error is reported as one.
                if chain
                    .steps
                    .iter()
                    .any(|s| s.pos.is_some_and(|p| errors.contains(&p)))
                {
                    continue;
                }
                // Whether step `i` is evaluated for the kind.
                let reachable = |i: usize| match cv.nodes_at(i) {
                    Some(nodes) => {
                        !unreachable_among(nodes.iter().copied(), kind.gvk, errors, &|path| {
                            presence(kind.gvk, path)
                        })
                    }
                    None => true,
                };
                let effective = ops.and(chain.ops);
                // Whether the chain is evaluated, and its error decides, on a witness request.
                let evaluated_with =
                    |admitted: &serde_json::Value,
                     op: &str,
                     params: Option<Option<&serde_json::Value>>| {
                        let meta = &admitted["metadata"];
                        let (object, old_object) = match op {
                            "CREATE" => (Some(admitted), None),
                            "DELETE" => (None, Some(admitted)),
                            _ => (Some(admitted), Some(admitted)),
                        };
                        let request = Request {
                            object,
                            old_object,
                            operation: op,
                            kind: (&kind.gvk.group, &kind.gvk.version, &kind.gvk.kind),
                            namespace: meta["namespace"].as_str().unwrap_or_default(),
                            name: meta["name"].as_str().unwrap_or_default(),
                            namespace_object_null,
                            params,
                        };
                        chain.conds.iter().all(|c| request.eval(c) == Some(true))
                    };
                let evaluated =
                    |admitted: &serde_json::Value, op: &str| evaluated_with(admitted, op, None);
                let push = |out: &mut Vec<RuntimeFinding>,
                            class,
                            i: usize,
                            error: String,
                            operation,
                            object: serde_json::Value,
                            fix: Option<Edit>,
                            pb: Option<&ParamBinding>| {
                    let step = &chain.steps[i];
                    let access = text
                        .get(chain.start..step.end)
                        .unwrap_or_default()
                        .to_owned();
                    let field_ref = field.to_string();
                    let binding = pb.map(|b| b.binding.clone());
                    let param = pb.and_then(|b| b.param.as_ref()).map(|(id, _)| id.clone());
                    if let Some(f) = out.iter_mut().find(|f| {
                        f.field_ref == field_ref
                            && f.pos == step.pos
                            && f.class == class
                            && f.binding == binding
                            && f.param == param
                    }) {
                        if !f.kinds.contains(&kind_name) {
                            f.kinds.push(kind_name.clone());
                        }
                        return;
                    }
                    out.push(RuntimeFinding {
                        field_ref,
                        kinds: vec![kind_name.clone()],
                        class,
                        pos: step.pos,
                        access,
                        error,
                        consequence: consequence(entry, fail, fallback.as_deref()),
                        fallback_message: fallback.clone(),
                        binding,
                        param,
                        witness: Witness {
                            operation,
                            object,
                            params: pb.and_then(|b| b.param.as_ref()).map(|(_, p)| p.clone()),
                        },
                        fix,
                        fixed_expression: None,
                    });
                };
                // `params`: per binding, null without a paramRef, else each param object.
                if chain.root == Root::Params {
                    let Some(op) = effective.first_witnessed() else {
                        continue;
                    };
                    for pb in policy.param_bindings {
                        let stored = pb.param.as_ref().map(|(_, p)| stored_param(p));
                        let value = Some(stored.as_ref());
                        let Some(request) = w
                            .objects
                            .iter()
                            .find(|o| evaluated_with(&o.admitted, op, value))
                        else {
                            continue;
                        };
                        let Some(param) = stored.as_ref() else {
                            // Null: the first selection fails (`no such key: <field>`).
                            let Some(first) = chain.steps.first() else {
                                continue;
                            };
                            if !chain.direct() || first.optional || first.guarded || !reachable(0) {
                                continue;
                            }
                            let Some(name) = seg_name(&first.seg) else {
                                continue;
                            };
                            if !params_done.insert((chain.origin, pb.binding.as_str())) {
                                continue;
                            }
                            let fix = match chain.origin {
                                Origin::Site => null_root_fix(entry, chain.root, text),
                                Origin::Variable(_) => None,
                            };
                            push(
                                &mut out,
                                RuntimeClass::NullParams,
                                0,
                                format!("no such key: {name}"),
                                op,
                                request.input.clone(),
                                fix,
                                Some(pb),
                            );
                            continue;
                        };
                        for (i, step) in chain.steps.iter().enumerate() {
                            if step.optional || step.guarded || !reachable(i) {
                                continue;
                            }
                            let path = cv.path_to(i);
                            if !trusted_param_path(param, path) || !fails_at(param, path) {
                                continue;
                            }
                            let Some(name) = seg_name(&step.seg) else {
                                continue;
                            };
                            // A ConfigMap's data and binaryData are maps of strings.
                            let end = cv.path_to(chain.steps.len() - 1);
                            let zero = match end.len() {
                                1 if trusted_param_path(param, end) => Some("{}"),
                                2 if trusted_param_path(param, end) => Some("''"),
                                _ => None,
                            };
                            let fix = zero.and_then(|z| optional_rewrite(text, chain, i, z));
                            push(
                                &mut out,
                                RuntimeClass::AbsentParamField,
                                i,
                                format!("no such key: {name}"),
                                op,
                                request.input.clone(),
                                fix,
                                Some(pb),
                            );
                        }
                    }
                    continue;
                }
                // A policy with a paramKind: only its `params` chains are analysed.
                if policy.has_param_kind {
                    continue;
                }
                // `namespaceObject` of a namespaced kind: the request's namespace, of which
                // only its labels and annotations are known to vary (every namespace has a
                // name, uid, `kubernetes.io/metadata.name` label, spec and status).
                if chain.root == Root::NamespaceObject && !namespace_object_null {
                    let Some(ns) = namespace.as_ref() else {
                        continue;
                    };
                    if !chain.direct() {
                        continue;
                    }
                    let op = effective.first_witnessed();
                    let Some(op) = op else {
                        continue;
                    };
                    let Some(request) = w.objects.iter().find(|o| evaluated(&o.admitted, op))
                    else {
                        continue;
                    };
                    for (i, step) in chain.steps.iter().enumerate() {
                        if step.optional || step.guarded || !reachable(i) {
                            continue;
                        }
                        let path = cv.path_to(i);
                        let meta_map = |p: &[Seg]| match p {
                            [Seg::Field(m), Seg::Field(f), ..] => {
                                m == "metadata" && (f == "labels" || f == "annotations")
                            }
                            _ => false,
                        };
                        let known = meta_map(path)
                            && (path.len() == 2
                                || (path.len() == 3 && matches!(path[2], Seg::Key(_))));
                        if !known || !fails_at(ns, path) {
                            continue;
                        }
                        let Some(name) = seg_name(&step.seg) else {
                            continue;
                        };
                        // The zero value of the chain's end: a label or annotation value is
                        // a string, the map itself a map.
                        let end = cv.path_to(chain.steps.len() - 1);
                        let zero = match end.len() {
                            2 if meta_map(end) => Some("{}"),
                            3 if meta_map(end) && matches!(end[2], Seg::Key(_)) => Some("''"),
                            _ => None,
                        };
                        let fix = zero.and_then(|z| optional_rewrite(text, chain, i, z));
                        push(
                            &mut out,
                            RuntimeClass::AbsentNamespaceField,
                            i,
                            format!("no such key: {name}"),
                            op,
                            request.input.clone(),
                            fix,
                            None,
                        );
                    }
                    continue;
                }
                // `namespaceObject` where it is null.
                if chain.root == Root::NamespaceObject {
                    let Some(first) = chain.steps.first() else {
                        continue;
                    };
                    if !chain.direct() || first.optional || first.guarded || !reachable(0) {
                        continue;
                    }
                    // Once per expression and root: no witness is looked for after that.
                    let op = effective
                        .first_witnessed()
                        .filter(|_| !null_done.contains(&(chain.origin, chain.root)));
                    let witness =
                        op.and_then(|op| w.objects.iter().find(|o| evaluated(&o.admitted, op)));
                    if let (Some(op), Some(name), Some(witness)) =
                        (op, seg_name(&first.seg), witness)
                        && null_done.insert((chain.origin, chain.root))
                    {
                        let fix = match chain.origin {
                            Origin::Site => null_root_fix(entry, chain.root, text),
                            Origin::Variable(_) => None,
                        };
                        push(
                            &mut out,
                            RuntimeClass::NullNamespaceObject,
                            0,
                            format!("no such key: {name}"),
                            op,
                            witness.input.clone(),
                            fix,
                            None,
                        );
                    }
                    continue;
                }
                // `object` in DELETE requests, `oldObject` in CREATE requests.
                if let Some(first) = chain.steps.first()
                    && chain.direct()
                    && !first.optional
                    && !first.guarded
                    && reachable(0)
                {
                    // A MutatingAdmissionPolicy's mutations are not called when there is no
                    // object (mutating/dispatcher.go, `dispatchInvocations`).
                    let mutation = matches!(
                        entry,
                        ExpressionField::ApplyConfiguration(_) | ExpressionField::JsonPatch(_)
                    );
                    let op = match chain.root {
                        Root::Object if effective.has(Ops::DELETE) && !mutation => Some("DELETE"),
                        Root::OldObject if effective.has(Ops::CREATE) => Some("CREATE"),
                        _ => None,
                    }
                    .filter(|_| !null_done.contains(&(chain.origin, chain.root)));
                    let witness =
                        op.and_then(|op| w.objects.iter().find(|o| evaluated(&o.admitted, op)));
                    if let (Some(op), Some(name), Some(witness)) =
                        (op, seg_name(&first.seg), witness)
                        && null_done.insert((chain.origin, chain.root))
                    {
                        let fix = match chain.origin {
                            Origin::Site => null_root_fix(entry, chain.root, text),
                            Origin::Variable(_) => None,
                        };
                        push(
                            &mut out,
                            RuntimeClass::NullRoot,
                            0,
                            format!("no such key: {name}"),
                            op,
                            witness.input.clone(),
                            fix,
                            None,
                        );
                    }
                }
                // Fields and keys the object may omit.
                let present = match chain.root {
                    Root::Object => effective.and(Ops::CREATE.or(Ops::UPDATE)),
                    Root::OldObject => effective.and(Ops::UPDATE.or(Ops::DELETE)),
                    Root::NamespaceObject | Root::Params => continue,
                };
                let op = match chain.root {
                    Root::Object if present.has(Ops::CREATE) => "CREATE",
                    Root::Object if present.has(Ops::UPDATE) => "UPDATE",
                    Root::OldObject if present.has(Ops::UPDATE) => "UPDATE",
                    Root::OldObject if present.has(Ops::DELETE) => "DELETE",
                    _ => continue,
                };
                for (i, step) in chain.steps.iter().enumerate() {
                    if step.optional || step.guarded || !reachable(i) {
                        continue;
                    }
                    let path = cv.path_to(i);
                    let Some(object) = witness_for(&w.objects, path, &|a| evaluated(a, op)) else {
                        continue;
                    };
                    let Some(name) = seg_name(&step.seg) else {
                        continue;
                    };
                    let class = match step.seg {
                        Seg::Key(_) => RuntimeClass::AbsentKey,
                        _ => RuntimeClass::AbsentField,
                    };
                    // The rewrite starts at the first step that may be absent.
                    let first = (0..=i)
                        .find(|&j| {
                            let s = &chain.steps[j];
                            !s.optional && !s.guarded && !always_present(&w.objects, cv.path_to(j))
                        })
                        .unwrap_or(i);
                    let zero = kind
                        .object
                        .and_then(|o| checker.zero_value(o, cv.path_to(chain.steps.len() - 1)));
                    let fix = zero.and_then(|z| optional_rewrite(text, chain, first, z));
                    push(
                        &mut out,
                        class,
                        i,
                        format!("no such key: {name}"),
                        op,
                        object,
                        fix,
                        None,
                    );
                }
            }
        }
    }
    // Each finding's fixed expression has the fixes of every finding of the same
    // expression, so that it errors on none of the witnesses.
    let texts: Vec<(String, &str)> = sites
        .iter()
        .map(|s| (s.field.to_string(), s.expression))
        .chain(
            policy
                .variables
                .iter()
                .enumerate()
                .map(|(i, (_, e))| (ExpressionField::Variable(i).to_string(), *e)),
        )
        .collect();
    let combined: Vec<Option<String>> = out
        .iter()
        .map(|f| {
            let text = texts.iter().find(|(r, _)| *r == f.field_ref)?.1;
            let edits: Vec<&Edit> = out
                .iter()
                .filter(|g| g.field_ref == f.field_ref)
                .filter_map(|g| g.fix.as_ref())
                .collect();
            f.fix.as_ref()?;
            combine(text, &edits)
        })
        .collect();
    for (f, c) in out.iter_mut().zip(combined) {
        f.fixed_expression = c;
    }
    out
}

/// `text` with `edits` applied: the edits of chains (disjoint; an edit overlapping an
/// earlier one is left out), then the wraps of the whole expression ([`null_root_fix`]),
/// which keep the rewritten text inside them.
fn combine(text: &str, edits: &[&Edit]) -> Option<String> {
    let whole = |e: &Edit| e.start == 0 && e.end == text.len();
    let mut inner: Vec<&Edit> = edits.iter().copied().filter(|e| !whole(e)).collect();
    inner.sort_by_key(|e| (e.start, e.end));
    inner.dedup();
    let mut kept: Vec<&Edit> = Vec::new();
    for e in inner {
        if kept.last().is_none_or(|k| k.end <= e.start) {
            kept.push(e);
        }
    }
    let mut result = text.to_owned();
    for e in kept.iter().rev() {
        result = apply(&result, e)?;
    }
    let mut wraps: Vec<&Edit> = edits.iter().copied().filter(|e| whole(e)).collect();
    wraps.dedup();
    for w in wraps {
        let (prefix, suffix) = w.replacement.split_once(text)?;
        result = format!("{prefix}{result}{suffix}");
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations;

    #[test]
    fn operations_by_resource() {
        let rule = |groups: &[&str], resources: &[&str], ops: &[&str]| NamedRuleWithOperations {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            operations: Some(ops.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        let m = MatchResources {
            resource_rules: Some(vec![
                rule(&[""], &["pods"], &["CREATE"]),
                rule(&["apps"], &["deployments"], &["DELETE"]),
                rule(&["*"], &["*"], &["UPDATE"]),
            ]),
            ..Default::default()
        };
        let pod = Gvk::new("", "v1", "Pod");
        assert_eq!(
            matched_ops(Some(&m), &pod, "pods"),
            Ops::CREATE.or(Ops::UPDATE)
        );
        let dep = Gvk::new("apps", "v1", "Deployment");
        assert_eq!(
            matched_ops(Some(&m), &dep, "deployments"),
            Ops::DELETE.or(Ops::UPDATE)
        );
    }
}
