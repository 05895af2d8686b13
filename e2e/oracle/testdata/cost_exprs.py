"""Hand-written expressions exercising every cost rule of cel-go's estimator
(checker/cost.go) and Kubernetes' library cost estimator (pkg/cel/library/cost.go).
Each case is the rest of a celcheck "cost" request (expr, optional variables/paramKind)."""

PARAMS = {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}

EXPRS = [
    # literals, identifiers, selection, presence tests
    "1", "'abc'", "b'abc'", "true", "null", "1.5", "2u",
    "object", "object.metadata.name", "has(object.spec)", "has(object.spec.replicas)",
    "request.operation", "request.userInfo.username", "namespaceObject.metadata.name",
    "oldObject == null", "object.?spec.orValue(1)",
    # aggregate literals
    "[]", "[1, 2, 3]", "['a', 'bb']", "{}", "{'a': 1, 'bb': 2}", "[[1], [2, 3]]",
    "{'a': [1, 2]}",
    # arithmetic and logic
    "1 + 2 * 3 - 4 / 5 % 6", "-1", "!true", "true && false", "true || false",
    "object.a || object.b", "object.a && object.b && object.c", "true ? 1 : 2",
    "object.a ? object.b : object.c", "object.a ? [1] : [1, 2, 3]",
    # comparisons and equality
    "1 < 2", "'a' < 'b'", "b'a' < b'bc'", "'abc' == 'abd'", "object.a == 'abc'",
    "object.a != object.b", "[1, 2] == [1, 2]", "object.x == object.y",
    "'abc' >= 'ab'", "'' == ''",
    # strings and bytes
    "'abc' + 'def'", "object.a + 'def'", "b'ab' + b'cd'", "'abc'.size()", "size('abc')",
    "'abc'.startsWith('a')", "'abc'.endsWith('bc')", "'abc'.contains('b')",
    "object.s.contains('b')", "object.s.startsWith(object.t)", "'abc'.matches('^a.*$')",
    "matches('abc', 'a+')", "object.s.matches('[a-z]+')", "bytes('abc')", "string(b'abc')",
    "string(1)", "int('1')", "double('1.5')", "uint(1)", "bytes(object.s).size()",
    "string(bytes('abcd')).size()", "'abcdefghijklmnopqrstuvwxyz'.matches('^[a-z]+$')",
    # lists, maps, in, index
    "1 in [1, 2, 3]", "'a' in {'a': 1}", "object.x in object.list", "[1, 2, 3][0]",
    "{'a': 1}['a']", "object.list[0]", "object.map['k']", "[1, 2] + [3]",
    "([1, 2] + [3]).all(x, x > 0)", "size([1, 2])", "object.list.size()",
    # comprehensions (macros) over bounded and unbounded ranges
    "[1, 2, 3].all(x, x > 0)", "[1, 2, 3].exists(x, x > 2)", "[1, 2, 3].exists_one(x, x > 2)",
    "[1, 2, 3].map(x, x * 2)", "[1, 2, 3].map(x, x > 1, x * 2)", "[1, 2, 3].filter(x, x > 1)",
    "{'a': 1, 'b': 2}.all(k, k != '')", "{'a': 1}.exists(k, k == 'a')",
    "['a', 'bb'].all(s, s.startsWith('a'))", "[1, 2].map(x, [x, x]).all(l, l.size() == 2)",
    "[[1, 2], [3]].all(l, l.all(x, x > 0))", "[1, 2, 3].filter(x, x > 1).map(y, y + 1)",
    "object.spec.containers.all(c, c.image.startsWith('r/'))",
    "object.spec.containers.exists(c, c.name == 'x')",
    "object.spec.containers.map(c, c.name)", "object.spec.containers.filter(c, has(c.ports))",
    "object.spec.containers.all(c, c.ports.all(p, p.containerPort > 1024))",
    "object.list.exists_one(x, x == 1)", "object.map.all(k, k.startsWith('a'))",
    "size(object.list.filter(x, x > 1)) > 0",
    # conversions, types, durations, timestamps
    "type(1) == int", "duration('1s') > duration('0s')", "timestamp('2020-01-01T00:00:00Z')",
    "duration('1h').getHours()", "timestamp('2020-01-01T00:00:00Z').getFullYear()",
    "dyn(1)", "dyn([1, 2]).size()", "dyn('abc').size()",
    # optionals
    "optional.of(1).hasValue()", "optional.none().orValue(2)", "[?optional.of(1)].size()",
    "object.?a.?b.hasValue()", "{'a': 1}[?'a'].orValue(0)",
    # extended strings library (strings v2)
    "'abc'.charAt(1)", "'abc'.indexOf('b')", "'abc'.lastIndexOf('b')", "'ABC'.lowerAscii()",
    "'abc'.upperAscii()", "'a,b'.split(',')", "'a,b,c'.split(',', 2)", "object.s.split(',')",
    "'abc'.substring(1)", "'abc'.substring(1, 2)", "' a '.trim()", "'abc'.replace('b', 'x')",
    "'abc'.replace('', 'x')", "'aaa'.replace('a', 'bb')", "object.s.replace('a', 'b')",
    "'abc'.replace('b', 'x', 1)", "['a', 'b'].join()", "['a', 'b'].join(',')",
    "object.list.join(',')", "strings.quote('abc')", "'%s'.format(['a'])",
    "'abc'.format([])",
    # sets and lists extensions
    "sets.contains([1, 2], [1])", "sets.equivalent([1], [1])", "sets.intersects([1], [2])",
    "[1, 2].slice(0, 1)", "[[1], [2]].flatten()", "[3, 1].sort()", "lists.range(3)",
    "[1, 2, 1].distinct()", "[1, 2].reverse()", "[2, 1].sortBy(x, -x)", "[1, 2].first()",
    "[1, 2].last()",
    # two-variable comprehensions
    "[1, 2].all(i, v, v > i)", "{'a': 1}.exists(k, v, v > 0)", "[1, 2].transformList(i, v, v * 2)",
    "{'a': 1}.transformMap(k, v, v + 1)", "[1].existsOne(i, v, v == 1)",
    "[1, 2].exists_one(i, v, v == 1)", "[1, 2, 3].transformList(i, v, v > 1, v * 2)",
    "{'a': 1}.transformMap(k, v, v > 0, v + 1)", "{'a': 1}.transformMapEntry(k, v, {k: v})",
    "[1, 2].transformMapEntry(i, v, v > 1, {string(i): v})",
    "object.list.all(i, v, v > i)", "object.map.exists(k, v, k == 'a' && v == 1)",
    "object.list.transformList(i, v, v)", "object.map.transformMap(k, v, k + 'x')",
    "[[1, 2]].all(i, l, l.all(j, x, x > j))", "['b', 'a'].sortBy(s, s)",
    "object.list.sortBy(x, x)", "[1, 2].sortBy(x, dyn(x))", "[b'a'].sortBy(x, x).size()",
    "optional.of(1).optMap(x, x + 1).hasValue()", "object.?a.optFlatMap(x, optional.of(x)).hasValue()",
    # Kubernetes list library
    "[1, 2, 3].isSorted()", "[1, 2].sum()", "[1, 2].max()", "[1, 2].min()",
    "[1, 2].indexOf(2)", "[1, 2].lastIndexOf(2)", "['a', 'bb'].isSorted()", "['a', 'b'].indexOf('a')",
    "object.list.sum()", "object.list.isSorted()", "object.list.indexOf(1)",
    # Kubernetes regex library
    "'abc'.find('b')", "'abc'.findAll('[a-z]')", "'abc'.findAll('b', 2)", "object.s.find('x+')",
    # Kubernetes URL library
    "url('https://example.com/a').getHost()", "isURL('https://example.com')",
    "url('https://example.com').getScheme() == 'https'", "url('https://a.b') == url('https://a.b')",
    "url('https://e.com/p?q=1').getQuery()", "url('https://e.com/p').getEscapedPath()",
    # Kubernetes quantity library
    "quantity('1Gi')", "isQuantity('1Gi')", "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
    "quantity('1') == quantity('1')", "quantity('1').add(1).isInteger()",
    "quantity('1.5').asApproximateFloat()", "quantity('1').isInteger()", "quantity('1').compareTo(quantity('2'))",
    "quantity(object.s).asInteger()",
    # Kubernetes IP/CIDR libraries
    "ip('127.0.0.1').family()", "isIP('::1')", "ip.isCanonical('127.0.0.1')", "ip('::1') == ip('::1')",
    "cidr('10.0.0.0/8').containsIP('10.0.0.1')", "cidr('10.0.0.0/8').containsIP(ip('10.0.0.1'))",
    "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", "cidr('10.0.0.0/8').containsCIDR(cidr('10.1.0.0/16'))",
    "isCIDR('10.0.0.0/8')", "cidr('10.0.0.0/8').ip()", "cidr('10.0.0.0/8').masked()",
    "cidr('10.0.0.0/8').prefixLength()", "cidr('1.0.0.0/8') == cidr('1.0.0.0/8')",
    "ip('1.2.3.4').isLoopback()", "ip(object.s).isGlobalUnicast()",
    # Kubernetes format library
    "format.dns1123Label().validate('abc')", "format.named('dns1123Label').hasValue()",
    "format.dns1123Label() == format.dns1123Subdomain()", "!format.dns1123Label().validate(object.s).hasValue()",
    # Kubernetes semver library
    "semver('1.2.3').major()", "isSemver('1.2.3')", "semver('1.2.3') == semver('1.2.3')",
    "semver('1.2.3').isLessThan(semver('1.3.0'))",
    # Kubernetes authorizer library
    "authorizer.group('apps').resource('deployments').check('get').allowed()",
    "authorizer.path('/healthz').check('get').reason()",
    "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').namespace('ns').name('p').check('create').errored()",
    
    "authorizer.group('').resource('pods').subresource('log').check('get').error()",
]

CASES = [{"expr": e} for e in EXPRS] + [
    dict(PARAMS, expr="params.data.x == object.metadata.name"),
    dict(PARAMS, expr="object.spec.containers.all(c, c.image in params.data.images)"),
    {"expr": "variables.names.all(n, n.size() < 10)",
     "variables": [{"name": "names", "expression": "object.spec.containers.map(c, c.name)"}]},
    {"expr": "variables.s.size() + variables.l.size()",
     "variables": [{"name": "s", "expression": "'abc'"}, {"name": "l", "expression": "[1, 2, 3]"}]},
    {"expr": "variables.l.all(x, x > 0)", "variables": [{"name": "l", "expression": "[1, 2, 3]"}]},
]
