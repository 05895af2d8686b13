//! What each binding of a check's input will do ([`crate::bindings::analyse`]), attached to
//! the entries of the report, and the params each binding evaluates its policy with (for the
//! runtime checks on `params`).

use std::collections::BTreeMap;

use crate::bindings::{BindingInput, ParamScope, PolicyInput, analyse, group_of, param_kind_gvk};
use crate::policy::Gvk;
use crate::policy::runtime_check::ParamBinding;

use super::LoadedBackends;
use super::entry::CheckedPolicy;
use super::input::{self, InputError, InputObject, InputOther, InputPolicy};
use super::mutating;

/// The scope of a param kind from the backends' discovery: a served, non-subresource resource
/// of that group, version and kind. Not found: `NoSuchKind` against a cluster (its REST
/// mapping fails there too), `Unknown` offline (its CRD may just not have been given).
fn param_scope(g: &Gvk, loaded: Option<&LoadedBackends>, live: bool) -> ParamScope {
    let Some(Ok(groups)) = loaded
        .and_then(|l| l.discovery.as_deref())
        .map(|d| d.api_groups())
    else {
        return ParamScope::Unknown;
    };
    if let Some(r) = crate::bindings::param_resource(&groups, g) {
        return if r.namespaced {
            ParamScope::Namespaced
        } else {
            ParamScope::Cluster
        };
    }
    if live {
        ParamScope::NoSuchKind
    } else {
        ParamScope::Unknown
    }
}

/// What `params` each binding of `inputs` evaluates its policy with, by policy name: for a
/// stored policy with a `paramKind` and a stored binding of it that evaluates it and denies
/// (`validationActions` has `Deny`; a Warn or Audit binding does not deny on an error), null
/// when the binding has no `paramRef`, else each param object its `paramRef` resolves to
/// ([`crate::bindings::analyse`]'s `params`), as the input gives it. Malformed param objects
/// give nothing here ([`add_binding_effects`] reports them).
pub(super) fn param_bindings(
    inputs: &[&InputObject],
    accepted: &[bool],
    others: &[InputOther],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> BTreeMap<String, Vec<ParamBinding>> {
    let mut out: BTreeMap<String, Vec<ParamBinding>> = BTreeMap::new();
    let kind_of = |p: &InputPolicy| {
        p.policy
            .spec
            .as_ref()
            .and_then(|s| s.param_kind.as_ref())
            .and_then(param_kind_gvk)
    };
    let param_kinds: Vec<Gvk> = inputs
        .iter()
        .filter_map(|o| match o {
            InputObject::Policy(p) => kind_of(p),
            InputObject::Binding(_) => None,
        })
        .collect();
    if param_kinds.is_empty() {
        return out;
    }
    let Ok(params) = param_objects(&param_kinds, others) else {
        return out;
    };
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    for (o, &stored) in inputs.iter().zip(accepted) {
        match o {
            InputObject::Policy(p) => policies.push(PolicyInput {
                policy: &p.policy,
                stored,
                warning_kinds: Vec::new(),
                param_scope: kind_of(p)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live)),
            }),
            InputObject::Binding(b) => bindings.push(BindingInput {
                binding: &b.binding,
                stored,
            }),
        }
    }
    let reports = analyse(&policies, &bindings, &params);
    for (b, r) in bindings.iter().zip(&reports) {
        let evaluates = matches!(
            r.verdict,
            crate::bindings::Verdict::Evaluates
                | crate::bindings::Verdict::EvaluatesWithWarnings(_)
        );
        if !evaluates || !r.validation_actions.iter().any(|a| a == "Deny") {
            continue;
        }
        let Some(g) = policies
            .iter()
            .find(|p| p.stored && p.policy.metadata.name.as_deref() == Some(r.policy.as_str()))
            .and_then(|p| p.policy.spec.as_ref())
            .and_then(|s| s.param_kind.as_ref())
            .and_then(param_kind_gvk)
        else {
            continue;
        };
        let entry = out.entry(r.policy.clone()).or_default();
        if b.binding.spec.param_ref.is_none() {
            entry.push(ParamBinding {
                binding: r.binding.clone(),
                param: None,
            });
            continue;
        }
        for id in &r.params {
            // The object of that kind and id; the last one given wins, as in `analyse`.
            let object = others.iter().rev().find(|o| {
                group_of(o.api_version()) == Some(g.group.as_str())
                    && o.kind() == g.kind
                    && input::param_object(o).is_ok_and(|p| {
                        let pid = match &p.namespace {
                            Some(ns) => format!("{ns}/{}", p.name),
                            None => p.name.clone(),
                        };
                        pid == *id
                    })
            });
            if let Some(o) = object {
                entry.push(ParamBinding {
                    binding: r.binding.clone(),
                    param: Some((id.clone(), o.value.clone())),
                });
            }
        }
    }
    out
}

/// Computes what every binding will do ([`crate::bindings::analyse`]) and attaches it to the
/// entries: `effect` on bindings, `bound_by` on policies. Param objects are the other objects
/// of the input whose group and kind are some policy's `paramKind`; one that is malformed is
/// an error naming its file, document and field. Objects of other kinds are only consulted
/// for the "param of the wrong kind" note, and only when well formed.
pub(super) fn add_binding_effects(
    inputs: &[&InputObject],
    others: &[InputOther],
    checked: &mut [CheckedPolicy],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> Result<(), InputError> {
    let param_kinds: Vec<Gvk> = inputs
        .iter()
        .filter_map(|o| match o {
            InputObject::Policy(p) => p
                .policy
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .and_then(param_kind_gvk),
            InputObject::Binding(_) => None,
        })
        .collect();
    let params = param_objects(&param_kinds, others)?;
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    let mut binding_index = Vec::new();
    for (i, (o, c)) in inputs.iter().zip(checked.iter()).enumerate() {
        match o {
            InputObject::Policy(p) => {
                let param_scope = p
                    .policy
                    .spec
                    .as_ref()
                    .and_then(|s| s.param_kind.as_ref())
                    .and_then(param_kind_gvk)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live));
                policies.push(PolicyInput {
                    policy: &p.policy,
                    stored: c.api_server.accepted(),
                    warning_kinds: c
                        .status
                        .as_ref()
                        .map(crate::bindings::warning_kinds)
                        .unwrap_or_default(),
                    param_scope,
                });
            }
            InputObject::Binding(b) => {
                bindings.push(BindingInput {
                    binding: &b.binding,
                    stored: c.api_server.accepted(),
                });
                binding_index.push(i);
            }
        }
    }
    let reports = analyse(&policies, &bindings, &params);
    let stored: Vec<bool> = bindings.iter().map(|b| b.stored).collect();
    attach_reports(checked, input::POLICY_KIND, reports, &stored, binding_index);
    Ok(())
}

/// Attaches the binding reports to the entries: `bound_by` on each policy of `policy_kind`
/// (only stored bindings bind: a rejected one never exists), `effect` on the binding at
/// `binding_index[i]` for `reports[i]` (whose binding is stored when `stored[i]`).
fn attach_reports(
    entries: &mut [CheckedPolicy],
    policy_kind: &str,
    reports: Vec<crate::bindings::BindingReport>,
    stored: &[bool],
    binding_index: Vec<usize>,
) {
    for c in entries.iter_mut() {
        if c.kind == policy_kind {
            c.bound_by = Some(
                reports
                    .iter()
                    .zip(stored)
                    .filter(|(r, stored)| **stored && r.policy == c.name)
                    .map(|(r, _)| r.binding.clone())
                    .collect(),
            );
        }
    }
    for (i, r) in binding_index.into_iter().zip(reports) {
        entries[i].effect = Some(r);
    }
}

/// The param objects among `others`: every well-formed object (for the "param of the wrong
/// kind" note); one of a kind in `param_kinds` that is malformed is an error naming its file,
/// document and field.
fn param_objects(
    param_kinds: &[Gvk],
    others: &[InputOther],
) -> Result<Vec<crate::bindings::ParamObject>, InputError> {
    let mut params = Vec::new();
    for o in others {
        let is_param = param_kinds
            .iter()
            .any(|g| group_of(o.api_version()) == Some(g.group.as_str()) && o.kind() == g.kind);
        match input::param_object(o) {
            Ok(p) => params.push(p),
            Err(message) if is_param => {
                return Err(InputError {
                    file: o.origin.source.clone(),
                    document: Some(o.origin.document),
                    item: o.origin.item,
                    line: None,
                    message,
                });
            }
            Err(_) => {}
        }
    }
    Ok(params)
}

/// [`add_binding_effects`] for MutatingAdmissionPolicyBindings: `entries` are the checked
/// entries of `objects`, in the same order.
pub(super) fn add_mutating_binding_effects(
    objects: &[mutating::MutatingObject],
    others: &[InputOther],
    entries: &mut [CheckedPolicy],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> Result<(), InputError> {
    use crate::bindings::{MutatingBindingInput, MutatingPolicyInput, analyse_mutating};
    use mutating::MutatingObject;
    let param_kinds: Vec<Gvk> = objects
        .iter()
        .filter_map(|o| match o {
            MutatingObject::Policy(_, p) => p
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .and_then(param_kind_gvk),
            MutatingObject::Binding(..) => None,
        })
        .collect();
    let params = param_objects(&param_kinds, others)?;
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    let mut binding_index = Vec::new();
    for (i, (o, c)) in objects.iter().zip(entries.iter()).enumerate() {
        match o {
            MutatingObject::Policy(_, p) => policies.push(MutatingPolicyInput {
                policy: p,
                stored: c.api_server.accepted(),
                warning_kinds: c
                    .status
                    .as_ref()
                    .map(crate::bindings::warning_kinds)
                    .unwrap_or_default(),
                param_scope: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.param_kind.as_ref())
                    .and_then(param_kind_gvk)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live)),
            }),
            MutatingObject::Binding(_, b) => {
                bindings.push(MutatingBindingInput {
                    binding: b,
                    stored: c.api_server.accepted(),
                });
                binding_index.push(i);
            }
        }
    }
    let reports = analyse_mutating(&policies, &bindings, &params);
    let stored: Vec<bool> = bindings.iter().map(|b| b.stored).collect();
    attach_reports(
        entries,
        mutating::MUTATING_POLICY_KIND,
        reports,
        &stored,
        binding_index,
    );
    Ok(())
}
