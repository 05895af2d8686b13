//! No panics in the Kubernetes layers on arbitrary input: format strings of the strings
//! extension's validator, `sortBy` and two-variable macros with odd arguments, variables
//! composition, and the extended-mode version pass.

use proptest::prelude::*;
use vapcheck::k8s_env::{KindDecls, KubeVersion, Mode, Params, PolicyEnv, Target};

fn extended() -> PolicyEnv {
    PolicyEnv::new(
        Target {
            version: KubeVersion::MIN,
            mode: Mode::Extended,
        },
        KindDecls::untyped(Params::Untyped),
    )
    .expect("env builds")
}

const ARGS: &[&str] = &[
    "1",
    "'s'",
    "1.5",
    "true",
    "b'x'",
    "[1, 'a']",
    "{'k': ip('1.2.3.4')}",
    "params.x",
    "duration('1s')",
    "null",
    "int",
    "quantity('1')",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn format_strings_never_panic(
        fmt in "[%.0-9a-zA-Z é]{0,12}",
        args in proptest::collection::vec(proptest::sample::select(ARGS), 0..4),
    ) {
        let env = extended();
        let quoted = fmt.replace('\\', "\\\\").replace('\'', "\\'");
        let expr = format!("'{quoted}'.format([{}])", args.join(", "));
        if let Ok(c) = env.compile(&expr) {
            let _ = env.version_warnings(&c);
        }
    }

    #[test]
    fn macro_shapes_never_panic(
        recv in proptest::sample::select(&["[1, 2]", "{'a': 1}", "params", "1", "'s'", "[[1]]"][..]),
        name in proptest::sample::select(&["sortBy", "all", "exists", "existsOne", "transformList", "transformMap", "transformMapEntry", "includes", "optMap"][..]),
        args in proptest::collection::vec(proptest::sample::select(&["x", "y", "x + 1", "1", "x.y", "true", "y > 0"][..]), 0..5),
    ) {
        let env = extended();
        let expr = format!("{recv}.{name}({})", args.join(", "));
        if let Ok(c) = env.compile(&expr) {
            let _ = env.version_warnings(&c);
        }
    }

    #[test]
    fn arbitrary_variables_never_panic(
        exprs in proptest::collection::vec("[a-z.()\\[\\]'0-9 +=<>!?:{},]{0,24}", 0..5),
        validation in "[a-z.()\\[\\]'0-9 +=<>!?:{},]{0,24}",
    ) {
        let mut env = extended();
        for (i, e) in exprs.iter().enumerate() {
            let _ = env.add_variable(&format!("v{i}"), e);
        }
        if let Ok(c) = env.compile(&validation) {
            let _ = env.version_warnings(&c);
        }
    }
}
