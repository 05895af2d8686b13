//! Which findings of `vapcheck check` are suppressed, and how severe the others are (issue 34,
//! items 2 and 3): the object's `vapcheck.io/ignore` annotation and `# vapcheck:ignore`
//! comments (matched by [`crate::suppress`], the controller's matcher), and the `ignore:` and
//! `severity:` keys of `.vapcheck.yaml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::output::{CheckedPolicy, STATIC_MANIFESTS_KIND};
use super::positions::{SpannedDocument, Step, parse_path};
use crate::finding::{Finding, Rule};
use crate::suppress::{self, Comment, Directive, Entry};

/// A severity given to a rule in `.vapcheck.yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// SARIF `error`.
    Error,
    /// SARIF `warning`.
    Warning,
    /// SARIF `note`: shown, never fails the run.
    Note,
    /// Not reported: the findings are suppressed by the configuration.
    Off,
}

impl Level {
    /// The SARIF level (`off` keeps the rule's own: its results are suppressed).
    pub fn sarif(self) -> Option<&'static str> {
        match self {
            Level::Error => Some("error"),
            Level::Warning => Some("warning"),
            Level::Note => Some("note"),
            Level::Off => None,
        }
    }
}

/// One `ignore:` item of `.vapcheck.yaml`, as written.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoreItem {
    /// `RULE` or `RULE@FIELD`, as in the annotation.
    pub rule: String,
    /// Files or folders (relative to the configuration file) it is limited to.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Objects (`NAME` or `KIND/NAME`) it is limited to.
    #[serde(default)]
    pub objects: Vec<String>,
    /// Why.
    pub reason: Option<String>,
}

/// An `ignore:` item, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignore {
    /// The rule and field.
    pub entry: Entry,
    /// Absolute files or folders (empty: every file).
    pub files: Vec<PathBuf>,
    /// `NAME` or `KIND/NAME` (empty: every object).
    pub objects: Vec<String>,
    /// Why.
    pub reason: Option<String>,
}

/// The per-rule settings of `.vapcheck.yaml` (there are no flags for them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSettings {
    /// `ignore:`.
    pub ignores: Vec<Ignore>,
    /// `severity:`, by rule id.
    pub severity: BTreeMap<String, Level>,
    /// The file they were read from (named in the reasons).
    pub file: Option<PathBuf>,
}

impl RuleSettings {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.ignores.is_empty() && self.severity.is_empty()
    }

    /// Parses the keys `ignore` and `severity` of a file read from `dir`. `Err` names the key,
    /// the item and what is wrong.
    pub fn parse(
        ignore: &[IgnoreItem],
        severity: &BTreeMap<String, String>,
        dir: &Path,
    ) -> Result<Self, String> {
        let mut out = RuleSettings::default();
        for (i, item) in ignore.iter().enumerate() {
            let mut entries = suppress::parse_entries(&item.rule)
                .map_err(|e| format!("ignore[{i}].rule: {e}"))?;
            if entries.len() != 1 {
                return Err(format!(
                    "ignore[{i}].rule: {:?}: one RULE or RULE@FIELD per item",
                    item.rule
                ));
            }
            for (j, o) in item.objects.iter().enumerate() {
                if o.trim().is_empty() || o.matches('/').count() > 1 {
                    return Err(format!(
                        "ignore[{i}].objects[{j}]: {o:?} is not NAME or KIND/NAME"
                    ));
                }
            }
            out.ignores.push(Ignore {
                entry: entries.remove(0),
                files: item.files.iter().map(|f| absolute(&dir.join(f))).collect(),
                objects: item.objects.clone(),
                reason: item.reason.clone().filter(|r| !r.trim().is_empty()),
            });
        }
        for (rule, level) in severity {
            if !suppress::RULE_IDS.contains(&rule.as_str()) {
                return Err(format!(
                    "severity: unknown rule {rule:?} (one of {})",
                    suppress::RULE_IDS.join(", ")
                ));
            }
            let level = match level.as_str() {
                "error" => Level::Error,
                "warning" => Level::Warning,
                "note" => Level::Note,
                "off" => Level::Off,
                other => {
                    return Err(format!(
                        "severity.{rule}: {other:?} is not one of \"error\", \"warning\", \"note\", \"off\""
                    ));
                }
            };
            out.severity.insert(rule.clone(), level);
        }
        Ok(out)
    }

    /// The level set for `rule`.
    pub fn level(&self, rule: Rule) -> Option<Level> {
        self.severity.get(rule.id()).copied()
    }
}

/// A path made absolute against the working directory, `.` and `..` resolved by the file
/// system when it exists.
fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

/// Where a suppression comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The object's `vapcheck.io/ignore` annotation.
    Annotation,
    /// A `# vapcheck:ignore` comment.
    Comment,
    /// `.vapcheck.yaml` (`ignore:`, or `severity: off`).
    Configuration,
}

impl By {
    /// As shown in the outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Annotation => "annotation",
            By::Comment => "comment",
            By::Configuration => "configuration",
        }
    }
    /// The SARIF suppression kind: in the source for the annotation and the comment, outside
    /// it for the configuration.
    pub fn sarif_kind(self) -> &'static str {
        match self {
            By::Annotation | By::Comment => "inSource",
            By::Configuration => "external",
        }
    }
}

/// Why one finding is suppressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppression {
    /// Where.
    pub by: By,
    /// The entry that matched (`VAP110@spec.validations[0]`, or `severity: off`).
    pub entry: String,
    /// The reason given, if any.
    pub reason: Option<String>,
}

/// The suppression of each finding (`None`: not suppressed), and the errors of malformed
/// annotations and comments (each naming the object or the file and line, and the entry).
pub fn suppressions(
    checked: &[CheckedPolicy],
    findings: &[Finding],
    sources: &BTreeMap<String, String>,
    settings: &RuleSettings,
) -> (Vec<Option<Suppression>>, Vec<String>) {
    let mut errors = Vec::new();
    // The annotation of each entry, read again from its document.
    let annotations: Vec<Option<Directive>> = checked
        .iter()
        .map(|c| match annotation_of(c, sources) {
            Ok(d) => d,
            Err(e) => {
                errors.push(format!("{} {} ({}): {e}", c.kind, c.name, c.origin));
                None
            }
        })
        .collect();
    // The comments of each file.
    let mut comments: BTreeMap<&str, Vec<Comment>> = BTreeMap::new();
    for (file, text) in sources {
        let mut good = Vec::new();
        for c in suppress::comments(text) {
            match c {
                Ok(c) => good.push(c),
                Err((line, e)) => errors.push(format!("{file}:{line}: {e}")),
            }
        }
        if !good.is_empty() {
            comments.insert(file, good);
        }
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut parsed: BTreeMap<usize, Option<(String, Vec<Step>)>> = BTreeMap::new();
    let out = findings
        .iter()
        .map(|f| {
            let c = checked.get(f.object.entry);
            let rule = f.rule.id();
            if let Some(e) = annotations
                .get(f.object.entry)
                .and_then(Option::as_ref)
                .and_then(|d| d.find(rule, &f.field_ref).map(|e| (e, d)))
            {
                return Some(Suppression {
                    by: By::Annotation,
                    entry: e.0.to_string(),
                    reason: e.1.reason.clone(),
                });
            }
            if let (Some(file_comments), Some(pos)) = (comments.get(f.file()), f.position) {
                // The finding's line, and the line where its field starts (the key line of a
                // block scalar, whose lines below are the expression's text).
                let field_line = c.and_then(|c| {
                    let doc = parsed
                        .entry(f.object.entry)
                        .or_insert_with(|| document(c, sources))
                        .as_ref()?;
                    field_start_line(doc, &f.field_ref)
                });
                for comment in file_comments {
                    let on_line = comment.covers_line(pos.line)
                        || field_line.is_some_and(|l| comment.covers_line(l));
                    if !on_line {
                        continue;
                    }
                    if let Some(e) = comment.directive.find(rule, &f.field_ref) {
                        return Some(Suppression {
                            by: By::Comment,
                            entry: e.to_string(),
                            reason: comment.directive.reason.clone(),
                        });
                    }
                }
            }
            let file = absolute(&cwd.join(f.file()));
            for ig in &settings.ignores {
                let in_files = ig.files.is_empty() || ig.files.iter().any(|p| file.starts_with(p));
                let in_objects = ig.objects.is_empty()
                    || ig.objects.iter().any(|o| match o.split_once('/') {
                        Some((kind, name)) => kind == f.object.kind && name == f.object.name,
                        None => o == &f.object.name,
                    });
                if in_files && in_objects && ig.entry.covers(rule, &f.field_ref) {
                    return Some(Suppression {
                        by: By::Configuration,
                        entry: ig.entry.to_string(),
                        reason: ig.reason.clone(),
                    });
                }
            }
            if settings.level(f.rule) == Some(Level::Off) {
                return Some(Suppression {
                    by: By::Configuration,
                    entry: format!("severity: {rule}: off"),
                    reason: None,
                });
            }
            None
        })
        .collect();
    (out, errors)
}

/// The line (1-based, the file's) where `field_ref` of the object starts, in its document and
/// with the path to the object in it ([`document`]): a suppression comment alone on the line
/// above it covers the field's findings (a scalar starts at its first indicator: `|`, `>`, a
/// quote).
pub fn field_start_line(doc: &(String, Vec<Step>), field_ref: &str) -> Option<usize> {
    let spanned = SpannedDocument::parse(&doc.0)?;
    let mut path = doc.1.clone();
    path.extend(parse_path(field_ref));
    match spanned.locate(&path) {
        Some((scalar, _)) => Some(scalar.start.line),
        None => spanned.locate_node(&path).map(|p| p.line),
    }
}

/// The document of an entry and the path to its object in it.
pub fn document(
    c: &CheckedPolicy,
    sources: &BTreeMap<String, String>,
) -> Option<(String, Vec<Step>)> {
    if c.kind == STATIC_MANIFESTS_KIND || c.undecoded.is_some() {
        return None;
    }
    let text = sources.get(&c.origin.source)?;
    let (doc, mut prefix) = super::input::document_text(text, c.origin.document)?;
    if let Some(i) = c.origin.item {
        prefix.push(Step::Key("items".into()));
        prefix.push(Step::Index(i));
    }
    Some((doc, prefix))
}

/// The `vapcheck.io/ignore` annotation of an entry, parsed.
fn annotation_of(
    c: &CheckedPolicy,
    sources: &BTreeMap<String, String>,
) -> Result<Option<Directive>, String> {
    // Cheap: most files hold no annotation of vapcheck's.
    if !sources
        .get(&c.origin.source)
        .is_some_and(|t| t.contains(suppress::ANNOTATION))
    {
        return Ok(None);
    }
    let Some((doc, prefix)) = document(c, sources) else {
        return Ok(None);
    };
    let Some(spanned) = SpannedDocument::parse(&doc) else {
        return Ok(None);
    };
    let value = |key: &str| {
        let mut path = prefix.clone();
        path.extend([
            Step::Key("metadata".into()),
            Step::Key("annotations".into()),
            Step::Key(key.into()),
        ]);
        spanned.locate(&path).map(|(_, v)| v)
    };
    suppress::from_annotations(
        value(suppress::ANNOTATION).as_deref(),
        value(suppress::REASON_ANNOTATION).as_deref(),
    )
}

/// Whether anything could be suppressed or re-levelled: settings, or a source naming the
/// annotation or the comment (else `check` skips the work).
pub fn wanted(settings: &RuleSettings, sources: &BTreeMap<String, String>) -> bool {
    !settings.is_empty()
        || sources
            .values()
            .any(|t| t.contains(suppress::ANNOTATION) || t.contains(suppress::COMMENT_DIRECTIVE))
}
