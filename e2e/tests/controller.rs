//! Cluster tests of `vapcheck controller` against the real kube-apiserver (with upstream's
//! ValidatingAdmissionPolicy status controller running, as in a real cluster). vapcheck runs as
//! a child process of the built binary with the cluster's kubeconfig and short intervals.
//!
//! Most tests share one cluster and one vapcheck process; the leader failover, the
//! `conditionsOnly` and the upstream-writes-first tests start private clusters (about 5 s
//! each) so that no other vapcheck writes there.

use crate::support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::admissionregistration::v1::{
    ExpressionWarning, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyStatus,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use support::{Cluster, UpOptions, Vapcheck, apply_yaml, shared_cluster, wait_for};

/// How long vapcheck may take to write a status (first start included).
const DEADLINE: Duration = Duration::from_secs(60);

/// Upstream's warning for the documentation example, byte for byte (kube-controller-manager
/// 1.37.1; `upstream_text_in_conditions_only_mode` checks it against the real one).
const REPLICAS_WARNING: &str = "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^";

static SHARED_VAPCHECK: Mutex<Option<Vapcheck>> = Mutex::new(None);

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn stop_shared_vapcheck() {
    let taken = SHARED_VAPCHECK
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    drop(taken);
}

/// The shared cluster with one vapcheck running against it.
async fn shared() -> anyhow::Result<(&'static Cluster, Client)> {
    let cluster = shared_cluster()?;
    {
        let mut guard = SHARED_VAPCHECK.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(Vapcheck::start(
                cluster.kubeconfig(),
                "shared",
                // A full re-check every 5 s: the steady-state test then sees a dozen of them.
                &[
                    "--lease-name",
                    "vapcheck-e2e-shared",
                    "--recheck-period",
                    "5s",
                ],
            )?);
            // Registered after the cluster's hook, so it runs before the cluster is stopped.
            // SAFETY: a plain `extern "C" fn` without arguments, as atexit expects.
            if unsafe { atexit(stop_shared_vapcheck) } != 0 {
                eprintln!("e2e: atexit failed; vapcheck stops with the cluster");
            }
        }
    }
    Ok((cluster, cluster.client().await?))
}

fn warnings_of(status: &ValidatingAdmissionPolicyStatus) -> Vec<ExpressionWarning> {
    status
        .type_checking
        .as_ref()
        .and_then(|t| t.expression_warnings.clone())
        .unwrap_or_default()
}

fn condition<'a>(
    status: &'a ValidatingAdmissionPolicyStatus,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until the policy carries vapcheck's conditions for its current generation and
/// `accept` holds for it.
async fn wait_for_policy(
    client: &Client,
    name: &str,
    what: &str,
    accept: impl Fn(&ValidatingAdmissionPolicy, &ValidatingAdmissionPolicyStatus) -> bool,
) -> anyhow::Result<ValidatingAdmissionPolicy> {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    wait_for(&format!("{name}: {what}"), DEADLINE, || async {
        let policy = api.get(name).await?;
        let generation = policy.metadata.generation;
        let ok = policy.status.as_ref().is_some_and(|s| {
            condition(s, "ExpressionsValid").is_some_and(|c| c.observed_generation == generation)
                && condition(s, "TypeChecked").is_some_and(|c| c.observed_generation == generation)
                && accept(&policy, s)
        });
        Ok(ok.then_some(policy))
    })
    .await
}

fn managers(policy: &ValidatingAdmissionPolicy) -> Vec<String> {
    policy
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.clone())
        .collect()
}

fn replicas_policy(name: &str, expression: &str) -> String {
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  validations:
    - expression: "{expression}"
      message: "must be replicated"
      reason: Invalid
"#
    )
}

async fn documentation_example_gets_upstream_text_and_fix_clears_it() -> anyhow::Result<()> {
    let (_, client) = shared().await?;
    let name = "deploy-replica-policy.example.com";
    let sample =
        std::fs::read_to_string(support::repo_root().join("config/samples/replica-typo.yaml"))?;
    apply_yaml(&client, &sample).await?;
    let policy = wait_for_policy(&client, name, "a warning", |_, s| {
        !warnings_of(s).is_empty()
    })
    .await?;
    let status = policy.status.clone().unwrap_or_default();
    let warnings = warnings_of(&status);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0].field_ref, "spec.validations[0].expression");
    assert_eq!(warnings[0].warning.trim_end(), REPLICAS_WARNING);
    let valid = condition(&status, "ExpressionsValid").context("no ExpressionsValid")?;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "ExpressionWarnings")
    );
    let checked = condition(&status, "TypeChecked").context("no TypeChecked")?;
    assert_eq!(checked.status, "True");
    assert!(managers(&policy).contains(&"vapcheck".to_owned()));

    apply_yaml(
        &client,
        &sample.replace("object.replicas > 1", "object.spec.replicas > 1"),
    )
    .await?;
    let fixed = wait_for_policy(
        &client,
        name,
        "no warnings and ExpressionsValid=True",
        |_, s| {
            warnings_of(s).is_empty()
                && condition(s, "ExpressionsValid").is_some_and(|c| c.status == "True")
        },
    )
    .await?;
    let status = fixed.status.unwrap_or_default();
    assert_eq!(status.observed_generation, fixed.metadata.generation);
    assert!(status.type_checking.is_some());
    Ok(())
}

fn widget_crd(field: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.vapcheck.dev
spec:
  group: e2e.vapcheck.dev
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                {field}: {{type: integer}}
"#
    )
}

const WIDGET_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: widget-size.e2e.vapcheck.dev
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["e2e.vapcheck.dev"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["widgets"]
  validations:
    - expression: "object.spec.size < 10"
"#;

async fn crd_change_rechecks_the_policy_without_touching_it() -> anyhow::Result<()> {
    let (_, client) = shared().await?;
    let name = "widget-size.e2e.vapcheck.dev";
    apply_yaml(&client, &widget_crd("size")).await?;
    // Let the CRD's schema reach /openapi/v3 before the policy exists, so the first check
    // already sees it (the later changes are what the test is about).
    tokio::time::sleep(Duration::from_secs(2)).await;
    apply_yaml(&client, WIDGET_POLICY).await?;
    let clean = wait_for_policy(
        &client,
        name,
        "checked against Widget, no warnings",
        |_, s| {
            warnings_of(s).is_empty()
                && condition(s, "ExpressionsValid").is_some_and(|c| c.status == "True")
                && condition(s, "TypeChecked").is_some_and(|c| c.message.contains("Kind=Widget"))
        },
    )
    .await?;
    let generation = clean.metadata.generation;

    apply_yaml(&client, &widget_crd("count")).await?;
    let broken = wait_for_policy(&client, name, "a warning about 'size'", |_, s| {
        warnings_of(s)
            .iter()
            .any(|w| w.warning.contains("undefined field 'size'"))
    })
    .await?;
    assert_eq!(
        broken.metadata.generation, generation,
        "the policy was touched"
    );
    let status = broken.status.unwrap_or_default();
    assert_eq!(
        condition(&status, "ExpressionsValid").map(|c| c.status.as_str()),
        Some("False")
    );

    apply_yaml(&client, &widget_crd("size")).await?;
    let restored = wait_for_policy(&client, name, "the warning cleared", |_, s| {
        warnings_of(s).is_empty()
            && condition(s, "ExpressionsValid").is_some_and(|c| c.status == "True")
    })
    .await?;
    assert_eq!(restored.metadata.generation, generation);
    Ok(())
}

async fn resource_version(
    api: &Api<ValidatingAdmissionPolicy>,
    name: &str,
) -> anyhow::Result<String> {
    api.get(name)
        .await?
        .metadata
        .resource_version
        .context("no resourceVersion")
}

/// The `resourceVersion` of each policy of `names`.
async fn resource_versions(
    api: &Api<ValidatingAdmissionPolicy>,
    names: &[&str],
) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for name in names {
        out.push(resource_version(api, name).await?);
    }
    Ok(out)
}

/// Asserts that no policy of `names` was written since `before` (their resource versions).
async fn assert_unchanged(
    api: &Api<ValidatingAdmissionPolicy>,
    names: &[&str],
    before: &[String],
    when: &str,
) -> anyhow::Result<()> {
    for (name, rv) in names.iter().zip(before) {
        assert_eq!(
            &resource_version(api, name).await?,
            rv,
            "{name} was written {when}"
        );
    }
    Ok(())
}

async fn steady_state_and_restart_cause_no_writes_with_upstream_running() -> anyhow::Result<()> {
    let (cluster, client) = shared().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let names = [
        "steady-warn.e2e.vapcheck.dev",
        "steady-clean.e2e.vapcheck.dev",
        "steady-wildcard.e2e.vapcheck.dev",
    ];
    apply_yaml(&client, &replicas_policy(names[0], "object.replicas > 1")).await?;
    apply_yaml(
        &client,
        &replicas_policy(names[1], "object.spec.replicas > 1"),
    )
    .await?;
    // Upstream skips wildcard rules (no warnings); vapcheck expands them and warns, so here the
    // two controllers disagree and the status must converge to vapcheck's.
    apply_yaml(
        &client,
        &replicas_policy(names[2], "object.replicas > 1")
            .replace("resources: [\"deployments\"]", "resources: [\"*\"]"),
    )
    .await?;
    // Converged: vapcheck's conditions are there. Upstream writes once per generation, and
    // only while `status.observedGeneration` is behind: when vapcheck wrote first, upstream
    // skips the policy (a race either way), so its manager may or may not appear. Both
    // outcomes must end quiet; the wildcard policy shows the convergence when upstream did
    // write (checked below).
    for name in names {
        wait_for_policy(&client, name, "written by vapcheck", |p, _| {
            managers(p).contains(&"vapcheck".to_owned())
        })
        .await?;
    }
    // Time for upstream's single write per generation, and vapcheck's answer to it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = resource_versions(&api, &names).await?;
    // A quiet minute (issue 7's acceptance), with schema polls every second and full
    // re-checks every 5 s going on.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_unchanged(&api, &names, &before, "in steady state").await?;
    for name in names {
        let status = api.get(name).await?.status.unwrap_or_default();
        assert!(
            condition(&status, "ExpressionsValid").is_some(),
            "{name}: {status:?}"
        );
    }
    let warned = api.get(names[0]).await?.status.unwrap_or_default();
    assert_eq!(warnings_of(&warned).len(), 1);
    let wildcard = api.get(names[2]).await?.status.unwrap_or_default();
    let text = warnings_of(&wildcard)
        .first()
        .map(|w| w.warning.clone())
        .unwrap_or_default();
    assert!(
        text.contains("apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'"),
        "vapcheck's warnings did not stay: {wildcard:?}"
    );

    // A second vapcheck (no leader election: it may write) that starts now checks both
    // policies and finds nothing to write.
    let second = Vapcheck::start(
        cluster.kubeconfig(),
        "restart",
        &["--leader-election", "false"],
    )?;
    wait_for(
        "the second vapcheck to check both policies",
        DEADLINE,
        || async {
            let log = second.log_text();
            Ok(names
                .iter()
                .all(|n| {
                    log.lines().any(|l| {
                        l.contains(&format!("policy={n}")) && l.contains("outcome=\"unchanged\"")
                    })
                })
                .then_some(()))
        },
    )
    .await?;
    assert_unchanged(&api, &names, &before, "on restart").await?;
    let log = second.log_text();
    for name in names {
        let wrote = log
            .lines()
            .any(|l| l.contains(&format!("policy={name}")) && l.contains("outcome=\"written\""));
        assert!(!wrote, "the restarted vapcheck wrote {name}:\n{log}");
    }
    Ok(())
}

async fn lease_holder(client: &Client, name: &str) -> anyhow::Result<Option<String>> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity))
}

async fn standby_takes_over_when_the_leader_dies() -> anyhow::Result<()> {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: false,
            ..UpOptions::default()
        })
    })
    .await??;
    let client = cluster.client().await?;
    let lease = "vapcheck-e2e-ha";
    let args = ["--lease-name", lease];
    let mut a = Vapcheck::start(cluster.kubeconfig(), "ha-a", &args)?;
    let a_id = format!("-{}", a.pid());
    wait_for("replica a to lead", DEADLINE, || async {
        Ok(lease_holder(&client, lease)
            .await?
            .filter(|h| h.ends_with(&a_id))
            .map(|_| ()))
    })
    .await?;
    let b = Vapcheck::start(cluster.kubeconfig(), "ha-b", &args)?;
    let b_id = format!("-{}", b.pid());
    apply_yaml(
        &client,
        &replicas_policy("ha-one.e2e.vapcheck.dev", "object.replicas > 1"),
    )
    .await?;
    wait_for_policy(
        &client,
        "ha-one.e2e.vapcheck.dev",
        "a status from the leader",
        |_, s| !warnings_of(s).is_empty(),
    )
    .await?;
    // b is a standby and writes nothing.
    assert!(
        !b.log_text().contains("outcome=\"written\""),
        "{}",
        b.log_text()
    );

    a.signal(libc::SIGKILL);
    a.stop();
    let killed = Instant::now();
    apply_yaml(
        &client,
        &replicas_policy("ha-two.e2e.vapcheck.dev", "object.replicas > 1"),
    )
    .await?;
    wait_for_policy(
        &client,
        "ha-two.e2e.vapcheck.dev",
        "a status from the new leader",
        |_, s| !warnings_of(s).is_empty(),
    )
    .await?;
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(4 + 10),
        "took {took:?} (lease duration 4s)"
    );
    let holder = lease_holder(&client, lease).await?.unwrap_or_default();
    assert!(holder.ends_with(&b_id), "holder {holder}, b {b_id}");
    // What the new leader wrote (and kept of the old leader's) equals a fresh check.
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let both = vec![
        api.get("ha-one.e2e.vapcheck.dev").await?,
        api.get("ha-two.e2e.vapcheck.dev").await?,
    ];
    support::assert_equal_to_fresh_check(cluster.kubeconfig(), &both)?;

    // Someone else takes the lease: b must stop writing at once. (kube-lease-manager's
    // renewal patches `renewTime` and `leaseDurationSeconds` without a precondition, so the
    // thief writes its claim again after b noticed the loss.)
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let steal = || async {
        let now = k8s_openapi::jiff::Timestamp::now();
        let stolen = k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some("thief".to_owned()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        };
        leases
            .patch(
                lease,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "spec": stolen })),
            )
            .await
    };
    steal().await?;
    wait_for("b to notice that it lost the lease", DEADLINE, || async {
        Ok(b.log_text().contains("lost the lease").then_some(()))
    })
    .await?;
    steal().await?;
    let three = "ha-three.e2e.vapcheck.dev";
    apply_yaml(&client, &replicas_policy(three, "object.replicas > 1")).await?;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let status = api.get(three).await?.status;
    assert!(
        status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_none(),
        "written without the lease: {status:?}"
    );
    assert_eq!(
        lease_holder(&client, lease).await?.as_deref(),
        Some("thief")
    );
    drop(b);
    Ok(())
}

/// kube-controller-manager's status controller writes first, every time: the policies are
/// created and upstream's status is waited for before vapcheck starts (in the shared test the
/// order is a race). vapcheck must then take `typeChecking` over where it differs (a wildcard
/// rule upstream skips), write the same text where upstream already has it, log that another
/// manager wrote, keep its result through a new generation with both controllers running, and
/// end quiet.
async fn upstream_writes_first_then_vapcheck_takes_over_and_stays_quiet() -> anyhow::Result<()> {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: true,
            ..UpOptions::default()
        })
    })
    .await??;
    let client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    // kube-controller-manager's field manager for this status (k8s.io/kubernetes
    // pkg/controller/validatingadmissionpolicystatus, `ControllerName`).
    let upstream = "validatingadmissionpolicy-status".to_owned();
    let names = [
        "first-warn.e2e.vapcheck.dev",
        "first-clean.e2e.vapcheck.dev",
        "first-wildcard.e2e.vapcheck.dev",
    ];
    let wildcard = |expression: &str| {
        replicas_policy(names[2], expression)
            .replace("resources: [\"deployments\"]", "resources: [\"*\"]")
    };
    apply_yaml(&client, &replicas_policy(names[0], "object.replicas > 1")).await?;
    apply_yaml(
        &client,
        &replicas_policy(names[1], "object.spec.replicas > 1"),
    )
    .await?;
    apply_yaml(&client, &wildcard("object.replicas > 1")).await?;

    let mut upstream_status = Vec::new();
    for name in names {
        let status = wait_for(&format!("{name}: upstream's status"), DEADLINE, || async {
            let p = api.get(name).await?;
            let written = managers(&p).contains(&upstream);
            Ok(p.status
                .filter(|s| written && s.observed_generation == p.metadata.generation))
        })
        .await?;
        assert!(
            !managers(&api.get(name).await?).contains(&"vapcheck".to_owned()),
            "{name}: vapcheck is not running yet"
        );
        upstream_status.push(status);
    }
    assert_eq!(
        warnings_of(&upstream_status[0])
            .first()
            .map(|w| w.warning.trim_end().to_owned()),
        Some(REPLICAS_WARNING.to_owned())
    );
    assert!(warnings_of(&upstream_status[1]).is_empty());
    // Upstream skips wildcard rules: no warning where vapcheck has one.
    assert!(warnings_of(&upstream_status[2]).is_empty());

    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "after-upstream",
        &["--leader-election", "false"],
    )?;
    let mut ours = Vec::new();
    for name in names {
        ours.push(
            wait_for_policy(
                &client,
                name,
                "vapcheck's status after upstream's",
                |p, _| managers(p).contains(&"vapcheck".to_owned()),
            )
            .await?,
        );
    }
    let status = |p: &ValidatingAdmissionPolicy| p.status.clone().unwrap_or_default();
    // The same text where upstream has it, vapcheck's where upstream skipped the kind.
    assert_eq!(
        warnings_of(&status(&ours[0])),
        warnings_of(&upstream_status[0])
    );
    assert!(warnings_of(&status(&ours[1])).is_empty());
    let text = warnings_of(&status(&ours[2]))
        .first()
        .map(|w| w.warning.clone())
        .unwrap_or_default();
    assert!(
        text.contains("apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'"),
        "{text}"
    );
    let log = vapcheck.log_text();
    assert!(
        log.contains("typeChecking was written by another manager")
            && log.contains("manager=validatingadmissionpolicy-status"),
        "{log}"
    );

    // A new generation with both controllers running ends with vapcheck's result.
    apply_yaml(&client, &wildcard("object.replicaz > 1")).await?;
    wait_for_policy(
        &client,
        names[2],
        "vapcheck's result for generation 2",
        |p, s| {
            p.metadata.generation == Some(2)
                && warnings_of(s)
                    .iter()
                    .any(|w| w.warning.contains("undefined field 'replicaz'"))
        },
    )
    .await?;
    // Time for upstream's one write of the new generation and vapcheck's answer; then quiet.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = resource_versions(&api, &names).await?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_unchanged(&api, &names, &before, "in steady state").await?;
    let last = api.get(names[2]).await?.status.unwrap_or_default();
    assert!(
        warnings_of(&last)
            .iter()
            .any(|w| w.warning.contains("undefined field 'replicaz'")),
        "{last:?}"
    );
    // Every final status equals a fresh check of the same policy.
    let mut finals = Vec::new();
    for name in names {
        finals.push(api.get(name).await?);
    }
    support::assert_equal_to_fresh_check(cluster.kubeconfig(), &finals)?;
    if vapcheck.log_text().contains("ERROR") {
        bail!("vapcheck logged errors:\n{}", vapcheck.log_text());
    }
    Ok(())
}

async fn upstream_text_in_conditions_only_mode() -> anyhow::Result<()> {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: true,
            ..UpOptions::default()
        })
    })
    .await??;
    let client = cluster.client().await?;
    let vapcheck = Vapcheck::start(
        cluster.kubeconfig(),
        "conditions-only",
        &[
            "--status-mode",
            "conditionsOnly",
            "--leader-election",
            "false",
        ],
    )?;
    let name = "conditions-only.e2e.vapcheck.dev";
    apply_yaml(&client, &replicas_policy(name, "object.replicas > 1")).await?;
    let policy = wait_for_policy(
        &client,
        name,
        "upstream's typeChecking and our conditions",
        |p, s| s.observed_generation == p.metadata.generation && !warnings_of(s).is_empty(),
    )
    .await?;
    let status = policy.status.clone().unwrap_or_default();
    // typeChecking is upstream's own: the same text vapcheck writes in full mode.
    assert_eq!(warnings_of(&status)[0].warning.trim_end(), REPLICAS_WARNING);
    let ours = policy
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|f| f.manager.as_deref() == Some("vapcheck"))
        .context("no vapcheck managedFields entry")?;
    let fields = ours
        .fields_v1
        .as_ref()
        .map(|f| f.0.clone())
        .unwrap_or_default();
    assert!(
        fields.pointer("/f:status/f:conditions").is_some(),
        "{fields}"
    );
    assert!(
        fields.pointer("/f:status/f:typeChecking").is_none(),
        "{fields}"
    );
    assert!(
        fields.pointer("/f:status/f:observedGeneration").is_none(),
        "{fields}"
    );
    if vapcheck.log_text().contains("ERROR") {
        bail!("vapcheck logged errors:\n{}", vapcheck.log_text());
    }
    Ok(())
}

/// `GET path` on a plain HTTP address, the body as text.
/// The metrics address the shared vapcheck logged.
fn shared_metrics_addr() -> anyhow::Result<String> {
    let guard = SHARED_VAPCHECK.lock().unwrap_or_else(|p| p.into_inner());
    support::metrics_addr(
        guard
            .as_ref()
            .context("the shared vapcheck is not running")?,
    )
}

async fn bad_policies_get_conditions_and_do_not_block_others() -> anyhow::Result<()> {
    let (_, client) = shared().await?;
    let unknown = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad-unknown-kind.e2e.vapcheck.dev
spec:
  paramKind: {apiVersion: nope.example.com/v1, kind: Missing}
  matchConstraints:
    resourceRules:
      - apiGroups: ["nope.example.com"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["foos"]
  validations:
    - expression: "object.spec.size < params.max"
"#;
    let many: String = (0..300)
        .map(|i| {
            format!(
                "    - expression: \"object.spec.replicas > {i} || object.spec.replicaz > {i}\"\n"
            )
        })
        .collect();
    let huge = format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bad-many-validations.e2e.vapcheck.dev
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["deployments"]
  validations:
{many}"#
    );
    let good = replicas_policy(
        "bad-neighbour-good.e2e.vapcheck.dev",
        "object.spec.replicas > 1",
    );
    apply_yaml(&client, unknown).await?;
    apply_yaml(&client, &huge).await?;
    apply_yaml(&client, &good).await?;
    let unknown = wait_for_policy(
        &client,
        "bad-unknown-kind.e2e.vapcheck.dev",
        "conditions",
        |_, _| true,
    )
    .await?;
    let status = unknown.status.unwrap_or_default();
    let checked = condition(&status, "TypeChecked").context("no TypeChecked")?;
    assert!(!checked.message.is_empty(), "{checked:?}");
    let huge = wait_for_policy(
        &client,
        "bad-many-validations.e2e.vapcheck.dev",
        "300 warnings",
        |_, s| warnings_of(s).len() == 300,
    )
    .await?;
    let status = huge.status.unwrap_or_default();
    let valid = condition(&status, "ExpressionsValid").context("no ExpressionsValid")?;
    assert_eq!(valid.status, "False");
    assert!(valid.message.len() <= 1024, "{}", valid.message.len());
    wait_for_policy(
        &client,
        "bad-neighbour-good.e2e.vapcheck.dev",
        "clean",
        |_, s| condition(s, "ExpressionsValid").is_some_and(|c| c.status == "True"),
    )
    .await?;

    // The per-policy warnings gauge exists while the policy does, and goes with it.
    let addr = shared_metrics_addr()?;
    let series = "vapcheck_policy_expression_warnings{kind=\"ValidatingAdmissionPolicy\",policy=\"bad-many-validations.e2e.vapcheck.dev\"} 300";
    assert!(support::http_get(&addr, "/metrics")?.contains(series));
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    api.delete("bad-many-validations.e2e.vapcheck.dev", &Default::default())
        .await?;
    wait_for(
        "the deleted policy's metrics series to go",
        DEADLINE,
        || async {
            Ok(
                (!support::http_get(&addr, "/metrics")?.contains("bad-many-validations"))
                    .then_some(()),
            )
        },
    )
    .await?;
    Ok(())
}

/// A status write racing a deletion: the API server does not answer an apply to a deleted
/// policy's status with 404 (an apply would create what is missing; the status body has no
/// name), and vapcheck's write must still end as "the policy is gone", not as an error.
async fn a_status_write_to_a_deleted_policy_ends_as_gone() -> anyhow::Result<()> {
    let cluster = tokio::task::spawn_blocking(|| {
        Cluster::start(UpOptions {
            with_upstream_controller: false,
            ..UpOptions::default()
        })
    })
    .await??;
    let client = cluster.client().await?;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let status = ValidatingAdmissionPolicyStatus {
        observed_generation: Some(1),
        ..Default::default()
    };

    let name = "deleted.e2e.vapcheck.dev";
    apply_yaml(&client, &replicas_policy(name, "object.spec.replicas > 1")).await?;
    api.delete(name, &Default::default()).await?;
    wait_for("the policy to be gone", DEADLINE, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await?;
    // The premise, from the real API server: 400, not 404.
    let raw = api
        .patch_status(
            name,
            &PatchParams::apply("vapcheck").force(),
            &Patch::Apply(vapcheck::controller::status::apply_body(&status)),
        )
        .await;
    match raw {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{s:?}");
            assert!(s.message.contains("name must be provided"), "{s:?}");
        }
        other => bail!("an apply to a deleted policy's status answered {other:?}"),
    }
    assert!(
        vapcheck::controller::apply_status(&api, name, &status)
            .await?
            .is_none(),
        "the write did not report the policy gone"
    );
    // No policy was created by either write.
    assert!(api.get_opt(name).await?.is_none());

    // An existing policy's status is written and returned.
    let kept = "kept.e2e.vapcheck.dev";
    apply_yaml(&client, &replicas_policy(kept, "object.spec.replicas > 1")).await?;
    let stored = vapcheck::controller::apply_status(&api, kept, &status)
        .await?
        .context("the existing policy was reported gone")?;
    assert_eq!(stored.status.and_then(|s| s.observed_generation), Some(1));
    Ok(())
}

/// The `vapcheck.io/ignore` annotation (issue 34, item 2): a suppressed warning leaves
/// upstream's `typeChecking` text as it is, but `ExpressionsValid` is `True`
/// (`FindingsSuppressed`), no Warning Event is recorded and the per-policy gauge counts 0.
/// Taking the annotation away brings all three back; an annotation that does not parse is a
/// Warning Event naming the bad entry and suppresses nothing.
async fn the_ignore_annotation_suppresses_conditions_events_and_gauges_not_the_status_text()
-> anyhow::Result<()> {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::ListParams;
    let (_, client) = shared().await?;
    let name = "suppressed.e2e.vapcheck.dev";
    let plain = replicas_policy(name, "object.replicas > 1");
    let annotated = |value: &str| {
        plain.replace(
            &format!("  name: {name}\n"),
            &format!(
                "  name: {name}\n  annotations:\n    vapcheck.io/ignore: \"{value}\"\n    vapcheck.io/ignore-reason: replicas are set by the autoscaler\n"
            ),
        )
    };
    let events: Api<Event> = Api::all(client.clone());
    let warning_events = |reason: &'static str| {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default().fields(&format!("regarding.name={name}")))
                .await?;
            anyhow::Ok(
                list.items
                    .into_iter()
                    .filter(|e| {
                        e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning")
                    })
                    .collect::<Vec<_>>(),
            )
        }
    };
    let gauge = |n: usize| {
        format!(
            "vapcheck_policy_expression_warnings{{kind=\"ValidatingAdmissionPolicy\",policy=\"{name}\"}} {n}\n"
        )
    };

    // 1. Suppressed: the status text is upstream's, the condition True, the gauge 0.
    apply_yaml(&client, &annotated("VAP100@spec.validations[0]")).await?;
    let policy = wait_for_policy(&client, name, "FindingsSuppressed", |_, s| {
        condition(s, "ExpressionsValid").is_some_and(|c| c.reason == "FindingsSuppressed")
    })
    .await?;
    // Logged once vapcheck serves; it has, since it wrote the status.
    let addr = shared_metrics_addr()?;
    let status = policy.status.clone().unwrap_or_default();
    let warnings = warnings_of(&status);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0].warning.trim_end(), REPLICAS_WARNING);
    let valid = condition(&status, "ExpressionsValid").context("no ExpressionsValid")?;
    assert_eq!(valid.status, "True");
    assert_eq!(
        valid.message,
        "findings suppressed by vapcheck.io/ignore: VAP100 spec.validations[0].expression"
    );
    wait_for("the gauge at 0", DEADLINE, || async {
        Ok(support::http_get(&addr, "/metrics")?
            .contains(&gauge(0))
            .then_some(()))
    })
    .await?;
    // An Event would follow the status write within milliseconds.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(warning_events("ExpressionWarnings").await?.len(), 0);

    // 2. Without the annotation: the finding counts again.
    apply_yaml(&client, &plain).await?;
    let fails = wait_for("one ExpressionWarnings Event", DEADLINE, || async {
        let found = warning_events("ExpressionWarnings").await?;
        Ok((!found.is_empty()).then_some(found))
    })
    .await?;
    assert_eq!(fails.len(), 1, "{fails:#?}");
    let policy = wait_for_policy(&client, name, "no annotation", |p, _| {
        p.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("vapcheck.io/ignore"))
    })
    .await?;
    let status = policy.status.unwrap_or_default();
    assert_eq!(warnings_of(&status)[0].warning.trim_end(), REPLICAS_WARNING);
    let valid = condition(&status, "ExpressionsValid").context("no ExpressionsValid")?;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "ExpressionWarnings")
    );
    wait_for("the gauge at 1", DEADLINE, || async {
        Ok(support::http_get(&addr, "/metrics")?
            .contains(&gauge(1))
            .then_some(()))
    })
    .await?;
    // 3. An annotation that does not parse: a Warning Event naming the entry, nothing
    //    suppressed.
    apply_yaml(&client, &annotated("VAP100, VAP10")).await?;
    let invalid = wait_for("an InvalidSuppression Event", DEADLINE, || async {
        let found = warning_events("InvalidSuppression").await?;
        Ok((!found.is_empty()).then_some(found))
    })
    .await?;
    let note = invalid[0].note.clone().unwrap_or_default();
    assert!(
        note.starts_with(
            "metadata.annotations[vapcheck.io/ignore]: entry \"VAP10\": unknown rule \"VAP10\""
        ) && note.ends_with("; nothing is suppressed"),
        "{note}"
    );
    let policy = wait_for_policy(&client, name, "the bad annotation", |p, _| {
        p.metadata.annotations.as_ref().is_some_and(|a| {
            a.get("vapcheck.io/ignore")
                .is_some_and(|v| v.contains("VAP10,") || v.ends_with("VAP10"))
        })
    })
    .await?;
    let status = policy.status.unwrap_or_default();
    let valid = condition(&status, "ExpressionsValid").context("no ExpressionsValid")?;
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "ExpressionWarnings")
    );

    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio documentation_example_gets_upstream_text_and_fix_clears_it,
    tokio crd_change_rechecks_the_policy_without_touching_it,
    tokio steady_state_and_restart_cause_no_writes_with_upstream_running,
    tokio standby_takes_over_when_the_leader_dies,
    tokio upstream_writes_first_then_vapcheck_takes_over_and_stays_quiet,
    tokio upstream_text_in_conditions_only_mode,
    tokio bad_policies_get_conditions_and_do_not_block_others,
    tokio a_status_write_to_a_deleted_policy_ends_as_gone,
    tokio the_ignore_annotation_suppresses_conditions_events_and_gauges_not_the_status_text,
}
