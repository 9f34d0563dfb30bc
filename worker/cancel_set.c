/* The cancels a worker has read (cancel_set.h). A linear list: cancels are
 * rare, and the bound keeps them few. */
#include "worker/cancel_set.h"

#include "altar/error.h"

#include <stdlib.h>
#include <string.h>

static bool same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static size_t entry_bytes(const char *job_id, const char *group_key) {
  return strlen(job_id) + 1 + (group_key ? strlen(group_key) + 1 : 0);
}

static void forget_oldest(altar__cancel_set_t *s) {
  s->bytes -= entry_bytes(s->job_ids[0], s->group_keys[0]);
  free(s->job_ids[0]);
  free(s->group_keys[0]);
  s->n--;
  memmove(s->job_ids, s->job_ids + 1, s->n * sizeof *s->job_ids);
  memmove(s->group_keys, s->group_keys + 1, s->n * sizeof *s->group_keys);
}

int altar__cancel_set_add(altar__cancel_set_t *s, const char *job_id, const char *group_key, bool *padded) {
  *padded = false;
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->job_ids[i], job_id) && same(s->group_keys[i], group_key)) return ALTAR_OK;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    char **j = realloc(s->job_ids, cap * sizeof *j);
    if (!j) return ALTAR_ENOMEM;
    s->job_ids = j;
    char **g = realloc(s->group_keys, cap * sizeof *g);
    if (!g) return ALTAR_ENOMEM;
    s->group_keys = g;
    s->cap = cap;
  }
  char *j = strdup(job_id), *g = group_key ? strdup(group_key) : NULL;
  if (!j || (group_key && !g)) {
    free(j);
    free(g);
    return ALTAR_ENOMEM;
  }
  s->job_ids[s->n] = j;
  s->group_keys[s->n++] = g;
  s->bytes += entry_bytes(j, g);
  while (s->n > 1 && (s->n > ALTAR_CANCEL_SET_MAX || s->bytes > ALTAR_CANCEL_SET_MAX_BYTES)) forget_oldest(s);
  *padded = true;
  return ALTAR_OK;
}

bool altar__cancel_set_matches(const altar__cancel_set_t *s, const char *job_id, const char *group_key) {
  if (!job_id) return false;
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->job_ids[i], job_id) && (!s->group_keys[i] || same(s->group_keys[i], group_key))) return true;
  return false;
}

void altar__cancel_set_free(altar__cancel_set_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    free(s->job_ids[i]);
    free(s->group_keys[i]);
  }
  free(s->job_ids);
  free(s->group_keys);
  memset(s, 0, sizeof *s);
}
