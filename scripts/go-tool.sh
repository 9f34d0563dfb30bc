#!/bin/sh
# Builds a Go program from the Go module proxy, once, into a cache outside the
# work tree, and prints the path of the binary. Later runs reuse the cache while
# the module and version match, and touch no network.
#   go-tool.sh NAME MODULE VERSION
#     NAME     the binary's name and the cache directory's stem
#     MODULE   the Go package to install (its main package)
#     VERSION  a release tag or a pseudo-version (pinned; no look-ups by name)
#   ALTAR_CACHE  cache root (default: $HOME/.cache/altar)
#   ALTAR_GO     the go command (default: go on PATH, else /usr/local/go/bin/go,
#                if it is Go 1.24 or newer; else, on linux-amd64, the pinned Go
#                toolchain fetched once from the Go module proxy, where Go
#                publishes its toolchains as the module golang.org/toolchain)
# The build runs under nice with its own GOCACHE and GOMODCACHE in a temp dir
# that is deleted afterwards, and the binary moves into place only when done.
# Progress goes to stderr; stdout carries only the binary's path.
set -eu

[ $# -eq 3 ] || { echo "usage: $0 NAME MODULE VERSION" >&2; exit 2; }
NAME="$1"; MODULE="$2"; VERSION="$3"
CACHE="${ALTAR_CACHE:-${HOME:-/root}/.cache/altar}"
DEST="$CACHE/$NAME-$VERSION"
BIN="$DEST/$NAME"

say() { echo "go-tool: $*" >&2; }

if [ -x "$BIN" ] && [ -f "$DEST/.complete" ] && [ "$(cat "$DEST/.complete")" = "$MODULE@$VERSION" ]; then
  echo "$BIN"
  exit 0
fi

TOOLCHAIN=go1.26.8
TOOLCHAIN_SHA256=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7

new_enough() { # go1.24 or newer
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  major="${v%%.*}"; rest="${v#*.}"; minor="${rest%%.*}"
  case "$major$minor" in *[!0-9]*|'') return 1 ;; esac
  [ "$major" -gt 1 ] || [ "$minor" -ge 24 ]
}

# The toolchain zip from the module proxy, checked against its pinned hash.
fetch_toolchain() {
  dir="$CACHE/go-toolchain-$TOOLCHAIN"
  if [ -x "$dir/bin/go" ] && [ -f "$dir/.complete" ]; then echo "$dir/bin/go"; return 0; fi
  [ "$(uname -sm)" = "Linux x86_64" ] || { say "no Go 1.24+ found; install one (or set ALTAR_GO)"; return 1; }
  command -v curl >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1 ||
    { say "fetching Go needs curl and python3 (scripts/install-deps.sh test)"; return 1; }
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.go-toolchain.XXXXXX")"
  url="https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$TOOLCHAIN.linux-amd64.zip"
  say "no Go 1.24+ found; fetching $TOOLCHAIN from the Go module proxy"
  if ! curl -sSfL -o "$tmp/tc.zip" "$url" ||
     [ "$(sha256sum "$tmp/tc.zip" | cut -d' ' -f1)" != "$TOOLCHAIN_SHA256" ]; then
    rm -rf "$tmp"; say "fetching or checking $url failed"; return 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmp/tc.zip" "$tmp/x"
  rm -rf "$dir"
  mv "$tmp/x/golang.org/toolchain@v0.0.1-$TOOLCHAIN.linux-amd64" "$dir"
  chmod +x "$dir/bin/"* "$dir/pkg/tool/"*/* 2>/dev/null || true
  rm -rf "$tmp"
  touch "$dir/.complete"
  echo "$dir/bin/go"
}

GO="${ALTAR_GO:-}"
if [ -z "$GO" ]; then
  for g in go /usr/local/go/bin/go; do
    if command -v "$g" >/dev/null 2>&1 && new_enough "$g"; then GO="$g"; break; fi
  done
  [ -n "$GO" ] || GO="$(fetch_toolchain)" || exit 1
fi

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/.build-$NAME.XXXXXX")"
# Module files are read-only; make them writable so the clean-up can delete them.
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM

say "building $MODULE@$VERSION into $DEST (first run only; takes minutes)"
start=$(date +%s)
if ! env GOCACHE="$WORK/gocache" GOMODCACHE="$WORK/gomod" GOPATH="$WORK/gopath" \
     GOBIN="$WORK/bin" GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0 \
     nice -n 10 "$GO" install -trimpath "$MODULE@$VERSION" >"$WORK/build.log" 2>&1; then
  say "building $MODULE@$VERSION failed; last lines:"
  tail -n 25 "$WORK/build.log" >&2
  exit 1
fi
[ -x "$WORK/bin/$NAME" ] || { say "the build made no $NAME binary"; ls "$WORK/bin" >&2 || true; exit 1; }

# Build in the temp dir, then move into place, so a half-built cache never looks complete.
rm -rf "$DEST.new"
mkdir -p "$DEST.new"
mv "$WORK/bin/$NAME" "$DEST.new/$NAME"
printf '%s\n' "$MODULE@$VERSION" >"$DEST.new/.complete"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
say "built $NAME in $(( $(date +%s) - start ))s"
echo "$BIN"
