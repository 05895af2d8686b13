//! The `vapcheck check` command: read policies, check them through the backends, print the
//! statuses. The backends (schemas, REST mapping, CEL checking) are supplied by a
//! [`BackendProvider`]; see `docs/policy-checking.md` for the contract.

pub mod config_file;
pub mod discovery;
pub mod documents;
pub mod emit;
pub mod gate;
pub mod gatekeeper;
pub mod input;
pub mod kyverno;
pub mod live;
pub mod mutating;
pub mod output;
pub mod positions;
pub mod reuse;
pub mod suppressed;
pub mod webhooks;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::bindings::{BindingInput, ParamScope, PolicyInput, analyse, group_of, param_kind_gvk};
use crate::policy::check::check_policy_with_params;
use crate::policy::runtime_check::ParamBinding;
use crate::policy::status::TYPE_CHECKED;
use crate::policy::{
    Backends, CheckOptions, DEFAULT_EXTENDED_KIND_LIMIT, Discovery, DiscoveryRestMapper,
    ExpressionChecker, Gvk, Mode, RestMapper, SchemaSource,
};

use self::emit::{render_json, render_yaml, use_colour};
use self::input::{InputError, InputObject, InputOther, InputPolicy, read_all};
use self::output::{ApiServerVerdict, CheckedPolicy};
use crate::apiserver::static_manifests::{self, ManifestFile, StaticLoad};
use crate::apiserver::{self, Server};

/// Exit code: no warnings.
pub const EXIT_OK: i32 = 0;
/// Exit code: at least one warning.
pub const EXIT_WARNINGS: i32 = 1;
/// Exit code: unusable input or no usable backend.
pub const EXIT_UNUSABLE: i32 = 2;
/// Exit code: kube-apiserver would reject at least one object (whatever the warnings).
pub const EXIT_REJECTED: i32 = 3;

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Exactly what kube-controller-manager reports.
    Strict,
    /// Strict plus more expressions, kinds and result types.
    Extended,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Strict => Mode::Strict,
            ModeArg::Extended => Mode::Extended,
        }
    }
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For humans.
    Text,
    /// A JSON array, one entry per policy.
    Json,
    /// The same array as YAML.
    Yaml,
    /// SARIF 2.1.0 (GitHub code scanning), each finding at its line and column.
    Sarif,
    /// JUnit XML (GitLab, Jenkins): a test suite per object, a failing case per field.
    Junit,
    /// GitHub Actions workflow commands (`::error file=..,line=..,col=..::`).
    Github,
}

/// A Kubernetes version as written (`--kubernetes-version`, `kubernetesVersion`): the core's
/// one type of it.
pub use crate::k8s_env::KubernetesVersion as KubeVersion;

/// Arguments of `vapcheck check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Folder laid out like the API server's /openapi/v3 (schemas of built-in kinds).
    #[arg(long, value_name = "DIR")]
    pub openapi: Option<PathBuf>,
    /// CustomResourceDefinition file(s) supplying schemas; repeatable.
    #[arg(long = "crd", value_name = "FILE")]
    pub crds: Vec<PathBuf>,
    /// Kubeconfig of a live cluster to read schemas and discovery from.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// strict: exactly what kube-controller-manager reports; extended: more [default:
    /// extended, or `mode` of .vapcheck.yaml].
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Kubernetes version of the target cluster (X.Y), for functions newer than it.
    #[arg(long, value_name = "X.Y", value_parser = KubeVersion::parse_minor_release)]
    pub kubernetes_version: Option<KubeVersion>,
    /// Extended mode: most kinds checked per policy.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_EXTENDED_KIND_LIMIT)]
    pub kind_limit: usize,
    /// Extended mode: skip the CEL cost estimates (no estimates in the output, no cost
    /// findings).
    #[arg(long)]
    pub no_cost_estimates: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// The stored versions of the objects (policies and bindings, matched by kind and name):
    /// their verdict is for an update instead of a create. Repeatable.
    #[arg(long = "previous", value_name = "FILE")]
    pub previous: Vec<PathBuf>,
    /// A folder of static manifests (the ValidatingAdmissionPolicy plugin's
    /// `staticManifestsDir`): checked as kube-apiserver's loader reads it, and its policies
    /// type-checked.
    #[arg(long = "static-manifests", value_name = "DIR")]
    pub static_manifests: Option<PathBuf>,
    /// Settings file (mode, kubernetesVersion, openapi, crds, failOn, baseline, ignore,
    /// severity; the command line wins over it) [default: the first .vapcheck.yaml in the working directory or a
    /// folder above it].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// When the run fails: `--fail-on`, `--baseline`, `--write-baseline` (gate.rs).
    #[command(flatten)]
    pub gate: gate::GateArgs,
    /// `ignore:` and `severity:` of .vapcheck.yaml (suppressed.rs; no flags).
    #[arg(skip)]
    pub rules: suppressed::RuleSettings,
    /// Policy files (YAML or JSON, one or many documents): ValidatingAdmissionPolicies,
    /// MutatingAdmissionPolicies, their bindings, and Validating and
    /// MutatingWebhookConfigurations; `-` reads standard input; a folder stands for the .yaml,
    /// .yml and .json files under it.
    #[arg(required_unless_present = "static_manifests", value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

impl CheckArgs {
    /// `--mode`, else extended.
    pub fn mode(&self) -> ModeArg {
        self.mode.unwrap_or(ModeArg::Extended)
    }
}

/// Where schemas come from, as given on the command line and in the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaOptions {
    /// `--openapi`.
    pub openapi: Option<PathBuf>,
    /// The built-in schemas of this Kubernetes minor (`1.37`), used when no `--openapi` folder
    /// or cluster is given (src/schema/embedded.rs).
    pub built_in: Option<String>,
    /// `--crd`.
    pub crds: Vec<PathBuf>,
    /// `--kubeconfig`, else `$KUBECONFIG`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// Running in a pod (`KUBERNETES_SERVICE_HOST` set).
    pub in_cluster: bool,
    /// `--kubernetes-version`.
    pub kubernetes_version: Option<KubeVersion>,
}

impl SchemaOptions {
    /// Whether any schema source was given.
    pub fn has_source(&self) -> bool {
        self.openapi.is_some()
            || self.built_in.is_some()
            || !self.crds.is_empty()
            || self.kubeconfig.is_some()
            || self.in_cluster
    }
}

/// The backends of a check run, owned.
pub struct LoadedBackends {
    /// Resource → kinds.
    pub rest_mapper: Box<dyn RestMapper>,
    /// Discovery (extended mode wildcard/subresource expansion), if available.
    pub discovery: Option<Box<dyn Discovery>>,
    /// Schemas.
    pub schemas: Box<dyn SchemaSource>,
    /// CEL parser and checker.
    pub checker: Box<dyn ExpressionChecker>,
}

/// Builds the backends from the schema options. `Err` is a message for the user; the command
/// then exits with [`EXIT_UNUSABLE`].
pub trait BackendProvider {
    /// Loads schemas, mapping and the checker.
    fn load(&self, options: &SchemaOptions) -> Result<LoadedBackends, String>;
}

/// A provider for a build without backends: always refuses, naming what is missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct MissingBackends;

impl BackendProvider for MissingBackends {
    fn load(&self, _options: &SchemaOptions) -> Result<LoadedBackends, String> {
        Err(
            "this vapcheck build has no schema and CEL checking backends wired in; cannot check"
                .into(),
        )
    }
}

/// The schema source and checker of an offline run, built from the options and the CRDs read
/// from `--crd` (supplied by whoever wires `src/schema` and `crates/cel` in).
pub type SchemaAndCheckerFactory =
    dyn Fn(
        &SchemaOptions,
        &[CustomResourceDefinition],
    ) -> Result<(Box<dyn SchemaSource>, Box<dyn ExpressionChecker>), String>;

/// Offline backends: REST mapping and discovery from `--openapi` and `--crd`
/// ([`discovery::offline_discovery`]); schemas and checker from `factory`. Without `--openapi`
/// or `--crd` it refuses with a message; the binary then uses [`live::LiveProvider`].
pub struct OfflineProvider<'a> {
    /// Builds the schema source and the checker.
    pub factory: &'a SchemaAndCheckerFactory,
}

impl BackendProvider for OfflineProvider<'_> {
    fn load(&self, options: &SchemaOptions) -> Result<LoadedBackends, String> {
        if options.openapi.is_none() && options.built_in.is_none() && options.crds.is_empty() {
            return Err("no --openapi DIR or --crd FILE to read schemas from".into());
        }
        let crds = discovery::load_crds(&options.crds)?;
        let groups = discovery::offline_discovery(
            options.openapi.as_deref(),
            options.built_in.as_deref(),
            &crds,
        )?;
        let (schemas, checker) = (self.factory)(options, &crds)?;
        let mapper = DiscoveryRestMapper::new(groups);
        Ok(LoadedBackends {
            rest_mapper: Box::new(mapper.clone()),
            discovery: Some(Box::new(mapper)),
            schemas,
            checker,
        })
    }
}

/// The process environment the command reads, injectable for tests.
pub struct CheckEnvironment<'a> {
    /// Standard input (for `-`).
    pub stdin: &'a mut dyn Read,
    /// Standard output.
    pub stdout: &'a mut dyn Write,
    /// Standard error.
    pub stderr: &'a mut dyn Write,
    /// Whether stdout is a terminal.
    pub stdout_is_terminal: bool,
    /// `$NO_COLOR`.
    pub no_color: Option<OsString>,
    /// `$KUBECONFIG`.
    pub kubeconfig_env: Option<OsString>,
    /// `$KUBERNETES_SERVICE_HOST` is set.
    pub in_cluster: bool,
}

/// Reads every policy of every FILE (stdin once for `-`), in order.
pub fn read_inputs(
    files: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<Vec<InputPolicy>, InputError> {
    Ok(read_input_objects(files, stdin)?
        .into_iter()
        .filter_map(|o| match o {
            InputObject::Policy(p) => Some(p),
            InputObject::Binding(_) => None,
        })
        .collect())
}

/// Reads every policy and binding of every FILE (stdin once for `-`), in order.
pub fn read_input_objects(
    files: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<Vec<InputObject>, InputError> {
    Ok(read_input_all(files, stdin)?.0)
}

/// Reads every policy and binding of every FILE (stdin once for `-`), in order, and every
/// other object beside them (candidate param objects); and each source's text by its name.
#[allow(clippy::type_complexity)]
pub fn read_input_all(
    files: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<(Vec<InputObject>, Vec<InputOther>, BTreeMap<String, String>), InputError> {
    let mut texts = BTreeMap::new();
    let mut policies = Vec::new();
    let mut others = Vec::new();
    let mut stdin_read = false;
    for f in files {
        let (source, text) = if f.as_os_str() == "-" {
            let source = "<stdin>".to_owned();
            if stdin_read {
                continue;
            }
            stdin_read = true;
            let mut buf = Vec::new();
            stdin
                .read_to_end(&mut buf)
                .map_err(|e| io_error(&source, &e))?;
            let text = String::from_utf8(buf).map_err(|_| not_utf8(&source))?;
            (source, text)
        } else {
            let source = f.display().to_string();
            let bytes = std::fs::read(f).map_err(|e| io_error(&source, &e))?;
            let text = String::from_utf8(bytes).map_err(|_| not_utf8(&source))?;
            (source, text)
        };
        let (objects, other) = read_all(&source, &text)?;
        policies.extend(objects);
        others.extend(other);
        texts.insert(source, text);
    }
    Ok((policies, others, texts))
}

/// What kube-apiserver answers to `object`: a create, or an update of `stored`.
fn api_server_verdict(
    object: &InputObject,
    stored: Option<&InputObject>,
    server: Server,
) -> ApiServerVerdict {
    let errors = match (object, stored) {
        (InputObject::Policy(p), Some(InputObject::Policy(old))) => {
            apiserver::validate_policy_update(&p.policy, &old.policy, server)
        }
        (InputObject::Policy(p), _) => apiserver::validate_policy_create(&p.policy, server),
        (InputObject::Binding(b), Some(InputObject::Binding(_))) => {
            apiserver::validate_binding_update(&b.binding)
        }
        (InputObject::Binding(b), _) => apiserver::validate_binding_create(&b.binding, server),
    };
    ApiServerVerdict::new(
        server.minor,
        stored.is_some(),
        errors.iter().map(Into::into).collect(),
    )
}

/// Lists a static-manifest folder as the loader does (`LoadFiles`: regular entries whose
/// extension is .yaml, .yml or .json, in name order) and reads each file; the paths are
/// `filepath.Join(dir, name)`.
fn read_static_dir(dir: &std::path::Path) -> Result<Vec<ManifestFile>, String> {
    let shown = dir.display().to_string();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("--static-manifests: cannot read folder {shown}: {e}"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("--static-manifests: cannot read folder {shown}: {e}"))?;
        // os.ReadDir's IsDir does not follow symbolic links; neither does file_type.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_dir && static_manifests::is_manifest_file(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| ManifestFile {
            path: go_join(&shown, &name),
            contents: std::fs::read(dir.join(&name)).map_err(|e| e.to_string()),
        })
        .collect())
}

/// `filepath.Join(dir, name)` for a plain file name: the folder cleaned of `.` and empty
/// components.
fn go_join(dir: &str, name: &str) -> String {
    let absolute = dir.starts_with('/');
    let parts: Vec<&str> = dir
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let mut out = parts.join("/");
    if absolute {
        out.insert(0, '/');
    }
    if out.is_empty() || out == "/" {
        return format!("{out}{name}");
    }
    format!("{out}/{name}")
}

/// The entries of a static-manifest folder: one for the folder (every loader error), then
/// each policy and binding that decoded, with the errors about it.
fn static_entries(
    dir: &str,
    load: &StaticLoad,
    server: Server,
) -> Vec<(InputObject, ApiServerVerdict)> {
    // The loader's errors are about files, not fields.
    let verdict = |causes: Vec<String>| ApiServerVerdict {
        server_minor: server.minor,
        update: false,
        causes: causes
            .into_iter()
            .map(|c| crate::finding::Cause::new("", c))
            .collect(),
        static_dir: Some(dir.to_owned()),
    };
    let origin = |l: &static_manifests::Location| input::Origin {
        source: l.file.clone(),
        document: l.document.unwrap_or(0),
        item: l.item,
    };
    let mut out = Vec::new();
    for p in &load.policies {
        out.push((
            InputObject::Policy(InputPolicy {
                origin: origin(&p.location),
                policy: p.object.clone(),
            }),
            verdict(p.errors.clone()),
        ));
    }
    for b in &load.bindings {
        out.push((
            InputObject::Binding(input::InputBinding {
                origin: origin(&b.location),
                binding: b.object.clone(),
            }),
            verdict(b.errors.clone()),
        ));
    }
    out
}

fn io_error(source: &str, e: &std::io::Error) -> InputError {
    InputError {
        file: source.to_owned(),
        document: None,
        item: None,
        line: None,
        message: format!("cannot read: {e}"),
    }
}

fn not_utf8(source: &str) -> InputError {
    InputError {
        file: source.to_owned(),
        document: None,
        item: None,
        line: None,
        message: "not UTF-8 text".into(),
    }
}

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

/// What a check computes before it renders anything: an entry per object (and per document
/// that does not decode), in output order, and the text of each source by its name (for the
/// positions of the findings, [`emit::findings`]).
#[derive(Debug)]
pub struct Analysis {
    /// The entries.
    pub checked: Vec<CheckedPolicy>,
    /// The text of each source read.
    pub sources: BTreeMap<String, String>,
}

/// The analysis of [`run_check`] on input already read: `args` are the settings with
/// `.vapcheck.yaml` applied and `files` the paths of `input` (their order is the output's).
/// `Err` is the message `check` exits 2 with. `kubeconfig_env` (`$KUBECONFIG`) and
/// `in_cluster` choose a live cluster when no `--openapi` is given.
pub fn analyse_input(
    args: &CheckArgs,
    input: documents::Input,
    provider: &dyn BackendProvider,
    kubeconfig_env: Option<OsString>,
    in_cluster: bool,
) -> Result<Analysis, String> {
    analyse_input_reusing(args, input, provider, kubeconfig_env, in_cluster, None)
}

/// [`analyse_input`], taking the backends and the unchanged policies' statuses from `reuse`
/// when given (and leaving this check's there for the next; [`reuse::Reuse`]).
pub fn analyse_input_reusing(
    args: &CheckArgs,
    input: documents::Input,
    provider: &dyn BackendProvider,
    kubeconfig_env: Option<OsString>,
    in_cluster: bool,
    reuse: Option<&mut reuse::Reuse>,
) -> Result<Analysis, String> {
    let documents::Input {
        objects: inputs,
        others,
        texts: input_sources,
        mut undecoded,
        read,
        ..
    } = input;
    let static_files = match &args.static_manifests {
        Some(dir) => match read_static_dir(dir) {
            Ok(files) => Some((dir.display().to_string(), files)),
            Err(e) => return Err(e),
        },
        None => None,
    };
    // MutatingAdmissionPolicies and bindings: the API server's verdict, and type checking of
    // the policies (mutating.rs).
    let (mutating_objects, bad_mutating) = mutating::read_lenient(&others);
    undecoded.extend(bad_mutating);
    // Validating and MutatingWebhookConfigurations: the API server's verdict and their match
    // conditions (webhooks.rs).
    let (webhook_objects, bad_webhooks) = webhooks::read_lenient(&others);
    undecoded.extend(bad_webhooks);
    // Gatekeeper ConstraintTemplates with K8sNativeValidation code (gatekeeper.rs).
    let (templates, bad_templates) = gatekeeper::read_lenient(&others);
    undecoded.extend(bad_templates);
    // Kyverno's ValidatingPolicies (kyverno.rs).
    let (kyverno_policies, bad_kyverno) = kyverno::read_lenient(&others);
    undecoded.extend(bad_kyverno);
    documents::locate(&mut undecoded, &input_sources);
    if let Some(message) = documents::nothing_to_check(
        read,
        &undecoded,
        inputs.len()
            + mutating_objects.len()
            + webhook_objects.len()
            + templates.len()
            + kyverno_policies.len(),
        others.len(),
    )
    .filter(|_| static_files.is_none())
    {
        return Err(message);
    }
    let (previous, previous_mutating, previous_webhooks) =
        match read_input_all(&args.previous, &mut std::io::empty()) {
            Ok((objects, others, _)) => match (mutating::read(&others), webhooks::read(&others)) {
                (Ok(m), Ok(w)) => (objects, m, w),
                (Err(e), _) | (_, Err(e)) => return Err(format!("--previous: {e}")),
            },
            Err(e) => return Err(format!("--previous: {e}")),
        };
    let server = match args.kubernetes_version {
        None => Server::PINNED,
        Some(v) if v.major == 1 && (30..=Server::PINNED.minor).contains(&v.minor) => {
            Server { minor: v.minor }
        }
        Some(v) => {
            return Err(format!(
                "Kubernetes {}.{} is not supported (supported: 1.30..1.{})",
                v.major,
                v.minor,
                Server::PINNED.minor
            ));
        }
    };
    // The static folder's objects carry the loader's verdict instead of a create's.
    let mut static_load = None;
    let mut objects: Vec<(InputObject, Option<ApiServerVerdict>)> =
        inputs.into_iter().map(|o| (o, None)).collect();
    if let Some((dir, files)) = &static_files {
        let load = static_manifests::load(dir, files, server);
        for (o, v) in static_entries(dir, &load, server) {
            objects.push((o, Some(v)));
        }
        static_load = Some((dir.clone(), load));
    }
    let has_policies = mutating_objects
        .iter()
        .any(|o| matches!(o, mutating::MutatingObject::Policy(..)))
        || (args.mode() == ModeArg::Extended
            && webhook_objects.iter().any(|o| {
                o.config
                    .webhooks()
                    .iter()
                    .any(|w| !w.match_conditions().is_empty())
            }))
        // `matchPolicy: Exact` is judged against discovery (VAP123).
        || webhook_objects.iter().any(|o| {
            o.config
                .webhooks()
                .iter()
                .any(|w| w.match_policy.as_deref() == Some("Exact"))
        })
        || !templates.is_empty()
        || !kyverno_policies.is_empty()
        || objects
            .iter()
            .any(|(o, _)| matches!(o, InputObject::Policy(_)));
    let mut options = SchemaOptions {
        openapi: args.openapi.clone(),
        built_in: None,
        crds: args.crds.clone(),
        kubeconfig: args
            .kubeconfig
            .clone()
            .or_else(|| kubeconfig_env.filter(|v| !v.is_empty()).map(PathBuf::from)),
        context: args.context.clone(),
        in_cluster,
        kubernetes_version: args.kubernetes_version,
    };
    // Bindings alone need no schemas: only the API server's verdict is computed for them.
    let mut fresh = None;
    let mut pass = None;
    if has_policies {
        // No --openapi and no cluster: the built-in kinds of the target version, compiled in
        // (--crd adds to them); each document is read when a kind of it is needed.
        if options.openapi.is_none() && options.kubeconfig.is_none() && !options.in_cluster {
            options.built_in = Some(format!("1.{}", server.minor));
        }
        match reuse {
            Some(reuse) => pass = Some(reuse.begin(&options, provider)?),
            None => fresh = Some(provider.load(&options)?),
        }
    }
    let loaded: Option<&LoadedBackends> = pass.as_ref().map(|p| p.backends).or(fresh.as_ref());
    let backends = loaded.map(|loaded| Backends {
        rest_mapper: loaded.rest_mapper.as_ref(),
        discovery: loaded.discovery.as_deref(),
        schemas: loaded.schemas.as_ref(),
        checker: loaded.checker.as_ref(),
    });
    let check_options = CheckOptions {
        mode: args.mode().into(),
        kind_limit: args.kind_limit,
        estimate_costs: !args.no_cost_estimates,
    };
    let mut checked: Vec<CheckedPolicy> = Vec::new();
    if let Some((dir, load)) = &static_load {
        let causes = load
            .errors
            .iter()
            .map(|e| crate::finding::Cause::new("", e.message.clone()))
            .collect();
        checked.push(CheckedPolicy::new(
            output::STATIC_MANIFESTS_KIND,
            dir.clone(),
            input::Origin {
                source: dir.clone(),
                document: 0,
                item: None,
            },
            ApiServerVerdict {
                static_dir: Some(dir.clone()),
                ..ApiServerVerdict::new(server.minor, false, causes)
            },
            None,
        ));
    }
    let verdicts: Vec<ApiServerVerdict> = objects
        .iter()
        .map(|(o, static_verdict)| match static_verdict {
            Some(v) => v.clone(),
            None => {
                let stored = previous
                    .iter()
                    .find(|p| p.kind() == o.kind() && p.name() == o.name());
                api_server_verdict(o, stored, server)
            }
        })
        .collect();
    // The params each binding of the files evaluates its policy with (runtime safety on
    // `params`, extended mode only).
    let params_by_policy = if check_options.mode == Mode::Extended {
        let n = objects.iter().take_while(|(_, v)| v.is_none()).count();
        let inputs: Vec<&InputObject> = objects.iter().take(n).map(|(o, _)| o).collect();
        let accepted: Vec<bool> = verdicts.iter().take(n).map(|v| v.accepted()).collect();
        let live = options.openapi.is_none() && options.crds.is_empty();
        param_bindings(&inputs, &accepted, &others, loaded, live)
    } else {
        BTreeMap::new()
    };
    checked.extend(objects.iter().zip(verdicts).map(|((o, _), api_server)| {
        let status = match (o, &backends) {
            (InputObject::Policy(p), Some(b)) => {
                let pbs = params_by_policy.get(o.name()).cloned().unwrap_or_default();
                let check = |pbs| {
                    check_policy_with_params(
                        &p.policy,
                        &check_options,
                        b,
                        &mut Default::default(),
                        pbs,
                    )
                };
                Some(match pass.as_mut() {
                    // The params the policy's bindings evaluate it with are part of what its
                    // result depends on (runtime safety on `params`): part of the key.
                    Some(pass) => {
                        pass.status(&(&p.policy, &pbs), &check_options, || check(pbs.clone()))
                    }
                    None => check(pbs),
                })
            }
            _ => None,
        };
        CheckedPolicy::new(
            o.kind(),
            o.name().to_owned(),
            o.origin().clone(),
            api_server,
            status,
        )
    }));
    // What each binding will do, for the objects of the files (the static folder's, which
    // the API server loads at startup from its own source, get no binding verdict yet). They
    // come first in `objects`, after the folder's own entry in `checked`.
    let file_objects: Vec<&InputObject> = objects
        .iter()
        .take_while(|(_, v)| v.is_none())
        .map(|(o, _)| o)
        .collect();
    if file_objects
        .iter()
        .any(|o| matches!(o, InputObject::Binding(_)))
    {
        let live = options.openapi.is_none() && options.crds.is_empty();
        let offset = usize::from(static_load.is_some());
        let entries = &mut checked[offset..offset + file_objects.len()];
        if let Err(e) = add_binding_effects(&file_objects, &others, entries, loaded, live) {
            return Err(e.to_string());
        }
    }
    let files = documents::source_names(&args.files);
    let keep_first = usize::from(static_load.is_some());
    if !mutating_objects.is_empty() {
        let mut entries: Vec<CheckedPolicy> = mutating_objects
            .iter()
            .map(|o| {
                let mut entry = mutating::verdict(o, &previous_mutating, server);
                entry.status = match (o, &backends, pass.as_mut()) {
                    (mutating::MutatingObject::Policy(_, p), Some(b), Some(pass)) => {
                        Some(pass.status(p, &check_options, || {
                            crate::mutating::check_mutating_policy(p, &check_options, b)
                        }))
                    }
                    _ => mutating::type_check(o, &check_options, backends.as_ref()),
                };
                entry
            })
            .collect();
        // What each MutatingAdmissionPolicyBinding will do, as for validating bindings.
        if mutating_objects
            .iter()
            .any(|o| matches!(o, mutating::MutatingObject::Binding(..)))
        {
            let live = options.openapi.is_none() && options.crds.is_empty();
            if let Err(e) =
                add_mutating_binding_effects(&mutating_objects, &others, &mut entries, loaded, live)
            {
                return Err(e.to_string());
            }
        }
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !webhook_objects.is_empty() {
        let entries: Vec<CheckedPolicy> = webhook_objects
            .iter()
            .map(|o| {
                let mut entry = webhooks::verdict(o, &previous_webhooks, server);
                entry.status = webhooks::type_check(o, &check_options, backends.as_ref());
                if let Some(groups) = backends
                    .as_ref()
                    .and_then(|b| b.discovery)
                    .and_then(|d| d.api_groups().ok())
                {
                    entry
                        .advice
                        .extend(crate::webhooks::exact_match_bypass(&o.config, &groups));
                }
                entry
            })
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !templates.is_empty() {
        let constraints = gatekeeper::constraints(&others);
        let entries = templates
            .iter()
            .map(|o| gatekeeper::check(o, &constraints, server, &check_options, backends.as_ref()))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !kyverno_policies.is_empty() {
        let entries = kyverno_policies
            .iter()
            .map(|o| kyverno::check(o, server, &check_options, backends.as_ref()))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !undecoded.is_empty() {
        let entries = undecoded
            .iter()
            .map(|u| documents::entry(u, server.minor))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    let mut sources = input_sources;
    if let Some((_, files)) = &static_files {
        for f in files {
            if let Ok(bytes) = &f.contents
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                sources.insert(f.path.clone(), text.to_owned());
            }
        }
    }
    Ok(Analysis { checked, sources })
}

/// The findings of `vapcheck check` on `sources` (each a name and its bytes) at their places
/// in them: [`analyse_input`] (the analysis of [`run_check`]) and then [`emit::findings`], the list
/// the SARIF and GitHub formats render. `args` are the settings (`.vapcheck.yaml` applied by
/// the caller); its `files` are replaced by the sources' names. Used by the editor server
/// (`crate::lsp`), which gives the unsaved text of open buffers. No live cluster unless
/// `args.kubeconfig` names one. The backends and the statuses of the policies not changed
/// since the last check come from `reuse` ([`reuse::Reuse`]).
pub fn check_sources(
    sources: Vec<documents::Source>,
    args: &CheckArgs,
    provider: &dyn BackendProvider,
    reuse: &mut reuse::Reuse,
) -> Result<(Analysis, Vec<crate::finding::Finding>), String> {
    let paths: Vec<PathBuf> = sources.iter().map(|s| PathBuf::from(&s.name)).collect();
    let input = documents::from_sources(paths.clone(), Vec::new(), sources);
    let args = CheckArgs {
        files: paths,
        ..args.clone()
    };
    reuse.checked = 0;
    reuse.reused = 0;
    let analysis = analyse_input_reusing(&args, input, provider, None, false, Some(reuse))?;
    let findings = emit::findings(&analysis.checked, &analysis.sources);
    Ok((analysis, findings))
}

/// The scope of a param kind from the backends' discovery: a served, non-subresource resource
/// of that group, version and kind. Not found: `NoSuchKind` against a cluster (its REST
/// mapping fails there too), `Unknown` offline (its CRD may just not have been given).
fn param_scope(g: &Gvk, loaded: Option<&LoadedBackends>, live: bool) -> ParamScope {
    let Some(Ok(groups)) = loaded
        .and_then(|l| l.discovery.as_deref())
        .map(|d| d.api_groups())
    else {
        return ParamScope::Unknown;
    };
    if let Some(r) = crate::bindings::param_resource(&groups, g) {
        return if r.namespaced {
            ParamScope::Namespaced
        } else {
            ParamScope::Cluster
        };
    }
    if live {
        ParamScope::NoSuchKind
    } else {
        ParamScope::Unknown
    }
}

/// What `params` each binding of `inputs` evaluates its policy with, by policy name: for a
/// stored policy with a `paramKind` and a stored binding of it that evaluates it and denies
/// (`validationActions` has `Deny`; a Warn or Audit binding does not deny on an error), null
/// when the binding has no `paramRef`, else each param object its `paramRef` resolves to
/// ([`crate::bindings::analyse`]'s `params`), as the input gives it. Malformed param objects
/// give nothing here ([`add_binding_effects`] reports them).
fn param_bindings(
    inputs: &[&InputObject],
    accepted: &[bool],
    others: &[InputOther],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> BTreeMap<String, Vec<ParamBinding>> {
    let mut out: BTreeMap<String, Vec<ParamBinding>> = BTreeMap::new();
    let kind_of = |p: &InputPolicy| {
        p.policy
            .spec
            .as_ref()
            .and_then(|s| s.param_kind.as_ref())
            .and_then(param_kind_gvk)
    };
    let param_kinds: Vec<Gvk> = inputs
        .iter()
        .filter_map(|o| match o {
            InputObject::Policy(p) => kind_of(p),
            InputObject::Binding(_) => None,
        })
        .collect();
    if param_kinds.is_empty() {
        return out;
    }
    let Ok(params) = param_objects(&param_kinds, others) else {
        return out;
    };
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    for (o, &stored) in inputs.iter().zip(accepted) {
        match o {
            InputObject::Policy(p) => policies.push(PolicyInput {
                policy: &p.policy,
                stored,
                warning_kinds: Vec::new(),
                param_scope: kind_of(p)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live)),
            }),
            InputObject::Binding(b) => bindings.push(BindingInput {
                binding: &b.binding,
                stored,
            }),
        }
    }
    let reports = analyse(&policies, &bindings, &params);
    for (b, r) in bindings.iter().zip(&reports) {
        let evaluates = matches!(
            r.verdict,
            crate::bindings::Verdict::Evaluates
                | crate::bindings::Verdict::EvaluatesWithWarnings(_)
        );
        if !evaluates || !r.validation_actions.iter().any(|a| a == "Deny") {
            continue;
        }
        let Some(g) = policies
            .iter()
            .find(|p| p.stored && p.policy.metadata.name.as_deref() == Some(r.policy.as_str()))
            .and_then(|p| p.policy.spec.as_ref())
            .and_then(|s| s.param_kind.as_ref())
            .and_then(param_kind_gvk)
        else {
            continue;
        };
        let entry = out.entry(r.policy.clone()).or_default();
        if b.binding.spec.param_ref.is_none() {
            entry.push(ParamBinding {
                binding: r.binding.clone(),
                param: None,
            });
            continue;
        }
        for id in &r.params {
            // The object of that kind and id; the last one given wins, as in `analyse`.
            let object = others.iter().rev().find(|o| {
                group_of(o.api_version()) == Some(g.group.as_str())
                    && o.kind() == g.kind
                    && input::param_object(o).is_ok_and(|p| {
                        let pid = match &p.namespace {
                            Some(ns) => format!("{ns}/{}", p.name),
                            None => p.name.clone(),
                        };
                        pid == *id
                    })
            });
            if let Some(o) = object {
                entry.push(ParamBinding {
                    binding: r.binding.clone(),
                    param: Some((id.clone(), o.value.clone())),
                });
            }
        }
    }
    out
}

/// Computes what every binding will do ([`crate::bindings::analyse`]) and attaches it to the
/// entries: `effect` on bindings, `bound_by` on policies. Param objects are the other objects
/// of the input whose group and kind are some policy's `paramKind`; one that is malformed is
/// an error naming its file, document and field. Objects of other kinds are only consulted
/// for the "param of the wrong kind" note, and only when well formed.
fn add_binding_effects(
    inputs: &[&InputObject],
    others: &[InputOther],
    checked: &mut [CheckedPolicy],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> Result<(), InputError> {
    let param_kinds: Vec<Gvk> = inputs
        .iter()
        .filter_map(|o| match o {
            InputObject::Policy(p) => p
                .policy
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .and_then(param_kind_gvk),
            InputObject::Binding(_) => None,
        })
        .collect();
    let params = param_objects(&param_kinds, others)?;
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    let mut binding_index = Vec::new();
    for (i, (o, c)) in inputs.iter().zip(checked.iter()).enumerate() {
        match o {
            InputObject::Policy(p) => {
                let param_scope = p
                    .policy
                    .spec
                    .as_ref()
                    .and_then(|s| s.param_kind.as_ref())
                    .and_then(param_kind_gvk)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live));
                policies.push(PolicyInput {
                    policy: &p.policy,
                    stored: c.api_server.accepted(),
                    warning_kinds: c
                        .status
                        .as_ref()
                        .map(crate::bindings::warning_kinds)
                        .unwrap_or_default(),
                    param_scope,
                });
            }
            InputObject::Binding(b) => {
                bindings.push(BindingInput {
                    binding: &b.binding,
                    stored: c.api_server.accepted(),
                });
                binding_index.push(i);
            }
        }
    }
    let reports = analyse(&policies, &bindings, &params);
    let stored: Vec<bool> = bindings.iter().map(|b| b.stored).collect();
    attach_reports(checked, input::POLICY_KIND, reports, &stored, binding_index);
    Ok(())
}

/// Attaches the binding reports to the entries: `bound_by` on each policy of `policy_kind`
/// (only stored bindings bind: a rejected one never exists), `effect` on the binding at
/// `binding_index[i]` for `reports[i]` (whose binding is stored when `stored[i]`).
fn attach_reports(
    entries: &mut [CheckedPolicy],
    policy_kind: &str,
    reports: Vec<crate::bindings::BindingReport>,
    stored: &[bool],
    binding_index: Vec<usize>,
) {
    for c in entries.iter_mut() {
        if c.kind == policy_kind {
            c.bound_by = Some(
                reports
                    .iter()
                    .zip(stored)
                    .filter(|(r, stored)| **stored && r.policy == c.name)
                    .map(|(r, _)| r.binding.clone())
                    .collect(),
            );
        }
    }
    for (i, r) in binding_index.into_iter().zip(reports) {
        entries[i].effect = Some(r);
    }
}

/// The param objects among `others`: every well-formed object (for the "param of the wrong
/// kind" note); one of a kind in `param_kinds` that is malformed is an error naming its file,
/// document and field.
fn param_objects(
    param_kinds: &[Gvk],
    others: &[InputOther],
) -> Result<Vec<crate::bindings::ParamObject>, InputError> {
    let mut params = Vec::new();
    for o in others {
        let is_param = param_kinds
            .iter()
            .any(|g| group_of(o.api_version()) == Some(g.group.as_str()) && o.kind() == g.kind);
        match input::param_object(o) {
            Ok(p) => params.push(p),
            Err(message) if is_param => {
                return Err(InputError {
                    file: o.origin.source.clone(),
                    document: Some(o.origin.document),
                    item: o.origin.item,
                    line: None,
                    message,
                });
            }
            Err(_) => {}
        }
    }
    Ok(params)
}

/// [`add_binding_effects`] for MutatingAdmissionPolicyBindings: `entries` are the checked
/// entries of `objects`, in the same order.
fn add_mutating_binding_effects(
    objects: &[mutating::MutatingObject],
    others: &[InputOther],
    entries: &mut [CheckedPolicy],
    loaded: Option<&LoadedBackends>,
    live: bool,
) -> Result<(), InputError> {
    use crate::bindings::{MutatingBindingInput, MutatingPolicyInput, analyse_mutating};
    use mutating::MutatingObject;
    let param_kinds: Vec<Gvk> = objects
        .iter()
        .filter_map(|o| match o {
            MutatingObject::Policy(_, p) => p
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .and_then(param_kind_gvk),
            MutatingObject::Binding(..) => None,
        })
        .collect();
    let params = param_objects(&param_kinds, others)?;
    let mut policies = Vec::new();
    let mut bindings = Vec::new();
    let mut binding_index = Vec::new();
    for (i, (o, c)) in objects.iter().zip(entries.iter()).enumerate() {
        match o {
            MutatingObject::Policy(_, p) => policies.push(MutatingPolicyInput {
                policy: p,
                stored: c.api_server.accepted(),
                warning_kinds: c
                    .status
                    .as_ref()
                    .map(crate::bindings::warning_kinds)
                    .unwrap_or_default(),
                param_scope: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.param_kind.as_ref())
                    .and_then(param_kind_gvk)
                    .map_or(ParamScope::Unknown, |g| param_scope(&g, loaded, live)),
            }),
            MutatingObject::Binding(_, b) => {
                bindings.push(MutatingBindingInput {
                    binding: b,
                    stored: c.api_server.accepted(),
                });
                binding_index.push(i);
            }
        }
    }
    let reports = analyse_mutating(&policies, &bindings, &params);
    let stored: Vec<bool> = bindings.iter().map(|b| b.stored).collect();
    attach_reports(
        entries,
        mutating::MUTATING_POLICY_KIND,
        reports,
        &stored,
        binding_index,
    );
    Ok(())
}

/// A schema source and a checker, as [`offline_backends`] returns them.
pub type OfflineBackends = (
    Box<dyn crate::policy::SchemaSource>,
    Box<dyn crate::policy::ExpressionChecker>,
);

/// The schema source and the checker of an offline `vapcheck check` run (file I/O, so here
/// and not in the I/O-free `engine`): schemas from the
/// `--openapi` folder and `--crd` manifests, checking in the Kubernetes environment of
/// `--kubernetes-version` (default: the pinned release) exactly as upstream declares it, so a
/// function that version does not have is an ordinary `undeclared reference` or
/// `found no matching overload` error.
pub fn offline_backends(options: &SchemaOptions) -> Result<OfflineBackends, String> {
    use crate::schema::{FilesConfig, FilesSource};

    let files = FilesSource::load(&FilesConfig {
        openapi_dir: options.openapi.clone(),
        built_in: options.built_in.clone(),
        crd_paths: options.crds.clone(),
        ..FilesConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let version = match options.kubernetes_version {
        Some(v) => v.supported()?,
        None => crate::k8s_env::KubeVersion::PINNED,
    };
    let checker = crate::engine::KubeChecker::with_version_notes(version)?;
    Ok((
        Box::new(crate::engine::Schemas::new(std::sync::Arc::new(files))),
        Box::new(checker),
    ))
}
