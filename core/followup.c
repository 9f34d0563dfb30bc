/* Instantiating a follow-up template for one group event, and checking the
 * chain of stages a config declares. Deterministic: the same event always
 * gives the same spec, hence the same task key (a replay or a re-published
 * outbox entry names the same follow-up). */
#include "altar/followup.h"
#include "altar/buf.h"
#include "altar/digest.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void altar_followup_free(altar_followup_t *f) {
  if (!f) return;
  altar_spec_free(f->tmpl);
  free(f->inputs_dir);
  free(f->manifest_uri);
  free(f);
}

const altar_followup_t *altar_followup_for(const altar_group_spec_t *gs, const altar_group_event_t *g) {
  if (!gs || !g) return NULL;
  if (g->event == ALTAR_GROUP_FIRED) return gs->then;
  if (g->event == ALTAR_GROUP_DEAD_LETTERED) return gs->then_dead;
  return NULL; /* a cancelled group starts nothing */
}

typedef struct vars {
  const altar_group_spec_t *gs;
  const altar_group_event_t *g;
  const char *inputs; /* NULL while inputs_dir itself is expanded */
} vars_t;

static const char *var(const vars_t *v, const char *name, size_t len) {
  if (len == 8 && !strncmp(name, "event_id", 8)) return v->g->event_id;
  if (len == 9 && !strncmp(name, "group_key", 9)) return v->g->group_key;
  if (len == 4 && !strncmp(name, "kind", 4)) return v->g->kind;
  if (len == 6 && !strncmp(name, "inputs", 6) && v->inputs) return v->inputs;
  for (size_t i = 0; i < v->gs->group_by.n; i++) {
    const char *l = v->gs->group_by.labels[i];
    if (strlen(l) != len || strncmp(l, name, len)) continue;
    /* Members share their group_by labels; a missing one is empty, as in the group key. */
    const char *val = v->g->n_shards ? altar_strmap_get(&v->g->shards[0].labels, l) : NULL;
    return val ? val : "";
  }
  return NULL;
}

/* s with its {{NAME}} replaced; malloc'd. NULL with err set. */
static char *expand(const vars_t *v, const char *s, const char *what, altar_error_t *err) {
  altar_buf_t b = {0};
  const char *p = s;
  for (const char *o; (o = strstr(p, "{{"));) {
    const char *e = strstr(o + 2, "}}");
    const char *val = e ? var(v, o + 2, (size_t)(e - o - 2)) : NULL;
    if (!val) {
      altar_buf_free(&b);
      altar_error_set(err, ALTAR_EINVAL, "%s: placeholder in '%.80s' has no value", what, s);
      return NULL;
    }
    if (altar_buf_append(&b, p, (size_t)(o - p)) || altar_buf_append(&b, val, strlen(val))) goto nomem;
    p = e + 2;
  }
  if (altar_buf_append(&b, p, strlen(p))) goto nomem;
  char *out = b.len ? altar_buf_detach(&b) : strdup("");
  if (out) return out;
nomem:
  altar_buf_free(&b);
  altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory");
  return NULL;
}

/* Labels every listed member carries with one value. */
static int common_labels(const altar_group_event_t *g, altar_spec_t *s) {
  if (!g->n_shards) return ALTAR_OK;
  const altar_strmap_t *first = &g->shards[0].labels;
  for (size_t i = 0; i < first->n; i++) {
    bool same = true;
    for (size_t k = 1; k < g->n_shards && same; k++) {
      const char *o = altar_strmap_get(&g->shards[k].labels, first->keys[i]);
      same = o && !strcmp(o, first->vals[i]);
    }
    if (same && altar_spec_set_label(s, first->keys[i], first->vals[i])) return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

void altar_followup_manifest_clear(altar_followup_manifest_t *m) {
  if (!m) return;
  free(m->uri);
  altar_buf_free(&m->content);
  memset(m, 0, sizeof *m);
}

bool altar_followup_needs_manifest(const altar_followup_t *f, const altar_group_event_t *g) {
  if (!f || !g || !g->n_outputs) return false;
  if (g->n_outputs + f->tmpl->n_inputs > ALTAR_FOLLOWUP_MAX_INPUTS) return true;
  size_t bytes = 0;
  for (size_t i = 0; i < g->n_outputs; i++) {
    const altar_transfer_t *o = &g->outputs[i];
    bytes += strlen(o->uri) + strlen(o->logical_path) + (o->digest ? strlen(o->digest) : 0) +
             (o->locality_key ? strlen(o->locality_key) : 0) + 64;
  }
  return bytes > ALTAR_FOLLOWUP_MAX_INPUT_BYTES;
}

/* The manifest's default place: beside the group's first output. */
static char *default_manifest_uri(const altar_group_event_t *g, altar_error_t *err) {
  const char *u = g->outputs[0].uri, *sch = strstr(u, "://");
  const char *from = sch ? sch + 3 : u, *slash = strrchr(from, '/');
  if (!slash) {
    altar_error_set(err, ALTAR_EINVAL,
                    "its %zu outputs need a manifest and the first, '%.200s', names no directory to put it beside: "
                    "set manifest_uri",
                    g->n_outputs, u);
    return NULL;
  }
  size_t n = (size_t)(slash - u) + 1 + 64 + 32;
  char *out = malloc(n);
  if (!out) {
    altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory");
    return NULL;
  }
  snprintf(out, n, "%.*s/altar-inputs-%.64s.jsonl", (int)(slash - u), u, g->event_id);
  return out;
}

/* The manifest's lines into b: the inputs the follow-up would have had. */
static int manifest_content(const altar_group_event_t *g, const char *inputs, altar_buf_t *b, altar_error_t *err) {
  for (size_t i = 0; i < g->n_outputs; i++) {
    const altar_transfer_t *o = &g->outputs[i];
    size_t n = strlen(inputs) + strlen(o->logical_path) + 32;
    char *lp = malloc(n);
    if (!lp) return altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory");
    snprintf(lp, n, "%s/%zu/%s", inputs, i, o->logical_path);
    json_t *j = json_pack("{s:s?, s:s?, s:s, s:s}", "digest", o->digest, "locality_key", o->locality_key,
                          "logical_path", lp, "uri", o->uri);
    free(lp);
    char *line = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    int rc = !line || altar_buf_append(b, line, strlen(line)) || altar_buf_append(b, "\n", 1);
    free(line);
    if (rc) return altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory");
  }
  return ALTAR_OK;
}

int altar_followup_build(const altar_followup_t *f, const altar_group_spec_t *gs, const altar_group_event_t *g,
                         altar_spec_t **pout, altar_error_t *err) {
  return altar_followup_build_manifest(f, gs, g, pout, NULL, err);
}

int altar_followup_build_manifest(const altar_followup_t *f, const altar_group_spec_t *gs, const altar_group_event_t *g,
                                  altar_spec_t **pout, altar_followup_manifest_t *pm, altar_error_t *err) {
  *pout = NULL;
  if (pm) memset(pm, 0, sizeof *pm);
  bool manifest = pm && altar_followup_needs_manifest(f, g);
  const altar_spec_t *t = f->tmpl;
  vars_t v = {.gs = gs, .g = g};
  char *inputs = expand(&v, f->inputs_dir, "inputs_dir", err);
  if (!inputs) return err ? err->code : ALTAR_EINVAL;
  v.inputs = inputs;
  int rc = ALTAR_OK;
  char *image = expand(&v, t->image, "image", err);
  altar_spec_t *s = image ? altar_spec_new(t->kind, image) : NULL;
  free(image);
  if (!s) {
    rc = image ? altar_error_set(err, ALTAR_ENOMEM, "follow-up: out of memory") : (err ? err->code : ALTAR_EINVAL);
    goto out;
  }
  for (size_t i = 0; !rc && i < t->n_command; i++) {
    char *a = expand(&v, t->command[i], "command", err);
    rc = !a ? (err ? err->code : ALTAR_EINVAL) : altar_spec_add_arg(s, a) ? ALTAR_ENOMEM : ALTAR_OK;
    free(a);
  }
  if (!rc && common_labels(g, s)) rc = ALTAR_ENOMEM;
  for (size_t i = 0; !rc && i < t->labels.n; i++) {
    char *a = expand(&v, t->labels.vals[i], "labels", err);
    rc = !a ? (err ? err->code : ALTAR_EINVAL) : altar_spec_set_label(s, t->labels.keys[i], a) ? ALTAR_ENOMEM : 0;
    free(a);
  }
  if (!rc && altar_spec_set_label(s, ALTAR_FOLLOWUP_LABEL, g->event_id)) rc = ALTAR_ENOMEM;
  if (!rc && !manifest && g->n_outputs + t->n_inputs > ALTAR_MAX_ARRAY)
    rc = altar_error_set(err, ALTAR_EINVAL, "the group's %zu outputs are more inputs than one task may have (%u)",
                         g->n_outputs, ALTAR_MAX_ARRAY);
  if (!rc && manifest) {
    /* One input, the manifest, in place of the outputs themselves. */
    pm->uri = f->manifest_uri ? expand(&v, f->manifest_uri, "manifest_uri", err) : default_manifest_uri(g, err);
    rc = pm->uri ? manifest_content(g, inputs, &pm->content, err) : (err ? err->code : ALTAR_EINVAL);
    char digest[ALTAR_DIGEST_BUFSZ], *lp = NULL;
    size_t n = strlen(inputs) + 32;
    if (!rc && altar_sha256_bytes(pm->content.data, pm->content.len, digest, err)) rc = err ? err->code : ALTAR_EIO;
    if (!rc && !(lp = malloc(n))) rc = ALTAR_ENOMEM;
    if (!rc) {
      snprintf(lp, n, "%s/manifest.jsonl", inputs);
      if (altar_spec_add_input(s, pm->uri, lp, NULL, digest) ||
          altar_spec_set_label(s, ALTAR_FOLLOWUP_MANIFEST_LABEL, lp))
        rc = ALTAR_ENOMEM;
    }
    free(lp);
  }
  for (size_t i = 0; !rc && !manifest && i < g->n_outputs; i++) {
    const altar_transfer_t *o = &g->outputs[i];
    size_t n = strlen(inputs) + strlen(o->logical_path) + 32;
    char *lp = malloc(n);
    if (!lp) {
      rc = ALTAR_ENOMEM;
      break;
    }
    snprintf(lp, n, "%s/%zu/%s", inputs, i, o->logical_path);
    if (altar_spec_add_input(s, o->uri, lp, o->locality_key, o->digest)) rc = ALTAR_ENOMEM;
    free(lp);
  }
  for (size_t i = 0; !rc && i < t->n_outputs; i++) {
    char *u = expand(&v, t->outputs[i].uri, "outputs.uri", err);
    char *lp = u ? expand(&v, t->outputs[i].logical_path, "outputs.logical_path", err) : NULL;
    rc = !lp ? (err ? err->code : ALTAR_EINVAL) : altar_spec_add_output(s, u, lp) ? ALTAR_ENOMEM : 0;
    free(u);
    free(lp);
  }
  if (!rc) {
    s->timeout_s = t->timeout_s;
    s->resources.memory_mb = t->resources.memory_mb;
    if (t->resources.gpu && altar_spec_set_gpu(s, t->resources.gpu, t->resources.count)) rc = ALTAR_ENOMEM;
  }
  if (rc == ALTAR_ENOMEM) altar_error_set(err, rc, "follow-up: out of memory");
  if (!rc) rc = altar_spec_validate(s, err);
out:
  free(inputs);
  if (rc) {
    altar_spec_free(s);
    altar_followup_manifest_clear(pm);
  } else {
    *pout = s;
  }
  return rc;
}

/* Depth-first along then/then_dead from kind; true when it comes back to start. */
static bool loops(const altar_group_specs_t *specs, const char *start, const char *kind, size_t depth) {
  if (depth > specs->n) return true;
  const altar_group_spec_t *gs = altar_group_specs_find(specs, kind);
  if (!gs) return false;
  const altar_followup_t *next[2] = {gs->then, gs->then_dead};
  for (size_t i = 0; i < 2; i++) {
    if (!next[i]) continue;
    if (!strcmp(next[i]->tmpl->kind, start) || loops(specs, start, next[i]->tmpl->kind, depth + 1)) return true;
  }
  return false;
}

int altar_followup_check_chain(const altar_group_specs_t *specs, const char *file, altar_error_t *err) {
  for (size_t i = 0; i < specs->n; i++) {
    const altar_group_spec_t *gs = &specs->v[i];
    const altar_followup_t *fs[2] = {gs->then, gs->then_dead};
    static const char *const names[2] = {"then", "then_dead"};
    for (size_t k = 0; k < 2; k++) {
      if (!fs[k]) continue;
      const char *next = fs[k]->tmpl->kind;
      if (!altar_group_specs_find(specs, next))
        return altar_error_set(err, ALTAR_ECONFIG,
                               "%s:%d: groups.%s.%s.kind: '%s' has no group spec (declare it under groups: so its "
                               "tasks run and group)",
                               file, fs[k]->config_line, gs->kind, names[k], next);
      if (!strcmp(next, gs->kind) || loops(specs, gs->kind, next, 0))
        return altar_error_set(err, ALTAR_ECONFIG,
                               "%s:%d: groups.%s.%s.kind: '%s' leads back to '%s' (stages must not form a loop)", file,
                               fs[k]->config_line, gs->kind, names[k], next, gs->kind);
    }
  }
  return ALTAR_OK;
}
