//! What happens now to the requests a webhook matches, decided from the objects kube-apiserver
//! consults when it calls the webhook: the Service and EndpointSlices of `clientConfig.service`,
//! and the certificates of `clientConfig.caBundle`. Pure: the controller (`controller::webhooks`)
//! passes the objects it watches and the time.
//!
//! How kube-apiserver 1.37.1 reaches a webhook Service (k8s.io/apiserver v0.37.1
//! `pkg/util/webhook/client.go`, `ClientManager.HookClient`): it sends the request to
//! `https://<name>.<namespace>.svc:<port>` and resolves that host with its `ServiceResolver`
//! on every connection. Which resolver is `buildServiceResolver` of k8s.io/kubernetes v1.37.1
//! `cmd/kube-apiserver/app/server.go`:
//!
//! - by default `NewClusterIPServiceResolver` (k8s.io/kube-aggregator v0.37.1
//!   `pkg/apiserver/resolvers.go`), i.e. `proxy.ResolveCluster` (k8s.io/apiserver
//!   `pkg/util/proxy/proxy.go`): the Service must exist (else the lister's `service "<name>"
//!   not found`) and have the port (`findServicePort`: `no service port <port> found for
//!   service "<name>"`); the request goes to the cluster IP, where the service proxy
//!   (kube-proxy) rejects connections while the Service has no ready endpoint;
//! - with `--enable-aggregator-routing=true`, `NewEndpointServiceResolver`, i.e.
//!   `proxy.ResolveEndpoint`: the same two checks, then `RandomEndpoint` picks an endpoint of
//!   the Service's EndpointSlices (those labelled `kubernetes.io/service-name`) whose port has
//!   the Service port's name and a number, skipping endpoints whose `conditions.ready` is
//!   false; with none it fails with `no endpoints available for service "<name>"` (proven in
//!   e2e_webhook_controller).
//!
//! Either way a Service without a ready endpoint for the port fails every call. The error
//! becomes `failed calling webhook "<webhook>": ...` (`pkg/util/webhook/error.go`,
//! `ErrCallingWebhook`): with `failurePolicy: Fail` kube-apiserver rejects the request, with
//! `Ignore` it admits it without the webhook's say.
//!
//! `caBundle`: client-go's transport puts it into a certificate pool with Go's
//! `CertPool.AppendCertsFromPEM` (k8s.io/client-go v0.37.1 `transport/transport.go`,
//! `rootCertPool`), which keeps every `CERTIFICATE` block that parses and fails only when none
//! does. Go's verifier checks the validity period of the root too (`crypto/x509`
//! `Certificate.isValid`), so once every certificate of the bundle has expired no serving
//! certificate can be verified: the call fails with `tls: failed to verify certificate: x509:
//! certificate has expired or is not yet valid: current time <now> is after <notAfter>`
//! (proven in e2e_webhook_controller). With several certificates (a CA rotation) vapcheck cannot know
//! which one signed the serving certificate: the bundle counts as expired when its last
//! certificate has, and its expiry is that certificate's `notAfter`.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::apiserver::webhook::Webhook;

/// The label that ties an EndpointSlice to its Service (`discoveryv1.LabelServiceName`).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A kind of problem, in order of precedence for [`State`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProblemKind {
    /// `clientConfig.service` names a Service that does not exist.
    ServiceNotFound,
    /// The Service has no port with the webhook's port number.
    ServicePortNotFound,
    /// The Service has no ready endpoint for the port.
    NoReadyEndpoints,
    /// `caBundle` holds no PEM certificate that parses.
    CaBundleInvalid,
    /// Every certificate of `caBundle` has expired.
    CertificateExpired,
    /// The last certificate of `caBundle` expires within the warning threshold.
    CertificateExpiring,
    /// The offline findings (`vapcheck check`'s, for the webhook).
    Findings,
}

impl ProblemKind {
    /// Every kind, in precedence order.
    pub const ALL: [ProblemKind; 7] = [
        ProblemKind::ServiceNotFound,
        ProblemKind::ServicePortNotFound,
        ProblemKind::NoReadyEndpoints,
        ProblemKind::CaBundleInvalid,
        ProblemKind::CertificateExpired,
        ProblemKind::CertificateExpiring,
        ProblemKind::Findings,
    ];

    /// The reason of the Warning Event when the problem appears.
    pub fn reason(self) -> &'static str {
        match self {
            ProblemKind::ServiceNotFound => "WebhookServiceNotFound",
            ProblemKind::ServicePortNotFound => "WebhookServicePortNotFound",
            ProblemKind::NoReadyEndpoints => "WebhookNoReadyEndpoints",
            ProblemKind::CaBundleInvalid => "WebhookCABundleInvalid",
            ProblemKind::CertificateExpired => "WebhookCertificateExpired",
            ProblemKind::CertificateExpiring => "WebhookCertificateExpiring",
            ProblemKind::Findings => "WebhookFindings",
        }
    }

    /// The reason of the Normal Event when the problem clears.
    pub fn resolved_reason(self) -> &'static str {
        match self {
            ProblemKind::ServiceNotFound => "WebhookServiceFound",
            ProblemKind::ServicePortNotFound => "WebhookServicePortFound",
            ProblemKind::NoReadyEndpoints => "WebhookEndpointsReady",
            ProblemKind::CaBundleInvalid => "WebhookCABundleValid",
            ProblemKind::CertificateExpired | ProblemKind::CertificateExpiring => {
                "WebhookCertificateValid"
            }
            ProblemKind::Findings => "WebhookFindingsResolved",
        }
    }

    /// The `state` label value of `vapcheck_webhook_state` when this is the first problem.
    pub fn state(self) -> State {
        match self {
            ProblemKind::ServiceNotFound => State::ServiceNotFound,
            ProblemKind::ServicePortNotFound => State::ServicePortNotFound,
            ProblemKind::NoReadyEndpoints => State::NoReadyEndpoints,
            ProblemKind::CaBundleInvalid => State::CaBundleInvalid,
            ProblemKind::CertificateExpired => State::CertificateExpired,
            ProblemKind::CertificateExpiring => State::CertificateExpiring,
            ProblemKind::Findings => State::Findings,
        }
    }
}

/// A webhook's state: its first problem, or [`State::Available`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// No problem.
    Available,
    /// See [`ProblemKind::Findings`].
    Findings,
    /// See [`ProblemKind::CertificateExpiring`].
    CertificateExpiring,
    /// See [`ProblemKind::CertificateExpired`].
    CertificateExpired,
    /// See [`ProblemKind::CaBundleInvalid`].
    CaBundleInvalid,
    /// See [`ProblemKind::NoReadyEndpoints`].
    NoReadyEndpoints,
    /// See [`ProblemKind::ServicePortNotFound`].
    ServicePortNotFound,
    /// See [`ProblemKind::ServiceNotFound`].
    ServiceNotFound,
}

impl State {
    /// Every state.
    pub const ALL: [State; 8] = [
        State::Available,
        State::Findings,
        State::CertificateExpiring,
        State::CertificateExpired,
        State::CaBundleInvalid,
        State::NoReadyEndpoints,
        State::ServicePortNotFound,
        State::ServiceNotFound,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Available => "available",
            State::Findings => "findings",
            State::CertificateExpiring => "certificate_expiring",
            State::CertificateExpired => "certificate_expired",
            State::CaBundleInvalid => "ca_bundle_invalid",
            State::NoReadyEndpoints => "no_ready_endpoints",
            State::ServicePortNotFound => "service_port_not_found",
            State::ServiceNotFound => "service_not_found",
        }
    }
}

/// One problem of a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its kind.
    pub kind: ProblemKind,
    /// What is wrong and what kube-apiserver does about it.
    pub message: String,
}

/// What was found about one webhook.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assessment {
    /// Ready endpoints serving the webhook's Service port (`None`: not a Service reference, or
    /// no such Service or port, or an ExternalName Service).
    pub ready_endpoints: Option<u64>,
    /// The `notAfter` (Unix seconds) of the last-expiring certificate of `caBundle` (`None`:
    /// no caBundle, or none that parses).
    pub ca_not_after: Option<i64>,
    /// The problems, in [`ProblemKind`] order.
    pub problems: Vec<Problem>,
}

impl Assessment {
    /// The webhook's state.
    pub fn state(&self) -> State {
        self.problems
            .iter()
            .map(|p| p.kind)
            .min()
            .map_or(State::Available, ProblemKind::state)
    }
}

/// What kube-apiserver does with a matching request when the call fails.
fn consequence(hook: &Webhook) -> &'static str {
    if hook.failure_policy.as_deref() == Some("Ignore") {
        "failurePolicy is Ignore: kube-apiserver admits matching requests without calling the webhook"
    } else {
        "failurePolicy is Fail: kube-apiserver rejects every matching request"
    }
}

/// Assesses `hook` (of a defaulted configuration): `service` is the Service its
/// `clientConfig.service` names (if it exists), `slices` the EndpointSlices of that namespace
/// labelled with its name; `now` and `warn_before` in seconds.
pub fn assess(
    hook: &Webhook,
    service: Option<&Service>,
    slices: &[&EndpointSlice],
    now: i64,
    warn_before: i64,
) -> Assessment {
    let mut out = Assessment::default();
    let client = hook.client_config.clone().unwrap_or_default();
    if let Some(reference) = &client.service {
        let name = reference.name.as_deref().unwrap_or_default();
        let namespace = reference.namespace.as_deref().unwrap_or_default();
        let port = reference.port.unwrap_or(443);
        match service {
            None => out.problems.push(Problem {
                kind: ProblemKind::ServiceNotFound,
                message: format!(
                    "clientConfig.service: Service {namespace}/{name} does not exist (kube-apiserver: service \"{name}\" not found); {}",
                    consequence(hook)
                ),
            }),
            Some(svc) => {
                let spec = svc.spec.clone().unwrap_or_default();
                let service_port = spec
                    .ports
                    .iter()
                    .flatten()
                    .find(|p| p.port == port)
                    .cloned();
                match service_port {
                    None => out.problems.push(Problem {
                        kind: ProblemKind::ServicePortNotFound,
                        message: format!(
                            "clientConfig.service: Service {namespace}/{name} has no port {port} (kube-apiserver: no service port {port} found for service \"{name}\"); {}",
                            consequence(hook)
                        ),
                    }),
                    Some(_) if spec.type_.as_deref() == Some("ExternalName") => {}
                    Some(sp) => {
                        let ready = ready_endpoints(slices, sp.name.as_deref().unwrap_or_default());
                        out.ready_endpoints = Some(ready);
                        if ready == 0 {
                            out.problems.push(Problem {
                                kind: ProblemKind::NoReadyEndpoints,
                                message: format!(
                                    "clientConfig.service: Service {namespace}/{name} has no ready endpoint for port {port} (kube-apiserver with aggregator routing: no endpoints available for service \"{name}\"; else the connection to the cluster IP is refused); {}",
                                    consequence(hook)
                                ),
                            });
                        }
                    }
                }
            }
        }
    }
    if let Some(bundle) = client.ca_bundle.as_ref().filter(|b| !b.0.is_empty()) {
        match latest_not_after(&bundle.0) {
            None => out.problems.push(Problem {
                kind: ProblemKind::CaBundleInvalid,
                message: format!(
                    "clientConfig.caBundle holds no PEM certificate that parses (client-go: unable to load root certificates); {}",
                    consequence(hook)
                ),
            }),
            Some((not_after, subject)) => {
                out.ca_not_after = Some(not_after);
                let at = rfc3339(not_after);
                if not_after < now {
                    out.problems.push(Problem {
                        kind: ProblemKind::CertificateExpired,
                        message: format!(
                            "clientConfig.caBundle: every certificate has expired, the last ({subject}) at {at} (kube-apiserver: x509: certificate has expired or is not yet valid); {}",
                            consequence(hook)
                        ),
                    });
                } else if not_after - now < warn_before {
                    out.problems.push(Problem {
                        kind: ProblemKind::CertificateExpiring,
                        message: format!(
                            "clientConfig.caBundle: the last certificate ({subject}) expires at {at}; after that {}",
                            consequence(hook).replace("failurePolicy is ", "with failurePolicy ")
                        ),
                    });
                }
            }
        }
    }
    out
}

/// The offline findings of a configuration with `n` webhooks, one line each, by webhook index:
/// `advice` ([`crate::webhooks::advise`] and [`crate::webhooks::exact_match_bypass`]) and the
/// match conditions' type check ([`crate::webhooks::match_conditions::type_check`]): its
/// expression warnings, runtime findings and cost findings, all at `webhooks[i]....`.
pub fn offline_findings(
    n: usize,
    advice: &[crate::webhooks::Advice],
    status: Option<&crate::policy::PolicyStatus>,
) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); n];
    let mut put = |field_ref: &str, line: String| {
        if let Some(i) = webhook_index(field_ref)
            && let Some(lines) = out.get_mut(i)
        {
            lines.push(line);
        }
    };
    for a in advice {
        put(
            &a.field_ref,
            format!("{} {}: {}", a.rule.id(), a.field_ref, a.message),
        );
    }
    if let Some(status) = status {
        for w in &status.expression_warnings {
            put(
                &w.field_ref,
                format!("{}: {}", w.field_ref, w.warning.trim_end()),
            );
        }
        for r in &status.runtime {
            put(
                &r.field_ref,
                format!("{}: {}: {}", r.field_ref, r.access, r.error),
            );
        }
        for f in &status.cost.findings {
            if let Some(field_ref) = &f.field_ref {
                put(field_ref, f.text());
            }
        }
    }
    out
}

/// `i` of a fieldRef `webhooks[i]...`.
fn webhook_index(field_ref: &str) -> Option<usize> {
    field_ref
        .strip_prefix("webhooks[")?
        .split(']')
        .next()?
        .parse()
        .ok()
}

/// `RandomEndpoint`'s candidates: endpoints of slices with a port named `port_name` (and a
/// number) whose `conditions.ready` is not false.
pub fn ready_endpoints(slices: &[&EndpointSlice], port_name: &str) -> u64 {
    slices
        .iter()
        .filter(|s| {
            s.ports
                .iter()
                .flatten()
                .any(|p| p.name.as_deref() == Some(port_name) && p.port.is_some())
        })
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .filter(|e| !e.addresses.is_empty())
        .count() as u64
}

/// The latest `notAfter` (Unix seconds) of the certificates of a PEM bundle, with that
/// certificate's subject; `None` when no `CERTIFICATE` block parses.
pub fn latest_not_after(pem: &[u8]) -> Option<(i64, String)> {
    let mut best: Option<(i64, String)> = None;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let Ok(block) = block else {
            break;
        };
        if block.label != "CERTIFICATE" {
            continue;
        }
        let Ok(cert) = block.parse_x509() else {
            continue;
        };
        let not_after = cert.validity().not_after.timestamp();
        if best.as_ref().is_none_or(|(t, _)| not_after > *t) {
            best = Some((not_after, cert.subject().to_string()));
        }
    }
    best
}

/// `seconds` as RFC 3339 UTC.
fn rfc3339(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(client: serde_json::Value, fail: bool) -> Webhook {
        serde_json::from_value(json!({"name": "a.b.c", "clientConfig": client,
            "failurePolicy": if fail {"Fail"} else {"Ignore"}}))
        .unwrap()
    }

    fn service(ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "svc", "namespace": "ns"},
            "spec": {"type": "ClusterIP", "ports": ports}}))
        .unwrap()
    }

    fn slice(port_name: serde_json::Value, ready: &[Option<bool>]) -> EndpointSlice {
        let endpoints: Vec<serde_json::Value> = ready
            .iter()
            .map(|r| match r {
                Some(r) => json!({"addresses": ["10.1.1.1"], "conditions": {"ready": r}}),
                None => json!({"addresses": ["10.1.1.1"]}),
            })
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns"},
            "addressType": "IPv4", "ports": [{"name": port_name, "port": 8443}],
            "endpoints": endpoints}))
        .unwrap()
    }

    #[test]
    fn service_states() {
        let h = hook(
            json!({"service": {"namespace": "ns", "name": "svc", "port": 443}}),
            true,
        );
        let a = assess(&h, None, &[], 0, 0);
        assert_eq!(a.state(), State::ServiceNotFound);
        assert_eq!(
            a.problems[0].message,
            "clientConfig.service: Service ns/svc does not exist (kube-apiserver: service \"svc\" not found); failurePolicy is Fail: kube-apiserver rejects every matching request"
        );
        let svc = service(json!([{"name": "https", "port": 8443}]));
        let a = assess(&h, Some(&svc), &[], 0, 0);
        assert_eq!(a.state(), State::ServicePortNotFound);
        let svc = service(json!([{"name": "https", "port": 443}]));
        let a = assess(&h, Some(&svc), &[], 0, 0);
        assert_eq!(
            (a.state(), a.ready_endpoints),
            (State::NoReadyEndpoints, Some(0))
        );
        // Ready unset counts; ready false does not; another port name does not.
        let good = slice(json!("https"), &[Some(true), None, Some(false)]);
        let other = slice(json!("metrics"), &[Some(true)]);
        let a = assess(&h, Some(&svc), &[&good, &other], 0, 0);
        assert_eq!((a.state(), a.ready_endpoints), (State::Available, Some(2)));
        let not_ready = slice(json!("https"), &[Some(false)]);
        let a = assess(&h, Some(&svc), &[&not_ready], 0, 0);
        assert_eq!(a.state(), State::NoReadyEndpoints);
        // An unnamed Service port matches only slice ports named "" (upstream compares the
        // pointer's value; nil never matches).
        let svc = service(json!([{"port": 443}]));
        let unnamed = slice(json!(""), &[Some(true)]);
        let nil = slice(serde_json::Value::Null, &[Some(true)]);
        assert_eq!(
            assess(&h, Some(&svc), &[&unnamed], 0, 0).ready_endpoints,
            Some(1)
        );
        assert_eq!(
            assess(&h, Some(&svc), &[&nil], 0, 0).ready_endpoints,
            Some(0)
        );
    }

    #[test]
    fn ca_bundle_expiry() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2030, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        // PEM by hand (rcgen's `pem` feature is off): ByteString serialises as base64.
        let b64 = serde_json::to_value(k8s_openapi::ByteString(cert.der().to_vec())).unwrap();
        let body: Vec<String> = b64
            .as_str()
            .unwrap()
            .as_bytes()
            .chunks(64)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            body.join("\n")
        );
        let not_after = 1_893_456_000; // 2030-01-01T00:00:00Z
        assert_eq!(
            latest_not_after(pem.as_bytes()).map(|(t, _)| t),
            Some(not_after)
        );
        let h = hook(
            json!({"url": "https://x", "caBundle": k8s_openapi::ByteString(pem.clone().into_bytes())}),
            false,
        );
        let day = 86_400;
        assert_eq!(
            assess(&h, None, &[], not_after - 40 * day, 30 * day).state(),
            State::Available
        );
        let a = assess(&h, None, &[], not_after - 20 * day, 30 * day);
        assert_eq!(
            (a.state(), a.ca_not_after),
            (State::CertificateExpiring, Some(not_after))
        );
        let a = assess(&h, None, &[], not_after + 1, 30 * day);
        assert_eq!(a.state(), State::CertificateExpired);
        assert!(
            a.problems[0].message.contains("at 2030-01-01T00:00:00Z"),
            "{}",
            a.problems[0].message
        );
        assert!(a.problems[0].message.ends_with("failurePolicy is Ignore: kube-apiserver admits matching requests without calling the webhook"));
        let bad = hook(
            json!({"url": "https://x", "caBundle": k8s_openapi::ByteString(b"not pem".to_vec())}),
            true,
        );
        assert_eq!(
            assess(&bad, None, &[], 0, 0).state(),
            State::CaBundleInvalid
        );
    }
}
