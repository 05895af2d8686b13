//! One test per rule; each names the upstream code it follows (`k8s.io/apiserver` v0.37.1,
//! `pkg/admission/plugin/policy/`).

use serde_json::{Value, json};

use super::*;

fn policy(spec: Value) -> ValidatingAdmissionPolicy {
    let mut s = json!({
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["configmaps"]}]},
        "validations": [{"expression": "true"}]
    });
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"}, "spec": s
    }))
    .unwrap()
}

fn binding(spec: Value) -> ValidatingAdmissionPolicyBinding {
    let mut s = json!({"policyName": "p", "validationActions": ["Deny"]});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"}, "spec": s
    }))
    .unwrap()
}

fn cm(ns: Option<&str>, name: &str, labels: &[(&str, &str)]) -> ParamObject {
    ParamObject {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        namespace: ns.map(Into::into),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

const CM_KIND: &str = r#"{"apiVersion": "v1", "kind": "ConfigMap"}"#;

fn run_with(
    p: &ValidatingAdmissionPolicy,
    scope: ParamScope,
    warnings: Vec<Gvk>,
    b: &ValidatingAdmissionPolicyBinding,
    params: &[ParamObject],
) -> BindingReport {
    let policies = [PolicyInput {
        policy: p,
        stored: true,
        warning_kinds: warnings,
        param_scope: scope,
    }];
    let bindings = [BindingInput {
        binding: b,
        stored: true,
    }];
    analyse(&policies, &bindings, params).remove(0)
}

fn run(p: Value, b: Value, params: &[ParamObject]) -> BindingReport {
    run_with(
        &policy(p),
        ParamScope::Namespaced,
        Vec::new(),
        &binding(b),
        params,
    )
}

fn param_policy() -> Value {
    json!({"paramKind": serde_json::from_str::<Value>(CM_KIND).unwrap()})
}

#[test]
fn verdict_names_are_the_documented_ones() {
    assert_eq!(
        Verdict::DeniesAllMatching.to_string(),
        "denies all matching requests"
    );
    assert_eq!(Verdict::Inactive.to_string(), "inactive");
    assert_eq!(Verdict::Evaluates.to_string(), "evaluates");
    assert_eq!(
        Verdict::EvaluatesWithWarnings(vec![
            Gvk::new("apps", "v1", "Deployment"),
            Gvk::new("", "v1", "Pod")
        ])
        .to_string(),
        "evaluates with warnings on kinds apps/v1 Deployment, v1 Pod"
    );
}

/// generic/policy_source.go `calculatePolicyData`: "Just skip bindings that refer to
/// non-existent policies".
#[test]
fn missing_policy_is_inactive() {
    let p = policy(json!({}));
    let b = binding(json!({"policyName": "nope"}));
    let policies = [PolicyInput {
        policy: &p,
        stored: true,
        warning_kinds: vec![],
        param_scope: ParamScope::Unknown,
    }];
    let r = analyse(
        &policies,
        &[BindingInput {
            binding: &b,
            stored: true,
        }],
        &[],
    )
    .remove(0);
    assert_eq!(r.verdict, Verdict::Inactive);
    assert!(!r.policy_exists);
    assert_eq!(
        r.reason,
        "binding \"b\" of policy \"nope\": no ValidatingAdmissionPolicy of that name is in the input; kube-apiserver skips bindings whose policy does not exist, so the binding does nothing"
    );
    // a policy the API server rejects on create does not exist either
    let policies = [PolicyInput {
        stored: false,
        ..policies[0].clone()
    }];
    let b = binding(json!({}));
    let r = analyse(
        &policies,
        &[BindingInput {
            binding: &b,
            stored: true,
        }],
        &[],
    )
    .remove(0);
    assert_eq!(r.verdict, Verdict::Inactive);
    assert!(r.reason.contains("rejects it on create"), "{}", r.reason);
}

/// A binding the API server rejects on create is never stored.
#[test]
fn rejected_binding_is_inactive() {
    let p = policy(json!({}));
    let b = binding(json!({}));
    let policies = [PolicyInput {
        policy: &p,
        stored: true,
        warning_kinds: vec![],
        param_scope: ParamScope::Unknown,
    }];
    let r = analyse(
        &policies,
        &[BindingInput {
            binding: &b,
            stored: false,
        }],
        &[],
    );
    assert_eq!(r[0].verdict, Verdict::Inactive);
}

/// validating/dispatcher.go `Dispatch`: no params needed, expressions run; failures act per
/// validationActions.
#[test]
fn plain_binding_evaluates() {
    let r = run(
        json!({}),
        json!({"validationActions": ["Warn", "Audit"]}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert_eq!(r.overlap, Some(Overlap::Overlaps));
    assert_eq!(
        r.reason,
        "binding \"b\" of policy \"p\": evaluates the policy's expressions for the requests it matches; failed validations return a warning and are recorded in the audit log"
    );
}

/// The policy's type-checking warnings carry over to the verdict.
#[test]
fn warnings_make_evaluates_with_warnings() {
    let k = vec![Gvk::new("", "v1", "ConfigMap")];
    let r = run_with(
        &policy(json!({})),
        ParamScope::Namespaced,
        k.clone(),
        &binding(json!({})),
        &[],
    );
    assert_eq!(r.verdict, Verdict::EvaluatesWithWarnings(k));
    assert!(r.reason.contains("type-checking warnings on v1 ConfigMap"));
}

/// generic/policy_dispatcher.go `CollectParams`: a name that resolves to nothing with
/// `parameterNotFoundAction: Deny` is the error "no params found for policy binding with
/// `Deny` parameterNotFoundAction"; dispatcher.go `addConfigError` with failurePolicy Fail
/// denies whatever the validationActions.
#[test]
fn param_not_found_with_deny_denies_all() {
    let b = json!({"validationActions": ["Warn"],
        "paramRef": {"name": "x", "namespace": "y", "parameterNotFoundAction": "Deny"}});
    let r = run(param_policy(), b.clone(), &[cm(Some("other"), "x", &[])]);
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert!(
        r.reason.starts_with("binding \"b\" of policy \"p\": paramRef name \"x\" in namespace \"y\" matches no ConfigMap and parameterNotFoundAction is Deny, and failurePolicy is Fail"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("validationActions [Warn] do not apply"));
    assert_eq!(
        r.denial_message.as_deref(),
        Some(
            "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    // failurePolicy Ignore drops the configuration error
    let mut p = param_policy();
    p["failurePolicy"] = json!("Ignore");
    let r = run(p, b, &[]);
    assert_eq!(r.verdict, Verdict::Inactive);
    assert_eq!(r.denial_message, None);
}

/// `CollectParams`: with Allow (or unset) an empty result means no invocation at all.
#[test]
fn param_not_found_with_allow_is_inactive() {
    let r = run(
        param_policy(),
        json!({"paramRef": {"name": "x", "namespace": "y", "parameterNotFoundAction": "Allow"}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::Inactive);
    assert!(
        r.reason.contains("parameterNotFoundAction is Allow"),
        "{}",
        r.reason
    );
}

/// `CollectParams`: the named param in paramRef.namespace is found; one evaluation per param.
#[test]
fn param_found_by_name_evaluates() {
    let r = run(
        param_policy(),
        json!({"paramRef": {"name": "x", "namespace": "y", "parameterNotFoundAction": "Deny"}}),
        &[cm(Some("y"), "x", &[]), cm(Some("z"), "x", &[])],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert_eq!(r.params, ["y/x"]);
}

/// `CollectParams`: a selector lists every matching param (empty selector: all of them).
#[test]
fn param_selector_lists_matching_params() {
    let params = [
        cm(Some("y"), "a", &[("use", "yes")]),
        cm(Some("y"), "b", &[("use", "no")]),
        cm(Some("y"), "c", &[]),
    ];
    let r = run(
        param_policy(),
        json!({"paramRef": {"namespace": "y", "selector": {"matchLabels": {"use": "yes"}},
            "parameterNotFoundAction": "Deny"}}),
        &params,
    );
    assert_eq!(r.params, ["y/a"]);
    let r = run(
        param_policy(),
        json!({"paramRef": {"namespace": "y", "selector": {}, "parameterNotFoundAction": "Deny"}}),
        &params,
    );
    assert_eq!(r.params, ["y/a", "y/b", "y/c"]);
    assert_eq!(r.verdict, Verdict::Evaluates);
}

/// `CollectParams` / `LabelSelectorAsSelector`: a selector that does not parse is a
/// configuration error.
#[test]
fn unparsable_param_selector_is_a_configuration_error() {
    let r = run(
        param_policy(),
        json!({"paramRef": {"namespace": "y", "selector": {"matchExpressions": [
            {"key": "a", "operator": "Equals", "values": ["b"]}]}, "parameterNotFoundAction": "Deny"}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert!(
        r.reason
            .contains("\"Equals\" is not a valid label selector operator"),
        "{}",
        r.reason
    );
}

/// `CollectParams`: an empty paramRef.namespace for a namespaced kind uses the request's
/// namespace; cluster-scoped requests fail.
#[test]
fn namespaced_param_without_namespace_uses_the_requests() {
    let r = run(
        param_policy(),
        json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Deny"}}),
        &[cm(Some("a"), "x", &[]), cm(None, "x", &[])],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert!(
        r.reason.contains("found in namespaces a, default"),
        "{}",
        r.reason
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("cannot use namespaced paramRef"))
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("requests in other namespaces"))
    );
    // nowhere: denies
    let r = run(
        param_policy(),
        json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Deny"}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    // rules limited to namespaced scope: no note about cluster-scoped requests
    let mut p = param_policy();
    p["matchConstraints"] = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["configmaps"], "scope": "Namespaced"}]});
    let r = run(
        p,
        json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}}),
        &[cm(Some("a"), "x", &[])],
    );
    assert!(
        !r.notes
            .iter()
            .any(|n| n.contains("cannot use namespaced paramRef"))
    );
}

/// `CollectParams`: "paramRef.namespace must not be provided for a cluster-scoped
/// `paramKind`".
#[test]
fn namespace_on_cluster_scoped_param_is_a_configuration_error() {
    let r = run_with(
        &policy(param_policy()),
        ParamScope::Cluster,
        vec![],
        &binding(
            json!({"paramRef": {"name": "x", "namespace": "y", "parameterNotFoundAction": "Allow"}}),
        ),
        &[],
    );
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert!(
        r.denial_message
            .unwrap()
            .ends_with("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    );
}

/// `CollectParams`: "Policy ParamKind is set, but binding does not use it. Validate with nil
/// params".
#[test]
fn param_kind_without_param_ref_evaluates_with_null_params() {
    let r = run(param_policy(), json!({}), &[]);
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert!(r.notes[0].contains("params null"), "{:?}", r.notes);
}

/// `CollectParams`: "ParamKind is unset. Ignore any globalParamRef or namespaceParamRef".
#[test]
fn param_ref_without_param_kind_is_ignored() {
    let r = run(
        json!({}),
        json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Deny"}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert!(r.notes[0].contains("paramRef is ignored"), "{:?}", r.notes);
}

/// policy_source.go `ensureParamsForPolicyLocked`: an unknown param kind is the hook's
/// ConfigurationError, "failed to configure policy" for every request the policy matches.
#[test]
fn unknown_param_kind_fails_the_policy() {
    let r = run_with(
        &policy(json!({"paramKind": {"apiVersion": "example.com/v1", "kind": "Nope"}})),
        ParamScope::NoSuchKind,
        vec![],
        &binding(json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}})),
        &[],
    );
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert_eq!(
        r.denial_message.as_deref(),
        Some(
            "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nope'"
        )
    );
}

/// policy_matcher.go `BindingMatches` + matching.go `Matches`: a binding whose rules share
/// no request with the policy's does nothing.
#[test]
fn disjoint_match_resources_is_inactive() {
    let r = run(
        json!({}),
        json!({"matchResources": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::Inactive);
    assert!(r.reason.contains("differ in resources"), "{}", r.reason);
    // selectors: evaluates, but only for labelled requests
    let r = run(
        json!({}),
        json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}),
        &[],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert!(
        r.reason.contains("(only for requests whose labels match its matchResources.namespaceSelector, which is undecidable offline)"),
        "{}",
        r.reason
    );
}

/// Params are compared by group and kind (the informer serves one object in every version),
/// never by other kinds of the same name.
#[test]
fn params_of_other_kinds_do_not_count() {
    let mut secret = cm(Some("y"), "x", &[]);
    secret.kind = "Secret".into();
    let r = run(
        param_policy(),
        json!({"paramRef": {"name": "x", "namespace": "y", "parameterNotFoundAction": "Deny"}}),
        &[secret],
    );
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert_eq!(
        r.notes,
        [
            "v1 Secret \"y/x\" is in the input, but the policy's paramKind is v1 ConfigMap: it is not a param of this binding"
        ]
    );
}

/// An unknown scope is assumed from paramRef.namespace and said in a note.
#[test]
fn unknown_scope_is_assumed_and_noted() {
    let r = run_with(
        &policy(param_policy()),
        ParamScope::Unknown,
        vec![],
        &binding(json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}})),
        &[cm(None, "x", &[])],
    );
    assert_eq!(r.verdict, Verdict::Evaluates);
    assert!(
        r.notes[0].contains("assumed cluster-scoped"),
        "{:?}",
        r.notes
    );
}

/// `CollectParams`: a namespaced param kind without paramRef.namespace, for a binding that
/// matches only cluster-scoped requests: "cannot use namespaced paramRef in policy binding
/// that matches cluster-scoped resources" on every request. Namespace objects carry their own
/// name as namespace, so a rule that can match them does not count.
#[test]
fn namespaced_param_for_cluster_scoped_requests_denies() {
    let mut p = param_policy();
    p["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["rbac.authorization.k8s.io"],
        "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["clusterroles"],
        "scope": "Cluster"}]});
    let b = json!({"paramRef": {"name": "x", "parameterNotFoundAction": "Allow"}});
    let r = run(p.clone(), b.clone(), &[cm(Some("a"), "x", &[])]);
    assert_eq!(r.verdict, Verdict::DeniesAllMatching);
    assert_eq!(
        r.denial_message.as_deref(),
        Some(
            "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: failed to configure binding: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
        )
    );
    p["matchConstraints"]["resourceRules"][0]["resources"] = json!(["clusterroles", "namespaces"]);
    let r = run(p, b, &[cm(Some("a"), "x", &[])]);
    assert_eq!(r.verdict, Verdict::Evaluates);
}

mod proptests {
    use proptest::prelude::*;

    use super::*;

    fn word() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9./*!_ -]{0,8}"
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Any binding (selectors with unknown operators or bad keys, odd names, scopes,
        /// actions) against any policy and params: no panic, one report per binding, and the
        /// reason names the binding.
        #[test]
        fn analysis_never_panics(
            op in prop_oneof![Just("In".to_string()), Just("Exists".to_string()), word()],
            key in word(), value in word(), name in word(), ns in word(),
            api_version in prop_oneof![Just("v1".to_string()), Just("a/b/c".to_string()), word()],
            pnfa in prop_oneof![Just("Allow".to_string()), Just("Deny".to_string()), word()],
            scope in prop_oneof![Just(ParamScope::Namespaced), Just(ParamScope::Cluster),
                                 Just(ParamScope::NoSuchKind), Just(ParamScope::Unknown)],
            resource in prop_oneof![Just("*".to_string()), Just("pods/*".to_string()), word()],
            rule_scope in prop_oneof![Just("Cluster".to_string()), Just("Namespaced".to_string()), word()],
            use_selector in any::<bool>(), failure in prop_oneof![Just("Ignore"), Just("Fail")],
        ) {
            let p = policy(json!({
                "failurePolicy": failure,
                "paramKind": {"apiVersion": api_version, "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": [resource], "scope": rule_scope}],
                    "namespaceSelector": {"matchExpressions": [{"key": key, "operator": op, "values": [value]}]}}
            }));
            let param_ref = if use_selector {
                json!({"namespace": ns, "parameterNotFoundAction": pnfa,
                       "selector": {"matchExpressions": [{"key": key, "operator": op}]}})
            } else {
                json!({"name": name, "namespace": ns, "parameterNotFoundAction": pnfa})
            };
            let b = binding(json!({"paramRef": param_ref, "validationActions": [name.clone()],
                "matchResources": {"objectSelector": {"matchLabels": {key.clone(): value.clone()}},
                    "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": [op],
                        "resources": [resource], "scope": rule_scope}]}}));
            let params = [cm(Some(&ns), &name, &[(&key, &value)]), cm(None, &name, &[])];
            let r = run_with(&p, scope, vec![Gvk::new("", "v1", "ConfigMap")], &b, &params);
            prop_assert!(r.reason.starts_with("binding \"b\" of policy \"p\""), "{}", r.reason);
        }
    }
}

/// MutatingAdmissionPolicyBindings: the same generic rules; a configuration error is reported
/// by `generic/policy_dispatcher.go` `Dispatch` (`PolicyError.Error`), not by a validating
/// dispatcher, and a binding that passes applies mutations. `e2e_map_binding_verdicts` shows
/// these messages on kube-apiserver 1.37.1.
#[test]
fn mutating_bindings_use_the_generic_dispatchers_messages() {
    let map: MutatingAdmissionPolicy = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "m"},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["configmaps"]}]},
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{}"}}]
        }
    }))
    .unwrap();
    let mapb = |name: &str, policy: &str, param: &str| -> MutatingAdmissionPolicyBinding {
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": policy, "paramRef": {"name": param, "namespace": "ns",
                "parameterNotFoundAction": "Deny"}}
        }))
        .unwrap()
    };
    let (missing, found, orphan) = (
        mapb("missing", "m", "absent"),
        mapb("found", "m", "limits"),
        mapb("orphan", "nope", "limits"),
    );
    let policies = [MutatingPolicyInput {
        policy: &map,
        stored: true,
        warning_kinds: Vec::new(),
        param_scope: ParamScope::Namespaced,
    }];
    let bindings: Vec<MutatingBindingInput<'_>> = [&missing, &found, &orphan]
        .into_iter()
        .map(|b| MutatingBindingInput {
            binding: b,
            stored: true,
        })
        .collect();
    let reports = analyse_mutating(&policies, &bindings, &[cm(Some("ns"), "limits", &[])]);
    assert_eq!(reports[0].verdict, Verdict::DeniesAllMatching);
    assert_eq!(
        reports[0].denial_message.as_deref(),
        Some(
            "policy 'm' with binding 'missing' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    );
    assert!(
        !reports[0].reason.contains("validationActions"),
        "{}",
        reports[0].reason
    );
    assert_eq!(reports[1].verdict, Verdict::Evaluates);
    assert!(
        reports[1]
            .reason
            .contains("applies the policy's mutations once per param"),
        "{}",
        reports[1].reason
    );
    assert_eq!(reports[2].verdict, Verdict::Inactive);
    assert!(
        reports[2]
            .reason
            .contains("no MutatingAdmissionPolicy of that name"),
        "{}",
        reports[2].reason
    );
}
