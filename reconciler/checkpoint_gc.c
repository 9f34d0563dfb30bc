/* Garbage collection of checkpoint storage (checkpoint_gc.h). */
#include "reconciler/checkpoint_gc.h"

#include "altar/clock.h"
#include "altar/storage.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what one run reads: a manifest's size, and the files listed
 * under cp/ and under sst/ (about 100 bytes each in memory; a store
 * collected from its start holds a few per kept checkpoint, one never
 * collected for months some 10^5). */
#define GC_MAX_MANIFEST (4u << 20)
#define GC_MAX_LIST 1000000

void (*altar__cp_gc_before_table_deletes)(void);

double altar__cp_gc_grace_s(double interval_s) {
  double g = 5 * (interval_s > 0 ? interval_s : 60);
  return g > 600 ? g : 600;
}

/* ---- sorted string sets --------------------------------------------------------- */

typedef struct strset {
  char **v;
  size_t n, cap;
  bool sorted;
} strset_t;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int strset_add(strset_t *s, const char *x) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    char **nv = realloc(s->v, cap * sizeof *nv);
    if (!nv) return ALTAR_ENOMEM;
    s->v = nv;
    s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(x))) return ALTAR_ENOMEM;
  s->n++;
  s->sorted = false;
  return ALTAR_OK;
}

static bool strset_has(strset_t *s, const char *x) {
  if (!s->n) return false;
  if (!s->sorted) {
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
    s->sorted = true;
  }
  return bsearch(&x, s->v, s->n, sizeof *s->v, cmp_str) != NULL;
}

static void strset_free(strset_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* ---- the collector's memory ---------------------------------------------------------- */

typedef struct seen {
  char hex[65];
  double first;
} seen_t;

struct altar_cp_gc {
  seen_t *v; /* sorted by hex */
  size_t n;
};

altar_cp_gc_t *altar__cp_gc_new(void) { return calloc(1, sizeof(altar_cp_gc_t)); }

void altar__cp_gc_free(altar_cp_gc_t *g) {
  if (!g) return;
  free(g->v);
  free(g);
}

static int cmp_seen(const void *a, const void *b) { return strcmp(((const seen_t *)a)->hex, ((const seen_t *)b)->hex); }

static double first_seen(const altar_cp_gc_t *g, const char *hex, double now) {
  seen_t key;
  snprintf(key.hex, sizeof key.hex, "%s", hex);
  const seen_t *f = g && g->n ? bsearch(&key, g->v, g->n, sizeof *g->v, cmp_seen) : NULL;
  return f ? f->first : now;
}

/* ---- listings ---------------------------------------------------------------------- */

typedef struct entry {
  char *rest; /* the path below the URI: "cp/<id>.json", "sst/<hex>", ... */
  unsigned long long size;
} entry_t;

typedef struct listing {
  entry_t *v;
  size_t n, cap;
  size_t base; /* length of "<uri>/" */
  bool oom, too_many;
} listing_t;

static int on_entry(const altar_storage_entry_t *e, void *ud) {
  listing_t *l = ud;
  if (strlen(e->path) < l->base) return 0;
  if (l->n >= GC_MAX_LIST) {
    l->too_many = true;
    return 1;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    entry_t *nv = realloc(l->v, cap * sizeof *nv);
    if (!nv) {
      l->oom = true;
      return 1;
    }
    l->v = nv;
    l->cap = cap;
  }
  char *r = strdup(e->path + l->base);
  if (!r) {
    l->oom = true;
    return 1;
  }
  l->v[l->n++] = (entry_t){r, e->size};
  return 0;
}

static void listing_free(listing_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i].rest);
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* uri without its trailing slashes, then "/" rest. */
static char *join(const char *uri, const char *rest) {
  size_t n = strlen(uri);
  while (n > 1 && uri[n - 1] == '/') n--;
  size_t sz = n + 1 + strlen(rest) + 1;
  char *p = malloc(sz);
  if (p) snprintf(p, sz, "%.*s/%s", (int)n, uri, rest);
  return p;
}

static int list_under(altar_storage_t *s, const char *uri, const char *sub, listing_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  char *prefix = join(uri, sub), *base = join(uri, "");
  if (!prefix || !base) {
    free(prefix);
    free(base);
    return altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  }
  out->base = strlen(base);
  int rc = altar_storage_list(s, prefix, on_entry, out, err);
  if (out->oom) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  else if (out->too_many)
    rc = altar_error_set(err, ALTAR_ETOOBIG, "checkpoint gc: %s holds more than %u files; nothing deleted", prefix,
                         GC_MAX_LIST);
  free(prefix);
  free(base);
  return rc;
}

/* ---- manifests -------------------------------------------------------------------------- */

typedef struct manifest {
  char id[64];
  char *topic;
  int32_t *parts; /* sorted */
  size_t n_parts;
  strset_t tables; /* hex digests it lists */
  bool keep;
} manifest_t;

static void manifest_free(manifest_t *m) {
  free(m->topic);
  free(m->parts);
  strset_free(&m->tables);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static bool hex64(const char *s) {
  if (strlen(s) != 64) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

/* Reads what the collector needs of a manifest: id, topic, partitions and
 * table digests. A manifest already gone is ALTAR_ENOTFOUND. */
static int read_manifest(altar_storage_t *s, const char *uri, const char *rest, manifest_t *m, altar_error_t *err) {
  memset(m, 0, sizeof *m);
  char *path = join(uri, rest);
  if (!path) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  altar_buf_t b = {0};
  int rc = altar_storage_read_bytes(s, path, &b, err);
  if (!rc && b.len > GC_MAX_MANIFEST) rc = altar_error_set(err, ALTAR_EDECODE, "%s: larger than 4 MiB", path);
  json_error_t je;
  json_t *root = rc ? NULL : json_loadb((const char *)b.data, b.len, 0, &je);
  if (!rc && !root) rc = altar_error_set(err, ALTAR_EDECODE, "%s:%d: not JSON: %s", path, je.line, je.text);
  json_t *id = json_object_get(root, "id"), *topic = json_object_get(root, "topic");
  json_t *offs = json_object_get(root, "offsets"), *files = json_object_get(root, "files");
  const char *bad = rc                                                                     ? NULL
                    : !json_is_string(id) || strlen(json_string_value(id)) >= sizeof m->id ? "id"
                    : !json_is_string(topic)                                               ? "topic"
                    : !json_is_array(offs)                                                 ? "offsets"
                    : !json_is_array(files)                                                ? "files"
                                                                                           : NULL;
  if (bad) rc = altar_error_set(err, ALTAR_EDECODE, "%s: field '%s' is missing or not valid", path, bad);
  if (!rc) {
    snprintf(m->id, sizeof m->id, "%s", json_string_value(id));
    m->topic = strdup(json_string_value(topic));
    m->n_parts = json_array_size(offs);
    m->parts = calloc(m->n_parts ? m->n_parts : 1, sizeof *m->parts);
    if (!m->topic || !m->parts) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  }
  size_t i;
  json_t *e;
  json_array_foreach(offs, i, e) {
    if (rc) break;
    json_t *p = json_object_get(e, "partition");
    if (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) > INT32_MAX)
      rc = altar_error_set(err, ALTAR_EDECODE, "%s: field 'offsets' is missing or not valid", path);
    else m->parts[i] = (int32_t)json_integer_value(p);
  }
  if (!rc) qsort(m->parts, m->n_parts, sizeof *m->parts, cmp_i32);
  json_array_foreach(files, i, e) {
    if (rc) break;
    json_t *sst = json_object_get(e, "sst");
    if (!sst) continue;
    if (!json_is_string(sst) || !hex64(json_string_value(sst)))
      rc = altar_error_set(err, ALTAR_EDECODE, "%s: field 'files' is missing or not valid", path);
    else if (strset_add(&m->tables, json_string_value(sst)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  }
  json_decref(root);
  altar_buf_free(&b);
  free(path);
  if (rc) manifest_free(m);
  return rc;
}

/* Whether newer covers every partition of older, on the same topic. */
static bool covers(const manifest_t *newer, const manifest_t *older) {
  if (strcmp(newer->topic, older->topic)) return false;
  size_t j = 0;
  for (size_t i = 0; i < older->n_parts; i++) {
    while (j < newer->n_parts && newer->parts[j] < older->parts[i]) j++;
    if (j == newer->n_parts || newer->parts[j] != older->parts[i]) return false;
  }
  return true;
}

static int cmp_manifest_newest_first(const void *a, const void *b) {
  return -strcmp(((const manifest_t *)a)->id, ((const manifest_t *)b)->id); /* ids sort by time */
}

/* The id of "cp/<id>.json", or of a file "cp/<id>/<name>", into out; false
 * for anything else under cp/. */
static bool cp_id(const char *rest, char *out, size_t cap, bool *is_manifest) {
  if (strncmp(rest, "cp/", 3)) return false;
  const char *id = rest + 3, *slash = strchr(id, '/');
  size_t n = strlen(id);
  *is_manifest = !slash && n > 5 && !strcmp(id + n - 5, ".json");
  size_t idn = slash ? (size_t)(slash - id) : *is_manifest ? n - 5 : 0;
  if (!idn || idn >= cap) return false;
  memcpy(out, id, idn);
  out[idn] = 0;
  return true;
}

/* The unix seconds an id "<unix ms, 13 digits>-<hex>" was made at; -1 when it is not one. */
static double id_time(const char *id) {
  double ms = 0;
  int k = 0;
  for (; id[k] >= '0' && id[k] <= '9' && k < 13; k++) ms = ms * 10 + (id[k] - '0');
  return k == 13 && id[k] == '-' ? ms / 1000.0 : -1;
}

/* ---- one run -------------------------------------------------------------------------------- */

typedef struct run {
  altar_storage_t *s;
  const char *uri;
  altar_cp_gc_result_t *res;
  altar_error_t *err;
  bool noted; /* err holds the first delete failure */
} run_t;

static void delete_one(run_t *r, const char *rest, unsigned long long size, bool *ok) {
  altar_error_t e = {0};
  char *path = join(r->uri, rest);
  int rc = path ? altar_storage_delete(r->s, path, &e) : altar_error_set(&e, ALTAR_ENOMEM, "out of memory");
  free(path);
  if (rc) {
    r->res->delete_failures++;
    if (!r->noted) {
      *r->err = e;
      r->noted = true;
    }
    if (ok) *ok = false;
    return;
  }
  r->res->files_deleted++;
  r->res->bytes_deleted += size;
}

/* Lists the manifests again and adds what those not seen before list to
 * *listed (their ids to *ids): checkpoints shipped since the first
 * listing, which may name a table file that listing found unlisted. An
 * error when one cannot be read: then no table file may go. */
static int relist_manifests(run_t *r, strset_t *ids, strset_t *listed, altar_error_t *err) {
  listing_t cp = {0};
  int rc = list_under(r->s, r->uri, "cp/", &cp, err);
  for (size_t i = 0; !rc && i < cp.n; i++) {
    char id[64];
    bool is_m;
    if (!cp_id(cp.v[i].rest, id, sizeof id, &is_m) || !is_m || strset_has(ids, id)) continue;
    manifest_t m;
    altar_error_t e = {0};
    int mrc = read_manifest(r->s, r->uri, cp.v[i].rest, &m, &e);
    if (mrc == ALTAR_ENOTFOUND) continue; /* written and dropped since */
    if (mrc) {
      *err = e;
      rc = mrc;
      break;
    }
    if (strset_add(ids, id)) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
    for (size_t t = 0; !rc && t < m.tables.n; t++)
      if (strset_add(listed, m.tables.v[t])) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
    manifest_free(&m);
  }
  listing_free(&cp);
  return rc;
}

/* A dropped or abandoned checkpoint's own files under cp/<id>/ (entries
 * sorted by path, so they are together), then its directory where the
 * storage has directories. */
static void delete_cp_files(run_t *r, const listing_t *cp, const char *id) {
  char dir[96];
  snprintf(dir, sizeof dir, "cp/%s/", id);
  size_t dl = strlen(dir);
  for (size_t i = 0; i < cp->n; i++)
    if (!strncmp(cp->v[i].rest, dir, dl)) delete_one(r, cp->v[i].rest, cp->v[i].size, NULL);
  if (altar_storage_caps(r->s) & ALTAR_STORAGE_CAP_LOCAL) {
    altar_error_t e = {0};
    char *path = join(r->uri, dir);
    if (path) altar_storage_delete(r->s, path, &e); /* an empty directory; one left is harmless */
    free(path);
  }
}

int altar__checkpoint_gc(const char *uri, size_t keep, double grace_s, double now, altar_cp_gc_t *g,
                         altar_cp_gc_result_t *res, altar_error_t *err) {
  memset(res, 0, sizeof *res);
  if (keep < 1) keep = 1;
  altar_storage_t *s = NULL;
  int rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  if (rc) return rc;
  unsigned need = ALTAR_STORAGE_CAP_LIST | ALTAR_STORAGE_CAP_DELETE;
  if ((altar_storage_caps(s) & need) != need) {
    rc = altar_error_set(err, ALTAR_ENOTSUP,
                         "checkpoint gc: storage '%s' cannot list and delete files; %s keeps every "
                         "checkpoint",
                         altar_storage_name(s), uri);
    altar_storage_close(s);
    return rc;
  }
  run_t r = {s, uri, res, err, false};
  listing_t cp = {0}, sst = {0};
  manifest_t *ms = NULL, latest = {0};
  size_t n_ms = 0;
  strset_t listed = {0}, manifest_ids = {0};
  seen_t *next_seen = NULL;
  size_t n_next = 0;
  bool unreadable = false, have_latest = false;
  int read_rc = ALTAR_OK;
  altar_error_t read_err = {0};

  /* 1. The manifests, listed before the table files are. */
  rc = list_under(s, uri, "cp/", &cp, err);
  if (!rc) ms = calloc(cp.n ? cp.n : 1, sizeof *ms);
  if (!rc && !ms) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  for (size_t i = 0; !rc && i < cp.n; i++) {
    char id[64];
    bool is_m;
    if (!cp_id(cp.v[i].rest, id, sizeof id, &is_m) || !is_m) continue;
    if (strset_add(&manifest_ids, id)) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
    altar_error_t e = {0};
    int mrc = rc ? rc : read_manifest(s, uri, cp.v[i].rest, &ms[n_ms], &e);
    if (mrc == ALTAR_OK) n_ms++;
    else if (mrc != ALTAR_ENOTFOUND && !rc) { /* gone meanwhile: another collector dropped it */ unreadable = true;
      if (!read_rc) {
        read_rc = mrc;
        read_err = e;
      }
    }
  }
  if (!rc) {
    altar_error_t e = {0};
    int lrc = read_manifest(s, uri, "latest.json", &latest, &e);
    if (lrc == ALTAR_OK) have_latest = true;
    else if (lrc != ALTAR_ENOTFOUND) {
      unreadable = true;
      if (!read_rc) {
        read_rc = lrc;
        read_err = e;
      }
    }
  }

  /* 2. Which stay: the newest `keep` covering each one, latest.json's. */
  if (!rc && n_ms) qsort(ms, n_ms, sizeof *ms, cmp_manifest_newest_first);
  for (size_t i = 0; !rc && i < n_ms; i++) {
    size_t covering = 0;
    for (size_t j = 0; j < i && covering < keep; j++)
      if (covers(&ms[j], &ms[i])) covering++;
    ms[i].keep = covering < keep || (have_latest && !strcmp(ms[i].id, latest.id));
  }
  /* 3. Dropped checkpoints: the manifest first (no visible checkpoint ever
   * lacks a file), then its own files; one whose manifest stays (its
   * delete failed) is still kept whole. */
  for (size_t i = 0; !rc && i < n_ms; i++) {
    if (ms[i].keep) {
      res->checkpoints_kept++;
      continue;
    }
    char rest[96];
    snprintf(rest, sizeof rest, "cp/%s.json", ms[i].id);
    unsigned long long size = 0;
    for (size_t k = 0; k < cp.n; k++)
      if (!strcmp(cp.v[k].rest, rest)) size = cp.v[k].size;
    bool ok = true;
    delete_one(&r, rest, size, &ok);
    if (!ok) {
      ms[i].keep = true;
      res->checkpoints_kept++;
      continue;
    }
    res->checkpoints_dropped++;
    delete_cp_files(&r, &cp, ms[i].id);
  }

  /* 4. What the checkpoints still visible list; then the table files,
   * listed after the manifests were. */
  for (size_t i = 0; !rc && i < n_ms; i++)
    for (size_t t = 0; ms[i].keep && t < ms[i].tables.n && !rc; t++)
      if (strset_add(&listed, ms[i].tables.v[t]))
        rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  for (size_t t = 0; have_latest && t < latest.tables.n && !rc; t++)
    if (strset_add(&listed, latest.tables.v[t]))
      rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  if (!rc) rc = list_under(s, uri, "sst/", &sst, err);
  uint64_t stored = 0;
  for (size_t i = 0; !rc && i < cp.n; i++) stored += cp.v[i].size;
  for (size_t i = 0; !rc && i < sst.n; i++) stored += sst.v[i].size;

  /* 5. Files of checkpoints that never got a manifest (a crash mid-ship),
   * once past the grace: one being shipped now is younger. */
  char last[64] = "";
  for (size_t i = 0; !rc && i < cp.n; i++) {
    char id[64];
    bool is_m;
    if (!cp_id(cp.v[i].rest, id, sizeof id, &is_m) || is_m || !strcmp(id, last)) continue;
    snprintf(last, sizeof last, "%s", id);
    double t = id_time(id);
    if (t < 0 || strset_has(&manifest_ids, id) || now - t < grace_s) continue;
    delete_cp_files(&r, &cp, id);
  }

  /* 6. Table files no kept checkpoint lists, once unlisted for the grace;
   * none when a manifest could not be read (what it lists is unknown). The
   * manifests are listed again before the first goes, and again once
   * ALTAR_CP_GC_RELIST_S has passed: a ship may have named one since. */
  if (!rc && sst.n) next_seen = calloc(sst.n, sizeof *next_seen);
  if (!rc && sst.n && !next_seen) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint gc: out of memory");
  if (!rc && altar__cp_gc_before_table_deletes) altar__cp_gc_before_table_deletes();
  double relisted = -1; /* monotonic seconds the last listing started at; < 0: none yet */
  bool slow = false;    /* a listing took longer than ALTAR_CP_GC_LISTING_MAX_S: no more deletes */
  for (size_t i = 0; !rc && i < sst.n; i++) {
    const char *hex = sst.v[i].rest + 4;
    if (!hex64(hex) || strset_has(&listed, hex)) continue;
    double first = first_seen(g, hex, now);
    bool ok = false;
    if (!unreadable && !slow && now - first >= grace_s) {
      if (relisted < 0 || altar_mono_s() - relisted >= ALTAR_CP_GC_RELIST_S) {
        relisted = altar_mono_s();
        altar_error_t e = {0};
        int lrc = relist_manifests(&r, &manifest_ids, &listed, &e);
        if (lrc) {
          unreadable = true; /* what a new manifest lists is unknown: nothing more goes */
          if (!read_rc) {
            read_rc = lrc;
            read_err = e;
          }
        }
      }
      if (strset_has(&listed, hex)) {
        res->tables_spared++;
        continue;
      }
      if (!unreadable && altar_mono_s() - relisted >= ALTAR_CP_GC_LISTING_MAX_S) slow = true;
      if (slow) res->tables_deferred++;
    }
    if (!unreadable && !slow && now - first >= grace_s) {
      ok = true;
      delete_one(&r, sst.v[i].rest, sst.v[i].size, &ok);
      if (ok) continue;
    }
    if (now - first < grace_s) res->tables_waiting++;
    seen_t *ns = &next_seen[n_next++];
    snprintf(ns->hex, sizeof ns->hex, "%s", hex);
    ns->first = first;
  }
  if (!rc && g) { /* remember only what is still unlisted */
    if (n_next) qsort(next_seen, n_next, sizeof *next_seen, cmp_seen);
    free(g->v);
    g->v = next_seen;
    g->n = n_next;
    next_seen = NULL;
  }
  res->bytes_stored = stored > res->bytes_deleted ? stored - res->bytes_deleted : 0;
  if (!rc && unreadable) {
    rc = read_rc;
    *err = read_err;
    altar_error_prefix(err, "checkpoint gc: no table file deleted");
  }

  free(next_seen);
  for (size_t i = 0; i < n_ms; i++) manifest_free(&ms[i]);
  free(ms);
  if (have_latest) manifest_free(&latest);
  strset_free(&listed);
  strset_free(&manifest_ids);
  listing_free(&cp);
  listing_free(&sst);
  altar_storage_close(s);
  return rc;
}
