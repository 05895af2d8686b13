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
    assert_eq!(
        c.kubernetes_version_override()
            .map(|v| (v.major, v.minor, v.patch)),
        Some((1, 36, None))
    );
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
    let mut args = ConfigArgs::default();
    args.config = Some(file.clone());
    let args = args
        .with_flag("concurrency", "9")
        .and_then(|a| a.with_env("concurrency", "6"))
        .and_then(|a| a.with_env("log.level", "debug"))
        .and_then(|a| a.with_env("leaderElection.leaseNamespace", "from-env"))
        .unwrap_or_else(|e| panic!("{e}"));
    let c = args.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.mode, Mode::Strict, "file value kept");
    assert_eq!(c.concurrency, 9, "flag beats env beats file");
    assert_eq!(c.log.level, "debug", "env beats file");
    assert_eq!(c.leader_election.lease_namespace, "from-env");
}

/// The message of the error `args` fail to load with.
fn load_error(args: Result<ConfigArgs, ConfigError>) -> String {
    match args.and_then(|a| a.load()) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn env_error_names_key_and_variable() {
    let text = load_error(ConfigArgs::default().with_env("recheckPeriod", "5 minutes"));
    assert!(text.contains("recheckPeriod"), "{text}");
    assert!(text.contains("VAPCHECK_RECHECK_PERIOD"), "{text}");
}

#[test]
fn flag_error_names_key_and_flag() {
    let text = load_error(ConfigArgs::default().with_flag("statusMode", "sometimes"));
    assert!(
        text.contains("statusMode") && text.contains("--status-mode"),
        "{text}"
    );
    assert!(text.contains("full, conditionsOnly"), "{text}");
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
}

#[test]
fn flags_parse_with_clap() {
    use clap::Parser;
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
    let c = cli.config.load().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.mode, Mode::Strict);
    assert_eq!(c.leader_election.lease_duration, Duration::from_secs(20));
    assert_eq!(c.metrics.bind_address, "127.0.0.1:0");
}

#[test]
fn every_setting_has_a_flag_and_env() {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let args: Vec<_> = cmd
        .get_arguments()
        .filter(|a| a.get_id() != "config")
        .map(|a| {
            (
                a.get_long().unwrap_or_default().to_owned(),
                a.get_env()
                    .and_then(|e| e.to_str())
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let settings: Vec<_> = SETTINGS
        .iter()
        .map(|s| (s.flag.to_owned(), s.env.to_owned()))
        .collect();
    assert_eq!(args, settings);
    assert_eq!(settings.len(), 23);
    let file = cmd.get_arguments().find(|a| a.get_id() == "config");
    assert_eq!(
        file.and_then(|a| a.get_env()).and_then(|e| e.to_str()),
        Some("VAPCHECK_CONFIG")
    );
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
