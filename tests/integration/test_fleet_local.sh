#!/bin/sh
# End to end on the embedded log: kills, poison, rebuild (see fleet_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/fleet_e2e.sh"
