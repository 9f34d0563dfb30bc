#!/bin/sh
# The reconciler's lag gauges on the real Kafka broker started by
# scripts/services/kafka.sh (body: tests/cli/reconciler_lag_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/cli/reconciler_lag_e2e.sh"
