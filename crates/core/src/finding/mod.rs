//! Findings as data: one [`Finding`] type that every analysis produces and every output
//! consumes (the CI formats, the editor's diagnostics, the suppressions, the baselines), and
//! the one table of rules ([`Rule`]). No I/O: the producers ([`produce`]) turn the results of
//! the analyses into findings with the CEL position each error was made at; the front end
//! fills in the place in the source file ([`Finding::position`], [`Fix::file`]).

mod produce;
mod rules;

pub use produce::{Analysed, produce, produce_status};
pub use rules::{Class, Rule, Severity};

/// The causes of a create and the CEL positions in them are kube-apiserver's data
/// ([`crate::apiserver::field`]); findings carry them.
pub use crate::apiserver::field::{Cause, CelPos};

use std::fmt;
use std::sync::Arc;

use crate::policy::narrowing::FindingClass;

/// A 1-based line and column (columns count Unicode code points, as editors and SARIF do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in code points.
    pub column: usize,
}

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// File name as given, or `<stdin>`.
    pub source: String,
    /// 1-based index among the non-empty documents of the source (0: the source as a whole).
    pub document: usize,
    /// 0-based index in the document's `items` when the document is a list.
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.document == 0 {
            // A whole file or folder (a static-manifest folder's own entry).
            return f.write_str(&self.source);
        }
        write!(f, "{}: document {}", self.source, self.document)?;
        if let Some(i) = self.item {
            write!(f, ", item {i}")?;
        }
        Ok(())
    }
}

/// The object a finding is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// The index of the object among the checked entries.
    pub entry: usize,
    /// Its kind (`ValidatingAdmissionPolicy`); empty for a document that does not decode and
    /// declares none.
    pub kind: &'static str,
    /// Its `metadata.name` (empty when missing).
    pub name: String,
    /// Where it was read from.
    pub origin: Origin,
}

impl ObjectRef {
    /// An object read from the cluster (the controller's): no file, the first entry.
    pub fn in_cluster(kind: &'static str, name: &str) -> ObjectRef {
        ObjectRef {
            entry: 0,
            kind,
            name: name.to_owned(),
            origin: Origin {
                source: String::new(),
                document: 0,
                item: None,
            },
        }
    }
}

/// What the fix of a runtime-safety finding does (SARIF's `fixes[].description`, the title of
/// the editor's code action).
pub const FIX_DESCRIPTION: &str = "read the field only where it is present (an optional selection with the zero value, or a guard on the operation)";

/// A fix: the edit of the CEL text, and the replacement in the file it maps to when the front
/// end could map it back to the file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The edit of the expression.
    pub edit: crate::policy::runtime::Edit,
    /// The same edit in the file.
    pub file: Option<FileFix>,
}

/// A replacement of a region of one line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFix {
    /// The first character replaced.
    pub start: Position,
    /// The position just after the last character replaced.
    pub end: Position,
    /// The new text, as it is written in the file (escaped for the scalar's style).
    pub text: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Its stable rule id and rule.
    pub rule: Rule,
    /// Its default severity (the configuration may set another: `cli::suppressed`).
    pub severity: Severity,
    /// What kind of trouble it is.
    pub class: Class,
    /// The object it is on.
    pub object: ObjectRef,
    /// The field it is about (`spec.validations[0].expression`); empty for the object.
    pub field_ref: String,
    /// The kinds it applies to (`apps/v1, Kind=Deployment`), in checking order; the first is
    /// the one its title and fingerprint name.
    pub kinds: Vec<String>,
    /// Where it is in the field's CEL text.
    pub cel: Option<CelPos>,
    /// Where it is in the source file (filled by the front end).
    pub position: Option<Position>,
    /// The message.
    pub message: String,
    /// A rewrite that fixes it.
    pub fix: Option<Fix>,
    /// A type-checking warning ([`Rule::TypeWarning`]): its place in upstream's text of the
    /// field and narrowing's class of its kind; `None` for the other rules.
    pub type_checking: Option<TypeChecking>,
}

/// What a type-checking warning is in upstream's status text and in narrowing's terms: the
/// text kube-controller-manager writes into `status.typeChecking.expressionWarnings[].warning`
/// (k8s.io/kubernetes v1.37.1 `pkg/controller/validatingadmissionpolicystatus/controller.go`,
/// `reconcile`, from k8s.io/apiserver v0.37.1
/// `pkg/admission/plugin/policy/validating/typechecking.go`, `TypeChecker.Check`), rendered
/// from the per-kind results the finding is made of, never parsed back from a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeChecking {
    /// The index of the field's entry among the status's `expressionWarnings` (the findings
    /// of one entry are consecutive and share it).
    pub entry: usize,
    /// The index of the kind's result in the entry (a kind's result gives one finding per
    /// positioned error: they share it).
    pub kind: usize,
    /// The entry's `warning`: `TypeCheckingResults.String` of the field's per-kind results
    /// ([`crate::policy::render_warning`]), shared by the entry's findings.
    pub field_text: Arc<str>,
    /// The kind's part of it: `TypeCheckingResult.String` (`<gvk>: <issues>\n`,
    /// [`crate::policy::KindResult::render`]).
    pub kind_text: Arc<str>,
    /// The worst class narrowing gave the kind's issues on the field (extended mode); `None`
    /// when nothing classified them (strict mode).
    pub narrowed: Option<FindingClass>,
}

impl TypeChecking {
    /// Whether `self` and `other` are of the same kind's result of the same entry.
    pub fn same_kind(&self, other: &TypeChecking) -> bool {
        self.entry == other.entry && self.kind == other.kind
    }
}

/// The `expressionWarnings` of a status, from its findings: `(fieldRef, warning)` for each
/// entry, in order, the warning upstream's text of the field ([`TypeChecking::field_text`]).
pub fn expression_warnings(findings: &[Finding]) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for f in findings {
        let Some(t) = &f.type_checking else {
            continue;
        };
        if last != Some(t.entry) {
            out.push((f.field_ref.as_str(), &*t.field_text));
            last = Some(t.entry);
        }
    }
    out
}

impl Finding {
    /// The file it is in (`<stdin>` for standard input).
    pub fn file(&self) -> &str {
        &self.object.origin.source
    }

    /// The kind its title names.
    pub fn matched_kind(&self) -> Option<&str> {
        self.kinds.first().map(String::as_str)
    }

    /// The replacement in the file that fixes it.
    pub fn file_fix(&self) -> Option<&FileFix> {
        self.fix.as_ref().and_then(|f| f.file.as_ref())
    }
}
