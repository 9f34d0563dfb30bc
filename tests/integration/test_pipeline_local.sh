#!/bin/sh
# Pipelines end to end on the embedded log (see pipeline_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/pipeline_e2e.sh"
