#!/usr/bin/env python3
"""Prints charts/vapcheck/values.schema.json (scripts/render-manifests writes and checks it).

Helm validates the values against it on install, upgrade, template and lint: unknown keys are
refused, and `config` is checked with the controller's own configuration schema
(config/vapcheck.schema.json, generated from src/config.rs), so a misspelt configuration key
fails at `helm install` instead of at the pod's start-up.
"""
import json
import sys

config = json.load(open(sys.argv[1], encoding="utf-8"))
defs = config.pop("$defs", {})
config.pop("$schema", None)
config.pop("title", None)
# The chart merges `config` over the defaults: every key stays optional.
config.pop("required", None)
config["description"] = (
    "Keys of the controller's configuration file (config/vapcheck.yaml) that replace the "
    "defaults; an empty map ships the default file unchanged."
)

string_map = {"type": "object", "additionalProperties": {"type": "string"}}
toggle = lambda extra: {
    "type": "object",
    "additionalProperties": False,
    "properties": {"enabled": {"type": "boolean"}, **extra},
}
schema = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Values of the vapcheck chart",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "nameOverride": {"type": "string"},
        "fullnameOverride": {"type": "string"},
        "namespace": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"create": {"type": "boolean"}},
        },
        "image": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "repository": {"type": "string", "minLength": 1},
                "tag": {"type": "string"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            },
        },
        "imagePullSecrets": {"type": "array", "items": {"type": "object"}},
        "replicaCount": {"type": "integer", "minimum": 1},
        "resources": {"type": "object"},
        "podDisruptionBudget": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"minAvailable": {"type": ["integer", "string"]}},
        },
        "nodeSelector": string_map,
        "tolerations": {"type": "array", "items": {"type": "object"}},
        "podAnnotations": string_map,
        "config": config,
        "rbac": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "paramKinds": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["apiGroups", "resources"],
                        "properties": {
                            "apiGroups": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                            "resources": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                        },
                    },
                }
            },
        },
        "service": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
        },
        "monitoring": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "runbookBaseURL": {"type": "string", "minLength": 1},
                "serviceMonitor": toggle(
                    {"interval": {"type": "string"}, "scrapeTimeout": {"type": "string"}, "labels": string_map}
                ),
                "prometheusRule": toggle({"labels": string_map}),
                "dashboard": toggle({"labels": string_map}),
            },
        },
    },
    "$defs": defs,
}
json.dump(schema, sys.stdout, indent=2)
sys.stdout.write("\n")
