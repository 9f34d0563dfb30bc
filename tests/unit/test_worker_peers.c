/* The worker's peer table (worker/peers.h): heartbeats that pass the bounds
 * count, anything else is ignored whole; picks go to the live peer with the
 * most free slots, on a partition it owns and the caller does not, and
 * count the slot as taken; goodbyes and silence retire a peer; the table
 * is bounded; a heartbeat read right before a no-access page is safe. */
#include "testutil.h"
#include "worker/peers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOW_S 1800000000.0

static int apply(altar__peers_t *ps, const char *json, int64_t now_ms) {
  altar_error_t e = {0};
  return altar__peers_apply(ps, json, strlen(json), now_ms, NOW_S, &e);
}

static char *beat(const char *id, const char *extra) {
  static char buf[8192];
  snprintf(buf, sizeof buf, "{\"v\":1,\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"%s\",\"ts\":%.1f%s%s}",
           id, NOW_S, extra && *extra ? "," : "", extra ? extra : "");
  return buf;
}

static void test_pick_most_free_and_count(void) {
  altar__peers_t *ps = altar__peers_new("me");
  CU_ASSERT_FATAL(ps != NULL);
  CU_ASSERT(apply(ps, beat("a", "\"free\":{\"normal\":1},\"owns\":{\"jobs\":[3]}"), 0) == 0);
  CU_ASSERT(apply(ps, beat("b", "\"free\":{\"normal\":2},\"owns\":{\"jobs\":[5,6]}"), 0) == 0);
  CU_ASSERT(altar__peers_free_slots(ps, "normal", 0) == 3);
  int32_t part = -1;
  const char *id = altar__peers_pick(ps, "normal", "jobs", 0, NULL, NULL, &part);
  CU_ASSERT_STRING_EQUAL(id, "b");
  CU_ASSERT(part == 5);
  id = altar__peers_pick(ps, "normal", "jobs", 0, NULL, NULL, &part); /* b now 1, a 1: b is not better */
  CU_ASSERT_STRING_EQUAL(id, "a");
  CU_ASSERT(part == 3);
  id = altar__peers_pick(ps, "normal", "jobs", 0, NULL, NULL, &part);
  CU_ASSERT_STRING_EQUAL(id, "b");
  CU_ASSERT(part == 6);                                                              /* its partitions in turn */
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "normal", "jobs", 0, NULL, NULL, &part)); /* all taken */
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "gpu", "jobs", 0, NULL, NULL, &part));
  /* The next beat says what is free again. */
  CU_ASSERT(apply(ps, beat("a", "\"free\":{\"normal\":1},\"owns\":{\"jobs\":[3]}"), 100) == 0);
  CU_ASSERT_STRING_EQUAL(altar__peers_pick(ps, "normal", "jobs", 100, NULL, NULL, &part), "a");
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "normal", "other.topic", 100, NULL, NULL, &part));
  altar__peers_free(ps);
}

static bool mine_3(void *ctx, const char *topic, int32_t partition) {
  (void)ctx;
  return !strcmp(topic, "jobs") && partition == 3;
}

static void test_own_partitions_and_self_excluded(void) {
  altar__peers_t *ps = altar__peers_new("me");
  CU_ASSERT(apply(ps, beat("me", "\"free\":{\"normal\":4},\"owns\":{\"jobs\":[1]}"), 0) == ALTAR_EINVAL);
  CU_ASSERT(apply(ps, beat("a", "\"free\":{\"normal\":4},\"owns\":{\"jobs\":[3]}"), 0) == 0);
  int32_t part = -1;
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "normal", "jobs", 0, mine_3, NULL, &part));
  CU_ASSERT(apply(ps, beat("a", "\"free\":{\"normal\":4},\"owns\":{\"jobs\":[3,4]}"), 0) == 0);
  CU_ASSERT_STRING_EQUAL(altar__peers_pick(ps, "normal", "jobs", 0, mine_3, NULL, &part), "a");
  CU_ASSERT(part == 4);
  altar__peers_free(ps);
}

static void test_goodbye_and_silence(void) {
  altar__peers_t *ps = altar__peers_new("me");
  CU_ASSERT(apply(ps, beat("a", "\"free\":{\"normal\":4},\"owns\":{\"jobs\":[3]}"), 0) == 0);
  CU_ASSERT(altar__peers_live(ps, 0) == 1);
  CU_ASSERT(altar__peers_live(ps, 10000) == 1);
  CU_ASSERT(altar__peers_live(ps, 10001) == 0); /* silent for ALTAR_HEARTBEAT_STALE_S */
  int32_t part;
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "normal", "jobs", 10001, NULL, NULL, &part));
  char bye[256];
  snprintf(bye, sizeof bye, "{\"type\":\"worker\",\"event\":\"goodbye\",\"worker\":\"a\",\"ts\":%.1f}", NOW_S);
  CU_ASSERT(apply(ps, bye, 5) == 0);
  CU_ASSERT(altar__peers_live(ps, 5) == 0);
  /* An old heartbeat (read back at start) or one from the future does not count. */
  char old[256];
  snprintf(old, sizeof old,
           "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"b\",\"ts\":%.1f,\"free\":{\"normal\":1}}",
           NOW_S - 11);
  CU_ASSERT(apply(ps, old, 5) == ALTAR_EINVAL);
  snprintf(old, sizeof old,
           "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"b\",\"ts\":%.1f,\"free\":{\"normal\":1}}",
           NOW_S + 11);
  CU_ASSERT(apply(ps, old, 5) == ALTAR_EINVAL);
  CU_ASSERT(altar__peers_live(ps, 5) == 0);
  /* An older worker's beat (no free, no owns) counts, but is never a target. */
  CU_ASSERT(apply(ps, beat("c", NULL), 5) == 0);
  CU_ASSERT_PTR_NULL(altar__peers_pick(ps, "normal", "jobs", 5, NULL, NULL, &part));
  altar__peers_free(ps);
}

static void test_bad_heartbeats_ignored_whole(void) {
  altar__peers_t *ps = altar__peers_new("me");
  const char *bad[] = {
      "not json",
      "[1,2]",
      "{\"type\":\"worker\"}",
      "{\"type\":\"other\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":\"now\"}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"\",\"ts\":1800000000}",
      "{\"type\":\"worker\",\"event\":\"dance\",\"worker\":\"x\",\"ts\":1800000000}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"free\":{\"normal\":-1}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"free\":{\"normal\":100001}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"free\":{\"normal\":1.5}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"free\":[1]}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"owns\":{\"../x\":[1]}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"owns\":{\"jobs\":[4096]}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"owns\":{\"jobs\":[-1]}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"ts\":1800000000,\"owns\":{\"jobs\":\"1\"}}",
      "{\"type\":\"worker\",\"event\":\"heartbeat\",\"worker\":\"x\",\"worker\":\"y\",\"ts\":1800000000}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    altar_error_t e = {0};
    int rc = altar__peers_apply(ps, bad[i], strlen(bad[i]), 0, NOW_S, &e);
    if (rc != ALTAR_EINVAL) fprintf(stderr, "accepted: %s\n", bad[i]);
    CU_ASSERT(rc == ALTAR_EINVAL);
    CU_ASSERT(e.msg[0] != 0);
  }
  /* An id of 256 bytes, a pool name of 65, 4097 partitions, 65 pools. */
  char id[300];
  memset(id, 'i', 256);
  id[256] = 0;
  CU_ASSERT(apply(ps, beat(id, NULL), 0) == ALTAR_EINVAL);
  char extra[40000];
  snprintf(extra, sizeof extra, "\"free\":{\"%065d\":1}", 0);
  CU_ASSERT(apply(ps, beat("x", extra), 0) == ALTAR_EINVAL);
  size_t at = (size_t)snprintf(extra, sizeof extra, "\"owns\":{\"jobs\":[");
  for (int i = 0; i < 4097; i++) at += (size_t)snprintf(extra + at, sizeof extra - at, "%s%d", i ? "," : "", i % 4096);
  snprintf(extra + at, sizeof extra - at, "]}");
  CU_ASSERT(apply(ps, beat("x", extra), 0) == ALTAR_EINVAL);
  at = (size_t)snprintf(extra, sizeof extra, "\"free\":{");
  for (int i = 0; i < 65; i++) at += (size_t)snprintf(extra + at, sizeof extra - at, "%s\"p%d\":1", i ? "," : "", i);
  snprintf(extra + at, sizeof extra - at, "}");
  CU_ASSERT(apply(ps, beat("x", extra), 0) == ALTAR_EINVAL);
  /* Over 64 KiB: refused before parsing. */
  size_t big = ALTAR_PEER_HEARTBEAT_MAX + 1;
  char *b = malloc(big);
  CU_ASSERT_FATAL(b != NULL);
  memset(b, ' ', big);
  memcpy(b, beat("x", NULL), strlen(beat("x", NULL)));
  altar_error_t e = {0};
  CU_ASSERT(altar__peers_apply(ps, b, big, 0, NOW_S, &e) == ALTAR_EINVAL);
  free(b);
  CU_ASSERT(altar__peers_live(ps, 0) == 0);
  altar__peers_free(ps);
}

static void test_table_bounded(void) {
  altar__peers_t *ps = altar__peers_new("me");
  char id[32];
  for (int i = 0; i < ALTAR_PEERS_MAX; i++) {
    snprintf(id, sizeof id, "w%d", i);
    CU_ASSERT(apply(ps, beat(id, "\"free\":{\"normal\":1}"), 0) == 0);
  }
  CU_ASSERT(apply(ps, beat("one-more", "\"free\":{\"normal\":1}"), 0) == ALTAR_EINVAL);
  CU_ASSERT(apply(ps, beat("w7", "\"free\":{\"normal\":2}"), 0) == 0);           /* known ones still update */
  CU_ASSERT(apply(ps, beat("one-more", "\"free\":{\"normal\":1}"), 20000) == 0); /* the dead make room */
  CU_ASSERT(altar__peers_live(ps, 20000) == 1);
  altar__peers_free(ps);
}

static void test_heartbeat_before_no_access_page(void) {
  long pg = sysconf(_SC_PAGESIZE);
  char *mem = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CU_ASSERT_FATAL(mem != MAP_FAILED);
  CU_ASSERT_FATAL(mprotect(mem + pg, (size_t)pg, PROT_NONE) == 0);
  const char *full = beat("edge", "\"free\":{\"normal\":3},\"owns\":{\"jobs\":[1,2]}");
  size_t n = strlen(full);
  altar__peers_t *ps = altar__peers_new("me");
  for (size_t cut = 0; cut <= n; cut++) { /* every prefix, its last byte against the guard page */
    char *at = mem + pg - cut;
    memcpy(at, full, cut);
    altar_error_t e = {0};
    int rc = altar__peers_apply(ps, at, cut, 0, NOW_S, &e);
    CU_ASSERT(cut == n ? rc == 0 : rc == ALTAR_EINVAL);
  }
  CU_ASSERT(altar__peers_free_slots(ps, "normal", 0) == 3);
  altar__peers_free(ps);
  munmap(mem, (size_t)pg * 2);
}

static void suite(void) {
  ALTAR_SUITE("worker_peers", NULL, NULL);
  ALTAR_TEST(test_pick_most_free_and_count);
  ALTAR_TEST(test_own_partitions_and_self_excluded);
  ALTAR_TEST(test_goodbye_and_silence);
  ALTAR_TEST(test_bad_heartbeats_ignored_whole);
  ALTAR_TEST(test_table_bounded);
  ALTAR_TEST(test_heartbeat_before_no_access_page);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, suite); }
