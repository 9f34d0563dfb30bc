#!/bin/bash
# A real Kubernetes control plane for the kubernetes backend's tests, with no
# kubelet: etcd, kube-apiserver, kube-controller-manager (the Job controller
# and the few controllers Jobs need), kube-scheduler, and kwok playing the
# kubelet for two fake nodes. Everything listens on 127.0.0.1 only; the
# binaries come from scripts/k8s-build.sh (built once, then reused).
#   k8s.sh start    idempotent; builds or reuses the binaries, makes the
#                   certificates, token and kubeconfigs with openssl, starts the
#                   five processes and waits until the API serves, both nodes are
#                   Ready and the test namespaces have their service accounts
#   k8s.sh stop     stops the processes and waits for them to exit
#   k8s.sh status   exit 0 when all five run and the API server is ready
#   k8s.sh clean    stop and delete the state directory
#   k8s.sh restart-apiserver  the API server alone: SIGTERM (SIGKILL after 5 s),
#                   then a new one over the same etcd (tests of the Job watch)
# Settings (environment):
#   ALTAR_K8S_PORT       the API server's port (16443); etcd takes 16379/16380,
#                        the controller manager 16257, the scheduler 16259,
#                        kwok 16247 (ALTAR_K8S_*_PORT to move each)
#   ALTAR_K8S_DIR        state: certificates, kubeconfigs, data, logs, pids
#                        (default ${TMPDIR:-/tmp}/altar-k8s-PORT)
#   ALTAR_K8S_START_TIMEOUT seconds (180); versions: see scripts/k8s-build.sh
# What tests read from ALTAR_K8S_DIR:
#   admin.kubeconfig     client certificate in system:masters (embedded -data)
#   cert.kubeconfig      the same user, certificate and key as file paths
#   token.kubeconfig     a static bearer token (token file user, system:masters)
#   token, ca.crt        that token and the cluster CA
#   sa/                  token, ca.crt, namespace of the service account
#                        altar-test/altar-worker (a Role for jobs and pods, a ClusterRole to read nodes)
#   env                  shell assignments: ALTAR_K8S_SERVER, ALTAR_K8S_DIR, …
set -euo pipefail

HERE="$(cd "$(dirname "$0")/../.." && pwd)"
PORT="${ALTAR_K8S_PORT:-16443}"
ETCD_PORT="${ALTAR_K8S_ETCD_PORT:-16379}"
ETCD_PEER_PORT="${ALTAR_K8S_ETCD_PEER_PORT:-16380}"
KCM_PORT="${ALTAR_K8S_KCM_PORT:-16257}"
SCHED_PORT="${ALTAR_K8S_SCHEDULER_PORT:-16259}"
KWOK_PORT="${ALTAR_K8S_KWOK_PORT:-16247}"
DIR="${ALTAR_K8S_DIR:-${TMPDIR:-/tmp}/altar-k8s-$PORT}"
TIMEOUT="${ALTAR_K8S_START_TIMEOUT:-180}"
SERVER="https://127.0.0.1:$PORT"
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler kwok"
NAMESPACES="altar-test altar-bench altar-demo"
NODES="altar-node-a altar-node-b"

NAME=k8s
. "$HERE/scripts/lib-service.sh"
for v in PORT ETCD_PORT ETCD_PEER_PORT KCM_PORT SCHED_PORT KWOK_PORT; do check_port "$v" "${!v}"; done

pidfile() { echo "$DIR/run/$1.pid"; }

# The pid of component $1 when it still runs (and is ours, not a recycled pid).
running_pid() { pid_of "$(pidfile "$1")" "$DIR"; }

api() { # method path [json-body]: the API as the admin, JSON out
  local args=(-sS --max-time 20 --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key"
              -H 'Accept: application/json' -X "$1")
  local type=application/json
  [ "$1" = PATCH ] && type=application/merge-patch+json
  [ $# -ge 3 ] && args+=(-H "Content-Type: $type" --data-binary "$3")
  curl "${args[@]}" "$SERVER$2"
}

api_ready() { [ "$(api GET /readyz 2>/dev/null)" = ok ]; }

# ---- certificates, token, kubeconfigs (made once per state directory) ----

make_pki() {
  local p="$DIR/pki"
  [ -f "$p/.complete" ] && return 0
  rm -rf "$p"; mkdir -p "$p"; chmod 700 "$p"
  command -v openssl >/dev/null || die "openssl not found (scripts/install-deps.sh test)"
  (
    cd "$p"
    exec 2>>"$DIR/openssl.log"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj /CN=altar-k8s-test-ca
    sign() { # name subject extfile-text
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext"
      rm -f "$1.csr"
    }
    sign apiserver /CN=kube-apiserver \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1
extendedKeyUsage=serverAuth"
    sign admin "/O=system:masters/CN=altar-admin" "extendedKeyUsage=clientAuth"
    sign controller-manager /CN=system:kube-controller-manager "extendedKeyUsage=clientAuth"
    sign scheduler /CN=system:kube-scheduler "extendedKeyUsage=clientAuth"
    sign kwok "/O=system:masters/CN=altar-kwok" "extendedKeyUsage=clientAuth"
    # The service-account signing key pair.
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
    # A static bearer token for the token-auth tests.
    printf '%s,altar-token-user,altar-token-user,"system:masters"\n' "$(openssl rand -hex 24)" >tokens.csv
  ) || die "openssl failed making the test PKI (see $DIR/openssl.log)"
  touch "$p/.complete"
}

# kubeconfig file user-name user-yaml [cluster-yaml-extra]
kubeconfig() {
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: altar-test
  cluster:
    server: $SERVER
$3
contexts:
- name: altar-test
  context: {cluster: altar-test, user: $2, namespace: altar-test}
current-context: altar-test
users:
- name: $2
  user:
$4
KC
}

make_kubeconfigs() {
  local p="$DIR/pki" caf="    certificate-authority: $DIR/pki/ca.crt"
  local cad="    certificate-authority-data: $(base64 -w0 "$p/ca.crt")"
  certuser() { printf '    client-certificate: %s\n    client-key: %s\n' "$p/$1.crt" "$p/$1.key"; }
  kubeconfig "$DIR/admin.kubeconfig" altar-admin "$cad" \
    "$(printf '    client-certificate-data: %s\n    client-key-data: %s' "$(base64 -w0 "$p/admin.crt")" "$(base64 -w0 "$p/admin.key")")"
  kubeconfig "$DIR/cert.kubeconfig" altar-admin "$caf" "$(certuser admin)"
  kubeconfig "$DIR/controller-manager.kubeconfig" kcm "$caf" "$(certuser controller-manager)"
  kubeconfig "$DIR/scheduler.kubeconfig" scheduler "$caf" "$(certuser scheduler)"
  kubeconfig "$DIR/kwok.kubeconfig" kwok "$caf" "$(certuser kwok)"
  cut -d, -f1 "$p/tokens.csv" >"$DIR/token"
  kubeconfig "$DIR/token.kubeconfig" altar-token-user "$caf" "    token: $(cat "$DIR/token")"
  cp "$p/ca.crt" "$DIR/ca.crt"
  chmod 600 "$DIR"/*.kubeconfig "$DIR/token"
}

# ---- kwok: the stages that stand in for a kubelet ----

write_kwok_config() {
  # One file per stage (kwok-stages/, applied in name order), joined into
  # the one multi-document file kwok reads.
  first=1
  for f in "$HERE/scripts/services/kwok-stages/"*.yaml; do
    [ "$first" = 1 ] || echo "---"
    cat "$f"
    first=0
  done >"$DIR/kwok.yaml"
}

write_scheduler_config() {
  cat >"$DIR/scheduler.yaml" <<SCHED
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $DIR/scheduler.kubeconfig
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
SCHED
}

# ---- the processes ----

launch_component() { # name binary args...
  local name="$1"; shift
  launch "$(pidfile "$name")" "$DIR/log/$name.log" "$DIR" "$@"
}

start_components() {
  local bin="$1"
  running_pid etcd >/dev/null || launch_component etcd "$bin/etcd" --name altar --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "altar=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
    --quota-backend-bytes 2147483648 --snapshot-count 20000 --log-level warn
  running_pid kube-apiserver >/dev/null || launch_component kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$PORT" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
    --client-ca-file "$DIR/pki/ca.crt" --token-auth-file "$DIR/pki/tokens.csv" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$DIR/pki/sa.pub" --service-account-signing-key-file "$DIR/pki/sa.key" \
    --api-audiences https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.96.0.0/16 \
    --max-requests-inflight 800 --max-mutating-requests-inflight 400 \
    --profiling=false --v 1
  running_pid kube-controller-manager >/dev/null || launch_component kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$DIR/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
    --controllers job-controller,serviceaccount-controller,serviceaccount-token-controller,garbage-collector-controller,ttl-after-finished-controller,pod-garbage-collector-controller,persistentvolume-binder-controller,root-ca-certificate-publisher-controller \
    --service-account-private-key-file "$DIR/pki/sa.key" --root-ca-file "$DIR/pki/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false \
    --kube-api-qps 300 --kube-api-burst 600 --concurrent-job-syncs 20 --concurrent-gc-syncs 20 \
    --profiling=false --v 1
  running_pid kube-scheduler >/dev/null || launch_component kube-scheduler "$bin/kube-scheduler" \
    --config "$DIR/scheduler.yaml" --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --profiling=false --v 1
  running_pid kwok >/dev/null || launch_component kwok "$bin/kwok" --kubeconfig "$DIR/kwok.kubeconfig" \
    --config "$DIR/kwok.yaml" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --server-address "127.0.0.1:$KWOK_PORT" --node-ip 10.0.0.1 --cidr 10.0.0.1/16
}

all_running() {
  local c
  for c in $COMPONENTS; do running_pid "$c" >/dev/null || return 1; done
}

# The first component that died, with its log's tail; exits.
check_alive() {
  local c
  for c in $COMPONENTS; do
    if ! running_pid "$c" >/dev/null; then
      say "$c exited during start; last lines of $DIR/log/$c.log:"
      tail -n 25 "$DIR/log/$c.log" >&2 || true
      stop
      exit 1
    fi
  done
}

# Objects the tests expect: namespaces, two kwok nodes, the service account.
node_json() { # name pool
  cat <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$1",
 "annotations":{"kwok.x-k8s.io/node":"fake"},
 "labels":{"kubernetes.io/hostname":"$1","kubernetes.io/os":"linux","type":"kwok","altar.test/pool":"$2"}},
 "status":{"allocatable":{"cpu":"64","memory":"256Gi","pods":"5000","nvidia.com/gpu":"$3"},
           "capacity":{"cpu":"64","memory":"256Gi","pods":"5000","nvidia.com/gpu":"$3"}}}
JSON
}

create() { # path json: POST, tolerating AlreadyExists
  local out
  out="$(api POST "$1" "$2")" || die "POST $1 failed: $out"
  case "$out" in
    *'"kind":"Status"'*) echo "$out" | grep -q AlreadyExists || die "POST $1: $out" ;;
  esac
}

seed_objects() {
  local ns
  for ns in $NAMESPACES; do
    create /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
  done
  create /api/v1/nodes "$(node_json altar-node-a normal 0)"
  create /api/v1/nodes "$(node_json altar-node-b gpu 4)"
  # Admission taints a new node not-ready; with no node-lifecycle controller
  # (kwok keeps no leases) nothing would lift it once kwok reports Ready.
  local n
  for n in $NODES; do
    api PATCH "/api/v1/nodes/$n" '{"spec":{"taints":null}}' >/dev/null ||
      die "could not clear the taints of node $n"
  done
  create /api/v1/namespaces/altar-test/serviceaccounts \
    '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"altar-worker"}}'
  create /apis/rbac.authorization.k8s.io/v1/namespaces/altar-test/roles \
    '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"altar-worker"},
      "rules":[{"apiGroups":["batch"],"resources":["jobs"],"verbs":["create","get","list","watch","delete"]},
               {"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]}]}'
  # Capacity reads the nodes' allocatable: cluster-wide, read-only.
  create /apis/rbac.authorization.k8s.io/v1/clusterroles \
    '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"altar-node-reader"},
      "rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch"]}]}'
  create /apis/rbac.authorization.k8s.io/v1/clusterrolebindings \
    '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"altar-worker-nodes"},
      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"altar-node-reader"},
      "subjects":[{"kind":"ServiceAccount","name":"altar-worker","namespace":"altar-test"}]}'
  create /apis/rbac.authorization.k8s.io/v1/namespaces/altar-test/rolebindings \
    '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"altar-worker"},
      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"altar-worker"},
      "subjects":[{"kind":"ServiceAccount","name":"altar-worker","namespace":"altar-test"}]}'
}

# The service account's token as a pod would see it (TokenRequest), in sa/.
write_sa_files() {
  local out tok
  out="$(api POST /api/v1/namespaces/altar-test/serviceaccounts/altar-worker/token \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}')"
  tok="$(echo "$out" | jq -r '.status.token // empty')"
  [ -n "$tok" ] || die "TokenRequest for altar-test/altar-worker failed: $out"
  mkdir -p "$DIR/sa"
  printf '%s' "$tok" >"$DIR/sa/token"
  cp "$DIR/pki/ca.crt" "$DIR/sa/ca.crt"
  printf 'altar-test' >"$DIR/sa/namespace"
  chmod 600 "$DIR/sa/token"
}

cluster_ready() {
  api_ready || return 1
  local n ns
  for n in $NODES; do
    api GET "/api/v1/nodes/$n" 2>/dev/null |
      jq -e '(.spec.taints // [] | length == 0) and any(.status.conditions[]?; .type=="Ready" and .status=="True")' \
        >/dev/null || return 1
  done
  for ns in $NAMESPACES; do
    api GET "/api/v1/namespaces/$ns/serviceaccounts/default" 2>/dev/null | jq -e '.metadata.uid' >/dev/null || return 1
  done
  (exec 3<>"/dev/tcp/127.0.0.1/$SCHED_PORT") 2>/dev/null || return 1
  (exec 3<>"/dev/tcp/127.0.0.1/$KCM_PORT") 2>/dev/null || return 1
}

write_env() {
  cat >"$DIR/env" <<ENV
ALTAR_K8S_DIR=$DIR
ALTAR_K8S_SERVER=$SERVER
ALTAR_K8S_KUBECONFIG=$DIR/admin.kubeconfig
ENV
}

start() {
  command -v curl >/dev/null && command -v jq >/dev/null || die "curl and jq are needed (scripts/install-deps.sh test)"
  mkdir -p "$DIR/run" "$DIR/log"
  chmod 700 "$DIR"
  if all_running && api_ready 2>/dev/null && cluster_ready; then
    write_env
    exit 0
  fi
  # A port is someone else's only when the component that should hold it is
  # not running (restart-apiserver leaves the others up).
  local pair c p
  for pair in "kube-apiserver:$PORT" "etcd:$ETCD_PORT" "etcd:$ETCD_PEER_PORT" "kube-controller-manager:$KCM_PORT" \
              "kube-scheduler:$SCHED_PORT" "kwok:$KWOK_PORT"; do
    c="${pair%%:*}"; p="${pair#*:}"
    running_pid "$c" >/dev/null && continue
    port_open "$p" && die "port $p on 127.0.0.1 is taken by another process; set ALTAR_K8S_PORT (and the other ALTAR_K8S_*_PORT)"
  done
  local bin
  bin="$("$HERE/scripts/k8s-build.sh")" || die "could not build the control plane (see above)"
  make_pki
  make_kubeconfigs
  write_kwok_config
  write_scheduler_config
  # A fresh cluster each start: tests create Jobs by spec name.
  running_pid etcd >/dev/null || rm -rf "$DIR/etcd"
  local t0=$SECONDS
  say "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on 127.0.0.1:$PORT (state: $DIR)"
  start_components "$bin"
  until api_ready 2>/dev/null; do
    check_alive
    [ $((SECONDS - t0)) -lt "$TIMEOUT" ] || { say "the API server is not ready after ${TIMEOUT}s"; tail -n 20 "$DIR/log/kube-apiserver.log" >&2; stop; exit 1; }
    sleep 0.5
  done
  seed_objects
  until cluster_ready; do
    check_alive
    [ $((SECONDS - t0)) -lt "$TIMEOUT" ] || { say "nodes or service accounts not ready after ${TIMEOUT}s"; stop; exit 1; }
    sleep 0.5
  done
  write_sa_files
  write_env
  say "ready after $((SECONDS - t0)) s ($SERVER; kubeconfig $DIR/admin.kubeconfig)"
}

stop() {
  local c pid
  # Reverse order: kwok and the controllers before the API server and etcd.
  for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    if pid="$(running_pid "$c")"; then stop_pid "$pid"; fi
    rm -f "$(pidfile "$c")"
  done
}

status() {
  all_running && api_ready 2>/dev/null
}

# Stops kube-apiserver (by its pid) and starts it again over the same etcd,
# for tests of clients that must ride out an API server restart.
# The API server stops listening at once on SIGTERM but, with the
# controllers' connections open, does not exit for 30 s or more: 5 s of
# grace, then SIGKILL, keeps a test's restart from idling that long.
restart_apiserver() {
  local pid
  if pid="$(running_pid kube-apiserver)"; then stop_pid "$pid" 5; fi
  rm -f "$(pidfile kube-apiserver)"
  start
}

case "${1:-}" in
  start) start ;;
  restart-apiserver) restart_apiserver ;;
  stop) [ -d "$DIR" ] && stop; exit 0 ;;
  status) status ;;
  clean) [ -d "$DIR" ] && stop; rm -rf "$DIR" ;;
  *) echo "usage: $0 start|stop|status|clean|restart-apiserver" >&2; exit 2 ;;
esac
