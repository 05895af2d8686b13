//! The `vapcheck check` command: read policies, check them through the backends, print the
//! statuses. The backends (schemas, REST mapping, CEL checking) are supplied by a
//! [`BackendProvider`]; see `docs/policy-checking.md` for the contract.

pub mod config_file;
pub mod discovery;
pub mod documents;
pub mod emit;
pub mod gate;
pub mod live;
pub mod output;
pub mod reuse;
mod run;
pub mod suppressed;

/// The readers of the objects and their places in the source text are the core's
/// ([`crate::analysis`]); these paths stay.
pub use crate::analysis::{gatekeeper, input, kyverno, mutating, positions, webhooks};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::policy::{
    CheckOptions, DEFAULT_EXTENDED_KIND_LIMIT, DiscoveryRestMapper, ExpressionChecker, Mode,
    SchemaSource,
};

pub use self::run::run_check;
/// The backends of a run and the report of its analysis are the core's.
pub use crate::analysis::{Analysis, LoadedBackends};

use self::input::{InputError, InputObject, InputOther, InputPolicy, read_all};
use crate::apiserver::static_manifests::{self, ManifestFile};

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
/// when given (and leaving this check's there for the next; [`reuse::Reuse`]). The I/O of a
/// check (the `--static-manifests` folder, the `--previous` files, the backends) and then
/// [`crate::analysis::analyse`] on what was read.
pub fn analyse_input_reusing(
    args: &CheckArgs,
    input: documents::Input,
    provider: &dyn BackendProvider,
    kubeconfig_env: Option<OsString>,
    in_cluster: bool,
    reuse: Option<&mut reuse::Reuse>,
) -> Result<Analysis, String> {
    let documents::Input {
        objects,
        others,
        texts,
        undecoded,
        read,
        ..
    } = input;
    let static_files = match &args.static_manifests {
        Some(dir) => Some((dir.display().to_string(), read_static_dir(dir)?)),
        None => None,
    };
    // MutatingAdmissionPolicies and bindings, webhook configurations, Gatekeeper's templates
    // and Kyverno's policies are picked from the other objects.
    let objects = crate::analysis::Objects::decode(objects, others, undecoded, texts);
    if let Some(message) = documents::nothing_to_check(
        read,
        &objects.undecoded,
        objects.count(),
        objects.others.len(),
    )
    .filter(|_| static_files.is_none())
    {
        return Err(message);
    }
    let previous = read_previous(&args.previous)?;
    let server = crate::analysis::server_of(args.kubernetes_version)?;
    let static_load = static_files
        .as_ref()
        .map(|(dir, files)| (dir.clone(), static_manifests::load(dir, files, server)));
    let input = crate::analysis::Input {
        objects,
        files: documents::source_names(&args.files),
        static_manifests: static_load,
        previous,
    };
    let check = CheckOptions {
        mode: args.mode().into(),
        kind_limit: args.kind_limit,
        estimate_costs: !args.no_cost_estimates,
    };
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
    let mut kept = None;
    let mut memo = None;
    if input.needs_backends(check.mode) {
        // No --openapi and no cluster: the built-in kinds of the target version, compiled in
        // (--crd adds to them); each document is read when a kind of it is needed.
        if options.openapi.is_none() && options.kubeconfig.is_none() && !options.in_cluster {
            options.built_in = Some(format!("1.{}", server.minor));
        }
        match reuse {
            Some(reuse) => {
                let (backends, m) = reuse.begin(&options, provider)?;
                kept = Some(backends);
                memo = Some(m);
            }
            None => fresh = Some(provider.load(&options)?),
        }
    }
    let loaded: Option<&LoadedBackends> = kept.or(fresh.as_ref());
    let analysis_options = crate::analysis::Options {
        server,
        check,
        live: options.openapi.is_none() && options.crds.is_empty(),
    };
    let mut analysis = crate::analysis::analyse(input, loaded, &analysis_options, memo.as_mut())?;
    if let Some((_, files)) = &static_files {
        for f in files {
            if let Ok(bytes) = &f.contents
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                analysis.sources.insert(f.path.clone(), text.to_owned());
            }
        }
    }
    Ok(analysis)
}

/// The stored versions given with `--previous` (read as the files are; `Err` names the flag).
fn read_previous(files: &[PathBuf]) -> Result<crate::analysis::Previous, String> {
    let (objects, others, _) =
        read_input_all(files, &mut std::io::empty()).map_err(|e| format!("--previous: {e}"))?;
    match (mutating::read(&others), webhooks::read(&others)) {
        (Ok(mutating), Ok(webhooks)) => Ok(crate::analysis::Previous {
            objects,
            mutating,
            webhooks,
        }),
        (Err(e), _) | (_, Err(e)) => Err(format!("--previous: {e}")),
    }
}

/// The findings of `vapcheck check` on `sources` (each a name and its bytes) at their places
/// in them: [`analyse_input`] (the analysis of [`run_check`]) and then [`emit::findings`], the list
/// the SARIF and GitHub formats render. `args` are the settings (`.vapcheck.yaml` applied by
/// the caller); its `files` are replaced by the sources' names. Used by the editor server
/// (`crate::lsp`), which gives the unsaved text of open buffers. No live cluster unless
/// `args.kubeconfig` names one. The backends and the statuses of the policies not changed
/// since the last check come from `reuse` ([`reuse::Reuse`]), and so do the places of the
/// findings in documents that did not change ([`emit::locate::findings_placing`]). Each
/// source is read with
/// `read`, which must give what [`input::read_all_lenient`] gives
/// ([`documents::from_sources_reading`]; the editor server keeps the documents it read).
pub fn check_sources(
    sources: Vec<documents::Source>,
    args: &CheckArgs,
    provider: &dyn BackendProvider,
    reuse: &mut reuse::Reuse,
    read: impl FnMut(&str, &str) -> documents::SourceRead,
) -> Result<(Analysis, Vec<crate::finding::Finding>), String> {
    let paths: Vec<PathBuf> = sources.iter().map(|s| PathBuf::from(&s.name)).collect();
    let input = documents::from_sources_reading(paths.clone(), Vec::new(), sources, read);
    let args = CheckArgs {
        files: paths,
        ..args.clone()
    };
    reuse.checked = 0;
    reuse.reused = 0;
    let analysis = analyse_input_reusing(&args, input, provider, None, false, Some(reuse))?;
    let findings =
        emit::locate::findings_placing(&analysis.checked, &analysis.sources, &mut reuse.places);
    Ok((analysis, findings))
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
