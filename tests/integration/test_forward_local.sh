#!/bin/sh
# Jobs behind a full worker start on its idle peers, on the embedded log (see forward_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
