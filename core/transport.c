/* Transport plumbing shared by every transport: the registry, opening (where
 * the optional operations get their defaults) and closing, the operations
 * callers call, the key partitioner, name checks, logging, and the
 * list/message frees. */
#include "altar/plugin/transport.h"

#include "altar/registry.h"
#include "core/transport_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry (the shared one in core/registry.c) ----------------------- */

/* The first required operation ops lacks ("name" first), or NULL. */
const char *altar__transport_missing(const altar_transport_ops_t *ops) {
  if (!ops) return "(the vtable)";
  const struct {
    const char *name;
    bool set;
  } required[] = {
      {"name", ops->name},
      {"open", ops->open},
      {"close", ops->close},
      {"produce", ops->produce},
      {"poll", ops->poll},
      {"flush", ops->flush},
      {"create_topic", ops->create_topic},
      {"list_topics", ops->list_topics},
      {"subscribe", ops->subscribe},
      {"consume", ops->consume},
      {"pause", ops->pause},
      {"resume", ops->resume},
      {"seek", ops->seek},
      {"commit", ops->commit},
      {"committed", ops->committed},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].set) return required[i].name;
  return NULL;
}

int altar_transport_register(const altar_transport_ops_t *ops) {
  if (altar__transport_missing(ops)) return ALTAR_EINVAL;
  return altar_registry_register(ALTAR_REGISTRY_TRANSPORT, ops->name, ops, NULL);
}

const altar_transport_ops_t *altar_transport_lookup(const char *name) {
  if (!name) return NULL;
  return altar_registry_lookup(ALTAR_REGISTRY_TRANSPORT, name);
}

/* ---- defaults of the optional operations (filled in once, at open) ----- */

static int default_leave(altar_transport_t *t, altar_error_t *err) {
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: leave not supported (close the transport to leave)", t->ops.name);
}

static int default_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  (void)parts, (void)n;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: assign not supported", t->ops.name);
}

static int default_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err) {
  (void)pparts, (void)pn;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: assignment not supported", t->ops.name);
}

static int default_wait_fd(altar_transport_t *t) {
  (void)t;
  return -1;
}

static int default_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err) {
  (void)pdone;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: caught_up not supported", t->ops.name);
}

static int default_delete_records(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                  int64_t *pbeginning, altar_error_t *err) {
  (void)topic, (void)partition, (void)before, (void)pbeginning;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: delete_records not supported", t->ops.name);
}

static int default_topic_retention_ms(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err) {
  (void)topic, (void)pms;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: topic retention not known", t->ops.name);
}

static int default_retention_due(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err) {
  (void)pdue;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: no retention of its own", t->ops.name);
}

static int default_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                                 altar_error_t *err) {
  (void)group, (void)topic, (void)timeout_ms, (void)pn;
  return altar_error_set(err, ALTAR_ENOTSUP, "%s: topic_members not supported", t->ops.name);
}

static int default_lag(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                       altar_lag_list_t **plist, altar_error_t *err);

/* A transport without a cheaper way: the topic's listing. */
static int default_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                               int64_t *pends, altar_error_t *err) {
  altar_topic_list_t *tl = NULL;
  int rc = t->ops.list_topics(t, topic, timeout_ms, &tl, err);
  if (rc) return rc;
  const altar_topic_info_t *ti = tl->n_topics ? &tl->topics[0] : NULL;
  for (size_t i = 0; i < n; i++) {
    pends[i] = ALTAR_OFFSET_INVALID;
    for (size_t j = 0; ti && j < ti->n_partitions; j++)
      if (ti->partitions[j].partition == parts[i]) pends[i] = ti->partitions[j].end;
  }
  altar_topic_list_free(tl);
  return ALTAR_OK;
}

/* ---- lifecycle ---------------------------------------------------------- */

altar_transport_t *altar_transport_open_ops(const altar_transport_ops_t *ops, const altar_strmap_t *config,
                                            const altar_transport_opts_t *opts, altar_error_t *err) {
  const char *missing = altar__transport_missing(ops);
  if (missing) {
    altar_error_set(err, ALTAR_EINVAL, "transport %s: lacks the required operation '%s'",
                    ops && ops->name ? ops->name : "(null)", missing);
    return NULL;
  }
  altar_transport_t *t = calloc(1, sizeof *t);
  if (!t) {
    altar_error_set(err, ALTAR_ENOMEM, "transport %s: out of memory", ops->name);
    return NULL;
  }
  t->table = ops;
  t->ops = *ops;
  if (!t->ops.leave) t->ops.leave = default_leave;
  if (!t->ops.assign) t->ops.assign = default_assign;
  if (!t->ops.assignment) t->ops.assignment = default_assignment;
  if (!t->ops.caught_up) t->ops.caught_up = default_caught_up;
  if (!t->ops.wait_fd) t->ops.wait_fd = default_wait_fd;
  if (!t->ops.topic_members) t->ops.topic_members = default_topic_members;
  if (!t->ops.delete_records) t->ops.delete_records = default_delete_records;
  if (!t->ops.topic_retention_ms) t->ops.topic_retention_ms = default_topic_retention_ms;
  if (!t->ops.retention_due) t->ops.retention_due = default_retention_due;
  if (!t->ops.lag) t->ops.lag = default_lag;
  if (!t->ops.end_offsets) t->ops.end_offsets = default_end_offsets;
  if (opts) t->opts = *opts;
  if (t->ops.open(t, config, err) != 0) {
    free(t);
    return NULL;
  }
  return t;
}

altar_transport_t *altar_transport_open(const char *name, const altar_strmap_t *config,
                                        const altar_transport_opts_t *opts, altar_error_t *err) {
  const void *ops = NULL;
  if (altar_registry_get(ALTAR_REGISTRY_TRANSPORT, name ? name : "(null)", &ops, err) != 0) {
    altar_error_prefix(err, "transport.name");
    return NULL;
  }
  return altar_transport_open_ops(ops, config, opts, err);
}

void altar_transport_close(altar_transport_t *t) {
  if (!t) return;
  t->ops.close(t);
  free(t);
}

/* ---- messages and lists ------------------------------------------------- */

void altar_msg_free(altar_msg_t *m) {
  if (m && m->destroy_) m->destroy_(m);
}

int altar_msg_header(const altar_msg_t *m, const char *name, const void **pvalue, size_t *plen) {
  for (size_t i = m->n_headers; i > 0; i--) {
    if (!strcmp(m->headers[i - 1].name, name)) {
      *pvalue = m->headers[i - 1].value;
      *plen = m->headers[i - 1].value_len;
      return 0;
    }
  }
  return ALTAR_ENOTFOUND;
}

void altar_topic_list_free(altar_topic_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_topics; i++) {
    free(l->topics[i].name);
    free(l->topics[i].partitions);
  }
  free(l->topics);
  free(l);
}

void altar_lag_list_free(altar_lag_list_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) {
    free(l->entries[i].topic);
    free(l->entries[i].metadata);
  }
  free(l->entries);
  free(l);
}

/* ---- partitioner -------------------------------------------------------- */

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2). */
int32_t altar_murmur2(const void *key, size_t len) {
  const uint32_t seed = 0x9747b28cu, m = 0x5bd1e995u;
  const int r = 24;
  const uint8_t *d = key;
  uint32_t h = seed ^ (uint32_t)len;
  size_t n4 = len / 4;
  for (size_t i = 0; i < n4; i++) {
    size_t i4 = i * 4;
    uint32_t k =
        (uint32_t)d[i4] | ((uint32_t)d[i4 + 1] << 8) | ((uint32_t)d[i4 + 2] << 16) | ((uint32_t)d[i4 + 3] << 24);
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
  }
  size_t tail = n4 * 4;
  switch (len % 4) {
  case 3: h ^= (uint32_t)d[tail + 2] << 16; /* fall through */
  case 2: h ^= (uint32_t)d[tail + 1] << 8;  /* fall through */
  case 1: h ^= (uint32_t)d[tail]; h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return (int32_t)h;
}

int32_t altar_partition_for_key(const void *key, size_t len, int32_t n_partitions) {
  if (n_partitions <= 0) return 0;
  uint32_t h = (uint32_t)altar_murmur2(key, len) & 0x7fffffffu;
  return (int32_t)(h % (uint32_t)n_partitions);
}

/* ---- names, logs, deliveries -------------------------------------------- */

int altar_transport_check_name(const char *what, const char *name, altar_error_t *err) {
  if (!name || !*name) return altar_error_set(err, ALTAR_EINVAL, "%s: must not be empty", what);
  size_t n = strlen(name);
  if (n > ALTAR_TOPIC_NAME_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "%s: longer than %d characters", what, ALTAR_TOPIC_NAME_MAX);
  if (!strcmp(name, ".") || !strcmp(name, ".."))
    return altar_error_set(err, ALTAR_EINVAL, "%s: '%s' is not a legal name", what, name);
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return altar_error_set(err, ALTAR_EINVAL, "%s: character %zu is not one of [A-Za-z0-9._-]", what, i);
  }
  return 0;
}

void altar_transport_log(altar_transport_t *t, int level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (t && t->opts.on_log) {
    t->opts.on_log(t, level, line, t->opts.log_ctx);
  } else if (level <= 4) {
    fprintf(stderr, "altar %s: %s: %s\n", t ? t->ops.name : "transport", level <= 3 ? "error" : "warning", line);
  }
}

void altar_transport_set_delivery(altar_transport_t *t, altar_delivery_cb cb, void *ctx, altar_delivery_cb *pprev,
                                  void **pprev_ctx) {
  if (pprev) *pprev = t ? t->opts.on_delivery : NULL;
  if (pprev_ctx) *pprev_ctx = t ? t->opts.delivery_ctx : NULL;
  if (!t) return;
  t->opts.on_delivery = cb;
  t->opts.delivery_ctx = ctx;
}

void altar_transport_detach(altar_transport_t *t) {
  if (!t) return;
  t->rebalance_cb = NULL;
  t->rebalance_ctx = NULL;
  altar_transport_set_delivery(t, NULL, NULL, NULL, NULL);
}

void altar__transport_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                void *ctx) {
  (void)ctx;
  if (t->rebalance_cb) t->rebalance_cb(t, kind, parts, n, t->rebalance_ctx);
}

void altar_transport_deliver(altar_transport_t *t, const altar_delivery_t *dr) {
  if (t->opts.on_delivery) t->opts.on_delivery(t, dr, t->opts.delivery_ctx);
}

/* ---- default lag: from list_topics and committed ------------------------ */

static int default_lag(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                       altar_lag_list_t **plist, altar_error_t *err) {
  *plist = NULL;
  int rc = altar_transport_check_name("group", group, err);
  if (rc) return rc;
  altar_topic_list_t *tl = NULL;
  rc = t->ops.list_topics(t, topic, timeout_ms, &tl, err);
  if (rc) return rc;
  altar_lag_list_t *out = calloc(1, sizeof *out);
  size_t total = 0;
  for (size_t i = 0; i < tl->n_topics; i++) total += tl->topics[i].n_partitions;
  if (!out || (total && !(out->entries = calloc(total, sizeof *out->entries)))) {
    free(out);
    altar_topic_list_free(tl);
    return altar_error_set(err, ALTAR_ENOMEM, "lag: out of memory");
  }
  for (size_t i = 0; i < tl->n_topics && !rc; i++) {
    const altar_topic_info_t *ti = &tl->topics[i];
    for (size_t j = 0; j < ti->n_partitions; j++) {
      altar_lag_entry_t *e = &out->entries[out->n];
      int64_t off = ALTAR_OFFSET_INVALID;
      char *md = NULL;
      rc = t->ops.committed(t, group, ti->name, ti->partitions[j].partition, timeout_ms, &off, &md, err);
      if (rc) break;
      e->topic = strdup(ti->name);
      if (!e->topic) {
        free(md);
        rc = altar_error_set(err, ALTAR_ENOMEM, "lag: out of memory");
        break;
      }
      e->partition = ti->partitions[j].partition;
      e->end = ti->partitions[j].end;
      e->committed = off;
      e->metadata = md;
      int64_t from = off >= 0 ? off : ti->partitions[j].beginning;
      e->lag = e->end > from ? e->end - from : 0;
      out->n++;
    }
  }
  altar_topic_list_free(tl);
  if (rc) {
    altar_lag_list_free(out);
    return rc;
  }
  if (!topic) {
    /* Keep only topics on which the group committed at least once. */
    size_t w = 0;
    for (size_t i = 0; i < out->n;) {
      size_t j = i;
      bool any = false;
      while (j < out->n && !strcmp(out->entries[j].topic, out->entries[i].topic)) {
        if (out->entries[j].committed != ALTAR_OFFSET_INVALID) any = true;
        j++;
      }
      for (size_t k = i; k < j; k++) {
        if (any) {
          out->entries[w++] = out->entries[k];
        } else {
          free(out->entries[k].topic);
          free(out->entries[k].metadata);
        }
      }
      i = j;
    }
    out->n = w;
  }
  *plist = out;
  return 0;
}

/* ---- operations (altar/transport.h): no NULL tests, open filled them ---- */

const char *altar_transport_name(const altar_transport_t *t) { return t->ops.name; }

int altar_transport_produce(altar_transport_t *t, const altar_produce_rec_t *rec, altar_error_t *err) {
  return t->ops.produce(t, rec, err);
}

int altar_transport_poll(altar_transport_t *t, int timeout_ms) { return t->ops.poll(t, timeout_ms); }

int altar_transport_flush(altar_transport_t *t, int timeout_ms, altar_error_t *err) {
  return t->ops.flush(t, timeout_ms, err);
}

int altar_transport_create_topic(altar_transport_t *t, const char *topic, int32_t partitions, altar_error_t *err) {
  return t->ops.create_topic(t, topic, partitions, err);
}

int altar_transport_list_topics(altar_transport_t *t, const char *topic, int timeout_ms, altar_topic_list_t **plist,
                                altar_error_t *err) {
  return t->ops.list_topics(t, topic, timeout_ms, plist, err);
}

int altar_transport_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n_topics,
                              altar_rebalance_cb cb, void *cb_ctx, altar_error_t *err) {
  /* Set before the call (an assignment may come within it); a refused
   * subscribe (e.g. a second one) keeps the callback already there. */
  altar_rebalance_cb was_cb = t->rebalance_cb;
  void *was_ctx = t->rebalance_ctx;
  t->rebalance_cb = cb;
  t->rebalance_ctx = cb_ctx;
  int rc = t->ops.subscribe(t, group, topics, n_topics, cb ? altar__transport_rebalance : NULL, NULL, err);
  if (rc) t->rebalance_cb = was_cb, t->rebalance_ctx = was_ctx;
  return rc;
}

int altar_transport_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return t->ops.assign(t, parts, n, err);
}

int altar_transport_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err) {
  *pmsg = NULL;
  return t->ops.consume(t, timeout_ms, pmsg, err);
}

int altar_transport_wait_fd(altar_transport_t *t) { return t->ops.wait_fd(t); }

int altar_transport_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return t->ops.pause(t, parts, n, err);
}

int altar_transport_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return t->ops.resume(t, parts, n, err);
}

int altar_transport_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                         altar_error_t *err) {
  return t->ops.seek(t, topic, partition, offset, err);
}

int altar_transport_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                           const char *metadata, altar_error_t *err) {
  return t->ops.commit(t, topic, partition, offset, metadata, err);
}

int altar_transport_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                              int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err) {
  *poffset = ALTAR_OFFSET_INVALID;
  *pmetadata = NULL;
  return t->ops.committed(t, group, topic, partition, timeout_ms, poffset, pmetadata, err);
}

int altar_transport_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err) {
  *pparts = NULL;
  *pn = 0;
  return t->ops.assignment(t, pparts, pn, err);
}

int altar_transport_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err) {
  *pdone = false;
  return t->ops.caught_up(t, pdone, err);
}

int altar_transport_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                                  size_t *pn, altar_error_t *err) {
  *pn = 0;
  return t->ops.topic_members(t, group, topic, timeout_ms, pn, err);
}

int altar_transport_leave(altar_transport_t *t, altar_error_t *err) { return t->ops.leave(t, err); }

int altar_transport_create_topic_config(altar_transport_t *t, const char *topic, int32_t partitions,
                                        const altar_strmap_t *config, altar_error_t *err) {
  if (!t->ops.create_topic_config || !config || !config->n) return t->ops.create_topic(t, topic, partitions, err);
  return t->ops.create_topic_config(t, topic, partitions, config, err);
}

int altar_transport_topic_retention_ms(altar_transport_t *t, const char *topic, int64_t *pms, altar_error_t *err) {
  *pms = -1;
  return t->ops.topic_retention_ms(t, topic, pms, err);
}

int altar_transport_retention_due(altar_transport_t *t, altar_retention_due_t *pdue, altar_error_t *err) {
  memset(pdue, 0, sizeof *pdue);
  return t->ops.retention_due(t, pdue, err);
}

int altar_transport_delete_records(altar_transport_t *t, const char *topic, int32_t partition, int64_t before,
                                   int64_t *pbeginning, altar_error_t *err) {
  int64_t ignored;
  if (!pbeginning) pbeginning = &ignored;
  *pbeginning = -1;
  if (before < 0)
    return altar_error_set(err, ALTAR_EINVAL, "delete records of %s/%d: offset %lld is not valid", topic,
                           (int)partition, (long long)before);
  return t->ops.delete_records(t, topic, partition, before, pbeginning, err);
}

int altar_transport_lag(altar_transport_t *t, const char *group, const char *topic, int timeout_ms,
                        altar_lag_list_t **plist, altar_error_t *err) {
  *plist = NULL;
  return t->ops.lag(t, group, topic, timeout_ms, plist, err);
}

int altar_transport_end_offsets(altar_transport_t *t, const char *topic, const int32_t *parts, size_t n, int timeout_ms,
                                int64_t *pends, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) pends[i] = ALTAR_OFFSET_INVALID;
  int rc = altar_transport_check_name("topic", topic, err);
  return rc ? rc : t->ops.end_offsets(t, topic, parts, n, timeout_ms, pends, err);
}
