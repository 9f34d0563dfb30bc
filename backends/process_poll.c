/* `process` poll: read each task's state from its directory. Any process
 * pointing at the same data root can do this, so a restarted worker adopts
 * the tasks an earlier one started. Per handle: one open and one
 * non-blocking flock of the `task` file, and one read of its tail once the
 * task has ended. */
#include "process_int.h"

#include "altar/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool reason_valid(const char *r) {
  size_t n = 0;
  for (; r[n]; n++)
    if (!((r[n] >= 'a' && r[n] <= 'z') || (r[n] >= '0' && r[n] <= '9') || r[n] == '_') || n >= 64) return false;
  return n > 0;
}

/* Parses a status file (untrusted: any process could have written it). */
static int parse_status(const char *text, altar_state_t *pstate, altar_failure_t **pfailure, const char *id,
                        altar_error_t *err) {
  const char *state = NULL, *reason = NULL, *detail = NULL, *code = NULL, *det = NULL;
  char *copy = strdup(text);
  if (!copy) return altar_error_set(err, ALTAR_ENOMEM, "process: poll: out of memory");
  char *save = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = '\0';
    const char *v = eq + 1;
    if (!strcmp(line, "state")) state = v;
    else if (!strcmp(line, "reason")) reason = v;
    else if (!strcmp(line, "detail")) detail = v;
    else if (!strcmp(line, "exit_code")) code = v;
    else if (!strcmp(line, "deterministic")) det = v;
  }
  int rc = 0;
  if (state && !strcmp(state, "succeeded")) {
    *pstate = ALTAR_STATE_SUCCEEDED;
  } else if (state && !strcmp(state, "failed") && reason && reason_valid(reason)) {
    *pstate = ALTAR_STATE_FAILED;
    bool d = det ? !strcmp(det, "1") : altar_reason_deterministic(reason);
    altar_failure_t *f = altar_failure_new(reason, detail && *detail ? detail : NULL, d);
    if (f && code) {
      char *end = NULL;
      errno = 0;
      long long c = strtoll(code, &end, 10);
      if (!errno && end && !*end && c >= -1000000 && c <= 1000000) f->exit_code = (altar_opt_i64_t){true, c};
    }
    if (!f) rc = altar_error_set(err, ALTAR_ENOMEM, "process: poll: out of memory");
    *pfailure = f;
  } else {
    /* A status we cannot read is not a result we may report as one. */
    *pstate = ALTAR_STATE_FAILED;
    *pfailure = altar_failure_new(ALTAR_REASON_JOB_FAILED, "status file of the task is malformed", false);
    if (!*pfailure) rc = altar_error_set(err, ALTAR_ENOMEM, "process: poll: out of memory");
    (void)id;
  }
  free(copy);
  return rc;
}

static int missing(altar_state_t *pstate, altar_failure_t **pfailure, const char *why, altar_error_t *err) {
  *pstate = ALTAR_STATE_FAILED;
  *pfailure = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, why);
  return *pfailure ? 0 : altar_error_set(err, ALTAR_ENOMEM, "process: poll: out of memory");
}

/* The task key on the task file's first line ("task_key=<key>"), from the
 * tail when that holds the whole file, else read. */
static bool read_key(int fd, const char *tail, bool whole, char key[ALTAR_TASK_KEY_LEN + 1]) {
  char buf[16 + ALTAR_TASK_KEY_LEN];
  const char *head = buf;
  ssize_t n;
  if (whole) {
    head = tail;
    n = (ssize_t)strnlen(tail, sizeof buf);
  } else {
    n = pread(fd, buf, sizeof buf, 0);
  }
  size_t pre = strlen("task_key=");
  if (n < (ssize_t)(pre + ALTAR_TASK_KEY_LEN + 1) || memcmp(head, "task_key=", pre) ||
      head[pre + ALTAR_TASK_KEY_LEN] != '\n')
    return false;
  for (size_t i = 0; i < ALTAR_TASK_KEY_LEN; i++) {
    char c = head[pre + i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    key[i] = c;
  }
  key[ALTAR_TASK_KEY_LEN] = '\0';
  return true;
}

int altar__proc_probe(const altar_process_t *p, const char *id, altar_state_t *pstate, altar_failure_t **pfailure,
                      altar_error_t *err) {
  char dir[ALTAR_PATH_BUF], path[ALTAR_PATH_BUF + 16];
  *pfailure = NULL;
  *pstate = ALTAR_STATE_FAILED;
  if (!id || !altar__proc_id_valid(id)) return missing(pstate, pfailure, "not a task id of the process backend", err);
  int rc = altar__proc_task_dir(p, id, dir, sizeof dir, err);
  if (rc < 0) return rc;
  snprintf(path, sizeof path, "%s/task", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    struct stat st;
    if (stat(dir, &st) < 0) return missing(pstate, pfailure, "task directory is gone", err);
    return missing(pstate, pfailure, "task directory has no task file", err);
  }
  if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
    close(fd);
    *pstate = ALTAR_STATE_RUNNING; /* the supervisor holds it: alive */
    return 0;
  }
  /* The lock is free: the supervisor is gone, and whatever it wrote is all
   * it will ever write. */
  bool whole = false;
  char *tail = altar__proc_read_tail(fd, &whole);
  char key[ALTAR_TASK_KEY_LEN + 1];
  bool has_key = tail && read_key(fd, tail, whole, key);
  close(fd); /* also drops our shared lock */
  if (!tail) return missing(pstate, pfailure, "task file unreadable", err);
  const char *mark = NULL;
  for (const char *q = strstr(tail, ALTAR_PROC_STATUS_MARK); q; q = strstr(q + 1, ALTAR_PROC_STATUS_MARK))
    if (q == tail || q[-1] == '\n') mark = q;
  if (!mark) {
    free(tail);
    return missing(pstate, pfailure, "supervisor exited without recording a status", err);
  }
  rc = parse_status(mark + strlen(ALTAR_PROC_STATUS_MARK), pstate, pfailure, id, err);
  free(tail);
  char logs[ALTAR_PATH_BUF];
  if (has_key) {
    altar__proc_log_dir(p, key, logs, sizeof logs);
    altar__proc_redact_logs(logs); /* what stays on disk holds no secret either */
  }
  if (rc == 0 && *pfailure) {
    /* The evidence: what the command last wrote. */
    char *d = altar__proc_detail_with_logs((*pfailure)->detail, has_key ? logs : dir);
    if (d) {
      free((*pfailure)->detail);
      (*pfailure)->detail = d;
    }
  }
  return rc;
}

int altar__proc_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  altar__proc_reap(p);
  /* A clock read per poll; the walk of the kept output once a minute. */
  struct timespec mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  altar__proc_logs_prune_if_due(p, (double)mono.tv_sec + mono.tv_nsec / 1e9);
  for (size_t i = 0; i < n; i++) {
    altar_state_t state = ALTAR_STATE_RUNNING;
    altar_failure_t *f = NULL;
    /* Our own supervisor, not reaped above, is alive: no file to read (a
     * short task was probed several times before it ended). */
    bool ours = hs[i].external_id && altar__proc_child_running(p, hs[i].external_id);
    int rc = ours ? 0 : altar__proc_probe(p, hs[i].external_id, &state, &f, err);
    if (rc < 0) return rc;
    rc = altar_status_init(&pst[i], &hs[i], state, f);
    if (rc < 0) return altar_error_set(err, rc, "process: poll: out of memory"); /* f freed */
    if (hs[i].external_id && altar__proc_id_valid(hs[i].external_id)) {
      if (altar_state_terminal(state)) altar__proc_live_remove(p, hs[i].external_id);
      else (void)altar__proc_live_add(p, hs[i].external_id); /* adopted */
    }
  }
  return 0;
}
