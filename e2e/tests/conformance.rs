//! The conformance run (project issue #6): every ValidatingAdmissionPolicy of the shared corpus,
//! plus the CRDs of our own tests and a few policies written for them, applied to a real
//! kube-apiserver 1.37.1 with the upstream status controller (kube-controller-manager) running.
//! Once upstream has written a status for each policy's generation, vapcheck computes its strict
//! status for the same stored policies against the same API server, and the two
//! `status.typeChecking` values are compared after removing the random digits upstream appends
//! to root type names.
//!
//! vapcheck reads the server twice, and both must agree with upstream:
//! - **live**: [`vapcheck::schema::LiveSource`] (the `/openapi/v3` documents, polled as the
//!   controller polls them) and a REST mapper built from live aggregated discovery;
//! - **files**: the same `/openapi/v3` documents saved into a folder laid out like
//!   `/openapi/v3`, then exactly what `vapcheck check --mode strict --openapi <dir>` runs.
//!
//! Run with `cargo test --test e2e -- --group conformance --nocapture` (see docs/conformance.md).

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use support::{
    Cluster, FIELD_MANAGER, UpOptions, Vapcheck, apply_yaml, parse_yaml_documents, shared_cluster,
    wait_for,
};
use vapcheck::cli::SchemaOptions;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::input::read_policies;
use vapcheck::engine::{KubeChecker, Schemas};
use vapcheck::k8s_env::Target;
use vapcheck::policy::discovery::discovery_from_aggregated;
use vapcheck::policy::{
    Backends, CheckOptions, DiscoveryRestMapper, Mode, PolicyStatus, check_policy,
};
use vapcheck::schema::{ConvertOptions, Limits, LiveSource};

/// How long upstream may take to write the status of every applied policy (it needs well under
/// a second per policy once its informers run; on a quiet machine the 261 corpus policies take
/// about a minute, but with two other e2e groups and builds beside it, at a load average of 13 to
/// 20 on 2 cores, 11 of them had no status after 180 s).
const STATUS_DEADLINE: Duration = Duration::from_secs(420);

/// How long a CRD may take to be established, served and published under `/openapi/v3`.
const CRD_DEADLINE: Duration = Duration::from_secs(90);

/// How many apply requests run at the same time.
const PARALLEL_APPLIES: usize = 16;

/// The group of the test CRD our own policies match (`tests/fixtures/crds/widgets.yaml`).
const CRD_GROUP_VERSIONS: [&str; 3] = [
    "apis/example.com/v1",
    "apis/example.com/v1beta1",
    "apis/conformance.vapcheck.dev/v1",
];

/// The media type of aggregated discovery (`apidiscovery.k8s.io/v2`).
const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Policies of our own for the fixture CRDs: escaped property names, int-or-string, embedded
/// resources, preserve-unknown-fields, several versions, a subresource, and mistakes.
const OWN_POLICIES: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: own-widgets-fields
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["widgets"]
  validations:
  - expression: "object.spec.replicas <= 10"
  - expression: "object.spec.foo__dash__bar.size() < 20 && object.spec.a__dot__b__slash__c != ''"
  - expression: "object.spec.x__underscores__y == '' || object.spec.__namespace__ == 'x'"
  - expression: "!has(object.spec.maxSurge) || object.spec.maxSurge == 1 || object.spec.maxSurge == '10%'"
  - expression: "object.spec.ports.all(p, p.port > 0 && p.name != '')"
  - expression: "object.spec.byZone.all(z, object.spec.byZone[z].weight >= 0)"
  - expression: "object.spec.template.kind == 'Pod' && object.spec.extra.known != ''"
    messageExpression: "'bad template ' + object.spec.template.metadata.name"
  - expression: "object.spec.timeout < duration('1h') && object.spec.since < timestamp('2030-01-01T00:00:00Z')"
  - expression: "object.spec.matrix.all(row, row.all(x, x >= 0)) && object.spec.ratio < 1.5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: own-widgets-mistakes
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1", "v1beta1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["widgets", "widgets/status", "widgets/scale"]
  variables:
  - name: size
    expression: "object.spec.size"
  validations:
  - expression: "object.spec.replica > 1"
  - expression: "object.spec.replicas == 'three'"
  - expression: "variables.size > 2"
  - expression: "object.status.conditions.exists(c, c.reason == 'Ready')"
    messageExpression: "'ratio ' + object.spec.ratio"
  - expression: "object.spec.labels.owner + 1 > 2"
  - expression: "object.spec.maxSurge > 1 && object.spec.ports.exists(p, p.targetPort.startsWith('h'))"
  - expression: "object.spec.template.spec.containers.size() > 0 && object.spec.resources[0].kind.size() > 0"
  - expression: "object.spec.resources[0].spec.anything && object.spec.anything.x == 1"
  - expression: "object.spec.byZone['a'] == 'heavy' || object.spec.ports[0] == 80"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: own-gadgets
spec:
  paramKind:
    apiVersion: conformance.vapcheck.dev/v1
    kind: Gadget
  matchConstraints:
    resourceRules:
    - apiGroups: ["conformance.vapcheck.dev"]
      apiVersions: ["v1"]
      operations: ["*"]
      resources: ["gadgets", "gadgets/status"]
  validations:
  - expression: "object.spec.rules.all(r, r.kinds.size() > 0 && r.selector.matchLabels.all(k, k != ''))"
  - expression: "object.spec.rules.all(r, r.schema.anything == 1 && r.match == [])"
  - expression: "params.spec.rules.size() <= object.spec.limit"
  - expression: "object.metadata.name.size() < 10 && object.spec.undefinedThing"
  - expression: "object.spec.rules[0] == params.spec.rules[0].selector"
    messageExpression: "'limit ' + params.spec.limit"
"#;

/// A cluster-scoped CRD of our own (the fixture `clusters.yaml` is not accepted by a real API
/// server: one of its served versions has no schema): nested lists and objects, a map,
/// preserve-unknown-fields, and a param kind for the policy above.
const OWN_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.conformance.vapcheck.dev
spec:
  group: conformance.vapcheck.dev
  scope: Cluster
  names:
    kind: Gadget
    plural: gadgets
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              limit: {type: integer}
              rules:
                type: array
                items:
                  type: object
                  properties:
                    kinds: {type: array, items: {type: string}}
                    selector:
                      type: object
                      properties:
                        matchLabels: {type: object, additionalProperties: {type: string}}
                    schema:
                      type: object
                      x-kubernetes-preserve-unknown-fields: true
"#;

/// One policy as applied: where it came from and the name it got on the server (corpus names
/// repeat across files, so every policy gets a unique one; the name plays no part in type
/// checking).
#[derive(Debug, Clone)]
struct Applied {
    /// `corpus/<file>#<document>[item]` or `own#<n>`.
    origin: String,
    /// `metadata.name` in the source.
    original_name: String,
    /// The name on the server.
    name: String,
}

/// Every file under `dir`, recursively, sorted.
fn files_under(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The corpus policies (read as v1, whatever version they were written for) and ours.
fn policies_to_apply() -> anyhow::Result<Vec<(Applied, ValidatingAdmissionPolicy)>> {
    let corpus = support::shared_dir().join("corpus/policies");
    let mut out = Vec::new();
    for path in files_under(&corpus)? {
        let relative = path
            .strip_prefix(&corpus)
            .unwrap_or(&path)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let policies = read_policies(&relative, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
        for p in policies {
            out.push((format!("corpus/{}", p.origin), p.policy));
        }
    }
    let own = read_policies("own", OWN_POLICIES).map_err(|e| anyhow::anyhow!("{e}"))?;
    out.extend(own.into_iter().map(|p| (p.origin.to_string(), p.policy)));
    Ok(out
        .into_iter()
        .enumerate()
        .map(|(i, (origin, policy))| {
            let applied = Applied {
                origin,
                original_name: policy.metadata.name.clone().unwrap_or_default(),
                name: format!("conformance-{i:03}"),
            };
            (applied, policy)
        })
        .collect())
}

/// Applies the CRDs of `tests/fixtures/crds` (items of `List` documents too; other kinds are
/// skipped). Returns the names of the CRDs the server rejected, with the reason.
async fn apply_fixture_crds(client: &Client) -> anyhow::Result<Vec<String>> {
    let dir = support::repo_root().join("tests/fixtures/crds");
    let mut rejected = Vec::new();
    for path in files_under(&dir)? {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        for doc in parse_yaml_documents(&text)? {
            let objects = match doc.get("items").and_then(Value::as_array) {
                Some(items) if doc["kind"] == "List" => items.clone(),
                _ => vec![doc],
            };
            for object in objects {
                if object["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                let yaml = serde_json::to_string(&object)?;
                if let Err(err) = apply_yaml(client, &yaml).await {
                    let name = object["metadata"]["name"].as_str().unwrap_or("?");
                    rejected.push(format!("{name} ({}): {err:#}", path.display()));
                }
            }
        }
    }
    Ok(rejected)
}

/// Whether a kube error is the API server refusing the object as invalid (422).
fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 422)
}

/// Applies every policy with server-side apply, [`PARALLEL_APPLIES`] at a time. Returns the
/// rejected ones with the server's message; any other error fails.
async fn apply_policies(
    client: &Client,
    policies: &[(Applied, ValidatingAdmissionPolicy)],
) -> anyhow::Result<Vec<(Applied, String)>> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let results: Vec<(Applied, Result<(), kube::Error>)> =
        futures::stream::iter(policies.iter().map(|(applied, policy)| {
            let api = api.clone();
            let params = params.clone();
            let object = ValidatingAdmissionPolicy {
                metadata: ObjectMeta {
                    name: Some(applied.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: policy.spec.clone(),
                status: None,
            };
            async move {
                let result = api
                    .patch(&applied.name, &params, &Patch::Apply(&object))
                    .await
                    .map(|_| ());
                (applied.clone(), result)
            }
        }))
        .buffer_unordered(PARALLEL_APPLIES)
        .collect()
        .await;
    let mut rejected = Vec::new();
    for (applied, result) in results {
        match result {
            Ok(()) => {}
            Err(err) if is_invalid(&err) => rejected.push((applied, err.to_string())),
            Err(err) => {
                return Err(err).with_context(|| {
                    format!("applying {} ({})", applied.origin, applied.original_name)
                });
            }
        }
    }
    rejected.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(rejected)
}

/// Waits (one list call per round) until every policy named in `names` has a status with
/// `observedGeneration == metadata.generation`, and returns the stored policies by name.
async fn wait_for_upstream_statuses(
    client: &Client,
    names: &BTreeSet<String>,
) -> anyhow::Result<BTreeMap<String, ValidatingAdmissionPolicy>> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let missing_last = std::cell::Cell::new(names.len());
    let missing_ref = &missing_last;
    wait_for(
        &format!("upstream status of {} policies", names.len()),
        STATUS_DEADLINE,
        || {
            let api = api.clone();
            async move {
                let list = api.list(&ListParams::default()).await?;
                let mut done = BTreeMap::new();
                let mut missing = Vec::new();
                for policy in list.items {
                    let name = policy.name_any();
                    if !names.contains(&name) {
                        continue;
                    }
                    let generation = policy.metadata.generation;
                    let observed = policy.status.as_ref().and_then(|s| s.observed_generation);
                    if generation.is_some() && observed == generation {
                        done.insert(name, policy);
                    } else {
                        missing.push(name);
                    }
                }
                let absent = names.len() - done.len() - missing.len();
                missing_ref.set(names.len() - done.len());
                if done.len() == names.len() {
                    Ok(Some(done))
                } else {
                    anyhow::ensure!(absent == 0, "{absent} applied policies are not listed");
                    Ok(None)
                }
            }
        },
    )
    .await
    .with_context(|| {
        format!(
            "{} policies still without an upstream status",
            missing_last.get()
        )
    })
}

/// Whether discovery serves both API groups of the fixture CRDs.
async fn fixture_groups_served(client: &Client) -> anyhow::Result<bool> {
    Ok(live_discovery(client)
        .await?
        .iter()
        .filter(|g| g.name == "example.com" || g.name == "conformance.vapcheck.dev")
        .count()
        == 2)
}

/// Aggregated discovery of the server (`/api` then `/apis`), as the REST mapper's input.
async fn live_discovery(
    client: &Client,
) -> anyhow::Result<Vec<vapcheck::policy::ApiGroupResources>> {
    let mut groups = Vec::new();
    for path in ["/api", "/apis"] {
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, AGGREGATED_DISCOVERY)
            .body(Vec::new())?;
        let list: Value = client
            .request(request)
            .await
            .with_context(|| format!("GET {path} (aggregated discovery)"))?;
        groups
            .extend(discovery_from_aggregated(&list).map_err(|e| anyhow::anyhow!("{path}: {e}"))?);
    }
    Ok(groups)
}

/// Saves `/openapi/v3` into `dir` laid out as `vapcheck check --openapi` reads it
/// (`api/v1.json`, `apis/<group>/<version>.json`). Returns how many documents were saved.
async fn save_openapi(client: &Client, dir: &Path) -> anyhow::Result<usize> {
    let index: Value = client
        .request(http::Request::get("/openapi/v3").body(Vec::new())?)
        .await
        .context("GET /openapi/v3")?;
    let paths = index["paths"]
        .as_object()
        .context("/openapi/v3 has no paths")?;
    let mut saved = 0;
    for (path, entry) in paths {
        // Only group-version documents: `api/v1` and `apis/<group>/<version>`.
        let parts: Vec<&str> = path.split('/').collect();
        let file = match parts.as_slice() {
            ["api", version] => dir.join("api").join(format!("{version}.json")),
            ["apis", group, version] => {
                dir.join("apis").join(group).join(format!("{version}.json"))
            }
            _ => continue,
        };
        let url = entry["serverRelativeURL"]
            .as_str()
            .with_context(|| format!("{path} has no serverRelativeURL"))?;
        let text = client
            .request_text(
                http::Request::get(url)
                    .header(http::header::ACCEPT, "application/json")
                    .body(Vec::new())?,
            )
            .await
            .with_context(|| format!("GET {url}"))?;
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        saved += 1;
    }
    Ok(saved)
}

/// Removes the digits upstream appends to root type names (`Deployment123456789.spec` →
/// `Deployment.spec`; upstream's `generateUniqueTypeName` appends `time.Now().Nanosecond()`, so
/// one to nine digits). Only a kind of `kinds` directly followed by digits and then by no
/// letter, digit or `_` is touched, at a word start, and never on the ` | ` lines where CEL
/// echoes the expression's source (the expression itself may contain `Pod1`).
fn normalise_type_names(text: &str, kinds: &BTreeSet<String>) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.starts_with(" |") {
            out.push_str(line);
            continue;
        }
        out.push_str(&normalise_line(line, kinds));
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn normalise_line(line: &str, kinds: &BTreeSet<String>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    let mut previous: Option<char> = None;
    'scan: while let Some(c) = rest.chars().next() {
        if !previous.is_some_and(is_word) {
            // The longest kind that matches here, followed by 1..=9 digits and a non-word char.
            let mut best: Option<(usize, usize)> = None;
            for kind in kinds {
                let Some(after) = rest.strip_prefix(kind.as_str()) else {
                    continue;
                };
                let digits = after.chars().take_while(char::is_ascii_digit).count();
                let next = after[digits..].chars().next();
                if (1..=9).contains(&digits)
                    && !next.is_some_and(is_word)
                    && best.is_none_or(|(len, _)| kind.len() > len)
                {
                    best = Some((kind.len(), digits));
                }
            }
            if let Some((len, digits)) = best {
                out.push_str(&rest[..len]);
                rest = &rest[len + digits..];
                previous = Some('0');
                continue 'scan;
            }
        }
        out.push(c);
        previous = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Upstream's `status.typeChecking` with the type names normalised, as JSON.
fn upstream_type_checking(policy: &ValidatingAdmissionPolicy, kinds: &BTreeSet<String>) -> Value {
    let mut value = policy
        .status
        .as_ref()
        .and_then(|s| s.type_checking.as_ref())
        .map(|tc| serde_json::to_value(tc).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    if let Some(warnings) = value
        .get_mut("expressionWarnings")
        .and_then(Value::as_array_mut)
    {
        for w in warnings {
            if let Some(text) = w.get("warning").and_then(Value::as_str) {
                let normalised = normalise_type_names(text, kinds);
                w["warning"] = Value::String(normalised);
            }
        }
    }
    value
}

fn ours(status: &PolicyStatus) -> Value {
    serde_json::to_value(status.type_checking()).unwrap_or(Value::Null)
}

/// One way vapcheck reads the server: REST mapper (also the extended mode's discovery), schema
/// source and checker.
struct Reader {
    label: &'static str,
    mapper: DiscoveryRestMapper,
    schemas: Box<dyn vapcheck::policy::SchemaSource>,
    checker: Box<dyn vapcheck::policy::ExpressionChecker>,
}

impl Reader {
    fn check(&self, policy: &ValidatingAdmissionPolicy, mode: Mode) -> PolicyStatus {
        let backends = Backends {
            rest_mapper: &self.mapper,
            discovery: Some(&self.mapper),
            schemas: self.schemas.as_ref(),
            checker: self.checker.as_ref(),
        };
        let options = CheckOptions {
            mode,
            ..CheckOptions::default()
        };
        check_policy(policy, &options, &backends)
    }
}

/// The outcome of comparing one reader's strict statuses with upstream's.
/// Policies applied (258 of the corpus and 3 of our own), corpus policies the API server
/// rejects (not compared), corpus policies compared, upstream warnings in all compared policies
/// and in our own (CRD) ones: docs/conformance.md's table.
const EXPECTED_COUNTS: (usize, usize, usize, usize, usize) = (261, 5, 258, 128, 13);

struct Comparison {
    identical: usize,
    /// Corpus policies compared, and how many of them are identical.
    corpus: (usize, usize),
    /// Upstream warnings in all compared policies, and in our own policies.
    upstream_warnings: usize,
    own_upstream_warnings: usize,
    /// Upstream warnings whose text named a type with random digits (corpus, ours).
    normalised: (usize, usize),
    differences: Vec<String>,
    strict_warnings: usize,
    extended_warnings: usize,
    policies_with_extra: usize,
    /// Extended warnings on a fieldRef strict has no warning for.
    new_field_refs: usize,
    /// Extended warnings on a fieldRef strict also warns about, with a different text (more
    /// kinds checked, e.g. subresources or wildcard rules).
    changed_texts: usize,
    extra_samples: Vec<String>,
}

fn compare(
    reader: &Reader,
    applied: &[Applied],
    stored: &BTreeMap<String, ValidatingAdmissionPolicy>,
    kinds: &BTreeSet<String>,
) -> Comparison {
    let mut c = Comparison {
        identical: 0,
        corpus: (0, 0),
        upstream_warnings: 0,
        own_upstream_warnings: 0,
        normalised: (0, 0),
        differences: Vec::new(),
        strict_warnings: 0,
        extended_warnings: 0,
        policies_with_extra: 0,
        new_field_refs: 0,
        changed_texts: 0,
        extra_samples: Vec::new(),
    };
    for a in applied {
        let Some(policy) = stored.get(&a.name) else {
            continue;
        };
        let mut kinds = kinds.clone();
        if let Some(kind) = policy
            .spec
            .as_ref()
            .and_then(|s| s.param_kind.as_ref())
            .and_then(|p| p.kind.clone())
        {
            kinds.insert(kind);
        }
        if !a.origin.starts_with("corpus/")
            && std::env::var_os("VAPCHECK_CONFORMANCE_VERBOSE").is_some()
        {
            println!(
                "upstream, as written, for {} ({}): {:#?}",
                a.origin, a.original_name, policy.status
            );
        }
        let strict = reader.check(policy, Mode::Strict);
        let theirs = upstream_type_checking(policy, &kinds);
        let normalised = theirs["expressionWarnings"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(
                policy
                    .status
                    .as_ref()
                    .and_then(|s| s.type_checking.as_ref())
                    .and_then(|t| t.expression_warnings.as_deref())
                    .unwrap_or(&[]),
            )
            .filter(|(n, raw)| n["warning"].as_str() != Some(raw.warning.as_str()))
            .count();
        let mine = ours(&strict);
        let upstream_count = theirs["expressionWarnings"].as_array().map_or(0, Vec::len);
        c.upstream_warnings += upstream_count;
        let from_corpus = a.origin.starts_with("corpus/");
        if from_corpus {
            c.corpus.0 += 1;
            c.normalised.0 += normalised;
        } else {
            c.own_upstream_warnings += upstream_count;
            c.normalised.1 += normalised;
        }
        // Upstream writes no conditions (1.37.1); besides typeChecking, its observedGeneration
        // must be the one vapcheck would write.
        let upstream_generation = policy.status.as_ref().and_then(|s| s.observed_generation);
        if theirs == mine && strict.observed_generation == upstream_generation {
            c.identical += 1;
            if from_corpus {
                c.corpus.1 += 1;
            }
        } else {
            let mut text = describe_difference(a, &theirs, &mine);
            if strict.observed_generation != upstream_generation {
                text.push_str(&format!(
                    "\n  observedGeneration\n    upstream: {upstream_generation:?}\n    vapcheck: {:?}",
                    strict.observed_generation
                ));
            }
            c.differences.push(text);
        }
        let extended = reader.check(policy, Mode::Extended);
        c.strict_warnings += strict.expression_warnings.len();
        c.extended_warnings += extended.expression_warnings.len();
        let extra: Vec<_> = extended
            .expression_warnings
            .iter()
            .filter(|w| !strict.expression_warnings.contains(w))
            .collect();
        if !extra.is_empty() {
            c.policies_with_extra += 1;
            for w in &extra {
                if strict
                    .expression_warnings
                    .iter()
                    .any(|s| s.field_ref == w.field_ref)
                {
                    c.changed_texts += 1;
                } else {
                    c.new_field_refs += 1;
                }
            }
            for w in extra {
                c.extra_samples.push(format!(
                    "{} ({}) {}: {}",
                    a.origin, a.original_name, w.field_ref, w.warning
                ));
            }
        }
    }
    c
}

/// Per fieldRef, both texts.
fn describe_difference(a: &Applied, theirs: &Value, mine: &Value) -> String {
    let by_field = |v: &Value| -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for w in v["expressionWarnings"].as_array().into_iter().flatten() {
            out.entry(w["fieldRef"].as_str().unwrap_or("?").to_owned())
                .or_default()
                .push(w["warning"].as_str().unwrap_or("?").to_owned());
        }
        out
    };
    let (t, m) = (by_field(theirs), by_field(mine));
    let mut text = format!("{} ({}, applied as {})", a.origin, a.original_name, a.name);
    let fields: BTreeSet<&String> = t.keys().chain(m.keys()).collect();
    for f in fields {
        let (tw, mw) = (t.get(f), m.get(f));
        if tw == mw {
            continue;
        }
        text.push_str(&format!(
            "\n  {f}\n    upstream: {:?}\n    vapcheck: {:?}",
            tw.map(Vec::as_slice).unwrap_or(&[]),
            mw.map(Vec::as_slice).unwrap_or(&[])
        ));
    }
    if t == m && theirs != mine {
        text.push_str(&format!("\n  upstream: {theirs}\n  vapcheck: {mine}"));
    }
    text
}

async fn strict_status_of_the_corpus_matches_the_upstream_controller() -> anyhow::Result<()> {
    let started = Instant::now();
    let client = shared_cluster()?.client().await?;
    let cluster_ready = started.elapsed();

    // CRDs first, so that policies matching them are mapped by both sides.
    let rejected_crds = apply_fixture_crds(&client).await?;
    apply_yaml(&client, OWN_CRD).await?;
    for r in &rejected_crds {
        println!("CRD rejected by the API server: {r}");
    }
    wait_for(
        "the fixture CRDs in /openapi/v3 and discovery",
        CRD_DEADLINE,
        || async {
            let index: Value = client
                .request(http::Request::get("/openapi/v3").body(Vec::new())?)
                .await?;
            let published = CRD_GROUP_VERSIONS
                .iter()
                .all(|gv| index["paths"].get(gv).is_some());
            let served = fixture_groups_served(&client).await?;
            Ok((published && served).then_some(()))
        },
    )
    .await?;

    let policies = policies_to_apply()?;
    let apply_started = Instant::now();
    let rejected = apply_policies(&client, &policies).await?;
    let rejected_names: BTreeSet<&str> = rejected.iter().map(|(a, _)| a.name.as_str()).collect();
    let applied: Vec<Applied> = policies
        .iter()
        .map(|(a, _)| a.clone())
        .filter(|a| !rejected_names.contains(a.name.as_str()))
        .collect();
    let names: BTreeSet<String> = applied.iter().map(|a| a.name.clone()).collect();
    let stored = wait_for_upstream_statuses(&client, &names).await?;
    let upstream_done = apply_started.elapsed();

    // vapcheck, live: LiveSource + aggregated discovery.
    let live = LiveSource::new(client.clone(), Limits::default(), ConvertOptions::default());
    let changes = live
        .poll()
        .await
        .context("polling the live schema source")?;
    anyhow::ensure!(
        changes.failed.is_empty(),
        "documents failed to download: {:?}",
        changes.failed
    );
    let checker = || KubeChecker::new(Target::upstream()).map_err(|e| anyhow::anyhow!("{e}"));
    let live_reader = Reader {
        label: "live (LiveSource + aggregated discovery)",
        mapper: DiscoveryRestMapper::new(live_discovery(&client).await?),
        schemas: Box::new(Schemas::new(Arc::new(live))),
        checker: Box::new(checker()?),
    };

    // vapcheck, files: `vapcheck check --mode strict --openapi <dir>` on the saved documents.
    // `VAPCHECK_CONFORMANCE_OPENAPI_DIR` keeps the documents (e.g. to run `vapcheck check
    // --openapi` on them by hand); by default they go to a temporary folder.
    let temp = tempfile::tempdir()?;
    let dir = match std::env::var_os("VAPCHECK_CONFORMANCE_OPENAPI_DIR") {
        Some(d) => PathBuf::from(d),
        None => temp.path().to_path_buf(),
    };
    let saved = save_openapi(&client, &dir).await?;
    let options = SchemaOptions {
        openapi: Some(dir.clone()),
        ..SchemaOptions::default()
    };
    let (schemas, file_checker) =
        vapcheck::cli::offline_backends(&options).map_err(|e| anyhow::anyhow!("{e}"))?;
    let files_reader = Reader {
        label: "files (vapcheck check --openapi <saved /openapi/v3>)",
        mapper: DiscoveryRestMapper::new(
            offline_discovery(Some(&dir), None, &[]).map_err(|e| anyhow::anyhow!("{e}"))?,
        ),
        schemas,
        checker: file_checker,
    };

    // Every kind the server serves: upstream names root types after them.
    let kinds: BTreeSet<String> = live_discovery(&client)
        .await?
        .into_iter()
        .flat_map(|g| g.versions)
        .flat_map(|v| v.resources)
        .map(|r| r.kind)
        .filter(|k| !k.is_empty())
        .collect();

    println!(
        "cluster ready after {cluster_ready:.1?}; {} policies applied, {} rejected by the API \
         server; upstream statuses after {upstream_done:.1?}; {saved} OpenAPI documents saved",
        applied.len(),
        rejected.len()
    );
    for (a, message) in &rejected {
        println!(
            "rejected by the API server (not compared): {} ({}): {message}",
            a.origin, a.original_name
        );
    }

    let mut failures = Vec::new();
    for (a, _) in rejected
        .iter()
        .filter(|(a, _)| !a.origin.starts_with("corpus/"))
    {
        failures.push(format!(
            "our own policy {} was rejected by the API server",
            a.original_name
        ));
    }
    for reader in [&live_reader, &files_reader] {
        let c = compare(reader, &applied, &stored, &kinds);
        println!(
            "{}: {}/{} identical ({}/{} of the corpus; {} upstream warnings, {} of them on our \
             own CRD policies; type names normalised in {} corpus and {} own warnings)",
            reader.label,
            c.identical,
            applied.len(),
            c.corpus.1,
            c.corpus.0,
            c.upstream_warnings,
            c.own_upstream_warnings,
            c.normalised.0,
            c.normalised.1
        );
        // Exact counts (docs/conformance.md): a corpus policy that stops being applied or
        // compared, or an upstream warning that goes missing, fails here instead of shrinking
        // the comparison.
        let counts = (
            applied.len(),
            rejected.len(),
            c.corpus.0,
            c.upstream_warnings,
            c.own_upstream_warnings,
        );
        if counts != EXPECTED_COUNTS {
            failures.push(format!(
                "{}: (applied, rejected, corpus policies compared, upstream warnings, of them on \
                 our CRD policies) = {counts:?}, expected {EXPECTED_COUNTS:?}",
                reader.label
            ));
        }
        for d in &c.differences {
            println!("{d}");
        }
        println!(
            "{}: extended mode: {} warnings ({} in strict); {} differ from strict in {} policies: \
             {} on expressions strict does not warn about, {} with a longer text",
            reader.label,
            c.extended_warnings,
            c.strict_warnings,
            c.extra_samples.len(),
            c.policies_with_extra,
            c.new_field_refs,
            c.changed_texts
        );
        if std::env::var_os("VAPCHECK_CONFORMANCE_EXTENDED").is_some() {
            for s in &c.extra_samples {
                println!("  extended: {s}");
            }
        }
        if !c.differences.is_empty() {
            failures.push(format!(
                "{}: {} of {} policies differ from upstream",
                reader.label,
                c.differences.len(),
                applied.len()
            ));
        }
    }
    // The controller's own writes: a control plane without kube-controller-manager's status
    // controller, the same CRDs and policies, `vapcheck controller --mode strict` writing the
    // statuses; each `typeChecking` must equal the one kube-controller-manager wrote above.
    let controller_started = Instant::now();
    let written = controller_statuses(&policies).await?;
    let mut controller_differences = Vec::new();
    for a in &applied {
        let theirs = stored
            .get(&a.name)
            .map(|p| upstream_type_checking(p, &kinds));
        let mine = written
            .get(&a.name)
            .map(|p| upstream_type_checking(p, &kinds));
        if theirs != mine {
            controller_differences.push(format!(
                "{} ({}):\n  kube-controller-manager: {}\n  vapcheck controller:     {}",
                a.origin,
                a.original_name,
                theirs.unwrap_or(Value::Null),
                mine.unwrap_or(Value::Null)
            ));
        }
    }
    println!(
        "controller (vapcheck controller --mode strict, its own control plane): {}/{} \
         typeChecking identical to kube-controller-manager's, after {:.1?}",
        applied.len() - controller_differences.len(),
        applied.len(),
        controller_started.elapsed()
    );
    for d in &controller_differences {
        println!("{d}");
    }
    if written.len() != applied.len() || !controller_differences.is_empty() {
        failures.push(format!(
            "controller: {} statuses written for {} policies, {} differ from upstream",
            written.len(),
            applied.len(),
            controller_differences.len()
        ));
    }
    println!("total {:.1?}", started.elapsed());
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// Starts a control plane without the upstream status controller, applies the fixture CRDs and
/// `policies` to it, runs `vapcheck controller --mode strict` on it and returns the policies
/// once each has a status for its generation (those the API server accepts).
async fn controller_statuses(
    policies: &[(Applied, ValidatingAdmissionPolicy)],
) -> anyhow::Result<BTreeMap<String, ValidatingAdmissionPolicy>> {
    let cluster = Cluster::start(UpOptions {
        with_upstream_controller: false,
        apiserver_extra_args: None,
    })?;
    let client = cluster.client().await?;
    apply_fixture_crds(&client).await?;
    apply_yaml(&client, OWN_CRD).await?;
    wait_for("the fixture CRDs in discovery", CRD_DEADLINE, || async {
        Ok(fixture_groups_served(&client).await?.then_some(()))
    })
    .await?;
    let _vapcheck = Vapcheck::start(cluster.kubeconfig(), "conformance", &["--mode", "strict"])?;
    let rejected = apply_policies(&client, policies).await?;
    let rejected: BTreeSet<&str> = rejected.iter().map(|(a, _)| a.name.as_str()).collect();
    let names: BTreeSet<String> = policies
        .iter()
        .map(|(a, _)| a.name.clone())
        .filter(|n| !rejected.contains(n.as_str()))
        .collect();
    wait_for_upstream_statuses(&client, &names).await
}

fn normalisation_removes_only_digits_after_kinds() {
    let kinds: BTreeSet<String> = ["Pod", "PodTemplate", "Deployment"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let text = "apps/v1, Kind=Deployment: ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(Deployment123456789.spec.replicas, PodTemplate7)'\n | object == Pod1\n | ....^";
    assert_eq!(
        normalise_type_names(text, &kinds),
        "apps/v1, Kind=Deployment: ERROR: <input>:1:5: found no matching overload for '_==_' applied to '(Deployment.spec.replicas, PodTemplate)'\n | object == Pod1\n | ....^"
    );
    // Not a kind at a word start, too many digits, or followed by a letter: untouched.
    for untouched in ["MyPod12.spec", "Pod1234567890.x", "Pod12a", "v1.Pod"] {
        assert_eq!(normalise_type_names(untouched, &kinds), untouched);
    }
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio strict_status_of_the_corpus_matches_the_upstream_controller,
    sync normalisation_removes_only_digits_after_kinds,
}
