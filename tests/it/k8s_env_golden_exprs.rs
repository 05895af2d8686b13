//! Replays the `std` cases of the oracle's golden file `tests/golden/upstream-exprs-1.37.jsonl`
//! that use the cel-go extension libraries at the versions Kubernetes enables them
//! (`strings:2`, `sets`, `lists:3`, `twovar`, plus Kubernetes' four AST validators) against
//! the standard environment extended with this crate's versions of those libraries, and
//! compares the issues text (byte for byte) or the deduced type.

use crate::golden_support::{Tally, golden};

use std::sync::Arc;

use vapcheck::cel::{Env, EnvBuilder, EnvOptions, Type};
use vapcheck::k8s_env::compile;
use vapcheck::k8s_env::decls::Library;
use vapcheck::k8s_env::libraries::add_library;

const KUBERNETES_EXTS: &[&str] = &["strings:2", "sets", "lists:3", "twovar"];

/// The standard environment with the Kubernetes extension libraries.
fn ext_env() -> Arc<Env> {
    let mut b = EnvBuilder::standard(EnvOptions::kubernetes());
    for lib in [
        Library::ExtStrings,
        Library::ExtSets,
        Library::ExtLists,
        Library::TwoVarComprehensions,
    ] {
        add_library(&mut b, lib, 37).expect("library declares");
    }
    Arc::new(b.build())
}

fn parse_decl_type(t: &str) -> Type {
    let t = t.replace("null_type", "null");
    Type::parse(&t).unwrap_or_else(|e| panic!("decl type {t}: {e}"))
}

#[test]
fn extension_library_cases_match_cel_go() {
    let base = ext_env();
    let mut tally = Tally::default();
    for case in golden() {
        let input = &case["input"];
        if input["env"] != "std" {
            continue;
        }
        let exts: Vec<&str> = input["options"]["ext"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        let options = input["options"].as_object();
        let only_ext_and_validators = options.is_some_and(|o| {
            o.keys().all(|k| k == "ext" || k == "validators")
                && o.get("validators") == Some(&serde_json::Value::Bool(true))
        });
        if exts != KUBERNETES_EXTS || !only_ext_and_validators {
            continue;
        }
        let mut b = Env::extend(&base);
        for d in input["decls"].as_array().into_iter().flatten() {
            let name = d["name"].as_str().unwrap_or_default();
            let ty = parse_decl_type(d["type"].as_str().unwrap_or_default());
            b.add_variable(name, ty).expect("distinct decls");
        }
        let env = b.build();
        let expr = input["expr"].as_str().unwrap_or_default();
        let want_issues = case["output"]["issues"].as_str().unwrap_or_default();
        let want_type = case["output"]["type"].as_str().unwrap_or_default();
        let (issues, ty) = match compile(&env, expr) {
            Ok(c) => (String::new(), c.result_type().to_string()),
            Err(i) => (i.to_display_string(), String::new()),
        };
        tally.add(
            input["id"].as_str().unwrap_or_default(),
            want_issues,
            &issues,
            issues == want_issues && ty == want_type,
            || {
                format!(
                    "{}: {expr:?}\n  want: {want_issues:?} {want_type:?}\n  got:  {issues:?} {ty:?}",
                    input["id"]
                )
            },
        );
    }
    // Exact counts: a case that stops being compared, or a new difference, fails here.
    tally.assert(
        "extension library cases",
        (571, 55, 1),
        &["std-1", "std-58"],
    );
}
