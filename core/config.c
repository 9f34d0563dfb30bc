/* altar.yaml: defaults, the YAML reader (libyaml document API), overrides. */
#include "altar/config.h"

#include "altar/backend.h"
#include "altar/registry.h"
#include "altar/suggest.h"
#include "altar/plugin/transport.h"
#include "core/yaml_json.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

static int set_str(char **dst, const char *val) {
  char *d = strdup(val);
  if (!d) return ALTAR_ENOMEM;
  free(*dst);
  *dst = d;
  return ALTAR_OK;
}

static int config_defaults(altar_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->topic_partitions = ALTAR_DEFAULT_TOPIC_PARTITIONS;
  cfg->ledger_checkpoint_interval_s = 60;
  cfg->ledger_standby_poll_ms = ALTAR_DEFAULT_STANDBY_POLL_MS;
  cfg->ledger_standby_caught_up_events = ALTAR_DEFAULT_STANDBY_CAUGHT_UP_EVENTS;
  cfg->ledger_consumed_keep_days = ALTAR_DEFAULT_CONSUMED_KEEP_DAYS;
  cfg->ledger_consumed_keep_s = -1;
  cfg->ledger_settled_cache_entries = ALTAR_DEFAULT_SETTLED_CACHE_ENTRIES;
  cfg->ledger_checkpoints_keep = ALTAR_DEFAULT_CHECKPOINTS_KEEP;
  cfg->topics_retention_ms = ALTAR_DEFAULT_TOPIC_RETENTION_MS;
  cfg->status_retention_ms = -1;
  if (set_str(&cfg->transport_name, "local") || set_str(&cfg->backend_name, "process") ||
      set_str(&cfg->ledger_path, "./var/ledger") || set_str(&cfg->topics.jobs, "altar.jobs") ||
      set_str(&cfg->topics.status, "altar.status") || set_str(&cfg->topics.ready, "altar.ready") ||
      set_str(&cfg->topics.dead, "altar.dead") || set_str(&cfg->topics.dlq, "altar.dlq") ||
      set_str(&cfg->topics.fleet, "altar.fleet") ||
      /* The local log's directory; the kafka transport ignores local keys. */
      altar_strmap_set(&cfg->transport_props, "dir", "./var/log"))
    return ALTAR_ENOMEM;
  return ALTAR_OK;
}

void altar_config_clear(altar_config_t *cfg) {
  if (!cfg) return;
  free(cfg->path);
  free(cfg->transport_name);
  altar_strmap_clear(&cfg->transport_props);
  free(cfg->topics.jobs);
  free(cfg->topics.status);
  free(cfg->topics.ready);
  free(cfg->topics.dead);
  free(cfg->topics.dlq);
  free(cfg->topics.fleet);
  free(cfg->backend_name);
  altar_strmap_clear(&cfg->backend_props);
  free(cfg->ledger_path);
  free(cfg->ledger_checkpoints);
  free(cfg->metrics_addr);
  free(cfg->metrics_worker_addr);
  for (size_t i = 0; i < cfg->n_plugins; i++) free(cfg->plugins[i]);
  free(cfg->plugins);
  free(cfg->plugin_lines);
  free(cfg->storage_python);
  memset(cfg, 0, sizeof *cfg);
}

int64_t altar_config_status_retention_ms(const altar_config_t *cfg) {
  if (cfg->status_retention_set) return cfg->status_retention_ms;
  return cfg->ledger_checkpoints && *cfg->ledger_checkpoints ? cfg->topics_retention_ms : -1;
}

double altar_config_consumed_keep_s(const altar_config_t *cfg) {
  return cfg->ledger_consumed_keep_s >= 0 ? (double)cfg->ledger_consumed_keep_s
                                          : cfg->ledger_consumed_keep_days * 86400.0;
}

/* An integer setting: a whole number in [min, max] (the error names the
 * key, the range and what it counts), stored in a field of its width. */
typedef enum { INT_FIELD, LL_FIELD, SIZE_FIELD, I64_FIELD } int_field_t;
typedef struct int_key {
  const char *key;
  long long min, max;
  const char *counts; /* " (what it counts)" for the error, or "" */
  size_t off;
  int_field_t field;
} int_key_t;

static const int_key_t int_keys[] = {
    {"topics.partitions", 1, ALTAR_MAX_TOPIC_PARTITIONS, "", offsetof(altar_config_t, topic_partitions), INT_FIELD},
    {"ledger.consumed_keep_days", 0, ALTAR_MAX_CONSUMED_KEEP_DAYS, " (days; 0: keep forever)",
     offsetof(altar_config_t, ledger_consumed_keep_days), INT_FIELD},
    {"ledger.settled_horizon_s", 1, ALTAR_MAX_SETTLED_HORIZON_S,
     " (seconds of event time, for tests and soaks; unset: 7 days)", offsetof(altar_config_t, ledger_settled_horizon_s),
     LL_FIELD},
    {"ledger.consumed_keep_s", 0, ALTAR_MAX_CONSUMED_KEEP_S,
     " (seconds, for tests and soaks; 0: keep forever; overrides consumed_keep_days)",
     offsetof(altar_config_t, ledger_consumed_keep_s), LL_FIELD},
    {"ledger.settled_cache_entries", 1, ALTAR_MAX_SETTLED_CACHE_ENTRIES, " (entries kept in memory)",
     offsetof(altar_config_t, ledger_settled_cache_entries), SIZE_FIELD},
    {"ledger.standby_poll_ms", 10, 60000, " (milliseconds)", offsetof(altar_config_t, ledger_standby_poll_ms),
     INT_FIELD},
    {"ledger.standby_caught_up_events", 0, 1000000000LL, " (status events)",
     offsetof(altar_config_t, ledger_standby_caught_up_events), I64_FIELD},
    {"ledger.checkpoints_keep", 1, ALTAR_MAX_CHECKPOINTS_KEEP, " (checkpoints kept)",
     offsetof(altar_config_t, ledger_checkpoints_keep), INT_FIELD},
    {"ledger.checkpoint_interval_s", 1, 86400, " (seconds)", offsetof(altar_config_t, ledger_checkpoint_interval_s),
     INT_FIELD},
};

static int set_int_key(altar_config_t *cfg, const int_key_t *k, const char *value, altar_error_t *err) {
  char *end = NULL;
  errno = 0;
  long long n = strtoll(value, &end, 10);
  if (errno || end == value || *end || n < k->min || n > k->max)
    return altar_error_set(err, ALTAR_EINVAL, "%s: must be an integer in [%lld, %lld]%s, got \"%s\"", k->key, k->min,
                           k->max, k->counts, value);
  void *f = (char *)cfg + k->off;
  switch (k->field) {
  case INT_FIELD: *(int *)f = (int)n; break;
  case LL_FIELD: *(long long *)f = n; break;
  case SIZE_FIELD: *(size_t *)f = (size_t)n; break;
  case I64_FIELD: *(int64_t *)f = (int64_t)n; break;
  }
  return ALTAR_OK;
}

int altar_config_set(altar_config_t *cfg, const char *key, const char *value, altar_error_t *err) {
  static const struct {
    const char *key;
    size_t off;
  } strs[] = {
      {"transport.name", offsetof(altar_config_t, transport_name)},
      {"topics.jobs", offsetof(altar_config_t, topics.jobs)},
      {"topics.status", offsetof(altar_config_t, topics.status)},
      {"topics.ready", offsetof(altar_config_t, topics.ready)},
      {"topics.dead", offsetof(altar_config_t, topics.dead)},
      {"topics.dlq", offsetof(altar_config_t, topics.dlq)},
      {"topics.fleet", offsetof(altar_config_t, topics.fleet)},
      {"backend.name", offsetof(altar_config_t, backend_name)},
      {"ledger.path", offsetof(altar_config_t, ledger_path)},
      {"ledger.checkpoints", offsetof(altar_config_t, ledger_checkpoints)},
      {"metrics.addr", offsetof(altar_config_t, metrics_addr)},
      {"metrics.worker_addr", offsetof(altar_config_t, metrics_worker_addr)},
  };
  if (strlen(value) > 4096) return altar_error_set(err, ALTAR_EINVAL, "%s: value too long", key);
  for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++)
    if (!strcmp(key, int_keys[i].key)) return set_int_key(cfg, &int_keys[i], value, err);
  if (!strcmp(key, "topics.retention_ms") || !strcmp(key, "topics.status_retention_ms")) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(value, &end, 10);
    if (errno || end == value || *end || n < -1 || n == 0)
      return altar_error_set(err, ALTAR_EINVAL,
                             "%s: must be -1 (keep forever) or a positive number of milliseconds, "
                             "got \"%s\"",
                             key, value);
    *(!strcmp(key, "topics.retention_ms") ? &cfg->topics_retention_ms : &cfg->status_retention_ms) = n;
    if (strcmp(key, "topics.retention_ms")) cfg->status_retention_set = true;
    return ALTAR_OK;
  }
  if (!strcmp(key, "ledger.standby")) {
    bool yes = !strcmp(value, "true"), no = !strcmp(value, "false");
    if (!yes && !no) return altar_error_set(err, ALTAR_EINVAL, "%s: must be true or false, got \"%s\"", key, value);
    cfg->ledger_standby = yes;
    return ALTAR_OK;
  }
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
    if (!strcmp(key, strs[i].key)) {
      if (!*value && strncmp(key, "metrics.", 8) != 0)
        return altar_error_set(err, ALTAR_EINVAL, "%s: must not be empty", key);
      return set_str((char **)((char *)cfg + strs[i].off), value) ? altar_error_set(err, ALTAR_ENOMEM, "out of memory")
                                                                  : ALTAR_OK;
    }
  }
  const char *prop;
  if (!strncmp(key, "transport.kafka.", 16) && key[16]) prop = key + 16;
  else if (!strncmp(key, "transport.", 10) && key[10]) prop = key + 10;
  else if (!strncmp(key, "backend.", 8) && key[8]) {
    if (altar_strmap_set(&cfg->backend_props, key + 8, value))
      return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    return ALTAR_OK;
  } else {
    return altar_error_set(err, ALTAR_EINVAL, "%s: unknown setting", key);
  }
  if (altar_strmap_set(&cfg->transport_props, prop, value)) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  return ALTAR_OK;
}

/* ---- YAML ---- */

#define READER_MAX_SECTION_KEYS 64

typedef struct key_at {
  const char *key;
  size_t line;
} key_at_t;

typedef struct reader {
  yaml_document_t doc;
  const char *file;
  altar_config_t *cfg;
  altar_error_t *err;
  /* Keys given directly under transport: and backend:, checked against the
   * named plug-in's own keys once the whole file is read (the name may come
   * after them). */
  key_at_t tkeys[READER_MAX_SECTION_KEYS], bkeys[READER_MAX_SECTION_KEYS];
  size_t n_tkeys, n_bkeys;
} reader_t;

/* Refuses a key no part reads, with a suggestion from known. */
static int unknown_key(reader_t *r, yaml_node_t *k, const char *full, const char *key, const char *const *known) {
  char hint[160];
  altar_suggest_hint(key, known, hint, sizeof hint);
  return altar_error_set(r->err, ALTAR_ECONFIG, "%s:%zu: %s: unknown key%s", r->file, k ? k->start_mark.line + 1 : 0,
                         full, hint);
}

static int yaml_fail(reader_t *r, yaml_node_t *node, const char *key, const char *what) {
  /* A setter's message names its key already: said once. */
  size_t kl = strlen(key);
  if (!strncmp(what, key, kl) && !strncmp(what + kl, ": ", 2)) what += kl + 2;
  return altar_error_set(r->err, ALTAR_ECONFIG, "%s:%zu: %s: %s", r->file, node ? node->start_mark.line + 1 : 0, key,
                         what);
}

static const char *scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Calls fn for each key: value of a mapping node. */
typedef int (*pair_fn)(reader_t *r, const char *section, const char *key, yaml_node_t *knode, yaml_node_t *vnode);

static int each_pair(reader_t *r, yaml_node_t *map, const char *section, pair_fn fn) {
  if (!map || map->type != YAML_MAPPING_NODE) return yaml_fail(r, map, section, "expected a mapping");
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(&r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(&r->doc, p->value);
    const char *ks = scalar(k);
    if (!ks) return yaml_fail(r, k, section, "keys must be plain strings");
    int rc = fn(r, section, ks, k, v);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

static int set_scalar(reader_t *r, const char *fullkey, yaml_node_t *v) {
  const char *val = scalar(v);
  if (!val) return yaml_fail(r, v, fullkey, "expected a scalar value");
  altar_error_t e = {0};
  int rc = altar_config_set(r->cfg, fullkey, val, &e);
  if (rc) return yaml_fail(r, v, fullkey, e.msg);
  return ALTAR_OK;
}

static int set_list(reader_t *r, const char *fullkey, yaml_node_t *v) {
  char joined[4096];
  size_t at = 0;
  joined[0] = 0;
  for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
    yaml_node_t *e = yaml_document_get_node(&r->doc, *it);
    const char *s = scalar(e);
    if (!s || strchr(s, ',')) return yaml_fail(r, e, fullkey, "expected a list of plain values without commas");
    int n = snprintf(joined + at, sizeof joined - at, "%s%s", at ? "," : "", s);
    if (n < 0 || (size_t)n >= sizeof joined - at) return yaml_fail(r, v, fullkey, "list too long");
    at += (size_t)n;
  }
  altar_error_t e = {0};
  if (altar_config_set(r->cfg, fullkey, joined, &e)) return yaml_fail(r, v, fullkey, e.msg);
  return ALTAR_OK;
}

/* A mapping under backend: (e.g. options: {...}) reaches the backend as
 * JSON text, with YAML's plain scalars typed. */
static int set_json(reader_t *r, const char *fullkey, yaml_node_t *v) {
  json_t *j = altar__yaml_to_json(&r->doc, v);
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!text)
    return yaml_fail(r, v, fullkey, "expected a mapping of plain values (scalar keys, each once, at most 16 deep)");
  altar_error_t e = {0};
  int rc = altar_config_set(r->cfg, fullkey, text, &e);
  free(text);
  return rc ? yaml_fail(r, v, fullkey, e.msg) : ALTAR_OK;
}

static int on_kafka(reader_t *r, const char *section, const char *key, yaml_node_t *k, yaml_node_t *v) {
  (void)section;
  (void)k;
  char full[512];
  snprintf(full, sizeof full, "transport.kafka.%s", key);
  return set_scalar(r, full, v);
}

static int on_section_key(reader_t *r, const char *section, const char *key, yaml_node_t *k, yaml_node_t *v) {
  if (!strcmp(section, "transport") && !strcmp(key, "kafka")) return each_pair(r, v, "transport.kafka", on_kafka);
  if (!strcmp(key, "name") && (!strcmp(section, "transport") || !strcmp(section, "backend")))
    *(!strcmp(section, "transport") ? &r->cfg->transport_name_line : &r->cfg->backend_name_line) =
        (v ? v : k)->start_mark.line + 1;
  if (!strcmp(section, "transport") && strcmp(key, "name") && r->n_tkeys < READER_MAX_SECTION_KEYS)
    r->tkeys[r->n_tkeys++] = (key_at_t){key, k->start_mark.line + 1};
  if (!strcmp(section, "backend") && strcmp(key, "name") && r->n_bkeys < READER_MAX_SECTION_KEYS)
    r->bkeys[r->n_bkeys++] = (key_at_t){key, k->start_mark.line + 1};
  static const char *const topics_keys[] = {
      "jobs", "status", "ready", "dead", "dlq", "partitions", "fleet", "retention_ms", "status_retention_ms", NULL};
  static const char *const ledger_keys[] = {"path",
                                            "checkpoints",
                                            "checkpoint_interval_s",
                                            "consumed_keep_days",
                                            "consumed_keep_s",
                                            "settled_horizon_s",
                                            "settled_cache_entries",
                                            "standby",
                                            "standby_poll_ms",
                                            "standby_caught_up_events",
                                            "checkpoints_keep",
                                            NULL};
  static const char *const metrics_keys[] = {"addr", "worker_addr", NULL};
  const char *const *known = !strcmp(section, "topics")    ? topics_keys
                             : !strcmp(section, "ledger")  ? ledger_keys
                             : !strcmp(section, "metrics") ? metrics_keys
                                                           : NULL;
  if (known) {
    char full[512];
    snprintf(full, sizeof full, "%s.%s", section, key);
    for (size_t i = 0; known[i]; i++)
      if (!strcmp(key, known[i])) return set_scalar(r, full, v);
    return unknown_key(r, k, full, key, known);
  }
  char full[512];
  snprintf(full, sizeof full, "%s.%s", section, key);
  /* A backend list (e.g. pools: [a100, gpu]) is kept comma separated. */
  if (!strcmp(section, "backend") && v && v->type == YAML_SEQUENCE_NODE) return set_list(r, full, v);
  if (!strcmp(section, "backend") && v && v->type == YAML_MAPPING_NODE) return set_json(r, full, v);
  return set_scalar(r, full, v);
}

/* A plug-in entry as the loader opens it: relative to the config file's
 * directory (so a config and its plug-ins move together), absolute as given. */
static char *plugin_path(const char *config_file, const char *entry) {
  if (entry[0] == '/') return strdup(entry);
  const char *slash = strrchr(config_file, '/');
  size_t dir = slash ? (size_t)(slash - config_file) : 1;
  const char *base = slash ? config_file : ".";
  size_t n = dir + 1 + strlen(entry) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%.*s/%s", (int)dir, base, entry);
  return p;
}

static int on_plugins(reader_t *r, yaml_node_t *v) {
  if (!v || v->type != YAML_SEQUENCE_NODE) return yaml_fail(r, v, "plugins", "expected a list of plug-in files");
  size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
  if (n > ALTAR_CONFIG_MAX_PLUGINS) return yaml_fail(r, v, "plugins", "too many plug-ins (at most 64)");
  if (r->cfg->plugins) return yaml_fail(r, v, "plugins", "given twice");
  if (!n) return ALTAR_OK;
  r->cfg->plugins = calloc(n, sizeof *r->cfg->plugins);
  r->cfg->plugin_lines = calloc(n, sizeof *r->cfg->plugin_lines);
  if (!r->cfg->plugins || !r->cfg->plugin_lines) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *e = yaml_document_get_node(&r->doc, v->data.sequence.items.start[i]);
    char field[32];
    snprintf(field, sizeof field, "plugins[%zu]", i);
    const char *s = scalar(e);
    if (!s || !*s) return yaml_fail(r, e, field, "expected the path of a plug-in file");
    if (strlen(s) >= PATH_MAX) return yaml_fail(r, e, field, "path too long");
    char *path = plugin_path(r->file, s);
    if (!path) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
    r->cfg->plugins[i] = path;
    r->cfg->plugin_lines[i] = e->start_mark.line + 1;
    r->cfg->n_plugins = i + 1;
  }
  return ALTAR_OK;
}

/* storage: {python: {python, schemes: {SCHEME: ADAPTER | {adapter, options}}, <deadlines>}}
 * checked here, where every node still has its line, and kept as JSON text
 * (with each scheme's line) for altar_storage_python_configure. */
/* The keys of storage.python: the two named ones, then the positive integers
 * (docs/python-backends.md lists them with their defaults). */
static const char *const storage_py_keys[] = {"python",
                                              "schemes",
                                              "reply_timeout_ms",
                                              "start_timeout_ms",
                                              "cancel_grace_ms",
                                              "restart_backoff_ms",
                                              "restart_backoff_max_ms",
                                              "max_reply_bytes",
                                              NULL};

/* A URI scheme a storage adapter may take: [a-z][a-z0-9.-]*, under 32 bytes
 * (what altar_storage_open_for_uri reads and the registry keeps). */
static bool storage_scheme_ok(const char *s) {
  size_t n = strlen(s);
  if (!n || n >= 32 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-')) return false;
  return true;
}

static bool adapter_name_ok(const char *s) {
  size_t n = strlen(s);
  if (!n || n > 200) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= ' ' || s[i] == '=' || s[i] == '[' || s[i] == ']') return false;
  return true;
}

static int storage_scheme(reader_t *r, json_t *list, yaml_node_t *k, yaml_node_t *v) {
  const char *scheme = scalar(k);
  char full[300];
  snprintf(full, sizeof full, "storage.python.schemes.%.200s", scheme);
  if (!storage_scheme_ok(scheme))
    return yaml_fail(r, k, full, "a URI scheme is a lowercase letter, then letters, digits, '.' or '-' (at most 31)");
  for (size_t i = 0; i < json_array_size(list); i++)
    if (!strcmp(json_string_value(json_object_get(json_array_get(list, i), "scheme")), scheme))
      return yaml_fail(r, k, full, "given twice");
  const char *adapter = scalar(v);
  json_t *options = NULL;
  yaml_node_t *at = v;
  if (!adapter) {
    if (!v || v->type != YAML_MAPPING_NODE)
      return yaml_fail(r, v, full,
                       "expected an adapter's name (its altar.storage entry point) or {adapter: NAME, options: {...}}");
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
      yaml_node_t *kk = yaml_document_get_node(&r->doc, p->key);
      yaml_node_t *vv = yaml_document_get_node(&r->doc, p->value);
      const char *ks = scalar(kk);
      char sub[360];
      snprintf(sub, sizeof sub, "%s.%s", full, ks ? ks : "?");
      if (ks && !strcmp(ks, "adapter")) {
        if (!(adapter = scalar(vv))) return yaml_fail(r, vv, sub, "expected the adapter's name");
        at = vv;
      } else if (ks && !strcmp(ks, "options")) {
        json_decref(options);
        options = vv && vv->type == YAML_MAPPING_NODE ? altar__yaml_to_json(&r->doc, vv) : NULL;
        if (!options)
          return yaml_fail(r, vv, sub,
                           "expected a mapping of the adapter's keyword arguments (scalar keys, each once)");
      } else {
        static const char *const known[] = {"adapter", "options", NULL};
        json_decref(options);
        return unknown_key(r, kk, sub, ks ? ks : "?", known);
      }
    }
    if (!adapter) {
      json_decref(options);
      return yaml_fail(r, v, full, "adapter: required (the name under the altar.storage entry points)");
    }
  }
  if (!adapter_name_ok(adapter)) {
    json_decref(options);
    return yaml_fail(r, at, full, "not an entry-point name");
  }
  json_t *e = json_pack("{s:s, s:s, s:o, s:I}", "scheme", scheme, "adapter", adapter, "options",
                        options ? options : json_object(), "line", (json_int_t)(k->start_mark.line + 1));
  if (!e || json_array_append_new(list, e)) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  return ALTAR_OK;
}

static int on_storage_python(reader_t *r, yaml_node_t *v, json_t *out) {
  if (!v || v->type != YAML_MAPPING_NODE)
    return yaml_fail(r, v, "storage.python", "expected a mapping (python:, schemes:, ...)");
  json_t *list = json_array();
  if (!list || json_object_set_new(out, "schemes", list)) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  bool have_schemes = false;
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(&r->doc, p->key);
    yaml_node_t *val = yaml_document_get_node(&r->doc, p->value);
    const char *key = scalar(k);
    if (!key) return yaml_fail(r, k, "storage.python", "keys must be plain strings");
    char full[300];
    snprintf(full, sizeof full, "storage.python.%.200s", key);
    if (!strcmp(key, "python")) {
      const char *py = scalar(val);
      if (!py || !*py) return yaml_fail(r, val, full, "expected the interpreter of the adapters' environment");
      if (json_object_set_new(out, "python", json_string(py))) return yaml_fail(r, val, full, "expected UTF-8 text");
      if (json_object_set_new(out, "python_line", json_integer((json_int_t)(val->start_mark.line + 1))))
        return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
      continue;
    }
    if (!strcmp(key, "schemes")) {
      if (!val || val->type != YAML_MAPPING_NODE)
        return yaml_fail(r, val, full, "expected a mapping of URI scheme to adapter name");
      for (yaml_node_pair_t *q = val->data.mapping.pairs.start; q < val->data.mapping.pairs.top; q++) {
        yaml_node_t *sk = yaml_document_get_node(&r->doc, q->key);
        if (!scalar(sk)) return yaml_fail(r, sk, full, "keys must be plain strings");
        if (json_array_size(list) >= 32) return yaml_fail(r, sk, full, "too many schemes (at most 32)");
        int rc = storage_scheme(r, list, sk, yaml_document_get_node(&r->doc, q->value));
        if (rc) return rc;
      }
      have_schemes = true;
      continue;
    }
    bool ms = false;
    for (size_t i = 2; storage_py_keys[i] && !ms; i++) ms = !strcmp(key, storage_py_keys[i]);
    if (!ms) return unknown_key(r, k, full, key, storage_py_keys);
    const char *sv = scalar(val);
    char *end = NULL;
    errno = 0;
    long long n = sv ? strtoll(sv, &end, 10) : 0;
    if (!sv || !*sv || *end || errno || n <= 0 || n > 86400000LL * 7)
      return yaml_fail(r, val, full, "expected a positive integer");
    if (json_object_set_new(out, key, json_integer((json_int_t)n)))
      return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  }
  if (!have_schemes || !json_array_size(list))
    return yaml_fail(r, v, "storage.python", "schemes: required (which URI schemes the Python adapters serve)");
  if (!json_object_get(out, "python") && json_object_set_new(out, "python", json_string("python3")))
    return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  if (json_object_set_new(out, "line", json_integer((json_int_t)(v->start_mark.line + 1))))
    return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
  return ALTAR_OK;
}

static int on_storage(reader_t *r, yaml_node_t *v) {
  if (!v || v->type != YAML_MAPPING_NODE) return yaml_fail(r, v, "storage", "expected a mapping (python: {...})");
  if (r->cfg->storage_python) return yaml_fail(r, v, "storage", "given twice");
  for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(&r->doc, p->key);
    const char *key = scalar(k);
    if (!key) return yaml_fail(r, k, "storage", "keys must be plain strings");
    if (strcmp(key, "python")) {
      static const char *const known[] = {"python", NULL};
      char full[300];
      snprintf(full, sizeof full, "storage.%.200s", key);
      return unknown_key(r, k, full, key, known);
    }
    json_t *out = json_object();
    if (!out) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
    int rc = on_storage_python(r, yaml_document_get_node(&r->doc, p->value), out);
    char *text = rc ? NULL : json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(out);
    if (rc) return rc;
    if (!text) return altar_error_set(r->err, ALTAR_ENOMEM, "out of memory");
    free(r->cfg->storage_python);
    r->cfg->storage_python = text;
  }
  return ALTAR_OK;
}

static int on_top(reader_t *r, const char *section, const char *key, yaml_node_t *k, yaml_node_t *v) {
  (void)section;
  if (!strcmp(key, "groups")) return ALTAR_OK; /* reconciler/group_config reads it */
  if (!strcmp(key, "plugins")) return on_plugins(r, v);
  if (!strcmp(key, "storage")) return on_storage(r, v);
  if (!strcmp(key, "transport") || !strcmp(key, "topics") || !strcmp(key, "backend") || !strcmp(key, "ledger") ||
      !strcmp(key, "metrics"))
    return each_pair(r, v, key, on_section_key);
  static const char *const top_keys[] = {"transport", "topics",  "backend", "ledger", "metrics",
                                         "groups",    "plugins", "storage", NULL};
  return unknown_key(r, k, key, key, top_keys);
}

/* Keys under transport: that the named transport does not read are typos
 * (`dri:` for `dir:` would otherwise send jobs to a default log no worker
 * reads). Checked only for a registered transport that declares its keys;
 * kafka: holds the kafka transport's properties whatever transport is named. */
static int check_transport_keys(reader_t *r) {
  const altar_transport_ops_t *ops = altar_registry_lookup(ALTAR_REGISTRY_TRANSPORT, r->cfg->transport_name);
  if (!ops) return ALTAR_OK;
  for (size_t i = 0; i < r->n_tkeys; i++) {
    const char *key = r->tkeys[i].key;
    if (!strcmp(key, "kafka") || altar_plugin_keys_allow(ops->config_keys, key, NULL, 0)) continue;
    char where[300];
    snprintf(where, sizeof where, "%s:%zu: ", r->file, r->tkeys[i].line);
    return altar_plugin_keys_refuse(ops->config_keys, where, "transport", ops->name, key, r->err);
  }
  return ALTAR_OK;
}

/* Keys under backend: that the named backend does not read, the same way
 * (`slotz: 2` would otherwise run with the default slots). */
static int check_backend_keys(reader_t *r) {
  const altar_backend_ops_t *ops = altar_registry_lookup(ALTAR_REGISTRY_BACKEND, r->cfg->backend_name);
  if (!ops) return ALTAR_OK;
  for (size_t i = 0; i < r->n_bkeys; i++) {
    const char *key = r->bkeys[i].key;
    if (altar_plugin_keys_allow(altar_backend_ops_keys(ops), key, NULL, 0)) continue;
    char where[300];
    snprintf(where, sizeof where, "%s:%zu: ", r->file, r->bkeys[i].line);
    return altar_plugin_keys_refuse(altar_backend_ops_keys(ops), where, "backend", r->cfg->backend_name, key, r->err);
  }
  return ALTAR_OK;
}

static int config_read(const char *path, altar_config_t *cfg, altar_error_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return altar_error_set(err, ALTAR_ECONFIG, "%s: %s", path, strerror(errno));
  yaml_parser_t parser;
  reader_t r = {.file = path, .cfg = cfg, .err = err};
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  int rc = ALTAR_OK;
  if (!yaml_parser_load(&parser, &r.doc)) {
    rc = altar_error_set(err, ALTAR_ECONFIG, "%s:%zu: %s", path, parser.problem_mark.line + 1,
                         parser.problem ? parser.problem : "invalid YAML");
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
  }
  yaml_node_t *root = yaml_document_get_root_node(&r.doc);
  if (root) rc = each_pair(&r, root, "(top level)", on_top);
  if (!rc) rc = check_transport_keys(&r);
  if (!rc) rc = check_backend_keys(&r);
  yaml_document_delete(&r.doc);
  yaml_parser_delete(&parser);
  fclose(f);
  return rc;
}

int altar_config_load(const char *path, altar_config_t *cfg, altar_error_t *err) {
  if (config_defaults(cfg)) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  if (!path) {
    if (access(ALTAR_DEFAULT_CONFIG_FILE, R_OK) != 0) return ALTAR_OK;
    path = ALTAR_DEFAULT_CONFIG_FILE;
  }
  if (set_str(&cfg->path, path)) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  return config_read(path, cfg, err);
}

int altar_config_backend_int(const altar_config_t *cfg, const char *key, long long def, long long min, long long max,
                             long long *pval, altar_error_t *err) {
  const char *s = altar_strmap_get(&cfg->backend_props, key);
  if (!s) {
    *pval = def;
    return ALTAR_OK;
  }
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max)
    return altar_error_set(err, ALTAR_EINVAL, "backend.%s: expected an integer in [%lld, %lld], got '%s'", key, min,
                           max, s);
  *pval = v;
  return ALTAR_OK;
}
