//! Reading the API server's discovery: the sources layer that both `vapcheck check` (against a
//! live cluster, `vapcheck::cli::live`) and the controller use. Above the I/O-free core, below
//! the front ends; neither front end imports the other for it.

use serde_json::Value;

use crate::policy::ApiGroupResources;
use crate::policy::discovery::discovery_from_aggregated;

/// What the API server is asked for: aggregated discovery v2 (Kubernetes 1.30+).
const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

async fn aggregated(client: &kube::Client, path: &str) -> Result<Value, String> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, AGGREGATED_DISCOVERY)
        .body(Vec::new())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| format!("aggregated discovery GET {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("aggregated discovery GET {path}: {e}"))
}

/// The API server's resources, from aggregated discovery of `/api` and `/apis`.
pub async fn read_discovery(client: &kube::Client) -> Result<Vec<ApiGroupResources>, String> {
    let core = aggregated(client, "/api").await?;
    let apis = aggregated(client, "/apis").await?;
    let mut groups = discovery_from_aggregated(&core)?;
    groups.extend(discovery_from_aggregated(&apis)?);
    Ok(groups)
}

/// Aggregated discovery as last read, with kube-apiserver's ETag of each document, so that
/// reading it again costs a `304 Not Modified` when nothing changed: kube-apiserver sets the
/// ETag (the SHA-512 of the document) and answers `If-None-Match` with 304 (k8s.io/apiserver
/// v0.37.1 `pkg/endpoints/discovery/aggregated/etag.go`, `ServeHTTPWithETag`).
#[derive(Default)]
pub struct DiscoveryCache {
    core: Option<Tagged>,
    apis: Option<Tagged>,
}

struct Tagged {
    etag: Option<String>,
    groups: Vec<ApiGroupResources>,
}

impl DiscoveryCache {
    /// Reads both documents again (conditionally, by their ETags); returns every group when
    /// either changed or on the first read, `None` when both are unchanged.
    pub async fn read_changed(
        &mut self,
        client: &kube::Client,
    ) -> Result<Option<Vec<ApiGroupResources>>, String> {
        let core = read_tagged(client, "/api", self.core.as_ref()).await?;
        let apis = read_tagged(client, "/apis", self.apis.as_ref()).await?;
        if core.is_none() && apis.is_none() {
            return Ok(None);
        }
        if let Some(t) = core {
            self.core = Some(t);
        }
        if let Some(t) = apis {
            self.apis = Some(t);
        }
        let mut groups = Vec::new();
        for tagged in [&self.core, &self.apis].into_iter().flatten() {
            groups.extend(tagged.groups.iter().cloned());
        }
        Ok(Some(groups))
    }
}

/// GET `path` with `If-None-Match` from `known`; `None` on 304.
async fn read_tagged(
    client: &kube::Client,
    path: &str,
    known: Option<&Tagged>,
) -> Result<Option<Tagged>, String> {
    let mut request = http::Request::get(path).header(http::header::ACCEPT, AGGREGATED_DISCOVERY);
    if let Some(etag) = known.and_then(|k| k.etag.as_deref()) {
        request = request.header(http::header::IF_NONE_MATCH, etag);
    }
    let request = request
        .body(kube::client::Body::empty())
        .map_err(|e| format!("GET {path}: {e}"))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| format!("aggregated discovery GET {path}: {e}"))?;
    let status = response.status();
    if status == http::StatusCode::NOT_MODIFIED && known.is_some() {
        return Ok(None);
    }
    let etag = response
        .headers()
        .get(http::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| format!("aggregated discovery GET {path}: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "aggregated discovery GET {path}: {status}: {}",
            String::from_utf8_lossy(&body).trim()
        ));
    }
    let document: Value = serde_json::from_slice(&body)
        .map_err(|e| format!("aggregated discovery GET {path}: {e}"))?;
    Ok(Some(Tagged {
        etag,
        groups: discovery_from_aggregated(&document)?,
    }))
}
