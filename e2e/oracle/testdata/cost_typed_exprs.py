"""Hand-written expressions for the typed cost mode: object/oldObject (and params) typed from
the published schemas, sizes from their bounds. Kinds: the fixture kinds of
tests/fixtures/cost-openapi (bounded and unbounded fields of every kind upstream sizes) and
built-in kinds of Kubernetes 1.37.1 (whose published schemas declare no bounds, so every size
is a default derived from the 3 MiB request size). Each case is the rest of a celcheck "cost"
request (gvk, expr, optional paramsGvk/variables)."""

BOUNDED = "cost.vapcheck.dev/v1, Kind=Bounded"
LIMITS = "cost.vapcheck.dev/v1, Kind=Limits"
POD = "/v1, Kind=Pod"
DEPLOYMENT = "apps/v1, Kind=Deployment"
CONFIGMAP = "/v1, Kind=ConfigMap"
SECRET = "/v1, Kind=Secret"
SERVICE = "/v1, Kind=Service"

FIELDS = ["items", "freeItems", "tags", "freeTags", "ints", "bools", "labels", "freeMap",
          "mapOfLists", "nested", "refs", "defaulted", "withDefaults", "negative", "objs",
          "bad__dash__name"]
STRINGS = ["name", "free", "mode", "numEnum", "ios", "iosFree", "d", "t", "day"]

BOUNDED_EXPRS = (
    [f"object.spec.{f}.all(x, true)" for f in FIELDS]
    + [f"size(object.spec.{f}) < 5" for f in FIELDS]
    + [f"object.spec.{s} == oldObject.spec.{s}" for s in STRINGS]
    + [f"string(object.spec.{s}).contains('x')" for s in STRINGS]
    + [
        "object.spec.name.startsWith('x')", "object.spec.free.matches('^a+$')",
        "object.spec.name.matches(object.spec.mode)", "object.spec.mode + object.spec.name",
        "object.spec.data.size() > 1", "object.spec.blob == b'abc'", "size(object.spec.blob)",
        "object.spec.data + object.spec.blob", "string(object.spec.ios).size() < 10",
        "object.spec.items.all(i, i.name.startsWith('a'))",
        "object.spec.items.exists(i, i.value.contains('a'))",
        "object.spec.freeItems.all(i, i.name.size() < 3 && i.port > 0)",
        "object.spec.items.map(i, i.name).filter(n, n.contains('x')).size() == 0",
        "object.spec.tags.all(t, object.spec.freeTags.exists(f, f == t))",
        "object.spec.labels.all(k, object.spec.labels[k].contains('x'))",
        "object.spec.labels.exists(k, k.startsWith('a'))",
        "object.spec.freeMap.all(k, object.spec.freeMap[k] == 'x')",
        "object.spec.mapOfLists.all(k, object.spec.mapOfLists[k].all(v, v == 'a'))",
        "object.spec.nested.all(l, l.all(s, s.contains('z')))",
        "object.spec.nested.map(l, l.size()).sum() < 10",
        "object.spec.refs.all(r, r.key.contains('k'))",
        "object.spec.defaulted.all(r, r.key.contains('k'))",
        "object.spec.withDefaults.all(w, w.a == w.b)",
        "object.spec.objs.all(o, o.x > 1)",
        "object.spec.tags.sort() == object.spec.tags", "object.spec.tags.join(',').size()",
        "object.spec.freeTags.join(',').size() < 100", "object.spec.tags.indexOf('a') >= 0",
        "object.spec.ints.sum() < 10", "object.spec.ints.max() < 10", "object.spec.ints.isSorted()",
        "sets.contains(object.spec.tags, ['a'])", "sets.intersects(object.spec.tags, object.spec.freeTags)",
        "object.spec.tags.slice(0, 1).size() == 1", "object.spec.freeTags.distinct().size() > 0",
        "lists.range(size(object.spec.items)).all(i, i < 3)",
        "object.spec.items.all(i, object.spec.items.exists(j, i.name == j.name))",
        "object.spec.tags.exists_one(t, t == 'a')", "object.spec.labels.size() == 4",
        "cel.bind(t, object.spec.tags, t.all(x, x == 'a') && t.size() > 1)",
        "object.spec.tags.transformList(i, v, v + string(i)).size() > 0",
        "object.spec.labels.transformMap(k, v, v + k).size() > 0",
        "object.spec.items.all(i, i, i.name == 'x')" ,
        "object.spec.tags.all(i, v, v.size() > i)",
        "object.spec.name.split('-').all(p, p.size() < 10)", "object.spec.free.lowerAscii() == 'a'",
        "object.spec.name.replace('a', 'b') == object.spec.free",
        "object.spec.name.substring(1).size() > 0", "object.spec.free.trim().size() > 0",
        "object.spec.name.format([object.spec.free]).size() > 0",
        "object.spec.free.indexOf('a') > 0", "url(object.spec.free).getHost() == 'a'",
        "isURL(object.spec.name)", "quantity(object.spec.name).isInteger()",
        "ip(object.spec.free).family() == 4", "cidr(object.spec.name).prefixLength() > 0",
        "object.spec.d > duration('1s')", "object.spec.t < timestamp('2020-01-01T00:00:00Z')",
        "object.spec.free.findAll('[a-z]+').size() > 1", "object.spec.name.find('a') == 'a'",
        "object.metadata.name.size() < 10", "object.metadata.generateName.startsWith('a')",
        "object.kind == 'Bounded'", "object.spec == oldObject.spec",
        "object.spec.tags == oldObject.spec.tags", "object.spec.items == oldObject.spec.items",
        "has(object.spec.items) && object.spec.items.all(i, has(i.value))",
        "object.spec.?items.orValue([]).all(i, i.name == 'a')",
        "object.spec.items[0].name.contains('a')", "object.spec.labels['a'].contains('x')",
        "'a' in object.spec.tags", "'a' in object.spec.labels", "'a' in object.spec.freeTags",
        "object.spec.tags + object.spec.freeTags == []",
        "object.spec.tags.map(t, t + 'x').all(t, t.size() < 20)",
        "request.object.spec.tags.all(t, t == 'a')",
        # Go slice aliasing of cel-go's paths (GoPath in crates/cel/src/cost.rs): the key variable of a
        # two-variable comprehension reads the value's path when the range path has spare
        # capacity (len 3, cap 4 here), and so do sibling selections of one local variable.
        "object.spec.labels.all(k, v, (v + k).size() > 0)",
        "object.spec.labels.all(k, v, k.contains('a'))",
        "object.spec.labels.exists(k, v, v + k == 'a')",
        "object.spec.labels.transformMap(k, v, k + 'a').size() > 0",
        "object.spec.mapOfLists.all(k, v, k.contains('a') && v.all(x, x == k))",
        "object.spec.tags.all(i, v, string(i).contains(v))",
        "object.spec.items.all(i, i.name.startsWith('a') && i.value.contains('b'))",
        "object.spec.items.all(i, i.value.contains('b') && i.name.startsWith('a'))",
        "object.metadata.name.startsWith('a') && object.metadata.generateName.contains('b')",
    ]
)

PARAMS_EXPRS = [
    "params.names.all(n, object.spec.name.contains(n))",
    "params.patterns.all(p, object.spec.free.matches(p))",
    "params.names.exists(n, object.spec.tags.exists(t, t == n))",
    "object.spec.items.size() <= params.limit",
    "params.patterns.all(p, object.spec.freeTags.all(t, t.matches(p)))",
]

BUILTIN = [
    (POD, "object.spec.containers.all(c, c.image.startsWith('registry.example/'))"),
    (POD, "object.spec.containers.all(c, c.ports.all(p, p.containerPort > 1024))"),
    (POD, "object.spec.containers.all(c, c.env.all(e, !e.name.contains('SECRET')))"),
    (POD, "object.spec.containers.all(c, c.image.matches('^[a-z./-]+:[0-9.]+$'))"),
    (POD, "object.spec.volumes.all(v, !has(v.hostPath))"),
    (POD, "object.metadata.labels.all(k, k.startsWith('app'))"),
    (POD, "object.spec.containers.map(c, c.name).size() == size(object.spec.containers)"),
    (POD, "object.spec.containers.exists(c, object.spec.initContainers.exists(i, i.name == c.name))"),
    (POD, "object.spec.nodeName == oldObject.spec.nodeName"),
    (POD, "object.metadata.labels.all(k, v, k.startsWith(v))"),
    (POD, "object.metadata.annotations.exists(k, v, v.contains(k))"),
    (DEPLOYMENT, "object.spec.template.spec.containers.all(c, c.name.startsWith('a') && c.image.contains('b'))"),
    (DEPLOYMENT, "object.spec.template.spec.containers.all(c, c.env.all(e, e.name.contains('a') && e.value.startsWith('b')))"),
    (DEPLOYMENT, "object.spec.template.metadata.labels.all(k, v, v.contains(k))"),
    (DEPLOYMENT, "object.spec.replicas <= 5"),
    (DEPLOYMENT, "object.spec.template.spec.containers.all(c, c.securityContext.runAsNonRoot)"),
    (DEPLOYMENT, "object.spec.template.metadata.annotations.all(k, object.spec.template.metadata.annotations[k].size() < 100)"),
    (CONFIGMAP, "object.data.all(k, object.data[k].size() < 1024)"),
    (CONFIGMAP, "object.binaryData.all(k, object.binaryData[k].size() < 1024)"),
    (SECRET, "object.data.all(k, size(object.data[k]) > 0)"),
    (SECRET, "object.stringData.exists(k, k.contains('pass'))"),
    (SERVICE, "object.spec.ports.all(p, p.port != 22)"),
    (SERVICE, "object.spec.ports.all(p, string(p.targetPort).contains('http'))"),
    (SERVICE, "object.spec.externalIPs.all(ip, !ip.startsWith('10.'))"),
]

CASES = (
    [{"gvk": BOUNDED, "expr": e} for e in BOUNDED_EXPRS]
    + [{"gvk": BOUNDED, "paramsGvk": LIMITS, "expr": e} for e in PARAMS_EXPRS]
    + [{"gvk": g, "expr": e} for g, e in BUILTIN]
    + [
        # variables: their sizes are unknown (only object/oldObject/params are sized)
        {"gvk": BOUNDED, "expr": "variables.t.all(x, x == 'a')",
         "variables": [{"name": "t", "expression": "object.spec.tags"}]},
        # params typed from a kind without a schema: dyn
        {"gvk": POD, "paramsGvk": "nope.example/v1, Kind=Nope", "expr": "params.a.all(x, x == 1)"},
        # object kind with no schema: no estimate (schemaFound false)
        {"gvk": "nope.example/v1, Kind=Nope", "expr": "object.a"},
        # does not compile
        {"gvk": BOUNDED, "expr": "object.spec.nope"},
    ]
)
