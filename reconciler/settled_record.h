/* How settled groups are stored: one aux key per settled group, holding all
 * its members, instead of one key per member (a memtable insert per shard
 * was half of a rebuild's). Also reads the older per-member layout, so a
 * ledger written before is carried over. Internal to reconciler/.
 *
 * Key "g/<seq>", seq as 16 lowercase hex digits: a per-ledger sequence, so
 * key order is write order and a task settled in several records ends up
 * with the last one's run, as it did in memory. Value: the group's ts as 8
 * bytes (IEEE 754 binary64, big-endian), then per member "<task key>\0
 * <backend>\x1f<external id>\0". */
#ifndef ALTAR_RECONCILER_SETTLED_RECORD_H
#define ALTAR_RECONCILER_SETTLED_RECORD_H

#include "altar/codec.h"
#include "altar/ledger.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALTAR__SETTLED_PREFIX "g/"
#define ALTAR__SETTLED_KEY_LEN 18 /* "g/" and 16 hex digits */
#define ALTAR__SETTLED_TS_LEN 8

/* A record as stored; in memory the settled set's entries point into data. */
typedef struct altar__settled_rec {
  uint64_t seq;
  double ts;
  size_t len;  /* of data */
  char data[]; /* the stored value */
} altar__settled_rec_t;

typedef struct altar__settled_member {
  const char *task_key, *run; /* both NUL-terminated inside the value */
  size_t klen, rlen;
} altar__settled_member_t;

void altar__settled_key(uint64_t seq, char out[ALTAR__SETTLED_KEY_LEN + 1]);
/* False when key is not a record key of this layout. */
bool altar__settled_key_seq(const void *key, size_t klen, uint64_t *pseq);

/* The next member of a value from *pos (0 for the first): 1 with *m filled,
 * 0 at the end, -1 when the bytes there are not a member (a field without
 * its NUL, a value too short for its ts). Bounded by vlen: values come from
 * disk. */
int altar__settled_member_next(const char *val, size_t vlen, size_t *pos, altar__settled_member_t *m);
/* The same over a record known to be well formed: true while members remain. */
bool altar__settled_rec_next(const altar__settled_rec_t *r, size_t *pos, altar__settled_member_t *m);

/* The record of group g (task_keys aligned with its shards; a shard without
 * task key, backend or external id is left out); NULL when out of memory. */
altar__settled_rec_t *altar__settled_rec_of_group(uint64_t seq, const altar_group_event_t *g, char *const *task_keys);
/* A record of stored bytes, checked member by member: NULL with *pwhy set
 * when they are not one, NULL with *pwhy NULL when out of memory. */
altar__settled_rec_t *altar__settled_rec_parse(uint64_t seq, const void *val, size_t vlen, const char **pwhy);
/* ---- the index: key "gt/<task key or group marker>" per member, value
 * the seq of the record that settled it last (8 bytes, big-endian), that
 * record's ts (as in a record), then the member's run. Written with the
 * record, in the same batch, so a look-up needs no record in memory; the
 * record stays the unit of pruning (its members say which index keys to
 * drop). "gn" holds the next record's seq (8 bytes, big-endian): a ledger
 * with it has its index; one without it but with records predates the
 * index and is indexed once, at load. ---- */
#define ALTAR__SETTLED_INDEX_PREFIX "gt/"
#define ALTAR__SETTLED_INDEX_PREFIX_LEN 3
#define ALTAR__SETTLED_NEXT_KEY "gn"
#define ALTAR__SETTLED_INDEX_HEAD 16 /* seq and ts */

/* Key "gt/<key>" into b (reset first); 0 or ALTAR_ENOMEM. */
int altar__settled_index_key(altar_buf_t *b, const char *key, size_t klen);
/* The index value of a member into b (reset first); 0 or ALTAR_ENOMEM. */
int altar__settled_index_value(altar_buf_t *b, uint64_t seq, double ts, const char *run, size_t rlen);
/* False when v is too short to be an index value (read from disk). */
bool altar__settled_index_parse(const void *v, size_t vlen, uint64_t *pseq, double *pts, const char **prun,
                                size_t *prlen);
void altar__settled_u64_put(char out[8], uint64_t v);
uint64_t altar__settled_u64_get(const void *p);

/* ---- the older layout: key "t/<task key>" per member, value "<run>\0<ts
 * as %.17g text>"; a value without the NUL (written before settlements
 * expired) never expires. ---- */
#define ALTAR__SETTLED_OLD_PREFIX "t/"

typedef struct altar__settled_old {
  char *key;   /* the stored key ("t/..."), a NUL, the run, a NUL */
  size_t klen; /* of the stored key */
  double ts;   /* -INFINITY: never expires */
} altar__settled_old_t;

typedef struct altar__settled_olds {
  altar__settled_old_t *v;
  size_t n, cap;
} altar__settled_olds_t;

/* Reads every key of the older layout, in key order. ALTAR_ENOTSUP for a
 * ledger without aux storage. */
int altar__settled_olds_read(altar_ledger_t *l, altar__settled_olds_t *out, altar_error_t *err);
void altar__settled_olds_free(altar__settled_olds_t *o);
/* The task key of an old entry, as the older code kept it in memory (up to
 * a NUL); *plen gets its length. */
const char *altar__settled_old_task_key(const altar__settled_old_t *o, size_t *plen);
/* A record of n old entries, all settled at ts; NULL when out of memory. */
altar__settled_rec_t *altar__settled_rec_of_olds(uint64_t seq, double ts, altar__settled_old_t *const *v, size_t n);

#endif
