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
        }
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

/// Go's `strconv.Quote`: double-quoted, with Go escapes for `"`, `\`, control characters and
/// characters Go does not consider printable.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
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
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c\n\té"), r#""a\"b\\c\n\té""#);
        assert_eq!(go_quote("\u{1}\u{7f}\u{200b}"), r#""\x01\x7f\u200b""#);
    }
}
