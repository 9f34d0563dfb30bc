/* The footprint sampler (altar/footprint.h): one thread that keeps the RSS
 * and disk gauges current, off the daemons' loops, so a slow walk of a large
 * directory never delays applying or running tasks. */
#include "altar/footprint.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLER_DIRS_MAX 8

typedef struct sdir {
  char *name, *path;
  altar_metric_t *bytes, *entries;
} sdir_t;

struct altar_footprint_sampler {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop, started;
  altar_metrics_t *reg;
  altar_metric_t *rss;
  sdir_t dirs[SAMPLER_DIRS_MAX];
  size_t n;
  /* The transport whose own retention is reported (under mu; NULL: none). */
  altar_transport_t *log;
  altar_metric_t *due_bytes, *due_segments;
};

/* What the next retention pass deletes; a failed listing leaves the last figures. */
static void sample_retention(altar_transport_t *log, altar_metric_t *bytes, altar_metric_t *segments) {
  altar_retention_due_t due;
  altar_error_t ignored = {0};
  if (altar_transport_retention_due(log, &due, &ignored) != ALTAR_OK) return;
  altar_metric_set(bytes, (double)due.bytes);
  altar_metric_set(segments, (double)due.segments);
}

static void sample_dirs(altar_footprint_sampler_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    altar_du_t du;
    if (altar_footprint_du(s->dirs[i].path, ALTAR_FOOTPRINT_DU_MAX_ENTRIES, &du, NULL)) du = (altar_du_t){0};
    altar_metric_set(s->dirs[i].bytes, (double)du.bytes);
    altar_metric_set(s->dirs[i].entries, (double)du.entries);
  }
}

static void *run(void *arg) {
  altar_footprint_sampler_t *s = arg;
  double since_du = 0;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)ALTAR_FOOTPRINT_RSS_INTERVAL_S;
    while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {}
    if (s->stop) break;
    pthread_mutex_unlock(&s->mu);
    altar_metric_set(s->rss, (double)altar_footprint_rss_bytes());
    since_du += ALTAR_FOOTPRINT_RSS_INTERVAL_S;
    if (since_du >= ALTAR_FOOTPRINT_DU_INTERVAL_S) {
      since_du = 0;
      sample_dirs(s);
      pthread_mutex_lock(&s->mu);
      altar_transport_t *log = s->log;
      altar_metric_t *due_bytes = s->due_bytes, *due_segments = s->due_segments;
      pthread_mutex_unlock(&s->mu);
      if (log) sample_retention(log, due_bytes, due_segments);
    }
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void sampler_free(altar_footprint_sampler_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    free(s->dirs[i].name);
    free(s->dirs[i].path);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

altar_footprint_sampler_t *altar_footprint_sampler_start(altar_metrics_t *reg, const altar_footprint_dir_t *dirs,
                                                         size_t n, altar_error_t *err) {
  if (!reg || n > SAMPLER_DIRS_MAX) {
    altar_error_set(err, ALTAR_EINVAL, "footprint: a registry and at most %d directories", SAMPLER_DIRS_MAX);
    return NULL;
  }
  altar_footprint_sampler_t *s = calloc(1, sizeof *s);
  if (!s) {
    altar_error_set(err, ALTAR_ENOMEM, "footprint: out of memory");
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->reg = reg;
  s->rss = altar_metrics_gauge(reg, "altar_process_resident_memory_bytes",
                               "Resident memory of this daemon (RSS), bytes.", err);
  bool ok = s->rss != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    sdir_t *d = &s->dirs[s->n];
    d->name = strdup(dirs[i].name);
    d->path = strdup(dirs[i].path);
    if (!d->name || !d->path) {
      free(d->name);
      free(d->path);
      altar_error_set(err, ALTAR_ENOMEM, "footprint: out of memory");
      ok = false;
      break;
    }
    s->n++;
    altar_metric_label_t l = {"dir", d->name};
    d->bytes = altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "altar_disk_usage_bytes",
                                      "Disk a directory of this daemon takes: allocated blocks of every file and "
                                      "directory in it, bytes (sampled every minute).",
                                      &l, 1, err);
    d->entries = d->bytes ? altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "altar_disk_usage_entries",
                                                   "Files and directories (inodes) under a directory of this daemon "
                                                   "(sampled every minute).",
                                                   &l, 1, err)
                          : NULL;
    ok = d->entries != NULL;
  }
  if (ok) {
    altar_metric_set(s->rss, (double)altar_footprint_rss_bytes());
    sample_dirs(s);
    ok = pthread_create(&s->thread, NULL, run, s) == 0;
    if (!ok) altar_error_set(err, ALTAR_ENOMEM, "footprint: cannot start its thread");
  }
  if (!ok) {
    sampler_free(s);
    return NULL;
  }
  s->started = true;
  return s;
}

int altar_footprint_sampler_add_retention(altar_footprint_sampler_t *s, altar_transport_t *t, altar_error_t *err) {
  if (!s || !t) return altar_error_set(err, ALTAR_EINVAL, "footprint: a sampler and a transport");
  altar_retention_due_t due;
  int rc = altar_transport_retention_due(t, &due, err);
  if (rc == ALTAR_ENOTSUP) return rc;
  pthread_mutex_lock(&s->mu);
  bool twice = s->log != NULL;
  pthread_mutex_unlock(&s->mu);
  if (twice) return altar_error_set(err, ALTAR_ESTATE, "footprint: one transport's retention per sampler");
  altar_metric_t *bytes = altar_metrics_gauge(s->reg, "altar_log_retention_next_bytes",
                                              "Allocated bytes of the embedded log's segments its next retention pass "
                                              "deletes (sampled every minute).",
                                              err);
  altar_metric_t *segments =
      bytes
          ? altar_metrics_gauge(s->reg, "altar_log_retention_next_segments",
                                "Segments of the embedded log its next retention pass deletes (sampled every minute).",
                                err)
          : NULL;
  if (!segments) return err && err->code ? err->code : ALTAR_ENOMEM;
  if (rc == ALTAR_OK) {
    altar_metric_set(bytes, (double)due.bytes);
    altar_metric_set(segments, (double)due.segments);
  }
  pthread_mutex_lock(&s->mu);
  s->due_bytes = bytes;
  s->due_segments = segments;
  s->log = t;
  pthread_mutex_unlock(&s->mu);
  return ALTAR_OK;
}

void altar_footprint_sampler_stop(altar_footprint_sampler_t *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (s->started) pthread_join(s->thread, NULL);
  sampler_free(s);
}
