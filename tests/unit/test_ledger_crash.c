/* The RocksDB ledger survives a kill at any point: a child writes to the
 * ledger in a loop (single operations and multi-operation batches with
 * daemon keys), the parent SIGKILLs it at a random moment, many times, and
 * after each kill reopens the ledger and checks it: every record decodes,
 * indexes agree with records, and no batch is half-applied. */
#include "altar/ledger.h"
#include "ledger/ledger_rocksdb.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILLS 40
#define NAMES 64 /* small id space, so records are re-opened, consumed, restarted */

static void mkhandle(altar_handle_t *h, const char *eid, unsigned job) {
  altar_handle_init(h, "process", eid);
  char b[16];
  snprintf(b, sizeof b, "j%u", job);
  altar_strmap_set(&h->labels, "job_id", b);
}

/* One random single operation. */
static void random_op(altar_ledger_t *l, unsigned *seed) {
  char eid[32];
  unsigned id = (unsigned)rand_r(seed) % NAMES, job = id % 8;
  snprintf(eid, sizeof eid, "t%u", id);
  altar_handle_t h;
  mkhandle(&h, eid, job);
  altar_error_t err = {0};
  int op = rand_r(seed) % 10;
  if (op < 3) {
    altar_spec_t *s = altar_spec_new("train", "img:1");
    altar_spec_add_arg(s, "run");
    altar_spec_set_label(s, "pad", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    char gk[16];
    snprintf(gk, sizeof gk, "j%u", job);
    altar_record_meta_t meta = {.task_key = eid, .group_key = gk};
    altar_ledger_record_meta(l, &h, "train", s, &meta, &err);
    altar_spec_free(s);
  } else if (op < 7) {
    altar_state_t st = (altar_state_t)(rand_r(seed) % 4);
    altar_failure_t *f = st == ALTAR_STATE_FAILED ? altar_failure_exit(1, "x", false) : NULL;
    altar_ledger_set_state(l, &h, st, f, &err);
    altar_failure_free(f);
  } else if (op < 9) {
    altar_handle_t hs[3];
    for (int i = 0; i < 3; i++) {
      char e2[32];
      snprintf(e2, sizeof e2, "t%u", (unsigned)rand_r(seed) % NAMES);
      mkhandle(&hs[i], e2, 0);
    }
    altar_ledger_consume(l, hs, 3, &err);
    for (int i = 0; i < 3; i++) altar_handle_clear(&hs[i]);
  } else {
    altar_ledger_restart(l, &h, &err);
  }
  altar_handle_clear(&h);
}

/* A batch: five records and a daemon key naming the batch, in one write. */
static void batch_op(altar_ledger_t *l, unsigned round, unsigned n) {
  altar_error_t err = {0};
  if (altar_ledger_begin(l, &err)) return;
  for (int j = 0; j < 5; j++) {
    char eid[48];
    snprintf(eid, sizeof eid, "b%u-%u-%d", round, n, j);
    altar_handle_t h;
    mkhandle(&h, eid, 99);
    altar_record_meta_t meta = {.task_key = eid, .group_key = "batch"};
    altar_ledger_record_meta(l, &h, "train", NULL, &meta, &err);
    altar_ledger_set_state(l, &h, ALTAR_STATE_SUCCEEDED, NULL, &err);
    if (j == 4) altar_ledger_consume(l, &h, 1, &err);
    altar_handle_clear(&h);
  }
  char key[48];
  int kl = snprintf(key, sizeof key, "batch/%u-%u", round, n);
  altar_ledger_aux_put(l, key, (size_t)kl, "5", 1, &err);
  altar_ledger_commit(l, &err);
}

static void child(const char *dir, unsigned round, int ready_fd) {
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
  if (!l) {
    fprintf(stderr, "child: %s\n", err.msg);
    _exit(3);
  }
  /* Tell the parent we are writing, so most kills land mid-stream rather
   * than while RocksDB opens (a few still do: see the parent). */
  if (write(ready_fd, "r", 1) != 1) _exit(4);
  unsigned seed = round * 7919u + 1;
  for (unsigned n = 0;; n++) {
    if (n % 8 == 7) batch_op(l, round, n);
    else random_op(l, &seed);
  }
}

typedef struct batches {
  int aux_without_records;
  int records_without_aux;
  int seen;
  altar_ledger_t *l;
} batches_t;

static int visit_batch(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  (void)v;
  (void)vl;
  batches_t *b = ctx;
  b->seen++;
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)(kl - 6), (const char *)k + 6);
  for (int j = 0; j < 5; j++) {
    char eid[80];
    snprintf(eid, sizeof eid, "b%s-%d", name, j);
    altar_ledger_entry_t e;
    altar_error_t err = {0};
    if (altar_ledger_get(b->l, "process", eid, &e, &err)) {
      b->aux_without_records++;
      continue;
    }
    if (e.rec.state != ALTAR_STATE_SUCCEEDED || e.rec.consumed != (j == 4)) b->aux_without_records++;
    altar_ledger_entry_clear(&e);
  }
  return 0;
}

static int visit_record(void *ctx, const altar_ledger_entry_t *e) {
  batches_t *b = ctx;
  const char *id = e->rec.handle.external_id;
  if (id[0] != 'b') return 0;
  /* "b<round>-<n>-<j>": its batch key must exist. */
  char name[64];
  snprintf(name, sizeof name, "%s", id + 1);
  char *dash = strrchr(name, '-');
  if (!dash) return 0;
  *dash = '\0';
  char key[80];
  int kl = snprintf(key, sizeof key, "batch/%s", name);
  altar_buf_t v = {0};
  altar_error_t err = {0};
  if (altar_ledger_aux_get(b->l, key, (size_t)kl, &v, &err)) b->records_without_aux++;
  altar_buf_free(&v);
  return 0;
}

static void test_kill_at_random_points(void) {
  char *dir = altar_test_tmpdir("ledger-crash");
  unsigned seed = (unsigned)time(NULL);
  fprintf(stderr, "\n  seed %u\n", seed);
  uint64_t last_records = 0;
  int batches_seen = 0;
  for (unsigned round = 0; round < KILLS; round++) {
    int fds[2];
    CU_ASSERT_FATAL(pipe(fds) == 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      child(dir, round, fds[1]);
    }
    close(fds[1]);
    /* Every fifth kill may land while the child is still opening the ledger;
     * the others land at a random moment of its write loop. */
    char c;
    if (round % 5 != 0 && read(fds[0], &c, 1) != 1) CU_FAIL("child died before writing");
    usleep((unsigned)rand_r(&seed) % 20000);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]); /* only now: an early close would kill the child with SIGPIPE */
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
      fprintf(stderr, "round %u: child ended with status 0x%x\n", round, (unsigned)status);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    altar_error_t err = {0};
    altar_ledger_t *l = altar_ledger_rocksdb_open(dir, NULL, &err);
    if (!l) fprintf(stderr, "round %u: reopen: %s\n", round, err.msg);
    CU_ASSERT_FATAL(l != NULL);
    uint64_t records = 0;
    int rc = altar__ledger_rocksdb_check(l, &records, &err);
    if (rc) fprintf(stderr, "round %u: %s\n", round, err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(records >= last_records); /* records are never deleted */
    last_records = records;
    batches_t b = {.l = l};
    CU_ASSERT_EQUAL(altar_ledger_aux_scan(l, "batch/", 6, visit_batch, &b, &err), 0);
    CU_ASSERT_EQUAL(altar_ledger_foreach(l, visit_record, &b, &err), 0);
    CU_ASSERT_EQUAL(b.aux_without_records, 0);
    CU_ASSERT_EQUAL(b.records_without_aux, 0);
    batches_seen = b.seen;
    char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
    CU_ASSERT_EQUAL(altar_ledger_checksum(l, sum, &err), 0);
    altar_ledger_close(l);
  }
  fprintf(stderr, "  %llu records, %d batches after %d kills\n", (unsigned long long)last_records, batches_seen, KILLS);
  CU_ASSERT(last_records > 0); /* the children did write */
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  ALTAR_SUITE("ledger_crash", NULL, NULL);
  ALTAR_TEST(test_kill_at_random_points);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
