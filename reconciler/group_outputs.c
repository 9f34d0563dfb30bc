/* Collecting a fired group's outputs in member order, each uri once. */
#include "reconciler/group_outputs.h"
#include "core/hmap.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

bool altar__group_outputs_wanted(const altar_group_spec_t *gs) {
  return gs && (gs->then || gs->then_dead || gs->event_outputs);
}

static char *dup_or_null(altar_arena_t *a, const char *s, bool *bad) {
  if (!s) return NULL;
  char *d = altar_arena_strndup(a, s, strlen(s));
  if (!d) *bad = true;
  return d;
}

int altar__group_outputs(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_arena_t *a, altar_transfer_t **pv,
                         size_t *pn, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  altar__hmap_t seen = {0};
  altar_transfer_t *v = NULL;
  size_t cnt = 0, cap = 0;
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < n; i++) {
    altar_ledger_entry_t e = {0};
    rc = altar_ledger_get(l, hs[i].backend, hs[i].external_id, &e, err);
    if (rc == ALTAR_ENOTFOUND) {
      rc = ALTAR_OK; /* nothing known of it: no outputs to name */
      continue;
    }
    for (size_t k = 0; !rc && e.rec.spec && k < e.rec.spec->n_outputs; k++) {
      const altar_transfer_t *o = &e.rec.spec->outputs[k];
      size_t ul = strlen(o->uri);
      if (altar__hmap_get(&seen, o->uri, ul)) continue;
      if (ALTAR_GROW(v, cap, cnt + 1)) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "group outputs: out of memory");
        break;
      }
      bool bad = false;
      altar_transfer_t *t = &v[cnt];
      t->uri = dup_or_null(a, o->uri, &bad);
      t->logical_path = dup_or_null(a, o->logical_path, &bad);
      t->digest = dup_or_null(a, o->digest, &bad);
      t->locality_key = dup_or_null(a, o->locality_key, &bad);
      /* the key lives in the arena as long as the map is used */
      if (bad || altar__hmap_put(&seen, t->uri, ul, t)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      else cnt++;
    }
    altar_ledger_entry_clear(&e);
  }
  altar__hmap_free(&seen);
  if (!rc && cnt) {
    altar_transfer_t *out = altar_arena_alloc(a, cnt * sizeof *out);
    if (!out) rc = altar_error_set(err, ALTAR_ENOMEM, "group outputs: out of memory");
    else {
      memcpy(out, v, cnt * sizeof *out);
      *pv = out;
      *pn = cnt;
    }
  }
  free(v);
  return rc;
}
