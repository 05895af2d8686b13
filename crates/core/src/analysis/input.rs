//! Reading policies for `vapcheck check`: YAML or JSON, one or many documents, `List`s.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// API versions whose `ValidatingAdmissionPolicy` is read (as v1: the fields are the same).
pub const POLICY_API_VERSIONS: [&str; 3] = [
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1beta1",
    "admissionregistration.k8s.io/v1alpha1",
];

/// The kind read.
pub const POLICY_KIND: &str = "ValidatingAdmissionPolicy";

/// The binding kind read (for the API server's verdict).
pub const BINDING_KIND: &str = "ValidatingAdmissionPolicyBinding";

/// Where a policy came from (the findings' type: [`crate::finding::Origin`]).
pub use crate::finding::Origin;

/// A policy read from the input.
#[derive(Debug, Clone)]
pub struct InputPolicy {
    /// Where it came from.
    pub origin: Origin,
    /// The policy, read as `admissionregistration.k8s.io/v1`.
    pub policy: ValidatingAdmissionPolicy,
}

/// A binding read from the input.
#[derive(Debug, Clone)]
pub struct InputBinding {
    /// Where it came from.
    pub origin: Origin,
    /// The binding, read as `admissionregistration.k8s.io/v1`.
    pub binding: ValidatingAdmissionPolicyBinding,
}

/// A policy or a binding, in input order.
#[derive(Debug, Clone)]
pub enum InputObject {
    /// A ValidatingAdmissionPolicy.
    Policy(InputPolicy),
    /// A ValidatingAdmissionPolicyBinding.
    Binding(InputBinding),
}

impl InputObject {
    /// Its kind.
    pub fn kind(&self) -> &'static str {
        match self {
            InputObject::Policy(_) => POLICY_KIND,
            InputObject::Binding(_) => BINDING_KIND,
        }
    }

    /// `metadata.name` (empty when missing).
    pub fn name(&self) -> &str {
        match self {
            InputObject::Policy(p) => p.policy.metadata.name.as_deref().unwrap_or_default(),
            InputObject::Binding(b) => b.binding.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    /// Where it came from.
    pub fn origin(&self) -> &Origin {
        match self {
            InputObject::Policy(p) => &p.origin,
            InputObject::Binding(b) => &b.origin,
        }
    }
}

/// Why the input is unusable. Displays as `<source>: document <n>[, item <i>][ (line <l>)]: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", location(*.document, *.item, *.line))]
pub struct InputError {
    /// File name or `<stdin>`.
    pub file: String,
    /// 1-based document index, when known.
    pub document: Option<usize>,
    /// Item index in a list document.
    pub item: Option<usize>,
    /// 1-based line in the source where the document starts.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

fn location(document: Option<usize>, item: Option<usize>, line: Option<usize>) -> String {
    let mut s = String::new();
    if let Some(d) = document {
        s.push_str(&format!(": document {d}"));
    }
    if let Some(i) = item {
        s.push_str(&format!(", item {i}"));
    }
    if let Some(l) = line {
        s.push_str(&format!(" (line {l})"));
    }
    s
}

/// One raw document: its 1-based starting line and text.
struct RawDocument<'a> {
    line: usize,
    text: &'a str,
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
}

/// Splits a YAML stream at document markers (`---` starts, `...` ends) at column 0. Markers
/// cannot appear at column 0 inside a document's content (YAML 1.2 forbids it in flow
/// scalars and block content is indented), so this matches a YAML parser's view.
fn split_yaml(text: &str) -> Vec<RawDocument<'_>> {
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut offset = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let content = line.trim_end_matches(['\n', '\r']);
        if is_marker(content, "---") {
            docs.push(RawDocument {
                line: start_line,
                text: &text[start..offset],
            });
            start = offset;
            start_line = i + 1;
        } else if is_marker(content, "...") {
            docs.push(RawDocument {
                line: start_line,
                text: &text[start..offset],
            });
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    docs.push(RawDocument {
        line: start_line,
        text: &text[start..],
    });
    docs
}

/// Whether a raw YAML document holds nothing but markers, blank lines, comments and
/// directives (`%YAML`, `%TAG` end up before the `---` they belong to; manifests do not need
/// them).
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || l.starts_with('%') || t == "---" || t == "..."
    })
}

/// One document of a source as [`parse_documents_lenient`] reads it: its 1-based index, the
/// line where it starts (YAML), and its value or why it is not YAML.
type ParsedDocument = (usize, Option<usize>, Result<Value, YamlError>);

/// A YAML document that does not parse: the parser's message and where it stopped.
#[derive(Debug, Clone)]
struct YamlError {
    /// `invalid YAML: ` and the parser's whole message (with its excerpt of the source).
    message: String,
    /// `invalid YAML: ` and the parser's message alone, without its position.
    short: String,
    position: Option<super::positions::Position>,
}

/// Parses a source (file contents) into documents. JSON is tried first when the text starts
/// with `{` or `[` (a stream of JSON values; a top-level array counts as one document per
/// element); otherwise, or if that fails, YAML. Errors: the first document that is not YAML.
fn parse_documents(
    source: &str,
    text: &str,
) -> Result<Vec<(usize, Option<usize>, Value)>, InputError> {
    parse_documents_lenient(text)
        .into_iter()
        .map(|(index, line, value)| match value {
            Ok(v) => Ok((index, line, v)),
            Err(e) => Err(InputError {
                file: source.to_owned(),
                document: Some(index),
                item: None,
                line,
                message: e.message,
            }),
        })
        .collect()
}

/// [`parse_documents`], going on after a document that is not YAML (numbered as the others).
fn parse_documents_lenient(text: &str) -> Vec<ParsedDocument> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect();
        if let Ok(values) = values {
            let flat = values.into_iter().flat_map(|v| match v {
                Value::Array(items) => items,
                v => vec![v],
            });
            return flat
                .enumerate()
                .map(|(i, v)| (i + 1, None, Ok(v)))
                .collect();
        }
    }
    let mut docs = Vec::new();
    for raw in split_yaml(text) {
        if is_blank(raw.text) {
            continue;
        }
        let index = docs.len() + 1;
        // Pad with the lines before the document so the parser reports file line numbers.
        let padded = format!("{}{}", "\n".repeat(raw.line - 1), raw.text);
        match serde_saphyr::from_str::<Value>(&padded) {
            Ok(value) if value.is_null() => {}
            Ok(value) => docs.push((index, Some(raw.line), Ok(value))),
            Err(e) => {
                let position = e
                    .location()
                    .map(|l| super::positions::Position {
                        line: usize::try_from(l.line()).unwrap_or(raw.line),
                        column: usize::try_from(l.column()).unwrap_or(1),
                    })
                    .filter(|p| p.line >= raw.line);
                let full = e.to_string();
                let first = full.lines().next().unwrap_or_default();
                // `error: line L column C: <message>`
                let short = first
                    .strip_prefix("error: line ")
                    .and_then(|r| r.split_once(": "))
                    .map_or(first, |(_, m)| m);
                docs.push((
                    index,
                    Some(raw.line),
                    Err(YamlError {
                        message: format!("invalid YAML: {full}"),
                        short: format!("invalid YAML: {short}"),
                        position,
                    }),
                ));
            }
        }
    }
    docs
}

/// The documents of a YAML source as [`read_all_lenient`] numbers them (blank ones left
/// out), each with its 1-based starting line and its text: document `n` of the source reads
/// as the one document of its text padded with the lines before it (`line - 1` line breaks,
/// as [`document_text`] pads it), numbered `n`. `None` when the source may be JSON (it
/// starts with `{` or `[`), or when a document does not start with its `---` (one after a
/// `...` end marker), whose padded text would start on another line. For a caller that reads
/// the documents of a source one at a time (the editor server reads again only those that
/// changed).
pub fn yaml_documents(text: &str) -> Option<Vec<(usize, &str)>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return None;
    }
    let mut out = Vec::new();
    for raw in split_yaml(text) {
        if is_blank(raw.text) {
            continue;
        }
        if raw.line != 1 && !raw.text.starts_with("---") {
            return None;
        }
        out.push((raw.line, raw.text));
    }
    Some(out)
}

/// The text of document `document` (1-based, numbered as [`for_each_object`] numbers them) of
/// a source, padded with blank lines so that its lines are the file's, and the path from that
/// text's root to the document's object (a JSON array's element).
pub fn document_text(text: &str, document: usize) -> Option<(String, Vec<super::positions::Step>)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // JSON: one value (document 1) or an array (document n is element n-1).
        let value: Value = serde_json::from_str(text).ok()?;
        return match value {
            Value::Array(_) => Some((
                text.to_owned(),
                vec![super::positions::Step::Index(document.checked_sub(1)?)],
            )),
            _ if document == 1 => Some((text.to_owned(), Vec::new())),
            _ => None,
        };
    }
    let raw = split_yaml(text)
        .into_iter()
        .filter(|raw| !is_blank(raw.text))
        .nth(document.checked_sub(1)?)?;
    Some((
        format!("{}{}", "\n".repeat(raw.line - 1), raw.text),
        Vec::new(),
    ))
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Calls `visit` for every Kubernetes object of one source, in order, with its origin;
/// `*List` documents with `items` are walked. A document or item that is not an object with
/// string `apiVersion` and `kind` is an error; so is whatever error `visit` returns.
pub fn for_each_object(
    source: &str,
    text: &str,
    mut visit: impl FnMut(&Origin, &Value) -> Result<(), String>,
) -> Result<(), InputError> {
    for (document, line, value) in parse_documents(source, text)? {
        let err = |item: Option<usize>, message: String| InputError {
            file: source.to_owned(),
            document: Some(document),
            item,
            line,
            message,
        };
        let kind = str_field(&value, "kind");
        let is_list = kind.is_some_and(|k| k.ends_with("List")) && value.get("items").is_some();
        let items: Vec<(Option<usize>, &Value)> = if is_list {
            let Some(items) = value.get("items").and_then(Value::as_array) else {
                return Err(err(None, "`items` of a list must be an array".into()));
            };
            items
                .iter()
                .enumerate()
                .map(|(i, v)| (Some(i), v))
                .collect()
        } else {
            vec![(None, &value)]
        };
        for (item, v) in items {
            if str_field(v, "apiVersion").is_none() || str_field(v, "kind").is_none() {
                return Err(err(
                    item,
                    "not a Kubernetes object: `apiVersion` and `kind` must be strings".into(),
                ));
            }
            let origin = Origin {
                source: source.to_owned(),
                document,
                item,
            };
            visit(&origin, v).map_err(|m| err(item, m))?;
        }
    }
    Ok(())
}

/// A document or list item that is not an object of a kind `check` reads: not YAML or JSON,
/// not a Kubernetes object, or an object of a checked kind whose fields do not decode.
/// `vapcheck check` reports it as a finding on the document and checks the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecoded {
    /// Where it is (document 0: the whole file, which could not be read).
    pub origin: Origin,
    /// The kind it declares, when it is an object with a string `kind`.
    pub kind: Option<String>,
    /// Its `metadata.name`, when it is a string.
    pub name: Option<String>,
    /// The field whose value does not decode (`spec.mutations`); empty for the document as a
    /// whole.
    pub field: String,
    /// Where the parser stopped or the field is, when known.
    pub position: Option<super::positions::Position>,
    /// What is wrong (`invalid type: map, expected a sequence`).
    pub message: String,
}

impl Undecoded {
    /// The cause in one line: `<field>: <message>`, or the message alone.
    pub fn cause(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// Why an object of a kind `check` reads does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeFailure {
    /// An `admissionregistration.k8s.io` version vapcheck does not read.
    UnsupportedVersion {
        /// The kind.
        kind: String,
        /// `apiVersion` as written.
        api_version: String,
    },
    /// A field whose value has the wrong type (or a required field that is missing).
    Field {
        /// The kind.
        kind: String,
        /// The field's path (`spec.mutations[0].patchType`), empty for the object itself.
        field: String,
        /// The decoder's message.
        message: String,
    },
}

impl DecodeFailure {
    /// The field the failure is about.
    pub fn field(&self) -> &str {
        match self {
            DecodeFailure::UnsupportedVersion { .. } => "apiVersion",
            DecodeFailure::Field { field, .. } => field,
        }
    }

    /// What is wrong with that field.
    pub fn message(&self) -> String {
        match self {
            DecodeFailure::UnsupportedVersion { kind, api_version } => {
                format!("unsupported apiVersion {api_version:?} for {kind}")
            }
            DecodeFailure::Field { message, .. } => message.clone(),
        }
    }
}

impl std::fmt::Display for DecodeFailure {
    /// `invalid <Kind>: <field>: <error>` (as `vapcheck check` always printed it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeFailure::UnsupportedVersion { .. } => write!(f, "{}", self.message()),
            DecodeFailure::Field {
                kind,
                field,
                message,
            } if field.is_empty() => write!(f, "invalid {kind}: {message}"),
            DecodeFailure::Field {
                kind,
                field,
                message,
            } => write!(f, "invalid {kind}: {field}: {message}"),
        }
    }
}

/// The `kind` and `metadata.name` of a value, when they are strings.
fn kind_and_name(v: &Value) -> (Option<String>, Option<String>) {
    (
        str_field(v, "kind").map(str::to_owned),
        v.get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    )
}

/// An [`Undecoded`] for a value of `origin` that failed with `failure`.
pub fn undecoded(origin: &Origin, value: &Value, failure: &DecodeFailure) -> Undecoded {
    let (kind, name) = kind_and_name(value);
    Undecoded {
        origin: origin.clone(),
        kind,
        name,
        field: failure.field().to_owned(),
        position: None,
        message: failure.message(),
    }
}

/// [`for_each_object`] that goes on after a document or item that is not a Kubernetes object
/// (or that `visit` refuses): each is returned as an [`Undecoded`], in order.
pub fn for_each_object_lenient(
    source: &str,
    text: &str,
    mut visit: impl FnMut(&Origin, &Value) -> Result<(), DecodeFailure>,
) -> Vec<Undecoded> {
    let mut out = Vec::new();
    for (document, line, value) in parse_documents_lenient(text) {
        let origin = |item: Option<usize>| Origin {
            source: source.to_owned(),
            document,
            item,
        };
        let whole = |item: Option<usize>, message: String, v: Option<&Value>| {
            let (kind, name) = v.map(kind_and_name).unwrap_or_default();
            Undecoded {
                origin: origin(item),
                kind,
                name,
                field: String::new(),
                // Found by `cli::documents::locate` (the node, not the `---` before it).
                position: None,
                message,
            }
        };
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                let mut u = whole(None, e.short, None);
                u.position = e
                    .position
                    .or(line.map(|line| super::positions::Position { line, column: 1 }));
                out.push(u);
                continue;
            }
        };
        let kind = str_field(&value, "kind");
        let is_list = kind.is_some_and(|k| k.ends_with("List")) && value.get("items").is_some();
        let items: Vec<(Option<usize>, &Value)> = if is_list {
            let Some(items) = value.get("items").and_then(Value::as_array) else {
                let mut u = whole(
                    None,
                    "`items` of a list must be an array".into(),
                    Some(&value),
                );
                u.field = "items".into();
                out.push(u);
                continue;
            };
            items
                .iter()
                .enumerate()
                .map(|(i, v)| (Some(i), v))
                .collect()
        } else {
            vec![(None, &value)]
        };
        for (item, v) in items {
            if str_field(v, "apiVersion").is_none() || str_field(v, "kind").is_none() {
                out.push(whole(
                    item,
                    "not a Kubernetes object: `apiVersion` and `kind` must be strings".into(),
                    Some(v),
                ));
                continue;
            }
            let origin = origin(item);
            if let Err(failure) = visit(&origin, v) {
                out.push(undecoded(&origin, v, &failure));
            }
        }
    }
    out
}

/// [`read_all`] that goes on after a document that does not decode: the policies and
/// bindings, the other objects, and every document or item that is not a Kubernetes object
/// or a policy or binding that does not decode.
pub fn read_all_lenient(
    source: &str,
    text: &str,
) -> (Vec<InputObject>, Vec<InputOther>, Vec<Undecoded>) {
    let mut out = Vec::new();
    let mut others = Vec::new();
    let undecoded = for_each_object_lenient(source, text, |origin, value| {
        if let Some(policy) = decode_v1(value, POLICY_KIND)? {
            out.push(InputObject::Policy(InputPolicy {
                origin: origin.clone(),
                policy,
            }));
        } else if let Some(binding) = decode_v1(value, BINDING_KIND)? {
            out.push(InputObject::Binding(InputBinding {
                origin: origin.clone(),
                binding,
            }));
        } else {
            others.push(InputOther {
                origin: origin.clone(),
                value: value.clone(),
            });
        }
        Ok(())
    });
    (out, others, undecoded)
}

/// Reads every `ValidatingAdmissionPolicy` of one source, in order. Other kinds are ignored;
/// `*List` documents with `items` are walked. Errors: invalid YAML/JSON, a document that is
/// not a Kubernetes object (no `apiVersion`/`kind`), a policy that does not deserialise.
pub fn read_policies(source: &str, text: &str) -> Result<Vec<InputPolicy>, InputError> {
    let mut out = Vec::new();
    for_each_object(source, text, |origin, value| {
        if let Some(policy) = policy_of(value)? {
            out.push(InputPolicy {
                origin: origin.clone(),
                policy,
            });
        }
        Ok(())
    })?;
    Ok(out)
}

/// Reads every `ValidatingAdmissionPolicy` and `ValidatingAdmissionPolicyBinding` of one
/// source, in order (other kinds are ignored; errors as [`read_policies`]).
pub fn read_objects(source: &str, text: &str) -> Result<Vec<InputObject>, InputError> {
    Ok(read_all(source, text)?.0)
}

/// Any object of the input that is not a policy or binding (a candidate param object). Kept
/// as read; whether it is a param, and whether it is well formed, is decided once the
/// policies' `paramKind`s are known ([`param_object`]).
#[derive(Debug, Clone)]
pub struct InputOther {
    /// Where it came from.
    pub origin: Origin,
    /// The document (or list item) as read.
    pub value: Value,
}

impl InputOther {
    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        str_field(&self.value, "apiVersion").unwrap_or_default()
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        str_field(&self.value, "kind").unwrap_or_default()
    }
}

/// An object of a kind `check` reads from among the other objects (a policy engine's), with
/// where it came from.
#[derive(Debug, Clone)]
pub struct Sourced<T> {
    /// Where it came from.
    pub origin: Origin,
    /// The object, decoded.
    pub object: T,
}

/// The objects among `others` of the kind `select` picks, in input order, each decoded by
/// `decode`; one that does not decode is an [`Undecoded`] naming the field and the decoder's
/// message (`<origin>: invalid <Kind>: <field>: <error>`), and the others are still read.
pub fn decode_others<T>(
    others: &[InputOther],
    select: impl Fn(&InputOther) -> bool,
    decode: impl Fn(&Value) -> Result<T, (String, String)>,
) -> (Vec<Sourced<T>>, Vec<Undecoded>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for o in others.iter().filter(|o| select(o)) {
        match decode(&o.value) {
            Ok(object) => out.push(Sourced {
                origin: o.origin.clone(),
                object,
            }),
            Err((field, message)) => bad.push(undecoded(
                &o.origin,
                &o.value,
                &DecodeFailure::Field {
                    kind: o.kind().to_owned(),
                    field,
                    message,
                },
            )),
        }
    }
    (out, bad)
}

/// Reads every policy and binding of one source, in order, and every other object beside
/// them (errors as [`read_policies`]).
pub fn read_all(
    source: &str,
    text: &str,
) -> Result<(Vec<InputObject>, Vec<InputOther>), InputError> {
    let mut out = Vec::new();
    let mut others = Vec::new();
    for_each_object(source, text, |origin, value| {
        if let Some(policy) = policy_of(value)? {
            out.push(InputObject::Policy(InputPolicy {
                origin: origin.clone(),
                policy,
            }));
        } else if let Some(binding) = v1_object_of(value, BINDING_KIND)? {
            out.push(InputObject::Binding(InputBinding {
                origin: origin.clone(),
                binding,
            }));
        } else {
            others.push(InputOther {
                origin: origin.clone(),
                value: value.clone(),
            });
        }
        Ok(())
    })?;
    Ok((out, others))
}

/// Reads a param object's name, namespace and labels. `Err` names the field that is wrong
/// (`metadata.name` missing or not a string, `metadata.namespace` not a string,
/// `metadata.labels` not a map of strings); the caller adds the file and document.
pub fn param_object(other: &InputOther) -> Result<crate::bindings::ParamObject, String> {
    let v = &other.value;
    let what = format!("param object ({} {})", other.api_version(), other.kind());
    let meta = v.get("metadata");
    let name = match meta.and_then(|m| m.get("name")) {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(format!("{what}: metadata.name: Required value"));
        }
        Some(other) => {
            return Err(format!(
                "{what}: metadata.name: must be a string, got {other}"
            ));
        }
    };
    let namespace = match meta.and_then(|m| m.get("namespace")) {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) if n.is_empty() => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(other) => {
            return Err(format!(
                "{what} {name:?}: metadata.namespace: must be a string, got {other}"
            ));
        }
    };
    let mut labels = std::collections::BTreeMap::new();
    match meta.and_then(|m| m.get("labels")) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, val) in m {
                let Value::String(s) = val else {
                    return Err(format!(
                        "{what} {name:?}: metadata.labels.{k}: must be a string, got {val}"
                    ));
                };
                labels.insert(k.clone(), s.clone());
            }
        }
        Some(other) => {
            return Err(format!(
                "{what} {name:?}: metadata.labels: must be a map of strings, got {other}"
            ));
        }
    }
    Ok(crate::bindings::ParamObject {
        api_version: other.api_version().to_owned(),
        kind: other.kind().to_owned(),
        name,
        namespace,
        labels,
    })
}

/// Reads every `apiextensions.k8s.io/v1` `CustomResourceDefinition` of one source (for
/// `--crd`); other kinds are ignored.
pub fn read_crds(source: &str, text: &str) -> Result<Vec<CustomResourceDefinition>, InputError> {
    let mut out = Vec::new();
    for_each_object(source, text, |_, value| {
        if str_field(value, "kind") == Some("CustomResourceDefinition")
            && str_field(value, "apiVersion") == Some("apiextensions.k8s.io/v1")
        {
            let crd = serde_json::from_value(value.clone())
                .map_err(|e| format!("invalid CustomResourceDefinition: {e}"))?;
            out.push(crd);
        }
        Ok(())
    })?;
    Ok(out)
}

/// `Ok(None)` for other kinds; the policy read as v1 for any supported version.
fn policy_of(value: &Value) -> Result<Option<ValidatingAdmissionPolicy>, String> {
    v1_object_of(value, POLICY_KIND)
}

/// `Ok(None)` unless `value` is a `wanted` of a supported admissionregistration version;
/// then the object read as v1 (without its status).
pub(crate) fn v1_object_of<T: serde::de::DeserializeOwned>(
    value: &Value,
    wanted: &str,
) -> Result<Option<T>, String> {
    if str_field(value, "apiVersion").is_none() || str_field(value, "kind").is_none() {
        return Err("not a Kubernetes object: `apiVersion` and `kind` must be strings".into());
    }
    decode_v1(value, wanted).map_err(|e| e.to_string())
}

/// [`v1_object_of`] with the failure as data (the field and the decoder's message). A value
/// without string `apiVersion` and `kind` is not a `wanted` (`Ok(None)`).
pub fn decode_v1<T: serde::de::DeserializeOwned>(
    value: &Value,
    wanted: &str,
) -> Result<Option<T>, DecodeFailure> {
    let (Some(api_version), Some(kind)) =
        (str_field(value, "apiVersion"), str_field(value, "kind"))
    else {
        return Ok(None);
    };
    if kind != wanted {
        return Ok(None);
    }
    if !POLICY_API_VERSIONS.contains(&api_version) {
        if api_version.starts_with("admissionregistration.k8s.io/") {
            return Err(DecodeFailure::UnsupportedVersion {
                kind: wanted.to_owned(),
                api_version: api_version.to_owned(),
            });
        }
        return Ok(None);
    }
    let mut v = value.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "apiVersion".into(),
            Value::String(POLICY_API_VERSIONS[0].into()),
        );
        // The status is what vapcheck computes; an old or foreign one must not make reading fail.
        obj.remove("status");
    }
    // The error names the field (`spec.policyName: invalid type: ...`).
    serde_path_to_error::deserialize(v).map(Some).map_err(|e| {
        let path = e.path().to_string();
        DecodeFailure::Field {
            kind: wanted.to_owned(),
            field: if path == "." { String::new() } else { path },
            message: e.inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ps: &[InputPolicy]) -> Vec<String> {
        ps.iter()
            .map(|p| {
                format!(
                    "{}={}",
                    p.origin,
                    p.policy.metadata.name.clone().unwrap_or_default()
                )
            })
            .collect()
    }

    const VAP: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: a\nspec:\n  validations:\n  - expression: 'true'\n";

    #[test]
    fn multi_document_yaml_with_other_kinds_and_blank_documents() {
        let text = format!(
            "# leading comment\n---\n{VAP}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n---\n# only a comment\n---\n{}\n...\n",
            VAP.replace("name: a", "name: b")
                .replace("/v1\n", "/v1beta1\n")
        );
        let ps = read_policies("f.yaml", &text).unwrap();
        assert_eq!(names(&ps), ["f.yaml: document 1=a", "f.yaml: document 3=b"]);
        assert_eq!(
            ps[1]
                .policy
                .spec
                .as_ref()
                .unwrap()
                .validations
                .as_ref()
                .unwrap()[0]
                .expression,
            "true"
        );
    }

    #[test]
    fn v1alpha1_is_read_as_v1_and_status_is_dropped() {
        let text = VAP.replace("/v1\n", "/v1alpha1\n") + "status:\n  observedGeneration: nope\n";
        let ps = read_policies("x", &text).unwrap();
        assert_eq!(ps.len(), 1);
    }

    #[test]
    fn lists_are_walked() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "x"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "y"}}
        ]}"#;
        let ps = read_policies("l.json", text).unwrap();
        assert_eq!(
            names(&ps),
            [
                "l.json: document 1, item 0=x",
                "l.json: document 1, item 2=y"
            ]
        );
    }

    #[test]
    fn json_streams_and_arrays() {
        let one = r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "j"}}"#;
        let ps = read_policies("s", &format!("{one}\n{one}")).unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[1].origin.document, 2);
        let ps = read_policies("s", &format!("[{one}, {one}, {one}]")).unwrap();
        assert_eq!(
            ps.iter().map(|p| p.origin.document).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // flow-style YAML that is not JSON still parses as YAML
        let ps = read_policies("s", "{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicy, metadata: {name: f}}").unwrap();
        assert_eq!(names(&ps), ["s: document 1=f"]);
    }

    #[test]
    fn errors_name_the_document_and_line() {
        let text = format!("{VAP}---\nkind: [unclosed\n");
        let e = read_policies("bad.yaml", &text).unwrap_err();
        assert_eq!((e.document, e.line), (Some(2), Some(8)));
        assert!(
            e.to_string()
                .starts_with("bad.yaml: document 2 (line 8): invalid YAML"),
            "{e}"
        );

        let e = read_policies("s.yaml", "just a string\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.yaml: document 1 (line 1): not a Kubernetes object: `apiVersion` and `kind` must be strings"
        );

        let e = read_policies(
            "p.yaml",
            &VAP.replace("  - expression: 'true'\n", "    nope: 1\n"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("p.yaml: document 1 (line 1): invalid ValidatingAdmissionPolicy:"),
            "{e}"
        );

        let e = read_policies("v.yaml", &VAP.replace("/v1\n", "/v2\n")).unwrap_err();
        assert!(e.message.contains("unsupported apiVersion"), "{e}");
    }

    #[test]
    fn directives_are_tolerated() {
        let ps = read_policies("d", &format!("%YAML 1.2\n---\n{VAP}")).unwrap();
        assert_eq!(names(&ps), ["d: document 1=a"]);
    }

    #[test]
    fn empty_input_has_no_policies() {
        assert!(read_policies("e", "").unwrap().is_empty());
        assert!(
            read_policies("e", "---\n# nothing\n...\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn markers_need_column_zero_and_a_separator() {
        let text = format!("{VAP}  description: |\n    ---not a marker\n");
        let docs = split_yaml(&text);
        assert_eq!(docs.len(), 1);
        assert!(is_marker("--- !!map", "---"));
        assert!(!is_marker("----", "---"));
        assert!(!is_marker(" ---", "---"));
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Arbitrary text never panics the reader; errors always name the source.
        #[test]
        fn reader_never_panics(text in "(?s)[-.#:{}\\[\\]\"' a-zA-Z0-9\\n\\t|>&*!]{0,200}") {
            if let Err(e) = read_policies("fuzz", &text) {
                prop_assert_eq!(e.file.as_str(), "fuzz");
            }
        }

        /// A policy document survives any number of surrounding documents and blank ones.
        #[test]
        fn policies_are_found_among_other_documents(before in 0usize..4, after in 0usize..4, blank in any::<bool>()) {
            let other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
            let vap = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\n";
            let mut docs: Vec<&str> = std::iter::repeat_n(other, before).collect();
            if blank { docs.push("# nothing\n"); }
            docs.push(vap);
            docs.extend(std::iter::repeat_n(other, after));
            let text = docs.join("---\n");
            let ps = read_policies("s", &text).unwrap();
            prop_assert_eq!(ps.len(), 1);
            prop_assert_eq!(ps[0].origin.document, before + 1);
        }
    }
}
