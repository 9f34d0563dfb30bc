/* kubernetes backend internals shared by backends/k8s_*.c. Not public. */
#ifndef ALTAR_K8S_INT_H
#define ALTAR_K8S_INT_H

#include "backends/k8s_api.h"

struct altar_k8s {
  altar_k8s_runtime_t *rt;
  char *ns;
  char *mount_root;
  char *pvc_name;
  char *pull_policy;
  char *verifier_image;
  char *staging_root;
  int64_t backoff_limit;
  altar_opt_i64_t run_as_user, run_as_group, fs_group;
  altar_k8s_pool_t *pools;
  size_t n_pools;
  bool trust_records;
  altar_k8s_extend_fn extend;
  void *extend_ctx;
  double settle_timeout_s;
  altar_k8s_clock_fn clock;
  altar_k8s_sleep_fn sleep;
  void *clock_ctx;
  /* Why a pending Job's pod has not started, as poll last saw it, by Job
   * name: the reason code and the platform's message. Remembered because
   * the pods are gone once the Job's deadline has failed it. */
  altar_strmap_t wait_reason, wait_detail;
  /* When capacity may next ask for the nodes after a failed list (0: now). */
  double nodes_retry_at;
  /* The watch (started on first use; none when the runtime cannot), and
   * the generation poll last answered from, for wait_change. */
  bool watch_on, watch_unavailable;
  altar_k8s_watch_t *watch;
  uint64_t polled_gen;
  int64_t pod_wait_interval_ms;
  double pod_waits_next; /* monotonic s */
  /* Creates in flight (submit_start) and their outcome by Job name until a
   * poll reports it: "" in flight, else "<rc> <message>" refused. */
  int submit_window;
  bool multi_unavailable;
  struct altar__k8s_inflight *inflight;
  size_t n_inflight, cap_inflight;
  uint64_t next_id;
  altar_strmap_t outcome;
  /* Pacing by the cluster's progress (k8s_pace.c): Jobs created and not
   * yet started; capacity leaves no free slot while there are submit_backlog. */
  int submit_backlog;
  struct altar__k8s_pace_ent *pace;
  size_t n_pace, cap_pace;
  int pace_start, pace_limit;   /* the bound: grows from pace_start, shrinks when Jobs queue */
  double pace_last;             /* monotonic s of the last create */
  double pace_floor, pace_wait; /* a Job's create → start: least seen, and its moving average (s) */
  uint64_t pace_holds;          /* capacity reports the backlog left without a slot */
};

/* The watch, started when the backend may and can have one (k8s_poll.c). */
altar_k8s_watch_t *altar__k8s_watch_get(altar_k8s_t *k);
/* Frees the creates in flight (k8s_submit.c). */
void altar__k8s_inflight_clear(altar_k8s_t *k);
/* The Jobs of altar.dev/pool label pool that take a slot: those the watch
 * w (NULL: none) reports active, and the creates in flight it does not
 * report yet (they take one before the server has answered), read in one
 * step of the watch. */
int64_t altar__k8s_active_in_pool(altar_k8s_t *k, altar_k8s_watch_t *w, const char *pool);

/* Pacing (k8s_pace.c): records a Job just created; the Jobs recorded that
 * the watch does not yet report started (dropping the others); how many
 * more creates the backlog leaves room for now (INT64_MAX: no bound, or
 * no watch to pace by), which capacity caps every pool with; frees the
 * record. Nothing here waits. */
void altar__k8s_pace_add(altar_k8s_t *k, const char *name);
/* Drops a Job from the backlog: one its create found existing (adopted or
 * replaced), whose start says nothing of how long the cluster takes. */
void altar__k8s_pace_forget(altar_k8s_t *k, const char *name);
size_t altar__k8s_pace_backlog(altar_k8s_t *k);
int64_t altar__k8s_pace_room(altar_k8s_t *k);
void altar__k8s_pace_clear(altar_k8s_t *k);

/* The configured pool called name, or NULL. */
const altar_k8s_pool_t *altar__k8s_pool(const altar_k8s_t *k, const char *name);
/* The pool name a spec's resources land in: gpu, or "normal" when CPU-only. */
const char *altar__k8s_pool_name(const altar_resources_t *r);
double altar__k8s_now(const altar_k8s_t *k);
/* How many tasks of pool p the schedulable nodes matching its selector can
 * take: their allocatable GPUs for a GPU pool, their allocatable pods for
 * the CPU pool (k8s_nodes.c). */
int64_t altar__k8s_pool_node_slots(const altar_k8s_pool_t *p, const altar_k8s_node_info_t *nodes, size_t n,
                                   size_t *pnodes);
void altar__k8s_sleep(const altar_k8s_t *k, double seconds);

/* Runs cfg's exec credential plugin when it has given nothing yet, when
 * what it gave expires within 30 s, or when force is set; stores the token
 * or client certificate in cfg (k8s_exec.c). No plugin: nothing to do. */
int altar__k8s_exec_refresh(altar_k8s_http_config_t *cfg, bool force, altar_error_t *err);
/* Frees the exec fields of cfg. */
void altar__k8s_exec_clear(altar_k8s_http_config_t *cfg);

/* Streams src to dst (k8s_staging.c). */
int altar__k8s_copy_file(const char *src, const char *dst, altar_error_t *err);

#endif
