#!/bin/sh
# Starts (or reuses) a Docker engine for the docker backend's tests and builds
# the registry-free test image. `stop` stops only a dockerd this script started.
# Usage: scripts/services/dockerd.sh start|stop|status
# Needs root to start dockerd. Runs it with --iptables=false --bridge=none, so
# containers have no network, which the tests do not need.
set -eu

here="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${ALTAR_CACHE:-${HOME:-/root}/.cache/altar}/dockerd"
PIDFILE="$STATE/dockerd.pid"
LOG="$STATE/dockerd.log"
WAIT_S="${ALTAR_DOCKERD_WAIT_S:-60}"

die() { echo "dockerd.sh: $*" >&2; exit 1; }

engine_up() { docker info >/dev/null 2>&1; }

our_pid() {
  # Prints the pid of the dockerd we started, if it still runs.
  [ -f "$PIDFILE" ] || return 1
  pid="$(head -c 32 "$PIDFILE" | tr -cd '0-9')"
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled pid belonging to something else.
  case "$(cat "/proc/$pid/comm" 2>/dev/null || true)" in
    dockerd) echo "$pid" ;;
    *) return 1 ;;
  esac
}

# alive_as PID NAME...: PID runs (not a zombie) as one of NAMEs.
alive_as() {
  _pid="$1"
  shift
  [ -n "$_pid" ] && [ -r "/proc/$_pid/status" ] || return 1
  [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$_pid/status" 2>/dev/null)" != Z ] || return 1
  _comm="$(cat "/proc/$_pid/comm" 2>/dev/null || true)"
  for _n in "$@"; do [ "$_comm" = "$_n" ] && return 0; done
  return 1
}

# The daemon being started is alive: the child we started, still `setsid`
# until it has exec'd dockerd (a CI run once read its name in that moment
# and gave up on a daemon that came up a second later), or the pid dockerd
# wrote itself.
starting() {
  alive_as "$(head -c 32 "$PIDFILE" 2>/dev/null | tr -cd '0-9')" dockerd setsid ||
    alive_as "$(head -c 32 "$STATE/dockerd.self.pid" 2>/dev/null | tr -cd '0-9')" dockerd
}

start() {
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1 ||
    [ ! -x "${ALTAR_BUSYBOX:-/bin/busybox}" ]; then
    "$here/install-deps.sh" test || die "could not install docker.io and busybox-static (see scripts/install-deps.sh)"
  fi
  command -v docker >/dev/null 2>&1 || die "the docker client is missing after installing docker.io"

  if engine_up; then
    echo "dockerd.sh: reusing the running Docker engine" >&2
  else
    if pgrep -x dockerd >/dev/null 2>&1; then
      # Someone else's dockerd is still coming up: wait for it, start none.
      echo "dockerd.sh: a dockerd is running but not answering yet; waiting for it" >&2
      i=0
      while ! engine_up; do
        i=$((i + 1))
        [ "$i" -lt "$WAIT_S" ] || die "the running dockerd did not answer 'docker info' within ${WAIT_S}s"
        sleep 1
      done
    else
      command -v dockerd >/dev/null 2>&1 || die "dockerd is missing after installing docker.io"
      [ "$(id -u)" = 0 ] || die "no Docker engine is running and starting dockerd needs root"
      mkdir -p "$STATE"
      # A socket left by a dead daemon would make the new one refuse to start.
      rm -f /var/run/docker.sock "$STATE/dockerd.self.pid"
      echo "dockerd.sh: starting dockerd (log: $LOG)" >&2
      # setsid: the daemon must outlive this script and not get its signals.
      setsid dockerd --iptables=false --bridge=none --pidfile "$STATE/dockerd.self.pid" \
        >>"$LOG" 2>&1 </dev/null &
      echo $! >"$PIDFILE"
      i=0
      while ! engine_up; do
        i=$((i + 1))
        if ! starting; then
          tail -n 20 "$LOG" >&2 || true
          rm -f "$PIDFILE"
          die "dockerd exited during start-up (log: $LOG)"
        fi
        [ "$i" -lt "$WAIT_S" ] || { tail -n 20 "$LOG" >&2 || true; die "dockerd did not answer 'docker info' within ${WAIT_S}s (log: $LOG)"; }
        sleep 1
      done
      # stop kills the daemon itself, not a setsid that forked it.
      self="$(head -c 32 "$STATE/dockerd.self.pid" 2>/dev/null | tr -cd '0-9')"
      if alive_as "$self" dockerd; then echo "$self" >"$PIDFILE"; fi
      echo "dockerd.sh: dockerd is up (pid $(cat "$PIDFILE"))" >&2
    fi
  fi

  # Memory limits must work, or the oom_killed case cannot be tested honestly.
  if docker info 2>&1 | grep -qi "WARNING: No memory limit support"; then
    echo "dockerd.sh: warning: this engine reports no memory limit support; the OOM test will fail" >&2
  fi
  "$here/docker-test-image.sh"
}

stop() {
  if pid="$(our_pid)"; then
    kill "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null; do
      i=$((i + 1))
      [ "$i" -lt 30 ] || { kill -9 "$pid" 2>/dev/null || true; break; }
      sleep 1
    done
    echo "dockerd.sh: stopped dockerd (pid $pid)" >&2
  else
    echo "dockerd.sh: no dockerd started by this script is running; nothing to stop" >&2
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if engine_up; then echo "up"; else echo "down"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
