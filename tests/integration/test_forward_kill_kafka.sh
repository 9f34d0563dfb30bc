#!/bin/sh
# The worker that received forwarded jobs, and the reconciler, killed -9 while those jobs run, on Kafka (see forward_e2e.sh).
TRANSPORT=kafka
FORWARD_MODE=kill_receiver
. "$ALTAR_SOURCE_DIR/tests/integration/forward_e2e.sh"
