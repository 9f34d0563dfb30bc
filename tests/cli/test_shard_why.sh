#!/bin/sh
# Why a shard is not running, on the embedded log (body: shard_why_e2e.sh).
TRANSPORT=local
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/cli/shard_why_e2e.sh"
