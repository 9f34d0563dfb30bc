/* Configuration keys of the local transport: one table that the parser and
 * docs/transports.md both follow. */
#include "transports/local_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_STR, K_INT, K_BOOL, K_ENUM } ktype_t;

/* The keys as every plug-in declares them (the transport's config_keys). */
const altar_plugin_key_t altar__local_cfg_keys[] = {
    {"dir", "directory of the log (required)"},
    {"fsync", "always: one fsync per record; group: one fsync per batch; never: leave it to the OS"},
    {"group.commit.ms", "longest a record waits to join a batch"},
    {"group.commit.bytes", "batch size that ends the wait"},
    {"retention.bytes", "per partition; whole old segments are deleted beyond it (-1 = unlimited)"},
    {"retention.ms", "segments last written longer ago are deleted (-1 = unlimited)"},
    {"num.partitions", "partitions of a topic created on first use"},
    {"segment.bytes", "size at which a segment rolls"},
    {"max.record.bytes", "largest record accepted or read"},
    {"queue.max.records", "records awaiting their delivery report before produce says EAGAIN"},
    {"auto.create.topics", "create a topic on first produce"},
    {"auto.offset.reset", "where a group starts on a partition without committed offset"},
    {"rebalance.check.ms", "how often a member looks for membership changes"},
    ALTAR_PLUGIN_KEYS_END,
};

/* How each key above is parsed, in the same order. */
typedef struct kdef {
  const char *name;
  ktype_t type;
  const char *dflt;
  int64_t min, max;
  const char *choices; /* K_ENUM: "a|b|c" */
} kdef_t;

static const kdef_t keys[] = {
    {"dir", K_STR, NULL, 0, 0, NULL},
    {"fsync", K_ENUM, "group", 0, 0, "always|group|never"},
    {"group.commit.ms", K_INT, "5", 0, 10000, NULL},
    {"group.commit.bytes", K_INT, "1048576", 1, 1073741824, NULL},
    {"retention.bytes", K_INT, "-1", -1, INT64_MAX, NULL},
    {"retention.ms", K_INT, "-1", -1, INT64_MAX, NULL},
    {"num.partitions", K_INT, "4", 1, 10000, NULL},
    {"segment.bytes", K_INT, "16777216", 1024, 1073741824, NULL},
    {"max.record.bytes", K_INT, "16777216", 64, 268435456, NULL},
    {"queue.max.records", K_INT, "100000", 1, 100000000, NULL},
    {"auto.create.topics", K_BOOL, "true", 0, 0, NULL},
    {"auto.offset.reset", K_ENUM, "earliest", 0, 0, "earliest|latest"},
    {"rebalance.check.ms", K_INT, "100", 1, 60000, NULL},
};
_Static_assert(sizeof keys / sizeof keys[0] + 1 == sizeof altar__local_cfg_keys / sizeof altar__local_cfg_keys[0],
               "one parse rule per declared key");

static int enum_index(const char *choices, const char *v) {
  size_t vl = strlen(v);
  int idx = 0;
  const char *p = choices;
  while (*p) {
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l == vl && !strncmp(p, v, l)) return idx;
    idx++;
    if (!bar) break;
    p = bar + 1;
  }
  return -1;
}

static int parse_key(const kdef_t *k, const char *v, int64_t *pi, altar_error_t *err) {
  switch (k->type) {
  case K_STR: return 0;
  case K_BOOL:
    if (!strcmp(v, "true") || !strcmp(v, "1")) *pi = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "0")) *pi = 0;
    else return altar_error_set(err, ALTAR_ECONFIG, "transport.%s: expected true or false", k->name);
    return 0;
  case K_ENUM:
    *pi = enum_index(k->choices, v);
    if (*pi < 0) return altar_error_set(err, ALTAR_ECONFIG, "transport.%s: expected one of %s", k->name, k->choices);
    return 0;
  case K_INT: {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || !end || end == v || *end)
      return altar_error_set(err, ALTAR_ECONFIG, "transport.%s: not an integer", k->name);
    if (x < k->min || x > k->max)
      return altar_error_set(err, ALTAR_ECONFIG, "transport.%s: %lld outside [%lld, %lld]", k->name, x,
                             (long long)k->min, (long long)k->max);
    *pi = x;
    return 0;
  }
  }
  return 0;
}

int altar__local_cfg_parse(altar_transport_t *t, local_cfg_t *cfg, const altar_strmap_t *config, altar_error_t *err) {
  memset(cfg, 0, sizeof *cfg);
  if (config) {
    for (size_t i = 0; i < config->n; i++) {
      /* The config file keeps kafka properties in the same map: a key
       * local does not know is reported, not fatal (the config reader
       * refuses typos through config_keys). */
      if (!altar_plugin_keys_allow(altar__local_cfg_keys, config->keys[i], NULL, 0))
        altar_transport_log(t, 4, "transport.%s: not a local transport key; ignored", config->keys[i]);
    }
  }
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    const kdef_t *d = &keys[k];
    const char *v = config ? altar_strmap_get(config, d->name) : NULL;
    if (!v) v = d->dflt;
    if (!v) {
      altar__local_cfg_clear(cfg);
      return altar_error_set(err, ALTAR_ECONFIG, "transport.%s: required for local", d->name);
    }
    int64_t x = 0;
    int rc = parse_key(d, v, &x, err);
    if (rc) {
      altar__local_cfg_clear(cfg);
      return rc;
    }
    const char *n = d->name;
    if (!strcmp(n, "dir")) {
      if (!*v || strlen(v) > 3000) {
        altar__local_cfg_clear(cfg);
        return altar_error_set(err, ALTAR_ECONFIG, "transport.dir: empty or too long");
      }
      cfg->dir = strdup(v);
      if (!cfg->dir) return altar_error_set(err, ALTAR_ENOMEM, "transport.dir: out of memory");
    } else if (!strcmp(n, "fsync")) cfg->fsync_policy = (int)x;
    else if (!strcmp(n, "group.commit.ms")) cfg->group_commit_ms = (int)x;
    else if (!strcmp(n, "group.commit.bytes")) cfg->group_commit_bytes = (size_t)x;
    else if (!strcmp(n, "retention.bytes")) cfg->retention_bytes = x;
    else if (!strcmp(n, "retention.ms")) cfg->retention_ms = x;
    else if (!strcmp(n, "num.partitions")) cfg->num_partitions = (int32_t)x;
    else if (!strcmp(n, "segment.bytes")) cfg->segment_bytes = (size_t)x;
    else if (!strcmp(n, "max.record.bytes")) cfg->max_record_bytes = (size_t)x;
    else if (!strcmp(n, "queue.max.records")) cfg->queue_max_records = (size_t)x;
    else if (!strcmp(n, "auto.create.topics")) cfg->auto_create = x != 0;
    else if (!strcmp(n, "auto.offset.reset")) cfg->reset_earliest = x == 0;
    else if (!strcmp(n, "rebalance.check.ms")) cfg->rebalance_check_ms = (int)x;
  }
  return 0;
}

void altar__local_cfg_clear(local_cfg_t *cfg) {
  free(cfg->dir);
  cfg->dir = NULL;
}
