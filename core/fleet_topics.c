/* The fleet's topics, created with explicit lifetimes (fleet_topics.h). */
#include "altar/fleet_topics.h"

#include "altar/strmap.h"

#include <stdio.h>

int altar_fleet_topics_ensure(altar_transport_t *t, const altar_config_t *cfg, altar_error_t *err) {
  int partitions = cfg->topic_partitions > 0 ? cfg->topic_partitions : ALTAR_DEFAULT_TOPIC_PARTITIONS;
  const char *topics[] = {cfg->topics.jobs, cfg->topics.status, cfg->topics.ready,
                          cfg->topics.dead, cfg->topics.dlq,    cfg->topics.fleet};
  for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) {
    /* Explicit lifetimes, never the broker's default (docs/state.md). */
    bool is_status = topics[i] == cfg->topics.status;
    char ms[32];
    snprintf(ms, sizeof ms, "%lld",
             (long long)(is_status ? altar_config_status_retention_ms(cfg) : cfg->topics_retention_ms));
    altar_strmap_t conf = {0};
    int rc = altar_strmap_set(&conf, "retention.ms", ms) || altar_strmap_set(&conf, "cleanup.policy", "delete")
                 ? altar_error_set(err, ALTAR_ENOMEM, "out of memory")
                 : altar_transport_create_topic_config(t, topics[i], partitions, &conf, err);
    altar_strmap_clear(&conf);
    if (rc && rc != ALTAR_EEXIST) return altar_error_prefix(err, "creating topic %s", topics[i]);
  }
  altar_error_clear(err);
  return 0;
}
