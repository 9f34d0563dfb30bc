#!/bin/sh
# Runs a command with ALTAR_TEST_PYTHON set to the test environment's
# interpreter (scripts/python-env.sh: altar's package, the example backend
# and the test adapters installed by pip).
set -eu
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
ALTAR_TEST_PYTHON="$(sh "$SRC/scripts/python-env.sh")"
export ALTAR_TEST_PYTHON
exec "$@"
