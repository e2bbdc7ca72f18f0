#!/usr/bin/env bash
# Every test of the kit, in the order a failure is cheapest to find: unit,
# static (lint, syntax), inventory validation, Terraform (offline), Molecule
# scenarios, the lab cycle. Ends with one plain summary line: "tests: N passed, N failed, N skipped".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p build
results=build/test-results.xml

"$root/.venv/bin/pytest" -p no:cacheprovider -rfE --junitxml="$results" \
    tests/unit tests/streamproxy tests/transferd tests/static tests/inventory tests/network tests/measurement tests/terraform tests/molecule tests/lab "$@"
rc=$?

"$root/.venv/bin/python" - "$results" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("tests: 0 passed, 1 failed")
    sys.exit(0)
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print("tests: %d passed, %d failed, %d skipped" % (total - failed - skipped, failed, skipped))
PY
exit $rc
