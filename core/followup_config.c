/* A kind's follow-up template from YAML (`then:`, `then_dead:`), checked
 * as strictly as the rest of the group config: every error names the file,
 * the line and the field ("altar.yaml:14: groups.train.then.command[1]:
 * unknown placeholder {{modle_id}}"). */
#include "core/followup_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fc {
  yaml_document_t *doc;
  const char *file;
  const altar_group_by_t *gb;
  altar_error_t *err;
} fc_t;

static int fail(fc_t *c, const yaml_node_t *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(fc_t *c, const yaml_node_t *n, const char *path, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return altar_error_set(c->err, ALTAR_ECONFIG, "%s:%zu: %s: %s", c->file, n ? n->start_mark.line + 1 : 0, path, msg);
}

static int nomem(fc_t *c, const char *path) { return altar_error_set(c->err, ALTAR_ENOMEM, "%s: out of memory", path); }

static yaml_node_t *node(fc_t *c, int id) { return yaml_document_get_node(c->doc, id); }

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *lookup(fc_t *c, const yaml_node_t *map, const char *key) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *k = scalar(node(c, p->key));
    if (k && !strcmp(k, key)) return node(c, p->value);
  }
  return NULL;
}

static int only_keys(fc_t *c, const yaml_node_t *map, const char *path, const char *const *allowed) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = node(c, p->key);
    const char *k = scalar(kn);
    bool ok = false;
    for (size_t i = 0; k && allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
    if (!ok) {
      char list[300] = "";
      for (size_t i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
      return fail(c, kn, path, "unknown key '%.60s' (expected %s)", k ? k : "?", list);
    }
  }
  return ALTAR_OK;
}

/* Every {{NAME}} in s must be a group_by label or a builtin. */
static int check_placeholders(fc_t *c, const yaml_node_t *n, const char *path, const char *s, bool allow_inputs) {
  for (const char *p = strstr(s, "{{"); p; p = strstr(p, "{{")) {
    const char *e = strstr(p + 2, "}}");
    if (!e) return fail(c, n, path, "'{{' without its '}}'");
    size_t len = (size_t)(e - p - 2);
    bool ok = (len == 8 && !strncmp(p + 2, "event_id", 8)) || (len == 9 && !strncmp(p + 2, "group_key", 9)) ||
              (len == 4 && !strncmp(p + 2, "kind", 4)) || (allow_inputs && len == 6 && !strncmp(p + 2, "inputs", 6));
    for (size_t i = 0; !ok && i < c->gb->n; i++)
      ok = strlen(c->gb->labels[i]) == len && !strncmp(p + 2, c->gb->labels[i], len);
    if (!ok)
      return fail(c, n, path,
                  "unknown placeholder {{%.*s}} (expected one of the kind's group_by labels, event_id, "
                  "group_key, kind%s)",
                  (int)(len < 60 ? len : 60), p + 2, allow_inputs ? ", inputs" : "");
    p = e + 2;
  }
  return ALTAR_OK;
}

static int get_str(fc_t *c, const yaml_node_t *n, const char *path, bool tmpl, char **pout) {
  const char *s = scalar(n);
  if (!s) return fail(c, n, path, "expected a string");
  if (!*s) return fail(c, n, path, "must not be empty");
  if (strlen(s) > 4096) return fail(c, n, path, "longer than 4096 bytes");
  int rc = tmpl ? check_placeholders(c, n, path, s, true) : ALTAR_OK;
  if (!rc && !(*pout = strdup(s))) rc = nomem(c, path);
  return rc;
}

static int parse_command(fc_t *c, const yaml_node_t *n, const char *path, altar_spec_t *s) {
  if (!n || n->type != YAML_SEQUENCE_NODE) return fail(c, n, path, "expected a list of strings (the argv)");
  size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (!cnt) return fail(c, n, path, "must not be empty");
  if (cnt > 1024) return fail(c, n, path, "more than 1024 arguments");
  for (size_t i = 0; i < cnt; i++) {
    yaml_node_t *it = node(c, n->data.sequence.items.start[i]);
    char ip[300];
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    const char *a = scalar(it);
    if (!a) return fail(c, it, ip, "expected a string");
    int rc = check_placeholders(c, it, ip, a, true);
    if (rc) return rc;
    if (altar_spec_add_arg(s, a)) return nomem(c, ip);
  }
  return ALTAR_OK;
}

static int parse_labels(fc_t *c, const yaml_node_t *n, const char *path, altar_spec_t *s) {
  if (n->type != YAML_MAPPING_NODE) return fail(c, n, path, "expected a mapping of label → value");
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = node(c, p->key), *vn = node(c, p->value);
    const char *k = scalar(kn), *v = scalar(vn);
    char kp[300];
    snprintf(kp, sizeof kp, "%s.%s", path, k ? k : "?");
    if (!k || !*k) return fail(c, kn, path, "label names must be non-empty strings");
    if (!strcmp(k, ALTAR_FOLLOWUP_LABEL)) return fail(c, kn, kp, "is set by altar (the group event id)");
    if (!v) return fail(c, vn, kp, "expected a string");
    int rc = check_placeholders(c, vn, kp, v, true);
    if (rc) return rc;
    if (altar_spec_set_label(s, k, v)) return nomem(c, kp);
  }
  return ALTAR_OK;
}

static int parse_outputs(fc_t *c, const yaml_node_t *n, const char *path, altar_spec_t *s) {
  static const char *const keys[] = {"uri", "logical_path", NULL};
  if (n->type != YAML_SEQUENCE_NODE) return fail(c, n, path, "expected a list of {uri, logical_path}");
  size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  for (size_t i = 0; i < cnt; i++) {
    yaml_node_t *it = node(c, n->data.sequence.items.start[i]);
    char ip[300], fp[320];
    snprintf(ip, sizeof ip, "%s[%zu]", path, i);
    if (it->type != YAML_MAPPING_NODE) return fail(c, it, ip, "expected a mapping {uri, logical_path}");
    int rc = only_keys(c, it, ip, keys);
    if (rc) return rc;
    char *uri = NULL, *lp = NULL;
    yaml_node_t *un = lookup(c, it, "uri"), *ln = lookup(c, it, "logical_path");
    snprintf(fp, sizeof fp, "%s.uri", ip);
    if (!un) return fail(c, it, fp, "missing");
    rc = get_str(c, un, fp, true, &uri);
    snprintf(fp, sizeof fp, "%s.logical_path", ip);
    if (!rc && !ln) rc = fail(c, it, fp, "missing");
    if (!rc) rc = get_str(c, ln, fp, true, &lp);
    if (!rc && altar_spec_add_output(s, uri, lp)) rc = nomem(c, ip);
    free(uri);
    free(lp);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

static int get_int(fc_t *c, const yaml_node_t *n, const char *path, long long lo, long long hi, long long *pv) {
  const char *s = scalar(n);
  char *end;
  errno = 0;
  long long v = s ? strtoll(s, &end, 10) : 0;
  if (!s || !*s || errno || *end) return fail(c, n, path, "expected an integer");
  if (v < lo || v > hi) return fail(c, n, path, "must be in %lld..%lld, got %lld", lo, hi, v);
  *pv = v;
  return ALTAR_OK;
}

int altar__followup_parse(yaml_document_t *doc, const char *file, const yaml_node_t *n, const char *path,
                          const altar_group_by_t *gb, altar_followup_t **pout, altar_error_t *err) {
  static const char *const keys[] = {"kind", "image",     "command",    "labels",       "outputs", "timeout_s",
                                     "gpu",  "memory_mb", "inputs_dir", "manifest_uri", NULL};
  fc_t c = {.doc = doc, .file = file, .gb = gb, .err = err};
  *pout = NULL;
  if (n->type != YAML_MAPPING_NODE)
    return fail(&c, n, path, "expected a task template {kind, image, command, labels?, outputs?, timeout_s?, ...}");
  int rc = only_keys(&c, n, path, keys);
  if (rc) return rc;
  altar_followup_t *f = calloc(1, sizeof *f);
  if (!f) return nomem(&c, path);
  f->config_line = (int)n->start_mark.line + 1;
  char kp[300], *kind = NULL, *image = NULL;
  yaml_node_t *v;
  snprintf(kp, sizeof kp, "%s.kind", path);
  if (!(v = lookup(&c, n, "kind"))) rc = fail(&c, n, kp, "missing (the next stage's kind)");
  if (!rc) rc = get_str(&c, v, kp, false, &kind);
  snprintf(kp, sizeof kp, "%s.image", path);
  if (!rc && !(v = lookup(&c, n, "image"))) rc = fail(&c, n, kp, "missing");
  if (!rc) rc = get_str(&c, v, kp, true, &image);
  if (!rc && !(f->tmpl = altar_spec_new(kind, image))) rc = nomem(&c, path);
  free(kind);
  free(image);
  snprintf(kp, sizeof kp, "%s.command", path);
  if (!rc) rc = parse_command(&c, lookup(&c, n, "command"), kp, f->tmpl);
  snprintf(kp, sizeof kp, "%s.labels", path);
  if (!rc && (v = lookup(&c, n, "labels"))) rc = parse_labels(&c, v, kp, f->tmpl);
  snprintf(kp, sizeof kp, "%s.outputs", path);
  if (!rc && (v = lookup(&c, n, "outputs"))) rc = parse_outputs(&c, v, kp, f->tmpl);
  long long num;
  snprintf(kp, sizeof kp, "%s.timeout_s", path);
  if (!rc && (v = lookup(&c, n, "timeout_s")) && !(rc = get_int(&c, v, kp, 1, 30LL * 86400, &num)))
    f->tmpl->timeout_s = (altar_opt_i64_t){.set = true, .v = num};
  snprintf(kp, sizeof kp, "%s.memory_mb", path);
  if (!rc && (v = lookup(&c, n, "memory_mb")) && !(rc = get_int(&c, v, kp, 1, 1LL << 30, &num)))
    f->tmpl->resources.memory_mb = (altar_opt_i64_t){.set = true, .v = num};
  snprintf(kp, sizeof kp, "%s.gpu", path);
  if (!rc && (v = lookup(&c, n, "gpu"))) {
    char *pool = NULL;
    rc = get_str(&c, v, kp, false, &pool);
    if (!rc && altar_spec_set_gpu(f->tmpl, pool, 1)) rc = nomem(&c, kp);
    free(pool);
  }
  snprintf(kp, sizeof kp, "%s.inputs_dir", path);
  if (!rc && (v = lookup(&c, n, "inputs_dir"))) {
    const char *s = scalar(v);
    rc = s ? check_placeholders(&c, v, kp, s, false) : ALTAR_OK;
    if (!rc) rc = get_str(&c, v, kp, false, &f->inputs_dir);
  } else if (!rc && !(f->inputs_dir = strdup("inputs/{{event_id}}"))) {
    rc = nomem(&c, kp);
  }
  snprintf(kp, sizeof kp, "%s.manifest_uri", path);
  if (!rc && (v = lookup(&c, n, "manifest_uri"))) {
    const char *s = scalar(v);
    rc = s ? check_placeholders(&c, v, kp, s, false) : ALTAR_OK;
    if (!rc) rc = get_str(&c, v, kp, false, &f->manifest_uri);
  }
  if (rc) {
    altar_followup_free(f);
    return rc;
  }
  *pout = f;
  return ALTAR_OK;
}
