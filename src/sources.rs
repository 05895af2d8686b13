//! Reading the API server's discovery: the sources layer that both `vapcheck check` (against a
//! live cluster, [`crate::cli::live`]) and the controller use. Above the I/O-free core, below
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
