#!/bin/sh
# Checks (or, with --fix, applies) the one C style of .clang-format on
# altar's C sources: every part, the tests, the benches and the tools.
# With FILE arguments, only those (e.g. the files a change touched).
# usage: scripts/check-format.sh [--fix] [SOURCE_DIR] [FILE...]
set -eu
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
src="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
[ $# -gt 0 ] && shift
cf="${CLANG_FORMAT:-clang-format}"
command -v "$cf" >/dev/null || { echo "check-format: $cf not found (scripts/install-deps.sh test installs it)" >&2; exit 2; }
cd "$src"
if [ $# -gt 0 ]; then
  files="$*"
else
  files=$(find core storage transports backends producer worker ledger reconciler dashboard cli include tests bench \
    tools -name '*.[ch]' -type f 2>/dev/null | LC_ALL=C sort)
fi
[ -n "$files" ] || { echo "check-format: no C file under $src" >&2; exit 2; }
if [ "$fix" = 1 ]; then
  # shellcheck disable=SC2086
  "$cf" --style=file -i $files
  exit 0
fi
bad=0
for f in $files; do
  if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted as .clang-format says (scripts/check-format.sh --fix . $f)"
    bad=$((bad + 1))
  fi
done
[ "$bad" = 0 ] || { echo "check-format: $bad file(s) to format"; exit 1; }
echo "check-format: every C file formatted"
