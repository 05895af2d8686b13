//! Cost of kind narrowing (issue 14, docs/extended-mode.md): the whole corpus checked in
//! extended mode, in-process, with the Kubernetes checker as `vapcheck check --openapi
//! ../shared/openapi/v1.35` builds it, once with narrowing (the default) and once without.
//!
//! "Without" is the same checker behind a wrapper whose `ExpressionChecker::guards` returns
//! `None` (the trait's documented "no analysis" answer): no guard analysis, no matchCondition
//! or variable narrowing, no required-field lookups; every finding is still classified. The
//! two runs alternate, `ROUNDS` times, so that a change of load hits both alike; the bench
//! prints each round, the medians and their ratio.
//!
//! Run: `cargo bench --bench narrowing` (optional argument: the number of rounds).

mod common;

use std::time::{Duration, Instant};

use vapcheck::cli::discovery::offline_discovery;
use vapcheck::cli::read_inputs;
use vapcheck::policy::Issues;
use vapcheck::policy::{
    Backends, CheckEnv, CheckOptions, DiscoveryRestMapper, EnvRequest, ExpressionChecker, Mode,
    ParsedExpr, PolicyStatus, SchemaType, check_policy,
};

const ROUNDS: usize = 15;

/// The checker with narrowing switched off: everything delegated except the guard analysis.
struct NoNarrowing<'a>(&'a dyn ExpressionChecker);

impl ExpressionChecker for NoNarrowing<'_> {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        self.0.parse(expression)
    }
    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        self.0.environment(request)
    }
    fn guards(&self, _parsed: &ParsedExpr) -> Option<vapcheck::policy::narrowing::Guards> {
        None
    }
    fn is_required_field(&self, object: &SchemaType, path: &[String]) -> bool {
        self.0.is_required_field(object, path)
    }
    fn patch_literals(&self, parsed: &ParsedExpr) -> Option<vapcheck::policy::literal::Literals> {
        self.0.patch_literals(parsed)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rounds = common::rounds(ROUNDS);
    let shared = common::shared_dir();
    let files = common::policy_corpus_files();
    let policies = read_inputs(&files, &mut std::io::empty()).expect("corpus reads");
    let groups =
        offline_discovery(Some(&shared.join("openapi/v1.35")), None, &[]).expect("openapi folder");
    let mapper = DiscoveryRestMapper::new(groups);
    let options = vapcheck::cli::SchemaOptions {
        openapi: Some(shared.join("openapi/v1.35")),
        ..vapcheck::cli::SchemaOptions::default()
    };
    let (schemas, checker) = vapcheck::cli::offline_backends(&options).expect("backends");
    let plain = NoNarrowing(checker.as_ref());
    let with = Backends {
        rest_mapper: &mapper,
        discovery: Some(&mapper),
        schemas: schemas.as_ref(),
        checker: checker.as_ref(),
    };
    let without = Backends {
        checker: &plain,
        ..with
    };
    let check_options = CheckOptions {
        mode: Mode::Extended,
        ..CheckOptions::default()
    };
    let run = |backends: &Backends<'_>| -> Vec<PolicyStatus> {
        policies
            .iter()
            .map(|p| check_policy(&p.policy, &check_options, backends))
            .collect()
    };

    // Warm-up (schema conversion and environment caches), and a sanity check that the switch
    // works: narrowing must drop findings, or the comparison measures nothing.
    let a = run(&with);
    let b = run(&without);
    let unreachable = |s: &[PolicyStatus]| {
        s.iter()
            .flat_map(|p| &p.findings)
            .filter(|f| f.class == vapcheck::policy::narrowing::FindingClass::Unreachable)
            .count()
    };
    let warnings = |s: &[PolicyStatus]| -> usize {
        s.iter()
            .map(|p| {
                p.expression_warnings
                    .iter()
                    .map(|w| w.warning.len())
                    .sum::<usize>()
            })
            .sum()
    };
    println!(
        "corpus: {} files, {} policies; findings classed unreachable: {} with narrowing, {} without; warning text: {} bytes with, {} without",
        files.len(),
        policies.len(),
        unreachable(&a),
        unreachable(&b),
        warnings(&a),
        warnings(&b)
    );
    assert!(
        unreachable(&a) > 0 && unreachable(&b) == 0,
        "the narrowing switch has no effect"
    );

    // The guard analysis alone (`ExpressionChecker::guards`, once per distinct expression of
    // a policy, as `check_policy` calls it), over every expression of the corpus.
    let expressions: Vec<ParsedExpr> = policies
        .iter()
        .filter_map(|p| p.policy.spec.as_ref())
        .flat_map(|spec| {
            let validations = spec.validations.iter().flatten().flat_map(|v| {
                std::iter::once(v.expression.as_str()).chain(v.message_expression.as_deref())
            });
            let variables = spec
                .variables
                .iter()
                .flatten()
                .map(|v| v.expression.as_str());
            let conditions = spec
                .match_conditions
                .iter()
                .flatten()
                .map(|c| c.expression.as_str());
            let annotations = spec
                .audit_annotations
                .iter()
                .flatten()
                .map(|a| a.value_expression.as_str());
            validations
                .chain(variables)
                .chain(conditions)
                .chain(annotations)
                .collect::<Vec<_>>()
        })
        .filter_map(|e| checker.parse(e).ok())
        .collect();
    let mut t_guards = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        for p in &expressions {
            std::hint::black_box(checker.guards(p));
        }
        t_guards.push(start.elapsed());
    }
    println!(
        "guard analysis alone: {} expressions, median {:.1} ms per pass",
        expressions.len(),
        median(t_guards).as_secs_f64() * 1e3
    );

    let (mut t_with, mut t_without) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        // Alternate the order so that neither run always comes first.
        let order: [(&Backends<'_>, bool); 2] = if i % 2 == 0 {
            [(&with, true), (&without, false)]
        } else {
            [(&without, false), (&with, true)]
        };
        for (backends, narrowing) in order {
            let start = Instant::now();
            std::hint::black_box(run(backends));
            let took = start.elapsed();
            if narrowing {
                t_with.push(took);
            } else {
                t_without.push(took);
            }
        }
        println!(
            "round {:>2}: with narrowing {:>8.1} ms, without {:>8.1} ms",
            i + 1,
            t_with[i].as_secs_f64() * 1e3,
            t_without[i].as_secs_f64() * 1e3
        );
    }
    let (m_with, m_without) = (median(t_with), median(t_without));
    println!(
        "median of {rounds} rounds, whole corpus, extended mode: with narrowing {:.1} ms, without {:.1} ms, ratio {:.3}",
        m_with.as_secs_f64() * 1e3,
        m_without.as_secs_f64() * 1e3,
        m_with.as_secs_f64() / m_without.as_secs_f64()
    );
}
