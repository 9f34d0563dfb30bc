/* local transport: end offsets for lag gauges. A partition's end is found by
 * scanning its newest segment; this handle remembers where each scan
 * stopped (segment, byte, offset), so the next call reads only the records
 * appended since, not the whole segment again. */
#include "transports/local_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lend_cache {
  struct lend_entry {
    char *topic;
    int32_t partition;
    int64_t seg_base;
    off_t valid_end;
    int64_t next_offset;
  } * v;
  size_t n, cap;
};

void altar__local_end_cache_free(struct lend_cache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) free(c->v[i].topic);
  free(c->v);
  free(c);
}

static struct lend_entry *entry_for(local_t *l, const char *topic, int32_t partition) {
  if (!l->ends && !(l->ends = calloc(1, sizeof *l->ends))) return NULL;
  struct lend_cache *c = l->ends;
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].partition == partition && !strcmp(c->v[i].topic, topic)) return &c->v[i];
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 32;
    struct lend_entry *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) return NULL;
    c->v = nv;
    c->cap = cap;
  }
  char *tc = strdup(topic);
  if (!tc) return NULL;
  c->v[c->n] = (struct lend_entry){tc, partition, -1, 0, 0};
  return &c->v[c->n++];
}

static int part_end(altar_transport_t *t, local_t *l, const char *topic, int32_t partition, int64_t *pend,
                    altar_error_t *err) {
  struct lend_entry *e = entry_for(l, topic, partition);
  char *dir = altar__local_part_dir(l->cfg.dir, topic, partition);
  if (!e || !dir) {
    free(dir);
    return altar_error_set(err, ALTAR_ENOMEM, "end offsets: out of memory");
  }
  int64_t *bases = NULL;
  size_t n = 0;
  int rc = altar__local_part_segments(t, dir, false, &bases, &n, err);
  if (rc || n == 0) {
    free(dir);
    free(bases);
    *pend = 0;
    return rc;
  }
  int64_t last = bases[n - 1];
  free(bases);
  if (e->seg_base != last) *e = (struct lend_entry){e->topic, partition, last, 0, last};
  char nm[LSEG_NAME_LEN + 1];
  altar__local_seg_name(nm, last);
  char *p = altar__local_path(dir, nm);
  free(dir);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "end offsets: out of memory");
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  /* Rolled or retained since the listing: the newest segment is newer still. */
  if (fd < 0) return altar_error_set_retriable(err, ALTAR_EAGAIN, "%s/%d: segment vanished", topic, (int)partition);
  lscan_t s;
  rc = altar__local_seg_scan(fd, e->valid_end, e->next_offset, l->cfg.max_record_bytes, &s, err);
  close(fd);
  if (rc) return rc;
  e->valid_end = s.valid_end;
  e->next_offset = s.next_offset;
  *pend = s.next_offset;
  return ALTAR_OK;
}

int altar__local_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                             int64_t *pends, altar_error_t *err) {
  (void)timeout_ms;
  local_t *l = altar_transport_impl(t);
  int32_t np = 0;
  int rc = altar__local_topic_partitions(t, &l->cfg, topic, &np, err);
  for (size_t i = 0; i < n && !rc; i++) {
    pends[i] = ALTAR_OFFSET_INVALID;
    if (parts[i] < 0 || parts[i] >= np) continue;
    for (int tries = 0; tries < 5; tries++) {
      rc = part_end(t, l, topic, parts[i], &pends[i], err);
      if (rc != ALTAR_EAGAIN) break;
    }
  }
  return rc;
}
