//! `vapcheck_build_info` and the `process_*` families (read from `/proc/self` at scrape time).

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::gauge_value;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    kubernetes: &'static str,
}

/// Registers `vapcheck_build_info` and the process collector in `r`.
pub(super) fn register(r: &mut Registry) {
    let build_info: Family<BuildLabels, Gauge> = Family::default();
    build_info
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            kubernetes: crate::KUBERNETES_VERSION,
        })
        .set(1);
    r.register(
        "vapcheck_build_info",
        "Build information, always 1: vapcheck version and the Kubernetes release it follows",
        build_info,
    );
    r.register_collector(Box::new(ProcessCollector::new()));
}

/// Collects `process_*` metrics from `/proc/self` at scrape time.
#[derive(Debug)]
struct ProcessCollector {
    /// Fallback start time when `/proc` is unavailable (not Linux).
    created: f64,
}

impl ProcessCollector {
    fn new() -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        ProcessCollector { created }
    }
}

/// What `/proc/self` says about the process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes.
    pub resident_bytes: u64,
    /// Start time in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Number of open file descriptors.
    pub open_fds: u64,
}

/// Parses `/proc/self/stat` content. `ticks` is `sysconf(_SC_CLK_TCK)`, `page_size` in
/// bytes, `boot_time` the `btime` of `/proc/stat`. Returns `(cpu seconds, rss bytes,
/// start time)`. The command name may contain spaces and parentheses, so fields are counted
/// after the last `)`.
pub fn parse_proc_stat(
    stat: &str,
    ticks: f64,
    page_size: u64,
    boot_time: u64,
) -> Option<(f64, u64, f64)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3 of proc(5), i.e. index 0 here.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let utime = field(14)?;
    let stime = field(15)?;
    let starttime = field(22)?;
    let rss_pages = field(24)?;
    if ticks <= 0.0 {
        return None;
    }
    let cpu = (utime + stime) as f64 / ticks;
    let start = boot_time as f64 + starttime as f64 / ticks;
    Some((cpu, rss_pages.saturating_mul(page_size), start))
}

/// Reads `btime` from `/proc/stat` content.
pub fn parse_boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Reads the process statistics from `/proc/self`; `None` where `/proc` is unavailable.
pub fn read_process_stats() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = parse_boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    // SAFETY: sysconf only reads a system constant and has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let (cpu_seconds, resident_bytes, start_time_seconds) = parse_proc_stat(
        &stat,
        ticks as f64,
        u64::try_from(page).ok().filter(|p| *p > 0)?,
        boot,
    )?;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    Some(ProcessStats {
        cpu_seconds,
        resident_bytes,
        start_time_seconds,
        open_fds,
    })
}

/// One constant metric of the collector, with its descriptor.
fn encode_const(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

const START_TIME: (&str, &str) = (
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
);

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        let Some(stats) = read_process_stats() else {
            return encode_const(e, START_TIME.0, START_TIME.1, ConstGauge::new(self.created));
        };
        // A counter registered as `process_cpu_seconds` is exposed as `process_cpu_seconds_total`.
        encode_const(
            e,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            ConstCounter::new(stats.cpu_seconds),
        )?;
        encode_const(
            e,
            "process_open_fds",
            "Number of open file descriptors.",
            ConstGauge::new(gauge_value(stats.open_fds)),
        )?;
        encode_const(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            ConstGauge::new(gauge_value(stats.resident_bytes)),
        )?;
        encode_const(
            e,
            START_TIME.0,
            START_TIME.1,
            ConstGauge::new(stats.start_time_seconds),
        )
    }
}
