/* altar — "did you mean": the closest known name to a misspelled one, for
 * errors about keys a person typed (specs, altar.yaml, flags). */
#ifndef ALTAR_SUGGEST_H
#define ALTAR_SUGGEST_H

#include <stddef.h>

/* The entry of known (NULL-terminated) closest to word by edit distance
 * (insertions, deletions, substitutions and adjacent swaps), or NULL when
 * none is close enough to be a likely typo: at most 1 edit for words up to
 * 4 bytes, 2 up to 8, 3 beyond; a known name that word is a prefix of (or
 * the reverse) also counts. Returns a pointer into known. Thread-safe. */
const char *altar_suggest(const char *word, const char *const *known);

/* Appends " (did you mean \"X\"?)" to out when a suggestion exists, else
 * nothing; out is always NUL-terminated. */
void altar_suggest_hint(const char *word, const char *const *known, char *out, size_t size);

#endif
