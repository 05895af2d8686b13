//! The static-manifest loader of the ValidatingAdmissionPolicy admission plugin
//! (`staticManifestsDir`, KEP-5793, beta and on by default in 1.37), offline. Pure: the shell
//! lists the folder and reads the files; this decides what kube-apiserver makes of them.
//!
//! Sources (pinned release, 1.37.1):
//! - k8s.io/apiserver `pkg/admission/plugin/manifest/loader.go` `LoadFiles` (which files,
//!   in which order; `splitYAMLDocuments`) and `validation.go` `ValidateManifestName`;
//! - k8s.io/apimachinery `pkg/util/yaml/decoder.go` `YAMLReader.Read` (document splitting);
//! - k8s.io/apiserver `pkg/admission/plugin/policy/manifest/loader/loader.go`
//!   `LoadPolicyManifests`, `acceptFileObject`, `validateAcceptedItem`,
//!   `validatePolicyManifestConstraints`, `validateBindingConstraints`,
//!   `validateBindingReferences`;
//! - k8s.io/kubernetes `pkg/admission/plugin/policy/manifest/loader/validating_loader.go`
//!   (strict decoding with the admissionregistration scheme, `defaultAndValidateVAP`,
//!   `defaultAndValidateVAPB`);
//! - k8s.io/apiserver `pkg/admission/plugin/policy/generic/plugin.go`
//!   `ValidateInitialization` (a load error stops kube-apiserver from starting) and
//!   `policy/manifest/source/source.go` `checkAndReload` (a reload error keeps the
//!   previous set).
//!
//! The loader stops at the first error; vapcheck goes on and reports every error it finds, in
//! the loader's order, so that the first one is what kube-apiserver prints. Every message is
//! the loader's own text except where [`ManifestError::exact`] is false (YAML syntax errors
//! and Go JSON type errors, whose wording vapcheck does not reproduce).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::Value;

use super::field::{FieldError, go_quote};
use super::vap::{STATIC_CONFIG_SUFFIX, Server, validate_binding_static, validate_policy_static};

const POLICY: &str = "ValidatingAdmissionPolicy";
const BINDING: &str = "ValidatingAdmissionPolicyBinding";
const V1: &str = "admissionregistration.k8s.io/v1";

/// `LoadFiles`: a regular file is read when its extension (Go's `filepath.Ext`, compared in
/// lower case) is `.yaml`, `.yml` or `.json`. Sub-folders are skipped by the caller; files
/// are read in name order (`os.ReadDir`).
pub fn is_manifest_file(name: &str) -> bool {
    let ext = name.rfind('.').map(|i| &name[i..]).unwrap_or_default();
    matches!(
        ext.to_ascii_lowercase().as_str(),
        ".yaml" | ".yml" | ".json"
    )
}

/// One file of the folder: its path as the loader prints it (`filepath.Join(dir, name)`)
/// and its contents (`None`: it could not be read, with the reason).
#[derive(Debug, Clone)]
pub struct ManifestFile {
    /// `dir/name`.
    pub path: String,
    /// The contents, or why they could not be read.
    pub contents: Result<Vec<u8>, String>,
}

/// Where an object or an error is in the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `dir/name`.
    pub file: String,
    /// 1-based index among the file's non-empty documents (None: the file as a whole).
    pub document: Option<usize>,
    /// 0-based index in a list document.
    pub item: Option<usize>,
    /// 1-based line where the document starts.
    pub line: Option<usize>,
}

/// One error of the loader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// Where.
    pub location: Location,
    /// The object it is about (`kind`, `name`), when the document decoded.
    pub object: Option<(&'static str, String)>,
    /// The loader's error text (`error loading dir/f.yaml: ...`).
    pub message: String,
    /// Whether `message` is byte-identical to the loader's (false: vapcheck's own wording
    /// for the same cause).
    pub exact: bool,
}

/// A policy or binding that decoded, with the errors that are about it.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// Where.
    pub location: Location,
    /// The object as written.
    pub object: T,
    /// Messages of the errors about this object (empty: the loader accepts it).
    pub errors: Vec<String>,
}

/// What the loader makes of a folder.
#[derive(Debug, Clone, Default)]
pub struct StaticLoad {
    /// Every error, in the loader's order; the first is the one kube-apiserver reports.
    pub errors: Vec<ManifestError>,
    /// Every ValidatingAdmissionPolicy that decoded, in reading order.
    pub policies: Vec<Loaded<ValidatingAdmissionPolicy>>,
    /// Every ValidatingAdmissionPolicyBinding that decoded, in reading order.
    pub bindings: Vec<Loaded<ValidatingAdmissionPolicyBinding>>,
}

impl StaticLoad {
    /// Whether kube-apiserver loads the folder.
    pub fn accepted(&self) -> bool {
        self.errors.is_empty()
    }
}

/// What kube-apiserver prints when the folder stops it from starting
/// (`ValidateInitialization`: `failed to load static policy manifests from %q: %w`).
pub fn startup_error(dir: &str, first: &ManifestError) -> String {
    format!(
        "failed to load static policy manifests from {}: {}",
        go_quote(dir),
        first.message
    )
}

/// One document of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// 1-based line of its first line in the file.
    pub line: usize,
    /// Its text, trimmed (`bytes.TrimSpace`).
    pub text: String,
}

/// `splitYAMLDocuments`: `YAMLReader.Read` then `bytes.TrimSpace`, dropping empty documents.
/// A line starting `---` ends the document being read; when none is being read, the line is
/// kept as the start of the next one (so `---` twice in a row makes a document `---`). After
/// `---` only blanks and a comment may follow. Lines end at `\n`; a `\r` before it is dropped
/// (`bufio.Reader.ReadLine`).
pub fn split_documents(text: &str) -> Result<Vec<Document>, String> {
    let mut docs = Vec::new();
    let mut buffer = String::new();
    let mut buffer_line = 1usize;
    let mut emit = |buffer: &mut String, line: usize| {
        let t = buffer.trim_matches(|c: char| c.is_whitespace());
        if !t.is_empty() {
            docs.push(Document {
                line: line + leading_lines(buffer),
                text: t.to_owned(),
            });
        }
        buffer.clear();
    };
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let content = match raw.strip_suffix('\n') {
            Some(c) => c.strip_suffix('\r').unwrap_or(c),
            None => raw,
        };
        if let Some(rest) = content.strip_prefix("---") {
            let trimmed = rest.trim_matches(|c: char| c.is_whitespace());
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Err(format!("invalid Yaml document separator: {trimmed}"));
            }
            if !buffer.is_empty() {
                emit(&mut buffer, buffer_line);
                continue;
            }
        }
        if buffer.is_empty() {
            buffer_line = i + 1;
        }
        buffer.push_str(content);
        buffer.push('\n');
    }
    if !buffer.is_empty() {
        emit(&mut buffer, buffer_line);
    }
    Ok(docs)
}

/// Lines before the first non-blank character of `s` (the document's own first line).
fn leading_lines(s: &str) -> usize {
    let start = s.len() - s.trim_start_matches(|c: char| c.is_whitespace()).len();
    s[..start].matches('\n').count()
}

/// Go's type name of a decoded object the loader does not take (`%T`).
fn go_type(group_version: &str, kind: &str) -> String {
    let package = group_version.rsplit('/').next().unwrap_or(group_version);
    format!("*{package}.{kind}")
}

/// How the loader's scheme decodes a document of `apiVersion`/`kind`.
enum Decoded {
    Policy,
    Binding,
    PolicyList,
    BindingList,
    /// `metav1.List` (an unversioned kind: any apiVersion).
    List,
    /// Registered, but neither `acceptVAP` nor `acceptVAPB` takes it.
    Unsupported(String),
}

/// The scheme of validating_loader.go: admissionregistration (`install.Install`: v1,
/// v1beta1, v1alpha1, each with metav1's `AddToGroupVersion` kinds) plus the unversioned
/// `List` and `Status`.
fn decode_kind(api_version: &str, kind: &str) -> Result<Decoded, String> {
    const UNVERSIONED: [&str; 5] = [
        "Status",
        "APIVersions",
        "APIGroupList",
        "APIGroup",
        "APIResourceList",
    ];
    const META: [&str; 7] = [
        "WatchEvent",
        "ListOptions",
        "GetOptions",
        "DeleteOptions",
        "CreateOptions",
        "UpdateOptions",
        "PatchOptions",
    ];
    const POLICY_KINDS: [&str; 8] = [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyList",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBindingList",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyList",
        "MutatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicyBindingList",
    ];
    const WEBHOOK_KINDS: [&str; 4] = [
        "ValidatingWebhookConfiguration",
        "ValidatingWebhookConfigurationList",
        "MutatingWebhookConfiguration",
        "MutatingWebhookConfigurationList",
    ];
    if api_version.matches('/').count() > 1 {
        return Err(format!("unexpected GroupVersion string: {api_version}"));
    }
    if kind == "List" {
        return Ok(Decoded::List);
    }
    if UNVERSIONED.contains(&kind) {
        return Ok(Decoded::Unsupported(go_type("v1", kind)));
    }
    let version = api_version
        .strip_prefix("admissionregistration.k8s.io/")
        .filter(|v| matches!(*v, "v1" | "v1beta1" | "v1alpha1"));
    let registered = version.is_some_and(|v| {
        META.contains(&kind)
            || POLICY_KINDS.contains(&kind)
            || (v != "v1alpha1" && WEBHOOK_KINDS.contains(&kind))
    });
    if !registered {
        return Err(format!(
            "no kind {} is registered for version {} in scheme \"pkg/runtime/scheme.go:111\"",
            go_quote(kind),
            go_quote(api_version)
        ));
    }
    if META.contains(&kind) {
        return Ok(Decoded::Unsupported(go_type("v1", kind)));
    }
    Ok(match (api_version, kind) {
        (V1, "ValidatingAdmissionPolicy") => Decoded::Policy,
        (V1, "ValidatingAdmissionPolicyBinding") => Decoded::Binding,
        (V1, "ValidatingAdmissionPolicyList") => Decoded::PolicyList,
        (V1, "ValidatingAdmissionPolicyBindingList") => Decoded::BindingList,
        _ => Decoded::Unsupported(go_type(api_version, kind)),
    })
}

/// `utilerrors.Aggregate.Error()` of the field errors: one message as is; several (without
/// repeats) in brackets, joined by `, `.
fn aggregate(errs: &[FieldError]) -> String {
    let mut seen = BTreeSet::new();
    let mut msgs = Vec::new();
    for e in errs {
        let m = e.to_string();
        if seen.insert(m.clone()) {
            msgs.push(m);
        }
    }
    if msgs.len() == 1 {
        msgs.remove(0)
    } else {
        format!("[{}]", msgs.join(", "))
    }
}

/// The fields of `input` that `typed` (the same object after a round trip through the
/// Kubernetes type) does not have: what the strict decoder calls unknown fields, as paths
/// (`spec.validation`, `spec.validations[0].x`). Keys are visited in sorted order (the YAML
/// document was converted to JSON with sorted keys); `null` values are not fields.
fn unknown_fields(input: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            let keys: BTreeMap<&String, &Value> = i.iter().collect();
            for (k, v) in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match t.get(k) {
                    Some(tv) => unknown_fields(v, tv, &p, out),
                    None if v.is_null() => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(i), Value::Array(t)) => {
            for (n, (iv, tv)) in i.iter().zip(t).enumerate() {
                unknown_fields(iv, tv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Strict decoding of one object into `T`: (object, exact) on a type error, the strict
/// error listing unknown fields.
fn decode_strict<T>(value: &Value) -> Result<T, (String, bool)>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: T = serde_path_to_error::deserialize(value.clone())
        .map_err(|e| (format!("cannot decode: {}: {}", e.path(), e.inner()), false))?;
    let round_trip = serde_json::to_value(&typed).map_err(|e| (e.to_string(), false))?;
    let mut unknown = Vec::new();
    unknown_fields(value, &round_trip, "", &mut unknown);
    if unknown.is_empty() {
        Ok(typed)
    } else {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field {}", go_quote(f)))
            .collect();
        Err((format!("strict decoding error: {}", list.join(", ")), true))
    }
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// The loader's state while reading the folder.
struct Loader<'a> {
    server: Server,
    out: StaticLoad,
    seen_policies: BTreeMap<String, String>,
    seen_bindings: BTreeMap<String, String>,
    /// Every policy name read (also of policies with errors), for the reference check.
    policy_names: BTreeSet<String>,
    _dir: &'a str,
}

/// A policy or binding of one document, before the name rules.
enum Accepted {
    Policy(ValidatingAdmissionPolicy),
    Binding(ValidatingAdmissionPolicyBinding),
}

impl Loader<'_> {
    fn error(
        &mut self,
        location: &Location,
        object: Option<(&'static str, String)>,
        message: String,
        exact: bool,
    ) {
        self.out.errors.push(ManifestError {
            location: location.clone(),
            object,
            message,
            exact,
        });
    }

    /// `decoder.Decode` then `acceptFileObject` for one document or list item.
    fn accept(&mut self, location: &Location, value: &Value, raw: &str, in_list: bool) {
        let prefix = |m: &str| {
            if in_list {
                format!(
                    "error loading {}: failed to decode list item: {m}",
                    location.file
                )
            } else {
                format!("error loading {}: {m}", location.file)
            }
        };
        let str_of = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default();
        if !value.is_object() && !value.is_null() {
            let m = prefix("couldn't get version/kind: the document is not an object");
            self.error(location, None, m, false);
            return;
        }
        for k in ["kind", "apiVersion"] {
            if value.get(k).is_some_and(|v| !v.is_string() && !v.is_null()) {
                let m = prefix(&format!("couldn't get version/kind: `{k}` is not a string"));
                self.error(location, None, m, false);
                return;
            }
        }
        let (api_version, kind) = (str_of("apiVersion"), str_of("kind"));
        if kind.is_empty() {
            let m = prefix(&format!("Object 'Kind' is missing in '{raw}'"));
            self.error(location, None, m, true);
            return;
        }
        if api_version.is_empty() {
            let m = prefix(&format!("Object 'apiVersion' is missing in '{raw}'"));
            self.error(location, None, m, true);
            return;
        }
        let decoded = match decode_kind(api_version, kind) {
            Ok(d) => d,
            Err(e) => {
                self.error(location, None, prefix(&e), true);
                return;
            }
        };
        let items = |what: &str| -> Result<Vec<Value>, String> {
            match value.get("items") {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(a)) => Ok(a.clone()),
                Some(_) => Err(format!("cannot decode: items of a {what} must be a list")),
            }
        };
        let accepted: Vec<(Location, Accepted)> = match decoded {
            Decoded::List => {
                let list = match items("List") {
                    Ok(l) => l,
                    Err(e) => {
                        self.error(location, None, prefix(&e), false);
                        return;
                    }
                };
                for (i, item) in list.iter().enumerate() {
                    let loc = Location {
                        item: Some(i),
                        ..location.clone()
                    };
                    let raw = super::field::go_json(item);
                    let before = self.out.errors.len();
                    self.accept(&loc, item, &raw, true);
                    // The loader returns at the first error of a list.
                    if self.out.errors.len() > before {
                        return;
                    }
                }
                return;
            }
            Decoded::Unsupported(t) => {
                let m = prefix(&format!("unsupported resource type {t}"));
                self.error(location, None, m, true);
                return;
            }
            Decoded::Policy => match decode_strict::<ValidatingAdmissionPolicy>(value) {
                Ok(p) => vec![(location.clone(), Accepted::Policy(p))],
                Err((m, exact)) => {
                    self.error(location, None, prefix(&m), exact);
                    return;
                }
            },
            Decoded::Binding => match decode_strict::<ValidatingAdmissionPolicyBinding>(value) {
                Ok(b) => vec![(location.clone(), Accepted::Binding(b))],
                Err((m, exact)) => {
                    self.error(location, None, prefix(&m), exact);
                    return;
                }
            },
            Decoded::PolicyList | Decoded::BindingList => {
                let policies = matches!(decoded, Decoded::PolicyList);
                let list = match items(kind) {
                    Ok(l) => l,
                    Err(e) => {
                        self.error(location, None, prefix(&e), false);
                        return;
                    }
                };
                let mut out = Vec::new();
                let mut unknown = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let loc = Location {
                        item: Some(i),
                        ..location.clone()
                    };
                    let r = if policies {
                        decode_strict::<ValidatingAdmissionPolicy>(item).map(Accepted::Policy)
                    } else {
                        decode_strict::<ValidatingAdmissionPolicyBinding>(item)
                            .map(Accepted::Binding)
                    };
                    match r {
                        Ok(a) => out.push((loc, a)),
                        Err((m, true)) => {
                            unknown.push(m.trim_start_matches("strict decoding error: ").replace(
                                "unknown field \"",
                                &format!("unknown field \"items[{i}]."),
                            ))
                        }
                        Err((m, false)) => {
                            self.error(location, None, prefix(&m), false);
                            return;
                        }
                    }
                }
                if !unknown.is_empty() {
                    let m = format!("strict decoding error: {}", unknown.join(", "));
                    self.error(location, None, prefix(&m), true);
                    return;
                }
                out
            }
        };
        // acceptVAP / acceptVAPB: every item is defaulted and validated, then every item
        // passes validateAcceptedItem, in order; the first error ends the document.
        for (loc, a) in &accepted {
            let (kind, name, errs) = match a {
                Accepted::Policy(p) => {
                    self.policy_names.insert(name_of(&p.metadata));
                    (
                        POLICY,
                        name_of(&p.metadata),
                        validate_policy_static(p, self.server),
                    )
                }
                Accepted::Binding(b) => (BINDING, name_of(&b.metadata), validate_binding_static(b)),
            };
            self.record(loc, a);
            if !errs.is_empty() {
                let m = prefix(&format!("{kind} {}: {}", go_quote(&name), aggregate(&errs)));
                self.object_error(loc, kind, &name, m);
                return;
            }
        }
        for (loc, a) in &accepted {
            if let Some(m) = self.validate_accepted_item(&loc.file, a) {
                let (kind, name) = match a {
                    Accepted::Policy(p) => (POLICY, name_of(&p.metadata)),
                    Accepted::Binding(b) => (BINDING, name_of(&b.metadata)),
                };
                self.object_error(loc, kind, &name, prefix(&m));
                return;
            }
        }
    }

    fn record(&mut self, location: &Location, a: &Accepted) {
        match a {
            Accepted::Policy(p) => self.out.policies.push(Loaded {
                location: location.clone(),
                object: p.clone(),
                errors: Vec::new(),
            }),
            Accepted::Binding(b) => self.out.bindings.push(Loaded {
                location: location.clone(),
                object: b.clone(),
                errors: Vec::new(),
            }),
        }
    }

    fn object_error(&mut self, location: &Location, kind: &'static str, name: &str, m: String) {
        let target = if kind == POLICY {
            self.out
                .policies
                .iter_mut()
                .rev()
                .find(|p| &p.location == location)
                .map(|p| &mut p.errors)
        } else {
            self.out
                .bindings
                .iter_mut()
                .rev()
                .find(|b| &b.location == location)
                .map(|b| &mut b.errors)
        };
        if let Some(errors) = target {
            errors.push(m.clone());
        }
        self.error(location, Some((kind, name.to_owned())), m, true);
    }

    /// `validateAcceptedItem`: `ValidateManifestName`, then `validatePolicyManifestConstraints`.
    fn validate_accepted_item(&mut self, file: &str, a: &Accepted) -> Option<String> {
        let (name, seen) = match a {
            Accepted::Policy(p) => (name_of(&p.metadata), &mut self.seen_policies),
            Accepted::Binding(b) => (name_of(&b.metadata), &mut self.seen_bindings),
        };
        if name.is_empty() {
            return Some(format!(
                "resource in file {} must have a name",
                go_quote(file)
            ));
        }
        if !name.ends_with(STATIC_CONFIG_SUFFIX) {
            return Some(format!(
                "{} in file {} must have a name ending with {}",
                go_quote(&name),
                go_quote(file),
                go_quote(STATIC_CONFIG_SUFFIX)
            ));
        }
        if let Some(previous) = seen.get(&name) {
            return Some(format!(
                "duplicate name {} found in file {} (previously seen in {})",
                go_quote(&name),
                go_quote(file),
                go_quote(previous)
            ));
        }
        seen.insert(name.clone(), file.to_owned());
        match a {
            Accepted::Policy(p) => p
                .spec
                .as_ref()
                .and_then(|s| s.param_kind.as_ref())
                .map(|_| {
                    format!(
                        "ValidatingAdmissionPolicy {}: spec.paramKind is not supported for static manifests",
                        go_quote(&name)
                    )
                }),
            Accepted::Binding(b) => {
                let policy = &b.spec.policy_name;
                if policy.is_empty() {
                    Some(format!(
                        "binding {} must reference a policy (spec.policyName)",
                        go_quote(&name)
                    ))
                } else if !policy.ends_with(STATIC_CONFIG_SUFFIX) {
                    Some(format!(
                        "binding {}: spec.policyName {} must end with {}",
                        go_quote(&name),
                        go_quote(policy),
                        go_quote(STATIC_CONFIG_SUFFIX)
                    ))
                } else if b.spec.param_ref.is_some() {
                    Some(format!(
                        "binding {}: spec.paramRef is not supported for static manifests",
                        go_quote(&name)
                    ))
                } else {
                    None
                }
            }
        }
    }
}

/// What the ValidatingAdmissionPolicy plugin's loader makes of the folder `dir`, given its
/// manifest files (already selected with [`is_manifest_file`] and sorted by name).
pub fn load(dir: &str, files: &[ManifestFile], server: Server) -> StaticLoad {
    let mut loader = Loader {
        server,
        out: StaticLoad::default(),
        seen_policies: BTreeMap::new(),
        seen_bindings: BTreeMap::new(),
        policy_names: BTreeSet::new(),
        _dir: dir,
    };
    // LoadFiles reads and splits every file before anything is decoded, so its errors come
    // first.
    let mut split: Vec<(&ManifestFile, Vec<Document>)> = Vec::new();
    for f in files {
        let whole = Location {
            file: f.path.clone(),
            document: None,
            item: None,
            line: None,
        };
        let bytes = match &f.contents {
            Ok(b) => b,
            Err(e) => {
                let m = format!("failed to read file {}: {e}", go_quote(&f.path));
                loader.error(&whole, None, m, false);
                continue;
            }
        };
        if bytes.is_empty() {
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            let m = format!("error loading {}: not UTF-8 text", f.path);
            loader.error(&whole, None, m, false);
            continue;
        };
        match split_documents(text) {
            Ok(docs) => split.push((f, docs)),
            Err(e) => {
                let m = format!(
                    "failed to split YAML documents in file {}: {e}",
                    go_quote(&f.path)
                );
                loader.error(&whole, None, m, true);
            }
        }
    }
    for (f, docs) in split {
        for (i, doc) in docs.iter().enumerate() {
            let location = Location {
                file: f.path.clone(),
                document: Some(i + 1),
                item: None,
                line: Some(doc.line),
            };
            // Pad with the lines before the document so the parser reports file lines.
            let padded = format!("{}{}", "\n".repeat(doc.line - 1), doc.text);
            let value: Value = match serde_saphyr::from_str(&padded) {
                Ok(v) => v,
                Err(e) => {
                    let m = format!("error loading {}: yaml: {e}", f.path);
                    loader.error(&location, None, m, false);
                    continue;
                }
            };
            loader.accept(&location, &value, &doc.text, false);
        }
    }
    // validateBindingReferences, after every file: against every policy read (a policy with
    // an error of its own is reported for that error, not again through its bindings).
    let missing: Vec<(Location, String, String)> = loader
        .out
        .bindings
        .iter()
        .filter(|b| !loader.policy_names.contains(&b.object.spec.policy_name))
        .map(|b| {
            (
                b.location.clone(),
                name_of(&b.object.metadata),
                b.object.spec.policy_name.clone(),
            )
        })
        .collect();
    for (location, name, policy) in missing {
        let m = format!(
            "binding {} references policy {} which does not exist in the manifest directory",
            go_quote(&name),
            go_quote(&policy)
        );
        loader.object_error(&location, BINDING, &name, m);
    }
    loader.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_selection_follows_load_files() {
        for yes in ["a.yaml", "a.YML", "b.json", ".yaml", "x.y.Yaml"] {
            assert!(is_manifest_file(yes), "{yes}");
        }
        for no in ["README.md", "a.yaml.bak", "yaml", "a.txt", "a."] {
            assert!(!is_manifest_file(no), "{no}");
        }
    }

    fn texts(docs: &[Document]) -> Vec<(usize, &str)> {
        docs.iter().map(|d| (d.line, d.text.as_str())).collect()
    }

    #[test]
    fn splitting_follows_yaml_reader() {
        let d = split_documents("a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(texts(&d), [(1, "a: 1"), (3, "b: 2")]);
        // A leading separator stays with the first document.
        let d = split_documents("---\na: 1\n").unwrap();
        assert_eq!(texts(&d), [(1, "---\na: 1")]);
        // Two separators in a row make a document of its own: "---".
        let d = split_documents("a: 1\n---\n---\nb: 2\n").unwrap();
        assert_eq!(texts(&d), [(1, "a: 1"), (3, "---\nb: 2")]);
        let d = split_documents("---\n---\n").unwrap();
        assert_eq!(texts(&d), [(1, "---")]);
        // Comments after the separator are allowed, anything else is not.
        assert!(split_documents("a: 1\n--- # next\nb: 2\n").is_ok());
        assert_eq!(
            split_documents("a: 1\n--- !tag\n").unwrap_err(),
            "invalid Yaml document separator: !tag"
        );
        // CRLF line ends and blank documents.
        let d = split_documents("a: 1\r\n---\r\n\r\n   \n---\nb: 2").unwrap();
        assert_eq!(texts(&d), [(1, "a: 1"), (6, "b: 2")]);
    }

    #[test]
    fn aggregate_is_bracketed_and_deduplicated() {
        let a = FieldError::required("spec.x", "");
        let b = FieldError::required("spec.y", "");
        assert_eq!(
            aggregate(std::slice::from_ref(&a)),
            "spec.x: Required value"
        );
        assert_eq!(
            aggregate(&[a.clone(), b, a]),
            "[spec.x: Required value, spec.y: Required value]"
        );
    }

    #[test]
    fn unknown_kinds_name_the_scheme() {
        let Err(e) = decode_kind("v1", "ConfigMap") else {
            panic!("ConfigMap decoded");
        };
        assert_eq!(
            e,
            "no kind \"ConfigMap\" is registered for version \"v1\" in scheme \"pkg/runtime/scheme.go:111\""
        );
        assert!(matches!(
            decode_kind("admissionregistration.k8s.io/v1beta1", "ValidatingAdmissionPolicy"),
            Ok(Decoded::Unsupported(t)) if t == "*v1beta1.ValidatingAdmissionPolicy"
        ));
        assert!(
            decode_kind(
                "admissionregistration.k8s.io/v1alpha1",
                "ValidatingWebhookConfiguration"
            )
            .is_err()
        );
        assert!(matches!(
            decode_kind("anything/v9", "List"),
            Ok(Decoded::List)
        ));
    }
}
