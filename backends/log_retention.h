/* Bounded retention of the task output a backend keeps under
 * <data_root>/logs/<task key>/ (process, docker). What is kept is bounded
 * by count (logs_keep_count), by the disk it really takes (logs_keep:
 * allocated blocks of the directories and their files, so a directory with
 * nothing in it counts too) and by age (logs_keep_days); the oldest goes
 * first, never a running task's, and only directories named like task keys
 * and the files the backends write in them are deleted.
 *
 * The backend keeps an index of what it keeps, oldest first: filled by one
 * scan of the directory at open (and again every
 * ALTAR_LOGS_RESCAN_INTERVAL_S, which takes in what other workers on the
 * same data root left), then told of each task's output as the task is
 * reclaimed (altar__logs_keep). Pruning pops from the index's old end, so
 * its cost per finished task stays flat however much is kept, and the
 * index's memory is bounded by logs_keep_count. Shared by the backends that
 * keep output; internal to backends/. Not thread-safe: the backend's
 * calling thread owns it. */
#ifndef ALTAR_BACKENDS_LOG_RETENTION_H
#define ALTAR_BACKENDS_LOG_RETENTION_H

#include "altar/backend.h"
#include "altar/error.h"
#include "altar/strmap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALTAR_LOGS_KEEP_DEFAULT (1ull << 30) /* backend.logs_keep: 1 GiB */
#define ALTAR_LOGS_KEEP_MIN (1ull << 20)
#define ALTAR_LOGS_KEEP_MAX (1ull << 50)
#define ALTAR_LOGS_KEEP_COUNT_DEFAULT 10000 /* backend.logs_keep_count */
#define ALTAR_LOGS_KEEP_COUNT_MAX 1000000   /* the index then takes ~50 MB */
#define ALTAR_LOGS_KEEP_DAYS_DEFAULT 14     /* backend.logs_keep_days; 0: no age bound */
#define ALTAR_LOGS_KEEP_DAYS_MAX 36500
#define ALTAR_LOGS_KEEP_S_MAX (36500L * 86400) /* backend.logs_keep_s: the age in seconds, for tests and soaks */
/* How often poll looks at the index's old end for output past its age. */
#define ALTAR_LOGS_PRUNE_INTERVAL_S 60.0
/* How often the directory is read again whole (what another worker on the
 * same data root kept, what the index lost track of). */
#define ALTAR_LOGS_RESCAN_INTERVAL_S 3600.0
/* Task directories taken in by one scan; a scan that stops there is
 * followed by another at the next prune interval. */
#define ALTAR_LOGS_SCAN_MAX_DIRS 100000

typedef struct altar_logs_index altar_logs_index_t;

typedef struct altar_log_retention {
  uint64_t keep_bytes;       /* bound on the allocated bytes of what is kept */
  size_t keep_count;         /* bound on the task directories kept */
  double max_age_s;          /* 0: no age bound */
  double last_prune;         /* monotonic seconds of the last prune; < 0: never */
  double last_scan;          /* monotonic seconds of the last scan; < 0: never (due) */
  altar_logs_index_t *index; /* NULL until the first scan */
} altar_log_retention_t;

/* What one scan, keep or prune found and did. */
typedef struct altar_logs_prune_facts {
  size_t dirs_seen;                   /* directories in the index after it (kept) */
  size_t dirs_scanned;                /* directories a scan read (0: no scan) */
  size_t dirs_measured;               /* directories stat'ed: scanned, kept or looked at before removal */
  size_t dirs_removed, dirs_running;  /* running: left, whatever their age or size */
  size_t dirs_changed;                /* written again since indexed (a rerun): left for its own entry */
  uint64_t bytes_seen, bytes_removed; /* allocated bytes */
  size_t removed_for_age, removed_for_count, removed_for_size;
} altar_logs_prune_facts_t;

/* Reads backend.logs_keep (bytes, or a number with K, M, G, KiB, MiB, GiB;
 * ALTAR_LOGS_KEEP_MIN..ALTAR_LOGS_KEEP_MAX), backend.logs_keep_count
 * (1..ALTAR_LOGS_KEEP_COUNT_MAX) and backend.logs_keep_days
 * (0..ALTAR_LOGS_KEEP_DAYS_MAX), or backend.logs_keep_s (seconds,
 * 0..ALTAR_LOGS_KEEP_S_MAX, for tests and soaks; it wins) from cfg (NULL: defaults) into *pr, with
 * no index yet. False with err (ALTAR_ECONFIG) naming the key. */
bool altar__log_retention_parse(const altar_strmap_t *cfg, altar_log_retention_t *pr, altar_error_t *err);
/* Frees r's index (r's settings stay). */
void altar__log_retention_clear(altar_log_retention_t *r);

/* Whether a prune is due at monotonic time now (never run, or the interval
 * passed); when it is, records now as the last prune. */
bool altar__log_retention_due(altar_log_retention_t *r, double now);

/* Whether the task of key still runs (its output must stay). */
typedef bool (*altar_logs_running_fn)(const char *key, void *ctx);

/* Brings the index up to date and prunes by it: reads logs_dir whole when
 * no scan was made yet (r->last_scan < 0), or the last one is
 * ALTAR_LOGS_RESCAN_INTERVAL_S old at monotonic time mono, or it stopped at
 * ALTAR_LOGS_SCAN_MAX_DIRS; then removes from the old end what was last
 * written more than max_age_s before now (wall seconds), and the oldest
 * while more than keep_count directories or keep_bytes are kept. A
 * directory about to go is measured again first, and left when written
 * since it was indexed (a rerun of its key) or when running says its task
 * runs (running may be NULL: none runs). pfacts may be NULL. */
void altar__logs_prune(const char *logs_dir, altar_log_retention_t *r, double mono, double now,
                       altar_logs_running_fn running, void *ctx, altar_logs_prune_facts_t *pfacts);

/* The output of key's task (logs_dir/key) is final: indexes it as the
 * newest (an older entry of the key is dropped), then prunes the index's
 * old end as altar__logs_prune does, without a scan. */
void altar__logs_keep(const char *logs_dir, altar_log_retention_t *r, const char *key, double now,
                      altar_logs_running_fn running, void *ctx, altar_logs_prune_facts_t *pfacts);

/* What is kept and what the next prune removes, as the index knows it. */
typedef struct altar_logs_kept_facts {
  size_t dirs;            /* task directories kept */
  uint64_t bytes;         /* their allocated bytes, as measured when indexed */
  size_t prune_next_dirs; /* removed by a prune at the given time: past max_age_s, or beyond a bound */
  uint64_t prune_next_bytes;
} altar_logs_kept_facts_t;

/* The facts at wall time now, from the index alone (no file is read; zero
 * before the first scan). The walk goes from the old end only as far as a
 * prune would go, and its answer is kept until the index changes or the
 * next entry passes its age, so asking often costs a comparison. A prune
 * still measures each directory before removing it: one a running task
 * holds, or written again since it was indexed, is kept then. */
void altar__logs_kept_facts(altar_log_retention_t *r, double now, altar_logs_kept_facts_t *pf);

/* altar__logs_kept_facts at wall time now with r's bounds, as a backend's
 * kept_logs operation answers (altar/backend.h). */
void altar__log_retention_kept_logs(altar_log_retention_t *r, double now, altar_kept_logs_t *pkept);

/* Bytes the index takes (its arrays), for tests of its bound. */
size_t altar__logs_index_footprint(const altar_log_retention_t *r);

#endif
