/* Handles, states, failures, statuses, capacity and ledger records. */
#include "altar/task.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static const char *const state_names[] = {"pending", "running", "succeeded", "failed"};

const char *altar_state_name(altar_state_t s) { return (unsigned)s < 4 ? state_names[s] : "unknown"; }

int altar_state_parse(const char *name, altar_state_t *pstate) {
  for (int i = 0; name && i < 4; i++) {
    if (!strcmp(name, state_names[i])) {
      *pstate = (altar_state_t)i;
      return ALTAR_OK;
    }
  }
  return ALTAR_EINVAL;
}

/* ---- failures ---- */

altar_failure_t *altar_failure_new(const char *reason, const char *detail, bool deterministic) {
  altar_failure_t *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->reason = strdup(reason ? reason : ALTAR_REASON_JOB_FAILED);
  f->detail = detail ? strdup(detail) : NULL;
  f->deterministic = deterministic;
  if (!f->reason || (detail && !f->detail)) {
    altar_failure_free(f);
    return NULL;
  }
  return f;
}

altar_failure_t *altar_failure_exit(int64_t code, const char *detail, bool deterministic) {
  char reason[32];
  snprintf(reason, sizeof reason, "exit_%" PRId64, code);
  altar_failure_t *f = altar_failure_new(reason, detail, deterministic);
  if (f) f->exit_code = (altar_opt_i64_t){true, code};
  return f;
}

void altar_failure_free(altar_failure_t *f) {
  if (!f) return;
  free(f->reason);
  free(f->detail);
  free(f);
}

altar_failure_t *altar_failure_dup(const altar_failure_t *f) {
  if (!f) return NULL;
  altar_failure_t *d = altar_failure_new(f->reason, f->detail, f->deterministic);
  if (d) d->exit_code = f->exit_code;
  return d;
}

bool altar_failure_equal(const altar_failure_t *a, const altar_failure_t *b) {
  if (!a || !b) return a == b;
  return str_eq(a->reason, b->reason) && str_eq(a->detail, b->detail) && a->deterministic == b->deterministic &&
         a->exit_code.set == b->exit_code.set && (!a->exit_code.set || a->exit_code.v == b->exit_code.v);
}

/* ---- handles ---- */

int altar_handle_init(altar_handle_t *h, const char *backend, const char *external_id) {
  memset(h, 0, sizeof *h);
  h->backend = strdup(backend ? backend : "");
  h->external_id = strdup(external_id ? external_id : "");
  if (!h->backend || !h->external_id) {
    altar_handle_clear(h);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

int altar_handle_init_for_spec(altar_handle_t *h, const char *backend, const char *external_id,
                               const altar_spec_t *spec) {
  int rc = altar_handle_init(h, backend, external_id);
  if (rc) return rc;
  if (altar_strmap_copy(&h->labels, &spec->labels) ||
      (spec->plugin_identity && !(h->plugin_identity = altar_strmap_dup(spec->plugin_identity)))) {
    altar_handle_clear(h);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

void altar_handle_clear(altar_handle_t *h) {
  if (!h) return;
  if (h->block) {
    free(h->block);
    memset(h, 0, sizeof *h);
    return;
  }
  free(h->backend);
  free(h->external_id);
  altar_strmap_clear(&h->labels);
  altar_strmap_free(h->plugin_identity);
  memset(h, 0, sizeof *h);
}

int altar_handle_copy(altar_handle_t *dst, const altar_handle_t *src) {
  int rc = altar_handle_init(dst, src->backend, src->external_id);
  if (rc) return rc;
  if (altar_strmap_copy(&dst->labels, &src->labels) ||
      (src->plugin_identity && !(dst->plugin_identity = altar_strmap_dup(src->plugin_identity)))) {
    altar_handle_clear(dst);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

_Static_assert(sizeof(altar_strmap_t) % sizeof(char *) == 0, "maps packed after a map stay aligned");

size_t altar_handle_packed_size(const altar_handle_t *src) {
  size_t pi = src->plugin_identity ? sizeof(altar_strmap_t) + altar_strmap_packed_size(src->plugin_identity) : 0;
  return altar_strmap_packed_size(&src->labels) + pi + strlen(src->backend) + strlen(src->external_id) + 2;
}

char *altar_handle_pack(altar_handle_t *dst, const altar_handle_t *src, char *mem) {
  memset(dst, 0, sizeof *dst);
  /* The maps first (their pointer arrays stay aligned), then the strings. */
  char *p = altar_strmap_pack(&dst->labels, &src->labels, mem);
  if (src->plugin_identity) {
    dst->plugin_identity = (altar_strmap_t *)(void *)p;
    p = altar_strmap_pack(dst->plugin_identity, src->plugin_identity, p + sizeof(altar_strmap_t));
  }
  size_t bl = strlen(src->backend) + 1, el = strlen(src->external_id) + 1;
  dst->backend = memcpy(p, src->backend, bl);
  dst->external_id = memcpy(p + bl, src->external_id, el);
  return p + bl + el;
}

int altar_handle_copy_compact(altar_handle_t *dst, const altar_handle_t *src) {
  char *b = malloc(altar_handle_packed_size(src));
  if (!b) {
    memset(dst, 0, sizeof *dst);
    return ALTAR_ENOMEM;
  }
  altar_handle_pack(dst, src, b);
  dst->block = b;
  return ALTAR_OK;
}

bool altar_handle_same_task(const altar_handle_t *a, const altar_handle_t *b) {
  return str_eq(a->backend, b->backend) && str_eq(a->external_id, b->external_id);
}

bool altar_handle_equal(const altar_handle_t *a, const altar_handle_t *b) {
  bool pi = (!a->plugin_identity && !b->plugin_identity) ||
            (a->plugin_identity && b->plugin_identity && altar_strmap_equal(a->plugin_identity, b->plugin_identity));
  return altar_handle_same_task(a, b) && altar_strmap_equal(&a->labels, &b->labels) && pi;
}

void altar_handles_free(altar_handle_t *hs, size_t n) {
  if (!hs) return;
  for (size_t i = 0; i < n; i++) altar_handle_clear(&hs[i]);
  free(hs);
}

/* ---- statuses ---- */

int altar_status_init(altar_status_t *st, const altar_handle_t *h, altar_state_t state, altar_failure_t *failure) {
  memset(st, 0, sizeof *st);
  int rc = altar_handle_copy(&st->handle, h);
  if (rc) {
    altar_failure_free(failure);
    return rc;
  }
  st->state = state;
  st->failure = failure;
  return ALTAR_OK;
}

void altar_status_clear(altar_status_t *st) {
  if (!st) return;
  altar_handle_clear(&st->handle);
  altar_failure_free(st->failure);
  memset(st, 0, sizeof *st);
}

int altar_status_copy(altar_status_t *dst, const altar_status_t *src) {
  altar_failure_t *f = NULL;
  if (src->failure && !(f = altar_failure_dup(src->failure))) return ALTAR_ENOMEM;
  return altar_status_init(dst, &src->handle, src->state, f);
}

bool altar_status_equal(const altar_status_t *a, const altar_status_t *b) {
  return a->state == b->state && altar_handle_equal(&a->handle, &b->handle) &&
         altar_failure_equal(a->failure, b->failure);
}

void altar_statuses_free(altar_status_t *sts, size_t n) {
  if (!sts) return;
  for (size_t i = 0; i < n; i++) altar_status_clear(&sts[i]);
  free(sts);
}

/* ---- capacity ---- */

void altar_capacity_init(altar_capacity_t *c) { memset(c, 0, sizeof *c); }

void altar_capacity_clear(altar_capacity_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) free(c->pools[i]);
  free(c->pools);
  free(c->free_slots);
  memset(c, 0, sizeof *c);
}

int altar_capacity_set(altar_capacity_t *c, const char *pool, int64_t free_slots) {
  for (size_t i = 0; i < c->n; i++) {
    if (!strcmp(c->pools[i], pool)) {
      c->free_slots[i] = free_slots;
      return ALTAR_OK;
    }
  }
  char *name = strdup(pool);
  if (!name) return ALTAR_ENOMEM;
  char **np = realloc(c->pools, (c->n + 1) * sizeof *np);
  if (!np) goto oom;
  c->pools = np;
  int64_t *nf = realloc(c->free_slots, (c->n + 1) * sizeof *nf);
  if (!nf) goto oom;
  c->free_slots = nf;
  c->pools[c->n] = name;
  c->free_slots[c->n] = free_slots;
  c->n++;
  return ALTAR_OK;
oom:
  free(name);
  return ALTAR_ENOMEM;
}

int altar_capacity_copy(altar_capacity_t *dst, const altar_capacity_t *src) {
  altar_capacity_init(dst);
  for (size_t i = 0; i < src->n; i++) {
    if (altar_capacity_set(dst, src->pools[i], src->free_slots[i]) != ALTAR_OK) {
      altar_capacity_clear(dst);
      return ALTAR_ENOMEM;
    }
  }
  return ALTAR_OK;
}

bool altar_capacity_equal(const altar_capacity_t *a, const altar_capacity_t *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++) {
    bool found = false;
    for (size_t j = 0; j < b->n && !found; j++)
      found = !strcmp(a->pools[i], b->pools[j]) && a->free_slots[i] == b->free_slots[j];
    if (!found) return false;
  }
  return true;
}

int64_t altar_capacity_free_for(const altar_capacity_t *c, const altar_resources_t *r) {
  const char *pool = (r && r->gpu) ? r->gpu : ALTAR_POOL_CPU;
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->pools[i], pool)) return c->free_slots[i];
  return 0;
}

/* ---- records ---- */

int altar_record_init(altar_record_t *rec, const altar_handle_t *h, const char *kind, const altar_spec_t *spec) {
  memset(rec, 0, sizeof *rec);
  if (altar_handle_copy(&rec->handle, h) != ALTAR_OK) return ALTAR_ENOMEM;
  rec->kind = strdup(kind ? kind : "");
  if (!rec->kind || (spec && !(rec->spec = altar_spec_dup(spec)))) {
    altar_record_clear(rec);
    return ALTAR_ENOMEM;
  }
  rec->state = ALTAR_STATE_PENDING;
  return ALTAR_OK;
}

void altar_record_clear(altar_record_t *rec) {
  if (!rec) return;
  altar_handle_clear(&rec->handle);
  free(rec->kind);
  altar_spec_free(rec->spec);
  altar_failure_free(rec->failure);
  memset(rec, 0, sizeof *rec);
}

int altar_record_copy(altar_record_t *dst, const altar_record_t *src) {
  int rc = altar_record_init(dst, &src->handle, src->kind, src->spec);
  if (rc) return rc;
  dst->state = src->state;
  dst->restart_count = src->restart_count;
  dst->consumed = src->consumed;
  if (src->failure && !(dst->failure = altar_failure_dup(src->failure))) {
    altar_record_clear(dst);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

bool altar_record_equal(const altar_record_t *a, const altar_record_t *b) {
  return altar_handle_equal(&a->handle, &b->handle) && str_eq(a->kind, b->kind) && a->state == b->state &&
         a->restart_count == b->restart_count && a->consumed == b->consumed && altar_spec_equal(a->spec, b->spec) &&
         altar_failure_equal(a->failure, b->failure);
}

void altar_records_free(altar_record_t *recs, size_t n) {
  if (!recs) return;
  for (size_t i = 0; i < n; i++) altar_record_clear(&recs[i]);
  free(recs);
}
