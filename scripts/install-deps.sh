#!/bin/sh
# Installs the Debian packages altar builds and tests with, only when one is missing.
# Usage: scripts/install-deps.sh [build|test|all]   (default: all)
set -eu

BUILD_PKGS="build-essential cmake pkg-config librdkafka-dev librocksdb-dev libmsgpack-dev \
libcurl4-openssl-dev libssl-dev libcunit1-dev libjansson-dev libyaml-dev zlib1g-dev \
libmicrohttpd-dev libxml2-dev ccache"
TEST_PKGS="clang clang-format libclang-rt-14-dev kcat openssl python3 python3-venv maven default-jre-headless \
docker.io docker-compose busybox-static procps curl jq \
chromium fonts-dejavu-core python3-websocket debootstrap"

what="${1:-all}"
case "$what" in
  build) want="$BUILD_PKGS" ;;
  test|all) want="$BUILD_PKGS $TEST_PKGS" ;;
  *) echo "usage: $0 [build|test|all]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "altar: this is not a Debian system; install these packages (or their equivalents) yourself:" >&2
  echo "  $missing" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "altar: missing Debian packages and not root; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "altar: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# docker.io would start its own daemon via policy-rc.d-less postinst; the test scripts start dockerd themselves.
apt-get install -y -qq --no-install-recommends $missing >/dev/null
