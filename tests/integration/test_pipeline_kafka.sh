#!/bin/sh
# Pipelines end to end on the real Kafka broker (scripts/services/kafka.sh); see pipeline_e2e.sh.
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/pipeline_e2e.sh"
