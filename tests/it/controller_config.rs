//! `vapcheck controller`'s settings through the real binary: clap reads each flag and, when it
//! is absent, its `VAPCHECK_*` variable; errors name the key and where the value came from.
//! Every case fails while loading the configuration, before any cluster is contacted (exit 2).

use std::process::{Command, Output};

fn controller(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vapcheck"));
    cmd.env_clear().arg("controller").args(args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run vapcheck: {e}"))
}

fn assert_config_error(out: &Output, stderr: &str) {
    assert_eq!(String::from_utf8_lossy(&out.stderr), stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{out:?}");
}

/// The variables, the arguments and the whole expected standard error of one run.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static [&'static str],
    &'static str,
);

/// Variables, flags, and the exact message: a variable's error names it; a flag hides the
/// variable of its setting; a variable and a flag meet in validation (the lease duration from
/// the variable, the renew deadline from the flag); the file comes from `VAPCHECK_CONFIG`.
#[test]
fn variables_and_flags_reach_the_configuration() {
    let cases: &[Case] = &[
        (
            &[("VAPCHECK_RECHECK_PERIOD", "5minutes")],
            &[],
            "vapcheck: invalid config: key `recheckPeriod` (from VAPCHECK_RECHECK_PERIOD): \
             `5minutes` has unknown unit `minutes`; units are ms, s, m, h\n",
        ),
        (
            &[("VAPCHECK_STATUS_MODE", "partial")],
            &["--status-mode", "sometimes"],
            "vapcheck: invalid config: key `statusMode` (from --status-mode): \
             `sometimes` is not one of full, conditionsOnly\n",
        ),
        (
            &[("VAPCHECK_LEASE_DURATION", "10s")],
            &["--renew-deadline", "10s"],
            "vapcheck: invalid config: key `leaderElection.renewDeadline`: \
             must be less than leaderElection.leaseDuration (10s)\n",
        ),
        (
            &[("VAPCHECK_CONFIG", "/nonexistent/vapcheck.yaml")],
            &[],
            "vapcheck: cannot read config file /nonexistent/vapcheck.yaml: \
             No such file or directory (os error 2)\n",
        ),
    ];
    for (env, args, stderr) in cases {
        assert_config_error(&controller(env, args), stderr);
    }
}

#[test]
fn a_variable_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, "kindLimit: 5\n").unwrap_or_else(|e| panic!("{e}"));
    let path = file.display().to_string();
    let out = controller(
        &[("VAPCHECK_CONFIG", &path), ("VAPCHECK_KIND_LIMIT", "0")],
        &[],
    );
    assert_config_error(
        &out,
        "vapcheck: invalid config: key `kindLimit`: must be at least 1\n",
    );
}
