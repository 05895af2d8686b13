//! `vapcheck check --kubeconfig` (or in a pod): REST mapping, discovery and schemas read from a
//! live API server once, then checked offline like `--openapi`.

use std::sync::Arc;

use crate::engine::{KubeChecker, Schemas};
use crate::k8s_env::KubeVersion;
use crate::policy::DiscoveryRestMapper;
use crate::schema::{self, ConvertOptions, Limits, LiveSource};
use crate::sources::read_discovery;

use super::{BackendProvider, LoadedBackends, SchemaOptions};

/// Backends from a live cluster: the kubeconfig of `--kubeconfig` / `$KUBECONFIG` (with
/// `--context`), else the pod's service account.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveProvider;

impl BackendProvider for LiveProvider {
    fn load(&self, options: &SchemaOptions) -> Result<LoadedBackends, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the I/O runtime: {e}"))?;
        runtime.block_on(load(options))
    }
}

async fn client(options: &SchemaOptions) -> Result<kube::Client, String> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("{}: cannot read the kubeconfig: {e}", path.display()))?;
            let pick = kube::config::KubeConfigOptions {
                context: options.context.clone(),
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(kubeconfig, &pick)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => {
            kube::Config::incluster().map_err(|e| format!("no kubeconfig and not in a pod: {e}"))?
        }
    };
    let server = config.cluster_url.clone();
    kube::Client::try_from(config).map_err(|e| format!("cannot talk to {server}: {e}"))
}

async fn load(options: &SchemaOptions) -> Result<LoadedBackends, String> {
    let client = client(options).await?;
    let info = client
        .apiserver_version()
        .await
        .map_err(|e| format!("cannot reach the Kubernetes API server: {e}"))?;
    let version = match options.kubernetes_version {
        Some(v) => v.supported()?,
        // The server's own version, within the versions vapcheck knows.
        None => KubeVersion::of_server_minor(&info.minor),
    };
    let live = Arc::new(LiveSource::new(
        client.clone(),
        Limits::default(),
        ConvertOptions::default(),
    ));
    let changes = live
        .poll()
        .await
        .map_err(|e| format!("cannot read the OpenAPI documents: {e}"))?;
    if !changes.failed.is_empty() {
        let failed: Vec<String> = changes.failed.iter().map(ToString::to_string).collect();
        return Err(format!(
            "cannot read the OpenAPI documents of {}",
            failed.join(", ")
        ));
    }
    let mapper = DiscoveryRestMapper::new(read_discovery(&client).await?);
    Ok(LoadedBackends {
        rest_mapper: Box::new(mapper.clone()),
        discovery: Some(Box::new(mapper)),
        schemas: Box::new(Schemas::new(live as Arc<dyn schema::SchemaSource>)),
        checker: Box::new(KubeChecker::with_version_notes(version)?),
    })
}
