//! Which policies depend on which API group-versions, so that a schema change re-checks only
//! the policies it can affect (pure).

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, MutatingAdmissionPolicy, ParamKind, ValidatingAdmissionPolicy,
};

use crate::policy::{Gvk, PolicyStatus};
use crate::schema::GroupVersion;

/// What one policy depends on. Kept for every policy for the life of the process, so stored
/// compactly (issue 17, memory): sorted, deduplicated boxed slices, not `BTreeSet`s (a
/// `BTreeSet` of one element allocates a whole node; at 5,000 policies the sets were 3.7 MiB
/// of the heap, docs/controller.md, "Memory").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// Group-versions of the kinds checked and of `paramKind`, each as `group/version` (core:
    /// `/v1`; a group name has no `/`).
    group_versions: Box<[Box<str>]>,
    /// API groups named by the match rules (`*` for any group): a group-version of such a
    /// group that appears, changes or disappears may change which kinds the policy matches.
    groups: Box<[Box<str>]>,
}

/// `items` sorted and deduplicated, as a boxed slice.
fn compact(items: BTreeSet<String>) -> Box<[Box<str>]> {
    items.into_iter().map(String::into_boxed_str).collect()
}

impl Dependencies {
    /// The dependencies of `policy` given the status computed for it.
    pub fn of(policy: &ValidatingAdmissionPolicy, status: &PolicyStatus) -> Dependencies {
        let spec = policy.spec.as_ref();
        Dependencies::from_parts(
            spec.and_then(|s| s.match_constraints.as_ref()),
            spec.and_then(|s| s.param_kind.as_ref()),
            status,
        )
    }

    /// The dependencies of a MutatingAdmissionPolicy given the status computed for it (the
    /// same rules as [`Dependencies::of`]: its match rules, paramKind and checked kinds).
    pub fn of_mutating(policy: &MutatingAdmissionPolicy, status: &PolicyStatus) -> Dependencies {
        let spec = policy.spec.as_ref();
        Dependencies::from_parts(
            spec.and_then(|s| s.match_constraints.as_ref()),
            spec.and_then(|s| s.param_kind.as_ref()),
            status,
        )
    }

    fn from_parts(
        constraints: Option<&MatchResources>,
        param_kind: Option<&ParamKind>,
        status: &PolicyStatus,
    ) -> Dependencies {
        let mut group_versions = BTreeSet::new();
        for gvk in &status.checked_kinds {
            group_versions.insert(format!("{}/{}", gvk.group, gvk.version));
        }
        if let Some(pk) = param_kind
            && let Some(gvk) = Gvk::from_api_version(
                pk.api_version.as_deref().unwrap_or(""),
                pk.kind.as_deref().unwrap_or(""),
            )
        {
            group_versions.insert(format!("{}/{}", gvk.group, gvk.version));
        }
        let mut groups = BTreeSet::new();
        let rules = constraints.and_then(|m| m.resource_rules.as_ref());
        for rule in rules.into_iter().flatten() {
            for group in rule.api_groups.iter().flatten() {
                groups.insert(group.clone());
            }
        }
        Dependencies {
            group_versions: compact(group_versions),
            groups: compact(groups),
        }
    }

    /// Whether a change of `gv` can change this policy's result.
    pub fn affected_by(&self, gv: &GroupVersion) -> bool {
        let group = |g: &str| self.groups.binary_search_by(|x| (**x).cmp(g)).is_ok();
        group("*")
            || group(&gv.group)
            || self.group_versions.iter().any(|x| {
                x.split_once('/')
                    .is_some_and(|(g, v)| g == gv.group && v == gv.version)
            })
    }
}

/// Policy name → dependencies, updated on every reconcile.
#[derive(Debug, Default)]
pub struct TriggerIndex {
    by_policy: HashMap<String, Dependencies>,
}

impl TriggerIndex {
    /// Records the dependencies of `policy`.
    pub fn set(&mut self, policy: &str, deps: Dependencies) {
        self.by_policy.insert(policy.to_owned(), deps);
    }

    /// Forgets a deleted policy.
    pub fn remove(&mut self, policy: &str) {
        self.by_policy.remove(policy);
    }

    /// The policies affected by any of `changed`, sorted.
    pub fn affected<'a>(&self, changed: impl IntoIterator<Item = &'a GroupVersion>) -> Vec<String> {
        let changed: Vec<&GroupVersion> = changed.into_iter().collect();
        let mut out: Vec<String> = self
            .by_policy
            .iter()
            .filter(|(_, deps)| changed.iter().any(|gv| deps.affected_by(gv)))
            .map(|(name, _)| name.clone())
            .collect();
        out.sort();
        out
    }

    /// How many policies are indexed.
    pub fn len(&self) -> usize {
        self.by_policy.len()
    }

    /// Whether no policy is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_policy.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> ValidatingAdmissionPolicy {
        serde_saphyr::from_str(yaml).expect("test policy parses")
    }

    const WIDGETS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: widgets}
spec:
  paramKind: {apiVersion: params.example.com/v1, kind: Limits}
  matchConstraints:
    resourceRules:
      - apiGroups: [stable.example.com]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [widgets]
  validations: [{expression: "true"}]
"#;

    #[test]
    fn depends_on_matched_groups_checked_kinds_and_params() {
        let p = policy(WIDGETS);
        let status = PolicyStatus {
            checked_kinds: vec![Gvk::new("stable.example.com", "v1", "Widget")],
            ..PolicyStatus::default()
        };
        let deps = Dependencies::of(&p, &status);
        let mut index = TriggerIndex::default();
        index.set("widgets", deps);
        index.set("other", Dependencies::default());
        let gv = |g: &str, v: &str| GroupVersion::new(g.to_owned(), v.to_owned());
        assert_eq!(
            index.affected([&gv("stable.example.com", "v2")]),
            vec!["widgets"]
        );
        assert_eq!(
            index.affected([&gv("params.example.com", "v1")]),
            vec!["widgets"]
        );
        assert!(index.affected([&gv("params.example.com", "v2")]).is_empty());
        assert!(index.affected([&gv("apps", "v1")]).is_empty());
        index.remove("widgets");
        assert!(index.affected([&gv("stable.example.com", "v1")]).is_empty());
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn wildcard_group_depends_on_everything() {
        let p = policy(&WIDGETS.replace("[stable.example.com]", "[\"*\"]"));
        let deps = Dependencies::of(&p, &PolicyStatus::default());
        assert!(deps.affected_by(&GroupVersion::new("anything".to_owned(), "v9".to_owned())));
    }
}
