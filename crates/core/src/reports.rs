//! Policy reports (issue 34, item 1): what vapcheck found on one object, as the body of one
//! report in the API the cluster serves, `openreports.io/v1alpha1` `ClusterReport` or the
//! former `wgpolicyk8s.io/v1alpha2` `ClusterPolicyReport` (for a namespaced object, the
//! namespaced `Report` or `PolicyReport` in its namespace).
//!
//! Pure: the controller (`controller::reports`) detects the API, applies the body with
//! server-side apply and deletes it. The shapes follow the CRDs of the pinned modules
//! (scripts/tools.version): `github.com/openreports/reports-api` v0.2.1
//! `apis/openreports.io/v1alpha1/report_types.go` (`Report`, `ReportResult`, `ReportSummary`)
//! and Kyverno's `config/crds/policyreport/wgpolicyk8s.io_clusterpolicyreports.yaml` (the same
//! result shape, without the report-level `source`).
//!
//! One report per object (policy, binding, webhook configuration): [`Subject`] names it, and
//! one function per kind turns its check results into [`Entry`]s: a policy's from its
//! findings ([`finding_entries`] over [`crate::finding::produce_status`]; [`policy_entries`]
//! from its status), [`binding_entries`], [`webhook_entries`]. A new kind needs only such a
//! function and a [`SubjectKind`].
//! docs/reports.md has the mapping.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bindings::{BindingReport, Verdict};
use crate::finding::{Class, Finding, Rule as FindingRule};
#[cfg(test)]
use crate::policy::Gvk;
use crate::policy::PolicyStatus;
use crate::policy::narrowing::FindingClass;
use crate::suppress::{ANNOTATION, Directive};

/// The `source` of every report and result vapcheck writes.
pub const SOURCE: &str = "vapcheck";
/// The label every report vapcheck writes carries (`app.kubernetes.io/managed-by`).
pub const MANAGED_BY: &str = "vapcheck";

/// Rule ids of the results (the CLI's SARIF rule ids where the finding is the same).
pub mod rule {
    /// kube-apiserver rejects the object on create (`AcceptedOnCreate=False`).
    pub const REJECTED: &str = "VAP001";
    /// A type-checking warning of an expression for a matched kind.
    pub const TYPE_WARNING: &str = "VAP100";
    /// A matched kind that was not type-checked.
    pub const KIND_NOT_CHECKED: &str = "VAP101";
    /// An expression that errors at admission on valid objects.
    pub const RUNTIME_ERROR: &str = "VAP110";
    /// A binding that denies every request it matches.
    pub const BINDING_DENIES_ALL: &str = "VAP130";
    /// A binding that never evaluates anything.
    pub const BINDING_INACTIVE: &str = "VAP131";
    /// A binding that evaluates a policy with type-checking warnings on the kinds it matches.
    pub const BINDING_WITH_WARNINGS: &str = "VAP132";
}

/// The report APIs vapcheck writes, in order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportApi {
    /// `openreports.io/v1alpha1` `ClusterReport`.
    OpenReports,
    /// `wgpolicyk8s.io/v1alpha2` `ClusterPolicyReport`.
    WgPolicy,
}

impl ReportApi {
    /// Both, the preferred one first.
    pub const ALL: [ReportApi; 2] = [ReportApi::OpenReports, ReportApi::WgPolicy];

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "openreports.io",
            ReportApi::WgPolicy => "wgpolicyk8s.io",
        }
    }
    /// The version.
    pub fn version(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "v1alpha1",
            ReportApi::WgPolicy => "v1alpha2",
        }
    }
    /// The cluster-scoped kind.
    pub fn kind(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "ClusterReport",
            ReportApi::WgPolicy => "ClusterPolicyReport",
        }
    }
    /// Its resource (plural).
    pub fn resource(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "clusterreports",
            ReportApi::WgPolicy => "clusterpolicyreports",
        }
    }
    /// The namespaced kind (the report of a namespaced object, in its namespace: an owner is
    /// in its dependent's namespace or cluster-scoped, k8s.io/apimachinery v0.37.1
    /// `pkg/apis/meta/v1/types.go`, `OwnerReference`, so a cluster-scoped report cannot be
    /// owned by a namespaced object).
    pub fn namespaced_kind(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "Report",
            ReportApi::WgPolicy => "PolicyReport",
        }
    }
    /// The namespaced kind's resource (plural).
    pub fn namespaced_resource(self) -> &'static str {
        match self {
            ReportApi::OpenReports => "reports",
            ReportApi::WgPolicy => "policyreports",
        }
    }
    /// The kind and resource of the report on an object of `subject`: namespaced for a
    /// namespaced object.
    pub fn kind_for(self, subject: SubjectKind) -> (&'static str, &'static str) {
        if subject.namespaced() {
            (self.namespaced_kind(), self.namespaced_resource())
        } else {
            (self.kind(), self.resource())
        }
    }
    /// `group/version`.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }
}

/// The kinds of object vapcheck reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubjectKind {
    /// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy.
    ValidatingPolicy,
    /// `admissionregistration.k8s.io/v1` MutatingAdmissionPolicy.
    MutatingPolicy,
    /// `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicyBinding.
    ValidatingBinding,
    /// `admissionregistration.k8s.io/v1` MutatingAdmissionPolicyBinding.
    MutatingBinding,
    /// `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration.
    ValidatingWebhooks,
    /// `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration.
    MutatingWebhooks,
    /// Kyverno's `policies.kyverno.io/v1` ValidatingPolicy.
    KyvernoValidatingPolicy,
    /// Gatekeeper's `templates.gatekeeper.sh/v1` ConstraintTemplate.
    ConstraintTemplate,
    /// Kyverno's `policies.kyverno.io/v1` NamespacedValidatingPolicy (namespaced).
    KyvernoNamespacedValidatingPolicy,
}

impl SubjectKind {
    /// The object's kind.
    pub fn kind(self) -> &'static str {
        match self {
            SubjectKind::ValidatingPolicy => "ValidatingAdmissionPolicy",
            SubjectKind::MutatingPolicy => "MutatingAdmissionPolicy",
            SubjectKind::ValidatingBinding => "ValidatingAdmissionPolicyBinding",
            SubjectKind::MutatingBinding => "MutatingAdmissionPolicyBinding",
            SubjectKind::ValidatingWebhooks => "ValidatingWebhookConfiguration",
            SubjectKind::MutatingWebhooks => "MutatingWebhookConfiguration",
            SubjectKind::KyvernoValidatingPolicy => "ValidatingPolicy",
            SubjectKind::ConstraintTemplate => "ConstraintTemplate",
            SubjectKind::KyvernoNamespacedValidatingPolicy => "NamespacedValidatingPolicy",
        }
    }
    /// Whether its objects are namespaced (their reports are then in their namespace).
    pub fn namespaced(self) -> bool {
        self == SubjectKind::KyvernoNamespacedValidatingPolicy
    }
    /// The object's apiVersion (the version the controller watches).
    pub fn api_version(self) -> &'static str {
        match self {
            SubjectKind::KyvernoValidatingPolicy
            | SubjectKind::KyvernoNamespacedValidatingPolicy => "policies.kyverno.io/v1",
            SubjectKind::ConstraintTemplate => "templates.gatekeeper.sh/v1",
            _ => "admissionregistration.k8s.io/v1",
        }
    }
    /// The prefix of its report's name: one per kind, so objects of different kinds with the
    /// same name get different reports.
    fn prefix(self) -> &'static str {
        match self {
            SubjectKind::ValidatingPolicy => "vap",
            SubjectKind::MutatingPolicy => "map",
            SubjectKind::ValidatingBinding => "vapb",
            SubjectKind::MutatingBinding => "mapb",
            SubjectKind::ValidatingWebhooks => "vwc",
            SubjectKind::MutatingWebhooks => "mwc",
            SubjectKind::KyvernoValidatingPolicy => "kvpol",
            SubjectKind::ConstraintTemplate => "ct",
            SubjectKind::KyvernoNamespacedValidatingPolicy => "knvpol",
        }
    }
}

/// The object a report is about (its scope and owner).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject {
    /// Its kind.
    pub kind: SubjectKind,
    /// `metadata.name`; for a namespaced kind `<namespace>/<name>` (a name has no `/`, so the
    /// two parts are unambiguous).
    pub name: String,
    /// `metadata.uid` (the owner reference needs it).
    pub uid: String,
}

/// The maximum length of a custom resource's name (a DNS subdomain, k8s.io/apimachinery
/// v0.37.1 `pkg/util/validation/validation.go`, `DNS1123SubdomainMaxLength`).
const MAX_NAME: usize = 253;

impl Subject {
    /// The object's namespace (a namespaced kind only).
    pub fn namespace(&self) -> Option<&str> {
        self.split().0
    }

    /// The object's `metadata.name`.
    pub fn object_name(&self) -> &str {
        self.split().1
    }

    fn split(&self) -> (Option<&str>, &str) {
        match self.name.split_once('/') {
            Some((ns, name)) if self.kind.namespaced() => (Some(ns), name),
            _ => (None, &self.name),
        }
    }

    /// What identifies the report among all vapcheck writes: its name, or `<namespace>/<name>`
    /// for a namespaced report (cluster-scoped names have no `/`).
    pub fn report_key(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{ns}/{}", self.report_name()),
            None => self.report_name(),
        }
    }

    /// The report's name: `vapcheck-<kind prefix>-<name>`; when that is longer than a name may
    /// be, the object's name is cut and a hash of the whole name appended (object names are
    /// DNS subdomains, so the result is one too).
    pub fn report_name(&self) -> String {
        let name = self.object_name();
        let full = format!("vapcheck-{}-{name}", self.kind.prefix());
        if full.len() <= MAX_NAME {
            return full;
        }
        let hash = format!("-{:016x}", fnv1a(name.as_bytes()));
        let mut cut = full[..MAX_NAME - hash.len()].to_owned();
        // The cut must end with an alphanumeric character.
        while cut.ends_with(['-', '.']) {
            cut.pop();
        }
        cut + &hash
    }
}

/// 64-bit FNV-1a: a stable hash (the same in every process and release).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A result's outcome (the CRDs' `Result` enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Nothing found.
    Pass,
    /// A finding that fails at admission or is rejected by the API server.
    Fail,
    /// A finding of static typing only (evaluation works), or a binding with no effect.
    Warn,
    /// The object could not be checked.
    Error,
    /// Something matched was not checked.
    Skip,
}

/// A result's severity (the CRDs' `ResultSeverity` enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Every matching request is affected.
    Critical,
    /// Requests fail or are decided wrongly.
    High,
    /// The policy does not do what it says for some kinds.
    Medium,
    /// Nothing fails, but something is not as intended.
    Low,
    /// For information.
    Info,
}

/// How a finding was suppressed (the object's `vapcheck.io/ignore` annotation,
/// [`crate::suppress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppressed {
    /// The annotation's entry that covers it (`VAP100@spec.validations[0]`).
    pub entry: String,
    /// The `vapcheck.io/ignore-reason` annotation, if set.
    pub reason: Option<String>,
    /// The outcome the finding has when it is not suppressed.
    pub outcome: Outcome,
}

/// One result of a report, before it is put in the API's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The rule id ([`rule`]); empty for a pass.
    pub rule: &'static str,
    /// The outcome.
    pub outcome: Outcome,
    /// Its severity.
    pub severity: Severity,
    /// The message.
    pub message: String,
    /// The field the finding is about (`spec.validations[0].expression`), if any.
    pub field: Option<String>,
    /// The matched kind (`apps/v1, Kind=Deployment`), if any.
    pub kind: Option<String>,
    /// Set when the finding is suppressed: its outcome is then [`Outcome::Skip`].
    pub suppressed: Option<Suppressed>,
}

impl Entry {
    fn new(rule: &'static str, outcome: Outcome, severity: Severity, message: String) -> Entry {
        Entry {
            rule,
            outcome,
            severity,
            message,
            field: None,
            kind: None,
            suppressed: None,
        }
    }
    fn field(mut self, field: &str) -> Entry {
        if !field.is_empty() {
            self.field = Some(field.to_owned());
        }
        self
    }
    fn kind(mut self, kind: impl Into<String>) -> Entry {
        self.kind = Some(kind.into());
        self
    }
    /// Marks the finding suppressed when `suppression` covers its rule on `field_ref`: the
    /// result becomes `skip`, its severity and properties stay, and the properties say by what
    /// (docs/reports.md, "Suppressed findings"). Both APIs' `Result` enum has no value for an
    /// accepted finding (reports-api v0.2.1 `apis/openreports.io/v1alpha1/report_types.go`,
    /// `Result`: "skip: the policy was not selected based on user inputs or applicability"),
    /// and `skip` is what Kyverno writes for a rule a PolicyException covers (kyverno v1.19.1
    /// `pkg/engine/handlers/validation/validate_resource.go`, `RuleSkip`; the property
    /// `exceptions` added in `pkg/utils/report/results.go`, `ToPolicyReportResult`).
    fn suppressed_by(mut self, suppression: Option<&Directive>, field_ref: &str) -> Entry {
        if let Some(d) = suppression
            && let Some(covering) = d.find(self.rule, field_ref)
        {
            self.suppressed = Some(Suppressed {
                entry: covering.to_string(),
                reason: d.reason.clone(),
                outcome: self.outcome,
            });
            self.outcome = Outcome::Skip;
        }
        self
    }
}

/// A pass result, when `entries` has no fail, warn or error (suppressed findings are skips:
/// the message then counts them).
fn with_pass(mut entries: Vec<Entry>, message: &str) -> Vec<Entry> {
    let clean = entries
        .iter()
        .all(|e| matches!(e.outcome, Outcome::Pass | Outcome::Skip));
    if clean {
        let suppressed = entries.iter().filter(|e| e.suppressed.is_some()).count();
        let message = match suppressed {
            0 => message.to_owned(),
            1 => format!("{message} but 1 suppressed by {ANNOTATION}"),
            n => format!("{message} but {n} suppressed by {ANNOTATION}"),
        };
        entries.insert(0, Entry::new("", Outcome::Pass, Severity::Info, message));
    }
    entries
}

/// The results of one policy check (ValidatingAdmissionPolicy or MutatingAdmissionPolicy),
/// from the same [`PolicyStatus`] the status, Events and metrics come from: [`finding_entries`]
/// of its findings ([`crate::finding::produce_status`]).
pub fn policy_entries(status: &PolicyStatus, suppression: Option<&Directive>) -> Vec<Entry> {
    let object = crate::finding::ObjectRef::in_cluster("", "");
    finding_entries(
        &crate::finding::produce_status(&object, status, None),
        suppression,
    )
}

/// The results of one policy check from its findings ([`crate::finding::produce_status`]), in
/// this order:
///
/// - the object rejected on create ([`FindingRule::Rejected`], from `AcceptedOnCreate=False`):
///   `fail` (`VAP001`, high), the finding's message;
/// - nothing could be checked ([`Class::NotTypeChecked`], `TypeChecked=False`): `error`, the
///   message;
/// - each type-checking warning, one per field and matched kind (the first finding of the
///   kind's result: upstream's text of the kind, [`crate::finding::TypeChecking::kind_text`]):
///   `fail` (`VAP100`, high) when it fails at admission or was not classified (strict mode),
///   `warn` (medium) when narrowing found it static typing only or unreachable;
/// - each expression that errors on valid objects: `fail` (`VAP110`, high);
/// - each matched kind not checked: `skip` (`VAP101`, info);
/// - none of fail, warn or error: one `pass`.
///
/// `suppression` is the object's `vapcheck.io/ignore` annotation: a type-checking warning or
/// runtime finding it covers is `skip`, with its severity, and the properties `suppressed`,
/// `suppression` (the covering entry), `suppressionReason` and `unsuppressedResult` (the
/// controller honours those two rules only, as in the status: docs/suppressions.md).
pub fn finding_entries(findings: &[Finding], suppression: Option<&Directive>) -> Vec<Entry> {
    let field_kind = |e: Entry, f: &Finding| match f.matched_kind() {
        Some(k) => e.field(&f.field_ref).kind(k),
        None => e.field(&f.field_ref),
    };
    // The conditions, in the order of the status.
    let mut out: Vec<Entry> = findings
        .iter()
        .filter_map(|f| match (f.rule, f.class) {
            (FindingRule::Rejected, _) => Some(Entry::new(
                rule::REJECTED,
                Outcome::Fail,
                Severity::High,
                f.message.clone(),
            )),
            (_, Class::NotTypeChecked) => Some(Entry::new(
                rule::KIND_NOT_CHECKED,
                Outcome::Error,
                Severity::Medium,
                f.message.clone(),
            )),
            _ => None,
        })
        .collect();
    let mut previous: Option<&crate::finding::TypeChecking> = None;
    for f in findings {
        let Some(t) = &f.type_checking else {
            continue;
        };
        // One result per kind: a kind's result makes one finding per positioned error.
        if previous.is_some_and(|p| p.same_kind(t)) {
            continue;
        }
        previous = Some(t);
        let (outcome, severity) = match t.narrowed {
            Some(FindingClass::StaticTypingOnly | FindingClass::Unreachable) => {
                (Outcome::Warn, Severity::Medium)
            }
            Some(FindingClass::FailsAtAdmission) | None => (Outcome::Fail, Severity::High),
        };
        let message = t.kind_text.trim_end().to_owned();
        let e = Entry::new(rule::TYPE_WARNING, outcome, severity, message);
        out.push(field_kind(e, f).suppressed_by(suppression, &f.field_ref));
    }
    for f in findings
        .iter()
        .filter(|f| f.rule == FindingRule::RuntimeError)
    {
        let e = Entry::new(
            rule::RUNTIME_ERROR,
            Outcome::Fail,
            Severity::High,
            f.message.clone(),
        );
        out.push(field_kind(e, f).suppressed_by(suppression, &f.field_ref));
    }
    for f in findings
        .iter()
        .filter(|f| f.rule == FindingRule::KindNotChecked && f.class == Class::NotChecked)
    {
        out.push(Entry::new(
            rule::KIND_NOT_CHECKED,
            Outcome::Skip,
            Severity::Info,
            f.message.clone(),
        ));
    }
    with_pass(out, "no findings")
}

/// The results of one binding, from its [`BindingReport`] (the `BindingsEffective` condition
/// and the binding's Events come from the same report): denies every matching request →
/// `fail` (`VAP130`, critical); inactive → `warn` (`VAP131`, low); evaluates a policy with
/// type-checking warnings on the kinds it matches → `warn` (`VAP132`, medium); evaluates →
/// `pass`.
pub fn binding_entries(report: &BindingReport) -> Vec<Entry> {
    let out = match &report.verdict {
        Verdict::DeniesAllMatching => vec![Entry::new(
            rule::BINDING_DENIES_ALL,
            Outcome::Fail,
            Severity::Critical,
            report.reason.clone(),
        )],
        Verdict::Inactive => vec![Entry::new(
            rule::BINDING_INACTIVE,
            Outcome::Warn,
            Severity::Low,
            report.reason.clone(),
        )],
        Verdict::EvaluatesWithWarnings(kinds) => kinds
            .iter()
            .map(|k| {
                Entry::new(
                    rule::BINDING_WITH_WARNINGS,
                    Outcome::Warn,
                    Severity::Medium,
                    report.reason.clone(),
                )
                .kind(k.to_string())
            })
            .collect(),
        Verdict::Evaluates => Vec::new(),
    };
    with_pass(out, &report.reason)
}

/// One webhook of a configuration as the controller assessed it (`crate::webhooks::availability`).
#[derive(Debug, Clone)]
pub struct WebhookResult<'a> {
    /// Its index in `webhooks`.
    pub index: usize,
    /// Its name.
    pub name: &'a str,
    /// Its defaulted `failurePolicy`.
    pub failure_policy: &'a str,
    /// What the controller found: the same problems its Events name.
    pub assessment: &'a crate::webhooks::availability::Assessment,
}

/// The results of one webhook configuration, from the assessment its Events and metrics come
/// from: each problem of each webhook, its rule the Event's reason (`WebhookNoReadyEndpoints`,
/// ...). A webhook that cannot be called (no Service, port or ready endpoint, a `caBundle` that
/// does not parse or has expired) → `fail`, critical with `failurePolicy: Fail` (every matching
/// request is denied), high with `Ignore` (matching requests are admitted unchecked); a
/// certificate that expires soon → `warn` (medium); offline findings → `warn` (medium). None:
/// one `pass`.
pub fn webhook_entries(webhooks: &[WebhookResult<'_>]) -> Vec<Entry> {
    use crate::webhooks::availability::ProblemKind;
    let mut out = Vec::new();
    for w in webhooks {
        for p in &w.assessment.problems {
            let (outcome, severity) = match p.kind {
                ProblemKind::CertificateExpiring | ProblemKind::Findings => {
                    (Outcome::Warn, Severity::Medium)
                }
                _ if w.failure_policy == "Ignore" => (Outcome::Fail, Severity::High),
                _ => (Outcome::Fail, Severity::Critical),
            };
            out.push(
                Entry::new(
                    p.kind.reason(),
                    outcome,
                    severity,
                    format!("webhook {:?}: {}", w.name, p.message),
                )
                .field(&format!("webhooks[{}]", w.index)),
            );
        }
    }
    with_pass(out, "every webhook can be called and has no findings")
}

/// An `ObjectReference` as the CRDs hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    api_version: String,
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    uid: String,
}

/// An owner reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: bool,
}

/// The report's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    labels: BTreeMap<String, String>,
    owner_references: Vec<OwnerRef>,
}

/// One result (`ReportResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResultBody {
    source: &'static str,
    policy: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    rule: &'static str,
    result: Outcome,
    severity: Severity,
    message: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    properties: BTreeMap<String, String>,
}

/// The counts per outcome (`ReportSummary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pass: usize,
    fail: usize,
    warn: usize,
    error: usize,
    skip: usize,
}

/// A whole report, as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    api_version: String,
    kind: &'static str,
    metadata: Meta,
    /// `openreports.io` only (`wgpolicyk8s.io` has it per result only).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    scope: ObjectRef,
    summary: Summary,
    results: Vec<ResultBody>,
}

/// The report on `subject` with `entries`, in `api`'s shape (namespaced, in the object's
/// namespace, for a namespaced object). Each result's `policy` is the object's name (the
/// report-level `scope` names the object too); `properties` hold the rule, severity, field and
/// matched kind.
pub fn report(api: ReportApi, subject: &Subject, entries: &[Entry]) -> Report {
    let mut summary = Summary::default();
    let results = entries
        .iter()
        .map(|e| {
            match e.outcome {
                Outcome::Pass => summary.pass += 1,
                Outcome::Fail => summary.fail += 1,
                Outcome::Warn => summary.warn += 1,
                Outcome::Error => summary.error += 1,
                Outcome::Skip => summary.skip += 1,
            }
            let mut properties = BTreeMap::new();
            if !e.rule.is_empty() {
                properties.insert("rule".to_owned(), e.rule.to_owned());
                properties.insert("severity".to_owned(), severity_text(e.severity).to_owned());
            }
            if let Some(f) = &e.field {
                properties.insert("field".to_owned(), f.clone());
            }
            if let Some(k) = &e.kind {
                properties.insert("kind".to_owned(), k.clone());
            }
            if let Some(s) = &e.suppressed {
                properties.insert("suppressed".to_owned(), "true".to_owned());
                properties.insert(
                    "suppression".to_owned(),
                    format!("{ANNOTATION}: {}", s.entry),
                );
                if let Some(reason) = &s.reason {
                    properties.insert("suppressionReason".to_owned(), reason.clone());
                }
                properties.insert(
                    "unsuppressedResult".to_owned(),
                    outcome_text(s.outcome).to_owned(),
                );
            }
            ResultBody {
                source: SOURCE,
                policy: subject.object_name().to_owned(),
                rule: e.rule,
                result: e.outcome,
                severity: e.severity,
                message: e.message.clone(),
                properties,
            }
        })
        .collect();
    let namespace = subject.namespace().map(str::to_owned);
    let name = subject.object_name().to_owned();
    Report {
        api_version: api.api_version(),
        kind: api.kind_for(subject.kind).0,
        metadata: Meta {
            name: subject.report_name(),
            namespace: namespace.clone(),
            labels: BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                MANAGED_BY.to_owned(),
            )]),
            owner_references: vec![OwnerRef {
                api_version: subject.kind.api_version().to_owned(),
                kind: subject.kind.kind().to_owned(),
                name: name.clone(),
                uid: subject.uid.clone(),
                controller: true,
            }],
        },
        source: (api == ReportApi::OpenReports).then_some(SOURCE),
        scope: ObjectRef {
            api_version: subject.kind.api_version().to_owned(),
            kind: subject.kind.kind().to_owned(),
            namespace,
            name,
            uid: subject.uid.clone(),
        },
        summary,
        results,
    }
}

fn outcome_text(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "fail",
        Outcome::Warn => "warn",
        Outcome::Error => "error",
        Outcome::Skip => "skip",
    }
}

fn severity_text(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::High => "high",
        Severity::Medium => "medium",
        Severity::Low => "low",
        Severity::Info => "info",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{KindOutcome, KindResult, PolicyCondition};

    fn gvk() -> Gvk {
        Gvk {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
        }
    }

    fn subject() -> Subject {
        Subject {
            kind: SubjectKind::ValidatingPolicy,
            name: "p".into(),
            uid: "u-1".into(),
        }
    }

    fn warning_status(class: Option<FindingClass>) -> PolicyStatus {
        let mut s = PolicyStatus::default();
        s.expression_results
            .push(crate::policy::status::ExpressionResults {
                field_ref: "spec.validations[0].expression".into(),
                kinds: vec![KindResult {
                    gvk: gvk(),
                    outcome: KindOutcome::Error("boom".into()),
                }],
            });
        if let Some(class) = class {
            s.findings.push(crate::policy::narrowing::Classified {
                field_ref: "spec.validations[0].expression".into(),
                gvk: gvk(),
                upstream: true,
                class,
                why: "",
                message: "m".into(),
            });
        }
        s
    }

    #[test]
    fn a_clean_policy_is_one_pass() {
        let entries = policy_entries(&PolicyStatus::default(), None);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].outcome, Outcome::Pass);
        let r = serde_json::to_value(report(ReportApi::OpenReports, &subject(), &entries))
            .expect("serialises");
        assert_eq!(r["summary"]["pass"], 1);
        assert_eq!(r["source"], "vapcheck");
        assert_eq!(r["results"][0]["result"], "pass");
        assert!(r["results"][0].get("rule").is_none());
        let w = serde_json::to_value(report(ReportApi::WgPolicy, &subject(), &entries))
            .expect("serialises");
        assert!(w.get("source").is_none(), "{w}");
        assert_eq!(w["results"][0]["source"], "vapcheck");
        assert_eq!(w["apiVersion"], "wgpolicyk8s.io/v1alpha2");
        assert_eq!(w["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn type_warnings_fail_or_warn_by_class() {
        for (class, outcome) in [
            (Some(FindingClass::FailsAtAdmission), Outcome::Fail),
            (None, Outcome::Fail),
            (Some(FindingClass::StaticTypingOnly), Outcome::Warn),
            (Some(FindingClass::Unreachable), Outcome::Warn),
        ] {
            let entries = policy_entries(&warning_status(class), None);
            assert_eq!(entries.len(), 1, "{class:?}: {entries:?}");
            assert_eq!(entries[0].outcome, outcome, "{class:?}");
            assert_eq!(entries[0].rule, rule::TYPE_WARNING);
            assert_eq!(
                entries[0].field.as_deref(),
                Some("spec.validations[0].expression")
            );
            assert_eq!(entries[0].kind.as_deref(), Some("apps/v1, Kind=Deployment"));
            assert_eq!(
                entries[0].message,
                "apps/v1, Kind=Deployment: type checking error: boom"
            );
        }
    }

    fn runtime_finding(field_ref: &str) -> crate::policy::runtime::RuntimeFinding {
        use crate::policy::runtime::{RuntimeClass, RuntimeFinding, Witness};
        RuntimeFinding {
            field_ref: field_ref.into(),
            kinds: vec!["apps/v1, Kind=Deployment".into()],
            class: RuntimeClass::AbsentField,
            pos: None,
            access: "object.spec.x".into(),
            error: "no such key: x".into(),
            consequence: "kube-apiserver denies the request".into(),
            fallback_message: None,
            binding: None,
            param: None,
            witness: Witness {
                operation: "CREATE",
                object: serde_json::json!({}),
                params: None,
            },
            fix: None,
            fixed_expression: None,
        }
    }

    /// A suppressed finding is a `skip` that keeps its rule, severity, field and kind and says
    /// by what it is suppressed; an uncovered one stays `fail`; a pass is added (naming the
    /// suppressed count) only when nothing is left.
    #[test]
    fn suppressed_findings_are_skips_not_fails_and_not_dropped() {
        let mut s = warning_status(None);
        s.runtime
            .push(runtime_finding("spec.validations[1].expression"));
        let directive = |list: &str, reason: Option<&str>| crate::suppress::Directive {
            entries: crate::suppress::parse_entries(list).expect("parses"),
            reason: reason.map(str::to_owned),
        };
        let outcomes = |entries: &[Entry]| -> Vec<(&str, Outcome)> {
            entries.iter().map(|e| (e.rule, e.outcome)).collect()
        };

        let unsuppressed = policy_entries(&s, None);
        assert_eq!(
            outcomes(&unsuppressed),
            [
                (rule::TYPE_WARNING, Outcome::Fail),
                (rule::RUNTIME_ERROR, Outcome::Fail)
            ]
        );

        // VAP100 only: the runtime finding still fails, no pass.
        let one = directive("VAP100@spec.validations[0]", Some("legacy, see #12"));
        let entries = policy_entries(&s, Some(&one));
        assert_eq!(
            outcomes(&entries),
            [
                (rule::TYPE_WARNING, Outcome::Skip),
                (rule::RUNTIME_ERROR, Outcome::Fail)
            ]
        );
        assert_eq!(
            entries[0].suppressed,
            Some(Suppressed {
                entry: "VAP100@spec.validations[0]".into(),
                reason: Some("legacy, see #12".into()),
                outcome: Outcome::Fail,
            })
        );
        assert_eq!(entries[1].suppressed, None);
        let r = serde_json::to_value(report(ReportApi::OpenReports, &subject(), &entries))
            .expect("serialises");
        assert_eq!(r["summary"]["skip"], 1);
        assert_eq!(r["summary"]["fail"], 1);
        assert_eq!(r["summary"]["pass"], 0);
        let props = r["results"][0]["properties"]
            .as_object()
            .expect("properties");
        let want = serde_json::json!({
            "rule": "VAP100",
            "severity": "high",
            "field": "spec.validations[0].expression",
            "kind": "apps/v1, Kind=Deployment",
            "suppressed": "true",
            "suppression": "vapcheck.io/ignore: VAP100@spec.validations[0]",
            "suppressionReason": "legacy, see #12",
            "unsuppressedResult": "fail",
        });
        assert_eq!(&serde_json::Value::Object(props.clone()), &want);
        assert_eq!(r["results"][0]["result"], "skip");
        assert_eq!(r["results"][0]["severity"], "high");
        assert!(r["results"][1]["properties"].get("suppressed").is_none());

        // Both rules: two skips and one pass first; no reason, no suppressionReason.
        let both = directive("VAP100, VAP110@spec.validations[1]", None);
        let entries = policy_entries(&s, Some(&both));
        assert_eq!(
            outcomes(&entries),
            [
                ("", Outcome::Pass),
                (rule::TYPE_WARNING, Outcome::Skip),
                (rule::RUNTIME_ERROR, Outcome::Skip)
            ]
        );
        assert_eq!(
            entries[0].message,
            "no findings but 2 suppressed by vapcheck.io/ignore"
        );
        let w = serde_json::to_value(report(ReportApi::WgPolicy, &subject(), &entries))
            .expect("serialises");
        assert_eq!(w["summary"]["pass"], 1);
        assert_eq!(w["summary"]["skip"], 2);
        assert_eq!(w["results"][2]["result"], "skip");
        assert_eq!(
            w["results"][2]["properties"]["suppression"],
            "vapcheck.io/ignore: VAP110@spec.validations[1]"
        );
        assert!(
            w["results"][2]["properties"]
                .get("suppressionReason")
                .is_none()
        );

        // Entries of other rules or fields cover nothing.
        let other = directive("VAP110@spec.validations[0], VAP101", None);
        assert_eq!(
            outcomes(&policy_entries(&s, Some(&other))),
            outcomes(&unsuppressed)
        );
    }

    /// A kind not checked and a rejection are not suppressible in the controller.
    #[test]
    fn only_type_warnings_and_runtime_findings_are_suppressed() {
        let mut s = PolicyStatus::default();
        s.conditions.push(PolicyCondition {
            type_: crate::policy::status::ACCEPTED_ON_CREATE.into(),
            status: "False".into(),
            observed_generation: None,
            reason: "R".into(),
            message: "rejected".into(),
        });
        let all = crate::suppress::Directive {
            entries: crate::suppress::parse_entries("VAP001, VAP100, VAP101, VAP110")
                .expect("parses"),
            reason: None,
        };
        let entries = policy_entries(&s, Some(&all));
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].rule, entries[0].outcome),
            (rule::REJECTED, Outcome::Fail)
        );
        assert_eq!(entries[0].suppressed, None);
    }

    #[test]
    fn rejected_and_unchecked_policies() {
        let mut s = PolicyStatus::default();
        for (t, status) in [
            (crate::policy::status::ACCEPTED_ON_CREATE, "False"),
            (crate::policy::status::TYPE_CHECKED, "False"),
            (crate::policy::status::EXPRESSIONS_VALID, "False"),
        ] {
            s.conditions.push(PolicyCondition {
                type_: t.into(),
                status: status.into(),
                observed_generation: None,
                reason: "R".into(),
                message: format!("{t} message"),
            });
        }
        let entries = policy_entries(&s, None);
        let got: Vec<(&str, Outcome)> = entries.iter().map(|e| (e.rule, e.outcome)).collect();
        assert_eq!(
            got,
            [
                (rule::REJECTED, Outcome::Fail),
                (rule::KIND_NOT_CHECKED, Outcome::Error)
            ]
        );
    }

    #[test]
    fn a_namespaced_policy_gets_a_namespaced_report_in_its_namespace() {
        let namespaced = Subject {
            kind: SubjectKind::KyvernoNamespacedValidatingPolicy,
            name: "team-a/p".into(),
            uid: "u-2".into(),
        };
        assert_eq!(namespaced.namespace(), Some("team-a"));
        assert_eq!(namespaced.object_name(), "p");
        assert_eq!(namespaced.report_name(), "vapcheck-knvpol-p");
        assert_eq!(namespaced.report_key(), "team-a/vapcheck-knvpol-p");
        let entries = policy_entries(&warning_status(None), None);
        for (api, kind) in [
            (ReportApi::OpenReports, "Report"),
            (ReportApi::WgPolicy, "PolicyReport"),
        ] {
            let r = serde_json::to_value(report(api, &namespaced, &entries)).expect("serialises");
            assert_eq!(r["kind"], kind);
            assert_eq!(r["metadata"]["name"], "vapcheck-knvpol-p");
            assert_eq!(r["metadata"]["namespace"], "team-a");
            let owner = &r["metadata"]["ownerReferences"][0];
            assert_eq!(owner["kind"], "NamespacedValidatingPolicy");
            assert_eq!(owner["apiVersion"], "policies.kyverno.io/v1");
            assert_eq!(owner["name"], "p");
            assert_eq!(owner["uid"], "u-2");
            assert_eq!(r["scope"]["namespace"], "team-a");
            assert_eq!(r["scope"]["name"], "p");
            assert_eq!(r["results"].as_array().map(Vec::len), Some(1));
            assert_eq!(r["results"][0]["policy"], "p");
            assert_eq!(r["results"][0]["result"], "fail");
            assert_eq!(r["results"][0]["source"], "vapcheck");
        }
        // A cluster-scoped kind has neither, and a `/` in its name is not split.
        let r = serde_json::to_value(report(ReportApi::OpenReports, &subject(), &entries))
            .expect("serialises");
        assert_eq!(r["kind"], "ClusterReport");
        assert!(r["metadata"].get("namespace").is_none());
        assert!(r["scope"].get("namespace").is_none());
        assert_eq!(
            ReportApi::WgPolicy.kind_for(SubjectKind::ValidatingPolicy),
            ("ClusterPolicyReport", "clusterpolicyreports")
        );
        assert_eq!(
            ReportApi::OpenReports.kind_for(SubjectKind::KyvernoNamespacedValidatingPolicy),
            ("Report", "reports")
        );
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let short = subject().report_name();
        assert_eq!(short, "vapcheck-vap-p");
        let long = Subject {
            name: "a".repeat(250),
            ..subject()
        };
        let name = long.report_name();
        assert_eq!(name.len(), MAX_NAME);
        assert!(name.starts_with("vapcheck-vap-aaa"), "{name}");
        let other = Subject {
            name: format!("{}b", "a".repeat(249)),
            ..subject()
        };
        assert_ne!(other.report_name(), name);
    }

    #[test]
    fn webhook_results_follow_the_failure_policy() {
        use crate::webhooks::availability::{Assessment, Problem, ProblemKind};
        let broken = Assessment {
            ready_endpoints: Some(0),
            ca_not_after: None,
            problems: vec![Problem {
                kind: ProblemKind::NoReadyEndpoints,
                message: "no ready endpoints".into(),
            }],
        };
        let expiring = Assessment {
            ready_endpoints: None,
            ca_not_after: Some(1),
            problems: vec![Problem {
                kind: ProblemKind::CertificateExpiring,
                message: "expires soon".into(),
            }],
        };
        let got: Vec<(&str, Outcome, Severity, Option<String>)> = webhook_entries(&[
            WebhookResult {
                index: 0,
                name: "a",
                failure_policy: "Fail",
                assessment: &broken,
            },
            WebhookResult {
                index: 1,
                name: "b",
                failure_policy: "Ignore",
                assessment: &broken,
            },
            WebhookResult {
                index: 2,
                name: "c",
                failure_policy: "Fail",
                assessment: &expiring,
            },
        ])
        .into_iter()
        .map(|e| (e.rule, e.outcome, e.severity, e.field))
        .collect();
        assert_eq!(
            got,
            [
                (
                    "WebhookNoReadyEndpoints",
                    Outcome::Fail,
                    Severity::Critical,
                    Some("webhooks[0]".into())
                ),
                (
                    "WebhookNoReadyEndpoints",
                    Outcome::Fail,
                    Severity::High,
                    Some("webhooks[1]".into())
                ),
                (
                    "WebhookCertificateExpiring",
                    Outcome::Warn,
                    Severity::Medium,
                    Some("webhooks[2]".into())
                ),
            ]
        );
        let clean = Assessment {
            ready_endpoints: Some(1),
            ca_not_after: None,
            problems: Vec::new(),
        };
        let pass = webhook_entries(&[WebhookResult {
            index: 0,
            name: "a",
            failure_policy: "Fail",
            assessment: &clean,
        }]);
        assert_eq!(pass.len(), 1);
        assert_eq!(pass[0].outcome, Outcome::Pass);
    }
}
