#!/bin/sh
# altar digest sha256|verify|program, compared with sha256sum.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin digest-cli

# expect CODE CMD...: runs CMD, keeps stdout in $T/out and stderr in $T/err.
expect() {
  want=$1; shift
  "$@" >"$T/out" 2>"$T/err"
  got=$?
  [ "$got" = "$want" ] || fail "exit $got, want $want: $* (stderr: $(head -c 300 "$T/err"))"
}
contains() { grep -q -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 300 "$1")"; }

printf 'hello\n' >"$T/f"
head -c 300000 /dev/urandom >"$T/big"
mkdir "$T/d"
ln -s f "$T/link"

# sha256 agrees with sha256sum.
for f in f big link; do
  expect 0 "$ALTAR_BIN" digest sha256 "$T/$f"
  want="sha256:$(sha256sum <"$T/$f" | cut -c1-64)"
  [ "$(cat "$T/out")" = "$want" ] || fail "sha256 $f: $(cat "$T/out") != $want"
done
expect 1 "$ALTAR_BIN" digest sha256 "$T/missing"
contains "$T/err" missing
expect 1 "$ALTAR_BIN" digest sha256 "$T/d"
contains "$T/err" directory
expect 2 "$ALTAR_BIN" digest sha256
expect 2 "$ALTAR_BIN" digest sha256 a b
expect 0 "$ALTAR_BIN" digest sha256 --help
contains "$T/out" "usage: altar digest sha256"

D="sha256:$(sha256sum <"$T/f" | cut -c1-64)"
BAD="sha256:$(printf 'other' | sha256sum | cut -c1-64)"

# verify: hashes first, then a record accepts it.
expect 0 "$ALTAR_BIN" digest verify "$T/f" "$D"
contains "$T/out" "hashed"
[ -f "$T/.f.altar-verified" ] || fail "no record written"
expect 0 "$ALTAR_BIN" digest verify "$T/f" "$D"
contains "$T/out" "verification record"
expect 0 "$ALTAR_BIN" digest verify "$T/f" "$D" --no-trust-record
contains "$T/out" "hashed"
# --no-record writes none.
printf 'hello\n' >"$T/g"
expect 0 "$ALTAR_BIN" digest verify --no-record "$T/g" "$D"
[ -e "$T/.g.altar-verified" ] && fail "--no-record wrote a record"
# A touched file's record is stale.
touch -d '2001-01-01' "$T/f"
expect 0 "$ALTAR_BIN" digest verify "$T/f" "$D"
contains "$T/out" "hashed"
# Symlinks are followed.
expect 0 "$ALTAR_BIN" digest verify "$T/link" "$D" --no-trust-record
# Mismatch, missing, directory: exit 1 with a reason.
expect 1 "$ALTAR_BIN" digest verify "$T/f" "$BAD"
contains "$T/err" mismatch
expect 1 "$ALTAR_BIN" digest verify "$T/missing" "$D"
contains "$T/err" missing
expect 1 "$ALTAR_BIN" digest verify "$T/d" "$D"
contains "$T/err" directory
# Malformed digests and bad usage: exit 2.
expect 2 "$ALTAR_BIN" digest verify "$T/f" "$(echo "$D" | tr a-f A-F)"
contains "$T/err" malformed
expect 2 "$ALTAR_BIN" digest verify "$T/f" "$(sha256sum <"$T/f" | cut -c1-64)"
expect 2 "$ALTAR_BIN" digest verify "$T/f"
expect 2 "$ALTAR_BIN" digest verify "$T/f" "$D" --bogus
expect 0 "$ALTAR_BIN" digest verify --help
contains "$T/out" "no-trust-record"

# program: runs under sh and agrees with verify.
expect 0 "$ALTAR_BIN" digest program
cp "$T/out" "$T/prog.sh"
expect 0 "$ALTAR_BIN" digest program --no-trust-records
cp "$T/out" "$T/prog-hash.sh"
cmp -s "$T/prog.sh" "$T/prog-hash.sh" && fail "--no-trust-records printed the same program"
expect 0 "$ALTAR_BIN" digest program --help
expect 2 "$ALTAR_BIN" digest program --nope
hex=${D#sha256:}
expect 0 sh -c "$(cat "$T/prog.sh")" verify "$hex  $T/f"
contains "$T/out" "OK $T/f (record)"
expect 0 sh -c "$(cat "$T/prog-hash.sh")" verify "$hex  $T/f"
contains "$T/out" "OK $T/f (hashed)"
expect 1 sh -c "$(cat "$T/prog.sh")" verify "$hex  $T/f" "${BAD#sha256:}  $T/f" "$hex  $T/d"
[ "$(wc -l <"$T/out")" -eq 3 ] || fail "program printed $(wc -l <"$T/out") lines for 3 files"
# A record the program writes is accepted by altar digest verify.
printf 'fresh\n' >"$T/h"
H=$(sha256sum <"$T/h" | cut -c1-64)
expect 0 sh -c "$(cat "$T/prog.sh")" verify "$H  $T/h"
contains "$T/out" "(hashed)"
expect 0 "$ALTAR_BIN" digest verify "$T/h" "sha256:$H"
contains "$T/out" "verification record"

expect 0 "$ALTAR_BIN" digest --help
expect 2 "$ALTAR_BIN" digest
expect 2 "$ALTAR_BIN" digest frobnicate

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo "ok: altar digest"
