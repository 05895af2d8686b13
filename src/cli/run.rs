//! `vapcheck check` from the command line to the exit status: the settings file, reading the
//! input, the analysis ([`super::analyse_input`]), the output and the exit code.

use crate::policy::status::TYPE_CHECKED;

use super::emit::{render_json, render_yaml, use_colour};
use super::{
    Analysis, BackendProvider, CheckArgs, CheckEnvironment, EXIT_UNUSABLE, OutputFormat,
    analyse_input, config_file, documents, emit, gate, suppressed,
};

/// Runs `vapcheck check`; returns the exit code. Order: read all input (exit 2 on the first
/// unusable document), require a schema source, load the backends (exit 2 if any is
/// missing), decide what kube-apiserver answers to each policy and binding, check every policy,
/// when there are bindings work out what each will do ([`crate::bindings`]; exit 2 on a
/// malformed param object), print; then exit 2 if a policy could not be checked at all
/// (`TypeChecked=False`), else 3 if the API server would reject any object, else 1 if any
/// policy has warnings, else 0. Binding verdicts do not change the exit code.
pub fn run_check(
    args: &CheckArgs,
    provider: &dyn BackendProvider,
    env: CheckEnvironment<'_>,
) -> i32 {
    let CheckEnvironment {
        stdin,
        stdout,
        stderr,
        stdout_is_terminal,
        no_color,
        kubeconfig_env,
        in_cluster,
    } = env;
    // Write errors on stderr cannot be reported anywhere else; ignoring them is all we can do.
    let mut fail = |msg: &str| {
        let _ = writeln!(stderr, "vapcheck: {msg}");
        EXIT_UNUSABLE
    };
    // `.vapcheck.yaml` (config_file.rs): what the command line leaves unset.
    let from_file;
    let args = match std::env::current_dir()
        .ok()
        .and_then(|cwd| config_file::find(args.config.as_deref(), &cwd))
    {
        None => args,
        Some(path) => {
            let dir = path
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default();
            match config_file::read(&path).and_then(|file| config_file::apply(args, &file, &dir)) {
                Ok(mut merged) => {
                    merged.rules.file = Some(path.clone());
                    from_file = merged;
                    &from_file
                }
                Err(e) => return fail(&e),
            }
        }
    };
    // Every document is read; one that does not decode is a finding (documents.rs). Folders
    // given as FILE are replaced by the files found in them.
    let input = documents::read(&args.files, stdin);
    let args = &CheckArgs {
        files: input.paths.clone(),
        ..args.clone()
    };
    let Analysis { checked, sources } =
        match analyse_input(args, input, provider, kubeconfig_env, in_cluster) {
            Ok(analysis) => analysis,
            Err(e) => return fail(&e),
        };
    let gate = &args.gate;
    let baseline = match gate.baseline.as_deref().map(gate::read_baseline) {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => return fail(&e),
        None => None,
    };
    // Suppressions and per-rule levels (suppressed.rs): looked for only when a source names
    // them or the configuration sets them.
    let suppressing = suppressed::wanted(&args.rules, &sources);
    // Only the formats that place findings in the source need them, and baselines and
    // suppressions.
    let findings = match args.output {
        OutputFormat::Json | OutputFormat::Yaml
            if baseline.is_none() && gate.write_baseline.is_none() && !suppressing =>
        {
            Vec::new()
        }
        _ => emit::findings(&checked, &sources),
    };
    let (suppressions, malformed) = if suppressing {
        suppressed::suppressions(&checked, &findings, &sources, &args.rules)
    } else {
        (Vec::new(), Vec::new())
    };
    let marks_of = |baselined| emit::Marks {
        baselined,
        suppressed: suppressing.then_some(suppressions.as_slice()),
        settings: suppressing.then_some(&args.rules),
    };
    let baselined = baseline.as_ref().map(|b| gate::baselined(&findings, b));
    if let Some(path) = &gate.write_baseline {
        let written = emit::render_sarif_marked(&findings, marks_of(None))
            .and_then(|log| std::fs::write(path, log).map_err(|e| e.to_string()));
        if let Err(e) = written {
            return fail(&format!("--write-baseline {}: {e}", path.display()));
        }
    }
    let marks = marks_of(baselined.as_deref());
    let rendered = match args.output {
        OutputFormat::Json if suppressing => {
            emit::render_json_suppressed(&checked, &findings, &suppressions)
        }
        OutputFormat::Yaml if suppressing => {
            emit::render_yaml_suppressed(&checked, &findings, &suppressions)
        }
        OutputFormat::Json => render_json(&checked),
        OutputFormat::Yaml => render_yaml(&checked),
        OutputFormat::Sarif => emit::render_sarif_marked(&findings, marks),
        OutputFormat::Junit => Ok(emit::render_junit_marked(&checked, &findings, marks)),
        // Annotations for new findings only.
        OutputFormat::Github => Ok(emit::render_github_marked(&findings, marks)),
        OutputFormat::Text => {
            let colour = use_colour(stdout_is_terminal, no_color.as_deref());
            let mut text = emit::render_text(&checked, &findings, colour);
            text.push_str(&emit::render_suppressed_text(&findings, &suppressions));
            if let (Some(old), Some(path)) = (&baselined, &gate.baseline) {
                let n = old.iter().filter(|b| **b).count();
                text.push_str(&format!(
                    "baseline {}: {n} of {} findings baselined, {} new\n",
                    path.display(),
                    old.len(),
                    old.len() - n
                ));
            }
            Ok(text)
        }
    };
    let text = match rendered {
        Ok(t) => t,
        Err(e) => return fail(&format!("cannot render output: {e}")),
    };
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return fail(&format!("cannot write output: {e}"));
    }
    // A policy that could not be checked at all (no schema could be fetched) must not pass.
    let unchecked: Vec<String> = checked
        .iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|k| k.type_ == TYPE_CHECKED && k.status == "False")
            })
        })
        .map(|c| format!("{} ({})", c.name, c.origin))
        .collect();
    if !unchecked.is_empty() {
        return fail(&format!("could not check: {}", unchecked.join(", ")));
    }
    // A suppression that does not parse is never ignored silently.
    if !malformed.is_empty() {
        for m in &malformed {
            let _ = writeln!(stderr, "vapcheck: invalid suppression: {m}");
        }
        return EXIT_UNUSABLE;
    }
    // What counts for the exit status (gate.rs): every finding not suppressed and not in the
    // baseline, at the level the configuration gives its rule, or none when they were just
    // written as a baseline.
    let found = match (&baselined, &gate.write_baseline) {
        (_, Some(_)) => gate::Found::default(),
        (None, None) if !suppressing => gate::Found::of_entries(&checked),
        (old, None) => {
            gate::Found::of_findings_leveled(findings.iter().enumerate().filter_map(|(i, f)| {
                let counts = marks.suppression(i).is_none()
                    && !old.as_ref().is_some_and(|b| b.get(i).is_some_and(|b| *b));
                counts.then(|| (f, args.rules.level(f.rule)))
            }))
        }
    };
    found.exit_code(gate.fail_on.unwrap_or_default())
}
