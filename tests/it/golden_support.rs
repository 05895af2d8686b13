//! Shared by the tests that replay the oracle's `tests/golden/upstream-exprs-1.37.jsonl`.

/// Messages produced by cel-go's parser: cases whose expected text holds one are left to
/// `src/cel/`'s own golden test.
pub const PARSER_MESSAGES: &[&str] = &[
    "Syntax error",
    "max recursion depth exceeded",
    "invalid int literal",
    "invalid uint literal",
    "invalid double literal",
    "invalid unicode code point",
    "unsupported ident kind",
    "unsupported syntax",
    "reserved identifier",
];

/// Every line of `tests/golden/upstream-exprs-1.37.jsonl`.
pub fn golden() -> Vec<serde_json::Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/upstream-exprs-1.37.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("golden file is committed");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}
