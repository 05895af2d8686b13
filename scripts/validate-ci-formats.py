"""Validates vapcheck's CI outputs with registry validators (installed by scripts/ci-validators).

usage: validate.py sarif FILE   -- JSON-schema validation against the official SARIF 2.1.0 schema
       validate.py junit FILE   -- parse with junitparser; prints suites, cases and failures
Exit 0 and a summary line when valid, 1 and the errors otherwise.
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "python"))


def sarif(path):
    import jsonschema

    schema_path = os.path.join(
        here, "npm", "node_modules", "@microsoft", "sarif-multitool-linux", "sarif-2.1.0.json"
    )
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    with open(path, encoding="utf-8") as f:
        log = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    for e in errors:
        print("sarif: %s: %s" % ("/".join(map(str, e.path)), e.message))
    if errors:
        return 1
    results = sum(len(r.get("results", [])) for r in log["runs"])
    print("sarif: valid against SARIF 2.1.0 (%d results)" % results)
    return 0


def junit(path):
    from junitparser import JUnitXml

    xml = JUnitXml.fromfile(path)
    suites = cases = failures = 0
    for suite in xml:
        suites += 1
        for case in suite:
            cases += 1
            failures += sum(1 for r in case.result if r._tag == "failure")
    print("junit: %d suites, %d cases, %d failures" % (suites, cases, failures))
    return 0


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    sys.exit({"sarif": sarif, "junit": junit}[kind](path))
