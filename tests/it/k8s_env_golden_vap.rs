//! Replays the `vap` cases of the oracle's golden file `tests/golden/upstream-exprs-1.37.jsonl`
//! (expressions checked by the real 1.37.1 type checker for one GVK) that do not depend on the
//! kind's schema: neither the expression nor its variables mention `object`/`oldObject`, no
//! CRDs, and `params` has no resolvable schema. What remains exercises the admission
//! environment itself: `request`, `namespaceObject`, `authorizer`, `params` declared or not,
//! `variables` composition, and every library. Compared: the per-GVK warning text byte for
//! byte (without the `<gvk>: ` prefix and final newline), or the deduced type.

use crate::golden_support::{Tally, golden};

use vapcheck::k8s_env::{KindDecls, Params, PolicyEnv, Target};

/// Whether `text` uses the identifier `name` (not as part of a longer identifier).
fn mentions(text: &str, name: &str) -> bool {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    text.match_indices(name).any(|(i, _)| {
        let before = i.checked_sub(1).and_then(|j| bytes.get(j)).copied();
        let after = bytes.get(i + name.len()).copied();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// apimachinery `schema.ParseGroupVersion` + `WithKind` + `Empty`: whether a paramKind makes
/// `params` declared.
fn param_kind_declares_params(param_kind: &serde_json::Value) -> bool {
    let api_version = param_kind["apiVersion"].as_str().unwrap_or_default();
    let kind = param_kind["kind"].as_str().unwrap_or_default();
    let (group, version) = match api_version.matches('/').count() {
        _ if api_version.is_empty() || api_version == "/" => ("", ""),
        0 => ("", api_version),
        1 => api_version.split_once('/').unwrap_or(("", "")),
        _ => return false,
    };
    !(group.is_empty() && version.is_empty() && kind.is_empty())
}

#[test]
fn schema_independent_vap_cases_match_kcm() {
    let mut tally = Tally::default();
    for case in golden() {
        let input = &case["input"];
        let output = &case["output"];
        // No schema for the kind: upstream drops the GVK and checks nothing.
        if input["env"] != "vap" || input.get("crds").is_some() || output["schemaFound"] == false {
            continue;
        }
        let expr = input["expr"].as_str().unwrap_or_default();
        let want = output["warning"].as_str().unwrap_or_default();
        let variables: Vec<(String, String)> = input["variables"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                (
                    v["name"].as_str().unwrap_or_default().to_string(),
                    v["expression"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let all_text = std::iter::once(expr)
            .chain(variables.iter().map(|(_, e)| e.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        if mentions(&all_text, "object") || mentions(&all_text, "oldObject") {
            continue;
        }
        let params = if let Some(pk) = input.get("paramKind") {
            if output["paramsSchemaFound"] == true {
                continue;
            }
            if param_kind_declares_params(pk) {
                Params::Untyped
            } else {
                Params::Absent
            }
        } else if input.get("paramsGvk").is_some() {
            if output["paramsSchemaFound"] == true {
                continue;
            }
            Params::Untyped
        } else {
            Params::Absent
        };
        let mut env =
            PolicyEnv::new(Target::upstream(), KindDecls::untyped(params)).expect("env builds");
        env.add_variables(variables.iter().map(|(n, e)| (n.as_str(), e.as_str())));
        let (warning, ty) = match env.compile(expr) {
            Ok(c) => (String::new(), c.result_type().to_string()),
            Err(i) => (i.to_display_string(), String::new()),
        };
        let want_warning = want
            .split_once(": ")
            .map(|(_, rest)| rest.strip_suffix('\n').unwrap_or(rest))
            .unwrap_or("");
        let want_type = output["type"].as_str().unwrap_or_default();
        tally.add(
            input["id"].as_str().unwrap_or_default(),
            want_warning,
            &warning,
            warning == want_warning && (!want_warning.is_empty() || ty == want_type),
            || format!("{}: {expr:?} vars={variables:?}\n  want: {want_warning:?} {want_type:?}\n  got:  {warning:?} {ty:?}", input["id"]),
        );
    }
    // Exact counts: a case that stops being compared, or a new difference, fails here.
    tally.assert("schema-independent vap cases", (455, 54, 1), &["vap-1"]);
}
