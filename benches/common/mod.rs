//! Shared by the benches of `benches/` (each includes it with `mod common;`): the corpus files,
//! the number of rounds and the CPU clock of paired rounds.
#![allow(dead_code)] // each bench uses some of these

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The read-only `shared/` folder beside the repository: `$VAPCHECK_SHARED`, else
/// `<repository>/../shared`, else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VAPCHECK_SHARED") {
        return dir.into();
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// Every file under `dir` (any depth) that `keep` accepts, sorted; panics when the folder is
/// missing or holds none (a bench without its corpus measures nothing).
pub fn files_under(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("the corpus folder {} is missing: {e}", d.display()));
        for e in entries {
            let p = e.expect("corpus entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if keep(&p) {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no corpus files under {}", dir.display());
    out
}

/// Every file of `shared/corpus/policies`.
pub fn policy_corpus_files() -> Vec<PathBuf> {
    files_under(&shared_dir().join("corpus/policies"), |_| true)
}

/// How many rounds to run: under `cargo bench` (which passes `--bench`) the first number among
/// the arguments, else `VAPCHECK_BENCH_ROUNDS`, else `default`; under `cargo test
/// --all-targets` (no `--bench`: the bench runs as a smoke test in the debug build) one.
pub fn rounds(default: usize) -> usize {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        return 1;
    }
    args.iter()
        .find_map(|a| a.parse::<usize>().ok())
        .or_else(|| {
            std::env::var("VAPCHECK_BENCH_ROUNDS")
                .ok()
                .and_then(|v| v.parse().ok())
        })
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The CPU time this thread has used.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Wall-clock and CPU time of one run.
#[derive(Clone, Copy, Default)]
pub struct Took {
    pub wall: Duration,
    pub cpu: Duration,
}

impl std::ops::AddAssign for Took {
    fn add_assign(&mut self, other: Took) {
        self.wall += other.wall;
        self.cpu += other.cpu;
    }
}
