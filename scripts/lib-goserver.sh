# Shared by fake-gcs.sh and minio.sh (sourced, not run): start, stop and
# status for one Go server built by scripts/go-tool.sh, on 127.0.0.1.
# The caller sets NAME, DIR (state: pid, log, data), BIN_ARGS (go-tool.sh's
# NAME MODULE VERSION), TIMEOUT, and defines run_server (execs the server
# with "$BIN"), ready (exit 0 once it answers) and after_start (creates the
# test buckets).

say() { echo "$NAME.sh: $*" >&2; }
die() { say "$*"; exit 1; }

PIDFILE="$DIR/server.pid"
LOG="$DIR/server.log"

check_port() {
  case "$1" in ''|*[!0-9]*) die "port '$1' is not a number" ;; esac
  [ "$1" -ge 1024 ] && [ "$1" -le 65535 ] || die "port $1 is out of range 1024-65535"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid="$(head -c 32 "$PIDFILE" | tr -cd '0-9')"
  [ -n "$pid" ] || return 1
  # The pid must still be our server, not a recycled number.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$DIR" || return 1
  echo "$pid"
}

start() {
  local pid
  if pid="$(running_pid)"; then
    if ready; then exit 0; fi
    say "pid $pid is running but not ready; waiting"
  else
    rm -f "$PIDFILE"
    for p in $PORTS; do
      port_open "$p" && die "port $p on 127.0.0.1 is taken by another process; set the port variable to a free one"
    done
    command -v curl >/dev/null 2>&1 || die "curl not found; run scripts/install-deps.sh test"
    BIN="$("$HERE/scripts/go-tool.sh" $BIN_ARGS)" || die "could not build $NAME (see above)"
    rm -rf "$DIR/data"
    mkdir -p "$DIR/data"
    say "starting $NAME on 127.0.0.1:$PORT (log: $LOG)"
    # setsid: the server must not die with the shell that started it.
    ( cd "$DIR" && run_server ) >"$LOG" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$PIDFILE"
  fi
  local waited=0
  until ready; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "the server exited during start; last lines of $LOG:"
      tail -n 30 "$LOG" >&2 || true
      rm -f "$PIDFILE"
      exit 1
    fi
    if [ "$waited" -ge "$TIMEOUT" ]; then
      say "not ready within ${TIMEOUT}s; last lines of $LOG:"
      tail -n 30 "$LOG" >&2 || true
      stop
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  after_start || { stop; die "creating the test buckets failed"; }
  say "ready on 127.0.0.1:$PORT after ${waited}s"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge 60 ]; then
      say "pid $pid ignored SIGTERM for 30s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  rm -f "$PIDFILE"
}

main() {
  case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) running_pid >/dev/null && ready ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
  esac
}
