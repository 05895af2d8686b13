//! The `vapcheck` binary.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use vapcheck::cli::{CheckArgs, CheckEnvironment, OfflineProvider, run_check};

/// Type-checks the CEL expressions of Kubernetes ValidatingAdmissionPolicies.
#[derive(Debug, Parser)]
#[command(name = "vapcheck", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check policy files offline, for CI pipelines (exit 0: clean, 1: warnings, 2: unusable input).
    Check(CheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
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
            // REST mapping and discovery come from --openapi/--crd; schemas from the same
            // files, converted by src/schema; checking in the Kubernetes CEL environment.
            let factory = |options: &vapcheck::cli::SchemaOptions, _: &[_]| {
                vapcheck::engine::offline_backends(options)
            };
            let code = run_check(&args, &OfflineProvider { factory: &factory }, env);
            ExitCode::from(u8::try_from(code).unwrap_or(2))
        }
    }
}
