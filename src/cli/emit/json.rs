//! `-o json`: the entries ([`super::entries`]) as a pretty-printed JSON array.

use super::super::output::CheckedPolicy;
use super::super::suppressed::Suppression;
use super::entries::{entries, entries_suppressed};
use crate::finding::Finding;

/// `-o json`: a pretty-printed JSON array and a final newline.
pub fn render_json(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_json::to_string_pretty(&entries(policies))
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// `-o json` with the suppressed findings of each entry (`suppressed[i]`: of `findings[i]`).
pub fn render_json_suppressed(
    policies: &[CheckedPolicy],
    findings: &[Finding],
    suppressed: &[Option<Suppression>],
) -> Result<String, String> {
    serde_json::to_string_pretty(&entries_suppressed(policies, findings, suppressed))
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::super::output::tests::sample;
    use super::*;

    #[test]
    fn json_shape() {
        insta::assert_snapshot!(render_json(&sample()).unwrap());
    }
}
