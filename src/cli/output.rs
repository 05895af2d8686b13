//! Output of `vapcheck check`: JSON, YAML, or text for humans.

use k8s_openapi::api::admissionregistration::v1::TypeChecking;
use serde::Serialize;

use crate::bindings::{BindingReport, Overlap, Verdict, kind_label};
use crate::policy::PolicyCondition;
#[cfg(test)]
use crate::policy::PolicyStatus;

#[cfg(test)]
use super::input::Origin;

/// The entry types live in the core ([`crate::analysis::entry`]); these paths stay.
pub use crate::analysis::entry::{ApiServerVerdict, CheckedPolicy, STATIC_MANIFESTS_KIND};

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
fn entries_suppressed<'a>(
    policies: &'a [CheckedPolicy],
    findings: &'a [crate::finding::Finding],
    suppressed: &'a [Option<super::suppressed::Suppression>],
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

/// `-o json` with the suppressed findings of each entry.
pub fn render_json_suppressed(
    policies: &[CheckedPolicy],
    findings: &[crate::finding::Finding],
    suppressed: &[Option<super::suppressed::Suppression>],
) -> Result<String, String> {
    serde_json::to_string_pretty(&entries_suppressed(policies, findings, suppressed))
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// `-o yaml` with the suppressed findings of each entry.
pub fn render_yaml_suppressed(
    policies: &[CheckedPolicy],
    findings: &[crate::finding::Finding],
    suppressed: &[Option<super::suppressed::Suppression>],
) -> Result<String, String> {
    serde_saphyr::to_string(&entries_suppressed(policies, findings, suppressed))
        .map_err(|e| e.to_string())
}

/// The text output's lines for suppressed findings (empty when none is): one per finding,
/// then their count.
pub fn render_suppressed_text(
    findings: &[crate::finding::Finding],
    suppressed: &[Option<super::suppressed::Suppression>],
) -> String {
    let mut out = String::new();
    let mut n = 0usize;
    for (f, s) in findings.iter().zip(suppressed) {
        let Some(s) = s else { continue };
        n += 1;
        let at = match f.position {
            Some(p) => format!("{}:{}:{}", f.file(), p.line, p.column),
            None => f.file().to_owned(),
        };
        let field = if f.field_ref.is_empty() {
            String::new()
        } else {
            format!(" {}", f.field_ref)
        };
        let reason = s
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "suppressed {} {} {}{field} at {at} (by {} {}{reason})\n",
            f.rule.id(),
            f.object.kind,
            f.object.name,
            s.by.as_str(),
            s.entry
        ));
    }
    if n > 0 {
        out.push_str(&super::emit::suppressed_count(n));
        out.push('\n');
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

/// `-o json`: a pretty-printed JSON array and a final newline.
pub fn render_json(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_json::to_string_pretty(&entries(policies))
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// `-o yaml`: the same array as YAML.
pub fn render_yaml(policies: &[CheckedPolicy]) -> Result<String, String> {
    serde_saphyr::to_string(&entries(policies)).map_err(|e| e.to_string())
}

/// Whether the entry is a Validating or MutatingWebhookConfiguration.
fn is_webhook(p: &CheckedPolicy) -> bool {
    crate::apiserver::webhook::WebhookKind::of(p.kind).is_some()
}

/// Whether to colour text output: only on a terminal, and never when `NO_COLOR` is set to a
/// non-empty value (<https://no-color.org>).
pub fn use_colour(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
    fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
    fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `-o text`: objects the API server would reject first, then the others, each in input
/// order. Per object a header (name, origin, verdict), the API server's causes, each
/// warning's fieldRef and text (indented), any kinds not checked; then a summary line.
pub fn render_text(policies: &[CheckedPolicy], colour: bool) -> String {
    render_text_at(policies, colour, &|_, _| None)
}

/// Where a finding is: `(object, fieldRef)` → `file:line:col`.
pub type Locator<'a> = dyn Fn(&CheckedPolicy, &str) -> Option<String> + 'a;

/// [`render_text`], with each cause and warning preceded by its `file:line:col` when
/// `locate` knows it.
pub fn render_text_at(policies: &[CheckedPolicy], colour: bool, locate: &Locator<'_>) -> String {
    let st = Style { on: colour };
    let mut out = String::new();
    let mut with_warnings = 0usize;
    let ordered = policies
        .iter()
        .filter(|p| !p.api_server.accepted())
        .chain(policies.iter().filter(|p| p.api_server.accepted()));
    for p in ordered {
        let name = if p.name.is_empty() {
            "<unnamed>"
        } else {
            p.name.as_str()
        };
        let label = match p.kind {
            super::input::BINDING_KIND => format!("{} [binding]", st.bold(name)),
            super::mutating::MUTATING_POLICY_KIND => format!("{} [mutating]", st.bold(name)),
            super::mutating::MUTATING_BINDING_KIND => {
                format!("{} [mutating binding]", st.bold(name))
            }
            STATIC_MANIFESTS_KIND => format!("{} [static manifests]", st.bold(name)),
            "" if p.undecoded.is_some() => {
                let declared = p.undecoded.as_ref().and_then(|u| u.kind.as_deref());
                format!("{} [{}]", st.bold(name), declared.unwrap_or("document"))
            }
            _ => st.bold(name),
        };
        let warnings = p
            .status
            .as_ref()
            .map_or(&[][..], |s| s.expression_warnings.as_slice());
        let n = warnings.len();
        let mut verdicts = Vec::new();
        let v = &p.api_server;
        if let Some(u) = &p.undecoded {
            // A document that does not decode (documents.rs): where and why, nothing else.
            let what = if u.origin.document == 0 {
                "NOT READ"
            } else {
                "NOT DECODED"
            };
            out.push_str(&format!(
                "{} {}: {}\n",
                label,
                st.dim(&format!("({})", p.origin)),
                st.red(what)
            ));
            let at = match u.position {
                Some(pos) => format!("{}:{}:{}: ", u.origin.source, pos.line, pos.column),
                None => String::new(),
            };
            push_indented(
                &mut out,
                &st.red(&format!("{at}{}", u.cause())),
                "  ",
                "    ",
            );
            continue;
        }
        if !v.accepted() {
            let on = match (&v.static_dir, v.update) {
                (Some(_), _) => "loading static manifests",
                (None, true) => "on update",
                (None, false) => "on create",
            };
            let by = match engine_of(p.kind) {
                Some(engine) => engine.to_owned(),
                None => format!("kube-apiserver 1.{}", v.server_minor),
            };
            verdicts.push(st.red(&format!(
                "REJECTED by {by} {on}: {}",
                plural(v.causes.len(), "cause")
            )));
        }
        if n > 0 {
            verdicts.push(st.red(&plural(n, "warning")));
        }
        let runtime = p.status.as_ref().map_or(&[][..], |s| s.runtime.as_slice());
        if !runtime.is_empty() {
            verdicts.push(st.red(&plural(runtime.len(), "runtime error")));
        }
        if !p.advice.is_empty() {
            verdicts.push(st.yellow(&plural(p.advice.len(), "webhook finding")));
        }
        if verdicts.is_empty() {
            verdicts.push(st.green("ok"));
        }
        out.push_str(&format!(
            "{} {}: {}\n",
            label,
            st.dim(&format!("({})", p.origin)),
            verdicts.join("; ")
        ));
        if p.kind != STATIC_MANIFESTS_KIND {
            for cause in &v.causes {
                let at = match locate(p, &cause.field) {
                    Some(at) if v.static_dir.is_none() => format!("{at}: "),
                    _ => String::new(),
                };
                push_indented(
                    &mut out,
                    &st.red(&format!("{at}{}", cause.text)),
                    "  ",
                    "    ",
                );
            }
        } else if let Some((first, rest)) = v.causes.split_first() {
            // The folder: what kube-apiserver prints (its first error), then the others.
            out.push_str(&format!(
                "  kube-apiserver 1.{} does not start with this folder (a reload keeps the previous set):\n",
                v.server_minor
            ));
            let startup = format!(
                "failed to load static policy manifests from {}: {first}",
                crate::apiserver::field::go_quote(&p.name)
            );
            push_indented(&mut out, &st.red(&startup), "    ", "      ");
            if !rest.is_empty() {
                out.push_str(&format!(
                    "  it stops at that error; vapcheck also found {}:\n",
                    plural(rest.len(), "more error")
                ));
                for cause in rest {
                    push_indented(&mut out, &st.red(&cause.text), "    ", "      ");
                }
            }
        }
        if n > 0 && !is_webhook(p) {
            with_warnings += 1;
        }
        if let Some(e) = &p.effect {
            let verdict = e.verdict.to_string();
            let verdict = match e.verdict {
                Verdict::DeniesAllMatching => st.red(&verdict),
                Verdict::Inactive => st.yellow(&verdict),
                _ => st.green(&verdict),
            };
            push_indented(&mut out, &format!("{verdict}: {}", e.reason), "  ", "    ");
            for n in &e.notes {
                push_indented(&mut out, &st.dim(&format!("note: {n}")), "    ", "      ");
            }
        }
        if let Some(b) = &p.bound_by {
            let names = if b.is_empty() {
                "no binding (the policy does nothing)".to_owned()
            } else {
                b.join(", ")
            };
            out.push_str(&format!("  {}\n", st.dim(&format!("bound by: {names}"))));
        }
        for w in warnings {
            let at = locate(p, &w.field_ref)
                .map(|a| format!("{a}: "))
                .unwrap_or_default();
            out.push_str(&format!("  {at}{}\n", st.yellow(&w.field_ref)));
            push_indented(&mut out, w.warning.trim_end_matches('\n'), "    ", "    ");
        }
        // Extended mode: errors on valid objects (docs/runtime-safety.md).
        for f in runtime {
            let at = locate(p, &f.field_ref)
                .map(|a| format!("{a}: "))
                .unwrap_or_default();
            out.push_str(&format!("  {at}{}\n", st.red(&f.field_ref)));
            push_indented(&mut out, &f.text_without_field(), "    ", "      ");
            if let Some(fixed) = &f.fixed_expression {
                push_indented(
                    &mut out,
                    &st.dim(&format!("fix: {fixed}")),
                    "    ",
                    "      ",
                );
            }
        }
        // Webhook configurations: kube-apiserver's warning and the documented practices
        // (docs/webhooks.md).
        for a in &p.advice {
            let at = locate(p, &a.field_ref)
                .map(|a| format!("{a}: "))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {at}{}
",
                st.yellow(&format!("{} [{}]", a.field_ref, a.rule.id()))
            ));
            push_indented(&mut out, &a.message, "    ", "      ");
        }
        // Extended mode: maxima that can exceed a runtime cost limit (docs/cost.md).
        for f in p.status.iter().flat_map(|s| s.cost.findings.iter()) {
            push_indented(
                &mut out,
                &st.yellow(&format!("cost: {}", f.text())),
                "  ",
                "    ",
            );
        }
        for c in p.status.iter().flat_map(|s| s.conditions.iter()) {
            if c.reason != "AllKindsChecked" && c.type_ == "TypeChecked" {
                out.push_str(&format!(
                    "  {}\n",
                    st.dim(&format!("{} ({}): {}", c.type_, c.reason, c.message))
                ));
            }
        }
    }
    let n_policies = policies
        .iter()
        .filter(|p| p.status.is_some() && !is_webhook(p))
        .count();
    let webhooks: Vec<&CheckedPolicy> = policies.iter().filter(|p| is_webhook(p)).collect();
    let n_bindings = policies
        .iter()
        .filter(|p| p.kind == super::input::BINDING_KIND)
        .count();
    let refused: Vec<&CheckedPolicy> = policies
        .iter()
        .filter(|p| {
            p.kind != STATIC_MANIFESTS_KIND && p.undecoded.is_none() && !p.api_server.accepted()
        })
        .collect();
    let rejected = refused
        .iter()
        .filter(|p| engine_of(p.kind).is_none())
        .count();
    let undecoded = policies.iter().filter(|p| p.undecoded.is_some()).count();
    let count = if n_policies == 1 {
        "1 policy".to_owned()
    } else {
        format!("{n_policies} policies")
    };
    out.push_str(&format!("{count} checked, {with_warnings} with warnings"));
    if n_bindings > 0 {
        out.push_str(&format!(", {}", plural(n_bindings, "binding")));
    }
    if !webhooks.is_empty() {
        let with_findings = webhooks
            .iter()
            .filter(|p| {
                !p.advice.is_empty()
                    || p.status
                        .as_ref()
                        .is_some_and(|s| s.has_warnings() || !s.runtime.is_empty())
            })
            .count();
        out.push_str(&format!(
            ", {} ({with_findings} with findings)",
            plural(webhooks.len(), "webhook configuration")
        ));
    }
    let minor = policies.first().map_or(0, |p| p.api_server.server_minor);
    out.push_str(&format!(
        ", {rejected} rejected by kube-apiserver 1.{minor}"
    ));
    for engine in ENGINES {
        let n = refused
            .iter()
            .filter(|p| engine_of(p.kind) == Some(engine))
            .count();
        if n > 0 {
            out.push_str(&format!(", {n} rejected by {engine}"));
        }
    }
    if undecoded > 0 {
        out.push_str(&format!(", {undecoded} not decoded"));
    }
    for folder in policies.iter().filter(|p| p.kind == STATIC_MANIFESTS_KIND) {
        let verdict = if folder.api_server.accepted() {
            "loaded"
        } else {
            "REJECTED"
        };
        out.push_str(&format!("; static manifests {}: {verdict}", folder.name));
    }
    out.push('\n');
    let effects: Vec<&BindingReport> = policies.iter().filter_map(|p| p.effect.as_ref()).collect();
    if !effects.is_empty() {
        let count = |f: fn(&Verdict) -> bool| effects.iter().filter(|e| f(&e.verdict)).count();
        out.push_str(&format!(
            "bindings: {} deny all matching requests, {} inactive, {} evaluate ({} with warnings)\n",
            count(|v| *v == Verdict::DeniesAllMatching),
            count(|v| *v == Verdict::Inactive),
            count(|v| matches!(v, Verdict::Evaluates | Verdict::EvaluatesWithWarnings(_))),
            count(|v| matches!(v, Verdict::EvaluatesWithWarnings(_))),
        ));
    }
    out
}

/// Appends `text` line by line: the first line after `first`, the others after `rest`;
/// empty lines stay empty.
fn push_indented(out: &mut String, text: &str, first: &str, rest: &str) {
    for (i, line) in text.split('\n').enumerate() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(if i == 0 { first } else { rest });
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// The policy engines whose own admission, not kube-apiserver's, decides whether their objects
/// are accepted.
const ENGINES: [&str; 2] = ["Gatekeeper", "Kyverno"];

/// The engine that refuses an object of `kind` when it is refused (`None`: kube-apiserver):
/// Gatekeeper's driver refuses a ConstraintTemplate (`super::gatekeeper`), Kyverno's policy
/// webhook a Kyverno policy (`super::kyverno`).
pub(crate) fn engine_of(kind: &str) -> Option<&'static str> {
    if kind == super::gatekeeper::KIND {
        Some(ENGINES[0])
    } else if super::kyverno::is_kind(kind) {
        Some(ENGINES[1])
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;

    use super::*;
    use crate::policy::status::{expressions_valid_condition, type_checked_condition};
    use crate::policy::{Gvk, SkipReason, SkipSubject, Skipped};

    pub(crate) fn sample() -> Vec<CheckedPolicy> {
        let kinds = [Gvk::new("apps", "v1", "Deployment")];
        let warnings = vec![ExpressionWarning {
            field_ref: "spec.validations[0].expression".into(),
            warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n".into(),
        }];
        let skipped = [Skipped {
            subject: SkipSubject::Rule(1),
            reason: SkipReason::Wildcard,
        }];
        let bad = PolicyStatus {
            observed_generation: Some(2),
            conditions: vec![
                type_checked_condition(Some(2), &kinds, &skipped, false),
                expressions_valid_condition(Some(2), &warnings, 1, true),
            ],
            expression_warnings: warnings,
            expression_results: Vec::new(),
            checked_kinds: kinds.to_vec(),
            skipped: skipped.to_vec(),
            findings: Vec::new(),
            runtime: Vec::new(),
            cost: Default::default(),
            expressions_checked: 1,
        };
        let good = PolicyStatus {
            observed_generation: None,
            conditions: vec![
                type_checked_condition(None, &kinds, &[], false),
                expressions_valid_condition(None, &[], 1, true),
            ],
            checked_kinds: kinds.to_vec(),
            ..PolicyStatus::default()
        };
        let at = |document| Origin {
            source: "p.yaml".into(),
            document,
            item: None,
        };
        vec![
            CheckedPolicy::new(
                super::super::input::POLICY_KIND,
                "bad".into(),
                at(1),
                ApiServerVerdict::new(37, false, Vec::new()),
                Some(bad),
            ),
            CheckedPolicy::new(
                super::super::input::POLICY_KIND,
                "good".into(),
                at(2),
                ApiServerVerdict::new(37, false, Vec::new()),
                Some(good),
            ),
            CheckedPolicy::new(
                super::super::input::BINDING_KIND,
                "bind".into(),
                at(3),
                ApiServerVerdict::new(
                    37,
                    false,
                    vec![crate::finding::Cause::new(
                        "spec.validationActions",
                        "spec.validationActions: Required value",
                    )],
                ),
                None,
            ),
        ]
    }

    #[test]
    fn json_shape() {
        insta::assert_snapshot!(render_json(&sample()).unwrap());
    }

    #[test]
    fn yaml_is_the_same_data_as_json() {
        let yaml = render_yaml(&sample()).unwrap();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
        let from_json: serde_json::Value =
            serde_json::from_str(&render_json(&sample()).unwrap()).unwrap();
        assert_eq!(from_yaml, from_json);
        insta::assert_snapshot!(yaml);
    }

    #[test]
    fn text_plain_and_coloured() {
        insta::assert_snapshot!(render_text(&sample(), false));
        let coloured = render_text(&sample(), true);
        assert!(coloured.contains("\x1b[33mspec.validations[0].expression\x1b[0m"));
        assert!(!render_text(&sample(), false).contains('\x1b'));
    }

    #[test]
    fn colour_only_on_terminals_without_no_color() {
        use std::ffi::OsStr;
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some(OsStr::new(""))));
        assert!(!use_colour(true, Some(OsStr::new("1"))));
        assert!(!use_colour(false, None));
    }
}

#[cfg(test)]
mod proptests {
    use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// YAML output carries exactly the same data as JSON output for any warning text
        /// (leading spaces, trailing newlines, quotes, unicode, tabs).
        #[test]
        fn yaml_round_trips_any_warning(warning in "(?s)[ \\t\\n'\":#|>a-z．＾^.-]{0,60}", name in "[a-z:# -]{0,10}") {
            let status = PolicyStatus {
                expression_warnings: vec![ExpressionWarning { field_ref: "spec.validations[0].expression".into(), warning: warning.clone() }],
                ..PolicyStatus::default()
            };
            let policies = [CheckedPolicy::new(super::super::input::POLICY_KIND, name, Origin { source: "s".into(), document: 1, item: None }, ApiServerVerdict::new(37, false, vec![crate::finding::Cause::new("", warning.clone())]), Some(status))];
            let yaml = render_yaml(&policies).unwrap();
            let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            let from_json: serde_json::Value = serde_json::from_str(&render_json(&policies).unwrap()).unwrap();
            prop_assert_eq!(from_yaml, from_json);
        }
    }
}
