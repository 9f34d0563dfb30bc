#!/bin/sh
# Fetches the jars of an Apache Kafka broker (KRaft) from Maven Central with
# Maven, once, into a cache outside the work tree, and prints the directory
# that holds them. Later runs reuse the cache and touch no network.
#   ALTAR_CACHE          cache root (default: $HOME/.cache/altar)
#   ALTAR_KAFKA_VERSION  broker version (default: 3.9.1)
# Progress and errors go to stderr; stdout carries only the libs directory.
set -eu

VERSION="${ALTAR_KAFKA_VERSION:-3.9.1}"
CACHE="${ALTAR_CACHE:-${HOME:-/root}/.cache/altar}"
HOME_DIR="$CACHE/kafka-$VERSION"
LIBS="$HOME_DIR/libs"

say() { echo "kafka-jars: $*" >&2; }

case "$VERSION" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) say "ALTAR_KAFKA_VERSION must look like 3.9.1, got '$VERSION'"; exit 2 ;;
esac

# The logging binding differs by line: 3.x logs through slf4j 1 + reload4j,
# 4.x through slf4j 1 + log4j2. Without one the broker logs nothing at all.
case "$VERSION" in
  3.*) LOGDEPS='<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>' ;;
  *)   LOGDEPS='<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>com.fasterxml.jackson.dataformat</groupId><artifactId>jackson-dataformat-yaml</artifactId><version>2.16.2</version></dependency>' ;;
esac
# kafka_2.13 brings the server, metadata, raft, storage and coordinators;
# kafka-tools is added for 4.x, where some command-line classes moved.
case "$VERSION" in
  3.*) EXTRA='' ;;
  *)   EXTRA="<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$VERSION</version></dependency>" ;;
esac

POM_TEXT="$(cat <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>altar.test</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    $EXTRA
    $LOGDEPS
  </dependencies>
</project>
POM
)"

# The cache is good when it was made from this very pom.
if [ -f "$LIBS/.complete" ] && [ -f "$LIBS/kafka_2.13-$VERSION.jar" ] &&
   [ "$(cat "$LIBS/.complete")" = "$POM_TEXT" ]; then
  echo "$LIBS"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || { say "mvn not found; run scripts/install-deps.sh test (Debian package maven)"; exit 1; }
command -v java >/dev/null 2>&1 || { say "java not found; run scripts/install-deps.sh test (Debian package default-jre-headless)"; exit 1; }

mkdir -p "$HOME_DIR"
WORK="$(mktemp -d "$HOME_DIR/fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT INT TERM
printf '%s\n' "$POM_TEXT" > "$WORK/pom.xml"

say "fetching Apache Kafka $VERSION broker jars from Maven Central into $LIBS (first run only; may take a few minutes)"
tries=0
until mvn -B -ntp $( [ "$tries" -gt 0 ] && echo -U ) -f "$WORK/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$WORK/libs" >"$WORK/mvn.log" 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -ge 3 ]; then
    say "Maven could not fetch org.apache.kafka:kafka_2.13:$VERSION after $tries attempts; last lines of its log:"
    tail -n 25 "$WORK/mvn.log" >&2
    exit 1
  fi
  say "Maven failed (attempt $tries), retrying in 5 s"
  sleep 5
done
[ -f "$WORK/libs/kafka_2.13-$VERSION.jar" ] || { say "Maven finished but kafka_2.13-$VERSION.jar is missing"; exit 1; }
say "fetched $(ls "$WORK/libs" | wc -l) jars"
printf '%s' "$POM_TEXT" > "$WORK/libs/.complete"
rm -rf "$LIBS"
mv "$WORK/libs" "$LIBS"
echo "$LIBS"
