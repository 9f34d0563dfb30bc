#!/bin/sh
# Runs every benchmark; each prints its own baseline and ratio. Starts the
# real services some of them measure against (Kafka for bench_kafka, dockerd
# for bench_docker), as the tests do, and stops them afterwards.
set -eu
cd "$(dirname "$0")/.."
B="${1:-build}"
stop_services() {
  for s in scripts/services/*.sh; do
    [ -x "$s" ] && "$s" stop >/dev/null 2>&1 || true
  done
}
trap stop_services EXIT INT TERM
for s in scripts/services/*.sh; do
  [ -x "$s" ] && "$s" start
done
export ALTAR_KAFKA_BROKERS="${ALTAR_KAFKA_BROKERS:-127.0.0.1:${ALTAR_KAFKA_PORT:-19092}}"
for b in "$B"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
for s in bench/bench_*.sh; do
  [ -x "$s" ] || continue
  echo "== $(basename "$s")"
  "$s" "$B"
done
