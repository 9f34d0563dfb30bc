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

int altar__partition_import_kept(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part,
                                 int64_t have, int64_t until, altar__import_src_t *kept, altar_checkpoint_t *pcp,
                                 size_t *pkeys, altar_error_t *err) {
  memset(pcp, 0, sizeof *pcp);
  if (pkeys) *pkeys = 0;
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
