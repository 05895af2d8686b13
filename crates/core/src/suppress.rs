//! Suppressing findings (issue 34, item 2): which findings a user has accepted, and why.
//! One matcher for `vapcheck check` and the controller; pure (no I/O: the callers give the
//! annotations and texts).
//!
//! - The annotation `vapcheck.io/ignore: RULE[@FIELD][, RULE[@FIELD]...]` on the object
//!   suppresses those rules' findings on it; `@FIELD` limits an entry to one field and what is
//!   below it (`VAP110@spec.validations[0]` covers `spec.validations[0].expression` and
//!   `spec.validations[0].messageExpression`). The reason is a second annotation,
//!   `vapcheck.io/ignore-reason: free text`, so that the list stays a list (a reason may hold
//!   any character, commas and `@` included) and `kubectl describe` shows it on a line of its
//!   own.
//! - The YAML comment `# vapcheck:ignore RULE[@FIELD][, ...] [-- reason]` (CLI only: the API
//!   server keeps no comments) suppresses the findings on its own line; a comment alone on its
//!   line also covers the line below it.
//!
//! A value that does not parse (an empty entry, an unknown rule, an empty or unbalanced field)
//! is an error naming the entry: nothing of that annotation or comment is applied.

use crate::policy::status::{
    EXPRESSIONS_VALID, REASON_NO_WARNINGS, TYPE_CHECKED, bounded_message,
    expressions_valid_condition, expressions_valid_condition_classified,
};
use crate::policy::{Mode, PolicyCondition, PolicyStatus};

/// The annotation listing the suppressed rules.
pub const ANNOTATION: &str = "vapcheck.io/ignore";
/// The annotation giving the reason of [`ANNOTATION`].
pub const REASON_ANNOTATION: &str = "vapcheck.io/ignore-reason";
/// The word that starts a suppression comment (`# vapcheck:ignore ...`).
pub const COMMENT_DIRECTIVE: &str = "vapcheck:ignore";
/// The `ExpressionsValid` reason when every finding that would make it `False` (or list it)
/// is suppressed.
pub const REASON_FINDINGS_SUPPRESSED: &str = "FindingsSuppressed";

/// Every rule id a suppression may name (the ids of `cli::ci::Rule`; a test there keeps the
/// two lists equal).
pub const RULE_IDS: [&str; 14] = [
    "VAP001", "VAP002", "VAP003", "VAP100", "VAP101", "VAP110", "VAP120", "VAP121", "VAP122",
    "VAP123", "VAP124", "VAP125", "VAP126", "VAP127",
];

/// The rule of type-checking warnings (`status.typeChecking.expressionWarnings`).
pub const RULE_TYPE_WARNING: &str = "VAP100";
/// The rule of expressions that error at admission on valid objects.
pub const RULE_RUNTIME_ERROR: &str = "VAP110";

/// One entry of a suppression: a rule, optionally limited to a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The rule id, e.g. `VAP110`.
    pub rule: String,
    /// The field (and what is below it) the entry is limited to.
    pub field: Option<String>,
}

impl Entry {
    /// Whether the entry covers a finding of `rule` on `field_ref`.
    pub fn covers(&self, rule: &str, field_ref: &str) -> bool {
        self.rule == rule
            && self
                .field
                .as_deref()
                .is_none_or(|f| field_covers(f, field_ref))
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}@{field}", self.rule),
            None => f.write_str(&self.rule),
        }
    }
}

/// Whether the scope `scope` covers `field_ref`: the same field, or one below it
/// (`spec.validations[0]` covers `spec.validations[0].expression`, not `spec.validations[01]`).
pub fn field_covers(scope: &str, field_ref: &str) -> bool {
    match field_ref.strip_prefix(scope) {
        Some("") => true,
        Some(rest) => rest.starts_with('.') || rest.starts_with('['),
        None => false,
    }
}

/// A parsed annotation or comment: its entries and reason.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Directive {
    /// The entries, in the order written.
    pub entries: Vec<Entry>,
    /// Why (the reason annotation, or the text after ` -- ` in a comment).
    pub reason: Option<String>,
}

impl Directive {
    /// The first entry covering a finding of `rule` on `field_ref`.
    pub fn find(&self, rule: &str, field_ref: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.covers(rule, field_ref))
    }
}

/// Parses `RULE[@FIELD][, RULE[@FIELD]...]`. `Err` names the first bad entry and why.
pub fn parse_entries(list: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for raw in list.split(',') {
        let item = raw.trim();
        let bad = |why: &str| format!("entry {item:?}: {why}");
        if item.is_empty() {
            return Err(if list.trim().is_empty() {
                "no rule given (expected RULE[@FIELD][, RULE[@FIELD]...])".to_owned()
            } else {
                bad("empty (expected RULE or RULE@FIELD between commas)")
            });
        }
        let (rule, field) = match item.split_once('@') {
            Some((r, f)) => (r.trim(), Some(f.trim())),
            None => (item, None),
        };
        if !RULE_IDS.contains(&rule) {
            return Err(bad(&format!(
                "unknown rule {rule:?} (one of {})",
                RULE_IDS.join(", ")
            )));
        }
        if let Some(f) = field {
            check_field(f).map_err(|why| bad(&why))?;
        }
        out.push(Entry {
            rule: rule.to_owned(),
            field: field.map(str::to_owned),
        });
    }
    Ok(out)
}

/// A field scope is a fieldRef as vapcheck reports it: keys joined by `.`, indexes in `[N]`.
fn check_field(f: &str) -> Result<(), String> {
    if f.is_empty() {
        return Err("no field after @".to_owned());
    }
    if f.contains(char::is_whitespace) || f.contains('@') {
        return Err(format!(
            "field {f:?}: a fieldRef such as spec.validations[0].expression has no spaces or @"
        ));
    }
    let mut rest = f;
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        if end == 0 && !rest.starts_with('[') {
            return Err(format!("field {f:?}: an empty key"));
        }
        rest = &rest[end..];
        while let Some(after) = rest.strip_prefix('[') {
            let Some((index, tail)) = after.split_once(']') else {
                return Err(format!("field {f:?}: `[` without `]`"));
            };
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("field {f:?}: index [{index}] is not a number"));
            }
            rest = tail;
        }
        if let Some(tail) = rest.strip_prefix('.') {
            if tail.is_empty() {
                return Err(format!("field {f:?}: ends with `.`"));
            }
            rest = tail;
        } else if !rest.is_empty() {
            return Err(format!("field {f:?}: unexpected {rest:?}"));
        }
    }
    if f.contains(']') && f.matches('[').count() != f.matches(']').count() {
        return Err(format!("field {f:?}: `]` without `[`"));
    }
    Ok(())
}

/// The suppression of an object from its annotations (`ignore`: the value of
/// [`ANNOTATION`], `reason`: of [`REASON_ANNOTATION`]). `Ok(None)`: neither is set. `Err`
/// names the annotation and the bad entry.
pub fn from_annotations(
    ignore: Option<&str>,
    reason: Option<&str>,
) -> Result<Option<Directive>, String> {
    let Some(ignore) = ignore else {
        return match reason {
            None => Ok(None),
            Some(_) => Err(format!(
                "metadata.annotations[{REASON_ANNOTATION}]: set without {ANNOTATION} (it gives the reason of that annotation's rules)"
            )),
        };
    };
    let entries =
        parse_entries(ignore).map_err(|e| format!("metadata.annotations[{ANNOTATION}]: {e}"))?;
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    Ok(Some(Directive {
        entries,
        reason: reason.map(str::to_owned),
    }))
}

/// A suppression comment of one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Its 1-based line.
    pub line: usize,
    /// Whether it is alone on its line (then it covers the next line too).
    pub alone: bool,
    /// What it says.
    pub directive: Directive,
}

impl Comment {
    /// Whether the comment covers findings on `line`.
    pub fn covers_line(&self, line: usize) -> bool {
        self.line == line || (self.alone && self.line + 1 == line)
    }
}

/// The suppression comments of a YAML text, each parsed: `Err((line, why))` for one that
/// does not parse. A comment is a `#` at the start of a line or after a space or tab, outside
/// quotes, followed by [`COMMENT_DIRECTIVE`] (only those are read; other comments are left
/// alone).
pub fn comments(text: &str) -> Vec<Result<Comment, (usize, String)>> {
    let mut out = Vec::new();
    if !text.contains(COMMENT_DIRECTIVE) {
        return out;
    }
    for (i, line) in text.lines().enumerate() {
        let Some(at) = comment_start(line) else {
            continue;
        };
        let body = line[at + 1..].trim_start();
        let Some(rest) = body.strip_prefix(COMMENT_DIRECTIVE) else {
            continue;
        };
        // `vapcheck:ignored` is another word.
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        let (list, reason) = match rest.split_once(" -- ") {
            Some((l, r)) => (l, Some(r.trim()).filter(|r| !r.is_empty())),
            None => (rest.strip_suffix(" --").unwrap_or(rest), None),
        };
        let parsed = parse_entries(list).map(|entries| Comment {
            line: i + 1,
            alone: line[..at].trim().is_empty(),
            directive: Directive {
                entries,
                reason: reason.map(str::to_owned),
            },
        });
        out.push(parsed.map_err(|e| (i + 1, format!("# {COMMENT_DIRECTIVE}: {e}"))));
    }
    out
}

/// The byte offset of the `#` starting a YAML comment on `line`, if any: at the start or after
/// a blank, outside single- and double-quoted scalars begun on this line.
fn comment_start(line: &str) -> Option<usize> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut previous: Option<char> = None;
    for (i, c) in line.char_indices() {
        if double {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => double = false,
                _ => escaped = false,
            }
        } else if single {
            // `''` inside a single-quoted scalar is a quote: closing and opening again.
            if c == '\'' {
                single = false;
            }
        } else {
            let after_blank = previous.is_none_or(|p| p == ' ' || p == '\t');
            match c {
                '#' if after_blank => return Some(i),
                '"' if after_blank || previous == Some(':') => double = true,
                '\'' if after_blank || previous == Some(':') => single = true,
                _ => {}
            }
        }
        previous = Some(c);
    }
    None
}

/// What applying an object's suppression to its status (in the controller) did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// The findings suppressed: `RULE fieldRef`, in status order.
    pub suppressed: Vec<String>,
    /// Type-checking warnings not suppressed.
    pub warnings: usize,
    /// Runtime-safety findings not suppressed.
    pub runtime: usize,
}

/// Applies `directive` to a checked policy's status: the `ExpressionsValid` condition is
/// computed again without the suppressed type-checking warnings (VAP100) and runtime-safety
/// findings (VAP110), as [`crate::policy::check_policy`] computes it in `mode`; when nothing
/// is left, it is `True` with reason [`REASON_FINDINGS_SUPPRESSED`], naming what is
/// suppressed. `status.typeChecking.expressionWarnings` (upstream's text) is never changed.
pub fn apply_to_status(status: &mut PolicyStatus, directive: &Directive, mode: Mode) -> Applied {
    let mut applied = Applied::default();
    let warnings: Vec<_> = status
        .expression_warnings
        .iter()
        .filter(|w| {
            let hit = directive.find(RULE_TYPE_WARNING, &w.field_ref).is_some();
            if hit {
                applied
                    .suppressed
                    .push(format!("{RULE_TYPE_WARNING} {}", w.field_ref));
            }
            !hit
        })
        .cloned()
        .collect();
    let runtime: Vec<_> = status
        .runtime
        .iter()
        .filter(|f| {
            let hit = directive.find(RULE_RUNTIME_ERROR, &f.field_ref).is_some();
            let item = format!("{RULE_RUNTIME_ERROR} {}", f.field_ref);
            if hit && !applied.suppressed.contains(&item) {
                applied.suppressed.push(item);
            }
            !hit
        })
        .cloned()
        .collect();
    applied.warnings = warnings.len();
    applied.runtime = runtime.len();
    if applied.suppressed.is_empty() {
        return applied;
    }
    let ran = !status
        .conditions
        .iter()
        .any(|c| c.type_ == TYPE_CHECKED && c.status == "False");
    let generation = status.observed_generation;
    let checked = status.expressions_checked;
    let mut condition = match mode {
        Mode::Strict => expressions_valid_condition(generation, &warnings, checked, ran),
        Mode::Extended => expressions_valid_condition_classified(
            generation,
            &warnings,
            &status.findings,
            &runtime,
            checked,
            ran,
        ),
    };
    if condition.reason == REASON_NO_WARNINGS {
        condition = PolicyCondition {
            reason: REASON_FINDINGS_SUPPRESSED.to_owned(),
            message: bounded_message(
                &format!("findings suppressed by {ANNOTATION}: "),
                &applied.suppressed,
            ),
            ..condition
        };
    }
    for c in &mut status.conditions {
        if c.type_ == EXPRESSIONS_VALID {
            *c = condition.clone();
        }
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rule: &str, field: Option<&str>) -> Entry {
        Entry {
            rule: rule.to_owned(),
            field: field.map(str::to_owned),
        }
    }

    #[test]
    fn entries_parse_and_cover_their_fields() {
        let got = parse_entries(" VAP110@spec.validations[0] ,VAP100").unwrap();
        assert_eq!(
            got,
            [
                entry("VAP110", Some("spec.validations[0]")),
                entry("VAP100", None)
            ]
        );
        assert!(got[0].covers("VAP110", "spec.validations[0].expression"));
        assert!(got[0].covers("VAP110", "spec.validations[0]"));
        assert!(!got[0].covers("VAP110", "spec.validations[01].expression"));
        assert!(!got[0].covers("VAP100", "spec.validations[0].expression"));
        assert!(got[1].covers("VAP100", "anything"));
        assert_eq!(got[0].to_string(), "VAP110@spec.validations[0]");
    }

    #[test]
    fn bad_entries_are_named() {
        let cases = [
            (
                "",
                "no rule given (expected RULE[@FIELD][, RULE[@FIELD]...])",
            ),
            (
                "VAP110,,VAP100",
                "entry \"\": empty (expected RULE or RULE@FIELD between commas)",
            ),
            (
                "VAP11",
                "entry \"VAP11\": unknown rule \"VAP11\" (one of VAP001, VAP002, VAP003, VAP100, VAP101, VAP110, VAP120, VAP121, VAP122, VAP123, VAP124, VAP125, VAP126, VAP127)",
            ),
            ("VAP110@", "entry \"VAP110@\": no field after @"),
            (
                "VAP110@spec.validations[0",
                "entry \"VAP110@spec.validations[0\": field \"spec.validations[0\": `[` without `]`",
            ),
            (
                "VAP110@spec..x",
                "entry \"VAP110@spec..x\": field \"spec..x\": an empty key",
            ),
            (
                "VAP110@spec.validations[a]",
                "entry \"VAP110@spec.validations[a]\": field \"spec.validations[a]\": index [a] is not a number",
            ),
            (
                "VAP110@spec.x]",
                "entry \"VAP110@spec.x]\": field \"spec.x]\": `]` without `[`",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(parse_entries(value).unwrap_err(), want, "{value:?}");
        }
        assert_eq!(
            from_annotations(None, Some("because")).unwrap_err(),
            "metadata.annotations[vapcheck.io/ignore-reason]: set without vapcheck.io/ignore (it gives the reason of that annotation's rules)"
        );
        assert_eq!(
            from_annotations(Some("VAP1"), None).unwrap_err(),
            "metadata.annotations[vapcheck.io/ignore]: entry \"VAP1\": unknown rule \"VAP1\" (one of VAP001, VAP002, VAP003, VAP100, VAP101, VAP110, VAP120, VAP121, VAP122, VAP123, VAP124, VAP125, VAP126, VAP127)"
        );
        assert_eq!(from_annotations(None, None), Ok(None));
    }

    /// The condition loses the suppressed warning; upstream's warnings stay as they were.
    #[test]
    fn status_text_is_kept_and_the_condition_computed_again() {
        use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
        let warnings: Vec<ExpressionWarning> = (0..2)
            .map(|i| ExpressionWarning {
                field_ref: format!("spec.validations[{i}].expression"),
                warning: format!("apps/v1, Kind=Deployment: ERROR: <input>:1:7: w{i}"),
            })
            .collect();
        let status = |mode| PolicyStatus {
            observed_generation: Some(3),
            conditions: vec![match mode {
                Mode::Strict => expressions_valid_condition(Some(3), &warnings, 2, true),
                Mode::Extended => {
                    expressions_valid_condition_classified(Some(3), &warnings, &[], &[], 2, true)
                }
            }],
            expression_warnings: warnings.clone(),
            expressions_checked: 2,
            ..PolicyStatus::default()
        };
        for mode in [Mode::Strict, Mode::Extended] {
            let mut s = status(mode);
            let one = Directive {
                entries: parse_entries("VAP100@spec.validations[0]").unwrap(),
                reason: None,
            };
            let applied = apply_to_status(&mut s, &one, mode);
            assert_eq!(
                applied,
                Applied {
                    suppressed: vec!["VAP100 spec.validations[0].expression".to_owned()],
                    warnings: 1,
                    runtime: 0
                }
            );
            assert_eq!(s.expression_warnings, warnings);
            let c = &s.conditions[0];
            // Extended: without a finding failing at admission, static typing only.
            let want = match mode {
                Mode::Strict => (
                    "False",
                    "ExpressionWarnings",
                    "1 expression with warnings: spec.validations[1].expression",
                ),
                Mode::Extended => (
                    "True",
                    "StaticTypingOnly",
                    "1 expression with warnings, none failing at admission: spec.validations[1].expression (static typing only)",
                ),
            };
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                want,
                "{mode:?}"
            );
            let all = Directive {
                entries: parse_entries("VAP100").unwrap(),
                reason: None,
            };
            let mut s = status(mode);
            assert_eq!(apply_to_status(&mut s, &all, mode).warnings, 0);
            assert_eq!(s.expression_warnings, warnings);
            let c = &s.conditions[0];
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                (
                    "True",
                    REASON_FINDINGS_SUPPRESSED,
                    "findings suppressed by vapcheck.io/ignore: VAP100 spec.validations[0].expression; VAP100 spec.validations[1].expression"
                )
            );
            assert_eq!(c.observed_generation, Some(3));
        }
    }

    #[test]
    fn comments_on_their_line_and_above() {
        let text = "a: 1 # vapcheck:ignore VAP110 -- known, see #12\n  # vapcheck:ignore VAP100@spec.x, VAP101\nb: '# vapcheck:ignore VAP110'\nc: \"x\" # vapcheck:ignored VAP110\nd: x#vapcheck:ignore VAP110\n# vapcheck:ignore VAP9\n";
        let got = comments(text);
        assert_eq!(got.len(), 3, "{got:?}");
        let first = got[0].as_ref().unwrap();
        assert_eq!((first.line, first.alone), (1, false));
        assert_eq!(first.directive.reason.as_deref(), Some("known, see #12"));
        assert!(first.covers_line(1) && !first.covers_line(2));
        let second = got[1].as_ref().unwrap();
        assert_eq!((second.line, second.alone), (2, true));
        assert_eq!(
            second.directive.entries,
            [entry("VAP100", Some("spec.x")), entry("VAP101", None)]
        );
        assert!(second.covers_line(2) && second.covers_line(3) && !second.covers_line(4));
        assert_eq!(second.directive.reason, None);
        assert_eq!(
            got[2].as_ref().unwrap_err(),
            &(
                6,
                "# vapcheck:ignore: entry \"VAP9\": unknown rule \"VAP9\" (one of VAP001, VAP002, VAP003, VAP100, VAP101, VAP110, VAP120, VAP121, VAP122, VAP123, VAP124, VAP125, VAP126, VAP127)".to_owned()
            )
        );
    }
}
