# Shared body of the forwarding tests (sourced; needs TRANSPORT=local|kafka).
# Issue #34's scenario: worker w1 (4 slots) runs 4 long tasks; w2 and w3
# (4 slots each, idle) join and take their share of the partitions; then 8
# quick shards are submitted, at least 3 of them (chosen so, from their task
# keys and the partitions w1 announces) on partitions w1 owns. Checks, from
# recorded facts only:
# - every shard ran exactly once (each run appends a start and an end line);
# - every quick shard started within the bound after its job's
#   submitted_at (the time the shard itself wrote): 1 s on the local log,
#   1 s plus one Kafka rebalance (3 s, heartbeat.interval.ms) on Kafka;
# - w1 was full all that time (every quick start lies before the first long
#   end), each quick shard of w1's partitions was forwarded (w1's count),
#   every copy on the jobs topic (with its header) is counted by the worker
#   that forwarded it, each forwarded shard started once from a copy, and
#   w1 started nothing but its long tasks;
# - the ledger ends with one terminal record per shard and nothing open.
# With FORWARD_MODE=crash, w1 dies (fault injection:
# ALTAR_TEST_CRASH_AFTER_FORWARD) at its first forward's acknowledgement,
# before its commit, and the quick shards run 8 s (30 s on Kafka, longer
# than finding the dead member): the original of the forwarded job is then
# taken in again under the same task key while its copy runs, and so are
# w1's long tasks after their lease timeout. Checks: w1 died there, no
# shard ran twice at once (the process backend, one data root, adopts a
# live run by task key; a run taken in again only after the first ended —
# Kafka finds the dead member later, and full peers wait — runs again, and
# every run starts after the previous one ended), every group fired once,
# the ledger is as above.
# With FORWARD_MODE=kill_receiver, the quick shards run 30 s; once all run,
# the worker that started more forwarded copies (w2 or w3) and the
# reconciler are killed -9 and the reconciler restarted: the dead worker's
# partitions, copies included, go to the others, who adopt the live runs by
# task key. Checks as for crash: no shard ran twice at once, every group
# fired once, the ledger as above.
# With FORWARD_MODE=cancel, the quick shards run 120 s; once all run (those
# of w1's partitions on w2/w3, forwarded), `altar cancel` stops the job.
# Checks: every quick shard started once and never ended (its run was
# stopped), its record is failed "cancelled", and the long ones ran as usual.
set -eu
MODE="${FORWARD_MODE:-scenario}"
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}"
LONG_S="${FORWARD_LONG_S:-20}"
QUICK_N=8
ON_W1_MIN=3
if [ "$TRANSPORT" = kafka ]; then BOUND_S=4.0; else BOUND_S=1.0; fi
QUICK_S=0.2
if [ "$MODE" = crash ]; then
  if [ "$TRANSPORT" = kafka ]; then QUICK_S=30; else QUICK_S=8; fi
elif [ "$MODE" = kill_receiver ]; then
  QUICK_S=30
elif [ "$MODE" = cancel ]; then
  QUICK_S=120
fi

. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin "forward-$MODE-$TRANSPORT" python3
mkdir -p "$T/data"
prefix="fwd-$(date +%s)-$$"
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: $T/data, slots: 4}" "fleet: $prefix.fleet"
  echo "groups:"
  echo "  shard:"
  echo "    group_by: [job_id, name]"
  echo "    ready_when: single"
  echo "    on_failed: dead_letter"
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"

start_worker() { $W_ENV "$ALTAR_BIN" worker $cfg --id "w$1" --drain 120 >>"$T/worker$1.log" 2>&1 & eval "w$1=\$!"; pids="$pids $!"; }
# A shard appends "start <name> <worker data dir> <unix time>" when it starts
# and "end <name> <unix time>" when it ends.
spec() { # spec NAME SECONDS [SALT]
  python3 - "$T/data" "$1" "$2" "${3:-}" <<'PY'
import json, sys
d, name, secs, salt = sys.argv[1:5]
script = 'echo "start $0 $(date +%s.%N)" >> "$1/runs.log"; sleep "$2"; echo "end $0 $(date +%s.%N)" >> "$1/runs.log"'
labels = {"name": name}
if salt:
    labels["salt"] = salt
print(json.dumps({"kind": "shard", "image": "none", "command": ["/bin/sh", "-c", script, name, d, secs],
                  "labels": labels, "timeout_s": 600}))
PY
}
started() { if [ -f "$T/data/runs.log" ]; then grep -c "^start " "$T/data/runs.log" || true; else echo 0; fi; }
ended() { if [ -f "$T/data/runs.log" ]; then grep -c "^end " "$T/data/runs.log" || true; else echo 0; fi; }
wait_for() { # wait_for WHAT N SECONDS: until WHAT prints >= N
  deadline=$(( $(date +%s) + $3 ))
  until [ "$($1)" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $1 >= $2"; tail -n 5 "$T"/*.log; exit 1; }
    sleep 0.2
  done
}
# The jobs partitions each worker owns now, from its own "assigned" and
# "revoked" lines, as JSON; settled: 1 when w1, w2 and w3 each own some and
# together all 32.
owned_py="$ALTAR_SOURCE_DIR/bench/util/owned_partitions.py"
owns() { python3 "$owned_py" --log-name-digit "$T" "$prefix.jobs" w1 w2 w3; }
settled() { python3 "$owned_py" --settled 32 --log-name-digit "$T" "$prefix.jobs" w1 w2 w3; }

"$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"
if [ "$MODE" = crash ]; then W_ENV="env ALTAR_TEST_CRASH_AFTER_FORWARD=1"; else W_ENV=""; fi
start_worker 1
W_ENV=""
for i in 1 2 3 4; do spec "long$i" "$LONG_S"; done > "$T/long.jsonl"
"$ALTAR_BIN" submit $cfg "$T/long.jsonl" >/dev/null 2>>"$T/submit.log"
wait_for started 4 60
echo "4 long shards running on w1 (all its slots); w2 and w3 join"
start_worker 2
start_worker 3
wait_for settled 1 60
owns > "$T/owns.json"
echo "partitions settled: $(cat "$T/owns.json")"

# Quick shards, published as `altar submit` does (one job id, keyed by task
# key, submitted_at stamped just before publishing) but with a job id chosen
# so that at least ON_W1_MIN of them hash to w1's partitions.
python3 - "$T" "$ALTAR_BIN" "$QUICK_N" "$ON_W1_MIN" "$prefix.jobs" "$QUICK_S" <<'PY'
import json, subprocess, sys, time
d, altar, n, want, topic, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
w1 = set(json.load(open(f"{d}/owns.json"))["w1"])

def murmur2(data):  # Kafka's, as altar_partition_for_key
    m, length = 0x5bd1e995, len(data)
    h = (0x9747b28c ^ length) & 0xffffffff
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xffffffff
        k ^= k >> 24
        k = (k * m) & 0xffffffff
        h = ((h * m) & 0xffffffff) ^ k
    rest, tail = length % 4, length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xffffffff
    h ^= h >> 13
    h = (h * m) & 0xffffffff
    h ^= h >> 15
    return h

script = 'echo "start $0 $(date +%s.%N)" >> "$1/runs.log"; sleep "$2"; echo "end $0 $(date +%s.%N)" >> "$1/runs.log"'
for salt in range(200):
    job_id = f"j-f{salt:011x}"
    jobs, on_w1 = [], []
    for i in range(1, n + 1):
        s = {"kind": "shard", "image": "none", "command": ["/bin/sh", "-c", script, f"quick{i}", f"{d}/data", secs],
             "labels": {"job_id": job_id, "name": f"quick{i}"}, "timeout_s": 600}
        key = subprocess.run([altar, "spec", "id", "-"], input=json.dumps(s), capture_output=True, text=True,
                             check=True).stdout.split()[0]
        jobs.append((key, s))
        if (murmur2(key.encode()) & 0x7fffffff) % 32 in w1:
            on_w1.append(f"quick{i}")
    if len(on_w1) >= want:
        break
else:
    sys.exit("no job id put enough quick shards on w1's partitions")
json.dump(on_w1, open(f"{d}/on_w1.json", "w"))
open(f"{d}/job_id", "w").write(job_id)
print(f"{len(on_w1)} of {n} quick shards on w1's partitions: {' '.join(on_w1)}")
now = time.time()
lines = "".join(key + "|" + json.dumps({"v": 1, "type": "job", "job_id": job_id, "spec": s, "avoid_hosts": [],
                                        "attempt": 0, "submitted_at": now}) + "\n" for key, s in jobs)
subprocess.run([altar, "log", "produce", "--config", f"{d}/altar.yaml", "--topic", topic, "--key-delimiter", "|",
                "--encode", "job"], input=lines, text=True, check=True, stdout=subprocess.DEVNULL)
PY
count() { "$ALTAR_BIN" log consume $cfg --topic "$1" --from-beginning --exit 2>/dev/null | grep -c '"event_id"' || true; }
ready_n() { count "$prefix.ready"; }
if [ "$MODE" = kill_receiver ]; then
  # Once every shard runs, the forwarded ones on w2/w3: kill -9 the worker
  # that started more copies, and the reconciler, then restart the reconciler.
  here() { grep -c "forwarded here from" "$T/worker$1.log" || true; }
  here_all() { echo $(( $(here 2) + $(here 3) )); }
  wait_for started $((4 + QUICK_N)) 60
  wait_for here_all 1 30
  if [ "$(here 2)" -ge "$(here 3)" ]; then victim=2; else victim=3; fi
  eval "vpid=\$w$victim"
  kill -9 "$vpid" "$rec"
  echo "killed -9 w$victim (started $(here $victim) forwarded copies) and the reconciler"
  echo "w$victim" > "$T/victim"
  "$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 & rec=$!; pids="$pids $rec"
fi
if [ "$MODE" = cancel ]; then
  forwards() { grep -c "no free slot here; forwarded" "$T/worker1.log" || true; }
  wait_for started $((4 + QUICK_N)) 60
  wait_for forwards "$(python3 -c "import json; print(len(json.load(open('$T/on_w1.json'))))")" 30
  "$ALTAR_BIN" cancel $cfg "$(cat "$T/job_id")" >>"$T/cancel.log" 2>&1
  dead_n() { count "$prefix.dead"; }
  wait_for dead_n "$QUICK_N" 60
  wait_for ended 4 $((LONG_S * 3 + 60))
  wait_for ready_n 4 60
else
  wait_for ended $((4 + QUICK_N)) $((LONG_S * 3 + 60))
  wait_for ready_n $((4 + QUICK_N)) 60
fi
if [ "$MODE" = crash ]; then
  grep -q "ALTAR_TEST_CRASH_AFTER_FORWARD: dying" "$T/worker1.log" || { echo "FAIL: w1 did not die after a forward"; exit 1; }
fi
if [ "$MODE" = crash ] || [ "$MODE" = kill_receiver ]; then
  "$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit 2>/dev/null > "$T/ready.jsonl"
fi
kill -TERM "$w1" "$w2" "$w3" "$rec" 2>/dev/null || true
wait "$w1" "$w2" "$w3" "$rec" 2>/dev/null || true

"$ALTAR_BIN" log consume $cfg --topic "$prefix.status" --from-beginning --exit > "$T/status.jsonl"
"$ALTAR_BIN" log consume $cfg --topic "$prefix.jobs" --from-beginning --exit --headers > "$T/jobs.txt"
"$ALTAR_BIN" ledger dump $cfg > "$T/ledger.jsonl"
# Where each shard ran, as an operator sees it: the dashboard's job page
# (/api/job) names the worker that forwarded each forwarded shard.
if [ "$MODE" = scenario ]; then
  port="$(free_port)"
  "$ALTAR_BIN" dashboard $cfg --addr "127.0.0.1:$port" >>"$T/dashboard.log" 2>&1 & dash=$!; pids="$pids $dash"
  api_forwarded() {
    curl -s --noproxy '*' "http://127.0.0.1:$port/api/job?id=$(cat "$T/job_id")" > "$T/api_job.json" 2>/dev/null || true
    python3 -c 'import json, sys
try:
    o = json.load(open(sys.argv[1]))
except ValueError:
    print(0); sys.exit()
print(sum(1 for g in o.get("group_list", []) for m in g.get("members", []) if m.get("forwarded_from")))' "$T/api_job.json"
  }
  wait_for api_forwarded "$(python3 -c "import json; print(len(json.load(open('$T/on_w1.json'))))")" 30
  kill "$dash" 2>/dev/null || true
fi
grep -h "altar worker [^ ]*: consumed" "$T"/worker*.log | sed 's/^/  /'
python3 - "$T" "$TRANSPORT" "$QUICK_N" "$BOUND_S" "$MODE" <<'PY'
import collections, json, re, sys
d, transport, quick_n, bound, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
problems = []
names = [f"long{i}" for i in range(1, 5)] + [f"quick{i}" for i in range(1, quick_n + 1)]
starts, ends = collections.defaultdict(list), collections.defaultdict(list)
for line in open(f"{d}/data/runs.log"):
    f = line.split()
    (starts if f[0] == "start" else ends)[f[1]].append(float(f[2]))
reruns = 0
for n in names:
    want_end = 0 if mode == "cancel" and n.startswith("quick") else 1
    if mode in ("crash", "kill_receiver") and len(starts[n]) > 1 and len(starts[n]) == len(ends[n]):
        # The crash window may run a job again (docs/forwarding.md), never
        # twice at once: each run starts after the one before it ended.
        s, e = sorted(starts[n]), sorted(ends[n])
        if any(s[k + 1] < e[k] for k in range(len(s) - 1)):
            problems.append(f"{n}: two runs at once (starts {s}, ends {e})")
        reruns += len(s) - 1
        continue
    if len(starts[n]) != 1 or len(ends[n]) != want_end:
        problems.append(f"{n} started {len(starts[n])} and ended {len(ends[n])} times (want 1, {want_end})")
on_w1 = json.load(open(f"{d}/on_w1.json"))
# Submission times, and the forwarded copies (records with the header).
sub, copies, copied = {}, 0, set()
for l in open(f"{d}/jobs.txt"):
    hdr, tab, body = l.rstrip("\n").partition("\t")
    try:
        j = json.loads(body) if tab else json.loads(hdr)
        h = json.loads(hdr) if tab else {}
    except ValueError:
        continue
    if j.get("type") != "job":
        continue
    name = j["spec"]["labels"]["name"]
    if "altar.forwarded.from" in h:
        copies += 1
        copied.add(name)
    else:
        sub[name] = j["submitted_at"]
quick = [n for n in names if n.startswith("quick")]
if mode in ("crash", "kill_receiver"):
    ids = collections.Counter()
    for l in open(f"{d}/ready.jsonl"):
        try:
            g = json.loads(l)
        except ValueError:
            continue
        if "event_id" in g:
            ids[g["group_key"]] += 1
    twice = [k for k, c in ids.items() if c != 1]
    if len(ids) != len(names) or twice:
        problems.append(f"{len(ids)} groups fired for {len(names)} shards; fired more than once: {twice}")
lat = sorted((starts[n][0] - sub[n], n) for n in quick if starts[n] and n in sub)
if len(lat) != quick_n:
    problems.append(f"start latency known for {len(lat)} of {quick_n} quick shards")
late = [f"{n} after {x:.2f} s" for x, n in lat if x > bound]
if late and mode == "scenario":
    problems.append(f"quick shards started later than {bound} s after submission: {', '.join(late)}")
first_long_end = min((ends[n][0] for n in names if n.startswith("long") and ends[n]), default=0)
if mode == "scenario" and any(starts[n] and starts[n][0] >= first_long_end for n in quick):
    problems.append("a quick shard started only after a long one ended: w1 was not full the whole time")
# Who ran what: w1's data dir is shared, so the workers' own counts tell.
def stat(w, what):
    m = re.search(rf"altar worker {w}: consumed.*{what} (\d+)", open(f"{d}/worker{w[1]}.log").read())
    return int(m.group(1)) if m else -1
# A copy may be forwarded again (its receiver's slots filled in the same
# instant by its own shards): every copy is counted by who forwarded it, and
# each forwarded shard started once from its last copy.
fw1 = stat("w1", "forwarded")
fw = fw1 + stat("w2", "forwarded") + stat("w3", "forwarded")
fin = max(0, stat("w2", "forwarded here")) + max(0, stat("w3", "forwarded here"))  # a killed worker has no summary
sub1 = stat("w1", "submitted")
if mode in ("crash", "cancel", "kill_receiver"):
    want_copies = len(on_w1) if mode in ("cancel", "kill_receiver") else 1
    if copies < want_copies:
        problems.append(f"{copies} forwarded copies on the jobs topic (want at least {want_copies})")
elif not (fw1 == len(on_w1) and copies == fw and fin == len(copied) and set(on_w1) <= copied):
    problems.append(f"forwards: {len(on_w1)} quick shards on w1's partitions, w1 forwarded {fw1}, all {fw}; "
                    f"{copies} copies of {len(copied)} shards on the jobs topic; started from a copy {fin}")
if sub1 != 4 and mode == "scenario":
    problems.append(f"w1 started {sub1} tasks (want its 4 long ones only)")
# Ledger: nothing open, one terminal record per shard.
recs = collections.Counter()
for l in open(f"{d}/ledger.jsonl"):
    if not l.strip():
        continue
    r = json.loads(l)
    rec = r.get("record", r)
    st, fail = rec.get("state"), rec.get("failure") or {}
    if st in ("pending", "running"):
        problems.append(f"record {rec['handle']['external_id']} left {st}")
    if fail.get("reason") in ("superseded", "released"):
        continue
    name = rec["handle"]["labels"].get("name")
    recs[name] += 1
    if mode == "cancel" and name.startswith("quick") and (st != "failed" or fail.get("reason") != "cancelled"):
        problems.append(f"{name}: {st} {fail.get('reason')} (want failed, cancelled)")
if mode == "scenario":
    page = json.load(open(f"{d}/api_job.json"))
    shown = [m["forwarded_from"] for g in page["group_list"] for m in g["members"] if m.get("forwarded_from")]
    if len(shown) != len(copied) or not set(shown) <= {"w1", "w2", "w3"} or "w1" not in shown:
        problems.append(f"/api/job shows {len(shown)} forwarded shards ({shown}); {len(copied)} were forwarded")
for n in names:
    if recs[n] != 1:
        problems.append(f"{n} has {recs[n]} terminal record(s) in the ledger")
if mode in ("crash", "kill_receiver"):
    print(f"{mode}: {reruns} run(s) again after the first had ended, none at once")
if lat:
    print(f"quick shards: start after submission min {lat[0][0]:.3f} s, median {lat[len(lat)//2][0]:.3f} s, "
          f"max {lat[-1][0]:.3f} s (bound {bound} s); {fw1} forwarded by w1, {fw - fw1} by w2+w3, "
          f"{fin} started from a copy")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
echo "forward e2e ($MODE) on $TRANSPORT: ok"
