//! MutatingAdmissionPolicies in `vapcheck check` (issue 12): read from the input files (v1,
//! v1beta1 and v1alpha1, all read as v1: their fields are the same) and type-checked with
//! [`crate::mutating::check_mutating_policy`]. Kept apart from the ValidatingAdmissionPolicy
//! input so that MAP create-time validation (another piece of work) can join here.
//!
//! Their bindings (`MutatingAdmissionPolicyBinding`) are read as other objects and get no
//! verdict yet (issue 13).

use k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy;

use super::input::{InputError, InputOther, Origin, v1_object_of};
use super::output::{ApiServerVerdict, CheckedPolicy};
use crate::policy::{Backends, CheckOptions};

/// The kind read.
pub const MAP_KIND: &str = "MutatingAdmissionPolicy";

/// A MutatingAdmissionPolicy read from the input.
#[derive(Debug, Clone)]
pub struct InputMap {
    /// Where it came from.
    pub origin: Origin,
    /// The policy, read as `admissionregistration.k8s.io/v1`.
    pub policy: MutatingAdmissionPolicy,
}

/// Takes the MutatingAdmissionPolicies out of the objects that are neither VAPs nor their
/// bindings, in input order. A MAP that does not deserialise is an input error naming the
/// document and the field.
pub fn take_policies(others: &mut Vec<InputOther>) -> Result<Vec<InputMap>, InputError> {
    let mut out = Vec::new();
    let mut rest = Vec::with_capacity(others.len());
    for o in others.drain(..) {
        match v1_object_of::<MutatingAdmissionPolicy>(&o.value, MAP_KIND) {
            Ok(Some(policy)) => out.push(InputMap {
                origin: o.origin,
                policy,
            }),
            Ok(None) => rest.push(o),
            Err(message) => {
                return Err(InputError {
                    file: o.origin.source.clone(),
                    document: Some(o.origin.document),
                    item: o.origin.item,
                    line: None,
                    message,
                });
            }
        }
    }
    *others = rest;
    Ok(out)
}

/// The checked entry of one MAP. Its `api_server` verdict is empty (MAP create-time
/// validation is not computed here; `-o json` leaves it out).
pub fn checked_entry(
    map: &InputMap,
    options: &CheckOptions,
    backends: Option<&Backends<'_>>,
    server_minor: u32,
) -> CheckedPolicy {
    CheckedPolicy {
        kind: MAP_KIND,
        name: map.policy.metadata.name.clone().unwrap_or_default(),
        origin: map.origin.clone(),
        api_server: ApiServerVerdict {
            server_minor,
            update: false,
            causes: Vec::new(),
            static_dir: None,
        },
        status: backends.map(|b| crate::mutating::check_mutating_policy(&map.policy, options, b)),
        bound_by: None,
        effect: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::input::read_all;

    const MAP: &str = "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicy\nmetadata:\n  name: m\nspec:\n  mutations:\n  - patchType: JSONPatch\n    jsonPatch:\n      expression: '[]'\n";

    #[test]
    fn maps_of_every_version_are_taken_out_of_the_other_objects() {
        for v in ["v1", "v1beta1", "v1alpha1"] {
            let text = format!(
                "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n",
                MAP.replace("v1beta1", v)
            );
            let (_, mut others) = read_all("f.yaml", &text).unwrap();
            let maps = take_policies(&mut others).unwrap();
            assert_eq!(maps.len(), 1, "{v}");
            assert_eq!(maps[0].policy.metadata.name.as_deref(), Some("m"));
            assert_eq!(maps[0].origin.document, 1);
            assert_eq!(others.len(), 1);
            assert_eq!(others[0].kind(), "ConfigMap");
        }
    }

    #[test]
    fn malformed_maps_are_input_errors_naming_the_field() {
        let text = MAP.replace("patchType: JSONPatch", "patchType: 3");
        let (_, mut others) = read_all("f.yaml", &text).unwrap();
        let e = take_policies(&mut others).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "f.yaml: document 1: invalid MutatingAdmissionPolicy: spec.mutations[0].patchType:"
            ),
            "{e}"
        );
        let text = MAP.replace("v1beta1", "v2");
        let (_, mut others) = read_all("f.yaml", &text).unwrap();
        let e = take_policies(&mut others).unwrap_err().to_string();
        assert!(e.contains("unsupported apiVersion"), "{e}");
    }
}
