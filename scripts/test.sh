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
"$PY" -m mypy system_under_test checker harness nemesis workloads spark_analysis
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  # Build the node image here, not inside the first e2e test: a first build on a fresh, busy machine can take
  # longer than one test's time limit.  A failure is reported again (with its reason) by the e2e tests.
  echo "== docker images"
  "$PY" -m harness.cli images build || echo "images: build failed; the e2e tests will report why"
fi
echo "== pytest"
exec "$PY" -m pytest -q -p no:cacheprovider --timeout=600 "$@"
