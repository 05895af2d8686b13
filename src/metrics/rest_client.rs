//! client-go's `rest_client_*` families, fed by a tower layer on kube's client.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{HistogramFamily, Metrics, histogram_family};

/// client-go's `rest_client_request_duration_seconds` buckets
/// (k8s.io/component-base v0.37.1 metrics/prometheus/restclient/metrics.go).
pub const REST_CLIENT_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestDurationLabels {
    verb: String,
    host: String,
}

/// The API request families.
#[derive(Debug, Clone)]
pub(super) struct RestClientMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: HistogramFamily<RequestDurationLabels>,
}

impl RestClientMetrics {
    /// Registers the families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        let m = RestClientMetrics {
            requests: Family::default(),
            duration: histogram_family(REST_CLIENT_DURATION_BUCKETS),
        };
        r.register(
            "rest_client_requests",
            "Number of HTTP requests to the Kubernetes API server, partitioned by status code, method, and host",
            m.requests.clone(),
        );
        r.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds until the response headers arrive, broken down by verb and host",
            m.duration.clone(),
        );
        m
    }
}

impl Metrics {
    /// A tower layer for kube's `ClientBuilder` that feeds `rest_client_requests_total` and
    /// `rest_client_request_duration_seconds`. `host` labels requests whose URI has no
    /// authority (kube sets the base URI below user layers); pass the cluster URL's host.
    pub fn rest_client_layer(&self, host: impl Into<String>) -> RestClientMetricsLayer {
        RestClientMetricsLayer {
            metrics: self.clone(),
            host: Arc::from(host.into()),
        }
    }

    pub(super) fn observe_request(
        &self,
        method: &str,
        code: &str,
        verb: &str,
        host: &str,
        elapsed: Duration,
    ) {
        self.rest_client
            .requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
                host: host.to_owned(),
            })
            .inc();
        self.rest_client
            .duration
            .get_or_create(&RequestDurationLabels {
                verb: verb.to_owned(),
                host: host.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    // ---- vapcheck ----
}

/// The path suffix of the one collection vapcheck watches.
const WATCHED_RESOURCE_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// Tower layer counting and timing Kubernetes API requests; see
/// [`Metrics::rest_client_layer`]. Use it as
/// `kube::client::ClientBuilder::try_from(config)?.with_layer(&layer).build()`.
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    metrics: Metrics,
    host: Arc<str>,
}

impl<S> tower::Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetricsService {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service made by [`RestClientMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RestClientMetricsService<S> {
    inner: S,
    metrics: Metrics,
    host: Arc<str>,
}

impl<S, B, R> tower::Service<http::Request<B>> for RestClientMetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RestClientMetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // kube-client tags each request with its verb as a `&'static str` extension
        // ("list", "watch", "patch_status", ...); raw requests have none.
        let method = req.method().as_str().to_owned();
        let verb = req
            .extensions()
            .get::<&'static str>()
            .map(|v| (*v).to_owned())
            .unwrap_or_else(|| method.to_ascii_lowercase());
        let host = req
            .uri()
            .authority()
            .map(|a| a.host().to_owned())
            .unwrap_or_else(|| self.host.to_string());
        let watches_policies = verb == "watch" && req.uri().path().ends_with(WATCHED_RESOURCE_PATH);
        RestClientMetricsFuture {
            watches_policies,
            path: req.uri().path().to_owned(),
            inner: Box::pin(self.inner.call(req)),
            metrics: self.metrics.clone(),
            started: Instant::now(),
            method,
            verb,
            host,
        }
    }
}

/// A request (other than a watch) answered after this long is logged.
pub const SLOW_REQUEST: Duration = Duration::from_secs(3);

/// The response future of [`RestClientMetricsService`].
pub struct RestClientMetricsFuture<F> {
    watches_policies: bool,
    /// The request's path, named in the log when the answer was slow.
    path: String,
    inner: std::pin::Pin<Box<F>>,
    metrics: Metrics,
    started: Instant,
    method: String,
    verb: String,
    host: String,
}

impl<F> std::fmt::Debug for RestClientMetricsFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClientMetricsFuture")
            .field("verb", &self.verb)
            .finish()
    }
}

impl<F, R, E> std::future::Future for RestClientMetricsFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = match self.inner.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        // client-go labels transport failures with code "<error>".
        let code = match &result {
            Ok(resp) => resp.status().as_str().to_owned(),
            Err(_) => "<error>".to_owned(),
        };
        let this = &*self;
        // A watch of policies that the server accepted: the watch works again (kube's
        // watcher emits no event when it merely re-establishes a watch).
        if this.watches_policies && matches!(&result, Ok(resp) if resp.status().is_success()) {
            this.metrics.watch.status.succeeded();
        }
        let elapsed = this.started.elapsed();
        this.metrics
            .observe_request(&this.method, &code, &this.verb, &this.host, elapsed);
        // A watch's response is its whole stream; every other request should answer quickly.
        if elapsed >= SLOW_REQUEST && this.verb != "watch" {
            tracing::warn!(
                verb = %this.verb,
                path = %this.path,
                code = %code,
                duration_ms = elapsed.as_millis() as u64,
                "the API server answered slowly"
            );
        }
        Poll::Ready(result)
    }
}
