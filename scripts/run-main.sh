#!/bin/sh
# The main job: the fleet demo on the embedded default (local log, process
# backend) — a reconciler and two workers as separate processes under
# ./var/demo, a job of 3 models x 5 folds, group events as they fire, and a
# summary table. Extra arguments go to `altar demo` (see `altar demo --help`).
set -eu
build="${1:-build}"
[ $# -gt 0 ] && shift
exec "$build/altar" demo "$@"
