//! Completion of the fields of `object` and `oldObject` (and of their nested selections) in a
//! policy's CEL expression, from the schemas of the kinds the policy is checked against: the
//! union of their fields, each marked with its type and the kinds that have it.

use std::collections::BTreeMap;

use lsp_types::{CompletionItem, CompletionItemKind};

use super::hover::AtCursor;
use crate::policy::probe::object_types;
use crate::policy::{Backends, CheckOptions};

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What is being completed at `index` of `expression`: the field path after `object` or
/// `oldObject` whose fields are wanted and the part of the name typed so far
/// (`object.spec.rep` → `["spec"]`, `rep`); `None` elsewhere.
pub fn context(expression: &str, index: usize) -> Option<(Vec<String>, String)> {
    let chars: Vec<char> = expression.chars().take(index).collect();
    let mut end = chars.len();
    while end > 0 && is_word(chars[end - 1]) {
        end -= 1;
    }
    let prefix: String = chars[end..].iter().collect();
    // `.name` or the optional `.?name`.
    if end > 0 && chars[end - 1] == '?' {
        end -= 1;
    }
    if end == 0 || chars[end - 1] != '.' {
        return None;
    }
    let mut start = end - 1;
    while start > 0 && (is_word(chars[start - 1]) || matches!(chars[start - 1], '.' | '?')) {
        start -= 1;
    }
    let chain: String = chars[start..end - 1].iter().collect();
    let mut steps = chain.split('.').map(|s| s.trim_start_matches('?'));
    let root = steps.next()?;
    if root != "object" && root != "oldObject" {
        return None;
    }
    let path: Vec<String> = steps.map(str::to_owned).collect();
    if path.iter().any(|s| s.is_empty() || !s.chars().all(is_word)) {
        return None;
    }
    Some((path, prefix))
}

/// The fields at `path` below `object` in the schemas of the kinds the policy of `at` is
/// checked against (the union): name → type → the kinds with that name and type.
pub fn fields(
    at: &AtCursor,
    path: &[String],
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut fields: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (gvk, object) in object_types(&at.policy, options, backends) {
        let Some(object) = object else { continue };
        for (name, ty) in backends
            .checker
            .fields_at(&object, path)
            .unwrap_or_default()
        {
            fields
                .entry(name)
                .or_default()
                .entry(ty)
                .or_default()
                .push(gvk.to_string());
        }
    }
    fields
}

/// The completion items at the cursor: the fields at the path being completed whose names
/// start with what is typed, from every kind's schema.
pub fn items(
    at: &AtCursor,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> Vec<CompletionItem> {
    let Some((path, prefix)) = context(&at.expression, at.index) else {
        return Vec::new();
    };
    fields(at, &path, options, backends)
        .into_iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .map(|(name, types)| {
            let detail: Vec<String> = types
                .iter()
                .map(|(ty, kinds)| format!("{ty} ({})", kinds.join("; ")))
                .collect();
            CompletionItem {
                label: name,
                kind: Some(CompletionItemKind::FIELD),
                detail: Some(detail.join(", ")),
                ..CompletionItem::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_and_prefix_before_the_cursor() {
        let at_end = |e: &str| context(e, e.chars().count());
        assert_eq!(at_end("object."), Some((vec![], String::new())));
        assert_eq!(
            at_end("has(oldObject.spec.rep"),
            Some((vec!["spec".to_owned()], "rep".to_owned()))
        );
        assert_eq!(
            at_end("object.?metadata.?la"),
            Some((vec!["metadata".to_owned()], "la".to_owned()))
        );
        assert_eq!(
            at_end("1 < object.spec.template.spec."),
            Some((
                vec!["spec".to_owned(), "template".to_owned(), "spec".to_owned()],
                String::new()
            ))
        );
        assert_eq!(at_end("params.spec."), None);
        assert_eq!(at_end("object"), None);
        assert_eq!(at_end("object.spec[0]."), None);
        assert_eq!(at_end(""), None);
        // The cursor inside: only what is before it counts.
        assert_eq!(
            context("object.spec.x > 1", 12),
            Some((vec!["spec".to_owned()], String::new()))
        );
    }
}
