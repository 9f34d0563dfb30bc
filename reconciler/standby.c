/* The standby's loop: refresh the warm copy, say how far behind it is,
 * take over when the status topic's owner is gone. */
#include "reconciler/standby.h"

#include "altar/clock.h"
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

typedef struct standby {
  const altar__standby_opts_t *o;
  char warm[4096], next[4096]; /* the copy, and where a newer one is restored */
  altar_checkpoint_t cp;       /* what the warm copy holds (id empty: none) */
  bool caught_up;
  altar_metric_t *m_caught_up, *m_tail, *m_restores, *m_taken_at;
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

static int metrics_init(standby_t *s, altar_error_t *err) {
  altar_metrics_t *reg = s->o->metrics;
  if (!reg) return ALTAR_OK;
  s->m_caught_up = altar_metrics_gauge(reg, "altar_reconciler_standby_caught_up",
                                       "1 when the standby's warm ledger copy is the newest "
                                       "checkpoint: a takeover "
                                       "then only reads the status events after it.",
                                       err);
  s->m_tail = s->m_caught_up ? altar_metrics_gauge(reg, "altar_reconciler_standby_tail_events",
                                                   "Status events after the warm copy's offsets: what a takeover "
                                                   "would read before it is current.",
                                                   err)
                             : NULL;
  s->m_restores = s->m_tail ? altar_metrics_counter(reg, "altar_reconciler_standby_restores_total",
                                                    "Checkpoints the standby restored into its warm copy.", err)
                            : NULL;
  s->m_taken_at = s->m_restores ? altar_metrics_gauge(reg, "altar_reconciler_standby_checkpoint_timestamp_seconds",
                                                      "When the warm copy's checkpoint was taken (unix seconds; 0 = "
                                                      "none yet).",
                                                      err)
                                : NULL;
  return s->m_taken_at ? ALTAR_OK : err->code;
}

/* Status events after the warm copy's offsets (all of them without one). */
static int64_t tail_events(const standby_t *s) {
  altar_topic_list_t *tl = NULL;
  altar_error_t ignored = {0};
  if (altar_transport_list_topics(s->o->transport, s->o->status_topic, 5000, &tl, &ignored) || !tl->n_topics) {
    altar_topic_list_free(tl);
    return -1;
  }
  int64_t n = 0;
  const altar_topic_info_t *ti = &tl->topics[0];
  for (size_t i = 0; i < ti->n_partitions; i++) {
    int64_t from = s->cp.id[0] ? altar__checkpoint_offset(&s->cp, ti->partitions[i].partition) : 0;
    if (from < ti->partitions[i].beginning) from = ti->partitions[i].beginning;
    if (ti->partitions[i].end > from) n += ti->partitions[i].end - from;
  }
  altar_topic_list_free(tl);
  return n;
}

/* Restores the newest checkpoint when it is newer than the warm copy. */
static int refresh(standby_t *s, altar_error_t *err) {
  altar_checkpoint_t latest = {0};
  int rc = altar__checkpoint_latest(s->o->checkpoint_uri, &latest, err);
  if (rc == ALTAR_ENOTFOUND) return ALTAR_OK; /* none yet */
  bool newer = !rc && strcmp(latest.id, s->cp.id) > 0;
  altar__checkpoint_clear(&latest);
  if (rc || !newer) return rc;
  double t0 = altar_mono_s();
  remove_flat_dir(s->next); /* a previous life's, cut short */
  altar_checkpoint_t got = {0};
  rc = altar__checkpoint_restore(s->o->checkpoint_uri, s->next, &got, err);
  if (rc) return rc;
  /* The copy is replaced only by a whole newer one. */
  remove_flat_dir(s->warm);
  if (rename(s->next, s->warm) != 0) {
    altar__checkpoint_clear(&got);
    return altar_error_set(err, ALTAR_EIO, "standby: %s: %s", s->warm, strerror(errno));
  }
  altar__checkpoint_clear(&s->cp);
  s->cp = got;
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
  return ALTAR_OK;
}

/* Caught up: the warm copy is the newest checkpoint there is. */
static void note_progress(standby_t *s, bool newest) {
  int64_t tail = tail_events(s);
  if (s->m_tail) {
    altar_metric_set(s->m_caught_up, newest ? 1 : 0);
    if (tail >= 0) altar_metric_set(s->m_tail, (double)tail);
  }
  if (newest && !s->caught_up)
    slog(s,
         "caught up: the warm copy holds the newest checkpoint %s; a takeover "
         "reads the %" PRId64 " status event(s) after it",
         s->cp.id, tail);
  s->caught_up = newest;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int altar__standby_wait(const altar__standby_opts_t *o, altar_error_t *err) {
  if (!o->checkpoint_uri || !*o->checkpoint_uri)
    return altar_error_set(err, ALTAR_EINVAL, "ledger.standby: needs ledger.checkpoints (what it keeps warm)");
  if (exists(o->ledger_path))
    return altar_error_set(err, ALTAR_EEXIST,
                           "ledger.standby: ledger.path %s exists: a standby "
                           "starts without a ledger of its own "
                           "(move it away, or run without --standby)",
                           o->ledger_path);
  standby_t s = {.o = o};
  snprintf(s.warm, sizeof s.warm, "%s.standby", o->ledger_path);
  snprintf(s.next, sizeof s.next, "%s.standby-next", o->ledger_path);
  /* A copy a previous life left is not trusted: its checkpoint is unknown. */
  remove_flat_dir(s.warm);
  int rc = metrics_init(&s, err);
  slog(&s, "keeping %s warm from %s; taking over when group %s has no member on %s", s.warm, o->checkpoint_uri,
       o->group, o->status_topic);
  while (!rc) {
    if (o->stop && *o->stop) {
      rc = altar_error_set(err, ALTAR_ECANCELED, "standby: stopped");
      break;
    }
    altar_error_t re = {0};
    if (refresh(&s, &re)) slog(&s, "restoring the newest checkpoint failed, the warm copy stays: %s", re.msg);
    size_t members = 0;
    altar_error_t me = {0};
    int mrc = altar_transport_topic_members(o->transport, o->group, o->status_topic, 5000, &members, &me);
    if (mrc == ALTAR_ENOTSUP) {
      rc = altar_error_set(err, ALTAR_ENOTSUP, "ledger.standby: the transport cannot tell a group's members");
      break;
    }
    if (mrc) slog(&s, "reading group %s: %s", o->group, me.msg);
    altar_checkpoint_t latest = {0};
    altar_error_t le = {0};
    bool newest = s.cp.id[0] && altar__checkpoint_latest(o->checkpoint_uri, &latest, &le) == ALTAR_OK &&
                  !strcmp(latest.id, s.cp.id);
    altar__checkpoint_clear(&latest);
    note_progress(&s, newest);
    if (!mrc && members == 0) {
      /* The owner is gone: one last look for a newer checkpoint (its clean
       * stop ships one), then the copy becomes the ledger. */
      if (refresh(&s, &re)) slog(&s, "restoring the newest checkpoint failed, the warm copy stays: %s", re.msg);
      if (!s.cp.id[0]) {
        slog(&s,
             "no reconciler consumes %s and no checkpoint exists yet: starting "
             "as a new reconciler",
             o->status_topic);
        break;
      }
      if (rename(s.warm, o->ledger_path) != 0) {
        rc = altar_error_set(err, ALTAR_EIO, "standby: moving %s to %s: %s", s.warm, o->ledger_path, strerror(errno));
        break;
      }
      slog(&s,
           "no reconciler consumes %s any more: taking over with checkpoint %s "
           "(%s)",
           o->status_topic, s.cp.id, s.caught_up ? "caught up" : "the newest after one more restore");
      break;
    }
    sleep_ms(o->poll_ms > 0 ? o->poll_ms : 500);
  }
  if (s.m_caught_up) altar_metric_set(s.m_caught_up, 0);
  altar__checkpoint_clear(&s.cp);
  return rc;
}
