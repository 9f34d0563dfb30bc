/* Per-topic settings of the local log (local_int.h): what create_topic_config
 * was given, kept beside the partitions as topics/<topic>/topic.conf so every
 * process appending to the topic applies the same retention. The
 * transport's retention.ms / retention.bytes bound every topic (an operator's
 * cap on the whole log); a topic's own settings may only make it shorter. A
 * topic without the file (created before it existed, or by create_topic)
 * follows the transport's. */
#include "transports/local_int.h"

#include "altar/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The file is a few lines; anything larger is not ours. */
#define CONF_MAX_BYTES 4096

/* An integer >= -1 (-1: unlimited), as Kafka's retention settings are. */
static int parse_limit(const char *key, const char *v, int64_t *pv, altar_error_t *err) {
  char *end = NULL;
  errno = 0;
  long long x = v ? strtoll(v, &end, 10) : 0;
  if (!v || errno || end == v || *end || x < -1)
    return altar_error_set(err, ALTAR_ECONFIG, "topic setting %s: '%.40s' is not an integer >= -1 (-1: unlimited)", key,
                           v ? v : "");
  *pv = x;
  return 0;
}

int altar__local_topic_conf_parse(const altar_strmap_t *conf, local_topic_conf_t *pc, altar_error_t *err) {
  *pc = (local_topic_conf_t){.retention_ms = -1, .retention_bytes = -1};
  for (size_t i = 0; conf && i < conf->n; i++) {
    const char *k = conf->keys[i], *v = conf->vals[i];
    int rc = 0;
    if (!strcmp(k, "retention.ms")) rc = parse_limit(k, v, &pc->retention_ms, err);
    else if (!strcmp(k, "retention.bytes")) rc = parse_limit(k, v, &pc->retention_bytes, err);
    else if (!strcmp(k, "cleanup.policy")) {
      /* The embedded log deletes whole segments; it has no compaction. */
      if (!v || strcmp(v, "delete"))
        rc = altar_error_set(err, ALTAR_ECONFIG,
                             "topic setting cleanup.policy: '%.40s' is not supported by the "
                             "local log (only delete)",
                             v ? v : "");
    } else {
      rc = altar_error_set(err, ALTAR_ECONFIG,
                           "topic setting %.60s: not known to the local log (retention.ms, "
                           "retention.bytes, cleanup.policy)",
                           k);
    }
    if (rc) return rc;
  }
  return 0;
}

int altar__local_topic_conf_write(const char *topic_dir, const local_topic_conf_t *c, bool sync, altar_error_t *err) {
  char *p = altar__local_path(topic_dir, LOCAL_TOPIC_CONF);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "topic settings: out of memory");
  char text[128];
  int len = snprintf(text, sizeof text, "retention.ms=%lld\nretention.bytes=%lld\n", (long long)c->retention_ms,
                     (long long)c->retention_bytes);
  int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int rc = 0;
  if (fd < 0 || write(fd, text, (size_t)len) != len || (sync && fsync(fd) != 0))
    rc = altar_error_set(err, ALTAR_EIO, "topic settings %s: %s", p, strerror(errno));
  if (fd >= 0) close(fd);
  free(p);
  return rc;
}

/* The shorter of two limits, -1 being none. */
static int64_t tighter(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

void altar__local_topic_conf_read(const local_cfg_t *cfg, const char *topic, local_topic_conf_t *pc) {
  local_topic_conf_t own = {.retention_ms = -1, .retention_bytes = -1};
  char *p = altar__local_pathf("%s/topics/%s/%s", cfg->dir, topic, LOCAL_TOPIC_CONF);
  size_t n = 0;
  char *text = p ? altar_file_read(p, p, CONF_MAX_BYTES, &n, NULL) : NULL;
  if (text) {
    /* A line we cannot read leaves that setting at the transport's. */
    for (char *line = text, *next; line && *line; line = next) {
      next = strchr(line, '\n');
      if (next) *next++ = '\0';
      char *eq = strchr(line, '=');
      if (!eq) continue;
      *eq = '\0';
      int64_t v = -1;
      if (!strcmp(line, "retention.ms") && !parse_limit(line, eq + 1, &v, NULL)) own.retention_ms = v;
      else if (!strcmp(line, "retention.bytes") && !parse_limit(line, eq + 1, &v, NULL)) own.retention_bytes = v;
    }
  }
  free(text);
  free(p);
  /* The transport's settings bound every topic; a topic's own may only be shorter. */
  pc->retention_ms = tighter(own.retention_ms, cfg->retention_ms);
  pc->retention_bytes = tighter(own.retention_bytes, cfg->retention_bytes);
}
