#include "offset_tracker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stretch of a partition's seen offsets above the commit point: one
 * unfinished offset (lo == hi, !done), or finished offsets lo..hi with no
 * unfinished one seen between them (offsets in between that were never
 * seen are no jobs: a gap). No two finished stretches are neighbours, so a
 * partition holds at most two per unfinished job, however many finished
 * above the lowest unfinished one. */
typedef struct entry {
  int64_t lo, hi;
  bool done;
} entry_t;

typedef struct range {
  int64_t lo, hi; /* inclusive, absolute offsets */
} range_t;

typedef struct part {
  char *topic;
  int32_t partition;
  int64_t next;  /* one past the highest offset seen (or the committed offset) */
  entry_t *ents; /* stretches of offsets seen and not yet below the commit point, ascending */
  size_t head, n, cap;
  range_t *prior; /* finished in an earlier life, from the metadata; ascending */
  size_t n_prior;
  int64_t prior_base;     /* the committed offset read at assign (-1: none) */
  int64_t prior_held_end; /* unfinished offsets in [prior_base, this) were held (v2); -1: none */
  int64_t last_offset;    /* last commit point returned */
  char *last_meta;
} part_t;

struct altar_offset_tracker {
  part_t *parts;
  size_t n, cap;
};

altar__offset_tracker_t *altar__offset_tracker_new(void) { return calloc(1, sizeof(altar__offset_tracker_t)); }

static void part_clear(part_t *p) {
  free(p->topic);
  free(p->ents);
  free(p->prior);
  free(p->last_meta);
  memset(p, 0, sizeof *p);
}

void altar__offset_tracker_free(altar__offset_tracker_t *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) part_clear(&t->parts[i]);
  free(t->parts);
  free(t);
}

static part_t *find(const altar__offset_tracker_t *t, const char *topic, int32_t partition) {
  for (size_t i = 0; i < t->n; i++)
    if (t->parts[i].partition == partition && !strcmp(t->parts[i].topic, topic)) return &t->parts[i];
  return NULL;
}

bool altar__offset_tracker_assigned(const altar__offset_tracker_t *t, const char *topic, int32_t partition) {
  return find(t, topic, partition) != NULL;
}

/* Parses "o1:a,b-c,…" or "o2:a,b-c,…/n" relative to base into absolute
 * ranges and the held bound (*pheld_end, -1 when none). Returns false on any
 * malformation (the caller then ignores the metadata). */
static bool parse_meta(const char *meta, int64_t base, range_t **pout, size_t *pn, int64_t *pheld_end) {
  *pout = NULL;
  *pn = 0;
  *pheld_end = -1;
  if (!meta || !*meta) return true;
  bool v2 = strncmp(meta, "o2:", 3) == 0;
  if ((!v2 && strncmp(meta, "o1:", 3) != 0) || strlen(meta) > ALTAR_OFFSET_META_MAX) return false;
  const char *s = meta + 3;
  const char *slash = v2 ? strchr(s, '/') : NULL;
  int64_t held_end = -1;
  if (v2) {
    /* the held count: digits only, >= 1, after the last range */
    if (!slash || slash[1] < '0' || slash[1] > '9') return false;
    char *end;
    errno = 0;
    long long h = strtoll(slash + 1, &end, 10);
    if (errno || *end || h < 1 || h > INT64_MAX - base) return false;
    held_end = base + h;
  }
  range_t *out = NULL;
  size_t n = 0, cap = 0;
  int64_t prev_hi = -1;
  while (*s && s != slash) {
    char *end;
    errno = 0;
    long long a = strtoll(s, &end, 10);
    if (end == s || errno || a < 0 || *s == '-' || *s == '+') goto bad;
    long long b = a;
    s = end;
    if (*s == '-') {
      s++;
      if (*s < '0' || *s > '9') goto bad;
      b = strtoll(s, &end, 10);
      if (errno || b < a) goto bad;
      s = end;
    }
    if (*s == ',') {
      s++;
      if (!*s || s == slash) goto bad;
    } else if (*s && s != slash) {
      goto bad;
    }
    if (a > INT64_MAX - base || b > INT64_MAX - base || (int64_t)a <= prev_hi) goto bad;
    if (n == cap) {
      cap = cap ? cap * 2 : 8;
      range_t *nr = realloc(out, cap * sizeof *nr);
      if (!nr) goto bad;
      out = nr;
    }
    out[n++] = (range_t){base + a, base + b};
    prev_hi = b;
  }
  *pout = out;
  *pn = n;
  *pheld_end = held_end;
  return true;
bad:
  free(out);
  return false;
}

int altar__offset_tracker_assign(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t committed,
                                 const char *metadata, altar_error_t *err) {
  altar__offset_tracker_revoke(t, topic, partition);
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 8;
    part_t *np = realloc(t->parts, cap * sizeof *np);
    if (!np) return altar_error_set(err, ALTAR_ENOMEM, "offset tracker: out of memory");
    t->parts = np;
    t->cap = cap;
  }
  part_t *p = &t->parts[t->n];
  memset(p, 0, sizeof *p);
  p->topic = strdup(topic);
  if (!p->topic) return altar_error_set(err, ALTAR_ENOMEM, "offset tracker: out of memory");
  p->partition = partition;
  p->next = committed >= 0 ? committed : -1;
  p->last_offset = -2; /* never returned */
  p->prior_base = committed >= 0 ? committed : -1;
  p->prior_held_end = -1;
  if (committed >= 0 && !parse_meta(metadata, committed, &p->prior, &p->n_prior, &p->prior_held_end)) {
    altar_error_set(err, ALTAR_OK, "%s[%" PRId32 "]: ignoring malformed commit metadata", topic, partition);
  }
  t->n++;
  return ALTAR_OK;
}

void altar__offset_tracker_revoke(altar__offset_tracker_t *t, const char *topic, int32_t partition) {
  part_t *p = find(t, topic, partition);
  if (!p) return;
  part_clear(p);
  size_t i = (size_t)(p - t->parts);
  memmove(&t->parts[i], &t->parts[i + 1], (t->n - i - 1) * sizeof *p);
  t->n--;
}

bool altar__offset_tracker_already_done(const altar__offset_tracker_t *t, const char *topic, int32_t partition,
                                        int64_t offset) {
  const part_t *p = find(t, topic, partition);
  if (!p) return false;
  size_t lo = 0, hi = p->n_prior;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->prior[mid].hi < offset) lo = mid + 1;
    else if (p->prior[mid].lo > offset) hi = mid;
    else return true;
  }
  return false;
}

bool altar__offset_tracker_held(const altar__offset_tracker_t *t, const char *topic, int32_t partition,
                                int64_t offset) {
  const part_t *p = find(t, topic, partition);
  return p && p->prior_base >= 0 && offset >= p->prior_base && offset < p->prior_held_end &&
         !altar__offset_tracker_already_done(t, topic, partition, offset);
}

int altar__offset_tracker_seen(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t offset) {
  part_t *p = find(t, topic, partition);
  if (!p) return ALTAR_ENOTFOUND;
  if (offset < 0 || (p->n > p->head && offset <= p->ents[p->n - 1].hi) || (p->next >= 0 && offset < p->next))
    return ALTAR_EINVAL;
  if (p->head > 0 && p->head == p->n) p->head = p->n = 0; /* all popped: reuse the array */
  if (p->n == p->cap) {
    if (p->head > 0) { /* compact before growing */
      memmove(p->ents, p->ents + p->head, (p->n - p->head) * sizeof *p->ents);
      p->n -= p->head;
      p->head = 0;
    }
    if (p->n == p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 16;
      entry_t *ne = realloc(p->ents, cap * sizeof *ne);
      if (!ne) return ALTAR_ENOMEM;
      p->ents = ne;
      p->cap = cap;
    }
  }
  p->ents[p->n++] = (entry_t){offset, offset, false};
  p->next = offset + 1;
  return ALTAR_OK;
}

/* Removes ents[i] (not the head's: a middle one merged into its neighbour). */
static void ents_remove(part_t *p, size_t i) {
  memmove(&p->ents[i], &p->ents[i + 1], (p->n - i - 1) * sizeof *p->ents);
  p->n--;
}

/* Gives back what a burst of unfinished jobs made the array grow to. */
static void ents_shrink(part_t *p) {
  if (p->head == p->n) p->head = p->n = 0;
  if (p->cap <= 64 || (p->n - p->head) * 8 > p->cap) return;
  memmove(p->ents, p->ents + p->head, (p->n - p->head) * sizeof *p->ents);
  p->n -= p->head;
  p->head = 0;
  entry_t *ne = realloc(p->ents, p->cap / 2 * sizeof *ne);
  if (!ne) return; /* the larger array serves as well */
  p->ents = ne;
  p->cap /= 2;
}

int altar__offset_tracker_finished(altar__offset_tracker_t *t, const char *topic, int32_t partition, int64_t offset) {
  part_t *p = find(t, topic, partition);
  if (!p) return ALTAR_ENOTFOUND;
  /* The first stretch ending at or above offset. */
  size_t lo = p->head, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->ents[mid].hi < offset) lo = mid + 1;
    else hi = mid;
  }
  if (lo < p->n && p->ents[lo].lo == offset && !p->ents[lo].done) {
    p->ents[lo].done = true;
    /* Joined to finished neighbours, so finished stretches stay apart. */
    if (lo + 1 < p->n && p->ents[lo + 1].done) {
      p->ents[lo].hi = p->ents[lo + 1].hi;
      ents_remove(p, lo + 1);
    }
    if (lo > p->head && p->ents[lo - 1].done) {
      p->ents[lo - 1].hi = p->ents[lo].hi;
      ents_remove(p, lo);
    }
  } else if (offset >= p->next) {
    return ALTAR_EINVAL; /* never seen */
  }
  /* else: finished before (in a finished stretch, in a gap, or below the commit point). */
  while (p->head < p->n && p->ents[p->head].done) p->head++;
  ents_shrink(p);
  return ALTAR_OK;
}

size_t altar__offset_tracker_in_flight(const altar__offset_tracker_t *t, const char *topic, int32_t partition) {
  const part_t *p = find(t, topic, partition);
  size_t k = 0;
  if (p)
    for (size_t i = p->head; i < p->n; i++) k += !p->ents[i].done;
  return k;
}

/* Appends ",a" or ",a-b" (relative to base) if it fits; false when full. */
static bool put_range(char *meta, size_t metasz, size_t *plen, bool *pfirst, int64_t base, int64_t lo, int64_t hi) {
  char tmp[48];
  int k = lo == hi ? snprintf(tmp, sizeof tmp, "%s%" PRId64, *pfirst ? "" : ",", lo - base)
                   : snprintf(tmp, sizeof tmp, "%s%" PRId64 "-%" PRId64, *pfirst ? "" : ",", lo - base, hi - base);
  if (k < 0 || *plen + (size_t)k + 1 > metasz) return false;
  memcpy(meta + *plen, tmp, (size_t)k + 1);
  *plen += (size_t)k;
  *pfirst = false;
  return true;
}

int altar__offset_tracker_commit_point(altar__offset_tracker_t *t, const char *topic, int32_t partition,
                                       int64_t *poffset, char *meta, size_t metasz, bool *pchanged) {
  part_t *p = find(t, topic, partition);
  if (!p) return ALTAR_ENOTFOUND;
  if (metasz > ALTAR_OFFSET_META_MAX + 1) metasz = ALTAR_OFFSET_META_MAX + 1;
  int64_t base = p->head < p->n ? p->ents[p->head].lo : p->next;
  /* Prior-life ranges entirely below the commit point are settled for good. */
  size_t drop = 0;
  while (drop < p->n_prior && base >= 0 && p->prior[drop].hi < base) drop++;
  if (drop) {
    memmove(p->prior, p->prior + drop, (p->n_prior - drop) * sizeof *p->prior);
    p->n_prior -= drop;
  }
  size_t len = 0;
  meta[0] = 0;
  /* Held: what this worker read and has not finished, and what an earlier
   * owner held that it has not read yet (carried on). */
  int64_t held_end = p->next;
  if (p->prior_held_end > held_end) held_end = p->prior_held_end;
  bool held = base >= 0 && held_end > base && (p->head < p->n || p->prior_held_end > base);
  size_t room = metasz;
  if (held) room = metasz > 24 ? metasz - 24 : 0; /* "/" and the count always fit */
  if (base >= 0 && room >= 8) {
    memcpy(meta, held ? "o2:" : "o1:", 4);
    len = 3;
    bool first = true, full = false;
    /* Merge this life's finished entries with prior-life ranges not yet re-seen. */
    size_t i = p->head, j = 0;
    int64_t run_lo = -1, run_hi = -1;
    for (;;) {
      int64_t lo, hi;
      while (i < p->n && !p->ents[i].done) i++;
      bool have_e = i < p->n, have_p = j < p->n_prior;
      if (!have_e && !have_p) break;
      if (have_e && (!have_p || p->ents[i].lo < p->prior[j].lo)) {
        lo = p->ents[i].lo;
        hi = p->ents[i].hi;
        i++;
      } else {
        lo = p->prior[j].lo;
        hi = p->prior[j].hi;
        j++;
      }
      if (lo < base) lo = base;
      if (hi < lo) continue;
      if (run_lo >= 0 && lo <= run_hi + 1) {
        if (hi > run_hi) run_hi = hi;
        continue;
      }
      if (run_lo >= 0 && !put_range(meta, room, &len, &first, base, run_lo, run_hi)) {
        full = true; /* the rest is left out: those jobs run again, none is lost */
        break;
      }
      run_lo = lo;
      run_hi = hi;
    }
    if (!full && run_lo >= 0) put_range(meta, room, &len, &first, base, run_lo, run_hi);
    if (held) snprintf(meta + len, metasz - len, "/%" PRId64, held_end - base);
    else if (first) meta[0] = 0; /* no ranges: empty metadata */
  }
  bool changed = base != p->last_offset || !p->last_meta || strcmp(p->last_meta, meta) != 0;
  if (changed) {
    char *m = strdup(meta);
    if (!m) return ALTAR_ENOMEM;
    free(p->last_meta);
    p->last_meta = m;
    p->last_offset = base;
  }
  *poffset = base;
  if (pchanged) *pchanged = changed;
  return ALTAR_OK;
}

void altar__offset_tracker_commit_failed(altar__offset_tracker_t *t, const char *topic, int32_t partition) {
  part_t *p = find(t, topic, partition);
  if (p) p->last_offset = -2; /* never returned: the next commit point counts as changed */
}

size_t altar__offset_tracker_footprint(const altar__offset_tracker_t *t) {
  size_t b = sizeof *t + t->cap * sizeof *t->parts;
  for (size_t i = 0; i < t->n; i++) {
    const part_t *p = &t->parts[i];
    b += p->cap * sizeof *p->ents + p->n_prior * sizeof *p->prior;
    b += (p->topic ? strlen(p->topic) + 1 : 0) + (p->last_meta ? strlen(p->last_meta) + 1 : 0);
  }
  return b;
}
