#!/bin/sh
# Builds (or reuses) the virtual environment the Python package's tests run
# in, and prints its python's path: ${ALTAR_CACHE:-~/.cache/altar}/py-<hash>/,
# where <hash> covers python/tests/requirements.txt and every file of the
# package, so a changed source gets a fresh environment and two worktrees
# with different sources never share one. The package is installed the way
# a user installs it: `pip install ./python` (a copy, not an editable link).
# The example Python backend, the example storage adapter and the test
# adapters (backends and storage) are installed the same way, so the fleet's
# `python` backend and storage.python schemes find them.
# Needs Debian's python3-venv (scripts/install-deps.sh) and PyPI.
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
REQ="$SRC/python/tests/requirements.txt"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
EXTRA="examples/python_backend examples/python_storage tests/python_backends/adapters"
HASH="$(cd "$SRC" && { (cd python && find . -path ./build -prune -o -name '*.egg-info' -prune -o -name __pycache__ -prune \
  -o -type f ! -path './tests/*' -print | LC_ALL=C sort | xargs sha256sum)
  for d in $EXTRA; do find "$d" -name __pycache__ -prune -o -name '*.egg-info' -prune -o -name build -prune \
    -o -type f -print | LC_ALL=C sort | xargs sha256sum; done; } | cat - "$REQ" | sha256sum | cut -c1-16)"
BASE="${ALTAR_CACHE:-$HOME/.cache/altar}/py-$HASH"
VENV="$BASE/venv"
STAMP="$VENV/.altar-ready"

mkdir -p "$BASE"
# One builder at a time (ctest may start two Python tests at once).
exec 9>"$BASE/.lock"
flock 9
# Environments of package versions unused for a week are removed (each use touches its directory).
find "$(dirname "$BASE")" -maxdepth 1 -name 'py-*' -type d -mtime +7 ! -path "$BASE" -exec rm -rf {} + 2>/dev/null || true
touch "$BASE"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ]; then
  echo "$VENV/bin/python"
  exit 0
fi
rm -rf "$VENV"
echo "altar: building the Python test environment in $VENV" >&2
"$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$REQ" >&2
# Built from a copy, so no build/ or egg-info is left in the source tree.
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cp -R "$SRC/python" "$TMP/python"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir --no-deps "$TMP/python" >&2
for d in $EXTRA; do
  mkdir -p "$TMP/extra/$d" && cp -R "$SRC/$d/." "$TMP/extra/$d/"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir --no-deps "$TMP/extra/$d" >&2
done
"$VENV/bin/python" -c "import cffi, pytest" >&2
touch "$STAMP"
echo "$VENV/bin/python"
