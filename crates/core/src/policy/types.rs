//! The little the policy layer needs to know about CEL types: an expression's output type,
//! how upstream turns it into a variable's declared type, and how cel-go prints it in
//! `must evaluate to` messages.

use std::fmt;

/// The output type of a checked expression, as the checker reports it.
///
/// Only the shapes the policy layer reasons about are spelled out; everything else (object
/// types, opaque types such as `kubernetes.Quantity`, `optional_type(...)`, `type(...)`,
/// wrappers, type parameters) is [`OutputType::Other`] with the text cel-go's `Type.String()`
/// gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputType {
    /// `bool`
    Bool,
    /// `int`
    Int,
    /// `uint`
    Uint,
    /// `double`
    Double,
    /// `string`
    String,
    /// `bytes`
    Bytes,
    /// `duration` (printed `google.protobuf.Duration`)
    Duration,
    /// `timestamp` (printed `google.protobuf.Timestamp`)
    Timestamp,
    /// `null_type`
    Null,
    /// `dyn`
    Dyn,
    /// `any` (printed `google.protobuf.Any`)
    Any,
    /// `list(elem)`
    List(Box<OutputType>),
    /// `map(key, value)`
    Map(Box<OutputType>, Box<OutputType>),
    /// Any other type, with its cel-go `Type.String()` text, e.g. `kubernetes.Quantity`,
    /// `optional_type(int)`, `Deployment123.spec`.
    Other(String),
}

impl OutputType {
    /// upstream `convertCelTypeToDeclType` (k8s.io/apiserver v0.37.1
    /// pkg/admission/plugin/cel/composition.go): the declared type a variable gets from its
    /// expression's output type. Primitives (including `any` and `null_type`) map to
    /// themselves, lists and maps are rebuilt with converted parameters, everything else
    /// becomes `dyn`.
    pub fn variable_decl_type(&self) -> OutputType {
        match self {
            OutputType::List(e) => OutputType::List(Box::new(e.variable_decl_type())),
            OutputType::Map(k, v) => OutputType::Map(
                Box::new(k.variable_decl_type()),
                Box::new(v.variable_decl_type()),
            ),
            OutputType::Other(_) => OutputType::Dyn,
            t => t.clone(),
        }
    }

    /// Whether this output type is exactly `expected` (cel-go `Type.IsExactType`).
    pub fn is_exactly(&self, expected: &OutputType) -> bool {
        self == expected
    }
}

/// cel-go v0.29.2 common/types/types.go `Type.String()`: the runtime type name, with
/// parameters in parentheses separated by `, `.
impl fmt::Display for OutputType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputType::Bool => f.write_str("bool"),
            OutputType::Int => f.write_str("int"),
            OutputType::Uint => f.write_str("uint"),
            OutputType::Double => f.write_str("double"),
            OutputType::String => f.write_str("string"),
            OutputType::Bytes => f.write_str("bytes"),
            OutputType::Duration => f.write_str("google.protobuf.Duration"),
            OutputType::Timestamp => f.write_str("google.protobuf.Timestamp"),
            OutputType::Null => f.write_str("null_type"),
            OutputType::Dyn => f.write_str("dyn"),
            OutputType::Any => f.write_str("google.protobuf.Any"),
            OutputType::List(e) => write!(f, "list({e})"),
            OutputType::Map(k, v) => write!(f, "map({k}, {v})"),
            OutputType::Other(s) => f.write_str(s),
        }
    }
}

/// The result type an expression must have, and the API server's message when it has not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedType {
    /// No requirement (strict mode, variables).
    Any,
    /// Exactly one type.
    One(OutputType),
    /// One of several types.
    OneOf(Vec<OutputType>),
}

impl ExpectedType {
    /// `None` when `actual` satisfies the requirement, otherwise the API server's message
    /// (k8s.io/apiserver v0.37.1 pkg/admission/plugin/cel/compile.go, CompileCELExpression):
    /// `must evaluate to <t> but got <actual>` or `must evaluate to one of [<t1> <t2>] but got
    /// <actual>` (Go's `%v` of a slice: space-separated in brackets).
    ///
    /// `dyn` is accepted: in the typed environment it means "unknown", which is not proof of
    /// a wrong type (the API server, whose environment is less precise, already had its say
    /// when the policy was created).
    pub fn mismatch(&self, actual: &OutputType) -> Option<String> {
        if *actual == OutputType::Dyn {
            return None;
        }
        match self {
            ExpectedType::Any => None,
            ExpectedType::One(t) => {
                (!actual.is_exactly(t)).then(|| format!("must evaluate to {t} but got {actual}"))
            }
            ExpectedType::OneOf(ts) => {
                if ts.iter().any(|t| actual.is_exactly(t)) {
                    return None;
                }
                let list: Vec<String> = ts.iter().map(ToString::to_string).collect();
                Some(format!(
                    "must evaluate to one of [{}] but got {actual}",
                    list.join(" ")
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_like_cel_go_type_string() {
        let m = OutputType::Map(
            Box::new(OutputType::String),
            Box::new(OutputType::List(Box::new(OutputType::Int))),
        );
        assert_eq!(m.to_string(), "map(string, list(int))");
        assert_eq!(OutputType::Null.to_string(), "null_type");
        assert_eq!(
            OutputType::Timestamp.to_string(),
            "google.protobuf.Timestamp"
        );
        assert_eq!(
            OutputType::Other("optional_type(int)".into()).to_string(),
            "optional_type(int)"
        );
    }

    #[test]
    fn variable_decl_type_rebuilds_containers_and_drops_the_rest_to_dyn() {
        let obj = OutputType::Other("Deployment1.spec".into());
        assert_eq!(obj.variable_decl_type(), OutputType::Dyn);
        let l = OutputType::List(Box::new(OutputType::Other("kubernetes.Quantity".into())));
        assert_eq!(
            l.variable_decl_type(),
            OutputType::List(Box::new(OutputType::Dyn))
        );
        let m = OutputType::Map(Box::new(OutputType::String), Box::new(OutputType::Int));
        assert_eq!(m.variable_decl_type(), m);
        assert_eq!(OutputType::Null.variable_decl_type(), OutputType::Null);
        assert_eq!(OutputType::Any.variable_decl_type(), OutputType::Any);
    }

    #[test]
    fn mismatch_messages_match_the_api_server() {
        let b = ExpectedType::One(OutputType::Bool);
        assert_eq!(b.mismatch(&OutputType::Bool), None);
        assert_eq!(
            b.mismatch(&OutputType::Int).as_deref(),
            Some("must evaluate to bool but got int")
        );
        assert_eq!(b.mismatch(&OutputType::Dyn), None);
        let s = ExpectedType::One(OutputType::String);
        assert_eq!(
            s.mismatch(&OutputType::Bool).as_deref(),
            Some("must evaluate to string but got bool")
        );
        let a = ExpectedType::OneOf(vec![OutputType::String, OutputType::Null]);
        assert_eq!(a.mismatch(&OutputType::Null), None);
        // kubernetes v1.37.1 pkg/apis/admissionregistration/validation/validation_test.go
        // expects the prefix `must evaluate to one of [string null_type]`.
        assert_eq!(
            a.mismatch(&OutputType::Bool).as_deref(),
            Some("must evaluate to one of [string null_type] but got bool")
        );
        assert_eq!(ExpectedType::Any.mismatch(&OutputType::Int), None);
    }
}
