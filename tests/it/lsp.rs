//! `vapcheck lsp` driven over its standard input and output as an editor drives it
//! (JSON-RPC with `Content-Length` headers): its diagnostics are exactly `vapcheck check`'s
//! SARIF findings on the same workspace, edits refresh them, bad input never takes it down,
//! and Neovim (a real client) shows them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_vapcheck");
/// How long one answer may take (a debug build checking a small workspace takes well under
/// a second; this bounds a hang, it is not a tolerance on a result).
const TIMEOUT: Duration = Duration::from_secs(60);

const DEPLOYMENT_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replicas
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "object.spec.replicsa <= 5"
"#;

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
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
              size: {type: integer}
"#;

/// Two policies in one file (the second on the CRD of another file, with a typo), a
/// document that is not YAML, and a binding.
const WIDGET_POLICIES: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: widgets-ok
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["widgets"]
  validations:
  - expression: "object.spec.size < 10"
---
kind: [
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: widgets-typo
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["widgets"]
  validations:
  - expression: "object.spec.sise < 10"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: widgets-typo
spec:
  policyName: widgets-typo
  validationActions: [Deny]
"#;

/// A workspace: the Deployment policy, the widget policies, the CRD (named by
/// `.vapcheck.yaml`) and a file that is not a manifest.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("crds")).expect("mkdir");
    for (name, text) in [
        ("policy.yaml", DEPLOYMENT_POLICY),
        ("widgets.yaml", WIDGET_POLICIES),
        ("crds/widget.yaml", WIDGET_CRD),
        (".vapcheck.yaml", "crds: [crds/widget.yaml]\n"),
        ("README.txt", "not a manifest\n"),
    ] {
        std::fs::write(root.join(name), text).expect("write");
    }
    dir
}

/// The `file:` URI of a path (the test paths need no escapes).
fn uri(path: &Path) -> String {
    let s = path.display().to_string();
    assert!(
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/".contains(&b)),
        "{s}"
    );
    format!("file://{s}")
}

/// A running `vapcheck lsp` and the messages it sent.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    /// The latest diagnostics published for each URI.
    diagnostics: BTreeMap<String, Vec<Value>>,
    /// Every publishDiagnostics seen, in order (URI, number of diagnostics).
    publications: Vec<(String, usize)>,
    next_id: i64,
}

/// Reads one message (`Content-Length` framing); `None` at the end of the stream.
fn read_message(r: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            length = v.parse::<usize>().ok();
        }
    }
    let mut body = vec![0u8; length?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

impl Server {
    fn start(cwd: &Path) -> Self {
        let mut child = Command::new(BIN)
            .arg("lsp")
            .current_dir(cwd)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vapcheck lsp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(m) = read_message(&mut r) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            messages: rx,
            diagnostics: BTreeMap::new(),
            publications: Vec::new(),
            next_id: 1,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).expect("json");
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.extend(body);
        self.send_raw(&framed);
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message, recording diagnostics; panics after [`TIMEOUT`].
    fn next(&mut self) -> Value {
        let m = match self.messages.recv_timeout(TIMEOUT) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server in {TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its output"),
        };
        if m["method"] == "textDocument/publishDiagnostics" {
            let uri = m["params"]["uri"].as_str().expect("uri").to_owned();
            let list = m["params"]["diagnostics"]
                .as_array()
                .expect("diagnostics")
                .clone();
            self.publications.push((uri.clone(), list.len()));
            self.diagnostics.insert(uri, list);
        }
        m
    }

    /// Sends a request and returns its response (the messages before it are recorded).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.next();
            if m["id"] == json!(id) && m.get("method").is_none() {
                return m;
            }
        }
    }

    /// Waits until the server is idle after what was sent: a request answered after all of
    /// it (messages are handled in order, and each batch of changes is checked and published
    /// before the next message is read).
    fn sync(&mut self) {
        let r = self.request("vapcheck/unknown", json!({}));
        assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    }

    fn initialize(&mut self, root: &Path) -> Value {
        let r = self.request(
            "initialize",
            json!({"processId": null, "rootUri": uri(root), "capabilities": {},
                   "workspaceFolders": [{"uri": uri(root), "name": "ws"}]}),
        );
        self.notify("initialized", json!({}));
        r
    }

    /// `shutdown` then `exit`; the exit status and standard error.
    fn shutdown(mut self) -> (i32, String) {
        let r = self.request("shutdown", Value::Null);
        assert_eq!(r["result"], Value::Null, "{r}");
        self.notify("exit", Value::Null);
        self.finish()
    }

    /// Closes the input and waits for the process (bounded); its status and standard error.
    fn finish(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if start.elapsed() > TIMEOUT {
                let _ = self.child.kill();
                panic!("vapcheck lsp did not exit");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status.code().unwrap_or(-1), err)
    }
}

/// A diagnostic as compared: start line and character, code, message, severity.
type Expected = (u64, u64, String, String, u64);

/// `vapcheck check ROOT -o sarif` run in ROOT: each result as the diagnostic the server must
/// publish for it, by URI (line and column converted for ASCII lines: code points are UTF-16
/// units there).
fn sarif_diagnostics(root: &Path) -> BTreeMap<String, Vec<Expected>> {
    let out = Command::new(BIN)
        .args(["check", "-o", "sarif"])
        .arg(root)
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run check");
    let log: Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let mut by_uri: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for r in log["runs"][0]["results"].as_array().expect("results") {
        let loc = &r["locations"][0]["physicalLocation"];
        let file = loc["artifactLocation"]["uri"].as_str().expect("uri");
        let text = std::fs::read_to_string(file).expect("read");
        let line = loc["region"]["startLine"].as_u64().expect("line");
        let column = loc["region"]["startColumn"].as_u64().expect("column");
        let l = text.lines().nth(line as usize - 1).expect("line");
        assert!(l.is_ascii(), "{l}");
        let severity = match r["level"].as_str().expect("level") {
            "error" => 1,
            "warning" => 2,
            _ => 3,
        };
        by_uri.entry(format!("file://{file}")).or_default().push((
            line - 1,
            column - 1,
            r["ruleId"].as_str().expect("rule").to_owned(),
            r["message"]["text"].as_str().expect("text").to_owned(),
            severity,
        ));
    }
    by_uri
}

/// The published diagnostics in the shape of [`sarif_diagnostics`].
fn published(list: &[Value]) -> Vec<Expected> {
    list.iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().expect("line"),
                d["range"]["start"]["character"]
                    .as_u64()
                    .expect("character"),
                d["code"].as_str().expect("code").to_owned(),
                d["message"].as_str().expect("message").to_owned(),
                d["severity"].as_u64().expect("severity"),
            )
        })
        .collect()
}

#[test]
fn diagnostics_are_checks_findings_and_edits_refresh_them() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let expected = sarif_diagnostics(&root);
    let policy = uri(&root.join("policy.yaml"));
    let widgets = uri(&root.join("widgets.yaml"));
    // The typos in both files (one against the CRD of another file) and the broken document.
    let codes = |u: &str| -> Vec<String> {
        expected
            .get(u)
            .into_iter()
            .flatten()
            .map(|d| d.2.clone())
            .collect()
    };
    assert_eq!(codes(&policy), ["VAP100"]);
    assert_eq!(codes(&widgets), ["VAP003", "VAP100"]);
    assert_eq!(expected.len(), 2, "{expected:?}");

    let mut server = Server::start(&root);
    let init = server.initialize(&root);
    assert_eq!(
        init["result"]["capabilities"]["positionEncoding"],
        json!("utf-16"),
        "{init}"
    );
    server.sync();
    // Published for the whole workspace before any file is open.
    let got: BTreeMap<String, _> = server
        .diagnostics
        .iter()
        .map(|(u, l)| (u.clone(), published(l)))
        .collect();
    assert_eq!(got, expected);
    // The typo's exact range, code and link-less code description.
    let typo = &server.diagnostics[&policy][0];
    assert_eq!(
        typo["range"],
        json!({"start": {"line": 12, "character": 28}, "end": {"line": 12, "character": 37}})
    );
    assert_eq!(typo["source"], json!("vapcheck"));
    assert_eq!(typo["codeDescription"], Value::Null);
    assert!(
        typo["message"]
            .as_str()
            .is_some_and(|m| m.contains("undefined field 'replicsa'")),
        "{typo}"
    );

    // Opening the file as it is on disk: the same diagnostics.
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": policy, "languageId": "yaml", "version": 1,
                                "text": DEPLOYMENT_POLICY}}),
    );
    server.sync();
    assert_eq!(published(&server.diagnostics[&policy]), expected[&policy]);

    // Fixing the typo in the buffer (unsaved): cleared; the other file's stay.
    let fixed = DEPLOYMENT_POLICY.replace("replicsa", "replicas");
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": policy, "version": 2},
               "contentChanges": [{"text": fixed}]}),
    );
    server.sync();
    assert_eq!(server.diagnostics[&policy], Vec::<Value>::new());
    assert_eq!(published(&server.diagnostics[&widgets]), expected[&widgets]);

    // Non-ASCII text before the typo: the column in UTF-16 units (`é` 1, `😀` 2).
    let accented = DEPLOYMENT_POLICY.replace(
        "\"object.spec.replicsa",
        "\"'é😀' != '' && object.spec.replicsa",
    );
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": policy, "version": 3},
               "contentChanges": [{"text": accented}]}),
    );
    server.sync();
    let d = &server.diagnostics[&policy];
    assert_eq!(d.len(), 1, "{d:?}");
    // `  - expression: "'é😀' != '' && object.spec` is 42 code points, 43 UTF-16 units.
    assert_eq!(
        d[0]["range"],
        json!({"start": {"line": 12, "character": 43}, "end": {"line": 12, "character": 52}})
    );

    // Saving the file with the typo fixed on disk, the buffer closed: the disk's text counts.
    std::fs::write(root.join("policy.yaml"), &fixed).expect("write");
    server.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": policy}}),
    );
    server.sync();
    assert_eq!(server.diagnostics[&policy], Vec::<Value>::new());

    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

#[test]
fn bad_input_never_takes_the_server_down() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let mut server = Server::start(&root);
    server.initialize(&root);
    server.sync();
    let scratch = uri(&root.join("scratch.yaml"));
    // Not YAML: one VAP003 at the document.
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": scratch, "languageId": "yaml", "version": 1,
                                "text": "kind: [\n"}}),
    );
    server.sync();
    let codes: Vec<&Value> = server.diagnostics[&scratch]
        .iter()
        .map(|d| &d["code"])
        .collect();
    assert_eq!(codes, [&json!("VAP003")]);
    // A 4 MiB line in an expression, and a line of non-ASCII text.
    let huge = DEPLOYMENT_POLICY.replace("replicsa", &"a".repeat(4 << 20));
    let start = Instant::now();
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": scratch, "version": 2},
               "contentChanges": [{"text": huge}]}),
    );
    server.sync();
    assert!(start.elapsed() < TIMEOUT);
    // kube-apiserver rejects an expression that long; the field is still undefined.
    let codes: Vec<&Value> = server.diagnostics[&scratch]
        .iter()
        .map(|d| &d["code"])
        .collect();
    assert_eq!(codes, [&json!("VAP001"), &json!("VAP100")]);
    // An edit with a range past the end of the text, and one inside a surrogate pair.
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": scratch, "version": 3},
               "contentChanges": [{"text": "x: '😀'\n"},
                 {"range": {"start": {"line": 0, "character": 5},
                            "end": {"line": 99, "character": 99}}, "text": "ok'\n"}]}),
    );
    server.sync();
    // Not a Kubernetes object: a VAP003 again.
    assert_eq!(server.diagnostics[&scratch].len(), 1);
    // Parameters of the wrong shape, an unknown notification, a request it does not answer.
    server.notify("textDocument/didOpen", json!({"textDocument": 7}));
    server.notify("$/unknown", json!([1, 2]));
    let r = server.request("textDocument/definition", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));

    // A body that is not JSON: the server stops with an error, without a panic or a hang.
    let mut server = Server::start(&root);
    server.initialize(&root);
    server.sync();
    server.send_raw(b"Content-Length: 5\r\n\r\n{{{{{");
    let (code, stderr) = server.finish();
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.starts_with("vapcheck lsp: "), "{stderr}");

    // The input closed without shutdown: an error exit, no hang.
    let mut server = Server::start(&root);
    server.initialize(&root);
    let (code, stderr) = server.finish();
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `nvim`: `$VAPCHECK_NVIM`, else on PATH; `None` outside CI when missing (under CI a missing
/// Neovim fails the test; scripts/nvim-path installs it there).
fn nvim() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VAPCHECK_NVIM") {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("nvim"))
            .find(|p| p.is_file())
    });
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false");
    match found {
        Some(p) => Some(p),
        None if ci => panic!("nvim is missing under CI (scripts/nvim-path installs it)"),
        None => {
            eprintln!("skipped: no nvim (apt-get install -y neovim)");
            None
        }
    }
}

#[test]
fn neovim_shows_diagnostics_hover_and_completion() {
    let Some(nvim) = nvim() else { return };
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let out = root.join("nvim-diagnostics.txt");
    let init = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/lsp/init.lua");
    let mut child = Command::new(&nvim)
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(&init)
        .arg("policy.yaml")
        .current_dir(&root)
        .env("VAPCHECK_BIN", BIN)
        .env("VAPCHECK_LSP_ROOT", &root)
        .env("VAPCHECK_LSP_OUT", &out)
        .env("XDG_STATE_HOME", root.join(".state"))
        .env("XDG_DATA_HOME", root.join(".data"))
        .env("XDG_CONFIG_HOME", root.join(".config"))
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nvim");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("nvim did not finish");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let got = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("{}: {e}; nvim: {status}, {err}", out.display()));
    // Neovim's diagnostics (0-based line and columns in bytes, severity, code, message) as
    // published, the code action applied, then the diagnostics after it: none; the hover on
    // `replicas` and the completion after `object.spec.`.
    let hover = "`object.spec.replicas`\\n\\n- `apps/v1, Kind=Deployment`: `int`\\n\\nNumber of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1.\\n\\n`spec.validations[0].expression` (the expression)\\n\\n- `apps/v1, Kind=Deployment`: `bool`\\n";
    let completion = "minReadySeconds,paused,progressDeadlineSeconds,replicas,revisionHistoryLimit,selector,strategy,template";
    let message = "ValidatingAdmissionPolicy replicas: type-checking warning (apps/v1, Kind=Deployment): spec.validations[0].expression: ERROR: <input>:1:12: undefined field 'replicsa'\\n | object.spec.replicsa <= 5\\n | ...........^";
    assert_eq!(
        got,
        format!(
            "published 1\n12:28-12:37 2 VAP100 {message}\naction Did you mean `replicas`?\nfixed 0\nhover {hover}\ncompletion {completion}\n"
        ),
        "nvim: {status}, {err}"
    );
    assert!(status.success(), "nvim: {status}, {err}");
    // The file as Neovim saved it after the action: the typo fixed, and `check` finds nothing
    // in it.
    assert_eq!(
        std::fs::read_to_string(root.join("policy.yaml")).expect("read"),
        DEPLOYMENT_POLICY.replace("replicsa", "replicas")
    );
    assert_eq!(check_results(&root, "policy.yaml"), []);
}

/// The hover text at `line`, `character` of `uri` (`null` when there is none).
fn hover(server: &mut Server, uri: &str, line: u32, character: u32) -> Value {
    let r = server.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
    );
    r["result"]["contents"]["value"].clone()
}

#[test]
fn hover_gives_the_selection_and_expression_types_per_kind() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let mut server = Server::start(&root);
    let init = server.initialize(&root);
    assert_eq!(init["result"]["capabilities"]["hoverProvider"], json!(true));
    let policy = uri(&root.join("policy.yaml"));
    let fixed = DEPLOYMENT_POLICY.replace("replicsa", "replicas");
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": policy, "languageId": "yaml", "version": 1,
                                "text": fixed}}),
    );
    // Line 12 is `  - expression: "object.spec.replicas <= 5"`: `replicas` at 29..37 (the
    // unsaved buffer's text, not the file's), `spec` at 24..28.
    let deployment = "apps/v1, Kind=Deployment";
    let expression =
        format!("`spec.validations[0].expression` (the expression)\n\n- `{deployment}`: `bool`\n");
    // With the field's description from the published apps/v1 document of Kubernetes 1.37
    // (the embedded copy of k8s.io/kubernetes v1.37.1 api/openapi-spec/v3).
    let replicas = "Number of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1.";
    assert_eq!(
        hover(&mut server, &policy, 12, 33),
        json!(format!(
            "`object.spec.replicas`\n\n- `{deployment}`: `int`\n\n{replicas}\n\n{expression}"
        ))
    );
    // The cursor just after the identifier still names it.
    assert_eq!(
        hover(&mut server, &policy, 12, 37),
        hover(&mut server, &policy, 12, 29)
    );
    assert_eq!(
        hover(&mut server, &policy, 12, 25),
        json!(format!(
            "`object.spec`\n\n- `{deployment}`: `Deployment.spec`\n\nSpecification of the desired behavior of the Deployment.\n\n{expression}"
        ))
    );
    // On an operator: the expression only.
    assert_eq!(hover(&mut server, &policy, 12, 39), json!(expression));
    // Outside any expression: nothing.
    assert_eq!(hover(&mut server, &policy, 3, 4), Value::Null);
    assert_eq!(hover(&mut server, &policy, 40, 0), Value::Null);
    // The custom resource of the CRD another file defines (named by .vapcheck.yaml), in the
    // first document of a multi-document file; line 12 is
    // `  - expression: "object.spec.size < 10"`.
    let widgets = uri(&root.join("widgets.yaml"));
    let widget = "example.com/v1, Kind=Widget";
    assert_eq!(
        hover(&mut server, &widgets, 12, 31),
        json!(format!(
            "`object.spec.size`\n\n- `{widget}`: `int`\n\n`spec.validations[0].expression` (the expression)\n\n- `{widget}`: `bool`\n"
        ))
    );
    // In the third document, the typo: the selection does not check.
    assert_eq!(
        hover(&mut server, &widgets, 28, 31),
        json!(format!(
            "`object.spec.sise`\n\n- `{widget}`: does not check: ERROR: <input>:1:12: undefined field 'sise'\n\n`spec.validations[0].expression` (the expression)\n\n- `{widget}`: does not check: ERROR: <input>:1:12: undefined field 'sise'\n"
        ))
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// The completion items at `line`, `character` of `uri`: label and detail each.
fn completion(server: &mut Server, uri: &str, line: u32, character: u32) -> Vec<(String, String)> {
    let r = server.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
    );
    r["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|i| {
            assert_eq!(i["kind"], json!(5), "a field: {i}");
            (
                i["label"].as_str().unwrap_or_default().to_owned(),
                i["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn completion_offers_the_schema_fields_of_the_selection() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let mut server = Server::start(&root);
    let init = server.initialize(&root);
    assert_eq!(
        init["result"]["capabilities"]["completionProvider"]["triggerCharacters"],
        json!(["."])
    );
    let policy = uri(&root.join("policy.yaml"));
    let edit = |server: &mut Server, expression: &str, version: i32| {
        let text = DEPLOYMENT_POLICY.replace("object.spec.replicsa <= 5", expression);
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": policy, "version": version},
                   "contentChanges": [{"text": text}]}),
        );
    };
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": policy, "languageId": "yaml", "version": 1,
                                "text": DEPLOYMENT_POLICY}}),
    );
    // Line 12: `  - expression: "object.spec."`, the cursor after the last `.` (column 29).
    edit(&mut server, "object.spec.", 2);
    let d = "apps/v1, Kind=Deployment";
    let spec: Vec<(String, String)> = [
        ("minReadySeconds", "int"),
        ("paused", "bool"),
        ("progressDeadlineSeconds", "int"),
        ("replicas", "int"),
        ("revisionHistoryLimit", "int"),
        ("selector", "Deployment.spec.selector"),
        ("strategy", "Deployment.spec.strategy"),
        ("template", "Deployment.spec.template"),
    ]
    .iter()
    .map(|(n, t)| ((*n).to_owned(), format!("{t} ({d})")))
    .collect();
    assert_eq!(completion(&mut server, &policy, 12, 29), spec);
    // What is typed filters; `oldObject` and optional selections too.
    edit(&mut server, "has(oldObject.?spec.re", 3);
    assert_eq!(
        completion(&mut server, &policy, 12, 39),
        spec.iter()
            .filter(|(n, _)| n.starts_with("re"))
            .cloned()
            .collect::<Vec<_>>()
    );
    // Elsewhere: nothing.
    assert_eq!(completion(&mut server, &policy, 12, 21), Vec::new());
    assert_eq!(completion(&mut server, &policy, 3, 3), Vec::new());
    // The CRD's kind, from the other file.
    let widgets = uri(&root.join("widgets.yaml"));
    let text = WIDGET_POLICIES.replace("object.spec.size < 10", "object.spec.");
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": widgets, "languageId": "yaml", "version": 1,
                                "text": text}}),
    );
    assert_eq!(
        completion(&mut server, &widgets, 12, 29),
        [(
            "size".to_owned(),
            "int (example.com/v1, Kind=Widget)".to_owned()
        )]
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// A Pod policy whose expression errors at admission on Pods without the field (VAP110,
/// with a rewrite).
const DEADLINE_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: deadline
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
  validations:
  - expression: "object.spec.activeDeadlineSeconds > 0"
"#;

/// The Deployment policy's typo in a block scalar: the finding is on the line below the
/// field's key.
const BLOCK_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: block
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: |
      object.spec.replicsa <= 5
"#;

/// The code actions at `range` of `uri`, each as (title, [(start line, start character, end
/// line, end character, new text)]); every one is a quick fix of one diagnostic published
/// for `uri`, with edits of `uri` only.
type Action = (String, Vec<(u64, u64, u64, u64, String)>);

fn code_actions(server: &mut Server, uri: &str, range: Value) -> Vec<Action> {
    let published = server.diagnostics.get(uri).cloned().unwrap_or_default();
    let r = server.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": range,
               "context": {"diagnostics": published}}),
    );
    let list = r["result"].as_array().unwrap_or_else(|| panic!("{r}"));
    list.iter()
        .map(|a| {
            assert_eq!(a["kind"], json!("quickfix"), "{a}");
            let diagnostics = a["diagnostics"].as_array().expect("diagnostics");
            assert_eq!(diagnostics.len(), 1, "{a}");
            assert!(published.contains(&diagnostics[0]), "{a}");
            let changes = a["edit"]["changes"].as_object().expect("changes");
            assert_eq!(changes.keys().collect::<Vec<_>>(), [uri], "{a}");
            let edits = changes[uri]
                .as_array()
                .expect("edits")
                .iter()
                .map(|e| {
                    let n = |p: &str, k: &str| e["range"][p][k].as_u64().expect("position");
                    (
                        n("start", "line"),
                        n("start", "character"),
                        n("end", "line"),
                        n("end", "character"),
                        e["newText"].as_str().expect("newText").to_owned(),
                    )
                })
                .collect();
            (a["title"].as_str().expect("title").to_owned(), edits)
        })
        .collect()
}

/// `text` (ASCII: UTF-16 units are bytes) with the edits of an action applied, from the last.
fn apply(text: &str, edits: &[(u64, u64, u64, u64, String)]) -> String {
    assert!(text.is_ascii());
    let offset = |line: u64, character: u64| {
        let start: usize = text
            .split_inclusive('\n')
            .take(line as usize)
            .map(str::len)
            .sum();
        start + character as usize
    };
    let mut edits = edits.to_vec();
    edits.sort_by_key(|e| std::cmp::Reverse((e.0, e.1)));
    let mut out = text.to_owned();
    for (l0, c0, l1, c1, new) in edits {
        out.replace_range(offset(l0, c0)..offset(l1, c1), &new);
    }
    out
}

/// `vapcheck check ROOT -o sarif` run in ROOT: each result of `file` as (rule, whether it is
/// suppressed).
fn check_results(root: &Path, file: &str) -> Vec<(String, bool)> {
    let out = Command::new(BIN)
        .args(["check", "-o", "sarif"])
        .arg(root)
        .current_dir(root)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run check");
    let log: Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let want = root.join(file).display().to_string();
    log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == json!(want))
        .map(|r| {
            (
                r["ruleId"].as_str().expect("rule").to_owned(),
                r["suppressions"].as_array().is_some_and(|s| !s.is_empty()),
            )
        })
        .collect()
}

fn range(l0: u64, c0: u64, l1: u64, c1: u64) -> Value {
    json!({"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}})
}

/// Applies each action of `actions` in turn to the file `name` (text `original`) in the
/// editor's buffer and on disk: `vapcheck check` on the folder then finds in it only the
/// findings `left` (rule, suppressed), one list per action, and the server's diagnostics of
/// the file are the codes of those not suppressed. The buffer and the file are restored after
/// each.
fn apply_each(
    server: &mut Server,
    root: &Path,
    name: &str,
    original: &str,
    actions: &[Action],
    left: &[&[(&str, bool)]],
) {
    assert_eq!(actions.len(), left.len());
    let u = uri(&root.join(name));
    for (version, ((title, edits), left)) in (10..).zip(actions.iter().zip(left)) {
        let edited = apply(original, edits);
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": u, "version": version},
                   "contentChanges": [{"text": edited}]}),
        );
        server.sync();
        let codes: Vec<&str> = server.diagnostics[&u]
            .iter()
            .map(|d| d["code"].as_str().expect("code"))
            .collect();
        let unsuppressed: Vec<&str> = left.iter().filter(|l| !l.1).map(|l| l.0).collect();
        assert_eq!(codes, unsuppressed, "{title}");
        std::fs::write(root.join(name), &edited).expect("write");
        let want: Vec<(String, bool)> = left.iter().map(|(r, s)| ((*r).to_owned(), *s)).collect();
        assert_eq!(check_results(root, name), want, "{title}:\n{edited}");
        std::fs::write(root.join(name), original).expect("write");
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": u, "version": version},
                   "contentChanges": [{"text": original}]}),
        );
        server.sync();
    }
}

#[test]
fn code_actions_rewrite_rename_and_suppress() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    std::fs::write(root.join("deadline.yaml"), DEADLINE_POLICY).expect("write");
    std::fs::write(root.join("block.yaml"), BLOCK_POLICY).expect("write");
    let mut server = Server::start(&root);
    let init = server.initialize(&root);
    assert_eq!(
        init["result"]["capabilities"]["codeActionProvider"],
        json!({"codeActionKinds": ["quickfix"]})
    );
    server.sync();
    let suppress = |rule: &str, line: u64, indent: &str| {
        (
            format!("Suppress {rule} here (# vapcheck:ignore)"),
            vec![(
                line,
                0,
                line,
                0,
                format!("{indent}# vapcheck:ignore {rule}\n"),
            )],
        )
    };

    // The typo (`.replicsa` at 12:28-12:37): the nearest field, and the comment above.
    let policy = uri(&root.join("policy.yaml"));
    let actions = code_actions(&mut server, &policy, range(12, 30, 12, 30));
    assert_eq!(
        actions,
        [
            (
                "Did you mean `replicas`?".to_owned(),
                vec![(12, 29, 12, 37, "replicas".to_owned())]
            ),
            suppress("VAP100", 12, "  "),
        ]
    );
    apply_each(
        &mut server,
        &root,
        "policy.yaml",
        DEPLOYMENT_POLICY,
        &actions,
        &[&[], &[("VAP100", true)]],
    );
    // Away from the finding: none.
    assert_eq!(code_actions(&mut server, &policy, range(3, 0, 3, 4)), []);

    // The runtime-safety finding (`.activeDeadlineSeconds` at 12:28-12:50): SARIF's fix.
    let deadline = uri(&root.join("deadline.yaml"));
    let actions = code_actions(&mut server, &deadline, range(12, 0, 12, 60));
    assert_eq!(
        actions,
        [
            (
                "Rewrite: read the field only where it is present (an optional selection with the zero value, or a guard on the operation)".to_owned(),
                vec![(12, 28, 12, 50, ".?activeDeadlineSeconds.orValue(0)".to_owned())]
            ),
            suppress("VAP110", 12, "  "),
        ]
    );
    apply_each(
        &mut server,
        &root,
        "deadline.yaml",
        DEADLINE_POLICY,
        &actions,
        &[&[], &[("VAP110", true)]],
    );

    // In a block scalar (the typo on line 13): the comment goes above the field's key.
    let block = uri(&root.join("block.yaml"));
    let actions = code_actions(&mut server, &block, range(13, 20, 13, 20));
    assert_eq!(
        actions,
        [
            (
                "Did you mean `replicas`?".to_owned(),
                vec![(13, 18, 13, 26, "replicas".to_owned())]
            ),
            suppress("VAP100", 12, "  "),
        ]
    );
    apply_each(
        &mut server,
        &root,
        "block.yaml",
        BLOCK_POLICY,
        &actions,
        &[&[], &[("VAP100", true)]],
    );

    // The multi-document file: the CRD's field in the third document (`.sise` at
    // 28:28-28:33), and the document that is not YAML.
    let widgets = uri(&root.join("widgets.yaml"));
    let actions = code_actions(&mut server, &widgets, range(28, 33, 28, 33));
    assert_eq!(
        actions,
        [
            (
                "Did you mean `size`?".to_owned(),
                vec![(28, 29, 28, 33, "size".to_owned())]
            ),
            suppress("VAP100", 28, "  "),
        ]
    );
    // The whole file: also the suppression of the document that is not YAML (its `[` at
    // 14:6), above it.
    let all = code_actions(&mut server, &widgets, range(0, 0, 40, 0));
    assert_eq!(all[0], suppress("VAP003", 14, ""));
    assert_eq!(all[1..], actions);
    assert_eq!(all.len(), 3);
    apply_each(
        &mut server,
        &root,
        "widgets.yaml",
        WIDGET_POLICIES,
        &all,
        &[
            &[("VAP003", true), ("VAP100", false)],
            &[("VAP003", false)],
            &[("VAP003", false), ("VAP100", true)],
        ],
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// Types `expression` one character at a time into the open buffer `uri` whose text is
/// `template` with `placeholder` (on line `line`, from column 17) replaced by what is typed,
/// each step a `didChange` then a hover, a completion and a code-action request at the
/// cursor: every one is answered without an error. The number of steps at which completion
/// offered `field`.
fn type_in(
    server: &mut Server,
    uri: &str,
    (template, placeholder, line): (&str, &str, u64),
    expression: &str,
    field: &str,
) -> usize {
    let mut offered = 0;
    for (i, (at, _)) in expression
        .char_indices()
        .chain([(expression.len(), ' ')])
        .enumerate()
    {
        let text = template.replace(placeholder, &expression[..at]);
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": i + 2},
                   "contentChanges": [{"text": text}]}),
        );
        let cursor = json!({"line": line, "character": 17 + at});
        let at_cursor = json!({"textDocument": {"uri": uri}, "position": cursor});
        for (method, params) in [
            ("textDocument/hover", at_cursor.clone()),
            ("textDocument/completion", at_cursor.clone()),
            (
                "textDocument/codeAction",
                json!({"textDocument": {"uri": uri},
                       "range": {"start": cursor, "end": cursor},
                       "context": {"diagnostics": []}}),
            ),
        ] {
            let r = server.request(method, params);
            assert!(
                r.get("error").is_none() && r.get("result").is_some(),
                "{method} {i}: {r}"
            );
            if method == "textDocument/completion"
                && r["result"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|c| c["label"] == field))
            {
                offered += 1;
            }
        }
    }
    server.sync();
    offered
}

#[test]
fn editing_character_by_character() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let mut server = Server::start(&root);
    server.initialize(&root);
    server.sync();
    let policy = uri(&root.join("policy.yaml"));
    let widgets = uri(&root.join("widgets.yaml"));
    for (u, text) in [(&policy, DEPLOYMENT_POLICY), (&widgets, WIDGET_POLICIES)] {
        server.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": u, "languageId": "yaml", "version": 1,
                                    "text": text}}),
        );
    }
    // Line 12 of the Deployment policy: `replicas` offered after `object.spec.` and each of
    // `object.spec.r` .. `object.spec.replicas`, twice.
    let offered = type_in(
        &mut server,
        &policy,
        (DEPLOYMENT_POLICY, "object.spec.replicsa <= 5", 12),
        "has(object.spec.replicas) && object.spec.replicas <= 5",
        "replicas",
    );
    assert_eq!(offered, 2 * 9);
    assert_eq!(server.diagnostics[&policy], Vec::<Value>::new());
    // The third document of the multi-document file (line 28), on the CRD's kind: `size`
    // after `object.spec.` and `object.spec.s` .. `object.spec.size`, twice; the document
    // that is not YAML keeps its finding.
    let offered = type_in(
        &mut server,
        &widgets,
        (WIDGET_POLICIES, "object.spec.sise < 10", 28),
        "has(object.spec.size) && object.spec.size < 10",
        "size",
    );
    assert_eq!(offered, 2 * 5);
    let codes: Vec<&Value> = server.diagnostics[&widgets]
        .iter()
        .map(|d| &d["code"])
        .collect();
    assert_eq!(codes, [&json!("VAP003")]);
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// A Deployment policy with the Widget CRD as its paramKind and two variables; line 20 is
/// `  - expression: "..."` (the expression from column 17).
const PARAMS_POLICY: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: with-params
spec:
  paramKind:
    apiVersion: example.com/v1
    kind: Widget
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  variables:
  - name: replicas
    expression: "object.spec.replicas"
  - name: team
    expression: "object.metadata.labels['team']"
  validations:
  - expression: "true"
"#;

#[test]
fn completion_of_params_request_namespace_object_and_variables() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    std::fs::write(root.join("params.yaml"), PARAMS_POLICY).expect("write");
    let mut server = Server::start(&root);
    server.initialize(&root);
    let file = uri(&root.join("params.yaml"));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": file, "languageId": "yaml", "version": 1,
                                "text": PARAMS_POLICY}}),
    );
    let mut version = 1;
    let mut at_end = |server: &mut Server, expression: &str| {
        version += 1;
        let text = PARAMS_POLICY.replace("\"true\"", &format!("\"{expression}\""));
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": file, "version": version},
                   "contentChanges": [{"text": text}]}),
        );
        completion(server, &file, 20, 17 + expression.len() as u32)
    };
    let list = |items: &[(&str, &str)]| -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
            .collect()
    };
    let widget = "example.com/v1, Kind=Widget";
    let deployment = "apps/v1, Kind=Deployment";
    // `params`: the paramKind's schema (the CRD of another file).
    assert_eq!(
        at_end(&mut server, "params.spec."),
        list(&[("size", &format!("int ({widget})"))])
    );
    let kind_of = |t: &str| format!("{t} ({widget})");
    assert_eq!(
        at_end(&mut server, "params."),
        list(&[
            ("apiVersion", &kind_of("string")),
            ("kind", &kind_of("string")),
            ("metadata", &kind_of("Widget.metadata")),
            ("spec", &kind_of("Widget.spec")),
        ])
    );
    // `request`: upstream's admission request type, and its nested types.
    let gvk = "kubernetes.GroupVersionKind";
    let gvr = "kubernetes.GroupVersionResource";
    assert_eq!(
        at_end(&mut server, "request."),
        list(&[
            ("dryRun", "bool"),
            ("kind", gvk),
            ("name", "string"),
            ("namespace", "string"),
            ("operation", "string"),
            ("options", "dyn"),
            ("requestKind", gvk),
            ("requestResource", gvr),
            ("requestSubResource", "string"),
            ("resource", gvr),
            ("subResource", "string"),
            ("userInfo", "kubernetes.UserInfo"),
        ])
    );
    assert_eq!(
        at_end(&mut server, "request.userInfo."),
        list(&[
            ("extra", "map(string, list(string))"),
            ("groups", "list(string)"),
            ("uid", "string"),
            ("username", "string"),
        ])
    );
    // `namespaceObject`: upstream's Namespace type, filtered by what is typed.
    assert_eq!(
        at_end(&mut server, "namespaceObject.metadata.l"),
        list(&[("labels", "map(string, string)")])
    );
    assert_eq!(
        at_end(&mut server, "namespaceObject."),
        list(&[
            ("metadata", "kubernetes.NamespaceMetadata"),
            ("spec", "kubernetes.NamespaceSpec"),
            ("status", "kubernetes.NamespaceStatus"),
        ])
    );
    // `variables`: the policy's variables with their type per kind.
    assert_eq!(
        at_end(&mut server, "variables."),
        list(&[
            ("replicas", &format!("int ({deployment})")),
            ("team", &format!("string ({deployment})")),
        ])
    );
    // Below a variable of type int: no fields, but its member functions (methods): only the
    // lists library's `includes` of any value.
    let text = PARAMS_POLICY.replace("\"true\"", "\"variables.replicas.\"");
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": file, "version": 99},
               "contentChanges": [{"text": text}]}),
    );
    let r = server.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": file},
               "position": {"line": 20, "character": 17 + "variables.replicas.".len()}}),
    );
    assert_eq!(
        r["result"],
        json!([{"label": "includes", "kind": 2, "detail": "dyn.includes(dyn) -> bool"}]),
        "{r}"
    );

    // "Did you mean" below `request` too. kube-apiserver rejects the expression as well
    // (its type does not depend on a schema): the same fix is offered once, and each finding
    // can be suppressed.
    let typo = "request.userInfo.usrname == ''";
    at_end(&mut server, typo);
    server.sync();
    let codes: Vec<&str> = server.diagnostics[&file]
        .iter()
        .map(|d| d["code"].as_str().expect("code"))
        .collect();
    assert_eq!(codes, ["VAP001", "VAP100"]);
    let actions = code_actions(&mut server, &file, range(20, 36, 20, 36));
    let suppress = |rule: &str| {
        (
            format!("Suppress {rule} here (# vapcheck:ignore)"),
            vec![(20, 0, 20, 0, format!("  # vapcheck:ignore {rule}\n"))],
        )
    };
    assert_eq!(
        actions,
        [
            (
                "Did you mean `username`?".to_owned(),
                vec![(20, 34, 20, 41, "username".to_owned())]
            ),
            suppress("VAP001"),
            suppress("VAP100"),
        ]
    );
    let text = PARAMS_POLICY.replace("\"true\"", &format!("\"{typo}\""));
    apply_each(
        &mut server,
        &root,
        "params.yaml",
        &text,
        &actions,
        &[
            &[],
            &[("VAP001", true), ("VAP100", false)],
            &[("VAP001", false), ("VAP100", true)],
        ],
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

#[test]
fn completion_and_hover_of_functions_with_signatures() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let mut server = Server::start(&root);
    server.initialize(&root);
    let policy = uri(&root.join("policy.yaml"));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": policy, "languageId": "yaml", "version": 1,
                                "text": DEPLOYMENT_POLICY}}),
    );
    let mut version = 1;
    let mut edit = |server: &mut Server, expression: &str| {
        version += 1;
        let text = DEPLOYMENT_POLICY.replace("object.spec.replicsa <= 5", expression);
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": policy, "version": version},
                   "contentChanges": [{"text": text}]}),
        );
    };
    // (kind, label, detail) at the end of `expression` (from column 17 of line 12).
    let complete = |server: &mut Server, edit: &mut dyn FnMut(&mut Server, &str), e: &str| {
        edit(server, e);
        let r = server.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": policy},
                   "position": {"line": 12, "character": 17 + e.len()}}),
        );
        r["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|i| {
                (
                    i["kind"].as_u64().expect("kind"),
                    i["label"].as_str().expect("label").to_owned(),
                    i["detail"].as_str().expect("detail").to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    // After a `.` on a string: its member functions (method, 2), from the standard library,
    // cel-go's strings extension (version 2), Kubernetes' regex library and the lists
    // library's `includes` (on any value) of 1.37.
    let string = complete(&mut server, &mut edit, "object.metadata.name.");
    let labels: Vec<&str> = string.iter().map(|i| i.1.as_str()).collect();
    assert_eq!(
        labels,
        [
            "charAt",
            "contains",
            "endsWith",
            "find",
            "findAll",
            "format",
            "includes",
            "indexOf",
            "lastIndexOf",
            "lowerAscii",
            "matches",
            "replace",
            "size",
            "split",
            "startsWith",
            "substring",
            "trim",
            "upperAscii"
        ]
    );
    assert!(string.iter().all(|i| i.0 == 2), "{string:?}");
    let detail = |list: &[(u64, String, String)], name: &str| {
        list.iter()
            .find(|i| i.1 == name)
            .map(|i| i.2.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        detail(&string, "indexOf"),
        "string.indexOf(string) -> int; string.indexOf(string, int) -> int"
    );
    assert_eq!(detail(&string, "includes"), "dyn.includes(dyn) -> bool");
    // On a list, filtered by what is typed: a function and the macros.
    let list = complete(
        &mut server,
        &mut edit,
        "object.spec.template.spec.containers.ex",
    );
    assert_eq!(
        list,
        [
            (
                2,
                "exists".to_owned(),
                "macro e.exists(x, p) -> bool".to_owned()
            ),
            (
                2,
                "exists_one".to_owned(),
                "macro e.exists_one(x, p) -> bool".to_owned()
            ),
        ]
    );
    // At top level: the global functions (function, 3), with every overload.
    assert_eq!(
        complete(&mut server, &mut edit, "1 < si"),
        [
            (
                3,
                "sign".to_owned(),
                "sign(kubernetes.Quantity) -> int".to_owned()
            ),
            (
                3,
                "size".to_owned(),
                "size(bytes) -> int; size(list(A)) -> int; size(map(A, B)) -> int; size(string) -> int"
                    .to_owned()
            ),
        ]
    );
    assert_eq!(
        complete(&mut server, &mut edit, "ha"),
        [(3, "has".to_owned(), "macro has(e.f) -> bool".to_owned())]
    );
    // The fields of an object still come alone.
    assert_eq!(complete(&mut server, &mut edit, "object.spec.rep").len(), 1);

    // Hover on a call's name: its signatures, then the expression's type.
    let e = "object.metadata.name.startsWith('a') && size(object.metadata.name) > 1";
    edit(&mut server, e);
    let expression = "`spec.validations[0].expression` (the expression)\n\n- `apps/v1, Kind=Deployment`: `bool`\n";
    assert_eq!(
        hover(&mut server, &policy, 12, 17 + 23),
        json!(format!(
            "`startsWith`\n\n- `string.startsWith(string) -> bool`\n\n{expression}"
        ))
    );
    let at_size = 17 + e.find("size").expect("size") as u32;
    assert_eq!(
        hover(&mut server, &policy, 12, at_size + 1),
        json!(format!(
            "`size`\n\n- `size(bytes) -> int`\n- `size(list(A)) -> int`\n- `size(map(A, B)) -> int`\n- `size(string) -> int`\n\n{expression}"
        ))
    );
    // Functions of Kubernetes' libraries: the version that introduced them (k8s_env::decls,
    // from base.go: the quantity library in 1.28, the lists library's `includes` in 1.37),
    // also on a receiver that is not a selection.
    let e = "sign(quantity('1')) == 1 && [1].includes(1)";
    edit(&mut server, e);
    assert_eq!(
        hover(&mut server, &policy, 12, 17 + 5 + 2),
        json!(format!(
            "`quantity`\n\n- `quantity(string) -> kubernetes.Quantity` (Kubernetes 1.28 and later)\n\n{expression}"
        ))
    );
    let at_includes = 17 + e.find("includes").expect("includes") as u32;
    assert_eq!(
        hover(&mut server, &policy, 12, at_includes + 3),
        json!(format!(
            "`includes`\n\n- `dyn.includes(dyn) -> bool` (Kubernetes 1.37 and later)\n\n{expression}"
        ))
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// `text` with `from` replaced by `to`, which it must contain.
fn edited(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from}");
    text.replacen(from, to, 1)
}

/// The Deployment policy made one with a ConfigMap as its param (its typo fixed), and its
/// binding to one in another file.
fn limits_policy() -> String {
    let policy = edited(
        DEPLOYMENT_POLICY,
        "  name: replicas\nspec:\n",
        "  name: limits\nspec:\n  paramKind:\n    apiVersion: v1\n    kind: ConfigMap\n",
    );
    let policy = edited(
        &policy,
        "object.spec.replicsa <= 5",
        "object.spec.replicas <= int(params.data.max)",
    );
    policy
        + "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n"
        + "metadata:\n  name: limits\nspec:\n  policyName: limits\n  validationActions: [Deny]\n"
        + "  paramRef:\n    name: limits\n    namespace: default\n    parameterNotFoundAction: Deny\n"
}

const LIMITS_PARAM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: limits\n  namespace: default\ndata:\n  max: \"5\"\n";

/// The Deployment policy made a MutatingAdmissionPolicy with the same typo.
fn labels_map() -> String {
    let map = edited(
        DEPLOYMENT_POLICY,
        "kind: ValidatingAdmissionPolicy\nmetadata:\n  name: replicas\nspec:\n",
        "kind: MutatingAdmissionPolicy\nmetadata:\n  name: labels\nspec:\n  reinvocationPolicy: Never\n",
    );
    edited(
        &map,
        "  validations:\n  - expression: \"object.spec.replicsa <= 5\"\n",
        "  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      \
         expression: \"Object{spec: Object.spec{replicas: object.spec.replicsa}}\"\n",
    )
}

/// The answer of `vapcheck/sync`: how many policies the last check checked and how many
/// statuses it reused.
fn check_counts(server: &mut Server) -> (u64, u64) {
    let r = server.request("vapcheck/sync", json!({}));
    let n = |k: &str| r["result"][k].as_u64().unwrap_or_else(|| panic!("{r}"));
    (n("checked"), n("reused"))
}

/// The non-empty diagnostics a server holds, by URI.
fn held(server: &Server) -> BTreeMap<String, Vec<Value>> {
    server
        .diagnostics
        .iter()
        .filter(|(_, l)| !l.is_empty())
        .map(|(u, l)| (u.clone(), l.clone()))
        .collect()
}

#[test]
fn an_edit_rechecks_only_the_policies_it_changed() {
    let ws = workspace();
    let root = ws.path().canonicalize().expect("canonical");
    let (limits, map) = (limits_policy(), labels_map());
    for (name, text) in [
        ("limits.yaml", limits.as_str()),
        ("param.yaml", LIMITS_PARAM),
        ("map.yaml", map.as_str()),
    ] {
        std::fs::write(root.join(name), text).expect("write");
    }
    let mut server = Server::start(&root);
    server.initialize(&root);
    // Four ValidatingAdmissionPolicies and one MutatingAdmissionPolicy, all checked.
    assert_eq!(check_counts(&mut server), (5, 0));

    // Each step edits one buffer (also written to disk, as if saved, but without `didSave`
    // unless the step says so) and gives the policies checked and reused; after it, what the
    // server holds is exactly what a server started on the folder as it now is publishes, and
    // `vapcheck check -o sarif` on it finds.
    let widgets =
        WIDGET_POLICIES.replace("validationActions: [Deny]", "validationActions: [Denied]");
    let without_policy = limits
        .split_once("---\n")
        .map(|(_, binding)| binding.to_owned())
        .expect("two documents");
    let crd = WIDGET_CRD.replace(
        "              size: {type: integer}\n",
        "              size: {type: integer}\n              sise: {type: integer}\n",
    );
    let steps: [(&str, String, bool, (u64, u64)); 8] = [
        // Opened as it is on disk: nothing is checked again.
        ("policy.yaml", DEPLOYMENT_POLICY.to_owned(), false, (0, 5)),
        // Its typo fixed: only its policy.
        (
            "policy.yaml",
            DEPLOYMENT_POLICY.replace("replicsa", "replicas"),
            false,
            (1, 4),
        ),
        // A binding edited (an invalid action: kube-apiserver rejects it): no policy (its
        // policy's bindings evaluate it with no param object of the folder, before and after).
        ("widgets.yaml", widgets, false, (0, 5)),
        // The param object renamed: the policy whose binding named it, because what its
        // bindings evaluate it with is part of a policy's result (runtime safety on
        // `params`): its binding now finds no param object.
        (
            "param.yaml",
            LIMITS_PARAM.replace("name: limits", "name: limitz"),
            false,
            (1, 4),
        ),
        // The MutatingAdmissionPolicy's typo fixed: only it.
        (
            "map.yaml",
            map.replace("replicsa", "replicas"),
            false,
            (1, 4),
        ),
        // The CRD the settings name, saved with the typo's field: every policy again.
        ("crds/widget.yaml", crd, true, (5, 0)),
        // A policy removed from its file (its binding stays): nothing checked.
        ("limits.yaml", without_policy, false, (0, 4)),
        // The Deployment policy's typo back: only it.
        ("policy.yaml", DEPLOYMENT_POLICY.to_owned(), false, (1, 3)),
    ];
    let mut version = 1;
    let mut opened = std::collections::BTreeSet::new();
    for (file, text, save, counts) in steps {
        let u = uri(&root.join(file));
        std::fs::write(root.join(file), &text).expect("write");
        version += 1;
        if opened.insert(file) {
            server.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": u, "languageId": "yaml", "version": version,
                                        "text": text}}),
            );
        } else {
            server.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": u, "version": version},
                       "contentChanges": [{"text": text}]}),
            );
        }
        if save {
            server.notify("textDocument/didSave", json!({"textDocument": {"uri": u}}));
        }
        assert_eq!(check_counts(&mut server), counts, "{file}");
        let mut fresh = Server::start(&root);
        fresh.initialize(&root);
        fresh.sync();
        let whole = held(&fresh);
        assert_eq!(held(&server), whole, "{file}");
        let (code, stderr) = fresh.shutdown();
        assert_eq!((code, stderr.as_str()), (0, ""));
        let sarif: BTreeMap<String, Vec<Expected>> = whole
            .iter()
            .map(|(u, l)| (u.clone(), published(l)))
            .collect();
        assert_eq!(sarif, sarif_diagnostics(&root), "{file}");
    }
    // What the steps left: the Deployment policy's typo, the document that is not YAML and
    // the binding's rejection; the CRD's new field cleared the widget typo, the
    // MutatingAdmissionPolicy's fix its warning.
    let codes: Vec<(String, Vec<String>)> = held(&server)
        .iter()
        .map(|(u, l)| {
            let file = u.rsplit('/').next().unwrap_or_default().to_owned();
            (file, published(l).into_iter().map(|d| d.2).collect())
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("policy.yaml".to_owned(), vec!["VAP100".to_owned()]),
            (
                "widgets.yaml".to_owned(),
                vec!["VAP003".to_owned(), "VAP001".to_owned()]
            ),
        ]
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// A MutatingAdmissionPolicy on Deployments: a match condition (line 13) and an
/// applyConfiguration mutation (line 16), whose expression is compiled with the patch types.
const DEPLOYMENT_MAP: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: replicas-default
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["deployments"]
  matchConditions:
  - name: unset
    expression: "!has(object.spec.replicas)"
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{spec: Object.spec{replicas: object.spec.minReadySeconds + 1}}"
"#;

#[test]
fn hover_and_completion_in_a_mutating_admission_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("map.yaml"), DEPLOYMENT_MAP).expect("write");
    let mut server = Server::start(&root);
    server.initialize(&root);
    let map = uri(&root.join("map.yaml"));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": map, "languageId": "yaml", "version": 1,
                                "text": DEPLOYMENT_MAP}}),
    );
    let deployment = "apps/v1, Kind=Deployment";
    let replicas = "Number of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1.";
    // Line 13 (0-based): `    expression: "!has(object.spec.replicas)"`, `replicas` at 35..43.
    assert_eq!(
        hover(&mut server, &map, 13, 38),
        json!(format!(
            "`object.spec.replicas`\n\n- `{deployment}`: `int`\n\n{replicas}\n\n`spec.matchConditions[0].expression` (the expression)\n\n- `{deployment}`: `bool`\n"
        ))
    );
    // Line 18: the mutation, typed with the patch types: the whole expression is an `Object`
    // (cel-go's name of the apply configuration's type).
    let line = DEPLOYMENT_MAP.lines().nth(18).unwrap_or_default();
    let at = line.find("minReadySeconds").unwrap_or_default() as u32;
    let ready = "Minimum number of seconds for which a newly created pod should be ready without any of its container crashing, for it to be considered available. Defaults to 0 (pod will be considered available as soon as it is ready)";
    assert_eq!(
        hover(&mut server, &map, 18, at + 3),
        json!(format!(
            "`object.spec.minReadySeconds`\n\n- `{deployment}`: `int`\n\n{ready}\n\n`spec.mutations[0].applyConfiguration.expression` (the expression)\n\n- `{deployment}`: `Object`\n"
        ))
    );
    // Completion after `object.spec.` in the match condition: the Deployment's spec fields.
    let edited = DEPLOYMENT_MAP.replace("!has(object.spec.replicas)", "object.spec.");
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": map, "version": 2},
               "contentChanges": [{"text": edited}]}),
    );
    let labels: Vec<String> = completion(&mut server, &map, 13, 29)
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(
        labels,
        [
            "minReadySeconds",
            "paused",
            "progressDeadlineSeconds",
            "replicas",
            "revisionHistoryLimit",
            "selector",
            "strategy",
            "template"
        ]
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

/// A ValidatingWebhookConfiguration whose webhook matches Deployments and has a match
/// condition on line 16 (0-based).
const DEPLOYMENT_WEBHOOK: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: replicas.example.com
webhooks:
- name: replicas.example.com
  sideEffects: None
  admissionReviewVersions: ["v1"]
  clientConfig:
    service: {namespace: ns, name: svc}
  rules:
  - apiGroups: ["apps"]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["deployments"]
  matchConditions:
  - name: several
    expression: "object.spec.replicas > 1"
"#;

#[test]
fn hover_and_completion_in_a_webhook_match_condition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::write(root.join("webhook.yaml"), DEPLOYMENT_WEBHOOK).expect("write");
    let mut server = Server::start(&root);
    server.initialize(&root);
    let file = uri(&root.join("webhook.yaml"));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": file, "languageId": "yaml", "version": 1,
                                "text": DEPLOYMENT_WEBHOOK}}),
    );
    let deployment = "apps/v1, Kind=Deployment";
    let replicas = "Number of desired pods. This is a pointer to distinguish between explicit zero and not specified. Defaults to 1.";
    let line = DEPLOYMENT_WEBHOOK.lines().nth(17).unwrap_or_default();
    let at = line.find("replicas").unwrap_or_default() as u32;
    assert_eq!(
        hover(&mut server, &file, 17, at + 2),
        json!(format!(
            "`object.spec.replicas`\n\n- `{deployment}`: `int`\n\n{replicas}\n\n`webhooks[0].matchConditions[0].expression` (the expression)\n\n- `{deployment}`: `bool`\n"
        ))
    );
    let edited = DEPLOYMENT_WEBHOOK.replace("object.spec.replicas > 1", "object.spec.");
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": file, "version": 2},
               "contentChanges": [{"text": edited}]}),
    );
    let end = edited
        .lines()
        .nth(17)
        .unwrap_or_default()
        .rfind('"')
        .unwrap_or_default() as u32;
    let labels: Vec<String> = completion(&mut server, &file, 17, end)
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(
        labels,
        [
            "minReadySeconds",
            "paused",
            "progressDeadlineSeconds",
            "replicas",
            "revisionHistoryLimit",
            "selector",
            "strategy",
            "template"
        ]
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}

#[test]
fn hover_describes_custom_resource_fields_from_the_crd_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(root.join("crds")).expect("mkdir");
    let crd = WIDGET_CRD.replace(
        "size: {type: integer}",
        "size: {type: integer, description: How many parts the widget has.}",
    );
    let policy = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: widgets
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["widgets"]
  validations:
  - expression: "object.spec.size < 10"
"#;
    for (name, text) in [
        ("crds/widget.yaml", crd.as_str()),
        (".vapcheck.yaml", "crds: [crds/widget.yaml]\n"),
        ("policy.yaml", policy),
    ] {
        std::fs::write(root.join(name), text).expect("write");
    }
    let mut server = Server::start(&root);
    server.initialize(&root);
    let file = uri(&root.join("policy.yaml"));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": file, "languageId": "yaml", "version": 1,
                                "text": policy}}),
    );
    let widget = "example.com/v1, Kind=Widget";
    let at = policy
        .lines()
        .nth(12)
        .unwrap_or_default()
        .find("size")
        .unwrap_or_default() as u32;
    assert_eq!(
        hover(&mut server, &file, 12, at + 1),
        json!(format!(
            "`object.spec.size`\n\n- `{widget}`: `int`\n\nHow many parts the widget has.\n\n`spec.validations[0].expression` (the expression)\n\n- `{widget}`: `bool`\n"
        ))
    );
    // Edited on disk, the CRD's new description is the hover's.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let changed = crd.replace("How many parts the widget has.", "The part count.");
    std::fs::write(root.join("crds/widget.yaml"), &changed).expect("write");
    let set_later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(root.join("crds/widget.yaml"))
        .and_then(|f| f.set_modified(set_later))
        .expect("touch");
    assert_eq!(
        hover(&mut server, &file, 12, at + 1),
        json!(format!(
            "`object.spec.size`\n\n- `{widget}`: `int`\n\nThe part count.\n\n`spec.validations[0].expression` (the expression)\n\n- `{widget}`: `bool`\n"
        ))
    );
    let (code, stderr) = server.shutdown();
    assert_eq!((code, stderr.as_str()), (0, ""));
}
