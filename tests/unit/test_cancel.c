/* `altar cancel` in the reconciler: a cancel copy settles only the job's
 * open groups on its own status partition, as "cancelled", and refuses
 * later shards there; replayed in other batch sizes it decides the same. */
#include "altar/codec.h"
#include "altar/reconcile.h"
#include "altar/transport.h"
#include "reconciler/cancel.h"
#include "ledger/ledger_rocksdb.h"
#include "reconciler/settled.h"
#include "ledger_suite.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPARTS 4
#define MAXEV 32
static altar_status_event_t evs[MAXEV];
static size_t nev;

static int32_t part_of(const char *gk) { return altar_partition_for_key(gk, strlen(gk), NPARTS); }

static altar_status_event_t *ev(altar_status_event_kind_t k, const char *job, const char *fold, double ts) {
  CU_ASSERT_FATAL(nev < MAXEV);
  altar_status_event_t *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->v = 1;
  e->event = k;
  e->kind = strdup("work");
  char id[64], gk[64];
  snprintf(id, sizeof id, "t-%s-%s", job, fold);
  snprintf(gk, sizeof gk, "%s:%s", job, fold);
  e->task_key = strdup(id);
  altar_handle_init(&e->handle, "process", id);
  altar_strmap_set(&e->handle.labels, "job_id", job);
  altar_strmap_set(&e->handle.labels, "fold", fold);
  e->ts = ts;
  e->log_partition = part_of(gk);
  e->log_partitions = NPARTS;
  if (k == ALTAR_EV_SUBMITTED) {
    e->spec = altar_spec_new("work", "img:1");
    altar_spec_add_arg(e->spec, "run");
    altar_spec_set_label(e->spec, "job_id", job);
  }
  return e;
}

static void state(const char *job, const char *fold, altar_state_t s, double ts) {
  ev(ALTAR_EV_STATE, job, fold, ts)->state = s;
}

static void cancel_on(int32_t p, const char *job, const char *group, double ts) {
  CU_ASSERT_FATAL(nev < MAXEV);
  altar_status_event_t *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->v = 1;
  e->ts = ts;
  e->log_partition = p;
  e->log_partitions = NPARTS;
  e->cancel = calloc(1, sizeof *e->cancel);
  e->cancel->event = ALTAR_CTL_CANCEL;
  e->cancel->partition = p;
  e->cancel->job_id = strdup(job);
  e->cancel->group_key = group ? strdup(group) : NULL;
}

static void reset(void) {
  for (size_t i = 0; i < nev; i++) altar_status_event_clear(&evs[i]);
  nev = 0;
}

/* Applies evs in batches of step; appends "event kind:group_key id\n" per group event to out. */
static void run(altar_ledger_t *l, const altar_group_specs_t *g, size_t step, char *out, size_t outsz) {
  altar__settled_t s;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar__settled_load(&s, l, 0, &err), 0);
  out[0] = 0;
  for (size_t i = 0; i < nev; i += step) {
    altar_apply_result_t r = {0};
    CU_ASSERT_EQUAL_FATAL(altar_ledger_begin(l, &err), 0);
    int rc = altar__settled_apply(&s, l, g, evs + i, i + step < nev ? step : nev - i, &r, NULL, &err);
    if (rc) fprintf(stderr, "apply: %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(altar_ledger_commit(l, &err), 0);
    altar__settled_commit(&s);
    for (size_t k = 0; k < r.n_events; k++) {
      size_t at = strlen(out);
      snprintf(out + at, outsz - at, "%d %s:%s %.12s\n", (int)r.events[k].event, r.events[k].kind,
               r.events[k].group_key, r.events[k].event_id);
    }
    altar_apply_result_clear(&r);
  }
  altar__settled_free(&s);
}

static void load(altar_group_specs_t *g) {
  const char *y = "work: {group_by: [job_id, fold], ready_when: single, on_failed: retry, max_restarts: 2}\n";
  altar_error_t err = {0};
  memset(g, 0, sizeof *g);
  CU_ASSERT_EQUAL_FATAL(altar_group_specs_load_string(y, strlen(y), "t", g, &err), 0);
}

static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++) n++;
  return n;
}

static void test_cancel_settles_per_partition_and_replays_alike(void) {
  altar_group_specs_t g;
  load(&g);
  reset();
  const char *folds[] = {"0", "1", "2", "3"};
  for (int i = 0; i < 4; i++) ev(ALTAR_EV_SUBMITTED, "J", folds[i], 100 + i);
  state("J", "0", ALTAR_STATE_RUNNING, 110);
  state("J", "1", ALTAR_STATE_RUNNING, 111);
  ev(ALTAR_EV_SUBMITTED, "K", "0", 112); /* another job: untouched */
  for (int32_t p = 0; p < NPARTS; p++) cancel_on(p, "J", NULL, 200);
  /* After the cancel: a late success of a cancelled shard, and a new shard. */
  state("J", "0", ALTAR_STATE_SUCCEEDED, 210);
  ev(ALTAR_EV_SUBMITTED, "J", "9", 220);
  state("J", "9", ALTAR_STATE_SUCCEEDED, 221);
  state("K", "0", ALTAR_STATE_SUCCEEDED, 230);
  for (int32_t p = 0; p < NPARTS; p++) cancel_on(p, "J", NULL, 300); /* again: nothing more */

  char *d1 = altar_test_tmpdir("cancel-a"), *d2 = altar_test_tmpdir("cancel-b");
  altar_error_t err = {0};
  altar_ledger_t *a = altar_test_ledger_open(d1), *b = altar_test_ledger_open(d2);
  CU_ASSERT_FATAL(a && b);
  char ea[4096], eb[4096];
  run(a, &g, 1, ea, sizeof ea);
  run(b, &g, nev, eb, sizeof eb);
  CU_ASSERT_STRING_EQUAL(ea, eb);
  /* J's 4 groups and the new shard's group cancelled (2 = ALTAR_GROUP_CANCELLED); K's fired. */
  CU_ASSERT_EQUAL(count(ea, "2 work:J:"), 5);
  CU_ASSERT_EQUAL(count(ea, "0 work:J:"), 0);
  CU_ASSERT_EQUAL(count(ea, "0 work:K:0"), 1);
  char ca[ALTAR_LEDGER_CHECKSUM_LEN + 1], cb[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(altar_ledger_checksum(a, ca, &err), 0);
  CU_ASSERT_EQUAL(altar_ledger_checksum(b, cb, &err), 0);
  CU_ASSERT_STRING_EQUAL(ca, cb);
  altar_ledger_entry_t e;
  CU_ASSERT_EQUAL_FATAL(altar_ledger_get(a, "process", "t-J-2", &e, &err), 0);
  CU_ASSERT(e.rec.consumed && e.rec.state == ALTAR_STATE_FAILED && e.rec.failure &&
            !strcmp(e.rec.failure->reason, ALTAR_REASON_CANCELLED));
  altar_ledger_entry_clear(&e);
  altar_test_ledger_close(a);
  altar_test_ledger_close(b);
  altar_test_rmtree(d1);
  altar_test_rmtree(d2);
  free(d1);
  free(d2);
  altar_group_specs_clear(&g);
}

static void test_copy_settles_only_its_partition_and_group(void) {
  altar_group_specs_t g;
  load(&g);
  reset();
  const char *folds[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
  for (int i = 0; i < 8; i++) ev(ALTAR_EV_SUBMITTED, "J", folds[i], 100 + i);
  int32_t p0 = part_of("J:0");
  size_t on_p0 = 0;
  for (int i = 0; i < 8; i++) {
    char gk[16];
    snprintf(gk, sizeof gk, "J:%s", folds[i]);
    on_p0 += part_of(gk) == p0;
  }
  cancel_on(p0, "J", NULL, 200);  /* only this partition's copy arrived */
  cancel_on(p0, "J", "J:0", 201); /* a group cancel of a group settled already: nothing */
  char *d = altar_test_tmpdir("cancel-p");
  altar_ledger_t *l = altar_test_ledger_open(d);
  CU_ASSERT_FATAL(l != NULL);
  char out[4096];
  run(l, &g, 2, out, sizeof out);
  CU_ASSERT_EQUAL(count(out, "2 work:J:"), on_p0);
  CU_ASSERT(on_p0 < 8); /* the others wait for their own partition's copy */
  altar_test_ledger_close(l);
  altar_test_rmtree(d);
  free(d);
  altar_group_specs_clear(&g);
}

static void test_status_topic_decoding(void) {
  altar_control_msg_t c = {.v = 1, .event = ALTAR_CTL_CANCEL, .partition = 1, .job_id = "J", .ts = 5};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_encode_control(&c, &b, &err), 0);
  altar_msg_t m = {.topic = "s", .partition = 1, .value = (char *)b.data, .value_len = b.len};
  altar_status_event_t e = {0};
  CU_ASSERT_EQUAL(altar__status_msg_decode(&m, 4, &e, &err), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e.cancel);
  CU_ASSERT_STRING_EQUAL(e.cancel->job_id, "J");
  CU_ASSERT_EQUAL(e.log_partition, 1);
  CU_ASSERT_EQUAL(e.log_partitions, 4);
  altar_status_event_clear(&e);
  altar_buf_free(&b);
  /* Another control message does not belong on the status topic. */
  altar_control_msg_t d = {.v = 1, .event = ALTAR_CTL_DONE, .partition = 1};
  CU_ASSERT_EQUAL_FATAL(altar_encode_control(&d, &b, &err), 0);
  m.value = (char *)b.data;
  m.value_len = b.len;
  CU_ASSERT_EQUAL(altar__status_msg_decode(&m, 4, &e, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "only cancel belongs here"));
  altar_status_event_clear(&e);
  altar_buf_free(&b);
}

static int cleanup(void) {
  reset();
  return 0;
}

static int cleanup_ledgers(void) { return cleanup() || altar_test_ledger_cleanup(); }
static int init_rocksdb(void) { return altar_test_ledger_init_rocksdb(); }
static int init_memory(void) { return altar_test_ledger_init_memory(); }

/* The ledger-backed tests run on both ledgers. */
static void add(void) {
  {
    ALTAR_SUITE("cancel.rocksdb", init_rocksdb, cleanup_ledgers);
    ALTAR_TEST(test_cancel_settles_per_partition_and_replays_alike);
    ALTAR_TEST(test_copy_settles_only_its_partition_and_group);
    ALTAR_TEST(test_status_topic_decoding);
  }
  {
    ALTAR_SUITE("cancel.memory", init_memory, cleanup_ledgers);
    ALTAR_TEST(test_cancel_settles_per_partition_and_replays_alike);
    ALTAR_TEST(test_copy_settles_only_its_partition_and_group);
  }
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
