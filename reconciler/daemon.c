/* The reconciler daemon loop: batches of status events → one atomic ledger
 * write (changes + outbox + input offsets) → publish the outbox. */
#include "reconciler/daemon.h"
#include "reconciler/daemon_metrics.h"
#include "reconciler/input_offsets.h"

#include "altar/clock.h"
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/grow.h"
#include "altar/reconcile.h"
#include "reconciler/cancel.h"
#include "reconciler/checkpoint_runner.h"
#include "altar/config.h"
#include "reconciler/consumed_prune.h"
#include "reconciler/followup_run.h"
#include "reconciler/history.h"
#include "reconciler/history_store.h"
#include "reconciler/import_marker.h"
#include "reconciler/lag_gauge.h"
#include "reconciler/outbox.h"
#include "reconciler/partition_import.h"
#include "reconciler/published_seen.h"
#include "reconciler/retry_backoff.h"
#include "reconciler/settled.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct in_part {
  char *topic;
  int32_t partition;
  int64_t next;   /* next offset to apply */
  int64_t read;   /* the next offset the consumer should hand over (a batch being collected
                     is ahead of next) */
  int64_t stored; /* the one the ledger holds: a batch writes only the offsets it moved
                     (writing all 32 partitions' offsets in every batch cost more than
                     the events) */
  bool gained;    /* assigned since the last check_starts */
} in_part_t;

typedef struct daemon {
  const altar_reconciler_opts_t *o;
  const char *group;
  altar__outbox_t ob;
  altar__settled_t settled;  /* reruns of settled tasks are not applied */
  altar__retry_wait_t waits; /* retries held back until their due time */
  /* A batch's result, reset after each: its arena keeps its chunks (a new
   * result per batch was a 256 KiB malloc and free, an mmap and munmap). */
  altar_apply_result_t res;
  /* A batch's status events in the form our encoder writes, read in one
   * pass (a spec kept as its bytes: all the ledger stores of it), reset
   * after each batch like res; other events go to the full decoder. */
  altar_arena_t ev_arena;
  int32_t status_parts; /* partitions of the status topic (cancels need it) */
  in_part_t *parts;
  size_t n_parts, cap_parts;
  altar_reconciler_stats_t stats;
  bool held_counted; /* stats.held is the ledger's count (the last count did not fail) */
  altar__reconciler_metrics_t metrics;
  altar__cp_runner_t cp;
  altar__consumed_pruner_t pruner;
  altar__lag_gauge_t lag;
  uint64_t history_saved;    /* the history's version last written to the ledger */
  int64_t history_saved_ms;  /* when (monotonic) */
  bool history_save_failed;  /* said once */
  int64_t memory_sampled_ms; /* when (monotonic) the ledger's memory was last read */
  bool check_starts;         /* partitions were assigned: compare where they begin with the ledger */
  int fatal;
  altar_error_t fatal_err;
  /* The batch being collected: a revoke drops its messages of the revoked
   * partition (not applied yet; whoever owns it next reads them again). */
  altar_msg_t **msgs;
  size_t *pn_msgs;
  bool follow_gap; /* following: records the ledger never applied are gone */
  /* The follow-up guard's skip, asked before the published ids' (chain_skip). */
  int (*guard_skip)(void *, const char *, const char *, const void *, size_t, const altar_header_t *, size_t, bool *,
                    altar_error_t *);
  void *guard_ctx;
  /* Group events out already since the checkpoints partitions were
   * imported from (take_over_partition); NULL before the first import. */
  altar__published_seen_t *imported;
  char imported_cp[128];          /* the checkpoint whose ends it was last read from */
  altar__pub_pos_t *imported_pos; /* where that read stopped (a later import from it goes on from there) */
  size_t n_imported_pos;
  /* Imported partitions whose marker (import_marker.h) stays until the
   * partition is applied up to `until`, its end at the import. */
  struct mark {
    int32_t part;
    int64_t until;
  } * marks;
  size_t n_marks, cap_marks;
  /* ALTAR_TEST_KILL_AFTER_IMPORT=FILE: the fault test_partition_takeover_crash_local
   * injects (NULL: none). */
  const char *kill_after_imports;
  /* The checkpoint this turn's imports restored, shared by the partitions
   * one rebalance gains; removed at the end of the turn. */
  altar__import_src_t import_src;
} daemon_t;

static int chain_skip(void *ctx, const char *topic, const char *key, const void *value, size_t vlen,
                      const altar_header_t *h, size_t nh, bool *pskip, altar_error_t *err);

static void dlog(const daemon_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dlog(const daemon_t *d, const char *fmt, ...) {
  if (d->o->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "altar reconciler: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static size_t offset_key(const char *topic, int32_t partition, char *out, size_t outsz) {
  return altar__reconciler_offset_key(topic, partition, out, outsz);
}

static in_part_t *find_part(daemon_t *d, const char *topic, int32_t partition) {
  for (size_t i = 0; i < d->n_parts; i++)
    if (d->parts[i].partition == partition && !strcmp(d->parts[i].topic, topic)) return &d->parts[i];
  return NULL;
}

static int stored_offset(altar_ledger_t *l, const char *topic, int32_t partition, int64_t *pnext, altar_error_t *err) {
  return altar__reconciler_input_offset(l, topic, partition, pnext, err);
}

/* One line per rebalance: which status partitions moved ("assigned
 * altar.status 0 3"), what operators (and tests) read to know who owns what. */
static void log_rebalance(const daemon_t *d, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n) {
  char line[1024];
  size_t at = 0, i = 0;
  for (; i < n; i++) {
    int w = snprintf(line + at, sizeof line - at, " %" PRId32, parts[i].partition);
    if (w < 0 || (size_t)w >= sizeof line - at - 8) break; /* room for " …" */
    at += (size_t)w;
  }
  line[at] = 0;
  if (n)
    dlog(d, "%s %s%s%s", kind == ALTAR_REBALANCE_REVOKE ? "revoked" : "assigned", parts[0].topic, line,
         i < n ? " …" : "");
}

static void on_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  daemon_t *d = ctx; /* run detaches before its frame goes */
  log_rebalance(d, kind, parts, n);
  for (size_t i = 0; i < n; i++) {
    if (kind == ALTAR_REBALANCE_REVOKE) {
      /* Collected but not applied: applying them now would leave their
       * offsets unstored, and a re-assignment reads them again. */
      if (d->msgs && d->pn_msgs) {
        size_t k = 0;
        for (size_t j = 0; j < *d->pn_msgs; j++) {
          altar_msg_t *m = d->msgs[j];
          if (m->partition == parts[i].partition && !strcmp(m->topic, parts[i].topic)) altar_msg_free(m);
          else d->msgs[k++] = m;
        }
        *d->pn_msgs = k;
      }
      in_part_t *p = find_part(d, parts[i].topic, parts[i].partition);
      if (!p) continue;
      altar_error_t e = {0};
      if (p->next >= 0) altar_transport_commit(t, p->topic, p->partition, p->next, NULL, &e);
      free(p->topic);
      *p = d->parts[--d->n_parts];
      continue;
    }
    int64_t next;
    altar_error_t e = {0};
    if (stored_offset(d->o->ledger, parts[i].topic, parts[i].partition, &next, &e)) {
      d->fatal = e.code;
      d->fatal_err = e;
      return;
    }
    /* Resume from the ledger's own offsets, never from the log's commits. */
    if (altar_transport_seek(t, parts[i].topic, parts[i].partition, next >= 0 ? next : ALTAR_OFFSET_BEGINNING, &e))
      dlog(d, "seek %s/%" PRId32 ": %s", parts[i].topic, parts[i].partition, e.msg);
    if (d->n_parts == d->cap_parts) {
      size_t cap = d->cap_parts ? d->cap_parts * 2 : 8;
      in_part_t *np = realloc(d->parts, cap * sizeof *np);
      /* An untracked partition's events would be applied with no offset
       * stored, so applied again after a restart: stop instead. */
      if (!np) goto nomem;
      d->parts = np;
      d->cap_parts = cap;
    }
    char *topic = strdup(parts[i].topic);
    if (!topic) goto nomem;
    d->parts[d->n_parts++] = (in_part_t){topic, parts[i].partition, next, next, next, true};
    d->check_starts = true;
  }
  return;
nomem:
  if (!d->fatal) {
    d->fatal = ALTAR_ENOMEM;
    altar_error_set(&d->fatal_err, ALTAR_ENOMEM, "reconciler: out of memory tracking an assigned partition");
  }
}

/* The host a failed shard ran on: the worker id up to its ':'. */
static char *host_of(const char *worker) {
  if (!worker || !*worker) return NULL;
  const char *c = strchr(worker, ':');
  return strndup(worker, c ? (size_t)(c - worker) : strlen(worker));
}

/* Stages a retried job: the spec again with attempt = restart count and the
 * failing host in avoid_hosts. */
static int stage_retry(daemon_t *d, const altar_retry_request_t *r, const altar_status_event_t *evs, size_t n,
                       altar_error_t *err) {
  if (!r->spec) {
    dlog(d, "cannot retry %s: no spec stored", r->handle.external_id);
    return ALTAR_OK;
  }
  altar_job_msg_t job = {.v = ALTAR_SCHEMA_VERSION, .attempt = r->restart_count, .submitted_at = altar_wall_s()};
  if (altar_spec_copy(&job.spec, r->spec)) return altar_error_set(err, ALTAR_ENOMEM, "retry: out of memory");
  const char *jid = altar_strmap_get(&r->spec->labels, "job_id");
  job.job_id = strdup(jid ? jid : "");
  /* The last failure event of this task in the batch names the worker's host. */
  for (size_t i = n; i-- > 0;) {
    if (evs[i].state == ALTAR_STATE_FAILED && altar_handle_same_task(&evs[i].handle, &r->handle)) {
      char *h = host_of(evs[i].worker);
      bool dup = false;
      for (size_t j = 0; h && j < job.spec.n_avoid_hosts; j++) dup |= !strcmp(job.spec.avoid_hosts[j], h);
      if (h && !dup) altar_spec_add_avoid_host(&job.spec, h);
      free(h);
      break;
    }
  }
  altar_buf_t b = {0};
  int rc = job.job_id ? altar_encode_job(&job, &b, err) : altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  /* Not before its due time (retry_backoff): it waits in the ledger, in this
   * same write, and the loop releases it then; nothing blocks meanwhile. */
  if (!rc && r->due_ts > altar_wall_s())
    rc = altar__retry_wait_stage(&d->waits, r->due_ts, d->o->topics->jobs, r->task_key, b.data, b.len, err);
  else if (!rc) rc = altar__outbox_stage(&d->ob, d->o->topics->jobs, r->task_key, b.data, b.len, NULL, NULL, NULL, err);
  altar_buf_free(&b);
  altar_job_msg_clear(&job);
  if (!rc) d->stats.retried++;
  return rc;
}

static const char *group_topic(const daemon_t *d, const altar_group_event_t *g) {
  const altar_group_spec_t *s = altar_group_specs_find(d->o->groups, g->kind);
  if (g->event == ALTAR_GROUP_FIRED) return s && s->ready_topic ? s->ready_topic : d->o->topics->ready;
  return s && s->dead_topic ? s->dead_topic : d->o->topics->dead;
}

/* The DLQ copy of a status message: its key, its first ALTAR_DLQ_MAX_VALUE
 * bytes, and the reason, source and original size headers (fleet.h). */
static int stage_dlq_copy(daemon_t *d, const altar_msg_t *m, const char *reason, altar_error_t *err) {
  size_t keep = m->value_len < ALTAR_DLQ_MAX_VALUE ? m->value_len : ALTAR_DLQ_MAX_VALUE;
  char src[512], size[32], *key = NULL;
  snprintf(src, sizeof src, "%s/%" PRId32 "/%" PRId64, m->topic, m->partition, m->offset);
  snprintf(size, sizeof size, "%zu", m->value_len);
  if (m->key && m->key_len && !(key = strndup(m->key, m->key_len < 1024 ? m->key_len : 1024)))
    return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  altar_header_t h[3] = {{ALTAR_DLQ_REASON_HEADER, reason, strlen(reason)},
                         {ALTAR_DLQ_SOURCE_HEADER, src, strlen(src)},
                         {ALTAR_DLQ_SIZE_HEADER, size, strlen(size)}};
  int rc = altar__outbox_stage_headers(&d->ob, d->o->topics->dlq, key, m->value ? m->value : "", keep, h, 3, NULL, err);
  free(key);
  return rc;
}

/* Stages the group events res made due, in decision order. */
static int stage_group_events(daemon_t *d, const altar_apply_result_t *res, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = 0; i < res->n_events && !rc; i++) {
    const altar_group_event_t *g = &res->events[i];
    /* Staged under the status partition of the event that decided it. */
    altar_ledger_scope(d->o->ledger, res->event_part[i]);
    altar_buf_t *msgs = NULL;
    size_t nm = 0;
    char key[1024];
    snprintf(key, sizeof key, "%s:%s", g->kind, g->group_key);
    /* One message, or a wide group's head and its pages: all in this write,
     * in order, under the group's key (one partition keeps them in order). */
    rc = altar_encode_group_messages(g, &msgs, &nm, err);
    for (size_t k = 0; !rc && k < nm; k++)
      rc = altar__outbox_stage(&d->ob, group_topic(d, g), key, msgs[k].data, msgs[k].len, NULL, NULL, NULL, err);
    for (size_t k = 0; k < nm; k++) altar_buf_free(&msgs[k]);
    free(msgs);
    /* The next stage goes out in this same write, right behind its event. */
    if (!rc) rc = altar__followup_stage(&d->ob, d->o, g, &d->stats, err);
    if (g->event == ALTAR_GROUP_FIRED) d->stats.fired++;
    else d->stats.dead_lettered++;
  }
  return rc;
}

/* The dashboard's hour (reconciler/history.h): what a committed write applied. */
static void note_history(daemon_t *d, const altar_status_event_t *evs, size_t n, const altar_apply_result_t *res) {
  altar_history_t *h = d->o->history;
  if (!h) return;
  double now = altar_wall_s();
  uint64_t finished = 0, fired = 0;
  for (size_t i = 0; i < n; i++) {
    if (evs[i].event == ALTAR_EV_RELEASED) continue;
    if (evs[i].state == ALTAR_STATE_SUCCEEDED) finished++;
    if (evs[i].state != ALTAR_STATE_FAILED) continue;
    finished++;
    altar_history_failure(h, now, evs[i].failure ? evs[i].failure->reason : NULL);
  }
  for (size_t i = 0; i < res->n_events; i++) fired += res->events[i].event == ALTAR_GROUP_FIRED;
  altar_history_add(h, now, finished, fired, res->n_events - fired);
}

/* Says which groups res held and why, and brings the held count up to date
 * when it may have changed (after the batch is committed) or recount is set. */
static void note_held(daemon_t *d, const altar_apply_result_t *res, bool recount) {
  for (size_t i = 0; i < res->held_groups.n; i++)
    dlog(d, "group %s held, neither fired nor consumed (fix its kind's group config and restart): %s",
         res->held_groups.v[i], res->held_reasons.v[i]);
  if (!recount && !res->held_groups.n && !res->ledger_may_hold) return;
  size_t n = 0;
  altar_error_t e = {0};
  d->held_counted = altar__held_count(d->o->ledger, &n, &e) == ALTAR_OK;
  if (d->held_counted) d->stats.held = n;
  else dlog(d, "counting held groups: %s", e.msg);
}

/* Decides the held groups again with the groups this run was given, in
 * one write: a group whose configuration was fixed fires (or settles) now,
 * exactly once; one still failing stays held. */
static int recheck_held(daemon_t *d, altar_error_t *err) {
  altar_apply_result_t res = {0};
  uint64_t first_seq = d->ob.next_seq;
  int rc = altar_ledger_begin(d->o->ledger, err);
  if (rc) return rc;
  rc = altar__settled_recheck_held(&d->settled, d->o->ledger, d->o->groups, &res, err);
  if (!rc) rc = stage_group_events(d, &res, err);
  for (size_t i = 0; i < res.n_retries && !rc; i++) {
    altar_ledger_scope(d->o->ledger, res.retries[i].partition);
    rc = stage_retry(d, &res.retries[i], NULL, 0, err);
  }
  altar_ledger_scope(d->o->ledger, ALTAR_LEDGER_SCOPE_NONE);
  if (!rc) rc = altar_ledger_commit(d->o->ledger, err);
  else {
    altar_error_t ae = {0};
    altar_ledger_abort(d->o->ledger, &ae);
  }
  if (!rc) altar__settled_commit(&d->settled);
  else altar__settled_abort(&d->settled);
  if (!rc) {
    for (size_t i = 0; i < res.n_events; i++)
      dlog(d, "held group %s:%s decided again: %s", res.events[i].kind, res.events[i].group_key,
           res.events[i].event == ALTAR_GROUP_FIRED ? "fired" : "settled");
    note_held(d, &res, true);
    note_history(d, NULL, 0, &res);
    rc = altar__outbox_publish_from(&d->ob, first_seq, err);
  }
  altar_apply_result_clear(&res);
  return rc;
}

/* Applies one batch of messages as one atomic write. With poison_reason set
 * (n is 1), the message is not applied but set aside in the DLQ with that
 * reason, in the same write as its offset. */
static int apply_batch(daemon_t *d, altar_msg_t **msgs, size_t n, const char *poison_reason, altar_error_t *err) {
  if (!d->status_parts) { /* the topic was not there at start */
    altar_topic_list_t *tl = NULL;
    altar_error_t le = {0};
    if (altar_transport_list_topics(d->o->transport, d->o->topics->status, 10000, &tl, &le) == ALTAR_OK && tl->n_topics)
      d->status_parts = (int32_t)tl->topics[0].n_partitions;
    altar_topic_list_free(tl);
  }
  altar_status_event_t *evs = calloc(n ? n : 1, sizeof *evs);
  bool *owned = calloc(n ? n : 1, sizeof *owned); /* decoded by the full decoder: freed apart */
  if (!evs || !owned) {
    free(evs);
    free(owned);
    return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  }
  size_t n_ev = 0;
  uint64_t first_seq = d->ob.next_seq;
  altar_apply_result_t *res = &d->res;
  int rc = altar_ledger_begin(d->o->ledger, err);
  if (rc) {
    free(evs);
    free(owned);
    return rc;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    altar_msg_t *m = msgs[i];
    altar_error_t de = {0};
    if (!poison_reason && m->value &&
        altar_decode_status_canonical(m->value, m->value_len, &d->ev_arena, ALTAR_DECODE_SPEC_BYTES, &evs[n_ev]) ==
            ALTAR_OK) {
      evs[n_ev].log_partition = m->partition;
      evs[n_ev].log_partitions = d->status_parts;
      owned[n_ev++] = false;
      continue;
    }
    owned[n_ev] = true;
    if (poison_reason || !m->value || altar__status_msg_decode(m, d->status_parts, &evs[n_ev], &de) != ALTAR_OK) {
      altar_status_event_clear(&evs[n_ev]);
      char reason[ALTAR_ERRMSG_MAX + 32];
      if (poison_reason) snprintf(reason, sizeof reason, "%s", poison_reason);
      else snprintf(reason, sizeof reason, "undecodable status event: %s", m->value ? de.msg : "null value");
      altar_ledger_scope(d->o->ledger, m->partition); /* with the partition it came from */
      rc = stage_dlq_copy(d, m, reason, err);
      altar_ledger_scope(d->o->ledger, ALTAR_LEDGER_SCOPE_NONE);
      d->stats.poison++;
      continue;
    }
    n_ev++;
  }
  /* ts < 0: each group event carries the ts of the status event that made it
   * due, so a rebuild (other batch sizes, another clock) yields the same bytes
   * for the same event_id. */
  /* Without a held group a decision need not look its note up. */
  res->ledger_may_hold = !d->held_counted || d->stats.held > 0;
  if (!rc) rc = altar__settled_apply(&d->settled, d->o->ledger, d->o->groups, evs, n_ev, res, NULL, err);
  if (!rc) rc = stage_group_events(d, res, err);
  /* Late shards are recorded and consumed, never a second group event: say so. */
  for (size_t i = 0; i < res->late_shards.n && !rc; i++) {
    dlog(d, "late shard after its group settled: %s", res->late_shards.v[i]);
    d->stats.late++;
  }
  for (size_t i = 0; i < res->n_retries && !rc; i++) {
    altar_ledger_scope(d->o->ledger, res->retries[i].partition);
    rc = stage_retry(d, &res->retries[i], evs, n_ev, err);
  }
  /* The input offsets go into the same write, each under its partition. */
  for (size_t i = 0; i < n && !rc; i++) {
    in_part_t *p = find_part(d, msgs[i]->topic, msgs[i]->partition);
    if (p && msgs[i]->offset + 1 > p->next) p->next = msgs[i]->offset + 1;
  }
  for (size_t i = 0; i < d->n_parts && !rc; i++) {
    if (d->parts[i].next < 0 || d->parts[i].next == d->parts[i].stored) continue;
    char k[320], v[32];
    size_t kl = offset_key(d->parts[i].topic, d->parts[i].partition, k, sizeof k);
    int vl = snprintf(v, sizeof v, "%" PRId64, d->parts[i].next);
    altar_ledger_scope(d->o->ledger, d->parts[i].partition);
    rc = altar_ledger_aux_put(d->o->ledger, k, kl, v, (size_t)vl, err);
  }
  altar_ledger_scope(d->o->ledger, ALTAR_LEDGER_SCOPE_NONE);
  if (!rc) {
    rc = altar_ledger_commit(d->o->ledger, err);
    for (size_t i = 0; i < d->n_parts && !rc; i++) d->parts[i].stored = d->parts[i].next;
  } else {
    altar_error_t ae = {0};
    altar_ledger_abort(d->o->ledger, &ae);
  }
  if (!rc) altar__settled_commit(&d->settled);
  else altar__settled_abort(&d->settled);
  if (!rc) note_held(d, res, false);
  if (!rc) {
    note_history(d, evs, n_ev, res);
    d->stats.events += n_ev;
    d->stats.batches++;
    rc = altar__outbox_publish_from(&d->ob, first_seq, err);
  }
  altar_apply_result_reset(res);
  for (size_t i = 0; i < n_ev; i++)
    if (owned[i]) altar_status_event_clear(&evs[i]);
  altar_arena_reset(&d->ev_arena);
  free(evs);
  free(owned);
  return rc;
}

/* The ledger's memory by RocksDB's accounting, every 10 s (it locks each
 * shard of the block cache to add it up). */
static void sample_ledger_memory(daemon_t *d) {
  int64_t now = altar_mono_ms();
  if (d->memory_sampled_ms && now - d->memory_sampled_ms < 10000) return;
  d->memory_sampled_ms = now;
  altar_error_t e = {0};
  altar_ledger_rocksdb_memory(d->o->ledger, &d->stats.ledger_memory, &e); /* zeros for another kind */
}

/* Serves the log's delivery reports. Each acknowledged group event deletes
 * its outbox entry: inside one batch, the deletes of a poll are one ledger
 * write rather than one each. A failed write stops the daemon as a failed
 * delete does (the entries would be published again). */
static void serve_acks(daemon_t *d) {
  altar_ledger_t *l = d->o->ledger;
  altar_error_t e = {0};
  bool batch = d->ob.in_flight > 0 && altar_ledger_begin(l, &e) == ALTAR_OK;
  altar_transport_poll(d->o->transport, 0);
  if (batch && altar_ledger_commit(l, &e) != ALTAR_OK && !d->ob.fatal) {
    d->ob.fatal = e.code ? e.code : ALTAR_ELEDGER;
    d->ob.fatal_err = e;
  }
}

/* A readiness rule that fails (a misconfigured kind, e.g. shards without
 * their fold-count label) holds its group inside apply: the event is
 * applied, nothing fires. What still fails a batch is an event whose group
 * event could not be published (too many shards): the batch is retried one
 * event at a time, and the event that still fails goes to the DLQ with the
 * reason, and the daemon keeps going. */
static int apply_msgs(daemon_t *d, altar_msg_t **msgs, size_t n, altar_error_t *err) {
  int rc = apply_batch(d, msgs, n, NULL, err);
  if (rc != ALTAR_EPREDICATE) return rc;
  dlog(d, "a group decision failed (%s); applying the batch event by event", err->msg);
  for (size_t i = 0; i < n; i++) {
    rc = apply_batch(d, &msgs[i], 1, NULL, err);
    if (rc == ALTAR_EPREDICATE) {
      char reason[ALTAR_ERRMSG_MAX + 32];
      snprintf(reason, sizeof reason, "readiness predicate failed: %s", err->msg);
      dlog(d, "%s/%d/%lld: %s", msgs[i]->topic, (int)msgs[i]->partition, (long long)msgs[i]->offset, reason);
      rc = apply_batch(d, &msgs[i], 1, reason, err);
    }
    if (rc) return rc;
  }
  return ALTAR_OK;
}

/* A batch whose group needs a write to the fleet's storage that failed (a
 * follow-up's inputs manifest) committed nothing: it is applied again after
 * a pause, the daemon up and saying so (log, storage_retries), its input
 * offsets unmoved. Given up, as any error, after STORAGE_RETRY_FOR_S: the
 * consumer must be back in the log well within Kafka's max.poll.interval.ms
 * (300 s by default), or its partitions move while it waits. A stop asked
 * meanwhile ends the wait; the batch is read again at the next start. */
#define STORAGE_RETRY_FIRST_MS 250
#define STORAGE_RETRY_MAX_MS 8000
#define STORAGE_RETRY_FOR_S 120

static bool stop_asked(const daemon_t *d) { return d->o->stop && *d->o->stop; }

static int apply_msgs_retrying(daemon_t *d, altar_msg_t **msgs, size_t n, altar_error_t *err) {
  double give_up = altar_mono_s() + STORAGE_RETRY_FOR_S;
  for (int pause_ms = STORAGE_RETRY_FIRST_MS;;
       pause_ms = pause_ms * 2 > STORAGE_RETRY_MAX_MS ? STORAGE_RETRY_MAX_MS : pause_ms * 2) {
    int rc = apply_msgs(d, msgs, n, err);
    if (rc != ALTAR_ESTORAGE || !err->retriable || altar_mono_s() >= give_up) return rc;
    d->stats.storage_retries++;
    altar__reconciler_metrics_update(&d->metrics, &d->stats);
    dlog(d, "%s; nothing of the batch was committed, applied again in %d ms", err->msg, pause_ms);
    for (int waited = 0; waited < pause_ms && !stop_asked(d); waited += 50) usleep(50 * 1000);
    if (stop_asked(d)) return ALTAR_OK;
  }
}

/* Consumed records past their age go; a failure is said and retried. */
static void prune_consumed(daemon_t *d) {
  size_t pruned = 0;
  altar_error_t e = {0};
  if (altar__consumed_prune_tick(&d->pruner, d->o->ledger, altar_wall_s(), &pruned, &e))
    dlog(d, "pruning consumed records failed, the next turn tries again: %s", e.msg);
  d->stats.consumed_pruned += pruned;
  d->stats.consumed_prune_next = d->pruner.next_frees;
}

/* Writes to the ledger so far: batches, and outbox entries deleted once
 * acknowledged (a checkpoint holding one would have it published again). */
static uint64_t ledger_changes(const daemon_t *d) { return d->stats.batches + d->ob.published; }

/* Says what the collection after a shipped checkpoint did and counts it. */
static void note_checkpoint_gc(daemon_t *d) {
  const altar__cp_runner_t *r = &d->cp;
  if (!r->gc_ran) return;
  d->stats.checkpoint_gc_files += r->gc_res.files_deleted;
  d->stats.checkpoint_gc_bytes += r->gc_res.bytes_deleted;
  d->stats.checkpoint_gc_failures += r->gc_res.delete_failures + (r->gc_rc != ALTAR_OK);
  if (r->gc_rc == ALTAR_OK || r->gc_res.checkpoints_kept) {
    d->stats.checkpoint_stored_bytes = r->gc_res.bytes_stored;
    d->stats.checkpoints_stored = r->gc_res.checkpoints_kept;
  }
  if (r->gc_res.files_deleted)
    dlog(d, "checkpoint storage: %zu old checkpoints and %zu files (%llu bytes) deleted, %zu checkpoints kept",
         r->gc_res.checkpoints_dropped, r->gc_res.files_deleted, (unsigned long long)r->gc_res.bytes_deleted,
         r->gc_res.checkpoints_kept);
  if (r->gc_res.tables_deferred)
    dlog(d,
         "checkpoint storage: %zu table files past their grace left for the next collection: listing the "
         "manifests took longer than %.1f s",
         r->gc_res.tables_deferred, ALTAR_CP_GC_LISTING_MAX_S);
  if (r->gc_res.tables_spared)
    dlog(d,
         "checkpoint storage: %zu table files past their grace kept: a checkpoint shipped during the collection "
         "lists them",
         r->gc_res.tables_spared);
  if (r->gc_rc != ALTAR_OK || r->gc_res.delete_failures)
    dlog(d, "checkpoint storage: %zu deletes failed, tried again after the next checkpoint: %s",
         r->gc_res.delete_failures + (r->gc_rc != ALTAR_OK), r->gc_err.msg);
}

/* Before a checkpoint is taken: the outbox's acknowledgements (each
 * deletes its entry, so the checkpoint holds only what is not out), then
 * the publish topics' ends, recorded in its manifest: every group event the
 * checkpoint's ledger had not decided is published at or beyond them, so
 * whoever takes over from it reads only from there to learn which its tail
 * decides again were out already (reconciler/published_seen.h). Ends that
 * cannot be read leave the manifest without them (a takeover from it then
 * publishes its tail's group events again: at least once). */
static void prepare_checkpoint(daemon_t *d) {
  if (!altar__cp_runner_due(&d->cp, ledger_changes(d), altar_wall_s())) return;
  altar_error_t e = {0};
  if (d->ob.in_flight && altar_transport_flush(d->o->transport, 10000, &e) != ALTAR_OK)
    dlog(d, "checkpoint: waiting for the outbox's acknowledgements: %s", e.msg);
  free(d->cp.pub);
  d->cp.pub = NULL;
  d->cp.n_pub = 0;
  if (d->ob.in_flight) return; /* not all acknowledged: ends would not bound what is out */
  if (altar__publish_ends(d->o->transport, d->o->groups, d->o->topics, &d->cp.pub, &d->cp.n_pub, &e))
    dlog(d, "checkpoint: reading the ready and dead topics' ends: %s", e.msg);
}

/* Says what a checkpoint turn did and counts it. */
static void note_checkpoint(daemon_t *d, int done, const altar_error_t *e) {
  if (done > 0) {
    d->stats.checkpoints++;
    d->stats.checkpoint_last_ok = d->cp.last_ok_at;
    dlog(d, "checkpoint %s shipped (%zu of %zu files uploaded, %llu bytes)", d->cp.cp.id, d->cp.cp.files_uploaded,
         d->cp.cp.files, (unsigned long long)d->cp.cp.bytes);
    if (d->cp.cp.tables_reuploaded)
      dlog(d,
           "checkpoint %s: %zu table files it found stored were deleted before its manifest named them (a "
           "collection sharing the storage) and uploaded again",
           d->cp.cp.id, d->cp.cp.tables_reuploaded);
    note_checkpoint_gc(d);
  } else if (done < 0) {
    d->stats.checkpoint_failures++;
    dlog(d, "checkpoint failed, applying goes on and the next interval tries again: %s", e->msg);
  }
}

/* A partition's next record lies beyond where the ledger stands: the
 * records between were deleted (retention) before this ledger applied them.
 * Nothing can bring them back here; say so where operators look. */
static void note_gap(daemon_t *d, const char *topic, int32_t partition, int64_t next, int64_t found) {
  d->stats.history_gaps++;
  d->follow_gap |= d->o->follow;
  dlog(d,
       "%s/%" PRId32 ": offsets %" PRId64 "..%" PRId64 " are no longer on the log (retention) and were never applied "
       "to this ledger: its groups there may never fire; restore the ledger from a checkpoint covering them "
       "(ledger.checkpoints) or keep the status topic longer",
       topic, partition, next < 0 ? (int64_t)0 : next, found - 1);
}

/* The group events the dead owner of an imported partition published
 * after the checkpoint: read from the checkpoint's recorded ready/dead ends
 * into d->imported, which the outbox asks (chain_skip) for the partition's
 * imported entries and for every group its tail decides again. */
static void read_published_since(daemon_t *d, const char *cp_id, const altar_cp_pub_end_t *ends, size_t n_ends,
                                 int32_t part) {
  if (!n_ends) {
    dlog(d, "checkpoint %s records no ready/dead ends: partition %d's group events decided again are published again",
         cp_id, (int)part);
    return;
  }
  /* Read already for another partition: on from where that stopped (what
   * was published since is read too; a rebalance may come long after). */
  bool again = d->imported_pos && !strcmp(cp_id, d->imported_cp);
  if (!d->imported) {
    d->imported = calloc(1, sizeof *d->imported);
    if (!d->imported) {
      dlog(d, "out of memory for the ids published since checkpoint %s: published again", cp_id);
      return;
    }
    d->imported->ledger = d->o->ledger;
  }
  altar__published_reader_t r = {.tname = d->o->transport_name, .props = d->o->transport_props};
  size_t n = again ? d->n_imported_pos : n_ends, before = altar__published_seen_count(d->imported);
  altar__pub_pos_t *pos = calloc(n, sizeof *pos);
  altar_error_t e = {0};
  if (pos) memcpy(pos, again ? d->imported_pos : ends, n * sizeof *pos);
  int rc =
      pos ? altar__published_read(d->imported, &r, d->o->transport, d->o->groups, d->o->topics, &pos, &n, 60000, &e)
          : altar_error_set(&e, ALTAR_ENOMEM, "out of memory");
  altar__published_reader_close(&r);
  if (rc) {
    dlog(d, "reading the ready and dead topics since checkpoint %s (published again): %s", cp_id, e.msg);
    free(pos);
  } else {
    snprintf(d->imported_cp, sizeof d->imported_cp, "%s", cp_id);
    free(d->imported_pos);
    d->imported_pos = pos;
    d->n_imported_pos = n;
  }
  if (!rc)
    dlog(d, "%zu group event(s) published since checkpoint %s: not published again",
         altar__published_seen_count(d->imported) - before, cp_id);
}

/* Partition part's marker stays until it is applied up to `until`. */
static void note_mark(daemon_t *d, int32_t part, int64_t until) {
  for (size_t i = 0; i < d->n_marks; i++)
    if (d->marks[i].part == part) {
      d->marks[i].until = until;
      return;
    }
  if (ALTAR_GROW(d->marks, d->cap_marks, d->n_marks + 1)) {
    dlog(d, "out of memory noting partition %d's import marker: it stays in the ledger", (int)part);
    return;
  }
  d->marks[d->n_marks++] = (struct mark){part, until};
}

/* At start: the partitions a previous life imported and whose tail it had
 * not applied (killed between the import and the tail): the topics are read
 * again from the ends their checkpoints recorded, before anything left in
 * the outbox goes out. */
static void read_import_markers(daemon_t *d) {
  altar__import_marker_t *v = NULL;
  size_t n = 0;
  altar_error_t e = {0};
  if (altar__import_markers_load(d->o->ledger, &v, &n, &e)) {
    dlog(d, "reading the ledger's import markers (their tails' group events are published again): %s", e.msg);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    dlog(d,
         "%s/%d was imported from checkpoint %s and not yet applied up to offset %" PRId64
         ": reading the ready and dead topics from the ends it recorded",
         d->o->topics->status, (int)v[i].part, v[i].cp_id, v[i].until);
    read_published_since(d, v[i].cp_id, v[i].published, v[i].n_published, v[i].part);
    note_mark(d, v[i].part, v[i].until);
    altar__import_marker_clear(&v[i]);
  }
  free(v);
}

/* After a batch: a marker whose partition is applied up to its end at the
 * import goes (the group events its tail decided again were published or
 * skipped by then: nothing the dead owner may have published is decided
 * again after this). A failed delete is tried again next turn. */
static void drop_import_markers(daemon_t *d) {
  for (size_t i = 0; i < d->n_marks;) {
    in_part_t *p = find_part(d, d->o->topics->status, d->marks[i].part);
    if (!p || p->stored < d->marks[i].until) {
      i++;
      continue;
    }
    altar_error_t e = {0};
    if (altar__import_marker_drop(d->o->ledger, d->marks[i].part, &e)) {
      dlog(d, "dropping %s/%d's import marker: %s", p->topic, (int)p->partition, e.msg);
      return;
    }
    dlog(d, "%s/%d: applied up to offset %" PRId64 ", its end at the import: import marker dropped", p->topic,
         (int)p->partition, p->stored);
    d->marks[i] = d->marks[--d->n_marks];
  }
}

/* The status partition's end now (INT64_MAX when it cannot be read: the
 * marker then stays until the partition is imported again). */
static int64_t status_end(daemon_t *d, int32_t part) {
  altar_topic_list_t *tl = NULL;
  altar_error_t e = {0};
  int64_t end = INT64_MAX;
  if (altar_transport_list_topics(d->o->transport, d->o->topics->status, 10000, &tl, &e) != ALTAR_OK) {
    dlog(d, "reading %s/%d's end for its import marker: %s", d->o->topics->status, (int)part, e.msg);
    return end;
  }
  for (size_t i = 0; tl->n_topics && i < tl->topics[0].n_partitions; i++)
    if (tl->topics[0].partitions[i].partition == part) end = tl->topics[0].partitions[i].end;
  altar_topic_list_free(tl);
  return end;
}

/* The fault a test injects (ALTAR_TEST_KILL_AFTER_IMPORT=FILE): once the
 * file exists and holds a count N of imports (1 to 4096), a kill -9 right
 * after the N-th import's write, before that partition's tail is read. The
 * test writes the file once it knows how many partitions the survivor will
 * import. */
static void kill_if_asked(daemon_t *d) {
  if (!d->kill_after_imports) return;
  FILE *f = fopen(d->kill_after_imports, "r");
  if (!f) return;
  char buf[16] = {0}, *end = NULL;
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = 0;
  long n = strtol(buf, &end, 10);
  if (end == buf || (*end && *end != '\n') || n < 1 || n > 4096) {
    dlog(d, "ALTAR_TEST_KILL_AFTER_IMPORT: %s does not hold a count of imports from 1 to 4096: ignored",
         d->kill_after_imports);
    return;
  }
  if (d->stats.partitions_imported != (uint64_t)n) return;
  fprintf(stderr, "altar reconciler: ALTAR_TEST_KILL_AFTER_IMPORT: killed -9 after import %ld\n", n);
  raise(SIGKILL);
}

/* Partitions whose logs begin beyond the ledger's offsets for them
 * (`beginnings`: the first offsets still there), or gained with their logs
 * whole, in a RocksDB ledger with checkpoints: their state imported from
 * the checkpoints covering them furthest, whatever other partitions the
 * ledger holds; those one checkpoint covers, in one write with their input
 * offsets and import markers (ledger/ledger_import.c), so a kill -9 leaves
 * the old state or the new. taken[i] (false when not): ps[i] was imported
 * and reads on from its checkpoint's offset (or from the beginning, a gap
 * noted, when the log lost records after the checkpoint too), and what the
 * batch being collected holds of it is dropped (the caller's message too).
 * quiet[i]: a partition no checkpoint covers further is not logged. */
static void take_over_partitions(daemon_t *d, in_part_t *const *ps, const int64_t *beginnings, const bool *quiet,
                                 size_t n, bool *taken) {
  for (size_t i = 0; i < n; i++) taken[i] = false;
  if (!n || !d->o->checkpoint_uri || d->o->follow || !(altar_ledger_caps(d->o->ledger) & ALTAR_LEDGER_CAP_PARTITIONS))
    return;
  altar_error_t e = {0};
  altar__import_req_t *reqs = calloc(n, sizeof *reqs);
  if (!reqs) {
    dlog(d, "taking %zu partition(s) over: out of memory", n);
    return;
  }
  /* Acknowledgements first: none lands on an entry the import replaces. */
  if (d->ob.in_flight && altar_transport_flush(d->o->transport, 30000, &e))
    dlog(d, "flush before importing %zu partition(s): %s", n, e.msg);
  /* The dead owner applied no further than the ends now. */
  for (size_t i = 0; i < n; i++)
    reqs[i] =
        (altar__import_req_t){.part = ps[i]->partition, .have = ps[i]->next, .until = status_end(d, ps[i]->partition)};
  altar__partition_import_many(d->o->ledger, d->o->checkpoint_uri, ps[0]->topic, reqs, n, &d->import_src);
  size_t got = 0;
  for (size_t i = 0; i < n; i++) {
    in_part_t *p = ps[i];
    if (reqs[i].rc) {
      if (!quiet[i] || (reqs[i].rc != ALTAR_ENOTFOUND && reqs[i].rc != ALTAR_ESTATE))
        dlog(d, "%s/%" PRId32 ": not taken over from a checkpoint: %s", p->topic, p->partition, reqs[i].err.msg);
      continue;
    }
    taken[i] = true;
    got++;
    d->stats.partitions_imported++;
    note_mark(d, p->partition, reqs[i].until);
    dlog(d, "%s/%" PRId32 ": taken over from checkpoint %s: %zu key(s) imported, reading on from offset %" PRId64,
         p->topic, p->partition, reqs[i].cp.id, reqs[i].keys, altar__checkpoint_offset(&reqs[i].cp, p->partition));
    kill_if_asked(d);
  }
  int rc = ALTAR_OK;
  if (got) {
    /* What the daemon keeps in memory of the ledger, read again. */
    altar__settled_free(&d->settled);
    rc = altar__settled_load(&d->settled, d->o->ledger, d->o->settled_cache_entries, &e);
    if (!rc) rc = altar__retry_wait_open(&d->waits, d->o->ledger, &e);
    if (!rc) rc = altar__outbox_reload_seq(&d->ob, &e);
    size_t held = 0;
    d->held_counted = !rc && altar__held_count(d->o->ledger, &held, &e) == ALTAR_OK;
    if (d->held_counted) d->stats.held = held;
  }
  for (size_t i = 0; i < n; i++) {
    if (!taken[i]) continue;
    in_part_t *p = ps[i];
    altar_checkpoint_t *cp = &reqs[i].cp;
    int64_t at = altar__checkpoint_offset(cp, p->partition);
    if (at < 0) at = 0;
    /* Collected before the import: read again from the offset. */
    if (d->msgs && d->pn_msgs) {
      size_t k = 0;
      for (size_t j = 0; j < *d->pn_msgs; j++) {
        altar_msg_t *m = d->msgs[j];
        if (m->partition == p->partition && !strcmp(m->topic, p->topic)) altar_msg_free(m);
        else d->msgs[k++] = m;
      }
      *d->pn_msgs = k;
    }
    p->next = p->stored = at;
    if (at < beginnings[i]) note_gap(d, p->topic, p->partition, at, beginnings[i]);
    p->read = at < beginnings[i] ? beginnings[i] : at;
    if (!rc) rc = altar_transport_seek(d->o->transport, p->topic, p->partition, p->read, &e);
    if (!rc) read_published_since(d, cp->id, cp->published, cp->n_published, p->partition);
    if (d->imported) {
      d->ob.skip = chain_skip;
      d->ob.skip_ctx = d;
    }
    /* The imported outbox entries: the ones found published are deleted. */
    if (!rc) rc = altar__outbox_publish_partition(&d->ob, p->partition, &e);
  }
  for (size_t i = 0; i < n; i++) altar__checkpoint_clear(&reqs[i].cp);
  free(reqs);
  if (rc && !d->fatal) {
    d->fatal = rc;
    d->fatal_err = e;
  }
}

/* take_over_partitions for one partition. */
static bool take_over_partition(daemon_t *d, in_part_t *p, int64_t beginning, bool quiet_when_none) {
  bool taken = false;
  take_over_partitions(d, &p, &beginning, &quiet_when_none, 1, &taken);
  return taken;
}

/* After an assignment: a partition whose log begins beyond the ledger's
 * offset lost records before this ledger applied them (retention), even
 * when nothing is left to read from it. */
static void check_starts(daemon_t *d) {
  d->check_starts = false;
  altar_topic_list_t *tl = NULL;
  altar_error_t e = {0};
  if (altar_transport_list_topics(d->o->transport, d->o->topics->status, 10000, &tl, &e) != ALTAR_OK) {
    dlog(d, "listing %s to compare its beginnings with the ledger: %s", d->o->topics->status, e.msg);
    return;
  }
  /* The partitions to take over, all in one import (one restore, their
   * files written in parallel, one write). */
  size_t np = tl->n_topics ? tl->topics[0].n_partitions : 0;
  in_part_t **ps = calloc(np ? np : 1, sizeof *ps);
  int64_t *begins = calloc(np ? np : 1, sizeof *begins);
  bool *quiet = calloc(np ? np : 1, sizeof *quiet), *taken = calloc(np ? np : 1, sizeof *taken);
  if (!ps || !begins || !quiet || !taken) np = 0; /* out of memory: the gaps are found when read */
  size_t n = 0;
  for (size_t i = 0; i < np; i++) {
    const altar_partition_info_t *pi = &tl->topics[0].partitions[i];
    in_part_t *p = find_part(d, d->o->topics->status, pi->partition);
    if (!p) continue;
    /* Gained, its log whole: another reconciler may have applied it further
     * (and published its groups); a checkpoint covering more than this
     * ledger holds is imported rather than the log replayed, so takeover
     * time is bounded and published groups are known as such. */
    bool gained = p->gained;
    p->gained = false;
    int64_t applied = p->next >= 0 ? p->next : 0; /* what was read this turn is not applied yet */
    bool behind = (p->read >= 0 ? p->read : 0) < pi->beginning;
    if (behind || (gained && pi->end > applied)) {
      ps[n] = p;
      begins[n] = pi->beginning;
      quiet[n++] = !behind;
    }
  }
  take_over_partitions(d, ps, begins, quiet, n, taken);
  for (size_t i = 0; i < n; i++)
    if (!taken[i] && (ps[i]->read >= 0 ? ps[i]->read : 0) < begins[i]) {
      note_gap(d, ps[i]->topic, ps[i]->partition, ps[i]->read, begins[i]);
      ps[i]->read = begins[i];
    }
  free(ps);
  free(begins);
  free(quiet);
  free(taken);
  altar_topic_list_free(tl);
}

/* The lag gauges, every few seconds and outside the apply path: each owned
 * status partition's end offset against the offset applied. */
static void poll_lag(daemon_t *d) {
  if (!altar__lag_gauge_due(&d->lag, altar_mono_ms())) return;
  size_t n = d->n_parts;
  int32_t *parts = calloc(n ? n : 1, sizeof *parts);
  int64_t *ends = calloc(n ? n : 1, sizeof *ends);
  altar_error_t e = {0};
  int rc = parts && ends ? ALTAR_OK : altar_error_set(&e, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && !rc; i++) parts[i] = d->parts[i].partition;
  if (!rc && n) rc = altar_transport_end_offsets(d->o->transport, d->o->topics->status, parts, n, 1000, ends, &e);
  if (rc) dlog(d, "lag gauges: reading the status partitions' end offsets: %s", e.msg);
  for (size_t i = 0; i < n && !rc; i++) /* reused as the lags */
    ends[i] = ends[i] < 0 ? 0 : ends[i] - (d->parts[i].next > 0 ? d->parts[i].next : 0);
  if (!rc) altar_history_lag(d->o->history, altar_wall_s(), altar__lag_gauge_set(&d->lag, parts, ends, n));
  free(parts);
  free(ends);
}

/* The hour's last buckets into the ledger's side keys, at most every
 * HISTORY_SAVE_MS and only after a change: `altar dashboard` in another
 * process charts them (reconciler/history_store.h). */
#define HISTORY_SAVE_MS 2000
static void save_history(daemon_t *d) {
  altar_history_t *h = d->o->history;
  int64_t now = altar_mono_ms();
  uint64_t version = altar__history_version(h);
  if (!h || version == d->history_saved || now - d->history_saved_ms < HISTORY_SAVE_MS) return;
  altar_error_t e = {0};
  if (altar__history_save(h, d->o->ledger, altar_wall_s(), &e)) {
    if (!d->history_save_failed) dlog(d, "keeping the dashboard's hour in the ledger: %s", e.msg);
    d->history_save_failed = true;
  }
  d->history_saved = version;
  d->history_saved_ms = now;
}

/* What the settled set holds in memory and what it had to read. */
static void settled_stats(daemon_t *d) {
  d->stats.settled_cached = altar__settled_cache_size(&d->settled.cache);
  d->stats.settled_ledger_reads = d->settled.ledger_reads;
}

/* The follow-up guard first (follow-ups on the jobs topic already), then
 * the group events known to be out already. */
static int chain_skip(void *ctx, const char *topic, const char *key, const void *value, size_t vlen,
                      const altar_header_t *h, size_t nh, bool *pskip, altar_error_t *err) {
  daemon_t *d = ctx;
  *pskip = false;
  int rc = d->guard_skip ? d->guard_skip(d->guard_ctx, topic, key, value, vlen, h, nh, pskip, err) : ALTAR_OK;
  if (!rc && !*pskip && d->o->published)
    rc = altar__published_seen_skip(d->o->published, topic, key, value, vlen, h, nh, pskip, err);
  if (!rc && !*pskip && d->imported)
    rc = altar__published_seen_skip(d->imported, topic, key, value, vlen, h, nh, pskip, err);
  return rc;
}

/* Following: every status partition, by assignment, from the ledger's
 * offsets; no group is joined, so the owner keeps them all. */
static int follow_assign(daemon_t *d, altar_error_t *err) {
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(d->o->transport, d->o->topics->status, 10000, &tl, err);
  if (!rc && !tl->n_topics) rc = altar_error_set(err, ALTAR_ENOTFOUND, "standby: no topic %s", d->o->topics->status);
  size_t np = rc ? 0 : tl->topics[0].n_partitions;
  altar_tp_t *tps = rc ? NULL : calloc(np ? np : 1, sizeof *tps);
  if (!rc && !tps) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < np; i++) {
    int32_t part = tl->topics[0].partitions[i].partition;
    int64_t next;
    rc = stored_offset(d->o->ledger, d->o->topics->status, part, &next, err);
    if (rc) break;
    tps[i] = (altar_tp_t){d->o->topics->status, part, next >= 0 ? next : ALTAR_OFFSET_BEGINNING};
    if (ALTAR_GROW(d->parts, d->cap_parts, d->n_parts + 1)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      break;
    }
    char *topic = strdup(d->o->topics->status);
    if (!topic) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      break;
    }
    d->parts[d->n_parts++] = (in_part_t){topic, part, next, next, next};
  }
  if (!rc) rc = altar_transport_assign(d->o->transport, tps, np, err);
  d->check_starts = !rc;
  free(tps);
  altar_topic_list_free(tl);
  return rc;
}

/* The follower's turn: its offsets to the standby, which says whether to go on. */
static bool follow_done(daemon_t *d) {
  altar_tp_t *v = calloc(d->n_parts ? d->n_parts : 1, sizeof *v);
  if (!v) return false;
  for (size_t i = 0; i < d->n_parts; i++)
    v[i] = (altar_tp_t){d->parts[i].topic, d->parts[i].partition, d->parts[i].next};
  bool done = d->o->follow_tick(d->o->follow_ctx, v, d->n_parts, d->follow_gap) != 0;
  free(v);
  return done;
}

int altar__reconciler_run(const altar_reconciler_opts_t *o, altar_reconciler_stats_t *pstats, altar_error_t *err) {
  if (!o || !o->transport || !o->ledger || !o->groups || !o->topics)
    return altar_error_set(err, ALTAR_EINVAL, "reconciler: transport, ledger, groups and topics are required");
  daemon_t d = {.o = o, .group = o->group ? o->group : ALTAR_RECONCILER_GROUP};
  int rc = altar__outbox_open(&d.ob, o->ledger, o->transport, err);
  if (!rc) rc = altar__settled_load(&d.settled, o->ledger, o->settled_cache_entries, err);
  if (!rc) rc = altar__retry_wait_open(&d.waits, o->ledger, err);
  if (rc) {
    altar__settled_free(&d.settled);
    return rc;
  }
  if (d.settled.damaged) dlog(&d, "%s", d.settled.damage.msg);
  altar_error_t me = {0};
  if (altar__reconciler_metrics_init(&d.metrics, o->metrics, &me)) dlog(&d, "metrics off: %s", me.msg);
  if (altar__lag_gauge_init(&d.lag, o->metrics, &me)) dlog(&d, "lag gauges off: %s", me.msg);
  /* The hour a previous life kept goes on (a restart neither empties the
   * charts nor writes over this span's counts with its own). */
  if (o->history && altar__history_load(o->history, o->ledger, altar_wall_s(), &me))
    dlog(&d, "the dashboard's hour from the ledger: %s", me.msg);
  d.history_saved = altar__history_version(o->history);
  altar__cp_runner_init(&d.cp, o->checkpoint_uri, o->checkpoint_interval_s, altar_wall_s());
  d.cp.keep = o->checkpoints_keep ? o->checkpoints_keep : ALTAR_DEFAULT_CHECKPOINTS_KEEP;
  d.pruner.keep_s = o->consumed_keep_s;
  d.ob.on_published = o->on_published;
  d.ob.on_published_ctx = o->on_published_ctx;
  altar_transport_set_delivery(o->transport, altar__outbox_on_delivery, &d.ob, NULL, NULL);
  /* Whatever a previous life staged but did not see acknowledged goes out
   * again, but a follow-up the log holds already does not. */
  if (o->follow && o->published) {
    d.ob.hold = altar__published_seen_on_hold;
    d.ob.hold_ctx = o->published;
  }
  altar__followup_guard_t guard;
  altar__followup_guard_begin(&guard, &d.ob, o);
  d.guard_skip = d.ob.skip;
  d.guard_ctx = d.ob.skip_ctx;
  d.ob.skip = chain_skip;
  d.ob.skip_ctx = &d;
  d.kill_after_imports = getenv("ALTAR_TEST_KILL_AFTER_IMPORT");
  if (!o->follow) read_import_markers(&d); /* before what is left in the outbox goes out */
  uint64_t dropped0 = o->published ? o->published->dropped : 0;
  rc = altar__outbox_publish_from(&d.ob, 0, err);
  uint64_t dropped = o->published ? o->published->dropped - dropped0 : 0;
  altar__followup_guard_end(&guard, &d.ob, &d.stats);
  d.stats.followups_skipped -= dropped; /* the guard counted every skip as its own */
  d.guard_skip = NULL;
  if (o->published || d.imported) { /* kept: the tail decides again what the dead owner published */
    d.ob.skip = chain_skip;
    d.ob.skip_ctx = &d;
  }
  if (dropped)
    dlog(&d, "%llu group event(s) left in the outbox were on the ready or dead topics already: not sent again",
         (unsigned long long)dropped);
  if (d.stats.followups_skipped)
    dlog(&d, "%llu follow-up(s) left in the outbox were on the jobs topic already: not sent again",
         (unsigned long long)d.stats.followups_skipped);
  if (!rc) rc = recheck_held(&d, err);
  const char *topics[] = {o->topics->status};
  if (!rc) {
    altar_topic_list_t *tl = NULL;
    altar_error_t le = {0};
    if (altar_transport_list_topics(o->transport, o->topics->status, 10000, &tl, &le) == ALTAR_OK && tl->n_topics)
      d.status_parts = (int32_t)tl->topics[0].n_partitions;
    altar_topic_list_free(tl);
  }
  if (!rc && o->follow) rc = follow_assign(&d, err);
  else if (!rc) rc = altar_transport_subscribe(o->transport, d.group, topics, 1, on_rebalance, &d, err);
  size_t batch_max = o->batch_max ? o->batch_max : 1000;
  altar_msg_t **msgs = calloc(batch_max, sizeof *msgs);
  if (!msgs && !rc) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  size_t n = 0;
  d.msgs = msgs;
  d.pn_msgs = &n;
  while (!rc && !d.fatal && !d.ob.fatal && !(o->stop && *o->stop)) {
    n = 0;
    altar_error_t e = {0};
    while (n < batch_max) {
      altar_msg_t *m = NULL;
      int crc = altar_transport_consume(o->transport, n ? 0 : 100, &m, &e);
      if (crc) {
        dlog(&d, "consume: %s", e.msg);
        break;
      }
      if (!m) break;
      in_part_t *p = find_part(&d, m->topic, m->partition);
      if (p && p->next >= 0 && m->offset < p->next) { /* applied in an earlier life */
        altar_msg_free(m);
        continue;
      }
      if (p && m->offset > (p->read >= 0 ? p->read : 0)) {
        if (take_over_partition(&d, p, m->offset, false)) { /* read again from where the import left it */
          altar_msg_free(m);
          continue;
        }
        note_gap(&d, m->topic, m->partition, p->read, m->offset);
      }
      if (p) p->read = m->offset + 1;
      msgs[n++] = m;
    }
    if (d.check_starts) check_starts(&d);                                    /* assignments arrive inside consume */
    if (d.import_src.dir[0]) altar__partition_import_release(&d.import_src); /* this turn's imports are done */
    if (n) rc = apply_msgs_retrying(&d, msgs, n, err);
    for (size_t i = 0; i < n; i++) altar_msg_free(msgs[i]);
    if (!rc && d.n_marks) drop_import_markers(&d);
    size_t released = 0;
    if (!rc) rc = altar__retry_wait_release(&d.waits, &d.ob, altar_wall_s(), &released, err);
    if (released) dlog(&d, "%zu retried shard(s) due: republished", released);
    if (!rc) {
      int cdone = 0;
      altar_error_t ce = {0};
      prepare_checkpoint(&d);
      altar__cp_runner_tick(&d.cp, o->ledger, o->topics->status, ledger_changes(&d), altar_wall_s(), &cdone, &ce);
      note_checkpoint(&d, cdone, &ce);
    }
    if (!rc) prune_consumed(&d);
    serve_acks(&d);
    if (!rc) poll_lag(&d);
    if (!rc) save_history(&d);
    d.stats.published = d.ob.published;
    settled_stats(&d);
    sample_ledger_memory(&d);
    altar__reconciler_metrics_update(&d.metrics, &d.stats);
    if (!rc && o->follow && follow_done(&d)) break;
    if (!rc && o->exit_when_idle && !n && d.ob.in_flight == 0 && d.n_parts && d.waits.next_due == 0) {
      bool done = false;
      size_t left = 0;
      if (altar_transport_caught_up(o->transport, &done, &e) == ALTAR_OK && done &&
          altar__outbox_count(&d.ob, &left, &e) == ALTAR_OK && left == 0)
        break;
    }
  }
  d.msgs = NULL;
  d.pn_msgs = NULL;
  free(msgs);
  /* Acknowledgements first: each deletes its outbox entry, so the last
   * checkpoint holds none that is out already (a takeover from it would
   * publish it again). */
  altar_error_t fe = {0};
  if (altar_transport_flush(o->transport, 30000, &fe) != ALTAR_OK) dlog(&d, "flush: %s", fe.msg);
  {
    /* The upload in flight, then (a clean stop) one more of what changed
     * since, so whoever takes over replays little. */
    int cdone = 0;
    altar_error_t ce = {0};
    altar__cp_runner_finish(&d.cp, &cdone, &ce);
    note_checkpoint(&d, cdone, &ce);
    if (!rc && !d.fatal && d.cp.uri) {
      d.cp.next_due = 0;
      prepare_checkpoint(&d);
      altar__cp_runner_tick(&d.cp, o->ledger, o->topics->status, ledger_changes(&d), altar_wall_s(), &cdone, &ce);
      note_checkpoint(&d, cdone, &ce);
      altar__cp_runner_finish(&d.cp, &cdone, &ce);
      note_checkpoint(&d, cdone, &ce);
    }
    altar__cp_runner_free(&d.cp);
  }
  /* No callback of ours fires after this (the caller's close revokes what
   * is owned, after the offsets are committed below). */
  altar_transport_detach(o->transport);
  for (size_t i = 0; i < d.n_parts; i++) {
    altar_error_t ce = {0};
    if (d.parts[i].next >= 0 && !o->follow) /* a follower commits nothing of the group's */
      altar_transport_commit(o->transport, d.parts[i].topic, d.parts[i].partition, d.parts[i].next, NULL, &ce);
    free(d.parts[i].topic);
  }
  free(d.parts);
  d.parts = NULL;
  settled_stats(&d);
  altar__settled_free(&d.settled);
  if (d.imported) altar__published_seen_free(d.imported);
  free(d.imported);
  free(d.imported_pos);
  free(d.marks);
  altar__partition_import_release(&d.import_src);
  altar_apply_result_clear(&d.res);
  altar_arena_free(&d.ev_arena);
  altar__lag_gauge_free(&d.lag);
  d.n_parts = 0;
  d.stats.published = d.ob.published;
  altar__outbox_close(&d.ob);
  altar__reconciler_metrics_update(&d.metrics, &d.stats);
  if (pstats) *pstats = d.stats;
  if (!rc && d.fatal) {
    if (err) *err = d.fatal_err;
    rc = d.fatal;
  }
  if (!rc && d.ob.fatal) {
    if (err) *err = d.ob.fatal_err;
    rc = d.ob.fatal;
  }
  return rc;
}
