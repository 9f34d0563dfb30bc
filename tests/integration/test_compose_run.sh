#!/bin/sh
# docker-compose really runs: the registry-free images (scripts/compose-images.sh:
# debootstrap → docker import → the Dockerfile; a Kafka image from the broker
# jars), then `docker-compose up -d --scale worker=3`, `docker-compose run --rm
# submit` (which waits until the example job's group fired), the group event
# read back from the ready topic, three workers seen running, and
# `docker-compose down`. On this engine containers have no network of their
# own, so deploy/compose.host-network.yml puts every service on the host's.
# Slow the first time on a machine (the images are built, ~10-20 min);
# later runs reuse them while their inputs are unchanged.
set -u
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
cd "$ALTAR_SOURCE_DIR"
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose is not installed (scripts/install-deps.sh test)"; exit 1; }
docker info >/dev/null 2>&1 || { echo "FAIL: no Docker engine (scripts/services/dockerd.sh start)"; exit 1; }
scripts/compose-images.sh all || { echo "FAIL: building the images"; exit 1; }

# A free port and the one after it (the broker's controller).
port="$(python3 -c '
import socket
for p in range(18600, 18700, 2):
    try:
        a, b = socket.socket(), socket.socket()
        a.bind(("127.0.0.1", p)); b.bind(("127.0.0.1", p + 1)); a.close(); b.close(); print(p); break
    except OSError:
        pass')"
[ -n "$port" ] || { echo "FAIL: no free port pair in 18600-18699"; exit 1; }
export ALTAR_COMPOSE_KAFKA_PORT="$port"
project="altar-compose-test-$$"
dc() { docker-compose -p "$project" -f docker-compose.yml -f deploy/compose.host-network.yml "$@"; }
T="$(mktemp -d "${TMPDIR:-/tmp}/altar-compose.XXXXXX")"
cleanup() {
  dc down -v --remove-orphans >"$T/down.log" 2>&1 || cat "$T/down.log"
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

dc up -d --scale worker=3 kafka reconciler worker >"$T/up.log" 2>&1 || { cat "$T/up.log"; echo "FAIL: docker-compose up"; exit 1; }
running="$(dc ps -q worker | wc -l)"
[ "$running" = 3 ] || fail "$running worker container(s), want 3"
if dc run --rm submit >"$T/submit.log" 2>&1; then
  grep -q "group fired" "$T/submit.log" || fail "submit exited 0 without a fired group: $(cat "$T/submit.log")"
else
  fail "docker-compose run --rm submit: $(tail -n 20 "$T/submit.log")"
  dc logs --tail 30 >&2
fi
# The group event is on the ready topic, read from the host.
"$ALTAR_BIN" log consume --brokers "127.0.0.1:$port" --topic altar.ready --from-beginning --exit >"$T/ready.jsonl" 2>"$T/consume.log" ||
  fail "reading altar.ready: $(cat "$T/consume.log")"
grep -q '"event": *"fired"' "$T/ready.jsonl" || fail "no fired group on altar.ready: $(cat "$T/ready.jsonl")"
# Every worker container is still up and is a member of the fleet.
for c in $(dc ps -q worker); do
  [ "$(docker inspect --format '{{.State.Running}}' "$c")" = true ] || fail "worker container $c is not running"
done
dc down -v --remove-orphans >"$T/down.log" 2>&1 || fail "docker-compose down: $(cat "$T/down.log")"
[ -z "$(dc ps -q)" ] || fail "containers left after down"
[ "$fails" -eq 0 ] || exit 1
echo "docker-compose: up with 3 workers, submit fired its group, down: ok"
