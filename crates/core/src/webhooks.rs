//! What a webhook configuration will do beyond kube-apiserver's verdict: the create-time
//! warning kube-apiserver itself gives, and the practices of the Kubernetes documentation's
//! "Dynamic Admission Control", "Best practices and warnings", that can be decided from the
//! object alone. Pure: no I/O.
//!
//! Each [`Practice`] cites its source. A `namespaceSelector` is judged only when it looks at no
//! label but `kubernetes.io/metadata.name` (evaluated with [`crate::bindings::selector`] against
//! the namespace as kube-apiserver creates it), and only an empty `objectSelector` counts as
//! matching every object: a selector on other labels could exclude the objects in question.

pub mod availability;
pub mod match_conditions;

use std::collections::BTreeMap;

use crate::apiserver::webhook::{Webhook, WebhookConfiguration, default_configuration};
use crate::bindings::selector;

/// The documentation page of the practices.
pub const DOCS: &str =
    "https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/";

/// The documentation of the node heartbeats (the section's anchor is `node-heart-beats` in the
/// page's source, `content/en/docs/concepts/architecture/leases.md`).
pub const LEASES_DOCS: &str =
    "https://kubernetes.io/docs/concepts/architecture/leases/#node-heart-beats";

/// A kind of finding on a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Practice {
    /// A rule names a resource excluded from admission webhooks: kube-apiserver's own warning
    /// on create (k8s.io/kubernetes v1.37.1 `pkg/apis/admissionregistration/validation/
    /// warnings.go` `WarningsForValidatingWebhookRules`, with the list of
    /// `pkg/kubeapiserver/admission/exclusion/resources.go`; feature
    /// `ExcludeAdmissionWebhookVirtualResources`, beta and on from 1.37).
    ExcludedResource,
    /// `failurePolicy: Fail` on requests in kube-system ("Avoiding operating on the kube-system
    /// namespace").
    FailClosedKubeSystem,
    /// `failurePolicy: Fail` on the creation of the webhook's own pods ("Avoiding deadlocks in
    /// self-hosted webhooks").
    FailClosedOwnPods,
    /// `matchPolicy: Exact` on a resource served in other versions too: requests through them
    /// bypass the webhook ("Matching requests: matchPolicy").
    ExactMatchBypass,
    /// A `namespaceSelector` or `objectSelector` no label set satisfies: the webhook is never
    /// called for the requests it selects ("Matching requests: namespaceSelector" and
    /// "objectSelector").
    SelectsNothing,
    /// Mutating webhooks that kube-apiserver calls one after another for one request, whose
    /// timeouts add up to more than the request's deadline ("Timeouts").
    TimeoutsExceedRequest,
    /// `admissionReviewVersions` whose first version kube-apiserver supports is v1beta1: the
    /// webhook is sent AdmissionReview v1beta1 ("Request"; k8s.io/apiserver v0.37.1
    /// `admission/plugin/webhook/request/admissionreview.go` `CreateAdmissionObjects`).
    ReviewVersionV1beta1,
    /// `failurePolicy: Fail` on the node heartbeats, UPDATE of `nodes/status` or of the Leases
    /// in kube-node-lease (Kubernetes documentation, "Leases", "Node heartbeats").
    FailClosedNodeHeartbeats,
}

impl Practice {
    /// The stable rule id (SARIF, JUnit, GitHub).
    pub fn id(self) -> &'static str {
        match self {
            Practice::ExcludedResource => "VAP120",
            Practice::FailClosedKubeSystem => "VAP121",
            Practice::FailClosedOwnPods => "VAP122",
            Practice::ExactMatchBypass => "VAP123",
            Practice::SelectsNothing => "VAP124",
            Practice::TimeoutsExceedRequest => "VAP125",
            Practice::ReviewVersionV1beta1 => "VAP126",
            Practice::FailClosedNodeHeartbeats => "VAP127",
        }
    }

    /// The rule's name.
    pub fn name(self) -> &'static str {
        match self {
            Practice::ExcludedResource => "WebhookRuleHasNoEffect",
            Practice::FailClosedKubeSystem => "WebhookFailClosedOnKubeSystem",
            Practice::FailClosedOwnPods => "WebhookFailClosedOnItsOwnPods",
            Practice::ExactMatchBypass => "WebhookBypassedThroughOtherVersions",
            Practice::SelectsNothing => "WebhookSelectorSelectsNothing",
            Practice::TimeoutsExceedRequest => "WebhookTimeoutsExceedRequestTimeout",
            Practice::ReviewVersionV1beta1 => "WebhookSentAdmissionReviewV1beta1",
            Practice::FailClosedNodeHeartbeats => "WebhookFailClosedOnNodeHeartbeats",
        }
    }

    /// What it means.
    pub fn description(self) -> &'static str {
        match self {
            Practice::ExcludedResource => {
                "A webhook rule names a resource kube-apiserver never sends to admission webhooks: the rule has no effect (kube-apiserver warns on create)."
            }
            Practice::FailClosedKubeSystem => {
                "A webhook with failurePolicy Fail intercepts requests in kube-system: while it is unavailable, kube-apiserver rejects them, and control-plane components there can stop working."
            }
            Practice::FailClosedOwnPods => {
                "A webhook with failurePolicy Fail intercepts the creation of its own pods: while it is down, they cannot be created, so it cannot recover by itself."
            }
            Practice::ExactMatchBypass => {
                "A webhook with matchPolicy Exact names some versions of a resource that is served in others too: requests through those versions are not sent to it."
            }
            Practice::SelectsNothing => {
                "A webhook's namespaceSelector or objectSelector has requirements no labels can satisfy together: the webhook is not called for the requests it was meant to intercept."
            }
            Practice::TimeoutsExceedRequest => {
                "Mutating webhooks called one after another for the same request have timeouts that add up to more than kube-apiserver's request timeout: when they are slow, the request times out, whatever their failure policy."
            }
            Practice::ReviewVersionV1beta1 => {
                "A webhook's admissionReviewVersions names v1beta1 before v1, or not v1 at all: kube-apiserver sends it AdmissionReview v1beta1 (the version of API servers before 1.16) and fails the call when the webhook answers in v1."
            }
            Practice::FailClosedNodeHeartbeats => {
                "A webhook with failurePolicy Fail intercepts the node heartbeats (kubelets' updates of nodes/status or of their Leases in kube-node-lease): while it is unavailable, kube-apiserver denies them, and the control plane marks the nodes unreachable and evicts their pods."
            }
        }
    }

    /// The documentation it follows.
    pub fn help_uri(self) -> String {
        match self {
            Practice::ExcludedResource => format!("{DOCS}#matching-requests-rules"),
            Practice::FailClosedKubeSystem => {
                format!("{DOCS}#avoiding-operating-on-the-kube-system-namespace")
            }
            Practice::FailClosedOwnPods => {
                format!("{DOCS}#avoiding-deadlocks-in-self-hosted-webhooks")
            }
            Practice::ExactMatchBypass => format!("{DOCS}#matching-requests-matchpolicy"),
            Practice::SelectsNothing => format!("{DOCS}#matching-requests-namespaceselector"),
            Practice::TimeoutsExceedRequest => format!("{DOCS}#timeouts"),
            Practice::ReviewVersionV1beta1 => format!("{DOCS}#request"),
            Practice::FailClosedNodeHeartbeats => LEASES_DOCS.to_owned(),
        }
    }

    /// Every practice, in id order.
    pub const ALL: [Practice; 8] = [
        Practice::ExcludedResource,
        Practice::FailClosedKubeSystem,
        Practice::FailClosedOwnPods,
        Practice::ExactMatchBypass,
        Practice::SelectsNothing,
        Practice::TimeoutsExceedRequest,
        Practice::ReviewVersionV1beta1,
        Practice::FailClosedNodeHeartbeats,
    ];
}

/// One finding on a webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    /// Its kind.
    #[serde(serialize_with = "practice_id")]
    pub rule: Practice,
    /// The field it is about (`webhooks[0].rules[1]`).
    pub field_ref: String,
    /// What will happen.
    pub message: String,
}

fn practice_id<S: serde::Serializer>(p: &Practice, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.id())
}

/// `exclusion.Excluded()`: (group, resource).
const EXCLUDED: [(&str, &str); 6] = [
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
];

/// The API groups of the namespaced objects the control plane and its add-ons keep in
/// kube-system (pods, config maps, secrets, service accounts, leases, endpoints, events,
/// deployments, daemon sets, roles, ...); `*` names them all. A rule only on other groups (a
/// project's own custom resources) is not flagged.
const CONTROL_PLANE_GROUPS: [&str; 9] = [
    "*",
    "",
    "apps",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "rbac.authorization.k8s.io",
    "policy",
    "batch",
];

/// Built-in resources that are cluster-scoped (a rule that names only these cannot match a
/// request in a namespace).
const CLUSTER_SCOPED: [&str; 22] = [
    "namespaces",
    "nodes",
    "persistentvolumes",
    "clusterroles",
    "clusterrolebindings",
    "customresourcedefinitions",
    "apiservices",
    "storageclasses",
    "csidrivers",
    "csinodes",
    "volumeattachments",
    "priorityclasses",
    "runtimeclasses",
    "ingressclasses",
    "certificatesigningrequests",
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
    "flowschemas",
];

/// The findings on `config`, per webhook in order.
pub fn advise(config: &WebhookConfiguration) -> Vec<Advice> {
    let mut c = config.clone();
    default_configuration(&mut c);
    let mut out = Vec::new();
    for (i, hook) in c.webhooks().iter().enumerate() {
        let path = format!("webhooks[{i}]");
        out.extend(excluded_resources(hook, &path));
        out.extend(selects_nothing(hook, &path));
        out.extend(review_version_v1beta1(hook, &path));
        if hook.failure_policy.as_deref() != Some("Fail") || !matches_every_object(hook) {
            continue;
        }
        if selects_namespace(hook, "kube-system")
            && let Some(j) = hook.rules().iter().position(|r| {
                r.scope.as_deref() != Some("Cluster")
                    && r.api_groups
                        .iter()
                        .flatten()
                        .any(|g| CONTROL_PLANE_GROUPS.contains(&g.as_str()))
                    && r.resources
                        .iter()
                        .flatten()
                        .any(|res| !CLUSTER_SCOPED.contains(&base(res)))
            })
        {
            out.push(Advice {
                rule: Practice::FailClosedKubeSystem,
                field_ref: format!("{path}.rules[{j}]"),
                message: "failurePolicy is Fail and the rule matches requests in kube-system \
                          (the namespaceSelector selects it): while the webhook is unavailable, \
                          kube-apiserver rejects them, and control-plane components there can \
                          stop working; exclude kube-system with the namespaceSelector"
                    .into(),
            });
        }
        let own = hook
            .client_config
            .as_ref()
            .and_then(|cc| cc.service.as_ref())
            .and_then(|s| s.namespace.clone())
            .filter(|ns| !ns.is_empty());
        if let Some(ns) = own
            && selects_namespace(hook, &ns)
            && let Some(j) = hook.rules().iter().position(|r| {
                let group = r
                    .api_groups
                    .iter()
                    .flatten()
                    .any(|g| g.is_empty() || g == "*");
                let ops = r
                    .operations
                    .iter()
                    .flatten()
                    .any(|o| o == "CREATE" || o == "*");
                let pods = r
                    .resources
                    .iter()
                    .flatten()
                    .any(|res| matches!(res.as_str(), "pods" | "*" | "*/*"));
                let scope = r.scope.as_deref() != Some("Cluster");
                group && ops && pods && scope
            })
        {
            out.push(Advice {
                rule: Practice::FailClosedOwnPods,
                field_ref: format!("{path}.rules[{j}]"),
                message: format!(
                    "failurePolicy is Fail and the rule matches pod creation in {ns}, the \
                     namespace of the webhook's own Service: while the webhook is down, its pods \
                     cannot be created, so it cannot recover by itself; exclude {ns} with the \
                     namespaceSelector"
                ),
            });
        }
        out.extend(fail_closed_node_heartbeats(hook, &path));
    }
    out.extend(timeouts_exceed_request(&c));
    out
}

/// A request of a node heartbeat: what kube-apiserver's rule matcher looks at.
struct Heartbeat {
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    /// The namespace of the objects; `None` for cluster-scoped ones.
    namespace: Option<&'static str>,
    /// How the message names it.
    what: &'static str,
}

/// The requests of a kubelet's heartbeats, both UPDATE in admission, through `v1`:
/// k8s.io/kubernetes v1.37.1 `pkg/kubelet/kubelet_node_status.go` `tryUpdateNodeStatus` calls
/// k8s.io/component-helpers `node/util/status.go` `PatchNodeStatus` (a PATCH of `nodes/status`,
/// which admission sees as UPDATE), and `pkg/kubelet/kubelet.go` builds `lease.NewController`
/// with `v1.NamespaceNodeLease`, whose `retryUpdateLease` (component-helpers
/// `apimachinery/lease/controller.go`) updates the node's Lease in kube-node-lease.
const HEARTBEATS: [Heartbeat; 2] = [
    Heartbeat {
        group: "",
        resource: "nodes",
        subresource: "status",
        namespace: None,
        what: "UPDATE of nodes/status",
    },
    Heartbeat {
        group: "coordination.k8s.io",
        resource: "leases",
        subresource: "",
        namespace: Some("kube-node-lease"),
        what: "UPDATE of leases in kube-node-lease",
    },
];

/// Whether rule `r` matches the heartbeat `h`, as k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/predicates/rules/rules.go` `Matcher.Matches` does: the operation
/// (`UPDATE` or `*`), group and version (exact or `*`), scope (`*`, or `Cluster` for
/// cluster-scoped objects and `Namespaced` for the others) and resource: `splitResource` cuts
/// an entry at its first `/`, and each part must be `*` or equal, so `*` alone does not match a
/// subresource while `*/*`, `nodes/*` and `nodes/status` do (and `*/*` matches `leases` too).
/// Other versions are not tried: `nodes` and `leases` are served in `v1` only (k8s.io/kubernetes
/// v1.37.1 `pkg/registry/coordination/rest/storage_coordination.go`: `leases` only in
/// `v1Storage`).
fn rule_matches(r: &crate::apiserver::webhook::RuleWithOperations, h: &Heartbeat) -> bool {
    let has = |items: &Option<Vec<String>>, want: &str| {
        items.iter().flatten().any(|i| i == "*" || i == want)
    };
    let scope = match r.scope.as_deref() {
        None | Some("*") => true,
        Some("Cluster") => h.namespace.is_none(),
        Some("Namespaced") => h.namespace.is_some(),
        Some(_) => false,
    };
    let resource = r.resources.iter().flatten().any(|entry| {
        let (res, sub) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
        (res == "*" || res == h.resource) && (sub == "*" || sub == h.subresource)
    });
    scope
        && has(&r.operations, "UPDATE")
        && has(&r.api_groups, h.group)
        && has(&r.api_versions, "v1")
        && resource
}

/// VAP127: a fail-closed webhook (the caller checked `failurePolicy` and the empty
/// `objectSelector`) whose rules match a heartbeat. A namespaceSelector never exempts a Node (a
/// cluster-scoped object other than a Namespace: k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/predicates/namespace/matcher.go` `MatchNamespaceSelector`); the
/// Leases count only when it certainly selects kube-node-lease ([`selects_namespace`]). A
/// webhook with match conditions is not judged: a condition can leave the kubelets out (the
/// documentation's own example tests `request.userInfo.groups` for `system:nodes`).
fn fail_closed_node_heartbeats(hook: &Webhook, path: &str) -> Option<Advice> {
    if hook
        .match_conditions
        .as_ref()
        .is_some_and(|m| !m.is_empty())
    {
        return None;
    }
    let rules = hook.rules();
    let mut first = None;
    let mut names = Vec::new();
    for h in &HEARTBEATS {
        if let Some(ns) = h.namespace
            && !selects_namespace(hook, ns)
        {
            continue;
        }
        if let Some(j) = rules.iter().position(|r| rule_matches(r, h)) {
            first = Some(first.map_or(j, |f: usize| f.min(j)));
            names.push(h.what);
        }
    }
    let j = first?;
    Some(Advice {
        rule: Practice::FailClosedNodeHeartbeats,
        field_ref: format!("{path}.rules[{j}]"),
        message: format!(
            "failurePolicy is Fail and the rules match the node heartbeats ({}): while the \
             webhook is unavailable, kube-apiserver denies them, and the node lifecycle \
             controller marks the nodes unreachable and evicts their pods; leave the kubelets out (a match condition on \
             request.userInfo.groups containing system:nodes) or use failurePolicy Ignore",
            names.join(", ")
        ),
    })
}

/// `matchPolicy: Exact` rules that name some versions of a resource `groups` (discovery)
/// serves in other versions of the same group too: kube-apiserver sends a request through one
/// of those to the webhook only with `matchPolicy: Equivalent` (k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/predicates/rules` and `generic/webhook.go` `ShouldCallHook`, which
/// tries the equivalent resources only for `Equivalent`), and of the same resource in the other
/// groups of [`CROSS_GROUP_EQUIVALENTS`] when `groups` serves it there. Wildcard groups,
/// versions and resources are not judged.
pub fn exact_match_bypass(
    config: &WebhookConfiguration,
    groups: &[crate::policy::ApiGroupResources],
) -> Vec<Advice> {
    let mut c = config.clone();
    default_configuration(&mut c);
    let mut out = Vec::new();
    for (i, hook) in c.webhooks().iter().enumerate() {
        if hook.match_policy.as_deref() != Some("Exact") {
            continue;
        }
        for (j, r) in hook.rules().iter().enumerate() {
            let versions = r.api_versions.as_deref().unwrap_or_default();
            let wildcard = |l: &[String]| l.iter().any(|x| x == "*");
            if wildcard(versions)
                || wildcard(r.api_groups.as_deref().unwrap_or_default())
                || wildcard(r.resources.as_deref().unwrap_or_default())
            {
                continue;
            }
            for g in r.api_groups.iter().flatten() {
                let Some(group) = groups.iter().find(|x| x.name == *g) else {
                    continue;
                };
                for res in r.resources.iter().flatten() {
                    if res.contains('*') {
                        continue;
                    }
                    let named = group.versions.iter().any(|v| {
                        versions.contains(&v.version) && v.resources.iter().any(|x| x.name == *res)
                    });
                    if !named {
                        continue;
                    }
                    // The versions of `group` (and of the groups kube-apiserver keeps the same
                    // resource with) that serve it and that the rule does not match.
                    let unmatched = |group: &crate::policy::ApiGroupResources| -> Vec<String> {
                        let by_rule = r.api_groups.iter().flatten().any(|x| *x == group.name);
                        group
                            .versions
                            .iter()
                            .filter(|v| !(by_rule && versions.contains(&v.version)))
                            .filter(|v| v.resources.iter().any(|x| x.name == *res))
                            .map(|v| {
                                if group.name.is_empty() {
                                    v.version.clone()
                                } else {
                                    format!("{}/{}", group.name, v.version)
                                }
                            })
                            .collect()
                    };
                    let mut other = unmatched(group);
                    let mut across = false;
                    for eq in equivalent_groups(g, res) {
                        if let Some(eg) = groups.iter().find(|x| x.name == eq) {
                            let more = unmatched(eg);
                            across |= !more.is_empty();
                            other.extend(more);
                        }
                    }
                    if other.is_empty() {
                        continue;
                    }
                    let them = if other.len() == 1 { "it" } else { "them" };
                    let message = if across {
                        format!(
                            "matchPolicy is Exact and {res} is also served as {} (the same \
                             objects, stored once): requests through {them} are not sent to the \
                             webhook; use matchPolicy Equivalent or name every group and version",
                            other.join(", ")
                        )
                    } else {
                        format!(
                            "matchPolicy is Exact and {res} is also served as {}: requests \
                             through {them} are not sent to the webhook; use matchPolicy \
                             Equivalent or name every version",
                            other.join(", ")
                        )
                    };
                    out.push(Advice {
                        rule: Practice::ExactMatchBypass,
                        field_ref: format!("webhooks[{i}].rules[{j}]"),
                        message,
                    });
                }
            }
        }
    }
    out
}

/// Resources kube-apiserver 1.37 serves in two groups as one (the same objects): its
/// `EquivalentResourceRegistry` keys each resource by its storage prefix (k8s.io/apiserver
/// v0.37.1 `pkg/server/config.go` `Complete`, `NewEquivalentResourceRegistryWithIdentity` over
/// `RESTOptionsGetter.GetRESTOptions(...).ResourcePrefix`), and the storage factory gives
/// cohabitating resources one prefix (`pkg/server/storage/storage_factory.go`
/// `ResourcePrefix`, `getStorageGroupResource`). Of the pairs k8s.io/kubernetes v1.37.1 declares
/// (`pkg/kubeapiserver/default_storage_factory_builder.go`, `completedStorageFactoryConfig.New`:
/// `AddCohabitatingResources`), the others name a group 1.37 no longer serves (`extensions`:
/// deployments, daemonsets, replicasets, networkpolicies, ingresses, replicationcontrollers'
/// scale; `policy` podsecuritypolicies, removed in 1.25), so only Events remain: a request
/// through one group is matched by an `Equivalent` webhook of the other (the registry's
/// `EquivalentResourcesFor`, tried by `generic/webhook.go` `ShouldCallHook`).
pub const CROSS_GROUP_EQUIVALENTS: [(&str, &str, &str); 1] = [("", "events.k8s.io", "events")];

/// The other groups that serve `res` of group `g` as the same objects.
fn equivalent_groups<'a>(g: &'a str, res: &'a str) -> impl Iterator<Item = &'static str> + 'a {
    CROSS_GROUP_EQUIVALENTS
        .iter()
        .filter(move |(_, _, r)| *r == res)
        .filter_map(move |(a, b, _)| {
            if *a == g {
                Some(*b)
            } else if *b == g {
                Some(*a)
            } else {
                None
            }
        })
}

/// The resource of `res` without its subresource.
fn base(res: &str) -> &str {
    res.split('/').next().unwrap_or(res)
}

/// `excludedResourcesNamedByRule` of every rule: the warning text without its field.
fn excluded_resources(hook: &Webhook, path: &str) -> Vec<Advice> {
    let mut out = Vec::new();
    for (j, r) in hook.rules().iter().enumerate() {
        let groups = r.api_groups.as_deref().unwrap_or_default();
        let resources = r.resources.as_deref().unwrap_or_default();
        if groups.iter().any(|g| g == "*") || resources.iter().any(|r| r == "*") {
            continue;
        }
        let mut seen = Vec::new();
        for g in groups {
            for res in resources {
                let gr = (g.as_str(), res.as_str());
                if EXCLUDED.contains(&gr) && !seen.contains(&gr) {
                    seen.push(gr);
                    // schema.GroupResource.String: `resource.group` (`resource` without one).
                    let name = if g.is_empty() {
                        res.clone()
                    } else {
                        format!("{res}.{g}")
                    };
                    out.push(Advice {
                        rule: Practice::ExcludedResource,
                        field_ref: format!("{path}.rules[{j}]"),
                        message: format!(
                            "{name} is excluded from admission webhooks; this rule will have no effect"
                        ),
                    });
                }
            }
        }
    }
    out
}

/// A selector whose requirements conflict outright (the same key `In` disjoint sets, `In` and a
/// `NotIn` of all its values, or required and `DoesNotExist`; [`selector::may_overlap`] of the
/// selector with itself). kube-apiserver matches them as follows (k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/predicates/namespace/matcher.go` `MatchNamespaceSelector`: a
/// cluster-scoped object other than a Namespace is never exempted by the namespaceSelector;
/// `predicates/object/matcher.go` `MatchObjectSelector`: the new or the old object's labels
/// must match), so a namespaceSelector that selects nothing leaves only other cluster-scoped
/// objects, and an objectSelector that selects nothing leaves no request at all.
fn selects_nothing(hook: &Webhook, path: &str) -> Vec<Advice> {
    let mut out = Vec::new();
    let selectors = [
        ("namespaceSelector", &hook.namespace_selector),
        ("objectSelector", &hook.object_selector),
    ];
    for (field, sel) in selectors {
        let Some(sel) = sel else { continue };
        let Ok(parsed) = selector::parse(Some(sel), field) else {
            continue; // kube-apiserver rejects it on create: the verdict says why.
        };
        if selector::may_overlap(&parsed, &parsed) {
            continue;
        }
        let message = if field == "namespaceSelector" {
            "the namespaceSelector selects no namespace (its requirements contradict each \
             other): the webhook is never called for namespaced objects or Namespaces, only for \
             other cluster-scoped objects its rules match"
        } else {
            "the objectSelector selects no object (its requirements contradict each other): the \
             webhook is never called"
        };
        out.push(Advice {
            rule: Practice::SelectsNothing,
            field_ref: format!("{path}.{field}"),
            message: message.into(),
        });
    }
    out
}

/// The AdmissionReview version kube-apiserver sends is the first of `admissionReviewVersions`
/// it supports, v1 or v1beta1 (k8s.io/apiserver v0.37.1
/// `admission/plugin/webhook/request/admissionreview.go` `CreateAdmissionObjects`; others are
/// skipped), and decodes the answer into that version: an answer in v1 to a v1beta1 review
/// fails the call with `converting (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown
/// conversion` (admission.k8s.io has no conversions between its versions; the dispatchers'
/// `Do(ctx).Into(response)`, `validating/dispatcher.go` `callHook`). kube-apiserver
/// accepts a list without v1 on create (k8s.io/kubernetes v1.37.1
/// `pkg/apis/admissionregistration/validation/validation.go` `validateAdmissionReviewVersions`
/// requires one of v1 and v1beta1). Proven in e2e_webhooks,
/// `review_versions_decide_what_the_webhook_receives`.
fn review_version_v1beta1(hook: &Webhook, path: &str) -> Option<Advice> {
    let versions = hook.admission_review_versions.as_deref()?;
    let sent = versions.iter().find(|v| *v == "v1" || *v == "v1beta1")?;
    if sent != "v1beta1" {
        return None;
    }
    let listed = if versions.iter().any(|v| v == "v1") {
        "lists v1beta1 before v1"
    } else {
        "does not list v1"
    };
    Some(Advice {
        rule: Practice::ReviewVersionV1beta1,
        field_ref: format!("{path}.admissionReviewVersions"),
        message: format!(
            "admissionReviewVersions {listed}: kube-apiserver sends the webhook AdmissionReview \
             admission.k8s.io/v1beta1 (the first version it supports in the list) and takes only \
             a v1beta1 answer: a webhook that answers in v1 fails every call (converting \
             (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown conversion); put v1 first"
        ),
    })
}

/// kube-apiserver's default `--request-timeout`: the deadline `WithRequestDeadline`
/// (k8s.io/apiserver v0.37.1 `pkg/endpoints/filters/request_deadline.go`) gives a request
/// that names no `timeout` of its own (`pkg/server/config.go` `NewConfig`: 60 s).
const REQUEST_TIMEOUT_SECONDS: i64 = 60;

/// The mutating webhooks of `c` (defaulted) that kube-apiserver calls one after another
/// (k8s.io/apiserver v0.37.1 `admission/plugin/webhook/mutating/dispatcher.go`
/// `mutatingDispatcher.Dispatch`, in order) for one request, when their timeouts add up to more
/// than [`REQUEST_TIMEOUT_SECONDS`]. Each call gets its own timeout, cut to what is left of the
/// request's deadline; once that has passed, the dispatcher gives up ("request did not complete
/// within requested timeout"), also when the webhook's failure policy is `Ignore`, and the
/// request's handler has timed out (`WithTimeoutForNonLongRunningRequests`): the client gets no
/// answer (e2e_webhooks, `timeouts_beyond_the_request_deadline_fail_even_with_ignore`). A request is
/// an (operation, group, version, resource) that a rule names; wildcards match what the other
/// rules name. Selectors and match conditions are not looked at (they may keep some webhooks
/// from being called), nor reinvocation (which can call a webhook a second time).
fn timeouts_exceed_request(c: &WebhookConfiguration) -> Option<Advice> {
    if c.kind != crate::apiserver::webhook::WebhookKind::Mutating {
        return None;
    }
    let hooks = c.webhooks();
    let named = |f: fn(&crate::apiserver::webhook::RuleWithOperations) -> &Option<Vec<String>>| {
        let mut v: Vec<String> = hooks
            .iter()
            .flat_map(|h| h.rules())
            .flat_map(|r| f(r).iter().flatten().cloned())
            .filter(|x| x != "*" && !x.contains('*'))
            .collect();
        v.sort();
        v.dedup();
        if v.is_empty() {
            v.push("*".into());
        }
        v
    };
    let ops = named(|r| &r.operations);
    let groups = named(|r| &r.api_groups);
    let versions = named(|r| &r.api_versions);
    let resources = named(|r| &r.resources);
    let matches = |list: &Option<Vec<String>>, value: &str, resource: bool| {
        list.iter().flatten().any(|x| {
            x == "*"
                || x == value
                || (resource && x == "*/*")
                || (resource
                    && x.split_once('/')
                        .is_some_and(|(a, b)| b == "*" && a == value))
        })
    };
    let mut worst: Option<(i64, Vec<usize>, String)> = None;
    for op in &ops {
        for g in &groups {
            for v in &versions {
                for res in &resources {
                    let called: Vec<usize> = hooks
                        .iter()
                        .enumerate()
                        .filter(|(_, h)| {
                            h.rules().iter().any(|r| {
                                matches(&r.operations, op, false)
                                    && matches(&r.api_groups, g, false)
                                    && matches(&r.api_versions, v, false)
                                    && matches(&r.resources, res, true)
                            })
                        })
                        .map(|(i, _)| i)
                        .collect();
                    let total: i64 = called
                        .iter()
                        .map(|i| i64::from(hooks[*i].timeout_seconds.unwrap_or(10)))
                        .sum();
                    if total > REQUEST_TIMEOUT_SECONDS
                        && worst.as_ref().is_none_or(|(t, _, _)| total > *t)
                    {
                        let gv = if g.is_empty() {
                            v.clone()
                        } else {
                            format!("{g}/{v}")
                        };
                        worst = Some((total, called, format!("{op} {res} ({gv})")));
                    }
                }
            }
        }
    }
    let (total, called, request) = worst?;
    // The first webhook whose call may be cut short by the request's deadline.
    let mut sum = 0;
    let cut = called
        .iter()
        .copied()
        .find(|i| {
            sum += i64::from(hooks[*i].timeout_seconds.unwrap_or(10));
            sum > REQUEST_TIMEOUT_SECONDS
        })
        .unwrap_or(0);
    let list: Vec<String> = called.iter().map(|i| format!("webhooks[{i}]")).collect();
    Some(Advice {
        rule: Practice::TimeoutsExceedRequest,
        field_ref: format!("webhooks[{cut}].timeoutSeconds"),
        message: format!(
            "{} are called one after another for {request} and their timeouts add up to {total} \
             s, more than the {REQUEST_TIMEOUT_SECONDS} s kube-apiserver gives a request by \
             default (--request-timeout): when they are slow, kube-apiserver gives up on the \
             request at that deadline and the request fails, even with failurePolicy Ignore; \
             lower their timeoutSeconds",
            list.join(", ")
        ),
    })
}

/// Whether the webhook's `objectSelector` selects every object (empty after defaulting).
fn matches_every_object(hook: &Webhook) -> bool {
    selector::parse(hook.object_selector.as_ref(), "objectSelector")
        .is_ok_and(|s| s.is_everything())
}

/// The label kube-apiserver sets on every namespace (its name).
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether the `namespaceSelector` certainly selects the namespace `name`: it selects the
/// namespace as kube-apiserver creates it and looks at no other label (a requirement on another
/// label may exclude it in a cluster, as an installer's label on its own namespace does).
fn selects_namespace(hook: &Webhook, name: &str) -> bool {
    let only_name_label = hook.namespace_selector.as_ref().is_none_or(|s| {
        s.match_labels
            .iter()
            .flatten()
            .all(|(k, _)| k == NAME_LABEL)
            && s.match_expressions
                .iter()
                .flatten()
                .all(|e| e.key == NAME_LABEL)
    });
    let labels = BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())]);
    only_name_label
        && selector::parse(hook.namespace_selector.as_ref(), "namespaceSelector")
            .is_ok_and(|s| s.matches(&labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::webhook::{WebhookKind, read_configuration};
    use serde_json::json;

    fn config(hook: serde_json::Value) -> WebhookConfiguration {
        read_configuration(
            WebhookKind::Validating,
            &json!({"metadata": {"name": "c"}, "webhooks": [hook]}),
        )
        .unwrap()
    }

    fn rules(a: &[Advice]) -> Vec<(&'static str, &str)> {
        a.iter()
            .map(|a| (a.rule.id(), a.field_ref.as_str()))
            .collect()
    }

    #[test]
    fn excluded_resources_as_kube_apiserver_warns() {
        let a = advise(&config(json!({
        "name": "a.b.c", "failurePolicy": "Ignore",
        "rules": [
            {"apiGroups": ["authentication.k8s.io", "authorization.k8s.io"], "apiVersions": ["v1"],
             "operations": ["CREATE"], "resources": ["tokenreviews", "subjectaccessreviews", "tokenreviews"]},
            {"apiGroups": ["*"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["tokenreviews"]}
        ]})));
        let messages: Vec<&str> = a.iter().map(|a| a.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "tokenreviews.authentication.k8s.io is excluded from admission webhooks; this rule will have no effect",
                "subjectaccessreviews.authorization.k8s.io is excluded from admission webhooks; this rule will have no effect",
            ]
        );
    }

    #[test]
    fn mutating_timeouts_that_exceed_the_request_timeout() {
        let mutating = |hooks: serde_json::Value| {
            read_configuration(
                WebhookKind::Mutating,
                &json!({"metadata": {"name": "c"}, "webhooks": hooks}),
            )
            .unwrap()
        };
        let hook = |name: &str, resources: serde_json::Value, timeout: i32| {
            json!({"name": name, "failurePolicy": "Ignore", "timeoutSeconds": timeout,
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": resources}]})
        };
        let three = mutating(json!([
            hook("a.x.y", json!(["pods"]), 30),
            hook("b.x.y", json!(["*"]), 20),
            hook("c.x.y", json!(["pods", "configmaps"]), 15),
            hook("d.x.y", json!(["secrets"]), 30),
        ]));
        let a = advise(&three);
        assert_eq!(rules(&a), [("VAP125", "webhooks[2].timeoutSeconds")]);
        assert!(
            a[0].message.starts_with(
                "webhooks[0], webhooks[1], webhooks[2] are called one after another for CREATE pods (v1) and their timeouts add up to 65 s"
            ),
            "{}",
            a[0].message
        );
        // At most 60 s, or calls that never meet in one request: nothing.
        let fine = mutating(json!([
            hook("a.x.y", json!(["pods"]), 30),
            hook("b.x.y", json!(["pods"]), 30),
            hook("c.x.y", json!(["configmaps"]), 30),
        ]));
        assert_eq!(rules(&advise(&fine)), []);
        // Validating webhooks are called in parallel.
        let validating = config(hook("a.x.y", json!(["pods"]), 30));
        assert_eq!(rules(&advise(&validating)), []);
    }

    #[test]
    fn selectors_that_select_nothing() {
        let hook = |ns: serde_json::Value, obj: serde_json::Value| {
            json!({"name": "a.b.c", "failurePolicy": "Ignore",
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
                "namespaceSelector": ns, "objectSelector": obj})
        };
        let name = "kubernetes.io/metadata.name";
        let contradiction = json!({"matchLabels": {name: "a"},
            "matchExpressions": [{"key": name, "operator": "NotIn", "values": ["a", "b"]}]});
        assert_eq!(
            rules(&advise(&config(hook(contradiction.clone(), json!({}))))),
            [("VAP124", "webhooks[0].namespaceSelector")]
        );
        let absent = json!({"matchExpressions": [{"key": "team", "operator": "Exists"},
            {"key": "team", "operator": "DoesNotExist"}]});
        assert_eq!(
            rules(&advise(&config(hook(json!({}), absent)))),
            [("VAP124", "webhooks[0].objectSelector")]
        );
        let disjoint = json!({"matchExpressions": [{"key": "t", "operator": "In", "values": ["x"]},
            {"key": "t", "operator": "In", "values": ["y"]}]});
        assert_eq!(
            rules(&advise(&config(hook(disjoint, json!({}))))),
            [("VAP124", "webhooks[0].namespaceSelector")]
        );
        // Satisfiable: NotIn holds for an absent key; In and NotIn leave a value; other keys.
        for fine in [
            json!({}),
            json!({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]},
                {"key": "t", "operator": "DoesNotExist"}]}),
            json!({"matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]},
                {"key": "t", "operator": "NotIn", "values": ["x"]}]}),
            json!({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}),
        ] {
            assert_eq!(rules(&advise(&config(hook(fine.clone(), fine)))), []);
        }
    }

    #[test]
    fn fail_closed_on_kube_system_and_own_pods() {
        let hook = |ns_selector: serde_json::Value, object_selector: serde_json::Value| {
            json!({"name": "a.b.c",
                "clientConfig": {"service": {"namespace": "hooks", "name": "svc"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["pods"]}],
                "namespaceSelector": ns_selector, "objectSelector": object_selector})
        };
        assert_eq!(
            rules(&advise(&config(hook(json!({}), json!({}))))),
            [
                ("VAP121", "webhooks[0].rules[0]"),
                ("VAP122", "webhooks[0].rules[0]")
            ]
        );
        let not_system = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
            "operator": "NotIn", "values": ["kube-system", "hooks"]}]});
        assert_eq!(rules(&advise(&config(hook(not_system, json!({}))))), []);
        let labelled = json!({"matchLabels": {"inject": "true"}});
        assert_eq!(
            rules(&advise(&config(hook(json!({}), labelled.clone())))),
            []
        );
        // A namespace label other than its name may exclude it in a cluster: not judged.
        let opt_out = json!({"matchExpressions": [{"key": "webhooks", "operator": "NotIn",
            "values": ["disabled"]}]});
        assert_eq!(rules(&advise(&config(hook(opt_out, json!({}))))), []);
        let mut ignore = hook(json!({}), json!({}));
        ignore["failurePolicy"] = json!("Ignore");
        assert_eq!(rules(&advise(&config(ignore))), []);
    }

    #[test]
    fn fail_closed_on_node_heartbeats() {
        let hook = |rules: serde_json::Value| {
            json!({"name": "a.b.c", "failurePolicy": "Fail", "rules": rules,
                "clientConfig": {"url": "https://hooks.example/validate"}})
        };
        let rule = |groups: serde_json::Value, ops: serde_json::Value, res: serde_json::Value| json!({"apiGroups": groups, "apiVersions": ["v1"], "operations": ops, "resources": res});
        let advice = |h: serde_json::Value| advise(&config(h));
        // nodes/status, nodes/*, */* (with scope Cluster) and leases each match.
        for (rules, what) in [
            (
                json!([rule(
                    json!([""]),
                    json!(["UPDATE"]),
                    json!(["nodes/status"])
                )]),
                "UPDATE of nodes/status",
            ),
            (
                json!([rule(json!(["*"]), json!(["*"]), json!(["nodes/*"]))]),
                "UPDATE of nodes/status",
            ),
            (
                json!([{"apiGroups": [""], "apiVersions": ["*"], "operations": ["UPDATE"],
                    "resources": ["*/*"], "scope": "Cluster"}]),
                "UPDATE of nodes/status",
            ),
            (
                json!([rule(
                    json!(["coordination.k8s.io"]),
                    json!(["UPDATE"]),
                    json!(["leases"])
                )]),
                "UPDATE of leases in kube-node-lease",
            ),
            (
                json!([rule(json!(["*"]), json!(["*"]), json!(["*/*"]))]),
                "UPDATE of nodes/status, UPDATE of leases in kube-node-lease",
            ),
        ] {
            let a = advice(hook(rules.clone()));
            assert_eq!(rules_of(&a, "VAP127"), ["webhooks[0].rules[0]"], "{rules}");
            let m = &a.iter().find(|a| a.rule.id() == "VAP127").unwrap().message;
            assert!(
                m.starts_with(&format!(
                    "failurePolicy is Fail and the rules match the node heartbeats ({what}): "
                )),
                "{m}"
            );
        }
        // The second rule is the one that matches.
        let second = hook(json!([
            rule(json!([""]), json!(["CREATE"]), json!(["nodes/status"])),
            rule(json!([""]), json!(["UPDATE"]), json!(["nodes/status"])),
        ]));
        assert_eq!(
            rules_of(&advice(second), "VAP127"),
            ["webhooks[0].rules[1]"]
        );
        // A namespaceSelector does not exempt Nodes, it does exempt kube-node-lease.
        let mut ns_selector = hook(json!([
            rule(json!([""]), json!(["UPDATE"]), json!(["nodes/status"])),
            rule(
                json!(["coordination.k8s.io"]),
                json!(["UPDATE"]),
                json!(["leases"])
            ),
        ]));
        ns_selector["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
        let a = advice(ns_selector);
        assert_eq!(rules_of(&a, "VAP127"), ["webhooks[0].rules[0]"]);
        assert!(
            a[0].message.contains("(UPDATE of nodes/status): "),
            "{}",
            a[0].message
        );

        // No finding: Ignore, an objectSelector, match conditions, `nodes` alone or `*` (no
        // subresource), CREATE only, scope Namespaced for nodes, another group or version,
        // leases with kube-node-lease left out by the namespaceSelector.
        let status = json!([rule(
            json!([""]),
            json!(["UPDATE"]),
            json!(["nodes/status"])
        )]);
        let mut ignore = hook(status.clone());
        ignore["failurePolicy"] = json!("Ignore");
        let mut selected = hook(status.clone());
        selected["objectSelector"] = json!({"matchLabels": {"inject": "true"}});
        let mut conditions = hook(status.clone());
        conditions["matchConditions"] = json!([{"name": "not-nodes", "expression": "!('system:nodes' in request.userInfo.groups)"}]);
        let mut other_namespace = hook(json!([rule(
            json!(["coordination.k8s.io"]),
            json!(["*"]),
            json!(["leases"])
        )]));
        other_namespace["namespaceSelector"] = json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["kube-system"]}]});
        for h in [
            ignore,
            selected,
            conditions,
            other_namespace,
            hook(json!([rule(
                json!([""]),
                json!(["UPDATE", "CREATE"]),
                json!(["nodes"])
            )])),
            hook(json!([rule(json!([""]), json!(["*"]), json!(["*"]))])),
            hook(json!([rule(
                json!([""]),
                json!(["CREATE"]),
                json!(["nodes/status"])
            )])),
            hook(
                json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                "resources": ["nodes/status"], "scope": "Namespaced"}]),
            ),
            hook(json!([rule(
                json!(["apps"]),
                json!(["UPDATE"]),
                json!(["nodes/status"])
            )])),
            hook(
                json!([{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1beta1"],
                "operations": ["UPDATE"], "resources": ["leases"]}]),
            ),
            hook(json!([rule(
                json!([""]),
                json!(["UPDATE"]),
                json!(["nodes/proxy"])
            )])),
        ] {
            assert_eq!(
                rules_of(&advice(h.clone()), "VAP127"),
                Vec::<&str>::new(),
                "{h}"
            );
        }
    }

    fn rules_of<'a>(a: &'a [Advice], id: &str) -> Vec<&'a str> {
        a.iter()
            .filter(|a| a.rule.id() == id)
            .map(|a| a.field_ref.as_str())
            .collect()
    }

    fn served(group: &str, versions: &[(&str, &[&str])]) -> crate::policy::ApiGroupResources {
        use crate::policy::restmapper::{ApiResource, ApiVersionResources};
        crate::policy::ApiGroupResources {
            name: group.into(),
            preferred_version: versions[0].0.into(),
            versions: versions
                .iter()
                .map(|(v, resources)| ApiVersionResources {
                    version: (*v).into(),
                    resources: resources
                        .iter()
                        .map(|r| ApiResource {
                            name: (*r).into(),
                            namespaced: true,
                            ..ApiResource::default()
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn exact_match_is_bypassed_through_the_equivalent_group() {
        let groups = [
            served("", &[("v1", &["events", "configmaps"])]),
            served("events.k8s.io", &[("v1", &["events"])]),
            served("example.com", &[("v1", &["widgets"]), ("v2", &["widgets"])]),
        ];
        let hook = |policy: &str, groups: serde_json::Value, resources: serde_json::Value| {
            config(
                json!({"name": "a.b.c", "failurePolicy": "Fail", "matchPolicy": policy,
                "rules": [{"apiGroups": groups, "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": resources}]}),
            )
        };
        let core = exact_match_bypass(&hook("Exact", json!([""]), json!(["events"])), &groups);
        assert_eq!(rules(&core), [("VAP123", "webhooks[0].rules[0]")]);
        assert_eq!(
            core[0].message,
            "matchPolicy is Exact and events is also served as events.k8s.io/v1 (the same objects, stored once): requests through it are not sent to the webhook; use matchPolicy Equivalent or name every group and version"
        );
        let new_group = exact_match_bypass(
            &hook("Exact", json!(["events.k8s.io"]), json!(["events"])),
            &groups,
        );
        assert_eq!(
            new_group[0].message,
            "matchPolicy is Exact and events is also served as v1 (the same objects, stored once): requests through it are not sent to the webhook; use matchPolicy Equivalent or name every group and version"
        );
        // Both groups named, Equivalent, another resource of the core group, or events.k8s.io
        // not served: nothing.
        for (policy, g, r, served_groups) in [
            (
                "Exact",
                json!(["", "events.k8s.io"]),
                json!(["events"]),
                &groups[..],
            ),
            ("Equivalent", json!([""]), json!(["events"]), &groups[..]),
            ("Exact", json!([""]), json!(["configmaps"]), &groups[..]),
            ("Exact", json!([""]), json!(["events"]), &groups[..1]),
        ] {
            let a = exact_match_bypass(&hook(policy, g.clone(), r.clone()), served_groups);
            assert_eq!(rules(&a), [], "{policy} {g} {r}");
        }
        // The same group's other versions keep their text.
        let widgets = exact_match_bypass(
            &hook("Exact", json!(["example.com"]), json!(["widgets"])),
            &groups,
        );
        assert_eq!(
            widgets[0].message,
            "matchPolicy is Exact and widgets is also served as example.com/v2: requests through it are not sent to the webhook; use matchPolicy Equivalent or name every version"
        );
    }

    #[test]
    fn review_version_is_the_first_one_kube_apiserver_supports() {
        let hook = |versions: serde_json::Value| {
            json!({"name": "a.b.c", "failurePolicy": "Ignore", "admissionReviewVersions": versions,
                "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["widgets"]}]})
        };
        let field = [("VAP126", "webhooks[0].admissionReviewVersions")];
        for (versions, flagged) in [
            (json!(["v1beta1"]), true),
            (json!(["v1beta1", "v1"]), true),
            (json!(["v2", "v1beta1", "v1"]), true),
            (json!(["v1", "v1beta1"]), false),
            (json!(["v2", "v1"]), false),
            (json!(["v1"]), false),
            // None supported: kube-apiserver rejects it on create (the verdict says why).
            (json!(["v2"]), false),
        ] {
            let a = advise(&config(hook(versions.clone())));
            let want: &[(&str, &str)] = if flagged { &field } else { &[] };
            assert_eq!(rules(&a), want, "{versions}");
        }
        let a = advise(&config(hook(json!(["v1beta1"]))));
        assert_eq!(
            a[0].message,
            "admissionReviewVersions does not list v1: kube-apiserver sends the webhook AdmissionReview admission.k8s.io/v1beta1 (the first version it supports in the list) and takes only a v1beta1 answer: a webhook that answers in v1 fails every call (converting (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown conversion); put v1 first"
        );
        let a = advise(&config(hook(json!(["v1beta1", "v1"]))));
        assert!(
            a[0].message
                .starts_with("admissionReviewVersions lists v1beta1 before v1: ")
        );
    }
}
