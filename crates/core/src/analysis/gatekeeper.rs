//! `vapcheck check` and Gatekeeper ConstraintTemplates with K8sNativeValidation code: what
//! Gatekeeper's driver answers when the template is added (the `apiServer` block, its causes
//! being the driver's error) and vapcheck's type checking of the code (the `status`), by
//! [`crate::engines::gatekeeper`]; docs/engines.md.
//!
//! The templates are picked from the input's other objects, as webhook configurations are
//! ([`super::webhooks`]); so are the Constraints, whose `spec.match.kinds` type `object`.

use serde_json::Value;

use crate::apiserver::Server;
use crate::engines::gatekeeper::{self, MatchedKind, Template};

use super::entry::{ApiServerVerdict, CheckedPolicy};
use super::input::{InputOther, Sourced, Undecoded, decode_others};

/// The kind of the entries.
pub const KIND: &str = "ConstraintTemplate";

/// A ConstraintTemplate with K8sNativeValidation code, with where it came from.
pub type TemplateObject = Sourced<Template>;

/// The templates with K8sNativeValidation code among `others`, in input order, and each such
/// template with a field of the wrong type as an [`Undecoded`]. Templates without that code
/// (Rego only) are not read.
pub fn read_lenient(others: &[InputOther]) -> (Vec<TemplateObject>, Vec<Undecoded>) {
    decode_others(
        others,
        |o| gatekeeper::is_template(o.api_version(), o.kind()) && gatekeeper::has_cel(&o.value),
        gatekeeper::read_template,
    )
}

/// The Constraints among `others` (`constraints.gatekeeper.sh/*`): kind and object.
pub fn constraints(others: &[InputOther]) -> Vec<(String, Value)> {
    others
        .iter()
        .filter(|o| {
            o.api_version()
                .split_once('/')
                .is_some_and(|(g, _)| g == gatekeeper::CONSTRAINT_GROUP)
        })
        .map(|o| (o.kind().to_owned(), o.value.clone()))
        .collect()
}

/// The kinds the template's Constraints in the input select, in order and without
/// duplicates; `None` when there is no such Constraint or one of them selects every kind.
pub fn matched_kinds(
    template: &Template,
    constraints: &[(String, Value)],
) -> Option<Vec<MatchedKind>> {
    let mut out: Vec<MatchedKind> = Vec::new();
    let mut any = false;
    for (kind, c) in constraints {
        if *kind != template.kind {
            continue;
        }
        any = true;
        for k in gatekeeper::constraint_kinds(c)? {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    (any && !out.is_empty()).then_some(out)
}

/// What Gatekeeper answers to the template and, with schema backends, vapcheck's type
/// checking of its code.
pub fn check(
    object: &TemplateObject,
    constraints: &[(String, Value)],
    server: Server,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> CheckedPolicy {
    let template = &object.object;
    let added = gatekeeper::add_template(template);
    let causes = match &added {
        Ok(_) => Vec::new(),
        Err(e) => vec![crate::finding::Cause::new(
            "spec.targets",
            format!("spec.targets: {e}"),
        )],
    };
    let status = match (&added, backends) {
        (Ok(code), Some(b)) => {
            let kinds = matched_kinds(template, constraints);
            let mut status = gatekeeper::type_check(template, code, kinds.as_deref(), options, b);
            gatekeeper::add_compile_errors(&mut status, template, code);
            Some(status)
        }
        _ => None,
    };
    CheckedPolicy::new(
        KIND,
        template.name.clone(),
        object.origin.clone(),
        ApiServerVerdict::new(server.minor, false, causes),
        status,
    )
}
