#!/bin/sh
# Runs every test: builds, starts the real services the integration tests
# need (a Kafka broker, dockerd), runs ctest, then the sanitizer and fuzz passes.
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
JOBS="$(nproc 2>/dev/null || echo 2)"

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$JOBS"

stop_services() {
  for s in scripts/services/*.sh; do
    [ -x "$s" ] && "$s" stop >/dev/null 2>&1 || true
  done
}
trap stop_services EXIT INT TERM

# Each scripts/services/NAME.sh knows how to start, wait for and stop one real service.
for s in scripts/services/*.sh; do
  [ -x "$s" ] || continue
  echo "== starting $(basename "$s" .sh)"
  "$s" start
done
export ALTAR_KAFKA_BROKERS="${ALTAR_KAFKA_BROKERS:-127.0.0.1:${ALTAR_KAFKA_PORT:-19092}}"
[ -f scripts/services.env ] && . scripts/services.env

echo "== ctest"
(cd "$BUILD" && ctest --output-on-failure -j"$JOBS")

echo "== fuzzing"
scripts/fuzz.sh

# Last, so the run closes on ctest's own summary line.
echo "== sanitizers"
scripts/test-asan.sh build-asan
