//! `-o text`, for humans: per object a header (name, origin, verdict), then what is wrong with
//! it, then a summary line. The causes, the webhook advice and a document that does not
//! decode are printed from the object's findings. The type-checking warnings and the
//! runtime-safety findings are printed from the status: a warning is upstream's text for the
//! field (`policy::render_warning`, `TypeCheckingResults.String`), which the findings split
//! per kind and error; a runtime-safety finding prints its rewrite on a line of its own, which
//! the finding's message joins to its text. Either way, each line is placed at its finding's
//! `file:line:col` when the findings know it.

use super::super::input::BINDING_KIND;
use super::super::mutating::{MUTATING_BINDING_KIND, MUTATING_POLICY_KIND};
use super::super::output::{CheckedPolicy, ENGINES, STATIC_MANIFESTS_KIND, engine_of};
use super::super::suppressed::Suppression;
use crate::bindings::{BindingReport, Verdict};
use crate::finding::{Finding, Rule};

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

/// `file:line:col: ` of the field `field` of `p`: the place of the first finding on that
/// field of an object of `p`'s kind and name in `p`'s file; empty when none is placed.
fn at(findings: &[Finding], p: &CheckedPolicy, field: &str) -> String {
    findings
        .iter()
        .find(|f| {
            f.object.kind == p.kind
                && f.object.name == p.name
                && f.file() == p.origin.source
                && f.field_ref == field
        })
        .and_then(|f| f.position)
        .map(|pos| format!("{}:{}:{}: ", p.origin.source, pos.line, pos.column))
        .unwrap_or_default()
}

/// `-o text` of `policies` and their `findings` ([`super::findings`]): objects the API server
/// would reject first, then the others, each in input order. Per object a header (name,
/// origin, verdict), the API server's causes, each warning's fieldRef and text (indented),
/// any kinds not checked; then a summary line.
pub fn render_text(policies: &[CheckedPolicy], findings: &[Finding], colour: bool) -> String {
    let st = Style { on: colour };
    let mut out = String::new();
    let ordered = policies
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.api_server.accepted())
        .chain(
            policies
                .iter()
                .enumerate()
                .filter(|(_, p)| p.api_server.accepted()),
        );
    for (entry, p) in ordered {
        let mine: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.object.entry == entry)
            .collect();
        object(&mut out, &st, p, &mine, findings);
    }
    summary(&mut out, policies);
    out
}

/// The header and body of one object; `mine` are its findings, `all` every finding.
fn object(out: &mut String, st: &Style, p: &CheckedPolicy, mine: &[&Finding], all: &[Finding]) {
    let name = if p.name.is_empty() {
        "<unnamed>"
    } else {
        p.name.as_str()
    };
    let label = match p.kind {
        BINDING_KIND => format!("{} [binding]", st.bold(name)),
        MUTATING_POLICY_KIND => format!("{} [mutating]", st.bold(name)),
        MUTATING_BINDING_KIND => format!("{} [mutating binding]", st.bold(name)),
        STATIC_MANIFESTS_KIND => format!("{} [static manifests]", st.bold(name)),
        "" if p.undecoded.is_some() => {
            let declared = p.undecoded.as_ref().and_then(|u| u.kind.as_deref());
            format!("{} [{}]", st.bold(name), declared.unwrap_or("document"))
        }
        _ => st.bold(name),
    };
    let origin = st.dim(&format!("({})", p.origin));
    if p.undecoded.is_some() {
        // A document that does not decode (documents.rs): where and why, nothing else.
        for f in mine.iter().filter(|f| f.rule == Rule::NotDecoded) {
            not_decoded(out, st, &label, &origin, f);
        }
        return;
    }
    let of = |rule: fn(Rule) -> bool| -> Vec<&Finding> {
        mine.iter().copied().filter(|f| rule(f.rule)).collect()
    };
    let causes = of(|r| matches!(r, Rule::Rejected | Rule::StaticManifests));
    let advice = of(|r| matches!(r, Rule::Webhook(_)));
    let warnings = p
        .status
        .as_ref()
        .map_or(&[][..], |s| s.expression_warnings.as_slice());
    let runtime = p.status.as_ref().map_or(&[][..], |s| s.runtime.as_slice());
    let v = &p.api_server;
    let mut verdicts = Vec::new();
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
            plural(causes.len(), "cause")
        )));
    }
    if !warnings.is_empty() {
        verdicts.push(st.red(&plural(warnings.len(), "warning")));
    }
    if !runtime.is_empty() {
        verdicts.push(st.red(&plural(runtime.len(), "runtime error")));
    }
    if !advice.is_empty() {
        verdicts.push(st.yellow(&plural(advice.len(), "webhook finding")));
    }
    if verdicts.is_empty() {
        verdicts.push(st.green("ok"));
    }
    out.push_str(&format!("{label} {origin}: {}\n", verdicts.join("; ")));
    if p.kind != STATIC_MANIFESTS_KIND {
        for f in &causes {
            // A static manifest's causes are the loader's: they name files, not fields.
            let at = match v.static_dir {
                None => at(all, p, &f.field_ref),
                Some(_) => String::new(),
            };
            push_indented(out, &st.red(&format!("{at}{}", f.message)), "  ", "    ");
        }
    } else if let Some((first, rest)) = causes.split_first() {
        // The folder: what kube-apiserver prints (its first error), then the others.
        out.push_str(&format!(
            "  kube-apiserver 1.{} does not start with this folder (a reload keeps the previous set):\n",
            v.server_minor
        ));
        let startup = format!(
            "failed to load static policy manifests from {}: {}",
            crate::apiserver::field::go_quote(&p.name),
            first.message
        );
        push_indented(out, &st.red(&startup), "    ", "      ");
        if !rest.is_empty() {
            out.push_str(&format!(
                "  it stops at that error; vapcheck also found {}:\n",
                plural(rest.len(), "more error")
            ));
            for f in rest {
                push_indented(out, &st.red(&f.message), "    ", "      ");
            }
        }
    }
    if let Some(e) = &p.effect {
        effect(out, st, e);
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
        let at = at(all, p, &w.field_ref);
        out.push_str(&format!("  {at}{}\n", st.yellow(&w.field_ref)));
        push_indented(out, w.warning.trim_end_matches('\n'), "    ", "    ");
    }
    // Extended mode: errors on valid objects (docs/runtime-safety.md).
    for f in runtime {
        let at = at(all, p, &f.field_ref);
        out.push_str(&format!("  {at}{}\n", st.red(&f.field_ref)));
        push_indented(out, &f.text_without_field(), "    ", "      ");
        if let Some(fixed) = &f.fixed_expression {
            push_indented(out, &st.dim(&format!("fix: {fixed}")), "    ", "      ");
        }
    }
    // Webhook configurations: kube-apiserver's warning and the documented practices
    // (docs/webhooks.md).
    for f in &advice {
        let at = at(all, p, &f.field_ref);
        let title = format!("{} [{}]", f.field_ref, f.rule.id());
        out.push_str(&format!("  {at}{}\n", st.yellow(&title)));
        push_indented(out, &f.message, "    ", "      ");
    }
    // Extended mode: maxima that can exceed a runtime cost limit (docs/cost.md).
    for f in p.status.iter().flat_map(|s| s.cost.findings.iter()) {
        let cost = st.yellow(&format!("cost: {}", f.text()));
        push_indented(out, &cost, "  ", "    ");
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

/// A document that does not decode, from its finding: the header, then where and why.
fn not_decoded(out: &mut String, st: &Style, label: &str, origin: &str, f: &Finding) {
    let what = if f.object.origin.document == 0 {
        "NOT READ"
    } else {
        "NOT DECODED"
    };
    out.push_str(&format!("{label} {origin}: {}\n", st.red(what)));
    let at = match f.position {
        Some(pos) => format!("{}:{}:{}: ", f.file(), pos.line, pos.column),
        None => String::new(),
    };
    let cause = if f.field_ref.is_empty() {
        f.message.clone()
    } else {
        format!("{}: {}", f.field_ref, f.message)
    };
    push_indented(out, &st.red(&format!("{at}{cause}")), "  ", "    ");
}

/// A binding's verdict, its reason and its notes.
fn effect(out: &mut String, st: &Style, e: &BindingReport) {
    let verdict = e.verdict.to_string();
    let verdict = match e.verdict {
        Verdict::DeniesAllMatching => st.red(&verdict),
        Verdict::Inactive => st.yellow(&verdict),
        _ => st.green(&verdict),
    };
    push_indented(out, &format!("{verdict}: {}", e.reason), "  ", "    ");
    for n in &e.notes {
        push_indented(out, &st.dim(&format!("note: {n}")), "    ", "      ");
    }
}

/// The summary line, and the bindings' verdicts.
fn summary(out: &mut String, policies: &[CheckedPolicy]) {
    let with_warnings = policies
        .iter()
        .filter(|p| p.undecoded.is_none() && !is_webhook(p))
        .filter(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| !s.expression_warnings.is_empty())
        })
        .count();
    let n_policies = policies
        .iter()
        .filter(|p| p.status.is_some() && !is_webhook(p))
        .count();
    let webhooks: Vec<&CheckedPolicy> = policies.iter().filter(|p| is_webhook(p)).collect();
    let n_bindings = policies.iter().filter(|p| p.kind == BINDING_KIND).count();
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

/// The text output's lines for suppressed findings (empty when none is): one per finding,
/// then their count.
pub fn render_suppressed_text(findings: &[Finding], suppressed: &[Option<Suppression>]) -> String {
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
        out.push_str(&super::suppressed_count(n));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::super::output::tests::sample;
    use super::*;

    fn text(colour: bool) -> String {
        let checked = sample();
        render_text(
            &checked,
            &super::super::findings(&checked, &BTreeMap::new()),
            colour,
        )
    }

    #[test]
    fn text_plain_and_coloured() {
        insta::assert_snapshot!(text(false));
        let coloured = text(true);
        assert!(coloured.contains("\x1b[33mspec.validations[0].expression\x1b[0m"));
        assert!(!text(false).contains('\x1b'));
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
