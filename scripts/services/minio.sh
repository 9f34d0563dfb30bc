#!/bin/bash
# MinIO (github.com/minio/minio), an S3-compatible server, for the s3://
# adapter's tests: plain http on 127.0.0.1 with SigV4 signature checking,
# region us-east-1 and virtual-host buckets under "localhost", built once
# from the Go module proxy by scripts/go-tool.sh (pinned by pseudo-version:
# the proxy refuses tag look-ups for this module).
#   minio.sh start    idempotent; waits until ready, creates the buckets
#                     altar-test and altar-bench
#   minio.sh stop     stops it and waits for the process to exit
#   minio.sh status   exit 0 when running and ready
# Settings: ALTAR_MINIO_PORT (17320; the console takes PORT+1),
# ALTAR_MINIO_VERSION, ALTAR_MINIO_DIR (state; default /tmp/altar-minio-PORT),
# ALTAR_CACHE. Tests use ALTAR_MINIO_ENDPOINT=http://127.0.0.1:PORT with the
# test-only keys below (ALTAR_MINIO_ACCESS_KEY / ALTAR_MINIO_SECRET_KEY).
set -euo pipefail

HERE="$(cd "$(dirname "$0")/../.." && pwd)"
NAME=minio
VERSION="${ALTAR_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
PORT="${ALTAR_MINIO_PORT:-17320}"
CPORT="$((PORT + 1))"
PORTS="$PORT $CPORT"
DIR="${ALTAR_MINIO_DIR:-${TMPDIR:-/tmp}/altar-minio-$PORT}"
TIMEOUT=90
KEY="${ALTAR_MINIO_ACCESS_KEY:-altar-test-key}"
SECRET="${ALTAR_MINIO_SECRET_KEY:-altar-test-secret-0123456789}"
BIN_ARGS="minio github.com/minio/minio $VERSION"
. "$HERE/scripts/lib-goserver.sh"
check_port ALTAR_MINIO_PORT "$PORT"

server_args() {
  ARGS=(env MINIO_ROOT_USER="$KEY" MINIO_ROOT_PASSWORD="$SECRET" MINIO_SITE_REGION=us-east-1
        MINIO_DOMAIN=localhost MINIO_BROWSER=off MINIO_UPDATE=off
        "$BIN" server --quiet --address "127.0.0.1:$PORT" --console-address "127.0.0.1:$CPORT" "$DIR/data")
}

ready() { curl -sf -o /dev/null "http://127.0.0.1:$PORT/minio/health/ready"; }

# Signed by curl itself; S3 wants the payload hash header set explicitly.
after_start() {
  local b
  for b in altar-test altar-bench; do
    curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "$KEY:$SECRET" \
      -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
      -I "http://127.0.0.1:$PORT/$b" && continue
    curl -sf -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "$KEY:$SECRET" \
      -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
      -X PUT "http://127.0.0.1:$PORT/$b" || return 1
  done
}

main "$@"
