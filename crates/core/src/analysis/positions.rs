//! Where a finding is in the source file: the line and column of a YAML or JSON scalar, and of
//! each character of its value, so that a CEL error at `<input>:L:C` (line and code-point
//! column within the expression) is reported at the file's line and column of that character.
//!
//! Pure. The scalar is found by parsing the document again with spans (serde-saphyr's
//! `Spanned`); its value is then decoded from the source text by the scalar's style (plain,
//! single-quoted, double-quoted with escapes, literal `|`, folded `>`), recording for every
//! decoded character the position of the source character it came from. The decoding is only
//! trusted when it reproduces the parsed value exactly; otherwise every character maps to the
//! scalar's start (less precise, never wrong).

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

pub use crate::finding::Position;

/// A YAML/JSON tree with the location of every node.
#[derive(Debug)]
enum Tree {
    Map(Vec<(String, Spanned<Tree>)>),
    Seq(Vec<Spanned<Tree>>),
    Str(String),
    Other,
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Tree, E> {
        Ok(Tree::Str(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Tree, E> {
        Ok(Tree::Str(v))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Tree, E> {
        Ok(Tree::Other)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Tree, D::Error> {
        Tree::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Tree>>()? {
            items.push(item);
        }
        Ok(Tree::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Key>()? {
            let value = map.next_value::<Spanned<Tree>>()?;
            entries.push((key.0, value));
        }
        Ok(Tree::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tree, D::Error> {
        d.deserialize_any(TreeVisitor)
    }
}

/// A mapping key of any scalar type, as text.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        match Tree::deserialize(d)? {
            Tree::Str(s) => Ok(Key(s)),
            _ => Ok(Key(String::new())),
        }
    }
}

/// One step of a field path: `spec`, `validations`, `[0]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Parses a fieldRef such as `spec.validations[0].expression` (keys never contain `.` or
/// `[` in the paths vapcheck reports).
pub fn parse_path(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Step::Key(key.to_owned()));
        }
        for idx in rest.split('[') {
            if let Ok(n) = idx.trim_end_matches(']').parse::<usize>() {
                out.push(Step::Index(n));
            }
        }
    }
    out
}

/// The located value of one scalar: the position of each of its characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarPositions {
    /// Where the scalar starts (its first indicator or character).
    pub start: Position,
    /// For each character of the value (code points), its position in the source; empty when
    /// the value could not be mapped character by character (then use `start`).
    pub chars: Vec<Position>,
}

impl ScalarPositions {
    /// The position of the value's character at `index` (code points), or of the scalar when
    /// that is not known. An index one past the end (an error at end of input) maps after the
    /// last character.
    pub fn at(&self, index: usize) -> Position {
        if let Some(p) = self.chars.get(index) {
            return *p;
        }
        match self.chars.last() {
            Some(last) if index == self.chars.len() => Position {
                line: last.line,
                column: last.column + 1,
            },
            _ => self.start,
        }
    }

    /// The position of the CEL location `line:column` (1-based line, 1-based code-point
    /// column, as cel-go prints `<input>:L:C`) within the value `text`.
    pub fn at_cel(&self, text: &str, line: usize, column: usize) -> Position {
        let mut index = 0usize;
        let mut current = 1usize;
        for c in text.chars() {
            if current == line {
                break;
            }
            index += 1;
            if c == '\n' {
                current += 1;
            }
        }
        self.at(index + column.saturating_sub(1))
    }
}

/// Finds the scalar at `path` in the document `text` (the document's text, padded with blank
/// lines so that its lines are the file's lines) and maps its characters.
pub fn locate(text: &str, path: &[Step]) -> Option<(ScalarPositions, String)> {
    SpannedDocument::parse(text)?.locate(path)
}

/// A document parsed once with the location of every node, for looking up many paths.
pub struct SpannedDocument<'a> {
    text: &'a str,
    root: Spanned<Tree>,
}

impl<'a> SpannedDocument<'a> {
    /// Parses `text` (`None` when it is not YAML or JSON).
    pub fn parse(text: &'a str) -> Option<Self> {
        let root = serde_saphyr::from_str(text).ok()?;
        Some(SpannedDocument { text, root })
    }

    /// [`locate`] in this document.
    pub fn locate(&self, path: &[Step]) -> Option<(ScalarPositions, String)> {
        let node = walk(&self.root, path)?;
        let Tree::Str(value) = &node.value else {
            return None;
        };
        scalar_positions(self.text, node, value).map(|p| (p, value.clone()))
    }

    /// [`locate_node`] in this document.
    pub fn locate_node(&self, path: &[Step]) -> Option<Position> {
        (0..=path.len()).rev().find_map(|n| {
            walk(&self.root, &path[..n]).map(|node| {
                let loc = node.referenced;
                match loc.span().byte_offset() {
                    Some(o) => position_of(self.text, o as usize),
                    None => Position {
                        line: loc.line() as usize,
                        column: loc.column() as usize,
                    },
                }
            })
        })
    }
}

/// The node at `path`, or `None`.
fn walk<'a>(root: &'a Spanned<Tree>, path: &[Step]) -> Option<&'a Spanned<Tree>> {
    let mut node = root;
    for step in path {
        node = match (&node.value, step) {
            (Tree::Map(entries), Step::Key(k)) => {
                &entries.iter().rev().find(|(key, _)| key == k)?.1
            }
            (Tree::Seq(items), Step::Index(i)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Where the node at `path` starts, or the nearest enclosing node that exists (a missing
/// field is reported at its parent).
pub fn locate_node(text: &str, path: &[Step]) -> Option<Position> {
    SpannedDocument::parse(text)?.locate_node(path)
}

fn scalar_positions(text: &str, node: &Spanned<Tree>, value: &str) -> Option<ScalarPositions> {
    let loc = node.referenced;
    let Some(offset) = loc.span().byte_offset().map(|o| o as usize) else {
        let start = Position {
            line: loc.line() as usize,
            column: loc.column() as usize,
        };
        return Some(ScalarPositions {
            start,
            chars: Vec::new(),
        });
    };
    // The span of a block scalar starts at its content: decode from its header.
    let offset = block_header(text, offset).unwrap_or(offset);
    let start = position_of(text, offset);
    let chars = text
        .get(offset..)
        .and_then(|source| decode(source, start, value, header_indent(text, offset)))
        .unwrap_or_default();
    Some(ScalarPositions { start, chars })
}

/// The indentation of the node that holds a block scalar whose header is at `offset`: the
/// indentation of the header's line, plus two for each `- ` sequence entry that starts it (the
/// base of an explicit indentation indicator).
fn header_indent(text: &str, offset: usize) -> usize {
    let before = &text[..offset.min(text.len())];
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let mut n = 0usize;
    let mut rest = line;
    loop {
        let spaces = rest.len() - rest.trim_start_matches(' ').len();
        n += spaces;
        rest = &rest[spaces..];
        match rest.strip_prefix("- ") {
            Some(r) => {
                n += 2;
                rest = r;
            }
            None => return n,
        }
    }
}

/// The line and column of the byte `offset` of `text`.
fn position_of(text: &str, offset: usize) -> Position {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Position {
        line,
        column: before[line_start..].chars().count() + 1,
    }
}

/// When the content at `offset` belongs to a block scalar, the offset of its `|` or `>`
/// indicator: the last non-blank text before it, on an earlier line, is a block header
/// (indicator, chomping and indentation indicators, an optional comment).
fn block_header(text: &str, offset: usize) -> Option<usize> {
    let before = text.get(..offset)?;
    let trimmed = before.trim_end_matches([' ', '\t']);
    if !trimmed.ends_with('\n') {
        return None;
    }
    let head = trimmed.trim_end_matches(['\n', '\r', ' ', '\t']);
    let line_start = head.rfind('\n').map_or(0, |i| i + 1);
    let line = &head[line_start..];
    let code = match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    };
    let code = code.trim_end();
    let header_start = code.rfind(['|', '>'])?;
    let rest = &code[header_start + 1..];
    let valid = rest.chars().all(|c| matches!(c, '+' | '-' | '1'..='9'))
        && code[..header_start]
            .chars()
            .last()
            .is_none_or(|c| matches!(c, ' ' | ':' | '-' | '\t'));
    valid.then_some(line_start + header_start)
}

/// A cursor over the source from the scalar's start, tracking line and column.
struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    pos: Position,
}

impl Cursor<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }
    fn next(&mut self) -> Option<(char, Position)> {
        let c = self.chars.next()?;
        let at = self.pos;
        if c == '\n' {
            self.pos = Position {
                line: at.line + 1,
                column: 1,
            };
        } else {
            self.pos.column += 1;
        }
        Some((c, at))
    }
}

/// Decodes the scalar at the start of `source` (at `start`) and returns the position of each
/// decoded character, or `None` unless the decoding equals `value`.
fn decode(
    source: &str,
    start: Position,
    value: &str,
    parent_indent: usize,
) -> Option<Vec<Position>> {
    let mut cur = Cursor {
        chars: source.chars().peekable(),
        pos: start,
    };
    let want = value.chars().count();
    let out = match cur.peek()? {
        '"' => {
            cur.next();
            flow(&mut cur, want, Quote::Double)
        }
        '\'' => {
            cur.next();
            flow(&mut cur, want, Quote::Single)
        }
        '|' | '>' => block(&mut cur, want, parent_indent),
        _ => flow(&mut cur, want, Quote::Plain),
    }?;
    (out.iter().map(|(c, _)| *c).collect::<String>() == value)
        .then(|| out.into_iter().map(|(_, p)| p).collect())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Plain,
    Single,
    Double,
}

/// Plain and quoted (flow) scalars: line folding (a single line break between content is a
/// space, each empty line a `\n`, white space around breaks dropped), `''` in single quotes,
/// escapes in double quotes. Stops after `want` characters.
fn flow(cur: &mut Cursor<'_>, want: usize, quote: Quote) -> Option<Vec<(char, Position)>> {
    let mut out: Vec<(char, Position)> = Vec::new();
    let mut pending_space: Vec<(char, Position)> = Vec::new();
    while out.len() < want {
        let (c, at) = cur.next()?;
        match c {
            ' ' | '\t' => pending_space.push((c, at)),
            '\r' => {}
            '\n' => {
                // Trailing white space is dropped; count the empty lines that follow.
                pending_space.clear();
                let mut empty = 0usize;
                loop {
                    while matches!(cur.peek(), Some(' ' | '\t' | '\r')) {
                        cur.next();
                    }
                    if cur.peek() == Some('\n') {
                        let (_, p) = cur.next()?;
                        empty += 1;
                        if empty > want {
                            return None;
                        }
                        out.push(('\n', p));
                    } else {
                        break;
                    }
                }
                if empty == 0 {
                    out.push((' ', at));
                }
            }
            '\\' if quote == Quote::Double => {
                out.append(&mut pending_space);
                let (e, _) = cur.next()?;
                let simple = match e {
                    '0' => Some('\0'),
                    'a' => Some('\u{7}'),
                    'b' => Some('\u{8}'),
                    't' | '\t' => Some('\t'),
                    'n' => Some('\n'),
                    'v' => Some('\u{b}'),
                    'f' => Some('\u{c}'),
                    'r' => Some('\r'),
                    'e' => Some('\u{1b}'),
                    ' ' => Some(' '),
                    '"' => Some('"'),
                    '/' => Some('/'),
                    '\\' => Some('\\'),
                    'N' => Some('\u{85}'),
                    '_' => Some('\u{a0}'),
                    'L' => Some('\u{2028}'),
                    'P' => Some('\u{2029}'),
                    _ => None,
                };
                if let Some(s) = simple {
                    out.push((s, at));
                    continue;
                }
                let digits = match e {
                    'x' => 2,
                    'u' => 4,
                    'U' => 8,
                    '\n' => {
                        // An escaped line break: nothing, and the next line's indentation goes.
                        while matches!(cur.peek(), Some(' ' | '\t')) {
                            cur.next();
                        }
                        continue;
                    }
                    _ => return None,
                };
                let mut hex = String::new();
                for _ in 0..digits {
                    hex.push(cur.next()?.0);
                }
                let ch = char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?;
                out.push((ch, at));
            }
            '\'' if quote == Quote::Single => {
                if cur.peek() == Some('\'') {
                    cur.next();
                    out.append(&mut pending_space);
                    out.push(('\'', at));
                } else {
                    return None;
                }
            }
            '"' if quote == Quote::Double => return None,
            _ => {
                out.append(&mut pending_space);
                out.push((c, at));
            }
        }
    }
    Some(out)
}

/// One line of a block scalar: its indentation, its characters, where its break is.
type BlockLine = (usize, Vec<(char, Position)>, Position);

/// Literal (`|`) and folded (`>`) block scalars: the header (indicator, chomping,
/// indentation indicator, comment), then content lines without their indentation; in folded
/// scalars a break between two lines that are neither empty nor more indented is a space.
fn block(cur: &mut Cursor<'_>, want: usize, parent_indent: usize) -> Option<Vec<(char, Position)>> {
    let (indicator, _) = cur.next()?;
    let folded = indicator == '>';
    let mut explicit: Option<usize> = None;
    while let Some(c) = cur.peek() {
        match c {
            '+' | '-' => {
                cur.next();
            }
            '1'..='9' => {
                explicit = c.to_digit(10).map(|d| parent_indent + d as usize);
                cur.next();
            }
            _ => break,
        }
    }
    // The rest of the header line (blanks, comment).
    while let Some((c, _)) = cur.next() {
        if c == '\n' {
            break;
        }
    }
    // Lines: (indentation, chars with positions, break position).
    let mut lines: Vec<BlockLine> = Vec::new();
    let mut produced = 0usize;
    while produced < want + 1 {
        let mut indent = 0usize;
        let mut content = Vec::new();
        let mut brk = None;
        let mut seen_content = false;
        while let Some((c, at)) = cur.next() {
            if c == '\n' {
                brk = Some(at);
                break;
            }
            if c == ' ' && !seen_content {
                indent += 1;
                continue;
            }
            seen_content = true;
            content.push((c, at));
        }
        let end = brk.is_none();
        produced += content.len() + 1;
        lines.push((indent, content, brk.unwrap_or(cur.pos)));
        if end {
            break;
        }
    }
    let base = explicit.or_else(|| {
        lines
            .iter()
            .find(|(_, content, _)| !content.is_empty())
            .map(|(i, _, _)| *i)
    })?;
    let mut out: Vec<(char, Position)> = Vec::new();
    let n = lines.len();
    for (k, (indent, content, brk)) in lines.iter().enumerate() {
        let empty = content.is_empty();
        if !empty && *indent < base {
            break;
        }
        // Indentation beyond the base is content.
        if !empty && *indent > base {
            let first = content.first().map_or(*brk, |(_, p)| *p);
            for j in 0..(*indent - base) {
                out.push((
                    ' ',
                    Position {
                        line: first.line,
                        column: first.column - (*indent - base) + j,
                    },
                ));
            }
        }
        out.extend(content.iter().copied());
        if out.len() >= want {
            break;
        }
        let next = lines.get(k + 1);
        let fold = folded
            && !empty
            && *indent == base
            && k + 1 < n
            && next.is_some_and(|(i, c, _)| !c.is_empty() && *i == base);
        out.push((if fold { ' ' } else { '\n' }, *brk));
    }
    out.truncate(want);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(line: usize, column: usize) -> Position {
        Position { line, column }
    }

    /// The position of the `n`-th (0-based) code point of the value at `path`.
    fn at(text: &str, path: &str, n: usize) -> Position {
        let (p, _) = locate(text, &parse_path(path)).expect("located");
        assert!(!p.chars.is_empty(), "mapped character by character: {p:?}");
        p.at(n)
    }

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("spec.validations[12].expression"),
            vec![
                Step::Key("spec".into()),
                Step::Key("validations".into()),
                Step::Index(12),
                Step::Key("expression".into())
            ]
        );
    }

    #[test]
    fn plain_single_and_double_quoted() {
        let doc =
            "spec:\n  a: object.replicas > 1\n  b: 'it''s é x'\n  c: \"tab\\there é\\u00e9 z\"\n";
        // 'r' of replicas: value index 7, line 2, column 6 + 7 = 13.
        assert_eq!(at(doc, "spec.a", 7), pos(2, 13));
        // 'x' after the escaped quote and a non-ASCII letter.
        assert_eq!(at(doc, "spec.b", 7), pos(3, 15));
        // 'z' after an escape \t and \u00e9 (6 source characters for one).
        assert_eq!(at(doc, "spec.c", 12), pos(4, 25));
    }

    #[test]
    fn folded_flow_lines() {
        let doc = "x:\n  e: \"a &&\n    b\"\n  f: one\n    two\n";
        // "a && b": b is index 5, on line 3 column 5.
        assert_eq!(at(doc, "x.e", 5), pos(3, 5));
        assert_eq!(at(doc, "x.f", 4), pos(5, 5));
    }

    #[test]
    fn literal_and_folded_blocks() {
        let doc = "v:\n- expression: |\n    object.spec.x &&\n\n    object.y\n- expression: >-\n    has(a)\n    && b\n";
        let (p, _) = locate(doc, &parse_path("v[0].expression")).unwrap();
        let text = "object.spec.x &&\n\nobject.y\n";
        // CEL 3:8 is 'y' on the third line of the value.
        assert_eq!(p.at_cel(text, 3, 8), pos(5, 12));
        // Folded: "has(a) && b"; 'b' is index 10, line 8 column 8.
        assert_eq!(at(doc, "v[1].expression", 10), pos(8, 8));
    }

    /// Every scalar style, with tabs and non-ASCII text: (document, path, the offending
    /// character's index in the value, its expected line and column in the file).
    #[test]
    fn table_of_scalar_styles() {
        let doc = concat!(
            "# a comment line\n",                           // 1
            "kind: List\n",                                 // 2
            "items:\n",                                     // 3
            "- spec:\n",                                    // 4
            "    plain: object.spec.x\t== 'ü' && y\n",      // 5
            "    plain2: a &&\n",                           // 6
            "      b.c\n",                                  // 7
            "    single: 'it''s ü\tz'\n",                   // 8
            "    double: \"\\u00fc\\x41\\\"q\\\\ \\tw\"\n", // 9
            "    escaped: \"ab\\\n",                        // 10
            "      cd\"\n",                                 // 11
            "    literal: |2-\n",                           // 12
            "        x.y\n",                                // 13
            "\n",                                           // 14
            "        ü.w\n",                                // 15
            "    folded: >+\n",                             // 16
            "      first line\n",                           // 17
            "        more indented\n",                      // 18
            "      last ü\n",                               // 19
        );
        let cases: &[(&str, usize, (usize, usize))] = &[
            // 'y' after a tab and a non-ASCII letter.
            ("items[0].spec.plain", 24, (5, 36)),
            // "a && b.c": '.' is index 6, on the continuation line.
            ("items[0].spec.plain2", 6, (7, 8)),
            // "it's ü\tz": 'z' is index 7.
            ("items[0].spec.single", 7, (8, 22)),
            // "üA\"q\\ \tw": 'w' is index 7, after five escapes.
            ("items[0].spec.double", 7, (9, 32)),
            // "abcd": an escaped line break joins the lines; 'c' is index 2.
            ("items[0].spec.escaped", 2, (11, 7)),
            // "  x.y\n\n  ü.w": the indentation indicator 2 is relative to the key's indentation
            // (4), so two of the eight spaces are content; 'w' is index 11.
            ("items[0].spec.literal", 11, (15, 11)),
            // "first line\n  more indented\nlast ü\n": 'ü' is index 32.
            ("items[0].spec.folded", 32, (19, 12)),
        ];
        for (path, index, (line, column)) in cases {
            assert_eq!(
                at(doc, path, *index),
                pos(*line, *column),
                "{path}[{index}]"
            );
        }
    }

    #[test]
    fn unmappable_values_fall_back_to_the_start() {
        let doc = "a: !!str 12\n";
        let (p, _) = locate(doc, &parse_path("a")).unwrap();
        assert_eq!(p.at(1).line, 1);
    }
}
