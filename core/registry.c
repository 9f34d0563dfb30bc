/* Name → pointer registries. Fixed-size tables: no allocation, so nothing to
 * free at exit and nothing for leak checkers to report. */
#include "altar/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char name[ALTAR_REGISTRY_NAME_MAX + 1];
  const void *ptr;
} entry_t;

/* A slot is free when ptr is NULL. */
static struct {
  entry_t e[ALTAR_REGISTRY_MAX];
  size_t n;
} tables[ALTAR_REGISTRY_KINDS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

const char *altar_registry_kind_name(altar_registry_kind_t kind) {
  switch (kind) {
  case ALTAR_REGISTRY_BACKEND: return "backend";
  case ALTAR_REGISTRY_STORAGE: return "storage";
  case ALTAR_REGISTRY_TRANSPORT: return "transport";
  }
  return "unknown";
}

static bool kind_ok(altar_registry_kind_t kind) { return (unsigned)kind < ALTAR_REGISTRY_KINDS; }

static bool name_ok(const char *name) {
  if (!name || !*name || strlen(name) > ALTAR_REGISTRY_NAME_MAX) return false;
  for (const char *p = name; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  }
  return true;
}

/* Slot of name, or -1. Caller holds lock. Linear: a registry holds a handful
 * of entries, and slots never move, so listed names stay valid. */
static long find(altar_registry_kind_t kind, const char *name) {
  for (size_t i = 0; i < ALTAR_REGISTRY_MAX; i++)
    if (tables[kind].e[i].ptr && strcmp(tables[kind].e[i].name, name) == 0) return (long)i;
  return -1;
}

int altar_registry_register(altar_registry_kind_t kind, const char *name, const void *ptr, altar_error_t *err) {
  if (!kind_ok(kind)) return altar_error_set(err, ALTAR_EINVAL, "registry: unknown kind %d", (int)kind);
  if (!name_ok(name))
    return altar_error_set(err, ALTAR_EINVAL, "%s registry: name '%.64s' must be 1..%u characters of [A-Za-z0-9._-]",
                           altar_registry_kind_name(kind), name ? name : "(null)", ALTAR_REGISTRY_NAME_MAX);
  if (!ptr)
    return altar_error_set(err, ALTAR_EINVAL, "%s registry: '%s' registered with NULL", altar_registry_kind_name(kind),
                           name);
  int rc = ALTAR_OK;
  pthread_mutex_lock(&lock);
  long i = find(kind, name);
  if (i >= 0) {
    if (tables[kind].e[i].ptr != ptr)
      rc = altar_error_set(err, ALTAR_EEXIST, "%s registry: '%s' is already registered to another plug-in",
                           altar_registry_kind_name(kind), name);
  } else {
    entry_t *slot = NULL;
    for (size_t j = 0; j < ALTAR_REGISTRY_MAX && !slot; j++)
      if (!tables[kind].e[j].ptr) slot = &tables[kind].e[j];
    if (!slot) {
      rc = altar_error_set(err, ALTAR_ETOOBIG, "%s registry: full (%u entries)", altar_registry_kind_name(kind),
                           ALTAR_REGISTRY_MAX);
    } else {
      snprintf(slot->name, sizeof slot->name, "%s", name);
      slot->ptr = ptr;
      tables[kind].n++;
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Every registered name, sorted, into all (ALTAR_REGISTRY_MAX). Caller holds lock. */
static size_t sorted_names(altar_registry_kind_t kind, const char **all) {
  size_t n = 0;
  for (size_t j = 0; j < ALTAR_REGISTRY_MAX; j++)
    if (tables[kind].e[j].ptr) all[n++] = tables[kind].e[j].name;
  qsort(all, n, sizeof *all, cmp_names);
  return n;
}

const void *altar_registry_lookup(altar_registry_kind_t kind, const char *name) {
  if (!kind_ok(kind) || !name) return NULL;
  pthread_mutex_lock(&lock);
  long i = find(kind, name);
  const void *p = i >= 0 ? tables[kind].e[i].ptr : NULL;
  pthread_mutex_unlock(&lock);
  return p;
}

int altar_registry_get(altar_registry_kind_t kind, const char *name, const void **pptr, altar_error_t *err) {
  *pptr = altar_registry_lookup(kind, name);
  if (*pptr) return ALTAR_OK;
  if (!kind_ok(kind)) return altar_error_set(err, ALTAR_EINVAL, "registry: unknown kind %d", (int)kind);
  char known[256] = "";
  size_t used = 0;
  const char *all[ALTAR_REGISTRY_MAX];
  pthread_mutex_lock(&lock);
  size_t n = sorted_names(kind, all);
  for (size_t j = 0; j < n && used < sizeof known; j++) {
    int w = snprintf(known + used, sizeof known - used, "%s%s", j ? ", " : "", all[j]);
    if (w < 0) break;
    used += (size_t)w;
  }
  pthread_mutex_unlock(&lock);
  return altar_error_set(err, ALTAR_ENOTFOUND, "%s '%.64s' is not registered (known: %s)",
                         altar_registry_kind_name(kind), name ? name : "(null)", known[0] ? known : "none");
}

size_t altar_registry_names(altar_registry_kind_t kind, const char **names, size_t max) {
  if (!kind_ok(kind)) return 0;
  const char *all[ALTAR_REGISTRY_MAX];
  pthread_mutex_lock(&lock);
  size_t n = sorted_names(kind, all);
  for (size_t j = 0; j < n && j < max; j++) names[j] = all[j];
  pthread_mutex_unlock(&lock);
  return n;
}

bool altar_registry_unregister(altar_registry_kind_t kind, const char *name) {
  if (!kind_ok(kind) || !name) return false;
  pthread_mutex_lock(&lock);
  long i = find(kind, name);
  if (i >= 0) {
    tables[kind].e[i].ptr = NULL;
    tables[kind].e[i].name[0] = '\0';
    tables[kind].n--;
  }
  pthread_mutex_unlock(&lock);
  return i >= 0;
}
