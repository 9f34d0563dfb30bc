/* A local log reader's buffer follows what it has to read
 * (transports/local_reader.c): 16 KiB to start, doubling to 256 KiB while
 * it is behind, halving back once it follows the tail, so a worker reading
 * dozens of partitions does not keep the most it ever needed on each. */
#include "altar/plugin/transport.h"
#include "testutil.h"
#include "transports/local_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024u

static void produce(altar_transport_t *t, int n) {
  char val[500];
  memset(val, 'b', sizeof val);
  altar_error_t err = {0};
  for (int i = 0; i < n; i++) {
    altar_produce_rec_t rec = {.topic = "buf", .partition = 0, .value = val, .value_len = sizeof val};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
  }
  CU_ASSERT_EQUAL(altar_transport_flush(t, -1, &err), 0);
}

/* Reads what is there; returns how many, and the largest buffer seen. */
static int drain(altar_transport_t *t, const local_cfg_t *cfg, lreader_t *r, size_t *pmax) {
  int n = 0;
  altar_error_t err = {0};
  for (;;) {
    altar_msg_t *m = NULL;
    int rc = altar__local_reader_next(t, cfg, r, &m, &err);
    if (r->buf_cap > *pmax) *pmax = r->buf_cap;
    if (rc != 1) break;
    altar_msg_free(m);
    n++;
  }
  return n;
}

static void test_buffer_follows_the_backlog(void) {
  char *dir = altar_test_tmpdir("local-reader-buf");
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, NULL, &err);
  CU_ASSERT_FATAL(t != NULL);
  local_cfg_t cfg = {0};
  CU_ASSERT_EQUAL_FATAL(altar__local_cfg_parse(t, &cfg, &m, &err), 0);
  altar_strmap_clear(&m);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "buf", 1, &err), 0);
  produce(t, 4000); /* about 2 MiB behind */
  lreader_t *r = altar__local_reader_new(dir, "buf", 0);
  CU_ASSERT_FATAL(r != NULL);
  CU_ASSERT_EQUAL_FATAL(altar__local_reader_seek(t, &cfg, r, ALTAR_OFFSET_BEGINNING, &err), 0);
  size_t max = 0;
  CU_ASSERT_EQUAL(drain(t, &cfg, r, &max), 4000);
  CU_ASSERT_EQUAL(max, 256 * KIB); /* grew while behind, never past the chunk */
  /* Following the tail, a record at a time: the buffer halves back. */
  for (int i = 0; i < 8; i++) {
    produce(t, 1);
    altar__local_reader_changed(r);
    CU_ASSERT_EQUAL(drain(t, &cfg, r, &max), 1);
  }
  CU_ASSERT_EQUAL(r->buf_cap, 16 * KIB);
  altar__local_reader_free(r);
  altar__local_cfg_clear(&cfg);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local reader buffer", NULL, NULL);
  ALTAR_TEST(test_buffer_follows_the_backlog);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
