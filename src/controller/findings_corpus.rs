//! The controller's emitters over findings against the old path, on the corpora: for every
//! ValidatingAdmissionPolicy of `../shared/corpus/policies` and MutatingAdmissionPolicy of
//! `../shared/corpus/mutating`, checked as the controller checks them (the type check, then
//! the `AcceptedOnCreate` verdict), in both modes, the Events, their record and the report
//! entries made from the policy's findings ([`crate::finding::produce_status`]) are those made
//! from its status as before: `status.typeChecking.expressionWarnings` for the Events, and
//! [`old_policy_entries`] (the report's code before it read findings, kept here as the
//! reference) for the report.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};

use super::events::{
    FindingRecord, events_of_findings, finding_events, record_of, record_of_findings,
};
use crate::finding::{ObjectRef, produce_status};
use crate::policy::narrowing::FindingClass;
use crate::policy::{CheckOptions, Gvk, Mode, ParsedTexts, PolicyStatus};
use crate::reports::{Entry, Outcome, Severity, Suppressed, finding_entries, rule};
use crate::suppress::{ANNOTATION, Directive};

/// The report entries of a policy status as `reports::policy_entries` made them before it
/// read findings (the reference of the comparison).
fn old_policy_entries(status: &PolicyStatus, suppression: Option<&Directive>) -> Vec<Entry> {
    let entry = |rule: &'static str, outcome, severity, message: String| Entry {
        rule,
        outcome,
        severity,
        message,
        field: None,
        kind: None,
        suppressed: None,
    };
    let suppressed = |mut e: Entry, field_ref: &str| {
        if let Some(d) = suppression
            && let Some(covering) = d.find(e.rule, field_ref)
        {
            e.suppressed = Some(Suppressed {
                entry: covering.to_string(),
                reason: d.reason.clone(),
                outcome: e.outcome,
            });
            e.outcome = Outcome::Skip;
        }
        e
    };
    let class = |field_ref: &str, gvk: &Gvk| -> Option<FindingClass> {
        status
            .findings
            .iter()
            .filter(|f| f.field_ref == field_ref && &f.gvk == gvk)
            .map(|f| f.class)
            .min()
    };
    let mut out = Vec::new();
    for c in &status.conditions {
        if c.status != "False" {
            continue;
        }
        if c.type_ == crate::policy::status::ACCEPTED_ON_CREATE {
            out.push(entry(
                rule::REJECTED,
                Outcome::Fail,
                Severity::High,
                c.message.clone(),
            ));
        } else if c.type_ == crate::policy::status::TYPE_CHECKED {
            out.push(entry(
                rule::KIND_NOT_CHECKED,
                Outcome::Error,
                Severity::Medium,
                c.message.clone(),
            ));
        }
    }
    for w in &status.expression_results {
        for r in &w.kinds {
            let (outcome, severity) = match class(&w.field_ref, &r.gvk) {
                Some(FindingClass::StaticTypingOnly | FindingClass::Unreachable) => {
                    (Outcome::Warn, Severity::Medium)
                }
                Some(FindingClass::FailsAtAdmission) | None => (Outcome::Fail, Severity::High),
            };
            let mut e = entry(
                rule::TYPE_WARNING,
                outcome,
                severity,
                r.render().trim_end().to_owned(),
            );
            e.field = Some(w.field_ref.clone());
            e.kind = Some(r.gvk.to_string());
            out.push(suppressed(e, &w.field_ref));
        }
    }
    for f in &status.runtime {
        let mut message = f.text_without_field();
        if let Some(fixed) = &f.fixed_expression {
            message.push_str(&format!("; fix: {fixed}"));
        }
        let mut e = entry(rule::RUNTIME_ERROR, Outcome::Fail, Severity::High, message);
        e.field = (!f.field_ref.is_empty()).then(|| f.field_ref.clone());
        e.kind = f.kinds.first().cloned();
        out.push(suppressed(e, &f.field_ref));
    }
    for s in &status.skipped {
        out.push(entry(
            rule::KIND_NOT_CHECKED,
            Outcome::Skip,
            Severity::Info,
            format!("not checked: {s}"),
        ));
    }
    let clean = out
        .iter()
        .all(|e| matches!(e.outcome, Outcome::Pass | Outcome::Skip));
    if clean {
        let message = match out.iter().filter(|e| e.suppressed.is_some()).count() {
            0 => "no findings".to_owned(),
            1 => format!("no findings but 1 suppressed by {ANNOTATION}"),
            n => format!("no findings but {n} suppressed by {ANNOTATION}"),
        };
        out.insert(0, entry("", Outcome::Pass, Severity::Info, message));
    }
    out
}

/// What was compared.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    /// Policy statuses (policy × mode).
    statuses: usize,
    /// `expressionWarnings` entries whose text the findings gave back.
    warnings: usize,
    /// Events compared (from nothing reported and from an earlier record).
    events: usize,
    /// Report entries compared (without and with a suppression).
    entries: usize,
    /// Of them, suppressed ones.
    suppressed: usize,
    /// Of them, rejections on create (`AcceptedOnCreate=False`).
    rejected: usize,
    /// Of them, type-checking warnings that narrowing found static typing only or unreachable.
    narrowed: usize,
}

/// Compares the emitters over `status`'s findings with the old path.
fn compare(name: &str, status: &PolicyStatus, suppression: &Directive, counts: &mut Counts) {
    let object = ObjectRef::in_cluster("", name);
    let findings = produce_status(&object, status, None);
    // The status's text, given back by the findings byte for byte.
    let texts = crate::finding::expression_warnings(&findings);
    let want: Vec<(&str, &str)> = status
        .expression_warnings
        .iter()
        .map(|w| (w.field_ref.as_str(), w.warning.as_str()))
        .collect();
    assert_eq!(texts, want, "{name}");
    counts.warnings += texts.len();
    // The Events: from nothing, and from a record of other texts (some changed, one gone).
    assert_eq!(
        record_of_findings(&findings),
        record_of(&status.expression_warnings),
        "{name}"
    );
    let mut earlier: FindingRecord = record_of(status.expression_warnings.get(1..).unwrap_or(&[]));
    for hash in earlier.values_mut().step_by(2) {
        *hash = hash.wrapping_add(1);
    }
    earlier.insert("spec.gone".to_owned(), 1);
    for before in [None, Some(&earlier)] {
        let new = events_of_findings(before, &findings);
        let old = finding_events(before, &status.expression_warnings);
        assert_eq!(new, old, "{name}");
        counts.events += new.len();
    }
    // The report, without and with a suppression.
    for d in [None, Some(suppression)] {
        let new = finding_entries(&findings, d);
        let old = old_policy_entries(status, d);
        assert_eq!(new, old, "{name}");
        counts.entries += new.len();
        counts.suppressed += new.iter().filter(|e| e.suppressed.is_some()).count();
        counts.rejected += new.iter().filter(|e| e.rule == rule::REJECTED).count();
        counts.narrowed += new
            .iter()
            .filter(|e| e.rule == rule::TYPE_WARNING && e.severity == Severity::Medium)
            .count();
    }
    counts.statuses += 1;
}

#[test]
fn events_and_reports_from_findings_are_the_old_ones_on_the_corpora() {
    use crate::cli::input::{InputObject, for_each_object, read_objects};
    let built_in = crate::controller::corpus_support::BuiltIn::load("emitters");
    let backends = built_in.backends();
    let texts = crate::controller::corpus_support::corpus_texts;
    let mut vaps: Vec<ValidatingAdmissionPolicy> = Vec::new();
    for (source, text) in texts("corpus/policies") {
        for object in read_objects(&source, &text).expect("corpus file reads") {
            if let InputObject::Policy(p) = object {
                vaps.push(p.policy);
            }
        }
    }
    let mut maps: Vec<MutatingAdmissionPolicy> = Vec::new();
    for (source, text) in texts("corpus/mutating") {
        for_each_object(&source, &text, |_, value| {
            // Every version read as v1; the ones that do not decode as v1 are left out.
            if value.get("kind").and_then(serde_json::Value::as_str)
                == Some("MutatingAdmissionPolicy")
            {
                let mut v1 = value.clone();
                v1["apiVersion"] = "admissionregistration.k8s.io/v1".into();
                maps.extend(serde_json::from_value(v1).ok());
            }
            Ok(())
        })
        .expect("corpus file reads");
    }
    let parse = |list: &str| Directive {
        entries: crate::suppress::parse_entries(list).expect("parses"),
        reason: Some("accepted".to_owned()),
    };
    let vap_suppression = parse("VAP100@spec.validations[0], VAP110");
    let map_suppression = parse("VAP100@spec.mutations[0]");
    let mut counts = Counts::default();
    for mode in [Mode::Strict, Mode::Extended] {
        let options = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        for p in &vaps {
            let mut parsed = ParsedTexts::new();
            let mut status =
                crate::analysis::analyse_policy(p, Vec::new(), &options, &backends, &mut parsed);
            status
                .conditions
                .push(super::inputs::accepted_on_create(p, 37));
            let name = p.metadata.name.as_deref().unwrap_or_default();
            compare(name, &status, &vap_suppression, &mut counts);
        }
        for m in &maps {
            let mut parsed = ParsedTexts::new();
            let mut status =
                crate::analysis::analyse_mutating_policy(m, &options, &backends, &mut parsed);
            status
                .conditions
                .push(super::inputs::mutating_accepted_on_create(m, 37));
            let name = m.metadata.name.as_deref().unwrap_or_default();
            compare(name, &status, &map_suppression, &mut counts);
        }
    }
    eprintln!("{} VAPs, {} MAPs: {counts:?}", vaps.len(), maps.len());
    assert_eq!((vaps.len(), maps.len()), (263, 194));
    assert_eq!(
        counts,
        Counts {
            statuses: 914,
            warnings: 281,
            events: 1408,
            entries: 4681,
            suppressed: 569,
            rejected: 252,
            narrowed: 1310,
        }
    );
}
