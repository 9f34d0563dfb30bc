#!/bin/bash
# Builds a Kubernetes control plane without a kubelet from the Go module proxy,
# once, into a cache outside the work tree, and prints the bin directory:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
# A later run with the same versions reuses the cache and touches no network.
#   ALTAR_CACHE             cache root (default: $HOME/.cache/altar)
#   ALTAR_K8S_VERSION       k8s.io/kubernetes (default: v1.37.2; staging modules v0.<minor>.<patch>)
#   ALTAR_ETCD_VERSION      go.etcd.io/etcd/server/v3 (default: v3.7.3)
#   ALTAR_KWOK_VERSION      sigs.k8s.io/kwok (default: v0.8.0)
#   ALTAR_GO                the go command (default: go >= 1.26 on PATH or in /usr/local/go,
#                           else Go ALTAR_GO_VERSION (1.26.8) fetched from the Go module proxy)
# The build runs under nice; Go's build and module caches live in a temporary
# directory that is deleted afterwards, and the binaries move into place in one
# rename, so an interrupted build leaves no half-filled cache behind.
# Progress and errors go to stderr; stdout carries only the bin directory.
set -euo pipefail

K8S="${ALTAR_K8S_VERSION:-v1.37.2}"
ETCD="${ALTAR_ETCD_VERSION:-v3.7.3}"
KWOK="${ALTAR_KWOK_VERSION:-v0.8.0}"
CACHE="${ALTAR_CACHE:-${HOME:-/root}/.cache/altar}"
HOME_DIR="$CACHE/k8s-$K8S-etcd-$ETCD-kwok-$KWOK"
BIN="$HOME_DIR/bin"
BINARIES="etcd kube-apiserver kube-controller-manager kube-scheduler kwok"

say() { echo "k8s-build: $*" >&2; }
die() { say "$*"; exit 1; }

for v in K8S ETCD KWOK; do
  [[ "${!v}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "version $v='${!v}' must look like v1.2.3"
done
# The staging modules carry the version v0.<minor>.<patch> of the release.
STAGING="v0.${K8S#v1.}"

complete() {
  [ -f "$BIN/.complete" ] || return 1
  local b
  for b in $BINARIES; do [ -x "$BIN/$b" ] || return 1; done
}
if complete; then echo "$BIN"; exit 0; fi

# Go >= GO_MIN: the one on PATH or in /usr/local/go, else the toolchain the
# Go module proxy serves as the module golang.org/toolchain (what the go
# command itself downloads for GOTOOLCHAIN), unpacked once into the cache.
GO_MIN=1.26
GO_FETCH="${ALTAR_GO_VERSION:-1.26.8}"
go_ok() { # go-binary: prints it when its version is at least GO_MIN
  local v
  [ -x "$1" ] || return 1
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -n 1)" = "$GO_MIN" ] || return 1
  echo "$1"
}
fetch_go() {
  local dir="$CACHE/go-$GO_FETCH" arch
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) die "no Go toolchain for $(uname -m)" ;; esac
  if ! go_ok "$dir/bin/go" >/dev/null; then
    local mod="golang.org/toolchain/@v/v0.0.1-go$GO_FETCH.linux-$arch.zip" tmpd
    say "fetching Go $GO_FETCH from the Go module proxy ($mod)"
    mkdir -p "$CACHE"
    tmpd="$(mktemp -d "$CACHE/.go-fetch.XXXXXX")"
    curl -fsSL --retry 3 -o "$tmpd/go.zip" "${GOPROXY_URL:-https://proxy.golang.org}/$mod" ||
      { rm -rf "$tmpd"; die "could not download $mod"; }
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmpd/go.zip" "$tmpd/x" ||
      { rm -rf "$tmpd"; die "could not unpack $mod"; }
    rm -rf "$dir"
    mv "$tmpd/x/golang.org/toolchain@v0.0.1-go$GO_FETCH.linux-$arch" "$dir"
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
    rm -rf "$tmpd"
  fi
  go_ok "$dir/bin/go" || die "the fetched Go toolchain in $dir does not run"
}
GO="${ALTAR_GO:-}"
[ -n "$GO" ] || GO="$(go_ok "$(command -v go 2>/dev/null || true)" || go_ok /usr/local/go/bin/go || fetch_go)"
go_ok "$GO" >/dev/null || die "Go $GO_MIN or newer is needed (got $GO)"

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/.k8s-build.XXXXXX")"
cleanup() {
  # Module cache files are read-only; make them deletable first.
  chmod -R u+w "$WORK" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export GOCACHE="$WORK/gocache" GOMODCACHE="$WORK/gomodcache" GOPATH="$WORK/gopath"
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false" CGO_ENABLED=0
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
OUT="$WORK/bin"
mkdir -p "$OUT"
GOV="$("$GO" env GOVERSION)"
start=$(date +%s)
say "building $K8S (staging $STAGING), etcd $ETCD, kwok $KWOK with $GOV into $HOME_DIR (13-20 min on two cores)"

# A wrapper module for each program, so that each one resolves its own
# dependency versions the way its authors pinned them.
wrapper() { # dir module-requirement...
  local dir="$1"; shift
  mkdir -p "$dir"
  { echo "module altar.test/$(basename "$dir")"; echo; echo "go ${GOV#go}"; echo
    local r; for r in "$@"; do echo "require $r"; done; } >"$dir/go.mod"
}

# kubernetes: its own go.mod requires each staging module at v0.0.0 and
# replaces it with a directory of its repository; the wrapper points those at
# the published releases instead.
kdir="$WORK/kubernetes"
wrapper "$kdir" "k8s.io/kubernetes $K8S"
kmod="$(cd "$kdir" && nice -n 10 "$GO" mod download -json "k8s.io/kubernetes@$K8S" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
[ -f "$kmod" ] || die "could not fetch k8s.io/kubernetes@$K8S"
staging="$(sed -nE 's/^[[:space:]]+(k8s\.io\/[a-z0-9-]+) v0\.0\.0$/\1/p' "$kmod")"
[ -n "$staging" ] || die "no staging modules found in k8s.io/kubernetes@$K8S go.mod"
{ echo; for m in $staging; do echo "replace $m => $m $STAGING"; done; } >>"$kdir/go.mod"
grep '^godebug' "$kmod" >>"$kdir/go.mod" || true
say "kubernetes: $(echo "$staging" | wc -w) staging modules at $STAGING"
( cd "$kdir" &&
  nice -n 10 "$GO" get k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler >&2 &&
  nice -n 10 "$GO" build -mod=mod -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S" | cut -d. -f2)" \
      -o "$OUT/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler >&2
) || die "kubernetes build failed"

# etcd: the server module replaces its sibling modules with directories too.
edir="$WORK/etcd"
wrapper "$edir" "go.etcd.io/etcd/server/v3 $ETCD"
emod="$(cd "$edir" && nice -n 10 "$GO" mod download -json "go.etcd.io/etcd/server/v3@$ETCD" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
[ -f "$emod" ] || die "could not fetch go.etcd.io/etcd/server/v3@$ETCD"
{ echo; sed -nE 's/^[[:space:]]+(go\.etcd\.io\/etcd\/[a-z0-9/]+) => \.\..*$/\1/p' "$emod" |
    while read -r m; do echo "replace $m => $m $ETCD"; done; } >>"$edir/go.mod"
( cd "$edir" &&
  nice -n 10 "$GO" get go.etcd.io/etcd/server/v3 >&2 &&
  nice -n 10 "$GO" build -mod=mod -trimpath -ldflags "-s -w" -o "$WORK/etcd-out/" go.etcd.io/etcd/server/v3 >&2
) || die "etcd build failed"
# The server module's main package is its root, so the binary is named "server".
mv "$WORK/etcd-out/server" "$OUT/etcd"

# kwok has no replace directives; still built from a wrapper for one flag set.
wdir="$WORK/kwok"
wrapper "$wdir" "sigs.k8s.io/kwok $KWOK"
( cd "$wdir" &&
  nice -n 10 "$GO" get sigs.k8s.io/kwok/cmd/kwok >&2 &&
  nice -n 10 "$GO" build -mod=mod -trimpath -ldflags "-s -w" -o "$OUT/" sigs.k8s.io/kwok/cmd/kwok >&2
) || die "kwok build failed"

for b in $BINARIES; do [ -x "$OUT/$b" ] || die "missing $b after build"; done
echo "k8s $K8S etcd $ETCD kwok $KWOK $GOV" >"$OUT/.complete"
# Into place in one rename; a concurrent builder that won the race is kept.
mkdir -p "$HOME_DIR"
[ -d "$BIN" ] && ! complete && rm -rf "$BIN"
if ! mv -T "$OUT" "$BIN" 2>/dev/null; then
  complete || die "could not move the binaries into $BIN"
fi
say "built in $(( $(date +%s) - start )) s; $(du -sh "$BIN" | cut -f1) of binaries"
echo "$BIN"
