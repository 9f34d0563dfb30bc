/* The reconciler's durable outbox: records to publish, stored in the ledger
 * (aux keys "o/<seq>") in the same atomic write as the changes that made
 * them due, deleted once the log acknowledges them. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_OUTBOX_H
#define ALTAR_RECONCILER_OUTBOX_H

#include "altar/buf.h"
#include "altar/ledger.h"
#include "altar/transport.h"

#include <stdint.h>

typedef struct altar__outbox {
  altar_ledger_t *ledger;
  altar_transport_t *transport;
  uint64_t next_seq; /* next sequence number to assign (one counter per ledger) */
  /* The entries staged since the last publish (references, below), so a
   * publish after a batch reads each under its own partition. */
  uint64_t *staged;
  size_t n_staged, cap_staged;
  size_t in_flight;   /* produced, not yet reported */
  uint64_t published; /* acknowledged and deleted */
  int fatal;          /* a record could not be published for good */
  altar_error_t fatal_err;
  void (*on_published)(void *ctx, const char *topic, const void *value, size_t len);
  void *on_published_ctx;
  /* May be set around a publish: an entry it says is out already (*pskip)
   * is deleted instead of produced again. */
  int (*skip)(void *ctx, const char *topic, const char *key, const void *value, size_t vlen, const altar_header_t *h,
              size_t nh, bool *pskip, altar_error_t *err);
  void *skip_ctx;
  uint64_t skipped; /* entries skip deleted */
  /* Set while standing by (reconciler/standby.c): nothing is produced;
   * each entry a publish would produce (skip said no) is handed to hold
   * and stays in the ledger. */
  int (*hold)(void *ctx, uint64_t ref, const char *topic, const void *value, size_t vlen, altar_error_t *err);
  void *hold_ctx;
} altar__outbox_t;

/* An entry's reference: the status partition it is stored under (the
 * ledger's scope when it was staged) in the top 16 bits, its sequence
 * number below. */
#define ALTAR__OUTBOX_SEQ_MASK 0xffffffffffffull
static inline uint64_t altar__outbox_ref(int32_t part, uint64_t seq) {
  return (uint64_t)(part < 0 ? 0xffffu : (uint32_t)part & 0xffffu) << 48 | (seq & ALTAR__OUTBOX_SEQ_MASK);
}
static inline uint64_t altar__outbox_ref_seq(uint64_t ref) { return ref & ALTAR__OUTBOX_SEQ_MASK; }
static inline int32_t altar__outbox_ref_part(uint64_t ref) {
  uint32_t p = (uint32_t)(ref >> 48);
  return p == 0xffffu ? ALTAR_LEDGER_SCOPE_NONE : (int32_t)p;
}
/* Deletes the entry ref names (inside the caller's batch, if one is open). */
int altar__outbox_del_ref(altar_ledger_t *l, uint64_t ref, altar_error_t *err);
/* Forgets what was staged from seq on (their batch was aborted) and hands
 * their numbers out again. */
void altar__outbox_forget_from(altar__outbox_t *ob, uint64_t seq);
/* Frees what the outbox holds in memory. */
void altar__outbox_close(altar__outbox_t *ob);

/* Loads next_seq from the ledger. */
int altar__outbox_open(altar__outbox_t *ob, altar_ledger_t *l, altar_transport_t *t, altar_error_t *err);
/* Stages a record (inside the caller's ledger batch); *pseq gets its number. */
int altar__outbox_stage(altar__outbox_t *ob, const char *topic, const char *key, const void *value, size_t vlen,
                        const char *hdr_name, const char *hdr_value, uint64_t *pseq, altar_error_t *err);
/* The same with up to ALTAR_OUTBOX_MAX_HEADERS headers (copied). */
#define ALTAR_OUTBOX_MAX_HEADERS 4
int altar__outbox_stage_headers(altar__outbox_t *ob, const char *topic, const char *key, const void *value, size_t vlen,
                                const altar_header_t *hdrs, size_t n_hdrs, uint64_t *pseq, altar_error_t *err);
/* Produces staged records with seq >= from_seq (all of them at start-up). */
int altar__outbox_publish_from(altar__outbox_t *ob, uint64_t from_seq, altar_error_t *err);
/* Produces every stored record of status partition part (one imported
 * from a checkpoint). */
int altar__outbox_publish_partition(altar__outbox_t *ob, int32_t part, altar_error_t *err);
/* Raises next_seq to the ledger's counter (after an import raised it). */
int altar__outbox_reload_seq(altar__outbox_t *ob, altar_error_t *err);
/* Number of records still stored. */
int altar__outbox_count(altar__outbox_t *ob, size_t *pn, altar_error_t *err);
/* Copies every stored record (and the sequence counter) of from's outbox
 * into to's, one atomic write per record, keeping their numbers and bytes.
 * --rebuild uses it so that retried jobs and DLQ copies a killed daemon had
 * staged but not published survive the ledger swap; to must hold no outbox
 * of its own. *pn (may be NULL) gets the number of records copied. */
int altar__outbox_carry(altar_ledger_t *from, altar_ledger_t *to, size_t *pn, altar_error_t *err);
/* The delivery callback to install on the transport (ctx = the outbox). */
void altar__outbox_on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx);

#endif
