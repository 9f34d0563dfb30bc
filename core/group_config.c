/* Group specs from YAML (libyaml document API). Every error names the file,
 * the line and the key path, e.g. "altar.yaml:12: groups.score.ready_when:
 * unknown rule 'al_folds'". */
#include "altar/attempts.h"
#include "altar/file_read.h"
#include "altar/groups.h"
#include "core/followup_int.h"
#include "altar/suggest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_CONFIG_BYTES (4u << 20)

typedef struct gc {
  yaml_document_t *doc;
  const char *file;
  altar_error_t *err;
} gc_t;

static int fail(gc_t *c, const yaml_node_t *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(gc_t *c, const yaml_node_t *n, const char *path, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return altar_error_set(c->err, ALTAR_ECONFIG, "%s:%zu: %s: %s", c->file, n ? n->start_mark.line + 1 : 0, path, msg);
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool is_null(const yaml_node_t *n) {
  const char *s = scalar(n);
  return n && n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         (!strcmp(s, "") || !strcmp(s, "~") || !strcmp(s, "null"));
}

static yaml_node_t *node(gc_t *c, int id) { return yaml_document_get_node(c->doc, id); }

/* Value of key in a mapping node, or NULL; *pkey gets the key node. */
static yaml_node_t *lookup(gc_t *c, const yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *k = scalar(node(c, p->key));
    if (k && !strcmp(k, key)) return node(c, p->value);
  }
  return NULL;
}

static int get_str(gc_t *c, const yaml_node_t *n, const char *path, char **pout) {
  const char *s = scalar(n);
  if (!s || is_null(n)) return fail(c, n, path, "expected a non-empty string");
  if (!*s) return fail(c, n, path, "must not be empty");
  if (strlen(s) > 1024) return fail(c, n, path, "longer than 1024 bytes");
  if (!(*pout = strdup(s))) return altar_error_set(c->err, ALTAR_ENOMEM, "%s: out of memory", path);
  return ALTAR_OK;
}

static int get_int(gc_t *c, const yaml_node_t *n, const char *path, int64_t lo, int64_t hi, int64_t *pv) {
  const char *s = scalar(n);
  if (!s || !*s) return fail(c, n, path, "expected an integer");
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || end == s) return fail(c, n, path, "expected an integer, got '%.40s'", s);
  if (v < lo || v > hi) return fail(c, n, path, "must be in %" PRId64 "..%" PRId64 ", got %lld", lo, hi, v);
  *pv = v;
  return ALTAR_OK;
}

static int get_num(gc_t *c, const yaml_node_t *n, const char *path, double *pv) {
  const char *s = scalar(n);
  if (!s || !*s || is_null(n)) return fail(c, n, path, "expected a number");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || v != v) return fail(c, n, path, "expected a number, got '%.40s'", s);
  *pv = v;
  return ALTAR_OK;
}

/* Rejects keys outside `allowed` (NULL-terminated), to catch typos. */
static int only_keys(gc_t *c, const yaml_node_t *map, const char *path, const char *const *allowed) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = node(c, p->key);
    const char *k = scalar(kn);
    if (!k) return fail(c, kn, path, "keys must be strings");
    bool ok = false;
    for (size_t i = 0; allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
    if (!ok) {
      char hint[160];
      altar_suggest_hint(k, allowed, hint, sizeof hint);
      return fail(c, kn, path, "unknown key '%.60s'%s", k, hint);
    }
  }
  return ALTAR_OK;
}

static int parse_ready(gc_t *c, const yaml_node_t *n, const char *path, altar_predicate_t *p) {
  char sub[256];
  altar_error_t *err = c->err;
  int rc;
  if (n->type == YAML_SCALAR_NODE) {
    const char *s = scalar(n);
    if (!strcmp(s, "single")) return altar_predicate_single(p);
    return fail(c, n, path,
                "unknown rule '%.60s' (expected single, or a mapping with one of "
                "count_at_least, all_folds, all_label_values, all_expected_folds)",
                s);
  }
  if (n->type != YAML_MAPPING_NODE || n->data.mapping.pairs.top - n->data.mapping.pairs.start != 1)
    return fail(c, n, path, "expected 'single' or a mapping with exactly one rule");
  yaml_node_pair_t *pair = n->data.mapping.pairs.start;
  yaml_node_t *kn = node(c, pair->key), *v = node(c, pair->value);
  const char *rule = scalar(kn);
  if (!rule) return fail(c, kn, path, "rule name must be a string");
  snprintf(sub, sizeof sub, "%s.%s", path, rule);
  int64_t num;
  if (!strcmp(rule, "single")) {
    if (!is_null(v)) return fail(c, v, sub, "takes no argument");
    return altar_predicate_single(p);
  }
  if (!strcmp(rule, "count_at_least") || !strcmp(rule, "all_folds")) {
    if ((rc = get_int(c, v, sub, 1, 100000, &num))) return rc;
    rc = rule[0] == 'c' ? altar_predicate_count_at_least(p, num, err) : altar_predicate_all_folds(p, num, err);
    return rc ? fail(c, v, sub, "%s", err->msg) : ALTAR_OK;
  }
  if (!strcmp(rule, "all_label_values")) {
    static const char *const keys[] = {"label", "values", NULL};
    if (v->type != YAML_MAPPING_NODE) return fail(c, v, sub, "expected a mapping {label, values}");
    if ((rc = only_keys(c, v, sub, keys))) return rc;
    yaml_node_t *ln = lookup(c, v, "label"), *vn = lookup(c, v, "values");
    char kp[300];
    snprintf(kp, sizeof kp, "%s.label", sub);
    if (!ln) return fail(c, v, kp, "missing");
    snprintf(kp, sizeof kp, "%s.values", sub);
    if (!vn) return fail(c, v, kp, "missing");
    if (vn->type != YAML_SEQUENCE_NODE) return fail(c, vn, kp, "expected a list of strings");
    size_t nv = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
    if (nv == 0) return fail(c, vn, kp, "must not be empty");
    if (nv > 4096) return fail(c, vn, kp, "more than 4096 values");
    const char **vals = calloc(nv, sizeof *vals);
    if (!vals) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", kp);
    rc = ALTAR_OK;
    for (size_t i = 0; i < nv && !rc; i++) {
      yaml_node_t *it = node(c, vn->data.sequence.items.start[i]);
      if (!(vals[i] = scalar(it))) rc = fail(c, it, kp, "item %zu is not a string", i);
    }
    char *label = NULL;
    snprintf(kp, sizeof kp, "%s.label", sub);
    if (!rc) rc = get_str(c, ln, kp, &label);
    if (!rc && altar_predicate_all_label_values(p, label, vals, nv, err)) rc = fail(c, v, sub, "%s", err->msg);
    free(label);
    free(vals);
    return rc;
  }
  if (!strcmp(rule, "all_expected_folds")) {
    static const char *const keys[] = {"label", "count_label", "default", NULL};
    if (v->type != YAML_MAPPING_NODE) return fail(c, v, sub, "expected a mapping {label, count_label, default?}");
    if ((rc = only_keys(c, v, sub, keys))) return rc;
    char kp[300], *label = NULL, *count_label = NULL;
    yaml_node_t *ln = lookup(c, v, "label"), *cn = lookup(c, v, "count_label"), *dn = lookup(c, v, "default");
    snprintf(kp, sizeof kp, "%s.count_label", sub);
    if (!cn) return fail(c, v, kp, "missing");
    rc = get_str(c, cn, kp, &count_label);
    snprintf(kp, sizeof kp, "%s.label", sub);
    if (!rc) rc = ln ? get_str(c, ln, kp, &label) : ((label = strdup("fold")) ? ALTAR_OK : ALTAR_ENOMEM);
    int64_t def = 0;
    snprintf(kp, sizeof kp, "%s.default", sub);
    if (!rc && dn && !is_null(dn)) rc = get_int(c, dn, kp, 1, 100000, &def);
    if (!rc && altar_predicate_all_expected_folds(p, label, count_label, def ? &def : NULL, err))
      rc = fail(c, v, sub, "%s", err->msg);
    free(label);
    free(count_label);
    return rc;
  }
  return fail(c, kn, path,
              "unknown rule '%.60s' (expected single, count_at_least, all_folds, "
              "all_label_values or all_expected_folds)",
              rule);
}

static int parse_on_failed(gc_t *c, const yaml_node_t *n, const char *path, altar_group_spec_t *g) {
  static const struct {
    const char *name;
    altar_failed_policy_t p;
  } names[] = {{"dead_letter", ALTAR_ON_FAILED_DEAD_LETTER},
               {"retry", ALTAR_ON_FAILED_RETRY},
               {"defer", ALTAR_ON_FAILED_DEFER},
               {"none", ALTAR_ON_FAILED_NONE}};
  const char *s = scalar(n);
  const yaml_node_t *topic = NULL;
  if (n->type == YAML_MAPPING_NODE) {
    /* {dead_letter: TOPIC}: dead-letter to a topic of its own. */
    static const char *const keys[] = {"dead_letter", NULL};
    int rc = only_keys(c, n, path, keys);
    if (rc) return rc;
    if (!(topic = lookup(c, n, "dead_letter"))) return fail(c, n, path, "expected {dead_letter: TOPIC}");
    s = "dead_letter";
  }
  if (!s) return fail(c, n, path, "expected dead_letter, retry, defer or none");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(s, names[i].name)) continue;
    g->failed_policy = names[i].p;
    if (topic) {
      char kp[300];
      snprintf(kp, sizeof kp, "%s.dead_letter", path);
      return get_str(c, topic, kp, &g->dead_topic);
    }
    return ALTAR_OK;
  }
  return fail(c, n, path, "unknown policy '%.60s' (expected dead_letter, retry, defer or none)", s);
}

static int parse_on_ready(gc_t *c, const yaml_node_t *n, const char *path, altar_group_spec_t *g) {
  const char *s = scalar(n);
  if (s && (!strcmp(s, "publish") || !strcmp(s, "none"))) return ALTAR_OK; /* the fleet's ready topic */
  if (n->type == YAML_MAPPING_NODE) {
    static const char *const keys[] = {"publish", NULL};
    int rc = only_keys(c, n, path, keys);
    if (rc) return rc;
    yaml_node_t *t = lookup(c, n, "publish");
    if (!t) return fail(c, n, path, "expected {publish: TOPIC}");
    char kp[300];
    snprintf(kp, sizeof kp, "%s.publish", path);
    return get_str(c, t, kp, &g->ready_topic);
  }
  return fail(c, n, path, "expected 'publish' or {publish: TOPIC}");
}

/* Checks a backoff's settings; err names the field under path
 * ("groups.k.retry_backoff.factor: must be in 1..100, got 0.5"). */
static int retry_backoff_check(const altar_retry_backoff_t *b, const char *path, altar_error_t *err) {
  if (!(b->initial_s > 0 && b->initial_s <= 86400))
    return altar_error_set(err, ALTAR_ECONFIG, "%s.initial: must be > 0 and <= 86400 seconds, got %g", path,
                           b->initial_s);
  if (!(b->factor >= 1 && b->factor <= 100))
    return altar_error_set(err, ALTAR_ECONFIG, "%s.factor: must be in 1..100, got %g", path, b->factor);
  if (!(b->max_s >= b->initial_s && b->max_s <= 7 * 86400))
    return altar_error_set(err, ALTAR_ECONFIG, "%s.max: must be >= initial (%g) and <= 604800 seconds, got %g", path,
                           b->initial_s, b->max_s);
  if (!(b->jitter >= 0 && b->jitter <= 1))
    return altar_error_set(err, ALTAR_ECONFIG, "%s.jitter: must be in 0..1 (a fraction of the delay), got %g", path,
                           b->jitter);
  return ALTAR_OK;
}

/* retry_backoff: {initial: S, factor: F, max: S, jitter: J}; seconds. */
static int parse_backoff(gc_t *c, const yaml_node_t *n, const char *path, altar_retry_backoff_t *b) {
  static const char *const keys[] = {"initial", "factor", "max", "jitter", NULL};
  if (n->type != YAML_MAPPING_NODE)
    return fail(c, n, path, "expected a mapping {initial: SECONDS, factor: F, max: SECONDS, jitter: 0..1}");
  int rc = only_keys(c, n, path, keys);
  if (rc) return rc;
  *b = (altar_retry_backoff_t){.factor = 2, .jitter = 0};
  char kp[300];
  yaml_node_t *v = lookup(c, n, "initial");
  snprintf(kp, sizeof kp, "%s.initial", path);
  if (!v) return fail(c, n, kp, "missing (seconds before the first retry)");
  if ((rc = get_num(c, v, kp, &b->initial_s))) return rc;
  b->max_s = b->initial_s * 64 < 3600 ? 3600 : b->initial_s * 64;
  static const char *const names[] = {"factor", "max", "jitter"};
  double *dst[] = {&b->factor, &b->max_s, &b->jitter};
  for (size_t i = 0; i < 3; i++) {
    snprintf(kp, sizeof kp, "%s.%s", path, names[i]);
    if ((v = lookup(c, n, names[i])) && (rc = get_num(c, v, kp, dst[i]))) return rc;
  }
  altar_error_t e = {0};
  if (retry_backoff_check(b, path, &e)) {
    /* e.msg starts with the field's path: point at that field's line. */
    const yaml_node_t *at = n;
    for (size_t i = 0; i < 4; i++) {
      char fp[300];
      snprintf(fp, sizeof fp, "%s.%s:", path, keys[i]);
      if (!strncmp(e.msg, fp, strlen(fp)) && lookup(c, n, keys[i])) at = lookup(c, n, keys[i]);
    }
    return altar_error_set(c->err, ALTAR_ECONFIG, "%s:%zu: %s", c->file, at->start_mark.line + 1, e.msg);
  }
  return ALTAR_OK;
}

static int parse_kind(gc_t *c, const char *kind, const yaml_node_t *n, const char *prefix, altar_group_spec_t *g) {
  static const char *const keys[] = {"group_by",      "ready_when",    "on_ready",  "on_failed",
                                     "max_restarts",  "retry_backoff", "then",      "then_dead",
                                     "event_outputs", "attempts_keep", "max_width", NULL};
  char path[256], kp[300];
  snprintf(path, sizeof path, "%s%s", prefix, kind);
  memset(g, 0, sizeof *g);
  g->config_line = (int)n->start_mark.line + 1;
  if (n->type != YAML_MAPPING_NODE) return fail(c, n, path, "expected a mapping with group_by and ready_when");
  int rc = only_keys(c, n, path, keys);
  if (rc) return rc;
  if (!(g->kind = strdup(kind))) return altar_error_set(c->err, ALTAR_ENOMEM, "%s: out of memory", path);

  yaml_node_t *gb = lookup(c, n, "group_by");
  snprintf(kp, sizeof kp, "%s.group_by", path);
  if (!gb) return fail(c, n, kp, "missing (a list of label names)");
  if (gb->type != YAML_SEQUENCE_NODE) return fail(c, gb, kp, "expected a list of label names");
  size_t nl = (size_t)(gb->data.sequence.items.top - gb->data.sequence.items.start);
  if (nl > 64) return fail(c, gb, kp, "more than 64 labels");
  const char *labels[64];
  for (size_t i = 0; i < nl; i++) {
    yaml_node_t *it = node(c, gb->data.sequence.items.start[i]);
    if (!(labels[i] = scalar(it)) || !*labels[i]) return fail(c, it, kp, "item %zu is not a label name", i);
  }
  if (altar_group_by_init(&g->group_by, labels, nl))
    return altar_error_set(c->err, ALTAR_ENOMEM, "%s: out of memory", kp);

  yaml_node_t *rw = lookup(c, n, "ready_when");
  snprintf(kp, sizeof kp, "%s.ready_when", path);
  if (!rw) return fail(c, n, kp, "missing (single, {count_at_least: N}, {all_folds: N}, ...)");
  if ((rc = parse_ready(c, rw, kp, &g->ready_when))) return rc;

  yaml_node_t *orn = lookup(c, n, "on_ready");
  snprintf(kp, sizeof kp, "%s.on_ready", path);
  if (orn && (rc = parse_on_ready(c, orn, kp, g))) return rc;

  yaml_node_t *ofn = lookup(c, n, "on_failed");
  snprintf(kp, sizeof kp, "%s.on_failed", path);
  if (ofn && (rc = parse_on_failed(c, ofn, kp, g))) return rc;

  yaml_node_t *mr = lookup(c, n, "max_restarts");
  snprintf(kp, sizeof kp, "%s.max_restarts", path);
  if (mr && (rc = get_int(c, mr, kp, 0, 1000, &g->max_restarts))) return rc;
  if (g->failed_policy == ALTAR_ON_FAILED_RETRY && g->max_restarts < 1)
    return fail(c, mr ? mr : n, kp, "must be >= 1 with on_failed: retry");
  yaml_node_t *rb = lookup(c, n, "retry_backoff");
  snprintf(kp, sizeof kp, "%s.retry_backoff", path);
  if (rb && g->failed_policy != ALTAR_ON_FAILED_RETRY)
    return fail(c, rb, kp, "only applies with on_failed: retry (this kind has on_failed: %s)",
                altar_failed_policy_name(g->failed_policy));
  if (rb && (rc = parse_backoff(c, rb, kp, &g->retry_backoff))) return rc;
  yaml_node_t *ak = lookup(c, n, "attempts_keep");
  snprintf(kp, sizeof kp, "%s.attempts_keep", path);
  if (ak && (rc = get_int(c, ak, kp, 1, ALTAR_ATTEMPTS_KEEP_MAX, &g->attempts_keep))) return rc;
  yaml_node_t *mw = lookup(c, n, "max_width");
  snprintf(kp, sizeof kp, "%s.max_width", path);
  if (mw && (rc = get_int(c, mw, kp, 1, ALTAR_GROUP_MAX_WIDTH_MAX, &g->max_width))) return rc;
  yaml_node_t *eo = lookup(c, n, "event_outputs");
  snprintf(kp, sizeof kp, "%s.event_outputs", path);
  if (eo) {
    const char *b = scalar(eo);
    if (b && !strcmp(b, "true")) g->event_outputs = true;
    else if (!b || strcmp(b, "false")) return fail(c, eo, kp, "expected true or false");
  }
  /* The next stage: a task template per outcome. */
  yaml_node_t *tn = lookup(c, n, "then");
  snprintf(kp, sizeof kp, "%s.then", path);
  if (tn && (rc = altar__followup_parse(c->doc, c->file, tn, kp, &g->group_by, &g->then, c->err))) return rc;
  tn = lookup(c, n, "then_dead");
  snprintf(kp, sizeof kp, "%s.then_dead", path);
  if (tn && (rc = altar__followup_parse(c->doc, c->file, tn, kp, &g->group_by, &g->then_dead, c->err))) return rc;
  return ALTAR_OK;
}

int altar_group_specs_load_string(const char *text, size_t len, const char *name, altar_group_specs_t *pout,
                                  altar_error_t *err) {
  if (!name) name = "<string>";
  if (len > MAX_CONFIG_BYTES)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: larger than %u bytes", name, MAX_CONFIG_BYTES);
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", name);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    int rc = altar_error_set(err, ALTAR_ECONFIG, "%s:%zu: YAML: %s", name, parser.problem_mark.line + 1,
                             parser.problem ? parser.problem : "malformed");
    yaml_parser_delete(&parser);
    return rc;
  }
  yaml_parser_delete(&parser);
  gc_t c = {.doc = &doc, .file = name, .err = err};
  int rc = ALTAR_OK;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  const char *prefix = "";
  yaml_node_t *groups = root;
  if (!root || is_null(root)) goto out; /* an empty file declares no groups */
  if (root->type != YAML_MAPPING_NODE) {
    rc = fail(&c, root, "(top)", "expected a mapping of kind → group spec, or a config with 'groups:'");
    goto out;
  }
  /* A whole altar config carries its groups under `groups:`. */
  yaml_node_t *g = lookup(&c, root, "groups");
  if (!g) {
    /* A whole config without `groups:` declares none (it is not a bare groups file). */
    static const char *const config_keys[] = {"transport", "topics", "backend", "ledger", "metrics"};
    for (size_t i = 0; i < sizeof config_keys / sizeof config_keys[0]; i++)
      if (lookup(&c, root, config_keys[i])) goto out;
  }
  if (g) {
    prefix = "groups.";
    groups = g;
    if (is_null(g)) goto out;
    if (g->type != YAML_MAPPING_NODE) {
      rc = fail(&c, g, "groups", "expected a mapping of kind → group spec");
      goto out;
    }
  }
  for (yaml_node_pair_t *p = groups->data.mapping.pairs.start; !rc && p < groups->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = node(&c, p->key);
    const char *kind = scalar(kn);
    if (!kind || !*kind) {
      rc = fail(&c, kn, prefix[0] ? "groups" : "(top)", "a kind name must be a non-empty string");
      break;
    }
    altar_group_spec_t spec;
    rc = parse_kind(&c, kind, node(&c, p->value), prefix, &spec);
    if (!rc && altar_group_specs_add(pout, &spec, err)) {
      rc = fail(&c, kn, kind, "%s", err->msg);
    }
    altar_group_spec_clear(&spec);
  }
  if (!rc) rc = altar_followup_check_chain(pout, name, err);
out:
  yaml_document_delete(&doc);
  return rc;
}

int altar_group_specs_load_file(const char *path, altar_group_specs_t *pout, altar_error_t *err) {
  size_t n = 0;
  altar_error_t rerr = {0};
  char *buf = altar_file_read(path, NULL, MAX_CONFIG_BYTES, &n, &rerr);
  if (!buf) return altar_error_set(err, rerr.code == ALTAR_ENOMEM ? ALTAR_ENOMEM : ALTAR_ECONFIG, "%s", rerr.msg);
  int rc = altar_group_specs_load_string(buf, n, path, pout, err);
  free(buf);
  return rc;
}
