/* docker backend: poll. One `docker inspect` call covers every handle (in
 * batches for very long lists); a running container past its deadline is
 * killed on this poll and reported as "timeout". Nothing here waits for a
 * container. */
#include "altar/clock.h"
#include "backends/docker_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Ids per inspect call: keeps argv far below ARG_MAX. */
#define POLL_BATCH 512

/* docker's stderr for ids it does not know (per CLI version). */
static bool is_missing_line(const char *line, size_t len) {
  static const char *const pats[] = {"No such object", "No such container", "is not running", NULL};
  for (size_t k = 0; pats[k]; k++) {
    size_t pl = strlen(pats[k]);
    for (size_t i = 0; i + pl <= len; i++)
      if (!memcmp(line + i, pats[k], pl)) return true;
  }
  return false;
}

/* Whether every non-empty stderr line is about a missing (or stopped) container. */
static bool only_missing_errors(const char *text) {
  const char *p = text ? text : "";
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    bool blank = true;
    for (size_t i = 0; i < len; i++)
      if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') blank = false;
    if (!blank && !is_missing_line(p, len)) return false;
    if (!e) break;
    p = e + 1;
  }
  return true;
}

/* Inspects ids[0..n) and appends what docker knows to *pinfos. */
static int inspect_batch(altar_docker_t *dk, const char *const *ids, size_t n, altar_docker_info_t **pinfos, size_t *pn,
                         altar_error_t *err) {
  const char **args = calloc(n + 4, sizeof *args);
  if (!args) return altar_error_set(err, ALTAR_ENOMEM, "poll: argv");
  size_t na = 0;
  args[na++] = "inspect";
  args[na++] = "--type";
  args[na++] = "container";
  for (size_t i = 0; i < n; i++) args[na++] = ids[i];
  args[na] = NULL;
  altar_cmd_result_t res = {0};
  int rc = altar__docker_cli(dk, args, &res, err);
  free(args);
  if (rc < 0) {
    altar_error_prefix(err, "poll");
    altar_cmd_result_clear(&res);
    return rc;
  }
  if (res.out_truncated) {
    altar_cmd_result_clear(&res);
    return altar_error_set(err, ALTAR_ETOOBIG, "poll: docker inspect output exceeds the capture bound");
  }
  /* Exit 1 with "No such object" lines still prints the found ones. */
  if (res.exit_code != 0 && !only_missing_errors(res.err)) {
    char line[300];
    altar__docker_last_line(res.err, line, sizeof line);
    rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "poll: docker inspect exited %d: %s", res.exit_code,
                                   line[0] ? line : "(no message)");
    altar_cmd_result_clear(&res);
    return rc;
  }
  altar_docker_info_t *got = NULL;
  size_t ngot = 0;
  /* Some client versions print nothing at all when no id was found. */
  bool empty = true;
  for (size_t i = 0; i < res.out_len; i++)
    if (res.out[i] != ' ' && res.out[i] != '\n' && res.out[i] != '\r' && res.out[i] != '\t') empty = false;
  if (!empty) {
    rc = altar__docker_parse_inspect(res.out, res.out_len, &got, &ngot, err);
    if (rc < 0) {
      altar_error_prefix(err, "poll");
      altar_cmd_result_clear(&res);
      return rc;
    }
  }
  altar_cmd_result_clear(&res);
  if (ngot) {
    altar_docker_info_t *all = realloc(*pinfos, (*pn + ngot) * sizeof *all);
    if (!all) {
      free(got);
      return altar_error_set(err, ALTAR_ENOMEM, "poll: inspect results");
    }
    memcpy(all + *pn, got, ngot * sizeof *got);
    *pinfos = all;
    *pn += ngot;
  }
  free(got);
  return 0;
}

static const altar_docker_info_t *find_info(const altar_docker_info_t *infos, size_t n, const char *external_id) {
  size_t l = strlen(external_id);
  for (size_t i = 0; i < n; i++)
    if (!strncmp(infos[i].id, external_id, l)) return &infos[i];
  return NULL;
}

/* Kills ids past their deadline with one `docker kill`; a container that
 * stopped or vanished meanwhile is fine. */
static int kill_expired(altar_docker_t *dk, const char *const *ids, size_t n, altar_error_t *err) {
  if (!n) return 0;
  const char **args = calloc(n + 2, sizeof *args);
  if (!args) return altar_error_set(err, ALTAR_ENOMEM, "poll: kill argv");
  args[0] = "kill";
  for (size_t i = 0; i < n; i++) args[i + 1] = ids[i];
  args[n + 1] = NULL;
  altar_cmd_result_t res = {0};
  int rc = altar__docker_cli(dk, args, &res, err);
  free(args);
  if (rc < 0) {
    altar_error_prefix(err, "poll: killing containers past their timeout");
  } else if (res.exit_code != 0 && !only_missing_errors(res.err)) {
    char line[300];
    altar__docker_last_line(res.err, line, sizeof line);
    rc = altar_error_set_retriable(err, ALTAR_EBACKEND,
                                   "poll: docker kill of containers past their timeout exited %d: %s", res.exit_code,
                                   line[0] ? line : "(no message)");
  }
  altar_cmd_result_clear(&res);
  return rc;
}

/* The status for one container docker knows. *pkill is set when the
 * container must be killed for its timeout. */
static int status_for(const altar_handle_t *h, const altar_docker_info_t *info, double now, altar_status_t *pst,
                      bool *pkill) {
  char detail[400];
  const char *reason = NULL;
  altar_failure_t *f = NULL;
  altar_state_t state;
  const char *st = info->status;
  *pkill = false;
  if (!strcmp(st, "created")) {
    state = ALTAR_STATE_PENDING;
  } else if (!strcmp(st, "running") || !strcmp(st, "paused") || !strcmp(st, "restarting")) {
    state = ALTAR_STATE_RUNNING;
    if (info->timeout_s.set && info->started_at > 0 && now >= info->started_at + (double)info->timeout_s.v) {
      *pkill = true;
      state = ALTAR_STATE_FAILED;
      reason = ALTAR_REASON_TIMEOUT;
      snprintf(detail, sizeof detail, "container %.12s ran past timeout_s=%" PRId64 "; killed", info->id,
               info->timeout_s.v);
    }
  } else if (!strcmp(st, "exited")) {
    if (info->exit_code == 0) {
      state = ALTAR_STATE_SUCCEEDED;
    } else {
      state = ALTAR_STATE_FAILED;
      if (info->oom_killed) {
        reason = ALTAR_REASON_OOM_KILLED;
        snprintf(detail, sizeof detail,
                 "container %.12s was killed for exceeding its memory limit (exit code %" PRId64 ")", info->id,
                 info->exit_code);
      } else if (info->timeout_s.set && info->started_at > 0 && info->finished_at > 0 &&
                 info->finished_at - info->started_at >= (double)info->timeout_s.v) {
        /* Ran its whole limit and ended badly: killed for it (by an earlier
         * poll, maybe of another process). */
        reason = ALTAR_REASON_TIMEOUT;
        snprintf(detail, sizeof detail, "container %.12s ran past timeout_s=%" PRId64 " (exit code %" PRId64 ")",
                 info->id, info->timeout_s.v, info->exit_code);
      } else {
        snprintf(detail, sizeof detail, "container %.12s exited with code %" PRId64 "%s%s", info->id, info->exit_code,
                 info->error[0] ? ": " : "", info->error);
        f = altar_failure_for_exit(info->exit_code, detail);
        if (!f) return ALTAR_ENOMEM;
      }
    }
  } else if (!strcmp(st, "removing")) {
    state = ALTAR_STATE_FAILED;
    reason = ALTAR_REASON_CONTAINER_MISSING;
    snprintf(detail, sizeof detail, "container %.12s is being removed", info->id);
  } else {
    /* "dead" and anything newer: docker gave up on it without an exit code. */
    state = ALTAR_STATE_FAILED;
    reason = ALTAR_REASON_JOB_FAILED;
    snprintf(detail, sizeof detail, "container %.12s is in docker state '%s'%s%s", info->id, st,
             info->error[0] ? ": " : "", info->error);
  }
  if (reason && !f) {
    f = altar_failure_for_reason(reason, detail);
    if (!f) return ALTAR_ENOMEM;
  }
  int rc = altar_status_init(pst, h, state, f);
  if (rc < 0) altar_failure_free(f);
  return rc;
}

int altar__docker_poll(altar_backend_t *be, const altar_handle_t *handles, size_t n, altar_status_t *pstatuses,
                       altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  altar__docker_logs_prune_if_due(dk); /* a clock read; the walk once a minute */
  if (n == 0) return 0;
  const char **ids = calloc(n, sizeof *ids);
  const char **kills = calloc(n, sizeof *kills);
  altar_docker_info_t *infos = NULL;
  size_t ninfos = 0, nids = 0, nkills = 0;
  int rc = 0;
  if (!ids || !kills) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "poll: %zu handles", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    if (altar__docker_valid_id(handles[i].external_id)) ids[nids++] = handles[i].external_id;
  for (size_t off = 0; off < nids; off += POLL_BATCH) {
    size_t cnt = nids - off < POLL_BATCH ? nids - off : POLL_BATCH;
    if ((rc = inspect_batch(dk, ids + off, cnt, &infos, &ninfos, err)) < 0) goto out;
  }
  double now = altar_wall_s();
  for (size_t i = 0; i < n; i++) {
    const altar_handle_t *h = &handles[i];
    const altar_docker_info_t *info =
        altar__docker_valid_id(h->external_id) ? find_info(infos, ninfos, h->external_id) : NULL;
    if (!info) {
      char detail[200];
      snprintf(detail, sizeof detail, "container %.64s: not known to docker",
               h->external_id ? h->external_id : "(null)");
      altar_failure_t *f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, detail);
      if (!f || (rc = altar_status_init(&pstatuses[i], h, ALTAR_STATE_FAILED, f)) < 0) {
        altar_failure_free(f);
        rc = altar_error_set(err, ALTAR_ENOMEM, "poll: status");
        goto out;
      }
      continue;
    }
    bool kill = false;
    if ((rc = status_for(h, info, now, &pstatuses[i], &kill)) < 0) {
      rc = altar_error_set(err, rc, "poll: status");
      goto out;
    }
    if (pstatuses[i].state == ALTAR_STATE_FAILED && pstatuses[i].failure && !strcmp(info->status, "exited"))
      altar__docker_add_logs(dk, info->id, info->task_key, pstatuses[i].failure);
    if (kill) kills[nkills++] = info->id;
  }
  if (nkills) rc = kill_expired(dk, kills, nkills, err);
out:
  free(infos);
  free(ids);
  free(kills);
  return rc;
}
