/* GroupSpec, group_by and the per-kind set of specs. */
#include "altar/groups.h"
#include "altar/followup.h"

#include <stdlib.h>
#include <string.h>

int altar_group_by_init(altar_group_by_t *g, const char *const *labels, size_t n) {
  memset(g, 0, sizeof *g);
  if (!n) return ALTAR_OK;
  if (!(g->labels = calloc(n, sizeof *g->labels))) return ALTAR_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (!(g->labels[i] = strdup(labels[i] ? labels[i] : ""))) {
      altar_group_by_clear(g);
      return ALTAR_ENOMEM;
    }
    g->n = i + 1;
  }
  return ALTAR_OK;
}

void altar_group_by_clear(altar_group_by_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n; i++) free(g->labels[i]);
  free(g->labels);
  memset(g, 0, sizeof *g);
}

size_t altar_group_by_key_into(const altar_group_by_t *g, const altar_handle_t *h, char *buf, size_t size) {
  size_t len = 0;
  for (size_t i = 0; i < g->n; i++) {
    if (i) {
      if (len < size) buf[len] = ':';
      len++;
    }
    /* A missing label is an empty segment: incomplete labels group predictably. */
    const char *v = altar_strmap_get(&h->labels, g->labels[i]);
    size_t vl = v ? strlen(v) : 0;
    if (vl && len + vl < size) memcpy(buf + len, v, vl);
    len += vl;
  }
  if (len < size) buf[len] = '\0';
  return len;
}

char *altar_group_by_key(const altar_group_by_t *g, const altar_handle_t *h) {
  size_t len = altar_group_by_key_into(g, h, NULL, 0);
  char *k = malloc(len + 1);
  if (k) altar_group_by_key_into(g, h, k, len + 1);
  return k;
}

static const char *const policy_names[] = {"none", "dead_letter", "retry", "defer"};

const char *altar_failed_policy_name(altar_failed_policy_t p) { return (unsigned)p < 4 ? policy_names[p] : "unknown"; }

void altar_group_spec_clear(altar_group_spec_t *g) {
  if (!g) return;
  free(g->kind);
  altar_group_by_clear(&g->group_by);
  altar_predicate_clear(&g->ready_when);
  free(g->ready_topic);
  free(g->dead_topic);
  altar_followup_free(g->then);
  altar_followup_free(g->then_dead);
  memset(g, 0, sizeof *g);
}

int altar_group_specs_add(altar_group_specs_t *s, altar_group_spec_t *g, altar_error_t *err) {
  if (!g->kind || !*g->kind) return altar_error_set(err, ALTAR_EINVAL, "group spec: kind must not be empty");
  if (altar_group_specs_find(s, g->kind))
    return altar_error_set(err, ALTAR_EEXIST, "group spec: kind '%s' is declared twice", g->kind);
  altar_group_spec_t *v = realloc(s->v, (s->n + 1) * sizeof *v);
  if (!v) return altar_error_set(err, ALTAR_ENOMEM, "group spec: out of memory");
  s->v = v;
  s->v[s->n++] = *g;
  memset(g, 0, sizeof *g);
  return ALTAR_OK;
}

/* The spec of kind in s (its array is not const even when s is), or NULL. */
static altar_group_spec_t *specs_find(const altar_group_specs_t *s, const char *kind) {
  for (size_t i = 0; s && kind && i < s->n; i++)
    if (!strcmp(s->v[i].kind, kind)) return &s->v[i];
  return NULL;
}

const altar_group_spec_t *altar_group_specs_find(const altar_group_specs_t *s, const char *kind) {
  return specs_find(s, kind);
}

altar_group_spec_t *altar_group_specs_find_mut(altar_group_specs_t *s, const char *kind) { return specs_find(s, kind); }

void altar_group_specs_clear(altar_group_specs_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) altar_group_spec_clear(&s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}
