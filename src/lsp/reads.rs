//! What the server keeps of the sources it read, from one request to the next: each
//! source's text and, for a YAML source, each of its documents as read
//! ([`crate::cli::input::read_all_lenient`]) and, once asked for, the CEL expressions of its
//! ValidatingAdmissionPolicies with their places (for hover, completion and "did you mean").
//! A source whose text is the same as at the last read is not read again; in one whose text
//! changed, only the documents that changed are (a document is kept by its text and its
//! first line, which its positions depend on).
//!
//! What is taken from here is what reading the whole text again gives: document `n` of a YAML
//! source reads as the one document of its text padded with the lines before it
//! ([`crate::cli::input::yaml_documents`]), numbered `n`; a source that is not split so (JSON,
//! a document after a `...` end marker) is read whole.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::hover::{AtCursor, Subject, sites_of};
use crate::cli::documents::SourceRead;
use crate::cli::input::{InputObject, read_all_lenient, yaml_documents};
use crate::cli::positions::{Position, ScalarPositions, SpannedDocument, Step, parse_path};

/// One CEL expression of a ValidatingAdmissionPolicy: where it is and what it says.
struct Site {
    /// The policy (an index into the document's policies).
    policy: usize,
    /// `spec.validations[0].expression`, ...
    field: String,
    /// Whether the field is compiled with the patch types (a MutatingAdmissionPolicy's
    /// mutation).
    patch_types: bool,
    /// The expression's text (the decoded scalar).
    expression: String,
    /// The place of each of its characters in the file.
    positions: ScalarPositions,
}

/// One document of a source, as read.
struct Doc {
    /// Its first line (1-based) in the source.
    line: usize,
    /// Its text (from its `---`), without the padding.
    text: String,
    /// What reading it gives, numbered as document 1 (renumbered when taken).
    read: SourceRead,
    /// Whether it counts in the numbering of the source's documents: every document but a
    /// null one (`parse_documents_lenient` in crates/core/src/analysis/input.rs numbers only
    /// the documents it keeps, and drops those whose value is null).
    counted: bool,
    /// Its policies' expressions, found when first asked for.
    sites: OnceCell<(Vec<Subject>, Vec<Site>)>,
}

impl Doc {
    fn read(source: &str, line: usize, text: &str) -> Doc {
        let padded = padded(line, text);
        let read = read_all_lenient(source, &padded);
        let nothing = read.0.is_empty() && read.1.is_empty() && read.2.is_empty();
        let null =
            || serde_saphyr::from_str::<serde_json::Value>(&padded).is_ok_and(|v| v.is_null());
        let counted = !(nothing && null());
        Doc {
            line,
            text: text.to_owned(),
            read,
            counted,
            sites: OnceCell::new(),
        }
    }

    /// The last line of the document (1-based, in the source).
    fn end_line(&self) -> usize {
        self.line + self.text.matches('\n').count()
    }

    /// The policies of the document and their expressions (`check`'s extended mode's sites,
    /// each located in the document's text).
    fn sites(&self) -> &(Vec<Subject>, Vec<Site>) {
        self.sites.get_or_init(|| {
            let padded = padded(self.line, &self.text);
            let mut policies = Vec::new();
            let mut sites = Vec::new();
            let Some(parsed) = SpannedDocument::parse(&padded) else {
                return (policies, sites);
            };
            for found in sites_of(&self.read.0, &self.read.1) {
                let mut prefix = Vec::new();
                if let Some(i) = found.origin.item {
                    prefix.push(Step::Key("items".into()));
                    prefix.push(Step::Index(i));
                }
                let index = policies.len();
                for (field, patch_types) in found.fields {
                    let mut path = prefix.clone();
                    path.extend(parse_path(&field));
                    if let Some((positions, expression)) = parsed.locate(&path) {
                        sites.push(Site {
                            policy: index,
                            field,
                            patch_types,
                            expression,
                            positions,
                        });
                    }
                }
                policies.push(found.policy);
            }
            (policies, sites)
        })
    }
}

/// The text of a document padded with the line breaks before it, so that its lines are the
/// file's (as `crate::cli::input::document_text` gives it).
fn padded(line: usize, text: &str) -> String {
    let mut out = "\n".repeat(line.saturating_sub(1));
    out.push_str(text);
    out
}

/// One source, as read.
struct Source {
    text: String,
    /// Its documents, or `None` when it is read whole.
    docs: Option<Vec<Rc<Doc>>>,
    /// What reading it whole gives (when it is not split into documents).
    whole: Option<SourceRead>,
}

/// The sources read, by name.
#[derive(Default)]
pub struct Reads {
    sources: HashMap<String, Source>,
    /// How many documents the last [`Reads::read`] of a changed source read (the others were
    /// kept).
    pub documents_read: usize,
}

impl Reads {
    /// Forgets every source but those named in `keep`.
    pub fn retain(&mut self, keep: &std::collections::BTreeSet<String>) {
        self.sources.retain(|name, _| keep.contains(name));
    }

    /// Keeps `text` as the text of `source`: the documents of the text it had that are in
    /// the new text too (by first line and text) are kept, the others read.
    fn update(&mut self, source: &str, text: &str) -> Option<&Source> {
        let same = self.sources.get(source).is_some_and(|s| s.text == text);
        if !same {
            let old = self.sources.remove(source);
            let new = match yaml_documents(text) {
                None => Source {
                    text: text.to_owned(),
                    docs: None,
                    whole: Some(read_all_lenient(source, text)),
                },
                Some(raw) => {
                    let mut kept: HashMap<(usize, &str), Rc<Doc>> = HashMap::new();
                    if let Some(docs) = old.as_ref().and_then(|o| o.docs.as_ref()) {
                        for d in docs {
                            kept.insert((d.line, d.text.as_str()), Rc::clone(d));
                        }
                    }
                    let mut read = 0;
                    let docs = raw
                        .into_iter()
                        .map(|(line, t)| {
                            kept.get(&(line, t)).cloned().unwrap_or_else(|| {
                                read += 1;
                                Rc::new(Doc::read(source, line, t))
                            })
                        })
                        .collect();
                    self.documents_read = read;
                    Source {
                        text: text.to_owned(),
                        docs: Some(docs),
                        whole: None,
                    }
                }
            };
            self.sources.insert(source.to_owned(), new);
        }
        self.sources.get(source)
    }

    /// What [`read_all_lenient`] gives for `text` as the source named `source`.
    pub fn read(&mut self, source: &str, text: &str) -> SourceRead {
        let Some(s) = self.update(source, text) else {
            return read_all_lenient(source, text);
        };
        if let Some(whole) = &s.whole {
            return whole.clone();
        }
        let mut out: SourceRead = (Vec::new(), Vec::new(), Vec::new());
        let mut n = 0;
        for d in s.docs.iter().flatten() {
            if d.counted {
                n += 1;
            }
            let (objects, others, undecoded) = &d.read;
            out.0.extend(objects.iter().cloned().map(|mut o| {
                match &mut o {
                    InputObject::Policy(p) => p.origin.document = n,
                    InputObject::Binding(b) => b.origin.document = n,
                }
                o
            }));
            out.1.extend(others.iter().cloned().map(|mut o| {
                o.origin.document = n;
                o
            }));
            out.2.extend(undecoded.iter().cloned().map(|mut u| {
                u.origin.document = n;
                u
            }));
        }
        out
    }

    /// The expression of a ValidatingAdmissionPolicy or MutatingAdmissionPolicy at `cursor` (1-based line, code-point
    /// column) in `text` (the source named `source`), if the cursor is in one; `None` when
    /// the source is not split into documents (JSON: [`super::hover::expression_at`] finds it
    /// in the whole text).
    pub fn expression_at(
        &mut self,
        source: &str,
        text: &str,
        cursor: Position,
    ) -> Option<Option<AtCursor>> {
        let docs = self.update(source, text).and_then(|s| s.docs.as_ref())?;
        // Only the documents whose lines hold the cursor.
        let holding = docs
            .iter()
            .filter(|d| (d.line..=d.end_line()).contains(&cursor.line));
        for d in holding {
            let (policies, sites) = d.sites();
            for site in sites {
                let s = &site.positions;
                let n = site.expression.chars().count();
                // The character under the cursor, or the end of the expression just after it.
                let Some(index) = (0..=n).find(|&i| s.at(i) == cursor && !s.chars.is_empty())
                else {
                    continue;
                };
                let Some(policy) = policies.get(site.policy) else {
                    continue;
                };
                return Some(Some(AtCursor {
                    policy: policy.clone(),
                    field: site.field.clone(),
                    patch_types: site.patch_types,
                    expression: site.expression.clone(),
                    index,
                }));
            }
        }
        Some(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, expression: &str) -> String {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {name}\nspec:\n  validations:\n  - expression: {expression}\n"
        )
    }

    /// What `reads` gives for `text` is what reading it whole gives.
    fn assert_reads_whole(reads: &mut Reads, text: &str) {
        let want = read_all_lenient("f.yaml", text);
        let got = reads.read("f.yaml", text);
        assert_eq!(format!("{got:#?}"), format!("{want:#?}"), "{text}");
    }

    #[test]
    fn reading_by_document_gives_what_reading_the_whole_text_gives() {
        let (a, b) = (policy("a", "object.x > 1"), policy("b", "'b'"));
        let texts = [
            format!("{a}---\n{b}"),
            // A null document (not numbered), a document that is not YAML, an empty list, a
            // list, a binding, an object of another kind, comments and blank documents.
            format!(
                "# c\n---\n{a}---\n~\n---\nkind: [\n---\n\n---\napiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: List\nitems:\n- {}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: x}}\nspec: {{policyName: a}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n--- # end\n{b}",
                "{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicy, metadata: {name: i}}"
            ),
            // Read whole: JSON, a document after `...`.
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}".to_owned(),
            format!("{a}...\n{b}"),
            format!("\u{feff}{a}---\n{b}"),
            "kind: [\n".to_owned(),
            String::new(),
        ];
        let mut reads = Reads::default();
        for text in &texts {
            assert_reads_whole(&mut reads, text);
            // Again from what was kept.
            assert_reads_whole(&mut reads, text);
        }
    }

    #[test]
    fn an_edit_reads_again_only_the_documents_it_changed() {
        let docs: Vec<String> = (0..5)
            .map(|i| policy(&format!("p{i}"), "object.spec.replicas > 1"))
            .collect();
        let text = docs.join("---\n");
        let mut reads = Reads::default();
        assert_reads_whole(&mut reads, &text);
        assert_eq!(reads.documents_read, 5);
        let edited = text.replacen("object.spec", "object.x_spec", 1);
        assert_reads_whole(&mut reads, &edited);
        assert_eq!(reads.documents_read, 1);
        assert_reads_whole(&mut reads, &text);
        assert_eq!(reads.documents_read, 1);
        // A line added in the third document moves the two after it: three read again.
        let longer = text.replacen("  name: p2\n", "  name: p2\n  labels: {a: b}\n", 1);
        assert_reads_whole(&mut reads, &longer);
        assert_eq!(reads.documents_read, 3);
    }

    #[test]
    fn expressions_are_found_as_in_the_whole_text() {
        let text = [
            policy("a", "object.spec.replicas > 1"),
            "apiVersion: v1\nkind: ConfigMap\n".to_owned(),
            policy("b", "\"object.metadata.name == 'x'\""),
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n\
             metadata:\n  name: m\nspec:\n  mutations:\n  - patchType: JSONPatch\n    \
             jsonPatch:\n      expression: \"[]\"\n"
                .to_owned(),
        ]
        .join("---\n");
        let mut reads = Reads::default();
        let mut found = 0;
        for (l, line) in text.lines().enumerate() {
            for c in 0..=line.chars().count() + 1 {
                let cursor = Position {
                    line: l + 1,
                    column: c + 1,
                };
                let want = super::super::hover::expression_at("f.yaml", &text, cursor);
                let got = reads.expression_at("f.yaml", &text, cursor).flatten();
                let key = |a: &Option<AtCursor>| {
                    a.as_ref().map(|a| {
                        (
                            a.policy.name().map(str::to_owned),
                            a.patch_types,
                            a.field.clone(),
                            a.expression.clone(),
                            a.index,
                        )
                    })
                };
                assert_eq!(key(&got), key(&want), "at {cursor:?}");
                found += usize::from(got.is_some());
            }
        }
        // Every character of the three expressions and the place just after each.
        assert_eq!(found, (24 + 1) + (27 + 1) + (2 + 1));
    }
}
