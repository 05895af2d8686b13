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

use super::entry::{ApiServerVerdict, CheckedPolicy};
use super::input::{DecodeFailure, InputError, InputOther, Origin, Undecoded, undecoded};

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
        advice: crate::webhooks::advise(config),
        ..CheckedPolicy::new(
            config.kind.as_str(),
            config.name().to_owned(),
            object.origin.clone(),
            ApiServerVerdict::new(
                server.minor,
                stored.is_some(),
                errors.iter().map(Into::into).collect(),
            ),
            None,
        )
    }
}

/// The type checking of a configuration's match conditions
/// ([`crate::webhooks::match_conditions::type_check`], which the controller uses too).
pub fn type_check(
    object: &WebhookObject,
    options: &crate::policy::CheckOptions,
    backends: Option<&crate::policy::Backends<'_>>,
) -> Option<crate::policy::PolicyStatus> {
    crate::webhooks::match_conditions::type_check(&object.config, options, backends)
}

pub use crate::webhooks::match_conditions::unbound_variable_findings;

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
        let causes: Vec<&str> = v
            .api_server
            .causes
            .iter()
            .map(|c| c.text.as_str())
            .collect();
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
