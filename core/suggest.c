/* Edit distance (optimal string alignment) for "did you mean" hints. */
#include "altar/suggest.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUGGEST_MAX_LEN 64 /* longer words are not typos of our key names */

static size_t min3(size_t a, size_t b, size_t c) {
  size_t m = a < b ? a : b;
  return m < c ? m : c;
}

static size_t distance(const char *a, size_t la, const char *b, size_t lb) {
  size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < d[i][j])
        d[i][j] = d[i - 2][j - 2] + 1;
    }
  }
  return d[la][lb];
}

const char *altar_suggest(const char *word, const char *const *known) {
  if (!word || !known) return NULL;
  size_t lw = strlen(word);
  if (lw == 0 || lw > SUGGEST_MAX_LEN) return NULL;
  size_t allowed = lw <= 4 ? 1 : lw <= 8 ? 2 : 3;
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; known[i]; i++) {
    size_t lk = strlen(known[i]);
    if (lk == 0 || lk > SUGGEST_MAX_LEN) continue;
    size_t d = distance(word, lw, known[i], lk);
    /* "output" for "outputs", "time" for "timeout_s": a prefix is a likely slip. */
    size_t shorter = lw < lk ? lw : lk;
    bool prefix = shorter >= 3 && !strncmp(word, known[i], shorter);
    if ((d <= allowed || prefix) && d < best_d) {
      best = known[i];
      best_d = d;
    }
  }
  return best;
}

void altar_suggest_hint(const char *word, const char *const *known, char *out, size_t size) {
  if (!size) return;
  out[0] = 0;
  const char *s = altar_suggest(word, known);
  if (s) snprintf(out, size, " (did you mean \"%s\"?)", s);
}
