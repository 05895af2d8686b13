//! Label selectors as the admission plugin evaluates them: parsing
//! (`metav1.LabelSelectorAsSelector`), matching (`labels.Requirement.Matches`) and a
//! conservative "can these two selectors both match one object?" test.
//!
//! Upstream: `k8s.io/apimachinery` v0.37.1 `pkg/apis/meta/v1/helpers.go`
//! (`LabelSelectorAsSelector`) and `pkg/labels/selector.go` (`NewRequirement`,
//! `Requirement.Matches`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::apiserver::names::{is_label_value, is_qualified_name};

/// One parsed requirement (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key in (values)`; `matchLabels` entries are `In` with one value (`selection.Equals`
    /// matches the same objects).
    In(String, BTreeSet<String>),
    /// `key notin (values)`: also true when the key is absent.
    NotIn(String, BTreeSet<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }

    /// `Requirement.Matches` (selector.go).
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

/// A parsed selector. `LabelSelectorAsSelector(nil)` is `labels.Nothing()`; an empty selector
/// is `labels.Everything()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Matches no object (a nil selector).
    Nothing,
    /// Every requirement must hold (none: every object).
    All(Vec<Requirement>),
}

impl Selector {
    /// Whether the selector matches every object.
    pub fn is_everything(&self) -> bool {
        matches!(self, Selector::All(r) if r.is_empty())
    }

    /// Whether an object with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::All(rs) => rs.iter().all(|r| r.matches(labels)),
        }
    }
}

/// `metav1.LabelSelectorAsSelector`. `Err` names the field under `path` and what is wrong
/// (the upstream texts: `"Foo" is not a valid label selector operator`, `for 'in', 'notin'
/// operators, values set can't be empty`, `values set must be empty for exists and does not
/// exist`, and the label key/value validation).
pub fn parse(selector: Option<&LabelSelector>, path: &str) -> Result<Selector, String> {
    let Some(s) = selector else {
        return Ok(Selector::Nothing);
    };
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let key_errors = |key: &str, at: &str, errs: &mut Vec<String>| {
        for m in is_qualified_name(key) {
            errs.push(format!("{at}: Invalid value: {key:?}: {m}"));
        }
    };
    for (k, v) in s.match_labels.iter().flatten() {
        let at = format!("{path}.matchLabels");
        key_errors(k, &at, &mut errs);
        for m in is_label_value(v) {
            errs.push(format!("{at}[{k}]: Invalid value: {v:?}: {m}"));
        }
        out.push(Requirement::In(k.clone(), BTreeSet::from([v.clone()])));
    }
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        key_errors(&e.key, &format!("{at}.key"), &mut errs);
        for v in e.values.iter().flatten() {
            for m in is_label_value(v) {
                errs.push(format!("{at}.values: Invalid value: {v:?}: {m}"));
            }
        }
        let r = match e.operator.as_str() {
            "In" | "NotIn" if !has_values => {
                errs.push(format!(
                    "{at}.values: for 'in', 'notin' operators, values set can't be empty"
                ));
                continue;
            }
            "In" => Requirement::In(e.key.clone(), values),
            "NotIn" => Requirement::NotIn(e.key.clone(), values),
            "Exists" | "DoesNotExist" if has_values => {
                errs.push(format!(
                    "{at}.values: values set must be empty for exists and does not exist"
                ));
                continue;
            }
            "Exists" => Requirement::Exists(e.key.clone()),
            "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
            other => {
                errs.push(format!(
                    "{at}.operator: {other:?} is not a valid label selector operator"
                ));
                continue;
            }
        };
        out.push(r);
    }
    if errs.is_empty() {
        Ok(Selector::All(out))
    } else {
        Err(errs.join("; "))
    }
}

/// Whether two requirements on the same key can never both hold (so no object satisfies
/// both selectors). Only certain conflicts count; anything else may overlap.
fn conflict(a: &Requirement, b: &Requirement) -> bool {
    use Requirement::*;
    if a.key() != b.key() {
        return false;
    }
    match (a, b) {
        (In(_, x), In(_, y)) => x.is_disjoint(y),
        (In(_, x), NotIn(_, y)) | (NotIn(_, y), In(_, x)) => x.is_subset(y),
        (In(_, _) | Exists(_), DoesNotExist(_)) | (DoesNotExist(_), In(_, _) | Exists(_)) => true,
        _ => false,
    }
}

/// Whether some label set could satisfy both selectors: `false` only when a pair of
/// requirements conflicts outright (or either selects nothing). `true` means "maybe".
pub fn may_overlap(a: &Selector, b: &Selector) -> bool {
    match (a, b) {
        (Selector::Nothing, _) | (_, Selector::Nothing) => false,
        (Selector::All(x), Selector::All(y)) => !x
            .iter()
            .chain(y.iter())
            .any(|r| x.iter().chain(y.iter()).any(|s| conflict(r, s))),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn sel(labels: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            match_expressions: (!exprs.is_empty()).then_some(exprs),
        }
    }

    fn labels(l: &[(&str, &str)]) -> BTreeMap<String, String> {
        l.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// helpers.go `LabelSelectorAsSelector`: nil is Nothing, empty is Everything.
    #[test]
    fn nil_selects_nothing_and_empty_everything() {
        assert_eq!(parse(None, "s").unwrap(), Selector::Nothing);
        let all = parse(Some(&LabelSelector::default()), "s").unwrap();
        assert!(all.is_everything());
        assert!(all.matches(&labels(&[])));
    }

    /// selector.go `Requirement.Matches`: NotIn holds for an absent key.
    #[test]
    fn matching_follows_requirement_matches() {
        let s = parse(
            Some(&sel(
                &[("app", "web")],
                vec![
                    expr("tier", "NotIn", &["db"]),
                    expr("team", "Exists", &[]),
                    expr("legacy", "DoesNotExist", &[]),
                ],
            )),
            "s",
        )
        .unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("team", "a"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("team", "a"), ("legacy", "")])));
    }

    /// helpers.go: an unknown operator is an error; selector.go `NewRequirement`: empty `In`
    /// values and values on `Exists` are errors.
    #[test]
    fn bad_selectors_name_the_field() {
        let e = parse(Some(&sel(&[], vec![expr("a", "Equals", &["x"])])), "spec.x").unwrap_err();
        assert_eq!(
            e,
            "spec.x.matchExpressions[0].operator: \"Equals\" is not a valid label selector operator"
        );
        let e = parse(Some(&sel(&[], vec![expr("a", "In", &[])])), "p").unwrap_err();
        assert!(e.contains("values set can't be empty"), "{e}");
        let e = parse(Some(&sel(&[], vec![expr("a", "Exists", &["x"])])), "p").unwrap_err();
        assert!(e.contains("values set must be empty"), "{e}");
        let e = parse(Some(&sel(&[("bad key!", "v")], vec![])), "p").unwrap_err();
        assert!(
            e.starts_with("p.matchLabels: Invalid value: \"bad key!\""),
            "{e}"
        );
    }

    #[test]
    fn overlap_is_false_only_for_outright_conflicts() {
        let p = |l: &[(&str, &str)], e| parse(Some(&sel(l, e)), "s").unwrap();
        assert!(!may_overlap(
            &p(&[("env", "prod")], vec![]),
            &p(&[("env", "dev")], vec![])
        ));
        assert!(!may_overlap(
            &p(&[], vec![expr("env", "Exists", &[])]),
            &p(&[], vec![expr("env", "DoesNotExist", &[])])
        ));
        assert!(!may_overlap(
            &p(&[("env", "prod")], vec![]),
            &p(&[], vec![expr("env", "NotIn", &["prod", "dev"])])
        ));
        assert!(may_overlap(
            &p(&[("env", "prod")], vec![]),
            &p(&[("team", "a")], vec![])
        ));
        assert!(may_overlap(
            &p(&[], vec![expr("env", "In", &["prod", "dev"])]),
            &p(&[("env", "dev")], vec![])
        ));
        assert!(!may_overlap(&Selector::Nothing, &p(&[], vec![])));
    }
}
