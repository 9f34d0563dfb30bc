#!/bin/sh
# The survivor of a partition takeover killed -9 right after its imports, then started again, on Kafka (see partition_takeover_e2e.sh, CRASH=1).
TRANSPORT=kafka
CRASH=1
. "$ALTAR_SOURCE_DIR/tests/integration/partition_takeover_e2e.sh"
