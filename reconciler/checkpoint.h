/* Checkpoints of the RocksDB ledger in the fleet's storage (file://, gs://,
 * s3://), so the ledger's state outlives the status topic's retention.
 *
 * A checkpoint is taken in two steps: `take` (on the thread that writes the
 * ledger, so no write falls between them) makes a RocksDB checkpoint of hard
 * links beside the ledger and reads the input offsets it covers; `ship`
 * (any thread) uploads it and removes the local copy. Table files are
 * immutable and stored by content (sst/<sha256>), so each is uploaded once
 * however many checkpoints list it; the small files that change (MANIFEST,
 * CURRENT, OPTIONS) go with each checkpoint. A checkpoint becomes visible
 * only when its manifest is written, last, as `latest.json`: a crash at any
 * point leaves the previous one whole.
 *
 * Layout under the URI:
 *   sst/<hex sha256>            table files, by content
 *   cp/<id>/<file>              a checkpoint's other files
 *   cp/<id>.json                its manifest (format in docs/state.md)
 *   latest.json                 a copy of the newest manifest */
#ifndef ALTAR_RECONCILER_CHECKPOINT_H
#define ALTAR_RECONCILER_CHECKPOINT_H

#include "altar/error.h"
#include "altar/ledger.h"

#include <stddef.h>
#include <stdint.h>

/* The input offsets a checkpoint covers: the next offset of each status
 * partition, as stored in the ledger when it was taken. */
typedef struct altar_cp_offset {
  int32_t partition;
  int64_t next;
} altar_cp_offset_t;

/* A publish topic's (ready, dead) end offset when the checkpoint was cut,
 * after the owner's outbox was acknowledged: a group event the checkpoint's
 * ledger had not decided lies at or beyond it (reconciler/published_seen.h). */
typedef struct altar_cp_pub_end {
  char topic[256];
  int32_t partition;
  int64_t next;
} altar_cp_pub_end_t;

typedef struct altar_checkpoint {
  char id[64];     /* <unix ms>-<random hex>: sorts by time */
  char *local_dir; /* the hard-linked copy until shipped */
  char *topic;     /* the status topic */
  altar_cp_offset_t *offsets;
  size_t n_offsets;
  double taken_at; /* unix seconds */
  uint64_t bytes;  /* uploaded by ship (table files already stored excluded) */
  size_t files, files_uploaded;
  size_t tables_reuploaded;      /* listed, found stored, gone by the re-check after the manifest: uploaded again */
  altar_cp_pub_end_t *published; /* may be NULL (older checkpoints, or ends unknown) */
  size_t n_published;
} altar_checkpoint_t;

void altar__checkpoint_clear(altar_checkpoint_t *c);

/* Step 1, on the ledger's writing thread: a consistent copy of l (a RocksDB
 * ledger) beside it, with the offsets of status_topic it covers. Never while
 * a copy of l is being shipped: copies a crash left beside l are removed. */
int altar__checkpoint_take(altar_ledger_t *l, const char *status_topic, altar_checkpoint_t *out, altar_error_t *err);

/* Step 2, any thread: uploads c to uri and makes it the newest; removes the
 * local copy either way. `shipped` (may be NULL) is a cache of table-file
 * digests known to be stored, kept by the caller between calls.
 *
 * A table file found stored is not uploaded again, and another
 * reconciler's collector sharing uri may delete it between that look and
 * the manifest (checkpoint_gc.h). So once cp/<id>.json is written and
 * ALTAR_CP_RECHECK_WAIT_S has passed, every
 * table it lists that this ship did not upload is looked at again and
 * uploaded again when gone, and only then is latest.json written: a
 * collector that lists the manifests after cp/<id>.json spares them, and
 * one that listed before and deletes before the re-check is undone by it
 * (docs/state.md, "Collecting old checkpoints", says what window is left).
 * Storage that cannot list and delete has no collector: no re-check. */
typedef struct altar_cp_shipped altar_cp_shipped_t;
altar_cp_shipped_t *altar__cp_shipped_new(void);
void altar__cp_shipped_free(altar_cp_shipped_t *s);
int altar__checkpoint_ship(altar_checkpoint_t *c, const char *uri, altar_cp_shipped_t *shipped, altar_error_t *err);

/* Restores the newest checkpoint at uri into dir, which must not exist (it
 * is filled under a temporary name and renamed into place). Fills *out
 * (local_dir NULL) with what it restored. ALTAR_ENOTFOUND when uri holds no
 * checkpoint. */
int altar__checkpoint_restore(const char *uri, const char *dir, altar_checkpoint_t *out, altar_error_t *err);

/* The same for the checkpoint of status_topic whose manifest covers status
 * partition part furthest, the newest of those (reconcilers sharing uri ship
 * checkpoints of their own partitions, and one that lost a partition ships
 * its stale state of it; latest.json names whichever shipped last). Manifests are
 * listed under cp/; one that cannot be read is passed over. ALTAR_ENOTFOUND
 * when none covers it; ALTAR_ESTATE, nothing fetched, when it covers no
 * more than `beyond` (the offset a ledger already holds; -1 for none). */
int altar__checkpoint_restore_covering(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                                       const char *dir, altar_checkpoint_t *out, altar_error_t *err);
/* The same, except that when dir exists it is the caller's restore of the
 * checkpoint whose id is `kept`: nothing is fetched when that one is the
 * checkpoint covering part furthest; otherwise dir is replaced by it. */
int altar__checkpoint_restore_covering_kept(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                                            const char *dir, const char *kept, altar_checkpoint_t *out,
                                            altar_error_t *err);
/* Only the manifest of the checkpoint altar__checkpoint_restore_covering
 * would restore (same errors), nothing fetched. */
int altar__checkpoint_covering(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                               altar_checkpoint_t *out, altar_error_t *err);
/* Removes a restored checkpoint's directory (a flat directory of files). */
void altar__checkpoint_remove_local(const char *dir);
/* Reads the newest checkpoint's manifest without restoring it. */
int altar__checkpoint_latest(const char *uri, altar_checkpoint_t *out, altar_error_t *err);

/* Test hook (fault injection): called by ship after each file it stored,
 * with how many it stored so far; a test makes it _exit() to stand for a
 * kill -9 mid-upload. NULL in production. */
extern void (*altar__checkpoint_after_upload)(size_t uploaded);
/* Test hook: called by ship after every file is stored or found stored
 * and before cp/<id>.json is written (a test runs another reconciler's
 * collector there). NULL in production. */
extern void (*altar__checkpoint_before_manifest)(const altar_checkpoint_t *c);
/* How long a ship waits after its manifest is stored before its re-check:
 * longer than a collection may take from a listing to a delete
 * (ALTAR_CP_GC_LISTING_MAX_S), with a second to spare. Unit tests that
 * force the order with hooks set it to 0. */
#define ALTAR_CP_RECHECK_WAIT_S 2.0
extern double altar__checkpoint_recheck_wait_s;

/* The covered next offset of partition p, -1 when the checkpoint has none. */
int64_t altar__checkpoint_offset(const altar_checkpoint_t *c, int32_t p);

#endif
