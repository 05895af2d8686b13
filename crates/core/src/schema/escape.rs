//! Property-name escaping: how an OpenAPI property name becomes a CEL field name.
//!
//! Mirrors `Escape` in k8s.io/apiserver v0.37.1 `pkg/cel/escaping.go`:
//! - an empty name, or one that starts with an ASCII digit, is not exposed;
//! - a name equal to a CEL reserved word becomes `__<word>__`;
//! - otherwise every character must be in `[A-Za-z0-9_./-]` (anything else: not exposed), and,
//!   scanning left to right with non-overlapping matches, `__` becomes `__underscores__`, `.`
//!   becomes `__dot__`, `-` becomes `__dash__` and `/` becomes `__slash__`.

/// Words reserved by the CEL grammar that cannot be field names (escaping.go
/// `celReservedSymbols`).
pub const CEL_RESERVED_SYMBOLS: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether `word` is one of [`CEL_RESERVED_SYMBOLS`].
pub fn is_reserved(word: &str) -> bool {
    CEL_RESERVED_SYMBOLS.contains(&word)
}

/// Escapes an OpenAPI property name into the CEL identifier upstream exposes it as, or `None`
/// when upstream does not expose the property at all.
pub fn escape(name: &str) -> Option<String> {
    let first = *name.as_bytes().first()?;
    if first.is_ascii_digit() {
        return None;
    }
    if is_reserved(name) {
        return Some(format!("__{name}__"));
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/');
    if !name.bytes().all(allowed) {
        // Non-ASCII characters also end up here: every byte of a multi-byte UTF-8 sequence is
        // >= 0x80 and therefore not allowed, exactly like the rune check upstream.
        return None;
    }
    let bytes = name.as_bytes();
    let needs_rewrite = bytes.iter().any(|b| matches!(b, b'.' | b'-' | b'/'))
        || bytes.windows(2).any(|w| w == b"__");
    if !needs_rewrite {
        return Some(name.to_owned());
    }
    let mut out = String::with_capacity(name.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' && bytes.get(i + 1) == Some(&b'_') {
            out.push_str("__underscores__");
            i += 2;
            continue;
        }
        match bytes[i] {
            b'.' => out.push_str("__dot__"),
            b'-' => out.push_str("__dash__"),
            b'/' => out.push_str("__slash__"),
            b => out.push(char::from(b)),
        }
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_unchanged() {
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
        assert_eq!(escape("_a_b_").as_deref(), Some("_a_b_"));
        assert_eq!(escape("A9").as_deref(), Some("A9"));
        assert_eq!(escape("_").as_deref(), Some("_"));
    }

    #[test]
    fn empty_and_leading_digit_are_hidden() {
        assert_eq!(escape(""), None);
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("9"), None);
    }

    #[test]
    fn reserved_words_are_wrapped() {
        for word in CEL_RESERVED_SYMBOLS {
            assert_eq!(escape(word), Some(format!("__{word}__")), "{word}");
        }
        // Only exact matches: prefixes and other cases are plain identifiers.
        assert_eq!(escape("namespaces").as_deref(), Some("namespaces"));
        assert_eq!(escape("Namespace").as_deref(), Some("Namespace"));
        // Words reserved elsewhere in CEL but not in this list stay as they are.
        assert_eq!(escape("int").as_deref(), Some("int"));
    }

    #[test]
    fn separators_are_spelled_out() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("x__y").as_deref(), Some("x__underscores__y"));
        assert_eq!(escape("___a").as_deref(), Some("__underscores___a"));
        assert_eq!(
            escape("____").as_deref(),
            Some("__underscores____underscores__")
        );
        assert_eq!(escape("-").as_deref(), Some("__dash__"));
        assert_eq!(
            escape("app.kubernetes.io/name").as_deref(),
            Some("app__dot__kubernetes__dot__io__slash__name")
        );
        // A leading separator is fine (only digits are refused up front).
        assert_eq!(escape(".x").as_deref(), Some("__dot__x"));
    }

    #[test]
    fn other_characters_hide_the_property() {
        for name in [
            "a b", "a:b", "a@b", "$ref", "café", "a+b", "a~b", "x-ü", "a\u{0}",
        ] {
            assert_eq!(escape(name), None, "{name:?}");
        }
    }
}
