#!/bin/sh
# Builds the image the docker tests run, without any registry: a root file
# system holding Debian's static busybox and one symlink per applet, loaded
# with `docker import`. Idempotent: an image already present is kept.
# Usage: scripts/docker-test-image.sh [TAG]    (default: altar-test/busybox:1,
#        or $ALTAR_DOCKER_TEST_IMAGE)
set -eu

TAG="${1:-${ALTAR_DOCKER_TEST_IMAGE:-altar-test/busybox:1}}"
BUSYBOX="${ALTAR_BUSYBOX:-/bin/busybox}"

die() { echo "docker-test-image: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "the docker client is not installed (scripts/install-deps.sh test)"
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info' (start one: scripts/services/dockerd.sh start)"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  exit 0
fi

[ -x "$BUSYBOX" ] || die "$BUSYBOX is missing (install Debian's busybox-static)"
# A dynamically linked busybox would not run in an empty root file system.
if command -v file >/dev/null 2>&1 && file -L "$BUSYBOX" | grep -q "dynamically linked"; then
  die "$BUSYBOX is dynamically linked; the image needs busybox-static"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/altar-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT INT TERM
root="$work/root"
mkdir -p "$root/bin" "$root/tmp" "$root/mnt/volume" "$root/etc" "$root/proc" "$root/sys" "$root/dev"
chmod 1777 "$root/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  case "$applet" in
    busybox|*/*|"") continue ;;
  esac
  ln -s busybox "$root/bin/$applet"
done
# Minimal passwd/group so `--user 1000:1000` and `id` behave.
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

tar -C "$root" -cf "$work/rootfs.tar" .
docker import --change 'ENV PATH=/bin' --change 'CMD ["/bin/sh"]' "$work/rootfs.tar" "$TAG" >/dev/null \
  || die "docker import of $TAG failed"
docker image inspect "$TAG" >/dev/null 2>&1 || die "image $TAG is missing after import"
echo "docker-test-image: built $TAG" >&2
