//! Code actions on the findings of the last check (quick fixes): the runtime-safety rewrite
//! `check` already computed (the `fixes` of its SARIF output, [`crate::finding::FileFix`]),
//! "did you mean" for an undefined field (the nearest field name of the schema type reached,
//! [`nearest`]), and a `# vapcheck:ignore RULE` comment ([`crate::suppress`]). The pieces
//! here are pure; the server (`super::Server::code_actions`) gathers what they need.

use std::collections::HashMap;

use lsp_types::{CodeAction, CodeActionKind, CodeActionOrCommand, Diagnostic, Range, TextEdit};

/// A quick fix of `diagnostic`: `edits` of the file at `uri`.
pub fn quick_fix(
    title: String,
    diagnostic: &Diagnostic,
    uri: &lsp_types::Uri,
    edits: Vec<TextEdit>,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: Some(vec![diagnostic.clone()]),
        edit: Some(lsp_types::WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), edits)])),
            ..lsp_types::WorkspaceEdit::default()
        }),
        ..CodeAction::default()
    })
}

/// Whether two ranges share a position (touching ends count: a cursor just after a word is
/// on it).
pub fn overlaps(a: Range, b: Range) -> bool {
    let key = |p: lsp_types::Position| (p.line, p.character);
    key(a.start) <= key(b.end) && key(b.start) <= key(a.end)
}

/// The field name of cel-go's type-checking error `undefined field 'NAME'` in a finding's
/// message (cel-go v0.30.0, `checker/checker.go` `lookupFieldType` → `checker/errors.go`
/// `undefinedField`).
pub fn undefined_field(message: &str) -> Option<&str> {
    const MARK: &str = "undefined field '";
    let rest = &message[message.find(MARK)? + MARK.len()..];
    let name = &rest[..rest.find('\'')?];
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident.then_some(name)
}

/// The edit distance of two names: insertions, deletions, substitutions and swaps of two
/// neighbouring characters, each 1 (the optimal string alignment distance).
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // rows[i][j]: the distance of a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

/// The names nearest to `word` among `names`, when close enough to be a typo of it: at most
/// 2 edits, and at most one per 3 characters of `word` (so `sise` → `size`, `replicsa` →
/// `replicas`, but nothing for a short word unlike every name). Ties are all kept, sorted.
pub fn nearest<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let limit = (word.chars().count() / 3).clamp(1, 2);
    let mut best: Option<usize> = None;
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if name == word {
            continue;
        }
        let d = distance(word, name);
        if d > limit {
            continue;
        }
        match best {
            Some(b) if d > b => {}
            Some(b) if d == b => out.push(name.to_owned()),
            _ => {
                best = Some(d);
                out = vec![name.to_owned()];
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The text that suppresses `rule` on line `line` (1-based) of `text`: a comment line
/// `# vapcheck:ignore RULE` with that line's indentation, inserted before it (a comment alone
/// on its line covers the line below, `suppress::Comment::covers_line`). `None` past the
/// text's last line.
pub fn suppression_line(text: &str, line: usize, rule: &str) -> Option<String> {
    let l = text.split('\n').nth(line.checked_sub(1)?)?;
    let indent: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    Some(format!(
        "{indent}# {} {rule}\n",
        crate::suppress::COMMENT_DIRECTIVE
    ))
}

/// `text` with `insert` at the start of line `line` (1-based); `None` past its last line.
pub fn insert_at_line(text: &str, line: usize, insert: &str) -> Option<String> {
    let mut start = 0usize;
    for _ in 1..line {
        start += text[start..].find('\n')? + 1;
    }
    Some(format!("{}{insert}{}", &text[..start], &text[start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names_within_the_limit() {
        assert_eq!(distance("replicsa", "replicas"), 1);
        assert_eq!(distance("sise", "size"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        let fields = ["replicas", "paused", "selector", "strategy", "template"];
        assert_eq!(nearest("replicsa", fields), ["replicas"]);
        assert_eq!(nearest("replicas", fields), Vec::<String>::new());
        assert_eq!(nearest("stratgey", fields), ["strategy"]);
        // Too far: nothing rather than a guess.
        assert_eq!(nearest("image", fields), Vec::<String>::new());
        assert_eq!(nearest("ab", ["a", "b", "abc", "xy"]), ["a", "abc", "b"]);
    }

    #[test]
    fn the_undefined_field_of_a_message() {
        assert_eq!(
            undefined_field("ERROR: <input>:1:12: undefined field 'replicsa'\n | x"),
            Some("replicsa")
        );
        assert_eq!(
            undefined_field("found no matching overload for '_==_'"),
            None
        );
        assert_eq!(undefined_field("undefined field 'a b'"), None);
        assert_eq!(undefined_field("undefined field '"), None);
    }

    #[test]
    fn suppression_lines_keep_the_indentation() {
        let text = "a:\n  - x: 1\n\tb: 2\n";
        assert_eq!(
            suppression_line(text, 2, "VAP100").as_deref(),
            Some("  # vapcheck:ignore VAP100\n")
        );
        assert_eq!(
            suppression_line(text, 3, "VAP110").as_deref(),
            Some("\t# vapcheck:ignore VAP110\n")
        );
        assert_eq!(suppression_line(text, 9, "VAP100"), None);
        assert_eq!(suppression_line(text, 0, "VAP100"), None);
        assert_eq!(
            insert_at_line(text, 2, "# c\n").as_deref(),
            Some("a:\n# c\n  - x: 1\n\tb: 2\n")
        );
        assert_eq!(
            insert_at_line(text, 1, "# c\n").as_deref(),
            Some("# c\na:\n  - x: 1\n\tb: 2\n")
        );
        assert_eq!(insert_at_line("a", 5, "x"), None);
    }
}
