//! Field errors exactly as kube-apiserver prints them: apimachinery
//! `pkg/util/validation/field/errors.go` (`Error.Error`, `Error.ErrorBody`, the constructors
//! `Required`, `Invalid`, `NotSupported`, `Duplicate`, `Forbidden`, `TooMany`, `TooLong`,
//! `InternalError`) and `path.go` (`Path.String`).

use std::fmt;

/// The kind of a field error (`field.ErrorType`), printed as `ErrorType.String` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `Required value`.
    Required,
    /// `Invalid value`.
    Invalid,
    /// `Unsupported value`.
    NotSupported,
    /// `Duplicate value`.
    Duplicate,
    /// `Forbidden`.
    Forbidden,
    /// `Too many`.
    TooMany,
    /// `Too long`.
    TooLong,
    /// `Internal error`.
    Internal,
}

impl ErrorType {
    fn as_str(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooMany => "Too many",
            ErrorType::TooLong => "Too long",
            ErrorType::Internal => "Internal error",
        }
    }

    /// Whether `ErrorBody` prints the bad value for this type.
    fn shows_value(self) -> bool {
        matches!(
            self,
            ErrorType::Invalid
                | ErrorType::NotSupported
                | ErrorType::Duplicate
                | ErrorType::TooMany
        )
    }
}

/// The bad value of a field error, as `ErrorBody` renders it: a Go `string` with `%q`;
/// anything else (named string types such as `FailurePolicyType`, slices, pointers, ints) as
/// `encoding/json` marshals it.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// No value shown.
    Omit,
    /// A Go `string`: `%q`.
    Str(String),
    /// A value `ErrorBody` marshals with `encoding/json`.
    Json(serde_json::Value),
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The error type.
    pub kind: ErrorType,
    /// The field path (`spec.validations[0].expression`).
    pub field: String,
    /// The bad value.
    pub value: BadValue,
    /// The detail (may be empty).
    pub detail: String,
    /// For a CEL compile error: where its first error is in the expression (the findings'
    /// position, carried as data beside the text that prints it).
    pub cel: Option<CelPos>,
}

impl FieldError {
    /// `field.Required(path, detail)`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omit, detail)
    }
    /// `field.Invalid(path, value, detail)` for a Go `string` value.
    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        Self::new(
            ErrorType::Invalid,
            field,
            BadValue::Str(value.to_owned()),
            detail,
        )
    }
    /// `field.Invalid(path, value, detail)` for a value marshalled as JSON.
    pub fn invalid_json(
        field: impl Into<String>,
        value: serde_json::Value,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::Invalid, field, BadValue::Json(value), detail)
    }
    /// `field.NotSupported(path, value, supported)` for a named string type (marshalled as
    /// JSON); `supported` in the order given (upstream passes `sets.String.List()`, sorted).
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            ErrorType::NotSupported,
            field,
            BadValue::Json(serde_json::Value::String(value.to_owned())),
            detail,
        )
    }
    /// `field.Duplicate(path, value)` for a Go `string` value.
    pub fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Self::new(
            ErrorType::Duplicate,
            field,
            BadValue::Str(value.to_owned()),
            "",
        )
    }
    /// `field.Duplicate(path, value)` for a named string type (marshalled as JSON).
    pub fn duplicate_json(field: impl Into<String>, value: &str) -> Self {
        Self::new(
            ErrorType::Duplicate,
            field,
            BadValue::Json(serde_json::Value::String(value.to_owned())),
            "",
        )
    }
    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omit, detail)
    }
    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let items = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field,
            BadValue::Json(serde_json::Value::from(actual)),
            format!("must have at most {max} {items}"),
        )
    }
    /// `field.TooLong(path, _, max)`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let bytes = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::Omit,
            format!("may not be more than {max} {bytes}"),
        )
    }
    /// `field.InternalError(path, err)`.
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field, BadValue::Omit, detail)
    }

    fn new(
        kind: ErrorType,
        field: impl Into<String>,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
            cel: None,
        }
    }

    /// The cause it is: its text, field and CEL position.
    pub fn cause(&self) -> Cause {
        self.into()
    }

    /// The same error, with the position of its first CEL error in the expression.
    pub fn with_cel(self, cel: Option<CelPos>) -> Self {
        Self { cel, ..self }
    }

    /// `Error.ErrorBody`: the type, the value where shown, and the detail.
    pub fn body(&self) -> String {
        let mut s = self.kind.as_str().to_owned();
        if self.kind.shows_value() {
            match &self.value {
                BadValue::Omit => {}
                BadValue::Str(v) => {
                    s.push_str(": ");
                    s.push_str(&go_quote(v));
                }
                BadValue::Json(v) => {
                    s.push_str(": ");
                    s.push_str(&go_json(v));
                }
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    /// `Error.Error`: `<field>: <body>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl From<&FieldError> for Cause {
    /// The cause as kube-apiserver prints it, with its field and CEL position as data.
    fn from(e: &FieldError) -> Self {
        Self {
            text: e.to_string(),
            field: e.field.clone(),
            cel: e.cel,
        }
    }
}

/// A position in a CEL expression's text as cel-go prints it in `<input>:L:C`: 1-based line,
/// 1-based column in code points. Taken from the checker's [`crate::cel::Location`] (whose
/// column is 0-based), never from rendered text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelPos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in code points.
    pub column: usize,
}

impl CelPos {
    /// The position of a checker location.
    pub fn of(l: crate::cel::Location) -> Self {
        Self {
            line: l.line,
            column: l.column + 1,
        }
    }

    /// The position of the first error cel-go prints of `issues` that has a location (its
    /// display order: by line and column, errors without a location first).
    pub fn first_of(issues: &crate::cel::Issues) -> Option<Self> {
        let (blocks, _) = issues.display_blocks();
        blocks
            .into_iter()
            .find_map(|(e, _)| e.location)
            .map(Self::of)
    }
}

/// One field error of an object's create (or update, or an engine's add): its text exactly
/// as the API server (or the engine) prints it, the field it is about and, for a CEL compile
/// error, the position of its first error in the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The text (`spec.validations[0].expression: Invalid value: ...`).
    pub text: String,
    /// The field path it is about; empty when it is about the object as a whole.
    pub field: String,
    /// Where its first CEL error is in the expression.
    pub cel: Option<CelPos>,
}

impl Cause {
    /// A cause with no CEL position.
    pub fn new(field: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            field: field.into(),
            cel: None,
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Cause {
    /// As its text: the JSON and YAML outputs list the causes as the API server prints them.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// Go's `strconv.Quote`: double-quoted, with Go escapes for `"`, `\`, control characters and
/// characters Go does not consider printable.
pub fn go_quote(s: &str) -> String {
    go_quoted(s, |c, out| match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\u{b}' => out.push_str("\\v"),
        c if go_is_print(c) => out.push(c),
        c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    })
}

/// `s` double-quoted with the escapes both Go quotings share (`"`, `\`, newline, carriage
/// return, tab), every other character written by `other`.
fn go_quoted(s: &str, other: impl Fn(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => other(c, &mut out),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint` (`unicode.IsPrint` minus spaces other than
/// U+0020): control characters, the Unicode format characters and line/paragraph separators
/// and non-ASCII spaces are not printable.
fn go_is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Cf (format) characters Go treats as not printable.
    !matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e000}'..='\u{f8ff}')
}

/// Go's `encoding/json.Marshal` of a value: compact, object keys in the order given, strings
/// with HTML-safe escapes (`<`, `>`, `&` as `\u003c`...), U+2028/U+2029 escaped.
pub fn go_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => go_json_string(s),
        serde_json::Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_json).collect();
            format!("[{}]", parts.join(","))
        }
        serde_json::Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_json_string(k), go_json(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn go_json_string(s: &str) -> String {
    go_quoted(s, |c, out| match c {
        '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
            out.push_str(&format!("\\u{:04x}", c as u32));
        }
        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_as_apimachinery_prints_them() {
        assert_eq!(
            FieldError::invalid("spec.x", "0", "must evaluate to bool but got int").to_string(),
            r#"spec.x: Invalid value: "0": must evaluate to bool but got int"#
        );
        assert_eq!(
            FieldError::required("spec.failurePolicy", "").to_string(),
            "spec.failurePolicy: Required value"
        );
        assert_eq!(
            FieldError::not_supported("spec.failurePolicy", "Bogus", &["Fail", "Ignore"])
                .to_string(),
            r#"spec.failurePolicy: Unsupported value: "Bogus": supported values: "Fail", "Ignore""#
        );
        assert_eq!(
            FieldError::too_many("spec.matchConditions", 65, 64).to_string(),
            "spec.matchConditions: Too many: 65: must have at most 64 items"
        );
        assert_eq!(
            FieldError::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive"
            )
            .to_string(),
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive"
        );
        assert_eq!(
            FieldError::invalid_json("r", serde_json::json!(["*", "a<b"]), "d").to_string(),
            r#"r: Invalid value: ["*","a\u003cb"]: d"#
        );
    }

    /// A CEL compile error's cause carries, as data, the position its text prints first
    /// (`<input>:L:C`, 1-based column); a cause that is no compile error carries none.
    #[test]
    fn compile_errors_carry_their_first_cel_position() {
        let policy = |expression: &str| -> k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "p.example.com"},
                "spec": {
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                        "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["deployments"]}]},
                    "validations": [{"expression": expression}]
                }
            }))
            .expect("test policy decodes")
        };
        let server = crate::apiserver::Server::PINNED;
        let errs = crate::apiserver::validate_policy_create(&policy("true &&\n  x.y || z"), server);
        assert_eq!(errs.len(), 1, "{errs:?}");
        let cause = Cause::from(&errs[0]);
        assert_eq!(cause.field, "spec.validations[0].expression");
        assert_eq!(cause.cel, Some(CelPos { line: 2, column: 3 }));
        assert!(
            cause
                .text
                .contains("ERROR: <input>:2:3: undeclared reference to 'x'"),
            "{}",
            cause.text
        );
        assert!(
            cause
                .text
                .contains("ERROR: <input>:2:10: undeclared reference to 'z'"),
            "{}",
            cause.text
        );
        let errs = crate::apiserver::validate_policy_create(&policy("0"), server);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].cel, None);
    }

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c\n\té"), r#""a\"b\\c\n\té""#);
        assert_eq!(go_quote("\u{1}\u{7f}\u{200b}"), r#""\x01\x7f\u200b""#);
    }
}
