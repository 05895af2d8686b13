#!/usr/bin/env python3
"""Writes celcheck requests that check expressions against a hand-written CRD (schema → CEL type
conversion corner cases: int-or-string, preserve-unknown-fields, embedded resources, reserved
and escaped property names, additionalProperties, nullable, formats, empty objects)."""
import json
import sys

WIDGET = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "replicas": {"type": "integer"},
                            "ratio": {"type": "number"},
                            "enabled": {"type": "boolean", "nullable": True},
                            "name": {"type": "string", "maxLength": 10},
                            "port": {"x-kubernetes-int-or-string": True},
                            "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "rawWithProps": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                             "properties": {"known": {"type": "string"}}},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "nested": {"type": "object", "additionalProperties": {
                                "type": "object", "properties": {"x": {"type": "integer"}}}},
                            "items": {"type": "array", "items": {"type": "object", "properties": {
                                "key": {"type": "string"}, "value": {"type": "integer"}}}},
                            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                            "empty": {"type": "object"},
                            "namespace": {"type": "string"},
                            "if": {"type": "string"},
                            "dash-name": {"type": "string"},
                            "dot.name": {"type": "string"},
                            "slash/name": {"type": "string"},
                            "under__score": {"type": "string"},
                            "1digit": {"type": "string"},
                            "sp ace": {"type": "string"},
                            "when": {"type": "string", "format": "date-time"},
                            "day": {"type": "string", "format": "date"},
                            "timeout": {"type": "string", "format": "duration"},
                            "blob": {"type": "string", "format": "byte"},
                            "quantity": {"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+$"},
                            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                                         "x-kubernetes-preserve-unknown-fields": True},
                            "embeddedTyped": {"type": "object", "x-kubernetes-embedded-resource": True,
                                              "properties": {"spec": {"type": "object", "properties": {
                                                  "a": {"type": "string"}}}}},
                            "enum": {"type": "string", "enum": ["a", "b"]},
                            "listOfLists": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                            "mapOfLists": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
                        },
                    },
                    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                },
            }},
        }],
    },
}

GVK = "example.com/v1, Kind=Widget"
EXPRS = [
    "object.spec.replicas + 1", "object.spec.replicas + 'a'", "object.spec.ratio > 1", "object.spec.ratio + 1",
    "object.spec.enabled == null", "object.spec.enabled && true", "object.spec.name.size() < 3",
    "object.spec.port == 80", "object.spec.port == 'http'", "object.spec.port.foo", "object.spec.port + 1",
    "object.spec.raw.anything", "object.spec.raw == 1", "object.spec.rawWithProps.known + 1",
    "object.spec.rawWithProps.unknown", "object.spec.labels.a + 1", "object.spec.labels['a'] == 'b'",
    "object.spec.nested.a.x + 'a'", "object.spec.nested.a.y", "object.spec.items[0].key + 1",
    "object.spec.items.all(i, i.value > 0)", "object.spec.items.exists(i, i.foo)",
    "object.spec.set[0] + 1", "object.spec.empty.x", "object.spec.empty == 1", "object.spec.namespace",
    "object.spec.__namespace__", "object.spec.if", "object.spec.__if__", "object.spec.dash__dash__name + 1",
    "object.spec.dot__dot__name + 1", "object.spec.slash__slash__name + 1",
    "object.spec.under__underscores__score + 1", "object.spec.under__score", "object.spec.sp__ace",
    "object.spec.when + 1", "object.spec.when < timestamp('2020-01-01T00:00:00Z')", "object.spec.day + 1",
    "object.spec.timeout + 1", "object.spec.timeout > duration('1s')", "object.spec.blob + 'a'",
    "object.spec.quantity + 1", "object.spec.embedded.kind + 1", "object.spec.embedded.metadata.name + 1",
    "object.spec.embedded.metadata.labels", "object.spec.embedded.spec", "object.spec.embeddedTyped.spec.a + 1",
    "object.spec.embeddedTyped.apiVersion", "object.spec.embeddedTyped.metadata.namespace",
    "object.spec.enum + 1", "object.spec.listOfLists[0][0] + 'a'", "object.spec.mapOfLists.a[0] + 1",
    "object.status.phase + 1", "object.status.foo", "object.metadata.name + 1", "object.metadata.labels",
    "object.metadata.namespace", "object.metadata.uid", "object.kind + 1", "object.apiVersion",
    "object.foo", "object.spec == 1", "object.spec.items[0] == 1", "object.spec.nested.a == 1",
    "has(object.spec.raw.x)", "has(object.spec.port)", "object.spec.?port.orValue(1)",
]

out = sys.stdout
n = 0
for e in EXPRS:
    n += 1
    out.write(json.dumps({"id": f"crd-{n}", "env": "vap", "gvk": GVK, "crds": [WIDGET], "expr": e},
                         ensure_ascii=False) + "\n")
# the same CRD as params of a Deployment policy
for e in ["params.spec.replicas + 'a'", "params.spec.port == 1", "params.spec.foo"]:
    n += 1
    out.write(json.dumps({"id": f"crd-{n}", "env": "vap", "gvk": "apps/v1, Kind=Deployment",
                          "paramsGvk": GVK, "crds": [WIDGET], "expr": e}, ensure_ascii=False) + "\n")
# a policy matching the CRD by plural, singular and short name, plus a built-in
policy = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "widgets"},
    "spec": {"matchConstraints": {"resourceRules": [
        {"apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets", "widget", "wd"],
         "operations": ["CREATE"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["widgets", "configmaps"], "operations": ["CREATE"]}]},
        "validations": [{"expression": "object.spec.replicas > 1", "messageExpression": "object.spec.name + 1"}]},
}
n += 1
out.write(json.dumps({"id": f"crd-{n}", "env": "policy", "crds": [WIDGET], "policy": policy}) + "\n")
