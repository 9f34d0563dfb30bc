/* Reading one partition of the local log from a position: finding the
 * segment holding an offset, following rolls, skipping what is corrupt in
 * sealed segments, and waiting at a torn tail a live appender will finish. */
#include "transports/local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK (256u * 1024u)
/* A reader starts with this much and doubles up to READ_CHUNK while its
 * reads come back full: a worker tails dozens of partitions, and a buffer
 * of READ_CHUNK each would be its largest cost (its pages are touched as the
 * partitions grow, so RSS would creep up to partitions x 256 KiB). */
#define READ_CHUNK_MIN (16u * 1024u)

/* Where the read buffer sits in the file; allocated right after the reader. */
struct lreader_priv {
  off_t start;
  size_t len;
  int64_t listed_ms;  /* when the partition's segments were last listed */
  int64_t checked_ms; /* when a roll was last looked for (below) */
  bool created;       /* an entry may have appeared in the directory since that look */
  /* The offset the record at r->pos must carry: a segment's records run on
   * densely from its base, so a record passed over (on the way to a seek
   * target) must be the next in file order. An intact record with another
   * offset is out of sequence, as recovery judges it: stepping over it would
   * leave the reader inside whatever an appender writes after cutting it. */
  int64_t at_offset;
};

/* A consumer at the end of a partition asks on every wake whether a newer
 * segment exists; listing the directory each time made idle consumers (the
 * reconciler, submit --wait) spend more CPU than reading. A roll creates
 * the segment named by the next offset, so one stat answers, at most once a
 * millisecond (a batch loop asks many times); a full listing still runs at
 * least every RELIST_MS, for gaps a repair or retention left. */
#define RELIST_MS 1000

static bool newer_segment_possible(lreader_t *r) {
  struct lreader_priv *b = (struct lreader_priv *)(r + 1);
  int64_t now = altar_mono_ms();
  if (now - b->listed_ms >= RELIST_MS) return true;
  /* Watched, the directory tells of each new entry: without one there is no
   * roll to look for (an append only modifies). */
  if (r->watch >= 0 && !b->created) return false;
  if (now == b->checked_ms) return false;
  b->checked_ms = now;
  b->created = false; /* before the look: an entry made during it is told again */
  char nm[LSEG_NAME_LEN + 1];
  altar__local_seg_name(nm, r->next_offset);
  char *p = altar__local_path(r->dir, nm);
  if (!p) return true;
  struct stat st;
  bool exists = stat(p, &st) == 0 || errno != ENOENT;
  free(p);
  return exists;
}

void altar__local_reader_changed(lreader_t *r) {
  r->changed = true;
  /* Written to since: the next look for a roll must really look, even
   * within the millisecond of the last one (the roll may be what changed). */
  ((struct lreader_priv *)(r + 1))->checked_ms = INT64_MIN;
}

void altar__local_reader_created(lreader_t *r) {
  ((struct lreader_priv *)(r + 1))->created = true;
  altar__local_reader_changed(r);
}

static void mark_listed(lreader_t *r) { ((struct lreader_priv *)(r + 1))->listed_ms = altar_mono_ms(); }

lreader_t *altar__local_reader_new(const char *root, const char *topic, int32_t partition) {
  lreader_t *r = calloc(1, sizeof *r + sizeof(struct lreader_priv));
  if (!r) return NULL;
  r->topic = strdup(topic);
  r->dir = altar__local_part_dir(root, topic, partition);
  if (!r->topic || !r->dir) {
    altar__local_reader_free(r);
    return NULL;
  }
  r->partition = partition;
  r->fd = -1;
  r->seg_base = -1;
  r->watch = -1;
  r->changed = true;
  ((struct lreader_priv *)(r + 1))->created = true;
  return r;
}

static struct lreader_priv *priv(lreader_t *r) { return (struct lreader_priv *)(r + 1); }

void altar__local_reader_free(lreader_t *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  free(r->buf);
  free(r->topic);
  free(r->dir);
  free(r);
}

static void drop_segment(lreader_t *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  r->seg_base = -1;
  r->pos = 0;
  priv(r)->len = 0;
  priv(r)->listed_ms = INT64_MIN / 2; /* a new position: look at the directory */
}

static int open_base(lreader_t *r, int64_t base, altar_error_t *err) {
  char nm[LSEG_NAME_LEN + 1];
  altar__local_seg_name(nm, base);
  char *p = altar__local_path(r->dir, nm);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "reader: out of memory");
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  if (fd < 0) {
    if (errno == ENOENT) return ALTAR_EAGAIN; /* retained or not there yet */
    return altar_error_set(err, ALTAR_EIO, "%s/%d: segment %s: %s", r->topic, r->partition, nm, strerror(errno));
  }
  drop_segment(r);
  r->fd = fd;
  r->seg_base = base;
  r->pos = 0;
  priv(r)->at_offset = base;
  return 0;
}

/* Reads the record at r->pos. LREC_* or a negative error. */
static int read_record(lreader_t *r, const local_cfg_t *cfg, lrec_view_t *v, const char **why, altar_error_t *err) {
  struct lreader_priv *b = priv(r);
  bool refilled = false;
  for (;;) {
    if (r->pos >= b->start && r->pos < b->start + (off_t)b->len) {
      size_t off = (size_t)(r->pos - b->start);
      int rc = altar__local_rec_parse(r->buf + off, b->len - off, cfg->max_record_bytes, v, why);
      if (rc == LREC_OK || (rc == LREC_CORRUPT && refilled)) return rc;
      /* Corrupt in an older buffer: judge fresh bytes (an appender may have
       * cut a torn tail and written over it since). */
      if (rc == LREC_CORRUPT) {
        b->len = 0;
        continue;
      }
      if (refilled && b->len < r->buf_cap) return LREC_INCOMPLETE; /* end of file */
      if (refilled && off == 0) {
        /* The record is larger than the buffer: grow to fit it. */
        size_t need = READ_CHUNK;
        if (b->len >= LREC_FRAME)
          need = LREC_FRAME +
                 (((size_t)r->buf[0] << 24) | ((size_t)r->buf[1] << 16) | ((size_t)r->buf[2] << 8) | r->buf[3]);
        if (need <= r->buf_cap) need = r->buf_cap * 2;
        uint8_t *nb = realloc(r->buf, need);
        if (!nb) return altar_error_set(err, ALTAR_ENOMEM, "reader: out of memory");
        r->buf = nb;
        r->buf_cap = need;
      }
    } else if (refilled) {
      return LREC_INCOMPLETE;
    }
    if (!r->buf) {
      r->buf = malloc(READ_CHUNK_MIN);
      if (!r->buf) return altar_error_set(err, ALTAR_ENOMEM, "reader: out of memory");
      r->buf_cap = READ_CHUNK_MIN;
    } else if ((b->len == r->buf_cap && r->buf_cap < READ_CHUNK) ||
               (b->len < r->buf_cap / 4 && r->buf_cap > READ_CHUNK_MIN && r->buf_cap <= READ_CHUNK)) {
      /* The last read filled the buffer: this reader is behind, so it reads
       * in larger chunks. One that used a quarter follows the tail again and
       * gives memory back, so a worker's buffers follow what it has to read,
       * not the most it ever had to. */
      size_t cap = b->len == r->buf_cap ? r->buf_cap * 2 : r->buf_cap / 2;
      if (cap > READ_CHUNK) cap = READ_CHUNK;
      if (cap < READ_CHUNK_MIN) cap = READ_CHUNK_MIN;
      uint8_t *nb = realloc(r->buf, cap);
      if (!nb) return altar_error_set(err, ALTAR_ENOMEM, "reader: out of memory");
      r->buf = nb;
      r->buf_cap = cap;
    }
    ssize_t got = altar__local_pread_full(r->fd, r->buf, r->buf_cap, r->pos);
    if (got < 0) return altar_error_set(err, ALTAR_EIO, "%s/%d: read: %s", r->topic, r->partition, strerror(errno));
    b->start = r->pos;
    b->len = (size_t)got;
    if (got == 0) return LREC_INCOMPLETE;
    refilled = true;
  }
}

/* The smallest segment base above r's, or -1. */
static int next_segment(altar_transport_t *t, lreader_t *r, int64_t *pnext, bool *plast, altar_error_t *err) {
  int64_t *bases = NULL;
  size_t n = 0;
  *pnext = -1;
  int rc = altar__local_part_segments(t, r->dir, false, &bases, &n, err);
  if (rc) return rc;
  mark_listed(r);
  for (size_t i = 0; i < n; i++)
    if (bases[i] > r->seg_base) {
      *pnext = bases[i];
      break;
    }
  if (plast) *plast = n == 0 || bases[n - 1] == r->seg_base;
  free(bases);
  return 0;
}

/* Opens the segment that holds r->next_offset and moves to its record. */
static int open_at(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, altar_error_t *err) {
  for (int tries = 0; tries < 5; tries++) {
    int64_t *bases = NULL;
    size_t n = 0;
    int rc = altar__local_part_segments(t, r->dir, false, &bases, &n, err);
    if (rc) return rc;
    mark_listed(r);
    if (n == 0) {
      free(bases);
      return 0; /* nothing yet */
    }
    int64_t base = bases[0];
    if (r->next_offset < bases[0]) {
      altar_transport_log(t, 4, "%s/%d: offset %lld no longer kept (retention); reading from %lld", r->topic,
                          r->partition, (long long)r->next_offset, (long long)bases[0]);
      r->next_offset = bases[0];
    }
    for (size_t i = 0; i < n; i++)
      if (bases[i] <= r->next_offset) base = bases[i];
    free(bases);
    rc = open_base(r, base, err);
    if (rc == ALTAR_EAGAIN) continue;
    if (rc) return rc;
    /* Skip forward to next_offset. */
    for (;;) {
      if (base == r->next_offset) return 0;
      lrec_view_t v;
      const char *why;
      int pr = read_record(r, cfg, &v, &why, err);
      if (pr < 0) return pr;
      if (pr != LREC_OK || v.offset >= r->next_offset || v.offset != priv(r)->at_offset)
        return 0; /* next read sorts it out */
      r->pos += (off_t)v.total_len;
      priv(r)->at_offset = v.offset + 1;
    }
  }
  return 0;
}

int altar__local_reader_seek(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, int64_t offset,
                             altar_error_t *err) {
  r->changed = true;
  int64_t b = 0, e = 0;
  int rc = ALTAR_EAGAIN;
  for (int tries = 0; tries < 5 && rc == ALTAR_EAGAIN; tries++)
    rc = altar__local_part_offsets(t, cfg, r->dir, &b, &e, err);
  if (rc) return rc;
  int64_t target = offset;
  if (offset == ALTAR_OFFSET_BEGINNING) target = b;
  else if (offset == ALTAR_OFFSET_END) target = e;
  else if (offset < 0)
    return altar_error_set(err, ALTAR_EINVAL, "seek %s/%d: offset %lld is not valid", r->topic, r->partition,
                           (long long)offset);
  else if (offset < b) {
    altar_transport_log(t, 4, "%s/%d: seek to %lld before the beginning %lld: reading from %lld", r->topic,
                        r->partition, (long long)offset, (long long)b, (long long)b);
    target = b;
  } else if (offset > e) {
    altar_transport_log(t, 4, "%s/%d: seek to %lld beyond the end %lld: reading from %lld", r->topic, r->partition,
                        (long long)offset, (long long)e, (long long)e);
    target = e;
  }
  drop_segment(r);
  r->next_offset = target;
  return 0;
}

/* After a corrupt record at r->pos in a sealed segment, the first intact
 * record from there with an offset in [want, limit): found by trying every
 * byte position (a record must pass its length bounds and CRC-32, and its
 * offset must fit), so one damaged record costs that record, not the rest
 * of its segment. `want` is the offset the reader is after, which may lie
 * past the damage when a seek stopped there. 1 with *ppos and *poffset set,
 * 0 when there is none. Each window starts where the previous one's tries
 * ended and reaches one largest record further, so the segment is read
 * about twice at most. */
#define RESYNC_STEP_MIN (1u << 20)
static int resync(lreader_t *r, const local_cfg_t *cfg, int64_t want, int64_t limit, off_t *ppos, int64_t *poffset) {
  struct stat st;
  if (fstat(r->fd, &st) != 0) return 0;
  size_t reach = LREC_FRAME + cfg->max_record_bytes + 64; /* the most one record can span */
  size_t step = reach > RESYNC_STEP_MIN ? reach : RESYNC_STEP_MIN;
  uint8_t *buf = malloc(step + reach);
  if (!buf) return 0;
  int found = 0;
  /* From r->pos itself: an intact record out of sequence is kept. */
  for (off_t base = r->pos; !found && base < st.st_size; base += (off_t)step) {
    ssize_t got = pread(r->fd, buf, step + reach, base);
    if (got <= 0) break;
    size_t tries = (size_t)got < step ? (size_t)got : step;
    for (size_t i = 0; i < tries; i++) {
      lrec_view_t v;
      const char *why;
      if (altar__local_rec_parse(buf + i, (size_t)got - i, cfg->max_record_bytes, &v, &why) != LREC_OK) continue;
      if (v.offset < want || v.offset >= limit) continue;
      *ppos = base + (off_t)i;
      *poffset = v.offset;
      found = 1;
      break;
    }
  }
  free(buf);
  return found;
}

/* A corrupt record in the active segment with no appender holding the lock
 * is a dead writer's tail: cut it, as an appender would. */
static void repair_tail(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, const char *why) {
  char *lp = altar__local_path(r->dir, "append.lock");
  int fd = lp ? open(lp, O_RDWR | O_CLOEXEC) : -1;
  free(lp);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
    bool last = false;
    int64_t nx;
    altar_error_t e = {0};
    lrec_view_t v;
    const char *why2;
    priv(r)->len = 0; /* re-read under the lock */
    if (next_segment(t, r, &nx, &last, &e) == 0 && last && read_record(r, cfg, &v, &why2, &e) == LREC_CORRUPT) {
      char nm[LSEG_NAME_LEN + 1];
      altar__local_seg_name(nm, r->seg_base);
      char *sp = altar__local_path(r->dir, nm);
      int wfd = sp ? open(sp, O_WRONLY | O_CLOEXEC) : -1;
      if (wfd >= 0 && ftruncate(wfd, r->pos) == 0) {
        if (cfg->fsync_policy != LOCAL_FSYNC_NEVER) fdatasync(wfd);
        altar_transport_log(t, 4, "%s/%d: %s at offset %lld: truncated the corrupt tail", r->topic, r->partition, why,
                            (long long)r->next_offset);
      }
      if (wfd >= 0) close(wfd);
      free(sp);
    }
    priv(r)->len = 0;
    flock(fd, LOCK_UN);
  }
  close(fd);
}

int altar__local_reader_next(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, altar_msg_t **pmsg,
                             altar_error_t *err) {
  *pmsg = NULL;
  bool reread = false;
  for (int hops = 0; hops < 64; hops++) {
    if (r->fd < 0) {
      if (!newer_segment_possible(r)) return 0; /* still empty */
      int rc = open_at(t, cfg, r, err);
      if (rc) return rc;
      if (r->fd < 0) return 0;
    }
    lrec_view_t v;
    const char *why = NULL;
    int pr = read_record(r, cfg, &v, &why, err);
    if (pr < 0) return pr;
    if (pr == LREC_OK) {
      if (v.offset < r->next_offset && v.offset == priv(r)->at_offset) {
        r->pos += (off_t)v.total_len; /* still skipping to a seek target */
        priv(r)->at_offset = v.offset + 1;
        continue;
      }
      if (v.offset != r->next_offset) {
        if (!reread) { /* judge fresh bytes: an appender may have cut it and written over it */
          reread = true;
          priv(r)->len = 0;
          continue;
        }
        pr = LREC_CORRUPT;
        why = "record offset out of sequence";
      } else {
        altar_msg_t *m = altar__local_rec_to_msg(&v, r->topic, r->partition);
        if (!m) return altar_error_set(err, ALTAR_ENOMEM, "consume: out of memory");
        r->pos += (off_t)v.total_len;
        r->next_offset = v.offset + 1;
        priv(r)->at_offset = r->next_offset;
        *pmsg = m;
        return 1;
      }
    }
    if (pr == LREC_INCOMPLETE && !newer_segment_possible(r)) return 0; /* the end, no roll */
    int64_t nx;
    bool last = false;
    int rc = next_segment(t, r, &nx, &last, err);
    if (rc) return rc;
    if (pr == LREC_INCOMPLETE) {
      if (nx < 0) return 0; /* the end, or an appender mid-write */
      /* A newer segment exists, so this one is sealed: read it to its end
       * once more (the roll happened after its last write). */
      priv(r)->len = 0;
      pr = read_record(r, cfg, &v, &why, err);
      if (pr < 0) return pr;
      if (pr == LREC_OK) continue;
      struct stat st;
      if (pr == LREC_INCOMPLETE && fstat(r->fd, &st) == 0 && st.st_size > r->pos) {
        pr = LREC_CORRUPT;
        why = "record runs past the end of its sealed segment";
      }
      if (pr == LREC_CORRUPT) goto corrupt;
      if (nx != r->next_offset)
        altar_transport_log(t, 4, "%s/%d: offsets %lld..%lld missing between segments", r->topic, r->partition,
                            (long long)r->next_offset, (long long)nx - 1);
      drop_segment(r);
      r->next_offset = nx;
      continue;
    }
  corrupt:
    if (nx < 0) {
      repair_tail(t, cfg, r, why);
      return 0;
    }
    {
      int64_t bad = r->next_offset;
      int64_t seg = r->seg_base;
      off_t at;
      int64_t resumed;
      if (r->fd >= 0 && resync(r, cfg, bad, nx, &at, &resumed)) {
        r->pos = at;
        r->next_offset = resumed;
        priv(r)->at_offset = resumed;
        priv(r)->len = 0;
        if (resumed == bad) /* the damage lay before a seek target: nothing wanted is lost */
          return altar_error_set(err, ALTAR_EINTEGRITY,
                                 "%s/%d: %s in segment %020lld.log before offset %lld; read on from there", r->topic,
                                 r->partition, why ? why : "corrupt record", (long long)seg, (long long)bad);
        return altar_error_set(err, ALTAR_EINTEGRITY,
                               "%s/%d: %s at offset %lld in segment %020lld.log; offsets %lld..%lld skipped, "
                               "reading on from the next intact record",
                               r->topic, r->partition, why ? why : "corrupt record", (long long)bad, (long long)seg,
                               (long long)bad, (long long)resumed - 1);
      }
      drop_segment(r);
      r->next_offset = nx;
      return altar_error_set(err, ALTAR_EINTEGRITY,
                             "%s/%d: %s at offset %lld in segment %020lld.log; skipped to offset %lld", r->topic,
                             r->partition, why ? why : "corrupt record", (long long)bad, (long long)seg, (long long)nx);
    }
  }
  return 0;
}
