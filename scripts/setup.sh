#!/usr/bin/env bash
# Set up everything splitbrain needs on a fresh Debian machine (run as root): system packages
# from the machine's configured apt sources and Python packages from its configured PyPI index.
# Idempotent and quick when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

# fuse3 (mount/umount of FUSE file systems, /dev/fuse users) and libfuse3-dev + pkg-config (to build pyfuse3) are for
# the lazy store file system (cluster.store_fs: lazyfs, nemesis/lazyfs).  etcd-server is a real system under test
# (systems/etcd, tests/integration/systems/test_etcd.py), and so are redis-server and redis-sentinel
# (systems/redis, tests/integration/systems/test_redis.py) and rabbitmq-server (systems/rabbitmq, with Debian's
# Erlang; tests/integration/systems/test_rabbitmq.py).
APT_PACKAGES=(iproute2 iptables procps psmisc libfaketime openjdk-17-jre-headless debootstrap libnetfilter-queue-dev gcc chromium chromium-driver fuse3 libfuse3-dev pkg-config etcd-server redis-server redis-sentinel rabbitmq-server)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages ${missing[*]} and not root; install them or re-run as root" >&2
    exit 2
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "setup: Python 3.11+ is required (found: $("$PY" --version 2>&1))" >&2
  exit 2
fi
stamp=.setup-stamp
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! "$PY" -c 'import system_under_test, msgpack, hypothesis, selenium, pyfuse3, httpx, redis, aiormq' 2>/dev/null; then
  echo "setup: installing Python packages"
  if ! "$PY" -m pip install -q --disable-pip-version-check -e '.[dev]' >.setup-pip.log 2>&1; then
    grep -v "Running pip as the 'root' user" .setup-pip.log >&2 || true
    echo "setup: pip install failed (log above, also in .setup-pip.log)" >&2
    exit 2
  fi
  "$PY" -c 'import system_under_test, msgpack, hypothesis, yaml, selenium, pyfuse3, httpx, redis, aiormq' || { echo "setup: pip install failed" >&2; exit 2; }
  touch "$stamp"
fi
# The linearizability checker's compiled core (optional: without it the checker uses its Python search, and says so).
PYTHON="$PY" scripts/build_native.sh || echo "setup: a compiled checker core (native/*) did not build; the checkers fall back to Python (see above)" >&2
