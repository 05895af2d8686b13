//! One model of the CEL-bearing admission objects: ValidatingAdmissionPolicy,
//! MutatingAdmissionPolicy and their bindings, seen through what they have in common, so that
//! the API server's create and update validation ([`validate_create`],
//! [`validate_policy_update`], [`validate_binding_update`]), the bindings analysis
//! (`crate::bindings::analyse`) and the controller are written once for both plugins.
//!
//! Mirrors `k8s.io/apiserver` v0.37.1 `pkg/admission/plugin/policy/generic`: [`PolicyAccessor`]
//! and [`BindingAccessor`] are its `PolicyAccessor` and `BindingAccessor` (accessor.go: name,
//! `GetParamKind`, `GetMatchConstraints`, `GetFailurePolicy`; `GetPolicyName`, `GetParamRef`,
//! `GetMatchResources`), by which `policy_source.go` (`NewPolicySource[P, B, E]`,
//! `calculatePolicyData`) and `policy_dispatcher.go` (`CollectParams`) serve both plugins from
//! one source of hooks (`Source[H Hook]`, interfaces.go). What differs per kind is a method of
//! [`AdmissionObject`]: its defaulting (`SetObjectDefaults_<Kind>`, k8s.io/kubernetes
//! `pkg/apis/admissionregistration/v1/zz_generated.defaults.go`) and its strategy's validation
//! (`validate<Kind>`, `pkg/apis/admissionregistration/validation/validation.go`); the
//! expression sites of a policy are `crate::policy::expression_sites` (ValidatingAdmissionPolicy) and
//! `crate::mutating::mutation_sites` (MutatingAdmissionPolicy), one layer up.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
    ParamKind, ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::k8s_env::apiserver::Parses;

use super::field::FieldError;
use super::meta::MetaContext;
use super::vap::{Options, Preexisting, Server, as_returned, validate_static_suffix};
use super::{map, vap};

/// The admission plugin an object belongs to: what a configuration error says and what a
/// binding that passes does differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    /// ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding.
    Validating,
    /// MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding.
    Mutating,
}

impl Plugin {
    /// The kind of the plugin's policies.
    pub fn policy_kind(self) -> &'static str {
        match self {
            Plugin::Validating => "ValidatingAdmissionPolicy",
            Plugin::Mutating => "MutatingAdmissionPolicy",
        }
    }

    /// The kind of the plugin's bindings.
    pub fn binding_kind(self) -> &'static str {
        match self {
            Plugin::Validating => "ValidatingAdmissionPolicyBinding",
            Plugin::Mutating => "MutatingAdmissionPolicyBinding",
        }
    }
}

/// An admission policy object or binding as kube-apiserver's registry handles it.
pub trait AdmissionObject: Clone {
    /// The plugin the object belongs to.
    const PLUGIN: Plugin;

    /// `metadata`.
    fn metadata(&self) -> &ObjectMeta;

    /// `metadata.name`, or `""`.
    fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// The kind's defaulting, `SetObjectDefaults_<Kind>`.
    fn set_defaults(&mut self);

    /// The object with its kind's defaults.
    fn defaulted(&self) -> Self {
        let mut o = self.clone();
        o.set_defaults();
        o
    }

    /// The strategy's validation of the defaulted object (`validate<Kind>`), before the
    /// registry's static-suffix rule, in its order.
    fn validate(&self, opts: &Options, server: Server) -> Vec<FieldError>;
}

/// What the generic plugin reads of a policy (upstream's `PolicyAccessor`), and what its
/// update validation keeps of the stored object.
pub trait PolicyAccessor: AdmissionObject {
    /// The plugin's binding kind.
    type Binding: BindingAccessor;

    /// `spec.paramKind`.
    fn param_kind(&self) -> Option<&ParamKind>;
    /// `spec.matchConstraints`.
    fn match_constraints(&self) -> Option<&MatchResources>;
    /// `spec.failurePolicy`.
    fn failure_policy(&self) -> Option<&str>;
    /// `spec.matchConditions` (empty when unset).
    fn match_conditions(&self) -> &[MatchCondition];
    /// The expressions an update of this (stored) object keeps in the StoredExpressions
    /// environment (`find<Kind>PreexistingExpressions`).
    fn preexisting(&self) -> Preexisting;
}

/// What the generic plugin reads of a binding (upstream's `BindingAccessor`).
pub trait BindingAccessor: AdmissionObject {
    /// `spec.policyName` (or `""`).
    fn policy_name(&self) -> &str;
    /// `spec.paramRef`.
    fn param_ref(&self) -> Option<&ParamRef>;
    /// `spec.matchResources`.
    fn match_resources(&self) -> Option<&MatchResources>;
    /// `spec.validationActions` (none for a mutating binding).
    fn validation_actions(&self) -> &[String];
}

/// What the API server answers to a create of `object` (defaulted first): the field errors of
/// its strategy's `Validate`, then `ValidateStaticSuffix` when the server reserves the suffix,
/// as `rest.ValidateCreate` returns them. Empty: accepted. The paramKind and paramRef
/// authorization that follows is not reproduced (it depends on the requesting user; vapcheck
/// assumes one allowed to read the param kind).
pub fn validate_create<T: AdmissionObject>(object: &T, server: Server) -> Vec<FieldError> {
    validate_create_parsed(object, server, Arc::default())
}

/// [`validate_create`] with the parses of `parses`: texts parsed already (by the type check of
/// the same policy) are not parsed again, and the new parses are kept there.
pub fn validate_create_parsed<T: AdmissionObject>(
    object: &T,
    server: Server,
    parses: Arc<Parses>,
) -> Vec<FieldError> {
    let o = object.defaulted();
    let opts = Options {
        parses,
        ..Options::default()
    };
    let mut errs = o.validate(&opts, server);
    if server.reserves_static_suffix() {
        errs.extend(validate_static_suffix(o.metadata().name.as_deref()));
    }
    as_returned(errs)
}

/// What the API server answers to an update of `old` (as stored) to `new`
/// (`Validate<Kind>Update`): expressions of `old` compile in the StoredExpressions environment
/// (as [`PolicyAccessor::preexisting`] keeps them); match conditions are not re-validated when
/// neither they nor `paramKind` changed (`ignore<Kind>MatchConditions`, semantic equality: nil
/// and empty lists are equal). The generic metadata update checks (`resourceVersion`,
/// immutable fields) are not reproduced: `kubectl apply` sends them right.
pub fn validate_policy_update<P: PolicyAccessor>(
    new: &P,
    old: &P,
    server: Server,
) -> Vec<FieldError> {
    let n = new.defaulted();
    let o = old.defaulted();
    let opts = Options {
        ignore_match_conditions: n.param_kind() == o.param_kind()
            && n.match_conditions() == o.match_conditions(),
        preexisting: o.preexisting(),
        ..Options::default()
    };
    as_returned(n.validate(&opts, server))
}

/// An update of a binding (`Validate<Kind>BindingUpdate`): the new binding validated as on
/// create, without the static-suffix rule.
pub fn validate_binding_update<B: BindingAccessor>(binding: &B) -> Vec<FieldError> {
    as_returned(
        binding
            .defaulted()
            .validate(&Options::default(), Server::PINNED),
    )
}

/// The [`AdmissionObject`] impls, one kind a line: its plugin, its defaulting
/// (`SetObjectDefaults_<Kind>`) and its create validation, a closure over the object, the
/// options and the server.
macro_rules! admission_objects {
    ($( $kind:ty: $plugin:expr, $defaults:path, |$obj:ident, $opts:ident, $server:ident| $validate:expr; )*) => {$(
        impl AdmissionObject for $kind {
            const PLUGIN: Plugin = $plugin;

            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }

            fn set_defaults(&mut self) {
                $defaults(self);
            }

            fn validate(&self, $opts: &Options, $server: Server) -> Vec<FieldError> {
                let $obj = self;
                $validate
            }
        }
    )*};
}

admission_objects! {
    ValidatingAdmissionPolicy: Plugin::Validating, vap::default_policy, |p, opts, server| vap::validate_policy(p, opts, server);
    MutatingAdmissionPolicy: Plugin::Mutating, map::default_mutating_policy, |p, opts, server| map::validate_policy(p, opts, server);
    ValidatingAdmissionPolicyBinding: Plugin::Validating, vap::default_binding, |b, _opts, _server| vap::validate_binding(b, MetaContext::RestCreate);
    MutatingAdmissionPolicyBinding: Plugin::Mutating, map::default_mutating_binding, |b, _opts, _server| map::validate_binding(b);
}

/// The [`PolicyAccessor`] impls, one policy kind a line: both kinds' specs are optional and
/// name these fields alike; only the binding kind and the pre-existing-object rule differ.
macro_rules! policy_accessors {
    ($( $kind:ty: $binding:ty, $preexisting:path; )*) => {$(
        impl PolicyAccessor for $kind {
            type Binding = $binding;

            fn param_kind(&self) -> Option<&ParamKind> {
                self.spec.as_ref().and_then(|s| s.param_kind.as_ref())
            }

            fn match_constraints(&self) -> Option<&MatchResources> {
                self.spec
                    .as_ref()
                    .and_then(|s| s.match_constraints.as_ref())
            }

            fn failure_policy(&self) -> Option<&str> {
                self.spec.as_ref().and_then(|s| s.failure_policy.as_deref())
            }

            fn match_conditions(&self) -> &[MatchCondition] {
                self.spec
                    .as_ref()
                    .and_then(|s| s.match_conditions.as_deref())
                    .unwrap_or_default()
            }

            fn preexisting(&self) -> Preexisting {
                $preexisting(self.spec.as_ref())
            }
        }
    )*};
}

policy_accessors! {
    ValidatingAdmissionPolicy: ValidatingAdmissionPolicyBinding, Preexisting::of_validating;
    MutatingAdmissionPolicy: MutatingAdmissionPolicyBinding, Preexisting::of_mutating;
}

impl BindingAccessor for ValidatingAdmissionPolicyBinding {
    fn policy_name(&self) -> &str {
        &self.spec.policy_name
    }

    fn param_ref(&self) -> Option<&ParamRef> {
        self.spec.param_ref.as_ref()
    }

    fn match_resources(&self) -> Option<&MatchResources> {
        self.spec.match_resources.as_ref()
    }

    fn validation_actions(&self) -> &[String] {
        &self.spec.validation_actions
    }
}

impl BindingAccessor for MutatingAdmissionPolicyBinding {
    fn policy_name(&self) -> &str {
        self.spec
            .as_ref()
            .and_then(|s| s.policy_name.as_deref())
            .unwrap_or_default()
    }

    fn param_ref(&self) -> Option<&ParamRef> {
        self.spec.as_ref().and_then(|s| s.param_ref.as_ref())
    }

    fn match_resources(&self) -> Option<&MatchResources> {
        self.spec.as_ref().and_then(|s| s.match_resources.as_ref())
    }

    fn validation_actions(&self) -> &[String] {
        &[]
    }
}
