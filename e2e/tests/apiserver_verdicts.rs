//! Acceptance test of issue 11 ("create-time verdicts"): `vapcheck check -o json` must say, for
//! every ValidatingAdmissionPolicy and binding it reads, exactly what the real kube-apiserver
//! 1.37.1 says when the object is created (or updated, with `--previous`).
//!
//! The objects are every corpus policy and binding plus a deterministic set of variants
//! (`e2e/support/apiserver_truth.rs`). Each is sent to the API server of the shared cluster with
//! a server-side dry run; then `vapcheck check -o json --kubeconfig <cluster>` runs once over all
//! of them, and each entry's `apiServer` must equal the server's verdict and causes (each cause is
//! the server's `field.Error.Error()` text: `details.causes[i].field + ": " + message`).
//!
//! - `cargo test --test e2e -- --group apiserver_verdicts --nocapture` runs both comparisons;
//! - `VAPCHECK_TRUTH_DIR=/tmp/apiserver-truth cargo test --test e2e -- --group apiserver_verdicts
//!   --ignored dump_truth --nocapture` only writes the ground truth (objects, truth.jsonl,
//!   update/, README.txt) for reading.

use crate::support;

use crate::truth;

use crate::map_truth;

use crate::webhook_truth;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use serde_json::{Value, json};
use truth::{Case, Outcome, Storage, UpdateCase};

/// Concurrent requests to the API server.
const PARALLEL: usize = 16;

/// The create truth: one object per file, in the order vapcheck gets them.
struct CreateTruth {
    files: Vec<PathBuf>,
    cases: Vec<Case>,
    outcomes: Vec<Outcome>,
    excluded: Vec<truth::Excluded>,
    generated_from: usize,
}

struct UpdateTruth {
    files: Vec<PathBuf>,
    previous: PathBuf,
    cases: Vec<UpdateCase>,
    outcomes: Vec<Outcome>,
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn truth_line(file: &Path, object: &Value, id: &str, outcome: &Outcome) -> Value {
    json!({
        "file": file.display().to_string(),
        "id": id,
        "kind": truth::kind_of(object),
        "name": truth::name_of(object),
        "http": outcome.http,
        "accepted": outcome.accepted,
        "causes": outcome.causes,
        "message": outcome.message,
        "reason": outcome.reason,
        "warnings": outcome.warnings,
    })
}

async fn dry_run_all(client: &Client, objects: &[Value]) -> anyhow::Result<Vec<Outcome>> {
    futures::stream::iter(objects.iter().enumerate())
        .map(|(i, object)| async move {
            truth::dry_run_create(client, object)
                .await
                .map(|o| (i, o))
                .with_context(|| format!("dry-run create of object {i}"))
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await
        .map(|mut v| {
            v.sort_by_key(|(i, _)| *i);
            v.into_iter().map(|(_, o)| o).collect()
        })
}

/// Generates the objects, writes them to `dir/objects/NNNN.yaml`, dry-runs each CREATE and writes
/// `dir/truth.jsonl`.
async fn create_truth(client: &Client, dir: &Path) -> anyhow::Result<CreateTruth> {
    let shared = support::shared_dir();
    let (mut cases, excluded) = truth::corpus_cases(&shared)?;
    let generated_from = cases.len();
    cases.extend(truth::variant_cases(&shared)?);
    create_truth_of(client, dir, cases, excluded, generated_from).await
}

/// [`create_truth`] for MutatingAdmissionPolicies and bindings (`e2e/support/map_truth.rs`).
async fn map_create_truth(client: &Client, dir: &Path) -> anyhow::Result<CreateTruth> {
    let (mut cases, excluded) = map_truth::corpus_cases(&support::shared_dir())?;
    let generated_from = cases.len();
    cases.extend(map_truth::variant_cases());
    create_truth_of(client, dir, cases, excluded, generated_from).await
}

async fn create_truth_of(
    client: &Client,
    dir: &Path,
    cases: Vec<Case>,
    excluded: Vec<truth::Excluded>,
    generated_from: usize,
) -> anyhow::Result<CreateTruth> {
    let objects: Vec<Value> = cases.iter().map(|c| c.object.clone()).collect();
    let started = Instant::now();
    let outcomes = dry_run_all(client, &objects).await?;
    eprintln!(
        "apiserver-truth: {} dry-run creates in {:.1?}",
        objects.len(),
        started.elapsed()
    );
    let mut files = Vec::new();
    let mut jsonl = String::new();
    for (i, (case, outcome)) in cases.iter().zip(&outcomes).enumerate() {
        let file = dir.join("objects").join(format!("{i:04}.yaml"));
        write(&file, &truth::render(&case.object)?)?;
        writeln!(
            jsonl,
            "{}",
            truth_line(&file, &case.object, &case.id, outcome)
        )?;
        files.push(file);
    }
    write(&dir.join("truth.jsonl"), &jsonl)?;
    // Generated objects must decode: only 201 and 422 say something about validation.
    let undecodable: Vec<String> = cases[generated_from..]
        .iter()
        .zip(&outcomes[generated_from..])
        .filter(|(_, o)| o.http != 201 && o.http != 422)
        .map(|(c, o)| format!("{}: HTTP {} {}", c.id, o.http, o.message))
        .collect();
    if !undecodable.is_empty() {
        bail!(
            "{} generated objects got neither 201 nor 422; fix the generator:\n{}",
            undecodable.len(),
            undecodable.join("\n")
        );
    }
    Ok(CreateTruth {
        files,
        cases,
        outcomes,
        excluded,
        generated_from,
    })
}

/// The etcd client URL of the shared cluster (from `instance.env` beside its kubeconfig).
fn etcd_endpoint(kubeconfig: &Path) -> anyhow::Result<String> {
    let env = kubeconfig
        .parent()
        .context("kubeconfig has no folder")?
        .join("instance.env");
    let text = std::fs::read_to_string(&env).with_context(|| {
        format!(
            "reading {} (the update truth writes stored objects straight into etcd, so it needs \
             a cluster started by e2e/cluster/up)",
            env.display()
        )
    })?;
    let port = text
        .lines()
        .find_map(|l| l.strip_prefix("ETCD_PORT="))
        .filter(|p| !p.is_empty())
        .with_context(|| format!("no ETCD_PORT in {}", env.display()))?;
    Ok(format!("http://127.0.0.1:{port}"))
}

/// Builds `e2e/oracle/bin/etcdput` (Go's build cache makes this quick after the first time).
fn etcdput() -> anyhow::Result<PathBuf> {
    let oracle = support::repo_root().join("e2e/oracle");
    let status = Command::new("go")
        .args(["build", "-o", "bin/", "./cmd/etcdput"])
        .current_dir(&oracle)
        .stdin(Stdio::null())
        .status()
        .context("running go build for e2e/oracle/cmd/etcdput (Go is needed)")?;
    if !status.success() {
        bail!("go build ./cmd/etcdput failed: {status}");
    }
    Ok(oracle.join("bin/etcdput"))
}

/// Stores each pair's old object (in etcd or by a real create), dry-runs the UPDATE to the new
/// one, and writes `dir/update/`.
async fn update_truth(
    client: &Client,
    kubeconfig: &Path,
    dir: &Path,
    cases: Vec<UpdateCase>,
) -> anyhow::Result<UpdateTruth> {
    let mut records = String::new();
    for (i, case) in cases.iter().enumerate() {
        truth::delete_if_present(client, &case.stored).await?;
        match case.storage {
            Storage::Etcd => {
                let line = json!({"key": truth::etcd_key(&case.stored)?,
                                  "value": truth::etcd_value(&case.stored, 900_000 + i)});
                writeln!(records, "{line}")?;
            }
            Storage::Create => {
                let (http, body, _) =
                    truth::send(client, http::Method::POST, &case.stored, false).await?;
                if http != 201 {
                    bail!(
                        "creating the stored object of {}: HTTP {http}: {}",
                        case.id,
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }
    }
    if !records.is_empty() {
        let endpoint = etcd_endpoint(kubeconfig)?;
        let mut child = Command::new(etcdput()?)
            .args(["-endpoint", &endpoint])
            .stdin(Stdio::piped())
            .spawn()
            .context("running etcdput")?;
        std::io::Write::write_all(
            child.stdin.as_mut().context("etcdput stdin")?,
            records.as_bytes(),
        )?;
        drop(child.stdin.take());
        let status = child.wait()?;
        if !status.success() {
            bail!("etcdput failed: {status}");
        }
    }
    // The watch cache learns about objects written into etcd through its watch; wait until every
    // stored object can be read.
    for case in &cases {
        support::wait_for(
            &format!("stored object of {}", case.id),
            std::time::Duration::from_secs(30),
            || async { Ok(truth::resource_version(client, &case.stored).await.ok()) },
        )
        .await?;
    }
    let outcomes: Vec<Outcome> = futures::stream::iter(cases.iter().enumerate())
        .map(|(i, case)| async move {
            truth::dry_run_update(client, &case.new)
                .await
                .map(|o| (i, o))
                .with_context(|| format!("dry-run update {}", case.id))
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<_>>()
        .await
        .map(|mut v| {
            v.sort_by_key(|(i, _)| *i);
            v.into_iter().map(|(_, o)| o).collect()
        })?;
    let update_dir = dir.join("update");
    let previous = update_dir.join("previous.yaml");
    let mut all_previous = String::new();
    let mut files = Vec::new();
    let mut jsonl = String::new();
    for (i, (case, outcome)) in cases.iter().zip(&outcomes).enumerate() {
        let file = update_dir.join(format!("{i:04}.yaml"));
        let prev = update_dir.join(format!("{i:04}.previous.yaml"));
        write(&file, &truth::render(&case.new)?)?;
        let prev_text = truth::render(&case.stored)?;
        write(&prev, &prev_text)?;
        all_previous.push_str("---\n");
        all_previous.push_str(&prev_text);
        let mut line = truth_line(&file, &case.new, &case.id, outcome);
        line["previous"] = json!(prev.display().to_string());
        line["storedVia"] = json!(case.storage);
        writeln!(jsonl, "{line}")?;
        files.push(file);
    }
    write(&previous, &all_previous)?;
    write(&update_dir.join("truth.jsonl"), &jsonl)?;
    Ok(UpdateTruth {
        files,
        previous,
        cases,
        outcomes,
    })
}

/// Runs `vapcheck check -o json --kubeconfig K [--previous P] FILES...` and returns its entries.
fn run_vapcheck(
    kubeconfig: &Path,
    previous: Option<&Path>,
    files: &[PathBuf],
) -> anyhow::Result<Vec<Value>> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vapcheck"));
    command
        .args(["check", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig);
    if let Some(previous) = previous {
        command.arg("--previous").arg(previous);
    }
    let started = Instant::now();
    let output = command
        .args(files)
        .stdin(Stdio::null())
        .output()
        .context("running vapcheck")?;
    eprintln!(
        "apiserver-verdicts: vapcheck over {} files: {} in {:.1?}",
        files.len(),
        output.status,
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        None => bail!("vapcheck was killed by a signal; stderr:\n{stderr}"),
        Some(101) => bail!("vapcheck panicked; stderr:\n{stderr}"),
        Some(_) => {}
    }
    let entries: Vec<Value> = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "vapcheck ({}) did not print a JSON array; stderr:\n{stderr}",
            output.status
        )
    })?;
    Ok(entries)
}

/// The comparable part of an entry: kind, name and `apiServer`, or a plain statement of what is
/// missing.
fn got_verdict(entry: Option<&Value>) -> Value {
    let Some(entry) = entry else {
        return json!("no entry for this object (vapcheck printed fewer entries)");
    };
    let Some(api_server) = entry.get("apiServer") else {
        return json!({"kind": entry.get("kind"), "name": entry.get("name"),
                      "error": "entry has no apiServer field"});
    };
    let accepted = api_server.get("accepted").cloned().unwrap_or(Value::Null);
    let mut got =
        json!({"kind": entry.get("kind"), "name": entry.get("name"), "accepted": accepted});
    if accepted != Value::Bool(true) {
        got["causes"] = api_server.get("causes").cloned().unwrap_or(Value::Null);
    }
    got
}

fn expected_verdict(object: &Value, outcome: &Outcome) -> Value {
    let mut want = json!({"kind": truth::kind_of(object), "name": truth::name_of(object),
                          "accepted": outcome.accepted});
    if !outcome.accepted {
        want["causes"] = json!(outcome.causes);
    }
    want
}

/// Compares and reports; the error lists every difference.
/// Exact numbers of compared objects (docs/verdicts.md, README): corpus objects and variants
/// created, stored objects updated, MutatingAdmissionPolicy objects created (of which 3 differ
/// only in the expected tokens of a CEL syntax error) and updated.
const EXPECTED_CREATE_CASES: usize = 1413;
const EXPECTED_UPDATE_CASES: usize = 35;
const EXPECTED_MAP_CREATE_CASES: (usize, usize) = (780, 3);
const EXPECTED_MAP_UPDATE_CASES: usize = 15;
/// Webhook configurations: corpus documents and variants created, and updates.
const EXPECTED_WEBHOOK_CREATE_CASES: usize = 444;
const EXPECTED_WEBHOOK_UPDATE_CASES: usize = 16;
/// Of the accepted webhook configurations, those kube-apiserver warns about on create.
const EXPECTED_WEBHOOK_WARNED: usize = 6;

fn compare(
    what: &str,
    files: &[PathBuf],
    ids: &[&str],
    objects: &[&Value],
    outcomes: &[Outcome],
    entries: &[Value],
    expected_objects: usize,
) -> anyhow::Result<()> {
    compare_with(
        what,
        files,
        ids,
        objects,
        outcomes,
        entries,
        (expected_objects, 0),
    )
}

/// Cuts the token list after ` expecting ` from every line of a CEL syntax error
/// (`Syntax error: mismatched input '}' expecting ':'`) in the causes of a verdict.
fn without_expected_tokens(verdict: &Value) -> Value {
    let mut v = verdict.clone();
    if let Some(causes) = v.get_mut("causes").and_then(Value::as_array_mut) {
        for c in causes.iter_mut() {
            if let Some(text) = c.as_str() {
                let lines: Vec<&str> = text
                    .split('\n')
                    .map(|line| match line.find(" expecting ") {
                        Some(at) if line.contains("Syntax error: ") => &line[..at],
                        _ => line,
                    })
                    .collect();
                *c = json!(lines.join("\n"));
            }
        }
    }
    v
}

/// [`compare`] of exactly `expected.0` objects, of which exactly `expected.1` may differ only in
/// the token lists of CEL syntax errors ([`without_expected_tokens`]); those are printed and
/// counted apart, not failed, and any other number of them fails:
/// the `cel` crate's ANTLR parser recovers from some errors in another parser state than
/// cel-go's and lists other expected tokens (a gap of vapcheck's CEL parser, not of the
/// verdict rules; docs/verdicts.md).
fn compare_with(
    what: &str,
    files: &[PathBuf],
    ids: &[&str],
    objects: &[&Value],
    outcomes: &[Outcome],
    entries: &[Value],
    expected: (usize, usize),
) -> anyhow::Result<()> {
    let mut report = String::new();
    let mut token_lists_only = Vec::new();
    if files.len() != expected.0 {
        writeln!(
            report,
            "{} objects compared, {} expected (docs/verdicts.md): a case was lost or added",
            files.len(),
            expected.0
        )?;
    }
    if entries.len() != files.len() {
        writeln!(
            report,
            "vapcheck printed {} entries for {} objects (one per document, in input order, is \
             expected; later entries are compared with the wrong object)",
            entries.len(),
            files.len()
        )?;
    }
    let mut identical = 0;
    for i in 0..files.len() {
        let mut want = expected_verdict(objects[i], &outcomes[i]);
        let got = got_verdict(entries.get(i));
        // A generateName-only object has no name in either.
        if truth::name_of(objects[i]).is_empty() {
            want["name"] = got.get("name").cloned().unwrap_or(Value::Null);
        }
        if want == got {
            identical += 1;
        } else if expected.1 > 0 && without_expected_tokens(&want) == without_expected_tokens(&got)
        {
            token_lists_only.push(format!("{} ({})", files[i].display(), ids[i]));
        } else {
            writeln!(
                report,
                "--- {} ({})\n  expected: {}\n  got:      {}",
                files[i].display(),
                ids[i],
                want,
                got
            )?;
        }
    }
    let mut summary = format!("{what}: {identical}/{} identical", files.len());
    if !token_lists_only.is_empty() {
        for t in &token_lists_only {
            eprintln!("identical but for the expected tokens of a CEL syntax error: {t}");
        }
        write!(
            summary,
            ", {} more identical but for the expected tokens listed in a CEL syntax error",
            token_lists_only.len()
        )?;
    }
    eprintln!("{summary}");
    if token_lists_only.len() != expected.1 {
        writeln!(
            report,
            "{} verdicts differ only in expected-token lists, exactly {} expected",
            token_lists_only.len(),
            expected.1
        )?;
    }
    if !report.is_empty() {
        bail!("{summary}\n{report}{summary}");
    }
    Ok(())
}

fn count_by_http(outcomes: &[Outcome]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for o in outcomes {
        *counts.entry(o.http).or_default() += 1;
    }
    counts
}

fn truth_dir() -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match std::env::var_os("VAPCHECK_TRUTH_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("clearing {}", dir.display()))?;
            }
            std::fs::create_dir_all(&dir)?;
            Ok((dir, None))
        }
        None => {
            let tmp = tempfile::tempdir()?;
            Ok((tmp.path().to_path_buf(), Some(tmp)))
        }
    }
}

async fn vapcheck_create_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-create-")
        .tempdir()?;
    let truth = create_truth(&client, tmp.path()).await?;
    for e in &truth.excluded {
        eprintln!("not sent (does not parse): {}: {}", e.id, e.reason);
    }
    eprintln!(
        "apiserver-verdicts: {} objects ({} corpus, {} generated), by HTTP code {:?}",
        truth.cases.len(),
        truth.generated_from,
        truth.cases.len() - truth.generated_from,
        count_by_http(&truth.outcomes)
    );
    let entries = run_vapcheck(cluster.kubeconfig(), None, &truth.files)?;
    let ids: Vec<&str> = truth.cases.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = truth.cases.iter().map(|c| &c.object).collect();
    let result = compare(
        "create",
        &truth.files,
        &ids,
        &objects,
        &truth.outcomes,
        &entries,
        EXPECTED_CREATE_CASES,
    );
    eprintln!(
        "apiserver-verdicts: create test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

async fn vapcheck_update_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-update-")
        .tempdir()?;
    let truth = update_truth(
        &client,
        cluster.kubeconfig(),
        tmp.path(),
        truth::update_cases(),
    )
    .await?;
    let entries = run_vapcheck(cluster.kubeconfig(), Some(&truth.previous), &truth.files)?;
    let ids: Vec<&str> = truth.cases.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = truth.cases.iter().map(|c| &c.new).collect();
    let result = compare(
        "update",
        &truth.files,
        &ids,
        &objects,
        &truth.outcomes,
        &entries,
        EXPECTED_UPDATE_CASES,
    );
    eprintln!(
        "apiserver-verdicts: update test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

/// The shared cluster must serve MutatingAdmissionPolicy v1 (GA in 1.36); a server that does not
/// is a failure, not a skip.
async fn require_mutating_policies_served(client: &Client) -> anyhow::Result<()> {
    let request = http::Request::builder()
        .method(http::Method::GET)
        .uri("/apis/admissionregistration.k8s.io/v1")
        .body(Vec::new())?;
    let list: Value = serde_json::from_str(&client.request_text(request).await?)?;
    let served: Vec<&str> = list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for resource in [
        "mutatingadmissionpolicies",
        "mutatingadmissionpolicybindings",
    ] {
        if !served.contains(&resource) {
            bail!(
                "the shared cluster does not serve admissionregistration.k8s.io/v1 {resource} \
                 (served: {served:?})"
            );
        }
    }
    Ok(())
}

/// One cause of each rule of `crates/core/src/apiserver/map.rs` (and of the shared rules as a mutating
/// policy or binding meets them): every fragment of an entry must occur in one cause.
const MAP_RULES: &[&[&str]] = &[
    &["spec.reinvocationPolicy: Required value"],
    &["spec.reinvocationPolicy: Unsupported value"],
    &["spec.failurePolicy: Unsupported value"],
    &["spec.matchConstraints: Required value"],
    &["spec.matchConstraints.resourceRules: Required value"],
    &["spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\""],
    &["spec.mutations: Required value: mutations must contain at least one item"],
    &["].patchType: Required value"],
    &["].patchType: Unsupported value"],
    &["].jsonPatch: Required value: must be specified when patchType is JSONPatch"],
    &["].applyConfiguration: Invalid value: \"{applyConfiguration}\": must not be specified"],
    &[
        "].applyConfiguration: Required value: must be specified when patchType is ApplyConfiguration",
    ],
    &["].jsonPatch: Invalid value: \"{jsonPatch}\": must not be specified"],
    &["].applyConfiguration.expression: Required value"],
    &["].jsonPatch.expression: Required value"],
    &[
        "].applyConfiguration.expression: Invalid value",
        "must evaluate to Object but got",
    ],
    &[
        "].jsonPatch.expression: Invalid value",
        "must evaluate to list(JSONPatch) but got",
    ],
    &[
        "].applyConfiguration.expression: Invalid value",
        "compilation failed: ",
    ],
    &[
        "].jsonPatch.expression: Invalid value",
        "compilation failed: ",
    ],
    &[
        "].applyConfiguration.expression",
        "undeclared reference to 'includes'",
    ],
    &[
        "].applyConfiguration.expression",
        "undeclared reference to 'params'",
    ],
    &[
        "spec.variables[0].expression: Invalid value",
        "undeclared reference to 'Object.spec'",
    ],
    &["spec.matchConditions[0].expression: Invalid value"],
    &["spec.paramKind.apiVersion: Required value"],
    &[
        "metadata.name: Invalid value",
        "reserved for static manifest-based configurations",
    ],
    &["spec.policyName: Required value"],
    &["spec.policyName: Invalid value"],
    &["spec.paramRef.name: Forbidden: name and selector are mutually exclusive"],
    &["spec.paramRef.parameterNotFoundAction: Unsupported value"],
    &["spec.matchResources.resourceRules.operations: Unsupported value: \"DELETE\""],
    &["spec.matchResources.matchPolicy: Unsupported value"],
];

/// The entries of [`MAP_RULES`] no cause of `outcomes` shows.
fn unseen_rules(outcomes: &[Outcome]) -> Vec<String> {
    MAP_RULES
        .iter()
        .filter(|fragments| {
            !outcomes
                .iter()
                .flat_map(|o| &o.causes)
                .any(|c| fragments.iter().all(|f| c.contains(f)))
        })
        .map(|fragments| fragments.join(" … "))
        .collect()
}

/// Issue 12 part 2: every MutatingAdmissionPolicy and binding of `corpus/mutating` plus the
/// variants of `e2e/support/map_truth.rs`, dry-run created on the real API server and compared
/// with `vapcheck check -o json` (prints `map create: N/N identical`).
async fn vapcheck_mutating_create_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    require_mutating_policies_served(&client).await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-map-create-")
        .tempdir()?;
    let truth = map_create_truth(&client, tmp.path()).await?;
    for e in &truth.excluded {
        eprintln!("not sent (does not parse): {}: {}", e.id, e.reason);
    }
    let corpus = &truth.cases[..truth.generated_from];
    let count = |kind: &str| {
        corpus
            .iter()
            .filter(|c| truth::kind_of(&c.object) == kind)
            .count()
    };
    let rejected = truth.outcomes.iter().filter(|o| !o.accepted).count();
    eprintln!(
        "apiserver-verdicts: {} mutating objects ({} corpus: {} policies, {} bindings; {} generated), \
         by HTTP code {:?}, {rejected} rejected",
        truth.cases.len(),
        truth.generated_from,
        count(truth::MUTATING_POLICY),
        count(truth::MUTATING_BINDING),
        truth.cases.len() - truth.generated_from,
        count_by_http(&truth.outcomes)
    );
    let missing = unseen_rules(&truth.outcomes);
    eprintln!(
        "map create: {}/{} rules of crates/core/src/apiserver/map.rs seen in the server's causes",
        MAP_RULES.len() - missing.len(),
        MAP_RULES.len()
    );
    if !missing.is_empty() {
        bail!(
            "no object makes the API server report these rules (extend e2e/support/map_truth.rs): {missing:?}"
        );
    }
    // Documents the API server cannot decode (HTTP 400: a corpus document with a field of the
    // wrong JSON type) are a VAP003 finding of vapcheck (exit 3, a `decodeError` naming the
    // field): the field must be the one the server's decoder names (`Go struct field
    // <Type>.<path> of type ...`, without list indexes). They are checked one by one, the
    // others in one run.
    let (undecodable, decodable): (Vec<usize>, Vec<usize>) =
        (0..truth.cases.len()).partition(|&i| truth.outcomes[i].http == 400);
    let mut report = String::new();
    for &i in &undecodable {
        let output = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
            .args(["check", "-o", "json"])
            .arg(&truth.files[i])
            .stdin(Stdio::null())
            .output()
            .context("running vapcheck")?;
        let entries: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap_or_default();
        let got = entries
            .first()
            .and_then(|e| e["decodeError"]["field"].as_str())
            .map(|f| {
                let mut plain = String::new();
                let mut in_index = false;
                for c in f.chars() {
                    match c {
                        '[' => in_index = true,
                        ']' => in_index = false,
                        c if !in_index => plain.push(c),
                        _ => {}
                    }
                }
                plain
            });
        let message = &truth.outcomes[i].message;
        let want = message
            .split_once("Go struct field ")
            .and_then(|(_, rest)| rest.split_once(" of type"))
            .and_then(|(path, _)| path.split_once('.'))
            .map(|(_, path)| path.to_owned());
        eprintln!(
            "not decodable: {}\n  kube-apiserver: HTTP 400 {message}\n  vapcheck ({}): field {got:?}",
            truth.cases[i].id, output.status
        );
        if output.status.code() != Some(3) || entries.len() != 1 || got.is_none() || got != want {
            writeln!(
                report,
                "{}: the API server cannot decode it at {want:?}; vapcheck ({}) said {got:?}: {}",
                truth.cases[i].id,
                output.status,
                String::from_utf8_lossy(&output.stdout)
            )?;
        }
    }
    eprintln!(
        "map create (not decodable): {}/{} refused by both",
        undecodable.len() - report.lines().count(),
        undecodable.len()
    );
    let files: Vec<PathBuf> = decodable.iter().map(|&i| truth.files[i].clone()).collect();
    let outcomes: Vec<Outcome> = decodable
        .iter()
        .map(|&i| truth.outcomes[i].clone())
        .collect();
    let ids: Vec<&str> = decodable
        .iter()
        .map(|&i| truth.cases[i].id.as_str())
        .collect();
    let objects: Vec<&Value> = decodable.iter().map(|&i| &truth.cases[i].object).collect();
    let entries = run_vapcheck(cluster.kubeconfig(), None, &files)?;
    let mut result = compare_with(
        "map create",
        &files,
        &ids,
        &objects,
        &outcomes,
        &entries,
        EXPECTED_MAP_CREATE_CASES,
    );
    if !report.is_empty() {
        result = result.and(Err(anyhow::anyhow!("{report}")));
    }
    eprintln!(
        "apiserver-verdicts: map create test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

/// Issue 12 part 2: UPDATEs of stored MutatingAdmissionPolicies and bindings (some written
/// straight into etcd), compared with `vapcheck check -o json --previous` (prints
/// `map update: N/N identical`).
async fn vapcheck_mutating_update_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    require_mutating_policies_served(&client).await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-map-update-")
        .tempdir()?;
    let truth = update_truth(
        &client,
        cluster.kubeconfig(),
        tmp.path(),
        map_truth::update_cases(),
    )
    .await?;
    let entries = run_vapcheck(cluster.kubeconfig(), Some(&truth.previous), &truth.files)?;
    let ids: Vec<&str> = truth.cases.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = truth.cases.iter().map(|c| &c.new).collect();
    let result = compare(
        "map update",
        &truth.files,
        &ids,
        &objects,
        &truth.outcomes,
        &entries,
        EXPECTED_MAP_UPDATE_CASES,
    );
    eprintln!(
        "apiserver-verdicts: map update test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

/// One cause of each rule of `crates/core/src/apiserver/webhook.rs`: every fragment of an entry must occur
/// in one cause of the webhook truth.
const WEBHOOK_RULES: &[&[&str]] = &[
    &["webhooks[0].name: Required value"],
    &["webhooks[0].name: Invalid value", "at least three segments"],
    &["webhooks[0].name: Invalid value", "RFC 1123 subdomain"],
    &["webhooks[0].rules[0].operations: Required value"],
    &["webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\""],
    &["webhooks[0].rules[0].apiGroups: Required value"],
    &[
        "webhooks[0].rules[0].resources: Invalid value",
        "if '*/*' is present",
    ],
    &["webhooks[0].rules[0].scope: Unsupported value"],
    &["webhooks[0].failurePolicy: Unsupported value"],
    &["webhooks[0].matchPolicy: Unsupported value"],
    &["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"],
    &["webhooks[0].sideEffects: Unsupported value: \"Some\""],
    &["webhooks[0].timeoutSeconds: Invalid value: 31"],
    &["webhooks[0].namespaceSelector.matchExpressions[0].operator: Invalid value"],
    &["webhooks[0].objectSelector.matchExpressions[0].values[0]: Invalid value"],
    &["webhooks[0].reinvocationPolicy: Unsupported value"],
    &["webhooks[0].clientConfig: Required value: exactly one of url or service is required"],
    &[
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme",
    ],
    &["webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified"],
    &[
        "webhooks[0].clientConfig.url: Invalid value",
        "user information is not permitted",
    ],
    &[
        "webhooks[0].clientConfig.url: Invalid value",
        "fragments are not permitted",
    ],
    &[
        "webhooks[0].clientConfig.url: Invalid value",
        "query parameters are not permitted",
    ],
    &["webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse"],
    &["webhooks[0].clientConfig.service.name: Required value"],
    &["webhooks[0].clientConfig.service.namespace: Required value"],
    &["webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid"],
    &[
        "webhooks[0].clientConfig.service.path: Invalid value",
        "segment[0] may not be empty",
    ],
    &[
        "webhooks[0].clientConfig.service.path: Invalid value",
        "must start with a '/'",
    ],
    &[
        "webhooks[0].clientConfig.service.path: Invalid value",
        "segment[0]: a lowercase RFC 1123",
    ],
    &[
        "webhooks[0].matchConditions[0].expression: Invalid value",
        "compilation failed",
    ],
    &[
        "webhooks[0].matchConditions[0].expression",
        "undeclared reference to 'params'",
    ],
    &["webhooks[0].matchConditions: Too many"],
    &["webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"],
    &["webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version"],
    &[
        "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
    ],
    &["webhooks[0].admissionReviewVersions[0]: Invalid value: \"V1\""],
    &["webhooks[1].name: Duplicate value"],
    &[
        "metadata.name: Invalid value",
        "reserved for static manifest-based configurations",
    ],
];

/// Issue 32 item 1: every webhook configuration of `corpus/webhooks` plus the variants of
/// `e2e/support/webhook_truth.rs`, dry-run created on the real API server and compared with
/// `vapcheck check -o json` (prints `webhook create: N/N identical`).
async fn vapcheck_webhook_create_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-webhook-create-")
        .tempdir()?;
    let shared = support::shared_dir();
    let (mut cases, excluded) = webhook_truth::corpus_cases(&shared)?;
    let generated_from = cases.len();
    cases.extend(webhook_truth::variant_cases());
    let truth = create_truth_of(&client, tmp.path(), cases, excluded, generated_from).await?;
    for e in &truth.excluded {
        eprintln!("not sent (does not parse): {}: {}", e.id, e.reason);
    }
    let rejected = truth.outcomes.iter().filter(|o| !o.accepted).count();
    eprintln!(
        "apiserver-verdicts: {} webhook configurations ({} corpus, {} generated), by HTTP code \
         {:?}, {rejected} rejected",
        truth.cases.len(),
        truth.generated_from,
        truth.cases.len() - truth.generated_from,
        count_by_http(&truth.outcomes)
    );
    let missing: Vec<String> = WEBHOOK_RULES
        .iter()
        .filter(|fragments| {
            !truth
                .outcomes
                .iter()
                .flat_map(|o| &o.causes)
                .any(|c| fragments.iter().all(|f| c.contains(f)))
        })
        .map(|fragments| fragments.join(" … "))
        .collect();
    eprintln!(
        "webhook create: {}/{} rules of crates/core/src/apiserver/webhook.rs seen in the server's causes",
        WEBHOOK_RULES.len() - missing.len(),
        WEBHOOK_RULES.len()
    );
    if !missing.is_empty() {
        bail!(
            "no object makes the API server report these rules (extend e2e/support/webhook_truth.rs): {missing:?}"
        );
    }
    let undecodable: Vec<String> = truth
        .cases
        .iter()
        .zip(&truth.outcomes)
        .filter(|(_, o)| o.http == 400)
        .map(|(c, o)| format!("{}: {}", c.id, o.message))
        .collect();
    ensure!(
        undecodable.is_empty(),
        "corpus webhook configurations the API server cannot decode: {undecodable:#?}"
    );
    let entries = run_vapcheck(cluster.kubeconfig(), None, &truth.files)?;
    // kube-apiserver's create-time warnings about rules naming resources excluded from
    // webhooks (`WarningsForValidatingWebhookRules`) are vapcheck's VAP120 findings,
    // `field: message`, for every accepted object.
    let mut warning_report = String::new();
    let mut with_warnings = 0;
    for (i, outcome) in truth.outcomes.iter().enumerate() {
        if !outcome.accepted {
            continue;
        }
        // Other warnings are the field validation's (unknown fields), not the strategy's.
        let want: Vec<String> = outcome
            .warnings
            .iter()
            .filter(|w| w.contains(" is excluded from admission webhooks"))
            .map(|w| {
                w.strip_prefix("299 - \"")
                    .and_then(|w| w.strip_suffix('"'))
                    .unwrap_or(w)
                    .to_owned()
            })
            .collect();
        let got: Vec<String> = entries
            .get(i)
            .and_then(|e| e["advice"].as_array())
            .into_iter()
            .flatten()
            .filter(|a| a["rule"] == "VAP120")
            .map(|a| {
                format!(
                    "{}: {}",
                    a["fieldRef"].as_str().unwrap_or_default(),
                    a["message"].as_str().unwrap_or_default()
                )
            })
            .collect();
        with_warnings += usize::from(!want.is_empty());
        if want != got {
            writeln!(
                warning_report,
                "--- {} warnings\n  kube-apiserver: {want:?}\n  vapcheck:       {got:?}",
                truth.cases[i].id
            )?;
        }
    }
    eprintln!(
        "webhook create: warnings identical on {} accepted objects ({with_warnings} with warnings)",
        truth.outcomes.iter().filter(|o| o.accepted).count()
    );
    ensure!(
        with_warnings == EXPECTED_WEBHOOK_WARNED && warning_report.is_empty(),
        "{with_warnings} accepted objects with warnings ({EXPECTED_WEBHOOK_WARNED} expected):\n{warning_report}"
    );
    let ids: Vec<&str> = truth.cases.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = truth.cases.iter().map(|c| &c.object).collect();
    let result = compare(
        "webhook create",
        &truth.files,
        &ids,
        &objects,
        &truth.outcomes,
        &entries,
        EXPECTED_WEBHOOK_CREATE_CASES,
    );
    eprintln!(
        "apiserver-verdicts: webhook create test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

/// Issue 32 item 1: UPDATEs of stored webhook configurations (some written straight into etcd,
/// all matching only a resource no server serves), compared with `vapcheck check -o json
/// --previous` (prints `webhook update: N/N identical`).
async fn vapcheck_webhook_update_verdicts_match_the_api_server() -> anyhow::Result<()> {
    let started = Instant::now();
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-webhook-update-")
        .tempdir()?;
    let cases = webhook_truth::update_cases();
    let truth = update_truth(&client, cluster.kubeconfig(), tmp.path(), cases).await?;
    for case in &truth.cases {
        truth::delete_if_present(&client, &case.stored).await?;
    }
    let entries = run_vapcheck(cluster.kubeconfig(), Some(&truth.previous), &truth.files)?;
    let ids: Vec<&str> = truth.cases.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = truth.cases.iter().map(|c| &c.new).collect();
    let result = compare(
        "webhook update",
        &truth.files,
        &ids,
        &objects,
        &truth.outcomes,
        &entries,
        EXPECTED_WEBHOOK_UPDATE_CASES,
    );
    eprintln!(
        "apiserver-verdicts: webhook update test took {:.1?}",
        started.elapsed()
    );
    keep_on_failure(tmp, result)
}

/// Keeps the objects and truth of a failed comparison for reading.
fn keep_on_failure(tmp: tempfile::TempDir, result: anyhow::Result<()>) -> anyhow::Result<()> {
    if result.is_err() {
        let kept = tmp.keep();
        eprintln!(
            "apiserver-verdicts: objects and truth.jsonl kept in {}",
            kept.display()
        );
    }
    result
}

/// Writes the ground truth to `$VAPCHECK_TRUTH_DIR` (default `/tmp/apiserver-truth`) for people
/// to read; vapcheck is not run.
async fn dump_truth() -> anyhow::Result<()> {
    if std::env::var_os("VAPCHECK_TRUTH_DIR").is_none() {
        // SAFETY: set before any other thread of this test reads the environment.
        unsafe { std::env::set_var("VAPCHECK_TRUTH_DIR", "/tmp/apiserver-truth") };
    }
    let (dir, _keep) = truth_dir()?;
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let started = Instant::now();
    let created = create_truth(&client, &dir).await?;
    let updated = update_truth(&client, cluster.kubeconfig(), &dir, truth::update_cases()).await?;
    let elapsed = started.elapsed();

    let mut readme = String::new();
    writeln!(
        readme,
        "Ground truth: kube-apiserver 1.37.1 verdicts on ValidatingAdmissionPolicy(Binding) objects"
    )?;
    writeln!(
        readme,
        "Generated {} in {elapsed:.1?} by e2e/tests/apiserver_verdicts.rs (dump_truth), generator e2e/support/apiserver_truth.rs.\n",
        chrono_free_now()
    )?;
    writeln!(
        readme,
        "objects/NNNN.yaml  one object per file (apiVersion rewritten to admissionregistration.k8s.io/v1 for v1alpha1/v1beta1 corpus documents)"
    )?;
    writeln!(
        readme,
        "truth.jsonl        one line per object, same order: file, id (corpus path#doc or gen/<base>/<mutation>), kind, name, http, accepted,"
    )?;
    writeln!(
        readme,
        "                   causes (details.causes[i].field + \": \" + message, in the server's order), message (raw Status message), reason, warnings"
    )?;
    writeln!(
        readme,
        "update/            NNNN.yaml (new), NNNN.previous.yaml (stored), previous.yaml (all stored objects, for --previous), truth.jsonl (+ previous, storedVia)\n"
    )?;
    writeln!(
        readme,
        "CREATE (dry-run POST ?dryRun=All as cluster-admin): {} objects",
        created.cases.len()
    )?;
    writeln!(
        readme,
        "  corpus: {} (policies from corpus/policies, bindings from corpus/bindings)",
        created.generated_from
    )?;
    writeln!(
        readme,
        "  generated variants: {}",
        created.cases.len() - created.generated_from
    )?;
    for (label, range) in [
        ("all", 0..created.cases.len()),
        ("corpus", 0..created.generated_from),
        ("generated", created.generated_from..created.cases.len()),
    ] {
        writeln!(
            readme,
            "  by HTTP code ({label}): {:?}",
            count_by_http(&created.outcomes[range])
        )?;
    }
    for e in &created.excluded {
        writeln!(
            readme,
            "  not sent, does not parse as YAML: {}: {}",
            e.id, e.reason
        )?;
    }
    writeln!(
        readme,
        "\nUPDATE (stored object via etcd or real create, then dry-run PUT): {} pairs, by HTTP code {:?}",
        updated.cases.len(),
        count_by_http(&updated.outcomes)
    )?;
    for (case, outcome) in updated.cases.iter().zip(&updated.outcomes) {
        writeln!(
            readme,
            "  {:<45} stored via {:?}: {}",
            case.id,
            case.storage,
            if outcome.accepted {
                "accepted".to_string()
            } else {
                format!("rejected: {}", outcome.causes.join(" | "))
            }
        )?;
    }
    writeln!(
        readme,
        "\nRegenerate (starts a private control plane, or uses VAPCHECK_E2E_KUBECONFIG):"
    )?;
    writeln!(
        readme,
        "  cd <repo> && VAPCHECK_TRUTH_DIR=/tmp/apiserver-truth cargo test --test e2e -- --group apiserver_verdicts --ignored dump_truth --nocapture"
    )?;
    write(&dir.join("README.txt"), &readme)?;
    eprintln!("{readme}");
    Ok(())
}

fn chrono_free_now() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// A policy stored straight in etcd (as another API server version or an older library set
/// would have accepted it) that today's API server rejects on create: `vapcheck controller`
/// reports `AcceptedOnCreate=False` naming the API server's own cause (taken from a dry-run
/// create of the same spec), and `vapcheck_policy_rejected_on_create` is 1; a policy the
/// server accepts gets `AcceptedOnCreate=True` and 0. The same for MutatingAdmissionPolicies,
/// which have no status: only the metric (`kind="MutatingAdmissionPolicy"`) says it.
async fn controller_reports_stored_policies_the_api_server_rejects_on_create() -> anyhow::Result<()>
{
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let policy = |name: &str, expression: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                    "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["deployments"], "scope": "*"}]
                },
                "validations": [{"expression": expression}]
            }
        })
    };
    let stored = policy("stored-includes.e2e.vapcheck.dev", "[1, 2].includes(1)");
    let good = policy("created-good.e2e.vapcheck.dev", "object.spec.replicas > 1");
    let mutating = |name: &str, expression: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "matchConstraints": {
                    "matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                    "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["deployments"], "scope": "*"}]
                },
                "mutations": [{"patchType": "ApplyConfiguration",
                               "applyConfiguration": {"expression": expression}}]
            }
        })
    };
    let includes_apply = "[1, 2].includes(1) ? Object{} : Object{}";
    let stored_map = mutating("stored-includes-map.e2e.vapcheck.dev", includes_apply);
    let good_map = mutating(
        "created-good-map.e2e.vapcheck.dev",
        "Object{spec: Object.spec{replicas: 2}}",
    );
    let probe_map = mutating("probe-includes-map.e2e.vapcheck.dev", includes_apply);
    let expected_map = truth::dry_run_create(&client, &probe_map).await?;
    assert_eq!(expected_map.http, 422, "{:?}", expected_map.causes);
    println!(
        "stored MAP: kube-apiserver rejects its create: {:?}",
        expected_map.causes
    );
    // What the API server says to a create of the same spec (under another name).
    let probe = policy("probe-includes.e2e.vapcheck.dev", "[1, 2].includes(1)");
    let expected = truth::dry_run_create(&client, &probe).await?;
    assert_eq!(expected.http, 422, "{:?}", expected.causes);
    let first_line = expected.causes[0]
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();

    for object in [&stored, &good, &stored_map, &good_map] {
        truth::delete_if_present(&client, object).await?;
    }
    let line = [
        json!({"key": truth::etcd_key(&stored)?, "value": truth::etcd_value(&stored, 990_001)}),
        json!({"key": truth::etcd_key(&stored_map)?, "value": truth::etcd_value(&stored_map, 990_002)}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let endpoint = etcd_endpoint(cluster.kubeconfig())?;
    let mut child = Command::new(etcdput()?)
        .args(["-endpoint", &endpoint])
        .stdin(Stdio::piped())
        .spawn()
        .context("running etcdput")?;
    std::io::Write::write_all(
        child.stdin.as_mut().context("etcdput stdin")?,
        format!("{line}\n").as_bytes(),
    )?;
    drop(child.stdin.take());
    let status = child.wait()?;
    if !status.success() {
        bail!("etcdput failed: {status}");
    }
    for created in [&good, &good_map] {
        let (http, body, _) = truth::send(&client, http::Method::POST, created, false).await?;
        if http != 201 {
            bail!(
                "creating {}: HTTP {http}: {}",
                truth::name_of(created),
                String::from_utf8_lossy(&body)
            );
        }
    }

    let log = std::env::temp_dir().join(format!(
        "vapcheck-e2e-accepted-on-create-{}.log",
        std::process::id()
    ));
    let mut controller = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args([
            "controller",
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--health-bind-address",
            "127.0.0.1:0",
            "--lease-name",
            "vapcheck-e2e-accepted-on-create",
            "--lease-duration",
            "4s",
            "--renew-deadline",
            "2s",
        ])
        .env("KUBECONFIG", cluster.kubeconfig())
        .env_remove("RUST_LOG")
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting vapcheck controller")?;
    let result = async {
        let api: kube::Api<ValidatingAdmissionPolicy> = kube::Api::all(client.clone());
        let condition = |p: &ValidatingAdmissionPolicy| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "AcceptedOnCreate").cloned())
        };
        let rejected = support::wait_for(
            "AcceptedOnCreate on the stored policy",
            std::time::Duration::from_secs(60),
            || async {
                Ok(api
                    .get_opt("stored-includes.e2e.vapcheck.dev")
                    .await?
                    .as_ref()
                    .and_then(condition))
            },
        )
        .await?;
        assert_eq!(rejected.status, "False", "{rejected:?}");
        assert_eq!(rejected.reason, "RejectedOnCreate");
        assert!(
            rejected.message.ends_with(&first_line),
            "message {:?} does not end with the API server's cause {first_line:?}",
            rejected.message
        );
        let accepted = support::wait_for(
            "AcceptedOnCreate on the created policy",
            std::time::Duration::from_secs(60),
            || async {
                Ok(api
                    .get_opt("created-good.e2e.vapcheck.dev")
                    .await?
                    .as_ref()
                    .and_then(condition))
            },
        )
        .await?;
        assert_eq!(
            (accepted.status.as_str(), accepted.reason.as_str()),
            ("True", "Accepted")
        );
        // The metric, from the address the controller logs.
        let text = std::fs::read_to_string(&log)?;
        let addr = text
            .lines()
            .find_map(|l| l.split("metrics=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .context("vapcheck did not log its metrics address")?
            .to_owned();
        let metrics = http_get(&addr, "/metrics")?;
        for series in [
            "vapcheck_policy_rejected_on_create{kind=\"ValidatingAdmissionPolicy\",policy=\"stored-includes.e2e.vapcheck.dev\"} 1",
            "vapcheck_policy_rejected_on_create{kind=\"ValidatingAdmissionPolicy\",policy=\"created-good.e2e.vapcheck.dev\"} 0",
        ] {
            assert!(metrics.contains(series), "no {series} in\n{metrics}");
        }
        // MAPs: no status, only the metric (the MAP controller starts once discovery shows
        // the kind, so wait for it).
        let map_series = [
            "vapcheck_policy_rejected_on_create{kind=\"MutatingAdmissionPolicy\",policy=\"stored-includes-map.e2e.vapcheck.dev\"} 1",
            "vapcheck_policy_rejected_on_create{kind=\"MutatingAdmissionPolicy\",policy=\"created-good-map.e2e.vapcheck.dev\"} 0",
        ];
        let started = std::time::Instant::now();
        support::wait_for(
            "vapcheck_policy_rejected_on_create of both MAPs",
            std::time::Duration::from_secs(60),
            || async {
                let metrics = http_get(&addr, "/metrics")?;
                Ok(map_series
                    .iter()
                    .all(|s| metrics.contains(s))
                    .then_some(()))
            },
        )
        .await?;
        println!(
            "stored MAP: vapcheck_policy_rejected_on_create 1 (the created MAP 0) after {:?}",
            started.elapsed()
        );
        anyhow::Ok(())
    }
    .await;
    let _ = controller.kill();
    let _ = controller.wait();
    if result.is_err() {
        eprintln!(
            "controller log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    for object in [&stored, &good, &stored_map, &good_map] {
        truth::delete_if_present(&client, object).await?;
    }
    result
}

/// A plain HTTP GET on loopback.
fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Expressions of the CEL conformance suite read (one-line `expr` fields, distinct) and left
/// out (split over several lines, or not valid UTF-8), and the verdicts kube-apiserver gives
/// none of (it panics building the program and closes the connection, as for a constant map
/// literal with a bytes key; docs/verdicts.md), and how many of the compared verdicts differ
/// only in the expected tokens of a CEL syntax error.
const EXPECTED_CEL_SPEC: (usize, usize, usize, usize) = (2184, 16, 0, 0);

/// Every expression of the CEL conformance suite as a policy variable, created (dry run) on
/// the real API server and checked by `vapcheck check`: the verdicts must be identical
/// (issue 30: literal conversions and qualifiers that cel-go's planner evaluates).
async fn vapcheck_verdicts_on_cel_spec_expressions_match_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let (expressions, left_out) = truth::cel_spec_expressions(&support::shared_dir())?;
    let cases = truth::cel_spec_cases(&expressions);
    // One at a time per request, so that a request the server drops is told apart.
    let outcomes: Vec<anyhow::Result<Outcome>> = futures::stream::iter(cases.iter())
        .map(|c| truth::dry_run_create(&client, &c.object))
        .buffered(PARALLEL)
        .collect()
        .await;
    let tmp = tempfile::Builder::new()
        .prefix("apiserver-verdicts-cel-spec-")
        .tempdir()?;
    let (mut files, mut kept, mut answered, mut dropped) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (case, outcome) in cases.iter().zip(outcomes) {
        match outcome {
            Ok(o) => {
                let file = tmp.path().join(format!("{}.yaml", files.len()));
                write(&file, &truth::render(&case.object)?)?;
                files.push(file);
                kept.push(case);
                answered.push(o);
            }
            Err(e) => {
                let expression = &case.object["spec"]["variables"][0]["expression"];
                eprintln!("cel-spec: no verdict for {expression}: {e:#}");
                dropped.push(case.id.clone());
            }
        }
    }
    if answered.iter().any(|o| o.http != 201 && o.http != 422) {
        bail!("cel-spec: an object got neither 201 nor 422: {answered:?}");
    }
    eprintln!(
        "cel-spec: {} expressions ({left_out} left out), {} verdicts by HTTP code {:?}, {} dropped",
        expressions.len(),
        answered.len(),
        count_by_http(&answered),
        dropped.len()
    );
    let entries = run_vapcheck(cluster.kubeconfig(), None, &files)?;
    let ids: Vec<&str> = kept.iter().map(|c| c.id.as_str()).collect();
    let objects: Vec<&Value> = kept.iter().map(|c| &c.object).collect();
    let token_only = EXPECTED_CEL_SPEC.3;
    let result = compare_with(
        "cel-spec",
        &files,
        &ids,
        &objects,
        &answered,
        &entries,
        (answered.len(), token_only),
    );
    ensure!(
        (expressions.len(), left_out, dropped.len())
            == (
                EXPECTED_CEL_SPEC.0,
                EXPECTED_CEL_SPEC.1,
                EXPECTED_CEL_SPEC.2
            ),
        "cel-spec: (expressions, left out, dropped) = {:?}, expected {:?}",
        (expressions.len(), left_out, dropped.len()),
        EXPECTED_CEL_SPEC
    );
    result
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio vapcheck_create_verdicts_match_the_api_server,
    tokio vapcheck_update_verdicts_match_the_api_server,
    tokio vapcheck_mutating_create_verdicts_match_the_api_server,
    tokio vapcheck_mutating_update_verdicts_match_the_api_server,
    tokio vapcheck_webhook_create_verdicts_match_the_api_server,
    tokio vapcheck_webhook_update_verdicts_match_the_api_server,
    #[ignore = "writes the ground truth for reading; run explicitly"] tokio dump_truth,
    tokio controller_reports_stored_policies_the_api_server_rejects_on_create,
    tokio vapcheck_verdicts_on_cel_spec_expressions_match_the_api_server,
}
