//! The controller checks policies on tokio's blocking threads, whose stacks are 2 MiB
//! (`tokio::task::spawn_blocking` in `controller/mod.rs` and `controller/mutating.rs`; the
//! runtime keeps tokio's default size). Here everything such a thread runs for one policy —
//! the type check in strict and in extended mode (narrowing, cost estimates, the MAP literal
//! checks) and kube-apiserver's create validation — runs on a 2 MiB thread of this debug build,
//! for every ValidatingAdmissionPolicy and MutatingAdmissionPolicy of the shared corpora and
//! for policies whose expressions are as deep as cel-go's parser limits allow. A stack overflow
//! aborts the test binary.

use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use serde_json::Value;
use vapcheck::apiserver::{Server, validate_mutating_policy_create, validate_policy_create};
use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::{InputObject, read_all};
use vapcheck::cli::mutating::MutatingObject;
use vapcheck::mutating::check_mutating_policy;
use vapcheck::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode, check_policy};

const STACK: usize = 2 * 1024 * 1024;

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("entry").path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(p);
        }
    }
}

/// Every ValidatingAdmissionPolicy and MutatingAdmissionPolicy of the corpus folder `dir`, read
/// as `vapcheck check` reads them (`cli::input::read_all`, `cli::mutating::read`); a file or
/// document it cannot read is left out (`vapcheck check` reports it instead of checking it).
fn policies(
    shared: &Path,
    dir: &str,
) -> (Vec<ValidatingAdmissionPolicy>, Vec<MutatingAdmissionPolicy>) {
    let mut files = Vec::new();
    yaml_files(&shared.join(dir), &mut files);
    files.sort();
    let (mut vaps, mut maps) = (Vec::new(), Vec::new());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read corpus file");
        let Ok((objects, others)) = read_all(&f.display().to_string(), &text) else {
            continue;
        };
        vaps.extend(objects.into_iter().filter_map(|o| match o {
            InputObject::Policy(p) => Some(p.policy),
            InputObject::Binding(_) => None,
        }));
        if let Ok(read) = vapcheck::cli::mutating::read(&others) {
            maps.extend(read.into_iter().filter_map(|o| match o {
                MutatingObject::Policy(_, p) => Some(*p),
                MutatingObject::Binding(..) => None,
            }));
        }
    }
    (vaps, maps)
}

/// A validating policy on Deployments whose one validation is `expression`.
fn deep_policy(name: &str, expression: &str) -> Value {
    serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "variables": [{"name": "deep", "expression": expression}],
            "validations": [
                {"expression": expression, "messageExpression": expression},
                {"expression": format!("has(object.spec) && ({expression})")}
            ]
        }
    })
}

#[test]
fn every_check_fits_a_2_mib_thread() {
    let shared = crate::support::shared_dir();
    let openapi = shared.join("openapi/v1.35");
    assert!(openapi.is_dir(), "{} is missing", openapi.display());
    let (mut vaps, _) = policies(&shared, "corpus/policies");
    vaps.extend(policies(&shared, "corpus/bindings").0);
    let (_, maps) = policies(&shared, "corpus/mutating");
    // cel-go's parser limits (docs/cel-checker.md, "Stack safety"): 250 nested brackets with
    // two unlimited nodes each, and 250 counted nodes in a chain.
    let deepest = format!(
        "{}object{}{}",
        "-[".repeat(249),
        ".f".repeat(249),
        "]".repeat(249)
    );
    let chain = vec!["object.spec.replicas"; 250].join(" + ") + " > 0";
    let selections = format!("object{} == 1", ".spec".repeat(249));
    let ternaries = format!("{}true{}", "true ? ".repeat(120), " : false".repeat(120));
    for (i, e) in [&deepest, &chain, &selections, &ternaries]
        .into_iter()
        .enumerate()
    {
        let policy = deep_policy(&format!("deep-{i}.example.com"), e);
        vaps.push(serde_json::from_value(policy).expect("a ValidatingAdmissionPolicy"));
    }
    let (vap_count, map_count) = (vaps.len(), maps.len());

    let run = move || {
        let options = SchemaOptions {
            openapi: Some(openapi.clone()),
            ..SchemaOptions::default()
        };
        let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
        let mapper = DiscoveryRestMapper::new(
            offline_discovery(Some(&openapi), None, &[]).expect("offline discovery"),
        );
        let backends = Backends {
            rest_mapper: &mapper,
            discovery: Some(&mapper),
            schemas: schemas.as_ref(),
            checker: checker.as_ref(),
        };
        let server = Server { minor: 37 };
        let mut checked = (0, 0);
        for policy in &vaps {
            for mode in [Mode::Strict, Mode::Extended] {
                let options = CheckOptions {
                    mode,
                    ..CheckOptions::default()
                };
                let _ = check_policy(policy, &options, &backends);
            }
            let _ = validate_policy_create(policy, server);
            checked.0 += 1;
        }
        for policy in &maps {
            for mode in [Mode::Strict, Mode::Extended] {
                let options = CheckOptions {
                    mode,
                    ..CheckOptions::default()
                };
                let _ = check_mutating_policy(policy, &options, &backends);
            }
            let _ = validate_mutating_policy_create(policy, server);
            checked.1 += 1;
        }
        checked
    };
    let checked = std::thread::Builder::new()
        .name("2-MiB-check".into())
        .stack_size(STACK)
        .spawn(run)
        .expect("spawn")
        .join()
        .expect("the checks return");
    println!(
        "2 MiB stack: {} of {vap_count} ValidatingAdmissionPolicies and {} of {map_count} \
         MutatingAdmissionPolicies checked (strict, extended, create validation)",
        checked.0, checked.1
    );
    assert_eq!(
        checked, EXPECTED_CHECKED,
        "policies that decode and were checked"
    );
}

/// The ValidatingAdmissionPolicies (383 read from the policy and bindings corpora, and the four
/// deep ones) and MutatingAdmissionPolicies (194 read from the MAP corpus) checked.
const EXPECTED_CHECKED: (usize, usize) = (387, 194);
