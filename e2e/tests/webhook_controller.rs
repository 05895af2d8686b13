//! Proof for issue 32, item 2 (admission webhooks watched by `vapcheck controller`), on the real
//! kube-apiserver 1.37.1 with a real HTTPS webhook server started here (tokio-rustls, an
//! AdmissionReview v1 responder on 127.0.0.1 that admits everything and counts requests).
//!
//! The control plane is this test's own, started with `--enable-aggregator-routing=true`, so
//! that kube-apiserver resolves a webhook Service to its EndpointSlices itself
//! (`NewEndpointServiceResolver`; without the flag it dials the cluster IP, which needs a
//! service proxy this control plane does not run).
//!
//! One test, `webhooks_are_reported_and_cleared`, runs two cases on one control plane:
//!
//! 1. `a_service_without_endpoints_is_reported_and_clears`: a `Fail` webhook whose Service has
//!    no endpoints denies a request with the API server's exact text, and vapcheck had reported
//!    it within 5 s (one Warning Event `WebhookNoReadyEndpoints`, `vapcheck_webhook_state`
//!    `no_ready_endpoints`); a ready EndpointSlice clears it within 5 s (one Normal Event
//!    `WebhookEndpointsReady`, state `available`, one ready endpoint).
//! 2. `an_expired_ca_bundle_is_reported_and_clears`: a webhook through `clientConfig.url` to the
//!    server, whose `caBundle` is an expired CA (the one that signed the server's certificate):
//!    the request is denied with Go's x509 error, and vapcheck had reported it within 5 s; with
//!    a valid CA the request reaches the server and is admitted, and the report clears.
//!
//! `cargo test --test e2e_webhook_controller -- --nocapture`.

#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{Cluster, UpOptions, Vapcheck};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
#[tokio::test]
async fn webhooks_are_reported_and_cleared() -> anyhow::Result<()> {
    let s = setup().await?;
    let client = s.cluster.client().await?;
    a_service_without_endpoints_is_reported_and_clears(&s, &client).await?;
    an_expired_ca_bundle_is_reported_and_clears(&s, &client).await?;
    Ok(())
}

/// A CA valid from `from` to `to` (years) and a serving certificate for 127.0.0.1 it signed
/// (valid now): (CA PEM, server certificate DER, server key DER).
fn certificates(name: &str, from: i32, to: i32) -> anyhow::Result<(String, Vec<u8>, Vec<u8>)> {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, name.to_owned());
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.not_before = rcgen::date_time_ymd(from, 1, 1);
    ca.not_after = rcgen::date_time_ymd(to, 1, 1);
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?;
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2090, 1, 1);
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok((
        pem(ca_cert.der()),
        leaf_cert.der().to_vec(),
        leaf_key.serialize_der(),
    ))
}

/// PEM of a DER certificate (rcgen's `pem` feature is off; a ByteString serialises as base64).
fn pem(der: &[u8]) -> String {
    let b64 = serde_json::to_value(k8s_openapi::ByteString(der.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let lines: Vec<String> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// An HTTPS AdmissionReview v1 responder on 127.0.0.1 that admits every request; returns its
/// port and the count of reviews answered.
async fn webhook_server(cert: Vec<u8>, key: Vec<u8>) -> anyhow::Result<(u16, Arc<AtomicUsize>)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = rustls::pki_types::PrivateKeyDer::try_from(key).map_err(|e| anyhow::anyhow!(e))?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![rustls::pki_types::CertificateDer::from(cert)], key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let count = Arc::new(AtomicUsize::new(0));
    let answered = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let answered = Arc::clone(&answered);
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                // One request per read loop (keep-alive: several in turn).
                let mut buf: Vec<u8> = Vec::new();
                loop {
                    let mut chunk = [0u8; 8192];
                    let Ok(n) = tls.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    let body: Value =
                        serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap_or_default();
                    buf.drain(..end + 4 + length);
                    let review = json!({"apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": body["request"]["uid"], "allowed": true}});
                    let text = review.to_string();
                    answered.fetch_add(1, Ordering::SeqCst);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    if tls.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((port, count))
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
/// configuration; returns how long it took.
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
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(t, r, n)| (t.to_string(), r.to_string(), n.clone()))
        .collect();
    let mut last = String::new();
    while started.elapsed() < REPORT {
        let metrics = support::http_get(&s.metrics, "/metrics")?;
        let got = events(client, configuration).await?;
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
    let took = wait_for_report(s, client, &name, hook, "available", &[warning, normal]).await?;
    eprintln!("e2e: ready endpoint reported in {took:.1?}");
    let metrics = support::http_get(&s.metrics, "/metrics")?;
    assert_eq!(
        sample(&metrics, "vapcheck_webhook_ready_endpoints", &labels),
        Some(1.0)
    );
    // Now kube-apiserver picks the endpoint (192.0.2.10, TEST-NET-1: nothing answers).
    let after = create_config_map(client, &ns).await?;
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
    let (expired_ca, expired_cert, expired_key) =
        certificates("vapcheck e2e expired CA", 2020, 2021)?;
    let (valid_ca, valid_cert, valid_key) = certificates("vapcheck e2e CA", 2020, 2090)?;
    let (expired_port, expired_count) = webhook_server(expired_cert, expired_key).await?;
    let (valid_port, valid_count) = webhook_server(valid_cert, valid_key).await?;
    let ns = format!("whc-url-{}", support::unix_ms());
    create_namespace(client, &ns).await?;
    let name = format!("url-{}.e2e.vapcheck.dev", support::unix_ms());
    let hook = "url.vapcheck.example.com";
    let url_config = |port: u16, ca: &str| {
        json!({"url": format!("https://127.0.0.1:{port}/validate"),
               "caBundle": k8s_openapi::ByteString(ca.as_bytes().to_vec())})
    };
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
    assert_eq!(
        expired_count.load(Ordering::SeqCst),
        0,
        "no review reached the server"
    );

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
    assert_eq!(valid_count.load(Ordering::SeqCst), 1, "one review answered");
    ensure!(expired_count.load(Ordering::SeqCst) == 0);
    Ok(())
}
