//! The ground truth for ValidatingWebhookConfiguration and MutatingWebhookConfiguration verdicts
//! (issue 32, item 1), built on `apiserver_truth.rs` (same [`Case`], [`UpdateCase`], sending and
//! comparison):
//!
//! - [`corpus_cases`]: every webhook configuration document of `shared/corpus/webhooks`;
//! - [`variant_cases`]: a deterministic set of variants of one validating and one mutating
//!   configuration, covering every rule of `crates/core/src/apiserver/webhook.rs` (metadata and match
//!   conditions through the mutations shared with the policy cases);
//! - [`update_cases`]: (stored, new) pairs, some stored straight into etcd.
//!
//! Every stored configuration (update cases) matches only a resource no API server serves, so
//! it never intercepts a request of another test on the shared cluster.

use std::path::Path;

use serde_json::{Value, json};

use crate::truth::{
    Case, Excluded, Mutation, Storage, UpdateCase, corpus_documents, del_m, get, m,
    match_condition_mutations, metadata_mutations, set, set_m,
};

pub const VALIDATING: &str = "ValidatingWebhookConfiguration";
pub const MUTATING: &str = "MutatingWebhookConfiguration";
const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// Every webhook configuration of `corpus/webhooks`, in path order (documents of other kinds are
/// skipped; files that do not parse are [`Excluded`]).
pub fn corpus_cases(shared: &Path) -> anyhow::Result<(Vec<Case>, Vec<Excluded>)> {
    corpus_documents(shared, "corpus/webhooks", |doc| {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        ((kind == VALIDATING || kind == MUTATING) && version == API_VERSION).then_some(doc)
    })
}

/// A rule no API server serves: a configuration with it never intercepts anything.
fn inert_rule() -> Value {
    json!({"apiGroups": ["vapcheck-truth.example.com"], "apiVersions": ["v1"],
           "operations": ["CREATE"], "resources": ["nothings"]})
}

fn hook(name: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": {"service": {"namespace": "default", "name": "truth-webhook", "path": "/validate"}},
        "rules": [inert_rule()],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

fn configuration(kind: &str, name: &str) -> Value {
    json!({"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name},
           "webhooks": [hook("a.truth.example.com")]})
}

const W: &str = "webhooks.0";

/// A mutation of the first webhook's `field` to `value`.
fn w(name: &str, field: &'static str, value: Value) -> Mutation {
    let path: &'static str = Box::leak(format!("{W}.{field}").into_boxed_str());
    set_m(format!("{field}-{name}"), path, value)
}

/// The shared match-condition mutations, moved from a policy's `spec.matchConditions` to the
/// first webhook's.
fn webhook_match_condition_mutations() -> Vec<Mutation> {
    match_condition_mutations()
        .into_iter()
        .map(|mutation| {
            let name = mutation.name.clone();
            m(name, move |o| {
                let mut policy = json!({"spec": {}});
                if !(mutation.apply)(&mut policy) {
                    return false;
                }
                match get(&policy, "spec.matchConditions") {
                    Some(conds) => {
                        let conds = conds.clone();
                        set(o, &format!("{W}.matchConditions"), conds);
                        true
                    }
                    None => false,
                }
            })
        })
        .collect()
}

fn selector_mutations(field: &'static str) -> Vec<Mutation> {
    let expr = |key: &str, op: &str, values: Value| json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]});
    vec![
        w("ok", field, expr("team", "In", json!(["a", "b"]))),
        w("bad-operator", field, expr("team", "Near", json!(["a"]))),
        w("in-no-values", field, expr("team", "In", json!([]))),
        w("exists-values", field, expr("team", "Exists", json!(["a"]))),
        w("bad-key", field, expr("bad key", "Exists", json!([]))),
        w(
            "bad-value",
            field,
            expr("team", "In", json!(["bad value!"])),
        ),
        w(
            // One bad entry each: kube-apiserver validates matchLabels in Go's (random) map
            // order, so two bad entries come back in either order.
            "bad-match-labels-key",
            field,
            json!({"matchLabels": {"bad key": "v", "k": "v"}}),
        ),
        w(
            "bad-match-labels-value",
            field,
            json!({"matchLabels": {"k": "bad value!"}}),
        ),
    ]
}

fn webhook_mutations() -> Vec<Mutation> {
    let rule = |name: &str, value: Value| w(name, "rules", json!([value]));
    let r = |groups: Value, versions: Value, ops: Value, resources: Value| json!({"apiGroups": groups, "apiVersions": versions, "operations": ops, "resources": resources});
    let url = |name: &str, u: &str| w(name, "clientConfig", json!({"url": u}));
    let service = |name: &str, s: Value| w(name, "clientConfig", json!({"service": s}));
    let svc = |extra: Value| {
        let mut s = json!({"namespace": "default", "name": "svc"});
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        s
    };
    let mut all = vec![
        del_m("name-missing", "webhooks.0.name"),
        w("two-segments", "name", json!("a.example")),
        w("not-dns", "name", json!("Bad_Name.example.com")),
        w(
            "too-long",
            "name",
            json!(format!("{}.example.com", "a".repeat(250))),
        ),
        rule(
            "no-operations",
            r(
                json!(["apps"]),
                json!(["v1"]),
                json!([]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "star-and-more",
            r(
                json!(["apps"]),
                json!(["v1"]),
                json!(["*", "CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "patch",
            r(
                json!(["apps"]),
                json!(["v1"]),
                json!(["PATCH"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "no-groups",
            r(
                json!([]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "groups-star-and-more",
            r(
                json!(["*", "apps"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "no-versions",
            r(
                json!(["apps"]),
                json!([]),
                json!(["CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "versions-star-and-more",
            r(
                json!(["apps"]),
                json!(["*", "v1"]),
                json!(["CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "version-empty",
            r(
                json!(["apps"]),
                json!([""]),
                json!(["CREATE"]),
                json!(["deployments"]),
            ),
        ),
        rule(
            "no-resources",
            r(json!(["apps"]), json!(["v1"]), json!(["CREATE"]), json!([])),
        ),
        rule(
            "resource-empty",
            r(
                json!(["apps"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!([""]),
            ),
        ),
        rule(
            "double-star-and-more",
            r(
                json!(["*"]),
                json!(["*"]),
                json!(["CREATE"]),
                json!(["*/*", "pods"]),
            ),
        ),
        rule(
            "star-and-plain",
            r(
                json!(["*"]),
                json!(["*"]),
                json!(["CREATE"]),
                json!(["*", "pods"]),
            ),
        ),
        rule(
            "sub-star-and-sub",
            r(
                json!([""]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["pods/*", "pods/status"]),
            ),
        ),
        rule(
            "star-sub-and-sub",
            r(
                json!([""]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["*/status", "pods/status"]),
            ),
        ),
        rule(
            "subresource-ok",
            r(
                json!([""]),
                json!(["v1"]),
                json!(["CONNECT"]),
                json!(["pods/exec"]),
            ),
        ),
        rule(
            "excluded-one",
            r(
                json!(["authentication.k8s.io"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["tokenreviews"]),
            ),
        ),
        rule(
            "excluded-two-groups",
            r(
                json!(["authentication.k8s.io", "authorization.k8s.io"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!([
                    "selfsubjectreviews",
                    "subjectaccessreviews",
                    "tokenreviews",
                    "selfsubjectrulesreviews"
                ]),
            ),
        ),
        rule(
            "excluded-subresource",
            r(
                json!(["authorization.k8s.io"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["localsubjectaccessreviews/status"]),
            ),
        ),
        rule(
            "excluded-group-star",
            r(
                json!(["*"]),
                json!(["v1"]),
                json!(["CREATE"]),
                json!(["tokenreviews"]),
            ),
        ),
        w(
            "excluded-second-rule",
            "rules",
            json!([inert_rule(), {"apiGroups": ["authorization.k8s.io"], "apiVersions": ["*"], "operations": ["*"], "resources": ["selfsubjectaccessreviews"]}]),
        ),
        w(
            "bad-scope",
            "rules",
            json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"], "scope": "Global"}]),
        ),
        w("bad", "failurePolicy", json!("Never")),
        w("ignore", "failurePolicy", json!("Ignore")),
        w("bad", "matchPolicy", json!("Fuzzy")),
        w("exact", "matchPolicy", json!("Exact")),
        del_m("sideEffects-missing", "webhooks.0.sideEffects"),
        w("empty", "sideEffects", json!("")),
        w("some", "sideEffects", json!("Some")),
        w("unknown", "sideEffects", json!("Unknown")),
        w("dry-run", "sideEffects", json!("NoneOnDryRun")),
        w("0", "timeoutSeconds", json!(0)),
        w("31", "timeoutSeconds", json!(31)),
        w("30", "timeoutSeconds", json!(30)),
        w("negative", "timeoutSeconds", json!(-5)),
        del_m(
            "admissionReviewVersions-missing",
            "webhooks.0.admissionReviewVersions",
        ),
        w("empty", "admissionReviewVersions", json!([])),
        w("duplicate", "admissionReviewVersions", json!(["v1", "v1"])),
        w("unknown", "admissionReviewVersions", json!(["v2"])),
        w("uppercase", "admissionReviewVersions", json!(["V1"])),
        w("beta", "admissionReviewVersions", json!(["v1beta1"])),
        w("one-bad", "admissionReviewVersions", json!(["v1", "bad_v"])),
        del_m("clientConfig-missing", "webhooks.0.clientConfig"),
        w(
            "both",
            "clientConfig",
            json!({"url": "https://h.example.com/", "service": {"namespace": "default", "name": "svc"}}),
        ),
        url("ok", "https://h.example.com:8443/validate"),
        url("http", "http://h.example.com/"),
        url("no-host", "https:///validate"),
        url("opaque", "https:opaque"),
        url("user", "https://user:pw@h.example.com/"),
        url("user-only", "https://user@h.example.com/"),
        url("fragment", "https://h.example.com/#frag"),
        url("query", "https://h.example.com/?a=b"),
        url("force-query", "https://h.example.com/x?"),
        url("bad-port", "https://h.example.com:abc/"),
        url("two-ports", "https://h.example.com:1:2/"),
        url("no-scheme", ":no-scheme"),
        url("relative", "h.example.com/validate"),
        url("space-in-host", "https://h .example.com/"),
        url("bad-escape", "https://h.example.com/%zz"),
        url("ipv6", "https://[::1]:8443/"),
        url("ipv4-literal", "https://[10.0.0.1]/"),
        url("no-bracket", "https://[::1/"),
        url("control", "https://h.example.com/\u{7f}"),
        url("everything-wrong", "ftp://u@/?q#f"),
        service("no-name", json!({"namespace": "default"})),
        service("no-namespace", json!({"name": "svc"})),
        service("port-0", svc(json!({"port": 0}))),
        service("port-70000", svc(json!({"port": 70000}))),
        service("path-empty", svc(json!({"path": ""}))),
        service("path-root", svc(json!({"path": "/"}))),
        service("path-double-slash", svc(json!({"path": "//"}))),
        service("path-no-slash", svc(json!({"path": "validate"}))),
        service("path-empty-segment", svc(json!({"path": "/a//b"}))),
        service("path-bad-segment", svc(json!({"path": "/Bad_Seg/x"}))),
        service("path-trailing-slash", svc(json!({"path": "/ok/"}))),
        service("path-dots", svc(json!({"path": "/a.b/c-d"}))),
        m("duplicate-webhook-names", |o| {
            let mut second = get(o, W).cloned().unwrap_or(Value::Null);
            second["clientConfig"] = json!({"url": "https://h.example.com/"});
            if let Some(hooks) = o.get_mut("webhooks").and_then(Value::as_array_mut) {
                hooks.push(second);
                return true;
            }
            false
        }),
        m("no-webhooks", |o| {
            o["webhooks"] = json!([]);
            true
        }),
        m("webhooks-missing", |o| {
            o.as_object_mut().map(|o| o.remove("webhooks")).is_some()
        }),
        w("always", "reinvocationPolicy", json!("Always")),
        w("if-needed", "reinvocationPolicy", json!("IfNeeded")),
        set_m(
            "static-suffix",
            "metadata.name",
            json!("gen-webhook.static.k8s.io"),
        ),
    ];
    all.extend(selector_mutations("namespaceSelector"));
    all.extend(selector_mutations("objectSelector"));
    all
}

/// The variants: every mutation on a validating and on a mutating configuration.
pub fn variant_cases() -> Vec<Case> {
    let mut all = metadata_mutations();
    all.extend(webhook_match_condition_mutations());
    all.extend(webhook_mutations());
    let mut cases = Vec::new();
    for (short, kind) in [("vwc", VALIDATING), ("mwc", MUTATING)] {
        let base = configuration(kind, &format!("gen-{short}.example.com"));
        for mutation in &all {
            let mut object = base.clone();
            if (mutation.apply)(&mut object) {
                cases.push(Case {
                    id: format!("gen-{short}/{}", mutation.name),
                    object,
                });
            }
        }
    }
    cases
}

/// UPDATE pairs: unchanged match conditions are not compiled again, old expressions compile in
/// the stored environment, and a stored object that already breaks a rule relaxes it (these are
/// written straight into etcd).
pub fn update_cases() -> Vec<UpdateCase> {
    let mut cases = Vec::new();
    for (short, kind) in [("vwc", VALIDATING), ("mwc", MUTATING)] {
        let base = configuration(kind, &format!("upd-{short}.truth.example.com"));
        let with = |f: &dyn Fn(&mut Value)| {
            let mut o = base.clone();
            f(&mut o);
            o
        };
        let bad_condition = json!([{"name": "a", "expression": "object.metadata.name.size() >"}]);
        let id = |s: &str| format!("upd-{short}/{s}");
        cases.push(UpdateCase {
            id: id("same-bad-condition"),
            storage: Storage::Etcd,
            stored: with(&|o| set(o, "webhooks.0.matchConditions", bad_condition.clone())),
            new: with(&|o| {
                set(o, "webhooks.0.matchConditions", bad_condition.clone());
                set(o, "webhooks.0.timeoutSeconds", json!(5));
            }),
        });
        cases.push(UpdateCase {
            id: id("changed-bad-condition"),
            storage: Storage::Etcd,
            stored: with(&|o| set(o, "webhooks.0.matchConditions", bad_condition.clone())),
            new: with(&|o| {
                set(
                    o,
                    "webhooks.0.matchConditions",
                    json!([{"name": "b", "expression": "object.metadata.name.size() >"}]),
                )
            }),
        });
        cases.push(UpdateCase {
            id: id("side-effects-some-kept"),
            storage: Storage::Etcd,
            stored: with(&|o| set(o, "webhooks.0.sideEffects", json!("Some"))),
            new: with(&|o| {
                set(o, "webhooks.0.sideEffects", json!("Unknown"));
                set(o, "webhooks.0.timeoutSeconds", json!(5));
            }),
        });
        cases.push(UpdateCase {
            id: id("side-effects-some-new"),
            storage: Storage::Create,
            stored: base.clone(),
            new: with(&|o| set(o, "webhooks.0.sideEffects", json!("Some"))),
        });
        cases.push(UpdateCase {
            id: id("review-version-unknown-kept"),
            storage: Storage::Etcd,
            stored: with(&|o| set(o, "webhooks.0.admissionReviewVersions", json!(["v2"]))),
            new: with(&|o| set(o, "webhooks.0.admissionReviewVersions", json!(["v3"]))),
        });
        cases.push(UpdateCase {
            id: id("duplicate-names-kept"),
            storage: Storage::Etcd,
            stored: with(&|o| {
                let second = o["webhooks"][0].clone();
                if let Some(h) = o["webhooks"].as_array_mut() {
                    h.push(second);
                }
            }),
            new: with(&|o| {
                let mut second = o["webhooks"][0].clone();
                second["timeoutSeconds"] = json!(3);
                if let Some(h) = o["webhooks"].as_array_mut() {
                    h.push(second);
                }
            }),
        });
        cases.push(UpdateCase {
            id: id("invalid-label-value-kept"),
            storage: Storage::Etcd,
            stored: with(&|o| {
                set(
                    o,
                    "webhooks.0.objectSelector",
                    json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["bad value!"]}]}),
                )
            }),
            new: with(&|o| {
                set(
                    o,
                    "webhooks.0.objectSelector",
                    json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["other bad!"]}]}),
                )
            }),
        });
        cases.push(UpdateCase {
            id: id("stored-expression-environment"),
            storage: Storage::Create,
            stored: with(&|o| {
                set(
                    o,
                    "webhooks.0.matchConditions",
                    json!([{"name": "a", "expression": "object.metadata.name.size() > 0"}]),
                )
            }),
            new: with(&|o| {
                set(
                    o,
                    "webhooks.0.matchConditions",
                    json!([
                        {"name": "a", "expression": "object.metadata.name.size() > 0"},
                        {"name": "b", "expression": "[1].includes(1)"}
                    ]),
                )
            }),
        });
    }
    // Each pair under its own name: the stored objects are all in the cluster at once.
    for case in &mut cases {
        let slug = case.id.replace('/', "-");
        let name = json!(format!("{slug}.truth.example.com"));
        case.stored["metadata"]["name"] = name.clone();
        case.new["metadata"]["name"] = name;
    }
    cases
}
