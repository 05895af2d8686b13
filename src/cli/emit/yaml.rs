//! `-o yaml`: the entries ([`super::entries`]) as YAML, the same data as `-o json`.

use super::super::output::CheckedPolicy;
use super::super::suppressed::Suppression;
use super::entries::{entries, entries_suppressed};
use crate::finding::Finding;

/// `-o yaml`: the array of `-o json` as YAML.
pub fn render_yaml(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_saphyr::to_string(&entries(policies)).map_err(|e| e.to_string())
}

/// `-o yaml` with the suppressed findings of each entry (`suppressed[i]`: of `findings[i]`).
pub fn render_yaml_suppressed(
    policies: &[CheckedPolicy],
    findings: &[Finding],
    suppressed: &[Option<Suppression>],
) -> Result<String, String> {
    serde_saphyr::to_string(&entries_suppressed(policies, findings, suppressed))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::super::output::tests::sample;
    use super::super::render_json;
    use super::*;

    #[test]
    fn yaml_is_the_same_data_as_json() {
        let yaml = render_yaml(&sample()).unwrap();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let from_json: serde_json::Value =
            serde_json::from_str(&render_json(&sample()).unwrap()).unwrap();
        assert_eq!(from_yaml, from_json);
        insta::assert_snapshot!(yaml);
    }
}

#[cfg(test)]
mod proptests {
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
    use proptest::prelude::*;

    use super::super::super::input::{Origin, POLICY_KIND};
    use super::super::super::output::ApiServerVerdict;
    use super::super::render_json;
    use super::*;
    use crate::policy::PolicyStatus;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// YAML output carries exactly the same data as JSON output for any warning text
        /// (leading spaces, trailing newlines, quotes, unicode, tabs).
        #[test]
        fn yaml_round_trips_any_warning(warning in "(?s)[ \\t\\n'\":#|>a-z．＾^.-]{0,60}", name in "[a-z:# -]{0,10}") {
            let status = PolicyStatus {
                expression_warnings: vec![ExpressionWarning { field_ref: "spec.validations[0].expression".into(), warning: warning.clone() }],
                ..PolicyStatus::default()
            };
            let policies = [CheckedPolicy::new(POLICY_KIND, name, Origin { source: "s".into(), document: 1, item: None }, ApiServerVerdict::new(37, false, vec![crate::finding::Cause::new("", warning.clone())]), Some(status))];
            let yaml = render_yaml(&policies).unwrap();
            let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            let from_json: serde_json::Value = serde_json::from_str(&render_json(&policies).unwrap()).unwrap();
            prop_assert_eq!(from_yaml, from_json);
        }
    }
}
