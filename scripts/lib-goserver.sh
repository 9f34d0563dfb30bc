# Shared by fake-gcs.sh and minio.sh (sourced, not run): start, stop and
# status for one Go server built by scripts/go-tool.sh, on 127.0.0.1.
# The caller sets NAME, DIR (state: pid, log, data), PORT and PORTS (to check
# free), BIN_ARGS (go-tool.sh's NAME MODULE VERSION), TIMEOUT, and defines
# server_args (prints nothing; sets the array ARGS: the command line after
# "$BIN", env assignments first as `env K=V …` when needed), ready (exit 0
# once it answers) and after_start (creates the test buckets).

. "$HERE/scripts/lib-service.sh"

PIDFILE="$DIR/server.pid"
LOG="$DIR/server.log"

running_pid() { pid_of "$PIDFILE" "$DIR"; }

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
    server_args
    (cd "$DIR" && launch "$PIDFILE" "$LOG" "$DIR" "${ARGS[@]}")
    pid="$(head -c 32 "$PIDFILE" 2>/dev/null | tr -cd '0-9')"
    [ -n "$pid" ] || die "could not start $NAME; last lines of $LOG: $(tail -n 5 "$LOG" 2>/dev/null)"
  fi
  local rc=0
  await_ready "$pid" "$TIMEOUT" "$LOG" || rc=$?
  case "$rc" in
    0) ;;
    1) rm -f "$PIDFILE"; exit 1 ;;
    *) stop; exit 1 ;;
  esac
  after_start || { stop; die "creating the test buckets failed"; }
  say "ready on 127.0.0.1:$PORT after ${WAITED}s"
}

stop() {
  local pid
  if pid="$(running_pid)"; then stop_pid "$pid"; fi
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
