#!/bin/sh
# A running reconciler takes a partition over from a checkpoint, on Kafka (see partition_takeover_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/partition_takeover_e2e.sh"
