#!/bin/sh
# Builds (or reuses) a virtual environment with the pinned Modal SDK
# (tests/modal/requirements.txt) under ~/.cache/altar/modal-<version>/ and
# prints its python's path. Rebuilt when the requirements file changes.
# Needs Debian's python3-venv (scripts/install-deps.sh) and PyPI.
set -eu
SRC="$(cd "$(dirname "$0")/.." && pwd)"
REQ="$SRC/tests/modal/requirements.txt"
VERSION="$(sed -n 's/^modal==//p' "$REQ")"
BASE="${ALTAR_CACHE:-$HOME/.cache/altar}/modal-$VERSION"
VENV="$BASE/venv"
STAMP="$VENV/.altar-requirements"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

mkdir -p "$BASE"
# One builder at a time (ctest may start two test programs that need it).
exec 9>"$BASE/.lock"
flock 9
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && cmp -s "$REQ" "$STAMP"; then
  echo "$VENV/bin/python"
  exit 0
fi
rm -rf "$VENV"
echo "altar: building the Modal SDK $VERSION environment in $VENV" >&2
"$PY" -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$REQ" >&2
"$VENV/bin/python" -c "import modal, modal_proto.api_grpc, grpclib.server, aiohttp.web" >&2
cp "$REQ" "$STAMP"
echo "$VENV/bin/python"
