/* Bounded retention of the task output a backend keeps under
 * <data_root>/logs/<task key>/ (process, docker): the oldest output of tasks
 * that no longer run is deleted once the whole exceeds a size, and any
 * output not written for longer than an age. Shared by the backends that
 * keep output; internal to backends/. */
#ifndef ALTAR_BACKENDS_LOG_RETENTION_H
#define ALTAR_BACKENDS_LOG_RETENTION_H

#include "altar/strmap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ALTAR_LOGS_KEEP_DEFAULT (1ull << 30) /* backend.logs_keep: 1 GiB */
#define ALTAR_LOGS_KEEP_MIN (1ull << 20)
#define ALTAR_LOGS_KEEP_MAX (1ull << 50)
#define ALTAR_LOGS_KEEP_DAYS_DEFAULT 14 /* backend.logs_keep_days; 0: no age bound */
#define ALTAR_LOGS_KEEP_DAYS_MAX 36500
/* How often a backend prunes at most: the walk stats every kept file. */
#define ALTAR_LOGS_PRUNE_INTERVAL_S 60.0
/* Task directories looked at in one prune; the rest wait for the next. */
#define ALTAR_LOGS_PRUNE_MAX_DIRS 100000

typedef struct altar_log_retention {
  uint64_t keep_bytes; /* total bound on what is kept */
  double max_age_s;    /* 0: no age bound */
  double last_prune;   /* monotonic seconds of the last prune; < 0: never */
} altar_log_retention_t;

/* What one prune found and did. */
typedef struct altar_logs_prune_facts {
  size_t dirs_seen, dirs_removed, dirs_running; /* running: kept whatever their age or size */
  uint64_t bytes_seen, bytes_removed;
  size_t removed_for_age, removed_for_size;
} altar_logs_prune_facts_t;

/* Reads backend.logs_keep (bytes, or a number with K, M, G, KiB, MiB, GiB;
 * ALTAR_LOGS_KEEP_MIN..ALTAR_LOGS_KEEP_MAX) and backend.logs_keep_days
 * (0..ALTAR_LOGS_KEEP_DAYS_MAX) from cfg (NULL: defaults) into *pr. False
 * with a message naming the key in errstr. */
bool altar__log_retention_parse(const altar_strmap_t *cfg, altar_log_retention_t *pr, char *errstr,
                                size_t errstr_size);

/* Whether a prune is due at monotonic time now (never run, or the interval
 * passed); when it is, records now as the last prune. */
bool altar__log_retention_due(altar_log_retention_t *r, double now);

/* Whether the task of key still runs (its output must stay). */
typedef bool (*altar_logs_running_fn)(const char *key, void *ctx);

/* Prunes logs_dir: directories named like task keys (64 hex characters;
 * anything else is left alone) whose task is not running are removed when
 * last written (the newest mtime of the directory and its files) more than
 * max_age_s before now (wall seconds), then oldest first while the total
 * size of all of them (running ones included) exceeds keep_bytes. running
 * is asked only of a directory about to be removed, and may be NULL (none
 * runs). pfacts (may be NULL) gets what was found and done. */
void altar__logs_prune(const char *logs_dir, const altar_log_retention_t *r, double now, altar_logs_running_fn running,
                       void *ctx, altar_logs_prune_facts_t *pfacts);

#endif
