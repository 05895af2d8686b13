#!/usr/bin/env python3
"""Asks `celcheck` (env "cost") for cel-go's static cost estimate of
  * every hand-written expression of cost_exprs.py, and
  * every expression of every ValidatingAdmissionPolicy of the shared corpus (validations'
    expression and messageExpression, auditAnnotations' valueExpression, matchConditions,
    variables), with the policy's variables and paramKind,
and writes one golden line per expression: {"input": <request>, "output": <response>}.

usage: cost.py <celcheck binary> <corpus dir> <out>
"""
import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def requests(corpus):
    for i, case in enumerate(CASES):
        yield dict({"id": f"exprs#{i}", "env": "cost"}, **case)
    for pid, doc in policies(corpus):
        yield from policy_requests(pid, doc)


def main():
    celcheck, corpus, out_path = sys.argv[1:4]
    proc = subprocess.Popen([celcheck, "-echo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
    n = n_issues = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for r in requests(corpus):
            proc.stdin.write(json.dumps(r, ensure_ascii=False) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            resp = json.loads(line)
            if "error" in resp["output"]:
                sys.exit(f"cost: {r['id']}: {resp['output']['error']}")
            n += 1
            n_issues += 1 if "issues" in resp["output"] else 0
            out.write(json.dumps(resp, ensure_ascii=False) + "\n")
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit(f"cost: {celcheck} exited with status {proc.returncode}")
    print(f"cost: {n} expressions ({n_issues} do not compile)", file=sys.stderr)


if __name__ == "__main__":
    main()
