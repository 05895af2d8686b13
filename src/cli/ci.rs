//! Findings at their source positions, and the formats CI systems read: GitHub Actions
//! workflow commands (`-o github`), SARIF 2.1.0 (`-o sarif`) and JUnit XML (`-o junit`).
//! Pure: the sources' texts are given.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::input::{Origin, document_text};
use super::output::{CheckedPolicy, STATIC_MANIFESTS_KIND};
use super::positions::{Position, ScalarPositions, SpannedDocument, Step, parse_path};
use super::suppressed::{Level, RuleSettings, Suppression};
use crate::policy::{Issue, KindOutcome};

/// The class of a finding: its SARIF `ruleId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// kube-apiserver rejects the object on create (or update).
    Rejected,
    /// A static-manifest folder kube-apiserver does not load.
    StaticManifests,
    /// A document that does not decode (not YAML or JSON, not a Kubernetes object, a field
    /// of a checked kind with a value of the wrong type) or a file that cannot be read: the
    /// other documents are checked, this one is not.
    NotDecoded,
    /// A type-checking warning: the expression fails for a matched kind.
    TypeWarning,
    /// Something the policy matches was not type-checked (wildcard, subresource, kind limit,
    /// no mapping, no schema): nothing is known about its expressions for it.
    KindNotChecked,
    /// An expression errors at admission on valid objects of a matched kind (an absent
    /// field or map key, a null `object` or `oldObject`; docs/runtime-safety.md).
    RuntimeError,
    /// A webhook configuration: kube-apiserver's create-time warning or a documented practice
    /// it breaks (docs/webhooks.md).
    Webhook(crate::webhooks::Practice),
}

impl Rule {
    /// The stable rule id.
    pub fn id(self) -> &'static str {
        match self {
            Rule::Rejected => "VAP001",
            Rule::StaticManifests => "VAP002",
            Rule::NotDecoded => "VAP003",
            Rule::TypeWarning => "VAP100",
            Rule::KindNotChecked => "VAP101",
            Rule::RuntimeError => "VAP110",
            Rule::Webhook(p) => p.id(),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Rule::Rejected => "RejectedByKubeApiserver",
            Rule::StaticManifests => "StaticManifestsNotLoaded",
            Rule::NotDecoded => "DocumentNotDecoded",
            Rule::TypeWarning => "ExpressionTypeWarning",
            Rule::KindNotChecked => "KindNotChecked",
            Rule::RuntimeError => "ErrorsOnValidObjects",
            Rule::Webhook(p) => p.name(),
        }
    }
    fn description(self) -> &'static str {
        match self {
            Rule::Rejected => {
                "kube-apiserver rejects the object: it is never stored (HTTP 422 on create or update)."
            }
            Rule::StaticManifests => {
                "kube-apiserver does not load the static-manifest folder: it does not start with it."
            }
            Rule::NotDecoded => {
                "A document does not decode (it is not YAML or JSON, not a Kubernetes object, or a field of a kind vapcheck checks has a value of the wrong type), or a file cannot be read: it is not checked, and cannot be created as written."
            }
            Rule::TypeWarning => {
                "An expression does not type-check against a kind the policy matches: it fails at admission time for that kind."
            }
            Rule::KindNotChecked => {
                "Something the policy matches could not be type-checked, so nothing is known about its expressions for it."
            }
            Rule::RuntimeError => {
                "An expression type-checks but errors at admission on valid objects of a matched kind (a field or map key they may omit, a null object): the failure policy then denies or skips those requests."
            }
            Rule::Webhook(p) => p.description(),
        }
    }
    pub fn level(self) -> &'static str {
        match self {
            Rule::Rejected | Rule::StaticManifests | Rule::NotDecoded | Rule::RuntimeError => {
                "error"
            }
            Rule::TypeWarning | Rule::Webhook(_) => "warning",
            Rule::KindNotChecked => "note",
        }
    }
    /// In SARIF's `rules` order (`ruleIndex`): new rules are appended so that the indexes of
    /// the others do not move.
    const ALL: [Rule; 14] = [
        Rule::Rejected,
        Rule::StaticManifests,
        Rule::TypeWarning,
        Rule::KindNotChecked,
        Rule::RuntimeError,
        Rule::Webhook(crate::webhooks::Practice::ALL[0]),
        Rule::Webhook(crate::webhooks::Practice::ALL[1]),
        Rule::Webhook(crate::webhooks::Practice::ALL[2]),
        Rule::NotDecoded,
        Rule::Webhook(crate::webhooks::Practice::ALL[3]),
        Rule::Webhook(crate::webhooks::Practice::ALL[4]),
        Rule::Webhook(crate::webhooks::Practice::ALL[5]),
        Rule::Webhook(crate::webhooks::Practice::ALL[6]),
        Rule::Webhook(crate::webhooks::Practice::ALL[7]),
    ];
}

/// One finding at its place in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Its class.
    pub rule: Rule,
    /// The file (`<stdin>` for standard input).
    pub file: String,
    /// Line and column, when the source could be read again.
    pub position: Option<Position>,
    /// The index of its object in the checked entries.
    pub entry: usize,
    /// The object's kind and name.
    pub kind: &'static str,
    /// The object's name.
    pub name: String,
    /// The field the finding is about (`spec.validations[0].expression`).
    pub field_ref: String,
    /// The matched kind (type warnings), e.g. `apps/v1, Kind=Deployment`.
    pub matched_kind: Option<String>,
    /// The message, as in the text output.
    pub message: String,
    /// A replacement in the file that fixes it (runtime-safety findings whose rewrite maps
    /// back to the file's text).
    pub fix: Option<FileFix>,
}

/// What the fix of a runtime-safety finding does (SARIF's `fixes[].description`, the title of
/// the editor's code action).
pub const FIX_DESCRIPTION: &str = "read the field only where it is present (an optional selection with the zero value, or a guard on the operation)";

/// A replacement of a region of one line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFix {
    /// The first character replaced.
    pub start: Position,
    /// The position just after the last character replaced.
    pub end: Position,
    /// The new text, as it is written in the file (escaped for the scalar's style).
    pub text: String,
}

/// `ERROR: <input>:L:C: ...` positions in a CEL error text.
fn cel_positions(text: &str) -> Vec<(usize, usize, usize)> {
    // (byte offset of "ERROR:", line, column)
    let mut out = Vec::new();
    let mut rest = text;
    let mut base = 0usize;
    while let Some(i) = rest.find("ERROR: <input>:") {
        let after = &rest[i + "ERROR: <input>:".len()..];
        let mut parts = after.splitn(3, ':');
        if let (Some(l), Some(c)) = (parts.next(), parts.next())
            && let (Ok(l), Ok(c)) = (l.parse(), c.parse())
        {
            out.push((base + i, l, c));
        }
        base += i + 1;
        rest = &rest[i + 1..];
    }
    out
}

/// The document of `origin` in `sources`, with the path prefix that leads to its object.
fn document(sources: &BTreeMap<String, String>, origin: &Origin) -> Option<(String, Vec<Step>)> {
    let text = sources.get(&origin.source)?;
    let (doc, mut prefix) = document_text(text, origin.document)?;
    if let Some(i) = origin.item {
        prefix.push(Step::Key("items".into()));
        prefix.push(Step::Index(i));
    }
    Some((doc, prefix))
}

/// Where `field` of the object is, and (for a string scalar) its characters; `doc` is the
/// object's document, parsed once, and the path to the object in it.
fn place(
    doc: Option<&(SpannedDocument<'_>, Vec<Step>)>,
    field: &str,
) -> (Option<Position>, Option<(ScalarPositions, String)>) {
    let Some((parsed, prefix)) = doc else {
        return (None, None);
    };
    let mut path = prefix.clone();
    path.extend(parse_path(field));
    if let Some((scalar, value)) = parsed.locate(&path) {
        return (Some(scalar.start), Some((scalar, value)));
    }
    (parsed.locate_node(&path), None)
}

/// Every finding of `checked`, in output order, at its source position.
pub fn findings(checked: &[CheckedPolicy], sources: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (entry, c) in checked.iter().enumerate() {
        if let Some(u) = &c.undecoded {
            out.push(Finding {
                rule: Rule::NotDecoded,
                file: u.origin.source.clone(),
                position: u.position,
                entry,
                kind: c.kind,
                name: c.name.clone(),
                field_ref: u.field.clone(),
                matched_kind: None,
                message: u.message.clone(),
                fix: None,
            });
            continue;
        }
        let text = if c.kind == STATIC_MANIFESTS_KIND {
            None
        } else {
            document(sources, &c.origin)
        };
        // Parsed once per object, whatever the number of its findings.
        let doc = text.as_ref().and_then(|(text, prefix)| {
            SpannedDocument::parse(text).map(|parsed| (parsed, prefix.clone()))
        });
        let rule = if c.api_server.static_dir.is_some() {
            Rule::StaticManifests
        } else {
            Rule::Rejected
        };
        for cause in &c.api_server.causes {
            let field = if c.api_server.static_dir.is_none() {
                cause.split(": ").next().unwrap_or_default().to_owned()
            } else {
                String::new()
            };
            let (mut position, scalar) = place(doc.as_ref(), &field);
            if let (Some((s, value)), Some((_, l, col))) = (&scalar, cel_positions(cause).first()) {
                position = Some(s.at_cel(value, *l, *col));
            }
            if position.is_none() && doc.is_some() {
                position = place(doc.as_ref(), "").0;
            }
            out.push(Finding {
                rule,
                file: c.origin.source.clone(),
                position,
                entry,
                kind: c.kind,
                name: c.name.clone(),
                field_ref: field,
                matched_kind: None,
                message: cause.clone(),
                fix: None,
            });
        }
        for skipped in c.status.iter().flat_map(|s| s.skipped.iter()) {
            use crate::policy::SkipSubject;
            let field = match &skipped.subject {
                SkipSubject::Rule(i) => format!("spec.matchConstraints.resourceRules[{i}]"),
                SkipSubject::Resource { rule, .. } => {
                    format!("spec.matchConstraints.resourceRules[{rule}].resources")
                }
                SkipSubject::Field(f) => f.clone(),
                _ => "spec.matchConstraints".to_owned(),
            };
            out.push(Finding {
                rule: Rule::KindNotChecked,
                file: c.origin.source.clone(),
                position: place(doc.as_ref(), &field).0,
                entry,
                kind: c.kind,
                name: c.name.clone(),
                field_ref: field,
                matched_kind: None,
                message: format!("not checked: {skipped}"),
                fix: None,
            });
        }
        for w in c.status.iter().flat_map(|s| s.expression_results.iter()) {
            let (start, scalar) = place(doc.as_ref(), &w.field_ref);
            // One finding per matched kind and CEL error at a position in the expression; a
            // kind's result without one (an internal error, a result-type message, warnings
            // only) is one finding at the field.
            for r in &w.kinds {
                let finding = |position: Option<Position>, message: String| Finding {
                    rule: Rule::TypeWarning,
                    file: c.origin.source.clone(),
                    position,
                    entry,
                    kind: c.kind,
                    name: c.name.clone(),
                    field_ref: w.field_ref.clone(),
                    matched_kind: Some(r.gvk.to_string()),
                    message,
                    fix: None,
                };
                let issues = match &r.outcome {
                    KindOutcome::Issues(issues) => issues,
                    KindOutcome::Error(e) => {
                        let message = format!("type checking error: {e}");
                        out.push(finding(start, message.trim_end().to_owned()));
                        continue;
                    }
                };
                if !issues.iter().any(Issue::is_positioned_error) {
                    out.push(finding(start, issues.render().trim_end().to_owned()));
                    continue;
                }
                // An issue without a position (or a warning) after a positioned error belongs
                // to that error's finding, as in the rendered text.
                let mut current: Option<(Option<Position>, String)> = None;
                for issue in issues {
                    match (issue.is_positioned_error(), &mut current, issue.pos) {
                        (true, _, Some(p)) => {
                            if let Some((pos, text)) = current.take() {
                                out.push(finding(pos, text.trim_end().to_owned()));
                            }
                            let position = match &scalar {
                                Some((s, value)) => Some(s.at_cel(value, p.line, p.column + 1)),
                                None => start,
                            };
                            current = Some((position, issue.text.clone()));
                        }
                        (_, Some((_, text)), _) => {
                            text.push('\n');
                            text.push_str(&issue.text);
                        }
                        // Before the first positioned error: not in any finding's slice of
                        // the text (cel-go sorts position-less issues first).
                        _ => {}
                    }
                }
                if let Some((pos, text)) = current {
                    out.push(finding(pos, text.trim_end().to_owned()));
                }
            }
        }
        for a in &c.advice {
            out.push(Finding {
                rule: Rule::Webhook(a.rule),
                file: c.origin.source.clone(),
                position: place(doc.as_ref(), &a.field_ref).0,
                entry,
                kind: c.kind,
                name: c.name.clone(),
                field_ref: a.field_ref.clone(),
                matched_kind: None,
                message: a.message.clone(),
                fix: None,
            });
        }
        for f in c.status.iter().flat_map(|s| s.runtime.iter()) {
            let (start, scalar) = place(doc.as_ref(), &f.field_ref);
            let position = match (&scalar, f.pos) {
                (Some((s, value)), Some(p)) => Some(s.at_cel(value, p.line, p.column + 1)),
                _ => start,
            };
            let fix = match (&scalar, &f.fix, &text) {
                (Some((s, value)), Some(edit), Some((doc_text, prefix))) => {
                    let mut path = prefix.clone();
                    path.extend(parse_path(&f.field_ref));
                    file_fix(doc_text, &path, s, value, edit)
                }
                _ => None,
            };
            let mut message = f.text_without_field();
            if let Some(fixed) = &f.fixed_expression {
                message.push_str(&format!("; fix: {fixed}"));
            }
            out.push(Finding {
                rule: Rule::RuntimeError,
                file: c.origin.source.clone(),
                position,
                entry,
                kind: c.kind,
                name: c.name.clone(),
                field_ref: f.field_ref.clone(),
                matched_kind: f.kinds.first().cloned(),
                message,
                fix,
            });
        }
    }
    out
}

/// The replacement in the file that applies `edit` to the expression `value` of the scalar
/// `s` at `path` in `doc`: on one line, escaped as the scalar's style needs (plain or block,
/// single-quoted, double-quoted), and kept only when the edited document reads back as the
/// edited expression.
fn file_fix(
    doc: &str,
    path: &[Step],
    s: &ScalarPositions,
    value: &str,
    edit: &crate::policy::runtime::Edit,
) -> Option<FileFix> {
    let want = crate::policy::runtime::apply(value, edit)?;
    let (ci_start, ci_end) = (
        value.get(..edit.start)?.chars().count(),
        value.get(..edit.end)?.chars().count(),
    );
    let (start, end) = (s.at(ci_start), s.at(ci_end));
    if start.line != end.line || end.column < start.column {
        return None;
    }
    // Byte offsets of the two positions in `doc` (whose lines are the file's).
    let line_start = doc
        .split_inclusive('\n')
        .take(start.line - 1)
        .map(str::len)
        .sum::<usize>();
    let line = doc.get(line_start..)?.split('\n').next()?;
    let byte = |column: usize| {
        line.char_indices()
            .map(|(i, _)| i)
            .chain([line.len()])
            .nth(column - 1)
    };
    let (b0, b1) = (
        line_start + byte(start.column)?,
        line_start + byte(end.column)?,
    );
    let candidates = [
        edit.replacement.clone(),
        edit.replacement.replace('\'', "''"),
        edit.replacement.replace('\\', "\\\\").replace('"', "\\\""),
    ];
    for text in candidates {
        let edited = format!("{}{}{}", doc.get(..b0)?, text, doc.get(b1..)?);
        let reads_back = SpannedDocument::parse(&edited)
            .and_then(|d| d.locate(path))
            .is_some_and(|(_, v)| v == want);
        if reads_back {
            return Some(FileFix { start, end, text });
        }
    }
    None
}

/// The title line of a finding.
fn title(f: &Finding) -> String {
    let rejected_by;
    let what = match f.rule {
        Rule::Rejected => {
            rejected_by = format!(
                "rejected by {}",
                super::output::engine_of(f.kind).unwrap_or("kube-apiserver")
            );
            rejected_by.as_str()
        }
        Rule::StaticManifests => "static manifests not loaded",
        Rule::NotDecoded => "not decoded",
        Rule::TypeWarning => "type-checking warning",
        Rule::KindNotChecked => "not type-checked",
        Rule::RuntimeError => "errors on valid objects",
        Rule::Webhook(_) => "webhook",
    };
    if f.kind.is_empty() || f.name.is_empty() {
        // A document that does not decode may have neither.
        let kind = if f.kind.is_empty() {
            "document"
        } else {
            f.kind
        };
        let name = if f.name.is_empty() { "" } else { " " };
        return format!("{kind}{name}{}: {what}", f.name);
    }
    match &f.matched_kind {
        Some(k) if !k.is_empty() => format!("{} {}: {what} ({k})", f.kind, f.name),
        _ => format!("{} {}: {what}", f.kind, f.name),
    }
}

/// The message with the field it is about (causes already start with it).
fn full_message(f: &Finding) -> String {
    if f.field_ref.is_empty() || f.message.starts_with(&format!("{}: ", f.field_ref)) {
        f.message.clone()
    } else {
        format!("{}: {}", f.field_ref, f.message)
    }
}

/// GitHub workflow command data: `%`, CR and LF escaped.
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub workflow command property: also `:` and `,`.
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `-o github`: one `::error` / `::warning` workflow command per finding.
pub fn render_github(findings: &[Finding]) -> String {
    render_github_marked(findings, Marks::default())
}

/// [`render_github`] with [`Marks`]: no command for a baselined or suppressed finding, the
/// levels of the configuration, and one `::notice` counting the suppressed findings.
pub fn render_github_marked(findings: &[Finding], marks: Marks<'_>) -> String {
    let mut out = String::new();
    let mut suppressed = 0usize;
    for (i, f) in findings.iter().enumerate() {
        if marks.suppression(i).is_some() {
            suppressed += 1;
            continue;
        }
        if marks.baselined.and_then(|b| b.get(i)).is_some_and(|b| *b) {
            continue;
        }
        let mut props = vec![format!("file={}", gh_property(&f.file))];
        if let Some(p) = f.position {
            props.push(format!("line={}", p.line));
            props.push(format!("col={}", p.column));
        }
        props.push(format!("title={}", gh_property(&title(f))));
        let message = full_message(f);
        let command = match marks.level(f) {
            "note" => "notice",
            level => level,
        };
        out.push_str(&format!(
            "::{} {}::{}\n",
            command,
            props.join(","),
            gh_data(&message)
        ));
    }
    if suppressed > 0 {
        out.push_str(&format!(
            "::notice title=vapcheck::{}\n",
            gh_data(&suppressed_count(suppressed))
        ));
    }
    out
}

/// `N finding(s) suppressed`.
pub fn suppressed_count(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} finding{s} suppressed")
}

/// A fingerprint that does not move when unrelated text moves: the rule, the object, the
/// field, the matched kind and the message (not the line); for a document that does not
/// decode, also its file.
pub fn fingerprint(f: &Finding) -> String {
    // FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut parts = vec![
        f.rule.id(),
        f.kind,
        &f.name,
        &f.field_ref,
        f.matched_kind.as_deref().unwrap_or_default(),
        &f.message,
    ];
    // A document that does not decode may have no kind and no name: its file tells it apart.
    if f.rule == Rule::NotDecoded {
        parts.push(&f.file);
    }
    for part in parts {
        for b in part.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The key of [`fingerprint`] in SARIF `partialFingerprints`.
pub const FINGERPRINT_KEY: &str = "vapcheckFinding/v1";

/// `-o sarif`: a SARIF 2.1.0 log with one run.
pub fn render_sarif(findings: &[Finding]) -> Result<String, String> {
    render_sarif_baselined(findings, None)
}

/// [`render_sarif`] against a baseline: `baselined[i]` tells whether `findings[i]` is in it
/// (SARIF `baselineState` `unchanged`, else `new`).
pub fn render_sarif_baselined(
    findings: &[Finding],
    baselined: Option<&[bool]>,
) -> Result<String, String> {
    render_sarif_marked(
        findings,
        Marks {
            baselined,
            ..Marks::default()
        },
    )
}

/// What a run says about each finding beyond the finding: whether it is in the baseline,
/// whether it is suppressed ([`super::suppressed`]) and the levels `.vapcheck.yaml` sets.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    /// `baselined[i]`: whether `findings[i]` is in the baseline.
    pub baselined: Option<&'a [bool]>,
    /// `suppressed[i]`: why `findings[i]` is suppressed.
    pub suppressed: Option<&'a [Option<Suppression>]>,
    /// The per-rule severities.
    pub settings: Option<&'a RuleSettings>,
}

impl Marks<'_> {
    /// The suppression of finding `i`.
    pub fn suppression(&self, i: usize) -> Option<&Suppression> {
        self.suppressed
            .and_then(|s| s.get(i))
            .and_then(Option::as_ref)
    }
    /// The level of `f`: the one `.vapcheck.yaml` sets, else its rule's.
    pub fn level(&self, f: &Finding) -> &'static str {
        self.settings
            .and_then(|s| s.level(f.rule))
            .and_then(Level::sarif)
            .unwrap_or(f.rule.level())
    }
}

/// [`render_sarif`] with [`Marks`]: `baselineState` (`unchanged` or `new`), `suppressions`
/// (kind `inSource` for an annotation or a comment, `external` for the configuration, the
/// reason as `justification`) and the levels set by the configuration.
pub fn render_sarif_marked(findings: &[Finding], marks: Marks<'_>) -> Result<String, String> {
    let baselined = marks.baselined;
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            let mut rule = json!({
                "id": r.id(),
                "name": r.name(),
                "shortDescription": {"text": r.description()},
                "defaultConfiguration": {"level": r.level()}
            });
            if let Rule::Webhook(p) = r {
                rule["helpUri"] = json!(p.help_uri());
            }
            rule
        })
        .collect();
    let results: Vec<Value> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut region = json!({});
            if let Some(p) = f.position {
                region = json!({"startLine": p.line, "startColumn": p.column});
            }
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(&f.file)},
                }
            });
            if f.position.is_some() {
                location["physicalLocation"]["region"] = region;
            }
            let mut properties = json!({"kind": f.kind, "name": f.name});
            if !f.field_ref.is_empty() {
                properties["fieldRef"] = json!(f.field_ref);
            }
            if let Some(k) = &f.matched_kind {
                properties["matchedKind"] = json!(k);
            }
            let mut result = json!({
                "ruleId": f.rule.id(),
                "ruleIndex": Rule::ALL.iter().position(|r| *r == f.rule).unwrap_or(0),
                "level": marks.level(f),
                "message": {"text": format!("{}: {}", title(f), full_message(f))},
                "locations": [location],
                "partialFingerprints": {FINGERPRINT_KEY: fingerprint(f)},
                "properties": properties
            });
            if let Some(old) = baselined.and_then(|b| b.get(i)) {
                result["baselineState"] = json!(if *old { "unchanged" } else { "new" });
            }
            if let Some(sup) = marks.suppression(i) {
                let mut suppression = json!({"kind": sup.by.sarif_kind(), "status": "accepted"});
                if let Some(reason) = &sup.reason {
                    suppression["justification"] = json!(reason);
                }
                suppression["properties"] = json!({"by": sup.by.as_str(), "entry": sup.entry});
                result["suppressions"] = json!([suppression]);
            }
            if let Some(fix) = &f.fix {
                result["fixes"] = json!([{
                    "description": {"text": FIX_DESCRIPTION},
                    "artifactChanges": [{
                        "artifactLocation": {"uri": uri(&f.file)},
                        "replacements": [{
                            "deletedRegion": {
                                "startLine": fix.start.line,
                                "startColumn": fix.start.column,
                                "endLine": fix.end.line,
                                "endColumn": fix.end.column
                            },
                            "insertedContent": {"text": fix.text}
                        }]
                    }]
                }]);
            }
            result
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "vapcheck",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules
            }},
            "columnKind": "unicodeCodePoints",
            "results": results
        }]
    });
    serde_json::to_string_pretty(&log)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// A relative file name as a URI reference (`%` and spaces escaped); `<stdin>` stays.
fn uri(file: &str) -> String {
    let mut out = String::new();
    for c in file.chars() {
        match c {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            '#' => out.push_str("%23"),
            '?' => out.push_str("%3F"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            _ => out.push(c),
        }
    }
    out
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// `-o junit`: one test suite per object, one test case per field with findings (and one
/// passing case per clean object).
pub fn render_junit(checked: &[CheckedPolicy], findings: &[Finding]) -> String {
    render_junit_marked(checked, findings, Marks::default())
}

/// [`render_junit`] with [`Marks`]: a field whose findings are all suppressed or notes is a
/// skipped case (each suppressed one named so), else a failure of the others.
pub fn render_junit_marked(
    checked: &[CheckedPolicy],
    findings: &[Finding],
    marks: Marks<'_>,
) -> String {
    let mut suites = String::new();
    let (mut total, mut failed) = (0usize, 0usize);
    let index_of = |f: &Finding| {
        findings
            .iter()
            .position(|g| std::ptr::eq(g, f))
            .unwrap_or(usize::MAX)
    };
    let suppression = |f: &Finding| {
        marks
            .suppressed
            .is_some()
            .then(|| marks.suppression(index_of(f)))
            .flatten()
    };
    // Counts for the case: neither suppressed nor a note.
    let counts = |f: &Finding| suppression(f).is_none() && marks.level(f) != "note";
    for c in checked {
        let mine: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.kind == c.kind && f.name == c.name && f.file == c.origin.source)
            .collect();
        let mut by_field: BTreeMap<String, Vec<&Finding>> = BTreeMap::new();
        for f in &mine {
            let key = if f.field_ref.is_empty() {
                "object".to_owned()
            } else {
                f.field_ref.clone()
            };
            by_field.entry(key).or_default().push(f);
        }
        let suite_name = format!("{} {}", c.kind, c.name);
        let mut cases = String::new();
        let n = by_field.len().max(1);
        let notes_only = |fs: &[&Finding]| !fs.iter().any(|f| counts(f));
        let failing = by_field.values().filter(|fs| !notes_only(fs)).count();
        let skipped = by_field.len() - failing;
        total += n;
        failed += failing;
        if by_field.is_empty() {
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"/>\n",
                xml(&suite_name),
                "checks",
                xml(&c.origin.source)
            ));
        }
        for (field, fs) in &by_field {
            let line = fs.iter().find_map(|f| f.position).map(|p| p.line);
            if notes_only(fs) {
                let message: Vec<String> = fs
                    .iter()
                    .map(|f| match suppression(f) {
                        Some(sup) => format!(
                            "suppressed by {} ({}{}): {}",
                            sup.by.as_str(),
                            sup.entry,
                            sup.reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default(),
                            f.message
                        ),
                        None => f.message.clone(),
                    })
                    .collect();
                cases.push_str(&format!(
                    "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"{}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml(&suite_name),
                    xml(field),
                    xml(&c.origin.source),
                    line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default(),
                    xml(&message.join("; "))
                ));
                continue;
            }
            let fs: Vec<&Finding> = fs
                .iter()
                .copied()
                .filter(|f| suppression(f).is_none())
                .collect();
            let body: Vec<String> = fs
                .iter()
                .map(|f| {
                    let at = f
                        .position
                        .map(|p| format!("{}:{}:{}: ", f.file, p.line, p.column))
                        .unwrap_or_default();
                    format!("{at}{}", f.message)
                })
                .collect();
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"{}>\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                xml(&suite_name),
                xml(field),
                xml(&c.origin.source),
                line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default(),
                fs[0].rule.id(),
                xml(&title(fs[0])),
                xml(&body.join("\n\n"))
            ));
        }
        suites.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{failing}\" errors=\"0\" skipped=\"{skipped}\">\n{cases}  </testsuite>\n",
            xml(&suite_name),
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"vapcheck\" tests=\"{total}\" failures=\"{failed}\" errors=\"0\">\n{suites}</testsuites>\n"
    )
}

/// What the editor server (`crate::lsp`) shows of a finding, as SARIF gives it.
impl Rule {
    /// SARIF's `level`: `error`, `warning` or `note`.
    pub fn severity(self) -> &'static str {
        self.level()
    }

    /// SARIF's `helpUri`, for the rules that have one.
    pub fn help(self) -> Option<String> {
        match self {
            Rule::Webhook(p) => Some(p.help_uri()),
            _ => None,
        }
    }
}

/// A finding's message as SARIF's `message.text` gives it: its title, the field and the text.
pub fn message_text(f: &Finding) -> String {
    format!("{}: {}", title(f), full_message(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the runner decodes workflow-command data and properties (the inverse of the
    /// documented escaping).
    fn unescape(s: &str) -> String {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    }

    #[test]
    fn github_escaping_round_trips() {
        assert_eq!(gh_data("50% a\nb\r"), "50%25 a%0Ab%0D");
        assert_eq!(gh_property("a:b,c%"), "a%3Ab%2Cc%25");
        for s in [
            "100%0A is not a newline: a,b\r\nline two %25",
            "%%%,,,:::\n\n",
            "ü: x, y % z",
        ] {
            let data = gh_data(s);
            assert!(!data.contains(['\n', '\r']), "{data}");
            assert_eq!(unescape(&data), s);
            let prop = gh_property(s);
            assert!(!prop.contains([':', ',', '\n', '\r']), "{prop}");
            assert_eq!(unescape(&prop), s);
        }
    }

    /// Findings come from the per-kind results as data: one per positioned error (with what
    /// follows it up to the next), one for a result without any, the kind's name on each.
    #[test]
    fn findings_follow_the_structured_results() {
        use crate::policy::narrowing::Pos;
        use crate::policy::status::ExpressionResults;
        use crate::policy::{Gvk, Issues, KindResult, PolicyStatus, Severity};
        let error = |column: usize, message: &str| Issue {
            severity: Severity::Error,
            pos: Some(Pos { line: 1, column }),
            message: message.to_owned(),
            text: format!("ERROR: <input>:1:{}: {message}", column + 1),
        };
        let warning = Issue {
            severity: Severity::Warning,
            pos: Some(Pos { line: 1, column: 0 }),
            message: "w".to_owned(),
            text: "WARNING: <input>:1:1: w".to_owned(),
        };
        let kinds = vec![
            KindResult {
                gvk: Gvk::new("apps", "v1", "Deployment"),
                outcome: KindOutcome::Issues(Issues(vec![
                    error(0, "a"),
                    warning.clone(),
                    error(4, "b"),
                ])),
            },
            KindResult {
                gvk: Gvk::new("", "v1", "Pod"),
                outcome: KindOutcome::Issues(Issues(vec![warning])),
            },
            KindResult {
                gvk: Gvk::new("", "v1", "Pod"),
                outcome: KindOutcome::Error("fail to build env: boom".to_owned()),
            },
        ];
        let checked = CheckedPolicy {
            kind: "ValidatingAdmissionPolicy",
            name: "p".to_owned(),
            origin: Origin {
                source: "p.yaml".to_owned(),
                document: 1,
                item: None,
            },
            api_server: super::super::output::ApiServerVerdict {
                server_minor: 37,
                update: false,
                causes: Vec::new(),
                static_dir: None,
            },
            status: Some(PolicyStatus {
                expression_results: vec![ExpressionResults {
                    field_ref: "spec.validations[0].expression".to_owned(),
                    kinds,
                }],
                ..PolicyStatus::default()
            }),
            bound_by: None,
            effect: None,
            advice: Vec::new(),
            undecoded: None,
        };
        let got: Vec<(Option<String>, String)> = findings(&[checked], &BTreeMap::new())
            .into_iter()
            .map(|f| (f.matched_kind, f.message))
            .collect();
        let deployment = Some("apps/v1, Kind=Deployment".to_owned());
        let pod = Some("/v1, Kind=Pod".to_owned());
        assert_eq!(
            got,
            [
                (
                    deployment.clone(),
                    "ERROR: <input>:1:1: a\nWARNING: <input>:1:1: w".to_owned()
                ),
                (deployment, "ERROR: <input>:1:5: b".to_owned()),
                (pod.clone(), "WARNING: <input>:1:1: w".to_owned()),
                (
                    pod,
                    "type checking error: fail to build env: boom".to_owned()
                ),
            ]
        );
    }

    /// The rules a suppression may name are the rules.
    #[test]
    fn suppressible_rules_are_the_rules() {
        let mut ids: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        ids.sort_unstable();
        assert_eq!(ids, crate::suppress::RULE_IDS);
    }

    #[test]
    fn cel_error_positions() {
        let t =
            "ERROR: <input>:1:7: undefined field 'replicas'\n | x\n | ^\nERROR: <input>:3:12: y";
        assert_eq!(
            cel_positions(t)
                .iter()
                .map(|(_, l, c)| (*l, *c))
                .collect::<Vec<_>>(),
            [(1, 7), (3, 12)]
        );
    }
}
