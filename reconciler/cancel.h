/* `altar cancel` in the reconciler: the cancel control message read from
 * the status topic, the facts it leaves in the ledger, and the events of a
 * cancelled job. Internal to reconciler/.
 *
 * A cancel is written to every status partition. The copy read on
 * partition p settles the job's open groups whose events travel on p (their
 * group key hashes to p) and leaves the fact "c/<p>/<job id>" (or
 * "c/<p>/<job id>\x1f<group key>") with its ts; an event read on p later
 * for a group that fact covers is still recorded, but its group settles as
 * cancelled instead of being decided. Every decision therefore depends
 * only on that partition's order, as every other group decision does, so a
 * restarted reconciler and a rebuild decide the same. */
#ifndef ALTAR_RECONCILER_CANCEL_H
#define ALTAR_RECONCILER_CANCEL_H

#include "altar/groups.h"
#include "altar/ledger.h"
#include "altar/reconcile.h"
#include "altar/transport.h"

/* Decodes one status-topic message: a status event, or a "cancel" control
 * message (ev->cancel set). Sets ev->log_partition / log_partitions. Any
 * other message is an error for the DLQ, err saying why. */
int altar__status_msg_decode(const altar_msg_t *m, int32_t n_partitions, altar_status_event_t *ev, altar_error_t *err);

/* Applies a cancel pseudo-event (ev->cancel) inside the caller's batch. */
int altar__cancel_apply(altar_ledger_t *l, const altar_group_specs_t *groups, altar_strlist_t *jobs,
                        const altar_status_event_t *ev, altar_apply_result_t *res, altar_error_t *err);
/* The job ids the stored facts name, into *jobs (at load). */
int altar__cancel_jobs_load(altar_ledger_t *l, altar_strlist_t *jobs, altar_error_t *err);

/* Whether a cancel read on ev's partition covers ev's group. */
bool altar__cancel_covers(altar_ledger_t *l, const altar_group_specs_t *groups, const altar_strlist_t *jobs,
                          const altar_status_event_t *ev);

/* Applies an event of a cancelled group: recorded, then its group settled
 * as cancelled. */
int altar__cancel_event(altar_ledger_t *l, const altar_group_specs_t *groups, const altar_status_event_t *ev,
                        altar_apply_result_t *res, altar_error_t *err);

#endif
