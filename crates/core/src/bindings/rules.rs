//! Can a binding's `matchResources` select a request that its policy's `matchConstraints`
//! match? A request reaches a binding only when both match it: `validating/dispatcher.go`
//! `Dispatch` calls `DefinitionMatches` for the policy, then `BindingMatches` for each binding
//! (`generic/policy_matcher.go`), both through `matching/matching.go` `Matcher.Matches`.
//!
//! Decided statically from the resource rules (`webhook/predicates/rules/rules.go`
//! `Matcher.Matches`: scope, operation, group, version, resource) and from outright label
//! selector conflicts; anything that depends on the labels of live objects is "depends".

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};

use super::selector;

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlap {
    /// Some request matched by the policy is certainly matched by the binding too, as far as
    /// the resource rules go and with no selector in the way (`matchResources` unset, or its
    /// rules overlap and both selectors are empty).
    Overlaps,
    /// The rules overlap but selectors (namespace or object labels) decide which requests
    /// reach the binding; the text says which.
    Depends(String),
    /// No request can be matched by both; the text says why.
    Disjoint(String),
}

fn intersects(a: &[String], b: &[String]) -> bool {
    a.iter()
        .any(|x| x == "*" || b.iter().any(|y| y == "*" || y == x))
}

/// rules.go `splitResource`.
fn split(r: &str) -> (&str, &str) {
    r.split_once('/').unwrap_or((r, ""))
}

/// rules.go `Matcher.resource`: pattern `res/sub` matches a request when `res` is `*` or the
/// resource and `sub` is `*` or the subresource (`""` for none; so `res/*` also matches `res`).
/// Two patterns can match one request when both parts are compatible.
fn resources_intersect(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| {
        b.iter().any(|y| {
            let ((xr, xs), (yr, ys)) = (split(x), split(y));
            (xr == "*" || yr == "*" || xr == yr) && (xs == "*" || ys == "*" || xs == ys)
        })
    })
}

/// rules.go `Matcher.scope`: `Namespaced` and `Cluster` never match the same request; nil
/// and `*` match all.
fn scopes_intersect(a: Option<&str>, b: Option<&str>) -> bool {
    let (a, b) = (a.unwrap_or("*"), b.unwrap_or("*"));
    a == "*" || b == "*" || a == b
}

/// Why two rules cannot match one request, or `None` when they can. Groups and versions are
/// compared only when both sides use `matchPolicy: Exact`: with `Equivalent` (the default)
/// `matching.go` `matchesResourceRules` retries a rule with every equivalent resource of the
/// request (`EquivalentResourcesFor`), e.g. `apps/v1` and `extensions/v1beta1` deployments.
/// Resource names are compared either way (equivalent resources share their name).
fn rule_conflict(
    p: &NamedRuleWithOperations,
    b: &NamedRuleWithOperations,
    compare_group_version: bool,
) -> Option<&'static str> {
    let none = Vec::new();
    if !intersects(
        p.operations.as_ref().unwrap_or(&none),
        b.operations.as_ref().unwrap_or(&none),
    ) {
        return Some("operations");
    }
    if !resources_intersect(
        p.resources.as_ref().unwrap_or(&none),
        b.resources.as_ref().unwrap_or(&none),
    ) {
        return Some("resources");
    }
    if !scopes_intersect(p.scope.as_deref(), b.scope.as_deref()) {
        return Some("scope");
    }
    if compare_group_version {
        if !intersects(
            p.api_groups.as_ref().unwrap_or(&none),
            b.api_groups.as_ref().unwrap_or(&none),
        ) {
            return Some("apiGroups");
        }
        if !intersects(
            p.api_versions.as_ref().unwrap_or(&none),
            b.api_versions.as_ref().unwrap_or(&none),
        ) {
            return Some("apiVersions");
        }
    }
    // matching.go: an empty resourceNames list matches every name.
    let (pn, bn) = (
        p.resource_names.as_deref().unwrap_or_default(),
        b.resource_names.as_deref().unwrap_or_default(),
    );
    if !pn.is_empty() && !bn.is_empty() && !pn.iter().any(|n| bn.contains(n)) {
        return Some("resourceNames");
    }
    None
}

fn is_exact(mr: &MatchResources) -> bool {
    mr.match_policy.as_deref() == Some("Exact")
}

/// Whether the binding's `matchResources` (defaulted) can select something the policy's
/// `matchConstraints` (defaulted) match. `Err` is a selector that does not parse, with its
/// field (the API server then fails the match: `matching.go` returns the selector error).
pub fn overlap(
    constraints: &MatchResources,
    binding: Option<&MatchResources>,
) -> Result<Overlap, String> {
    // policy_matcher.go `BindingMatches`: a nil matchResources matches every request the
    // policy matches.
    let Some(mr) = binding else {
        return Ok(Overlap::Overlaps);
    };
    let p_ns = selector::parse(
        constraints.namespace_selector.as_ref(),
        "policy spec.matchConstraints.namespaceSelector",
    )?;
    let p_obj = selector::parse(
        constraints.object_selector.as_ref(),
        "policy spec.matchConstraints.objectSelector",
    )?;
    let b_ns = selector::parse(
        mr.namespace_selector.as_ref(),
        "spec.matchResources.namespaceSelector",
    )?;
    let b_obj = selector::parse(
        mr.object_selector.as_ref(),
        "spec.matchResources.objectSelector",
    )?;

    // matching.go `Matches`: empty resourceRules match every resource.
    let p_rules = constraints.resource_rules.as_deref().unwrap_or_default();
    let b_rules = mr.resource_rules.as_deref().unwrap_or_default();
    if !b_rules.is_empty() && !p_rules.is_empty() {
        let exact = is_exact(constraints) && is_exact(mr);
        let mut why = Vec::new();
        let mut any = false;
        for p in p_rules {
            for b in b_rules {
                match rule_conflict(p, b, exact) {
                    None => any = true,
                    Some(w) => why.push(w),
                }
            }
        }
        if !any {
            why.sort_unstable();
            why.dedup();
            return Ok(Overlap::Disjoint(format!(
                "its matchResources.resourceRules share no request with the policy's matchConstraints.resourceRules (they differ in {})",
                why.join(", ")
            )));
        }
    }
    if !selector::may_overlap(&p_ns, &b_ns) {
        return Ok(Overlap::Disjoint(
            "its matchResources.namespaceSelector contradicts the policy's matchConstraints.namespaceSelector".into(),
        ));
    }
    if !selector::may_overlap(&p_obj, &b_obj) {
        return Ok(Overlap::Disjoint(
            "its matchResources.objectSelector contradicts the policy's matchConstraints.objectSelector".into(),
        ));
    }
    let mut depends = Vec::new();
    if !b_ns.is_everything() {
        depends.push("namespaceSelector");
    }
    if !b_obj.is_everything() {
        depends.push("objectSelector");
    }
    if depends.is_empty() {
        Ok(Overlap::Overlaps)
    } else {
        Ok(Overlap::Depends(format!(
            "only for requests whose labels match its matchResources.{}, which is undecidable offline",
            depends.join(" and ")
        )))
    }
}

/// Whether only namespaced requests can reach the binding: every resource rule of the policy,
/// or of the binding, says `scope: Namespaced` (rules.go `Matcher.scope`). Which resources are
/// cluster-scoped needs discovery, so only the explicit scope counts.
pub fn only_namespaced(constraints: &MatchResources, binding: Option<&MatchResources>) -> bool {
    let all_namespaced = |rules: &[NamedRuleWithOperations]| {
        !rules.is_empty()
            && rules
                .iter()
                .all(|r| r.scope.as_deref() == Some("Namespaced"))
    };
    all_namespaced(constraints.resource_rules.as_deref().unwrap_or_default())
        || binding.is_some_and(|b| all_namespaced(b.resource_rules.as_deref().unwrap_or_default()))
}

/// Whether only requests without a namespace can reach the binding: every resource rule of
/// the policy, or of the binding, says `scope: Cluster` and names neither `namespaces` nor a
/// `*` resource. rules.go `Matcher.scope` lets `Cluster` rules match Namespace objects, and a
/// Namespace request carries the namespace's own name as its namespace (admission
/// attributes; `validating/dispatcher.go` `Dispatch`: "the namespace object has the namespace
/// of itself"), so those requests do have one.
pub fn only_cluster_scoped(constraints: &MatchResources, binding: Option<&MatchResources>) -> bool {
    let all_cluster = |rules: &[NamedRuleWithOperations]| {
        !rules.is_empty()
            && rules.iter().all(|r| {
                r.scope.as_deref() == Some("Cluster")
                    && r.resources.iter().flatten().all(|res| {
                        let (main, _) = split(res);
                        main != "namespaces" && main != "*"
                    })
            })
    };
    all_cluster(constraints.resource_rules.as_deref().unwrap_or_default())
        || binding.is_some_and(|b| all_cluster(b.resource_rules.as_deref().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn rule(ops: &[&str], groups: &[&str], res: &[&str]) -> NamedRuleWithOperations {
        let v = |xs: &[&str]| Some(xs.iter().map(|x| x.to_string()).collect());
        NamedRuleWithOperations {
            operations: v(ops),
            api_groups: v(groups),
            api_versions: v(&["*"]),
            resources: v(res),
            scope: Some("*".into()),
            resource_names: None,
        }
    }

    fn mr(rules: Vec<NamedRuleWithOperations>, policy: &str) -> MatchResources {
        MatchResources {
            resource_rules: Some(rules),
            match_policy: Some(policy.into()),
            namespace_selector: Some(LabelSelector::default()),
            object_selector: Some(LabelSelector::default()),
            ..Default::default()
        }
    }

    /// policy_matcher.go `BindingMatches`: nil matchResources matches.
    #[test]
    fn no_match_resources_overlaps() {
        let p = mr(vec![rule(&["CREATE"], &[""], &["pods"])], "Equivalent");
        assert_eq!(overlap(&p, None).unwrap(), Overlap::Overlaps);
    }

    /// rules.go `operation` and `resource`: disjoint operations or resources never match one
    /// request.
    #[test]
    fn disjoint_operations_and_resources() {
        let p = mr(vec![rule(&["CREATE"], &[""], &["pods"])], "Equivalent");
        let b = mr(vec![rule(&["DELETE"], &[""], &["pods"])], "Equivalent");
        assert!(
            matches!(overlap(&p, Some(&b)).unwrap(), Overlap::Disjoint(w) if w.contains("operations"))
        );
        let b = mr(vec![rule(&["*"], &[""], &["configmaps"])], "Equivalent");
        assert!(
            matches!(overlap(&p, Some(&b)).unwrap(), Overlap::Disjoint(w) if w.contains("resources"))
        );
        let b = mr(vec![rule(&["*"], &["*"], &["*"])], "Equivalent");
        assert_eq!(overlap(&p, Some(&b)).unwrap(), Overlap::Overlaps);
    }

    /// rules.go `resource`: `*` has no subresources, `pods/*` includes `pods`.
    #[test]
    fn subresource_patterns() {
        let s = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(!resources_intersect(&s(&["*"]), &s(&["pods/status"])));
        assert!(resources_intersect(&s(&["*/*"]), &s(&["pods/status"])));
        assert!(resources_intersect(&s(&["pods/*"]), &s(&["pods"])));
        assert!(resources_intersect(&s(&["*/status"]), &s(&["pods/status"])));
        assert!(!resources_intersect(&s(&["*/scale"]), &s(&["pods/status"])));
    }

    /// matching.go `matchesResourceRules`: groups only decide with Exact on both sides.
    #[test]
    fn groups_decide_only_with_exact() {
        let p = mr(vec![rule(&["*"], &["apps"], &["deployments"])], "Exact");
        let b = mr(
            vec![rule(&["*"], &["extensions"], &["deployments"])],
            "Equivalent",
        );
        assert_eq!(overlap(&p, Some(&b)).unwrap(), Overlap::Overlaps);
        let b = mr(
            vec![rule(&["*"], &["extensions"], &["deployments"])],
            "Exact",
        );
        assert!(
            matches!(overlap(&p, Some(&b)).unwrap(), Overlap::Disjoint(w) if w.contains("apiGroups"))
        );
    }

    #[test]
    fn selectors_make_it_depend_or_conflict() {
        let p = mr(vec![rule(&["*"], &[""], &["pods"])], "Equivalent");
        let mut b = mr(vec![], "Equivalent");
        b.namespace_selector = Some(LabelSelector {
            match_labels: Some([("env".to_string(), "prod".to_string())].into()),
            ..Default::default()
        });
        assert!(matches!(
            overlap(&p, Some(&b)).unwrap(),
            Overlap::Depends(_)
        ));
        let mut p2 = p.clone();
        p2.namespace_selector = Some(LabelSelector {
            match_labels: Some([("env".to_string(), "dev".to_string())].into()),
            ..Default::default()
        });
        assert!(matches!(
            overlap(&p2, Some(&b)).unwrap(),
            Overlap::Disjoint(_)
        ));
        b.object_selector = Some(LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "a".into(),
                    operator: "Bogus".into(),
                    values: None,
                },
            ]),
            ..Default::default()
        });
        let e = overlap(&p, Some(&b)).unwrap_err();
        assert!(
            e.starts_with("spec.matchResources.objectSelector.matchExpressions[0].operator"),
            "{e}"
        );
    }
}
