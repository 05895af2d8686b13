#!/usr/bin/env python3
"""Runs every ValidatingAdmissionPolicy of the shared corpus through `celcheck` (env "policy")
and writes two golden files:

  <per-gvk out>:  one line per policy + fieldRef + checked GVK with the exact (normalised) warning
  <status out>:   one line per policy with the GVKs checked and the whole status.typeChecking

usage: corpus.py <celcheck binary> <corpus dir> <per-gvk out> <status out>
"""
import json
import os
import re
import subprocess
import sys

import yaml

celcheck, corpus, per_gvk_path, status_path = sys.argv[1:5]

DOC_SPLIT = re.compile(r"^---[^\n]*$", re.M)


def policies():
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
                if not isinstance(doc, dict):
                    continue
                if doc.get("kind") != "ValidatingAdmissionPolicy":
                    continue
                if not str(doc.get("apiVersion", "")).startswith("admissionregistration.k8s.io/"):
                    continue
                yield f"{rel}#{idx}", doc.get("apiVersion"), (doc.get("metadata") or {}).get("name", ""), chunk


proc = subprocess.Popen([celcheck], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
n_pol = n_lines = n_warn = n_err = 0
with open(per_gvk_path, "w", encoding="utf-8") as per_gvk, open(status_path, "w", encoding="utf-8") as status:
    for pid, api_version, name, chunk in policies():
        proc.stdin.write(json.dumps({"id": pid, "env": "policy", "policy": chunk}) + "\n")
        proc.stdin.flush()
        resp = json.loads(proc.stdout.readline())
        n_pol += 1
        line = {"policy": pid, "apiVersion": api_version, "name": name}
        if "error" in resp:
            n_err += 1
            line["error"] = resp["error"]
            status.write(json.dumps(line, ensure_ascii=False) + "\n")
            continue
        line.update({"gvks": resp["gvks"], "paramsGvk": resp["paramsGvk"], "typeChecking": resp["typeChecking"]})
        status.write(json.dumps(line, ensure_ascii=False) + "\n")
        for r in resp["perGvk"]:
            out = {"policy": pid, "name": name, "fieldRef": r["fieldRef"], "gvk": r["gvk"],
                   "expression": r["expression"], "objectDyn": r.get("objectDyn", False), "warning": r["warning"]}
            per_gvk.write(json.dumps(out, ensure_ascii=False) + "\n")
            n_lines += 1
            n_warn += 1 if r["warning"] else 0
proc.stdin.close()
if proc.wait() != 0:
    sys.exit(f"corpus: {celcheck} exited with status {proc.returncode}")
print(f"corpus: {n_pol} policies ({n_err} unparseable by the oracle), {n_lines} per-GVK lines, {n_warn} with a warning", file=sys.stderr)
