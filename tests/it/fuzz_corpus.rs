//! The fuzzing that accumulates (docs/fuzzing.md, "Accumulated"): `make fuzz` appends each
//! target's executions to `fuzz/stats.tsv` and keeps its corpus in `fuzz/corpus/<target>`
//! (at most 256 KiB a target, fuzz/keep-corpus). docs/fuzzing.md's table must be their sums.

use std::collections::BTreeMap;
use std::path::PathBuf;

const TARGETS: [&str; 5] = ["check", "k8s_expr", "policy", "schema", "manifests"];
/// fuzz/keep-corpus's `CAP_BYTES`.
const CAP_BYTES: u64 = 256 * 1024;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Per target: (runs, seconds, executions, corpus entries, corpus bytes).
type Row = (u64, u64, u64, u64, u64);

fn number(cell: &str) -> u64 {
    cell.trim()
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("{cell:?}: {e}"))
}

#[test]
fn docs_state_the_accumulated_runs_and_corpus() {
    let stats = std::fs::read_to_string(repo().join("fuzz/stats.tsv")).expect("fuzz/stats.tsv");
    let mut lines = stats.lines();
    assert_eq!(
        lines.next(),
        Some("date\tcommit\ttarget\tseconds\texecutions")
    );
    let mut want: BTreeMap<&str, Row> = TARGETS.iter().map(|t| (*t, (0, 0, 0, 0, 0))).collect();
    for line in lines {
        let cells: Vec<&str> = line.split('\t').collect();
        assert_eq!(cells.len(), 5, "fuzz/stats.tsv: {line:?}");
        let row = want
            .get_mut(cells[2])
            .unwrap_or_else(|| panic!("fuzz/stats.tsv: unknown target in {line:?}"));
        row.0 += 1;
        row.1 += number(cells[3]);
        row.2 += number(cells[4]);
    }
    for (target, row) in &mut want {
        let dir = repo().join("fuzz/corpus").join(target);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries {
                let meta = e.expect("corpus entry").metadata().expect("metadata");
                row.3 += 1;
                row.4 += meta.len();
            }
        }
        assert!(
            row.4 <= CAP_BYTES,
            "{}: {} bytes, over the cap",
            dir.display(),
            row.4
        );
    }
    let docs = std::fs::read_to_string(repo().join("docs/fuzzing.md")).expect("docs/fuzzing.md");
    let section = docs
        .split("\n## Accumulated\n")
        .nth(1)
        .expect("docs/fuzzing.md has an Accumulated section");
    let mut got: BTreeMap<&str, Row> = BTreeMap::new();
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() != 8 {
            continue;
        }
        let Some(target) = cells[1].strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let Some(known) = TARGETS.iter().find(|t| **t == target) else {
            continue;
        };
        got.insert(
            known,
            (
                number(cells[2]),
                number(cells[3]),
                number(cells[4]),
                number(cells[5]),
                number(cells[6]),
            ),
        );
    }
    assert_eq!(
        got, want,
        "docs/fuzzing.md's Accumulated table (runs, seconds, executions, entries, bytes)"
    );
}
