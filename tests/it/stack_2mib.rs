//! The controller checks policies on tokio's blocking threads, whose stacks are 2 MiB
//! (`tokio::task::spawn_blocking` in `controller/mod.rs` and `controller/mutating.rs`; the
//! runtime keeps tokio's default size). Here everything such a thread runs for one policy —
//! the type check in strict and in extended mode (narrowing, cost estimates, the MAP literal
//! checks) and kube-apiserver's create validation — runs on a 2 MiB thread of this debug build,
//! for every ValidatingAdmissionPolicy and MutatingAdmissionPolicy of the shared corpora and
//! for policies whose expressions are as deep as cel-go's parser limits allow. The webhook
//! assessment runs there too (`tokio::task::spawn_blocking` of `assess_all` in
//! `controller/webhooks.rs`): the practices (`webhooks::advise`, `webhooks::exact_match_bypass`),
//! the match conditions' type check (`webhooks::match_conditions::type_check`), the availability
//! assessment and the findings lines, for every webhook configuration of the shared corpus.
//! The Gatekeeper and Kyverno checks are not here: only `vapcheck check` runs them, on its main
//! thread (no 2 MiB thread), and the controller does not run them. A stack overflow aborts the
//! test binary.

use std::path::{Path, PathBuf};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use serde_json::Value;
use vapcheck::apiserver::webhook::{WebhookConfiguration, default_configuration};
use vapcheck::apiserver::{Server, validate_mutating_policy_create, validate_policy_create};
use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::{InputObject, read_all};
use vapcheck::cli::mutating::MutatingObject;
use vapcheck::mutating::check_mutating_policy;
use vapcheck::policy::{
    Backends, CheckOptions, Discovery, DiscoveryRestMapper, Mode, check_policy,
};
use vapcheck::webhooks::availability::{assess, offline_findings};
use vapcheck::webhooks::match_conditions::type_check;

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

/// Every Validating- and MutatingWebhookConfiguration of the webhook corpus, decoded as the
/// controller decodes what it watches (`apiserver::webhook::decode_configuration`, through
/// `cli::webhooks::read_lenient`, then defaulted as `controller/webhooks.rs` `seen` does).
fn webhook_configurations(shared: &Path) -> Vec<WebhookConfiguration> {
    let mut files = Vec::new();
    yaml_files(&shared.join("corpus/webhooks"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read corpus file");
        let Ok((_, others)) = read_all(&f.display().to_string(), &text) else {
            continue;
        };
        let (objects, _) = vapcheck::cli::webhooks::read_lenient(&others);
        out.extend(objects.into_iter().map(|o| {
            let mut config = o.config;
            default_configuration(&mut config);
            config
        }));
    }
    out
}

/// What `controller/webhooks.rs` `assess_all` and `offline` compute per configuration, counted:
/// (configurations, webhooks, configurations whose match conditions were type checked,
/// findings lines).
type WebhookCounts = (usize, usize, usize, usize);

#[test]
fn webhook_assessment_fits_a_2_mib_thread() {
    let shared = crate::support::shared_dir();
    let openapi = shared.join("openapi/v1.35");
    assert!(openapi.is_dir(), "{} is missing", openapi.display());
    let configs = webhook_configurations(&shared);
    let run = move || -> WebhookCounts {
        let options = SchemaOptions {
            openapi: Some(openapi.clone()),
            ..SchemaOptions::default()
        };
        let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
        let mapper = DiscoveryRestMapper::new(
            offline_discovery(Some(&openapi), None, &[]).expect("offline discovery"),
        );
        let groups = mapper.api_groups().expect("API groups");
        let backends = Backends {
            rest_mapper: &mapper,
            discovery: Some(&mapper),
            schemas: schemas.as_ref(),
            checker: checker.as_ref(),
        };
        let mut counts: WebhookCounts = (0, 0, 0, 0);
        for config in &configs {
            // The controller runs in one mode; both are run here (strict type checks nothing).
            let mut status = None;
            for mode in [Mode::Strict, Mode::Extended] {
                let options = CheckOptions {
                    mode,
                    ..CheckOptions::default()
                };
                status = type_check(config, &options, Some(&backends));
                assert_eq!(
                    status.is_some(),
                    mode == Mode::Extended
                        && config
                            .webhooks()
                            .iter()
                            .any(|w| !w.match_conditions().is_empty()),
                    "{}: type checked in {mode:?}",
                    config.name()
                );
            }
            let mut advice = vapcheck::webhooks::advise(config);
            advice.extend(vapcheck::webhooks::exact_match_bypass(config, &groups));
            let lines = offline_findings(config.webhooks().len(), &advice, status.as_ref());
            for hook in config.webhooks() {
                let _ = assess(hook, None, &[], 0, 0);
            }
            counts.0 += 1;
            counts.1 += config.webhooks().len();
            counts.2 += usize::from(status.is_some());
            counts.3 += lines.iter().map(Vec::len).sum::<usize>();
        }
        counts
    };
    let counts = std::thread::Builder::new()
        .name("2-MiB-webhooks".into())
        .stack_size(STACK)
        .spawn(run)
        .expect("spawn")
        .join()
        .expect("the assessment returns");
    println!(
        "2 MiB stack: {} webhook configurations ({} webhooks) assessed, {} with match conditions \
         type checked, {} findings lines",
        counts.0, counts.1, counts.2, counts.3
    );
    assert_eq!(counts, EXPECTED_WEBHOOKS);
}

/// Of the webhook corpus (156 configurations, 456 webhooks by its STATS.md): the configurations
/// that decode, their webhooks, the ones with match conditions (type checked in extended mode)
/// and the findings lines the controller would report. A change to the webhook practices or to
/// the match-condition checks changes the last number; a change to the corpus all of them.
const EXPECTED_WEBHOOKS: WebhookCounts = (156, 456, 22, 119);
