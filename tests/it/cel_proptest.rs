//! Property tests of the CEL checker: no input makes it panic, and printed types parse back
//! to the same type.

use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use vapcheck::cel::{Env, EnvBuilder, EnvOptions, Type, add_two_var_comprehensions, compile};

static ENV: LazyLock<Env> = LazyLock::new(|| {
    let mut b = EnvBuilder::standard(EnvOptions::kubernetes());
    add_two_var_comprehensions(&mut b).expect("library");
    let base = Arc::new(b.build());
    let mut o = Env::extend(&base);
    for (n, t) in [
        ("object", Type::dyn_type()),
        ("i", Type::int()),
        ("s", Type::string()),
        ("l", Type::list(Type::int())),
        ("m", Type::map(Type::string(), Type::list(Type::string()))),
        ("opt", Type::optional(Type::string())),
    ] {
        o.add_variable(n, t).expect("variable");
    }
    o.build()
});

const TOKENS: &[&str] = &[
    "object",
    "i",
    "s",
    "l",
    "m",
    "opt",
    "x",
    "y",
    ".",
    ".?",
    "[",
    "]",
    "[?",
    "(",
    ")",
    "{",
    "}",
    ",",
    ":",
    "?",
    "+",
    "-",
    "*",
    "/",
    "%",
    "!",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "in",
    "1",
    "1u",
    "2.5",
    "'a'",
    "\"é\"",
    "b'x'",
    "true",
    "null",
    "size",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "optMap",
    "orValue",
    "transformList",
    "int",
    "dyn",
    "type",
    "duration('1h')",
    "timestamp(0)",
    "matches",
    "'['",
    "\t",
    "\n",
    " ",
    "spec",
    "metadata",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|v| v.concat())
}

fn arb_type() -> impl Strategy<Value = Type> {
    let leaf = prop_oneof![
        Just(Type::int()),
        Just(Type::uint()),
        Just(Type::double()),
        Just(Type::bool()),
        Just(Type::string()),
        Just(Type::bytes()),
        Just(Type::dyn_type()),
        Just(Type::any()),
        Just(Type::null()),
        Just(Type::duration()),
        Just(Type::timestamp()),
        Just(Type::error()),
        Just(Type::type_type()),
        Just(Type::wrapper(Type::int())),
        Just(Type::type_param("_var3")),
        "[a-z][a-z0-9]{0,5}(\\.[A-Z][a-zA-Z]{0,5})?".prop_filter_map("reserved", |n| {
            let reserved = [
                "int",
                "uint",
                "double",
                "bool",
                "string",
                "bytes",
                "dyn",
                "any",
                "null",
                "duration",
                "timestamp",
                "type",
                "list",
                "map",
                "wrapper",
            ];
            (!reserved.contains(&n.as_str())).then(|| Type::object(n))
        }),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(Type::list),
            (inner.clone(), inner.clone()).prop_map(|(k, v)| Type::map(k, v)),
            inner.clone().prop_map(Type::optional),
            inner.clone().prop_map(Type::type_of),
            prop::collection::vec(inner, 1..3).prop_map(|p| Type::opaque("net.Thing", p)),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings_never_panic(text in "\\PC{0,80}") {
        if let Err(e) = compile(&ENV, &text) {
            prop_assert!(e.to_display_string().starts_with("ERROR: <input>:"));
        }
    }

    #[test]
    fn token_soups_never_panic(text in token_soup()) {
        if let Err(e) = compile(&ENV, &text) {
            prop_assert!(!e.to_display_string().is_empty());
        }
    }

    #[test]
    fn literal_validators_never_panic(text in "[-+0-9.a-zµ:TZ()\\[\\]{}*?|^$\\\\Q E]{0,40}") {
        let _ = vapcheck::cel::validators::parse_go_duration(&text);
        let _ = vapcheck::cel::validators::parse_rfc3339_seconds(&text);
        let _ = vapcheck::cel::validators::valid_re2(&text);
    }

    #[test]
    fn printed_types_parse_back(t in arb_type()) {
        let printed = t.to_string();
        let back = Type::parse(&printed);
        prop_assert_eq!(back.as_ref().map(|b| b.to_string()), Ok(printed.clone()));
        prop_assert!(back.map(|b| b.is_exact(&t)).unwrap_or(false), "{}", printed);
    }
}
