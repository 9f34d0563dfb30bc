#!/bin/sh
# The ledger outlives the embedded log's retention (see retention_e2e.sh).
TRANSPORT=local
. "$ALTAR_SOURCE_DIR/tests/integration/retention_e2e.sh"
