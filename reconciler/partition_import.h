/* Taking one status partition over from the checkpoint covering it furthest,
 * into a ledger that already holds other partitions (docs/state.md, "Taking
 * over a partition into a ledger that is not empty"). Internal to
 * reconciler/. */
#ifndef ALTAR_RECONCILER_PARTITION_IMPORT_H
#define ALTAR_RECONCILER_PARTITION_IMPORT_H

#include "altar/error.h"
#include "altar/ledger.h"
#include "reconciler/checkpoint.h"

#include <stdint.h>

/* Restores the checkpoint of status_topic at uri covering partition part
 * furthest (altar__checkpoint_restore_covering) beside l (a RocksDB ledger
 * with ALTAR_LEDGER_CAP_PARTITIONS) and, when it covers more than `have`
 * (the next offset l holds for part, -1 for none), imports the partition
 * from it in one write, input offset included, raising the outbox's and the
 * settled groups' counters; *pcp gets its manifest (the covered offset, the
 * ready/dead ends), *pkeys the keys imported. The same write puts the
 * partition's import marker (import_marker.h): the checkpoint's recorded
 * ends and `until`, the partition's end at the import (INT64_MAX when not
 * known). ALTAR_ENOTFOUND when no
 * checkpoint covers part, ALTAR_ESTATE when it covers no more than
 * l has. No batch may be open. */
int altar__partition_import(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part, int64_t have,
                            int64_t until, altar_checkpoint_t *pcp, size_t *pkeys, altar_error_t *err);

/* A checkpoint restored beside the ledger, kept between the imports of one
 * rebalance: the partitions it gains together are most often covered
 * furthest by the same checkpoint, and restoring it (every table file
 * copied and its digest checked) once per partition was most of a
 * takeover at 10^6 groups. Zeroed: none kept. */
typedef struct altar__import_src {
  char id[64];    /* the checkpoint restored; "" for none */
  char dir[4096]; /* where */
} altar__import_src_t;

/* altar__partition_import, restoring into (or reusing) kept's directory,
 * which stays until altar__partition_import_release. */
int altar__partition_import_kept(altar_ledger_t *l, const char *uri, const char *status_topic, int32_t part,
                                 int64_t have, int64_t until, altar__import_src_t *kept, altar_checkpoint_t *pcp,
                                 size_t *pkeys, altar_error_t *err);
/* One partition a rebalance gains: which, the next offset the ledger holds
 * of it (-1 for none), its end on the status topic now (INT64_MAX when not
 * known); then what became of it: rc (ALTAR_OK imported; ALTAR_ENOTFOUND,
 * ALTAR_ESTATE: no checkpoint covers more than the ledger, nothing done;
 * else failed, err says why), cp (its checkpoint's manifest when imported;
 * the caller clears it) and the keys imported. */
typedef struct altar__import_req {
  int32_t part;
  int64_t have, until;
  int rc;
  altar_error_t err;
  altar_checkpoint_t cp;
  size_t keys;
} altar__import_req_t;

/* altar__partition_import_kept for n partitions at once: the partitions
 * the same checkpoint covers furthest (most often all of them) are
 * imported from one restore in one write (their files written in
 * parallel, one ingestion, each partition's marker in it), so a kill -9
 * leaves all of them imported or none. Each req gets its own outcome. */
void altar__partition_import_many(altar_ledger_t *l, const char *uri, const char *status_topic,
                                  altar__import_req_t *reqs, size_t n, altar__import_src_t *kept);

/* Removes what kept holds (nothing when it holds none). */
void altar__partition_import_release(altar__import_src_t *kept);

#endif
