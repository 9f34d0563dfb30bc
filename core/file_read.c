/* One bounded whole-file reader for every place that loads a spec, a
 * config, a token or a key: the bound is checked while reading, so neither a
 * huge file nor an endless pipe can exhaust memory. */
#include "altar/file_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIRST_CHUNK 65536

char *altar_file_read(const char *path, const char *what, size_t max, size_t *plen, altar_error_t *err) {
  if (!what) what = path;
  bool is_stdin = !strcmp(path, "-");
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    altar_error_set(err, ALTAR_ENOTFOUND, "%s: cannot open: %s", what, strerror(errno));
    return NULL;
  }
  /* Read at most max + 1 bytes: the extra one tells "too big" from "exactly max". */
  size_t limit = max + 1, cap = limit < FIRST_CHUNK ? limit : FIRST_CHUNK, len = 0;
  char *buf = malloc(cap + 1);
  int rc = buf ? ALTAR_OK : ALTAR_ENOMEM;
  while (!rc) {
    if (len == cap) {
      if (cap == limit) break;
      size_t nc = cap > limit / 2 ? limit : cap * 2;
      char *nb = realloc(buf, nc + 1);
      if (!nb) {
        rc = ALTAR_ENOMEM;
        break;
      }
      buf = nb;
      cap = nc;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (!n) {
      if (ferror(f)) rc = ALTAR_EIO;
      break;
    }
  }
  struct stat st;
  long long size = !is_stdin && !fstat(fileno(f), &st) && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
  if (!is_stdin) fclose(f);
  if (!rc && len > max) rc = ALTAR_ETOOBIG;
  if (rc) {
    free(buf);
    if (rc == ALTAR_ETOOBIG && size >= 0)
      altar_error_set(err, rc, "%s: %lld bytes exceeds the bound of %zu bytes", what, size, max);
    else if (rc == ALTAR_ETOOBIG) altar_error_set(err, rc, "%s: more than the bound of %zu bytes", what, max);
    else if (rc == ALTAR_EIO) altar_error_set(err, rc, "%s: read error: %s", what, strerror(errno));
    else altar_error_set(err, rc, "%s: out of memory", what);
    return NULL;
  }
  buf[len] = '\0';
  if (plen) *plen = len;
  return buf;
}
