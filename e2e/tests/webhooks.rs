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
//! `cargo test --test e2e_webhooks -- --nocapture`.

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeMap;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

const FIXTURE: &str = "e2e/fixtures/webhook-match-conditions.yaml";

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

#[tokio::test]
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
    for object in &applied {
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
        let request = http::Request::builder()
            .method(http::Method::DELETE)
            .uri(format!(
                "/apis/admissionregistration.k8s.io/v1/{url}/{name}"
            ))
            .body(Vec::new())?;
        client
            .request_text(request)
            .await
            .with_context(|| format!("deleting {kind} {name}"))?;
    }
    if !report.is_empty() {
        bail!("{report}");
    }
    Ok(())
}
