/* kafka transport: the consumer: group membership with cooperative-sticky
 * incremental rebalances, manual assignment, consume, pause/resume, seek,
 * commits with metadata and the caught-up check behind `altar log --exit`. */
#include "altar/clock.h"
#include "transports/kafka_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- known positions -------------------------------------------------------- */

static altar__kafka_pos_t *pos_find(altar__kafka_t *k, const char *topic, int32_t partition) {
  for (size_t i = 0; i < k->n_pos; i++)
    if (k->pos[i].partition == partition && !strcmp(k->pos[i].topic, topic)) return &k->pos[i];
  return NULL;
}

static void pos_set(altar__kafka_t *k, const char *topic, int32_t partition, int64_t offset) {
  altar__kafka_pos_t *p = pos_find(k, topic, partition);
  if (p) {
    p->offset = offset;
    return;
  }
  altar__kafka_pos_t *n = realloc(k->pos, (k->n_pos + 1) * sizeof *n);
  if (!n) return; /* only a hint for caught_up; it falls back to the broker */
  k->pos = n;
  if (!(n[k->n_pos].topic = strdup(topic))) return;
  n[k->n_pos].partition = partition;
  n[k->n_pos].offset = offset;
  k->n_pos++;
}

static void pos_remove(altar__kafka_t *k, const char *topic, int32_t partition) {
  altar__kafka_pos_t *p = pos_find(k, topic, partition);
  if (!p) return;
  free(p->topic);
  *p = k->pos[--k->n_pos];
}

void altar__kafka_pos_clear(altar__kafka_t *k) {
  for (size_t i = 0; i < k->n_pos; i++) free(k->pos[i].topic);
  free(k->pos);
  k->pos = NULL;
  k->n_pos = 0;
}

/* ---- helpers ------------------------------------------------------------------ */

static int need_consumer(altar__kafka_t *k, const char *what, altar_error_t *err) {
  if (!k->cons) return altar_error_set(err, ALTAR_ESTATE, "%s: not consuming (call subscribe or assign first)", what);
  return ALTAR_OK;
}

static rd_kafka_topic_partition_list_t *to_list(const altar_tp_t *parts, size_t n, bool with_offsets) {
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n ? (int)n : 1);
  for (size_t i = 0; i < n; i++) {
    rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_add(l, parts[i].topic, parts[i].partition);
    if (with_offsets) p->offset = parts[i].offset;
  }
  return l;
}

static int check_parts(const char *what, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  if (n && !parts) return altar_error_set(err, ALTAR_EINVAL, "%s: partitions are NULL", what);
  for (size_t i = 0; i < n; i++) {
    int rc = altar_transport_check_name("topic", parts[i].topic, err);
    if (rc) return altar_error_prefix(err, "%s", what), rc;
    if (parts[i].partition < 0)
      return altar_error_set(err, ALTAR_EINVAL, "%s: %s partition %d is invalid", what, parts[i].topic,
                             (int)parts[i].partition);
  }
  return ALTAR_OK;
}

/* The element of the assignment being made (inside the ASSIGN callback). */
static rd_kafka_topic_partition_t *assigning(altar__kafka_t *k, const char *topic, int32_t partition) {
  return k->assigning ? rd_kafka_topic_partition_list_find(k->assigning, topic, partition) : NULL;
}

static bool owns(altar__kafka_t *k, const char *topic, int32_t partition) {
  if (assigning(k, topic, partition)) return true;
  rd_kafka_topic_partition_list_t *l = NULL;
  if (rd_kafka_assignment(k->cons, &l)) return false;
  bool found = rd_kafka_topic_partition_list_find(l, topic, partition) != NULL;
  rd_kafka_topic_partition_list_destroy(l);
  return found;
}

/* Calls the user's rebalance callback with the partitions of l. */
static void tell(altar__kafka_t *k, altar_rebalance_kind_t kind, const rd_kafka_topic_partition_list_t *l) {
  if (!k->rb_cb || l->cnt == 0) return;
  altar_tp_t *tps = calloc((size_t)l->cnt, sizeof *tps);
  if (!tps) {
    altar__kafka_warn(k, "rebalance: out of memory; callback not called");
    return;
  }
  for (int i = 0; i < l->cnt; i++)
    tps[i] = (altar_tp_t){l->elems[i].topic, l->elems[i].partition, ALTAR_OFFSET_INVALID};
  k->rb_cb(k->t, kind, tps, (size_t)l->cnt, k->rb_ctx);
  free(tps);
}

/* ASSIGN: each partition starts where the group's offsets say (read here,
 * from the offsets group, since commits go there), and the user's callback
 * runs before librdkafka gets the partitions, so a seek it makes becomes the
 * start offset (librdkafka refuses to seek a partition that is not fetching
 * yet: "Local: Erroneous state") and a pause it makes is applied before the
 * first fetch returns anything. */
static void assign_partitions(altar__kafka_t *k, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts,
                              bool cooperative) {
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_copy(parts);
  bool *paused = calloc((size_t)(l->cnt ? l->cnt : 1), sizeof *paused);
  bool told = false;
  if (!paused) {
    altar__kafka_warn(k, "rebalance: out of memory; assigning %d partitions at their committed offsets", l->cnt);
  } else if (l->cnt && k->group) {
    for (int i = 0; i < l->cnt; i++) l->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
    altar_error_t e = {0};
    rd_kafka_resp_err_t ce = altar__kafka_committed_list(k, k->group, l, k->timeout_ms, &e);
    if (ce) {
      /* librdkafka then starts them at the group's own committed offsets. */
      altar__kafka_warn(k, "rebalance: reading the committed offsets of group %s: %s", k->group,
                        e.msg[0] ? e.msg : rd_kafka_err2str(ce));
      for (int i = 0; i < l->cnt; i++) l->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
    }
    for (int i = 0; i < l->cnt; i++) {
      rd_kafka_topic_partition_t *p = &l->elems[i];
      if (p->err || p->offset < 0) p->offset = RD_KAFKA_OFFSET_INVALID;
      p->err = RD_KAFKA_RESP_ERR_NO_ERROR;
      free(p->metadata); /* only the offset is handed to librdkafka */
      p->metadata = NULL;
      p->metadata_size = 0;
      if (p->offset >= 0) pos_set(k, p->topic, p->partition, p->offset);
    }
    k->assigning = l;
    k->assigning_paused = paused;
    tell(k, ALTAR_REBALANCE_ASSIGN, parts);
    k->assigning = NULL;
    k->assigning_paused = NULL;
    told = true;
  }
  rd_kafka_error_t *e = NULL;
  if (cooperative) {
    e = rd_kafka_incremental_assign(rk, l);
  } else {
    rd_kafka_resp_err_t ae = rd_kafka_assign(rk, l);
    if (ae) e = rd_kafka_error_new(ae, "%s", rd_kafka_err2str(ae));
  }
  if (e) {
    altar__kafka_warn(k, "rebalance: assigning %d partitions failed: %s", l->cnt, rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    /* The callback was told: take them back so its view stays true. */
    if (told) tell(k, ALTAR_REBALANCE_REVOKE, parts);
  } else if (told) {
    /* Each partition gets the state the callback chose, both ways: a
     * partition paused when it was revoked comes back still paused in
     * librdkafka, and nothing else would ever resume it. */
    rd_kafka_topic_partition_list_t *pl = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_t *rl = rd_kafka_topic_partition_list_new(1);
    for (int i = 0; i < l->cnt; i++)
      rd_kafka_topic_partition_list_add(paused[i] ? pl : rl, l->elems[i].topic, l->elems[i].partition);
    if (pl->cnt && rd_kafka_pause_partitions(rk, pl))
      altar__kafka_warn(k, "rebalance: pausing %d partitions failed", pl->cnt);
    if (rl->cnt && rd_kafka_resume_partitions(rk, rl))
      altar__kafka_warn(k, "rebalance: resuming %d partitions failed", rl->cnt);
    rd_kafka_topic_partition_list_destroy(pl);
    rd_kafka_topic_partition_list_destroy(rl);
  } else {
    tell(k, ALTAR_REBALANCE_ASSIGN, parts);
  }
  free(paused);
  rd_kafka_topic_partition_list_destroy(l);
}

/* Served inside consume and close, on the caller's thread. */
static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t code, rd_kafka_topic_partition_list_t *parts,
                         void *opaque) {
  altar__kafka_t *k = opaque;
  const char *proto = rd_kafka_rebalance_protocol(rk);
  bool cooperative = proto && !strcmp(proto, "COOPERATIVE");
  rd_kafka_error_t *e = NULL;
  if (code == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    assign_partitions(k, rk, parts, cooperative);
  } else if (code == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    if (rd_kafka_assignment_lost(rk))
      altar__kafka_warn(k,
                        "rebalance: %d partitions were lost (the group moved on without this member); "
                        "commits for them will fail",
                        parts->cnt);
    tell(k, ALTAR_REBALANCE_REVOKE, parts);
    for (int i = 0; i < parts->cnt; i++) pos_remove(k, parts->elems[i].topic, parts->elems[i].partition);
    if (cooperative) {
      e = rd_kafka_incremental_unassign(rk, parts);
    } else {
      rd_kafka_resp_err_t ae = rd_kafka_assign(rk, NULL);
      if (ae) e = rd_kafka_error_new(ae, "%s", rd_kafka_err2str(ae));
    }
    if (e) {
      altar__kafka_warn(k, "rebalance: releasing %d partitions failed: %s", parts->cnt, rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    }
  } else {
    altar__kafka_warn(k, "rebalance error: %s", rd_kafka_err2str(code));
    if (!cooperative) rd_kafka_assign(rk, NULL);
  }
}

/* The wake pipe for wait_fd; without it (no descriptors left) callers wait
 * inside consume as before. */
static void wake_open(altar__kafka_t *k) {
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return;
  rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(k->cons);
  if (!q) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  rd_kafka_queue_io_event_enable(q, fds[1], "w", 1);
  rd_kafka_queue_destroy(q);
  k->wake_r = fds[0];
  k->wake_w = fds[1];
  k->wake_on = true;
}

/* After rd_kafka_destroy of the consumer: nothing writes to it any more. */
static void destroy_consumer(altar__kafka_t *k) {
  rd_kafka_destroy(k->cons);
  k->cons = NULL;
  if (k->wake_on) {
    close(k->wake_r);
    close(k->wake_w);
    k->wake_on = false;
  }
}

static void wake_drain(altar__kafka_t *k) {
  char buf[64];
  if (k->wake_on)
    while (read(k->wake_r, buf, sizeof buf) > 0) {}
}

int altar__kafka_wait_fd(altar_transport_t *t) {
  altar__kafka_t *k = altar__kafka(t);
  return k->cons && k->wake_on && !k->left ? k->wake_r : -1;
}

static int make_consumer(altar__kafka_t *k, const char *group, bool for_group, altar_error_t *err) {
  rd_kafka_conf_t *conf = altar__kafka_conf_build(&k->props, ALTAR__KAFKA_CONSUMER, group, &k->sec, err);
  if (!conf) return err ? err->code : ALTAR_ECONFIG;
  altar__kafka_conf_wire(k, conf);
  if (for_group) rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
  char errstr[512];
  k->cons = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!k->cons) {
    rd_kafka_conf_destroy(conf);
    altar__kafka_redact(&k->sec, errstr, sizeof errstr);
    return altar_error_set(err, ALTAR_ECONFIG, "transport kafka: cannot create the consumer: %s", errstr);
  }
  rd_kafka_poll_set_consumer(k->cons);
  wake_open(k);
  altar__kafka_handle_wire(k, k->cons);
  return ALTAR_OK;
}

/* ---- subscribe / assign ------------------------------------------------------ */

int altar__kafka_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n_topics,
                           altar_rebalance_cb cb, void *cb_ctx, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  if (k->cons) return altar_error_set(err, ALTAR_ESTATE, "subscribe: this handle already consumes");
  int rc = altar_transport_check_name("group", group, err);
  if (rc) return rc;
  char store[ALTAR_GROUP_NAME_MAX + 16];
  if (altar__kafka_offsets_group(group, store, sizeof store))
    return altar_error_set(
        err, ALTAR_EINVAL, "group: longer than %zu characters (its offsets are kept in group <group>%s)",
        (size_t)ALTAR_GROUP_NAME_MAX - strlen(ALTAR__KAFKA_OFFSETS_SUFFIX), ALTAR__KAFKA_OFFSETS_SUFFIX);
  if (n_topics == 0 || !topics) return altar_error_set(err, ALTAR_EINVAL, "subscribe: no topics");
  for (size_t i = 0; i < n_topics; i++)
    if ((rc = altar_transport_check_name("topic", topics[i], err))) return rc;
  if (!(k->group = strdup(group))) return altar_error_set(err, ALTAR_ENOMEM, "subscribe: out of memory");
  k->rb_cb = cb;
  k->rb_ctx = cb_ctx;
  if ((rc = make_consumer(k, group, true, err))) goto fail;
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n_topics);
  for (size_t i = 0; i < n_topics; i++) rd_kafka_topic_partition_list_add(l, topics[i], RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t code = rd_kafka_subscribe(k->cons, l);
  rd_kafka_topic_partition_list_destroy(l);
  if (code) {
    rc = altar__kafka_err(k, err, code, "subscribe group %s", group);
    destroy_consumer(k);
    goto fail;
  }
  k->subscribed = true;
  return ALTAR_OK;
fail:
  free(k->group);
  k->group = NULL;
  k->rb_cb = NULL;
  return rc;
}

int altar__kafka_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  if (k->cons) return altar_error_set(err, ALTAR_ESTATE, "assign: this handle already consumes");
  int rc = check_parts("assign", parts, n, err);
  if (rc) return rc;
  /* A private group: librdkafka wants one, and nothing is ever committed under it. */
  static unsigned seq;
  char group[96];
  snprintf(group, sizeof group, "altar-reader-%ld-%u-%ld", (long)getpid(), ++seq, (long)time(NULL));
  if ((rc = make_consumer(k, group, false, err))) return rc;
  rd_kafka_topic_partition_list_t *l = to_list(parts, n, true);
  rd_kafka_resp_err_t code = rd_kafka_assign(k->cons, l);
  rd_kafka_topic_partition_list_destroy(l);
  if (code) {
    destroy_consumer(k);
    return altar__kafka_err(k, err, code, "assign %zu partitions", n);
  }
  for (size_t i = 0; i < n; i++) pos_set(k, parts[i].topic, parts[i].partition, parts[i].offset);
  return ALTAR_OK;
}

/* ---- consume ------------------------------------------------------------------ */

typedef struct kmsg {
  altar_msg_t msg;
  rd_kafka_message_t *rkm;
  altar_header_t hdrs[];
} kmsg_t;

static void kmsg_destroy(altar_msg_t *m) {
  kmsg_t *km = (kmsg_t *)m;
  rd_kafka_message_destroy(km->rkm);
  free(km);
}

int altar__kafka_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *pmsg = NULL;
  int rc = need_consumer(k, "consume", err);
  if (rc) return rc;
  if (k->left) {
    /* Still served (logs, stray fetch errors), never handed out. */
    rd_kafka_message_t *m = rd_kafka_consumer_poll(k->cons, timeout_ms < 0 ? 1000 : timeout_ms);
    if (m) rd_kafka_message_destroy(m);
    return ALTAR_OK;
  }
  /* Drained before the queue is read: a wake written after this read is
   * news the caller's poll of wait_fd must see. */
  wake_drain(k);
  rd_kafka_message_t *m = rd_kafka_consumer_poll(k->cons, timeout_ms < 0 ? -1 : timeout_ms);
  if (!m) return ALTAR_OK;
  if (m->err) {
    rd_kafka_resp_err_t code = m->err;
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
    if (code == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      rd_kafka_message_destroy(m);
      return ALTAR_OK;
    }
    char what[256];
    snprintf(what, sizeof what, "consume %s [%d]: %.*s", topic, (int)m->partition, (int)(m->len < 160 ? m->len : 160),
             m->payload ? (const char *)m->payload : "");
    rd_kafka_message_destroy(m);
    return altar__kafka_err(k, err, code, "%s", what);
  }
  rd_kafka_headers_t *hdrs = NULL;
  size_t nh = 0;
  if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) nh = rd_kafka_header_cnt(hdrs);
  const char *topic = rd_kafka_topic_name(m->rkt);
  if (nh > ALTAR_HEADERS_MAX) {
    altar__kafka_warn(k, "consume %s [%d] @%lld: %zu headers, only the first %d are kept", topic, (int)m->partition,
                      (long long)m->offset, nh, ALTAR_HEADERS_MAX);
    nh = ALTAR_HEADERS_MAX;
  }
  kmsg_t *km = calloc(1, sizeof *km + nh * sizeof km->hdrs[0]);
  if (!km) {
    rd_kafka_message_destroy(m);
    return altar_error_set(err, ALTAR_ENOMEM, "consume: out of memory");
  }
  for (size_t i = 0; i < nh; i++) {
    const char *name = NULL;
    const void *val = NULL;
    size_t len = 0;
    rd_kafka_header_get_all(hdrs, i, &name, &val, &len);
    km->hdrs[i] = (altar_header_t){name, val, val ? len : 0};
  }
  rd_kafka_timestamp_type_t tstype;
  int64_t ts = rd_kafka_message_timestamp(m, &tstype);
  km->rkm = m;
  km->msg = (altar_msg_t){
      .topic = topic,
      .partition = m->partition,
      .offset = m->offset,
      .key = m->key,
      .key_len = m->key ? m->key_len : 0,
      .value = m->payload,
      .value_len = m->payload ? m->len : 0,
      .headers = nh ? km->hdrs : NULL,
      .n_headers = nh,
      .timestamp_ms = ts >= 0 ? ts : 0,
      .destroy_ = kmsg_destroy,
      .priv_ = km,
  };
  pos_set(k, topic, m->partition, m->offset + 1);
  *pmsg = &km->msg;
  return ALTAR_OK;
}

/* ---- pause / resume / seek ------------------------------------------------------ */

static int pause_resume(altar__kafka_t *k, bool pause, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  const char *what = pause ? "pause" : "resume";
  int rc = need_consumer(k, what, err);
  if (!rc) rc = check_parts(what, parts, n, err);
  if (rc) return rc;
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n ? (int)n : 1);
  for (size_t i = 0; i < n; i++) {
    rd_kafka_topic_partition_t *a = assigning(k, parts[i].topic, parts[i].partition);
    if (a) k->assigning_paused[a - k->assigning->elems] = pause; /* applied once assigned */
    else rd_kafka_topic_partition_list_add(l, parts[i].topic, parts[i].partition);
  }
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (l->cnt) code = pause ? rd_kafka_pause_partitions(k->cons, l) : rd_kafka_resume_partitions(k->cons, l);
  for (int i = 0; !code && i < l->cnt; i++)
    if (l->elems[i].err) {
      rc = altar__kafka_err(k, err, l->elems[i].err, "%s %s [%d]", what, l->elems[i].topic, (int)l->elems[i].partition);
      break;
    }
  if (code) rc = altar__kafka_err(k, err, code, "%s %zu partitions", what, n);
  rd_kafka_topic_partition_list_destroy(l);
  return rc;
}

int altar__kafka_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return pause_resume(altar__kafka(t), true, parts, n, err);
}

int altar__kafka_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return pause_resume(altar__kafka(t), false, parts, n, err);
}

int altar__kafka_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  int rc = need_consumer(k, "seek", err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (partition < 0 || (offset < 0 && offset != ALTAR_OFFSET_BEGINNING && offset != ALTAR_OFFSET_END))
    return altar_error_set(err, ALTAR_EINVAL, "seek %s [%d]: offset %lld is invalid", topic, (int)partition,
                           (long long)offset);
  if (!owns(k, topic, partition))
    return altar_error_set(err, ALTAR_ESTATE, "seek %s [%d]: partition is not assigned to this consumer", topic,
                           (int)partition);
  rd_kafka_topic_partition_t *a = assigning(k, topic, partition);
  if (a) {
    /* Inside the ASSIGN callback: this becomes the start offset. */
    a->offset = offset;
    pos_set(k, topic, partition, offset);
    return ALTAR_OK;
  }
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
  rd_kafka_error_t *e = rd_kafka_seek_partitions(k->cons, l, k->timeout_ms);
  if (e) {
    rc = altar__kafka_err(k, err, rd_kafka_error_code(e), "seek %s [%d] to %lld", topic, (int)partition,
                          (long long)offset);
    rd_kafka_error_destroy(e);
  } else if (l->elems[0].err) {
    rc = altar__kafka_err(k, err, l->elems[0].err, "seek %s [%d] to %lld", topic, (int)partition, (long long)offset);
  } else {
    pos_set(k, topic, partition, offset);
  }
  rd_kafka_topic_partition_list_destroy(l);
  return rc;
}

/* ---- commit --------------------------------------------------------------------- */

int altar__kafka_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                        const char *metadata, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  int rc = need_consumer(k, "commit", err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (!k->subscribed)
    return altar_error_set(err, ALTAR_ESTATE, "commit %s [%d]: no group (commits need subscribe)", topic,
                           (int)partition);
  if (partition < 0 || offset < 0)
    return altar_error_set(err, ALTAR_EINVAL, "commit %s [%d]: offset %lld is invalid", topic, (int)partition,
                           (long long)offset);
  size_t mlen = metadata ? strlen(metadata) : 0;
  if (mlen > ALTAR_COMMIT_METADATA_MAX)
    return altar_error_set(err, ALTAR_ETOOBIG, "commit %s [%d]: metadata of %zu bytes exceeds %d", topic,
                           (int)partition, mlen, ALTAR_COMMIT_METADATA_MAX);
  int64_t deadline = altar_mono_ms() + k->timeout_ms;
  for (int attempt = 1;; attempt++) {
    /* The offsets group fences nothing itself (no generation): only an
     * owner commits, and never once its assignment was lost (the group may
     * have given the partition to someone else already). */
    if (!owns(k, topic, partition))
      return altar_error_set(err, ALTAR_ESTATE, "commit %s [%d]: partition is not assigned to this member of group %s",
                             topic, (int)partition, k->group);
    if (rd_kafka_assignment_lost(k->cons))
      return altar_error_set(err, ALTAR_ESTATE, "commit %s [%d]: this member's assignment in group %s was lost", topic,
                             (int)partition, k->group);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_add(l, topic, partition);
    p->offset = offset;
    if (mlen) {
      /* The list frees metadata with free(). */
      if (!(p->metadata = malloc(mlen))) {
        rd_kafka_topic_partition_list_destroy(l);
        return altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
      }
      memcpy(p->metadata, metadata, mlen);
      p->metadata_size = mlen;
    }
    altar_error_t se = {0};
    rd_kafka_resp_err_t code = altar__kafka_store_commit(k, l, &se);
    if (code == RD_KAFKA_RESP_ERR__INVALID_ARG && se.code) {
      rd_kafka_topic_partition_list_destroy(l);
      if (err) *err = se;
      return se.code;
    }
    if (!code && l->elems[0].err) code = l->elems[0].err;
    rd_kafka_topic_partition_list_destroy(l);
    if (!code) return ALTAR_OK;
    altar_error_t e = {0};
    rc = altar__kafka_err(k, &e, code, "commit %s [%d] at %lld for group %s", topic, (int)partition, (long long)offset,
                          k->group);
    /* A coordinator that moved or a broker that blinked is worth another
     * try; a lost generation is not: the partition may be someone else's. */
    if (!e.retriable || rc == ALTAR_ESTATE || altar_mono_ms() + 250 > deadline) {
      if (err) *err = e;
      return rc;
    }
    altar__kafka_warn(k, "retrying (attempt %d) after: %s", attempt + 1, e.msg);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* ---- assignment / caught up ---------------------------------------------------- */

int altar__kafka_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *pparts = NULL;
  *pn = 0;
  int rc = need_consumer(k, "assignment", err);
  if (rc) return rc;
  rd_kafka_topic_partition_list_t *l = NULL;
  rd_kafka_resp_err_t code = rd_kafka_assignment(k->cons, &l);
  if (code) return altar__kafka_err(k, err, code, "assignment");
  if (k->assignment_store) rd_kafka_topic_partition_list_destroy(k->assignment_store);
  k->assignment_store = l;
  if (l->cnt == 0) return ALTAR_OK;
  altar_tp_t *out = calloc((size_t)l->cnt, sizeof *out);
  if (!out) return altar_error_set(err, ALTAR_ENOMEM, "assignment: out of memory");
  for (int i = 0; i < l->cnt; i++) {
    const altar__kafka_pos_t *p = pos_find(k, l->elems[i].topic, l->elems[i].partition);
    out[i] = (altar_tp_t){l->elems[i].topic, l->elems[i].partition, p ? p->offset : ALTAR_OFFSET_INVALID};
  }
  *pparts = out;
  *pn = (size_t)l->cnt;
  return ALTAR_OK;
}

int altar__kafka_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  *pdone = false;
  int rc = need_consumer(k, "caught_up", err);
  if (rc) return rc;
  rd_kafka_topic_partition_list_t *l = NULL;
  rd_kafka_resp_err_t code = rd_kafka_assignment(k->cons, &l);
  if (code) return altar__kafka_err(k, err, code, "caught_up");
  if (l->cnt == 0) {
    rd_kafka_topic_partition_list_destroy(l);
    return ALTAR_OK;
  }
  /* Where each partition starts when nothing was read from it yet. */
  rd_kafka_topic_partition_list_t *committed = NULL;
  const char *reset = altar_strmap_get(&k->props, "auto.offset.reset");
  bool from_end = reset && (!strcmp(reset, "latest") || !strcmp(reset, "largest") || !strcmp(reset, "end"));
  bool done = true;
  for (int i = 0; i < l->cnt && done && !rc; i++) {
    const char *topic = l->elems[i].topic;
    int32_t part = l->elems[i].partition;
    int64_t lo = 0, hi = 0;
    code = rd_kafka_query_watermark_offsets(altar__kafka_offsets_handle(k), topic, part, &lo, &hi, k->timeout_ms);
    if (code) {
      rc = altar__kafka_err(k, err, code, "caught_up: end offset of %s [%d]", topic, (int)part);
      break;
    }
    const altar__kafka_pos_t *p = pos_find(k, topic, part);
    int64_t at = p ? p->offset : ALTAR_OFFSET_INVALID;
    if (at == ALTAR_OFFSET_INVALID && k->subscribed) {
      if (!committed) {
        committed = rd_kafka_topic_partition_list_copy(l);
        altar_error_t ce = {0};
        code = altar__kafka_committed_list(k, k->group, committed, k->timeout_ms, &ce);
        if (code) {
          rc = altar__kafka_err(k, err, code, "caught_up: committed offsets of group %s", k->group);
          break;
        }
      }
      rd_kafka_topic_partition_t *c = rd_kafka_topic_partition_list_find(committed, topic, part);
      if (c && c->offset >= 0) at = c->offset;
    }
    if (at == ALTAR_OFFSET_INVALID) at = from_end ? ALTAR_OFFSET_END : ALTAR_OFFSET_BEGINNING;
    if (at == ALTAR_OFFSET_BEGINNING) at = lo;
    if (at == ALTAR_OFFSET_END) at = hi;
    if (at < hi) done = false;
  }
  if (committed) rd_kafka_topic_partition_list_destroy(committed);
  rd_kafka_topic_partition_list_destroy(l);
  if (!rc) *pdone = done;
  return rc;
}

/* ---- leave ---------------------------------------------------------------------- */

static int assigned_count(altar__kafka_t *k) {
  rd_kafka_topic_partition_list_t *l = NULL;
  if (rd_kafka_assignment(k->cons, &l)) return -1;
  int n = l->cnt;
  rd_kafka_topic_partition_list_destroy(l);
  return n;
}

int altar__kafka_leave(altar_transport_t *t, altar_error_t *err) {
  altar__kafka_t *k = altar__kafka(t);
  if (!k->cons || !k->subscribed || k->left) return ALTAR_OK;
  /* Unsubscribing revokes everything (our rebalance_cb, served by the polls
   * below) and then sends LeaveGroup, so the coordinator rebalances the
   * others at once instead of waiting out session.timeout.ms. */
  rd_kafka_resp_err_t code = rd_kafka_unsubscribe(k->cons);
  if (code) return altar__kafka_err(k, err, code, "leave group %s", k->group);
  k->left = true;
  int64_t deadline = altar_mono_ms() + k->close_timeout_ms;
  int n;
  while ((n = assigned_count(k)) != 0 && altar_mono_ms() < deadline) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(k->cons, 50);
    if (m) rd_kafka_message_destroy(m); /* a record of a partition being given up */
  }
  /* LeaveGroup goes out once the unassignment is done: give the main thread
   * a moment to send it before the caller goes on. */
  for (int i = 0; i < 4; i++) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(k->cons, 25);
    if (m) rd_kafka_message_destroy(m);
  }
  altar__kafka_pos_clear(k);
  if (n != 0)
    return altar_error_set(err, ALTAR_ETIMEOUT, "leave group %s: %d partition(s) still assigned after %d ms", k->group,
                           n, k->close_timeout_ms);
  return ALTAR_OK;
}

/* ---- close ---------------------------------------------------------------------- */

void altar__kafka_consumer_close(altar__kafka_t *k) {
  if (!k->cons) return;
  /* Leaves the group: the REVOKE callback runs here, so a member can still
   * commit what it finished. */
  /* Lists librdkafka made keep references to its partitions: drop them
   * first, or rd_kafka_destroy waits for them forever. */
  if (k->assignment_store) {
    rd_kafka_topic_partition_list_destroy(k->assignment_store);
    k->assignment_store = NULL;
  }
  rd_kafka_resp_err_t code = rd_kafka_consumer_close(k->cons);
  if (code) altar__kafka_warn(k, "close: leaving the group: %s", rd_kafka_err2str(code));
  destroy_consumer(k);
  k->subscribed = false;
}
