/* Kept task output: bounded by count, by allocated size and by age, oldest
 * first, never a running task's (log_retention.h).
 *
 * The index is a ring of entries in the order they were kept (oldest at
 * head) and an open-addressing table from task key to ring position, so a
 * key kept again replaces its older entry and the count stays exact. The
 * ring holds at most keep_count live entries after each prune, plus the
 * dead ones a replaced key leaves until they reach the old end or the ring
 * is rebuilt. */
#include "backends/log_retention.h"

#include "altar/codec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- settings -------------------------------------------------------------- */

/* A number with an optional binary or decimal-looking suffix (both binary:
 * "512M" and "512MiB" are the same); false when not one. */
static bool parse_bytes(const char *s, uint64_t *pv) {
  char *end = NULL;
  errno = 0;
  if (!s || *s < '0' || *s > '9') return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return false;
  static const struct {
    const char *suffix;
    unsigned shift;
  } units[] = {{"", 0}, {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].suffix)) continue;
    if (v > (UINT64_MAX >> units[i].shift)) return false;
    *pv = (uint64_t)v << units[i].shift;
    return true;
  }
  return false;
}

/* A decimal integer in [lo, hi]; false when not one. */
static bool parse_int(const char *s, long lo, long hi, long *pv) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi) return false;
  *pv = v;
  return true;
}

bool altar__log_retention_parse(const altar_strmap_t *cfg, altar_log_retention_t *pr, altar_error_t *err) {
  *pr = (altar_log_retention_t){.keep_bytes = ALTAR_LOGS_KEEP_DEFAULT,
                                .keep_count = ALTAR_LOGS_KEEP_COUNT_DEFAULT,
                                .max_age_s = ALTAR_LOGS_KEEP_DAYS_DEFAULT * 86400.0,
                                .last_prune = -1,
                                .last_scan = -1};
  const char *keep = cfg ? altar_strmap_get(cfg, "logs_keep") : NULL;
  const char *count = cfg ? altar_strmap_get(cfg, "logs_keep_count") : NULL;
  const char *days = cfg ? altar_strmap_get(cfg, "logs_keep_days") : NULL;
  const char *secs = cfg ? altar_strmap_get(cfg, "logs_keep_s") : NULL;
  if (keep) {
    uint64_t v = 0;
    if (!parse_bytes(keep, &v) || v < ALTAR_LOGS_KEEP_MIN || v > ALTAR_LOGS_KEEP_MAX) {
      altar_error_set(err, ALTAR_ECONFIG,
                      "backend.logs_keep: '%.40s' is not a size from 1MiB to 1024TiB (bytes, or a number with K, M, G, "
                      "T, KiB, MiB, GiB, TiB)",
                      keep);
      return false;
    }
    pr->keep_bytes = v;
  }
  long v = 0;
  if (count) {
    if (!parse_int(count, 1, ALTAR_LOGS_KEEP_COUNT_MAX, &v)) {
      altar_error_set(err, ALTAR_ECONFIG, "backend.logs_keep_count: '%.40s' is not an integer in [1, %d]", count,
                      ALTAR_LOGS_KEEP_COUNT_MAX);
      return false;
    }
    pr->keep_count = (size_t)v;
  }
  if (days) {
    if (!parse_int(days, 0, ALTAR_LOGS_KEEP_DAYS_MAX, &v)) {
      altar_error_set(err, ALTAR_ECONFIG,
                      "backend.logs_keep_days: '%.40s' is not an integer in [0, %d] (0: no age bound)", days,
                      ALTAR_LOGS_KEEP_DAYS_MAX);
      return false;
    }
    pr->max_age_s = (double)v * 86400.0;
  }
  if (secs) {
    if (!parse_int(secs, 0, ALTAR_LOGS_KEEP_S_MAX, &v)) {
      altar_error_set(err, ALTAR_ECONFIG,
                      "backend.logs_keep_s: '%.40s' is not an integer in [0, %ld] (seconds, for tests and soaks; "
                      "0: no age bound)",
                      secs, ALTAR_LOGS_KEEP_S_MAX);
      return false;
    }
    pr->max_age_s = (double)v;
  }
  return true;
}

bool altar__log_retention_due(altar_log_retention_t *r, double now) {
  if (r->last_prune >= 0 && now - r->last_prune < ALTAR_LOGS_PRUNE_INTERVAL_S) return false;
  r->last_prune = now;
  return true;
}

/* ---- the index --------------------------------------------------------------- */

#define KEY_BYTES (ALTAR_TASK_KEY_LEN / 2)
#define RING_MIN 16

typedef struct kept {
  uint8_t key[KEY_BYTES];
  double written; /* newest mtime of the directory and its entries; < 0: dead (replaced) */
  uint64_t bytes; /* allocated: st_blocks * 512 of the directory and its entries */
} kept_t;

struct altar_logs_index {
  kept_t *ring;
  size_t cap;          /* a power of two */
  uint64_t head, tail; /* entries [head, tail), at ring[seq & (cap - 1)] */
  size_t live;         /* entries not dead */
  uint64_t bytes;      /* of the live entries */
  uint32_t *slots;     /* ring position + 1 of a key's live entry; 0: empty */
  size_t n_slots;      /* 2 * cap: probing always ends */
  /* The last altar__logs_kept_facts answer: valid while no entry came or
   * went (every change clears facts_ok) and facts_at <= now <= facts_until
   * (past entries only turn old, never young again). */
  bool facts_ok;
  double facts_at, facts_until;
  altar_logs_kept_facts_t facts;
};

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* 64 lowercase hex characters, nothing else: a task key, so ours. */
static bool is_task_key(const char *name) {
  size_t n = 0;
  for (; name[n]; n++)
    if (hexval(name[n]) < 0) return false;
  return n == ALTAR_TASK_KEY_LEN;
}

static void key_bin(const char *name, uint8_t out[KEY_BYTES]) {
  for (size_t i = 0; i < KEY_BYTES; i++) out[i] = (uint8_t)(hexval(name[2 * i]) << 4 | hexval(name[2 * i + 1]));
}

static void key_hex(const uint8_t key[KEY_BYTES], char out[ALTAR_TASK_KEY_LEN + 1]) {
  for (size_t i = 0; i < KEY_BYTES; i++) {
    out[2 * i] = "0123456789abcdef"[key[i] >> 4];
    out[2 * i + 1] = "0123456789abcdef"[key[i] & 15];
  }
  out[ALTAR_TASK_KEY_LEN] = '\0';
}

/* Every byte of the key reaches the low bits the table uses (keys are
 * SHA-256 digests, but names on disk need not be: splitmix64's finalizer). */
static size_t key_hash(const uint8_t key[KEY_BYTES]) {
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < KEY_BYTES; i += 8) {
    uint64_t w;
    memcpy(&w, key + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9u;
    h ^= h >> 32;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9u;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebu;
  h ^= h >> 31;
  return (size_t)h;
}

static kept_t *at(const altar_logs_index_t *x, uint64_t seq) { return &x->ring[seq & (x->cap - 1)]; }

/* The slot holding key, or the empty slot where it would go. */
static size_t slot_of(const altar_logs_index_t *x, const uint8_t key[KEY_BYTES]) {
  size_t mask = x->n_slots - 1;
  for (size_t i = key_hash(key) & mask;; i = (i + 1) & mask)
    if (!x->slots[i] || !memcmp(x->ring[x->slots[i] - 1].key, key, KEY_BYTES)) return i;
}

/* Empties slot i, shifting back the entries of its probe run that would
 * otherwise no longer be found (linear probing without tombstones). */
static void slot_clear(altar_logs_index_t *x, size_t i) {
  size_t mask = x->n_slots - 1;
  x->slots[i] = 0;
  for (size_t j = (i + 1) & mask; x->slots[j]; j = (j + 1) & mask) {
    size_t home = key_hash(x->ring[x->slots[j] - 1].key) & mask;
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    x->slots[i] = x->slots[j];
    x->slots[j] = 0;
    i = j;
  }
}

/* Lays the live entries out again, in order, in a ring of cap entries. */
static int rebuild(altar_logs_index_t *x, size_t cap) {
  kept_t *ring = malloc(cap * sizeof *ring);
  uint32_t *slots = calloc(2 * cap, sizeof *slots);
  if (!ring || !slots) {
    free(ring);
    free(slots);
    return ALTAR_ENOMEM;
  }
  size_t n = 0;
  for (uint64_t s = x->head; s < x->tail; s++)
    if (at(x, s)->written >= 0) ring[n++] = *at(x, s);
  free(x->ring);
  free(x->slots);
  *x = (altar_logs_index_t){
      .ring = ring, .cap = cap, .head = 0, .tail = n, .live = n, .bytes = x->bytes, .slots = slots, .n_slots = 2 * cap};
  for (size_t i = 0; i < n; i++) x->slots[slot_of(x, ring[i].key)] = (uint32_t)i + 1;
  return ALTAR_OK;
}

/* A ring for n entries with a quarter to spare (room for the dead ones a
 * rerun leaves before the next rebuild). */
static size_t ring_fit(size_t n) {
  size_t cap = RING_MIN;
  while (cap < n + n / 4 + 1) cap *= 2;
  return cap;
}

/* Makes room for one more entry: dead entries are dropped first, then the
 * ring doubles. */
static int reserve(altar_logs_index_t *x) {
  if (x->cap && x->tail - x->head < x->cap) return ALTAR_OK;
  return rebuild(x, x->live + 1 < x->cap / 2 ? x->cap : ring_fit(x->live + 1));
}

/* Appends k as the newest entry, replacing an older entry of its key. */
static int push(altar_logs_index_t *x, const kept_t *k) {
  if (x->cap) {
    size_t i = slot_of(x, k->key);
    if (x->slots[i]) {
      kept_t *old = &x->ring[x->slots[i] - 1];
      old->written = -1;
      x->live--;
      x->bytes -= old->bytes;
      x->facts_ok = false;
      slot_clear(x, i);
    }
  }
  if (reserve(x)) return ALTAR_ENOMEM;
  kept_t *e = at(x, x->tail);
  *e = *k;
  x->slots[slot_of(x, k->key)] = (uint32_t)((x->tail & (x->cap - 1)) + 1);
  x->tail++;
  x->live++;
  x->bytes += k->bytes;
  x->facts_ok = false;
  return ALTAR_OK;
}

/* Removes the oldest entry (live or dead) into *pk. */
static void pop(altar_logs_index_t *x, kept_t *pk) {
  kept_t *e = at(x, x->head);
  *pk = *e;
  if (e->written >= 0) {
    slot_clear(x, slot_of(x, e->key));
    x->live--;
    x->bytes -= e->bytes;
    x->facts_ok = false;
  }
  x->head++;
}

/* Gives memory back once the ring is mostly empty (after a scan found many). */
static void shrink(altar_logs_index_t *x) {
  if (x->cap > RING_MIN && (x->tail - x->head) * 8 < x->cap) (void)rebuild(x, ring_fit(x->live));
}

static void index_free(altar_logs_index_t *x) {
  if (!x) return;
  free(x->ring);
  free(x->slots);
  free(x);
}

void altar__log_retention_clear(altar_log_retention_t *r) {
  index_free(r->index);
  r->index = NULL;
}

void altar__logs_kept_facts(altar_log_retention_t *r, double now, altar_logs_kept_facts_t *pf) {
  altar_logs_index_t *x = r->index;
  *pf = (altar_logs_kept_facts_t){0};
  if (!x) return;
  if (x->facts_ok && x->facts_at <= now && now <= x->facts_until) {
    *pf = x->facts;
    return;
  }
  /* prune_index's walk without its removals: from the old end while an
   * entry is past its age or a bound is exceeded by what is left. */
  size_t live = x->live;
  uint64_t bytes = x->bytes;
  double until = INFINITY; /* past the last entry only a change changes the answer */
  for (uint64_t s = x->head; s < x->tail; s++) {
    const kept_t *e = at(x, s);
    if (e->written < 0) continue;
    bool old = r->max_age_s > 0 && now - e->written > r->max_age_s;
    if (!old && live <= r->keep_count && bytes <= r->keep_bytes) {
      if (r->max_age_s > 0) until = e->written + r->max_age_s; /* when it turns old */
      break;
    }
    pf->prune_next_dirs++;
    pf->prune_next_bytes += e->bytes;
    live--;
    bytes -= e->bytes;
  }
  pf->dirs = x->live;
  pf->bytes = x->bytes;
  x->facts = *pf;
  x->facts_at = now;
  x->facts_until = until;
  x->facts_ok = true;
}

void altar__log_retention_kept_logs(altar_log_retention_t *r, double now, altar_kept_logs_t *pkept) {
  altar_logs_kept_facts_t f;
  altar__logs_kept_facts(r, now, &f);
  *pkept = (altar_kept_logs_t){.dirs = f.dirs,
                               .bytes = f.bytes,
                               .prune_next_dirs = f.prune_next_dirs,
                               .prune_next_bytes = f.prune_next_bytes,
                               .keep_dirs = r->keep_count,
                               .keep_bytes = r->keep_bytes,
                               .keep_age_s = r->max_age_s};
}

size_t altar__logs_index_footprint(const altar_log_retention_t *r) {
  const altar_logs_index_t *x = r->index;
  return x ? sizeof *x + x->cap * sizeof *x->ring + x->n_slots * sizeof *x->slots : 0;
}

/* ---- the directories -------------------------------------------------------- */

static double mtime_of(const struct stat *st) { return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9; }

/* Allocated bytes and last write of the directory name in logs and the
 * entries in it (one level: a task's streams); false when it is not a
 * directory (or is gone). */
static bool measure(int logs, const char *name, kept_t *k) {
  struct stat st;
  if (fstatat(logs, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) return false;
  k->bytes = (uint64_t)st.st_blocks * 512;
  k->written = mtime_of(&st);
  int fd = openat(logs, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return true;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    k->bytes += (uint64_t)st.st_blocks * 512;
    if (mtime_of(&st) > k->written) k->written = mtime_of(&st);
  }
  closedir(d);
  return true;
}

/* What the backends write in a task's directory: its streams, and their
 * temporary names while redacted (process) or written (docker). */
static bool ours(const char *name) {
  static const char *const names[] = {"stdout",      "stderr", ".stdout.redacted", ".stderr.redacted", ".stdout.tmp",
                                      ".stderr.tmp", NULL};
  for (size_t i = 0; names[i]; i++)
    if (!strcmp(name, names[i])) return true;
  return false;
}

/* Removes our files of logs/name, then the directory; true when it is
 * gone (anything else in it keeps it, and it is left alone). */
static bool remove_kept(int logs, const char *name) {
  int fd = openat(logs, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)))
      if (ours(de->d_name)) (void)unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
  } else if (fd >= 0) {
    close(fd);
  }
  return unlinkat(logs, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

static int by_written(const void *a, const void *b) {
  const kept_t *x = a, *y = b;
  return x->written < y->written ? -1 : x->written > y->written ? 1 : memcmp(x->key, y->key, KEY_BYTES);
}

/* Reads logs whole into a fresh index, oldest first. false when out of
 * memory (the old index stays). */
static bool scan(int logs, altar_log_retention_t *r, double mono, altar_logs_prune_facts_t *f) {
  kept_t *ks = NULL;
  size_t n = 0, cap = 0;
  bool full = false;
  int fd = dup(logs);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    r->last_scan = mono;
    return true; /* nothing to read: the index stays as it is */
  }
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!is_task_key(de->d_name)) continue; /* only ours: <task key> */
    if (n == ALTAR_LOGS_SCAN_MAX_DIRS) {
      full = true;
      break;
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 256;
      kept_t *nk = realloc(ks, nc * sizeof *nk);
      if (!nk) break; /* out of memory: index what was measured */
      ks = nk;
      cap = nc;
    }
    f->dirs_measured++;
    if (!measure(logs, de->d_name, &ks[n])) continue;
    key_bin(de->d_name, ks[n].key);
    n++;
  }
  closedir(d);
  f->dirs_scanned = n;
  if (n) qsort(ks, n, sizeof *ks, by_written);
  altar_logs_index_t *x = calloc(1, sizeof *x);
  bool ok = x && rebuild(x, ring_fit(n)) == ALTAR_OK;
  for (size_t i = 0; ok && i < n; i++) ok = push(x, &ks[i]) == ALTAR_OK;
  free(ks);
  if (!ok) {
    index_free(x);
    return false;
  }
  index_free(r->index);
  r->index = x;
  /* A scan that stopped at its bound goes on at the next prune. */
  r->last_scan = full ? -1 : mono;
  return true;
}

/* Prunes the index's old end. Each entry is looked at once per call: one
 * that is running or was written since it was indexed moves to the new end
 * with its new size (it still takes disk), so a prune always ends. */
static void prune_index(int logs, altar_log_retention_t *r, double now, altar_logs_running_fn running, void *ctx,
                        altar_logs_prune_facts_t *f) {
  altar_logs_index_t *x = r->index;
  if (!x) return;
  f->dirs_seen = x->live;
  f->bytes_seen = x->bytes;
  for (uint64_t budget = x->tail - x->head; budget && x->head < x->tail; budget--) {
    kept_t *e = at(x, x->head);
    if (e->written < 0) {
      kept_t dead;
      pop(x, &dead);
      continue;
    }
    bool old = r->max_age_s > 0 && now - e->written > r->max_age_s;
    bool over_count = x->live > r->keep_count, over_size = x->bytes > r->keep_bytes;
    if (!old && !over_count && !over_size) break;
    kept_t k, now_k;
    pop(x, &k);
    char name[ALTAR_TASK_KEY_LEN + 1];
    key_hex(k.key, name);
    f->dirs_measured++;
    if (!measure(logs, name, &now_k)) continue; /* gone already */
    memcpy(now_k.key, k.key, KEY_BYTES);
    bool changed = now_k.written > k.written;
    if (changed || (running && running(name, ctx))) {
      if (changed) f->dirs_changed++;
      else f->dirs_running++;
      (void)push(x, &now_k); /* out of memory: forgotten until the next scan */
      continue;
    }
    if (!remove_kept(logs, name)) continue; /* holds what we did not write: left, not indexed */
    f->dirs_removed++;
    f->bytes_removed += now_k.bytes;
    if (old) f->removed_for_age++;
    else if (over_count) f->removed_for_count++;
    else f->removed_for_size++;
  }
  shrink(x);
}

void altar__logs_prune(const char *logs_dir, altar_log_retention_t *r, double mono, double now,
                       altar_logs_running_fn running, void *ctx, altar_logs_prune_facts_t *pfacts) {
  altar_logs_prune_facts_t f = {0};
  int logs = open(logs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (logs >= 0) {
    if (!r->index || r->last_scan < 0 || mono - r->last_scan >= ALTAR_LOGS_RESCAN_INTERVAL_S)
      (void)scan(logs, r, mono, &f);
    prune_index(logs, r, now, running, ctx, &f);
    close(logs);
  }
  if (pfacts) *pfacts = f;
}

void altar__logs_keep(const char *logs_dir, altar_log_retention_t *r, const char *key, double now,
                      altar_logs_running_fn running, void *ctx, altar_logs_prune_facts_t *pfacts) {
  altar_logs_prune_facts_t f = {0};
  int logs = open(logs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (logs >= 0 && is_task_key(key)) {
    kept_t k;
    f.dirs_measured++;
    if (!r->index) r->index = calloc(1, sizeof *r->index);
    if (r->index && measure(logs, key, &k)) {
      key_bin(key, k.key);
      (void)push(r->index, &k); /* out of memory: found again by the next scan */
    }
    prune_index(logs, r, now, running, ctx, &f);
  }
  if (logs >= 0) close(logs);
  if (pfacts) *pfacts = f;
}
