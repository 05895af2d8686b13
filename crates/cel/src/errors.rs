//! Sources, locations and error display exactly as cel-go v0.29.2 (`common/source.go`,
//! `common/error.go`, `common/errors.go`).

use std::fmt;
use std::sync::Arc;

/// The text of an expression with precomputed line starts, as cel-go's `common.Source`.
/// Locations are in code points, lines are split on `\n` only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    text: String,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
    description: String,
}

/// A position in a source: 1-based line, 0-based code-point column (cel-go `common.Location`).
/// `None` in an error means cel-go's `NoLocation` (displayed as line -1, column 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 0-based column in code points.
    pub column: usize,
}

impl Source {
    /// A source for `text` described as `<input>` (cel-go `common.NewTextSource`).
    pub fn new(text: &str) -> Self {
        Self::with_description(text, "<input>")
    }

    /// A source with a custom description.
    pub fn with_description(text: &str, description: &str) -> Self {
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        Self {
            text: text.to_string(),
            line_starts,
            description: description.to_string(),
        }
    }

    /// The full text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The description used in error headers (`<input>`).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The location of a UTF-8 byte offset (clamped to the text; a non-boundary offset is
    /// moved back to the previous character boundary).
    pub fn location_of_byte(&self, byte: usize) -> Location {
        let mut byte = byte.min(self.text.len());
        while !self.text.is_char_boundary(byte) {
            byte -= 1;
        }
        let line_idx = match self.line_starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let start = self.line_starts.get(line_idx).copied().unwrap_or(0);
        let column = self.text.get(start..byte).map_or(0, |s| s.chars().count());
        Location {
            line: line_idx + 1,
            column,
        }
    }

    /// The text of 1-based line `line` without its newline (cel-go `Source.Snippet`).
    pub fn snippet(&self, line: usize) -> Option<&str> {
        if line == 0 {
            return None;
        }
        let start = *self.line_starts.get(line - 1)?;
        let end = match self.line_starts.get(line) {
            Some(next) => next - 1,
            None => self.text.len(),
        };
        self.text.get(start..end)
    }
}

/// One error: message, optional location and the id of the expression node it concerns
/// (0 when none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CelError {
    /// Where the error is; `None` is cel-go's `NoLocation`.
    pub location: Option<Location>,
    /// The message, e.g. `undefined field 'foo'`.
    pub message: String,
    /// The expression id, or 0.
    pub expr_id: u64,
}

/// cel-go common/error.go: maxSnippetLength.
const MAX_SNIPPET_LENGTH: usize = 16384;

impl CelError {
    /// cel-go `Error.ToDisplayString`.
    pub fn to_display_string(&self, source: &Source) -> String {
        let (line, column) = match self.location {
            Some(l) => (l.line as i64, l.column as i64),
            None => (-1, -1),
        };
        let mut out = format!(
            "ERROR: {}:{}:{}: {}",
            source.description(),
            line,
            column + 1,
            self.message
        );
        let snippet = self.location.and_then(|l| source.snippet(l.line));
        if let (Some(snippet), Some(loc)) = (snippet, self.location)
            && snippet.len() <= MAX_SNIPPET_LENGTH
        {
            {
                let snippet = snippet.replace('\t', " ");
                out.push_str("\n | ");
                out.push_str(&snippet);
                out.push_str("\n | ");
                let mut chars = snippet.chars();
                for _ in 0..loc.column {
                    match chars.next() {
                        Some(c) if c.len_utf8() > 1 => out.push('\u{ff0e}'),
                        Some(_) => out.push('.'),
                        None => break,
                    }
                }
                match chars.next() {
                    Some(c) if c.len_utf8() > 1 => out.push('\u{ff3e}'),
                    _ => out.push('^'),
                }
            }
        }
        out
    }
}

/// cel-go `common.Errors`: at most 100 errors are kept; the total count is remembered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issues {
    source: Arc<Source>,
    errors: Vec<CelError>,
    num_errors: usize,
}

/// cel-go common/errors.go: maxErrorsToReport.
pub const MAX_ERRORS_TO_REPORT: usize = 100;

impl Issues {
    /// An empty error set for `source`.
    pub fn new(source: Arc<Source>) -> Self {
        Self {
            source,
            errors: Vec::new(),
            num_errors: 0,
        }
    }

    /// Records an error (dropped, but counted, beyond the first 100).
    pub fn report(&mut self, location: Option<Location>, expr_id: u64, message: String) {
        self.num_errors += 1;
        if self.num_errors > MAX_ERRORS_TO_REPORT {
            return;
        }
        self.errors.push(CelError {
            location,
            message,
            expr_id,
        });
    }

    /// The kept errors in report order.
    pub fn errors(&self) -> &[CelError] {
        &self.errors
    }

    /// The number of errors reported (including truncated ones).
    pub fn num_errors(&self) -> usize {
        self.num_errors
    }

    /// Whether no error was reported.
    pub fn is_empty(&self) -> bool {
        self.num_errors == 0
    }

    /// The source the errors refer to.
    pub fn source(&self) -> &Arc<Source> {
        &self.source
    }

    /// The errors cel-go prints, in its order (stable sort by line and column, at most 100),
    /// each with its block, and the line it adds when it dropped some (`N more errors were
    /// truncated`): the parts of [`Issues::to_display_string`], for callers that keep them as
    /// data.
    pub fn display_blocks(&self) -> (Vec<(&CelError, String)>, Option<String>) {
        let mut sorted: Vec<&CelError> = self.errors.iter().collect();
        let key = |e: &CelError| match e.location {
            Some(l) => (l.line as i64, l.column as i64),
            None => (-1, -1),
        };
        sorted.sort_by_key(|e| key(e));
        let blocks = sorted
            .into_iter()
            .take(MAX_ERRORS_TO_REPORT)
            .map(|e| (e, e.to_display_string(&self.source)))
            .collect();
        let trailer = (self.num_errors > MAX_ERRORS_TO_REPORT).then(|| {
            format!(
                "{} more errors were truncated",
                self.num_errors - MAX_ERRORS_TO_REPORT
            )
        });
        (blocks, trailer)
    }

    /// cel-go `Errors.ToDisplayString`: stable sort by (line, column), one block per error,
    /// joined by newlines, plus `N more errors were truncated` when over 100.
    pub fn to_display_string(&self) -> String {
        let (blocks, trailer) = self.display_blocks();
        let mut parts: Vec<String> = blocks.into_iter().map(|(_, b)| b).collect();
        parts.extend(trailer);
        parts.join("\n")
    }
}

impl fmt::Display for Issues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_display_string())
    }
}

impl std::error::Error for Issues {}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str, byte: usize, msg: &str) -> String {
        let s = Source::new(src);
        let e = CelError {
            location: Some(s.location_of_byte(byte)),
            message: msg.into(),
            expr_id: 0,
        };
        e.to_display_string(&s)
    }

    #[test]
    fn display_ascii() {
        assert_eq!(
            err("object.replicas", 6, "undefined field 'replicas'"),
            "ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas\n | ......^"
        );
    }

    #[test]
    fn display_wide_and_tab() {
        // 'é' is two bytes: the dots before it are wide, the caret on it is wide.
        let src = "'é'\t+ x";
        assert_eq!(
            err(src, 1, "m"),
            "ERROR: <input>:1:2: m\n | 'é' + x\n | .＾"
        );
        // `x` is at byte 7 (code point 6).
        assert_eq!(
            err(src, 7, "m"),
            "ERROR: <input>:1:7: m\n | 'é' + x\n | .．....^"
        );
    }

    #[test]
    fn display_multiline_and_no_location() {
        assert_eq!(
            err("a &&\n  b", 7, "m"),
            "ERROR: <input>:2:3: m\n |   b\n | ..^"
        );
        let s = Arc::new(Source::new("x"));
        let mut issues = Issues::new(s);
        issues.report(None, 0, "boom".into());
        assert_eq!(issues.to_display_string(), "ERROR: <input>:-1:0: boom");
    }

    #[test]
    fn truncation_after_100() {
        let s = Arc::new(Source::new("x"));
        let mut issues = Issues::new(s.clone());
        for _ in 0..103 {
            issues.report(Some(Location { line: 1, column: 0 }), 1, "e".into());
        }
        let text = issues.to_display_string();
        assert_eq!(text.lines().filter(|l| l.starts_with("ERROR")).count(), 100);
        assert!(text.ends_with("\n3 more errors were truncated"));
    }
}
