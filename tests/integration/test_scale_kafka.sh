#!/bin/sh
# Scaling on the real Kafka broker started by scripts/services/kafka.sh (see scale_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/scale_e2e.sh"
