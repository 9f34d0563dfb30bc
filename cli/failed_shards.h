/* A job's failed shards as the ledger has them (reason, detail), for
 * `altar status` and `altar logs JOB_ID --failed`. */
#ifndef ALTAR_CLI_FAILED_SHARDS_H
#define ALTAR_CLI_FAILED_SHARDS_H

#include "altar/ledger.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct failed_shard {
  char *task_key, *reason, *detail; /* detail may be NULL */
} failed_shard_t;

typedef struct failed_shards {
  failed_shard_t *v;
  size_t n, cap;
  bool oom;
} failed_shards_t;

/* Adds e when it is a failed shard (a replaced run, superseded or released,
 * is not: another record is that shard's). */
void altar_cli_failed_add(failed_shards_t *fs, const altar_ledger_entry_t *e);
/* One line of a failure's detail for a person: its first line, then " | "
 * and the last line of its stderr section when it has one (bounded). */
void altar_cli_failure_summary(const char *detail, char *buf, size_t size);
/* Prints "  failed: KEY reason: first line of detail" lines (at most max,
 * then how many more). */
void altar_cli_failed_print(const failed_shards_t *fs, size_t max);
/* [{task_key, reason, detail}] (new reference). */
json_t *altar_cli_failed_json(const failed_shards_t *fs);
void altar_cli_failed_clear(failed_shards_t *fs);

#endif
