//! Which expressions and kinds of a policy are checked, and the text of the warnings.
//!
//! Pure: everything that talks to a cluster, reads schemas or type-checks CEL sits behind the
//! traits of [`backend`] and [`restmapper`]. The entry point is [`check_policy`]. See
//! `docs/policy-checking.md` for the strict and extended modes.

pub mod backend;
pub mod check;
pub mod cost;
pub mod discovery;
pub mod expressions;
pub mod gvk;
pub mod issues;
pub mod kinds;
pub mod literal;
pub mod narrowing;
pub mod probe;
pub mod render;
pub mod restmapper;
pub mod runtime;
pub mod runtime_check;
pub mod status;
pub mod types;

#[cfg(test)]
pub(crate) mod fakes;

pub use backend::{
    CheckEnv, EnvRequest, ExpressionChecker, ObjectDecl, ParamsDecl, ParsedExpr, SchemaError,
    SchemaLookup, SchemaSource, SchemaType,
};
pub use check::{
    Backends, CheckOptions, ExtraCheck, ParsedTexts, PolicyInput, check_input, check_input_parsed,
    check_policy, check_policy_parsed,
};
pub use cost::{CostFinding, CostLimit, CostOutcome, ExpressionCost, PolicyCost};
pub use expressions::{ExpressionField, ExpressionSite, Mode, expression_sites};
pub use gvk::{Gvk, Gvr};
pub use issues::{Issue, Issues, Severity};
pub use kinds::{
    DEFAULT_EXTENDED_KIND_LIMIT, KindSelection, MatchConstraints, ResetOnce, SkipReason,
    SkipSubject, Skipped, UPSTREAM_KIND_LIMIT, extend_selection, types_to_check,
    types_to_check_extended, types_to_check_with,
};
pub use render::{KindOutcome, KindResult, render_warning};
pub use restmapper::{
    ApiGroupResources, ApiResource, ApiVersionResources, Discovery, DiscoveryRestMapper,
    MappingError, RestMapper,
};
pub use status::{PolicyCondition, PolicyStatus, extended_keeps_strict};
pub use types::{ExpectedType, OutputType};
