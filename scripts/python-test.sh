#!/bin/sh
# Runs the Python package's pytest suites (python/tests) in the environment
# scripts/python-env.sh builds, against the libaltar.so named by
# ALTAR_LIBRARY. Arguments go to pytest (test files, -k ...).
# ctest runs it with ALTAR_LIBRARY, ALTAR_BIN and ALTAR_SOURCE_DIR set.
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
: "${ALTAR_LIBRARY:?set ALTAR_LIBRARY to the built libaltar.so}"
export ALTAR_SOURCE_DIR="${ALTAR_SOURCE_DIR:-$SRC}"
PY="$("$SRC/scripts/python-env.sh")"
# From the tests' own directory, so `import altar` finds the installed copy, not the source tree.
cd "$SRC/python/tests"
exec "$PY" -m pytest -q -p no:cacheprovider -rs "$@"
