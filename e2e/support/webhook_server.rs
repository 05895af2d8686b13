//! A real HTTPS admission webhook server for the e2e tests (tokio-rustls on 127.0.0.1), and the
//! certificates it serves: kube-apiserver reaches it through `clientConfig.url` and verifies it
//! against the `caBundle` the test puts in the configuration.
//!
//! The server admits every request. It counts the reviews it answered and keeps the
//! `apiVersion` of each AdmissionReview it received, and answers with the same `apiVersion`
//! ([`Reply::SameVersion`], as the Kubernetes docs ask of a webhook) or always with
//! `admission.k8s.io/v1` ([`Reply::V1`], a server that knows only v1).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA (PEM) and a serving certificate for `hosts` it signed (DER certificate and key).
pub struct Certificates {
    /// The CA certificate as PEM, the `caBundle` that trusts the server.
    pub ca_pem: String,
    /// The serving certificate (DER).
    pub cert: Vec<u8>,
    /// Its private key (DER).
    pub key: Vec<u8>,
}

/// Sets the validity of `params` to Unix seconds `not_before` .. `not_after`.
pub fn valid_between(params: &mut rcgen::CertificateParams, not_before: u64, not_after: u64) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + std::time::Duration::from_secs(not_before);
    params.not_after = epoch + std::time::Duration::from_secs(not_after);
}

/// A CA named `name` whose validity `ca_validity` sets, and a serving certificate for `hosts`
/// (valid 2020–2090) it signed.
pub fn certificates(
    name: &str,
    hosts: &[&str],
    ca_validity: impl FnOnce(&mut rcgen::CertificateParams),
) -> anyhow::Result<Certificates> {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, name.to_owned());
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_validity(&mut ca);
    let ca_key = rcgen::KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let mut leaf =
        rcgen::CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>())?;
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2090, 1, 1);
    let leaf_key = rcgen::KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(Certificates {
        ca_pem: pem(ca_cert.der()),
        cert: leaf_cert.der().to_vec(),
        key: leaf_key.serialize_der(),
    })
}

/// A CA valid from January 1st of `from` to January 1st of `to`, and a serving certificate for
/// 127.0.0.1 it signed.
pub fn certificates_for_years(name: &str, from: i32, to: i32) -> anyhow::Result<Certificates> {
    certificates(name, &["127.0.0.1"], |ca| {
        ca.not_before = rcgen::date_time_ymd(from, 1, 1);
        ca.not_after = rcgen::date_time_ymd(to, 1, 1);
    })
}

/// PEM of a DER certificate (rcgen's `pem` feature is off; a ByteString serialises as base64).
pub fn pem(der: &[u8]) -> String {
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

/// The `apiVersion` of the server's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The `apiVersion` of the AdmissionReview received.
    SameVersion,
    /// Always `admission.k8s.io/v1`.
    V1,
}

/// A running server (it runs until the test's runtime stops).
pub struct WebhookServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    answered: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<String>>>,
}

impl WebhookServer {
    /// How many reviews it answered.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// The `apiVersion` of every AdmissionReview it received, in order.
    pub fn received(&self) -> Vec<String> {
        self.received
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }
}

/// Starts a server on 127.0.0.1 (a free port) with the serving certificate of `certs`.
pub async fn start(certs: &Certificates, reply: Reply) -> anyhow::Result<WebhookServer> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = rustls::pki_types::PrivateKeyDer::try_from(certs.key.clone())
        .map_err(|e| anyhow::anyhow!(e))?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(certs.cert.clone())],
            key,
        )?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let answered = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(Mutex::new(Vec::new()));
    let (count, versions) = (Arc::clone(&answered), Arc::clone(&received));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let count = Arc::clone(&count);
            let versions = Arc::clone(&versions);
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
                    let version = body["apiVersion"].as_str().unwrap_or_default().to_owned();
                    if let Ok(mut v) = versions.lock() {
                        v.push(version.clone());
                    }
                    let answer_version = match reply {
                        Reply::SameVersion => version,
                        Reply::V1 => "admission.k8s.io/v1".to_owned(),
                    };
                    let review = json!({"apiVersion": answer_version,
                        "kind": "AdmissionReview",
                        "response": {"uid": body["request"]["uid"], "allowed": true}});
                    let text = review.to_string();
                    count.fetch_add(1, Ordering::SeqCst);
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
    Ok(WebhookServer {
        port,
        answered,
        received,
    })
}
