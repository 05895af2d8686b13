//! The patch types of MutatingAdmissionPolicy expressions: `Object`, `Object.<path>` and
//! `JSONPatch`, and the `jsonpatch.escapeKey` function.
//!
//! Sources (k8s.io/apiserver v0.37.1): `pkg/admission/plugin/cel/compile.go` (`hasPatchTypes`:
//! the `DynamicTypeResolver` and `library.JSONPatch` are added to every environment compiled
//! with `HasPatchTypes`, which `mutating/compilation.go` `compilePolicy` sets for the
//! mutations only, not for variables or match conditions), `pkg/cel/mutation/typeresolver.go`
//! (`DynamicTypeResolver.Resolve`: `JSONPatch`, `Object` and every name starting `Object.`),
//! `pkg/cel/mutation/dynamic/objects.go` (`ObjectType.Field`: any field name, typed `dyn`),
//! `pkg/cel/mutation/jsonpatch.go` (`JSONPatchType.Field`: `op`, `from`, `path` strings,
//! `value` dyn) and `pkg/cel/library/jsonpatch.go` (`jsonpatch.escapeKey(string) string`).

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use crate::cel::{
    EnvBuilder, EnvError, FunctionDecl, OverloadDecl, ParsedExpr, Type, TypeProvider,
};
use crate::policy::literal::{At, Field, Literals, Message, Value};

/// The root apply-configuration type name (typeresolver.go `ObjectTypeName`).
pub const OBJECT_TYPE: &str = "Object";
/// The JSON patch operation type name (typeresolver.go `JSONPatchTypeName`).
pub const JSONPATCH_TYPE: &str = "JSONPatch";

/// `DynamicTypeResolver` as a type provider: it knows every `Object…` name and `JSONPatch`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PatchTypes;

fn is_object_name(name: &str) -> bool {
    name == OBJECT_TYPE
        || name
            .strip_prefix(OBJECT_TYPE)
            .is_some_and(|rest| rest.starts_with('.'))
}

impl TypeProvider for PatchTypes {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        (name == JSONPATCH_TYPE || is_object_name(name)).then(|| Type::object(name))
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        if is_object_name(struct_name) {
            // objects.go ObjectType.Field: every name is a field, of type dyn.
            return Some(Type::dyn_type());
        }
        if struct_name == JSONPATCH_TYPE {
            // jsonpatch.go JSONPatchType.Field answers `found` for every name, with a nil
            // type for names other than the four; vapcheck declares those `dyn` and reports
            // them itself (they fail at admission: JSONPatchType.Val "unexpected JSONPatchType
            // field").
            return Some(match field {
                "op" | "from" | "path" => Type::string(),
                _ => Type::dyn_type(),
            });
        }
        None
    }
}

/// Adds the patch types and `jsonpatch.escapeKey` (compile.go `hasPatchTypes`).
pub fn add_patch_types(b: &mut EnvBuilder) -> Result<(), EnvError> {
    b.add_provider(std::sync::Arc::new(PatchTypes));
    b.add_function(FunctionDecl::new(
        "jsonpatch.escapeKey",
        vec![OverloadDecl::global(
            "string_jsonpatch_escapeKey_string",
            vec![Type::string()],
            Type::string(),
        )],
    ))?;
    Ok(())
}

/// Deeper literals than this are treated as unknown (the conversion recurses).
const MAX_LITERAL_DEPTH: usize = 200;

/// The `Object…{}` and `JSONPatch{}` literals of a parsed expression
/// ([`crate::policy::literal::Literals`]).
pub fn patch_literals(parsed: &ParsedExpr) -> Literals {
    let mut out = Literals::default();
    let mut stack: Vec<&IdedExpr> = vec![parsed.expr()];
    while let Some(e) = stack.pop() {
        if let Expr::Struct(s) = &e.expr
            && is_object_name(&s.type_name)
        {
            // Converted whole; messages nested in non-literal values are found by
            // `unknown_children` and searched again.
            let mut deferred = Vec::new();
            if let Value::Message(m) = value_of(parsed, e, 0, &mut deferred) {
                out.objects.push(m);
            }
            stack.extend(deferred);
            continue;
        }
        if let Expr::Struct(s) = &e.expr
            && s.type_name == JSONPATCH_TYPE
        {
            let mut deferred = Vec::new();
            if let Value::Message(m) = value_of(parsed, e, 0, &mut deferred) {
                out.patches.push(m);
            }
            stack.extend(deferred);
            continue;
        }
        stack.extend(crate::cel::parse::children(e).into_iter().rev());
    }
    let key = |m: &Message| m.at;
    out.objects.sort_by_key(key);
    out.patches.sort_by_key(key);
    out
}

fn at(parsed: &ParsedExpr, id: u64) -> Option<At> {
    parsed.location(id).map(|l| At {
        line: l.line,
        column: l.column,
    })
}

/// The literal value of `e`; sub-expressions that are not literals are pushed on `deferred`
/// (they may hold further message literals).
fn value_of<'e>(
    parsed: &ParsedExpr,
    e: &'e IdedExpr,
    depth: usize,
    deferred: &mut Vec<&'e IdedExpr>,
) -> Value {
    let here = at(parsed, e.id);
    if depth > MAX_LITERAL_DEPTH {
        deferred.push(e);
        return Value::Unknown;
    }
    match &e.expr {
        Expr::Literal(l) => match l {
            LiteralValue::Boolean(_) => Value::Bool(here),
            LiteralValue::Bytes(_) => Value::Bytes(here),
            LiteralValue::Double(_) => Value::Double(here),
            LiteralValue::Int(_) | LiteralValue::UInt(_) => Value::Int(here),
            LiteralValue::Null => Value::Null(here),
            LiteralValue::String(s) => Value::Str(s.to_string(), here),
        },
        Expr::List(l) if l.optional_indices.is_empty() => Value::List(
            l.elements
                .iter()
                .map(|x| value_of(parsed, x, depth + 1, deferred))
                .collect(),
            here,
        ),
        Expr::Map(m) => {
            let mut entries = Vec::new();
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    let key = match &me.key.expr {
                        Expr::Literal(LiteralValue::String(s)) => Some(s.to_string()),
                        _ => {
                            deferred.push(&me.key);
                            None
                        }
                    };
                    if me.optional {
                        deferred.push(&me.value);
                        continue;
                    }
                    entries.push((key, value_of(parsed, &me.value, depth + 1, deferred)));
                }
            }
            Value::Map(entries, here)
        }
        Expr::Struct(s) if is_object_name(&s.type_name) || s.type_name == JSONPATCH_TYPE => {
            let mut fields = Vec::new();
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    fields.push(Field {
                        name: f.field.clone(),
                        at: at(parsed, entry.id),
                        optional: f.optional,
                        value: value_of(parsed, &f.value, depth + 1, deferred),
                    });
                }
            }
            Value::Message(Message {
                type_name: s.type_name.clone(),
                at: here,
                fields,
            })
        }
        Expr::Call(c) if c.func_name == "_+_" && c.args.len() == 2 && c.target.is_none() => {
            let mut inner = Vec::new();
            match value_of(parsed, &c.args[0], depth + 1, &mut inner) {
                Value::Str(p, _) | Value::StrPrefix(p, _) => {
                    deferred.extend(inner);
                    deferred.push(&c.args[1]);
                    Value::StrPrefix(p, here)
                }
                // Not a string: both operands are searched again as a whole.
                _ => {
                    deferred.push(&c.args[0]);
                    deferred.push(&c.args[1]);
                    Value::Unknown
                }
            }
        }
        _ => {
            deferred.push(e);
            Value::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_and_fields() {
        let p = PatchTypes;
        assert!(p.find_struct_type("Object").is_some());
        assert!(p.find_struct_type("Object.spec.template").is_some());
        assert!(p.find_struct_type("Objects").is_none());
        assert!(p.find_struct_type("JSONPatch").is_some());
        assert_eq!(
            p.find_struct_field_type("Object.spec", "anything"),
            Some(Type::dyn_type())
        );
        assert_eq!(
            p.find_struct_field_type("JSONPatch", "path"),
            Some(Type::string())
        );
        assert_eq!(
            p.find_struct_field_type("JSONPatch", "value"),
            Some(Type::dyn_type())
        );
        assert_eq!(p.find_struct_field_type("Other", "x"), None);
    }
}
