//! Discovery parsing against the real 1.37.1 discovery documents that ship with the
//! Kubernetes Go module (`k8s.io/kubernetes@v1.37.1/api/discovery`), and the REST mapping
//! facts the upstream oracle established with them. The documents are read in place
//! (`$VAPCHECK_K8S_DISCOVERY` or the Go module cache); without them these tests say so and
//! return.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::discovery::{discovery_from_aggregated, discovery_from_resource_list};
use vapcheck::policy::{ApiGroupResources, DiscoveryRestMapper, Gvr, RestMapper, types_to_check};

fn discovery_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("VAPCHECK_K8S_DISCOVERY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from("/root/go/pkg/mod/k8s.io/kubernetes@v1.37.1/api/discovery")
        });
    if dir.join("aggregated_v2.json").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: no Kubernetes 1.37.1 discovery documents at {}",
            dir.display()
        );
        None
    }
}

/// `$VAPCHECK_SHARED`, then `<repository>/../shared`, then `/work/shared`.
fn shared_dir() -> PathBuf {
    vapcheck::schema::shared_dir()
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
    assert!(compared >= 30, "{compared}");
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
        offline_discovery(Some(&shared_dir().join("openapi/v1.35")), &[]).unwrap(),
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
    assert!(differing.len() * 10 < policies.len(), "{differing:#?}");
}
