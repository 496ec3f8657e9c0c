#!/usr/bin/env bash
# Build the compiled linearizability witness search (native/lincheck, Rust through PyO3 and maturin) and install
# it into the current Python.  Idempotent: when the installed module was built from the same sources it does
# nothing (a second or so).  Without it the checker runs its pure-Python search and says so in each Result
# (Result.engine); the Python search is the oracle the compiled one is tested against either way.
#
#   scripts/build_native.sh            build if the sources changed, then install
#   PYTHON=python3.11 scripts/build_native.sh
#
# Needs cargo (Debian's or rustup's) and fetches maturin from PyPI and the pyo3 crate from crates.io.
# Build output goes to build/lincheck (git-ignored).  Exit 2 with one line on stderr if anything is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
crate=native/lincheck
out=build/lincheck
if ! command -v cargo >/dev/null 2>&1; then
  echo "build_native: cargo not found; install Debian's cargo (apt-get install cargo) or rustup, then re-run" >&2
  exit 2
fi
sum=$(cat "$crate/Cargo.toml" "$crate/pyproject.toml" "$crate"/src/*.rs | sha256sum | cut -c1-16)
if [ -f "$out/installed-$sum" ] && "$PY" -c 'import lincheck_native' 2>/dev/null; then
  exit 0
fi
if ! "$PY" -m maturin --version >/dev/null 2>&1; then
  "$PY" -m pip install -q --disable-pip-version-check 'maturin>=1.5,<2' 2>&1 | grep -v "Running pip as the 'root' user" >&2 || true
fi
mkdir -p "$out"
rm -f "$out"/wheels/*.whl
echo "build_native: building $crate (release)"
if ! CARGO_TARGET_DIR="$PWD/$out/target" "$PY" -m maturin build --release --quiet -i "$PY" \
    -m "$crate/Cargo.toml" -o "$out/wheels" >"$out/build.log" 2>&1; then
  tail -20 "$out/build.log" >&2
  echo "build_native: cargo/maturin build failed (log above, also in $out/build.log)" >&2
  exit 2
fi
if ! "$PY" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$out"/wheels/*.whl \
    >"$out/pip.log" 2>&1; then
  grep -v "Running pip as the 'root' user" "$out/pip.log" >&2 || true
  echo "build_native: pip install of the wheel failed (log above, also in $out/pip.log)" >&2
  exit 2
fi
"$PY" -c 'import lincheck_native' || { echo "build_native: the installed module does not import" >&2; exit 2; }
rm -f "$out"/installed-*
touch "$out/installed-$sum"
echo "build_native: lincheck_native installed"
