//! Cluster tests against the real kube-apiserver with the upstream ValidatingAdmissionPolicy
//! status controller (kube-controller-manager) running: they prove that the harness and the
//! reference work. The same expectations later hold for vapcheck.

use crate::support;

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::admissionregistration::v1::ExpressionWarning;
use support::{apply_yaml, shared_cluster, wait_for, wait_for_type_checking};

/// How long the upstream controller may take to write a status (it usually takes well under a
/// second once it runs; start-up of its informers is included here for the first policy).
const STATUS_DEADLINE: Duration = Duration::from_secs(90);

fn sample(name: &str) -> anyhow::Result<String> {
    let path = support::repo_root().join("config/samples").join(name);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

fn warnings_of(
    status: &k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyStatus,
) -> Vec<ExpressionWarning> {
    status
        .type_checking
        .as_ref()
        .and_then(|tc| tc.expression_warnings.clone())
        .unwrap_or_default()
}

async fn upstream_controller_reports_the_documentation_example() -> anyhow::Result<()> {
    let client = shared_cluster()?.client().await?;
    apply_yaml(&client, &sample("replica-typo.yaml")?).await?;

    let status = wait_for_type_checking(
        &client,
        "deploy-replica-policy.example.com",
        STATUS_DEADLINE,
    )
    .await?;
    let warnings = warnings_of(&status);
    let first = warnings.first().context("no expression warning at all")?;
    assert_eq!(first.field_ref, "spec.validations[0].expression");
    assert!(
        first.warning.starts_with(
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'"
        ),
        "unexpected warning: {:?}",
        first.warning
    );
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    Ok(())
}

async fn upstream_controller_finds_nothing_in_a_correct_policy() -> anyhow::Result<()> {
    let client = shared_cluster()?.client().await?;
    apply_yaml(&client, &sample("require-owner-label.yaml")?).await?;

    let status =
        wait_for_type_checking(&client, "require-owner-label.example.com", STATUS_DEADLINE).await?;
    assert_eq!(warnings_of(&status), Vec::new());
    Ok(())
}

async fn upstream_controller_checks_message_expressions() -> anyhow::Result<()> {
    let client = shared_cluster()?.client().await?;
    apply_yaml(&client, &sample("bad-message-expression.yaml")?).await?;

    let status =
        wait_for_type_checking(&client, "no-nodeport-services.example.com", STATUS_DEADLINE)
            .await?;
    let warnings = warnings_of(&status);
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(
        warnings[0].field_ref,
        "spec.validations[0].messageExpression"
    );
    assert!(
        warnings[0]
            .warning
            .starts_with("/v1, Kind=Service: ERROR: <input>:1:"),
        "unexpected warning: {:?}",
        warnings[0].warning
    );
    assert!(
        warnings[0].warning.contains("undefined field 'port'"),
        "unexpected warning: {:?}",
        warnings[0].warning
    );
    Ok(())
}

async fn crd_schema_is_published_under_openapi_v3() -> anyhow::Result<()> {
    let client = shared_cluster()?.client().await?;
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.vapcheck.dev
spec:
  group: e2e.vapcheck.dev
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
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
                size:
                  type: integer
                  minimum: 1
                colour:
                  type: string
"#;
    apply_yaml(&client, crd).await?;

    // The CRD's OpenAPI is published asynchronously after it is established.
    let path = "apis/e2e.vapcheck.dev/v1";
    let url = wait_for(
        &format!("{path} in /openapi/v3"),
        Duration::from_secs(60),
        || async {
            let index: serde_json::Value = client
                .request(http::Request::get("/openapi/v3").body(Vec::new())?)
                .await?;
            Ok(index["paths"][path]["serverRelativeURL"]
                .as_str()
                .map(str::to_owned))
        },
    )
    .await?;

    let document: serde_json::Value = client
        .request(http::Request::get(url.as_str()).body(Vec::new())?)
        .await?;
    let schema = &document["components"]["schemas"]["dev.vapcheck.e2e.v1.Widget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["type"], "integer",
        "schema of Widget: {schema:#}"
    );
    assert_eq!(
        schema["properties"]["spec"]["properties"]["colour"]["type"],
        "string"
    );

    // And a custom resource can be applied through discovery.
    let widget =
        "apiVersion: e2e.vapcheck.dev/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 2\n";
    let stored = wait_for("Widget to be served", Duration::from_secs(30), || async {
        apply_yaml(&client, widget).await.map(Some)
    })
    .await?;
    assert_eq!(stored[0].data["spec"]["size"], 2);
    Ok(())
}

/// `vapcheck check --kubeconfig` reads mapping, discovery and schemas from the live API server
/// and, in strict mode, prints exactly the warning upstream's controller writes for the same
/// policy on the same server.
async fn check_command_against_the_live_cluster_matches_upstream() -> anyhow::Result<()> {
    let cluster = shared_cluster()?;
    let client = cluster.client().await?;
    apply_yaml(&client, &sample("replica-typo.yaml")?).await?;
    let status = wait_for_type_checking(
        &client,
        "deploy-replica-policy.example.com",
        STATUS_DEADLINE,
    )
    .await?;
    let upstream = warnings_of(&status);

    let sample_path = support::repo_root().join("config/samples/replica-typo.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vapcheck"))
        .args(["check", "--mode", "strict", "-o", "json", "--kubeconfig"])
        .arg(cluster.kubeconfig())
        .arg(&sample_path)
        .env_remove("KUBECONFIG")
        .output()
        .context("run vapcheck check")?;
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let ours: Vec<ExpressionWarning> =
        serde_json::from_value(printed[0]["status"]["typeChecking"]["expressionWarnings"].clone())?;
    // Upstream's root type names carry random digits, but this warning prints none.
    assert_eq!(ours, upstream);
    Ok(())
}

// The tests of this group, for the runner (e2e/tests/runner.rs); a test function left out
// of the list is dead code, which the build rejects.
e2e_tests! {
    tokio upstream_controller_reports_the_documentation_example,
    tokio upstream_controller_finds_nothing_in_a_correct_policy,
    tokio upstream_controller_checks_message_expressions,
    tokio crd_schema_is_published_under_openapi_v3,
    tokio check_command_against_the_live_cluster_matches_upstream,
}
