/* A group member's commits, written off the caller's thread.
 *
 * A local commit is an offset file made whole and renamed into place with
 * two fsyncs (the file, its directory): milliseconds each while the disk is
 * busy. A worker committing its partitions in turn from its loop waited
 * them out there, and every task exit seen meanwhile waited with it. Here
 * the caller only records the newest offset per partition; one thread
 * writes what is recorded, a batch at a time with one directory fsync for
 * the batch. Nothing is lost that a late commit would not lose: a crash
 * before the write means reading again from the previous commit, as a
 * crash just before a commit always did. A partition is let go only after
 * its commit is written (altar__local_committer_drain before release), so
 * the next owner reads it; reads of committed offsets by this transport
 * wait for the writes too. */
#include "transports/local_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tries of one write before its failure is told (the caller's next commit
 * of that partition, or the drain's log line, says it). */
#define WRITE_TRIES 3

typedef struct lcommit {
  char *topic;
  int32_t partition;
  int64_t offset;
  char *metadata; /* owned; NULL once taken by the writer */
  bool dirty;     /* recorded, not yet taken by the writer */
  char *failed;   /* the last write's error, until told */
} lcommit_t;

struct lcommitter {
  pthread_mutex_t mu;
  pthread_cond_t work_cv, idle_cv;
  pthread_t thread;
  bool stop;
  bool writing; /* a batch is out with the writer */
  size_t n_dirty;
  lcommit_t *items; /* one per partition ever committed; never shrinks, so an index stays valid */
  size_t n, cap;
  const local_cfg_t *cfg;
  char *group;
  char *dir;         /* the group's offsets directory, fsynced once a batch */
  int test_delay_ms; /* ALTAR_TEST_COMMIT_DELAY_MS: a slow disk, for the handover test */
};

typedef struct batch_item {
  size_t idx;
  int64_t offset;
  char *metadata;
  altar_error_t err;
  bool ok;
} batch_item_t;

/* Writes one batch (mu not held). The renames are visible to other
 * processes at once; the one directory fsync makes them durable. */
static void write_batch(lcommitter_t *c, batch_item_t *b, size_t nb, char **topics, const int32_t *parts) {
  bool any = false;
  for (size_t i = 0; i < nb; i++) {
    for (int tries = 0; tries < WRITE_TRIES && !b[i].ok; tries++) {
      b[i].err = (altar_error_t){0};
      b[i].ok = altar__local_offset_write(c->cfg, c->group, topics[i], parts[i], b[i].offset, b[i].metadata, false,
                                          &b[i].err) == 0;
    }
    any |= b[i].ok;
  }
  if (!any) return;
  for (int tries = 0; tries < WRITE_TRIES; tries++)
    if (altar__local_fsync_dir(c->dir) == 0) return;
  for (size_t i = 0; i < nb; i++) {
    if (!b[i].ok) continue;
    b[i].ok = false;
    altar_error_set_retriable(&b[i].err, ALTAR_EIO, "commit %s/%s/%d: fsync of the offsets directory failed", c->group,
                              topics[i], (int)parts[i]);
  }
}

/* Partitions one batch takes at most: one directory fsync covers them. */
#define BATCH_MAX 64

static void *writer_main(void *arg) {
  lcommitter_t *c = arg;
  batch_item_t b[BATCH_MAX];
  char *topics[BATCH_MAX];
  int32_t parts[BATCH_MAX];
  pthread_mutex_lock(&c->mu);
  for (;;) {
    if (!c->n_dirty) {
      if (c->stop) break;
      pthread_cond_wait(&c->work_cv, &c->mu);
      continue;
    }
    size_t k = 0;
    for (size_t i = 0; i < c->n && k < BATCH_MAX; i++) {
      lcommit_t *it = &c->items[i];
      if (!it->dirty) continue;
      b[k] = (batch_item_t){.idx = i, .offset = it->offset, .metadata = it->metadata};
      topics[k] = it->topic; /* stable: an item keeps its string until the committer is freed */
      parts[k] = it->partition;
      it->metadata = NULL;
      it->dirty = false;
      k++;
    }
    c->n_dirty -= k;
    c->writing = true;
    pthread_mutex_unlock(&c->mu);
    if (c->test_delay_ms > 0) usleep((useconds_t)c->test_delay_ms * 1000);
    write_batch(c, b, k, topics, parts);
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < k; i++) {
      free(b[i].metadata);
      if (b[i].ok) continue;
      lcommit_t *it = &c->items[b[i].idx];
      free(it->failed);
      it->failed = strdup(b[i].err.msg[0] ? b[i].err.msg : "commit: write failed");
    }
    c->writing = false;
    pthread_cond_broadcast(&c->idle_cv);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int altar__local_committer_new(const local_cfg_t *cfg, const char *group, lcommitter_t **pc, altar_error_t *err) {
  lcommitter_t *c = calloc(1, sizeof *c);
  if (!c || !(c->group = strdup(group)) || !(c->dir = altar__local_offsets_dir(cfg, group))) {
    if (c) free(c->group);
    free(c);
    return altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
  }
  c->cfg = cfg;
  const char *delay = getenv("ALTAR_TEST_COMMIT_DELAY_MS");
  if (delay) {
    char *end = NULL;
    long ms = strtol(delay, &end, 10);
    c->test_delay_ms = end != delay && !*end && ms > 0 && ms <= 10000 ? (int)ms : 0;
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->work_cv, NULL);
  pthread_cond_init(&c->idle_cv, NULL);
  int e = pthread_create(&c->thread, NULL, writer_main, c);
  if (e) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->idle_cv);
    free(c->group);
    free(c->dir);
    free(c);
    return altar_error_set(err, ALTAR_EIO, "commit: cannot start the commit thread: %s", strerror(e));
  }
  *pc = c;
  return 0;
}

static lcommit_t *find_or_add(lcommitter_t *c, const char *topic, int32_t partition) {
  for (size_t i = 0; i < c->n; i++)
    if (c->items[i].partition == partition && !strcmp(c->items[i].topic, topic)) return &c->items[i];
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 16;
    lcommit_t *ni = realloc(c->items, cap * sizeof *ni);
    if (!ni) return NULL;
    c->items = ni;
    c->cap = cap;
  }
  lcommit_t *it = &c->items[c->n];
  *it = (lcommit_t){.topic = strdup(topic), .partition = partition};
  if (!it->topic) return NULL;
  c->n++;
  return it;
}

int altar__local_committer_put(lcommitter_t *c, const char *topic, int32_t partition, int64_t offset,
                               const char *metadata, altar_error_t *err) {
  int rc = altar__local_offset_check(offset, metadata, err);
  if (rc) return rc;
  char *md = metadata ? strdup(metadata) : NULL;
  if (metadata && !md) return altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
  pthread_mutex_lock(&c->mu);
  lcommit_t *it = find_or_add(c, topic, partition);
  if (!it) {
    pthread_mutex_unlock(&c->mu);
    free(md);
    return altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
  }
  free(it->metadata);
  it->metadata = md;
  it->offset = offset;
  if (!it->dirty) c->n_dirty++;
  it->dirty = true;
  /* The previous write of this partition failed: said now, so the caller
   * retries (this commit is recorded all the same). */
  if (it->failed) {
    rc = altar_error_set_retriable(err, ALTAR_EIO, "%s", it->failed);
    free(it->failed);
    it->failed = NULL;
  }
  pthread_cond_signal(&c->work_cv);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

void altar__local_committer_drain(lcommitter_t *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  while (c->n_dirty || c->writing) pthread_cond_wait(&c->idle_cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

void altar__local_committer_tell_failure(altar_transport_t *t, lcommitter_t *c, const char *topic, int32_t partition) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->n; i++) {
    lcommit_t *it = &c->items[i];
    if (it->partition != partition || strcmp(it->topic, topic) || !it->failed) continue;
    if (t) altar_transport_log(t, 4, "%s (its next owner reads from the commit before it)", it->failed);
    free(it->failed);
    it->failed = NULL;
  }
  pthread_mutex_unlock(&c->mu);
}

void altar__local_committer_free(altar_transport_t *t, lcommitter_t *c) {
  if (!c) return;
  altar__local_committer_drain(c);
  for (size_t i = 0; i < c->n; i++) altar__local_committer_tell_failure(t, c, c->items[i].topic, c->items[i].partition);
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_signal(&c->work_cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  for (size_t i = 0; i < c->n; i++) {
    free(c->items[i].topic);
    free(c->items[i].metadata);
    free(c->items[i].failed);
  }
  free(c->items);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->work_cv);
  pthread_cond_destroy(&c->idle_cv);
  free(c->group);
  free(c->dir);
  free(c);
}
