//! The producers: one object's analysis results (kube-apiserver's or the engine's causes, the
//! policy's status, a webhook configuration's advice) as findings, in output order. The CEL
//! position of each is taken from the structured result it comes from; the place in the file
//! is the front end's to fill in.

use std::sync::Arc;

use super::{Cause, CelPos, Class, Finding, Fix, ObjectRef, Rule, TypeChecking};
use crate::policy::narrowing::FindingClass;
use crate::policy::status::{ACCEPTED_ON_CREATE, TYPE_CHECKED};
use crate::policy::{Gvk, Issue, KindOutcome, PolicyStatus, SkipSubject, render_warning};

/// What the analyses said about one object.
#[derive(Debug, Clone, Copy)]
pub struct Analysed<'a> {
    /// The object.
    pub object: &'a ObjectRef,
    /// The policy engine that adds the object instead of kube-apiserver (Gatekeeper,
    /// Kyverno), for the class of its causes.
    pub engine: Option<&'static str>,
    /// Read from a static-manifest folder: its causes are the loader's.
    pub static_manifests: bool,
    /// A document that does not decode: the field (empty for the document) and why. Nothing
    /// else is checked of it.
    pub undecoded: Option<(&'a str, &'a str)>,
    /// The field errors of its create or update (the engine's, for an engine's object).
    pub causes: &'a [Cause],
    /// The checked status (policies).
    pub status: Option<&'a PolicyStatus>,
    /// What a webhook configuration will do beyond the verdict.
    pub advice: &'a [crate::webhooks::Advice],
}

/// A finding of `rule` on `object`'s `field` with no position, kind or fix yet.
fn finding(rule: Rule, class: Class, object: &ObjectRef, field: &str, message: String) -> Finding {
    Finding {
        rule,
        severity: rule.severity(),
        class,
        object: object.clone(),
        field_ref: field.to_owned(),
        kinds: Vec::new(),
        cel: None,
        position: None,
        message,
        fix: None,
        type_checking: None,
    }
}

/// Every finding of one object, in output order: its causes, the kinds not checked, the
/// type-checking warnings, the webhook advice and the runtime-safety findings.
pub fn produce(a: Analysed<'_>) -> Vec<Finding> {
    let object = a.object;
    if let Some((field, message)) = a.undecoded {
        let class = Class::NotDecoded;
        return vec![finding(
            Rule::NotDecoded,
            class,
            object,
            field,
            message.to_owned(),
        )];
    }
    let mut out = Vec::new();
    let (rule, class) = match (a.static_manifests, a.engine) {
        (true, _) => (Rule::StaticManifests, Class::NotLoaded),
        (false, Some(engine)) => (Rule::Rejected, Class::RejectedByEngine(engine)),
        (false, None) => (Rule::Rejected, Class::RejectedOnCreate),
    };
    for cause in a.causes {
        // The loader's errors name files, not fields.
        let field = if a.static_manifests { "" } else { &cause.field };
        let mut f = finding(rule, class, object, field, cause.text.clone());
        f.cel = cause.cel;
        out.push(f);
    }
    let Some(status) = a.status else {
        out.extend(advice(object, a.advice));
        return out;
    };
    for skipped in &status.skipped {
        let field = match &skipped.subject {
            SkipSubject::Rule(i) => format!("spec.matchConstraints.resourceRules[{i}]"),
            SkipSubject::Resource { rule, .. } => {
                format!("spec.matchConstraints.resourceRules[{rule}].resources")
            }
            SkipSubject::Field(f) => f.clone(),
            _ => "spec.matchConstraints".to_owned(),
        };
        let message = format!("not checked: {skipped}");
        out.push(finding(
            Rule::KindNotChecked,
            Class::NotChecked,
            object,
            &field,
            message,
        ));
    }
    for (entry, w) in status.expression_results.iter().enumerate() {
        // Upstream's text of the field, as the status holds it (`TypeCheckingResults.String`).
        let field_text: Arc<str> = Arc::from(render_warning(&w.kinds));
        for (kind, r) in w.kinds.iter().enumerate() {
            let type_checking = TypeChecking {
                entry,
                kind,
                field_text: Arc::clone(&field_text),
                kind_text: Arc::from(r.render()),
                narrowed: narrowed(status, &w.field_ref, &r.gvk),
            };
            let warning = |cel: Option<CelPos>, message: String| Finding {
                kinds: vec![r.gvk.to_string()],
                cel,
                type_checking: Some(type_checking.clone()),
                ..finding(
                    Rule::TypeWarning,
                    Class::FailsAtAdmission,
                    object,
                    &w.field_ref,
                    message,
                )
            };
            out.extend(
                kind_messages(&r.outcome)
                    .into_iter()
                    .map(|(cel, m)| warning(cel, m)),
            );
        }
    }
    out.extend(advice(object, a.advice));
    for f in &status.runtime {
        let mut message = f.text_without_field();
        if let Some(fixed) = &f.fixed_expression {
            message.push_str(&format!("; fix: {fixed}"));
        }
        out.push(Finding {
            kinds: f.kinds.first().cloned().into_iter().collect(),
            cel: f.pos.map(|p| CelPos {
                line: p.line,
                column: p.column + 1,
            }),
            fix: f.fix.clone().map(|edit| Fix { edit, file: None }),
            ..finding(
                Rule::RuntimeError,
                Class::ErrorsOnValidObjects,
                object,
                &f.field_ref,
                message,
            )
        });
    }
    out
}

/// The class narrowing gave the type-checking issues on `field_ref` for `gvk`: the worst
/// (extended mode); `None` when it classified none (strict mode).
fn narrowed(status: &PolicyStatus, field_ref: &str, gvk: &Gvk) -> Option<FindingClass> {
    status
        .findings
        .iter()
        .filter(|f| f.field_ref == field_ref && &f.gvk == gvk)
        .map(|f| f.class)
        .min()
}

/// The findings of a checked policy's status as the controller reports them (its report, its
/// Events), on `object` (`engine`: the policy engine that adds it, for an engine's policy):
/// first one for each of its conditions that is `False` and says what is wrong with the
/// object, in the status's order — `AcceptedOnCreate` ([`Rule::Rejected`], the condition's
/// message: the controller has the create's causes only as that message) and `TypeChecked`
/// ([`Rule::KindNotChecked`], [`Class::NotTypeChecked`]: nothing could be checked) — then
/// those [`produce`] makes of the status. `vapcheck check` prints the API server's causes
/// instead of conditions, so its findings are [`produce`]'s.
pub fn produce_status(
    object: &ObjectRef,
    status: &PolicyStatus,
    engine: Option<&'static str>,
) -> Vec<Finding> {
    let mut out: Vec<Finding> = status
        .conditions
        .iter()
        .filter(|c| c.status == "False")
        .filter_map(|c| {
            let (rule, class) = if c.type_ == ACCEPTED_ON_CREATE {
                let class = engine.map_or(Class::RejectedOnCreate, Class::RejectedByEngine);
                (Rule::Rejected, class)
            } else if c.type_ == TYPE_CHECKED {
                (Rule::KindNotChecked, Class::NotTypeChecked)
            } else {
                return None;
            };
            Some(finding(rule, class, object, "", c.message.clone()))
        })
        .collect();
    out.extend(produce(Analysed {
        object,
        engine,
        static_manifests: false,
        undecoded: None,
        causes: &[],
        status: Some(status),
        advice: &[],
    }));
    out
}

/// The webhook advice of an object as findings.
fn advice<'a>(
    object: &'a ObjectRef,
    advice: &'a [crate::webhooks::Advice],
) -> impl Iterator<Item = Finding> + 'a {
    advice.iter().map(|a| {
        finding(
            Rule::Webhook(a.rule),
            Class::Webhook,
            object,
            &a.field_ref,
            a.message.clone(),
        )
    })
}

/// The messages of one kind's type-checking result: one per CEL error at a position in the
/// expression (with the issues that follow it up to the next, as in the rendered text), at
/// that position; a result without one (an internal error, a result-type message, warnings
/// only) is one message at the field.
fn kind_messages(outcome: &KindOutcome) -> Vec<(Option<CelPos>, String)> {
    let issues = match outcome {
        KindOutcome::Issues(issues) => issues,
        KindOutcome::Error(e) => {
            let message = format!("type checking error: {e}");
            return vec![(None, message.trim_end().to_owned())];
        }
    };
    if !issues.iter().any(Issue::is_positioned_error) {
        return vec![(None, issues.render().trim_end().to_owned())];
    }
    let mut out = Vec::new();
    let mut current: Option<(Option<CelPos>, String)> = None;
    for issue in issues {
        match (issue.is_positioned_error(), &mut current, issue.pos) {
            (true, _, Some(p)) => {
                out.extend(current.take());
                let cel = CelPos {
                    line: p.line,
                    column: p.column + 1,
                };
                current = Some((Some(cel), issue.text.clone()));
            }
            (_, Some((_, text)), _) => {
                text.push('\n');
                text.push_str(&issue.text);
            }
            // Before the first positioned error: not in any finding's slice of the text
            // (cel-go sorts position-less issues first).
            _ => {}
        }
    }
    out.extend(current);
    out.into_iter()
        .map(|(cel, text)| (cel, text.trim_end().to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Origin;
    use crate::policy::narrowing::Pos;
    use crate::policy::status::ExpressionResults;
    use crate::policy::{Gvk, Issues, KindResult, Severity};

    /// The policy `p` of `p.yaml` as entry `entry`.
    fn policy(entry: usize) -> ObjectRef {
        ObjectRef {
            entry,
            kind: "ValidatingAdmissionPolicy",
            name: "p".to_owned(),
            origin: Origin {
                source: "p.yaml".to_owned(),
                document: 1,
                item: None,
            },
        }
    }

    /// Findings come from the per-kind results as data: one per positioned error (with what
    /// follows it up to the next) at its CEL position, one for a result without any, the
    /// kind's name on each.
    #[test]
    fn findings_follow_the_structured_results() {
        let error = |column: usize, message: &str| Issue {
            severity: Severity::Error,
            pos: Some(Pos { line: 1, column }),
            message: message.to_owned(),
            text: format!("ERROR: <input>:1:{}: {message}", column + 1),
        };
        let warning = Issue {
            severity: Severity::Warning,
            pos: Some(Pos { line: 1, column: 0 }),
            message: "w".to_owned(),
            text: "WARNING: <input>:1:1: w".to_owned(),
        };
        let kinds = vec![
            KindResult {
                gvk: Gvk::new("apps", "v1", "Deployment"),
                outcome: KindOutcome::Issues(Issues(vec![
                    error(0, "a"),
                    warning.clone(),
                    error(4, "b"),
                ])),
            },
            KindResult {
                gvk: Gvk::new("", "v1", "Pod"),
                outcome: KindOutcome::Issues(Issues(vec![warning])),
            },
            KindResult {
                gvk: Gvk::new("", "v1", "Pod"),
                outcome: KindOutcome::Error("fail to build env: boom".to_owned()),
            },
        ];
        let status = PolicyStatus {
            expression_results: vec![ExpressionResults {
                field_ref: "spec.validations[0].expression".to_owned(),
                kinds,
            }],
            ..PolicyStatus::default()
        };
        let object = policy(0);
        let got: Vec<_> = produce(Analysed {
            object: &object,
            engine: None,
            static_manifests: false,
            undecoded: None,
            causes: &[],
            status: Some(&status),
            advice: &[],
        })
        .into_iter()
        .map(|f| {
            (
                f.matched_kind().map(str::to_owned),
                f.cel.map(|c| (c.line, c.column)),
                f.message,
            )
        })
        .collect();
        let deployment = Some("apps/v1, Kind=Deployment".to_owned());
        let pod = Some("/v1, Kind=Pod".to_owned());
        assert_eq!(
            got,
            [
                (
                    deployment.clone(),
                    Some((1, 1)),
                    "ERROR: <input>:1:1: a\nWARNING: <input>:1:1: w".to_owned()
                ),
                (deployment, Some((1, 5)), "ERROR: <input>:1:5: b".to_owned()),
                (pod.clone(), None, "WARNING: <input>:1:1: w".to_owned()),
                (
                    pod,
                    None,
                    "type checking error: fail to build env: boom".to_owned()
                ),
            ]
        );
    }

    /// The controller's findings of a status: its `False` conditions that are findings first,
    /// in the status's order; each type-checking warning knows its entry, its kind, upstream's
    /// text of both and narrowing's class; the status's `expressionWarnings` come back from
    /// them byte for byte.
    #[test]
    fn the_controllers_findings_carry_the_conditions_and_upstreams_text() {
        use crate::policy::PolicyCondition;
        use crate::policy::narrowing::Classified;
        let error = |column: usize, message: &str| Issue {
            severity: Severity::Error,
            pos: Some(Pos { line: 1, column }),
            message: message.to_owned(),
            text: format!("ERROR: <input>:1:{}: {message}\n | x\n | ^", column + 1),
        };
        let field = "spec.validations[0].expression";
        let kinds = vec![
            KindResult {
                gvk: Gvk::new("apps", "v1", "Deployment"),
                outcome: KindOutcome::Issues(Issues(vec![error(0, "a"), error(2, "b")])),
            },
            KindResult {
                gvk: Gvk::new("", "v1", "Pod"),
                outcome: KindOutcome::Error("boom".to_owned()),
            },
        ];
        let condition = |type_: &str, status: &str, message: &str| PolicyCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            observed_generation: None,
            reason: "R".to_owned(),
            message: message.to_owned(),
        };
        let warning = render_warning(&kinds);
        let status = PolicyStatus {
            expression_warnings: vec![
                k8s_openapi::api::admissionregistration::v1::ExpressionWarning {
                    field_ref: field.to_owned(),
                    warning: warning.clone(),
                },
            ],
            expression_results: vec![ExpressionResults {
                field_ref: field.to_owned(),
                kinds: kinds.clone(),
            }],
            conditions: vec![
                condition(TYPE_CHECKED, "False", "checked nothing"),
                condition(
                    crate::policy::status::EXPRESSIONS_VALID,
                    "False",
                    "1 warning",
                ),
                condition(ACCEPTED_ON_CREATE, "False", "rejected"),
            ],
            findings: vec![Classified {
                field_ref: field.to_owned(),
                gvk: Gvk::new("", "v1", "Pod"),
                upstream: true,
                class: FindingClass::StaticTypingOnly,
                why: "",
                message: "m".to_owned(),
            }],
            ..PolicyStatus::default()
        };
        let object = policy(0);
        let got = produce_status(&object, &status, None);
        let heads: Vec<_> = got
            .iter()
            .map(|f| (f.rule, f.class, f.field_ref.as_str()))
            .collect();
        assert_eq!(
            heads,
            [
                (Rule::KindNotChecked, Class::NotTypeChecked, ""),
                (Rule::Rejected, Class::RejectedOnCreate, ""),
                (Rule::TypeWarning, Class::FailsAtAdmission, field),
                (Rule::TypeWarning, Class::FailsAtAdmission, field),
                (Rule::TypeWarning, Class::FailsAtAdmission, field),
            ]
        );
        assert_eq!(got[0].message, "checked nothing");
        assert_eq!(got[1].message, "rejected");
        let places: Vec<_> = got[2..]
            .iter()
            .filter_map(|f| f.type_checking.as_ref())
            .map(|t| (t.entry, t.kind, &*t.field_text, &*t.kind_text, t.narrowed))
            .collect();
        let (deployment, pod) = (kinds[0].render(), kinds[1].render());
        assert_eq!(
            places,
            [
                (0, 0, warning.as_str(), deployment.as_str(), None),
                (0, 0, warning.as_str(), deployment.as_str(), None),
                (
                    0,
                    1,
                    warning.as_str(),
                    pod.as_str(),
                    Some(FindingClass::StaticTypingOnly)
                ),
            ]
        );
        assert!(got[..2].iter().all(|f| f.type_checking.is_none()));
        assert_eq!(
            crate::finding::expression_warnings(&got),
            [(field, warning.as_str())]
        );
        // An engine's rejection is the engine's; `produce` has no conditions.
        let kyverno = produce_status(&object, &status, Some("Kyverno"));
        assert_eq!(kyverno[1].class, Class::RejectedByEngine("Kyverno"));
        assert_eq!(
            got[2..],
            produce(Analysed {
                object: &object,
                engine: None,
                static_manifests: false,
                undecoded: None,
                causes: &[],
                status: Some(&status),
                advice: &[],
            })[..]
        );
    }

    /// A cause keeps the CEL position it was made with; the field is its own, not the text's.
    #[test]
    fn causes_carry_their_cel_position() {
        let object = policy(3);
        let causes = [
            Cause {
                text: "spec.validations[0].expression: Invalid value: \"x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')".to_owned(),
                field: "spec.validations[0].expression".to_owned(),
                cel: Some(CelPos { line: 1, column: 1 }),
            },
            Cause::new("spec.failurePolicy", "spec.failurePolicy: Required value"),
        ];
        let got = produce(Analysed {
            object: &object,
            engine: Some("Kyverno"),
            static_manifests: false,
            undecoded: None,
            causes: &causes,
            status: None,
            advice: &[],
        });
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].field_ref, "spec.validations[0].expression");
        assert_eq!(got[0].cel, Some(CelPos { line: 1, column: 1 }));
        assert_eq!(got[0].class, Class::RejectedByEngine("Kyverno"));
        assert_eq!(got[1].field_ref, "spec.failurePolicy");
        assert_eq!(got[1].cel, None);
        assert_eq!(got[1].object.entry, 3);
    }
}
