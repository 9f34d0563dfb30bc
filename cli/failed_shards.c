/* A job's failed shards from the ledger. */
#include "failed_shards.h"
#include "altar/grow.h"

#include "altar/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void altar_cli_failed_add(failed_shards_t *fs, const altar_ledger_entry_t *e) {
  const altar_failure_t *f = e->rec.failure;
  if (e->rec.state != ALTAR_STATE_FAILED || !e->task_key) return;
  if (f && f->reason && (!strcmp(f->reason, ALTAR_REASON_SUPERSEDED) || !strcmp(f->reason, ALTAR_REASON_RELEASED)))
    return;
  if (ALTAR_GROW(fs->v, fs->cap, fs->n + 1)) {
    fs->oom = true;
    return;
  }
  failed_shard_t *s = &fs->v[fs->n];
  s->task_key = strdup(e->task_key);
  s->reason = strdup(f && f->reason ? f->reason : "unknown");
  s->detail = f && f->detail ? strdup(f->detail) : NULL;
  if (!s->task_key || !s->reason) {
    free(s->task_key);
    free(s->reason);
    free(s->detail);
    fs->oom = true;
    return;
  }
  fs->n++;
}

void altar_cli_failure_summary(const char *detail, char *buf, size_t size) {
  const char *d = detail ? detail : "";
  int line = (int)strcspn(d, "\n");
  int n = snprintf(buf, size, "%.*s", line > 200 ? 200 : line, d);
  /* The command's last word on stderr says more than its exit code. */
  const char *err = strstr(d, "\n--- stderr");
  if (n >= 0 && (size_t)n < size && err && (err = strchr(err + 1, '\n'))) {
    const char *end = strstr(err, "\n--- stdout");
    if (!end) end = err + strlen(err);
    while (end > err && (end[-1] == '\n' || end[-1] == ' ')) end--;
    const char *start = end;
    while (start > err + 1 && start[-1] != '\n') start--;
    if (end > start)
      snprintf(buf + n, size - (size_t)n, "%s%.*s", n ? " | " : "", (int)(end - start > 200 ? 200 : end - start),
               start);
  }
}

void altar_cli_failed_print(const failed_shards_t *fs, size_t max) {
  for (size_t i = 0; i < fs->n && i < max; i++) {
    const failed_shard_t *s = &fs->v[i];
    char why[512];
    altar_cli_failure_summary(s->detail, why, sizeof why);
    printf("  failed: %s %s%s%s\n", s->task_key, s->reason, why[0] ? ": " : "", why);
  }
  if (fs->n > max) printf("  failed: … and %zu more (altar status --json lists all)\n", fs->n - max);
  if (fs->n) printf("  (altar logs TASK_KEY shows a shard's output; altar logs JOB_ID --failed all of them)\n");
}

json_t *altar_cli_failed_json(const failed_shards_t *fs) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < fs->n; i++) {
    const failed_shard_t *s = &fs->v[i];
    json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "task_key", s->task_key, "reason", s->reason, "detail",
                                       s->detail ? json_string(s->detail) : json_null()));
  }
  return a;
}

void altar_cli_failed_clear(failed_shards_t *fs) {
  for (size_t i = 0; i < fs->n; i++) {
    free(fs->v[i].task_key);
    free(fs->v[i].reason);
    free(fs->v[i].detail);
  }
  free(fs->v);
  *fs = (failed_shards_t){0};
}
