//! Test doubles for the backend traits: a tiny "checker" for a toy expression language, a
//! schema table and counters to prove what is computed how often.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::backend::{
    CheckEnv, EnvRequest, ExpressionChecker, ObjectDecl, ParamsDecl, ParsedExpr, SchemaError,
    SchemaLookup, SchemaSource, SchemaType,
};
use super::gvk::Gvk;
use super::issues::{Issue, Issues, Severity};
use super::narrowing::Pos;
use super::types::OutputType;

/// A schema: field name → type.
#[derive(Debug, Clone, Default)]
pub struct FakeSchema(pub HashMap<String, OutputType>);

impl FakeSchema {
    pub fn with(fields: &[(&str, OutputType)]) -> Self {
        Self(
            fields
                .iter()
                .map(|(n, t)| ((*n).to_owned(), t.clone()))
                .collect(),
        )
    }
}

/// Schema table. Kinds absent from it are `NotFound`.
#[derive(Default)]
pub struct FakeSchemas {
    pub table: HashMap<Gvk, Result<Option<FakeSchema>, String>>,
    pub lookups: AtomicUsize,
}

impl FakeSchemas {
    pub fn typed(mut self, gvk: Gvk, schema: FakeSchema) -> Self {
        self.table.insert(gvk, Ok(Some(schema)));
        self
    }
    pub fn untyped(mut self, gvk: Gvk) -> Self {
        self.table.insert(gvk, Ok(None));
        self
    }
    pub fn failing(mut self, gvk: Gvk, err: &str) -> Self {
        self.table.insert(gvk, Err(err.to_owned()));
        self
    }
}

impl SchemaSource for FakeSchemas {
    fn resolve(&self, gvk: &Gvk) -> Result<SchemaLookup, SchemaError> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        match self.table.get(gvk) {
            None => Err(SchemaError::NotFound),
            Some(Err(e)) => Err(SchemaError::Failed(e.clone())),
            Some(Ok(None)) => Ok(SchemaLookup::Untyped),
            Some(Ok(Some(s))) => Ok(SchemaLookup::Typed(SchemaType(Arc::new(s.clone())))),
        }
    }
}

/// The toy checker. Parse fails on any text containing `@`. An expression is one atom:
/// `true`, `false`, an integer, `'text'`, `null`, `[1]`, `quantity` (an opaque type),
/// `object.F`, `oldObject.F`, `params.F`, `variables.F`, or `A == B` for two atoms (bool).
/// Anything else is an undeclared reference.
#[derive(Default)]
pub struct FakeChecker {
    pub parses: AtomicUsize,
    pub envs: AtomicUsize,
    pub env_error: Option<String>,
}

struct Env {
    object: Option<FakeSchema>,
    params: Option<Option<FakeSchema>>,
    variables: HashMap<String, OutputType>,
}

fn schema_of(t: &SchemaType) -> Option<FakeSchema> {
    t.0.downcast_ref::<FakeSchema>().cloned()
}

impl ExpressionChecker for FakeChecker {
    fn parse(&self, expression: &str) -> Result<ParsedExpr, Issues> {
        self.parses.fetch_add(1, Ordering::SeqCst);
        if let Some(col) = expression.find('@') {
            let message = "Syntax error: token recognition error at: '@'";
            return Err(Issues::one(Issue {
                severity: Severity::Error,
                pos: Some(Pos {
                    line: 1,
                    column: col,
                }),
                message: message.to_owned(),
                text: format!(
                    "ERROR: <input>:1:{}: {message}\n | {}\n | {}^",
                    col + 1,
                    expression,
                    ".".repeat(col)
                ),
            }));
        }
        Ok(ParsedExpr(Arc::new(expression.to_owned())))
    }

    fn environment(&self, request: &EnvRequest<'_>) -> Result<Box<dyn CheckEnv>, String> {
        self.envs.fetch_add(1, Ordering::SeqCst);
        if let Some(e) = &self.env_error {
            return Err(e.clone());
        }
        let object = match request.object {
            ObjectDecl::Typed(t) => schema_of(t),
            ObjectDecl::Dyn => None,
        };
        let params = match request.params {
            ParamsDecl::Absent => None,
            ParamsDecl::Dyn => Some(None),
            ParamsDecl::Typed(t) => Some(schema_of(t)),
        };
        Ok(Box::new(Env {
            object,
            params,
            variables: HashMap::new(),
        }))
    }
}

/// An error at line 1, column 1, as the fakes report every error.
fn at_start(message: String) -> Issues {
    Issues::one(Issue {
        severity: Severity::Error,
        pos: Some(Pos { line: 1, column: 0 }),
        text: format!("ERROR: <input>:1:1: {message}"),
        message,
    })
}

fn undefined(field: &str) -> Issues {
    at_start(format!("undefined field '{field}'"))
}

impl Env {
    fn atom(&self, a: &str) -> Result<OutputType, Issues> {
        let a = a.trim();
        match a {
            "true" | "false" => return Ok(OutputType::Bool),
            "null" => return Ok(OutputType::Null),
            "[1]" => return Ok(OutputType::List(Box::new(OutputType::Int))),
            "quantity" => return Ok(OutputType::Other("kubernetes.Quantity".into())),
            _ => {}
        }
        if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(OutputType::Int);
        }
        if a.len() >= 2 && a.starts_with('\'') && a.ends_with('\'') {
            return Ok(OutputType::String);
        }
        let field = |schema: &Option<FakeSchema>, f: &str| match schema {
            None => Ok(OutputType::Dyn),
            Some(s) => s.0.get(f).cloned().ok_or_else(|| undefined(f)),
        };
        if let Some(f) = a
            .strip_prefix("object.")
            .or_else(|| a.strip_prefix("oldObject."))
        {
            return field(&self.object, f);
        }
        if let Some(f) = a.strip_prefix("params.") {
            return match &self.params {
                None => Err(at_start(
                    "undeclared reference to 'params' (in container '')".to_owned(),
                )),
                Some(s) => field(s, f),
            };
        }
        if let Some(f) = a.strip_prefix("variables.") {
            return self.variables.get(f).cloned().ok_or_else(|| undefined(f));
        }
        Err(at_start(format!(
            "undeclared reference to '{a}' (in container '')"
        )))
    }
}

impl CheckEnv for Env {
    fn check(&self, parsed: &ParsedExpr) -> Result<OutputType, Issues> {
        let Some(text) = parsed.0.downcast_ref::<String>() else {
            return Err(Issues::one(Issue::plain("not a fake AST")));
        };
        if let Some((l, r)) = text.split_once("==") {
            self.atom(l)?;
            self.atom(r)?;
            return Ok(OutputType::Bool);
        }
        self.atom(text)
    }

    fn declare_variable(&mut self, name: &str, ty: &OutputType) {
        self.variables.insert(name.to_owned(), ty.clone());
    }
}

/// A rule for `groups`, `versions` and `resources`, without operations (tests).
pub(crate) fn rule(
    groups: &[&str],
    versions: &[&str],
    resources: &[&str],
) -> k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations {
    let s = |v: &[&str]| Some(v.iter().map(|x| (*x).to_owned()).collect());
    k8s_openapi::api::admissionregistration::v1::NamedRuleWithOperations {
        api_groups: s(groups),
        api_versions: s(versions),
        resources: s(resources),
        ..Default::default()
    }
}
