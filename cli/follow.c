/* Following a job: its shards on the status topic, its groups on the ready
 * and dead topics; progress, shards waiting for a pool, late shards. */
#include "follow.h"
#include "progress_bar.h"
#include "cli.h"
#include "altar/grow.h"

#include "failed_shards.h"

#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/pools.h"
#include "fleet_common.h"
#include "dashboard_cli.h"
#include "dashboard/shard_why.h"

#include <jansson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_shard(const void *a, const void *b) {
  return strcmp(((const follow_shard_t *)a)->task_key, ((const follow_shard_t *)b)->task_key);
}

static char *join2(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s\x1f%s", a, b);
  return s;
}

int altar_cli_follow_mark(altar_config_t *cfg, expect_t *x) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  altar_topic_list_t *tl = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, cfg->topics.status, 10000, &tl, &err);
  if (rc == ALTAR_OK && tl->n_topics) {
    size_t np = tl->topics[0].n_partitions;
    x->status_from = calloc(np ? np : 1, sizeof *x->status_from);
    x->status_parts = calloc(np ? np : 1, sizeof *x->status_parts);
    if (!x->status_from || !x->status_parts) rc = ALTAR_ENOMEM;
    for (size_t i = 0; !rc && i < np; i++) {
      x->status_parts[i] = tl->topics[0].partitions[i].partition;
      x->status_from[i] = tl->topics[0].partitions[i].end;
    }
    if (!rc) x->n_status_parts = np;
  } else if (rc == ALTAR_ENOTFOUND) {
    rc = ALTAR_OK; /* nothing yet: read from the beginning */
  }
  altar_topic_list_free(tl);
  altar_transport_close(t);
  if (rc) fprintf(stderr, "altar submit --wait: reading the status topic: %s\n", err.msg);
  return rc ? -1 : 0;
}

/* What each group (up to n of them) gathers while the job runs. */
static int alloc_per_group(expect_t *x, size_t n) {
  x->done = calloc(n ? n : 1, sizeof *x->done);
  x->settled_ts = calloc(n ? n : 1, sizeof *x->settled_ts);
  x->members = calloc(n ? n : 1, sizeof *x->members);
  x->n_members = calloc(n ? n : 1, sizeof *x->n_members);
  return x->done && x->settled_ts && x->members && x->n_members ? 0 : -1;
}

static void shard_names_free(follow_shard_t *s) {
  free(s->group);
  free(s->topic);
  free(s->pool);
}

/* Keys sorted and unique, so each arriving event is one binary search;
 * shards sorted by task, a task listed twice (the same spec submitted
 * twice, or recorded under several runs) counted once. */
static void sort_unique(expect_t *x) {
  if (x->n) qsort(x->keys, x->n, sizeof *x->keys, cmp_key); /* keys is NULL for a job with no shard */
  size_t u = 0;
  for (size_t i = 0; i < x->n; i++) {
    if (u && !strcmp(x->keys[u - 1], x->keys[i])) free(x->keys[i]);
    else x->keys[u++] = x->keys[i];
  }
  x->n = u;
  if (x->n_shards) qsort(x->shards, x->n_shards, sizeof *x->shards, cmp_shard);
  u = 0;
  for (size_t i = 0; i < x->n_shards; i++) {
    if (u && !strcmp(x->shards[u - 1].task_key, x->shards[i].task_key)) shard_names_free(&x->shards[i]);
    else x->shards[u++] = x->shards[i];
  }
  x->n_shards = u;
  x->shards_total = u;
}

int altar_cli_expect_build(expect_t *x, const altar_group_specs_t *groups, const char *jobs_topic,
                           const altar_spec_t *specs, size_t n) {
  x->keys = calloc(n ? n : 1, sizeof *x->keys);
  x->shards = calloc(n ? n : 1, sizeof *x->shards);
  if (!x->keys || !x->shards || alloc_per_group(x, n)) return -1;
  x->shards_total = n;
  for (size_t i = 0; i < n; i++) {
    const altar_group_spec_t *g = altar_group_specs_find(groups, specs[i].kind);
    if (!g) {
      fprintf(stderr, "altar submit --wait: kind '%s' has no group spec in the configuration, so it never fires\n",
              specs[i].kind);
      return -1;
    }
    altar_handle_t h = {0};
    altar_strmap_copy(&h.labels, &specs[i].labels);
    char *gk = altar_group_by_key(&g->group_by, &h);
    altar_handle_clear(&h);
    if (!gk) return -1;
    char *k = join2(specs[i].kind, gk);
    free(gk);
    if (!k) return -1;
    x->keys[x->n++] = k;
    follow_shard_t *s = &x->shards[x->n_shards];
    altar_error_t e = {0};
    char topic[512];
    if (altar_spec_identity(&specs[i], s->task_key, &e) ||
        altar_pool_topic(jobs_topic, specs[i].resources.gpu, topic, sizeof topic, &e)) {
      fprintf(stderr, "altar submit --wait: %s\n", e.msg);
      return -1;
    }
    s->state = -1;
    if (!(s->group = strdup(k)) || !(s->topic = strdup(topic)) ||
        !(s->pool = strdup(specs[i].resources.gpu ? specs[i].resources.gpu : ALTAR_POOL_CPU)))
      return -1;
    x->n_shards++;
  }
  sort_unique(x);
  return 0;
}

void altar_cli_expect_clear(expect_t *x) {
  for (size_t i = 0; i < x->n; i++) {
    free(x->keys[i]);
    for (size_t j = 0; x->members && x->members[i] && j < x->n_members[i]; j++) free(x->members[i][j]);
    if (x->members) free(x->members[i]);
  }
  for (size_t i = 0; i < x->n_shards; i++) {
    free(x->shards[i].group);
    free(x->shards[i].run);
    free(x->shards[i].topic);
    free(x->shards[i].pool);
    free(x->shards[i].reason);
    free(x->shards[i].why);
  }
  free(x->keys);
  free(x->done);
  free(x->settled_ts);
  free(x->members);
  free(x->n_members);
  free(x->shards);
  free(x->status_from);
  free(x->status_parts);
  for (size_t i = 0; i < x->n_events; i++) altar_group_event_clear(&x->events[i]);
  free(x->events);
  for (size_t i = 0; i < x->n_pending; i++) altar_group_event_clear(&x->pending[i]);
  free(x->pending);
  altar_arena_free(&x->scratch);
  memset(x, 0, sizeof *x);
}

static bool terminal(const follow_shard_t *s) {
  return !s->released && (s->state == ALTAR_STATE_SUCCEEDED || s->state == ALTAR_STATE_FAILED);
}

static ssize_t key_index(const expect_t *x, const char *k) {
  char **hit = x->n ? bsearch(&k, x->keys, x->n, sizeof *x->keys, cmp_key) : NULL;
  return hit ? hit - x->keys : -1;
}

/* Terminal after its group settled, in no group event: nothing consumed it
 * into an outcome of its group. "After" by event time (the group event
 * carries the ts of the status event that settled it). */
static bool is_late(const expect_t *x, const follow_shard_t *s) {
  ssize_t gi = key_index(x, s->group);
  if (gi < 0 || !x->done[gi] || !terminal(s) || !s->run || s->ts <= x->settled_ts[gi]) return false;
  const char *r = s->run;
  return !(x->n_members[gi] && bsearch(&r, x->members[gi], x->n_members[gi], sizeof(char *), cmp_key));
}

/* Counts s in (sign 1) or out of (-1) the finished shards, by its state. */
static void tally(expect_t *x, const follow_shard_t *s, int sign) {
  if (!terminal(s)) return;
  size_t *c = s->state == ALTAR_STATE_SUCCEEDED ? &x->shards_done : &x->shards_failed;
  *c = sign > 0 ? *c + 1 : *c - 1;
}

/* The finished shards counted afresh; on_status keeps the counts since, so
 * following a job costs the same per message however many shards it has. */
static void count_shards(expect_t *x) {
  x->shards_done = x->shards_failed = 0;
  for (size_t i = 0; i < x->n_shards; i++) tally(x, &x->shards[i], 1);
}

static void progress(const expect_t *x, double t0, bool tty, bool final) {
  double el = (double)time(NULL) - t0;
  if (tty) {
    /* Fitted to the terminal's width (read each time: it may be resized),
     * and the rest of the line erased, so it redraws in place. */
    char line[512];
    altar_cli_progress_line(line, sizeof line, altar_cli_terminal_columns(STDERR_FILENO), x->shards_done,
                            x->shards_failed, x->shards_total, x->fired + x->dead, x->n, x->dead, (int)el);
    fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
  }
}

/* The line a wait ends on, after the bar, on a terminal or not: what the job
 * came to, in the words a person reads first. */
static void summary(const char *run_id, const expect_t *x, double t0, int rc, size_t cancelled) {
  int el = (int)((double)time(NULL) - t0);
  if (el < 0) el = 0;
  size_t fin = x->shards_done + x->shards_failed, settled = x->fired + x->dead;
  const char *how = rc == 0 ? "done" : rc == 3 ? "still running (timed out)" : rc == 4 ? "cancelled" : "failed";
  fprintf(stderr,
          "altar submit --wait: job %s %s: %zu of %zu shard%s finished (%zu succeeded, %zu failed); "
          "%zu of %zu group%s fired, %zu dead-lettered, %zu cancelled, %zu open; %02d:%02d\n",
          run_id, how, fin, x->shards_total, ALTAR_CLI_PLURAL(x->shards_total), x->shards_done, x->shards_failed,
          x->fired, x->n, ALTAR_CLI_PLURAL(x->n), x->dead > cancelled ? x->dead - cancelled : 0, cancelled,
          x->n > settled ? x->n - settled : 0, el / 60, el % 60);
}

follow_shard_t *altar_cli_expect_find(const expect_t *x, const char *task_key) {
  follow_shard_t key;
  snprintf(key.task_key, sizeof key.task_key, "%s", task_key);
  return x->n_shards ? bsearch(&key, x->shards, x->n_shards, sizeof *x->shards, cmp_shard) : NULL;
}

static void on_status(expect_t *x, const altar_status_event_t *ev) {
  if (!ev->task_key || !ev->handle.backend || !ev->handle.external_id) return;
  follow_shard_t *s = altar_cli_expect_find(x, ev->task_key);
  if (!s) return;
  char *run = join2(ev->handle.backend, ev->handle.external_id);
  if (!run) return;
  free(s->run);
  s->run = run;
  s->ts = ev->ts;
  tally(x, s, -1);
  s->released = ev->event == ALTAR_EV_RELEASED;
  s->state = ev->event == ALTAR_EV_SUBMITTED ? ALTAR_STATE_PENDING : (int)ev->state;
  tally(x, s, 1);
  free(s->reason);
  s->reason =
      ev->state == ALTAR_STATE_FAILED && ev->failure && ev->failure->reason ? strdup(ev->failure->reason) : NULL;
  free(s->why);
  s->why = NULL;
  if (s->reason && ev->failure->detail) {
    char why[512];
    altar_cli_failure_summary(ev->failure->detail, why, sizeof why);
    if (why[0]) s->why = strdup(why);
  }
}

/* A group event of the job: 1 when it settled one of its groups now. */
static int on_group(expect_t *x, const altar_group_event_t *g, const char *run_id) {
  const char *jid = g->n_shards ? altar_strmap_get(&g->shards[0].labels, ALTAR_JOB_ID_LABEL) : NULL;
  if (!jid || strcmp(jid, run_id)) return 0;
  char *k = join2(g->kind, g->group_key);
  ssize_t i = k ? key_index(x, k) : -1;
  free(k);
  if (i < 0 || x->done[i]) return 0;
  x->done[i] = true;
  x->settled_ts[i] = g->ts;
  x->members[i] = calloc(g->n_shards, sizeof(char *));
  for (size_t j = 0; x->members[i] && j < g->n_shards; j++) {
    char *r = join2(g->shards[j].backend ? g->shards[j].backend : "",
                    g->shards[j].external_id ? g->shards[j].external_id : "");
    if (r) x->members[i][x->n_members[i]++] = r;
  }
  if (x->members[i]) qsort(x->members[i], x->n_members[i], sizeof(char *), cmp_key);
  if (g->event == ALTAR_GROUP_FIRED) x->fired++;
  else x->dead++;
  return 1;
}

/* One message of the status, ready or dead topic applied to x. A group
 * event is decoded into *g (the caller clears it); true when it settled one
 * of x's groups. */
static bool apply_msg(expect_t *x, const char *status_topic, const altar_msg_t *m, const char *run_id,
                      altar_group_event_t *g) {
  if (!m->value) return false;
  altar_error_t de = {0};
  if (!strcmp(m->topic, status_topic)) {
    /* Events as our encoder writes them are read in one pass, the spec
     * checked but not built (following a job reads every status event). */
    altar_status_event_t ev = {0};
    if (altar_decode_status_canonical(m->value, m->value_len, &x->scratch, ALTAR_DECODE_SPEC_BYTES, &ev) == ALTAR_OK) {
      on_status(x, &ev);
      altar_arena_reset(&x->scratch);
      return false;
    }
    if (altar_decode_status(m->value, m->value_len, &ev, &de) == ALTAR_OK) on_status(x, &ev);
    altar_status_event_clear(&ev);
    return false;
  }
  if (altar_decode_group(m->value, m->value_len, g, &de) == ALTAR_OK) {
    if (!g->pages) return on_group(x, g, run_id);
    /* A wide group's head: kept until its pages complete the member list. */
    const char *jid = g->n_shards ? altar_strmap_get(&g->shards[0].labels, ALTAR_JOB_ID_LABEL) : NULL;
    if (!jid || strcmp(jid, run_id) || ALTAR_GROW(x->pending, x->cap_pending, x->n_pending + 1)) return false;
    for (size_t i = 0; i < x->n_pending; i++)
      if (!strcmp(x->pending[i].event_id, g->event_id)) return false; /* a copy of one read already */
    x->pending[x->n_pending++] = *g;
    memset(g, 0, sizeof *g);
    return false;
  }
  altar_group_event_t p = {0};
  bool settled = false;
  if (altar_decode_group_page(m->value, m->value_len, &p, &de) == ALTAR_OK) {
    for (size_t i = 0; i < x->n_pending; i++) {
      if (strcmp(x->pending[i].event_id, p.event_id)) continue;
      if (altar_group_event_take_page(&x->pending[i], &p) == 1 && x->pending[i].page == x->pending[i].pages) {
        altar_group_event_clear(g);
        *g = x->pending[i];
        x->pending[i] = x->pending[--x->n_pending];
        settled = on_group(x, g, run_id);
      }
      break;
    }
  }
  altar_group_event_clear(&p);
  return settled;
}

/* Shards with no event yet, per pool topic nobody in the workers' group
 * reads: said once per change. */
static void report_waiting(altar_transport_t *t, expect_t *x, size_t *plast) {
  size_t total = 0;
  for (size_t i = 0; i < x->n_shards; i++) {
    follow_shard_t *s = &x->shards[i];
    if (s->state != -1) continue;
    bool first = true; /* one look-up per topic */
    for (size_t j = 0; j < i && first; j++) first = x->shards[j].state != -1 || strcmp(x->shards[j].topic, s->topic);
    if (!first) continue;
    size_t members = 0, waiting = 0;
    altar_error_t e = {0};
    if (altar_transport_topic_members(t, ALTAR_WORKER_GROUP, s->topic, 5000, &members, &e) != ALTAR_OK || members)
      continue;
    for (size_t j = i; j < x->n_shards; j++)
      waiting += x->shards[j].state == -1 && !strcmp(x->shards[j].topic, s->topic);
    total += waiting;
    if (total != *plast)
      fprintf(stderr, "%s%zu shard%s waiting for pool %s; no worker serves it (topic %s)\n", isatty(2) ? "\n" : "",
              waiting, waiting == 1 ? "" : "s", s->pool, s->topic);
  }
  *plast = total;
}

/* At a timeout: why the shards still open wait (the fleet view's reasons,
 * read once), as counts and the first few shards. */
#define FOLLOW_WHY_SHARDS 5
static void report_why(altar_config_t *cfg, const char *run_id) {
  json_t *why = NULL;
  altar_error_t err = {0};
  if (altar_cli_job_why(cfg, run_id, &why, &err)) {
    fprintf(stderr, "altar submit --wait: why they wait is not known: %s\n", err.msg);
    return;
  }
  json_int_t total = json_integer_value(json_object_get(why, "total"));
  if (total) {
    fprintf(stderr, "altar submit --wait: %lld shard%s not running:", (long long)total, ALTAR_CLI_PLURAL(total));
    const char *k;
    json_t *n;
    bool first = true;
    json_object_foreach(json_object_get(why, "counts"), k, n) {
      fprintf(stderr, "%s %lld %s", first ? "" : ",", (long long)json_integer_value(n), k);
      first = false;
    }
    fprintf(stderr, "\n");
    json_t *shards = json_object_get(why, "shards");
    for (size_t i = 0; i < json_array_size(shards) && i < FOLLOW_WHY_SHARDS; i++) {
      char line[512];
      altar__why_text(json_object_get(json_array_get(shards, i), "why"), line, sizeof line);
      fprintf(stderr, "  %.12s %s\n", json_string_value(json_object_get(json_array_get(shards, i), "task_key")), line);
    }
  }
  json_decref(why);
}

/* Once the events at hand are read, the next ones are let gather for a
 * moment before the follower waits again. Woken once per event (three per
 * one-shard group: two status events and the group event), `submit --wait`
 * switched 3,000 times and spent 60-70 ms of CPU per 1,000 groups, on the
 * cores the fleet's tasks run on. A group's news reaches the user at most
 * this much later. */
#define FOLLOW_GATHER_MS 10

static void gather_pause(void) {
  struct timespec ts = {0, FOLLOW_GATHER_MS * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int altar_cli_follow(altar_config_t *cfg, const char *run_id, expect_t *x, long timeout_s, altar_cli_group_cb cb,
                     void *cb_ctx) {
  size_t cancelled = 0; /* groups settled by `altar cancel` */
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  altar_transport_t *probe = t ? altar_cli_open_transport(cfg, NULL) : NULL;
  if (!t || !probe) {
    altar_transport_close(t);
    return 2;
  }
  const char *topics[] = {cfg->topics.ready, cfg->topics.dead, cfg->topics.status};
  size_t cap = 64, ntp = 0;
  altar_tp_t *tps = malloc(cap * sizeof *tps);
  for (size_t k = 0; tps && k < 3; k++) {
    altar_topic_list_t *tl = NULL;
    altar_error_t err = {0};
    if (altar_transport_list_topics(t, topics[k], 10000, &tl, &err) == ALTAR_OK && tl->n_topics)
      for (size_t p = 0; p < tl->topics[0].n_partitions; p++) {
        if (ntp == cap) {
          altar_tp_t *nt = realloc(tps, (cap *= 2) * sizeof *tps);
          if (!nt) break;
          tps = nt;
        }
        int32_t part = tl->topics[0].partitions[p].partition;
        int64_t from = ALTAR_OFFSET_BEGINNING;
        for (size_t q = 0; k == 2 && q < x->n_status_parts; q++)
          if (x->status_parts[q] == part) from = x->status_from[q];
        tps[ntp++] = (altar_tp_t){topics[k], part, from};
      }
    altar_topic_list_free(tl);
  }
  altar_error_t err = {0};
  if (!tps || !ntp || altar_transport_assign(t, tps, ntp, &err)) {
    fprintf(stderr, "altar submit --wait: cannot read the status/ready/dead topics: %s\n",
            ntp ? err.msg : "no partitions");
    free(tps);
    altar_transport_close(probe);
    altar_transport_close(t);
    return 2;
  }
  free(tps);
  bool tty = isatty(2);
  bool draining = false; /* the last read returned an event: read on without waiting */
  double t0 = (double)time(NULL), next_probe = 0;
  size_t settled = 0, waiting_said = 0;
  int rc = 0;
  count_shards(x);
  for (;;) {
    size_t open = x->n_shards - x->shards_done - x->shards_failed;
    if (settled == x->n && !open) break;
    if ((double)time(NULL) >= next_probe) {
      report_waiting(probe, x, &waiting_said);
      next_probe = (double)time(NULL) + 2;
    }
    if (timeout_s > 0 && (double)time(NULL) - t0 > (double)timeout_s) {
      progress(x, t0, tty, true);
      fprintf(stderr, "altar submit --wait: timed out with %zu of %zu group%s settled and %zu of %zu shard%s open\n",
              settled, x->n, ALTAR_CLI_PLURAL(x->n), open, x->n_shards, ALTAR_CLI_PLURAL(x->n_shards));
      report_why(cfg, run_id);
      rc = 3;
      break;
    }
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, draining ? 0 : 500, &m, &err) || !m) {
      if (draining) gather_pause();
      draining = false;
      progress(x, t0, tty, false);
      continue;
    }
    draining = true;
    altar_group_event_t g = {0};
    if (apply_msg(x, cfg->topics.status, m, run_id, &g)) {
      settled++;
      if (g.event != ALTAR_GROUP_FIRED) rc = 1;
      cancelled += g.event == ALTAR_GROUP_CANCELLED;
      const char *what = g.event == ALTAR_GROUP_FIRED       ? "fired"
                         : g.event == ALTAR_GROUP_CANCELLED ? "cancelled"
                                                            : "dead_lettered";
      if (cb) cb(cb_ctx, what, g.kind, g.group_key, ALTAR_GROUP_MEMBERS(&g), g.event_id);
      else if (!tty || g.event != ALTAR_GROUP_FIRED)
        /* On a terminal the bar's line is cleared first; a group that did
         * not fire is named there as it happens, a fired one only counted. */
        fprintf(stderr, "%sgroup %s %s:%s (%zu shard%s) [%zu/%zu groups]\n", tty ? "\r\033[K" : "",
                g.event == ALTAR_GROUP_DEAD_LETTERED ? "dead-lettered" : what, g.kind, g.group_key, g.n_shards,
                ALTAR_CLI_PLURAL(g.n_shards), settled, x->n);
      if (x->keep_events && !ALTAR_GROW(x->events, x->cap_events, x->n_events + 1)) {
        x->events[x->n_events++] = g; /* kept: x clears it */
        memset(&g, 0, sizeof g);
      }
    }
    altar_group_event_clear(&g);
    altar_msg_free(m);
    progress(x, t0, tty, false);
  }
  count_shards(x);
  progress(x, t0, tty, true);
  /* Late shards: counted and shown; a late failure fails the wait. */
  size_t late = 0, late_failed = 0;
  for (size_t i = 0; i < x->n_shards; i++) {
    follow_shard_t *s = &x->shards[i];
    if (!(s->late = is_late(x, s))) continue;
    late++;
    late_failed += s->state == ALTAR_STATE_FAILED;
  }
  if (late) {
    fprintf(stderr, "altar submit --wait: %zu late shard%s after group settled (%zu failed):\n", late,
            late == 1 ? "" : "s", late_failed);
    for (size_t i = 0; i < x->n_shards; i++) {
      follow_shard_t *s = &x->shards[i];
      if (!s->late) continue;
      const char *sep = strchr(s->group, '\x1f');
      fprintf(stderr, "  %s %s%s%s (group %.*s:%s)\n", s->task_key,
              s->state == ALTAR_STATE_SUCCEEDED ? "succeeded" : "failed", s->reason ? " " : "",
              s->reason ? s->reason : "", (int)(sep - s->group), s->group, sep + 1);
    }
    if (late_failed && rc == 0) rc = 1;
  }
  /* Name what failed, so a dead-lettered group says why. */
  for (size_t i = 0; rc == 1 && i < x->n_shards; i++) {
    const follow_shard_t *s = &x->shards[i];
    if (terminal(s) && s->state == ALTAR_STATE_FAILED && !s->late)
      fprintf(stderr, "  shard %s failed: %s%s%s\n", s->task_key, s->reason ? s->reason : "(no reason)",
              s->why ? ": " : "", s->why ? s->why : "");
  }
  altar_transport_close(probe);
  altar_transport_close(t);
  /* A job stopped by `altar cancel` has an exit code of its own. */
  if (cancelled && rc != 3 && rc != 2) {
    fprintf(stderr, "altar submit --wait: job cancelled (%zu group%s settled as cancelled)\n", cancelled,
            ALTAR_CLI_PLURAL(cancelled));
    rc = 4;
  }
  if (rc != 2) summary(run_id, x, t0, rc, cancelled);
  return rc;
}

int altar_cli_expect_add_shard(expect_t *x, const char *task_key, const char *kind, const char *group_key,
                               const char *topic, const char *pool) {
  if (ALTAR_GROW(x->shards, x->cap_shards, x->n_shards + 1)) return -1;
  if (ALTAR_GROW(x->keys, x->cap_keys, x->n + 1)) return -1;
  follow_shard_t *s = &x->shards[x->n_shards];
  memset(s, 0, sizeof *s);
  snprintf(s->task_key, sizeof s->task_key, "%s", task_key);
  s->state = -1;
  s->group = join2(kind, group_key ? group_key : "");
  s->topic = strdup(topic);
  s->pool = strdup(pool);
  char *k = s->group ? strdup(s->group) : NULL;
  if (!s->group || !s->topic || !s->pool || !k) {
    shard_names_free(s);
    free(k);
    return -1;
  }
  x->keys[x->n++] = k;
  x->n_shards++;
  return 0;
}

int altar_cli_expect_seal(expect_t *x) {
  if (alloc_per_group(x, x->n)) return -1;
  sort_unique(x);
  return 0;
}

int altar_cli_job_snapshot(altar_config_t *cfg, const char *run_id, expect_t *x) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  const char *topics[] = {cfg->topics.ready, cfg->topics.dead, cfg->topics.status};
  size_t cap = 64, ntp = 0, left = 0;
  altar_tp_t *tps = malloc(cap * sizeof *tps);
  int64_t *ends = malloc(cap * sizeof *ends);
  for (size_t k = 0; tps && ends && k < 3; k++) {
    altar_topic_list_t *tl = NULL;
    altar_error_t err = {0};
    if (altar_transport_list_topics(t, topics[k], 10000, &tl, &err) == ALTAR_OK && tl->n_topics)
      for (size_t p = 0; p < tl->topics[0].n_partitions; p++) {
        const altar_partition_info_t *pi = &tl->topics[0].partitions[p];
        if (pi->end <= pi->beginning) continue;
        if (ntp == cap) {
          cap *= 2;
          altar_tp_t *nt = realloc(tps, cap * sizeof *tps);
          int64_t *ne = nt ? realloc(ends, cap * sizeof *ends) : NULL;
          if (nt) tps = nt;
          if (ne) ends = ne;
          if (!nt || !ne) break;
        }
        ends[ntp] = pi->end;
        tps[ntp++] = (altar_tp_t){topics[k], pi->partition, ALTAR_OFFSET_BEGINNING};
        left++;
      }
    altar_topic_list_free(tl);
  }
  altar_error_t err = {0};
  int rc = tps && ends ? 0 : -1;
  if (!rc && ntp && altar_transport_assign(t, tps, ntp, &err)) {
    fprintf(stderr, "altar status: cannot read the status/ready/dead topics: %s\n", err.msg);
    rc = -1;
  }
  while (!rc && left) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 1000, &m, &err) || !m) continue;
    altar_group_event_t g = {0};
    apply_msg(x, cfg->topics.status, m, run_id, &g);
    altar_group_event_clear(&g);
    for (size_t i = 0; i < ntp; i++)
      if (tps[i].partition == m->partition && !strcmp(tps[i].topic, m->topic) && m->offset + 1 >= ends[i]) left--;
    altar_msg_free(m);
  }
  free(tps);
  free(ends);
  altar_transport_close(t);
  count_shards(x);
  for (size_t i = 0; i < x->n_shards; i++) x->shards[i].late = is_late(x, &x->shards[i]);
  return rc;
}
