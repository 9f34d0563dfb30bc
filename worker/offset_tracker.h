/* The worker's offset tracker: which jobs of a partition are finished, what
 * offset is safe to commit, and the commit metadata that lets a restarted or
 * rebalanced worker skip jobs that finished above that offset.
 *
 * The committed offset is always the lowest unfinished job of the partition
 * (or one past the last seen when none is unfinished); finished offsets above
 * it travel in the commit metadata as ranges relative to it:
 *   "o1:" followed by comma-separated "a" or "a-b" (inclusive, a,b >= 0 and
 *   relative to the committed offset), e.g. "o1:1-4,7".
 * When jobs are still unfinished (held: running under this worker, or
 * waited for because an earlier owner holds them), version 2 adds how far
 * this worker had read, relative to the committed offset:
 *   "o2:" ranges "/" n, e.g. "o2:1-4,7/9" or "o2:/3": every offset in
 *   [committed, committed + n) that no range lists is held, and a later
 *   owner must not start it while its holder lives (worker.c waits for the
 *   holder's control messages). Version 1 is written when nothing is held,
 *   so an older reader still reads it; both versions are read.
 * The metadata is bounded by ALTAR_OFFSET_META_MAX; n always fits (room is
 * kept for it). When ranges would not fit, the highest are left out. Below
 * the held bound that makes a finished job count as held: the next owner
 * waits a lease timeout for news of it, then runs it again; above it the job
 * runs again at once. Either way a job is run again rather than skipped
 * wrongly, and a held job is never started a second time while its holder
 * is alive.
 *
 * Not thread-safe: the worker's main loop owns it. */
#ifndef ALTAR_WORKER_OFFSET_TRACKER_H
#define ALTAR_WORKER_OFFSET_TRACKER_H

#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALTAR_OFFSET_META_MAX 1024

typedef struct altar_offset_tracker altar__offset_tracker_t;

/* NULL on allocation failure. Free with altar__offset_tracker_free. */
altar__offset_tracker_t *altar__offset_tracker_new(void);
void altar__offset_tracker_free(altar__offset_tracker_t *t);

/* Starts tracking a partition assigned to us. committed is the group's
 * committed offset (-1 when none), metadata its metadata string (NULL or
 * empty when none). Malformed metadata is ignored with a warning in err->msg
 * and ALTAR_OK returned: the cost is re-running those jobs, never losing one. */
int altar__offset_tracker_assign(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t committed,
                                 const char *metadata, altar_error_t *err);
/* Forgets a revoked partition. */
void altar__offset_tracker_revoke(altar__offset_tracker_t *t, const char *topic, int32_t partition);
bool altar__offset_tracker_assigned(const altar__offset_tracker_t *t, const char *topic, int32_t partition);

/* True when the job at offset finished in an earlier life (listed in the
 * metadata read at assign). Such a job must not run again; the caller then
 * calls altar__offset_tracker_seen + _finished for it. */
bool altar__offset_tracker_already_done(const altar__offset_tracker_t *t, const char *topic, int32_t partition,
                                        int64_t offset);
/* True when the job at offset was held by an earlier owner according to
 * the metadata read at assign (unfinished below its held bound, see above):
 * the caller must wait for its holder rather than start it. */
bool altar__offset_tracker_held(const altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t offset);

/* Records that the job at offset was consumed. Offsets of one partition must
 * arrive in increasing order (ALTAR_EINVAL otherwise; a rewind needs revoke +
 * assign). ALTAR_ENOTFOUND when the partition is not assigned. */
int altar__offset_tracker_seen(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t offset);
/* Records that the job at offset is done (its terminal status acknowledged
 * by the log). Finishing an offset twice is harmless. */
int altar__offset_tracker_finished(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t offset);
/* Number of seen but unfinished jobs in the partition. */
size_t altar__offset_tracker_in_flight(const altar__offset_tracker_t *t, const char *topic, int32_t partition);

/* The offset to commit now and its metadata (written NUL-terminated into
 * meta, at most metasz bytes; metasz >= 8). *pchanged says whether either
 * differs from the last value returned, so callers commit only on change.
 * ALTAR_ENOTFOUND when the partition is not assigned; *poffset = -1 when
 * nothing was ever seen or committed. */
int altar__offset_tracker_commit_point(altar__offset_tracker_t *t, const char *topic, int32_t partition,
                                       int64_t *poffset, char *meta, size_t metasz, bool *pchanged);

/* Bytes the tracker holds: what is in flight (two stretches at most per
 * unfinished job, whatever finished above it), what the commit metadata
 * read at assign lists, and the last metadata returned. For tests of that
 * bound. */
size_t altar__offset_tracker_footprint(const altar__offset_tracker_t *t);

/* Tells the tracker the last commit point it returned was not committed
 * (the commit failed), so the next altar__offset_tracker_commit_point reports
 * a change and the caller tries again. */
void altar__offset_tracker_commit_failed(altar__offset_tracker_t *t, const char *topic, int32_t partition);

#endif
