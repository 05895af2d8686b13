//! `-o github`: GitHub Actions workflow commands, one per finding.

use super::{Marks, full_message, suppressed_count, title};
use crate::finding::Finding;

/// GitHub workflow command data: `%`, CR and LF escaped.
pub(super) fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub workflow command property: also `:` and `,`.
pub(super) fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `-o github`: one `::error` / `::warning` workflow command per finding.
pub fn render_github(findings: &[Finding]) -> String {
    render_github_marked(findings, Marks::default())
}

/// [`render_github`] with [`Marks`]: no command for a baselined or suppressed finding, the
/// levels of the configuration, and one `::notice` counting the suppressed findings.
pub fn render_github_marked(findings: &[Finding], marks: Marks<'_>) -> String {
    let mut out = String::new();
    let mut suppressed = 0usize;
    for (i, f) in findings.iter().enumerate() {
        if marks.suppression(i).is_some() {
            suppressed += 1;
            continue;
        }
        if marks.baselined.and_then(|b| b.get(i)).is_some_and(|b| *b) {
            continue;
        }
        let mut props = vec![format!("file={}", gh_property(f.file()))];
        if let Some(p) = f.position {
            props.push(format!("line={}", p.line));
            props.push(format!("col={}", p.column));
        }
        props.push(format!("title={}", gh_property(&title(f))));
        let message = full_message(f);
        let command = match marks.level(f) {
            "note" => "notice",
            level => level,
        };
        out.push_str(&format!(
            "::{} {}::{}\n",
            command,
            props.join(","),
            gh_data(&message)
        ));
    }
    if suppressed > 0 {
        out.push_str(&format!(
            "::notice title=vapcheck::{}\n",
            gh_data(&suppressed_count(suppressed))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the runner decodes workflow-command data and properties (the inverse of the
    /// documented escaping).
    fn unescape(s: &str) -> String {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    }

    #[test]
    fn github_escaping_round_trips() {
        assert_eq!(gh_data("50% a\nb\r"), "50%25 a%0Ab%0D");
        assert_eq!(gh_property("a:b,c%"), "a%3Ab%2Cc%25");
        for s in [
            "100%0A is not a newline: a,b\r\nline two %25",
            "%%%,,,:::\n\n",
            "ü: x, y % z",
        ] {
            let data = gh_data(s);
            assert!(!data.contains(['\n', '\r']), "{data}");
            assert_eq!(unescape(&data), s);
            let prop = gh_property(s);
            assert!(!prop.contains([':', ',', '\n', '\r']), "{prop}");
            assert_eq!(unescape(&prop), s);
        }
    }
}
