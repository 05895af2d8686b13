//! The settings of `vapcheck controller` that a flag and an environment variable can set,
//! declared once each in [`SETTINGS`], and the clap arguments made from that table.
//!
//! clap reads each setting's flag and, when the flag is absent, its variable (`Arg::env`);
//! [`ConfigArgs`] keeps the value as given together with where it came from, and the typed
//! parser of the setting turns it into the configuration's value after the file is read, so an
//! error names the key and the variable or flag (`invalid config: key `recheckPeriod` (from
//! VAPCHECK_RECHECK_PERIOD): ...`).

use std::fmt;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};
use serde::Deserialize;

use super::{Config, ConfigError, Duration, LogFormat, Mode, StatusMode, invalid};

/// One key that can be set from an environment variable and a flag.
pub struct Setting {
    /// Dotted camelCase key in the YAML file.
    pub key: &'static str,
    /// Environment variable.
    pub env: &'static str,
    /// Command-line flag, without the leading `--`.
    pub flag: &'static str,
    /// The placeholder of the value in `--help`.
    pub value_name: &'static str,
    /// The line of `--help`.
    pub help: &'static str,
    apply: fn(&mut Config, &str) -> Result<(), String>,
}

impl Setting {
    /// Parses `value` with this setting's parser and stores it in `config`; the error is the
    /// message without key or origin.
    pub fn apply(&self, config: &mut Config, value: &str) -> Result<(), String> {
        (self.apply)(config, value)
    }
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

/// The typed parse of a value given to a flag or a variable (the file goes through serde).
trait SettingValue: Sized {
    fn parse_setting(value: &str) -> Result<Self, String>;
}

impl SettingValue for bool {
    fn parse_setting(v: &str) -> Result<bool, String> {
        match v.trim() {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            other => Err(format!("`{other}` is not a boolean (true or false)")),
        }
    }
}

/// Counts: the number, without surrounding blanks.
macro_rules! number_settings {
    ($($t:ty),+) => {$(
        impl SettingValue for $t {
            fn parse_setting(v: &str) -> Result<$t, String> {
                parse_num(v)
            }
        }
    )+};
}

number_settings!(u32, u16);

fn parse_num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("`{v}` is not a non-negative integer in range"))
}

/// Names, addresses, paths and filters: the value without surrounding blanks.
impl SettingValue for String {
    fn parse_setting(v: &str) -> Result<String, String> {
        Ok(v.trim().to_owned())
    }
}

impl SettingValue for Duration {
    fn parse_setting(v: &str) -> Result<Duration, String> {
        v.parse::<Duration>().map_err(|e| e.to_string())
    }
}

/// An enum of the file (camelCase names), with the list of its names for the error.
fn parse_enum<T: for<'de> Deserialize<'de>>(v: &str, allowed: &str) -> Result<T, String> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(v.trim()))
        .map_err(|_| format!("`{v}` is not one of {allowed}"))
}

/// The enums of the file, with the list of their names for the error.
macro_rules! enum_settings {
    ($($t:ty => $allowed:literal),+ $(,)?) => {$(
        impl SettingValue for $t {
            fn parse_setting(v: &str) -> Result<$t, String> {
                parse_enum(v, $allowed)
            }
        }
    )+};
}

enum_settings! {
    Mode => "extended, strict",
    StatusMode => "full, conditionsOnly",
    LogFormat => "text, json",
}

/// One line per setting: key, variable, flag, value name, the field of [`Config`] it sets
/// (its type chooses the parser) and the help line.
macro_rules! settings {
    ($($key:literal, $env:literal, $flag:literal, $value_name:literal, $($field:ident).+, $help:literal;)+) => {
        /// Every key settable from the environment and the command line, in the order of
        /// `--help`; the file, then the variables, then the flags, each in this order.
        pub const SETTINGS: &[Setting] = &[$(
            Setting {
                key: $key,
                env: $env,
                flag: $flag,
                value_name: $value_name,
                help: $help,
                apply: |config, value| {
                    config.$($field).+ = SettingValue::parse_setting(value)?;
                    Ok(())
                },
            },
        )+];
    };
}

settings! {
    "mode", "VAPCHECK_MODE", "mode", "MODE", mode,
        "Checking mode: extended or strict";
    "statusMode", "VAPCHECK_STATUS_MODE", "status-mode", "MODE", status_mode,
        "Status ownership: full or conditionsOnly";
    "kindLimit", "VAPCHECK_KIND_LIMIT", "kind-limit", "N", kind_limit,
        "Maximum kinds checked per policy (extended mode)";
    "expandWildcards", "VAPCHECK_EXPAND_WILDCARDS", "expand-wildcards", "BOOL", expand_wildcards,
        "Expand wildcard match rules: true or false";
    "concurrency", "VAPCHECK_CONCURRENCY", "concurrency", "N", concurrency,
        "Policies reconciled in parallel";
    "recheckPeriod", "VAPCHECK_RECHECK_PERIOD", "recheck-period", "DURATION", recheck_period,
        "Full re-check period, e.g. 10m; 0s turns it off";
    "schemaPollInterval", "VAPCHECK_SCHEMA_POLL_INTERVAL", "schema-poll-interval", "DURATION",
        schema_poll_interval, "OpenAPI discovery poll interval, e.g. 1m";
    "webhookCertificateWarning", "VAPCHECK_WEBHOOK_CERTIFICATE_WARNING",
        "webhook-certificate-warning", "DURATION", webhook_certificate_warning,
        "Warn this long before a webhook caBundle certificate expires, e.g. 720h";
    "leaderElection.enabled", "VAPCHECK_LEADER_ELECTION", "leader-election", "BOOL",
        leader_election.enabled, "Leader election: true or false";
    "leaderElection.leaseName", "VAPCHECK_LEASE_NAME", "lease-name", "NAME",
        leader_election.lease_name, "Lease name";
    "leaderElection.leaseNamespace", "VAPCHECK_LEASE_NAMESPACE", "lease-namespace", "NAMESPACE",
        leader_election.lease_namespace, "Lease namespace (default: own namespace)";
    "leaderElection.leaseDuration", "VAPCHECK_LEASE_DURATION", "lease-duration", "DURATION",
        leader_election.lease_duration, "Lease duration, e.g. 15s";
    "leaderElection.renewDeadline", "VAPCHECK_RENEW_DEADLINE", "renew-deadline", "DURATION",
        leader_election.renew_deadline, "Lease renew deadline, e.g. 5s";
    "metrics.bindAddress", "VAPCHECK_METRICS_BIND_ADDRESS", "metrics-bind-address", "ADDR",
        metrics.bind_address, "Metrics listen address";
    "metrics.secure.enabled", "VAPCHECK_METRICS_SECURE", "metrics-secure", "BOOL",
        metrics.secure.enabled, "Serve metrics over HTTPS: true or false";
    "metrics.secure.certFile", "VAPCHECK_METRICS_CERT_FILE", "metrics-cert-file", "PATH",
        metrics.secure.cert_file, "PEM certificate for HTTPS metrics";
    "metrics.secure.keyFile", "VAPCHECK_METRICS_KEY_FILE", "metrics-key-file", "PATH",
        metrics.secure.key_file, "PEM key for HTTPS metrics";
    "metrics.secure.authorize", "VAPCHECK_METRICS_AUTHORIZE", "metrics-authorize", "BOOL",
        metrics.secure.authorize, "Authenticate and authorize metrics scrapers: true or false";
    "health.bindAddress", "VAPCHECK_HEALTH_BIND_ADDRESS", "health-bind-address", "ADDR",
        health.bind_address, "Health probe listen address";
    "log.format", "VAPCHECK_LOG_FORMAT", "log-format", "FORMAT", log.format,
        "Log format: text or json";
    "log.level", "VAPCHECK_LOG_LEVEL", "log-level", "FILTER", log.level,
        "Log level or filter, e.g. info; RUST_LOG wins over it";
    "kubernetesVersion", "VAPCHECK_KUBERNETES_VERSION", "kubernetes-version", "VERSION",
        kubernetes_version, "Kubernetes version override, e.g. 1.37";
    "reports.enabled", "VAPCHECK_REPORTS", "reports", "BOOL", reports.enabled,
        "Policy reports (OpenReports, wgpolicyk8s.io): true or false";
}

/// The variable and flag of the configuration file.
const CONFIG_ENV: &str = "VAPCHECK_CONFIG";
const CONFIG_FLAG: &str = "config";

/// Where a value given outside the file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Env,
    Flag,
}

/// One value clap found for a setting.
#[derive(Debug, Clone)]
struct Given {
    setting: &'static Setting,
    value: String,
    origin: Origin,
}

/// The controller's command-line flags and `VAPCHECK_*` variables, one clap argument per
/// [`SETTINGS`] entry (`long` = its flag, `env` = its variable), to be
/// `#[command(flatten)]`ed into its subcommand.
#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    /// `--config` or `VAPCHECK_CONFIG`.
    pub config: Option<PathBuf>,
    given: Vec<Given>,
}

impl ConfigArgs {
    /// Gives `value` to the setting `key` as if on the command line (`--flag value`).
    pub fn with_flag(self, key: &str, value: &str) -> Result<ConfigArgs, ConfigError> {
        self.with(key, value, Origin::Flag)
    }

    /// Gives `value` to the setting `key` as if from its `VAPCHECK_*` variable.
    pub fn with_env(self, key: &str, value: &str) -> Result<ConfigArgs, ConfigError> {
        self.with(key, value, Origin::Env)
    }

    fn with(mut self, key: &str, value: &str, origin: Origin) -> Result<ConfigArgs, ConfigError> {
        let setting = SETTINGS
            .iter()
            .find(|s| s.key == key)
            .ok_or_else(|| invalid(key, "unknown key"))?;
        self.give(setting, value, origin);
        Ok(self)
    }

    /// Records one value; as clap does, a flag hides the variable of the same setting.
    fn give(&mut self, setting: &'static Setting, value: &str, origin: Origin) {
        let same = |g: &Given| std::ptr::eq(g.setting, setting);
        if origin == Origin::Env
            && self
                .given
                .iter()
                .any(|g| same(g) && g.origin == Origin::Flag)
        {
            return;
        }
        self.given.retain(|g| !same(g));
        self.given.push(Given {
            setting,
            value: value.to_owned(),
            origin,
        });
    }

    /// Applies the values of one origin, in the order of [`SETTINGS`].
    fn apply(&self, config: &mut Config, origin: Origin) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            let given = self
                .given
                .iter()
                .filter(|g| std::ptr::eq(g.setting, setting));
            for g in given.filter(|g| g.origin == origin) {
                setting
                    .apply(config, &g.value)
                    .map_err(|message| ConfigError::Invalid {
                        key: setting.key.to_owned(),
                        origin: match origin {
                            Origin::Env => format!(" (from {})", setting.env),
                            Origin::Flag => format!(" (from --{})", setting.flag),
                        },
                        message,
                    })?;
            }
        }
        Ok(())
    }

    /// The effective configuration: defaults, then the file (`--config` or
    /// `VAPCHECK_CONFIG`), then the `VAPCHECK_*` variables, then the flags; finally validated.
    pub fn load(&self) -> Result<Config, ConfigError> {
        let mut config = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        self.apply(&mut config, Origin::Env)?;
        self.apply(&mut config, Origin::Flag)?;
        config.validated()
    }
}

impl clap::Args for ConfigArgs {
    fn augment_args(cmd: Command) -> Command {
        let file = Arg::new(CONFIG_FLAG)
            .long(CONFIG_FLAG)
            .env(CONFIG_ENV)
            .value_name("PATH")
            .value_parser(clap::value_parser!(PathBuf))
            .action(ArgAction::Set)
            .help("Configuration file (YAML, see config/vapcheck.yaml)");
        SETTINGS.iter().fold(cmd.arg(file), |cmd, s| {
            cmd.arg(
                Arg::new(s.flag)
                    .long(s.flag)
                    .env(s.env)
                    .value_name(s.value_name)
                    .action(ArgAction::Set)
                    .help(s.help),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ConfigArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ConfigArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(path) = matches.get_one::<PathBuf>(CONFIG_FLAG) {
            self.config = Some(path.clone());
        }
        for setting in SETTINGS {
            let Some(value) = matches.get_one::<String>(setting.flag) else {
                continue;
            };
            let origin = match matches.value_source(setting.flag) {
                Some(ValueSource::EnvVariable) => Origin::Env,
                _ => Origin::Flag,
            };
            self.give(setting, value, origin);
        }
        Ok(())
    }
}
