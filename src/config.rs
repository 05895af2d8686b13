//! Configuration of `vapcheck controller`.
//!
//! Sources, from lowest to highest precedence:
//! 1. built-in defaults ([`Config::default`], documented in `config/vapcheck.yaml`);
//! 2. a YAML file (`--config PATH` or `VAPCHECK_CONFIG`), read with serde-saphyr;
//! 3. environment variables `VAPCHECK_*` (see [`SETTINGS`]);
//! 4. command-line flags ([`ConfigArgs`], flattened into the controller subcommand).
//!
//! Every error names the offending key (`leaderElection.leaseDuration`) and, for environment
//! variables and flags, where the value came from. `config/vapcheck.schema.json` is generated
//! from these types ([`json_schema`]); a unit test fails when the checked-in copy is stale.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
        if !self.kubernetes_version.is_empty() && parse_version(&self.kubernetes_version).is_none()
        {
            return Err(invalid(
                "kubernetesVersion",
                format!(
                    "`{}` is not a version like 1.37 or 1.37.1",
                    self.kubernetes_version
                ),
            ));
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

    /// The Kubernetes version override as `(major, minor, patch)`; `None` when not set.
    pub fn kubernetes_version_override(&self) -> Option<(u32, u32, Option<u32>)> {
        if self.kubernetes_version.is_empty() {
            None
        } else {
            parse_version(&self.kubernetes_version)
        }
    }

    /// Applies `VAPCHECK_*` environment variables found through `lookup` (normally
    /// `|name| std::env::var(name).ok()`), in the order of [`SETTINGS`].
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            if let Some(value) = lookup(setting.env) {
                (setting.apply)(self, &value).map_err(|message| ConfigError::Invalid {
                    key: setting.key.to_owned(),
                    origin: format!(" (from {})", setting.env),
                    message,
                })?;
            }
        }
        Ok(())
    }

    /// Sets one key (dotted camelCase path as in [`SETTINGS`]) from its string form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let setting = SETTINGS
            .iter()
            .find(|s| s.key == key)
            .ok_or_else(|| invalid(key, "unknown key"))?;
        (setting.apply)(self, value).map_err(|message| invalid(key, message))
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

fn parse_version(v: &str) -> Option<(u32, u32, Option<u32>)> {
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = match parts.next() {
        None => None,
        Some(p) => Some(p.parse().ok()?),
    };
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
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

/// One key that can be set from an environment variable and a flag.
pub struct Setting {
    /// Dotted camelCase key in the YAML file.
    pub key: &'static str,
    /// Environment variable.
    pub env: &'static str,
    /// Command-line flag, without the leading `--`.
    pub flag: &'static str,
    apply: fn(&mut Config, &str) -> Result<(), String>,
}

impl fmt::Debug for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setting")
            .field("key", &self.key)
            .field("env", &self.env)
            .field("flag", &self.flag)
            .finish()
    }
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(format!("`{other}` is not a boolean (true or false)")),
    }
}

fn parse_num<T: FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("`{v}` is not a non-negative integer in range"))
}

fn parse_enum<T: for<'de> Deserialize<'de>>(v: &str, allowed: &str) -> Result<T, String> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(v.trim()))
        .map_err(|_| format!("`{v}` is not one of {allowed}"))
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    v.parse::<Duration>().map_err(|e| e.to_string())
}

/// Every key settable from the environment and the command line, in precedence-free order.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "mode",
        env: "VAPCHECK_MODE",
        flag: "mode",
        apply: |c, v| {
            c.mode = parse_enum(v, "extended, strict")?;
            Ok(())
        },
    },
    Setting {
        key: "statusMode",
        env: "VAPCHECK_STATUS_MODE",
        flag: "status-mode",
        apply: |c, v| {
            c.status_mode = parse_enum(v, "full, conditionsOnly")?;
            Ok(())
        },
    },
    Setting {
        key: "kindLimit",
        env: "VAPCHECK_KIND_LIMIT",
        flag: "kind-limit",
        apply: |c, v| {
            c.kind_limit = parse_num(v)?;
            Ok(())
        },
    },
    Setting {
        key: "expandWildcards",
        env: "VAPCHECK_EXPAND_WILDCARDS",
        flag: "expand-wildcards",
        apply: |c, v| {
            c.expand_wildcards = parse_bool(v)?;
            Ok(())
        },
    },
    Setting {
        key: "concurrency",
        env: "VAPCHECK_CONCURRENCY",
        flag: "concurrency",
        apply: |c, v| {
            c.concurrency = parse_num(v)?;
            Ok(())
        },
    },
    Setting {
        key: "recheckPeriod",
        env: "VAPCHECK_RECHECK_PERIOD",
        flag: "recheck-period",
        apply: |c, v| {
            c.recheck_period = parse_duration(v)?;
            Ok(())
        },
    },
    Setting {
        key: "schemaPollInterval",
        env: "VAPCHECK_SCHEMA_POLL_INTERVAL",
        flag: "schema-poll-interval",
        apply: |c, v| {
            c.schema_poll_interval = parse_duration(v)?;
            Ok(())
        },
    },
    Setting {
        key: "webhookCertificateWarning",
        env: "VAPCHECK_WEBHOOK_CERTIFICATE_WARNING",
        flag: "webhook-certificate-warning",
        apply: |c, v| {
            c.webhook_certificate_warning = parse_duration(v)?;
            Ok(())
        },
    },
    Setting {
        key: "leaderElection.enabled",
        env: "VAPCHECK_LEADER_ELECTION",
        flag: "leader-election",
        apply: |c, v| {
            c.leader_election.enabled = parse_bool(v)?;
            Ok(())
        },
    },
    Setting {
        key: "leaderElection.leaseName",
        env: "VAPCHECK_LEASE_NAME",
        flag: "lease-name",
        apply: |c, v| {
            c.leader_election.lease_name = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "leaderElection.leaseNamespace",
        env: "VAPCHECK_LEASE_NAMESPACE",
        flag: "lease-namespace",
        apply: |c, v| {
            c.leader_election.lease_namespace = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "leaderElection.leaseDuration",
        env: "VAPCHECK_LEASE_DURATION",
        flag: "lease-duration",
        apply: |c, v| {
            c.leader_election.lease_duration = parse_duration(v)?;
            Ok(())
        },
    },
    Setting {
        key: "leaderElection.renewDeadline",
        env: "VAPCHECK_RENEW_DEADLINE",
        flag: "renew-deadline",
        apply: |c, v| {
            c.leader_election.renew_deadline = parse_duration(v)?;
            Ok(())
        },
    },
    Setting {
        key: "metrics.bindAddress",
        env: "VAPCHECK_METRICS_BIND_ADDRESS",
        flag: "metrics-bind-address",
        apply: |c, v| {
            c.metrics.bind_address = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "metrics.secure.enabled",
        env: "VAPCHECK_METRICS_SECURE",
        flag: "metrics-secure",
        apply: |c, v| {
            c.metrics.secure.enabled = parse_bool(v)?;
            Ok(())
        },
    },
    Setting {
        key: "metrics.secure.certFile",
        env: "VAPCHECK_METRICS_CERT_FILE",
        flag: "metrics-cert-file",
        apply: |c, v| {
            c.metrics.secure.cert_file = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "metrics.secure.keyFile",
        env: "VAPCHECK_METRICS_KEY_FILE",
        flag: "metrics-key-file",
        apply: |c, v| {
            c.metrics.secure.key_file = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "metrics.secure.authorize",
        env: "VAPCHECK_METRICS_AUTHORIZE",
        flag: "metrics-authorize",
        apply: |c, v| {
            c.metrics.secure.authorize = parse_bool(v)?;
            Ok(())
        },
    },
    Setting {
        key: "health.bindAddress",
        env: "VAPCHECK_HEALTH_BIND_ADDRESS",
        flag: "health-bind-address",
        apply: |c, v| {
            c.health.bind_address = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "log.format",
        env: "VAPCHECK_LOG_FORMAT",
        flag: "log-format",
        apply: |c, v| {
            c.log.format = parse_enum(v, "text, json")?;
            Ok(())
        },
    },
    Setting {
        key: "log.level",
        env: "VAPCHECK_LOG_LEVEL",
        flag: "log-level",
        apply: |c, v| {
            c.log.level = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "kubernetesVersion",
        env: "VAPCHECK_KUBERNETES_VERSION",
        flag: "kubernetes-version",
        apply: |c, v| {
            c.kubernetes_version = v.trim().to_owned();
            Ok(())
        },
    },
    Setting {
        key: "reports.enabled",
        env: "VAPCHECK_REPORTS",
        flag: "reports",
        apply: |c, v| {
            c.reports.enabled = parse_bool(v)?;
            Ok(())
        },
    },
];

/// Command-line flags of the controller, to be `#[command(flatten)]`ed into its subcommand.
///
/// Each flag overrides the file and the environment. Values are parsed by the same code as the
/// environment variables ([`SETTINGS`]), so errors name the key and the flag.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// Configuration file (YAML, see config/vapcheck.yaml). Also VAPCHECK_CONFIG.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Checking mode: extended or strict. Also VAPCHECK_MODE.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Status ownership: full or conditionsOnly. Also VAPCHECK_STATUS_MODE.
    #[arg(long, value_name = "MODE")]
    pub status_mode: Option<String>,
    /// Maximum kinds checked per policy (extended mode). Also VAPCHECK_KIND_LIMIT.
    #[arg(long, value_name = "N")]
    pub kind_limit: Option<String>,
    /// Expand wildcard match rules: true or false. Also VAPCHECK_EXPAND_WILDCARDS.
    #[arg(long, value_name = "BOOL")]
    pub expand_wildcards: Option<String>,
    /// Policies reconciled in parallel. Also VAPCHECK_CONCURRENCY.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<String>,
    /// Full re-check period, e.g. 10m; 0s turns it off. Also VAPCHECK_RECHECK_PERIOD.
    #[arg(long, value_name = "DURATION")]
    pub recheck_period: Option<String>,
    /// OpenAPI discovery poll interval, e.g. 1m. Also VAPCHECK_SCHEMA_POLL_INTERVAL.
    #[arg(long, value_name = "DURATION")]
    pub schema_poll_interval: Option<String>,
    /// Warn this long before a webhook caBundle certificate expires, e.g. 720h. Also
    /// VAPCHECK_WEBHOOK_CERTIFICATE_WARNING.
    #[arg(long, value_name = "DURATION")]
    pub webhook_certificate_warning: Option<String>,
    /// Leader election: true or false. Also VAPCHECK_LEADER_ELECTION.
    #[arg(long, value_name = "BOOL")]
    pub leader_election: Option<String>,
    /// Lease name. Also VAPCHECK_LEASE_NAME.
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,
    /// Lease namespace (default: own namespace). Also VAPCHECK_LEASE_NAMESPACE.
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Lease duration, e.g. 15s. Also VAPCHECK_LEASE_DURATION.
    #[arg(long, value_name = "DURATION")]
    pub lease_duration: Option<String>,
    /// Lease renew deadline, e.g. 5s. Also VAPCHECK_RENEW_DEADLINE.
    #[arg(long, value_name = "DURATION")]
    pub renew_deadline: Option<String>,
    /// Metrics listen address. Also VAPCHECK_METRICS_BIND_ADDRESS.
    #[arg(long, value_name = "ADDR")]
    pub metrics_bind_address: Option<String>,
    /// Serve metrics over HTTPS: true or false. Also VAPCHECK_METRICS_SECURE.
    #[arg(long, value_name = "BOOL")]
    pub metrics_secure: Option<String>,
    /// PEM certificate for HTTPS metrics. Also VAPCHECK_METRICS_CERT_FILE.
    #[arg(long, value_name = "PATH")]
    pub metrics_cert_file: Option<String>,
    /// PEM key for HTTPS metrics. Also VAPCHECK_METRICS_KEY_FILE.
    #[arg(long, value_name = "PATH")]
    pub metrics_key_file: Option<String>,
    /// Authenticate and authorize metrics scrapers: true or false. Also VAPCHECK_METRICS_AUTHORIZE.
    #[arg(long, value_name = "BOOL")]
    pub metrics_authorize: Option<String>,
    /// Health probe listen address. Also VAPCHECK_HEALTH_BIND_ADDRESS.
    #[arg(long, value_name = "ADDR")]
    pub health_bind_address: Option<String>,
    /// Log format: text or json. Also VAPCHECK_LOG_FORMAT.
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log level or filter, e.g. info. Also VAPCHECK_LOG_LEVEL; RUST_LOG wins over both.
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Kubernetes version override, e.g. 1.37. Also VAPCHECK_KUBERNETES_VERSION.
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<String>,
    /// Policy reports (OpenReports, wgpolicyk8s.io): true or false. Also VAPCHECK_REPORTS.
    #[arg(long, value_name = "BOOL")]
    pub reports: Option<String>,
}

impl ConfigArgs {
    /// The flag values by key, in the order of [`SETTINGS`].
    fn values(&self) -> [(&'static str, Option<&String>); 23] {
        [
            ("mode", self.mode.as_ref()),
            ("statusMode", self.status_mode.as_ref()),
            ("kindLimit", self.kind_limit.as_ref()),
            ("expandWildcards", self.expand_wildcards.as_ref()),
            ("concurrency", self.concurrency.as_ref()),
            ("recheckPeriod", self.recheck_period.as_ref()),
            ("schemaPollInterval", self.schema_poll_interval.as_ref()),
            (
                "webhookCertificateWarning",
                self.webhook_certificate_warning.as_ref(),
            ),
            ("leaderElection.enabled", self.leader_election.as_ref()),
            ("leaderElection.leaseName", self.lease_name.as_ref()),
            (
                "leaderElection.leaseNamespace",
                self.lease_namespace.as_ref(),
            ),
            ("leaderElection.leaseDuration", self.lease_duration.as_ref()),
            ("leaderElection.renewDeadline", self.renew_deadline.as_ref()),
            ("metrics.bindAddress", self.metrics_bind_address.as_ref()),
            ("metrics.secure.enabled", self.metrics_secure.as_ref()),
            ("metrics.secure.certFile", self.metrics_cert_file.as_ref()),
            ("metrics.secure.keyFile", self.metrics_key_file.as_ref()),
            ("metrics.secure.authorize", self.metrics_authorize.as_ref()),
            ("health.bindAddress", self.health_bind_address.as_ref()),
            ("log.format", self.log_format.as_ref()),
            ("log.level", self.log_level.as_ref()),
            ("kubernetesVersion", self.kubernetes_version.as_ref()),
            ("reports.enabled", self.reports.as_ref()),
        ]
    }

    /// Applies the flags that were given on top of `config`.
    pub fn apply_flags(&self, config: &mut Config) -> Result<(), ConfigError> {
        for (key, value) in self.values() {
            let Some(value) = value else { continue };
            let setting = SETTINGS
                .iter()
                .find(|s| s.key == key)
                .ok_or_else(|| invalid(key, "no such setting"))?;
            (setting.apply)(config, value).map_err(|message| ConfigError::Invalid {
                key: key.to_owned(),
                origin: format!(" (from --{})", setting.flag),
                message,
            })?;
        }
        Ok(())
    }

    /// Loads the effective configuration: defaults, then the file (`--config` or
    /// `VAPCHECK_CONFIG`), then `VAPCHECK_*` variables read through `env`, then the flags;
    /// finally validates it.
    pub fn load_with_env(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let path = self
            .config
            .clone()
            .or_else(|| env("VAPCHECK_CONFIG").map(PathBuf::from));
        let mut config = match path {
            Some(path) => Config::from_file(&path)?,
            None => Config::default(),
        };
        config.apply_env(&env)?;
        self.apply_flags(&mut config)?;
        config.validated()
    }

    /// [`ConfigArgs::load_with_env`] with the process environment.
    pub fn load(&self) -> Result<Config, ConfigError> {
        self.load_with_env(|name| std::env::var(name).ok())
    }
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

/// A duration written as a string of number-unit pairs: `250ms`, `30s`, `5m`, `1h30m`.
///
/// Units: `ms`, `s`, `m`, `h`. Numbers are non-negative integers. Serializes back to the
/// shortest such string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// A whole number of seconds.
    pub const fn from_secs(s: u64) -> Duration {
        Duration(std::time::Duration::from_secs(s))
    }

    /// The standard-library duration.
    pub const fn get(self) -> std::time::Duration {
        self.0
    }

    /// Whether the duration has no sub-second part.
    pub fn is_whole_seconds(self) -> bool {
        self.0.subsec_nanos() == 0
    }

    /// Whether the duration is zero.
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing given.
    #[error("empty duration; write e.g. 30s, 5m or 1h30m")]
    Empty,
    /// A unit without a number or garbage.
    #[error("`{0}` is not a duration: expected number-unit pairs such as 30s, 5m or 1h30m")]
    Syntax(String),
    /// A number without a unit.
    #[error("`{0}` has a number without a unit; units are ms, s, m, h")]
    MissingUnit(String),
    /// A unit we do not know.
    #[error("`{input}` has unknown unit `{unit}`; units are ms, s, m, h")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The unknown unit.
        unit: String,
    },
    /// Too large.
    #[error("`{0}` is too large")]
    Overflow(String),
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let input = s.trim();
        if input.is_empty() {
            return Err(DurationError::Empty);
        }
        let overflow = || DurationError::Overflow(input.to_owned());
        let bytes = input.as_bytes();
        let mut i = 0;
        let mut total_ms: u64 = 0;
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return Err(DurationError::Syntax(input.to_owned()));
            }
            let number: u64 = input[start..i].parse().map_err(|_| overflow())?;
            let unit_start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            let unit = &input[unit_start..i];
            let factor_ms: u64 = match unit {
                "" => return Err(DurationError::MissingUnit(input.to_owned())),
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                other => {
                    return Err(DurationError::UnknownUnit {
                        input: input.to_owned(),
                        unit: other.to_owned(),
                    });
                }
            };
            let part = number.checked_mul(factor_ms).ok_or_else(overflow)?;
            total_ms = total_ms.checked_add(part).ok_or_else(overflow)?;
        }
        Ok(Duration(std::time::Duration::from_millis(total_ms)))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, rest) = (rest / 60_000, rest % 60_000);
        let (s, ms) = (rest / 1_000, rest % 1_000);
        for (value, unit) in [(h, "h"), (m, "m"), (s, "s"), (ms, "ms")] {
            if value != 0 {
                write!(f, "{value}{unit}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ms|s|m|h))+$",
            "description": "A duration as number-unit pairs, units ms, s, m, h: 250ms, 30s, 5m, 1h30m."
        })
    }
}

/// The JSON Schema of the configuration file, as checked in at `config/vapcheck.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The log filter: `RUST_LOG` when set and not blank (it overrides the configured level),
/// else the configured level or directive.
pub fn log_filter(
    level: &str,
    rust_log: Option<&str>,
) -> Result<tracing_subscriber::EnvFilter, ConfigError> {
    match rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        Some(directive) => {
            tracing_subscriber::EnvFilter::try_new(directive).map_err(|e| ConfigError::Invalid {
                key: "log.level".to_owned(),
                origin: " (from RUST_LOG)".to_owned(),
                message: format!("`{directive}` is not a valid filter: {e}"),
            })
        }
        None => tracing_subscriber::EnvFilter::try_new(level)
            .map_err(|e| invalid("log.level", format!("`{level}` is not a valid filter: {e}"))),
    }
}

/// A subscriber writing to `writer` in `format` through `filter`; [`init_logging`] installs
/// one writing to stderr. JSON lines carry the event fields at top level and the current span
/// (e.g. `policy`, `generation`) under `span`.
pub fn log_subscriber<W>(
    format: LogFormat,
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(true);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(false).finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .finish(),
        ),
    }
}

/// Installs the global tracing subscriber: `format` and `level` from [`LogConfig`], with
/// `RUST_LOG` overriding the level. Logs go to stderr. Fails when the filter is invalid or a
/// subscriber is already installed.
pub fn init_logging(format: LogFormat, level: &str) -> Result<(), ConfigError> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = log_filter(level, rust_log.as_deref())?;
    tracing::subscriber::set_global_default(log_subscriber(format, filter, std::io::stderr))
        .map_err(|e| invalid("log", format!("cannot install the logger: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_file(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    }

    fn err_of(yaml: &str) -> ConfigError {
        match Config::from_yaml_str(yaml) {
            Ok(c) => panic!("expected an error for {yaml:?}, got {c:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn empty_document_is_default() {
        assert_eq!(Config::from_yaml_str("").ok(), Some(Config::default()));
        assert_eq!(
            Config::from_yaml_str("# only a comment\n").ok(),
            Some(Config::default())
        );
    }

    #[test]
    fn default_is_valid() {
        assert!(Config::default().validate().is_ok());
    }

    #[test]
    fn documented_default_file_equals_default() {
        let path = repo_file("config/vapcheck.yaml");
        let config = Config::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config, Config::default());
    }

    #[test]
    fn documented_default_file_mentions_every_key_with_a_comment() {
        let text = std::fs::read_to_string(repo_file("config/vapcheck.yaml")).unwrap_or_default();
        for setting in SETTINGS {
            let leaf = setting.key.rsplit('.').next().unwrap_or(setting.key);
            let line_idx = text
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{leaf}:")))
                .unwrap_or_else(|| panic!("config/vapcheck.yaml lacks key {}", setting.key));
            let previous = text.lines().nth(line_idx.saturating_sub(1)).unwrap_or("");
            assert!(
                line_idx > 0 && previous.trim_start().starts_with('#'),
                "key {} in config/vapcheck.yaml has no comment above it",
                setting.key
            );
        }
    }

    #[test]
    fn json_schema_is_up_to_date() {
        let path = repo_file("config/vapcheck.schema.json");
        let generated = json_schema();
        // Only VAPCHECK_BLESS=1 rewrites the file, and never under CI (tests/it/support.rs).
        let bless = std::env::var_os("VAPCHECK_BLESS").is_some_and(|v| v == "1");
        let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
        assert!(
            !(bless && under_ci),
            "VAPCHECK_BLESS=1 under CI: goldens are never rewritten in CI"
        );
        if bless {
            std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "config/vapcheck.schema.json is stale; run `VAPCHECK_BLESS=1 cargo test --lib config::` to regenerate"
        );
    }

    #[test]
    fn operations_doc_documents_every_key() {
        let doc = std::fs::read_to_string(repo_file("docs/operations.md")).unwrap_or_default();
        for setting in SETTINGS {
            for needle in [
                format!("`{}`", setting.key),
                setting.env.to_owned(),
                format!("--{}", setting.flag),
            ] {
                assert!(doc.contains(&needle), "docs/operations.md lacks {needle}");
            }
        }
    }

    #[test]
    fn schema_mentions_every_setting() {
        let schema: serde_json::Value = serde_json::from_str(&json_schema()).unwrap_or_default();
        let text = schema.to_string();
        for setting in SETTINGS {
            let leaf = setting.key.rsplit('.').next().unwrap_or(setting.key);
            assert!(text.contains(&format!("\"{leaf}\"")), "{}", setting.key);
        }
    }

    #[test]
    fn full_file_parses() {
        let yaml = "mode: strict\nstatusMode: conditionsOnly\nkindLimit: 5\nexpandWildcards: false\n\
            concurrency: 8\nrecheckPeriod: 1h30m\nschemaPollInterval: 30s\n\
            leaderElection:\n  enabled: false\n  leaseName: my-lease\n  leaseNamespace: ops\n  leaseDuration: 30s\n  renewDeadline: 10s\n\
            metrics:\n  bindAddress: 127.0.0.1:9090\n  secure:\n    enabled: true\n    certFile: /c.pem\n    keyFile: /k.pem\n    authorize: false\n\
            health:\n  bindAddress: '[::]:9091'\n\
            log:\n  format: json\n  level: debug\n\
            kubernetesVersion: '1.36'\n";
        let c = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.mode, Mode::Strict);
        assert_eq!(c.status_mode, StatusMode::ConditionsOnly);
        assert_eq!(c.kind_limit, 5);
        assert!(!c.expand_wildcards);
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.recheck_period.get(), std::time::Duration::from_secs(5400));
        assert_eq!(c.schema_poll_interval, Duration::from_secs(30));
        assert!(!c.leader_election.enabled);
        assert_eq!(c.leader_election.lease_name, "my-lease");
        assert_eq!(c.leader_election.lease_namespace, "ops");
        assert_eq!(c.leader_election.renew_deadline, Duration::from_secs(10));
        assert_eq!(
            c.metrics_addr().ok(),
            "127.0.0.1:9090".parse::<SocketAddr>().ok()
        );
        assert!(c.metrics.secure.enabled && !c.metrics.secure.authorize);
        assert_eq!(c.health_addr().ok(), "[::]:9091".parse::<SocketAddr>().ok());
        let go_style = Config::from_yaml_str("metrics:\n  bindAddress: ':9090'\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            go_style.metrics_addr().ok(),
            "0.0.0.0:9090".parse::<SocketAddr>().ok()
        );
        assert_eq!(c.log.format, LogFormat::Json);
        assert_eq!(c.kubernetes_version_override(), Some((1, 36, None)));
    }

    #[test]
    fn unknown_key_names_the_key() {
        let e = err_of("leaderElection:\n  leaseDurration: 10s\n");
        let text = e.to_string();
        assert!(text.contains("leaseDurration"), "{text}");
        assert!(text.contains("leaderElection"), "{text}");
    }

    #[test]
    fn unknown_top_level_key_names_the_key() {
        let text = err_of("concurency: 3\n").to_string();
        assert!(text.contains("concurency"), "{text}");
    }

    #[test]
    fn bad_enum_names_the_key() {
        let e = err_of("statusMode: partial\n");
        assert_eq!(e.key(), Some("statusMode"), "{e}");
        assert!(e.to_string().contains("statusMode"));
    }

    #[test]
    fn bad_duration_names_the_nested_key() {
        let e = err_of("leaderElection:\n  leaseDuration: 10 seconds\n");
        assert_eq!(e.key(), Some("leaderElection.leaseDuration"), "{e}");
        assert!(e.to_string().contains("leaderElection.leaseDuration"));
    }

    #[test]
    fn bad_type_names_the_key() {
        let e = err_of("concurrency: many\n");
        assert_eq!(e.key(), Some("concurrency"), "{e}");
    }

    #[test]
    fn semantic_errors_name_the_key() {
        let cases = [
            ("kindLimit: 0\n", "kindLimit"),
            ("concurrency: 0\n", "concurrency"),
            ("schemaPollInterval: 0s\n", "schemaPollInterval"),
            (
                "leaderElection:\n  leaseName: Not_Valid\n",
                "leaderElection.leaseName",
            ),
            (
                "leaderElection:\n  leaseNamespace: -x\n",
                "leaderElection.leaseNamespace",
            ),
            (
                "leaderElection:\n  leaseDuration: 1500ms\n",
                "leaderElection.leaseDuration",
            ),
            (
                "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n",
                "leaderElection.renewDeadline",
            ),
            (
                "metrics:\n  bindAddress: 'localhost:8080'\n",
                "metrics.bindAddress",
            ),
            ("health:\n  bindAddress: localhost\n", "health.bindAddress"),
            (
                "metrics:\n  secure:\n    certFile: /c.pem\n",
                "metrics.secure.keyFile",
            ),
            ("log:\n  level: 'info,[[['\n", "log.level"),
            (
                "metrics:\n  bindAddress: ':9000'\n  secure:\n    enabled: true\nhealth:\n  bindAddress: ':9000'\n",
                "metrics.bindAddress",
            ),
            ("kubernetesVersion: latest\n", "kubernetesVersion"),
        ];
        for (yaml, key) in cases {
            let e = err_of(yaml);
            assert_eq!(e.key(), Some(key), "{yaml}: {e}");
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    #[test]
    fn env_overrides_file_and_flags_override_env() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "concurrency: 2\nmode: strict\nlog:\n  level: warn\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let env = |name: &str| match name {
            "VAPCHECK_CONFIG" => Some(file.display().to_string()),
            "VAPCHECK_CONCURRENCY" => Some("6".to_owned()),
            "VAPCHECK_LOG_LEVEL" => Some("debug".to_owned()),
            "VAPCHECK_LEASE_NAMESPACE" => Some("from-env".to_owned()),
            _ => None,
        };
        let args = ConfigArgs {
            concurrency: Some("9".to_owned()),
            ..ConfigArgs::default()
        };
        let c = args.load_with_env(env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.mode, Mode::Strict, "file value kept");
        assert_eq!(c.concurrency, 9, "flag beats env beats file");
        assert_eq!(c.log.level, "debug", "env beats file");
        assert_eq!(c.leader_election.lease_namespace, "from-env");
    }

    #[test]
    fn env_error_names_key_and_variable() {
        let mut c = Config::default();
        let e = c
            .apply_env(|n| (n == "VAPCHECK_RECHECK_PERIOD").then(|| "5 minutes".to_owned()))
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        let text = e.to_string();
        assert!(text.contains("recheckPeriod"), "{text}");
        assert!(text.contains("VAPCHECK_RECHECK_PERIOD"), "{text}");
    }

    #[test]
    fn flag_error_names_key_and_flag() {
        let args = ConfigArgs {
            status_mode: Some("sometimes".to_owned()),
            ..ConfigArgs::default()
        };
        let e = args
            .load_with_env(|_| None)
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        let text = e.to_string();
        assert!(
            text.contains("statusMode") && text.contains("--status-mode"),
            "{text}"
        );
        assert!(text.contains("full, conditionsOnly"), "{text}");
    }

    #[test]
    fn flags_parse_with_clap() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            config: ConfigArgs,
        }
        let cli = Cli::try_parse_from([
            "vapcheck",
            "--mode",
            "strict",
            "--lease-duration",
            "20s",
            "--metrics-bind-address",
            "127.0.0.1:0",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let c = cli
            .config
            .load_with_env(|_| None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.mode, Mode::Strict);
        assert_eq!(c.leader_election.lease_duration, Duration::from_secs(20));
        assert_eq!(c.metrics.bind_address, "127.0.0.1:0");
    }

    #[test]
    fn every_setting_has_a_flag_and_env() {
        let args = ConfigArgs::default();
        let keys: Vec<_> = args.values().iter().map(|(k, _)| *k).collect();
        let settings: Vec<_> = SETTINGS.iter().map(|s| s.key).collect();
        assert_eq!(keys, settings);
        for s in SETTINGS {
            assert!(s.env.starts_with("VAPCHECK_"), "{s:?}");
        }
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let e = Config::from_file(Path::new("/nonexistent/vapcheck.yaml"))
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert!(matches!(e, ConfigError::Read { .. }), "{e}");
    }

    #[test]
    fn durations_parse_and_print() {
        let ok = [
            ("250ms", 250),
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h30m", 5_400_000),
            ("1h0m5s", 3_605_000),
            ("0s", 0),
            ("90s", 90_000),
        ];
        for (s, ms) in ok {
            let d: Duration = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(d.get(), std::time::Duration::from_millis(ms), "{s}");
        }
        assert_eq!(Duration::from_secs(90).to_string(), "1m30s");
        assert_eq!(Duration::from_secs(0).to_string(), "0s");
        assert_eq!(
            Duration(std::time::Duration::from_millis(3_600_250)).to_string(),
            "1h250ms"
        );
    }

    #[test]
    fn duration_errors_are_clear() {
        assert_eq!("".parse::<Duration>(), Err(DurationError::Empty));
        assert!(matches!(
            "10".parse::<Duration>(),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            "10d".parse::<Duration>(),
            Err(DurationError::UnknownUnit { unit, .. }) if unit == "d"
        ));
        assert!(matches!(
            "-5s".parse::<Duration>(),
            Err(DurationError::Syntax(_))
        ));
        assert!(matches!(
            "s".parse::<Duration>(),
            Err(DurationError::Syntax(_))
        ));
        assert!(matches!(
            "99999999999999999999h".parse::<Duration>(),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            "5124095576030431h".parse::<Duration>(),
            Err(DurationError::Overflow(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn duration_display_round_trips(ms in 0u64..10_000_000_000) {
            let d = Duration(std::time::Duration::from_millis(ms));
            let back: Duration = d.to_string().parse().unwrap_or_default();
            proptest::prop_assert_eq!(back, d);
        }

        #[test]
        fn duration_parser_never_panics(s in "\\PC{0,24}") {
            let _ = s.parse::<Duration>();
        }
    }

    #[test]
    fn lease_namespace_resolution_order() {
        assert_eq!(
            resolve_namespace_from("cfg", Some("env"), Some("sa"), Some("kc")),
            "cfg"
        );
        assert_eq!(
            resolve_namespace_from("", Some("env"), Some("sa"), Some("kc")),
            "env"
        );
        assert_eq!(
            resolve_namespace_from("", None, Some("sa\n"), Some("kc")),
            "sa"
        );
        assert_eq!(
            resolve_namespace_from("", Some(" "), None, Some("kc")),
            "kc"
        );
        assert_eq!(resolve_namespace_from("", None, None, None), "default");
    }

    /// A `MakeWriter` collecting output in memory.
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut v) = self.0.lock() {
                v.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            self.0
                .lock()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
                .unwrap_or_default()
        }
    }

    fn log_with(format: LogFormat, level: &str) -> String {
        let buf = Buffer::default();
        let filter = log_filter(level, None).unwrap_or_else(|e| panic!("{e}"));
        let subscriber = log_subscriber(format, filter, buf.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", policy = "demo", generation = 3);
            let _entered = span.enter();
            tracing::debug!(outcome = "hidden", "debug event");
            tracing::info!(outcome = "clean", duration_ms = 12, "policy checked");
        });
        buf.text()
    }

    #[test]
    fn json_logs_are_one_object_per_line_with_span_fields() {
        let out = log_with(LogFormat::Json, "info");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "debug filtered out: {out}");
        let v: serde_json::Value =
            serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(v["message"], "policy checked");
        assert_eq!(v["outcome"], "clean");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["span"]["policy"], "demo");
        assert_eq!(v["span"]["generation"], 3);
    }

    #[test]
    fn text_logs_respect_the_level() {
        let out = log_with(LogFormat::Text, "debug");
        assert!(
            out.contains("debug event") && out.contains("policy checked"),
            "{out}"
        );
        assert!(out.contains("policy=\"demo\""), "{out}");
        assert!(!out.contains('\u{1b}'), "no ANSI colours: {out}");
    }

    #[test]
    fn rust_log_overrides_the_level() {
        let f = log_filter("info", Some("warn")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.to_string(), "warn");
        let f = log_filter("info", Some("  ")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.to_string(), "info");
        let e = log_filter("info", Some("[[["))
            .err()
            .unwrap_or_else(|| panic!("error"));
        assert!(e.to_string().contains("RUST_LOG"), "{e}");
    }
}
