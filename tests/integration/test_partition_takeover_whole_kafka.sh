#!/bin/sh
# A running reconciler gains a partition whose status log is still whole: it imports it from a checkpoint
# rather than replaying it, so its takeover is bounded and the dead owner's groups are not published again
# (see partition_takeover_e2e.sh), on Kafka.
TRANSPORT=kafka KEEP_LOG=1
. "$ALTAR_SOURCE_DIR/tests/integration/partition_takeover_e2e.sh"
