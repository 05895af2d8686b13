//! Checks of the deployment files: `manifests/` (kustomize), the ConfigMap copy of the default
//! configuration, RBAC scope, the Deployment's hardening, alert expressions against the real
//! metric names, and the Dockerfile.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(yaml_files(&p));
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
    out
}

fn parse_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("{path:?} is not valid YAML: {e}"))
}

/// Every object in `manifests/` (kustomization files and generator inputs excluded).
fn objects() -> Vec<(PathBuf, Value)> {
    yaml_files(&root().join("manifests"))
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| n != "kustomization.yaml")
                && !p.starts_with(root().join("manifests/files"))
        })
        .flat_map(|p| parse_docs(&p).into_iter().map(move |d| (p.clone(), d)))
        .collect()
}

fn object(kind: &str, name: &str) -> Value {
    objects()
        .into_iter()
        .map(|(_, o)| o)
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in manifests/"))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_manifest_parses_and_names_an_object() {
    let objs = objects();
    assert!(objs.len() >= 12, "found {} objects", objs.len());
    for (path, o) in objs {
        assert!(o["apiVersion"].is_string(), "{path:?}: apiVersion");
        assert!(o["kind"].is_string(), "{path:?}: kind");
        assert!(o["metadata"]["name"].is_string(), "{path:?}: metadata.name");
    }
}

#[test]
fn each_kustomization_lists_every_file_of_its_directory() {
    let kustomizations: Vec<PathBuf> = yaml_files(&root().join("manifests"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "kustomization.yaml"))
        .collect();
    assert_eq!(kustomizations.len(), 2, "{kustomizations:?}");
    for k in kustomizations {
        let dir = k.parent().unwrap_or_else(|| panic!("no parent"));
        let doc = parse_docs(&k).remove(0);
        let mut listed: BTreeSet<String> = strs(&doc["resources"]).into_iter().collect();
        for generator in doc["configMapGenerator"].as_array().into_iter().flatten() {
            for file in strs(&generator["files"]) {
                let source = file.split_once('=').map(|(_, s)| s).unwrap_or(&file);
                listed.insert(source.to_owned());
            }
        }
        for entry in &listed {
            assert!(dir.join(entry).exists(), "{k:?} lists missing {entry}");
        }
        let present: BTreeSet<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml"))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n != "kustomization.yaml")
            .collect();
        for file in present {
            assert!(listed.contains(&file), "{k:?} does not list {file}");
        }
        // Files in subdirectories other than other kustomizations must be listed by path.
        let files_dir = dir.join("files");
        if files_dir.is_dir() {
            for f in yaml_files(&files_dir) {
                let rel = f
                    .strip_prefix(dir)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default();
                assert!(listed.contains(&rel), "{k:?} does not use {rel}");
            }
        }
    }
}

#[test]
fn configmap_copy_equals_the_documented_default_config() {
    assert_eq!(
        read("manifests/files/vapcheck.yaml"),
        read("config/vapcheck.yaml"),
        "manifests/files/vapcheck.yaml must be a copy of config/vapcheck.yaml: cp config/vapcheck.yaml manifests/files/"
    );
}

#[test]
fn cluster_role_is_least_privilege() {
    let role = object("ClusterRole", "vapcheck");
    let rules = role["rules"].as_array().cloned().unwrap_or_default();
    let mut grants = BTreeSet::new();
    for rule in &rules {
        let verbs = strs(&rule["verbs"]);
        assert!(!verbs.contains(&"*".to_owned()), "wildcard verb in {rule}");
        for url in strs(&rule["nonResourceURLs"]) {
            for v in &verbs {
                grants.insert(format!("url {url} {v}"));
            }
        }
        for group in strs(&rule["apiGroups"]) {
            assert_ne!(group, "*", "wildcard group in {rule}");
            for res in strs(&rule["resources"]) {
                assert_ne!(res, "*", "wildcard resource in {rule}");
                for v in &verbs {
                    grants.insert(format!("{group} {res} {v}"));
                }
            }
        }
    }
    let adm = "admissionregistration.k8s.io";
    let vap = format!("{adm} validatingadmissionpolicies");
    // Exactly these: each one is needed by a named check of e2e/tests/rbac.rs (docs/rbac.md).
    // No `get` (nothing is read by name), no discovery URLs (system:discovery grants them),
    // no TokenReview/SubjectAccessReview with the default configuration (metrics.secure off).
    let expected: BTreeSet<String> = [
        format!("{vap} list"),
        format!("{vap} watch"),
        format!("{vap}/status patch"),
        format!("{adm} mutatingadmissionpolicies list"),
        format!("{adm} mutatingadmissionpolicies watch"),
        format!("{adm} validatingadmissionpolicybindings list"),
        format!("{adm} validatingadmissionpolicybindings watch"),
        format!("{adm} mutatingadmissionpolicybindings list"),
        format!("{adm} mutatingadmissionpolicybindings watch"),
        // The policy engines' CEL objects, read only (docs/reports.md, "Engine policies").
        "policies.kyverno.io validatingpolicies list".to_owned(),
        "policies.kyverno.io validatingpolicies watch".to_owned(),
        "policies.kyverno.io namespacedvalidatingpolicies list".to_owned(),
        "policies.kyverno.io namespacedvalidatingpolicies watch".to_owned(),
        "templates.gatekeeper.sh constrainttemplates list".to_owned(),
        "templates.gatekeeper.sh constrainttemplates watch".to_owned(),
        "events.k8s.io events create".to_owned(),
        "events.k8s.io events patch".to_owned(),
        // Admission webhooks (docs/webhooks.md, "In the cluster"): read only.
        format!("{adm} validatingwebhookconfigurations list"),
        format!("{adm} validatingwebhookconfigurations watch"),
        format!("{adm} mutatingwebhookconfigurations list"),
        format!("{adm} mutatingwebhookconfigurations watch"),
        " services list".to_owned(),
        " services watch".to_owned(),
        "discovery.k8s.io endpointslices list".to_owned(),
        "discovery.k8s.io endpointslices watch".to_owned(),
        // Policy reports (reports.enabled, on by default; docs/reports.md).
        "openreports.io clusterreports create".to_owned(),
        "openreports.io clusterreports patch".to_owned(),
        "openreports.io clusterreports delete".to_owned(),
        "wgpolicyk8s.io clusterpolicyreports create".to_owned(),
        "wgpolicyk8s.io clusterpolicyreports patch".to_owned(),
        "wgpolicyk8s.io clusterpolicyreports delete".to_owned(),
        // The namespaced reports of NamespacedValidatingPolicies, in their namespaces.
        "openreports.io reports create".to_owned(),
        "openreports.io reports patch".to_owned(),
        "openreports.io reports delete".to_owned(),
        "wgpolicyk8s.io policyreports create".to_owned(),
        "wgpolicyk8s.io policyreports patch".to_owned(),
        "wgpolicyk8s.io policyreports delete".to_owned(),
    ]
    .into_iter()
    .collect();
    assert_eq!(grants, expected);
    assert!(
        !grants.iter().any(|g| g.contains("secrets")),
        "no secrets access"
    );
}

/// Whether an RBAC rule list grants `verb` on `group`/`resource` or on the URL `url`.
fn grants(rules: &Value, verb: &str, group: &str, resource: &str, url: &str) -> bool {
    rules.as_array().into_iter().flatten().any(|rule| {
        if !strs(&rule["verbs"]).iter().any(|v| v == verb) {
            return false;
        }
        if !url.is_empty() {
            return strs(&rule["nonResourceURLs"]).iter().any(|u| {
                u == url
                    || u.strip_suffix('*')
                        .is_some_and(|prefix| url.starts_with(prefix))
            });
        }
        strs(&rule["apiGroups"]).iter().any(|g| g == group)
            && strs(&rule["resources"]).iter().any(|r| r == resource)
    })
}

#[test]
fn manifests_grant_every_permission_the_preflight_checks() {
    use vapcheck::health::preflight::{REQUIRED_PERMISSIONS, Scope};
    let cluster = object("ClusterRole", "vapcheck")["rules"].clone();
    let lease = object("Role", "vapcheck-leader-election")["rules"].clone();
    // The bootstrap ClusterRole system:discovery, bound to system:authenticated (kubernetes
    // v1.37.1 plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, `ClusterRoles`,
    // `ClusterRoleBindings`), grants the discovery and OpenAPI URLs to every token.
    let discovery = serde_json::json!([{
        "verbs": ["get"],
        "nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/",
            "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"],
    }]);
    for p in REQUIRED_PERMISSIONS {
        let rules = match p.scope {
            Scope::Cluster if !p.url.is_empty() => &discovery,
            Scope::Cluster => &cluster,
            Scope::LeaseNamespace => &lease,
        };
        // The review rules are rendered only with secure, authorized metrics (off by default;
        // chart_grants_the_reviews_only_to_secure_authorized_metrics).
        assert_eq!(
            grants(rules, p.verb, p.group, p.resource, p.url),
            !p.secure_metrics_only,
            "manifests and {p}"
        );
    }
    // And the matcher can fail.
    assert!(!grants(
        &cluster,
        "update",
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        ""
    ));
    assert!(!grants(&cluster, "get", "", "", "/metrics"));
}

#[test]
fn mutating_policies_are_read_only() {
    // Issue 12: the controller lists and watches MutatingAdmissionPolicies and writes nothing
    // on them (no status; findings are Events and reports).
    let cluster = object("ClusterRole", "vapcheck")["rules"].clone();
    let group = "admissionregistration.k8s.io";
    for verb in ["list", "watch"] {
        assert!(grants(
            &cluster,
            verb,
            group,
            "mutatingadmissionpolicies",
            ""
        ));
    }
    for verb in [
        "get",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ] {
        assert!(!grants(
            &cluster,
            verb,
            group,
            "mutatingadmissionpolicies",
            ""
        ));
        assert!(!grants(
            &cluster,
            verb,
            group,
            "mutatingadmissionpolicies/status",
            ""
        ));
    }
    // Their bindings are listed and watched (what each will do: Events and reports, issue 34),
    // and never written.
    for verb in ["list", "watch"] {
        assert!(grants(
            &cluster,
            verb,
            group,
            "mutatingadmissionpolicybindings",
            ""
        ));
    }
    for verb in [
        "get",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ] {
        assert!(!grants(
            &cluster,
            verb,
            group,
            "mutatingadmissionpolicybindings",
            ""
        ));
    }
}

#[test]
fn lease_access_is_namespaced() {
    let role = object("Role", "vapcheck-leader-election");
    assert_eq!(role["metadata"]["namespace"], "vapcheck-system");
    for rule in role["rules"].as_array().into_iter().flatten() {
        assert_eq!(strs(&rule["apiGroups"]), ["coordination.k8s.io"]);
        assert_eq!(strs(&rule["resources"]), ["leases"]);
    }
    let binding = object("RoleBinding", "vapcheck-leader-election");
    assert_eq!(binding["roleRef"]["name"], "vapcheck-leader-election");
    assert_eq!(binding["subjects"][0]["name"], "vapcheck");
    let cluster_binding = object("ClusterRoleBinding", "vapcheck");
    assert_eq!(cluster_binding["roleRef"]["name"], "vapcheck");
    assert_eq!(
        cluster_binding["subjects"][0]["namespace"],
        "vapcheck-system"
    );
}

#[test]
fn deployment_is_hardened_and_probed() {
    let d = object("Deployment", "vapcheck");
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "vapcheck");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"]);
    for key in ["cpu", "memory"] {
        assert!(c["resources"]["requests"][key].is_string(), "request {key}");
        assert!(c["resources"]["limits"][key].is_string(), "limit {key}");
    }
    let defaults = vapcheck::config::Config::default();
    let health_port = defaults.health_addr().map(|a| a.port()).unwrap_or_default();
    let metrics_port = defaults
        .metrics_addr()
        .map(|a| a.port())
        .unwrap_or_default();
    let port_of = |name: &str| {
        c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
    };
    assert_eq!(port_of("health"), Some(u64::from(health_port)));
    assert_eq!(port_of("metrics"), Some(u64::from(metrics_port)));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "health");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "health");
    let args = strs(&c["args"]);
    assert_eq!(args.first().map(String::as_str), Some("controller"));
    assert!(
        args.iter()
            .any(|a| a == "--config=/etc/vapcheck/vapcheck.yaml")
    );
    let env: Vec<String> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect();
    assert!(env.contains(&"POD_NAMESPACE".to_owned()));
    // Selectors of the Service and the PDB match the pods.
    let pod_labels = &d["spec"]["template"]["metadata"]["labels"];
    for selector in [
        object("Service", "vapcheck-metrics")["spec"]["selector"].clone(),
        object("PodDisruptionBudget", "vapcheck")["spec"]["selector"]["matchLabels"].clone(),
    ] {
        for (k, v) in selector.as_object().into_iter().flatten() {
            assert_eq!(&pod_labels[k], v, "selector {k}");
        }
    }
}

#[test]
fn alerts_use_metrics_that_exist() {
    let families = exposed_families();
    let rule = object("PrometheusRule", "vapcheck");
    let mut alerts = BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            alerts.insert(r["alert"].as_str().unwrap_or("").to_owned());
            let expr = r["expr"].as_str().unwrap_or("");
            let used: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| {
                    w.starts_with("vapcheck_")
                        || w.starts_with("controller_runtime_")
                        || w.starts_with("leader_election_")
                })
                .collect();
            assert!(!used.is_empty(), "alert {} uses no metric", r["alert"]);
            for name in used {
                assert!(families.contains(name), "alert uses unknown metric {name}");
            }
        }
    }
    for needed in [
        "VapcheckReconcileErrors",
        "VapcheckPolicyExpressionWarnings",
        "VapcheckNoLeader",
        "VapcheckPolicyWatchStale",
        "VapcheckSchemaFetchFailures",
    ] {
        assert!(alerts.contains(needed), "missing alert {needed}");
    }
}

/// Whether this runs under CI (`CI=true`, set by `.ci/run`): missing prerequisites fail.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A missing prerequisite: fails under CI, otherwise says that the test skipped.
fn missing(why: &str) {
    if under_ci() {
        panic!("{why} (required under CI)");
    }
    eprintln!("SKIPPED (not under CI): {why}");
}

/// `$VAPCHECK_KUBECTL` (make test sets it, see scripts/kubectl-path), else `kubectl` on PATH.
fn kubectl() -> Result<PathBuf, String> {
    let kubectl = std::env::var_os("VAPCHECK_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("kubectl"));
    match Command::new(&kubectl)
        .args(["version", "--client"])
        .output()
    {
        Ok(o) if o.status.success() => Ok(kubectl),
        Ok(o) => Err(format!(
            "`{} version --client` failed ({}): {}",
            kubectl.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!(
            "cannot run {} ({e}); set VAPCHECK_KUBECTL or run scripts/kubectl-path",
            kubectl.display()
        )),
    }
}

#[test]
fn kubectl_kustomize_builds_the_manifests() {
    let kubectl = match kubectl() {
        Ok(k) => k,
        Err(why) => return missing(&format!("`kubectl kustomize` cannot run: {why}")),
    };
    for dir in ["manifests", "manifests/monitoring"] {
        let out = Command::new(&kubectl)
            .arg("kustomize")
            .arg(root().join(dir))
            .output()
            .unwrap_or_else(|e| panic!("kubectl: {e}"));
        assert!(
            out.status.success(),
            "kubectl kustomize {dir} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let built = String::from_utf8_lossy(&out.stdout).into_owned();
        let docs = serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&built)
            .unwrap_or_else(|e| panic!("kustomize output is not YAML: {e}"));
        assert!(!docs.is_empty());
        if dir == "manifests" {
            // The generated ConfigMap holds the default config and the Deployment mounts it.
            let cm = docs
                .iter()
                .find(|d| d["kind"] == "ConfigMap")
                .unwrap_or_else(|| panic!("no ConfigMap"));
            let name = cm["metadata"]["name"].as_str().unwrap_or("");
            assert!(name.starts_with("vapcheck-config-"), "{name}");
            assert_eq!(cm["data"]["vapcheck.yaml"], read("config/vapcheck.yaml"));
            let deploy = docs
                .iter()
                .find(|d| d["kind"] == "Deployment")
                .unwrap_or_else(|| panic!("no Deployment"));
            assert!(deploy.to_string().contains(name));
            for d in &docs {
                let kind = d["kind"].as_str().unwrap_or("");
                let cluster_scoped =
                    matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding");
                if !cluster_scoped {
                    assert_eq!(d["metadata"]["namespace"], "vapcheck-system", "{kind}");
                }
            }
        }
    }
}

#[test]
fn dockerfile_builds_the_tested_binary_on_a_nonroot_base_and_offers_a_scratch_target() {
    let df = read("Dockerfile");
    assert!(
        df.contains("cargo build --release --locked"),
        "same lock file as tests"
    );
    let ignore = read(".dockerignore");
    assert!(
        df.contains("COPY . .") && !ignore.lines().any(|l| l.trim().starts_with("Cargo")),
        "the build context carries Cargo.toml and Cargo.lock"
    );
    assert!(
        ignore.lines().any(|l| l.trim() == "target/"),
        "no host build output in the image"
    );
    let last_from = df.lines().rfind(|l| l.starts_with("FROM ")).unwrap_or("");
    assert!(last_from.contains("distroless"), "{last_from}");
    assert!(last_from.contains("nonroot"), "{last_from}");
    assert!(
        df.lines()
            .any(|l| l.starts_with("USER ") && !l.contains("root:")),
        "non-root USER"
    );
    // Both runtime stages (scratch, distroless) run as 65532 with an exec-form entry point.
    let users: Vec<&str> = df.lines().filter(|l| l.starts_with("USER ")).collect();
    assert_eq!(users, ["USER 65532:65532", "USER 65532:65532"]);
    let entries: Vec<&str> = df.lines().filter(|l| l.starts_with("ENTRYPOINT")).collect();
    assert_eq!(
        entries, [r#"ENTRYPOINT ["/usr/local/bin/vapcheck"]"#; 2],
        "exec form, no shell"
    );
    // The target that pulls nothing (scripts/build-image builds it, e2e/tests/image.rs runs it).
    let froms: Vec<&str> = df.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(froms.contains(&"FROM scratch AS scratch"), "{froms:?}");
    assert!(df.lines().any(|l| l == "COPY --from=static / /"));
    let script = read("scripts/build-image");
    assert!(script.contains("--target scratch --build-context static="));
}

/// The shared reading directory: `$VAPCHECK_SHARED`, `<repo>/../shared`, `/work/shared`.
fn shared_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("VAPCHECK_SHARED").map(PathBuf::from),
        Some(root().join("../shared")),
        Some(PathBuf::from("/work/shared")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_dir())
}

fn resolve<'a>(schema: &'a Value, schemas: &'a Value) -> &'a Value {
    let reference = schema["$ref"].as_str().or_else(|| {
        schema["allOf"]
            .as_array()
            .and_then(|a| a.first())
            .and_then(|s| s["$ref"].as_str())
    });
    match reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => resolve(&schemas[name], schemas),
        None => schema,
    }
}

/// Collects every field of `value` the schema does not know, and scalars of the wrong type.
fn unknown_fields(
    value: &Value,
    schema: &Value,
    schemas: &Value,
    path: &str,
    out: &mut Vec<String>,
) {
    let schema = resolve(schema, schemas);
    match value {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            for (k, v) in map {
                let child = format!("{path}.{k}");
                match props.and_then(|p| p.get(k)) {
                    Some(s) => unknown_fields(v, s, schemas, &child, out),
                    None if additional.is_object() => {
                        unknown_fields(v, additional, schemas, &child, out)
                    }
                    None if props.is_some() => out.push(child),
                    None => {} // free-form (preserve-unknown-fields, int-or-string, ...)
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                unknown_fields(v, &schema["items"], schemas, &format!("{path}[{i}]"), out);
            }
        }
        scalar => {
            let ok = match schema["type"].as_str() {
                Some("string") => scalar.is_string(),
                Some("integer") => scalar.is_i64() || scalar.is_u64(),
                Some("number") => scalar.is_number(),
                Some("boolean") => scalar.is_boolean(),
                _ => true,
            };
            if !ok {
                out.push(format!("{path}: {scalar} is not a {}", schema["type"]));
            }
        }
    }
}

#[test]
fn built_in_objects_match_the_kubernetes_openapi_schemas() {
    let Some(shared) = shared_dir() else {
        return missing("shared/ (OpenAPI documents) not found; set VAPCHECK_SHARED");
    };
    let openapi = shared.join("openapi/v1.35");
    let mut checked = 0;
    for (path, o) in objects() {
        let api_version = o["apiVersion"].as_str().unwrap_or("");
        let kind = o["kind"].as_str().unwrap_or("");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let doc_path = if group.is_empty() {
            openapi.join(format!("api/{version}.json"))
        } else {
            openapi.join(format!("apis/{group}/{version}.json"))
        };
        if !doc_path.exists() {
            // monitoring.coreos.com and other CRDs are not built in.
            assert!(
                group.ends_with("coreos.com"),
                "no OpenAPI document for {api_version}"
            );
            continue;
        }
        let doc: Value = serde_json::from_str(
            &std::fs::read_to_string(&doc_path).unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{doc_path:?}: {e}"));
        let schemas = &doc["components"]["schemas"];
        let schema = schemas
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, s)| s)
            .find(|s| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind)
            })
            .unwrap_or_else(|| panic!("no schema for {api_version} {kind}"));
        let mut errors = Vec::new();
        unknown_fields(&o, schema, schemas, kind, &mut errors);
        assert!(
            errors.is_empty(),
            "{path:?}: unknown or mistyped fields {errors:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 11, "every built-in object is checked");

    // The checker catches a misspelt field.
    let mut d = object("Deployment", "vapcheck");
    d["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] =
        Value::Bool(true);
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(openapi.join("apis/apps/v1.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let schemas = &doc["components"]["schemas"];
    let mut errors = Vec::new();
    unknown_fields(
        &d,
        &schemas["io.k8s.api.apps.v1.Deployment"],
        schemas,
        "Deployment",
        &mut errors,
    );
    assert_eq!(
        errors,
        ["Deployment.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"]
    );
}

/// `$VAPCHECK_HELM` (make test sets it from scripts/helm-path, the pinned helm built and
/// cached by the project), else `helm` on PATH.
fn helm() -> Result<PathBuf, String> {
    let helm = std::env::var_os("VAPCHECK_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("helm"));
    match Command::new(&helm).args(["version", "--short"]).output() {
        Ok(o) if o.status.success() => Ok(helm),
        Ok(o) => Err(format!(
            "`{} version` failed ({}): {}",
            helm.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!(
            "cannot run {} ({e}); set VAPCHECK_HELM to the output of scripts/helm-path",
            helm.display()
        )),
    }
}

#[test]
fn manifests_are_the_charts_default_rendering() {
    let helm = match helm() {
        Ok(h) => h,
        Err(why) => return missing(&format!("the chart cannot be rendered: {why}")),
    };
    let check = |dir: &Path| {
        Command::new(root().join("scripts/render-manifests"))
            .arg("--check")
            .current_dir(dir)
            .env("VAPCHECK_HELM", &helm)
            .output()
            .unwrap_or_else(|e| panic!("scripts/render-manifests: {e}"))
    };
    let out = check(&root());
    assert!(
        out.status.success(),
        "manifests/ is not the rendering of charts/vapcheck with default values; run scripts/render-manifests:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The comparison fails on a difference: a copy of the repository's chart, scripts and
    // manifests with one manifest line changed.
    let copy = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for dir in ["charts", "config", "scripts", "manifests"] {
        let status = Command::new("cp")
            .arg("-r")
            .arg(root().join(dir))
            .arg(copy.path())
            .status()
            .unwrap_or_else(|e| panic!("cp: {e}"));
        assert!(status.success(), "cp -r {dir}");
    }
    let deployment = copy.path().join("manifests/deployment.yaml");
    let text = std::fs::read_to_string(&deployment).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("replicas: 2"), "{text}");
    std::fs::write(&deployment, text.replace("replicas: 2", "replicas: 3"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(copy.path().join("scripts/render-manifests"))
        .arg("--check")
        .env("VAPCHECK_HELM", &helm)
        .output()
        .unwrap_or_else(|e| panic!("scripts/render-manifests: {e}"));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "an edited manifest passed the check");
    assert!(
        diff.contains("-  replicas: 3") && diff.contains("+  replicas: 2"),
        "{diff}"
    );
}

#[test]
fn chart_refuses_unknown_values_and_invalid_configuration() {
    let helm = match helm() {
        Ok(h) => h,
        Err(why) => return missing(&format!("the chart cannot be rendered: {why}")),
    };
    let template = |set: &str| {
        Command::new(&helm)
            .args(["template", "vapcheck"])
            .arg(root().join("charts/vapcheck"))
            .args(["--set", set])
            .output()
            .unwrap_or_else(|e| panic!("helm: {e}"))
    };
    for (set, complaint) in [
        ("replicas=3", "additional properties 'replicas' not allowed"),
        (
            "config.kindLimt=3",
            "additional properties 'kindLimt' not allowed",
        ),
        ("config.kindLimit=0", "/config/kindLimit"),
        ("config.statusMode=conditionsonly", "/config/statusMode"),
        ("rbac.paramKinds[0].apiGroups[0]=example.com", "resources"),
    ] {
        let out = template(set);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} was accepted");
        assert!(stderr.contains(complaint), "--set {set}: {stderr}");
    }
    for set in [
        "replicaCount=3",
        "config.statusMode=conditionsOnly",
        "config.kindLimit=64",
    ] {
        let out = template(set);
        assert!(
            out.status.success(),
            "--set {set}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn chart_grants_the_reviews_only_to_secure_authorized_metrics() {
    use vapcheck::health::preflight::REQUIRED_PERMISSIONS;
    let helm = match helm() {
        Ok(h) => h,
        Err(why) => return missing(&format!("the chart cannot be rendered: {why}")),
    };
    let cluster_role = |sets: &[&str]| -> Value {
        let mut command = Command::new(&helm);
        command
            .args(["template", "vapcheck"])
            .arg(root().join("charts/vapcheck"))
            .args(["--show-only", "templates/clusterrole.yaml"]);
        for set in sets {
            command.args(["--set", set]);
        }
        let out = command.output().unwrap_or_else(|e| panic!("helm: {e}"));
        assert!(
            out.status.success(),
            "{sets:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let docs = serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
            .unwrap_or_else(|e| panic!("{e}"));
        docs.into_iter()
            .find(|d| d["kind"] == "ClusterRole")
            .map(|d| d["rules"].clone())
            .unwrap_or_else(|| panic!("{sets:?}: no ClusterRole"))
    };
    let reviews: Vec<_> = REQUIRED_PERMISSIONS
        .iter()
        .filter(|p| p.secure_metrics_only)
        .collect();
    assert_eq!(reviews.len(), 2);
    for (sets, granted) in [
        (&[][..], false),
        (&["config.metrics.secure.enabled=true"][..], true),
        (
            &[
                "config.metrics.secure.enabled=true",
                "config.metrics.secure.authorize=false",
            ][..],
            false,
        ),
    ] {
        let rules = cluster_role(sets);
        for p in &reviews {
            assert_eq!(
                grants(&rules, p.verb, p.group, p.resource, p.url),
                granted,
                "{sets:?}: {p}"
            );
        }
    }
}

#[test]
fn chart_ships_the_documented_default_configuration() {
    assert_eq!(
        read("charts/vapcheck/files/vapcheck.yaml"),
        read("config/vapcheck.yaml"),
        "charts/vapcheck/files/vapcheck.yaml must be a copy of config/vapcheck.yaml: cp config/vapcheck.yaml charts/vapcheck/files/ && scripts/render-manifests"
    );
}

/// The metric families `Metrics` exposes once every labelled family has a series.
fn exposed_families() -> BTreeSet<String> {
    let metrics = vapcheck::metrics::Metrics::new();
    metrics.set_policy_warnings(vapcheck::metrics::PolicyKind::Validating, "p", 1);
    metrics.set_policy_rejected_on_create(vapcheck::metrics::PolicyKind::Validating, "p", false);
    metrics.schema_fetch(vapcheck::metrics::SchemaFetchResult::Error);
    metrics.set_leader("vapcheck", true);
    metrics.watch_status().succeeded();
    metrics
        .start_reconcile()
        .finish(vapcheck::metrics::ReconcileResult::Success);
    metrics.observe_typecheck(std::time::Duration::from_millis(1));
    metrics.set_webhook(
        &vapcheck::metrics::WebhookLabels {
            kind: "ValidatingWebhookConfiguration",
            configuration: "c".into(),
            webhook: "w.example.com".into(),
        },
        &vapcheck::metrics::WebhookValues {
            failure_policy: "Fail".into(),
            state: vapcheck::webhooks::availability::State::Available,
            ready_endpoints: Some(1),
            ca_not_after: Some(0),
            findings: 0,
        },
    );
    let mut families: BTreeSet<String> = metrics
        .encode_prometheus_text()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    // The rest_client_* families appear with the first API request (through the client
    // layer); take them from docs/metrics.md's tables. The e2e test runs every query.
    for line in read("docs/metrics.md").lines() {
        if let Some(name) = line
            .strip_prefix("| `rest_client_")
            .and_then(|rest| rest.split('`').next())
        {
            families.insert(format!("rest_client_{name}"));
        }
    }
    // Histograms are queried through their series.
    for f in families.clone() {
        for suffix in ["_bucket", "_sum", "_count"] {
            families.insert(format!("{f}{suffix}"));
        }
    }
    families
}

#[test]
fn dashboard_is_shipped_for_the_sidecar_and_queries_existing_metrics() {
    let chart_json = read("charts/vapcheck/dashboards/vapcheck.json");
    let dashboard: Value =
        serde_json::from_str(&chart_json).unwrap_or_else(|e| panic!("dashboard JSON: {e}"));
    let cm = object("ConfigMap", "vapcheck-dashboard");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cm["metadata"]["namespace"], "vapcheck-system");
    let shipped: Value = serde_json::from_str(cm["data"]["vapcheck.json"].as_str().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the ConfigMap's dashboard is not JSON: {e}"));
    assert_eq!(
        shipped, dashboard,
        "manifests/monitoring carries the chart's dashboard"
    );

    let families = exposed_families();
    let panels = dashboard["panels"].as_array().cloned().unwrap_or_default();
    let mut titles = BTreeSet::new();
    let mut used_everywhere = BTreeSet::new();
    for panel in &panels {
        let title = panel["title"].as_str().unwrap_or("").to_owned();
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        assert!(!targets.is_empty(), "panel {title} has no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or("");
            let used: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| {
                    w.contains('_') && w.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                })
                .filter(|w| {
                    families.contains(*w)
                        || w.starts_with("vapcheck_")
                        || w.starts_with("controller_runtime_")
                        || w.starts_with("workqueue_")
                        || w.starts_with("process_")
                        || w.starts_with("rest_client_")
                        || w.starts_with("leader_election_")
                })
                .collect();
            assert!(!used.is_empty(), "panel {title}: {expr} uses no metric");
            for name in used {
                assert!(
                    families.contains(name),
                    "panel {title}: unknown metric {name}"
                );
                used_everywhere.insert(name.to_owned());
            }
        }
        titles.insert(title);
    }
    // What issue 20 asks the dashboard to show.
    for needed in [
        "vapcheck_policies",
        "vapcheck_policy_expression_warnings",
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "vapcheck_schema_fetches_total",
        "leader_election_master_status",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(used_everywhere.contains(needed), "no panel shows {needed}");
    }
    assert_eq!(titles.len(), panels.len(), "panel titles are unique");
}
