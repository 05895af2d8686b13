//! The layering of the workspace (docs/architecture.md). The crates' dependencies are what
//! the compiler enforces: checked here on Cargo.lock (the checker and the core reach no kube
//! client, no runtime, no HTTP stack, and the core depends on neither the sources nor
//! `vapcheck`). Inside the crates, checked on the sources: which top-level module may use
//! which, which may do I/O, and no import cycle between the top-level modules of a crate.
//!
//! The production code of each file is read: `//` comment lines and items marked
//! `#[cfg(test)]` (a `mod x;` line, or a block to its closing brace) are left out, and so are
//! the files such a `mod x;` declares. A module "uses" another when its code names
//! `crate::<other>` (every cross-module path in these crates is written so).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The CEL checker, the crate vapcheck-cel (crates/cel), re-exported as `crate::cel`.
const CHECKER: &[&str] = &["cel"];
/// The checker crate, vapcheck-cel: its modules must form no cycle either.
const CHECKER_DIR: &str = "crates/cel/src";
/// The analysis core, the crate vapcheck-core: no I/O, no front end.
const CORE_DIR: &str = "crates/core/src";
/// The core's top-level modules (`vapcheck` re-exports them under the same names).
const CORE: &[&str] = &[
    "analysis",
    "k8s_env",
    "policy",
    "mutating",
    "apiserver",
    "bindings",
    "engine",
    "engines",
    "finding",
    "webhooks",
    "reports",
    "suppress",
    "schema",
];
/// Schemas, inside the core: types and conversion used by the rest of the core, which they
/// do not use in turn.
const SCHEMA: &[&str] = &["schema"];
/// The sources that read files and the cluster, the crate vapcheck-sources.
const SOURCES_DIR: &str = "crates/sources/src";
/// The front ends and the runtime, the package `vapcheck`.
const SHELL_DIR: &str = "src";

/// Paths that mean I/O or a runtime: forbidden in the core and the checker.
const IO_PATHS: &[&str] = &[
    "tokio::",
    "kube::",
    "axum::",
    "hyper::",
    "tower::",
    "std::fs",
    "std::net",
    "std::process",
    "use tokio",
    "use kube",
];

/// Text with `//` comment lines removed.
fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without its `#[cfg(test)]` items; the names of the modules declared `#[cfg(test)]
/// mod x;` are returned too.
fn production(text: &str) -> (String, Vec<String>) {
    let text = without_comments(text);
    let mut out = String::new();
    let mut test_mods = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "#[cfg(test)]".len()..];
        // The item: up to its `;` when that comes before any `{`, else to the matching `}`.
        let semi = after.find(';');
        let brace = after.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => after.len(),
        };
        let item = &after[..end];
        if let Some(name) = item
            .trim()
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|m| m.strip_suffix(';'))
        {
            test_mods.push(name.trim().to_owned());
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Production text of every production file below `dir` (relative to the workspace root,
/// e.g. `crates/core/src`), by path relative to `dir`.
fn sources(dir: &str) -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut texts = BTreeMap::new();
    let mut test_only = BTreeSet::new();
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .expect("below src")
            .to_string_lossy()
            .into_owned();
        let raw = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let (prod, test_mods) = production(&raw);
        // The folder a `mod x;` of this file looks in.
        let dir = match rel.rsplit_once('/') {
            Some((d, file)) if file == "mod.rs" || file == "lib.rs" => format!("{d}/"),
            Some((d, file)) => format!("{d}/{}/", file.trim_end_matches(".rs")),
            None if rel == "lib.rs" || rel == "main.rs" => String::new(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        for m in test_mods {
            test_only.insert(format!("{dir}{m}.rs"));
            test_only.insert(format!("{dir}{m}/mod.rs"));
        }
        texts.insert(rel, prod);
    }
    texts.retain(|rel, _| !test_only.contains(rel));
    texts
}

/// The top-level module of a file (`policy/check.rs` → `policy`, `engine.rs` → `engine`).
fn top(rel: &str) -> &str {
    rel.split('/').next().unwrap_or(rel).trim_end_matches(".rs")
}

/// The modules a text names as `<prefix><m>` (`crate::<m>`, `super::<m>`).
fn uses(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let after = &rest[i + prefix.len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
        rest = after;
    }
    out
}

/// Top-level module → the modules its production code uses.
fn graph(texts: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in texts {
        let t = top(rel).to_owned();
        let mut deps = uses(text, "crate::");
        // In a top-level module's own file (`x.rs`, `x/mod.rs`), `super::` is the crate root:
        // the checker crate's modules name each other so.
        if !rel.contains('/') || *rel == format!("{t}/mod.rs") {
            deps.extend(uses(text, "super::"));
        }
        let entry = g.entry(t.clone()).or_default();
        entry.extend(deps.into_iter().filter(|d| *d != t));
    }
    g
}

#[test]
fn top_level_modules_form_no_cycle() {
    for (dir, at_least) in [
        (CHECKER_DIR, 10),
        (CORE_DIR, 12),
        (SOURCES_DIR, 3),
        (SHELL_DIR, 8),
    ] {
        let g = graph(&sources(dir));
        assert!(
            g.len() >= at_least,
            "{dir}: top-level modules found: {:?}",
            g.keys()
        );
        if let Some(cycle) = cycle(&g) {
            panic!(
                "{dir}: import cycle between top-level modules: {}",
                cycle.join(" -> ")
            );
        }
    }
}

/// A cycle of the module graph `g`, if any.
fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search for a back edge; the path to it is the cycle.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|p| p == n).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(n.to_owned());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(n.to_owned(), 1);
        path.push(n.to_owned());
        for d in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut state, &mut Vec::new()))
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    // Between the crates the compiler enforces it (Cargo.lock: the tests below). Inside the
    // core, the schemas use the checker only.
    let core = graph(&sources(CORE_DIR));
    assert_eq!(
        core.keys()
            .map(String::as_str)
            .filter(|m| *m != "lib")
            .collect::<BTreeSet<_>>(),
        CORE.iter().copied().collect::<BTreeSet<_>>(),
        "the core's top-level modules"
    );
    let mut violations = Vec::new();
    for module in SCHEMA {
        for d in core.get(*module).into_iter().flatten() {
            if !CHECKER.contains(&d.as_str()) {
                violations.push(format!("{module} uses {d}"));
            }
        }
    }
    let g = graph(&sources(SHELL_DIR));
    // The front ends: `vapcheck check` (cli) and the editor server (lsp) never reach into
    // the controller's runtime, and `check` does not depend on the editor server.
    for front in ["cli", "lsp"] {
        for d in g.get(front).into_iter().flatten() {
            if ["controller", "health", "metrics", "config"].contains(&d.as_str())
                || (front == "cli" && d == "lsp")
            {
                violations.push(format!("{front} uses {d}"));
            }
        }
    }
    assert!(
        g.get("lsp").is_some_and(|d| d.contains("cli")),
        "the editor server's diagnostics come from `check` (crate::cli)"
    );
    assert!(violations.is_empty(), "layering: {}", violations.join("; "));
}

#[test]
fn the_checker_and_the_core_do_no_io() {
    // The whole core crate's production code; the checker is a crate of its own:
    // the_checker_knows_nothing_of_kubernetes reads it.
    let texts = sources(CORE_DIR);
    assert!(texts.len() >= 50, "crates/core/src files: {}", texts.len());
    let io_files: Vec<String> = texts
        .iter()
        .filter_map(|(rel, text)| {
            let found: Vec<&str> = IO_PATHS
                .iter()
                .copied()
                .filter(|p| text.contains(p))
                .collect();
            (!found.is_empty()).then(|| format!("{rel} ({})", found.join(", ")))
        })
        .collect();
    assert_eq!(io_files, Vec::<String>::new(), "the core does I/O");
}

/// The checker crate's files (crates/cel/src), tests included.
fn checker_files() -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cel/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
}

#[test]
fn the_checker_knows_nothing_of_kubernetes() {
    // All of the checker crate, its tests included.
    let files = checker_files();
    assert_eq!(files.len(), 11, "crates/cel/src files: {files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = without_comments(&std::fs::read_to_string(f).expect("read"));
        for p in [
            "k8s_openapi",
            "kube::",
            "use kube",
            "tokio",
            "vapcheck::",
            "crate::k8s_env",
            "crate::policy",
            "crate::schema",
        ] {
            if text.contains(p) {
                found.push(format!("{} ({p})", f.display()));
            }
        }
        for p in IO_PATHS {
            if production(&text).0.contains(p) {
                found.push(format!("{} ({p}: I/O)", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the checker names Kubernetes or does I/O: {found:?}"
    );
}

/// The packages of Cargo.lock: name → the names of its dependencies.
fn lock_graph() -> BTreeMap<String, BTreeSet<String>> {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("read Cargo.lock");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let mut name = None;
        let mut deps = BTreeSet::new();
        let mut in_deps = false;
        for line in package.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name = ") {
                name = Some(n.trim_matches('"').to_owned());
            } else if line.starts_with("dependencies = [") {
                in_deps = !line.ends_with(']');
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // ` "name",` or ` "name version",` when two versions are locked.
                let dep = line.trim_matches(|c| c == '"' || c == ',');
                let dep = dep.split(' ').next().unwrap_or(dep);
                deps.insert(dep.to_owned());
            }
        }
        if let Some(n) = name {
            graph.entry(n).or_default().extend(deps);
        }
    }
    graph
}

/// What the compiler enforces: the checker crate's whole dependency closure (Cargo.lock) has
/// no Kubernetes, no kube client and no async runtime, and the root package depends on it.
#[test]
fn the_checker_crate_depends_on_no_kubernetes_and_no_runtime() {
    let graph = lock_graph();
    assert!(
        graph
            .get("vapcheck")
            .is_some_and(|d| d.contains("vapcheck-cel")),
        "vapcheck depends on vapcheck-cel"
    );
    let direct = graph
        .get("vapcheck-cel")
        .expect("vapcheck-cel in Cargo.lock");
    assert_eq!(
        direct.iter().map(String::as_str).collect::<Vec<_>>(),
        ["cel", "regex-syntax"],
        "vapcheck-cel's direct dependencies"
    );
    let mut closure = BTreeSet::new();
    let mut todo = vec!["vapcheck-cel".to_owned()];
    while let Some(p) = todo.pop() {
        for d in graph.get(&p).into_iter().flatten() {
            if closure.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    let forbidden: Vec<&String> = closure
        .iter()
        .filter(|d| {
            d.starts_with("kube")
                || d.starts_with("k8s-")
                || ["tokio", "hyper", "axum", "tower", "reqwest", "vapcheck"].contains(&d.as_str())
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "the checker crate's dependencies reach {forbidden:?} (closure: {closure:?})"
    );
}

/// The dependency closure of `package` in Cargo.lock (`graph`), dev-dependencies included.
fn closure(graph: &BTreeMap<String, BTreeSet<String>>, package: &str) -> BTreeSet<String> {
    let mut closure = BTreeSet::new();
    let mut todo = vec![package.to_owned()];
    while let Some(p) = todo.pop() {
        for d in graph.get(&p).into_iter().flatten() {
            if closure.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    closure
}

/// What the compiler enforces: the core crate's whole dependency closure (Cargo.lock) has no
/// kube client, no async runtime and no HTTP stack, and neither the sources crate nor
/// `vapcheck`; the sources crate and `vapcheck` depend on it.
#[test]
fn the_core_crate_depends_on_no_client_and_no_runtime() {
    let graph = lock_graph();
    assert!(
        graph
            .get("vapcheck")
            .is_some_and(|d| d.contains("vapcheck-core") && d.contains("vapcheck-sources")),
        "vapcheck depends on vapcheck-core and vapcheck-sources"
    );
    assert!(
        graph
            .get("vapcheck-sources")
            .is_some_and(|d| d.contains("vapcheck-core")),
        "vapcheck-sources depends on vapcheck-core"
    );
    let direct = graph
        .get("vapcheck-core")
        .expect("vapcheck-core in Cargo.lock");
    assert!(
        direct.contains("vapcheck-cel"),
        "vapcheck-core depends on the checker: {direct:?}"
    );
    let closure = closure(&graph, "vapcheck-core");
    assert!(
        closure.contains("k8s-openapi") && closure.contains("kube-core"),
        "the core has the Kubernetes types: {closure:?}"
    );
    let forbidden: Vec<&String> = closure
        .iter()
        .filter(|d| {
            d.starts_with("tokio")
                || d.starts_with("hyper")
                || d.starts_with("tower")
                || [
                    "kube",
                    "kube-client",
                    "kube-runtime",
                    "axum",
                    "reqwest",
                    "vapcheck",
                    "vapcheck-sources",
                ]
                .contains(&d.as_str())
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "the core crate's dependencies reach {forbidden:?} (closure: {closure:?})"
    );
}
