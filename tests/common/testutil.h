/* Helpers shared by the CUnit suites. */
#ifndef ALTAR_TESTUTIL_H
#define ALTAR_TESTUTIL_H

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stddef.h>

#include "altar/transport.h"

/* A fresh directory under $TMPDIR (or /tmp), named after `tag`; caller frees
 * the string and may remove the tree with altar_test_rmtree. Aborts on failure. */
char *altar_test_tmpdir(const char *tag);
/* rm -rf of path (no shell). */
void altar_test_rmtree(const char *path);
/* Writes len bytes to path (creating or truncating). Aborts on failure. */
void altar_test_write_file(const char *path, const void *data, size_t len);
/* Reads a whole file; NULL if it cannot be read. Caller frees. */
char *altar_test_read_file(const char *path, size_t *plen);
/* $ALTAR_SOURCE_DIR (set by ctest), or the compile-time source dir. */
const char *altar_test_source_dir(void);
/* $ALTAR_BIN (set by ctest), the altar binary under test. */
const char *altar_test_altar_bin(void);

/* Runs the suites registered by `add` and returns the process exit code:
 * 0 when every test passed, 1 otherwise (including when none ran). */
typedef void (*altar_test_add_fn)(void);
int altar_test_main(int argc, char **argv, altar_test_add_fn add);

/* Shorthand for registering a suite with its tests in `add`. */
#define ALTAR_SUITE(name, setup, teardown)                                                                             \
  CU_pSuite suite__ = CU_add_suite(name, setup, teardown);                                                             \
  if (!suite__) return
#define ALTAR_TEST(fn) CU_add_test(suite__, #fn, fn)

/* What a transport logged at warning level or worse, for tests to assert
 * on: pass altar_test_capture_log as the log callback and the struct as
 * its context. */
typedef struct altar_test_logs {
  char text[8192];
  int n;
} altar_test_logs_t;
void altar_test_capture_log(altar_transport_t *t, int level, const char *msg, void *ctx);

#endif
