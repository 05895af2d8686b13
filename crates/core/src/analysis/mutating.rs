//! `vapcheck check` and MutatingAdmissionPolicy / MutatingAdmissionPolicyBinding documents:
//! what kube-apiserver answers to their create (or update, with `--previous`), as the same
//! `apiServer` block validating policies get ([`crate::apiserver::map`]), and the policies'
//! type checking ([`crate::mutating::check_mutating_policy`], docs/mutating.md).
//!
//! The documents are picked from the input's other objects (the ones that are not validating
//! policies or bindings), so the reading of validating policies is untouched.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};

use crate::apiserver::{self, Server, map};

use super::entry::{ApiServerVerdict, CheckedPolicy};
use super::input::{InputError, InputOther, Origin, Undecoded, decode_v1, undecoded, v1_object_of};

/// The policy kind.
pub const MUTATING_POLICY_KIND: &str = "MutatingAdmissionPolicy";
/// The binding kind.
pub const MUTATING_BINDING_KIND: &str = "MutatingAdmissionPolicyBinding";

/// A MutatingAdmissionPolicy or binding of the input, read as `admissionregistration.k8s.io/v1`.
#[derive(Debug, Clone)]
pub enum MutatingObject {
    /// A MutatingAdmissionPolicy.
    Policy(Origin, Box<MutatingAdmissionPolicy>),
    /// A MutatingAdmissionPolicyBinding.
    Binding(Origin, Box<MutatingAdmissionPolicyBinding>),
}

impl MutatingObject {
    /// Its kind.
    pub fn kind(&self) -> &'static str {
        match self {
            MutatingObject::Policy(..) => MUTATING_POLICY_KIND,
            MutatingObject::Binding(..) => MUTATING_BINDING_KIND,
        }
    }

    /// `metadata.name` (empty when missing).
    pub fn name(&self) -> &str {
        let meta = match self {
            MutatingObject::Policy(_, p) => &p.metadata,
            MutatingObject::Binding(_, b) => &b.metadata,
        };
        meta.name.as_deref().unwrap_or_default()
    }

    /// Where it came from.
    pub fn origin(&self) -> &Origin {
        match self {
            MutatingObject::Policy(o, _) | MutatingObject::Binding(o, _) => o,
        }
    }
}

/// The MutatingAdmissionPolicies and bindings among `others` (`admissionregistration.k8s.io`
/// v1, v1beta1 or v1alpha1, read as v1), in input order. `Err`: a document of one of these
/// kinds that does not deserialise (`<origin>: invalid <Kind>: <field>: <error>`).
pub fn read(others: &[InputOther]) -> Result<Vec<MutatingObject>, InputError> {
    let mut out = Vec::new();
    for o in others {
        let at = |message: String| InputError {
            file: o.origin.source.clone(),
            document: Some(o.origin.document),
            item: o.origin.item,
            line: None,
            message,
        };
        if let Some(p) =
            v1_object_of::<MutatingAdmissionPolicy>(&o.value, MUTATING_POLICY_KIND).map_err(at)?
        {
            out.push(MutatingObject::Policy(o.origin.clone(), Box::new(p)));
        } else if let Some(b) =
            v1_object_of::<MutatingAdmissionPolicyBinding>(&o.value, MUTATING_BINDING_KIND)
                .map_err(at)?
        {
            out.push(MutatingObject::Binding(o.origin.clone(), Box::new(b)));
        }
    }
    Ok(out)
}

/// [`read`] that goes on after a document that does not deserialise: it is returned as an
/// [`Undecoded`] (the field and the decoder's message), in input order.
pub fn read_lenient(others: &[InputOther]) -> (Vec<MutatingObject>, Vec<Undecoded>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for o in others {
        let decoded = decode_v1::<MutatingAdmissionPolicy>(&o.value, MUTATING_POLICY_KIND)
            .map(|p| p.map(|p| MutatingObject::Policy(o.origin.clone(), Box::new(p))))
            .and_then(|found| match found {
                Some(found) => Ok(Some(found)),
                None => {
                    decode_v1::<MutatingAdmissionPolicyBinding>(&o.value, MUTATING_BINDING_KIND)
                        .map(|b| b.map(|b| MutatingObject::Binding(o.origin.clone(), Box::new(b))))
                }
            });
        match decoded {
            Ok(Some(object)) => out.push(object),
            Ok(None) => {}
            Err(failure) => bad.push(undecoded(&o.origin, &o.value, &failure)),
        }
    }
    (out, bad)
}

/// The policies among `objects`, with where they came from.
pub fn policies(
    objects: &[MutatingObject],
) -> impl Iterator<Item = (&Origin, &MutatingAdmissionPolicy)> {
    objects.iter().filter_map(|o| match o {
        MutatingObject::Policy(origin, p) => Some((origin, p.as_ref())),
        MutatingObject::Binding(..) => None,
    })
}

/// The cause given when the target server does not serve the kind at all (vapcheck's own
/// text: the API server answers 404 to the create).
fn not_served(kind: &str, server: Server) -> String {
    format!(
        "admissionregistration.k8s.io/v1 {kind} is not served by kube-apiserver 1.{} (served from 1.{})",
        server.minor,
        map::FIRST_SERVED_MINOR
    )
}

/// What kube-apiserver answers to `object`: a create, or an update of the object of the same
/// kind and name in `previous`.
pub fn verdict(
    object: &MutatingObject,
    previous: &[MutatingObject],
    server: Server,
) -> CheckedPolicy {
    let stored = previous
        .iter()
        .find(|p| p.kind() == object.kind() && p.name() == object.name());
    let causes: Vec<crate::finding::Cause> = if !map::served(server) {
        // About the object as a whole: its kind is not served.
        vec![crate::finding::Cause::new(
            "",
            not_served(object.kind(), server),
        )]
    } else {
        let errors = match (object, stored) {
            (MutatingObject::Policy(_, p), Some(MutatingObject::Policy(_, old))) => {
                apiserver::validate_mutating_policy_update(&**p, &**old, server)
            }
            (MutatingObject::Policy(_, p), _) => {
                apiserver::validate_mutating_policy_create(&**p, server)
            }
            (MutatingObject::Binding(_, b), Some(MutatingObject::Binding(..))) => {
                apiserver::validate_mutating_binding_update(&**b)
            }
            (MutatingObject::Binding(_, b), _) => {
                apiserver::validate_mutating_binding_create(&**b, server)
            }
        };
        errors.iter().map(Into::into).collect()
    };
    CheckedPolicy::new(
        object.kind(),
        object.name().to_owned(),
        object.origin().clone(),
        ApiServerVerdict::new(server.minor, stored.is_some(), causes),
        None,
    )
}

/// The type checking of a MutatingAdmissionPolicy (`None` for bindings, or without schema
/// backends).
pub fn type_check(
    object: &MutatingObject,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> Option<crate::policy::PolicyStatus> {
    match object {
        MutatingObject::Policy(_, p) => {
            backends.map(|b| super::analyse_mutating_policy(p, options, b, &mut Default::default()))
        }
        MutatingObject::Binding(..) => None,
    }
}

/// Puts `entries` (in input order) among the file entries `checked` (in input order, after
/// the static folder's entries if any, which stay first) so that the whole is in input
/// order: by file (as listed in `files`), then document, then list item.
pub fn merge_in_input_order(
    checked: &mut Vec<CheckedPolicy>,
    entries: Vec<CheckedPolicy>,
    files: &[String],
    keep_first: usize,
) {
    let key = |o: &Origin| {
        (
            files
                .iter()
                .position(|f| *f == o.source)
                .unwrap_or(usize::MAX),
            o.document,
            o.item,
        )
    };
    let keep_first = keep_first.min(checked.len());
    let mut rest: Vec<CheckedPolicy> = checked.split_off(keep_first);
    rest.extend(entries);
    // Stable: entries of one document keep their order.
    rest.sort_by_key(|c| key(&c.origin));
    checked.extend(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn other(doc: usize, value: serde_json::Value) -> InputOther {
        InputOther {
            origin: Origin {
                source: "f.yaml".into(),
                document: doc,
                item: None,
            },
            value,
        }
    }

    #[test]
    fn reads_both_kinds_and_reports_bad_ones() {
        let objects = read(&[
            other(
                1,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            ),
            other(
                2,
                json!({"apiVersion": "admissionregistration.k8s.io/v1beta1",
                       "kind": "MutatingAdmissionPolicy", "metadata": {"name": "m"}}),
            ),
            other(
                3,
                json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "b"},
                       "spec": {"policyName": "m"}}),
            ),
        ])
        .unwrap();
        let got: Vec<(&str, &str)> = objects.iter().map(|o| (o.kind(), o.name())).collect();
        assert_eq!(
            got,
            [(MUTATING_POLICY_KIND, "m"), (MUTATING_BINDING_KIND, "b")]
        );
        let bad = read(&[other(
            4,
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                   "kind": "MutatingAdmissionPolicy", "spec": {"mutations": "x"}}),
        )])
        .unwrap_err()
        .to_string();
        assert!(
            bad.starts_with(
                "f.yaml: document 4: invalid MutatingAdmissionPolicy: spec.mutations: "
            ),
            "{bad}"
        );
    }

    fn entry(source: &str, document: usize, name: &str) -> CheckedPolicy {
        CheckedPolicy::new(
            MUTATING_POLICY_KIND,
            name.into(),
            Origin {
                source: source.into(),
                document,
                item: None,
            },
            ApiServerVerdict::new(37, false, Vec::new()),
            None,
        )
    }

    #[test]
    fn merged_in_the_order_of_the_files_then_documents() {
        let files = ["b.yaml".to_owned(), "a.yaml".to_owned()];
        let mut checked = vec![
            entry("DIR", 0, "folder"),
            entry("b.yaml", 2, "b2"),
            entry("a.yaml", 1, "a1"),
        ];
        let mutating = vec![entry("b.yaml", 1, "b1"), entry("a.yaml", 3, "a3")];
        merge_in_input_order(&mut checked, mutating, &files, 1);
        let names: Vec<&str> = checked.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["folder", "b1", "b2", "a1", "a3"]);
    }

    #[test]
    fn verdicts_create_update_and_unserved_versions() {
        let objects = read(&[other(
            1,
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                   "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "b.static.k8s.io"},
                   "spec": {"policyName": "m"}}),
        )])
        .unwrap();
        let create = verdict(&objects[0], &[], Server::PINNED);
        assert_eq!(create.api_server.causes.len(), 1);
        assert!(!create.api_server.update);
        let update = verdict(&objects[0], &objects, Server::PINNED);
        assert!(update.api_server.accepted() && update.api_server.update);
        let old = verdict(&objects[0], &[], Server { minor: 35 });
        assert_eq!(
            old.api_server
                .causes
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>(),
            [
                "admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding is not served by kube-apiserver 1.35 (served from 1.36)"
            ]
        );
    }
}
