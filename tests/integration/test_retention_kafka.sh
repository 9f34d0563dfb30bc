#!/bin/sh
# The ledger outlives Kafka's retention (see retention_e2e.sh); DeleteRecords stands in for a week.
TRANSPORT=kafka
. "$ALTAR_SOURCE_DIR/tests/integration/retention_e2e.sh"
