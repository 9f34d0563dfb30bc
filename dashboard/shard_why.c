/* Why a shard is not running (shard_why.h): the decision and its words. */
#include "dashboard/shard_why.h"

#include "altar/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[ALTAR_WHY_COUNT] = {
    [ALTAR_WHY_NONE] = "none",
    [ALTAR_WHY_CANCELLED] = "cancelled",
    [ALTAR_WHY_GROUP_HELD] = "group_held",
    [ALTAR_WHY_LEASE] = "lease",
    [ALTAR_WHY_STARTING] = "starting",
    [ALTAR_WHY_BACKOFF] = "backoff",
    [ALTAR_WHY_FORWARDED] = "forwarded",
    [ALTAR_WHY_NO_WORKER] = "no_worker",
    [ALTAR_WHY_BEHIND] = "behind",
    [ALTAR_WHY_NO_FREE_SLOT] = "no_free_slot",
    [ALTAR_WHY_QUEUED] = "queued",
};

const char *altar__why_name(altar_why_reason_t r) { return (unsigned)r < ALTAR_WHY_COUNT ? names[r] : "none"; }

/* A shard on its jobs topic (no record, or a record no worker holds). */
static altar_why_reason_t queue_reason(const altar_why_facts_t *f) {
  if (f->forwarded_by) return ALTAR_WHY_FORWARDED;
  if (f->pool_workers == 0) return ALTAR_WHY_NO_WORKER;
  if (f->shards_ahead > 0) return ALTAR_WHY_BEHIND;
  if (f->pool_free == 0) return ALTAR_WHY_NO_FREE_SLOT;
  return ALTAR_WHY_QUEUED;
}

altar_why_reason_t altar__why_decide(const altar_why_facts_t *f) {
  bool cancelled =
      f->failure_reason && f->state == ALTAR_STATE_FAILED && !strcmp(f->failure_reason, ALTAR_REASON_CANCELLED);
  /* A cancelled group's shards that had not finished will not run; one that
   * runs now is being stopped and says so once it has. */
  if (cancelled || (f->group_cancelled && f->state != ALTAR_STATE_SUCCEEDED && f->state != ALTAR_STATE_RUNNING &&
                    f->state != ALTAR_STATE_FAILED))
    return ALTAR_WHY_CANCELLED;
  bool finished = f->state == ALTAR_STATE_SUCCEEDED || f->state == ALTAR_STATE_FAILED;
  if (finished) return f->held_error && !f->consumed ? ALTAR_WHY_GROUP_HELD : ALTAR_WHY_NONE;
  if (f->state == ALTAR_STATE_RUNNING) return f->run_worker && !f->run_worker_live ? ALTAR_WHY_LEASE : ALTAR_WHY_NONE;
  if (f->state == ALTAR_STATE_PENDING) {
    if (f->retry_due > f->now) return ALTAR_WHY_BACKOFF;
    if (f->run_worker) return f->run_worker_live ? ALTAR_WHY_STARTING : ALTAR_WHY_LEASE;
  }
  return queue_reason(f);
}

json_t *altar__why_json(const altar_why_facts_t *f) {
  altar_why_reason_t r = altar__why_decide(f);
  if (r == ALTAR_WHY_NONE) return json_null();
  json_t *o = json_pack("{s:s}", "reason", altar__why_name(r));
  if (!o) return NULL;
  int bad = 0;
  switch (r) {
  case ALTAR_WHY_GROUP_HELD:
    bad |= json_object_set_new(o, "group", f->group ? json_string(f->group) : json_null());
    bad |= json_object_set_new(o, "error", json_string(f->held_error));
    break;
  case ALTAR_WHY_LEASE:
  case ALTAR_WHY_STARTING: bad |= json_object_set_new(o, "worker", json_string(f->run_worker)); break;
  case ALTAR_WHY_BACKOFF: bad |= json_object_set_new(o, "until", json_real(f->retry_due)); break;
  case ALTAR_WHY_FORWARDED: bad |= json_object_set_new(o, "by", json_string(f->forwarded_by)); break;
  case ALTAR_WHY_BEHIND:
    bad |= json_object_set_new(o, "jobs_ahead", json_integer(f->jobs_ahead > 0 ? f->jobs_ahead : 0));
    bad |= json_object_set_new(o, "shards_ahead", json_integer(f->shards_ahead));
    bad |= json_object_set_new(o, "pool", f->pool ? json_string(f->pool) : json_null());
    break;
  case ALTAR_WHY_NO_WORKER:
  case ALTAR_WHY_NO_FREE_SLOT:
  case ALTAR_WHY_QUEUED: bad |= json_object_set_new(o, "pool", f->pool ? json_string(f->pool) : json_null()); break;
  default: break;
  }
  if (bad) {
    json_decref(o);
    return NULL;
  }
  return o;
}

void altar__why_text(const json_t *j, char *out, size_t outsz) {
  const char *r = json_string_value(json_object_get(j, "reason"));
  const char *pool = json_string_value(json_object_get(j, "pool"));
  const char *worker = json_string_value(json_object_get(j, "worker"));
  if (!r) {
    snprintf(out, outsz, "running or done");
  } else if (!strcmp(r, "cancelled")) {
    snprintf(out, outsz, "cancelled: its job was cancelled");
  } else if (!strcmp(r, "group_held")) {
    snprintf(out, outsz, "group_held: group %s is held by its rule's error: %s",
             json_string_value(json_object_get(j, "group")) ? json_string_value(json_object_get(j, "group")) : "?",
             json_string_value(json_object_get(j, "error")) ? json_string_value(json_object_get(j, "error")) : "?");
  } else if (!strcmp(r, "lease")) {
    snprintf(out, outsz, "lease: held by worker %s, which went silent; taken over after its lease times out",
             worker ? worker : "?");
  } else if (!strcmp(r, "starting")) {
    snprintf(out, outsz, "starting: submitted by worker %s, not running yet", worker ? worker : "?");
  } else if (!strcmp(r, "backoff")) {
    time_t t = (time_t)json_number_value(json_object_get(j, "until"));
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(out, outsz, "backoff: retry due at %s", when);
  } else if (!strcmp(r, "forwarded")) {
    const char *by = json_string_value(json_object_get(j, "by"));
    snprintf(out, outsz, "forwarded: by %s (no free slot there) to a worker with one", by ? by : "?");
  } else if (!strcmp(r, "no_worker")) {
    snprintf(out, outsz, "no_worker: no worker serves pool %s", pool ? pool : "?");
  } else if (!strcmp(r, "behind")) {
    json_int_t jobs = json_integer_value(json_object_get(j, "jobs_ahead"));
    json_int_t shards = json_integer_value(json_object_get(j, "shards_ahead"));
    snprintf(out, outsz, "behind: %lld earlier job%s (%lld shard%s) ahead in its partition of pool %s", (long long)jobs,
             jobs == 1 ? "" : "s", (long long)shards, shards == 1 ? "" : "s", pool ? pool : "?");
  } else if (!strcmp(r, "no_free_slot")) {
    snprintf(out, outsz, "no_free_slot: every worker of pool %s is busy", pool ? pool : "?");
  } else {
    snprintf(out, outsz, "%s: waiting for a worker of pool %s", r, pool ? pool : "?");
  }
}

/* Each topic partition's messages together, in offset order. */
static int by_position(const void *a, const void *b) {
  const altar_why_waiting_t *x = a, *y = b;
  if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
  int c = x->topic == y->topic ? 0 : strcmp(x->topic, y->topic);
  if (c) return c;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void altar__why_ahead(altar_why_waiting_t *v, size_t n, const char *job) {
  if (n) qsort(v, n, sizeof *v, by_position);
  int64_t others = 0, runs = 0;
  const char *last = NULL;
  for (size_t i = 0; i < n; i++) {
    if (i && (v[i].partition != v[i - 1].partition || strcmp(v[i].topic, v[i - 1].topic)))
      others = runs = 0, last = NULL; /* the next topic partition */
    if (!strcmp(v[i].job, job)) {
      v[i].shards_ahead = others;
      v[i].jobs_ahead = runs;
      continue;
    }
    v[i].shards_ahead = v[i].jobs_ahead = -1;
    others++;
    if (!last || strcmp(last, v[i].job)) runs++;
    last = v[i].job;
  }
}

const altar_why_waiting_t *altar__why_waiting_find(const altar_why_waiting_t *v, size_t n, const char *topic,
                                                   int32_t partition, int64_t offset) {
  if (!topic || !n) return NULL;
  altar_why_waiting_t key = {.topic = topic, .partition = partition, .offset = offset};
  return bsearch(&key, v, n, sizeof key, by_position);
}
