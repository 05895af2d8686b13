//! Helpers shared by the modules of the integration test binary.

/// Whether this run rewrites golden files instead of comparing with them: only with
/// `VAPCHECK_BLESS=1`, and never under CI (`CI` set to anything but `false`), where a golden
/// file that no longer matches must fail the test (`.ci/run` also refuses the variable).
pub fn bless() -> bool {
    let wanted = std::env::var_os("VAPCHECK_BLESS").is_some_and(|v| v == "1");
    let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false");
    assert!(
        !(wanted && under_ci),
        "VAPCHECK_BLESS=1 under CI: goldens are compared in CI, never rewritten"
    );
    wanted
}

/// The read-only `shared/` folder beside the repository (corpora, OpenAPI documents, cel-spec):
/// `$VAPCHECK_SHARED`, else `<repository>/../shared`, else `/work/shared` (a worktree that is
/// not beside it).
pub fn shared_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("VAPCHECK_SHARED") {
        return dir.into();
    }
    let beside = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.is_dir() {
        return beside;
    }
    std::path::PathBuf::from("/work/shared")
}
