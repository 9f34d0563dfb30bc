/* Verification records: a small file beside a verified file saying its bytes
 * matched a digest while the file had a given size, mtime, ctime and inode.
 *
 * Location: for path "<dir>/<name>" the record is "<dir>/.<name>.altar-verified";
 * for a bare "<name>" it is ".<name>.altar-verified" (same directory).
 * Content: one line, fields separated by one space, ended by "\n":
 *
 *   altar-verified/1 sha256:<64 hex> size=<bytes> mtime_ns=<ns> ctime_ns=<ns> ino=<inode>
 *
 * Times are nanoseconds since the epoch (seconds * 10^9 + nanoseconds) as
 * plain decimal integers without leading zeros; symlinks are followed when
 * taking the metadata. A record is current only when its first line equals
 * the line built from the file's metadata now, byte for byte. The sh verifier
 * (verifier_program.c) builds the same line, so each accepts the other's
 * records. docs/digests.md documents the same format. */
#include "altar/digest.h"
#include "digest_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *altar_verification_record_path(const char *path) {
  if (!path || !*path) return NULL;
  const char *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0; /* keeps the '/' */
  const char *name = path + dirlen;
  size_t n = dirlen + 1 + strlen(name) + strlen(ALTAR__RECORD_SUFFIX) + 1;
  char *rec = malloc(n);
  if (!rec) return NULL;
  snprintf(rec, n, "%.*s.%s%s", (int)dirlen, path, name, ALTAR__RECORD_SUFFIX);
  return rec;
}

static long long ns_of(const struct timespec *ts) {
  return (long long)ts->tv_sec * 1000000000LL + (long long)ts->tv_nsec;
}

int altar__record_line(const char *digest, const struct stat *st, char *out, size_t outsz) {
  int n = snprintf(out, outsz, "%s %s size=%lld mtime_ns=%lld ctime_ns=%lld ino=%" PRIuMAX, ALTAR__RECORD_TAG, digest,
                   (long long)st->st_size, ns_of(&st->st_mtim), ns_of(&st->st_ctim), (uintmax_t)st->st_ino);
  if (n < 0 || (size_t)n >= outsz) return -1;
  return n;
}

bool altar__record_matches(const char *path, const char *digest, const struct stat *st) {
  char want[ALTAR__RECORD_MAX];
  int wlen = altar__record_line(digest, st, want, sizeof want);
  if (wlen < 0) return false;
  char *rec = altar_verification_record_path(path);
  if (!rec) return false;
  int fd = open(rec, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  free(rec);
  if (fd < 0) return false;
  struct stat rst;
  char have[ALTAR__RECORD_MAX];
  size_t len = 0;
  bool ok = fstat(fd, &rst) == 0 && S_ISREG(rst.st_mode);
  while (ok && len < sizeof have) {
    ssize_t n = read(fd, have + len, sizeof have - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  if (!ok) return false;
  /* Only the first line counts, as with sh's `read`. */
  const char *nl = memchr(have, '\n', len);
  size_t first = nl ? (size_t)(nl - have) : len;
  return first == (size_t)wlen && memcmp(have, want, first) == 0;
}

int altar__record_write(const char *path, const char *digest, const struct stat *st, altar_error_t *err) {
  char line[ALTAR__RECORD_MAX];
  int len = altar__record_line(digest, st, line, sizeof line - 1);
  if (len < 0) return altar_error_set(err, ALTAR_EINVAL, "%s: record line too long", path);
  line[len++] = '\n';
  char *rec = altar_verification_record_path(path);
  if (!rec) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", path);
  static unsigned counter; /* distinct temp names per call; races only make names collide, and O_EXCL catches that */
  size_t tn = strlen(rec) + 48;
  char *tmp = malloc(tn);
  int rc = ALTAR_OK;
  if (!tmp) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", path);
    goto out;
  }
  snprintf(tmp, tn, "%s.tmp.%ld.%u", rec, (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    rc = altar_error_set(err, ALTAR_EIO, "%s: cannot create record: %s", tmp, strerror(errno));
    goto out;
  }
  ssize_t w = write(fd, line, (size_t)len);
  int werr = errno;
  if (close(fd) != 0 && w == len) w = -1;
  if (w != len) {
    unlink(tmp);
    rc = altar_error_set(err, ALTAR_EIO, "%s: cannot write record: %s", tmp, strerror(werr));
    goto out;
  }
  if (rename(tmp, rec) != 0) {
    rc = altar_error_set(err, ALTAR_EIO, "%s: cannot install record: %s", rec, strerror(errno));
    unlink(tmp);
  }
out:
  free(tmp);
  free(rec);
  return rc;
}

bool altar_has_verification_record(const char *path, const char *digest) {
  if (!path || !*path || !altar_digest_is_valid(digest)) return false;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return altar__record_matches(path, digest, &st);
}
