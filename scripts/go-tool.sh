#!/bin/sh
# Builds a Go program from the Go module proxy, once, into a cache outside the
# work tree, and prints the path of the binary. Later runs reuse the cache while
# the module and version match, and touch no network.
#   go-tool.sh NAME MODULE VERSION
#     NAME     the binary's name and the cache directory's stem
#     MODULE   the Go package to install (its main package)
#     VERSION  a release tag or a pseudo-version (pinned; no look-ups by name)
#   ALTAR_CACHE  cache root (default: $HOME/.cache/altar)
#   ALTAR_GO     the go command (default: go on PATH, else /usr/local/go/bin/go)
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

GO="${ALTAR_GO:-}"
if [ -z "$GO" ]; then
  if command -v go >/dev/null 2>&1; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else say "no go command found; install Go 1.24 or newer (or set ALTAR_GO)"; exit 1
  fi
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
