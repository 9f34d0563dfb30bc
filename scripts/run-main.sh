#!/bin/sh
# The main job. Until the fleet demo exists this shows what the binary offers.
set -eu
build="${1:-build}"
exec "$build/altar" --help
