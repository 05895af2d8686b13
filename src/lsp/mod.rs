//! `vapcheck lsp`: a Language Server Protocol server over standard input and output, for
//! editors (docs/editor.md). It publishes the findings of `vapcheck check` on the workspace
//! folder as diagnostics: the same analysis ([`crate::cli::check_sources`]), on the files
//! `check` reads under the folder, with the unsaved text of the buffers the editor has open.
//!
//! Built on `lsp-server` and `lsp-types` (rust-analyzer's protocol crates): one thread reads
//! messages, this one answers them; notifications that arrive while a check runs are taken
//! together, so that a burst of edits is checked once.

pub mod actions;
pub mod complete;
pub mod describe;
pub mod hover;
pub mod reads;
pub mod text;
pub mod timing;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    DidSaveTextDocument, Notification as _, PublishDiagnostics,
};
use lsp_types::{
    CodeDescription, Diagnostic, DiagnosticSeverity, InitializeParams, InitializeResult,
    NumberOrString, PublishDiagnosticsParams, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions,
    TextDocumentSyncSaveOptions, Uri,
};

use self::text::Encoding;
use crate::cli::documents::{self, Source};
use crate::cli::reuse::Reuse;
use crate::cli::{BackendProvider, CheckArgs, SchemaOptions, config_file};
use crate::finding::{Finding, Rule};

/// Runs the server on standard input and output until the client's `exit`. `Err` is why it
/// stopped otherwise (the connection broke, the client sent something that is not JSON-RPC).
pub fn run_stdio(provider: &dyn BackendProvider) -> Result<(), String> {
    let (connection, io) = Connection::stdio();
    let served = serve(&connection, provider);
    drop(connection);
    let joined = io
        .join()
        .map_err(|e| format!("reading or writing the client: {e}"));
    served.and(joined)
}

/// Serves one client on `connection`: the initialize handshake, then every message until
/// `shutdown` and `exit`.
pub fn serve(connection: &Connection, provider: &dyn BackendProvider) -> Result<(), String> {
    let (id, params) = connection
        .initialize_start()
        .map_err(|e| format!("initialize: {e}"))?;
    let params: InitializeParams = serde_json::from_value(params)
        .map_err(|e| format!("initialize: invalid parameters: {e}"))?;
    let encoding = Encoding::choose(
        params
            .capabilities
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_deref())
            .unwrap_or_default(),
    );
    let root = workspace_root(&params);
    let result = InitializeResult {
        capabilities: capabilities(encoding),
        server_info: Some(ServerInfo {
            name: "vapcheck".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
    };
    let result = serde_json::to_value(result).map_err(|e| e.to_string())?;
    connection
        .initialize_finish(id, result)
        .map_err(|e| format!("initialize: {e}"))?;
    let mut server = Server {
        connection,
        provider,
        encoding,
        root,
        open: BTreeMap::new(),
        published: BTreeMap::new(),
        touched: BTreeSet::new(),
        reuse: Reuse::default(),
        reads: reads::Reads::default(),
        disk: HashMap::new(),
        last: None,
    };
    server.check_and_publish();
    server.main_loop()
}

/// What the server offers.
fn capabilities(encoding: Encoding) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(encoding.kind()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::FULL),
                save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(lsp_types::HoverProviderCapability::Simple(true)),
        completion_provider: Some(lsp_types::CompletionOptions {
            trigger_characters: Some(vec![".".into()]),
            ..lsp_types::CompletionOptions::default()
        }),
        code_action_provider: Some(lsp_types::CodeActionProviderCapability::Options(
            lsp_types::CodeActionOptions {
                code_action_kinds: Some(vec![lsp_types::CodeActionKind::QUICKFIX]),
                ..lsp_types::CodeActionOptions::default()
            },
        )),
        ..ServerCapabilities::default()
    }
}

/// The workspace folder: the first of `workspaceFolders`, else `rootUri`, else the working
/// directory.
#[allow(deprecated)] // `rootUri`: older clients send only it.
fn workspace_root(params: &InitializeParams) -> PathBuf {
    params
        .workspace_folders
        .iter()
        .flatten()
        .map(|f| f.uri.as_str())
        .chain(params.root_uri.as_ref().map(|u| u.as_str()))
        .find_map(text::uri_to_path)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

struct Server<'a> {
    connection: &'a Connection,
    provider: &'a dyn BackendProvider,
    encoding: Encoding,
    root: PathBuf,
    /// The text of every open buffer, by its path.
    open: BTreeMap<PathBuf, String>,
    /// The files whose last published diagnostics were not empty, with those diagnostics.
    published: BTreeMap<PathBuf, Vec<Diagnostic>>,
    /// The documents opened, changed or closed since the last check: their diagnostics are
    /// published after it even when they are the same.
    touched: BTreeSet<PathBuf>,
    /// The backends of the checks, hover and completion, and the statuses of the policies
    /// checked, kept while the schema options stay the same and no file is saved (a CRD the
    /// settings name may have changed): an edit re-checks only the policies it changed.
    reuse: Reuse,
    /// The sources read, kept by their text: a check or a hover reads again only the
    /// documents that changed.
    reads: reads::Reads,
    /// The files of the folder read from disk, each with its modification time and length
    /// when read: read again when either changed, or after a `didSave` or
    /// `didChangeWatchedFiles` (all of them).
    disk: DiskFiles,
    /// The last check: its analysis and the findings published (those not suppressed), for
    /// code actions.
    last: Option<(crate::cli::Analysis, Vec<Finding>)>,
}

impl Server<'_> {
    fn main_loop(&mut self) -> Result<(), String> {
        while let Ok(message) = self.connection.receiver.recv() {
            let mut changed = false;
            let mut next = Some(message);
            // The notifications already queued are handled before checking again.
            while let Some(message) = next {
                match message {
                    Message::Request(req) => {
                        // A request is answered on the text as edited before it.
                        if changed {
                            self.check_and_publish();
                            changed = false;
                        }
                        if self
                            .connection
                            .handle_shutdown(&req)
                            .map_err(|e| format!("shutdown: {e}"))?
                        {
                            return Ok(());
                        }
                        self.request(req);
                    }
                    Message::Notification(n) => {
                        if n.method == "exit" {
                            // `exit` without `shutdown`: the protocol's exit code 1.
                            return Err("exit before shutdown".into());
                        }
                        changed |= self.notification(n);
                    }
                    Message::Response(_) => {}
                }
                next = self.connection.receiver.try_recv().ok();
            }
            if changed {
                self.check_and_publish();
            }
        }
        Err("the client closed the connection without exit".into())
    }

    fn send(&self, message: Message) {
        // The writer thread stops only when the client is gone; the reader then ends the loop.
        let _ = self.connection.sender.send(message);
    }

    fn request(&mut self, req: Request) {
        use lsp_types::request::{CodeActionRequest, Completion, HoverRequest, Request as _};
        let response = match req.method.as_str() {
            CodeActionRequest::METHOD => {
                match serde_json::from_value::<lsp_types::CodeActionParams>(req.params) {
                    Ok(p) => {
                        let actions = self.code_actions(&p.text_document.uri, p.range);
                        Response::new_ok(req.id, actions)
                    }
                    Err(e) => Response::new_err(
                        req.id,
                        ErrorCode::InvalidParams as i32,
                        format!("textDocument/codeAction: {e}"),
                    ),
                }
            }
            Completion::METHOD => {
                match serde_json::from_value::<lsp_types::CompletionParams>(req.params) {
                    Ok(p) => {
                        let items = self.complete(&p.text_document_position);
                        Response::new_ok(req.id, items)
                    }
                    Err(e) => Response::new_err(
                        req.id,
                        ErrorCode::InvalidParams as i32,
                        format!("textDocument/completion: {e}"),
                    ),
                }
            }
            HoverRequest::METHOD => {
                match serde_json::from_value::<lsp_types::HoverParams>(req.params) {
                    Ok(p) => {
                        let hover = self.hover(&p.text_document_position_params);
                        Response::new_ok(req.id, hover)
                    }
                    Err(e) => Response::new_err(
                        req.id,
                        ErrorCode::InvalidParams as i32,
                        format!("textDocument/hover: {e}"),
                    ),
                }
            }
            // Answered once the edits before it are checked: how many policies that check
            // checked and how many statuses it took from the check before (`cli::reuse`).
            "vapcheck/sync" => Response::new_ok(
                req.id,
                serde_json::json!({
                    "checked": self.reuse.checked,
                    "reused": self.reuse.reused,
                }),
            ),
            _ => Response::new_err(
                req.id,
                ErrorCode::MethodNotFound as i32,
                format!("vapcheck lsp does not answer {}", req.method),
            ),
        };
        self.send(response.into());
    }

    /// The text of a file: its open buffer, else the file on disk.
    fn text_of(&self, path: &Path) -> Option<String> {
        match self.open.get(path) {
            Some(t) => Some(t.clone()),
            None => std::fs::read_to_string(path).ok(),
        }
    }

    /// The policy expression at a position, with the settings and the backends (loaded
    /// when the settings changed).
    fn expression_at(
        &mut self,
        at: &lsp_types::TextDocumentPositionParams,
    ) -> Option<(hover::AtCursor, CheckArgs)> {
        let path = text::uri_to_path(at.text_document.uri.as_str())?;
        let content = self.text_of(&path)?;
        let byte = text::offset(&content, at.position, self.encoding);
        let before = &content[..byte];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let cursor = crate::cli::positions::Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        };
        let name = path.display().to_string();
        let found = match self.reads.expression_at(&name, &content, cursor) {
            Some(found) => found?,
            None => hover::expression_at(&name, &content, cursor)?,
        };
        let args = self.settings().ok()?;
        let options = schema_options(&args);
        let provider = self.provider;
        let reuse = &mut self.reuse;
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            reuse.backends(&options, provider).map(|_| ())
        }));
        match loaded {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.log(&e);
                return None;
            }
            Err(_) => return None,
        }
        Some((found, args))
    }

    /// Runs `f` on the backends (loaded by [`Self::expression_at`]), a panic being `None`.
    fn with_backends<T>(
        &self,
        args: &CheckArgs,
        f: impl FnOnce(&crate::policy::CheckOptions, &crate::policy::Backends<'_>) -> T,
    ) -> Option<T> {
        let loaded = self.reuse.loaded()?;
        let backends = crate::policy::Backends {
            rest_mapper: loaded.rest_mapper.as_ref(),
            discovery: loaded.discovery.as_deref(),
            schemas: loaded.schemas.as_ref(),
            checker: loaded.checker.as_ref(),
        };
        let check = crate::policy::CheckOptions {
            mode: args.mode().into(),
            kind_limit: args.kind_limit,
            estimate_costs: false,
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&check, &backends))).ok()
    }

    /// Completion: the fields of a selection ([`complete`]).
    fn complete(
        &mut self,
        at: &lsp_types::TextDocumentPositionParams,
    ) -> Vec<lsp_types::CompletionItem> {
        let mut timings = timing::Timings::start("completion");
        let Some((found, args)) = self.expression_at(at) else {
            return Vec::new();
        };
        timings.mark("expression");
        let items = self
            .with_backends(&args, |options, backends| {
                complete::items(&found, options, backends)
            })
            .unwrap_or_default();
        timings.mark("items");
        items
    }

    /// The code actions on the findings of the last check in the file at `uri` whose
    /// diagnostics touch `range` ([`actions`]): for each, the runtime-safety rewrite when
    /// `check` has one, "did you mean" for an undefined field with a close field name, and the
    /// suppression comment.
    fn code_actions(
        &mut self,
        uri: &Uri,
        range: lsp_types::Range,
    ) -> Vec<lsp_types::CodeActionOrCommand> {
        let Some(file) = text::uri_to_path(uri.as_str()).map(|p| p.display().to_string()) else {
            return Vec::new();
        };
        let Some((analysis, findings)) = self.last.as_ref() else {
            return Vec::new();
        };
        let Some(text) = analysis.sources.get(&file) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        // (diagnostic, undefined field name) for "did you mean", which needs the backends.
        let mut typos = Vec::new();
        let lines = text::Lines::new(text);
        for f in findings.iter().filter(|f| f.file() == file) {
            let d = diagnostic_in(f, &lines, self.encoding);
            if !actions::overlaps(d.range, range) {
                continue;
            }
            if let Some(fix) = f.file_fix() {
                let edit = lsp_types::TextEdit {
                    range: lsp_types::Range {
                        start: text::to_lsp(text, fix.start, self.encoding),
                        end: text::to_lsp(text, fix.end, self.encoding),
                    },
                    new_text: fix.text.clone(),
                };
                let title = format!("Rewrite: {}", crate::finding::FIX_DESCRIPTION);
                out.push(actions::quick_fix(title, &d, uri, vec![edit]));
            }
            // A type-checking warning, or kube-apiserver's rejection for the same error (an
            // expression whose types do not depend on the schemas: `request`, `variables`).
            if matches!(f.rule, Rule::TypeWarning | Rule::Rejected)
                && let Some(name) = actions::undefined_field(&f.message)
            {
                typos.push((d.clone(), name.to_owned()));
            }
            if let Some(edit) = suppression_edit(analysis, f, text) {
                let title = format!("Suppress {} here (# vapcheck:ignore)", f.rule.id());
                out.push(actions::quick_fix(title, &d, uri, vec![edit]));
            }
        }
        let text = text.clone();
        for (d, name) in typos {
            for edit in self.did_you_mean(uri, &text, &d, &name) {
                let title = format!("Did you mean `{}`?", edit.new_text);
                // Offered once when two findings are the same error (VAP001 and VAP100).
                let offered = out.iter().any(|a| {
                    matches!(a, lsp_types::CodeActionOrCommand::CodeAction(a)
                        if a.title == title
                            && a.edit.as_ref().and_then(|e| e.changes.as_ref())
                                .and_then(|c| c.get(uri))
                                .is_some_and(|e| e.as_slice() == std::slice::from_ref(&edit)))
                });
                if offered {
                    continue;
                }
                // Before the suppression of the same finding: the fix comes first.
                let at = out
                    .iter()
                    .position(|a| {
                        matches!(a, lsp_types::CodeActionOrCommand::CodeAction(a)
                            if a.diagnostics.as_deref() == Some(std::slice::from_ref(&d))
                                && a.title.starts_with("Suppress"))
                    })
                    .unwrap_or(out.len());
                out.insert(at, actions::quick_fix(title, &d, uri, vec![edit]));
            }
        }
        out
    }

    /// The replacements of the undefined field `name` at the end of `d`'s range (`.name`)
    /// by the nearest fields of the type reached ([`actions::nearest`] among
    /// [`complete::fields`]: below `object`, `oldObject`, `params`, `request`,
    /// `namespaceObject`, or directly below `variables`).
    fn did_you_mean(
        &mut self,
        uri: &Uri,
        text: &str,
        d: &Diagnostic,
        name: &str,
    ) -> Vec<lsp_types::TextEdit> {
        let end = d.range.end;
        let Some(start) = end
            .character
            .checked_sub(u32::try_from(name.len()).unwrap_or(u32::MAX))
        else {
            return Vec::new();
        };
        let start = lsp_types::Position {
            line: end.line,
            character: start,
        };
        // The word in the text is the field's name (an identifier: no escapes).
        let (b0, b1) = (
            text::offset(text, start, self.encoding),
            text::offset(text, end, self.encoding),
        );
        if text.get(b0..b1) != Some(name) {
            return Vec::new();
        }
        let at = lsp_types::TextDocumentPositionParams {
            text_document: lsp_types::TextDocumentIdentifier { uri: uri.clone() },
            position: end,
        };
        let Some((found, args)) = self.expression_at(&at) else {
            return Vec::new();
        };
        let Some((root, path, typed)) = complete::context(&found.expression, found.index) else {
            return Vec::new();
        };
        if typed != name {
            return Vec::new();
        }
        let fields = self
            .with_backends(&args, |options, backends| {
                complete::fields(&found, root, &path, options, backends)
            })
            .unwrap_or_default();
        actions::nearest(name, fields.keys().map(String::as_str))
            .into_iter()
            .map(|new_text| lsp_types::TextEdit {
                range: lsp_types::Range { start, end },
                new_text,
            })
            .collect()
    }

    /// Hover: the types at the cursor ([`hover`]); `None` outside an expression.
    fn hover(&mut self, at: &lsp_types::TextDocumentPositionParams) -> Option<lsp_types::Hover> {
        let mut timings = timing::Timings::start("hover");
        let (found, args) = self.expression_at(at)?;
        timings.mark("expression");
        let descriptions = describe::Descriptions::of(&schema_options(&args));
        let value = self.with_backends(&args, |options, backends| {
            hover::hover_text(&found, options, backends, &descriptions)
        })?;
        timings.mark("types");
        Some(lsp_types::Hover {
            contents: lsp_types::HoverContents::Markup(lsp_types::MarkupContent {
                kind: lsp_types::MarkupKind::Markdown,
                value,
            }),
            range: None,
        })
    }

    /// Handles a notification; whether the workspace's text changed.
    fn notification(&mut self, n: Notification) -> bool {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                match n.extract::<lsp_types::DidOpenTextDocumentParams>(DidOpenTextDocument::METHOD)
                {
                    Ok(p) => match text::uri_to_path(p.text_document.uri.as_str()) {
                        Some(path) => {
                            self.touched.insert(path.clone());
                            self.open.insert(path, p.text_document.text);
                            true
                        }
                        None => false,
                    },
                    Err(e) => self.log(&format!("didOpen: {e:?}")),
                }
            }
            DidChangeTextDocument::METHOD => match n
                .extract::<lsp_types::DidChangeTextDocumentParams>(DidChangeTextDocument::METHOD)
            {
                Ok(p) => {
                    let Some(path) = text::uri_to_path(p.text_document.uri.as_str()) else {
                        return false;
                    };
                    self.touched.insert(path.clone());
                    let buffer = self.open.entry(path).or_default();
                    for change in p.content_changes {
                        match change.range {
                            // Ranges only from a client that ignores the FULL sync asked for.
                            Some(r) => {
                                let start = text::offset(buffer, r.start, self.encoding);
                                let end = text::offset(buffer, r.end, self.encoding).max(start);
                                buffer.replace_range(start..end, &change.text);
                            }
                            None => *buffer = change.text,
                        }
                    }
                    true
                }
                Err(e) => self.log(&format!("didChange: {e:?}")),
            },
            DidCloseTextDocument::METHOD => {
                match n
                    .extract::<lsp_types::DidCloseTextDocumentParams>(DidCloseTextDocument::METHOD)
                {
                    Ok(p) => text::uri_to_path(p.text_document.uri.as_str()).is_some_and(|path| {
                        let was_open = self.open.remove(&path).is_some();
                        self.touched.insert(path);
                        was_open
                    }),
                    Err(e) => self.log(&format!("didClose: {e:?}")),
                }
            }
            // The file on disk changed: saved, or changed by another program (a CRD the
            // settings name, maybe: the backends are loaded again).
            DidSaveTextDocument::METHOD | DidChangeWatchedFiles::METHOD => {
                self.reuse.forget();
                self.disk.clear();
                true
            }
            _ => false,
        }
    }

    /// Logs `message` in the client's log; returns false (nothing changed).
    fn log(&self, message: &str) -> bool {
        self.send(
            Notification::new(
                lsp_types::notification::LogMessage::METHOD.into(),
                lsp_types::LogMessageParams {
                    typ: lsp_types::MessageType::WARNING,
                    message: format!("vapcheck: {message}"),
                },
            )
            .into(),
        );
        false
    }

    /// The sources `check` on the workspace folder reads, with the text of open buffers
    /// instead of the file's; open buffers of manifest files outside it come after them.
    fn sources(&mut self) -> Vec<Source> {
        let (paths, _unlistable) = documents::expand(std::slice::from_ref(&self.root));
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut disk = std::mem::take(&mut self.disk);
        for path in paths {
            let bytes = match self.open.get(&path) {
                Some(text) => Ok(text.clone().into_bytes()),
                None => read_file(&mut disk, &path),
            };
            out.push(Source {
                name: path.display().to_string(),
                bytes,
            });
            seen.insert(path);
        }
        // Only the files still in the folder are kept.
        disk.retain(|path, _| seen.contains(path));
        self.disk = disk;
        for (path, text) in &self.open {
            let manifest = path.file_name().is_some_and(|n| {
                crate::apiserver::static_manifests::is_manifest_file(&n.to_string_lossy())
            });
            if manifest && !seen.contains(path) {
                out.push(Source {
                    name: path.display().to_string(),
                    bytes: Ok(text.clone().into_bytes()),
                });
            }
        }
        out
    }

    /// The settings of `check` for the workspace: `.vapcheck.yaml` in the folder or above.
    fn settings(&self) -> Result<CheckArgs, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Command {
            #[command(flatten)]
            args: CheckArgs,
        }
        let args =
            Command::try_parse_from([std::ffi::OsStr::new("vapcheck-lsp"), self.root.as_os_str()])
                .map_err(|e| e.to_string())?
                .args;
        match config_file::find(None, &self.root) {
            None => Ok(args),
            Some(path) => {
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                config_file::read(&path).and_then(|file| config_file::apply(&args, &file, &dir))
            }
        }
    }

    /// Checks the workspace and publishes the diagnostics of every file that has some, and
    /// empty ones for the files that had some and for open buffers.
    fn check_and_publish(&mut self) {
        let mut timings = timing::Timings::start("check");
        let sources = self.sources();
        timings.mark("sources");
        let names: BTreeSet<String> = sources.iter().map(|s| s.name.clone()).collect();
        let checked = self.settings().and_then(|args| {
            let provider = self.provider;
            let reads = &mut self.reads;
            // A bug in the analysis must not take the editor's server down with it.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let (analysis, findings) = crate::cli::check_sources(
                    sources,
                    &args,
                    provider,
                    &mut self.reuse,
                    |name, text| reads.read(name, text),
                )?;
                timings.mark("analysis");
                let (findings, malformed) = unsuppressed(&analysis, findings, &args);
                timings.mark("suppressions");
                Ok::<_, String>((analysis, findings, malformed))
            }))
            .unwrap_or_else(|_| Err("internal error while checking (a panic)".into()))
        });
        self.reads.retain(&names);
        let checked = checked.map(|(analysis, findings, malformed)| {
            for e in malformed {
                self.log(&e);
            }
            (analysis, findings)
        });
        let (analysis, findings) = match checked {
            Ok(x) => x,
            Err(e) => {
                self.log(&e);
                // Nothing is known: the old diagnostics would be stale.
                (
                    crate::cli::Analysis {
                        checked: Vec::new(),
                        sources: BTreeMap::new(),
                    },
                    Vec::new(),
                )
            }
        };
        let mut by_file: BTreeMap<PathBuf, Vec<Diagnostic>> = BTreeMap::new();
        // The lines of each file, split once.
        let mut lines: HashMap<&str, text::Lines<'_>> = HashMap::new();
        for f in &findings {
            let lines = lines.entry(f.file()).or_insert_with(|| {
                text::Lines::new(
                    analysis
                        .sources
                        .get(f.file())
                        .map(String::as_str)
                        .unwrap_or_default(),
                )
            });
            by_file
                .entry(PathBuf::from(f.file()))
                .or_default()
                .push(diagnostic_in(f, lines, self.encoding));
        }
        timings.mark("diagnostics");
        // A file's diagnostics are published when they changed (the client keeps the last
        // ones of each file), and for the documents the notifications were about.
        let touched = std::mem::take(&mut self.touched);
        let mut clear: BTreeSet<PathBuf> = self.published.keys().cloned().collect();
        clear.extend(self.open.keys().cloned());
        let mut published = BTreeMap::new();
        for (path, diagnostics) in by_file {
            clear.remove(&path);
            if touched.contains(&path) || self.published.get(&path) != Some(&diagnostics) {
                self.publish(&path, diagnostics.clone());
            }
            published.insert(path, diagnostics);
        }
        for path in clear {
            if touched.contains(&path) || self.published.contains_key(&path) {
                self.publish(&path, Vec::new());
            }
        }
        self.published = published;
        self.last = Some((analysis, findings));
        timings.mark("publish");
    }

    fn publish(&self, path: &Path, diagnostics: Vec<Diagnostic>) {
        let Ok(uri) = text::path_to_uri(path).parse::<Uri>() else {
            return;
        };
        self.send(
            Notification::new(
                PublishDiagnostics::METHOD.into(),
                PublishDiagnosticsParams {
                    uri,
                    diagnostics,
                    version: None,
                },
            )
            .into(),
        );
    }
}

/// Files read from disk, each with its modification time and length when read.
type DiskFiles = HashMap<PathBuf, (Option<SystemTime>, u64, Result<Vec<u8>, String>)>;

/// The bytes of the file at `path`: those read before (in `disk`) when its modification time
/// and length are the same, else read now (and kept).
fn read_file(disk: &mut DiskFiles, path: &Path) -> Result<Vec<u8>, String> {
    let stamp = std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.len()));
    if let (Some((modified, len)), Some((kept_modified, kept_len, bytes))) = (stamp, disk.get(path))
        && modified.is_some()
        && modified == *kept_modified
        && len == *kept_len
    {
        return bytes.clone();
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string());
    // A file modified in the last seconds may be modified again with the same time stamp
    // (the kernel's clock for them is coarse) and length: it is not kept until it is older.
    let settled = |m: SystemTime| {
        SystemTime::now()
            .duration_since(m)
            .is_ok_and(|age| age > std::time::Duration::from_secs(2))
    };
    match stamp {
        Some((Some(modified), len)) if settled(modified) => {
            disk.insert(path.to_path_buf(), (Some(modified), len, bytes.clone()));
        }
        _ => {
            disk.remove(path);
        }
    }
    bytes
}

/// The findings `check` does not suppress (`cli::suppressed`: `# vapcheck:ignore` comments,
/// the `vapcheck.io/ignore` annotation, the settings' ignores and `off` levels), and the
/// errors of suppressions that do not parse.
fn unsuppressed(
    analysis: &crate::cli::Analysis,
    findings: Vec<Finding>,
    args: &CheckArgs,
) -> (Vec<Finding>, Vec<String>) {
    use crate::cli::suppressed;
    if !suppressed::wanted(&args.rules, &analysis.sources) {
        return (findings, Vec::new());
    }
    let (marks, malformed) =
        suppressed::suppressions(&analysis.checked, &findings, &analysis.sources, &args.rules);
    let kept = findings
        .into_iter()
        .zip(marks)
        .filter(|(_, s)| s.is_none())
        .map(|(f, _)| f)
        .collect();
    (kept, malformed)
}

/// The edit that suppresses finding `f` (in `text`, its file's text as checked): the comment
/// line `# vapcheck:ignore RULE` inserted above the line where its field starts (or above
/// its own line when the field has no place), kept only when the object's document reads
/// the same with it (the comment must not land inside a block scalar).
fn suppression_edit(
    analysis: &crate::cli::Analysis,
    f: &Finding,
    text: &str,
) -> Option<lsp_types::TextEdit> {
    use crate::cli::suppressed;
    let at = f.position?;
    let doc = analysis
        .checked
        .get(f.object.entry)
        .and_then(|c| suppressed::document(c, &analysis.sources));
    let line = doc
        .as_ref()
        .and_then(|d| suppressed::field_start_line(d, &f.field_ref))
        .unwrap_or(at.line);
    let comment = actions::suppression_line(text, line, f.rule.id())?;
    if let Some((doc_text, _)) = &doc {
        let read = |t: &str| serde_saphyr::from_str::<serde_json::Value>(t).ok();
        let edited = actions::insert_at_line(doc_text, line, &comment)?;
        if read(doc_text) != read(&edited) {
            return None;
        }
    }
    let start = lsp_types::Position {
        line: u32::try_from(line - 1).ok()?,
        character: 0,
    };
    Some(lsp_types::TextEdit {
        range: lsp_types::Range { start, end: start },
        new_text: comment,
    })
}

/// The schema options of `check` with these settings, offline: `--openapi`, else the
/// built-in schemas of the target version (`cli::analyse_input` chooses so too without a
/// cluster), and `--crd`.
fn schema_options(args: &CheckArgs) -> SchemaOptions {
    let minor = args
        .kubernetes_version
        .map_or(crate::apiserver::Server::PINNED.minor, |v| v.minor);
    SchemaOptions {
        openapi: args.openapi.clone(),
        built_in: args.openapi.is_none().then(|| format!("1.{minor}")),
        crds: args.crds.clone(),
        kubeconfig: None,
        context: None,
        in_cluster: false,
        kubernetes_version: args.kubernetes_version,
    }
}

/// The diagnostic of a finding in `text` (its file's text as checked): at its position (the
/// start of the file when it has none), with the rule's level as its severity, the rule id as
/// its code and SARIF's message.
pub fn diagnostic(f: &Finding, text: &str, encoding: Encoding) -> Diagnostic {
    diagnostic_in(f, &text::Lines::new(text), encoding)
}

/// [`diagnostic`] in a text already split into lines.
pub fn diagnostic_in(f: &Finding, lines: &text::Lines<'_>, encoding: Encoding) -> Diagnostic {
    let range = match f.position {
        Some(p) => text::finding_range_in(lines, p, encoding),
        None => lsp_types::Range::default(),
    };
    let severity = match f.severity.as_str() {
        "error" => DiagnosticSeverity::ERROR,
        "warning" => DiagnosticSeverity::WARNING,
        _ => DiagnosticSeverity::INFORMATION,
    };
    Diagnostic {
        range,
        severity: Some(severity),
        code: Some(NumberOrString::String(f.rule.id().to_owned())),
        code_description: f
            .rule
            .help()
            .and_then(|h| h.parse::<Uri>().ok())
            .map(|href| CodeDescription { href }),
        source: Some("vapcheck".into()),
        message: crate::cli::emit::message_text(f),
        ..Diagnostic::default()
    }
}
