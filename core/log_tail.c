/* Failure evidence from a task's output: bounded, valid UTF-8, redacted. */
#include "altar/log_tail.h"

#include <ctype.h>
#include <strings.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* word: upper case. The first letter is compared before the call: this
 * runs for every variable of the environment at each finished task. */
static bool has_word(const char *name, size_t n, const char *word) {
  size_t w = strlen(word);
  for (size_t i = 0; i + w <= n; i++)
    if (toupper((unsigned char)name[i]) == word[0] && !strncasecmp(name + i, word, w)) return true;
  return false;
}

static bool ends_with(const char *name, size_t n, const char *suffix) {
  size_t w = strlen(suffix);
  return n >= w && !strncasecmp(name + n - w, suffix, w);
}

bool altar_env_name_secret(const char *name, size_t n) {
  static const char *const words[] = {"SECRET",  "TOKEN", "PASSWORD", "PASSWD",     "CREDENTIAL",
                                      "PRIVATE", "AUTH",  "API_KEY",  "ACCESS_KEY", NULL};
  for (size_t i = 0; words[i]; i++)
    if (has_word(name, n, words[i])) return true;
  return ends_with(name, n, "_KEY") || ends_with(name, n, "_PASS") || ends_with(name, n, "_PWD");
}

/* data with every secret value replaced; *plen in and out. */
static char *redact(const char *data, size_t *plen, const char *const *envp) {
  size_t len = *plen;
  char *cur = malloc(len + 1);
  if (!cur) return NULL;
  if (len) memcpy(cur, data, len);
  cur[len] = '\0';
  for (size_t e = 0; envp && envp[e]; e++) {
    const char *eq = strchr(envp[e], '=');
    if (!eq || !altar_env_name_secret(envp[e], (size_t)(eq - envp[e]))) continue;
    const char *val = eq + 1;
    size_t vn = strlen(val);
    if (vn < ALTAR_REDACT_MIN || !memmem(cur, len, val, vn)) continue;
    size_t rn = strlen(ALTAR_REDACTED), hits = 0;
    for (const char *q = cur; (q = memmem(q, len - (size_t)(q - cur), val, vn)); q += vn) hits++;
    size_t nlen = len - hits * vn + hits * rn;
    char *next = malloc(nlen + 1);
    if (!next) {
      free(cur);
      return NULL;
    }
    size_t at = 0;
    const char *from = cur;
    for (const char *q; (q = memmem(from, len - (size_t)(from - cur), val, vn)); from = q + vn) {
      memcpy(next + at, from, (size_t)(q - from));
      at += (size_t)(q - from);
      memcpy(next + at, ALTAR_REDACTED, rn);
      at += rn;
    }
    memcpy(next + at, from, len - (size_t)(from - cur));
    next[nlen] = '\0';
    free(cur);
    cur = next;
    len = nlen;
  }
  *plen = len;
  return cur;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t k;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) k = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) k = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) k = 4, cp = c & 0x07;
  else return 0;
  if (n < k) return 0;
  for (size_t i = 1; i < k; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return k;
}

/* In place: invalid bytes to '?', control characters to ' '. Length kept. */
static void clean(char *s, size_t n) {
  unsigned char *u = (unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq(u + i, n - i);
    if (!k) {
      u[i++] = '?';
    } else if (k == 1) {
      if (u[i] == '\0') u[i] = '?';
      else if ((u[i] < 0x20 && u[i] != '\n' && u[i] != '\t') || u[i] == 0x7F) u[i] = ' ';
      i++;
    } else {
      i += k;
    }
  }
}

char *altar_log_tail_text(const char *data, size_t len, size_t max, const char *const *envp, bool *pcut) {
  if (pcut) *pcut = false;
  size_t n = data ? len : 0;
  char *text = redact(data ? data : "", &n, envp);
  if (!text) return NULL;
  clean(text, n);
  if (n <= max) return text;
  size_t start = n - max;
  while (start < n && ((unsigned char)text[start] & 0xC0) == 0x80) start++;
  memmove(text, text + start, n - start);
  text[n - start] = '\0';
  if (pcut) *pcut = true;
  return text;
}

char *altar_redact_env_n(const char *data, size_t *plen, const char *const *envp) {
  return redact(data ? data : "", plen, envp);
}

char *altar_redact_env(const char *s, const char *const *envp) {
  size_t n = s ? strlen(s) : 0;
  return redact(s ? s : "", &n, envp);
}

/* Appends the section for one stream into out (room bytes free); returns bytes written. */
static size_t section(char *out, size_t room, const char *name, const char *data, size_t len, const char *const *envp) {
  char head[80];
  /* The header names the bytes shown, which the cut below decides, so it is
   * sized for the longest number first. */
  int hn = snprintf(head, sizeof head, "\n--- %s (last %zu bytes) ---\n", name, (size_t)999999);
  if (hn < 0 || (size_t)hn + 8 > room) return 0;
  bool cut = false;
  char *text = altar_log_tail_text(data, len, room - (size_t)hn - 1, envp, &cut);
  if (!text) return 0;
  size_t tn = strlen(text);
  hn = cut ? snprintf(head, sizeof head, "\n--- %s (last %zu bytes) ---\n", name, tn)
           : snprintf(head, sizeof head, "\n--- %s ---\n", name);
  size_t w = (size_t)hn + tn < room ? (size_t)hn + tn : 0;
  if (w) {
    memcpy(out, head, (size_t)hn);
    memcpy(out + hn, text, tn);
  }
  free(text);
  return w;
}

char *altar_detail_with_output(const char *base, const char *err, size_t err_len, const char *out, size_t out_len,
                               const char *const *envp, size_t bound) {
  if (bound < 64) bound = 64;
  char *d = malloc(bound + 1);
  if (!d) return NULL;
  size_t at = 0;
  if (base) {
    char *b = altar_log_tail_text(base, strlen(base), bound / 4, envp, NULL);
    if (!b) {
      free(d);
      return NULL;
    }
    at = strlen(b);
    memcpy(d, b, at);
    free(b);
  }
  bool has_err = err && err_len, has_out = out && out_len;
  size_t room = bound - at;
  if (has_err) {
    size_t share = has_out ? room * 3 / 4 : room;
    at += section(d + at, share, "stderr", err, err_len, envp);
  }
  if (has_out) at += section(d + at, bound - at, "stdout", out, out_len, envp);
  /* A detail that is only a section starts without the blank line. */
  if (!base && at && d[0] == '\n') {
    memmove(d, d + 1, at - 1);
    at--;
  }
  d[at] = '\0';
  return d;
}
