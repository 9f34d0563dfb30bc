#!/bin/sh
# Formats the KRaft log directory once and runs one combined broker and
# controller. KAFKA_PORT (default 9092) is the client listener, KAFKA_PORT+1
# the controller; KAFKA_HOST (default 127.0.0.1) is what clients are told.
set -eu
PORT="${KAFKA_PORT:-9092}"
HOST="${KAFKA_HOST:-127.0.0.1}"
CPORT=$((PORT + 1))
DATA=/var/lib/kafka
mkdir -p "$DATA" /opt/kafka/config
cat >/opt/kafka/config/server.properties <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CPORT
listeners=PLAINTEXT://:$PORT,CONTROLLER://:$CPORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=4
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
cat >/opt/kafka/config/log4j.properties <<'LOG'
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
LOG
CP="/opt/kafka/libs/*"
JAVA="java ${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m} -Dlog4j.configuration=file:/opt/kafka/config/log4j.properties -cp"
if [ ! -f "$DATA/meta.properties" ]; then
  cid="${KAFKA_CLUSTER_ID:-$($JAVA "$CP" kafka.tools.StorageTool random-uuid | tail -n 1)}"
  $JAVA "$CP" kafka.tools.StorageTool format -t "$cid" \
    -c /opt/kafka/config/server.properties --ignore-formatted
fi
exec $JAVA "$CP" kafka.Kafka /opt/kafka/config/server.properties
