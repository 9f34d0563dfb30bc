# Shared body of the wide-group tests (sourced; needs TRANSPORT=local|kafka).
# Groups of any width (#28 item 4). A group wider than one message lists
# (ALTAR_MAX_ARRAY = 4,096) fires with ONE group event, sent as a head and
# pages (schemas/README.md, "group events of any width"), and ONE follow-up,
# which gets the members' outputs as one manifest input.
# Part 1: WIDE_REAL (5,000) real members on the process backend, each
#   writing an output, submitted with `submit --wait`.
# Part 2: WIDE_SYN (100,000) members as synthetic status events (submitted +
#   succeeded, each with a spec naming an output) produced through the real
#   log; the reconciler and a worker (for the follow-up) are the real ones.
# Part 3: WIDE_BLOCKED (4,100) synthetic members whose manifest the storage
#   cannot write at first: the reconciler retries, the follow-up runs once.
# Each part checks: one head for the group (members_total, pages), every
# message on the ready topic within 4 MiB (re-encoded by the codec), the
# whole member and output lists through `altar group members`, the
# follow-up run once with a manifest of every output.
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
WIDE_REAL="${WIDE_REAL:-5000}"
WIDE_SYN="${WIDE_SYN:-100000}"
WIDE_BLOCKED="${WIDE_BLOCKED:-4100}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "wide-group-$TRANSPORT" python3
prefix="wide-$(date +%s)-$$"
mkdir -p "$T/data" "$T/results/out" "$T/results/syn"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 8}"
  cat <<YAML
groups:
  shard:
    group_by: [job_id]
    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}
    on_failed: dead_letter
    then:
      kind: merge
      image: none
      command: [sh, -c, 'm="\$ALTAR_DATA_ROOT/{{inputs}}/manifest.jsonl"; echo "{{job_id}} \$(wc -l < "\$m") \$(ls "\$ALTAR_DATA_ROOT/{{inputs}}" | wc -l) \$(sort -u "\$m" | wc -l)" >> "$T/results/merge.txt"']
      timeout_s: 300
  merge:
    group_by: [job_id]
    ready_when: single
YAML
} >"$T/a.yaml"

# The ready topic's messages for one job: every one within the bound, one
# head for its group; prints "EVENT_ID MEMBERS_TOTAL PAGES HEADS PAGE_MSGS MAX_BYTES".
ready_check() {
  "$ALTAR_BIN" log consume --config "$T/a.yaml" --topic "$prefix.ready" --from-beginning --exit >"$T/ready.jsonl" 2>/dev/null
  python3 - "$T/ready.jsonl" "$1" "$ALTAR_BIN" <<'PY'
import json, subprocess, sys
job, binp = sys.argv[2], sys.argv[3]
heads, pages, biggest = [], {}, 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    m = json.loads(line)
    if m.get("kind") != "shard":
        continue
    if m["type"] == "group":
        if m["shards"][0]["labels"].get("job_id") != job:
            continue
        heads.append(m)
    elif m["type"] == "group_page":
        pages[m["event_id"]] = pages.get(m["event_id"], 0) + 1
    else:
        continue
    # the message's own bytes: the codec re-encodes it exactly as sent
    b = subprocess.run([binp, "codec", "encode", "--type", m["type"]], input=line.encode(), capture_output=True, check=True).stdout
    biggest = max(biggest, len(b))
    assert len(b) <= 4 * 1024 * 1024, len(b)
assert len(heads) == 1, len(heads)
h = heads[0]
print(h["event_id"], h.get("members_total", len(h["shards"])), h.get("pages", 0), len(heads), pages.get(h["event_id"], 0), biggest)
PY
}

"$ALTAR_BIN" reconciler --config "$T/a.yaml" >>"$T/reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"
"$ALTAR_BIN" worker --config "$T/a.yaml" --id w1 >>"$T/worker.log" 2>&1 & w1=$!; pids="$pids $w1"

# ---- part 1: real members ---------------------------------------------------
python3 - "$WIDE_REAL" "$T" >"$T/real.jsonl" <<'PY'
import json, sys
n, t = int(sys.argv[1]), sys.argv[2]
for i in range(n):
    print(json.dumps({"kind": "shard", "image": "none",
        "command": ["sh", "-c", f'mkdir -p "$ALTAR_DATA_ROOT/o" && echo {i} > "$ALTAR_DATA_ROOT/o/{i}.txt"'],
        "labels": {"fold": str(i), "num_folds": str(n)},
        "outputs": [{"uri": f"{t}/results/out/{i}.txt", "logical_path": f"o/{i}.txt"}], "timeout_s": 120}))
PY
t0=$(date +%s)
if "$ALTAR_BIN" submit --config "$T/a.yaml" --wait --timeout 1200 "$T/real.jsonl" >"$T/real.out" 2>"$T/real.err"; then ok; else
  fail "submit --wait of $WIDE_REAL shards in one group: $(tail -5 "$T/real.err")"; fi
echo "part 1: $WIDE_REAL real members settled in $(( $(date +%s) - t0 )) s" >&2
job1="$(head -1 "$T/real.out")"
check 'grep -q "stage 2: 1 follow-up task of kind merge" "$T/real.err"' "submit --wait did not follow the merge: $(tail -5 "$T/real.err")"
read -r ev1 total np heads found biggest <<EOF
$(ready_check "$job1")
EOF
check '[ "$total" = "$WIDE_REAL" ] && [ "$np" -ge 1 ] && [ "$found" = "$np" ]' "the group's head says $total members and $np pages, $found pages found"
echo "part 1: $np pages, largest message $biggest bytes" >&2
"$ALTAR_BIN" group members --config "$T/a.yaml" "$ev1" >"$T/members1.txt"
check '[ "$(sort -u "$T/members1.txt" | wc -l)" = "$WIDE_REAL" ]' "altar group members listed $(wc -l <"$T/members1.txt") members"
"$ALTAR_BIN" group members --config "$T/a.yaml" --outputs "$ev1" >"$T/outputs1.txt"
check '[ "$(cut -f1 "$T/outputs1.txt" | sort -u | wc -l)" = "$WIDE_REAL" ]' "altar group members --outputs listed $(wc -l <"$T/outputs1.txt")"
check '[ "$(grep -c "^$job1 " "$T/results/merge.txt")" = 1 ] && grep -q "^$job1 $WIDE_REAL 1 $WIDE_REAL\$" "$T/results/merge.txt"' \
  "the merge did not run once with a manifest of $WIDE_REAL outputs: $(cat "$T/results/merge.txt" 2>&1)"

# ---- part 2: synthetic members through the real log --------------------------
# N members of JOB (submitted + succeeded status events, each spec naming an
# output under OUTDIR), as `log produce` reads them: "KEY<TAB>JSON" lines.
synthetic_members() {
  python3 - "$1" "$2" "$3" <<'PY'
import hashlib, json, sys
n, job, outdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = sys.stdout
for i in range(n):
    labels = {"job_id": job, "fold": str(i), "num_folds": str(n)}
    h = {"backend": "process", "external_id": f"{job}-{i}", "labels": labels}
    tk = hashlib.sha256(f"{job}-{i}".encode()).hexdigest()
    spec = {"kind": "shard", "image": "none", "command": ["true"], "labels": labels,
            "outputs": [{"uri": f"{outdir}/{i}.txt", "logical_path": f"o/{i}.txt"}]}
    base = {"handle": h, "kind": "shard", "task_key": tk, "type": "status", "v": 1, "worker": "synthetic"}
    out.write("shard:" + job + "\t" + json.dumps(dict(base, event="submitted", state="pending", spec=spec, ts=1000.0 + i)) + "\n")
    out.write("shard:" + job + "\t" + json.dumps(dict(base, event="state", state="succeeded", ts=1000.5 + i)) + "\n")
PY
}
produce_status() {
  "$ALTAR_BIN" log produce --config "$T/a.yaml" --topic "$prefix.status" --encode status --key-delimiter "$(printf '\t')" <"$1"
}
job2="syn-$$"
synthetic_members "$WIDE_SYN" "$job2" "$T/results/syn" >"$T/syn.txt"
t0=$(date +%s)
produce_status "$T/syn.txt" || fail "producing $WIDE_SYN synthetic members"
t1=$(date +%s)
deadline=$(( t1 + 900 ))
while ! grep -q "^$job2 " "$T/results/merge.txt" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
echo "part 2: $WIDE_SYN synthetic members produced in $(( t1 - t0 )) s, their follow-up done $(( $(date +%s) - t1 )) s later" >&2
sleep 2 # a second run of the follow-up, were there one, would show now
read -r ev2 total np heads found biggest <<EOF
$(ready_check "$job2")
EOF
check '[ "$total" = "$WIDE_SYN" ] && [ "$np" -ge 1 ] && [ "$found" = "$np" ]' "the group's head says $total members and $np pages, $found pages found"
echo "part 2: $np pages, largest message $biggest bytes" >&2
"$ALTAR_BIN" group members --config "$T/a.yaml" "$ev2" >"$T/members2.txt"
check '[ "$(sort -u "$T/members2.txt" | wc -l)" = "$WIDE_SYN" ]' "altar group members listed $(wc -l <"$T/members2.txt") members"
check '[ "$(grep -c "^$job2 " "$T/results/merge.txt")" = 1 ] && grep -q "^$job2 $WIDE_SYN 1 $WIDE_SYN\$" "$T/results/merge.txt"' \
  "the merge did not run once with a manifest of $WIDE_SYN outputs: $(cat "$T/results/merge.txt" 2>&1)"
# The event id covers every member: the same rule over the task keys.
python3 - "$T/ready.jsonl" "$ev2" "$WIDE_SYN" "$job2" <<'PY' || fail "the event id is not SHA-256 over all $WIDE_SYN member task keys"
import hashlib, struct, sys
ev, n, job = sys.argv[2], int(sys.argv[3]), sys.argv[4]
def s(x):
    b = x.encode()
    return (bytes([0xa0 | len(b)]) if len(b) < 32 else bytes([0xd9, len(b)])) + b
keys = sorted(hashlib.sha256(f"{job}-{i}".encode()).hexdigest() for i in range(n))
arr = bytes([0xdc]) + struct.pack(">H", n) if n < 65536 else b"\xdd" + struct.pack(">I", n)
body = b"\x83" + s("group_key") + s(job) + s("kind") + s("shard") + s("task_keys") + arr
body += b"".join(s(k) for k in keys)
assert hashlib.sha256(body).hexdigest() == ev, ev
PY
# ---- part 3: the storage fails the follow-up's manifest ---------------------
# The group's outputs lie under a path that is a file, so the manifest beside
# them cannot be written: the reconciler keeps running, applies the batch
# again (nothing committed), and once the path is a directory the follow-up
# runs once.
job3="blocked-$$"
: >"$T/blocker"
synthetic_members "$WIDE_BLOCKED" "$job3" "$T/blocker" >"$T/blocked.txt"
produce_status "$T/blocked.txt" || fail "producing $WIDE_BLOCKED synthetic members"
deadline=$(( $(date +%s) + 300 ))
while ! grep -q "shard:$job3: its inputs' manifest.*applied again in" "$T/reconciler.log" && [ "$(date +%s)" -lt "$deadline" ]; do
  sleep 1
done
check 'grep -q "shard:$job3: its inputs. manifest.*applied again in" "$T/reconciler.log"' \
  "the reconciler did not say it applies the batch again: $(tail -3 "$T/reconciler.log")"
check 'kill -0 "$rec" 2>/dev/null' "the reconciler stopped when the storage failed: $(tail -3 "$T/reconciler.log")"
check '! grep -q "^$job3 " "$T/results/merge.txt"' "the follow-up ran without its manifest"
# -p: the reconciler, applying the batch again, may make the directory first.
rm "$T/blocker" && mkdir -p "$T/blocker"
deadline=$(( $(date +%s) + 300 ))
while ! grep -q "^$job3 " "$T/results/merge.txt" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
check '[ "$(grep -c "^$job3 " "$T/results/merge.txt")" = 1 ] && grep -q "^$job3 $WIDE_BLOCKED 1 $WIDE_BLOCKED\$" "$T/results/merge.txt"' \
  "after the storage came back, the merge did not run once with a manifest of $WIDE_BLOCKED outputs: $(grep "^$job3 " "$T/results/merge.txt" 2>&1)"
echo "part 3: $(grep -c "shard:$job3: its inputs. manifest.*applied again in" "$T/reconciler.log") retries logged before the storage came back" >&2
kill "$rec" "$w1" 2>/dev/null || true
wait "$rec" 2>/dev/null || true
grep -q "republish\|cannot" "$T/reconciler.log" && echo "reconciler said: $(grep "republish\|cannot" "$T/reconciler.log" | head -3)" >&2
altar_test_end "wide-group-$TRANSPORT"
