/* Who forwarded a job record (core/forward_origin.c): the worker id from
 * the header "worker/topic/partition/offset", a worker id holding '/'
 * included, and every malformed or oversized header refused. */
#include "altar/fleet.h"
#include "altar/forward_origin.h"
#include "testutil.h"

#include <string.h>

static bool origin(const char *value, size_t len, char *out, size_t cap) {
  altar_header_t hs[2] = {{"other", "x/y/z/w", 7}, {ALTAR_FORWARD_FROM_HEADER, value, len}};
  altar_msg_t m = {0};
  m.headers = hs;
  m.n_headers = 2;
  return altar_forward_origin(&m, out, cap);
}

static void test_worker_id(void) {
  char w[256];
  CU_ASSERT_TRUE(origin("w1/altar.jobs/3/17", 18, w, sizeof w));
  CU_ASSERT_STRING_EQUAL(w, "w1");
  /* A worker id may hold '/': only the last three fields are cut. */
  CU_ASSERT_TRUE(origin("host:1/a/altar.jobs/3/17", 24, w, sizeof w));
  CU_ASSERT_STRING_EQUAL(w, "host:1/a");
}

static void test_malformed_refused(void) {
  char w[256], small[3];
  CU_ASSERT_FALSE(origin("altar.jobs/3/17", 15, w, sizeof w));  /* no worker */
  CU_ASSERT_FALSE(origin("/altar.jobs/3/17", 16, w, sizeof w)); /* empty worker */
  CU_ASSERT_FALSE(origin("w1\n/t/3/17", 10, w, sizeof w));      /* not printable */
  CU_ASSERT_FALSE(origin("w1/t/3/17", 0, w, sizeof w));
  CU_ASSERT_FALSE(origin("w123/t/3/17", 11, small, sizeof small)); /* does not fit */
  char big[1100];
  memset(big, 'a', sizeof big);
  memcpy(big + sizeof big - 6, "/t/1/2", 6);
  CU_ASSERT_FALSE(origin(big, sizeof big, w, sizeof w));             /* over the header bound */
  CU_ASSERT_FALSE(origin(big + 700, sizeof big - 700, w, sizeof w)); /* worker id over 255 bytes */
  altar_msg_t none = {0};
  CU_ASSERT_FALSE(altar_forward_origin(&none, w, sizeof w)); /* no header at all */
}

static void add(void) {
  ALTAR_SUITE("forward origin", NULL, NULL);
  ALTAR_TEST(test_worker_id);
  ALTAR_TEST(test_malformed_refused);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
