#!/bin/bash
# bench_k8s's rows, each on a control plane started afresh, altar's and
# curl's taking turns going first, with the paired ratios printed at the end.
# One plane for both rows of a pair would hand the second row a server whose
# caches and watchers the first one warmed (and whose etcd holds its Jobs),
# so every row gets its own: `k8s.sh clean; start`, then one bench_k8s row.
#   bench_k8s_rows.sh BUILD_DIR [--pairs P] [--backlog B] [N…]
#     P pairs per N (default 1); N default 1000 4000 10000 (about 25 minutes)
#     --backlog B is passed to altar's rows (0: no pacing, the creates
#     bounded by the window alone: what the HTTP/2 machinery can submit)
# Prints every row as bench_k8s prints it, then per N: end to end (Jobs/s,
# first POST → all seen finished), altar over curl per pair and the median;
# submit/s the same way; watcher closes per row; a group's last completion →
# seen (median), altar over curl's bare watch.
# Needs the control plane's binaries (scripts/k8s-build.sh, as `k8s.sh start`
# builds them) and uses the default ALTAR_K8S_DIR; it stops any plane there.
set -euo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:?usage: bench_k8s_rows.sh BUILD_DIR [--pairs P] [--backlog B] [N…]}"
shift
BENCH="$BUILD/bench/bench_k8s"
[ -x "$BENCH" ] || { echo "bench_k8s_rows.sh: no $BENCH (build the bench_k8s target)" >&2; exit 2; }
PAIRS=1
ALTAR_ARGS=()
SIZES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) PAIRS="${2:?--pairs needs a count}"; shift 2 ;;
    --backlog) ALTAR_ARGS+=(--backlog "${2:?--backlog needs a count}"); shift 2 ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] || { echo "bench_k8s_rows.sh: not a Job count: $1" >&2; exit 2; }
       SIZES+=("$1"); shift ;;
  esac
done
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 4000 10000)
[[ "$PAIRS" =~ ^[1-9][0-9]*$ ]] || { echo "bench_k8s_rows.sh: --pairs wants a positive count" >&2; exit 2; }

K8S="$HERE/scripts/services/k8s.sh"
ROWS="$(mktemp)"
trap 'rm -f "$ROWS"; bash "$K8S" stop >/dev/null 2>&1 || true' EXIT

# One row on a fresh plane: "who N" appended to $ROWS with bench_k8s's line.
row() { # who N
  bash "$K8S" clean >/dev/null
  bash "$K8S" start >/dev/null
  local flag=--no-altar args=()
  if [ "$1" = altar ]; then flag=--no-curl; args=("${ALTAR_ARGS[@]}"); fi
  local line
  line="$("$BENCH" "${args[@]}" "$flag" "$2" 2>/dev/null | awk -v n="$2" -v who="$1" '$1 == n && $2 == who')"
  [ -n "$line" ] || { echo "bench_k8s_rows.sh: the $1 row of $2 Jobs printed no result" >&2; exit 1; }
  echo "$line"
  echo "$line" >> "$ROWS"
}

echo "bench_k8s rows, each on a fresh control plane ($(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%F %H:%M') UTC${ALTAR_ARGS[*]:+, altar: ${ALTAR_ARGS[*]}})"
for n in "${SIZES[@]}"; do
  for ((p = 0; p < PAIRS; p++)); do
    if ((p % 2 == 0)); then row altar "$n"; row curl "$n"; else row curl "$n"; row altar "$n"; fi
  done
done

# The k-th altar row of a size pairs with its k-th curl row.
echo
echo "per N: altar / curl, pair by pair, and the median of the pairs' ratios"
awk '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n = $1; who = $2; k = ++count[n, who]; if (!(n in seen)) { seen[n] = 1; order[++sizes] = n }
    submit[n, who, k] = $4; e2e[n, who, k] = $5; delay[n, who, k] = $8; closes[n, who, k] = $11 }
  END {
    for (s = 1; s <= sizes; s++) {
      n = order[s]; m = count[n, "altar"] < count[n, "curl"] ? count[n, "altar"] : count[n, "curl"]
      line_e = line_s = line_d = line_c = ""
      for (k = 1; k <= m; k++) {
        re[k] = e2e[n, "altar", k] / e2e[n, "curl", k]; rs[k] = submit[n, "altar", k] / submit[n, "curl", k]
        rd[k] = delay[n, "altar", k] / delay[n, "curl", k]
        line_e = line_e sprintf(" %.1f/%.1f", e2e[n, "altar", k], e2e[n, "curl", k])
        line_s = line_s sprintf(" %.1f/%.1f", submit[n, "altar", k], submit[n, "curl", k])
        line_d = line_d sprintf(" %.2f/%.2f", delay[n, "altar", k], delay[n, "curl", k])
        line_c = line_c sprintf(" %d/%d", closes[n, "altar", k], closes[n, "curl", k])
      }
      printf "%6d  e2e Jobs/s%s  ratio median %.3f\n", n, line_e, median(re, m)
      printf "%6d  submit/s%s  ratio median %.3f\n", n, line_s, median(rs, m)
      printf "%6d  completion → seen median s%s  ratio median %.3f\n", n, line_d, median(rd, m)
      printf "%6d  watcher closes%s\n", n, line_c
    }
  }' "$ROWS"
