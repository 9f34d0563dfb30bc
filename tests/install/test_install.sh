#!/bin/sh
# `cmake --install` into a temp prefix, then what an embedder does: compile
# and link a small program against the installed altar.pc, once with the
# shared library and once with the static one, and run both. Also: only the
# public API is exported, `altar --version` prints the project version, and
# the bridge is found inside the installed prefix.
# Needs BUILD_DIR (the build tree) and ALTAR_SOURCE_DIR.
set -eu
: "${BUILD_DIR:?}" "${ALTAR_SOURCE_DIR:?}"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix
cmake --install "$BUILD_DIR" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

version=$(sed -n 's/^#define ALTAR_VERSION "\(.*\)"$/\1/p' "$BUILD_DIR/include/altar/version.h")
[ -n "$version" ] || fail "no version in the generated header"
major=${version%%.*}
for f in bin/altar "lib/libaltar.so.$major" lib/libaltar.a lib/pkgconfig/altar.pc \
         include/altar/version.h include/altar/spec.h share/altar/modal_bridge.py; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[ "$("$prefix/bin/altar" --version)" = "altar $version" ] || fail "altar --version: $("$prefix/bin/altar" --version)"

# Exported: altar_ names only, and none of a part's internals (worker/offset_tracker.h).
nm -D --defined-only "$prefix/lib/libaltar.so.$major" | awk '{print $3}' >"$tmp/exported"
[ -s "$tmp/exported" ] || fail "libaltar.so exports nothing"
! grep -v '^altar_' "$tmp/exported" >/dev/null || fail "exported beyond altar_: $(grep -v '^altar_' "$tmp/exported" | head -5 | tr '\n' ' ')"
grep -qx altar_spec_identity "$tmp/exported" || fail "altar_spec_identity is not exported"
! grep -q '^altar_offset_tracker_' "$tmp/exported" || fail "the worker's offset tracker is exported"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion altar)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion altar)"
cc=${CC:-cc}
mkdir -p "$prefix/libexec"
# Shared: the program finds libaltar.so.<major> through its rpath.
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Werror -o "$tmp/embed_shared" "$ALTAR_SOURCE_DIR/tests/install/embed.c" \
    $(pkg-config --cflags --libs altar) -Wl,-rpath,"$prefix/lib" || fail "linking against libaltar.so"
readelf -d "$tmp/embed_shared" | grep -q "NEEDED.*libaltar.so.$major" || fail "embed_shared does not load libaltar.so.$major"
# Static: libaltar.a with the shared libraries it needs (its Requires.private
# and libs_private; --static would expand every private dependency down to
# archives Debian does not ship). The program sits in the prefix's libexec/,
# so the bridge is found beside it.
libs="$(pkg-config --libs $(pkg-config --print-requires-private altar)) $(pkg-config --variable=libs_private altar)"
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Werror -o "$prefix/libexec/embed_static" "$ALTAR_SOURCE_DIR/tests/install/embed.c" \
    $(pkg-config --cflags altar) "$prefix/lib/libaltar.a" $libs || fail "linking against libaltar.a"
! readelf -d "$prefix/libexec/embed_static" | grep -q 'NEEDED.*libaltar' || fail "embed_static loads libaltar.so"

unset ALTAR_MODAL_BRIDGE
for prog in "$tmp/embed_shared" "$prefix/libexec/embed_static"; do
  out=$("$prog") || fail "$prog exited $?"
  echo "$out" | grep -qx "version $version" || fail "$prog: $out"
  echo "$out" | grep -Eq '^key [0-9a-f]{16,}$' || fail "$prog: no task key: $out"
  bridge=$(echo "$out" | sed -n 's/^bridge //p')
  [ "$(realpath "$bridge")" = "$(realpath "$prefix/share/altar/modal_bridge.py")" ] ||
    fail "$prog found the bridge at '$bridge', not in the installed prefix"
done
echo "ok: installed altar $version; embedded shared and static; bridge found in the prefix"
