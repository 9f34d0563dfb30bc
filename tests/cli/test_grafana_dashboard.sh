#!/bin/sh
# deploy/grafana/altar.json: valid JSON a Grafana import takes (panels with
# Prometheus targets on the datasource variable), every metric it queries is
# documented in docs/metrics.md, and every documented metric has a panel.
# (test_worker_metrics.sh checks the documented names against what the
# binaries serve.)
set -u
: "${ALTAR_SOURCE_DIR:?}"
python3 - "$ALTAR_SOURCE_DIR/deploy/grafana/altar.json" "$ALTAR_SOURCE_DIR/docs/metrics.md" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
doc = open(sys.argv[2]).read()
documented = set(re.findall(r"^\| `(altar_[a-z_]+)`", doc, re.M))
assert documented, "no metrics table in docs/metrics.md"
used = set()
assert d["panels"], "no panels"
for p in d["panels"]:
    assert p["datasource"]["uid"] == "${datasource}", p["title"]
    assert p["targets"], p["title"]
    for t in p["targets"]:
        used |= set(re.findall(r"altar_[a-z_]+", t["expr"]))
# A histogram is queried by its series (_bucket, _sum, _count), documented by its name.
used = {re.sub(r"_(bucket|sum|count)$", "", m) if re.sub(r"_(bucket|sum|count)$", "", m) in documented else m
        for m in used}
undocumented = used - documented
unused = documented - used
assert not undocumented, f"queried but not in docs/metrics.md: {sorted(undocumented)}"
assert not unused, f"documented but on no panel: {sorted(unused)}"
print(f"grafana dashboard: {len(d['panels'])} panels over {len(used)} metrics: ok")
PY
