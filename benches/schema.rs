//! Converting every kind of the Kubernetes 1.35 OpenAPI documents: time and memory.
//!
//! `cargo bench --bench schema`. Memory is measured with a counting global allocator
//! (allocations, bytes, peak live bytes) and the process peak RSS (`VmHWM`).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vapcheck::schema::{FilesConfig, FilesSource, SchemaSource};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = common::shared_dir().join("openapi/v1.35");
    let config = FilesConfig {
        openapi_dir: Some(dir.clone()),
        ..FilesConfig::default()
    };

    // Load (read + parse + validate + index) and convert every kind, several times.
    let mut loads = Vec::new();
    let mut converts = Vec::new();
    let mut kinds = 0;
    let mut nodes = 0;
    let mut largest = (0, String::new());
    for _ in 0..5 {
        let t = Instant::now();
        let source = FilesSource::load(&config).expect("load documents");
        loads.push(t.elapsed());
        let all = source.catalog().kinds();
        kinds = all.len();
        let t = Instant::now();
        nodes = 0;
        for gvk in &all {
            let r = source.resolve(gvk).expect("every built-in kind converts");
            let n = r.root().node_count();
            nodes += n;
            if n > largest.0 {
                largest = (n, gvk.to_string());
            }
        }
        converts.push(t.elapsed());
        black_box(&source);
    }
    println!("documents: {}", dir.display());
    println!(
        "kinds converted: {kinds}, type nodes in total: {nodes}, largest: {} ({} nodes)",
        largest.1, largest.0
    );
    println!(
        "load (read+parse+validate+index), median of 5: {:?}",
        median(loads)
    );
    println!(
        "convert all kinds (cold cache), median of 5: {:?}",
        median(converts)
    );

    // Cached lookups.
    let source = FilesSource::load(&config).expect("load");
    let all = source.catalog().kinds();
    for gvk in &all {
        black_box(source.resolve(gvk).ok());
    }
    let t = Instant::now();
    let rounds = 20;
    for _ in 0..rounds {
        for gvk in &all {
            black_box(source.resolve(gvk).ok());
        }
    }
    let per = t.elapsed() / (rounds * all.len() as u32);
    println!("cached resolve: {per:?} per kind");
    drop(source);

    // Memory of one load + conversion of everything.
    let live0 = LIVE.load(Ordering::Relaxed);
    PEAK.store(live0, Ordering::Relaxed);
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let b0 = BYTES.load(Ordering::Relaxed);
    let source = FilesSource::load(&config).expect("load");
    let after_load = LIVE.load(Ordering::Relaxed) - live0;
    let a1 = ALLOCS.load(Ordering::Relaxed);
    let b1 = BYTES.load(Ordering::Relaxed);
    for gvk in &source.catalog().kinds() {
        black_box(source.resolve(gvk).ok());
    }
    let a2 = ALLOCS.load(Ordering::Relaxed);
    let b2 = BYTES.load(Ordering::Relaxed);
    let retained = LIVE.load(Ordering::Relaxed) - live0;
    println!(
        "load: {} allocations, {:.1} MiB allocated, {:.1} MiB retained (parsed documents)",
        a1 - a0,
        mib(b1 - b0),
        mib(after_load)
    );
    println!(
        "convert all: {} allocations, {:.1} MiB allocated; retained after converting all: {:.1} MiB (documents + types)",
        a2 - a1,
        mib(b2 - b1),
        mib(retained)
    );
    println!(
        "peak live heap during load+convert: {:.1} MiB",
        mib(PEAK.load(Ordering::Relaxed) - live0)
    );
    if let Some(kib) = vm_hwm_kib() {
        println!("process peak RSS (VmHWM): {:.1} MiB", kib as f64 / 1024.0);
    }
    black_box(source);
}
