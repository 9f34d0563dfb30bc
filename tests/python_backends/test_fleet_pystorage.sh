#!/bin/sh
# Python storage adapters in a fleet on the embedded log: a worker on the
# built-in process backend stages its inputs from vault:// and collects its
# outputs to vault://, a scheme served by the example adapter
# (examples/python_storage, "dirstore") through the storage bridge, with
# digests verified at staging. In the same bridge, schemes whose adapter
# raises (with a secret in its message), hangs, writes garbage on the
# protocol, returns the wrong type or kills its process: each task that
# touches one fails with the reason in its failure's detail, the group is
# dead-lettered, and the same worker then runs a good job through a
# restarted bridge. `altar run` reads the same URIs, and a configuration
# that cannot work is refused with its FILE:LINE. Needs ALTAR_TEST_PYTHON
# (with-venv.sh) and ALTAR_LIBRARY (ctest).
set -eu
: "${ALTAR_BIN:?}" "${ALTAR_SOURCE_DIR:?}" "${ALTAR_TEST_PYTHON:?run through tests/python_backends/with-venv.sh}"
: "${ALTAR_LIBRARY:?the bridge imports altar, which loads libaltar}"
. "$ALTAR_SOURCE_DIR/tests/lib/common.sh"
altar_test_begin "fleet-pystorage" python3 ps
SECRET="s3cr3t-fleet-storage-key"
export ALTAR_TEST_API_KEY="$SECRET"
mkdir -p "$T/data" "$T/vault"
prefix="pystore-$(date +%s)-$$"

storage_block() {
  echo "storage:"
  echo "  python:"
  echo "    python: $ALTAR_TEST_PYTHON"
  echo "    reply_timeout_ms: 2000"
  echo "    cancel_grace_ms: 1000"
  echo "    restart_backoff_ms: 50"
  echo "    schemes:"
  echo "      vault: {adapter: dirstore, options: {root: \"$T/vault\"}}"
  echo "      boom: {adapter: faulty-storage, options: {mode: raise}}"
  echo "      stuck: {adapter: faulty-storage, options: {mode: hang}}"
  echo "      junk: {adapter: faulty-storage, options: {mode: garbage}}"
  echo "      liar: {adapter: faulty-storage, options: {mode: wrongtype}}"
  echo "      gone: {adapter: faulty-storage, options: {mode: exit}}"
}
{
  altar_test_fleet_config "$prefix" "{name: process, data_root: \"$T/data\", slots: 4}"
  storage_block
  echo "groups:"
  echo "  upper:"
  echo "    group_by: [job_id, model]"
  echo "    ready_when: single"
  echo "    on_failed: dead_letter"
  echo "  bad:"
  echo "    group_by: [job_id, case]"
  echo "    ready_when: single"
  echo "    on_failed: dead_letter"
} > "$T/altar.yaml"
cfg="--config $T/altar.yaml"

# The inputs go in through the adapter's own Python API, as a pipeline would.
"$ALTAR_TEST_PYTHON" - "$T/vault" <<'PY'
import asyncio, sys
from altar.execution import get_storage_registry
store = get_storage_registry()["dirstore"](root=sys.argv[1])
async def main():
    for m in ("m1", "m2", "m3"):
        await store.write_text(f"vault://in/{m}.txt", f"hello from {m}\n")
asyncio.run(main())
PY

# Good specs: each input staged from vault:// with its digest, upper-cased by
# the task, the result collected to vault://out/<run>/.
specs() {  # RUN
  python3 - "$T/vault" "$1" <<'PY'
import hashlib, json, sys
root, run = sys.argv[1], sys.argv[2]
for m in ("m1", "m2", "m3"):
    data = open(f"{root}/in/{m}.txt", "rb").read()
    d = f"jobs/{run}/{m}"
    print(json.dumps({
        "kind": "upper", "image": "none", "labels": {"model": m}, "timeout_s": 120,
        "command": ["sh", "-c", f'tr a-z A-Z < "$ALTAR_DATA_ROOT/{d}/in.txt" > "$ALTAR_DATA_ROOT/{d}/out.txt"'],
        "inputs": [{"uri": f"vault://in/{m}.txt", "logical_path": f"{d}/in.txt",
                    "digest": "sha256:" + hashlib.sha256(data).hexdigest()}],
        "outputs": [{"uri": f"vault://out/{run}/{m}.txt", "logical_path": f"{d}/out.txt"}]}))
PY
}
specs first > "$T/good1.jsonl"
specs second > "$T/good2.jsonl"

# Bad specs: one per misbehaving scheme, a missing object, and an output
# whose adapter raises (its input is fine).
python3 - > "$T/bad.jsonl" <<'PY'
import json
def spec(case, inp, out=None):
    d = f"jobs/bad/{case}"
    s = {"kind": "bad", "image": "none", "labels": {"case": case}, "timeout_s": 60,
         "command": ["sh", "-c", f'cp "$ALTAR_DATA_ROOT/{d}/in.txt" "$ALTAR_DATA_ROOT/{d}/out.txt"'],
         "inputs": [{"uri": inp, "logical_path": f"{d}/in.txt"}]}
    if out:
        s["outputs"] = [{"uri": out, "logical_path": f"{d}/out.txt"}]
    print(json.dumps(s))
spec("raise", "boom://b/in.txt")
spec("hang", "stuck://b/in.txt")
spec("garbage", "junk://b/in.txt")
spec("wrongtype", "liar://b/in.txt")
spec("exit", "gone://b/in.txt")
spec("missing", "vault://in/absent.txt")
spec("output", "vault://in/m1.txt", "boom://b/out.txt")
PY

"$ALTAR_BIN" reconciler $cfg >>"$T/reconciler.log" 2>&1 &
rec=$!
pids="$pids $rec"
"$ALTAR_BIN" worker $cfg --id psw1 >>"$T/worker.log" 2>&1 &
w=$!
pids="$pids $w"
dump_logs() { for _f in "$T"/*.log "$T"/*.err; do [ -f "$_f" ] && { echo "== $_f"; tail -n 40 "$_f"; }; done; }
bridge_pids() { ps -o pid=,args= --ppid "$w" | awk '/altar\.execution\.bridge/ {print $1}' | sort; }

rc=0
timeout 300 "$ALTAR_BIN" submit $cfg --wait "$T/good1.jsonl" >"$T/good1.out" 2>"$T/good1.err" || rc=$?
check "[ $rc -eq 0 ]" "the first good job ended with $rc"
[ "$rc" -eq 0 ] || dump_logs
first_bridge="$(bridge_pids)"
check "[ -n '$first_bridge' ]" "the worker runs no storage bridge"

rc=0
timeout 300 "$ALTAR_BIN" submit $cfg --wait "$T/bad.jsonl" >"$T/bad.out" 2>"$T/bad.err" || rc=$?
check "[ $rc -eq 1 ]" "the job of bad storage ended with $rc, not 1 (dead-lettered groups)"
BAD="$(head -1 "$T/bad.out")"

rc=0
timeout 300 "$ALTAR_BIN" submit $cfg --wait "$T/good2.jsonl" >"$T/good2.out" 2>"$T/good2.err" || rc=$?
check "[ $rc -eq 0 ]" "the good job after the faults ended with $rc"
[ "$rc" -eq 0 ] || dump_logs

check 'kill -0 "$w" 2>/dev/null' "the worker exited"
last_bridge="$(bridge_pids)"
check "[ -n '$last_bridge' ] && [ '$last_bridge' != '$first_bridge' ]" \
  "the bridge was not restarted after the garbage and the exit (first $first_bridge, last $last_bridge)"

"$ALTAR_BIN" log consume $cfg --topic "$prefix.dead" --from-beginning --exit >"$T/dead.jsonl" 2>/dev/null || true
"$ALTAR_BIN" log consume $cfg --topic "$prefix.ready" --from-beginning --exit >"$T/ready.jsonl" 2>/dev/null || true
"$ALTAR_BIN" status $cfg "$BAD" --json >"$T/status.json" 2>&1 || true
kill -TERM "$w" "$rec" 2>/dev/null || true
wait "$w" "$rec" 2>/dev/null || true

# The outputs: upper-cased, read back through the adapter's Python API.
"$ALTAR_TEST_PYTHON" - "$T/vault" <<'PY' || fail "the collected outputs"
import asyncio, sys
from altar.execution import get_storage_registry
store = get_storage_registry()["dirstore"](root=sys.argv[1])
async def main():
    for run in ("first", "second"):
        for m in ("m1", "m2", "m3"):
            got = await store.read_text(f"vault://out/{run}/{m}.txt")
            assert got == f"HELLO FROM {m.upper()}\n", (run, m, got)
asyncio.run(main())
print("ok: 6 outputs staged in from vault:// and collected back, upper-cased")
PY
checks=$((checks + 1))

# Every bad case was dead-lettered with its own reason; nothing good was.
python3 - "$T" "$SECRET" <<'PY' || { fail "the dead-lettered groups"; dump_logs; }
import json, sys
d, secret = sys.argv[1], sys.argv[2]
want = {
    "raise": ("submit_failed", ["python storage as_local_file (boom: adapter faulty-storage): RuntimeError: "
                                "the object store refused boom://b/in.txt", "[redacted]"]),
    "hang": ("submit_failed", ["(stuck: adapter faulty-storage): no reply within 2000 ms; cancelled"]),
    "garbage": ("submit_failed", ["(junk: adapter faulty-storage): the bridge wrote a line that is not a reply"]),
    "wrongtype": ("submit_failed", ["(liar: adapter faulty-storage): Invalid: as_local_file() yielded int, not a path"]),
    "exit": ("submit_failed", ["(gone: adapter faulty-storage): python bridge: exited"]),
    "missing": ("submit_failed", ["(vault: adapter dirstore): NotFound", "absent.txt"]),
    "output": ("output_collection_failed", ["python storage upload (boom: adapter faulty-storage): RuntimeError"]),
}
seen = {}
for line in open(f"{d}/dead.jsonl"):
    if not line.strip():
        continue
    assert secret not in line, "the secret reached the dead topic"
    e = json.loads(line)
    assert e["kind"] == "bad", f"a good group was dead-lettered: {e['kind']}:{e['group_key']}"
    case = e["group_key"].rsplit(":", 1)[1]
    f = e["failures"][0]["failure"]
    seen[case] = (f["reason"], f.get("detail") or "")
for case, (reason, needles) in want.items():
    assert case in seen, f"{case}: not dead-lettered (got {sorted(seen)})"
    got_reason, detail = seen[case]
    assert got_reason == reason, f"{case}: reason {got_reason}, want {reason}: {detail}"
    for n in needles:
        assert n in detail, f"{case}: {n!r} not in the detail: {detail!r}"
assert len(seen) == len(want), f"dead-lettered: {sorted(seen)}"
ready = [json.loads(l) for l in open(f"{d}/ready.jsonl") if l.strip()]
assert sorted(e["kind"] for e in ready) == ["upper"] * 6, [e["group_key"] for e in ready]
print("ok: 7 bad cases dead-lettered with their reasons; 6 good groups fired")
PY
checks=$((checks + 1))
check "! grep -q '$SECRET' '$T/status.json' '$T/bad.err'" "the secret appears in altar status or submit --wait"

# altar run reads the same URIs.
{ echo "backend: {name: process, data_root: \"$T/rundata\"}"; storage_block; } > "$T/run.yaml"
cat > "$T/run.json" <<'EOF'
{"kind": "upper", "image": "none",
 "command": ["sh", "-c", "tr a-z A-Z < \"$ALTAR_DATA_ROOT/jobs/run/in.txt\" > \"$ALTAR_DATA_ROOT/jobs/run/out.txt\""],
 "inputs": [{"uri": "vault://in/m2.txt", "logical_path": "jobs/run/in.txt"}],
 "outputs": [{"uri": "vault://out/run/m2.txt", "logical_path": "jobs/run/out.txt"}]}
EOF
rc=0
"$ALTAR_BIN" run --config "$T/run.yaml" "$T/run.json" >"$T/run.out" 2>&1 || rc=$?
check "[ $rc -eq 0 ] && [ \"\$(cat '$T/vault/out/run/m2.txt')\" = 'HELLO FROM M2' ]" "altar run through vault://: rc $rc: $(cat "$T/run.out")"

# A configuration that cannot work is refused, naming its file and line.
refused() {  # WHAT YAML NEEDLE
  printf '%s\n' "$2" > "$T/bad.yaml"
  _rc=0
  "$ALTAR_BIN" run --config "$T/bad.yaml" "$T/run.json" >"$T/refused.out" 2>&1 || _rc=$?
  check "[ $_rc -ne 0 ] && grep -qF -- '$3' '$T/refused.out'" "$1: rc $_rc: $(cat "$T/refused.out")"
}
refused "an unknown adapter" "storage:
  python:
    python: $ALTAR_TEST_PYTHON
    schemes:
      vault: dirstor" "$T/bad.yaml:5: storage.python.schemes.vault: python storage open (vault: adapter dirstor): NotFound"
refused "a built-in scheme" "storage:
  python:
    schemes: {s3: dirstore}" "$T/bad.yaml:3: storage.python.schemes.s3: s3:// is served by the"
refused "a misspelt key" "storage:
  python:
    python: $ALTAR_TEST_PYTHON
    schemes: {vault: dirstore}
    reply_timeout: 5" "$T/bad.yaml:5: storage.python.reply_timeout: unknown key (did you mean \"reply_timeout_ms\"?)"
refused "a constructor that raises" "storage:
  python:
    python: $ALTAR_TEST_PYTHON
    schemes:
      vault: {adapter: broken-storage, options: {zone: 1}}" "$T/bad.yaml:5: storage.python.schemes.vault: python storage open (vault: adapter broken-storage): ValueError"
altar_test_end "fleet-pystorage"
