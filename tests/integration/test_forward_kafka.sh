#!/bin/sh
# Jobs behind a full worker start on its idle peers, on the real Kafka broker (see forward_e2e.sh).
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
