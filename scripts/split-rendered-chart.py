#!/usr/bin/env python3
"""Splits `helm template` output into the files of manifests/ (see scripts/render-manifests).

Usage: split-rendered-chart.py MAIN.yaml MONITORING.yaml OUT_DIR

Each `# Source: vapcheck/templates/NAME.yaml` document becomes OUT_DIR/NAME.yaml (the
monitoring ones under OUT_DIR/monitoring/), and each directory gets a kustomization.yaml that
lists its files. The configuration ConfigMap is written as files/vapcheck.yaml, the input of a
configMapGenerator.
"""
import os
import re
import sys

import yaml

HEADER = "# Generated from charts/vapcheck by scripts/render-manifests; do not edit.\n"

MAIN_KUSTOMIZATION = """{header}# vapcheck: `kubectl apply -k manifests/` installs the controller into vapcheck-system.
# With the Prometheus Operator, also `kubectl apply -k manifests/monitoring/`
# (ServiceMonitor and PrometheusRule need its CRDs). See docs/operations.md.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: vapcheck-system
resources:
{resources}
# files/vapcheck.yaml is the chart's configuration file (charts/vapcheck/files/vapcheck.yaml,
# a copy of config/vapcheck.yaml); the generated name carries a content hash, so a
# configuration change rolls the Deployment.
configMapGenerator:
  - name: {configmap}
    options:
      labels:
{labels}
    files:
      - vapcheck.yaml=files/vapcheck.yaml
images:
  - name: {image_name}
    newName: {image_name}
    newTag: {image_tag}
"""

MONITORING_KUSTOMIZATION = """{header}# Needs the Prometheus Operator CRDs (monitoring.coreos.com). Apply after manifests/.
# The dashboard ConfigMap is for Grafana's dashboard sidecar (label grafana_dashboard: "1").
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: vapcheck-system
resources:
{resources}
"""


def documents(path):
    """(template file name, text) of every non-empty rendered document."""
    text = open(path, encoding="utf-8").read()
    out = []
    for chunk in re.split(r"^---\n", text, flags=re.M):
        m = re.match(r"# Source: [^/]+/templates/([^\n]+)\n", chunk)
        if not m:
            if chunk.strip():
                sys.exit(f"split-rendered-chart: a document without a Source line in {path}")
            continue
        body = chunk[m.end():]
        if yaml.safe_load(body) is None:
            continue
        out.append((m.group(1), body))
    return out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def listing(files):
    return "\n".join(f"  - {f}" for f in files)


def main():
    main_docs, monitoring_docs, out = sys.argv[1], sys.argv[2], sys.argv[3]
    resources = []
    configmap = None
    image = None
    for name, body in documents(main_docs):
        obj = yaml.safe_load(body)
        if name == "configmap.yaml":
            configmap = obj
            write(os.path.join(out, "files", "vapcheck.yaml"), obj["data"]["vapcheck.yaml"])
            continue
        if obj["kind"] == "Deployment":
            image = obj["spec"]["template"]["spec"]["containers"][0]["image"]
        write(os.path.join(out, name), HEADER + body)
        resources.append(name)
    if configmap is None or image is None:
        sys.exit("split-rendered-chart: the chart rendered no configuration ConfigMap or no Deployment")
    image_name, _, image_tag = image.rpartition(":")
    labels = "\n".join(
        f"        {k}: {v}" for k, v in sorted(configmap["metadata"]["labels"].items())
    )
    write(
        os.path.join(out, "kustomization.yaml"),
        MAIN_KUSTOMIZATION.format(
            header=HEADER,
            resources=listing(resources),
            configmap=configmap["metadata"]["name"],
            labels=labels,
            image_name=image_name,
            image_tag=image_tag,
        ),
    )
    monitoring = []
    for name, body in documents(monitoring_docs):
        write(os.path.join(out, "monitoring", name), HEADER + body)
        monitoring.append(name)
    if not monitoring:
        sys.exit("split-rendered-chart: the chart rendered no monitoring objects")
    write(
        os.path.join(out, "monitoring", "kustomization.yaml"),
        MONITORING_KUSTOMIZATION.format(header=HEADER, resources=listing(monitoring)),
    )


main()
