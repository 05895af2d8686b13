//! Documents that do not decode (and files that cannot be read): where each is in its source,
//! and the report entry that stands for it (rule `VAP003`). Read by `crate::cli::documents`.

use std::collections::BTreeMap;

use super::entry::{ApiServerVerdict, CheckedPolicy};
use super::input::{Undecoded, document_text};
use super::positions::{Position, SpannedDocument, Step, parse_path};

/// Fills in the position of every [`Undecoded`] that has none: the node of its field (or the
/// nearest enclosing node that exists), else its list item, else the start of its document.
pub fn locate(undecoded: &mut [Undecoded], texts: &BTreeMap<String, String>) {
    for u in undecoded.iter_mut().filter(|u| u.position.is_none()) {
        let Some(text) = texts.get(&u.origin.source) else {
            continue;
        };
        let Some((doc, mut path)) = document_text(text, u.origin.document) else {
            continue;
        };
        if let Some(i) = u.origin.item {
            path.push(Step::Key("items".into()));
            path.push(Step::Index(i));
        }
        path.extend(parse_path(&u.field));
        u.position = SpannedDocument::parse(&doc)
            .and_then(|d| d.locate_node(&path))
            .or_else(|| first_line(&doc));
    }
}

/// The first line of a padded document that holds anything.
fn first_line(doc: &str) -> Option<Position> {
    doc.lines()
        .position(|l| !l.trim().is_empty() && l.trim() != "---")
        .map(|i| Position {
            line: i + 1,
            column: 1,
        })
}

/// The `kind` of an entry for a document of `kind`: the kind's constant when `check` reads
/// that kind, else empty (the declared kind is kept in the [`Undecoded`]).
fn static_kind(kind: Option<&str>) -> &'static str {
    use super::input::{BINDING_KIND, POLICY_KIND};
    use super::mutating::{MUTATING_BINDING_KIND, MUTATING_POLICY_KIND};
    match kind {
        Some(POLICY_KIND) => POLICY_KIND,
        Some(BINDING_KIND) => BINDING_KIND,
        Some(MUTATING_POLICY_KIND) => MUTATING_POLICY_KIND,
        Some(MUTATING_BINDING_KIND) => MUTATING_BINDING_KIND,
        Some(k) => crate::apiserver::webhook::WebhookKind::of(k).map_or("", |w| w.as_str()),
        _ => "",
    }
}

/// The output entry of a document that does not decode: never accepted (its one cause is
/// the decode error), no status.
pub fn entry(u: &Undecoded, server_minor: u32) -> CheckedPolicy {
    let cause = crate::finding::Cause::new(u.field.clone(), u.cause());
    CheckedPolicy {
        undecoded: Some(u.clone()),
        ..CheckedPolicy::new(
            static_kind(u.kind.as_deref()),
            u.name.clone().unwrap_or_default(),
            u.origin.clone(),
            ApiServerVerdict::new(server_minor, false, vec![cause]),
            None,
        )
    }
}
