/* altar reconciler: fold status events into the ledger, publish groups; --rebuild replays. */
#include "cli.h"
#include "fleet_common.h"
#include "dashboard_cli.h"
#include "footprint_cli.h"
#include "metrics_cli.h"
#include "reconciler/checkpoint.h"
#include "reconciler/daemon.h"
#include "reconciler/history.h"
#include "reconciler/outbox.h"
#include "reconciler/retry_backoff.h"
#include "reconciler/published_seen.h"
#include "reconciler/settled.h"
#include "reconciler/standby.h"
#include "altar/fleet.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar reconciler [--config FILE] [options]\n"
          "       altar reconciler --rebuild [--config FILE] [options]\n\n"
          "Consumes the status topic, applies events to the RocksDB ledger in atomic\n"
          "batches and publishes group events to the ready and dead topics.\n"
          "--rebuild builds a fresh ledger from the beginning of the status topic (or,\n"
          "with ledger.checkpoints, from the newest checkpoint and the status events\n"
          "after it), publishes the group events the replaced ledger had not decided\n"
          "(never guessed from the ready/dead topics, whose records expire), swaps\n"
          "it in, prints its checksum (and the replaced ledger's) and exits. It\n"
          "refuses, naming the offsets, when events it needs are no longer on the log.\n"
          "With ledger.checkpoints, a reconciler whose ledger directory does not exist\n"
          "starts from the newest checkpoint, and checkpoints its ledger every\n"
          "ledger.checkpoint_interval_s seconds (docs/state.md).\n\n"
          "options:\n%s"
          "  --batch N            events per atomic write (default 1000)\n"
          "  --checkpoints URI    where ledger checkpoints live: a directory, file://, gs:// or\n"
          "                       s3:// (ledger.checkpoints; default none)\n"
          "  --checkpoint-interval S  seconds between checkpoints (ledger.checkpoint_interval_s, 60)\n"
          "  --exit-when-idle     stop once the status topic is drained\n"
          "  --standby            own nothing while another reconciler of the group runs: keep the\n"
          "                       newest checkpoint restored beside ledger.path (ledger.standby),\n"
          "                       say when caught up, take over when the group has no member\n"
          "  --group NAME         consumer group on the status topic (default " ALTAR_RECONCILER_GROUP ")\n"
          "  --metrics HOST:PORT  serve Prometheus metrics on GET /metrics (metrics.addr)\n"
          "                       and the read-only web dashboard on / (its JSON on /api/)\n"
          "  --token-file FILE    the dashboard's bearer token (else ALTAR_DASHBOARD_TOKEN);\n"
          "                       required when the address is not loopback\n"
          "  --no-dashboard       serve /metrics only\n"
          "  --quiet              no progress lines\n",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_LEDGER | ALTAR_CLI_FLAGS_PARTITIONS));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static int rebuild(altar_config_t *cfg, altar_group_specs_t *groups, bool quiet) {
  char tmp[4096], old[4096];
  snprintf(tmp, sizeof tmp, "%s.rebuild-%ld", cfg->ledger_path, (long)getpid());
  snprintf(old, sizeof old, "%s.replaced-%ld", cfg->ledger_path, (long)getpid());
  altar_error_t err = {0};
  char old_sum[ALTAR_LEDGER_CHECKSUM_LEN + 1] = "";
  struct stat st;
  bool had_old = stat(cfg->ledger_path, &st) == 0;
  altar_ledger_t *ol = NULL; /* kept open: its unpublished outbox moves over */
  if (had_old) {
    /* Opened for writing, not read-only: that takes the database's lock, so
     * a reconciler still running on it makes the rebuild refuse, instead of
     * the swap moving the live ledger away under it. */
    altar_ledger_rocksdb_opts_t ro = {.no_create = true};
    ol = altar_ledger_rocksdb_open(cfg->ledger_path, &ro, &err);
    if (!ol || altar_ledger_checksum(ol, old_sum, &err)) {
      fprintf(stderr, "altar reconciler: reading the current ledger: %s%s\n", err.msg,
              ol ? "" : " (is a reconciler still running on it? stop it before --rebuild)");
      altar_ledger_close(ol);
      return 1;
    }
  }
  /* From the newest checkpoint when there is one: the status topic's
   * beginning may be gone (retention), its events since are not. */
  altar_checkpoint_t cp = {0};
  bool from_cp = false;
  if (cfg->ledger_checkpoints) {
    int crc = altar__checkpoint_restore(cfg->ledger_checkpoints, tmp, &cp, &err);
    if (crc && crc != ALTAR_ENOTFOUND) {
      fprintf(stderr, "altar reconciler --rebuild: %s (the current ledger is untouched)\n", err.msg);
      altar_ledger_close(ol);
      return 1;
    }
    from_cp = crc == ALTAR_OK;
    if (!quiet)
      fprintf(stderr, "altar reconciler: rebuild: %s\n",
              from_cp ? "starting from the newest checkpoint" : "no checkpoint yet: replaying from the beginning");
  }
  /* The new ledger is swapped in only once complete and persisted, so its
   * writes need no write-ahead log: a crash leaves a directory to discard. */
  altar_ledger_rocksdb_opts_t no = {.no_wal = true, .write_behind = true};
  altar_ledger_t *nl = altar_ledger_rocksdb_open(tmp, &no, &err);
  if (!nl) {
    fprintf(stderr, "altar reconciler: %s\n", err.msg);
    altar_ledger_close(ol);
    return 1;
  }
  altar_reconciler_stats_t stats = {0};
  uint64_t missing = 0;
  int rc = altar__reconciler_rebuild(cfg->transport_name, &cfg->transport_props, nl, groups, &cfg->topics,
                                     from_cp ? &cp : NULL, ol, quiet, &stats, &missing, &err);
  /* Retried jobs and DLQ copies the old daemon staged but never saw
   * acknowledged exist only in its outbox: the replay cannot tell whether
   * they went out, so they go out (again, same bytes) from the new ledger.
   * Its group events come along too; their bytes equal the replay's. */
  size_t carried = 0;
  if (!rc && ol) rc = altar__outbox_carry(ol, nl, &carried, &err);
  if (!rc && carried && !quiet)
    fprintf(stderr, "altar reconciler: %zu unpublished outbox record%s carried into the new ledger\n", carried,
            ALTAR_CLI_PLURAL(carried));
  /* Retries waiting for their due time (retry_backoff) are not in the
   * status topic either: they come along the same way. */
  size_t waiting = 0;
  if (!rc && ol) rc = altar__retry_wait_carry(ol, nl, &waiting, &err);
  if (!rc && waiting && !quiet)
    fprintf(stderr, "altar reconciler: %zu retry job%s waiting for its due time carried into the new ledger\n", waiting,
            ALTAR_CLI_PLURAL(waiting));
  altar_ledger_close(ol);
  char new_sum[ALTAR_LEDGER_CHECKSUM_LEN + 1] = "";
  if (!rc) rc = altar_ledger_rocksdb_persist(nl, &err);
  if (!rc) rc = altar_ledger_checksum(nl, new_sum, &err);
  altar_ledger_close(nl);
  if (rc) {
    fprintf(stderr, "altar reconciler --rebuild: %s (the current ledger is untouched)\n", err.msg);
    altar__checkpoint_clear(&cp);
    return 1;
  }
  if ((had_old && rename(cfg->ledger_path, old) != 0) || rename(tmp, cfg->ledger_path) != 0) {
    fprintf(stderr, "altar reconciler --rebuild: swapping the ledger in: %s\n", strerror(errno));
    return 1;
  }
  if (from_cp) {
    printf("restored checkpoint %s (%zu file%s) covering status offsets", cp.id, cp.files, ALTAR_CLI_PLURAL(cp.files));
    for (size_t i = 0; i < cp.n_offsets; i++)
      printf("%s %d:%lld", i ? "," : "", (int)cp.offsets[i].partition, (long long)cp.offsets[i].next);
    printf("%s\n", cp.n_offsets ? "" : " (none)");
  }
  altar__checkpoint_clear(&cp);
  printf("rebuilt %s from %s%llu status event%s: %llu group%s fired, %llu dead-lettered, %llu missing event%s "
         "published\n",
         cfg->ledger_path, from_cp ? "the checkpoint and " : "", (unsigned long long)stats.events,
         ALTAR_CLI_PLURAL(stats.events), (unsigned long long)stats.fired, ALTAR_CLI_PLURAL(stats.fired),
         (unsigned long long)stats.dead_lettered, (unsigned long long)missing, ALTAR_CLI_PLURAL(missing));
  printf("checksum %s\n", new_sum);
  if (had_old) {
    printf("replaced %s (kept at %s)\n", old_sum, old);
    if (strcmp(old_sum, new_sum) != 0) {
      fprintf(stderr, "altar reconciler --rebuild: the rebuilt ledger differs from the one it replaced\n");
      return 1;
    }
  }
  return 0;
}

/* What recovery needs of the status topic (docs/state.md): with checkpoints,
 * the events since the newest one, kept with room for a few missed
 * intervals; without, every event ever written. */
static int check_status_retention(altar_transport_t *t, const altar_config_t *cfg) {
  int64_t have = -1;
  altar_error_t err = {0};
  int rc = altar_transport_topic_retention_ms(t, cfg->topics.status, &have, &err);
  if (rc == ALTAR_ENOTSUP) return 0; /* the transport cannot tell */
  if (rc) {
    fprintf(stderr, "altar reconciler: reading the retention of %s: %s\n", cfg->topics.status, err.msg);
    return 1;
  }
  if (have < 0) return 0;
  const char *where = !strcmp(cfg->transport_name, "local") ? "the topic's retention.ms, else transport.retention.ms"
                                                            : "the topic's retention.ms";
  if (!cfg->ledger_checkpoints) {
    fprintf(stderr,
            "altar reconciler: the status topic %s keeps records for %lld ms (%s), but without ledger checkpoints a "
            "reconciler that takes a partition over replays it from its first record: keep it forever (-1; "
            "topics.status_retention_ms for topics the fleet creates) or set ledger.checkpoints\n",
            cfg->topics.status, (long long)have, where);
    return 2;
  }
  int64_t need = ((int64_t)cfg->ledger_checkpoint_interval_s * 3 + 60) * 1000;
  if (have < need) {
    fprintf(stderr,
            "altar reconciler: the status topic %s keeps records for %lld ms (%s), less than recovery from a "
            "checkpoint needs: %lld ms (3 x ledger.checkpoint_interval_s + 60 s); keep it longer or checkpoint more "
            "often\n",
            cfg->topics.status, (long long)have, where, (long long)need);
    return 2;
  }
  return 0;
}

/* A standby waits here, its copy of the ledger kept current beside its
 * ledger path, until no reconciler of its group runs; 0 to go on as the
 * owner (with *published: group events out already), 1 on failure, 2 for a
 * bad setting, 3 when stopped meanwhile. */
static int stand_by(const altar_config_t *cfg, const altar_reconciler_opts_t *apply, altar__published_seen_t *published,
                    altar_metrics_t *metrics, volatile sig_atomic_t *stop, bool quiet) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  if (altar_cli_ensure_topics(t, cfg)) {
    altar_transport_close(t);
    return 1;
  }
  altar__standby_opts_t so = {.checkpoint_uri = cfg->ledger_checkpoints,
                              .ledger_path = cfg->ledger_path,
                              .transport = t,
                              .group = apply->group ? apply->group : ALTAR_RECONCILER_GROUP,
                              .status_topic = cfg->topics.status,
                              .poll_ms = cfg->ledger_standby_poll_ms,
                              .caught_up_events = cfg->ledger_standby_caught_up_events,
                              .apply = apply,
                              .published = published,
                              .stop = stop,
                              .metrics = metrics,
                              .quiet = quiet};
  altar_error_t err = {0};
  int rc = altar__standby_wait(&so, &err);
  altar_transport_close(t);
  if (rc == ALTAR_ECANCELED) return 3;
  if (rc) fprintf(stderr, "altar reconciler: %s\n", err.msg);
  return !rc ? 0 : rc == ALTAR_EINVAL || rc == ALTAR_EEXIST ? 2 : 1;
}

/* The group events a dead owner published after the checkpoint restored:
 * read off the ready and dead topics from the ends its manifest recorded. */
static void published_since(const altar_config_t *cfg, const altar_group_specs_t *groups, const altar_checkpoint_t *cp,
                            altar__published_seen_t *seen, bool quiet) {
  if (!cp->n_published) {
    if (!quiet)
      fprintf(stderr,
              "altar reconciler: checkpoint %s records no ready/dead ends: the group events its tail decides are "
              "published again (at least once)\n",
              cp->id);
    return;
  }
  altar_transport_t *lister = altar_cli_open_transport(cfg, NULL);
  altar__published_reader_t r = {.tname = cfg->transport_name, .props = &cfg->transport_props};
  altar__pub_pos_t *pos = calloc(cp->n_published, sizeof *pos);
  size_t n = cp->n_published;
  altar_error_t err = {0};
  if (pos) memcpy(pos, cp->published, n * sizeof *pos);
  int rc = lister && pos ? altar__published_read(seen, &r, lister, groups, &cfg->topics, &pos, &n, 60000, &err)
                         : ALTAR_ENOMEM;
  altar__published_reader_close(&r);
  if (rc)
    fprintf(stderr,
            "altar reconciler: reading the ready and dead topics since checkpoint %s (the tail's group "
            "events are published again): %s\n",
            cp->id, lister ? err.msg : "no transport");
  else if (!quiet)
    fprintf(stderr, "altar reconciler: %zu group event(s) published since checkpoint %s: not published again\n",
            altar__published_seen_count(seen), cp->id);
  free(pos);
  altar_transport_close(lister);
}

/* A reconciler with no ledger yet starts from the newest checkpoint, if
 * any: the status topic may no longer hold the history before it. */
static int restore_if_new(const altar_config_t *cfg, const altar_group_specs_t *groups, altar__published_seen_t *seen,
                          bool quiet) {
  struct stat st;
  if (!cfg->ledger_checkpoints || stat(cfg->ledger_path, &st) == 0) return 0;
  altar_checkpoint_t cp = {0};
  altar_error_t err = {0};
  int rc = altar__checkpoint_restore(cfg->ledger_checkpoints, cfg->ledger_path, &cp, &err);
  if (rc == ALTAR_ENOTFOUND) {
    if (!quiet)
      fprintf(stderr, "altar reconciler: no checkpoint at %s yet: starting an empty ledger\n", cfg->ledger_checkpoints);
    return 0;
  }
  if (rc) {
    /* Starting empty instead would replay only what retention left. */
    fprintf(stderr, "altar reconciler: %s\n", err.msg);
    return 1;
  }
  if (!quiet)
    fprintf(stderr, "altar reconciler: restored %s from checkpoint %s (%zu file%s, %zu partition offset%s)\n",
            cfg->ledger_path, cp.id, cp.files, ALTAR_CLI_PLURAL(cp.files), cp.n_offsets,
            ALTAR_CLI_PLURAL(cp.n_offsets));
  published_since(cfg, groups, &cp, seen, quiet);
  altar__checkpoint_clear(&cp);
  return 0;
}

/* Pieces of 256 KiB and more that the reconciler frees go back to the
 * system: glibc maps them, where by default it raises its threshold to the
 * largest piece freed and keeps later ones in its heap. A wide group's
 * decision takes a few hundred MB for a moment (its write batch, RocksDB's
 * memtable, the batch's staging), which the process would otherwise hold
 * for the rest of its life (10^5 members fired, bench/bench_fanin.sh: 263
 * MB resident once idle again, 100 MB with this). Smaller pieces (records,
 * the batch arena's spare chunks) are reused as before. */
#define RECONCILER_MMAP_THRESHOLD (256 << 10)

int altar_cmd_reconciler(int argc, char **argv) {
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, RECONCILER_MMAP_THRESHOLD);
#endif
  altar_config_t cfg;
  int code;
  argc = altar_cli_fleet_begin_on_log(argc, argv, usage, &cfg, &code);
  if (argc < 0) return code;
  static volatile sig_atomic_t stop;
  altar_reconciler_opts_t o = {.stop = &stop};
  bool do_rebuild = false;
  const char *metrics_addr = cfg.metrics_addr;
  const char *token_file = NULL;
  bool dashboard = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--rebuild")) do_rebuild = true;
    else if (!strcmp(a, "--standby")) cfg.ledger_standby = true;
    else if (!strcmp(a, "--exit-when-idle")) o.exit_when_idle = true;
    else if (!strcmp(a, "--quiet")) o.quiet = true;
    else if (!strcmp(a, "--group") && i + 1 < argc) o.group = argv[++i];
    else if (!strcmp(a, "--metrics") && i + 1 < argc) metrics_addr = argv[++i];
    else if (!strcmp(a, "--token-file") && i + 1 < argc) token_file = argv[++i];
    else if (!strcmp(a, "--no-dashboard")) dashboard = false;
    else if ((!strcmp(a, "--checkpoints") || !strcmp(a, "--checkpoint-interval")) && i + 1 < argc) {
      altar_error_t se = {0};
      const char *key = !strcmp(a, "--checkpoints") ? "ledger.checkpoints" : "ledger.checkpoint_interval_s";
      if (altar_config_set(&cfg, key, argv[++i], &se)) {
        fprintf(stderr, "altar reconciler: %s: %s\n", a, se.msg);
        altar_config_clear(&cfg);
        return 2;
      }
    } else if (!strcmp(a, "--batch") && i + 1 < argc) {
      long long v;
      if (altar_cli_parse_int("reconciler", a, argv[++i], 1, 1000000, &v)) {
        altar_config_clear(&cfg);
        return 2;
      }
      o.batch_max = (size_t)v;
    } else {
      fprintf(stderr, "altar reconciler: unknown argument '%s'\n", a);
      altar_config_clear(&cfg);
      return 2;
    }
  }
  altar_group_specs_t groups;
  if (altar_cli_load_groups(&cfg, &groups)) {
    altar_config_clear(&cfg);
    return 2;
  }
  int rc;
  /* The daemon and --rebuild decide reruns by the same horizon. */
  altar__settled_set_horizon_s((double)cfg.ledger_settled_horizon_s);
  if (do_rebuild) {
    rc = rebuild(&cfg, &groups, o.quiet);
  } else {
    altar_error_t err = {0};
    altar_metrics_t *metrics = NULL;
    altar_metrics_server_t *msrv = NULL;
    altar_cli_dashboard_t dash = {0};
    bool serve = metrics_addr && *metrics_addr;
    int started =
        !serve || !dashboard
            ? altar_cli_metrics_start("altar reconciler", serve ? metrics_addr : NULL, o.quiet, &metrics, &msrv)
            : altar_cli_dashboard_start("altar reconciler", &cfg, metrics_addr, token_file, o.quiet, false, &dash);
    if (dash.server) metrics = dash.metrics;
    if (started) {
      altar_group_specs_clear(&groups);
      altar_config_clear(&cfg);
      return 2;
    }
    o.metrics = metrics;
    /* Without a dashboard here the hour is still kept (a fixed ~35 KB) and
     * written to the ledger, for `altar dashboard` run apart to chart. */
    altar_history_t *own_history = dash.history ? NULL : altar_history_new();
    o.history = dash.history ? dash.history : own_history;
    altar_footprint_sampler_t *fp = NULL;
    o.checkpoint_uri = cfg.ledger_checkpoints;
    o.checkpoint_interval_s = cfg.ledger_checkpoint_interval_s;
    o.checkpoints_keep = (size_t)cfg.ledger_checkpoints_keep;
    o.consumed_keep_s = altar_config_consumed_keep_s(&cfg);
    o.settled_cache_entries = cfg.ledger_settled_cache_entries;
    rc = 0;
    altar__published_seen_t published = {0};
    o.groups = &groups;
    o.topics = &cfg.topics;
    o.transport_name = cfg.transport_name;
    o.transport_props = &cfg.transport_props;
    if (cfg.ledger_standby) {
      altar_cli_install_stop_signals(&stop);
      rc = stand_by(&cfg, &o, &published, metrics, &stop, o.quiet);
    }
    int standby_rc = rc;
    if (!rc) rc = restore_if_new(&cfg, &groups, &published, o.quiet);
    o.published = altar__published_seen_count(&published) ? &published : NULL;
    altar_ledger_t *l = rc ? NULL : altar_ledger_rocksdb_open(cfg.ledger_path, NULL, &err);
    if (rc) err.msg[0] = 0;
    altar_transport_t *t = l ? altar_cli_open_transport(&cfg, NULL) : NULL;
    if (!l && err.msg[0]) fprintf(stderr, "altar reconciler: %s\n", err.msg);
    rc = standby_rc == 3 ? 0 : standby_rc == 2 ? 2 : 1; /* a standby stopped while waiting exits 0 */
    int refused = t && !altar_cli_ensure_topics(t, &cfg) ? check_status_retention(t, &cfg) : 1;
    if (refused == 2) rc = 2;
    if (!refused) {
      o.transport = t;
      o.ledger = l;
      o.groups = &groups;
      o.topics = &cfg.topics;
      o.transport_name = cfg.transport_name;
      o.transport_props = &cfg.transport_props;
      altar_cli_install_stop_signals(&stop);
      altar_reconciler_stats_t st = {0};
      /* Once the ledger and the log exist, so the first sample sees them. */
      fp = altar_cli_footprint_start("altar reconciler", metrics, &cfg, false, t);
      rc = altar__reconciler_run(&o, &st, &err) ? 1 : 0;
      if (rc) fprintf(stderr, "altar reconciler: %s\n", err.msg);
      char held[160] = "";
      if (st.held)
        snprintf(held, sizeof held, "; %llu group%s held", (unsigned long long)st.held, ALTAR_CLI_PLURAL(st.held));
      if (st.followups)
        snprintf(held + strlen(held), sizeof held - strlen(held), "; %llu follow-up%s submitted (%llu failed)",
                 (unsigned long long)st.followups, ALTAR_CLI_PLURAL(st.followups),
                 (unsigned long long)st.followups_failed);
      if (!o.quiet)
        fprintf(stderr,
                "altar reconciler: applied %llu events in %llu batches; %llu fired, %llu dead-lettered, %llu retried, "
                "%llu poison%s\n",
                (unsigned long long)st.events, (unsigned long long)st.batches, (unsigned long long)st.fired,
                (unsigned long long)st.dead_lettered, (unsigned long long)st.retried, (unsigned long long)st.poison,
                held);
    }
    altar_footprint_sampler_stop(fp);
    altar_cli_metrics_stop(metrics == dash.metrics ? NULL : metrics, msrv);
    altar_cli_dashboard_stop(&dash);
    altar_history_free(own_history);
    altar_transport_close(t);
    altar_ledger_close(l);
    altar__published_seen_free(&published);
  }
  altar_group_specs_clear(&groups);
  altar_config_clear(&cfg);
  return rc;
}
