/* The ExecutionBackend contract suite (see backend_contract.h). */
#include "backend_contract.h"

#include "altar/digest.h"
#include "testutil.h"
#include "core/unconst.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const altar_contract_fixture_t *fx;

/* One test's world: a data root, a store for input sources, a backend. */
typedef struct world {
  char *data_root;
  char *store;
  altar_backend_t *be;
} world_t;

static int wait_s(void) { return fx->wait_s > 0 ? fx->wait_s : 60; }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static bool world_open(world_t *w) {
  memset(w, 0, sizeof *w);
  w->data_root = altar_test_tmpdir("contract-data");
  w->store = altar_test_tmpdir("contract-store");
  altar_error_t berr = {0};
  w->be = fx->make_backend(fx->ctx, w->data_root, &berr);
  if (!w->be) fprintf(stderr, "contract[%s]: make_backend: %s\n", fx->name, berr.msg);
  CU_ASSERT_PTR_NOT_NULL(w->be);
  return w->be != NULL;
}

static void world_close(world_t *w) {
  altar_backend_close(w->be);
  if (fx->cleanup) fx->cleanup(fx->ctx, w->data_root);
  altar_test_rmtree(w->data_root);
  altar_test_rmtree(w->store);
  free(w->data_root);
  free(w->store);
}

static altar_spec_t *new_spec(const char *kind) {
  altar_spec_t *s = altar_spec_new(kind, fx->image ? fx->image : "");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_set_label(s, "job_id", "contract-job");
  altar_spec_set_label(s, "fold", "0");
  altar_spec_set_label(s, "kind_note", "ünïcode ✓");
  return s;
}

static void report(const char *what, int rc, const altar_error_t *err) {
  if (rc < 0) fprintf(stderr, "contract[%s]: %s: %s (%s)\n", fx->name, what, err->msg, altar_err_name(rc));
}

int altar_contract_wait_terminal(altar_backend_t *be, const altar_handle_t *h, int limit_s, altar_status_t *pst) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    altar_error_t err = {0};
    int rc = altar_backend_poll(be, h, 1, pst, &err);
    if (rc < 0) {
      report("poll", rc, &err);
      CU_FAIL("poll failed while waiting for a terminal state");
      return -1;
    }
    if (altar_state_terminal(pst->state)) return 0;
    altar_status_clear(pst);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > limit_s) {
      fprintf(stderr, "contract[%s]: task %s not terminal after %d s\n", fx->name, h->external_id, limit_s);
      CU_FAIL("task did not reach a terminal state in time");
      return -1;
    }
    sleep_ms(20);
  }
}

void altar_contract_sha256(const void *data, size_t len, char out[72]) {
  altar_error_t err = {0};
  if (altar_sha256_bytes(data, len, out, &err) < 0) abort();
}

int altar_contract_check_declarations(const altar_backend_t *be, char *why, size_t why_size) {
  if (!be) {
    snprintf(why, why_size, "no backend");
    return -1;
  }
  const char *name = altar_backend_name(be);
  if (!name || !name[0]) {
    snprintf(why, why_size, "backend has no name");
    return -1;
  }
  altar_verification_t v = altar_backend_verification(be);
  if (v != ALTAR_VERIFY_STAGING && v != ALTAR_VERIFY_TASK) {
    snprintf(why, why_size,
             "backend '%s' declares input_digest_verification '%s': content-addressed inputs must "
             "be verified on every backend (staging or task)",
             name, altar_verification_name(v));
    return -1;
  }
  return 0;
}

/* Submits spec, checks the handle carries its identity; returns rc. */
static int submit_checked(world_t *w, const altar_spec_t *spec, altar_handle_t *h) {
  altar_error_t err = {0};
  int rc = altar_backend_submit(w->be, spec, h, &err);
  report("submit", rc, &err);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc < 0) return rc;
  CU_ASSERT_PTR_NOT_NULL(h->backend);
  CU_ASSERT_PTR_NOT_NULL(h->external_id);
  if (h->backend) CU_ASSERT_STRING_EQUAL(h->backend, altar_backend_name(w->be));
  if (h->external_id) CU_ASSERT(h->external_id[0] != '\0');
  CU_ASSERT(altar_strmap_equal(&h->labels, &spec->labels));
  if (spec->plugin_identity) {
    CU_ASSERT(h->plugin_identity && altar_strmap_equal(h->plugin_identity, spec->plugin_identity));
  } else {
    CU_ASSERT_PTR_NULL(h->plugin_identity);
  }
  return 0;
}

static void check_failure(const altar_status_t *st, const char *reason, int exit_code) {
  CU_ASSERT_EQUAL(st->state, ALTAR_STATE_FAILED);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st->failure);
  if (getenv("ALTAR_CONTRACT_VERBOSE"))
    fprintf(stderr, "contract[%s]: %s: %s\n", fx->name, st->failure->reason,
            st->failure->detail ? st->failure->detail : "");
  if (strcmp(st->failure->reason, reason))
    fprintf(stderr, "contract[%s]: want reason %s, got %s (%s)\n", fx->name, reason, st->failure->reason,
            st->failure->detail ? st->failure->detail : "");
  CU_ASSERT_STRING_EQUAL(st->failure->reason, reason);
  /* The one table (altar_reason_deterministic) is what the contract says. */
  CU_ASSERT_EQUAL(st->failure->deterministic, altar_reason_deterministic(reason));
  if (exit_code >= 0) {
    CU_ASSERT(st->failure->exit_code.set);
    CU_ASSERT_EQUAL(st->failure->exit_code.v, exit_code);
  }
}

/* Runs spec to a terminal state; *pst filled (caller clears). */
static int run_to_end(world_t *w, const altar_spec_t *spec, altar_status_t *pst) {
  altar_handle_t h;
  if (submit_checked(w, spec, &h) < 0) return -1;
  int rc = altar_contract_wait_terminal(w->be, &h, wait_s(), pst);
  if (rc == 0) CU_ASSERT(altar_handle_equal(&pst->handle, &h));
  altar_handle_clear(&h);
  return rc;
}

/* ---- the tests ---------------------------------------------------------- */

static void test_declares_verification(void) {
  world_t w;
  if (!world_open(&w)) return;
  char why[256];
  int rc = altar_contract_check_declarations(w.be, why, sizeof why);
  if (rc) fprintf(stderr, "contract[%s]: %s\n", fx->name, why);
  CU_ASSERT_EQUAL(rc, 0);
  world_close(&w);
}

static void test_submit_returns_handle_with_labels(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-ok");
  s->plugin_identity = altar_strmap_new();
  altar_strmap_set(s->plugin_identity, "plugin", "contract");
  altar_strmap_set(s->plugin_identity, "abi", "1");
  CU_ASSERT_EQUAL(fx->set_exit(fx->ctx, s, 0), 0);
  altar_status_t st;
  if (run_to_end(&w, s, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    CU_ASSERT_PTR_NULL(st.failure);
    CU_ASSERT(altar_strmap_equal(&st.handle.labels, &s->labels));
    altar_status_clear(&st);
  }
  altar_spec_free(s);
  world_close(&w);
}

static void test_resubmit_same_spec(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-resubmit");
  CU_ASSERT_EQUAL(fx->set_exit(fx->ctx, s, 0), 0);
  altar_handle_t h[3];
  int ok = 0;
  for (int i = 0; i < 3; i++)
    if (submit_checked(&w, s, &h[i]) == 0) ok++;
  CU_ASSERT_EQUAL(ok, 3);
  for (int i = 0; i < ok; i++) {
    altar_status_t st;
    if (altar_contract_wait_terminal(w.be, &h[i], wait_s(), &st) == 0) {
      CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
      altar_status_clear(&st);
    }
    altar_handle_clear(&h[i]);
  }
  altar_spec_free(s);
  world_close(&w);
}

static void test_poll_many_one_status_each(void) {
  world_t w;
  if (!world_open(&w)) return;
  enum { N = 4 };
  altar_handle_t h[N + 1];
  size_t n = 0;
  for (int i = 0; i < N; i++) {
    altar_spec_t *s = new_spec("contract-poll");
    char fold[8];
    snprintf(fold, sizeof fold, "%d", i);
    altar_spec_set_label(s, "fold", fold);
    /* Long sleepers: still running when we look, then cancelled. */
    CU_ASSERT_EQUAL(fx->set_sleep(fx->ctx, s, 300), 0);
    if (submit_checked(&w, s, &h[n]) == 0) n++;
    altar_spec_free(s);
  }
  CU_ASSERT_EQUAL_FATAL(n, N);
  /* One handle the backend never made: reported, not an error. */
  altar_handle_init(&h[n], altar_backend_name(w.be), "altar-contract-no-such-task");
  n++;
  altar_status_t st[N + 1];
  altar_error_t err = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = altar_backend_poll(w.be, h, n, st, &err);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  report("poll", rc, &err);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  /* Reported, not asserted: a probe of running tasks came back while they run. */
  fprintf(stderr, "[contract[%s]: poll of %zu handles took %.3f ms] ", fx->name, n,
          (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
  for (size_t i = 0; i < n; i++) {
    CU_ASSERT(altar_handle_equal(&st[i].handle, &h[i])); /* in order, labels kept */
    if (i < N) {
      CU_ASSERT(st[i].state == ALTAR_STATE_PENDING || st[i].state == ALTAR_STATE_RUNNING);
      CU_ASSERT_PTR_NULL(st[i].failure);
    } else {
      CU_ASSERT_EQUAL(st[i].state, ALTAR_STATE_FAILED);
      if (st[i].failure) CU_ASSERT_STRING_EQUAL(st[i].failure->reason, ALTAR_REASON_CONTAINER_MISSING);
    }
    altar_status_clear(&st[i]);
  }
  /* Zero handles is a valid, empty probe. */
  CU_ASSERT_EQUAL(altar_backend_poll(w.be, NULL, 0, NULL, &err), 0);
  for (size_t i = 0; i < n; i++) {
    CU_ASSERT_EQUAL(altar_backend_cancel(w.be, &h[i], &err), 0);
    altar_handle_clear(&h[i]);
  }
  world_close(&w);
}

static void test_exit_code_n(void) {
  world_t w;
  if (!world_open(&w)) return;
  int codes[] = {3, 1};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    altar_spec_t *s = new_spec("contract-exit");
    CU_ASSERT_EQUAL(fx->set_exit(fx->ctx, s, codes[i]), 0);
    altar_status_t st;
    if (run_to_end(&w, s, &st) == 0) {
      char reason[32];
      snprintf(reason, sizeof reason, "exit_%d", codes[i]);
      check_failure(&st, reason, codes[i]);
      CU_ASSERT_TRUE(st.failure && st.failure->deterministic); /* the command's own error */
      altar_status_clear(&st);
    }
    altar_spec_free(s);
  }
  world_close(&w);
}

static void test_timeout(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-timeout");
  CU_ASSERT_EQUAL(fx->set_sleep(fx->ctx, s, 300), 0);
  s->timeout_s = (altar_opt_i64_t){true, 1};
  altar_status_t st;
  if (run_to_end(&w, s, &st) == 0) {
    check_failure(&st, ALTAR_REASON_TIMEOUT, -1);
    altar_status_clear(&st);
  }
  altar_spec_free(s);
  world_close(&w);
}

static void test_oom_killed(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-oom");
  CU_ASSERT_EQUAL(fx->set_oom(fx->ctx, s), 0);
  CU_ASSERT_TRUE(s->resources.memory_mb.set); /* the fixture must set a limit */
  altar_status_t st;
  if (run_to_end(&w, s, &st) == 0) {
    check_failure(&st, ALTAR_REASON_OOM_KILLED, -1);
    CU_ASSERT_TRUE(st.failure && !st.failure->deterministic); /* infrastructure, worth a retry */
    altar_status_clear(&st);
  }
  altar_spec_free(s);
  world_close(&w);
}

static void test_vanished_task(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-vanish");
  CU_ASSERT_EQUAL(fx->set_sleep(fx->ctx, s, 300), 0);
  altar_handle_t h;
  if (submit_checked(&w, s, &h) == 0) {
    CU_ASSERT_EQUAL(fx->vanish(fx->ctx, w.be, &h), 0);
    altar_status_t st;
    if (altar_contract_wait_terminal(w.be, &h, wait_s(), &st) == 0) {
      check_failure(&st, ALTAR_REASON_CONTAINER_MISSING, -1);
      altar_status_clear(&st);
    }
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_backend_cancel(w.be, &h, &err), 0); /* gone counts as cancelled */
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
  world_close(&w);
}

static void test_cancel_twice(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_spec_t *s = new_spec("contract-cancel");
  CU_ASSERT_EQUAL(fx->set_sleep(fx->ctx, s, 300), 0);
  altar_handle_t h;
  if (submit_checked(&w, s, &h) == 0) {
    altar_error_t err = {0};
    int rc = altar_backend_cancel(w.be, &h, &err);
    report("cancel", rc, &err);
    CU_ASSERT_EQUAL(rc, 0);
    rc = altar_backend_cancel(w.be, &h, &err);
    report("cancel again", rc, &err);
    CU_ASSERT_EQUAL(rc, 0);
    /* A cancelled task ends (or is gone); either way poll still answers. */
    altar_status_t st;
    if (altar_contract_wait_terminal(w.be, &h, wait_s(), &st) == 0) {
      CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
      altar_status_clear(&st);
    }
    CU_ASSERT_EQUAL(altar_backend_cancel(w.be, &h, &err), 0);
    altar_handle_clear(&h);
  }
  /* A handle the backend never made cancels fine too. */
  altar_handle_t ghost;
  altar_handle_init(&ghost, altar_backend_name(w.be), "altar-contract-no-such-task");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_cancel(w.be, &ghost, &err), 0);
  altar_handle_clear(&ghost);
  altar_spec_free(s);
  world_close(&w);
}

static char *host_path(world_t *w, const char *logical) {
  if (fx->host_path) return fx->host_path(fx->ctx, w->be, w->data_root, logical);
  size_t n = strlen(w->data_root) + strlen(logical) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", w->data_root, logical);
  return p;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void make_input(world_t *w, const char *content, const char *digest_of, altar_transfer_t *t,
                       const char *logical) {
  char src[1024], uri[1100], digest[72];
  snprintf(src, sizeof src, "%s/src-%s", w->store, strrchr(logical, '/') ? strrchr(logical, '/') + 1 : logical);
  altar_test_write_file(src, content, strlen(content));
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_contract_sha256(digest_of, strlen(digest_of), digest);
  memset(t, 0, sizeof *t);
  t->uri = strdup(uri);
  t->logical_path = strdup(logical);
  t->digest = strdup(digest);
}

static void test_digest_mismatch_where_declared(void) {
  world_t w;
  if (!world_open(&w)) return;
  const char *logical = "models/contract/weights.bin";
  altar_transfer_t bad;
  make_input(&w, "the bytes on disk", "the bytes we expected", &bad, logical);
  altar_error_t err = {0};
  if (altar_backend_verification(w.be) == ALTAR_VERIFY_STAGING) {
    int rc = altar_backend_stage_inputs(w.be, &bad, 1, &err);
    CU_ASSERT_EQUAL(rc, ALTAR_EINTEGRITY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, logical)); /* names the input */
    /* Reported as the task-side check reports it: one reason, one row of
     * the table for `deterministic`. */
    CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(rc), ALTAR_REASON_INPUT_DIGEST_MISMATCH);
    char *hp = host_path(&w, logical);
    CU_ASSERT_FALSE(file_exists(hp)); /* the bad copy is deleted */
    free(hp);
  } else {
    /* "task": staging may do nothing; the task checks and fails. */
    int rc = altar_backend_stage_inputs(w.be, &bad, 1, &err);
    report("stage_inputs", rc, &err);
    CU_ASSERT_EQUAL(rc, 0);
    altar_spec_t *s = new_spec("contract-digest");
    altar_spec_add_input(s, bad.uri, bad.logical_path, NULL, bad.digest);
    char *phys = NULL;
    CU_ASSERT_EQUAL(altar_backend_resolve_path(w.be, logical, &phys, &err), 0);
    int frc = fx->set_read_input ? fx->set_read_input(fx->ctx, s, phys ? phys : logical) : fx->set_exit(fx->ctx, s, 0);
    CU_ASSERT_EQUAL(frc, 0);
    free(phys);
    altar_status_t st;
    if (run_to_end(&w, s, &st) == 0) {
      check_failure(&st, ALTAR_REASON_INPUT_DIGEST_MISMATCH, -1);
      altar_status_clear(&st);
    }
    altar_spec_free(s);
  }
  altar_transfer_clear(&bad);
  world_close(&w);
}

static void test_digest_match_runs(void) {
  world_t w;
  if (!world_open(&w)) return;
  const char *logical = "models/contract/good.bin";
  altar_transfer_t good;
  make_input(&w, "verified bytes", "verified bytes", &good, logical);
  altar_error_t err = {0};
  int rc = altar_backend_stage_inputs(w.be, &good, 1, &err);
  report("stage_inputs", rc, &err);
  CU_ASSERT_EQUAL(rc, 0);
  if (altar_backend_verification(w.be) == ALTAR_VERIFY_STAGING) {
    char *hp = host_path(&w, logical);
    size_t len = 0;
    char *got = altar_test_read_file(hp, &len);
    CU_ASSERT_PTR_NOT_NULL(got);
    if (got) CU_ASSERT_STRING_EQUAL(got, "verified bytes");
    free(got);
    free(hp);
    /* Staging again is harmless (and may skip the recorded copy). */
    rc = altar_backend_stage_inputs(w.be, &good, 1, &err);
    report("stage_inputs again", rc, &err);
    CU_ASSERT_EQUAL(rc, 0);
  }
  altar_spec_t *s = new_spec("contract-digest-ok");
  altar_spec_add_input(s, good.uri, good.logical_path, NULL, good.digest);
  char *phys = NULL;
  CU_ASSERT_EQUAL(altar_backend_resolve_path(w.be, logical, &phys, &err), 0);
  int frc = fx->set_read_input ? fx->set_read_input(fx->ctx, s, phys ? phys : logical) : fx->set_exit(fx->ctx, s, 0);
  CU_ASSERT_EQUAL(frc, 0);
  free(phys);
  altar_status_t st;
  if (run_to_end(&w, s, &st) == 0) {
    if (st.failure)
      fprintf(stderr, "contract[%s]: %s: %s\n", fx->name, st.failure->reason,
              st.failure->detail ? st.failure->detail : "");
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    altar_status_clear(&st);
  }
  altar_spec_free(s);
  altar_transfer_clear(&good);
  world_close(&w);
}

/* mkdir -p of path's parent directory. */
static void make_parents(const char *path) {
  char *dir = strdup(path);
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0755);
      *p = '/';
    }
  free(dir);
}

static bool same_meta(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Entries of path's directory, "." and ".." aside. */
static int siblings(const char *path) {
  char *dir = strdup(path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  free(dir);
  return n;
}

/* path is still the caller's file: same inode, bytes and mtime, and nothing
 * written beside it (no verification record, no temp file: it is alone in
 * its directory). */
static void check_untouched(const char *path, const struct stat *before, const char *content) {
  struct stat now;
  CU_ASSERT_EQUAL_FATAL(stat(path, &now), 0);
  CU_ASSERT_TRUE(same_meta(&now, before));
  size_t len = 0;
  char *got = altar_test_read_file(path, &len);
  CU_ASSERT(got && len == strlen(content) && !memcmp(got, content, len));
  free(got);
  char *rec = altar_verification_record_path(path);
  CU_ASSERT_FALSE(file_exists(rec));
  free(rec);
  CU_ASSERT_EQUAL(siblings(path), 1);
}

/* Storage and the data root may be one directory, so an input's source can
 * already be the file at its logical path. That file is the caller's:
 * staging may neither replace nor delete it, nor write a record beside it,
 * whether its bytes match the digest or not. */
static void test_staging_in_place(void) {
  if (fx->volume_is_remote) return;
  world_t w;
  if (!world_open(&w)) return;
  const char *logical = "models/in-place/weights.bin";
  const char *content = "the caller's own bytes";
  char *hp = host_path(&w, logical);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hp);
  make_parents(hp);
  altar_test_write_file(hp, content, strlen(content));
  struct stat before;
  CU_ASSERT_EQUAL_FATAL(stat(hp, &before), 0);
  char uri[4200], digest[72];
  snprintf(uri, sizeof uri, "file://%s", hp);
  altar_contract_sha256("other bytes", 11, digest);
  altar_transfer_t t = {.uri = uri, .logical_path = ALTAR__UNCONST(logical), .digest = digest};
  altar_error_t err = {0};
  int rc = altar_backend_stage_inputs(w.be, &t, 1, &err);
  if (altar_backend_verification(w.be) == ALTAR_VERIFY_STAGING) {
    CU_ASSERT_EQUAL(rc, ALTAR_EINTEGRITY);
  } else {
    CU_ASSERT(rc == 0 || rc == ALTAR_EINTEGRITY);
  }
  check_untouched(hp, &before, content);
  /* A match: still nothing written beside it, and the file kept as it is. */
  altar_contract_sha256(content, strlen(content), digest);
  rc = altar_backend_stage_inputs(w.be, &t, 1, &err);
  report("stage_inputs (in place, matching)", rc, &err);
  CU_ASSERT_EQUAL(rc, 0);
  check_untouched(hp, &before, content);
  free(hp);
  world_close(&w);
}

/* A digest covers one regular file: an input that is a directory fails as a
 * mismatch does (ALTAR_EINTEGRITY at staging, input_digest_mismatch from the
 * task), with a detail that says it is a directory, on every backend. Both
 * places a directory can be: the source, and the input's logical path. */
static void test_digest_input_directory(void) {
  world_t w;
  if (!world_open(&w)) return;
  char dir[1024], inner[1100], uri[1100], digest[72];
  snprintf(dir, sizeof dir, "%s/a-model-dir", w.store);
  mkdir(dir, 0755);
  snprintf(inner, sizeof inner, "%s/part.bin", dir);
  altar_test_write_file(inner, "part", 4);
  snprintf(uri, sizeof uri, "file://%s", dir);
  altar_contract_sha256("part", 4, digest);
  const char *logical = "models/dir-source/weights.bin";
  altar_transfer_t t = {.uri = uri, .logical_path = ALTAR__UNCONST(logical), .digest = digest};
  altar_error_t err = {0};
  int rc = altar_backend_stage_inputs(w.be, &t, 1, &err);
  if (rc != ALTAR_EINTEGRITY) report("stage_inputs (directory source)", rc, &err);
  CU_ASSERT_EQUAL(rc, ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "directory"));
  CU_ASSERT_STRING_EQUAL(altar_reason_for_start_error(rc), ALTAR_REASON_INPUT_DIGEST_MISMATCH);
  CU_ASSERT_TRUE(file_exists(inner)); /* the caller's directory is left alone */

  /* The logical path is a directory where the task would read the file. */
  logical = "models/dir-dest/weights.bin";
  char *hp = host_path(&w, logical);
  CU_ASSERT_PTR_NOT_NULL_FATAL(hp);
  make_parents(hp);
  mkdir(hp, 0755);
  char kept[4200];
  snprintf(kept, sizeof kept, "%s/kept.bin", hp);
  altar_test_write_file(kept, "kept", 4);
  altar_transfer_t good;
  make_input(&w, "good bytes", "good bytes", &good, logical);
  if (altar_backend_verification(w.be) == ALTAR_VERIFY_STAGING) {
    rc = altar_backend_stage_inputs(w.be, &good, 1, &err);
    if (rc != ALTAR_EINTEGRITY) report("stage_inputs (directory at the logical path)", rc, &err);
    CU_ASSERT_EQUAL(rc, ALTAR_EINTEGRITY);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "directory"));
  } else {
    /* "task": the input is already on the volume; the task's check finds it. */
    altar_spec_t *s = new_spec("contract-digest-dir");
    altar_spec_add_input(s, good.uri, good.logical_path, NULL, good.digest);
    char *phys = NULL;
    CU_ASSERT_EQUAL(altar_backend_resolve_path(w.be, logical, &phys, &err), 0);
    int frc = fx->set_read_input ? fx->set_read_input(fx->ctx, s, phys ? phys : logical) : fx->set_exit(fx->ctx, s, 0);
    CU_ASSERT_EQUAL(frc, 0);
    free(phys);
    altar_status_t st;
    if (run_to_end(&w, s, &st) == 0) {
      check_failure(&st, ALTAR_REASON_INPUT_DIGEST_MISMATCH, -1);
      if (!fx->task_check_simulated)
        CU_ASSERT(st.failure && st.failure->detail && strstr(st.failure->detail, "directory"));
      altar_status_clear(&st);
    }
    altar_spec_free(s);
  }
  CU_ASSERT_TRUE(file_exists(kept)); /* not altar's to delete */
  altar_transfer_clear(&good);
  free(hp);
  world_close(&w);
}

static void test_path_resolver(void) {
  world_t w;
  if (!world_open(&w)) return;
  const char *root = altar_backend_mount_root(w.be);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  altar_error_t err = {0};
  char *out = NULL;
  char want[4200];
  CU_ASSERT_EQUAL(altar_backend_resolve_path(w.be, "jobs/j1/out.txt", &out, &err), 0);
  if (root[0]) snprintf(want, sizeof want, "%s/jobs/j1/out.txt", root);
  else snprintf(want, sizeof want, "jobs/j1/out.txt");
  if (out) CU_ASSERT_STRING_EQUAL(out, want);
  free(out);
  out = NULL;
  if (root[0]) {
    /* Canonical: "./" and "//" collapse. */
    CU_ASSERT_EQUAL(altar_backend_resolve_path(w.be, "./jobs//j1/./out.txt", &out, &err), 0);
    if (out) CU_ASSERT_STRING_EQUAL(out, want);
    free(out);
    out = NULL;
    static const char *const escaping[] = {"../etc/passwd", "/etc/passwd", "jobs/../../x", "..", NULL};
    for (size_t i = 0; escaping[i]; i++) {
      int rc = altar_backend_resolve_path(w.be, escaping[i], &out, &err);
      CU_ASSERT_EQUAL(rc, ALTAR_EPATH);
      CU_ASSERT_PTR_NULL(out);
      free(out);
      out = NULL;
    }
  }
  world_close(&w);
}

static void test_capacity_and_defaults(void) {
  world_t w;
  if (!world_open(&w)) return;
  altar_capacity_t cap;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_capacity(w.be, &cap, &err), 0);
  altar_resources_t cpu = {.gpu = NULL, .count = 1};
  CU_ASSERT(altar_capacity_free_for(&cap, &cpu) >= 0);
  altar_capacity_clear(&cap);
  /* await_completion: either unsupported (the default) or a real wait. */
  altar_status_t st;
  int rc = altar_backend_await_completion(w.be, NULL, 0, &st, &err);
  CU_ASSERT(rc == 0 || rc == ALTAR_ENOTSUP);
  altar_handle_t *hs = NULL;
  size_t n = 99;
  CU_ASSERT(altar_backend_recover(w.be, NULL, 0, NULL, 0, &hs, &n, &err) >= 0);
  altar_handles_free(hs, n);
  world_close(&w);
}

void altar_contract_add_suite(const altar_contract_fixture_t *fixture) {
  fx = fixture;
  static char name[128];
  snprintf(name, sizeof name, "contract[%s]", fixture->name);
  ALTAR_SUITE(name, NULL, NULL);
  ALTAR_TEST(test_declares_verification);
  ALTAR_TEST(test_submit_returns_handle_with_labels);
  ALTAR_TEST(test_resubmit_same_spec);
  ALTAR_TEST(test_poll_many_one_status_each);
  ALTAR_TEST(test_exit_code_n);
  ALTAR_TEST(test_timeout);
  ALTAR_TEST(test_oom_killed);
  ALTAR_TEST(test_vanished_task);
  ALTAR_TEST(test_cancel_twice);
  ALTAR_TEST(test_digest_mismatch_where_declared);
  ALTAR_TEST(test_digest_match_runs);
  ALTAR_TEST(test_staging_in_place);
  ALTAR_TEST(test_digest_input_directory);
  ALTAR_TEST(test_path_resolver);
  ALTAR_TEST(test_capacity_and_defaults);
}
