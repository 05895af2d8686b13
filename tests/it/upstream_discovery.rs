//! Discovery parsing against the real 1.37.1 discovery documents that ship with the
//! Kubernetes Go module (`k8s.io/kubernetes@v1.37.1/api/discovery`), and the REST mapping
//! facts the upstream oracle established with them. The documents are read in place:
//! `$VAPCHECK_K8S_DISCOVERY`, else the module's folder as `go list -m -f '{{.Dir}}'
//! k8s.io/kubernetes` reports it from `e2e/cluster` (the module that pins the release). Without
//! them the tests fail under CI (`CI=true`) with the reason, and elsewhere say that they
//! skipped.

use crate::support::shared_dir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::discovery::{discovery_from_aggregated, discovery_from_resource_list};
use vapcheck::policy::{ApiGroupResources, DiscoveryRestMapper, Gvr, RestMapper, types_to_check};

/// The folder of the discovery documents, or why there is none.
fn find_discovery_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("VAPCHECK_K8S_DISCOVERY") {
        Some(d) => PathBuf::from(d),
        None => {
            let cluster = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/cluster");
            let out = Command::new("go")
                .args(["list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"])
                .current_dir(&cluster)
                .output()
                .map_err(|e| {
                    format!("cannot run `go list -m k8s.io/kubernetes` (is Go on PATH?): {e}")
                })?;
            let module = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !out.status.success() || module.is_empty() {
                return Err(format!(
                    "`go list -m -f '{{{{.Dir}}}}' k8s.io/kubernetes` in {} gave no module folder \
                     ({}; run `go mod download k8s.io/kubernetes` there): {}",
                    cluster.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Path::new(&module).join("api/discovery")
        }
    };
    if dir.join("aggregated_v2.json").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no Kubernetes 1.37.1 discovery documents (aggregated_v2.json) in {}",
            dir.display()
        ))
    }
}

/// The discovery folder; `None` (after saying so) when it is missing outside CI.
fn discovery_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(find_discovery_dir) {
        Ok(dir) => Some(dir.clone()),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("{why} (required under CI)")
        }
        Err(why) => {
            eprintln!("SKIPPED (not under CI): {why}");
            None
        }
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Core from the legacy `/api/v1` list, groups from the aggregated `/apis` document.
fn cluster_discovery(dir: &Path) -> Vec<ApiGroupResources> {
    let mut groups = vec![discovery_from_resource_list(&json(&dir.join("api__v1.json"))).unwrap()];
    groups.extend(discovery_from_aggregated(&json(&dir.join("aggregated_v2.json"))).unwrap());
    groups
}

fn kinds(m: &DiscoveryRestMapper, g: &str, v: &str, r: &str) -> Vec<String> {
    m.kinds_for(&Gvr::new(g, v, r))
        .map(|k| k.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn aggregated_and_legacy_documents_agree() {
    let Some(dir) = discovery_dir() else { return };
    let aggregated = discovery_from_aggregated(&json(&dir.join("aggregated_v2.json"))).unwrap();
    let mut compared = 0;
    for g in &aggregated {
        for v in &g.versions {
            let file = dir.join(format!("apis__{}__{}.json", g.name, v.version));
            let legacy = discovery_from_resource_list(&json(&file)).unwrap();
            let mut a: Vec<_> = v
                .resources
                .iter()
                .map(|r| (&r.name, &r.kind, &r.group, &r.version, r.namespaced))
                .collect();
            let mut l: Vec<_> = legacy.versions[0]
                .resources
                .iter()
                .map(|r| (&r.name, &r.kind, &r.group, &r.version, r.namespaced))
                .collect();
            a.sort();
            l.sort();
            assert_eq!(a, l, "{}", file.display());
            compared += 1;
        }
    }
    // Every group version of the aggregated document has its legacy document.
    assert_eq!(compared, 35, "group versions compared");
}

#[test]
fn rest_mapping_facts_of_the_upstream_oracle() {
    let Some(dir) = discovery_dir() else { return };
    let m = DiscoveryRestMapper::new(cluster_discovery(&dir));
    // A core-group rule matches the resource in every group.
    assert_eq!(
        kinds(&m, "", "v1", "deployments"),
        ["apps/v1, Kind=Deployment"]
    );
    assert_eq!(
        kinds(&m, "", "v1", "events"),
        ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
    );
    // Lower-cased, singular accepted, short names not.
    assert_eq!(kinds(&m, "", "v1", "PODS"), ["/v1, Kind=Pod"]);
    assert_eq!(
        kinds(&m, "apps", "v1", "deployment"),
        ["apps/v1, Kind=Deployment"]
    );
    assert!(kinds(&m, "", "v1", "po").is_empty());
    // Versions not served do not resolve.
    assert!(kinds(&m, "apps", "v1beta1", "deployments").is_empty());
}

#[test]
fn offline_openapi_mapping_against_a_real_cluster_on_the_corpus() {
    let Some(dir) = discovery_dir() else { return };
    let cluster = DiscoveryRestMapper::new(cluster_discovery(&dir));
    let offline = DiscoveryRestMapper::new(
        offline_discovery(Some(&shared_dir().join("openapi/v1.35")), None, &[]).unwrap(),
    );
    let mut files = Vec::new();
    let mut stack = vec![shared_dir().join("corpus/policies")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p)
            } else {
                files.push(p)
            }
        }
    }
    files.sort();
    let policies = read_inputs(&files, &mut std::io::empty()).unwrap();
    let mut differing = Vec::new();
    for p in &policies {
        let a = types_to_check(&p.policy, &cluster).kinds;
        let b = types_to_check(&p.policy, &offline).kinds;
        if a != b {
            differing.push(format!("{}: cluster {:?} offline {:?}", p.origin, a, b));
        }
    }
    println!(
        "{} of {} policies select different kinds with v1.35 OpenAPI than with 1.37.1 discovery",
        differing.len(),
        policies.len()
    );
    for d in &differing {
        println!("  {d}");
    }
    assert_eq!(policies.len(), 263, "policies of the corpus");
    assert!(differing.is_empty(), "{differing:#?}");
}
