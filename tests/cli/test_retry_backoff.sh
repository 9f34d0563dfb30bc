#!/bin/sh
# Retry with backoff (issue 18, part 3), on the local transport with a real
# reconciler and a `process` worker: a shard that times out every time is
# retried twice under retry_backoff {initial: 1, factor: 2, jitter: 0.5},
# then dead-lettered. Asserted on recorded facts only:
#   - the ledger records each retry's due time (altar ledger retries): the
#     failure's event time plus a delay within [initial*factor^(k-1) * (1-jitter),
#     initial*factor^(k-1)];
#   - no attempt was submitted before its due time (the workers' "submitted"
#     status events, read back from the status topic);
#   - a rebuild from the status topic records the same due times;
#   - bad settings are refused with the field named.
set -u
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin backoff python3

cat >"$T/altar.yaml" <<EOC
transport: {name: local, dir: $T/log}
ledger: {path: $T/ledger}
backend: {name: process, data_root: $T/data, slots: 2}
groups:
  flaky:
    group_by: [job_id]
    ready_when: single
    on_failed: retry
    max_restarts: 2
    retry_backoff: {initial: 1, factor: 2, max: 30, jitter: 0.5}
EOC
cfg="--config $T/altar.yaml"
printf '{"kind":"flaky","image":"x","command":["sleep","30"],"labels":{"n":"1"},"timeout_s":1}\n' >"$T/spec.json"

"$ALTAR_BIN" reconciler $cfg >"$T/reconciler.log" 2>&1 &
rpid=$!
pids="$pids $rpid"
"$ALTAR_BIN" worker $cfg --id w1 --poll-ms 50 >"$T/worker.log" 2>&1 &
pids="$pids $!"

# Three attempts of about 1 s each and two backoffs of at most 1 s and 2 s:
# --timeout only bounds a broken run.
"$ALTAR_BIN" submit $cfg --wait --timeout 90 "$T/spec.json" >"$T/submit.out" 2>"$T/submit.err"
rc=$?
[ "$rc" -eq 1 ] || fail "submit --wait: expected exit 1 (dead-lettered), got $rc: $(cat "$T/submit.err")"
kill -TERM "$rpid" 2>/dev/null
wait "$rpid" 2>/dev/null

"$ALTAR_BIN" ledger retries --ledger "$T/ledger" >"$T/retries" 2>"$T/err" || fail "ledger retries: $(cat "$T/err")"
"$ALTAR_BIN" log consume $cfg --topic altar.status --from-beginning --exit >"$T/status" 2>"$T/err" ||
  fail "consume status: $(cat "$T/err")"
python3 - "$T/retries" "$T/status" <<'EOP' || fail "due times: see above"
import json, sys
dues = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
events = [json.loads(l) for l in open(sys.argv[2]) if l.strip().startswith("{")]
bad = []
if [d["attempt"] for d in dues] != [1, 2]:
    bad.append("expected due facts of attempts 1 and 2, got %r" % dues)
subs = sorted(e["ts"] for e in events if e.get("event") == "submitted")
fails = sorted(e["ts"] for e in events if e.get("state") == "failed")
if len(subs) != 3 or len(fails) != 3:
    bad.append("expected 3 submitted and 3 failed events, got %d and %d" % (len(subs), len(fails)))
for d in dues:
    base = 1.0 * 2 ** (d["attempt"] - 1)
    if not (base * 0.5 - 1e-6 <= d["delay_s"] <= base + 1e-6):
        bad.append("attempt %d: delay %.6f outside [%.3f, %.3f]" % (d["attempt"], d["delay_s"], base * 0.5, base))
    if abs(d["failed_at"] + d["delay_s"] - d["due"]) > 1e-5:
        bad.append("attempt %d: due %.6f is not failed_at + delay" % (d["attempt"], d["due"]))
    k = d["attempt"]
    if len(fails) == 3 and abs(d["failed_at"] - fails[k - 1]) > 1e-5:
        bad.append("attempt %d: failed_at %.6f is not the failure event's ts %.6f" % (k, d["failed_at"], fails[k - 1]))
    if len(subs) == 3 and subs[k] < d["due"]:
        bad.append("attempt %d submitted at %.6f, before its due time %.6f" % (k, subs[k], d["due"]))
for b in bad:
    print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOP

# A rebuild from the status topic records the same due times.
"$ALTAR_BIN" reconciler $cfg --rebuild >"$T/rebuild.out" 2>"$T/rebuild.err" || fail "rebuild: $(cat "$T/rebuild.err")"
"$ALTAR_BIN" ledger retries --ledger "$T/ledger" >"$T/retries2" 2>"$T/err" || fail "ledger retries after rebuild"
cmp -s "$T/retries" "$T/retries2" || fail "rebuild changed the due times: $(cat "$T/retries") vs $(cat "$T/retries2")"

# Bad settings name the field.
sed 's/jitter: 0.5/jitter: 2/' "$T/altar.yaml" >"$T/bad.yaml"
if "$ALTAR_BIN" submit --config "$T/bad.yaml" "$T/spec.json" >/dev/null 2>"$T/bad.err"; then
  fail "submit accepted jitter: 2"
else
  grep -q "groups.flaky.retry_backoff.jitter: must be in 0..1" "$T/bad.err" || fail "jitter error: $(cat "$T/bad.err")"
fi

if [ "$fails" -ne 0 ]; then
  echo "--- reconciler"; tail -20 "$T/reconciler.log"; echo "--- worker"; tail -20 "$T/worker.log"
  echo "$fails check(s) failed"
  exit 1
fi
echo "ok: retry backoff due times recorded, honoured, rebuilt alike"
