#!/bin/sh
# The public headers, both tiers: include/altar/ (what a user of the library
# calls) and include/altar/plugin/ (what an implementer of a backend,
# transport, storage adapter or ledger needs). Each compiles on its own,
# includes only other altar headers and the C and POSIX system headers (no
# jansson, msgpack, librdkafka, curl, RocksDB... : those are altar's
# business, not its users'), and wraps its declarations for export. A user
# header never includes a plug-in header: the tiers point one way.
# usage: public_headers.sh CC INCLUDE_DIR GENERATED_INCLUDE_DIR
set -u
cc="$1" inc="$2" gen="$3"
system='assert|ctype|errno|inttypes|limits|signal|stdarg|stdbool|stddef|stdint|stdio|stdlib|string|strings|time|unistd|pthread|sys/types|sys/time|sys/stat'
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
n=0
for h in "$inc"/altar/*.h "$inc"/altar/plugin/*.h; do
  [ -e "$h" ] || continue
  n=$((n + 1))
  name="${h#"$inc"/}"
  bad="$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' "$h" | grep -vE "<($system)\.h>")"
  [ -z "$bad" ] || fail "$name includes a header that is not altar's nor the system's: $bad"
  q="$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$h" | grep -vE '"altar/(plugin/)?[a-z0-9_]+\.h"')"
  [ -z "$q" ] || fail "$name includes a non-public header: $q"
  case "$name" in
  altar/plugin/*) ;;
  *)
    up="$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"altar/plugin/' "$h")"
    [ -z "$up" ] || fail "$name is a user header but includes a plug-in header: $up"
    ;;
  esac
  if [ "$name" != altar/export.h ] && grep -q 'ALTAR_API_BEGIN' "$h" && ! grep -q 'ALTAR_API_END' "$h"; then
    fail "$name opens ALTAR_API_BEGIN without ALTAR_API_END"
  fi
  printf '#include "%s"\nint altar_header_check_;\n' "$name" |
    "$cc" -std=c11 -fsyntax-only -Wall -Werror -I "$inc" -I "$gen" -x c - 2>"${TMPDIR:-/tmp}/altar-hdr.$$" ||
    fail "$name does not compile on its own: $(head -3 "${TMPDIR:-/tmp}/altar-hdr.$$")"
done
rm -f "${TMPDIR:-/tmp}/altar-hdr.$$"
[ "$n" -gt 10 ] || fail "only $n public headers found under $inc/altar"
echo "public headers: $n checked, $fails failure(s)"
[ "$fails" -eq 0 ]
