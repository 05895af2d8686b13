//! Positions and URIs between the editor and `vapcheck check`: LSP positions count lines from
//! 0 and columns in the negotiated encoding's units (UTF-16 by default, or UTF-8 bytes or
//! code points); `check`'s positions ([`crate::cli::positions::Position`]) count both from 1,
//! columns in code points. Pure.

use std::path::{Path, PathBuf};

use crate::cli::positions::Position;

/// The unit of an LSP column (`PositionEncodingKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 bytes.
    Utf8,
    /// UTF-16 code units (the protocol's default).
    Utf16,
    /// Code points.
    Utf32,
}

impl Encoding {
    /// The encoding to use among the client's (`general.positionEncodings`, in its order of
    /// preference): code points when offered (no conversion), else UTF-16, which every client
    /// supports.
    pub fn choose(offered: &[lsp_types::PositionEncodingKind]) -> Self {
        if offered.contains(&lsp_types::PositionEncodingKind::UTF32) {
            Encoding::Utf32
        } else {
            Encoding::Utf16
        }
    }

    /// The protocol's name of it.
    pub fn kind(self) -> lsp_types::PositionEncodingKind {
        match self {
            Encoding::Utf8 => lsp_types::PositionEncodingKind::UTF8,
            Encoding::Utf16 => lsp_types::PositionEncodingKind::UTF16,
            Encoding::Utf32 => lsp_types::PositionEncodingKind::UTF32,
        }
    }

    fn units(self, c: char) -> usize {
        match self {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
            Encoding::Utf32 => 1,
        }
    }
}

/// Line `index` (0-based) of `text`, without its line break; `None` past the last line.
fn line(text: &str, index: usize) -> Option<&str> {
    text.split('\n')
        .nth(index)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

fn lsp_position(line: u32, character: usize) -> lsp_types::Position {
    lsp_types::Position {
        line,
        character: u32::try_from(character).unwrap_or(u32::MAX),
    }
}

/// The lines of a text, each without its line break, split once for finding many
/// positions in it.
pub struct Lines<'a>(Vec<&'a str>);

impl<'a> Lines<'a> {
    /// The lines of `text` (split at `\n`, a `\r` before it dropped).
    pub fn new(text: &'a str) -> Self {
        Lines(
            text.split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect(),
        )
    }

    /// Line `index` (0-based); `None` past the last line.
    pub fn get(&self, index: usize) -> Option<&'a str> {
        self.0.get(index).copied()
    }
}

/// The range of a finding at `p` in `text`: from its character over the word it starts (a
/// CEL identifier, with the `.` of a selection before it), at least that one character when
/// the line has it. A position past the end of its line or of the text is clamped to it.
pub fn finding_range(text: &str, p: Position, encoding: Encoding) -> lsp_types::Range {
    finding_range_in(&Lines::new(text), p, encoding)
}

/// [`finding_range`] in a text already split into lines.
pub fn finding_range_in(lines: &Lines<'_>, p: Position, encoding: Encoding) -> lsp_types::Range {
    let line_index = p.line.saturating_sub(1);
    let line_no = u32::try_from(line_index).unwrap_or(u32::MAX);
    let Some(l) = lines.get(line_index) else {
        let start = lsp_position(line_no, 0);
        return lsp_types::Range { start, end: start };
    };
    let skip = p.column.saturating_sub(1);
    let start: usize = l.chars().take(skip).map(|c| encoding.units(c)).sum();
    let mut rest = l.chars().skip(skip).peekable();
    let mut width = 0usize;
    let word = |c: &char| c.is_alphanumeric() || *c == '_';
    if let Some(c) = rest.next() {
        width += encoding.units(c);
        if c == '.' || word(&c) {
            while let Some(c) = rest.next_if(word) {
                width += encoding.units(c);
            }
        }
    }
    lsp_types::Range {
        start: lsp_position(line_no, start),
        end: lsp_position(line_no, start + width),
    }
}

/// The LSP position of `check`'s position `p` (1-based line, code-point column) in `text`;
/// a column past its line's end is the line's end.
pub fn to_lsp(text: &str, p: Position, encoding: Encoding) -> lsp_types::Position {
    let line_index = p.line.saturating_sub(1);
    let character: usize = line(text, line_index)
        .unwrap_or_default()
        .chars()
        .take(p.column.saturating_sub(1))
        .map(|c| encoding.units(c))
        .sum();
    lsp_position(u32::try_from(line_index).unwrap_or(u32::MAX), character)
}

/// The byte offset in `text` of an LSP position: a column past its line's end is the line's
/// end, a line past the text's end is the text's end, and a column inside a character (half
/// of a surrogate pair, a byte inside a UTF-8 sequence) is that character's start.
pub fn offset(text: &str, p: lsp_types::Position, encoding: Encoding) -> usize {
    let mut start = 0usize;
    for _ in 0..p.line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let l = &text[start..end];
    let l = l.strip_suffix('\r').unwrap_or(l);
    let want = p.character as usize;
    let mut units = 0usize;
    for (i, c) in l.char_indices() {
        let next = units + encoding.units(c);
        if next > want {
            return start + i;
        }
        units = next;
    }
    start + l.len()
}

/// The LSP position of a byte offset of `text` (clamped to the text, and down to a character
/// boundary).
pub fn position_of(text: &str, byte: usize, encoding: Encoding) -> lsp_types::Position {
    let mut byte = byte.min(text.len());
    while !text.is_char_boundary(byte) {
        byte -= 1;
    }
    let before = &text[..byte];
    let line_no = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character: usize = text[line_start..byte]
        .chars()
        .map(|c| encoding.units(c))
        .sum();
    lsp_position(u32::try_from(line_no).unwrap_or(u32::MAX), character)
}

/// The path of a `file:` URI, its `%XX` escapes decoded; `None` for another scheme or a path
/// that does not decode to UTF-8.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://host/path`: only the local host (empty or `localhost`).
    let path = match rest.strip_prefix("localhost") {
        Some(p) if p.starts_with('/') => p,
        _ => rest,
    };
    if !path.starts_with('/') {
        return None;
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = path.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok().map(PathBuf::from)
}

/// The `file:` URI of an absolute path: every byte but the unreserved ones and `/` escaped.
pub fn path_to_uri(path: &Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_count_the_negotiated_units() {
        // `é` is 2 UTF-8 bytes and 1 UTF-16 unit; `😀` is 4 bytes and 2 UTF-16 units.
        let text = "a: 1\nx: 'é😀 object.spec.replicsa > 1'\n";
        let p = Position {
            line: 2,
            column: 19,
        };
        let r16 = finding_range(text, p, Encoding::Utf16);
        assert_eq!((r16.start.line, r16.start.character), (1, 19));
        assert_eq!(r16.end.character, 19 + ".replicsa".len() as u32);
        let r32 = finding_range(text, p, Encoding::Utf32);
        assert_eq!(r32.start.character, 18);
        let r8 = finding_range(text, p, Encoding::Utf8);
        assert_eq!(r8.start.character, 22);
        // Past the line's end or the text's: clamped, never a panic.
        let far = finding_range(
            text,
            Position {
                line: 9,
                column: 99,
            },
            Encoding::Utf16,
        );
        assert_eq!((far.start.line, far.start.character), (8, 0));
        let long = finding_range(
            text,
            Position {
                line: 1,
                column: 99,
            },
            Encoding::Utf16,
        );
        assert_eq!((long.start.character, long.end.character), (4, 4));
    }

    #[test]
    fn offsets_and_positions_round_trip() {
        let text = "ab\r\né😀z\n";
        let enc = Encoding::Utf16;
        let at = |line, character| offset(text, lsp_types::Position { line, character }, enc);
        assert_eq!(at(0, 2), 2);
        assert_eq!(at(0, 9), 2, "past the line: its end, before the \\r");
        assert_eq!(at(1, 1), 4 + 2);
        assert_eq!(
            at(1, 2),
            6,
            "inside the surrogate pair: the character's start"
        );
        assert_eq!(at(1, 3), 10);
        assert_eq!(at(7, 0), text.len());
        for byte in [0, 2, 4, 6, 10, 11, text.len()] {
            let p = position_of(text, byte, enc);
            assert_eq!(offset(text, p, enc), byte, "{byte}");
        }
    }

    #[test]
    fn uris_round_trip() {
        let p = Path::new("/tmp/a b/é%.yaml");
        let uri = path_to_uri(p);
        assert_eq!(uri, "file:///tmp/a%20b/%C3%A9%25.yaml");
        assert_eq!(uri_to_path(&uri).as_deref(), Some(p));
        assert_eq!(
            uri_to_path("file://localhost/x.yaml").as_deref(),
            Some(Path::new("/x.yaml"))
        );
        assert_eq!(uri_to_path("untitled:Untitled-1"), None);
    }
}
