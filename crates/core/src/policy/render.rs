//! Warning text, byte for byte as upstream writes it.

use super::gvk::Gvk;
use super::issues::Issues;

/// What checking one expression against one kind produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindOutcome {
    /// Issues found (cel-go's issues, or a `must evaluate to` message).
    Issues(Issues),
    /// An internal error (upstream `TypeCheckingResult.Err`).
    Error(String),
}

/// One kind's result for one expression (upstream `TypeCheckingResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindResult {
    /// The kind.
    pub gvk: Gvk,
    /// The outcome.
    pub outcome: KindOutcome,
}

impl KindResult {
    /// Upstream `TypeCheckingResult.String` (k8s.io/apiserver v0.37.1
    /// validating/typechecking.go): `<gvk>: <issues>\n`, or
    /// `<gvk>: type checking error: <err>\n` for internal errors.
    pub fn render(&self) -> String {
        match &self.outcome {
            KindOutcome::Issues(issues) => format!("{}: {}\n", self.gvk, issues.render()),
            KindOutcome::Error(err) => format!("{}: type checking error: {}\n", self.gvk, err),
        }
    }
}

/// Upstream `TypeCheckingResults.String`: each kind's rendering, joined with `\n` (so blocks
/// are separated by an empty line and the text ends with one `\n`).
pub fn render_warning(results: &[KindResult]) -> String {
    let blocks: Vec<String> = results.iter().map(KindResult::render).collect();
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE: &str =
        "ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^";

    #[test]
    fn two_kinds_are_separated_by_an_empty_line() {
        let r = [
            KindResult {
                gvk: Gvk::new("apps", "v1", "Deployment"),
                outcome: KindOutcome::Issues(Issues::one(crate::policy::Issue::plain(ISSUE))),
            },
            KindResult {
                gvk: Gvk::new("apps", "v1", "ReplicaSet"),
                outcome: KindOutcome::Issues(Issues::one(crate::policy::Issue::plain(ISSUE))),
            },
        ];
        assert_eq!(
            render_warning(&r),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n\
             \n\
             apps/v1, Kind=ReplicaSet: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n"
        );
    }

    #[test]
    fn internal_errors_and_core_group() {
        let r = [KindResult {
            gvk: Gvk::new("", "v1", "Pod"),
            outcome: KindOutcome::Error("fail to build env: boom".into()),
        }];
        assert_eq!(
            render_warning(&r),
            "/v1, Kind=Pod: type checking error: fail to build env: boom\n"
        );
        assert_eq!(render_warning(&[]), "");
    }
}
