//! `vapcheck check` on webhook configurations: the match conditions' shared cost budget per
//! webhook, `matchPolicy: Exact` bypassed through the equivalent resource of another group,
//! and `namespaceObject` in a webhook's conditions on cluster-scoped kinds reported once (as
//! never bound). The same fixtures are replayed on kube-apiserver 1.37.1 by e2e_webhooks.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

fn binary() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vapcheck"));
    c.env_remove("KUBECONFIG");
    c
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("e2e/fixtures")
        .join(name)
}

/// `vapcheck check -o json <args>`: (exit code, entries).
fn check_json(args: &[&std::ffi::OsStr]) -> (Option<i32>, Vec<Value>) {
    let o = binary()
        .args(["check", "-o", "json"])
        .args(args)
        .output()
        .expect("vapcheck runs");
    let entries: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), entries)
}

fn entry<'a>(entries: &'a [Value], name: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no entry {name}: {entries:#?}"))
}

#[test]
fn match_conditions_share_one_budget_per_webhook() {
    let crd = fixture("notes-crd.yaml");
    let hooks = fixture("webhook-budget.yaml");
    let (code, entries) = check_json(&["--crd".as_ref(), crd.as_os_str(), hooks.as_os_str()]);
    // Cost estimates never fail the run.
    assert_eq!(code, Some(0), "{entries:#?}");
    assert_eq!(entries.len(), 2);
    let note = "vapcheck.example.com/v1, Kind=Note";
    // Each condition: ceil((1 + 4 × 112500) × 0.1) × ceil(80 × 0.25) = 900,020 for `matches`,
    // plus the selections of `object.spec.text`.
    let per_condition = 900_020 + 3;
    for (name, conditions) in [("wh-budget-over", 12u64), ("wh-budget-under", 2)] {
        let cost = &entry(&entries, name)["status"]["cost"];
        let expressions = cost["expressions"].as_array().expect("estimates");
        assert_eq!(expressions.len() as u64, conditions, "{name}: {cost:#}");
        for (j, e) in expressions.iter().enumerate() {
            assert_eq!(
                e["fieldRef"],
                format!("webhooks[0].matchConditions[{j}].expression")
            );
            assert_eq!(e["max"], per_condition, "{name}: {e}");
        }
        assert_eq!(
            cost["budgets"],
            json!([{
                "fieldRef": "webhooks[0].matchConditions",
                "gvks": [note],
                "budget": "RuntimeCELCostBudgetMatchConditions",
                "limit": 2_500_000,
                "max": per_condition * conditions,
                "expressions": conditions,
            }]),
            "{name}"
        );
        let want = if conditions == 12 {
            json!([{
                "fieldRef": "webhooks[0].matchConditions",
                "gvks": [note],
                "limit": "RuntimeCELCostBudgetMatchConditions",
                "limitValue": 2_500_000,
                "estimate": per_condition * 12,
            }])
        } else {
            json!([])
        };
        assert_eq!(cost["findings"], want, "{name}");
    }

    let o = binary()
        .arg("check")
        .arg("--crd")
        .arg(&crd)
        .arg(&hooks)
        .output()
        .expect("vapcheck runs");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = format!(
        "  cost: webhooks[0].matchConditions on {note}: worst-case cost 10,800,276 exceeds the \
         budget of the match conditions (RuntimeCELCostBudgetMatchConditions) of 2,500,000\n"
    );
    assert_eq!(text.matches("  cost: ").count(), 1, "{text}");
    assert!(text.contains(&line), "{text}");
}

#[test]
fn exact_webhook_on_core_events_is_bypassed_through_events_k8s_io() {
    static EMPTY: Value = Value::Array(Vec::new());
    let hooks = fixture("webhook-exact-events.yaml");
    let (code, entries) = check_json(&[hooks.as_os_str()]);
    assert_eq!(code, Some(1), "{entries:#?}");
    let advice: Vec<(&str, &Value)> = entries
        .iter()
        .map(|e| (e["name"].as_str().unwrap_or_default(), &e["advice"]))
        // An entry without findings has no `advice`.
        .map(|(n, a)| (n, if a.is_null() { &EMPTY } else { a }))
        .collect();
    assert_eq!(
        advice,
        [
            (
                "wh-events-exact",
                &json!([{
                    "rule": "VAP123",
                    "fieldRef": "webhooks[0].rules[0]",
                    "message": "matchPolicy is Exact and events is also served as events.k8s.io/v1 (the same objects, stored once): requests through it are not sent to the webhook; use matchPolicy Equivalent or name every group and version",
                }])
            ),
            ("wh-events-equivalent", &json!([])),
        ]
    );
}

#[test]
fn namespace_object_on_cluster_scoped_kinds_is_reported_once_as_never_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ns.yaml");
    std::fs::write(
        &file,
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: wh-namespaces}
webhooks:
- name: namespaces.vapcheck.example.com
  clientConfig: {url: "https://127.0.0.1:1/validate"}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces, nodes]}
  sideEffects: None
  admissionReviewVersions: [v1]
  matchConditions:
  - name: c
    expression: "namespaceObject.metadata.name == 'x'"
"#,
    )
    .expect("write");
    let (code, entries) = check_json(&[file.as_os_str()]);
    assert_eq!(code, Some(1), "{entries:#?}");
    let runtime = entries[0]["status"]["runtime"]
        .as_array()
        .expect("runtime findings");
    let found: Vec<(&str, &str, &str)> = runtime
        .iter()
        .map(|r| {
            (
                r["fieldRef"].as_str().unwrap_or_default(),
                r["class"].as_str().unwrap_or_default(),
                r["error"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [(
            "webhooks[0].matchConditions[0].expression",
            "unbound",
            "no such key: metadata"
        )]
    );
}
