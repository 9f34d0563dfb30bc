/* poll, capacity and cancel: all built on one list call per namespace. */
#include "k8s_int.h"

#include "altar/plugin/backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const altar_k8s_job_info_t *find_job(const altar_k8s_job_info_t *jobs, size_t n, const char *name) {
  for (size_t i = 0; name && i < n; i++)
    if (jobs[i].name && !strcmp(jobs[i].name, name)) return &jobs[i];
  return NULL;
}

/* Refreshes what poll remembers of pending Jobs' waiting pods: one pod list
 * while any polled Job is pending. A failed list only loses the detail. */
static void note_waits(altar_k8s_t *k, const altar_handle_t *hs, size_t n, const altar_k8s_job_info_t *jobs,
                       size_t njobs) {
  bool any_pending = false;
  for (size_t i = 0; i < n && !any_pending; i++) {
    const altar_k8s_job_info_t *job = find_job(jobs, njobs, hs[i].external_id);
    any_pending = job && job->state == ALTAR_STATE_PENDING;
  }
  if (!any_pending) return;
  altar_k8s_pod_wait_t *waits = NULL;
  size_t nw = 0;
  altar_error_t werr = {0};
  if (altar_k8s_runtime_list_pod_waits(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &waits, &nw, &werr)) return;
  for (size_t i = 0; i < nw; i++) {
    if (!waits[i].job_name || !waits[i].reason) continue;
    altar_strmap_set(&k->wait_reason, waits[i].job_name, waits[i].reason);
    altar_strmap_set(&k->wait_detail, waits[i].job_name, waits[i].detail ? waits[i].detail : "");
  }
  altar_k8s_pod_waits_free(waits, nw);
}

static void forget_wait(altar_k8s_t *k, const char *name) {
  altar_strmap_remove(&k->wait_reason, name);
  altar_strmap_remove(&k->wait_detail, name);
}

/* The failure of a Job whose pods are gone: a remembered wait beats the
 * deadline or the bare "job_failed" it ended with. f is consumed. */
static altar_failure_t *with_remembered_wait(altar_k8s_t *k, const char *name, altar_failure_t *f) {
  const char *code = altar_strmap_get(&k->wait_reason, name);
  if (!code || !f || (strcmp(f->reason, ALTAR_REASON_TIMEOUT) && strcmp(f->reason, ALTAR_REASON_JOB_FAILED)))
    return f;
  char detail[1024];
  snprintf(detail, sizeof detail, "%s (job: %s)", altar_strmap_get(&k->wait_detail, name),
           f->detail ? f->detail : f->reason);
  altar_failure_t *w = altar_failure_for_reason(code, detail);
  if (!w) return f;
  altar_failure_free(f);
  return w;
}

int altar_k8s_poll(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *st,
                   altar_error_t *err) {
  if (!n) return ALTAR_OK;
  altar_k8s_job_info_t *jobs = NULL;
  size_t njobs = 0;
  int rc = altar_k8s_runtime_list_jobs(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &jobs, &njobs, err);
  if (rc) return rc;
  note_waits(k, hs, n, jobs, njobs);
  size_t done = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const altar_k8s_job_info_t *job = find_job(jobs, njobs, hs[i].external_id);
    altar_failure_t *f = NULL;
    altar_state_t state;
    if (!job) {
      /* A created Job is listed at once, so an absent one was deleted and
       * can never finish. */
      state = ALTAR_STATE_FAILED;
      forget_wait(k, hs[i].external_id);
      f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, "the job is no longer in the namespace");
    } else if (job->state == ALTAR_STATE_FAILED) {
      state = ALTAR_STATE_FAILED;
      altar_error_t derr = {0};
      if (altar_k8s_runtime_describe_failure(k->rt, job->name, k->ns, &f, &derr) || !f) {
        /* The Job did fail; not knowing why is no reason to fail the probe. */
        altar_failure_free(f);
        f = altar_failure_for_reason(ALTAR_REASON_JOB_FAILED, derr.msg[0] ? derr.msg : NULL);
      }
      f = with_remembered_wait(k, job->name, f);
      forget_wait(k, job->name);
    } else {
      state = job->state;
      if (state != ALTAR_STATE_PENDING) forget_wait(k, job->name);
    }
    /* altar_status_init takes f, also when it fails. */
    if ((state == ALTAR_STATE_FAILED && !f) || altar_status_init(&st[i], &hs[i], state, f)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "poll: out of memory");
    } else {
      done = i + 1;
    }
  }
  altar_k8s_job_infos_free(jobs, njobs);
  if (rc)
    for (size_t i = 0; i < done; i++) altar_status_clear(&st[i]);
  return rc;
}

/* The pools whose nodes bound them: a node selector, or a GPU pool. */
static bool wants_nodes(const altar_k8s_pool_t *p) {
  return p->node_selector.n > 0 || strcmp(p->name, ALTAR_POOL_CPU) != 0;
}

/* The nodes, when some pool wants them and the last failed list is a
 * minute old; *pok false when capacity must do without them. */
static int list_nodes_if_wanted(altar_k8s_t *k, altar_k8s_node_info_t **pnodes, size_t *pn, bool *pok) {
  *pnodes = NULL;
  *pn = 0;
  *pok = false;
  bool want = false;
  for (size_t i = 0; i < k->n_pools; i++) want |= wants_nodes(&k->pools[i]);
  if (!want || altar__k8s_now(k) < k->nodes_retry_at) return ALTAR_OK;
  altar_error_t e = {0};
  int rc = altar_k8s_runtime_list_nodes(k->rt, pnodes, pn, &e);
  if (rc == ALTAR_ENOMEM) return rc;
  if (rc) {
    /* No permission on nodes, or a runtime without them: the ceilings
     * still hold, and asking every tick would only repeat the refusal. */
    k->nodes_retry_at = altar__k8s_now(k) + 60.0;
    return ALTAR_OK;
  }
  *pok = true;
  return ALTAR_OK;
}

int altar_k8s_capacity(altar_k8s_t *k, altar_capacity_t *cap, altar_error_t *err) {
  altar_k8s_node_info_t *nodes = NULL;
  size_t nnodes = 0;
  bool have_nodes;
  int rc = list_nodes_if_wanted(k, &nodes, &nnodes, &have_nodes);
  if (rc) return altar_error_set(err, rc, "capacity: out of memory");
  int64_t *bound = calloc(k->n_pools ? k->n_pools : 1, sizeof *bound);
  if (!bound) {
    altar_k8s_node_infos_free(nodes, nnodes);
    return altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
  }
  bool any = false;
  for (size_t i = 0; i < k->n_pools; i++) {
    const altar_k8s_pool_t *p = &k->pools[i];
    bound[i] = p->max_slots >= 0 ? p->max_slots : INT64_MAX;
    if (have_nodes && wants_nodes(p)) {
      size_t offering = 0;
      int64_t on_nodes = altar__k8s_pool_node_slots(p, nodes, nnodes, &offering);
      /* No node offers the pool's resource at all: it scales from zero (an
       * autoscaler adds nodes for pending pods), so its job must be
       * submitted to make that happen, not held for slots no node has.
       * Nodes that offer it but are cordoned or not Ready do bound it. */
      if (offering > 0 && on_nodes < bound[i]) bound[i] = on_nodes;
    }
    any |= bound[i] != INT64_MAX;
  }
  altar_k8s_node_infos_free(nodes, nnodes);
  if (!any) { /* nothing bounds any pool: no fixed capacity */
    free(bound);
    return ALTAR_OK;
  }
  altar_k8s_job_info_t *jobs = NULL;
  size_t njobs = 0;
  rc = altar_k8s_runtime_list_jobs(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &jobs, &njobs, err);
  for (size_t i = 0; i < k->n_pools && !rc; i++) {
    const altar_k8s_pool_t *p = &k->pools[i];
    int64_t free_slots = bound[i];
    if (free_slots != INT64_MAX) {
      char *want = altar_k8s_label_safe(p->name);
      if (!want) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
        break;
      }
      int64_t active = 0;
      for (size_t j = 0; j < njobs; j++) {
        const char *pool = altar_strmap_get(&jobs[j].labels, ALTAR_K8S_POOL_LABEL);
        if (pool && !strcmp(pool, want) &&
            (jobs[j].state == ALTAR_STATE_PENDING || jobs[j].state == ALTAR_STATE_RUNNING))
          active++;
      }
      free(want);
      free_slots = free_slots > active ? free_slots - active : 0;
    }
    if (altar_capacity_set(cap, p->name, free_slots)) rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
  }
  /* CPU-only tasks run on any cluster: the CPU pool is served even when the
   * configuration names only GPU pools. */
  if (!rc && !altar__k8s_pool(k, ALTAR_POOL_CPU) && altar_capacity_set(cap, ALTAR_POOL_CPU, INT64_MAX))
    rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
  altar_k8s_job_infos_free(jobs, njobs);
  free(bound);
  return rc;
}

int altar_k8s_cancel(altar_k8s_t *k, const altar_handle_t *h, altar_error_t *err) {
  if (!h || !h->external_id || !*h->external_id)
    return altar_error_set(err, ALTAR_EINVAL, "handle.external_id: must name a job");
  int rc = altar_k8s_runtime_delete_job(k->rt, h->external_id, k->ns, NULL, err);
  return rc == ALTAR_ENOTFOUND ? ALTAR_OK : rc;
}
