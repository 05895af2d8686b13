//! The classic Prometheus text format 0.0.4 made from prometheus-client's OpenMetrics text.

use std::fmt::Write as _;

/// Rewrites prometheus-client's OpenMetrics output into Prometheus text format 0.0.4.
///
/// Differences handled: OpenMetrics names a counter family without `_total` in `# HELP` and
/// `# TYPE` while classic text names it with; `# UNIT` and `# EOF` do not exist in classic
/// text; `unknown` is `untyped`; `info` and `stateset` become gauges. Sample lines are the same.
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (orig, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = orig;
            let (name, kind) = match kind {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "stateset" | "gaugehistogram" => (name.to_owned(), "gauge"),
                "unknown" => (name.to_owned(), "untyped"),
                other => (name.to_owned(), other),
            };
            if let Some((help_name, help)) = pending_help.take() {
                let help_name = if help_name == orig {
                    name.as_str()
                } else {
                    help_name
                };
                let _ = writeln!(out, "# HELP {help_name} {}", escape_help(help));
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        if let Some((name, help)) = pending_help.take() {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn escape_help(help: &str) -> String {
    // Classic text escapes only backslash and newline in HELP; OpenMetrics help from
    // prometheus-client is written raw, so escape backslashes here.
    help.replace('\\', "\\\\")
}
