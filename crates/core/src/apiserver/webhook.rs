//! kube-apiserver's defaulting and validation of ValidatingWebhookConfiguration and
//! MutatingWebhookConfiguration (`admissionregistration.k8s.io/v1`) on create and update, in the
//! API server's order.
//!
//! Sources (Kubernetes 1.37.1):
//! * `pkg/apis/admissionregistration/v1/defaults.go` (`SetDefaults_ValidatingWebhook`,
//!   `SetDefaults_MutatingWebhook`, `SetDefaults_Rule`, `SetDefaults_ServiceReference`) and
//!   `zz_generated.defaults.go` (`SetObjectDefaults_*WebhookConfiguration`);
//! * `pkg/apis/admissionregistration/validation/validation.go`
//!   (`ValidateValidatingWebhookConfiguration`, `validateValidatingWebhook`,
//!   `validateMutatingWebhook`, `validateAdmissionReviewVersions`, `validateRuleWithOperations`,
//!   `validateMatchConditions`, and the `...Update` variants with their options);
//! * `k8s.io/apiserver/pkg/util/webhook/validation.go` (`ValidateWebhookURL`,
//!   `ValidateWebhookService`), and Go's `net/url` `Parse` for the URL's parts and errors;
//! * `pkg/registry/admissionregistration/{validating,mutating}webhookconfiguration/strategy.go`
//!   (`Validate`: the static-suffix rule of `ManifestBasedAdmissionControlConfig`).
//!
//! The objects are read leniently, as Go's JSON decoding reads them: a missing field and an
//! explicit `null` are the same, and `sideEffects` keeps the difference between absent (a
//! `Required value`) and empty (an `Unsupported value`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, NamedRuleWithOperations};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Deserialize;
use serde_json::json;

use crate::k8s_env::apiserver::Parses;

use super::field::FieldError;
use super::meta::{MetaContext, validate_object_meta};
use super::names::is_dns1123_subdomain;
use super::vap::{
    Options, Preexisting, Server, as_returned, validate_label_selector_with,
    validate_match_conditions, validate_named_rule, validate_static_suffix,
};

/// Which of the two configuration kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookKind {
    /// `ValidatingWebhookConfiguration`.
    Validating,
    /// `MutatingWebhookConfiguration`.
    Mutating,
}

impl WebhookKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Validating => "ValidatingWebhookConfiguration",
            WebhookKind::Mutating => "MutatingWebhookConfiguration",
        }
    }

    /// The kind named `kind`, if it is one of the two.
    pub fn of(kind: &str) -> Option<Self> {
        match kind {
            "ValidatingWebhookConfiguration" => Some(WebhookKind::Validating),
            "MutatingWebhookConfiguration" => Some(WebhookKind::Mutating),
            _ => None,
        }
    }
}

/// A webhook configuration as read (`admissionregistration.k8s.io/v1`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct WebhookConfigurationSpec {
    /// `metadata`.
    pub metadata: ObjectMeta,
    /// `webhooks`.
    pub webhooks: Option<Vec<Webhook>>,
}

/// A webhook configuration of either kind.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfiguration {
    /// Its kind.
    pub kind: WebhookKind,
    /// Its fields.
    pub spec: WebhookConfigurationSpec,
}

impl WebhookConfiguration {
    /// `metadata.name` (empty when missing).
    pub fn name(&self) -> &str {
        self.spec.metadata.name.as_deref().unwrap_or_default()
    }

    /// The webhooks (none when the list is missing).
    pub fn webhooks(&self) -> &[Webhook] {
        self.spec.webhooks.as_deref().unwrap_or_default()
    }
}

/// One entry of `webhooks` (the fields of `ValidatingWebhook` and `MutatingWebhook`; only the
/// latter has `reinvocationPolicy`, which is ignored, as Go's decoder ignores it, on a
/// validating configuration).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Webhook {
    /// `name`.
    pub name: Option<String>,
    /// `clientConfig`.
    pub client_config: Option<ClientConfig>,
    /// `rules`.
    pub rules: Option<Vec<RuleWithOperations>>,
    /// `failurePolicy`.
    pub failure_policy: Option<String>,
    /// `matchPolicy`.
    pub match_policy: Option<String>,
    /// `namespaceSelector`.
    pub namespace_selector: Option<LabelSelector>,
    /// `objectSelector`.
    pub object_selector: Option<LabelSelector>,
    /// `sideEffects`.
    pub side_effects: Option<String>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<i32>,
    /// `admissionReviewVersions`.
    pub admission_review_versions: Option<Vec<String>>,
    /// `reinvocationPolicy` (mutating webhooks).
    pub reinvocation_policy: Option<String>,
    /// `matchConditions`.
    pub match_conditions: Option<Vec<MatchCondition>>,
}

impl Webhook {
    /// `name` (empty when missing).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// The match conditions (none when missing).
    pub fn match_conditions(&self) -> &[MatchCondition] {
        self.match_conditions.as_deref().unwrap_or_default()
    }

    /// The rules (none when missing).
    pub fn rules(&self) -> &[RuleWithOperations] {
        self.rules.as_deref().unwrap_or_default()
    }
}

/// `clientConfig`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientConfig {
    /// `url`.
    pub url: Option<String>,
    /// `service`.
    pub service: Option<ServiceReference>,
    /// `caBundle` (base64 in JSON).
    pub ca_bundle: Option<k8s_openapi::ByteString>,
}

/// `clientConfig.service`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceReference {
    /// `namespace`.
    pub namespace: Option<String>,
    /// `name`.
    pub name: Option<String>,
    /// `path`.
    pub path: Option<String>,
    /// `port`.
    pub port: Option<i32>,
}

/// A rule of a webhook (`RuleWithOperations`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct RuleWithOperations {
    /// `operations`.
    pub operations: Option<Vec<String>>,
    /// `apiGroups`.
    pub api_groups: Option<Vec<String>>,
    /// `apiVersions`.
    pub api_versions: Option<Vec<String>>,
    /// `resources`.
    pub resources: Option<Vec<String>>,
    /// `scope`.
    pub scope: Option<String>,
}

impl RuleWithOperations {
    /// The same rule as a policy's rule without `resourceNames` (whose validation is the same
    /// `validateRuleWithOperations`).
    fn as_named(&self) -> NamedRuleWithOperations {
        NamedRuleWithOperations {
            api_groups: self.api_groups.clone(),
            api_versions: self.api_versions.clone(),
            operations: self.operations.clone(),
            resource_names: None,
            resources: self.resources.clone(),
            scope: self.scope.clone(),
        }
    }
}

/// Reads a configuration of `kind` from its JSON (any version the caller accepts, read as v1).
/// `Err` names the field that does not decode ([`decode_configuration`], as one line).
pub fn read_configuration(
    kind: WebhookKind,
    value: &serde_json::Value,
) -> Result<WebhookConfiguration, String> {
    decode_configuration(kind, value).map_err(|(path, message)| {
        if path.is_empty() {
            format!("invalid {}: {message}", kind.as_str())
        } else {
            format!("invalid {}: {path}: {message}", kind.as_str())
        }
    })
}

/// [`read_configuration`] with the failure as (field path, decoder message).
pub fn decode_configuration(
    kind: WebhookKind,
    value: &serde_json::Value,
) -> Result<WebhookConfiguration, (String, String)> {
    serde_path_to_error::deserialize(value)
        .map(|spec| WebhookConfiguration { kind, spec })
        .map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            (path, e.inner().to_string())
        })
}

/// `SetObjectDefaults_ValidatingWebhookConfiguration` / `..._MutatingWebhookConfiguration`.
pub fn default_configuration(c: &mut WebhookConfiguration) {
    let mutating = c.kind == WebhookKind::Mutating;
    for w in c.spec.webhooks.iter_mut().flatten() {
        w.failure_policy.get_or_insert_with(|| "Fail".into());
        w.match_policy.get_or_insert_with(|| "Equivalent".into());
        w.namespace_selector
            .get_or_insert_with(LabelSelector::default);
        w.object_selector.get_or_insert_with(LabelSelector::default);
        w.timeout_seconds.get_or_insert(10);
        if mutating {
            w.reinvocation_policy.get_or_insert_with(|| "Never".into());
        } else {
            // Not a field of ValidatingWebhook: Go's decoder drops it.
            w.reinvocation_policy = None;
        }
        if let Some(s) = w.client_config.as_mut().and_then(|cc| cc.service.as_mut()) {
            s.port.get_or_insert(443);
        }
        for r in w.rules.iter_mut().flatten() {
            r.scope.get_or_insert_with(|| "*".into());
        }
    }
}

/// `validationOptions` of the webhook validations (the CEL part is [`Options`]).
#[derive(Debug, Clone)]
struct WebhookOptions {
    cel: Options,
    require_no_side_effects: bool,
    require_recognized_admission_review_version: bool,
    require_unique_webhook_names: bool,
    allow_invalid_label_value_in_selector: bool,
}

/// What the API server answers to a create of `config` (defaulted first): the field errors of
/// the strategy's `Validate`, in its order. Empty: accepted.
pub fn validate_webhook_configuration_create(
    config: &WebhookConfiguration,
    server: Server,
) -> Vec<FieldError> {
    let mut c = config.clone();
    default_configuration(&mut c);
    let opts = WebhookOptions {
        cel: Options {
            parses: Arc::new(Parses::new()),
            ..Options::default()
        },
        require_no_side_effects: true,
        require_recognized_admission_review_version: true,
        require_unique_webhook_names: true,
        allow_invalid_label_value_in_selector: false,
    };
    let mut errs = validate_configuration(&c, &opts, server);
    if server.reserves_static_suffix() {
        errs.extend(validate_static_suffix(c.spec.metadata.name.as_deref()));
    }
    as_returned(errs)
}

/// What the API server answers to an update of `old` (as stored) to `new`
/// (`Validate{Validating,Mutating}WebhookConfigurationUpdate`): the rules the stored object
/// already breaks are relaxed, and its match-condition expressions compile in the
/// StoredExpressions environment.
pub fn validate_webhook_configuration_update(
    new: &WebhookConfiguration,
    old: &WebhookConfiguration,
    server: Server,
) -> Vec<FieldError> {
    let mut n = new.clone();
    default_configuration(&mut n);
    let mut o = old.clone();
    default_configuration(&mut o);
    let (nw, ow) = (n.webhooks(), o.webhooks());
    // ignore*WebhookMatchConditions: reflect.DeepEqual of each webhook's list (nil and empty
    // differ there).
    let ignore_match_conditions = nw.len() == ow.len()
        && nw
            .iter()
            .zip(ow)
            .all(|(a, b)| a.match_conditions == b.match_conditions);
    let mut preexisting = Preexisting::default();
    for w in ow {
        for mc in w.match_conditions() {
            preexisting.match_conditions.insert(mc.expression.clone());
        }
    }
    let mut names = BTreeSet::new();
    let opts = WebhookOptions {
        cel: Options {
            ignore_match_conditions,
            preexisting,
            parses: Arc::new(Parses::new()),
            ..Options::default()
        },
        require_no_side_effects: ow
            .iter()
            .all(|w| matches!(w.side_effects.as_deref(), Some("None" | "NoneOnDryRun"))),
        require_recognized_admission_review_version: ow.iter().all(|w| {
            let versions = w.admission_review_versions.as_deref().unwrap_or_default();
            versions.is_empty() || versions.iter().any(|v| is_accepted_review_version(v))
        }),
        require_unique_webhook_names: ow.iter().all(|w| names.insert(w.name())),
        allow_invalid_label_value_in_selector: ow.iter().any(|w| {
            [&w.namespace_selector, &w.object_selector]
                .into_iter()
                .flatten()
                .any(|s| !validate_label_selector_with(s, "", true).is_empty())
        }),
    };
    as_returned(validate_configuration(&n, &opts, server))
}

/// `AcceptedAdmissionReviewVersions`.
const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

fn is_accepted_review_version(v: &str) -> bool {
    ACCEPTED_REVIEW_VERSIONS.contains(&v)
}

/// `validate{Validating,Mutating}WebhookConfiguration`.
fn validate_configuration(
    c: &WebhookConfiguration,
    opts: &WebhookOptions,
    server: Server,
) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&c.spec.metadata, MetaContext::RestCreate);
    let mut names = BTreeSet::new();
    for (i, hook) in c.webhooks().iter().enumerate() {
        let path = format!("webhooks[{i}]");
        errs.extend(validate_webhook(c.kind, hook, opts, server, &path));
        errs.extend(validate_admission_review_versions(
            hook.admission_review_versions
                .as_deref()
                .unwrap_or_default(),
            opts.require_recognized_admission_review_version,
            &format!("{path}.admissionReviewVersions"),
        ));
        let name = hook.name();
        if opts.require_unique_webhook_names && !name.is_empty() && !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        }
    }
    errs
}

/// `validateAdmissionReviewVersions`.
fn validate_admission_review_versions(
    versions: &[String],
    require_recognized: bool,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let accepted = ACCEPTED_REVIEW_VERSIONS.join(", ");
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            format!("must specify one of {accepted}"),
        ));
        return errs;
    }
    let mut seen = BTreeSet::new();
    let mut has_accepted = false;
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                format!("{path}[{i}]"),
                v,
                "duplicate version",
            ));
            continue;
        }
        for msg in super::names::is_dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{path}[{i}]"), v, msg));
        }
        if is_accepted_review_version(v) {
            has_accepted = true;
        }
    }
    if require_recognized && !has_accepted {
        errs.push(FieldError::invalid_json(
            path,
            json!(versions),
            format!("must include at least one of {accepted}"),
        ));
    }
    errs
}

/// `validateValidatingWebhook` / `validateMutatingWebhook` (the same checks; the mutating one
/// also checks `reinvocationPolicy`, after the selectors).
fn validate_webhook(
    kind: WebhookKind,
    hook: &Webhook,
    opts: &WebhookOptions,
    server: Server,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = is_fully_qualified_name(&format!("{path}.name"), hook.name());
    for (i, rule) in hook.rules().iter().enumerate() {
        errs.extend(validate_named_rule(
            &rule.as_named(),
            &format!("{path}.rules[{i}]"),
        ));
    }
    if let Some(fp) = hook.failure_policy.as_deref()
        && !matches!(fp, "Fail" | "Ignore")
    {
        errs.push(FieldError::not_supported(
            format!("{path}.failurePolicy"),
            fp,
            &["Fail", "Ignore"],
        ));
    }
    if let Some(mp) = hook.match_policy.as_deref()
        && !matches!(mp, "Exact" | "Equivalent")
    {
        errs.push(FieldError::not_supported(
            format!("{path}.matchPolicy"),
            mp,
            &["Equivalent", "Exact"],
        ));
    }
    let allowed: &[&str] = if opts.require_no_side_effects {
        &["None", "NoneOnDryRun"]
    } else {
        &["None", "NoneOnDryRun", "Some", "Unknown"]
    };
    match hook.side_effects.as_deref() {
        None => errs.push(FieldError::required(
            format!("{path}.sideEffects"),
            format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(se) if !allowed.contains(&se) => errs.push(FieldError::not_supported(
            format!("{path}.sideEffects"),
            se,
            allowed,
        )),
        Some(_) => {}
    }
    if let Some(t) = hook.timeout_seconds
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid_json(
            format!("{path}.timeoutSeconds"),
            json!(t),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    for (field, selector) in [
        ("namespaceSelector", &hook.namespace_selector),
        ("objectSelector", &hook.object_selector),
    ] {
        if let Some(s) = selector {
            errs.extend(validate_label_selector_with(
                s,
                &format!("{path}.{field}"),
                !opts.allow_invalid_label_value_in_selector,
            ));
        }
    }
    if kind == WebhookKind::Mutating
        && let Some(rp) = hook.reinvocation_policy.as_deref()
        && !matches!(rp, "Never" | "IfNeeded")
    {
        errs.push(FieldError::not_supported(
            format!("{path}.reinvocationPolicy"),
            rp,
            &["IfNeeded", "Never"],
        ));
    }
    let cc = hook.client_config.clone().unwrap_or_default();
    let cc_path = format!("{path}.clientConfig");
    match (&cc.url, &cc.service) {
        (Some(url), None) => errs.extend(validate_webhook_url(&format!("{cc_path}.url"), url)),
        (None, Some(s)) => errs.extend(validate_webhook_service(&format!("{cc_path}.service"), s)),
        _ => errs.push(FieldError::required(
            &cc_path,
            "exactly one of url or service is required",
        )),
    }
    if !opts.cel.ignore_match_conditions {
        errs.extend(validate_match_conditions(
            hook.match_conditions(),
            &format!("{path}.matchConditions"),
            &opts.cel,
            server,
        ));
    }
    errs
}

/// apimachinery `IsFullyQualifiedName`.
fn is_fully_qualified_name(path: &str, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let errs = is_dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, errs.join(","))];
    }
    if name.split('.').count() < 3 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        )];
    }
    Vec::new()
}

/// `ValidateWebhookService`. Its parameters are `(namespace, name)` but the webhook
/// validations pass `(Service.Name, Service.Namespace)`, so a missing namespace is reported at
/// `service.name` and a missing name at `service.namespace` (as the 1.37.1 API server answers).
fn validate_webhook_service(path: &str, s: &ServiceReference) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if s.namespace.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    if s.name.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    }
    let port = s.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid_json(
            format!("{path}.port"),
            json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = s.path.as_deref() else {
        return errs;
    };
    let p = format!("{path}.path");
    if url_path == "/" || url_path.is_empty() {
        return errs;
    }
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &p,
            url_path,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(&p, url_path, "must start with a '/'"));
    }
    // Go slices off the first byte whatever it is.
    let mut to_check = url_path.get(1..).unwrap_or_default();
    if let Some(stripped) = to_check.strip_suffix('/') {
        to_check = stripped;
    }
    for (i, step) in to_check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &p,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &p,
                url_path,
                format!("segment[{i}]: {failure}"),
            ));
        }
    }
    errs
}

/// `ValidateWebhookURL(path, url, forceHttps=true)`.
fn validate_webhook_url(path: &str, raw: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errs = Vec::new();
    match go_url::parse(raw) {
        Err(e) => errs.push(FieldError::required(
            path,
            format!("url must be a valid URL: {e}{FORM}"),
        )),
        Ok(u) => {
            if u.scheme != "https" {
                errs.push(FieldError::invalid(
                    path,
                    &u.scheme,
                    format!("'https' is the only allowed URL scheme{FORM}"),
                ));
            }
            if u.host.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    &u.host,
                    format!("host must be specified{FORM}"),
                ));
            }
            if let Some(user) = &u.user {
                errs.push(FieldError::invalid(
                    path,
                    user,
                    "user information is not permitted in the URL",
                ));
            }
            if !u.fragment.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    &u.fragment,
                    "fragments are not permitted in the URL",
                ));
            }
            if !u.raw_query.is_empty() {
                errs.push(FieldError::invalid(
                    path,
                    &u.raw_query,
                    "query parameters are not permitted in the URL",
                ));
            }
        }
    }
    errs
}

/// The parts of Go's `net/url.Parse` (Go 1.26, strict colons in http(s) hosts) that
/// `ValidateWebhookURL` reads, with its errors as `(*url.Error).Error` prints them.
pub(crate) mod go_url {
    /// What `ValidateWebhookURL` reads of a parsed URL.
    #[derive(Debug, Default, PartialEq, Eq)]
    pub(crate) struct Url {
        pub(crate) scheme: String,
        pub(crate) host: String,
        /// `User.String()` when userinfo is present.
        pub(crate) user: Option<String>,
        pub(crate) fragment: String,
        pub(crate) raw_query: String,
    }

    /// The encoding modes of `net/url` used here.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Host,
        Zone,
        UserPassword,
        Path,
        Fragment,
    }

    fn is_unreserved(c: u8) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
    }

    /// `shouldEscape(c, mode)` from Go's encoding table.
    fn should_escape(c: u8, mode: Mode) -> bool {
        if is_unreserved(c) {
            return false;
        }
        let allowed: &[u8] = match mode {
            Mode::Host | Mode::Zone => b"!\"$&'()*+,:;<=>[]",
            Mode::UserPassword => b"$&+,;=",
            Mode::Path => b"$&+,/:;=@",
            Mode::Fragment => b"!$&'()*+,/:;=?@",
        };
        !allowed.contains(&c)
    }

    fn unhex(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => 0,
        }
    }

    fn escape_error(s: &[u8]) -> String {
        format!(
            "invalid URL escape {}",
            crate::apiserver::field::go_quote(&String::from_utf8_lossy(s))
        )
    }

    /// `unescape(s, mode)`: only its error matters here (the decoded text is not used).
    fn check_unescape(s: &str, mode: Mode) -> Result<(), String> {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'%' => {
                    if i + 2 >= b.len()
                        || !b[i + 1].is_ascii_hexdigit()
                        || !b[i + 2].is_ascii_hexdigit()
                    {
                        let end = (i + 3).min(b.len());
                        return Err(escape_error(&b[i..end]));
                    }
                    if mode == Mode::Host && unhex(b[i + 1]) < 8 && &b[i..i + 3] != b"%25" {
                        return Err(escape_error(&b[i..i + 3]));
                    }
                    if mode == Mode::Zone {
                        let v = (unhex(b[i + 1]) << 4) | unhex(b[i + 2]);
                        if &b[i..i + 3] != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                            return Err(escape_error(&b[i..i + 3]));
                        }
                    }
                    i += 3;
                }
                c => {
                    if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode)
                    {
                        return Err(format!(
                            "invalid character {} in host name",
                            crate::apiserver::field::go_quote(&(c as char).to_string())
                        ));
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// `escape(s, encodeUserPassword)` (what `Userinfo.String` prints).
    fn escape_user(s: &str) -> String {
        let mut out = String::new();
        for &c in s.as_bytes() {
            if should_escape(c, Mode::UserPassword) {
                out.push_str(&format!("%{c:02X}"));
            } else {
                out.push(c as char);
            }
        }
        out
    }

    /// `unescape` that returns the text (for userinfo, whose decoded form is printed again).
    fn unescape(s: &str, mode: Mode) -> Result<String, String> {
        check_unescape(s, mode)?;
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                out.push((unhex(b[i + 1]) << 4) | unhex(b[i + 2]));
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn valid_optional_port(port: &str) -> bool {
        port.is_empty()
            || port
                .strip_prefix(':')
                .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
    }

    fn valid_userinfo(s: &str) -> bool {
        s.chars().all(|r| {
            r.is_ascii_alphanumeric()
                || matches!(
                    r,
                    '-' | '.'
                        | '_'
                        | ':'
                        | '~'
                        | '!'
                        | '$'
                        | '&'
                        | '\''
                        | '('
                        | ')'
                        | '*'
                        | '+'
                        | ','
                        | ';'
                        | '='
                        | '%'
                        | '@'
                )
        })
    }

    /// `parseHost`.
    fn parse_host(scheme: &str, host: &str) -> Result<String, String> {
        match host.rfind('[') {
            Some(i) if i > 0 => return Err("invalid IP-literal".into()),
            Some(_) => {
                let Some(close) = host.rfind(']') else {
                    return Err("missing ']' in host".into());
                };
                let colon_port = &host[close + 1..];
                if !valid_optional_port(colon_port) {
                    return Err(format!(
                        "invalid port {} after host",
                        crate::apiserver::field::go_quote(colon_port)
                    ));
                }
                let hostname = &host[1..close];
                let unescaped = match hostname.find("%25") {
                    Some(z) => {
                        let h = unescape(&hostname[..z], Mode::Host)?;
                        let zone = unescape(&hostname[z..], Mode::Zone)?;
                        h + &zone
                    }
                    None => unescape(hostname, Mode::Host)?,
                };
                match unescaped.parse::<core::net::IpAddr>() {
                    Ok(core::net::IpAddr::V6(_)) => {}
                    Ok(core::net::IpAddr::V4(_)) => return Err("invalid IP-literal".into()),
                    // netip.ParseAddr's own messages are not reproduced.
                    Err(_) if unescaped.contains('%') => {}
                    Err(_) => {
                        return Err(format!(
                            "invalid host: ParseAddr({}): unable to parse IP",
                            crate::apiserver::field::go_quote(&unescaped)
                        ));
                    }
                }
                return Ok(format!("[{unescaped}]{colon_port}"));
            }
            None => {}
        }
        if let Some(first) = host.find(':') {
            let last = host.rfind(':').unwrap_or(first);
            let i = if last != first && !matches!(scheme, "http" | "https") {
                last
            } else {
                first
            };
            let colon_port = &host[i..];
            if !valid_optional_port(colon_port) {
                return Err(format!(
                    "invalid port {} after host",
                    crate::apiserver::field::go_quote(colon_port)
                ));
            }
        }
        unescape(host, Mode::Host)
    }

    /// `url.Parse`: the error is `parse "<url>": <cause>`.
    pub(crate) fn parse(raw: &str) -> Result<Url, String> {
        let (u, frag) = raw.split_once('#').unwrap_or((raw, ""));
        let quoted =
            |s: &str, e: String| format!("parse {}: {e}", crate::apiserver::field::go_quote(s));
        let mut url = parse_without_fragment(u).map_err(|e| quoted(u, e))?;
        if !frag.is_empty() {
            url.fragment = unescape(frag, Mode::Fragment).map_err(|e| quoted(raw, e))?;
        }
        Ok(url)
    }

    fn parse_without_fragment(raw: &str) -> Result<Url, String> {
        if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        let mut url = Url::default();
        if raw == "*" {
            return Ok(url);
        }
        let (scheme, mut rest) = get_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            rest = &rest[..rest.len() - 1];
        } else if let Some((r, q)) = rest.split_once('?') {
            rest = r;
            url.raw_query = q.to_owned();
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                // Opaque.
                return Ok(url);
            }
            let segment = rest.split('/').next().unwrap_or_default();
            if segment.contains(':') {
                return Err("first path segment in URL cannot contain colon".into());
            }
        }
        if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
            let authority_and_path = &rest[2..];
            let (authority, path) = match authority_and_path.find('/') {
                Some(i) => (&authority_and_path[..i], &authority_and_path[i..]),
                None => (authority_and_path, ""),
            };
            let (user, host) = parse_authority(&url.scheme, authority)?;
            url.user = user;
            url.host = host;
            rest = path;
        }
        check_unescape(rest, Mode::Path)?;
        Ok(url)
    }

    fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
        for (i, c) in raw.bytes().enumerate() {
            match c {
                b'a'..=b'z' | b'A'..=b'Z' => {}
                b'0'..=b'9' | b'+' | b'-' | b'.' => {
                    if i == 0 {
                        return Ok(("", raw));
                    }
                }
                b':' => {
                    if i == 0 {
                        return Err("missing protocol scheme".into());
                    }
                    return Ok((&raw[..i], &raw[i + 1..]));
                }
                _ => return Ok(("", raw)),
            }
        }
        Ok(("", raw))
    }

    fn parse_authority(scheme: &str, authority: &str) -> Result<(Option<String>, String), String> {
        let at = authority.rfind('@');
        let host = parse_host(scheme, at.map_or(authority, |i| &authority[i + 1..]))?;
        let Some(i) = at else {
            return Ok((None, host));
        };
        let userinfo = &authority[..i];
        if !valid_userinfo(userinfo) {
            return Err("net/url: invalid userinfo".into());
        }
        let user = match userinfo.split_once(':') {
            None => escape_user(&unescape(userinfo, Mode::UserPassword)?),
            Some((name, password)) => {
                let name = unescape(name, Mode::UserPassword)?;
                let password = unescape(password, Mode::UserPassword)?;
                format!("{}:{}", escape_user(&name), escape_user(&password))
            }
        };
        Ok((Some(user), host))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parts_and_errors() {
            let u = parse("https://user:pw@example.com:8443/x?a=b#frag").unwrap();
            assert_eq!(u.scheme, "https");
            assert_eq!(u.host, "example.com:8443");
            assert_eq!(u.user.as_deref(), Some("user:pw"));
            assert_eq!(u.fragment, "frag");
            assert_eq!(u.raw_query, "a=b");
            assert_eq!(
                parse("https://example.com:abc/").unwrap_err(),
                "parse \"https://example.com:abc/\": invalid port \":abc\" after host"
            );
            assert_eq!(
                parse(":foo").unwrap_err(),
                "parse \":foo\": missing protocol scheme"
            );
            assert_eq!(
                parse("https://exa mple.com").unwrap_err(),
                "parse \"https://exa mple.com\": invalid character \" \" in host name"
            );
            assert_eq!(parse("https:opaque").unwrap().host, "");
        }
    }
}
