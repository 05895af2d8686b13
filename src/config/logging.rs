//! The logger of `vapcheck controller`: `log.format` and `log.level`, `RUST_LOG` overriding.

use super::{ConfigError, LogFormat, invalid};

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
