#!/bin/bash
# A real Apache Kafka broker for the tests: one KRaft node (broker and
# controller in one JVM) on 127.0.0.1 with a small heap, from jars that
# scripts/kafka-jars.sh fetched from Maven Central.
#   kafka.sh start    idempotent; waits until the broker answers metadata. A broker
#                     not yet running starts on an empty data directory (set
#                     ALTAR_KAFKA_KEEP_DATA=1 to keep the previous run's topics)
#   kafka.sh stop     stops it and waits for the process to exit
#   kafka.sh restart  stop then start, keeping the data (broker-restart tests)
#   kafka.sh status   exit 0 when running and ready
#   kafka.sh clean    stop and delete the data directory
# Settings (environment):
#   ALTAR_KAFKA_PORT (19092), ALTAR_KAFKA_CONTROLLER_PORT (port+1),
#   ALTAR_KAFKA_DIR (data, config, pid and log; default /tmp/altar-kafka-VERSION-PORT),
#   ALTAR_KAFKA_HEAP (512m), ALTAR_KAFKA_VERSION and ALTAR_CACHE (see kafka-jars.sh),
#   ALTAR_KAFKA_START_TIMEOUT seconds (120).
# Tests reach the broker through ALTAR_KAFKA_BROKERS=127.0.0.1:PORT.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/../.." && pwd)"
VERSION="${ALTAR_KAFKA_VERSION:-3.9.1}"
PORT="${ALTAR_KAFKA_PORT:-19092}"
CPORT="${ALTAR_KAFKA_CONTROLLER_PORT:-$((PORT + 1))}"
DIR="${ALTAR_KAFKA_DIR:-${TMPDIR:-/tmp}/altar-kafka-$VERSION-$PORT}"
HEAP="${ALTAR_KAFKA_HEAP:-512m}"
TIMEOUT="${ALTAR_KAFKA_START_TIMEOUT:-120}"
PIDFILE="$DIR/kafka.pid"
LOG="$DIR/server.log"
CONF="$DIR/server.properties"

NAME=kafka
. "$HERE/scripts/lib-service.sh"
check_port ALTAR_KAFKA_PORT "$PORT"
check_port ALTAR_KAFKA_CONTROLLER_PORT "$CPORT"

running_pid() { pid_of "$PIDFILE" "kafka.Kafka $CONF"; }

# Ready means: the broker answers a metadata request and lists itself.
ready() {
  if command -v kcat >/dev/null 2>&1; then
    kcat -b "127.0.0.1:$PORT" -L -m 3 2>/dev/null | grep -q '1 brokers'
  else
    port_open "$PORT"
  fi
}

write_config() {
  mkdir -p "$DIR/data"
  cat >"$CONF" <<PROPS
# Written by scripts/services/kafka.sh: one KRaft node for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Tests create their topics explicitly through the admin API.
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
# message.max.bytes stays at the broker's default (about 1 MB), as on a
# cluster nobody tuned: altar's larger records must pass because the topics it
# creates carry their own max.message.bytes.
log.segment.bytes=33554432
log.retention.hours=24
log.retention.check.interval.ms=60000
PROPS
  cat >"$DIR/log4j.properties" <<L4J
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
L4J
  cat >"$DIR/log4j2.yaml" <<L4J2
Configuration:
  Appenders:
    Console: {name: STDOUT, PatternLayout: {pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {level: INFO, AppenderRef: [{ref: STDOUT}]}
L4J2
}

# The storage tool's class moved between lines; try the known names.
storage_tool() {
  local libs="$1"; shift
  local cls
  for cls in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
    if java -cp "$libs/*" -Dlog4j.configuration="file:$DIR/log4j.properties" \
         -Dlog4j2.configurationFile="$DIR/log4j2.yaml" "$cls" "$@" 2>>"$DIR/format.log"; then
      return 0
    fi
    grep -q "ClassNotFoundException\|Could not find or load main class" "$DIR/format.log" || return 1
  done
  return 1
}

start() {
  local keep="${1:-${ALTAR_KAFKA_KEEP_DATA:-0}}"
  if pid="$(running_pid)"; then
    if ready; then exit 0; fi
    say "broker pid $pid is running but not ready; waiting"
  else
    rm -f "$PIDFILE"
    if port_open "$PORT" || port_open "$CPORT"; then
      die "port $PORT or $CPORT on 127.0.0.1 is taken by another process; set ALTAR_KAFKA_PORT to a free port"
    fi
    command -v java >/dev/null 2>&1 || die "java not found; run scripts/install-deps.sh test"
    local libs
    libs="$("$HERE/scripts/kafka-jars.sh")" || die "could not fetch the Kafka $VERSION jars (see above)"
    [ "$keep" = 1 ] || rm -rf "$DIR/data"
    write_config
    if [ ! -f "$DIR/data/meta.properties" ]; then
      : >"$DIR/format.log"
      local cid
      cid="$(storage_tool "$libs" random-uuid | tail -n 1)" || { cat "$DIR/format.log" >&2; die "StorageTool random-uuid failed"; }
      storage_tool "$libs" format -t "$cid" -c "$CONF" >>"$DIR/format.log" \
        || { tail -n 20 "$DIR/format.log" >&2; die "formatting the KRaft storage in $DIR/data failed"; }
    fi
    say "starting Kafka $VERSION on 127.0.0.1:$PORT (log: $LOG)"
    launch "$PIDFILE" "$LOG" "kafka.Kafka $CONF" java -Xms128m -Xmx"$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -Djava.awt.headless=true \
      -Dlog4j.configuration="file:$DIR/log4j.properties" \
      -Dlog4j2.configurationFile="$DIR/log4j2.yaml" \
      -cp "$libs/*" kafka.Kafka "$CONF"
    pid="$(head -c 32 "$PIDFILE" 2>/dev/null | tr -cd '0-9')"
    [ -n "$pid" ] || die "could not start the broker; last lines of $LOG: $(tail -n 5 "$LOG" 2>/dev/null)"
  fi
  local rc=0
  await_ready "$pid" "$TIMEOUT" "$LOG" || rc=$?
  case "$rc" in
    0) ;;
    1) rm -f "$PIDFILE"; exit 1 ;;
    *) stop; exit 1 ;;
  esac
  say "ready on 127.0.0.1:$PORT after ${WAITED}s"
}

stop() {
  local pid
  if pid="$(running_pid)"; then stop_pid "$pid"; fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start 1 ;;
  status) running_pid >/dev/null && ready ;;
  clean) stop; rm -rf "$DIR" ;;
  *) echo "usage: $0 start|stop|restart|status|clean" >&2; exit 2 ;;
esac
