//! The offline discovery built from `../shared/openapi/v1.35`, and kind selection over the
//! whole policy corpus with it.

use crate::support::shared_dir;

use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::{
    DEFAULT_EXTENDED_KIND_LIMIT, DiscoveryRestMapper, Gvr, RestMapper, types_to_check,
    types_to_check_extended,
};

fn mapper() -> DiscoveryRestMapper {
    let groups = offline_discovery(Some(&shared_dir().join("openapi/v1.35")), None, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    DiscoveryRestMapper::new(groups)
}

fn kinds(m: &DiscoveryRestMapper, g: &str, v: &str, r: &str) -> Vec<String> {
    m.kinds_for(&Gvr::new(g, v, r))
        .map(|k| k.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn built_in_resources_map_like_a_cluster() {
    let m = mapper();
    assert_eq!(kinds(&m, "", "v1", "pods"), ["/v1, Kind=Pod"]);
    assert_eq!(kinds(&m, "", "v1", "pod"), ["/v1, Kind=Pod"]);
    assert_eq!(
        kinds(&m, "apps", "v1", "Deployments"),
        ["apps/v1, Kind=Deployment"]
    );
    assert_eq!(
        kinds(&m, "", "v1", "events"),
        ["/v1, Kind=Event", "events.k8s.io/v1, Kind=Event"]
    );
    assert_eq!(
        kinds(&m, "networking.k8s.io", "v1", "ingresses"),
        ["networking.k8s.io/v1, Kind=Ingress"]
    );
    assert_eq!(
        kinds(&m, "networking.k8s.io", "v1", "ingress"),
        ["networking.k8s.io/v1, Kind=Ingress"]
    );
    assert!(kinds(&m, "apps", "v1", "deployments/scale").is_empty());
}

#[test]
fn corpus_kind_selection() {
    let root = shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    let mut stack = vec![root];
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
    let m = mapper();
    let (mut strict_total, mut extended_total, mut no_kinds) = (0, 0, 0);
    for p in &policies {
        let s = types_to_check(&p.policy, &m);
        let e = types_to_check_extended(&p.policy, &m, Some(&m), DEFAULT_EXTENDED_KIND_LIMIT);
        assert!(e.kinds.len() >= s.kinds.len());
        assert_eq!(e.kinds[..s.kinds.len()], s.kinds[..], "{}", p.origin);
        strict_total += s.kinds.len();
        extended_total += e.kinds.len();
        no_kinds += usize::from(s.kinds.is_empty());
    }
    println!(
        "{} policies: strict selects {strict_total} kinds ({no_kinds} policies with none), extended {extended_total}",
        policies.len()
    );
    assert!(strict_total > policies.len() / 2);
    assert!(extended_total > strict_total);
}
