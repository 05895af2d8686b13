//! The front end's part of the findings: each object's findings from the core
//! ([`crate::finding::produce`]) at their places in the source file ([`super::super::positions`]):
//! the line and column of the field, of the character a CEL position names in it, and the
//! replacement in the file of a fix.

use std::collections::{BTreeMap, HashMap};

use super::super::input::{Origin, document_text, yaml_documents};
use super::super::output::{CheckedPolicy, STATIC_MANIFESTS_KIND, engine_of};
use super::super::positions::{Position, ScalarPositions, SpannedDocument, Step, parse_path};
use crate::finding::{Analysed, FileFix, Finding, ObjectRef, Rule, produce};

/// Every finding of `checked`, in output order, at its source position.
pub fn findings(checked: &[CheckedPolicy], sources: &BTreeMap<String, String>) -> Vec<Finding> {
    findings_placing(checked, sources, &mut Places::default())
}

/// What places a finding in its document: its field, its CEL position, whether it falls back
/// to its object's place (a cause of kube-apiserver or of the static loader), and its fix's
/// edit of the expression.
type PlaceKey = (
    String,
    Option<(usize, usize)>,
    bool,
    Option<(usize, usize, String)>,
);

/// Where such a finding is, and its fix's replacement in the file.
type Placed = (Option<Position>, Option<FileFix>);

/// The places of the findings located before, for a caller that locates the findings of the
/// same sources again and again (the editor server, `crate::cli::reuse`): by the object's
/// document (its text, padded, and the path to the object in it) and what places each
/// finding in it ([`PlaceKey`]); a place depends on nothing else. Those of the documents a
/// call does not ask for are dropped.
#[derive(Default)]
pub struct Places {
    docs: HashMap<(String, String), HashMap<PlaceKey, Placed>>,
}

/// [`findings`], taking the places of findings located before from `places` (and leaving
/// this call's there): an object's document is parsed again only when one of its findings
/// was not placed before.
pub fn findings_placing(
    checked: &[CheckedPolicy],
    sources: &BTreeMap<String, String>,
    places: &mut Places,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut splits = Splits::default();
    let mut old = std::mem::take(&mut places.docs);
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
            document(&mut splits, sources, &c.origin)
        };
        let key = text
            .as_ref()
            .map(|(text, prefix)| (text.clone(), format!("{prefix:?}")));
        let mut kept = key
            .as_ref()
            .and_then(|k| places.docs.remove(k).or_else(|| old.remove(k)))
            .unwrap_or_default();
        // Parsed once per object, whatever the number of its findings, and only when one of
        // them was not placed before.
        let mut parsed = None;
        for f in &mut found {
            let place_key: PlaceKey = (
                f.field_ref.clone(),
                f.cel.map(|p| (p.line, p.column)),
                matches!(f.rule, Rule::Rejected | Rule::StaticManifests),
                f.fix
                    .as_ref()
                    .map(|x| (x.edit.start, x.edit.end, x.edit.replacement.clone())),
            );
            if let Some((position, file)) = kept.get(&place_key) {
                f.position = *position;
                if let Some(fix) = f.fix.as_mut() {
                    fix.file = file.clone();
                }
                continue;
            }
            let doc = parsed
                .get_or_insert_with(|| {
                    text.as_ref().and_then(|(text, prefix)| {
                        SpannedDocument::parse(text).map(|parsed| (parsed, prefix.clone()))
                    })
                })
                .as_ref();
            let (start, scalar) = place(doc, &f.field_ref);
            f.position = match (&scalar, f.cel) {
                (Some((s, value)), Some(p)) => Some(s.at_cel(value, p.line, p.column)),
                _ => start,
            };
            // A cause the file has no place for is at its object.
            if f.position.is_none()
                && doc.is_some()
                && matches!(f.rule, Rule::Rejected | Rule::StaticManifests)
            {
                f.position = place(doc, "").0;
            }
            if let (Some((s, value)), Some(fix), Some((doc_text, prefix))) =
                (&scalar, f.fix.as_mut(), &text)
            {
                let mut path = prefix.clone();
                path.extend(parse_path(&f.field_ref));
                fix.file = file_fix(doc_text, &path, s, value, &fix.edit);
            }
            let file = f.fix.as_ref().and_then(|x| x.file.clone());
            kept.insert(place_key, (f.position, file));
        }
        if let Some(key) = key {
            places.docs.insert(key, kept);
        }
        out.extend(found);
    }
    out
}

/// The YAML documents of each source ([`yaml_documents`]), split once for all its objects.
#[derive(Default)]
struct Splits<'s>(HashMap<&'s str, Option<Vec<(usize, &'s str)>>>);

/// The document of `origin` in `sources`, with the path prefix that leads to its object: what
/// [`document_text`] gives, from the source's documents split once (`splits`).
fn document<'s>(
    splits: &mut Splits<'s>,
    sources: &'s BTreeMap<String, String>,
    origin: &Origin,
) -> Option<(String, Vec<Step>)> {
    let (name, text) = sources.get_key_value(&origin.source)?;
    let split = splits
        .0
        .entry(name.as_str())
        .or_insert_with(|| yaml_documents(text));
    let (doc, mut prefix) = match split {
        Some(docs) => {
            let (line, raw) = docs.get(origin.document.checked_sub(1)?)?;
            let mut doc = "\n".repeat(line.saturating_sub(1));
            doc.push_str(raw);
            (doc, Vec::new())
        }
        None => document_text(text, origin.document)?,
    };
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
