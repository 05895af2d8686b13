#!/usr/bin/env python3
"""Cross-checks the `vap` and `policy` entries of tests/golden/upstream-exprs-1.37.jsonl against a
real kube-controller-manager: each `vap` case becomes a one-validation policy whose rule matches
the case's kind (CRDs are installed first), and the status warning is compared with the golden
`warning` (random digits of root type names removed). Policies the API server refuses to create
(non-bool expressions, syntax errors, undeclared references...) are written straight into etcd
with `etcdput` when an etcd endpoint is given, since the status controller checks whatever is
stored; otherwise they are counted as rejected.

usage: kcm_crosscheck_exprs.py <kubeconfig> <golden exprs file> [<etcd endpoint> <etcdput binary>]
"""
import json
import re
import subprocess
import sys
import time

kubeconfig, golden_path = sys.argv[1:3]
etcd_endpoint, etcdput = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
etcd_records = []

RESOURCES = {
    "apps/v1, Kind=Deployment": ("apps", "v1", "deployments"),
    "/v1, Kind=Pod": ("", "v1", "pods"),
    "/v1, Kind=ConfigMap": ("", "v1", "configmaps"),
    "example.com/v1, Kind=Widget": ("example.com", "v1", "widgets"),
}


def kubectl(*args, stdin=None):
    return subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], input=stdin,
                          capture_output=True, text=True)


def normalise(text, kinds):
    out = []
    for ln in text.split("\n"):
        if not ln.startswith(" | "):
            for k in kinds:
                ln = re.sub(r"(?<![A-Za-z0-9_.])" + re.escape(k) + r"[0-9]+", k, ln)
        out.append(ln)
    return "\n".join(out)


def param_kind(gvk):
    gv, kind = gvk.split(", Kind=")
    return {"apiVersion": gv.lstrip("/"), "kind": kind}


cases = [json.loads(l) for l in open(golden_path, encoding="utf-8")]
crds = {}
for c in cases:
    for crd in c["input"].get("crds", []):
        crds[crd["metadata"]["name"]] = crd
for crd in crds.values():
    r = kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    if r.returncode != 0:
        sys.exit(f"cannot install CRD: {r.stderr}")
if crds:
    time.sleep(5)  # let discovery and /openapi/v3 publish the CRDs

created = {}
rejected = skipped = 0
for i, c in enumerate(cases):
    inp, out = c["input"], c["output"]
    if "error" in out:
        continue
    name = f"oracle-x{i}"
    if inp["env"] == "vap":
        gvk = inp["gvk"] if isinstance(inp["gvk"], str) else None
        if gvk not in RESOURCES or not out.get("schemaFound"):
            skipped += 1
            continue
        g, v, res = RESOURCES[gvk]
        spec = {"matchConstraints": {"resourceRules": [{"apiGroups": [g], "apiVersions": [v], "resources": [res],
                                                        "operations": ["CREATE"]}]},
                "validations": [{"expression": inp["expr"]}]}
        if "variables" in inp:
            spec["variables"] = inp["variables"]
        if "paramsGvk" in inp:
            spec["paramKind"] = param_kind(inp["paramsGvk"])
        if "paramKind" in inp:
            spec["paramKind"] = inp["paramKind"]
        want = [{"fieldRef": "spec.validations[0].expression", "warning": out["warning"]}] if out["warning"] else []
        kinds = [gvk.split("Kind=")[-1]] + ([spec["paramKind"]["kind"]] if "paramKind" in spec else [])
    elif inp["env"] == "policy":
        spec = inp["policy"]["spec"]
        want = out["typeChecking"].get("expressionWarnings") or []
        kinds = [x.split("Kind=")[-1] for x in out["gvks"]]
    else:
        continue
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec}
    r = kubectl("create", "-f", "-", stdin=json.dumps(obj))
    if r.returncode != 0:
        rejected += 1
        if not etcd_endpoint:
            continue
        obj["metadata"].update({"uid": f"00000000-0000-0000-0000-{i:012d}", "generation": 1,
                                "creationTimestamp": "2026-01-01T00:00:00Z"})
        etcd_records.append(json.dumps({"key": f"/registry/validatingadmissionpolicies/{name}", "value": obj}))
    created[name] = (inp.get("id", name), want, kinds)

if etcd_records:
    r = subprocess.run([etcdput, "-endpoint", etcd_endpoint], input="\n".join(etcd_records) + "\n",
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"etcdput failed: {r.stderr}")

deadline = time.time() + 300
results = {}
while len(results) < len(created) and time.time() < deadline:
    time.sleep(3)
    r = kubectl("get", "validatingadmissionpolicies.v1.admissionregistration.k8s.io", "-o", "json")
    if r.returncode != 0:
        continue
    for item in json.loads(r.stdout)["items"]:
        st = item.get("status") or {}
        if item["metadata"]["name"] in created and st.get("observedGeneration", 0) >= item["metadata"].get("generation", 1):
            results[item["metadata"]["name"]] = st

same = diff = 0
for name, (cid, want, kinds) in created.items():
    st = results.get(name)
    if st is None:
        diff += 1
        print(f"NO STATUS {cid}")
        continue
    got = [{"fieldRef": w["fieldRef"], "warning": normalise(w["warning"], kinds)}
           for w in (st.get("typeChecking") or {}).get("expressionWarnings") or []]
    if got == want:
        same += 1
    else:
        diff += 1
        print(f"DIFF {cid}\n  kcm:    {json.dumps(got)[:600]}\n  oracle: {json.dumps(want)[:600]}")
print(f"{len(created)} checked ({rejected} refused by the API server{', written to etcd' if etcd_endpoint else ''}, "
      f"{skipped} not applicable), "
      f"{same} passed, {diff} failed")
sys.exit(1 if diff or not created else 0)
