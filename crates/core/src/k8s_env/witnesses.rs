//! Small valid objects of built-in kinds as kube-apiserver 1.37.1 admits them, for runtime
//! safety ([`crate::policy::runtime`]).
//!
//! `data/witnesses.json` holds, for each object, what a user creates (`input`) and what the
//! validating admission plugins see on CREATE (`admitted`): the object after decoding with the
//! kind's defaults (e.g. `SetDefaults_PodSpec` sets `securityContext: {}`), the mutating
//! admission plugins that run before validation (the ServiceAccount plugin mounts the token
//! volume) and the registry's `PrepareForCreate` (`metadata.generation`, `status`).
//! The `admitted` forms are recorded from the pinned release's API server with server-side
//! dry-run creates, and the e2e test `e2e_runtime_safety` checks them against it on every
//! `make test` (`VAPCHECK_BLESS=1` records them again). Values the server generates
//! (`uid`, `creationTimestamp`, cluster IPs, the token volume's suffix) are blanked: only which
//! fields are present matters.

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use crate::policy::Gvk;
use crate::policy::runtime::{KindWitnesses, WitnessObject};

/// The recorded objects.
pub const WITNESSES_JSON: &str = include_str!("../../../../data/witnesses.json");

#[derive(Deserialize)]
struct Entry {
    resource: String,
    namespaced: bool,
    input: Value,
    admitted: Value,
}

fn all() -> &'static [(Gvk, KindWitnesses)] {
    static ALL: OnceLock<Vec<(Gvk, KindWitnesses)>> = OnceLock::new();
    ALL.get_or_init(|| {
        // The file is part of the binary and checked by tests; an unreadable one gives no
        // witnesses (and no runtime-safety findings) rather than a panic.
        let entries: Vec<Entry> = serde_json::from_str(WITNESSES_JSON).unwrap_or_default();
        let mut out: Vec<(Gvk, KindWitnesses)> = Vec::new();
        for e in entries {
            let api_version = e.input["apiVersion"].as_str().unwrap_or_default();
            let kind = e.input["kind"].as_str().unwrap_or_default();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = Gvk::new(group, version, kind);
            let object = WitnessObject {
                input: e.input,
                admitted: e.admitted,
            };
            match out.iter_mut().find(|(g, _)| *g == gvk) {
                Some((_, w)) => w.objects.push(object),
                None => out.push((
                    gvk,
                    KindWitnesses {
                        resource: e.resource,
                        namespaced: e.namespaced,
                        objects: vec![object],
                    },
                )),
            }
        }
        out
    })
}

/// The witnesses of `gvk`, if any (parsed once per process, shared).
pub fn of(gvk: &Gvk) -> Option<&'static KindWitnesses> {
    all().iter().find(|(g, _)| g == gvk).map(|(_, w)| w)
}

/// Every kind that has witnesses.
pub fn kinds() -> Vec<Gvk> {
    all().iter().map(|(g, _)| g.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_objects_load() {
        let n: usize = kinds()
            .iter()
            .map(|g| of(g).map_or(0, |w| w.objects.len()))
            .sum();
        let entries: Vec<serde_json::Value> =
            serde_json::from_str(WITNESSES_JSON).expect("valid JSON");
        assert_eq!(n, entries.len());
        assert_eq!(kinds().len(), 17);
        let pods = of(&Gvk::new("", "v1", "Pod")).expect("pods");
        assert_eq!(pods.resource, "pods");
        assert_eq!(pods.objects.len(), 2);
    }
}
