//! Proof for issue 12 in the cluster: `vapcheck controller` checks MutatingAdmissionPolicies
//! and reports its findings as Events (a MAP has no status), and each finding class is a real
//! mistake on kube-apiserver 1.37.1:
//!
//! 1. for every finding class that a stored MAP can have ([`cases`]: unknown fields, value
//!    types, list vs map, nested `Object.<path>` type names, references to fields the kind
//!    does not have, JSON patch paths, `from`, `op`, `-`, list indexes, `JSONPatch` fields and
//!    values) a MAP with that mistake and its binding are installed, a matching ConfigMap is
//!    created (server-side dry run), and the API server's answer is shown: the request is
//!    denied (`failurePolicy: Fail`) with the error of the mutation, or admitted with the
//!    object mutated wrongly. That the request is mutated at all proves the
//!    MutatingAdmissionPolicy admission plugin is on in the test control plane (it is in the
//!    default-on plugins of k8s.io/kubernetes `pkg/kubeapiserver/options/plugins.go`
//!    `DefaultOffAdmissionPlugins`, and the feature gate `MutatingAdmissionPolicy` is GA and
//!    on since 1.36, `pkg/features/kube_features.go`); vapcheck's Warning Event on the MAP,
//!    naming the expression in `regarding.fieldPath`, appears within 5 s of the MAP's
//!    creation. The classes whose MAP cannot be stored (a result that is not the type the
//!    patch needs; an unknown `JSONPatch` field with a typed value) are shown refused
//!    ([`refused_cases`]);
//! 2. correct MAPs (an apply configuration and a JSON patch) get no Warning Event and mutate
//!    the object as intended;
//! 3. re-checks: the same findings again (a re-check every second) publish no new Event; a fix
//!    gives a Normal `ExpressionWarningsCleared` Event;
//! 4. a CRD field removed → a Warning Event on the MAP that sets it, the MAP untouched.
//!
//! `cargo test --test e2e -- --group map_controller --nocapture` prints the API server's answers and
//! the measured delays.

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::{Vapcheck, apply_yaml, shared_cluster, wait_for};

const NS: &str = "map12-ctl";
/// Issue 12: the finding is an Event within 5 s of the policy's creation.
const EVENT_DELAY: Duration = Duration::from_secs(5);
/// How long vapcheck may take to start watching MAPs, and the admission plugin to load a new
/// policy and binding (its own refresh schedule).
const START: Duration = Duration::from_secs(60);

/// A MAP on ConfigMap creates labelled `map12-ctl: <case>` with one mutation, and its binding.
fn map_and_binding(case: &str, mutation: &str) -> String {
    let name = policy_name(case);
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    objectSelector:
      matchLabels: {{map12-ctl: {case}}}
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["configmaps"]
  mutations:
{mutation}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
"#
    )
}

fn policy_name(case: &str) -> String {
    format!("{case}.map12-ctl.e2e.vapcheck.dev")
}

fn apply_configuration(expression: &str) -> String {
    format!(
        "    - patchType: ApplyConfiguration\n      applyConfiguration:\n        expression: {}\n",
        serde_json::to_string(expression).unwrap_or_default()
    )
}

fn json_patch(expression: &str) -> String {
    format!(
        "    - patchType: JSONPatch\n      jsonPatch:\n        expression: {}\n",
        serde_json::to_string(expression).unwrap_or_default()
    )
}

/// A server-side dry-run create of a ConfigMap labelled for `case` (with `data: {a: b}`, one
/// finalizer and one owner reference, so that the JSON patches of list elements have lists to
/// patch):
/// the object as admission left it, or the API server's message.
async fn request(client: &Client, case: &str) -> anyhow::Result<Result<ConfigMap, String>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("probe-{case}"), "namespace": NS,
                     "labels": {"map12-ctl": case},
                     "finalizers": ["e2e.vapcheck.dev/probe"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                          "uid": "00000000-0000-0000-0000-00000000e2e0"}]},
        "data": {"a": "b"}}))?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &cm).await {
        Ok(stored) => Ok(Ok(stored)),
        Err(kube::Error::Api(s)) => Ok(Err(s.message)),
        Err(e) => Err(e.into()),
    }
}

/// The Events a vapcheck published on the MAP `name` (every vapcheck of this binary's tests
/// when `pid` is `None`; the other test's replica leads its own lease and reports too).
async fn events_by(client: &Client, name: &str, pid: Option<u32>) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().fields(&format!("regarding.name={name}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("MutatingAdmissionPolicy")
        })
        .filter(|e| {
            pid.is_none_or(|pid| {
                e.reporting_instance
                    .as_deref()
                    .is_some_and(|i| i.ends_with(&format!("-{pid}")))
            })
        })
        .collect())
}

fn warnings(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .collect()
}

/// Waits for vapcheck's log to say it watches MAPs.
async fn wait_until_watching(vapcheck: &Vapcheck) -> anyhow::Result<()> {
    wait_for(
        "vapcheck watching MutatingAdmissionPolicies",
        START,
        || async {
            Ok(vapcheck
                .log_text()
                .contains("watching MutatingAdmissionPolicies")
                .then_some(()))
        },
    )
    .await
}

/// A mutation of a MAP: its `patchType` and expression.
#[derive(Clone, Copy)]
enum Patch {
    Apply(&'static str),
    Json(&'static str),
}

impl Patch {
    /// The `spec.mutations` item.
    fn mutation(self) -> String {
        match self {
            Patch::Apply(e) => apply_configuration(e),
            Patch::Json(e) => json_patch(e),
        }
    }

    /// The fieldRef of its expression.
    fn field_path(self) -> &'static str {
        match self {
            Patch::Apply(_) => "spec.mutations[0].applyConfiguration.expression",
            Patch::Json(_) => "spec.mutations[0].jsonPatch.expression",
        }
    }
}

/// A test of the object kube-apiserver admitted.
type ObjectTest = fn(&ConfigMap) -> bool;

/// What kube-apiserver does with a matching request.
#[derive(Clone, Copy)]
enum Consequence {
    /// The request is denied with a message that contains this text.
    Denied(&'static str),
    /// The request is admitted, but the object is mutated wrongly: what is wrong, and a test
    /// of the admitted object that holds when it is.
    Mutated(&'static str, ObjectTest),
}

/// One finding class: the mutation, what vapcheck's Event says, what the API server does.
/// `class` is the name docs/mutating.md gives the class.
struct Case {
    case: &'static str,
    class: &'static str,
    patch: Patch,
    vapcheck: &'static str,
    apiserver: Consequence,
}

/// Every finding class vapcheck's MAP checks can report on a stored MAP (crates/core/src/mutating/schema.rs,
/// the typed environment of crates/core/src/policy), one row each, on ConfigMap creates. The probe object
/// (see [`request`]) has labels, `data: {a: b}`, a finalizer and an owner reference, so that
/// the paths a mistake is about exist up to the mistake.
fn cases() -> Vec<Case> {
    use Consequence::{Denied, Mutated};
    use Patch::{Apply, Json};
    vec![
        Case {
            case: "unknown-field",
            class: "unknown field in `Object{...}`",
            patch: Apply("Object{dataz: {\"k\": \"v\"}}"),
            vapcheck: "undefined field 'dataz'",
            apiserver: Denied(
                "error applying patch: failed to convert patch object to typed object: .dataz: field not declared in schema",
            ),
        },
        Case {
            case: "map-literal-field",
            class: "unknown field as a key of a map literal that stands for an object",
            patch: Apply("Object{metadata: {\"labelz\": {\"k\": \"v\"}}}"),
            vapcheck: "undefined field 'labelz'",
            apiserver: Denied(".metadata.labelz: field not declared in schema"),
        },
        Case {
            case: "value-type",
            class: "wrong value type",
            patch: Apply("Object{immutable: \"yes\"}"),
            vapcheck: "expected type of field 'immutable' is 'bool' but provided type is 'string'",
            apiserver: Denied(
                "error applying patch: failed to convert patch object to typed object: .immutable: expected boolean",
            ),
        },
        Case {
            case: "list-for-map",
            class: "list where the schema has a map",
            patch: Apply("Object{data: [\"x\"]}"),
            vapcheck: "expected type of field 'data' is 'map(string, string)' but provided type is 'list(string)'",
            apiserver: Denied(".data: expected map, got"),
        },
        Case {
            case: "map-for-list",
            class: "map where the schema has a list",
            patch: Apply("Object{metadata: Object.metadata{finalizers: {\"a\": \"b\"}}}"),
            vapcheck: "expected type of field 'finalizers' is 'list(string)' but provided type is 'map(string, string)'",
            apiserver: Denied(".metadata.finalizers: expected list, got"),
        },
        Case {
            case: "object-for-scalar",
            class: "`Object…{}` where the schema has a scalar",
            patch: Apply("Object{immutable: Object.immutable{x: 1}}"),
            vapcheck: "expected type of field 'immutable' is 'bool' but provided type is 'Object.immutable'",
            apiserver: Denied(".immutable: expected boolean, got"),
        },
        Case {
            case: "list-element",
            class: "wrong type of a list element",
            patch: Apply("Object{metadata: Object.metadata{finalizers: [1]}}"),
            vapcheck: "expected type of list element of field 'finalizers' is 'string' but provided type is 'int'",
            apiserver: Denied(".metadata.finalizers[=1]: expected string, got"),
        },
        Case {
            case: "map-value",
            class: "wrong type of a map value",
            patch: Apply("Object{data: {\"k\": 1}}"),
            vapcheck: "expected type of map value of field 'data' is 'string' but provided type is 'int'",
            apiserver: Denied(".data.k: expected string, got"),
        },
        Case {
            case: "type-name",
            class: "nested `Object.<path>{}` type name that is not its field path",
            patch: Apply("Object{metadata: Object.spec{labels: {\"k\": \"v\"}}}"),
            vapcheck: "unexpected type name \"Object.spec\", expected \"Object.metadata\", which matches field name path from root Object type",
            apiserver: Denied(
                "type mismatch: unexpected type name \"Object.spec\", expected \"Object.metadata\", which matches field name path from root Object type",
            ),
        },
        Case {
            case: "type-name-no-field",
            class: "`Object.<path>{}` whose path is no field path of the schema",
            patch: Apply(
                "Object{metadata: object.metadata.name != \"\" ? Object.metdata{labels: {\"k\": \"v\"}} : Object.metdata{}}",
            ),
            vapcheck: "type 'Object.metdata' names no field of the schema: undefined field 'metdata'",
            apiserver: Denied(
                "type mismatch: unexpected type name \"Object.metdata\", expected \"Object.metadata\"",
            ),
        },
        Case {
            case: "typed-reference",
            class: "reference to a field the kind does not have (typed environment)",
            patch: Apply("Object{data: {\"k\": object.dataz}}"),
            vapcheck: "undefined field 'dataz'",
            apiserver: Denied("resulted in error: no such key: dataz"),
        },
        Case {
            case: "patch-path",
            class: "JSON patch path not in the schema",
            patch: Json(
                "[JSONPatch{op: \"add\", path: \"/metadata/labelz\", value: {\"k\": \"v\"}}]",
            ),
            vapcheck: "JSON Patch path \"/metadata/labelz\": undefined field 'labelz'",
            // The patched object is decoded strictly after the mutation (json_patch.go), which
            // the API server reports as an internal error that does not name the policy.
            apiserver: Denied(
                "Internal error occurred: strict decoding error: unknown field \"metadata.labelz\"",
            ),
        },
        Case {
            case: "patch-from",
            class: "JSON patch `from` not in the schema",
            patch: Json(
                "[JSONPatch{op: \"copy\", from: \"/metadata/labelz\", path: \"/metadata/labels\"}]",
            ),
            vapcheck: "JSON Patch from \"/metadata/labelz\": undefined field 'labelz'",
            // json-patch.v4 copies the missing value as null: the labels are gone.
            apiserver: Mutated("the labels are removed", |cm| cm.metadata.labels.is_none()),
        },
        Case {
            case: "patch-field",
            class: "unknown `JSONPatch` field",
            patch: Json(
                "[JSONPatch{op: \"add\", path: \"/metadata/labels/copy\", valu: object.metadata.name}]",
            ),
            vapcheck: "unexpected JSONPatchType field: valu",
            apiserver: Denied("resulted in error: unexpected JSONPatchType field: valu"),
        },
        Case {
            case: "patch-op",
            class: "bad `op`",
            patch: Json("[JSONPatch{op: \"ad\", path: \"/metadata/labels/k\", value: \"v\"}]"),
            vapcheck: "unknown JSON Patch op \"ad\" (one of add, remove, replace, move, copy, test)",
            apiserver: Denied("JSON Patch: Unexpected kind: ad"),
        },
        Case {
            case: "patch-no-op",
            class: "missing `op`",
            patch: Json("[JSONPatch{path: \"/metadata/labels/k\", value: \"v\"}]"),
            vapcheck: "JSONPatch without op (one of add, remove, replace, move, copy, test)",
            apiserver: Denied("JSON Patch: Unexpected kind: "),
        },
        Case {
            case: "patch-relative",
            class: "path that does not start with `/`",
            patch: Json("[JSONPatch{op: \"add\", path: \"metadata/labels/k\", value: \"v\"}]"),
            vapcheck: "JSON Patch path \"metadata/labels/k\" must start with '/' (RFC 6901)",
            apiserver: Denied(
                "JSON Patch: add operation does not apply: doc is missing path: \"metadata/labels/k\"",
            ),
        },
        Case {
            case: "patch-dash-op",
            class: "`-` with an op other than add, move, copy",
            patch: Json(
                "[JSONPatch{op: \"replace\", path: \"/metadata/finalizers/-\", value: \"e2e.vapcheck.dev/x\"}]",
            ),
            vapcheck: "'-' (the end of the list) is only valid as the last segment of an add, move or copy target, not for op \"replace\"",
            apiserver: Denied(
                "JSON Patch: replace operation does not apply: doc is missing key: /metadata/finalizers/-",
            ),
        },
        Case {
            case: "patch-dash-inner",
            class: "`-` not as the last segment",
            patch: Json(
                "[JSONPatch{op: \"add\", path: \"/metadata/ownerReferences/-/name\", value: \"x\"}]",
            ),
            vapcheck: "'-' (the end of the list) is only valid as the last segment of an add, move or copy target, not for op \"add\"",
            apiserver: Denied(
                "JSON Patch: add operation does not apply: doc is missing path: \"/metadata/ownerReferences/-/name\"",
            ),
        },
        Case {
            case: "patch-index",
            class: "list segment that is not an index",
            patch: Json(
                "[JSONPatch{op: \"add\", path: \"/metadata/finalizers/first\", value: \"e2e.vapcheck.dev/x\"}]",
            ),
            vapcheck: "'first' is not an index of a list",
            apiserver: Denied("value was not a proper array index: 'first'"),
        },
        Case {
            case: "patch-below-scalar",
            class: "path below a scalar",
            patch: Json("[JSONPatch{op: \"add\", path: \"/data/a/b\", value: \"x\"}]"),
            vapcheck: "JSON Patch path \"/data/a/b\": 'b' is below a string value, which has no fields",
            apiserver: Denied(
                "JSON Patch: add operation does not apply: doc is missing path: \"/data/a/b\"",
            ),
        },
        Case {
            case: "patch-value-type",
            class: "value of the wrong type at the path",
            patch: Json("[JSONPatch{op: \"add\", path: \"/immutable\", value: \"yes\"}]"),
            vapcheck: "expected type of field 'immutable' is 'bool' but provided type is 'string'",
            apiserver: Denied(
                "Internal error occurred: json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool",
            ),
        },
        Case {
            case: "patch-value-object",
            class: "unknown field in an `Object…{}` value",
            patch: Json(
                "[JSONPatch{op: \"add\", path: \"/metadata\", value: Object.metadata{labelz: {\"k\": \"v\"}}}]",
            ),
            vapcheck: "undefined field 'labelz'",
            apiserver: Denied(
                "Internal error occurred: strict decoding error: unknown field \"metadata.labelz\"",
            ),
        },
    ]
}

/// Finding classes whose MAP the API server refuses to store (it compiles every mutation on
/// create and update, with `object` as `dyn`): vapcheck's create-time verdict
/// (crates/core/src/apiserver/map.rs) and `vapcheck check` report them; the controller never sees such a
/// MAP. The case, the mutation, and the API server's refusal.
fn refused_cases() -> Vec<(&'static str, Patch, &'static str)> {
    vec![
        // A wrong result type: exactly `Object` is required, `dyn` is refused too
        // (k8s.io/apiserver `pkg/admission/plugin/cel/compile.go` `CompileCELExpression`,
        // called by k8s.io/kubernetes `pkg/apis/admissionregistration/validation/
        // validation.go` `validateApplyConfiguration`).
        (
            "result-type",
            Patch::Apply("object.data"),
            "spec.mutations[0].applyConfiguration.expression: Invalid value: \"object.data\": must evaluate to Object but got dyn",
        ),
        // An unknown `JSONPatch` field with a typed value: `JSONPatchType.Field` gives unknown
        // fields a nil type (pkg/cel/mutation/jsonpatch.go), to which cel-go's checker
        // assigns nothing but `dyn` (the computed value of "patch-field" above).
        (
            "patch-field-literal",
            Patch::Json("[JSONPatch{op: \"add\", path: \"/metadata/labels/k\", valu: \"v\"}]"),
            "compilation failed: ERROR: <input>:1:55: expected type of field 'valu' is '' but provided type is 'string'",
        ),
    ]
}

/// Correct MAPs: the case, the mutation, and a test that the admitted object carries the
/// intended mutation.
fn correct_cases() -> Vec<(&'static str, Patch, ObjectTest)> {
    vec![
        (
            "correct",
            Patch::Apply(
                "Object{metadata: Object.metadata{labels: {\"mutated\": \"yes\"}}, data: {\"added\": \"by-map\"}}",
            ),
            |cm| {
                let label = cm.metadata.labels.as_ref().and_then(|l| l.get("mutated"));
                let added = cm.data.as_ref().and_then(|d| d.get("added"));
                label.map(String::as_str) == Some("yes")
                    && added.map(String::as_str) == Some("by-map")
            },
        ),
        (
            "correct-json-patch",
            Patch::Json(
                "[JSONPatch{op: \"add\", path: \"/metadata/finalizers/-\", value: \"e2e.vapcheck.dev/added\"}, \
                 JSONPatch{op: \"add\", path: \"/metadata/labels/\" + jsonpatch.escapeKey(\"e2e.vapcheck.dev/patched\"), value: \"yes\"}]",
            ),
            |cm| {
                let label = cm
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("e2e.vapcheck.dev/patched"));
                label.map(String::as_str) == Some("yes")
                    && cm.metadata.finalizers.as_deref()
                        == Some(
                            &[
                                "e2e.vapcheck.dev/probe".to_owned(),
                                "e2e.vapcheck.dev/added".to_owned(),
                            ][..],
                        )
            },
        ),
    ]
}

async fn map_findings_are_events_and_real_mistakes() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "maps",
        &[
            "--lease-name",
            "vapcheck-e2e-maps",
            "--recheck-period",
            "1s",
        ],
    )?;
    apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"),
    )
    .await?;
    wait_until_watching(&vapcheck).await?;

    // 1. One MAP per finding class.
    for case in cases() {
        let name = policy_name(case.case);
        let created = Instant::now();
        apply_yaml(&client, &map_and_binding(case.case, &case.patch.mutation())).await?;
        let event = wait_for(&format!("{name}: a Warning Event"), EVENT_DELAY, || async {
            Ok(events_by(&client, &name, Some(vapcheck.pid()))
                .await?
                .into_iter()
                .find(|e| {
                    e.type_.as_deref() == Some("Warning")
                        && e.reason.as_deref() == Some("ExpressionWarning")
                }))
        })
        .await?;
        let took = created.elapsed();
        let note = event.note.clone().unwrap_or_default();
        println!(
            "map-controller: {} ({}): Warning Event after {took:?}: {note}",
            case.case, case.class
        );
        let field_path = case.patch.field_path();
        assert_eq!(
            event
                .regarding
                .as_ref()
                .and_then(|r| r.field_path.as_deref()),
            Some(field_path),
            "{event:?}"
        );
        assert!(note.starts_with(field_path), "{note}");
        assert!(note.contains("Kind=ConfigMap"), "{note}");
        assert!(note.contains(case.vapcheck), "{note}");
        assert!(note.len() <= 1024);

        // The API server: the matching create is denied with the mutation's error, or
        // admitted with the object mutated wrongly.
        match case.apiserver {
            Consequence::Denied(expected) => {
                let answer = wait_for(&format!("{name}: the request mutated"), START, || async {
                    Ok(request(&client, case.case).await?.err())
                })
                .await?;
                println!("map-controller: {}: kube-apiserver: {answer}", case.case);
                assert!(answer.contains(expected), "{answer}");
            }
            Consequence::Mutated(what, wrong) => {
                let admitted = wait_for(&format!("{name}: {what}"), START, || async {
                    Ok(match request(&client, case.case).await? {
                        Ok(cm) => wrong(&cm).then_some(cm),
                        Err(message) => bail!("{name}: the request was denied: {message}"),
                    })
                })
                .await?;
                println!(
                    "map-controller: {}: kube-apiserver admitted it, {what}: labels {:?}, data {:?}",
                    case.case, admitted.metadata.labels, admitted.data
                );
            }
        }
    }

    // 1b. Classes whose MAP the API server refuses to store.
    for (case, patch, expected) in refused_cases() {
        let refused = match apply_yaml(&client, &map_and_binding(case, &patch.mutation())).await {
            Ok(_) => bail!("{case}: the API server stored the MAP"),
            Err(e) => format!("{e:#}"),
        };
        println!("map-controller: {case}: kube-apiserver refused the MAP: {refused}");
        assert!(refused.contains(expected), "{refused}");
    }

    // The per-policy metrics name the kind.
    let addr = support::metrics_addr(&vapcheck)?;
    let metrics = support::http_get(&addr, "/metrics")?;
    for case in cases() {
        let series = format!(
            "vapcheck_policy_expression_warnings{{kind=\"MutatingAdmissionPolicy\",policy=\"{}\"}} 1",
            policy_name(case.case)
        );
        assert!(metrics.contains(&series), "no {series} in\n{metrics}");
    }
    // At least the MAPs above (the other test's Gadget MAP may have a warning too).
    let prefix = "vapcheck_policies{kind=\"MutatingAdmissionPolicy\",state=\"warnings\"} ";
    let warned: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no {prefix} in\n{metrics}"))?;
    let stored = cases().len() as f64;
    assert!(
        warned >= stored,
        "{prefix}{warned}, expected at least {stored}"
    );

    // 2. Correct MAPs, one per patch type: each mutates as intended, no Warning Event.
    for (good, patch, intended) in correct_cases() {
        let name = policy_name(good);
        apply_yaml(&client, &map_and_binding(good, &patch.mutation())).await?;
        let mutated = wait_for(&format!("{name}: the object mutated"), START, || async {
            Ok(match request(&client, good).await? {
                Ok(cm) if intended(&cm) => Some(cm),
                Ok(_) => None,
                Err(message) => bail!("the correct MAP {good}'s request was denied: {message}"),
            })
        })
        .await?;
        // Nothing else was changed.
        let data = mutated.data.clone().unwrap_or_default();
        assert_eq!(data.get("a").map(String::as_str), Some("b"));
        let labels = mutated.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("map12-ctl").map(String::as_str), Some(good));
        println!(
            "map-controller: {good}: mutated: labels {:?}, finalizers {:?}, data {:?}",
            mutated.metadata.labels, mutated.metadata.finalizers, mutated.data
        );
        // vapcheck has checked it (its log says so) and published nothing.
        wait_for(&format!("{name}: reconciled"), EVENT_DELAY, || async {
            Ok(vapcheck
                .log_text()
                .lines()
                .any(|l| l.contains("reconciled") && l.contains(&name))
                .then_some(()))
        })
        .await?;
        assert!(
            events_by(&client, &name, None).await?.is_empty(),
            "{:?}",
            events_by(&client, &name, None).await?
        );
    }

    // 3. Re-checks every second give the same findings: still one Warning Event each.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for case in cases() {
        let events = events_by(&client, &policy_name(case.case), Some(vapcheck.pid())).await?;
        let w = warnings(&events);
        assert_eq!(w.len(), 1, "{}: {events:?}", case.case);
        let series = w[0].series.as_ref().map_or(1, |s| s.count);
        assert_eq!(series, 1, "{}: repeated: {:?}", case.case, w[0]);
    }
    // A finding that changes, twice within a minute: each text is a new Warning Event.
    let changing = policy_name("value-type");
    for (value, provided) in [("3", "'int'"), ("[1]", "'list(int)'")] {
        apply_yaml(
            &client,
            &map_and_binding(
                "value-type",
                &apply_configuration(&format!("Object{{immutable: {value}}}")),
            ),
        )
        .await?;
        let expected = format!("provided type is {provided}");
        let changed = wait_for(
            &format!("{changing}: ExpressionWarningChanged with {expected}"),
            EVENT_DELAY,
            || async {
                Ok(events_by(&client, &changing, Some(vapcheck.pid()))
                    .await?
                    .into_iter()
                    .find(|e| {
                        e.reason.as_deref() == Some("ExpressionWarningChanged")
                            && e.note.as_deref().is_some_and(|n| n.contains(&expected))
                    }))
            },
        )
        .await?;
        assert_eq!(changed.type_.as_deref(), Some("Warning"));
        println!("map-controller: value-type changed: {:?}", changed.note);
    }

    // A fix clears: a Normal Event.
    let fixed = policy_name("unknown-field");
    apply_yaml(
        &client,
        &map_and_binding(
            "unknown-field",
            &apply_configuration("Object{data: {\"k\": \"v\"}}"),
        ),
    )
    .await?;
    let cleared = wait_for(&format!("{fixed}: a Normal Event"), EVENT_DELAY, || async {
        Ok(events_by(&client, &fixed, Some(vapcheck.pid()))
            .await?
            .into_iter()
            .find(|e| {
                e.type_.as_deref() == Some("Normal")
                    && e.reason.as_deref() == Some("ExpressionWarningsCleared")
            }))
    })
    .await?;
    println!(
        "map-controller: unknown-field fixed: {:?} {:?}",
        cleared.reason, cleared.note
    );
    Ok(())
}

fn gadget_crd(field: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.map12.e2e.vapcheck.dev
spec:
  group: map12.e2e.vapcheck.dev
  scope: Namespaced
  names: {{plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                {field}: {{type: integer}}
"#
    )
}

const GADGET_MAP: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: gadget-size.map12.e2e.vapcheck.dev
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
      - apiGroups: ["map12.e2e.vapcheck.dev"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["gadgets"]
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: "Object{spec: Object.spec{size: 3}}"
"#;

async fn crd_field_removed_warns_on_the_map_without_touching_it() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "maps-crd",
        &["--lease-name", "vapcheck-e2e-maps-crd"],
    )?;
    let name = "gadget-size.map12.e2e.vapcheck.dev";
    apply_yaml(&client, &gadget_crd("size")).await?;
    // Let the CRD's schema reach /openapi/v3 before the policy exists.
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_until_watching(&vapcheck).await?;
    apply_yaml(&client, GADGET_MAP).await?;
    let api: Api<MutatingAdmissionPolicy> = Api::all(client.clone());
    let generation = api.get(name).await?.metadata.generation;
    wait_for(
        &format!("{name}: checked against Gadget"),
        EVENT_DELAY,
        || async {
            Ok(vapcheck
                .log_text()
                .lines()
                .any(|l| l.contains("reconciled") && l.contains(name))
                .then_some(()))
        },
    )
    .await?;
    if !events_by(&client, name, None).await?.is_empty() {
        bail!(
            "the correct gadget MAP got Events: {:?}",
            events_by(&client, name, None).await?
        );
    }

    let changed = Instant::now();
    apply_yaml(&client, &gadget_crd("count")).await?;
    let event = wait_for(&format!("{name}: a Warning Event"), START, || async {
        Ok(events_by(&client, name, Some(vapcheck.pid()))
            .await?
            .into_iter()
            .find(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("undefined field 'size'"))
            }))
    })
    .await?;
    println!(
        "map-controller: CRD field removed: Warning Event after {:?}: {:?}",
        changed.elapsed(),
        event.note
    );
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.contains("map12.e2e.vapcheck.dev/v1, Kind=Gadget")),
        "{event:?}"
    );
    let after = api.get(name).await.context("reading the MAP")?;
    assert_eq!(after.metadata.generation, generation, "the MAP was touched");
    Ok(())
}

/// A control plane that does not serve MutatingAdmissionPolicies
/// (`--runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false`, and the
/// admission plugin off):
/// vapcheck logs it once, does not fail, and still checks ValidatingAdmissionPolicies.
async fn not_served_is_logged_and_validating_policies_still_work() -> anyhow::Result<()> {
    let cluster = support::Cluster::start(support::UpOptions {
        apiserver_extra_args: Some(
            // Without the plugin off too, kube-apiserver 1.37.1 never becomes ready (the
            // plugin waits for a MAP informer that cannot list).
            "--runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false \
             --disable-admission-plugins=MutatingAdmissionPolicy"
                .to_owned(),
        ),
        ..support::UpOptions::default()
    })?;
    let client = cluster.client().await?;
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let served = discovery.groups().any(|g| {
        g.name() == "admissionregistration.k8s.io"
            && g.versions().any(|v| {
                g.versioned_resources(v)
                    .iter()
                    .any(|(r, _)| r.plural == "mutatingadmissionpolicies")
            })
    });
    assert!(
        !served,
        "the API server still serves mutatingadmissionpolicies"
    );
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "maps-not-served",
        &["--lease-name", "vapcheck-e2e-maps-not-served"],
    )?;
    let name = "still-checked.map12.e2e.vapcheck.dev";
    apply_yaml(
        &client,
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["deployments"]
  validations:
    - expression: "object.replicas > 1"
"#
        ),
    )
    .await?;
    let status = support::wait_for_type_checking(&client, name, START).await?;
    let warnings = status
        .type_checking
        .and_then(|t| t.expression_warnings)
        .unwrap_or_default();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let log = vapcheck.log_text();
    let notes = log
        .matches("the API server does not serve MutatingAdmissionPolicies")
        .count();
    println!("map-controller: not served: logged {notes} time(s); the VAP got its warning");
    assert_eq!(notes, 1, "{log}");
    assert!(!log.contains("watching MutatingAdmissionPolicies"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
    Ok(())
}

/// The `vapcheck.io/ignore` annotation on a MAP (issue 34, item 2): its suppressed finding
/// makes no Event; without the annotation the same MAP gets its Warning Event.
async fn the_ignore_annotation_keeps_a_maps_finding_out_of_events() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "maps-suppress",
        &["--lease-name", "vapcheck-e2e-maps-suppress"],
    )?;
    wait_until_watching(&vapcheck).await?;
    let case = "suppressed";
    let name = policy_name(case);
    let plain = map_and_binding(case, &apply_configuration("Object{dataz: {\"k\": \"v\"}}"));
    let annotated = plain.replacen(
        &format!("  name: {name}\nspec:\n  failurePolicy"),
        &format!(
            "  name: {name}\n  annotations:\n    vapcheck.io/ignore: \"VAP100@spec.mutations[0]\"\n    vapcheck.io/ignore-reason: e2e\nspec:\n  failurePolicy"
        ),
        1,
    );
    assert_ne!(annotated, plain, "the annotation was not added");
    apply_yaml(&client, &annotated).await?;
    let reconciled = || {
        vapcheck
            .log_text()
            .lines()
            .any(|l| l.contains("reconciled") && l.contains(&name))
    };
    wait_for(&format!("{name}: checked"), START, || async {
        Ok(reconciled().then_some(()))
    })
    .await?;
    // Events follow the check at once; give them a moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = events_by(&client, &name, Some(vapcheck.pid())).await?;
    assert_eq!(events.len(), 0, "{events:#?}");

    apply_yaml(&client, &plain).await?;
    let event = wait_for(&format!("{name}: a Warning Event"), START, || async {
        Ok(
            warnings(&events_by(&client, &name, Some(vapcheck.pid())).await?)
                .first()
                .map(|e| (*e).clone()),
        )
    })
    .await?;
    assert!(
        event
            .note
            .as_deref()
            .is_some_and(|n| n.contains("undefined field 'dataz'")),
        "{event:?}"
    );
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio map_findings_are_events_and_real_mistakes,
    tokio crd_field_removed_warns_on_the_map_without_touching_it,
    tokio not_served_is_logged_and_validating_policies_still_work,
    tokio the_ignore_annotation_keeps_a_maps_finding_out_of_events,
}
