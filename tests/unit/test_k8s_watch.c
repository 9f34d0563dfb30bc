/* The Job watch's stream reader and map, fed bytes the way the API server
 * sends them (no server, no thread): events split across chunks, bookmarks,
 * DELETED, a 410 ERROR, malformed and oversized lines, and the rule that a
 * Job this process created is not overwritten by a late event of an older
 * Job of the same name. */
#include "backends/k8s_api.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID_A "aaaaaaaa-0000-0000-0000-000000000001"
#define UID_B "bbbbbbbb-0000-0000-0000-000000000002"

/* One event line: type, name, uid, rv, and a status fragment. */
static char *event(const char *type, const char *name, const char *uid, const char *rv, const char *status) {
  char *s = malloc(1024);
  snprintf(s, 1024,
           "{\"type\":\"%s\",\"object\":{\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\","
           "\"resourceVersion\":\"%s\",\"labels\":{\"altar.dev/pool\":\"normal\"}},\"status\":{%s}}}\n",
           type, name, uid, rv, status);
  return s;
}

static int feed(altar_k8s_watch_t *w, const char *text, bool *pexpired) {
  return altar__k8s_watch_test_feed(w, text, strlen(text), pexpired);
}

static altar_k8s_watch_view_t view(altar_k8s_watch_t *w, const char *name) {
  altar_k8s_watch_view_t v;
  altar__k8s_watch_lookup(w, &name, 1, &v);
  return v;
}

static void test_events_and_chunks(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  char *a = event("ADDED", "job-a", UID_A, "10", "\"active\":1");
  /* Split in the middle: nothing applies until the newline arrives. */
  size_t half = strlen(a) / 2;
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(w, a, half, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-a").seen, ALTAR_K8S_SEEN_UNKNOWN);
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(w, a + half, strlen(a) - half, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-a").seen, ALTAR_K8S_SEEN_LIVE);
  CU_ASSERT_EQUAL(view(w, "job-a").state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 1);
  uint64_t gen = altar__k8s_watch_generation(w);
  char *done = event("MODIFIED", "job-a", UID_A, "11",
                     "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}],\"succeeded\":1");
  char *bm =
      strdup("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Job\",\"metadata\":{\"resourceVersion\":\"12\"}}}\n");
  char both[2048];
  snprintf(both, sizeof both, "%s%s", done, bm); /* two events in one chunk */
  CU_ASSERT_EQUAL(feed(w, both, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-a").state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(altar__k8s_watch_wait(w, &gen, 0), 1); /* a change wakes a waiter */
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 0);
  char *del = event("DELETED", "job-a", UID_A, "13", "");
  CU_ASSERT_EQUAL(feed(w, del, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-a").seen, ALTAR_K8S_SEEN_DELETED);
  altar_k8s_watch_stats_t st;
  altar__k8s_watch_stats(w, &st);
  CU_ASSERT_EQUAL(st.events, 3);
  CU_ASSERT_EQUAL(st.deleted, 1);
  CU_ASSERT_EQUAL(st.bookmarks, 1);
  CU_ASSERT_EQUAL(st.bad_events, 0);
  CU_ASSERT_FALSE(expired);
  free(a);
  free(done);
  free(bm);
  free(del);
  altar__k8s_watch_close(w);
}

static void test_bad_input_is_skipped(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  const char *bad[] = {
      "not json\n",
      "[1,2,3]\n",
      "{\"type\":\"ADDED\"}\n",
      "{\"type\":7,\"object\":{}}\n",
      "{\"type\":\"SOMETHING\",\"object\":{\"metadata\":{\"name\":\"x\",\"uid\":\"u\"}}}\n",
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"Bad/Name\",\"uid\":\"u\"}}}\n",
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"ok\",\"uid\":\"" UID_A UID_A "\"}}}\n",
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"nouid\"}}}\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CU_ASSERT_EQUAL(feed(w, bad[i], &expired), 0);
  altar_k8s_watch_stats_t st;
  altar__k8s_watch_stats(w, &st);
  CU_ASSERT_EQUAL(st.bad_events, sizeof bad / sizeof *bad);
  CU_ASSERT_EQUAL(view(w, "ok").seen, ALTAR_K8S_SEEN_UNKNOWN);
  /* Blank lines are nothing; a good event after the bad ones still applies. */
  char *good = event("ADDED", "job-b", UID_B, "20", "");
  CU_ASSERT_EQUAL(feed(w, "\n\n", &expired), 0);
  CU_ASSERT_EQUAL(feed(w, good, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-b").seen, ALTAR_K8S_SEEN_LIVE);
  CU_ASSERT_EQUAL(view(w, "job-b").state, ALTAR_STATE_PENDING);
  /* A line that never ends is cut at the bound, not buffered forever. */
  size_t big = (5u << 20);
  char *huge = malloc(big);
  memset(huge, 'x', big);
  CU_ASSERT_EQUAL(altar__k8s_watch_test_feed(w, huge, big, &expired), -1);
  free(huge);
  free(good);
  altar__k8s_watch_close(w);
}

static void test_gone_means_relist(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                     "\"message\":\"too old resource version: 1 (5000)\",\"reason\":\"Expired\",\"code\":410}}\n";
  CU_ASSERT_EQUAL(feed(w, gone, &expired), -1); /* the stream ends there */
  CU_ASSERT_TRUE(expired);
  altar__k8s_watch_close(w);
}

/* A create's note stands until the watch reports that uid: a late event of
 * the older Job of the same name (even its DELETED) does not undo it. */
static void test_note_beats_late_events(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  char *old_done =
      event("MODIFIED", "job-c", UID_A, "30", "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  CU_ASSERT_EQUAL(feed(w, old_done, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-c").state, ALTAR_STATE_SUCCEEDED);
  /* Replaced: our new Job B of the same name. */
  CU_ASSERT_EQUAL(altar__k8s_watch_note(w, "job-c", UID_B, "normal", ALTAR_STATE_PENDING), 0);
  CU_ASSERT_EQUAL(view(w, "job-c").state, ALTAR_STATE_PENDING);
  char *old_again =
      event("MODIFIED", "job-c", UID_A, "31", "\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
  char *old_del = event("DELETED", "job-c", UID_A, "32", "");
  CU_ASSERT_EQUAL(feed(w, old_again, &expired), 0);
  CU_ASSERT_EQUAL(feed(w, old_del, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-c").seen, ALTAR_K8S_SEEN_LIVE);
  CU_ASSERT_EQUAL(view(w, "job-c").state, ALTAR_STATE_PENDING);
  /* Once the watch reports B, its events count. */
  char *new_run = event("ADDED", "job-c", UID_B, "33", "\"active\":1");
  CU_ASSERT_EQUAL(feed(w, new_run, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "job-c").state, ALTAR_STATE_RUNNING);
  /* A note for the uid the watch already has changes nothing. */
  CU_ASSERT_EQUAL(altar__k8s_watch_note(w, "job-c", UID_B, "normal", ALTAR_STATE_PENDING), 0);
  CU_ASSERT_EQUAL(view(w, "job-c").state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(altar__k8s_watch_note(w, "Not A Name", UID_B, "normal", ALTAR_STATE_PENDING), ALTAR_EINVAL);
  free(old_done);
  free(old_again);
  free(old_del);
  free(new_run);
  altar__k8s_watch_close(w);
}

/* Many Jobs: lookups stay one per name (a map, not a scan). */
static void test_many_jobs(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  enum { N = 20000 };
  for (int i = 0; i < N; i++) {
    char name[32], uid[48], rv[16];
    snprintf(name, sizeof name, "job-%d", i);
    snprintf(uid, sizeof uid, "%08d-0000-0000-0000-000000000000", i);
    snprintf(rv, sizeof rv, "%d", 100 + i);
    char *e = event("ADDED", name, uid, rv, i % 2 ? "\"active\":1" : "");
    CU_ASSERT_EQUAL(feed(w, e, &expired), 0);
    free(e);
  }
  const char *names[3] = {"job-0", "job-19999", "job-20000"};
  altar_k8s_watch_view_t v[3];
  altar__k8s_watch_lookup(w, names, 3, v);
  CU_ASSERT_EQUAL(v[0].seen, ALTAR_K8S_SEEN_LIVE);
  CU_ASSERT_EQUAL(v[0].state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(v[1].state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(v[2].seen, ALTAR_K8S_SEEN_UNKNOWN);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), N);
  altar__k8s_watch_close(w);
}

/* A deleted Job stays a tombstone (poll says container_missing) until its
 * TTL, then leaves the map; the name can come back as a new Job. */
static void test_deleted_entries_leave(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  enum { N = 3000 };
  for (int i = 0; i < N; i++) {
    char name[32], uid[48], rv[16];
    snprintf(name, sizeof name, "gone-%d", i);
    snprintf(uid, sizeof uid, "%08d-0000-0000-0000-000000000000", i);
    snprintf(rv, sizeof rv, "%d", 100 + i);
    char *a = event("ADDED", name, uid, rv, "");
    CU_ASSERT_EQUAL(feed(w, a, &expired), 0);
    free(a);
  }
  CU_ASSERT_EQUAL(altar__k8s_watch_size(w), N);
  for (int i = 0; i < N; i += 2) { /* every other one deleted */
    char name[32], uid[48], rv[16];
    snprintf(name, sizeof name, "gone-%d", i);
    snprintf(uid, sizeof uid, "%08d-0000-0000-0000-000000000000", i);
    snprintf(rv, sizeof rv, "%d", 10000 + i);
    char *d = event("DELETED", name, uid, rv, "");
    CU_ASSERT_EQUAL(feed(w, d, &expired), 0);
    free(d);
  }
  /* Within the TTL: still known deleted. */
  CU_ASSERT_EQUAL(view(w, "gone-0").seen, ALTAR_K8S_SEEN_DELETED);
  CU_ASSERT_EQUAL(altar__k8s_watch_size(w), N);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), N / 2);
  /* gone-2 comes back as a new Job of ours before its tombstone expires. */
  CU_ASSERT_EQUAL(altar__k8s_watch_note(w, "gone-2", UID_B, "normal", ALTAR_STATE_PENDING), 0);
  altar__k8s_watch_test_tombstone_ttl(w, 0);
  /* Past it: the deleted ones are gone from the map; every other name,
   * live ones and the one made again, is still found. */
  CU_ASSERT_EQUAL(altar__k8s_watch_size(w), N / 2 + 1);
  bool all = true;
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "gone-%d", i);
    altar_k8s_seen_t want = i % 2 || i == 2 ? ALTAR_K8S_SEEN_LIVE : ALTAR_K8S_SEEN_UNKNOWN;
    if (view(w, name).seen != want) all = false;
  }
  CU_ASSERT_TRUE(all);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), N / 2 + 1);
  /* A name that left can be watched again. */
  char *again = event("ADDED", "gone-0", UID_A, "20000", "\"active\":1");
  CU_ASSERT_EQUAL(feed(w, again, &expired), 0);
  CU_ASSERT_EQUAL(view(w, "gone-0").seen, ALTAR_K8S_SEEN_LIVE);
  CU_ASSERT_EQUAL(view(w, "gone-0").state, ALTAR_STATE_RUNNING);
  free(again);
  altar__k8s_watch_close(w);
}

/* The per-pool active count follows every change: state, pool label,
 * deletion, and a create's note before its first event. */
static void test_active_counts_follow_changes(void) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  bool expired = false;
  CU_ASSERT_EQUAL(altar__k8s_watch_note(w, "job-n", UID_A, "gpu", ALTAR_STATE_PENDING), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "gpu"), 1);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 0);
  /* Its first event says pool normal (the label the server holds wins). */
  char *e1 = event("ADDED", "job-n", UID_A, "40", "\"active\":1");
  CU_ASSERT_EQUAL(feed(w, e1, &expired), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "gpu"), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 1);
  char *e2 = event("MODIFIED", "job-n", UID_A, "41", "\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]");
  CU_ASSERT_EQUAL(feed(w, e2, &expired), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 0);
  char *e3 = event("ADDED", "job-m", UID_B, "42", "");
  char *e4 = event("DELETED", "job-m", UID_B, "43", "");
  CU_ASSERT_EQUAL(feed(w, e3, &expired), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 1);
  CU_ASSERT_EQUAL(feed(w, e4, &expired), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "normal"), 0);
  CU_ASSERT_EQUAL(altar__k8s_watch_active(w, "never-seen"), 0);
  free(e1);
  free(e2);
  free(e3);
  free(e4);
  altar__k8s_watch_close(w);
}

static void add_suites(void) {
  ALTAR_SUITE("k8s-watch", NULL, NULL);
  ALTAR_TEST(test_events_and_chunks);
  ALTAR_TEST(test_bad_input_is_skipped);
  ALTAR_TEST(test_gone_means_relist);
  ALTAR_TEST(test_note_beats_late_events);
  ALTAR_TEST(test_many_jobs);
  ALTAR_TEST(test_deleted_entries_leave);
  ALTAR_TEST(test_active_counts_follow_changes);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
