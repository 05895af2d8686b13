//! Fuzzes the `vapcheck check` pipeline on policy documents: YAML/JSON bytes → every
//! ValidatingAdmissionPolicy in them (`cli::input::read_policies`, as for a FILE argument) →
//! `check_policy`, and every MutatingAdmissionPolicy (`cli::mutating::read`) →
//! `check_mutating_policy`, in strict and extended mode with the offline backends of
//! `shared/openapi/v1.35` (`vapcheck check --openapi`, loaded once). No input may panic, and
//! checking is deterministic: the same policy checked twice gives the same status.
//! Seeds: fuzz/seeds/policy (fuzz/make-seeds: the policy files of the shared corpus).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vapcheck::cli::input::{read_all, read_policies};
use vapcheck::cli::mutating::{policies as map_policies, read};
use vapcheck::cli::{BackendProvider, LoadedBackends, OfflineProvider, SchemaOptions};
use vapcheck::mutating::check_mutating_policy;
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

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let policies = read_policies("<fuzz>", text).unwrap_or_default();
    let maps = match read_all("<fuzz>", text) {
        Ok((_, others)) => read(&others).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    LOADED.with(|loaded| {
        let backends = Backends {
            rest_mapper: loaded.rest_mapper.as_ref(),
            discovery: loaded.discovery.as_deref(),
            schemas: loaded.schemas.as_ref(),
            checker: loaded.checker.as_ref(),
        };
        for p in &policies {
            let [strict, extended] = [Mode::Strict, Mode::Extended].map(|mode| {
                let options = CheckOptions {
                    mode,
                    ..CheckOptions::default()
                };
                let first = check_policy(&p.policy, &options, &backends);
                let second = check_policy(&p.policy, &options, &backends);
                assert_eq!(
                    first, second,
                    "{mode:?} check of {} is not deterministic",
                    p.origin
                );
                first
            });
            if let Err(e) =
                extended_keeps_strict(&strict.expression_warnings, &extended.expression_warnings)
            {
                panic!("{}: {e}", p.origin);
            }
        }
        for (origin, policy) in map_policies(&maps) {
            for mode in [Mode::Strict, Mode::Extended] {
                let options = CheckOptions {
                    mode,
                    ..CheckOptions::default()
                };
                let first = check_mutating_policy(policy, &options, &backends);
                let second = check_mutating_policy(policy, &options, &backends);
                assert_eq!(
                    first, second,
                    "{mode:?} check of MAP {} is not deterministic",
                    origin
                );
            }
        }
    });
});
