//! The ground truth for MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding verdicts
//! (issue 12, part 2), built on `apiserver_truth.rs` (same [`Case`], [`UpdateCase`], sending and
//! comparison):
//!
//! - [`corpus_cases`]: every MutatingAdmissionPolicy and binding document of
//!   `shared/corpus/mutating`, with `apiVersion` set to `admissionregistration.k8s.io/v1` (the
//!   corpus also has v1alpha1 and v1beta1 documents; the fields are the same);
//! - [`variant_cases`]: a deterministic set of variants of three hand-written policies and one
//!   binding, covering every rule of `crates/core/src/apiserver/map.rs` and, through the mutations shared
//!   with the validating cases, metadata, match resources, variables and match conditions;
//! - [`update_cases`]: (stored, new) pairs, some stored straight into etcd.

use std::path::Path;

use serde_json::{Value, json};

use crate::truth::{
    API_VERSION, Case, Excluded, MUTATING_BINDING, MUTATING_POLICY, Mutation, Storage, UpdateCase,
    as_v1_of, corpus_documents, del_m, get, m, match_condition_mutations,
    match_resources_mutations, metadata_mutations, rule, set, set_m, variable_mutations,
};

/// Every MutatingAdmissionPolicy and binding of `corpus/mutating`, in path order (documents of
/// other kinds and groups are skipped; files that do not parse are [`Excluded`]).
pub fn corpus_cases(shared: &Path) -> anyhow::Result<(Vec<Case>, Vec<Excluded>)> {
    corpus_documents(shared, "corpus/mutating", |doc| {
        as_v1_of(MUTATING_POLICY, doc.clone()).or_else(|| as_v1_of(MUTATING_BINDING, doc))
    })
}

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": MUTATING_POLICY, "metadata": {"name": name}, "spec": spec})
}

fn apply_mutation(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

fn json_patch_mutation(expression: &str) -> Value {
    json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}})
}

fn spec(mutations: Value) -> Value {
    json!({
        "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [rule(&["apps"], &["v1"], &["CREATE", "UPDATE"], &["deployments"])]},
        "mutations": mutations,
    })
}

/// The bases: `apply` (an apply configuration), `jsonpatch` (a JSON patch), `params` (a
/// paramKind, a variable, a match condition and both patch types).
fn bases() -> Vec<(&'static str, Value)> {
    let apply = policy(
        "gen-map.example.com",
        spec(json!([apply_mutation(
            "Object{metadata: Object.metadata{labels: {'team': 'a'}}}"
        )])),
    );
    let jsonpatch = policy(
        "gen-map.example.com",
        spec(json!([json_patch_mutation(
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/team'), value: 'a'}]"
        )])),
    );
    let mut params = policy(
        "gen-map.example.com",
        spec(json!([
            apply_mutation("Object{spec: Object.spec{replicas: variables.replicas}}"),
            json_patch_mutation(
                "[JSONPatch{op: 'replace', path: '/spec/paused', value: params.data.paused == 'true'}]"
            ),
        ])),
    );
    params["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    params["spec"]["failurePolicy"] = json!("Ignore");
    params["spec"]["reinvocationPolicy"] = json!("IfNeeded");
    params["spec"]["variables"] =
        json!([{"name": "replicas", "expression": "int(params.data.replicas)"}]);
    params["spec"]["matchConditions"] = json!([{"name": "not-system", "expression": "!object.metadata.namespace.startsWith('kube-')"}]);
    vec![
        ("apply", apply),
        ("jsonpatch", jsonpatch),
        ("params", params),
    ]
}

/// Sets `spec.mutations.0` to an apply configuration with `expression`.
fn apply_expr(name: &str, expression: &str) -> Mutation {
    set_m(
        format!("apply-{name}"),
        "spec.mutations",
        json!([apply_mutation(expression)]),
    )
}

/// Sets `spec.mutations.0` to a JSON patch with `expression`.
fn patch_expr(name: &str, expression: &str) -> Mutation {
    set_m(
        format!("patch-{name}"),
        "spec.mutations",
        json!([json_patch_mutation(expression)]),
    )
}

/// Mutations of the rules of `map.rs`.
fn mutating_policy_mutations() -> Vec<Mutation> {
    vec![
        del_m("reinvocationPolicy-missing", "spec.reinvocationPolicy"),
        set_m(
            "reinvocationPolicy-empty",
            "spec.reinvocationPolicy",
            json!(""),
        ),
        set_m(
            "reinvocationPolicy-always",
            "spec.reinvocationPolicy",
            json!("Always"),
        ),
        set_m(
            "reinvocationPolicy-ifneeded",
            "spec.reinvocationPolicy",
            json!("IfNeeded"),
        ),
        set_m("failurePolicy-empty", "spec.failurePolicy", json!("")),
        set_m("failurePolicy-never", "spec.failurePolicy", json!("Never")),
        del_m("failurePolicy-missing", "spec.failurePolicy"),
        del_m("matchConstraints-missing", "spec.matchConstraints"),
        set_m(
            "resourceRules-empty",
            "spec.matchConstraints.resourceRules",
            json!([]),
        ),
        set_m(
            "operations-delete",
            "spec.matchConstraints.resourceRules.0.operations",
            json!(["DELETE"]),
        ),
        set_m(
            "operations-all-delete-create",
            "spec.matchConstraints.resourceRules.0.operations",
            json!(["CREATE", "DELETE", "*"]),
        ),
        set_m(
            "operations-connect",
            "spec.matchConstraints.resourceRules.0.operations",
            json!(["CONNECT"]),
        ),
        set_m(
            "operations-star",
            "spec.matchConstraints.resourceRules.0.operations",
            json!(["*"]),
        ),
        set_m(
            "operations-two-rules-delete",
            "spec.matchConstraints.resourceRules",
            json!([
                rule(&[""], &["v1"], &["DELETE"], &["pods"]),
                rule(&["apps"], &["v1"], &["UPDATE", "DELETE"], &["deployments"]),
            ]),
        ),
        set_m(
            "exclude-operations-delete",
            "spec.matchConstraints.excludeResourceRules",
            json!([rule(&[""], &["v1"], &["DELETE"], &["pods"])]),
        ),
        set_m("mutations-empty", "spec.mutations", json!([])),
        del_m("mutations-missing", "spec.mutations"),
        set_m("patchType-empty", "spec.mutations.0.patchType", json!("")),
        set_m(
            "patchType-merge",
            "spec.mutations.0.patchType",
            json!("Merge"),
        ),
        m("patchType-swapped", |o| {
            let pt = get(o, "spec.mutations.0.patchType").and_then(Value::as_str);
            let other = if pt == Some("JSONPatch") {
                "ApplyConfiguration"
            } else {
                "JSONPatch"
            };
            set(o, "spec.mutations.0.patchType", json!(other));
            true
        }),
        m("both-patches", |o| {
            set(
                o,
                "spec.mutations.0.applyConfiguration",
                json!({"expression": "Object{}"}),
            );
            set(o, "spec.mutations.0.jsonPatch", json!({"expression": "[]"}));
            true
        }),
        set_m(
            "apply-missing",
            "spec.mutations",
            json!([{"patchType": "ApplyConfiguration"}]),
        ),
        set_m(
            "patch-missing",
            "spec.mutations",
            json!([{"patchType": "JSONPatch"}]),
        ),
        set_m(
            "apply-expression-missing",
            "spec.mutations",
            json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {}}]),
        ),
        set_m(
            "patch-expression-missing",
            "spec.mutations",
            json!([{"patchType": "JSONPatch", "jsonPatch": {}}]),
        ),
        apply_expr("blank", "  \n "),
        patch_expr("blank", "\t"),
        apply_expr("empty-object", "Object{}"),
        apply_expr(
            "nested",
            "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers.item{name: 'c', image: 'i'}]}}}}",
        ),
        apply_expr("inner-type", "Object.spec{replicas: 1}"),
        apply_expr("inner-type-trimmed", "  Object.spec{replicas: 1}\n"),
        apply_expr("dyn", "object"),
        apply_expr("map", "{'spec': {'replicas': 1}}"),
        apply_expr("bool", "true"),
        apply_expr("jsonpatch-list", "[JSONPatch{op: 'remove', path: '/a'}]"),
        apply_expr("request-uid", "request.uid == '' ? Object{} : Object{}"),
        apply_expr(
            "params-undeclared",
            "Object{spec: Object.spec{replicas: params.replicas}}",
        ),
        apply_expr(
            "variables-undefined",
            "Object{spec: Object.spec{replicas: variables.nope}}",
        ),
        apply_expr(
            "authorizer",
            "authorizer.group('apps').resource('deployments').check('get').allowed() ? Object{} : Object{}",
        ),
        apply_expr(
            "old-object",
            "oldObject == null ? Object{} : Object{metadata: Object.metadata{labels: oldObject.metadata.labels}}",
        ),
        apply_expr(
            "namespace-object",
            "Object{metadata: Object.metadata{labels: {'ns': namespaceObject.metadata.name}}}",
        ),
        apply_expr("includes-1.37", "[1, 2].includes(1) ? Object{} : Object{}"),
        apply_expr("syntax", "Object{spec: "),
        apply_expr("unknown-type", "Objects{}"),
        apply_expr(
            "optional-field",
            "Object{?spec: optional.of(Object.spec{replicas: 1})}",
        ),
        apply_expr(
            "escape-key",
            "Object{metadata: Object.metadata{annotations: {jsonpatch.escapeKey('a/b'): 'x'}}}",
        ),
        patch_expr("empty-list", "[]"),
        patch_expr("single", "JSONPatch{op: 'remove', path: '/a'}"),
        patch_expr("object", "Object{}"),
        patch_expr("op-int", "[JSONPatch{op: 1, path: '/a'}]"),
        patch_expr(
            "value-any",
            "[JSONPatch{op: 'add', path: '/a', value: {'b': [1, 'c']}}]",
        ),
        patch_expr("from", "[JSONPatch{op: 'move', from: '/a', path: '/b'}]"),
        patch_expr(
            "escape-int",
            "[JSONPatch{op: 'add', path: '/a/' + jsonpatch.escapeKey(1), value: 1}]",
        ),
        patch_expr("list-map", "[{'op': 'add'}]"),
        patch_expr(
            "unknown-field",
            "[JSONPatch{op: 'add', path: '/a', foo: 1}]",
        ),
        patch_expr(
            "conditional",
            "object.metadata.?labels.orValue({}).size() > 0 ? [JSONPatch{op: 'remove', path: '/metadata/labels'}] : []",
        ),
        patch_expr(
            "includes-1.37",
            "[1, 2].includes(1) ? [JSONPatch{op: 'remove', path: '/a'}] : []",
        ),
        m("variable-object-type", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "v", "expression": "Object.spec{}"}]),
            );
            true
        }),
        m("variable-jsonpatch-type", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "v", "expression": "[JSONPatch{op: 'remove', path: '/a'}]"}]),
            );
            true
        }),
        m("variable-used", |o| {
            set(
                o,
                "spec.variables",
                json!([{"name": "labels", "expression": "{'team': 'a'}"}]),
            );
            set(
                o,
                "spec.mutations",
                json!([apply_mutation(
                    "Object{metadata: Object.metadata{labels: variables.labels}}"
                )]),
            );
            true
        }),
        m("two-mutations-bad", |o| {
            set(
                o,
                "spec.mutations",
                json!([apply_mutation("Object.spec{}"), json_patch_mutation("[1]"), {"patchType": "Strategic"}]),
            );
            true
        }),
        set_m(
            "paramKind-no-apiVersion",
            "spec.paramKind",
            json!({"kind": "ConfigMap"}),
        ),
        m("matchCondition-patch-type", |o| {
            set(
                o,
                "spec.matchConditions",
                json!([{"name": "a", "expression": "Object{} == Object{}"}]),
            );
            true
        }),
        m("matchCondition-variables", |o| {
            set(
                o,
                "spec.matchConditions",
                json!([{"name": "a", "expression": "variables.replicas > 1"}]),
            );
            true
        }),
        set_m(
            "name-static",
            "metadata.name",
            json!("gen-map.static.k8s.io"),
        ),
    ]
}

/// Mutations of the binding rules of `map.rs`.
fn mutating_binding_mutations() -> Vec<Mutation> {
    let mr = |name: &str, value: Value| {
        set_m(
            format!("matchResources-{name}"),
            "spec.matchResources",
            value,
        )
    };
    vec![
        del_m("policyName-missing", "spec.policyName"),
        set_m("policyName-empty", "spec.policyName", json!("")),
        set_m("policyName-bad", "spec.policyName", json!("Bad_Name")),
        set_m("spec-empty", "spec", json!({})),
        del_m("paramRef-missing", "spec.paramRef"),
        set_m("paramRef-empty", "spec.paramRef", json!({})),
        set_m(
            "paramRef-name-and-selector",
            "spec.paramRef",
            json!({"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"}),
        ),
        set_m(
            "paramRef-action-bad",
            "spec.paramRef",
            json!({"name": "a", "parameterNotFoundAction": "Maybe"}),
        ),
        set_m(
            "paramRef-name-bad",
            "spec.paramRef",
            json!({"name": "a/b", "parameterNotFoundAction": "Allow"}),
        ),
        mr(
            "operations-delete",
            json!({"resourceRules": [rule(&[""], &["v1"], &["DELETE"], &["pods"])]}),
        ),
        mr(
            "operations-connect",
            json!({"resourceRules": [rule(&[""], &["v1"], &["CONNECT"], &["pods/exec"])]}),
        ),
        mr(
            "operations-two-rules",
            json!({"resourceRules": [rule(&[""], &["v1"], &["DELETE", "CREATE"], &["pods"]), rule(&[""], &["v1"], &["DELETE"], &["services"])]}),
        ),
        mr(
            "exclude-delete",
            json!({"excludeResourceRules": [rule(&[""], &["v1"], &["DELETE"], &["pods"])]}),
        ),
        mr("matchPolicy-bad", json!({"matchPolicy": "Fuzzy"})),
        mr("empty", json!({})),
        mr(
            "selector-bad",
            json!({"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}),
        ),
        set_m(
            "name-static",
            "metadata.name",
            json!("gen-mapb.static.k8s.io"),
        ),
    ]
}

/// The generated variants, in a fixed order.
pub fn variant_cases() -> Vec<Case> {
    let bases = bases();
    let mut cases = Vec::new();
    let mut all = metadata_mutations();
    all.extend(match_resources_mutations("spec.matchConstraints"));
    all.extend(variable_mutations());
    all.extend(match_condition_mutations());
    let shared = all.len();
    all.extend(mutating_policy_mutations());
    for (i, mutation) in all.iter().enumerate() {
        for (short, base) in &bases {
            // The mutations shared with validating policies once (on the apply base), except
            // those about expressions (variables, match conditions), which depend on params.
            let expression_related = mutation.name.starts_with("variables-")
                || mutation.name.starts_with("matchConditions-");
            if i < shared && *short != "apply" && !(expression_related && *short == "params") {
                continue;
            }
            let mut object = base.clone();
            if (mutation.apply)(&mut object) {
                cases.push(Case {
                    id: format!("gen-map/{short}/{}", mutation.name),
                    object,
                });
            }
        }
    }
    let binding = json!({
        "apiVersion": API_VERSION, "kind": MUTATING_BINDING, "metadata": {"name": "gen-mapb.example.com"},
        "spec": {"policyName": "gen-map.example.com",
                 "paramRef": {"name": "p", "namespace": "default", "parameterNotFoundAction": "Deny"},
                 "matchResources": {"resourceRules": [rule(&["apps"], &["v1"], &["CREATE"], &["deployments"])]}}
    });
    let mut binding_mutations = metadata_mutations();
    binding_mutations.extend(match_resources_mutations("spec.matchResources"));
    binding_mutations.extend(mutating_binding_mutations());
    for mutation in &binding_mutations {
        let mut object = binding.clone();
        if (mutation.apply)(&mut object) {
            cases.push(Case {
                id: format!("gen-mapb/{}", mutation.name),
                object,
            });
        }
    }
    cases
}

/// (stored, new) pairs. Names are unique per pair (stored objects stay in the cluster).
pub fn update_cases() -> Vec<UpdateCase> {
    const INCLUDES_APPLY: &str = "[1, 2].includes(1) ? Object{} : Object{}";
    const INCLUDES_PATCH: &str = "[1, 2].includes(1) ? [JSONPatch{op: 'remove', path: '/a'}] : []";
    let mut out = Vec::new();
    let mut pair = |id: &str, storage: Storage, stored: Value, new: Value| {
        let name = format!("update-map-{}", id.to_lowercase());
        let mut stored = stored;
        let mut new = new;
        stored["metadata"]["name"] = json!(name);
        new["metadata"]["name"] = json!(name);
        out.push(UpdateCase {
            id: format!("map-{id}"),
            storage,
            stored,
            new,
        });
    };
    let label = |mut o: Value| {
        o["metadata"]["labels"] = json!({"changed": "yes"});
        o
    };
    let with = |mutations: Value| policy("x", spec(mutations));

    let good = with(json!([apply_mutation("Object{}")]));
    pair(
        "relabelled",
        Storage::Create,
        good.clone(),
        label(good.clone()),
    );
    let mut bad_reinvocation = good.clone();
    bad_reinvocation["spec"]["reinvocationPolicy"] = json!("Always");
    pair(
        "reinvocation-bad",
        Storage::Create,
        good.clone(),
        bad_reinvocation.clone(),
    );
    pair(
        "stored-reinvocation-bad-unchanged",
        Storage::Etcd,
        bad_reinvocation.clone(),
        label(bad_reinvocation),
    );

    // Apply configurations: the stored environment for unchanged expressions.
    let stored = with(json!([apply_mutation(INCLUDES_APPLY)]));
    pair(
        "apply-includes-unchanged",
        Storage::Etcd,
        stored.clone(),
        label(stored.clone()),
    );
    pair(
        "apply-includes-changed",
        Storage::Etcd,
        stored.clone(),
        with(json!([apply_mutation(
            "[1, 2, 3].includes(1) ? Object{} : Object{}"
        )])),
    );
    // JSON patches are looked up among the stored apply configurations.
    let stored = with(json!([json_patch_mutation(INCLUDES_PATCH)]));
    pair(
        "patch-includes-unchanged",
        Storage::Etcd,
        stored.clone(),
        label(stored),
    );
    pair(
        "patch-includes-stored-as-apply",
        Storage::Etcd,
        with(json!([apply_mutation(INCLUDES_PATCH)])),
        with(json!([json_patch_mutation(INCLUDES_PATCH)])),
    );
    // Variables are looked up among the stored validations (none for a mutating policy).
    let mut stored = good.clone();
    stored["spec"]["variables"] = json!([{"name": "v", "expression": "[1, 2].includes(1)"}]);
    pair(
        "variable-includes-unchanged",
        Storage::Etcd,
        stored.clone(),
        label(stored),
    );
    // Match conditions: skipped while neither they nor paramKind change.
    let mut stored = good.clone();
    stored["spec"]["matchConditions"] = json!([{"name": "a", "expression": "1"}]);
    pair(
        "matchConditions-bad-unchanged",
        Storage::Etcd,
        stored.clone(),
        label(stored.clone()),
    );
    let mut new = stored.clone();
    new["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    pair(
        "matchConditions-bad-paramKind-added",
        Storage::Etcd,
        stored.clone(),
        new,
    );
    let mut stored_inc = good.clone();
    stored_inc["spec"]["matchConditions"] =
        json!([{"name": "a", "expression": "[1, 2].includes(1)"}]);
    let mut new = stored_inc.clone();
    new["spec"]["matchConditions"] = json!([{"name": "a", "expression": "[1, 2].includes(1)"}, {"name": "b", "expression": "true"}]);
    pair(
        "matchConditions-includes-kept-one-added",
        Storage::Etcd,
        stored_inc,
        new,
    );

    // Bindings: update validation equals create validation without the static suffix rule.
    let binding = json!({
        "apiVersion": API_VERSION, "kind": MUTATING_BINDING, "metadata": {"name": "x"},
        "spec": {"policyName": "p", "paramRef": {"name": "a", "parameterNotFoundAction": "Deny"}}
    });
    pair(
        "binding-relabelled",
        Storage::Create,
        binding.clone(),
        label(binding.clone()),
    );
    let mut b_bad = binding.clone();
    b_bad["spec"]["matchResources"] =
        json!({"resourceRules": [rule(&[""], &["v1"], &["DELETE"], &["pods"])]});
    pair(
        "binding-delete-rule",
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
    // A name ending in .static.k8s.io is refused on create only.
    let mut stored_static = binding.clone();
    stored_static["metadata"]["name"] = json!("update-map-binding.static.k8s.io");
    out.push(UpdateCase {
        id: "map-binding-static-name".into(),
        storage: Storage::Etcd,
        stored: stored_static.clone(),
        new: label(stored_static),
    });
    out
}
