/* Replay: a fresh ledger from the beginning of the status topic (or from a
 * checkpoint), then only the group events no kept ledger already owns. */
#include "reconciler/daemon.h"
#include "altar/grow.h"

#include "altar/codec.h"
#include "altar/reconcile.h"
#include "reconciler/cancel.h"
#include "reconciler/checkpoint.h"
#include "reconciler/followup_seen.h"
#include "reconciler/followup_stage.h"
#include "reconciler/input_offsets.h"
#include "reconciler/settled.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct due {
  char *event_id;
  char *topic;
  char *key;
  altar_buf_t value;
} due_t;

typedef struct dues {
  due_t *v;
  size_t n, cap;
} dues_t;

/* A follow-up the replay made due: sent only if the log does not hold it. */
typedef struct fdue {
  char task_key[65];
  bool failed; /* recs are status events: known only by the replay */
  altar__followup_rec_t recs[2];
  size_t n;
  char event_id[65];
} fdue_t;

typedef struct fdues {
  fdue_t *v;
  size_t n, cap;
} fdues_t;

static void fdues_clear(fdues_t *d) {
  for (size_t i = 0; i < d->n; i++)
    for (size_t k = 0; k < d->v[i].n; k++) {
      free(d->v[i].recs[k].topic);
      free(d->v[i].recs[k].key);
      altar_buf_free(&d->v[i].recs[k].value);
    }
  free(d->v);
  memset(d, 0, sizeof *d);
}

static void dues_clear(dues_t *d) {
  for (size_t i = 0; i < d->n; i++) {
    free(d->v[i].event_id);
    free(d->v[i].topic);
    free(d->v[i].key);
    altar_buf_free(&d->v[i].value);
  }
  free(d->v);
  memset(d, 0, sizeof *d);
}

/* Marks done each partition of ti whose position reached its listed end,
 * and lowers a listed end that the log no longer has (a torn tail cut on
 * reopening): the replay then stops there, and the offsets it stores say so. */
static void settle_ends(altar_transport_t *t, const char *topic, altar_topic_info_t *ti, bool *done,
                        size_t *premaining) {
  altar_tp_t *pos = NULL;
  size_t npos = 0;
  altar_error_t ignored = {0};
  if (altar_transport_assignment(t, &pos, &npos, &ignored)) return; /* not offered: keep waiting */
  altar_topic_list_t *now = NULL;
  if (altar_transport_list_topics(t, topic, 10000, &now, &ignored)) now = NULL;
  for (size_t i = 0; i < ti->n_partitions; i++) {
    if (done[i]) continue;
    int64_t end = ti->partitions[i].end;
    for (size_t k = 0; now && now->n_topics && k < now->topics[0].n_partitions; k++)
      if (now->topics[0].partitions[k].partition == ti->partitions[i].partition &&
          now->topics[0].partitions[k].end < end)
        end = ti->partitions[i].end = now->topics[0].partitions[k].end;
    for (size_t k = 0; k < npos; k++)
      if (pos[k].partition == ti->partitions[i].partition) {
        if (pos[k].offset >= end) {
          done[i] = true;
          (*premaining)--;
        }
        break;
      }
  }
  altar_topic_list_free(now);
  free(pos);
}

/* Reads every partition of topic from its beginning up to its end offset as
 * of now, calling fn for each record. With pends, the listing whose end
 * offsets bounded the read is handed over (caller frees; NULL when the
 * topic does not exist). */
typedef int (*record_fn)(void *ctx, altar_msg_t *m, altar_error_t *err);

/* Where a read starts: each partition at a checkpoint's covered offset (else
 * at its beginning), and which offsets it needed that the log no longer has. */
typedef struct read_from {
  const altar_checkpoint_t *cp; /* NULL: every partition from its beginning */
  size_t n_gaps;
  char gaps[1024]; /* "P: A..B, ..." (cut when long) */
  /* The ledger being replaced (NULL: none) and, per partition number, the
   * next offset it had applied (-1: none): filled once the topic is listed. */
  altar_ledger_t *replaced;
  int64_t *covered;
  size_t n_covered;
} read_from_t;

/* Where the replaced ledger stands on each listed partition of topic. */
static int note_covered(read_from_t *rf, const char *topic, const altar_topic_info_t *ti, altar_error_t *err) {
  if (!rf || !rf->replaced || !ti) return ALTAR_OK;
  size_t n = 0;
  for (size_t i = 0; i < ti->n_partitions; i++)
    if (ti->partitions[i].partition >= 0 && (size_t)ti->partitions[i].partition + 1 > n)
      n = (size_t)ti->partitions[i].partition + 1;
  rf->covered = malloc((n ? n : 1) * sizeof *rf->covered);
  if (!rf->covered) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  rf->n_covered = n;
  for (size_t p = 0; p < n; p++) rf->covered[p] = -1;
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < ti->n_partitions; i++) {
    int32_t p = ti->partitions[i].partition;
    if (p >= 0) rc = altar__reconciler_input_offset(rf->replaced, topic, p, &rf->covered[p], err);
  }
  return rc;
}

/* True when the replaced ledger had applied m: group events m makes due
 * were decided there too, and are out or in its outbox (carried over). */
static bool is_covered(const read_from_t *rf, const altar_msg_t *m) {
  return rf && rf->covered && m->partition >= 0 && (size_t)m->partition < rf->n_covered &&
         m->offset < rf->covered[m->partition];
}

static void note_read_gap(read_from_t *rf, int32_t p, int64_t from, int64_t beginning) {
  size_t at = strlen(rf->gaps);
  if (at < sizeof rf->gaps - 64)
    snprintf(rf->gaps + at, sizeof rf->gaps - at, "%spartition %" PRId32 " offsets %" PRId64 "..%" PRId64,
             rf->n_gaps ? ", " : "", p, from, beginning - 1);
  rf->n_gaps++;
}

static int read_topic(const char *tname, const altar_strmap_t *props, const char *topic, record_fn fn, void *ctx,
                      altar_topic_list_t **pends, int32_t *pnparts, read_from_t *rf, altar_error_t *err) {
  if (pends) *pends = NULL;
  altar_transport_t *t = altar_transport_open(tname, props, NULL, err);
  if (!t) return err ? err->code : ALTAR_ETRANSPORT;
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, topic, 10000, &tl, err);
  if (rc == ALTAR_ENOTFOUND) { /* nothing was ever written */
    altar_transport_close(t);
    return ALTAR_OK;
  }
  if (rc) {
    altar_transport_close(t);
    return rc;
  }
  altar_topic_info_t *ti = tl->n_topics ? &tl->topics[0] : NULL;
  size_t np = ti ? ti->n_partitions : 0;
  if (pnparts) *pnparts = (int32_t)np; /* before any record: cancels need it (reconciler/cancel.h) */
  altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
  bool *done = calloc(np ? np : 1, sizeof *done);
  size_t remaining = 0;
  if (!tps || !done) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  if (!rc) rc = note_covered(rf, topic, ti, err);
  for (size_t i = 0; !rc && i < np; i++) {
    const altar_partition_info_t *pi = &ti->partitions[i];
    int64_t from = rf && rf->cp ? altar__checkpoint_offset(rf->cp, pi->partition) : -1;
    int64_t start = from >= 0 ? from : 0;
    if (rf && start < pi->beginning) note_read_gap(rf, pi->partition, start, pi->beginning);
    tps[i] = (altar_tp_t){topic, pi->partition, from >= 0 ? from : ALTAR_OFFSET_BEGINNING};
    done[i] = pi->end <= (from > pi->beginning ? from : pi->beginning);
    remaining += !done[i];
  }
  if (!rc && remaining) rc = altar_transport_assign(t, tps, np, err);
  while (!rc && remaining) {
    altar_msg_t *m = NULL;
    altar_error_t ce = {0};
    rc = altar_transport_consume(t, 1000, &m, &ce);
    if (rc == ALTAR_EINTEGRITY) {
      /* A damaged record the log reader skipped (and reported): the daemon
       * skipped it too, so the replay goes on without it. */
      fprintf(stderr, "altar reconciler: rebuild: %s\n", ce.msg);
      rc = ALTAR_OK;
    } else if (rc && err) {
      *err = ce;
    }
    if (rc) break;
    if (!m) {
      /* Quiet: a skip or a cut tail may have taken a partition's last
       * records, so judge the ends by the positions reached. */
      settle_ends(t, topic, ti, done, &remaining);
      continue;
    }
    for (size_t i = 0; i < np; i++) {
      if (ti->partitions[i].partition != m->partition) continue;
      if (m->offset < ti->partitions[i].end) rc = fn(ctx, m, err);
      if (!done[i] && m->offset + 1 >= ti->partitions[i].end) {
        done[i] = true;
        remaining--;
      }
      break;
    }
    altar_msg_free(m);
  }
  free(tps);
  free(done);
  if (pends && !rc) *pends = tl;
  else altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc;
}

typedef struct replay {
  altar_ledger_t *ledger;
  const altar_group_specs_t *groups;
  const altar_topics_t *topics;
  altar_status_event_t *batch; /* the batch being applied (the feeder's) */
  size_t n;
  dues_t due;
  fdues_t fdue; /* follow-ups of every decided group, to check against the log */
  /* The batch being applied holds only events the replaced ledger had
   * applied (the reading thread cuts batches where that changes). */
  bool covered;
  altar_ledger_t *replaced; /* NULL: none */
  altar__settled_t settled; /* the daemon's rule: reruns of settled tasks are skipped */
  altar_apply_result_t res; /* one batch's, emptied for the next */
  altar_reconciler_stats_t stats;
} replay_t;

/* Queues g's follow-up, whether or not g is out: a follow-up may have
 * been lost with the outbox of a ledger rebuilt from nothing. */
static int collect_followup(replay_t *r, const altar_group_event_t *g, altar_error_t *err) {
  const altar_group_spec_t *gs = altar_group_specs_find(r->groups, g->kind);
  if (!gs || (!gs->then && !gs->then_dead)) return ALTAR_OK;
  altar__followup_out_t f;
  int rc = altar__followup_make(r->groups, r->topics, g, &f, err);
  if (!rc && f.n) {
    if (ALTAR_GROW(r->fdue.v, r->fdue.cap, r->fdue.n + 1)) {
      altar__followup_out_clear(&f);
      return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    }
    fdue_t *d = &r->fdue.v[r->fdue.n++];
    memset(d, 0, sizeof *d);
    memcpy(d->task_key, f.task_key, sizeof d->task_key);
    snprintf(d->event_id, sizeof d->event_id, "%s", g->event_id);
    d->failed = f.failed;
    d->n = f.n;
    memcpy(d->recs, f.recs, sizeof d->recs);
    memset(f.recs, 0, sizeof f.recs); /* d owns them now */
  }
  altar__followup_out_clear(&f);
  return rc;
}

/* 1 when the replaced ledger holds g's group undecided (held: its rule
 * could not decide there), so that ledger never published it; 0 when not. */
static int held_in_replaced(replay_t *r, const altar_group_event_t *g, int32_t part, altar_error_t *err) {
  size_t kl = strlen(ALTAR_HELD_PREFIX), nl = strlen(g->kind), gl = strlen(g->group_key);
  char *k = malloc(kl + nl + 1 + gl);
  if (!k) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  memcpy(k, ALTAR_HELD_PREFIX, kl);
  memcpy(k + kl, g->kind, nl + 1);
  memcpy(k + kl + nl + 1, g->group_key, gl);
  altar_buf_t v = {0};
  int32_t was = altar_ledger_scope(r->replaced, part); /* noted under the partition deciding it */
  int rc = altar_ledger_aux_get(r->replaced, k, kl + nl + 1 + gl, &v, err);
  altar_ledger_scope(r->replaced, was);
  free(k);
  altar_buf_free(&v);
  return rc == ALTAR_OK ? 1 : rc == ALTAR_ENOTFOUND ? 0 : rc;
}

/* Queues the group events one application made due and not yet published:
 * those the replaced ledger did not decide. It decided exactly the groups
 * the events below its input offsets made due (the same rule, in the same
 * order), in the write that staged them in its outbox: acknowledged since,
 * or carried over with that outbox (cli/cmd_reconciler.c). */
static int collect_due(replay_t *r, const altar_apply_result_t *res, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < res->n_events; i++) {
    const altar_group_event_t *g = &res->events[i];
    if (g->event == ALTAR_GROUP_FIRED) r->stats.fired++;
    else r->stats.dead_lettered++;
    if ((rc = collect_followup(r, g, err))) return rc;
    if (r->covered) {
      int held = held_in_replaced(r, g, res->event_part[i], err);
      if (held < 0) return held;
      if (!held) continue;
    }
    /* One message, or a wide group's head and pages ("<id>" for the head,
     * "<id>/<page>" for a page), each due. */
    altar_buf_t *msgs = NULL;
    size_t nm = 0;
    if ((rc = altar_encode_group_messages(g, &msgs, &nm, err))) return rc;
    for (size_t k = 0; !rc && k < nm; k++) {
      char sid[96];
      if (k) snprintf(sid, sizeof sid, "%.64s/%zu", g->event_id, k);
      else snprintf(sid, sizeof sid, "%.64s", g->event_id);
      if (ALTAR_GROW(r->due.v, r->due.cap, r->due.n + 1)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
        break;
      }
      due_t *d = &r->due.v[r->due.n];
      memset(d, 0, sizeof *d);
      const altar_group_spec_t *s = altar_group_specs_find(r->groups, g->kind);
      const char *topic = g->event == ALTAR_GROUP_FIRED ? (s && s->ready_topic ? s->ready_topic : r->topics->ready)
                                                        : (s && s->dead_topic ? s->dead_topic : r->topics->dead);
      char key[1024];
      snprintf(key, sizeof key, "%s:%s", g->kind, g->group_key);
      d->event_id = strdup(sid);
      d->topic = strdup(topic);
      d->key = strdup(key);
      d->value = msgs[k]; /* d owns it now */
      memset(&msgs[k], 0, sizeof msgs[k]);
      r->due.n++;
      if (!d->event_id || !d->topic || !d->key) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < nm; k++) altar_buf_free(&msgs[k]);
    free(msgs);
  }
  r->stats.retried += res->n_retries;
  return rc;
}

/* One atomic write of events, through the same rule as the daemon. */
static int apply_atomic(replay_t *r, const altar_status_event_t *evs, size_t n, altar_apply_result_t *res,
                        altar_error_t *err) {
  int rc = altar_ledger_begin(r->ledger, err);
  if (rc) return rc;
  rc = altar__settled_apply(&r->settled, r->ledger, r->groups, evs, n, res, NULL, err);
  if (!rc) rc = altar_ledger_commit(r->ledger, err);
  else {
    altar_error_t ignored = {0};
    altar_ledger_abort(r->ledger, &ignored);
  }
  if (!rc) altar__settled_commit(&r->settled);
  else altar__settled_abort(&r->settled);
  if (res->held_groups.n) { /* the ledger may note one now */
    res->ledger_may_hold = true;
  }
  return rc;
}

static int flush_batch(replay_t *r, altar_error_t *err) {
  if (!r->n) return ALTAR_OK;
  altar_apply_result_t *res = &r->res;
  /* ts < 0: a group event's ts is that of the status event that made it due,
   * as in the live daemon, so both publish identical bytes for one event_id. */
  int rc = apply_atomic(r, r->batch, r->n, res, err);
  size_t skipped = 0;
  if (rc == ALTAR_EPREDICATE) {
    /* As the daemon does: event by event, and an event whose readiness
     * predicate fails is set aside (the daemon sent it to the DLQ), so the
     * replay reaches the ledger the daemon built. The failed batch was
     * aborted: nothing of it is applied. */
    altar_apply_result_reset(res);
    rc = ALTAR_OK;
    for (size_t i = 0; !rc && i < r->n; i++) {
      rc = apply_atomic(r, &r->batch[i], 1, res, err);
      if (rc == ALTAR_EPREDICATE) {
        skipped++;
        r->stats.poison++;
        rc = ALTAR_OK;
      } else if (!rc) {
        rc = collect_due(r, res, err);
      }
      altar_apply_result_reset(res);
    }
  } else if (!rc) {
    rc = collect_due(r, res, err);
  }
  r->stats.events += r->n - skipped;
  r->stats.batches++;
  altar_apply_result_reset(res);
  r->n = 0; /* the events go back to the feeder, which frees what it allocated */
  return rc;
}

/* Reading and decoding the status topic runs on its own thread, a batch
 * ahead of the thread that applies: on two cores a replay then costs about
 * the larger of the two, not their sum. */
#define FEED_BATCH 4096
#define FEED_DEPTH 2 /* decoded batches waiting at most */
/* While the applying thread reads which group events are out already, the
 * reading thread may run further ahead (a few MiB a batch), so the second
 * core is not left idle meanwhile. */
#define FEED_DEPTH_START 16

typedef struct fbatch {
  altar_status_event_t *ev;
  /* Events in our encoder's own form are decoded into the arena (no
   * allocation per string, all freed at once); the rest by the full
   * decoder, marked owned here and cleared one by one. */
  bool *owned;
  altar_arena_t arena;
  size_t n;
  bool covered; /* every event of it is below the replaced ledger's offsets */
} fbatch_t;

typedef struct feeder {
  int32_t n_parts; /* of the status topic */
  const char *tname;
  const altar_strmap_t *props;
  const char *topic;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  fbatch_t q[FEED_DEPTH_START];
  size_t head, count, depth; /* depth: FEED_DEPTH_START, then FEED_DEPTH */
  /* Applied batches come back to be cleared and refilled here: memory is
   * freed by the thread that allocated it (cross-thread frees were a third
   * of a replay's time in glibc's malloc). */
  fbatch_t spare[FEED_DEPTH_START + 2];
  size_t n_spare;
  bool done, stop;
  fbatch_t cur;
  uint64_t poison;
  int rc;
  altar_error_t err;
  altar_topic_list_t *ends;
  double cpu_s; /* the thread's CPU time, when done */
  read_from_t *from;
} feeder_t;

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Empties a batch for refilling. */
static void fbatch_empty(fbatch_t *b) {
  for (size_t i = 0; i < b->n; i++)
    if (b->owned[i]) {
      altar_status_event_clear(&b->ev[i]);
      b->owned[i] = false;
    }
  altar_arena_reset(&b->arena);
  b->n = 0;
  b->covered = false;
}

static void fbatch_free(fbatch_t *b) {
  if (b->ev) fbatch_empty(b);
  altar_arena_free(&b->arena);
  free(b->ev);
  free(b->owned);
  memset(b, 0, sizeof *b);
}

/* Hands the current batch to the applier, waiting while the queue is full. */
static int feed_push(feeder_t *f, altar_error_t *err) {
  pthread_mutex_lock(&f->mu);
  while (f->count >= f->depth && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
  bool stopped = f->stop;
  if (!stopped) {
    f->q[(f->head + f->count) % FEED_DEPTH_START] = f->cur;
    f->count++;
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  if (stopped) {
    fbatch_free(&f->cur);
    return altar_error_set(err, ALTAR_ECANCELED, "rebuild: stopped");
  }
  memset(&f->cur, 0, sizeof f->cur);
  return ALTAR_OK;
}

/* A batch to fill: an applied one when there is one, else a new one. */
static int feed_take(feeder_t *f, altar_error_t *err) {
  pthread_mutex_lock(&f->mu);
  bool got = f->n_spare > 0;
  if (got) f->cur = f->spare[--f->n_spare];
  pthread_mutex_unlock(&f->mu);
  if (got) {
    fbatch_empty(&f->cur);
    return ALTAR_OK;
  }
  f->cur.ev = calloc(FEED_BATCH, sizeof *f->cur.ev);
  f->cur.owned = calloc(FEED_BATCH, sizeof *f->cur.owned);
  if (!f->cur.ev || !f->cur.owned) {
    fbatch_free(&f->cur);
    return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  }
  return ALTAR_OK;
}

static int on_status(void *ctx, altar_msg_t *m, altar_error_t *err) {
  feeder_t *f = ctx;
  if (!m->value) {
    f->poison++;
    return ALTAR_OK;
  }
  /* A batch is wholly below the replaced ledger's offsets or wholly not:
   * which decisions it owns is then known per batch (batch size never
   * changes a decision). */
  bool covered = is_covered(f->from, m);
  if (f->cur.ev && f->cur.n && f->cur.covered != covered && feed_push(f, err)) return err ? err->code : ALTAR_ECANCELED;
  if (!f->cur.ev && feed_take(f, err)) return err ? err->code : ALTAR_ENOMEM;
  if (!f->cur.n) f->cur.covered = covered;
  altar_error_t de = {0};
  size_t i = f->cur.n;
  altar_status_event_t *e = &f->cur.ev[i];
  /* A spec is checked as ever but kept as its bytes only: record() takes
   * them for the spec (the RocksDB ledger stores just the bytes, the memory
   * ledger decodes them), so building it here would be wasted. */
  if (altar_decode_status_canonical(m->value, m->value_len, &f->cur.arena, ALTAR_DECODE_SPEC_BYTES, e) != ALTAR_OK) {
    if (altar__status_msg_decode(m, f->n_parts, e, &de) != ALTAR_OK) {
      altar_status_event_clear(e);
      f->poison++; /* set aside in the DLQ the first time round */
      return ALTAR_OK;
    }
    f->cur.owned[i] = true;
    /* The spec's canonical bytes, made here rather than on the applying
     * thread; a failure leaves it to the ledger, which reports it. */
    if (e->spec && !altar_spec_enc_len(&e->spec_enc)) altar_spec_enc_make(e->spec, &e->spec_enc, &de);
  }
  e->log_partition = m->partition;
  e->log_partitions = f->n_parts;
  if (++f->cur.n == FEED_BATCH) return feed_push(f, err);
  return ALTAR_OK;
}

static void *feeder_main(void *arg) {
  feeder_t *f = arg;
  pthread_setname_np(pthread_self(), "altar-replay-rd");
  int rc = read_topic(f->tname, f->props, f->topic, on_status, f, &f->ends, &f->n_parts, f->from, &f->err);
  if (!rc && f->cur.n) rc = feed_push(f, &f->err);
  fbatch_free(&f->cur);
  f->cpu_s = thread_cpu_s();
  pthread_mutex_lock(&f->mu);
  f->rc = rc;
  f->done = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* The next decoded batch; false when the feeder is done (f->rc says how). */
static bool feed_pop(feeder_t *f, fbatch_t *out) {
  pthread_mutex_lock(&f->mu);
  while (!f->count && !f->done) pthread_cond_wait(&f->cv, &f->mu);
  bool got = f->count > 0;
  if (got) {
    *out = f->q[f->head];
    f->head = (f->head + 1) % FEED_DEPTH_START;
    f->count--;
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  return got;
}

/* Replays the status topic into r's ledger; *pends as read_topic gives it. */
static int replay_status(replay_t *r, const char *tname, const altar_strmap_t *props, read_from_t *from,
                         altar_topic_list_t **pends, altar_error_t *err) {
  feeder_t f = {.tname = tname, .props = props, .topic = r->topics->status, .depth = FEED_DEPTH_START, .from = from};
  pthread_mutex_init(&f.mu, NULL);
  pthread_cond_init(&f.cv, NULL);
  pthread_t th;
  int rc = ALTAR_OK;
  double cpu0 = thread_cpu_s();
  if (pthread_create(&th, NULL, feeder_main, &f) != 0) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "rebuild: cannot start the reading thread");
  } else {
    pthread_mutex_lock(&f.mu);
    f.depth = FEED_DEPTH;
    pthread_mutex_unlock(&f.mu);
    fbatch_t b;
    while (feed_pop(&f, &b)) {
      if (!rc) {
        r->batch = b.ev;
        r->n = b.n;
        r->covered = b.covered;
        rc = flush_batch(r, err);
        r->batch = NULL;
        r->n = 0;
      }
      pthread_mutex_lock(&f.mu);
      if (f.n_spare < f.depth + 2) {
        f.spare[f.n_spare++] = b;
        memset(&b, 0, sizeof b); /* the spare owns it now */
      }
      pthread_mutex_unlock(&f.mu);
      fbatch_free(&b);
      if (rc) {
        /* Unblock the feeder and let it finish; its batches are dropped. */
        pthread_mutex_lock(&f.mu);
        f.stop = true;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
      }
    }
    pthread_join(th, NULL);
    r->stats.read_cpu_s = f.cpu_s;
    r->stats.apply_cpu_s = thread_cpu_s() - cpu0;
    if (!rc && f.rc) {
      rc = f.rc;
      if (err) *err = f.err;
    }
  }
  r->stats.poison += f.poison;
  for (size_t i = 0; i < f.count; i++) fbatch_free(&f.q[(f.head + i) % FEED_DEPTH_START]);
  for (size_t i = 0; i < f.n_spare; i++) fbatch_free(&f.spare[i]);
  pthread_cond_destroy(&f.cv);
  pthread_mutex_destroy(&f.mu);
  if (!rc) *pends = f.ends;
  else altar_topic_list_free(f.ends);
  return rc;
}

/* Input offsets for the daemon that takes over the new ledger: the end
 * offsets the replay read up to, never the ends of a later listing (events
 * appended meanwhile by running workers would be skipped). */
static int store_offsets(const altar_topic_list_t *tl, altar_ledger_t *l, const char *topic, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && tl && tl->n_topics && i < tl->topics[0].n_partitions; i++) {
    char k[320], v[32];
    int kl = snprintf(k, sizeof k, "s/%s/%" PRId32, topic, tl->topics[0].partitions[i].partition);
    int vl = snprintf(v, sizeof v, "%" PRId64, tl->topics[0].partitions[i].end);
    int32_t was = altar_ledger_scope(l, tl->topics[0].partitions[i].partition);
    rc = altar_ledger_aux_put(l, k, (size_t)kl, v, (size_t)vl, err);
    altar_ledger_scope(l, was);
  }
  return rc;
}

static void on_dr(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  int *failed = ctx;
  if (dr->err) (*failed)++;
}

/* Sends the follow-ups neither the replay nor the jobs topics know: those
 * whose job never reached the log. */
static int publish_followups(replay_t *r, const char *tname, const altar_strmap_t *props, altar_transport_t **pt,
                             const altar_transport_opts_t *to, bool quiet, uint64_t *ppublished, altar_error_t *err) {
  altar__keys_seen_t seen = {0};
  char topics[16][512];
  const char *names[16];
  size_t nt = altar__followup_topics(r->groups, r->topics, topics, 16);
  for (size_t i = 0; i < nt; i++) names[i] = topics[i];
  int rc = altar__keys_seen_read(&seen, tname, props, names, nt, err);
  for (size_t i = 0; !rc && i < r->fdue.n; i++) {
    const fdue_t *d = &r->fdue.v[i];
    bool known = altar_ledger_peek_task(r->ledger, d->task_key) != NULL;
    if (!known) {
      int settled = altar__settled_has_task(&r->settled, r->ledger, d->task_key, err);
      if (settled < 0) {
        rc = settled;
        break;
      }
      known = settled || (!d->failed && altar__keys_seen_has(&seen, d->task_key));
    }
    if (known) continue;
    if (!*pt && !(*pt = altar_transport_open(tname, props, to, err))) {
      rc = err ? err->code : ALTAR_ETRANSPORT;
      break;
    }
    for (size_t k = 0; !rc && k < d->n; k++) {
      altar_header_t h = {ALTAR_FOLLOWUP_HEADER, d->event_id, strlen(d->event_id)};
      altar_produce_rec_t rec = {.topic = d->recs[k].topic,
                                 .partition = ALTAR_PARTITION_ANY,
                                 .key = d->recs[k].key,
                                 .key_len = strlen(d->recs[k].key),
                                 .value = d->recs[k].value.data,
                                 .value_len = d->recs[k].value.len,
                                 .headers = d->failed ? NULL : &h,
                                 .n_headers = d->failed ? 0 : 1};
      rc = altar_transport_produce(*pt, &rec, err);
    }
    if (!rc) {
      (*ppublished)++;
      r->stats.followups++;
      if (!quiet)
        fprintf(stderr, "altar reconciler: submitting missing follow-up %s of group event %s\n", d->task_key,
                d->event_id);
    }
  }
  altar__keys_seen_free(&seen);
  return rc;
}

int altar__reconciler_rebuild(const char *tname, const altar_strmap_t *props, altar_ledger_t *new_ledger,
                              const altar_group_specs_t *groups, const altar_topics_t *topics,
                              const altar_checkpoint_t *from, altar_ledger_t *replaced, bool quiet,
                              altar_reconciler_stats_t *pstats, uint64_t *ppublished, altar_error_t *err) {
  replay_t r = {.ledger = new_ledger, .groups = groups, .topics = topics, .replaced = replaced};
  uint64_t published = 0;
  /* The replay keeps only the group events the replaced ledger did not
   * decide: never a guess from what the ready and dead topics still hold
   * (their retention deletes what consumers received long ago). */
  altar_topic_list_t *status_ends = NULL;
  read_from_t rf = {.cp = from, .replaced = replaced};
  /* A checkpoint's settled groups are read from its ledger as the daemon
   * reads them, and records written after it follow its own. */
  int rc = altar__settled_load(&r.settled, new_ledger, 0, err);
  if (!rc) altar__settled_replay(&r.settled);
  /* Until it holds a group, a replay into a ledger noting none need not
   * look up whether each group it decides was held. */
  size_t held = 0;
  if (!rc) rc = altar__held_count(new_ledger, &held, err);
  r.res.ledger_may_hold = held > 0;
  if (!rc) rc = replay_status(&r, tname, props, &rf, &status_ends, err);
  /* A ledger missing events is not the ledger the log describes: never
   * swapped in as if it were. */
  if (!rc && rf.n_gaps)
    rc =
        altar_error_set(err, ALTAR_EINTEGRITY,
                        "the status topic no longer holds events this rebuild needs (%s%s): they were deleted "
                        "(retention) %s; the ledger cannot be rebuilt exactly",
                        rf.gaps, rf.n_gaps > 8 ? ", ..." : "",
                        from ? "after the checkpoint was taken" : "and no checkpoint (ledger.checkpoints) covers them");
  if (!rc) rc = store_offsets(status_ends, new_ledger, topics->status, err);
  altar_topic_list_free(status_ends);
  if (!rc) {
    int failed = 0;
    altar_transport_opts_t to = {.on_delivery = on_dr, .delivery_ctx = &failed};
    altar_transport_t *t = NULL;
    for (size_t i = 0; !rc && i < r.due.n; i++) {
      const due_t *d = &r.due.v[i];
      if (!t && !(t = altar_transport_open(tname, props, &to, err))) {
        rc = err ? err->code : ALTAR_ETRANSPORT;
        break;
      }
      altar_produce_rec_t rec = {.topic = d->topic,
                                 .partition = ALTAR_PARTITION_ANY,
                                 .key = d->key,
                                 .key_len = strlen(d->key),
                                 .value = d->value.data,
                                 .value_len = d->value.len};
      rc = altar_transport_produce(t, &rec, err);
      if (!rc) published++;
      if (!quiet && !rc) fprintf(stderr, "altar reconciler: republishing missing group event %s\n", d->event_id);
    }
    if (!rc && r.fdue.n) rc = publish_followups(&r, tname, props, &t, &to, quiet, &published, err);
    if (t) {
      if (!rc) rc = altar_transport_flush(t, 60000, err);
      if (!rc && failed)
        rc = altar_error_set(err, ALTAR_ETRANSPORT, "rebuild: %d group event(s) not acknowledged", failed);
      altar_transport_close(t);
    }
  }
  altar__settled_free(&r.settled);
  altar_apply_result_clear(&r.res);
  dues_clear(&r.due);
  fdues_clear(&r.fdue);
  free(rf.covered);
  if (pstats) *pstats = r.stats;
  if (ppublished) *ppublished = published;
  return rc;
}
