#!/usr/bin/env python3
"""Asks `celcheck` (env "cost") for cel-go's static cost estimate of
  * every hand-written expression of cost_exprs.py, and
  * every expression of every ValidatingAdmissionPolicy of the shared corpus (validations'
    expression and messageExpression, auditAnnotations' valueExpression, matchConditions,
    variables), with the policy's variables and paramKind, and
  * every distinct expression of the CEL conformance suite (cel-spec tests/simple/testdata,
    conformance.py) as the expression of a policy without params or variables: in the admission
    policy environment, without the test's own `type_env` declarations and `container` (a
    policy cannot declare variables or functions of its own); those expressions that need them
    do not compile, for cel-go and for vapcheck alike (docs/cost.md),
and writes one golden line per expression: {"input": <request>, "output": <response>}.
On standard error it prints the counts, and for the conformance expressions the counts of
those that do not compile by reason.

usage: cost.py <celcheck binary> <corpus dir> <out> <cel-spec testdata dir>
"""
import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conformance import tests as conformance_tests  # noqa: E402
from cost_exprs import CASES  # noqa: E402

DOC_SPLIT = re.compile(r"^---[^\n]*$", re.M)


def policies(corpus):
    for root, dirs, files in os.walk(corpus):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith((".yaml", ".yml", ".json")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, corpus)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            chunks = [text] if f.endswith(".json") else DOC_SPLIT.split(text)
            for idx, chunk in enumerate(chunks):
                try:
                    doc = yaml.safe_load(chunk)
                except yaml.YAMLError:
                    continue
                if not isinstance(doc, dict) or doc.get("kind") != "ValidatingAdmissionPolicy":
                    continue
                if not str(doc.get("apiVersion", "")).startswith("admissionregistration.k8s.io/"):
                    continue
                yield f"{rel}#{idx}", doc


def items(spec, key):
    v = spec.get(key)
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def policy_requests(pid, doc):
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        return
    variables = [{"name": str(v.get("name", "")), "expression": str(v.get("expression", ""))}
                 for v in items(spec, "variables")]
    base = {"env": "cost"}
    pk = spec.get("paramKind")
    if isinstance(pk, dict):
        base["paramKind"] = {"apiVersion": str(pk.get("apiVersion", "")), "kind": str(pk.get("kind", ""))}

    def req(field_ref, expr, nvars):
        r = dict(base, id=f"{pid} {field_ref}", expr=expr)
        if nvars:
            r["variables"] = variables[:nvars]
        return r

    for i, v in enumerate(variables):
        yield req(f"spec.variables[{i}].expression", v["expression"], i)
    for i, m in enumerate(items(spec, "matchConditions")):
        if isinstance(m.get("expression"), str):
            yield req(f"spec.matchConditions[{i}].expression", m["expression"], len(variables))
    for i, v in enumerate(items(spec, "validations")):
        for key in ("expression", "messageExpression"):
            if isinstance(v.get(key), str):
                yield req(f"spec.validations[{i}].{key}", v[key], len(variables))
    for i, a in enumerate(items(spec, "auditAnnotations")):
        if isinstance(a.get("valueExpression"), str):
            yield req(f"spec.auditAnnotations[{i}].valueExpression", a["valueExpression"], len(variables))


def conformance_requests(testdata):
    """(request, test) per distinct conformance expression; the first test that has it names
    it."""
    seen = set()
    for t in conformance_tests(testdata):
        if t["expr"] in seen:
            continue
        seen.add(t["expr"])
        yield {"id": f"cel-spec {t['file']}/{t['section']}/{t['name']}", "env": "cost", "expr": t["expr"]}, t


# Names of the conformance suite's protobuf messages and enums (cel.expr.conformance.proto2/3,
# google.protobuf wrappers and structs): a policy environment declares only the well-known ones
# cel-go's standard environment has.
PROTO_NAMES = re.compile(r"TestAllTypes|TestRequired|GlobalEnum|NestedEnum|google\.protobuf\.|"
                         r"cel\.expr\.conformance")

# Why cel-go's checker rejects a conformance expression in the policy environment, from its
# first issue (the tests without declarations or protobuf names).
ISSUE_CLASSES = [
    (re.compile(r"undeclared reference"),
     "undeclared function or identifier (libraries the Kubernetes environment does not have: "
     "ext.Math, ext.Encoders, cel.bind, cel.block; or names the test expects to be undeclared)"),
    (re.compile(r"expected type|found no matching overload|does not support field selection"),
     "type error (mixed-type aggregate literals, which the Kubernetes environment rejects "
     "(cel.HomogeneousAggregateLiterals), or operands the test only evaluates unchecked)"),
    (re.compile(r"formatting clause|error during formatting|index \d+ out of range"),
     "string.format arguments rejected at check time"),
    (re.compile(r"invalid (duration|timestamp) argument"),
     "invalid duration/timestamp literal rejected at check time"),
    (re.compile(r"not an identifier|must be a simple name"),
     "macro argument is not a simple name"),
]


def not_compiling_reason(test, issues):
    if test["decls"]:
        return "declares its own variables/functions (type_env)"
    if test["container"] or PROTO_NAMES.search(test["expr"]):
        return "needs protobuf message types (its container or message names)"
    for pattern, reason in ISSUE_CLASSES:
        if pattern.search(issues.split("\n")[0]):
            return reason
    return "other: " + issues.split("\n")[0]


def requests(corpus, testdata):
    """(request, conformance test or None) pairs."""
    for i, case in enumerate(CASES):
        yield dict({"id": f"exprs#{i}", "env": "cost"}, **case), None
    for pid, doc in policies(corpus):
        for r in policy_requests(pid, doc):
            yield r, None
    yield from conformance_requests(testdata)


def main():
    celcheck, corpus, out_path, testdata = sys.argv[1:5]
    proc = subprocess.Popen([celcheck, "-echo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
    n = n_issues = n_conformance = 0
    not_compiling = {}  # conformance expressions that do not compile, by reason
    with open(out_path, "w", encoding="utf-8") as out:
        for r, test in requests(corpus, testdata):
            proc.stdin.write(json.dumps(r, ensure_ascii=False) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            resp = json.loads(line)
            if "error" in resp["output"]:
                sys.exit(f"cost: {r['id']}: {resp['output']['error']}")
            n += 1
            n_issues += 1 if "issues" in resp["output"] else 0
            if test is not None:
                n_conformance += 1
                if "issues" in resp["output"]:
                    reason = not_compiling_reason(test, resp["output"]["issues"])
                    not_compiling[reason] = not_compiling.get(reason, 0) + 1
            out.write(json.dumps(resp, ensure_ascii=False) + "\n")
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit(f"cost: {celcheck} exited with status {proc.returncode}")
    print(f"cost: {n} expressions ({n_issues} do not compile); cel-spec conformance: "
          f"{n_conformance} distinct expressions, {n_conformance - sum(not_compiling.values())} compile "
          "in the policy environment", file=sys.stderr)
    for reason, count in sorted(not_compiling.items(), key=lambda x: (-x[1], x[0])):
        print(f"cost: cel-spec: {count} do not compile: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
