//! `vapcheck check` and ValidatingWebhookConfiguration / MutatingWebhookConfiguration
//! documents: what kube-apiserver answers to their create (or update, with `--previous`), as
//! the same `apiServer` block policies get ([`crate::apiserver::webhook`]).
//!
//! The documents are picked from the input's other objects (the ones that are not validating
//! policies or bindings), as MutatingAdmissionPolicies are ([`super::mutating`]).

use crate::apiserver::Server;
use crate::apiserver::webhook::{
    self, WebhookConfiguration, WebhookKind, validate_webhook_configuration_create,
    validate_webhook_configuration_update,
};

use super::input::{DecodeFailure, InputError, InputOther, Origin, Undecoded, undecoded};
use super::output::{ApiServerVerdict, CheckedPolicy};

/// A webhook configuration of the input, with where it came from.
#[derive(Debug, Clone)]
pub struct WebhookObject {
    /// Where it came from.
    pub origin: Origin,
    /// The configuration, read as `admissionregistration.k8s.io/v1`.
    pub config: WebhookConfiguration,
}

/// The API versions read: v1 only (v1beta1 is no longer served since 1.22).
pub const WEBHOOK_API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// The webhook configurations among `others`, in input order. `Err`: a document of one of
/// these kinds in another `admissionregistration.k8s.io` version, or one that does not
/// deserialise (`<origin>: invalid <Kind>: <field>: <error>`).
pub fn read(others: &[InputOther]) -> Result<Vec<WebhookObject>, InputError> {
    let mut out = Vec::new();
    for o in others {
        let Some(kind) = WebhookKind::of(o.kind()) else {
            continue;
        };
        let at = |message: String| InputError {
            file: o.origin.source.clone(),
            document: Some(o.origin.document),
            item: o.origin.item,
            line: None,
            message,
        };
        let api_version = o.api_version();
        if api_version != WEBHOOK_API_VERSION {
            if api_version.starts_with("admissionregistration.k8s.io/") {
                return Err(at(format!(
                    "unsupported apiVersion {api_version:?} for {} (kube-apiserver serves only {WEBHOOK_API_VERSION})",
                    kind.as_str()
                )));
            }
            continue;
        }
        let config = webhook::read_configuration(kind, &o.value).map_err(at)?;
        out.push(WebhookObject {
            origin: o.origin.clone(),
            config,
        });
    }
    Ok(out)
}

/// [`read`] that goes on after a configuration that does not decode: the configurations, and
/// each document of these kinds that does not decode (another `admissionregistration.k8s.io`
/// version, a field of the wrong type) as an [`Undecoded`].
pub fn read_lenient(others: &[InputOther]) -> (Vec<WebhookObject>, Vec<Undecoded>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for o in others {
        let Some(kind) = WebhookKind::of(o.kind()) else {
            continue;
        };
        let api_version = o.api_version();
        let failure = if api_version != WEBHOOK_API_VERSION {
            if !api_version.starts_with("admissionregistration.k8s.io/") {
                continue;
            }
            DecodeFailure::UnsupportedVersion {
                kind: kind.as_str().to_owned(),
                api_version: api_version.to_owned(),
            }
        } else {
            match webhook::decode_configuration(kind, &o.value) {
                Ok(config) => {
                    out.push(WebhookObject {
                        origin: o.origin.clone(),
                        config,
                    });
                    continue;
                }
                Err((field, message)) => DecodeFailure::Field {
                    kind: kind.as_str().to_owned(),
                    field,
                    message,
                },
            }
        };
        bad.push(undecoded(&o.origin, &o.value, &failure));
    }
    (out, bad)
}

/// What kube-apiserver answers to `object`: a create, or an update of the configuration of the
/// same kind and name in `previous`.
pub fn verdict(
    object: &WebhookObject,
    previous: &[WebhookObject],
    server: Server,
) -> CheckedPolicy {
    let config = &object.config;
    let stored = previous
        .iter()
        .find(|p| p.config.kind == config.kind && p.config.name() == config.name());
    let errors = match stored {
        Some(old) => validate_webhook_configuration_update(config, &old.config, server),
        None => validate_webhook_configuration_create(config, server),
    };
    CheckedPolicy {
        kind: config.kind.as_str(),
        name: config.name().to_owned(),
        origin: object.origin.clone(),
        api_server: ApiServerVerdict {
            server_minor: server.minor,
            update: stored.is_some(),
            causes: errors.iter().map(ToString::to_string).collect(),
            static_dir: None,
        },
        status: None,
        bound_by: None,
        effect: None,
        advice: crate::webhooks::advise(config),
        undecoded: None,
    }
}

/// The type checking of a configuration's match conditions (extended mode only: kube-apiserver
/// compiles them with `object` and `oldObject` untyped, so strict mode has nothing to say), or
/// `None` without schema backends or match conditions.
///
/// Each webhook is checked as the ValidatingAdmissionPolicy that has its rules, match policy,
/// selectors, failure policy and match conditions (one validation `true`, whose results are
/// dropped): the same analysis and runtime-safety findings as a policy's match conditions, at
/// `webhooks[i].matchConditions[j].expression`, with their cost estimates and the limits they
/// can exceed (the per-call limit and the match conditions' budget, the same for webhooks and
/// policies). The notes on matched kinds that were not checked and the per-kind budget sums are
/// left out. `namespaceObject` is [`unbound_variable_findings`].
pub fn type_check(
    object: &WebhookObject,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> Option<crate::policy::PolicyStatus> {
    let backends = backends?;
    if options.mode != crate::policy::Mode::Extended
        || object
            .config
            .webhooks()
            .iter()
            .all(|w| w.match_conditions().is_empty())
    {
        return None;
    }
    let mut status = crate::policy::PolicyStatus::default();
    for (i, hook) in object.config.webhooks().iter().enumerate() {
        if hook.match_conditions().is_empty() {
            continue;
        }
        let policy = as_policy(object.config.name(), hook);
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
    hook: &webhook::Webhook,
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
            witness: Witness {
                operation,
                object: serde_json::Value::Null,
            },
            fix: None,
            fixed_expression: None,
        });
    }
    out
}

/// The ValidatingAdmissionPolicy with the webhook's matching and match conditions.
fn as_policy(
    name: &str,
    hook: &webhook::Webhook,
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
/// (`webhooks[i]`); everything else (the placeholder validation, the policy's own conditions,
/// the cost) is dropped.
fn merge_match_condition_results(
    status: &mut crate::policy::PolicyStatus,
    checked: crate::policy::PolicyStatus,
    prefix: &str,
) {
    const FROM: &str = "spec.matchConditions";
    let to = format!("{prefix}.matchConditions");
    let remap = |f: &str| f.strip_prefix(FROM).map(|rest| format!("{to}{rest}"));
    for (mut w, mut r) in checked
        .expression_warnings
        .into_iter()
        .zip(checked.expression_results)
    {
        if let Some(f) = remap(&w.field_ref) {
            w.field_ref = f.clone();
            r.field_ref = f;
            status.expression_warnings.push(w);
            status.expression_results.push(r);
        }
    }
    for mut f in checked.findings {
        if let Some(n) = remap(&f.field_ref) {
            f.field_ref = n;
            status.findings.push(f);
        }
    }
    for mut r in checked.runtime {
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
    for mut e in checked.cost.expressions {
        if let Some(n) = remap(&e.field_ref) {
            e.field_ref = n;
            status.cost.expressions.push(e);
        }
    }
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
    for k in checked.checked_kinds {
        if !status.checked_kinds.contains(&k) {
            status.checked_kinds.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn other(doc: usize, value: serde_json::Value) -> InputOther {
        InputOther {
            origin: Origin {
                source: "w.yaml".into(),
                document: doc,
                item: None,
            },
            value,
        }
    }

    fn hook(extra: serde_json::Value) -> serde_json::Value {
        let mut h = json!({"name": "a.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}}});
        if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                h.insert(k.clone(), v.clone());
            }
        }
        h
    }

    #[test]
    fn reads_both_kinds_and_refuses_other_versions() {
        let objects = read(&[
            other(
                1,
                json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"},
                       "webhooks": [hook(json!({}))]}),
            ),
            other(
                2,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            ),
            other(
                3,
                json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}}),
            ),
        ])
        .unwrap();
        let got: Vec<(&str, &str)> = objects
            .iter()
            .map(|o| (o.config.kind.as_str(), o.config.name()))
            .collect();
        assert_eq!(
            got,
            [
                ("ValidatingWebhookConfiguration", "v"),
                ("MutatingWebhookConfiguration", "m")
            ]
        );
        let old = read(&[other(
            4,
            json!({"apiVersion": "admissionregistration.k8s.io/v1beta1",
                   "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}}),
        )])
        .unwrap_err()
        .to_string();
        assert_eq!(
            old,
            "w.yaml: document 4: unsupported apiVersion \"admissionregistration.k8s.io/v1beta1\" for ValidatingWebhookConfiguration (kube-apiserver serves only admissionregistration.k8s.io/v1)"
        );
        let bad = read(&[other(
            5,
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
                   "kind": "ValidatingWebhookConfiguration", "webhooks": [{"timeoutSeconds": "x"}]}),
        )])
        .unwrap_err()
        .to_string();
        assert!(
            bad.starts_with(
                "w.yaml: document 5: invalid ValidatingWebhookConfiguration: webhooks[0].timeoutSeconds: "
            ),
            "{bad}"
        );
    }

    #[test]
    fn verdicts_in_the_api_servers_order() {
        let objects = read(&[other(
            1,
            json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
            "webhooks": [
                hook(json!({"name": "short", "timeoutSeconds": 31,
                            "reinvocationPolicy": "Always",
                            "admissionReviewVersions": ["v2"],
                            "matchConditions": [{"name": "c", "expression": "object.x +"}]})),
                hook(json!({"name": "short", "sideEffects": "Some",
                            "clientConfig": {"url": "http://h:x/p?q"}}))
            ]}),
        )])
        .unwrap();
        let v = verdict(&objects[0], &[], Server::PINNED);
        let causes: Vec<&str> = v.api_server.causes.iter().map(String::as_str).collect();
        assert_eq!(causes.len(), 9, "{causes:#?}");
        assert_eq!(
            &causes[..4],
            [
                "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
                "webhooks[0].matchConditions[0].expression: Invalid value: \"object.x +\": compilation failed: ERROR: <input>:1:11: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.x +\n | ..........^",
            ]
        );
        assert_eq!(
            &causes[4..],
            [
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
                "webhooks[1].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
                "webhooks[1].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[1].clientConfig.url: Required value: url must be a valid URL: parse \"http://h:x/p?q\": invalid port \":x\" after host; desired format: https://host[/path]",
                "webhooks[1].name: Duplicate value: \"short\"",
            ]
        );
    }
}
