/* The fleet as a person looks at it: jobs, groups, shards, workers and dead
 * letters, rendered as the JSON the dashboard's pages, `altar jobs` and
 * `altar workers` share.
 *
 * Where it reads from, and why that is safe beside a running reconciler:
 * - the ledger through its own read-only RocksDB handle, re-opened at most
 *   every ALTAR_FLEET_VIEW_LEDGER_MAX_AGE_MS (longer when reads are slow): the reconciler's handle (one
 *   thread at a time, see altar/ledger.h) is never touched, so its loop
 *   never waits for a page; in a server the re-opening is done by a thread
 *   of the view (altar__fleet_view_start_reader), so no page waits for it;
 * - the jobs, ready, dead, dlq, fleet and status topics through groupless
 *   readers (assign) of its own, each refresh reading only what is new.
 *
 * Every list it renders is paged (offset, limit <= ALTAR_FLEET_VIEW_LIMIT_MAX)
 * and every kept string bounded, so no response grows without bound.
 *
 * Thread safety: every call may come from any thread; one mutex serialises them. */
#ifndef ALTAR_DASHBOARD_FLEET_VIEW_H
#define ALTAR_DASHBOARD_FLEET_VIEW_H

#include "altar/config.h"
#include "altar/error.h"
#include "altar/transport.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define ALTAR_FLEET_VIEW_LIMIT_MAX 500
#define ALTAR_FLEET_VIEW_LIMIT_DEFAULT 50
#define ALTAR_FLEET_VIEW_LEDGER_MAX_AGE_MS 1000
/* ... and not before this many times as long as its last read took has
 * passed since that read ended: on a big ledger most pages come from the
 * snapshot (a read of 10^5 shards costs ~0.5 s). */
#define ALTAR_FLEET_VIEW_LEDGER_READ_SPACING 5
/* With the background reader: no page asked for in this long, and it stops
 * reading until one is; a page that then finds the snapshot this old reads
 * the ledger itself once. */
#define ALTAR_FLEET_VIEW_READER_IDLE_MS 30000
#define ALTAR_FLEET_VIEW_DLQ_KEEP 1000 /* newest DLQ records kept */
/* What the view remembers of the topics it reads, newest kept: jobs (their
 * submit time and queued shards), group events, and the worker of each
 * task's latest status event. The pages show the newest; the ledger
 * snapshot (bounded by the ledger's own lifetimes) is read afresh. */
#define ALTAR_FLEET_VIEW_JOBS_KEEP 10000
#define ALTAR_FLEET_VIEW_GROUPS_KEEP 50000
#define ALTAR_FLEET_VIEW_HOSTS_KEEP 100000
#define ALTAR_FLEET_VIEW_DETAIL_MAX 2048 /* bytes of a failure's detail kept */

typedef struct altar_fleet_view altar_fleet_view_t;

/* What a page asks for. NULL strings = absent. */
typedef struct altar_fleet_query {
  const char *job; /* "job" page: the job id */
  const char *key; /* "shard" page: the shard's task key */
  /* Filters of "jobs" and "job" (dashboard/shard_filter.h). */
  const char *state, *kind, *label, *worker;
  int64_t offset; /* first item of the page's list */
  int64_t limit;  /* items; 0 = default, capped at the maximum */
} altar_fleet_query_t;

/* A view over the fleet cfg describes (copied what it keeps). NULL on error. */
altar_fleet_view_t *altar__fleet_view_new(const altar_config_t *cfg, altar_error_t *err);
void altar__fleet_view_free(altar_fleet_view_t *v); /* NULL is fine */

/* Brings the view up to date and renders page "overview", "jobs", "job",
 * "why", "shard", "workers" or "dead" into *pout (caller json_decref's). ALTAR_ENOTFOUND for
 * an unknown page, job or shard, ALTAR_EINVAL for a bad query. Any thread. */
int altar__fleet_view_render(altar_fleet_view_t *v, const char *page, const altar_fleet_query_t *q, json_t **pout,
                             altar_error_t *err);

/* Keeps the ledger snapshot fresh from a thread of its own (reads it once
 * before returning, then whenever the snapshot is as old as
 * ALTAR_FLEET_VIEW_LEDGER_MAX_AGE_MS or READ_SPACING times its last read's
 * cost): pages then never wait for a read of the ledger, whatever its
 * size. While no page is asked for (ALTAR_FLEET_VIEW_READER_IDLE_MS) it
 * reads nothing. For a server (`altar dashboard`, the reconciler's); a
 * one-shot reader has no use for it. Again while running is a no-op. 0 or ALTAR_EIO. */
int altar__fleet_view_start_reader(altar_fleet_view_t *v, altar_error_t *err);
/* Stops and joins the reader (altar__fleet_view_free does it too). NULL or
 * not started is fine. */
void altar__fleet_view_stop_reader(altar_fleet_view_t *v);

/* The reconciler's hour as its ledger keeps it (reconciler/history_store.h),
 * from the last snapshot, put into h: what `altar dashboard` running apart
 * from the reconciler charts. Any thread. */
struct altar_history;
void altar__fleet_view_history_into(altar_fleet_view_t *v, struct altar_history *h);

/* What the view did, as facts a test can assert on and /api/overview shows
 * ("ledger": {"reads", "reads_in_render", "background_reads", "renders",
 * "jobs_builds"}). */
typedef struct altar_fleet_view_counters {
  uint64_t renders;                /* pages rendered */
  uint64_t ledger_reads;           /* snapshots of the whole ledger taken */
  uint64_t ledger_reads_in_render; /* of them, taken while a page waited */
  uint64_t background_reads;       /* of them, taken by the reader thread */
  uint64_t jobs_builds;            /* job summaries computed (again only after a read changed their inputs) */
} altar_fleet_view_counters_t;
void altar__fleet_view_counters(altar_fleet_view_t *v, altar_fleet_view_counters_t *out);

/* Reads the topics until the view holds every record they held when it was
 * called, or timeout_ms passed, then the ledger afresh: a one-shot reader
 * (`altar status`) sees what the log and the ledger hold now. 0, or
 * ALTAR_ETIMEOUT when the topics were not all read in time (the view keeps
 * what it read). Any thread. */
int altar__fleet_view_sync(altar_fleet_view_t *v, int timeout_ms, altar_error_t *err);

/* The reconciler group's offsets in l (from altar_transport_lag on the status
 * topic) replaced by the input offsets its ledger at ledger_path stores, and
 * each lag recomputed as the log's end minus that offset: what `altar log
 * offsets --group altar.reconcilers` prints and the dashboard shows. Opens
 * the ledger read-only. 0 or a negative code with err set. Any thread. */
int altar__fleet_reconciler_offsets(const char *ledger_path, altar_lag_list_t *l, altar_error_t *err);

/* The reconciler group's lag on the status topic, per partition, as the
 * overview page and `altar log offsets` read it (the ledger's own input
 * offsets against the log's ends). *pll malloc'd (altar_lag_list_free).
 * Any thread. */
int altar_fleet_view_reconciler_lag(altar_fleet_view_t *v, altar_lag_list_t **pll, altar_error_t *err);

#endif
