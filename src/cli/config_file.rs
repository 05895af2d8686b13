//! `.vapcheck.yaml`: the settings of `vapcheck check` for a repository, so that CI, pre-commit
//! and the command line agree without repeating flags.
//!
//! The file is `--config FILE`, else the first `.vapcheck.yaml` found from the working
//! directory upward. A flag given on the command line wins over the file, the file over the
//! default. Paths in the file are relative to the file's folder. An unknown key is an error
//! naming it (a typo must not be ignored silently).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::gate::FailOn;
use super::{CheckArgs, KubeVersion, ModeArg};

/// The name looked for.
pub const FILE_NAME: &str = ".vapcheck.yaml";

/// The keys of the file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    /// `--mode`: `strict` or `extended`.
    pub mode: Option<String>,
    /// `--kubernetes-version`: `X.Y`.
    pub kubernetes_version: Option<String>,
    /// `--openapi`.
    pub openapi: Option<PathBuf>,
    /// `--crd`, each.
    #[serde(default)]
    pub crds: Vec<PathBuf>,
    /// `--fail-on`: `rejected`, `error`, `warning` or `never`.
    pub fail_on: Option<String>,
    /// `--baseline`.
    pub baseline: Option<PathBuf>,
    /// Findings to suppress: `rule` (`RULE` or `RULE@FIELD`), optionally `files` (files or
    /// folders), `objects` (`NAME` or `KIND/NAME`) and a `reason` (no flag).
    #[serde(default)]
    pub ignore: Vec<super::suppressed::IgnoreItem>,
    /// Levels by rule id: `error`, `warning`, `note` or `off` (no flag).
    #[serde(default)]
    pub severity: std::collections::BTreeMap<String, String>,
}

/// The file to read: `explicit`, else the first [`FILE_NAME`] in `cwd` or a folder above it.
pub fn find(explicit: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    cwd.ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// Reads `path`. `Err` names the file and the key or value that is wrong.
pub fn read(path: &Path) -> Result<ConfigFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the file's text (an empty file is no setting).
pub fn parse(text: &str) -> Result<ConfigFile, String> {
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    serde_saphyr::from_str(text).map_err(|e| format!("invalid {FILE_NAME}: {e}"))
}

/// `args` with what the command line leaves unset taken from `file` (read from `dir`).
pub fn apply(args: &CheckArgs, file: &ConfigFile, dir: &Path) -> Result<CheckArgs, String> {
    let mut out = args.clone();
    let rel = |p: &PathBuf| {
        if p.is_absolute() {
            p.clone()
        } else {
            dir.join(p)
        }
    };
    if out.mode.is_none()
        && let Some(m) = &file.mode
    {
        out.mode = Some(match m.as_str() {
            "strict" => ModeArg::Strict,
            "extended" => ModeArg::Extended,
            other => {
                return Err(format!(
                    "mode: {other:?} is not one of \"strict\", \"extended\""
                ));
            }
        });
    }
    if out.kubernetes_version.is_none()
        && let Some(v) = &file.kubernetes_version
    {
        let parsed =
            KubeVersion::parse_minor_release(v).map_err(|e| format!("kubernetesVersion: {e}"))?;
        out.kubernetes_version = Some(parsed);
    }
    if out.openapi.is_none() {
        out.openapi = file.openapi.as_ref().map(rel);
    }
    if out.crds.is_empty() {
        out.crds = file.crds.iter().map(rel).collect();
    }
    if out.gate.fail_on.is_none()
        && let Some(f) = &file.fail_on
    {
        out.gate.fail_on = Some(match f.as_str() {
            "rejected" => FailOn::Rejected,
            "error" => FailOn::Error,
            "warning" => FailOn::Warning,
            "never" => FailOn::Never,
            other => {
                return Err(format!(
                    "failOn: {other:?} is not one of \"rejected\", \"error\", \"warning\", \"never\""
                ));
            }
        });
    }
    if out.gate.baseline.is_none() {
        out.gate.baseline = file.baseline.as_ref().map(rel);
    }
    out.rules = super::suppressed::RuleSettings::parse(&file.ignore, &file.severity, dir)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let e = parse("mode: strict\nfailOnn: never\n").unwrap_err();
        assert!(e.contains("failOnn"), "{e}");
        let file = parse("mode: loose\n").unwrap();
        let dir = Path::new("/repo");
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            args: CheckArgs,
        }
        let args = <Cmd as clap::Parser>::try_parse_from(["check", "x.yaml"])
            .unwrap()
            .args;
        assert_eq!(
            apply(&args, &file, dir).unwrap_err(),
            "mode: \"loose\" is not one of \"strict\", \"extended\""
        );
        assert_eq!(parse("").unwrap(), ConfigFile::default());
        // The command line wins; the file fills the rest, its paths relative to its folder.
        let file = parse("mode: strict\ncrds: [crds/a.yaml]\nfailOn: never\n").unwrap();
        let mut flagged = args.clone();
        flagged.mode = Some(ModeArg::Extended);
        let merged = apply(&flagged, &file, dir).unwrap();
        assert_eq!(merged.mode, Some(ModeArg::Extended));
        assert_eq!(merged.crds, [PathBuf::from("/repo/crds/a.yaml")]);
        assert_eq!(merged.gate.fail_on, Some(FailOn::Never));
    }
}
