#!/bin/sh
# A standby reconciler on a real broker (see standby_e2e.sh): the killed
# owner leaves the group when its session expires.
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/standby_e2e.sh"
