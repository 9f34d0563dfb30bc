/* A status partition imported from a checkpoint (partition_import.h) keeps
 * a marker in the ledger, written in the import's own write, until the
 * tail the dead owner may have applied is applied here: the checkpoint's
 * recorded ready/dead ends (where the group events it had not decided
 * begin) and the partition's end at the import. A reconciler killed after
 * the import reads the topics from those ends again at its next start, so
 * the tail's groups the dead owner published are not published again
 * (docs/state.md, "Taking over a partition into a ledger that is not
 * empty"). A side key of the partition ("im/"): the checksum does not
 * cover it (like the outbox and the input offsets), and a later import of
 * the partition replaces it. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_IMPORT_MARKER_H
#define ALTAR_RECONCILER_IMPORT_MARKER_H

#include "altar/buf.h"
#include "altar/error.h"
#include "altar/ledger.h"
#include "reconciler/checkpoint.h"

#include <stdint.h>

/* The marker's side key, under its partition's scope. */
#define ALTAR__IMPORT_MARKER_KEY "im/"
/* Bounds on a stored marker (it is read back from the ledger). */
#define ALTAR__IMPORT_MARKER_MAX_BYTES (1u << 20)
#define ALTAR__IMPORT_MARKER_MAX_ENDS 4096

typedef struct altar__import_marker {
  int32_t part;                  /* the status partition */
  char cp_id[64];                /* the checkpoint imported from */
  int64_t until;                 /* the partition's end at the import (INT64_MAX: unknown) */
  altar_cp_pub_end_t *published; /* the checkpoint's recorded ends (malloc'd) */
  size_t n_published;
} altar__import_marker_t;

/* The marker of an import from cp, the partition's end then being `until`,
 * appended to out. */
int altar__import_marker_encode(const altar_checkpoint_t *cp, int64_t until, altar_buf_t *out, altar_error_t *err);
/* Parses a stored marker of partition part into *m (cleared first; the
 * caller clears it); ALTAR_ELEDGER naming the field that is wrong. */
int altar__import_marker_decode(const void *v, size_t n, int32_t part, altar__import_marker_t *m, altar_error_t *err);
void altar__import_marker_clear(altar__import_marker_t *m);

/* Every marker l holds, one per partition (*pv malloc'd, *pn of them; free
 * each with altar__import_marker_clear, then *pv). A ledger without side
 * keys holds none. */
int altar__import_markers_load(altar_ledger_t *l, altar__import_marker_t **pv, size_t *pn, altar_error_t *err);
/* Deletes partition part's marker, in its own write (no batch open). */
int altar__import_marker_drop(altar_ledger_t *l, int32_t part, altar_error_t *err);

#endif
