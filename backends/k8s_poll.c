/* poll, capacity and cancel: answered from the Job watch when there is
 * one, else from one list call per namespace. */
#include "k8s_int.h"

#include "altar/clock.h"
#include "altar/plugin/backend.h"
#include "core/unconst.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b) {
  const altar_k8s_job_info_t *x = a, *y = b;
  return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* jobs sorted by_name: a binary search, not a scan per handle. */
static const altar_k8s_job_info_t *find_job(const altar_k8s_job_info_t *jobs, size_t n, const char *name) {
  if (!name || !n) return NULL;
  altar_k8s_job_info_t key = {.name = ALTAR__UNCONST(name)};
  const altar_k8s_job_info_t *j = bsearch(&key, jobs, n, sizeof *jobs, by_name);
  return j && j->name ? j : NULL;
}

altar_k8s_watch_t *altar__k8s_watch_get(altar_k8s_t *k) {
  if (k->watch || !k->watch_on || k->watch_unavailable) return k->watch;
  altar_error_t e = {0};
  /* Not there (a runtime without watches, no thread): poll lists instead. */
  if (altar__k8s_runtime_watch_open(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &k->watch, &e)) {
    k->watch = NULL;
    k->watch_unavailable = true;
  }
  return k->watch;
}

altar_k8s_watch_t *altar__k8s_watch(altar_k8s_t *k) { return k->watch; }

/* Jobs whose pods one list of waits asks about by name: the label
 * selector stays a few KiB. */
#define WAITS_PER_LIST 40
/* A pending Job's pods are read from this long before its deadline (and
 * after it, while it stays pending), besides pod_wait_interval_ms twice. */
#define WAITS_LEAD_S 10.0

/* Whether a list of pod waits is due now (pod_wait_interval_ms apart). */
static bool waits_due(altar_k8s_t *k) {
  double now = altar__k8s_now(k);
  if (now < k->pod_waits_next) return false;
  k->pod_waits_next = now + (double)k->pod_wait_interval_ms / 1000.0;
  return true;
}

/* Remembers what one list of pod waits under selector says. A failed
 * list only loses the detail. */
static void note_waits_under(altar_k8s_t *k, const char *selector) {
  altar_k8s_pod_wait_t *waits = NULL;
  size_t nw = 0;
  altar_error_t werr = {0};
  if (altar__k8s_runtime_list_pod_waits(k->rt, k->ns, selector, &waits, &nw, &werr)) return;
  for (size_t i = 0; i < nw; i++) {
    if (!waits[i].job_name || !waits[i].reason) continue;
    altar_strmap_set(&k->wait_reason, waits[i].job_name, waits[i].reason);
    altar_strmap_set(&k->wait_detail, waits[i].job_name, waits[i].detail ? waits[i].detail : "");
  }
  altar__k8s_pod_waits_free(waits, nw);
}

/* Without a watch: every pending pod, at most every pod_wait_interval_ms
 * while a polled Job is pending (this path lists every Job anyway). */
static void note_waits_all(altar_k8s_t *k, bool any_pending) {
  if (any_pending && waits_due(k)) note_waits_under(k, ALTAR_K8S_MANAGED_SELECTOR);
}

/* With the watch: only the pods of the n pending Jobs near or past their
 * deadline, by name. A wait matters only when the deadline fails its Job
 * (the Job controller then deletes the pods that would have said why); a
 * Job without a deadline stays pending while its pod waits. So each Job's
 * pods are read a bounded number of times, whatever the number of Jobs
 * pending, where a list of every pending pod every interval read each of
 * them once per interval. */
static void note_waits_near(altar_k8s_t *k, const char *const *names, size_t n) {
  if (!n || !waits_due(k)) return;
  const char *head = ALTAR_K8S_MANAGED_SELECTOR ",job-name in (";
  char sel[64 + WAITS_PER_LIST * 64];
  for (size_t i = 0; i < n;) {
    size_t len = strlen(head), took = 0;
    memcpy(sel, head, len);
    for (; i < n && took < WAITS_PER_LIST; i++) {
      size_t l = strlen(names[i]);
      if (l > 63) continue; /* longer than a label value: no pod is labelled with it */
      if (took++) sel[len++] = ',';
      memcpy(sel + len, names[i], l);
      len += l;
    }
    memcpy(sel + len, ")", 2);
    if (took) note_waits_under(k, sel);
  }
}

/* altar_status_init with the handle copied into one block: one malloc per
 * status where a copy string by string took six, the most of a poll's cost
 * per handle answered from the watch. Takes f, also when it fails. */
static int status_init(altar_status_t *st, const altar_handle_t *h, altar_state_t state, altar_failure_t *f) {
  if (!h->backend || !h->external_id) return altar_status_init(st, h, state, f); /* a packed copy wants both */
  memset(st, 0, sizeof *st);
  if (altar_handle_copy_compact(&st->handle, h)) {
    altar_failure_free(f);
    return ALTAR_ENOMEM;
  }
  st->state = state;
  st->failure = f;
  return ALTAR_OK;
}

static void forget_wait(altar_k8s_t *k, const char *name) {
  altar_strmap_remove(&k->wait_reason, name);
  altar_strmap_remove(&k->wait_detail, name);
}

/* The failure of a Job whose pods are gone: a remembered wait beats the
 * deadline or the bare "job_failed" it ended with. f is consumed. */
static altar_failure_t *with_remembered_wait(altar_k8s_t *k, const char *name, altar_failure_t *f) {
  const char *code = altar_strmap_get(&k->wait_reason, name);
  if (!code || !f || (strcmp(f->reason, ALTAR_REASON_TIMEOUT) && strcmp(f->reason, ALTAR_REASON_JOB_FAILED))) return f;
  char detail[1024];
  snprintf(detail, sizeof detail, "%s (job: %s)", altar_strmap_get(&k->wait_detail, name),
           f->detail ? f->detail : f->reason);
  altar_failure_t *w = altar_failure_for_reason(code, detail);
  if (!w) return f;
  altar_failure_free(f);
  return w;
}

/* st from what is known of the Job `name`: found (in state), or gone. Pods
 * are read only for a failed Job, to say why. */
static int status_of(altar_k8s_t *k, const altar_handle_t *h, bool found, altar_state_t state, altar_status_t *st) {
  const char *name = h->external_id;
  altar_failure_t *f = NULL;
  if (!found) {
    /* A created Job is listed (or watched) at once, so an absent one was
     * deleted and can never finish. */
    state = ALTAR_STATE_FAILED;
    forget_wait(k, name);
    f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, "the job is no longer in the namespace");
  } else if (state == ALTAR_STATE_FAILED) {
    altar_error_t derr = {0};
    if (altar__k8s_runtime_describe_failure(k->rt, name, k->ns, &f, &derr) || !f) {
      /* The Job did fail; not knowing why is no reason to fail the probe. */
      altar_failure_free(f);
      f = altar_failure_for_reason(ALTAR_REASON_JOB_FAILED, derr.msg[0] ? derr.msg : NULL);
    }
    f = with_remembered_wait(k, name, f);
    forget_wait(k, name);
  } else if (state != ALTAR_STATE_PENDING) {
    forget_wait(k, name);
  }
  /* status_init takes f, also when it fails. */
  if ((state == ALTAR_STATE_FAILED && !f) || status_init(st, h, state, f)) return ALTAR_ENOMEM;
  return ALTAR_OK;
}

/* A create still on its way (pending) or refused (failed with the reason
 * submit would have returned); 0 when the name has no such outcome. */
static int outcome_of(altar_k8s_t *k, const altar_handle_t *h, altar_status_t *st, bool *phad) {
  const char *o = altar_strmap_get(&k->outcome, h->external_id);
  *phad = o != NULL;
  if (!o) return ALTAR_OK;
  if (!*o) return status_init(st, h, ALTAR_STATE_PENDING, NULL) ? ALTAR_ENOMEM : ALTAR_OK;
  char *end;
  long code = strtol(o, &end, 10);
  const char *reason = altar_reason_for_start_error((int)code);
  altar_failure_t *f = altar_failure_for_reason(reason, *end == ' ' ? end + 1 : end);
  int rc = !f || status_init(st, h, ALTAR_STATE_FAILED, f) ? ALTAR_ENOMEM : ALTAR_OK;
  if (!rc) altar_strmap_remove(&k->outcome, h->external_id);
  return rc;
}

/* Answers from the watch's map: one lookup per handle; a name the map has
 * never seen costs one GET. */
static int poll_watched(altar_k8s_t *k, altar_k8s_watch_t *w, const altar_handle_t *hs, size_t n, altar_status_t *st,
                        size_t *pdone, altar_error_t *err) {
  const char **names = calloc(n, sizeof *names);
  altar_k8s_watch_view_t *views = calloc(n, sizeof *views);
  int rc = names && views ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "poll: out of memory");
  for (size_t i = 0; !rc && i < n; i++) names[i] = hs[i].external_id ? hs[i].external_id : "";
  if (!rc) {
    k->polled_gen = altar__k8s_watch_generation(w);
    altar__k8s_watch_lookup(w, names, n, views);
  }
  /* The names of pending Jobs near their deadline, reusing names[]. */
  size_t near = 0;
  double now_wall = altar_wall_s(), lead = WAITS_LEAD_S + 2.0 * (double)k->pod_wait_interval_ms / 1000.0;
  for (size_t i = 0; !rc && i < n; i++) {
    bool had = false;
    rc = outcome_of(k, &hs[i], &st[i], &had);
    if (rc || had) {
      if (!rc) *pdone = i + 1;
      continue;
    }
    bool found = views[i].seen == ALTAR_K8S_SEEN_LIVE;
    altar_state_t state = views[i].state;
    if (views[i].seen == ALTAR_K8S_SEEN_UNKNOWN) {
      altar_k8s_job_info_t *job = NULL;
      rc = altar__k8s_runtime_read_job(k->rt, names[i], k->ns, &job, err);
      if (rc) break;
      found = job != NULL;
      if (job) state = job->state;
      altar__k8s_job_info_free(job);
    }
    if (found && state == ALTAR_STATE_PENDING && views[i].deadline_at > 0 && views[i].deadline_at - now_wall <= lead)
      names[near++] = names[i];
    rc = status_of(k, &hs[i], found, state, &st[i]);
    if (rc) rc = altar_error_set(err, ALTAR_ENOMEM, "poll: out of memory");
    else *pdone = i + 1;
  }
  if (!rc) note_waits_near(k, names, near);
  free(names);
  free(views);
  return rc;
}

/* One list of every Job (no watch, or before its first list). */
static int poll_listed(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *st, size_t *pdone,
                       altar_error_t *err) {
  altar_k8s_job_info_t *jobs = NULL;
  size_t njobs = 0;
  int rc = altar__k8s_runtime_list_jobs(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &jobs, &njobs, err);
  if (rc) return rc;
  if (njobs) qsort(jobs, njobs, sizeof *jobs, by_name);
  bool any_pending = false;
  for (size_t i = 0; i < n && !any_pending; i++) {
    const altar_k8s_job_info_t *job = find_job(jobs, njobs, hs[i].external_id);
    any_pending = job && job->state == ALTAR_STATE_PENDING;
  }
  note_waits_all(k, any_pending);
  for (size_t i = 0; i < n && !rc; i++) {
    bool had = false;
    rc = outcome_of(k, &hs[i], &st[i], &had);
    if (!rc && !had) {
      const altar_k8s_job_info_t *job = find_job(jobs, njobs, hs[i].external_id);
      rc = status_of(k, &hs[i], job != NULL, job ? job->state : ALTAR_STATE_PENDING, &st[i]);
    }
    if (rc) rc = altar_error_set(err, ALTAR_ENOMEM, "poll: out of memory");
    else *pdone = i + 1;
  }
  altar__k8s_job_infos_free(jobs, njobs);
  return rc;
}

int altar__k8s_poll(altar_k8s_t *k, const altar_handle_t *hs, size_t n, altar_status_t *st, altar_error_t *err) {
  if (!n) return ALTAR_OK;
  altar__k8s_submit_drive(k, 0);
  altar_k8s_watch_t *w = altar__k8s_watch_get(k);
  size_t done = 0;
  int rc = w && altar__k8s_watch_synced(w) ? poll_watched(k, w, hs, n, st, &done, err)
                                           : poll_listed(k, hs, n, st, &done, err);
  if (rc)
    for (size_t i = 0; i < done; i++) altar_status_clear(&st[i]);
  return rc;
}

/* Slices of a wait with creates in flight: their answers come on the
 * connection, the watch's news on its thread, and either is a change. */
#define WAIT_SLICE_MS 10

int altar__k8s_wait_change(altar_k8s_t *k, int timeout_ms) {
  altar_k8s_watch_t *w = altar__k8s_watch_get(k);
  double until = altar_mono_s() + (timeout_ms > 0 ? timeout_ms / 1000.0 : 0);
  while (k->n_inflight) {
    double left = until - altar_mono_s();
    int slice = left <= 0 ? 0 : left * 1000.0 < WAIT_SLICE_MS ? (int)(left * 1000.0) + 1 : WAIT_SLICE_MS;
    if (altar__k8s_submit_drive(k, slice)) return 1;
    if (w && altar__k8s_watch_generation(w) != k->polled_gen) return 1;
    if (left <= 0) return 0;
  }
  if (!w) return ALTAR_ENOTSUP;
  uint64_t gen = k->polled_gen;
  double left = until - altar_mono_s();
  return altar__k8s_watch_wait(w, &gen, left > 0 ? (int)(left * 1000.0) : 0);
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
  int rc = altar__k8s_runtime_list_nodes(k->rt, pnodes, pn, &e);
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

int altar__k8s_capacity(altar_k8s_t *k, altar_capacity_t *cap, altar_error_t *err) {
  altar_k8s_node_info_t *nodes = NULL;
  size_t nnodes = 0;
  bool have_nodes;
  int rc = list_nodes_if_wanted(k, &nodes, &nnodes, &have_nodes);
  if (rc) return altar_error_set(err, rc, "capacity: out of memory");
  int64_t *bound = calloc(k->n_pools ? k->n_pools : 1, sizeof *bound);
  if (!bound) {
    altar__k8s_node_infos_free(nodes, nnodes);
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
  altar__k8s_node_infos_free(nodes, nnodes);
  /* The backlog of Jobs not yet started caps every pool (k8s_pace.c). */
  int64_t room = altar__k8s_pace_room(k);
  if (!any && room == INT64_MAX) { /* nothing bounds any pool: no fixed capacity */
    free(bound);
    return ALTAR_OK;
  }
  altar_k8s_job_info_t *jobs = NULL;
  size_t njobs = 0;
  altar_k8s_watch_t *w = altar__k8s_watch_get(k);
  if (w && !altar__k8s_watch_synced(w)) w = NULL;
  if (!w) rc = altar__k8s_runtime_list_jobs(k->rt, k->ns, ALTAR_K8S_MANAGED_SELECTOR, &jobs, &njobs, err);
  for (size_t i = 0; i < k->n_pools && !rc; i++) {
    const altar_k8s_pool_t *p = &k->pools[i];
    int64_t free_slots = bound[i];
    if (free_slots != INT64_MAX) {
      char *want = altar__k8s_label_safe(p->name);
      if (!want) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
        break;
      }
      /* A create on its way counts before the watch reports its Job. */
      int64_t active = altar__k8s_active_in_pool(k, w, want);
      for (size_t j = 0; j < njobs; j++) {
        const char *pool = altar_strmap_get(&jobs[j].labels, ALTAR_K8S_POOL_LABEL);
        if (pool && !strcmp(pool, want) &&
            (jobs[j].state == ALTAR_STATE_PENDING || jobs[j].state == ALTAR_STATE_RUNNING))
          active++;
      }
      free(want);
      free_slots = free_slots > active ? free_slots - active : 0;
    }
    if (free_slots > room) free_slots = room;
    if (altar_capacity_set(cap, p->name, free_slots))
      rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
  }
  /* CPU-only tasks run on any cluster: the CPU pool is served even when the
   * configuration names only GPU pools. */
  if (!rc && !altar__k8s_pool(k, ALTAR_POOL_CPU) && altar_capacity_set(cap, ALTAR_POOL_CPU, room))
    rc = altar_error_set(err, ALTAR_ENOMEM, "capacity: out of memory");
  altar__k8s_job_infos_free(jobs, njobs);
  free(bound);
  return rc;
}

int altar__k8s_cancel(altar_k8s_t *k, const altar_handle_t *h, altar_error_t *err) {
  if (!h || !h->external_id || !*h->external_id)
    return altar_error_set(err, ALTAR_EINVAL, "handle.external_id: must name a job");
  int rc = altar__k8s_runtime_delete_job(k->rt, h->external_id, k->ns, NULL, err);
  return rc == ALTAR_ENOTFOUND ? ALTAR_OK : rc;
}
