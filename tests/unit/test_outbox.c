/* The reconciler's durable outbox (stage inside the ledger batch, publish
 * after commit, delete on acknowledgement, publish again after a restart
 * with the same bytes), the outbox carried across --rebuild, and the
 * daemon and the rebuild agreeing on the bytes of one group event. Runs on
 * a RocksDB ledger in a temporary directory and on the in-memory ledger
 * (but for what needs a second process), with the local transport. */
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "reconciler/daemon.h"
#include "reconciler/settled.h"
#include "reconciler/settled_record.h"
#include "reconciler/outbox.h"
#include "ledger_suite.h"
#include "testutil.h"
#include "core/unconst.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static altar_transport_t *open_local(const char *dir, const altar_transport_opts_t *opts) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "rebalance.check.ms", "20");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, opts, &err);
  if (!t) fprintf(stderr, "open local: %s\n", err.msg);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

/* The suite's ledger (RocksDB or in-memory) of dir. */
static altar_ledger_t *open_ledger(const char *dir) { return altar_test_ledger_open(dir); }

static void create_topic(altar_transport_t *t, const char *topic, int32_t parts) {
  altar_error_t err = {0};
  int rc = altar_transport_create_topic(t, topic, parts, &err);
  CU_ASSERT_FATAL(rc == 0 || rc == ALTAR_EEXIST);
}

/* Every record of a topic, in partition then offset order. */
typedef struct rec {
  altar_buf_t value;
  char *key;
  char *reason;        /* the DLQ reason header, NULL when absent */
  char *source, *size; /* the other two DLQ headers */
  int32_t partition;
  int64_t offset;
} rec_t;

typedef struct recs {
  rec_t v[256];
  size_t n;
} recs_t;

static void recs_clear(recs_t *r) {
  for (size_t i = 0; i < r->n; i++) {
    altar_buf_free(&r->v[i].value);
    free(r->v[i].key);
    free(r->v[i].reason);
    free(r->v[i].source);
    free(r->v[i].size);
  }
  r->n = 0;
}

static void read_topic(const char *dir, const char *topic, recs_t *out) {
  out->n = 0;
  altar_transport_t *t = open_local(dir, NULL);
  altar_error_t err = {0};
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, topic, 5000, &tl, &err);
  if (rc == ALTAR_ENOTFOUND) {
    altar_transport_close(t);
    return;
  }
  CU_ASSERT_FATAL(rc == 0);
  const altar_topic_info_t *ti = &tl->topics[0];
  for (size_t p = 0; p < ti->n_partitions; p++) {
    if (ti->partitions[p].end == ti->partitions[p].beginning) continue;
    altar_transport_t *c = open_local(dir, NULL);
    altar_tp_t tp = {topic, ti->partitions[p].partition, ALTAR_OFFSET_BEGINNING};
    CU_ASSERT_FATAL(altar_transport_assign(c, &tp, 1, &err) == 0);
    for (int64_t want = ti->partitions[p].end - ti->partitions[p].beginning; want > 0;) {
      altar_msg_t *m = NULL;
      CU_ASSERT_FATAL(altar_transport_consume(c, 1000, &m, &err) == 0);
      if (!m) continue;
      CU_ASSERT_FATAL(out->n < 256);
      rec_t *r = &out->v[out->n++];
      memset(r, 0, sizeof *r);
      altar_buf_append(&r->value, m->value ? m->value : "", m->value_len);
      if (m->key) r->key = strndup(m->key, m->key_len);
      const void *hv;
      size_t hl;
      if (altar_msg_header(m, ALTAR_DLQ_REASON_HEADER, &hv, &hl) == 0) r->reason = strndup(hv, hl);
      if (altar_msg_header(m, ALTAR_DLQ_SOURCE_HEADER, &hv, &hl) == 0) r->source = strndup(hv, hl);
      if (altar_msg_header(m, ALTAR_DLQ_SIZE_HEADER, &hv, &hl) == 0) r->size = strndup(hv, hl);
      r->partition = m->partition;
      r->offset = m->offset;
      altar_msg_free(m);
      want--;
    }
    altar_transport_close(c);
  }
  altar_topic_list_free(tl);
  altar_transport_close(t);
}

static size_t outbox_count(altar__outbox_t *ob) {
  size_t n = 99;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar__outbox_count(ob, &n, &err) == 0);
  return n;
}

/* A transport whose delivery reports reach ob. */
static altar_transport_t *open_for_outbox(const char *dir, altar__outbox_t *ob) {
  altar_transport_opts_t to = {.on_delivery = altar__outbox_on_delivery, .delivery_ctx = ob};
  return open_local(dir, &to);
}

static void test_stage_then_abort_drops_it(void) {
  char *root = altar_test_tmpdir("outbox-abort");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  altar_ledger_t *l = open_ledger(ldir);
  altar_transport_t *t = open_local(root, NULL);
  create_topic(t, "out", 1);
  altar__outbox_t ob;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, t, &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_begin(l, &err) == 0);
  uint64_t seq = 99;
  CU_ASSERT(altar__outbox_stage(&ob, "out", "k", "v1", 2, NULL, NULL, &seq, &err) == 0);
  CU_ASSERT_EQUAL(seq, 0);
  CU_ASSERT(altar_ledger_abort(l, &err) == 0);
  CU_ASSERT_EQUAL(outbox_count(&ob), 0);
  /* Nothing to publish: the staged record went with the aborted batch. */
  CU_ASSERT(altar__outbox_publish_from(&ob, 0, &err) == 0);
  CU_ASSERT_EQUAL(ob.in_flight, 0);
  altar_transport_close(t);
  altar_test_ledger_close(l);
  /* After a restart neither the record nor its sequence number exists. */
  l = open_ledger(ldir);
  altar__outbox_close(&ob);
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, NULL, &err) == 0);
  CU_ASSERT_EQUAL(ob.next_seq, 0);
  CU_ASSERT_EQUAL(outbox_count(&ob), 0);
  altar_test_ledger_close(l);
  recs_t r;
  read_topic(root, "out", &r);
  CU_ASSERT_EQUAL(r.n, 0);
  altar_test_rmtree(root);
  free(root);
  altar__outbox_close(&ob);
}

static void test_publish_after_commit_delete_on_ack(void) {
  char *root = altar_test_tmpdir("outbox-publish");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  altar_ledger_t *l = open_ledger(ldir);
  altar__outbox_t ob;
  altar_transport_t *t = open_for_outbox(root, &ob);
  create_topic(t, "out", 2);
  create_topic(t, "dlq", 1);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, t, &err) == 0);
  uint64_t first = ob.next_seq;
  CU_ASSERT_FATAL(altar_ledger_begin(l, &err) == 0);
  CU_ASSERT(altar__outbox_stage(&ob, "out", "g:1", "group-bytes", 11, NULL, NULL, NULL, &err) == 0);
  CU_ASSERT(altar__outbox_stage(&ob, "dlq", NULL, "\x00\x01poison", 8, ALTAR_DLQ_REASON_HEADER, "bad bytes", NULL,
                                &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_commit(l, &err) == 0);
  /* Staging publishes nothing: the log sees the records only after the commit. */
  recs_t r;
  read_topic(root, "out", &r);
  CU_ASSERT_EQUAL(r.n, 0);
  CU_ASSERT_EQUAL(outbox_count(&ob), 2);
  CU_ASSERT_FATAL(altar__outbox_publish_from(&ob, first, &err) == 0);
  CU_ASSERT_EQUAL(ob.in_flight, 2);
  CU_ASSERT(altar_transport_flush(t, 10000, &err) == 0);
  CU_ASSERT_EQUAL(ob.in_flight, 0);
  CU_ASSERT_EQUAL(ob.published, 2);
  CU_ASSERT_EQUAL(ob.fatal, 0);
  CU_ASSERT_EQUAL(outbox_count(&ob), 0); /* deleted once acknowledged */
  read_topic(root, "out", &r);
  CU_ASSERT_FATAL(r.n == 1);
  CU_ASSERT(r.v[0].value.len == 11 && !memcmp(r.v[0].value.data, "group-bytes", 11));
  CU_ASSERT(r.v[0].key && !strcmp(r.v[0].key, "g:1"));
  CU_ASSERT(r.v[0].reason == NULL);
  recs_clear(&r);
  read_topic(root, "dlq", &r);
  CU_ASSERT_FATAL(r.n == 1);
  CU_ASSERT(r.v[0].value.len == 8 && !memcmp(r.v[0].value.data, "\x00\x01poison", 8));
  CU_ASSERT(r.v[0].reason && !strcmp(r.v[0].reason, "bad bytes"));
  CU_ASSERT(r.v[0].key == NULL);
  recs_clear(&r);
  /* A later publish_from does not send the acknowledged records again. */
  CU_ASSERT(altar__outbox_publish_from(&ob, 0, &err) == 0);
  CU_ASSERT_EQUAL(ob.in_flight, 0);
  altar_transport_close(t);
  altar_test_ledger_close(l);
  altar_test_rmtree(root);
  free(root);
  altar__outbox_close(&ob);
}

/* Killed after the commit (nothing published) and after the publish (no
 * ack seen): a restart publishes the stored records again, byte for byte. */
static void test_republish_on_restart_same_bytes(void) {
  char *root = altar_test_tmpdir("outbox-restart");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  const char big[] = "\x93\xa1x\xc4\x03\x00\xff\x7f some group event";
  altar__outbox_t ob;
  altar_error_t err = {0};
  /* The first life runs in a child that dies without serving its acks
   * (as a kill -9 right after the publish would). */
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    altar_ledger_t *l = altar_ledger_rocksdb_open(ldir, NULL, &err);
    altar_transport_t *t = open_local(root, NULL); /* no delivery callback */
    create_topic(t, "out", 1);
    int bad = !l || altar__outbox_open(&ob, l, t, &err) || altar_ledger_begin(l, &err) ||
              altar__outbox_stage(&ob, "out", "kA", big, sizeof big, NULL, NULL, NULL, &err) ||
              altar_ledger_commit(l, &err) || altar_ledger_begin(l, &err) ||
              altar__outbox_stage(&ob, "out", "kB", "second", 6, NULL, NULL, NULL, &err) ||
              altar_ledger_commit(l, &err) || altar__outbox_publish_from(&ob, 0, &err) ||
              altar_transport_flush(t, 10000, &err);
    if (bad) fprintf(stderr, "child: %s\n", err.msg);
    _exit(bad ? 1 : 0);
  }
  int status = 0;
  CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
  CU_ASSERT_FATAL(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  altar_ledger_t *l;
  altar_transport_t *t;

  l = open_ledger(ldir);
  t = open_for_outbox(root, &ob);
  altar__outbox_close(&ob);
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, t, &err) == 0);
  CU_ASSERT_EQUAL(ob.next_seq, 2); /* numbers are never reused */
  CU_ASSERT_EQUAL(outbox_count(&ob), 2);
  CU_ASSERT_FATAL(altar__outbox_publish_from(&ob, 0, &err) == 0);
  CU_ASSERT(altar_transport_flush(t, 10000, &err) == 0);
  CU_ASSERT_EQUAL(outbox_count(&ob), 0);
  altar_transport_close(t);
  altar_test_ledger_close(l);

  recs_t r;
  read_topic(root, "out", &r);
  CU_ASSERT_FATAL(r.n == 4); /* A, B (first life), A, B (restart) */
  size_t na = 0, nb = 0;
  for (size_t i = 0; i < r.n; i++) {
    if (r.v[i].key && !strcmp(r.v[i].key, "kA")) {
      na++;
      CU_ASSERT(r.v[i].value.len == sizeof big && !memcmp(r.v[i].value.data, big, sizeof big));
    } else {
      nb++;
      CU_ASSERT(r.v[i].value.len == 6 && !memcmp(r.v[i].value.data, "second", 6));
    }
  }
  CU_ASSERT_EQUAL(na, 2);
  CU_ASSERT_EQUAL(nb, 2);
  recs_clear(&r);
  altar_test_rmtree(root);
  free(root);
  altar__outbox_close(&ob);
}

/* --rebuild moves the unpublished outbox into the new ledger. */
static void test_carry_into_new_ledger(void) {
  char *root = altar_test_tmpdir("outbox-carry");
  char adir[512], bdir[512];
  snprintf(adir, sizeof adir, "%s/a", root);
  snprintf(bdir, sizeof bdir, "%s/b", root);
  altar_ledger_t *a = open_ledger(adir);
  altar_ledger_t *b = open_ledger(bdir);
  altar__outbox_t ob;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar__outbox_open(&ob, a, NULL, &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_begin(a, &err) == 0);
  CU_ASSERT(altar__outbox_stage(&ob, "jobs", "task-1", "retry-job", 9, NULL, NULL, NULL, &err) == 0);
  CU_ASSERT(altar__outbox_stage(&ob, "dlq", NULL, "junk", 4, ALTAR_DLQ_REASON_HEADER, "why", NULL, &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_commit(a, &err) == 0);
  size_t n = 0;
  CU_ASSERT_FATAL(altar__outbox_carry(a, b, &n, &err) == 0);
  CU_ASSERT_EQUAL(n, 2);
  altar_test_ledger_close(a);

  altar_transport_t *t = open_for_outbox(root, &ob);
  create_topic(t, "jobs", 2);
  create_topic(t, "dlq", 1);
  altar__outbox_close(&ob);
  CU_ASSERT_FATAL(altar__outbox_open(&ob, b, t, &err) == 0);
  CU_ASSERT_EQUAL(ob.next_seq, 2);
  CU_ASSERT_FATAL(altar__outbox_publish_from(&ob, 0, &err) == 0);
  CU_ASSERT(altar_transport_flush(t, 10000, &err) == 0);
  CU_ASSERT_EQUAL(ob.published, 2);
  CU_ASSERT_EQUAL(outbox_count(&ob), 0);
  altar_transport_close(t);
  altar_test_ledger_close(b);
  recs_t r;
  read_topic(root, "jobs", &r);
  CU_ASSERT(r.n == 1 && r.v[0].value.len == 9 && !memcmp(r.v[0].value.data, "retry-job", 9));
  recs_clear(&r);
  read_topic(root, "dlq", &r);
  CU_ASSERT(r.n == 1 && r.v[0].reason && !strcmp(r.v[0].reason, "why"));
  recs_clear(&r);
  altar_test_rmtree(root);
  free(root);
  altar__outbox_close(&ob);
}

/* ---- the daemon and the rebuild -------------------------------------- */

static const char *groups_yaml =
    "pair:\n  group_by: [job_id]\n  ready_when: {all_folds: 2}\n  on_failed: dead_letter\n";

/* Set for events of a kind whose shards carry their fold count. */
static const char *ev_num_folds;

#ifndef HELD_CHECK
#define HELD_CHECK(st, n) CU_ASSERT_EQUAL((st).held, (n))
#endif

/* The spec status_ev gives a submitted event of job and fold. */
static altar_spec_t *status_spec(const char *job, int fold) {
  char f[8];
  snprintf(f, sizeof f, "%d", fold);
  altar_spec_t *s = altar_spec_new("pair", "img:1");
  altar_spec_add_arg(s, "run");
  altar_spec_set_label(s, "job_id", job);
  altar_spec_set_label(s, "fold", f);
  return s;
}

static void status_ev(altar_transport_t *t, altar_status_event_kind_t kind, const char *job, int fold,
                      altar_state_t state, double ts) {
  altar_status_event_t ev = {.v = ALTAR_SCHEMA_VERSION, .event = kind, .state = state, .ts = ts};
  char eid[64], tk[64], f[8];
  snprintf(eid, sizeof eid, "%s-%d", job, fold);
  snprintf(tk, sizeof tk, "tk-%s-%d", job, fold);
  snprintf(f, sizeof f, "%d", fold);
  ev.task_key = tk;
  ev.kind = "pair";
  ev.worker = "host-a:1";
  altar_handle_init(&ev.handle, "process", eid);
  altar_strmap_set(&ev.handle.labels, "job_id", job);
  altar_strmap_set(&ev.handle.labels, "fold", f);
  if (ev_num_folds) altar_strmap_set(&ev.handle.labels, "num_folds", ev_num_folds);
  if (kind == ALTAR_EV_SUBMITTED) ev.spec = status_spec(job, fold);
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_status(&ev, &b, &err) == 0);
  altar_produce_rec_t rec = {
      .topic = "st", .partition = 0, .key = job, .key_len = strlen(job), .value = b.data, .value_len = b.len};
  CU_ASSERT_FATAL(altar_transport_produce(t, &rec, &err) == 0);
  altar_buf_free(&b);
  altar_spec_free(ev.spec);
  altar_handle_clear(&ev.handle);
}

static altar_topics_t topics_named(const char *ready) {
  return (altar_topics_t){"jobs", "st", ALTAR__UNCONST(ready), "dead", "dlq"};
}

static void make_topics(altar_transport_t *t) {
  create_topic(t, "jobs", 1);
  create_topic(t, "st", 1);
  create_topic(t, "ready", 1);
  create_topic(t, "ready2", 1);
  create_topic(t, "dead", 1);
  create_topic(t, "dlq", 1);
}

/* Two publications of one event_id must be the same bytes: the daemon
 * (any batch size, its own clock) and a rebuild (other batches, later)
 * both stamp a group event with the ts of the status event that made it
 * due. */
static void test_daemon_and_rebuild_agree_on_bytes(void) {
  char *root = altar_test_tmpdir("outbox-daemon");
  char ldir[512], l2dir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  snprintf(l2dir, sizeof l2dir, "%s/ledger2", root);
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(groups_yaml, strlen(groups_yaml), "t", &groups, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 0, ALTAR_STATE_PENDING, 1001.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 1, ALTAR_STATE_PENDING, 1002.0);
  status_ev(p, ALTAR_EV_STATE, "j1", 0, ALTAR_STATE_SUCCEEDED, 1003.0);
  status_ev(p, ALTAR_EV_STATE, "j1", 1, ALTAR_STATE_SUCCEEDED, 1004.5); /* j1 due here */
  status_ev(p, ALTAR_EV_SUBMITTED, "j2", 0, ALTAR_STATE_PENDING, 1005.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "j2", 1, ALTAR_STATE_PENDING, 1006.0);
  status_ev(p, ALTAR_EV_STATE, "j2", 0, ALTAR_STATE_SUCCEEDED, 1007.0);
  status_ev(p, ALTAR_EV_STATE, "j2", 1, ALTAR_STATE_SUCCEEDED, 1008.25); /* j2 due here */
  status_ev(p, ALTAR_EV_SUBMITTED, "j3", 0, ALTAR_STATE_PENDING, 1009.0);
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);

  /* The live daemon, three events per atomic write. */
  altar_ledger_t *l = open_ledger(ldir);
  altar_transport_t *t = open_local(root, NULL);
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_opts_t o = {.transport = t,
                               .ledger = l,
                               .groups = &groups,
                               .topics = &topics,
                               .batch_max = 3,
                               .exit_when_idle = true,
                               .quiet = true};
  altar_reconciler_stats_t st = {0};
  int rc = altar__reconciler_run(&o, &st, &err);
  if (rc) fprintf(stderr, "reconciler: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT_EQUAL(st.events, 9);
  CU_ASSERT_EQUAL(st.fired, 2);
  altar_transport_close(t);
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);

  /* A rebuild told of another ready topic publishes every group there. */
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", root);
  altar_ledger_t *l2 = open_ledger(l2dir);
  altar_topics_t topics2 = topics_named("ready2");
  uint64_t missing = 0;
  rc = altar__reconciler_rebuild("local", &props, l2, &groups, &topics2, NULL, NULL, true, &st, &missing, &err);
  if (rc) fprintf(stderr, "rebuild: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT_EQUAL(missing, 2);
  char sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l2, sum2, &err) == 0);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  /* The replay decodes a spec as its bytes only: the records have it all
   * the same (j1-0 consumed, j3-0 open), equal to the one submitted. */
  const char *jobs[] = {"j1", "j3"};
  for (size_t i = 0; i < 2; i++) {
    char eid[16];
    snprintf(eid, sizeof eid, "%s-0", jobs[i]);
    altar_ledger_entry_t got;
    CU_ASSERT_EQUAL_FATAL(altar_ledger_get(l2, "process", eid, &got, &err), 0);
    CU_ASSERT(got.rec.consumed == (i == 0));
    altar_spec_t *want = status_spec(jobs[i], 0);
    CU_ASSERT(got.rec.spec && altar_spec_equal(got.rec.spec, want));
    altar_spec_free(want);
    altar_ledger_entry_clear(&got);
  }
  altar_test_ledger_close(l2);
  altar_strmap_clear(&props);

  recs_t a, b;
  read_topic(root, "ready", &a);
  read_topic(root, "ready2", &b);
  CU_ASSERT_FATAL(a.n == 2 && b.n == 2);
  for (size_t i = 0; i < 2; i++) {
    CU_ASSERT(a.v[i].value.len == b.v[i].value.len && !memcmp(a.v[i].value.data, b.v[i].value.data, a.v[i].value.len));
    altar_group_event_t g = {0};
    CU_ASSERT_FATAL(altar_decode_group(a.v[i].value.data, a.v[i].value.len, &g, &err) == 0);
    /* The ts of the event that completed the group, not a clock. */
    CU_ASSERT_DOUBLE_EQUAL(g.ts, i == 0 ? 1004.5 : 1008.25, 1e-9);
    altar_group_event_clear(&g);
  }
  recs_clear(&a);
  recs_clear(&b);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* A rebuild while workers keep writing status events: the new ledger must
 * resume where the replay stopped reading, not at a later end offset. A
 * transport wrapper appends one status event as soon as the replay has
 * read the status topic and closed its handle. */
static altar_transport_ops_t hook_ops;
static const char *hook_dir;
static int hook_closes_left; /* the late event comes when this reaches 0 */
static bool hook_fired;

static void hook_close(altar_transport_t *t) {
  altar_transport_local_ops.close(t);
  if (hook_closes_left > 0 && --hook_closes_left == 0) {
    hook_fired = true;
    altar_transport_t *p = open_local(hook_dir, NULL);
    status_ev(p, ALTAR_EV_SUBMITTED, "late", 0, ALTAR_STATE_PENDING, 2000.0);
    altar_error_t err = {0};
    CU_ASSERT(altar_transport_flush(p, 10000, &err) == 0);
    altar_transport_close(p);
  }
}

static void test_rebuild_resumes_where_it_read(void) {
  char *root = altar_test_tmpdir("outbox-rebuild-race");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(groups_yaml, strlen(groups_yaml), "t", &groups, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 0, ALTAR_STATE_PENDING, 1001.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 1, ALTAR_STATE_PENDING, 1002.0);
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);

  hook_ops = altar_transport_local_ops;
  hook_ops.name = "local-hook";
  hook_ops.close = hook_close;
  CU_ASSERT_FATAL(altar_transport_register(&hook_ops) == 0);
  hook_dir = root;
  /* The first handle the rebuild closes is the status reader, done with its
   * listing (it reads neither the ready nor the dead topic). */
  hook_closes_left = 1;
  hook_fired = false;
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", root);
  altar_ledger_t *l = open_ledger(ldir);
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_stats_t st = {0};
  uint64_t missing = 0;
  int rc = altar__reconciler_rebuild("local-hook", &props, l, &groups, &topics, NULL, NULL, true, &st, &missing, &err);
  if (rc) fprintf(stderr, "rebuild: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT(hook_fired);
  CU_ASSERT_EQUAL(st.events, 2);
  altar_buf_t v = {0};
  CU_ASSERT_FATAL(altar_ledger_aux_get(l, "s/st/0", 6, &v, &err) == 0);
  /* The late event sits at offset 2: the daemon must start there. */
  CU_ASSERT_STRING_EQUAL((const char *)v.data, "2");
  altar_buf_free(&v);

  /* And the daemon then applies it. */
  altar_transport_t *t = open_local(root, NULL);
  altar_reconciler_opts_t o = {
      .transport = t, .ledger = l, .groups = &groups, .topics = &topics, .exit_when_idle = true, .quiet = true};
  rc = altar__reconciler_run(&o, &st, &err);
  CU_ASSERT(rc == 0);
  CU_ASSERT_EQUAL(st.events, 1);
  altar_transport_close(t);
  altar_test_ledger_close(l);
  altar_strmap_clear(&props);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* A partition revoked while the daemon collects a batch (and assigned back
 * at once): the messages it had collected from it must not be applied, or
 * they are applied twice (once now without their offset, once re-read). */
static altar_transport_ops_t revoke_ops;
static altar_rebalance_cb revoke_user_cb;
static void *revoke_user_ctx;
static int revoke_armed;

static void revoke_tramp(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  (void)ctx;
  revoke_user_cb(t, kind, parts, n, revoke_user_ctx);
}

static int revoke_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n,
                            altar_rebalance_cb cb, void *ctx, altar_error_t *err) {
  revoke_user_cb = cb;
  revoke_user_ctx = ctx;
  return altar_transport_local_ops.subscribe(t, group, topics, n, revoke_tramp, NULL, err);
}

static int revoke_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err) {
  if (revoke_armed == 2) { /* the last event is in the batch being collected */
    revoke_armed = 3;
    altar_tp_t tp = {"st", 0, ALTAR_OFFSET_INVALID};
    revoke_user_cb(t, ALTAR_REBALANCE_REVOKE, &tp, 1, revoke_user_ctx);
    revoke_user_cb(t, ALTAR_REBALANCE_ASSIGN, &tp, 1, revoke_user_ctx);
  }
  int rc = altar_transport_local_ops.consume(t, timeout_ms, pmsg, err);
  if (!rc && *pmsg && revoke_armed == 1 && (*pmsg)->offset == 2) revoke_armed = 2;
  return rc;
}

static void test_revoke_mid_batch_applies_once(void) {
  char *root = altar_test_tmpdir("outbox-revoke");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  static const char *retry_yaml =
      "pair:\n  group_by: [job_id]\n  ready_when: {all_folds: 2}\n  on_failed: retry\n  max_restarts: 3\n";
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(retry_yaml, strlen(retry_yaml), "t", &groups, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 0, ALTAR_STATE_PENDING, 1001.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "j1", 1, ALTAR_STATE_PENDING, 1002.0);
  status_ev(p, ALTAR_EV_STATE, "j1", 0, ALTAR_STATE_FAILED, 1003.0);
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);

  revoke_ops = altar_transport_local_ops;
  revoke_ops.name = "local-revoke";
  revoke_ops.subscribe = revoke_subscribe;
  revoke_ops.consume = revoke_consume;
  int rc = altar_transport_register(&revoke_ops);
  CU_ASSERT_FATAL(rc == 0 || rc == ALTAR_EEXIST);
  revoke_armed = 1;
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", root);
  altar_strmap_set(&m, "rebalance.check.ms", "20");
  altar_transport_t *t = altar_transport_open("local-revoke", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  altar_ledger_t *l = open_ledger(ldir);
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_opts_t o = {
      .transport = t, .ledger = l, .groups = &groups, .topics = &topics, .exit_when_idle = true, .quiet = true};
  altar_reconciler_stats_t st = {0};
  rc = altar__reconciler_run(&o, &st, &err);
  if (rc) fprintf(stderr, "reconciler: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT_EQUAL(revoke_armed, 3);
  CU_ASSERT_EQUAL(st.events, 3);
  CU_ASSERT_EQUAL(st.retried, 1);
  altar_transport_close(t);
  altar_test_ledger_close(l);
  recs_t r;
  read_topic(root, "jobs", &r);
  CU_ASSERT_EQUAL(r.n, 1); /* one retry, not two */
  recs_clear(&r);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* Decodable but out-of-place status events (a state going backwards, a
 * release of a task never seen, the same release twice, a failure without
 * its failure object) must not stop the daemon: it keeps applying, and the
 * group after them still fires. */
static void test_daemon_survives_odd_events(void) {
  char *root = altar_test_tmpdir("outbox-odd");
  char ldir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(groups_yaml, strlen(groups_yaml), "t", &groups, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  status_ev(p, ALTAR_EV_SUBMITTED, "a", 0, ALTAR_STATE_PENDING, 1.0);
  status_ev(p, ALTAR_EV_STATE, "a", 0, ALTAR_STATE_SUCCEEDED, 2.0);
  status_ev(p, ALTAR_EV_STATE, "a", 0, ALTAR_STATE_RUNNING, 3.0);        /* backwards */
  status_ev(p, ALTAR_EV_STATE, "a", 0, ALTAR_STATE_FAILED, 4.0);         /* failed, no failure, after success */
  status_ev(p, ALTAR_EV_RELEASED, "ghost", 0, ALTAR_STATE_RUNNING, 5.0); /* never seen */
  status_ev(p, ALTAR_EV_RELEASED, "a", 0, ALTAR_STATE_RUNNING, 6.0);
  status_ev(p, ALTAR_EV_RELEASED, "a", 0, ALTAR_STATE_RUNNING, 7.0); /* twice */
  status_ev(p, ALTAR_EV_STATE, "b", 1, ALTAR_STATE_SUCCEEDED, 8.0);  /* no submitted */
  status_ev(p, ALTAR_EV_SUBMITTED, "ok", 0, ALTAR_STATE_PENDING, 9.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "ok", 1, ALTAR_STATE_PENDING, 10.0);
  status_ev(p, ALTAR_EV_STATE, "ok", 0, ALTAR_STATE_SUCCEEDED, 11.0);
  status_ev(p, ALTAR_EV_STATE, "ok", 1, ALTAR_STATE_SUCCEEDED, 12.0);
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);
  for (size_t batch = 1; batch <= 1000; batch *= 1000) {
    char d[600];
    snprintf(d, sizeof d, "%s-%zu", ldir, batch);
    altar_ledger_t *l = open_ledger(d);
    altar_transport_t *t = open_local(root, NULL);
    altar_topics_t topics = topics_named(batch == 1 ? "ready" : "ready2");
    altar_reconciler_opts_t o = {.transport = t,
                                 .ledger = l,
                                 .groups = &groups,
                                 .topics = &topics,
                                 .batch_max = batch,
                                 .group = batch == 1 ? "g1" : "g2",
                                 .exit_when_idle = true,
                                 .quiet = true};
    altar_reconciler_stats_t st = {0};
    int rc = altar__reconciler_run(&o, &st, &err);
    if (rc) fprintf(stderr, "reconciler (batch %zu): %s\n", batch, err.msg);
    CU_ASSERT(rc == 0);
    CU_ASSERT_EQUAL(st.events + st.poison, 12);
    altar_transport_close(t);
    altar_test_ledger_close(l);
    recs_t r;
    read_topic(root, topics.ready, &r);
    size_t ok_fired = 0;
    for (size_t i = 0; i < r.n; i++) {
      altar_group_event_t g = {0};
      CU_ASSERT_FATAL(altar_decode_group(r.v[i].value.data, r.v[i].value.len, &g, &err) == 0);
      ok_fired += !strcmp(g.group_key, "ok") || strstr(g.group_key, "ok") != NULL;
      altar_group_event_clear(&g);
    }
    CU_ASSERT_EQUAL(ok_fired, 1);
    recs_clear(&r);
  }
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* Counts the records of topic in dir whose group key is gk. */
static size_t count_group(const char *dir, const char *topic, const char *gk) {
  recs_t r;
  read_topic(dir, topic, &r);
  size_t n = 0;
  for (size_t i = 0; i < r.n; i++) {
    altar_group_event_t g = {0};
    altar_error_t err = {0};
    CU_ASSERT_FATAL(altar_decode_group(r.v[i].value.data, r.v[i].value.len, &g, &err) == 0);
    n += !strcmp(g.group_key, gk);
    altar_group_event_clear(&g);
  }
  recs_clear(&r);
  return n;
}

/* Runs the daemon over root's status topic into the ledger at dir until
 * idle; the stats in *pst and the ledger checksum in sum. */
static void run_until_idle(const char *root, const char *dir, const altar_group_specs_t *groups, const char *ready,
                           altar_reconciler_stats_t *pst, char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1]) {
  altar_error_t err = {0};
  altar_ledger_t *l = open_ledger(dir);
  altar_transport_t *t = open_local(root, NULL);
  altar_topics_t topics = topics_named(ready);
  altar_reconciler_opts_t o = {
      .transport = t, .ledger = l, .groups = groups, .topics = &topics, .exit_when_idle = true, .quiet = true};
  memset(pst, 0, sizeof *pst);
  int rc = altar__reconciler_run(&o, pst, &err);
  if (rc) fprintf(stderr, "reconciler: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  altar_transport_close(t);
  CU_ASSERT(altar_ledger_checksum(l, sum, &err) == 0);
  altar_test_ledger_close(l);
}

/* Rebuilds from root's status topic into dir with groups, publishing on
 * ready what the ledger at replaced_dir (NULL: none) did not decide; the
 * count published and the checksum. */
static uint64_t rebuild_into(const char *root, const char *dir, const altar_group_specs_t *groups, const char *ready,
                             const char *replaced_dir, char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1]) {
  altar_error_t err = {0};
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", root);
  altar_ledger_t *l = open_ledger(dir);
  altar_topics_t topics = topics_named(ready);
  altar_reconciler_stats_t st = {0};
  uint64_t missing = 0;
  altar_ledger_t *old = replaced_dir ? open_ledger(replaced_dir) : NULL;
  int rc = altar__reconciler_rebuild("local", &props, l, groups, &topics, NULL, old, true, &st, &missing, &err);
  if (rc) fprintf(stderr, "rebuild: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  CU_ASSERT(altar_ledger_checksum(l, sum, &err) == 0);
  if (old) altar_test_ledger_close(old);
  altar_test_ledger_close(l);
  altar_strmap_clear(&props);
  return missing;
}

/* A group whose readiness rule cannot decide (all_expected_folds over a
 * shard without its fold-count label, and no default) is held: the event is
 * applied, nothing of the group fires, is consumed or goes to the DLQ, and
 * the daemon goes on with the other groups. A rebuild holds it the same way
 * (same checksum). Restarted with the kind's configuration fixed, the
 * daemon fires the held group once, with the bytes a rebuild under the
 * fixed configuration makes; a further restart fires nothing more. */
static void test_misconfigured_group_is_held_then_fires_once(void) {
  char *root = altar_test_tmpdir("outbox-held");
  char ldir[512], l2dir[512], l3dir[512], l4dir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  snprintf(l2dir, sizeof l2dir, "%s/ledger2", root);
  snprintf(l3dir, sizeof l3dir, "%s/ledger3", root);
  snprintf(l4dir, sizeof l4dir, "%s/ledger4", root);
  static const char *yaml =
      "pair:\n  group_by: [job_id]\n  ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n"
      "  on_failed: dead_letter\n";
  static const char *fixed = "pair:\n  group_by: [job_id]\n"
                             "  ready_when: {all_expected_folds: {label: fold, count_label: num_folds, default: 1}}\n"
                             "  on_failed: dead_letter\n";
  altar_group_specs_t groups = {0}, groups_fixed = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(yaml, strlen(yaml), "t", &groups, &err) == 0);
  CU_ASSERT_FATAL(altar_group_specs_load_string(fixed, strlen(fixed), "t", &groups_fixed, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  ev_num_folds = "2";
  status_ev(p, ALTAR_EV_SUBMITTED, "good", 0, ALTAR_STATE_PENDING, 1.0);
  status_ev(p, ALTAR_EV_SUBMITTED, "good", 1, ALTAR_STATE_PENDING, 2.0);
  ev_num_folds = NULL; /* this shard lacks its fold count */
  status_ev(p, ALTAR_EV_SUBMITTED, "bad", 0, ALTAR_STATE_PENDING, 3.0);
  status_ev(p, ALTAR_EV_STATE, "bad", 0, ALTAR_STATE_SUCCEEDED, 4.0);
  ev_num_folds = "2";
  status_ev(p, ALTAR_EV_STATE, "good", 0, ALTAR_STATE_SUCCEEDED, 5.0);
  status_ev(p, ALTAR_EV_STATE, "good", 1, ALTAR_STATE_SUCCEEDED, 6.0);
  ev_num_folds = NULL;
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);

  altar_reconciler_stats_t st;
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1], sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  run_until_idle(root, ldir, &groups, "ready", &st, sum1);
  CU_ASSERT_EQUAL(st.fired, 1);
  CU_ASSERT_EQUAL(st.poison, 0);
  CU_ASSERT_EQUAL(st.events, 6); /* the held group's events are applied too */
  HELD_CHECK(st, 1);
  recs_t r;
  read_topic(root, "dlq", &r);
  CU_ASSERT_EQUAL(r.n, 0);
  recs_clear(&r);
  CU_ASSERT_EQUAL(count_group(root, "ready", "good"), 1);
  CU_ASSERT_EQUAL(count_group(root, "ready", "bad"), 0);
  CU_ASSERT_EQUAL(count_group(root, "dead", "bad"), 0);
  /* Its shard is kept, succeeded and not consumed. */
  altar_ledger_t *l = open_ledger(ldir);
  altar_ledger_entry_t e = {0};
  CU_ASSERT_FATAL(altar_ledger_get(l, "process", "bad-0", &e, &err) == 0);
  CU_ASSERT_EQUAL(e.rec.state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT(!e.rec.consumed);
  altar_ledger_entry_clear(&e);
  altar_test_ledger_close(l);

  /* A replay under the same configuration reaches the same ledger. */
  CU_ASSERT_EQUAL(rebuild_into(root, l2dir, &groups, "ready2", NULL, sum2), 1);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  /* A replay under the fixed configuration while the daemon's ledger still
   * holds the group: that ledger never published it, so the replay does,
   * and only it ("good" was decided there, below its offsets). */
  CU_ASSERT_EQUAL(rebuild_into(root, l4dir, &groups_fixed, "ready4", ldir, sum2), 1);
  CU_ASSERT_EQUAL(count_group(root, "ready4", "bad"), 1);
  CU_ASSERT_EQUAL(count_group(root, "ready4", "good"), 0);

  /* Restarted with the kind fixed: the held group fires, once. */
  run_until_idle(root, ldir, &groups_fixed, "ready", &st, sum1);
  CU_ASSERT_EQUAL(st.fired, 1);
  HELD_CHECK(st, 0);
  CU_ASSERT_EQUAL(count_group(root, "ready", "bad"), 1);
  run_until_idle(root, ldir, &groups_fixed, "ready", &st, sum1);
  CU_ASSERT_EQUAL(st.fired, 0);
  CU_ASSERT_EQUAL(count_group(root, "ready", "bad"), 1);
  CU_ASSERT_EQUAL(count_group(root, "ready", "good"), 1);
  read_topic(root, "dlq", &r);
  CU_ASSERT_EQUAL(r.n, 0);
  recs_clear(&r);

  /* A replay under the fixed configuration fires it at its own event, with
   * the same bytes: the daemon's ledger decided it, so nothing is missing,
   * and the ledgers agree. */
  CU_ASSERT_EQUAL(rebuild_into(root, l3dir, &groups_fixed, "ready", ldir, sum2), 0);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  CU_ASSERT_EQUAL(count_group(root, "ready", "bad"), 1);

  altar_group_specs_clear(&groups);
  altar_group_specs_clear(&groups_fixed);
  altar_test_rmtree(root);
  free(root);
}

/* Shards that end after their group fired (ready_when: single) are late:
 * recorded and consumed, counted, and never a second group event (a late
 * success would otherwise fire the group again, a late failure dead-letter
 * it); a rebuild decides the same. */
static void test_late_shards_recorded_not_refired(void) {
  char *root = altar_test_tmpdir("outbox-late");
  char ldir[512], l2dir[512];
  snprintf(ldir, sizeof ldir, "%s/ledger", root);
  snprintf(l2dir, sizeof l2dir, "%s/ledger2", root);
  static const char *yaml = "pair:\n  group_by: [job_id]\n  ready_when: single\n  on_failed: dead_letter\n";
  altar_group_specs_t groups = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(yaml, strlen(yaml), "t", &groups, &err) == 0);
  altar_transport_t *p = open_local(root, NULL);
  make_topics(p);
  for (int f = 0; f < 3; f++) status_ev(p, ALTAR_EV_SUBMITTED, "late", f, ALTAR_STATE_PENDING, 1.0 + f);
  status_ev(p, ALTAR_EV_STATE, "late", 0, ALTAR_STATE_SUCCEEDED, 5.0);
  status_ev(p, ALTAR_EV_STATE, "late", 1, ALTAR_STATE_FAILED, 6.0);
  status_ev(p, ALTAR_EV_STATE, "late", 2, ALTAR_STATE_SUCCEEDED, 7.0);
  CU_ASSERT_FATAL(altar_transport_flush(p, 10000, &err) == 0);
  altar_transport_close(p);
  altar_ledger_t *l = open_ledger(ldir);
  altar_transport_t *t = open_local(root, NULL);
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_opts_t o = {
      .transport = t, .ledger = l, .groups = &groups, .topics = &topics, .exit_when_idle = true, .quiet = true};
  altar_reconciler_stats_t st = {0};
  CU_ASSERT_FATAL(altar__reconciler_run(&o, &st, &err) == 0);
  CU_ASSERT_EQUAL(st.fired, 1);
  CU_ASSERT_EQUAL(st.dead_lettered, 0);
  CU_ASSERT_EQUAL(st.late, 2);
  altar_transport_close(t);
  altar_ledger_stats_t ls;
  CU_ASSERT_FATAL(altar_ledger_stats(l, &ls, &err) == 0);
  CU_ASSERT_EQUAL(ls.open, 0); /* nothing left open */
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);
  recs_t r;
  read_topic(root, "ready", &r);
  CU_ASSERT_EQUAL(r.n, 1);
  recs_clear(&r);
  read_topic(root, "dead", &r);
  CU_ASSERT_EQUAL(r.n, 0);
  recs_clear(&r);
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", root);
  altar_ledger_t *l2 = open_ledger(l2dir);
  altar_topics_t topics2 = topics_named("ready2");
  uint64_t missing = 0;
  CU_ASSERT_FATAL(
      altar__reconciler_rebuild("local", &props, l2, &groups, &topics2, NULL, NULL, true, &st, &missing, &err) == 0);
  char sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l2, sum2, &err) == 0);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  CU_ASSERT_EQUAL(missing, 1);
  altar_test_ledger_close(l2);
  altar_strmap_clear(&props);
  read_topic(root, "ready2", &r);
  CU_ASSERT_EQUAL(r.n, 1);
  recs_clear(&r);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* A job run again after its group settled (its worker was killed after
 * the terminal event was acknowledged but before the offset commit): the
 * rerun's events, same task key and a new handle, must neither open an
 * orphan record nor fire the group again with other shards, also after a
 * daemon restart, and a rebuild decides the same. */
static void encode_run(altar_status_event_kind_t kind, const char *job, int fold, const char *run, altar_state_t state,
                       double ts, altar_buf_t *out) {
  /* status_ev names the handle "<job>-<fold>"; a rerun gets another one by
   * way of a run name that only the handle id uses. */
  altar_status_event_t ev = {.v = ALTAR_SCHEMA_VERSION, .event = kind, .state = state, .ts = ts};
  char eid[64], tk[64], f[8];
  snprintf(eid, sizeof eid, "%s-%d-%s", job, fold, run);
  snprintf(tk, sizeof tk, "tk-%s-%d", job, fold);
  snprintf(f, sizeof f, "%d", fold);
  ev.task_key = tk;
  ev.kind = "pair";
  ev.worker = "host-a:1";
  altar_handle_init(&ev.handle, "process", eid);
  altar_strmap_set(&ev.handle.labels, "job_id", job);
  altar_strmap_set(&ev.handle.labels, "fold", f);
  if (kind == ALTAR_EV_SUBMITTED) {
    ev.spec = altar_spec_new("pair", "img:1");
    altar_spec_add_arg(ev.spec, "run");
    altar_spec_set_label(ev.spec, "job_id", job);
    altar_spec_set_label(ev.spec, "fold", f);
  }
  altar_error_t err = {0};
  altar_buf_reset(out);
  CU_ASSERT_FATAL(altar_encode_status(&ev, out, &err) == 0);
  altar_spec_free(ev.spec);
  altar_handle_clear(&ev.handle);
}

static void status_run(altar_transport_t *t, altar_status_event_kind_t kind, const char *job, int fold, const char *run,
                       altar_state_t state, double ts) {
  altar_buf_t b = {0};
  altar_error_t err = {0};
  encode_run(kind, job, fold, run, state, ts, &b);
  altar_produce_rec_t rec = {
      .topic = "st", .partition = 0, .key = job, .key_len = strlen(job), .value = b.data, .value_len = b.len};
  CU_ASSERT_FATAL(altar_transport_produce(t, &rec, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_flush(t, 10000, &err) == 0);
  altar_buf_free(&b);
}

static int count_open(altar_ledger_t *l) {
  altar_ledger_stats_t ls;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_stats(l, &ls, &err) == 0);
  return (int)ls.open;
}

static const char *pair_yaml =
    "pair:\n  group_by: [job_id]\n  ready_when: {count_at_least: 2}\n  on_failed: dead_letter\n";

/* Runs a reconciler daemon over the log in root until idle; returns its
 * ledger (in ldir), still open. */
static altar_ledger_t *run_daemon(const char *root, const char *ldir, const altar_group_specs_t *groups,
                                  const altar_topics_t *topics, altar_reconciler_stats_t *st) {
  altar_ledger_t *l = open_ledger(ldir);
  altar_transport_t *t = open_local(root, NULL);
  altar_reconciler_opts_t o = {
      .transport = t, .ledger = l, .groups = groups, .topics = topics, .exit_when_idle = true, .quiet = true};
  altar_error_t err = {0};
  memset(st, 0, sizeof *st);
  int rc = altar__reconciler_run(&o, st, &err);
  if (rc) fprintf(stderr, "daemon: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  altar_transport_close(t);
  return l;
}

/* Rebuilds a ledger in l2dir from the log in root, replacing the ledger at
 * replaced_dir (NULL: none); its checksum into sum. */
static uint64_t replay_checksum(const char *root, const char *l2dir, const altar_group_specs_t *groups,
                                const altar_topics_t *topics, const char *replaced_dir,
                                char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1]) {
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", root);
  altar_ledger_t *l2 = open_ledger(l2dir);
  altar_reconciler_stats_t st = {0};
  altar_error_t err = {0};
  uint64_t missing = 0;
  altar_ledger_t *old = replaced_dir ? open_ledger(replaced_dir) : NULL;
  CU_ASSERT_FATAL(
      altar__reconciler_rebuild("local", &props, l2, groups, topics, NULL, old, true, &st, &missing, &err) == 0);
  CU_ASSERT(altar_ledger_checksum(l2, sum, &err) == 0);
  if (old) altar_test_ledger_close(old);
  altar_test_ledger_close(l2);
  altar_strmap_clear(&props);
  return missing;
}

/* A log in root with its topics (one more local property `key` = `val`
 * when key is given), the "pair" group spec, and ledger dirs beside it. */
static altar_transport_t *pair_setup(const char *root, const char *key, const char *val, char ldir[512],
                                     char l2dir[512], altar_group_specs_t *groups) {
  snprintf(ldir, 512, "%s/ledger", root);
  snprintf(l2dir, 512, "%s/ledger2", root);
  memset(groups, 0, sizeof *groups);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_group_specs_load_string(pair_yaml, strlen(pair_yaml), "t", groups, &err) == 0);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", root);
  if (key) altar_strmap_set(&m, key, val);
  altar_transport_t *p = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(p != NULL);
  make_topics(p);
  return p;
}

/* The log of the rerun tests: group j1's two shards submitted, fold 0
 * succeeded (fold 1's success, which fires the group, is the caller's). */
static altar_transport_t *pair_log(const char *root, char ldir[512], char l2dir[512], altar_group_specs_t *groups) {
  altar_transport_t *p = pair_setup(root, NULL, NULL, ldir, l2dir, groups);
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 0, "r1", ALTAR_STATE_PENDING, 1.0);
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 1, "r1", ALTAR_STATE_PENDING, 2.0);
  status_run(p, ALTAR_EV_STATE, "j1", 0, "r1", ALTAR_STATE_SUCCEEDED, 3.0);
  return p;
}

/* A damaged record in a sealed segment of the status log: the daemon
 * reads past it (the log reports it), and a rebuild must read past it too
 * and reach the same ledger, not stop at it. */
static void test_rebuild_reads_past_a_damaged_record(void) {
  char *root = altar_test_tmpdir("outbox-damaged");
  char ldir[512], l2dir[512];
  altar_group_specs_t groups;
  altar_error_t err = {0};
  altar_transport_t *p = pair_setup(root, "segment.bytes", "2048", ldir, l2dir, &groups); /* several sealed segments */
  for (int j = 0; j < 10; j++) {
    char job[16];
    snprintf(job, sizeof job, "j%d", j);
    status_run(p, ALTAR_EV_SUBMITTED, job, 0, "r1", ALTAR_STATE_PENDING, 1.0 + j);
    status_run(p, ALTAR_EV_SUBMITTED, job, 1, "r1", ALTAR_STATE_PENDING, 1.1 + j);
    status_run(p, ALTAR_EV_STATE, job, 0, "r1", ALTAR_STATE_SUCCEEDED, 1.2 + j);
    status_run(p, ALTAR_EV_STATE, job, 1, "r1", ALTAR_STATE_SUCCEEDED, 1.3 + j);
  }
  altar_transport_close(p);
  char seg[600];
  snprintf(seg, sizeof seg, "%s/topics/st/0/%020d.log", root, 0);
  int fd = open(seg, O_RDWR);
  CU_ASSERT_FATAL(fd >= 0);
  struct stat sb;
  CU_ASSERT_FATAL(fstat(fd, &sb) == 0 && sb.st_size > 1000);
  unsigned char b;
  CU_ASSERT_FATAL(pread(fd, &b, 1, sb.st_size / 2) == 1);
  b ^= 0x20;
  CU_ASSERT_FATAL(pwrite(fd, &b, 1, sb.st_size / 2) == 1);
  close(fd);
  altar_topics_t topics = topics_named("ready"), topics2 = topics_named("ready2");
  altar_reconciler_stats_t st;
  altar_ledger_t *l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 9); /* the group that lost an event stays open */
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1], sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);
  CU_ASSERT_EQUAL(replay_checksum(root, l2dir, &groups, &topics2, NULL, sum2), 9);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* A replay longer than the reading thread's batches can hold (so batches
 * are reused), with every seventh event in a valid form other than our
 * encoder's (an extra key: the full decoder's path) among the fast path's:
 * the daemon and the rebuild reach the same ledger. */
static void test_rebuild_many_batches_mixed_forms(void) {
  char *root = altar_test_tmpdir("outbox-many");
  char ldir[512], l2dir[512];
  altar_group_specs_t groups;
  altar_error_t err = {0};
  altar_transport_t *p = pair_setup(root, "fsync", "never", ldir, l2dir, &groups);
  enum { JOBS = 5000 }; /* 20,000 events: more than 4 batches of 4,096 */
  altar_buf_t b = {0};
  size_t odd = 0;
  for (int j = 0; j < JOBS; j++) {
    char job[16];
    snprintf(job, sizeof job, "j%d", j);
    for (int step = 0; step < 4; step++) {
      int fold = step % 2;
      bool sub = step < 2;
      encode_run(sub ? ALTAR_EV_SUBMITTED : ALTAR_EV_STATE, job, fold, "r1",
                 sub ? ALTAR_STATE_PENDING : ALTAR_STATE_SUCCEEDED, 1.0 + j + step * 0.1, &b);
      if ((j * 4 + step) % 7 == 3) {
        CU_ASSERT_FATAL(b.data[0] == 0x8c); /* 12 fields → 13: "zz": nil sorts last */
        b.data[0] = 0x8d;
        altar_buf_append(&b, "\xa2zz\xc0", 4);
        odd++;
      }
      altar_produce_rec_t rec = {
          .topic = "st", .partition = 0, .key = job, .key_len = strlen(job), .value = b.data, .value_len = b.len};
      CU_ASSERT_FATAL(altar_transport_produce(p, &rec, &err) == 0);
    }
  }
  CU_ASSERT_FATAL(altar_transport_flush(p, 30000, &err) == 0);
  altar_transport_close(p);
  altar_buf_free(&b);
  CU_ASSERT(odd > 2000);
  altar_topics_t topics = topics_named("ready"), topics2 = topics_named("ready2");
  altar_reconciler_stats_t st;
  altar_ledger_t *l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.events, 4 * JOBS);
  CU_ASSERT_EQUAL(st.fired, JOBS);
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1], sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);
  CU_ASSERT_EQUAL(replay_checksum(root, l2dir, &groups, &topics2, NULL, sum2), JOBS);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

static void test_rerun_after_settle_is_ignored(void) {
  char *root = altar_test_tmpdir("outbox-rerun");
  char ldir[512], l2dir[512];
  altar_group_specs_t groups;
  altar_error_t err = {0};
  altar_transport_t *p = pair_log(root, ldir, l2dir, &groups);
  status_run(p, ALTAR_EV_STATE, "j1", 1, "r1", ALTAR_STATE_SUCCEEDED, 4.0); /* fires */
  /* Fold 1 runs again within this daemon's life (same batch even). */
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 1, "r2", ALTAR_STATE_PENDING, 5.0);
  status_run(p, ALTAR_EV_STATE, "j1", 1, "r2", ALTAR_STATE_SUCCEEDED, 6.0);

  altar_topics_t topics = topics_named("ready");
  altar_reconciler_stats_t st;
  altar_ledger_t *l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 1);
  CU_ASSERT_EQUAL(count_open(l), 0);
  altar_test_ledger_close(l);

  /* And fold 0 runs again after a daemon restart. */
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 0, "r3", ALTAR_STATE_PENDING, 7.0);
  status_run(p, ALTAR_EV_STATE, "j1", 0, "r3", ALTAR_STATE_RUNNING, 8.0);
  status_run(p, ALTAR_EV_STATE, "j1", 0, "r3", ALTAR_STATE_SUCCEEDED, 9.0);
  /* A late event of the run that settled still applies (kept for operators). */
  status_run(p, ALTAR_EV_STATE, "j1", 0, "r1", ALTAR_STATE_SUCCEEDED, 10.0);
  altar_transport_close(p);
  l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 0);
  CU_ASSERT_EQUAL(count_open(l), 0);
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);

  recs_t r;
  read_topic(root, "ready", &r);
  CU_ASSERT_EQUAL(r.n, 1);
  recs_clear(&r);

  char sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  altar_topics_t topics2 = topics_named("ready2");
  CU_ASSERT_EQUAL(replay_checksum(root, l2dir, &groups, &topics2, NULL, sum2), 1);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

static int count_aux(void *ctx, const void *k, size_t kl, const void *v, size_t vl) {
  (void)k, (void)kl, (void)v, (void)vl;
  (*(size_t *)ctx)++;
  return 0;
}

static size_t settled_keys(altar_ledger_t *l) {
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT(altar_ledger_aux_scan(l, ALTAR__SETTLED_PREFIX, 2, count_aux, &n, &err) == 0);
  return n;
}

/* A settlement counts for a horizon of event time, then a rerun applies
 * again; past twice the horizon it is dropped from disk too, and a replay
 * still agrees with the daemon. */
static void test_settlement_expires_then_is_pruned(void) {
  char *root = altar_test_tmpdir("outbox-settled-horizon");
  char ldir[512], l2dir[512];
  altar_group_specs_t groups;
  altar_error_t err = {0};
  altar_transport_t *p = pair_log(root, ldir, l2dir, &groups);
  const double H = ALTAR_SETTLED_HORIZON_S;
  status_run(p, ALTAR_EV_STATE, "j1", 1, "r1", ALTAR_STATE_SUCCEEDED, 4.0); /* fires at ts 4 */
  /* Within the horizon a rerun is set aside ... */
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 1, "r2", ALTAR_STATE_PENDING, 4.0 + H - 1);
  /* ... past it, it is work again (a new record, pending). */
  status_run(p, ALTAR_EV_SUBMITTED, "j1", 0, "r3", ALTAR_STATE_PENDING, 4.0 + H + 1);
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_stats_t st;
  altar_ledger_t *l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 1);
  CU_ASSERT_EQUAL(count_open(l), 1);   /* r3 only */
  CU_ASSERT_EQUAL(settled_keys(l), 1); /* one record holds the group's two members */
  altar_test_ledger_close(l);

  /* Twice the horizon later, the next event prunes both settlements. */
  status_run(p, ALTAR_EV_SUBMITTED, "j2", 0, "r1", ALTAR_STATE_PENDING, 4.0 + 2 * H + 10);
  altar_transport_close(p);
  l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(settled_keys(l), 0);
  CU_ASSERT_EQUAL(count_open(l), 2);
  char sum1[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT(altar_ledger_checksum(l, sum1, &err) == 0);
  altar_test_ledger_close(l);

  char sum2[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  CU_ASSERT_EQUAL(replay_checksum(root, l2dir, &groups, &topics, ldir, sum2), 0);
  CU_ASSERT_STRING_EQUAL(sum1, sum2);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

/* Which group events a rebuild publishes is decided by the ledger it
 * replaces, never by the ready topic: a group that ledger decided (below its
 * input offsets) is not published again, even to a ready topic that no
 * longer holds it (retention); a group made due after them is published,
 * once, even when the ready topic is one the ledger never wrote to. */
static void test_rebuild_publishes_what_the_replaced_ledger_did_not_decide(void) {
  char *root = altar_test_tmpdir("outbox-rebuild-owned");
  char ldir[512], l2dir[512], l3dir[512];
  altar_group_specs_t groups;
  altar_transport_t *p = pair_log(root, ldir, l2dir, &groups);
  snprintf(l3dir, sizeof l3dir, "%s/ledger3", root);
  status_run(p, ALTAR_EV_STATE, "j1", 1, "r1", ALTAR_STATE_SUCCEEDED, 4.0); /* j1 fires */
  altar_topics_t topics = topics_named("ready");
  altar_reconciler_stats_t st;
  altar_ledger_t *l = run_daemon(root, ldir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 1);
  altar_test_ledger_close(l);
  /* j2 completes while no reconciler runs: its group event was never out. */
  status_run(p, ALTAR_EV_SUBMITTED, "j2", 0, "r1", ALTAR_STATE_PENDING, 5.0);
  status_run(p, ALTAR_EV_SUBMITTED, "j2", 1, "r1", ALTAR_STATE_PENDING, 6.0);
  status_run(p, ALTAR_EV_STATE, "j2", 0, "r1", ALTAR_STATE_SUCCEEDED, 7.0);
  status_run(p, ALTAR_EV_STATE, "j2", 1, "r1", ALTAR_STATE_SUCCEEDED, 8.0);
  altar_transport_close(p);
  recs_t r;
  char sum[ALTAR_LEDGER_CHECKSUM_LEN + 1];
  /* An empty ready topic ("ready3", as after retention): j1 stays out. */
  CU_ASSERT_EQUAL(rebuild_into(root, l3dir, &groups, "ready3", ldir, sum), 1);
  read_topic(root, "ready3", &r);
  CU_ASSERT_EQUAL(r.n, 1);
  recs_clear(&r);
  /* The ready topic the daemon wrote: j2 joins j1, each once. */
  CU_ASSERT_EQUAL(rebuild_into(root, l2dir, &groups, "ready", ldir, sum), 1);
  read_topic(root, "ready", &r);
  CU_ASSERT_EQUAL(r.n, 2);
  if (r.n == 2) {
    CU_ASSERT(r.v[0].value.len != r.v[1].value.len || memcmp(r.v[0].value.data, r.v[1].value.data, r.v[0].value.len));
  }
  recs_clear(&r);
  /* The rebuilt ledger's offsets cover both: a daemon on it publishes nothing more. */
  l = run_daemon(root, l2dir, &groups, &topics, &st);
  CU_ASSERT_EQUAL(st.fired, 0);
  altar_test_ledger_close(l);
  read_topic(root, "ready", &r);
  CU_ASSERT_EQUAL(r.n, 2);
  recs_clear(&r);
  altar_group_specs_clear(&groups);
  altar_test_rmtree(root);
  free(root);
}

static int setup(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  return rc == 0 || rc == ALTAR_EEXIST ? 0 : -1;
}

static void add_tests(CU_pSuite suite__, bool memory) {
  ALTAR_TEST(test_stage_then_abort_drops_it);
  ALTAR_TEST(test_publish_after_commit_delete_on_ack);
  if (!memory) ALTAR_TEST(test_republish_on_restart_same_bytes); /* its first life is another process */
  ALTAR_TEST(test_carry_into_new_ledger);
  ALTAR_TEST(test_daemon_and_rebuild_agree_on_bytes);
  ALTAR_TEST(test_rebuild_reads_past_a_damaged_record);
  ALTAR_TEST(test_rebuild_many_batches_mixed_forms);
  ALTAR_TEST(test_rebuild_resumes_where_it_read);
  ALTAR_TEST(test_rebuild_publishes_what_the_replaced_ledger_did_not_decide);
  ALTAR_TEST(test_revoke_mid_batch_applies_once);
  ALTAR_TEST(test_daemon_survives_odd_events);
  ALTAR_TEST(test_misconfigured_group_is_held_then_fires_once);
  ALTAR_TEST(test_rerun_after_settle_is_ignored);
  ALTAR_TEST(test_late_shards_recorded_not_refired);
  ALTAR_TEST(test_settlement_expires_then_is_pruned);
}

static int setup_rocksdb(void) { return setup() || altar_test_ledger_init_rocksdb(); }
static int setup_memory(void) { return setup() || altar_test_ledger_init_memory(); }

static void add(void) {
  CU_pSuite rocksdb = CU_add_suite("outbox.rocksdb", setup_rocksdb, altar_test_ledger_cleanup);
  CU_pSuite memory = CU_add_suite("outbox.memory", setup_memory, altar_test_ledger_cleanup);
  if (!rocksdb || !memory) return;
  add_tests(rocksdb, false);
  add_tests(memory, true);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
