//! Fuzzes expressions in the full Kubernetes environment against real kinds: any UTF-8 text
//! becomes every expression site of one ValidatingAdmissionPolicy (a validation, its
//! messageExpression, a matchCondition, a variable and an auditAnnotation) that matches
//! Deployments, Pods, ConfigMaps and Namespaces and has a ConfigMap paramKind, and goes through
//! `check_policy` in strict and extended mode with the offline backends of
//! `shared/openapi/v1.35` (loaded once), and through kube-apiserver's create validation
//! (`apiserver::validate_policy_create`). No input may panic, and checking is deterministic.
//! Seeds: fuzz/seeds/check (fuzz/make-seeds: the corpus' and golden files' expressions).
#![no_main]

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use libfuzzer_sys::fuzz_target;
use vapcheck::apiserver::{Server, validate_policy_create};
use vapcheck::cli::{BackendProvider, LoadedBackends, OfflineProvider, SchemaOptions};
use vapcheck::policy::{Backends, CheckOptions, Mode, check_policy, extended_keeps_strict};

fn load() -> LoadedBackends {
    // `$VAPCHECK_SHARED`, else the `shared/` folder beside the repository.
    let shared = std::env::var_os("VAPCHECK_SHARED").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
        std::path::PathBuf::from,
    );
    let openapi = shared.join("openapi/v1.35");
    assert!(
        openapi.is_dir(),
        "{} not found (set VAPCHECK_SHARED)",
        openapi.display()
    );
    let factory = |options: &SchemaOptions, _: &[_]| vapcheck::cli::offline_backends(options);
    let provider = OfflineProvider { factory: &factory };
    provider
        .load(&SchemaOptions {
            openapi: Some(openapi),
            ..SchemaOptions::default()
        })
        .expect("offline backends load")
}

thread_local! {
    static LOADED: LoadedBackends = load();
}

fn policy(expression: &str) -> ValidatingAdmissionPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "fuzz.example.com", "generation": 1},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"],
                 "resources": ["deployments"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["pods", "configmaps", "namespaces"]}
            ]},
            "variables": [
                {"name": "spec", "expression": "object.spec"},
                {"name": "v", "expression": expression}
            ],
            "matchConditions": [{"name": "m", "expression": expression}],
            "validations": [{"expression": expression, "messageExpression": expression}],
            "auditAnnotations": [{"key": "a", "valueExpression": expression}]
        }
    }))
    .expect("a well-formed policy")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let p = policy(text);
    let causes = validate_policy_create(&p, Server::PINNED);
    assert_eq!(
        causes,
        validate_policy_create(&p, Server::PINNED),
        "create validation of {text:?} is not deterministic"
    );
    LOADED.with(|loaded| {
        let backends = Backends {
            rest_mapper: loaded.rest_mapper.as_ref(),
            discovery: loaded.discovery.as_deref(),
            schemas: loaded.schemas.as_ref(),
            checker: loaded.checker.as_ref(),
        };
        let [strict, extended] = [Mode::Strict, Mode::Extended].map(|mode| {
            let options = CheckOptions {
                mode,
                ..CheckOptions::default()
            };
            let first = check_policy(&p, &options, &backends);
            let second = check_policy(&p, &options, &backends);
            assert_eq!(
                first, second,
                "{mode:?} check of {text:?} is not deterministic"
            );
            first
        });
        if let Err(e) =
            extended_keeps_strict(&strict.expression_warnings, &extended.expression_warnings)
        {
            panic!("{text:?}: {e}");
        }
    });
});
