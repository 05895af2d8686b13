//! The e2e executable's test runner (`harness = false`): cargo's test command line and output,
//! with each group (a former test executable) in a child process of its own.
//!
//! ```text
//! cargo test --test e2e [-- [FILTER...] [--exact] [--skip S]... [--group G]... [--list]
//!                           [--ignored | --include-ignored] [--nocapture] [--show-output]
//!                           [--test-threads N] [--jobs N] [--timeout SECONDS]]
//! ```
//!
//! - Tests are named `<group>::<test>`; FILTER, `--exact`, `--skip`, `--ignored`,
//!   `--include-ignored`, `--list` and `--test-threads` mean what they mean to cargo's harness
//!   (a filter matches a substring of the name, any filter selects). `--group G` keeps the tests
//!   of group G only (exactly that group: `controller` is not `map_controller`).
//! - Each group with a selected test runs in a child process of this executable (the runner
//!   starts itself with [`CHILD_FLAG`]), so its statics are its own as they were in its own
//!   executable: its control plane, started on first use, is stopped when its tests are done and
//!   the child exits (`support::shared_cluster`). `--jobs N` groups run at once (default: the
//!   number of cores plus one, as `scripts/test-binaries`), the longest first by the durations of
//!   earlier whole-group runs on this machine (`$VAPCHECK_CACHE/e2e-groups.tsv`); inside a group
//!   its tests run `--test-threads` at a time (default `RUST_TEST_THREADS`, else the number of
//!   cores), each on a thread of its own, as cargo's harness runs them.
//! - A group still running after `--timeout` seconds (default 1200) is killed with its process
//!   group; its unfinished tests fail.
//! - Output: `test <group>::<test> ... ok` as each test ends; a failed test's panic or error, and
//!   the whole stderr of its group (the group's tests ran side by side, so their output is
//!   interleaved; it is not captured per test), in the `failures:` section; one
//!   `test result:` line. `--nocapture` passes the groups' output through as it is written, and
//!   `--show-output` prints it for groups that passed too.
//! - Exit status 101 when a test failed, as cargo's harness.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The first argument of a group's child process: `<exe> --vapcheck-e2e-group <group>
/// <test-threads> <test>...`.
const CHILD_FLAG: &str = "--vapcheck-e2e-group";

/// One test of a group.
pub(crate) struct Test {
    /// The name inside its group (the function's path inside the module).
    name: String,
    /// `#[ignore = "reason"]`: not run unless asked for.
    ignore: Option<&'static str>,
    run: fn() -> Result<(), String>,
}

impl Test {
    pub(crate) fn new(
        name: &str,
        ignore: &[&'static str],
        run: fn() -> Result<(), String>,
    ) -> Test {
        Test {
            // `stringify!` of a path may space out its `::`.
            name: name.split_whitespace().collect(),
            ignore: ignore.first().copied(),
            run,
        }
    }
}

/// A former test executable: the tests of one module of e2e/tests.
pub(crate) struct Group {
    pub(crate) name: &'static str,
    pub(crate) tests: Vec<Test>,
}

/// What a test function returns: nothing, or a `Result` whose error fails the test.
pub(crate) trait Outcome {
    fn outcome(self) -> Result<(), String>;
}

impl Outcome for () {
    fn outcome(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: std::fmt::Debug> Outcome for Result<(), E> {
    fn outcome(self) -> Result<(), String> {
        // As the harness reports a test's error (`Termination` of `Result`).
        self.map_err(|err| format!("Error: {err:?}"))
    }
}

/// A plain `#[test]` function.
pub(crate) fn sync<R: Outcome>(test: impl FnOnce() -> R) -> Result<(), String> {
    test().outcome()
}

/// A `#[tokio::test]`: a current-thread runtime.
pub(crate) fn tokio<F, R>(test: impl FnOnce() -> F) -> Result<(), String>
where
    F: Future<Output = R>,
    R: Outcome,
{
    block_on(tokio::runtime::Builder::new_current_thread(), test)
}

/// A `#[tokio::test(flavor = "multi_thread")]`: as many workers as cores.
pub(crate) fn tokio_multi_thread<F, R>(test: impl FnOnce() -> F) -> Result<(), String>
where
    F: Future<Output = R>,
    R: Outcome,
{
    block_on(tokio::runtime::Builder::new_multi_thread(), test)
}

/// A `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`.
pub(crate) fn tokio_two_workers<F, R>(test: impl FnOnce() -> F) -> Result<(), String>
where
    F: Future<Output = R>,
    R: Outcome,
{
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2);
    block_on(builder, test)
}

fn block_on<F, R>(
    mut builder: tokio::runtime::Builder,
    test: impl FnOnce() -> F,
) -> Result<(), String>
where
    F: Future<Output = R>,
    R: Outcome,
{
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|err| format!("building the test's tokio runtime: {err}"))?;
    runtime.block_on(test()).outcome()
}

/// Runs the executable: a group's tests when started as a group's child, else the runner.
/// Returns the exit status.
pub(crate) fn main(groups: Vec<Group>) -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(CHILD_FLAG) {
        return child(groups, &args[1..]);
    }
    match Options::parse(&args) {
        Ok(Some(options)) => run(groups, &options),
        Ok(None) => {
            println!("{}", usage());
            0
        }
        Err(message) => {
            eprintln!("error: {message}\n\n{}", usage());
            101
        }
    }
}

fn usage() -> &'static str {
    "usage: cargo test --test e2e -- [FILTER...] [--exact] [--skip S]... [--group G]... [--list]\n\
     \x20      [--ignored | --include-ignored] [--nocapture] [--show-output] [--test-threads N]\n\
     \x20      [--jobs N] [--timeout SECONDS]\n\
     (e2e/tests/runner.rs explains each)"
}

#[derive(Debug, Default)]
struct Options {
    filters: Vec<String>,
    exact: bool,
    skip: Vec<String>,
    groups: Vec<String>,
    list: bool,
    ignored: bool,
    include_ignored: bool,
    nocapture: bool,
    show_output: bool,
    test_threads: Option<usize>,
    jobs: usize,
    timeout: Duration,
}

impl Options {
    /// `Ok(None)` for `--help`.
    fn parse(args: &[String]) -> Result<Option<Options>, String> {
        let mut options = Options {
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()) + 1,
            timeout: Duration::from_secs(1200),
            nocapture: std::env::var_os("RUST_TEST_NOCAPTURE").is_some_and(|v| v != "0"),
            ..Options::default()
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
                _ => (arg.as_str(), None),
            };
            let mut value = || -> Result<String, String> {
                inline
                    .clone()
                    .or_else(|| args.next().cloned())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag {
                "-h" | "--help" => return Ok(None),
                "--exact" => options.exact = true,
                "--list" => options.list = true,
                "--ignored" => options.ignored = true,
                "--include-ignored" => options.include_ignored = true,
                "--nocapture" | "--no-capture" => options.nocapture = true,
                "--show-output" => options.show_output = true,
                // One output format and no colours; accepted as cargo's harness accepts them.
                "-q" | "--quiet" => {}
                "--color" => {
                    value()?;
                }
                "--format" => {
                    let format = value()?;
                    if format != "pretty" {
                        return Err(format!("--format {format}: only pretty is supported"));
                    }
                }
                "--skip" => options.skip.push(value()?),
                "--group" => options.groups.push(value()?),
                "--test-threads" => options.test_threads = Some(positive(flag, &value()?)?),
                "--jobs" => options.jobs = positive(flag, &value()?)?,
                "--timeout" => {
                    let text = value()?;
                    let secs: f64 = text
                        .parse()
                        .ok()
                        .filter(|s: &f64| *s > 0.0 && s.is_finite())
                        .ok_or_else(|| format!("--timeout needs positive seconds, got {text:?}"))?;
                    options.timeout = Duration::from_secs_f64(secs);
                }
                _ if arg.starts_with('-') => return Err(format!("unknown option {arg}")),
                _ => options.filters.push(arg.clone()),
            }
        }
        if options.ignored && options.include_ignored {
            return Err("--ignored and --include-ignored exclude each other".to_owned());
        }
        Ok(Some(options))
    }

    fn matches(&self, pattern: &str, name: &str) -> bool {
        if self.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    }

    /// Whether the filters, `--skip` and `--group` keep `group::test`.
    fn selects(&self, group: &str, test: &Test) -> bool {
        let name = format!("{group}::{}", test.name);
        (self.groups.is_empty() || self.groups.iter().any(|g| g == group))
            && (self.filters.is_empty() || self.filters.iter().any(|f| self.matches(f, &name)))
            && !self.skip.iter().any(|s| self.matches(s, &name))
            && (!self.ignored || test.ignore.is_some())
    }

    /// Whether a selected test runs (rather than being reported as ignored).
    fn runs(&self, test: &Test) -> bool {
        test.ignore.is_none() || self.ignored || self.include_ignored
    }

    fn test_threads(&self) -> usize {
        self.test_threads
            .or_else(|| {
                std::env::var("RUST_TEST_THREADS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
            })
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

fn positive(flag: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag} needs a positive number, got {text:?}"))
}

/// The runner's own output, one writer at a time.
fn out() -> MutexGuard<'static, ()> {
    static OUT: Mutex<()> = Mutex::new(());
    OUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One group to run: its name and the tests to run in it.
struct Job {
    group: &'static str,
    tests: Vec<String>,
    /// Every test of the group that runs by default is among `tests`: the duration is the
    /// group's, worth recording.
    whole: bool,
}

/// What a group's run gave.
struct Ran {
    group: &'static str,
    results: Vec<(String, Result<(), String>)>,
    secs: f64,
    /// The group's stderr (empty with `--nocapture`, which passes it through).
    output: String,
    whole: bool,
    timed_out: bool,
}

fn run(groups: Vec<Group>, options: &Options) -> i32 {
    let known: Vec<&str> = groups.iter().map(|g| g.name).collect();
    if let Some(unknown) = options.groups.iter().find(|g| !known.contains(&g.as_str())) {
        eprintln!(
            "error: --group {unknown}: no such group; the groups are {}",
            known.join(", ")
        );
        return 101;
    }
    let total: usize = groups.iter().map(|g| g.tests.len()).sum();
    if options.list {
        let mut names: Vec<String> = groups
            .iter()
            .flat_map(|g| {
                g.tests
                    .iter()
                    .filter(|t| options.selects(g.name, t))
                    .map(|t| format!("{}::{}", g.name, t.name))
            })
            .collect();
        names.sort();
        for name in &names {
            println!("{name}: test");
        }
        println!("\n{} tests, 0 benchmarks", names.len());
        return 0;
    }

    let mut jobs = Vec::new();
    let mut selected = 0;
    let mut ignored = Vec::new();
    for group in &groups {
        let mut tests = Vec::new();
        for test in group
            .tests
            .iter()
            .filter(|t| options.selects(group.name, t))
        {
            selected += 1;
            if options.runs(test) {
                tests.push(test.name.clone());
            } else {
                ignored.push((
                    format!("{}::{}", group.name, test.name),
                    test.ignore.unwrap_or_default(),
                ));
            }
        }
        tests.sort();
        let by_default = group.tests.iter().filter(|t| t.ignore.is_none()).count();
        if !tests.is_empty() {
            jobs.push(Job {
                group: group.name,
                whole: tests.len() >= by_default,
                tests,
            });
        }
    }
    let durations = read_durations();
    // The longest first; a group without a recorded duration may be long, so it goes first too.
    jobs.sort_by(|a, b| {
        let secs = |j: &Job| durations.get(j.group).copied().unwrap_or(f64::INFINITY);
        secs(b).total_cmp(&secs(a)).then(a.group.cmp(b.group))
    });
    let test_threads = options.test_threads();
    let jobs_at_once = options.jobs.min(jobs.len()).max(1);
    println!("\nrunning {selected} tests");
    println!(
        "e2e: {} groups, {jobs_at_once} at a time, {test_threads} test threads in each, \
         timeout {}s each",
        jobs.len(),
        options.timeout.as_secs_f64()
    );
    for (name, reason) in &ignored {
        if reason.is_empty() {
            println!("test {name} ... ignored");
        } else {
            println!("test {name} ... ignored, {reason}");
        }
    }

    forward_signals();
    let started = Instant::now();
    let queue = Mutex::new(jobs);
    let ran: Mutex<Vec<Ran>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs_at_once {
            scope.spawn(|| {
                loop {
                    let job = {
                        let mut queue = queue.lock().unwrap_or_else(|p| p.into_inner());
                        if queue.is_empty() {
                            break;
                        }
                        queue.remove(0)
                    };
                    let result = run_group(job, options, test_threads);
                    ran.lock().unwrap_or_else(|p| p.into_inner()).push(result);
                }
            });
        }
    });
    let ran = ran.into_inner().unwrap_or_else(|p| p.into_inner());

    let mut durations = durations;
    for r in ran.iter().filter(|r| r.whole && !r.timed_out) {
        durations.insert(r.group.to_owned(), r.secs);
    }
    write_durations(&durations);

    let passed = ran
        .iter()
        .flat_map(|r| &r.results)
        .filter(|(_, result)| result.is_ok())
        .count();
    let mut failed_names = Vec::new();
    let mut report = String::new();
    for r in &ran {
        let failures: Vec<_> = r
            .results
            .iter()
            .filter_map(|(name, result)| result.as_ref().err().map(|e| (name, e)))
            .collect();
        for (name, message) in &failures {
            let _ = writeln!(report, "---- {}::{name} stdout ----\n{message}\n", r.group);
            failed_names.push(format!("{}::{name}", r.group));
        }
        if (!failures.is_empty() || options.show_output) && !r.output.is_empty() {
            let _ = writeln!(
                report,
                "---- {} output (the stderr of the group's process: its tests ran side by side) \
                 ----\n{}",
                r.group,
                r.output.trim_end()
            );
            let _ = writeln!(report, "---- end of {} output ----\n", r.group);
        }
    }
    let _guard = out();
    if !failed_names.is_empty() {
        println!("\nfailures:\n\n{report}failures:");
        for name in &failed_names {
            println!("    {name}");
        }
    } else if !report.is_empty() {
        println!("\nsuccesses:\n\n{report}");
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {} ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failed_names.is_empty() {
            "ok"
        } else {
            "FAILED"
        },
        failed_names.len(),
        ignored.len(),
        total - selected,
        started.elapsed().as_secs_f64()
    );
    if failed_names.is_empty() { 0 } else { 101 }
}

/// The process groups of the running children, for [`forward_signals`]; 0 is a free slot.
static CHILDREN: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

/// On SIGINT or SIGTERM, the children's process groups get SIGTERM before the runner dies (they
/// are not in the terminal's process group, so an interrupt would not reach them).
/// `e2e/cluster/up`'s watchdog stops a killed group's control plane.
fn forward_signals() {
    extern "C" fn forward(signal: libc::c_int) {
        for slot in &CHILDREN {
            let pgid = slot.load(Ordering::SeqCst);
            if pgid > 0 {
                // SAFETY: kill(2) is async-signal-safe.
                unsafe { libc::kill(-pgid, libc::SIGTERM) };
            }
        }
        // SAFETY: signal(2) and raise(3) are async-signal-safe; the default action ends the
        // runner as the signal would have.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only calls async-signal-safe functions.
        unsafe {
            libc::signal(
                signal,
                forward as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
}

/// Runs one group in a child process and reports its tests as they end.
fn run_group(job: Job, options: &Options, test_threads: usize) -> Ran {
    let started = Instant::now();
    let group = job.group;
    let mut ran = Ran {
        group,
        results: Vec::new(),
        secs: 0.0,
        output: String::new(),
        whole: job.whole,
        timed_out: false,
    };
    let fail_all = |ran: &mut Ran, why: String| {
        for test in &job.tests {
            if !ran.results.iter().any(|(name, _)| name == test) {
                println!("test {group}::{test} ... FAILED");
                ran.results.push((test.clone(), Err(why.clone())));
            }
        }
    };
    {
        let _guard = out();
        println!("e2e: group {group}: {} tests started", job.tests.len());
    }
    let mut capture = match tempfile::tempfile() {
        Ok(file) => Some(file),
        Err(err) => {
            let _guard = out();
            fail_all(&mut ran, format!("a file for the group's output: {err}"));
            return ran;
        }
    };
    let stderr = match (&capture, options.nocapture) {
        (Some(file), false) => file.try_clone().map(Stdio::from),
        _ => Ok(Stdio::inherit()),
    };
    // /proc/self/exe is this executable even when cargo has since replaced the file.
    let exe = Some(PathBuf::from("/proc/self/exe"))
        .filter(|p| p.exists())
        .map_or_else(std::env::current_exe, Ok);
    let spawned = exe.and_then(|exe| {
        Command::new(exe)
            .arg(CHILD_FLAG)
            .arg(group)
            .arg(test_threads.to_string())
            .args(&job.tests)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr?)
            .process_group(0)
            .spawn()
    });
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            let _guard = out();
            fail_all(&mut ran, format!("starting the group's process: {err}"));
            return ran;
        }
    };
    let pid = i32::try_from(child.id()).unwrap_or(0);
    let slot = CHILDREN.iter().find(|s| {
        s.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });

    // The child reports each test on its stdout, one JSON object a line.
    let results = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stdout.take().map(|stdout| {
        let results = Arc::clone(&results);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(report) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let name = report["test"].as_str().unwrap_or_default().to_owned();
                let result = if report["ok"] == true {
                    Ok(())
                } else {
                    Err(report["message"].as_str().unwrap_or_default().to_owned())
                };
                {
                    let _guard = out();
                    let verdict = if result.is_ok() { "ok" } else { "FAILED" };
                    println!("test {group}::{name} ... {verdict}");
                }
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((name, result));
            }
        })
    });

    let deadline = started + options.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(err) => {
                eprintln!("e2e: waiting for group {group}: {err}");
                break None;
            }
        }
        if Instant::now() >= deadline {
            ran.timed_out = true;
            // SAFETY: kill(2) of the child's own process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if let Some(slot) = slot {
        slot.store(0, Ordering::SeqCst);
    }
    if let Some(reader) = reader {
        let _ = reader.join();
    }
    ran.secs = started.elapsed().as_secs_f64();
    ran.results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(file) = capture.as_mut() {
        let mut bytes = Vec::new();
        if file
            .rewind()
            .and_then(|()| file.read_to_end(&mut bytes))
            .is_ok()
        {
            ran.output = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let exit = status.map_or_else(|| "unknown".to_owned(), |s| s.to_string());
    let _guard = out();
    if ran.timed_out {
        fail_all(
            &mut ran,
            format!(
                "killed with its group {group} after {}s (--timeout)",
                options.timeout.as_secs_f64()
            ),
        );
    } else {
        fail_all(
            &mut ran,
            format!("no result: the process of group {group} ended ({exit}) before it"),
        );
    }
    let failed = ran.results.iter().filter(|(_, r)| r.is_err()).count();
    println!(
        "e2e: group {group}: {} passed, {failed} failed, {:.1}s, {exit}",
        ran.results.len() - failed,
        ran.secs
    );
    ran
}

/// A group's process: runs `tests` of `group`, `threads` at a time, and reports each on the
/// stdout it was given; its own stdout (the tests', and that of the processes they start) goes
/// to its stderr.
fn child(groups: Vec<Group>, args: &[String]) -> i32 {
    let [group, threads, names @ ..] = args else {
        eprintln!("e2e: {CHILD_FLAG} needs a group, a number of threads and the tests");
        return 101;
    };
    let Some(group) = groups.into_iter().find(|g| g.name == group) else {
        eprintln!("e2e: no group {group}");
        return 101;
    };
    let threads: usize = threads.parse().unwrap_or(1).max(1);
    // SAFETY: fcntl and dup2 on the standard descriptors, before any other thread runs; the copy
    // is closed on exec, so the processes the tests start do not hold the report pipe.
    let report = unsafe {
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            eprintln!("e2e: could not set up the report pipe");
            return 101;
        }
        File::from_raw_fd(fd)
    };
    let report = Mutex::new(report);

    // A panicking test's message, by the name of its thread (the test's).
    static PANICS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(name) = std::thread::current().name() {
            PANICS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.to_owned(), format!("thread '{name}' {info}"));
        }
        default_hook(info);
    }));

    let mut tests: Vec<Test> = Vec::new();
    let mut by_name: BTreeMap<String, Test> = group
        .tests
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    for name in names {
        match by_name.remove(name) {
            Some(test) => tests.push(test),
            None => {
                eprintln!("e2e: group {} has no test {name}", group.name);
                return 101;
            }
        }
    }
    // Popped from the end: in the order given.
    tests.reverse();
    let queue = Mutex::new(tests);
    let failed = AtomicI32::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let Some(test) = queue.lock().unwrap_or_else(|p| p.into_inner()).pop() else {
                        break;
                    };
                    let started = Instant::now();
                    // Each test on a thread of its own named after it, as cargo's harness does.
                    let result = std::thread::Builder::new()
                        .name(test.name.clone())
                        .spawn(test.run)
                        .map_err(|err| format!("starting the test's thread: {err}"))
                        .and_then(|thread| {
                            thread.join().unwrap_or_else(|_| {
                                Err(PANICS
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .remove(&test.name)
                                    .unwrap_or_else(|| "the test panicked".to_owned()))
                            })
                        });
                    if result.is_err() {
                        failed.fetch_add(1, Ordering::SeqCst);
                    }
                    let line = serde_json::json!({
                        "test": test.name,
                        "ok": result.is_ok(),
                        "message": result.err().unwrap_or_default(),
                        "secs": started.elapsed().as_secs_f64(),
                    });
                    let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
                    // A lost report shows as a failed test in the runner.
                    let _ = writeln!(report, "{line}").and_then(|()| report.flush());
                }
            });
        }
    });
    if failed.load(Ordering::SeqCst) == 0 {
        0
    } else {
        101
    }
}

fn durations_file() -> PathBuf {
    let cache = std::env::var_os("VAPCHECK_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/vapcheck")))
        .unwrap_or_else(|| PathBuf::from(".cache/vapcheck"));
    cache.join("e2e-groups.tsv")
}

/// The seconds each group took in its last whole run on this machine; for a group without one,
/// the time its former executable took under `scripts/test-binaries` (its
/// `test:e2e/tests/<group>.rs` line), if that was recorded.
fn read_durations() -> BTreeMap<String, f64> {
    let read = |path: PathBuf| -> Vec<(String, f64)> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (key, secs) = line.rsplit_once('\t')?;
                Some((key.to_owned(), secs.trim().parse().ok()?))
            })
            .collect()
    };
    let file = durations_file();
    let mut durations: BTreeMap<String, f64> = read(file.with_file_name("test-binaries.tsv"))
        .into_iter()
        .filter_map(|(key, secs)| {
            let group = key.strip_prefix("test:e2e/tests/")?.strip_suffix(".rs")?;
            (group != "main").then(|| (group.to_owned(), secs))
        })
        .collect();
    durations.extend(read(file));
    durations
}

fn write_durations(durations: &BTreeMap<String, f64>) {
    let path = durations_file();
    let mut text = String::new();
    for (group, secs) in durations {
        let _ = writeln!(text, "{group}\t{secs:.1}");
    }
    let tmp = path.with_extension("tsv.tmp");
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(err) = written {
        eprintln!(
            "e2e: could not record the groups' durations in {}: {err}",
            path.display()
        );
    }
}
