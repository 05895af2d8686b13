//! HTTPS for `/metrics`: the certificate and the TLS listener; who may scrape is decided in
//! [`super::authz`] (TokenReview and SubjectAccessReview).
//!
//! TLS: a PEM certificate chain and key from files, reloaded when the files change (checked at
//! most every 10 s, like controller-runtime's certwatcher, so cert-manager rotations need no
//! restart), or a self-signed certificate generated at start-up. Only HTTP/1.1 is offered (no
//! HTTP/2, as controller-runtime's default). Why this is not kubert's server or another
//! crate's: docs/architecture.md, "The runtime shell".

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Loads a PEM certificate chain and private key.
pub fn load_pem(
    cert_file: &Path,
    key_file: &Path,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let cert_pem = std::fs::read(cert_file)
        .map_err(|e| anyhow::anyhow!("metrics.secure.certFile {}: {e}", cert_file.display()))?;
    let key_pem = std::fs::read(key_file)
        .map_err(|e| anyhow::anyhow!("metrics.secure.keyFile {}: {e}", key_file.display()))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "metrics.secure.certFile {}: not PEM certificates: {e}",
                cert_file.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!(
            "metrics.secure.certFile {}: no certificate found",
            cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        anyhow::anyhow!(
            "metrics.secure.keyFile {}: no PEM private key: {e}",
            key_file.display()
        )
    })?;
    Ok((certs, key))
}

/// A self-signed certificate for `localhost` and the pod's host name.
pub fn self_signed() -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
    {
        names.push(host);
    }
    let generated = rcgen::generate_simple_self_signed(names)
        .map_err(|e| anyhow::anyhow!("cannot generate a self-signed certificate: {e}"))?;
    let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("generated key: {e}"))?;
    Ok((vec![generated.cert.der().clone()], key))
}

/// A rustls server configuration with one certificate, offering only HTTP/1.1.
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = rustls::crypto::ring::default_provider();
    let certified = rustls::sign::CertifiedKey::from_der(certs, key, &provider)
        .map_err(|e| anyhow::anyhow!("metrics TLS certificate or key rejected: {e}"))?;
    server_config_with_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)))
}

/// How often [`ReloadingCert`] looks at the files.
pub const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The TLS configuration from `metrics.secure`: files when given (reloaded on change), else
/// self-signed.
pub fn tls_from_config(
    secure: &crate::config::SecureMetrics,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    if secure.cert_file.is_empty() {
        let (certs, key) = self_signed()?;
        return server_config(certs, key);
    }
    let resolver = ReloadingCert::new(
        PathBuf::from(&secure.cert_file),
        PathBuf::from(&secure.key_file),
        CERT_RELOAD_INTERVAL,
    )?;
    server_config_with_resolver(Arc::new(resolver))
}

/// A rustls server configuration using `resolver`, offering only HTTP/1.1.
pub fn server_config_with_resolver(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS setup: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Modification time and length of both files: a change of either means "reload".
type FileStamp = (Option<SystemTime>, u64, Option<SystemTime>, u64);

#[derive(Debug)]
struct ReloadState {
    last_check: Instant,
    stamp: FileStamp,
    current: Arc<rustls::sign::CertifiedKey>,
}

/// A certificate read from PEM files and read again when they change. A change that does not
/// load (half-written files, mismatched key) keeps the previous certificate and is logged.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    interval: Duration,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<ReloadState>,
}

impl ReloadingCert {
    /// Loads the files once (an error here is a start-up error) and checks them again at most
    /// every `interval`.
    pub fn new(cert_file: PathBuf, key_file: PathBuf, interval: Duration) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = file_stamp(&cert_file, &key_file);
        let current = load_certified(&cert_file, &key_file, &provider)?;
        Ok(ReloadingCert {
            cert_file,
            key_file,
            interval,
            provider,
            state: Mutex::new(ReloadState {
                last_check: Instant::now(),
                stamp,
                current,
            }),
        })
    }

    /// The certificate to serve now, reloading it first when the files changed.
    pub fn current(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let mut state = self.state.lock().ok()?;
        if state.last_check.elapsed() >= self.interval {
            state.last_check = Instant::now();
            let stamp = file_stamp(&self.cert_file, &self.key_file);
            if stamp != state.stamp {
                match load_certified(&self.cert_file, &self.key_file, &self.provider) {
                    Ok(loaded) => {
                        tracing::info!(cert = %self.cert_file.display(), "metrics certificate reloaded");
                        state.current = loaded;
                        state.stamp = stamp;
                    }
                    Err(e) => {
                        // Keep serving the old certificate; try again at the next check.
                        tracing::warn!(error = %e, "metrics certificate not reloaded");
                    }
                }
            }
        }
        Some(state.current.clone())
    }
}

impl rustls::server::ResolvesServerCert for ReloadingCert {
    fn resolve(
        &self,
        _client_hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.current()
    }
}

fn file_stamp(cert: &Path, key: &Path) -> FileStamp {
    let meta = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.modified().ok(), m.len()))
            .unwrap_or((None, 0))
    };
    let (cm, cl) = meta(cert);
    let (km, kl) = meta(key);
    (cm, cl, km, kl)
}

fn load_certified(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> anyhow::Result<Arc<rustls::sign::CertifiedKey>> {
    let (certs, key_der) = load_pem(cert, key)?;
    let certified =
        rustls::sign::CertifiedKey::from_der(certs, key_der, provider).map_err(|e| {
            anyhow::anyhow!(
                "metrics.secure.certFile {} / keyFile {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok(Arc::new(certified))
}

/// A listener that accepts TCP connections and completes TLS handshakes concurrently (a slow
/// client cannot hold up others), for `axum::serve`.
pub struct TlsListener {
    local: SocketAddr,
    rx: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        SocketAddr,
    )>,
    _acceptor_task: AbortOnDrop,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local", &self.local)
            .finish()
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl TlsListener {
    /// Starts accepting on `listener` with `config`.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly.
                        tracing::warn!(error = %e, "metrics accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            local,
            rx,
            _acceptor_task: AbortOnDrop(task),
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The acceptor task ended (only when aborted): never yield another connection.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn self_signed_certificate_makes_a_server_config() {
        let (certs, key) = self_signed().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(certs.len(), 1);
        let config = server_config(certs, key).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn pem_files_load_and_errors_name_the_key() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let cert_pem = pem_encode("CERTIFICATE", generated.cert.der());
        let key_pem = pem_encode("PRIVATE KEY", &generated.signing_key.serialize_der());
        let (c, k) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&c, cert_pem).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&k, key_pem).unwrap_or_else(|e| panic!("{e}"));
        let (certs, key) = load_pem(&c, &k).unwrap_or_else(|e| panic!("{e}"));
        assert!(server_config(certs, key).is_ok());
        let e = load_pem(&dir.path().join("missing.crt"), &k)
            .err()
            .unwrap_or_else(|| panic!("error"));
        assert!(e.to_string().contains("metrics.secure.certFile"), "{e}");
        let e = load_pem(&c, &c).err().unwrap_or_else(|| panic!("error"));
        assert!(e.to_string().contains("metrics.secure.keyFile"), "{e}");
    }

    fn pem_encode(label: &str, der: &[u8]) -> String {
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut b64 = String::new();
        for chunk in der.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| {
                acc | (u32::from(*b) << (16 - 8 * i as u32))
            });
            for i in 0..4 {
                if i <= chunk.len() {
                    b64.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    b64.push('=');
                }
            }
        }
        let body: Vec<String> = b64
            .as_bytes()
            .chunks(64)
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            body.join("\n")
        )
    }

    #[tokio::test]
    async fn https_metrics_serve_with_a_configured_certificate() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (c, k, cert) = write_pair(dir.path(), "localhost");

        let mut config = crate::config::Config::default();
        config.metrics.bind_address = "127.0.0.1:0".to_owned();
        config.health.bind_address = "127.0.0.1:0".to_owned();
        config.metrics.secure.enabled = true;
        config.metrics.secure.authorize = true;
        config.metrics.secure.cert_file = c.display().to_string();
        config.metrics.secure.key_file = k.display().to_string();
        let metrics = crate::metrics::Metrics::new();
        let health = super::super::Health::default();
        let e = super::super::HttpServers::bind(&config, metrics.clone(), health.clone(), None)
            .await
            .err()
            .unwrap_or_else(|| panic!("authorize without a client must fail"));
        assert!(e.to_string().contains("metrics.secure.authorize"), "{e}");

        config.metrics.secure.authorize = false;
        let servers = super::super::HttpServers::bind(&config, metrics, health, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = servers.metrics_addr().unwrap_or_else(|e| panic!("{e}"));
        let shutdown = super::super::Shutdown::default();
        let task = tokio::spawn(servers.run(shutdown.clone()));

        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap_or_else(|e| panic!("{e}"));
        let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("{e}"))
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let name =
            rustls::pki_types::ServerName::try_from("localhost").unwrap_or_else(|e| panic!("{e}"));
        let mut tls = connector
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake: {e}"));
        tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut response = String::new();
        let _ = tls.read_to_string(&mut response).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains("vapcheck_build_info"), "{response}");

        // Plain HTTP on the TLS port gets no HTTP answer.
        let mut plain = tokio::net::TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        plain
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut buf)).await;
        assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));

        shutdown.trigger();
        let done = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(done, Ok(Ok(Ok(())))), "servers stop on shutdown");
    }

    #[tokio::test]
    async fn https_metrics_refuse_the_health_address() {
        let mut config = crate::config::Config::default();
        config.metrics.bind_address = "127.0.0.1:18443".to_owned();
        config.health.bind_address = "127.0.0.1:18443".to_owned();
        config.metrics.secure.enabled = true;
        let e = super::super::HttpServers::bind(
            &config,
            crate::metrics::Metrics::new(),
            super::super::Health::default(),
            None,
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("must fail"));
        assert!(e.to_string().contains("metrics.bindAddress"), "{e}");
    }

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, CertificateDer<'static>) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&c, pem_encode("CERTIFICATE", generated.cert.der()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            &k,
            pem_encode("PRIVATE KEY", &generated.signing_key.serialize_der()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        (c, k, generated.cert.der().clone())
    }

    fn bump_mtime(path: &Path, secs: u64) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{e}"));
        let when = SystemTime::now() + Duration::from_secs(secs);
        file.set_modified(when).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn certificate_files_are_reloaded_when_they_change() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (c, k, first) = write_pair(dir.path(), "first.example");
        let reloading = ReloadingCert::new(c.clone(), k.clone(), Duration::ZERO)
            .unwrap_or_else(|e| panic!("{e}"));
        let served = |r: &ReloadingCert| r.current().map(|ck| ck.cert[0].clone());
        assert_eq!(served(&reloading), Some(first.clone()));

        // A half-written update (garbage) keeps the old certificate.
        std::fs::write(&c, "not a certificate").unwrap_or_else(|e| panic!("{e}"));
        bump_mtime(&c, 2);
        assert_eq!(served(&reloading), Some(first.clone()));

        // A complete new pair is picked up.
        let (c2, k2, second) = write_pair(dir.path(), "second.example");
        bump_mtime(&c2, 4);
        bump_mtime(&k2, 4);
        assert_ne!(first, second);
        assert_eq!(served(&reloading), Some(second));

        // The initial load must succeed.
        std::fs::write(&k, "garbage").unwrap_or_else(|e| panic!("{e}"));
        assert!(ReloadingCert::new(c, k, Duration::ZERO).is_err());
    }
}
