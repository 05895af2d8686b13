#!/usr/bin/env python3
"""Asks `celcheck` (env "cost" with a gvk: object/oldObject/params typed from the published
OpenAPI v3 documents, sizes from their bounds) for cel-go's static cost estimate of
  * every hand-written case of cost_typed_exprs.py, and
  * every expression of every ValidatingAdmissionPolicy of the shared corpus, once per kind the
    policy matches: the GVKs and params GVK the real TypeChecker resolves (celcheck env
    "policy", GA discovery of Kubernetes 1.37.1), with the policy's variables,
and writes one golden line per (expression, kind): {"input": <request>, "output": <response>}.
celcheck must run with -openapi-extra tests/fixtures/cost-openapi (the golden script does).

usage: cost_typed.py <celcheck binary> <corpus dir> <out> <fixture openapi dir>
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cost import policies, policy_requests  # noqa: E402
from cost_typed_exprs import CASES  # noqa: E402

celcheck, corpus, out_path, extra = sys.argv[1:5]
proc = subprocess.Popen([celcheck, "-echo", "-openapi-extra", extra], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True, encoding="utf-8")


def ask(r):
    proc.stdin.write(json.dumps(r, ensure_ascii=False) + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def requests():
    for i, case in enumerate(CASES):
        yield dict({"id": f"typed#{i}", "env": "cost"}, **case)
    for pid, doc in policies(corpus):
        resolved = ask({"id": pid, "env": "policy", "policy": json.dumps(doc)})["output"]
        if "error" in resolved:
            sys.exit(f"cost_typed: {pid}: {resolved['error']}")
        for r in policy_requests(pid, doc):
            r.pop("paramKind", None)
            if resolved.get("paramsGvk"):
                r["paramsGvk"] = resolved["paramsGvk"]
            for gvk in resolved["gvks"]:
                yield dict(r, id=f"{r['id']} {gvk}", gvk=gvk)


n = n_issues = n_missing = 0
lines = []
for r in requests():
    resp = ask(r)
    if "error" in resp["output"]:
        sys.exit(f"cost_typed: {r['id']}: {resp['output']['error']}")
    n += 1
    n_issues += 1 if "issues" in resp["output"] else 0
    n_missing += 0 if resp["output"].get("schemaFound") else 1
    lines.append(json.dumps(resp, ensure_ascii=False))
proc.stdin.close()
if proc.wait() != 0:
    sys.exit(f"cost_typed: {celcheck} exited with status {proc.returncode}")
with open(out_path, "w", encoding="utf-8") as out:
    out.write("\n".join(lines) + "\n")
print(f"cost_typed: {n} expressions ({n_issues} do not compile, {n_missing} kinds without a schema)",
      file=sys.stderr)
