/* Digests and verification records: the C API. The sh verifier program and
 * its agreement with this code are tested in test_verifier_program.c. */
#include "altar/digest.h"
#include "testutil.h"
#include "core/unconst.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir; /* per-suite temp dir */

static const char HELLO_HEX[] = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
static const char HELLO_DIGEST[] =
    "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"; /* "hello\n" */
static const char OTHER_DIGEST[] = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

static char *pathf(const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) abort(); /* also called from setup, outside any test */
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int setup(void) {
  dir = altar_test_tmpdir("digest");
  return 0;
}

static int teardown(void) {
  altar_test_rmtree(dir);
  free(dir);
  return 0;
}

static void write_hello(const char *p) { altar_test_write_file(p, "hello\n", 6); }

/* ---- plain hashing --------------------------------------------------------------- */

static void test_digest_format(void) {
  CU_ASSERT(altar_digest_is_valid(HELLO_DIGEST));
  CU_ASSERT(!altar_digest_is_valid(NULL));
  CU_ASSERT(!altar_digest_is_valid(""));
  CU_ASSERT(!altar_digest_is_valid(HELLO_HEX)); /* no prefix */
  CU_ASSERT(!altar_digest_is_valid("SHA256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"));
  CU_ASSERT(!altar_digest_is_valid("sha256:5891B5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"));
  CU_ASSERT(!altar_digest_is_valid("sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be0"));
  CU_ASSERT(!altar_digest_is_valid("sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be033"));
  CU_ASSERT(!altar_digest_is_valid("sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be0g"));
  CU_ASSERT(!altar_digest_is_valid("sha512:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"));
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_digest_check("inputs[1].digest", "sha256:xyz", &err), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(err.msg, "inputs[1].digest: malformed (want sha256:<64 lowercase hex>)");
}

static void test_sha256_vectors(void) {
  char d[ALTAR_DIGEST_BUFSZ];
  CU_ASSERT_EQUAL(altar_sha256_bytes("abc", 3, d, NULL), 0);
  CU_ASSERT_STRING_EQUAL(d, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  char *e = pathf("empty");
  altar_test_write_file(e, "", 0);
  CU_ASSERT_EQUAL(altar_sha256_file(e, d, NULL), 0);
  CU_ASSERT_STRING_EQUAL(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  /* Larger than one read chunk, so streaming crosses chunk boundaries. */
  size_t big = 200000 + 7;
  char *data = malloc(big);
  for (size_t i = 0; i < big; i++) data[i] = (char)(i * 31 + 7);
  char *b = pathf("big");
  altar_test_write_file(b, data, big);
  char want[ALTAR_DIGEST_BUFSZ];
  altar_sha256_bytes(data, big, want, NULL);
  CU_ASSERT_EQUAL(altar_sha256_file(b, d, NULL), 0);
  CU_ASSERT_STRING_EQUAL(d, want);
  free(data);
  free(b);
  free(e);
}

static void test_sha256_not_a_file(void) {
  char d[ALTAR_DIGEST_BUFSZ];
  altar_error_t err = {0};
  char *m = pathf("nope");
  CU_ASSERT_EQUAL(altar_sha256_file(m, d, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing"));
  CU_ASSERT_EQUAL(altar_sha256_file(dir, d, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "directory"));
  free(m);
}

/* A directory fails as a mismatch does, with the same words as the hash;
 * a file, a missing path and a symlink to a file pass. */
static void test_refuse_directory(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_digest_refuse_directory(dir, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is a directory"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, dir));
  char *f = pathf("refuse-file"), *m = pathf("refuse-missing"), *l = pathf("refuse-link");
  write_hello(f);
  CU_ASSERT_EQUAL(altar_digest_refuse_directory(f, &err), 0);
  CU_ASSERT_EQUAL(altar_digest_refuse_directory(m, &err), 0);
  CU_ASSERT_EQUAL(symlink(dir, l), 0); /* followed: a link to a directory is one */
  CU_ASSERT_EQUAL(altar_digest_refuse_directory(l, &err), ALTAR_EINTEGRITY);
  free(f);
  free(m);
  free(l);
}

/* ---- C verifier ---------------------------------------------------------------------- */

static void test_verify_match_and_record(void) {
  char *p = pathf("match");
  write_hello(p);
  bool hashed = false;
  altar_error_t err = {0};
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, &err), 0);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_TRUE(altar_has_verification_record(p, HELLO_DIGEST));
  CU_ASSERT_FALSE(altar_has_verification_record(p, OTHER_DIGEST)); /* names another digest */
  CU_ASSERT_FALSE(altar_has_verification_record(p, "sha256:bad"));
  /* Second check: the record accepts it without hashing. */
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, &err), 0);
  CU_ASSERT_FALSE(hashed);
  /* Not trusting records: hashes again. */
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, false, true, &hashed, &err), 0);
  CU_ASSERT_TRUE(hashed);
  /* record=false writes none. */
  char *q = pathf("norecord");
  write_hello(q);
  CU_ASSERT_EQUAL(altar_verify_file_digest(q, HELLO_DIGEST, true, false, &hashed, &err), 0);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_FALSE(altar_has_verification_record(q, HELLO_DIGEST));
  char *rec = altar_verification_record_path(q);
  CU_ASSERT_EQUAL(access(rec, F_OK), -1);
  free(rec);
  free(q);
  free(p);
}

static void test_record_path_and_format(void) {
  char *r = altar_verification_record_path("/a/b/model.tar");
  CU_ASSERT_STRING_EQUAL(r, "/a/b/.model.tar.altar-verified");
  free(r);
  r = altar_verification_record_path("x");
  CU_ASSERT_STRING_EQUAL(r, ".x.altar-verified");
  free(r);
  r = altar_verification_record_path("/x");
  CU_ASSERT_STRING_EQUAL(r, "/.x.altar-verified");
  free(r);
  CU_ASSERT_PTR_NULL(altar_verification_record_path(""));

  char *p = pathf("fmt");
  write_hello(p);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, false, true, NULL, NULL), 0);
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(p, &st), 0);
  char want[512];
  snprintf(want, sizeof want, "altar-verified/1 %s size=6 mtime_ns=%lld ctime_ns=%lld ino=%llu\n", HELLO_DIGEST,
           (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
           (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec, (unsigned long long)st.st_ino);
  char *rec = altar_verification_record_path(p);
  char *have = altar_test_read_file(rec, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(have);
  CU_ASSERT_STRING_EQUAL(have, want);
  free(have);
  /* A truncated or garbled record is not current. */
  altar_test_write_file(rec, want, strlen(want) - 5);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  altar_test_write_file(rec, "garbage\n", 8);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  free(rec);
  free(p);
}

static void test_verify_failures(void) {
  altar_error_t err = {0};
  bool hashed = true;
  char *p = pathf("mis");
  write_hello(p);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, OTHER_DIGEST, true, true, &hashed, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "mismatch"));
  CU_ASSERT_FALSE(altar_has_verification_record(p, OTHER_DIGEST));

  char *m = pathf("missing");
  CU_ASSERT_EQUAL(altar_verify_file_digest(m, HELLO_DIGEST, true, true, &hashed, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_FALSE(hashed);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing"));

  CU_ASSERT_EQUAL(altar_verify_file_digest(dir, HELLO_DIGEST, true, true, &hashed, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "directory"));

  /* A malformed digest is a usage error, not a mismatch, and the file is not read. */
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_HEX, true, true, &hashed, &err), ALTAR_EINVAL);
  CU_ASSERT_FALSE(hashed);
  CU_ASSERT_EQUAL(altar_verify_file_digest(m, "sha256:ABC", true, true, &hashed, &err), ALTAR_EINVAL);
  free(m);
  free(p);
}

static void test_stale_record(void) {
  char *p = pathf("stale");
  write_hello(p);
  bool hashed;
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, NULL), 0);
  CU_ASSERT_TRUE(altar_has_verification_record(p, HELLO_DIGEST));
  /* A new mtime (and so ctime) makes the record stale even with the same bytes. */
  struct timespec ts[2] = {{1000000, 5}, {1000000, 5}};
  CU_ASSERT_EQUAL(utimensat(AT_FDCWD, p, ts, 0), 0);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, NULL), 0);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_TRUE(altar_has_verification_record(p, HELLO_DIGEST));
  /* Replacing the file (new inode) with other bytes: stale, and a mismatch. */
  char *tmp = pathf("stale.new");
  altar_test_write_file(tmp, "HELLO\n", 6);
  CU_ASSERT_EQUAL(rename(tmp, p), 0);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, NULL), ALTAR_EINTEGRITY);
  CU_ASSERT_TRUE(hashed);
  free(tmp);
  free(p);
}

/* Builds a current record for a digest the file does NOT have. Trusting
 * records then accepts the file; anything that always hashes rejects it. */
static void forge_record(const char *p, const char *digest) {
  struct stat st;
  CU_ASSERT_EQUAL_FATAL(stat(p, &st), 0);
  char line[512];
  snprintf(line, sizeof line, "altar-verified/1 %s size=%lld mtime_ns=%lld ctime_ns=%lld ino=%llu\n", digest,
           (long long)st.st_size, (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
           (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec, (unsigned long long)st.st_ino);
  char *rec = altar_verification_record_path(p);
  altar_test_write_file(rec, line, strlen(line));
  free(rec);
}

static void test_transfer_digest(void) {
  char *p = pathf("xfer");
  write_hello(p);
  altar_error_t err = {0};
  altar_transfer_t t = {.uri = "file:///src/xfer", .logical_path = "xfer", .digest = NULL};
  char *m = pathf("absent");
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, m, true, &err), 0); /* no digest: not even looked at */
  free(m);

  t.digest = ALTAR__UNCONST(HELLO_DIGEST);
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, p, false, &err), 0);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, p, true, &err), 0);
  CU_ASSERT_TRUE(altar_has_verification_record(p, HELLO_DIGEST));

  /* A forged record fools a trusting check but never the transfer check. */
  forge_record(p, OTHER_DIGEST);
  bool hashed = true;
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, OTHER_DIGEST, true, false, &hashed, &err), 0);
  CU_ASSERT_FALSE(hashed);
  t.digest = ALTAR__UNCONST(OTHER_DIGEST);
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, p, true, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "file:///src/xfer"));
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, dir, false, &err), ALTAR_EINTEGRITY);
  t.digest = "sha256:nothex";
  CU_ASSERT_EQUAL(altar_verify_transfer_digest(&t, p, false, &err), ALTAR_EINVAL);
  free(p);
}

static void test_unwritable_record(void) {
  /* The record's name is taken by a directory, so it cannot be installed:
   * the check still passes (test_verifier_program.c checks sh). */
  char *p = pathf("unrec");
  write_hello(p);
  char *rec = altar_verification_record_path(p);
  CU_ASSERT_EQUAL_FATAL(mkdir(rec, 0755), 0);
  bool hashed;
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, NULL), 0);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_FALSE(altar_has_verification_record(p, HELLO_DIGEST));
  altar_test_rmtree(rec);
  free(rec);
  free(p);
}

static void add(void) {
  ALTAR_SUITE("digest", setup, teardown);
  ALTAR_TEST(test_digest_format);
  ALTAR_TEST(test_sha256_vectors);
  ALTAR_TEST(test_sha256_not_a_file);
  ALTAR_TEST(test_refuse_directory);
  ALTAR_TEST(test_verify_match_and_record);
  ALTAR_TEST(test_record_path_and_format);
  ALTAR_TEST(test_verify_failures);
  ALTAR_TEST(test_stale_record);
  ALTAR_TEST(test_transfer_digest);
  ALTAR_TEST(test_unwritable_record);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
