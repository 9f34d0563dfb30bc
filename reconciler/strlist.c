/* A growable list of strings for reconcile results. */
#include "altar/reconcile.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

int altar_strlist_push(altar_strlist_t *l, const char *s) {
  if (ALTAR_GROW(l->v, l->cap, l->n + 1)) return ALTAR_ENOMEM;
  if (!(l->v[l->n] = strdup(s))) return ALTAR_ENOMEM;
  l->n++;
  return ALTAR_OK;
}

void altar_strlist_clear(altar_strlist_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

void altar_reconcile_result_clear(altar_reconcile_result_t *r) {
  if (!r) return;
  altar_strlist_clear(&r->fired_groups);
  altar_strlist_clear(&r->dead_lettered_groups);
  altar_strlist_clear(&r->deferred_groups);
  altar_strlist_clear(&r->stalled_groups);
  memset(r, 0, sizeof *r);
}

void altar_reconcile_results_free(altar_reconcile_result_t *rs, size_t n) {
  if (!rs) return;
  for (size_t i = 0; i < n; i++) altar_reconcile_result_clear(&rs[i]);
  free(rs);
}
