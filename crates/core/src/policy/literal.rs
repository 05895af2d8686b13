//! The literals of a mutation expression that vapcheck checks against the matched kind's
//! schema: every `Object…{…}` and `JSONPatch{…}` message literal, whatever it is nested in.
//!
//! The backend builds this model from the AST ([`crate::policy::ExpressionChecker`]
//! `patch_literals`); this module only describes it, so that the checks stay pure and
//! testable without a CEL parser.

/// A position in the expression: 1-based line, 0-based column in code points (cel-go
/// `common.Location`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct At {
    /// 1-based line.
    pub line: usize,
    /// 0-based column.
    pub column: usize,
}

/// A value as far as it is known without evaluating the expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A message literal `T{f: v, …}`.
    Message(Message),
    /// A list literal.
    List(Vec<Value>, Option<At>),
    /// A map literal: each key (its text when it is a string literal) and value.
    Map(Vec<(Option<String>, Value)>, Option<At>),
    /// A string literal.
    Str(String, Option<At>),
    /// An int or uint literal.
    Int(Option<At>),
    /// A double literal.
    Double(Option<At>),
    /// A bool literal.
    Bool(Option<At>),
    /// `null`.
    Null(Option<At>),
    /// A bytes literal.
    Bytes(Option<At>),
    /// `"literal" + e` (a string concatenation whose leftmost operand is a string literal):
    /// the known prefix.
    StrPrefix(String, Option<At>),
    /// Anything else (computed at admission).
    Unknown,
}

impl Value {
    /// Where the value starts.
    pub fn at(&self) -> Option<At> {
        match self {
            Value::Message(m) => m.at,
            Value::List(_, a)
            | Value::Map(_, a)
            | Value::Str(_, a)
            | Value::Int(a)
            | Value::Double(a)
            | Value::Bool(a)
            | Value::Null(a)
            | Value::Bytes(a)
            | Value::StrPrefix(_, a) => *a,
            Value::Unknown => None,
        }
    }

    /// cel-go's name of the literal's type (for messages), `None` when unknown.
    pub fn type_name(&self) -> Option<String> {
        Some(match self {
            Value::Message(m) => m.type_name.clone(),
            Value::List(..) => "list".into(),
            Value::Map(..) => "map".into(),
            Value::Str(..) | Value::StrPrefix(..) => "string".into(),
            Value::Int(_) => "int".into(),
            Value::Double(_) => "double".into(),
            Value::Bool(_) => "bool".into(),
            Value::Null(_) => "null_type".into(),
            Value::Bytes(_) => "bytes".into(),
            Value::Unknown => return None,
        })
    }
}

/// One field initializer of a message literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field name as written.
    pub name: String,
    /// Where the initializer is (cel-go reports field errors there).
    pub at: Option<At>,
    /// `?name: v` (optional field).
    pub optional: bool,
    /// The value.
    pub value: Value,
}

/// A message literal.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The type name as written (`Object.spec`, `JSONPatch`).
    pub type_name: String,
    /// Where it is.
    pub at: Option<At>,
    /// Its initializers in source order.
    pub fields: Vec<Field>,
}

/// Every `Object…{}` message literal of an expression that is not the value of a field of
/// another `Object…{}` literal (those are reached through their parent), and every
/// `JSONPatch{}` literal, in source order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Literals {
    /// Top-level `Object…{}` literals.
    pub objects: Vec<Message>,
    /// `JSONPatch{}` literals.
    pub patches: Vec<Message>,
}
