#!/bin/sh
# `altar codec` and `altar spec id` against the golden vectors in schemas/vectors:
# every vector round-trips byte for byte, spec ids match the identity vectors,
# and bad usage / bad input give exit 2 / exit 1 with a message naming the field.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin codec-cli
SRC="${ALTAR_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
V="$SRC/schemas/vectors"

# ---- every golden vector, both directions, byte for byte ----
n=0
for type in spec job status group record; do
  for json in "$V/$type"/*.json; do
    [ -f "$json" ] || { fail "no vectors for $type"; continue; }
    base="${json%.json}"
    name="$type/$(basename "$base")"
    n=$((n + 1))
    if ! "$ALTAR_BIN" codec encode --type "$type" <"$json" >"$T/enc.mp" 2>"$T/err"; then
      fail "$name: encode failed: $(cat "$T/err")"
      continue
    fi
    cmp -s "$T/enc.mp" "$base.msgpack" && ok || fail "$name: JSON does not encode to the .msgpack bytes"
    if ! "$ALTAR_BIN" codec decode --type "$type" <"$base.msgpack" >"$T/dec.json" 2>"$T/err"; then
      fail "$name: decode failed: $(cat "$T/err")"
      continue
    fi
    [ "$(wc -l <"$T/dec.json")" -eq 1 ] && ok || fail "$name: decode output is not one line"
    # decoded JSON encodes back to the very same bytes
    "$ALTAR_BIN" codec encode --type "$type" <"$T/dec.json" >"$T/re.mp" 2>"$T/err" &&
      cmp -s "$T/re.mp" "$base.msgpack" && ok || fail "$name: decode then encode is not byte-identical"
    # and decoding is stable (compact, sorted keys)
    "$ALTAR_BIN" codec decode --type "$type" <"$T/re.mp" >"$T/dec2.json" 2>/dev/null &&
      cmp -s "$T/dec.json" "$T/dec2.json" && ok || fail "$name: decode output is not stable"
  done
done
[ "$n" -ge 14 ] && ok || fail "expected at least 14 golden vectors, found $n"

# ---- spec id: the task key is the SHA-256 of the spec's canonical bytes ----
for json in "$V"/spec/*.json; do
  base="${json%.json}"
  want="$(sha256sum <"$base.msgpack" | cut -c1-64)"
  got="$("$ALTAR_BIN" spec id "$json" | sed -n 1p)"
  [ "$got" = "$want" ] && ok || fail "spec id $(basename "$json"): $got != $want"
  name="$("$ALTAR_BIN" spec id "$json" | sed -n 2p)"
  case "$name" in
    *-"$(echo "$want" | cut -c1-10)") ok ;;
    *) fail "spec id $(basename "$json"): job name $name does not end in the short hash" ;;
  esac
  "$ALTAR_BIN" spec id --json "$json" >"$T/id.json" &&
    grep -q "\"task_key\":\"$want\"" "$T/id.json" && ok || fail "spec id --json $(basename "$json")"
done

# kinds that need sanitizing: job names from schemas/vectors/identity/specs.json
job_name_of() { grep -B1 "\"name\": \"$1\"" "$V/identity/specs.json" | sed -n 's/.*"job_name": "\([^"]*\)".*/\1/p'; }
check_kind() { # vector-name kind
  want="$(job_name_of "$1")"
  [ -n "$want" ] || { fail "identity vector $1 not found"; return; }
  sed "s/\"kind\": \"score\"/\"kind\": \"$2\"/" "$V/spec/minimal.json" >"$T/k.json"
  got="$("$ALTAR_BIN" spec id - <"$T/k.json" | sed -n 2p)"
  [ "$got" = "$want" ] && ok || fail "job name for kind '$2': $got != $want"
}
check_kind kind_upper_underscore ChromBPNet_Train
check_kind kind_dots my.kind.v2
check_kind kind_all_invalid ___
check_kind kind_long aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
check_kind kind_52 kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk

# ---- usage and errors ----
expect() { # want-exit description command...
  want="$1"; what="$2"; shift 2
  "$@" >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  [ "$rc" -eq "$want" ] && ok || fail "$what: exit $rc, want $want ($(head -c 200 "$T/err"))"
}
expect 0 "codec --help" "$ALTAR_BIN" codec --help
grep -q "encode" "$T/out" && ok || fail "codec --help prints usage on stdout"
expect 0 "spec --help" "$ALTAR_BIN" spec --help
expect 0 "spec id --help" "$ALTAR_BIN" spec id --help
expect 2 "codec without args" "$ALTAR_BIN" codec
expect 2 "codec encode without --type" "$ALTAR_BIN" codec encode
expect 2 "codec unknown type" "$ALTAR_BIN" codec encode --type jobs
expect 2 "codec unknown op" "$ALTAR_BIN" codec squash --type spec
expect 2 "spec without subcommand" "$ALTAR_BIN" spec
expect 2 "spec id without file" "$ALTAR_BIN" spec id
expect 2 "spec id bad flag" "$ALTAR_BIN" spec id --frobnicate x.json
expect 1 "spec id missing file" "$ALTAR_BIN" spec id "$T/does-not-exist.json"

printf '{"kind":"k","image":"i","command":["x"],"labels":{"fold":3}}' >"$T/bad.json"
"$ALTAR_BIN" codec encode --type spec <"$T/bad.json" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && ok || fail "encode of a wrongly typed label should exit 1"
grep -q "spec.labels.fold: expected string" "$T/err" && ok || fail "error names the field: $(cat "$T/err")"
[ "$(wc -l <"$T/err")" -eq 1 ] && ok || fail "error is one line"
"$ALTAR_BIN" spec id "$T/bad.json" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "spec.labels.fold" "$T/err" && ok || fail "spec id of a bad spec: $(cat "$T/err")"

# truncated msgpack is refused with exit 1
head -c 40 "$V/status/submitted.msgpack" >"$T/trunc.mp"
"$ALTAR_BIN" codec decode --type status <"$T/trunc.mp" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "truncated" "$T/err" && ok || fail "truncated decode: $(cat "$T/err")"
# a status event fed as a job names the type field
"$ALTAR_BIN" codec decode --type job <"$V/status/running.msgpack" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "job.type" "$T/err" && ok || fail "type mismatch: $(cat "$T/err")"
# empty input
"$ALTAR_BIN" codec decode --type spec </dev/null >/dev/null 2>"$T/err"
[ $? -eq 1 ] && ok || fail "empty decode input should exit 1"

echo "codec cli: $checks checks passed, $fails failed ($n vectors)"
[ "$fails" -eq 0 ]
