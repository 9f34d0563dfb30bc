#!/bin/sh
# Groups of any width on the real Kafka broker (scripts/services/kafka.sh);
# see wide_group_e2e.sh.
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/wide_group_e2e.sh"
