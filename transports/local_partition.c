/* One partition of the local log: its segment files, scanning them for the
 * true end, appending under the partition's append lock (flock), rolling
 * segments, retention, and torn-tail repair. */
#include "transports/local_int.h"
#include "altar/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCAN_CHUNK (1u << 20)

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static bool parse_seg_name(const char *name, int64_t *pbase) {
  if (strlen(name) != LSEG_NAME_LEN || strcmp(name + 20, ".log") != 0) return false;
  int64_t v = 0;
  for (int i = 0; i < 20; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    if (v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (name[i] - '0');
  }
  *pbase = v;
  return true;
}

int altar__local_part_segments(altar_transport_t *t, const char *dir, bool warn, int64_t **pbases, size_t *pn,
                               altar_error_t *err) {
  *pbases = NULL;
  *pn = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return altar_error_set(err, ALTAR_ENOTFOUND, "partition dir %s: missing", dir);
    return altar_error_set(err, ALTAR_EIO, "partition dir %s: %s", dir, strerror(errno));
  }
  int64_t *bases = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    if (!strcmp(nm, ".") || !strcmp(nm, "..") || !strcmp(nm, "append.lock")) continue;
    int64_t base;
    if (!parse_seg_name(nm, &base)) {
      if (warn) altar_transport_log(t, 4, "partition dir %s: stray entry '%s' ignored", dir, nm);
      continue;
    }
    if (ALTAR_GROW(bases, cap, n + 1)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "partition dir %s: out of memory", dir);
      break;
    }
    bases[n++] = base;
  }
  closedir(d);
  if (rc) {
    free(bases);
    return rc;
  }
  if (n) qsort(bases, n, sizeof *bases, cmp_i64);
  *pbases = bases;
  *pn = n;
  return 0;
}

int altar__local_seg_scan(int fd, off_t from, int64_t expect, size_t max_record, lscan_t *ps, altar_error_t *err) {
  struct stat st;
  memset(ps, 0, sizeof *ps);
  if (fstat(fd, &st) != 0) return altar_error_set(err, ALTAR_EIO, "segment: fstat: %s", strerror(errno));
  ps->file_size = st.st_size;
  ps->valid_end = from;
  ps->next_offset = expect;
  ps->status = LREC_OK;
  size_t cap = SCAN_CHUNK;
  uint8_t *buf = malloc(cap);
  if (!buf) return altar_error_set(err, ALTAR_ENOMEM, "segment scan: out of memory");
  off_t pos = from;
  while (pos < st.st_size) {
    size_t want = (size_t)(st.st_size - pos) < cap ? (size_t)(st.st_size - pos) : cap;
    ssize_t got = altar__local_pread_full(fd, buf, want, pos);
    if (got < 0) {
      free(buf);
      return altar_error_set(err, ALTAR_EIO, "segment: read: %s", strerror(errno));
    }
    if (got == 0) break; /* shrank under us */
    size_t off = 0;
    bool refill = false;
    while (off < (size_t)got) {
      lrec_view_t v;
      const char *why;
      int r = altar__local_rec_parse(buf + off, (size_t)got - off, max_record, &v, &why);
      if (r == LREC_OK) {
        if (v.offset != ps->next_offset) {
          ps->status = LREC_CORRUPT;
          ps->why = "record offset out of sequence";
          goto done;
        }
        ps->next_offset++;
        off += v.total_len;
        ps->valid_end = pos + (off_t)off;
        continue;
      }
      if (r == LREC_CORRUPT) {
        ps->status = LREC_CORRUPT;
        ps->why = why;
        goto done;
      }
      /* Incomplete in this chunk: refill if the file has more, else torn. */
      if (pos + got < st.st_size) {
        if (off == 0) {
          size_t need =
              (size_t)got >= LREC_FRAME
                  ? LREC_FRAME + (((size_t)buf[0] << 24) | ((size_t)buf[1] << 16) | ((size_t)buf[2] << 8) | buf[3])
                  : cap * 2;
          if (need <= cap) need = cap * 2;
          uint8_t *nb = realloc(buf, need);
          if (!nb) {
            free(buf);
            return altar_error_set(err, ALTAR_ENOMEM, "segment scan: out of memory");
          }
          buf = nb;
          cap = need;
        }
        pos += (off_t)off;
        refill = true;
        break;
      }
      ps->status = LREC_INCOMPLETE;
      ps->why = "torn record at the end";
      goto done;
    }
    if (!refill) pos += got;
  }
done:
  free(buf);
  return 0;
}

lappender_t *altar__local_appender_new(const char *root, const char *topic, int32_t partition) {
  lappender_t *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->topic = strdup(topic);
  a->dir = altar__local_part_dir(root, topic, partition);
  if (!a->topic || !a->dir) {
    altar__local_appender_free(a);
    return NULL;
  }
  a->partition = partition;
  a->lock_fd = -1;
  a->seg_fd = -1;
  a->unsynced_from = -1;
  a->seg_base = -1;
  a->wd = -1;
  return a;
}

void altar__local_appender_free(lappender_t *a) {
  if (!a) return;
  altar__local_segwatch_forget(a);
  if (a->lock_fd >= 0) close(a->lock_fd);
  if (a->seg_fd >= 0) close(a->seg_fd);
  free(a->topic);
  free(a->dir);
  free(a);
}

static int open_segment(lappender_t *a, int64_t base, bool create, const local_cfg_t *cfg, altar_error_t *err) {
  char nm[LSEG_NAME_LEN + 1];
  altar__local_seg_name(nm, base);
  char *p = altar__local_path(a->dir, nm);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "segment: out of memory");
  int fd = open(p, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  int e = errno;
  free(p);
  if (fd < 0) return altar_error_set(err, ALTAR_EIO, "%s/%d: segment %s: %s", a->topic, a->partition, nm, strerror(e));
  if (create && cfg->fsync_policy != LOCAL_FSYNC_NEVER && altar__local_fsync_dir(a->dir) != 0) {
    close(fd);
    return altar_error_set(err, ALTAR_EIO, "%s/%d: fsync of dir: %s", a->topic, a->partition, strerror(errno));
  }
  if (a->seg_fd >= 0) close(a->seg_fd);
  a->seg_fd = fd;
  a->seg_base = base;
  a->seg_size = 0;
  a->next_offset = base;
  return 0;
}

int altar__local_appender_lock(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a, altar_error_t *err) {
  if (a->lock_fd < 0) {
    char *p = altar__local_path(a->dir, "append.lock");
    if (!p) return altar_error_set(err, ALTAR_ENOMEM, "append lock: out of memory");
    a->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int e = errno;
    free(p);
    if (a->lock_fd < 0)
      return altar_error_set(err, e == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%s/%d: append lock: %s", a->topic,
                             a->partition, strerror(e));
  }
  while (flock(a->lock_fd, LOCK_EX) != 0) {
    if (errno != EINTR)
      return altar_error_set(err, ALTAR_EIO, "%s/%d: flock: %s", a->topic, a->partition, strerror(errno));
  }
  int rc = 0;
  off_t from = 0;
  int64_t expect, last;
  if (altar__local_segwatch_unchanged(a) && a->seg_fd >= 0) {
    last = a->seg_base; /* no segment created or removed since the last listing */
  } else {
    int64_t *bases = NULL;
    size_t n = 0;
    rc = altar__local_part_segments(t, a->dir, false, &bases, &n, err);
    if (rc) goto fail;
    altar__local_segwatch_listed(a);
    if (n == 0) {
      int64_t base = a->seg_base >= 0 ? a->next_offset : 0;
      rc = open_segment(a, base, true, cfg, err);
      free(bases);
      if (rc) goto fail;
      return 0;
    }
    last = bases[n - 1];
    free(bases);
  }
  if (a->seg_fd < 0 || last != a->seg_base) {
    rc = open_segment(a, last, false, cfg, err);
    if (rc) goto fail;
    expect = last;
  } else {
    struct stat st;
    if (fstat(a->seg_fd, &st) != 0) {
      rc = altar_error_set(err, ALTAR_EIO, "%s/%d: fstat: %s", a->topic, a->partition, strerror(errno));
      goto fail;
    }
    if (st.st_size == a->seg_size) return 0; /* nobody else wrote: our view is the end */
    if (st.st_size > a->seg_size) {
      from = a->seg_size;
      expect = a->next_offset;
    } else {
      expect = a->seg_base;
    }
  }
  lscan_t s;
  rc = altar__local_seg_scan(a->seg_fd, from, expect, cfg->max_record_bytes, &s, err);
  if (rc) goto fail;
  if (s.status != LREC_OK) {
    altar_transport_log(t, 4,
                        "%s/%d: %s at offset %lld (segment %020lld.log, byte %lld): truncated "
                        "%lld bytes; records before it are kept",
                        a->topic, a->partition, s.why, (long long)s.next_offset, (long long)a->seg_base,
                        (long long)s.valid_end, (long long)(s.file_size - s.valid_end));
    if (ftruncate(a->seg_fd, s.valid_end) != 0 ||
        (cfg->fsync_policy != LOCAL_FSYNC_NEVER && fdatasync(a->seg_fd) != 0)) {
      rc = altar_error_set(err, ALTAR_EIO, "%s/%d: truncating torn tail: %s", a->topic, a->partition, strerror(errno));
      goto fail;
    }
  }
  a->seg_size = s.valid_end;
  a->next_offset = s.next_offset;
  return 0;
fail:
  a->listed = false; /* what was learnt before the failure is not kept */
  flock(a->lock_fd, LOCK_UN);
  return rc;
}

void altar__local_appender_unlock(lappender_t *a) {
  if (a->lock_fd >= 0) flock(a->lock_fd, LOCK_UN);
}

static int roll(const local_cfg_t *cfg, lappender_t *a, altar_error_t *err) {
  if (cfg->fsync_policy != LOCAL_FSYNC_NEVER && fdatasync(a->seg_fd) != 0)
    return altar_error_set(err, ALTAR_EIO, "%s/%d: fdatasync: %s", a->topic, a->partition, strerror(errno));
  a->unsynced_from = -1; /* synced with the segment it leaves */
  return open_segment(a, a->next_offset, true, cfg, err);
}

/* A failed fdatasync: the records written since `from` may not be on disk,
 * so they are cut off again (a failed cut is repaired on the next lock). */
static int sync_failed(lappender_t *a, off_t from, int e, altar_error_t *err) {
  if (ftruncate(a->seg_fd, from) != 0) { /* repaired on the next lock */
  }
  a->seg_size = from;
  return altar_error_set(err, ALTAR_EIO, "%s/%d: fdatasync: %s", a->topic, a->partition, strerror(e));
}

static int write_run(const local_cfg_t *cfg, lappender_t *a, const uint8_t *p, size_t len, bool sync,
                     altar_error_t *err) {
  size_t done = 0;
  while (done < len) {
    ssize_t w = pwrite(a->seg_fd, p + done, len - done, a->seg_size + (off_t)done);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      /* Leave no partial record behind. */
      if (ftruncate(a->seg_fd, a->seg_size) != 0) { /* repaired on the next lock */
      }
      return altar_error_set_retriable(err, ALTAR_EIO, "%s/%d: write: %s", a->topic, a->partition, strerror(e));
    }
    done += (size_t)w;
  }
  if (sync && cfg->fsync_policy != LOCAL_FSYNC_NEVER && fdatasync(a->seg_fd) != 0)
    return sync_failed(a, a->seg_size, errno, err);
  a->seg_size += (off_t)len;
  return 0;
}

int altar__local_appender_write(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a, uint8_t *data,
                                const size_t *lens, size_t n, bool defer_sync, int64_t *poffsets, bool *prolled,
                                altar_error_t *err) {
  (void)t;
  *prolled = false;
  a->unsynced_from = -1;
  /* Runs end only at a roll (which syncs the segment it leaves) unless
   * every record is synced on its own. */
  bool defer = defer_sync && cfg->fsync_policy == LOCAL_FSYNC_GROUP;
  size_t i = 0;
  uint8_t *p = data;
  while (i < n) {
    if (a->seg_size > 0 && (size_t)a->seg_size + lens[i] > cfg->segment_bytes) {
      int rc = roll(cfg, a, err);
      if (rc) return rc;
      *prolled = true;
    }
    /* A run: records that fit in this segment (one when fsync=always). */
    size_t j = i, run = 0;
    size_t room = cfg->segment_bytes > (size_t)a->seg_size ? cfg->segment_bytes - (size_t)a->seg_size : 0;
    int64_t off = a->next_offset;
    do {
      altar__local_rec_seal(p + run, off);
      poffsets[j] = off++;
      run += lens[j++];
    } while (j < n && cfg->fsync_policy != LOCAL_FSYNC_ALWAYS && run + lens[j] <= room);
    off_t from = a->seg_size;
    int rc = write_run(cfg, a, p, run, !defer, err);
    if (rc) {
      for (size_t k = i; k < j; k++) poffsets[k] = -1;
      return rc;
    }
    if (defer) {
      a->unsynced_from = from;
      a->unsynced_offset = a->next_offset;
    }
    a->next_offset = off;
    p += run;
    i = j;
  }
  return 0;
}

int altar__local_appender_sync(const local_cfg_t *cfg, lappender_t *a, int64_t *pfailed_from, altar_error_t *err) {
  *pfailed_from = -1;
  if (a->unsynced_from < 0) return 0;
  off_t from = a->unsynced_from;
  a->unsynced_from = -1;
  if (cfg->fsync_policy == LOCAL_FSYNC_NEVER || fdatasync(a->seg_fd) == 0) return 0;
  int e = errno;
  a->next_offset = a->unsynced_offset;
  *pfailed_from = a->unsynced_offset;
  return sync_failed(a, from, e, err);
}

void altar__local_appender_retain(altar_transport_t *t, const local_cfg_t *cfg, lappender_t *a) {
  local_topic_conf_t tc;
  altar__local_topic_conf_read(cfg, a->topic, &tc);
  if (tc.retention_bytes < 0 && tc.retention_ms < 0) return;
  int64_t *bases = NULL;
  size_t n = 0;
  altar_error_t e = {0};
  if (altar__local_part_segments(t, a->dir, false, &bases, &n, &e) != 0 || n < 2) {
    free(bases);
    return;
  }
  off_t *sizes = calloc(n, sizeof *sizes);
  int64_t *mtimes = calloc(n, sizeof *mtimes);
  off_t total = 0;
  for (size_t i = 0; sizes && mtimes && i < n; i++) {
    char nm[LSEG_NAME_LEN + 1];
    altar__local_seg_name(nm, bases[i]);
    char *p = altar__local_path(a->dir, nm);
    struct stat st;
    if (p && stat(p, &st) == 0) {
      sizes[i] = st.st_size;
      mtimes[i] = altar__local_mtime_ms(&st);
      total += st.st_size;
    }
    free(p);
  }
  int64_t now = altar_wall_ms();
  for (size_t i = 0; sizes && mtimes && i + 1 < n; i++) {
    const char *why = altar__local_retention_why(&tc, total, mtimes[i], now);
    if (!why) break; /* keep the log contiguous: oldest first only */
    char nm[LSEG_NAME_LEN + 1];
    altar__local_seg_name(nm, bases[i]);
    char *p = altar__local_path(a->dir, nm);
    if (p && unlink(p) == 0) {
      altar_transport_log(t, 6, "%s/%d: retention deleted segment %s (%s)", a->topic, a->partition, nm, why);
      total -= sizes[i];
    }
    free(p);
  }
  free(sizes);
  free(mtimes);
  free(bases);
}

int altar__local_part_recover(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partition) {
  lappender_t *a = altar__local_appender_new(cfg->dir, topic, partition);
  if (!a) {
    altar_transport_log(t, 3, "recovery of %s/%d: out of memory", topic, (int)partition);
    return ALTAR_ENOMEM;
  }
  altar_error_t e = {0};
  if (altar__local_appender_lock(t, cfg, a, &e) == 0) {
    altar__local_appender_retain(t, cfg, a);
    altar__local_appender_unlock(a);
  } else {
    /* The flusher's own lock meets the same error and fails the records. */
    altar_transport_log(t, 3, "recovery of %s/%d: %s", topic, (int)partition, e.msg);
  }
  altar__local_appender_free(a);
  return 0;
}

int altar__local_part_offsets(altar_transport_t *t, const local_cfg_t *cfg, const char *dir, int64_t *pbegin,
                              int64_t *pend, altar_error_t *err) {
  int64_t *bases = NULL;
  size_t n = 0;
  int rc = altar__local_part_segments(t, dir, false, &bases, &n, err);
  if (rc) return rc;
  if (n == 0) {
    free(bases);
    *pbegin = *pend = 0;
    return 0;
  }
  int64_t first = bases[0], last = bases[n - 1];
  free(bases);
  char nm[LSEG_NAME_LEN + 1];
  altar__local_seg_name(nm, last);
  char *p = altar__local_path(dir, nm);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "partition offsets: out of memory");
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  if (fd < 0) {
    /* Rolled or retained between the listing and the open: try once more. */
    return altar_error_set_retriable(err, ALTAR_EAGAIN, "partition %s: segment %s vanished", dir, nm);
  }
  lscan_t s;
  rc = altar__local_seg_scan(fd, 0, last, cfg->max_record_bytes, &s, err);
  close(fd);
  if (rc) return rc;
  *pbegin = first;
  *pend = s.next_offset;
  return 0;
}

int altar__local_part_delete_records(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partition,
                                     int64_t before, int64_t *pbeginning, altar_error_t *err) {
  int32_t np = 0;
  int rc = altar__local_topic_partitions(t, cfg, topic, &np, err);
  if (rc) return rc;
  if (partition < 0 || partition >= np)
    return altar_error_set(err, ALTAR_ENOTFOUND, "delete records: %s has no partition %d", topic, (int)partition);
  lappender_t *a = altar__local_appender_new(cfg->dir, topic, partition);
  if (!a) return altar_error_set(err, ALTAR_ENOMEM, "delete records: out of memory");
  /* Under the append lock, so no segment rolls meanwhile. */
  rc = altar__local_appender_lock(t, cfg, a, err);
  int64_t *bases = NULL;
  size_t n = 0;
  if (!rc) rc = altar__local_part_segments(t, a->dir, false, &bases, &n, err);
  /* A segment goes when every record in it lies before `before`: when the
   * next segment starts at or below it. The newest one always stays. */
  for (size_t i = 0; !rc && i + 1 < n && bases[i + 1] <= before; i++) {
    char nm[LSEG_NAME_LEN + 1];
    altar__local_seg_name(nm, bases[i]);
    char *p = altar__local_path(a->dir, nm);
    if (!p) rc = altar_error_set(err, ALTAR_ENOMEM, "delete records: out of memory");
    else if (unlink(p) != 0 && errno != ENOENT)
      rc = altar_error_set(err, ALTAR_EIO, "delete records: %s: %s", p, strerror(errno));
    else
      altar_transport_log(t, 6, "%s/%d: deleted segment %s (records before %lld)", topic, (int)partition, nm,
                          (long long)before);
    free(p);
  }
  free(bases);
  int64_t b = 0, e = 0;
  if (!rc) rc = altar__local_part_offsets(t, cfg, a->dir, &b, &e, err);
  if (!rc) *pbeginning = b;
  altar__local_appender_unlock(a);
  altar__local_appender_free(a);
  return rc;
}
