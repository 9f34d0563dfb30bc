#!/bin/sh
# A standby reconciler on the embedded log (see standby_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/standby_e2e.sh"
