//! When `vapcheck check` fails (issue 34, item 3): `--fail-on` (which findings make the exit
//! status non-zero) and baselines (`--baseline FILE`: only findings that are not in it count;
//! `--write-baseline FILE`: record today's findings). A baseline is a SARIF log written by
//! vapcheck; findings are matched by their `partialFingerprints` (`vapcheckFinding/v1`: rule,
//! object kind and name, field, matched kind and message; never the line), one for one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::Value;

use super::emit::fingerprint;
use super::output::CheckedPolicy;
use super::suppressed::Level;
use super::{EXIT_OK, EXIT_REJECTED, EXIT_WARNINGS};
use crate::finding::{Finding, Rule};

/// `--fail-on`: the least severe class of finding that makes `check` fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Exit 3 only for an object kube-apiserver rejects (VAP001), a static-manifest folder it
    /// does not load (VAP002) or a document that does not decode (VAP003); else 0.
    Rejected,
    /// Those (exit 3), and expressions that error at admission on valid objects (VAP110,
    /// exit 1).
    Error,
    /// Those, type-checking warnings (VAP100) and webhook findings (VAP120-VAP127), exit 1:
    /// the default.
    #[default]
    Warning,
    /// Always 0 (unusable input still exits 2).
    Never,
}

/// The options of `check` that decide its exit status.
#[derive(Debug, Clone, Default, Args)]
pub struct GateArgs {
    /// Which findings make the exit status non-zero. rejected: an object kube-apiserver
    /// rejects (VAP001), a static-manifest folder it does not load (VAP002), a document that
    /// does not decode (VAP003), exit 3. error: those, and expressions that error at admission
    /// on valid objects (VAP110), exit 1 when nothing is rejected. warning (default): those,
    /// type-checking warnings (VAP100) and webhook findings (VAP120-VAP127), exit 1. never: exit 0. Kinds not type-checked
    /// (VAP101), cost estimates and binding verdicts never fail the run; unusable input
    /// (nothing readable, a policy that could not be checked at all) always exits 2.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub fail_on: Option<FailOn>,
    /// A SARIF log written by `--write-baseline` (or `-o sarif`): findings whose fingerprint
    /// is in it are shown as baselined (SARIF `baselineState: unchanged`, left out of `-o
    /// github`) and do not count for the exit status; the others are new.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Writes every finding of this run to FILE as a SARIF log, to be given to `--baseline`
    /// later; the run then exits as if they were all baselined.
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
}

/// Which classes of findings are there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    /// Rejected by kube-apiserver, static manifests not loaded, a document not decoded.
    pub rejected: bool,
    /// An expression that errors on valid objects.
    pub error: bool,
    /// A type-checking warning.
    pub warning: bool,
}

impl Found {
    /// What the entries hold (the exit status `check` always had).
    pub fn of_entries(checked: &[CheckedPolicy]) -> Self {
        Found {
            rejected: checked.iter().any(|c| !c.api_server.accepted()),
            error: checked
                .iter()
                .any(|c| c.status.as_ref().is_some_and(|s| !s.runtime.is_empty())),
            warning: checked.iter().any(|c| {
                !c.advice.is_empty() || c.status.as_ref().is_some_and(|s| s.has_warnings())
            }),
        }
    }

    /// What these findings hold.
    pub fn of_findings<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Self {
        let mut found = Found::default();
        for f in findings {
            match f.rule {
                Rule::Rejected | Rule::StaticManifests | Rule::NotDecoded => found.rejected = true,
                Rule::RuntimeError => found.error = true,
                Rule::TypeWarning | Rule::Webhook(_) => found.warning = true,
                Rule::KindNotChecked => {}
            }
        }
        found
    }

    /// What these findings hold, each at the level `.vapcheck.yaml` gives its rule: a rule's
    /// own level keeps its class (VAP001-VAP003 exit 3), another `error` counts as an
    /// error, `warning` as a warning, `note` (and `off`) not at all.
    pub fn of_findings_leveled<'a>(
        findings: impl IntoIterator<Item = (&'a Finding, Option<Level>)>,
    ) -> Self {
        let mut found = Found::default();
        for (f, level) in findings {
            let own = Found::of_findings([f]);
            let set = match level.and_then(Level::sarif) {
                None => {
                    if level == Some(Level::Off) {
                        continue;
                    }
                    own
                }
                Some(l) if l == f.rule.level() => own,
                Some("error") => Found {
                    error: true,
                    ..Found::default()
                },
                Some("warning") => Found {
                    warning: true,
                    ..Found::default()
                },
                Some(_) => Found::default(),
            };
            found.rejected |= set.rejected;
            found.error |= set.error;
            found.warning |= set.warning;
        }
        found
    }

    /// The exit status for `fail_on`: 3 when something rejected counts, else 1 when a lesser
    /// finding counts, else 0.
    pub fn exit_code(self, fail_on: FailOn) -> i32 {
        let (rejected, lesser) = match fail_on {
            FailOn::Never => (false, false),
            FailOn::Rejected => (self.rejected, false),
            FailOn::Error => (self.rejected, self.error),
            FailOn::Warning => (self.rejected, self.error || self.warning),
        };
        if rejected {
            EXIT_REJECTED
        } else if lesser {
            EXIT_WARNINGS
        } else {
            EXIT_OK
        }
    }
}

/// The fingerprints of a baseline, each with how many findings carry it.
pub type Baseline = BTreeMap<String, usize>;

/// Reads a baseline: every `partialFingerprints."vapcheckFinding/v1"` of every result of
/// every run of a SARIF log. Errors name the file and what is wrong.
pub fn read_baseline(path: &Path) -> Result<Baseline, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--baseline {shown}: cannot read: {e}"))?;
    let log: Value = serde_json::from_str(&text)
        .map_err(|e| format!("--baseline {shown}: not a SARIF log (invalid JSON: {e})"))?;
    let Some(runs) = log.get("runs").and_then(Value::as_array) else {
        return Err(format!(
            "--baseline {shown}: not a SARIF log (no `runs` array)"
        ));
    };
    let mut baseline = Baseline::new();
    for (i, run) in runs.iter().enumerate() {
        let results = match run.get("results") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(results)) => results,
            Some(_) => {
                return Err(format!(
                    "--baseline {shown}: runs[{i}].results: must be an array"
                ));
            }
        };
        for (j, r) in results.iter().enumerate() {
            let Some(fp) = r
                .get("partialFingerprints")
                .and_then(|p| p.get(super::emit::FINGERPRINT_KEY))
                .and_then(Value::as_str)
            else {
                return Err(format!(
                    "--baseline {shown}: runs[{i}].results[{j}].partialFingerprints.\"{}\": missing (not written by vapcheck?)",
                    super::emit::FINGERPRINT_KEY
                ));
            };
            *baseline.entry(fp.to_owned()).or_default() += 1;
        }
    }
    Ok(baseline)
}

/// Whether each finding is in the baseline (`true`: baselined), matching fingerprints one for
/// one in output order (a fingerprint recorded once excuses one finding).
pub fn baselined(findings: &[Finding], baseline: &Baseline) -> Vec<bool> {
    let mut left = baseline.clone();
    findings
        .iter()
        .map(|f| match left.get_mut(&fingerprint(f)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_per_level() {
        let all = Found {
            rejected: true,
            error: true,
            warning: true,
        };
        let warning = Found {
            warning: true,
            ..Found::default()
        };
        let error = Found {
            error: true,
            ..Found::default()
        };
        let table = [
            (all, [3, 3, 3, 0]),
            (warning, [0, 0, 1, 0]),
            (error, [0, 1, 1, 0]),
            (Found::default(), [0, 0, 0, 0]),
        ];
        for (found, codes) in table {
            let got = [
                FailOn::Rejected,
                FailOn::Error,
                FailOn::Warning,
                FailOn::Never,
            ]
            .map(|l| found.exit_code(l));
            assert_eq!(got, codes, "{found:?}");
        }
    }

    #[test]
    fn bad_baselines_name_the_file_and_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.sarif");
        std::fs::write(&p, r#"{"runs": [{"results": [{"ruleId": "X"}]}]}"#).unwrap();
        let e = read_baseline(&p).unwrap_err();
        assert!(
            e.ends_with(
                "b.sarif: runs[0].results[0].partialFingerprints.\"vapcheckFinding/v1\": missing (not written by vapcheck?)"
            ),
            "{e}"
        );
        std::fs::write(&p, "[]").unwrap();
        assert!(read_baseline(&p).unwrap_err().contains("no `runs` array"));
        std::fs::write(
            &p,
            r#"{"runs": [{"results": [{"partialFingerprints": {"vapcheckFinding/v1": "a"}}, {"partialFingerprints": {"vapcheckFinding/v1": "a"}}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            read_baseline(&p).unwrap(),
            Baseline::from([("a".into(), 2)])
        );
    }
}
