//! Proof for issue 31 (runtime safety) on the real kube-apiserver 1.37.1.
//!
//! * `witnesses_are_what_the_api_server_admits`: every object of `data/witnesses.json` is
//!   dry-run created; what the API server returns (the object as admitted: defaulted, mutated
//!   by the built-in mutating plugins, with `PrepareForCreate`'s fields) must equal the
//!   recorded `admitted` form after blanking generated values. `VAPCHECK_BLESS=1` records them
//!   again (refused under CI by `.ci/run`).
//! * `findings_reproduce_on_the_api_server`: `vapcheck check -o json` on the class cases
//!   (`e2e/fixtures/runtime-safety-cases.yaml`), on the params cases
//!   (`e2e/fixtures/runtime-safety-params.yaml`: a finding on `params` is replayed with a
//!   binding without `paramRef`, or with one to its param object) and on the policy and
//!   binding corpora; every
//!   runtime finding is replayed: its policy (only the expression of the finding and the
//!   policy's matchConditions and variables), bound to a namespace of its own, must deny the
//!   finding's witness request with failurePolicy Fail and the finding's error text, admit it
//!   with failurePolicy Ignore, and neither error nor deny for that error with the finding's
//!   fixed expression. The counts are asserted exactly.
//!
//! `cargo test --test e2e -- --group runtime_safety --nocapture` prints one line per finding and a
//! summary line per corpus.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use kube::Client;
use serde_json::{Value, json};

/// Findings on the class cases, the policy corpus and the binding-set corpus (one run per
/// set; a policy with a `paramKind` is analysed only on `params`, per binding).
const EXPECTED_CASES: usize = 17;
const EXPECTED_POLICIES: usize = 9;
const EXPECTED_BINDINGS: usize = 4;
/// Of those, on policies kube-apiserver rejects (not replayed).
const EXPECTED_REJECTED: usize = 8;
/// Findings on `params` on the params cases (`e2e/fixtures/runtime-safety-params.yaml`).
const EXPECTED_PARAMS_CASES: usize = 3;
/// MutatingAdmissionPolicy findings on the MAP cases and the mutating corpus, and of those,
/// on policies kube-apiserver rejects.
const EXPECTED_MAP_CASES: usize = 5;
const EXPECTED_MAP_CORPUS: usize = 12;
const EXPECTED_MAP_REJECTED: usize = 0;

fn witnesses_path() -> PathBuf {
    support::repo_root().join("data/witnesses.json")
}

/// Values of labels the Job registry generates from the object's uid.
fn blank_controller_uids(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k.ends_with("controller-uid") && x.is_string() {
                    *x = json!("");
                } else {
                    blank_controller_uids(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(blank_controller_uids),
        _ => {}
    }
}

/// The values the API server generates, blanked (only which fields are present matters).
fn blank(o: &mut Value) {
    blank_controller_uids(o);
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in ["uid", "creationTimestamp"] {
            if m.contains_key(f) {
                m.insert(f.into(), json!(""));
            }
        }
        for mf in m
            .get_mut("managedFields")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(t) = mf.get_mut("time") {
                *t = json!("");
            }
        }
    }
    let service = o["kind"] == "Service";
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if service {
        if spec.contains_key("clusterIP") {
            spec.insert("clusterIP".into(), json!(""));
        }
        if spec.contains_key("clusterIPs") {
            spec.insert("clusterIPs".into(), json!([""]));
        }
    }
    let token = |v: &mut Value| {
        if v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("kube-api-access-"))
        {
            v["name"] = json!("kube-api-access-");
        }
    };
    for v in spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        token(v);
    }
    for c in spec
        .get_mut("containers")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for m in c
            .get_mut("volumeMounts")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            token(m);
        }
    }
}

/// The collection URI of `resource` of `api_version`, in `namespace` when given.
fn collection(api_version: &str, resource: &str, namespace: Option<&str>) -> String {
    let base = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    match namespace {
        Some(ns) => format!("{base}/namespaces/{ns}/{resource}"),
        None => format!("{base}/{resource}"),
    }
}

/// One request: `(HTTP code, response body)`.
async fn send(
    client: &Client,
    method: http::Method,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body)?))?;
    let response = client.send(req).await.context("sending a request")?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((code, value))
}

async fn ensure_namespace(
    client: &Client,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    support::apply_yaml(client, &serde_json::to_string(&ns)?).await?;
    // Pods need their service account (no service account controller runs here).
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": name}});
    support::apply_yaml(client, &serde_json::to_string(&sa)?).await?;
    Ok(())
}

async fn witnesses_are_what_the_api_server_admits() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    let ns = "vapcheck-witness";
    ensure_namespace(&client, ns, &BTreeMap::new()).await?;
    let path = witnesses_path();
    let mut entries: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    assert_eq!(entries.len(), 19, "objects in {}", path.display());
    let bless = support::bless();
    let mut differ = Vec::new();
    for e in &mut entries {
        let input = &e["input"];
        let namespaced = e["namespaced"].as_bool().unwrap_or(true);
        let uri = collection(
            input["apiVersion"].as_str().unwrap_or_default(),
            e["resource"].as_str().unwrap_or_default(),
            namespaced.then_some(ns),
        ) + "?dryRun=All";
        let (code, mut got) =
            send(&client, http::Method::POST, &uri, "application/json", input).await?;
        if !(200..300).contains(&code) {
            bail!("the API server refuses witness {input}: HTTP {code}: {got}");
        }
        blank(&mut got);
        if got != e["admitted"] {
            differ.push(format!(
                "{}: recorded {}\n  API server {}",
                input["kind"], e["admitted"], got
            ));
            e["admitted"] = got;
        }
    }
    eprintln!(
        "witnesses: {} objects, {} as recorded",
        entries.len(),
        entries.len() - differ.len()
    );
    if bless && !differ.is_empty() {
        std::fs::write(&path, serde_json::to_string_pretty(&entries)? + "\n")?;
        eprintln!("witnesses: recorded {} again", differ.len());
        return Ok(());
    }
    if !differ.is_empty() {
        bail!(
            "{} witnesses differ from what the API server admits (VAPCHECK_BLESS=1 records them):\n{}",
            differ.len(),
            differ.join("\n")
        );
    }
    Ok(())
}

/// Files ending in `.yaml`, `.yml` or `.json` below `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// A finding with the policy it is in.
struct Case {
    policy: Value,
    finding: Value,
    /// kube-apiserver accepts the policy (vapcheck's `apiServer.accepted`); a rejected policy
    /// cannot be created, so its findings cannot be replayed.
    accepted: bool,
}

/// `vapcheck check -o json` (extended mode, the embedded OpenAPI of the pinned release) on
/// `files`; each runtime finding with its policy document.
fn findings_of(files: &[PathBuf]) -> anyhow::Result<Vec<Case>> {
    findings_of_kind(files, "ValidatingAdmissionPolicy")
}

/// [`findings_of`] for the policies of `kind` (`ValidatingAdmissionPolicy` or
/// `MutatingAdmissionPolicy`).
fn findings_of_kind(files: &[PathBuf], kind: &str) -> anyhow::Result<Vec<Case>> {
    let output = Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "-o", "json"])
        .args(files)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .context("running vapcheck check")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A set whose objects are all of another API group (`admissionregistration.x-k8s.io`).
    let nothing = output.status.code() == Some(2)
        && stderr.contains("no ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ");
    if !matches!(output.status.code(), Some(0 | 1 | 3)) && !nothing {
        bail!("vapcheck check failed ({}): {stderr}", output.status);
    }
    let entries: Vec<Value> = if nothing {
        Vec::new()
    } else {
        serde_json::from_slice(&output.stdout)?
    };
    // The entries of policies are in input order: pair them with the documents.
    let mut policies = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)?;
        let Ok(docs) = support::parse_yaml_documents(&text) else {
            continue;
        };
        for d in docs {
            let items = match d["kind"].as_str() {
                Some(k) if k.ends_with("List") => {
                    d["items"].as_array().cloned().unwrap_or_default()
                }
                _ => vec![d],
            };
            policies.extend(items.into_iter().filter(|i| {
                i["kind"] == kind
                    && i["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"))
            }));
        }
    }
    let vap_entries: Vec<&Value> = entries.iter().filter(|e| e["kind"] == kind).collect();
    if vap_entries.len() != policies.len() {
        bail!(
            "{} policy entries for {} policy documents",
            vap_entries.len(),
            policies.len()
        );
    }
    let mut out = Vec::new();
    for (e, p) in vap_entries.into_iter().zip(policies) {
        if e["name"] != p["metadata"]["name"] {
            bail!(
                "entry {} is not document {}",
                e["name"],
                p["metadata"]["name"]
            );
        }
        for f in e["status"]["runtime"].as_array().into_iter().flatten() {
            out.push(Case {
                policy: p.clone(),
                finding: f.clone(),
                accepted: e["apiServer"]["accepted"] == json!(true),
            });
        }
    }
    Ok(out)
}

/// `spec.validations[3].expression` → (`validations`, 3, `expression`).
fn field_parts(field_ref: &str) -> Option<(&str, usize, &str)> {
    let rest = field_ref.strip_prefix("spec.")?;
    let (list, rest) = rest.split_once('[')?;
    let (i, field) = rest.split_once("].")?;
    Some((list, i.parse().ok()?, field))
}

/// The kind's resource and whether it is namespaced, from the witness table.
fn resource_of(api_version: &str, kind: &str) -> Option<(String, bool)> {
    let entries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(witnesses_path()).ok()?).ok()?;
    entries
        .iter()
        .find(|e| e["input"]["apiVersion"] == api_version && e["input"]["kind"] == kind)
        .map(|e| {
            (
                e["resource"].as_str().unwrap_or_default().to_owned(),
                e["namespaced"].as_bool().unwrap_or(true),
            )
        })
}

/// The replay policy of case `i`: the policy's matchConditions and variables, only the
/// validation of the finding (or `true` when the finding is in a matchCondition), the given
/// failure policy, and `fixed` in place of the finding's expression when given.
fn replay_policy(name: &str, c: &Case, failure: &str, fixed: Option<&str>) -> Value {
    let mut p = c.policy.clone();
    let field_ref = c.finding["fieldRef"].as_str().unwrap_or_default();
    let spec = &mut p["spec"];
    spec["failurePolicy"] = json!(failure);
    if let Some((list, i, field)) = field_parts(field_ref)
        && let Some(fixed) = fixed
    {
        spec[list][i][field] = json!(fixed);
    }
    // Only the validation the finding is reached from: the finding's own, or, for a
    // variable, every validation (a variable is evaluated where it is used).
    match field_parts(field_ref) {
        Some(("validations", i, _)) => {
            let v = spec["validations"][i].clone();
            spec["validations"] = json!([v]);
        }
        Some(("matchConditions", _, _)) => {
            spec["validations"] = json!([{"expression": "true"}]);
        }
        _ => {}
    }
    // An auditAnnotation finding keeps that auditAnnotation alone (and no validation: the
    // annotation is evaluated whatever they decide); a variable finding all of them (a
    // variable is evaluated where it is used); any other finding none of them.
    match field_parts(field_ref) {
        Some(("variables", _, _)) => {}
        Some(("auditAnnotations", i, _)) => {
            let a = spec["auditAnnotations"][i].clone();
            spec["auditAnnotations"] = json!([a]);
            if let Some(s) = spec.as_object_mut() {
                s.remove("validations");
            }
        }
        _ => {
            if let Some(s) = spec.as_object_mut() {
                s.remove("auditAnnotations");
            }
        }
    }
    // A messageExpression finding keeps its validation's message and messageExpression.
    let message_finding = field_ref.ends_with(".messageExpression");
    for v in spec["validations"].as_array_mut().into_iter().flatten() {
        if let Some(v) = v.as_object_mut()
            && !message_finding
        {
            v.remove("messageExpression");
        }
    }
    p["metadata"] = json!({"name": name});
    // The corpus also has v1beta1 and v1alpha1 policies; the cluster serves v1, whose
    // schema holds theirs.
    p["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    p
}

fn binding(name: &str, namespace: &str, cluster_scoped_witness: Option<&str>) -> Value {
    let match_resources = match cluster_scoped_witness {
        Some(w) => json!({"objectSelector": {"matchLabels": {"kubernetes.io/metadata.name": w}}}),
        None => {
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}})
        }
    };
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": match_resources}})
}

/// Labels that satisfy a label selector (matchLabels, `In`, `Exists`).
fn labels_for(selector: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        out.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
    }
    for r in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = r["key"].as_str().unwrap_or_default().to_owned();
        match r["operator"].as_str() {
            Some("In") => {
                out.insert(key, r["values"][0].as_str().unwrap_or_default().to_owned());
            }
            Some("Exists") => {
                out.insert(key, "true".into());
            }
            _ => {}
        }
    }
    out
}

/// Where a case's witness lives.
struct Target {
    namespace: String,
    /// The witness's collection URI and its name.
    collection: String,
    name: String,
    cluster_scoped: bool,
    operation: String,
    object: Value,
    /// The resource as kube-apiserver's Forbidden errors name it (`pods`,
    /// `deployments.apps`).
    qualified_resource: String,
    /// For a finding on `params` with a param object: the name it is created with in
    /// `namespace` (the replay binding's `paramRef`).
    param: Option<String>,
}

async fn prepare(client: &Client, i: usize, c: &Case) -> anyhow::Result<Target> {
    let namespace = format!("rs-{i}");
    let mut ns_labels = labels_for(&c.policy["spec"]["matchConstraints"]["namespaceSelector"]);
    ns_labels.insert("vapcheck-runtime-safety".into(), "true".into());
    ensure_namespace(client, &namespace, &ns_labels).await?;
    let mut object = c.finding["witness"]["object"].clone();
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let Some((resource, namespaced)) = resource_of(&api_version, &kind) else {
        bail!("no resource for {api_version} {kind}");
    };
    let name = if namespaced {
        object["metadata"]["namespace"] = json!(namespace);
        "vapcheck-witness".to_owned()
    } else {
        format!("rs-{i}-witness")
    };
    object["metadata"]["name"] = json!(name);
    let collection = collection(&api_version, &resource, namespaced.then_some(&namespace));
    let operation = c.finding["witness"]["operation"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if operation != "CREATE" {
        // UPDATE and DELETE requests need the object to exist (created before any replay
        // policy exists).
        let (code, body) = send(
            client,
            http::Method::POST,
            &collection,
            "application/json",
            &object,
        )
        .await?;
        if !(200..300).contains(&code) && code != 409 {
            bail!("creating the witness of case {i}: HTTP {code}: {body}");
        }
    }
    let qualified_resource = match api_version.split_once('/') {
        Some((group, _)) => format!("{resource}.{group}"),
        None => resource.clone(),
    };
    // A finding on a param object: that object, created in the case's namespace before any
    // replay policy exists (the replay binding's paramRef names it).
    let param = match c.finding["witness"].get("params") {
        Some(p) => {
            let mut p = p.clone();
            let (pv, pk) = (
                p["apiVersion"].as_str().unwrap_or_default().to_owned(),
                p["kind"].as_str().unwrap_or_default().to_owned(),
            );
            let Some((presource, true)) = resource_of(&pv, &pk) else {
                bail!("no namespaced resource for the param object {pv} {pk}");
            };
            let pname = format!("rs-{i}-params");
            p["metadata"] = json!({"name": pname, "namespace": namespace});
            let uri = self::collection(&pv, &presource, Some(&namespace));
            let (code, body) =
                send(client, http::Method::POST, &uri, "application/json", &p).await?;
            if !(200..300).contains(&code) && code != 409 {
                bail!("creating the param object of case {i}: HTTP {code}: {body}");
            }
            Some(pname)
        }
        None => None,
    };
    Ok(Target {
        param,
        namespace,
        collection,
        name,
        cluster_scoped: !namespaced,
        operation,
        object,
        qualified_resource,
    })
}

/// The witness request: `None` when admitted, the API server's message when refused.
async fn request(client: &Client, t: &Target) -> anyhow::Result<Option<String>> {
    let item = format!("{}/{}?dryRun=All", t.collection, t.name);
    let (code, body) = match t.operation.as_str() {
        "CREATE" => {
            let uri = format!("{}?dryRun=All", t.collection);
            send(
                client,
                http::Method::POST,
                &uri,
                "application/json",
                &t.object,
            )
            .await?
        }
        // A merge patch that changes nothing: the request is still admitted (validating
        // admission runs before the store sees there is nothing to write).
        "UPDATE" => {
            send(
                client,
                http::Method::PATCH,
                &item,
                "application/merge-patch+json",
                &json!({}),
            )
            .await?
        }
        // With a body, the API server reads the options from it, not from the query.
        "DELETE" => {
            let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]});
            send(
                client,
                http::Method::DELETE,
                &item,
                "application/json",
                &options,
            )
            .await?
        }
        other => bail!("unknown operation {other}"),
    };
    Ok(if (200..300).contains(&code) {
        None
    } else {
        Some(format!(
            "HTTP {code}: {}",
            body["message"].as_str().unwrap_or_default()
        ))
    })
}

/// Applies `objects` and a sentinel that denies Pods in `rs-sentinel` with `round` in its
/// message; waits until the sentinel denies (the plugin has loaded the set).
async fn load_round(client: &Client, objects: &[Value], round: &str) -> anyhow::Result<()> {
    for o in objects {
        support::apply_yaml(client, &serde_json::to_string(o)?).await?;
    }
    let sentinel = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "rs-sentinel"},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "false", "message": format!("rs sentinel {round}")}]}});
    support::apply_yaml(client, &serde_json::to_string(&sentinel)?).await?;
    support::apply_yaml(
        client,
        &serde_json::to_string(&binding("rs-sentinel", "rs-sentinel", None))?,
    )
    .await?;
    let probe = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}});
    let uri = "/api/v1/namespaces/rs-sentinel/configmaps?dryRun=All";
    support::wait_for(
        "the admission plugin to load the replay policies",
        Duration::from_secs(90),
        || async {
            Ok(support::dry_run_create(client, uri, &probe)
                .await?
                .filter(|m| m.contains(&format!("rs sentinel {round}")))
                .map(|_| ()))
        },
    )
    .await?;
    // The sentinel is applied last; give the plugin's informer a moment beyond it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// The expression whose evaluation error kube-apiserver reports for case `c`: the finding's
/// own, or for a variable (evaluated where it is used) the first replayed expression that uses
/// it, in the order the plugin evaluates them (matchConditions, validations, auditAnnotations;
/// k8s.io/apiserver v0.37.1 pkg/admission/plugin/policy/validating/validator.go, `Validate`).
fn erroring_expression(c: &Case, replayed: &Value, field_ref: &str) -> Option<String> {
    let (list, i, field) = field_parts(field_ref)?;
    if list != "variables" {
        // The finding's own expression, as written in the policy (the replay keeps only it,
        // so its index there may differ).
        let mut at = &c.policy["spec"][list][i];
        for f in field.split('.') {
            at = &at[f];
        }
        return at.as_str().map(str::to_owned);
    }
    let spec = &replayed["spec"];
    let name = spec["variables"][i]["name"].as_str()?;
    let uses = format!("variables.{name}");
    [
        ("matchConditions", "expression"),
        ("validations", "expression"),
        ("auditAnnotations", "valueExpression"),
        ("mutations", "applyConfiguration"),
        ("mutations", "jsonPatch"),
    ]
    .iter()
    .flat_map(|(list, field)| {
        spec[*list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(move |e| match *list {
                "mutations" => e[*field]["expression"].as_str(),
                _ => e[*field].as_str(),
            })
    })
    .find(|e| e.contains(&uses))
    .map(str::to_owned)
}

/// The evaluation error of case `c` as kube-apiserver reports it: a variable's error is
/// wrapped as `composited variable "<name>" fails to evaluate: <error>` (k8s.io/apiserver
/// v0.37.1 pkg/admission/plugin/cel/composition.go, `lazyVariableEval.Value`).
fn reported_error(c: &Case) -> Option<String> {
    let f = &c.finding;
    let error = f["error"].as_str()?;
    match field_parts(f["fieldRef"].as_str()?)? {
        ("variables", i, _) => {
            let name = c.policy["spec"]["variables"][i]["name"].as_str()?;
            Some(format!(
                "composited variable \"{name}\" fails to evaluate: {error}"
            ))
        }
        _ => Some(error.to_owned()),
    }
}

/// The whole message kube-apiserver 1.37.1 denies the witness request of case `c` with, with
/// failurePolicy Fail (as [`request`] renders it): k8s.io/apiserver v0.37.1
/// pkg/admission/plugin/policy/validating/dispatcher.go (`Dispatch`: `ValidatingAdmissionPolicy
/// '<p>' with binding '<b>' denied request: <decision message>`, reason `Invalid` (HTTP 422)
/// when the decision has none, inside `admission.NewForbidden`'s `<resource> "<name>" is
/// forbidden: `); the decision message of an evaluation error is pkg/admission/plugin/cel
/// activation.go's `expression '<e>' resulted in error: <error>`, of an erroring
/// messageExpression the fallback message.
fn expected_denial(name: &str, c: &Case, t: &Target) -> Option<String> {
    let f = &c.finding;
    let field_ref = f["fieldRef"].as_str()?;
    let message = match f["fallbackMessage"].as_str() {
        Some(fallback) => fallback.to_owned(),
        None => {
            let replayed = replay_policy(name, c, "Fail", None);
            format!(
                "expression '{}' resulted in error: {}",
                erroring_expression(c, &replayed, field_ref)?,
                reported_error(c)?
            )
        }
    };
    Some(format!(
        "HTTP 422: {} \"{}\" is forbidden: ValidatingAdmissionPolicy '{name}' with binding \
         '{name}' denied request: {message}",
        t.qualified_resource, t.name
    ))
}

/// The whole message kube-apiserver 1.37.1 denies the witness request of MutatingAdmissionPolicy
/// case `c` with, with failurePolicy Fail: k8s.io/apiserver v0.37.1
/// pkg/admission/plugin/policy/generic/policy_dispatcher.go (`Dispatch`: the first
/// `PolicyError`'s text, `policy '<p>' with binding '<b>' denied request: <error>`, as the whole
/// message of a Forbidden error, HTTP 403).
fn expected_map_denial(name: &str, c: &Case) -> Option<String> {
    let f = &c.finding;
    let field_ref = f["fieldRef"].as_str()?;
    let replayed = replay_map_policy(name, c, "Fail", None);
    Some(format!(
        "HTTP 403: policy '{name}' with binding '{name}' denied request: expression '{}' \
         resulted in error: {}",
        erroring_expression(c, &replayed, field_ref)?,
        reported_error(c)?
    ))
}

/// Replays every case; returns the failures.
async fn replay(
    client: &Client,
    label: &str,
    cases: &[Case],
    offset: usize,
) -> anyhow::Result<Vec<String>> {
    let mut targets = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        targets.push(prepare(client, offset + i, c).await?);
    }
    let mut results: Vec<[Option<String>; 3]> = vec![Default::default(); cases.len()];
    for (round, (failure, fixed)) in [("Fail", false), ("Ignore", false), ("Fail", true)]
        .iter()
        .enumerate()
    {
        let mut objects = Vec::new();
        for (i, (c, t)) in cases.iter().zip(&targets).enumerate() {
            let name = format!("rs-{}", offset + i);
            let fix = if *fixed {
                c.finding["fixedExpression"].as_str()
            } else {
                None
            };
            objects.push(replay_policy(&name, c, failure, fix));
            let witness = t.cluster_scoped.then_some(t.name.as_str());
            let mut b = binding(&name, &t.namespace, witness);
            // A finding on `params` names the binding it holds for: without paramRef (params
            // null), or with one to the param object created for the case.
            if let Some(param) = &t.param {
                b["spec"]["paramRef"] = json!({"name": param, "namespace": t.namespace,
                    "parameterNotFoundAction": "Deny"});
            }
            objects.push(b);
        }
        load_round(client, &objects, &format!("{label}-{round}")).await?;
        for (i, t) in targets.iter().enumerate() {
            results[i][round] = request(client, t).await?;
        }
    }
    let mut failures = Vec::new();
    for (i, (c, [fail, ignore, fixed])) in cases.iter().zip(results).enumerate() {
        let f = &c.finding;
        let error = f["error"].as_str().unwrap_or_default();
        let name = format!("rs-{}", offset + i);
        let expected = expected_denial(&name, c, &targets[i]);
        let denied_for_it = expected.is_some() && fail == expected;
        // With the fix: admitted, or denied by the validation itself (not an error).
        let fix_ok = match f["fixedExpression"].as_str() {
            Some(_) => fixed.as_deref().is_none_or(|m| {
                m.contains(&format!("ValidatingAdmissionPolicy '{name}'"))
                    && !m.contains("resulted in error")
                    && !m.contains(error)
            }),
            None => true,
        };
        // A messageExpression that errors does not decide: the validation denies with the
        // fallback message whatever the failure policy, and with the fix with its own.
        let ok = match f["fallbackMessage"].as_str() {
            Some(fallback) => {
                let fixed_own = fixed.as_deref().is_some_and(|m| {
                    m.contains(&format!("ValidatingAdmissionPolicy '{name}'"))
                        && !m.contains(fallback)
                });
                denied_for_it && ignore == expected && fixed_own
            }
            None => denied_for_it && ignore.is_none() && fix_ok,
        };
        if !denied_for_it {
            eprintln!("runtime-safety {label}: expected with Fail: {expected:?}");
        }
        eprintln!(
            "runtime-safety {label}: {} {} {} `{}` {} -> Fail: {fail:?}; Ignore: {ignore:?}; fixed: {fixed:?}",
            if ok { "ok" } else { "FAILED" },
            c.policy["metadata"]["name"].as_str().unwrap_or_default(),
            f["fieldRef"].as_str().unwrap_or_default(),
            f["access"].as_str().unwrap_or_default(),
            f["witness"]["operation"].as_str().unwrap_or_default(),
        );
        if !ok {
            failures.push(format!(
                "{label}: {} {}: {} (Fail: {fail:?}; Ignore: {ignore:?}; fixed: {fixed:?})",
                c.policy["metadata"]["name"], f["fieldRef"], f["access"]
            ));
        }
    }
    Ok(failures)
}

/// The replay MutatingAdmissionPolicy of case `c`: the policy's matchConditions and
/// variables, only the mutation of the finding (all of them for a matchCondition), the given
/// failure policy, and `fixed` in place of the finding's expression when given.
fn replay_map_policy(name: &str, c: &Case, failure: &str, fixed: Option<&str>) -> Value {
    let mut p = c.policy.clone();
    let field_ref = c.finding["fieldRef"].as_str().unwrap_or_default();
    let spec = &mut p["spec"];
    spec["failurePolicy"] = json!(failure);
    // `spec.mutations[0].applyConfiguration.expression`, `spec.matchConditions[0].expression`.
    let parts = field_parts(field_ref);
    if let (Some((list, i, field)), Some(fixed)) = (parts, fixed) {
        let mut at = &mut spec[list][i];
        for f in field.split('.') {
            at = &mut at[f];
        }
        *at = json!(fixed);
    }
    if let Some(("mutations", i, _)) = parts {
        let m = spec["mutations"][i].clone();
        spec["mutations"] = json!([m]);
    }
    p["metadata"] = json!({"name": name});
    p["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    p
}

fn map_binding(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "matchResources": {"namespaceSelector": {"matchLabels":
            {"kubernetes.io/metadata.name": namespace}}}}})
}

/// Applies `objects` and a sentinel MutatingAdmissionPolicy whose mutation errors on
/// ConfigMaps in `rs-map-sentinel` with `round` in the error; waits until it denies (the
/// mutating plugin has loaded the set).
async fn load_map_round(client: &Client, objects: &[Value], round: &str) -> anyhow::Result<()> {
    for o in objects {
        support::apply_yaml(client, &serde_json::to_string(o)?).await?;
    }
    let key = format!("rs-map-sentinel-{round}");
    let sentinel = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy", "metadata": {"name": "rs-map-sentinel"},
        "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                format!("Object{{metadata: Object.metadata{{annotations: {{'x': object.metadata.labels['{key}']}}}}}}")}}]}});
    support::apply_yaml(client, &serde_json::to_string(&sentinel)?).await?;
    support::apply_yaml(
        client,
        &serde_json::to_string(&map_binding("rs-map-sentinel", "rs-map-sentinel"))?,
    )
    .await?;
    let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "labels": {"probe": "true"}}});
    let uri = "/api/v1/namespaces/rs-map-sentinel/configmaps?dryRun=All";
    support::wait_for(
        "the mutating admission plugin to load the replay policies",
        Duration::from_secs(90),
        || async {
            Ok(support::dry_run_create(client, uri, &probe)
                .await?
                .filter(|m| m.contains(&format!("no such key: {key}")))
                .map(|_| ()))
        },
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// Replays every MutatingAdmissionPolicy case; returns the failures.
async fn replay_maps(
    client: &Client,
    label: &str,
    cases: &[Case],
    offset: usize,
) -> anyhow::Result<Vec<String>> {
    let mut targets = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        targets.push(prepare(client, offset + i, c).await?);
    }
    let mut results: Vec<[Option<String>; 3]> = vec![Default::default(); cases.len()];
    for (round, (failure, fixed)) in [("Fail", false), ("Ignore", false), ("Fail", true)]
        .iter()
        .enumerate()
    {
        let mut objects = Vec::new();
        for (i, (c, t)) in cases.iter().zip(&targets).enumerate() {
            let name = format!("rs-{}", offset + i);
            let fix = if *fixed {
                c.finding["fixedExpression"].as_str()
            } else {
                None
            };
            objects.push(replay_map_policy(&name, c, failure, fix));
            objects.push(map_binding(&name, &t.namespace));
        }
        load_map_round(client, &objects, &format!("{label}-{round}")).await?;
        for (i, t) in targets.iter().enumerate() {
            results[i][round] = request(client, t).await?;
        }
    }
    let mut failures = Vec::new();
    for (i, (c, [fail, ignore, fixed])) in cases.iter().zip(results).enumerate() {
        let f = &c.finding;
        let name = format!("rs-{}", offset + i);
        // mutating/dispatcher.go: the policy error, `policy '<p>' with binding '<b>' denied
        // request: <the evaluation error>`.
        let expected = expected_map_denial(&name, c);
        let denied_for_it = expected.is_some() && fail == expected;
        if !denied_for_it {
            eprintln!("runtime-safety {label}: expected with Fail: {expected:?}");
        }
        let fix_ok = f["fixedExpression"].as_str().is_none() || fixed.is_none();
        let ok = denied_for_it && ignore.is_none() && fix_ok;
        eprintln!(
            "runtime-safety {label}: {} {} {} `{}` {} -> Fail: {fail:?}; Ignore: {ignore:?}; fixed: {fixed:?}",
            if ok { "ok" } else { "FAILED" },
            c.policy["metadata"]["name"].as_str().unwrap_or_default(),
            f["fieldRef"].as_str().unwrap_or_default(),
            f["access"].as_str().unwrap_or_default(),
            f["witness"]["operation"].as_str().unwrap_or_default(),
        );
        if !ok {
            failures.push(format!(
                "{label}: {} {}: {} (Fail: {fail:?}; Ignore: {ignore:?}; fixed: {fixed:?})",
                c.policy["metadata"]["name"], f["fieldRef"], f["access"]
            ));
        }
    }
    Ok(failures)
}

/// MutatingAdmissionPolicies: every finding on the MAP cases and on the mutating corpus is
/// replayed (a MutatingAdmissionPolicy and its binding per finding).
async fn map_findings_reproduce_on_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    ensure_namespace(&client, "rs-map-sentinel", &BTreeMap::new()).await?;
    let kind = "MutatingAdmissionPolicy";
    let cases = findings_of_kind(
        &[support::repo_root().join("e2e/fixtures/runtime-safety-map-cases.yaml")],
        kind,
    )?;
    let corpus = findings_of_kind(&files(&support::shared_dir().join("corpus/mutating")), kind)?;
    eprintln!(
        "runtime-safety: {} MutatingAdmissionPolicy findings on the cases, {} on the mutating corpus",
        cases.len(),
        corpus.len()
    );
    let rejected = cases.iter().chain(&corpus).filter(|c| !c.accepted).count();
    for c in cases.iter().chain(&corpus).filter(|c| !c.accepted) {
        eprintln!(
            "runtime-safety: not replayed (kube-apiserver rejects the policy): {} {} `{}`",
            c.policy["metadata"]["name"].as_str().unwrap_or_default(),
            c.finding["fieldRef"].as_str().unwrap_or_default(),
            c.finding["access"].as_str().unwrap_or_default(),
        );
    }
    let (n_cases, n_corpus) = (cases.len(), corpus.len());
    assert!(
        !cases
            .iter()
            .any(|c| c.policy["metadata"]["name"] == "rs-map-guarded"),
        "a finding on a guarded form"
    );
    let accepted = |v: Vec<Case>| -> Vec<Case> { v.into_iter().filter(|c| c.accepted).collect() };
    let (cases, corpus) = (accepted(cases), accepted(corpus));
    let mut failures = Vec::new();
    failures.extend(replay_maps(&client, "map-cases", &cases, 300).await?);
    failures.extend(replay_maps(&client, "map-corpus", &corpus, 400).await?);
    let total = cases.len() + corpus.len();
    eprintln!(
        "runtime-safety: {total} MutatingAdmissionPolicy findings replayed, {} reproduced with their witness, admitted with Ignore and fixed",
        total - failures.len()
    );
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    assert_eq!(n_cases, EXPECTED_MAP_CASES, "findings on the MAP cases");
    assert_eq!(
        n_corpus, EXPECTED_MAP_CORPUS,
        "findings on the mutating corpus"
    );
    assert_eq!(
        rejected, EXPECTED_MAP_REJECTED,
        "MAP findings on rejected policies"
    );
    Ok(())
}

async fn findings_reproduce_on_the_api_server() -> anyhow::Result<()> {
    let cluster = support::shared_cluster()?;
    let client = cluster.client().await?;
    ensure_namespace(&client, "rs-sentinel", &BTreeMap::new()).await?;
    let shared = support::shared_dir();
    let cases =
        findings_of(&[support::repo_root().join("e2e/fixtures/runtime-safety-cases.yaml")])?;
    let params_cases =
        findings_of(&[support::repo_root().join("e2e/fixtures/runtime-safety-params.yaml")])?;
    let policies = findings_of(&files(&shared.join("corpus/policies")))?;
    let mut bindings = Vec::new();
    let mut sets: Vec<PathBuf> = std::fs::read_dir(shared.join("corpus/bindings"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for repo in sets {
        let mut set_dirs: Vec<PathBuf> = std::fs::read_dir(&repo)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        set_dirs.sort();
        for set in set_dirs {
            // Sets without a validating policy (MAP sets, params only) have nothing to check.
            let fs = files(&set);
            let has_vap = fs.iter().any(|f| {
                std::fs::read_to_string(f)
                    .is_ok_and(|t| t.contains("kind: ValidatingAdmissionPolicy\n"))
            });
            if has_vap {
                bindings.extend(findings_of(&fs)?);
            }
        }
    }
    eprintln!(
        "runtime-safety: {} findings on the cases, {} on the params cases, {} on the policy corpus, {} on the binding sets",
        cases.len(),
        params_cases.len(),
        policies.len(),
        bindings.len(),
    );
    let rejected: Vec<&Case> = cases
        .iter()
        .chain(&params_cases)
        .chain(&policies)
        .chain(&bindings)
        .filter(|c| !c.accepted)
        .collect();
    for c in &rejected {
        eprintln!(
            "runtime-safety: not replayed (kube-apiserver rejects the policy): {} {} `{}`",
            c.policy["metadata"]["name"].as_str().unwrap_or_default(),
            c.finding["fieldRef"].as_str().unwrap_or_default(),
            c.finding["access"].as_str().unwrap_or_default(),
        );
    }
    let n_rejected = rejected.len();
    let accepted = |v: Vec<Case>| -> Vec<Case> { v.into_iter().filter(|c| c.accepted).collect() };
    let (n_cases, n_policies, n_bindings) = (cases.len(), policies.len(), bindings.len());
    let n_params_cases = params_cases.len();
    let (cases, policies, bindings) = (accepted(cases), accepted(policies), accepted(bindings));
    let params_cases = accepted(params_cases);
    let mut failures = Vec::new();
    failures.extend(replay(&client, "cases", &cases, 0).await?);
    failures.extend(replay(&client, "params-cases", &params_cases, 500).await?);
    failures.extend(replay(&client, "policies", &policies, 100).await?);
    failures.extend(replay(&client, "bindings", &bindings, 200).await?);
    let total = cases.len() + params_cases.len() + policies.len() + bindings.len();
    eprintln!(
        "runtime-safety: {total} findings replayed, {} reproduced with their witness, admitted with Ignore and fixed",
        total - failures.len()
    );
    // The guarded forms get no finding.
    assert!(
        !cases
            .iter()
            .chain(&params_cases)
            .any(|c| c.policy["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("rs-guarded"))),
        "a finding on a guarded form"
    );
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    assert_eq!(n_cases, EXPECTED_CASES, "findings on the cases");
    assert_eq!(
        n_params_cases, EXPECTED_PARAMS_CASES,
        "findings on the params cases"
    );
    // Each finding on params names its binding, and each class is there.
    for class in ["nullParams", "absentParamField"] {
        assert!(
            params_cases
                .iter()
                .any(|c| c.finding["class"] == class && c.finding["binding"].is_string()),
            "no {class} finding with its binding on the params cases"
        );
    }
    assert_eq!(
        n_policies, EXPECTED_POLICIES,
        "findings on the policy corpus"
    );
    assert_eq!(
        n_bindings, EXPECTED_BINDINGS,
        "findings on the binding sets"
    );
    assert_eq!(
        n_rejected, EXPECTED_REJECTED,
        "findings on rejected policies"
    );
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio_multi_thread witnesses_are_what_the_api_server_admits,
    tokio_multi_thread map_findings_reproduce_on_the_api_server,
    tokio_multi_thread findings_reproduce_on_the_api_server,
}
