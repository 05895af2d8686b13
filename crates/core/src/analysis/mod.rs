//! The analysis of a check, without I/O: given the objects already read and decoded (policies,
//! MutatingAdmissionPolicies, bindings, param objects, webhook configurations, the policy
//! engines' policies, the documents that do not decode, a static-manifest folder as its
//! loader read it, the stored versions given with `--previous`) and the backends already
//! loaded, [`analyse`] gives kube-apiserver's verdict on each object (a create, an update, or
//! the static loader's), checks each policy ([`analyse_policy`], [`analyse_mutating_policy`])
//! and works out what each binding will do ([`crate::bindings`]); it returns the report, an
//! entry per object in input order. `vapcheck check` and the editor server call it through
//! `crate::cli` (which reads the files, the folder and the stored versions and loads the
//! backends); the controller checks each policy it watches with [`analyse_policy`] and
//! [`analyse_mutating_policy`], the functions [`analyse`] uses per entry.
//!
//! The readers of the objects (`input`, `mutating`, `webhooks`, `gatekeeper`, `kyverno`) and
//! the places in the source text (`positions`) are here too, as `crate::cli` reaches them.

pub mod effects;
pub mod entry;
pub mod gatekeeper;
pub mod input;
pub mod kyverno;
pub mod memo;
pub mod mutating;
pub mod positions;
pub mod undecoded;
pub mod webhooks;

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};

use crate::apiserver::static_manifests::{self, StaticLoad};
use crate::apiserver::{self, Server};
use crate::k8s_env::KubernetesVersion;
use crate::policy::check::check_policy_with_params;
use crate::policy::runtime_check::ParamBinding;
use crate::policy::{
    Backends, CheckOptions, Discovery, ExpressionChecker, Mode, ParsedTexts, PolicyStatus,
    RestMapper, SchemaSource,
};

use self::entry::{ApiServerVerdict, CheckedPolicy, STATIC_MANIFESTS_KIND};
use self::input::{InputObject, InputOther, InputPolicy, Undecoded};
pub use self::memo::{Kept, Memo};

/// The backends of a check, owned: loaded by the front end (files, the embedded schemas or a
/// live cluster), used here.
pub struct LoadedBackends {
    /// Resource → kinds.
    pub rest_mapper: Box<dyn RestMapper>,
    /// Discovery (extended mode wildcard/subresource expansion), if available.
    pub discovery: Option<Box<dyn Discovery>>,
    /// Schemas.
    pub schemas: Box<dyn SchemaSource>,
    /// CEL parser and checker.
    pub checker: Box<dyn ExpressionChecker>,
}

impl LoadedBackends {
    /// The backends, borrowed as the per-policy checks take them.
    pub fn backends(&self) -> Backends<'_> {
        Backends {
            rest_mapper: self.rest_mapper.as_ref(),
            discovery: self.discovery.as_deref(),
            schemas: self.schemas.as_ref(),
            checker: self.checker.as_ref(),
        }
    }
}

/// What a check computes before it renders anything: an entry per object (and per document
/// that does not decode), in output order, and the text of each source by its name (for the
/// positions of the findings, `crate::cli::emit::findings`).
#[derive(Debug)]
pub struct Analysis {
    /// The entries.
    pub checked: Vec<CheckedPolicy>,
    /// The text of each source read.
    pub sources: BTreeMap<String, String>,
}

/// The objects of the files, decoded: the validating policies and bindings as read, the other
/// objects sorted into the kinds checked (each reader's documents that do not decode join
/// `undecoded`), and every source's text.
pub struct Objects {
    /// ValidatingAdmissionPolicies and their bindings, in input order.
    pub policies: Vec<InputObject>,
    /// Every other object (param objects, Constraints, and the objects below as read).
    pub others: Vec<InputOther>,
    /// MutatingAdmissionPolicies and their bindings.
    pub mutating: Vec<mutating::MutatingObject>,
    /// Validating and MutatingWebhookConfigurations.
    pub webhooks: Vec<webhooks::WebhookObject>,
    /// Gatekeeper ConstraintTemplates with K8sNativeValidation code.
    pub templates: Vec<gatekeeper::TemplateObject>,
    /// Kyverno's policies.
    pub kyverno: Vec<kyverno::PolicyObject>,
    /// Documents that do not decode and files that cannot be read, each placed in its source.
    pub undecoded: Vec<Undecoded>,
    /// The text of each source read, by its name.
    pub texts: BTreeMap<String, String>,
}

impl Objects {
    /// Sorts `others` into the kinds checked (`mutating::read_lenient`,
    /// `webhooks::read_lenient`, `gatekeeper::read_lenient`, `kyverno::read_lenient`) and
    /// places every document that does not decode in its source ([`undecoded::locate`]).
    pub fn decode(
        policies: Vec<InputObject>,
        others: Vec<InputOther>,
        mut undecoded: Vec<Undecoded>,
        texts: BTreeMap<String, String>,
    ) -> Objects {
        let (mutating, bad) = mutating::read_lenient(&others);
        undecoded.extend(bad);
        let (webhooks, bad) = webhooks::read_lenient(&others);
        undecoded.extend(bad);
        let (templates, bad) = gatekeeper::read_lenient(&others);
        undecoded.extend(bad);
        let (kyverno, bad) = kyverno::read_lenient(&others);
        undecoded.extend(bad);
        self::undecoded::locate(&mut undecoded, &texts);
        Objects {
            policies,
            others,
            mutating,
            webhooks,
            templates,
            kyverno,
            undecoded,
            texts,
        }
    }

    /// How many objects of the kinds checked there are.
    pub fn count(&self) -> usize {
        self.policies.len()
            + self.mutating.len()
            + self.webhooks.len()
            + self.templates.len()
            + self.kyverno.len()
    }
}

/// The stored versions of objects (`--previous`): an object of the same kind and name is
/// verdicted as an update of it.
#[derive(Default)]
pub struct Previous {
    /// ValidatingAdmissionPolicies and bindings.
    pub objects: Vec<InputObject>,
    /// MutatingAdmissionPolicies and bindings.
    pub mutating: Vec<mutating::MutatingObject>,
    /// Webhook configurations.
    pub webhooks: Vec<webhooks::WebhookObject>,
}

/// Everything a check reads, already read.
pub struct Input {
    /// The objects of the files.
    pub objects: Objects,
    /// The source names of the files in input order (the order of the report).
    pub files: Vec<String>,
    /// A static-manifest folder (its name) as kube-apiserver's loader reads it
    /// ([`static_manifests::load`]).
    pub static_manifests: Option<(String, StaticLoad)>,
    /// The stored versions.
    pub previous: Previous,
}

impl Input {
    /// Whether the check needs the backends (schemas, mapping, checker): some policy to check,
    /// match conditions of a webhook to type-check (extended mode), a `matchPolicy: Exact`
    /// webhook to judge against discovery (VAP123), or a policy engine's policy. Bindings
    /// alone need none: only the API server's verdict is computed for them.
    pub fn needs_backends(&self, mode: Mode) -> bool {
        let objects = &self.objects;
        objects
            .mutating
            .iter()
            .any(|o| matches!(o, mutating::MutatingObject::Policy(..)))
            || (mode == Mode::Extended
                && objects.webhooks.iter().any(|o| {
                    o.config
                        .webhooks()
                        .iter()
                        .any(|w| !w.match_conditions().is_empty())
                }))
            || objects.webhooks.iter().any(|o| {
                o.config
                    .webhooks()
                    .iter()
                    .any(|w| w.match_policy.as_deref() == Some("Exact"))
            })
            || !objects.templates.is_empty()
            || !objects.kyverno.is_empty()
            || objects
                .policies
                .iter()
                .any(|o| matches!(o, InputObject::Policy(_)))
            || self
                .static_manifests
                .as_ref()
                .is_some_and(|(_, load)| !load.policies.is_empty())
    }
}

/// How a check runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The API server whose verdicts are given.
    pub server: Server,
    /// How policies are checked.
    pub check: CheckOptions,
    /// The discovery of the backends is a cluster's (no `--openapi` folder and no CRD given):
    /// a param kind it does not serve does not exist.
    pub live: bool,
}

/// The API server of `version` (`--kubernetes-version`, `kubernetesVersion`; none: the pinned
/// one); `Err` names the versions supported.
pub fn server_of(version: Option<KubernetesVersion>) -> Result<Server, String> {
    match version {
        None => Ok(Server::PINNED),
        Some(v) if v.major == 1 && (30..=Server::PINNED.minor).contains(&v.minor) => {
            Ok(Server { minor: v.minor })
        }
        Some(v) => Err(format!(
            "Kubernetes {}.{} is not supported (supported: 1.30..1.{})",
            v.major,
            v.minor,
            Server::PINNED.minor
        )),
    }
}

/// The status of one ValidatingAdmissionPolicy ([`check_policy_with_params`]): what `check`
/// gives each policy of its input and the controller each policy it watches. `params` are
/// what each of its bindings evaluates it with (known to `check` from the bindings and param
/// objects of its input; none for the controller); `parsed` keeps the parses made, for the
/// create-time verdict on the same texts.
pub fn analyse_policy<'p>(
    policy: &'p ValidatingAdmissionPolicy,
    params: Vec<ParamBinding>,
    options: &CheckOptions,
    backends: &Backends<'_>,
    parsed: &mut ParsedTexts<'p>,
) -> PolicyStatus {
    check_policy_with_params(policy, options, backends, parsed, params)
}

/// The status of one MutatingAdmissionPolicy
/// ([`crate::mutating::check_mutating_policy_parsed`]), for `check` and the controller alike.
pub fn analyse_mutating_policy<'p>(
    policy: &'p MutatingAdmissionPolicy,
    options: &CheckOptions,
    backends: &Backends<'_>,
    parsed: &mut ParsedTexts<'p>,
) -> PolicyStatus {
    crate::mutating::check_mutating_policy_parsed(policy, options, backends, parsed)
}

/// What kube-apiserver answers to `object`: a create, or an update of `stored`.
fn api_server_verdict(
    object: &InputObject,
    stored: Option<&InputObject>,
    server: Server,
) -> ApiServerVerdict {
    let errors = match (object, stored) {
        (InputObject::Policy(p), Some(InputObject::Policy(old))) => {
            apiserver::validate_policy_update(&p.policy, &old.policy, server)
        }
        (InputObject::Policy(p), _) => apiserver::validate_policy_create(&p.policy, server),
        (InputObject::Binding(b), Some(InputObject::Binding(_))) => {
            apiserver::validate_binding_update(&b.binding)
        }
        (InputObject::Binding(b), _) => apiserver::validate_binding_create(&b.binding, server),
    };
    ApiServerVerdict::new(
        server.minor,
        stored.is_some(),
        errors.iter().map(Into::into).collect(),
    )
}

/// The entries of a static-manifest folder: one for the folder (every loader error), then
/// each policy and binding that decoded, with the errors about it.
fn static_entries(
    dir: &str,
    load: &StaticLoad,
    server: Server,
) -> Vec<(InputObject, ApiServerVerdict)> {
    // The loader's errors are about files, not fields.
    let verdict = |causes: Vec<String>| ApiServerVerdict {
        server_minor: server.minor,
        update: false,
        causes: causes
            .into_iter()
            .map(|c| crate::finding::Cause::new("", c))
            .collect(),
        static_dir: Some(dir.to_owned()),
    };
    let origin = |l: &static_manifests::Location| input::Origin {
        source: l.file.clone(),
        document: l.document.unwrap_or(0),
        item: l.item,
    };
    let mut out = Vec::new();
    for p in &load.policies {
        out.push((
            InputObject::Policy(InputPolicy {
                origin: origin(&p.location),
                policy: p.object.clone(),
            }),
            verdict(p.errors.clone()),
        ));
    }
    for b in &load.bindings {
        out.push((
            InputObject::Binding(input::InputBinding {
                origin: origin(&b.location),
                binding: b.object.clone(),
            }),
            verdict(b.errors.clone()),
        ));
    }
    out
}

/// The report of a check on `input` (steps 3 to 5 of "The path of one policy",
/// docs/architecture.md): the static folder's entry first if any, then an entry per object in
/// input order (by file as listed in `input.files`, document, list item), each with
/// kube-apiserver's verdict (an update of its stored version when `input.previous` has one of
/// the same kind and name; the loader's for the static folder's objects), each policy's status
/// (with `backends`; none without them), and for bindings what each will do. `memo`, when
/// given, supplies the statuses of the policies checked before with the same backends and
/// options ([`Memo`]). `Err`: a param object that does not decode (naming its file, document
/// and field).
pub fn analyse(
    input: Input,
    backends: Option<&LoadedBackends>,
    options: &Options,
    mut memo: Option<&mut Memo<'_>>,
) -> Result<Analysis, String> {
    let Input {
        objects:
            Objects {
                policies,
                others,
                mutating: mutating_objects,
                webhooks: webhook_objects,
                templates,
                kyverno: kyverno_policies,
                undecoded,
                texts,
            },
        files,
        static_manifests: static_load,
        previous,
    } = input;
    let Options {
        server,
        check: check_options,
        live,
    } = options;
    let (server, live) = (*server, *live);
    let loaded = backends;
    let backends = loaded.map(LoadedBackends::backends);
    // The static folder's objects carry the loader's verdict instead of a create's.
    let mut objects: Vec<(InputObject, Option<ApiServerVerdict>)> =
        policies.into_iter().map(|o| (o, None)).collect();
    if let Some((dir, load)) = &static_load {
        for (o, v) in static_entries(dir, load, server) {
            objects.push((o, Some(v)));
        }
    }
    let mut checked: Vec<CheckedPolicy> = Vec::new();
    if let Some((dir, load)) = &static_load {
        let causes = load
            .errors
            .iter()
            .map(|e| crate::finding::Cause::new("", e.message.clone()))
            .collect();
        checked.push(CheckedPolicy::new(
            STATIC_MANIFESTS_KIND,
            dir.clone(),
            input::Origin {
                source: dir.clone(),
                document: 0,
                item: None,
            },
            ApiServerVerdict {
                static_dir: Some(dir.clone()),
                ..ApiServerVerdict::new(server.minor, false, causes)
            },
            None,
        ));
    }
    let verdicts: Vec<ApiServerVerdict> = objects
        .iter()
        .map(|(o, static_verdict)| match static_verdict {
            Some(v) => v.clone(),
            None => {
                let stored = previous
                    .objects
                    .iter()
                    .find(|p| p.kind() == o.kind() && p.name() == o.name());
                let verdict = || api_server_verdict(o, stored, server);
                match (memo.as_deref_mut(), o) {
                    (Some(memo), InputObject::Policy(p)) => {
                        let stored = stored.and_then(|s| match s {
                            InputObject::Policy(s) => Some(&s.policy),
                            InputObject::Binding(_) => None,
                        });
                        memo.verdict(o.kind(), &p.policy, stored, server.minor, verdict)
                    }
                    (Some(memo), InputObject::Binding(b)) => {
                        let stored = stored.and_then(|s| match s {
                            InputObject::Binding(s) => Some(&s.binding),
                            InputObject::Policy(_) => None,
                        });
                        memo.verdict(o.kind(), &b.binding, stored, server.minor, verdict)
                    }
                    (None, _) => verdict(),
                }
            }
        })
        .collect();
    // The objects of the files (the static folder's, which the API server loads at startup
    // from its own source, get no binding verdict yet) come first in `objects`.
    let file_objects: Vec<&InputObject> = objects
        .iter()
        .take_while(|(_, v)| v.is_none())
        .map(|(o, _)| o)
        .collect();
    // The params each binding of the files evaluates its policy with (runtime safety on
    // `params`, extended mode only).
    let params_by_policy = if check_options.mode == Mode::Extended {
        let accepted: Vec<bool> = verdicts
            .iter()
            .take(file_objects.len())
            .map(ApiServerVerdict::accepted)
            .collect();
        effects::param_bindings(&file_objects, &accepted, &others, loaded, live)
    } else {
        BTreeMap::new()
    };
    checked.extend(objects.iter().zip(verdicts).map(|((o, _), api_server)| {
        let status = match (o, &backends) {
            (InputObject::Policy(p), Some(b)) => {
                let pbs = params_by_policy.get(o.name()).cloned().unwrap_or_default();
                let check =
                    |pbs| analyse_policy(&p.policy, pbs, check_options, b, &mut Default::default());
                Some(match memo.as_deref_mut() {
                    // The params the policy's bindings evaluate it with are part of what its
                    // result depends on (runtime safety on `params`): part of the key.
                    Some(memo) => {
                        memo.status(&(&p.policy, &pbs), check_options, || check(pbs.clone()))
                    }
                    None => check(pbs),
                })
            }
            _ => None,
        };
        CheckedPolicy::new(
            o.kind(),
            o.name().to_owned(),
            o.origin().clone(),
            api_server,
            status,
        )
    }));
    // What each binding will do, after the folder's own entry in `checked`.
    if file_objects
        .iter()
        .any(|o| matches!(o, InputObject::Binding(_)))
    {
        let offset = usize::from(static_load.is_some());
        let entries = &mut checked[offset..offset + file_objects.len()];
        effects::add_binding_effects(&file_objects, &others, entries, loaded, live)
            .map_err(|e| e.to_string())?;
    }
    let keep_first = usize::from(static_load.is_some());
    if !mutating_objects.is_empty() {
        let mut entries: Vec<CheckedPolicy> = mutating_objects
            .iter()
            .map(|o| {
                let mut entry = mutating::verdict(o, &previous.mutating, server);
                entry.status = match (o, &backends, memo.as_deref_mut()) {
                    (mutating::MutatingObject::Policy(_, p), Some(b), Some(memo)) => {
                        Some(memo.status(p, check_options, || {
                            analyse_mutating_policy(p, check_options, b, &mut Default::default())
                        }))
                    }
                    _ => mutating::type_check(o, check_options, backends.as_ref()),
                };
                entry
            })
            .collect();
        // What each MutatingAdmissionPolicyBinding will do, as for validating bindings.
        if mutating_objects
            .iter()
            .any(|o| matches!(o, mutating::MutatingObject::Binding(..)))
        {
            effects::add_mutating_binding_effects(
                &mutating_objects,
                &others,
                &mut entries,
                loaded,
                live,
            )
            .map_err(|e| e.to_string())?;
        }
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !webhook_objects.is_empty() {
        let entries: Vec<CheckedPolicy> = webhook_objects
            .iter()
            .map(|o| {
                let mut entry = webhooks::verdict(o, &previous.webhooks, server);
                entry.status = webhooks::type_check(o, check_options, backends.as_ref());
                if let Some(groups) = backends
                    .as_ref()
                    .and_then(|b| b.discovery)
                    .and_then(|d| d.api_groups().ok())
                {
                    entry
                        .advice
                        .extend(crate::webhooks::exact_match_bypass(&o.config, &groups));
                }
                entry
            })
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !templates.is_empty() {
        let constraints = gatekeeper::constraints(&others);
        let entries = templates
            .iter()
            .map(|o| gatekeeper::check(o, &constraints, server, check_options, backends.as_ref()))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !kyverno_policies.is_empty() {
        let entries = kyverno_policies
            .iter()
            .map(|o| kyverno::check(o, server, check_options, backends.as_ref()))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    if !undecoded.is_empty() {
        let entries = undecoded
            .iter()
            .map(|u| self::undecoded::entry(u, server.minor))
            .collect();
        mutating::merge_in_input_order(&mut checked, entries, &files, keep_first);
    }
    Ok(Analysis {
        checked,
        sources: texts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_of(text: &str) -> Input {
        let (policies, others) = input::read_all("t.yaml", text).expect("reads");
        let texts = BTreeMap::from([("t.yaml".to_owned(), text.to_owned())]);
        Input {
            objects: Objects::decode(policies, others, Vec::new(), texts),
            files: vec!["t.yaml".to_owned()],
            static_manifests: None,
            previous: Previous::default(),
        }
    }

    const BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: p, validationActions: [Deny]}
";

    const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations: [{expression: 'object.spec.replicas > 1'}]
";

    /// Bindings alone need no backends, and are analysed without them: the API server's
    /// verdict and what the binding will do, no status.
    #[test]
    fn bindings_alone_are_analysed_without_backends() {
        let input = input_of(BINDING);
        assert!(!input.needs_backends(Mode::Extended));
        let options = Options {
            server: Server::PINNED,
            check: CheckOptions::default(),
            live: false,
        };
        let analysis = analyse(input, None, &options, None).expect("analysis");
        assert_eq!(analysis.checked.len(), 1);
        let entry = &analysis.checked[0];
        assert_eq!(entry.kind, input::BINDING_KIND);
        assert!(entry.api_server.accepted(), "{:?}", entry.api_server);
        assert!(entry.status.is_none());
        assert!(entry.effect.is_some());
        assert_eq!(analysis.sources.len(), 1);
    }

    /// A policy needs the backends; one added to the bindings makes the whole input need them,
    /// and the binding is then reported as binding it.
    #[test]
    fn a_policy_needs_the_backends() {
        assert!(input_of(POLICY).needs_backends(Mode::Strict));
        let both = input_of(&format!("{POLICY}---\n{BINDING}"));
        assert!(both.needs_backends(Mode::Strict));
        let options = Options {
            server: Server::PINNED,
            check: CheckOptions::default(),
            live: false,
        };
        let analysis = analyse(both, None, &options, None).expect("analysis");
        assert_eq!(analysis.checked.len(), 2);
        assert_eq!(
            analysis.checked[0].bound_by.as_deref(),
            Some(&["b".to_owned()][..])
        );
    }

    #[test]
    fn servers_of_supported_versions_only() {
        assert_eq!(server_of(None), Ok(Server::PINNED));
        let v = |minor| KubernetesVersion {
            major: 1,
            minor,
            patch: None,
        };
        assert_eq!(server_of(Some(v(31))), Ok(Server { minor: 31 }));
        let err = server_of(Some(v(29))).expect_err("1.29 is not supported");
        assert!(err.starts_with("Kubernetes 1.29 is not supported"), "{err}");
    }
}
