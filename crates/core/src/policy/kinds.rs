//! Which kinds a policy's expressions are checked against: upstream `typesToCheck` (strict)
//! and vapcheck's extended enumeration.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, MutatingAdmissionPolicy, NamedRuleWithOperations, ValidatingAdmissionPolicy,
};

use super::gvk::{Gvk, Gvr};
use super::restmapper::{Discovery, MappingError, RestMapper};

/// Upstream's cap: `maxTypesToCheck` in k8s.io/apiserver v0.37.1
/// pkg/admission/plugin/policy/validating/typechecking.go.
pub const UPSTREAM_KIND_LIMIT: usize = 10;

/// Default cap on the number of kinds the extended mode checks per policy.
pub const DEFAULT_EXTENDED_KIND_LIMIT: usize = 100;

/// Why something a policy matches was not checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// A wildcard (`*`) in a rule's groups, versions or resources that was not expanded.
    Wildcard,
    /// A subresource (`pods/status`) whose kind was not looked up or not found.
    Subresource,
    /// The kind limit was reached before this was reached.
    Limit,
    /// The resource could not be mapped to a kind.
    Mapping(String),
    /// No schema is known for the kind.
    NoSchema,
    /// The schema source failed for the kind.
    SchemaError(String),
}

impl SkipReason {
    /// A short stable label for metrics: `wildcard`, `subresource`, `limit`, `mapping`,
    /// `no_schema` or `schema_error`.
    pub fn label(&self) -> &'static str {
        match self {
            SkipReason::Wildcard => "wildcard",
            SkipReason::Subresource => "subresource",
            SkipReason::Limit => "limit",
            SkipReason::Mapping(_) => "mapping",
            SkipReason::NoSchema => "no_schema",
            SkipReason::SchemaError(_) => "schema_error",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Wildcard => f.write_str("wildcard"),
            SkipReason::Subresource => f.write_str("subresource"),
            SkipReason::Limit => f.write_str("kind limit reached"),
            SkipReason::Mapping(e) => write!(f, "mapping failed: {e}"),
            SkipReason::NoSchema => f.write_str("no schema"),
            SkipReason::SchemaError(e) => write!(f, "schema error: {e}"),
        }
    }
}

/// What was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipSubject {
    /// A whole rule of `spec.matchConstraints.resourceRules`, by index.
    Rule(usize),
    /// One entry of a rule's `resources`.
    Resource {
        /// Rule index.
        rule: usize,
        /// The entry as written, e.g. `pods/status`.
        resource: String,
    },
    /// A resource that was not mapped (or not reached).
    Gvr(Gvr),
    /// A kind that was not checked.
    Gvk(Gvk),
    /// API discovery as a whole (it failed).
    Discovery,
    /// A field of the object (`spec.evaluation.mode`).
    Field(String),
}

impl fmt::Display for SkipSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipSubject::Rule(i) => write!(f, "resourceRules[{i}]"),
            SkipSubject::Resource { rule, resource } => {
                write!(f, "resourceRules[{rule}] resource {resource:?}")
            }
            SkipSubject::Gvr(gvr) => write!(f, "{gvr}"),
            SkipSubject::Gvk(gvk) => write!(f, "{gvk}"),
            SkipSubject::Discovery => f.write_str("API discovery"),
            SkipSubject::Field(field) => f.write_str(field),
        }
    }
}

/// One thing that was not checked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// What was skipped.
    pub subject: SkipSubject,
    /// Why.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.subject, self.reason)
    }
}

/// The kinds to check and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindSelection {
    /// Kinds to check, in checking order.
    pub kinds: Vec<Gvk>,
    /// Everything matched but not selected, in discovery order.
    pub skipped: Vec<Skipped>,
}

/// Resets a REST mapper at most once per policy (upstream `restMapperRefreshAttempted`).
#[derive(Debug, Default)]
pub struct ResetOnce {
    attempted: bool,
}

impl ResetOnce {
    /// `kinds_for`, retried once after a reset if no reset was attempted yet for this policy.
    pub fn kinds_for(
        &mut self,
        mapper: &dyn RestMapper,
        gvr: &Gvr,
    ) -> Result<Vec<Gvk>, MappingError> {
        match mapper.kinds_for(gvr) {
            Ok(kinds) => Ok(kinds),
            Err(e) if self.attempted => Err(e),
            Err(_) => {
                mapper.reset();
                self.attempted = true;
                mapper.kinds_for(gvr)
            }
        }
    }
}

/// A policy whose `spec.matchConstraints` selects the kinds to check: the kind selection is
/// the same for ValidatingAdmissionPolicies and MutatingAdmissionPolicies (both use
/// `admissionregistration/v1.MatchResources`; only `resourceRules` and
/// `excludeResourceRules` are read).
pub trait MatchConstraints {
    /// `spec.matchConstraints`, when present.
    fn match_constraints(&self) -> Option<&MatchResources>;
}

impl MatchConstraints for ValidatingAdmissionPolicy {
    fn match_constraints(&self) -> Option<&MatchResources> {
        self.spec.as_ref()?.match_constraints.as_ref()
    }
}

impl MatchConstraints for MutatingAdmissionPolicy {
    fn match_constraints(&self) -> Option<&MatchResources> {
        self.spec.as_ref()?.match_constraints.as_ref()
    }
}

impl MatchConstraints for Option<&MatchResources> {
    fn match_constraints(&self) -> Option<&MatchResources> {
        *self
    }
}

fn resource_rules(policy: &(impl MatchConstraints + ?Sized)) -> &[NamedRuleWithOperations] {
    policy
        .match_constraints()
        .and_then(|m| m.resource_rules.as_deref())
        .unwrap_or(&[])
}

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or(&[])
}

/// Sorts strings byte-wise (Go `sort.Strings`).
fn sorted(v: Vec<&str>) -> Vec<&str> {
    let mut v = v;
    v.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    v
}

/// Upstream `typesToCheck` (k8s.io/apiserver v0.37.1 validating/typechecking.go), quirks
/// included:
/// - only `spec.matchConstraints.resourceRules` (groups, versions, resources) are read;
/// - a rule with any `*` in a group or version, or with no groups or versions, is skipped;
/// - resources containing `*` or `/` are dropped one by one; a rule left with none is skipped;
/// - groups, versions and resources are sorted byte-wise and walked group → version → resource;
/// - each resource is mapped with [`RestMapper::kinds_for`]; on failure the mapper is reset
///   and the lookup retried, at most once per policy; a failed lookup skips the resource;
/// - every non-empty kind is added to a set and counted; the counter belongs to the rule and
///   counts duplicates; when it reaches 10 the function returns at once with what it has;
/// - the result is deduplicated and sorted by group, version, kind.
///
/// `skipped` records what upstream silently leaves out (for conditions only).
pub fn types_to_check(
    policy: &(impl MatchConstraints + ?Sized),
    mapper: &dyn RestMapper,
) -> KindSelection {
    types_to_check_with(policy, mapper, &mut ResetOnce::default())
}

/// [`types_to_check`] sharing a [`ResetOnce`] with other lookups of the same policy.
pub fn types_to_check_with(
    policy: &(impl MatchConstraints + ?Sized),
    mapper: &dyn RestMapper,
    reset: &mut ResetOnce,
) -> KindSelection {
    let rules = resource_rules(policy);
    let mut set: BTreeSet<Gvk> = BTreeSet::new();
    let mut skipped = Vec::new();
    for (ri, rule) in rules.iter().enumerate() {
        let groups = list(&rule.api_groups);
        let versions = list(&rule.api_versions);
        if groups.iter().any(|g| g.contains('*')) || versions.iter().any(|v| v.contains('*')) {
            skipped.push(Skipped {
                subject: SkipSubject::Rule(ri),
                reason: SkipReason::Wildcard,
            });
            continue;
        }
        if groups.is_empty() || versions.is_empty() {
            continue;
        }
        let mut resources = Vec::new();
        for r in list(&rule.resources) {
            if r.contains('*') {
                skipped.push(Skipped {
                    subject: SkipSubject::Resource {
                        rule: ri,
                        resource: r.clone(),
                    },
                    reason: SkipReason::Wildcard,
                });
            } else if r.contains('/') {
                skipped.push(Skipped {
                    subject: SkipSubject::Resource {
                        rule: ri,
                        resource: r.clone(),
                    },
                    reason: SkipReason::Subresource,
                });
            } else {
                resources.push(r.as_str());
            }
        }
        if resources.is_empty() {
            continue;
        }
        let groups = sorted(groups.iter().map(String::as_str).collect());
        let versions = sorted(versions.iter().map(String::as_str).collect());
        let resources = sorted(resources);
        let mut combos = Vec::with_capacity(groups.len() * versions.len() * resources.len());
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    combos.push(Gvr::new(*g, *v, *r));
                }
            }
        }
        let mut count = 0usize;
        for (ci, gvr) in combos.iter().enumerate() {
            let resolved = match reset.kinds_for(mapper, gvr) {
                Ok(k) => k,
                Err(e) => {
                    skipped.push(Skipped {
                        subject: SkipSubject::Gvr(gvr.clone()),
                        reason: SkipReason::Mapping(e.to_string()),
                    });
                    continue;
                }
            };
            let non_empty: Vec<&Gvk> = resolved.iter().filter(|k| !k.is_empty()).collect();
            for (ki, gvk) in non_empty.iter().enumerate() {
                set.insert((*gvk).clone());
                count += 1;
                if count == UPSTREAM_KIND_LIMIT {
                    // Everything not reached is skipped because of the limit.
                    for rest in &non_empty[ki + 1..] {
                        if !set.contains(*rest) {
                            skipped.push(Skipped {
                                subject: SkipSubject::Gvk((*rest).clone()),
                                reason: SkipReason::Limit,
                            });
                        }
                    }
                    for rest in &combos[ci + 1..] {
                        skipped.push(Skipped {
                            subject: SkipSubject::Gvr(rest.clone()),
                            reason: SkipReason::Limit,
                        });
                    }
                    for later in ri + 1..rules.len() {
                        skipped.push(Skipped {
                            subject: SkipSubject::Rule(later),
                            reason: SkipReason::Limit,
                        });
                    }
                    return KindSelection {
                        kinds: set.into_iter().collect(),
                        skipped,
                    };
                }
            }
        }
    }
    KindSelection {
        kinds: set.into_iter().collect(),
        skipped,
    }
}

/// A parsed `resources` entry: `res` or `res/sub`, either part possibly `*`.
fn split_resource(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (entry, None),
    }
}

/// vapcheck's extended enumeration. Starts from the strict selection (so every kind strict
/// checks is checked, first and in the same order) and adds, sorted:
/// - kinds behind wildcards (`*` groups or versions, `*`, `*/*`, `res/*`, `*/sub` resources),
///   expanded through `discovery` the way admission rules match requests;
/// - subresources, checked against the subresource's kind as discovery lists it (e.g.
///   `deployments/scale` → `autoscaling/v1, Kind=Scale`);
/// - kinds upstream never reached because of its 10-kind counter.
///
/// Added kinds honour the rule's `scope` (when discovery says whether the resource is
/// namespaced) and `excludeResourceRules` entries that take the resource out for every
/// operation (see `excludes`); kinds upstream checks are kept as upstream has them.
///
/// At most `limit` kinds in total are selected (strict kinds always are); the others are
/// reported as [`SkipReason::Limit`]. Without discovery, wildcards and subresources are
/// reported as skipped. Mapping failures are reported too.
pub fn types_to_check_extended(
    policy: &(impl MatchConstraints + ?Sized),
    mapper: &dyn RestMapper,
    discovery: Option<&dyn Discovery>,
    limit: usize,
) -> KindSelection {
    let mut reset = ResetOnce::default();
    let strict = types_to_check_with(policy, mapper, &mut reset);
    extend_selection(policy, strict.kinds, mapper, discovery, limit, &mut reset)
}

/// Whether a rule's `scope` admits a resource (`*` or unset: all; `Namespaced`; `Cluster`).
/// `namespaced` is `None` when unknown (mapped through the REST mapper), which admits it.
fn scope_admits(scope: Option<&str>, namespaced: Option<bool>) -> bool {
    match (scope, namespaced) {
        (Some("Namespaced"), Some(ns)) => ns,
        (Some("Cluster"), Some(ns)) => !ns,
        _ => true,
    }
}

/// Whether an `excludeResourceRules` entry takes a resource out of the policy entirely: it
/// matches the group, version, resource/subresource and scope (admission rule semantics),
/// names no particular objects (`resourceNames` empty) and covers every operation the
/// including rule matches.
fn excludes(
    exclude: &NamedRuleWithOperations,
    including_operations: &[String],
    group: &str,
    version: &str,
    resource: &str,
    sub: Option<&str>,
    namespaced: Option<bool>,
) -> bool {
    let any_or = |items: &[String], want: &str| items.iter().any(|i| i == "*" || i == want);
    if !list(&exclude.resource_names).is_empty() {
        return false;
    }
    let ops = list(&exclude.operations);
    let covers_ops = ops.iter().any(|o| o == "*")
        || (!including_operations.iter().any(|o| o == "*")
            && including_operations.iter().all(|o| ops.contains(o)));
    let resource_ok = list(&exclude.resources).iter().any(|entry| {
        let (r, s) = split_resource(entry);
        (r == "*" || r == resource)
            && match (s, sub) {
                (None, None) => true,
                (Some("*"), _) => true,
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
    });
    covers_ops
        && any_or(list(&exclude.api_groups), group)
        && any_or(list(&exclude.api_versions), version)
        && resource_ok
        && scope_admits(exclude.scope.as_deref(), namespaced)
}

/// The extended enumeration on top of already computed strict kinds, sharing the policy's
/// [`ResetOnce`].
pub fn extend_selection(
    policy: &(impl MatchConstraints + ?Sized),
    strict_kinds: Vec<Gvk>,
    mapper: &dyn RestMapper,
    discovery: Option<&dyn Discovery>,
    limit: usize,
    reset: &mut ResetOnce,
) -> KindSelection {
    let groups = discovery.map(|d| d.api_groups());
    let mut skipped = Vec::new();
    if let Some(Err(e)) = &groups {
        skipped.push(Skipped {
            subject: SkipSubject::Discovery,
            reason: SkipReason::Mapping(e.clone()),
        });
    }
    let groups = match groups {
        Some(Ok(g)) => Some(g),
        _ => None,
    };
    let exclude_rules: &[NamedRuleWithOperations] = policy
        .match_constraints()
        .and_then(|m| m.exclude_resource_rules.as_deref())
        .unwrap_or(&[]);
    let mut found: BTreeSet<Gvk> = BTreeSet::new();
    for (ri, rule) in resource_rules(policy).iter().enumerate() {
        let operations = list(&rule.operations);
        let excluded = |g: &str, v: &str, r: &str, sub: Option<&str>, ns: Option<bool>| {
            exclude_rules
                .iter()
                .any(|x| excludes(x, operations, g, v, r, sub, ns))
        };
        let rule_groups = list(&rule.api_groups);
        let rule_versions = list(&rule.api_versions);
        let wild_gv =
            rule_groups.iter().any(|g| g == "*") || rule_versions.iter().any(|v| v == "*");
        for entry in list(&rule.resources) {
            let (res, sub) = split_resource(entry);
            let wild = wild_gv || res == "*" || sub == Some("*");
            if sub.is_none() && !wild {
                // Plain resources: the REST mapper, like strict mode.
                for g in rule_groups {
                    for v in rule_versions {
                        let gvr = Gvr::new(g.as_str(), v.as_str(), res);
                        if excluded(g, v, res, None, None) {
                            continue;
                        }
                        match reset.kinds_for(mapper, &gvr) {
                            Ok(kinds) => found.extend(kinds.into_iter().filter(|k| !k.is_empty())),
                            Err(e) => skipped.push(Skipped {
                                subject: SkipSubject::Gvr(gvr),
                                reason: SkipReason::Mapping(e.to_string()),
                            }),
                        }
                    }
                }
                continue;
            }
            let Some(groups) = &groups else {
                skipped.push(Skipped {
                    subject: SkipSubject::Resource {
                        rule: ri,
                        resource: entry.clone(),
                    },
                    reason: if wild {
                        SkipReason::Wildcard
                    } else {
                        SkipReason::Subresource
                    },
                });
                continue;
            };
            let mut matched = false;
            for group in groups.iter() {
                if !rule_groups.iter().any(|g| g == "*" || *g == group.name) {
                    continue;
                }
                for version in &group.versions {
                    if !rule_versions
                        .iter()
                        .any(|v| v == "*" || *v == version.version)
                    {
                        continue;
                    }
                    for r in &version.resources {
                        let (r_res, r_sub) = split_resource(&r.name);
                        let res_ok = res == "*" || res == r_res;
                        let sub_ok = match (sub, r_sub) {
                            (None, None) => true,
                            // admission rules.go: a `*` subresource also matches the
                            // resource itself (`sub == "*" || sub == opSub`).
                            (Some("*"), _) => true,
                            (Some(s), Some(rs)) => s == rs,
                            _ => false,
                        };
                        if !(res_ok && sub_ok) || r.kind.is_empty() {
                            continue;
                        }
                        matched = true;
                        let ns = Some(r.namespaced);
                        if scope_admits(rule.scope.as_deref(), ns)
                            && !excluded(&group.name, &version.version, r_res, r_sub, ns)
                        {
                            found.insert(Gvk::new(
                                r.group.clone().unwrap_or_else(|| group.name.clone()),
                                r.version.clone().unwrap_or_else(|| version.version.clone()),
                                r.kind.clone(),
                            ));
                        }
                    }
                }
            }
            if !matched && !wild {
                skipped.push(Skipped {
                    subject: SkipSubject::Resource {
                        rule: ri,
                        resource: entry.clone(),
                    },
                    reason: SkipReason::Mapping("not found in discovery".into()),
                });
            }
        }
    }
    let mut kinds = strict_kinds;
    for gvk in found {
        if kinds.contains(&gvk) {
            continue;
        }
        if kinds.len() < limit {
            kinds.push(gvk);
        } else {
            skipped.push(Skipped {
                subject: SkipSubject::Gvk(gvk),
                reason: SkipReason::Limit,
            });
        }
    }
    KindSelection { kinds, skipped }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;

    use k8s_openapi::api::admissionregistration::v1::{
        MatchResources, ValidatingAdmissionPolicySpec,
    };

    use super::*;
    use crate::policy::restmapper::DiscoveryRestMapper;
    use crate::policy::restmapper::tests::sample_discovery;

    /// A mapper with a fixed table; resources in `stale` fail until the first reset.
    #[derive(Default)]
    struct FakeMapper {
        table: HashMap<Gvr, Vec<Gvk>>,
        stale: HashSet<Gvr>,
        resets: Mutex<usize>,
        calls: Mutex<Vec<Gvr>>,
    }

    impl FakeMapper {
        fn with(mut self, g: &str, v: &str, r: &str, kinds: &[&str]) -> Self {
            self.table.insert(
                Gvr::new(g, v, r),
                kinds.iter().map(|k| Gvk::new(g, v, *k)).collect(),
            );
            self
        }
        fn resets(&self) -> usize {
            *self.resets.lock().unwrap()
        }
    }

    impl RestMapper for FakeMapper {
        fn kinds_for(&self, gvr: &Gvr) -> Result<Vec<Gvk>, MappingError> {
            self.calls.lock().unwrap().push(gvr.clone());
            if self.stale.contains(gvr) && self.resets() == 0 {
                return Err(MappingError::NoMatch(gvr.clone()));
            }
            self.table
                .get(gvr)
                .cloned()
                .ok_or_else(|| MappingError::NoMatch(gvr.clone()))
        }
        fn reset(&self) {
            *self.resets.lock().unwrap() += 1;
        }
    }

    /// [`crate::policy::fakes::rule`] for CREATE.
    fn rule(groups: &[&str], versions: &[&str], resources: &[&str]) -> NamedRuleWithOperations {
        NamedRuleWithOperations {
            operations: Some(vec!["CREATE".to_owned()]),
            ..crate::policy::fakes::rule(groups, versions, resources)
        }
    }

    fn policy(rules: Vec<NamedRuleWithOperations>) -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            spec: Some(ValidatingAdmissionPolicySpec {
                match_constraints: Some(MatchResources {
                    resource_rules: Some(rules),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn names(kinds: &[Gvk]) -> Vec<String> {
        kinds.iter().map(ToString::to_string).collect()
    }

    fn skipped(s: &[Skipped]) -> Vec<String> {
        s.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn no_match_constraints_or_rules() {
        let m = FakeMapper::default();
        assert!(
            types_to_check(&ValidatingAdmissionPolicy::default(), &m)
                .kinds
                .is_empty()
        );
        assert!(types_to_check(&policy(vec![]), &m).kinds.is_empty());
        assert_eq!(m.resets(), 0);
    }

    #[test]
    fn wildcard_rules_are_skipped_whole() {
        let m = FakeMapper::default().with("apps", "v1", "deployments", &["Deployment"]);
        let p = policy(vec![
            rule(&["apps", "*"], &["v1"], &["deployments"]),
            rule(&["apps"], &["v*"], &["deployments"]),
            rule(&["apps"], &["v1"], &["deployments"]),
        ]);
        let s = types_to_check(&p, &m);
        assert_eq!(names(&s.kinds), ["apps/v1, Kind=Deployment"]);
        assert_eq!(
            skipped(&s.skipped),
            ["resourceRules[0] (wildcard)", "resourceRules[1] (wildcard)"]
        );
    }

    #[test]
    fn wildcard_and_subresources_dropped_individually() {
        let m = FakeMapper::default().with("", "v1", "pods", &["Pod"]);
        let p = policy(vec![rule(
            &[""],
            &["v1"],
            &["pods/status", "*", "pods", "*/scale", "pods/*"],
        )]);
        let s = types_to_check(&p, &m);
        assert_eq!(names(&s.kinds), ["/v1, Kind=Pod"]);
        assert_eq!(
            skipped(&s.skipped),
            [
                "resourceRules[0] resource \"pods/status\" (subresource)",
                "resourceRules[0] resource \"*\" (wildcard)",
                "resourceRules[0] resource \"*/scale\" (wildcard)",
                "resourceRules[0] resource \"pods/*\" (wildcard)",
            ]
        );
        // only subresources: nothing to check, no lookups
        let p = policy(vec![rule(&[""], &["v1"], &["pods/status"])]);
        assert!(types_to_check(&p, &m).kinds.is_empty());
    }

    #[test]
    fn empty_groups_or_versions_skip_the_rule() {
        let m = FakeMapper::default().with("", "v1", "pods", &["Pod"]);
        let p = policy(vec![
            rule(&[], &["v1"], &["pods"]),
            rule(&[""], &[], &["pods"]),
        ]);
        let s = types_to_check(&p, &m);
        assert!(s.kinds.is_empty());
        assert!(m.calls.lock().unwrap().is_empty());
    }

    #[test]
    fn lookups_walk_sorted_groups_versions_resources() {
        let m = FakeMapper::default()
            .with("b", "v1", "x", &["X"])
            .with("a", "v2", "y", &["Y"])
            .with("a", "v1", "x", &["X"]);
        let p = policy(vec![rule(&["b", "a"], &["v2", "v1"], &["y", "x"])]);
        let s = types_to_check(&p, &m);
        let calls: Vec<String> = m
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|g| format!("{}/{}/{}", g.group, g.version, g.resource))
            .collect();
        // sorted walk; the first failure (a/v1/y) triggers the one reset and a retry
        assert_eq!(
            calls,
            [
                "a/v1/x", "a/v1/y", "a/v1/y", "a/v2/x", "a/v2/y", "b/v1/x", "b/v1/y", "b/v2/x",
                "b/v2/y"
            ]
        );
        assert_eq!(m.resets(), 1);
        assert_eq!(
            names(&s.kinds),
            ["a/v1, Kind=X", "a/v2, Kind=Y", "b/v1, Kind=X"]
        );
    }

    #[test]
    fn reset_once_per_policy_then_retry_succeeds() {
        let mut m = FakeMapper::default().with("example.com", "v1", "widgets", &["Widget"]);
        m.stale.insert(Gvr::new("example.com", "v1", "widgets"));
        let p = policy(vec![rule(
            &["example.com"],
            &["v1"],
            &["widgets", "gadgets", "zorks"],
        )]);
        let s = types_to_check(&p, &m);
        assert_eq!(names(&s.kinds), ["example.com/v1, Kind=Widget"]);
        // gadgets fails first (sorted): reset + retry; widgets then works; zorks fails without reset
        assert_eq!(m.resets(), 1);
        assert_eq!(m.calls.lock().unwrap().len(), 4);
        assert_eq!(
            skipped(&s.skipped),
            [
                "example.com/v1, Resource=gadgets (mapping failed: no matches for example.com/v1, Resource=gadgets)",
                "example.com/v1, Resource=zorks (mapping failed: no matches for example.com/v1, Resource=zorks)",
            ]
        );
    }

    #[test]
    fn stale_mapping_after_the_single_reset_is_skipped() {
        // The first failure uses up the reset; a later resource that only maps after a reset
        // is still found because the reset already happened.
        let mut m = FakeMapper::default().with("g", "v1", "b", &["B"]);
        m.stale.insert(Gvr::new("g", "v1", "b"));
        let p = policy(vec![rule(&["g"], &["v1"], &["a", "b"])]);
        assert_eq!(names(&types_to_check(&p, &m).kinds), ["g/v1, Kind=B"]);
        assert_eq!(m.resets(), 1);
    }

    fn many(n: usize, prefix: &str) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i:02}")).collect()
    }

    fn mapper_for(resources: &[String]) -> FakeMapper {
        let mut m = FakeMapper::default();
        for r in resources {
            let kind = r.to_uppercase();
            m = m.with("g", "v1", r, &[&kind]);
        }
        m
    }

    #[test]
    fn limit_of_ten_stops_everything() {
        let rs = many(12, "r");
        let m = mapper_for(&rs);
        let refs: Vec<&str> = rs.iter().map(String::as_str).collect();
        let p = policy(vec![
            rule(&["g"], &["v1"], &refs),
            rule(&["g"], &["v1"], &["r11"]),
        ]);
        let s = types_to_check(&p, &m);
        assert_eq!(s.kinds.len(), 10);
        assert_eq!(s.kinds.last().map(|k| k.kind.as_str()), Some("R09"));
        assert_eq!(
            skipped(&s.skipped),
            [
                "g/v1, Resource=r10 (kind limit reached)",
                "g/v1, Resource=r11 (kind limit reached)",
                "resourceRules[1] (kind limit reached)"
            ]
        );
    }

    #[test]
    fn counter_is_per_rule_so_totals_can_exceed_ten() {
        let a = many(9, "a");
        let b = many(9, "b");
        let all: Vec<String> = a.iter().chain(&b).cloned().collect();
        let m = mapper_for(&all);
        let ra: Vec<&str> = a.iter().map(String::as_str).collect();
        let rb: Vec<&str> = b.iter().map(String::as_str).collect();
        let p = policy(vec![rule(&["g"], &["v1"], &ra), rule(&["g"], &["v1"], &rb)]);
        let s = types_to_check(&p, &m);
        assert_eq!(s.kinds.len(), 18);
        assert!(s.skipped.is_empty());
    }

    #[test]
    fn counter_counts_duplicates() {
        // The same five kinds twice in one rule (plural and singular names) reach 10 inserts
        // with only five distinct kinds; the next rule is never looked at.
        let mut m = FakeMapper::default();
        let mut resources = Vec::new();
        for i in 0..5 {
            let kind = format!("K{i}");
            m = m.with("g", "v1", &format!("k{i}s"), &[&kind]).with(
                "g",
                "v1",
                &format!("k{i}"),
                &[&kind],
            );
            resources.push(format!("k{i}s"));
            resources.push(format!("k{i}"));
        }
        m = m.with("g", "v1", "other", &["Other"]);
        let refs: Vec<&str> = resources.iter().map(String::as_str).collect();
        let p = policy(vec![
            rule(&["g"], &["v1"], &refs),
            rule(&["g"], &["v1"], &["other"]),
        ]);
        let s = types_to_check(&p, &m);
        assert_eq!(
            names(&s.kinds),
            [
                "g/v1, Kind=K0",
                "g/v1, Kind=K1",
                "g/v1, Kind=K2",
                "g/v1, Kind=K3",
                "g/v1, Kind=K4"
            ]
        );
        assert_eq!(
            skipped(&s.skipped),
            ["resourceRules[1] (kind limit reached)"]
        );
    }

    #[test]
    fn duplicates_across_rules_are_merged_and_sorted() {
        let m = FakeMapper::default()
            .with("apps", "v1", "deployments", &["Deployment"])
            .with("", "v1", "pods", &["Pod"])
            .with("", "v1", "configmaps", &["ConfigMap"]);
        let p = policy(vec![
            rule(&["apps"], &["v1"], &["deployments"]),
            rule(&[""], &["v1"], &["pods", "configmaps"]),
            rule(&["apps"], &["v1"], &["deployments"]),
        ]);
        assert_eq!(
            names(&types_to_check(&p, &m).kinds),
            [
                "/v1, Kind=ConfigMap",
                "/v1, Kind=Pod",
                "apps/v1, Kind=Deployment"
            ]
        );
    }

    #[test]
    fn core_group_with_a_discovery_mapper_can_yield_several_kinds() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let p = policy(vec![rule(&[""], &["v1"], &["events", "Pods"])]);
        assert_eq!(
            names(&types_to_check(&p, &m).kinds),
            [
                "/v1, Kind=Event",
                "/v1, Kind=Pod",
                "events.k8s.io/v1, Kind=Event"
            ]
        );
    }

    #[test]
    fn limit_reached_inside_one_lookup_result() {
        // A lookup that returns several kinds: the counter can hit 10 in the middle of them.
        let mut m = FakeMapper::default();
        let kinds: Vec<String> = (0..12).map(|i| format!("K{i:02}")).collect();
        let refs: Vec<&str> = kinds.iter().map(String::as_str).collect();
        m = m.with("g", "v1", "all", &refs);
        let p = policy(vec![rule(&["g"], &["v1"], &["all"])]);
        let s = types_to_check(&p, &m);
        assert_eq!(s.kinds.len(), 10);
        assert_eq!(
            skipped(&s.skipped),
            [
                "g/v1, Kind=K10 (kind limit reached)",
                "g/v1, Kind=K11 (kind limit reached)"
            ]
        );
    }

    #[test]
    fn extended_expands_wildcards_and_subresources() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let p = policy(vec![
            rule(&["apps"], &["v1"], &["deployments", "deployments/scale"]),
            rule(&["*"], &["*"], &["pods/*"]),
            rule(&["policy"], &["*"], &["*"]),
        ]);
        let s = types_to_check_extended(&p, &m, Some(&m), DEFAULT_EXTENDED_KIND_LIMIT);
        assert_eq!(
            names(&s.kinds),
            [
                // strict first
                "apps/v1, Kind=Deployment",
                // then the extra kinds, sorted
                "/v1, Kind=Pod",
                "autoscaling/v1, Kind=Scale",
                "policy/v1, Kind=Eviction",
                "policy/v1, Kind=PodDisruptionBudget",
            ]
        );
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
    }

    #[test]
    fn extended_without_discovery_reports_what_it_cannot_expand() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let p = policy(vec![
            rule(
                &["apps"],
                &["v1"],
                &["deployments", "deployments/scale", "*"],
            ),
            rule(&["*"], &["v1"], &["pods"]),
        ]);
        let s = types_to_check_extended(&p, &m, None, DEFAULT_EXTENDED_KIND_LIMIT);
        assert_eq!(names(&s.kinds), ["apps/v1, Kind=Deployment"]);
        assert_eq!(
            skipped(&s.skipped),
            [
                "resourceRules[0] resource \"deployments/scale\" (subresource)",
                "resourceRules[0] resource \"*\" (wildcard)",
                "resourceRules[1] resource \"pods\" (wildcard)",
            ]
        );
    }

    #[test]
    fn extended_limit_keeps_strict_kinds_and_reports_the_rest() {
        let rs = many(12, "r");
        let m = mapper_for(&rs);
        let refs: Vec<&str> = rs.iter().map(String::as_str).collect();
        let p = policy(vec![rule(&["g"], &["v1"], &refs)]);
        // a generous limit finds what upstream's counter cut off
        let s = types_to_check_extended(&p, &m, None, 100);
        assert_eq!(s.kinds.len(), 12);
        // a small limit still keeps every strict kind
        let s = types_to_check_extended(&p, &m, None, 3);
        assert_eq!(s.kinds.len(), 10);
        assert_eq!(
            skipped(&s.skipped),
            [
                "g/v1, Kind=R10 (kind limit reached)",
                "g/v1, Kind=R11 (kind limit reached)"
            ]
        );
    }

    #[test]
    fn extended_honours_scope_and_full_exclusions() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let mut cluster = rule(&[""], &["v1"], &["*"]);
        cluster.scope = Some("Cluster".into());
        let mut p = policy(vec![cluster]);
        let s = types_to_check_extended(&p, &m, Some(&m), 100);
        assert_eq!(names(&s.kinds), ["/v1, Kind=Namespace"]);

        let all = rule(&["apps"], &["v1"], &["*"]);
        let mut exclude_all_ops = rule(&["apps"], &["*"], &["replicasets", "daemonsets"]);
        exclude_all_ops.operations = Some(vec!["*".into()]);
        let mut exclude_some_ops = rule(&["apps"], &["v1"], &["statefulsets"]);
        exclude_some_ops.operations = Some(vec!["DELETE".into()]);
        let mut exclude_named = rule(&["apps"], &["v1"], &["deployments"]);
        exclude_named.resource_names = Some(vec!["one".into()]);
        p = policy(vec![all]);
        p.spec
            .as_mut()
            .unwrap()
            .match_constraints
            .as_mut()
            .unwrap()
            .exclude_resource_rules = Some(vec![exclude_all_ops, exclude_some_ops, exclude_named]);
        let s = types_to_check_extended(&p, &m, Some(&m), 100);
        // replicasets and daemonsets are out for every operation; statefulsets only for
        // DELETE and deployments only for one name, so they stay.
        assert_eq!(
            names(&s.kinds),
            ["apps/v1, Kind=Deployment", "apps/v1, Kind=StatefulSet"]
        );
    }

    #[test]
    fn star_subresource_matches_the_resource_too() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let p = policy(vec![rule(&["apps"], &["v1"], &["deployments/*"])]);
        let s = types_to_check_extended(&p, &m, Some(&m), 100);
        assert_eq!(
            names(&s.kinds),
            ["apps/v1, Kind=Deployment", "autoscaling/v1, Kind=Scale"]
        );
    }

    #[test]
    fn extended_reports_mapping_failures_and_unknown_subresources() {
        let m = DiscoveryRestMapper::new(sample_discovery());
        let p = policy(vec![rule(
            &["apps"],
            &["v1"],
            &["nopes", "deployments/nope"],
        )]);
        let s = types_to_check_extended(&p, &m, Some(&m), 100);
        assert!(s.kinds.is_empty());
        assert_eq!(
            skipped(&s.skipped),
            [
                "apps/v1, Resource=nopes (mapping failed: no matches for apps/v1, Resource=nopes)",
                "resourceRules[0] resource \"deployments/nope\" (mapping failed: not found in discovery)",
            ]
        );
    }
}

#[cfg(test)]
mod proptests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::api::admissionregistration::v1::{
        MatchResources, ValidatingAdmissionPolicySpec,
    };
    use proptest::prelude::*;

    use super::*;

    struct Table {
        map: HashMap<Gvr, Vec<Gvk>>,
        resets: AtomicUsize,
    }

    impl RestMapper for Table {
        fn kinds_for(&self, gvr: &Gvr) -> Result<Vec<Gvk>, MappingError> {
            self.map
                .get(gvr)
                .cloned()
                .ok_or_else(|| MappingError::NoMatch(gvr.clone()))
        }
        fn reset(&self) {
            self.resets.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("*".to_owned()),
            Just("a/s".to_owned()),
            Just(String::new())
        ]
    }

    proptest! {
        #[test]
        fn strict_selection_invariants(
            rules in prop::collection::vec((prop::collection::vec(word(), 0..3), prop::collection::vec(word(), 0..3), prop::collection::vec(word(), 0..4)), 0..4),
            kinds_per in 0usize..5,
        ) {
            // Every plain (g, v, r) over {a, b, ""} maps to `kinds_per` kinds, some shared.
            let names = ["a", "b", ""];
            let mut map = HashMap::new();
            for g in names { for v in names { for r in names {
                let ks = (0..kinds_per).map(|i| Gvk::new(g, v, format!("K{}", (i + r.len()) % 3))).collect();
                map.insert(Gvr::new(g, v, r), ks);
            }}}
            let mapper = Table { map, resets: AtomicUsize::new(0) };
            let rules: Vec<NamedRuleWithOperations> = rules.into_iter().map(|(g, v, r)| NamedRuleWithOperations {
                api_groups: Some(g), api_versions: Some(v), resources: Some(r), ..Default::default()
            }).collect();
            let policy = ValidatingAdmissionPolicy {
                spec: Some(ValidatingAdmissionPolicySpec {
                    match_constraints: Some(MatchResources { resource_rules: Some(rules.clone()), ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let s = types_to_check(&policy, &mapper);
            // sorted and unique
            prop_assert!(s.kinds.windows(2).all(|w| w[0] < w[1]));
            // at most one reset per policy
            prop_assert!(mapper.resets.load(Ordering::SeqCst) <= 1);
            // never a kind from a wildcard rule or a dropped resource
            for k in &s.kinds {
                prop_assert!(!k.group.contains('*') && !k.version.contains('*'));
            }
            // the extended selection always contains the strict one, first
            let e = types_to_check_extended(&policy, &mapper, None, 1000);
            prop_assert_eq!(&e.kinds[..s.kinds.len()], &s.kinds[..]);
        }
    }
}
