/* altar cancel JOB_ID [--group KEY]: a "cancel" control message on every
 * partition a shard of the job can be on (the jobs topic and each pool's
 * `<jobs>.<pool>` topic), where the workers read it in order with the jobs,
 * and on every partition of the status topic, where the reconciler reads it
 * in order with each group's events (schemas/README.md, "control"). */
#include "altar/backend.h"
#include "altar/codec.h"
#include "altar/pools.h"
#include "altar/registry.h"
#include "cli.h"
#include "fleet_common.h"
#include "job_known.h"
#include "producer/job_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Exit code of a cancel of a job id nothing knows (as `altar status`'s). */
#define CANCEL_EXIT_UNKNOWN 4

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar cancel [--config FILE] [options] JOB_ID [--group KEY] [--force]\n\n"
          "Stops a job: workers cancel its running and queued tasks through their\n"
          "backend (each ends failed, reason cancelled) and refuse its shards from\n"
          "then on; the reconciler settles its open groups as cancelled (an event\n"
          "\"cancelled\" on the dead topic) and refuses new shards of it, across\n"
          "restarts and rebuilds. With --group only that group of the job (its group\n"
          "key as `altar status` prints it after the kind, e.g. j-1:m2). Sending it\n"
          "again changes nothing. `submit --wait` on the job exits 4.\n"
          "A job id the fleet does not know (no record in the ledger, no job message\n"
          "on the jobs topics) is refused with exit 4 unless --force is given.\n\noptions:\n%s"
          "  --group KEY          cancel only this group of the job\n"
          "  --force              send the cancel even for a job id the fleet does not know\n"
          "                       (e.g. one whose messages are still on their way)\n"
          "\nexit status: 4 unknown job (without --force).\n",
          altar_cli_fleet_flags_help);
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

typedef struct acks {
  size_t ok, failed;
  char why[256];
} acks_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  acks_t *a = ctx;
  if (dr->err) {
    a->failed++;
    snprintf(a->why, sizeof a->why, "%s", dr->errstr ? dr->errstr : "delivery failed");
  } else {
    a->ok++;
  }
}

int altar_cmd_cancel(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin(argc, argv, usage, &cfg, &code);
  if (argc < 0) return code;
  const char *job = NULL, *group = NULL;
  bool force = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--force")) {
      force = true;
    } else if (!strcmp(argv[i], "--group")) {
      if (i + 1 >= argc || !*argv[i + 1]) {
        fprintf(stderr, "altar cancel: --group needs a group key\n");
        altar_config_clear(&cfg);
        return 2;
      }
      group = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "altar cancel: unknown option '%s'\n", argv[i]);
      altar_config_clear(&cfg);
      return 2;
    } else if (job) {
      fprintf(stderr, "altar cancel: one job id only (got '%s' and '%s')\n", job, argv[i]);
      altar_config_clear(&cfg);
      return 2;
    } else {
      job = argv[i];
    }
  }
  if (!job || !*job) {
    fprintf(stderr, "altar cancel: which job? (usage: altar cancel JOB_ID [--group KEY])\n");
    altar_config_clear(&cfg);
    return 2;
  }
  if (strlen(job) > ALTAR_CANCEL_JOB_ID_MAX || (group && strlen(group) > ALTAR_CANCEL_GROUP_KEY_MAX)) {
    fprintf(stderr, "altar cancel: job id (at most %d bytes) or group key (at most %d) too long\n",
            ALTAR_CANCEL_JOB_ID_MAX, ALTAR_CANCEL_GROUP_KEY_MAX);
    altar_config_clear(&cfg);
    return 2;
  }
  if ((code = altar_cli_require_existing_log(&cfg, "cancel"))) {
    altar_config_clear(&cfg);
    return code;
  }
  if (!force) {
    bool known = false;
    altar_error_t kerr = {0};
    if (altar_cli_job_known(&cfg, job, &known, &kerr)) {
      fprintf(stderr, "altar cancel: cannot tell whether job %s exists: %s (--force sends the cancel anyway)\n", job,
              kerr.msg);
      altar_config_clear(&cfg);
      return 1;
    }
    if (!known) {
      fprintf(stderr,
              "altar cancel: unknown job %s: no record of it in the ledger %s and no job message of it on %s "
              "(nothing was sent; --force sends the cancel anyway)\n",
              job, cfg.ledger_path, cfg.topics.jobs);
      altar_config_clear(&cfg);
      return CANCEL_EXIT_UNKNOWN;
    }
  }
  acks_t acks = {0};
  altar_transport_opts_t opts = {.on_delivery = on_delivery, .delivery_ctx = &acks};
  altar_transport_t *t = altar_cli_open_transport(&cfg, &opts);
  if (!t) {
    altar_config_clear(&cfg);
    return 2;
  }
  char who[300], host[128] = "localhost";
  gethostname(host, sizeof host - 1);
  snprintf(who, sizeof who, "altar-cancel@%s", host);
  altar_error_t err = {0};
  size_t topics = 0, sent = 0;
  int rc = altar__job_cancel_send(t, &cfg.topics, job, group, who, &sent, &topics, &err);
  altar_transport_close(t);
  /* Said before the cancel is relied on: what the fleet's backend cannot stop runs on. */
  const altar_backend_ops_t *ops = altar_registry_lookup(ALTAR_REGISTRY_BACKEND, cfg.backend_name);
  if (!rc && !acks.failed && ops && !(altar_backend_ops_caps(ops) & ALTAR_BACKEND_CAP_CANCEL))
    fprintf(stderr,
            "altar cancel: note: the %s backend cannot %s: running tasks of job %s are reported cancelled but run "
            "on (queued ones are refused)\n",
            cfg.backend_name, altar_backend_cap_name(ALTAR_BACKEND_CAP_CANCEL), job);
  altar_config_clear(&cfg);
  if (rc || acks.failed) {
    fprintf(stderr, "altar cancel: %s\n", rc ? err.msg : acks.why);
    return 1;
  }
  printf("cancel of job %s%s%s sent to %zu partition%s of %zu topic%s\n", job, group ? " group " : "",
         group ? group : "", sent, ALTAR_CLI_PLURAL(sent), topics, ALTAR_CLI_PLURAL(topics));
  return 0;
}
