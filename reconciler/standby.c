/* The standby's loop: keep the copy current by applying the status topic,
 * restore a checkpoint only when the copy is missing, broken or behind it,
 * say how far behind the copy is, take over when the owner is gone. */
#include "reconciler/standby.h"
#include "reconciler/outbox.h"

#include "altar/clock.h"
#include "altar/grow.h"
#include "reconciler/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Held entries that are no group event (retried jobs, DLQ copies), staged
 * in one turn of the follower: the copy's offsets after that turn. */
typedef struct held_turn {
  altar_cp_offset_t *next;
  size_t n;
  double staged_at; /* unix seconds */
  uint64_t *seqs;
  size_t n_seqs;
} held_turn_t;

/* Why the follower stopped. */
enum { GO_ON, RESTORE, TAKE_OVER };

typedef struct standby {
  const altar__standby_opts_t *o;
  char warm[4096], next[4096]; /* the copy, and where a checkpoint is restored */
  altar_checkpoint_t cp;       /* the checkpoint the copy started from (id empty: none) */
  char newest[64];             /* the newest checkpoint seen (id) */
  altar_checkpoint_t newest_cp;
  altar_ledger_t *ledger;           /* the copy, open while following */
  altar__published_reader_t reader; /* the publish topics */
  altar__pub_pos_t *pos;            /* where reading them goes on */
  size_t n_pos;
  bool caught_up, said_ahead;
  int why;          /* GO_ON, RESTORE, TAKE_OVER */
  int64_t lag;      /* status events after the copy's offsets (-1: unknown) */
  int64_t applied;  /* the sum of the copy's offsets */
  double next_look; /* monotonic seconds */
  altar_metric_t *m_caught_up, *m_tail, *m_restores, *m_taken_at, *m_held, *m_dropped;
  uint64_t dropped_said; /* published->dropped as last counted in the metric */
  held_turn_t *turns;    /* oldest first */
  size_t n_turns, cap_turns;
  uint64_t *untagged; /* staged this turn */
  size_t n_untagged, cap_untagged;
} standby_t;

static void slog(const standby_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(const standby_t *s, const char *fmt, ...) {
  if (s->o->quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("altar reconciler: standby: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A restored checkpoint is a flat directory of RocksDB files. */
static void remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  char p[8192];
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void turns_clear(standby_t *s) {
  for (size_t i = 0; i < s->n_turns; i++) {
    free(s->turns[i].next);
    free(s->turns[i].seqs);
  }
  free(s->turns);
  free(s->untagged);
  s->turns = NULL;
  s->untagged = NULL;
  s->n_turns = s->cap_turns = s->n_untagged = s->cap_untagged = 0;
}

static int on_other(void *ctx, uint64_t seq, altar_error_t *err) {
  standby_t *s = ctx;
  if (ALTAR_GROW(s->untagged, s->cap_untagged, s->n_untagged + 1))
    return altar_error_set(err, ALTAR_ENOMEM, "standby: out of memory");
  s->untagged[s->n_untagged++] = seq;
  return ALTAR_OK;
}

/* The entries staged this turn get the copy's offsets after it. */
static void tag_turn(standby_t *s, const altar_tp_t *v, size_t n) {
  if (!s->n_untagged) return;
  held_turn_t t = {.next = calloc(n ? n : 1, sizeof *t.next), .n = n, .staged_at = altar_wall_s()};
  if (!t.next || ALTAR_GROW(s->turns, s->cap_turns, s->n_turns + 1)) {
    free(t.next);
    return; /* kept untagged: tagged with a later turn's (higher) offsets */
  }
  for (size_t i = 0; i < n; i++) t.next[i] = (altar_cp_offset_t){v[i].partition, v[i].offset < 0 ? 0 : v[i].offset};
  t.seqs = s->untagged;
  t.n_seqs = s->n_untagged;
  s->untagged = NULL;
  s->n_untagged = s->cap_untagged = 0;
  s->turns[s->n_turns++] = t;
}

/* A checkpoint cut after the owner's outbox was acknowledged (it records
 * the publish topics' ends) says that every entry the owner staged before
 * it is out: the copy's entries staged in turns it covers go. Ten seconds
 * of margin for retries released by time (the owner and the copy release
 * one when it is due, each by its own clock). */
static void drop_covered(standby_t *s, const altar_checkpoint_t *c) {
  if (!c->n_published || !s->o->published->ledger) return;
  size_t done = 0, dropped = 0;
  for (; done < s->n_turns; done++) {
    held_turn_t *t = &s->turns[done];
    bool covered = t->staged_at + 10 < c->taken_at;
    for (size_t i = 0; i < t->n && covered; i++)
      covered = t->next[i].next <= altar__checkpoint_offset(c, t->next[i].partition) || t->next[i].next == 0;
    if (!covered) break;
    for (size_t k = 0; k < t->n_seqs; k++) {
      altar_error_t e = {0};
      dropped += altar__outbox_del_ref(s->o->published->ledger, t->seqs[k], &e) == ALTAR_OK;
    }
    free(t->next);
    free(t->seqs);
  }
  memmove(s->turns, s->turns + done, (s->n_turns - done) * sizeof *s->turns);
  s->n_turns -= done;
  if (dropped)
    slog(s, "%zu retried job(s) or DLQ cop(ies) the copy staged are out already (checkpoint %s covers them): deleted",
         dropped, c->id);
}

static int metrics_init(standby_t *s, altar_error_t *err) {
  altar_metrics_t *reg = s->o->metrics;
  if (!reg) return ALTAR_OK;
  s->m_caught_up = altar_metrics_gauge(reg, "altar_reconciler_standby_caught_up",
                                       "1 when the standby's copy of the ledger is within "
                                       "ledger.standby_caught_up_events of the status topic's end.",
                                       err);
  s->m_tail = s->m_caught_up ? altar_metrics_gauge(reg, "altar_reconciler_standby_tail_events",
                                                   "Status events after the copy's offsets (its lag): what a takeover "
                                                   "would read before it is current.",
                                                   err)
                             : NULL;
  s->m_restores = s->m_tail ? altar_metrics_counter(reg, "altar_reconciler_standby_restores_total",
                                                    "Checkpoints the standby restored into its copy (none, broken "
                                                    "or behind).",
                                                    err)
                            : NULL;
  s->m_taken_at = s->m_restores ? altar_metrics_gauge(reg, "altar_reconciler_standby_checkpoint_timestamp_seconds",
                                                      "When the checkpoint the copy started from was taken (unix "
                                                      "seconds; 0 = none).",
                                                      err)
                                : NULL;
  s->m_held = s->m_taken_at ? altar_metrics_gauge(reg, "altar_reconciler_standby_held_entries",
                                                  "Group events the copy decided whose publication by the owner "
                                                  "was not seen yet.",
                                                  err)
                            : NULL;
  s->m_dropped = s->m_held ? altar_metrics_counter(reg, "altar_reconciler_standby_published_seen_total",
                                                   "Group events the copy decided and then found published by the "
                                                   "owner: deleted from its outbox.",
                                                   err)
                           : NULL;
  return s->m_dropped ? ALTAR_OK : err->code;
}

static void offsets_text(const altar_tp_t *v, size_t n, char *out, size_t outsz) {
  out[0] = 0;
  for (size_t i = 0, at = 0; i < n && at + 32 < outsz; i++)
    at += (size_t)snprintf(out + at, outsz - at, "%s%" PRId32 ":%" PRId64, i ? "," : "", v[i].partition,
                           v[i].offset < 0 ? (int64_t)0 : v[i].offset);
}

static int64_t cp_sum(const altar_checkpoint_t *c) {
  int64_t n = 0;
  for (size_t i = 0; i < c->n_offsets; i++) n += c->offsets[i].next;
  return n;
}

/* Status events after the copy's offsets (v), or -1 when the topic cannot be listed. */
static int64_t lag_of(const standby_t *s, const altar_tp_t *v, size_t n) {
  altar_topic_list_t *tl = NULL;
  altar_error_t ignored = {0};
  if (altar_transport_list_topics(s->o->transport, s->o->status_topic, 5000, &tl, &ignored) || !tl->n_topics) {
    altar_topic_list_free(tl);
    return -1;
  }
  int64_t lag = 0;
  const altar_topic_info_t *ti = &tl->topics[0];
  for (size_t i = 0; i < ti->n_partitions; i++) {
    int64_t from = 0;
    for (size_t k = 0; k < n; k++)
      if (v[k].partition == ti->partitions[i].partition) from = v[k].offset < 0 ? 0 : v[k].offset;
    if (from < ti->partitions[i].beginning) from = ti->partitions[i].beginning;
    if (ti->partitions[i].end > from) lag += ti->partitions[i].end - from;
  }
  altar_topic_list_free(tl);
  return lag;
}

/* Whether the copy lacks what checkpoint c covers on some partition. */
static bool behind(const altar_checkpoint_t *c, const altar_tp_t *v, size_t n) {
  for (size_t i = 0; i < c->n_offsets; i++) {
    int64_t have = 0;
    for (size_t k = 0; k < n; k++)
      if (v[k].partition == c->offsets[i].partition) have = v[k].offset < 0 ? 0 : v[k].offset;
    if (have < c->offsets[i].next) return true;
  }
  return false;
}

/* Where reading the publish topics starts for a copy from checkpoint c
 * (NULL: an empty copy, which decides every group again: from their
 * beginning). A checkpoint that recorded the ends it was cut at gives
 * those; one that did not (older), the ends now. */
static int reset_positions(standby_t *s, const altar_checkpoint_t *c, altar_error_t *err) {
  free(s->pos);
  s->pos = NULL;
  s->n_pos = 0;
  altar__published_seen_free(s->o->published);
  memset(s->o->published, 0, sizeof *s->o->published);
  s->dropped_said = 0;
  turns_clear(s);
  altar__published_reader_close(&s->reader); /* reads from the new positions */
  if (!c) return ALTAR_OK;
  if (c->n_published) {
    s->pos = calloc(c->n_published, sizeof *s->pos);
    if (!s->pos) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    memcpy(s->pos, c->published, c->n_published * sizeof *s->pos);
    s->n_pos = c->n_published;
    return ALTAR_OK;
  }
  return altar__publish_ends(s->o->transport, s->o->apply->groups, s->o->apply->topics, &s->pos, &s->n_pos, err);
}

/* Restores the newest checkpoint as the copy (none there: an empty copy). */
static int restore(standby_t *s, altar_error_t *err) {
  double t0 = altar_mono_s();
  remove_flat_dir(s->next);
  altar_checkpoint_t got = {0};
  int rc = s->o->checkpoint_uri && *s->o->checkpoint_uri
               ? altar__checkpoint_restore(s->o->checkpoint_uri, s->next, &got, err)
               : ALTAR_ENOTFOUND;
  if (rc == ALTAR_ENOTFOUND) {
    if (err) memset(err, 0, sizeof *err);
    remove_flat_dir(s->warm);
    altar__checkpoint_clear(&s->cp);
    slog(s, "no checkpoint yet: the copy %s starts empty and applies the status topic from its beginning", s->warm);
    return reset_positions(s, NULL, err);
  }
  if (rc) return rc;
  remove_flat_dir(s->warm);
  if (rename(s->next, s->warm) != 0) {
    altar__checkpoint_clear(&got);
    return altar_error_set(err, ALTAR_EIO, "standby: %s: %s", s->warm, strerror(errno));
  }
  altar__checkpoint_clear(&s->cp);
  s->cp = got;
  snprintf(s->newest, sizeof s->newest, "%s", s->cp.id);
  altar__checkpoint_clear(&s->newest_cp);
  altar_error_t ignored = {0};
  if (altar__checkpoint_latest(s->o->checkpoint_uri, &s->newest_cp, &ignored) != ALTAR_OK)
    altar__checkpoint_clear(&s->newest_cp);
  char offs[512] = "";
  for (size_t i = 0, at = 0; i < s->cp.n_offsets && at < sizeof offs - 32; i++)
    at += (size_t)snprintf(offs + at, sizeof offs - at, "%s%" PRId32 ":%" PRId64, i ? "," : "",
                           s->cp.offsets[i].partition, s->cp.offsets[i].next);
  slog(s, "restored checkpoint %s into %s in %.2f s (%zu files; status offsets %s)", s->cp.id, s->warm,
       altar_mono_s() - t0, s->cp.files, offs[0] ? offs : "none");
  if (s->m_restores) {
    altar_metric_inc(s->m_restores);
    altar_metric_set(s->m_taken_at, s->cp.taken_at);
  }
  return reset_positions(s, &s->cp, err);
}

/* New group events on the publish topics: the copy's held entries they
 * match are deleted (the owner published them). */
static void read_published(standby_t *s, int timeout_ms) {
  altar_error_t e = {0};
  if (altar__published_read(s->o->published, &s->reader, s->o->transport, s->o->apply->groups, s->o->apply->topics,
                            &s->pos, &s->n_pos, timeout_ms, &e))
    slog(s, "reading the ready and dead topics (tried again): %s", e.msg);
  /* Matched either way: read after the copy decided it (here), or before
   * (the outbox's skip as the copy stages it). */
  if (s->m_dropped) {
    altar_metric_add(s->m_dropped, s->o->published->dropped - s->dropped_said);
    s->dropped_said = s->o->published->dropped;
    altar_metric_set(s->m_held, (double)altar__published_seen_pending(s->o->published));
  }
}

/* The follower's turn (reconciler/daemon.c): every poll_ms, the publish
 * topics, the lag, the checkpoints and the group. */
static int on_tick(void *ctx, const altar_tp_t *v, size_t n, bool gap) {
  standby_t *s = ctx;
  tag_turn(s, v, n);
  if (altar_mono_s() < s->next_look) return 0;
  s->next_look = altar_mono_s() + (s->o->poll_ms > 0 ? s->o->poll_ms : 500) / 1000.0;
  read_published(s, 10000);
  s->applied = 0;
  for (size_t i = 0; i < n; i++) s->applied += v[i].offset > 0 ? v[i].offset : 0;
  int64_t lag = lag_of(s, v, n);
  if (lag >= 0) s->lag = lag;
  bool caught = lag >= 0 && lag <= s->o->caught_up_events;
  if (s->m_tail) {
    altar_metric_set(s->m_caught_up, caught ? 1 : 0);
    if (lag >= 0) altar_metric_set(s->m_tail, (double)lag);
  }
  char offs[1024];
  offsets_text(v, n, offs, sizeof offs);
  if (caught != s->caught_up && lag >= 0)
    slog(s,
         caught ? "caught up: the copy applied status offsets %s (%" PRId64 " events), %" PRId64
                  " event(s) short of the topic's end (ledger.standby_caught_up_events %" PRId64 "); a takeover reads "
                  "only those"
                : "behind: the copy applied status offsets %s (%" PRId64 " events), %" PRId64
                  " event(s) short of the topic's end (more than ledger.standby_caught_up_events %" PRId64 ")",
         offs, s->applied, lag, s->o->caught_up_events);
  s->caught_up = caught && lag >= 0 ? true : lag >= 0 ? false : s->caught_up;
  /* A newer checkpoint: restored only when the copy lacks what it covers. */
  altar_checkpoint_t latest = {0};
  altar_error_t le = {0};
  if (s->o->checkpoint_uri && *s->o->checkpoint_uri &&
      altar__checkpoint_latest(s->o->checkpoint_uri, &latest, &le) == ALTAR_OK && strcmp(latest.id, s->newest) > 0) {
    snprintf(s->newest, sizeof s->newest, "%s", latest.id);
    if (behind(&latest, v, n) || (gap && strcmp(latest.id, s->cp.id) > 0)) {
      slog(s, "checkpoint %s covers status events the copy lacks (%s): restoring it", latest.id,
           gap ? "records gone before it applied them" : "it is behind");
      s->why = RESTORE;
    } else if (!s->said_ahead) {
      slog(s,
           "checkpoint %s (status offsets up to %" PRId64 " events) is behind the copy (%" PRId64
           "): not restored, the copy goes on",
           latest.id, cp_sum(&latest), s->applied);
      s->said_ahead = true;
    }
    if (!s->why) drop_covered(s, &latest);
    altar__checkpoint_clear(&s->newest_cp);
    s->newest_cp = latest;
    memset(&latest, 0, sizeof latest);
  }
  altar__checkpoint_clear(&latest);
  if (s->why) return 1;
  size_t members = 0;
  altar_error_t me = {0};
  int mrc = altar_transport_topic_members(s->o->transport, s->o->group, s->o->status_topic, 5000, &members, &me);
  if (mrc) {
    slog(s, "reading group %s: %s", s->o->group, me.msg);
    return 0;
  }
  if (members) return 0;
  /* The owner is gone: what it published last is on the topics now. */
  read_published(s, 30000);
  char cpoffs[512] = "";
  for (size_t i = 0, at = 0; i < s->newest_cp.n_offsets && at < sizeof cpoffs - 32; i++)
    at += (size_t)snprintf(cpoffs + at, sizeof cpoffs - at, "%s%" PRId32 ":%" PRId64, i ? "," : "",
                           s->newest_cp.offsets[i].partition, s->newest_cp.offsets[i].next);
  slog(s,
       "no reconciler consumes %s any more: taking over with the copy at status offsets %s (%" PRId64
       " events; the newest checkpoint %s covers %" PRId64 ": %s), %" PRId64 " event(s) left to read (%s); %" PRIu64
       " of its group events were found published already, %zu not yet",
       s->o->status_topic, offs, s->applied, s->newest_cp.id[0] ? s->newest_cp.id : "none", cp_sum(&s->newest_cp),
       cpoffs[0] ? cpoffs : "none", s->lag, s->caught_up ? "caught up" : "not caught up", s->o->published->dropped,
       altar__published_seen_pending(s->o->published));
  s->why = TAKE_OVER;
  return 1;
}

static int follow(standby_t *s, altar_error_t *err) {
  altar_ledger_t *l = altar_ledger_rocksdb_open(s->warm, NULL, err);
  if (!l) {
    slog(s, "the copy %s cannot be opened (%s): restoring", s->warm, err->msg);
    s->why = RESTORE;
    return ALTAR_OK;
  }
  s->o->published->ledger = l;
  s->o->published->on_other = on_other;
  s->o->published->other_ctx = s;
  altar_reconciler_opts_t o = *s->o->apply;
  o.transport = s->o->transport;
  o.ledger = l;
  o.stop = s->o->stop;
  o.metrics = NULL; /* the owner's metrics are registered by the owner (after takeover) */
  o.history = NULL;
  o.checkpoint_uri = NULL;
  o.exit_when_idle = false;
  o.on_published = NULL;
  o.follow = true;
  o.follow_tick = on_tick;
  o.follow_ctx = s;
  o.published = s->o->published;
  s->why = GO_ON;
  s->next_look = 0;
  altar_reconciler_stats_t st = {0};
  int rc = altar__reconciler_run(&o, &st, err);
  /* The held entries stay in the copy; the owner-to-be matches by id. */
  for (size_t i = 0; i < s->o->published->pending.cap; i++)
    if (s->o->published->pending.ctrl[i]) free(s->o->published->pending.slots[i].val);
  altar__hmap_free(&s->o->published->pending);
  s->o->published->ledger = NULL;
  s->o->published->on_other = NULL;
  s->o->published->other_ctx = NULL;
  altar_ledger_close(l);
  return rc;
}

int altar__standby_wait(const altar__standby_opts_t *o, altar_error_t *err) {
  if (!o->apply || !o->published || !o->apply->transport_name)
    return altar_error_set(err, ALTAR_EINVAL,
                           "standby: apply options (with the transport's name) and a published set are required");
  if (exists(o->ledger_path))
    return altar_error_set(err, ALTAR_EEXIST,
                           "ledger.standby: ledger.path %s exists: a standby "
                           "starts without a ledger of its own "
                           "(move it away, or run without --standby)",
                           o->ledger_path);
  standby_t s = {.o = o, .lag = -1, .reader = {.tname = o->apply->transport_name, .props = o->apply->transport_props}};
  snprintf(s.warm, sizeof s.warm, "%s.standby", o->ledger_path);
  snprintf(s.next, sizeof s.next, "%s.standby-next", o->ledger_path);
  /* A copy a previous life left is not trusted: what it matched is unknown. */
  remove_flat_dir(s.warm);
  int rc = metrics_init(&s, err);
  slog(&s, "keeping %s current from %s; taking over when group %s has no member on %s", s.warm, o->status_topic,
       o->group, o->status_topic);
  if (!rc) rc = restore(&s, err);
  while (!rc) {
    if (o->stop && *o->stop) break;
    rc = follow(&s, err);
    if (rc || s.why == TAKE_OVER || (o->stop && *o->stop)) break;
    if (s.why == RESTORE) {
      altar_error_t re = {0};
      if (restore(&s, &re)) {
        slog(&s, "restoring the newest checkpoint failed, the copy goes on as it is: %s", re.msg);
        if (!exists(s.warm)) rc = altar_error_set(err, re.code, "standby: %s", re.msg);
      }
    }
  }
  if (!rc && o->stop && *o->stop) rc = altar_error_set(err, ALTAR_ECANCELED, "standby: stopped");
  if (!rc && s.why == TAKE_OVER && rename(s.warm, o->ledger_path) != 0)
    rc = altar_error_set(err, ALTAR_EIO, "standby: moving %s to %s: %s", s.warm, o->ledger_path, strerror(errno));
  if (s.m_caught_up) altar_metric_set(s.m_caught_up, 0);
  free(s.pos);
  altar__published_reader_close(&s.reader);
  turns_clear(&s);
  altar__checkpoint_clear(&s.cp);
  altar__checkpoint_clear(&s.newest_cp);
  return rc;
}
