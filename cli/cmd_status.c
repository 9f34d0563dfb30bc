/* altar status: where a job stands — shards by state from the ledger and its
 * group events from the ready and dead topics. */
#include "altar/codec.h"
#include "altar/ledger.h"
#include "cli.h"
#include "dashboard_cli.h"
#include "fleet_common.h"
#include "producer/job_queue.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar status [--config FILE] [options] JOB_ID [--json] [--outputs]\n\n"
          "Shows a job's shards by state (read from the ledger, read-only) and its\n"
          "group events so far (read from the ready and dead topics). --outputs lists\n"
          "each fired group's output URIs instead.\n\noptions:\n%s",
          altar_cli_fleet_flags_help);
}

typedef struct tally {
  const char *job;
  uint64_t by_state[4];
  uint64_t consumed, total;
} tally_t;

static int visit(void *ctx, const altar_ledger_entry_t *e) {
  tally_t *t = ctx;
  const char *jid = altar_strmap_get(&e->rec.handle.labels, ALTAR_JOB_ID_LABEL);
  if (!jid || strcmp(jid, t->job)) return 0;
  t->total++;
  if (e->rec.consumed) t->consumed++;
  if ((unsigned)e->rec.state < 4) t->by_state[e->rec.state]++;
  return 0;
}

static int count_groups(altar_config_t *cfg, const char *topic, const char *job, uint64_t *pgroups,
                        uint64_t *pshards) {
  *pgroups = *pshards = 0;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  altar_topic_list_t *tl = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, topic, 10000, &tl, &err);
  if (rc == ALTAR_ENOTFOUND) {
    altar_transport_close(t);
    return 0;
  }
  size_t np = rc ? 0 : tl->topics[0].n_partitions;
  altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
  int64_t *ends = calloc(np ? np : 1, sizeof *ends);
  size_t left = 0;
  for (size_t i = 0; tps && ends && i < np; i++) {
    tps[i] = (altar_tp_t){topic, tl->topics[0].partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    ends[i] = tl->topics[0].partitions[i].end;
    left += ends[i] > tl->topics[0].partitions[i].beginning;
  }
  if (left && altar_transport_assign(t, tps, np, &err)) left = 0, rc = -1;
  while (left) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 1000, &m, &err) || !m) continue;
    altar_group_event_t g = {0};
    altar_error_t de = {0};
    if (m->value && !altar_decode_group(m->value, m->value_len, &g, &de) && g.n_shards) {
      const char *jid = altar_strmap_get(&g.shards[0].labels, ALTAR_JOB_ID_LABEL);
      if (jid && !strcmp(jid, job)) {
        (*pgroups)++;
        *pshards += g.n_shards;
      }
    }
    altar_group_event_clear(&g);
    for (size_t i = 0; i < np; i++)
      if (tps[i].partition == m->partition && m->offset + 1 >= ends[i]) left--;
    altar_msg_free(m);
  }
  free(tps);
  free(ends);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc ? -1 : 0;
}

int altar_cmd_status(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  altar_config_t cfg;
  argc = altar_cli_fleet_config(argc, argv, &cfg);
  const char *job = NULL;
  bool json = false, outputs = false;
  for (int i = 1; argc > 0 && i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--outputs")) outputs = true;
    else if (argv[i][0] != '-' && !job) job = argv[i];
    else {
      fprintf(stderr, "altar status: unexpected argument '%s'\n", argv[i]);
      argc = -1;
    }
  }
  if (argc < 0 || !job) {
    if (argc >= 0) usage(stderr);
    altar_config_clear(&cfg);
    return 2;
  }
  if (outputs) {
    int orc = altar_cli_print_outputs(&cfg, job, json);
    altar_config_clear(&cfg);
    return orc;
  }
  tally_t t = {.job = job};
  altar_error_t err = {0};
  altar_ledger_rocksdb_opts_t ro = {.read_only = true, .no_create = true};
  altar_ledger_t *l = altar_ledger_rocksdb_open(cfg.ledger_path, &ro, &err);
  bool have_ledger = l && altar_ledger_foreach(l, visit, &t, &err) == ALTAR_OK;
  altar_ledger_close(l);
  uint64_t fired = 0, fired_shards = 0, dead = 0, dead_shards = 0;
  int rc = count_groups(&cfg, cfg.topics.ready, job, &fired, &fired_shards) |
           count_groups(&cfg, cfg.topics.dead, job, &dead, &dead_shards);
  if (json) {
    json_t *o = json_pack("{s:s, s:b, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}}", "job_id", job, "ledger",
                          have_ledger, "shards", "total", (json_int_t)t.total, "pending", (json_int_t)t.by_state[0],
                          "running", (json_int_t)t.by_state[1], "succeeded", (json_int_t)t.by_state[2], "failed",
                          (json_int_t)t.by_state[3], "consumed", (json_int_t)t.consumed, "groups", "fired",
                          (json_int_t)fired, "dead_lettered", (json_int_t)dead);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
  } else {
    printf("job %s\n", job);
    if (have_ledger)
      printf("  shards: %llu recorded; %llu pending, %llu running, %llu succeeded, %llu failed; %llu consumed\n",
             (unsigned long long)t.total, (unsigned long long)t.by_state[0], (unsigned long long)t.by_state[1],
             (unsigned long long)t.by_state[2], (unsigned long long)t.by_state[3], (unsigned long long)t.consumed);
    else
      printf("  shards: ledger %s not readable here (%s)\n", cfg.ledger_path, err.msg);
    printf("  groups: %llu fired (%llu shards), %llu dead-lettered (%llu shards)\n", (unsigned long long)fired,
           (unsigned long long)fired_shards, (unsigned long long)dead, (unsigned long long)dead_shards);
  }
  altar_config_clear(&cfg);
  return rc ? 1 : 0;
}
