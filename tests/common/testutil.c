#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *altar_test_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t n = strlen(base) + strlen(tag) + 32;
  char *path = malloc(n);
  if (!path) abort();
  snprintf(path, n, "%s/altar-%s-XXXXXX", base, tag);
  if (!mkdtemp(path)) {
    perror("mkdtemp");
    abort();
  }
  return path;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void altar_test_rmtree(const char *path) {
  if (path) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void altar_test_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
    perror(path);
    abort();
  }
}

char *altar_test_read_file(const char *path, size_t *plen) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap + 1);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return NULL;
  buf[len] = 0;
  if (plen) *plen = len;
  return buf;
}

const char *altar_test_source_dir(void) {
  const char *s = getenv("ALTAR_SOURCE_DIR");
  return s && *s ? s : ALTAR_SOURCE_DIR;
}

const char *altar_test_altar_bin(void) {
  const char *s = getenv("ALTAR_BIN");
  if (!s || !*s) {
    fprintf(stderr, "ALTAR_BIN is not set (run the tests through ctest)\n");
    abort();
  }
  return s;
}

int altar_test_main(int argc, char **argv, altar_test_add_fn add) {
  (void)argc;
  (void)argv;
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  add();
  if (CU_get_error() != CUE_SUCCESS) {
    fprintf(stderr, "CUnit registration failed: %s\n", CU_get_error_msg());
    CU_cleanup_registry();
    return 1;
  }
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  unsigned ran = CU_get_number_of_tests_run();
  unsigned suites_failed = CU_get_number_of_suites_failed();
  CU_cleanup_registry();
  if (ran == 0) {
    fprintf(stderr, "no test ran\n");
    return 1;
  }
  return (failed || suites_failed) ? 1 : 0;
}

void altar_test_capture_log(altar_transport_t *t, int level, const char *msg, void *ctx) {
  (void)t;
  altar_test_logs_t *l = ctx;
  if (level > 4) return;
  size_t used = strlen(l->text);
  snprintf(l->text + used, sizeof l->text - used, "%s\n", msg);
  l->n++;
}
