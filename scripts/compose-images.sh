#!/bin/sh
# Builds the images docker-compose.yml runs, with no image registry:
#   1. altar-base/debian:12  a Debian 12 root file system made by debootstrap
#                            from Debian's packages, turned into an image by
#                            `docker import`;
#   2. altar:latest          the Dockerfile, built on that base
#                            (--build-arg BASE=altar-base/debian:12);
#   3. altar-kafka:3.9.1     a KRaft broker: the base, a JRE from Debian, and
#                            the broker jars scripts/kafka-jars.sh fetches
#                            from Maven Central (deploy/kafka/Dockerfile).
# Each image carries the hash of what it was made from (label
# altar.cache.key) and is rebuilt only when that changes, so a second run
# costs a few seconds. The debootstrap tree is cached in ~/.cache/altar.
# Builds use the host's network (the engine here runs with --bridge=none).
# Usage: scripts/compose-images.sh [base|altar|kafka|all]   (default all)
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${ALTAR_CACHE:-${HOME:-/root}/.cache/altar}"
MIRROR="${ALTAR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
KAFKA_VERSION="${ALTAR_KAFKA_VERSION:-3.9.1}"
BASE_TAG=altar-base/debian:12
ALTAR_TAG=altar:latest
KAFKA_TAG="altar-kafka:$KAFKA_VERSION"
say() { echo "compose-images: $*" >&2; }
die() { say "$*"; exit 1; }

key_of() { docker image inspect --format '{{index .Config.Labels "altar.cache.key"}}' "$1" 2>/dev/null || true; }
hash_of() { sha256sum | cut -c1-16; }

base() {
  key="$(printf 'bookworm minbase ca-certificates %s v1' "$MIRROR" | hash_of)"
  [ "$(key_of "$BASE_TAG")" = "$key" ] && { say "$BASE_TAG is current ($key)"; return 0; }
  command -v debootstrap >/dev/null || "$here/scripts/install-deps.sh" test
  command -v debootstrap >/dev/null || die "debootstrap is missing (scripts/install-deps.sh test)"
  root="$CACHE/debian12-rootfs-$key"
  if [ ! -f "$root/.complete" ]; then
    say "debootstrap bookworm into $root (a few minutes, once)"
    rm -rf "$root"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$MIRROR" >"$CACHE/debootstrap-$key.log" 2>&1 ||
      die "debootstrap failed: $(tail -5 "$CACHE/debootstrap-$key.log")"
    rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
    touch "$root/.complete"
  fi
  say "docker import $BASE_TAG"
  tar -C "$root" --exclude=./.complete --exclude=./proc/* --exclude=./sys/* --exclude=./dev/* -c . |
    docker import --change "LABEL altar.cache.key=$key" --change 'CMD ["/bin/bash"]' - "$BASE_TAG" >/dev/null
}

altar() {
  # What the binary is built from: the source tree (plus local edits), not the
  # tests, docs and prose, which the image's altar does not contain.
  key="$(cd "$here" && { git ls-files -z --cached --others --exclude-standard | grep -zvE '^(docs|tests)/|\.md$' |
    xargs -0 sha256sum 2>/dev/null; docker image inspect --format '{{.Id}}' "$BASE_TAG"; } | hash_of)"
  [ "$(key_of "$ALTAR_TAG")" = "$key" ] && { say "$ALTAR_TAG is current ($key)"; return 0; }
  say "docker build $ALTAR_TAG (compiles altar in the image: several minutes)"
  docker build --network host --build-arg "BASE=$BASE_TAG" --build-arg "RUNTIME_BASE=$BASE_TAG" \
    --label "altar.cache.key=$key" -t "$ALTAR_TAG" \
    "$here" >"$CACHE/compose-build-altar.log" 2>&1 || die "building $ALTAR_TAG failed: $(tail -20 "$CACHE/compose-build-altar.log")"
}

kafka() {
  libs="$("$here/scripts/kafka-jars.sh")"
  key="$( { cat "$here/deploy/kafka/Dockerfile" "$here/deploy/kafka/start-kafka.sh"; ls "$libs";
    docker image inspect --format '{{.Id}}' "$BASE_TAG"; } | hash_of)"
  [ "$(key_of "$KAFKA_TAG")" = "$key" ] && { say "$KAFKA_TAG is current ($key)"; return 0; }
  ctx="$(mktemp -d "${TMPDIR:-/tmp}/altar-kafka-image.XXXXXX")"
  trap 'rm -rf "$ctx"' EXIT
  cp -r "$libs" "$ctx/libs"
  cp "$here/deploy/kafka/Dockerfile" "$here/deploy/kafka/start-kafka.sh" "$ctx/"
  say "docker build $KAFKA_TAG"
  docker build --network host --build-arg "BASE=$BASE_TAG" --label "altar.cache.key=$key" -t "$KAFKA_TAG" \
    "$ctx" >"$CACHE/compose-build-kafka.log" 2>&1 || die "building $KAFKA_TAG failed: $(tail -20 "$CACHE/compose-build-kafka.log")"
  rm -rf "$ctx"
  trap - EXIT
}

mkdir -p "$CACHE"
case "${1:-all}" in
  base) base ;;
  altar) base; altar ;;
  kafka) base; kafka ;;
  all) base; altar; kafka ;;
  *) echo "usage: $0 [base|altar|kafka|all]" >&2; exit 2 ;;
esac
