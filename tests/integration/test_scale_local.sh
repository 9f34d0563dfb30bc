#!/bin/sh
# Scaling on the embedded log: workers join and leave during long tasks (see scale_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/scale_e2e.sh"
