//! Extended mode: the worst-case CEL cost of each expression for each checked kind, the sums
//! the runtime budgets apply to, and findings when a maximum can exceed a runtime limit.
//!
//! Pure: the estimates come from the backend ([`CheckEnv::cost`](super::CheckEnv::cost));
//! this module only adds them up and compares them with the limits of the pinned release
//! (k8s.io/apiserver v0.37.1). kube-apiserver itself never estimates admission policies (it
//! compiles `object`/`params` as `dyn`); these are vapcheck's estimates with the kinds'
//! schemas (docs/cost.md).

use std::sync::Arc;

use serde::Serialize;

use super::expressions::ExpressionField;
use super::gvk::Gvk;

/// k8s.io/apiserver v0.37.1 `pkg/apis/cel/config.go` `PerCallLimit`: the cost limit of one
/// expression evaluation (`cel.CostLimit(celconfig.PerCallLimit)` in
/// `pkg/cel/environment/base.go`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// k8s.io/apiserver v0.37.1 `pkg/apis/cel/config.go` `RuntimeCELCostBudget`: the budget of one
/// policy evaluation per binding (`validating/dispatcher.go` passes it to `Validate`;
/// `validating/validator.go` spends it on the validations, the variables they evaluate, then
/// the message expressions; the audit annotations get a budget of their own).
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;
/// k8s.io/apiserver v0.37.1 `pkg/apis/cel/config.go` `RuntimeCELCostBudgetMatchConditions`:
/// the budget of the match conditions (`webhook/matchconditions/matcher.go` `Match`).
pub const RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS: u64 = 2_500_000;

/// What the backend estimated for one expression in one kind's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostOutcome {
    /// Minimum estimated cost.
    pub min: u64,
    /// Maximum estimated cost.
    pub max: u64,
    /// The schema paths whose sizes had no declared bound (so the estimate used the defaults
    /// derived from the request size), e.g. "`spec.containers` has no maxItems". Sorted. Shared
    /// strings: the estimates of a policy's kinds repeat the same reasons, which compare by
    /// address first.
    pub unbounded: Vec<Arc<str>>,
}

/// The estimate of one expression for the kinds that share it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionCost {
    /// The expression's fieldRef.
    pub field_ref: String,
    /// The kinds (`group/version, Kind=K`) with this estimate, in checking order.
    #[serde(serialize_with = "gvks_string")]
    pub gvks: Vec<Arc<Gvk>>,
    /// Minimum estimated cost.
    pub min: u64,
    /// Maximum estimated cost (`18446744073709551615`: unbounded).
    pub max: u64,
    /// Schema paths without a declared bound the estimate depends on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unbounded: Vec<Arc<str>>,
}

/// A runtime limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CostLimit {
    /// [`PER_CALL_LIMIT`], per expression evaluation.
    PerCallLimit,
    /// [`RUNTIME_CEL_COST_BUDGET`], per policy evaluation (validations, the variables they use
    /// and message expressions).
    RuntimeCELCostBudget,
    /// [`RUNTIME_CEL_COST_BUDGET`] again, for the audit annotations (a budget of their own).
    AuditAnnotationsBudget,
    /// [`RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS`].
    RuntimeCELCostBudgetMatchConditions,
}

impl CostLimit {
    /// The limit's value.
    pub fn value(self) -> u64 {
        match self {
            CostLimit::PerCallLimit => PER_CALL_LIMIT,
            CostLimit::RuntimeCELCostBudget | CostLimit::AuditAnnotationsBudget => {
                RUNTIME_CEL_COST_BUDGET
            }
            CostLimit::RuntimeCELCostBudgetMatchConditions => {
                RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS
            }
        }
    }

    /// How the text output names it.
    pub fn describe(self) -> &'static str {
        match self {
            CostLimit::PerCallLimit => "the per-expression limit (PerCallLimit)",
            CostLimit::RuntimeCELCostBudget => {
                "the per-policy budget of validations, variables and messages (RuntimeCELCostBudget)"
            }
            CostLimit::AuditAnnotationsBudget => {
                "the budget of the audit annotations (RuntimeCELCostBudget)"
            }
            CostLimit::RuntimeCELCostBudgetMatchConditions => {
                "the budget of the match conditions (RuntimeCELCostBudgetMatchConditions)"
            }
        }
    }

    /// The budget a site's cost is charged to; `None` for the mutations of a
    /// MutatingAdmissionPolicy (not estimated: their budgets are not established here).
    fn budget_of(field: ExpressionField) -> Option<CostLimit> {
        match field {
            ExpressionField::ValidationExpression(_)
            | ExpressionField::ValidationMessageExpression(_)
            | ExpressionField::Variable(_) => Some(CostLimit::RuntimeCELCostBudget),
            ExpressionField::AuditAnnotation(_) => Some(CostLimit::AuditAnnotationsBudget),
            ExpressionField::MatchCondition(_) => {
                Some(CostLimit::RuntimeCELCostBudgetMatchConditions)
            }
            ExpressionField::ApplyConfiguration(_) | ExpressionField::JsonPatch(_) => None,
        }
    }
}

/// The sum of the maxima charged to one budget, for the kinds that share it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSum {
    /// Whose sum it is when that is not the whole object: a webhook configuration's
    /// match-condition budget is spent per webhook, so its sums are at
    /// `webhooks[i].matchConditions`; `None` (and absent from the output) for a policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<String>,
    /// The kinds, in checking order.
    #[serde(serialize_with = "gvks_string")]
    pub gvks: Vec<Arc<Gvk>>,
    /// The budget.
    pub budget: CostLimit,
    /// The budget's value.
    pub limit: u64,
    /// Sum of the maxima (saturating).
    pub max: u64,
    /// How many expressions were summed (those without an estimate for this kind are not).
    pub expressions: usize,
}

/// A maximum that can exceed a runtime limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostFinding {
    /// The expression's fieldRef; `None` for a per-policy sum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<String>,
    /// The kinds, in checking order.
    #[serde(serialize_with = "gvks_string")]
    pub gvks: Vec<Arc<Gvk>>,
    /// The limit it can exceed.
    pub limit: CostLimit,
    /// The limit's value.
    pub limit_value: u64,
    /// The worst-case estimate.
    pub estimate: u64,
    /// The schema paths without a declared bound that make it large.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub because: Vec<Arc<str>>,
}

impl CostFinding {
    /// One line of text: `<fieldRef> on <kind>: worst-case cost <n> exceeds <limit> (<v>):
    /// <reasons>`.
    pub fn text(&self) -> String {
        let kinds = kinds_text(&self.gvks);
        let subject = match &self.field_ref {
            Some(f) => format!("{f} on {kinds}"),
            None => format!("the policy on {kinds}"),
        };
        let mut s = format!(
            "{subject}: worst-case cost {} exceeds {} of {}",
            group_digits(self.estimate),
            self.limit.describe(),
            group_digits(self.limit_value)
        );
        if !self.because.is_empty() {
            s.push_str(": ");
            s.push_str(&self.because.join(", "));
        }
        s
    }
}

/// `1234567` → `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `K1`, `K1; K2; K3`, or `K1; K2 and 5 more kinds`.
fn kinds_text(gvks: &[Arc<Gvk>]) -> String {
    if gvks.len() <= 3 {
        let all: Vec<String> = gvks.iter().map(ToString::to_string).collect();
        return all.join("; ");
    }
    format!("{}; {} and {} more kinds", gvks[0], gvks[1], gvks.len() - 2)
}

fn gvks_string<S: serde::Serializer>(g: &[Arc<Gvk>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(g.iter().map(ToString::to_string))
}

/// Appends `gvk` to the entry of `items` that `same` matches, or a new entry from `make`.
fn group<T>(items: &mut Vec<T>, gvk: Arc<Gvk>, same: impl Fn(&T) -> bool, make: impl FnOnce() -> T)
where
    T: HasGvks,
{
    match items.iter_mut().find(|t| same(t)) {
        Some(t) => t.gvks_mut().push(gvk),
        None => {
            let mut t = make();
            t.gvks_mut().push(gvk);
            items.push(t);
        }
    }
}

trait HasGvks {
    fn gvks_mut(&mut self) -> &mut Vec<Arc<Gvk>>;
}

impl HasGvks for CostFinding {
    fn gvks_mut(&mut self) -> &mut Vec<Arc<Gvk>> {
        &mut self.gvks
    }
}

impl HasGvks for BudgetSum {
    fn gvks_mut(&mut self) -> &mut Vec<Arc<Gvk>> {
        &mut self.gvks
    }
}

/// Everything the cost analysis reports for one policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCost {
    /// Per expression and kind, in site order then kind order.
    pub expressions: Vec<ExpressionCost>,
    /// Per kind and budget.
    pub budgets: Vec<BudgetSum>,
    /// Maxima that can exceed a limit.
    pub findings: Vec<CostFinding>,
}

impl PolicyCost {
    /// Whether nothing was estimated.
    pub fn is_empty(&self) -> bool {
        self.expressions.is_empty()
    }
}

/// The entries of one site in [`analyze`]: indices into its per-call findings and into
/// [`PolicyCost::expressions`].
struct SiteEntries {
    field: ExpressionField,
    per_call: Vec<usize>,
    expressions: Vec<usize>,
}

/// The sum of one kind's maxima charged to one budget, in [`analyze`].
struct Sum {
    gvk: Arc<Gvk>,
    budget: CostLimit,
    /// Sum of the maxima (saturating).
    max: u64,
    /// How many estimates were summed.
    count: usize,
    /// The entries of [`PolicyCost::expressions`] whose reasons the sum unites.
    entries: Vec<usize>,
}

/// Adds up `estimates` (site field, kind, outcome; in site order) into the per-kind budget
/// sums and the findings: an expression whose maximum exceeds [`PER_CALL_LIMIT`], and a budget
/// whose sum of maxima exceeds its value (the reasons are the union of its expressions').
/// Kinds with the same numbers (and reasons) are reported together. The kinds are shared
/// (`Arc`): a policy's estimates name a few kinds many times, and are compared by address first.
pub fn analyze(estimates: Vec<(ExpressionField, Arc<Gvk>, CostOutcome)>) -> PolicyCost {
    let mut out = PolicyCost::default();
    // One `Sum` per (kind, budget), in first-seen order. An estimate's reasons are those of the entry it joins (entries are
    // grouped by equal reasons), so the union is made once at the end from the entries,
    // instead of comparing and copying every estimate's reason strings into every sum.
    let mut sums: Vec<Sum> = Vec::new();
    let mut per_call: Vec<CostFinding> = Vec::new();
    // The entries of `per_call` and `out.expressions` of each site, in first-seen order of
    // the sites: an entry only ever groups estimates of its own site (the fieldRef is a
    // one-to-one rendering of it), so a new estimate is compared with its site's entries
    // only, not with every entry of the policy (which showed in the benchmark's profile,
    // docs/cost.md: a policy has sites × kinds estimates).
    let mut by_site: Vec<SiteEntries> = Vec::new();
    let mut site = 0;
    // The estimates of one site come together (one per kind): render its fieldRef once.
    let mut field_ref = String::new();
    let mut field_of_ref: Option<ExpressionField> = None;
    // Where the last estimate's sum was: the kinds come in the same order for every site, so
    // the next kind's sum is usually the one after it.
    let mut last_sum = 0;
    for (field, gvk, outcome) in estimates {
        if field_of_ref != Some(field) {
            field_ref = field.to_string();
            field_of_ref = Some(field);
            site = match by_site.iter().position(|s| s.field == field) {
                Some(i) => i,
                None => {
                    by_site.push(SiteEntries {
                        field,
                        per_call: Vec::new(),
                        expressions: Vec::new(),
                    });
                    by_site.len() - 1
                }
            };
        }
        let entries = &mut by_site[site];
        if outcome.max > PER_CALL_LIMIT {
            // Numbers first: they tell most entries apart without comparing strings.
            let same = entries.per_call.iter().copied().find(|&j| {
                per_call[j].estimate == outcome.max && per_call[j].because == outcome.unbounded
            });
            match same {
                Some(j) => per_call[j].gvks.push(gvk.clone()),
                None => {
                    entries.per_call.push(per_call.len());
                    per_call.push(CostFinding {
                        field_ref: Some(field_ref.clone()),
                        gvks: vec![gvk.clone()],
                        limit: CostLimit::PerCallLimit,
                        limit_value: PER_CALL_LIMIT,
                        estimate: outcome.max,
                        because: outcome.unbounded.clone(),
                    });
                }
            }
        }
        let Some(budget) = CostLimit::budget_of(field) else {
            continue;
        };
        // The one sum of (kind, budget).
        let is_it = |s: &Sum| s.budget == budget && s.gvk == gvk;
        let found = match sums.get(last_sum + 1) {
            Some(s) if is_it(s) => Some(last_sum + 1),
            _ => sums.iter().position(is_it),
        };
        let i = match found {
            Some(i) => i,
            None => {
                sums.push(Sum {
                    gvk: Arc::clone(&gvk),
                    budget,
                    max: 0,
                    count: 0,
                    entries: Vec::new(),
                });
                sums.len() - 1
            }
        };
        last_sum = i;
        let s = &mut sums[i];
        s.max = s.max.saturating_add(outcome.max);
        s.count += 1;
        let same = entries.expressions.iter().copied().find(|&j| {
            let e = &out.expressions[j];
            (e.min, e.max) == (outcome.min, outcome.max) && e.unbounded == outcome.unbounded
        });
        let entry = match same {
            Some(j) => {
                out.expressions[j].gvks.push(gvk);
                j
            }
            None => {
                entries.expressions.push(out.expressions.len());
                out.expressions.push(ExpressionCost {
                    field_ref: field_ref.clone(),
                    gvks: vec![gvk],
                    min: outcome.min,
                    max: outcome.max,
                    unbounded: outcome.unbounded,
                });
                out.expressions.len() - 1
            }
        };
        if !out.expressions[entry].unbounded.is_empty() && !s.entries.contains(&entry) {
            s.entries.push(entry);
        }
    }
    out.findings = per_call;
    for Sum {
        gvk,
        budget,
        max,
        count: expressions,
        entries,
    } in sums
    {
        let limit = budget.value();
        if max > limit {
            // The union of the reasons, sorted.
            let mut because: Vec<&Arc<str>> = entries
                .iter()
                .flat_map(|&j| &out.expressions[j].unbounded)
                .collect();
            because.sort_unstable();
            because.dedup();
            let because: Vec<Arc<str>> = because.into_iter().cloned().collect();
            group(
                &mut out.findings,
                gvk.clone(),
                |f| {
                    f.field_ref.is_none()
                        && f.limit == budget
                        && f.estimate == max
                        && f.because == because
                },
                || CostFinding {
                    field_ref: None,
                    gvks: Vec::new(),
                    limit: budget,
                    limit_value: limit,
                    estimate: max,
                    because: because.clone(),
                },
            );
        }
        group(
            &mut out.budgets,
            gvk,
            |b| b.budget == budget && b.max == max && b.expressions == expressions,
            || BudgetSum {
                field_ref: None,
                gvks: Vec::new(),
                budget,
                limit,
                max,
                expressions,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(max: u64, why: &[&str]) -> CostOutcome {
        CostOutcome {
            min: 1,
            max,
            unbounded: why.iter().map(|s| Arc::from(*s)).collect(),
        }
    }

    #[test]
    fn findings_name_the_limit_the_estimate_and_the_paths() {
        let pod = Arc::new(Gvk::new("", "v1", "Pod"));
        let dep = Arc::new(Gvk::new("apps", "v1", "Deployment"));
        let why = "`spec.containers` has no maxItems";
        let cost = analyze(vec![
            (
                ExpressionField::ValidationExpression(0),
                pod.clone(),
                outcome(2_000_000, &[why]),
            ),
            (
                ExpressionField::ValidationExpression(1),
                pod.clone(),
                outcome(9_000_000, &[]),
            ),
            (
                ExpressionField::ValidationExpression(0),
                dep.clone(),
                outcome(10, &[]),
            ),
            (
                ExpressionField::MatchCondition(0),
                pod.clone(),
                outcome(u64::MAX, &[]),
            ),
        ]);
        assert_eq!(cost.expressions.len(), 4);
        let texts: Vec<String> = cost.findings.iter().map(CostFinding::text).collect();
        assert_eq!(
            texts,
            [
                "spec.validations[0].expression on /v1, Kind=Pod: worst-case cost 2,000,000 \
                 exceeds the per-expression limit (PerCallLimit) of 1,000,000: \
                 `spec.containers` has no maxItems",
                "spec.validations[1].expression on /v1, Kind=Pod: worst-case cost 9,000,000 \
                 exceeds the per-expression limit (PerCallLimit) of 1,000,000",
                "spec.matchConditions[0].expression on /v1, Kind=Pod: worst-case cost \
                 18,446,744,073,709,551,615 exceeds the per-expression limit (PerCallLimit) of \
                 1,000,000",
                "the policy on /v1, Kind=Pod: worst-case cost 11,000,000 exceeds the per-policy \
                 budget of validations, variables and messages (RuntimeCELCostBudget) of \
                 10,000,000: `spec.containers` has no maxItems",
                "the policy on /v1, Kind=Pod: worst-case cost 18,446,744,073,709,551,615 exceeds \
                 the budget of the match conditions (RuntimeCELCostBudgetMatchConditions) of \
                 2,500,000",
            ]
        );
        let sums: Vec<(String, CostLimit, u64, usize)> = cost
            .budgets
            .iter()
            .map(|b| (kinds_text(&b.gvks), b.budget, b.max, b.expressions))
            .collect();
        assert_eq!(
            sums,
            [
                (
                    "/v1, Kind=Pod".to_owned(),
                    CostLimit::RuntimeCELCostBudget,
                    11_000_000,
                    2
                ),
                (
                    "apps/v1, Kind=Deployment".to_owned(),
                    CostLimit::RuntimeCELCostBudget,
                    10,
                    1
                ),
                (
                    "/v1, Kind=Pod".to_owned(),
                    CostLimit::RuntimeCELCostBudgetMatchConditions,
                    u64::MAX,
                    1
                ),
            ]
        );
    }

    #[test]
    fn at_the_limit_is_no_finding() {
        let pod = Arc::new(Gvk::new("", "v1", "Pod"));
        let cost = analyze(vec![(
            ExpressionField::ValidationExpression(0),
            pod,
            outcome(PER_CALL_LIMIT, &[]),
        )]);
        assert!(cost.findings.is_empty());
        // Kinds with the same estimate are grouped.
        let kinds: Vec<Arc<Gvk>> = ["A", "B", "C", "D"]
            .iter()
            .map(|k| Arc::new(Gvk::new("g", "v1", *k)))
            .collect();
        let cost = analyze(
            kinds
                .iter()
                .map(|k| {
                    (
                        ExpressionField::MatchCondition(0),
                        k.clone(),
                        outcome(
                            u64::MAX,
                            &["`request.userInfo.groups` has no known size (no schema)"],
                        ),
                    )
                })
                .collect(),
        );
        assert_eq!(cost.expressions.len(), 1);
        assert_eq!(cost.expressions[0].gvks, kinds);
        assert_eq!(cost.budgets.len(), 1);
        assert_eq!(
            cost.findings
                .iter()
                .map(CostFinding::text)
                .collect::<Vec<_>>(),
            [
                "spec.matchConditions[0].expression on g/v1, Kind=A; g/v1, Kind=B and 2 more \
                 kinds: worst-case cost 18,446,744,073,709,551,615 exceeds the per-expression \
                 limit (PerCallLimit) of 1,000,000: `request.userInfo.groups` has no known size \
                 (no schema)",
                "the policy on g/v1, Kind=A; g/v1, Kind=B and 2 more kinds: worst-case cost \
                 18,446,744,073,709,551,615 exceeds the budget of the match conditions \
                 (RuntimeCELCostBudgetMatchConditions) of 2,500,000: `request.userInfo.groups` \
                 has no known size (no schema)",
            ]
        );
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
    }
}
