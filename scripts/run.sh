#!/usr/bin/env bash
# Set up everything, then run the main job: the 60-second smoke chaos test (3 controllers + one
# 3-replica broker set in network namespaces, queue workload, partitions and SIGKILLs), with its
# results under results/smoke/<timestamp>/ (results/latest points at it).
# Extra arguments go to `splitbrain test` (e.g. --time-limit 30 --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" -m harness.cli test examples/smoke.yaml "$@"
