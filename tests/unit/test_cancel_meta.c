/* Cancels carried in commit metadata (worker/cancel_meta.h): they survive
 * a round trip with odd bytes escaped, the newest are kept when the room
 * runs out, the tracker's part is left as it was, and malformed entries
 * are skipped, never fatal. */
#include "altar/transport.h"
#include "testutil.h"
#include "worker/cancel_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(altar__cancel_set_t *s, const char *job, const char *group) {
  bool fresh = false;
  CU_ASSERT_FATAL(altar__cancel_set_add(s, job, group, &fresh) == 0);
}

static void test_round_trip(void) {
  altar__cancel_set_t s = {0};
  add(&s, "j-0123456789ab", NULL);
  add(&s, "j-ffff", "j-ffff:fold 3,x@y%");
  char meta[ALTAR_COMMIT_METADATA_MAX + 1] = "o1:1-4,7";
  altar__cancel_meta_append(&s, meta, sizeof meta);
  CU_ASSERT_PTR_NULL(strchr(strstr(meta, ";c:") + 3, ' ')); /* escaped */
  char *list = altar__cancel_meta_split(meta);
  CU_ASSERT_FATAL(list != NULL);
  CU_ASSERT_STRING_EQUAL(meta, "o1:1-4,7");
  altar__cancel_set_t got = {0};
  size_t added = 0, bad = 9;
  CU_ASSERT(altar__cancel_meta_parse(list, &got, &added, &bad) == 0);
  CU_ASSERT_EQUAL(added, 2);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(altar__cancel_set_matches(&got, "j-0123456789ab", "any"));
  CU_ASSERT(altar__cancel_set_matches(&got, "j-ffff", "j-ffff:fold 3,x@y%"));
  CU_ASSERT(!altar__cancel_set_matches(&got, "j-ffff", "j-ffff:fold 4"));
  altar__cancel_set_free(&got);
  altar__cancel_set_free(&s);

  char none[64] = "o1:3";
  CU_ASSERT_PTR_NULL(altar__cancel_meta_split(none));
  altar__cancel_set_t empty = {0};
  altar__cancel_meta_append(&empty, none, sizeof none);
  CU_ASSERT_STRING_EQUAL(none, "o1:3"); /* nothing to carry: unchanged */
}

static void test_newest_kept_within_bound(void) {
  altar__cancel_set_t s = {0};
  char id[32];
  for (int i = 0; i < 1000; i++) {
    snprintf(id, sizeof id, "j-%012d", i);
    add(&s, id, NULL);
  }
  char meta[ALTAR_COMMIT_METADATA_MAX + 1] = "";
  altar__cancel_meta_append(&s, meta, sizeof meta);
  CU_ASSERT(strlen(meta) <= ALTAR_CANCEL_META_MAX);
  altar__cancel_set_t got = {0};
  size_t added = 0, bad = 0;
  CU_ASSERT(altar__cancel_meta_parse(altar__cancel_meta_split(meta), &got, &added, &bad) == 0);
  CU_ASSERT(added > 100 && added < 1000);
  CU_ASSERT(altar__cancel_set_matches(&got, "j-000000000999", NULL));  /* the newest */
  CU_ASSERT(!altar__cancel_set_matches(&got, "j-000000000000", NULL)); /* the oldest left out */
  snprintf(id, sizeof id, "j-%012zu", 1000 - added);
  CU_ASSERT(altar__cancel_set_matches(&got, id, NULL)); /* and none in between */
  altar__cancel_set_free(&got);

  /* Too little room for even one: the metadata stays as it was. */
  char small[8] = "o1:1";
  altar__cancel_meta_append(&s, small, sizeof small);
  CU_ASSERT_STRING_EQUAL(small, "o1:1");
  altar__cancel_set_free(&s);
}

static void test_malformed_entries_skipped(void) {
  altar__cancel_set_t got = {0};
  size_t added = 0, bad = 0;
  CU_ASSERT(altar__cancel_meta_parse("j-1,,%zz,j 2,@g,j-3@,j-4%00,j-5@g%2C1", &got, &added, &bad) == 0);
  CU_ASSERT_EQUAL(added, 2);
  CU_ASSERT_EQUAL(bad, 6);
  CU_ASSERT(altar__cancel_set_matches(&got, "j-1", NULL));
  CU_ASSERT(altar__cancel_set_matches(&got, "j-5", "g,1"));
  altar__cancel_set_free(&got);
}

/* The set itself is bounded: after 20000 cancels it holds the newest
 * ALTAR_CANCEL_SET_MAX, and long ids bound it by bytes too. */
static void test_set_bounded(void) {
  altar__cancel_set_t s = {0};
  char id[32];
  size_t most = 0;
  for (int i = 0; i < 20000; i++) {
    snprintf(id, sizeof id, "j-%012d", i);
    add(&s, id, i % 2 ? "g" : NULL);
    if (s.cap > most) most = s.cap;
  }
  CU_ASSERT_EQUAL(s.n, ALTAR_CANCEL_SET_MAX);
  CU_ASSERT(most <= 2 * ALTAR_CANCEL_SET_MAX);
  CU_ASSERT(altar__cancel_set_matches(&s, "j-000000019998", NULL)); /* the newest */
  CU_ASSERT(altar__cancel_set_matches(&s, "j-000000019999", "g"));
  CU_ASSERT(!altar__cancel_set_matches(&s, "j-000000019999", "h"));
  CU_ASSERT(!altar__cancel_set_matches(&s, "j-000000000000", NULL)); /* forgotten */
  bool fresh = false;
  CU_ASSERT(altar__cancel_set_add(&s, "j-000000019998", NULL, &fresh) == 0 && !fresh); /* known: not again */
  altar__cancel_set_free(&s);
  char *big = malloc(64 << 10);
  CU_ASSERT_FATAL(big != NULL);
  memset(big, 'j', (64 << 10) - 8);
  for (int i = 0; i < 100; i++) {
    snprintf(big + (64 << 10) - 8, 8, "%d", i);
    add(&s, big, NULL);
  }
  CU_ASSERT(s.bytes <= ALTAR_CANCEL_SET_MAX_BYTES);
  CU_ASSERT(s.n < 100 && s.n >= 10);
  CU_ASSERT(altar__cancel_set_matches(&s, big, NULL));
  altar__cancel_set_free(&s);
  free(big);
}

static void suite(void) {
  ALTAR_SUITE("cancel_meta", NULL, NULL);
  ALTAR_TEST(test_round_trip);
  ALTAR_TEST(test_newest_kept_within_bound);
  ALTAR_TEST(test_malformed_entries_skipped);
  ALTAR_TEST(test_set_bounded);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, suite); }
