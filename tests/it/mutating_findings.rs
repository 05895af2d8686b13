//! Every finding vapcheck makes on the MutatingAdmissionPolicy corpus
//! (`../shared/corpus/mutating`, checked as `vapcheck check` does by default: the built-in
//! kinds of Kubernetes 1.37, extended mode) against the reviewed table
//! `tests/fixtures/mutating-findings.tsv` (issue 12; every row is reviewed in
//! docs/mutating.md).
//!
//! Columns: policy (`<file>#<name>`), fieldRef, kind, reported (`warning`: in the policy's
//! warnings; `dropped`: classified, not reported), class, why, finding (its first line).
//! A MAP that does not deserialise is one row with fieldRef `-` and class `input error`.
//! `VAPCHECK_BLESS=1 cargo test --test it mutating_findings::` rewrites the table; review the diff
//! before committing it.

use std::path::{Path, PathBuf};

use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_all;
use vapcheck::cli::mutating::{policies, read};
use vapcheck::mutating::check_mutating_policy;
use vapcheck::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode};

fn corpus_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/mutating");
    // A missing corpus is a failure, not a skip.
    assert!(
        dir.is_dir(),
        "the MAP corpus is missing: {} (see issue 12)",
        dir.display()
    );
    dir
}

fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("corpus folder") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".policy.yaml"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

/// Runs `f` with the offline backends of the built-in Kubernetes 1.37 kinds.
fn with_backends<T>(f: impl FnOnce(&Backends<'_>) -> T) -> T {
    let dir = std::env::temp_dir().join(format!("vapcheck-map-corpus-{}", std::process::id()));
    vapcheck::schema::embedded::write_folder("1.37", &dir).expect("built-in schemas");
    let options = SchemaOptions {
        openapi: Some(dir.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&dir), None, &[]).expect("discovery"));
    let out = f(&Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    });
    let _ = std::fs::remove_dir_all(&dir);
    out
}

struct Counts {
    policies: usize,
    expressions: usize,
    input_errors: usize,
    /// MAPs with at least one kind checked against a schema.
    with_kinds: usize,
    /// Expressions × checked kinds.
    checks: usize,
}

fn compute(backends: &Backends<'_>, mode: Mode) -> (String, Counts) {
    let corpus = corpus_dir();
    let mut out = String::from("policy\tfieldRef\tkind\treported\tclass\twhy\tfinding\n");
    let mut counts = Counts {
        policies: 0,
        expressions: 0,
        input_errors: 0,
        with_kinds: 0,
        checks: 0,
    };
    let files = corpus_files(&corpus);
    // The `*.policy.yaml` files of shared/corpus/mutating: a file added to or removed from the
    // shared corpus changes it (and the golden TSV with it).
    assert_eq!(files.len(), 197, "MAP files in {}", corpus.display());
    for path in files {
        let rel = path
            .strip_prefix(&corpus)
            .expect("under corpus")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("corpus file");
        let (_, others) = read_all(&rel, &text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let objects = match read(&others) {
            Ok(m) => m,
            Err(e) => {
                counts.input_errors += 1;
                out.push_str(&format!(
                    "{rel}\t-\t-\t-\tinput error\t\t{}\n",
                    clean(&e.message)
                ));
                continue;
            }
        };
        let maps: Vec<_> = policies(&objects).map(|(_, p)| p).collect();
        assert_eq!(maps.len(), 1, "{rel}: one MAP per corpus file");
        for policy in maps {
            counts.policies += 1;
            let sites = vapcheck::mutating::mutation_sites(policy, mode).len();
            counts.expressions += sites;
            let options = CheckOptions {
                mode,
                ..CheckOptions::default()
            };
            let status = check_mutating_policy(policy, &options, backends);
            counts.with_kinds += usize::from(!status.checked_kinds.is_empty());
            counts.checks += sites * status.checked_kinds.len();
            let name = policy.metadata.name.clone().unwrap_or_default();
            if mode == Mode::Strict {
                for w in &status.expression_warnings {
                    out.push_str(&format!(
                        "{rel}#{name}\t{}\t\t\t\t\t{}\n",
                        w.field_ref,
                        clean(w.warning.lines().next().unwrap_or_default())
                    ));
                }
                continue;
            }
            for f in &status.findings {
                let block = format!("{}: ", f.gvk);
                let reported = status.expression_warnings.iter().any(|w| {
                    w.field_ref == f.field_ref
                        && w.warning
                            .split("\n\n")
                            .any(|b| b.starts_with(&block) && b.contains(f.message.as_str()))
                });
                out.push_str(&format!(
                    "{rel}#{name}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                    f.field_ref,
                    f.gvk,
                    if reported { "warning" } else { "dropped" },
                    f.class,
                    f.why,
                    clean(&f.message)
                ));
            }
        }
    }
    (out, counts)
}

#[test]
fn mutating_findings_match_the_reviewed_table() {
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mutating-findings.tsv");
    let started = std::time::Instant::now();
    let ((ours, counts), (strict, _)) = with_backends(|b| {
        let ext = compute(b, Mode::Extended);
        let strict = compute(b, Mode::Strict);
        (ext, strict)
    });
    println!(
        "{} MAPs ({} with a kind checked), {} expressions (extended), {} expression×kind checks, {} input errors, {} findings, both modes checked in {:?}",
        counts.policies,
        counts.with_kinds,
        counts.expressions,
        counts.checks,
        counts.input_errors,
        ours.lines().count() - 1 - counts.input_errors,
        started.elapsed()
    );
    // Strict mode reports a subset: every strict warning's fieldRef has an extended finding.
    for line in strict.lines().skip(1) {
        let mut cols = line.split('\t');
        let (policy, field) = (cols.next().unwrap_or(""), cols.next().unwrap_or(""));
        assert!(
            ours.lines()
                .any(|l| l.starts_with(&format!("{policy}\t{field}\t"))),
            "strict finding missing in extended mode: {line}"
        );
    }
    if crate::support::bless() {
        std::fs::write(&table, &ours).expect("write table");
    }
    let theirs = std::fs::read_to_string(&table).expect("tests/fixtures/mutating-findings.tsv");
    if ours != theirs {
        let a: Vec<&str> = theirs.lines().collect();
        let b: Vec<&str> = ours.lines().collect();
        let missing: Vec<&&str> = a.iter().filter(|l| !b.contains(l)).take(20).collect();
        let extra: Vec<&&str> = b.iter().filter(|l| !a.contains(l)).take(20).collect();
        panic!(
            "findings differ from the table ({} vs {} rows)\nonly in the table:\n{}\nonly in vapcheck:\n{}",
            a.len(),
            b.len(),
            missing
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            extra
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
}
