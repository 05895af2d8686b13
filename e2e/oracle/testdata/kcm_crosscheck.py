#!/usr/bin/env python3
"""Cross-checks the corpus golden status file against a real kube-controller-manager.

Creates every corpus policy (renamed `oracle-<n>`, apiVersion forced to
admissionregistration.k8s.io/v1) in the cluster of <kubeconfig>, waits for the status controller
to set status.observedGeneration, and compares status.typeChecking (random digits of root type
names removed the same way as the oracle) with tests/golden/upstream-corpus-status-1.37.jsonl.

usage: kcm_crosscheck.py <kubeconfig> <corpus dir> <golden status file>
"""
import json
import os
import re
import subprocess
import sys
import time

import yaml

kubeconfig, corpus, golden_path = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(__file__))

DOC_SPLIT = re.compile(r"^---[^\n]*$", re.M)


def kubectl(*args, stdin=None):
    return subprocess.run(["kubectl", "--kubeconfig", kubeconfig, *args], input=stdin,
                          capture_output=True, text=True)


golden = {}
for line in open(golden_path, encoding="utf-8"):
    d = json.loads(line)
    golden[d["policy"]] = d


def normalise(text, kinds):
    out = []
    for ln in text.split("\n"):
        if not ln.startswith(" | "):
            for k in kinds:
                ln = re.sub(r"(?<![A-Za-z0-9_.])" + re.escape(k) + r"[0-9]+", k, ln)
        out.append(ln)
    return "\n".join(out)


created = {}
n = 0
for root, dirs, files in os.walk(corpus):
    dirs.sort()
    for f in sorted(files):
        if not f.endswith((".yaml", ".yml", ".json")):
            continue
        path = os.path.join(root, f)
        rel = os.path.relpath(path, corpus)
        text = open(path, encoding="utf-8").read()
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
            pid = f"{rel}#{idx}"
            n += 1
            name = f"oracle-{n}"
            obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                   "metadata": {"name": name}, "spec": doc.get("spec") or {}}
            r = kubectl("create", "-f", "-", stdin=json.dumps(obj, default=str))
            if r.returncode != 0:
                print(f"REJECTED {pid}: {r.stderr.strip()[:200]}")
                continue
            created[name] = pid

deadline = time.time() + 300
pending = dict(created)
results = {}
while pending and time.time() < deadline:
    time.sleep(3)
    r = kubectl("get", "validatingadmissionpolicies.v1.admissionregistration.k8s.io", "-o", "json")
    if r.returncode != 0:
        continue
    for item in json.loads(r.stdout)["items"]:
        name = item["metadata"]["name"]
        st = item.get("status") or {}
        if name in pending and st.get("observedGeneration", 0) >= item["metadata"].get("generation", 1):
            results[name] = st
            del pending[name]

same = diff = 0
for name, pid in created.items():
    if name not in results:
        print(f"NO STATUS {pid}")
        diff += 1
        continue
    g = golden.get(pid)
    if g is None or "error" in g:
        print(f"NO GOLDEN {pid}")
        diff += 1
        continue
    kinds = [x.split("Kind=")[-1] for x in g["gvks"]] + ([g["paramsGvk"].split("Kind=")[-1]] if g["paramsGvk"] else [])
    real = results[name].get("typeChecking") or {}
    real_w = [{"fieldRef": w["fieldRef"], "warning": normalise(w["warning"], kinds)} for w in real.get("expressionWarnings") or []]
    want_w = (g.get("typeChecking") or {}).get("expressionWarnings") or []
    if real_w == want_w:
        same += 1
    else:
        diff += 1
        print(f"DIFF {pid}\n  kcm:    {json.dumps(real_w)[:800]}\n  oracle: {json.dumps(want_w)[:800]}")
print(f"{len(created)} created, {same} passed, {diff} failed")
sys.exit(1 if diff or not created else 0)
