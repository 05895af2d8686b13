//! `-o sarif`: a SARIF 2.1.0 log of the findings, with the rules table
//! ([`crate::finding::Rule`]).

use serde_json::{Value, json};

use super::{FINGERPRINT_KEY, Marks, fingerprint, full_message, title};
use crate::finding::{FIX_DESCRIPTION, Finding, Rule};

/// `-o sarif`: a SARIF 2.1.0 log with one run.
pub fn render_sarif(findings: &[Finding]) -> Result<String, String> {
    render_sarif_baselined(findings, None)
}

/// [`render_sarif`] against a baseline: `baselined[i]` tells whether `findings[i]` is in it
/// (SARIF `baselineState` `unchanged`, else `new`).
pub fn render_sarif_baselined(
    findings: &[Finding],
    baselined: Option<&[bool]>,
) -> Result<String, String> {
    render_sarif_marked(
        findings,
        Marks {
            baselined,
            ..Marks::default()
        },
    )
}

/// [`render_sarif`] with [`Marks`]: `baselineState` (`unchanged` or `new`), `suppressions`
/// (kind `inSource` for an annotation or a comment, `external` for the configuration, the
/// reason as `justification`) and the levels set by the configuration.
pub fn render_sarif_marked(findings: &[Finding], marks: Marks<'_>) -> Result<String, String> {
    let baselined = marks.baselined;
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            let mut rule = json!({
                "id": r.id(),
                "name": r.name(),
                "shortDescription": {"text": r.description()},
                "defaultConfiguration": {"level": r.level()}
            });
            if let Rule::Webhook(p) = r {
                rule["helpUri"] = json!(p.help_uri());
            }
            rule
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut region = json!({});
            if let Some(p) = f.position {
                region = json!({"startLine": p.line, "startColumn": p.column});
            }
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(f.file())},
                }
            });
            if f.position.is_some() {
                location["physicalLocation"]["region"] = region;
            }
            let mut properties = json!({"kind": f.object.kind, "name": f.object.name});
            if !f.field_ref.is_empty() {
                properties["fieldRef"] = json!(f.field_ref);
            }
            if let Some(k) = &f.matched_kind() {
                properties["matchedKind"] = json!(k);
            }
            let mut result = json!({
                "ruleId": f.rule.id(),
                "ruleIndex": f.rule.index(),
                "level": marks.level(f),
                "message": {"text": format!("{}: {}", title(f), full_message(f))},
                "locations": [location],
                "partialFingerprints": {FINGERPRINT_KEY: fingerprint(f)},
                "properties": properties
            });
            if let Some(old) = baselined.and_then(|b| b.get(i)) {
                result["baselineState"] = json!(if *old { "unchanged" } else { "new" });
            }
            if let Some(sup) = marks.suppression(i) {
                let mut suppression = json!({"kind": sup.by.sarif_kind(), "status": "accepted"});
                if let Some(reason) = &sup.reason {
                    suppression["justification"] = json!(reason);
                }
                suppression["properties"] = json!({"by": sup.by.as_str(), "entry": sup.entry});
                result["suppressions"] = json!([suppression]);
            }
            if let Some(fix) = f.file_fix() {
                result["fixes"] = json!([{
                    "description": {"text": FIX_DESCRIPTION},
                    "artifactChanges": [{
                        "artifactLocation": {"uri": uri(f.file())},
                        "replacements": [{
                            "deletedRegion": {
                                "startLine": fix.start.line,
                                "startColumn": fix.start.column,
                                "endLine": fix.end.line,
                                "endColumn": fix.end.column
                            },
                            "insertedContent": {"text": fix.text}
                        }]
                    }]
                }]);
            }
            result
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "vapcheck",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules
            }},
            "columnKind": "unicodeCodePoints",
            "results": results
        }]
    });
    serde_json::to_string_pretty(&log)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// A relative file name as a URI reference (`%` and spaces escaped); `<stdin>` stays.
fn uri(file: &str) -> String {
    let mut out = String::new();
    for c in file.chars() {
        match c {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            '#' => out.push_str("%23"),
            '?' => out.push_str("%3F"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            _ => out.push(c),
        }
    }
    out
}
