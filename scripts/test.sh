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
echo "== pytest"
exec "$PY" -m pytest -q -p no:cacheprovider --timeout=600 "$@"
