//! The entries of `-o json` and `-o yaml`, one per object read, in input order: their
//! documented schema (README, "Checking policies offline"), serialised by [`super::json`] and
//! [`super::yaml`]. An entry's body is the object's results as upstream writes them (the
//! `expressionWarnings` and conditions of its status, the API server's causes) and a
//! binding's effect: their bytes are fixed by the pipeline fixtures. Its `suppressed` list is
//! made from the findings.

use k8s_openapi::api::admissionregistration::v1::TypeChecking;
use serde::Serialize;

use super::super::output::{ApiServerVerdict, CheckedPolicy};
use super::super::suppressed::Suppression;
use crate::bindings::{BindingReport, Overlap, Verdict, kind_label};
use crate::finding::Finding;
use crate::policy::PolicyCondition;

/// The `-o json|yaml` entry: `{"kind": .., "name": .., "apiServer": {..}, "status":
/// {"typeChecking": .., "conditions": [..]}}` (no `status` for bindings).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputEntry<'a> {
    /// The object's kind.
    pub kind: &'a str,
    /// Object name.
    pub name: &'a str,
    /// What kube-apiserver answers on create (or update).
    pub api_server: &'a ApiServerVerdict,
    /// The computed status (policies only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<OutputStatus<'a>>,
    /// Policies, when the input holds bindings: the bindings that bind it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_by: Option<&'a [String]>,
    /// Bindings: the verdict (`denies all matching requests`, `inactive`, `evaluates`,
    /// `evaluates with warnings on kinds K`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// Bindings: one sentence naming the binding, the policy and the cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    /// Webhook configurations: kube-apiserver's create-time warning and the documented
    /// practices they break (docs/webhooks.md).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub advice: &'a [crate::webhooks::Advice],
    /// Bindings: the facts behind the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<OutputEffect<'a>>,
    /// A document that does not decode (or a file that cannot be read): where and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<OutputDecodeError<'a>>,
    /// The findings on the object that are suppressed (by its `vapcheck.io/ignore`
    /// annotation, a `# vapcheck:ignore` comment or `.vapcheck.yaml`): still in `status`,
    /// not counted for the exit status. Absent when none is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suppressed: Vec<OutputSuppressed<'a>>,
}

/// One suppressed finding of an [`OutputEntry`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputSuppressed<'a> {
    /// The rule id (`VAP110`).
    pub rule: &'static str,
    /// The field.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub field: &'a str,
    /// The matched kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_kind: Option<&'a str>,
    /// 1-based line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// `annotation`, `comment` or `configuration`.
    pub by: &'static str,
    /// The entry that matched.
    pub entry: &'a str,
    /// The reason given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    /// The finding's message.
    pub message: &'a str,
}

/// The entries with their suppressed findings (`suppressed[i]`: of `findings[i]`).
pub(super) fn entries_suppressed<'a>(
    policies: &'a [CheckedPolicy],
    findings: &'a [Finding],
    suppressed: &'a [Option<Suppression>],
) -> Vec<OutputEntry<'a>> {
    let mut out = entries(policies);
    for (f, s) in findings.iter().zip(suppressed) {
        if let (Some(s), Some(entry)) = (s, out.get_mut(f.object.entry)) {
            entry.suppressed.push(OutputSuppressed {
                rule: f.rule.id(),
                field: &f.field_ref,
                matched_kind: f.matched_kind(),
                line: f.position.map(|p| p.line),
                by: s.by.as_str(),
                entry: &s.entry,
                reason: s.reason.as_deref(),
                message: &f.message,
            });
        }
    }
    out
}

/// The `decodeError` of an [`OutputEntry`]: the file, document (0: the file as a whole), list
/// item, line and column, the field (absent for the document as a whole) and the error.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputDecodeError<'a> {
    /// The file (`<stdin>`).
    pub file: &'a str,
    /// 1-based document.
    pub document: usize,
    /// Item of a list document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// 1-based line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The field whose value does not decode.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub field: &'a str,
    /// What is wrong.
    pub message: &'a str,
}

/// The `effect` of a binding's [`OutputEntry`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputEffect<'a> {
    /// `spec.policyName`.
    pub policy: &'a str,
    /// Whether the policy is in the input and accepted by the API server.
    pub policy_exists: bool,
    /// The policy's failurePolicy after defaulting.
    pub failure_policy: &'a str,
    /// `spec.validationActions`.
    pub validation_actions: &'a [String],
    /// The param objects the paramRef resolves to (`namespace/name` or `name`).
    pub params: &'a [String],
    /// `overlaps`, `depends: ...` or `disjoint: ...` (absent when not decided).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_resources: Option<String>,
    /// Kinds with type-checking warnings (for `evaluates with warnings on kinds K`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub warning_kinds: Vec<String>,
    /// The API server's message when it denies because of configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial_message: Option<&'a str>,
    /// Further facts.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub notes: &'a [String],
}

fn overlap_text(o: &Overlap) -> String {
    match o {
        Overlap::Overlaps => "overlaps".into(),
        Overlap::Depends(w) => format!("depends: {w}"),
        Overlap::Disjoint(w) => format!("disjoint: {w}"),
    }
}

fn effect(r: &BindingReport) -> OutputEffect<'_> {
    OutputEffect {
        policy: &r.policy,
        policy_exists: r.policy_exists,
        failure_policy: &r.failure_policy,
        validation_actions: &r.validation_actions,
        params: &r.params,
        match_resources: r.overlap.as_ref().map(overlap_text),
        warning_kinds: match &r.verdict {
            Verdict::EvaluatesWithWarnings(k) => k.iter().map(kind_label).collect(),
            _ => Vec::new(),
        },
        denial_message: r.denial_message.as_deref(),
        notes: &r.notes,
    }
}

/// The `status` of an [`OutputEntry`]. `typeChecking` is `{}` without warnings.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputStatus<'a> {
    /// `expressionWarnings`, exactly as upstream would write them.
    pub type_checking: TypeChecking,
    /// `TypeChecked` and `ExpressionsValid` (without `lastTransitionTime`).
    pub conditions: &'a [PolicyCondition],
    /// Extended mode: the worst-case cost estimates per expression and kind, the per-kind
    /// sums of each runtime budget, and the limits they can exceed (docs/cost.md). Absent in
    /// strict mode and when nothing was estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<&'a crate::policy::PolicyCost>,
    /// Extended mode: expressions that error at admission on valid objects, each with a
    /// witness object and a rewrite (docs/runtime-safety.md). Absent when there are none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub runtime: &'a [crate::policy::runtime::RuntimeFinding],
}

/// The entries for `-o json` and `-o yaml`, in input order.
pub fn entries(policies: &[CheckedPolicy]) -> Vec<OutputEntry<'_>> {
    policies
        .iter()
        .map(|p| OutputEntry {
            // A document that does not decode: the kind it declares, whatever it is.
            kind: p
                .undecoded
                .as_ref()
                .and_then(|u| u.kind.as_deref())
                .unwrap_or(p.kind),
            name: &p.name,
            api_server: &p.api_server,
            status: p.status.as_ref().map(|s| OutputStatus {
                type_checking: s.type_checking(),
                conditions: &s.conditions,
                cost: (!s.cost.is_empty()).then_some(&s.cost),
                runtime: &s.runtime,
            }),
            bound_by: p.bound_by.as_deref(),
            verdict: p.effect.as_ref().map(|e| e.verdict.to_string()),
            reason: p.effect.as_ref().map(|e| e.reason.as_str()),
            effect: p.effect.as_ref().map(effect),
            advice: &p.advice,
            decode_error: p.undecoded.as_ref().map(|u| OutputDecodeError {
                file: &u.origin.source,
                document: u.origin.document,
                item: u.origin.item,
                line: u.position.map(|p| p.line),
                column: u.position.map(|p| p.column),
                field: &u.field,
                message: &u.message,
            }),
            suppressed: Vec::new(),
        })
        .collect()
}
