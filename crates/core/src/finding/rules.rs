//! The one table of rules: each finding's stable id, name, description and default severity
//! (SARIF's `rules`, the editor's diagnostic codes, the ids suppressions and `.vapcheck.yaml`
//! name; docs/ci.md lists them).

use crate::webhooks::Practice;

/// The rule of a finding: its SARIF `ruleId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// kube-apiserver (or the policy engine) rejects the object on create (or update).
    Rejected,
    /// A static-manifest folder kube-apiserver does not load.
    StaticManifests,
    /// A document that does not decode (not YAML or JSON, not a Kubernetes object, a field
    /// of a checked kind with a value of the wrong type) or a file that cannot be read: the
    /// other documents are checked, this one is not.
    NotDecoded,
    /// A type-checking warning: the expression fails for a matched kind.
    TypeWarning,
    /// Something the policy matches was not type-checked (wildcard, subresource, kind limit,
    /// no mapping, no schema): nothing is known about its expressions for it.
    KindNotChecked,
    /// An expression errors at admission on valid objects of a matched kind (an absent
    /// field or map key, a null `object` or `oldObject`; docs/runtime-safety.md).
    RuntimeError,
    /// A webhook configuration: kube-apiserver's create-time warning or a documented practice
    /// it breaks (docs/webhooks.md).
    Webhook(Practice),
}

/// A finding's severity: SARIF's `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// `error`.
    Error,
    /// `warning`.
    Warning,
    /// `note`.
    Note,
}

impl Severity {
    /// SARIF's `level`: `error`, `warning` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// What kind of trouble a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// kube-apiserver refuses the object on create or update (HTTP 422): it is never stored.
    RejectedOnCreate,
    /// The policy engine (Gatekeeper, Kyverno) refuses the object when it is added.
    RejectedByEngine(&'static str),
    /// kube-apiserver does not start with the static-manifest folder.
    NotLoaded,
    /// The document is not read at all.
    NotDecoded,
    /// The expression fails at admission for a matched kind (its type check fails).
    FailsAtAdmission,
    /// Nothing is known of the expressions for something the policy matches.
    NotChecked,
    /// Nothing of the policy could be type-checked (its `TypeChecked` condition is `False`:
    /// no schema could be fetched, nothing it matches could be checked); the controller's
    /// findings only ([`super::produce_status`]).
    NotTypeChecked,
    /// The expression type-checks but errors at admission on valid objects.
    ErrorsOnValidObjects,
    /// What a webhook configuration will do beyond its verdict.
    Webhook,
}

impl Rule {
    /// The stable rule id.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Rejected => "VAP001",
            Rule::StaticManifests => "VAP002",
            Rule::NotDecoded => "VAP003",
            Rule::TypeWarning => "VAP100",
            Rule::KindNotChecked => "VAP101",
            Rule::RuntimeError => "VAP110",
            Rule::Webhook(p) => p.id(),
        }
    }

    /// SARIF's `name`.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Rejected => "RejectedByKubeApiserver",
            Rule::StaticManifests => "StaticManifestsNotLoaded",
            Rule::NotDecoded => "DocumentNotDecoded",
            Rule::TypeWarning => "ExpressionTypeWarning",
            Rule::KindNotChecked => "KindNotChecked",
            Rule::RuntimeError => "ErrorsOnValidObjects",
            Rule::Webhook(p) => p.name(),
        }
    }

    /// SARIF's `shortDescription`.
    pub fn description(self) -> &'static str {
        match self {
            Rule::Rejected => {
                "kube-apiserver rejects the object: it is never stored (HTTP 422 on create or update)."
            }
            Rule::StaticManifests => {
                "kube-apiserver does not load the static-manifest folder: it does not start with it."
            }
            Rule::NotDecoded => {
                "A document does not decode (it is not YAML or JSON, not a Kubernetes object, or a field of a kind vapcheck checks has a value of the wrong type), or a file cannot be read: it is not checked, and cannot be created as written."
            }
            Rule::TypeWarning => {
                "An expression does not type-check against a kind the policy matches: it fails at admission time for that kind."
            }
            Rule::KindNotChecked => {
                "Something the policy matches could not be type-checked, so nothing is known about its expressions for it."
            }
            Rule::RuntimeError => {
                "An expression type-checks but errors at admission on valid objects of a matched kind (a field or map key they may omit, a null object): the failure policy then denies or skips those requests."
            }
            Rule::Webhook(p) => p.description(),
        }
    }

    /// The default severity of its findings.
    pub fn severity(self) -> Severity {
        match self {
            Rule::Rejected | Rule::StaticManifests | Rule::NotDecoded | Rule::RuntimeError => {
                Severity::Error
            }
            Rule::TypeWarning | Rule::Webhook(_) => Severity::Warning,
            Rule::KindNotChecked => Severity::Note,
        }
    }

    /// SARIF's `defaultConfiguration.level`.
    pub fn level(self) -> &'static str {
        self.severity().as_str()
    }

    /// SARIF's `helpUri`, for the rules that have one.
    pub fn help(self) -> Option<String> {
        match self {
            Rule::Webhook(p) => Some(p.help_uri()),
            _ => None,
        }
    }

    /// In SARIF's `rules` order (`ruleIndex`): new rules are appended so that the indexes of
    /// the others do not move.
    pub const ALL: [Rule; 14] = [
        Rule::Rejected,
        Rule::StaticManifests,
        Rule::TypeWarning,
        Rule::KindNotChecked,
        Rule::RuntimeError,
        Rule::Webhook(Practice::ALL[0]),
        Rule::Webhook(Practice::ALL[1]),
        Rule::Webhook(Practice::ALL[2]),
        Rule::NotDecoded,
        Rule::Webhook(Practice::ALL[3]),
        Rule::Webhook(Practice::ALL[4]),
        Rule::Webhook(Practice::ALL[5]),
        Rule::Webhook(Practice::ALL[6]),
        Rule::Webhook(Practice::ALL[7]),
    ];

    /// Its index in [`Rule::ALL`] (SARIF's `ruleIndex`).
    pub fn index(self) -> usize {
        Rule::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules a suppression may name are the rules.
    #[test]
    fn suppressible_rules_are_the_rules() {
        let mut ids: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        ids.sort_unstable();
        assert_eq!(ids, crate::suppress::RULE_IDS);
    }

    /// docs/architecture.md's rules table is `Rule::ALL`: one row per rule, in order, with
    /// its index, id, name and default level.
    #[test]
    fn the_rules_table_in_the_docs_is_the_rules() {
        let doc = include_str!("../../../../docs/architecture.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains(" | VAP"))
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        assert_eq!(rows.len(), Rule::ALL.len());
        for (i, (row, rule)) in rows.iter().zip(Rule::ALL).enumerate() {
            let index = i.to_string();
            assert_eq!(
                row[1..5],
                [index.as_str(), rule.id(), rule.name(), rule.level()],
                "row {i}"
            );
        }
    }
}
