/* Group events out already (reconciler/published_seen.h): outbox entries
 * whose event id was seen on the ready or dead topics are deleted, never
 * published, whichever comes first (the id read off the topic, or the
 * entry staged); held entries (a standby publishes nothing) are matched
 * later; other entries are left alone; the reader of the publish topics
 * goes on from where it stopped and notes only what is new. In-memory
 * ledger, the local transport. */
#include "altar/codec.h"
#include "altar/ledger.h"
#include "altar/plugin/transport.h"
#include "reconciler/outbox.h"
#include "reconciler/published_seen.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static altar_transport_t *open_local(const char *dir) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

/* A fired group event of one member, and its id (caller frees both). */
static void group_event(const char *key, altar_buf_t *out, char **pid) {
  char group_key[64];
  snprintf(group_key, sizeof group_key, "%s", key);
  const char *keys[] = {group_key};
  altar_handle_t h = {.backend = (char *)"process", .external_id = (char *)group_key};
  altar_group_event_t g = {.v = 1,
                           .event = ALTAR_GROUP_FIRED,
                           .kind = (char *)"fold",
                           .group_key = (char *)group_key,
                           .shards = &h,
                           .n_shards = 1,
                           .ts = 1.0,
                           .members_total = 1};
  char id[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_FATAL(altar_group_event_id("fold", group_key, keys, 1, id) == 0);
  g.event_id = strdup(id);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_group(&g, out, &err) == 0);
  *pid = g.event_id;
}

static size_t outbox_entries(altar__outbox_t *ob) {
  size_t n = 0;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar__outbox_count(ob, &n, &err) == 0);
  return n;
}

static void stage(altar__outbox_t *ob, const char *topic, const altar_buf_t *v) {
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_ledger_begin(ob->ledger, &err) == 0);
  CU_ASSERT_FATAL(altar__outbox_stage(ob, topic, "k", v->data, v->len, NULL, NULL, NULL, &err) == 0);
  CU_ASSERT_FATAL(altar_ledger_commit(ob->ledger, &err) == 0);
}

/* A standby's copy: entries held, matched with ids in either order. */
static void test_held_entries_pruned_by_seen_ids(void) {
  altar_error_t err = {0};
  altar_ledger_t *l = altar_ledger_memory_open(&err);
  CU_ASSERT_FATAL(l != NULL);
  altar__outbox_t ob;
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, NULL, &err) == 0);
  altar__published_seen_t s = {.ledger = l};
  ob.hold = altar__published_seen_on_hold;
  ob.hold_ctx = &s;
  ob.skip = altar__published_seen_skip;
  ob.skip_ctx = &s;
  altar_buf_t a = {0}, b = {0}, c = {0}, job = {0};
  char *ida, *idb, *idc;
  group_event("ga", &a, &ida);
  group_event("gb", &b, &idb);
  group_event("gc", &c, &idc);
  CU_ASSERT_FATAL(altar_buf_append(&job, "not a group event", 17) == 0);
  /* b was seen before it is staged: deleted as it is staged. */
  CU_ASSERT_EQUAL(altar__published_seen_note(&s, idb, &err), 0);
  uint64_t first = ob.next_seq;
  stage(&ob, "ready", &a);
  stage(&ob, "ready", &b);
  stage(&ob, "ready", &c);
  stage(&ob, "jobs", &job);
  CU_ASSERT_EQUAL(altar__outbox_publish_from(&ob, first, &err), 0);
  CU_ASSERT_EQUAL(ob.in_flight, 0); /* nothing produced while holding */
  CU_ASSERT_EQUAL(outbox_entries(&ob), 3);
  CU_ASSERT_EQUAL(altar__published_seen_pending(&s), 2); /* a and c; the job is no group event */
  CU_ASSERT_EQUAL(altar__published_seen_count(&s), 0);
  /* a is seen after it was held: its entry goes. */
  CU_ASSERT_EQUAL(altar__published_seen_note(&s, ida, &err), 0);
  CU_ASSERT_EQUAL(outbox_entries(&ob), 2);
  CU_ASSERT_EQUAL(altar__published_seen_pending(&s), 1);
  CU_ASSERT_EQUAL(s.dropped, 2);
  /* An id seen twice (published twice) matches one entry at most. */
  CU_ASSERT_EQUAL(altar__published_seen_note(&s, "someone-elses", &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_note(&s, "someone-elses", &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_count(&s), 1);
  CU_ASSERT_FALSE(altar__published_seen_take(&s, idc));
  CU_ASSERT_TRUE(altar__published_seen_take(&s, "someone-elses"));
  CU_ASSERT_FALSE(altar__published_seen_take(&s, "someone-elses"));
  /* After a restart every entry left is held again, c and the job. */
  altar__published_seen_t s2 = {.ledger = l};
  ob.hold_ctx = &s2;
  ob.skip_ctx = &s2;
  CU_ASSERT_EQUAL(altar__outbox_publish_from(&ob, 0, &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_pending(&s2), 1);
  CU_ASSERT_EQUAL(altar__published_seen_note(&s2, idc, &err), 0);
  CU_ASSERT_EQUAL(outbox_entries(&ob), 1); /* the job stays */
  free(ida);
  free(idb);
  free(idc);
  altar_buf_free(&a);
  altar_buf_free(&b);
  altar_buf_free(&c);
  altar_buf_free(&job);
  altar__published_seen_free(&s);
  altar__published_seen_free(&s2);
  altar_ledger_close(l);
  altar__outbox_close(&ob);
}

/* The owner after a takeover: seen ids skip their entries, the rest are produced. */
static void test_owner_skips_seen_and_publishes_the_rest(void) {
  char *dir = altar_test_tmpdir("pubseen");
  altar_transport_t *t = open_local(dir);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "ready", 1, &err) == 0);
  altar_ledger_t *l = altar_ledger_memory_open(&err);
  altar__outbox_t ob;
  CU_ASSERT_FATAL(altar__outbox_open(&ob, l, t, &err) == 0);
  altar_transport_set_delivery(t, altar__outbox_on_delivery, &ob, NULL, NULL);
  altar__published_seen_t s = {0};
  ob.skip = altar__published_seen_skip;
  ob.skip_ctx = &s;
  altar_buf_t a = {0}, b = {0};
  char *ida, *idb;
  group_event("ga", &a, &ida);
  group_event("gb", &b, &idb);
  CU_ASSERT_EQUAL(altar__published_seen_note(&s, ida, &err), 0);
  uint64_t first = ob.next_seq;
  stage(&ob, "ready", &a);
  stage(&ob, "ready", &b);
  CU_ASSERT_EQUAL(altar__outbox_publish_from(&ob, first, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 5000, &err), 0);
  CU_ASSERT_EQUAL(ob.skipped, 1);
  CU_ASSERT_EQUAL(ob.published, 1);
  CU_ASSERT_EQUAL(outbox_entries(&ob), 0);
  CU_ASSERT_EQUAL(altar__published_seen_count(&s), 0);
  /* What reached the topic: b only; the reader notes it from offset 0 on,
   * then, going on from where it stopped, only what came since. */
  altar__published_seen_t r = {0};
  altar__published_reader_t rd = {.tname = "local"};
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", dir);
  rd.props = &props;
  altar_topics_t topics = {.ready = (char *)"ready", .dead = (char *)"dead"};
  altar__pub_pos_t *pos = NULL;
  size_t npos = 0;
  CU_ASSERT_EQUAL(altar__published_read(&r, &rd, t, NULL, &topics, &pos, &npos, 10000, &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_count(&r), 1);
  CU_ASSERT_TRUE(altar__published_seen_take(&r, idb));
  CU_ASSERT_EQUAL_FATAL(npos, 1);
  CU_ASSERT_EQUAL(pos[0].next, 1);
  ob.skip = NULL;
  stage(&ob, "ready", &a);
  CU_ASSERT_EQUAL(altar__outbox_publish_from(&ob, ob.next_seq - 1, &err), 0);
  CU_ASSERT_EQUAL(altar_transport_flush(t, 5000, &err), 0);
  CU_ASSERT_EQUAL(altar__published_read(&r, &rd, t, NULL, &topics, &pos, &npos, 10000, &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_count(&r), 1);
  CU_ASSERT_TRUE(altar__published_seen_take(&r, ida));
  CU_ASSERT_EQUAL(pos[0].next, 2);
  /* Nothing new: nothing read, the position stays. */
  CU_ASSERT_EQUAL(altar__published_read(&r, &rd, t, NULL, &topics, &pos, &npos, 10000, &err), 0);
  CU_ASSERT_EQUAL(altar__published_seen_count(&r), 0);
  CU_ASSERT_EQUAL(pos[0].next, 2);
  free(pos);
  altar__published_reader_close(&rd);
  altar_strmap_clear(&props);
  altar__published_seen_free(&r);
  altar__published_seen_free(&s);
  free(ida);
  free(idb);
  altar_buf_free(&a);
  altar_buf_free(&b);
  altar_transport_close(t);
  altar_ledger_close(l);
  altar_test_rmtree(dir);
  free(dir);
  altar__outbox_close(&ob);
}

static int setup(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  return rc == 0 || rc == ALTAR_EEXIST ? 0 : -1;
}

static void add(void) {
  ALTAR_SUITE("published_seen", setup, NULL);
  ALTAR_TEST(test_held_entries_pruned_by_seen_ids);
  ALTAR_TEST(test_owner_skips_seen_and_publishes_the_rest);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
