/* ContainerTaskSpec: construction, deep copy, equality, free. */
#include "altar/spec.h"
#include "core/unconst.h"

#include <stdlib.h>
#include <string.h>

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

/* strdup that maps NULL to NULL; *pok cleared on allocation failure. */
static char *dup_opt(const char *s, bool *pok) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *pok = false;
  return d;
}

static void free_strv(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static int copy_strv(char ***pdst, size_t *pn, char *const *src, size_t n) {
  *pdst = NULL;
  *pn = 0;
  if (!n) return ALTAR_OK;
  char **v = calloc(n, sizeof *v);
  if (!v) return ALTAR_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    v[i] = strdup(src[i]);
    if (!v[i]) {
      free_strv(v, i);
      return ALTAR_ENOMEM;
    }
  }
  *pdst = v;
  *pn = n;
  return ALTAR_OK;
}

static bool strv_equal(char *const *a, size_t an, char *const *b, size_t bn) {
  if (an != bn) return false;
  for (size_t i = 0; i < an; i++)
    if (strcmp(a[i], b[i]) != 0) return false;
  return true;
}

static int push_str(char ***pv, size_t *pn, const char *s) {
  char *d = strdup(s);
  if (!d) return ALTAR_ENOMEM;
  char **nv = realloc(*pv, (*pn + 1) * sizeof *nv);
  if (!nv) {
    free(d);
    return ALTAR_ENOMEM;
  }
  nv[(*pn)++] = d;
  *pv = nv;
  return ALTAR_OK;
}

void altar_transfer_clear(altar_transfer_t *t) {
  free(t->uri);
  free(t->logical_path);
  free(t->locality_key);
  free(t->digest);
  memset(t, 0, sizeof *t);
}

int altar_transfer_copy(altar_transfer_t *dst, const altar_transfer_t *src) {
  bool ok = true;
  dst->uri = dup_opt(src->uri, &ok);
  dst->logical_path = dup_opt(src->logical_path, &ok);
  dst->locality_key = dup_opt(src->locality_key, &ok);
  dst->digest = dup_opt(src->digest, &ok);
  if (!ok) {
    altar_transfer_clear(dst);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

bool altar_transfer_equal(const altar_transfer_t *a, const altar_transfer_t *b) {
  return str_eq(a->uri, b->uri) && str_eq(a->logical_path, b->logical_path) &&
         str_eq(a->locality_key, b->locality_key) && str_eq(a->digest, b->digest);
}

static void free_transfers(altar_transfer_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) altar_transfer_clear(&t[i]);
  free(t);
}

static int copy_transfers(altar_transfer_t **pdst, size_t *pn, const altar_transfer_t *src, size_t n) {
  *pdst = NULL;
  *pn = 0;
  if (!n) return ALTAR_OK;
  altar_transfer_t *t = calloc(n, sizeof *t);
  if (!t) return ALTAR_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (altar_transfer_copy(&t[i], &src[i]) != ALTAR_OK) {
      free_transfers(t, i);
      return ALTAR_ENOMEM;
    }
  }
  *pdst = t;
  *pn = n;
  return ALTAR_OK;
}

static int push_transfer(altar_transfer_t **pv, size_t *pn, const altar_transfer_t *src) {
  altar_transfer_t copy;
  if (altar_transfer_copy(&copy, src) != ALTAR_OK) return ALTAR_ENOMEM;
  altar_transfer_t *nv = realloc(*pv, (*pn + 1) * sizeof *nv);
  if (!nv) {
    altar_transfer_clear(&copy);
    return ALTAR_ENOMEM;
  }
  nv[(*pn)++] = copy;
  *pv = nv;
  return ALTAR_OK;
}

static bool transfers_equal(const altar_transfer_t *a, size_t an, const altar_transfer_t *b, size_t bn) {
  if (an != bn) return false;
  for (size_t i = 0; i < an; i++)
    if (!altar_transfer_equal(&a[i], &b[i])) return false;
  return true;
}

altar_spec_t *altar_spec_new(const char *kind, const char *image) {
  altar_spec_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  bool ok = true;
  s->kind = dup_opt(kind ? kind : "", &ok);
  s->image = dup_opt(image ? image : "", &ok);
  s->resources.count = 1;
  if (!ok) {
    altar_spec_free(s);
    return NULL;
  }
  return s;
}

void altar_spec_clear(altar_spec_t *s) {
  if (!s) return;
  free(s->kind);
  free(s->image);
  free_strv(s->command, s->n_command);
  altar_strmap_clear(&s->labels);
  free_transfers(s->inputs, s->n_inputs);
  free_transfers(s->outputs, s->n_outputs);
  free(s->resources.gpu);
  free_strv(s->avoid_hosts, s->n_avoid_hosts);
  altar_strmap_free(s->plugin_identity);
  memset(s, 0, sizeof *s);
}

void altar_spec_free(altar_spec_t *s) {
  if (!s) return;
  altar_spec_clear(s);
  free(s);
}

int altar_spec_copy(altar_spec_t *dst, const altar_spec_t *src) {
  memset(dst, 0, sizeof *dst);
  bool ok = true;
  dst->kind = dup_opt(src->kind, &ok);
  dst->image = dup_opt(src->image, &ok);
  dst->resources.gpu = dup_opt(src->resources.gpu, &ok);
  dst->resources.count = src->resources.count;
  dst->resources.memory_mb = src->resources.memory_mb;
  dst->timeout_s = src->timeout_s;
  if (!ok || copy_strv(&dst->command, &dst->n_command, src->command, src->n_command) ||
      altar_strmap_copy(&dst->labels, &src->labels) ||
      copy_transfers(&dst->inputs, &dst->n_inputs, src->inputs, src->n_inputs) ||
      copy_transfers(&dst->outputs, &dst->n_outputs, src->outputs, src->n_outputs) ||
      copy_strv(&dst->avoid_hosts, &dst->n_avoid_hosts, src->avoid_hosts, src->n_avoid_hosts))
    goto oom;
  if (src->plugin_identity && !(dst->plugin_identity = altar_strmap_dup(src->plugin_identity))) goto oom;
  return ALTAR_OK;
oom:
  altar_spec_clear(dst);
  return ALTAR_ENOMEM;
}

altar_spec_t *altar_spec_dup(const altar_spec_t *spec) {
  if (!spec) return NULL;
  altar_spec_t *d = malloc(sizeof *d);
  if (!d) return NULL;
  if (altar_spec_copy(d, spec) != ALTAR_OK) {
    free(d);
    return NULL;
  }
  return d;
}

static bool opt_eq(altar_opt_i64_t a, altar_opt_i64_t b) { return a.set == b.set && (!a.set || a.v == b.v); }

bool altar_spec_same_identity(const altar_spec_t *a, const altar_spec_t *b) {
  if (!a || !b) return a == b;
  bool pi_eq = (!a->plugin_identity && !b->plugin_identity) ||
               (a->plugin_identity && b->plugin_identity && altar_strmap_equal(a->plugin_identity, b->plugin_identity));
  return str_eq(a->kind, b->kind) && str_eq(a->image, b->image) &&
         strv_equal(a->command, a->n_command, b->command, b->n_command) && altar_strmap_equal(&a->labels, &b->labels) &&
         transfers_equal(a->inputs, a->n_inputs, b->inputs, b->n_inputs) &&
         transfers_equal(a->outputs, a->n_outputs, b->outputs, b->n_outputs) &&
         str_eq(a->resources.gpu, b->resources.gpu) && a->resources.count == b->resources.count &&
         opt_eq(a->resources.memory_mb, b->resources.memory_mb) && opt_eq(a->timeout_s, b->timeout_s) && pi_eq;
}

bool altar_spec_equal(const altar_spec_t *a, const altar_spec_t *b) {
  if (!a || !b) return a == b;
  return altar_spec_same_identity(a, b) &&
         strv_equal(a->avoid_hosts, a->n_avoid_hosts, b->avoid_hosts, b->n_avoid_hosts);
}

int altar_spec_add_arg(altar_spec_t *spec, const char *arg) { return push_str(&spec->command, &spec->n_command, arg); }

int altar_spec_set_label(altar_spec_t *spec, const char *key, const char *val) {
  return altar_strmap_set(&spec->labels, key, val);
}

int altar_spec_add_input(altar_spec_t *spec, const char *uri, const char *logical_path, const char *locality_key,
                         const char *digest) {
  altar_transfer_t t = {ALTAR__UNCONST(uri), ALTAR__UNCONST(logical_path), ALTAR__UNCONST(locality_key),
                        ALTAR__UNCONST(digest)};
  return push_transfer(&spec->inputs, &spec->n_inputs, &t);
}

int altar_spec_add_output(altar_spec_t *spec, const char *uri, const char *logical_path) {
  altar_transfer_t t = {ALTAR__UNCONST(uri), ALTAR__UNCONST(logical_path), NULL, NULL};
  return push_transfer(&spec->outputs, &spec->n_outputs, &t);
}

int altar_spec_add_avoid_host(altar_spec_t *spec, const char *host) {
  return push_str(&spec->avoid_hosts, &spec->n_avoid_hosts, host);
}

int altar_spec_set_gpu(altar_spec_t *spec, const char *pool, int64_t count) {
  char *p = NULL;
  if (pool && !(p = strdup(pool))) return ALTAR_ENOMEM;
  free(spec->resources.gpu);
  spec->resources.gpu = p;
  spec->resources.count = count;
  return ALTAR_OK;
}
