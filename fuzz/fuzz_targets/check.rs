//! Fuzzes parse + check + validators: no input may panic or overflow the stack.
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

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(e) = compile(&ENV, text) {
            let _ = e.to_display_string();
        }
    }
});
