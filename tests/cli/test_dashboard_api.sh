#!/bin/sh
# `altar dashboard`: the page and its assets are served from the binary,
# every /api/ page answers bounded JSON, bad queries are 400 naming the
# field, unknown pages and jobs 404, writes 405; a token, when set, is
# required on /api/ (not on /metrics); a non-loopback address without a
# token is refused. Then a small fleet (reconciler, one worker, process
# backend) runs three shards, one failing: /api/shard?key= gives a shard's
# labels, state, attempts and outputs (400/404 naming key), and the filters
# of /api/jobs and /api/job (state, kind, label, worker) with paging give
# the rows and totals the fleet's facts say, bad values 400 naming them
# (and /api/workers the worker's kept task output from its heartbeat);
# /api/overview's counters show no request read the ledger itself (a
# thread of the view keeps its snapshot fresh); `altar dashboard` on its
# own charts the reconciler's hour (from the ledger) with the same totals,
# and still after the reconciler restarts without a dashboard.
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
for p in overview jobs workers dead history; do
  [ "$(code "$base/api/$p")" = 200 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/body" ||
    fail "GET /api/$p: not 200 JSON: $(cat "$T/body")"
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["limit"]==500, d' "$T/body" 2>/dev/null
# The overview says what the serving process and the ledger cost (no ledger yet: 0 on disk).
[ "$(code "$base/api/overview")" = 200 ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["server"]["rss_bytes"] > 0 and d["ledger"]["disk_bytes"] >= 0, d' "$T/body" ||
  fail "overview without server.rss_bytes or ledger.disk_bytes: $(cat "$T/body")"
# The last hour: 360 buckets of 10 s each series; on its own the dashboard applies nothing (0 finished).
[ "$(code "$base/api/history")" = 200 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bucket_s"] == 10 and d["buckets"] == 360, d
assert all(len(d[k]) == 360 for k in ("finished", "fired", "dead_lettered", "lag")), d
assert d["totals"]["finished"] == 0 and d["failures"] == {}, d["totals"]' "$T/body" ||
  fail "/api/history: $(head -c 300 "$T/body")"
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

# A fleet: group g of kind shard, folds 0 and 1 (fold 1 exits 3, so the
# group is dead-lettered), and one shard of kind other.
mkdir -p "$T/data"
cat >"$T/fleet.yaml" <<CFG
transport: {name: local, dir: $T/flog}
backend: {name: process, data_root: $T/data, slots: 2}
ledger: {path: $T/fledger}
groups:
  shard:
    group_by: [job_id, group]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
  other:
    group_by: [job_id, group]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
CFG
fcfg="--config $T/fleet.yaml"
python3 - "$T" >"$T/specs.jsonl" <<'PY'
import json, sys
root = sys.argv[1]
for f in range(2):
    print(json.dumps({"kind": "shard", "image": "none", "command": ["/bin/sh", "-c", f"echo fold {f} > {root}/data/g-{f}.txt; exit {3 * f}"],
                      "labels": {"group": "g", "fold": str(f), "num_folds": "2"},
                      "outputs": [{"uri": f"file://{root}/out/g-{f}.txt", "logical_path": f"g-{f}.txt"}]}))
print(json.dumps({"kind": "other", "image": "none", "command": ["/bin/true"], "labels": {"group": "solo", "fold": "0", "num_folds": "1"}}))
PY
port="$(free_port)"
base="http://127.0.0.1:$port"
"$ALTAR_BIN" reconciler $fcfg --metrics "127.0.0.1:$port" >"$T/reconciler.log" 2>&1 &
rpid=$!
pids="$pids $!"
"$ALTAR_BIN" worker $fcfg --id api-w1 >"$T/worker.log" 2>&1 &
pids="$pids $!"
wait_up "$base" || fatal "the reconciler's dashboard does not answer on $base"
job="$("$ALTAR_BIN" submit $fcfg --wait --timeout 120 "$T/specs.jsonl" 2>"$T/submit.log")"
[ -n "$job" ] || fatal "submit printed no job id: $(cat "$T/submit.log")"
# The dashboard reads the ledger at most once a second: wait for all three.
i=0
until [ "$(code "$base/api/job?id=$job&state=succeeded")" = 200 ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["shards"]["total"] != 3 or d["groups"]["dead_lettered"] != 1)' "$T/body"; do
  i=$((i + 1)); [ $i -lt 300 ] || fatal "the job's three shards never showed: $(cat "$T/body")"; sleep 0.1
done
# jq-less JSON checks: jcheck URL PYTHON-EXPR (d is the body) MESSAGE
jcheck() {
  c="$(code "$1")"
  [ "$c" = 200 ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$T/body" ||
    fail "$3: $1: $c $(head -c 600 "$T/body")"
}
# A worker's heartbeat says what its backend keeps of task output and what
# the next prune removes (these shards printed nothing: nothing kept).
jcheck "$base/api/workers" '[w["kept_logs"] for w in d["workers"] if w["worker"] == "api-w1"] == [{"dirs": 0, "bytes": 0, "prune_next_dirs": 0, "prune_next_bytes": 0}]' "workers: api-w1's kept task output"
jcheck "$base/api/job?id=$job&state=failed" 'd["filtered"] and d["shards_matched"] == 1 and d["shard_list"][0]["labels"]["fold"] == "1" and d["group_list"] == []' "state=failed: the one failed shard"
jcheck "$base/api/job?id=$job&state=succeeded" 'd["shards_matched"] == 2 and d["matched_states"] == {"succeeded": 2}' "state=succeeded: two shards"
jcheck "$base/api/job?id=$job&kind=other" 'd["shards_matched"] == 1 and d["shard_list"][0]["kind"] == "other"' "kind=other"
jcheck "$base/api/job?id=$job&label=fold=0" 'd["shards_matched"] == 2 and all(s["labels"]["fold"] == "0" for s in d["shard_list"])' "label=fold=0: fold 0 of g and the solo shard"
jcheck "$base/api/job?id=$job&label=group%3Dg&state=failed" 'd["shards_matched"] == 1' "label and state together"
jcheck "$base/api/job?id=$job&worker=api-w1" 'd["shards_matched"] == 3 and all(s["worker"] == "api-w1" for s in d["shard_list"])' "worker=api-w1: every shard"
jcheck "$base/api/job?id=$job&worker=nobody" 'd["shards_matched"] == 0 and d["shard_list"] == []' "worker=nobody: none"
jcheck "$base/api/job?id=$job&state=cancelled" 'd["shards_matched"] == 0' "state=cancelled: none"
jcheck "$base/api/job?id=$job&state=waiting" 'd["shards_matched"] == 0' "state=waiting: none"
jcheck "$base/api/job?id=$job" 'not d["filtered"] and "shard_list" not in d and len(d["group_list"]) == 2' "no filter: the groups"
# Shards named and sorted by their labels: kind, group, then each label (fold
# 0 before 1), the same between polls; a group's members in that order too.
jcheck "$base/api/job?id=$job&worker=api-w1" '[s["name"] for s in d["shard_list"]] == ["fold=0 group=solo num_folds=1", "fold=0 group=g num_folds=2", "fold=1 group=g num_folds=2"]' "filtered shards in label order, named by their labels"
jcheck "$base/api/job?id=$job" '[[m["name"] for m in g["members"]] for g in d["group_list"] if g["kind"] == "shard"] == [["fold=0 group=g num_folds=2", "fold=1 group=g num_folds=2"]]' "a group's members in label order"
# Paging: one row a page, the total stays, the pages differ.
jcheck "$base/api/job?id=$job&worker=api-w1&limit=1" 'd["shards_matched"] == 3 and len(d["shard_list"]) == 1' "limit=1"
k0="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shard_list"][0]["task_key"])' "$T/body")"
jcheck "$base/api/job?id=$job&worker=api-w1&limit=1&offset=1" "d['shards_matched'] == 3 and len(d['shard_list']) == 1 and d['shard_list'][0]['task_key'] != '$k0'" "offset=1 is the next shard"
jcheck "$base/api/job?id=$job&worker=api-w1&offset=3" 'd["shards_matched"] == 3 and d["shard_list"] == []' "offset past the end: no rows"
# The jobs list: by badge state and by a shard's kind, label or worker.
jcheck "$base/api/jobs?state=dead_lettered" "d['total'] == 1 and d['jobs'][0]['job_id'] == '$job' and d['jobs'][0]['state'] == 'dead_lettered'" "jobs state=dead_lettered"
jcheck "$base/api/jobs?state=fired" 'd["total"] == 0 and d["total_all"] == 1 and d["jobs"] == []' "jobs state=fired: none"
jcheck "$base/api/jobs?kind=other" 'd["total"] == 1' "jobs kind=other"
jcheck "$base/api/jobs?label=fold=7" 'd["total"] == 0' "jobs label=fold=7: none"
jcheck "$base/api/jobs?worker=api-w1" 'd["total"] == 1' "jobs worker=api-w1"
# Bad filter values: 400 naming the parameter.
long="$(python3 -c 'print("k" * 300)')"
for q in "job?id=$job&state=bogus state" "jobs?state=succeeded state" "job?id=$job&label=nokv label" "job?id=$job&label==v label" \
  "job?id=$job&kind= kind" "jobs?worker=$long worker"; do
  url="${q% *}"; name="${q##* }"
  c="$(code "$base/api/$url")"
  [ "$c" = 400 ] && grep -q "\"$name:" "$T/body" || fail "/api/$url: $c, want 400 naming $name: $(cat "$T/body")"
done
# The shard page: the failed shard's labels, state, attempt, outputs.
jcheck "$base/api/job?id=$job&state=failed" 'True' "state=failed again"
kf="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shard_list"][0]["task_key"])' "$T/body")"
jcheck "$base/api/shard?key=$kf" "d['task_key'] == '$kf' and d['job_id'] == '$job' and d['state'] == 'failed' and d['labels']['fold'] == '1' and d['kind'] == 'shard' and d['group_state'] == 'dead_lettered' and len(d['attempt_list']) == 1 and d['attempt_list'][0]['state'] == 'failed' and d['outputs'] == ['file://$T/out/g-1.txt'] and d['worker'] == 'api-w1' and d['failure']['reason'] == 'exit_3' and d['why'] is None" "the failed shard's page"
[ "$(code "$base/api/shard")" = 400 ] && grep -q '"key:' "$T/body" || fail "shard without key: not 400 naming key: $(cat "$T/body")"
[ "$(code "$base/api/shard?key=a/b")" = 400 ] && grep -q '"key:' "$T/body" || fail "shard key a/b: not 400 naming key: $(cat "$T/body")"
[ "$(code "$base/api/shard?key=$long")" = 400 ] && grep -q '"key:' "$T/body" || fail "a 300-byte key: not 400 naming key"
[ "$(code "$base/api/shard?key=0000000000000000000000000000000000000000000000000000000000000000")" = 404 ] &&
  grep -q '"key:' "$T/body" || fail "an unknown key: not 404 naming key: $(cat "$T/body")"

# Every page above came from the snapshot the view's reader thread keeps:
# none of those requests read the ledger itself (recorded facts, not times).
jcheck "$base/api/overview" 'd["ledger"]["background_reader"] and d["ledger"]["reads_in_render"] == 0 and d["ledger"]["background_reads"] >= 1 and d["ledger"]["reads"] >= d["ledger"]["background_reads"] and d["ledger"]["renders"] >= 25 and d["ledger"]["jobs_builds"] >= 1' "pages served without reading the ledger on the request"

# `altar dashboard` alone (no reconciler in its process) charts the same
# hour: the reconciler keeps its buckets in the ledger's side keys and the
# standalone dashboard reads them. Its totals agree with the reconciler's.
rbase="$base"
port="$(free_port)"
sbase="http://127.0.0.1:$port"
"$ALTAR_BIN" dashboard $fcfg --addr "127.0.0.1:$port" >"$T/dash-alone.log" 2>&1 &
pid=$!
wait_up "$sbase" || fail "the standalone dashboard does not answer: $(cat "$T/dash-alone.log")"
totals() { [ "$(code "$1/api/history")" = 200 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["totals"], sort_keys=True))' "$T/body"; }
i=0
until r="$(totals "$rbase")" && s="$(totals "$sbase")" && [ "$r" = "$s" ]; do
  i=$((i + 1)); [ $i -lt 150 ] || { fail "standalone /api/history totals $s, the reconciler's $r"; break; }; sleep 0.1
done
echo "$s" | python3 -c 'import json,sys; t=json.load(sys.stdin); sys.exit(0 if t["finished"] == 3 and t["fired"] == 1 and t["dead_lettered"] == 1 and t["failures"] == {"exit_3": 1} else 1)' ||
  fail "standalone /api/history totals: $s, want 3 finished, 1 fired, 1 dead-lettered, one exit_3"
# The reconciler restarted without a dashboard still keeps the hour: it goes
# on from what its previous life kept, and a second job adds to it.
kill "$rpid" && wait "$rpid"
"$ALTAR_BIN" reconciler $fcfg --no-dashboard >"$T/reconciler2.log" 2>&1 &
pids="$pids $!"
job2="$("$ALTAR_BIN" submit $fcfg --wait --timeout 120 "$T/specs.jsonl" 2>"$T/submit2.log")"
[ -n "$job2" ] || fail "the second submit printed no job id: $(cat "$T/submit2.log")"
i=0
until s="$(totals "$sbase")" && echo "$s" | python3 -c 'import json,sys; t=json.load(sys.stdin); sys.exit(0 if t["finished"] == 6 and t["fired"] == 2 and t["dead_lettered"] == 2 and t["failures"] == {"exit_3": 2} else 1)'; do
  i=$((i + 1)); [ $i -lt 150 ] || { fail "after a restart without a dashboard and a second job, standalone totals $s"; break; }; sleep 0.1
done
kill "$pid" && wait "$pid"
pid=""

[ "$fails" -eq 0 ] || exit 1
echo "dashboard api: ok"
