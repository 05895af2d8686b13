use std::time::Duration;

use super::*;

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Classic,
    OpenMetrics,
}

/// One parsed sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").ok_or(format!("bad labels {s}"))?;
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                '"' => {
                    end = Some(i);
                    break;
                }
                '\n' => return Err("newline in label value".into()),
                c => value.push(c),
            }
        }
        let end = end.ok_or("unterminated label value")?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("duplicate label {name}"));
        }
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    Ok(labels)
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| format!("bad value {s:?}")),
    }
}

/// A strict parser of both exposition formats: every sample belongs to the family of the
/// `# TYPE` line before it, names and labels are well-formed, no series is repeated.
fn parse_exposition(text: &str, format: Format) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut series = BTreeSet::new();
    let mut lines: Vec<&str> = text.lines().collect();
    if !text.ends_with('\n') {
        return Err("no final newline".into());
    }
    if format == Format::OpenMetrics && lines.pop() != Some("# EOF") {
        return Err("OpenMetrics output must end with # EOF".into());
    }
    for line in lines {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !is_metric_name(name) {
                return Err(format!("bad HELP name {name}"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or("bad TYPE")?;
            let allowed: &[&str] = match format {
                Format::Classic => &["counter", "gauge", "histogram", "summary", "untyped"],
                Format::OpenMetrics => &[
                    "counter",
                    "gauge",
                    "histogram",
                    "summary",
                    "unknown",
                    "info",
                    "stateset",
                    "gaugehistogram",
                ],
            };
            if !allowed.contains(&kind) || !is_metric_name(name) {
                return Err(format!("bad TYPE line {line}"));
            }
            if families.insert(name.to_owned(), kind.to_owned()).is_some() {
                return Err(format!("family {name} declared twice"));
            }
            current = Some((name.to_owned(), kind.to_owned()));
            continue;
        }
        if line.starts_with('#') {
            if format == Format::OpenMetrics && line.starts_with("# UNIT ") {
                continue;
            }
            return Err(format!("unexpected comment {line}"));
        }
        let (name_labels, value) = line.rsplit_once(' ').ok_or(format!("bad line {line}"))?;
        let value = parse_value(value)?;
        let (name, labels) = match name_labels.split_once('{') {
            Some((n, l)) => (
                n,
                parse_labels(l.strip_suffix('}').ok_or(format!("bad labels in {line}"))?)?,
            ),
            None => (name_labels, BTreeMap::new()),
        };
        let (family, kind) = current
            .as_ref()
            .ok_or(format!("sample before TYPE: {line}"))?;
        let ok = match (kind.as_str(), format) {
            ("counter", Format::Classic) => name == family,
            ("counter", Format::OpenMetrics) => name == format!("{family}_total"),
            ("histogram", _) => {
                (name == format!("{family}_bucket") && labels.contains_key("le"))
                    || name == format!("{family}_sum")
                    || name == format!("{family}_count")
            }
            _ => name == family,
        };
        if !ok {
            return Err(format!(
                "sample {name} outside its family {family} ({kind})"
            ));
        }
        if !series.insert(format!("{name}{labels:?}")) {
            return Err(format!("duplicate series {line}"));
        }
        samples.push((name.to_owned(), labels, value));
    }
    Ok(samples)
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|(n, l, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
    })
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    find(samples, name, labels)
        .map(|s| s.2)
        .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
}

fn exercised() -> Metrics {
    let m = Metrics::new();
    m.set_max_concurrent_reconciles(4);
    m.start_reconcile().finish(ReconcileResult::Success);
    m.start_reconcile().finish(ReconcileResult::Error);
    m.workqueue_add();
    m.workqueue_retry();
    m.set_workqueue_depth(3);
    m.observe_queue_duration(Duration::from_millis(2));
    m.set_leader("vapcheck", true);
    m.watch_failed(WatchRestartReason::Expired, "410 Gone");
    m.watch_status().succeeded();
    m.set_policy_states(
        PolicyKind::Validating,
        PolicyStateCounts {
            clean: 5,
            warnings: 1,
            partial: 0,
            failed: 0,
        },
    );
    m.set_policy_warnings(PolicyKind::Validating, "demo-policy", 2);
    m.set_policy_runtime_errors(PolicyKind::Validating, "demo-policy", 1);
    m.set_policy_rejected_on_create(PolicyKind::Validating, "demo-policy", true);
    m.set_policy_states(
        PolicyKind::Mutating,
        PolicyStateCounts {
            warnings: 3,
            ..PolicyStateCounts::default()
        },
    );
    m.set_policy_warnings(PolicyKind::Mutating, "demo-policy", 4);
    m.observe_typecheck(Duration::from_millis(3));
    m.kinds_skipped(SkipReason::KindLimit, 2);
    m.schema_fetch(SchemaFetchResult::Success);
    m.set_schema_cache_kinds(42);
    m.status_write(StatusWriteResult::Success);
    m.observe_request("GET", "200", "list", "10.0.0.1", Duration::from_millis(7));
    m
}

/// The families of issue 8 under their final exposed names (classic text).
const EXPECTED_FAMILIES: &[(&str, &str)] = &[
    ("controller_runtime_reconcile_total", "counter"),
    ("controller_runtime_reconcile_errors_total", "counter"),
    ("controller_runtime_reconcile_time_seconds", "histogram"),
    ("controller_runtime_active_workers", "gauge"),
    ("controller_runtime_max_concurrent_reconciles", "gauge"),
    ("workqueue_depth", "gauge"),
    ("workqueue_adds_total", "counter"),
    ("workqueue_retries_total", "counter"),
    ("workqueue_queue_duration_seconds", "histogram"),
    ("workqueue_work_duration_seconds", "histogram"),
    ("leader_election_master_status", "gauge"),
    ("rest_client_requests_total", "counter"),
    ("rest_client_request_duration_seconds", "histogram"),
    ("process_cpu_seconds_total", "counter"),
    ("process_open_fds", "gauge"),
    ("process_resident_memory_bytes", "gauge"),
    ("process_start_time_seconds", "gauge"),
    ("vapcheck_policies", "gauge"),
    ("vapcheck_bindings", "gauge"),
    ("vapcheck_policy_expression_warnings", "gauge"),
    ("vapcheck_policy_runtime_errors", "gauge"),
    ("vapcheck_policy_rejected_on_create", "gauge"),
    ("vapcheck_typecheck_duration_seconds", "histogram"),
    ("vapcheck_cel_estimated_cost", "histogram"),
    ("vapcheck_kinds_skipped_total", "counter"),
    ("vapcheck_schema_fetches_total", "counter"),
    ("vapcheck_schema_cache_kinds", "gauge"),
    ("vapcheck_status_writes_total", "counter"),
    ("vapcheck_watch_restarts_total", "counter"),
    ("vapcheck_watch_forbidden", "gauge"),
    ("vapcheck_watch_seconds_since_last_success", "gauge"),
    ("vapcheck_watch_last_success_timestamp_seconds", "gauge"),
    ("vapcheck_build_info", "gauge"),
];

#[test]
fn classic_text_has_exactly_the_expected_families() {
    let text = exercised().encode_prometheus_text();
    parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let declared: BTreeSet<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_owned(), k.to_owned()))
        .collect();
    let expected: BTreeSet<(String, String)> = EXPECTED_FAMILIES
        .iter()
        .map(|(n, k)| ((*n).to_owned(), (*k).to_owned()))
        .collect();
    assert_eq!(declared, expected, "\n{text}");
    // HELP names match TYPE names in classic text.
    for line in text.lines().filter_map(|l| l.strip_prefix("# HELP ")) {
        let name = line.split(' ').next().unwrap_or("");
        assert!(declared.iter().any(|(n, _)| n == name), "HELP for {name}");
    }
}

#[test]
fn metrics_doc_lists_every_family() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
            .unwrap_or_default();
    for (family, _) in EXPECTED_FAMILIES {
        assert!(
            doc.contains(&format!("| `{family}` |")),
            "docs/metrics.md lacks a row for {family}"
        );
    }
}

#[test]
fn openmetrics_parses_and_names_counters_with_total() {
    let text = exercised().encode_openmetrics();
    let samples =
        parse_exposition(&text, Format::OpenMetrics).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let names: BTreeSet<&str> = samples.iter().map(|s| s.0.as_str()).collect();
    for (family, kind) in EXPECTED_FAMILIES {
        let sample = if *kind == "histogram" {
            format!("{family}_count")
        } else {
            (*family).to_owned()
        };
        assert!(names.contains(sample.as_str()), "missing {sample}\n{text}");
    }
    assert!(!text.contains("_total_total"));
    assert!(!text.contains("# UNIT"));
}

#[test]
fn values_are_exposed_with_their_labels() {
    let m = exercised();
    let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = ("controller", "vapcheck");
    let total = "controller_runtime_reconcile_total";
    assert_eq!(value(&s, total, &[c, ("result", "success")]), 1.0);
    assert_eq!(value(&s, total, &[c, ("result", "error")]), 1.0);
    assert_eq!(value(&s, total, &[c, ("result", "requeue")]), 0.0);
    assert_eq!(
        value(&s, "controller_runtime_reconcile_errors_total", &[c]),
        1.0
    );
    assert_eq!(
        value(&s, "controller_runtime_reconcile_time_seconds_count", &[c]),
        2.0
    );
    let buckets = s
        .iter()
        .filter(|x| x.0 == "controller_runtime_reconcile_time_seconds_bucket")
        .count();
    assert_eq!(
        buckets,
        RECONCILE_TIME_BUCKETS.len() + 1,
        "40 buckets and +Inf"
    );
    assert_eq!(value(&s, "controller_runtime_active_workers", &[c]), 0.0);
    assert_eq!(
        value(&s, "controller_runtime_max_concurrent_reconciles", &[c]),
        4.0
    );
    let wq = [("name", "vapcheck"), c];
    assert_eq!(value(&s, "workqueue_depth", &wq), 3.0);
    assert_eq!(value(&s, "workqueue_adds_total", &wq), 1.0);
    assert_eq!(value(&s, "workqueue_retries_total", &wq), 1.0);
    assert_eq!(
        value(&s, "workqueue_queue_duration_seconds_count", &wq),
        1.0
    );
    assert_eq!(value(&s, "workqueue_work_duration_seconds_count", &wq), 2.0);
    assert_eq!(
        value(&s, "leader_election_master_status", &[("name", "vapcheck")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "rest_client_requests_total",
            &[("code", "200"), ("method", "GET"), ("host", "10.0.0.1")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "rest_client_request_duration_seconds_count",
            &[("verb", "list"), ("host", "10.0.0.1")]
        ),
        1.0
    );
    let vap = ("kind", "ValidatingAdmissionPolicy");
    let map = ("kind", "MutatingAdmissionPolicy");
    assert_eq!(
        value(&s, "vapcheck_policies", &[vap, ("state", "clean")]),
        5.0
    );
    assert_eq!(
        value(&s, "vapcheck_policies", &[vap, ("state", "warnings")]),
        1.0
    );
    assert_eq!(
        value(&s, "vapcheck_policies", &[vap, ("state", "partial")]),
        0.0
    );
    assert_eq!(
        value(&s, "vapcheck_policies", &[vap, ("state", "failed")]),
        0.0
    );
    assert_eq!(
        value(&s, "vapcheck_policies", &[map, ("state", "warnings")]),
        3.0
    );
    assert_eq!(
        value(&s, "vapcheck_policies", &[map, ("state", "clean")]),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_policy_expression_warnings",
            &[vap, ("policy", "demo-policy")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_policy_expression_warnings",
            &[map, ("policy", "demo-policy")]
        ),
        4.0
    );
    assert_eq!(
        value(&s, "vapcheck_typecheck_duration_seconds_count", &[]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_kinds_skipped_total",
            &[("reason", "kind_limit")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_schema_fetches_total",
            &[("result", "success")]
        ),
        1.0
    );
    assert_eq!(value(&s, "vapcheck_schema_cache_kinds", &[]), 42.0);
    assert_eq!(
        value(&s, "vapcheck_status_writes_total", &[("result", "success")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("kubernetes", crate::KUBERNETES_VERSION)
            ]
        ),
        1.0
    );
    assert!(value(&s, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(value(&s, "process_start_time_seconds", &[]) > 1.6e9);
    assert!(value(&s, "process_open_fds", &[]) >= 1.0);
    assert!(value(&s, "process_cpu_seconds_total", &[]) >= 0.0);
}

#[test]
fn estimated_costs_are_observed_per_expression_and_kind() {
    use crate::policy::cost::{CostOutcome, analyze};
    use crate::policy::{ExpressionField, Gvk};
    let m = Metrics::new();
    let outcome = |max| CostOutcome {
        min: 1,
        max,
        unbounded: Vec::new(),
    };
    let cost = analyze(vec![
        (
            ExpressionField::ValidationExpression(0),
            Gvk::new("", "v1", "Pod").into(),
            outcome(5),
        ),
        (
            ExpressionField::ValidationExpression(0),
            Gvk::new("", "v1", "Service").into(),
            outcome(5),
        ),
        (
            ExpressionField::ValidationExpression(1),
            Gvk::new("", "v1", "Pod").into(),
            outcome(7_340_029),
        ),
    ]);
    m.observe_estimated_costs(&cost);
    let text = m.encode_prometheus_text();
    let s = parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(value(&s, "vapcheck_cel_estimated_cost_count", &[]), 3.0);
    assert_eq!(
        value(&s, "vapcheck_cel_estimated_cost_bucket", &[("le", "10.0")]),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_cel_estimated_cost_bucket",
            &[("le", "1000000.0")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "vapcheck_cel_estimated_cost_bucket",
            &[("le", "10000000.0")]
        ),
        3.0
    );
}

#[test]
fn deleted_policy_series_is_removed() {
    let m = Metrics::new();
    m.set_policy_warnings(PolicyKind::Validating, "a", 1);
    m.set_policy_warnings(PolicyKind::Validating, "b", 0);
    // A MAP of the same name is another series.
    m.set_policy_warnings(PolicyKind::Mutating, "a", 2);
    m.remove_policy(PolicyKind::Validating, "a");
    let text = m.encode_prometheus_text();
    assert!(
        !text.contains("kind=\"ValidatingAdmissionPolicy\",policy=\"a\""),
        "{text}"
    );
    assert!(
        text.contains(
            "vapcheck_policy_expression_warnings{kind=\"ValidatingAdmissionPolicy\",policy=\"b\"} 0"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "vapcheck_policy_expression_warnings{kind=\"MutatingAdmissionPolicy\",policy=\"a\"} 2"
        ),
        "{text}"
    );
}

#[test]
fn label_values_are_escaped() {
    let m = Metrics::new();
    m.set_leader("we\"ird\\name", false);
    let text = m.encode_prometheus_text();
    let s = parse_exposition(&text, Format::Classic).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        value(
            &s,
            "leader_election_master_status",
            &[("name", "we\"ird\\name")]
        ),
        0.0
    );
}

#[test]
fn accept_header_selects_the_format() {
    let m = Metrics::new();
    let (ct, body) = m.encode_for_accept(Some(
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    ));
    assert_eq!(ct, OPENMETRICS_CONTENT_TYPE);
    assert!(body.ends_with("# EOF\n"));
    let (ct, body) = m.encode_for_accept(Some("text/plain"));
    assert_eq!(ct, PROMETHEUS_TEXT_CONTENT_TYPE);
    assert!(!body.contains("# EOF"));
    assert_eq!(m.encode_for_accept(None).0, PROMETHEUS_TEXT_CONTENT_TYPE);
}

#[test]
fn guard_dropped_without_finish_releases_the_worker() {
    let m = Metrics::new();
    let g1 = m.start_reconcile();
    let g2 = m.start_reconcile();
    let text = m.encode_prometheus_text();
    assert!(text.contains("controller_runtime_active_workers{controller=\"vapcheck\"} 2"));
    drop(g1);
    g2.finish(ReconcileResult::RequeueAfter);
    let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        value(
            &s,
            "controller_runtime_active_workers",
            &[("controller", "vapcheck")]
        ),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "controller_runtime_reconcile_total",
            &[("result", "requeue_after")]
        ),
        1.0
    );
}

#[test]
fn proc_stat_parsing() {
    // proc(5) layout; the command contains a space and a parenthesis.
    let stat = "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                4 0 1000 123456789 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    let (cpu, rss, start) =
        parse_proc_stat(stat, 100.0, 4096, 1_700_000_000).unwrap_or((0.0, 0, 0.0));
    assert_eq!(cpu, 3.0);
    assert_eq!(rss, 300 * 4096);
    assert_eq!(start, 1_700_000_010.0);
    assert_eq!(parse_proc_stat("garbage", 100.0, 4096, 0), None);
    assert_eq!(parse_proc_stat("1 (x) S 1 2", 100.0, 4096, 0), None);
    assert_eq!(
        parse_boot_time("cpu 1 2\nbtime 1700000000\n"),
        Some(1_700_000_000)
    );
    assert_eq!(parse_boot_time("cpu 1 2\n"), None);
}

#[test]
fn process_stats_are_read_on_linux() {
    if !Path::new("/proc/self/stat").exists() {
        eprintln!("skipped: no /proc on this system");
        return;
    }
    let stats = read_process_stats().unwrap_or_else(|| panic!("/proc/self readable"));
    assert!(stats.resident_bytes > 0);
    assert!(stats.open_fds > 0);
}

use std::path::Path;

fn fake_response(status: u16) -> http::Response<String> {
    http::Response::builder()
        .status(status)
        .body(String::new())
        .unwrap_or_default()
}

#[tokio::test]
async fn layer_counts_requests_against_a_fake_service() {
    use tower::{Layer, ServiceExt};
    let m = Metrics::new();
    let layer = m.rest_client_layer("apiserver.example");
    let svc = layer.layer(tower::service_fn(|req: http::Request<()>| async move {
        if req.uri().path() == "/fail" {
            Err::<http::Response<String>, std::io::Error>(std::io::Error::other("refused"))
        } else if req.uri().path() == "/missing" {
            Ok(fake_response(404))
        } else {
            Ok(fake_response(200))
        }
    }));
    let mut tagged = http::Request::get("/apis/x").body(()).unwrap_or_default();
    tagged.extensions_mut().insert::<&'static str>("list");
    assert!(svc.clone().oneshot(tagged).await.is_ok());
    let untagged = http::Request::get("/missing").body(()).unwrap_or_default();
    assert!(svc.clone().oneshot(untagged).await.is_ok());
    let with_host = http::Request::patch("https://10.1.2.3:6443/fail")
        .body(())
        .unwrap_or_default();
    assert!(svc.clone().oneshot(with_host).await.is_err());

    let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
        .unwrap_or_else(|e| panic!("{e}"));
    let h = ("host", "apiserver.example");
    let r = "rest_client_requests_total";
    assert_eq!(value(&s, r, &[("code", "200"), ("method", "GET"), h]), 1.0);
    assert_eq!(value(&s, r, &[("code", "404"), ("method", "GET"), h]), 1.0);
    assert_eq!(
        value(
            &s,
            r,
            &[
                ("code", "<error>"),
                ("method", "PATCH"),
                ("host", "10.1.2.3")
            ]
        ),
        1.0
    );
    let d = "rest_client_request_duration_seconds_count";
    assert_eq!(value(&s, d, &[("verb", "list"), h]), 1.0);
    assert_eq!(
        value(&s, d, &[("verb", "get"), h]),
        1.0,
        "untagged falls back to the method"
    );
    assert_eq!(
        value(&s, d, &[("verb", "patch"), ("host", "10.1.2.3")]),
        1.0
    );
}

#[tokio::test]
async fn layer_fits_a_kube_client_and_sees_kube_verbs() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let m = Metrics::new();
    let fake = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
        let body = if req.uri().path().ends_with("/configmaps") {
            r#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"1"},"items":[]}"#
        } else {
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#
        };
        let status = if req.uri().path().ends_with("/configmaps") {
            200
        } else {
            404
        };
        http::Response::builder()
            .status(status)
            .body(kube::client::Body::from(body.as_bytes().to_vec()))
            .map_err(|e| std::io::Error::other(e.to_string()))
    });
    let client = kube::client::ClientBuilder::new(fake, "default")
        .with_layer(&m.rest_client_layer("fake-apiserver"))
        .build();
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
    assert!(api.list(&Default::default()).await.is_ok());
    assert!(api.get("nope").await.is_err());
    let s = parse_exposition(&m.encode_prometheus_text(), Format::Classic)
        .unwrap_or_else(|e| panic!("{e}"));
    let h = ("host", "fake-apiserver");
    let d = "rest_client_request_duration_seconds_count";
    assert_eq!(value(&s, d, &[("verb", "list"), h]), 1.0);
    assert_eq!(value(&s, d, &[("verb", "get"), h]), 1.0);
    let r = "rest_client_requests_total";
    assert_eq!(value(&s, r, &[("code", "404"), ("method", "GET"), h]), 1.0);
}

#[test]
fn conversion_handles_every_openmetrics_type() {
    let om = "# HELP a_thing Some help.\n# TYPE a_thing counter\n# UNIT a_thing seconds\na_thing_total 1\n\
              # HELP b Info.\n# TYPE b info\nb_info{v=\"1\"} 1\n# TYPE c unknown\nc 2\n# EOF\n";
    let classic = openmetrics_to_prometheus_text(om);
    assert_eq!(
        classic,
        "# HELP a_thing_total Some help.\n# TYPE a_thing_total counter\na_thing_total 1\n\
         # HELP b_info Info.\n# TYPE b_info gauge\nb_info{v=\"1\"} 1\n# TYPE c untyped\nc 2\n"
    );
    parse_exposition(&classic, Format::Classic).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn strict_parser_rejects_bad_input() {
    for bad in [
        "foo 1\n",                           // sample before TYPE
        "# TYPE foo counter\nfoo_total 1\n", // OpenMetrics counter name in classic text
        "# TYPE foo gauge\nfoo{a=\"x} 1\n",  // unterminated label
        "# TYPE foo gauge\nfoo 1\nfoo 2\n",  // duplicate series
        "# TYPE foo info\nfoo 1\n",          // type classic text does not know
        "# TYPE foo gauge\nbar 1\n",         // sample outside its family
        "# TYPE foo gauge\nfoo one\n",       // bad value
        "# EOF\n",                           // OpenMetrics-only comment
    ] {
        assert!(parse_exposition(bad, Format::Classic).is_err(), "{bad}");
    }
    assert!(parse_exposition("# TYPE foo counter\nfoo_total 1\n", Format::OpenMetrics).is_err());
}

/// The families' order (prometheus-client encodes them in registration order), names, types
/// and HELP texts, against `tests/golden/metrics/families.txt`: the `# HELP`/`# TYPE` lines
/// of the exposition before the groups were split into their own registering structs.
/// `VAPCHECK_BLESS=1` rewrites the file (never under CI).
#[test]
fn family_order_and_help_are_unchanged() {
    let m = exercised();
    let webhook = WebhookLabels {
        kind: "ValidatingWebhookConfiguration",
        configuration: "demo".to_owned(),
        webhook: "demo.example.com".to_owned(),
    };
    m.set_webhook(
        &webhook,
        &WebhookValues {
            failure_policy: "Fail".to_owned(),
            state: crate::webhooks::availability::State::Available,
            ready_endpoints: Some(1),
            ca_not_after: Some(1_900_000_000),
            findings: 0,
        },
    );
    let text = m.encode_openmetrics();
    let descriptors: String = text
        .lines()
        .filter(|l| l.starts_with("# ") && *l != "# EOF")
        .map(|l| format!("{l}\n"))
        .collect();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics/families.txt");
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    if std::env::var_os("VAPCHECK_BLESS").is_some_and(|v| v == "1") && !ci {
        std::fs::write(&path, &descriptors).unwrap_or_else(|e| panic!("write {path:?}: {e}"));
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(descriptors, golden, "{}", path.display());
}
