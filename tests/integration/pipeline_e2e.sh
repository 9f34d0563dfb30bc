# Shared body of the pipeline tests (sourced; needs TRANSPORT=local|kafka).
# Part 1, the README's shape: 3 models x 5 folds -> one ensemble per model
# -> one report, followed by `submit --wait`: each ensemble reads exactly its
# model's 5 fold outputs, the report the 3 ensembles, and the fired train
# events list their members' outputs; a follow-up that cannot be made is
# dead-lettered visibly, and a dead-lettered group's then_dead runs once.
# Part 2, exactly once: PIPE_GROUPS groups of 2 folds, each firing a merge
# follow-up whose group fires a final follow-up; the reconciler is killed -9
# at random moments, once also rebuilt mid-run (--rebuild) and again at the
# end. Every task appends a line to a file: each merge and final runs once,
# each follow-up job is on the jobs topic once, none is lost.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
PIPE_GROUPS="${PIPE_GROUPS:-200}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "pipeline-$TRANSPORT" python3
prefix="pipe-$(date +%s)-$$"
mkdir -p "$T/data" "$T/results"

# ---- part 1: the 3-stage example ------------------------------------------------
{
  altar_test_fleet_config "$prefix-a" "{name: process, data_root: $T/data, slots: 4}"
  cat <<YAML
groups:
  train:
    group_by: [job_id, model_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
    then:
      kind: ensemble
      image: none
      command: [sh, -c, 'mkdir -p "\$ALTAR_DATA_ROOT/ens" && for f in \$(find "\$ALTAR_DATA_ROOT/{{inputs}}" -type f | sort); do cat "\$f"; done > "\$ALTAR_DATA_ROOT/ens/{{model_id}}.txt"']
      outputs: [{uri: "$T/results/{{model_id}}.txt", logical_path: "ens/{{model_id}}.txt"}]
      timeout_s: 60
  ensemble:
    group_by: [job_id]
    ready_when: {count_at_least: 3}
    on_failed: dead_letter
    then:
      kind: report
      image: none
      command: [sh, -c, 'n=\$(find "\$ALTAR_DATA_ROOT/{{inputs}}" -type f | wc -l); { echo "inputs \$n"; for f in \$(find "\$ALTAR_DATA_ROOT/{{inputs}}" -type f | sort); do cat "\$f"; done; } > "\$ALTAR_DATA_ROOT/report.txt"']
      outputs: [{uri: "$T/results/report.txt", logical_path: "report.txt"}]
  report:
    group_by: [job_id]
    ready_when: single
  odd:
    group_by: [job_id, part]
    ready_when: single
    then:
      kind: odd_next
      image: none
      command: ['true']
      outputs: [{uri: "$T/results/odd", logical_path: "out/{{part}}/x"}]
  odd_next:
    group_by: [job_id, part]
    ready_when: single
    on_failed: dead_letter
  fragile:
    group_by: [job_id, part]
    ready_when: single
    on_failed: dead_letter
    then_dead:
      kind: cleanup
      image: none
      command: [sh, -c, 'echo "cleanup {{kind}} {{part}} {{event_id}}" >> "$T/results/cleanup.txt"']
  cleanup:
    group_by: [job_id, part]
    ready_when: single
YAML
} >"$T/a.yaml"
for m in 1 2 3; do for f in 0 1 2 3 4; do
  printf '{"kind":"train","image":"none","command":["sh","-c","mkdir -p \\"$ALTAR_DATA_ROOT/folds\\" && echo model-%s fold %s > \\"$ALTAR_DATA_ROOT/folds/m%s-f%s.txt\\""],"labels":{"model_id":"model-%s","fold":"%s","num_folds":"5"},"outputs":[{"uri":"%s/results/m%s-f%s.txt","logical_path":"folds/m%s-f%s.txt"}],"timeout_s":60}\n' \
    $m $f $m $f $m $f "$T" $m $f $m $f
done; done >"$T/a.jsonl"
"$ALTAR_BIN" reconciler --config "$T/a.yaml" >>"$T/a-reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"
"$ALTAR_BIN" worker --config "$T/a.yaml" --id a1 >>"$T/a-worker.log" 2>&1 & wa=$!; pids="$pids $wa"
if "$ALTAR_BIN" submit --config "$T/a.yaml" --wait --timeout 300 "$T/a.jsonl" >"$T/a.out" 2>"$T/a.err"; then ok; else
  fail "submit --wait of the 3-stage pipeline: $(tail -5 "$T/a.err")"; fi
check 'grep -q "stage 2: 3 follow-up tasks of kind ensemble" "$T/a.err" && grep -q "stage 3: 1 follow-up task of kind report" "$T/a.err"' \
  "submit --wait did not follow the stages: $(cat "$T/a.err")"
for m in 1 2 3; do
  want="$(for f in 0 1 2 3 4; do echo "model-$m fold $f"; done)"
  check '[ "$(sort "$T/results/model-$m.txt" 2>/dev/null)" = "$want" ]' \
    "ensemble of model-$m read: $(cat "$T/results/model-$m.txt" 2>&1)"
done
check '[ "$(head -1 "$T/results/report.txt" 2>/dev/null)" = "inputs 3" ] && [ "$(tail -n +2 "$T/results/report.txt" | sort | uniq | wc -l)" = 15 ] && [ "$(tail -n +2 "$T/results/report.txt" | wc -l)" = 15 ]' \
  "the report did not read the 3 ensembles: $(cat "$T/results/report.txt" 2>&1)"
"$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$prefix-a.ready" --from-beginning --exit >"$T/a-ready.jsonl" 2>/dev/null
python3 - "$T/a-ready.jsonl" "$T" <<'PY' || fail "fired train events do not list their members' outputs in member order"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [e for e in evs if e["kind"] == "train"]
assert len({e["event_id"] for e in train}) == 3, len(train)
for e in train:
    uris = [o["uri"] for o in e["outputs"]]
    want = []
    for s in e["shards"]:
        m, f = s["labels"]["model_id"][-1], s["labels"]["fold"]
        want.append(f"{sys.argv[2]}/results/m{m}-f{f}.txt")
    assert uris == want, (uris, want)
PY
job_a="$(head -1 "$T/a.out")"
"$ALTAR_BIN" status --config "$T/a.yaml" "$job_a" >"$T/a-status.out" 2>&1 || true
check 'grep -q "stage 1: train odd fragile: 3 fired" "$T/a-status.out" && grep -q "stage 2: ensemble odd_next cleanup: 1 fired" "$T/a-status.out" && grep -q "stage 3: report: 1 fired" "$T/a-status.out"' \
  "altar status shows no stages: $(cat "$T/a-status.out")"
"$ALTAR_BIN" status --config "$T/a.yaml" --outputs "$job_a" >"$T/a-outputs.out" 2>&1 || true
check 'grep -q "^stage 3 group report" "$T/a-outputs.out" && grep -q "results/report.txt" "$T/a-outputs.out"' \
  "altar status --outputs shows no stages or outputs: $(cat "$T/a-outputs.out")"
# Bad input is normal input: a label that makes the follow-up's output path
# climb out of its root fails that follow-up visibly (followup_invalid, its
# stage's group dead-lettered with the reason); the reconciler goes on.
echo '{"kind":"odd","image":"none","command":["true"],"labels":{"part":"../../../../up"}}' >"$T/odd.jsonl"
rc=0
"$ALTAR_BIN" submit --config "$T/a.yaml" --wait --timeout 300 "$T/odd.jsonl" >"$T/odd.out" 2>"$T/odd.err" || rc=$?
check '[ $rc = 1 ]' "submit --wait of a job whose follow-up cannot be made exited $rc, want 1: $(tail -3 "$T/odd.err")"
check 'grep -q "followup_invalid" "$T/a-reconciler.log"' "the reconciler did not say the follow-up failed: $(tail -3 "$T/a-reconciler.log")"
"$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$prefix-a.dead" --from-beginning --exit >"$T/a-dead.jsonl" 2>/dev/null
check 'grep -q "\"kind\":\"odd_next\"" "$T/a-dead.jsonl" && grep -q "followup_invalid" "$T/a-dead.jsonl"' \
  "no dead-lettered odd_next group with the reason: $(cat "$T/a-dead.jsonl")"
# then_dead: a group dead-lettered by a failed shard starts its cleanup
# follow-up, once, carrying the dead group's event id.
echo '{"kind":"fragile","image":"none","command":["sh","-c","exit 3"],"labels":{"part":"p1"}}' >"$T/fragile.jsonl"
rc=0
"$ALTAR_BIN" submit --config "$T/a.yaml" --wait --timeout 300 "$T/fragile.jsonl" >"$T/fragile.out" 2>"$T/fragile.err" || rc=$?
check '[ $rc = 1 ]' "submit --wait of a failing job with then_dead exited $rc, want 1: $(tail -3 "$T/fragile.err")"
"$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$prefix-a.dead" --from-beginning --exit >"$T/a-dead.jsonl" 2>/dev/null
python3 - "$T" <<'PY' || fail "then_dead: the cleanup follow-up did not run once for the dead fragile group"
import json, sys, time
d = sys.argv[1]
dead = [e for e in map(json.loads, filter(str.strip, open(f"{d}/a-dead.jsonl"))) if e.get("kind") == "fragile"]
assert len(dead) == 1, dead
lines = []
for _ in range(600):  # submit --wait follows the cleanup's stage; allow a slow run
    try:
        lines = open(f"{d}/results/cleanup.txt").read().splitlines()
    except OSError:
        lines = []
    if lines:
        break
    time.sleep(0.1)
assert lines == [f"cleanup fragile p1 {dead[0]['event_id']}"], lines
PY
check 'kill -0 "$rec"' "the reconciler stopped on a follow-up it could not make"
kill -TERM "$rec" "$wa" 2>/dev/null || true
wait "$rec" "$wa" 2>/dev/null || true

# ---- part 2: kill -9 and rebuilds, every follow-up once ---------------------------
mkdir -p "$T/b"
{
  altar_test_fleet_config "$prefix-b" "{name: process, data_root: $T/data, slots: 6}"
  cat <<YAML
groups:
  shard:
    group_by: [job_id, group]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
    then:
      kind: merge
      image: none
      command: [sh, -c, 'echo "merge {{group}}" >> "$T/b/runs.log"']
  merge:
    group_by: [job_id, group]
    ready_when: single
    on_failed: dead_letter
    then:
      kind: final
      image: none
      command: [sh, -c, 'echo "final {{group}}" >> "$T/b/runs.log"']
  final:
    group_by: [job_id, group]
    ready_when: single
YAML
} >"$T/b.yaml"
python3 - "$T" "$PIPE_GROUPS" >"$T/b.jsonl" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for g in range(n):
    for f in range(2):
        print(json.dumps({"kind": "shard", "image": "none",
                          "command": ["sh", "-c", 'sleep 0.1; echo "shard $0" >> "$1"', f"g{g:03d}/{f}", f"{d}/b/runs.log"],
                          "labels": {"group": f"g{g:03d}", "fold": str(f), "num_folds": "2"}, "timeout_s": 60}))
PY
cfg="--config $T/b.yaml"
start_rec() { "$ALTAR_BIN" reconciler $cfg >>"$T/b-reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"; }
start_rec
"$ALTAR_BIN" worker $cfg --id b1 >>"$T/b-worker1.log" 2>&1 & w1=$!; pids="$pids $w1"
"$ALTAR_BIN" worker $cfg --id b2 >>"$T/b-worker2.log" 2>&1 & w2=$!; pids="$pids $w2"
job="$("$ALTAR_BIN" submit $cfg "$T/b.jsonl")"
finals() { grep -c '^final ' "$T/b/runs.log" 2>/dev/null || true; }
kills=0
# Random moments while the stages run: a kill -9, a restart; once a rebuild between.
for round in 1 2 3 4 5 6 7 8; do
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.2, 1.5), 2))')"
  kill -9 "$rec" 2>/dev/null || true
  wait "$rec" 2>/dev/null || true
  kills=$((kills + 1))
  if [ "$round" = 4 ]; then
    # Mid-run the rebuilt ledger holds events the killed one had not applied
    # yet, so its checksum differs (exit 1); it must still be swapped in.
    "$ALTAR_BIN" reconciler $cfg --rebuild >>"$T/b-rebuild.out" 2>>"$T/b-reconciler.log" || true
    check 'grep -q "^rebuilt " "$T/b-rebuild.out"' "the rebuild mid-run failed: $(tail -3 "$T/b-reconciler.log")"
  fi
  start_rec
done
deadline=$(( $(date +%s) + 600 ))
while [ "$(finals)" -lt "$PIPE_GROUPS" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
check '[ "$(finals)" -ge "$PIPE_GROUPS" ]' "only $(finals) of $PIPE_GROUPS final stages ran: $(tail -5 "$T/b-reconciler.log")"
# Settle: the reconciler drains what is left, then a rebuild at the end, then a
# reconciler on the rebuilt ledger drains again; the workers are stopped last.
kill -TERM "$rec" 2>/dev/null || true; wait "$rec" 2>/dev/null || true
"$ALTAR_BIN" reconciler $cfg --exit-when-idle >>"$T/b-reconciler.log" 2>&1 || fail "the draining reconciler failed"
"$ALTAR_BIN" reconciler $cfg --rebuild >"$T/b-rebuild-end.out" 2>>"$T/b-reconciler.log" ||
  fail "the final rebuild failed: $(tail -3 "$T/b-reconciler.log")"
check 'grep -q " 0 missing events published" "$T/b-rebuild-end.out"' \
  "the final rebuild published something again: $(cat "$T/b-rebuild-end.out")"
"$ALTAR_BIN" reconciler $cfg --exit-when-idle >>"$T/b-reconciler.log" 2>&1 || fail "the last reconciler failed"
kill -TERM "$w1" "$w2" 2>/dev/null || true
wait "$w1" "$w2" 2>/dev/null || true
"$ALTAR_BIN" log consume $cfg --topic "$prefix-b.jobs" --from-beginning --exit --headers >"$T/b-jobs.jsonl" 2>/dev/null
python3 - "$T/b/runs.log" "$T/b-jobs.jsonl" "$PIPE_GROUPS" <<'PY' || fail "a stage ran other than once"
import collections, json, sys
runs = collections.Counter(l.strip() for l in open(sys.argv[1]) if l.strip())
n = int(sys.argv[3])
for stage in ("merge", "final"):
    lines = {k: c for k, c in runs.items() if k.startswith(stage + " ")}
    assert len(lines) == n, f"{stage}: {len(lines)} of {n} groups ran"
    twice = [k for k, c in lines.items() if c != 1]
    assert not twice, f"{stage} ran more than once: {twice[:5]}"
jobs = collections.Counter()
for l in open(sys.argv[2]):
    hdrs, _, body = l.partition("\t")
    try:
        h, j = json.loads(hdrs), json.loads(body)
    except ValueError:
        continue
    # A worker forwarding a waiting job to a peer writes a copy (same key):
    # placement, not a second submission.
    if "altar.forwarded.from" in h:
        continue
    if j.get("spec", {}).get("kind") in ("merge", "final"):
        jobs[(j["spec"]["kind"], j["spec"]["labels"]["group"])] += 1
assert len(jobs) == 2 * n, f"{len(jobs)} follow-up jobs on the jobs topic, want {2 * n}"
dup = [k for k, c in jobs.items() if c != 1]
assert not dup, f"follow-ups submitted more than once: {dup[:5]}"
print(f"ok: {n} merges and {n} finals, each run once and submitted once")
PY
echo "reconciler killed $kills times, rebuilt twice; $(grep -c 'not sent again' "$T/b-reconciler.log" || true) restart(s) found follow-ups out already"
altar_test_end "pipeline-$TRANSPORT"
