#!/bin/bash
# fake-gcs-server (github.com/fsouza/fake-gcs-server), a Google Cloud Storage
# JSON API emulator, for the gs:// adapter's tests: plain http on 127.0.0.1,
# built once from the Go module proxy by scripts/go-tool.sh. It checks no
# auth (tests/unit/test_storage_gcs_auth.c covers auth against a token server).
#   fake-gcs.sh start    idempotent; waits until it answers, creates the buckets
#                        altar-test and altar-bench
#   fake-gcs.sh stop     stops it and waits for the process to exit
#   fake-gcs.sh status   exit 0 when running and ready
# Settings: ALTAR_FAKE_GCS_PORT (17310), ALTAR_FAKE_GCS_VERSION (v1.56.1),
# ALTAR_FAKE_GCS_DIR (state; default /tmp/altar-fake-gcs-PORT), ALTAR_CACHE.
# Tests reach it through STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/../.." && pwd)"
NAME=fake-gcs
VERSION="${ALTAR_FAKE_GCS_VERSION:-v1.56.1}"
PORT="${ALTAR_FAKE_GCS_PORT:-17310}"
PORTS="$PORT"
DIR="${ALTAR_FAKE_GCS_DIR:-${TMPDIR:-/tmp}/altar-fake-gcs-$PORT}"
TIMEOUT=60
BIN_ARGS="fake-gcs-server github.com/fsouza/fake-gcs-server $VERSION"
. "$HERE/scripts/lib-goserver.sh"
check_port ALTAR_FAKE_GCS_PORT "$PORT"

server_args() {
  ARGS=("$BIN" -scheme http -host 127.0.0.1 -port "$PORT"
        -external-url "http://127.0.0.1:$PORT" -public-host "127.0.0.1:$PORT"
        -backend filesystem -filesystem-root "$DIR/data" -log-level warn)
}

ready() { curl -sf -o /dev/null "http://127.0.0.1:$PORT/storage/v1/b"; }

after_start() {
  local b
  for b in altar-test altar-bench; do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/storage/v1/b/$b" && continue
    curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
      --data "{\"name\":\"$b\"}" "http://127.0.0.1:$PORT/storage/v1/b?project=altar-test" || return 1
  done
}

main "$@"
