#!/bin/sh
# A cancel stops the shards a full worker forwarded to its peers, on Kafka (see forward_e2e.sh).
TRANSPORT=kafka
FORWARD_MODE=cancel
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
