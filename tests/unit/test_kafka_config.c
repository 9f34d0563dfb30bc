/* kafka transport configuration: every librdkafka property passes through,
 * altar's required settings hold, contradictions are refused by name, and
 * secret values never show in errors, config dumps or log lines. */
#include "altar/plugin/transport_kafka.h"
#include "testutil.h"
#include "transports/kafka_config.h"

#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#define SECRET1 "hunter2-Sup3rS3cret"
#define SECRET2 "-----BEGIN PRIVATE KEY-----MIIEvQIBADANBg"
#define SECRET3 "oauth-client-secret-XYZ"
#define SECRET4 "keystore-pass-777"

static const char *conf_get(rd_kafka_conf_t *c, const char *key, char *buf, size_t cap) {
  size_t sz = cap;
  if (rd_kafka_conf_get(c, key, buf, &sz) != RD_KAFKA_CONF_OK) return NULL;
  return buf;
}

static bool has_secret(const char *s) {
  return s && (strstr(s, SECRET1) || strstr(s, SECRET2) || strstr(s, SECRET3) || strstr(s, SECRET4));
}

static void add_secrets(altar_strmap_t *m) {
  altar_strmap_set(m, "sasl.password", SECRET1);
  altar_strmap_set(m, "ssl.key.pem", SECRET2);
  altar_strmap_set(m, "ssl.key.password", SECRET4);
}

static void test_passthrough(void) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", "10.0.0.1:9093,10.0.0.2:9093");
  altar_strmap_set(&m, "client.id", "altar-test-client");
  altar_strmap_set(&m, "compression.type", "zstd");
  altar_strmap_set(&m, "linger.ms", "7");
  altar_strmap_set(&m, "security.protocol", "sasl_ssl");
  altar_strmap_set(&m, "sasl.mechanisms", "SCRAM-SHA-512");
  altar_strmap_set(&m, "sasl.username", "svc-altar");
  altar_strmap_set(&m, "session.timeout.ms", "12000");
  altar_strmap_set(&m, "dir", "./var/log"); /* local-transport keys: ignored */
  altar_strmap_set(&m, "fsync", "group");
  altar_strmap_set(&m, "segment.bytes", "1048576");
  altar_strmap_set(&m, "rebalance.check.ms", "100");
  altar_strmap_set(&m, "altar.timeout.ms", "5000"); /* the transport's own: ignored */
  add_secrets(&m);
  altar__kafka_secrets_t sec = {0};
  altar_error_t err = {0};
  rd_kafka_conf_t *c = altar__kafka_conf_build(&m, ALTAR__KAFKA_PRODUCER, NULL, &sec, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char buf[512];
  CU_ASSERT_STRING_EQUAL(conf_get(c, "bootstrap.servers", buf, sizeof buf), "10.0.0.1:9093,10.0.0.2:9093");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "client.id", buf, sizeof buf), "altar-test-client");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "compression.type", buf, sizeof buf), "zstd");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "linger.ms", buf, sizeof buf), "7");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "sasl.username", buf, sizeof buf), "svc-altar");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "sasl.password", buf, sizeof buf), SECRET1);
  CU_ASSERT_STRING_EQUAL(conf_get(c, "enable.idempotence", buf, sizeof buf), "true");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "acks", buf, sizeof buf), "-1");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "partitioner", buf, sizeof buf), "murmur2_random");
  CU_ASSERT_EQUAL(sec.n, 3);
  /* The dump shows every property but no secret value. */
  char *dump = altar__kafka_conf_describe(c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dump);
  CU_ASSERT_PTR_NOT_NULL(strstr(dump, "client.id=altar-test-client\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dump, "sasl.password=[redacted]\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dump, "ssl.key.password=[redacted]\n"));
  CU_ASSERT(!has_secret(dump));
  free(dump);
  rd_kafka_conf_destroy(c);
  altar__kafka_secrets_clear(&sec);
  altar_strmap_clear(&m);
}

static void test_consumer_required(void) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", "127.0.0.1:1");
  altar_strmap_set(&m, "group.id", "ignored-in-favour-of-subscribe");
  altar__kafka_secrets_t sec = {0};
  altar_error_t err = {0};
  rd_kafka_conf_t *c = altar__kafka_conf_build(&m, ALTAR__KAFKA_CONSUMER, "workers", &sec, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  char buf[256];
  CU_ASSERT_STRING_EQUAL(conf_get(c, "enable.auto.commit", buf, sizeof buf), "false");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "enable.auto.offset.store", buf, sizeof buf), "false");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "partition.assignment.strategy", buf, sizeof buf), "cooperative-sticky");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "group.id", buf, sizeof buf), "workers");
  const char *reset = conf_get(c, "auto.offset.reset", buf, sizeof buf);
  CU_ASSERT(reset && (!strcmp(reset, "smallest") || !strcmp(reset, "earliest")));
  /* Failure detection fit for a fleet, not librdkafka's 45 s. */
  CU_ASSERT_STRING_EQUAL(conf_get(c, "session.timeout.ms", buf, sizeof buf), "10000");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "heartbeat.interval.ms", buf, sizeof buf), "3000");
  rd_kafka_conf_destroy(c);
  /* A user's own reset policy and timeouts are kept. */
  altar_strmap_set(&m, "auto.offset.reset", "latest");
  altar_strmap_set(&m, "session.timeout.ms", "30000");
  altar_strmap_set(&m, "heartbeat.interval.ms", "5000");
  c = altar__kafka_conf_build(&m, ALTAR__KAFKA_CONSUMER, "workers", &sec, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  reset = conf_get(c, "auto.offset.reset", buf, sizeof buf);
  CU_ASSERT(reset && (!strcmp(reset, "largest") || !strcmp(reset, "latest")));
  CU_ASSERT_STRING_EQUAL(conf_get(c, "session.timeout.ms", buf, sizeof buf), "30000");
  CU_ASSERT_STRING_EQUAL(conf_get(c, "heartbeat.interval.ms", buf, sizeof buf), "5000");
  rd_kafka_conf_destroy(c);
  altar__kafka_secrets_clear(&sec);
  altar_strmap_clear(&m);
}

/* Each contradiction of a required setting is refused, naming the key. */
static void test_contradictions_refused(void) {
  static const struct {
    altar__kafka_role_t role;
    const char *key, *val;
  } cases[] = {
      {ALTAR__KAFKA_PRODUCER, "acks", "1"},
      {ALTAR__KAFKA_PRODUCER, "request.required.acks", "0"},
      {ALTAR__KAFKA_PRODUCER, "enable.idempotence", "false"},
      {ALTAR__KAFKA_PRODUCER, "partitioner", "consistent_random"},
      {ALTAR__KAFKA_CONSUMER, "enable.auto.commit", "true"},
      {ALTAR__KAFKA_CONSUMER, "enable.auto.offset.store", "true"},
      {ALTAR__KAFKA_CONSUMER, "partition.assignment.strategy", "range"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    altar_strmap_t m = {0};
    altar_strmap_set(&m, cases[i].key, cases[i].val);
    altar__kafka_secrets_t sec = {0};
    altar_error_t err = {0};
    rd_kafka_conf_t *c = altar__kafka_conf_build(&m, cases[i].role, "g", &sec, &err);
    CU_ASSERT_PTR_NULL(c);
    if (c) rd_kafka_conf_destroy(c);
    CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
    char want[128];
    snprintf(want, sizeof want, "transport.kafka.%s", cases[i].key);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    altar_strmap_clear(&m);
  }
  /* Accepted spellings of the required values pass. */
  altar_strmap_t ok = {0};
  altar_strmap_set(&ok, "acks", "-1");
  altar_strmap_set(&ok, "enable.idempotence", "TRUE");
  altar__kafka_secrets_t sec = {0};
  altar_error_t err = {0};
  rd_kafka_conf_t *c = altar__kafka_conf_build(&ok, ALTAR__KAFKA_PRODUCER, NULL, &sec, &err);
  CU_ASSERT_PTR_NOT_NULL(c);
  if (c) rd_kafka_conf_destroy(c);
  altar_strmap_clear(&ok);
}

static void test_unknown_and_bad_values(void) {
  altar_strmap_t m = {0};
  add_secrets(&m);
  altar_strmap_set(&m, "bootstrap.servrs", "x:1");
  altar__kafka_secrets_t sec = {0};
  altar_error_t err = {0};
  CU_ASSERT_PTR_NULL(altar__kafka_conf_build(&m, ALTAR__KAFKA_PRODUCER, NULL, &sec, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "transport.kafka.bootstrap.servrs"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown"));
  altar_strmap_remove(&m, "bootstrap.servrs");
  /* A rejected value names the key; the message carries no secret even
   * when the bad value is next to secret ones. */
  altar_strmap_set(&m, "security.protocol", SECRET1);
  memset(&err, 0, sizeof err);
  CU_ASSERT_PTR_NULL(altar__kafka_conf_build(&m, ALTAR__KAFKA_PRODUCER, NULL, &sec, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "transport.kafka.security.protocol"));
  CU_ASSERT(!has_secret(err.msg));
  altar__kafka_secrets_clear(&sec);
  altar_strmap_clear(&m);
}

/* Debian's librdkafka 2.0.2 is built without OIDC: the property is refused
 * with librdkafka's reason, and still without its value. */
static void test_secret_property_refused(void) {
  altar_strmap_t m = {0};
  add_secrets(&m);
  altar_strmap_set(&m, "sasl.oauthbearer.client.secret", SECRET3);
  altar__kafka_secrets_t sec = {0};
  altar_error_t err = {0};
  rd_kafka_conf_t *c = altar__kafka_conf_build(&m, ALTAR__KAFKA_PRODUCER, NULL, &sec, &err);
  if (c) {
    /* A build with OIDC accepts it: the dump must still hide it. */
    char *dump = altar__kafka_conf_describe(c);
    CU_ASSERT(dump && !has_secret(dump));
    free(dump);
    rd_kafka_conf_destroy(c);
  } else {
    CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "transport.kafka.sasl.oauthbearer.client.secret"));
    CU_ASSERT(!has_secret(err.msg));
  }
  altar__kafka_secrets_clear(&sec);
  altar_strmap_clear(&m);
}

static void test_secret_keys(void) {
  const char *secret[] = {"sasl.password",
                          "ssl.key.password",
                          "ssl.keystore.password",
                          "ssl.key.pem",
                          "sasl.oauthbearer.client.secret",
                          "sasl.oauthbearer.config",
                          "sasl.jaas.config",
                          "ssl_key",
                          "SASL.PASSWORD"};
  const char *plain[] = {"bootstrap.servers", "sasl.username",   "ssl.ca.location",  "ssl.certificate.location",
                         "client.id",         "sasl.mechanisms", "security.protocol"};
  for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++) CU_ASSERT(altar__kafka_key_is_secret(secret[i]));
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) CU_ASSERT(!altar__kafka_key_is_secret(plain[i]));
}

static void test_redact(void) {
  altar__kafka_secrets_t sec = {0};
  CU_ASSERT_EQUAL(altar__kafka_secrets_add(&sec, "pw12"), 0);
  CU_ASSERT_EQUAL(altar__kafka_secrets_add(&sec, "pw12"), 0); /* once */
  CU_ASSERT_EQUAL(altar__kafka_secrets_add(&sec, ""), 0);     /* empty: ignored */
  CU_ASSERT_EQUAL(sec.n, 1);
  char s[128] = "a pw12 b pw12pw12 c";
  altar__kafka_redact(&sec, s, sizeof s);
  CU_ASSERT_STRING_EQUAL(s, "a [redacted] b [redacted][redacted] c");
  /* Growth past the buffer truncates, and never leaves part of a secret. */
  char t[12] = "xx pw12 yy";
  altar__kafka_redact(&sec, t, sizeof t);
  CU_ASSERT_STRING_EQUAL(t, "xx [redacte");
  CU_ASSERT_PTR_NULL(strstr(t, "pw"));
  char u[8] = "pw12pw1";
  altar__kafka_redact(&sec, u, sizeof u);
  CU_ASSERT_PTR_NULL(strstr(u, "pw12"));
  char v[64];
  altar__kafka_scrub_copy(&sec, v, sizeof v, "login pw12 failed");
  CU_ASSERT_STRING_EQUAL(v, "login [redacted] failed");
  altar__kafka_redact(NULL, v, sizeof v); /* no secrets: unchanged */
  CU_ASSERT_STRING_EQUAL(v, "login [redacted] failed");
  altar__kafka_secrets_clear(&sec);
}

/* ---- through the transport ---------------------------------------------- */

typedef struct logcap {
  int lines;
  int leaks;
  int delivered_fail;
} logcap_t;

static void on_log(altar_transport_t *t, int level, const char *msg, void *ctx) {
  (void)t;
  (void)level;
  logcap_t *c = ctx;
  c->lines++;
  if (has_secret(msg)) c->leaks++;
}

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  logcap_t *c = ctx;
  if (dr->err) c->delivered_fail++;
  if (has_secret(dr->errstr)) c->leaks++;
}

/* librdkafka at debug=all logs its whole configuration and every connection
 * attempt; none of those lines, nor the errors, may carry a secret. */
static void test_transport_logs_redacted(void) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", "127.0.0.1:1"); /* refused */
  altar_strmap_set(&m, "security.protocol", "sasl_plaintext");
  altar_strmap_set(&m, "sasl.mechanisms", "PLAIN");
  altar_strmap_set(&m, "sasl.username", "svc");
  altar_strmap_set(&m, "sasl.password", SECRET1);
  altar_strmap_set(&m, "ssl.key.password", SECRET4);
  altar_strmap_set(&m, "debug", "all");
  altar_strmap_set(&m, "message.timeout.ms", "1500");
  altar_strmap_set(&m, "altar.close.timeout.ms", "500");
  logcap_t cap = {0};
  altar_transport_opts_t opts = {.on_log = on_log, .log_ctx = &cap, .on_delivery = on_delivery, .delivery_ctx = &cap};
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open_ops(&altar_transport_kafka_ops, &m, &opts, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  altar_produce_rec_t rec = {.topic = "nowhere", .partition = ALTAR_PARTITION_ANY, .value = "v", .value_len = 1};
  CU_ASSERT_EQUAL(altar_transport_produce(t, &rec, &err), 0);
  int rc = altar_transport_flush(t, 4000, &err);
  CU_ASSERT_EQUAL(rc, 0); /* the report (a failure) was served */
  CU_ASSERT_EQUAL(cap.delivered_fail, 1);
  altar_topic_list_t *l = NULL;
  rc = altar_transport_list_topics(t, NULL, 500, &l, &err);
  CU_ASSERT(rc < 0);
  CU_ASSERT(err.msg[0] != '\0');
  CU_ASSERT(!has_secret(err.msg));
  altar_transport_close(t);
  CU_ASSERT(cap.lines > 10); /* debug=all did log, through the sink */
  CU_ASSERT_EQUAL(cap.leaks, 0);
  altar_strmap_clear(&m);
}

static void test_open_errors(void) {
  altar_error_t err = {0};
  CU_ASSERT_PTR_NULL(altar_transport_open_ops(&altar_transport_kafka_ops, NULL, NULL, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bootstrap.servers"));
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", "127.0.0.1:1");
  altar_strmap_set(&m, "altar.timeout.ms", "soon");
  CU_ASSERT_PTR_NULL(altar_transport_open_ops(&altar_transport_kafka_ops, &m, NULL, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "transport.kafka.altar.timeout.ms"));
  altar_strmap_remove(&m, "altar.timeout.ms");
  altar_strmap_set(&m, "altar.tiemout.ms", "5");
  CU_ASSERT_PTR_NULL(altar_transport_open_ops(&altar_transport_kafka_ops, &m, NULL, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "altar.tiemout.ms"));
  altar_strmap_remove(&m, "altar.tiemout.ms");
  altar_strmap_set(&m, "acks", "1");
  CU_ASSERT_PTR_NULL(altar_transport_open_ops(&altar_transport_kafka_ops, &m, NULL, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "transport.kafka.acks"));
  altar_strmap_clear(&m);
}

static void add(void) {
  ALTAR_SUITE("kafka_config", NULL, NULL);
  ALTAR_TEST(test_passthrough);
  ALTAR_TEST(test_consumer_required);
  ALTAR_TEST(test_contradictions_refused);
  ALTAR_TEST(test_unknown_and_bad_values);
  ALTAR_TEST(test_secret_property_refused);
  ALTAR_TEST(test_secret_keys);
  ALTAR_TEST(test_redact);
  ALTAR_TEST(test_transport_logs_redacted);
  ALTAR_TEST(test_open_errors);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
