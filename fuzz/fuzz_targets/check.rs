//! Fuzzes parse + check + validators: no input may panic or overflow the stack, and checking is
//! deterministic (the same input checked twice gives the same type or the same error text).
//! Seeds: fuzz/seeds/check (fuzz/make-seeds).
#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
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
    ] {
        o.add_variable(n, t).expect("variable");
    }
    o.build()
});

fn outcome(text: &str) -> String {
    match compile(&ENV, text) {
        Ok(c) => format!("type: {}", c.result_type()),
        Err(e) => format!("issues: {}", e.to_display_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let first = outcome(text);
        assert_eq!(first, outcome(text), "checking {text:?} twice differs");
    }
});
