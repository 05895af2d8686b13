//! Shared by the benchmarks on a real control plane (`e2e/bench/*.rs`): numbers from the
//! environment and the corpus policies created under new names.

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use vapcheck::cli::input::read_policies;

use super::support;

const PARALLEL_CREATES: usize = 16;

pub fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}")),
        Err(_) => default,
    }
}

/// The corpus policies, in a fixed order.
pub fn corpus() -> anyhow::Result<Vec<ValidatingAdmissionPolicy>> {
    let root = support::shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let source = path.display().to_string();
        let policies = read_policies(&source, &text).map_err(|e| anyhow::anyhow!("{e}"))?;
        out.extend(policies.into_iter().map(|p| p.policy));
    }
    if out.is_empty() {
        bail!("no policies under {}", root.display());
    }
    Ok(out)
}

/// Creates `n` policies named `bench-00000`.. from the corpus, cycled. A template the API
/// server refuses (422) is dropped from the cycle (its name is skipped, not reused).
pub async fn create_policies(client: &Client, n: usize) -> anyhow::Result<usize> {
    let mut templates = corpus()?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let mut created = 0usize;
    let mut next_name = 0usize;
    let mut next_template = 0usize;
    while created < n {
        if templates.is_empty() {
            bail!("the API server refused every corpus policy");
        }
        let batch: Vec<(usize, usize)> = (0..(n - created).min(256))
            .map(|k| (next_name + k, (next_template + k) % templates.len()))
            .collect();
        next_name += batch.len();
        next_template = (next_template + batch.len()) % templates.len();
        let results: Vec<(usize, usize, Result<(), kube::Error>)> =
            futures::stream::iter(batch.into_iter().map(|(i, t)| {
                let api = api.clone();
                let object = ValidatingAdmissionPolicy {
                    metadata: ObjectMeta {
                        name: Some(format!("bench-{i:05}")),
                        ..ObjectMeta::default()
                    },
                    spec: templates[t].spec.clone(),
                    status: None,
                };
                async move {
                    let r = api
                        .create(&PostParams::default(), &object)
                        .await
                        .map(|_| ());
                    (i, t, r)
                }
            }))
            .buffer_unordered(PARALLEL_CREATES)
            .collect()
            .await;
        let mut refused: Vec<usize> = Vec::new();
        for (i, t, r) in results {
            match r {
                Ok(()) => created += 1,
                Err(kube::Error::Api(s)) if s.code == 422 => refused.push(t),
                Err(e) => return Err(e).context(format!("creating bench-{i:05}")),
            }
        }
        refused.sort_unstable();
        refused.dedup();
        for t in refused.into_iter().rev() {
            templates.remove(t);
        }
        if !templates.is_empty() {
            next_template %= templates.len();
        }
    }
    Ok(templates.len())
}
