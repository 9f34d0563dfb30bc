/* altar worker: consume jobs, drive a backend, emit status events. */
#include "cli.h"
#include "fleet_common.h"
#include "footprint_cli.h"
#include "metrics_cli.h"
#include "worker/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar worker [--config FILE] [options]\n\n"
          "Joins the workers' consumer group on the jobs topics of the pools its backend\n"
          "serves (CPU jobs on the jobs topic, pool P on <jobs>.P), runs each job on the\n"
          "configured backend and emits status events. A partition taken away in a\n"
          "rebalance is handed over: its running tasks finish here and their end is\n"
          "announced on the partition, where the new owner waits for it. SIGTERM or\n"
          "Ctrl-C leaves the group at once, lets running tasks finish for --drain\n"
          "seconds and releases what is left; a second signal stops at once.\n\n"
          "options:\n%s"
          "  --id ID              worker id in status events (default host:pid)\n"
          "  --group NAME         consumer group (default %s)\n"
          "  --poll-ms N          backend poll interval (default 200)\n"
          "  --commit-ms N        periodic offset commit interval (default 1000; revokes and\n"
          "                       stops commit at once)\n"
          "  --drain S            drain time in seconds (default 30)\n"
          "  --lease S            renewal interval of the lease on handed-over tasks (default 3)\n"
          "  --lease-timeout S    a handed-over task's holder counts as dead after S seconds\n"
          "                       without news, and the task starts here (default max(3 x lease, 10))\n"
          "  --forward-ms N       a job waiting here for a slot N ms while a peer of its pool has a\n"
          "                       free one is forwarded to that peer (default 200; 0 = never)\n"
          "  --max-jobs N         stop after N jobs finished\n"
          "  --exit-when-idle     stop once the jobs topic is drained\n"
          "  --metrics HOST:PORT  serve Prometheus metrics on GET /metrics (metrics.worker_addr;\n"
          "                       HOST:LOW-HIGH takes the first free port, for several workers\n"
          "                       on one host; metrics.addr is the reconciler's)\n"
          "  --pools P,Q          pools the process backend advertises (backend.pools;\n"
          "                       'normal' is the CPU pool, the default)\n"
          "  -q, --quiet          no progress lines (on a terminal: one line per task start and end)\n"
          "  --task-lines         those task lines also when stderr is not a terminal\n",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_BACKEND | ALTAR_CLI_FLAGS_PARTITIONS), ALTAR_WORKER_GROUP);
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static int parse_int(const char *flag, const char *s, long long min, long long max, long long *pv) {
  return altar_cli_parse_int("worker", flag, s, min, max, pv);
}

int altar_cmd_worker(int argc, char **argv) {
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin_on_log(argc, argv, usage, &cfg, &code);
  if (argc < 0) return code;
  static volatile sig_atomic_t stop;
  altar_worker_opts_t o = {.drain_ms = -1, .stop = &stop};
  long long v;
  /* metrics.worker_addr, not metrics.addr (the reconciler's): a worker and a
   * reconciler started from one file must not both bind one address. */
  const char *metrics_addr = cfg.metrics_worker_addr;
  bool task_lines = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--id") && has) o.worker_id = argv[++i];
    else if (!strcmp(a, "--group") && has) o.group = argv[++i];
    else if (!strcmp(a, "--metrics") && has) metrics_addr = argv[++i];
    else if (!strcmp(a, "--pools") && has) {
      altar_error_t pe = {0};
      if (altar_config_set(&cfg, "backend.pools", argv[++i], &pe)) {
        fprintf(stderr, "altar worker: --pools: %s\n", pe.msg);
        goto bad;
      }
    } else if (!strcmp(a, "--poll-ms") && has) {
      if (parse_int(a, argv[++i], 1, 600000, &v)) goto bad;
      o.poll_interval_ms = (int)v;
    } else if (!strcmp(a, "--commit-ms") && has) {
      if (parse_int(a, argv[++i], 1, 600000, &v)) goto bad;
      o.commit_interval_ms = (int)v;
    } else if (!strcmp(a, "--drain") && has) {
      if (parse_int(a, argv[++i], 0, 86400, &v)) goto bad;
      o.drain_ms = (int)(v * 1000);
    } else if (!strcmp(a, "--lease") && has) {
      if (parse_int(a, argv[++i], 1, 3600, &v)) goto bad;
      o.lease_interval_ms = (int)(v * 1000);
    } else if (!strcmp(a, "--lease-timeout") && has) {
      if (parse_int(a, argv[++i], 1, 86400, &v)) goto bad;
      o.lease_timeout_ms = (int)(v * 1000);
    } else if (!strcmp(a, "--forward-ms") && has) {
      if (parse_int(a, argv[++i], 0, 3600000, &v)) goto bad;
      o.forward_after_ms = v ? (int)v : -1;
    } else if (!strcmp(a, "--max-jobs") && has) {
      if (parse_int(a, argv[++i], 1, INT64_MAX, &v)) goto bad;
      o.max_jobs = v;
    } else if (!strcmp(a, "--exit-when-idle")) o.exit_when_idle = true;
    else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) o.quiet = true;
    else if (!strcmp(a, "--task-lines")) task_lines = true;
    else {
      fprintf(stderr, "altar worker: unknown argument '%s'\n", a);
      goto bad;
    }
  }
  altar_error_t err = {0};
  long long slots;
  if (altar_config_backend_int(&cfg, "slots", 4, 1, 100000, &slots, &err)) {
    fprintf(stderr, "altar worker: %s\n", err.msg);
    goto bad;
  }
  o.slots = slots;
  altar_group_specs_t groups;
  if (altar_cli_load_groups(&cfg, &groups)) goto bad;
  altar_metrics_t *metrics = NULL;
  altar_metrics_server_t *msrv = NULL;
  if (altar_cli_metrics_start_as("altar worker", "metrics.worker_addr",
                                 metrics_addr && *metrics_addr ? metrics_addr : NULL, o.quiet, &metrics, &msrv)) {
    altar_group_specs_clear(&groups);
    goto bad;
  }
  o.metrics = metrics;
  altar_footprint_sampler_t *fp = NULL;
  altar_transport_t *t = altar_cli_open_transport(&cfg, NULL);
  altar_backend_t *be = t ? altar_cli_open_backend(&cfg) : NULL;
  /* A second handle reads the fleet topic (peers' free slots): subscribe
   * and assign are exclusive on one handle. Without it, no forwarding. */
  altar_transport_t *ft = be && o.forward_after_ms >= 0 ? altar_cli_open_transport(&cfg, NULL) : NULL;
  int rc = 1;
  if (t && be && !altar_cli_ensure_topics(t, &cfg)) {
    o.transport = t;
    o.fleet_transport = ft;
    o.backend = be;
    o.groups = &groups;
    o.topics = &cfg.topics;
    o.topic_partitions = cfg.topic_partitions;
    altar_cli_install_stop_signals(&stop);
    /* A person watching: one line per task start and end (-q silences). */
    o.task_lines = !o.quiet && (task_lines || isatty(STDERR_FILENO));
    /* The summary names the worker, as its status events do. */
    char default_id[320];
    if (!o.worker_id) {
      char host[256] = "localhost";
      gethostname(host, sizeof host - 1);
      host[sizeof host - 1] = 0;
      snprintf(default_id, sizeof default_id, "%s:%ld", host, (long)getpid());
      o.worker_id = default_id;
    }
    altar_worker_stats_t st = {0};
    /* Once the data root and the log exist, so the first sample sees them. */
    fp = altar_cli_footprint_start("altar worker", metrics, &cfg, true, t);
    rc = altar__worker_run(&o, &st, &err) ? 1 : 0;
    if (rc) fprintf(stderr, "altar worker: %s\n", err.msg);
    if (!o.quiet)
      fprintf(stderr,
              "altar worker %s: consumed %llu, submitted %llu, succeeded %llu, failed %llu, released %llu, "
              "skipped %llu, dead-lettered %llu; handed over %llu, re-attached %llu, waited %llu, "
              "done elsewhere %llu, taken over %llu, forwarded %llu, forwarded here %llu\n",
              o.worker_id, (unsigned long long)st.consumed, (unsigned long long)st.submitted,
              (unsigned long long)st.succeeded, (unsigned long long)st.failed, (unsigned long long)st.released,
              (unsigned long long)st.skipped, (unsigned long long)st.dead_lettered, (unsigned long long)st.held,
              (unsigned long long)st.reattached, (unsigned long long)st.waited, (unsigned long long)st.handed_done,
              (unsigned long long)st.taken_over, (unsigned long long)st.forwarded, (unsigned long long)st.forwarded_in);
  }
  altar_footprint_sampler_stop(fp);
  altar_cli_metrics_stop(metrics, msrv);
  altar_backend_close(be);
  altar_transport_close(ft);
  altar_transport_close(t);
  altar_group_specs_clear(&groups);
  altar_config_clear(&cfg);
  return rc;
bad:
  altar_config_clear(&cfg);
  return 2;
}
