"""The jobs partitions each worker owns now, read from the workers' own logs.

A worker logs "altar worker ID: assigned N partition(s) ...: TOPIC:p,p" and
"... revoked ...". Replaying those lines per worker gives what each owns.

usage: owned_partitions.py DIR TOPIC ID...      (logs at DIR/worker-ID.log)
prints {"ID": [partitions], ...}; with --settled P instead prints 1 when every
worker owns some partition and together they own exactly 0..P-1, else 0.
Shared by bench/bench_forward.sh and tests/integration/forward_e2e.sh.
"""
import json
import re
import sys


def owned(log_dir, topic, ids, log_name):
    out = {}
    for w in ids:
        have = set()
        try:
            lines = open(f"{log_dir}/{log_name(w)}").read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            m = re.match(rf"altar worker {re.escape(w)}: (assigned|revoked) \d+ partition\(s\).*?: (\S+:.*)$", line)
            if not m:
                continue
            for group in m.group(2).split():
                t, _, ps = group.rpartition(":")
                if t != topic:
                    continue
                for p in ps.split(","):
                    (have.add if m.group(1) == "assigned" else have.discard)(int(p))
        out[w] = sorted(have)
    return out


def main(argv):
    settled = None
    if len(argv) > 2 and argv[1] == "--settled":
        settled = int(argv[2])
        argv = argv[:1] + argv[3:]
    log_name = lambda w: f"worker-{w}.log"
    if len(argv) > 2 and argv[1] == "--log-name-digit":
        # the forwarding test names its logs worker1.log for w1
        log_name = lambda w: f"worker{w[1:]}.log"
        argv = argv[:1] + argv[2:]
    if len(argv) < 4:
        sys.exit(__doc__)
    o = owned(argv[1], argv[2], argv[3:], log_name)
    if settled is None:
        print(json.dumps(o))
        return
    ws = list(o.values())
    print(1 if all(ws) and sorted(p for w in ws for p in w) == list(range(settled)) else 0)


if __name__ == "__main__":
    main(sys.argv)
