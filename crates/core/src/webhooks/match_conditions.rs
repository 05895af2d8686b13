//! The type checking of webhook match conditions, shared by `vapcheck check`
//! (`cli::webhooks`) and `vapcheck controller` (`controller::webhooks`). Pure: no I/O.

use crate::apiserver::webhook::{Webhook, WebhookConfiguration};

/// The type checking of a configuration's match conditions (extended mode only: kube-apiserver
/// compiles them with `object` and `oldObject` untyped, so strict mode has nothing to say), or
/// `None` without schema backends or match conditions.
///
/// Each webhook is checked as the ValidatingAdmissionPolicy that has its rules, match policy,
/// selectors, failure policy and match conditions (one validation `true`, whose results are
/// dropped): the same analysis and runtime-safety findings as a policy's match conditions, at
/// `webhooks[i].matchConditions[j].expression`, with their cost estimates and the limits they
/// can exceed (the per-call limit and the match conditions' budget, the same for webhooks and
/// policies), and the per-kind sums of the conditions' maxima at `webhooks[i].matchConditions`
/// (`status.cost.budgets[].fieldRef`). The notes on matched kinds that were not checked are
/// left out. `namespaceObject` is [`unbound_variable_findings`].
pub fn type_check(
    config: &WebhookConfiguration,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> Option<crate::policy::PolicyStatus> {
    let backends = backends?;
    if options.mode != crate::policy::Mode::Extended
        || config
            .webhooks()
            .iter()
            .all(|w| w.match_conditions().is_empty())
    {
        return None;
    }
    let mut status = crate::policy::PolicyStatus::default();
    for (i, hook) in config.webhooks().iter().enumerate() {
        if hook.match_conditions().is_empty() {
            continue;
        }
        let policy = as_policy(config.name(), hook);
        let checked = crate::policy::check_policy(&policy, options, backends);
        let kinds: Vec<String> = checked
            .checked_kinds
            .iter()
            .map(ToString::to_string)
            .collect();
        merge_match_condition_results(&mut status, checked, &format!("webhooks[{i}]"));
        status
            .runtime
            .extend(unbound_variable_findings(hook, i, &kinds));
    }
    Some(status)
}

/// `namespaceObject` selected in a webhook's match condition: the variable is declared (the
/// expression compiles) but `Match` binds no namespace, so it is null and the selection errors
/// with `no such key: <field>` in every request (seen on kube-apiserver 1.37.1, e2e_webhooks).
/// One finding per condition, at the first such selection.
pub fn unbound_variable_findings(
    hook: &Webhook,
    index: usize,
    kinds: &[String],
) -> Vec<crate::policy::runtime::RuntimeFinding> {
    use crate::policy::runtime::{RuntimeClass, RuntimeFinding, Witness};
    use cel::common::ast::Expr;
    let fail = hook.failure_policy.as_deref() != Some("Ignore");
    let operation = hook
        .rules()
        .iter()
        .flat_map(|r| r.operations.iter().flatten())
        .map(|o| match o.as_str() {
            "UPDATE" => "UPDATE",
            "DELETE" => "DELETE",
            "CONNECT" => "CONNECT",
            _ => "CREATE",
        })
        .next()
        .unwrap_or("CREATE");
    let mut out = Vec::new();
    for (j, mc) in hook.match_conditions().iter().enumerate() {
        let Ok(parsed) = crate::cel::parse::parse(&mc.expression) else {
            continue;
        };
        let mut first = None;
        crate::cel::parse::walk(parsed.expr(), |e| {
            if first.is_none()
                && let Expr::Select(s) = &e.expr
                && !s.test
                && matches!(&s.operand.expr, Expr::Ident(n) if n == "namespaceObject")
            {
                first = Some((e.id, s.field.clone()));
            }
        });
        let Some((id, field)) = first else {
            continue;
        };
        out.push(RuntimeFinding {
            field_ref: format!("webhooks[{index}].matchConditions[{j}].expression"),
            kinds: kinds.to_vec(),
            class: RuntimeClass::Unbound,
            pos: parsed.location(id).map(|l| crate::policy::narrowing::Pos {
                line: l.line,
                column: l.column,
            }),
            access: format!("namespaceObject.{field}"),
            error: format!("no such key: {field}"),
            consequence: if fail {
                "kube-apiserver denies every matching request (a matchCondition error, failurePolicy Fail)".into()
            } else {
                "the webhook is never called (a matchCondition error, failurePolicy Ignore)".into()
            },
            fallback_message: None,
            binding: None,
            param: None,
            witness: Witness {
                operation,
                object: serde_json::Value::Null,
                params: None,
            },
            fix: None,
            fixed_expression: None,
        });
    }
    out
}

/// The ValidatingAdmissionPolicy with the webhook's matching and match conditions.
pub fn as_policy(
    name: &str,
    hook: &Webhook,
) -> k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy {
    use k8s_openapi::api::admissionregistration::v1::{
        MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicySpec, Validation,
    };
    let rules = hook
        .rules()
        .iter()
        .map(|r| NamedRuleWithOperations {
            api_groups: r.api_groups.clone(),
            api_versions: r.api_versions.clone(),
            operations: r.operations.clone(),
            resource_names: None,
            resources: r.resources.clone(),
            scope: r.scope.clone(),
        })
        .collect();
    ValidatingAdmissionPolicy {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some(hook.failure_policy.clone().unwrap_or_else(|| "Fail".into())),
            match_constraints: Some(MatchResources {
                resource_rules: Some(rules),
                match_policy: hook.match_policy.clone(),
                namespace_selector: hook.namespace_selector.clone(),
                object_selector: hook.object_selector.clone(),
                exclude_resource_rules: None,
            }),
            match_conditions: hook.match_conditions.clone(),
            validations: Some(vec![Validation {
                expression: "true".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// Moves the results about `spec.matchConditions` of `checked` into `status`, at `prefix`
/// (`webhooks[i]`), with the match conditions' cost (estimates, findings, budget sums);
/// everything else (the placeholder validation, the policy's own conditions, the other
/// budgets) is dropped.
fn merge_match_condition_results(
    status: &mut crate::policy::PolicyStatus,
    mut checked: crate::policy::PolicyStatus,
    prefix: &str,
) {
    const FROM: &str = "spec.matchConditions";
    let to = format!("{prefix}.matchConditions");
    let remap = |f: &str| f.strip_prefix(FROM).map(|rest| format!("{to}{rest}"));
    status.take_remapped(&mut checked, &remap);
    for mut r in checked.runtime {
        // `namespaceObject` null for cluster-scoped kinds and Namespaces, and a label or
        // annotation the namespace may lack, are the policy dispatcher's rules; in a webhook's
        // conditions `namespaceObject` is null in every request, which
        // [`unbound_variable_findings`] reports (the policy fixes, `namespaceObject == null ||
        // ...` or an optional step, would make the condition hold or fail for every request).
        if matches!(
            r.class,
            crate::policy::runtime::RuntimeClass::NullNamespaceObject
                | crate::policy::runtime::RuntimeClass::AbsentNamespaceField
        ) {
            continue;
        }
        if let Some(n) = remap(&r.field_ref) {
            r.field_ref = n;
            r.consequence = r
                .consequence
                .replace("the policy is skipped", "the webhook is not called");
            status.runtime.push(r);
        }
    }
    // The cost: the match conditions' estimates and what can exceed the per-call limit or
    // their own budget (`RuntimeCELCostBudgetMatchConditions`, per webhook as per policy:
    // the same matcher); a sum is given at the webhook's `matchConditions`.
    for mut f in checked.cost.findings {
        let field = match &f.field_ref {
            Some(r) => remap(r),
            None if f.limit == crate::policy::CostLimit::RuntimeCELCostBudgetMatchConditions => {
                Some(to.clone())
            }
            None => None,
        };
        if let Some(n) = field {
            f.field_ref = Some(n);
            status.cost.findings.push(f);
        }
    }
    // The sums of the match conditions' maxima per kind: spent per webhook (each webhook has
    // a matcher of its own, k8s.io/apiserver v0.37.1 `admission/plugin/webhook/generic/
    // webhook.go` `ShouldCallHook` → `matchconditions/matcher.go` `(*matcher).Match`, which
    // gives `ForInput` the budget `RuntimeCELCostBudgetMatchConditions`; `plugin/cel/
    // condition.go` `ForInput` spends it on the conditions in order), so each is kept at the
    // webhook's `matchConditions`.
    for mut b in checked.cost.budgets {
        if b.budget == crate::policy::CostLimit::RuntimeCELCostBudgetMatchConditions {
            b.field_ref = Some(to.clone());
            status.cost.budgets.push(b);
        }
    }
    for k in checked.checked_kinds {
        if !status.checked_kinds.contains(&k) {
            status.checked_kinds.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::runtime::{RuntimeClass, RuntimeFinding, Witness};
    use crate::policy::{CostLimit, Gvk};
    use std::sync::Arc;

    fn finding(field_ref: &str, class: RuntimeClass) -> RuntimeFinding {
        RuntimeFinding {
            field_ref: field_ref.into(),
            kinds: vec!["/v1, Kind=Namespace".into()],
            class,
            pos: None,
            access: "namespaceObject.metadata".into(),
            error: "no such key: metadata".into(),
            consequence: "kube-apiserver denies the request (a matchCondition error, failurePolicy Fail); the policy is skipped".into(),
            fallback_message: None,
            binding: None,
            param: None,
            witness: Witness {
                operation: "CREATE",
                object: serde_json::Value::Null,
                params: None,
            },
            fix: None,
            fixed_expression: None,
        }
    }

    fn budget(limit: CostLimit, max: u64) -> crate::policy::cost::BudgetSum {
        crate::policy::cost::BudgetSum {
            field_ref: None,
            gvks: vec![Arc::new(Gvk::new("", "v1", "Namespace"))],
            budget: limit,
            limit: limit.value(),
            max,
            expressions: 3,
        }
    }

    #[test]
    fn merge_keeps_the_webhooks_budget_sums_at_its_match_conditions() {
        let mut checked = crate::policy::PolicyStatus::default();
        checked.cost.budgets = vec![
            budget(CostLimit::RuntimeCELCostBudget, 1),
            budget(CostLimit::RuntimeCELCostBudgetMatchConditions, 2_700_060),
        ];
        let mut status = crate::policy::PolicyStatus::default();
        merge_match_condition_results(&mut status, checked, "webhooks[1]");
        let mut want = budget(CostLimit::RuntimeCELCostBudgetMatchConditions, 2_700_060);
        want.field_ref = Some("webhooks[1].matchConditions".into());
        assert_eq!(status.cost.budgets, [want]);
        assert_eq!(
            serde_json::to_value(&status.cost.budgets[0]).unwrap()["fieldRef"],
            "webhooks[1].matchConditions"
        );
        // A policy's sums have no fieldRef in the output.
        let policy = serde_json::to_value(budget(CostLimit::RuntimeCELCostBudget, 1)).unwrap();
        assert_eq!(policy.get("fieldRef"), None);
    }
    //SPLIT
    #[test]
    fn merge_drops_the_policy_only_namespace_object_findings() {
        let checked = crate::policy::PolicyStatus {
            runtime: vec![
                finding(
                    "spec.matchConditions[0].expression",
                    RuntimeClass::NullNamespaceObject,
                ),
                finding(
                    "spec.matchConditions[1].expression",
                    RuntimeClass::AbsentField,
                ),
                finding(
                    "spec.matchConditions[2].expression",
                    RuntimeClass::AbsentNamespaceField,
                ),
                finding("spec.validations[0].expression", RuntimeClass::AbsentField),
            ],
            ..Default::default()
        };
        let mut status = crate::policy::PolicyStatus::default();
        merge_match_condition_results(&mut status, checked, "webhooks[1]");
        let runtime: Vec<(&str, RuntimeClass, &str)> = status
            .runtime
            .iter()
            .map(|r| (r.field_ref.as_str(), r.class, r.consequence.as_str()))
            .collect();
        assert_eq!(
            runtime,
            [(
                "webhooks[1].matchConditions[1].expression",
                RuntimeClass::AbsentField,
                "kube-apiserver denies the request (a matchCondition error, failurePolicy Fail); the webhook is not called"
            )]
        );
    }
}
