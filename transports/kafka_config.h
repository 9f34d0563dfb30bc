/* altar — kafka transport: librdkafka configuration and secret redaction.
 * Implementer-only: used by transports/kafka_*.c and their tests. */
#ifndef ALTAR_TRANSPORTS_KAFKA_CONFIG_H
#define ALTAR_TRANSPORTS_KAFKA_CONFIG_H

#include "altar/error.h"
#include "altar/strmap.h"

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

/* The largest record altar writes: ALTAR_MAX_MESSAGE (4 MiB) plus 64 KiB for
 * its key, headers and the record batch's framing. The producer's
 * message.max.bytes and the max.message.bytes of every topic altar creates
 * default to it (kafka_config.c, kafka_admin.c). */
#define ALTAR__KAFKA_MESSAGE_MAX_BYTES "4259840"

/* Which librdkafka handle a configuration is for; each role carries the
 * settings altar relies on (see kafka_config.c, required[]). */
typedef enum altar__kafka_role {
  ALTAR__KAFKA_PRODUCER,
  ALTAR__KAFKA_CONSUMER,
  ALTAR__KAFKA_ADMIN,
} altar__kafka_role_t;

/* The secret values seen in a configuration, kept to scrub them out of every
 * message a handle lets out (errors, librdkafka log lines, config dumps). */
typedef struct altar__kafka_secrets {
  size_t n;
  char **vals;
} altar__kafka_secrets_t;

/* True when the value of librdkafka property key must never be shown:
 * passwords, secrets, private keys, JAAS and OAUTHBEARER configs. */
bool altar__kafka_key_is_secret(const char *key);

/* True for keys the kafka transport reads itself and never hands to
 * librdkafka: "altar.*" (see altar/plugin/transport_kafka.h), and the local transport's
 * own settings ("dir", "fsync", "segment.bytes", ..., "local.*"). */
bool altar__kafka_key_is_ours(const char *key);

/* Adds a copy of val (ignored when empty or already present). 0 or ALTAR_ENOMEM. */
int altar__kafka_secrets_add(altar__kafka_secrets_t *sec, const char *val);
/* Wipes and frees every stored value; leaves an empty list. */
void altar__kafka_secrets_clear(altar__kafka_secrets_t *sec);

/* Rewrites the NUL-terminated string s (buffer of cap bytes) in place so that
 * no stored secret value occurs in it: each occurrence becomes "[redacted]";
 * the result is truncated to cap-1 bytes if it grows. sec may be NULL. */
void altar__kafka_redact(const altar__kafka_secrets_t *sec, char *s, size_t cap);

/* Builds a librdkafka configuration for role: every property of props passes
 * through unchanged, then altar's required settings are applied. A property
 * that contradicts a required setting (say acks=1 on a producer), an unknown
 * property or a rejected value is an ALTAR_ECONFIG error naming
 * "transport.kafka.<key>"; the value of a secret property is never quoted.
 * group_id (consumer only, may be NULL) overrides props' group.id.
 * Consumers default to auto.offset.reset=earliest unless props set it.
 * Every secret value is added to sec. Returns a new conf (the caller passes
 * it to rd_kafka_new or frees it with rd_kafka_conf_destroy) or NULL. */
rd_kafka_conf_t *altar__kafka_conf_build(const altar_strmap_t *props, altar__kafka_role_t role, const char *group_id,
                                         altar__kafka_secrets_t *sec, altar_error_t *err);

/* "key=value\n" lines of the complete effective configuration of conf, with
 * the value of each secret property shown as "[redacted]". Caller frees;
 * NULL on allocation failure. */
char *altar__kafka_conf_describe(const rd_kafka_conf_t *conf);

/* Copies msg into dst (cap bytes) with secrets scrubbed: every error the
 * transport returns goes through it. */
void altar__kafka_scrub_copy(const altar__kafka_secrets_t *sec, char *dst, size_t cap, const char *msg);

#endif
