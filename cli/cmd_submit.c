/* altar submit: validate specs, publish them as one job, optionally follow it. */
#include "altar/codec.h"
#include "altar/file_read.h"
#include "cli.h"
#include "fleet_common.h"
#include "follow.h"
#include "follow_stages.h"
#include "producer/job_queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUBMIT_INPUT_MAX (256u << 20)

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar submit [--config FILE] [options] [SPECS.json|SPECS.jsonl|-]\n\n"
          "Reads task specs (one JSON object, a JSON array, or JSON Lines; default\n"
          "stdin), validates every one before anything is published, stamps a job id\n"
          "label, publishes them to the jobs topic keyed by task identity, waits for\n"
          "the log to acknowledge them and prints the job id (the run handle id).\n\n"
          "options:\n%s"
          "  --kind KIND          require every spec to be of this kind\n"
          "  --wait               follow the job until every shard is terminal and every\n"
          "                       group settled: exit 0 when all fired, 1 when one was\n"
          "                       dead-lettered or a shard failed after its group settled,\n"
          "                       4 when the job was cancelled (altar cancel);\n"
          "                       says when shards wait for a pool no worker serves;\n"
          "                       a pipeline (groups with then:) is followed stage by\n"
          "                       stage to its last, one summary line per stage\n"
          "  --timeout S          give up waiting after S seconds (exit 3)\n",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_PARTITIONS));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

int altar_cmd_submit(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin_on_log(argc, argv, usage, &cfg, &code);
  if (argc < 0) return code;
  const char *kind = NULL, *file = "-";
  bool wait = false;
  long timeout_s = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kind") && i + 1 < argc) kind = argv[++i];
    else if (!strcmp(argv[i], "--wait")) wait = true;
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
      char *end;
      timeout_s = strtol(argv[++i], &end, 10);
      if (*end || timeout_s <= 0) {
        fprintf(stderr, "altar submit: --timeout: expected a positive number of seconds\n");
        altar_config_clear(&cfg);
        return 2;
      }
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "altar submit: unknown option '%s'\n", argv[i]);
      altar_config_clear(&cfg);
      return 2;
    } else {
      file = argv[i];
    }
  }
  size_t len = 0;
  altar_error_t err = {0};
  char *text = altar_file_read(file, strcmp(file, "-") ? file : "stdin", SUBMIT_INPUT_MAX, &len, &err);
  if (!text) {
    fprintf(stderr, "altar submit: %s\n", err.msg);
    altar_config_clear(&cfg);
    return 2;
  }
  altar_spec_t *specs = NULL;
  size_t n = 0;
  int rc = altar__specs_parse(text, len, strcmp(file, "-") ? file : "stdin", &specs, &n, &err);
  free(text);
  if (rc) {
    fprintf(stderr, "altar submit: %s (nothing was published)\n", err.msg);
    altar_config_clear(&cfg);
    return 2;
  }
  altar_group_specs_t groups = {0};
  expect_t x = {0};
  int out = 0;
  /* The reconciler's own loader and validation: a typo in groups: fails here too. */
  if (altar_cli_load_groups(&cfg, &groups)) {
    out = 2;
    goto done;
  }
  if (!cfg.path && !groups.n)
    fprintf(stderr, "altar submit: no configuration file (--config FILE or ./altar.yaml), so no kind has a group\n");
  altar_transport_t *t = altar_cli_open_transport(&cfg, NULL);
  if (!t || altar_cli_ensure_topics(t, &cfg)) {
    altar_transport_close(t);
    out = 1;
    goto done;
  }
  if (wait && altar_cli_follow_mark(&cfg, &x)) {
    altar_transport_close(t);
    out = 1;
    goto done;
  }
  altar_job_queue_t q = {.transport = t, .topics = &cfg.topics, .partitions = cfg.topic_partitions, .groups = &groups};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  rc = altar__job_queue_submit(&q, kind, specs, n, run_id, &err);
  altar_transport_close(t);
  if (rc) {
    fprintf(stderr, "altar submit: %s\n", err.msg);
    out = rc == ALTAR_EINVAL ? 2 : 1;
    goto done;
  }
  printf("%s\n", run_id);
  fflush(stdout);
  fprintf(stderr, "altar submit: %zu task%s published as job %s\n", n, ALTAR_CLI_PLURAL(n), run_id);
  if (wait) {
    /* Built only now: group keys include the job id label the queue just stamped. */
    if (altar_cli_expect_build(&x, &groups, cfg.topics.jobs, specs, n)) {
      out = 2;
      goto done;
    }
    out = altar_cli_follow_stages(&cfg, &groups, run_id, &x, timeout_s);
  }
done:
  altar_cli_expect_clear(&x);
  altar_group_specs_clear(&groups);
  for (size_t i = 0; i < n; i++) altar_spec_clear(&specs[i]);
  free(specs);
  altar_config_clear(&cfg);
  return out;
}
