//! Output of `vapcheck check`: JSON, YAML, or text for humans.

use k8s_openapi::api::admissionregistration::v1::TypeChecking;
use serde::Serialize;

use crate::policy::{PolicyCondition, PolicyStatus};

use super::input::Origin;

/// One checked policy.
#[derive(Debug, Clone)]
pub struct CheckedPolicy {
    /// `metadata.name` (empty when missing).
    pub name: String,
    /// Where it was read from.
    pub origin: Origin,
    /// What vapcheck computed.
    pub status: PolicyStatus,
}

/// The `-o json|yaml` entry: `{"name": .., "status": {"typeChecking": .., "conditions": [..]}}`.
#[derive(Debug, Serialize)]
pub struct OutputEntry<'a> {
    /// Policy name.
    pub name: &'a str,
    /// The computed status.
    pub status: OutputStatus<'a>,
}

/// The `status` of an [`OutputEntry`]. `typeChecking` is `{}` without warnings.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputStatus<'a> {
    /// `expressionWarnings`, exactly as upstream would write them.
    pub type_checking: TypeChecking,
    /// `TypeChecked` and `ExpressionsValid` (without `lastTransitionTime`).
    pub conditions: &'a [PolicyCondition],
}

/// The entries for `-o json` and `-o yaml`, in input order.
pub fn entries(policies: &[CheckedPolicy]) -> Vec<OutputEntry<'_>> {
    policies
        .iter()
        .map(|p| OutputEntry {
            name: &p.name,
            status: OutputStatus {
                type_checking: p.status.type_checking(),
                conditions: &p.status.conditions,
            },
        })
        .collect()
}

/// `-o json`: a pretty-printed JSON array and a final newline.
pub fn render_json(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_json::to_string_pretty(&entries(policies))
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// `-o yaml`: the same array as YAML.
pub fn render_yaml(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_saphyr::to_string(&entries(policies)).map_err(|e| e.to_string())
}

/// Whether to colour text output: only on a terminal, and never when `NO_COLOR` is set to a
/// non-empty value (<https://no-color.org>).
pub fn use_colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `-o text`: per policy a header (name, origin, verdict), each warning's fieldRef and text
/// (indented), any kinds not checked, then a summary line.
pub fn render_text(policies: &[CheckedPolicy], colour: bool) -> String {
    let st = Style { on: colour };
    let mut out = String::new();
    let mut with_warnings = 0usize;
    for p in policies {
        let name = if p.name.is_empty() {
            "<unnamed>"
        } else {
            p.name.as_str()
        };
        let n = p.status.expression_warnings.len();
        let verdict = if n == 0 {
            st.green("ok")
        } else {
            st.red(&plural(n, "warning"))
        };
        out.push_str(&format!(
            "{} {}: {}\n",
            st.bold(name),
            st.dim(&format!("({})", p.origin)),
            verdict
        ));
        if n > 0 {
            with_warnings += 1;
        }
        for w in &p.status.expression_warnings {
            out.push_str(&format!("  {}\n", st.yellow(&w.field_ref)));
            for line in w.warning.trim_end_matches('\n').split('\n') {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        for c in &p.status.conditions {
            if c.reason != "AllKindsChecked" && c.type_ == "TypeChecked" {
                out.push_str(&format!(
                    "  {}\n",
                    st.dim(&format!("{} ({}): {}", c.type_, c.reason, c.message))
                ));
            }
        }
    }
    let count = if policies.len() == 1 {
        "1 policy".to_owned()
    } else {
        format!("{} policies", policies.len())
    };
    out.push_str(&format!("{count} checked, {with_warnings} with warnings\n"));
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;

    use super::*;
    use crate::policy::status::{expressions_valid_condition, type_checked_condition};
    use crate::policy::{Gvk, SkipReason, SkipSubject, Skipped};

    pub(crate) fn sample() -> Vec<CheckedPolicy> {
        let kinds = [Gvk::new("apps", "v1", "Deployment")];
        let warnings = vec![ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n".into(),
        }];
        let skipped = [Skipped {
            subject: SkipSubject::Rule(1),
            reason: SkipReason::Wildcard,
        }];
        let bad = PolicyStatus {
            observed_generation: Some(2),
            conditions: vec![
                type_checked_condition(Some(2), &kinds, &skipped, false),
                expressions_valid_condition(Some(2), &warnings, 1, true),
            ],
            expression_warnings: warnings,
            checked_kinds: kinds.to_vec(),
            skipped: skipped.to_vec(),
        };
        let good = PolicyStatus {
            observed_generation: None,
            conditions: vec![
                type_checked_condition(None, &kinds, &[], false),
                expressions_valid_condition(None, &[], 1, true),
            ],
            checked_kinds: kinds.to_vec(),
            ..PolicyStatus::default()
        };
        vec![
            CheckedPolicy {
                name: "bad".into(),
                origin: Origin {
                    source: "p.yaml".into(),
                    document: 1,
                    item: None,
                },
                status: bad,
            },
            CheckedPolicy {
                name: "good".into(),
                origin: Origin {
                    source: "p.yaml".into(),
                    document: 2,
                    item: None,
                },
                status: good,
            },
        ]
    }

    #[test]
    fn json_shape() {
        insta::assert_snapshot!(render_json(&sample()).unwrap());
    }

    #[test]
    fn yaml_is_the_same_data_as_json() {
        let yaml = render_yaml(&sample()).unwrap();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let from_json: serde_json::Value =
            serde_json::from_str(&render_json(&sample()).unwrap()).unwrap();
        assert_eq!(from_yaml, from_json);
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn text_plain_and_coloured() {
        insta::assert_snapshot!(render_text(&sample(), false));
        let coloured = render_text(&sample(), true);
        assert!(coloured.contains("\x1b[33mspec.validations[0].expression\x1b[0m"));
        assert!(!render_text(&sample(), false).contains('\x1b'));
    }

    #[test]
    fn colour_only_on_terminals_without_no_color() {
        use std::ffi::OsStr;
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some(OsStr::new(""))));
        assert!(!use_colour(true, Some(OsStr::new("1"))));
        assert!(!use_colour(false, None));
    }
}

#[cfg(test)]
mod proptests {
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// YAML output carries exactly the same data as JSON output for any warning text
        /// (leading spaces, trailing newlines, quotes, unicode, tabs).
        #[test]
        fn yaml_round_trips_any_warning(warning in "(?s)[ \\t\\n'\":#|>a-z．＾^.-]{0,60}", name in "[a-z:# -]{0,10}") {
            let status = PolicyStatus {
                expression_warnings: vec![ExpressionWarning { field_ref: "spec.validations[0].expression".into(), warning }],
                ..PolicyStatus::default()
            };
            let policies = [CheckedPolicy { name, origin: Origin { source: "s".into(), document: 1, item: None }, status }];
            let yaml = render_yaml(&policies).unwrap();
            let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            let from_json: serde_json::Value = serde_json::from_str(&render_json(&policies).unwrap()).unwrap();
            prop_assert_eq!(from_yaml, from_json);
        }
    }
}
