#!/bin/sh
# Groups of any width on the embedded log (see wide_group_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/wide_group_e2e.sh"
