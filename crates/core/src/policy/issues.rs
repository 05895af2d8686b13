//! The issues of one expression, as data: what the parser and checker found, each with its
//! position, message and severity, and its text exactly as cel-go's `issues.String()` prints
//! it. Produced structured by the checker backends and kept so through the policy layer:
//! narrowing, rendering and the CI formats read the fields, nothing parses the text back.
//! Upstream's text is rendered from them ([`Issues::render`]), byte for byte. The policy layer
//! reads the checker's issues ([`crate::cel::Issues`]) directly: the checker is the layer
//! below it.

use super::narrowing::Pos;
use crate::cel;

/// What an issue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// cel-go's errors (`ERROR: <input>:L:C: ...`), and messages without a position (`must
    /// evaluate to bool but got int`, an expression too deep to check).
    Error,
    /// vapcheck's notes in cel-go's layout (`WARNING: <input>:L:C: ...`): a function newer
    /// than the target Kubernetes version.
    Warning,
}

/// One issue of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Error or warning.
    pub severity: Severity,
    /// Its position in the expression, when it has one (cel-go's `NoLocation` has none).
    pub pos: Option<Pos>,
    /// The message alone, e.g. `undefined field 'replicas'`.
    pub message: String,
    /// The block as cel-go prints it: `ERROR: <input>:1:7: <message>` with the source line and
    /// the caret line, or the bare message for issues without a position.
    pub text: String,
}

impl Issue {
    /// An error that is its message alone (`must evaluate to bool but got int`).
    pub fn plain(message: impl Into<String>) -> Issue {
        let message = message.into();
        Issue {
            severity: Severity::Error,
            pos: None,
            text: message.clone(),
            message,
        }
    }

    /// Whether the issue is an error with a position in the expression.
    pub fn is_positioned_error(&self) -> bool {
        self.severity == Severity::Error && self.pos.is_some()
    }
}

/// The issues of one expression for one kind, in the order cel-go prints them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Issues(pub Vec<Issue>);

impl Issues {
    /// One issue.
    pub fn one(issue: Issue) -> Issues {
        Issues(vec![issue])
    }

    /// cel-go's `issues.String()`: the blocks joined by newlines.
    pub fn render(&self) -> String {
        let texts: Vec<&str> = self.0.iter().map(|i| i.text.as_str()).collect();
        texts.join("\n")
    }

    /// The issues.
    pub fn iter(&self) -> std::slice::Iter<'_, Issue> {
        self.0.iter()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// From the blocks of a parser or checker report, in report order: `(severity, position,
    /// message, text)`, and the line cel-go adds after the blocks when it dropped some (`N
    /// more errors were truncated`), which stays with the last issue (in its text), so that
    /// the issue kept or dropped keeps or drops it too, as cel-go's text reads.
    pub fn from_blocks(
        blocks: impl IntoIterator<Item = (Severity, Option<Pos>, String, String)>,
        trailer: Option<String>,
    ) -> Issues {
        let mut out: Vec<Issue> = blocks
            .into_iter()
            .map(|(severity, pos, message, text)| Issue {
                severity,
                pos,
                message,
                text,
            })
            .collect();
        if let Some(t) = trailer {
            match out.last_mut() {
                Some(last) => {
                    last.text.push('\n');
                    last.text.push_str(&t);
                }
                None => out.push(Issue::plain(t)),
            }
        }
        Issues(out)
    }
}

impl Issues {
    /// The errors of the CEL parser or checker ([`cel::Issues`]), in cel-go's order and text.
    pub fn from_cel(issues: &cel::Issues) -> Issues {
        let (blocks, trailer) = issues.display_blocks();
        Issues::from_blocks(
            blocks.into_iter().map(|(e, text)| {
                (
                    Severity::Error,
                    e.location.map(|l| Pos {
                        line: l.line,
                        column: l.column,
                    }),
                    e.message.clone(),
                    text,
                )
            }),
            trailer,
        )
    }
}

impl std::fmt::Display for Issues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl<'a> IntoIterator for &'a Issues {
    type Item = &'a Issue;
    type IntoIter = std::slice::Iter<'a, Issue>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
