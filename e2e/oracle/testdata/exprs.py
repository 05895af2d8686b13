#!/usr/bin/env python3
"""Writes the hand-written tricky-expression requests for celcheck (one JSON request per line).

Each expression is sent to the plain cel-go env ("std", with declarations and the cel-go
extension libraries Kubernetes enables) and to the ValidatingAdmissionPolicy env ("vap") for a
GVK. The golden script feeds the output to `celcheck -echo`.
"""
import json
import sys

# Variables of the std env: the same names as in the vap env, typed as dyn, plus simple typed ones.
STD_DECLS = [
    {"name": "object", "type": "dyn"},
    {"name": "oldObject", "type": "dyn"},
    {"name": "request", "type": "dyn"},
    {"name": "params", "type": "dyn"},
    {"name": "i", "type": "int"},
    {"name": "u", "type": "uint"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bool"},
    {"name": "by", "type": "bytes"},
    {"name": "l", "type": "list(int)"},
    {"name": "ls", "type": "list(string)"},
    {"name": "m", "type": "map(string, int)"},
    {"name": "md", "type": "map(string, dyn)"},
    {"name": "o", "type": "optional_type(int)"},
    {"name": "ts", "type": "timestamp"},
    {"name": "du", "type": "duration"},
    {"name": "n", "type": "null_type"},
]
# cel-go libraries of the Kubernetes 1.37 base environment (k8s.io/apiserver pkg/cel/environment/base.go).
K8S_EXT = ["strings:2", "sets", "lists:3", "twovar"]

DEPLOY = "apps/v1, Kind=Deployment"
POD = "/v1, Kind=Pod"
CM = "/v1, Kind=ConfigMap"

cases = []  # (expr, dict of extra vap fields)


def add(expr, **vap):
    cases.append((expr, vap))


# ---- parse errors -------------------------------------------------------------------------
for e in [
    "", " ", "1 +", ")", "(", "a.", ".", "?", "1 2", "{", "[1, 2", "a[", "foo(", "x ? y",
    "in", "1 in", "a..b", "0x", "1e", "99999999999999999999", "18446744073709551616u",
    "-9223372036854775809", "9223372036854775807", "-9223372036854775808", "0xFFFFFFFFFFFFFFFFF",
    "1.7976931348623157e309", '"unterminated', "'abc", "'''open", '"\\z"', "b'\\xff' == b''",
    "'\\u00e9' == 'é'", "'\\U0001F600'", "'\\ud800'", "if", "while", "package.x", "var == 1",
    "function(1)", "x.if", "a.package", "null.x", "true.false", "1..2", "[,]", "{,}", "{'a' 1}",
    "f(,)", "!", "-", "--1", "!!true", "a ? b : ", "a || ", "&& b", "1 = 1", "a === b",
    "object.?", "object[?", "x.?y.z", "has(1)", "has(object)", "has(object.a.b)", "has(object['a'])",
    "[1].all(1, true)", "[1].map(x)", "[1].map(x, y, z, w)", "[1].exists(x.y, true)",
    "cel.bind(x, 1, x)", "@in", "`a`", "object.`spec`", "1.0.0", "'a' 'b'", "r'\\d'", "R\"a\"",
    "b'abc' + b'd'", "1u + 1", "0u - 1u",
    "a\u00a0+ 1", "x#y", "$x", "x\\y",
]:
    add(e)

# ---- positions: tabs, unicode, multi-line, CR ----------------------------------------------
for e in [
    "\tobject.foo == 1", "object.\tfoo == 1", "\t\tundeclared", "'\t' + 1",
    "'héllo' == 1", "'日本語' + 1", "'😀😀' + 1", "'e\u0301' + 1", "'a\u200bb' + 1", "'\u00a0' + 1",
    "'日本' + 日本", "'x' == 'y' && 'ü' + 1 == 2",
    "object.spec\n  .replicaz > 1", "\n\nundeclared", "1 +\n2 +\n'a'", "object.a\r\n  .b + 1",
    "'a' +\r1", "[\n  1,\n  'a'\n]", "{\n 'a': 1,\n 'b': 'c'\n}", "// comment\nundeclared",
    "undeclared // trailing comment", "'''multi\nline''' + 1", "'''a\n\tb''' + undeclared",
    "ﬁ + 1", "'𝔘𝔫𝔦' + 'x' + 1", "'\u0000' + 1",
]:
    add(e)

# long line (snippet cap is on bytes), many errors (truncation line), nesting and size limits
add("x" * 16380 + " + undeclared_a")
add("'" + "a" * 16390 + "' + undeclared_b")
add(" + ".join(f"u{k}" for k in range(105)))
add(" + ".join(f"'s' + {k}" for k in range(3)))
add("(" * 40 + "1" + ")" * 40)
add("(" * 260 + "1" + ")" * 260)
add("[" * 260 + "]" * 260)
add("1" + " + 1" * 300)
add("a" * 100001)
add("-" * 300 + "1")
add("!" * 300 + "true")

# ---- checker errors ------------------------------------------------------------------------
for e in [
    "undeclared", "undeclared.field", "foo.bar.baz", "1.foo", "'a'.foo", "true.x",
    "'a' == 1", "1 == 1u", "1 == 1.0", "1 < 1u", "1 < 1.0", "1u <= 2.0", "size(1)", "1.size()",
    "size('a', 'b')", "[1, 'a']", "{'a': 1, 'b': 'c'}", "{1: 1, 'a': 1}", "[1, 2.0]",
    "[[1], ['a']]", "[1, null]", "[null, 1]", "[dyn(1), 'a']", "{'a': [1], 'b': ['x']}",
    "1 in 1", "'a' in ['a']", "1 in {'a': 1}", "1.all(y, y)", "'abc'.all(c, true)",
    "true ? 1 : 'a'", "true ? 1 : 2u", "1 ? 2 : 3", "!1", "-'a'", "-1u", "1 + 'a'", "1u + 1",
    "1 + 1.0", "'a' * 2", "[1] + ['a']", "{'a': 1} + {'b': 2}", "1 / 0", "1 % 2.0", "1.0 % 2.0",
    "int('1') + 1u", "uint(1) + 1", "double(1) + 1", "string(1) + 1", "bytes('a') + 'a'",
    "bool('true') && 1", "int(1.5) == 1", "int(true)", "timestamp(1) < ts", "duration('1x')",
    "duration('1h') + 1", "timestamp('bad')", "timestamp('2020-01-01T00:00:00Z')",
    "ts - ts == du", "ts + ts", "ts.getFullYear()", "ts.getFullYear('America/New_York') + 'a'",
    "'a'.matches('[')", "'a'.matches('a') + 1", "matches('a', '(')", "dyn(1) + 'a'",
    "dyn(1) == 'a'", "type(1) == int", "type(1) == 'int'", "int == 1", "type(type)",
    "google.protobuf.Timestamp{}", "Foo{}", "int{}", "null == 1", "null == null", "n == 1",
    "l[0] + 'a'", "l['a']", "m[1]", "m['a'] + 'b'", "md.a.b.c + 1", "ls.map(x, x + 1)",
    "l.filter(x, x)", "l.all(x, x > 'a')", "l.exists_one(x, x == 1)", "l.exists_one(x, x)",
    "m.all(k, k > 1)", "m.map(k, m[k]) + ['a']", "l.map(x, x > 0, x * 2) + ['a']",
    "l.map(x, l.map(y, x + y))[0][0] + 'a'", "l.all(l, l > 0)", "[l, m]", "[1, i, u]",
    "i + u", "i + d", "d + u", "i == d", "i < d", "u > d", "s + by", "by + by + s",
    "s.size() + 'a'", "size(s) > size(by) + size(l) + size(m) + 'x'", "s.startsWith(1)",
    "s.endsWith('a') + 1", "s.contains()", "s.matches(s)", "ts.getHours() + du.getHours() + 'a'",
    "o + 1", "o.value() + 'a'", "o.hasValue() + 1", "o.orValue('a')", "o.or(1)",
    "o.or(optional.of('a'))", "optional.of(1) == optional.of('a')", "optional.none() + 1",
    "optional.ofNonZeroValue(0).value() + 'x'", "o.optMap(x, x + 'a')",
    "o.optFlatMap(x, optional.of(x)).value() + 'a'", "md.?a.orValue(1)", "m.?a.orValue('x')",
    "l[?0].orValue('x')", "[?o, ?optional.of('a')]", "{?'a': o}", "{?'a': 1}", "[?1]",
    "md.?a.?b.orValue(1) + 'x'", "object.?a", "optional.unwrap([o]) + ['a']", "o.?x",
    "optional.of(1).?x", "i.?x", "s[0]", "by[0]", "m.a", "m.a + 'x'",
    "dyn([1]).all(x, x)", "[1].all(x, x)", "[1].exists(x, 1)", "[1].filter(x, 'a')",
    "has(m.a) + 1", "has(md.a.b)", "has(i.a)", "has(o.a)",
    # message literals and type names
    "google.protobuf.Timestamp{seconds: 'a'}", "google.protobuf.Duration{seconds: 1, nanos: 'x'}",
    "google.protobuf.Timestamp{?seconds: optional.of(1)}", "google.protobuf.Timestamp{?seconds: 1}",
    "google.protobuf.Timestamp{foo: 1}", "google.protobuf.Int64Value{value: 1}",
    "google.protobuf.Int64Value{value: 1} + 1", "google.protobuf.Struct{}", "google.protobuf.Value{}",
    "google.protobuf.ListValue{} + [1]", "object{}", "authorizer{}", "request{}",
    "kubernetes.AdmissionRequest{}", "kubernetes.AdmissionRequest{name: 1}", "Deployment{}",
    "net.IP{}", "kubernetes.Quantity{}", "has(object.?spec)", "[1][?'a']", "{'a': 1}[?1]",
    "true ? optional.of(1) : optional.of('a')", "true ? [] : [1]", "true ? {} : {'a': 1}",
    "[] + [1] + ['a']", "[[]] + [[1]]", "[1, [], 'a']",
    # operator positions
    "x in b", "l[0] in 1", "!i", "-s", "i ? 1 : 2", "(i + 1) * 'a'", "i  +  'a'", "((i)) == 'a'",
    "i.x.y.z", "m['a']['b']", "m.a.b", "l[0][0]", "[1][0]['a']",
]:
    add(e)

# ---- two-variable comprehensions, lists, strings, sets ------------------------------------
for e in [
    "[1, 2].all(i, v, i < v)", "{'a': 1}.exists(k, v, v > 0)", "[1].existsOne(i, v, v == 1)",
    "[1].transformList(i, v, v * 2)", "[1].transformList(i, v, v > 0, v * 2)",
    "{'a': 1}.transformMap(k, v, v + 'a')", "{'a': 1}.transformMap(k, v, v > 0, v + 1)",
    "[1].transformMapEntry(i, v, {string(i): v})", "[1].transformMapEntry(i, v, 1)",
    "1.all(i, v, true)", "[1].all(i, v, v)", "[1].all(i, i, true)", "{'a': 1}.all(k, v, k + v)",
    "[1].exists_one(i, v, true)", "{'a': 1}.transformList(k, v, k + v)",
    "lists.range(3)", "lists.range('a')", "[1, 2].slice(0, 1)", "[1].slice('a', 1)",
    "[[1], [2]].flatten()", "[[[1]]].flatten(2)", "[1].flatten()", "[1, 1].distinct()",
    "[1].reverse()", "[3, 1].sort()", "[{'a': 1}].sort()", "[{'a': 1}].sortBy(e, e.a)",
    "[1].sortBy(e, {'x': e})", "[1].first()", "[1].last().value() + 'a'", "[1].first() + 1",
    "[1].sort(1)", "['a'].sum()", "[1].isSorted()", "[1].sum() + 'a'", "[1.0].sum()",
    "[duration('1s')].sum()", "[1].min() + 'a'", "['a'].max()", "[1].indexOf(1)",
    "[1].lastIndexOf('a')", "[1].includes(1)", "[1].includes('a')", "[[1]].isSorted()",
    "'a'.charAt(0)", "'a'.indexOf('a')", "'a'.indexOf('a', 1)", "'a'.lastIndexOf('a')",
    "'a'.lowerAscii()", "'a'.upperAscii()", "'a'.replace('a', 'b')", "'a'.replace('a', 'b', 1)",
    "'a'.split(',')", "'a'.split(',', 2)", "'a'.substring(0)", "'a'.substring(0, 1)",
    "'a'.trim()", "['a'].join(',')", "['a'].join()", "[1].join(',')", "strings.quote('a')",
    "'%d'.format([1])", "'%s'.format(1)", "'%d'.format(['a'])", "'a'.reverse()",
    "'a'.charAt('x')", "'abc'.substring(1, 'x')", "'a'.format(['a'])",
    "sets.contains([1], [1])", "sets.equivalent([1], [1])", "sets.intersects([1], [1])",
    "sets.contains(1, [1])", "sets.contains([1], ['a'])", "sets.intersects([1], [1.0])",
    "math.greatest(1, 2)", "base64.encode(b'a')", "'s'.includes('t')", "1.includes(1)",
    "'%s %s'.format(['a'])", "'%q'.format([1])", "'%.2f'.format([1])", "'%x'.format([1.0])",
    "'%'.format([])", "'%e'.format(['a'])", "'%o'.format([1.5])", "'%b'.format(['a'])",
    "'%s'.format([[1], {'a': 1}])", "'%d %d'.format([1, 'a'])", "s.format(['a'])",
    "'%d'.format(l)", "'%.f'.format([1.0])", "'a'.find('a')", "'a'.findAll('a')",
    "'a'.findAll('a', 1)", "'a'.findAll('a', 'b')", "'a'.find(1)", "cel.bind(x, 1, x + 1)",
]:
    add(e)

# ---- Kubernetes libraries -------------------------------------------------------------------
for e in [
    "quantity('1Gi').isGreaterThan(quantity('1'))", "quantity('1').add(1)",
    "quantity('1').add(quantity('1')).sub(1).isInteger()", "quantity('1').mul(2)",
    "quantity('1').div(2)", "quantity('1').divInt(2)", "isQuantity('1')", "quantity('1').sign()",
    "sign(quantity('1'))", "quantity(1)", "quantity('1') < quantity('2')",
    "quantity('1') == quantity('1')", "quantity('1').compareTo(quantity('2')) + 'a'",
    "quantity('1').asApproximateFloat() + 1", "quantity('1').asInteger() + 1u",
    "quantity('1').isLessThan(1)", "quantity('1') + quantity('1')",
    "url('https://x').getHost()", "url('https://x').getQuery()['a'][0] + 1", "isURL('x')",
    "url(1)", "url('x').getScheme() + 1", "url('x').getPort()", "url('x').getEscapedPath()",
    "url('x').getHostname()", "url('x').foo()", "url('x').host",
    "ip('1.2.3.4').family()", "ip.isCanonical('1.2.3.4')", "isIP('x')", "ip(1)",
    "ip('::1').isLoopback() + 1", "ip('x').isUnspecified()", "ip('x').isGlobalUnicast()",
    "ip('x').isLinkLocalMulticast()", "ip('x').isLinkLocalUnicast()", "string(ip('1.2.3.4'))",
    "ip('1.2.3.4') == ip('1.2.3.4')", "ip('1.2.3.4') < ip('1.2.3.5')",
    "cidr('1.0.0.0/8').containsIP('1.2.3.4')", "cidr('1.0.0.0/8').containsIP(ip('1.2.3.4'))",
    "cidr('1.0.0.0/8').containsCIDR('1.0.0.0/16')", "cidr('x').masked().prefixLength() + 'a'",
    "cidr('x').ip().family()", "string(cidr('1.0.0.0/8'))", "isCIDR('x')", "cidr('x').containsIP(1)",
    "net.CIDR", "type(cidr('1.0.0.0/8')) == net.CIDR", "net.IP",
    "semver('1.0.0').major()", "semver('1.0', true)", "isSemver('1.0.0', true)",
    "semver('1.0.0').isLessThan(semver('2.0.0'))", "semver(1)", "semver('1.0.0').minor() + 'a'",
    "semver('1.0.0').compareTo('1.0.0')", "semver('1.0.0').patch() + 1",
    "semver('1.0.0') == semver('1.0.0')", "isSemver('1', 'x')",
    "format.dns1123Label().validate('a')", "format.named('dns1123Label').value().validate('x')",
    "format.bogus()", "format.named(1)", "format.dns1123Label().validate(1)",
    "format.uri().validate('x').hasValue()", "format.labelValue().validate('x').value()[0] + 1",
    "format.dns1123Subdomain()", "format.dns1035Label().validate('x')",
    "format.qualifiedName().validate('a')", "format.dns1123LabelPrefix().validate('a')",
    "format.dns1123SubdomainPrefix().validate('a')", "format.dns1035LabelPrefix().validate('a')",
    "format.uuid().validate('a')", "format.byte().validate('a')", "format.date().validate('a')",
    "format.datetime().validate('a')",
    "jsonpatch.escapeKey('a')", "image('nginx')", "authorizer",
    "authorizer.allowed()", "authorizer.group('apps').resource('deployments').check('get').allowed()",
    "authorizer.path('/x').check('get').reason()",
    "authorizer.serviceAccount('ns', 'sa').group('').resource('pods').namespace('x').name('y').subresource('z').check('get').errored()",
    "authorizer.group('').resource('pods').fieldSelector('a=b').labelSelector('x').check('list').error()",
    "authorizer.requestResource.check('get').allowed()",
    "authorizer.requestResource.subresource('x').check('get').allowed()",
    "authorizer.check('get')", "authorizer.group(1)", "authorizer.path('/x').check(1)",
    "authorizer.group('a').resource('b').check('get') + 1",
    "authorizer.group('a').resource('b').check('get').allowed() + 1",
    "authorizer.foo", "authorizer.group('a').foo", "authorizer == authorizer",
]:
    add(e)

# ---- admission variables against real schemas ----------------------------------------------
for e in [
    "object.metadata.name", "object.metadata.namespace", "object.metadata.__namespace__",
    "object.metadata.namespace == 'x'", "object.metadata.generateName + 1",
    "object.metadata.labels.foo", "object.metadata.labels['foo'] + 1",
    "object.metadata.annotations.exists(k, k.startsWith('a'))",
    "object.metadata.creationTimestamp < timestamp('2020-01-01T00:00:00Z')",
    "object.metadata.creationTimestamp + 1", "object.metadata.uid", "object.metadata.managedFields[0].fieldsV1",
    "object.metadata.ownerReferences.all(r, r.controller)", "object.metadata.deletionGracePeriodSeconds + 'a'",
    "object.spec.replicas", "object.spec.template.spec.containers[0].resources.requests",
    "object.spec.replicas > 1", "object.spec.replicas > 1.5", "object.spec.replicas > 1u",
    "object.spec.replicas == 'a'", "object.spec.replicas + 'a'", "object.replicas",
    "object.spec.foo", "object.spec == 1", "object.spec.template == object.spec",
    "object.spec.template.spec.containers.all(c, c.image.startsWith('x'))",
    "object.spec.template.spec.containers.map(c, c.name).size()",
    "object.spec.template.spec.containers.map(c, c).size() + 'a'",
    "object.spec.template.spec.containers[0].resources.limits['cpu']",
    "quantity(object.spec.template.spec.containers[0].resources.limits['cpu']).isInteger()",
    "object.spec.template.spec.containers[0].ports[0].containerPort + 'a'",
    "object.spec.template.spec.containers[0].securityContext.privileged == 1",
    "object.spec.template.spec.containers.exists(c, c.foo)",
    "object.spec.template.spec.containers.all(c, c.env.all(e, e.valueFrom.secretKeyRef.key != ''))",
    "object.spec.selector.matchLabels['app'] == 'x'",
    "object.spec.strategy.rollingUpdate.maxSurge == 1",
    "object.spec.strategy.rollingUpdate.maxSurge == 'a'",
    "object.spec.strategy.rollingUpdate.maxSurge.foo",
    "object.spec.template.metadata.labels", "object.spec.template.metadata.namespace",
    "object.status.conditions.exists(c, c.type == 'Available')",
    "object.status.conditions[0].lastTransitionTime > now",
    "has(object.spec.paused)", "has(object.spec.foo)", "has(object.metadata.namespace)",
    "object.?spec.?replicas.orValue(0) > 1", "object.?spec.?replicas.orValue('a')",
    "object.?spec.foo", "object.spec.?foo",
    "object.kind == 'Deployment'", "object.apiVersion + 1", "object.metadata + 1",
    "oldObject == null", "object == oldObject", "oldObject.spec.replicas < object.spec.replicas",
    "oldObject.spec.foo", "[object, oldObject]", "[object, 1]", "{'a': object, 'b': 1}",
    "object.spec.template.spec.containers + [1]", "object.spec.template.spec.containers[0] == 1",
    "object.spec.template.spec.containers.filter(c, c.name == 'a')[0].foo",
    "request.userInfo.username", "request.uid", "request.operation == 'CREATE'",
    "request.userInfo.groups.exists(g, g == 1)", "request.userInfo.extra['a'][0] + 1",
    "request.options.foo", "request.dryRun + 1", "request.kind.group + 1", "request.resource.resource",
    "request.requestKind.foo", "request.object", "request.name + request.namespace + 1",
    "namespaceObject.metadata.namespace", "namespaceObject.metadata.UID",
    "namespaceObject.metadata.uid", "namespaceObject.metadata.labels['a'] + 1",
    "namespaceObject.spec.finalizers[0] + 1", "namespaceObject.status.conditions[0].lastTransitionTime + 1",
    "namespaceObject.status.phase == 1", "namespaceObject.foo",
    "params.foo", "params == null", "variables.foo", "variables", "variables.a",
    "object.spec.template.spec.containers.all(c, c.name.matches('['))",
    "object.spec.template.spec.containers.all(i, c, c.name != '' && i >= 0)",
    "object.spec.template.spec.containers.transformList(i, c, c.image)[0] + 1",
    "object.metadata.labels.transformMap(k, v, v.size()).a + 'x'",
    "object.spec.template.spec.containers.sortBy(c, c.name)[0].name",
    "object.spec.template.spec.containers.map(c, c.name).distinct().size() + 'a'",
    "object.metadata.labels.all(k, v, k == v)",
]:
    add(e)

# Pod and ConfigMap objects
for e, gvk in [
    ("object.spec.containers.all(c, c.image != '')", POD),
    ("object.spec.containers[0].foo", POD),
    ("object.spec.replicas", POD),
    ("object.spec.volumes.exists(v, has(v.hostPath))", POD),
    ("object.spec.securityContext.runAsUser + 'a'", POD),
    ("object.spec.containers[0].resources.requests.cpu + 1", POD),
    ("object.data['a'] + 1", CM),
    ("object.binaryData['a'] + 'x'", CM),
    ("object.data.size() + 'a'", CM),
    ("object.immutable + 1", CM),
    ("object.spec", CM),
]:
    add(e, gvk=gvk)

# unknown kinds (no schema: upstream skips the GVK) and kinds without a root type
add("object.foo + 1", gvk="example.com/v1, Kind=Widget")
add("undeclared", gvk="example.com/v1, Kind=Widget")

# params
for e in ["params.data['a'] + 1", "params.foo", "params.data.all(k, k == 1)", "params.metadata.name + 1"]:
    add(e, paramsGvk=CM)
for e in ["params.foo.bar + 1", "params + 1", "params == null"]:
    add(e, paramsGvk="example.com/v1, Kind=Settings")
add("params.foo", paramKind={"apiVersion": "a/b/c", "kind": "Bad"})
add("params.data", paramKind={"apiVersion": "v1", "kind": "ConfigMap"})

# variables (compiled in order; errors make a variable dyn and are not reported)
V = [
    {"name": "replicas", "expression": "object.spec.replicas"},
    {"name": "names", "expression": "object.spec.template.spec.containers.map(c, c.name)"},
    {"name": "spec", "expression": "object.spec"},
    {"name": "broken", "expression": "object.spec.foo +"},
    {"name": "usesLater", "expression": "variables.later + 1"},
    {"name": "later", "expression": "'x'"},
    {"name": "opt", "expression": "object.?spec.replicas"},
    {"name": "m", "expression": "{'a': [1]}"},
    {"name": "q", "expression": "quantity('1')"},
]
for e in [
    "variables.replicas + 1", "variables.replicas + 'x'", "variables.names.all(n, n == 1)",
    "variables.names[0] + 1", "variables.spec.foo", "variables.spec == 1", "variables.broken.x",
    "variables.usesLater + 1", "variables.later + 1", "variables.opt.value()", "variables.opt + 1",
    "variables.m.a[0] + 'x'", "variables.q.isInteger()", "variables.q + 1", "variables.nope",
    "variables", "variables.replicas.foo",
]:
    add(e, variables=V)

out = sys.stdout
n = 0
for expr, vap in cases:
    n += 1
    out.write(json.dumps({"id": f"std-{n}", "env": "std", "decls": STD_DECLS,
                          "options": {"ext": K8S_EXT, "validators": True}, "expr": expr},
                         ensure_ascii=False) + "\n")
    req = {"id": f"vap-{n}", "env": "vap", "gvk": vap.get("gvk", DEPLOY), "expr": expr}
    for k in ("paramsGvk", "paramKind", "variables"):
        if k in vap:
            req[k] = vap[k]
    out.write(json.dumps(req, ensure_ascii=False) + "\n")

# a few std option variants
for expr, opts in [
    ("[1, 'a']", {"homogeneousAggregateLiterals": False}),
    ("1 < 1.0", {"crossTypeNumericComparisons": False}),
    ("optional.of(1)", {"optionalTypes": False}),
    ("object.?a", {"optionalTypes": False}),
    ("'a'.reverse()", {"ext": ["strings:3"]}),
    ("'a'.charAt(0)", {}),
    ("lists.range(1)", {"ext": ["lists:2"]}),
    ("[1].sortBy(x, x)", {"ext": ["lists:1"]}),
    ("sets.contains([1], [1])", {}),
    ("math.greatest(1, 2)", {"ext": ["math"]}),
    ("foo", {"container": "a.b"}),
    ("duration('x')", {"validators": False}),
    ("duration('x')", {"validators": True}),
]:
    n += 1
    out.write(json.dumps({"id": f"std-opt-{n}", "env": "std", "decls": STD_DECLS, "options": opts,
                          "expr": expr}, ensure_ascii=False) + "\n")
