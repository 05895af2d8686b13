//! `vapcheck check` end to end: the library entry point with test backends, and the binary
//! for the paths that need no backend.

use crate::support::shared_dir;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use vapcheck::cli::{
    BackendProvider, CheckArgs, CheckEnvironment, LoadedBackends, ModeArg, OutputFormat,
    SchemaOptions, read_inputs, run_check,
};
use vapcheck::policy::narrowing::Pos;
use vapcheck::policy::{
    ApiGroupResources, ApiResource, ApiVersionResources, CheckEnv, DiscoveryRestMapper, EnvRequest,
    ExpressionChecker, Gvk, Issue, Issues, ObjectDecl, OutputType, ParsedExpr, SchemaError,
    SchemaLookup, SchemaSource, SchemaType, Severity,
};

/// Schemas: Deployment has `spec` only; Pod has no schema.
struct Schemas;

impl SchemaSource for Schemas {
    fn resolve(&self, gvk: &Gvk) -> Result<SchemaLookup, SchemaError> {
        if gvk.kind == "Deployment" {
            Ok(SchemaLookup::Typed(SchemaType(Arc::new(vec![
                "spec".to_owned(),
            ]))))
        } else {
            Err(SchemaError::NotFound)
        }
    }
}

/// A checker for expressions of the form `object.<field>`, `object.<field> > 1`,
/// `object.<field> != null` or `true`.
struct Checker;

struct Env(Option<Vec<String>>);

impl ExpressionChecker for Checker {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        Ok(ParsedExpr(Arc::new(expression.to_owned())))
    }
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        let fields = match request.object {
            ObjectDecl::Typed(t) => t.0.downcast_ref::<Vec<String>>().cloned(),
            ObjectDecl::Dyn => None,
        };
        Ok(Box::new(Env(fields)))
    }
}

impl CheckEnv for Env {
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, Issues> {
        let plain = |m: String| Issues::one(Issue::plain(m));
        let text = parsed
            .0
            .downcast_ref::<String>()
            .ok_or_else(|| plain("not ours".to_owned()))?;
        if text == "true" {
            return Ok(OutputType::Bool);
        }
        let (path, output) = match text
            .strip_suffix(" > 1")
            .or_else(|| text.strip_suffix(" != null"))
        {
            Some(p) => (p, OutputType::Bool),
            None => (text.as_str(), OutputType::Dyn),
        };
        let field = path
            .strip_prefix("object.")
            .ok_or_else(|| plain(format!("unsupported: {text}")))?;
        match &self.0 {
            Some(fields) if !fields.iter().any(|f| f == field) => {
                let message = format!("undefined field '{field}'");
                Err(Issues::one(Issue {
                    severity: Severity::Error,
                    pos: Some(Pos { line: 1, column: 6 }),
                    text: format!("ERROR: <input>:1:7: {message}\n | {text}\n | ......^"),
                    message,
                }))
            }
            _ => Ok(output),
        }
    }
    fn declare_variable(&mut self, _name: &str, _ty: &OutputType) {}
}

struct Provider;

impl BackendProvider for Provider {
    fn load(&self, _options: &SchemaOptions) -> Result<LoadedBackends, String> {
        let res = |name: &str, kind: &str| ApiResource {
            name: name.into(),
            singular_name: String::new(),
            kind: kind.into(),
            namespaced: true,
            ..ApiResource::default()
        };
        let groups = vec![
            ApiGroupResources {
                name: String::new(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![res("pods", "Pod")],
                }],
            },
            ApiGroupResources {
                name: "apps".into(),
                preferred_version: "v1".into(),
                versions: vec![ApiVersionResources {
                    version: "v1".into(),
                    resources: vec![res("deployments", "Deployment")],
                }],
            },
        ];
        let mapper = DiscoveryRestMapper::new(groups);
        Ok(LoadedBackends {
            rest_mapper: Box::new(mapper.clone()),
            discovery: Some(Box::new(mapper)),
            schemas: Box::new(Schemas),
            checker: Box::new(Checker),
        })
    }
}

const POLICIES: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas
  generation: 3
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps", ""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments", "pods"]
  validations:
  - expression: object.replicas > 1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ignored
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingAdmissionPolicy
metadata:
  name: clean
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  validations:
  - expression: object.spec != null
"#;

fn args(output: OutputFormat, mode: ModeArg, files: &[&str]) -> CheckArgs {
    CheckArgs {
        openapi: Some(PathBuf::from("/nonexistent-openapi")),
        crds: vec![],
        kubeconfig: None,
        context: None,
        mode: Some(mode),
        kubernetes_version: None,
        kind_limit: 100,
        no_cost_estimates: false,
        output,
        previous: vec![],
        static_manifests: None,
        config: None,
        gate: Default::default(),
        rules: Default::default(),
        files: files.iter().map(PathBuf::from).collect(),
    }
}

fn run(args: &CheckArgs, stdin: &str, provider: &dyn BackendProvider) -> (i32, String, String) {
    let mut input = Cursor::new(stdin.as_bytes().to_vec());
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = run_check(
        args,
        provider,
        CheckEnvironment {
            stdin: &mut input,
            stdout: &mut out,
            stderr: &mut err,
            stdout_is_terminal: false,
            no_color: None,
            kubeconfig_env: None,
            in_cluster: false,
        },
    );
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn json_output_from_stdin_with_warnings_exits_1() {
    let (code, out, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        POLICIES,
        &Provider,
    );
    assert_eq!((code, err.as_str()), (1, ""));
    insta::assert_snapshot!(out);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    assert_eq!(v[1]["status"]["typeChecking"], serde_json::json!({}));
}

#[test]
fn text_and_yaml_outputs() {
    let (code, out, _) = run(
        &args(OutputFormat::Text, ModeArg::Extended, &["-"]),
        POLICIES,
        &Provider,
    );
    assert_eq!(code, 1);
    insta::assert_snapshot!(out);
    let (code, out, _) = run(
        &args(OutputFormat::Yaml, ModeArg::Strict, &["-"]),
        POLICIES,
        &Provider,
    );
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_saphyr::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], "replicas");
}

#[test]
fn clean_policies_exit_0() {
    let clean = POLICIES.split("---\n").nth(2).unwrap();
    let (code, out, _) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        clean,
        &Provider,
    );
    assert_eq!(code, 0, "{out}");
}

/// A document that does not decode is a finding on it and the others are checked (exit 3);
/// only input of which nothing can be read, or without any object of a checked kind, exits 2.
#[test]
fn bad_documents_are_findings_and_unusable_inputs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, format!("{POLICIES}---\nkind: [\n")).unwrap();
    let bad = bad.to_str().unwrap();
    let (code, out, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &[bad]),
        "",
        &Provider,
    );
    assert_eq!((code, err.as_str()), (3, ""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{out}");
    assert_eq!(
        v[2],
        serde_json::json!({
            "kind": "", "name": "",
            "apiServer": {"accepted": false, "causes": ["invalid YAML: unclosed bracket '['"]},
            "decodeError": {"file": bad, "document": 4, "line": 35, "column": 7,
                "message": "invalid YAML: unclosed bracket '['"}
        })
    );

    let missing = dir.path().join("missing.yaml");
    let (code, _, err) = run(
        &args(
            OutputFormat::Json,
            ModeArg::Strict,
            &[missing.to_str().unwrap()],
        ),
        "",
        &Provider,
    );
    assert_eq!(code, 2);
    assert!(err.contains("missing.yaml: cannot read"), "{err}");

    // A missing file beside a readable one is a finding on that file.
    let (code, out, _) = run(
        &args(
            OutputFormat::Text,
            ModeArg::Strict,
            &[missing.to_str().unwrap(), "-"],
        ),
        POLICIES,
        &Provider,
    );
    assert_eq!(code, 3);
    assert!(
        out.starts_with(&format!(
            "<unnamed> [document] ({}): NOT READ\n  cannot read: No such file",
            missing.display()
        )),
        "{out}"
    );

    let (code, _, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        "apiVersion: v1\nkind: ConfigMap\n",
        &Provider,
    );
    assert_eq!(
        (code, err.as_str()),
        (
            2,
            "vapcheck: no ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingWebhookConfiguration, MutatingWebhookConfiguration, Kyverno ValidatingPolicy or NamespacedValidatingPolicy, or Gatekeeper ConstraintTemplate with K8sNativeValidation code found in the input (1 object of other kinds, read only as param objects of such policies)\n"
        )
    );

    // A Gatekeeper template of Rego only has no CEL to check: alone it is nothing `check`
    // reads (the message names the templates it does read).
    let (code, _, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata:\n  name: k8sregoonly\nspec:\n  crd:\n    spec:\n      names:\n        kind: K8sRegoOnly\n  targets:\n    - target: admission.k8s.gatekeeper.sh\n      rego: |\n        package k8sregoonly\n        violation[{\"msg\": \"no\"}] { false }\n",
        &Provider,
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.ends_with("or Gatekeeper ConstraintTemplate with K8sNativeValidation code found in the input (1 object of other kinds, read only as param objects of such policies)\n"),
        "{err}"
    );

    let (code, out, _) = run(
        &args(OutputFormat::Text, ModeArg::Strict, &["-"]),
        "- a\n- b\n",
        &Provider,
    );
    assert_eq!(code, 3);
    assert_eq!(
        out,
        "<unnamed> [document] (<stdin>: document 1): NOT DECODED\n  <stdin>:1:1: not a Kubernetes object: `apiVersion` and `kind` must be strings\n0 policies checked, 0 with warnings, 0 rejected by kube-apiserver 1.37, 1 not decoded\n"
    );
}

#[test]
fn without_a_schema_source_the_built_in_schemas_are_used_a_missing_backend_exits_2() {
    let mut a = args(OutputFormat::Json, ModeArg::Strict, &["-"]);
    a.openapi = None;
    let (code, _, err) = run(&a, POLICIES, &Provider);
    assert_ne!(code, 2, "{err}");
    assert!(!err.contains("no schema source"), "{err}");
    let (code, out, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        POLICIES,
        &vapcheck::cli::MissingBackends,
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("no schema and CEL checking backends"), "{err}");
}

#[test]
fn every_corpus_file_reads() {
    let root = shared_dir().join("corpus/policies");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p)
            } else {
                files.push(p)
            }
        }
    }
    files.sort();
    assert!(
        files.len() >= 200,
        "corpus at {} has {} files",
        root.display(),
        files.len()
    );
    let policies = read_inputs(&files, &mut std::io::empty()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        policies.len() >= files.len(),
        "{} policies from {} files",
        policies.len(),
        files.len()
    );
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vapcheck"))
}

#[test]
fn binary_checks_with_the_real_backends_and_names_bad_documents() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("p.yaml");
    std::fs::write(&good, POLICIES).unwrap();
    let openapi = shared_dir().join("openapi/v1.35");
    let o = binary()
        .args(["check", "-o", "json", "--mode", "strict", "--openapi"])
        .arg(&openapi)
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(out[0]["name"], "replicas");
    // Kinds in upstream's order (core group first), each block ending in a newline.
    assert_eq!(
        out[0]["status"]["typeChecking"]["expressionWarnings"][0]["warning"],
        "/v1, Kind=Pod: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n\n\
         apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n"
    );
    assert_eq!(out[1]["name"], "clean");
    assert_eq!(out[1]["status"]["typeChecking"], serde_json::json!({}));

    let o = binary()
        .args(["check", "--openapi", "/nonexistent-dir"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent-dir: no OpenAPI v3 documents"),
        "{err}"
    );

    let crd = dir.path().join("crd.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec: 3\n",
    )
    .unwrap();
    let o = binary()
        .args(["check", "--crd"])
        .arg(&crd)
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("crd.yaml: document 1 (line 1): invalid CustomResourceDefinition"),
        "{err}"
    );

    let o = binary()
        .args(["check", "--kubeconfig", "/k"])
        .arg(&good)
        .output()
        .unwrap();
    // Without --openapi/--crd the schemas come from the cluster: an unreadable kubeconfig is
    // unusable input, named.
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/k: cannot read the kubeconfig"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = binary()
        .args(["check", "-o", "json"])
        .arg(&good)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    // No flags, no cluster: the built-in schemas of Kubernetes 1.37.
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "spec": {"validations": 5}}"#,
    )
    .unwrap();
    let o = binary()
        .args(["check", "--openapi"])
        .arg(&openapi)
        .arg(&bad)
        .output()
        .unwrap();
    // A document that does not decode is a finding on it (exit 3, as kube-apiserver refuses it).
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "<unnamed> ({}: document 1): NOT DECODED\n  {}:1:112: spec.validations: invalid type: integer `5`, expected a sequence\n",
            bad.display(),
            bad.display()
        )),
        "{out}"
    );

    // usage errors
    let o = binary()
        .args(["check", "--mode", "lenient", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Every schema lookup fails (e.g. the cluster is unreachable).
struct Unreachable;

impl SchemaSource for Unreachable {
    fn resolve(&self, _gvk: &Gvk) -> Result<SchemaLookup, SchemaError> {
        Err(SchemaError::Failed("connection refused".into()))
    }
}

struct UnreachableProvider;

impl BackendProvider for UnreachableProvider {
    fn load(&self, options: &SchemaOptions) -> Result<LoadedBackends, String> {
        let mut b = Provider.load(options)?;
        b.schemas = Box::new(Unreachable);
        Ok(b)
    }
}

#[test]
fn policies_that_could_not_be_checked_exit_2() {
    let (code, out, err) = run(
        &args(OutputFormat::Json, ModeArg::Strict, &["-"]),
        POLICIES,
        &UnreachableProvider,
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "vapcheck: could not check: replicas (<stdin>: document 1), clean (<stdin>: document 3)\n"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v[0]["status"]["conditions"][0]["reason"],
        "SchemaUnavailable"
    );
}

#[test]
fn offline_provider_maps_through_the_openapi_folder_and_crds() {
    let dir = tempfile::tempdir().unwrap();
    let crd = dir.path().join("crd.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n\
         spec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget}\n\
         \x20 versions: [{name: v1, served: true, storage: true}]\n",
    )
    .unwrap();
    let factory = |_: &SchemaOptions, crds: &[vapcheck::cli::CustomResourceDefinition]| {
        assert_eq!(crds.len(), 1);
        Ok((
            Box::new(Schemas) as Box<dyn SchemaSource>,
            Box::new(Checker) as Box<dyn ExpressionChecker>,
        ))
    };
    let provider = vapcheck::cli::OfflineProvider { factory: &factory };
    let mut a = args(OutputFormat::Json, ModeArg::Extended, &["-"]);
    a.openapi = Some(shared_dir().join("openapi/v1.35"));
    a.crds = vec![crd];
    let widget_policy = POLICIES
        .replace("[\"apps\", \"\"]", "[\"apps\", \"\", \"example.com\"]")
        .replace("\"pods\"]", "\"pods\", \"widgets\"]");
    let (code, out, err) = run(&a, &widget_policy, &provider);
    assert_eq!((code, err.as_str()), (1, ""));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let msg = v[0]["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(msg.contains("/v1, Kind=Pod (no schema)"), "{msg}");
    assert!(
        msg.contains("example.com/v1, Kind=Widget (no schema)"),
        "{msg}"
    );
    // core pods map through the OpenAPI folder; only the cross-product combinations do not
    assert!(!msg.contains("no matches for /v1, Resource=pods"), "{msg}");
}

/// Golden output of `vapcheck check` (both modes, YAML) for a handful of real policies: the
/// documentation's examples (typo, audit annotation, match conditions, a variables example
/// with a genuine string/bool comparison bug) and the samples of `make demo`.
#[test]
fn golden_output_for_a_handful_of_policies() {
    let corpus = shared_dir().join("corpus/policies/kubernetes__website");
    let mut files: Vec<PathBuf> = [
        "deploy-replica-policy.example.com--typechecking.yaml",
        "demo-policy.example.com--validating-admission-policy-audit-annotation.yaml",
        "demo-policy.example.com--validating-admission-policy-match-conditions.yaml",
        "image-matches-namespace-environment.policy.example.com.yaml",
    ]
    .iter()
    .map(|f| corpus.join(f))
    .collect();
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/samples");
    let mut sample_files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    sample_files.sort();
    files.extend(sample_files);
    for mode in ["strict", "extended"] {
        let o = binary()
            .args(["check", "-o", "yaml", "--mode", mode, "--openapi"])
            .arg(shared_dir().join("openapi/v1.35"))
            .args(&files)
            .output()
            .unwrap();
        // 3: the match-conditions example of the Kubernetes documentation calls
        // `startWith` (for `startsWith`), which kube-apiserver rejects on create.
        assert_eq!(
            o.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        insta::assert_snapshot!(format!("golden_{mode}"), String::from_utf8_lossy(&o.stdout));
    }
}

/// Bindings need no schema source; a binding that does not deserialise names its file,
/// document and field (exit 2); one the API server rejects exits 3 with its causes.
#[test]
fn bindings_alone_get_the_api_server_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec:\n  policyName: 3\n",
    )
    .unwrap();
    let o = binary()
        .args(["check", "-o", "json"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(
        v[0]["decodeError"],
        serde_json::json!({"file": bad.display().to_string(), "document": 1, "line": 5,
            "column": 15, "field": "spec.policyName",
            "message": "invalid type: integer `3`, expected a string"})
    );
    let rejected = dir.path().join("rejected.yaml");
    std::fs::write(
        &rejected,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec:\n  policyName: p\n  validationActions: [Deny, Deny]\n",
    )
    .unwrap();
    let o = binary()
        .args(["check", "-o", "json"])
        .arg(&rejected)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v[0]["apiServer"],
        serde_json::json!({"accepted": false, "causes": ["spec.validationActions[1]: Duplicate value: \"Deny\""]})
    );
    assert!(v[0].get("status").is_none());
}

/// MutatingAdmissionPolicies (issue 12) end to end with the real backends and the built-in
/// Kubernetes 1.37 kinds: the text, JSON and GitHub outputs, exact positions, exit codes,
/// and the create-time verdict beside the findings.
#[test]
fn mutating_admission_policies_in_every_output_format() {
    let factory = |o: &SchemaOptions, _: &[vapcheck::cli::CustomResourceDefinition]| {
        vapcheck::cli::offline_backends(o)
    };
    let provider = vapcheck::cli::OfflineProvider { factory: &factory };
    let map = r#"apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: typo
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{replicaz: 3}}
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/spec/replicas", value: 2}]'
  reinvocationPolicy: Never
"#;
    let with = |output| {
        let mut a = args(output, ModeArg::Extended, &["-"]);
        a.openapi = None;
        run(&a, map, &provider)
    };
    let (code, out, err) = with(OutputFormat::Text);
    assert_eq!((code, err.as_str()), (1, ""), "{out}");
    assert!(
        out.contains("typo [mutating] (<stdin>: document 1): 1 warning\n  <stdin>:16:42: spec.mutations[0].applyConfiguration.expression\n    apps/v1, Kind=Deployment: ERROR: <input>:1:34: undefined field 'replicaz'"),
        "{out}"
    );
    let (code, out, _) = with(OutputFormat::Json);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["kind"], "MutatingAdmissionPolicy");
    assert_eq!(
        v[0]["apiServer"],
        serde_json::json!({"accepted": true}),
        "{out}"
    );
    let (_, out, _) = with(OutputFormat::Github);
    assert!(
        out.starts_with("::warning file=<stdin>,line=16,col=42,title=MutatingAdmissionPolicy typo%3A type-checking warning (apps/v1%2C Kind=Deployment)::spec.mutations[0].applyConfiguration.expression: ERROR: <input>:1:34: undefined field 'replicaz'"),
        "{out}"
    );
    // The same policy without the typo is clean.
    let mut a = args(OutputFormat::Text, ModeArg::Extended, &["-"]);
    a.openapi = None;
    let (code, out, err) = run(&a, &map.replace("replicaz", "replicas"), &provider);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    // A malformed MAP is a finding naming the document and the field.
    let (code, out, _) = run(
        &a,
        &map.replace("patchType: JSONPatch", "patchType: [1]"),
        &provider,
    );
    assert_eq!(code, 3);
    assert!(
        out.contains(
            "typo [mutating] (<stdin>: document 1): NOT DECODED\n  <stdin>:17:16: spec.mutations[1].patchType: invalid type: sequence"
        ),
        "{out}"
    );
}

/// Extended mode reports the worst-case cost of each expression per kind (with the embedded
/// 1.37 schemas) and a finding for a maximum over the per-expression limit, naming the limit,
/// the estimate and the unbounded schema paths; strict mode reports nothing about cost.
#[test]
fn extended_mode_reports_cost_estimates_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: images
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
  validations:
  - expression: "object.spec.containers.all(c, c.image.startsWith('registry.example/'))"
  - expression: "object.spec.nodeName == 'a'"
"#,
    )
    .unwrap();
    let o = binary()
        .args(["check", "-o", "json"])
        .arg(&file)
        .output()
        .unwrap();
    // Exit 1: `spec.nodeName` is absent from valid Pods (a runtime-safety finding).
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runtime = v[0]["status"]["runtime"]
        .as_array()
        .expect("runtime findings");
    assert_eq!(runtime.len(), 1, "{runtime:?}");
    assert_eq!(runtime[0]["access"], "object.spec.nodeName");
    assert_eq!(runtime[0]["error"], "no such key: nodeName");
    assert_eq!(
        runtime[0]["fixedExpression"],
        "object.spec.?nodeName.orValue('') == 'a'"
    );
    let cost = &v[0]["status"]["cost"];
    assert_eq!(
        cost["expressions"][0],
        serde_json::json!({
            "fieldRef": "spec.validations[0].expression",
            "gvks": ["/v1, Kind=Pod"],
            "min": 4,
            "max": 7340029,
            "unbounded": [
                "`spec.containers[*].image` has no maxLength",
                "`spec.containers` has no maxItems"
            ]
        })
    );
    assert_eq!(cost["expressions"][1]["max"], 4);
    assert_eq!(cost["budgets"][0]["max"], 7340033);
    assert_eq!(cost["budgets"][0]["budget"], "RuntimeCELCostBudget");
    assert_eq!(cost["findings"].as_array().map(Vec::len), Some(1));
    assert_eq!(cost["findings"][0]["limit"], "PerCallLimit");
    assert_eq!(cost["findings"][0]["estimate"], 7340029);

    let o = binary().args(["check"]).arg(&file).output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(
            "  cost: spec.validations[0].expression on /v1, Kind=Pod: worst-case cost 7,340,029 \
             exceeds the per-expression limit (PerCallLimit) of 1,000,000: \
             `spec.containers[*].image` has no maxLength, `spec.containers` has no maxItems\n"
        ),
        "{text}"
    );

    let o = binary()
        .args(["check", "-o", "json", "--mode", "strict"])
        .arg(&file)
        .output()
        .unwrap();
    let strict: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(strict[0]["status"].get("cost").is_none(), "{strict}");
    let o = binary()
        .args(["check", "--mode", "strict"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!String::from_utf8(o.stdout).unwrap().contains("cost"));

    // --no-cost-estimates: extended mode without the estimates; the other results stay.
    let o = binary()
        .args(["check", "-o", "json", "--no-cost-estimates"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let without: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(without[0]["status"].get("cost").is_none(), "{without}");
    let mut with = v;
    with[0]["status"]
        .as_object_mut()
        .unwrap()
        .remove("cost")
        .unwrap();
    assert_eq!(with, without);
    let o = binary()
        .args(["check", "--no-cost-estimates"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!String::from_utf8(o.stdout).unwrap().contains("cost"));
}
