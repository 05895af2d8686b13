//! Proof for issue 32 (admission webhooks), on the real kube-apiserver 1.37.1: what
//! `vapcheck check` says of webhook match conditions happens at admission.
//!
//! `e2e/fixtures/webhook-match-conditions.yaml` holds four webhook configurations whose URL
//! refuses connections (`https://127.0.0.1:1`), each matching only ConfigMaps labelled for its
//! case. The test checks the file (`vapcheck check -o json --kubeconfig`), asserts the exact
//! findings, creates the configurations and one labelled ConfigMap per case, and asserts the
//! API server's exact answer: a finding's error text denies the request (before the webhook is
//! called); the configuration without findings admits it (its condition is false, the webhook
//! is not called); and a ConfigMap for which the condition holds reaches the webhook
//! (`failed calling webhook`), so the denials above came from the conditions.
//!
//! `cargo test --test e2e -- --group webhooks --nocapture`.

use crate::support;
use crate::webhook_server;

use std::collections::BTreeMap;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

const FIXTURE: &str = "e2e/fixtures/webhook-match-conditions.yaml";
const PRACTICES: &str = "e2e/fixtures/webhook-practices.yaml";
const REVIEW_VERSIONS: &str = "e2e/fixtures/webhook-review-versions.yaml";
const HEARTBEATS: &str = "e2e/fixtures/webhook-heartbeats.yaml";
/// The namespace of the self-hosted webhook in the fixture; each run uses a fresh one (a
/// deleted namespace stays terminating on a control plane without the namespace controller).
const SELF_HOSTED_NAMESPACE: &str = "vapcheck-e2e-self-hosted";

/// The findings `vapcheck check` must report, per configuration: (fieldRef, runtime error or
/// type-check text fragment).
fn expected_findings() -> BTreeMap<&'static str, Vec<(&'static str, &'static str)>> {
    BTreeMap::from([
        (
            "wh-absent-field",
            vec![(
                "webhooks[0].matchConditions[0].expression",
                "runtime: no such key: data",
            )],
        ),
        (
            "wh-namespace-object",
            vec![(
                "webhooks[0].matchConditions[0].expression",
                "runtime: no such key: metadata",
            )],
        ),
        (
            "wh-typo",
            vec![(
                "webhooks[0].matchConditions[0].expression",
                "warning: undefined field 'labelz'",
            )],
        ),
        ("wh-guarded", vec![]),
    ])
}

/// What vapcheck reported, in the shape of [`expected_findings`].
fn reported(entries: &[Value]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    for e in entries {
        let name = e["name"].as_str().unwrap_or_default().to_owned();
        let mut found = Vec::new();
        let status = &e["status"];
        for r in status["runtime"].as_array().into_iter().flatten() {
            found.push((
                r["fieldRef"].as_str().unwrap_or_default().to_owned(),
                format!("runtime: {}", r["error"].as_str().unwrap_or_default()),
            ));
        }
        for w in status["typeChecking"]["expressionWarnings"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let text = w["warning"].as_str().unwrap_or_default();
            let fragment = text
                .find("undefined field")
                .map_or(text, |at| &text[at..])
                .lines()
                .next()
                .unwrap_or_default();
            found.push((
                w["fieldRef"].as_str().unwrap_or_default().to_owned(),
                format!("warning: {fragment}"),
            ));
        }
        out.insert(name, found);
    }
    out
}

fn config_map(case: &str, data: Option<Value>) -> anyhow::Result<ConfigMap> {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("wh-{case}-{}", support::unix_ms()),
                     "labels": {"vapcheck-e2e": case}}});
    if let Some(d) = data {
        cm["data"] = d;
    }
    Ok(serde_json::from_value(cm)?)
}

/// The API server's answer to creating the ConfigMap: `Ok(())` when admitted, else its message.
async fn create(api: &Api<ConfigMap>, cm: &ConfigMap) -> anyhow::Result<Result<(), String>> {
    match api.create(&PostParams::default(), cm).await {
        Ok(created) => {
            let name = created.metadata.name.unwrap_or_default();
            api.delete(&name, &DeleteParams::default()).await?;
            Ok(Ok(()))
        }
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(e).context("creating a ConfigMap"),
    }
}

async fn match_condition_findings_happen_at_admission() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let fixture = support::repo_root().join(FIXTURE);
    let entries = support::check_json(cluster.kubeconfig(), &fixture)?;
    let got = reported(&entries);
    let want: BTreeMap<String, Vec<(String, String)>> = expected_findings()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.into_iter()
                    .map(|(f, t)| (f.to_owned(), t.to_owned()))
                    .collect(),
            )
        })
        .collect();
    ensure!(
        got == want,
        "vapcheck's findings:\n{got:#?}\nexpected:\n{want:#?}"
    );
    eprintln!(
        "webhooks: vapcheck reports {} findings on {} configurations",
        got.values().map(Vec::len).sum::<usize>(),
        got.len()
    );

    let text = std::fs::read_to_string(&fixture)?;
    let applied = support::apply_yaml(&client, &text).await?;
    ensure!(
        applied.len() == 4,
        "applied {} configurations",
        applied.len()
    );
    // The API server's webhook informers see the new configurations shortly after the create.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cases: [(&str, Option<Value>, Result<(), &str>); 5] = [
        (
            "absent-field",
            None,
            Err("expression 'object.data.mode == 'debug'' resulted in error: no such key: data"),
        ),
        (
            "namespace-object",
            None,
            Err(
                "expression 'namespaceObject.metadata.name != 'kube-system'' resulted in error: no such key: metadata",
            ),
        ),
        (
            "typo",
            None,
            Err(
                "expression 'object.metadata.labelz['x'] == 'y'' resulted in error: no such key: labelz",
            ),
        ),
        ("guarded", None, Ok(())),
        (
            "absent-field",
            Some(json!({"mode": "debug"})),
            Err("failed calling webhook \"absent-field.vapcheck.example.com\""),
        ),
    ];
    let mut report = String::new();
    for (case, data, want) in cases {
        let cm = config_map(case, data.clone())?;
        let got = create(&api, &cm).await?;
        eprintln!("webhooks: ConfigMap for {case} (data {data:?}): {got:?}");
        let ok = match (&got, want) {
            (Ok(()), Ok(())) => true,
            (Err(message), Err(fragment)) => message.contains(fragment),
            _ => false,
        };
        if !ok {
            report.push_str(&format!(
                "{case} (data {data:?}): the API server answered {got:?}, expected {want:?}\n"
            ));
        }
    }
    delete_configurations(&client, &applied).await?;
    if !report.is_empty() {
        bail!("{report}");
    }
    Ok(())
}

/// Deletes the webhook configurations `applied` created.
async fn delete_configurations(
    client: &kube::Client,
    applied: &[kube::api::DynamicObject],
) -> anyhow::Result<()> {
    for object in applied {
        let kind = object
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let url = match kind.as_str() {
            "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
            "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
            other => bail!("unexpected kind {other}"),
        };
        delete_uri(
            client,
            &format!("/apis/admissionregistration.k8s.io/v1/{url}/{name}"),
        )
        .await?;
    }
    Ok(())
}

/// The practices (`e2e/fixtures/webhook-practices.yaml`): vapcheck reports VAP121 on the
/// fail-closed webhook that selects kube-system and VAP122 on the one that intercepts pod
/// creation in its own Service's namespace; with their webhooks unavailable, kube-apiserver
/// then denies a ConfigMap in kube-system and a Pod in that namespace. The excluded-resource
/// rule (VAP120) is kube-apiserver's own create-time warning, compared in
/// e2e_apiserver_verdicts.
async fn practice_findings_happen_at_admission() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let fixture = support::repo_root().join(PRACTICES);
    let entries = support::check_json(cluster.kubeconfig(), &fixture)?;
    let got: BTreeMap<String, Vec<String>> = entries
        .iter()
        .map(|e| {
            let rules = e["advice"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| {
                    format!(
                        "{} {}",
                        a["rule"].as_str().unwrap_or_default(),
                        a["fieldRef"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            (e["name"].as_str().unwrap_or_default().to_owned(), rules)
        })
        .collect();
    let want: BTreeMap<String, Vec<String>> = [
        ("wh-kube-system", vec!["VAP121 webhooks[0].rules[0]"]),
        ("wh-self-hosted", vec!["VAP122 webhooks[0].rules[0]"]),
        ("wh-excluded", vec!["VAP120 webhooks[0].rules[0]"]),
        (
            "wh-selects-nothing",
            vec![
                "VAP124 webhooks[0].namespaceSelector",
                "VAP124 webhooks[1].objectSelector",
            ],
        ),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_owned(), r.into_iter().map(str::to_owned).collect()))
    .collect();
    ensure!(
        got == want,
        "vapcheck's findings:\n{got:#?}\nexpected:\n{want:#?}"
    );

    let namespace = format!("{SELF_HOSTED_NAMESPACE}-{}", support::unix_ms());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace}}))?;
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e).context("creating the self-hosted namespace"),
    }
    // The ServiceAccount admission plugin needs the namespace's default account (the shared
    // cluster may run no controller that creates it).
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), &namespace);
    let account = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default"}}))?;
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(e).context("creating the default service account"),
    }
    let text = std::fs::read_to_string(&fixture)?.replace(SELF_HOSTED_NAMESPACE, &namespace);
    let applied = support::apply_yaml(&client, &text).await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let system: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let cm = config_map("kube-system", None)?;
    let in_kube_system = create(&system, &cm).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("webhook-{}", support::unix_ms())},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/webhook:1"}]}}))?;
    let own_pod = match pods.create(&PostParams::default(), &pod).await {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(anyhow::Error::from(e)),
    };
    // VAP124: both webhooks of wh-selects-nothing match this ConfigMap's creation but for their
    // selectors; were either called, its unreachable address would deny it (failurePolicy Fail).
    let own_namespace: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let labelled = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("webhook-{}", support::unix_ms()), "labels": {"team": "a"}}}))?;
    let selected_by_nothing = create(&own_namespace, &labelled).await;
    // Clean up before judging, so that a failure leaves no webhook behind.
    delete_configurations(&client, &applied).await?;
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await?;
    let in_kube_system = in_kube_system?;
    let own_pod = own_pod?;
    let selected_by_nothing = selected_by_nothing?;
    eprintln!("webhooks: ConfigMap in {namespace}: {selected_by_nothing:?}");
    eprintln!("webhooks: ConfigMap in kube-system: {in_kube_system:?}");
    eprintln!("webhooks: Pod in {namespace}: {own_pod:?}");
    let mut report = String::new();
    if !matches!(&in_kube_system, Err(m) if m.contains("failed calling webhook \"kube-system.vapcheck.example.com\""))
    {
        report.push_str(&format!("ConfigMap in kube-system: {in_kube_system:?}\n"));
    }
    if !matches!(&own_pod, Err(m) if m.contains("failed calling webhook \"self-hosted.vapcheck.example.com\""))
    {
        report.push_str(&format!("Pod in {namespace}: {own_pod:?}\n"));
    }
    if selected_by_nothing.is_err() {
        report.push_str(&format!(
            "ConfigMap in {namespace} (selected by nothing): {selected_by_nothing:?}\n"
        ));
    }
    if !report.is_empty() {
        bail!("kube-apiserver did not answer as the findings say:\n{report}");
    }
    Ok(())
}

/// The answer to a request: `Err` with the API server's message when it denied it.
fn answer<T>(r: Result<T, kube::Error>) -> anyhow::Result<Result<(), String>> {
    match r {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(e.into()),
    }
}

/// VAP127 (`e2e/fixtures/webhook-heartbeats.yaml`): vapcheck reports a fail-closed webhook on
/// UPDATE of `nodes/status` and one on UPDATE of the Leases in kube-node-lease; with them
/// created (their address refuses connections), kube-apiserver denies a status patch of a Node
/// and an update of a Lease in kube-node-lease, the two requests of a kubelet's heartbeat,
/// with the webhooks' call errors. A patch of the Node itself (no subresource) and an update of
/// a Lease in another namespace are admitted, so the rules and the namespaceSelector decided.
async fn fail_closed_heartbeats_are_denied() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};

    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let fixture = support::repo_root().join(HEARTBEATS);
    let entries = support::check_json(cluster.kubeconfig(), &fixture)?;
    let got: Vec<(String, String, String)> = entries
        .iter()
        .flat_map(|e| e["advice"].as_array().cloned().unwrap_or_default())
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
            (s("rule"), s("fieldRef"), s("message"))
        })
        .collect();
    let message = |what: &str| {
        format!(
            "failurePolicy is Fail and the rules match the node heartbeats ({what}): while the \
             webhook is unavailable, kube-apiserver denies them, and the node lifecycle \
             controller marks the nodes unreachable and evicts their pods; leave the kubelets out (a match condition on \
             request.userInfo.groups containing system:nodes) or use failurePolicy Ignore"
        )
    };
    let want = vec![
        (
            "VAP127".to_owned(),
            "webhooks[0].rules[0]".to_owned(),
            message("UPDATE of nodes/status"),
        ),
        (
            "VAP127".to_owned(),
            "webhooks[1].rules[0]".to_owned(),
            message("UPDATE of leases in kube-node-lease"),
        ),
    ];
    ensure!(
        entries.len() == 1 && got == want,
        "vapcheck's findings:\n{got:#?}\nexpected:\n{want:#?}"
    );

    // kube-apiserver's system namespaces controller creates kube-node-lease; wait for it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut tries = 0;
    while namespaces.get_opt("kube-node-lease").await?.is_none() {
        tries += 1;
        ensure!(tries < 60, "kube-node-lease was not created within 30 s");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let name = format!("vapcheck-e2e-heartbeat-{}", support::unix_ms());
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name}}))?;
    nodes.create(&PostParams::default(), &node).await?;
    let lease = |ns: &str| -> anyhow::Result<Lease> {
        Ok(serde_json::from_value(
            json!({"apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}),
        )?)
    };
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let other_leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    node_leases
        .create(&PostParams::default(), &lease("kube-node-lease")?)
        .await?;
    other_leases
        .create(&PostParams::default(), &lease("default")?)
        .await?;

    let text = std::fs::read_to_string(&fixture)?;
    let applied = support::apply_yaml(&client, &text).await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let renew = json!({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}});
    let heartbeat_status = answer(
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready",
                "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
            )
            .await,
    );
    let heartbeat_lease = answer(
        node_leases
            .patch(&name, &PatchParams::default(), &Patch::Merge(renew.clone()))
            .await,
    );
    let node_itself = answer(
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"vapcheck": "e2e"}}})),
            )
            .await,
    );
    let other_lease = answer(
        other_leases
            .patch(&name, &PatchParams::default(), &Patch::Merge(renew))
            .await,
    );
    // Clean up before judging, so that a failure leaves no webhook behind.
    delete_configurations(&client, &applied).await?;
    nodes.delete(&name, &DeleteParams::default()).await?;
    node_leases.delete(&name, &DeleteParams::default()).await?;
    other_leases.delete(&name, &DeleteParams::default()).await?;
    let (heartbeat_status, heartbeat_lease) = (heartbeat_status?, heartbeat_lease?);
    let (node_itself, other_lease) = (node_itself?, other_lease?);
    eprintln!("webhooks: nodes/status patch: {heartbeat_status:?}");
    eprintln!("webhooks: Lease update in kube-node-lease: {heartbeat_lease:?}");
    eprintln!("webhooks: Node patch: {node_itself:?}; Lease update in default: {other_lease:?}");
    let denied = |hook: &str| {
        Err(format!(
            "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: \
             Post \"https://127.0.0.1:1/validate?timeout=10s\": dial tcp 127.0.0.1:1: connect: \
             connection refused"
        ))
    };
    let got = [heartbeat_status, heartbeat_lease, node_itself, other_lease];
    let want = [
        denied("node-status.vapcheck.example.com"),
        denied("node-lease.vapcheck.example.com"),
        Ok(()),
        Ok(()),
    ];
    ensure!(
        got == want,
        "kube-apiserver did not answer as VAP127 says:\n{got:#?}\nexpected:\n{want:#?}"
    );
    Ok(())
}

/// Creates a Widget (e2e/fixtures/widgets-crd.yaml) through `version`: the API server's answer.
async fn create_widget(client: &kube::Client, version: &str) -> anyhow::Result<Result<(), String>> {
    let gvk = kube::api::GroupVersionKind::gvk("vapcheck.example.com", version, "Widget");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource);
    let widget: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("vapcheck.example.com/{version}"), "kind": "Widget",
        "metadata": {"name": format!("w-{version}-{}", support::unix_ms())},
        "spec": {"size": 1}}))?;
    match api.create(&PostParams::default(), &widget).await {
        Ok(created) => {
            let name = created.metadata.name.unwrap_or_default();
            api.delete(&name, &DeleteParams::default()).await?;
            Ok(Ok(()))
        }
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(e).context("creating a Widget"),
    }
}

/// VAP123: with `--crd` for a resource served as v1 and v2, vapcheck reports the
/// `matchPolicy: Exact` webhook that names v1 only (and not the `Equivalent` one); on the API
/// server, that webhook denies a create through v1 (it is called and unavailable) and lets a
/// create through v2 pass, while the `Equivalent` one denies the create through v2 too.
async fn exact_match_policy_is_bypassed_through_another_version() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let root = support::repo_root();
    let crd_file = root.join("e2e/fixtures/widgets-crd.yaml");
    let hooks_file = root.join("e2e/fixtures/webhook-exact.yaml");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json", "--crd"])
        .arg(&crd_file)
        .arg(&hooks_file)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .context("running vapcheck check")?;
    let entries: Vec<Value> = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "vapcheck ({}) printed no JSON: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let got: Vec<(String, String)> = entries
        .iter()
        .flat_map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            e["advice"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |a| {
                    (
                        name.clone(),
                        format!(
                            "{} {}",
                            a["rule"].as_str().unwrap_or_default(),
                            a["fieldRef"].as_str().unwrap_or_default()
                        ),
                    )
                })
        })
        .collect();
    ensure!(
        output.status.code() == Some(1)
            && got
                == [(
                    "wh-exact".to_owned(),
                    "VAP123 webhooks[0].rules[0]".to_owned()
                )],
        "vapcheck ({}): {got:?}",
        output.status
    );

    support::apply_yaml(&client, &std::fs::read_to_string(&crd_file)?).await?;
    // The CRD's two versions are served once it is established.
    support::wait_for(
        "widgets served as v2",
        std::time::Duration::from_secs(30),
        || async {
            let request = http::Request::builder()
                .uri("/apis/vapcheck.example.com/v2")
                .body(Vec::new())?;
            Ok(client.request_text(request).await.ok().map(|_| ()))
        },
    )
    .await?;
    let text = std::fs::read_to_string(&hooks_file)?;
    let docs = support::parse_yaml_documents(&text)?;
    let mut answers = Vec::new();
    for doc in &docs {
        let yaml = serde_json::to_string(doc)?;
        let applied = support::apply_yaml(&client, &yaml).await?;
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let v1 = create_widget(&client, "v1").await;
        let v2 = create_widget(&client, "v2").await;
        delete_configurations(&client, &applied).await?;
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        eprintln!("webhooks: {name}: v1 {v1:?}, v2 {v2:?}");
        answers.push((name, v1?, v2?));
    }
    let request = http::Request::builder()
        .method(http::Method::DELETE)
        .uri("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.vapcheck.example.com")
        .body(Vec::new())?;
    client
        .request_text(request)
        .await
        .context("deleting the widgets CRD")?;
    let denied = |r: &Result<(), String>, hook: &str| matches!(r, Err(m) if m.contains(&format!("failed calling webhook \"{hook}.vapcheck.example.com\"")));
    let mut report = String::new();
    for (name, v1, v2) in &answers {
        let hook = name.trim_start_matches("wh-");
        let v2_ok = if name == "wh-exact" {
            v2.is_ok()
        } else {
            denied(v2, hook)
        };
        if !denied(v1, hook) || !v2_ok {
            report.push_str(&format!("{name}: v1 {v1:?}, v2 {v2:?}\n"));
        }
    }
    ensure!(
        answers.len() == 2 && report.is_empty(),
        "kube-apiserver did not answer as the finding says:\n{report}"
    );
    Ok(())
}

/// VAP125: mutating webhooks called one after another whose timeouts add up to more than the
/// request's deadline. vapcheck reports the fixture (3 × 25 s against kube-apiserver's default
/// 60 s). The mechanism is then shown at a smaller scale, on a private control plane started
/// with `--request-timeout=8s`, against a TCP listener that accepts connections and never
/// answers (so every call runs into its timeout): with one 5 s webhook (`Ignore`) the ConfigMap
/// is admitted after its timeout; with two (10 s > 8 s) the second call is cut short by the
/// deadline and the request fails (kube-apiserver's handler times out at 8 s and gives no
/// answer), although both webhooks are `Ignore`.
async fn timeouts_beyond_the_request_deadline_fail_even_with_ignore() -> anyhow::Result<()> {
    let fixture = support::repo_root().join("e2e/fixtures/webhook-timeouts.yaml");
    let cluster = support::Cluster::start(support::UpOptions {
        apiserver_extra_args: Some("--request-timeout=8s".to_owned()),
        ..support::UpOptions::default()
    })?;
    let entries = support::check_json(cluster.kubeconfig(), &fixture)?;
    let advice: Vec<(String, String)> = entries
        .iter()
        .flat_map(|e| e["advice"].as_array().cloned().unwrap_or_default())
        .map(|a| {
            (
                a["rule"].as_str().unwrap_or_default().to_owned(),
                a["fieldRef"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    ensure!(
        advice == [("VAP125".to_owned(), "webhooks[2].timeoutSeconds".to_owned())],
        "vapcheck's findings: {advice:?}"
    );

    // A listener that accepts and never answers: each call waits for its timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            match stream {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
    });
    let client = cluster.client().await?;
    let namespace = format!("timeouts-{}", support::unix_ms());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace}}))?,
        )
        .await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let text = std::fs::read_to_string(&fixture)?
        .replace("PORT", &port.to_string())
        .replace("timeoutSeconds: 25", "timeoutSeconds: 5");
    let mut config: Value = support::parse_yaml_documents(&text)?
        .into_iter()
        .next()
        .context("no document")?;
    let all = config["webhooks"].as_array().cloned().unwrap_or_default();
    let configs: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(client.clone());
    let mut outcomes = Vec::new();
    for n in [1usize, 2] {
        config["webhooks"] = Value::Array(all.iter().take(n).cloned().collect());
        let object = serde_json::from_value(config.clone())?;
        let _ = configs
            .delete("wh-timeouts", &DeleteParams::default())
            .await;
        configs.create(&PostParams::default(), &object).await?;
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let started = std::time::Instant::now();
        // When the request's deadline has passed, kube-apiserver's handler has timed out and
        // the client gets no answer (the connection is closed; kube's client then tries
        // again): a failure, bounded here at 20 s.
        let post = PostParams::default();
        let cm = config_map("timeouts", None)?;
        let attempt = config_maps.create(&post, &cm);
        let created = match tokio::time::timeout(std::time::Duration::from_secs(20), attempt).await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(kube::Error::Api(status))) => {
                Err(format!("{}: {}", status.code, status.message))
            }
            Ok(Err(e)) => Err(format!("{e}")),
            Err(_) => Err("no answer within 20 s".to_owned()),
        };
        outcomes.push((n, created, started.elapsed()));
    }
    let _ = configs
        .delete("wh-timeouts", &DeleteParams::default())
        .await;
    for (n, created, took) in &outcomes {
        eprintln!(
            "webhooks: {n} webhook(s) of 5 s, request timeout 8 s: {created:?} after {took:?}"
        );
    }
    match &outcomes[..] {
        [(1, Ok(()), one), (2, Err(_), two)]
            if *one >= std::time::Duration::from_secs(5)
                && *two >= std::time::Duration::from_secs(8) => {}
        other => bail!("kube-apiserver did not answer as VAP125 says: {other:?}"),
    }
    Ok(())
}

/// VAP126: kube-apiserver sends the AdmissionReview version it finds first in
/// `admissionReviewVersions` among those it supports (k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/request/admissionreview.go` `CreateAdmissionObjects`). vapcheck
/// reports `e2e/fixtures/webhook-review-versions.yaml`'s three webhooks that get v1beta1 and
/// says kube-apiserver accepts the configuration; kube-apiserver creates it. A real HTTPS
/// server (e2e/support/webhook_server.rs) records the version each webhook receives: first one
/// that answers in the version it received (every ConfigMap admitted), then one that answers in
/// v1 whatever it received (the three calls that sent v1beta1 fail, and the requests are
/// denied).
async fn review_versions_decide_what_the_webhook_receives() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let fixture = support::repo_root().join(REVIEW_VERSIONS);
    let entries = support::check_json(cluster.kubeconfig(), &fixture)?;
    let advice: Vec<(String, String)> = entries
        .iter()
        .flat_map(|e| e["advice"].as_array().cloned().unwrap_or_default())
        .map(|a| {
            (
                a["rule"].as_str().unwrap_or_default().to_owned(),
                a["fieldRef"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [0, 1, 3]
        .iter()
        .map(|i| {
            (
                "VAP126".to_owned(),
                format!("webhooks[{i}].admissionReviewVersions"),
            )
        })
        .collect();
    ensure!(advice == want, "vapcheck's findings: {advice:?}");
    ensure!(
        entries.len() == 1 && entries[0]["apiServer"]["accepted"] == json!(true),
        "vapcheck's verdict on the fixture: {entries:#?}"
    );

    let certs =
        webhook_server::certificates_for_years("vapcheck e2e review versions CA", 2020, 2090)?;
    let cases = ["only-v1beta1", "v1beta1-first", "v1-first", "unknown-first"];
    let mut received = Vec::new();
    let mut answers = Vec::new();
    for reply in [
        webhook_server::Reply::SameVersion,
        webhook_server::Reply::V1,
    ] {
        let server = webhook_server::start(&certs, reply).await?;
        let text = std::fs::read_to_string(&fixture)?
            .replace("127.0.0.1:1/", &format!("127.0.0.1:{}/", server.port));
        let mut config: Value = support::parse_yaml_documents(&text)?
            .into_iter()
            .next()
            .context("no document")?;
        for hook in config["webhooks"].as_array_mut().into_iter().flatten() {
            hook["clientConfig"]["caBundle"] =
                serde_json::to_value(k8s_openapi::ByteString(certs.ca_pem.clone().into_bytes()))?;
        }
        let configs: Api<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        > = Api::all(client.clone());
        let _ = configs
            .delete("wh-review-versions", &DeleteParams::default())
            .await;
        configs
            .create(&PostParams::default(), &serde_json::from_value(config)?)
            .await?;
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        for case in cases {
            let got = create(&api, &config_map(&format!("review-{case}"), None)?).await?;
            eprintln!("webhooks: {reply:?} server, {case}: {got:?}");
            answers.push((reply, case, got));
        }
        received.push(server.received());
        let _ = configs
            .delete("wh-review-versions", &DeleteParams::default())
            .await;
    }
    // What each webhook received, in the order of `cases`, for each server.
    let sent = [
        "admission.k8s.io/v1beta1",
        "admission.k8s.io/v1beta1",
        "admission.k8s.io/v1",
        "admission.k8s.io/v1beta1",
    ];
    ensure!(
        received == [sent, sent],
        "the AdmissionReview versions received: {received:#?}"
    );
    // A server that answers in v1 fails every call that sent v1beta1 (failurePolicy Fail: the
    // request is denied); the one that sent v1 is admitted.
    let fails = |case: &str| {
        Err(format!(
            "Internal error occurred: failed calling webhook \"{case}.review-versions.vapcheck.example.com\": failed to call webhook: converting (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown conversion"
        ))
    };
    let want: Vec<(webhook_server::Reply, &str, Result<(), String>)> = cases
        .iter()
        .map(|c| (webhook_server::Reply::SameVersion, *c, Ok(())))
        .chain([
            (
                webhook_server::Reply::V1,
                "only-v1beta1",
                fails("only-v1beta1"),
            ),
            (
                webhook_server::Reply::V1,
                "v1beta1-first",
                fails("v1beta1-first"),
            ),
            (webhook_server::Reply::V1, "v1-first", Ok(())),
            (
                webhook_server::Reply::V1,
                "unknown-first",
                fails("unknown-first"),
            ),
        ])
        .collect();
    ensure!(
        answers == want,
        "kube-apiserver's answers: {answers:#?}\nexpected {want:#?}"
    );
    Ok(())
}

/// `vapcheck check -o json` (offline, the built binary, no cluster) on `args`: the entries.
fn check_offline(args: &[&std::path::Path]) -> anyhow::Result<(Option<i32>, Vec<Value>)> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .context("running vapcheck check")?;
    let entries: Vec<Value> = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "vapcheck ({}) printed no JSON: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((output.status.code(), entries))
}

/// Deletes the cluster-scoped object at `uri`.
async fn delete_uri(client: &kube::Client, uri: &str) -> anyhow::Result<()> {
    let request = http::Request::builder()
        .method(http::Method::DELETE)
        .uri(uri)
        .body(Vec::new())?;
    client
        .request_text(request)
        .await
        .with_context(|| format!("deleting {uri}"))?;
    Ok(())
}

/// The match conditions' budget (`RuntimeCELCostBudgetMatchConditions`, 2,500,000), shared by
/// one webhook's conditions and spent in order (k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/matchconditions/matcher.go` `(*matcher).Match`,
/// `plugin/cel/condition.go` `ForInput`). `e2e/fixtures/webhook-budget.yaml` on
/// `e2e/fixtures/notes-crd.yaml`: vapcheck reports the budget on the webhook with twelve
/// conditions estimated at 900,023 at most each (and no per-call finding), and nothing on its
/// twin with two. On the API server a Note whose `spec.text` is 112,500 `a`s (its maxLength) is
/// denied by the first with the budget error (each condition costs about 225,000 there: eleven
/// fit in 2,500,000, the twelfth is refused) and reaches the second's webhook; a small Note
/// reaches both webhooks.
async fn match_conditions_share_one_budget_per_webhook() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let root = support::repo_root();
    let crd_file = root.join("e2e/fixtures/notes-crd.yaml");
    let hooks_file = root.join("e2e/fixtures/webhook-budget.yaml");
    let (code, entries) = check_offline(&[std::path::Path::new("--crd"), &crd_file, &hooks_file])?;
    let findings = |name: &str| -> Vec<String> {
        entries
            .iter()
            .filter(|e| e["name"] == name)
            .flat_map(|e| {
                e["status"]["cost"]["findings"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|f| {
                format!(
                    "{} {} {}",
                    f["limit"].as_str().unwrap_or_default(),
                    f["fieldRef"].as_str().unwrap_or_default(),
                    f["estimate"]
                )
            })
            .collect()
    };
    let (over, under) = (findings("wh-budget-over"), findings("wh-budget-under"));
    eprintln!("webhooks: budget: vapcheck: over {over:?}, under {under:?}");
    ensure!(
        code == Some(0)
            && over == ["RuntimeCELCostBudgetMatchConditions webhooks[0].matchConditions 10800276"]
            && under.is_empty(),
        "vapcheck ({code:?}): over {over:?}, under {under:?}"
    );

    support::apply_yaml(&client, &std::fs::read_to_string(&crd_file)?).await?;
    support::wait_for(
        "notes served",
        std::time::Duration::from_secs(30),
        || async {
            let request = http::Request::builder()
                .uri("/apis/vapcheck.example.com/v1/namespaces/default/notes")
                .body(Vec::new())?;
            Ok(client.request_text(request).await.ok().map(|_| ()))
        },
    )
    .await?;
    let applied = support::apply_yaml(&client, &std::fs::read_to_string(&hooks_file)?).await?;
    let note = |case: &str, len: usize| {
        json!({"apiVersion": "vapcheck.example.com/v1", "kind": "Note",
            "metadata": {"name": format!("{case}-{len}"), "namespace": "default",
                         "labels": {"vapcheck-e2e": format!("budget-{case}")}},
            "spec": {"text": "a".repeat(len)}})
    };
    let uri = "/apis/vapcheck.example.com/v1/namespaces/default/notes?dryRun=All";
    const BIG: usize = 112_500;
    let answers = async {
        // The webhooks are loaded once the small Note reaches the first one.
        let small_over = support::wait_for(
            "the webhook configurations to be loaded",
            std::time::Duration::from_secs(30),
            || async {
                Ok(support::dry_run_create(&client, uri, &note("over", 1))
                    .await?
                    .filter(|m| m.contains("failed calling webhook")))
            },
        )
        .await?;
        let big_over = support::dry_run_create(&client, uri, &note("over", BIG)).await?;
        let big_under = support::dry_run_create(&client, uri, &note("under", BIG)).await?;
        let small_under = support::dry_run_create(&client, uri, &note("under", 1)).await?;
        anyhow::Ok((small_over, big_over, big_under, small_under))
    }
    .await;
    delete_configurations(&client, &applied).await?;
    delete_uri(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notes.vapcheck.example.com",
    )
    .await?;
    let (small_over, big_over, big_under, small_under) = answers?;
    eprintln!("webhooks: budget: over, 1 char: {small_over}");
    eprintln!("webhooks: budget: over, {BIG} chars: {big_over:?}");
    eprintln!("webhooks: budget: under, {BIG} chars: {big_under:?}");
    eprintln!("webhooks: budget: under, 1 char: {small_under:?}");
    let calls = |m: &Option<String>, hook: &str| matches!(m, Some(m) if m.contains(&format!("failed calling webhook \"{hook}.vapcheck.example.com\"")));
    let want = format!(
        "HTTP 403: notes.vapcheck.example.com \"over-{BIG}\" is forbidden: validation failed due \
         to running out of cost budget, no further validation rules will be run"
    );
    ensure!(
        big_over.as_deref() == Some(want.as_str())
            && calls(&big_under, "budget-under")
            && calls(&small_under, "budget-under")
            && small_over.contains("failed calling webhook \"budget-over.vapcheck.example.com\""),
        "kube-apiserver did not answer as the finding says: over {big_over:?}, under \
         {big_under:?}, small {small_over:?} / {small_under:?}"
    );
    Ok(())
}

/// VAP123 across groups: core `events` and `events.k8s.io` `events` are the same objects
/// (one storage; equivalent resources). `e2e/fixtures/webhook-exact-events.yaml`: vapcheck
/// reports the `Exact` webhook on core v1 events and not its `Equivalent` twin; on the API
/// server the `Exact` one denies a core Event (it is called and unavailable) and lets an
/// events.k8s.io/v1 Event through, while the `Equivalent` one denies both.
async fn exact_match_policy_is_bypassed_through_the_equivalent_group() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let hooks_file = support::repo_root().join("e2e/fixtures/webhook-exact-events.yaml");
    let (code, entries) = check_offline(&[&hooks_file])?;
    let got: Vec<String> = entries
        .iter()
        .flat_map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            e["advice"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |a| {
                    format!(
                        "{name} {} {}",
                        a["rule"].as_str().unwrap_or_default(),
                        a["fieldRef"].as_str().unwrap_or_default()
                    )
                })
        })
        .collect();
    ensure!(
        code == Some(1) && got == ["wh-events-exact VAP123 webhooks[0].rules[0]"],
        "vapcheck ({code:?}): {got:?}"
    );

    let core = |n: u128| {
        json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("core-{n}"), "namespace": "default",
                         "labels": {"vapcheck-e2e": "events"}},
            "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
            "reason": "Test", "message": "vapcheck e2e", "type": "Normal"})
    };
    let new_group = |n: u128| {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": format!("new-{n}"), "namespace": "default",
                         "labels": {"vapcheck-e2e": "events"}},
            "eventTime": "2026-12-01T00:00:00.000000Z",
            "reportingController": "vapcheck.example.com/e2e", "reportingInstance": "e2e",
            "action": "Test", "reason": "Test", "note": "vapcheck e2e", "type": "Normal",
            "regarding": {"kind": "ConfigMap", "name": "x", "namespace": "default"}})
    };
    let core_uri = "/api/v1/namespaces/default/events?dryRun=All";
    let new_uri = "/apis/events.k8s.io/v1/namespaces/default/events?dryRun=All";
    // Without a webhook, both are admitted.
    let n = support::unix_ms();
    let before = (
        support::dry_run_create(&client, core_uri, &core(n)).await?,
        support::dry_run_create(&client, new_uri, &new_group(n)).await?,
    );
    ensure!(before == (None, None), "without webhooks: {before:?}");
    let text = std::fs::read_to_string(&hooks_file)?;
    let mut report = String::new();
    for doc in support::parse_yaml_documents(&text)? {
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let hook = name.trim_start_matches("wh-").to_owned();
        let applied = support::apply_yaml(&client, &serde_json::to_string(&doc)?).await?;
        let answers = async {
            // Loaded once the core Event reaches the webhook.
            let through_core = support::wait_for(
                "the webhook configuration to be loaded",
                std::time::Duration::from_secs(30),
                || async {
                    Ok(
                        support::dry_run_create(&client, core_uri, &core(support::unix_ms()))
                            .await?
                            .filter(|m| m.contains("failed calling webhook")),
                    )
                },
            )
            .await?;
            let through_new =
                support::dry_run_create(&client, new_uri, &new_group(support::unix_ms())).await?;
            anyhow::Ok((through_core, through_new))
        }
        .await;
        delete_configurations(&client, &applied).await?;
        let (through_core, through_new) = answers?;
        eprintln!("webhooks: {name}: core v1 {through_core:?}, events.k8s.io/v1 {through_new:?}");
        let calls = |m: &str| {
            m.contains(&format!(
                "failed calling webhook \"{hook}.vapcheck.example.com\""
            ))
        };
        let new_ok = if name == "wh-events-exact" {
            through_new.is_none()
        } else {
            through_new.as_deref().is_some_and(calls)
        };
        if !calls(&through_core) || !new_ok {
            report.push_str(&format!(
                "{name}: core v1 {through_core:?}, events.k8s.io/v1 {through_new:?}\n"
            ));
        }
    }
    ensure!(
        report.is_empty(),
        "kube-apiserver did not answer as the finding says:\n{report}"
    );
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio match_condition_findings_happen_at_admission,
    tokio practice_findings_happen_at_admission,
    tokio fail_closed_heartbeats_are_denied,
    tokio exact_match_policy_is_bypassed_through_another_version,
    tokio timeouts_beyond_the_request_deadline_fail_even_with_ignore,
    tokio review_versions_decide_what_the_webhook_receives,
    tokio match_conditions_share_one_budget_per_webhook,
    tokio exact_match_policy_is_bypassed_through_the_equivalent_group,
}
