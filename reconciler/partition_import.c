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
  memset(pcp, 0, sizeof *pcp);
  if (pkeys) *pkeys = 0;
  const char *ldir = altar__ledger_rocksdb_dir(l);
  if (!ldir || !(altar_ledger_caps(l) & ALTAR_LEDGER_CAP_PARTITIONS))
    return altar_error_set(err, ALTAR_ENOTSUP, "importing partition %d: the ledger keeps no partitions", (int)part);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.import-%d-%ld", ldir, (int)part, (long)getpid());
  altar__checkpoint_remove_local(tmp); /* a crash's leftover of this pid */
  int rc = altar__checkpoint_restore_covering(uri, status_topic, part, have, tmp, pcp, err);
  if (rc) return rc;
  /* The ledger-wide sequence counters (reconciler/outbox.c, settled_record.h). */
  static const char *const counters[] = {"q", "gn"};
  /* The marker goes in the same write: a kill -9 leaves both or neither. */
  altar_buf_t mark = {0};
  rc = altar__import_marker_encode(pcp, until, &mark, err);
  if (!rc)
    rc = altar__ledger_rocksdb_import_partition(l, tmp, part, counters, 2, ALTAR__IMPORT_MARKER_KEY, mark.data,
                                                mark.len, pkeys, err);
  altar_buf_free(&mark);
  altar__checkpoint_remove_local(tmp);
  if (rc) altar__checkpoint_clear(pcp);
  return rc;
}
