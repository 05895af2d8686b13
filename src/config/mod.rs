//! Configuration of `vapcheck controller`.
//!
//! Sources, from lowest to highest precedence:
//! 1. built-in defaults ([`Config::default`], documented in `config/vapcheck.yaml`);
//! 2. a YAML file (`--config PATH` or `VAPCHECK_CONFIG`), read with serde-saphyr;
//! 3. environment variables `VAPCHECK_*`;
//! 4. command-line flags.
//!
//! Each setting is declared once, in [`SETTINGS`] (`settings.rs`): its key, its flag, its
//! variable and its typed parser. [`ConfigArgs`] turns that table into clap arguments with
//! `long` and `env`, so clap reads both the flag and the variable, and records which of the two
//! gave the value; the file is then overlaid by the variables and those by the flags.
//!
//! Every error names the offending key (`leaderElection.leaseDuration`) and, for environment
//! variables and flags, where the value came from. `config/vapcheck.schema.json` is generated
//! from these types ([`json_schema`]); a unit test fails when the checked-in copy is stale.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::k8s_env::KubernetesVersion;

mod duration;
mod logging;
mod settings;
#[cfg(test)]
mod tests;

pub use duration::{Duration, DurationError};
pub use logging::{init_logging, log_filter, log_subscriber};
pub use settings::{ConfigArgs, SETTINGS, Setting};

/// Where a pod finds its own namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The complete configuration of the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(title = "vapcheck controller configuration")]
pub struct Config {
    /// How far checking goes. `extended` (default) checks everything upstream checks with
    /// byte-identical warnings and then more (all CEL fields, wildcard expansion, more kinds);
    /// `strict` reproduces kube-controller-manager's checks exactly and nothing else.
    pub mode: Mode,
    /// Which parts of the policy status vapcheck writes. `full` (default) writes
    /// `observedGeneration`, `typeChecking` and vapcheck's conditions, re-applying them when
    /// upstream's status controller overwrites `typeChecking`; `conditionsOnly` leaves
    /// `typeChecking` and `observedGeneration` to upstream and writes only the conditions.
    pub status_mode: StatusMode,
    /// Maximum number of kinds (group-version-kinds) one policy is checked against in
    /// `extended` mode; the remaining kinds are skipped and reported. `strict` mode always uses
    /// upstream's limit of 10. Must be at least 1.
    #[schemars(range(min = 1))]
    pub kind_limit: u32,
    /// In `extended` mode, expand `*` in match rules (groups, versions, resources) through API
    /// discovery and check every matching kind. Upstream skips such rules.
    pub expand_wildcards: bool,
    /// Number of policies reconciled in parallel. Must be at least 1.
    #[schemars(range(min = 1))]
    pub concurrency: u16,
    /// Period of the full re-check of every policy, in addition to the event-driven re-checks.
    /// `0s` turns the periodic re-check off.
    pub recheck_period: Duration,
    /// How often the OpenAPI v3 discovery document (`/openapi/v3`) is polled for changed
    /// schema hashes (for aggregated APIs and cluster upgrades). Must be at least 1s.
    pub schema_poll_interval: Duration,
    /// How long before its admission webhook `caBundle` certificates expire vapcheck warns
    /// (`certificate_expiring`, a Warning Event on the webhook configuration). `0s` warns only
    /// once they have expired.
    pub webhook_certificate_warning: Duration,
    /// Leader election on a `coordination.k8s.io` Lease: only the leader writes statuses.
    pub leader_election: LeaderElection,
    /// The Prometheus metrics endpoint (`/metrics`).
    pub metrics: MetricsConfig,
    /// The health probe endpoints (`/healthz`, `/readyz`).
    pub health: HealthConfig,
    /// Logging.
    pub log: LogConfig,
    /// The Kubernetes version (`major.minor` or `major.minor.patch`) whose CEL libraries and
    /// built-in schemas are assumed. Empty (default): the version the API server reports.
    pub kubernetes_version: String,
    /// Policy reports: one cluster-scoped report per policy, binding and webhook configuration
    /// in the report API the cluster serves (docs/reports.md).
    pub reports: ReportsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Extended,
            status_mode: StatusMode::Full,
            kind_limit: 32,
            expand_wildcards: true,
            concurrency: 4,
            recheck_period: Duration::from_secs(600),
            schema_poll_interval: Duration::from_secs(60),
            webhook_certificate_warning: Duration::from_secs(720 * 3600),
            leader_election: LeaderElection::default(),
            metrics: MetricsConfig::default(),
            health: HealthConfig::default(),
            log: LogConfig::default(),
            kubernetes_version: String::new(),
            reports: ReportsConfig::default(),
        }
    }
}

/// Checking mode, see [`Config::mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Upstream's checks with upstream's words, plus vapcheck's additional checks.
    Extended,
    /// Exactly upstream's checks, nothing more.
    Strict,
}

/// Status ownership, see [`Config::status_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StatusMode {
    /// Write `observedGeneration`, `typeChecking` and conditions.
    Full,
    /// Write only vapcheck's conditions.
    ConditionsOnly,
}

/// Leader election settings, see [`Config::leader_election`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LeaderElection {
    /// Elect a leader. Turn off only when exactly one replica runs.
    pub enabled: bool,
    /// Name of the Lease object.
    pub lease_name: String,
    /// Namespace of the Lease. Empty (default): the pod's own namespace (service-account
    /// namespace file or `POD_NAMESPACE`), else the kubeconfig context's namespace, else
    /// `default`. See [`resolve_lease_namespace`].
    pub lease_namespace: String,
    /// How long a lease is valid without renewal; a standby takes over at most this long after
    /// the leader dies. Whole seconds, at least 2s.
    pub lease_duration: Duration,
    /// How long before the lease expires the leader renews it (the renew deadline). Whole
    /// seconds, at least 1s, less than `leaseDuration`.
    pub renew_deadline: Duration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            enabled: true,
            lease_name: "vapcheck".to_owned(),
            lease_namespace: String::new(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(5),
        }
    }
}

/// Metrics endpoint settings, see [`Config::metrics`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address `/metrics` listens on: `ip:port`, `[ipv6]:port` or `:port` (all IPv4
    /// interfaces). Port `0` picks a free port.
    pub bind_address: String,
    /// Serve `/metrics` over HTTPS with Kubernetes authentication and authorization.
    pub secure: SecureMetrics,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            bind_address: "0.0.0.0:8080".to_owned(),
            secure: SecureMetrics::default(),
        }
    }
}

/// HTTPS for `/metrics`, see [`MetricsConfig::secure`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SecureMetrics {
    /// Serve HTTPS instead of plain HTTP.
    pub enabled: bool,
    /// PEM certificate chain. Empty (default) with `enabled`: a self-signed certificate is
    /// generated at start-up. Must be set together with `keyFile`.
    pub cert_file: String,
    /// PEM private key for `certFile`.
    pub key_file: String,
    /// Require a bearer token that the API server accepts (TokenReview) and that may `get` the
    /// non-resource URL `/metrics` (SubjectAccessReview).
    pub authorize: bool,
}

impl Default for SecureMetrics {
    fn default() -> Self {
        SecureMetrics {
            enabled: false,
            cert_file: String::new(),
            key_file: String::new(),
            authorize: true,
        }
    }
}

/// Policy report settings, see [`Config::reports`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ReportsConfig {
    /// Write an `openreports.io/v1alpha1` ClusterReport (else, where only
    /// `wgpolicyk8s.io/v1alpha2` is served, a ClusterPolicyReport) per policy, binding and
    /// webhook configuration, kept current and deleted with its object. Nothing is written, and nothing logged as an error, when
    /// the cluster serves neither.
    pub enabled: bool,
}

impl Default for ReportsConfig {
    fn default() -> Self {
        ReportsConfig { enabled: true }
    }
}

/// Health probe settings, see [`Config::health`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HealthConfig {
    /// Address `/healthz` and `/readyz` listen on, in the form of `metrics.bindAddress`.
    pub bind_address: String,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            bind_address: "0.0.0.0:8081".to_owned(),
        }
    }
}

/// Logging settings, see [`Config::log`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` (default, human-readable) or `json` (one object per line).
    pub format: LogFormat,
    /// Level or `tracing` filter directive, e.g. `info` or `info,vapcheck=debug`. `RUST_LOG`,
    /// when set, overrides it.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".to_owned(),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A configuration error. The message always names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The YAML does not match the configuration schema.
    #[error("invalid config{origin}: key `{key}`: {message}")]
    Parse {
        /// `" file PATH"` or empty.
        origin: String,
        /// Dotted path of the key, `<root>` for the document itself.
        key: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is syntactically fine but not allowed.
    #[error("invalid config: key `{key}`{origin}: {message}")]
    Invalid {
        /// Dotted path of the key.
        key: String,
        /// `" (from VAPCHECK_X)"`, `" (from --flag)"` or empty.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// The dotted key the error is about, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Parse { key, .. } | ConfigError::Invalid { key, .. } => Some(key),
        }
    }
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        origin: String::new(),
        message: message.into(),
    }
}

impl Config {
    /// Parses a YAML document (empty means all defaults) and validates it.
    pub fn from_yaml_str(yaml: &str) -> Result<Config, ConfigError> {
        Self::parse_yaml(yaml, "")?.validated()
    }

    /// Reads and parses a YAML file and validates it.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse_yaml(&text, &format!(" file {}", path.display()))?.validated()
    }

    fn parse_yaml(yaml: &str, origin: &str) -> Result<Config, ConfigError> {
        // An empty or comment-only document is "all defaults".
        if yaml
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return Ok(Config::default());
        }
        let mut path = None;
        let result = serde_saphyr::with_deserializer_from_str(yaml, |de| {
            serde_path_to_error::deserialize::<_, Config>(de).map_err(|e| {
                path = Some(e.path().to_string());
                e.into_inner()
            })
        });
        result.map_err(|e| {
            let key = match path.as_deref() {
                None | Some("" | ".") => "<root>".to_owned(),
                Some(p) => p.to_owned(),
            };
            ConfigError::Parse {
                origin: origin.to_owned(),
                key,
                message: e.to_string(),
            }
        })
    }

    /// Checks the values that types alone cannot check. Returns `self` when valid.
    pub fn validated(self) -> Result<Config, ConfigError> {
        self.validate()?;
        Ok(self)
    }

    /// Checks the values that types alone cannot check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.kind_limit == 0 {
            return Err(invalid("kindLimit", "must be at least 1"));
        }
        if self.concurrency == 0 {
            return Err(invalid("concurrency", "must be at least 1"));
        }
        if self.schema_poll_interval.0 < std::time::Duration::from_secs(1) {
            return Err(invalid("schemaPollInterval", "must be at least 1s"));
        }
        let le = &self.leader_election;
        if le.lease_name.is_empty() || !is_dns_subdomain(&le.lease_name) {
            return Err(invalid(
                "leaderElection.leaseName",
                format!(
                    "`{}` is not a valid object name (lowercase DNS subdomain)",
                    le.lease_name
                ),
            ));
        }
        if !le.lease_namespace.is_empty() && !is_dns_label(&le.lease_namespace) {
            return Err(invalid(
                "leaderElection.leaseNamespace",
                format!(
                    "`{}` is not a valid namespace name (lowercase DNS label)",
                    le.lease_namespace
                ),
            ));
        }
        if !le.lease_duration.is_whole_seconds() || le.lease_duration.0.as_secs() < 2 {
            return Err(invalid(
                "leaderElection.leaseDuration",
                "must be whole seconds and at least 2s",
            ));
        }
        if !le.renew_deadline.is_whole_seconds() || le.renew_deadline.0.as_secs() < 1 {
            return Err(invalid(
                "leaderElection.renewDeadline",
                "must be whole seconds and at least 1s",
            ));
        }
        if le.renew_deadline >= le.lease_duration {
            return Err(invalid(
                "leaderElection.renewDeadline",
                format!(
                    "must be less than leaderElection.leaseDuration ({})",
                    le.lease_duration
                ),
            ));
        }
        let (metrics_addr, health_addr) = (self.metrics_addr()?, self.health_addr()?);
        if self.metrics.secure.enabled && metrics_addr == health_addr && metrics_addr.port() != 0 {
            return Err(invalid(
                "metrics.bindAddress",
                "HTTPS metrics (metrics.secure.enabled) need an address other than health.bindAddress",
            ));
        }
        let secure = &self.metrics.secure;
        if secure.cert_file.is_empty() != secure.key_file.is_empty() {
            let key = if secure.cert_file.is_empty() {
                "metrics.secure.certFile"
            } else {
                "metrics.secure.keyFile"
            };
            return Err(invalid(
                key,
                "certFile and keyFile must be set together (or both left empty for a self-signed certificate)",
            ));
        }
        if self.log.level.trim().is_empty() {
            return Err(invalid("log.level", "must not be empty"));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            return Err(invalid(
                "log.level",
                format!("`{}` is not a valid filter: {e}", self.log.level),
            ));
        }
        if !self.kubernetes_version.is_empty()
            && let Err(e) = self.kubernetes_version.parse::<KubernetesVersion>()
        {
            return Err(invalid("kubernetesVersion", e.to_string()));
        }
        Ok(())
    }

    /// The parsed metrics listen address.
    pub fn metrics_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("metrics.bindAddress", &self.metrics.bind_address)
    }

    /// The parsed health probe listen address.
    pub fn health_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("health.bindAddress", &self.health.bind_address)
    }

    /// The Kubernetes version override; `None` when not set (or not a version, which
    /// [`Config::validate`] refuses).
    pub fn kubernetes_version_override(&self) -> Option<KubernetesVersion> {
        if self.kubernetes_version.is_empty() {
            None
        } else {
            self.kubernetes_version.parse().ok()
        }
    }

    /// The JSON form (camelCase keys), e.g. for logging the effective configuration.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

fn parse_addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    // Go-style `:8080` means every IPv4 interface.
    let full;
    let value = match value.strip_prefix(':') {
        Some(port) if !port.contains(':') => {
            full = format!("0.0.0.0:{port}");
            full.as_str()
        }
        _ => value,
    };
    value.parse::<SocketAddr>().map_err(|_| {
        invalid(
            key,
            format!("`{value}` is not an address like 0.0.0.0:8080 or [::]:8080"),
        )
    })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Resolves the Lease namespace: the configured one; else the pod's namespace
/// (`POD_NAMESPACE`, then the service-account namespace file); else the kubeconfig context's
/// namespace (pass `kube::Client::default_namespace()` or the context's namespace); else
/// `default`.
pub fn resolve_lease_namespace(configured: &str, kubeconfig_namespace: Option<&str>) -> String {
    let pod_env = std::env::var("POD_NAMESPACE").ok();
    let sa_file = std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE).ok();
    resolve_namespace_from(
        configured,
        pod_env.as_deref(),
        sa_file.as_deref(),
        kubeconfig_namespace,
    )
}

/// The pure part of [`resolve_lease_namespace`]: the first non-blank candidate in order.
pub fn resolve_namespace_from(
    configured: &str,
    pod_namespace_env: Option<&str>,
    service_account_file: Option<&str>,
    kubeconfig_namespace: Option<&str>,
) -> String {
    [
        Some(configured),
        pod_namespace_env,
        service_account_file,
        kubeconfig_namespace,
    ]
    .into_iter()
    .flatten()
    .map(str::trim)
    .find(|s| !s.is_empty())
    .unwrap_or("default")
    .to_owned()
}

/// The JSON Schema of the configuration file, as checked in at `config/vapcheck.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
