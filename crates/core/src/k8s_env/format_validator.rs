//! The AST validator of cel-go's strings extension before version 4
//! (cel-go v0.29.2 `ext/formatting.go`, `stringFormatValidator`): for every
//! `"<literal>".format([<list literal>])` call it parses the format string and checks each
//! clause against the deduced type of the corresponding list element. Kubernetes enables
//! `ext.Strings(ext.StringsVersion(2))`, so this validator runs after its own four (duration,
//! timestamp, regex and homogeneous aggregate literals), and `format` calls are exempt from
//! the homogeneous aggregate literal check.
//!
//! The message texts are cel-go's (quoted from `ext/formatting.go` and Go's `strconv`).

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use crate::cel::{CheckedTypes, Env, EnvBuilder, Issues, Kind, ParsedExpr, Type};

/// Exempts `format` from the homogeneous literal check (cel-go
/// `stringFormatValidator.Configure`). The validator itself runs in
/// [`crate::k8s_env::compile`] for environments that declare the strings library.
pub fn add(b: &mut EnvBuilder) {
    let exempt = &mut b.options_mut().homogeneous_exempt_functions;
    if !exempt.iter().any(|f| f == "format") {
        exempt.push("format".to_string());
    }
}

/// Whether `env` declares the strings library at a version with this validator (version 1
/// and later declare `strings.quote`).
pub fn enabled(env: &Env) -> bool {
    env.find_function("strings.quote").is_some()
}

/// The validator (cel-go name `cel.validator.string_format`).
#[derive(Debug)]
pub struct StringFormatValidator;

impl StringFormatValidator {
    /// Reports the format-string problems of a checked expression into `issues`.
    pub fn validate(&self, parsed: &ParsedExpr, types: &CheckedTypes, issues: &mut Issues) {
        crate::cel::parse::walk(parsed.expr(), |e| {
            let Some((format, elements)) = constant_format_call(e) else {
                return;
            };
            let mut checker = ClauseChecker {
                elements,
                types,
                args_requested: 0,
                current: 0,
            };
            match parse_format_string(format.as_bytes(), &mut checker) {
                Err(err) => {
                    let id = err.expr_id.unwrap_or(e.id);
                    issues.report(parsed.location(id), id, err.message);
                }
                Ok(()) => {
                    if elements.len() > checker.args_requested {
                        issues.report(
                            parsed.location(e.id),
                            e.id,
                            format!(
                                "too many arguments supplied to string.format (expected {}, got {})",
                                checker.args_requested,
                                elements.len()
                            ),
                        );
                    }
                }
            }
        });
    }
}

/// cel-go `matchConstantFormatStringWithListLiteralArgs`: a member call `format` whose
/// target is a string literal and whose single argument is a list literal. (cel-go also
/// requires the resolved overload to be `string_format`; with a string literal receiver it
/// is the only `format` overload that can match.)
fn constant_format_call(e: &IdedExpr) -> Option<(&str, &[IdedExpr])> {
    let Expr::Call(call) = &e.expr else {
        return None;
    };
    if call.func_name != "format" || call.args.len() != 1 {
        return None;
    }
    let target = call.target.as_deref()?;
    let Expr::Literal(LiteralValue::String(s)) = &target.expr else {
        return None;
    };
    let Expr::List(list) = &call.args.first()?.expr else {
        return None;
    };
    Some((s.as_ref(), &list.elements))
}

/// An error of the format-string check: the message and the node it is reported at (`None`:
/// the `format` call itself).
struct FormatError {
    expr_id: Option<u64>,
    message: String,
}

impl FormatError {
    fn at_call(message: String) -> Self {
        Self {
            expr_id: None,
            message,
        }
    }
}

/// cel-go `stringFormatChecker`: checks the clause types against the deduced element types.
struct ClauseChecker<'a> {
    elements: &'a [IdedExpr],
    types: &'a CheckedTypes,
    args_requested: usize,
    current: usize,
}

#[derive(Clone, Copy)]
enum Clause {
    String,
    Decimal,
    Fixed,
    Scientific,
    Binary,
    Hex,
    Octal,
}

impl ClauseChecker<'_> {
    fn type_of(&self, id: u64) -> Type {
        self.types
            .type_of(id)
            .cloned()
            .unwrap_or_else(Type::dyn_type)
    }

    /// cel-go `verifyTypeOneOf`: `dyn` passes, otherwise the kinds must match.
    fn one_of(&self, id: u64, kinds: &[Kind]) -> bool {
        let t = self.type_of(id);
        t.kind() == Kind::Dyn || kinds.contains(&t.kind())
    }

    /// cel-go `verifyString`: lists and maps are checked element by element when they are
    /// literals. Returns the id of the first offending node.
    fn verify_string(&self, e: &IdedExpr) -> Result<(), u64> {
        const STRINGABLE: &[Kind] = &[
            Kind::List,
            Kind::Map,
            Kind::Int,
            Kind::Uint,
            Kind::Double,
            Kind::Bool,
            Kind::String,
            Kind::Timestamp,
            Kind::Bytes,
            Kind::Duration,
            Kind::Type,
            Kind::Null,
        ];
        // Iterative over nested literals, in cel-go's visiting order.
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            if !self.one_of(e.id, STRINGABLE) {
                return Err(e.id);
            }
            match &e.expr {
                Expr::List(l) => stack.extend(l.elements.iter().rev()),
                Expr::Map(m) => {
                    for entry in m.entries.iter().rev() {
                        if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                            stack.push(&me.value);
                            stack.push(&me.key);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn check(&self, clause: Clause) -> Result<(), FormatError> {
        let Some(arg) = self.elements.get(self.current) else {
            return Ok(());
        };
        let id = arg.id;
        let type_name = |id: u64| self.type_of(id).type_name().to_string();
        // cel-go ext/formatting.go *FormatError helpers.
        let fail = |id: u64, text: &str| {
            Err(FormatError {
                expr_id: Some(id),
                message: format!(
                    "error during formatting: {text}, was given {}",
                    type_name(id)
                ),
            })
        };
        match clause {
            Clause::String => match self.verify_string(arg) {
                Ok(()) => Ok(()),
                Err(bad) => fail(
                    bad,
                    "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps",
                ),
            },
            Clause::Decimal if !self.one_of(id, &[Kind::Int, Kind::Uint]) => {
                fail(id, "decimal clause can only be used on integers")
            }
            Clause::Fixed if !self.one_of(id, &[Kind::Double, Kind::String]) => {
                fail(id, "fixed-point clause can only be used on doubles")
            }
            Clause::Scientific if !self.one_of(id, &[Kind::Double, Kind::String]) => {
                fail(id, "scientific clause can only be used on doubles")
            }
            Clause::Binary if !self.one_of(id, &[Kind::Int, Kind::Uint, Kind::Bool]) => {
                fail(id, "only integers and bools can be formatted as binary")
            }
            Clause::Hex
                if !self.one_of(id, &[Kind::Int, Kind::Uint, Kind::String, Kind::Bytes]) =>
            {
                fail(
                    id,
                    "only integers, byte buffers, and strings can be formatted as hex",
                )
            }
            Clause::Octal if !self.one_of(id, &[Kind::Int, Kind::Uint]) => {
                fail(id, "octal clause can only be used on integers")
            }
            _ => Ok(()),
        }
    }
}

/// cel-go `parseFormatString` with the checker as interpolator (bytes, as Go indexes the
/// string).
fn parse_format_string(s: &[u8], checker: &mut ClauseChecker<'_>) -> Result<(), FormatError> {
    let mut i = 0;
    let mut arg_index = 0usize;
    while i < s.len() {
        if s[i] != b'%' {
            i += 1;
            continue;
        }
        if s.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        // stringFormatChecker.Arg
        checker.args_requested += 1;
        checker.current = arg_index;
        if i + 1 >= s.len() {
            return Err(FormatError::at_call("unexpected end of string".to_string()));
        }
        if arg_index >= checker.elements.len() {
            return Err(FormatError::at_call(format!(
                "index {arg_index} out of range"
            )));
        }
        let (read, clause) = parse_clause(&s[i + 1..])
            .map_err(|m| FormatError::at_call(format!("could not parse formatting clause: {m}")))?;
        checker.check(clause)?;
        i += 1 + read;
        arg_index += 1;
    }
    Ok(())
}

/// cel-go `parseFormattingClause` + `parsePrecision` (no precision limit below strings
/// version 5). Returns the bytes read and the clause.
fn parse_clause(s: &[u8]) -> Result<(usize, Clause), String> {
    let mut i = 0;
    if s.first() == Some(&b'.') {
        i = 1;
        let start = i;
        loop {
            match s.get(i) {
                None => {
                    return Err(
                        "error while parsing precision: could not find end of precision specifier"
                            .to_string(),
                    );
                }
                Some(c) if c.is_ascii_digit() => i += 1,
                Some(_) => break,
            }
        }
        let digits = std::str::from_utf8(&s[start..i]).unwrap_or("");
        if let Some(e) = go_atoi_error(digits) {
            return Err(format!(
                "error while parsing precision: error while converting precision to integer: {e}"
            ));
        }
    }
    let Some(&c) = s.get(i) else {
        return Err(
            "error while parsing precision: could not find end of precision specifier".to_string(),
        );
    };
    let clause = match c {
        b's' => Clause::String,
        b'd' => Clause::Decimal,
        b'f' => Clause::Fixed,
        b'e' => Clause::Scientific,
        b'b' => Clause::Binary,
        b'x' | b'X' => Clause::Hex,
        b'o' => Clause::Octal,
        // Go formats the byte as a rune with %c.
        other => {
            return Err(format!(
                "unrecognized formatting clause \"{}\"",
                char::from(other)
            ));
        }
    };
    Ok((i + 1, clause))
}

/// The error Go's `strconv.Atoi` returns for a string of ASCII digits, if any.
fn go_atoi_error(digits: &str) -> Option<String> {
    if digits.is_empty() {
        return Some("strconv.Atoi: parsing \"\": invalid syntax".to_string());
    }
    if digits.parse::<i64>().is_err() {
        return Some(format!(
            "strconv.Atoi: parsing \"{digits}\": value out of range"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clause_parsing() {
        assert!(matches!(parse_clause(b"s"), Ok((1, Clause::String))));
        assert!(matches!(parse_clause(b".3f"), Ok((3, Clause::Fixed))));
        assert_eq!(
            parse_clause(b".3").err().as_deref(),
            Some("error while parsing precision: could not find end of precision specifier")
        );
        assert_eq!(
            parse_clause(b"z").err().as_deref(),
            Some("unrecognized formatting clause \"z\"")
        );
        assert_eq!(
            parse_clause(b".f").err().as_deref(),
            Some(
                "error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax"
            )
        );
        assert_eq!(
            parse_clause("é".as_bytes()).err().as_deref(),
            Some("unrecognized formatting clause \"Ã\"")
        );
        assert!(go_atoi_error("99999999999999999999").is_some());
        assert!(go_atoi_error("0012").is_none());
    }
}
