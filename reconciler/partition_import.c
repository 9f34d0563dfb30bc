/* Taking one status partition over from a checkpoint (partition_import.h). */
#include "reconciler/partition_import.h"

#include "ledger/ledger_rocksdb.h"
#include "reconciler/import_marker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int altar__partition_import(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part, int64_t have,
                            int64_t until, altar_checkpoint_t *pcp, size_t *pkeys, altar_error_t *err) {
  altar__import_src_t kept = {0};
  int rc = altar__partition_import_kept(l, uri, status_topic, part, have, until, &kept, pcp, pkeys, err);
  altar__partition_import_release(&kept);
  return rc;
}

/* The checkpoint covering part furthest, restored into kept's directory
 * (or kept there already); *pcp its manifest. */
static int restore_kept(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part, int64_t have,
                        altar__import_src_t *kept, altar_checkpoint_t *pcp, altar_error_t *err) {
  memset(pcp, 0, sizeof *pcp);
  const char *ldir = altar__ledger_rocksdb_dir(l);
  if (!ldir || !(altar_ledger_caps(l) & ALTAR_LEDGER_CAP_PARTITIONS))
    return altar_error_set(err, ALTAR_ENOTSUP, "importing partition %d: the ledger keeps no partitions", (int)part);
  if (!kept->id[0]) {
    snprintf(kept->dir, sizeof kept->dir, "%s.import-%ld", ldir, (long)getpid());
    altar__checkpoint_remove_local(kept->dir); /* a crash's leftover of this pid */
  }
  int rc = altar__checkpoint_restore_covering_kept(uri, status_topic, part, have, kept->dir, kept->id, pcp, err);
  if (rc) {
    /* A failed fetch may have replaced what was kept: kept no longer. */
    if (rc != ALTAR_ENOTFOUND && rc != ALTAR_ESTATE) altar__partition_import_release(kept);
    return rc;
  }
  snprintf(kept->id, sizeof kept->id, "%s", pcp->id);
  return ALTAR_OK;
}

int altar__partition_import_kept(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part,
                                 int64_t have, int64_t until, altar__import_src_t *kept, altar_checkpoint_t *pcp,
                                 size_t *pkeys, altar_error_t *err) {
  if (pkeys) *pkeys = 0;
  int rc = restore_kept(l, uri, status_topic, part, have, kept, pcp, err);
  if (rc) return rc;
  /* The ledger-wide sequence counters (reconciler/outbox.c, settled_record.h). */
  static const char *const counters[] = {"q", "gn"};
  /* The marker goes in the same write: a kill -9 leaves both or neither. */
  altar_buf_t mark = {0};
  rc = altar__import_marker_encode(pcp, until, &mark, err);
  if (!rc)
    rc = altar__ledger_rocksdb_import_partition(l, kept->dir, part, counters, 2, ALTAR__IMPORT_MARKER_KEY, mark.data,
                                                mark.len, pkeys, err);
  altar_buf_free(&mark);
  if (rc) altar__checkpoint_clear(pcp);
  return rc;
}

void altar__partition_import_release(altar__import_src_t *kept) {
  if (kept->dir[0]) altar__checkpoint_remove_local(kept->dir);
  memset(kept, 0, sizeof *kept);
}

/* reqs[i] is still to do: neither imported nor given up. */
#define PENDING 1 /* error codes are negative */

void altar__partition_import_many(altar_ledger_t *l, const char *uri, const char *status_topic,
                                  altar__import_req_t *reqs, size_t n, altar__import_src_t *kept) {
  /* Which checkpoint covers each furthest: manifests only. */
  for (size_t i = 0; i < n; i++) {
    memset(&reqs[i].err, 0, sizeof reqs[i].err);
    reqs[i].keys = 0;
    reqs[i].rc = altar__checkpoint_covering(uri, status_topic, reqs[i].part, reqs[i].have, &reqs[i].cp, &reqs[i].err);
    if (!reqs[i].rc) reqs[i].rc = PENDING;
  }
  altar_ledger_import_part_t *parts = calloc(n ? n : 1, sizeof *parts);
  altar_buf_t *marks = calloc(n ? n : 1, sizeof *marks);
  size_t *which = calloc(n ? n : 1, sizeof *which);
  for (size_t a = 0; a < n; a++) {
    altar__import_req_t *ra = &reqs[a];
    if (ra->rc != PENDING) continue;
    if (!parts || !marks || !which) {
      ra->rc = altar_error_set(&ra->err, ALTAR_ENOMEM, "importing partition %d: out of memory", (int)ra->part);
      altar__checkpoint_clear(&ra->cp);
      continue;
    }
    /* The first one left restores (or reuses) its checkpoint; every other
     * one left that the same checkpoint covers furthest goes with it. */
    altar__checkpoint_clear(&ra->cp);
    ra->rc = restore_kept(l, uri, status_topic, ra->part, ra->have, kept, &ra->cp, &ra->err);
    if (ra->rc) continue;
    size_t m = 0;
    which[m++] = a;
    for (size_t b = a + 1; b < n; b++)
      if (reqs[b].rc == PENDING && !strcmp(reqs[b].cp.id, ra->cp.id)) which[m++] = b;
    int rc = ALTAR_OK;
    altar_error_t e = {0};
    for (size_t k = 0; k < m && !rc; k++) {
      altar__import_req_t *r = &reqs[which[k]];
      /* The marker goes in the same write: a kill -9 leaves both or neither. */
      rc = altar__import_marker_encode(&r->cp, r->until, &marks[k], &e);
      parts[k] = (altar_ledger_import_part_t){
          .part = r->part, .put_key = ALTAR__IMPORT_MARKER_KEY, .put_val = marks[k].data, .put_vlen = marks[k].len};
    }
    static const char *const counters[] = {"q", "gn"};
    if (!rc) rc = altar__ledger_rocksdb_import_partitions(l, kept->dir, parts, m, counters, 2, &e);
    for (size_t k = 0; k < m; k++) {
      altar__import_req_t *r = &reqs[which[k]];
      altar_buf_free(&marks[k]);
      r->rc = rc;
      if (rc) {
        r->err = e;
        altar__checkpoint_clear(&r->cp);
      } else {
        r->keys = parts[k].keys;
      }
    }
  }
  free(parts);
  free(marks);
  free(which);
}
