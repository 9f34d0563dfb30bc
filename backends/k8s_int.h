/* kubernetes backend internals shared by backends/k8s_*.c. Not public. */
#ifndef ALTAR_K8S_INT_H
#define ALTAR_K8S_INT_H

#include "altar/kubernetes.h"

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
};

/* The configured pool called name, or NULL. */
const altar_k8s_pool_t *altar__k8s_pool(const altar_k8s_t *k, const char *name);
/* The pool name a spec's resources land in: gpu, or "normal" when CPU-only. */
const char *altar__k8s_pool_name(const altar_resources_t *r);
double altar__k8s_now(const altar_k8s_t *k);
void altar__k8s_sleep(const altar_k8s_t *k, double seconds);

/* Streams src to dst (k8s_staging.c). */
int altar__k8s_copy_file(const char *src, const char *dst, altar_error_t *err);

#endif
