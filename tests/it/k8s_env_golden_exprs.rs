//! Replays the `std` cases of the oracle's golden file `tests/golden/upstream-exprs-1.37.jsonl`
//! that use the cel-go extension libraries at the versions Kubernetes enables them
//! (`strings:2`, `sets`, `lists:3`, `twovar`, plus Kubernetes' four AST validators) against
//! the standard environment extended with this crate's versions of those libraries, and
//! compares the issues text (byte for byte) or the deduced type.


use crate::golden_support::{PARSER_MESSAGES, golden};

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
    let mut compared = 0;
    let mut parser_cases = 0;
    let mut mismatches = Vec::new();
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
        if PARSER_MESSAGES.iter().any(|m| want_issues.contains(m)) {
            parser_cases += 1;
            continue;
        }
        let (issues, ty) = match compile(&env, expr) {
            Ok(c) => (String::new(), c.result_type().to_string()),
            Err(i) => (i.to_display_string(), String::new()),
        };
        if issues != want_issues || ty != want_type {
            mismatches.push(format!(
                "{}: {expr:?}\n  want: {want_issues:?} {want_type:?}\n  got:  {issues:?} {ty:?}",
                input["id"]
            ));
        }
        compared += 1;
    }
    println!("compared {compared} cases, skipped {parser_cases} parser cases");
    // Exact counts: a case that stops being compared fails here. Skipped are only the cases
    // whose expected text (cel-go's) is a parser message.
    assert_eq!(compared, 571, "cases compared");
    assert_eq!(parser_cases, 58, "parser cases skipped");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} cases differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
