/* Settled task keys: skip late reruns of tasks whose group already settled. */
#include "reconciler/settled.h"

#include "reconciler/ledger_aux.h"

#include <stdlib.h>
#include <string.h>

/* One entry is one block: "<task key>\0<backend>\x1f<external id>\0"; the
 * map's key points at its start. */
static char *entry_new(const char *task_key, size_t klen, const char *run, size_t rlen) {
  char *b = malloc(klen + rlen + 2);
  if (!b) return NULL;
  memcpy(b, task_key, klen);
  b[klen] = 0;
  memcpy(b + klen + 1, run, rlen);
  b[klen + 1 + rlen] = 0;
  return b;
}

static const char *entry_run(const char *b) { return b + strlen(b) + 1; }

static int map_put(altar__hmap_t *m, char *b) {
  size_t klen = strlen(b);
  free(altar__hmap_del(m, b, klen));
  return altar__hmap_put(m, b, klen, b);
}

static void map_free_all(altar__hmap_t *m) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key && m->slots[i].val) {
      /* Tombstones carry no value; live slots own their block. */
      if (m->slots[i].val == m->slots[i].key) free(m->slots[i].val);
    }
  altar__hmap_clear(m);
}

typedef struct load_ctx {
  altar__settled_t *s;
  int rc;
} load_ctx_t;

static int visit_load(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  load_ctx_t *c = ctx;
  if (klen <= 2) return 0;
  char *b = entry_new((const char *)key + 2, klen - 2, val, vlen);
  if (!b || map_put(&c->s->done, b)) {
    free(b);
    c->rc = ALTAR_ENOMEM;
    return 1;
  }
  return 0;
}

int altar__settled_load(altar__settled_t *s, altar_ledger_t *l, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  load_ctx_t c = {.s = s};
  int rc = altar__ledger_aux_scan(l, "t/", 2, visit_load, &c, err);
  if (rc == ALTAR_ENOTSUP) return ALTAR_OK; /* no aux storage: nothing was kept */
  if (!rc && c.rc) rc = altar_error_set(err, c.rc, "settled tasks: out of memory");
  return rc;
}

void altar__settled_free(altar__settled_t *s) {
  map_free_all(&s->done);
  map_free_all(&s->pend);
  altar__hmap_free(&s->done);
  altar__hmap_free(&s->pend);
}

void altar__settled_commit(altar__settled_t *s) {
  for (size_t i = 0; i < s->pend.cap; i++) {
    altar__hslot_t *sl = &s->pend.slots[i];
    if (!sl->key || sl->val != sl->key) continue;
    if (map_put(&s->done, sl->val)) free(sl->val); /* out of memory: forget it (a rerun may then apply) */
  }
  altar__hmap_clear(&s->pend);
}

void altar__settled_abort(altar__settled_t *s) { map_free_all(&s->pend); }

/* True when ev belongs to another run of a task whose group settled. */
static bool superseded(const altar__settled_t *s, const altar_status_event_t *ev) {
  if (!ev->task_key || !ev->handle.backend || !ev->handle.external_id) return false;
  size_t klen = strlen(ev->task_key);
  const char *b = altar__hmap_get(&s->pend, ev->task_key, klen);
  if (!b) b = altar__hmap_get(&s->done, ev->task_key, klen);
  if (!b) return false;
  const char *run = entry_run(b);
  size_t bl = strlen(ev->handle.backend);
  return strncmp(run, ev->handle.backend, bl) != 0 || run[bl] != '\x1f' ||
         strcmp(run + bl + 1, ev->handle.external_id) != 0;
}

/* Notes every member of a settled group, in memory and in the open batch;
 * task_keys are the apply result's, aligned with g's shards. */
static int note_group(altar__settled_t *s, altar_ledger_t *l, const altar_group_event_t *g, char *const *task_keys,
                      altar_error_t *err) {
  for (size_t i = 0; task_keys && i < g->n_shards; i++) {
    const altar_handle_t *h = &g->shards[i];
    const char *tk = task_keys[i];
    if (!h->backend || !h->external_id || !tk) continue;
    /* Sized from the strings: ids come from the log, their length is theirs. */
    size_t bl = strlen(h->backend), el = strlen(h->external_id), klen = strlen(tk);
    char *run = malloc(bl + el + 2), *k = malloc(klen + 3);
    char *b = NULL;
    if (run && k) {
      memcpy(run, h->backend, bl);
      run[bl] = '\x1f';
      memcpy(run + bl + 1, h->external_id, el + 1);
      memcpy(k, "t/", 2);
      memcpy(k + 2, tk, klen + 1);
      b = entry_new(tk, klen, run, bl + 1 + el);
    }
    if (!b || map_put(&s->pend, b)) {
      free(b);
      free(run);
      free(k);
      return altar_error_set(err, ALTAR_ENOMEM, "settled tasks: out of memory");
    }
    int rc = altar__ledger_aux_put(l, k, klen + 2, run, bl + 1 + el, err);
    free(run);
    free(k);
    if (rc && rc != ALTAR_ENOTSUP) return rc;
  }
  return ALTAR_OK;
}

int altar__settled_apply(altar__settled_t *s, altar_ledger_t *l, const altar_group_specs_t *groups,
                         const altar_status_event_t *events, size_t n, altar_apply_result_t *pres,
                         size_t *pskipped, altar_error_t *err) {
  size_t skipped = 0;
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < n; i++) {
    if (superseded(s, &events[i])) {
      skipped++;
      continue;
    }
    size_t before = pres->n_events;
    rc = altar_apply_events(l, groups, &events[i], 1, -1, pres, err);
    for (size_t k = before; !rc && k < pres->n_events; k++)
      rc = note_group(s, l, &pres->events[k], pres->shard_task_keys[k], err);
  }
  if (pskipped) *pskipped = skipped;
  return rc;
}
