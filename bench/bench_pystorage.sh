#!/bin/sh
# Python storage adapters through their bridge against altar's C `local`
# adapter, in one run (bench/pystorage_rate.c): the bridge's cost per call
# and the MiB/s of staging (as_local_file) and collection (upload) with the
# example adapter. The adapter comes from the test environment
# scripts/python-env.sh builds.
#   bench/bench_pystorage.sh [BUILD_DIR] [M [MiB]]
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
B="$(cd "${1:-$SRC/build}" && pwd)"
[ $# -gt 0 ] && shift
ALTAR_BENCH_PYTHON="$("$SRC/scripts/python-env.sh")"
export ALTAR_BENCH_PYTHON ALTAR_LIBRARY="$B/libaltar.so"
exec "$B/bench/pystorage_rate" "$@"
