//! Unit tests of the Kubernetes environment: every overload of the tables (a passing call
//! with the declared result type, and a failing call with cel-go's exact message), admission
//! variables, versions and modes.

use super::*;
use crate::cel::Type;

fn upstream_env(params: Params) -> PolicyEnv {
    PolicyEnv::new(Target::upstream(), KindDecls::untyped(params)).expect("env builds")
}

/// Each expression's first error message is the one given.
fn assert_first_messages(env: &PolicyEnv, cases: &[(&str, &str)]) {
    for (expr, msg) in cases {
        assert_eq!(first_message(env, expr), *msg, "{expr}");
    }
}

fn first_message(env: &PolicyEnv, expr: &str) -> String {
    match env.compile(expr) {
        Ok(c) => format!("<no error, type {}>", c.result_type()),
        Err(i) => i
            .errors()
            .first()
            .map(|e| e.message.clone())
            .unwrap_or_default(),
    }
}

/// An expression of the given (type-parameter-free) table type, or `None` if there is no
/// sample. Type parameters are bound to `int`.
fn sample(t: &str) -> Option<String> {
    let s = match t {
        "string" => "'s'".to_string(),
        "int" | "A" | "T" => "1".to_string(),
        "uint" => "1u".to_string(),
        "double" => "1.5".to_string(),
        "bool" => "true".to_string(),
        "bytes" => "b'b'".to_string(),
        "duration" => "duration('1s')".to_string(),
        "timestamp" => "timestamp('2024-01-01T00:00:00Z')".to_string(),
        "dyn" => "dyn(1)".to_string(),
        "kubernetes.URL" => "url('https://example.com')".to_string(),
        "kubernetes.Quantity" => "quantity('1')".to_string(),
        "kubernetes.Semver" => "semver('1.0.0')".to_string(),
        "kubernetes.NamedFormat" => "format.dns1123Label()".to_string(),
        "net.IP" => "ip('127.0.0.1')".to_string(),
        "net.CIDR" => "cidr('10.0.0.0/8')".to_string(),
        "kubernetes.authorization.Authorizer" => "authorizer".to_string(),
        "kubernetes.authorization.PathCheck" => "authorizer.path('/healthz')".to_string(),
        "kubernetes.authorization.GroupCheck" => "authorizer.group('')".to_string(),
        "kubernetes.authorization.ResourceCheck" => {
            "authorizer.group('').resource('pods')".to_string()
        }
        "kubernetes.authorization.Decision" => {
            "authorizer.group('').resource('pods').check('get')".to_string()
        }
        _ => {
            let inner = t.strip_prefix("list(")?.strip_suffix(')')?;
            format!("[{}]", sample(inner)?)
        }
    };
    Some(s)
}

/// The printed type of a sample (type parameters bound to `int`).
fn printed(t: &str) -> String {
    let bound = t
        .replace("list(A)", "list(int)")
        .replace("list(T)", "list(int)");
    match bound.as_str() {
        "A" | "T" => "int".to_string(),
        _ => bound,
    }
}

fn call_text(row: &decls::OverloadRow, args: &[String]) -> String {
    if row.member {
        let (recv, rest) = args
            .split_first()
            .expect("member overloads have a receiver");
        format!("{recv}.{}({})", row.function, rest.join(", "))
    } else {
        format!("{}({})", row.function, args.join(", "))
    }
}

/// Asserts that `text`, a call of `row` with arguments of `types`, is rejected with cel-go's
/// no-matching-overload message.
fn assert_no_matching_overload(
    env: &PolicyEnv,
    row: &decls::OverloadRow,
    text: &str,
    types: &[String],
) {
    assert_eq!(
        first_message(env, text),
        format!(
            "found no matching overload for '{}' applied to '{}'",
            row.function,
            signature(row, types)
        ),
        "{} ({text})",
        row.id
    );
}

fn signature(row: &decls::OverloadRow, types: &[String]) -> String {
    if row.member {
        let (recv, rest) = types
            .split_first()
            .expect("member overloads have a receiver");
        format!("{recv}.({})", rest.join(", "))
    } else {
        format!("({})", types.join(", "))
    }
}

/// Samples of a wrong type for the first argument, tried in order until one is rejected.
const WRONG: &[(&str, &str)] = &[
    ("{'k': 1}", "map(string, int)"),
    ("b'b'", "bytes"),
    ("duration('1s')", "duration"),
    ("1.5", "double"),
];

#[test]
fn every_overload_passes_with_its_declared_result_and_fails_with_cel_go_message() {
    let env = upstream_env(Params::Absent);
    let mut checked = 0;
    for row in decls::all_rows() {
        if row.function.starts_with('@') {
            // Internal function of the sortBy macro, not callable from source.
            continue;
        }
        let mut args: Vec<String> = row
            .args
            .iter()
            .map(|a| sample(a).unwrap_or_else(|| panic!("no sample for {a} ({})", row.id)))
            .collect();
        if row.id == "string_format" {
            // The strings extension's validator checks literal format strings.
            args[0] = "'%d'".to_string();
        }
        let text = call_text(row, &args);
        let compiled = env
            .compile(&text)
            .unwrap_or_else(|e| panic!("{} ({text}): {}", row.id, e.to_display_string()));
        let mut expected = printed(row.result);
        if row.id == "list_flatten_int" {
            expected = "list(dyn)".to_string();
        }
        assert_eq!(
            compiled.result_type().to_string(),
            expected,
            "{} ({text})",
            row.id
        );

        if row.args.is_empty() {
            let text = format!("{}(1)", row.function);
            assert_eq!(
                first_message(&env, &text),
                format!(
                    "found no matching overload for '{}' applied to '(int)'",
                    row.function
                ),
                "{}",
                row.id
            );
            checked += 1;
            continue;
        }
        let mut rejected = false;
        for (wrong, wrong_type) in WRONG {
            let mut bad_args = args.clone();
            bad_args[0] = wrong.to_string();
            let text = call_text(row, &bad_args);
            if env.compile(&text).is_ok() {
                continue;
            }
            let mut types: Vec<String> = row.args.iter().map(|a| printed(a)).collect();
            types[0] = wrong_type.to_string();
            assert_no_matching_overload(&env, row, &text, &types);
            rejected = true;
            break;
        }
        if !rejected && row.args.iter().all(|a| *a == "dyn") {
            // Every argument type is accepted (`includes`): a missing argument is rejected.
            let text = call_text(row, &args[..args.len() - 1]);
            let types: Vec<String> = vec!["dyn".to_string(); args.len() - 1];
            assert_no_matching_overload(&env, row, &text, &types);
            rejected = true;
        }
        assert!(rejected, "{}: every wrong sample was accepted", row.id);
        checked += 1;
    }
    let callable = decls::all_rows()
        .filter(|r| !r.function.starts_with('@'))
        .count();
    assert_eq!(checked, callable);
    assert_eq!(callable, 150);
}

#[test]
fn authorizer_misuse_messages_are_exact() {
    let env = upstream_env(Params::Absent);
    let err = env.compile("authorizer.allowed()").unwrap_err();
    assert_eq!(
        err.to_display_string(),
        "ERROR: <input>:1:19: found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'\n | authorizer.allowed()\n | ..................^"
    );
    assert_eq!(
        first_message(&env, "authorizer.group('apps').check('get')"),
        "found no matching overload for 'check' applied to 'kubernetes.authorization.GroupCheck.(string)'"
    );
    // Authorizer is not a known object type, so a field selection fails resolution
    // (upstream has no `authorizer.requestResource` in the type-check environment).
    assert_eq!(
        first_message(&env, "authorizer.requestResource"),
        "unexpected failed resolution of 'kubernetes.authorization.Authorizer'"
    );
    assert!(
        env.compile("authorizer.group('').resource('pods').fieldSelector('a=b').labelSelector('c').namespace('n').name('x').subresource('s').check('get').reason() != ''")
            .is_ok()
    );
    assert!(
        env.compile("authorizer.serviceAccount('ns', 'sa').path('/x').check('get').errored()")
            .is_ok()
    );
}

#[test]
fn request_and_namespace_types() {
    let env = upstream_env(Params::Absent);
    let ty = |e: &str| {
        env.compile(e)
            .map(|c| c.result_type().to_string())
            .unwrap_or_else(|i| i.to_display_string())
    };
    assert_eq!(ty("request.userInfo.extra"), "map(string, list(string))");
    assert_eq!(ty("request.kind"), "kubernetes.GroupVersionKind");
    assert_eq!(ty("request.requestResource.resource"), "string");
    assert_eq!(ty("request.dryRun"), "bool");
    assert_eq!(ty("request.options"), "dyn");
    assert_eq!(ty("request.namespace"), "string");
    assert_eq!(ty("namespaceObject.metadata.UID"), "string");
    assert_eq!(ty("namespaceObject.metadata.namespace"), "string");
    assert_eq!(
        ty("namespaceObject.status.conditions[0].lastTransitionTime"),
        "timestamp"
    );
    assert_eq!(ty("namespaceObject.spec.finalizers"), "list(string)");
    assert_first_messages(
        &env,
        &[
            ("request.uid", "undefined field 'uid'"),
            ("namespaceObject.metadata.uid", "undefined field 'uid'"),
            ("request.object", "undefined field 'object'"),
        ],
    );
}

#[test]
fn params_declarations() {
    let absent = upstream_env(Params::Absent);
    assert_eq!(
        first_message(&absent, "params.x"),
        "undeclared reference to 'params' (in container '')"
    );
    let untyped = upstream_env(Params::Untyped);
    assert!(untyped.compile("params != null && params.x.y == 1").is_ok());
    let typed = PolicyEnv::new(
        Target::upstream(),
        KindDecls {
            object: Some(Type::object("Obj1")),
            params: Params::Typed(Type::object("Params1")),
            types: Some(Arc::new(
                crate::cel::StructTypes::new()
                    .with_type("Obj1", [("foo", Type::int())])
                    .with_type("Params1", [("bar", Type::string())]),
            )),
            patch_types: false,
        },
    )
    .expect("env builds");
    assert_eq!(
        first_message(&typed, "object.foo == params.bar"),
        "found no matching overload for '_==_' applied to '(int, string)'"
    );
    assert_eq!(first_message(&typed, "params.baz"), "undefined field 'baz'");
    assert!(typed.compile("oldObject.foo == 1").is_ok());
}

#[test]
fn keyword_field_fallback_from_1_31() {
    let types: Arc<dyn crate::cel::TypeProvider> = Arc::new(
        crate::cel::StructTypes::new()
            .with_type("Obj1", [("metadata", Type::object("Obj1.metadata"))])
            .with_type("Obj1.metadata", [("__namespace__", Type::string())]),
    );
    let kind = || KindDecls {
        object: Some(Type::object("Obj1")),
        params: Params::Absent,
        types: Some(types.clone()),
        patch_types: false,
    };
    let at = |minor: u32| Target {
        version: KubeVersion::new(minor).expect("supported"),
        mode: Mode::Upstream,
    };
    let new = PolicyEnv::new(at(37), kind()).expect("env");
    assert!(new.compile("object.metadata.namespace == 'x'").is_ok());
    assert!(new.compile("object.metadata.__namespace__ == 'x'").is_ok());
    let old = PolicyEnv::new(at(30), kind()).expect("env");
    assert_eq!(
        first_message(&old, "object.metadata.namespace == 'x'"),
        "undefined field 'namespace'"
    );
}

#[test]
fn variables_compose_in_order() {
    let mut env = upstream_env(Params::Absent);
    let outcomes = env.add_variables([
        ("a", "1"),
        ("b", "variables.a + 1"),
        ("c", "variables.d"),
        ("d", "'x'"),
        ("e", "quantity('1')"),
        ("f", "[ip('1.2.3.4')]"),
        ("g", "{'k': [1.5]}"),
    ]);
    let types: Vec<String> = outcomes.iter().map(|o| o.field_type.to_string()).collect();
    assert_eq!(
        types,
        [
            "int",
            "int",
            "dyn",
            "string",
            "dyn",
            "list(dyn)",
            "map(string, list(double))"
        ]
    );
    assert!(outcomes[2].result.is_err());
    assert_first_messages(
        &env,
        &[
            ("variables.nonExisting", "undefined field 'nonExisting'"),
            (
                "variables.d == 1",
                "found no matching overload for '_==_' applied to '(string, int)'",
            ),
        ],
    );
    assert!(env.compile("variables.c.anything && variables.e.x").is_ok());
}

#[test]
fn versions_parse_and_bound() {
    let target = |s: &str| {
        s.parse::<crate::k8s_env::KubernetesVersion>()
            .map_err(|e| e.to_string())
            .and_then(|v| v.supported())
    };
    assert_eq!(target("v1.33.2").map(|v| v.minor()), Ok(33));
    assert_eq!(target("1.30").map(|v| v.to_string()), Ok("1.30".into()));
    assert!(target("1.29").is_err());
    assert!(target("1.38").is_err());
    assert!(target("2.30").is_err());
    assert!(target("1.3x").is_err());
    assert!(target("").is_err());
}

#[test]
fn upstream_mode_has_only_the_libraries_of_the_version() {
    let at = |minor: u32| {
        PolicyEnv::new(
            Target {
                version: KubeVersion::new(minor).expect("supported"),
                mode: Mode::Upstream,
            },
            KindDecls::untyped(Params::Absent),
        )
        .expect("env")
    };
    let cases: &[(&str, u32)] = &[
        ("ip('1.2.3.4').family() == 4", 30),
        ("cidr('10.0.0.0/8').containsIP('10.1.1.1')", 30),
        ("format.dns1123Label().validate('x').hasValue()", 31),
        (
            "authorizer.group('').resource('p').fieldSelector('a=b').check('get').allowed()",
            31,
        ),
        ("{'a': 1}.all(k, v, v > 0)", 32),
        ("[1, 2].transformList(i, v, v * 2) == [2, 4]", 32),
        ("semver('1.2.3').major() == 1", 33),
        ("semver('v1.2', true).isLessThan(semver('1.3.0'))", 33),
        ("lists.range(3).reverse() == [2, 1, 0]", 34),
        ("[3, 1].sort()[0] == 1", 34),
        ("[1, 2].includes(1)", 37),
    ];
    for (expr, since) in cases {
        for minor in 30..=37 {
            let ok = at(minor).compile(expr).is_ok();
            assert_eq!(ok, minor >= *since, "{expr} at 1.{minor}");
        }
    }
}

#[test]
fn extended_mode_warns_about_newer_functions() {
    let target = Target {
        version: KubeVersion::new(31).expect("supported"),
        mode: Mode::Extended,
    };
    let env = PolicyEnv::new(target, KindDecls::untyped(Params::Untyped)).expect("env");
    let warnings = |e: &str| {
        let c = env
            .compile(e)
            .unwrap_or_else(|i| panic!("{e}: {}", i.to_display_string()));
        env.version_warnings(&c)
            .iter()
            .map(VersionWarning::message)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        warnings("[1].includes(1) && lists.range(2).size() == 2"),
        [
            "function 'includes' (library kubernetes.lists) was introduced in Kubernetes 1.37; the target version is 1.31",
            "function 'lists.range' (library cel.lib.ext.lists) was introduced in Kubernetes 1.34; the target version is 1.31",
        ]
    );
    assert_eq!(
        warnings("params.m.all(k, v, v > 0)"),
        [
            "macro 'all' (library cel.lib.ext.comprev2) was introduced in Kubernetes 1.32; the target version is 1.31"
        ]
    );
    assert_eq!(
        warnings("params.items.sortBy(i, i.name).size() > 0"),
        [
            "macro 'sortBy' (library cel.lib.ext.lists) was introduced in Kubernetes 1.34; the target version is 1.31"
        ]
    );
    // Old functions, the standard library and one-variable macros: nothing.
    assert!(warnings("params.l.all(x, x > 0) && 'abc'.indexOf('b') == 1 && [1].indexOf(1) == 0 && string(1) == '1' && ip('1.2.3.4').family() == 4 && format.named('uuid').hasValue()").is_empty());
    // `string` of an IP is the IP library (1.30), available at 1.31.
    assert!(warnings("string(ip('::1')) != ''").is_empty());
    // A dyn receiver matches a pre-1.37 overload too: no warning.
    assert!(warnings("params.x.indexOf(1) == 0").is_empty());
    let c = env.compile("[1].includes(1)").expect("compiles");
    let w = env.version_warnings(&c);
    assert_eq!(
        w.first().map(|w| w.to_display_string(c.parsed.source())),
        Some("WARNING: <input>:1:13: function 'includes' (library kubernetes.lists) was introduced in Kubernetes 1.37; the target version is 1.31\n | [1].includes(1)\n | ............^".to_string())
    );
    // Parse once, check per environment.
    let parsed = crate::cel::parse("[1].includes(1)").expect("parses");
    let types = env.check(&parsed).expect("checks");
    assert_eq!(env.version_warnings_of(&parsed, &types), w);
    let at36 = PolicyEnv::new(
        Target {
            version: KubeVersion::new(36).expect("supported"),
            mode: Mode::Upstream,
        },
        KindDecls::untyped(Params::Absent),
    )
    .expect("env");
    assert_eq!(
        at36.check(&parsed)
            .map_err(|i| i.errors()[0].message.clone())
            .err()
            .as_deref(),
        Some("undeclared reference to 'includes' (in container '')")
    );
    assert_eq!("extended".parse::<Mode>(), Ok(Mode::Extended));
    assert_eq!(Mode::Upstream.to_string(), "upstream");
    assert!("other".parse::<Mode>().is_err());
    // Upstream mode never warns.
    let up = upstream_env(Params::Untyped);
    let c = up.compile("[1].includes(1)").expect("compiles at 1.37");
    assert!(up.version_warnings(&c).is_empty());
}

#[test]
fn strings_format_validator() {
    let env = upstream_env(Params::Untyped);
    assert!(env.compile("'%s and %d'.format(['a', 1])").is_ok());
    // `format` arguments are exempt from the homogeneous literal check.
    assert!(env.compile("'%s %s'.format(['a', 1])").is_ok());
    assert!(
        env.compile("'%d %x %o %b %.2f %e %%'.format([1, 'ab', 2u, true, 1.5, params.x])")
            .is_ok()
    );
    let cases = [
        (
            "'%d'.format(['a'])",
            "error during formatting: decimal clause can only be used on integers, was given string",
        ),
        ("'%s %s'.format(['a'])", "index 1 out of range"),
        (
            "'%s'.format(['a', 'b'])",
            "too many arguments supplied to string.format (expected 1, got 2)",
        ),
        ("'%'.format(['a'])", "unexpected end of string"),
        (
            "'%z'.format([1])",
            "could not parse formatting clause: unrecognized formatting clause \"z\"",
        ),
        (
            "'%.3'.format([1.5])",
            "could not parse formatting clause: error while parsing precision: could not find end of precision specifier",
        ),
        (
            "'%s'.format([[ip('1.2.3.4')]])",
            "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given net.IP",
        ),
        (
            "'%f'.format([1])",
            "error during formatting: fixed-point clause can only be used on doubles, was given int",
        ),
    ];
    assert_first_messages(&env, &cases);
    let err = env.compile("'%d'.format(['a'])").unwrap_err();
    assert_eq!(
        err.to_display_string(),
        "ERROR: <input>:1:14: error during formatting: decimal clause can only be used on integers, was given string\n | '%d'.format(['a'])\n | .............^"
    );
}

#[test]
fn sort_by_macro() {
    let env = upstream_env(Params::Untyped);
    let ty = |e: &str| {
        env.compile(e)
            .map(|c| c.result_type().to_string())
            .unwrap_or_else(|i| i.to_display_string())
    };
    assert_eq!(
        ty("[{'n': 2}, {'n': 1}].sortBy(e, e.n)"),
        "list(map(string, int))"
    );
    // Every `@sortByAssociatedKeys` overload matches a dyn receiver, with different result
    // types: cel-go widens the call to dyn.
    assert_eq!(ty("params.items.sortBy(e, e.name)"), "dyn");
    assert_eq!(ty("[1, 2].sortBy(e, -e)"), "list(int)");
    assert_first_messages(
        &env,
        &[
            ("[1].sortBy(1, 2)", "argument is not an identifier"),
            (
                "{'a': 1}.sortBy(k, k)",
                "sortBy can only be applied to a list, identifier, comprehension, call or select expression",
            ),
            (
                "[{'a': 1}].sortBy(e, e)",
                "found no matching overload for '@sortByAssociatedKeys' applied to 'list(map(string, int)).(list(map(string, int)))'",
            ),
        ],
    );
}

#[test]
fn base_env_is_cached() {
    let a = base_env(Target::upstream()).expect("builds");
    let b = base_env(Target::upstream()).expect("builds");
    assert!(Arc::ptr_eq(&a, &b));
    let ext = base_env(Target {
        version: KubeVersion::MIN,
        mode: Mode::Extended,
    })
    .expect("builds");
    assert!(Arc::ptr_eq(&a, &ext));
}
