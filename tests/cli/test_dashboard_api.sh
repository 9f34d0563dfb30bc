#!/bin/sh
# `altar dashboard`: the page and its assets are served from the binary,
# every /api/ page answers bounded JSON, bad queries are 400 naming the
# field, unknown pages and jobs 404, writes 405; a token, when set, is
# required on /api/ (not on /metrics); a non-loopback address without a
# token is refused.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin dashboard-api curl
pid=""
on_cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; }
cat >"$T/altar.yaml" <<CFG
transport: {name: local, dir: $T/log}
backend: {name: process, data_root: $T/data, slots: 1}
ledger: {path: $T/ledger}
CFG
cfg="--config $T/altar.yaml"
# code URL [curl args]: the HTTP status, the body in $T/body
code() { u="$1"; shift; curl -s --noproxy '*' -o "$T/body" -w '%{http_code}' "$@" "$u"; }
wait_up() {
  i=0
  while [ $i -lt 100 ]; do
    [ "$(code "$1/metrics")" = 200 ] && return 0
    i=$((i + 1)); sleep 0.1
  done
  return 1
}

port="$(free_port)"
base="http://127.0.0.1:$port"
"$ALTAR_BIN" dashboard $cfg --addr "127.0.0.1:$port" >"$T/dash.log" 2>&1 &
pid=$!
wait_up "$base" || fail "no answer on $base: $(cat "$T/dash.log")"
[ "$(code "$base/")" = 200 ] && grep -q '<script src="/app.js">' "$T/body" || fail "GET / is not the page"
[ "$(code "$base/app.js")" = 200 ] && grep -q "POLL_MS" "$T/body" || fail "GET /app.js"
[ "$(code "$base/style.css")" = 200 ] || fail "GET /style.css"
for p in overview jobs workers dead; do
  [ "$(code "$base/api/$p")" = 200 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body" ||
    fail "GET /api/$p: not 200 JSON: $(cat "$T/body")"
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["limit"]==500, d' "$T/body" 2>/dev/null
# The overview says what the serving process and the ledger cost (no ledger yet: 0 on disk).
[ "$(code "$base/api/overview")" = 200 ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["server"]["rss_bytes"] > 0 and d["ledger"]["disk_bytes"] >= 0, d' "$T/body" ||
  fail "overview without server.rss_bytes or ledger.disk_bytes: $(cat "$T/body")"
[ "$(code "$base/api/jobs?limit=100000")" = 200 ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["limit"]==500, d' "$T/body" ||
  fail "limit is not capped at 500: $(cat "$T/body")"
[ "$(code "$base/api/jobs?offset=-1")" = 400 ] && grep -q offset "$T/body" || fail "offset=-1 is not 400 naming offset"
[ "$(code "$base/api/jobs?limit=x")" = 400 ] && grep -q limit "$T/body" || fail "limit=x is not 400 naming limit"
[ "$(code "$base/api/job?id=nope")" = 404 ] || fail "an unknown job is not 404"
[ "$(code "$base/api/job")" = 400 ] || fail "job without id is not 400"
[ "$(code "$base/api/nope")" = 404 ] || fail "an unknown page is not 404"
[ "$(code "$base/nope.html")" = 404 ] || fail "an unknown asset is not 404"
[ "$(code "$base/api/jobs" -X POST -d x)" = 405 ] || fail "POST is not 405"
[ "$(code "$base/api/jobs" -X DELETE)" = 405 ] || fail "DELETE is not 405"
kill "$pid" && wait "$pid"
rc=$?
[ "$rc" = 0 ] || fail "SIGTERM: exit $rc"
pid=""

# With a token.
printf 's3cret-token\n' >"$T/token"
port="$(free_port)"
base="http://127.0.0.1:$port"
"$ALTAR_BIN" dashboard $cfg --addr "127.0.0.1:$port" --token-file "$T/token" >"$T/dash2.log" 2>&1 &
pid=$!
wait_up "$base" || fail "no answer on $base (token): $(cat "$T/dash2.log")"
[ "$(code "$base/api/jobs")" = 401 ] || fail "no token: not 401"
[ "$(code "$base/api/jobs" -H 'Authorization: Bearer wrong')" = 401 ] || fail "a wrong token: not 401"
[ "$(code "$base/api/jobs" -H 'Authorization: Bearer s3cret-token')" = 200 ] || fail "the token: not 200"
[ "$(code "$base/metrics")" = 200 ] || fail "/metrics needs no token"
kill "$pid" && wait "$pid"
pid=""

# Off loopback without a token: refused before anything listens.
out="$("$ALTAR_BIN" dashboard $cfg --addr "0.0.0.0:$(free_port)" 2>&1)"
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "token is required" || fail "0.0.0.0 without a token: exit $rc: $out"
out="$(ALTAR_DASHBOARD_TOKEN= "$ALTAR_BIN" reconciler $cfg --metrics "0.0.0.0:$(free_port)" 2>&1)"
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q "token is required" || fail "reconciler on 0.0.0.0 without a token: exit $rc: $out"

[ "$fails" -eq 0 ] || exit 1
echo "dashboard api: ok"
