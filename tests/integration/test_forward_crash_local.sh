#!/bin/sh
# The forwarding worker dies between a forward's acknowledgement and its commit, on the embedded log (see forward_e2e.sh).
TRANSPORT=local
FORWARD_MODE=crash
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
