/* Following a job: its shards' status events (status topic) and its
 * groups' events (ready and dead topics), until the whole job is done. */
#ifndef ALTAR_CLI_FOLLOW_H
#define ALTAR_CLI_FOLLOW_H

#include "altar/config.h"
#include "altar/groups.h"
#include "altar/spec.h"
#include "altar/codec.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One shard of the job, as its status events tell it. */
typedef struct follow_shard {
  char task_key[ALTAR_TASK_KEY_LEN + 1];
  char *group;   /* "kind\x1fgroup_key" */
  char *run;     /* "backend\x1fexternal_id" of its latest run, NULL before its first event */
  char *topic;   /* its pool's jobs topic */
  char *pool;    /* its pool name (ALTAR_POOL_CPU for CPU jobs) */
  int state;     /* -1: no event yet; else the altar_state_t of its latest event */
  bool released; /* latest event was "released": it waits to run again */
  char *reason;  /* failure reason when failed */
  char *why;     /* its detail in one line (altar_cli_failure_summary) when failed */
  double ts;     /* ts of its latest event */
  bool late;     /* terminal after its group settled, and not in the group's event */
} follow_shard_t;

/* The job: distinct groups (kind, group key) and its shards. */
typedef struct expect {
  char **keys; /* "kind\x1fgroup_key", sorted */
  size_t n;
  size_t shards_total;
  size_t shards_done, shards_failed, fired, dead;
  bool *done;
  double *settled_ts; /* group event ts per key */
  char ***members;    /* runs listed by each key's group event (sorted), NULL until settled */
  size_t *n_members;
  follow_shard_t *shards; /* sorted by task key */
  size_t n_shards;
  size_t cap_shards, cap_keys;
  int64_t *status_from; /* status topic offsets to read from (altar_cli_follow_mark), per partition */
  int32_t *status_parts;
  size_t n_status_parts;
  /* Set before following to keep each settling group event (decoded, in
   * arrival order): the next stage of a pipeline is made from them. */
  bool keep_events;
  altar_group_event_t *events;
  size_t n_events, cap_events;
  /* Heads of wide groups' events waiting for their pages: a group settles
   * once its whole member list is read (altar_group_event_take_page). */
  altar_group_event_t *pending;
  size_t n_pending, cap_pending;
  altar_arena_t scratch; /* one status event at a time, read in one pass */
} expect_t;

/* Called for each of the job's group events as it arrives (may be NULL). */
typedef void (*altar_cli_group_cb)(void *ctx, const char *event, const char *kind, const char *group_key,
                                   size_t n_shards, const char *event_id);

/* Notes where the status topic ends now, so following reads only what comes
 * after (call before publishing). Without it following reads from the
 * beginning. 0, or -1 after printing why. */
int altar_cli_follow_mark(altar_config_t *cfg, expect_t *x);
/* -1 (after printing why) when a kind has no group spec. Specs carry the
 * job id label already. Keeps what altar_cli_follow_mark noted. */
int altar_cli_expect_build(expect_t *x, const altar_group_specs_t *groups, const char *jobs_topic,
                           const altar_spec_t *specs, size_t n);
void altar_cli_expect_clear(expect_t *x);
/* Reads the job's status and group events until every group settled and
 * every shard is terminal: 0 all fired and nothing failed late, 1 a group
 * was dead-lettered or a shard failed after its group settled, 3 timed out,
 * 2 error. Says so when shards wait for a pool no worker serves. Shows a
 * progress bar on a terminal, plain lines otherwise. */
int altar_cli_follow(altar_config_t *cfg, const char *run_id, expect_t *x, long timeout_s, altar_cli_group_cb cb,
                     void *cb_ctx);

/* Building an expect_t shard by shard (altar status): add each, then seal
 * once (sorts, and sizes the per-group arrays). -1 when out of memory. */
int altar_cli_expect_add_shard(expect_t *x, const char *task_key, const char *kind, const char *group_key,
                               const char *topic, const char *pool);
int altar_cli_expect_seal(expect_t *x);
/* The shard with task_key (x sealed or built: its shards sorted), or NULL. */
follow_shard_t *altar_cli_expect_find(const expect_t *x, const char *task_key);
/* Reads the status, ready and dead topics once, up to their ends as of now,
 * into x (shards' latest events, groups settled, late shards). */
int altar_cli_job_snapshot(altar_config_t *cfg, const char *run_id, expect_t *x);

#endif
