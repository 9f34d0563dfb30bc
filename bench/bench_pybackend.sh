#!/bin/sh
# The python backend through its bridge against the C process backend, in
# one run (bench/pybackend_rate.c): tasks/s with a no-op adapter and with the
# example subprocess adapter, and the bridge's cost per call. The adapters
# come from the test environment scripts/python-env.sh builds.
#   bench/bench_pybackend.sh [BUILD_DIR] [N [M]]
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
B="$(cd "${1:-$SRC/build}" && pwd)"
[ $# -gt 0 ] && shift
ALTAR_BENCH_PYTHON="$("$SRC/scripts/python-env.sh")"
export ALTAR_BENCH_PYTHON ALTAR_LIBRARY="$B/libaltar.so"
exec "$B/bench/pybackend_rate" "$@"
