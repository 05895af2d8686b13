//! Cost of one `/metrics` scrape with many policies (per-policy series dominate).
//! Run: `cargo bench --bench metrics_encode`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use vapcheck::metrics::{Metrics, PolicyStateCounts, ReconcileResult};

fn main() {
    for policies in [100usize, 1_000, 10_000] {
        let m = Metrics::new();
        for i in 0..policies {
            m.set_policy_warnings(
                vapcheck::metrics::PolicyKind::Validating,
                &format!("policy-{i:05}"),
                i % 3,
            );
            m.observe_reconcile(
                ReconcileResult::Success,
                Duration::from_millis((i % 50) as u64),
            );
        }
        m.set_policy_states(
            vapcheck::metrics::PolicyKind::Validating,
            PolicyStateCounts {
                clean: policies as u64,
                ..PolicyStateCounts::default()
            },
        );
        for (name, encode) in [
            (
                "classic",
                Metrics::encode_prometheus_text as fn(&Metrics) -> String,
            ),
            (
                "openmetrics",
                Metrics::encode_openmetrics as fn(&Metrics) -> String,
            ),
        ] {
            let size = encode(&m).len();
            let iterations = (20_000 / policies).max(5);
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(encode(black_box(&m)));
            }
            let per = start.elapsed() / iterations as u32;
            println!(
                "encode {name:<11} {policies:>6} policies: {:>9.3} ms/scrape, {size:>8} bytes",
                per.as_secs_f64() * 1e3
            );
        }
    }
}
