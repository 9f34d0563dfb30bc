#!/bin/sh
# A cancel stops the shards a full worker forwarded to its peers, on the embedded log (see forward_e2e.sh).
TRANSPORT=local
FORWARD_MODE=cancel
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
