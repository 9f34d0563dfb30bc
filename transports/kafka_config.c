/* kafka transport: librdkafka configuration pass-through, the settings altar
 * insists on, and keeping secrets out of every message. */
#include "transports/kafka_config.h"

#include "altar/buf.h"
#include "altar/spec.h"
#include "core/unconst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REDACTED "[redacted]"

_Static_assert((ALTAR_MAX_MESSAGE + (64u << 10)) == 4259840u,
               "ALTAR__KAFKA_MESSAGE_MAX_BYTES follows ALTAR_MAX_MESSAGE");

/* Settings altar depends on. A user value outside `accept` is refused rather
 * than silently overridden: a config that says acks=1 would otherwise look
 * honoured while altar's delivery guarantee quietly changed. */
typedef struct required {
  altar__kafka_role_t role;
  const char *key;
  const char *alias; /* librdkafka's other name for the same property, or NULL */
  const char *value;
  const char *accept[3];
  const char *why;
} required_t;

static const required_t required[] = {
    {ALTAR__KAFKA_PRODUCER,
     "enable.idempotence",
     NULL,
     "true",
     {"true", "1"},
     "acknowledged records must be written exactly once and in order"},
    {ALTAR__KAFKA_PRODUCER,
     "acks",
     "request.required.acks",
     "all",
     {"all", "-1"},
     "a record counts as delivered only once every in-sync replica has it"},
    {ALTAR__KAFKA_PRODUCER,
     "partitioner",
     NULL,
     "murmur2_random",
     {"murmur2_random"},
     "keys must map to the same partitions as in the local transport and Java clients"},
    {ALTAR__KAFKA_CONSUMER,
     "enable.auto.commit",
     NULL,
     "false",
     {"false", "0"},
     "offsets are committed only by altar, after the work is done"},
    {ALTAR__KAFKA_CONSUMER,
     "enable.auto.offset.store",
     NULL,
     "false",
     {"false", "0"},
     "offsets are committed only by altar, after the work is done"},
    {ALTAR__KAFKA_CONSUMER,
     "partition.assignment.strategy",
     NULL,
     "cooperative-sticky",
     {"cooperative-sticky"},
     "altar rebalances incrementally (cooperative-sticky)"},
};

/* Defaults altar picks where librdkafka's suit a fleet badly; any of them
 * can be set in the config like every other property. */
typedef struct fallback {
  altar__kafka_role_t role;
  const char *key;
  const char *value;
} fallback_t;

static const fallback_t fallbacks[] = {
    /* A new group reads a topic from its start: a job queue must not skip
     * records produced before its first worker joined. */
    {ALTAR__KAFKA_CONSUMER, "auto.offset.reset", "earliest"},
    /* librdkafka's 45 s lets a dead worker's partitions sit idle for most of
     * a minute; 10 s finds it fast and stays above the broker's default
     * group.min.session.timeout.ms (6 s). Heartbeats at a third of the
     * session, as Kafka advises, so two may be lost before the member is. */
    {ALTAR__KAFKA_CONSUMER, "session.timeout.ms", "10000"},
    {ALTAR__KAFKA_CONSUMER, "heartbeat.interval.ms", "3000"},
    /* A spec, a status event or a group event page may be as large as
     * ALTAR_MAX_MESSAGE; librdkafka's 1 MB would refuse the larger ones.
     * Topics altar creates get the same bound (kafka_admin.c). */
    {ALTAR__KAFKA_PRODUCER, "message.max.bytes", ALTAR__KAFKA_MESSAGE_MAX_BYTES},
};

/* Substrings that mark a property whose value is a secret. */
static const char *const secret_marks[] = {
    "password", "secret", "key.pem", "jaas", "oauthbearer.config", "credential", "token",
};

bool altar__kafka_key_is_secret(const char *key) {
  if (!key) return false;
  for (size_t i = 0; i < sizeof secret_marks / sizeof secret_marks[0]; i++)
    if (strcasestr(key, secret_marks[i])) return true;
  /* ssl_key is the in-memory private key property. */
  return strcasecmp(key, "ssl_key") == 0;
}

int altar__kafka_secrets_add(altar__kafka_secrets_t *sec, const char *val) {
  if (!sec || !val || !*val) return ALTAR_OK;
  for (size_t i = 0; i < sec->n; i++)
    if (strcmp(sec->vals[i], val) == 0) return ALTAR_OK;
  char **v = realloc(sec->vals, (sec->n + 1) * sizeof *v);
  if (!v) return ALTAR_ENOMEM;
  sec->vals = v;
  if (!(v[sec->n] = strdup(val))) return ALTAR_ENOMEM;
  sec->n++;
  return ALTAR_OK;
}

void altar__kafka_secrets_clear(altar__kafka_secrets_t *sec) {
  if (!sec) return;
  for (size_t i = 0; i < sec->n; i++) {
    explicit_bzero(sec->vals[i], strlen(sec->vals[i]));
    free(sec->vals[i]);
  }
  free(sec->vals);
  sec->vals = NULL;
  sec->n = 0;
}

void altar__kafka_redact(const altar__kafka_secrets_t *sec, char *s, size_t cap) {
  if (!sec || !s || cap == 0) return;
  for (size_t i = 0; i < sec->n; i++) {
    const char *v = sec->vals[i];
    size_t vlen = strlen(v);
    char *p = s;
    while ((p = strstr(p, v)) != NULL) {
      size_t len = strlen(s);
      size_t at = (size_t)(p - s);
      size_t rlen = strlen(REDACTED);
      size_t tail = len - at - vlen;
      /* Keep what fits of the tail; never leave a partial secret behind. */
      size_t room = cap - 1 - at;
      size_t put = rlen < room ? rlen : room;
      size_t keep = room - put < tail ? room - put : tail;
      memmove(s + at + put, s + at + vlen, keep);
      memcpy(s + at, REDACTED, put);
      s[at + put + keep] = '\0';
      p = s + at + put;
    }
  }
}

void altar__kafka_scrub_copy(const altar__kafka_secrets_t *sec, char *dst, size_t cap, const char *msg) {
  if (!dst || cap == 0) return;
  snprintf(dst, cap, "%s", msg ? msg : "");
  altar__kafka_redact(sec, dst, cap);
}

/* Settings of the local transport (transports/local_config.c) that
 * librdkafka does not know; they share the `transport:` map, so a config
 * switched from local to kafka may still carry them. auto.offset.reset is
 * not here: both transports read it. */
static const char *const local_keys[] = {
    "dir",
    "fsync",
    "group.commit.ms",
    "group.commit.bytes",
    "retention.bytes",
    "retention.ms",
    "num.partitions",
    "segment.bytes",
    "max.record.bytes",
    "queue.max.records",
    "auto.create.topics",
    "rebalance.check.ms",
};

bool altar__kafka_key_is_ours(const char *key) {
  if (strncmp(key, "altar.", 6) == 0 || strncmp(key, "local.", 6) == 0) return true;
  for (size_t i = 0; i < sizeof local_keys / sizeof local_keys[0]; i++)
    if (strcmp(key, local_keys[i]) == 0) return true;
  return false;
}

static bool accepted(const required_t *r, const char *val) {
  for (size_t i = 0; i < sizeof r->accept / sizeof r->accept[0] && r->accept[i]; i++)
    if (strcasecmp(val, r->accept[i]) == 0) return true;
  return false;
}

static int check_required(const altar_strmap_t *props, altar__kafka_role_t role, altar_error_t *err) {
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    const required_t *r = &required[i];
    if (r->role != role) continue;
    const char *names[2] = {r->key, r->alias};
    for (size_t k = 0; k < 2 && names[k]; k++) {
      const char *v = props ? altar_strmap_get(props, names[k]) : NULL;
      if (v && !accepted(r, v))
        return altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: must be %s (got \"%s\"): %s", names[k],
                               r->value, v, r->why);
    }
  }
  return ALTAR_OK;
}

static int set_one(rd_kafka_conf_t *conf, const char *key, const char *val, const altar__kafka_secrets_t *sec,
                   altar_error_t *err) {
  char errstr[512];
  rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, key, val, errstr, sizeof errstr);
  if (res == RD_KAFKA_CONF_OK) return ALTAR_OK;
  if (res == RD_KAFKA_CONF_UNKNOWN)
    return altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: unknown librdkafka property", key);
  altar__kafka_redact(sec, errstr, sizeof errstr);
  /* librdkafka quotes a rejected value; for a secret, say only that. */
  if (altar__kafka_key_is_secret(key) && strstr(errstr, "nvalid value"))
    return altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: value rejected by librdkafka (value not shown)",
                           key);
  return altar_error_set(err, ALTAR_ECONFIG, "transport.kafka.%s: %s", key, errstr);
}

rd_kafka_conf_t *altar__kafka_conf_build(const altar_strmap_t *props, altar__kafka_role_t role, const char *group_id,
                                         altar__kafka_secrets_t *sec, altar_error_t *err) {
  if (check_required(props, role, err) != ALTAR_OK) return NULL;
  if (props)
    for (size_t i = 0; i < props->n; i++)
      if (altar__kafka_key_is_secret(props->keys[i]) && altar__kafka_secrets_add(sec, props->vals[i]) != ALTAR_OK) {
        altar_error_set(err, ALTAR_ENOMEM, "transport.kafka: out of memory");
        return NULL;
      }
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (!conf) {
    altar_error_set(err, ALTAR_ENOMEM, "transport.kafka: out of memory");
    return NULL;
  }
  if (props)
    for (size_t i = 0; i < props->n; i++) {
      /* The group comes from the subscribe call, not from shared settings. */
      if (group_id && strcmp(props->keys[i], "group.id") == 0) continue;
      if (altar__kafka_key_is_ours(props->keys[i])) continue;
      if (set_one(conf, props->keys[i], props->vals[i], sec, err) != ALTAR_OK) goto fail;
    }
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (required[i].role == role && set_one(conf, required[i].key, required[i].value, sec, err) != ALTAR_OK) goto fail;
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++)
    if (fallbacks[i].role == role && !(props && altar_strmap_get(props, fallbacks[i].key)) &&
        set_one(conf, fallbacks[i].key, fallbacks[i].value, sec, err) != ALTAR_OK)
      goto fail;
  if (role == ALTAR__KAFKA_CONSUMER && group_id && set_one(conf, "group.id", group_id, sec, err) != ALTAR_OK) goto fail;
  return conf;
fail:
  rd_kafka_conf_destroy(conf);
  return NULL;
}

char *altar__kafka_conf_describe(const rd_kafka_conf_t *conf) {
  size_t cnt = 0;
  /* rd_kafka_conf_dump does not modify conf; its prototype is not const. */
  const char **kv = rd_kafka_conf_dump(ALTAR__UNCONST(conf), &cnt);
  if (!kv) return NULL;
  altar_buf_t b = {0};
  int rc = ALTAR_OK;
  for (size_t i = 0; i + 1 < cnt && rc == ALTAR_OK; i += 2) {
    const char *v = altar__kafka_key_is_secret(kv[i]) ? REDACTED : kv[i + 1];
    rc = altar_buf_append_str(&b, kv[i]);
    if (rc == ALTAR_OK) rc = altar_buf_append_str(&b, "=");
    if (rc == ALTAR_OK) rc = altar_buf_append_str(&b, v);
    if (rc == ALTAR_OK) rc = altar_buf_append_str(&b, "\n");
  }
  rd_kafka_conf_dump_free(kv, cnt);
  if (rc != ALTAR_OK) {
    altar_buf_free(&b);
    return NULL;
  }
  if (b.len == 0 && altar_buf_append_str(&b, "") != ALTAR_OK) return NULL;
  return altar_buf_detach(&b);
}
