/* One pass with a read and a write cursor (the write one never passes the
 * read one, so the text shrinks in place). Only what JSON needs to find a
 * member's end is tracked: strings with their escapes, and nesting. */
#include "k8s_json_trim.h"

#include <stdbool.h>
#include <string.h>

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The index just past the string opening at i (text[i] == '"'), or len
 * when it never closes. */
static size_t string_end(const char *t, size_t len, size_t i) {
  for (i++; i < len; i++) {
    if (t[i] == '\\') i++;
    else if (t[i] == '"') return i + 1;
  }
  return len;
}

/* The index just past the value starting at i, or len when it never ends. */
static size_t value_end(const char *t, size_t len, size_t i) {
  if (i >= len) return len;
  if (t[i] == '"') return string_end(t, len, i);
  if (t[i] != '{' && t[i] != '[') { /* a number, true, false, null */
    while (i < len && t[i] != ',' && t[i] != '}' && t[i] != ']' && !is_ws(t[i])) i++;
    return i;
  }
  size_t depth = 0;
  while (i < len) {
    char c = t[i];
    if (c == '"') {
      i = string_end(t, len, i);
      continue;
    }
    if (c == '{' || c == '[') depth++;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    i++;
  }
  return len;
}

size_t altar__k8s_json_drop_member(char *t, size_t len, const char *key) {
  size_t klen = strlen(key);
  size_t r = 0, w = 0;
  size_t last_sig = (size_t)-1; /* write index of the last non-blank byte written */
  while (r < len) {
    char c = t[r];
    if (c != '"') {
      if (!is_ws(c)) last_sig = w;
      t[w++] = t[r++];
      continue;
    }
    size_t end = string_end(t, len, r);
    if (end == len) break; /* an unterminated string: leave the rest alone */
    bool named = end - r - 2 == klen && !memcmp(t + r + 1, key, klen);
    size_t colon = end;
    while (colon < len && is_ws(t[colon])) colon++;
    if (named && colon < len && t[colon] == ':') {
      size_t v = colon + 1;
      while (v < len && is_ws(t[v])) v++;
      size_t vend = value_end(t, len, v);
      if (vend == len) break; /* the value never ends */
      if (last_sig != (size_t)-1 && t[last_sig] == ',') {
        w = last_sig; /* "…, key: value" loses the comma before it */
      } else {
        while (vend < len && is_ws(t[vend])) vend++;
        if (vend < len && t[vend] == ',') vend++; /* "{key: value, …" the one after */
      }
      r = vend;
      last_sig = (size_t)-1;
      for (size_t k = w; k-- > 0;)
        if (!is_ws(t[k])) {
          last_sig = k;
          break;
        }
      continue;
    }
    memmove(t + w, t + r, end - r);
    w += end - r;
    last_sig = w - 1;
    r = end;
  }
  if (r < len) { /* what could not be followed stays as it was */
    memmove(t + w, t + r, len - r);
    w += len - r;
  }
  return w;
}
