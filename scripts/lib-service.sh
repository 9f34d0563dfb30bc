# Sourced (not run) by the scripts in scripts/services/: what every service
# script does alike. The caller sets NAME (for messages) before sourcing.

say() { echo "$NAME.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# check_port LABEL VALUE: a number in 1024-65535, else die naming LABEL.
check_port() {
  case "$2" in ''|*[!0-9]*) die "port $1='$2' is not a number" ;; esac
  [ "$2" -ge 1024 ] && [ "$2" -le 65535 ] || die "port $1=$2 is out of range 1024-65535"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pid_of PIDFILE PATTERN: prints the pid in PIDFILE while that process runs
# and its command line holds PATTERN (so a recycled pid is not taken for ours).
pid_of() {
  [ -f "$1" ] || return 1
  local pid
  pid="$(head -c 32 "$1" | tr -cd '0-9')"
  [ -n "$pid" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2" || return 1
  echo "$pid"
}

# launch PIDFILE LOG PATTERN COMMAND...: starts COMMAND in its own session
# (it must outlive the shell that started it and not get its signals). The
# inner shell writes its own pid and execs, so PIDFILE names the command even
# when setsid forks; launch returns once the pid shows PATTERN, so a caller
# checking pid_of does not take a command still exec'ing for one that died.
launch() {
  local pf="$1" log="$2" pattern="$3"
  shift 3
  rm -f "$pf"
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pf" "$@" >"$log" 2>&1 </dev/null &
  local i
  for i in $(seq 1 100); do
    pid_of "$pf" "$pattern" >/dev/null && return 0
    sleep 0.05
  done
}

# await_ready PID TIMEOUT LOG: polls the caller's `ready` once a second.
# Returns 0 when ready (WAITED holds the seconds), 1 when PID exited, 2 on
# timeout; in both failures the log's last lines are printed.
await_ready() {
  local pid="$1" timeout="$2" log="$3"
  WAITED=0
  until ready; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "it exited during start; last lines of $log:"
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    if [ "$WAITED" -ge "$timeout" ]; then
      say "not ready within ${timeout}s; last lines of $log:"
      tail -n 30 "$log" >&2 || true
      return 2
    fi
    sleep 1
    WAITED=$((WAITED + 1))
  done
}

# stop_pid PID [GRACE]: SIGTERM, then SIGKILL after GRACE seconds (30);
# returns once it is gone.
stop_pid() {
  local grace="${2:-30}"
  kill -TERM "$1" 2>/dev/null || true
  local waited=0
  while kill -0 "$1" 2>/dev/null; do
    if [ "$waited" -eq $((grace * 2)) ]; then
      say "pid $1 ignored SIGTERM for ${grace}s; killing it"
      kill -KILL "$1" 2>/dev/null || true
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
}
