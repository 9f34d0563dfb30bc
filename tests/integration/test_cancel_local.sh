#!/bin/sh
# altar cancel on the embedded log (see cancel_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/cancel_e2e.sh"
