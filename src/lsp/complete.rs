//! Completion of the fields of a selection in a policy's CEL expression, in the environment
//! `check` builds for the policy: below `object` and `oldObject` from the schemas of the kinds
//! the policy is checked against (the union of their fields, each marked with its type and
//! the kinds that have it), below `params` from the paramKind's schema, below `request` and
//! `namespaceObject` from upstream's types, and below `variables` the policy's variables.

use std::collections::BTreeMap;

use lsp_types::{CompletionItem, CompletionItemKind};

use super::hover::AtCursor;
use crate::policy::check::variable_pairs;
use crate::policy::probe::{object_types_of, params_schema_of};
use crate::policy::{Backends, CheckOptions};

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The variable a selection starts at (k8s.io/apiserver v0.37.1 admission/plugin/cel
/// compile.go: the variables of the environment `check` builds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// `object` or `oldObject`: the matched kinds' schemas.
    Object,
    /// `params`: the paramKind's schema.
    Params,
    /// `request`: upstream's admission request type (`BuildRequestType`).
    Request,
    /// `namespaceObject`: upstream's Namespace type (`BuildNamespaceType`).
    Namespace,
    /// `variables`: the policy's variables.
    Variables,
}

impl Root {
    fn of(name: &str) -> Option<Self> {
        use crate::k8s_env::admission as a;
        match name {
            a::OBJECT_VAR | a::OLD_OBJECT_VAR => Some(Root::Object),
            a::PARAMS_VAR => Some(Root::Params),
            a::REQUEST_VAR => Some(Root::Request),
            a::NAMESPACE_VAR => Some(Root::Namespace),
            a::VARIABLES_VAR => Some(Root::Variables),
            _ => None,
        }
    }
}

/// What is being completed at `index` of `expression`: the variable the selection starts at,
/// the field path after it whose fields are wanted, and the part of the name typed so far
/// (`object.spec.rep` → `Object`, `["spec"]`, `rep`); `None` elsewhere.
pub fn context(expression: &str, index: usize) -> Option<(Root, Vec<String>, String)> {
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
    let root = Root::of(steps.next()?)?;
    let path: Vec<String> = steps.map(str::to_owned).collect();
    if path.iter().any(|s| s.is_empty() || !s.chars().all(is_word)) {
        return None;
    }
    Some((root, path, prefix))
}

/// Fields by name, each with its types and, for each type, what has it (the kinds, the
/// paramKind; empty for `request` and `namespaceObject`, the same for every kind).
pub type Fields = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// The fields at `path` below `root` in the environment `check` builds for the policy of
/// `at`: for `object`, the union over the kinds it is checked against; for `params`, the
/// paramKind's schema; for `request` and `namespaceObject`, upstream's types; for
/// `variables` (only directly below it), the policy's variables with their type per kind.
pub fn fields(
    at: &AtCursor,
    root: Root,
    path: &[String],
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> Fields {
    fn add(fields: &mut Fields, name: String, ty: String, by: Option<String>) {
        fields
            .entry(name)
            .or_default()
            .entry(ty)
            .or_default()
            .extend(by);
    }
    let mut fields = Fields::new();
    match root {
        Root::Object => {
            for (gvk, object) in object_types_of(&at.shape(), options, backends) {
                let Some(object) = object else { continue };
                for (name, ty) in backends
                    .checker
                    .fields_at(&object, path)
                    .unwrap_or_default()
                {
                    add(&mut fields, name, ty, Some(gvk.to_string()));
                }
            }
        }
        Root::Params => {
            if let Some((gvk, Some(schema))) = params_schema_of(&at.shape(), backends) {
                for (name, ty) in backends
                    .checker
                    .fields_at(&schema, path)
                    .unwrap_or_default()
                {
                    add(&mut fields, name, ty, Some(gvk.to_string()));
                }
            }
        }
        Root::Request | Root::Namespace => {
            use crate::k8s_env::admission as a;
            let top = if root == Root::Request {
                a::REQUEST_TYPE
            } else {
                a::NAMESPACE_TYPE
            };
            let types = a::request_and_namespace_types();
            for (name, ty) in struct_fields(&types, top, path).unwrap_or_default() {
                add(&mut fields, name, ty, None);
            }
        }
        Root::Variables if path.is_empty() => {
            for (name, _) in variable_pairs(at.shape().variables) {
                fields.entry(name.to_owned()).or_default();
                let text = format!("{}.{name}", crate::k8s_env::admission::VARIABLES_VAR);
                for (gvk, ty) in at.types_of(options, backends, &text) {
                    if let Ok(ty) = ty {
                        add(
                            &mut fields,
                            name.to_owned(),
                            ty.to_string(),
                            Some(gvk.to_string()),
                        );
                    }
                }
            }
        }
        Root::Variables => {}
    }
    fields
}

/// The fields of the hand-built object type reached from `top` by `path` (each step a field
/// whose type is an object type of `types`), each with its type as `check` displays it.
fn struct_fields(
    types: &crate::cel::StructTypes,
    top: &str,
    path: &[String],
) -> Option<Vec<(String, String)>> {
    let mut name = top.to_owned();
    for step in path {
        let (_, t) = types.fields(&name)?.into_iter().find(|(n, _)| n == step)?;
        match t.type_kind() {
            crate::cel::TypeKind::Struct(n) => name = n.to_string(),
            _ => return None,
        }
    }
    Some(
        types
            .fields(&name)?
            .into_iter()
            .map(|(n, t)| (n.to_owned(), crate::engine::output_type(t).to_string()))
            .collect(),
    )
}

/// The identifier chain before a `.` at `index` of `expression` and the part of the name typed
/// after it (`object.metadata.name.sta` → `object.metadata.name`, `sta`); `None` elsewhere.
pub fn receiver(expression: &str, index: usize) -> Option<(String, String)> {
    let chars: Vec<char> = expression.chars().take(index).collect();
    let mut end = chars.len();
    while end > 0 && is_word(chars[end - 1]) {
        end -= 1;
    }
    let prefix: String = chars[end..].iter().collect();
    if end == 0 || chars[end - 1] != '.' {
        return None;
    }
    let mut start = end - 1;
    while start > 0 && (is_word(chars[start - 1]) || matches!(chars[start - 1], '.' | '?')) {
        start -= 1;
    }
    let chain: String = chars[start..end - 1].iter().collect();
    let first = chain.chars().next()?;
    (first.is_alphabetic() || first == '_').then_some((chain, prefix))
}

/// The name typed at `index` of `expression` when it starts a top-level call or identifier
/// (not after a `.`, not empty): `has(obj` → `obj`, `1 + si` → `si`.
pub fn top_level(expression: &str, index: usize) -> Option<String> {
    let chars: Vec<char> = expression.chars().take(index).collect();
    let mut end = chars.len();
    while end > 0 && is_word(chars[end - 1]) {
        end -= 1;
    }
    let word: String = chars[end..].iter().collect();
    let after_dot = end > 0 && matches!(chars[end - 1], '.' | '?');
    let starts = word
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_');
    (starts && !after_dot).then_some(word)
}

/// The standard macros (cel-go v0.30.0 parser/macro.go `AllMacros`): name, whether it is
/// called on a receiver (a list or a map), and its form.
pub const MACROS: [(&str, bool, &str); 7] = [
    ("has", false, "has(e.f) -> bool"),
    ("all", true, "e.all(x, p) -> bool"),
    ("exists", true, "e.exists(x, p) -> bool"),
    ("exists_one", true, "e.exists_one(x, p) -> bool"),
    ("map", true, "e.map(x, t) -> list"),
    ("map", true, "e.map(x, p, t) -> list"),
    ("filter", true, "e.filter(x, p) -> list"),
];

/// The type's name without its parameters: `list(string)` → `list`.
fn category(t: &str) -> &str {
    t.split('(').next().unwrap_or(t)
}

/// The signatures by name of the environment's functions and the macros that apply: member
/// overloads on a receiver of one of `types` (a type parameter or `dyn` receiver on any,
/// any overload on `dyn`), or the global ones when `types` is `None`; whose names start with
/// `prefix`.
pub fn functions(
    backends: &Backends<'_>,
    types: Option<&[String]>,
    prefix: &str,
) -> BTreeMap<String, Vec<String>> {
    let applies = |receiver: Option<&str>, any: bool| match (types, receiver) {
        (None, None) => true,
        (Some(types), Some(r)) => {
            any || r == "dyn"
                || types
                    .iter()
                    .any(|t| t == "dyn" || category(t) == category(r))
        }
        _ => false,
    };
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in backends.checker.functions() {
        // Operators (`_+_`, `!_`) and internal functions (`@in`, `@sortByAssociatedKeys`)
        // are not called by name.
        let callable = o.name.starts_with(|c: char| c.is_ascii_alphabetic());
        if callable && o.name.starts_with(prefix) && applies(o.receiver.as_deref(), o.any_receiver)
        {
            out.entry(o.name).or_default().push(o.signature);
        }
    }
    // The comprehension macros range over a list or a map.
    let ranges = types.is_some_and(|t| {
        t.iter()
            .any(|t| matches!(category(t), "list" | "map" | "dyn"))
    });
    for (name, member, form) in MACROS {
        let wanted = if member { ranges } else { types.is_none() };
        if wanted && name.starts_with(prefix) {
            out.entry(name.to_owned())
                .or_default()
                .push(format!("macro {form}"));
        }
    }
    for signatures in out.values_mut() {
        signatures.dedup();
    }
    out
}

/// The completion items at the cursor: the fields at the path being completed whose names
/// start with what is typed ([`fields`]), each with its types and what has them; after a `.`
/// on a value that has no fields, the member functions and macros of its type; a name typed
/// at top level, the global functions and macros. Functions come with their signatures.
pub fn items(
    at: &AtCursor,
    options: &CheckOptions,
    backends: &Backends<'_>,
) -> Vec<CompletionItem> {
    if let Some((root, path, prefix)) = context(&at.expression, at.index) {
        let fields = fields(at, root, &path, options, backends);
        if !fields.is_empty() {
            return field_items(fields, &prefix);
        }
    }
    let (found, kind) = if let Some((chain, prefix)) = receiver(&at.expression, at.index) {
        let types: Vec<String> = at
            .types_of(options, backends, &chain)
            .into_iter()
            .filter_map(|(_, t)| t.ok().map(|t| t.to_string()))
            .collect();
        if types.is_empty() {
            return Vec::new();
        }
        (
            functions(backends, Some(&types), &prefix),
            CompletionItemKind::METHOD,
        )
    } else if let Some(prefix) = top_level(&at.expression, at.index) {
        (
            functions(backends, None, &prefix),
            CompletionItemKind::FUNCTION,
        )
    } else {
        return Vec::new();
    };
    found
        .into_iter()
        .map(|(name, signatures)| CompletionItem {
            label: name,
            kind: Some(kind),
            detail: Some(signatures.join("; ")),
            ..CompletionItem::default()
        })
        .collect()
}

fn field_items(fields: Fields, prefix: &str) -> Vec<CompletionItem> {
    fields
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(name, types)| {
            let detail: Vec<String> = types
                .iter()
                .map(|(ty, by)| {
                    if by.is_empty() {
                        ty.clone()
                    } else {
                        format!("{ty} ({})", by.join("; "))
                    }
                })
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
        let o = Root::Object;
        assert_eq!(at_end("object."), Some((o, vec![], String::new())));
        assert_eq!(
            at_end("has(oldObject.spec.rep"),
            Some((o, vec!["spec".to_owned()], "rep".to_owned()))
        );
        assert_eq!(
            at_end("object.?metadata.?la"),
            Some((o, vec!["metadata".to_owned()], "la".to_owned()))
        );
        assert_eq!(
            at_end("1 < object.spec.template.spec."),
            Some((
                o,
                vec!["spec".to_owned(), "template".to_owned(), "spec".to_owned()],
                String::new()
            ))
        );
        assert_eq!(
            at_end("params.spec."),
            Some((Root::Params, vec!["spec".to_owned()], String::new()))
        );
        assert_eq!(
            at_end("request.userInfo.u"),
            Some((Root::Request, vec!["userInfo".to_owned()], "u".to_owned()))
        );
        assert_eq!(
            at_end("namespaceObject.metadata."),
            Some((Root::Namespace, vec!["metadata".to_owned()], String::new()))
        );
        assert_eq!(
            at_end("variables.rep"),
            Some((Root::Variables, vec![], "rep".to_owned()))
        );
        assert_eq!(at_end("self.spec."), None);
        assert_eq!(at_end("object"), None);
        assert_eq!(at_end("object.spec[0]."), None);
        assert_eq!(at_end(""), None);
        assert_eq!(
            receiver("object.metadata.name.sta", 24),
            Some(("object.metadata.name".to_owned(), "sta".to_owned()))
        );
        assert_eq!(receiver("'a'.", 4), None);
        assert_eq!(top_level("has(obj", 7).as_deref(), Some("obj"));
        assert_eq!(top_level("1 + si", 6).as_deref(), Some("si"));
        assert_eq!(top_level("x.si", 4), None);
        assert_eq!(top_level("1 + ", 4), None);
        // The cursor inside: only what is before it counts.
        assert_eq!(
            context("object.spec.x > 1", 12),
            Some((o, vec!["spec".to_owned()], String::new()))
        );
    }
}
