/* Search and filters of the dashboard's lists (shard_filter.h). */
#include "dashboard/shard_filter.h"

#include <string.h>

static const char *const shard_states[] = {"pending", "running", "succeeded", "failed", "cancelled", "waiting", NULL};
static const char *const job_states[] = {"running", "waiting", "fired", "dead_lettered", "cancelled", "pending", NULL};

static bool one_of(const char *s, const char *const *set) {
  for (size_t i = 0; set[i]; i++)
    if (!strcmp(s, set[i])) return true;
  return false;
}

/* A filter's value: present means non-empty and bounded. */
static int check_value(const char *name, const char *s, altar_error_t *err) {
  if (!s) return ALTAR_OK;
  size_t n = strnlen(s, ALTAR_SHARD_FILTER_VALUE_MAX + 1);
  if (!n || n > ALTAR_SHARD_FILTER_VALUE_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "%s: expected 1 to %d bytes", name, ALTAR_SHARD_FILTER_VALUE_MAX);
  return ALTAR_OK;
}

int altar__shard_filter_parse(const altar_fleet_query_t *q, bool for_jobs, altar_shard_filter_t *f,
                              altar_error_t *err) {
  *f = (altar_shard_filter_t){0};
  if (!q) return ALTAR_OK;
  int rc;
  if ((rc = check_value("state", q->state, err)) || (rc = check_value("kind", q->kind, err)) ||
      (rc = check_value("label", q->label, err)) || (rc = check_value("worker", q->worker, err)))
    return rc;
  const char *const *states = for_jobs ? job_states : shard_states;
  if (q->state && !one_of(q->state, states))
    return altar_error_set(err, ALTAR_EINVAL, "state: '%s' is not one of %s", q->state,
                           for_jobs ? "running, waiting, fired, dead_lettered, cancelled, pending"
                                    : "pending, running, succeeded, failed, cancelled, waiting");
  if (q->label) {
    const char *eq = strchr(q->label, '=');
    if (!eq || eq == q->label || strchr(q->label, '\n'))
      return altar_error_set(err, ALTAR_EINVAL, "label: expected KEY=VALUE, got '%s'", q->label);
  }
  f->state = q->state;
  f->kind = q->kind;
  f->label = q->label;
  f->worker = q->worker;
  return ALTAR_OK;
}

bool altar__shard_filter_any(const altar_shard_filter_t *f) { return f->state || altar__shard_filter_by_shard(f); }

bool altar__shard_filter_by_shard(const altar_shard_filter_t *f) { return f->kind || f->label || f->worker; }

/* Whether "KEY=VALUE" is one of the lines of labels. */
static bool has_label(const char *labels, const char *label) {
  size_t n = strlen(label);
  for (const char *p = labels; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len == n && !memcmp(p, label, n)) return true;
    p = nl ? nl + 1 : NULL;
  }
  return false;
}

bool altar__shard_filter_match(const altar_shard_filter_t *f, const char *state, const char *kind, const char *labels,
                               const char *worker) {
  if (f->state && state && strcmp(f->state, state)) return false;
  if (f->kind && (!kind || strcmp(f->kind, kind))) return false;
  if (f->worker && (!worker || strcmp(f->worker, worker))) return false;
  return !f->label || has_label(labels, f->label);
}
