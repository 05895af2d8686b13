//! The `vapcheck` binary.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vapcheck::cli::{
    BackendProvider, CheckArgs, CheckEnvironment, LoadedBackends, OfflineProvider, SchemaOptions,
    run_check,
};

/// Type-checks the CEL expressions of Kubernetes ValidatingAdmissionPolicies.
#[derive(Debug, Parser)]
#[command(name = "vapcheck", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check policy files offline, for CI pipelines (exit 0: clean, 1: warnings, 3: rejected or
    /// not decoded, 2: unusable input).
    Check(Box<CheckArgs>),
    /// Run the controller: keep every ValidatingAdmissionPolicy's status up to date.
    Controller(Box<ControllerArgs>),
    /// Language server for editors, over standard input and output: the findings of `check`
    /// on the workspace folder as diagnostics (docs/editor.md).
    Lsp,
}

/// Arguments of `vapcheck controller`: every setting of the configuration file as a flag.
#[derive(Debug, clap::Args)]
struct ControllerArgs {
    #[command(flatten)]
    config: vapcheck::config::ConfigArgs,
}

/// `vapcheck controller`: load the configuration, start logging, run until SIGTERM.
/// Exit 0 after a graceful shutdown, 1 when start-up fails, 2 for an invalid configuration.
/// glibc malloc arenas for `vapcheck controller` (issue 17, memory): by default glibc creates up
/// to 8 per core as threads contend, and each keeps its freed memory; at 5,000 policies that
/// was about half of the peak RSS. Measured in docs/controller.md, "Memory". Set before any
/// thread starts; an explicit `MALLOC_ARENA_MAX` (or glibc tunable) in the environment wins.
const MALLOC_ARENAS: i32 = 1;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    let tuned = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.arena_max"));
    if !tuned {
        // SAFETY: mallopt only sets a malloc parameter; no other thread exists yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {
    let _ = MALLOC_ARENAS;
}

fn run_controller(args: &ControllerArgs) -> ExitCode {
    limit_malloc_arenas();
    let config = match args.config.load() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("vapcheck: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = vapcheck::config::init_logging(config.log.format, &config.log.level) {
        eprintln!("vapcheck: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vapcheck: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(vapcheck::controller::main(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "start-up failed");
            eprintln!("vapcheck: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Controller(args) => run_controller(&args),
        Command::Lsp => {
            let factory = |options: &vapcheck::cli::SchemaOptions, _: &[_]| {
                vapcheck::cli::offline_backends(options)
            };
            let provider = FilesOrLive {
                files: OfflineProvider { factory: &factory },
            };
            match vapcheck::lsp::run_stdio(&provider) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vapcheck lsp: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Check(args) => {
            let stdout = std::io::stdout();
            let env = CheckEnvironment {
                stdin: &mut std::io::stdin().lock(),
                stdout_is_terminal: stdout.is_terminal(),
                stdout: &mut stdout.lock(),
                stderr: &mut std::io::stderr().lock(),
                no_color: std::env::var_os("NO_COLOR"),
                kubeconfig_env: std::env::var_os("KUBECONFIG"),
                in_cluster: std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
            };
            // REST mapping, discovery and schemas from --openapi/--crd when given, else from
            // the live cluster; checking in the Kubernetes CEL environment.
            let factory = |options: &vapcheck::cli::SchemaOptions, _: &[_]| {
                vapcheck::cli::offline_backends(options)
            };
            let provider = FilesOrLive {
                files: OfflineProvider { factory: &factory },
            };
            let code = run_check(&args, &provider, env);
            ExitCode::from(u8::try_from(code).unwrap_or(2))
        }
    }
}

/// `vapcheck check`'s schema source: the files of `--openapi`/`--crd` or the built-in schemas
/// when any is given, else the live cluster (`--kubeconfig`, `$KUBECONFIG`, or the pod's service account).
struct FilesOrLive<'a> {
    files: OfflineProvider<'a>,
}

impl BackendProvider for FilesOrLive<'_> {
    fn load(&self, options: &SchemaOptions) -> Result<LoadedBackends, String> {
        if options.openapi.is_some() || options.built_in.is_some() || !options.crds.is_empty() {
            self.files.load(options)
        } else {
            vapcheck::cli::live::LiveProvider.load(options)
        }
    }
}
