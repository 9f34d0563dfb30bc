/* The fleet view: topic readers and a ledger snapshot folded into the JSON
 * of the dashboard's pages (see fleet_view.h for why this is safe beside a
 * running reconciler). */
#include "dashboard/fleet_view.h"
#include "dashboard/bounded_map.h"
#include "dashboard/shard_filter.h"
#include "dashboard/shard_order.h"
#include "dashboard/shard_select.h"
#include "dashboard/shard_why.h"
#include "altar/clock.h"
#include "altar/grow.h"

#include "altar/attempts.h"
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/footprint.h"
#include "altar/forward_origin.h"
#include "altar/ledger.h"
#include "altar/transport.h"
#include "altar/spec.h"
#include "altar/task.h"
#include "altar/pools.h"
#include "altar/reconcile.h"
#include "reconciler/attempts_json.h"
#include "reconciler/history_store.h"
#include "reconciler/input_offsets.h"
#include "reconciler/retry_backoff.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JOB_ID_LABEL "job_id"
#define OUTPUTS_PER_SHARD 16  /* output URIs kept per shard */
#define LABELS_MAX 2048       /* bytes of a shard's labels kept ("k=v" lines) */
#define OUTPUTS_PER_JOB 20    /* output URIs listed per job in the jobs page */
#define MEMBERS_PER_GROUP 200 /* shards listed per group */
#define READ_BUDGET 50000     /* records read per topic per refresh */
#define SAMPLES 64            /* overview samples kept for the rates */
#define RATE_WINDOW_S 60.0
#define STALE_S 10.0            /* ALTAR_HEARTBEAT_STALE_S, the worker's side */
#define POOL_TOPICS_MAX 64      /* pools' jobs topics read at most */
#define POOL_SCAN_EVERY_MS 2000 /* how often new pools' jobs topics are looked for */

enum { R_JOBS, R_READY, R_DEAD, R_DLQ, R_FLEET, R_STATUS, R_COUNT };

typedef struct reader {
  const char *topic; /* points into the view's topics */
  altar_transport_t *t;
  bool assigned;
  uint64_t n_read; /* records consumed so far (altar__fleet_view_sync) */
} reader_t;

/* One ledger record, as much of it as the pages show. */
typedef struct rec {
  char *backend, *external_id, *kind, *job_id, *group_key, *reason, *detail;
  char *pool;   /* of its spec (ALTAR_POOL_CPU without one) */
  char *labels; /* its spec's labels as "KEY=VALUE\n" lines, at most LABELS_MAX bytes */
  char task_key[ALTAR_TASK_KEY_LEN + 1];
  double retry_due; /* pending for a retry whose due time is recorded: that time, else 0 */
  int state;
  int64_t restarts;
  bool consumed;
  json_t *outputs;  /* array of URIs */
  json_t *attempts; /* every run of a shard that ran more than once (attempts_json.h), else NULL */
  int64_t attempts_dropped;
} rec_t;

typedef struct sample {
  double t;
  uint64_t done, fired, dead;
} sample_t;

/* The ledger as one read saw it: its records and held groups. */
typedef struct snapshot {
  rec_t *recs;
  size_t n_recs, cap_recs;
  /* The records' task keys, sorted (pointing into recs): whether a shard
   * on a jobs topic has a record is a binary search, not a map of 10^5
   * keys built per page. */
  const char **rec_keys;
  size_t n_rec_keys;
  json_t *held; /* kind "\n" group_key → the rule's error of each group the reconciler holds */
  /* While the ledger is read: its handle, and the task keys with filed
   * attempts (only those shards are looked up again). */
  altar_ledger_t *reading;
  char **ran_again;
  size_t n_ran_again;
  double ledger_read_at;
  char ledger_err[ALTAR_ERRMSG_MAX];
  /* The reconciler's hour as it keeps it in the ledger (history_store.h). */
  altar_history_bucket_t *hist;
  size_t n_hist;
} snapshot_t;

struct altar_fleet_view {
  pthread_mutex_t mu;
  char *transport_name;
  altar_strmap_t props;
  char *topic[R_COUNT];
  char *ledger_path;
  reader_t rd[R_COUNT];
  /* The pools' jobs topics (`<jobs>.<pool>`), read like the jobs topic: a job
   * for a pool no worker serves waits there and must still be listed. */
  reader_t pool_rd[POOL_TOPICS_MAX];
  char *pool_topic[POOL_TOPICS_MAX];
  size_t n_pools;
  int64_t pools_scanned_ms;
  altar_transport_t *admin; /* lag queries */
  json_t *submitted;        /* job_id → submitted_at (the earliest job message) */
  json_t *queued;           /* job_id → {task_key: "partition/offset/pool"} of its job messages (place_of) */
  json_t *cancelled_jobs;   /* job_id → true: a cancel control message on a jobs topic */
  json_t *forwarded;        /* task_key → the worker that forwarded its job (a copy's header) */
  json_t *groups;           /* kind "\n" group_key → {event, ts, kind, group_key, job_id, shards} */
  json_t *hosts;            /* backend "/" external_id → worker id of its latest status event */
  json_t *workers;          /* worker id → its latest heartbeat or goodbye */
  json_t *dlq;              /* the newest DLQ records, oldest first */
  uint64_t dlq_total;
  snapshot_t s;                /* the ledger as last read; the pages render from it */
  int64_t ledger_read_ms;      /* when the last read of the ledger ended (monotonic) */
  int64_t ledger_read_cost_ms; /* how long it took */
  /* The background reader (altar__fleet_view_start_reader): it reads into a
   * snapshot of its own, outside mu, and swaps it in under mu, so no
   * request waits for a read of the ledger. */
  pthread_t reader;
  bool reader_running, reader_stop;
  bool reader_idle;       /* waiting for a page to be asked for */
  int64_t last_render_ms; /* when a page was last asked for (monotonic) */
  pthread_cond_t reader_wake;
  altar_fleet_view_counters_t counters;
  /* The job summaries (build_jobs) as of jobs_inputs_read() == jobs_at:
   * the jobs, job and overview pages share them until something they are
   * computed from is read. */
  struct jobs *jobs;
  uint64_t jobs_at;
  sample_t samples[SAMPLES];
  size_t n_samples, next_sample;
};

/* A copy of s cut to max bytes (at a UTF-8 boundary), NULL for NULL. */
static char *bounded_dup(const char *s, size_t max) {
  if (!s) return NULL;
  size_t n = strnlen(s, max + 1);
  if (n > max) {
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  }
  return strndup(s, n);
}

/* jansson refuses invalid UTF-8; a label from the wire might be. */
static json_t *jstr(const char *s) {
  if (!s) return json_null();
  json_t *j = json_string(s);
  return j ? j : json_string("(not UTF-8)");
}

static void rec_clear(rec_t *r) {
  free(r->backend);
  free(r->external_id);
  free(r->kind);
  free(r->job_id);
  free(r->group_key);
  free(r->reason);
  free(r->detail);
  free(r->pool);
  free(r->labels);
  json_decref(r->outputs);
  json_decref(r->attempts);
  memset(r, 0, sizeof *r);
}

static void recs_clear(snapshot_t *s) {
  for (size_t i = 0; i < s->n_recs; i++) rec_clear(&s->recs[i]);
  s->n_recs = 0;
  free(s->rec_keys);
  s->rec_keys = NULL;
  s->n_rec_keys = 0;
}

/* Everything s holds freed; s left empty. */
static void snapshot_free(snapshot_t *s) {
  recs_clear(s);
  free(s->recs);
  json_decref(s->held);
  free(s->hist);
  memset(s, 0, sizeof *s);
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sorts the records' task keys into v->s.rec_keys (none when out of memory:
 * then nothing looks recorded to is_recorded, as with an empty ledger). */
static void index_rec_keys(snapshot_t *s) {
  s->rec_keys = malloc((s->n_recs ? s->n_recs : 1) * sizeof *s->rec_keys);
  s->n_rec_keys = 0;
  for (size_t i = 0; s->rec_keys && i < s->n_recs; i++)
    if (s->recs[i].task_key[0]) s->rec_keys[s->n_rec_keys++] = s->recs[i].task_key;
  if (s->n_rec_keys) qsort(s->rec_keys, s->n_rec_keys, sizeof *s->rec_keys, cmp_key);
}

/* Whether the ledger snapshot has a record of task key tk. */
static bool is_recorded(const altar_fleet_view_t *v, const char *tk) {
  return v->s.n_rec_keys && bsearch(&tk, v->s.rec_keys, v->s.n_rec_keys, sizeof *v->s.rec_keys, cmp_key);
}

altar_fleet_view_t *altar__fleet_view_new(const altar_config_t *cfg, altar_error_t *err) {
  altar_fleet_view_t *v = calloc(1, sizeof *v);
  if (!v) {
    altar_error_set(err, ALTAR_ENOMEM, "fleet view: out of memory");
    return NULL;
  }
  pthread_mutex_init(&v->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the reader's waits ignore wall-clock steps */
  pthread_cond_init(&v->reader_wake, &ca);
  pthread_condattr_destroy(&ca);
  const char *topics[R_COUNT] = {cfg->topics.jobs, cfg->topics.ready, cfg->topics.dead,
                                 cfg->topics.dlq,  cfg->topics.fleet, cfg->topics.status};
  bool ok = (v->transport_name = strdup(cfg->transport_name)) && !altar_strmap_copy(&v->props, &cfg->transport_props) &&
            (v->ledger_path = strdup(cfg->ledger_path));
  for (int i = 0; ok && i < R_COUNT; i++) {
    ok = (v->topic[i] = strdup(topics[i] ? topics[i] : "")) != NULL;
    v->rd[i].topic = v->topic[i];
  }
  v->submitted = json_object();
  v->queued = json_object();
  v->forwarded = json_object();
  v->cancelled_jobs = json_object();
  v->s.held = json_object();
  v->groups = json_object();
  v->hosts = json_object();
  v->workers = json_object();
  v->dlq = json_array();
  if (!ok || !v->submitted || !v->queued || !v->forwarded || !v->cancelled_jobs || !v->s.held || !v->groups ||
      !v->hosts || !v->workers || !v->dlq) {
    altar__fleet_view_free(v);
    altar_error_set(err, ALTAR_ENOMEM, "fleet view: out of memory");
    return NULL;
  }
  v->admin = altar_transport_open(v->transport_name, &v->props, NULL, err);
  if (!v->admin) {
    altar__fleet_view_free(v);
    return NULL;
  }
  return v;
}

static void jobs_free(struct jobs *js);

void altar__fleet_view_free(altar_fleet_view_t *v) {
  if (!v) return;
  for (int i = 0; i < R_COUNT; i++) {
    altar_transport_close(v->rd[i].t);
    free(v->topic[i]);
  }
  for (size_t i = 0; i < v->n_pools; i++) {
    altar_transport_close(v->pool_rd[i].t);
    free(v->pool_topic[i]);
  }
  altar_transport_close(v->admin);
  altar__fleet_view_stop_reader(v);
  snapshot_free(&v->s);
  if (v->jobs) jobs_free(v->jobs);
  free(v->jobs);
  json_decref(v->submitted);
  json_decref(v->queued);
  json_decref(v->forwarded);
  json_decref(v->cancelled_jobs);
  json_decref(v->groups);
  json_decref(v->hosts);
  json_decref(v->workers);
  json_decref(v->dlq);
  free(v->transport_name);
  altar_strmap_clear(&v->props);
  free(v->ledger_path);
  pthread_cond_destroy(&v->reader_wake);
  pthread_mutex_destroy(&v->mu);
  free(v);
}

/* ---- reading the topics -------------------------------------------------- */

static const char *job_of(const altar_handle_t *h) { return h ? altar_strmap_get(&h->labels, JOB_ID_LABEL) : NULL; }

/* Where a queued shard waits: its jobs partition and offset, and its pool
 * (whose jobs topic it is on), kept as one "partition/offset/pool" string
 * per shard so 10^5 waiting shards stay small. pool points into e. */
typedef struct place {
  const char *pool;
  int32_t partition;
  int64_t offset;
} place_t;

static bool place_of(const json_t *e, place_t *p) {
  const char *s = json_string_value(e);
  char *end = NULL;
  *p = (place_t){ALTAR_POOL_CPU, -1, -1};
  if (!s) return false;
  long part = strtol(s, &end, 10);
  if (*end != '/') return false;
  long long off = strtoll(end + 1, &end, 10);
  if (*end != '/') return false;
  *p = (place_t){end + 1, (int32_t)part, (int64_t)off};
  return true;
}

static void on_job(altar_fleet_view_t *v, const altar_msg_t *m) {
  altar_job_msg_t j = {0};
  altar_error_t e = {0};
  if (m->value && altar_decode_job(m->value, m->value_len, &j, &e) == ALTAR_OK) {
    const char *jid = j.job_id && *j.job_id ? j.job_id : altar_strmap_get(&j.spec.labels, JOB_ID_LABEL);
    if (jid) {
      json_t *cur = json_object_get(v->submitted, jid);
      if (!cur || json_real_value(cur) > j.submitted_at)
        altar__bounded_set_new(v->submitted, jid, json_real(j.submitted_at), ALTAR_FLEET_VIEW_JOBS_KEEP);
      /* Its shard by task key, with its pool: one with no record yet waits. */
      char tk[ALTAR_TASK_KEY_LEN + 1];
      json_t *q = json_object_get(v->queued, jid);
      if (!q && (q = json_object()) && altar__bounded_set_new(v->queued, jid, q, ALTAR_FLEET_VIEW_JOBS_KEEP)) q = NULL;
      if (q && altar_spec_identity(&j.spec, tk, &e) == ALTAR_OK) {
        /* Where it waits: the shards of other jobs before it there are ahead of it. */
        char place[600];
        snprintf(place, sizeof place, "%d/%lld/%.256s", (int)m->partition, (long long)m->offset,
                 j.spec.resources.gpu ? j.spec.resources.gpu : ALTAR_POOL_CPU);
        json_object_set_new(q, tk, jstr(place));
        char by[256];
        if (altar_forward_origin(m, by, sizeof by))
          altar__bounded_set_new(v->forwarded, tk, jstr(by), ALTAR_FLEET_VIEW_HOSTS_KEEP);
      }
    }
  } else if (m->value) {
    /* `altar cancel` puts a control message on every jobs partition: the
     * job's shards still waiting there will not run. */
    altar_control_msg_t c = {0};
    if (altar_decode_control(m->value, m->value_len, &c, &e) == ALTAR_OK && c.event == ALTAR_CTL_CANCEL && c.job_id &&
        !c.group_key)
      altar__bounded_set_new(v->cancelled_jobs, c.job_id, json_true(), ALTAR_FLEET_VIEW_JOBS_KEEP);
    altar_control_msg_clear(&c);
  }
  altar_job_msg_clear(&j);
}

static void on_group(altar_fleet_view_t *v, const altar_msg_t *m) {
  altar_group_event_t g = {0};
  altar_error_t e = {0};
  if (m->value && altar_decode_group(m->value, m->value_len, &g, &e) == ALTAR_OK && g.kind && g.group_key) {
    char key[2048];
    snprintf(key, sizeof key, "%s\n%s", g.kind, g.group_key);
    json_t *shards = json_array();
    for (size_t i = 0; shards && i < g.n_shards && i < MEMBERS_PER_GROUP; i++)
      json_array_append_new(shards, json_pack("{s:o, s:o}", "backend", jstr(g.shards[i].backend), "external_id",
                                              jstr(g.shards[i].external_id)));
    json_t *o = json_pack("{s:s, s:f, s:o, s:o, s:o, s:o, s:I, s:o}", "event",
                          g.event == ALTAR_GROUP_FIRED       ? "fired"
                          : g.event == ALTAR_GROUP_CANCELLED ? "cancelled"
                                                             : "dead_lettered",
                          "ts", g.ts, "kind", jstr(g.kind), "group_key", jstr(g.group_key), "event_id",
                          jstr(g.event_id), "job_id", jstr(g.n_shards ? job_of(&g.shards[0]) : NULL), "n_shards",
                          (json_int_t)ALTAR_GROUP_MEMBERS(&g), "shards", shards ? shards : json_array());
    /* A wide group's head lists its first members; the rest are in its pages. */
    if (o && g.pages) json_object_set_new(o, "pages", json_integer((json_int_t)g.pages));
    if (o) altar__bounded_set_new(v->groups, key, o, ALTAR_FLEET_VIEW_GROUPS_KEEP);
  }
  altar_group_event_clear(&g);
}

static void on_dlq(altar_fleet_view_t *v, const altar_msg_t *m) {
  const void *hv;
  size_t hl;
  char reason[1024] = "", source[300] = "", size[32] = "";
  if (altar_msg_header(m, ALTAR_DLQ_REASON_HEADER, &hv, &hl) == ALTAR_OK)
    snprintf(reason, sizeof reason, "%.*s", (int)(hl < sizeof reason ? hl : sizeof reason - 1), (const char *)hv);
  if (altar_msg_header(m, ALTAR_DLQ_SOURCE_HEADER, &hv, &hl) == ALTAR_OK)
    snprintf(source, sizeof source, "%.*s", (int)(hl < sizeof source ? hl : sizeof source - 1), (const char *)hv);
  if (altar_msg_header(m, ALTAR_DLQ_SIZE_HEADER, &hv, &hl) == ALTAR_OK)
    snprintf(size, sizeof size, "%.*s", (int)(hl < sizeof size ? hl : sizeof size - 1), (const char *)hv);
  json_int_t orig = *size ? (json_int_t)strtoll(size, NULL, 10) : (json_int_t)m->value_len;
  json_t *o =
      json_pack("{s:i, s:I, s:f, s:o, s:o, s:I, s:I}", "partition", (int)m->partition, "offset", (json_int_t)m->offset,
                "ts", (double)m->timestamp_ms / 1000.0, "reason", jstr(*reason ? reason : "(no reason header)"),
                "source", *source ? jstr(source) : json_null(), "size", orig, "kept", (json_int_t)m->value_len);
  if (!o) return;
  json_array_append_new(v->dlq, o);
  v->dlq_total++;
  if (json_array_size(v->dlq) > ALTAR_FLEET_VIEW_DLQ_KEEP) json_array_remove(v->dlq, 0);
}

static void on_fleet(altar_fleet_view_t *v, const altar_msg_t *m) {
  if (!m->value || m->value_len > 256 * 1024) return;
  json_error_t je;
  json_t *o = json_loadb(m->value, m->value_len, 0, &je);
  const char *id = json_string_value(json_object_get(o, "worker"));
  if (json_is_object(o) && id && strlen(id) <= 256 && json_is_number(json_object_get(o, "ts")))
    json_object_set(v->workers, id, o);
  json_decref(o);
}

static void on_status(altar_fleet_view_t *v, const altar_msg_t *m) {
  altar_status_event_t ev = {0};
  altar_error_t e = {0};
  if (m->value && altar_decode_status(m->value, m->value_len, &ev, &e) == ALTAR_OK && ev.worker && *ev.worker &&
      ev.handle.backend && ev.handle.external_id) {
    char key[2048];
    snprintf(key, sizeof key, "%s/%s", ev.handle.backend, ev.handle.external_id);
    altar__bounded_set_new(v->hosts, key, jstr(ev.worker), ALTAR_FLEET_VIEW_HOSTS_KEEP);
  }
  altar_status_event_clear(&ev);
}

static void read_reader(altar_fleet_view_t *v, reader_t *r, int which) {
  if (!*r->topic) return;
  altar_error_t e = {0};
  if (!r->assigned) {
    altar_topic_list_t *tl = NULL;
    if (altar_transport_list_topics(v->admin, r->topic, 5000, &tl, &e) != ALTAR_OK || !tl->n_topics) {
      altar_topic_list_free(tl);
      return; /* not created yet: try at the next refresh */
    }
    size_t np = tl->topics[0].n_partitions;
    altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
    if (!r->t) r->t = altar_transport_open(v->transport_name, &v->props, NULL, &e);
    for (size_t i = 0; tps && i < np; i++)
      tps[i] = (altar_tp_t){r->topic, tl->topics[0].partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    r->assigned = tps && r->t && altar_transport_assign(r->t, tps, np, &e) == ALTAR_OK;
    free(tps);
    altar_topic_list_free(tl);
    if (!r->assigned) return;
  }
  for (int n = 0; n < READ_BUDGET; n++) {
    altar_msg_t *m = NULL;
    int rc = altar_transport_consume(r->t, n ? 0 : 20, &m, &e);
    if (rc == ALTAR_OK && !m) break;
    r->n_read++;
    if (rc != ALTAR_OK) continue; /* a corrupt record is skipped; the next call goes on */
    switch (which) {
    case R_JOBS: on_job(v, m); break;
    case R_READY:
    case R_DEAD: on_group(v, m); break;
    case R_DLQ: on_dlq(v, m); break;
    case R_FLEET: on_fleet(v, m); break;
    case R_STATUS: on_status(v, m); break;
    }
    altar_msg_free(m);
  }
}

/* ---- the ledger snapshot ------------------------------------------------- */

static bool run_replaced(const altar_record_t *x) {
  const char *why = x->state == ALTAR_STATE_FAILED && x->failure ? x->failure->reason : NULL;
  return why && (!strcmp(why, ALTAR_REASON_SUPERSEDED) || !strcmp(why, ALTAR_REASON_RELEASED));
}

/* labels as "KEY=VALUE\n" lines (sorted, as the map keeps them), whole
 * lines only, at most LABELS_MAX bytes: what the label filter and the
 * shard page read. "" for none; NULL when out of memory. */
static char *labels_text(const altar_strmap_t *m) {
  altar_buf_t b = {0};
  for (size_t i = 0; m && i < m->n; i++) {
    size_t kl = strlen(m->keys[i]), vl = strlen(m->vals[i]);
    if (strchr(m->keys[i], '\n') || strchr(m->vals[i], '\n')) continue; /* would read as two lines */
    if (b.len + kl + vl + 2 > LABELS_MAX) break;
    altar_buf_append(&b, m->keys[i], kl);
    altar_buf_append(&b, "=", 1);
    altar_buf_append(&b, m->vals[i], vl);
    altar_buf_append(&b, "\n", 1);
  }
  char *t = strndup(b.data ? (const char *)b.data : "", b.len);
  altar_buf_free(&b);
  return t;
}

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  snapshot_t *s = ctx;
  bool ran_again = altar_attempts_keys_has(s->ran_again, s->n_ran_again, e->task_key);
  /* A replaced run is one of its shard's attempts, shown there, not a shard. */
  if (ran_again && run_replaced(&e->rec)) return 0;
  if (ALTAR_GROW(s->recs, s->cap_recs, s->n_recs + 1)) return ALTAR_ENOMEM;
  rec_t *r = &s->recs[s->n_recs];
  memset(r, 0, sizeof *r);
  const altar_record_t *x = &e->rec;
  r->backend = bounded_dup(x->handle.backend ? x->handle.backend : "", 256);
  r->external_id = bounded_dup(x->handle.external_id ? x->handle.external_id : "", 512);
  r->kind = bounded_dup(x->kind ? x->kind : "", 256);
  const char *jid = job_of(&x->handle);
  if (!jid && x->spec) jid = altar_strmap_get(&x->spec->labels, JOB_ID_LABEL);
  r->job_id = bounded_dup(jid ? jid : "", 512);
  snprintf(r->task_key, sizeof r->task_key, "%s", e->task_key ? e->task_key : "");
  r->group_key = bounded_dup(e->group_key, 1024);
  if (x->failure) {
    r->reason = bounded_dup(x->failure->reason, 256);
    r->detail = bounded_dup(x->failure->detail, ALTAR_FLEET_VIEW_DETAIL_MAX);
  }
  r->state = (int)x->state;
  r->restarts = x->restart_count;
  r->pool = bounded_dup(x->spec && x->spec->resources.gpu ? x->spec->resources.gpu : ALTAR_POOL_CPU, 256);
  /* A retry's record may carry no spec; its handle has the labels too. */
  r->labels = labels_text(x->spec && x->spec->labels.n ? &x->spec->labels : &x->handle.labels);
  /* A retry put back to pending waits for the due time its backoff recorded. */
  if (x->state == ALTAR_STATE_PENDING && x->restart_count > 0 && e->task_key) {
    altar_error_t de = {0};
    if (altar__retry_due_get(s->reading, e->task_key, x->restart_count, &r->retry_due, &de)) r->retry_due = 0;
  }
  r->consumed = x->consumed;
  r->outputs = json_array();
  for (size_t i = 0; x->spec && r->outputs && i < x->spec->n_outputs && i < OUTPUTS_PER_SHARD; i++)
    json_array_append_new(r->outputs, jstr(x->spec->outputs[i].uri));
  s->n_recs++;
  if (ran_again) {
    altar_attempts_t at;
    altar_error_t ae = {0};
    if (altar_attempts_of(s->reading, e, &at, &ae) == ALTAR_OK) {
      if (at.n > 1 || at.dropped) {
        r->attempts = altar__attempts_json(&at);
        r->attempts_dropped = at.dropped;
      }
      altar_attempts_clear(&at);
    }
  }
  if (!r->backend || !r->external_id || !r->kind || !r->job_id || !r->outputs || !r->pool || !r->labels)
    return ALTAR_ENOMEM;
  return 0;
}

/* A held group's side key (ALTAR_HELD_PREFIX kind NUL group_key → "...\n"
 * error) into s->held. */
static int visit_held(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  snapshot_t *s = ctx;
  size_t pl = strlen(ALTAR_HELD_PREFIX);
  if (klen <= pl || klen - pl > 2048) return 0;
  char name[2050];
  memcpy(name, (const char *)key + pl, klen - pl);
  name[klen - pl] = 0;
  char *nul = memchr(name, 0, klen - pl);
  if (!nul) return 0;
  *nul = '\n';
  const char *why = memchr(val, '\n', vlen);
  size_t len = why ? vlen - (size_t)(why + 1 - (const char *)val) : 0;
  char *err = strndup(why ? why + 1 : "", len < 1024 ? len : 1024);
  if (err) json_object_set_new(s->held, name, jstr(err));
  free(err);
  return json_object_size(s->held) >= ALTAR_FLEET_VIEW_GROUPS_KEEP;
}

/* A bucket of the reconciler's hour (ALTAR_HISTORY_PREFIX) into s->hist. */
static int visit_history(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)key, (void)klen;
  snapshot_t *s = ctx;
  if (!s->hist) s->hist = calloc(ALTAR_HISTORY_BUCKETS, sizeof *s->hist);
  if (!s->hist || s->n_hist >= ALTAR_HISTORY_BUCKETS) return 1;
  if (altar__history_decode(val, vlen, &s->hist[s->n_hist])) s->n_hist++;
  return 0;
}

/* Reads the ledger at path into s (empty on entry). 0, or -1 when it could
 * not be opened (s->ledger_err says why). Touches nothing shared: the
 * background reader calls it outside the view's mutex. */
static int snapshot_read(const char *path, snapshot_t *s) {
  altar_error_t e = {0};
  s->held = json_object();
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_ledger_t *l = s->held ? altar_ledger_rocksdb_open(path, &ro, &e) : NULL;
  if (!l) {
    snprintf(s->ledger_err, sizeof s->ledger_err, "%s", s->held ? e.msg : "out of memory");
    return -1;
  }
  s->reading = l;
  if (altar_attempts_keys(l, &s->ran_again, &s->n_ran_again, &e) != ALTAR_OK ||
      altar_ledger_foreach(l, visit, s, &e) != ALTAR_OK)
    snprintf(s->ledger_err, sizeof s->ledger_err, "%s", *e.msg ? e.msg : "reading the ledger failed");
  index_rec_keys(s);
  altar_ledger_aux_scan(l, ALTAR_HELD_PREFIX, strlen(ALTAR_HELD_PREFIX), visit_held, s, &e);
  altar_ledger_aux_scan(l, ALTAR_HISTORY_PREFIX, strlen(ALTAR_HISTORY_PREFIX), visit_history, s, &e);
  altar_attempts_keys_free(s->ran_again, s->n_ran_again);
  s->ran_again = NULL;
  s->n_ran_again = 0;
  s->reading = NULL;
  altar_ledger_close(l);
  s->ledger_read_at = altar_wall_s();
  return 0;
}

/* Puts next (read from start_ms on) in place of v's snapshot, under mu;
 * the old one is left in *next for the caller to free (outside mu when it
 * can). A read that could not open the ledger keeps the last snapshot and
 * records why. */
static void snapshot_adopt(altar_fleet_view_t *v, snapshot_t *next, int rc, int64_t start_ms, bool in_render) {
  v->ledger_read_ms = altar_mono_ms();
  v->ledger_read_cost_ms = v->ledger_read_ms - start_ms;
  if (rc) {
    snprintf(v->s.ledger_err, sizeof v->s.ledger_err, "%s", next->ledger_err);
    return;
  }
  snapshot_t old = v->s;
  v->s = *next;
  *next = old;
  v->counters.ledger_reads++;
  if (in_render) v->counters.ledger_reads_in_render++;
}

/* Milliseconds until the snapshot is old enough for another read, 0 when
 * due: a slow read (10^5 shards take most of a second) is repeated only
 * after ALTAR_FLEET_VIEW_LEDGER_READ_SPACING times its cost. */
static int64_t read_due_in(const altar_fleet_view_t *v) {
  if (!v->ledger_read_ms) return 0;
  int64_t spacing = v->ledger_read_cost_ms * ALTAR_FLEET_VIEW_LEDGER_READ_SPACING;
  int64_t wait = spacing > ALTAR_FLEET_VIEW_LEDGER_MAX_AGE_MS ? spacing : ALTAR_FLEET_VIEW_LEDGER_MAX_AGE_MS;
  int64_t left = wait - (altar_mono_ms() - v->ledger_read_ms);
  return left > 0 ? left : 0;
}

/* A read of the ledger on the calling thread (under mu), when due or when
 * forced. With the background reader running a page never reads: the
 * reader keeps the snapshot fresh. */
static void read_ledger(altar_fleet_view_t *v, bool forced, bool in_render) {
  /* A reader back from idling has a snapshot too old to show: this page
   * reads (as every page did before the reader), the next ones need not. */
  bool stale = altar_mono_ms() - v->ledger_read_ms > ALTAR_FLEET_VIEW_READER_IDLE_MS;
  if (!forced && (v->reader_running ? !stale : read_due_in(v) > 0)) return;
  int64_t start = altar_mono_ms();
  snapshot_t next = {0};
  int rc = snapshot_read(v->ledger_path, &next);
  snapshot_adopt(v, &next, rc, start, in_render);
  snapshot_free(&next);
}

static void *reader_main(void *arg) {
  altar_fleet_view_t *v = arg;
  pthread_mutex_lock(&v->mu);
  while (!v->reader_stop) {
    /* Nobody looking: no reads (a 10^5-shard ledger costs half a second of
     * CPU each) until a page is asked for again. */
    if (altar_mono_ms() - v->last_render_ms > ALTAR_FLEET_VIEW_READER_IDLE_MS) {
      v->reader_idle = true;
      pthread_cond_wait(&v->reader_wake, &v->mu);
      v->reader_idle = false;
      continue;
    }
    int64_t left = read_due_in(v);
    if (left > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += left / 1000;
      ts.tv_nsec += (left % 1000) * 1000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&v->reader_wake, &v->mu, &ts);
      continue;
    }
    int64_t start = altar_mono_ms();
    v->ledger_read_ms = start; /* not due again while this read runs */
    pthread_mutex_unlock(&v->mu);
    snapshot_t next = {0};
    int rc = snapshot_read(v->ledger_path, &next);
    pthread_mutex_lock(&v->mu);
    snapshot_adopt(v, &next, rc, start, false);
    if (!rc) v->counters.background_reads++;
    pthread_mutex_unlock(&v->mu);
    snapshot_free(&next); /* the old snapshot, freed while pages render */
    pthread_mutex_lock(&v->mu);
  }
  pthread_mutex_unlock(&v->mu);
  return NULL;
}

int altar__fleet_view_start_reader(altar_fleet_view_t *v, altar_error_t *err) {
  pthread_mutex_lock(&v->mu);
  if (v->reader_running) {
    pthread_mutex_unlock(&v->mu);
    return ALTAR_OK;
  }
  read_ledger(v, true, false); /* the first page finds a snapshot */
  v->reader_stop = false;
  v->last_render_ms = altar_mono_ms();
  int rc = pthread_create(&v->reader, NULL, reader_main, v);
  v->reader_running = rc == 0;
  pthread_mutex_unlock(&v->mu);
  return rc ? altar_error_set(err, ALTAR_EIO, "fleet view: starting the ledger reader: %s", strerror(rc)) : ALTAR_OK;
}

void altar__fleet_view_stop_reader(altar_fleet_view_t *v) {
  if (!v) return;
  pthread_mutex_lock(&v->mu);
  bool running = v->reader_running;
  v->reader_stop = true;
  pthread_cond_broadcast(&v->reader_wake);
  pthread_mutex_unlock(&v->mu);
  if (running) pthread_join(v->reader, NULL);
  pthread_mutex_lock(&v->mu);
  v->reader_running = false;
  pthread_mutex_unlock(&v->mu);
}

void altar__fleet_view_history_into(altar_fleet_view_t *v, altar_history_t *h) {
  pthread_mutex_lock(&v->mu);
  double now = altar_wall_s();
  for (size_t i = 0; i < v->s.n_hist; i++) altar__history_bucket_put(h, &v->s.hist[i], now);
  pthread_mutex_unlock(&v->mu);
}

void altar__fleet_view_counters(altar_fleet_view_t *v, altar_fleet_view_counters_t *out) {
  pthread_mutex_lock(&v->mu);
  *out = v->counters;
  pthread_mutex_unlock(&v->mu);
}

/* Looks for pools' jobs topics not read yet (at most every
 * POOL_SCAN_EVERY_MS: listing every topic is a metadata call on Kafka). */
static void scan_pool_topics(altar_fleet_view_t *v) {
  int64_t now = altar_mono_ms();
  if (v->pools_scanned_ms && now - v->pools_scanned_ms < POOL_SCAN_EVERY_MS) return;
  v->pools_scanned_ms = now;
  altar_topic_list_t *tl = NULL;
  altar_error_t e = {0};
  if (!*v->topic[R_JOBS] || altar_transport_list_topics(v->admin, NULL, 5000, &tl, &e) != ALTAR_OK) {
    altar_topic_list_free(tl);
    return;
  }
  for (size_t i = 0; i < tl->n_topics && v->n_pools < POOL_TOPICS_MAX; i++) {
    const char *pool = NULL;
    if (!altar_pool_of_topic(v->topic[R_JOBS], tl->topics[i].name, &pool) || !pool) continue;
    bool have = false;
    for (size_t k = 0; k < v->n_pools && !have; k++) have = !strcmp(v->pool_topic[k], tl->topics[i].name);
    if (have) continue;
    char *name = strdup(tl->topics[i].name);
    if (!name) break;
    v->pool_topic[v->n_pools] = name;
    v->pool_rd[v->n_pools] = (reader_t){.topic = name};
    v->n_pools++;
  }
  altar_topic_list_free(tl);
}

/* The topics read up to now (the ledger is read apart: read_ledger). */
static void refresh(altar_fleet_view_t *v) {
  for (int i = 0; i < R_COUNT; i++) read_reader(v, &v->rd[i], i);
  scan_pool_topics(v);
  for (size_t i = 0; i < v->n_pools; i++) read_reader(v, &v->pool_rd[i], R_JOBS);
}

/* Records topic holds now (its partitions' end less beginning); -1 unknown. */
static int64_t topic_records(altar_fleet_view_t *v, const char *topic) {
  altar_topic_list_t *tl = NULL;
  altar_error_t e = {0};
  int64_t n = -1;
  if (*topic && altar_transport_list_topics(v->admin, topic, 5000, &tl, &e) == ALTAR_OK && tl->n_topics) {
    n = 0;
    for (size_t i = 0; i < tl->topics[0].n_partitions; i++)
      n += tl->topics[0].partitions[i].end - tl->topics[0].partitions[i].beginning;
  }
  altar_topic_list_free(tl);
  return n;
}

int altar__fleet_view_sync(altar_fleet_view_t *v, int timeout_ms, altar_error_t *err) {
  pthread_mutex_lock(&v->mu);
  scan_pool_topics(v);
  size_t nr = R_COUNT + v->n_pools;
  reader_t *rs[R_COUNT + POOL_TOPICS_MAX];
  int64_t want[R_COUNT + POOL_TOPICS_MAX];
  for (size_t i = 0; i < nr; i++) {
    rs[i] = i < R_COUNT ? &v->rd[i] : &v->pool_rd[i - R_COUNT];
    want[i] = topic_records(v, rs[i]->topic);
  }
  int64_t until = altar_mono_ms() + timeout_ms;
  bool done = false;
  while (!done) {
    refresh(v);
    read_ledger(v, false, false);
    done = true;
    for (size_t i = 0; i < nr; i++) done &= want[i] < 0 || rs[i]->n_read >= (uint64_t)want[i];
    if (!done && altar_mono_ms() >= until) break;
  }
  read_ledger(v, true, false); /* read after the topics: nothing recorded yet looks waiting */
  pthread_mutex_unlock(&v->mu);
  return done ? ALTAR_OK
              : altar_error_set(err, ALTAR_ETIMEOUT, "fleet view: the topics were not read within %d ms", timeout_ms);
}

/* ---- rendering ------------------------------------------------------------ */

/* What the job summaries are computed from has changed since a count of
 * this: the ledger snapshot, or the topics of jobs and group events. */
static uint64_t jobs_inputs_read(const altar_fleet_view_t *v) {
  uint64_t n = v->counters.ledger_reads + v->rd[R_JOBS].n_read + v->rd[R_READY].n_read + v->rd[R_DEAD].n_read;
  for (size_t i = 0; i < v->n_pools; i++) n += v->pool_rd[i].n_read;
  return n;
}

static const char *state_name(int s) {
  static const char *const names[] = {"pending", "running", "succeeded", "failed"};
  return s >= 0 && s < 4 ? names[s] : "unknown";
}

/* A shard's state as the pages show it: one failed by `altar cancel` is
 * "cancelled", not a failure. */
static const char *shard_state(const rec_t *r) {
  if (r->state == ALTAR_STATE_FAILED && r->reason && !strcmp(r->reason, ALTAR_REASON_CANCELLED)) return "cancelled";
  return state_name(r->state);
}

typedef struct tally {
  uint64_t by_state[4], total, consumed, cancelled;
} tally_t;

static void tally_add(tally_t *t, const rec_t *r) {
  t->total++;
  if (r->consumed) t->consumed++;
  if (r->state >= 0 && r->state < 4) t->by_state[r->state]++;
  /* Failed by `altar cancel`: counted among the failed and on its own, so
   * a page can show a cancelled shard as neither done nor a failure. */
  if (r->state == ALTAR_STATE_FAILED && r->reason && !strcmp(r->reason, ALTAR_REASON_CANCELLED)) t->cancelled++;
}

static json_t *tally_json(const tally_t *t) {
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "total", (json_int_t)t->total, "pending",
                   (json_int_t)t->by_state[0], "running", (json_int_t)t->by_state[1], "succeeded",
                   (json_int_t)t->by_state[2], "failed", (json_int_t)t->by_state[3], "consumed",
                   (json_int_t)t->consumed, "cancelled", (json_int_t)t->cancelled);
}

static const json_t *group_event(const altar_fleet_view_t *v, const char *kind, const char *group_key) {
  char key[2048];
  snprintf(key, sizeof key, "%s\n%s", kind, group_key);
  return json_object_get(v->groups, key);
}

static const char *event_name(const json_t *g) { return g ? json_string_value(json_object_get(g, "event")) : NULL; }

static void page_bounds(const altar_fleet_query_t *q, size_t *poff, size_t *plim) {
  int64_t lim = q && q->limit > 0 ? q->limit : ALTAR_FLEET_VIEW_LIMIT_DEFAULT;
  if (lim > ALTAR_FLEET_VIEW_LIMIT_MAX) lim = ALTAR_FLEET_VIEW_LIMIT_MAX;
  *poff = q && q->offset > 0 ? (size_t)q->offset : 0;
  *plim = (size_t)lim;
}

/* ---- why a shard is not running (shard_why.h) ------------------------------ */

typedef altar_why_waiting_t waiting_msg_t;

/* What one render knows for the reasons, built once from what the view
 * holds already (heartbeats, the jobs topics read so far, the ledger
 * snapshot): no per-shard read of the log. */
typedef struct why_ctx {
  double now;
  json_t *run;            /* task_key → {worker, live}: the heartbeats' running lists */
  json_t *pool_free;      /* pool → free slots over the live workers that announce it */
  json_t *pool_workers;   /* pool → workers reading its jobs topic (asked once per render) */
  waiting_msg_t *waiting; /* every shard with no record, by topic, partition and offset */
  size_t n_waiting;
} why_ctx_t;

static void why_ctx_free(why_ctx_t *c) {
  json_decref(c->run);
  json_decref(c->pool_free);
  json_decref(c->pool_workers);
  free(c->waiting);
  memset(c, 0, sizeof *c);
}

static bool hb_live(const json_t *hb, double now) {
  const char *event = json_string_value(json_object_get(hb, "event"));
  return !(event && !strcmp(event, "goodbye")) && now - json_number_value(json_object_get(hb, "ts")) <= STALE_S;
}

/* Every shard waiting with no record (cancelled jobs' apart), sorted, with
 * the shards ahead of each of job's (altar__why_ahead). */
static int why_ahead(const altar_fleet_view_t *v, why_ctx_t *c, const char *job) {
  json_t *mine = json_object_get(v->queued, job);
  bool any = false;
  const char *tk;
  json_t *e;
  json_object_foreach(mine, tk, e) any |= !is_recorded(v, tk);
  if (!any) return ALTAR_OK;
  waiting_msg_t *w = NULL;
  size_t n = 0, cap = 0;
  const char *jid;
  json_t *q;
  json_object_foreach(v->queued, jid, q) {
    if (json_object_get(v->cancelled_jobs, jid)) continue;
    json_object_foreach(q, tk, e) {
      place_t pl;
      if (!place_of(e, &pl) || is_recorded(v, tk)) continue;
      if (ALTAR_GROW(w, cap, n + 1)) {
        free(w);
        return ALTAR_ENOMEM;
      }
      /* A pool's jobs topic is the pool's own: its name groups them. */
      w[n++] = (waiting_msg_t){pl.pool, jid, tk, pl.partition, pl.offset, -1, -1};
    }
  }
  altar__why_ahead(w, n, job);
  c->waiting = w;
  c->n_waiting = n;
  return ALTAR_OK;
}

static int why_ctx_init(const altar_fleet_view_t *v, const char *job, why_ctx_t *c) {
  *c = (why_ctx_t){
      .now = altar_wall_s(), .run = json_object(), .pool_free = json_object(), .pool_workers = json_object()};
  if (!c->run || !c->pool_free || !c->pool_workers) return ALTAR_ENOMEM;
  const char *id;
  json_t *hb;
  json_object_foreach(v->workers, id, hb) {
    bool live = hb_live(hb, c->now);
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(hb, "running"), i, k) {
      const char *tk = json_string_value(k);
      json_t *cur = tk ? json_object_get(c->run, tk) : NULL;
      if (tk && (!cur || (live && !json_is_true(json_object_get(cur, "live")))))
        json_object_set_new(c->run, tk, json_pack("{s:s, s:b}", "worker", id, "live", live));
    }
    if (!live) continue;
    const char *pool;
    json_t *n;
    json_object_foreach(json_object_get(hb, "free"), pool, n) {
      json_int_t sum = json_integer_value(json_object_get(c->pool_free, pool)) + json_integer_value(n);
      json_object_set_new(c->pool_free, pool, json_integer(sum));
    }
  }
  return job ? why_ahead(v, c, job) : ALTAR_OK;
}

/* Workers reading pool's jobs topic (the consumer group's members), asked
 * of the log once per pool per render; -1 when it cannot say. */
static int64_t pool_workers(const altar_fleet_view_t *v, why_ctx_t *c, const char *pool) {
  json_t *have = json_object_get(c->pool_workers, pool);
  if (have) return json_integer_value(have);
  char topic[512];
  size_t n = 0;
  altar_error_t e = {0};
  int64_t got = -1;
  if (altar_pool_topic(v->topic[R_JOBS], pool, topic, sizeof topic, NULL) == ALTAR_OK &&
      altar_transport_topic_members(v->admin, ALTAR_WORKER_GROUP, topic, 2000, &n, &e) == ALTAR_OK)
    got = (int64_t)n;
  json_object_set_new(c->pool_workers, pool, json_integer(got));
  return got;
}

static void why_pool_facts(const altar_fleet_view_t *v, why_ctx_t *c, const char *pool, altar_why_facts_t *f) {
  f->pool = pool;
  f->pool_workers = pool_workers(v, c, pool);
  json_t *fr = json_object_get(c->pool_free, pool);
  f->pool_free = fr ? json_integer_value(fr) : -1;
}

/* A shard's facts, with the storage the borrowed group name points into. */
typedef struct shard_facts {
  altar_why_facts_t f;
  char gname[2048];
} shard_facts_t;

/* The facts of a recorded shard. */
static void rec_facts(const altar_fleet_view_t *v, why_ctx_t *c, const rec_t *r, shard_facts_t *sf) {
  char gkey[2048];
  snprintf(gkey, sizeof gkey, "%s\n%s", r->kind, r->group_key ? r->group_key : "");
  snprintf(sf->gname, sizeof sf->gname, "%s:%s", r->kind, r->group_key ? r->group_key : "");
  const char *ev = r->group_key ? event_name(json_object_get(v->groups, gkey)) : NULL;
  json_t *run = r->task_key[0] ? json_object_get(c->run, r->task_key) : NULL;
  const char *worker = json_string_value(json_object_get(run, "worker"));
  bool live = json_is_true(json_object_get(run, "live"));
  /* A heartbeat lists at most a few hundred keys: else the worker of the
   * run's latest status event holds it (a retry put back to pending has
   * none: its last event was its failure). Without any heartbeat of that
   * worker nothing says it went silent. */
  if (!worker && (r->state == ALTAR_STATE_RUNNING || (r->state == ALTAR_STATE_PENDING && r->restarts == 0))) {
    char hk[2048];
    snprintf(hk, sizeof hk, "%s/%s", r->backend, r->external_id);
    worker = json_string_value(json_object_get(v->hosts, hk));
    json_t *hb = worker ? json_object_get(v->workers, worker) : NULL;
    live = !hb || hb_live(hb, c->now);
  }
  sf->f = (altar_why_facts_t){
      .now = c->now,
      .state = r->state,
      .consumed = r->consumed,
      .failure_reason = r->reason,
      .group_cancelled = (ev && !strcmp(ev, "cancelled")) || json_object_get(v->cancelled_jobs, r->job_id),
      .group = sf->gname,
      .held_error = r->group_key ? json_string_value(json_object_get(v->s.held, gkey)) : NULL,
      .retry_due = r->retry_due,
      .run_worker = worker,
      .run_worker_live = live,
      .forwarded_by = r->task_key[0] ? json_string_value(json_object_get(v->forwarded, r->task_key)) : NULL,
      .shards_ahead = -1,
      .jobs_ahead = -1,
  };
  /* Only a shard back on its jobs topic asks about its pool (a log call). */
  altar_why_facts_t *f = &sf->f;
  if (r->state == ALTAR_STATE_PENDING && !(f->retry_due > f->now) && !f->run_worker) why_pool_facts(v, c, r->pool, f);
}

/* The reason of a recorded shard (JSON null when it runs or is done). */
static json_t *rec_why(const altar_fleet_view_t *v, why_ctx_t *c, const rec_t *r) {
  shard_facts_t sf;
  rec_facts(v, c, r, &sf);
  json_t *j = altar__why_json(&sf.f);
  return j ? j : json_null();
}

/* The facts of a shard known only from its job message. */
static void queued_facts(const altar_fleet_view_t *v, why_ctx_t *c, const char *job, const char *tk, const json_t *e,
                         shard_facts_t *sf) {
  place_t pl;
  const waiting_msg_t *at =
      place_of(e, &pl) ? altar__why_waiting_find(c->waiting, c->n_waiting, pl.pool, pl.partition, pl.offset) : NULL;
  sf->gname[0] = 0;
  sf->f = (altar_why_facts_t){
      .now = c->now,
      .state = -1,
      .group_cancelled = json_object_get(v->cancelled_jobs, job) != NULL,
      .forwarded_by = json_string_value(json_object_get(v->forwarded, tk)),
      .shards_ahead = at ? at->shards_ahead : -1,
      .jobs_ahead = at ? at->jobs_ahead : -1,
  };
  why_pool_facts(v, c, pl.pool, &sf->f);
}

/* The reason of a shard known only from its job message. */
static json_t *queued_why(const altar_fleet_view_t *v, why_ctx_t *c, const char *job, const char *tk, const json_t *e) {
  shard_facts_t sf;
  queued_facts(v, c, job, tk, e, &sf);
  json_t *j = altar__why_json(&sf.f);
  return j ? j : json_null();
}

/* One waiting shard (no record yet) as the job page lists it. */
/* A queued shard's place as the pages show it: pool, jobs topic, partition, offset. */
static json_t *place_json(const altar_fleet_view_t *v, const json_t *e) {
  place_t pl;
  place_of(e, &pl);
  char topic[512];
  if (altar_pool_topic(v->topic[R_JOBS], pl.pool, topic, sizeof topic, NULL)) snprintf(topic, sizeof topic, "%s", "");
  return json_pack("{s:o, s:o, s:i, s:I}", "pool", jstr(pl.pool), "topic", *topic ? jstr(topic) : json_null(),
                   "partition", (int)pl.partition, "offset", (json_int_t)pl.offset);
}

static json_t *queued_json(const altar_fleet_view_t *v, why_ctx_t *c, const char *job, const char *tk,
                           const json_t *e) {
  json_t *by = json_object_get(v->forwarded, tk);
  json_t *o = place_json(v, e);
  if (o)
    json_object_update_new(o, json_pack("{s:s, s:s, s:O, s:o}", "task_key", tk, "state", "waiting", "forwarded_from",
                                        by ? by : json_null(), "why", queued_why(v, c, job, tk, e)));
  return o;
}

/* The worker of r's latest status event, or NULL. */
static const char *rec_worker(const altar_fleet_view_t *v, const rec_t *r) {
  char key[2048];
  snprintf(key, sizeof key, "%s/%s", r->backend, r->external_id);
  return json_string_value(json_object_get(v->hosts, key));
}

/* A shard's labels as a JSON object (from its "KEY=VALUE" lines). */
static json_t *labels_json(const rec_t *r) {
  json_t *o = json_object();
  for (const char *p = r->labels; o && p && *p;) {
    const char *nl = strchr(p, '\n'), *eq = strchr(p, '=');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (eq && eq < p + len) {
      char *k = strndup(p, (size_t)(eq - p)), *val = strndup(eq + 1, (size_t)(p + len - eq - 1));
      if (k && val) json_object_set_new(o, k, jstr(val));
      free(k);
      free(val);
    }
    p = nl ? nl + 1 : NULL;
  }
  return o;
}

static json_t *shard_json(const altar_fleet_view_t *v, why_ctx_t *c, const rec_t *r) {
  const char *worker = rec_worker(v, r);
  /* The host its worker announced, else the worker id up to its ':' (host:pid). */
  char host[300] = "";
  const char *announced =
      worker ? json_string_value(json_object_get(json_object_get(v->workers, worker), "host")) : NULL;
  if (announced) snprintf(host, sizeof host, "%s", announced);
  else if (worker) snprintf(host, sizeof host, "%.*s", (int)strcspn(worker, ":"), worker);
  json_t *failure =
      r->reason ? json_pack("{s:o, s:o}", "reason", jstr(r->reason), "detail", jstr(r->detail)) : json_null();
  /* Every run in order with what ended it; one that ran once is its record. */
  json_t *runs = r->attempts ? json_deep_copy(r->attempts) : json_array();
  if (runs && !r->attempts)
    json_array_append_new(runs, json_pack("{s:I, s:o, s:o, s:o, s:I, s:s, s:o, s:o, s:o, s:b, s:o, s:o}", "attempt",
                                          (json_int_t)(r->restarts + 1), "backend", jstr(r->backend), "external_id",
                                          jstr(r->external_id), "worker", jstr(worker), "restart_count",
                                          (json_int_t)r->restarts, "state", shard_state(r), "reason", jstr(r->reason),
                                          "detail", jstr(r->detail), "exit_code", json_null(), "deterministic", 0,
                                          "started_at", json_null(), "ended_at", json_null()));
  json_int_t n_runs =
      r->attempts ? (json_int_t)json_array_size(r->attempts) + r->attempts_dropped : (json_int_t)(r->restarts + 1);
  json_t *by = r->task_key[0] ? json_object_get(v->forwarded, r->task_key) : NULL;
  json_t *o =
      json_pack("{s:o, s:o, s:s, s:I, s:o, s:I, s:b, s:o, s:o, s:o, s:O, s:O}", "backend", jstr(r->backend),
                "external_id", jstr(r->external_id), "state", shard_state(r), "attempts", n_runs, "attempt_list",
                runs ? runs : json_array(), "attempts_dropped", (json_int_t)r->attempts_dropped, "consumed",
                r->consumed, "worker", jstr(worker), "host", *host ? jstr(host) : json_null(), "failure",
                failure ? failure : json_null(), "outputs", r->outputs, "forwarded_from", by ? by : json_null());
  char *name = o ? altar__shard_name(r->labels) : NULL;
  if (name) json_object_set_new(o, "name", json_string(name));
  free(name);
  if (o && c) {
    json_object_set_new(o, "task_key", jstr(r->task_key));
    json_object_set_new(o, "why", rec_why(v, c, r));
  }
  return o;
}

/* Per job: the tallies, group counts and outputs of the records, plus jobs
 * known only from the jobs topic so far. */
typedef struct job {
  const char *id;
  double submitted_at; /* < 0: unknown */
  tally_t t;
  uint64_t fired, dead, cancelled, open;
  uint64_t waiting;      /* shards on a jobs topic with no record yet */
  json_t *waiting_pools; /* pool → such shards */
  json_t *outputs;       /* of shards in fired groups */
  size_t outputs_total;
  json_t *seen_groups; /* kind\ngroup_key → true */
} job_t;

typedef struct jobs {
  job_t *v;
  size_t n;
  json_t *index; /* job id → index */
} jobs_t;

static job_t *job_get(jobs_t *js, const char *id) {
  json_t *ix = json_object_get(js->index, id);
  if (ix) return &js->v[json_integer_value(ix)];
  job_t *n = realloc(js->v, (js->n + 1) * sizeof *n);
  if (!n) return NULL;
  js->v = n;
  job_t *j = &js->v[js->n];
  *j = (job_t){.id = id,
               .submitted_at = -1,
               .outputs = json_array(),
               .seen_groups = json_object(),
               .waiting_pools = json_object()};
  json_object_set_new(js->index, id, json_integer((json_int_t)js->n));
  js->n++;
  return j;
}

static void jobs_free(jobs_t *js) {
  for (size_t i = 0; i < js->n; i++) {
    json_decref(js->v[i].outputs);
    json_decref(js->v[i].seen_groups);
    json_decref(js->v[i].waiting_pools);
  }
  free(js->v);
  json_decref(js->index);
}

static int by_submit_desc(const void *a, const void *b) {
  const job_t *x = a, *y = b;
  if (x->submitted_at != y->submitted_at) return x->submitted_at < y->submitted_at ? 1 : -1;
  return strcmp(x->id, y->id);
}

static int build_jobs(const altar_fleet_view_t *v, jobs_t *js) {
  *js = (jobs_t){.index = json_object()};
  if (!js->index) return ALTAR_ENOMEM;
  for (size_t i = 0; i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    job_t *j = job_get(js, r->job_id);
    if (!j) return ALTAR_ENOMEM;
    tally_add(&j->t, r);
    if (!r->group_key) continue;
    char key[2048];
    snprintf(key, sizeof key, "%s\n%s", r->kind, r->group_key);
    const char *ev = event_name(json_object_get(v->groups, key));
    if (!json_object_get(j->seen_groups, key)) {
      json_object_set_new(j->seen_groups, key, json_true());
      if (!ev) j->open++;
    }
    if (ev && !strcmp(ev, "fired")) {
      for (size_t k = 0; k < json_array_size(r->outputs); k++, j->outputs_total++)
        if (json_array_size(j->outputs) < OUTPUTS_PER_JOB) json_array_append(j->outputs, json_array_get(r->outputs, k));
    }
  }
  const char *gk;
  json_t *g;
  json_object_foreach(v->groups, gk, g) {
    const char *jid = json_string_value(json_object_get(g, "job_id"));
    job_t *j = job_get(js, jid ? jid : "");
    if (!j) return ALTAR_ENOMEM;
    if (!strcmp(event_name(g), "fired")) j->fired++;
    else if (!strcmp(event_name(g), "cancelled")) j->cancelled++;
    else j->dead++;
  }
  /* Shards on a jobs topic that no worker has recorded yet: waiting (for a
   * worker of their pool, or a free slot). */
  const char *jid;
  json_t *q;
  json_object_foreach(v->queued, jid, q) {
    job_t *j = job_get(js, jid);
    if (!j) return ALTAR_ENOMEM;
    const char *tk;
    json_t *pool;
    json_object_foreach(q, tk, pool) {
      if (is_recorded(v, tk)) continue;
      j->waiting++;
      place_t pl;
      place_of(pool, &pl);
      const char *p = pl.pool;
      json_int_t n = json_integer_value(json_object_get(j->waiting_pools, p));
      json_object_set_new(j->waiting_pools, p, json_integer(n + 1));
    }
  }
  json_t *ts;
  json_object_foreach(v->submitted, jid, ts) {
    job_t *j = job_get(js, jid);
    if (!j) return ALTAR_ENOMEM;
    j->submitted_at = json_real_value(ts);
  }
  /* job ids are keys of objects that outlive js; the sort moves only the structs */
  if (js->n) qsort(js->v, js->n, sizeof *js->v, by_submit_desc);
  return ALTAR_OK;
}

/* v's job summaries, computed again only when what they are computed from
 * was read since (counted in jobs_builds). NULL when out of memory. */
static const jobs_t *jobs_of(altar_fleet_view_t *v) {
  uint64_t at = jobs_inputs_read(v);
  if (v->jobs && v->jobs_at == at) return v->jobs;
  if (v->jobs) jobs_free(v->jobs);
  free(v->jobs);
  v->jobs = calloc(1, sizeof *v->jobs);
  if (!v->jobs || build_jobs(v, v->jobs)) {
    if (v->jobs) jobs_free(v->jobs);
    free(v->jobs);
    v->jobs = NULL;
    return NULL;
  }
  v->jobs_at = at;
  v->counters.jobs_builds++;
  return v->jobs;
}

/* A job's state in one word, its badge (the jobs list's state filter). */
static const char *job_state(const job_t *j) {
  if (j->cancelled && !j->open && !j->dead) return "cancelled";
  if (j->dead) return "dead_lettered";
  if (j->waiting) return "waiting";
  if (j->open || j->t.by_state[ALTAR_STATE_PENDING] || j->t.by_state[ALTAR_STATE_RUNNING]) return "running";
  return j->fired ? "fired" : "pending";
}

static json_t *job_row(const job_t *j) {
  json_t *o = json_pack("{s:o, s:o, s:o, s:{s:I, s:I, s:I, s:I}, s:o, s:I, s:I, s:o}", "job_id", jstr(j->id),
                        "submitted_at", j->submitted_at >= 0 ? json_real(j->submitted_at) : json_null(), "shards",
                        tally_json(&j->t), "groups", "fired", (json_int_t)j->fired, "dead_lettered",
                        (json_int_t)j->dead, "cancelled", (json_int_t)j->cancelled, "open", (json_int_t)j->open,
                        "outputs", json_deep_copy(j->outputs), "outputs_total", (json_int_t)j->outputs_total, "waiting",
                        (json_int_t)j->waiting, "waiting_pools", json_deep_copy(j->waiting_pools));
  if (o) json_object_set_new(o, "state", json_string(job_state(j)));
  return o;
}

static json_t *render_jobs(altar_fleet_view_t *v, const altar_fleet_query_t *q, altar_error_t *err) {
  altar_shard_filter_t f;
  if (altar__shard_filter_parse(q, true, &f, err)) return NULL;
  /* The jobs with a recorded shard that matches kind, label and worker. */
  json_t *hits = altar__shard_filter_by_shard(&f) ? json_object() : NULL;
  for (size_t i = 0; hits && i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    if (!json_object_get(hits, r->job_id) && altar__shard_filter_match(&f, NULL, r->kind, r->labels, rec_worker(v, r)))
      json_object_set_new(hits, r->job_id, json_true());
  }
  const jobs_t *js = jobs_of(v);
  if (!js || (altar__shard_filter_by_shard(&f) && !hits)) {
    json_decref(hits);
    altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return NULL;
  }
  size_t off, lim, idx = 0;
  page_bounds(q, &off, &lim);
  json_t *rows = json_array();
  for (size_t i = 0; rows && i < js->n; i++) {
    if ((f.state && strcmp(f.state, job_state(&js->v[i]))) || (hits && !json_object_get(hits, js->v[i].id))) continue;
    if (idx++ >= off && json_array_size(rows) < lim) json_array_append_new(rows, job_row(&js->v[i]));
  }
  json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:o}", "total", (json_int_t)idx, "total_all", (json_int_t)js->n, "offset",
                        (json_int_t)off, "limit", (json_int_t)lim, "jobs", rows ? rows : json_array());
  json_decref(hits);
  if (!o) altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  return o;
}

/* The members of group (kind, key) in the snapshot, at most MEMBERS_PER_GROUP. */
static json_t *members_json(const altar_fleet_view_t *v, why_ctx_t *c, const char *kind, const char *key,
                            size_t *ptotal) {
  json_t *a = json_array();
  *ptotal = 0;
  for (size_t i = 0; a && i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    bool same = key ? r->group_key && !strcmp(r->group_key, key) && !strcmp(r->kind, kind) : !r->group_key;
    if (!same) continue;
    if ((*ptotal)++ < MEMBERS_PER_GROUP) json_array_append_new(a, shard_json(v, c, r));
  }
  return a;
}

/* Calls fn for each shard of job that is not running, with its reason:
 * recorded ones in ledger order, then those known only from the jobs topic. */
/* The facts decide a reason for each shard; JSON is made only for the
 * shards a page lists (counting 10^5 waiting shards allocates nothing). */
typedef int (*why_fn)(void *ctx, const rec_t *r, const char *tk, const json_t *queued, const altar_why_facts_t *f,
                      altar_why_reason_t why);

static int why_each(const altar_fleet_view_t *v, why_ctx_t *c, const char *job, why_fn fn, void *ctx) {
  shard_facts_t sf;
  for (size_t i = 0; i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    if (strcmp(r->job_id, job)) continue;
    rec_facts(v, c, r, &sf);
    altar_why_reason_t why = altar__why_decide(&sf.f);
    int rc = why == ALTAR_WHY_NONE ? 0 : fn(ctx, r, r->task_key, NULL, &sf.f, why);
    if (rc) return rc;
  }
  const char *tk;
  json_t *e;
  json_object_foreach(json_object_get(v->queued, job), tk, e) {
    if (is_recorded(v, tk)) continue;
    queued_facts(v, c, job, tk, e, &sf);
    altar_why_reason_t why = altar__why_decide(&sf.f);
    int rc = why == ALTAR_WHY_NONE ? 0 : fn(ctx, NULL, tk, e, &sf.f, why);
    if (rc) return rc;
  }
  return 0;
}

static int count_one(void *ctx, const rec_t *r, const char *tk, const json_t *queued, const altar_why_facts_t *f,
                     altar_why_reason_t why) {
  (void)r, (void)tk, (void)queued, (void)f;
  ((int64_t *)ctx)[why]++;
  return 0;
}

static json_t *counts_json(const int64_t *n) {
  json_t *o = json_object();
  for (int r = 1; o && r < ALTAR_WHY_COUNT; r++)
    if (n[r]) json_object_set_new(o, altar__why_name((altar_why_reason_t)r), json_integer(n[r]));
  return o;
}

/* reason → how many of job's shards wait for it. */
static json_t *why_counts(const altar_fleet_view_t *v, why_ctx_t *c, const char *job) {
  int64_t n[ALTAR_WHY_COUNT] = {0};
  why_each(v, c, job, count_one, n);
  return counts_json(n);
}

typedef struct why_page {
  const altar_fleet_view_t *v;
  why_ctx_t *c;
  const char *job;
  size_t idx, off, lim;
  json_t *rows;
  int64_t counts[ALTAR_WHY_COUNT];
} why_page_t;

static int why_row(void *ctx, const rec_t *r, const char *tk, const json_t *queued, const altar_why_facts_t *f,
                   altar_why_reason_t reason) {
  why_page_t *p = ctx;
  p->counts[reason]++;
  if (p->idx++ < p->off || json_array_size(p->rows) >= p->lim) return 0;
  json_t *why = altar__why_json(f);
  if (!why) return ALTAR_ENOMEM;
  json_t *row = r ? json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "task_key", jstr(tk), "state", shard_state(r),
                              "kind", jstr(r->kind), "group_key", jstr(r->group_key), "backend", jstr(r->backend),
                              "external_id", jstr(r->external_id), "pool", jstr(r->pool))
                  : place_json(p->v, queued);
  if (row && !r) json_object_update_new(row, json_pack("{s:s, s:s}", "task_key", tk, "state", "waiting"));
  if (row) json_object_set(row, "why", why);
  json_decref(why);
  return row ? json_array_append_new(p->rows, row) : ALTAR_ENOMEM;
}

/* Page "why": each of a job's shards that is not running, with its reason
 * (altar status prints it; /api/why serves it). */
static json_t *render_why(const altar_fleet_view_t *v, const altar_fleet_query_t *q, altar_error_t *err) {
  if (!q || !q->job) {
    altar_error_set(err, ALTAR_EINVAL, "why: the query needs id=JOB_ID");
    return NULL;
  }
  bool known = json_object_get(v->queued, q->job) || json_object_get(v->cancelled_jobs, q->job);
  for (size_t i = 0; !known && i < v->s.n_recs; i++) known = !strcmp(v->s.recs[i].job_id, q->job);
  if (!known) {
    altar_error_set(err, ALTAR_ENOTFOUND, "job '%s' not found", q->job);
    return NULL;
  }
  why_ctx_t wc;
  why_page_t p = {.v = v, .c = &wc, .job = q->job, .rows = json_array()};
  page_bounds(q, &p.off, &p.lim);
  int rc = why_ctx_init(v, q->job, &wc) || !p.rows ? ALTAR_ENOMEM : why_each(v, &wc, q->job, why_row, &p);
  why_ctx_free(&wc);
  json_t *o =
      rc ? NULL
         : json_pack("{s:s, s:I, s:I, s:I, s:o, s:O}", "job_id", q->job, "total", (json_int_t)p.idx, "offset",
                     (json_int_t)p.off, "limit", (json_int_t)p.lim, "counts", counts_json(p.counts), "shards", p.rows);
  json_decref(p.rows);
  if (!o) altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  return o;
}

/* Records by their labels (dashboard/shard_order.h). */
static int rec_order(const void *pa, const void *pb) {
  const rec_t *a = *(const rec_t *const *)pa, *b = *(const rec_t *const *)pb;
  altar_shard_sort_key_t ka = {a->kind, a->group_key, a->labels, a->task_key};
  altar_shard_sort_key_t kb = {b->kind, b->group_key, b->labels, b->task_key};
  return altar__shard_order_cmp(&ka, &kb);
}

/* A shard of a job's filtered list, with what the filters read. */
static json_t *shard_row(const altar_fleet_view_t *v, why_ctx_t *c, const rec_t *r) {
  json_t *o = shard_json(v, c, r);
  if (o)
    json_object_update_new(o, json_pack("{s:o, s:o, s:o}", "kind", jstr(r->kind), "group_key", jstr(r->group_key),
                                        "labels", labels_json(r)));
  return o;
}

/* One page of job's shards that match f (recorded ones in ledger order,
 * then those with no record yet), their number and their states, into o. */
static int job_matches(const altar_fleet_view_t *v, why_ctx_t *c, const char *job, const altar_shard_filter_t *f,
                       size_t off, size_t lim, json_t *o) {
  json_t *rows = json_array(), *states = json_object();
  size_t idx = 0, n_hits = 0;
  const rec_t **hits = malloc((v->s.n_recs ? v->s.n_recs : 1) * sizeof *hits);
  for (size_t i = 0; hits && rows && states && i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    if (strcmp(r->job_id, job)) continue;
    const char *st = shard_state(r);
    if (!altar__shard_filter_match(f, st, r->kind, r->labels, f->worker ? rec_worker(v, r) : NULL)) continue;
    json_object_set_new(states, st, json_integer(json_integer_value(json_object_get(states, st)) + 1));
    hits[n_hits++] = r;
  }
  /* Paged in label order, so a page holds the same shards between polls:
   * only the shards up to the page's end are put in order. */
  if (n_hits) altar__select_first((const void **)hits, n_hits, off < n_hits ? off + lim : n_hits, rec_order);
  for (size_t i = 0; rows && i < n_hits; i++)
    if (idx++ >= off && json_array_size(rows) < lim) json_array_append_new(rows, shard_row(v, c, hits[i]));
  if (!hits) {
    json_decref(rows);
    rows = NULL;
  }
  free(hits);
  /* A shard with no record has no kind, labels or worker yet. */
  bool waiting_match = !altar__shard_filter_by_shard(f) && (!f->state || !strcmp(f->state, "waiting"));
  const char *tk;
  json_t *e;
  json_object_foreach(waiting_match ? json_object_get(v->queued, job) : NULL, tk, e) {
    if (is_recorded(v, tk) || !rows || !states) continue;
    json_object_set_new(states, "waiting", json_integer(json_integer_value(json_object_get(states, "waiting")) + 1));
    if (idx++ >= off && json_array_size(rows) < lim) json_array_append_new(rows, queued_json(v, c, job, tk, e));
  }
  if (!rows || !states) {
    json_decref(rows);
    json_decref(states);
    return ALTAR_ENOMEM;
  }
  json_object_set_new(o, "shards_matched", json_integer((json_int_t)idx));
  json_object_set_new(o, "matched_states", states);
  json_object_set_new(o, "shard_list", rows);
  return ALTAR_OK;
}

static json_t *render_job(altar_fleet_view_t *v, const altar_fleet_query_t *q, altar_error_t *err) {
  if (!q || !q->job) {
    altar_error_set(err, ALTAR_EINVAL, "job: the query needs id=JOB_ID");
    return NULL;
  }
  altar_shard_filter_t f;
  if (altar__shard_filter_parse(q, false, &f, err)) return NULL;
  bool filtered = altar__shard_filter_any(&f);
  const jobs_t *js = jobs_of(v);
  if (!js) {
    altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return NULL;
  }
  json_t *ix = json_object_get(js->index, q->job);
  const job_t *j = NULL; /* the index is of build order, not of the sorted list */
  for (size_t i = 0; ix && i < js->n && !j; i++)
    if (!strcmp(js->v[i].id, q->job)) j = &js->v[i];
  if (!j) {
    altar_error_set(err, ALTAR_ENOTFOUND, "job '%s' not found", q->job);
    return NULL;
  }
  why_ctx_t wc;
  if (why_ctx_init(v, q->job, &wc)) {
    why_ctx_free(&wc);
    altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return NULL;
  }
  /* Its groups: those with a group event and those still open in the ledger. */
  json_t *keys = json_object();
  const char *gk;
  json_t *g;
  json_object_foreach(v->groups, gk, g) {
    const char *jid = json_string_value(json_object_get(g, "job_id"));
    if (!strcmp(jid ? jid : "", q->job)) json_object_set_new(keys, gk, json_true());
  }
  json_object_update(keys, j->seen_groups);
  size_t off, lim;
  page_bounds(q, &off, &lim);
  json_t *groups = json_array();
  size_t idx = 0;
  json_t *t;
  /* Filtered, the page lists the matching shards instead of groups. The
   * page's groups first, then their members in one walk of the records
   * (not one walk per group). */
  json_t *members = json_object();
  json_object_foreach(filtered || !members ? NULL : keys, gk, t) {
    if (idx++ < off || json_object_size(members) >= lim) continue;
    json_object_set_new(members, gk, json_array());
  }
  json_t *totals = json_object();
  for (size_t i = 0; json_object_size(members) && totals && i < v->s.n_recs; i++) {
    const rec_t *r = &v->s.recs[i];
    if (!r->group_key) continue;
    char gkey[2048];
    snprintf(gkey, sizeof gkey, "%s\n%s", r->kind, r->group_key);
    json_t *list = json_object_get(members, gkey);
    if (!list) continue;
    json_object_set_new(totals, gkey, json_integer(json_integer_value(json_object_get(totals, gkey)) + 1));
    json_array_append_new(list, json_integer((json_int_t)i)); /* rendered below, in label order */
  }
  json_t *list;
  json_object_foreach(members, gk, list) {
    size_t n = json_array_size(list);
    const rec_t **rs = malloc((n ? n : 1) * sizeof *rs);
    for (size_t k = 0; rs && k < n; k++) rs[k] = &v->s.recs[json_integer_value(json_array_get(list, k))];
    if (rs && n) qsort(rs, n, sizeof *rs, rec_order);
    json_array_clear(list);
    for (size_t k = 0; rs && k < n && k < MEMBERS_PER_GROUP; k++)
      json_array_append_new(list, shard_json(v, &wc, rs[k]));
    free(rs);
  }
  json_object_foreach(members, gk, list) {
    const char *nl = strchr(gk, '\n');
    char *kind = strndup(gk, nl ? (size_t)(nl - gk) : strlen(gk));
    const char *key = nl ? nl + 1 : "";
    const json_t *ev = group_event(v, kind, key);
    json_array_append_new(groups,
                          json_pack("{s:o, s:o, s:s, s:o, s:o, s:I, s:O}", "kind", jstr(kind), "group_key", jstr(key),
                                    "state", ev ? event_name(ev) : "open", "ts",
                                    ev ? json_deep_copy(json_object_get(ev, "ts")) : json_null(), "event_id",
                                    ev ? json_deep_copy(json_object_get(ev, "event_id")) : json_null(), "members_total",
                                    json_integer_value(json_object_get(totals, gk)), "members", list));
    free(kind);
  }
  json_decref(members);
  json_decref(totals);
  size_t n_ungrouped = 0;
  json_t *ungrouped = json_array();
  for (size_t i = 0; ungrouped && !filtered && i < v->s.n_recs; i++)
    if (!v->s.recs[i].group_key && !strcmp(v->s.recs[i].job_id, q->job) && n_ungrouped++ < MEMBERS_PER_GROUP)
      json_array_append_new(ungrouped, shard_json(v, &wc, &v->s.recs[i]));
  json_t *o = job_row(j);
  json_object_set_new(o, "groups_total", json_integer((json_int_t)json_object_size(keys)));
  json_object_set_new(o, "offset", json_integer((json_int_t)off));
  json_object_set_new(o, "limit", json_integer((json_int_t)lim));
  json_object_set_new(o, "group_list", groups);
  json_object_set_new(o, "ungrouped", ungrouped);
  json_object_set_new(o, "filtered", json_boolean(filtered));
  if (filtered && job_matches(v, &wc, q->job, &f, off, lim, o)) {
    json_decref(o);
    o = NULL;
  }
  /* Its shards with no record yet, each with why it waits, and how many of
   * all its shards wait for each reason. */
  json_t *waiting = json_array(), *counts = why_counts(v, &wc, q->job);
  const char *tk;
  json_t *e;
  json_object_foreach(json_object_get(v->queued, q->job), tk, e) {
    if (is_recorded(v, tk) || json_array_size(waiting) >= MEMBERS_PER_GROUP) continue;
    json_array_append_new(waiting, queued_json(v, &wc, q->job, tk, e));
  }
  json_object_set_new(o, "waiting_list", waiting ? waiting : json_array());
  json_object_set_new(o, "why_counts", counts ? counts : json_object());
  if (!o) altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  json_decref(keys);
  why_ctx_free(&wc);
  return o;
}

/* A task key as the shard page takes it: what a ledger key may hold. */
static bool task_key_ok(const char *k) {
  size_t n = strnlen(k, ALTAR_TASK_KEY_LEN + 1);
  if (!n || n > ALTAR_TASK_KEY_LEN) return false;
  for (size_t i = 0; i < n; i++)
    if (!strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-", k[i])) return false;
  return true;
}

/* Page "shard": one shard by its task key: its labels, state, why it is not
 * running, every attempt in order and its outputs; a shard with no record
 * yet is shown waiting with its place on its jobs topic. */
static json_t *render_shard(const altar_fleet_view_t *v, const altar_fleet_query_t *q, altar_error_t *err) {
  if (!q || !q->key) {
    altar_error_set(err, ALTAR_EINVAL, "key: the query needs key=TASK_KEY");
    return NULL;
  }
  if (!task_key_ok(q->key)) {
    altar_error_set(err, ALTAR_EINVAL, "key: expected 1 to %d letters, digits, '.', '_' or '-'", ALTAR_TASK_KEY_LEN);
    return NULL;
  }
  const rec_t *r = NULL;
  for (size_t i = 0; !r && i < v->s.n_recs; i++)
    if (!strcmp(v->s.recs[i].task_key, q->key)) r = &v->s.recs[i];
  const char *job = r ? r->job_id : NULL, *jid;
  const json_t *queued = NULL, *qs;
  json_object_foreach(r ? NULL : v->queued, jid, qs) {
    if ((queued = json_object_get(qs, q->key))) {
      job = jid;
      break;
    }
  }
  if (!r && !queued) {
    altar_error_set(err, ALTAR_ENOTFOUND, "key: no shard with task key '%s'", q->key);
    return NULL;
  }
  why_ctx_t wc;
  json_t *o = NULL;
  if (!why_ctx_init(v, job, &wc)) {
    if (r) {
      o = shard_row(v, &wc, r);
      const json_t *ev = r->group_key ? group_event(v, r->kind, r->group_key) : NULL;
      if (o)
        json_object_update_new(o, json_pack("{s:o, s:o, s:s}", "job_id", jstr(r->job_id), "pool", jstr(r->pool),
                                            "group_state",
                                            ev             ? event_name(ev)
                                            : r->group_key ? "open"
                                                           : "none"));
    } else if ((o = queued_json(v, &wc, job, q->key, queued))) {
      json_object_update_new(o, json_pack("{s:s, s:o, s:[]}", "job_id", job, "labels", json_object(), "attempt_list"));
    }
  }
  why_ctx_free(&wc);
  if (!o) altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  return o;
}

static json_t *render_workers(const altar_fleet_view_t *v, const altar_fleet_query_t *q) {
  double now = altar_wall_s();
  size_t off, lim;
  page_bounds(q, &off, &lim);
  json_t *rows = json_array();
  size_t idx = 0, live = 0;
  const char *id;
  json_t *hb;
  json_object_foreach(v->workers, id, hb) {
    double ts = json_number_value(json_object_get(hb, "ts"));
    const char *event = json_string_value(json_object_get(hb, "event"));
    const char *state = event && !strcmp(event, "goodbye") ? "gone" : now - ts > STALE_S ? "silent" : "live";
    live += !strcmp(state, "live");
    if (idx++ < off || json_array_size(rows) >= lim) continue;
    json_t *row = json_deep_copy(hb);
    json_object_set_new(row, "state", json_string(state));
    json_object_set_new(row, "last_seen", json_real(ts));
    json_object_set_new(row, "age_s", json_real(now - ts));
    json_t *started = json_object_get(hb, "started_at");
    json_object_set_new(row, "up_s",
                        json_is_number(started) ? json_real(ts - json_number_value(started)) : json_null());
    json_array_append_new(rows, row);
  }
  return json_pack("{s:I, s:I, s:I, s:I, s:f, s:o}", "total", (json_int_t)json_object_size(v->workers), "live",
                   (json_int_t)live, "offset", (json_int_t)off, "limit", (json_int_t)lim, "stale_after_s", STALE_S,
                   "workers", rows ? rows : json_array());
}

static json_t *render_dead(const altar_fleet_view_t *v, const altar_fleet_query_t *q) {
  size_t off, lim;
  page_bounds(q, &off, &lim);
  json_t *dlq = json_array();
  size_t n = json_array_size(v->dlq);
  for (size_t i = off; dlq && i < n && i < off + lim; i++) /* newest first */
    json_array_append(dlq, json_array_get(v->dlq, n - 1 - i));
  json_t *groups = json_array();
  size_t idx = 0, total = 0;
  const char *gk;
  json_t *g;
  json_object_foreach(v->groups, gk, g) {
    if (strcmp(event_name(g), "dead_lettered")) continue;
    total++;
    if (idx++ < off || json_array_size(groups) >= lim) continue;
    size_t mt = 0;
    json_t *members = members_json(v, NULL, json_string_value(json_object_get(g, "kind")),
                                   json_string_value(json_object_get(g, "group_key")), &mt);
    json_t *row = json_deep_copy(g);
    json_object_del(row, "shards");
    json_object_set_new(row, "members_total", json_integer((json_int_t)mt));
    json_object_set_new(row, "members", members);
    json_array_append_new(groups, row);
  }
  return json_pack("{s:I, s:I, s:I, s:I, s:o, s:I, s:o}", "offset", (json_int_t)off, "limit", (json_int_t)lim,
                   "dlq_total", (json_int_t)v->dlq_total, "dlq_kept", (json_int_t)n, "dlq", dlq ? dlq : json_array(),
                   "dead_groups_total", (json_int_t)total, "dead_groups", groups ? groups : json_array());
}

int altar__fleet_reconciler_offsets(const char *ledger_path, altar_lag_list_t *l, altar_error_t *err) {
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_ledger_t *led = altar_ledger_rocksdb_open(ledger_path, &ro, err);
  if (!led) return err->code ? err->code : ALTAR_EIO;
  int rc = ALTAR_OK;
  for (size_t i = 0; i < l->n && !rc; i++) {
    altar_lag_entry_t *e = &l->entries[i];
    int64_t next = -1;
    rc = altar__reconciler_input_offset(led, e->topic, e->partition, &next, err);
    /* A commit on the log newer than the ledger's offset (none is, but a
     * reconciler of another ledger may have committed) is kept. */
    if (rc || next < 0 || (e->committed != ALTAR_OFFSET_INVALID && e->committed >= next)) continue;
    e->committed = next;
    e->lag = e->end > next ? e->end - next : 0;
  }
  altar_ledger_close(led);
  return rc;
}

/* The group's lag on topic; the reconciler's position is in its ledger, not
 * in the log's commits (written only on revoke and at shutdown). */
static int group_lag(altar_fleet_view_t *v, const char *group, const char *topic, altar_lag_list_t **pll,
                     altar_error_t *err) {
  *pll = NULL;
  if (!*topic) return altar_error_set(err, ALTAR_ENOTFOUND, "no topic configured");
  int rc = altar_transport_lag(v->admin, group, topic, 2000, pll, err);
  if (!rc && !strcmp(group, ALTAR_RECONCILER_GROUP)) rc = altar__fleet_reconciler_offsets(v->ledger_path, *pll, err);
  if (rc) {
    altar_lag_list_free(*pll);
    *pll = NULL;
  }
  return rc;
}

int altar_fleet_view_reconciler_lag(altar_fleet_view_t *v, altar_lag_list_t **pll, altar_error_t *err) {
  pthread_mutex_lock(&v->mu);
  int rc = group_lag(v, ALTAR_RECONCILER_GROUP, v->topic[R_STATUS], pll, err);
  pthread_mutex_unlock(&v->mu);
  return rc;
}

static json_t *lag_json(altar_fleet_view_t *v, const char *group, const char *topic) {
  altar_lag_list_t *ll = NULL;
  altar_error_t e = {0};
  if (group_lag(v, group, topic, &ll, &e)) {
    altar_lag_list_free(ll);
    return json_pack("{s:s, s:s, s:n, s:o}", "group", group, "topic", topic, "lag", "error", jstr(e.msg));
  }
  json_int_t sum = 0;
  for (size_t i = 0; i < ll->n; i++) sum += ll->entries[i].lag > 0 ? ll->entries[i].lag : 0;
  altar_lag_list_free(ll);
  return json_pack("{s:s, s:s, s:I}", "group", group, "topic", topic, "lag", sum);
}

static json_t *render_overview(altar_fleet_view_t *v) {
  tally_t t = {0};
  for (size_t i = 0; i < v->s.n_recs; i++) tally_add(&t, &v->s.recs[i]);
  uint64_t fired = 0, dead = 0, cancelled = 0;
  const char *gk;
  json_t *g;
  json_object_foreach(v->groups, gk, g) {
    if (!strcmp(event_name(g), "fired")) fired++;
    else if (!strcmp(event_name(g), "cancelled")) cancelled++;
    else dead++;
  }
  /* Rates against the oldest sample inside the window. */
  double now = altar_wall_s();
  sample_t cur = {now, t.by_state[2] + t.by_state[3], fired, dead};
  const sample_t *base = NULL;
  for (size_t i = 0; i < v->n_samples; i++) {
    const sample_t *s = &v->samples[i];
    if (now - s->t <= RATE_WINDOW_S && now - s->t > 0.5 && (!base || s->t < base->t)) base = s;
  }
  double dt = base ? now - base->t : 0;
  v->samples[v->next_sample] = cur;
  v->next_sample = (v->next_sample + 1) % SAMPLES;
  if (v->n_samples < SAMPLES) v->n_samples++;
  json_t *workers = render_workers(v, NULL);
  json_int_t live = json_integer_value(json_object_get(workers, "live"));
  json_int_t wtotal = json_integer_value(json_object_get(workers, "total"));
  json_decref(workers);
  const jobs_t *js = jobs_of(v);
  size_t n_jobs = js ? js->n : 0;
  /* What the serving process (the reconciler, or `altar dashboard`) costs,
   * and the ledger's disk. */
  altar_du_t du = {0};
  if (altar_footprint_du(v->ledger_path, ALTAR_FOOTPRINT_DU_MAX_ENTRIES, &du, NULL)) du = (altar_du_t){0};
  return json_pack("{s:f, s:I, s:o, s:{s:I, s:I, s:I}, s:{s:o, s:o, s:o, s:f}, s:{s:o, s:o}, s:{s:I, s:I}, s:I, "
                   "s:{s:s, s:o, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}, s:{s:I}}",
                   "now", now, "jobs", (json_int_t)n_jobs, "shards", tally_json(&t), "groups", "fired",
                   (json_int_t)fired, "dead_lettered", (json_int_t)dead, "cancelled", (json_int_t)cancelled, "rates",
                   "shards_per_s", dt > 0 ? json_real((double)(cur.done - base->done) / dt) : json_null(),
                   "fired_per_min", dt > 0 ? json_real((double)(cur.fired - base->fired) * 60.0 / dt) : json_null(),
                   "dead_per_min", dt > 0 ? json_real((double)(cur.dead - base->dead) * 60.0 / dt) : json_null(),
                   "window_s", dt, "lag", "workers", lag_json(v, ALTAR_WORKER_GROUP, v->topic[R_JOBS]), "reconciler",
                   lag_json(v, ALTAR_RECONCILER_GROUP, v->topic[R_STATUS]), "workers", "live", live, "total", wtotal,
                   "dlq_records", (json_int_t)v->dlq_total, "ledger", "path", v->ledger_path, "error",
                   *v->s.ledger_err ? jstr(v->s.ledger_err) : json_null(), "read_at", v->s.ledger_read_at, "disk_bytes",
                   (json_int_t)du.bytes, "disk_entries", (json_int_t)du.entries, "reads",
                   (json_int_t)v->counters.ledger_reads, "reads_in_render",
                   (json_int_t)v->counters.ledger_reads_in_render, "background_reads",
                   (json_int_t)v->counters.background_reads, "renders", (json_int_t)v->counters.renders, "jobs_builds",
                   (json_int_t)v->counters.jobs_builds, "background_reader", (int)v->reader_running, "server",
                   "rss_bytes", (json_int_t)altar_footprint_rss_bytes());
}

int altar__fleet_view_render(altar_fleet_view_t *v, const char *page, const altar_fleet_query_t *q, json_t **pout,
                             altar_error_t *err) {
  *pout = NULL;
  if (q && (q->offset < 0 || q->limit < 0)) return altar_error_set(err, ALTAR_EINVAL, "offset and limit must be >= 0");
  pthread_mutex_lock(&v->mu);
  refresh(v);
  v->last_render_ms = altar_mono_ms();
  if (v->reader_idle) pthread_cond_signal(&v->reader_wake);
  read_ledger(v, false, true);
  v->counters.renders++;
  json_t *o = NULL;
  if (!strcmp(page, "overview")) o = render_overview(v);
  else if (!strcmp(page, "jobs")) o = render_jobs(v, q, err);
  else if (!strcmp(page, "job")) o = render_job(v, q, err);
  else if (!strcmp(page, "why")) o = render_why(v, q, err);
  else if (!strcmp(page, "shard")) o = render_shard(v, q, err);
  else if (!strcmp(page, "workers")) o = render_workers(v, q);
  else if (!strcmp(page, "dead")) o = render_dead(v, q);
  else altar_error_set(err, ALTAR_ENOTFOUND, "no page '%s'", page);
  pthread_mutex_unlock(&v->mu);
  if (!o) return err && err->code ? err->code : altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  *pout = o;
  return ALTAR_OK;
}
