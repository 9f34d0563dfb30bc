/* KubernetesRuntime: the vtable wrappers with their defaults, K8sJobInfo,
 * and reading Job state and failure causes out of API objects. */
#include "backends/k8s_api.h"

#include "altar/backend.h"
#include "altar/log_tail.h"
#include "altar/pools.h"
#include "core/unconst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char **environ;

/* ---- K8sJobInfo ---- */

altar_k8s_job_info_t *altar__k8s_job_info_new(const char *name, altar_state_t state, const char *uid) {
  altar_k8s_job_info_t *info = calloc(1, sizeof *info);
  if (!info) return NULL;
  info->name = strdup(name ? name : "");
  info->uid = uid ? strdup(uid) : NULL;
  info->state = state;
  if (!info->name || (uid && !info->uid)) {
    altar__k8s_job_info_free(info);
    return NULL;
  }
  return info;
}

void altar__k8s_job_info_clear(altar_k8s_job_info_t *info) {
  if (!info) return;
  free(info->name);
  free(info->uid);
  altar_strmap_clear(&info->labels);
  altar_strmap_clear(&info->annotations);
  memset(info, 0, sizeof *info);
}

void altar__k8s_job_info_free(altar_k8s_job_info_t *info) {
  altar__k8s_job_info_clear(info);
  free(info);
}

void altar__k8s_job_infos_free(altar_k8s_job_info_t *infos, size_t n) {
  for (size_t i = 0; infos && i < n; i++) altar__k8s_job_info_clear(&infos[i]);
  free(infos);
}

int altar__k8s_job_info_copy(altar_k8s_job_info_t *dst, const altar_k8s_job_info_t *src) {
  memset(dst, 0, sizeof *dst);
  dst->state = src->state;
  dst->name = strdup(src->name ? src->name : "");
  dst->uid = src->uid ? strdup(src->uid) : NULL;
  if (!dst->name || (src->uid && !dst->uid) || altar_strmap_copy(&dst->labels, &src->labels) ||
      altar_strmap_copy(&dst->annotations, &src->annotations)) {
    altar__k8s_job_info_clear(dst);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

/* ---- the runtime object and its wrappers ---- */

altar_k8s_runtime_t *altar__k8s_runtime_new(const altar_k8s_runtime_ops_t *ops, void *impl) {
  altar_k8s_runtime_t *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  rt->ops = ops;
  rt->impl = impl;
  return rt;
}

void altar__k8s_runtime_free(altar_k8s_runtime_t *rt) {
  if (!rt) return;
  if (rt->ops && rt->ops->destroy) rt->ops->destroy(rt->impl);
  free(rt);
}

int altar__k8s_runtime_create_job(altar_k8s_runtime_t *rt, const json_t *manifest, const char *ns, char **pname,
                                  char **puid, altar_error_t *err) {
  *pname = NULL;
  char *uid = NULL;
  int rc = rt->ops->create_job(rt->impl, manifest, ns, pname, &uid, err);
  if (puid) *puid = uid;
  else free(uid);
  return rc;
}

int altar__k8s_runtime_list_jobs(altar_k8s_runtime_t *rt, const char *ns, const char *label_selector,
                                 altar_k8s_job_info_t **pjobs, size_t *pn, altar_error_t *err) {
  *pjobs = NULL;
  *pn = 0;
  return rt->ops->list_jobs(rt->impl, ns, label_selector, pjobs, pn, err);
}

/* Default read_job: the Job as list_jobs reports it, so a runtime with only
 * the required calls still supports submit's conflict handling. */
int altar__k8s_runtime_read_job(altar_k8s_runtime_t *rt, const char *name, const char *ns, altar_k8s_job_info_t **pjob,
                                altar_error_t *err) {
  *pjob = NULL;
  if (rt->ops->read_job) return rt->ops->read_job(rt->impl, name, ns, pjob, err);
  altar_k8s_job_info_t *jobs = NULL;
  size_t n = 0;
  int rc = altar__k8s_runtime_list_jobs(rt, ns, NULL, &jobs, &n, err);
  if (rc) return rc;
  for (size_t i = 0; i < n && !rc; i++) {
    if (jobs[i].name && !strcmp(jobs[i].name, name)) {
      *pjob = calloc(1, sizeof **pjob);
      if (!*pjob || altar__k8s_job_info_copy(*pjob, &jobs[i])) {
        free(*pjob);
        *pjob = NULL;
        rc = altar_error_set(err, ALTAR_ENOMEM, "read_job %s: out of memory", name);
      }
      break;
    }
  }
  altar__k8s_job_infos_free(jobs, n);
  return rc;
}

int altar__k8s_runtime_delete_job(altar_k8s_runtime_t *rt, const char *name, const char *ns, const char *uid,
                                  altar_error_t *err) {
  return rt->ops->delete_job(rt->impl, name, ns, uid, err);
}

/* Default diagnose: every failure is taken as deterministic, without a message. */
int altar__k8s_runtime_diagnose(altar_k8s_runtime_t *rt, const char *name, const char *ns, bool *pdeterministic,
                                char **pmessage, altar_error_t *err) {
  *pdeterministic = true;
  *pmessage = NULL;
  if (rt->ops->diagnose) return rt->ops->diagnose(rt->impl, name, ns, pdeterministic, pmessage, err);
  return ALTAR_OK;
}

/* Default describe_failure: diagnose's coarse answer under reason job_failed. */
int altar__k8s_runtime_describe_failure(altar_k8s_runtime_t *rt, const char *name, const char *ns, altar_failure_t **pf,
                                        altar_error_t *err) {
  *pf = NULL;
  if (rt->ops->describe_failure) return rt->ops->describe_failure(rt->impl, name, ns, pf, err);
  bool det = true;
  char *msg = NULL;
  int rc = altar__k8s_runtime_diagnose(rt, name, ns, &det, &msg, err);
  if (rc) return rc;
  *pf = altar_failure_new(ALTAR_REASON_JOB_FAILED, msg, det);
  free(msg);
  return *pf ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "describe_failure %s: out of memory", name);
}

const char *altar__k8s_runtime_default_namespace(altar_k8s_runtime_t *rt) {
  return rt->ops->default_namespace ? rt->ops->default_namespace(rt->impl) : NULL;
}

void altar__k8s_pod_waits_free(altar_k8s_pod_wait_t *waits, size_t n) {
  for (size_t i = 0; waits && i < n; i++) {
    free(waits[i].job_name);
    free(waits[i].detail);
  }
  free(waits);
}

int altar__k8s_runtime_list_pod_waits(altar_k8s_runtime_t *rt, const char *ns, const char *label_selector,
                                      altar_k8s_pod_wait_t **pwaits, size_t *pn, altar_error_t *err) {
  *pwaits = NULL;
  *pn = 0;
  if (!rt->ops->list_pod_waits) return ALTAR_OK;
  return rt->ops->list_pod_waits(rt->impl, ns, label_selector, pwaits, pn, err);
}

int altar__k8s_runtime_create_start(altar_k8s_runtime_t *rt, const json_t *manifest, const char *ns, uint64_t id,
                                    altar_error_t *err) {
  if (!rt->ops->create_start || !rt->ops->create_reap)
    return altar_error_set(err, ALTAR_ENOTSUP, "the %s runtime keeps no creates in flight", rt->ops->name);
  return rt->ops->create_start(rt->impl, manifest, ns, id, err);
}

int altar__k8s_runtime_create_reap(altar_k8s_runtime_t *rt, int timeout_ms, altar_k8s_create_done_t *pdone,
                                   size_t max) {
  if (!rt->ops->create_reap) return 0;
  return rt->ops->create_reap(rt->impl, timeout_ms, pdone, max);
}

int altar__k8s_runtime_watch_open(altar_k8s_runtime_t *rt, const char *ns, const char *selector, altar_k8s_watch_t **pw,
                                  altar_error_t *err) {
  *pw = NULL;
  if (!rt->ops->watch_open) return altar_error_set(err, ALTAR_ENOTSUP, "the %s runtime cannot watch", rt->ops->name);
  return rt->ops->watch_open(rt->impl, ns, selector, pw, err);
}

int altar__k8s_runtime_list_nodes(altar_k8s_runtime_t *rt, altar_k8s_node_info_t **pnodes, size_t *pn,
                                  altar_error_t *err) {
  *pnodes = NULL;
  *pn = 0;
  if (!rt->ops->list_nodes)
    return altar_error_set(err, ALTAR_ENOTSUP, "the %s runtime cannot list nodes", rt->ops->name);
  return rt->ops->list_nodes(rt->impl, pnodes, pn, err);
}

/* ---- reading API objects ---- */

static const char *jstr(const json_t *obj, const char *key) { return json_string_value(json_object_get(obj, key)); }

static int read_strmap(const json_t *obj, altar_strmap_t *m) {
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)ALTAR__UNCONST(obj), key, val) {
    if (json_is_string(val) && altar_strmap_set(m, key, json_string_value(val))) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

/* True when the list of conditions has `type` with status "True"; *preason
 * gets its reason. */
static bool has_condition(const json_t *conds, const char *type, const char **preason, const char **pmessage) {
  size_t i;
  json_t *c;
  json_array_foreach(conds, i, c) {
    const char *t = jstr(c, "type"), *s = jstr(c, "status");
    if (t && s && !strcmp(t, type) && !strcmp(s, "True")) {
      if (preason) *preason = jstr(c, "reason");
      if (pmessage) *pmessage = jstr(c, "message");
      return true;
    }
  }
  return false;
}

altar_state_t altar__k8s_job_state_from_json(const json_t *job) {
  const json_t *status = json_object_get(job, "status");
  const json_t *conds = json_object_get(status, "conditions");
  if (has_condition(conds, "Complete", NULL, NULL) || has_condition(conds, "SuccessCriteriaMet", NULL, NULL))
    return ALTAR_STATE_SUCCEEDED;
  if (has_condition(conds, "Failed", NULL, NULL) || has_condition(conds, "FailureTarget", NULL, NULL))
    return ALTAR_STATE_FAILED;
  if (json_integer_value(json_object_get(status, "active")) > 0) {
    /* "active" also counts pods still being scheduled or pulling; "ready"
     * (when the server reports it) says which have started. */
    json_t *ready = json_object_get(status, "ready");
    return !json_is_integer(ready) || json_integer_value(ready) > 0 ? ALTAR_STATE_RUNNING : ALTAR_STATE_PENDING;
  }
  return ALTAR_STATE_PENDING;
}

int altar__k8s_parse_time(const char *s, double *pt) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
  if (!p) return -1;
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++) {}
  long off = 0;
  if (*p == '+' || *p == '-') {
    int hh = 0, mm = 0;
    if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2) return -1;
    off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
  } else if (*p != 'Z' && *p != 'z') {
    return -1;
  }
  *pt = (double)(timegm(&tm) - off);
  return 0;
}

double altar__k8s_job_deadline_from_json(const json_t *job) {
  json_int_t secs = json_integer_value(json_object_get(json_object_get(job, "spec"), "activeDeadlineSeconds"));
  if (secs <= 0) return 0;
  const char *from = jstr(json_object_get(job, "status"), "startTime");
  if (!from) from = jstr(json_object_get(job, "metadata"), "creationTimestamp");
  double t;
  if (altar__k8s_parse_time(from, &t) || t <= 0) return 0;
  return t + (double)secs;
}

int altar__k8s_job_info_from_json(const json_t *job, altar_k8s_job_info_t *info, altar_error_t *err) {
  memset(info, 0, sizeof *info);
  const json_t *meta = json_object_get(job, "metadata");
  const char *name = jstr(meta, "name");
  if (!name) return altar_error_set(err, ALTAR_EDECODE, "job.metadata.name: missing");
  info->state = altar__k8s_job_state_from_json(job);
  info->name = strdup(name);
  const char *uid = jstr(meta, "uid");
  info->uid = uid ? strdup(uid) : NULL;
  if (!info->name || (uid && !info->uid) || read_strmap(json_object_get(meta, "labels"), &info->labels) ||
      read_strmap(json_object_get(meta, "annotations"), &info->annotations)) {
    altar__k8s_job_info_clear(info);
    return altar_error_set(err, ALTAR_ENOMEM, "job %s: out of memory", name);
  }
  return ALTAR_OK;
}

/* The terminated state of the container `name` in a pod's status list, or NULL. */
static const json_t *terminated_of(const json_t *statuses, const char *name) {
  size_t i;
  json_t *cs;
  json_array_foreach(statuses, i, cs) {
    const char *n = jstr(cs, "name");
    if (name && (!n || strcmp(n, name))) continue;
    const json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");
    if (!t) t = json_object_get(json_object_get(cs, "lastState"), "terminated");
    if (t) return t;
  }
  return NULL;
}

/* A failure whose detail reads "<what>: <msg>" (or just what), with
 * `deterministic` from the one table every backend shares
 * (altar_reason_deterministic): timeout, OOM, eviction, preemption, a
 * missing Job and a digest mismatch are worth a retry; exit_<n> is not. */
static altar_failure_t *failure_msg(const char *reason, const char *what, const char *msg) {
  char detail[512];
  snprintf(detail, sizeof detail, "%s%s%s", what, msg ? ": " : "", msg ? msg : "");
  return altar_failure_for_reason(reason, detail);
}

/* Waiting reasons that mean the image could not be had. */
static const char *const IMAGE_WAITS[] = {"ErrImagePull",
                                          "ImagePullBackOff",
                                          "InvalidImageName",
                                          "ErrImageNeverPull",
                                          "RegistryUnavailable",
                                          "ImageInspectError",
                                          NULL};

static const char *image_wait_in(const json_t *statuses, char *detail, size_t sz) {
  size_t i;
  json_t *cs;
  json_array_foreach(statuses, i, cs) {
    const json_t *w = json_object_get(json_object_get(cs, "state"), "waiting");
    const char *r = jstr(w, "reason"), *m = jstr(w, "message");
    for (size_t j = 0; r && IMAGE_WAITS[j]; j++) {
      if (strcmp(r, IMAGE_WAITS[j])) continue;
      snprintf(detail, sz, "%s%s%s", r, m ? ": " : "", m ? m : "");
      return ALTAR_K8S_REASON_IMAGE_PULL;
    }
  }
  return NULL;
}

const char *altar__k8s_pod_waiting(const json_t *pod, char *detail, size_t sz) {
  const json_t *st = json_object_get(pod, "status");
  const char *reason = NULL, *message = NULL;
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(st, "conditions"), i, c) {
    const char *t = jstr(c, "type"), *s = jstr(c, "status");
    if (t && s && !strcmp(t, "PodScheduled") && !strcmp(s, "False")) {
      reason = jstr(c, "reason");
      message = jstr(c, "message");
      if (reason && !strcmp(reason, "Unschedulable")) {
        snprintf(detail, sz, "Unschedulable%s%s", message ? ": " : "", message ? message : "");
        return ALTAR_K8S_REASON_UNSCHEDULABLE;
      }
    }
  }
  const char *r = image_wait_in(json_object_get(st, "initContainerStatuses"), detail, sz);
  return r ? r : image_wait_in(json_object_get(st, "containerStatuses"), detail, sz);
}

altar_failure_t *altar__k8s_explain_failure(const json_t *job, const json_t *pods) {
  const json_t *conds = json_object_get(json_object_get(job, "status"), "conditions");
  const char *reason = NULL, *message = NULL;
  bool failed =
      has_condition(conds, "Failed", &reason, &message) || has_condition(conds, "FailureTarget", &reason, &message);
  /* A pod that never started says more than the deadline that ended it. */
  size_t wi;
  json_t *wpod;
  json_array_foreach(json_object_get(pods, "items"), wi, wpod) {
    char wait[512];
    const char *code = altar__k8s_pod_waiting(wpod, wait, sizeof wait);
    if (!code) continue;
    char detail[800];
    snprintf(detail, sizeof detail, "%s (job: %s%s%s)", wait, reason ? reason : "Failed", message ? ": " : "",
             message ? message : "");
    return altar_failure_for_reason(code, detail);
  }
  /* activeDeadlineSeconds also counts scheduling and image pulls, so a
   * timeout may come from a slow node or registry rather than the task:
   * transient (the shared table agrees), the safe answer when the evidence
   * is ambiguous. */
  if (failed && reason && !strcmp(reason, "DeadlineExceeded"))
    return failure_msg(ALTAR_REASON_TIMEOUT, "DeadlineExceeded", message);

  const json_t *items = json_object_get(pods, "items");
  size_t i;
  json_t *pod;
  /* Evidence in order of strength: the init container, then kills by the
   * platform, then the task's own exit code. */
  json_array_foreach(items, i, pod) {
    const json_t *st = json_object_get(pod, "status");
    const json_t *t = terminated_of(json_object_get(st, "initContainerStatuses"), ALTAR_K8S_VERIFY_CONTAINER);
    if (t && json_integer_value(json_object_get(t, "exitCode")) != 0)
      return failure_msg(ALTAR_REASON_INPUT_DIGEST_MISMATCH, "init container " ALTAR_K8S_VERIFY_CONTAINER " failed",
                         jstr(t, "message") ? jstr(t, "message") : jstr(t, "reason"));
  }
  json_array_foreach(items, i, pod) {
    const json_t *st = json_object_get(pod, "status");
    const char *preason = jstr(st, "reason");
    if (preason && (!strcmp(preason, "Evicted") || !strcmp(preason, "Preempting") || !strcmp(preason, "Preempted") ||
                    !strcmp(preason, "Shutdown") || !strcmp(preason, "NodeLost") || !strcmp(preason, "Terminated")))
      return failure_msg(ALTAR_REASON_JOB_FAILED, preason, jstr(st, "message"));
    if (has_condition(json_object_get(st, "conditions"), "DisruptionTarget", &reason, &message))
      return failure_msg(ALTAR_REASON_JOB_FAILED, reason ? reason : "DisruptionTarget", message);
    const json_t *t = terminated_of(json_object_get(st, "containerStatuses"), NULL);
    const char *treason = t ? jstr(t, "reason") : NULL;
    if (treason && !strcmp(treason, "OOMKilled"))
      return failure_msg(ALTAR_REASON_OOM_KILLED, "container OOMKilled", jstr(t, "message"));
  }
  json_array_foreach(items, i, pod) {
    const json_t *st = json_object_get(pod, "status");
    const json_t *t = terminated_of(json_object_get(st, "containerStatuses"), ALTAR_K8S_TASK_CONTAINER);
    if (!t) t = terminated_of(json_object_get(st, "containerStatuses"), NULL);
    json_t *code = t ? json_object_get(t, "exitCode") : NULL;
    if (json_is_integer(code) && json_integer_value(code) != 0) {
      /* The termination message is the container's last log lines
       * (FallbackToLogsOnError): quoted as its output, bounded and redacted. */
      char base[64];
      snprintf(base, sizeof base, "container exited with code %lld", (long long)json_integer_value(code));
      const char *msg = jstr(t, "message");
      char *detail = altar_detail_with_output(base, msg, msg ? strlen(msg) : 0, NULL, 0, (const char *const *)environ,
                                              ALTAR_BOUND_DETAIL);
      altar_failure_t *f = altar_failure_for_exit(json_integer_value(code), detail ? detail : base);
      free(detail);
      return f;
    }
  }
  /* Failed without a pod to explain it: the platform's own words, transient. */
  return failure_msg(ALTAR_REASON_JOB_FAILED, reason ? reason : "Failed", message ? message : "no pod detail");
}
