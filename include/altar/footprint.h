/* altar — what a daemon costs the machine: its resident memory and the disk
 * its directories take, measured and (by a sampler thread) kept current in
 * Prometheus gauges, so an operator sees growth before it hurts. */
#ifndef ALTAR_FOOTPRINT_H
#define ALTAR_FOOTPRINT_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/metrics.h"
#include "altar/transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Resident set size of the calling process, bytes; 0 when it cannot be read. */
uint64_t altar_footprint_rss_bytes(void);

/* What a directory tree takes on disk. */
typedef struct altar_du {
  uint64_t bytes;   /* allocated (st_blocks * 512) of every entry, directories included */
  uint64_t entries; /* inodes seen: the directory itself and all below it */
  bool truncated;   /* the walk stopped at its bound: at least this much */
} altar_du_t;

/* Walks path (not following symlinks, not crossing into other file
 * systems), visiting at most max_entries entries. ALTAR_ENOTFOUND when path
 * does not exist; entries that vanish during the walk are skipped. Any
 * thread. */
int altar_footprint_du(const char *path, size_t max_entries, altar_du_t *pout, altar_error_t *err);

/* Default bound of a walk: a data root bounded by backend.logs_keep_count
 * (10,000 task directories) is far below it. */
#define ALTAR_FOOTPRINT_DU_MAX_ENTRIES 1000000
/* How often the sampler reads RSS and walks its directories. */
#define ALTAR_FOOTPRINT_RSS_INTERVAL_S 10.0
#define ALTAR_FOOTPRINT_DU_INTERVAL_S 60.0

/* A directory the sampler reports, under its name ("data_root", "ledger", "log"). */
typedef struct altar_footprint_dir {
  const char *name;
  const char *path;
} altar_footprint_dir_t;

typedef struct altar_footprint_sampler altar_footprint_sampler_t;

/* Registers altar_process_resident_memory_bytes, and per dir
 * altar_disk_usage_bytes{dir=NAME} and altar_disk_usage_entries{dir=NAME},
 * in reg, measures once, then keeps them current from a thread of its own
 * (RSS every ALTAR_FOOTPRINT_RSS_INTERVAL_S, directories every
 * ALTAR_FOOTPRINT_DU_INTERVAL_S). Names and paths are copied. NULL with err
 * set on failure. Stop with altar_footprint_sampler_stop before reg is freed. */
altar_footprint_sampler_t *altar_footprint_sampler_start(altar_metrics_t *reg, const altar_footprint_dir_t *dirs,
                                                         size_t n, altar_error_t *err);
/* Adds to s altar_log_retention_next_bytes and
 * altar_log_retention_next_segments: what t's next retention pass deletes
 * of the log it keeps (altar_transport_retention_due), measured now and
 * then with the directories, on the sampler's thread (it lists the log's
 * directories: never on a daemon's loop). t must outlive s. ALTAR_ENOTSUP,
 * no gauges, when t keeps no log of its own (kafka). Caller's thread. */
int altar_footprint_sampler_add_retention(altar_footprint_sampler_t *s, altar_transport_t *t, altar_error_t *err);
/* Stops the thread and frees the sampler. NULL is fine. */
void altar_footprint_sampler_stop(altar_footprint_sampler_t *s);

ALTAR_API_END

#endif
