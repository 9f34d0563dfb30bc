/* PathResolver: root + normalized logical path; escapes are errors. */
#include "altar/paths.h"
#include "altar/buf.h"

#include <stdlib.h>
#include <string.h>

/* Appends the segments of logical (len bytes) to out, each preceded by '/',
 * resolving "." and "..". `base` is out's length before the first segment:
 * ".." may not pop below it. */
static int normalize_into(altar_buf_t *out, size_t base, const char *logical, size_t len, altar_error_t *err) {
  size_t i = 0;
  while (i < len) {
    while (i < len && logical[i] == '/') i++;
    size_t start = i;
    while (i < len && logical[i] != '/') i++;
    size_t seg = i - start;
    if (seg == 0 || (seg == 1 && logical[start] == '.')) continue;
    if (seg == 2 && logical[start] == '.' && logical[start + 1] == '.') {
      if (out->len <= base)
        return altar_error_set(err, ALTAR_EPATH, "logical path '%.*s': '..' climbs out of the root",
                               (int)(len > 200 ? 200 : len), logical);
      /* Drop the last "/segment". */
      while (out->len > base && out->data[out->len - 1] != '/') out->len--;
      if (out->len > base) out->len--;
      continue;
    }
    if (altar_buf_append(out, "/", 1) || altar_buf_append(out, logical + start, seg))
      return altar_error_set(err, ALTAR_ENOMEM, "logical path: out of memory");
  }
  return ALTAR_OK;
}

int altar_logical_path_checkn(const char *logical, size_t len, altar_error_t *err) {
  if (!logical || len == 0) return altar_error_set(err, ALTAR_EPATH, "logical path: must not be empty");
  if (len > ALTAR_PATH_MAX)
    return altar_error_set(err, ALTAR_ETOOBIG, "logical path: %zu bytes, more than %u", len, ALTAR_PATH_MAX);
  if (memchr(logical, '\0', len)) return altar_error_set(err, ALTAR_EPATH, "logical path: contains a NUL byte");
  if (logical[0] == '/')
    return altar_error_set(err, ALTAR_EPATH, "logical path '%.*s': absolute (must be relative to the root)",
                           (int)(len > 200 ? 200 : len), logical);
  altar_buf_t b = {0};
  int rc = normalize_into(&b, 0, logical, len, err);
  altar_buf_free(&b);
  return rc;
}

int altar_logical_path_check(const char *logical, altar_error_t *err) {
  return altar_logical_path_checkn(logical, logical ? strlen(logical) : 0, err);
}

int altar_path_resolven(const char *root, const char *logical, size_t len, char **pout, altar_error_t *err) {
  *pout = NULL;
  if (!logical) return altar_error_set(err, ALTAR_EPATH, "logical path: must not be NULL");
  if (!root || !*root) {
    /* Identity: a URI like gs://b/x must keep its "//". */
    if (memchr(logical, '\0', len)) return altar_error_set(err, ALTAR_EPATH, "logical path: contains a NUL byte");
    char *s = malloc(len + 1);
    if (!s) return altar_error_set(err, ALTAR_ENOMEM, "logical path: out of memory");
    memcpy(s, logical, len);
    s[len] = '\0';
    *pout = s;
    return ALTAR_OK;
  }
  int rc = altar_logical_path_checkn(logical, len, err);
  if (rc) return rc;

  /* The root is configuration, not input: collapse its "." and repeated
   * slashes, but keep any ".." it has as written. */
  altar_buf_t out = {0};
  bool absolute = root[0] == '/';
  size_t rlen = strlen(root);
  for (size_t i = 0; i < rlen;) {
    while (i < rlen && root[i] == '/') i++;
    size_t start = i;
    while (i < rlen && root[i] != '/') i++;
    size_t seg = i - start;
    if (seg == 0 || (seg == 1 && root[start] == '.')) continue;
    if (altar_buf_append(&out, "/", 1) || altar_buf_append(&out, root + start, seg)) {
      altar_buf_free(&out);
      return altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
    }
  }
  size_t base = out.len;
  rc = normalize_into(&out, base, logical, len, err);
  if (rc) {
    altar_buf_free(&out);
    return rc;
  }
  /* Segments were written with a leading '/'; a relative root drops it. */
  const char *s = out.len ? (const char *)out.data : "";
  size_t n = out.len;
  if (!absolute && n) {
    s++;
    n--;
  }
  if (n == 0) {
    s = absolute ? "/" : ".";
    n = 1;
  }
  if (n > ALTAR_PATH_MAX) {
    altar_buf_free(&out);
    return altar_error_set(err, ALTAR_ETOOBIG, "resolved path: %zu bytes, more than %u", n, ALTAR_PATH_MAX);
  }
  char *res = malloc(n + 1);
  if (!res) {
    altar_buf_free(&out);
    return altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
  }
  memcpy(res, s, n);
  res[n] = '\0';
  altar_buf_free(&out);
  *pout = res;
  return ALTAR_OK;
}

int altar_path_resolve(const char *root, const char *logical, char **pout, altar_error_t *err) {
  return altar_path_resolven(root, logical, logical ? strlen(logical) : 0, pout, err);
}
