# What the shell tests against the control plane (scripts/services/k8s.sh)
# share; POSIX sh, sourced:
#   . "$ALTAR_SOURCE_DIR/tests/lib/k8s.sh"
# sets K8S (its state directory) and SERVER, defines `api PATH` (a GET as the
# admin, JSON out) and, when the API server is not ready, exits 77 (skipped)
# or 1 under CI=true.
K8S="${ALTAR_K8S_DIR:-${TMPDIR:-/tmp}/altar-k8s-${ALTAR_K8S_PORT:-16443}}"
SERVER="https://127.0.0.1:${ALTAR_K8S_PORT:-16443}"
api() {
  curl -sS --max-time 20 --cacert "$K8S/pki/ca.crt" --cert "$K8S/pki/admin.crt" --key "$K8S/pki/admin.key" "$SERVER$1"
}
if ! api /readyz 2>/dev/null | grep -qx ok; then
  echo "no control plane at $K8S; start it with scripts/services/k8s.sh start" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
