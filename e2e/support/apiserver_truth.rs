//! The ground truth for "create-time verdicts" (issue 11): which ValidatingAdmissionPolicies and
//! bindings the real kube-apiserver accepts on create (and on update), and with which causes.
//!
//! - [`corpus_cases`] reads every ValidatingAdmissionPolicy of `shared/corpus/policies` and every
//!   ValidatingAdmissionPolicyBinding of `shared/corpus/bindings`;
//! - [`variant_cases`] derives a deterministic set of mutations of a few corpus policies and
//!   bindings (no randomness: the same list on every run, in the same order);
//! - [`update_cases`] builds (stored, new) pairs for UPDATE, some stored straight into etcd
//!   because the API server would refuse to create them;
//! - [`dry_run`] sends one object to the API server with `?dryRun=All` and turns the answer into
//!   an [`Outcome`] whose causes are the server's `field.Error.Error()` texts.
//!
//! Used by `e2e/tests/apiserver_verdicts.rs` (the acceptance test, and its `dump_truth` mode that
//! writes `/tmp/apiserver-truth`).
//!
//! Every generated object decodes (the server answers 201 or 422, never 400): each mutation only
//! puts values of the field's JSON type (strings where the API has strings, lists where it has
//! lists). A mutation such as `failurePolicy: 1` would get a 400 decode error, which says nothing
//! about validation, so the generator does not produce it by construction. The test fails if any
//! generated object gets another answer than 201 or 422.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The text-format protobuf reader of the integration tests.
#[allow(dead_code)]
#[path = "../../tests/it/textproto.rs"]
mod textproto;
use http_body_util::BodyExt;
use kube::Client;
use serde::Serialize;
use serde_json::{Value, json};

/// The only served version of the two kinds on a default 1.37 API server.
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";
pub const POLICY: &str = "ValidatingAdmissionPolicy";
pub const BINDING: &str = "ValidatingAdmissionPolicyBinding";
/// Served as v1 from 1.36 (`e2e/support/map_truth.rs`).
pub const MUTATING_POLICY: &str = "MutatingAdmissionPolicy";
pub const MUTATING_BINDING: &str = "MutatingAdmissionPolicyBinding";

/// One object to send.
#[derive(Debug, Clone)]
pub struct Case {
    /// Where it comes from: `corpus/<path>#<doc>` or `gen/<base>/<mutation>`.
    pub id: String,
    pub object: Value,
}

/// How the stored version of an update pair gets into the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Storage {
    /// Created normally (the API server accepts it on create).
    Create,
    /// Written straight into etcd (the API server would refuse to create it).
    Etcd,
}

/// One UPDATE: `stored` is in the cluster, `new` is sent with a dry-run PUT.
#[derive(Debug, Clone)]
pub struct UpdateCase {
    pub id: String,
    pub storage: Storage,
    pub stored: Value,
    pub new: Value,
}

/// A document of the corpus that is not sent, with the reason (reported, never silently dropped).
#[derive(Debug, Clone)]
pub struct Excluded {
    pub id: String,
    pub reason: String,
}

/// What the API server answered.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Outcome {
    pub http: u16,
    pub accepted: bool,
    /// `cause.field + ": " + cause.message` for each `details.causes` entry (just the message when
    /// a cause has no field); when a rejection carries no causes at all, the Status message.
    pub causes: Vec<String>,
    /// The raw Status message (empty when accepted).
    pub message: String,
    /// The Status reason (empty when accepted).
    pub reason: String,
    /// `Warning` headers of the response (agent and text, as sent).
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Corpus

pub fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// The documents of every YAML file under `shared/<sub>`, in path order, that `keep` turns into
/// an object to send (`None`: skipped), each with the id `<path>#<index>`; files that do not
/// parse are returned as [`Excluded`]. Shared by every corpus of the verdict tests.
pub fn corpus_documents(
    shared: &Path,
    sub: &str,
    keep: impl Fn(Value) -> Option<Value>,
) -> anyhow::Result<(Vec<Case>, Vec<Excluded>)> {
    let root = shared.join(sub);
    let mut files = Vec::new();
    yaml_files(&root, &mut files)?;
    if files.is_empty() {
        bail!("no YAML files under {}", root.display());
    }
    let mut cases = Vec::new();
    let mut excluded = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(shared)
            .unwrap_or(&file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let docs = match crate::support::parse_yaml_documents(&text) {
            Ok(docs) => docs,
            Err(err) => {
                excluded.push(Excluded {
                    id: rel,
                    reason: format!("{err:#}"),
                });
                continue;
            }
        };
        for (i, doc) in docs.into_iter().enumerate() {
            if let Some(object) = keep(doc) {
                cases.push(Case {
                    id: format!("{rel}#{i}"),
                    object,
                });
            }
        }
    }
    Ok((cases, excluded))
}

/// The document as an `admissionregistration.k8s.io/v1` object of `kind`, when it is one of
/// that kind in any version of the group (the corpus has v1alpha1 and v1beta1 documents; a
/// default 1.37 API server serves only v1, and the fields are the same). Documents of other
/// groups (`admissionregistration.x-k8s.io`) or kinds: `None`.
pub fn as_v1_of(kind: &str, mut doc: Value) -> Option<Value> {
    let group_ok = doc
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"));
    if doc.get("kind").and_then(Value::as_str) != Some(kind) || !group_ok {
        return None;
    }
    doc["apiVersion"] = json!(API_VERSION);
    Some(doc)
}

/// Every ValidatingAdmissionPolicy document of `corpus/policies` and every
/// ValidatingAdmissionPolicyBinding document of `corpus/bindings`, in path order, read as v1
/// ([`as_v1_of`]).
pub fn corpus_cases(shared: &Path) -> anyhow::Result<(Vec<Case>, Vec<Excluded>)> {
    let mut cases = Vec::new();
    let mut excluded = Vec::new();
    for (sub, kind) in [("corpus/policies", POLICY), ("corpus/bindings", BINDING)] {
        let (c, e) = corpus_documents(shared, sub, |doc| as_v1_of(kind, doc))?;
        cases.extend(c);
        excluded.extend(e);
    }
    Ok((cases, excluded))
}

// ---------------------------------------------------------------------------------------------
// Paths into JSON values: `spec.validations.0.expression`

pub fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |cur, seg| match cur {
        Value::Array(items) => items.get(seg.parse::<usize>().ok()?),
        Value::Object(map) => map.get(seg),
        _ => None,
    })
}

/// Sets `path`, creating objects on the way (and appending when an index equals the length).
pub fn set(v: &mut Value, path: &str, new: Value) {
    let mut cur = v;
    for seg in path.split('.') {
        if cur.is_null() {
            *cur = if seg.parse::<usize>().is_ok() {
                json!([])
            } else {
                json!({})
            };
        }
        cur = match cur {
            Value::Array(items) => {
                let i: usize = seg.parse().expect("array index");
                if i == items.len() {
                    items.push(Value::Null);
                }
                &mut items[i]
            }
            Value::Object(map) => map.entry(seg.to_string()).or_insert(Value::Null),
            other => panic!("cannot descend into {other} at {seg} of {path}"),
        };
    }
    *cur = new;
}

pub fn remove(v: &mut Value, path: &str) -> bool {
    let (parent, last) = match path.rsplit_once('.') {
        Some((p, l)) => (p, l),
        None => ("", path),
    };
    let parent = if parent.is_empty() {
        Some(v)
    } else {
        parent.split('.').try_fold(v, |cur, seg| match cur {
            Value::Array(items) => items.get_mut(seg.parse::<usize>().ok()?),
            Value::Object(map) => map.get_mut(seg),
            _ => None,
        })
    };
    match parent {
        Some(Value::Object(map)) => map.remove(last).is_some(),
        Some(Value::Array(items)) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => {
                items.remove(i);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

fn push(v: &mut Value, path: &str, item: Value) {
    match get(v, path) {
        Some(Value::Array(_)) => {}
        _ => set(v, path, json!([])),
    }
    let mut cur = &mut *v;
    for seg in path.split('.') {
        cur = match cur {
            Value::Array(items) => &mut items[seg.parse::<usize>().expect("index")],
            Value::Object(map) => map.get_mut(seg).expect("created above"),
            _ => unreachable!(),
        };
    }
    cur.as_array_mut().expect("array").push(item);
}

// ---------------------------------------------------------------------------------------------
// Mutations

pub type Apply = Box<dyn Fn(&mut Value) -> bool>;

/// A named change to an object; `apply` returns false when it does not apply to that base (the
/// field it changes is absent), and the variant is then not generated.
pub struct Mutation {
    pub name: String,
    pub apply: Apply,
}

pub fn m(name: impl Into<String>, apply: impl Fn(&mut Value) -> bool + 'static) -> Mutation {
    Mutation {
        name: name.into(),
        apply: Box::new(apply),
    }
}

/// Sets `path` to `value`.
pub fn set_m(name: impl Into<String>, path: &'static str, value: Value) -> Mutation {
    m(name, move |o| {
        set(o, path, value.clone());
        true
    })
}

/// Sets `path` to `value` only when the base has `path` already.
fn replace_m(name: impl Into<String>, path: &'static str, value: Value) -> Mutation {
    m(name, move |o| {
        if get(o, path).is_none() {
            return false;
        }
        set(o, path, value.clone());
        true
    })
}

pub fn del_m(name: impl Into<String>, path: &'static str) -> Mutation {
    m(name, move |o| remove(o, path))
}

const RULE: &str = "spec.matchConstraints.resourceRules.0";

pub fn rule(groups: &[&str], versions: &[&str], ops: &[&str], resources: &[&str]) -> Value {
    json!({"apiGroups": groups, "apiVersions": versions, "operations": ops, "resources": resources})
}

/// Mutations of metadata, shared by policies and bindings.
pub fn metadata_mutations() -> Vec<Mutation> {
    let long_name = format!("{}.example.com", "a".repeat(245));
    vec![
        set_m("name-underscore", "metadata.name", json!("bad_name")),
        set_m("name-uppercase", "metadata.name", json!("BadName")),
        set_m("name-empty", "metadata.name", json!("")),
        del_m("name-missing", "metadata.name"),
        m("name-generate-only", |o| {
            remove(o, "metadata.name");
            set(o, "metadata.generateName", json!("gen-"));
            true
        }),
        // Not generated: an invalid `generateName` ("Gen_") also fails `metadata.name`, whose
        // cause then quotes the name the server generated with a random suffix ("Gen_ctlc2"),
        // which nothing offline can reproduce.
        set_m(
            "name-static-suffix",
            "metadata.name",
            json!("policy.static.k8s.io"),
        ),
        set_m("name-static-only", "metadata.name", json!("static.k8s.io")),
        set_m("name-too-long", "metadata.name", json!(long_name)),
        set_m("name-trailing-dot", "metadata.name", json!("policy.")),
        set_m("name-dot-dot", "metadata.name", json!("a..b")),
        set_m(
            "label-key-space",
            "metadata.labels",
            json!({"bad key": "v"}),
        ),
        set_m(
            "label-value-bad",
            "metadata.labels",
            json!({"ok": "bad value!"}),
        ),
        set_m(
            "label-value-too-long",
            "metadata.labels",
            json!({"ok": "v".repeat(64)}),
        ),
        set_m(
            "label-prefix-bad",
            "metadata.labels",
            json!({"Bad_Prefix/key": "v"}),
        ),
        set_m(
            "labels-ok",
            "metadata.labels",
            json!({"app.kubernetes.io/name": "x"}),
        ),
        set_m(
            "annotation-key-bad",
            "metadata.annotations",
            json!({"bad key/x/y": "v"}),
        ),
        set_m(
            "annotation-key-empty",
            "metadata.annotations",
            json!({"": "v"}),
        ),
        set_m("namespace-set", "metadata.namespace", json!("default")),
        set_m(
            "finalizer-bad",
            "metadata.finalizers",
            json!(["bad finalizer"]),
        ),
        set_m(
            "finalizer-ok",
            "metadata.finalizers",
            json!(["example.com/keep"]),
        ),
        set_m(
            "owner-reference-incomplete",
            "metadata.ownerReferences",
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": ""}]),
        ),
    ]
}

/// Mutations of a MatchResources at `base` (`spec.matchConstraints` or `spec.matchResources`).
pub fn match_resources_mutations(base: &'static str) -> Vec<Mutation> {
    let p = move |s: &str| -> &'static str { Box::leak(format!("{base}.{s}").into_boxed_str()) };
    let r0 = p("resourceRules.0");
    let with_rule = move |name: &str, value: Value| {
        m(name.to_string(), move |o| {
            set(o, r0, value.clone());
            true
        })
    };
    let v = vec![
        set_m("matchPolicy-bogus", p("matchPolicy"), json!("Bogus")),
        set_m("matchPolicy-empty", p("matchPolicy"), json!("")),
        set_m("matchPolicy-exact", p("matchPolicy"), json!("Exact")),
        set_m("matchPolicy-lowercase", p("matchPolicy"), json!("exact")),
        del_m("matchPolicy-missing", p("matchPolicy")),
        set_m(
            "namespaceSelector-bad-operator",
            p("namespaceSelector"),
            json!({"matchExpressions": [{"key": "env", "operator": "Bogus", "values": ["a"]}]}),
        ),
        set_m(
            "namespaceSelector-in-without-values",
            p("namespaceSelector"),
            json!({"matchExpressions": [{"key": "env", "operator": "In", "values": []}]}),
        ),
        set_m(
            "namespaceSelector-exists-with-values",
            p("namespaceSelector"),
            json!({"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["a"]}]}),
        ),
        set_m(
            "namespaceSelector-bad-key",
            p("namespaceSelector"),
            json!({"matchExpressions": [{"key": "bad key", "operator": "Exists"}]}),
        ),
        set_m(
            "namespaceSelector-bad-label-value",
            p("namespaceSelector"),
            json!({"matchLabels": {"env": "bad value!"}}),
        ),
        set_m(
            "namespaceSelector-bad-value-in-expression",
            p("namespaceSelector"),
            json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["bad value!"]}]}),
        ),
        set_m(
            "objectSelector-bad-operator",
            p("objectSelector"),
            json!({"matchExpressions": [{"key": "app", "operator": "in", "values": ["a"]}]}),
        ),
        set_m(
            "objectSelector-doesnotexist-with-values",
            p("objectSelector"),
            json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": ["a"]}]}),
        ),
        set_m(
            "objectSelector-bad-label-key",
            p("objectSelector"),
            json!({"matchLabels": {"-bad": "x"}}),
        ),
        set_m("namespaceSelector-empty", p("namespaceSelector"), json!({})),
        with_rule(
            "rule-apiGroups-empty",
            rule(&[], &["v1"], &["CREATE"], &["pods"]),
        ),
        with_rule(
            "rule-apiGroups-wildcard-mixed",
            rule(&["*", "apps"], &["v1"], &["CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-apiVersions-empty",
            rule(&["apps"], &[], &["CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-apiVersions-wildcard-mixed",
            rule(&["apps"], &["v1", "*"], &["CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-apiVersions-empty-string",
            rule(&["apps"], &[""], &["CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-operations-empty",
            rule(&["apps"], &["v1"], &[], &["deployments"]),
        ),
        with_rule(
            "rule-operations-bogus",
            rule(&["apps"], &["v1"], &["BOGUS"], &["deployments"]),
        ),
        with_rule(
            "rule-operations-lowercase",
            rule(&["apps"], &["v1"], &["create"], &["deployments"]),
        ),
        with_rule(
            "rule-operations-wildcard-mixed",
            rule(&["apps"], &["v1"], &["*", "CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-operations-connect",
            rule(&[""], &["v1"], &["CONNECT"], &["pods/exec"]),
        ),
        with_rule(
            "rule-operations-duplicate",
            rule(&["apps"], &["v1"], &["CREATE", "CREATE"], &["deployments"]),
        ),
        with_rule(
            "rule-resources-empty",
            rule(&["apps"], &["v1"], &["CREATE"], &[]),
        ),
        with_rule(
            "rule-resources-empty-string",
            rule(&["apps"], &["v1"], &["CREATE"], &[""]),
        ),
        with_rule(
            "rule-resources-wildcard-mixed",
            rule(&["apps"], &["v1"], &["CREATE"], &["*", "deployments"]),
        ),
        with_rule(
            "rule-resources-all-subresources-mixed",
            rule(&["apps"], &["v1"], &["CREATE"], &["*/*", "deployments"]),
        ),
        with_rule(
            "rule-resources-subresource-wildcard-conflict",
            rule(
                &["apps"],
                &["v1"],
                &["CREATE"],
                &["deployments/*", "deployments/scale"],
            ),
        ),
        with_rule(
            "rule-resources-wildcard-subresource-conflict",
            rule(
                &["apps"],
                &["v1"],
                &["CREATE"],
                &["*/scale", "deployments/scale"],
            ),
        ),
        with_rule(
            "rule-resources-star-slash-star",
            rule(&["*"], &["*"], &["*"], &["*/*"]),
        ),
        with_rule(
            "rule-resources-subresource-ok",
            rule(
                &["apps"],
                &["v1"],
                &["UPDATE"],
                &["deployments", "deployments/scale"],
            ),
        ),
        with_rule(
            "rule-resources-duplicate",
            rule(
                &["apps"],
                &["v1"],
                &["CREATE"],
                &["deployments", "deployments"],
            ),
        ),
        with_rule(
            "rule-resources-three-segments",
            rule(&["apps"], &["v1"], &["CREATE"], &["deployments/scale/x"]),
        ),
        with_rule(
            "rule-scope-bogus",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "scope": "Bogus"}),
        ),
        with_rule(
            "rule-scope-empty",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "scope": ""}),
        ),
        with_rule(
            "rule-scope-namespaced",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "scope": "Namespaced"}),
        ),
        with_rule(
            "rule-resourceNames-duplicate",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "resourceNames": ["a", "a"]}),
        ),
        with_rule(
            "rule-resourceNames-slash",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "resourceNames": ["a/b"]}),
        ),
        with_rule(
            "rule-resourceNames-dotdot",
            json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["deployments"], "resourceNames": ["..", "%"]}),
        ),
        set_m(
            "excludeResourceRules-bad",
            p("excludeResourceRules"),
            json!([{"apiGroups": ["*", ""], "apiVersions": [], "operations": ["NOPE"],
                    "resources": ["pods/*", "*/*"], "resourceNames": ["x", "x"]}]),
        ),
        set_m(
            "excludeResourceRules-ok",
            p("excludeResourceRules"),
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                    "resources": ["configmaps"], "resourceNames": ["kube-root-ca.crt"]}]),
        ),
        m("rule-second-bad", move |o| {
            if get(o, r0).is_none() {
                return false;
            }
            set(
                o,
                p("resourceRules.1"),
                rule(&["apps", "*"], &["*"], &["DELETE", "*"], &["*", "pods"]),
            );
            true
        }),
    ];
    v
}

/// Mutations specific to policies (`spec` fields other than matchConstraints).
fn policy_mutations() -> Vec<Mutation> {
    let mut v = vec![
        del_m("failurePolicy-missing", "spec.failurePolicy"),
        set_m("failurePolicy-bogus", "spec.failurePolicy", json!("Bogus")),
        set_m(
            "failurePolicy-lowercase",
            "spec.failurePolicy",
            json!("fail"),
        ),
        set_m("failurePolicy-empty", "spec.failurePolicy", json!("")),
        set_m(
            "failurePolicy-ignore",
            "spec.failurePolicy",
            json!("Ignore"),
        ),
        del_m("matchConstraints-missing", "spec.matchConstraints"),
        set_m("matchConstraints-empty", "spec.matchConstraints", json!({})),
        set_m(
            "matchConstraints-resourceRules-empty",
            "spec.matchConstraints.resourceRules",
            json!([]),
        ),
        m("validations-and-auditAnnotations-missing", |o| {
            remove(o, "spec.validations");
            remove(o, "spec.auditAnnotations");
            true
        }),
        m("validations-empty-list", |o| {
            set(o, "spec.validations", json!([]));
            remove(o, "spec.auditAnnotations");
            true
        }),
        // paramKind
        set_m("paramKind-empty", "spec.paramKind", json!({})),
        set_m(
            "paramKind-no-apiVersion",
            "spec.paramKind",
            json!({"kind": "ConfigMap"}),
        ),
        set_m(
            "paramKind-no-kind",
            "spec.paramKind",
            json!({"apiVersion": "v1"}),
        ),
        set_m(
            "paramKind-three-segments",
            "spec.paramKind",
            json!({"apiVersion": "a/b/c", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-bad-group",
            "spec.paramKind",
            json!({"apiVersion": "Bad_Group/v1", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-no-version",
            "spec.paramKind",
            json!({"apiVersion": "example.com/", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-bad-version",
            "spec.paramKind",
            json!({"apiVersion": "example.com/V1", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-version-starts-digit",
            "spec.paramKind",
            json!({"apiVersion": "example.com/1v", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-slash-only",
            "spec.paramKind",
            json!({"apiVersion": "/", "kind": "Thing"}),
        ),
        set_m(
            "paramKind-bad-kind-space",
            "spec.paramKind",
            json!({"apiVersion": "example.com/v1", "kind": "Bad Kind"}),
        ),
        set_m(
            "paramKind-kind-starts-digit",
            "spec.paramKind",
            json!({"apiVersion": "example.com/v1", "kind": "1Thing"}),
        ),
        set_m(
            "paramKind-kind-dash",
            "spec.paramKind",
            json!({"apiVersion": "example.com/v1", "kind": "my-thing"}),
        ),
        set_m(
            "paramKind-kind-underscore",
            "spec.paramKind",
            json!({"apiVersion": "example.com/v1", "kind": "My_Thing"}),
        ),
        set_m(
            "paramKind-ok-crd",
            "spec.paramKind",
            json!({"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"}),
        ),
        del_m("paramKind-removed", "spec.paramKind"),
        replace_m("paramKind-kind-empty", "spec.paramKind.kind", json!("")),
    ];
    // messages, reasons and expressions of the first validation
    let first_validation = |name: &str, field: &'static str, value: Value| {
        m(name.to_string(), move |o| {
            if get(o, "spec.validations.0").is_none() {
                return false;
            }
            set(o, &format!("spec.validations.0.{field}"), value.clone());
            true
        })
    };
    v.extend([
        first_validation("message-line-break", "message", json!("line one\nline two")),
        first_validation("message-cr", "message", json!("carriage\rreturn")),
        first_validation("message-whitespace-only", "message", json!("   ")),
        first_validation("message-newline-only", "message", json!("\n")),
        first_validation("message-trailing-newline", "message", json!("fine\n")),
        first_validation("message-empty", "message", json!("")),
        first_validation("message-unicode", "message", json!("größe ✓")),
        first_validation("reason-bogus", "reason", json!("Bogus")),
        first_validation("reason-empty", "reason", json!("")),
        first_validation("reason-lowercase", "reason", json!("forbidden")),
        first_validation("reason-unauthorized", "reason", json!("Unauthorized")),
        first_validation("reason-too-large", "reason", json!("RequestEntityTooLarge")),
        first_validation("reason-invalid", "reason", json!("Invalid")),
        first_validation("expression-empty", "expression", json!("")),
        first_validation("expression-whitespace", "expression", json!(" \t ")),
        m("expression-missing", |o| {
            remove(o, "spec.validations.0.expression")
        }),
        m("validation-second-empty", |o| {
            push(
                o,
                "spec.validations",
                json!({"expression": "", "message": " "}),
            );
            true
        }),
    ]);
    // messageExpression
    for (name, expr) in MESSAGE_EXPRESSIONS {
        v.push(first_validation(
            &format!("messageExpression-{name}"),
            "messageExpression",
            json!(expr),
        ));
    }
    // validation expressions
    for (name, expr) in validation_expressions() {
        v.push(first_validation(
            &format!("expression-{name}"),
            "expression",
            json!(expr),
        ));
    }
    v.extend(variable_mutations());
    v.extend(match_condition_mutations());
    v.extend(audit_annotation_mutations());
    v
}

/// Expressions for `spec.validations[0].expression` (applied to bases with and without params
/// and variables).
fn validation_expressions() -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> = [
        ("true", "true"),
        ("int", "1"),
        ("string", "'x'"),
        ("dyn-cast", "dyn(true)"),
        ("object", "object"),
        ("null", "null"),
        ("dyn-field", "object.metadata.name"),
        ("list", "[true]"),
        ("request-uid", "request.uid == ''"),
        ("request-username", "request.userInfo.username == ''"),
        ("request-operation", "request.operation == 'CREATE'"),
        ("request-bogus-field", "request.bogus == 1"),
        ("params-max", "params.max > 1"),
        ("params-null", "params == null"),
        ("has-params", "has(params.x)"),
        ("variables-b-string", "variables.b > 'x'"),
        ("variables-undefined", "variables.nope"),
        ("undefined-ident", "undefinedIdent == 1"),
        ("syntax-dangling-eq", "object.metadata.name =="),
        ("syntax-dangling-plus", "1 +"),
        ("syntax-unterminated", "'unterminated"),
        ("syntax-parens", "((true)"),
        ("syntax-multiline", "object.metadata.name ==\n  1 +\n"),
        ("multiline-ok", "true &&\n  object.metadata.name != ''"),
        ("typo-function", "object.metadata.name.startWith('x')"),
        ("lists-includes", "[1, 2].includes(1)"),
        ("string-includes", "'abc'.includes('a')"),
        ("lists-sum", "[1, 2].sum() == 3"),
        ("lists-isSorted", "[1, 2].isSorted()"),
        ("lists-indexOf", "[1, 2].indexOf(2) == 1"),
        ("ext-lists-distinct", "[1, 1].distinct().size() == 1"),
        ("ext-lists-sortBy", "[3, 1].sortBy(x, x) == [1, 3]"),
        ("ext-lists-range", "lists.range(3).size() == 3"),
        ("sets-contains", "sets.contains([1, 2], [1])"),
        ("quantity", "quantity('1Gi').isGreaterThan(quantity('1Mi'))"),
        ("isQuantity", "isQuantity('1')"),
        ("ip", "ip('10.0.0.1').family() == 4"),
        ("cidr", "cidr('10.0.0.0/8').containsIP(ip('10.0.0.1'))"),
        ("url", "url('https://example.com').getHost() == 'example.com'"),
        ("semver", "semver('1.0.0').major() == 1"),
        ("semver-normalize", "isSemver('v1.0', true)"),
        ("format", "!format.dns1123Label().validate('x').hasValue()"),
        ("regex-invalid", "'a'.matches('[')"),
        ("regex-find", "'abc'.find('b') == 'b'"),
        ("duration-invalid", "duration('1x') > duration('1s')"),
        ("timestamp-invalid", "timestamp('bogus') > timestamp('2020-01-01T00:00:00Z')"),
        ("heterogeneous-list", "[1, 'a'].size() == 2"),
        ("authorizer-check", "authorizer.group('apps').resource('deployments').check('create').allowed()"),
        ("authorizer-requestResource", "authorizer.requestResource.check('get').allowed()"),
        ("authorizer-serviceAccount", "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('get').allowed()"),
        ("authorizer-fieldSelector", "authorizer.group('').resource('pods').fieldSelector('a=b').check('list').allowed()"),
        ("authorizer-path", "authorizer.path('/healthz').check('get').allowed()"),
        ("namespaceObject", "namespaceObject.metadata.name == 'x'"),
        ("oldObject-null", "oldObject == null"),
        ("optional-field", "object.?metadata.?name.orValue('') == ''"),
        ("optional-of", "optional.of(1).hasValue()"),
        ("two-var-all", "object.metadata.labels.all(k, v, k == v)"),
        ("int-plus-string", "object.metadata.name.size() < 1 + 'a'"),
        ("int-eq-string", "1 == 'a'"),
        ("int-eq-double", "1 == 1.0"),
        ("ternary-mismatch", "(request.operation == 'CREATE' ? 1 : 'a') == 1"),
        ("has-object-spec", "has(object.spec)"),
        ("type-compare", "type(object) == map"),
        ("math-greatest", "math.greatest(1, 2) == 2"),
        ("base64", "base64.encode(b'a') == 'YQ=='"),
        ("cel-bind", "cel.bind(x, 1, x == 1)"),
        ("in-list", "object.metadata.name in ['a', 'b']"),
        ("strings-lowerAscii", "object.metadata.name.lowerAscii() == 'a'"),
        ("strings-format", "'%s'.format(['a']) == 'a'"),
        ("strings-reverse", "object.metadata.name.reverse() == 'a'"),
        ("strings-quote", "strings.quote('a') == '\"a\"'"),
        ("undefined-macro-var", "x.all(y, y)"),
        ("all-non-bool", "[1, 2].all(x, x)"),
        ("exists-ok", "object.spec.containers.exists(c, c.name == 'x')"),
        ("cost-nested", "object.spec.containers.all(a, object.spec.containers.all(b, object.spec.containers.all(c, object.spec.containers.all(d, a.name.matches(b.name + c.name + d.name)))))"),
        ("dyn-int-gt-string", "int(object.spec.replicas) > 'a'"),
        ("params-data", "params.data.x == 'a'"),
        ("map-index", "object.metadata.annotations['a'] == 'b'"),
        ("bytes-compare", "b'a' == b'a'"),
        ("uint", "1u == 1u"),
        ("string-escape-bad", "'\\q' == 'a'"),
        // cel-go's planner with Kubernetes' OptOptimize (crates/core/src/k8s_env/plan.rs): constant
        // conversions are evaluated and constant indexes become qualifiers when the program is
        // built, after the expression compiled.
        ("plan-bool-string", "bool('x')"),
        ("plan-bool-string-ok", "bool('True')"),
        ("plan-int-string", "int('12a') == 1"),
        ("plan-int-string-ok", "int('-12') == -12"),
        ("plan-int-string-range", "int('9223372036854775808') == 1"),
        ("plan-uint-plus", "uint('+1') == 1u"),
        ("plan-uint-negative", "uint(-1) == 1u"),
        ("plan-int-uint-overflow", "int(18446744073709551615u) == 1"),
        ("plan-double-range", "double('1e400') > 1.0"),
        ("plan-double-exponent", "double('1e') > 1.0"),
        ("plan-double-inf", "double('-Infinity') < 1.0"),
        ("plan-double-hex", "double('0x1p-2') > 0.0"),
        ("plan-string-bytes", "string(b'\\xff') == 'a'"),
        ("plan-nested-ok", "int(string(1)) == 1"),
        ("plan-nested-bool", "bool(string(2))"),
        ("plan-duration-nested", "duration(string('1d')) > duration('1s')"),
        ("plan-timestamp-nested", "timestamp(string('yesterday')) > timestamp('2020-01-01T00:00:00Z')"),
        ("plan-timestamp-overflow", "timestamp(string('0000-01-01T00:00:00Z')) > timestamp('2020-01-01T00:00:00Z')"),
        // Not `{b'a': 1}[b'a']`: kube-apiserver 1.37.1 panics folding a constant map literal
        // with a bytes key (`hash of unhashable type types.Bytes` in cel-go's evalMap.Exec,
        // seen in this test's API server log) and closes the connection: no verdict.
        ("plan-qualifier-bytes", "dyn(object.metadata.labels)[b'a'] == 'x'"),
        ("plan-qualifier-bytes-conv", "dyn(object.metadata.labels)[bytes('a')] == 'x'"),
        ("plan-qualifier-null", "dyn({'a': true})[null]"),
        ("plan-qualifier-string-ok", "dyn(object.metadata.labels)['a'] == 'x'"),
        ("plan-order", "[int('x'), int('y')].size() == 2"),
        ("plan-not-constant", "int(object.metadata.name) == 1"),
    ]
    .into_iter()
    .map(|(n, e)| (n, e.to_string()))
    .collect();
    v.push((
        "nested-parens-300",
        format!("{}true{}", "(".repeat(300), ")".repeat(300)),
    ));
    v.push((
        "nested-parens-40",
        format!("{}true{}", "(".repeat(40), ")".repeat(40)),
    ));
    v.push(("long-and-chain", format!("{}true", "true && ".repeat(1500))));
    v.push((
        "long-string-literal",
        format!("'{}' != ''", "a".repeat(110_000)),
    ));
    v
}

const MESSAGE_EXPRESSIONS: &[(&str, &str)] = &[
    ("ok", "'denied: ' + object.metadata.name"),
    ("int", "1"),
    ("bool", "true"),
    ("dyn", "object.metadata.name"),
    ("null", "null"),
    ("whitespace", "   "),
    ("string-plus-int", "'a' + 1"),
    ("syntax", "'a' +"),
    (
        "authorizer",
        "authorizer.group('').resource('pods').check('get').reason()",
    ),
    ("params", "string(params.x)"),
    ("variables-undefined", "string(variables.nope)"),
    ("request-uid", "string(request.uid)"),
    ("request-name", "request.name"),
    ("includes", "[1].includes(1) ? 'a' : 'b'"),
    ("multiline-syntax", "'a' +\n  +"),
];

pub fn variable_mutations() -> Vec<Mutation> {
    // Adds a `variables` list (replacing any) and refers to it only where stated.
    let vars = |name: &str, vars: Value| set_m(format!("variables-{name}"), "spec.variables", vars);
    vec![
        vars("ok", json!([{"name": "a", "expression": "1"}])),
        vars("name-empty", json!([{"name": "", "expression": "1"}])),
        vars(
            "name-whitespace",
            json!([{"name": "  ", "expression": "1"}]),
        ),
        vars(
            "name-starts-digit",
            json!([{"name": "1a", "expression": "1"}]),
        ),
        vars("name-dash", json!([{"name": "a-b", "expression": "1"}])),
        vars(
            "name-reserved-in",
            json!([{"name": "in", "expression": "1"}]),
        ),
        vars(
            "name-reserved-true",
            json!([{"name": "true", "expression": "1"}]),
        ),
        vars(
            "name-reserved-namespace",
            json!([{"name": "namespace", "expression": "1"}]),
        ),
        vars(
            "name-underscores",
            json!([{"name": "__a__", "expression": "1"}]),
        ),
        vars(
            "duplicate",
            json!([{"name": "a", "expression": "1"}, {"name": "a", "expression": "'x'"}]),
        ),
        vars("expression-empty", json!([{"name": "a", "expression": ""}])),
        vars(
            "expression-whitespace",
            json!([{"name": "a", "expression": " \n "}]),
        ),
        vars(
            "forward-reference",
            json!([{"name": "a", "expression": "variables.b + 1"}, {"name": "b", "expression": "1"}]),
        ),
        vars(
            "backward-reference",
            json!([{"name": "b", "expression": "1"}, {"name": "a", "expression": "variables.b + 1"}]),
        ),
        vars(
            "self-reference",
            json!([{"name": "a", "expression": "variables.a"}]),
        ),
        vars(
            "type-error",
            json!([{"name": "a", "expression": "1 + 'x'"}]),
        ),
        vars("syntax-error", json!([{"name": "a", "expression": "1 +"}])),
        vars("params", json!([{"name": "a", "expression": "params.x"}])),
        vars(
            "includes",
            json!([{"name": "a", "expression": "[1].includes(1)"}]),
        ),
        vars(
            "request-uid",
            json!([{"name": "a", "expression": "request.uid"}]),
        ),
        vars(
            "authorizer",
            json!([{"name": "a", "expression": "authorizer.group('').resource('pods').check('get').allowed()"}]),
        ),
        m("variables-int-compared-to-string", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "b", "expression": "1"}]),
            );
            if get(o, "spec.validations.0").is_none() {
                return false;
            }
            set(
                o,
                "spec.validations.0.expression",
                json!("variables.b > 'x'"),
            );
            true
        }),
        m("variables-used-in-messageExpression", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "b", "expression": "'x'"}]),
            );
            if get(o, "spec.validations.0").is_none() {
                return false;
            }
            set(
                o,
                "spec.validations.0.messageExpression",
                json!("variables.b"),
            );
            true
        }),
        m("variables-used-in-matchCondition", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "b", "expression": "true"}]),
            );
            set(
                o,
                "spec.matchConditions",
                json!([{"name": "uses-variables", "expression": "variables.b"}]),
            );
            true
        }),
        m("variables-many", |o| {
            let list: Vec<Value> = (0..70)
                .map(|i| json!({"name": format!("v{i}"), "expression": format!("{i}")}))
                .collect();
            set(o, "spec.variables", Value::Array(list));
            true
        }),
    ]
}

pub fn match_condition_mutations() -> Vec<Mutation> {
    let mc = |name: &str, conds: Value| {
        set_m(
            format!("matchConditions-{name}"),
            "spec.matchConditions",
            conds,
        )
    };
    let many = |n: usize| -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
                .collect(),
        )
    };
    vec![
        mc(
            "ok",
            json!([{"name": "ok", "expression": "request.operation == 'CREATE'"}]),
        ),
        mc("name-empty", json!([{"name": "", "expression": "true"}])),
        mc(
            "name-bad",
            json!([{"name": "bad name!", "expression": "true"}]),
        ),
        mc(
            "name-too-long",
            json!([{"name": "a".repeat(64), "expression": "true"}]),
        ),
        mc(
            "name-prefixed",
            json!([{"name": "example.com/ok", "expression": "true"}]),
        ),
        mc(
            "name-bad-prefix",
            json!([{"name": "Bad_Prefix/ok", "expression": "true"}]),
        ),
        mc(
            "duplicate-names",
            json!([{"name": "a", "expression": "true"}, {"name": "a", "expression": "false"}]),
        ),
        mc("64", many(64)),
        mc("65", many(65)),
        mc("expression-int", json!([{"name": "a", "expression": "1"}])),
        mc(
            "expression-string",
            json!([{"name": "a", "expression": "'x'"}]),
        ),
        mc(
            "expression-dyn",
            json!([{"name": "a", "expression": "object.metadata.name"}]),
        ),
        mc("expression-empty", json!([{"name": "a", "expression": ""}])),
        mc(
            "expression-whitespace",
            json!([{"name": "a", "expression": "  "}]),
        ),
        mc(
            "expression-syntax",
            json!([{"name": "a", "expression": "true &&"}]),
        ),
        mc(
            "expression-variables",
            json!([{"name": "a", "expression": "variables.x"}]),
        ),
        mc(
            "expression-params",
            json!([{"name": "a", "expression": "params.x == 'a'"}]),
        ),
        mc(
            "expression-authorizer",
            json!([{"name": "a", "expression": "authorizer.group('').resource('pods').check('get').allowed()"}]),
        ),
        mc(
            "expression-includes",
            json!([{"name": "a", "expression": "[1].includes(1)"}]),
        ),
        mc(
            "expression-request-uid",
            json!([{"name": "a", "expression": "request.uid == ''"}]),
        ),
        mc(
            "expression-namespaceObject",
            json!([{"name": "a", "expression": "namespaceObject == null"}]),
        ),
        mc(
            "name-and-expression-bad",
            json!([{"name": "", "expression": ""}, {"name": "x y", "expression": "1"}]),
        ),
    ]
}

fn audit_annotation_mutations() -> Vec<Mutation> {
    let aa = |name: &str, list: Value| {
        set_m(
            format!("auditAnnotations-{name}"),
            "spec.auditAnnotations",
            list,
        )
    };
    let many = |n: usize| -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"key": format!("k{i}"), "valueExpression": "'v'"}))
                .collect(),
        )
    };
    vec![
        aa("ok", json!([{"key": "replicas", "valueExpression": "'x'"}])),
        aa(
            "key-bad",
            json!([{"key": "bad key", "valueExpression": "'x'"}]),
        ),
        aa("key-empty", json!([{"key": "", "valueExpression": "'x'"}])),
        aa(
            "key-slash",
            json!([{"key": "a/b", "valueExpression": "'x'"}]),
        ),
        aa(
            "key-too-long",
            json!([{"key": "k".repeat(64), "valueExpression": "'x'"}]),
        ),
        aa(
            "key-duplicate",
            json!([{"key": "a", "valueExpression": "'x'"}, {"key": "a", "valueExpression": "'y'"}]),
        ),
        aa("20", many(20)),
        aa("21", many(21)),
        aa(
            "value-null",
            json!([{"key": "a", "valueExpression": "null"}]),
        ),
        aa("value-int", json!([{"key": "a", "valueExpression": "1"}])),
        aa(
            "value-bool",
            json!([{"key": "a", "valueExpression": "true"}]),
        ),
        aa(
            "value-dyn",
            json!([{"key": "a", "valueExpression": "object.metadata.name"}]),
        ),
        aa(
            "value-optional",
            json!([{"key": "a", "valueExpression": "object.?metadata.?name"}]),
        ),
        aa("value-empty", json!([{"key": "a", "valueExpression": ""}])),
        aa(
            "value-whitespace",
            json!([{"key": "a", "valueExpression": "  "}]),
        ),
        aa(
            "value-syntax",
            json!([{"key": "a", "valueExpression": "'a' +"}]),
        ),
        aa(
            "value-params",
            json!([{"key": "a", "valueExpression": "string(params.x)"}]),
        ),
        aa(
            "value-variables",
            json!([{"key": "a", "valueExpression": "string(variables.x)"}]),
        ),
        aa(
            "value-includes",
            json!([{"key": "a", "valueExpression": "[1].includes(1) ? 'a' : null"}]),
        ),
        aa(
            "value-authorizer",
            json!([{"key": "a", "valueExpression": "authorizer.group('').resource('pods').check('get').reason()"}]),
        ),
        aa(
            "value-too-long",
            json!([{"key": "a", "valueExpression": format!("'{}'", "x".repeat(5 * 1024))}]),
        ),
        aa(
            "value-just-fits",
            json!([{"key": "a", "valueExpression": format!("'{}'", "x".repeat(5 * 1024 - 2))}]),
        ),
        aa(
            "value-padded-fits",
            json!([{"key": "a", "valueExpression": format!("  '{}'  ", "x".repeat(5 * 1024 - 2))}]),
        ),
        m("auditAnnotations-only", |o| {
            remove(o, "spec.validations");
            set(
                o,
                "spec.auditAnnotations",
                json!([{"key": "only", "valueExpression": "'x'"}]),
            );
            true
        }),
        m("auditAnnotations-without-name", |o| {
            remove(o, "metadata.name");
            set(o, "metadata.generateName", json!("gen-"));
            set(
                o,
                "spec.auditAnnotations",
                json!([{"key": "a", "valueExpression": "'x'"}]),
            );
            true
        }),
    ]
}

fn binding_mutations() -> Vec<Mutation> {
    let mut v = vec![
        del_m("policyName-missing", "spec.policyName"),
        set_m("policyName-empty", "spec.policyName", json!("")),
        set_m("policyName-bad", "spec.policyName", json!("Bad_Policy")),
        set_m(
            "policyName-static",
            "spec.policyName",
            json!("x.static.k8s.io"),
        ),
        set_m("paramRef-empty", "spec.paramRef", json!({})),
        set_m(
            "paramRef-name-and-selector",
            "spec.paramRef",
            json!({"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"}),
        ),
        set_m(
            "paramRef-neither",
            "spec.paramRef",
            json!({"namespace": "default", "parameterNotFoundAction": "Deny"}),
        ),
        set_m("paramRef-no-action", "spec.paramRef", json!({"name": "a"})),
        set_m(
            "paramRef-action-empty",
            "spec.paramRef",
            json!({"name": "a", "parameterNotFoundAction": ""}),
        ),
        set_m(
            "paramRef-action-bogus",
            "spec.paramRef",
            json!({"name": "a", "parameterNotFoundAction": "Bogus"}),
        ),
        set_m(
            "paramRef-action-lowercase",
            "spec.paramRef",
            json!({"name": "a", "parameterNotFoundAction": "allow"}),
        ),
        set_m(
            "paramRef-name-slash",
            "spec.paramRef",
            json!({"name": "a/b", "parameterNotFoundAction": "Deny"}),
        ),
        set_m(
            "paramRef-name-dotdot",
            "spec.paramRef",
            json!({"name": "..", "parameterNotFoundAction": "Allow"}),
        ),
        set_m(
            "paramRef-namespace-bad",
            "spec.paramRef",
            json!({"name": "a", "namespace": "Bad_NS", "parameterNotFoundAction": "Allow"}),
        ),
        set_m(
            "paramRef-selector-bad",
            "spec.paramRef",
            json!({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}, "parameterNotFoundAction": "Deny"}),
        ),
        set_m(
            "paramRef-selector-ok",
            "spec.paramRef",
            json!({"selector": {"matchLabels": {"a": "b"}}, "parameterNotFoundAction": "Deny"}),
        ),
        set_m(
            "paramRef-everything-wrong",
            "spec.paramRef",
            json!({"name": "a/b", "selector": {"matchLabels": {"bad key": "v"}}, "parameterNotFoundAction": "Maybe"}),
        ),
        del_m("validationActions-missing", "spec.validationActions"),
        set_m(
            "validationActions-empty",
            "spec.validationActions",
            json!([]),
        ),
        set_m(
            "validationActions-bogus",
            "spec.validationActions",
            json!(["Bogus"]),
        ),
        set_m(
            "validationActions-lowercase",
            "spec.validationActions",
            json!(["deny"]),
        ),
        set_m(
            "validationActions-duplicate",
            "spec.validationActions",
            json!(["Deny", "Deny"]),
        ),
        set_m(
            "validationActions-deny-warn",
            "spec.validationActions",
            json!(["Deny", "Warn"]),
        ),
        set_m(
            "validationActions-warn-audit",
            "spec.validationActions",
            json!(["Warn", "Audit"]),
        ),
        set_m(
            "validationActions-all-wrong",
            "spec.validationActions",
            json!(["Warn", "Deny", "Warn", "Nope"]),
        ),
        del_m("matchResources-missing", "spec.matchResources"),
        set_m("matchResources-empty", "spec.matchResources", json!({})),
        set_m(
            "matchResources-resourceRules-empty",
            "spec.matchResources.resourceRules",
            json!([]),
        ),
        m("everything-missing", |o| {
            set(o, "spec", json!({}));
            true
        }),
    ];
    v.extend(match_resources_mutations("spec.matchResources"));
    v
}

// ---------------------------------------------------------------------------------------------
// Bases and variants

/// The corpus documents the mutations start from (path under `shared/`, short name).
pub const POLICY_BASES: &[(&str, &str)] = &[
    (
        "corpus/policies/kubernetes__website/demo-policy.example.com--basic-example-policy.yaml",
        "basic",
    ),
    (
        "corpus/policies/kubernetes__website/replicalimit-policy.example.com.yaml",
        "params",
    ),
    (
        "corpus/policies/kubernetes-sigs__secrets-store-sync-controller/secrets-store-sync-controller-validate-token-policy.yaml",
        "full",
    ),
];

/// The base for the audit annotation, message and metadata cases (one base is enough there).
pub const AUDIT_BASE: (&str, &str) = (
    "corpus/policies/kubernetes__website/demo-policy.example.com--validating-admission-policy-audit-annotation.yaml",
    "audit",
);

pub const BINDING_BASES: &[(&str, &str)] = &[
    (
        "corpus/bindings/kubernetes__website/replicalimit-test/replicalimit-binding-test.example.com.binding.yaml",
        "paramref",
    ),
    (
        "corpus/bindings/openshift__cluster-network-operator/udn-admission-policy/user-defined-networks-namespace-label-binding.binding.yaml",
        "rules",
    ),
    (
        "corpus/bindings/openshift__cluster-capi-operator/cluster-api-machine-set-vap/cluster-api-machine-set-vap.binding.yaml",
        "selector",
    ),
];

fn load_base(shared: &Path, rel: &str) -> anyhow::Result<Value> {
    let path = shared.join(rel);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut doc = crate::support::parse_yaml_documents(&text)?
        .into_iter()
        .next()
        .with_context(|| format!("{} has no document", path.display()))?;
    doc["apiVersion"] = json!(API_VERSION);
    Ok(doc)
}

/// Which bases a mutation is applied to: structural mutations once per kind of base (two
/// policies), expression and variable mutations to every policy base (with and without params
/// and variables), audit-annotation mutations to the audit base and the params base.
fn policy_bases_for(name: &str) -> &'static [&'static str] {
    if name.starts_with("expression-")
        || name.starts_with("variables-")
        || name.starts_with("matchConditions-expression")
        || name.starts_with("messageExpression-")
    {
        &["basic", "params", "full"]
    } else if name.starts_with("auditAnnotations-") {
        &["audit", "params"]
    } else if name.starts_with("message-") || name.starts_with("reason-") {
        &["audit"]
    } else {
        &["basic", "full"]
    }
}

/// The generated variants, in a fixed order.
pub fn variant_cases(shared: &Path) -> anyhow::Result<Vec<Case>> {
    let mut bases: BTreeMap<&str, Value> = BTreeMap::new();
    for (rel, short) in POLICY_BASES.iter().chain([&AUDIT_BASE]) {
        bases.insert(short, load_base(shared, rel)?);
    }
    let mut cases = Vec::new();
    let mut all = metadata_mutations();
    all.extend(match_resources_mutations("spec.matchConstraints"));
    all.extend(policy_mutations());
    for mutation in &all {
        for short in policy_bases_for(&mutation.name) {
            let mut object = bases[short].clone();
            if (mutation.apply)(&mut object) {
                cases.push(Case {
                    id: format!("gen/{short}/{}", mutation.name),
                    object,
                });
            }
        }
    }
    let mut binding_bases = Vec::new();
    for (rel, short) in BINDING_BASES {
        binding_bases.push((*short, load_base(shared, rel)?));
    }
    let metadata = metadata_mutations();
    let metadata_count = metadata.len();
    let mut binding_mutations_all = metadata;
    binding_mutations_all.extend(binding_mutations());
    for (i, mutation) in binding_mutations_all.iter().enumerate() {
        for (short, base) in &binding_bases {
            // Metadata mutations once (on the first binding base); the rest on every base.
            if i < metadata_count && *short != "paramref" {
                continue;
            }
            let mut object = base.clone();
            if (mutation.apply)(&mut object) {
                cases.push(Case {
                    id: format!("gen/binding-{short}/{}", mutation.name),
                    object,
                });
            }
        }
    }
    Ok(cases)
}

// ---------------------------------------------------------------------------------------------
// Update pairs

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": POLICY, "metadata": {"name": name}, "spec": spec})
}

fn spec_with(validations: Value) -> Value {
    json!({
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [rule(&["apps"], &["v1"], &["CREATE", "UPDATE"], &["deployments"])]},
        "validations": validations,
    })
}

/// (stored, new) pairs. Names are unique per pair (stored objects stay in the cluster).
pub fn update_cases() -> Vec<UpdateCase> {
    const INCLUDES: &str = "[1, 2].includes(1)";
    const INCLUDES2: &str = "[1, 2, 3].includes(1)";
    let mut out = Vec::new();
    let mut pair = |id: &str, storage: Storage, stored: Value, new: Value| {
        let name = format!("update-{}", id.to_lowercase());
        let mut stored = stored;
        let mut new = new;
        stored["metadata"]["name"] = json!(name);
        new["metadata"]["name"] = json!(name);
        out.push(UpdateCase {
            id: id.to_string(),
            storage,
            stored,
            new,
        });
    };
    let label = |mut o: Value| {
        o["metadata"]["labels"] = json!({"changed": "yes"});
        o
    };

    // validations[].expression: stored environment for unchanged expressions.
    let stored = policy("x", spec_with(json!([{"expression": INCLUDES}])));
    pair(
        "includes-unchanged",
        Storage::Etcd,
        stored.clone(),
        label(stored.clone()),
    );
    pair(
        "includes-changed",
        Storage::Etcd,
        stored.clone(),
        policy("x", spec_with(json!([{"expression": INCLUDES2}]))),
    );
    pair(
        "includes-added-second",
        Storage::Etcd,
        stored.clone(),
        policy(
            "x",
            spec_with(json!([{"expression": INCLUDES}, {"expression": INCLUDES2}])),
        ),
    );
    pair(
        "includes-reordered-duplicate",
        Storage::Etcd,
        stored.clone(),
        policy(
            "x",
            spec_with(json!([{"expression": "true"}, {"expression": INCLUDES}])),
        ),
    );
    // The stored validation expression reused as a variable (variables use the validation
    // expressions' preexisting set upstream).
    let mut as_var = spec_with(json!([{"expression": INCLUDES}]));
    as_var["variables"] = json!([{"name": "v", "expression": INCLUDES}]);
    pair(
        "includes-moved-to-variable",
        Storage::Etcd,
        stored.clone(),
        policy("x", as_var),
    );
    // ... and as a messageExpression (its own preexisting set).
    let mut as_msg = spec_with(
        json!([{"expression": INCLUDES, "messageExpression": "[1].includes(1) ? 'a' : 'b'"}]),
    );
    as_msg["failurePolicy"] = json!("Fail");
    pair(
        "includes-new-messageExpression",
        Storage::Etcd,
        stored.clone(),
        policy("x", as_msg),
    );
    // stored variable using includes, unchanged
    let mut var_spec = spec_with(json!([{"expression": "variables.v"}]));
    var_spec["variables"] = json!([{"name": "v", "expression": INCLUDES}]);
    let var_stored = policy("x", var_spec);
    pair(
        "variable-includes-unchanged",
        Storage::Etcd,
        var_stored.clone(),
        label(var_stored),
    );
    // messageExpression with includes, unchanged / changed
    let msg_stored = policy(
        "x",
        spec_with(
            json!([{"expression": "true", "messageExpression": "[1].includes(1) ? 'a' : 'b'"}]),
        ),
    );
    pair(
        "messageExpression-includes-unchanged",
        Storage::Etcd,
        msg_stored.clone(),
        label(msg_stored.clone()),
    );
    pair(
        "messageExpression-includes-changed",
        Storage::Etcd,
        msg_stored,
        policy(
            "x",
            spec_with(
                json!([{"expression": "true", "messageExpression": "[2].includes(1) ? 'a' : 'b'"}]),
            ),
        ),
    );
    // auditAnnotations with includes
    let mut aa = spec_with(json!([{"expression": "true"}]));
    aa["auditAnnotations"] =
        json!([{"key": "a", "valueExpression": "[1].includes(1) ? 'a' : null"}]);
    let aa_stored = policy("x", aa.clone());
    pair(
        "auditAnnotation-includes-unchanged",
        Storage::Etcd,
        aa_stored.clone(),
        label(aa_stored.clone()),
    );
    let mut aa_changed = aa.clone();
    aa_changed["auditAnnotations"][0]["valueExpression"] = json!("[2].includes(1) ? 'a' : null");
    pair(
        "auditAnnotation-includes-changed",
        Storage::Etcd,
        aa_stored,
        policy("x", aa_changed),
    );
    // the same with a valueExpression that type-checks (string in both branches)
    let mut aa2 = spec_with(json!([{"expression": "true"}]));
    aa2["auditAnnotations"] =
        json!([{"key": "a", "valueExpression": "[1].includes(1) ? 'a' : 'b'"}]);
    let aa2_stored = policy("x", aa2.clone());
    pair(
        "auditAnnotation-includes-string-unchanged",
        Storage::Etcd,
        aa2_stored.clone(),
        label(aa2_stored.clone()),
    );
    let mut aa2_changed = aa2.clone();
    aa2_changed["auditAnnotations"][0]["valueExpression"] = json!("[2].includes(1) ? 'a' : 'b'");
    pair(
        "auditAnnotation-includes-string-changed",
        Storage::Etcd,
        aa2_stored,
        policy("x", aa2_changed),
    );
    // matchConditions: not validated at all when they and paramKind are unchanged
    let mut mc = spec_with(json!([{"expression": "true"}]));
    mc["matchConditions"] = json!([{"name": "broken", "expression": "1 +"}]);
    let mc_stored = policy("x", mc.clone());
    pair(
        "matchCondition-broken-unchanged",
        Storage::Etcd,
        mc_stored.clone(),
        label(mc_stored.clone()),
    );
    let mut mc_more = mc.clone();
    mc_more["matchConditions"]
        .as_array_mut()
        .expect("list")
        .push(json!({"name": "ok", "expression": "true"}));
    pair(
        "matchCondition-broken-other-added",
        Storage::Etcd,
        mc_stored.clone(),
        policy("x", mc_more),
    );
    let mut mc_param = mc.clone();
    mc_param["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    pair(
        "matchCondition-broken-paramKind-added",
        Storage::Etcd,
        mc_stored,
        policy("x", mc_param),
    );
    // matchCondition using params: stored with paramKind; paramKind removed / changed / kept
    let mut mcp = spec_with(json!([{"expression": "true"}]));
    mcp["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    mcp["matchConditions"] = json!([{"name": "p", "expression": "params.data.x == 'a'"}]);
    let mcp_stored = policy("x", mcp.clone());
    pair(
        "matchCondition-params-unchanged",
        Storage::Create,
        mcp_stored.clone(),
        label(mcp_stored.clone()),
    );
    let mut mcp_removed = mcp.clone();
    mcp_removed
        .as_object_mut()
        .expect("spec")
        .remove("paramKind");
    pair(
        "matchCondition-params-paramKind-removed",
        Storage::Create,
        mcp_stored.clone(),
        policy("x", mcp_removed),
    );
    let mut mcp_changed = mcp.clone();
    mcp_changed["paramKind"] = json!({"apiVersion": "v1", "kind": "Secret"});
    pair(
        "matchCondition-params-paramKind-changed",
        Storage::Create,
        mcp_stored,
        policy("x", mcp_changed),
    );
    // matchCondition with includes
    let mut mci = spec_with(json!([{"expression": "true"}]));
    mci["matchConditions"] = json!([{"name": "i", "expression": "[1].includes(1)"}]);
    let mci_stored = policy("x", mci.clone());
    pair(
        "matchCondition-includes-unchanged",
        Storage::Etcd,
        mci_stored.clone(),
        label(mci_stored.clone()),
    );
    let mut mci_pk = mci.clone();
    mci_pk["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    pair(
        "matchCondition-includes-paramKind-added",
        Storage::Etcd,
        mci_stored,
        policy("x", mci_pk),
    );
    // A stored syntax error stays a syntax error in the stored environment.
    let broken = policy("x", spec_with(json!([{"expression": "1 +"}])));
    pair(
        "syntax-error-unchanged",
        Storage::Etcd,
        broken.clone(),
        label(broken.clone()),
    );
    pair(
        "syntax-error-fixed",
        Storage::Etcd,
        broken,
        policy("x", spec_with(json!([{"expression": "true"}]))),
    );
    // A stored non-bool expression, unchanged.
    let int = policy("x", spec_with(json!([{"expression": "1"}])));
    pair(
        "int-result-unchanged",
        Storage::Etcd,
        int.clone(),
        label(int),
    );
    // request.uid stored, unchanged (undeclared in every environment).
    let uid = policy("x", spec_with(json!([{"expression": "request.uid == ''"}])));
    pair(
        "request-uid-unchanged",
        Storage::Etcd,
        uid.clone(),
        label(uid),
    );
    // Valid stored policy, updates with new errors.
    let good = policy(
        "x",
        spec_with(json!([{"expression": "object.spec.replicas <= 5"}])),
    );
    pair(
        "valid-relabelled",
        Storage::Create,
        good.clone(),
        label(good.clone()),
    );
    pair(
        "valid-new-includes",
        Storage::Create,
        good.clone(),
        policy("x", spec_with(json!([{"expression": INCLUDES}]))),
    );
    let mut bad_fp = good.clone();
    bad_fp["spec"]["failurePolicy"] = json!("Bogus");
    pair(
        "valid-failurePolicy-bogus",
        Storage::Create,
        good.clone(),
        bad_fp,
    );
    let mut no_fp = good.clone();
    remove(&mut no_fp, "spec.failurePolicy");
    pair(
        "valid-failurePolicy-removed",
        Storage::Create,
        good.clone(),
        no_fp,
    );
    let mut static_name = good.clone();
    static_name["metadata"]["labels"] = json!({"bad key": "x"});
    pair(
        "valid-bad-label",
        Storage::Create,
        good.clone(),
        static_name,
    );
    // Stored object with an invalid enum (written to etcd), unchanged: update validation is
    // the create validation for everything but CEL and matchConditions.
    let mut stored_bad_enum = good.clone();
    stored_bad_enum["spec"]["failurePolicy"] = json!("Bogus");
    pair(
        "stored-bogus-failurePolicy-unchanged",
        Storage::Etcd,
        stored_bad_enum.clone(),
        label(stored_bad_enum),
    );

    // Bindings: update validation equals create validation.
    let binding = json!({
        "apiVersion": API_VERSION, "kind": BINDING, "metadata": {"name": "x"},
        "spec": {"policyName": "p", "validationActions": ["Deny"],
                 "paramRef": {"name": "a", "parameterNotFoundAction": "Deny"}}
    });
    pair(
        "binding-relabelled",
        Storage::Create,
        binding.clone(),
        label(binding.clone()),
    );
    let mut b_bad = binding.clone();
    b_bad["spec"]["validationActions"] = json!(["Deny", "Warn"]);
    pair(
        "binding-deny-warn",
        Storage::Create,
        binding.clone(),
        b_bad.clone(),
    );
    pair(
        "binding-stored-bad-unchanged",
        Storage::Etcd,
        b_bad.clone(),
        label(b_bad),
    );
    let mut b_sel = binding.clone();
    b_sel["spec"]["paramRef"]["selector"] = json!({});
    pair("binding-name-and-selector", Storage::Create, binding, b_sel);
    out
}

// ---------------------------------------------------------------------------------------------
// Talking to the API server

/// The collection URL of a kind.
pub fn collection(kind: &str) -> anyhow::Result<&'static str> {
    match kind {
        POLICY => Ok("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"),
        BINDING => Ok("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"),
        MUTATING_POLICY => Ok("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies"),
        MUTATING_BINDING => {
            Ok("/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings")
        }
        "ValidatingWebhookConfiguration" => {
            Ok("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations")
        }
        "MutatingWebhookConfiguration" => {
            Ok("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
        }
        other => bail!("not a policy, binding or webhook configuration: {other:?}"),
    }
}

pub fn kind_of(object: &Value) -> &str {
    object.get("kind").and_then(Value::as_str).unwrap_or("")
}

pub fn name_of(object: &Value) -> &str {
    get(object, "metadata.name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Turns an API response into an [`Outcome`].
pub fn outcome(http: u16, body: &[u8], warnings: Vec<String>) -> anyhow::Result<Outcome> {
    let accepted = (200..300).contains(&http);
    if accepted {
        return Ok(Outcome {
            http,
            accepted,
            causes: Vec::new(),
            message: String::new(),
            reason: String::new(),
            warnings,
        });
    }
    let status: Value = serde_json::from_slice(body).with_context(|| {
        format!(
            "HTTP {http} with a body that is not a Status: {}",
            String::from_utf8_lossy(body)
        )
    })?;
    let message = status["message"].as_str().unwrap_or("").to_string();
    let reason = status["reason"].as_str().unwrap_or("").to_string();
    let mut causes: Vec<String> = status["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| {
                    let field = c["field"].as_str().unwrap_or("");
                    let msg = c["message"].as_str().unwrap_or("");
                    if field.is_empty() {
                        msg.to_string()
                    } else {
                        format!("{field}: {msg}")
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if causes.is_empty() {
        causes.push(message.clone());
    }
    Ok(Outcome {
        http,
        accepted,
        causes,
        message,
        reason,
        warnings,
    })
}

/// Sends `object` with `method` (POST to the collection, PUT to the object) and `?dryRun=All`
/// when `dry_run`. A PUT needs `metadata.resourceVersion` set by the caller.
pub async fn send(
    client: &Client,
    method: http::Method,
    object: &Value,
    dry_run: bool,
) -> anyhow::Result<(u16, Vec<u8>, Vec<String>)> {
    let base = collection(kind_of(object))?;
    let mut url = if method == http::Method::POST {
        base.to_string()
    } else {
        format!("{base}/{}", name_of(object))
    };
    if dry_run {
        url.push_str("?dryRun=All");
    }
    let request = http::Request::builder()
        .method(method)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(object)?))?;
    let response = client.send(request).await.context("sending a request")?;
    let http = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|w| String::from_utf8_lossy(w.as_bytes()).into_owned())
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .context("reading a response")?
        .to_bytes()
        .to_vec();
    Ok((http, body, warnings))
}

/// A dry-run CREATE of `object`.
pub async fn dry_run_create(client: &Client, object: &Value) -> anyhow::Result<Outcome> {
    let (http, body, warnings) = send(client, http::Method::POST, object, true).await?;
    outcome(http, &body, warnings)
}

/// Reads the current `resourceVersion` of the stored object named like `object`.
pub async fn resource_version(client: &Client, object: &Value) -> anyhow::Result<String> {
    let url = format!("{}/{}", collection(kind_of(object))?, name_of(object));
    let request = http::Request::builder()
        .method(http::Method::GET)
        .uri(&url)
        .body(Vec::new())?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("GET {url}"))?;
    let stored: Value = serde_json::from_str(&text)?;
    stored["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("{url} has no resourceVersion"))
}

/// A dry-run UPDATE of the stored object with `new` (its resourceVersion is filled in).
///
/// The status controller of the cluster writes the status of stored policies at any time, so a
/// 409 Conflict (stale resourceVersion) is retried with a fresh one; it says nothing about
/// validation.
pub async fn dry_run_update(client: &Client, new: &Value) -> anyhow::Result<Outcome> {
    let mut new = new.clone();
    for _ in 0..20 {
        new["metadata"]["resourceVersion"] = json!(resource_version(client, &new).await?);
        let (http, body, warnings) = send(client, http::Method::PUT, &new, true).await?;
        if http != 409 {
            return outcome(http, &body, warnings);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    bail!(
        "dry-run update of {} kept getting 409 Conflict",
        name_of(&new)
    )
}

/// Deletes the object named like `object` if it exists.
pub async fn delete_if_present(client: &Client, object: &Value) -> anyhow::Result<()> {
    let url = format!("{}/{}", collection(kind_of(object))?, name_of(object));
    let request = http::Request::builder()
        .method(http::Method::DELETE)
        .uri(&url)
        .body(kube::client::Body::empty())?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    if code != 200 && code != 202 && code != 404 {
        bail!("DELETE {url}: HTTP {code}");
    }
    Ok(())
}

/// The etcd key of a stored object (the API server's default `/registry` prefix).
pub fn etcd_key(object: &Value) -> anyhow::Result<String> {
    let resource = match kind_of(object) {
        POLICY => "validatingadmissionpolicies",
        BINDING => "validatingadmissionpolicybindings",
        MUTATING_POLICY => "mutatingadmissionpolicies",
        MUTATING_BINDING => "mutatingadmissionpolicybindings",
        "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
        "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
        other => bail!("not a policy, binding or webhook configuration: {other:?}"),
    };
    Ok(format!("/registry/{resource}/{}", name_of(object)))
}

/// The object as written into etcd: with the metadata the API server would have set on create.
pub fn etcd_value(object: &Value, index: usize) -> Value {
    let mut stored = object.clone();
    stored["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{index:012}"));
    stored["metadata"]["generation"] = json!(1);
    stored["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    stored
}

/// Renders an object as YAML when that YAML reads back as the same value, else as JSON (which
/// is YAML too): the files must carry exactly what was sent.
pub fn render(object: &Value) -> anyhow::Result<String> {
    if let Ok(yaml) = serde_saphyr::to_string(object)
        && let Ok(back) = crate::support::parse_yaml_documents(&yaml)
        && back.len() == 1
        && &back[0] == object
    {
        return Ok(yaml);
    }
    Ok(serde_json::to_string_pretty(object)? + "\n")
}

/// Every distinct one-line `expr: "..."` (or `'...'`) of the CEL conformance suite
/// (`shared/cel-spec/tests/simple/testdata/*.textproto`), decoded by the integration tests'
/// textproto reader, in file order; and how many
/// `expr` lines were left out (split over several lines, or not valid UTF-8).
pub fn cel_spec_expressions(shared: &Path) -> anyhow::Result<(Vec<String>, usize)> {
    let dir = shared.join("cel-spec/tests/simple/testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|x| x == "textproto"));
    files.sort();
    let mut seen = std::collections::BTreeSet::new();
    let (mut out, mut left_out) = (Vec::new(), 0);
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("expr:") else {
                continue;
            };
            let decoded = textproto::string_literal(rest.trim())
                .and_then(|bytes| String::from_utf8(bytes).ok());
            match decoded {
                Some(e) => {
                    if seen.insert(e.clone()) {
                        out.push(e);
                    }
                }
                None => left_out += 1,
            }
        }
    }
    Ok((out, left_out))
}

/// A ValidatingAdmissionPolicy per expression of [`cel_spec_expressions`], the expression as
/// its one variable (any result type compiles there) beside a `true` validation.
pub fn cel_spec_cases(expressions: &[String]) -> Vec<Case> {
    expressions
        .iter()
        .enumerate()
        .map(|(i, e)| Case {
            id: format!("cel-spec/{i}"),
            object: policy(
                &format!("cel-spec-{i:04}.example.com"),
                json!({
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [rule(&["apps"], &["v1"], &["CREATE"], &["deployments"])]},
                    "variables": [{"name": "v", "expression": e}],
                    "validations": [{"expression": "true"}],
                }),
            ),
        })
        .collect()
}
