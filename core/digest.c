/* SHA-256 digests of files and bytes (OpenSSL EVP) and the digest checks
 * built on them. Record handling lives in verify_record.c. */
#include "altar/digest.h"
#include "digest_int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

bool altar_digest_is_valid(const char *digest) {
  if (!digest || strncmp(digest, ALTAR_DIGEST_PREFIX, 7) != 0) return false;
  const char *hex = digest + 7;
  for (size_t i = 0; i < ALTAR_DIGEST_HEX_LEN; i++) {
    char c = hex[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false; /* also stops at NUL */
  }
  return hex[ALTAR_DIGEST_HEX_LEN] == '\0';
}

int altar_digest_check(const char *field, const char *digest, altar_error_t *err) {
  if (altar_digest_is_valid(digest)) return ALTAR_OK;
  return altar_error_set(err, ALTAR_EINVAL, "%s: malformed (want sha256:<64 lowercase hex>)",
                         field && *field ? field : "digest");
}

static void to_hex(const unsigned char *md, char out[ALTAR_DIGEST_BUFSZ]) {
  static const char hexd[] = "0123456789abcdef";
  memcpy(out, ALTAR_DIGEST_PREFIX, 7);
  for (size_t i = 0; i < 32; i++) {
    out[7 + 2 * i] = hexd[md[i] >> 4];
    out[7 + 2 * i + 1] = hexd[md[i] & 15];
  }
  out[ALTAR_DIGEST_LEN] = '\0';
}

/* The algorithm fetched once: OpenSSL 3 fetches EVP_sha256() anew on every
 * digest, which cost more than hashing a 400-byte group event id input. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void) { sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL); }

static const EVP_MD *sha256(void) {
  pthread_once(&sha256_once, sha256_fetch);
  return sha256_md ? sha256_md : EVP_sha256();
}

int altar__sha256(const void *data, size_t len, unsigned char md[32]) {
  unsigned char buf[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(data, len, buf, &n, sha256(), NULL) || n != 32) return -1;
  memcpy(md, buf, 32);
  return 0;
}

int altar_sha256_bytes(const void *data, size_t len, char out[ALTAR_DIGEST_BUFSZ], altar_error_t *err) {
  unsigned char md[32];
  if (altar__sha256(data, len, md)) return altar_error_set(err, ALTAR_EIO, "sha256: OpenSSL digest failed");
  to_hex(md, out);
  return ALTAR_OK;
}

static int directory_error(const char *path, altar_error_t *err) {
  return altar_error_set(err, ALTAR_EINTEGRITY, "%s: is a directory, not a regular file (a digest covers one file)",
                         path);
}

int altar_digest_refuse_directory(const char *path, altar_error_t *err) {
  struct stat st;
  if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return directory_error(path, err);
  return ALTAR_OK;
}

/* Opens path for hashing: must be a regular file after following symlinks.
 * O_NONBLOCK keeps a FIFO swapped in after the stat from blocking the open. */
static int open_regular(const char *path, int *pfd, struct stat *pst, altar_error_t *err) {
  struct stat st;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return altar_error_set(err, ALTAR_EINTEGRITY, "%s: missing (no such file)", path);
    return altar_error_set(err, ALTAR_EIO, "%s: cannot stat: %s", path, strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return directory_error(path, err);
  if (!S_ISREG(st.st_mode)) return altar_error_set(err, ALTAR_EINTEGRITY, "%s: not a regular file", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return altar_error_set(err, ALTAR_EINTEGRITY, "%s: missing (no such file)", path);
    return altar_error_set(err, ALTAR_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  if (fstat(fd, pst) != 0 || !S_ISREG(pst->st_mode)) {
    close(fd);
    return altar_error_set(err, ALTAR_EINTEGRITY, "%s: not a regular file", path);
  }
  *pfd = fd;
  return ALTAR_OK;
}

static int hash_fd(int fd, const char *path, char out[ALTAR_DIGEST_BUFSZ], altar_error_t *err) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char *buf = malloc(CHUNK);
  int rc = ALTAR_OK;
  if (!ctx || !buf) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "sha256: out of memory");
    goto out;
  }
  if (!EVP_DigestInit_ex(ctx, sha256(), NULL)) {
    rc = altar_error_set(err, ALTAR_EIO, "sha256: OpenSSL init failed");
    goto out;
  }
  for (;;) {
    ssize_t n = read(fd, buf, CHUNK);
    if (n < 0) {
      if (errno == EINTR) continue;
      rc = altar_error_set(err, ALTAR_EIO, "%s: read failed: %s", path, strerror(errno));
      goto out;
    }
    if (n == 0) break;
    if (!EVP_DigestUpdate(ctx, buf, (size_t)n)) {
      rc = altar_error_set(err, ALTAR_EIO, "sha256: OpenSSL update failed");
      goto out;
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen != 32) {
    rc = altar_error_set(err, ALTAR_EIO, "sha256: OpenSSL final failed");
    goto out;
  }
  to_hex(md, out);
out:
  free(buf);
  EVP_MD_CTX_free(ctx);
  return rc;
}

/* Hashes path; *pst gets the metadata seen before hashing and *pstable says
 * whether it was unchanged afterwards (only then may a record be written). */
static int hash_path(const char *path, char out[ALTAR_DIGEST_BUFSZ], struct stat *pst, bool *pstable,
                     altar_error_t *err) {
  int fd = -1;
  int rc = open_regular(path, &fd, pst, err);
  if (rc) return rc;
  rc = hash_fd(fd, path, out, err);
  if (!rc && pstable) {
    struct stat after;
    *pstable = fstat(fd, &after) == 0 && after.st_size == pst->st_size && after.st_mtim.tv_sec == pst->st_mtim.tv_sec &&
               after.st_mtim.tv_nsec == pst->st_mtim.tv_nsec && after.st_ctim.tv_sec == pst->st_ctim.tv_sec &&
               after.st_ctim.tv_nsec == pst->st_ctim.tv_nsec && after.st_ino == pst->st_ino;
  }
  close(fd);
  return rc;
}

int altar_sha256_file(const char *path, char out[ALTAR_DIGEST_BUFSZ], altar_error_t *err) {
  if (!path || !*path) return altar_error_set(err, ALTAR_EINVAL, "path: must not be empty");
  struct stat st;
  return hash_path(path, out, &st, NULL, err);
}

int altar_verify_file_digest(const char *path, const char *digest, bool trust_record, bool record, bool *phashed,
                             altar_error_t *err) {
  if (phashed) *phashed = false;
  int rc = altar_digest_check("digest", digest, err);
  if (rc) return rc;
  if (!path || !*path) return altar_error_set(err, ALTAR_EINVAL, "path: must not be empty");
  if (trust_record) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && altar__record_matches(path, digest, &st)) return ALTAR_OK;
  }
  char got[ALTAR_DIGEST_BUFSZ];
  struct stat st;
  bool stable = false;
  rc = hash_path(path, got, &st, &stable, err);
  if (rc) return rc;
  if (phashed) *phashed = true;
  if (strcmp(got, digest) != 0)
    return altar_error_set(err, ALTAR_EINTEGRITY, "%s: digest mismatch: want %s, got %s", path, digest, got);
  /* A file that changed while it was hashed gets no record: the metadata
   * would not describe the bytes that matched. */
  if (record && stable) (void)altar__record_write(path, digest, &st, NULL);
  return ALTAR_OK;
}

int altar_verify_transfer_digest(const altar_transfer_t *transfer, const char *path, bool record, altar_error_t *err) {
  if (!transfer) return altar_error_set(err, ALTAR_EINVAL, "transfer: must not be NULL");
  if (!transfer->digest) return ALTAR_OK;
  int rc = altar_verify_file_digest(path, transfer->digest, false, record, NULL, err);
  if (rc) altar_error_prefix(err, "input %s", transfer->uri ? transfer->uri : "(no uri)");
  return rc;
}
