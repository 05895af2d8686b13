//! The formats of `vapcheck check`, one emitter each over the findings
//! ([`crate::finding::Finding`]) and the checked objects: text for humans (`text`), the
//! entries of `-o json` (`json`) and `-o yaml` (`yaml`) with their schema (`entries`), and
//! the formats CI systems read: GitHub Actions workflow commands (`github`), SARIF 2.1.0
//! (`sarif`) and JUnit XML (`junit`); and what they share: the title and message of a
//! finding, its fingerprint, and what a run marks on it ([`Marks`]). The findings are placed
//! in the source files by [`locate`].

mod entries;
mod github;
mod json;
mod junit;
pub mod locate;
mod sarif;
mod text;
mod yaml;

pub use github::{render_github, render_github_marked};
pub use json::{render_json, render_json_suppressed};
pub use junit::{render_junit, render_junit_marked};
pub use locate::findings;
pub use sarif::{render_sarif, render_sarif_baselined, render_sarif_marked};
pub use text::{render_suppressed_text, render_text, use_colour};
pub use yaml::{render_yaml, render_yaml_suppressed};

use super::suppressed::{Level, RuleSettings, Suppression};
use crate::finding::{Class, Finding, Rule};

/// The title line of a finding.
pub(super) fn title(f: &Finding) -> String {
    let rejected_by;
    let what = match f.rule {
        Rule::Rejected => {
            let by = match f.class {
                Class::RejectedByEngine(engine) => engine,
                _ => "kube-apiserver",
            };
            rejected_by = format!("rejected by {by}");
            rejected_by.as_str()
        }
        Rule::StaticManifests => "static manifests not loaded",
        Rule::NotDecoded => "not decoded",
        Rule::TypeWarning => "type-checking warning",
        Rule::KindNotChecked => "not type-checked",
        Rule::RuntimeError => "errors on valid objects",
        Rule::Webhook(_) => "webhook",
    };
    if f.object.kind.is_empty() || f.object.name.is_empty() {
        // A document that does not decode may have neither.
        let kind = if f.object.kind.is_empty() {
            "document"
        } else {
            f.object.kind
        };
        let name = if f.object.name.is_empty() { "" } else { " " };
        return format!("{kind}{name}{}: {what}", f.object.name);
    }
    match f.matched_kind() {
        Some(k) if !k.is_empty() => format!("{} {}: {what} ({k})", f.object.kind, f.object.name),
        _ => format!("{} {}: {what}", f.object.kind, f.object.name),
    }
}

/// The message with the field it is about (causes already start with it).
pub(super) fn full_message(f: &Finding) -> String {
    if f.field_ref.is_empty() || f.message.starts_with(&format!("{}: ", f.field_ref)) {
        f.message.clone()
    } else {
        format!("{}: {}", f.field_ref, f.message)
    }
}

/// A finding's message as SARIF's `message.text` gives it: its title, the field and the text.
pub fn message_text(f: &Finding) -> String {
    format!("{}: {}", title(f), full_message(f))
}

/// `N finding(s) suppressed`.
pub fn suppressed_count(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} finding{s} suppressed")
}

/// A fingerprint that does not move when unrelated text moves: the rule, the object, the
/// field, the matched kind and the message (not the line); for a document that does not
/// decode, also its file.
pub fn fingerprint(f: &Finding) -> String {
    // FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut parts = vec![
        f.rule.id(),
        f.object.kind,
        &f.object.name,
        &f.field_ref,
        f.matched_kind().unwrap_or_default(),
        &f.message,
    ];
    // A document that does not decode may have no kind and no name: its file tells it apart.
    if f.rule == Rule::NotDecoded {
        parts.push(f.file());
    }
    for part in parts {
        for b in part.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The key of [`fingerprint`] in SARIF `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "vapcheckFinding/v1";

/// What a run says about each finding beyond the finding: whether it is in the baseline,
/// whether it is suppressed ([`super::suppressed`]) and the levels `.vapcheck.yaml` sets.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    /// `baselined[i]`: whether `findings[i]` is in the baseline.
    pub baselined: Option<&'a [bool]>,
    /// `suppressed[i]`: why `findings[i]` is suppressed.
    pub suppressed: Option<&'a [Option<Suppression>]>,
    /// The per-rule severities.
    pub settings: Option<&'a RuleSettings>,
}

impl Marks<'_> {
    /// The suppression of finding `i`.
    pub fn suppression(&self, i: usize) -> Option<&Suppression> {
        self.suppressed
            .and_then(|s| s.get(i))
            .and_then(Option::as_ref)
    }
    /// The level of `f`: the one `.vapcheck.yaml` sets, else its rule's.
    pub fn level(&self, f: &Finding) -> &'static str {
        self.settings
            .and_then(|s| s.level(f.rule))
            .and_then(Level::sarif)
            .unwrap_or(f.severity.as_str())
    }
}
