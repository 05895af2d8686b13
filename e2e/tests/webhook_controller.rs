//! Proof for issue 32, item 2 (admission webhooks watched by `vapcheck controller`), on the real
//! kube-apiserver 1.37.1 with a real HTTPS webhook server started here
//! (e2e/support/webhook_server.rs: tokio-rustls, an AdmissionReview responder on 127.0.0.1 that
//! admits everything and counts requests).
//!
//! The control plane is this test's own, started with `--enable-aggregator-routing=true`, so
//! that kube-apiserver resolves a webhook Service to its EndpointSlices itself
//! (`NewEndpointServiceResolver`; without the flag it dials the cluster IP, which needs a
//! service proxy this control plane does not run).
//!
//! One test, `webhooks_are_reported_and_cleared`, runs six cases on one control plane, each a
//! `Fail` webhook whose state vapcheck must report within 5 s (the Warning Event on the
//! configuration and `vapcheck_webhook_state`) while kube-apiserver denies a matching request
//! with the exact text compared here, and whose fix must clear the report within 5 s (a Normal
//! Event):
//!
//! 1. `a_service_without_endpoints_is_reported_and_clears` (`no_ready_endpoints`): a ready
//!    EndpointSlice clears it (one ready endpoint); deleting the slice reports it again, as a
//!    third Event (webhook Events are not folded into an earlier one's series).
//! 2. `an_expired_ca_bundle_is_reported_and_clears` (`certificate_expired`): a webhook through
//!    `clientConfig.url` whose `caBundle` is an expired CA, the one that signed the server's
//!    certificate (Go's x509 error); with a valid CA the request reaches the server and is
//!    admitted.
//! 3. `a_missing_service_is_reported_and_clears` (`service_not_found`): creating the Service
//!    clears it and shows the next problem (`service_port_not_found`: it has no port 443);
//!    adding the port clears that and shows the next (no ready endpoints).
//! 4. `an_invalid_ca_bundle_is_reported_and_clears` (`ca_bundle_invalid`): client-go's error
//!    on a bundle without a certificate; a valid CA clears it and the review is admitted.
//! 5. `an_expiring_certificate_is_reported_and_clears` (`certificate_expiring`): a CA that
//!    expires in a day (the review is admitted), cleared when replaced; then a CA that expires
//!    in 10 s, reported expired within 5 s of its `notAfter` with no change to any object, and
//!    kube-apiserver's x509 error from then on.
//!
//! 6. `offline_findings_are_reported_and_clear` (`findings`): an available webhook (a valid CA,
//!    the review admitted) whose `admissionReviewVersions` lists v1beta1 first, VAP126 as
//!    `vapcheck check` reports it; putting v1 first clears it.
//!
//! `cargo test --test e2e -- --group webhook_controller --nocapture`.

use crate::support;
use crate::webhook_server;

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{Cluster, UpOptions, Vapcheck};
use webhook_server::{Reply, certificates, certificates_for_years, valid_between};

/// How soon vapcheck must report a cause, and a fix.
const REPORT: Duration = Duration::from_secs(5);

/// The control plane of this binary (aggregator routing on) and a controller on it.
struct Setup {
    cluster: Cluster,
    vapcheck: Vapcheck,
    metrics: String,
}

/// Starts the control plane (aggregator routing on) and a controller on it.
async fn setup() -> anyhow::Result<Setup> {
    let cluster = Cluster::start(UpOptions {
        apiserver_extra_args: Some("--enable-aggregator-routing=true".to_owned()),
        ..UpOptions::default()
    })?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "webhooks",
        &["--leader-election", "false"],
    )?;
    let metrics = support::wait_for(
        "vapcheck's metrics address",
        Duration::from_secs(60),
        || async { Ok(support::metrics_addr(&vapcheck).ok()) },
    )
    .await?;
    support::wait_for(
        "vapcheck watching webhook configurations",
        Duration::from_secs(60),
        || async {
            Ok(vapcheck
                .log_text()
                .contains("watching admission webhook configurations")
                .then_some(()))
        },
    )
    .await?;
    Ok(Setup {
        cluster,
        vapcheck,
        metrics,
    })
}

/// Both cases on one control plane and controller (stopped when the test ends).
async fn webhooks_are_reported_and_cleared() -> anyhow::Result<()> {
    let s = setup().await?;
    let client = s.cluster.client().await?;
    a_service_without_endpoints_is_reported_and_clears(&s, &client).await?;
    an_expired_ca_bundle_is_reported_and_clears(&s, &client).await?;
    a_missing_service_is_reported_and_clears(&s, &client).await?;
    an_invalid_ca_bundle_is_reported_and_clears(&s, &client).await?;
    an_expiring_certificate_is_reported_and_clears(&s, &client).await?;
    offline_findings_are_reported_and_clear(&s, &client).await?;
    Ok(())
}

/// The webhook of the tests: `Fail`, CREATE of ConfigMaps in `namespace` only.
fn webhook(name: &str, namespace: &str, client_config: Value) -> Value {
    json!({"name": name, "clientConfig": client_config, "failurePolicy": "Fail",
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["configmaps"]}]})
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name}}))?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// The API server's answer to creating a ConfigMap in `namespace`: `Ok(())` or its message.
async fn create_config_map(client: &Client, namespace: &str) -> anyhow::Result<Result<(), String>> {
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{}", support::unix_ms())}}))?;
    match Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cm)
        .await
    {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(s)) => Ok(Err(s.message)),
        Err(e) => Err(e).context("creating a ConfigMap"),
    }
}

/// (type, reason, note) of the Events on configuration `name`, oldest first.
async fn events(client: &Client, name: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let mut list: Vec<Event> = Api::<Event>::all(client.clone())
        .list(&ListParams::default().fields(&format!("regarding.name={name}")))
        .await?
        .items;
    list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    Ok(list
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect())
}

/// The value of the sample `name{labels...}` (labels in the order vapcheck writes them).
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until vapcheck shows `state` for the webhook and `events` are exactly those on the
/// configuration (in any order); returns how long it took.
async fn wait_for_report(
    s: &Setup,
    client: &Client,
    configuration: &str,
    webhook: &str,
    state: &str,
    want: &[(&str, &str, String)],
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{configuration}\",webhook=\"{webhook}\",failure_policy=\"Fail\",state=\"{state}\""
    );
    // Compared as multisets: Events sent in one assessment may carry the same time.
    let mut want: Vec<(String, String, String)> = want
        .iter()
        .map(|(t, r, n)| (t.to_string(), r.to_string(), n.clone()))
        .collect();
    want.sort();
    let mut last = String::new();
    while started.elapsed() < REPORT {
        let metrics = support::http_get(&s.metrics, "/metrics")?;
        let mut got = events(client, configuration).await?;
        got.sort();
        let value = sample(&metrics, "vapcheck_webhook_state", &labels);
        if value == Some(1.0) && got == want {
            return Ok(started.elapsed());
        }
        last = format!("vapcheck_webhook_state{{{labels}}} = {value:?}; events {got:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!(
        "not reported within {REPORT:?}: {last}\nwanted events {want:#?}\nvapcheck log:\n{}",
        s.vapcheck.log_text()
    )
}

async fn a_service_without_endpoints_is_reported_and_clears(
    s: &Setup,
    client: &Client,
) -> anyhow::Result<()> {
    let ns = format!("whc-svc-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), &ns);
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "hook"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}))?,
        )
        .await?;
    let name = format!("svc-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "svc.vapcheck.example.com";
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook(hook, &ns, json!({"service": {"namespace": ns, "name": "hook",
            "path": "/validate", "port": 443}}))]}))?;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    configs.create(&PostParams::default(), &config).await?;
    let warning = (
        "Warning",
        "WebhookNoReadyEndpoints",
        format!(
            "webhook \"{hook}\": clientConfig.service: Service {ns}/hook has no ready endpoint for port 443 (kube-apiserver with aggregator routing: no endpoints available for service \"hook\"; else the connection to the cluster IP is refused); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "no_ready_endpoints",
        std::slice::from_ref(&warning),
    )
    .await?;
    eprintln!("e2e: no ready endpoints reported in {took:.1?}");
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    assert_eq!(
        sample(&metrics, "vapcheck_webhook_ready_endpoints", &labels),
        Some(0.0)
    );
    // The webhook configuration is in kube-apiserver's informer by now (vapcheck saw it).
    let denied = create_config_map(client, &ns).await?;
    assert_eq!(
        denied,
        Err(format!(
            "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://hook.{ns}.svc:443/validate?timeout=2s\": no endpoints available for service \"hook\""
        ))
    );

    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), &ns);
    slices
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "hook-1", "labels": {"kubernetes.io/service-name": "hook"}},
                "addressType": "IPv4",
                "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["192.0.2.10"], "conditions": {"ready": true}}]}))?,
        )
        .await?;
    let normal = (
        "Normal",
        "WebhookEndpointsReady",
        format!("webhook \"{hook}\": the Service has 1 ready endpoint(s) for the webhook's port"),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "available",
        &[warning.clone(), normal.clone()],
    )
    .await?;
    eprintln!("e2e: ready endpoint reported in {took:.1?}");
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(&metrics, "vapcheck_webhook_ready_endpoints", &labels),
        Some(1.0)
    );
    // Now kube-apiserver picks the endpoint (192.0.2.10, TEST-NET-1: nothing answers).
    let after = create_config_map(client, &ns).await?;
    // The endpoints gone again: a new Warning (not folded into the first one's series).
    slices.delete("hook-1", &DeleteParams::default()).await?;
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "no_ready_endpoints",
        &[warning.clone(), normal, warning],
    )
    .await?;
    eprintln!("e2e: endpoints gone reported in {took:.1?}");
    configs.delete(&name, &DeleteParams::default()).await?;
    match &after {
        Err(m) if m.starts_with(&format!("Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://hook.{ns}.svc:443/validate?timeout=2s\": ")) && !m.contains("no endpoints available") => {}
        other => bail!("after the EndpointSlice: {other:?}"),
    }
    eprintln!("e2e: with the endpoint: {after:?}");
    Ok(())
}

async fn an_expired_ca_bundle_is_reported_and_clears(
    s: &Setup,
    client: &Client,
) -> anyhow::Result<()> {
    let expired = certificates_for_years("vapcheck e2e expired CA", 2020, 2021)?;
    let valid = certificates_for_years("vapcheck e2e CA", 2020, 2090)?;
    let expired_server = webhook_server::start(&expired, Reply::SameVersion).await?;
    let valid_server = webhook_server::start(&valid, Reply::SameVersion).await?;
    let (expired_port, valid_port) = (expired_server.port, valid_server.port);
    let (expired_ca, valid_ca) = (expired.ca_pem.clone(), valid.ca_pem.clone());
    let ns = format!("whc-url-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("url-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "url.vapcheck.example.com";
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook(hook, &ns, url_config(expired_port, &expired_ca))]}))?;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    configs.create(&PostParams::default(), &config).await?;
    let warning = (
        "Warning",
        "WebhookCertificateExpired",
        format!(
            "webhook \"{hook}\": clientConfig.caBundle: every certificate has expired, the last (CN=vapcheck e2e expired CA) at 2021-01-01T00:00:00Z (kube-apiserver: x509: certificate has expired or is not yet valid); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "certificate_expired",
        std::slice::from_ref(&warning),
    )
    .await?;
    eprintln!("e2e: expired caBundle reported in {took:.1?}");
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(
            &metrics,
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            &labels
        ),
        Some(1_609_459_200.0)
    );
    let denied = create_config_map(client, &ns).await?;
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://127.0.0.1:{expired_port}/validate?timeout=2s\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time "
    );
    let suffix = " is after 2021-01-01T00:00:00Z";
    match &denied {
        Err(m) if m.starts_with(&prefix) && m.ends_with(suffix) => {}
        other => bail!("with the expired CA: {other:?}\nexpected {prefix}<time>{suffix}"),
    }
    assert_eq!(expired_server.answered(), 0, "no review reached the server");

    // A valid CA (and the server whose certificate it signed).
    let patch = json!({"webhooks": [webhook(hook, &ns, url_config(valid_port, &valid_ca))]});
    configs
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let normal = (
        "Normal",
        "WebhookCertificateValid",
        format!("webhook \"{hook}\": clientConfig.caBundle is valid until 2090-01-01T00:00:00Z"),
    );
    let took = wait_for_report(s, client, &name, hook, "available", &[warning, normal]).await?;
    eprintln!("e2e: valid caBundle reported in {took:.1?}");
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(
            &metrics,
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            &labels
        ),
        Some(3_786_912_000.0)
    );
    // kube-apiserver's webhook informer may lag vapcheck's by a moment: admitted within 5 s.
    let admitted = support::wait_for("the ConfigMap admitted", REPORT, || async {
        Ok(create_config_map(client, &ns).await?.ok())
    })
    .await;
    configs.delete(&name, &DeleteParams::default()).await?;
    admitted?;
    assert_eq!(valid_server.answered(), 1, "one review answered");
    ensure!(expired_server.answered() == 0);
    Ok(())
}

/// `seconds` as RFC 3339 UTC (as vapcheck and Go's x509 errors write it).
fn rfc3339(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn unix_seconds() -> u64 {
    u64::try_from(support::unix_ms() / 1000).unwrap_or_default()
}

/// A `clientConfig` through `url` to the server on `port`, trusting `ca`.
fn url_config(port: u16, ca: &str) -> Value {
    json!({"url": format!("https://127.0.0.1:{port}/validate"),
           "caBundle": k8s_openapi::ByteString(ca.as_bytes().to_vec())})
}

/// Creates a configuration with the one webhook `hook` for `namespace`.
async fn create_configuration(
    client: &Client,
    name: &str,
    hook: &str,
    namespace: &str,
    client_config: Value,
) -> anyhow::Result<Api<ValidatingWebhookConfiguration>> {
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [webhook(hook, namespace, client_config)]}))?;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    configs.create(&PostParams::default(), &config).await?;
    Ok(configs)
}

/// Replaces the webhook's `clientConfig`.
async fn set_client_config(
    configs: &Api<ValidatingWebhookConfiguration>,
    name: &str,
    hook: &str,
    namespace: &str,
    client_config: Value,
) -> anyhow::Result<()> {
    let patch = json!({"webhooks": [webhook(hook, namespace, client_config)]});
    configs
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Creates ConfigMaps in `namespace` until kube-apiserver's answer satisfies `want` (its webhook
/// informer may lag vapcheck's by a moment), within [`REPORT`]; returns the last answer.
async fn wait_for_answer(
    client: &Client,
    namespace: &str,
    want: impl Fn(&Result<(), String>) -> bool,
) -> anyhow::Result<Result<(), String>> {
    let started = Instant::now();
    loop {
        let answer = create_config_map(client, namespace).await?;
        if want(&answer) || started.elapsed() >= REPORT {
            return Ok(answer);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// service_not_found, then service_port_not_found: a `Fail` webhook whose Service does not
/// exist, then has no port 443.
async fn a_missing_service_is_reported_and_clears(
    s: &Setup,
    client: &Client,
) -> anyhow::Result<()> {
    let ns = format!("whc-nosvc-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("nosvc-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "nosvc.vapcheck.example.com";
    let service_ref = json!({"service": {"namespace": ns, "name": "hook", "path": "/validate",
        "port": 443}});
    let configs = create_configuration(client, &name, hook, &ns, service_ref).await?;
    let warning = (
        "Warning",
        "WebhookServiceNotFound",
        format!(
            "webhook \"{hook}\": clientConfig.service: Service {ns}/hook does not exist (kube-apiserver: service \"hook\" not found); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "service_not_found",
        std::slice::from_ref(&warning),
    )
    .await?;
    eprintln!("e2e: missing Service reported in {took:.1?}");
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(&metrics, "vapcheck_webhook_ready_endpoints", &labels),
        None,
        "no endpoint count without a Service"
    );
    let want = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://hook.{ns}.svc:443/validate?timeout=2s\": service \"hook\" not found"
    );
    let denied = wait_for_answer(client, &ns, |a| a.as_ref().err() == Some(&want)).await?;
    assert_eq!(denied, Err(want));

    // The Service appears, without the webhook's port: that problem clears, the next shows.
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), &ns);
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "hook"},
                "spec": {"ports": [{"name": "https", "port": 8443, "targetPort": 8443}]}}))?,
        )
        .await?;
    let normal = (
        "Normal",
        "WebhookServiceFound",
        format!("webhook \"{hook}\": the Service exists"),
    );
    let no_port = (
        "Warning",
        "WebhookServicePortNotFound",
        format!(
            "webhook \"{hook}\": clientConfig.service: Service {ns}/hook has no port 443 (kube-apiserver: no service port 443 found for service \"hook\"); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "service_port_not_found",
        &[warning.clone(), normal.clone(), no_port.clone()],
    )
    .await?;
    eprintln!("e2e: the Service without the port reported in {took:.1?}");
    let want = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://hook.{ns}.svc:443/validate?timeout=2s\": no service port 443 found for service \"hook\""
    );
    let denied = wait_for_answer(client, &ns, |a| a.as_ref().err() == Some(&want)).await?;
    assert_eq!(denied, Err(want));

    // The port added (still without endpoints): cleared, and the next problem shows.
    let patch = json!({"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}});
    services
        .patch("hook", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let port_found = (
        "Normal",
        "WebhookServicePortFound",
        format!("webhook \"{hook}\": the Service has the webhook's port"),
    );
    let no_endpoints = (
        "Warning",
        "WebhookNoReadyEndpoints",
        format!(
            "webhook \"{hook}\": clientConfig.service: Service {ns}/hook has no ready endpoint for port 443 (kube-apiserver with aggregator routing: no endpoints available for service \"hook\"; else the connection to the cluster IP is refused); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "no_ready_endpoints",
        &[warning, normal, no_port, port_found, no_endpoints],
    )
    .await?;
    eprintln!("e2e: the Service's port reported in {took:.1?}");
    let want = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://hook.{ns}.svc:443/validate?timeout=2s\": no endpoints available for service \"hook\""
    );
    let after = wait_for_answer(client, &ns, |a| a.as_ref().err() == Some(&want)).await?;
    configs.delete(&name, &DeleteParams::default()).await?;
    assert_eq!(after, Err(want));
    Ok(())
}

/// ca_bundle_invalid: a `caBundle` without a certificate.
async fn an_invalid_ca_bundle_is_reported_and_clears(
    s: &Setup,
    client: &Client,
) -> anyhow::Result<()> {
    let valid = certificates_for_years("vapcheck e2e CA", 2020, 2090)?;
    let server = webhook_server::start(&valid, Reply::SameVersion).await?;
    let ns = format!("whc-badca-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("badca-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "badca.vapcheck.example.com";
    let configs = create_configuration(
        client,
        &name,
        hook,
        &ns,
        url_config(server.port, "not a certificate\n"),
    )
    .await?;
    let warning = (
        "Warning",
        "WebhookCABundleInvalid",
        format!(
            "webhook \"{hook}\": clientConfig.caBundle holds no PEM certificate that parses (client-go: unable to load root certificates); failurePolicy is Fail: kube-apiserver rejects every matching request"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "ca_bundle_invalid",
        std::slice::from_ref(&warning),
    )
    .await?;
    eprintln!("e2e: invalid caBundle reported in {took:.1?}");
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(
            &metrics,
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            &labels
        ),
        None,
        "no expiry without a certificate"
    );
    let want = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": could not get REST client: unable to load root certificates: unable to parse bytes as PEM block"
    );
    let denied = wait_for_answer(client, &ns, |a| a.as_ref().err() == Some(&want)).await?;
    assert_eq!(denied, Err(want));
    assert_eq!(server.answered(), 0, "no review reached the server");

    set_client_config(
        &configs,
        &name,
        hook,
        &ns,
        url_config(server.port, &valid.ca_pem),
    )
    .await?;
    let normal = (
        "Normal",
        "WebhookCABundleValid",
        format!("webhook \"{hook}\": clientConfig.caBundle parses"),
    );
    let took = wait_for_report(s, client, &name, hook, "available", &[warning, normal]).await?;
    eprintln!("e2e: valid caBundle reported in {took:.1?}");
    let admitted = wait_for_answer(client, &ns, Result::is_ok).await?;
    configs.delete(&name, &DeleteParams::default()).await?;
    assert_eq!(admitted, Ok(()));
    assert_eq!(server.answered(), 1, "one review answered");
    Ok(())
}

/// certificate_expiring: a CA that expires in a day warns and clears when replaced; one that
/// expires in seconds warns, then is reported expired within 5 s of its `notAfter` (and
/// kube-apiserver then fails the call with Go's x509 error).
async fn an_expiring_certificate_is_reported_and_clears(
    s: &Setup,
    client: &Client,
) -> anyhow::Result<()> {
    let now = unix_seconds();
    let day_end = now + 86_400;
    let day = certificates("vapcheck e2e CA for a day", &["127.0.0.1"], |ca| {
        valid_between(ca, now - 3_600, day_end);
    })?;
    let valid = certificates_for_years("vapcheck e2e CA", 2020, 2090)?;
    let day_server = webhook_server::start(&day, Reply::SameVersion).await?;
    let valid_server = webhook_server::start(&valid, Reply::SameVersion).await?;
    let ns = format!("whc-expiring-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("expiring-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "expiring.vapcheck.example.com";
    let configs = create_configuration(
        client,
        &name,
        hook,
        &ns,
        url_config(day_server.port, &day.ca_pem),
    )
    .await?;
    let expiring = |cn: &str, at: u64| {
        (
            "Warning",
            "WebhookCertificateExpiring",
            format!(
                "webhook \"{hook}\": clientConfig.caBundle: the last certificate (CN={cn}) expires at {}; after that with failurePolicy Fail: kube-apiserver rejects every matching request",
                rfc3339(at)
            ),
        )
    };
    let first = expiring("vapcheck e2e CA for a day", day_end);
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "certificate_expiring",
        std::slice::from_ref(&first),
    )
    .await?;
    eprintln!("e2e: a CA expiring in a day reported in {took:.1?}");
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(
            &metrics,
            "vapcheck_webhook_ca_bundle_expiry_timestamp_seconds",
            &labels
        ),
        Some(day_end as f64)
    );
    // Still valid: the review reaches the server.
    // Until kube-apiserver's informer has the configuration, a ConfigMap is admitted without
    // the call: wait for the one that reached the server.
    let admitted =
        wait_for_answer(client, &ns, |a| a.is_ok() && day_server.answered() >= 1).await?;
    assert_eq!(admitted, Ok(()));
    assert_eq!(day_server.answered(), 1, "one review answered");

    // Replaced by a CA valid until 2090: cleared.
    set_client_config(
        &configs,
        &name,
        hook,
        &ns,
        url_config(valid_server.port, &valid.ca_pem),
    )
    .await?;
    let cleared = (
        "Normal",
        "WebhookCertificateValid",
        format!("webhook \"{hook}\": clientConfig.caBundle is valid until 2090-01-01T00:00:00Z"),
    );
    let took = wait_for_report(s, client, &name, hook, "available", &[first, cleared]).await?;
    eprintln!("e2e: the replaced CA reported in {took:.1?}");
    configs.delete(&name, &DeleteParams::default()).await?;

    // A CA that expires in 10 s: expiring now, expired (and no Normal Event between) within
    // 5 s of its notAfter, without any change to the objects. Another configuration: on the
    // first, kube-runtime's Recorder would fold this second WebhookCertificateExpiring Warning
    // into the first Event's series, with the first one's note (docs/webhooks.md).
    let name = format!("expiring-short-{}.e2e.vapcheck.dev", support::unix_ms());
    let now = unix_seconds();
    let short_end = now + 10;
    let short = certificates("vapcheck e2e CA for seconds", &["127.0.0.1"], |ca| {
        valid_between(ca, now - 3_600, short_end);
    })?;
    let short_server = webhook_server::start(&short, Reply::SameVersion).await?;
    let configs = create_configuration(
        client,
        &name,
        hook,
        &ns,
        url_config(short_server.port, &short.ca_pem),
    )
    .await?;
    let second = expiring("vapcheck e2e CA for seconds", short_end);
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "certificate_expiring",
        std::slice::from_ref(&second),
    )
    .await?;
    eprintln!("e2e: a CA expiring in 10 s reported in {took:.1?}");
    let until_expiry = Duration::from_millis(
        (short_end * 1000).saturating_sub(u64::try_from(support::unix_ms()).unwrap_or(u64::MAX)),
    );
    tokio::time::sleep(until_expiry).await;
    let expired = (
        "Warning",
        "WebhookCertificateExpired",
        format!(
            "webhook \"{hook}\": clientConfig.caBundle: every certificate has expired, the last (CN=vapcheck e2e CA for seconds) at {} (kube-apiserver: x509: certificate has expired or is not yet valid); failurePolicy is Fail: kube-apiserver rejects every matching request",
            rfc3339(short_end)
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "certificate_expired",
        &[second, expired],
    )
    .await?;
    eprintln!("e2e: the CA's expiry reported {took:.1?} after its notAfter");
    let denied = create_config_map(client, &ns).await?;
    configs.delete(&name, &DeleteParams::default()).await?;
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: Post \"https://127.0.0.1:{}/validate?timeout=2s\": tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time ",
        short_server.port
    );
    let suffix = format!(" is after {}", rfc3339(short_end));
    match &denied {
        Err(m) if m.starts_with(&prefix) && m.ends_with(&suffix) => {}
        other => bail!("with the expired CA: {other:?}\nexpected {prefix}<time>{suffix}"),
    }
    assert_eq!(short_server.answered(), 0, "no review reached the server");
    Ok(())
}

/// `findings`: the offline findings of `vapcheck check` on an otherwise available webhook (a
/// Warning `WebhookFindings` naming the first, `vapcheck_webhook_state{state="findings"}` and
/// `vapcheck_webhook_findings` 1), cleared by fixing the configuration (a Normal
/// `WebhookFindingsResolved`), each within 5 s.
async fn offline_findings_are_reported_and_clear(s: &Setup, client: &Client) -> anyhow::Result<()> {
    let valid = certificates_for_years("vapcheck e2e CA", 2020, 2090)?;
    let server = webhook_server::start(&valid, Reply::SameVersion).await?;
    let ns = format!("whc-findings-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("findings-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "findings.vapcheck.example.com";
    let with_versions = |versions: Value| {
        let mut w = webhook(hook, &ns, url_config(server.port, &valid.ca_pem));
        w["admissionReviewVersions"] = versions;
        w
    };
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [with_versions(json!(["v1beta1", "v1"]))]}))?;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    configs.create(&PostParams::default(), &config).await?;
    let warning = (
        "Warning",
        "WebhookFindings",
        format!(
            "webhook \"{hook}\": 1 finding(s) (as vapcheck check reports them), the first: VAP126 webhooks[0].admissionReviewVersions: admissionReviewVersions lists v1beta1 before v1: kube-apiserver sends the webhook AdmissionReview admission.k8s.io/v1beta1 (the first version it supports in the list) and takes only a v1beta1 answer: a webhook that answers in v1 fails every call (converting (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown conversion); put v1 first"
        ),
    );
    let took = wait_for_report(
        s,
        client,
        &name,
        hook,
        "findings",
        std::slice::from_ref(&warning),
    )
    .await?;
    eprintln!("e2e: offline findings reported in {took:.1?}");
    let labels = format!(
        "kind=\"ValidatingWebhookConfiguration\",configuration=\"{name}\",webhook=\"{hook}\""
    );
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(&metrics, "vapcheck_webhook_findings", &labels),
        Some(1.0)
    );
    // Available meanwhile: the server answers in the version it was sent (v1beta1).
    let admitted = wait_for_answer(client, &ns, Result::is_ok).await?;
    assert_eq!(admitted, Ok(()));

    let patch = json!({"webhooks": [with_versions(json!(["v1", "v1beta1"]))]});
    configs
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let normal = (
        "Normal",
        "WebhookFindingsResolved",
        format!("webhook \"{hook}\": no findings"),
    );
    let took = wait_for_report(s, client, &name, hook, "available", &[warning, normal]).await;
    let metrics = support::http_get(&s.metrics, "/metrics");
    configs.delete(&name, &DeleteParams::default()).await?;
    eprintln!("e2e: offline findings cleared in {:.1?}", took?);
    assert_eq!(
        sample(&metrics?, "vapcheck_webhook_findings", &labels),
        Some(0.0)
    );
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio webhooks_are_reported_and_cleared,
}
