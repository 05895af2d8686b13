//! vapcheck's families about what it checks: policies and bindings by state, per-policy
//! findings, type-check time and cost, skipped kinds, schema fetches and status writes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::{
    Metrics, PolicyKind, PolicyState, SchemaFetchResult, SkipReason, StatusWriteResult, gauge_value,
};

/// Every verdict label of `vapcheck_bindings{verdict}`, for zero-valued series (the
/// controller's binding analysis, `controller::bindings`, sets one of them per binding).
pub const VERDICT_LABELS: &[&str] = &[
    "denies_all",
    "inactive",
    "evaluates",
    "evaluates_with_warnings",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    kind: PolicyKind,
    state: PolicyState,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct VerdictLabels {
    verdict: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PolicyLabels {
    kind: PolicyKind,
    policy: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FetchLabels {
    result: SchemaFetchResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabels {
    result: StatusWriteResult,
}

/// Number of policies per state, set as a whole from a snapshot of all policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyStateCounts {
    /// Policies in [`PolicyState::Clean`].
    pub clean: u64,
    /// Policies in [`PolicyState::Warnings`].
    pub warnings: u64,
    /// Policies in [`PolicyState::Partial`].
    pub partial: u64,
    /// Policies in [`PolicyState::Failed`].
    pub failed: u64,
}

impl PolicyStateCounts {
    /// Counts the states of an iterator of policies.
    pub fn tally(states: impl IntoIterator<Item = PolicyState>) -> Self {
        let mut counts = PolicyStateCounts::default();
        for state in states {
            match state {
                PolicyState::Clean => counts.clean += 1,
                PolicyState::Warnings => counts.warnings += 1,
                PolicyState::Partial => counts.partial += 1,
                PolicyState::Failed => counts.failed += 1,
            }
        }
        counts
    }

    fn slot(&mut self, state: PolicyState) -> &mut u64 {
        match state {
            PolicyState::Clean => &mut self.clean,
            PolicyState::Warnings => &mut self.warnings,
            PolicyState::Partial => &mut self.partial,
            PolicyState::Failed => &mut self.failed,
        }
    }

    fn get(&self, state: PolicyState) -> u64 {
        match state {
            PolicyState::Clean => self.clean,
            PolicyState::Warnings => self.warnings,
            PolicyState::Partial => self.partial,
            PolicyState::Failed => self.failed,
        }
    }
}

/// The state of each policy of one kind by name, with the counts kept up to date on each
/// change (a tally over every policy on each check made a cold start quadratic: 12.5 million
/// visits at 5,000 policies).
#[derive(Debug, Default)]
pub struct PolicyStates {
    by_name: std::collections::HashMap<String, PolicyState>,
    counts: PolicyStateCounts,
}

impl PolicyStates {
    /// Records `state` for `name`; returns the new counts.
    pub fn set(&mut self, name: &str, state: PolicyState) -> PolicyStateCounts {
        let before = match self.by_name.get_mut(name) {
            Some(kept) => Some(std::mem::replace(kept, state)),
            None => {
                self.by_name.insert(name.to_owned(), state);
                None
            }
        };
        if let Some(before) = before {
            *self.counts.slot(before) -= 1;
        }
        *self.counts.slot(state) += 1;
        self.counts
    }

    /// Forgets `name`; returns the new counts.
    pub fn remove(&mut self, name: &str) -> PolicyStateCounts {
        if let Some(before) = self.by_name.remove(name) {
            *self.counts.slot(before) -= 1;
        }
        self.counts
    }

    /// The names with a recorded state.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    /// The counts of the recorded states.
    pub fn counts(&self) -> PolicyStateCounts {
        self.counts
    }
}

/// The families of checked policies and bindings.
#[derive(Debug, Clone)]
pub(super) struct PolicyMetrics {
    states: Family<StateLabels, Gauge>,
    bindings: Family<VerdictLabels, Gauge>,
    warnings: Family<PolicyLabels, Gauge>,
    runtime_errors: Family<PolicyLabels, Gauge>,
    rejected_on_create: Family<PolicyLabels, Gauge>,
    typecheck_duration: Histogram,
    estimated_cost: Histogram,
    kinds_skipped: Family<ReasonLabels, Counter>,
    schema_fetches: Family<FetchLabels, Counter>,
    schema_cache_kinds: Gauge,
    status_writes: Family<WriteLabels, Counter>,
}

impl PolicyMetrics {
    /// Registers the families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        let m = PolicyMetrics {
            states: Family::default(),
            bindings: Family::default(),
            warnings: Family::default(),
            runtime_errors: Family::default(),
            rejected_on_create: Family::default(),
            // 100 µs … 3.3 s, doubling.
            typecheck_duration: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            // 1 … 1e12, times ten: PerCallLimit (1e6) and RuntimeCELCostBudget (1e7) are
            // bucket bounds.
            estimated_cost: Histogram::new(exponential_buckets(1.0, 10.0, 13)),
            kinds_skipped: Family::default(),
            schema_fetches: Family::default(),
            schema_cache_kinds: Gauge::default(),
            status_writes: Family::default(),
        };
        r.register(
            "vapcheck_policies",
            "Number of admission policies per kind (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) and check state",
            m.states.clone(),
        );
        r.register(
            "vapcheck_bindings",
            "Number of ValidatingAdmissionPolicyBindings per verdict",
            m.bindings.clone(),
        );
        r.register(
            "vapcheck_policy_expression_warnings",
            "Number of expression warnings of each admission policy, by kind",
            m.warnings.clone(),
        );
        r.register(
            "vapcheck_policy_runtime_errors",
            "Number of expression accesses of each admission policy that error at admission on valid objects (extended mode; docs/runtime-safety.md), by kind",
            m.runtime_errors.clone(),
        );
        r.register(
            "vapcheck_policy_rejected_on_create",
            "1 when kube-apiserver would reject the stored admission policy if it were created now, else 0 (a ValidatingAdmissionPolicy's AcceptedOnCreate condition names the causes)",
            m.rejected_on_create.clone(),
        );
        r.register(
            "vapcheck_typecheck_duration_seconds",
            "Time to type-check one policy against all its kinds",
            m.typecheck_duration.clone(),
        );
        r.register(
            "vapcheck_cel_estimated_cost",
            "Worst-case estimated CEL cost of each expression for each checked kind (extended mode, schema sizes; docs/cost.md)",
            m.estimated_cost.clone(),
        );
        r.register(
            "vapcheck_kinds_skipped",
            "Number of kinds not checked, by reason",
            m.kinds_skipped.clone(),
        );
        r.register(
            "vapcheck_schema_fetches",
            "Number of OpenAPI schema fetches, by result",
            m.schema_fetches.clone(),
        );
        r.register(
            "vapcheck_schema_cache_kinds",
            "Number of kinds whose schema is cached",
            m.schema_cache_kinds.clone(),
        );
        r.register(
            "vapcheck_status_writes",
            "Number of policy status writes, by result",
            m.status_writes.clone(),
        );
        m
    }
}

impl Metrics {
    // ---- vapcheck ----

    /// Sets `vapcheck_policies{kind, state}` for every state from a snapshot of all policies
    /// of `kind`.
    pub fn set_policy_states(&self, kind: PolicyKind, counts: PolicyStateCounts) {
        for &state in PolicyState::ALL {
            self.policy
                .states
                .get_or_create(&StateLabels { kind, state })
                .set(gauge_value(counts.get(state)));
        }
    }

    /// Sets `vapcheck_bindings{verdict}` for every verdict (missing ones: 0) from a snapshot of
    /// all bindings seen.
    pub fn set_binding_verdicts(&self, counts: &std::collections::HashMap<&'static str, u64>) {
        for &verdict in VERDICT_LABELS {
            self.policy
                .bindings
                .get_or_create(&VerdictLabels {
                    verdict: verdict.to_owned(),
                })
                .set(gauge_value(counts.get(verdict).copied().unwrap_or(0)));
        }
    }

    /// Sets `vapcheck_policy_expression_warnings{kind, policy}`.
    pub fn set_policy_warnings(&self, kind: PolicyKind, policy: &str, warnings: usize) {
        self.policy
            .warnings
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::try_from(warnings).unwrap_or(i64::MAX));
    }

    /// Sets `vapcheck_policy_runtime_errors{kind, policy}`.
    pub fn set_policy_runtime_errors(&self, kind: PolicyKind, policy: &str, errors: usize) {
        self.policy
            .runtime_errors
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::try_from(errors).unwrap_or(i64::MAX));
    }

    /// Sets `vapcheck_policy_rejected_on_create{kind, policy}`.
    pub fn set_policy_rejected_on_create(&self, kind: PolicyKind, policy: &str, rejected: bool) {
        self.policy
            .rejected_on_create
            .get_or_create(&PolicyLabels {
                kind,
                policy: policy.to_owned(),
            })
            .set(i64::from(rejected));
    }

    /// Removes every per-policy series of a deleted policy.
    pub fn remove_policy(&self, kind: PolicyKind, policy: &str) {
        let labels = PolicyLabels {
            kind,
            policy: policy.to_owned(),
        };
        self.policy.warnings.remove(&labels);
        self.policy.runtime_errors.remove(&labels);
        self.policy.rejected_on_create.remove(&labels);
    }

    /// Records the time one policy's type check took.
    pub fn observe_typecheck(&self, took: Duration) {
        self.policy.typecheck_duration.observe(took.as_secs_f64());
    }

    /// Observes the worst-case estimate of each expression for each kind of one check
    /// (`PolicyStatus::cost`, extended mode; one observation per expression and kind).
    pub fn observe_estimated_costs(&self, cost: &crate::policy::PolicyCost) {
        for e in &cost.expressions {
            for _ in &e.gvks {
                // u64 → f64 rounds above 2^53; bucket bounds are far below.
                self.policy.estimated_cost.observe(e.max as f64);
            }
        }
    }

    /// Counts `n` kinds skipped for `reason`.
    pub fn kinds_skipped(&self, reason: SkipReason, n: u64) {
        self.policy
            .kinds_skipped
            .get_or_create(&ReasonLabels { reason })
            .inc_by(n);
    }

    /// Counts one schema fetch.
    pub fn schema_fetch(&self, result: SchemaFetchResult) {
        self.policy
            .schema_fetches
            .get_or_create(&FetchLabels { result })
            .inc();
    }

    /// Sets the number of kinds in the schema cache.
    pub fn set_schema_cache_kinds(&self, n: usize) {
        self.policy
            .schema_cache_kinds
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one status write (or a skipped one, [`StatusWriteResult::Unchanged`]).
    pub fn status_write(&self, result: StatusWriteResult) {
        self.policy
            .status_writes
            .get_or_create(&WriteLabels { result })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts kept on each change are the tally of the recorded states, through new
    /// names, changed states, unchanged states and removals (also of unknown names).
    #[test]
    fn policy_states_keep_the_tally() {
        use PolicyState::{Clean, Failed, Partial, Warnings};
        let mut states = PolicyStates::default();
        let mut reference: std::collections::BTreeMap<String, PolicyState> = Default::default();
        let steps: &[(&str, Option<PolicyState>)] = &[
            ("a", Some(Clean)),
            ("b", Some(Warnings)),
            ("a", Some(Failed)),
            ("c", Some(Partial)),
            ("a", Some(Failed)),
            ("b", None),
            ("zz", None),
            ("b", Some(Clean)),
            ("c", Some(Warnings)),
        ];
        for (name, state) in steps {
            let counts = match state {
                Some(s) => {
                    reference.insert((*name).to_owned(), *s);
                    states.set(name, *s)
                }
                None => {
                    reference.remove(*name);
                    states.remove(name)
                }
            };
            let want = PolicyStateCounts::tally(reference.values().copied());
            assert_eq!(counts, want, "after {name} -> {state:?}");
            assert_eq!(states.counts(), want);
        }
        let mut names: Vec<&String> = states.names().collect();
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
