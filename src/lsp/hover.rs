//! Hover on a CEL expression of a ValidatingAdmissionPolicy or a MutatingAdmissionPolicy: the type of the selection under
//! the cursor (`object.spec.replicas`: the schema field's type), or a called function's
//! signatures in the environment, and the type of the whole expression, per kind the policy
//! is checked against ([`crate::policy::probe::types_per_kind`]), and the schema field's
//! description ([`super::describe`]).

use std::fmt::Write as _;

use crate::analysis::mutating::MutatingObject;
use crate::cli::input::{InputObject, InputOther, Origin, document_text, read_all_lenient};
use crate::cli::positions::{Position, SpannedDocument, Step, parse_path};
use crate::mutating::mutation_sites;
use crate::policy::probe::{Shape, types_per_kind_of};
use crate::policy::{Backends, CheckOptions, Mode, expression_sites};

/// The policy an expression under the cursor belongs to.
#[derive(Clone)]
pub enum Subject {
    /// A ValidatingAdmissionPolicy.
    Validating(Box<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>),
    /// A MutatingAdmissionPolicy.
    Mutating(Box<k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy>),
}

impl Subject {
    /// What its expressions' environments are built from.
    pub fn shape(&self) -> Shape<'_> {
        match self {
            Subject::Validating(p) => Shape::validating(p),
            Subject::Mutating(p) => Shape::mutating(p),
        }
    }

    /// Its `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        match self {
            Subject::Validating(p) => p.metadata.name.as_deref(),
            Subject::Mutating(p) => p.metadata.name.as_deref(),
        }
    }
}

/// The expression under a position of a file: its text, the field it is in, the index of
/// the character under the cursor, and the policy it belongs to.
pub struct AtCursor {
    /// The policy.
    pub policy: Subject,
    /// `spec.validations[0].expression`, `spec.mutations[0].applyConfiguration.expression`, ...
    pub field: String,
    /// Whether the field is compiled with the patch types (a mutation of a
    /// MutatingAdmissionPolicy).
    pub patch_types: bool,
    /// The expression's text (the decoded scalar).
    pub expression: String,
    /// The code-point index in `expression` of the character under the cursor (or just
    /// after the last one).
    pub index: usize,
}

impl AtCursor {
    /// What the expression's environments are built from.
    pub fn shape(&self) -> Shape<'_> {
        self.policy.shape()
    }

    /// `text`'s type per kind, in the expression's environment ([`types_per_kind_of`]).
    pub fn types_of(
        &self,
        options: &CheckOptions,
        backends: &Backends<'_>,
        text: &str,
    ) -> Vec<(
        crate::policy::Gvk,
        Result<crate::policy::types::OutputType, String>,
    )> {
        types_per_kind_of(&self.shape(), self.patch_types, options, backends, text)
    }
}

/// A CEL-bearing object of a document, as the hover and completion type it, and the fields
/// of its expressions: a ValidatingAdmissionPolicy, a MutatingAdmissionPolicy, or one webhook
/// of a webhook configuration with match conditions (typed as the policy `check` types it
/// as, [`crate::webhooks::match_conditions::as_policy`]).
pub struct Sites {
    /// Where the object came from.
    pub origin: Origin,
    /// The policy its expressions are typed in.
    pub policy: Subject,
    /// Each expression's field (`spec.validations[0].expression`,
    /// `webhooks[1].matchConditions[0].expression`) and whether it is compiled with the patch
    /// types (a mutation of a MutatingAdmissionPolicy).
    pub fields: Vec<(String, bool)>,
}

/// The CEL-bearing objects of what a source reads as, in the order validating policies,
/// mutating policies, webhooks (each in input order), with the sites of `check`'s extended
/// mode.
pub fn sites_of(objects: &[InputObject], others: &[InputOther]) -> Vec<Sites> {
    let mut out = Vec::new();
    for o in objects {
        if let InputObject::Policy(p) = o {
            out.push(Sites {
                origin: p.origin.clone(),
                fields: fields_of(expression_sites(&p.policy, Mode::Extended)),
                policy: Subject::Validating(Box::new(p.policy.clone())),
            });
        }
    }
    let (mutating, _) = crate::analysis::mutating::read_lenient(others);
    for o in mutating {
        if let MutatingObject::Policy(origin, p) = o {
            out.push(Sites {
                origin,
                fields: fields_of(mutation_sites(&p, Mode::Extended)),
                policy: Subject::Mutating(p),
            });
        }
    }
    let (webhooks, _) = crate::analysis::webhooks::read_lenient(others);
    for w in webhooks {
        for (i, hook) in w.config.webhooks().iter().enumerate() {
            let conditions = hook.match_conditions();
            if conditions.is_empty() {
                continue;
            }
            out.push(Sites {
                origin: w.origin.clone(),
                fields: (0..conditions.len())
                    .map(|j| {
                        (
                            format!("webhooks[{i}].matchConditions[{j}].expression"),
                            false,
                        )
                    })
                    .collect(),
                policy: Subject::Validating(Box::new(
                    crate::webhooks::match_conditions::as_policy(w.config.name(), hook),
                )),
            });
        }
    }
    out
}

fn fields_of(sites: Vec<crate::policy::ExpressionSite<'_>>) -> Vec<(String, bool)> {
    sites
        .into_iter()
        .map(|s| (s.field.to_string(), s.field.has_patch_types()))
        .collect()
}

/// The expression of a ValidatingAdmissionPolicy, MutatingAdmissionPolicy or webhook match
/// condition at `cursor` (1-based line, code-point column) in `text` (the file named `name`),
/// if the cursor is in one.
pub fn expression_at(name: &str, text: &str, cursor: Position) -> Option<AtCursor> {
    let (objects, others, _) = read_all_lenient(name, text);
    for sites in sites_of(&objects, &others) {
        let Some((doc, mut prefix)) = document_text(text, sites.origin.document) else {
            continue;
        };
        if let Some(i) = sites.origin.item {
            prefix.push(Step::Key("items".into()));
            prefix.push(Step::Index(i));
        }
        let Some(parsed) = SpannedDocument::parse(&doc) else {
            continue;
        };
        let found = sites.fields.into_iter().find_map(|(field, patch_types)| {
            let mut path = prefix.clone();
            path.extend(parse_path(&field));
            let (s, value) = parsed.locate(&path)?;
            let n = value.chars().count();
            // The character under the cursor, or the end of the expression just after it.
            let index = (0..=n).find(|&i| s.at(i) == cursor && !s.chars.is_empty())?;
            Some((field, patch_types, value, index))
        });
        if let Some((field, patch_types, expression, index)) = found {
            return Some(AtCursor {
                policy: sites.policy,
                field,
                patch_types,
                expression,
                index,
            });
        }
    }
    None
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The selection chain that ends with the identifier under `index` (`object.spec.replicas`
/// for a cursor anywhere on `replicas`, `object.spec` on `spec`); `None` when the cursor is
/// not on an identifier.
pub fn selection_at(expression: &str, index: usize) -> Option<String> {
    let chars: Vec<char> = expression.chars().collect();
    // On the identifier's character, or just after its last one.
    let at = if chars.get(index).copied().is_some_and(is_word) {
        index
    } else if index > 0 && chars.get(index - 1).copied().is_some_and(is_word) {
        index - 1
    } else {
        return None;
    };
    let mut end = at;
    while chars.get(end).copied().is_some_and(is_word) {
        end += 1;
    }
    let mut start = at;
    while start > 0 && (is_word(chars[start - 1]) || matches!(chars[start - 1], '.' | '?')) {
        start -= 1;
    }
    let selection: String = chars[start..end].iter().collect();
    let selection = selection.trim_start_matches(['.', '?']);
    (!selection.is_empty()).then(|| selection.to_owned())
}

/// The function called at `index` of `expression`: the identifier under the cursor when a
/// `(` follows it, with the selection it ends (`object.metadata.name.startsWith`,
/// `math.greatest`, `size`), and whether a `.` is before the identifier (a member call, or a
/// namespaced function such as `math.greatest`); `None` when the cursor is not on a call's
/// name.
pub fn call_at(expression: &str, index: usize) -> Option<(String, bool)> {
    let selection = selection_at(expression, index)?;
    let chars: Vec<char> = expression.chars().collect();
    let at = if chars.get(index).copied().is_some_and(is_word) {
        index
    } else {
        index.checked_sub(1)?
    };
    let (mut start, mut end) = (at, at);
    while chars.get(end).copied().is_some_and(is_word) {
        end += 1;
    }
    while start > 0 && is_word(chars[start - 1]) {
        start -= 1;
    }
    let dotted = start > 0 && matches!(chars[start - 1], '.' | '?');
    let next = chars[end..].iter().find(|c| !c.is_whitespace());
    (next == Some(&'(')).then_some((selection, dotted))
}

/// The signatures of the function called as `selection(...)` (Markdown, each with the
/// Kubernetes version that introduced it when it is not in every version): the global
/// function of that name (`size`, `math.greatest`), else the member function of its last name
/// on the value before it (`x.startsWith`); with the macros of the name.
pub fn call_signatures(selection: &str, dotted: bool, backends: &Backends<'_>) -> Vec<String> {
    let functions = backends.checker.functions();
    let line = |o: &crate::policy::backend::FunctionOverload| match o.since_minor {
        Some(m) => format!("`{}` (Kubernetes 1.{m} and later)", o.signature),
        None => format!("`{}`", o.signature),
    };
    let global: Vec<String> = functions
        .iter()
        .filter(|o| o.receiver.is_none() && o.name == selection)
        .map(line)
        .collect();
    let macros = |member: bool, name: &str| -> Vec<String> {
        super::complete::MACROS
            .iter()
            .filter(|(n, m, _)| *m == member && *n == name)
            .map(|(_, _, form)| format!("`macro {form}`"))
            .collect()
    };
    if !global.is_empty() || !dotted {
        return global.into_iter().chain(macros(false, selection)).collect();
    }
    let name = selection.rsplit('.').next().unwrap_or(selection);
    functions
        .iter()
        .filter(|o| o.receiver.is_some() && o.name == name)
        .map(line)
        .chain(macros(true, name))
        .collect()
}

/// The hover text (Markdown) of the expression at the cursor: on a function's name, its
/// signatures in the environment; on another identifier, the selection's type, and for a
/// field of `object` or `oldObject` its schema description from `descriptions`
/// ([`super::describe`]); then the expression's result type; each type per kind.
pub fn hover_text(
    at: &AtCursor,
    options: &CheckOptions,
    backends: &Backends<'_>,
    descriptions: &super::describe::Descriptions,
) -> String {
    let mut out = String::new();
    let signatures = call_at(&at.expression, at.index)
        .map(|(s, dotted)| (call_signatures(&s, dotted, backends), s))
        .filter(|(list, _)| !list.is_empty());
    if let Some((list, selection)) = signatures {
        let name = selection.rsplit('.').next().unwrap_or(&selection);
        let _ = writeln!(out, "`{name}`\n");
        for s in list {
            let _ = writeln!(out, "- {s}");
        }
        out.push('\n');
    }
    let list = |out: &mut String, text: &str| {
        let types = at.types_of(options, backends, text);
        if types.is_empty() {
            out.push_str("- no kind checked\n");
        }
        for (gvk, t) in types {
            let _ = match t {
                Ok(t) => writeln!(out, "- `{gvk}`: `{t}`"),
                Err(e) => {
                    let first = e.lines().next().unwrap_or_default().to_owned();
                    writeln!(out, "- `{gvk}`: does not check: {first}")
                }
            };
        }
    };
    let on_call = !out.is_empty();
    if let Some(selection) = selection_at(&at.expression, at.index)
        .filter(|s| !on_call && s.trim() != at.expression.trim())
    {
        let _ = writeln!(out, "`{selection}`\n");
        list(&mut out, &selection);
        out.push('\n');
        out.push_str(&super::describe::section(
            &at.shape(),
            &selection,
            options,
            backends,
            descriptions,
        ));
    }
    let _ = writeln!(out, "`{}` (the expression)\n", at.field);
    list(&mut out, &at.expression);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_end_at_the_identifier_under_the_cursor() {
        let e = "has(object.spec.replicas) && object.spec.replicas > 1";
        let at =
            |needle: &str, offset: usize| selection_at(e, e.find(needle).unwrap_or(0) + offset);
        assert_eq!(at("spec", 0).as_deref(), Some("object.spec"));
        assert_eq!(at("replicas", 3).as_deref(), Some("object.spec.replicas"));
        // Just after the identifier (the cursor at its end).
        assert_eq!(at("replicas)", 8).as_deref(), Some("object.spec.replicas"));
        assert_eq!(at("has", 1).as_deref(), Some("has"));
        assert_eq!(at("&&", 1), None);
        assert_eq!(
            selection_at("object.?spec.orValue(1)", 9).as_deref(),
            Some("object.?spec")
        );
        assert_eq!(selection_at("", 0), None);
        let call = call_at;
        assert_eq!(
            call("object.metadata.name.startsWith ('a')", 23),
            Some(("object.metadata.name.startsWith".to_owned(), true))
        );
        assert_eq!(call("size(x)", 4), Some(("size".to_owned(), false)));
        assert_eq!(call("size(x)", 5), None);
        assert_eq!(call("a.b + 1", 2), None);
        assert_eq!(
            call("[1].includes(1)", 5),
            Some(("includes".to_owned(), true))
        );
    }
}
