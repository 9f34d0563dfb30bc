/* Cancels in commit metadata (cancel_meta.h). */
#include "worker/cancel_meta.h"

#include "altar/error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MARK ";c:"

static bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:=+-", c);
}

/* Writes s escaped at out (room bytes); the length, or 0 when it does not fit. */
static size_t escape(const char *s, char *out, size_t room) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (plain(*p)) {
      if (n + 1 > room) return 0;
      out[n++] = (char)*p;
    } else {
      if (n + 3 > room) return 0;
      out[n++] = '%';
      out[n++] = hex[*p >> 4];
      out[n++] = hex[*p & 15];
    }
  }
  return n;
}

void altar__cancel_meta_append(const altar__cancel_set_t *s, char *out, size_t size) {
  size_t len = strlen(out);
  if (!s->n || len + sizeof MARK >= size) return;
  size_t budget = size - 1 - len; /* bytes left before the NUL */
  if (budget > ALTAR_CANCEL_META_MAX) budget = ALTAR_CANCEL_META_MAX;
  char *p = out + len;
  size_t used = strlen(MARK), entries = 0;
  if (used >= budget) return;
  memcpy(p, MARK, used);
  char entry[1024];
  for (size_t i = s->n; i-- > 0;) {
    size_t n = escape(s->job_ids[i], entry, sizeof entry);
    if (!n) continue;
    if (s->group_keys[i]) {
      if (n + 1 >= sizeof entry) continue;
      entry[n] = '@';
      size_t g = escape(s->group_keys[i], entry + n + 1, sizeof entry - n - 1);
      if (!g) continue;
      n += 1 + g;
    }
    size_t need = n + (entries ? 1 : 0);
    if (used + need > budget) break; /* newest first: the older ones are left out */
    if (entries) p[used++] = ',';
    memcpy(p + used, entry, n);
    used += n;
    entries++;
  }
  if (!entries) {
    *p = 0;
    return;
  }
  p[used] = 0;
}

char *altar__cancel_meta_split(char *meta) {
  if (!meta) return NULL;
  char *m = strstr(meta, MARK);
  if (!m) return NULL;
  *m = 0;
  return m + strlen(MARK);
}

static int unhex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Decodes [s, e) into out (size bytes); false when malformed or empty. */
static bool unescape(const char *s, const char *e, char *out, size_t size) {
  size_t n = 0;
  while (s < e) {
    int c = (unsigned char)*s;
    if (c == '%') {
      if (e - s < 3 || unhex(s[1]) < 0 || unhex(s[2]) < 0) return false;
      c = unhex(s[1]) * 16 + unhex(s[2]);
      if (!c) return false;
      s += 3;
    } else if (plain((unsigned char)c)) {
      s++;
    } else {
      return false;
    }
    if (n + 1 >= size) return false;
    out[n++] = (char)c;
  }
  out[n] = 0;
  return n > 0;
}

int altar__cancel_meta_parse(const char *list, altar__cancel_set_t *s, size_t *padded, size_t *pbad) {
  size_t added = 0, bad = 0;
  /* Entries were written newest first; adding oldest first keeps the set's order. */
  const char *starts[ALTAR_CANCEL_META_MAX / 2 + 1];
  size_t n = 0;
  for (const char *p = list; p && *p && n < sizeof starts / sizeof *starts;) {
    starts[n++] = p;
    const char *c = strchr(p, ',');
    p = c ? c + 1 : NULL;
  }
  int rc = ALTAR_OK;
  for (size_t i = n; i-- > 0 && !rc;) {
    const char *b = starts[i], *e = strchr(b, ',');
    if (!e) e = b + strlen(b);
    const char *at = memchr(b, '@', (size_t)(e - b));
    char job[512], group[1024];
    if (!unescape(b, at ? at : e, job, sizeof job) || (at && !unescape(at + 1, e, group, sizeof group))) {
      bad++;
      continue;
    }
    bool fresh = false;
    rc = altar__cancel_set_add(s, job, at ? group : NULL, &fresh);
    added += fresh;
  }
  if (padded) *padded = added;
  if (pbad) *pbad = bad;
  return rc;
}
