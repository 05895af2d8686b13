//! The front end's part of the findings: each object's findings from the core
//! ([`crate::finding::produce`]) at their places in the source file ([`super::super::positions`]):
//! the line and column of the field, of the character a CEL position names in it, and the
//! replacement in the file of a fix.

use std::collections::BTreeMap;

use super::super::input::{Origin, document_text};
use super::super::output::{CheckedPolicy, STATIC_MANIFESTS_KIND, engine_of};
use super::super::positions::{Position, ScalarPositions, SpannedDocument, Step, parse_path};
use crate::finding::{Analysed, FileFix, Finding, ObjectRef, Rule, produce};

/// Every finding of `checked`, in output order, at its source position.
pub fn findings(checked: &[CheckedPolicy], sources: &BTreeMap<String, String>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (entry, c) in checked.iter().enumerate() {
        let object = ObjectRef {
            entry,
            kind: c.kind,
            name: c.name.clone(),
            origin: c.origin.clone(),
        };
        let mut found = produce(Analysed {
            object: &object,
            engine: engine_of(c.kind),
            static_manifests: c.api_server.static_dir.is_some(),
            undecoded: c
                .undecoded
                .as_ref()
                .map(|u| (u.field.as_str(), u.message.as_str())),
            causes: &c.api_server.causes,
            status: c.status.as_ref(),
            advice: &c.advice,
        });
        if let Some(u) = &c.undecoded {
            for f in &mut found {
                f.object.origin = u.origin.clone();
                f.position = u.position;
            }
            out.extend(found);
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
        for f in &mut found {
            let (start, scalar) = place(doc.as_ref(), &f.field_ref);
            f.position = match (&scalar, f.cel) {
                (Some((s, value)), Some(p)) => Some(s.at_cel(value, p.line, p.column)),
                _ => start,
            };
            // A cause the file has no place for is at its object.
            if f.position.is_none()
                && doc.is_some()
                && matches!(f.rule, Rule::Rejected | Rule::StaticManifests)
            {
                f.position = place(doc.as_ref(), "").0;
            }
            if let (Some((s, value)), Some(fix), Some((doc_text, prefix))) =
                (&scalar, f.fix.as_mut(), &text)
            {
                let mut path = prefix.clone();
                path.extend(parse_path(&f.field_ref));
                fix.file = file_fix(doc_text, &path, s, value, &fix.edit);
            }
        }
        out.extend(found);
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
