/* The local transport: an embedded, multi-process file log for one machine.
 * Opening reports stray files and changes nothing on disk: a partition is
 * recovered (a torn or corrupt tail truncated and reported, retention
 * applied) by the first produce to it (recover_partition in local_producer.c,
 * which says why that is enough). The rest lives in local_producer.c,
 * local_consumer.c and the files they use. */
#include "transports/local_int.h"

#include <stdlib.h>
#include <string.h>

/* Lists every topic and partition, reporting what does not belong there.
 * Only directory listings: opening used to scan every active segment here,
 * which cost a reader (a consumer, the ledger rebuild) a CRC pass over the
 * whole log's tails on every open. */
static int local_report_strays(altar_transport_t *t, local_t *l, altar_error_t *err) {
  char **names = NULL;
  size_t n = 0;
  int rc = altar__local_topic_names(t, &l->cfg, &names, &n, err);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    int32_t np = 0;
    altar_error_t e = {0};
    if (altar__local_topic_partitions(t, &l->cfg, names[i], &np, &e) != 0) {
      altar_transport_log(t, 4, "%s", e.msg);
      continue;
    }
    for (int32_t p = 0; p < np; p++) {
      char *dir = altar__local_part_dir(l->cfg.dir, names[i], p);
      if (!dir) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "open: out of memory");
        break;
      }
      int64_t *bases = NULL;
      size_t nb = 0;
      altar__local_part_segments(t, dir, true, &bases, &nb, &e); /* reports stray files */
      free(bases);
      free(dir);
    }
    if (rc) break;
  }
  altar__local_names_free(names, n);
  return rc;
}

static int local_open(altar_transport_t *t, const altar_strmap_t *config, altar_error_t *err) {
  local_t *l = calloc(1, sizeof *l);
  if (!l) return altar_error_set(err, ALTAR_ENOMEM, "local: out of memory");
  int rc = altar__local_cfg_parse(t, &l->cfg, config, err);
  if (rc) {
    free(l);
    return rc;
  }
  rc = altar__local_dirs_init(&l->cfg, err);
  if (!rc && altar__local_producer_init(&l->prod) != 0)
    rc = altar_error_set(err, ALTAR_ENOMEM, "local: cannot initialise the producer");
  if (rc) {
    altar__local_cfg_clear(&l->cfg);
    free(l);
    return rc;
  }
  altar_transport_set_impl(t, l);
  rc = local_report_strays(t, l, err);
  if (rc) {
    altar__local_producer_shutdown(t);
    altar__local_cfg_clear(&l->cfg);
    free(l);
    altar_transport_set_impl(t, NULL);
  }
  return rc;
}

static void local_close(altar_transport_t *t) {
  local_t *l = altar_transport_impl(t);
  if (!l) return;
  altar__local_consumer_close(t);
  altar__local_producer_shutdown(t);
  altar__local_cfg_clear(&l->cfg);
  altar__local_end_cache_free(l->ends);
  free(l);
  altar_transport_set_impl(t, NULL);
}

static int local_create_topic_op(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  int rc = altar__local_topic_create(t, &l->cfg, topic, partitions, NULL, err);
  if (rc == 0) altar__local_producer_forget_topic(t, topic);
  return rc;
}

/* Settings the local log cannot honour are refused before anything is made. */
static int local_create_topic_config_op(altar_transport_t *t, const char *topic, int32_t partitions,
                                        const altar_strmap_t *conf, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  local_topic_conf_t c;
  int rc = altar__local_topic_conf_parse(conf, &c, err);
  if (rc) return altar_error_prefix(err, "topic %s", topic);
  rc = altar__local_topic_create(t, &l->cfg, topic, partitions, &c, err);
  if (rc == 0) altar__local_producer_forget_topic(t, topic);
  return rc;
}

static int local_list_topics_op(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                                altar_error_t *err) {
  (void)timeout_ms;
  local_t *l = altar_transport_impl(t);
  return altar__local_list_topics(t, &l->cfg, topic, plist, err);
}

static int local_delete_records_op(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                   int64_t *pbeginning, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  return altar__local_part_delete_records(t, &l->cfg, topic, partition, before, pbeginning, err);
}

/* The shorter of the topic's own retention.ms and the transport's. */
static int local_topic_retention_ms_op(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  local_topic_conf_t c;
  altar__local_topic_conf_read(&l->cfg, topic, &c);
  *pms = c.retention_ms;
  return ALTAR_OK;
}

const altar_transport_ops_t altar_transport_local_ops = {
    .name = "local",
    .caps = ALTAR_TRANSPORT_CAP_MULTI_PROCESS,
    .config_keys = altar__local_cfg_keys,
    .open = local_open,
    .close = local_close,
    .produce = altar__local_produce,
    .poll = altar__local_poll,
    .flush = altar__local_flush,
    .create_topic = local_create_topic_op,
    .create_topic_config = local_create_topic_config_op,
    .list_topics = local_list_topics_op,
    .delete_records = local_delete_records_op,
    .topic_retention_ms = local_topic_retention_ms_op,
    .subscribe = altar__local_subscribe,
    .assign = altar__local_assign,
    .consume = altar__local_consume,
    .wait_fd = altar__local_wait_fd,
    .pause = altar__local_pause,
    .resume = altar__local_resume,
    .seek = altar__local_seek,
    .commit = altar__local_commit,
    .committed = altar__local_committed,
    .assignment = altar__local_assignment,
    .caught_up = altar__local_caught_up,
    .lag = NULL,
    .topic_members = altar__local_topic_members,
    .leave = altar__local_leave,
    .end_offsets = altar__local_end_offsets,
    .retention_due = altar__local_retention_due,
};
