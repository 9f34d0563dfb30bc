# What the shell tests (tests/cli, tests/integration) share; POSIX sh, sourced:
#   . "${ALTAR_SOURCE_DIR:-$(dirname "$0")/../..}/tests/lib/common.sh"
#   altar_test_begin NAME [TOOL...]
# altar_test_begin checks that ALTAR_BIN is set and each TOOL is installed,
# makes the run's directory $T (altar-NAME.XXXXXX under $TMPDIR), and on exit
# kills -9 every pid in $pids, runs the test's on_cleanup when it defines one,
# and removes $T (kept with KEEP=1). SIGINT/SIGTERM exit 1.
# fail MESSAGE counts a failure, ok [MESSAGE] a passed check (printing
# MESSAGE when given), check CONDITION MESSAGE either; fatal MESSAGE prints
# the logs under $T and exits at once; altar_test_end NAME
# prints the counts and returns non-zero when anything failed; free_port
# prints a port on 127.0.0.1 the kernel just chose.

altar_test_begin() {
  : "${ALTAR_BIN:?ALTAR_BIN must name the altar binary}"
  _altar_test_name="$1"
  shift
  for _tool in "$@"; do
    command -v "$_tool" >/dev/null || { echo "FAIL: $_tool is required (scripts/install-deps.sh test)" >&2; exit 1; }
  done
  T="$(mktemp -d "${TMPDIR:-/tmp}/altar-$_altar_test_name.XXXXXX")"
  pids=""
  fails=0
  checks=0
  trap altar_test_cleanup EXIT
  trap 'exit 1' INT TERM
}

altar_test_cleanup() {
  for _p in $pids; do kill -9 "$_p" 2>/dev/null || true; done
  if command -v on_cleanup >/dev/null 2>&1; then on_cleanup || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}

fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}
ok() {
  checks=$((checks + 1))
  if [ $# -gt 0 ]; then echo "ok: $*"; fi
}
check() { if eval "$1"; then ok; else fail "$2"; fi; }
# fatal MESSAGE: for a failure the rest of the test cannot survive: prints it
# with every log under $T (indented) and exits 1 (the cleanup still runs).
fatal() {
  echo "FAIL: $*" >&2
  for _log in "$T"/*.log; do [ -f "$_log" ] && sed 's/^/  | /' "$_log" >&2; done
  exit 1
}

# A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

altar_test_end() {
  echo "$1: $checks checks passed, $fails failed"
  [ "$fails" -eq 0 ]
}

# The head of a fleet's altar.yaml on stdout: the transport ($TRANSPORT:
# local, the default, under $T/log, or kafka at $ALTAR_KAFKA_BROKERS),
# topics named PREFIX.jobs etc. (TOPIC_EXTRA appended inside their braces),
# BACKEND as the backend line's value and the ledger under $T/ledger.
#   altar_test_fleet_config PREFIX BACKEND [TOPIC_EXTRA]
altar_test_fleet_config() {
  echo "transport:"
  if [ "${TRANSPORT:-local}" = kafka ]; then
    : "${ALTAR_KAFKA_BROKERS:?the Kafka broker must be running (scripts/services/kafka.sh start)}"
    echo "  name: kafka"
    echo "  kafka: {bootstrap.servers: \"$ALTAR_KAFKA_BROKERS\"}"
  else
    echo "  name: local"
    echo "  dir: $T/log"
  fi
  echo "topics: {jobs: $1.jobs, status: $1.status, ready: $1.ready, dead: $1.dead, dlq: $1.dlq${3:+, $3}}"
  echo "backend: $2"
  echo "ledger: {path: $T/ledger}"
}

# The groups block of a fleet's altar.yaml for shards grouped by job and the
# `group` label, fired when all `num_folds` folds are in, retried twice.
altar_test_fold_groups() {
  echo "groups:"
  echo "  shard:"
  echo "    group_by: [job_id, group]"
  echo "    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}"
  echo "    on_failed: retry"
  echo "    max_restarts: 2"
}
