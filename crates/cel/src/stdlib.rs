//! The cel-go v0.29.2 standard library declarations (`common/stdlib/standard.go`) and the
//! optional types library (`cel/library.go`, `optionalLib`). Overload ids and their order are
//! those of cel-go: the order decides the result type of a call matching several overloads.

use std::sync::Arc;

use super::env::{EnvBuilder, EnvOptions, FunctionDecl, OverloadDecl, TypeProvider};
use super::types::Type;
fn by() -> Type {
    Type::bytes()
}
fn d() -> Type {
    Type::double()
}
fn i() -> Type {
    Type::int()
}
fn u() -> Type {
    Type::uint()
}
fn s() -> Type {
    Type::string()
}
fn du() -> Type {
    Type::duration()
}
fn ts() -> Type {
    Type::timestamp()
}
fn pa() -> Type {
    Type::type_param("A")
}
fn la() -> Type {
    Type::list(pa())
}
fn mab() -> Type {
    Type::map(pa(), Type::type_param("B"))
}
fn g(id: &str, args: Vec<Type>, result: Type) -> OverloadDecl {
    OverloadDecl::global(id, args, result)
}
fn m(id: &str, args: Vec<Type>, result: Type) -> OverloadDecl {
    OverloadDecl::member(id, args, result)
}

fn f(b: &mut EnvBuilder, name: &str, overloads: Vec<OverloadDecl>) {
    // The standard declarations are consistent by construction; a merge conflict cannot occur.
    let _ = b.add_function(FunctionDecl::new(name, overloads));
}

fn var(b: &mut EnvBuilder, name: &str, t: Type) {
    // Standard type identifiers are declared once; redeclaration cannot conflict.
    let _ = b.add_variable(name, t);
}

/// Adds the standard type identifiers and functions (cel-go `stdlib.Types()` and
/// `stdlib.Functions()`; declarations marked disabled in cel-go are left out).
pub fn add_standard(b: &mut EnvBuilder) {
    b.add_provider(std::sync::Arc::new(BuiltinTypes { optional: false }));
    // cel-go decls.TypeVariable(t) declares t.TypeName() as type(t).
    for t in [
        Type::bool(),
        Type::bytes(),
        Type::double(),
        Type::duration(),
        Type::int(),
        la(),
        mab(),
        Type::null(),
        Type::string(),
        Type::timestamp(),
        Type::type_type(),
        Type::uint(),
    ] {
        var(b, t.type_name(), Type::type_of(t.clone()));
    }
    f(
        b,
        "_?_:_",
        vec![g("conditional", vec![bo(), pa(), pa()], pa())],
    );
    f(b, "_&&_", vec![g("logical_and", vec![bo(), bo()], bo())]);
    f(b, "_||_", vec![g("logical_or", vec![bo(), bo()], bo())]);
    f(b, "!_", vec![g("logical_not", vec![bo()], bo())]);
    f(
        b,
        "@not_strictly_false",
        vec![g("not_strictly_false", vec![bo()], bo())],
    );
    f(b, "_==_", vec![g("equals", vec![pa(), pa()], bo())]);
    f(b, "_!=_", vec![g("not_equals", vec![pa(), pa()], bo())]);
    f(
        b,
        "_+_",
        vec![
            g("add_bytes", vec![by(), by()], by()),
            g("add_double", vec![d(), d()], d()),
            g("add_duration_duration", vec![du(), du()], du()),
            g("add_duration_timestamp", vec![du(), ts()], ts()),
            g("add_timestamp_duration", vec![ts(), du()], ts()),
            g("add_int64", vec![i(), i()], i()),
            g("add_list", vec![la(), la()], la()),
            g("add_string", vec![s(), s()], s()),
            g("add_uint64", vec![u(), u()], u()),
        ],
    );
    f(
        b,
        "_/_",
        vec![
            g("divide_double", vec![d(), d()], d()),
            g("divide_int64", vec![i(), i()], i()),
            g("divide_uint64", vec![u(), u()], u()),
        ],
    );
    f(
        b,
        "_%_",
        vec![
            g("modulo_int64", vec![i(), i()], i()),
            g("modulo_uint64", vec![u(), u()], u()),
        ],
    );
    f(
        b,
        "_*_",
        vec![
            g("multiply_double", vec![d(), d()], d()),
            g("multiply_int64", vec![i(), i()], i()),
            g("multiply_uint64", vec![u(), u()], u()),
        ],
    );
    f(
        b,
        "-_",
        vec![
            g("negate_double", vec![d()], d()),
            g("negate_int64", vec![i()], i()),
        ],
    );
    f(
        b,
        "_-_",
        vec![
            g("subtract_double", vec![d(), d()], d()),
            g("subtract_duration_duration", vec![du(), du()], du()),
            g("subtract_int64", vec![i(), i()], i()),
            g("subtract_timestamp_duration", vec![ts(), du()], ts()),
            g("subtract_timestamp_timestamp", vec![ts(), ts()], du()),
            g("subtract_uint64", vec![u(), u()], u()),
        ],
    );
    f(
        b,
        "_<_",
        vec![
            g("less_bool", vec![bo(), bo()], bo()),
            g("less_int64", vec![i(), i()], bo()),
            g("less_int64_double", vec![i(), d()], bo()),
            g("less_int64_uint64", vec![i(), u()], bo()),
            g("less_uint64", vec![u(), u()], bo()),
            g("less_uint64_double", vec![u(), d()], bo()),
            g("less_uint64_int64", vec![u(), i()], bo()),
            g("less_double", vec![d(), d()], bo()),
            g("less_double_int64", vec![d(), i()], bo()),
            g("less_double_uint64", vec![d(), u()], bo()),
            g("less_string", vec![s(), s()], bo()),
            g("less_bytes", vec![by(), by()], bo()),
            g("less_timestamp", vec![ts(), ts()], bo()),
            g("less_duration", vec![du(), du()], bo()),
        ],
    );
    f(
        b,
        "_<=_",
        vec![
            g("less_equals_bool", vec![bo(), bo()], bo()),
            g("less_equals_int64", vec![i(), i()], bo()),
            g("less_equals_int64_double", vec![i(), d()], bo()),
            g("less_equals_int64_uint64", vec![i(), u()], bo()),
            g("less_equals_uint64", vec![u(), u()], bo()),
            g("less_equals_uint64_double", vec![u(), d()], bo()),
            g("less_equals_uint64_int64", vec![u(), i()], bo()),
            g("less_equals_double", vec![d(), d()], bo()),
            g("less_equals_double_int64", vec![d(), i()], bo()),
            g("less_equals_double_uint64", vec![d(), u()], bo()),
            g("less_equals_string", vec![s(), s()], bo()),
            g("less_equals_bytes", vec![by(), by()], bo()),
            g("less_equals_timestamp", vec![ts(), ts()], bo()),
            g("less_equals_duration", vec![du(), du()], bo()),
        ],
    );
    f(
        b,
        "_>_",
        vec![
            g("greater_bool", vec![bo(), bo()], bo()),
            g("greater_int64", vec![i(), i()], bo()),
            g("greater_int64_double", vec![i(), d()], bo()),
            g("greater_int64_uint64", vec![i(), u()], bo()),
            g("greater_uint64", vec![u(), u()], bo()),
            g("greater_uint64_double", vec![u(), d()], bo()),
            g("greater_uint64_int64", vec![u(), i()], bo()),
            g("greater_double", vec![d(), d()], bo()),
            g("greater_double_int64", vec![d(), i()], bo()),
            g("greater_double_uint64", vec![d(), u()], bo()),
            g("greater_string", vec![s(), s()], bo()),
            g("greater_bytes", vec![by(), by()], bo()),
            g("greater_timestamp", vec![ts(), ts()], bo()),
            g("greater_duration", vec![du(), du()], bo()),
        ],
    );
    f(
        b,
        "_>=_",
        vec![
            g("greater_equals_bool", vec![bo(), bo()], bo()),
            g("greater_equals_int64", vec![i(), i()], bo()),
            g("greater_equals_int64_double", vec![i(), d()], bo()),
            g("greater_equals_int64_uint64", vec![i(), u()], bo()),
            g("greater_equals_uint64", vec![u(), u()], bo()),
            g("greater_equals_uint64_double", vec![u(), d()], bo()),
            g("greater_equals_uint64_int64", vec![u(), i()], bo()),
            g("greater_equals_double", vec![d(), d()], bo()),
            g("greater_equals_double_int64", vec![d(), i()], bo()),
            g("greater_equals_double_uint64", vec![d(), u()], bo()),
            g("greater_equals_string", vec![s(), s()], bo()),
            g("greater_equals_bytes", vec![by(), by()], bo()),
            g("greater_equals_timestamp", vec![ts(), ts()], bo()),
            g("greater_equals_duration", vec![du(), du()], bo()),
        ],
    );
    f(
        b,
        "_[_]",
        vec![
            g("index_list", vec![la(), i()], pa()),
            g("index_map", vec![mab(), pa()], pb()),
        ],
    );
    f(
        b,
        "@in",
        vec![
            g("in_list", vec![pa(), la()], bo()),
            g("in_map", vec![pa(), mab()], bo()),
        ],
    );
    f(
        b,
        "size",
        vec![
            g("size_bytes", vec![by()], i()),
            m("bytes_size", vec![by()], i()),
            g("size_list", vec![la()], i()),
            m("list_size", vec![la()], i()),
            g("size_map", vec![mab()], i()),
            m("map_size", vec![mab()], i()),
            g("size_string", vec![s()], i()),
            m("string_size", vec![s()], i()),
        ],
    );
    f(b, "type", vec![g("type", vec![pa()], Type::type_of(pa()))]);
    f(
        b,
        "bool",
        vec![
            g("bool_to_bool", vec![bo()], bo()),
            g("string_to_bool", vec![s()], bo()),
        ],
    );
    f(
        b,
        "bytes",
        vec![
            g("bytes_to_bytes", vec![by()], by()),
            g("string_to_bytes", vec![s()], by()),
        ],
    );
    f(
        b,
        "double",
        vec![
            g("double_to_double", vec![d()], d()),
            g("int64_to_double", vec![i()], d()),
            g("string_to_double", vec![s()], d()),
            g("uint64_to_double", vec![u()], d()),
        ],
    );
    f(
        b,
        "duration",
        vec![
            g("duration_to_duration", vec![du()], du()),
            g("string_to_duration", vec![s()], du()),
        ],
    );
    f(b, "dyn", vec![g("to_dyn", vec![pa()], Type::dyn_type())]);
    f(
        b,
        "int",
        vec![
            g("int64_to_int64", vec![i()], i()),
            g("double_to_int64", vec![d()], i()),
            g("duration_to_int64", vec![du()], i()),
            g("string_to_int64", vec![s()], i()),
            g("timestamp_to_int64", vec![ts()], i()),
            g("uint64_to_int64", vec![u()], i()),
        ],
    );
    f(
        b,
        "string",
        vec![
            g("string_to_string", vec![s()], s()),
            g("bool_to_string", vec![bo()], s()),
            g("bytes_to_string", vec![by()], s()),
            g("double_to_string", vec![d()], s()),
            g("duration_to_string", vec![du()], s()),
            g("int64_to_string", vec![i()], s()),
            g("timestamp_to_string", vec![ts()], s()),
            g("uint64_to_string", vec![u()], s()),
        ],
    );
    f(
        b,
        "timestamp",
        vec![
            g("timestamp_to_timestamp", vec![ts()], ts()),
            g("int64_to_timestamp", vec![i()], ts()),
            g("string_to_timestamp", vec![s()], ts()),
        ],
    );
    f(
        b,
        "uint",
        vec![
            g("uint64_to_uint64", vec![u()], u()),
            g("double_to_uint64", vec![d()], u()),
            g("int64_to_uint64", vec![i()], u()),
            g("string_to_uint64", vec![s()], u()),
        ],
    );
    f(
        b,
        "contains",
        vec![m("contains_string", vec![s(), s()], bo())],
    );
    f(
        b,
        "endsWith",
        vec![m("ends_with_string", vec![s(), s()], bo())],
    );
    f(
        b,
        "startsWith",
        vec![m("starts_with_string", vec![s(), s()], bo())],
    );
    f(
        b,
        "matches",
        vec![
            g("matches", vec![s(), s()], bo()),
            m("matches_string", vec![s(), s()], bo()),
        ],
    );
    f(
        b,
        "getFullYear",
        vec![
            m("timestamp_to_year", vec![ts()], i()),
            m("timestamp_to_year_with_tz", vec![ts(), s()], i()),
        ],
    );
    f(
        b,
        "getMonth",
        vec![
            m("timestamp_to_month", vec![ts()], i()),
            m("timestamp_to_month_with_tz", vec![ts(), s()], i()),
        ],
    );
    f(
        b,
        "getDayOfYear",
        vec![
            m("timestamp_to_day_of_year", vec![ts()], i()),
            m("timestamp_to_day_of_year_with_tz", vec![ts(), s()], i()),
        ],
    );
    f(
        b,
        "getDayOfMonth",
        vec![
            m("timestamp_to_day_of_month", vec![ts()], i()),
            m("timestamp_to_day_of_month_with_tz", vec![ts(), s()], i()),
        ],
    );
    f(
        b,
        "getDate",
        vec![
            m("timestamp_to_day_of_month_1_based", vec![ts()], i()),
            m(
                "timestamp_to_day_of_month_1_based_with_tz",
                vec![ts(), s()],
                i(),
            ),
        ],
    );
    f(
        b,
        "getDayOfWeek",
        vec![
            m("timestamp_to_day_of_week", vec![ts()], i()),
            m("timestamp_to_day_of_week_with_tz", vec![ts(), s()], i()),
        ],
    );
    f(
        b,
        "getHours",
        vec![
            m("timestamp_to_hours", vec![ts()], i()),
            m("timestamp_to_hours_with_tz", vec![ts(), s()], i()),
            m("duration_to_hours", vec![du()], i()),
        ],
    );
    f(
        b,
        "getMinutes",
        vec![
            m("timestamp_to_minutes", vec![ts()], i()),
            m("timestamp_to_minutes_with_tz", vec![ts(), s()], i()),
            m("duration_to_minutes", vec![du()], i()),
        ],
    );
    f(
        b,
        "getSeconds",
        vec![
            m("timestamp_to_seconds", vec![ts()], i()),
            m("timestamp_to_seconds_tz", vec![ts(), s()], i()),
            m("duration_to_seconds", vec![du()], i()),
        ],
    );
    f(
        b,
        "getMilliseconds",
        vec![
            m("timestamp_to_milliseconds", vec![ts()], i()),
            m("timestamp_to_milliseconds_with_tz", vec![ts(), s()], i()),
            m("duration_to_milliseconds", vec![du()], i()),
        ],
    );
}

/// Adds the optional types library at `version` (cel-go `OptionalTypes()` uses the latest,
/// `u32::MAX`). The `optMap`/`optFlatMap` macros are call-shaped macros in the checker.
pub fn add_optional(b: &mut EnvBuilder, version: u32) {
    let k = || Type::type_param("K");
    let v = || Type::type_param("V");
    let ov = || Type::optional(v());
    let lv = || Type::list(v());
    let mkv = || Type::map(k(), v());
    // cel-go registers types.OptionalType (optional_type(dyn)) with the type provider.
    b.add_provider(std::sync::Arc::new(BuiltinTypes { optional: true }));
    f(b, "optional.of", vec![g("optional_of", vec![v()], ov())]);
    f(
        b,
        "optional.ofNonZeroValue",
        vec![g("optional_ofNonZeroValue", vec![v()], ov())],
    );
    f(b, "optional.none", vec![g("optional_none", vec![], ov())]);
    f(b, "value", vec![m("optional_value", vec![ov()], v())]);
    f(
        b,
        "hasValue",
        vec![m("optional_hasValue", vec![ov()], bo())],
    );
    f(
        b,
        "or",
        vec![m("optional_or_optional", vec![ov(), ov()], ov())],
    );
    f(
        b,
        "orValue",
        vec![m("optional_orValue_value", vec![ov(), v()], v())],
    );
    f(
        b,
        "_?._",
        vec![g(
            "select_optional_field",
            vec![Type::dyn_type(), s()],
            ov(),
        )],
    );
    f(
        b,
        "_[?_]",
        vec![
            g("list_optindex_optional_int", vec![lv(), i()], ov()),
            g(
                "optional_list_optindex_optional_int",
                vec![Type::optional(lv()), i()],
                ov(),
            ),
            g("map_optindex_optional_value", vec![mkv(), k()], ov()),
            g(
                "optional_map_optindex_optional_value",
                vec![Type::optional(mkv()), k()],
                ov(),
            ),
        ],
    );
    f(
        b,
        "_[_]",
        vec![
            g(
                "optional_list_index_int",
                vec![Type::optional(lv()), i()],
                ov(),
            ),
            g(
                "optional_map_index_value",
                vec![Type::optional(mkv()), k()],
                ov(),
            ),
        ],
    );
    b.add_call_macro(Arc::new(super::macros::OptMapMacro { flat: false }));
    if version >= 1 {
        b.add_call_macro(Arc::new(super::macros::OptMapMacro { flat: true }));
    }
    if version >= 2 {
        f(b, "last", vec![m("list_last", vec![lv()], ov())]);
        f(b, "first", vec![m("list_first", vec![lv()], ov())]);
        f(
            b,
            "optional.unwrap",
            vec![g("optional_unwrap", vec![Type::list(ov())], lv())],
        );
        f(
            b,
            "unwrapOpt",
            vec![m("optional_unwrapOpt", vec![Type::list(ov())], lv())],
        );
    }
}

fn bo() -> Type {
    Type::bool()
}
fn pb() -> Type {
    Type::type_param("B")
}

/// The type names cel-go's default type registry knows (`types.NewRegistry`: the primitive,
/// list, map, null, type and well-known time types; plus `optional_type` once the optional
/// library registers it). They matter where the checker consults the provider rather than the
/// declarations, e.g. `int{}` is `'int' is not a message type`.
struct BuiltinTypes {
    optional: bool,
}

/// The protobuf well-known message types cel-go's default registry describes (cel-go v0.29.2
/// common/types/pb/pb.go `init`: any, duration, empty, timestamp, struct and wrappers files),
/// as the checker sees them: the type an expression of that message has (cel-go
/// common/types/pb/checked.go `CheckedWellKnowns`; `NewObjectType` turns these names into
/// those types) — or `None` for a plain message (`google.protobuf.Empty`).
fn well_known_message(name: &str) -> Option<Option<Type>> {
    Some(Some(match name {
        "google.protobuf.Any" => Type::any(),
        "google.protobuf.Duration" => Type::duration(),
        "google.protobuf.Timestamp" => Type::timestamp(),
        "google.protobuf.Empty" => return Some(None),
        "google.protobuf.Struct" => Type::map(Type::string(), Type::dyn_type()),
        "google.protobuf.Value" => Type::dyn_type(),
        "google.protobuf.ListValue" => Type::list(Type::dyn_type()),
        "google.protobuf.BoolValue" => Type::wrapper(Type::bool()),
        "google.protobuf.BytesValue" => Type::wrapper(Type::bytes()),
        "google.protobuf.DoubleValue" | "google.protobuf.FloatValue" => {
            Type::wrapper(Type::double())
        }
        "google.protobuf.Int64Value" | "google.protobuf.Int32Value" => Type::wrapper(Type::int()),
        "google.protobuf.UInt64Value" | "google.protobuf.UInt32Value" => {
            Type::wrapper(Type::uint())
        }
        "google.protobuf.StringValue" => Type::wrapper(Type::string()),
        _ => return None,
    }))
}

/// The type of an expression of a well-known message type (see [`well_known_message`]).
fn well_known_value_type(name: &str) -> Option<Type> {
    well_known_message(name).map(|t| t.unwrap_or_else(|| Type::object(name)))
}

impl TypeProvider for BuiltinTypes {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        well_known_value_type(name)
    }

    /// The fields of the well-known messages, typed as cel-go's registry types proto fields
    /// (common/types/provider.go `fieldDescToCELType`: 32-bit integers and enums are `int`,
    /// `float` is `double`, message fields are their well-known type).
    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        let dyn_map = || Type::map(Type::string(), Type::dyn_type());
        Some(match (struct_name, field) {
            ("google.protobuf.Any", "type_url") => Type::string(),
            ("google.protobuf.Any", "value") => Type::bytes(),
            ("google.protobuf.Duration" | "google.protobuf.Timestamp", "seconds" | "nanos") => {
                Type::int()
            }
            ("google.protobuf.Struct", "fields") => dyn_map(),
            ("google.protobuf.Value", "null_value") => Type::int(),
            ("google.protobuf.Value", "number_value") => Type::double(),
            ("google.protobuf.Value", "string_value") => Type::string(),
            ("google.protobuf.Value", "bool_value") => Type::bool(),
            ("google.protobuf.Value", "struct_value") => dyn_map(),
            ("google.protobuf.Value", "list_value") | ("google.protobuf.ListValue", "values") => {
                Type::list(Type::dyn_type())
            }
            ("google.protobuf.BoolValue", "value") => Type::bool(),
            ("google.protobuf.BytesValue", "value") => Type::bytes(),
            ("google.protobuf.DoubleValue" | "google.protobuf.FloatValue", "value") => {
                Type::double()
            }
            ("google.protobuf.Int64Value" | "google.protobuf.Int32Value", "value") => Type::int(),
            ("google.protobuf.UInt64Value" | "google.protobuf.UInt32Value", "value") => {
                Type::uint()
            }
            ("google.protobuf.StringValue", "value") => Type::string(),
            _ => return None,
        })
    }

    fn find_ident(&self, name: &str) -> Option<Type> {
        if let Some(t) = well_known_value_type(name) {
            return Some(t);
        }
        Some(match name {
            "bool" => Type::bool(),
            "bytes" => Type::bytes(),
            "double" => Type::double(),
            "int" => Type::int(),
            "list" => Type::list(Type::dyn_type()),
            "map" => Type::map(Type::dyn_type(), Type::dyn_type()),
            "null_type" => Type::null(),
            "string" => Type::string(),
            "type" => Type::type_type(),
            "uint" => Type::uint(),
            "optional_type" if self.optional => Type::optional(Type::dyn_type()),
            _ => return None,
        })
    }
}

/// Adds cel-go's `ext.TwoVarComprehensions()` library: the macros of
/// [`crate::macros::TwoVarComprehension`] and the
/// `cel.@mapInsert` function their expansions call.
pub fn add_two_var_comprehensions(b: &mut EnvBuilder) -> Result<(), super::env::EnvError> {
    let k = Type::type_param("K");
    let v = Type::type_param("V");
    let m = Type::map(k.clone(), v.clone());
    b.add_function(FunctionDecl::new(
        "cel.@mapInsert",
        vec![
            OverloadDecl::global("@mapInsert_map_key_value", vec![m.clone(), k, v], m.clone()),
            OverloadDecl::global("@mapInsert_map_map", vec![m.clone(), m.clone()], m),
        ],
    ))?;
    for mac in super::macros::TwoVarComprehension::all_macros() {
        b.add_call_macro(Arc::new(mac));
    }
    Ok(())
}

/// The standard environment, here beside the declarations it holds (the environment module
/// knows no library).
impl EnvBuilder {
    /// A builder holding the cel-go v0.29.2 standard library (and the optional library when
    /// `options.optional_types` is set).
    pub fn standard(options: EnvOptions) -> Self {
        let optional = options.optional_types;
        let mut b = Self::empty(options);
        add_standard(&mut b);
        if optional {
            add_optional(&mut b, u32::MAX);
        }
        b
    }
}
