#!/bin/sh
# The reconciler's lag gauges on the embedded log (body: reconciler_lag_e2e.sh).
TRANSPORT=local
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/cli/reconciler_lag_e2e.sh"
