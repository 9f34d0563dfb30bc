/* The worker's offset tracker: commit points, metadata, restart skipping. */
#include "testutil.h"
#include "worker/offset_tracker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void commit_point(altar__offset_tracker_t *t, int64_t *off, char *meta, bool *changed) {
  CU_ASSERT_EQUAL_FATAL(altar__offset_tracker_commit_point(t, "jobs", 0, off, meta, 256, changed), 0);
}

static void test_commit_lowest_unfinished(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 0, -1, NULL, NULL), 0);
  int64_t off;
  char meta[256];
  bool ch;
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, -1); /* nothing seen, nothing committed */
  for (int64_t o = 0; o < 10; o++) CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, o), 0);
  altar__offset_tracker_finished(t, "jobs", 0, 0);
  altar__offset_tracker_finished(t, "jobs", 0, 1);
  altar__offset_tracker_finished(t, "jobs", 0, 3);
  altar__offset_tracker_finished(t, "jobs", 0, 4);
  altar__offset_tracker_finished(t, "jobs", 0, 5);
  altar__offset_tracker_finished(t, "jobs", 0, 8);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 2);
  CU_ASSERT_STRING_EQUAL(meta, "o2:1-3,6/8"); /* 2, 6, 7 and 9 are held */
  CU_ASSERT(ch);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT(!ch); /* unchanged: no need to commit again */
  CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 0), 4);
  altar__offset_tracker_finished(t, "jobs", 0, 2);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 6);
  CU_ASSERT_STRING_EQUAL(meta, "o2:2/4");
  for (int64_t o = 6; o < 10; o++) altar__offset_tracker_finished(t, "jobs", 0, o);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 10);
  CU_ASSERT_STRING_EQUAL(meta, "");
  CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 0), 0);
  altar__offset_tracker_free(t);
}

static void test_restart_skips_finished(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  altar__offset_tracker_assign(t, "jobs", 0, 100, "o1:1-3,6", NULL);
  CU_ASSERT(!altar__offset_tracker_already_done(t, "jobs", 0, 100));
  CU_ASSERT(altar__offset_tracker_already_done(t, "jobs", 0, 101));
  CU_ASSERT(altar__offset_tracker_already_done(t, "jobs", 0, 103));
  CU_ASSERT(!altar__offset_tracker_already_done(t, "jobs", 0, 104));
  CU_ASSERT(altar__offset_tracker_already_done(t, "jobs", 0, 106));
  CU_ASSERT(!altar__offset_tracker_already_done(t, "jobs", 0, 107));
  int64_t off;
  char meta[256];
  bool ch;
  /* Before anything is re-consumed, a commit must keep the prior ranges. */
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 100);
  CU_ASSERT_STRING_EQUAL(meta, "o1:1-3,6");
  /* Re-consume 100 (runs), 101 (skipped as done). */
  altar__offset_tracker_seen(t, "jobs", 0, 100);
  altar__offset_tracker_seen(t, "jobs", 0, 101);
  altar__offset_tracker_finished(t, "jobs", 0, 101);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 100);
  CU_ASSERT_STRING_EQUAL(meta, "o2:1-3,6/2"); /* 100 runs: held */
  altar__offset_tracker_finished(t, "jobs", 0, 100);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 102); /* 102, 103 not re-seen yet but known done: still listed */
  CU_ASSERT_STRING_EQUAL(meta, "o1:0-1,4");
  altar__offset_tracker_free(t);
}

static void test_malformed_metadata_ignored(void) {
  const char *bad[] = {"garbage", "o1:-1",
                       "o1:3-1",  "o1:1,,2",
                       "o1:2,1",  "o1:1-",
                       "o1:1,",   "o1:99999999999999999999",
                       "o2:1",    "o2:1/0",
                       "o2:/",    "o2:1/x",
                       "o2:1,/3", "o2:/3/4",
                       "o2:/-3",  "o2:/+3",
                       "o3:/3",   "o2:1/99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar__offset_tracker_t *t = altar__offset_tracker_new();
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 0, 5, bad[i], &err), 0);
    CU_ASSERT(strstr(err.msg, "malformed") != NULL);
    for (int64_t o = 5; o < 10; o++) {
      CU_ASSERT(!altar__offset_tracker_already_done(t, "jobs", 0, o));
      CU_ASSERT(!altar__offset_tracker_held(t, "jobs", 0, o));
    }
    altar__offset_tracker_free(t);
  }
}

static void test_out_of_order_and_unknown(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, 1), ALTAR_ENOTFOUND);
  altar__offset_tracker_assign(t, "jobs", 0, 10, NULL, NULL);
  CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, 9), ALTAR_EINVAL); /* below committed */
  CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, 12), 0);           /* gaps are fine */
  CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, 12), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 0, 20), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 0, 12), 0);
  CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 0, 12), 0); /* twice is harmless */
  altar__offset_tracker_revoke(t, "jobs", 0);
  CU_ASSERT(!altar__offset_tracker_assigned(t, "jobs", 0));
  altar__offset_tracker_free(t);
}

static void test_metadata_bounded(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  altar__offset_tracker_assign(t, "jobs", 0, 0, NULL, NULL);
  /* Every even offset finished, every odd one still running: worst case for ranges. */
  for (int64_t o = 0; o < 20000; o++) altar__offset_tracker_seen(t, "jobs", 0, o);
  for (int64_t o = 2; o < 20000; o += 2) altar__offset_tracker_finished(t, "jobs", 0, o);
  char meta[ALTAR_OFFSET_META_MAX + 1];
  int64_t off;
  bool ch;
  CU_ASSERT_EQUAL(altar__offset_tracker_commit_point(t, "jobs", 0, &off, meta, sizeof meta, &ch), 0);
  CU_ASSERT_EQUAL(off, 0);
  CU_ASSERT(strlen(meta) <= ALTAR_OFFSET_META_MAX);
  CU_ASSERT(strncmp(meta, "o2:2,4,6", 8) == 0);
  /* The held bound is kept whatever the ranges take. */
  size_t ml = strlen(meta);
  CU_ASSERT(ml > 6 && !strcmp(meta + ml - 6, "/20000"));
  /* What was left out is not claimed done: a restart re-runs it rather than
   * skipping, and, being below the held bound, waits for its holder first. */
  altar__offset_tracker_t *r = altar__offset_tracker_new();
  altar__offset_tracker_assign(r, "jobs", 0, off, meta, NULL);
  CU_ASSERT(altar__offset_tracker_already_done(r, "jobs", 0, 2));
  CU_ASSERT(!altar__offset_tracker_held(r, "jobs", 0, 2));
  CU_ASSERT(!altar__offset_tracker_already_done(r, "jobs", 0, 19998));
  CU_ASSERT(altar__offset_tracker_held(r, "jobs", 0, 19998));
  CU_ASSERT(!altar__offset_tracker_already_done(r, "jobs", 0, 3));
  CU_ASSERT(altar__offset_tracker_held(r, "jobs", 0, 3));
  CU_ASSERT(!altar__offset_tracker_held(r, "jobs", 0, 20000)); /* never read: not held */
  altar__offset_tracker_free(r);
  altar__offset_tracker_free(t);
}

/* Random model check: the committed offset + metadata never claims an
 * unfinished job done, and never forgets a finished one below the bound. */
static void test_random_model(void) {
  unsigned seed = 12345;
  for (int round = 0; round < 200; round++) {
    altar__offset_tracker_t *t = altar__offset_tracker_new();
    altar__offset_tracker_assign(t, "jobs", 3, 0, NULL, NULL);
    bool done[300] = {0};
    int n = 50 + (int)(rand_r(&seed) % 250);
    for (int o = 0; o < n; o++) altar__offset_tracker_seen(t, "jobs", 3, o);
    for (int k = 0; k < n; k++) {
      int o = (int)(rand_r(&seed) % (unsigned)n);
      done[o] = true;
      altar__offset_tracker_finished(t, "jobs", 3, o);
    }
    char meta[ALTAR_OFFSET_META_MAX + 1];
    int64_t off;
    altar__offset_tracker_commit_point(t, "jobs", 3, &off, meta, sizeof meta, NULL);
    altar__offset_tracker_t *r = altar__offset_tracker_new();
    altar__offset_tracker_assign(r, "jobs", 3, off, meta, NULL);
    for (int o = 0; o < n; o++) {
      if (o < off) CU_ASSERT(done[o]);
      if (o >= off) CU_ASSERT_EQUAL(altar__offset_tracker_already_done(r, "jobs", 3, o), done[o]);
      if (o >= off) CU_ASSERT_EQUAL(altar__offset_tracker_held(r, "jobs", 3, o), !done[o]);
    }
    altar__offset_tracker_free(r);
    altar__offset_tracker_free(t);
  }
}

/* A worker revoked while it waited for an earlier holder's jobs carries
 * them on: its metadata keeps the held bound it read, even for offsets it
 * never reached, and once they are finished the bound goes. */
static void test_held_carried_on(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 0, 50, "o2:2/5", NULL), 0);
  CU_ASSERT(altar__offset_tracker_held(t, "jobs", 0, 50));
  CU_ASSERT(altar__offset_tracker_held(t, "jobs", 0, 51));
  CU_ASSERT(!altar__offset_tracker_held(t, "jobs", 0, 52)); /* finished */
  CU_ASSERT(altar__offset_tracker_held(t, "jobs", 0, 54));
  CU_ASSERT(!altar__offset_tracker_held(t, "jobs", 0, 55));
  CU_ASSERT(!altar__offset_tracker_held(t, "jobs", 0, 49));
  int64_t off;
  char meta[256];
  bool ch;
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 50);
  CU_ASSERT_STRING_EQUAL(meta, "o2:2/5"); /* nothing read yet: all carried */
  altar__offset_tracker_seen(t, "jobs", 0, 50);
  altar__offset_tracker_finished(t, "jobs", 0, 50); /* a done marker came */
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 51);
  CU_ASSERT_STRING_EQUAL(meta, "o2:1/4");
  for (int64_t o = 51; o < 55; o++) {
    altar__offset_tracker_seen(t, "jobs", 0, o);
    altar__offset_tracker_finished(t, "jobs", 0, o);
  }
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 55);
  CU_ASSERT_STRING_EQUAL(meta, "");
  /* An old reader's form is still read: no held bound. */
  CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 1, 7, "o1:1", NULL), 0);
  CU_ASSERT(!altar__offset_tracker_held(t, "jobs", 1, 7));
  CU_ASSERT(altar__offset_tracker_already_done(t, "jobs", 1, 8));
  altar__offset_tracker_free(t);
}

/* The same with gaps between the offsets seen (offsets that are no jobs):
 * finished stretches join across them, and a restart still never skips an
 * unfinished job nor reruns a finished one. */
static void test_random_model_gaps(void) {
  unsigned seed = 777;
  for (int round = 0; round < 200; round++) {
    altar__offset_tracker_t *t = altar__offset_tracker_new();
    altar__offset_tracker_assign(t, "jobs", 3, 0, NULL, NULL);
    bool seen[900] = {0}, done[900] = {0};
    int n = 50 + (int)(rand_r(&seed) % 250), top = 0;
    for (int k = 0; k < n; k++) {
      top += 1 + (int)(rand_r(&seed) % 3);
      seen[top] = true;
      CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 3, top), 0);
    }
    for (int k = 0; k < n; k++) {
      int o = 1 + (int)(rand_r(&seed) % (unsigned)top);
      if (!seen[o]) continue;
      done[o] = true;
      CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 3, o), 0);
    }
    size_t unfinished = 0;
    for (int o = 0; o <= top; o++) unfinished += seen[o] && !done[o];
    CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 3), unfinished);
    char meta[ALTAR_OFFSET_META_MAX + 1];
    int64_t off;
    altar__offset_tracker_commit_point(t, "jobs", 3, &off, meta, sizeof meta, NULL);
    altar__offset_tracker_t *r = altar__offset_tracker_new();
    altar__offset_tracker_assign(r, "jobs", 3, off, meta, NULL);
    for (int o = 0; o <= top; o++) {
      if (!seen[o]) continue;
      if (o < off) CU_ASSERT(done[o]);
      if (o >= off) CU_ASSERT_EQUAL(altar__offset_tracker_already_done(r, "jobs", 3, o), done[o]);
    }
    altar__offset_tracker_free(r);
    altar__offset_tracker_free(t);
  }
}

/* Memory follows what is in flight, never what finished: one job held at
 * offset 0 while 10^5 finish above it; a window of 32 in flight finishing
 * out of order across 10^5 offsets with gaps; a burst of 10^4 in flight,
 * given back once they finish. */
static void test_memory_bounded_by_in_flight(void) {
  altar__offset_tracker_t *t = altar__offset_tracker_new();
  CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 0, 0, NULL, NULL), 0);
  CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, 0), 0);
  size_t most = 0;
  for (int64_t o = 1; o <= 100000; o++) {
    CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 0, o), 0);
    CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 0, o), 0);
    if (altar__offset_tracker_footprint(t) > most) most = altar__offset_tracker_footprint(t);
  }
  CU_ASSERT(most <= 2048);
  CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 0), 1);
  int64_t off;
  char meta[256];
  bool ch;
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 0);
  CU_ASSERT_STRING_EQUAL(meta, "o2:1-100000/100001");
  altar__offset_tracker_finished(t, "jobs", 0, 0);
  commit_point(t, &off, meta, &ch);
  CU_ASSERT_EQUAL(off, 100001);
  CU_ASSERT_STRING_EQUAL(meta, "");

  /* A sliding window: 32 in flight, the oldest not always first to end. */
  unsigned seed = 99;
  int64_t window[32], o = 200000;
  CU_ASSERT_EQUAL(altar__offset_tracker_assign(t, "jobs", 1, o, NULL, NULL), 0);
  for (int i = 0; i < 32; i++, o += 1 + (o % 7 == 0)) {
    window[i] = o;
    altar__offset_tracker_seen(t, "jobs", 1, o);
  }
  most = 0;
  for (int k = 0; k < 100000; k++, o += 1 + (o % 7 == 0)) {
    int i = (int)(rand_r(&seed) % 32);
    CU_ASSERT_EQUAL(altar__offset_tracker_finished(t, "jobs", 1, window[i]), 0);
    window[i] = o;
    CU_ASSERT_EQUAL(altar__offset_tracker_seen(t, "jobs", 1, o), 0);
    if (altar__offset_tracker_footprint(t) > most) most = altar__offset_tracker_footprint(t);
  }
  CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 1), 32);
  CU_ASSERT(most <= 8192);

  /* A burst: 10^4 in flight at once, then all finished. */
  for (int i = 0; i < 32; i++) altar__offset_tracker_finished(t, "jobs", 1, window[i]);
  int64_t first = o;
  for (int k = 0; k < 10000; k++) altar__offset_tracker_seen(t, "jobs", 1, o++);
  CU_ASSERT(altar__offset_tracker_footprint(t) > 10000 * 16);
  for (int64_t x = first; x < o; x++) altar__offset_tracker_finished(t, "jobs", 1, x);
  CU_ASSERT(altar__offset_tracker_footprint(t) <= 8192);
  CU_ASSERT_EQUAL(altar__offset_tracker_in_flight(t, "jobs", 1), 0);
  altar__offset_tracker_free(t);
}

static void add(void) {
  ALTAR_SUITE("offset_tracker", NULL, NULL);
  ALTAR_TEST(test_commit_lowest_unfinished);
  ALTAR_TEST(test_restart_skips_finished);
  ALTAR_TEST(test_malformed_metadata_ignored);
  ALTAR_TEST(test_out_of_order_and_unknown);
  ALTAR_TEST(test_metadata_bounded);
  ALTAR_TEST(test_random_model);
  ALTAR_TEST(test_held_carried_on);
  ALTAR_TEST(test_random_model_gaps);
  ALTAR_TEST(test_memory_bounded_by_in_flight);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
