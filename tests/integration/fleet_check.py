#!/usr/bin/env python3
"""Checks a finished fleet run against the fleet invariants (DESIGN.md).

usage: fleet_check.py RUN_DIR GROUPS FOLDS DEAD_GROUP KILLS
Reads RUN_DIR/ready.jsonl and RUN_DIR/dead.jsonl (group events as JSON lines,
from `altar log consume`), RUN_DIR/data/runs.log (one "group/fold worker-life
finish-time" line per completed command run), RUN_DIR/kills.log (one
"worker-life time" line per kill -9), the workers' logs (forwards) and, when
present, RUN_DIR/ledger.jsonl (`altar ledger dump`) with RUN_DIR/status.json
(`altar status --json`). Exits non-zero naming the first broken invariant."""
import collections
import glob
import json
import re
import sys

# How long a finished run may stay uncommitted: the worker's commit interval
# (1 s by default) plus a commit in flight or a rebalance on a loaded machine.
UNCOMMITTED_S = 3.0


def load(path):
    events = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                events.append(json.loads(line))
    return events


def main():
    run_dir, n_groups, folds, dead_group, kills = sys.argv[1:6]
    n_groups, folds, kills = int(n_groups), int(folds), int(kills)
    ready = load(f"{run_dir}/ready.jsonl")
    dead = load(f"{run_dir}/dead.jsonl")
    problems = []

    # Groups fire once: one event id per group, and an id never carries two contents.
    by_id = collections.defaultdict(set)
    for e in ready + dead:
        by_id[e["event_id"]].add(json.dumps({k: e[k] for k in ("event", "kind", "group_key", "shards")}, sort_keys=True))
    for eid, contents in by_id.items():
        if len(contents) > 1:
            problems.append(f"event_id {eid} published with {len(contents)} different contents")
    ids_per_group = collections.defaultdict(set)
    for e in ready + dead:
        ids_per_group[(e["kind"], e["group_key"])].add(e["event_id"])
    for g, ids in ids_per_group.items():
        if len(ids) > 1:
            problems.append(f"group {g} published under {len(ids)} event ids")

    fired = {}
    for e in ready:
        fired[e["group_key"].split(":")[-1]] = e
    dead_groups = {e["group_key"].split(":")[-1] for e in dead}
    # The poison job with a readable identity is refused, and its group dead-letters.
    if "poison" not in dead_groups:
        problems.append("the refused poison job's group was not dead-lettered")
    dead_groups.discard("poison")
    want_fired = {f"g{i:03d}" for i in range(n_groups)} - {dead_group}
    missing = sorted(want_fired - set(fired))
    if missing:
        problems.append(f"{len(missing)} complete group(s) never fired, e.g. {missing[:5]}")
    if dead_groups != {dead_group}:
        problems.append(f"dead-lettered groups are {sorted(dead_groups)}, want only {dead_group}")
    # Every shard of a fired group is in it exactly once.
    for g, e in fired.items():
        folds_seen = collections.Counter(s["labels"].get("fold") for s in e["shards"])
        if sorted(folds_seen) != [str(i) for i in range(folds)] or any(c != 1 for c in folds_seen.values()):
            problems.append(f"group {g} fired with folds {dict(folds_seen)}")

    # No finished job ran again, beyond what a kill -9 may leave uncommitted.
    # A worker commits its finished offsets about once a second (and on every
    # revoke and stop), so a killed worker life's runs in its last seconds,
    # those still running at the kill, and the jobs it forwarded to a peer
    # before committing may all run again; nothing any other life finished.
    runs = collections.Counter()
    finished = collections.defaultdict(list)  # worker life -> finish times
    with open(f"{run_dir}/data/runs.log") as f:
        for line in f:
            shard, life, ts = line.split()
            runs[shard] += 1
            finished[life].append(float(ts))
    extra = sum(c - 1 for c in runs.values() if c > 1)
    forwarded = collections.Counter()  # worker life -> copies it forwarded
    for log in glob.glob(f"{run_dir}/worker*.log"):
        for line in open(log, errors="replace"):
            m = re.search(r": forwarded here from ([^/ ]+)/", line)
            if m:
                forwarded[m.group(1)] += 1
    bound, parts = 0, []
    kill_lines = open(f"{run_dir}/kills.log").read().splitlines()
    if len(kill_lines) != kills:
        problems.append(f"kills.log records {len(kill_lines)} kills, the run made {kills}")
    for line in kill_lines:
        life, at = line.split()
        late = sum(1 for t in finished[life] if t >= float(at) - UNCOMMITTED_S)
        bound += late + forwarded[life]
        parts.append(f"{life}: {late} run(s) from {UNCOMMITTED_S:g} s before its kill, {forwarded[life]} forwarded")
    if extra > bound:
        problems.append(f"{extra} repeated shard runs, more than the {bound} the kills may leave uncommitted "
                        f"({'; '.join(parts)})")

    # No record left open by a dead worker: nothing pending or running (consumed
    # or not), one terminal record per shard (runs that a newer run replaced
    # or that were released are marked so), and `altar status` agrees.
    try:
        ledger = load(f"{run_dir}/ledger.jsonl")
    except FileNotFoundError:
        ledger = None
    if ledger is not None:
        per_shard = collections.Counter()
        replaced = 0
        for r in ledger:
            labels = r["handle"]["labels"]
            if "group" not in labels or labels["group"] == "poison":
                continue  # not one of the job's shards (the refused poison job)
            if r["state"] in ("pending", "running"):
                problems.append(f"record {r['handle']['external_id']} ({labels['group']}/{labels.get('fold')}) left "
                                f"{r['state']}{', consumed' if r['consumed'] else ''}")
            if (r.get("failure") or {}).get("reason") in ("superseded", "released"):
                replaced += 1
                continue
            per_shard[(labels["group"], labels.get("fold"))] += 1
        want = {(f"g{i:03d}", str(f)) for i in range(n_groups) for f in range(folds)}
        bad = sorted(k for k in want if per_shard[k] != 1) + sorted(set(per_shard) - want)
        if bad:
            problems.append(f"{len(bad)} shard(s) without exactly one terminal record, e.g. "
                            f"{[(k, per_shard[k]) for k in bad[:3]]}")
        st = json.load(open(f"{run_dir}/status.json"))["shards"]
        if st["total"] != n_groups * folds or st["pending"] or st["running"]:
            problems.append(f"altar status counts {st}, want {n_groups * folds} shards, none pending or running")
        print(f"ledger check: {len(ledger)} records, {sum(per_shard.values())} shards, {replaced} replaced runs")

    total = sum(len(e["shards"]) for e in ready)
    print(f"fleet check: {len(fired)} groups fired ({total} shards), {len(dead_groups)} dead-lettered, "
          f"{len(by_id)} event ids, {extra} repeated runs after {kills} kills (at most {bound})")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
