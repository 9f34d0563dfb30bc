#!/bin/sh
# Why a shard is not running, on the real Kafka broker started by
# scripts/services/kafka.sh (body: tests/cli/shard_why_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/cli/shard_why_e2e.sh"
