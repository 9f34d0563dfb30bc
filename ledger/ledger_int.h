/* altar — ledger internals shared by the in-memory and RocksDB ledgers: the
 * in-memory index of records (by (backend, external_id), by (kind, group
 * key), by task key, and the set of open records). Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_LEDGER_INT_H
#define ALTAR_RECONCILER_LEDGER_INT_H

#include "altar/plugin/ledger.h"
#include "core/hmap.h"

#include <stdint.h>

struct altar__lgroup;

/* One cached record. `e` comes first so a pointer to it is a pointer to the
 * public entry. */
typedef struct altar__lent {
  altar_ledger_entry_t e;
  char *rkey; /* backend '\0' external_id: the record key (its own allocation, or the
                packed handle's backend when they coincide) */
  size_t rkey_len;
  uint64_t rhash;            /* altar__hash of rkey, taken once when the index files the entry */
  struct altar__lgroup *grp; /* group it is filed under while open, or NULL */
  size_t grp_pos;
  size_t active_pos; /* position in the open set, SIZE_MAX when not open */
  int32_t part;      /* RocksDB: the status partition its keys carry */
  bool has_spec;     /* a spec is stored (e.rec.spec may still be NULL in a cache) */
  char *packed;      /* RocksDB cache: the record's fixed part (handle, kind), packed once */
  size_t packed_len;
  char *spec_enc; /* RocksDB cache: the spec's encoding, made once at submit (NULL without spec) */
  size_t spec_len;
  /* Made by altar__lent_new: the handle, kind, task and group keys and
   * `tail` lie in the entry's own allocation (one malloc per record, not
   * ten); only failure and spec are separate. */
  bool one_block;
  char *tail;
} altar__lent_t;

typedef struct altar__lgroup {
  char *key; /* kind '\0' group_key */
  size_t key_len;
  altar__lent_t **m;
  size_t n, cap;
  size_t n_state[4]; /* members by state, so a decision can skip a group that cannot be ready */
} altar__lgroup_t;

typedef struct altar__lindex {
  altar__hmap_t recs;     /* rkey → lent */
  altar__hmap_t groups;   /* kind\0group_key → lgroup */
  altar__hmap_t tasks;    /* task_key → open lent */
  altar__lent_t **active; /* every open (unconsumed) entry */
  size_t n_active, cap_active;
  const altar_ledger_entry_t **scratch; /* sorted group view handed out by group_members */
  size_t cap_scratch;
  altar__lent_t *last; /* the entry found last: an event's operations ask for it several times */
} altar__lindex_t;

/* The record key of (backend, external_id): malloc'd into *pkey; 0 or ENOMEM. */
int altar__rkey(const char *backend, const char *external_id, char **pkey, size_t *plen);
/* Order of two record keys (backend, then external_id). */
int altar__rkey_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* A new entry for a record (copied) with metadata, and `extra` bytes at
 * x->tail for the caller; NULL on ENOMEM. */
altar__lent_t *altar__lent_new(const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                               const char *task_key, const char *group_key, size_t extra);
void altar__lent_free(altar__lent_t *x);

/* Moves x's group count from state `was` to its present state: call after
 * changing the state of an entry that may be open. */
void altar__lindex_restate(altar__lent_t *x, altar_state_t was);
/* How many open members of group (kind, group_key) succeeded and failed. */
void altar__lindex_group_counts(altar__lindex_t *ix, const char *kind, const char *group_key, size_t *psucceeded,
                                size_t *pfailed);
altar__lent_t *altar__lindex_find(altar__lindex_t *ix, const char *backend, const char *external_id);
/* Inserts x (taking ownership) and attaches it when it is open. 0 or ENOMEM
 * (then x is not inserted and still the caller's). */
int altar__lindex_add(altar__lindex_t *ix, altar__lent_t *x);
/* Files an open entry under the open set, its group and its task key. */
int altar__lindex_attach(altar__lindex_t *ix, altar__lent_t *x);
/* Takes an entry out of the open set, its group and the task key map. */
void altar__lindex_detach(altar__lindex_t *ix, altar__lent_t *x);
/* Removes x from every map and frees it. */
void altar__lindex_remove(altar__lindex_t *ix, altar__lent_t *x);
altar__lent_t *altar__lindex_task(const altar__lindex_t *ix, const char *task_key);
/* Borrowed, sorted members of a group. */
int altar__lindex_group(altar__lindex_t *ix, const char *kind, const char *group_key,
                        const altar_ledger_entry_t *const **pm, size_t *pn);
/* The open entries in one of these states (bitmask of 1u << state), sorted
 * by record key, into a malloc'd array of borrowed pointers (caller frees
 * the array only). */
int altar__lindex_open_sorted(const altar__lindex_t *ix, unsigned state_mask, altar__lent_t ***pv, size_t *pn);
void altar__lindex_free(altar__lindex_t *ix);

/* Helpers both ledgers use to build their outputs. */
int altar__handles_from(altar__lent_t *const *v, size_t n, altar_handle_t **phs, size_t *pn);
int altar__set_failure(altar_record_t *rec, altar_state_t state, const altar_failure_t *f);
int altar__set_str(char **dst, const char *src);

#endif
