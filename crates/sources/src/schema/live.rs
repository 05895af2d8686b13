//! Schemas from a running API server: aggregated discovery for the resource mapping and the
//! `/openapi/v3` documents for the schemas (built-in kinds, CRDs and aggregated APIs alike).
//!
//! All I/O happens in [`LiveSource::poll`]; [`SchemaSource`] calls only read the snapshot the
//! last poll produced. A poll first reads the `/openapi/v3` index. Each document URL in it
//! carries a content hash (`?hash=`); a document is downloaded only when its hash is new, and
//! its converted types live as long as the hash does. Discovery is re-read only when the index
//! changed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use serde_json::Value;

use super::convert::{ConvertOptions, Limits};
use super::discovery::{ApiGroupResources, from_aggregated};
use super::document::OpenApiDocument;
use super::gvk::{GroupVersion, GroupVersionKind, GroupVersionResource};
use super::source::{Catalog, SchemaError, SchemaErrorKind, SchemaSource};
use super::types::RootType;

/// How many documents are downloaded at the same time.
const PARALLEL_DOWNLOADS: usize = 4;

/// A failed poll. Names the request.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", describe(.source.as_ref()))]
pub struct LiveError {
    /// The request or step that failed.
    pub what: String,
    /// The underlying error.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The cause of a failed request as status messages show it: an API server's refusal as its
/// HTTP code and message ("HTTP 403: Forbidden"; kube-client's own text for a body it cannot
/// parse is not useful), anything else as its own text.
fn describe(error: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    match error.downcast_ref::<kube::Error>() {
        // A body without a code (not a Status) keeps kube-client's text.
        Some(kube::Error::Api(status)) if status.code != 0 => {
            let message = status.message.trim();
            if message.is_empty() {
                format!("HTTP {}", status.code)
            } else {
                format!("HTTP {}: {message}", status.code)
            }
        }
        _ => error.to_string(),
    }
}

/// `url` without its query (the `?hash=` of a document URL is 128 hex digits that say nothing
/// to a reader).
fn without_query(url: &str) -> &str {
    url.split_once('?').map_or(url, |(path, _)| path)
}

/// Which group-versions' documents changed in a poll.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Group-versions that appeared.
    pub added: Vec<GroupVersion>,
    /// Group-versions whose document hash changed.
    pub changed: Vec<GroupVersion>,
    /// Group-versions that disappeared.
    pub removed: Vec<GroupVersion>,
    /// Group-versions whose document could not be downloaded (retried next poll).
    pub failed: Vec<GroupVersion>,
}

impl Changes {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.failed.is_empty()
    }

    /// Every group-version that was added, changed or removed.
    pub fn affected(&self) -> impl Iterator<Item = &GroupVersion> {
        self.added.iter().chain(&self.changed).chain(&self.removed)
    }
}

#[derive(Debug, Default)]
struct State {
    /// group-version → hash from the last index.
    hashes: HashMap<GroupVersion, String>,
    catalog: Option<Arc<Catalog>>,
    /// Group-versions whose download failed, with the reason.
    failures: HashMap<GroupVersion, String>,
    /// The discovery snapshot of the last poll that read discovery.
    resources: Arc<Vec<ApiGroupResources>>,
}

/// Schemas read from a live API server.
pub struct LiveSource {
    client: kube::Client,
    limits: Limits,
    options: ConvertOptions,
    state: RwLock<State>,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("limits", &self.limits)
            .field("options", &self.options)
            .finish()
    }
}

/// The `?hash=` of a document URL, or the whole URL when it has none.
fn hash_of_url(url: &str) -> String {
    url.split_once('?')
        .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix("hash=")))
        .map(str::to_owned)
        .unwrap_or_else(|| url.to_owned())
}

/// Parses the `/openapi/v3` index into group-version → (URL, hash).
pub fn parse_index(index: &Value) -> HashMap<GroupVersion, (String, String)> {
    let mut out = HashMap::new();
    let Some(paths) = index.get("paths").and_then(Value::as_object) else {
        return out;
    };
    for (path, entry) in paths {
        let Some(gv) = GroupVersion::from_openapi_path(path) else {
            continue;
        };
        let Some(url) = entry.get("serverRelativeURL").and_then(Value::as_str) else {
            continue;
        };
        out.insert(gv, (url.to_owned(), hash_of_url(url)));
    }
    out
}

impl LiveSource {
    /// A source reading from `client`. Nothing is fetched until [`LiveSource::poll`].
    pub fn new(client: kube::Client, limits: Limits, options: ConvertOptions) -> Self {
        LiveSource {
            client,
            limits,
            options,
            state: RwLock::new(State::default()),
        }
    }

    /// The snapshot of the last successful poll, if any.
    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.read().catalog.clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    async fn get_text(&self, url: &str) -> Result<String, LiveError> {
        let req = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| LiveError {
                what: format!("GET {url}"),
                source: Box::new(e),
            })?;
        self.client.request_text(req).await.map_err(|e| LiveError {
            what: format!("GET {}", without_query(url)),
            source: Box::new(e),
        })
    }

    /// Reads the index; downloads new or changed documents; re-reads discovery when anything
    /// changed (or on the first poll); swaps in the new snapshot. Returns what changed. On an
    /// error the previous snapshot stays in place.
    pub async fn poll(&self) -> Result<Changes, LiveError> {
        let index_text = self.get_text("/openapi/v3").await?;
        let index: Value = serde_json::from_str(&index_text).map_err(|e| LiveError {
            what: "parse /openapi/v3 index".into(),
            source: Box::new(e),
        })?;
        let index = parse_index(&index);

        let (previous_hashes, previous_catalog, previous_failures, previous_resources) = {
            let s = self.read();
            (
                s.hashes.clone(),
                s.catalog.clone(),
                s.failures.clone(),
                s.resources.clone(),
            )
        };
        let mut changes = Changes::default();
        let mut to_fetch: Vec<(GroupVersion, String, String)> = Vec::new();
        let mut documents: Vec<Arc<OpenApiDocument>> = Vec::new();
        for (gv, (url, hash)) in &index {
            let reuse =
                previous_hashes.get(gv) == Some(hash) && !previous_failures.contains_key(gv);
            let doc = reuse
                .then(|| {
                    previous_catalog
                        .as_ref()
                        .and_then(|c| c.document(gv).cloned())
                })
                .flatten();
            match doc {
                Some(d) => documents.push(d),
                None => {
                    match previous_hashes.get(gv) {
                        None => changes.added.push(gv.clone()),
                        Some(h) if h != hash => changes.changed.push(gv.clone()),
                        Some(_) => {}
                    }
                    to_fetch.push((gv.clone(), url.clone(), hash.clone()));
                }
            }
        }
        changes.removed = previous_hashes
            .keys()
            .filter(|gv| !index.contains_key(*gv))
            .cloned()
            .collect();

        // Each document is parsed as soon as it arrives, so that at most PARALLEL_DOWNLOADS
        // texts are held at once: a burst of CRDs in new groups (2,000 CRDs in 400 groups in
        // e2e/bench/crds) downloads hundreds of documents in one poll, and collecting every
        // text before parsing any made the texts themselves the peak of the process's memory.
        let fetched: Vec<(GroupVersion, Result<OpenApiDocument, LiveError>)> =
            futures::stream::iter(to_fetch)
                .map(|(gv, url, hash)| async move {
                    let r = self
                        .get_text(&url)
                        .await
                        .map(|text| OpenApiDocument::from_slice(gv.clone(), hash, text.as_bytes()));
                    (gv, r)
                })
                .buffer_unordered(PARALLEL_DOWNLOADS)
                .collect()
                .await;
        let mut hashes: HashMap<GroupVersion, String> = index
            .iter()
            .map(|(gv, (_, h))| (gv.clone(), h.clone()))
            .collect();
        let mut failures = HashMap::new();
        for (gv, result) in fetched {
            match result {
                Ok(document) => documents.push(Arc::new(document)),
                Err(e) => {
                    // Failing again is no change: it stays out of `added`, so a document that
                    // keeps failing does not re-check its policies on every poll.
                    if previous_failures.contains_key(&gv) {
                        changes.added.retain(|g| g != &gv);
                    }
                    changes.failed.push(gv.clone());
                    hashes.remove(&gv);
                    failures.insert(gv, e.to_string());
                }
            }
        }
        for list in [
            &mut changes.added,
            &mut changes.changed,
            &mut changes.removed,
            &mut changes.failed,
        ] {
            list.sort();
        }

        let discovery_needed =
            previous_catalog.is_none() || !changes.is_empty() || !previous_failures.is_empty();
        let resources = if discovery_needed {
            let core = self
                .client
                .list_core_api_versions_aggregated()
                .await
                .map_err(|e| LiveError {
                    what: "aggregated discovery GET /api".into(),
                    source: Box::new(e),
                })?;
            let groups = self
                .client
                .list_api_groups_aggregated()
                .await
                .map_err(|e| LiveError {
                    what: "aggregated discovery GET /apis".into(),
                    source: Box::new(e),
                })?;
            Arc::new(from_aggregated(&[core, groups]))
        } else {
            previous_resources
        };
        let catalog = Catalog::new(documents, &resources, self.limits, self.options);
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        *s = State {
            hashes,
            catalog: Some(Arc::new(catalog)),
            failures,
            resources,
        };
        Ok(changes)
    }
}

impl SchemaSource for LiveSource {
    fn resolve(&self, gvk: &GroupVersionKind) -> Result<Arc<RootType>, SchemaError> {
        let s = self.read();
        if let Some(reason) = s.failures.get(&gvk.group_version()) {
            return Err(SchemaError::new(
                gvk,
                SchemaErrorKind::Unavailable,
                reason.clone(),
            ));
        }
        match &s.catalog {
            Some(c) => c.resolve(gvk),
            None => Err(SchemaError::new(
                gvk,
                SchemaErrorKind::Unavailable,
                "the API server has not been read yet",
            )),
        }
    }

    fn kinds_for(&self, gvr: &GroupVersionResource) -> Vec<GroupVersionKind> {
        self.read()
            .catalog
            .as_ref()
            .map(|c| c.kinds_for(gvr))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
