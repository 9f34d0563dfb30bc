/* The ExecutionBackend contract suite: one CUnit suite any backend passes.
 *
 * A backend's test file fills an altar_contract_fixture_t telling the suite
 * how to build the backend and how to make a task exit with n, outlive its
 * timeout, exceed its memory, or vanish, then calls altar_contract_add_suite
 * from its altar_test_add_fn. One fixture per test executable (CUnit tests
 * take no argument, so the suite keeps the fixture in a static).
 *
 * Waiting for a task is bounded by fixture->wait_s; running out of it is a
 * failure, never a skip. No assertion depends on timing. */
#ifndef ALTAR_BACKEND_CONTRACT_H
#define ALTAR_BACKEND_CONTRACT_H

#include "altar/backend.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct altar_contract_fixture {
  const char *name;  /* suite name: "contract[<name>]" */
  void *ctx;         /* passed to every hook */
  const char *image; /* image put in every spec ("" is fine where unused) */
  int wait_s;        /* how long to wait for a terminal state (default 60) */

  /* A fresh backend whose data lives under data_root (a fresh empty
   * directory the suite made and removes). NULL with err filled on failure. */
  altar_backend_t *(*make_backend)(void *ctx, const char *data_root, altar_error_t *err);

  /* Set spec's command (and anything else it needs) so that the task: */
  int (*set_exit)(void *ctx, altar_spec_t *spec, int code);     /* exits with code */
  int (*set_sleep)(void *ctx, altar_spec_t *spec, int seconds); /* runs ~seconds, exits 0 */
  /* sets resources.memory_mb and allocates well past it */
  int (*set_oom)(void *ctx, altar_spec_t *spec);
  /* reads physical_path (the resolved input) and exits 0; NULL → set_exit 0 */
  int (*set_read_input)(void *ctx, altar_spec_t *spec, const char *physical_path);

  /* Make the task behind h disappear behind the backend's back (remove its
   * container, its task directory, kill its supervisor…). */
  int (*vanish)(void *ctx, altar_backend_t *be, const altar_handle_t *h);

  /* Where a staged input lands on the host running the test: a malloc'd
   * path. NULL hook → "<data_root>/<logical>". */
  char *(*host_path)(void *ctx, altar_backend_t *be, const char *data_root, const char *logical);

  /* True when the backend's volume can never be the directory its storage
   * reads from (a remote volume whose test double only happens to live on
   * this host): test_staging_in_place does not apply. */
  bool volume_is_remote;
  /* True when no verifier runs in the task and the fixture plays its verdict
   * (kwok runs no container): a task-side mismatch's detail then cannot
   * carry the verifier's words, so only its reason is checked. */
  bool task_check_simulated;

  /* Called after each test, after the backend is destroyed. Optional. */
  void (*cleanup)(void *ctx, const char *data_root);
} altar_contract_fixture_t;

/* Registers the suite for fx (which must outlive the run). */
void altar_contract_add_suite(const altar_contract_fixture_t *fx);

/* The suite's own declaration check, exposed so it can be tested: 0 when be
 * declares where it verifies digests (staging or task) and names itself;
 * -1 with a reason in why otherwise. */
int altar_contract_check_declarations(const altar_backend_t *be, char *why, size_t why_size);

/* Helpers for fixtures and tests. */
/* Polls h until terminal or wait_s passes; 0 and *pst filled (caller
 * clears), or -1 on a poll error or timeout (with a CUnit failure noted). */
int altar_contract_wait_terminal(altar_backend_t *be, const altar_handle_t *h, int wait_s, altar_status_t *pst);
/* "sha256:<hex>" of bytes into out (72 bytes). */
void altar_contract_sha256(const void *data, size_t len, char out[72]);

#endif
