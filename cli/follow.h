/* Following a job's group events on the ready and dead topics. */
#ifndef ALTAR_CLI_FOLLOW_H
#define ALTAR_CLI_FOLLOW_H

#include "altar/config.h"
#include "altar/groups.h"
#include "altar/spec.h"

#include <stdbool.h>
#include <stddef.h>

/* The groups a job will produce: distinct (kind, group key). */
typedef struct expect {
  char **keys; /* "kind\x1fgroup_key" */
  size_t n;
  size_t shards_total;
  size_t shards_done, shards_failed, fired, dead;
  bool *done;
} expect_t;

/* Called for each of the job's group events as it arrives (may be NULL). */
typedef void (*altar_cli_group_cb)(void *ctx, const char *event, const char *kind, const char *group_key,
                                   size_t n_shards, const char *event_id);

/* -1 (after printing why) when a kind has no group spec. */
int altar_cli_expect_build(expect_t *x, const altar_group_specs_t *groups, const altar_spec_t *specs, size_t n);
void altar_cli_expect_clear(expect_t *x);
/* Reads the ready and dead topics from the beginning until every expected
 * group settled: 0 all fired, 1 one was dead-lettered, 3 timed out, 2 error.
 * Shows a progress bar on a terminal, plain lines otherwise. */
int altar_cli_follow(altar_config_t *cfg, const char *run_id, expect_t *x, long timeout_s, altar_cli_group_cb cb,
                     void *cb_ctx);

#endif
