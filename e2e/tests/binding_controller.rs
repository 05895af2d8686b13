//! Proof for issue 13 in the cluster: `vapcheck controller` watches bindings and the param kind
//! they need, and its `BindingsEffective` condition on the policy says what the real
//! kube-apiserver 1.37.1 does with a matching request:
//!
//! 1. a binding whose `paramRef` names a ConfigMap that does not exist, with
//!    `parameterNotFoundAction: Deny`: the condition says the binding denies every request it
//!    matches, with the API server's message, a Warning Event is on the binding, and a
//!    matching request is denied with exactly that message;
//! 2. the ConfigMap is created: within 5 s the condition says the binding evaluates, and the
//!    policy's validation decides (a request it accepts is admitted, one it rejects denied);
//! 3. a policy without bindings says so; a binding that selects nothing the policy matches is
//!    inactive, and a request its policy would reject is admitted;
//! 4. `vapcheck_bindings{verdict}` counts them;
//! 5. a binding whose policy does not exist (created so, or its policy deleted) gets an
//!    `Inactive` Warning Event within 5 s (kube-apiserver skips it: `e2e_binding_verdicts`).
//!
//! `cargo test --test e2e -- --group binding_controller --nocapture` prints the measured delays.

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::json;
use support::{Vapcheck, apply_yaml, shared_cluster, wait_for};

const NS: &str = "bind13-ctl";
const POLICY: &str = "params.bind13-ctl.e2e.vapcheck.dev";
const BINDING: &str = "params-binding.bind13-ctl.e2e.vapcheck.dev";
const LONELY: &str = "lonely.bind13-ctl.e2e.vapcheck.dev";
const NARROW: &str = "narrow.bind13-ctl.e2e.vapcheck.dev";
const NARROW_BINDING: &str = "narrow-binding.bind13-ctl.e2e.vapcheck.dev";
const ORPHAN_BINDING: &str = "orphan-binding.bind13-ctl.e2e.vapcheck.dev";

/// How long the first condition may take (vapcheck's start included).
const FIRST: Duration = Duration::from_secs(60);
/// Issue 13: a binding or param change is reflected within 5 s.
const CHANGE: Duration = Duration::from_secs(5);

fn policy(name: &str, case: &str, param_kind: bool) -> String {
    let param_kind = if param_kind {
        "\n  paramKind: {apiVersion: v1, kind: ConfigMap}"
    } else {
        ""
    };
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:{param_kind}
  failurePolicy: Fail
  matchConstraints:
    objectSelector:
      matchLabels: {{bind13-ctl: {case}}}
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["configmaps"]
  validations:
    - expression: "object.metadata.name != 'rejected-' + '{case}'"
      message: "{case}: this name is rejected"
"#
    )
}

async fn condition(client: &Client, name: &str) -> anyhow::Result<Option<Condition>> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let p = api.get(name).await?;
    Ok(p.status
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "BindingsEffective")))
}

async fn wait_for_reason(
    client: &Client,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> anyhow::Result<(Condition, Duration)> {
    let started = Instant::now();
    let c = wait_for(
        &format!("{name}: BindingsEffective reason {reason}"),
        timeout,
        || async {
            Ok(condition(client, name)
                .await?
                .filter(|c| c.reason == reason))
        },
    )
    .await?;
    Ok((c, started.elapsed()))
}

/// A server-side dry-run create of a ConfigMap labelled for `case`: `None` when admitted,
/// else the API server's message.
async fn request(client: &Client, case: &str, name: &str) -> anyhow::Result<Option<String>> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"bind13-ctl": case}}});
    let uri = format!("/api/v1/namespaces/{NS}/configmaps?dryRun=All");
    Ok(support::dry_run_create(client, &uri, &body)
        .await?
        .map(|m| {
            m.split_once(": ")
                .map_or(m.clone(), |(_, msg)| msg.to_owned())
        }))
}

/// Waits until the admission plugin's answer for `name` satisfies `accept` (its policy
/// and binding cache refreshes on its own schedule).
async fn wait_for_answer(
    client: &Client,
    case: &str,
    name: &str,
    what: &str,
    accept: impl Fn(&Option<String>) -> bool,
) -> anyhow::Result<Option<String>> {
    wait_for(&format!("{case}/{name}: {what}"), FIRST, || async {
        let answer = request(client, case, name).await?;
        Ok(accept(&answer).then_some(answer))
    })
    .await
}

fn metric(text: &str, verdict: &str) -> Option<f64> {
    let prefix = format!("vapcheck_bindings{{verdict=\"{verdict}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

async fn binding_condition_follows_the_api_server() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "bindings",
        &["--lease-name", "vapcheck-e2e-bindings"],
    )?;
    apply_yaml(
        &client,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"),
    )
    .await?;

    // 1. paramRef to a ConfigMap that does not exist, parameterNotFoundAction Deny.
    apply_yaml(&client, &policy(POLICY, "params", true)).await?;
    let binding = format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {BINDING}
spec:
  policyName: {POLICY}
  validationActions: [Deny]
  paramRef:
    name: limits
    namespace: {NS}
    parameterNotFoundAction: Deny
"#
    );
    apply_yaml(&client, &binding).await?;
    let (denies, took) =
        wait_for_reason(&client, POLICY, "DeniesAllMatchingRequests", FIRST).await?;
    println!("binding-controller: denies-all condition after {took:?} (vapcheck start included)");
    assert_eq!(denies.status, "False");
    // The analysis quotes the API server's message: `... with "<message>"`.
    let quoted = denies
        .message
        .split(" with \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .with_context(|| format!("no quoted denial message in {:?}", denies.message))?
        .to_owned();
    let answer = wait_for_answer(&client, "params", "any-name", "denied", |a| a.is_some()).await?;
    let answer = answer.unwrap_or_default();
    println!("binding-controller: kube-apiserver: {answer}");
    assert!(
        answer.ends_with(&quoted),
        "kube-apiserver said {answer:?}; vapcheck's condition: {:?}",
        denies.message
    );
    // A Warning Event on the binding.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let event = wait_for("a Warning Event on the binding", FIRST, || async {
        let list = events
            .list(&ListParams::default().fields(&format!("regarding.name={BINDING}")))
            .await?;
        Ok(list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("DeniesAllMatchingRequests")
                && e.type_.as_deref() == Some("Warning")
        }))
    })
    .await?;
    assert!(
        event.note.as_deref().unwrap_or_default().contains(BINDING),
        "{event:?}"
    );

    // 2. The ConfigMap appears: within 5 s the binding evaluates.
    apply_yaml(
        &client,
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: limits\n  namespace: {NS}\ndata:\n  max: \"3\"\n"
        ),
    )
    .await?;
    let (evaluates, took) = wait_for_reason(&client, POLICY, "Evaluates", CHANGE).await?;
    println!("binding-controller: evaluates condition {took:?} after the param was created");
    assert_eq!(evaluates.status, "True");
    wait_for_answer(&client, "params", "any-name", "admitted", |a| a.is_none()).await?;
    let rejected = wait_for_answer(&client, "params", "rejected-params", "denied", |a| {
        a.is_some()
    })
    .await?
    .unwrap_or_default();
    assert!(
        rejected.contains("params: this name is rejected"),
        "{rejected}"
    );

    // Deleting the param brings the denial back within 5 s.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), NS);
    cms.delete("limits", &Default::default()).await?;
    let (_, took) = wait_for_reason(&client, POLICY, "DeniesAllMatchingRequests", CHANGE).await?;
    println!("binding-controller: denies-all again {took:?} after the param was deleted");

    // 3. No binding; a binding that selects nothing the policy matches.
    apply_yaml(&client, &policy(LONELY, "lonely", false)).await?;
    let (lonely, _) = wait_for_reason(&client, LONELY, "NoBindings", FIRST).await?;
    assert_eq!(lonely.status, "False");
    apply_yaml(&client, &policy(NARROW, "narrow", false)).await?;
    apply_yaml(
        &client,
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {NARROW_BINDING}
spec:
  policyName: {NARROW}
  validationActions: [Deny]
  matchResources:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["secrets"]
"#
        ),
    )
    .await?;
    let (inactive, took) = wait_for_reason(&client, NARROW, "Inactive", CHANGE).await?;
    println!("binding-controller: inactive condition {took:?} after the binding was created");
    assert!(
        inactive.message.contains(NARROW_BINDING),
        "{}",
        inactive.message
    );
    // The policy would reject this name, but its only binding never evaluates it. (The
    // plugin's cache may not hold the new binding yet either; both mean "admitted", so ask a
    // few times over three seconds.)
    for _ in 0..3 {
        let answer = request(&client, "narrow", "rejected-narrow").await?;
        if let Some(message) = answer {
            bail!("the inactive binding's policy denied a request: {message}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // 4. The metric counts the bindings by verdict.
    let addr = support::metrics_addr(&vapcheck)?;
    let text = support::http_get(&addr, "/metrics")?;
    assert!(metric(&text, "inactive").unwrap_or(0.0) >= 1.0, "{text}");
    assert!(metric(&text, "denies_all").unwrap_or(0.0) >= 1.0, "{text}");
    // 5. Bindings whose policy does not exist (kube-apiserver skips them: `no-policy` in
    // e2e_binding_verdicts): a binding created for a missing policy, and the binding of a
    // policy that is deleted, each get an Inactive Warning Event within 5 s.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(client.clone());
    let inactive_event = |binding: &'static str, since: Instant| {
        let events = events.clone();
        async move {
            let (event, took) = {
                let e = wait_for(&format!("an Inactive Event on {binding}"), CHANGE, || {
                    let events = events.clone();
                    async move {
                        let list = events
                            .list(
                                &ListParams::default().fields(&format!("regarding.name={binding}")),
                            )
                            .await?;
                        Ok(list.items.into_iter().find(|e| {
                            e.reason.as_deref() == Some("Inactive")
                                && e.type_.as_deref() == Some("Warning")
                                && e.note.as_deref().is_some_and(|n| {
                                    n.contains("no ValidatingAdmissionPolicy of that name exists")
                                })
                        }))
                    }
                })
                .await?;
                (e, since.elapsed())
            };
            anyhow::Ok((event, took))
        }
    };
    let created = Instant::now();
    apply_yaml(
        &client,
        &format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: {ORPHAN_BINDING}\nspec:\n  policyName: no-such-policy.bind13-ctl.e2e.vapcheck.dev\n  validationActions: [Deny]\n"
        ),
    )
    .await?;
    let (event, took) = inactive_event(ORPHAN_BINDING, created).await?;
    println!(
        "binding-controller: Inactive Event {took:?} after a binding of a missing policy was created: {}",
        event.note.unwrap_or_default()
    );
    let vaps: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let deleted = Instant::now();
    vaps.delete(POLICY, &Default::default()).await?;
    let (event, took) = inactive_event(BINDING, deleted).await?;
    println!(
        "binding-controller: Inactive Event {took:?} after the policy of {BINDING} was deleted: {}",
        event.note.unwrap_or_default()
    );

    drop(vapcheck);
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio binding_condition_follows_the_api_server,
}
