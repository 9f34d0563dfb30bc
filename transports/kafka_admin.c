/* kafka transport: topics (create, list with watermarks) and committed
 * offsets of any group, through librdkafka's Admin API and metadata. */
#include "altar/clock.h"
#include "transports/kafka_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int remaining(int64_t deadline) {
  int64_t r = deadline - altar_mono_ms();
  return r > 0 ? (int)r : 0;
}

/* Sleeps before another attempt, logging why, if time is left. */
static bool retry_after(altar__kafka_t *k, int64_t deadline, int attempt, const altar_error_t *e) {
  if (!e->retriable || remaining(deadline) < 250) return false;
  altar__kafka_warn(k, "retrying (attempt %d) after: %s", attempt + 1, e->msg);
  struct timespec ts = {0, 200 * 1000000L};
  nanosleep(&ts, NULL);
  return true;
}

/* Waits for one admin result event on q. */
static rd_kafka_event_t *await_event(rd_kafka_queue_t *q, int timeout_ms) { return rd_kafka_queue_poll(q, timeout_ms); }

/* ---- create ---------------------------------------------------------------- */

/* The producer's message.max.bytes (altar's default or the user's). */
static bool producer_max_bytes(altar__kafka_t *k, char *buf, size_t cap) {
  size_t len = cap;
  return rd_kafka_conf_get(rd_kafka_conf(k->prod), "message.max.bytes", buf, &len) == RD_KAFKA_CONF_OK && buf[0];
}

static int create_once(altar__kafka_t *k, const char *topic, int32_t partitions, const altar_strmap_t *config,
                       int timeout_ms, altar_error_t *err) {
  char errstr[256];
  rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, k->replication_factor, errstr, sizeof errstr);
  if (!nt) return altar_error_set(err, ALTAR_EINVAL, "create topic %s: %s", topic, errstr);
  for (size_t i = 0; config && i < config->n; i++)
    if (rd_kafka_NewTopic_set_config(nt, config->keys[i], config->vals[i])) {
      rd_kafka_NewTopic_destroy(nt);
      return altar_error_set(err, ALTAR_EINVAL, "create topic %s: setting %s: out of memory", topic, config->keys[i]);
    }
  /* The broker's default (about 1 MB) would refuse altar's larger records:
   * a topic altar creates takes what its producer may send. */
  char max_bytes[32];
  if (!(config && altar_strmap_get(config, "max.message.bytes")) &&
      producer_max_bytes(k, max_bytes, sizeof max_bytes) &&
      rd_kafka_NewTopic_set_config(nt, "max.message.bytes", max_bytes)) {
    rd_kafka_NewTopic_destroy(nt);
    return altar_error_set(err, ALTAR_EINVAL, "create topic %s: setting max.message.bytes: out of memory", topic);
  }
  rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(k->prod, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof errstr);
  rd_kafka_AdminOptions_set_operation_timeout(opts, timeout_ms, errstr, sizeof errstr);
  rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
  rd_kafka_CreateTopics(k->prod, &nt, 1, opts, q);
  rd_kafka_event_t *ev = await_event(q, timeout_ms + 2000);
  int rc;
  if (!ev) {
    rc = altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__TIMED_OUT, "create topic %s", topic);
  } else if (rd_kafka_event_error(ev)) {
    rc = altar__kafka_err(k, err, rd_kafka_event_error(ev), "create topic %s: %s", topic,
                          rd_kafka_event_error_string(ev));
  } else {
    size_t cnt = 0;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
    rd_kafka_resp_err_t code = cnt ? rd_kafka_topic_result_error(res[0]) : RD_KAFKA_RESP_ERR__FAIL;
    const char *why = cnt ? rd_kafka_topic_result_error_string(res[0]) : "no result";
    rc = code ? altar__kafka_err(k, err, code, "create topic %s (%d partitions): %s", topic, (int)partitions,
                                 why ? why : "")
              : ALTAR_OK;
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_NewTopic_destroy(nt);
  return rc;
}

/* Waits until metadata shows topic with every partition led, so a produce
 * right after creation finds it. */
static int await_visible(altar__kafka_t *k, const char *topic, int32_t partitions, int64_t deadline,
                         altar_error_t *err) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->prod, topic, NULL);
  if (!rkt) return altar_error_set(err, ALTAR_ENOMEM, "create topic %s: out of memory", topic);
  int rc = ALTAR_ETIMEOUT;
  do {
    const struct rd_kafka_metadata *md = NULL;
    int wait = remaining(deadline) ? remaining(deadline) : 1;
    rd_kafka_resp_err_t code = rd_kafka_metadata(k->prod, 0, rkt, &md, wait);
    if (!code && md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt == partitions) {
      bool led = true;
      for (int i = 0; i < md->topics[0].partition_cnt; i++)
        if (md->topics[0].partitions[i].leader < 0 || md->topics[0].partitions[i].err) led = false;
      if (led) rc = ALTAR_OK;
    }
    if (md) rd_kafka_metadata_destroy(md);
    if (rc == ALTAR_OK) break;
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
  } while (remaining(deadline) > 0);
  rd_kafka_topic_destroy(rkt);
  if (rc)
    altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__TIMED_OUT, "create topic %s: created but not visible in metadata",
                     topic);
  return rc;
}

/* A topic that already exists is usually produced to next (a submit creates
 * its topics, then sends). Without its metadata cached, librdkafka holds the
 * first record until its once-a-second timer asks for it: a second added to
 * every short-lived producer's first send. One metadata request now (a
 * round trip) spares that; a failure only means the slow path. */
static void warm_metadata(altar__kafka_t *k, const char *topic, int64_t deadline) {
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->prod, topic, NULL);
  if (!rkt) return;
  const struct rd_kafka_metadata *md = NULL;
  int wait = remaining(deadline) > 0 ? (int)remaining(deadline) : 1;
  if (!rd_kafka_metadata(k->prod, 0, rkt, &md, wait) && md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(rkt);
}

int altar__kafka_create_topic(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err) {
  return altar__kafka_create_topic_config(t, topic, partitions, NULL, err);
}

int altar__kafka_create_topic_config(altar_transport_t *t, const char *topic, int32_t partitions,
                                     const altar_strmap_t *config, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (partitions < 1 || partitions > 100000)
    return altar_error_set(err, ALTAR_EINVAL, "create topic %s: partitions must be in [1, 100000], got %d", topic,
                           (int)partitions);
  int64_t deadline = altar_mono_ms() + k->timeout_ms;
  altar_error_t e = {0};
  for (int attempt = 1;; attempt++) {
    rc = create_once(k, topic, partitions, config, remaining(deadline) > 1000 ? remaining(deadline) : 1000, &e);
    if (rc == ALTAR_OK || !retry_after(k, deadline, attempt, &e)) break;
  }
  if (rc == ALTAR_OK) rc = await_visible(k, topic, partitions, deadline, &e);
  if (rc == ALTAR_EEXIST) warm_metadata(k, topic, deadline);
  if (rc && err) *err = e;
  return rc;
}

/* ---- topic settings ------------------------------------------------------ */

int altar__kafka_topic_retention_ms(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
  char errstr[256];
  rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(k->prod, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
  rd_kafka_AdminOptions_set_request_timeout(opts, k->timeout_ms, errstr, sizeof errstr);
  rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
  rd_kafka_DescribeConfigs(k->prod, &res, 1, opts, q);
  rd_kafka_event_t *ev = await_event(q, k->timeout_ms + 2000);
  rc = ALTAR_ENOTFOUND;
  if (!ev) {
    rc = altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__TIMED_OUT, "describe topic %s", topic);
  } else if (rd_kafka_event_error(ev)) {
    rc = altar__kafka_err(k, err, rd_kafka_event_error(ev), "describe topic %s: %s", topic,
                          rd_kafka_event_error_string(ev));
  } else {
    size_t nres = 0, nent = 0;
    const rd_kafka_ConfigResource_t **rs =
        rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &nres);
    if (nres && rd_kafka_ConfigResource_error(rs[0])) {
      rc = altar__kafka_err(k, err, rd_kafka_ConfigResource_error(rs[0]), "describe topic %s: %s", topic,
                            rd_kafka_ConfigResource_error_string(rs[0]) ? rd_kafka_ConfigResource_error_string(rs[0])
                                                                        : "");
    } else {
      const rd_kafka_ConfigEntry_t **es = nres ? rd_kafka_ConfigResource_configs(rs[0], &nent) : NULL;
      for (size_t i = 0; i < nent; i++)
        if (!strcmp(rd_kafka_ConfigEntry_name(es[i]), "retention.ms") && rd_kafka_ConfigEntry_value(es[i])) {
          *pms = strtoll(rd_kafka_ConfigEntry_value(es[i]), NULL, 10);
          rc = ALTAR_OK;
        }
      if (rc) altar_error_set(err, rc, "describe topic %s: no retention.ms in its settings", topic);
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_ConfigResource_destroy(res);
  return rc;
}

/* ---- delete records ------------------------------------------------------ */

int altar__kafka_delete_records(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                int64_t *pbeginning, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  rd_kafka_topic_partition_list_t *tpl = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tpl, topic, partition)->offset = before;
  rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(tpl);
  rd_kafka_topic_partition_list_destroy(tpl);
  char errstr[256];
  rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(k->prod, RD_KAFKA_ADMIN_OP_DELETERECORDS);
  rd_kafka_AdminOptions_set_request_timeout(opts, k->timeout_ms, errstr, sizeof errstr);
  rd_kafka_AdminOptions_set_operation_timeout(opts, k->timeout_ms, errstr, sizeof errstr);
  rd_kafka_queue_t *q = rd_kafka_queue_new(k->prod);
  rd_kafka_DeleteRecords(k->prod, &del, 1, opts, q);
  rd_kafka_event_t *ev = await_event(q, k->timeout_ms + 2000);
  if (!ev) {
    rc = altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__TIMED_OUT, "delete records of %s/%d", topic, (int)partition);
  } else if (rd_kafka_event_error(ev)) {
    rc = altar__kafka_err(k, err, rd_kafka_event_error(ev), "delete records of %s/%d: %s", topic, (int)partition,
                          rd_kafka_event_error_string(ev));
  } else {
    const rd_kafka_topic_partition_list_t *res =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
    if (!res || res->cnt < 1) {
      rc = altar__kafka_err(k, err, RD_KAFKA_RESP_ERR__FAIL, "delete records of %s/%d: no result", topic,
                            (int)partition);
    } else if (res->elems[0].err) {
      rc = altar__kafka_err(k, err, res->elems[0].err, "delete records of %s/%d before %lld", topic, (int)partition,
                            (long long)before);
    } else {
      *pbeginning = res->elems[0].offset;
    }
  }
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_DeleteRecords_destroy(del);
  return rc;
}

/* ---- list -------------------------------------------------------------- */

static int cmp_topic(const void *a, const void *b) {
  return strcmp(((const altar_topic_info_t *)a)->name, ((const altar_topic_info_t *)b)->name);
}
static int cmp_part(const void *a, const void *b) {
  int32_t x = ((const altar_partition_info_t *)a)->partition, y = ((const altar_partition_info_t *)b)->partition;
  return (x > y) - (x < y);
}

static int list_once(altar__kafka_t *k, const char *topic, int64_t deadline, altar_topic_list_t **plist,
                     altar_error_t *err) {
  const struct rd_kafka_metadata *md = NULL;
  /* All topics, filtered here: asking for one topic by name would create it
   * on clusters that auto-create topics. */
  int wait = remaining(deadline) ? remaining(deadline) : 1;
  rd_kafka_resp_err_t code = rd_kafka_metadata(k->prod, 1, NULL, &md, wait);
  if (code) return altar__kafka_err(k, err, code, "list topics");
  altar_topic_list_t *l = calloc(1, sizeof *l);
  int rc = ALTAR_OK;
  if (!l || (md->topic_cnt && !(l->topics = calloc((size_t)md->topic_cnt, sizeof *l->topics)))) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "list topics: out of memory");
    goto out;
  }
  for (int i = 0; i < md->topic_cnt && !rc; i++) {
    const rd_kafka_metadata_topic_t *mt = &md->topics[i];
    if (topic ? strcmp(mt->topic, topic) != 0 : strncmp(mt->topic, "__", 2) == 0) continue;
    if (mt->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
    if (mt->err) {
      rc = altar__kafka_err(k, err, mt->err, "list topics: %s", mt->topic);
      break;
    }
    altar_topic_info_t *ti = &l->topics[l->n_topics];
    if (!(ti->name = strdup(mt->topic)) ||
        (mt->partition_cnt && !(ti->partitions = calloc((size_t)mt->partition_cnt, sizeof *ti->partitions)))) {
      free(ti->name);
      rc = altar_error_set(err, ALTAR_ENOMEM, "list topics: out of memory");
      break;
    }
    l->n_topics++;
    for (int j = 0; j < mt->partition_cnt; j++) {
      int64_t lo = -1, hi = -1;
      int32_t p = mt->partitions[j].id;
      code = rd_kafka_query_watermark_offsets(k->prod, mt->topic, p, &lo, &hi,
                                              remaining(deadline) ? remaining(deadline) : 1);
      if (code) {
        rc = altar__kafka_err(k, err, code, "list topics: offsets of %s [%d]", mt->topic, (int)p);
        break;
      }
      ti->partitions[ti->n_partitions++] = (altar_partition_info_t){p, lo, hi};
    }
    qsort(ti->partitions, ti->n_partitions, sizeof *ti->partitions, cmp_part);
  }
  if (!rc && topic && l->n_topics == 0)
    rc = altar_error_set(err, ALTAR_ENOTFOUND, "list topics: topic %s does not exist", topic);
out:
  rd_kafka_metadata_destroy(md);
  if (rc) {
    altar_topic_list_free(l);
    return rc;
  }
  qsort(l->topics, l->n_topics, sizeof *l->topics, cmp_topic);
  *plist = l;
  return ALTAR_OK;
}

int altar__kafka_list_topics(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                             altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *plist = NULL;
  if (topic) {
    int rc = altar_transport_check_name("topic", topic, err);
    if (rc) return rc;
  }
  int64_t deadline = altar_mono_ms() + (timeout_ms > 0 ? timeout_ms : k->timeout_ms);
  altar_error_t e = {0};
  int rc;
  for (int attempt = 1;; attempt++) {
    rc = list_once(k, topic, deadline, plist, &e);
    if (rc == ALTAR_OK || rc == ALTAR_ENOTFOUND || !retry_after(k, deadline, attempt, &e)) break;
  }
  if (rc && err) *err = e;
  return rc;
}

/* ---- committed ------------------------------------------------------------- */

/* Where a group's offsets are kept: "<group>.offsets", a group nobody joins.
 * librdkafka 2.0.2 commits through the member's own coordinator connection
 * with its generation; a commit queued behind this member's JoinGroup is
 * answered ILLEGAL_GENERATION after the join completes, and its handler then
 * resets the generation the JoinGroup had just brought, so the SyncGroup
 * that follows fails and the whole assignment is declared lost (seen in
 * the rebalance test with debug=cgrp). Commits to a memberless group carry
 * no generation, never touch the membership's state machine, and the
 * transport fences them itself: only partitions this member owns, never
 * after its assignment was lost. */
int altar__kafka_offsets_group(const char *group, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s%s", group, ALTAR__KAFKA_OFFSETS_SUFFIX);
  if (n < 0 || (size_t)n >= cap || n > ALTAR_GROUP_NAME_MAX) return ALTAR_EINVAL;
  return ALTAR_OK;
}

/* librdkafka 2.0.2's Admin ListConsumerGroupOffsets crashes when the
 * coordinator answers with coordinator errors (seen with the mock cluster),
 * so committed offsets are read (and the offsets group written) the way
 * consumers do it: through a consumer handle of that group, never
 * subscribed, so it never joins. The group's own consumer serves its group;
 * a few spare handles, kept for the groups asked about last, serve the
 * others. Called under k->peek_lock. */
static rd_kafka_t *handle_for_group(altar__kafka_t *k, const char *group, altar_error_t *err) {
  if (k->cons && k->group && !strcmp(k->group, group)) return k->cons;
  altar__kafka_spare_t *victim = &k->spares[0];
  for (size_t i = 0; i < ALTAR__KAFKA_SPARES; i++) {
    altar__kafka_spare_t *sp = &k->spares[i];
    if (sp->rk && !strcmp(sp->group, group)) {
      sp->used = ++k->spare_clock;
      return sp->rk;
    }
    if (!sp->rk || (victim->rk && sp->used < victim->used)) victim = sp;
  }
  if (victim->rk) {
    rd_kafka_poll(victim->rk, 0);
    rd_kafka_destroy(victim->rk);
    victim->rk = NULL;
  }
  free(victim->group);
  if (!(victim->group = strdup(group))) {
    altar_error_set(err, ALTAR_ENOMEM, "committed: out of memory");
    return NULL;
  }
  rd_kafka_conf_t *conf = altar__kafka_conf_build(&k->props, ALTAR__KAFKA_CONSUMER, group, &k->sec, err);
  if (!conf) return NULL;
  altar__kafka_conf_wire(k, conf);
  char errstr[512];
  victim->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!victim->rk) {
    rd_kafka_conf_destroy(conf);
    altar__kafka_redact(&k->sec, errstr, sizeof errstr);
    altar_error_set(err, ALTAR_ECONFIG, "committed: cannot create a consumer for group %s: %s", group, errstr);
    return NULL;
  }
  altar__kafka_handle_wire(k, victim->rk);
  victim->used = ++k->spare_clock;
  return victim->rk;
}

void altar__kafka_spares_close(altar__kafka_t *k) {
  for (size_t i = 0; i < ALTAR__KAFKA_SPARES; i++) {
    if (k->spares[i].rk) {
      rd_kafka_poll(k->spares[i].rk, 0);
      rd_kafka_destroy(k->spares[i].rk);
    }
    free(k->spares[i].group);
    k->spares[i].rk = NULL;
    k->spares[i].group = NULL;
  }
}

/* Fetches l's committed offsets of group (l->elems[i].offset/metadata/err). */
static rd_kafka_resp_err_t fetch_committed(altar__kafka_t *k, const char *group, rd_kafka_topic_partition_list_t *l,
                                           int timeout_ms, altar_error_t *err) {
  pthread_mutex_lock(&k->peek_lock);
  rd_kafka_t *rk = handle_for_group(k, group, err);
  if (!rk) {
    pthread_mutex_unlock(&k->peek_lock);
    return RD_KAFKA_RESP_ERR__INVALID_ARG;
  }
  rd_kafka_resp_err_t code = rd_kafka_committed(rk, l, timeout_ms);
  /* Serve a spare handle's queued log lines here, on the caller's thread. */
  if (rk != k->cons) rd_kafka_poll(rk, 0);
  pthread_mutex_unlock(&k->peek_lock);
  return code;
}

rd_kafka_resp_err_t altar__kafka_store_commit(altar__kafka_t *k, rd_kafka_topic_partition_list_t *l,
                                              altar_error_t *err) {
  char store[ALTAR_GROUP_NAME_MAX + 16];
  if (altar__kafka_offsets_group(k->group, store, sizeof store)) return RD_KAFKA_RESP_ERR__INVALID_ARG;
  pthread_mutex_lock(&k->peek_lock);
  rd_kafka_t *rk = handle_for_group(k, store, err);
  if (!rk) {
    pthread_mutex_unlock(&k->peek_lock);
    return RD_KAFKA_RESP_ERR__INVALID_ARG;
  }
  rd_kafka_resp_err_t code = rd_kafka_commit(rk, l, 0);
  rd_kafka_poll(rk, 0);
  pthread_mutex_unlock(&k->peek_lock);
  return code;
}

/* Replaces each element of into that has no committed offset, or a lower
 * one, by the same partition of from (offset and metadata). */
static void keep_highest(rd_kafka_topic_partition_list_t *into, const rd_kafka_topic_partition_list_t *from) {
  for (int i = 0; i < from->cnt; i++) {
    const rd_kafka_topic_partition_t *f = &from->elems[i];
    rd_kafka_topic_partition_t *t = rd_kafka_topic_partition_list_find(into, f->topic, f->partition);
    if (!t || f->err || f->offset < 0 || (!t->err && t->offset >= f->offset)) continue;
    t->err = RD_KAFKA_RESP_ERR_NO_ERROR;
    t->offset = f->offset;
    free(t->metadata);
    t->metadata = NULL;
    t->metadata_size = 0;
    if (f->metadata_size && (t->metadata = malloc(f->metadata_size))) {
      memcpy(t->metadata, f->metadata, f->metadata_size);
      t->metadata_size = f->metadata_size;
    }
  }
}

/* Committed offsets of group for l: from "<group>.offsets", or from the
 * group itself where that holds more (an older altar committed there, or a
 * consumer that is not altar's). */
rd_kafka_resp_err_t altar__kafka_committed_list(altar__kafka_t *k, const char *group,
                                                rd_kafka_topic_partition_list_t *l, int timeout_ms,
                                                altar_error_t *err) {
  char store[ALTAR_GROUP_NAME_MAX + 16];
  rd_kafka_topic_partition_list_t *own = rd_kafka_topic_partition_list_copy(l);
  rd_kafka_resp_err_t code = fetch_committed(k, group, own, timeout_ms, err);
  if (!code && altar__kafka_offsets_group(group, store, sizeof store) == ALTAR_OK)
    code = fetch_committed(k, store, l, timeout_ms, err);
  else if (!code)
    for (int i = 0; i < l->cnt; i++) l->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
  if (!code) keep_highest(l, own);
  rd_kafka_topic_partition_list_destroy(own);
  return code;
}

static int committed_once(altar__kafka_t *k, const char *group, const char *topic, int32_t partition, int timeout_ms,
                          int64_t *poffset, char **pmetadata, altar_error_t *err) {
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic, partition);
  altar_error_t he = {0};
  rd_kafka_resp_err_t code = altar__kafka_committed_list(k, group, l, timeout_ms, &he);
  if (code == RD_KAFKA_RESP_ERR__INVALID_ARG && he.code) {
    rd_kafka_topic_partition_list_destroy(l);
    if (err) *err = he;
    return he.code;
  }
  int rc = ALTAR_OK;
  const rd_kafka_topic_partition_t *p = &l->elems[0];
  if (code || p->err) {
    rc = altar__kafka_err(k, err, code ? code : p->err, "committed offset of group %s on %s [%d]", group, topic,
                          (int)partition);
  } else if (p->offset >= 0) {
    if (p->metadata_size > ALTAR_COMMIT_METADATA_MAX) {
      rc = altar_error_set(err, ALTAR_ETOOBIG,
                           "committed offset of group %s on %s [%d]: metadata of %zu bytes exceeds %d", group, topic,
                           (int)partition, p->metadata_size, ALTAR_COMMIT_METADATA_MAX);
    } else {
      char *md = malloc(p->metadata_size + 1);
      if (!md) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "committed: out of memory");
      } else {
        if (p->metadata_size) memcpy(md, p->metadata, p->metadata_size);
        md[p->metadata_size] = '\0';
        *poffset = p->offset;
        *pmetadata = md;
      }
    }
  }
  rd_kafka_topic_partition_list_destroy(l);
  return rc;
}

int altar__kafka_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                           int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *poffset = ALTAR_OFFSET_INVALID;
  *pmetadata = NULL;
  int rc = altar_transport_check_name("group", group, err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (partition < 0) return altar_error_set(err, ALTAR_EINVAL, "committed: partition %d is invalid", (int)partition);
  int64_t deadline = altar_mono_ms() + (timeout_ms > 0 ? timeout_ms : k->timeout_ms);
  altar_error_t e = {0};
  for (int attempt = 1;; attempt++) {
    int wait = remaining(deadline) > 500 ? remaining(deadline) : 500;
    rc = committed_once(k, group, topic, partition, wait, poffset, pmetadata, &e);
    if (rc == ALTAR_OK || !retry_after(k, deadline, attempt, &e)) break;
  }
  if (rc && err) *err = e;
  return rc;
}
