//! The whole strict-mode status of every corpus policy against what Kubernetes 1.37.1's own
//! type checker computes for it (`tests/golden/upstream-corpus-status-1.37.jsonl`, made by the
//! Go oracle in `e2e/oracle` from the real `TypeChecker`, KCM's compiled-in schemas and the
//! 1.37.1 discovery documents; upstream's random type-name digits removed).
//!
//! vapcheck runs as `vapcheck check --mode strict --openapi shared/openapi/v1.35` would: kinds
//! mapped and typed from the published v1.35 documents.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_policies;
use vapcheck::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode, check_policy};

#[test]
fn strict_status_of_every_corpus_policy_is_upstreams() {
    let shared = crate::support::shared_dir();
    let openapi = shared.join("openapi/v1.35");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/upstream-corpus-status-1.37.jsonl");
    let golden = std::fs::read_to_string(golden).expect("golden file");

    let options = SchemaOptions {
        openapi: Some(openapi.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let mapper =
        DiscoveryRestMapper::new(offline_discovery(Some(&openapi), None, &[]).expect("discovery"));
    let backends = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    };
    let strict = CheckOptions {
        mode: Mode::Strict,
        ..CheckOptions::default()
    };

    // Policies by "<dir>/<file>#<document index>", as the golden file names them.
    let mut files: HashMap<String, Vec<vapcheck::cli::input::InputPolicy>> = HashMap::new();
    let mut used: HashMap<(String, String), usize> = HashMap::new();
    let mut total = 0;
    let mut identical = 0;
    let mut differences = Vec::new();
    for line in golden.lines().filter(|l| !l.trim().is_empty()) {
        let expected: Value = serde_json::from_str(line).expect("golden line");
        let id = expected["policy"].as_str().expect("policy id");
        let (file, _) = id.rsplit_once('#').expect("policy id has #");
        let policies = files.entry(file.to_owned()).or_insert_with(|| {
            let path = shared.join("corpus/policies").join(file);
            let text = std::fs::read_to_string(&path).expect("corpus file");
            read_policies(file, &text).expect("corpus file parses")
        });
        // The golden index counts every `---` chunk; ours counts non-empty documents. Match by
        // name, in order, within the file.
        let name = expected["name"].as_str().unwrap_or_default();
        let seen = used.entry((file.to_owned(), name.to_owned())).or_insert(0);
        let policy = policies
            .iter()
            .filter(|p| p.policy.metadata.name.as_deref().unwrap_or_default() == name)
            .nth(*seen)
            .unwrap_or_else(|| panic!("{id}: policy not found in the corpus"));
        *seen += 1;
        total += 1;
        let status = check_policy(&policy.policy, &strict, &backends);
        let ours = serde_json::to_value(status.type_checking()).expect("serialise");
        let theirs = &expected["typeChecking"];
        if &ours == theirs {
            identical += 1;
        } else {
            differences.push(format!("{id}\n  upstream: {theirs}\n  vapcheck: {ours}"));
        }
    }
    println!("{identical}/{total} identical");
    for d in &differences {
        println!("{d}");
    }
    assert_eq!(total, 263, "the golden file covers the whole corpus");
    assert!(
        differences.is_empty(),
        "{} of {total} policies differ from upstream:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
