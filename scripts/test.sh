#!/usr/bin/env bash
# Set up everything, then run the test suite: lint, types, unit, integration (real processes).
# Extra arguments go to pytest.  SPLITBRAIN_SOAK=1 runs the long forms of soak tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
echo "== ruff"
"$PY" -m ruff check .
echo "== mypy"
"$PY" -m mypy eventloop system_under_test checker harness nemesis workloads spark_analysis systems
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  # Build the node image here, not inside the first e2e test: a first build on a fresh, busy machine can take
  # longer than one test's time limit.  A failure is reported again (with its reason) by the e2e tests.
  echo "== docker images"
  "$PY" -m harness.cli images build || echo "images: build failed; the e2e tests will report why"
fi
echo "== pytest"
# Two test processes (pytest-xdist), a file at a time each: most of the suite's wall time is real clusters
# waiting out their time limits, so two files at once nearly halve it.  Every test creates its own
# namespaces, subnets, ports and containers (a test asserts only on what it created), so they do not
# collide.  SPLITBRAIN_TEST_WORKERS=0 runs everything in this process.
WORKERS=${SPLITBRAIN_TEST_WORKERS:-2}
if [ "$WORKERS" = "0" ]; then
  exec "$PY" -m pytest -q -p no:cacheprovider --timeout=600 "$@"
fi
exec "$PY" -m pytest -q -p no:cacheprovider --timeout=600 -n "$WORKERS" --dist loadfile "$@"
