/* altar — the fleet's settings: one YAML file (altar.yaml) plus flag overrides.
 *
 *   transport: {name: local, dir: ./var/log, fsync: group, kafka: {<librdkafka props>}}
 *   topics:    {jobs: altar.jobs, status: altar.status, ready: altar.ready, dead: altar.dead, dlq: altar.dlq,
 *               partitions: 32, fleet: altar.fleet}
 *   backend:   {name: process, data_root: ./var/data, slots: 4, …}
 *   ledger:    {path: ./var/ledger}
 *   groups:    … (read by reconciler/group_config from the same file)
 *   plugins:   [./plugins/mine.so, …]  (plug-in files, relative to this file's directory)
 *   storage:   {python: {python: /venv/bin/python, schemes: {mem: memstore, …}, …}}
 *              (Python storage adapters by URI scheme: altar_storage_python_configure)
 *
 * Unknown top-level keys are an error naming the file and line, so a typo
 * never silently falls back to a default. */
#ifndef ALTAR_CONFIG_H
#define ALTAR_CONFIG_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/strmap.h"

#include <stdint.h>

typedef struct altar_topics {
  char *jobs, *status, *ready, *dead, *dlq;
  char *fleet; /* worker heartbeats and goodbyes (JSON, keyed by worker id) */
} altar_topics_t;

typedef struct altar_config {
  char *path;                     /* the file read, NULL when none */
  char *transport_name;           /* "local" by default */
  altar_strmap_t transport_props; /* as given: local: dir, fsync, …; kafka: every librdkafka property */
  altar_topics_t topics;
  char *backend_name;               /* "process" by default */
  altar_strmap_t backend_props;     /* as given: data_root, slots, … (strings); no defaults added */
  char *ledger_path;                /* "./var/ledger" by default */
  char *ledger_checkpoints;         /* ledger.checkpoints: URI of the ledger's checkpoints, NULL = none */
  int ledger_checkpoint_interval_s; /* ledger.checkpoint_interval_s: 60 by default */
  int ledger_consumed_keep_days;    /* ledger.consumed_keep_days: consumed records older go (0: kept forever) */
  long long ledger_consumed_keep_s; /* ledger.consumed_keep_s: the same in seconds, for tests and soaks; -1 = unset */
  size_t ledger_settled_cache_entries; /* ledger.settled_cache_entries: settled entries kept in memory */
  long long ledger_settled_horizon_s;  /* ledger.settled_horizon_s: for tests and soaks; 0 = 7 days */
  bool ledger_standby;                 /* ledger.standby: keep a checkpoint warm, take over when the owner is gone */
  int ledger_standby_poll_ms;          /* ledger.standby_poll_ms: 500 by default */
  int64_t ledger_standby_caught_up_events; /* ledger.standby_caught_up_events: caught up within this many status
                                              events of the topic's end (1000 by default) */
  int ledger_checkpoints_keep; /* ledger.checkpoints_keep: checkpoints kept in storage, older ones deleted */
  char *metrics_addr;          /* metrics.addr: the reconciler's "host:port" (metrics, dashboard), NULL = off */
  char *metrics_worker_addr;   /* metrics.worker_addr: a worker's, "host:port" or "host:low-high", NULL = off */
  int topic_partitions;        /* topics.partitions: partitions of the topics the fleet creates */
  /* How long the topics the fleet creates keep records (Kafka's retention.ms;
   * -1 = forever): topics.retention_ms for jobs, ready, dead, dlq and fleet
   * (7 days by default), topics.status_retention_ms for the status topic
   * (forever by default: without ledger checkpoints a reconciler taking a
   * partition over replays it whole; with them, topics.retention_ms; read
   * it through altar_config_status_retention_ms). */
  int64_t topics_retention_ms, status_retention_ms;
  bool status_retention_set; /* topics.status_retention_ms was given (else see altar_config_status_retention_ms) */
  /* Lines of path that set transport.name and backend.name (0: not from the
   * file), so a caller that checks the names against the registries once
   * every plug-in is loaded can say FILE:LINE. */
  size_t transport_name_line, backend_name_line;
  /* plugins: the plug-in files to load (altar/plugin.h), each resolved
   * against the config file's directory, with its line in that file. */
  char **plugins;
  size_t *plugin_lines;
  size_t n_plugins;
  /* storage.python, checked, as JSON text for altar_storage_python_configure
   * (each scheme with its line in path); NULL when the file has none. */
  char *storage_python;
} altar_config_t;

/* Entries of plugins: at most. */
#define ALTAR_CONFIG_MAX_PLUGINS 64

/* Default of topics.partitions: enough for dozens of workers to share the
 * jobs topic (a partition is the unit of work a worker owns). */
#define ALTAR_DEFAULT_TOPIC_PARTITIONS 32
#define ALTAR_MAX_TOPIC_PARTITIONS 10000
/* Default of topics.retention_ms: a week, Kafka's own default. */
#define ALTAR_DEFAULT_TOPIC_RETENTION_MS 604800000LL

/* Default of ledger.consumed_keep_days: twice the horizon over which the
 * reconciler recognises late reruns of a settled group (7 days), so a
 * consumed record outlives every event that can still be about it. */
#define ALTAR_DEFAULT_CONSUMED_KEEP_DAYS 14
#define ALTAR_MAX_CONSUMED_KEEP_DAYS 36500
#define ALTAR_MAX_CONSUMED_KEEP_S (36500LL * 86400)
/* ledger.settled_horizon_s: how long (event time) a settled group's reruns
 * are recognised, its entries dropped at twice that; unset, 7 days. For
 * tests and soaks that must see those entries go within minutes. */
#define ALTAR_MAX_SETTLED_HORIZON_S (36500LL * 86400)

/* Default of ledger.settled_cache_entries: how many settled entries (a
 * shard's task key, or a group) the reconciler keeps in memory; the rest
 * are read from the ledger when an event asks. About 200 bytes each. */
#define ALTAR_DEFAULT_SETTLED_CACHE_ENTRIES 100000
#define ALTAR_MAX_SETTLED_CACHE_ENTRIES 100000000
/* ledger.checkpoints_keep: the newest checkpoints kept in storage (per set
 * of status partitions); older ones, and table files no kept one lists, are
 * deleted after each new checkpoint. */
#define ALTAR_DEFAULT_CHECKPOINTS_KEEP 3
#define ALTAR_MAX_CHECKPOINTS_KEEP 10000

/* Default of ledger.standby_poll_ms: how often a standby reconciler looks at
 * its group (is the owner alive?) and for a newer checkpoint. */
#define ALTAR_DEFAULT_STANDBY_POLL_MS 500
/* Default of ledger.standby_caught_up_events: a hot standby whose copy is
 * within this many status events of the topic's end is caught up. */
#define ALTAR_DEFAULT_STANDBY_CAUGHT_UP_EVENTS 1000

#define ALTAR_DEFAULT_CONFIG_FILE "altar.yaml"

/* Fills *cfg with defaults, then reads path (when path is NULL, reads
 * ./altar.yaml if it exists). Caller clears with altar_config_clear, also on
 * failure. Errors name "FILE:LINE: key". */
int altar_config_load(const char *path, altar_config_t *cfg, altar_error_t *err);
/* Overrides one key, as a flag does: "transport.name", "transport.dir",
 * "transport.kafka.<prop>", "topics.jobs", "topics.partitions", "backend.name", "backend.<prop>",
 * "ledger.path", "ledger.checkpoints", "ledger.checkpoint_interval_s", "ledger.consumed_keep_days",
 * "ledger.consumed_keep_s", "ledger.settled_cache_entries", "ledger.settled_horizon_s", "ledger.checkpoints_keep", "metrics.addr",
 * "metrics.worker_addr".
 * ALTAR_EINVAL for an unknown key. */
int altar_config_set(altar_config_t *cfg, const char *key, const char *value, altar_error_t *err);
void altar_config_clear(altar_config_t *cfg);
/* The status topic's lifetime for topics the fleet creates: as set, else
 * topics.retention_ms when ledger.checkpoints is set (a reconciler then
 * recovers from a checkpoint and the events after it), else -1 (forever:
 * without checkpoints a takeover or rebuild replays it whole). */
int64_t altar_config_status_retention_ms(const altar_config_t *cfg);
/* How long consumed records are kept, in seconds (0: forever):
 * ledger.consumed_keep_s when set (for tests and soaks that need minutes),
 * else ledger.consumed_keep_days. */
double altar_config_consumed_keep_s(const altar_config_t *cfg);

/* Integer property of the backend (e.g. "slots"), with a default when absent;
 * ALTAR_EINVAL naming the key when present but not an integer in [min, max]. */
int altar_config_backend_int(const altar_config_t *cfg, const char *key, long long def, long long min, long long max,
                             long long *pval, altar_error_t *err);

ALTAR_API_END

#endif
