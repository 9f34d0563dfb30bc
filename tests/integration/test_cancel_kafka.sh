#!/bin/sh
# altar cancel on the real Kafka broker started by scripts/services/kafka.sh (see cancel_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/cancel_e2e.sh"
