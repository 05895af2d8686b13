//! What `vapcheck check` prints for every object of the shared corpora, compared byte for byte
//! with fixtures recorded from the binary (issue 29, "One analysis pipeline": the refactoring
//! must not change one byte of any output).
//!
//! Runs of the real binary, with `../shared` as the working directory and the schemas of
//! `openapi/v1.35` (`--openapi`, so that no live cluster or kubeconfig can change a result),
//! `-o json`, in strict and in extended mode:
//! - the files of each repository folder of `corpus/policies` and `corpus/mutating` together
//!   (one run reads a folder's policies and bindings as a user's `vapcheck check dir/*` does);
//!   when that run finds unusable input (exit 2, which stops the whole run), each file of the
//!   folder alone as well, so that one bad document does not hide the others' output (since
//!   issue 34 a document that does not decode is a finding and no longer stops a run: the two
//!   mutating folders that had one are recorded whole, without per-file runs);
//! - the files of each set (leaf folder) of `corpus/bindings` together;
//! - and all files of `corpus/policies` in one run, `-o sarif` (extended mode, the default).
//!
//! Each run is one line of `tests/fixtures/pipeline/<name>.jsonl`: the arguments, the exit
//! status, standard output and standard error. `VAPCHECK_BLESS=1` rewrites the files (never
//! under CI, `support::bless`); review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::{Value, json};

/// The shared folder; a missing one fails (these fixtures are the refactoring's safety net).
fn shared() -> PathBuf {
    let dir = crate::support::shared_dir();
    assert!(
        dir.join("openapi/v1.35").is_dir() && dir.join("corpus").is_dir(),
        "{} (../shared) is missing or incomplete",
        dir.display()
    );
    dir
}

/// Files ending in `.yaml`, `.yml` or `.json` below `dir`, relative to `root`, sorted.
fn corpus_files(root: &Path, dir: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path());
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path
                .extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
                && path.file_name().is_some_and(|n| n != "index.json")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root.join(dir), &mut out);
    let mut rel: Vec<String> = out
        .iter()
        .map(|p| {
            p.strip_prefix(root)
                .expect("below the shared folder")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    rel.sort();
    rel
}

/// One run of `vapcheck check` with `args` in `cwd`, as a fixture line.
fn run(cwd: &Path, args: &[String]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .arg("check")
        .args(args)
        .current_dir(cwd)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("NO_COLOR", "1")
        .output()
        .expect("run vapcheck");
    json!({
        "args": args,
        "exit": out.status.code(),
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    })
}

/// Every run of `runs`, on as many threads as the machine has, in the order given.
fn run_all(cwd: &Path, runs: Vec<Vec<String>>) -> Vec<Value> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = Mutex::new(0usize);
    let results: Vec<Mutex<Option<Value>>> = runs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().expect("queue");
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(args) = runs.get(i) else { break };
                    *results[i].lock().expect("slot") = Some(run(cwd, args));
                }
            });
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().expect("slot").expect("every run done"))
        .collect()
}

fn args(mode: &str, output: &str, files: &[String]) -> Vec<String> {
    let mut a = vec![
        "--openapi".to_owned(),
        "openapi/v1.35".to_owned(),
        "--mode".to_owned(),
        mode.to_owned(),
        "-o".to_owned(),
        output.to_owned(),
    ];
    a.extend(files.iter().cloned());
    a
}

/// Compares (or, when blessing, writes) one fixture file; `expected_runs` is asserted so that a
/// corpus that shrinks or a walk that finds nothing fails.
fn compare(name: &str, expected_runs: usize, lines: &[Value]) {
    assert_eq!(lines.len(), expected_runs, "{name}: number of runs");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pipeline")
        .join(format!("{name}.jsonl"));
    let ours: String = lines.iter().map(|l| format!("{l}\n")).collect();
    if crate::support::bless() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("fixture folder");
        std::fs::write(&path, &ours).expect("write fixture");
    }
    let theirs = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (VAPCHECK_BLESS=1 records it)", path.display()));
    let want: Vec<&str> = theirs.lines().collect();
    let got: Vec<&str> = ours.lines().collect();
    assert_eq!(want.len(), got.len(), "{name}: runs in the fixture");
    let differing: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| {
            let w: Value = serde_json::from_str(w).expect("fixture line");
            let g: Value = serde_json::from_str(g).expect("our line");
            format!("run {}:\n  want: {w}\n  got:  {g}", w["args"])
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{name}: {} of {} runs differ from {}; the first:\n{}",
        differing.len(),
        got.len(),
        path.display(),
        differing
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The files of `dir` grouped by the folder `depth` levels below `dir` (1: a repository folder
/// of `corpus/policies`; 2: a set of `corpus/bindings`), in order.
fn groups(root: &Path, dir: &str, depth: usize) -> Vec<Vec<String>> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for f in corpus_files(root, dir) {
        let key: Vec<&str> = f.split('/').take(dir.split('/').count() + depth).collect();
        let key = key.join("/");
        match out.last_mut() {
            Some((k, files)) if *k == key => files.push(f),
            _ => out.push((key, vec![f])),
        }
    }
    out.into_iter().map(|(_, files)| files).collect()
}

/// Each group in both modes; a run that exits 2 (unusable input stops it) is followed by one
/// run per file of its group, in that mode.
fn json_runs(root: &Path, groups: &[Vec<String>]) -> Vec<Value> {
    let runs = groups
        .iter()
        .flat_map(|files| ["strict", "extended"].map(|m| args(m, "json", files)))
        .collect();
    let mut lines = Vec::new();
    for line in run_all(root, runs) {
        let fallback = if line["exit"] == 2 {
            let given: Vec<String> = serde_json::from_value(line["args"].clone()).expect("args");
            let (options, files) = given.split_at(6);
            let mode = &options[3];
            files
                .iter()
                .map(|f| args(mode, "json", std::slice::from_ref(f)))
                .collect()
        } else {
            Vec::new()
        };
        lines.push(line);
        if fallback.len() > 1 {
            lines.extend(run_all(root, fallback));
        }
    }
    lines
}

#[test]
fn policies_json_is_unchanged() {
    let root = shared();
    let groups = groups(&root, "corpus/policies", 1);
    assert_eq!(groups.len(), 15, "repository folders of corpus/policies");
    compare("policies", EXPECTED_RUNS.0, &json_runs(&root, &groups));
}

#[test]
fn mutating_json_is_unchanged() {
    let root = shared();
    let groups = groups(&root, "corpus/mutating", 1);
    assert_eq!(groups.len(), 47, "repository folders of corpus/mutating");
    compare("mutating", EXPECTED_RUNS.1, &json_runs(&root, &groups));
}

#[test]
fn binding_sets_json_are_unchanged() {
    let root = shared();
    let groups = groups(&root, "corpus/bindings", 2);
    assert_eq!(groups.len(), 116, "sets of corpus/bindings");
    compare("binding-sets", EXPECTED_RUNS.2, &json_runs(&root, &groups));
}

#[test]
fn policies_sarif_is_unchanged() {
    let root = shared();
    let files = corpus_files(&root, "corpus/policies");
    assert_eq!(files.len(), 263, "files of corpus/policies");
    let runs = vec![args("extended", "sarif", &files)];
    compare("policies-sarif", 1, &run_all(&root, runs));
}

/// Runs recorded for policies, mutating policies and binding sets: two per folder, and one
/// per file of each folder whose run stopped on unusable input.
const EXPECTED_RUNS: (usize, usize, usize) = (30, 94, 244);
