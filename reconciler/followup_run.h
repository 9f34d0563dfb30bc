/* The daemon's side of follow-ups: staging a group's next stage in the
 * batch that decided the group, and, at start, keeping a follow-up the log
 * already holds from going out twice. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_FOLLOWUP_RUN_H
#define ALTAR_RECONCILER_FOLLOWUP_RUN_H

#include "reconciler/daemon.h"
#include "reconciler/followup_seen.h"
#include "reconciler/outbox.h"

/* Stages g's follow-up (if its kind declares one for g's outcome) in ob,
 * inside the caller's open ledger batch. A template that cannot be made
 * is staged as a failed task of the next stage and said on stderr; only
 * out of memory or a ledger error fails. */
int altar__followup_stage(altar__outbox_t *ob, const altar_reconciler_opts_t *o, const altar_group_event_t *g,
                          altar_reconciler_stats_t *stats, altar_error_t *err);

typedef struct altar__followup_guard {
  const altar_reconciler_opts_t *o;
  bool loaded;
  altar__keys_seen_t seen;
} altar__followup_guard_t;

/* Around the start-up publish of what a previous life left in the outbox:
 * a follow-up job whose key is on its jobs topic already is deleted, not
 * sent. The topics are read once, at the first follow-up met. */
void altar__followup_guard_begin(altar__followup_guard_t *g, altar__outbox_t *ob, const altar_reconciler_opts_t *o);
void altar__followup_guard_end(altar__followup_guard_t *g, altar__outbox_t *ob, altar_reconciler_stats_t *stats);

#endif
