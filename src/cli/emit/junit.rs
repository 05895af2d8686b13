//! `-o junit`: JUnit XML, one test suite per object and one test case per field with
//! findings.

use std::collections::BTreeMap;

use super::super::output::CheckedPolicy;
use super::{Marks, title};
use crate::finding::Finding;

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// One `<testcase>` of the suite `suite` for `field` of `file`, holding `inner` (its
/// `<skipped>` or `<failure>` element).
fn testcase(suite: &str, field: &str, file: &str, line: Option<usize>, inner: &str) -> String {
    format!(
        "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"{}>\n      {inner}\n    </testcase>\n",
        xml(suite),
        xml(field),
        xml(file),
        line.map(|l| format!(" line=\"{l}\"")).unwrap_or_default()
    )
}

/// `-o junit`: one test suite per object, one test case per field with findings (and one
/// passing case per clean object).
pub fn render_junit(checked: &[CheckedPolicy], findings: &[Finding]) -> String {
    render_junit_marked(checked, findings, Marks::default())
}

/// [`render_junit`] with [`Marks`]: a field whose findings are all suppressed or notes is a
/// skipped case (each suppressed one named so), else a failure of the others.
pub fn render_junit_marked(
    checked: &[CheckedPolicy],
    findings: &[Finding],
    marks: Marks<'_>,
) -> String {
    let mut suites = String::new();
    let (mut total, mut failed) = (0usize, 0usize);
    let index_of = |f: &Finding| {
        findings
            .iter()
            .position(|g| std::ptr::eq(g, f))
            .unwrap_or(usize::MAX)
    };
    let suppression = |f: &Finding| {
        marks
            .suppressed
            .is_some()
            .then(|| marks.suppression(index_of(f)))
            .flatten()
    };
    // Counts for the case: neither suppressed nor a note.
    let counts = |f: &Finding| suppression(f).is_none() && marks.level(f) != "note";
    for c in checked {
        let mine: Vec<&Finding> = findings
            .iter()
            .filter(|f| {
                f.object.kind == c.kind && f.object.name == c.name && f.file() == c.origin.source
            })
            .collect();
        let mut by_field: BTreeMap<String, Vec<&Finding>> = BTreeMap::new();
        for f in &mine {
            let key = if f.field_ref.is_empty() {
                "object".to_owned()
            } else {
                f.field_ref.clone()
            };
            by_field.entry(key).or_default().push(f);
        }
        let suite_name = format!("{} {}", c.kind, c.name);
        let mut cases = String::new();
        let n = by_field.len().max(1);
        let notes_only = |fs: &[&Finding]| !fs.iter().any(|f| counts(f));
        let failing = by_field.values().filter(|fs| !notes_only(fs)).count();
        let skipped = by_field.len() - failing;
        total += n;
        failed += failing;
        if by_field.is_empty() {
            cases.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"/>\n",
                xml(&suite_name),
                "checks",
                xml(&c.origin.source)
            ));
        }
        for (field, fs) in &by_field {
            let line = fs.iter().find_map(|f| f.position).map(|p| p.line);
            if notes_only(fs) {
                let message: Vec<String> = fs
                    .iter()
                    .map(|f| match suppression(f) {
                        Some(sup) => format!(
                            "suppressed by {} ({}{}): {}",
                            sup.by.as_str(),
                            sup.entry,
                            sup.reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default(),
                            f.message
                        ),
                        None => f.message.clone(),
                    })
                    .collect();
                let skipped = format!("<skipped message=\"{}\"/>", xml(&message.join("; ")));
                cases.push_str(&testcase(
                    &suite_name,
                    field,
                    &c.origin.source,
                    line,
                    &skipped,
                ));
                continue;
            }
            let fs: Vec<&Finding> = fs
                .iter()
                .copied()
                .filter(|f| suppression(f).is_none())
                .collect();
            let body: Vec<String> = fs
                .iter()
                .map(|f| {
                    let at = f
                        .position
                        .map(|p| format!("{}:{}:{}: ", f.file(), p.line, p.column))
                        .unwrap_or_default();
                    format!("{at}{}", f.message)
                })
                .collect();
            let failure = format!(
                "<failure type=\"{}\" message=\"{}\">{}</failure>",
                fs[0].rule.id(),
                xml(&title(fs[0])),
                xml(&body.join("\n\n"))
            );
            cases.push_str(&testcase(
                &suite_name,
                field,
                &c.origin.source,
                line,
                &failure,
            ));
        }
        suites.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{failing}\" errors=\"0\" skipped=\"{skipped}\">\n{cases}  </testsuite>\n",
            xml(&suite_name),
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"vapcheck\" tests=\"{total}\" failures=\"{failed}\" errors=\"0\">\n{suites}</testsuites>\n"
    )
}
