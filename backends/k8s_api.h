/* The `kubernetes` execution backend's internals (the public side is
 * altar_backend_kubernetes_ops in altar/plugin/backend.h): each task a batch/v1 Job. Shared by
 * backends/k8s_*.c and their tests; not installed, not exported.
 *
 * Two layers. The KubernetesRuntime is the small part of the Kubernetes API
 * the backend uses (create, list, read and delete Jobs; explain a failure),
 * as a vtable of plain values — manifests are jansson objects, Jobs come
 * back as altar_k8s_job_info_t — so tests drive the backend with a fake and
 * the real runtime (libcurl + OpenSSL, runtime_http) stays behind it.
 * The backend names a Job by its spec (altar_spec_job_name), so a
 * resubmitted spec meets the Job of its first submission and adopts or
 * replaces it (see altar__k8s_submit). */
#ifndef ALTAR_BACKENDS_K8S_API_H
#define ALTAR_BACKENDS_K8S_API_H

#include "altar/plugin/backend.h"
#include "altar/error.h"
#include "altar/task.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Annotation holding "sha256:<hex>" of the canonical JSON of the manifest
 * without this annotation; submit adopts an active Job only when it matches. */
#define ALTAR_K8S_MANIFEST_DIGEST_ANNOTATION "altar.dev/manifest-digest"
/* Annotation holding the spec's labels exactly (a JSON object), since Job
 * labels must be made label-safe and may lose characters. */
#define ALTAR_K8S_LABELS_ANNOTATION "altar.dev/labels"
/* Annotations holding the task key and the plugin identity (JSON, when set). */
#define ALTAR_K8S_TASK_KEY_ANNOTATION "altar.dev/task-key"
#define ALTAR_K8S_PLUGIN_IDENTITY_ANNOTATION "altar.dev/plugin-identity"
/* Every Job the backend creates carries these labels; poll and capacity
 * list with ALTAR_K8S_MANAGED_SELECTOR. */
#define ALTAR_K8S_MANAGED_LABEL "altar.dev/managed"
#define ALTAR_K8S_MANAGED_SELECTOR "altar.dev/managed=true"
#define ALTAR_K8S_POOL_LABEL "altar.dev/pool"
#define ALTAR_K8S_KIND_LABEL "altar.dev/kind"

#define ALTAR_K8S_DEFAULT_NAMESPACE "default"
#define ALTAR_K8S_DEFAULT_MOUNT_ROOT "/mnt/volume"
#define ALTAR_K8S_DEFAULT_PULL_POLICY "IfNotPresent"
#define ALTAR_K8S_DEFAULT_VERIFIER_IMAGE "busybox:1.36"
#define ALTAR_K8S_DEFAULT_GPU_RESOURCE "nvidia.com/gpu"
/* Names inside the pod. */
#define ALTAR_K8S_TASK_CONTAINER "task"
#define ALTAR_K8S_VERIFY_CONTAINER "verify-inputs"
#define ALTAR_K8S_VOLUME_NAME "altar-volume"
/* Reasons of our own (the contract allows a backend's codes), both worth a
 * retry: a pod that never started because its image could not be pulled, or
 * because no node could take it. The detail carries the platform's words. */
#define ALTAR_K8S_REASON_IMAGE_PULL "image_pull"
#define ALTAR_K8S_REASON_UNSCHEDULABLE "unschedulable"
/* How long submit keeps trying to settle a name conflict (seconds). */
#define ALTAR_K8S_SETTLE_TIMEOUT_S 60.0

/* ---- K8sJobInfo ---- */

/* What the backend needs of one Job: its name, state normalized from its
 * conditions, labels, annotations, and the server-assigned uid (NULL when
 * the runtime does not report one). */
typedef struct altar_k8s_job_info {
  char *name;
  altar_state_t state;
  altar_strmap_t labels;
  altar_strmap_t annotations;
  char *uid;
} altar_k8s_job_info_t;

/* Heap info with a copy of name (uid may be NULL); free with _free. */
altar_k8s_job_info_t *altar__k8s_job_info_new(const char *name, altar_state_t state, const char *uid);
void altar__k8s_job_info_clear(altar_k8s_job_info_t *info);
void altar__k8s_job_info_free(altar_k8s_job_info_t *info);
/* Frees n infos stored in one array, and the array. */
void altar__k8s_job_infos_free(altar_k8s_job_info_t *infos, size_t n);
int altar__k8s_job_info_copy(altar_k8s_job_info_t *dst, const altar_k8s_job_info_t *src);

/* Why a pod of a Job has not started: the Job's name, one of the two reason
 * codes above, and the platform's message ("ImagePullBackOff: Back-off
 * pulling image …", the scheduler's "0/2 nodes are available: …"). */
typedef struct altar_k8s_pod_wait {
  char *job_name;
  const char *reason; /* ALTAR_K8S_REASON_IMAGE_PULL or _UNSCHEDULABLE (static) */
  char *detail;
} altar_k8s_pod_wait_t;

void altar__k8s_pod_waits_free(altar_k8s_pod_wait_t *waits, size_t n);

/* What capacity needs of one node: its labels, its allocatable resources as
 * the API serves them ("pods": "110", "nvidia.com/gpu": "4", "cpu": "3500m"),
 * and whether it takes new pods (condition Ready True and not cordoned). */
typedef struct altar_k8s_node_info {
  char *name;
  altar_strmap_t labels;
  altar_strmap_t allocatable;
  bool schedulable;
} altar_k8s_node_info_t;

void altar__k8s_node_infos_free(altar_k8s_node_info_t *nodes, size_t n);
/* Reads a Node object into info (zeroed first). 0, ALTAR_EDECODE naming the
 * missing field, or ALTAR_ENOMEM. */
int altar__k8s_node_info_from_json(const json_t *node, altar_k8s_node_info_t *info, altar_error_t *err);
/* A resource quantity ("4", "110", "3500m", "2k", "1Gi") as a whole count,
 * rounded down; false when q is not a quantity. */
bool altar__k8s_quantity_count(const char *q, int64_t *pcount);

/* ---- creates in flight and the Job watch (optional runtime parts) ---- */

/* One create that finished: the id it was started under, create_job's
 * return code and error, and the server-side name on success (malloc'd;
 * the receiver frees it), with its uid. */
typedef struct altar_k8s_create_done {
  uint64_t id;
  int rc;
  char *name;
  char uid[40]; /* the new Job's uid ("" when the answer had none) */
  altar_error_t err;
} altar_k8s_create_done_t;

/* What a watch knows of one Job name. */
typedef enum altar_k8s_seen {
  ALTAR_K8S_SEEN_UNKNOWN = 0, /* never listed nor watched */
  ALTAR_K8S_SEEN_LIVE = 1,
  ALTAR_K8S_SEEN_DELETED = 2, /* reported deleted, or absent from a relist */
} altar_k8s_seen_t;

typedef struct altar_k8s_watch_view {
  altar_k8s_seen_t seen;
  altar_state_t state;
  /* Wall-clock s at which the Job's activeDeadlineSeconds fails it,
   * counted from its status.startTime (else its creation); 0 when it has
   * no deadline or the watch has not seen one. */
  double deadline_at;
} altar_k8s_watch_view_t;

/* Counters a test or benchmark reads (altar__k8s_watch_stats). */
typedef struct altar__k8s_watch_stats {
  uint64_t lists;      /* full lists, the first included */
  uint64_t expired;    /* relists forced by 410 Gone / an expired version */
  uint64_t reconnects; /* watch requests after the first of a list */
  uint64_t events;     /* ADDED, MODIFIED and DELETED applied */
  uint64_t deleted;    /* DELETED events applied */
  uint64_t bookmarks;
  uint64_t bad_events;    /* lines that were not a well-formed event: skipped */
  uint64_t failure_lists; /* relists after watch requests kept failing without a 410 */
} altar_k8s_watch_stats_t;

/* A Job watch: one thread lists the namespace's Jobs matching the selector
 * once, then watches from that list's resourceVersion (bookmarks on),
 * resumes from the last version it saw after a dropped connection, and
 * lists again only when the server says the version has expired. It keeps
 * a map name → state that the calls below read; every call is thread-safe. */
typedef struct altar__k8s_watch altar_k8s_watch_t;

/* Stops the thread (within about a second) and frees everything. NULL is fine. */
void altar__k8s_watch_close(altar_k8s_watch_t *w);
/* Whether the first list has been read (before that the map knows nothing). */
bool altar__k8s_watch_synced(altar_k8s_watch_t *w);
/* What the map holds for each of n names, into pviews (n entries): one
 * hash lookup per name under one lock. */
void altar__k8s_watch_lookup(altar_k8s_watch_t *w, const char *const *names, size_t n, altar_k8s_watch_view_t *pviews);
/* Records a Job this process created or adopted (from the server's answer),
 * so a poll right after submit finds it before its watch event. An entry
 * the watch already holds for the same uid is left alone; events for other
 * uids are ignored until the watch reports this one (a lagging event of an
 * older Job of the same name must not stand for the new one). pool is the
 * Job's altar.dev/pool label (NULL: none), so it counts in its pool's
 * active Jobs at once. */
int altar__k8s_watch_note(altar_k8s_watch_t *w, const char *name, const char *uid, const char *pool,
                          altar_state_t state);
/* Blocks up to timeout_ms until the map changed after generation *pgen;
 * *pgen is updated. 1 changed, 0 timed out. */
int altar__k8s_watch_wait(altar_k8s_watch_t *w, uint64_t *pgen, int timeout_ms);
/* The change generation now. */
uint64_t altar__k8s_watch_generation(altar_k8s_watch_t *w);
/* Active (pending or running) Jobs whose altar.dev/pool label is pool_label:
 * a count kept as the map changes, not a scan. */
int64_t altar__k8s_watch_active(altar_k8s_watch_t *w, const char *pool_label);
/* The same count, and views of names[0..n) as lookup gives them, taken
 * together: a Job the watch adds between two separate reads would be in
 * neither (capacity then reported a slot too many). */
int64_t altar__k8s_watch_active_lookup(altar_k8s_watch_t *w, const char *pool_label, const char *const *names, size_t n,
                                       altar_k8s_watch_view_t *views);
/* Entries in the map: live Jobs, notes, and tombstones younger than their
 * TTL (a deleted Job's entry leaves after it). */
size_t altar__k8s_watch_size(altar_k8s_watch_t *w);
void altar__k8s_watch_stats(altar_k8s_watch_t *w, altar_k8s_watch_stats_t *pstats);
/* Tests: resume the next watch from version rv (e.g. one long compacted)
 * and drop the current connection now. */
void altar__k8s_watch_test_resume_from(altar_k8s_watch_t *w, const char *rv);

/* Tests and fuzzing: a watch with no thread and no server, synced, and
 * the stream's bytes fed to it as the server would send them; -1 when the
 * stream would be cut (an oversized line, an ERROR event). */
altar_k8s_watch_t *altar__k8s_watch_test_new(void);
/* Tests: how long a deleted Job's entry stays (seconds), pruning now. */
void altar__k8s_watch_test_tombstone_ttl(altar_k8s_watch_t *w, double seconds);
int altar__k8s_watch_test_feed(altar_k8s_watch_t *w, const char *p, size_t n, bool *pexpired);

/* A Job's state read from its status the way altar__k8s_job_info_from_json
 * reads it. */
altar_state_t altar__k8s_job_state_from_json(const json_t *job);
/* RFC 3339 "2026-12-03T14:00:00Z" (fraction and offset allowed) → Unix s;
 * -1 when s is not one. */
int altar__k8s_parse_time(const char *s, double *pt);
/* When the Job's spec.activeDeadlineSeconds fails it (Unix s), counted from
 * status.startTime as the Job controller counts, or from its creation
 * before the controller has set that; 0 when it has no deadline. */
double altar__k8s_job_deadline_from_json(const json_t *job);

/* ---- KubernetesRuntime ---- */

/* The vtable. `impl` is the runtime's own state. Required: create_job,
 * list_jobs, delete_job. Optional (NULL takes the default in k8s_runtime.c):
 * read_job (finds the Job in list_jobs), describe_failure (wraps diagnose
 * into reason "job_failed"), diagnose (deterministic, no message),
 * default_namespace (none), destroy (nothing to free). Every call returns 0
 * or a negative ALTAR_E… code with err filled; out-parameters are owned by
 * the caller. Calls may come from any one thread at a time. */
typedef struct altar_k8s_runtime_ops {
  const char *name;
  /* Creates the Job `manifest` describes in ns and returns its server-side
   * name in *pname and its uid in *puid (both malloc'd; *puid stays NULL
   * when the answer has none). The Job keeps metadata.annotations.
   * ALTAR_EJOBEXISTS when a Job of that name already exists. */
  int (*create_job)(void *impl, const json_t *manifest, const char *ns, char **pname, char **puid, altar_error_t *err);
  /* Every Job in ns matching label_selector (NULL = all), without blocking.
   * *pjobs is an array of *pn infos (NULL when none); free with
   * altar__k8s_job_infos_free. */
  int (*list_jobs)(void *impl, const char *ns, const char *label_selector, altar_k8s_job_info_t **pjobs, size_t *pn,
                   altar_error_t *err);
  /* The Job `name`, or *pjob = NULL when it does not exist or is being
   * deleted (it can be neither adopted nor replaced yet). */
  int (*read_job)(void *impl, const char *name, const char *ns, altar_k8s_job_info_t **pjob, altar_error_t *err);
  /* Deletes the Job and its pods (background propagation). A missing Job is
   * not an error. With uid, deletes only while the name still belongs to
   * that object: a newer Job of the same name is left alone (not an error). */
  int (*delete_job)(void *impl, const char *name, const char *ns, const char *uid, altar_error_t *err);
  /* Why the failed Job failed, with the stable reason codes (task.h). */
  int (*describe_failure)(void *impl, const char *name, const char *ns, altar_failure_t **pf, altar_error_t *err);
  /* Coarse classification: *pdeterministic, and *pmessage (malloc'd or NULL). */
  int (*diagnose)(void *impl, const char *name, const char *ns, bool *pdeterministic, char **pmessage,
                  altar_error_t *err);
  /* Optional (NULL: never reported). Pending pods in ns matching
   * label_selector that wait for an image or for a node; poll calls it only
   * while some Job is pending, and remembers the answer, because the Job
   * controller deletes those pods when the Job's deadline fails it. *pwaits
   * (caller frees with altar__k8s_pod_waits_free) may be NULL with *pn 0. */
  int (*list_pod_waits)(void *impl, const char *ns, const char *label_selector, altar_k8s_pod_wait_t **pwaits,
                        size_t *pn, altar_error_t *err);
  /* Optional (NULL: capacity uses the configured ceilings alone). Every
   * node of the cluster; *pnodes (free with altar__k8s_node_infos_free) may
   * be NULL with *pn 0. Needs list permission on nodes (a ClusterRole). */
  int (*list_nodes)(void *impl, altar_k8s_node_info_t **pnodes, size_t *pn, altar_error_t *err);
  /* Optional pair (NULL: creates go through create_job, one at a time).
   * create_start queues the create of manifest under id and returns once
   * the request is on its way; create_reap drives the creates in flight
   * for up to timeout_ms and moves up to max finished ones into pdone,
   * returning how many (each with create_job's code: ALTAR_EJOBEXISTS on a
   * name conflict). 429/5xx are retried inside with backoff. */
  int (*create_start)(void *impl, const json_t *manifest, const char *ns, uint64_t id, altar_error_t *err);
  int (*create_reap)(void *impl, int timeout_ms, altar_k8s_create_done_t *pdone, size_t max);
  /* Optional (NULL: poll lists). Starts a Job watch on ns and selector. */
  int (*watch_open)(void *impl, const char *ns, const char *selector, altar_k8s_watch_t **pw, altar_error_t *err);
  /* The namespace the runtime's credentials point at (kubeconfig context or
   * the service account's), or NULL. Owned by the runtime. */
  const char *(*default_namespace)(void *impl);
  void (*destroy)(void *impl);
} altar_k8s_runtime_ops_t;

typedef struct altar__k8s_runtime {
  const altar_k8s_runtime_ops_t *ops;
  void *impl;
} altar_k8s_runtime_t;

/* A heap runtime around ops/impl; NULL on allocation failure. Free with
 * altar__k8s_runtime_free, which calls ops->destroy(impl). */
altar_k8s_runtime_t *altar__k8s_runtime_new(const altar_k8s_runtime_ops_t *ops, void *impl);
void altar__k8s_runtime_free(altar_k8s_runtime_t *rt);

/* Callers go through these; they apply the defaults named above. */
/* puid may be NULL (the uid is not wanted). */
int altar__k8s_runtime_create_job(altar_k8s_runtime_t *rt, const json_t *manifest, const char *ns, char **pname,
                                  char **puid, altar_error_t *err);
int altar__k8s_runtime_list_jobs(altar_k8s_runtime_t *rt, const char *ns, const char *label_selector,
                                 altar_k8s_job_info_t **pjobs, size_t *pn, altar_error_t *err);
int altar__k8s_runtime_read_job(altar_k8s_runtime_t *rt, const char *name, const char *ns, altar_k8s_job_info_t **pjob,
                                altar_error_t *err);
int altar__k8s_runtime_delete_job(altar_k8s_runtime_t *rt, const char *name, const char *ns, const char *uid,
                                  altar_error_t *err);
int altar__k8s_runtime_describe_failure(altar_k8s_runtime_t *rt, const char *name, const char *ns, altar_failure_t **pf,
                                        altar_error_t *err);
int altar__k8s_runtime_diagnose(altar_k8s_runtime_t *rt, const char *name, const char *ns, bool *pdeterministic,
                                char **pmessage, altar_error_t *err);
const char *altar__k8s_runtime_default_namespace(altar_k8s_runtime_t *rt);
/* list_pod_waits, or none when the runtime does not report them. */
int altar__k8s_runtime_list_pod_waits(altar_k8s_runtime_t *rt, const char *ns, const char *label_selector,
                                      altar_k8s_pod_wait_t **pwaits, size_t *pn, altar_error_t *err);
/* create_start / create_reap / watch_open: ALTAR_ENOTSUP (reap: 0) when the
 * runtime lacks them. */
int altar__k8s_runtime_create_start(altar_k8s_runtime_t *rt, const json_t *manifest, const char *ns, uint64_t id,
                                    altar_error_t *err);
int altar__k8s_runtime_create_reap(altar_k8s_runtime_t *rt, int timeout_ms, altar_k8s_create_done_t *pdone, size_t max);
int altar__k8s_runtime_watch_open(altar_k8s_runtime_t *rt, const char *ns, const char *selector, altar_k8s_watch_t **pw,
                                  altar_error_t *err);
/* list_nodes, or ALTAR_ENOTSUP when the runtime cannot list nodes. */
int altar__k8s_runtime_list_nodes(altar_k8s_runtime_t *rt, altar_k8s_node_info_t **pnodes, size_t *pn,
                                  altar_error_t *err);

/* Normalizes a Job object (metadata + status, as the API serves it) into
 * info: Complete/SuccessCriteriaMet → succeeded, Failed/FailureTarget →
 * failed, active pods of which some are ready (or no "ready" count) →
 * running, else pending. Used by the real runtime and
 * by tests. 0, or ALTAR_EDECODE naming the missing field. */
int altar__k8s_job_info_from_json(const json_t *job, altar_k8s_job_info_t *info, altar_error_t *err);

/* Why one pod has not started, if it waits for an image (waiting reasons
 * ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull,
 * RegistryUnavailable, ImageInspectError on any container) or for a node
 * (condition PodScheduled False, reason Unschedulable): the reason code
 * (static) and the platform's message in detail; NULL when it does not. */
const char *altar__k8s_pod_waiting(const json_t *pod, char *detail, size_t detail_size);

/* Explains a failed Job from its object and its pods (a PodList's items):
 * a pod still waiting for its image or a node → "image_pull" or
 * "unschedulable" (the platform's message, and the Job's own condition, as
 * detail); condition DeadlineExceeded → "timeout"; the verify-inputs init container
 * exiting non-zero → "input_digest_mismatch"; a container OOMKilled →
 * "oom_killed"; eviction or preemption → "job_failed" (transient); the task
 * container's exit code n → "exit_<n>"; else "job_failed". NULL on
 * allocation failure; caller frees with altar_failure_free. */
altar_failure_t *altar__k8s_explain_failure(const json_t *job, const json_t *pods);

/* ---- the real runtime: the Kubernetes API over HTTPS (libcurl) ---- */

/* Where the API server is and how to authenticate. PEM blobs are the bytes
 * themselves (kubeconfig *-data fields decoded), not paths. */
typedef struct altar_k8s_http_config {
  char *server;     /* "https://host:port", no trailing slash */
  char *token;      /* bearer token, or NULL */
  char *token_file; /* re-read before each request when set (rotating tokens) */
  char *ca_pem;     /* trusted CA bundle, or NULL for the system store */
  size_t ca_pem_len;
  char *client_cert_pem; /* client certificate, or NULL */
  size_t client_cert_len;
  char *client_key_pem; /* its private key */
  size_t client_key_len;
  bool insecure_skip_tls_verify;
  /* An exec credential plugin (kubeconfig user.exec): the program and its
   * arguments, and extra environment as "NAME=value", each NULL-terminated
   * (NULL when unused). The runtime runs it for a bearer token or a client
   * certificate, and again once what it returned has expired. */
  char **exec_argv;
  char **exec_env;
  char *exec_api_version;  /* client.authentication.k8s.io/v1 or v1beta1 */
  double exec_expiry;      /* Unix seconds the plugin's credential ends; 0: never */
  char *namespace_;        /* default namespace from the context or service account */
  long timeout_ms;         /* whole request; default 30000 */
  long connect_timeout_ms; /* default 10000 */
  int max_retries;         /* retries after a 429, a 5xx or a failed GET; default 5 */
  long backoff_initial_ms; /* first delay, doubled each retry; default 200 */
  long backoff_max_ms;     /* cap on one delay (also on Retry-After); default 5000 */
  int list_limit;          /* objects per page of a list (limit=…); default 500 */
} altar_k8s_http_config_t;

/* Zeroes cfg and sets the numeric defaults. */
void altar__k8s_http_config_init(altar_k8s_http_config_t *cfg);
/* Frees the strings (and wipes the token and key bytes). */
void altar__k8s_http_config_clear(altar_k8s_http_config_t *cfg);

/* Reads a kubeconfig: `path` (NULL: $KUBECONFIG's first entry, else
 * ~/.kube/config), the named context (NULL: current-context), its cluster
 * (server, certificate-authority[-data], insecure-skip-tls-verify) and user
 * (token, tokenFile, client-certificate[-data], client-key[-data], or an
 * exec credential plugin, which is run once here to check it works).
 * auth-provider users and basic auth are refused with ALTAR_ENOTSUP.
 * Relative file paths, and an exec command with a "/" in it, are taken
 * relative to the kubeconfig's directory. ALTAR_ECONFIG
 * naming the field on anything malformed. cfg must be initialised. */
int altar__k8s_kubeconfig_load(const char *path, const char *context, altar_k8s_http_config_t *cfg, altar_error_t *err);

/* In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with
 * the service account's token, ca.crt and namespace under sa_dir (NULL:
 * /var/run/secrets/kubernetes.io/serviceaccount). ALTAR_ECONFIG when not
 * running in a cluster. */
int altar__k8s_in_cluster_load(const char *sa_dir, altar_k8s_http_config_t *cfg, altar_error_t *err);

/* In-cluster when KUBERNETES_SERVICE_HOST is set, else the kubeconfig. */
int altar__k8s_http_config_auto(altar_k8s_http_config_t *cfg, altar_error_t *err);

/* The real runtime. Takes ownership of cfg's contents (cfg is left
 * initialised and empty). NULL with err set on failure. Free with
 * altar__k8s_runtime_free. Tokens never appear in errors or logs. */
altar_k8s_runtime_t *altar__k8s_http_runtime_new(altar_k8s_http_config_t *cfg, altar_error_t *err);

/* ---- the backend ---- */

/* One pool: node selector and slot ceiling. */
typedef struct altar_k8s_pool {
  char *name;                   /* "normal" (CPU-only), "gpu", "a100", … */
  altar_strmap_t node_selector; /* may be empty */
  int64_t max_slots;            /* < 0: not reported in capacity */
  char *gpu_resource;           /* extended resource name; NULL = nvidia.com/gpu */
} altar_k8s_pool_t;

/* Called after the base manifest is built (the contract's build_manifest
 * override): add tolerations, sidecars, volumes… to `manifest` in place.
 * 0 or a negative ALTAR_E… code. */
typedef int (*altar_k8s_extend_fn)(void *ctx, const altar_spec_t *spec, json_t *manifest, altar_error_t *err);
typedef double (*altar_k8s_clock_fn)(void *ctx); /* monotonic seconds */
typedef void (*altar_k8s_sleep_fn)(void *ctx, double seconds);

/* Backend parameters. Strings are borrowed for the call to altar__k8s_new,
 * which copies what it keeps. */
typedef struct altar_k8s_config {
  const char *namespace_;        /* NULL: the runtime's namespace, else "default" */
  const char *mount_root;        /* NULL: /mnt/volume */
  const char *pvc_name;          /* PVC mounted at mount_root; NULL: an emptyDir */
  const char *image_pull_policy; /* NULL: IfNotPresent */
  int64_t backoff_limit;         /* Job backoffLimit; 0 */
  altar_opt_i64_t run_as_user, run_as_group, fs_group;
  const altar_k8s_pool_t *pools; /* node selectors and max slots per pool */
  size_t n_pools;
  const char *digest_verifier_image; /* NULL: ALTAR_K8S_DEFAULT_VERIFIER_IMAGE */
  /* Where this host sees the shared volume (e.g. the PVC's NFS export
   * mounted on the worker), or NULL. When set, stage_inputs copies each
   * input through Storage to <staging_root>/<logical> (and records a
   * verification when the bytes match, so pods accept them without
   * re-hashing), and collect_outputs copies outputs back. When NULL both
   * do nothing: inputs must already be on the volume. */
  const char *staging_root;
  bool trust_verification_records;     /* altar__k8s_config_init sets true */
  altar_k8s_extend_fn extend_manifest; /* optional */
  void *extend_ctx;
  /* Conflict settling in submit; tests inject a fake clock and sleep. */
  double settle_timeout_s;  /* altar__k8s_config_init: 60 */
  altar_k8s_clock_fn clock; /* NULL: CLOCK_MONOTONIC */
  altar_k8s_sleep_fn sleep; /* NULL: nanosleep */
  void *clock_ctx;
  /* Creates in flight on one connection when the runtime can (submit_start;
   * altar__k8s_config_init: ALTAR_K8S_DEFAULT_SUBMIT_WINDOW; 1..ALTAR_K8S_MAX_SUBMIT_WINDOW). */
  int submit_window;
  /* Capacity reports no free slot while this many Jobs it created in the
   * last 30 s have not started (a ready pod, or ended) as the watch sees
   * them, but one once the last create is 200 ms old (0: no bound; init:
   * ALTAR_K8S_DEFAULT_SUBMIT_BACKLOG; 0..ALTAR_K8S_MAX_SUBMIT_BACKLOG).
   * The ceiling of a slow start: see ALTAR_K8S_DEFAULT_PACE_START. */
  int submit_backlog;
  /* Observe Jobs with a watch when the runtime can (init: true). */
  bool watch;
  /* While a polled Job is pending, how often poll lists the pending pods
   * for a wait reason (ms; init: ALTAR_K8S_DEFAULT_POD_WAIT_INTERVAL_MS). */
  int64_t pod_wait_interval_ms;
} altar_k8s_config_t;

/* The creates in flight by default: measured on the control plane of
 * scripts/services/k8s.sh (README, "Performance"). */
#define ALTAR_K8S_DEFAULT_SUBMIT_WINDOW 16
#define ALTAR_K8S_MAX_SUBMIT_WINDOW 256
/* Jobs created and not yet started: the creates then run at the rate the
 * cluster starts Jobs only if this covers that rate times a Job's time to
 * start on an idle cluster (Little's law), about 40-60 Jobs on the control
 * plane of scripts/services/k8s.sh; twice that, with room for a faster
 * cluster, costs only a longer wait in the cluster, far from the 30 s a
 * Job counts (docs/kubernetes-modal.md). */
#define ALTAR_K8S_DEFAULT_SUBMIT_BACKLOG 128
#define ALTAR_K8S_MAX_SUBMIT_BACKLOG 4096
/* The backlog's slow start: the bound starts here (or at submit_backlog
 * if lower) and grows by one per start the watch reports, up to
 * submit_backlog, so a fresh cluster's watchers never meet a whole
 * backlog of creates in its first second (k8s_pace.c). */
#define ALTAR_K8S_DEFAULT_PACE_START 16
#define ALTAR_K8S_DEFAULT_POD_WAIT_INTERVAL_MS 2000

/* Defaults as documented on each field. */
void altar__k8s_config_init(altar_k8s_config_t *cfg);

typedef struct altar_k8s altar_k8s_t;

/* A backend over `rt`, which it takes ownership of (also on failure).
 * NULL with err set (ALTAR_EINVAL naming the parameter) on bad parameters.
 * Free with altar__k8s_free. One thread at a time. */
altar_k8s_t *altar__k8s_new(const altar_k8s_config_t *cfg, altar_k8s_runtime_t *rt, altar_error_t *err);
void altar__k8s_free(altar_k8s_t *k);

const char *altar__k8s_namespace(const altar_k8s_t *k);
const char *altar__k8s_mount_root(const altar_k8s_t *k);
altar_k8s_runtime_t *altar__k8s_runtime(altar_k8s_t *k);

/* Makes a string a valid label value (≤ 63 chars of [A-Za-z0-9-_.], starting
 * and ending alphanumeric, or empty). A value that had to change gets a short
 * hash of the original appended so distinct originals stay distinct.
 * Returns malloc'd text (caller frees) or NULL on allocation failure. */
char *altar__k8s_label_safe(const char *s);
/* A label key: one Kubernetes accepts (an optional DNS-subdomain prefix and
 * "/", then a name part as above) is returned unchanged; any other becomes a
 * valid name part (never empty) with the hash appended. */
char *altar__k8s_label_key_safe(const char *s);
/* Whether Kubernetes accepts s as a label key / a label value as it is. */
bool altar__k8s_label_key_ok(const char *s);
bool altar__k8s_label_value_ok(const char *s);

/* The base batch/v1 Job for spec (image, argv, resources, label-safe labels
 * with the originals in annotations, deadline, volume, node selector,
 * avoid_hosts anti-affinity, security context), then extend_manifest.
 * No init container and no digest yet (submit adds them). *pmanifest is a
 * new reference the caller json_decref's. */
int altar__k8s_build_manifest(altar_k8s_t *k, const altar_spec_t *spec, json_t **pmanifest, altar_error_t *err);
/* Adds the verify-inputs init container for spec's digest-bearing inputs
 * (none → no container), mounting every volume the pod's containers mount. */
int altar__k8s_add_verify_container(altar_k8s_t *k, const altar_spec_t *spec, json_t *manifest, altar_error_t *err);
/* "sha256:<hex>" of the canonical JSON (sorted keys, compact) of manifest
 * with the digest annotation left out. */
int altar__k8s_manifest_digest(const json_t *manifest, char out[72], altar_error_t *err);
/* Stamps the digest annotation; must be the last change to the manifest. */
int altar__k8s_stamp_digest(json_t *manifest, altar_error_t *err);
/* build_manifest + verify container + digest: exactly what submit creates.
 * The digest is that of the spec rendered without avoid_hosts (placement,
 * not identity), so a retry's Job matches its task's active one. */
int altar__k8s_render(altar_k8s_t *k, const altar_spec_t *spec, json_t **pmanifest, altar_error_t *err);

/* Creates spec's Job, or adopts/replaces one of the same name: an active Job
 * with the same manifest digest is adopted; an active one with another digest
 * is ALTAR_EJOBEXISTS; a finished one is deleted (uid precondition) and
 * created again; a conflict that does not settle within settle_timeout_s is
 * ALTAR_EJOBEXISTS. Fills *ph (caller clears) with the Job name as
 * external_id and the spec's labels. */
int altar__k8s_submit(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err);
/* Pipelined submit: renders and checks spec, waits while submit_window
 * creates are in flight (never for the backlog: capacity paces the
 * caller), queues the create and returns with *ph filled
 * (the Job name is the spec's). What the server answers arrives through
 * poll: a refused create is FAILED with the reason altar_reason_for_start_error
 * gives for submit's error, after the same adopt / refuse / replace rules
 * as altar__k8s_submit. Without a runtime that can keep creates in flight
 * this is altar__k8s_submit. */
int altar__k8s_submit_start(altar_k8s_t *k, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err);
/* Drives creates in flight for up to timeout_ms; 1 when one finished. */
int altar__k8s_submit_drive(altar_k8s_t *k, int timeout_ms);
/* How many creates are in flight. */
size_t altar__k8s_submits_in_flight(const altar_k8s_t *k);
/* Jobs created and not yet started (submit_backlog bounds them), and how
 * many capacity reports they left without a free slot. */
size_t altar__k8s_submit_backlog(altar_k8s_t *k);
uint64_t altar__k8s_pace_holds(const altar_k8s_t *k);
/* The backlog's bound now (it grows from the start value by one per
 * observed start up to submit_backlog while the cluster keeps up, and
 * shrinks when Jobs queue in it: k8s_pace.c; 0 with no bound), and the
 * start value (init ALTAR_K8S_DEFAULT_PACE_START; 1..ALTAR_K8S_MAX_SUBMIT_BACKLOG,
 * which the benchmark varies; submit_backlog or more: no slow start). */
int altar__k8s_pace_limit(const altar_k8s_t *k);
void altar__k8s_pace_set_start(altar_k8s_t *k, int start);
/* The backend's watch, or NULL (none, or not started yet). */
altar_k8s_watch_t *altar__k8s_watch(altar_k8s_t *k);
/* Blocks up to timeout_ms for news a poll would find: 1 yes, 0 timed out. */
int altar__k8s_wait_change(altar_k8s_t *k, int timeout_ms);
/* With a watch: the watch's map for each handle (a Job absent from it gets
 * one GET, and is container_missing when the server has no such Job).
 * Without one: one list call for all handles; a Job absent from it is container_missing.
 * pst: n zeroed statuses the caller allocated and clears; on an error none
 * is left filled. */
int altar__k8s_poll(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err);
/* Free slots per pool: the pool's bound less its active Jobs. A pool's
 * bound is the smaller of its max_slots and what its nodes can take — the
 * sum, over the schedulable nodes matching its node selector, of the
 * allocatable GPUs (gpu_resource) for a GPU pool or of the allocatable pods
 * for the CPU pool. A pool with neither bound is reported unbounded
 * (INT64_MAX) once any pool is bounded; empty when none is. Node
 * allocatable is read only for pools with a node selector or a GPU
 * resource, and only when the runtime can list nodes; a failed list leaves
 * the ceilings alone and is retried after a minute. */
int altar__k8s_capacity(altar_k8s_t *k, altar_capacity_t *cap, altar_error_t *err);
/* Deletes the Job (background propagation); a missing Job is fine. */
int altar__k8s_cancel(altar_k8s_t *k, const altar_handle_t *h, altar_error_t *err);
/* Staging through staging_root (see altar_k8s_config_t); no-ops without it. */
int altar__k8s_stage_inputs(altar_k8s_t *k, const altar_transfer_t *inputs, size_t n, altar_error_t *err);
int altar__k8s_collect_outputs(altar_k8s_t *k, const altar_transfer_t *outputs, size_t n, altar_error_t *err);

/* ---- as an ExecutionBackend ---- */

/* "kubernetes": input_digest_verification "task" (the verify-inputs init
 * container). create() reads these keys (all optional; strings):
 *   namespace, mount_root, pvc_name, image_pull_policy, backoff_limit,
 *   run_as_user, run_as_group, fs_group, digest_verifier_image,
 *   trust_verification_records (true|false), staging_root,
 *   pool_node_selectors  JSON {"pool": {"label": "value"}, …}
 *   max_slots            JSON {"pool": n, …}
 *   gpu_resources        JSON {"pool": "vendor.com/gpu", …}
 *   settle_timeout_s, kubeconfig (path), context, in_cluster (auto|true|false),
 *   request_timeout_ms, max_retries,
 *   submit_window (creates in flight, 1..256),
 *   submit_backlog (Jobs created, not yet started, 0..4096; 0 none), watch (true|false),
 *   pod_wait_interval_ms
 * data_root and slots are accepted and ignored (the volume is the cluster's;
 * max_slots bounds pools). Unknown keys are an error naming the key. */
/* An ExecutionBackend around k (e.g. one built over a fake runtime); takes
 * ownership of k, also when it returns NULL. Free with altar_backend_close. */
altar_backend_t *altar__k8s_backend_wrap(altar_k8s_t *k);

#endif
