#!/bin/sh
# End to end on the real Kafka broker started by scripts/services/kafka.sh.
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/fleet_e2e.sh"
