//! Which expressions of a policy are checked, their fieldRefs and required result types.

use std::fmt;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;

use super::types::{ExpectedType, OutputType};

/// Checking mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Exactly what kube-controller-manager 1.37.1 reports.
    Strict,
    /// Everything strict reports plus more expressions, kinds and result types.
    #[default]
    Extended,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Strict => "strict",
            Mode::Extended => "extended",
        })
    }
}

/// The field an expression sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpressionField {
    /// `spec.validations[i].expression`
    ValidationExpression(usize),
    /// `spec.validations[i].messageExpression`
    ValidationMessageExpression(usize),
    /// `spec.matchConditions[i].expression`
    MatchCondition(usize),
    /// `spec.variables[i].expression`
    Variable(usize),
    /// `spec.auditAnnotations[i].valueExpression`
    AuditAnnotation(usize),
    /// `spec.mutations[i].applyConfiguration.expression` (MutatingAdmissionPolicy)
    ApplyConfiguration(usize),
    /// `spec.mutations[i].jsonPatch.expression` (MutatingAdmissionPolicy)
    JsonPatch(usize),
}

/// apimachinery `field.Path` rendering, e.g. `spec.validations[0].expression`.
impl fmt::Display for ExpressionField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpressionField::ValidationExpression(i) => {
                write!(f, "spec.validations[{i}].expression")
            }
            ExpressionField::ValidationMessageExpression(i) => {
                write!(f, "spec.validations[{i}].messageExpression")
            }
            ExpressionField::MatchCondition(i) => write!(f, "spec.matchConditions[{i}].expression"),
            ExpressionField::Variable(i) => write!(f, "spec.variables[{i}].expression"),
            ExpressionField::AuditAnnotation(i) => {
                write!(f, "spec.auditAnnotations[{i}].valueExpression")
            }
            ExpressionField::ApplyConfiguration(i) => {
                write!(f, "spec.mutations[{i}].applyConfiguration.expression")
            }
            ExpressionField::JsonPatch(i) => write!(f, "spec.mutations[{i}].jsonPatch.expression"),
        }
    }
}

impl ExpressionField {
    /// Whether kube-controller-manager checks this field. Mutations count as upstream
    /// fields: no upstream component type-checks MutatingAdmissionPolicies, and strict mode
    /// checks a MAP's mutations as kube-controller-manager checks a VAP's validations (see
    /// docs/mutating.md).
    pub fn is_upstream(&self) -> bool {
        matches!(
            self,
            ExpressionField::ValidationExpression(_)
                | ExpressionField::ValidationMessageExpression(_)
                | ExpressionField::ApplyConfiguration(_)
                | ExpressionField::JsonPatch(_)
        )
    }

    /// Whether the expression is compiled with the patch types (`Object`, `JSONPatch`,
    /// `jsonpatch.escapeKey`): only mutations (mutating/compilation.go `compilePolicy` sets
    /// `HasPatchTypes` for them, not for variables or match conditions).
    pub fn has_patch_types(&self) -> bool {
        matches!(
            self,
            ExpressionField::ApplyConfiguration(_) | ExpressionField::JsonPatch(_)
        )
    }

    /// The result type the API server requires for this field (the `ReturnTypes` of
    /// k8s.io/apiserver v0.37.1 validating/interface.go, validating/message.go and
    /// webhook/matchconditions/matcher.go): validations and match conditions `bool`,
    /// message expressions `string`, audit annotation values `string` or `null_type`,
    /// variables anything.
    pub fn expected_type(&self) -> ExpectedType {
        match self {
            ExpressionField::ValidationExpression(_) | ExpressionField::MatchCondition(_) => {
                ExpectedType::One(OutputType::Bool)
            }
            ExpressionField::ValidationMessageExpression(_) => {
                ExpectedType::One(OutputType::String)
            }
            ExpressionField::AuditAnnotation(_) => {
                ExpectedType::OneOf(vec![OutputType::String, OutputType::Null])
            }
            ExpressionField::Variable(_) => ExpectedType::Any,
            // mutating/patch/smd.go ApplyConfigurationCondition.ReturnTypes: `Object`;
            // json_patch.go JSONPatchCondition.ReturnTypes: `list(JSONPatch)`.
            ExpressionField::ApplyConfiguration(_) => {
                ExpectedType::One(OutputType::Other("Object".into()))
            }
            ExpressionField::JsonPatch(_) => ExpectedType::One(OutputType::List(Box::new(
                OutputType::Other("JSONPatch".into()),
            ))),
        }
    }
}

/// One expression to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpressionSite<'a> {
    /// Where it is.
    pub field: ExpressionField,
    /// Its text, as written.
    pub expression: &'a str,
}

/// Extended mode's `matchConditions[i].expression` then `variables[i].expression` sites, shared
/// by the validating and the mutating policies' spec.
pub(crate) fn push_condition_and_variable_sites<'a>(
    out: &mut Vec<ExpressionSite<'a>>,
    match_conditions: impl Iterator<Item = &'a str>,
    variables: impl Iterator<Item = &'a str>,
) {
    for (i, expression) in match_conditions.enumerate() {
        out.push(ExpressionSite {
            field: ExpressionField::MatchCondition(i),
            expression,
        });
    }
    for (i, expression) in variables.enumerate() {
        out.push(ExpressionSite {
            field: ExpressionField::Variable(i),
            expression,
        });
    }
}

/// The expressions checked in `mode`, in output order.
///
/// Strict (upstream `TypeChecker.Check`): for each validation, its `expression`, then its
/// `messageExpression` when non-empty. Extended: the same, then every
/// `matchConditions[i].expression`, `variables[i].expression` and
/// `auditAnnotations[i].valueExpression`, in that order.
pub fn expression_sites(policy: &ValidatingAdmissionPolicy, mode: Mode) -> Vec<ExpressionSite<'_>> {
    let mut out = Vec::new();
    let Some(spec) = policy.spec.as_ref() else {
        return out;
    };
    for (i, v) in spec.validations.iter().flatten().enumerate() {
        out.push(ExpressionSite {
            field: ExpressionField::ValidationExpression(i),
            expression: &v.expression,
        });
        // Note that upstream skips only the empty string, not whitespace.
        if let Some(m) = v.message_expression.as_deref().filter(|m| !m.is_empty()) {
            out.push(ExpressionSite {
                field: ExpressionField::ValidationMessageExpression(i),
                expression: m,
            });
        }
    }
    if mode == Mode::Extended {
        push_condition_and_variable_sites(
            &mut out,
            spec.match_conditions
                .iter()
                .flatten()
                .map(|m| m.expression.as_str()),
            spec.variables
                .iter()
                .flatten()
                .map(|v| v.expression.as_str()),
        );
        for (i, a) in spec.audit_annotations.iter().flatten().enumerate() {
            out.push(ExpressionSite {
                field: ExpressionField::AuditAnnotation(i),
                expression: &a.value_expression,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{
        AuditAnnotation, MatchCondition, ValidatingAdmissionPolicySpec, Validation, Variable,
    };

    fn policy() -> ValidatingAdmissionPolicy {
        ValidatingAdmissionPolicy {
            spec: Some(ValidatingAdmissionPolicySpec {
                validations: Some(vec![
                    Validation {
                        expression: "a".into(),
                        message_expression: Some("m0".into()),
                        ..Default::default()
                    },
                    Validation {
                        expression: "b".into(),
                        message_expression: Some(String::new()),
                        ..Default::default()
                    },
                    Validation {
                        expression: "c".into(),
                        message_expression: Some(" ".into()),
                        ..Default::default()
                    },
                ]),
                match_conditions: Some(vec![MatchCondition {
                    name: "x".into(),
                    expression: "mc".into(),
                }]),
                variables: Some(vec![Variable {
                    name: "v".into(),
                    expression: "var".into(),
                }]),
                audit_annotations: Some(vec![AuditAnnotation {
                    key: "k".into(),
                    value_expression: "aa".into(),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn strict_sites_and_field_refs() {
        let p = policy();
        let sites: Vec<String> = expression_sites(&p, Mode::Strict)
            .iter()
            .map(|s| format!("{}={}", s.field, s.expression))
            .collect();
        assert_eq!(
            sites,
            [
                "spec.validations[0].expression=a",
                "spec.validations[0].messageExpression=m0",
                "spec.validations[1].expression=b",
                "spec.validations[2].expression=c",
                "spec.validations[2].messageExpression= ",
            ]
        );
    }

    #[test]
    fn extended_sites_add_other_fields_after_strict_ones() {
        let p = policy();
        let sites: Vec<String> = expression_sites(&p, Mode::Extended)
            .iter()
            .map(|s| s.field.to_string())
            .collect();
        assert_eq!(
            sites[5..],
            [
                "spec.matchConditions[0].expression",
                "spec.variables[0].expression",
                "spec.auditAnnotations[0].valueExpression",
            ]
        );
        assert!(expression_sites(&ValidatingAdmissionPolicy::default(), Mode::Extended).is_empty());
    }

    #[test]
    fn expected_types() {
        assert_eq!(
            ExpressionField::MatchCondition(0).expected_type(),
            ExpectedType::One(OutputType::Bool)
        );
        assert_eq!(
            ExpressionField::Variable(0).expected_type(),
            ExpectedType::Any
        );
        assert!(ExpressionField::ValidationMessageExpression(0).is_upstream());
        assert!(!ExpressionField::AuditAnnotation(0).is_upstream());
    }
}
