#!/usr/bin/env bash
# Build every compiled core under native/ (Rust through PyO3 and maturin) and install each into the current
# Python: native/lincheck (the linearizability witness search, module lincheck_native) and native/queuescan
# (the queue checker's pass, module queuescan_native).  Idempotent: a crate whose installed module was built
# from the same sources is skipped (a second or so).  Without a module its checker runs its pure-Python code
# and says so (the lin checker's Result.engine, the queue checker's stats["engine"]); the Python code is the
# oracle the compiled one is tested against either way.
#
#   scripts/build_native.sh            build the crates whose sources changed, then install them
#   PYTHON=python3.11 scripts/build_native.sh
#
# Needs cargo (Debian's or rustup's) and fetches maturin from PyPI and the pyo3 crate from crates.io.
# Build output goes to build/<crate> (git-ignored).  Every crate is tried; if any fails, exit 2 with one
# line on stderr per failure (a build log is kept in build/<crate>/build.log).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if ! command -v cargo >/dev/null 2>&1; then
  echo "build_native: cargo not found; install Debian's cargo (apt-get install cargo) or rustup, then re-run" >&2
  exit 2
fi

ensure_maturin() {
  if ! "$PY" -m maturin --version >/dev/null 2>&1; then
    "$PY" -m pip install -q --disable-pip-version-check 'maturin>=1.5,<2' 2>&1 \
      | grep -v "Running pip as the 'root' user" >&2 || true
  fi
}

# build_crate native/NAME: build and install it unless its sources are unchanged; returns 1 after one line
# on stderr if it fails.
build_crate() {
  local crate=$1 name module out sum
  name=$(basename "$crate")
  out=build/$name
  module=$(sed -n 's/^module-name *= *"\([A-Za-z0-9_]*\)".*/\1/p' "$crate/pyproject.toml")
  if [ -z "$module" ]; then
    echo "build_native: $crate/pyproject.toml has no [tool.maturin] module-name" >&2
    return 1
  fi
  mkdir -p "$out"
  # one build of a crate at a time (helpers and setup.sh may run this script at once; concurrent maturin
  # builds in one target directory break each other), held until this function returns
  exec 9>"$out/.lock"
  flock 9
  sum=$(cat "$crate/Cargo.toml" "$crate/pyproject.toml" "$crate"/src/*.rs | sha256sum | cut -c1-16)
  if [ -f "$out/installed-$sum" ] && "$PY" -c "import $module" 2>/dev/null; then
    return 0
  fi
  ensure_maturin
  rm -f "$out"/wheels/*.whl
  echo "build_native: building $crate (release)"
  if ! CARGO_TARGET_DIR="$PWD/$out/target" "$PY" -m maturin build --release --quiet -i "$PY" \
      -m "$crate/Cargo.toml" -o "$out/wheels" >"$out/build.log" 2>&1; then
    tail -20 "$out/build.log" >&2
    echo "build_native: cargo/maturin build of $crate failed (log above, also in $out/build.log)" >&2
    return 1
  fi
  if ! "$PY" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$out"/wheels/*.whl \
      >"$out/pip.log" 2>&1; then
    grep -v "Running pip as the 'root' user" "$out/pip.log" >&2 || true
    echo "build_native: pip install of the $name wheel failed (log above, also in $out/pip.log)" >&2
    return 1
  fi
  if ! "$PY" -c "import $module"; then
    echo "build_native: the installed module $module does not import" >&2
    return 1
  fi
  rm -f "$out"/installed-*
  touch "$out/installed-$sum"
  echo "build_native: $module installed"
}

failed=0
for toml in native/*/Cargo.toml; do
  build_crate "$(dirname "$toml")" || failed=1
  exec 9>&-
done
exit $((failed * 2))
