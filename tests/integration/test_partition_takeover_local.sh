#!/bin/sh
# A running reconciler takes a partition over from a checkpoint, on the embedded log (see partition_takeover_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/partition_takeover_e2e.sh"
