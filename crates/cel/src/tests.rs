//! End-to-end tests of the checker: every message template with its exact text and
//! position, deduced types, options and limits. Expected strings are derived from cel-go
//! v0.29.2 (checker/errors.go, common/error.go, the parser's node positions).

use std::sync::Arc;

use super::*;

fn request_types() -> StructTypes {
    StructTypes::new()
        .with_type(
            "kubernetes.AdmissionRequest",
            [
                ("name", Type::string()),
                ("dryRun", Type::bool()),
                ("userInfo", Type::object("kubernetes.UserInfo")),
                ("options", Type::dyn_type()),
            ],
        )
        .with_type(
            "kubernetes.UserInfo",
            [
                ("groups", Type::list(Type::string())),
                (
                    "extra",
                    Type::map(Type::string(), Type::list(Type::string())),
                ),
            ],
        )
}

fn base(options: EnvOptions) -> Arc<Env> {
    let mut b = EnvBuilder::standard(options);
    add_two_var_comprehensions(&mut b).expect("library");
    Arc::new(b.build())
}

fn env_with(options: EnvOptions) -> Env {
    let base = base(options);
    let mut b = Env::extend(&base);
    for (n, t) in [
        ("object", Type::dyn_type()),
        ("i", Type::int()),
        ("u", Type::uint()),
        ("d", Type::double()),
        ("s", Type::string()),
        ("l", Type::list(Type::int())),
        ("m", Type::map(Type::string(), Type::int())),
        ("req", Type::object("kubernetes.AdmissionRequest")),
        ("opt", Type::optional(Type::int())),
        ("q", Type::opaque("kubernetes.Quantity", vec![])),
        ("unknownObj", Type::object("unknown.Type")),
    ] {
        b.add_variable(n, t).expect("variable");
    }
    b.add_provider(Arc::new(request_types()));
    b.build()
}

fn k8s_env() -> Env {
    env_with(EnvOptions::kubernetes())
}

fn err(env: &Env, text: &str) -> String {
    match compile(env, text) {
        Ok(c) => panic!(
            "expected an error for {text:?}, got type {}",
            c.result_type()
        ),
        Err(e) => e.to_display_string(),
    }
}

fn ty(env: &Env, text: &str) -> String {
    match compile(env, text) {
        Ok(c) => c.result_type().to_string(),
        Err(e) => panic!("unexpected error for {text:?}:\n{e}"),
    }
}

#[test]
fn undeclared_reference() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "foo + 1"),
        "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo + 1\n | ^"
    );
    assert_eq!(
        err(&env, "foo(1)"),
        "ERROR: <input>:1:4: undeclared reference to 'foo' (in container '')\n | foo(1)\n | ...^"
    );
    assert_eq!(
        err(&env, "s.foo()"),
        "ERROR: <input>:1:6: undeclared reference to 'foo' (in container '')\n | s.foo()\n | .....^"
    );
}

#[test]
fn undefined_field_and_field_selection() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "req.nme"),
        "ERROR: <input>:1:4: undefined field 'nme'\n | req.nme\n | ...^"
    );
    assert_eq!(
        err(&env, "i.foo"),
        "ERROR: <input>:1:2: type 'int' does not support field selection\n | i.foo\n | .^"
    );
    assert_eq!(
        err(&env, "unknownObj.f"),
        "ERROR: <input>:1:11: unexpected failed resolution of 'unknown.Type'\n | unknownObj.f\n | ..........^"
    );
    assert_eq!(ty(&env, "req.userInfo.groups"), "list(string)");
    assert_eq!(ty(&env, "has(req.name)"), "bool");
    assert_eq!(ty(&env, "object.spec.replicas"), "dyn");
    assert_eq!(ty(&env, "m.foo"), "int");
}

#[test]
fn no_matching_overload() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "i + s"),
        "ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, string)'\n | i + s\n | ..^"
    );
    assert_eq!(
        err(&env, "s.startsWith(1)"),
        "ERROR: <input>:1:13: found no matching overload for 'startsWith' applied to 'string.(int)'\n | s.startsWith(1)\n | ............^"
    );
    // Equality needs the same type on both sides.
    assert_eq!(
        err(&env, "1 == 1u"),
        "ERROR: <input>:1:3: found no matching overload for '_==_' applied to '(int, uint)'\n | 1 == 1u\n | ..^"
    );
    // Unbound type parameters print as dyn.
    assert_eq!(
        err(&env, "[] + 1"),
        "ERROR: <input>:1:4: found no matching overload for '_+_' applied to '(list(dyn), int)'\n | [] + 1\n | ...^"
    );
    assert_eq!(
        err(&env, "q.isInteger()"),
        "ERROR: <input>:1:12: undeclared reference to 'isInteger' (in container '')\n | q.isInteger()\n | ...........^"
    );
}

#[test]
fn type_mismatch_in_logic_and_comprehensions() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "i && true"),
        "ERROR: <input>:1:1: expected type 'bool' but found 'int'\n | i && true\n | ^"
    );
    assert_eq!(
        err(&env, "l.all(x, x)"),
        "ERROR: <input>:1:10: expected type 'bool' but found 'int'\n | l.all(x, x)\n | .........^"
    );
    assert_eq!(
        err(&env, "i.all(x, x > 0)"),
        "ERROR: <input>:1:1: expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)\n | i.all(x, x > 0)\n | ^"
    );
}

#[test]
fn negative_literals_are_located_at_their_sign() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "-1 && true"),
        "ERROR: <input>:1:1: expected type 'bool' but found 'int'\n | -1 && true\n | ^"
    );
    assert_eq!(
        err(&env, "true && - 2.5"),
        "ERROR: <input>:1:9: expected type 'bool' but found 'double'\n | true && - 2.5\n | ........^"
    );
    // Binary minus keeps the literal where it is.
    assert_eq!(
        err(&env, "i -1 && true"),
        "ERROR: <input>:1:3: expected type 'bool' but found 'int'\n | i -1 && true\n | ..^"
    );
}

#[test]
fn struct_creation_messages() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "kubernetes.AdmissionRequest{name: 1}"),
        "ERROR: <input>:1:33: expected type of field 'name' is 'string' but provided type is 'int'\n | kubernetes.AdmissionRequest{name: 1}\n | ................................^"
    );
    assert_eq!(
        err(&env, "int{}"),
        "ERROR: <input>:1:4: 'int' is not a message type\n | int{}\n | ...^"
    );
    assert_eq!(
        err(&env, "foo.Bar{}"),
        "ERROR: <input>:1:8: undeclared reference to 'foo.Bar' (in container '')\n | foo.Bar{}\n | .......^"
    );
    assert_eq!(
        ty(&env, "kubernetes.AdmissionRequest{name: 'x'}.name"),
        "string"
    );
}

#[test]
fn optionals() {
    let env = k8s_env();
    assert_eq!(ty(&env, "req.?name"), "optional_type(string)");
    assert_eq!(ty(&env, "req.?name.orValue('')"), "string");
    assert_eq!(ty(&env, "object.?spec.replicas.orValue(1) > 0"), "bool");
    assert_eq!(ty(&env, "m[?'a']"), "optional_type(int)");
    assert_eq!(ty(&env, "l[?0].hasValue()"), "bool");
    assert_eq!(ty(&env, "[?opt, 1]"), "list(int)");
    assert_eq!(ty(&env, "{?'a': opt}"), "map(string, int)");
    assert_eq!(ty(&env, "opt.optMap(x, x + 1)"), "optional_type(int)");
    assert_eq!(ty(&env, "optional.of(1)"), "optional_type(int)");
    assert_eq!(
        err(&env, "[?i]"),
        "ERROR: <input>:1:3: expected type 'optional_type(int)' but found 'int'\n | [?i]\n | ..^"
    );
    assert_eq!(
        err(&env, "req.?nme"),
        "ERROR: <input>:1:4: undefined field 'nme'\n | req.?nme\n | ...^"
    );
}

#[test]
fn deduced_types() {
    let env = env_with(EnvOptions::default());
    for (text, want) in [
        ("[1, 'a']", "list(dyn)"),
        ("[]", "list(dyn)"),
        ("{}", "map(dyn, dyn)"),
        ("l.map(x, x * 2)", "list(int)"),
        ("m.filter(k, k != '')", "list(string)"),
        ("type(1)", "type(int)"),
        ("int", "type(int)"),
        ("dyn(1)", "dyn"),
        ("[1, 2.0]", "list(dyn)"),
        ("[[1], []]", "list(list(int))"),
        ("true ? 1 : 2", "int"),
        ("i in l", "bool"),
        ("m['a']", "int"),
        ("size(s) + s.size()", "int"),
        (
            "duration('1h') + timestamp('2020-01-01T00:00:00Z')",
            "timestamp",
        ),
        ("timestamp('2020-01-01T00:00:00Z').getHours('UTC')", "int"),
        ("m.all(k, v, v > 0)", "bool"),
        ("l.transformList(i, v, v * 2)", "list(int)"),
        ("m.transformMap(k, v, v > 1)", "map(string, bool)"),
        ("l.exists_one(x, x > 1)", "bool"),
        ("null", "null"),
    ] {
        assert_eq!(ty(&env, text), want, "{text}");
    }
}

#[test]
fn optional_syntax_needs_the_optional_library() {
    let plain = env_with(EnvOptions::default());
    assert_eq!(
        err(&plain, "m.?a"),
        "ERROR: <input>:1:2: unsupported syntax '.?'\n | m.?a\n | .^"
    );
    assert_eq!(
        err(&plain, "[?m, {?1: 2}]"),
        "ERROR: <input>:1:2: unsupported syntax '?'\n | [?m, {?1: 2}]\n | .^\n\
         ERROR: <input>:1:7: unsupported syntax '?'\n | [?m, {?1: 2}]\n | ......^"
    );
}

#[test]
fn cross_type_numeric_comparisons() {
    let k8s = k8s_env();
    assert_eq!(ty(&k8s, "i < d && u >= i"), "bool");
    let plain = env_with(EnvOptions::default());
    assert_eq!(
        err(&plain, "1 < 2.0"),
        "ERROR: <input>:1:3: found no matching overload for '_<_' applied to '(int, double)'\n | 1 < 2.0\n | ..^"
    );
    // cel-go quirk: entering a comprehension scope drops the overload filter for the rest
    // of the check (checker/env.go enterScope).
    assert_eq!(ty(&plain, "[1].all(x, true) && 1 < 2.0"), "bool");
}

#[test]
fn validators() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "duration('1x') > duration('1s')"),
        "ERROR: <input>:1:10: invalid duration argument\n | duration('1x') > duration('1s')\n | .........^"
    );
    assert_eq!(
        err(&env, "timestamp('2023') == timestamp(0)"),
        "ERROR: <input>:1:11: invalid timestamp argument\n | timestamp('2023') == timestamp(0)\n | ..........^"
    );
    assert_eq!(
        err(&env, "'abc'.matches('[')"),
        "ERROR: <input>:1:15: invalid matches argument\n | 'abc'.matches('[')\n | ..............^"
    );
    assert_eq!(
        err(&env, "[1, 'a']"),
        "ERROR: <input>:1:5: expected type 'int' but found 'string'\n | [1, 'a']\n | ....^"
    );
    assert_eq!(
        err(&env, "{'a': 1, 2: 'b'}"),
        "ERROR: <input>:1:10: expected type 'string' but found 'int'\n | {'a': 1, 2: 'b'}\n | .........^\n\
         ERROR: <input>:1:13: expected type 'int' but found 'string'\n | {'a': 1, 2: 'b'}\n | ............^"
    );
    // Validators run only after a clean check.
    assert!(err(&env, "duration('1x') + foo").contains("undeclared reference to 'foo'"));
    assert!(!err(&env, "duration('1x') + foo").contains("invalid duration"));
}

#[test]
fn homogeneous_literals_exempt_functions() {
    let mut opts = EnvOptions::kubernetes();
    let format = FunctionDecl::new(
        "format",
        vec![OverloadDecl::member(
            "string_format",
            vec![Type::string(), Type::list(Type::dyn_type())],
            Type::string(),
        )],
    );
    let mut b = EnvBuilder::standard(opts.clone());
    b.add_function(format.clone()).expect("fn");
    let strict = b.build();
    assert_eq!(
        err(&strict, "'%s'.format([1, 'a'])"),
        "ERROR: <input>:1:17: expected type 'int' but found 'string'\n | '%s'.format([1, 'a'])\n | ................^"
    );
    opts.homogeneous_exempt_functions.push("format".to_string());
    let mut b = EnvBuilder::standard(opts);
    b.add_function(format).expect("fn");
    let exempt = b.build();
    assert_eq!(ty(&exempt, "'%s'.format([1, 'a'])"), "string");
    // Only literals inside the exempt call are exempt.
    assert!(err(&exempt, "'%s'.format([1]) + string(size([1, 'a']))").contains("found 'string'"));
}

#[test]
fn positions_multibyte_tabs_multiline() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "'ééé' + i"),
        "ERROR: <input>:1:7: found no matching overload for '_+_' applied to '(string, int)'\n | 'ééé' + i\n | .．．．..^"
    );
    assert_eq!(
        err(&env, "i == 1 &&\n\tfoo"),
        "ERROR: <input>:2:2: undeclared reference to 'foo' (in container '')\n |  foo\n | .^"
    );
    assert_eq!(
        err(&env, "foo &&\r\n  bar"),
        "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo &&\r\n | ^\n\
         ERROR: <input>:2:3: undeclared reference to 'bar' (in container '')\n |   bar\n | ..^"
    );
}

#[test]
fn many_errors_are_truncated() {
    let env = k8s_env();
    let text: Vec<String> = (0..103).map(|n| format!("x{n}")).collect();
    let out = err(&env, &text.join(" + "));
    assert_eq!(out.matches("ERROR:").count(), 100);
    assert!(out.ends_with("\n3 more errors were truncated"), "{out}");
}

#[test]
fn parse_errors_and_macro_expansion_errors() {
    let env = k8s_env();
    assert_eq!(
        err(&env, "object.spec.("),
        "ERROR: <input>:1:13: Syntax error: no viable alternative at input '.('\n | object.spec.(\n | ............^"
    );
    assert_eq!(
        err(&env, "m.all(1, v, true)"),
        "ERROR: <input>:1:7: argument must be a simple name\n | m.all(1, v, true)\n | ......^"
    );
}

#[test]
fn overlays_share_the_base() {
    let base = base(EnvOptions::kubernetes());
    let mut a = Env::extend(&base);
    a.add_variable("object", Type::int()).expect("var");
    let a = a.build();
    let mut b = Env::extend(&base);
    b.add_variable("object", Type::string()).expect("var");
    let b = b.build();
    assert_eq!(ty(&a, "object + 1"), "int");
    assert_eq!(ty(&b, "object + 'x'"), "string");
    assert!(compile(&base, "object").is_err());
    // Adding overloads in an overlay merges with the base function.
    let mut c = Env::extend(&base);
    c.add_function(FunctionDecl::new(
        "size",
        vec![OverloadDecl::global(
            "size_q",
            vec![Type::opaque("kubernetes.Quantity", vec![])],
            Type::int(),
        )],
    ))
    .expect("fn");
    c.add_variable("q", Type::opaque("kubernetes.Quantity", vec![]))
        .expect("var");
    let c = c.build();
    assert_eq!(ty(&c, "size(q) + size('abc')"), "int");
}

#[test]
fn deep_expressions_do_not_overflow() {
    let env = k8s_env();
    let run = move || {
        let env = k8s_env();
        // Long left-nested chains are within the parser's abilities and the checker's limit
        // or rejected with an error; never a crash.
        for n in [100usize, 400, 2000] {
            let plus = vec!["1"; n].join(" + ");
            let _ = compile(&env, &plus);
            let sel = format!("object{}", ".f".repeat(n));
            let _ = compile(&env, &sel);
            let parens = format!("{}1{}", "(".repeat(n.min(240)), ")".repeat(n.min(240)));
            let _ = compile(&env, &parens);
        }
        let plus = vec!["1"; 2000].join(" + ");
        compile(&env, &plus).err().map(|e| e.to_display_string())
    };
    let out = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(run)
        .expect("thread")
        .join()
        .expect("no stack overflow");
    assert_eq!(
        out.as_deref(),
        Some("ERROR: <input>:-1:0: max recursion depth exceeded")
    );
    // cel-go's visitor limit: 250 nested arithmetic/relational/selection nodes.
    assert_eq!(ty(&env, &vec!["1"; 251].join(" + ")), "int");
    assert_eq!(
        err(&env, &vec!["1"; 252].join(" + ")),
        "ERROR: <input>:-1:0: max recursion depth exceeded"
    );
    assert_eq!(ty(&env, &format!("object{}", ".f".repeat(250))), "dyn");
    assert_eq!(
        err(&env, &format!("object{}", ".f".repeat(251))),
        "ERROR: <input>:-1:0: max recursion depth exceeded"
    );
    // Unary chains do not count in cel-go; the checker's own depth limit applies.
    assert_eq!(ty(&env, &format!("{}1", "-".repeat(300))), "int");
    // The deepest ASTs cel-go's parser limits allow (two unlimited nodes per bracket level
    // plus 250 counted nodes) are checked on a 2 MiB stack.
    let deepest = format!(
        "{}object{}{}",
        "-[".repeat(249),
        ".f".repeat(249),
        "]".repeat(249)
    );
    let out = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            compile(&k8s_env(), &deepest)
                .err()
                .map(|e| e.to_display_string())
        })
        .expect("thread")
        .join()
        .expect("no stack overflow");
    assert!(out.is_some_and(|e| e.contains("found no matching overload for '-_'")));
}

#[test]
fn public_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Env>();
    assert_send_sync::<Arc<Env>>();
    assert_send_sync::<ParsedExpr>();
    assert_send_sync::<CompiledExpr>();
    assert_send_sync::<Issues>();
    assert_send_sync::<Type>();
    assert_send_sync::<CheckedTypes>();
}

#[test]
fn one_parse_many_checks() {
    // A parsed expression can be checked against several environments (one per kind).
    let parsed = parse("object.spec.replicas > 1").expect("parse");
    let base = base(EnvOptions::kubernetes());
    let mut with_dyn = Env::extend(&base);
    with_dyn
        .add_variable("object", Type::dyn_type())
        .expect("var");
    let with_dyn = with_dyn.build();
    let mut typed = Env::extend(&base);
    typed
        .add_variable("object", Type::object("Deployment"))
        .expect("var");
    typed.add_provider(Arc::new(
        StructTypes::new()
            .with_type("Deployment", [("spec", Type::object("Deployment.spec"))])
            .with_type("Deployment.spec", [("replicas", Type::int())]),
    ));
    let typed = typed.build();
    let mut wrong = Env::extend(&base);
    wrong
        .add_variable("object", Type::object("Deployment"))
        .expect("var");
    wrong.add_provider(Arc::new(
        StructTypes::new().with_type("Deployment", [("status", Type::dyn_type())]),
    ));
    let wrong = wrong.build();
    assert_eq!(
        check(&with_dyn, &parsed).map(|t| t.result_type().to_string()),
        Ok("bool".to_string())
    );
    let checked = check(&typed, &parsed).expect("typed");
    assert_eq!(checked.result_type().to_string(), "bool");
    // The select `object.spec` (id of the first `.`) is typed as the nested object type.
    assert!(
        checked
            .iter()
            .any(|(_, t)| t.to_string() == "Deployment.spec")
    );
    assert_eq!(
        check(&wrong, &parsed)
            .map_err(|e| e.to_display_string())
            .err()
            .as_deref(),
        Some("ERROR: <input>:1:7: undefined field 'spec'\n | object.spec.replicas > 1\n | ......^")
    );
}

/// The well-known protobuf messages cel-go's default registry describes can be built as
/// message literals; the literal has the message's checked type (cel-go v0.29.2
/// common/types/pb/checked.go `CheckedWellKnowns`).
#[test]
fn well_known_message_literals() {
    let env = k8s_env();
    assert_eq!(
        ty(&env, "google.protobuf.Any{type_url: 'x', value: b'y'}"),
        "any"
    );
    assert_eq!(
        ty(&env, "google.protobuf.FloatValue{value: 1.0}"),
        "wrapper(double)"
    );
    assert_eq!(
        ty(&env, "google.protobuf.UInt32Value{value: 1u}"),
        "wrapper(uint)"
    );
    assert_eq!(
        ty(
            &env,
            "google.protobuf.Value{string_value: 'a', list_value: [1]}"
        ),
        "dyn"
    );
    assert_eq!(ty(&env, "google.protobuf.Empty{}"), "google.protobuf.Empty");
    assert_eq!(
        err(&env, "google.protobuf.Empty{a: 1}"),
        "ERROR: <input>:1:24: undefined field 'a'\n | google.protobuf.Empty{a: 1}\n | .......................^"
    );
    assert_eq!(
        err(&env, "google.protobuf.Value{bool_value: 1}"),
        "ERROR: <input>:1:33: expected type of field 'bool_value' is 'bool' but provided type is 'int'\n | google.protobuf.Value{bool_value: 1}\n | ................................^"
    );
}
