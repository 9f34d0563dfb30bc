#!/bin/sh
# `altar run --backend docker` end to end on the real engine: a spec with a
# digest-verified input and a collected output succeeds; a task exiting 3
# exits 1 with reason exit_3; a wrong digest fails at staging, deletes the
# copy and starts no container. A missing engine is a failure, not a skip.
set -eu
IMAGE="${ALTAR_DOCKER_TEST_IMAGE:-altar-test/busybox:1}"
. "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
altar_test_begin run-docker docker
# The containers this test's tasks left (they mount its data root).
on_cleanup() {
  for id in $(docker ps -aq --no-trunc --filter "volume=$T/data" 2>/dev/null); do
    docker rm --force "$id" >/dev/null 2>&1 || true
  done
}

docker info >/dev/null 2>&1 \
  || fatal "no Docker engine answers 'docker info'; start one with scripts/services/dockerd.sh start"
docker image inspect "$IMAGE" >/dev/null 2>&1 \
  || fatal "test image $IMAGE is missing; build it with scripts/docker-test-image.sh"
mkdir -p "$T/data"

printf 'model weights\n' >"$T/weights.bin"
HEX="$(sha256sum "$T/weights.bin" | cut -d' ' -f1)"

cat >"$T/ok.json" <<JSON
{"kind": "score", "image": "$IMAGE",
 "command": ["sh", "-c", "mkdir -p /mnt/volume/jobs/j1 && sha256sum /mnt/volume/models/m1/w.bin | cut -d' ' -f1 > /mnt/volume/jobs/j1/sum.txt"],
 "labels": {"job_id": "j1", "fold": "0"},
 "inputs": [{"uri": "file://$T/weights.bin", "logical_path": "models/m1/w.bin", "digest": "sha256:$HEX"}],
 "outputs": [{"uri": "file://$T/out/sum.txt", "logical_path": "jobs/j1/sum.txt"}],
 "timeout_s": 120}
JSON

rc=0
"$ALTAR_BIN" run "$T/ok.json" --backend docker --data-root "$T/data" --quiet >"$T/ok.out" 2>"$T/ok.err" || rc=$?
[ "$rc" = 0 ] || { cat "$T/ok.err" >&2; fatal "run of a good spec exited $rc"; }
grep -q '"succeeded"' "$T/ok.out" || fatal "status is not succeeded: $(cat "$T/ok.out")"
grep -q '"local"' "$T/ok.out" || fatal "handle backend is not 'local': $(cat "$T/ok.out")"
grep -q '"job_id"' "$T/ok.out" || fatal "handle lacks the spec's labels: $(cat "$T/ok.out")"
[ -f "$T/out/sum.txt" ] || fatal "output was not collected to $T/out/sum.txt"
[ "$(cat "$T/out/sum.txt")" = "$HEX" ] || fatal "collected output '$(cat "$T/out/sum.txt")' is not the input's digest"
[ -f "$T/data/models/m1/w.bin" ] || fatal "input was not staged into the data root"

# A failing command: exit 1, reason exit_3.
cat >"$T/exit3.json" <<JSON
{"kind": "score", "image": "$IMAGE", "command": ["sh", "-c", "exit 3"], "labels": {"job_id": "j2"}}
JSON
rc=0
"$ALTAR_BIN" run "$T/exit3.json" --backend docker --data-root "$T/data" --quiet >"$T/e3.out" 2>"$T/e3.err" || rc=$?
[ "$rc" = 1 ] || { cat "$T/e3.err" >&2; fatal "a task exiting 3 made altar run exit $rc, want 1"; }
grep -q '"exit_3"' "$T/e3.out" || fatal "reason is not exit_3: $(cat "$T/e3.out")"

# A digest that does not match: staging fails, the copy is gone, nothing ran.
BAD="0000000000000000000000000000000000000000000000000000000000000000"
cat >"$T/bad.json" <<JSON
{"kind": "score", "image": "$IMAGE", "command": ["true"],
 "inputs": [{"uri": "file://$T/weights.bin", "logical_path": "models/m2/w.bin", "digest": "sha256:$BAD"}]}
JSON
before="$(docker ps -aq --filter "volume=$T/data" | wc -l)"
rc=0
"$ALTAR_BIN" run "$T/bad.json" --backend docker --data-root "$T/data" --quiet >"$T/bad.out" 2>"$T/bad.err" || rc=$?
[ "$rc" != 0 ] || fatal "a digest mismatch did not fatal altar run"
grep -q "models/m2/w.bin" "$T/bad.err" || fatal "the error does not name the input: $(cat "$T/bad.err")"
[ ! -e "$T/data/models/m2/w.bin" ] || fatal "the mismatching copy was not deleted"
after="$(docker ps -aq --filter "volume=$T/data" | wc -l)"
[ "$before" = "$after" ] || fatal "a container was started despite the digest mismatch"

# An unknown GPU pool is refused before anything runs, naming the field.
cat >"$T/gpu.json" <<JSON
{"kind": "score", "image": "$IMAGE", "command": ["true"], "resources": {"gpu": "a100", "count": 1}}
JSON
rc=0
"$ALTAR_BIN" run "$T/gpu.json" --backend docker --data-root "$T/data" --quiet >"$T/gpu.out" 2>"$T/gpu.err" || rc=$?
[ "$rc" = 2 ] || fatal "a GPU request on docker exited $rc, want 2"
grep -q "resources.gpu" "$T/gpu.err" || fatal "the error does not name resources.gpu: $(cat "$T/gpu.err")"

echo "ok: altar run --backend docker"
