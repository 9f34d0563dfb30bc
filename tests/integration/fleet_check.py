#!/usr/bin/env python3
"""Checks a finished fleet run against the fleet invariants (DESIGN.md).

usage: fleet_check.py RUN_DIR GROUPS FOLDS DEAD_GROUP KILLS SLOTS
Reads RUN_DIR/ready.jsonl and RUN_DIR/dead.jsonl (group events as JSON lines,
from `altar log consume`), RUN_DIR/data/runs.log (one "group/fold" line per
completed command run) and, when present, RUN_DIR/ledger.jsonl (`altar ledger
dump`) with RUN_DIR/status.json (`altar status --json`). Exits non-zero naming
the first broken invariant."""
import collections
import json
import sys


def load(path):
    events = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                events.append(json.loads(line))
    return events


def main():
    run_dir, n_groups, folds, dead_group, kills, slots = sys.argv[1:7]
    n_groups, folds, kills, slots = int(n_groups), int(folds), int(kills), int(slots)
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

    # No finished job ran again, beyond those in flight at a kill.
    runs = collections.Counter()
    with open(f"{run_dir}/data/runs.log") as f:
        for line in f:
            runs[line.strip()] += 1
    extra = sum(c - 1 for c in runs.values() if c > 1)
    bound = kills * slots * 2
    if extra > bound:
        problems.append(f"{extra} repeated shard runs, more than {bound} ({kills} kills x {slots} slots x 2)")

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
          f"{len(by_id)} event ids, {extra} repeated runs after {kills} kills")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
