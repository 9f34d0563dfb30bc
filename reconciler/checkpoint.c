/* Checkpoints of the RocksDB ledger in the fleet's storage (checkpoint.h). */
#include "reconciler/checkpoint.h"
#include "core/job_pool.h"
#include "reconciler/input_offsets.h"
#include "ledger/ledger_rocksdb.h"

#include "altar/clock.h"
#include "altar/digest.h"
#include "altar/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bounds on what a manifest read back from storage may hold. */
#define CP_MAX_MANIFEST (4u << 20)
#define CP_MAX_FILES 100000
#define CP_MAX_OFFSETS 100000

void (*altar__checkpoint_after_upload)(size_t uploaded);
void (*altar__checkpoint_before_manifest)(const altar_checkpoint_t *c);
double altar__checkpoint_recheck_wait_s = ALTAR_CP_RECHECK_WAIT_S;

/* Sleeps until the monotonic clock reads at least until. */
static void sleep_until(double until) {
  for (double now = altar_mono_s(); now < until; now = altar_mono_s()) {
    double d = until - now;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

/* Rounds of the re-check after the manifest: a table gone again after its
 * re-upload means collectors keep deleting it; the ship then fails. */
#define CP_RECHECK_ROUNDS 3

void altar__checkpoint_clear(altar_checkpoint_t *c) {
  if (!c) return;
  free(c->local_dir);
  free(c->topic);
  free(c->offsets);
  free(c->published);
  memset(c, 0, sizeof *c);
}

int64_t altar__checkpoint_offset(const altar_checkpoint_t *c, int32_t p) {
  for (size_t i = 0; i < c->n_offsets; i++)
    if (c->offsets[i].partition == p) return c->offsets[i].next;
  return -1;
}

void altar__checkpoint_remove_local(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(dir);
}

/* Removes local copies a crash left beside ledger dir ("<dir>.cp-*"): the
 * database's lock, held by the caller, means no other process ships them. A
 * directory listing per checkpoint. */
static void remove_stale_copies(const char *ldir) {
  char parent[4096], prefix[512];
  const char *slash = strrchr(ldir, '/');
  snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - ldir) : 1, slash ? ldir : ".");
  if (slash && slash == ldir) snprintf(parent, sizeof parent, "/");
  snprintf(prefix, sizeof prefix, "%s.cp-", slash ? slash + 1 : ldir);
  DIR *d = opendir(parent);
  if (!d) return;
  struct dirent *e;
  char p[4096 + 512];
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      snprintf(p, sizeof p, "%s/%s", parent, e->d_name);
      altar__checkpoint_remove_local(p);
    }
  closedir(d);
}

/* ---- step 1: take ---- */

typedef struct scan_ctx {
  altar_checkpoint_t *c;
  size_t prefix_len;
  int rc;
} scan_ctx_t;

static int on_offset(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  scan_ctx_t *s = ctx;
  char part[16], v[32];
  size_t pl = klen - s->prefix_len, n = vlen < sizeof v - 1 ? vlen : sizeof v - 1;
  if (pl == 0 || pl >= sizeof part) return 0; /* another topic sharing the prefix */
  memcpy(part, (const char *)key + s->prefix_len, pl);
  part[pl] = 0;
  memcpy(v, val, n);
  v[n] = 0;
  char *end;
  long p = strtol(part, &end, 10);
  if (*end || p < 0 || p > INT32_MAX) return 0;
  altar_checkpoint_t *c = s->c;
  if (c->n_offsets >= CP_MAX_OFFSETS) return 0;
  altar_cp_offset_t *no = realloc(c->offsets, (c->n_offsets + 1) * sizeof *no);
  if (!no) return s->rc = ALTAR_ENOMEM;
  c->offsets = no;
  c->offsets[c->n_offsets++] = (altar_cp_offset_t){(int32_t)p, strtoll(v, NULL, 10)};
  return 0;
}

int altar__checkpoint_take(altar_ledger_t *l, const char *status_topic, altar_checkpoint_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  rocksdb_t *db = altar__ledger_rocksdb_db(l);
  const char *ldir = altar__ledger_rocksdb_dir(l);
  if (!db || !ldir) return altar_error_set(err, ALTAR_ENOTSUP, "checkpoint: only a RocksDB ledger can be checkpointed");
  /* No ship of l is in flight when a take is asked for (the runner waits
   * for it): any copy beside l is a crash's leftover. */
  remove_stale_copies(ldir);
  /* What the write-behind thread holds is written first. */
  int rc = altar_ledger_rocksdb_persist(l, err);
  if (rc) return rc;
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) rnd = (uint64_t)getpid() * 2654435761u ^ (uint64_t)clock();
  out->taken_at = altar_wall_s();
  snprintf(out->id, sizeof out->id, "%013" PRIu64 "-%016" PRIx64, (uint64_t)(out->taken_at * 1000), rnd);
  size_t n = strlen(ldir) + sizeof out->id + 16;
  out->local_dir = malloc(n);
  out->topic = strdup(status_topic);
  if (!out->local_dir || !out->topic) {
    altar__checkpoint_clear(out);
    return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  }
  snprintf(out->local_dir, n, "%s.cp-%s", ldir, out->id);
  char *dberr = NULL;
  rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(db, &dberr);
  if (cp) rocksdb_checkpoint_create(cp, out->local_dir, 0, &dberr);
  if (cp) rocksdb_checkpoint_object_destroy(cp);
  if (dberr) {
    rc = altar_error_set(err, ALTAR_ELEDGER, "checkpoint of %s: %s", ldir, dberr);
    rocksdb_free(dberr);
    altar__checkpoint_remove_local(out->local_dir);
    altar__checkpoint_clear(out);
    return rc;
  }
  /* The offsets as of the copy: nothing writes between the two. */
  char prefix[320];
  size_t pl = altar__reconciler_offset_key(status_topic, 0, prefix, sizeof prefix) - 1; /* "s/<topic>/" */
  scan_ctx_t sc = {out, pl, 0};
  rc = altar_ledger_aux_scan(l, prefix, pl, on_offset, &sc, err);
  if (!rc && sc.rc) rc = altar_error_set(err, sc.rc, "checkpoint: out of memory");
  if (rc) {
    altar__checkpoint_remove_local(out->local_dir);
    altar__checkpoint_clear(out);
  }
  return rc;
}

/* ---- step 2: ship ---- */

/* Table files known to be stored, by name: RocksDB never gives two table
 * files of one database the same number, and never changes one, so a name
 * seen before needs neither hashing (the cost of a checkpoint would grow
 * with the whole database) nor uploading. A sorted array of "name\0hex". */
struct altar_cp_shipped {
  char **v;
  size_t n, cap;
};

altar_cp_shipped_t *altar__cp_shipped_new(void) { return calloc(1, sizeof(altar_cp_shipped_t)); }

void altar__cp_shipped_free(altar_cp_shipped_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  free(s);
}

static size_t shipped_pos(const altar_cp_shipped_t *s, const char *name, bool *found) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(s->v[mid], name);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

/* The digest (hex) of table file name when already stored, else NULL. */
static const char *shipped_hex(const altar_cp_shipped_t *s, const char *name) {
  bool f = false;
  if (!s) return NULL;
  size_t at = shipped_pos(s, name, &f);
  return f ? s->v[at] + strlen(s->v[at]) + 1 : NULL;
}

static void shipped_add(altar_cp_shipped_t *s, const char *name, const char *hex) {
  bool f;
  if (!s) return;
  size_t at = shipped_pos(s, name, &f);
  if (f) return;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    char **nv = realloc(s->v, cap * sizeof *nv);
    if (!nv) return; /* a cache: a missing entry costs a hash and an exists() later */
    s->v = nv;
    s->cap = cap;
  }
  size_t nl = strlen(name), hl = strlen(hex);
  char *d = malloc(nl + 1 + hl + 1);
  if (!d) return;
  memcpy(d, name, nl + 1);
  memcpy(d + nl + 1, hex, hl + 1);
  memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof *s->v);
  s->v[at] = d;
  s->n++;
}

static bool is_table_file(const char *name) {
  size_t n = strlen(name);
  return (n > 4 && !strcmp(name + n - 4, ".sst")) || (n > 5 && !strcmp(name + n - 5, ".blob"));
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

static int upload_to(altar_storage_t *s, const char *uri, const char *rest, const char *local, altar_error_t *err) {
  char *dest = join(uri, rest);
  if (!dest) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  int rc = altar_storage_upload(s, local, dest, err);
  free(dest);
  return rc;
}

static int put_text(altar_storage_t *s, const char *uri, const char *rest, const char *text, altar_error_t *err) {
  char *dest = join(uri, rest);
  if (!dest) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  int rc = altar_storage_write_text(s, dest, text, err);
  free(dest);
  return rc;
}

static int mkdirs(altar_storage_t *s, const char *uri, const char *rest, altar_error_t *err) {
  char *dest = join(uri, rest);
  if (!dest) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  int rc = altar_storage_mkdirs(s, dest, err);
  free(dest);
  return rc == ALTAR_ENOTSUP ? ALTAR_OK : rc;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The file names of a flat directory, sorted (a manifest lists them in order). */
static int list_dir(const char *dir, char ***pnames, size_t *pn, altar_error_t *err) {
  *pnames = NULL;
  *pn = 0;
  DIR *d = opendir(dir);
  if (!d) return altar_error_set(err, ALTAR_EIO, "checkpoint: %s: %s", dir, strerror(errno));
  char **v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = ALTAR_OK;
  while (!rc && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      char **nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
        break;
      }
      v = nv;
    }
    if (!(v[n] = strdup(e->d_name))) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
    else n++;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, cmp_names);
  *pnames = v;
  *pn = n;
  return rc;
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static json_t *published_json(const altar_checkpoint_t *c) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < c->n_published; i++)
    json_array_append_new(a, json_pack("{s:s,s:i,s:I}", "topic", c->published[i].topic, "partition",
                                       (int)c->published[i].partition, "next", (json_int_t)c->published[i].next));
  return a;
}

static json_t *offsets_json(const altar_checkpoint_t *c) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < c->n_offsets; i++)
    json_array_append_new(
        a, json_pack("{s:i,s:I}", "partition", (int)c->offsets[i].partition, "next", (json_int_t)c->offsets[i].next));
  return a;
}

/* The table files a ship listed without uploading them (found stored, or
 * known from an earlier ship): index into names, and their digest. */
typedef struct reused {
  size_t name;
  char hex[65];
} reused_t;

/* After the manifest: every reused table still stored, else uploaded again
 * (from the local copy, still there), round after round until one finds
 * none gone. */
static int recheck_reused(altar_storage_t *s, const char *uri, altar_checkpoint_t *c, char **names, const reused_t *ru,
                          size_t n_ru, altar_error_t *err) {
  for (int round = 0; round < CP_RECHECK_ROUNDS; round++) {
    size_t gone = 0;
    for (size_t i = 0; i < n_ru; i++) {
      char rest[128], local[4096];
      snprintf(rest, sizeof rest, "sst/%s", ru[i].hex);
      char *dest = join(uri, rest);
      if (!dest) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
      bool there = false;
      altar_error_t e = {0};
      if (altar_storage_exists(s, dest, &there, &e) != ALTAR_OK) there = false; /* unknown: upload */
      free(dest);
      if (there) continue;
      snprintf(local, sizeof local, "%s/%s", c->local_dir, names[ru[i].name]);
      int rc = upload_to(s, uri, rest, local, err);
      if (rc) return rc;
      gone++;
      c->tables_reuploaded++;
    }
    if (!gone) return ALTAR_OK;
  }
  return altar_error_set(err, ALTAR_EIO,
                         "table files it lists were deleted again after %d uploads (collectors sharing the "
                         "storage keep deleting them); latest.json not written",
                         CP_RECHECK_ROUNDS);
}

int altar__checkpoint_ship(altar_checkpoint_t *c, const char *uri, altar_cp_shipped_t *shipped, altar_error_t *err) {
  altar_storage_t *s = NULL;
  char **names = NULL;
  size_t n = 0;
  reused_t *ru = NULL;
  size_t n_ru = 0;
  json_t *files = json_array();
  int rc = files ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  if (!rc) rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  if (!rc) rc = list_dir(c->local_dir, &names, &n, err);
  char cpdir[128];
  snprintf(cpdir, sizeof cpdir, "cp/%s", c->id);
  if (!rc) rc = mkdirs(s, uri, "sst", err);
  if (!rc) rc = mkdirs(s, uri, cpdir, err);
  c->bytes = 0;
  c->files = n;
  c->files_uploaded = 0;
  c->tables_reuploaded = 0;
  if (!rc && n && !(ru = calloc(n, sizeof *ru))) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  for (size_t i = 0; i < n && !rc; i++) {
    char local[4096];
    snprintf(local, sizeof local, "%s/%s", c->local_dir, names[i]);
    struct stat st;
    if (stat(local, &st) != 0) {
      rc = altar_error_set(err, ALTAR_EIO, "checkpoint: %s: %s", local, strerror(errno));
      break;
    }
    json_t *f = json_pack("{s:s,s:I}", "name", names[i], "size", (json_int_t)st.st_size);
    if (!f || json_array_append_new(files, f)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
      break;
    }
    if (is_table_file(names[i])) {
      const char *known = shipped_hex(shipped, names[i]);
      if (known) {
        json_object_set_new(f, "sst", json_string(known));
        ru[n_ru].name = i;
        snprintf(ru[n_ru++].hex, sizeof ru->hex, "%s", known);
        continue;
      }
      char dg[ALTAR_DIGEST_BUFSZ];
      if ((rc = altar_sha256_file(local, dg, err))) break;
      const char *hex = strchr(dg, ':') ? strchr(dg, ':') + 1 : dg;
      json_object_set_new(f, "sst", json_string(hex));
      char rest[128];
      snprintf(rest, sizeof rest, "sst/%s", hex);
      char *dest = join(uri, rest);
      bool there = false;
      if (!dest) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
      else if (altar_storage_exists(s, dest, &there, err) != ALTAR_OK) there = false;
      free(dest);
      if (!rc && !there) {
        rc = upload_to(s, uri, rest, local, err);
        if (!rc) {
          c->bytes += (uint64_t)st.st_size;
          c->files_uploaded++;
        }
      }
      if (!rc) shipped_add(shipped, names[i], hex);
      if (!rc && there) {
        ru[n_ru].name = i;
        snprintf(ru[n_ru++].hex, sizeof ru->hex, "%s", hex);
      }
      if (!rc && !there && altar__checkpoint_after_upload) altar__checkpoint_after_upload(c->files_uploaded);
    } else {
      char rest[512];
      snprintf(rest, sizeof rest, "%s/%s", cpdir, names[i]);
      rc = upload_to(s, uri, rest, local, err);
      if (!rc) {
        c->bytes += (uint64_t)st.st_size;
        c->files_uploaded++;
        if (altar__checkpoint_after_upload) altar__checkpoint_after_upload(c->files_uploaded);
      }
    }
  }
  char *text = NULL;
  if (!rc) {
    json_t *m = json_pack("{s:i,s:s,s:f,s:s,s:o,s:O}", "format", 1, "id", c->id, "taken_at", c->taken_at, "topic",
                          c->topic, "offsets", offsets_json(c), "files", files);
    if (m && c->n_published) json_object_set_new(m, "published", published_json(c));
    text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    if (!text) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  }
  /* The checkpoint's own manifest, the tables it did not upload looked at
   * again, then the pointer to it: written last. */
  char mname[128];
  snprintf(mname, sizeof mname, "%s.json", cpdir);
  if (!rc && altar__checkpoint_before_manifest) altar__checkpoint_before_manifest(c);
  if (!rc) rc = put_text(s, uri, mname, text, err);
  if (!rc && altar__checkpoint_after_upload) altar__checkpoint_after_upload(c->files_uploaded + 1);
  /* Storage no collector can collect (it cannot list and delete) loses nothing meanwhile. */
  unsigned gc_caps = ALTAR_STORAGE_CAP_LIST | ALTAR_STORAGE_CAP_DELETE;
  if (!rc && n_ru && (altar_storage_caps(s) & gc_caps) == gc_caps) {
    /* A collection that listed before the manifest was stored issues its
     * deletes within ALTAR_CP_GC_LISTING_MAX_S of that listing: past the
     * wait, what it deleted is seen gone. */
    sleep_until(altar_mono_s() + altar__checkpoint_recheck_wait_s);
    rc = recheck_reused(s, uri, c, names, ru, n_ru, err);
    if (rc) { /* not a checkpoint to count among the kept: its manifest goes (best effort) */
      char *mpath = join(uri, mname);
      altar_error_t e = {0};
      if (mpath) altar_storage_delete(s, mpath, &e);
      free(mpath);
    }
  }
  if (!rc) rc = put_text(s, uri, "latest.json", text, err);
  if (rc) altar_error_prefix(err, "checkpoint %s to %s", c->id, uri);
  free(text);
  free(ru);
  json_decref(files);
  free_names(names, n);
  altar_storage_close(s);
  altar__checkpoint_remove_local(c->local_dir);
  return rc;
}

/* ---- restore ---- */

/* A manifest's file name: a plain name RocksDB would write, nothing that
 * could leave the directory. */
static bool plain_name(const char *s) {
  if (!*s || strlen(s) > 255 || !strcmp(s, ".") || !strcmp(s, "..")) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
          *p == '.'))
      return false;
  return true;
}

static bool hex64(const char *s) {
  if (strlen(s) != 64) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

/* Parses and checks a manifest; *pfiles (borrowed from *proot) lists its files. */
static int parse_manifest(const char *text, size_t len, const char *where, altar_checkpoint_t *out, json_t **proot,
                          json_t **pfiles, altar_error_t *err) {
  json_error_t je;
  json_t *m = json_loadb(text, len, 0, &je);
  if (!m) return altar_error_set(err, ALTAR_EDECODE, "%s:%d: not JSON: %s", where, je.line, je.text);
  json_t *id = json_object_get(m, "id"), *topic = json_object_get(m, "topic"), *offs = json_object_get(m, "offsets");
  json_t *files = json_object_get(m, "files");
  const char *bad = json_integer_value(json_object_get(m, "format")) != 1                    ? "format"
                    : !json_is_string(id) || strlen(json_string_value(id)) >= sizeof out->id ? "id"
                    : !json_is_string(topic)                                                 ? "topic"
                    : !json_is_array(offs) || json_array_size(offs) > CP_MAX_OFFSETS         ? "offsets"
                    : !json_is_array(files) || json_array_size(files) > CP_MAX_FILES         ? "files"
                                                                                             : NULL;
  if (!bad && !plain_name(json_string_value(id))) bad = "id";
  size_t i;
  json_t *e;
  json_array_foreach(files, i, e) {
    if (bad) break;
    json_t *nm = json_object_get(e, "name"), *sst = json_object_get(e, "sst");
    if (!json_is_string(nm) || !plain_name(json_string_value(nm)) || !json_is_integer(json_object_get(e, "size")) ||
        (sst && (!json_is_string(sst) || !hex64(json_string_value(sst)))))
      bad = "files";
  }
  json_array_foreach(offs, i, e) {
    if (bad) break;
    json_int_t p = json_integer_value(json_object_get(e, "partition"));
    if (!json_is_integer(json_object_get(e, "partition")) || !json_is_integer(json_object_get(e, "next")) || p < 0 ||
        p > INT32_MAX)
      bad = "offsets";
  }
  /* Optional (older checkpoints have none): the publish topics' ends. */
  json_t *pubs = json_object_get(m, "published");
  if (!bad && pubs && (!json_is_array(pubs) || json_array_size(pubs) > CP_MAX_OFFSETS)) bad = "published";
  json_array_foreach(pubs, i, e) {
    if (bad) break;
    json_t *t = json_object_get(e, "topic");
    json_int_t p = json_integer_value(json_object_get(e, "partition"));
    if (!json_is_string(t) || !*json_string_value(t) || strlen(json_string_value(t)) >= 256 ||
        !json_is_integer(json_object_get(e, "partition")) || !json_is_integer(json_object_get(e, "next")) || p < 0 ||
        p > INT32_MAX || json_integer_value(json_object_get(e, "next")) < 0)
      bad = "published";
  }
  if (bad) {
    json_decref(m);
    return altar_error_set(err, ALTAR_EDECODE, "%s: field '%s' is missing or not valid", where, bad);
  }
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "%s", json_string_value(id));
  out->topic = strdup(json_string_value(topic));
  out->taken_at = json_number_value(json_object_get(m, "taken_at"));
  out->n_offsets = json_array_size(offs);
  out->offsets = calloc(out->n_offsets ? out->n_offsets : 1, sizeof *out->offsets);
  out->files = json_array_size(files);
  if (!out->topic || !out->offsets) {
    json_decref(m);
    altar__checkpoint_clear(out);
    return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  }
  json_array_foreach(offs, i, e) {
    out->offsets[i].partition = (int32_t)json_integer_value(json_object_get(e, "partition"));
    out->offsets[i].next = json_integer_value(json_object_get(e, "next"));
  }
  out->n_published = pubs ? json_array_size(pubs) : 0;
  if (out->n_published && !(out->published = calloc(out->n_published, sizeof *out->published))) {
    json_decref(m);
    altar__checkpoint_clear(out);
    return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  }
  json_array_foreach(pubs, i, e) {
    snprintf(out->published[i].topic, sizeof out->published[i].topic, "%s",
             json_string_value(json_object_get(e, "topic")));
    out->published[i].partition = (int32_t)json_integer_value(json_object_get(e, "partition"));
    out->published[i].next = json_integer_value(json_object_get(e, "next"));
  }
  *proot = m;
  *pfiles = files;
  return ALTAR_OK;
}

/* Reads and checks the manifest at uri/rest. */
static int read_manifest_at(altar_storage_t *s, const char *uri, const char *rest, altar_checkpoint_t *out,
                            json_t **proot, json_t **pfiles, altar_error_t *err) {
  char *path = join(uri, rest);
  if (!path) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  bool there = false;
  int rc = altar_storage_exists(s, path, &there, err);
  if (!rc && !there) rc = altar_error_set(err, ALTAR_ENOTFOUND, "no checkpoint at %s", uri);
  altar_buf_t b = {0};
  if (!rc) rc = altar_storage_read_bytes(s, path, &b, err);
  if (!rc && b.len > CP_MAX_MANIFEST) rc = altar_error_set(err, ALTAR_EDECODE, "%s: larger than 4 MiB", path);
  if (!rc) rc = parse_manifest((const char *)b.data, b.len, path, out, proot, pfiles, err);
  altar_buf_free(&b);
  free(path);
  return rc;
}

static int read_latest(altar_storage_t *s, const char *uri, altar_checkpoint_t *out, json_t **proot, json_t **pfiles,
                       altar_error_t *err) {
  return read_manifest_at(s, uri, "latest.json", out, proot, pfiles, err);
}

int altar__checkpoint_latest(const char *uri, altar_checkpoint_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  altar_storage_t *s = NULL;
  int rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  json_t *root = NULL, *files = NULL;
  if (!rc) rc = read_latest(s, uri, out, &root, &files, err);
  if (rc) altar__checkpoint_clear(out);
  json_decref(root);
  altar_storage_close(s);
  return rc;
}

/* Copies src to dst (new), then fsyncs it. */
static int copy_file(const char *src, const char *dst, altar_error_t *err) {
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return altar_error_set(err, ALTAR_EIO, "%s: %s", src, strerror(errno));
  int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return altar_error_set(err, ALTAR_EIO, "%s: %s", dst, strerror(errno));
  }
  char buf[1 << 16];
  int rc = ALTAR_OK;
  for (;;) {
    ssize_t r = read(in, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rc = altar_error_set(err, ALTAR_EIO, "%s: %s", src, strerror(errno));
      break;
    }
    if (r == 0) break;
    for (ssize_t w = 0; w < r;) {
      ssize_t k = write(out, buf + w, (size_t)(r - w));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) {
        rc = altar_error_set(err, ALTAR_EIO, "%s: %s", dst, strerror(errno));
        break;
      }
      w += k;
    }
    if (rc) break;
  }
  if (!rc && fsync(out) != 0) rc = altar_error_set(err, ALTAR_EIO, "%s: fsync: %s", dst, strerror(errno));
  close(in);
  close(out);
  return rc;
}

/* A fetched table file whose content is to be checked against its name
 * (the digest it is stored under). */
typedef struct digest_job {
  char path[4096], src[4096], want[ALTAR_DIGEST_BUFSZ];
  int rc;
  altar_error_t err;
} digest_job_t;

static void check_digest_job(void *ctx, size_t i) {
  digest_job_t *j = &((digest_job_t *)ctx)[i];
  char dg[ALTAR_DIGEST_BUFSZ];
  j->rc = altar_sha256_file(j->path, dg, &j->err);
  const char *hex = strchr(dg, ':') ? strchr(dg, ':') + 1 : dg;
  if (!j->rc && strcmp(hex, j->want))
    j->rc = altar_error_set(&j->err, ALTAR_EDECODE, "%s: content does not match its digest", j->src);
}

/* Checks the n files' digests on every core: hashing every table file of a
 * checkpoint was most of a restore at 10^6 groups once the files were
 * linked rather than copied. */
static int check_digests(digest_job_t *jobs, size_t n, altar_error_t *err) {
  altar__run_jobs(n, check_digest_job, jobs);
  for (size_t i = 0; i < n; i++)
    if (jobs[i].rc) {
      if (err) *err = jobs[i].err;
      return jobs[i].rc;
    }
  return ALTAR_OK;
}

/* Fetches one file of checkpoint c into tmp; a table file's digest is
 * checked there, or left in *dj (when not NULL) for check_digests. */
static int fetch_file(altar_storage_t *s, const char *uri, const altar_checkpoint_t *c, json_t *f, const char *tmp,
                      digest_job_t *dj, bool *pqueued, altar_error_t *err) {
  *pqueued = false;
  const char *name = json_string_value(json_object_get(f, "name"));
  const char *sst = json_string_value(json_object_get(f, "sst"));
  char rest[512], dst[4096];
  if (sst) snprintf(rest, sizeof rest, "sst/%s", sst);
  else snprintf(rest, sizeof rest, "cp/%s/%s", c->id, name);
  snprintf(dst, sizeof dst, "%s/%s", tmp, name);
  char *src = join(uri, rest);
  if (!src) return altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  altar_local_file_t lf = {0};
  int rc = altar_storage_as_local_file(s, src, &lf, err);
  if (!rc) {
    /* A table file is stored by content and never written again (here as
     * in the ledger, which only ever unlinks one): a link is as good as a
     * copy and spares reading and writing it (the copies of a restore at
     * 10^6 groups were seconds of a takeover). Another file system: copied. */
    if (!sst || link(lf.path, dst) != 0) rc = copy_file(lf.path, dst, err);
    altar_local_file_release(&lf);
  }
  struct stat st;
  if (!rc && (stat(dst, &st) != 0 || st.st_size != json_integer_value(json_object_get(f, "size"))))
    rc = altar_error_set(err, ALTAR_EDECODE, "%s: size differs from the manifest's", src);
  if (!rc && sst && dj && strlen(sst) < sizeof dj->want) { /* checked with the others */
    snprintf(dj->path, sizeof dj->path, "%s", dst);
    snprintf(dj->src, sizeof dj->src, "%s", src);
    snprintf(dj->want, sizeof dj->want, "%s", sst);
    *pqueued = true;
  } else if (!rc && sst) { /* stored by content: the content must match */
    char dg[ALTAR_DIGEST_BUFSZ];
    rc = altar_sha256_file(dst, dg, err);
    const char *hex = strchr(dg, ':') ? strchr(dg, ':') + 1 : dg;
    if (!rc && strcmp(hex, sst)) rc = altar_error_set(err, ALTAR_EDECODE, "%s: content does not match its digest", src);
  }
  free(src);
  return rc;
}

/* Makes the directories above path (as mkdir -p of its parent). */
static void make_parents(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(p, 0755);
      *s = '/';
    }
}

/* The manifests under cp/, newest first (ids sort by time). */
typedef struct cp_names {
  size_t base;
  char **v;
  size_t n, cap;
  bool oom, too_many;
} cp_names_t;

static int on_cp_name(const altar_storage_entry_t *e, void *ud) {
  cp_names_t *c = ud;
  const char *rest = strlen(e->path) >= c->base ? e->path + c->base : "";
  size_t l = strlen(rest);
  if (strncmp(rest, "cp/", 3) || l < 3 + 1 + 5 || strcmp(rest + l - 5, ".json") || strchr(rest + 3, '/')) return 0;
  if (c->n >= CP_MAX_FILES) {
    c->too_many = true;
    return 1;
  }
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    char **nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) {
      c->oom = true;
      return 1;
    }
    c->v = nv;
    c->cap = cap;
  }
  if (!(c->v[c->n] = strdup(rest))) {
    c->oom = true;
    return 1;
  }
  c->n++;
  return 0;
}

static int cmp_names_desc(const void *a, const void *b) { return -cmp_names(a, b); }

/* Reads the manifest of status_topic that covers partition part furthest,
 * the newest of those: a reconciler that lost part keeps shipping its
 * stale state of it, newer by time than the current owner's checkpoints
 * but behind them. ALTAR_ENOTFOUND when none covers part. */
static int read_covering(altar_storage_t *s, const char *uri, const char *status_topic, int32_t part,
                         altar_checkpoint_t *out, json_t **proot, json_t **pfiles, altar_error_t *err) {
  cp_names_t c = {0};
  char *prefix = join(uri, "cp/"), *base = join(uri, "");
  int rc = prefix && base ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
  if (!rc) {
    c.base = strlen(base);
    rc = altar_storage_list(s, prefix, on_cp_name, &c, err);
    if (c.oom) rc = altar_error_set(err, ALTAR_ENOMEM, "checkpoint: out of memory");
    else if (c.too_many) rc = altar_error_set(err, ALTAR_ETOOBIG, "%s: more than %d manifests", prefix, CP_MAX_FILES);
  }
  if (!rc) qsort(c.v, c.n, sizeof *c.v, cmp_names_desc);
  bool found = false;
  int64_t best = -1;
  for (size_t i = 0; !rc && i < c.n; i++) {
    altar_checkpoint_t m = {0};
    json_t *root = NULL, *files = NULL;
    altar_error_t me = {0};
    /* A manifest that cannot be read is passed over: an older one may do. */
    if (read_manifest_at(s, uri, c.v[i], &m, &root, &files, &me) == ALTAR_OK && m.topic &&
        !strcmp(m.topic, status_topic) && altar__checkpoint_offset(&m, part) > best) {
      best = altar__checkpoint_offset(&m, part);
      if (found) {
        altar__checkpoint_clear(out);
        json_decref(*proot);
      }
      *out = m;
      *proot = root;
      *pfiles = files;
      found = true;
      continue;
    }
    altar__checkpoint_clear(&m);
    json_decref(root);
  }
  if (!rc && !found)
    rc = altar_error_set(err, ALTAR_ENOTFOUND, "no checkpoint of %s at %s covers partition %d", status_topic, uri,
                         (int)part);
  for (size_t i = 0; i < c.n; i++) free(c.v[i]);
  free(c.v);
  free(prefix);
  free(base);
  return rc;
}

static int restore_read(altar_storage_t *s, const char *uri, const char *dir, int rc, altar_checkpoint_t *out,
                        json_t *root, json_t *files, altar_error_t *err);

int altar__checkpoint_restore(const char *uri, const char *dir, altar_checkpoint_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(dir, &st) == 0) return altar_error_set(err, ALTAR_EEXIST, "restore into %s: it exists", dir);
  altar_storage_t *s = NULL;
  int rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  json_t *root = NULL, *files = NULL;
  if (!rc) rc = read_latest(s, uri, out, &root, &files, err);
  return restore_read(s, uri, dir, rc, out, root, files, err);
}

int altar__checkpoint_restore_covering(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                                       const char *dir, altar_checkpoint_t *out, altar_error_t *err) {
  return altar__checkpoint_restore_covering_kept(uri, status_topic, part, beyond, dir, NULL, out, err);
}

/* Covering no more than the ledger has: nothing worth fetching. */
static int check_covers(const altar_checkpoint_t *out, int32_t part, int64_t beyond, altar_error_t *err) {
  if (altar__checkpoint_offset(out, part) > beyond) return ALTAR_OK;
  return altar_error_set(
      err, ALTAR_ESTATE,
      "the checkpoint covering partition %d furthest (%s) stops at offset %lld, the ledger is at %lld", (int)part,
      out->id, (long long)altar__checkpoint_offset(out, part), (long long)beyond);
}

int altar__checkpoint_covering(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                               altar_checkpoint_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  altar_storage_t *s = NULL;
  int rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  json_t *root = NULL, *files = NULL;
  if (!rc) rc = read_covering(s, uri, status_topic, part, out, &root, &files, err);
  if (!rc) rc = check_covers(out, part, beyond, err);
  if (rc) altar__checkpoint_clear(out);
  json_decref(root);
  if (s) altar_storage_close(s);
  return rc;
}

int altar__checkpoint_restore_covering_kept(const char *uri, const char *status_topic, int32_t part, int64_t beyond,
                                            const char *dir, const char *kept, altar_checkpoint_t *out,
                                            altar_error_t *err) {
  memset(out, 0, sizeof *out);
  struct stat st;
  bool there = stat(dir, &st) == 0;
  if (there && !kept) return altar_error_set(err, ALTAR_EEXIST, "restore into %s: it exists", dir);
  altar_storage_t *s = NULL;
  int rc = altar_storage_open_for_uri(uri, NULL, &s, err);
  json_t *root = NULL, *files = NULL;
  if (!rc) rc = read_covering(s, uri, status_topic, part, out, &root, &files, err);
  /* Covering no more than the ledger has: nothing worth fetching. */
  if (!rc) rc = check_covers(out, part, beyond, err);
  /* Restored already (the partitions one rebalance gains share it). */
  if (!rc && there && kept && !strcmp(out->id, kept)) {
    json_decref(root);
    altar_storage_close(s);
    return ALTAR_OK;
  }
  if (!rc && there) altar__checkpoint_remove_local(dir); /* the caller's restore of another checkpoint */
  return restore_read(s, uri, dir, rc, out, root, files, err);
}

/* Fetches the files of the manifest read (rc: how reading it went) into
 * dir; closes s and frees root either way. */
static int restore_read(altar_storage_t *s, const char *uri, const char *dir, int rc, altar_checkpoint_t *out,
                        json_t *root, json_t *files, altar_error_t *err) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.restore-%ld", dir, (long)getpid());
  if (!rc) {
    make_parents(tmp);
    altar__checkpoint_remove_local(tmp); /* a previous attempt of this pid */
    if (mkdir(tmp, 0755) != 0) rc = altar_error_set(err, ALTAR_EIO, "%s: %s", tmp, strerror(errno));
  }
  size_t i, n_dj = 0;
  json_t *f;
  digest_job_t *djs = rc ? NULL : calloc(json_array_size(files) + 1, sizeof *djs);
  json_array_foreach(files, i, f) {
    if (rc) break;
    bool queued = false;
    rc = fetch_file(s, uri, out, f, tmp, djs ? &djs[n_dj] : NULL, &queued, err);
    n_dj += queued;
  }
  if (!rc && n_dj) rc = check_digests(djs, n_dj, err);
  free(djs);
  if (!rc) {
    int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
    if (rename(tmp, dir) != 0) rc = altar_error_set(err, ALTAR_EIO, "%s: %s", dir, strerror(errno));
  }
  if (rc) {
    altar__checkpoint_remove_local(tmp);
    altar__checkpoint_clear(out);
    if (rc != ALTAR_ENOTFOUND && rc != ALTAR_ESTATE) altar_error_prefix(err, "restoring %s from %s", dir, uri);
  }
  json_decref(root);
  altar_storage_close(s);
  return rc;
}
