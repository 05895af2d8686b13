//! What kube-apiserver says when an admission policy object is created or updated, offline:
//! its defaulting, its field validation and the CEL compile in the environment it uses for
//! new and stored expressions, reproduced from the pinned release (see [`vap`] and [`map`]
//! for the sources). Pure: no I/O.
//!
//! A verdict is the list of field errors the API server returns (HTTP 422, in its order),
//! each printed exactly as `field.Error.Error()` prints it; an empty list means the server
//! accepts the object.

pub mod field;
pub mod generic;
pub mod map;
pub mod meta;
pub mod names;
pub mod static_manifests;
pub mod vap;
pub mod webhook;

pub use field::FieldError;
pub use generic::{AdmissionObject, BindingAccessor, Plugin, PolicyAccessor};
// The create and update validation of each kind, by its plugin's name for it: one generic
// function each ([`generic`]), over the kind's `AdmissionObject` implementation.
pub use generic::{
    validate_binding_update, validate_binding_update as validate_mutating_binding_update,
    validate_create as validate_policy_create, validate_create as validate_binding_create,
    validate_create as validate_mutating_policy_create,
    validate_create as validate_mutating_binding_create,
    validate_create_parsed as validate_policy_create_parsed,
    validate_create_parsed as validate_mutating_policy_create_parsed, validate_policy_update,
    validate_policy_update as validate_mutating_policy_update,
};
pub use vap::{Server, validate_binding_static, validate_policy_static};
