/* The local log's retention decision, and what the next retention pass
 * would delete (the retention_due operation) decided by the same rule.
 *
 * The pass itself runs under a partition's append lock when a segment
 * rolls and at a producer's first record there (local_partition.c); what
 * it would delete is asked by the footprint sampler's thread, off every
 * loop: it lists the log's directories and stats segment files, as the
 * pass does, never reading a record. */
#include "transports/local_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *altar__local_retention_why(const local_topic_conf_t *tc, int64_t total, int64_t mtime_ms, int64_t now_ms) {
  if (tc->retention_bytes >= 0 && total > tc->retention_bytes) return "retention.bytes";
  if (tc->retention_ms >= 0 && mtime_ms < now_ms - tc->retention_ms) return "retention.ms";
  return NULL;
}

int64_t altar__local_mtime_ms(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* Adds what the pass would delete of the partition in dir to *pdue. */
static int partition_due(altar_transport_t *t, const char *dir, const local_topic_conf_t *tc, int64_t now_ms,
                         altar_retention_due_t *pdue, altar_error_t *err) {
  int64_t *bases = NULL;
  size_t n = 0;
  int rc = altar__local_part_segments(t, dir, false, &bases, &n, err);
  if (rc == ALTAR_ENOTFOUND) rc = 0; /* deleted meanwhile */
  if (rc || n < 2) {
    free(bases);
    return rc;
  }
  struct seg {
    off_t size;
    int64_t mtime_ms;
    uint64_t blocks;
  } *segs = calloc(n, sizeof *segs);
  if (!segs) {
    free(bases);
    return altar_error_set(err, ALTAR_ENOMEM, "retention due: out of memory");
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  off_t total = 0;
  for (size_t i = 0; dfd >= 0 && i < n; i++) {
    char nm[LSEG_NAME_LEN + 1];
    altar__local_seg_name(nm, bases[i]);
    struct stat st;
    if (fstatat(dfd, nm, &st, 0) != 0) continue; /* as the pass: no size, and oldest */
    segs[i] = (struct seg){st.st_size, altar__local_mtime_ms(&st), (uint64_t)st.st_blocks * 512};
    total += st.st_size;
  }
  if (dfd >= 0) close(dfd);
  /* Oldest first, never the newest, stopping at the first that stays. */
  for (size_t i = 0; dfd >= 0 && i + 1 < n; i++) {
    if (!altar__local_retention_why(tc, total, segs[i].mtime_ms, now_ms)) break;
    pdue->segments++;
    pdue->bytes += segs[i].blocks;
    total -= segs[i].size;
  }
  free(segs);
  free(bases);
  return 0;
}

/* A partition directory's name: a decimal number. */
static bool is_partition(const char *name) {
  if (!*name) return false;
  for (const char *c = name; *c; c++)
    if (*c < '0' || *c > '9') return false;
  return strlen(name) <= 10;
}

int altar__local_retention_due(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  char *topics = altar__local_pathf("%s/topics", l->cfg.dir);
  if (!topics) return altar_error_set(err, ALTAR_ENOMEM, "retention due: out of memory");
  DIR *d = opendir(topics);
  if (!d) {
    int e = errno;
    free(topics);
    return e == ENOENT ? 0 : altar_error_set(err, ALTAR_EIO, "retention due: %s/topics: %s", l->cfg.dir, strerror(e));
  }
  int64_t now_ms = altar_wall_ms();
  int rc = 0;
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    local_topic_conf_t tc;
    altar__local_topic_conf_read(&l->cfg, de->d_name, &tc);
    if (tc.retention_ms < 0 && tc.retention_bytes < 0) continue; /* kept forever: the pass deletes nothing */
    char *td = altar__local_pathf("%s/%s", topics, de->d_name);
    DIR *pd = td ? opendir(td) : NULL;
    struct dirent *pe;
    while (pd && !rc && (pe = readdir(pd))) {
      if (!is_partition(pe->d_name)) continue;
      char *dir = altar__local_pathf("%s/%s", td, pe->d_name);
      rc = dir ? partition_due(t, dir, &tc, now_ms, pdue, err)
               : altar_error_set(err, ALTAR_ENOMEM, "retention due: out of memory");
      free(dir);
    }
    if (pd) closedir(pd);
    free(td);
  }
  closedir(d);
  free(topics);
  return rc;
}
