/* Parsing, validating and publishing specs as one job. */
#include "producer/job_queue.h"
#include "altar/grow.h"

#include "altar/codec.h"
#include "altar/pools.h"
#include "altar/config.h"
#include "altar/json_pos.h"
#include "altar/spec_keys.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int push_spec(altar_spec_t **pv, size_t *pn, size_t *pcap, altar_spec_t *s) {
  if (ALTAR_GROW(*pv, *pcap, *pn + 1)) return ALTAR_ENOMEM;
  (*pv)[(*pn)++] = *s;
  memset(s, 0, sizeof *s);
  return ALTAR_OK;
}

static void free_specs(altar_spec_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) altar_spec_clear(&v[i]);
  free(v);
}

/* One spec from JSON text, validated; errors prefixed with where it was. */
static int one_spec(const char *text, size_t len, const char *where, altar_spec_t *out, altar_error_t *err) {
  int rc = altar_spec_from_json(text, len, out, err);
  if (!rc) rc = altar_spec_validate(out, err);
  if (rc) {
    altar_error_prefix(err, "%s", where);
    altar_spec_clear(out);
  }
  return rc;
}

/* "FILE:LINE: invalid JSON at line L column C: …", the position moved back
 * onto a trailing comma, which jansson only notices at the next token. */
static int json_syntax_error(const char *text, size_t len, const json_error_t *je, const char *source,
                             altar_error_t *err) {
  int line = je->line, col = je->column;
  bool comma = false;
  if (je->position >= 0) altar_json_error_position(text, len, (size_t)je->position, &line, &col, &comma);
  return altar_error_set(err, ALTAR_EINVAL, "%s:%d: invalid JSON at line %d column %d: %s", source, line, line, col,
                         comma ? "trailing comma" : je->text);
}

/* Whether the first non-blank line of text is a JSON value on its own. */
static bool first_line_is_value(const char *text, size_t len) {
  const char *nl = memchr(text, '\n', len);
  json_error_t je;
  json_t *j = json_loadb(text, nl ? (size_t)(nl - text) : len, JSON_DECODE_ANY, &je);
  json_decref(j);
  return j != NULL;
}

/* One JSON Lines entry must be valid JSON; the error names its line and column. */
static int line_is_value(const char *text, size_t len, const char *where, altar_error_t *err) {
  json_error_t je;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY, &je);
  json_decref(j);
  if (j) return ALTAR_OK;
  return altar_error_set(err, ALTAR_EINVAL, "%s: invalid JSON at column %d: %s", where, je.column, je.text);
}

int altar__specs_parse(const char *text, size_t len, const char *source, altar_spec_t **pspecs, size_t *pn,
                       altar_error_t *err) {
  *pspecs = NULL;
  *pn = 0;
  size_t cap = 0, i = 0;
  while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
  if (i == len) return altar_error_set(err, ALTAR_EINVAL, "%s: no spec given", source);
  int rc = ALTAR_OK;
  if (text[i] == '[') {
    json_error_t je;
    json_t *arr = json_loadb(text, len, 0, &je);
    if (!arr || !json_is_array(arr)) {
      json_decref(arr);
      return arr ? altar_error_set(err, ALTAR_EINVAL, "%s: expected an array of specs", source)
                 : json_syntax_error(text, len, &je, source, err);
    }
    rc = altar_spec_json_check_keys(text, len, source, 1, err);
    for (size_t k = 0; k < json_array_size(arr) && !rc; k++) {
      char *one = json_dumps(json_array_get(arr, k), JSON_COMPACT);
      altar_spec_t s = {0};
      char where[512];
      snprintf(where, sizeof where, "%s: [%zu]", source, k);
      rc = one ? one_spec(one, strlen(one), where, &s, err) : altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      free(one);
      if (!rc && push_spec(pspecs, pn, &cap, &s)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    }
    json_decref(arr);
  } else {
    /* A single (possibly multi-line) object, or JSON Lines. */
    json_error_t je;
    json_t *obj = json_loadb(text, len, 0, &je);
    bool single = obj && json_is_object(obj);
    json_decref(obj);
    /* Not one object: JSON Lines only when the first line is a value by
     * itself; otherwise it is one object spread over lines with an error
     * in it, reported where jansson found it (not as line 1 of JSON Lines). */
    if (!single && !first_line_is_value(text + i, len - i)) {
      if (!obj) return json_syntax_error(text, len, &je, source, err);
      return altar_error_set(err, ALTAR_EINVAL, "%s: expected a spec object, an array of them or JSON Lines", source);
    }
    if (single) {
      altar_spec_t s = {0};
      rc = altar_spec_json_check_keys(text, len, source, 1, err);
      if (!rc) rc = one_spec(text, len, source, &s, err);
      if (!rc && push_spec(pspecs, pn, &cap, &s)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    } else {
      size_t line = 0, start = 0;
      for (size_t k = 0; k <= len && !rc; k++) {
        if (k < len && text[k] != '\n') continue;
        line++;
        size_t a = start, b = k;
        start = k + 1;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r')) a++;
        if (a == b) continue;
        altar_spec_t s = {0};
        char where[512];
        snprintf(where, sizeof where, "%s:%zu", source, line);
        rc = line_is_value(text + a, b - a, where, err);
        if (!rc) rc = altar_spec_json_check_keys(text + a, b - a, source, line, err);
        if (!rc) rc = one_spec(text + a, b - a, where, &s, err);
        if (!rc && push_spec(pspecs, pn, &cap, &s)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      }
    }
  }
  if (!rc && *pn == 0) rc = altar_error_set(err, ALTAR_EINVAL, "%s: no spec given", source);
  if (rc) {
    free_specs(*pspecs, *pn);
    *pspecs = NULL;
    *pn = 0;
  }
  return rc;
}

static void new_job_id(char out[ALTAR_RUN_ID_MAX + 1]) {
  unsigned char r[8] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
    uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    memcpy(r, &x, sizeof r);
  }
  if (fd >= 0) close(fd);
  snprintf(out, ALTAR_RUN_ID_MAX + 1, "j-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

typedef struct acks {
  size_t ok, failed;
  char first_error[256];
} acks_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  acks_t *a = ctx;
  if (dr->err) {
    if (!a->failed++)
      snprintf(a->first_error, sizeof a->first_error, "%s", dr->errstr ? dr->errstr : "delivery failed");
  } else {
    a->ok++;
  }
}

/* The configured kinds, comma separated, for an error message. */
static void kinds_list(const altar_group_specs_t *g, char *out, size_t size) {
  size_t at = 0;
  snprintf(out, size, "%s", g->n ? "" : "none");
  for (size_t i = 0; i < g->n && at + 1 < size; i++) {
    int k = snprintf(out + at, size - at, "%s%s", i ? ", " : "", g->v[i].kind);
    if (k < 0) break;
    at += (size_t)k;
  }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Each of the job's groups may have at most its kind's max_width shards
 * (a group event has no width limit: a wide one goes out in pages). Group
 * keys are taken with the job id label the specs will carry. Sorting the
 * keys makes it O(n log n): a job of 10^5 shards is checked at once. */
static int check_groups(const altar_group_specs_t *groups, const altar_spec_t *specs, size_t n, const char *run_id,
                        altar_error_t *err) {
  char **keys = calloc(n, sizeof *keys);
  int rc = keys ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; i < n && !rc; i++) {
    const altar_group_spec_t *g = altar_group_specs_find(groups, specs[i].kind);
    altar_handle_t h = {0};
    char *gk = NULL;
    if (altar_strmap_copy(&h.labels, &specs[i].labels) || altar_strmap_set(&h.labels, ALTAR_JOB_ID_LABEL, run_id) ||
        !(gk = altar_group_by_key(&g->group_by, &h))) {
      altar_handle_clear(&h);
      rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      break;
    }
    altar_handle_clear(&h);
    size_t kl = strlen(specs[i].kind) + strlen(gk) + 2;
    if (!(keys[i] = malloc(kl))) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    else snprintf(keys[i], kl, "%s\x1f%s", specs[i].kind, gk);
    free(gk);
  }
  if (!rc && n) {
    qsort(keys, n, sizeof *keys, cmp_str);
    for (size_t i = 0; i < n && !rc;) {
      size_t j = i;
      while (j < n && !strcmp(keys[j], keys[i])) j++;
      const char *sep = strchr(keys[i], '\x1f');
      char kind[256];
      snprintf(kind, sizeof kind, "%.*s", (int)(sep - keys[i]), keys[i]);
      const altar_group_spec_t *g = altar_group_specs_find(groups, kind);
      size_t max = g && g->max_width > 0 ? (size_t)g->max_width : ALTAR_GROUP_MAX_WIDTH_DEFAULT;
      if (j - i > max)
        rc = altar_error_set(err, ALTAR_ETOOBIG,
                             "group %s:%.200s: %zu shards, more than groups.%s.max_width (%zu%s); raise it in the "
                             "group config to submit wider groups",
                             kind, sep + 1, j - i, kind, max, g && g->max_width > 0 ? "" : ", the default");
      i = j;
    }
  }
  for (size_t i = 0; keys && i < n; i++) free(keys[i]);
  free(keys);
  return rc;
}

int altar__job_queue_submit(altar_job_queue_t *q, const char *kind, altar_spec_t *specs, size_t n,
                            char run_id[ALTAR_RUN_ID_MAX + 1], altar_error_t *err) {
  if (!n) return altar_error_set(err, ALTAR_EINVAL, "submit: no spec given");
  for (size_t i = 0; i < n; i++) {
    /* Validate first: it rejects a spec without kind before strcmp reads it. */
    int rc = altar_spec_validate(&specs[i], err);
    if (rc) return altar_error_prefix(err, "specs[%zu]", i);
    if (kind && strcmp(specs[i].kind, kind))
      return altar_error_set(err, ALTAR_EINVAL, "specs[%zu].kind: '%s' is not the job's kind '%s'", i, specs[i].kind,
                             kind);
    if (q->groups && !altar_group_specs_find(q->groups, specs[i].kind)) {
      char kinds[2048];
      kinds_list(q->groups, kinds, sizeof kinds);
      return altar_error_set(err, ALTAR_EINVAL,
                             "specs[%zu].kind: '%.200s' has no group config, so its shards could never settle "
                             "(configured kinds: %s)",
                             i, specs[i].kind, kinds);
    }
    /* A shard without the labels its kind's readiness rule reads would hold
     * its group in the reconciler: refused here, where it is cheap. */
    const altar_group_spec_t *gs = q->groups ? altar_group_specs_find(q->groups, specs[i].kind) : NULL;
    if (gs && (rc = altar_predicate_check_labels(&gs->ready_when, &specs[i].labels, err)))
      return altar_error_prefix(err, "specs[%zu] (kind '%.200s')", i, specs[i].kind);
    char topic[512];
    if ((rc = altar_pool_topic(q->topics->jobs, specs[i].resources.gpu, topic, sizeof topic, err)))
      return altar_error_prefix(err, "specs[%zu]", i);
  }
  /* Keep a job id the caller set on every spec; otherwise mint one. */
  const char *given = altar_strmap_get(&specs[0].labels, ALTAR_JOB_ID_LABEL);
  for (size_t i = 1; given && i < n; i++) {
    const char *g = altar_strmap_get(&specs[i].labels, ALTAR_JOB_ID_LABEL);
    if (!g || strcmp(g, given)) given = NULL;
  }
  if (given && strlen(given) <= ALTAR_RUN_ID_MAX) snprintf(run_id, ALTAR_RUN_ID_MAX + 1, "%s", given);
  else new_job_id(run_id);
  int rc = ALTAR_OK;
  /* Stamped before any is published, so the size checks see the label. */
  for (size_t i = 0; i < n; i++) {
    if (altar_spec_set_label(&specs[i], ALTAR_JOB_ID_LABEL, run_id))
      return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    if (altar_spec_check_carriable(&specs[i], err)) {
      altar_error_prefix(err, "specs[%zu]", i);
      return ALTAR_EINVAL;
    }
  }
  if (q->groups && (rc = check_groups(q->groups, specs, n, run_id, err))) return ALTAR_EINVAL;
  /* Every pool topic the job uses, created once. */
  for (size_t i = 0; i < n && !rc; i++) {
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen =
          (!specs[k].resources.gpu && !specs[i].resources.gpu) ||
          (specs[k].resources.gpu && specs[i].resources.gpu && !strcmp(specs[k].resources.gpu, specs[i].resources.gpu));
    if (seen) continue;
    char topic[512];
    rc = altar_pool_topic(q->topics->jobs, specs[i].resources.gpu, topic, sizeof topic, err);
    if (!rc)
      rc = altar_transport_create_topic(q->transport, topic,
                                        q->partitions > 0 ? q->partitions : ALTAR_DEFAULT_TOPIC_PARTITIONS, err);
    if (rc == ALTAR_EEXIST) rc = ALTAR_OK;
  }
  if (rc) return rc;
  acks_t acks = {0};
  altar_delivery_cb prev_cb;
  void *prev_ctx;
  altar_transport_set_delivery(q->transport, on_delivery, &acks, &prev_cb, &prev_ctx);
  double now;
  {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  }
  altar_buf_t b = {0};
  for (size_t i = 0; i < n && !rc; i++) {
    char key[ALTAR_TASK_KEY_LEN + 1];
    rc = altar_spec_identity(&specs[i], key, err);
    if (rc) break;
    altar_job_msg_t job = {
        .v = ALTAR_SCHEMA_VERSION, .job_id = run_id, .spec = specs[i], .attempt = 0, .submitted_at = now};
    altar_buf_reset(&b);
    rc = altar_encode_job(&job, &b, err);
    if (rc) break;
    /* A shard without the labels its kind's readiness rule reads would hold
     * its group in the reconciler: refused here, where it is cheap. */
    const altar_group_spec_t *gs = q->groups ? altar_group_specs_find(q->groups, specs[i].kind) : NULL;
    if (gs && (rc = altar_predicate_check_labels(&gs->ready_when, &specs[i].labels, err)))
      return altar_error_prefix(err, "specs[%zu] (kind '%.200s')", i, specs[i].kind);
    char topic[512];
    if ((rc = altar_pool_topic(q->topics->jobs, specs[i].resources.gpu, topic, sizeof topic, err))) break;
    altar_produce_rec_t rec = {.topic = topic,
                               .partition = ALTAR_PARTITION_ANY,
                               .key = key,
                               .key_len = strlen(key),
                               .value = b.data,
                               .value_len = b.len};
    for (int tries = 0;; tries++) {
      rc = altar_transport_produce(q->transport, &rec, err);
      if (rc != ALTAR_EAGAIN || tries > 1000) break;
      altar_transport_poll(q->transport, 10);
    }
  }
  altar_buf_free(&b);
  if (!rc) rc = altar_transport_flush(q->transport, 120000, err);
  altar_transport_set_delivery(q->transport, prev_cb, prev_ctx, NULL, NULL);
  if (!rc && acks.failed)
    rc = altar_error_set(err, ALTAR_ETRANSPORT, "submit: %zu of %zu job message(s) not acknowledged: %s", acks.failed,
                         n, acks.first_error);
  if (!rc && acks.ok != n)
    rc = altar_error_set(err, ALTAR_ETRANSPORT, "submit: %zu of %zu job message(s) acknowledged", acks.ok, n);
  return rc;
}
