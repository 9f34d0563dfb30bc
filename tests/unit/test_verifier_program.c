/* The POSIX sh verifier program: run through posix_spawn under dash and under
 * busybox sh (with only busybox applets on PATH), and checked to agree with
 * altar_verify_file_digest on every case, records included. */
#include "altar/digest.h"
#include "testutil.h"
#include "core/unconst.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *dir;   /* per-suite temp dir */
static char *bbdir; /* busybox-only PATH for the sh program */
static const char *busybox;

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
  dir = altar_test_tmpdir("verifier");
  static const char *cands[] = {"/bin/busybox", "/usr/bin/busybox"};
  for (size_t i = 0; i < 2 && !busybox; i++)
    if (access(cands[i], X_OK) == 0) busybox = cands[i];
  bbdir = pathf("bb");
  mkdir(bbdir, 0755);
  if (busybox) {
    /* Only busybox applets on PATH: proves the program needs nothing else. */
    static const char *applets[] = {"sh", "stat", "sha256sum", "mv", "rm"};
    for (size_t i = 0; i < sizeof applets / sizeof applets[0]; i++) {
      char l[512];
      snprintf(l, sizeof l, "%s/%s", bbdir, applets[i]);
      if (symlink(busybox, l) != 0) return -1;
    }
  }
  return 0;
}

static int teardown(void) {
  altar_test_rmtree(dir);
  free(dir);
  free(bbdir);
  return 0;
}

/* ---- the sh program, run through posix_spawn ---------------------------------- */

typedef enum { SH_DASH, SH_BUSYBOX } shell_t;
static const char *shell_name(shell_t s) { return s == SH_DASH ? "/bin/sh (dash)" : "busybox sh"; }

/* Runs the verifier over lines; returns the exit status (-1 on spawn
 * failure) and the output in out. */
static int run_program(shell_t shell, bool trust, const char **lines, size_t n, char *out, size_t outsz) {
  char shpath[512];
  const char *path_env;
  char pathbuf[600];
  if (shell == SH_DASH) {
    snprintf(shpath, sizeof shpath, "/bin/sh");
    path_env = "PATH=/usr/bin:/bin";
  } else {
    snprintf(shpath, sizeof shpath, "%s/sh", bbdir);
    snprintf(pathbuf, sizeof pathbuf, "PATH=%s", bbdir);
    path_env = pathbuf;
  }
  const char *argv[16];
  size_t a = 0;
  argv[a++] = shpath;
  argv[a++] = "-c";
  argv[a++] = altar_digest_verifier_program(trust);
  argv[a++] = "verify";
  for (size_t i = 0; i < n && a < 15; i++) argv[a++] = lines[i];
  argv[a] = NULL;
  char *envp[] = {ALTAR__UNCONST(path_env), NULL};
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, shpath, &fa, NULL, ALTAR__UNCONST(argv), envp);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  size_t len = 0;
  ssize_t r;
  while ((r = read(fds[0], out + len, outsz - 1 - len)) > 0) len += (size_t)r;
  out[len] = '\0';
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One line for the sh program: "<hex>  <path>" from a "sha256:<hex>" digest. */
static void sh_line(char *buf, size_t n, const char *digest, const char *path) {
  snprintf(buf, n, "%s  %s", strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest, path);
}

static void write_hello(const char *p) { altar_test_write_file(p, "hello\n", 6); }

static void rm_record(const char *p) {
  char *rec = altar_verification_record_path(p);
  unlink(rec);
  free(rec);
}

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

static void test_unwritable_record(void) {
  /* The record's name is taken by a directory, so it cannot be installed:
   * the check still passes, in C and in sh. */
  char *p = pathf("unrec");
  write_hello(p);
  char *rec = altar_verification_record_path(p);
  CU_ASSERT_EQUAL_FATAL(mkdir(rec, 0755), 0);
  bool hashed;
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, HELLO_DIGEST, true, true, &hashed, NULL), 0);
  CU_ASSERT_TRUE(hashed);
  char line[600], out[4096];
  sh_line(line, sizeof line, HELLO_DIGEST, p);
  const char *lines[] = {line};
  CU_ASSERT_EQUAL(run_program(SH_DASH, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "OK "));
  if (busybox) CU_ASSERT_EQUAL(run_program(SH_BUSYBOX, true, lines, 1, out, sizeof out), 0);
  altar_test_rmtree(rec);
  free(rec);
  free(p);
}

/* ---- agreement between C and sh --------------------------------------------------- */

typedef enum { KIND_MATCH, KIND_MISMATCH, KIND_MISSING, KIND_DIR, KIND_SYMLINK, KIND_MALFORMED } kind_t;

/* Prepares one case's path; returns the digest to check it against. */
static const char *prepare(kind_t k, const char *tag, char **ppath) {
  char name[64];
  snprintf(name, sizeof name, "agree-%s-%d", tag, (int)k);
  char *p = pathf(name);
  switch (k) {
  case KIND_MATCH: write_hello(p); break;
  case KIND_MISMATCH: altar_test_write_file(p, "other\n", 6); break;
  case KIND_MISSING: unlink(p); break;
  case KIND_DIR: mkdir(p, 0755); break;
  case KIND_SYMLINK: {
    char target[128];
    snprintf(target, sizeof target, "%s.target", name);
    char *tp = pathf(target);
    write_hello(tp);
    unlink(p);
    CU_ASSERT_EQUAL(symlink(target, p), 0); /* relative link, followed */
    free(tp);
    break;
  }
  case KIND_MALFORMED: write_hello(p); break;
  }
  *ppath = p;
  return k == KIND_MALFORMED ? "sha256:5891B5B522D5DF086D0FF0B110FBD9D21BB4FC7163AF34D08286A2E846F6BE03" : HELLO_DIGEST;
}

static void agree_on(shell_t shell) {
  static const kind_t kinds[] = {KIND_MATCH, KIND_MISMATCH, KIND_MISSING, KIND_DIR, KIND_SYMLINK, KIND_MALFORMED};
  const char *tag = shell == SH_DASH ? "dash" : "bb";
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    for (int trust = 0; trust <= 1; trust++) {
      char *p;
      const char *digest = prepare(kinds[i], tag, &p);
      rm_record(p);
      altar_error_t err = {0};
      int crc = altar_verify_file_digest(p, digest, trust, false, NULL, &err);
      char line[600], out[4096];
      sh_line(line, sizeof line, digest, p);
      const char *lines[] = {line};
      int src = run_program(shell, trust, lines, 1, out, sizeof out);
      bool c_ok = crc == 0, sh_ok = src == 0 && strncmp(out, "OK ", 3) == 0;
      if (c_ok != sh_ok || src < 0)
        fprintf(stderr, "%s case %d trust %d: C rc %d (%s), sh rc %d: %s\n", shell_name(shell), (int)kinds[i], trust,
                crc, err.msg, src, out);
      CU_ASSERT_EQUAL(c_ok, sh_ok);
      CU_ASSERT_EQUAL(c_ok, kinds[i] == KIND_MATCH || kinds[i] == KIND_SYMLINK);
      if (!sh_ok) CU_ASSERT_PTR_NOT_NULL(strstr(out, "FAILED"));
      if (kinds[i] == KIND_MALFORMED) {
        CU_ASSERT_EQUAL(crc, ALTAR_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "malformed"));
      }
      if (kinds[i] == KIND_MISSING) CU_ASSERT_PTR_NOT_NULL(strstr(out, "missing"));
      if (kinds[i] == KIND_DIR) CU_ASSERT_PTR_NOT_NULL(strstr(out, "directory"));
      free(p);
    }
  }
}

/* Every line is checked, one result per line, and one failure fails the run. */
static void several_lines(shell_t shell) {
  char *good, *bad;
  const char *dg = prepare(KIND_MATCH, shell == SH_DASH ? "multi-d" : "multi-b", &good);
  const char *db = prepare(KIND_MISMATCH, shell == SH_DASH ? "multi-d" : "multi-b", &bad);
  char l1[600], l2[600], l3[600], out[4096];
  sh_line(l1, sizeof l1, dg, good);
  sh_line(l2, sizeof l2, db, bad);
  snprintf(l3, sizeof l3, "%s %s", HELLO_HEX, good); /* one space: not the sha256sum format */
  const char *lines[] = {l1, l2, l1, l3};
  CU_ASSERT_EQUAL(run_program(shell, false, lines, 4, out, sizeof out), 1);
  size_t nl = 0;
  for (const char *c = out; *c; c++) nl += *c == '\n';
  CU_ASSERT_EQUAL(nl, 4);
  const char *only_good[] = {l1, l1};
  CU_ASSERT_EQUAL(run_program(shell, true, only_good, 2, out, sizeof out), 0);
  free(good);
  free(bad);
}

/* Records written by one side are accepted by the other; stale ones by neither. */
static void records_cross(shell_t shell) {
  char *p;
  const char *d = prepare(KIND_MATCH, shell == SH_DASH ? "cross-d" : "cross-b", &p);
  char line[600], out[4096];
  sh_line(line, sizeof line, d, p);
  const char *lines[] = {line};
  bool hashed;

  /* A current record naming another digest is accepted by neither. */
  forge_record(p, OTHER_DIGEST);
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(hashed)"));
  forge_record(p, OTHER_DIGEST);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, false, &hashed, NULL), 0);
  CU_ASSERT_TRUE(hashed);

  /* C writes, sh accepts. */
  rm_record(p);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, true, &hashed, NULL), 0);
  CU_ASSERT_TRUE(hashed);
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(record)"));
  /* sh not trusting records hashes anyway. */
  CU_ASSERT_EQUAL(run_program(shell, false, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(hashed)"));

  /* sh writes, C accepts. */
  rm_record(p);
  CU_ASSERT_FALSE(altar_has_verification_record(p, d));
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(hashed)"));
  CU_ASSERT_TRUE(altar_has_verification_record(p, d));
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, true, &hashed, NULL), 0);
  CU_ASSERT_FALSE(hashed);

  /* Stale after touching: neither side accepts the record. */
  struct timespec ts[2] = {{2000000, 7}, {2000000, 7}};
  CU_ASSERT_EQUAL(utimensat(AT_FDCWD, p, ts, 0), 0);
  CU_ASSERT_FALSE(altar_has_verification_record(p, d));
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(hashed)"));
  /* ...which re-recorded it, so C now accepts without hashing. */
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, true, &hashed, NULL), 0);
  CU_ASSERT_FALSE(hashed);

  /* Modified bytes: stale and a mismatch on both sides. */
  altar_test_write_file(p, "hellO\n", 6);
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "mismatch"));
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, true, &hashed, NULL), ALTAR_EINTEGRITY);

  /* A forged current record fools both trusting verifiers alike, and
   * neither when records are not trusted. */
  forge_record(p, d);
  CU_ASSERT_EQUAL(run_program(shell, true, lines, 1, out, sizeof out), 0);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, true, false, &hashed, NULL), 0);
  CU_ASSERT_EQUAL(run_program(shell, false, lines, 1, out, sizeof out), 1);
  CU_ASSERT_EQUAL(altar_verify_file_digest(p, d, false, false, &hashed, NULL), ALTAR_EINTEGRITY);
  free(p);
}

static void test_agree_dash(void) {
  agree_on(SH_DASH);
  several_lines(SH_DASH);
  records_cross(SH_DASH);
}

static void test_agree_busybox(void) {
  if (!busybox) {
    CU_FAIL("busybox is not installed (busybox-static is in scripts/install-deps.sh test packages)");
    return;
  }
  agree_on(SH_BUSYBOX);
  several_lines(SH_BUSYBOX);
  records_cross(SH_BUSYBOX);
}

static void add(void) {
  ALTAR_SUITE("verifier_program", setup, teardown);
  ALTAR_TEST(test_unwritable_record);
  ALTAR_TEST(test_agree_dash);
  ALTAR_TEST(test_agree_busybox);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
