//! The inputs of a check read from the live cluster: the REST mapper and discovery snapshot
//! (aggregated discovery `/api` + `/apis`, read into [`DiscoveryRestMapper`] as client-go's
//! discovery REST mapper does), schemas ([`LiveSource`]) and the CEL checker.

use std::sync::{Arc, RwLock};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use k8s_openapi::apimachinery::pkg::version::Info;

use crate::analysis::{analyse_mutating_policy, analyse_policy};
use crate::config::{self, Config};
use crate::engine::{KubeChecker, Schemas};
use crate::k8s_env::KubeVersion;
use crate::k8s_env::apiserver::Parses;
use crate::metrics::SchemaFetchResult;
use crate::policy::status::PolicyCondition;
use crate::policy::{Backends, CheckOptions, DiscoveryRestMapper, Mode, ParsedTexts, PolicyStatus};
use crate::schema::{self, Changes, ConvertOptions, Limits, LiveSource};
use crate::sources::DiscoveryCache;

/// Live checking inputs; [`LiveInputs::refresh`] does the I/O, [`LiveInputs::check`] is pure.
pub struct LiveInputs {
    client: kube::Client,
    live: Arc<LiveSource>,
    schemas: Schemas,
    checker: KubeChecker,
    mapper: RwLock<Option<Arc<DiscoveryRestMapper>>>,
    /// Aggregated discovery as last read, by ETag (read again on every poll).
    discovery: tokio::sync::Mutex<DiscoveryCache>,
    options: CheckOptions,
    expand_wildcards: bool,
    /// The minor version of the API server whose create-time verdict `AcceptedOnCreate`
    /// reports (the target version).
    server_minor: u32,
}

/// The Kubernetes version whose CEL libraries are used: `kubernetesVersion` from the config,
/// else the API server's, clamped to the versions vapcheck knows.
pub fn target_version(config: &Config, server: &Info) -> KubeVersion {
    match config.kubernetes_version_override() {
        Some(v) => KubeVersion::clamped(v.minor),
        None => KubeVersion::of_server_minor(&server.minor),
    }
}

impl LiveInputs {
    /// Inputs for `client`; nothing is read until [`LiveInputs::refresh`].
    pub fn new(client: kube::Client, config: &Config, server: &Info) -> Result<Self, String> {
        let live = Arc::new(LiveSource::new(
            client.clone(),
            Limits::default(),
            ConvertOptions::default(),
        ));
        let target = target_version(config, server);
        let checker = KubeChecker::with_version_notes(target)?;
        let mode = match config.mode {
            config::Mode::Extended => Mode::Extended,
            config::Mode::Strict => Mode::Strict,
        };
        Ok(LiveInputs {
            client,
            schemas: Schemas::new(Arc::clone(&live) as Arc<dyn schema::SchemaSource>),
            live,
            checker,
            mapper: RwLock::new(None),
            discovery: tokio::sync::Mutex::new(DiscoveryCache::default()),
            options: CheckOptions {
                mode,
                kind_limit: usize::try_from(config.kind_limit).unwrap_or(usize::MAX),
                estimate_costs: true,
            },
            expand_wildcards: config.expand_wildcards,
            server_minor: target.minor(),
        })
    }

    /// Polls the OpenAPI index (downloading changed documents) and aggregated discovery (a
    /// `304 Not Modified` by ETag when unchanged). Returns what changed in the schemas.
    ///
    /// Discovery is read on every poll, not only when the OpenAPI index changes: kube-apiserver
    /// updates the two apart (a CRD's group leaves `/openapi/v3` and aggregated discovery at
    /// different moments), so a snapshot taken when the index changed can be stale for good
    /// (seen: the report API of a deleted CRD still looked served).
    pub async fn refresh(&self) -> Result<Changes, RefreshError> {
        let changes = self.live.poll().await.map_err(|e| RefreshError {
            result: fetch_error_result(e.source.as_ref()),
            message: e.to_string(),
        })?;
        let read = self
            .discovery
            .lock()
            .await
            .read_changed(&self.client)
            .await
            .map_err(RefreshError::other)?;
        if let Some(groups) = read {
            let mapper = Arc::new(DiscoveryRestMapper::new(groups));
            *self.mapper.write().unwrap_or_else(|p| p.into_inner()) = Some(mapper);
        }
        Ok(changes)
    }

    /// How many kinds the current schema snapshot knows.
    pub fn kind_count(&self) -> usize {
        self.live.catalog().map_or(0, |c| c.kinds().len())
    }

    /// The API groups of the current discovery snapshot (`None` before the first read).
    pub fn api_groups(&self) -> Option<Arc<Vec<crate::policy::restmapper::ApiGroupResources>>> {
        use crate::policy::Discovery as _;
        self.read_mapper()?.api_groups().ok()
    }

    fn read_mapper(&self) -> Option<Arc<DiscoveryRestMapper>> {
        self.mapper
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Checks one policy against the current snapshot, as `vapcheck check` checks each policy
    /// of its input ([`crate::analysis::analyse_policy`]; the controller knows no params of
    /// its bindings here). CPU-bound: call it from a blocking task.
    ///
    /// The `AcceptedOnCreate` verdict reuses the type check's parses of the same texts
    /// ([`crate::engine::apiserver_parses`]): parsing is the largest part of both.
    pub fn check(&self, policy: &ValidatingAdmissionPolicy) -> Result<PolicyStatus, String> {
        let mut parsed = ParsedTexts::new();
        let mut status = self.with_backends(|options, backends| {
            analyse_policy(policy, Vec::new(), options, backends, &mut parsed)
        })?;
        let parses = Arc::new(crate::engine::apiserver_parses(&parsed));
        status
            .conditions
            .push(accepted_on_create_parsed(policy, self.server_minor, parses));
        Ok(status)
    }

    /// Checks one MutatingAdmissionPolicy against the same snapshot, schemas and checker as
    /// [`LiveInputs::check`] ([`crate::analysis::analyse_mutating_policy`], as `vapcheck check`
    /// does it), with its
    /// `AcceptedOnCreate` verdict ([`mutating_accepted_on_create`]). CPU-bound.
    pub fn check_mutating(&self, policy: &MutatingAdmissionPolicy) -> Result<PolicyStatus, String> {
        let mut parsed = ParsedTexts::new();
        let mut status = self.with_backends(|options, backends| {
            analyse_mutating_policy(policy, options, backends, &mut parsed)
        })?;
        let parses = Arc::new(crate::engine::apiserver_parses(&parsed));
        status.conditions.push(mutating_accepted_on_create_parsed(
            policy,
            self.server_minor,
            parses,
        ));
        Ok(status)
    }

    /// The type check of a webhook configuration's match conditions against the same snapshot
    /// ([`crate::webhooks::match_conditions::type_check`], as `vapcheck check` does it), and
    /// the `matchPolicy: Exact` bypasses discovery shows
    /// ([`crate::webhooks::exact_match_bypass`]). CPU-bound.
    pub fn check_webhooks(
        &self,
        config: &crate::apiserver::webhook::WebhookConfiguration,
    ) -> Result<(Option<PolicyStatus>, Vec<crate::webhooks::Advice>), String> {
        let status = self.with_backends(|options, backends| {
            crate::webhooks::match_conditions::type_check(config, options, Some(backends))
        })?;
        let bypass = self
            .api_groups()
            .map(|groups| crate::webhooks::exact_match_bypass(config, &groups))
            .unwrap_or_default();
        Ok((status, bypass))
    }

    /// Runs `f` with the backends of the current snapshot.
    pub(super) fn with_backends<R>(
        &self,
        f: impl FnOnce(&CheckOptions, &Backends<'_>) -> R,
    ) -> Result<R, String> {
        let mapper = self
            .read_mapper()
            .ok_or("discovery has not been read yet")?;
        let backends = Backends {
            rest_mapper: mapper.as_ref(),
            discovery: self
                .expand_wildcards
                .then_some(mapper.as_ref() as &dyn crate::policy::Discovery),
            schemas: &self.schemas,
            checker: &self.checker,
        };
        Ok(f(&self.options, &backends))
    }

    /// Whether the API server serves `resource` in `group`/`version` (`None` before the
    /// first discovery read).
    pub fn serves(&self, group: &str, version: &str, resource: &str) -> Option<bool> {
        let groups = self.api_groups()?;
        Some(groups.iter().any(|g| {
            g.name == group
                && g.versions
                    .iter()
                    .any(|v| v.version == version && v.resources.iter().any(|r| r.name == resource))
        }))
    }
}

/// The `AcceptedOnCreate` condition of a stored policy: what the API server of `server_minor`
/// answers if the same policy were created now (it may have been stored by another version,
/// or before a library change).
pub fn accepted_on_create(
    policy: &ValidatingAdmissionPolicy,
    server_minor: u32,
) -> PolicyCondition {
    accepted_on_create_parsed(policy, server_minor, Arc::default())
}

/// [`accepted_on_create`] with the parses already made of the policy's texts.
fn accepted_on_create_parsed(
    policy: &ValidatingAdmissionPolicy,
    server_minor: u32,
    parses: Arc<Parses>,
) -> PolicyCondition {
    let server = crate::apiserver::Server {
        minor: server_minor,
    };
    let causes = crate::apiserver::validate_policy_create_parsed(policy, server, parses);
    create_condition(policy.metadata.generation, server_minor, &causes)
}

/// The condition for the causes the API server would give (none: accepted).
fn create_condition(
    generation: Option<i64>,
    server_minor: u32,
    causes: &[impl ToString],
) -> PolicyCondition {
    let causes: Vec<String> = causes.iter().map(ToString::to_string).collect();
    crate::policy::status::accepted_on_create_condition(generation, server_minor, &causes)
}

/// [`accepted_on_create`] for a stored MutatingAdmissionPolicy
/// ([`crate::apiserver::validate_mutating_policy_create`]). A MAP has no status to carry the
/// condition: it feeds `vapcheck_policy_rejected_on_create{kind="MutatingAdmissionPolicy"}`.
pub fn mutating_accepted_on_create(
    policy: &MutatingAdmissionPolicy,
    server_minor: u32,
) -> PolicyCondition {
    mutating_accepted_on_create_parsed(policy, server_minor, Arc::default())
}

/// [`mutating_accepted_on_create`] with the parses already made of the policy's texts.
fn mutating_accepted_on_create_parsed(
    policy: &MutatingAdmissionPolicy,
    server_minor: u32,
    parses: Arc<Parses>,
) -> PolicyCondition {
    let server = crate::apiserver::Server {
        minor: server_minor,
    };
    let causes = crate::apiserver::validate_mutating_policy_create_parsed(policy, server, parses);
    create_condition(policy.metadata.generation, server_minor, &causes)
}

/// A failed [`LiveInputs::refresh`]: the message and how `vapcheck_schema_fetches_total`
/// counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshError {
    /// `forbidden` or `not_found` when the API server answered 403 or 404, else `error`.
    pub result: SchemaFetchResult,
    /// What failed and why.
    pub message: String,
}

impl RefreshError {
    fn other(message: String) -> RefreshError {
        RefreshError {
            result: SchemaFetchResult::Error,
            message,
        }
    }
}

impl std::fmt::Display for RefreshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// How a failed request counts in `vapcheck_schema_fetches_total`: by the API server's status
/// code when it answered, else `error`.
fn fetch_error_result(
    error: &(dyn std::error::Error + Send + Sync + 'static),
) -> SchemaFetchResult {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) if status.code == 403 => SchemaFetchResult::Forbidden,
        Some(kube::Error::Api(status)) if status.code == 404 => SchemaFetchResult::NotFound,
        _ => SchemaFetchResult::Error,
    }
}

/// How one refresh counts in `vapcheck_schema_fetches_total`: `unchanged` when nothing
/// changed, `error` when some documents could not be downloaded (the rest were), `success`
/// otherwise, and the failure's own result when the refresh failed.
pub fn fetch_result(refreshed: &Result<Changes, RefreshError>) -> SchemaFetchResult {
    match refreshed {
        Ok(changes) if !changes.failed.is_empty() => SchemaFetchResult::Error,
        Ok(changes) if changes.is_empty() => SchemaFetchResult::Unchanged,
        Ok(_) => SchemaFetchResult::Success,
        Err(e) => e.result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_results_count_by_outcome() {
        let gv = || schema::GroupVersion::new("apps", "v1");
        assert_eq!(
            fetch_result(&Ok(Changes::default())),
            SchemaFetchResult::Unchanged
        );
        let added = Changes {
            added: vec![gv()],
            ..Changes::default()
        };
        assert_eq!(fetch_result(&Ok(added)), SchemaFetchResult::Success);
        let failed = Changes {
            added: vec![gv()],
            failed: vec![gv()],
            ..Changes::default()
        };
        assert_eq!(fetch_result(&Ok(failed)), SchemaFetchResult::Error);
        let status = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..kube::core::Status::default()
            }))
        };
        assert_eq!(
            fetch_error_result(&status(403)),
            SchemaFetchResult::Forbidden
        );
        assert_eq!(
            fetch_error_result(&status(404)),
            SchemaFetchResult::NotFound
        );
        assert_eq!(fetch_error_result(&status(500)), SchemaFetchResult::Error);
        let io = std::io::Error::other("connection refused");
        assert_eq!(fetch_error_result(&io), SchemaFetchResult::Error);
        let err = RefreshError::other("x".into());
        assert_eq!(fetch_result(&Err(err)), SchemaFetchResult::Error);
    }

    fn info(minor: &str) -> Info {
        Info {
            major: "1".into(),
            minor: minor.into(),
            ..Info::default()
        }
    }

    #[test]
    fn version_from_server_or_config_clamped() {
        let config = Config::default();
        assert_eq!(target_version(&config, &info("33+")).minor(), 33);
        assert_eq!(target_version(&config, &info("99")), KubeVersion::PINNED);
        assert_eq!(target_version(&config, &info("20")), KubeVersion::MIN);
        assert_eq!(target_version(&config, &info("")), KubeVersion::PINNED);
        let pinned = Config {
            kubernetes_version: "1.31".into(),
            ..Config::default()
        };
        assert_eq!(target_version(&pinned, &info("37")).minor(), 31);
    }

    /// A stored MAP that kube-apiserver 1.37 would refuse on create (`includes` is not in its
    /// new-expression environment) gets `AcceptedOnCreate=False` naming the expression; a
    /// correct one `True` (the e2e test compares the same MAP with the API server).
    #[test]
    fn mutating_policies_get_the_create_time_verdict() {
        let map = |expression: &str| -> MutatingAdmissionPolicy {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "m", "generation": 3},
                "spec": {
                    "reinvocationPolicy": "Never",
                    "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                        "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["deployments"]}]},
                    "mutations": [{"patchType": "ApplyConfiguration",
                                   "applyConfiguration": {"expression": expression}}]
                }
            }))
            .expect("a MAP")
        };
        let rejected =
            mutating_accepted_on_create(&map("[1, 2].includes(1) ? Object{} : Object{}"), 37);
        assert_eq!(rejected.type_, crate::policy::status::ACCEPTED_ON_CREATE);
        assert_eq!(rejected.status, "False", "{rejected:?}");
        assert!(
            rejected
                .message
                .contains("spec.mutations[0].applyConfiguration.expression"),
            "{}",
            rejected.message
        );
        let accepted =
            mutating_accepted_on_create(&map("Object{spec: Object.spec{replicas: 2}}"), 37);
        assert_eq!(accepted.status, "True", "{accepted:?}");
    }

    /// The create-time verdict made with the type check's parses
    /// ([`crate::engine::apiserver_parses`]) is the one made from scratch, for every corpus
    /// ValidatingAdmissionPolicy and MutatingAdmissionPolicy in both modes, and for texts that
    /// do not parse, variables and padded match conditions; and the type check's parses are
    /// really handed over.
    #[test]
    fn create_verdicts_with_the_checks_parses_are_the_fresh_ones() {
        use crate::cli::input::{InputObject, for_each_object, read_objects};
        // The built-in 1.37 kinds, as `vapcheck check` uses them by default.
        let built_in = crate::controller::corpus_support::BuiltIn::load("parses");
        let backends = built_in.backends();
        let texts = crate::controller::corpus_support::corpus_texts;
        let policy =
            |expression: &str, variable: &str, condition: &str| -> ValidatingAdmissionPolicy {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "p", "generation": 1},
                    "spec": {
                        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"],
                            "apiVersions": ["v1"], "operations": ["CREATE"],
                            "resources": ["deployments"]}]},
                        "variables": [{"name": "v", "expression": variable}],
                        "matchConditions": [{"name": "c", "expression": condition}],
                        "validations": [{"expression": expression}]
                    }
                }))
                .expect("a policy")
            };
        let mut vaps: Vec<ValidatingAdmissionPolicy> = vec![
            policy("object.spec.replicas >", "1", "true"),
            policy("variables.v > 1", "object.spec.(", "  true  "),
            policy(
                "variables.v.size() > 1 && [1].includes(1)",
                "object.spec.template",
                " 1 + ",
            ),
        ];
        for (source, text) in texts("corpus/policies") {
            for object in read_objects(&source, &text).expect("corpus file reads") {
                if let InputObject::Policy(p) = object {
                    vaps.push(p.policy);
                }
            }
        }
        let mut maps: Vec<MutatingAdmissionPolicy> = Vec::new();
        for (source, text) in texts("corpus/mutating") {
            for_each_object(&source, &text, |_, value| {
                // Every version read as v1 (their specs differ little); the ones that do
                // not decode as v1 are left out.
                if value.get("kind").and_then(serde_json::Value::as_str)
                    == Some("MutatingAdmissionPolicy")
                {
                    let mut v1 = value.clone();
                    v1["apiVersion"] = "admissionregistration.k8s.io/v1".into();
                    maps.extend(serde_json::from_value(v1).ok());
                }
                Ok(())
            })
            .expect("corpus file reads");
        }
        eprintln!("{} VAPs, {} MAPs", vaps.len(), maps.len());
        assert!(
            vaps.len() > 250,
            "{} ValidatingAdmissionPolicies",
            vaps.len()
        );
        assert!(maps.len() > 150, "{} MutatingAdmissionPolicies", maps.len());
        let (mut handed_over, mut rejected) = (0, 0);
        for mode in [Mode::Strict, Mode::Extended] {
            let options = CheckOptions {
                mode,
                ..CheckOptions::default()
            };
            for p in &vaps {
                let mut parsed = ParsedTexts::new();
                crate::policy::check_policy_parsed(p, &options, &backends, &mut parsed);
                let parses = Arc::new(crate::engine::apiserver_parses(&parsed));
                handed_over += parses.len();
                let shared = accepted_on_create_parsed(p, 37, parses);
                let fresh = accepted_on_create(p, 37);
                assert_eq!(shared, fresh, "{:?}", p.metadata.name);
                rejected += usize::from(fresh.status == "False");
            }
            for m in &maps {
                let mut parsed = ParsedTexts::new();
                crate::mutating::check_mutating_policy_parsed(m, &options, &backends, &mut parsed);
                let parses = Arc::new(crate::engine::apiserver_parses(&parsed));
                handed_over += parses.len();
                let shared = mutating_accepted_on_create_parsed(m, 37, parses);
                let fresh = mutating_accepted_on_create(m, 37);
                assert_eq!(shared, fresh, "{:?}", m.metadata.name);
                rejected += usize::from(fresh.status == "False");
            }
        }
        // Most corpus expressions parse: far more parses are handed over than there are
        // policies; and the cases above include refusals, which must stay refusals.
        assert!(
            handed_over > 2 * (vaps.len() + maps.len()),
            "{handed_over} parses handed over"
        );
        eprintln!("{handed_over} parses handed over, {rejected} refused");
        assert!(rejected >= 6, "{rejected} refused");
    }
}
