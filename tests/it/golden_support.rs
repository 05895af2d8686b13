//! Shared by the tests that replay the oracle's `tests/golden/upstream-exprs-1.37.jsonl`.

/// Messages produced by cel-go's parser. Cases whose expected text holds one are compared
/// like the others, but counted apart ([`Tally`]): the `cel` crate's ANTLR parser recovers from
/// some syntax errors in another parser state than cel-go's and then lists other expected
/// tokens, a known gap of vapcheck's parser (docs/cel-checker.md).
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

/// `text` with the token list after ` expecting ` cut from every line.
pub fn without_expected_tokens(text: &str) -> String {
    text.split('\n')
        .map(|line| match line.find(" expecting ") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The outcome of the comparisons of one golden replay, with every case counted: cases
/// identical to upstream, cases whose expected text is a parser message and that are
/// identical, or identical but for the expected tokens of a syntax error, and the differences.
#[derive(Debug, Default)]
pub struct Tally {
    pub identical: usize,
    pub parser_identical: usize,
    pub parser_expected_tokens_only: usize,
    /// Cases of [`KNOWN_PARSER_DIFFERENCES`] that differ as listed.
    pub known: Vec<String>,
    pub mismatches: Vec<String>,
}

/// Golden cases (ids of `tests/golden/upstream-exprs-1.37.jsonl`, with the `std-`/`vap-`
/// prefix cut) whose parser message differs from cel-go's, with the reason. Each replay that
/// meets them counts them apart and asserts exactly which ones differ: a fixed case fails
/// until it is removed here, a new difference fails as any other.
pub const KNOWN_PARSER_DIFFERENCES: &[(&str, &str)] = &[
    (
        "1",
        "the empty expression: cel-go's ANTLR runtime reports the missing token at column -1 \
         (printed `<input>:1:0`) and prints no snippet for an empty source; the `cel` crate's \
         runtime reports column 0",
    ),
    (
        "58",
        "`object.?`: the `cel` crate reports `unsupported ident kind` at the `.?` (column 7), \
         cel-go at the end of input after the syntax error (column 9), so the order differs",
    ),
];

impl Tally {
    /// Counts one case: `want` is upstream's text, `got` ours; `same` says whether the whole
    /// outcome (text and type) is equal; `describe` names the case for a difference.
    pub fn add(
        &mut self,
        id: &str,
        want: &str,
        got: &str,
        same: bool,
        describe: impl FnOnce() -> String,
    ) {
        let parser = PARSER_MESSAGES.iter().any(|m| want.contains(m));
        let number = id.rsplit('-').next().unwrap_or(id);
        if !same && parser && KNOWN_PARSER_DIFFERENCES.iter().any(|(n, _)| *n == number) {
            self.known.push(id.to_owned());
            return;
        }
        if same {
            if parser {
                self.parser_identical += 1;
            } else {
                self.identical += 1;
            }
        } else if parser && without_expected_tokens(want) == without_expected_tokens(got) {
            self.parser_expected_tokens_only += 1;
        } else {
            self.mismatches.push(describe());
        }
    }

    /// Every case counted.
    pub fn compared(&self) -> usize {
        self.identical
            + self.parser_identical
            + self.parser_expected_tokens_only
            + self.known.len()
            + self.mismatches.len()
    }

    /// Prints the counts and asserts them: exactly `expected` = (identical, parser cases
    /// identical, parser cases identical but for expected tokens), exactly the `known` cases
    /// of [`KNOWN_PARSER_DIFFERENCES`] differing, and no other difference.
    pub fn assert(&self, what: &str, expected: (usize, usize, usize), known: &[&str]) {
        println!(
            "{what}: compared {} cases: {} identical, {} parser cases identical, {} parser \
             cases identical but for the expected tokens of a syntax error, {} known parser \
             differences ({}), {} differ",
            self.compared(),
            self.identical,
            self.parser_identical,
            self.parser_expected_tokens_only,
            self.known.len(),
            self.known.join(", "),
            self.mismatches.len()
        );
        assert_eq!(self.known, known, "{what}: known parser differences met");
        for m in &self.mismatches {
            println!("{m}");
        }
        assert!(
            self.mismatches.is_empty(),
            "{what}: {} of {} cases differ:\n{}",
            self.mismatches.len(),
            self.compared(),
            self.mismatches.join("\n")
        );
        assert_eq!(
            (
                self.identical,
                self.parser_identical,
                self.parser_expected_tokens_only
            ),
            expected,
            "{what}: (identical, parser identical, parser expected tokens only)"
        );
    }
}

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
