/* Which group events are out already, learnt from the ready and dead
 * topics read only from given offsets on (a checkpoint's, or where a hot
 * standby started reading), never from their beginning: their retention
 * is not the fleet's to know.
 *
 * Two sets of event ids, both bounded by how far the reader of the topics
 * and the applier of the status topic are apart: `seen`, ids found on a
 * publish topic whose outbox entry is not staged (yet), and `pending`,
 * outbox entries staged (by a standby, which publishes nothing) whose id
 * was not seen (yet). An id in both is out already: its entry is deleted
 * from the outbox instead of being published. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_PUBLISHED_SEEN_H
#define ALTAR_RECONCILER_PUBLISHED_SEEN_H

#include "altar/config.h"
#include "altar/fleet.h"
#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/transport.h"
#include "core/hmap.h"
#include "reconciler/checkpoint.h"

#include <stdbool.h>
#include <stdint.h>

/* Ids kept in each set at most; beyond, the oldest seen id is forgotten
 * (its entry, if ever staged, is then published again: at least once). */
#define ALTAR_PUBLISHED_SEEN_MAX 1000000

typedef struct altar__pub_id altar__pub_id_t;

typedef struct altar__published_seen {
  altar__hmap_t seen;               /* id -> altar__pub_id_t (seq unused) */
  altar__hmap_t pending;            /* id -> altar__pub_id_t (seq: the outbox entry) */
  altar__pub_id_t *oldest, *newest; /* seen ids in arrival order */
  altar_ledger_t *ledger;           /* where pending entries are deleted */
  uint64_t dropped;                 /* outbox entries deleted: out already */
  uint64_t forgotten;               /* seen ids let go at the bound */
  /* Held entries that are no group event (retried jobs, DLQ copies,
   * follow-ups): handed here (may be NULL) by on_hold. */
  int (*on_other)(void *ctx, uint64_t seq, altar_error_t *err);
  void *other_ctx;
} altar__published_seen_t;

/* One publish topic's next offset per partition (where reading goes on). */
typedef altar_cp_pub_end_t altar__pub_pos_t;

/* An id found on a publish topic: deletes its pending entry, or keeps it. */
int altar__published_seen_note(altar__published_seen_t *s, const char *id, altar_error_t *err);
/* Whether a group event's id was seen; removes it when so (one entry per id). */
bool altar__published_seen_take(altar__published_seen_t *s, const char *id);
/* An outbox entry staged and held (not published): seq under id. */
int altar__published_seen_hold(altar__published_seen_t *s, const char *id, uint64_t seq, altar_error_t *err);
size_t altar__published_seen_count(const altar__published_seen_t *s);
size_t altar__published_seen_pending(const altar__published_seen_t *s);
void altar__published_seen_free(altar__published_seen_t *s);

/* The outbox's hooks (reconciler/outbox.h, ctx = the set): skip deletes
 * an entry whose group event was seen; hold records a held entry. */
int altar__published_seen_skip(void *ctx, const char *topic, const char *key, const void *value, size_t vlen,
                               const altar_header_t *h, size_t nh, bool *pskip, altar_error_t *err);
int altar__published_seen_on_hold(void *ctx, uint64_t seq, const char *topic, const void *value, size_t vlen,
                                  altar_error_t *err);

/* The topics group events go to: ready, dead and every kind's own. */
size_t altar__publish_topics(const altar_group_specs_t *groups, const altar_topics_t *topics, char (*out)[256],
                             size_t max);

/* The current end of every partition of the publish topics (*pv malloc'd,
 * *pn of them); a topic not there yet has no entry. */
int altar__publish_ends(altar_transport_t *t, const altar_group_specs_t *groups, const altar_topics_t *topics,
                        altar__pub_pos_t **pv, size_t *pn, altar_error_t *err);

/* A handle of its own for the publish topics (assigned them, never
 * subscribed), opened by the first read that has something to read. */
typedef struct altar__published_reader {
  const char *tname; /* the transport's name and settings */
  const altar_strmap_t *props;
  altar_transport_t *t;
  altar__pub_pos_t *assigned; /* what t is assigned */
  size_t n_assigned;
} altar__published_reader_t;
void altar__published_reader_close(altar__published_reader_t *r);

/* Reads the publish topics (listed with lister) from the positions in
 * *ppos (partitions missing there: from their beginning, a topic created
 * since) to their ends as of the call with r, noting every group event's
 * id in s; *ppos becomes where reading stopped. A record may be read past
 * the ends: it is noted too. Bounded: ALTAR_ETIMEOUT after timeout_ms
 * short of the ends. */
int altar__published_read(altar__published_seen_t *s, altar__published_reader_t *r, altar_transport_t *lister,
                          const altar_group_specs_t *groups, const altar_topics_t *topics, altar__pub_pos_t **ppos,
                          size_t *npos, int timeout_ms, altar_error_t *err);

#endif
