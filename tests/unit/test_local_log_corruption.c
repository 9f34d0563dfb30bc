/* Damaged local logs: a flipped byte in the tail, a record cut in the
 * middle, a garbage length, stray files, a corrupt record in a sealed
 * segment, a malformed offsets file. Reopening works, only the bad tail is
 * cut (by the first produce to the partition, or by a reader meeting a
 * corrupt tail no appender holds), a damaged record in a sealed segment
 * costs only itself, the damage is reported, and nothing crashes. */
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static altar_transport_t *open_log(const char *dir, altar_test_logs_t *logs, const char *segbytes) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  if (segbytes) altar_strmap_set(&m, "segment.bytes", segbytes);
  altar_transport_opts_t opts = {.on_log = altar_test_capture_log, .log_ctx = logs};
  altar_error_t err = {0};
  if (logs) memset(logs, 0, sizeof *logs);
  altar_transport_t *t = altar_transport_open("local", &m, logs ? &opts : NULL, &err);
  if (!t) fprintf(stderr, "open: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

static void produce_n(const char *dir, const char *topic, int n, const char *segbytes) {
  altar_transport_t *t = open_log(dir, NULL, segbytes);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  int rc = altar_transport_create_topic(t, topic, 1, &err);
  CU_ASSERT_FATAL(rc == 0 || rc == ALTAR_EEXIST);
  for (int i = 0; i < n; i++) {
    char v[64];
    snprintf(v, sizeof v, "value-%03d-padding-padding", i);
    altar_produce_rec_t rec = {
        .topic = topic, .partition = 0, .key = "k", .key_len = 1, .value = v, .value_len = strlen(v)};
    CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
  }
  CU_ASSERT_EQUAL_FATAL(altar_transport_flush(t, -1, &err), 0);
  altar_transport_close(t);
}

/* Produces, through t, the record a log holds at offset off (as produce_n
 * writes it) and waits for its report. */
static void produce_at(altar_transport_t *t, const char *topic, int off) {
  char v[64];
  snprintf(v, sizeof v, "value-%03d-padding-padding", off);
  altar_produce_rec_t rec = {
      .topic = topic, .partition = 0, .key = "k", .key_len = 1, .value = v, .value_len = strlen(v)};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_produce(t, &rec, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_flush(t, -1, &err), 0);
}

static char *seg_path(const char *dir, const char *topic, int64_t base) {
  char *p = malloc(4400);
  snprintf(p, 4400, "%s/topics/%s/0/%020lld.log", dir, topic, (long long)base);
  return p;
}

/* Reads the partition from offset `from`; returns how many records,
 * checking values. */
static int read_from(altar_transport_t *t, const char *topic, int64_t from, int *pintegrity_errors) {
  altar_tp_t tp = {topic, 0, from};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(t, &tp, 1, &err), 0);
  int n = 0, bad = 0;
  for (int idle = 0; idle < 3;) {
    altar_msg_t *m = NULL;
    int rc = altar_transport_consume(t, 50, &m, &err);
    if (rc == ALTAR_EINTEGRITY) {
      CU_ASSERT(strstr(err.msg, topic) != NULL);
      bad++;
      continue;
    }
    CU_ASSERT_EQUAL(rc, 0);
    if (!m) {
      idle++;
      continue;
    }
    char v[64];
    snprintf(v, sizeof v, "value-%03d-padding-padding", (int)m->offset);
    CU_ASSERT(m->value_len == strlen(v) && !memcmp(m->value, v, m->value_len));
    n++;
    altar_msg_free(m);
  }
  if (pintegrity_errors) *pintegrity_errors = bad;
  return n;
}

/* Reads the whole partition. */
static int read_all(altar_transport_t *t, const char *topic, int *pintegrity_errors) {
  return read_from(t, topic, ALTAR_OFFSET_BEGINNING, pintegrity_errors);
}

static off_t file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

static void test_flipped_byte_in_tail(void) {
  char *dir = altar_test_tmpdir("corrupt-flip");
  produce_n(dir, "t", 10, NULL);
  char *seg = seg_path(dir, "t", 0);
  off_t size = file_size(seg);
  off_t rec = size / 10; /* all records have the same size */
  int fd = open(seg, O_RDWR);
  CU_ASSERT_FATAL(fd >= 0);
  unsigned char b;
  CU_ASSERT_EQUAL_FATAL(pread(fd, &b, 1, size - 5), 1);
  b ^= 0x40;
  CU_ASSERT_EQUAL_FATAL(pwrite(fd, &b, 1, size - 5), 1);
  close(fd);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(logs.n, 0); /* opening repairs nothing */
  CU_ASSERT_EQUAL(file_size(seg), size);
  /* The first produce to the partition recovers it first: only the last
   * record goes, reported, and the new record takes its offset. */
  produce_at(t, "t", 9);
  CU_ASSERT(strstr(logs.text, "crc mismatch at offset 9") != NULL);
  char cut[64];
  snprintf(cut, sizeof cut, "truncated %lld bytes", (long long)rec);
  CU_ASSERT(strstr(logs.text, cut) != NULL);
  CU_ASSERT_EQUAL(file_size(seg), size);
  CU_ASSERT_EQUAL(read_all(t, "t", NULL), 10);
  altar_transport_close(t);
  /* Appends continue. */
  produce_n(dir, "t", 1, NULL);
  t = open_log(dir, &logs, NULL);
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, "t", 0, &l, &err), 0);
  CU_ASSERT_EQUAL(l->topics[0].partitions[0].end, 11);
  altar_topic_list_free(l);
  CU_ASSERT_EQUAL(logs.n, 0); /* clean now */
  altar_transport_close(t);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_truncated_mid_record(void) {
  char *dir = altar_test_tmpdir("corrupt-trunc");
  produce_n(dir, "t", 10, NULL);
  char *seg = seg_path(dir, "t", 0);
  off_t size = file_size(seg);
  off_t rec = size / 10;
  CU_ASSERT_EQUAL_FATAL(truncate(seg, size - rec / 2), 0);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  /* A reader stops before the torn record and leaves it (a live appender
   * may be writing it). */
  CU_ASSERT_EQUAL(read_all(t, "t", NULL), 9);
  CU_ASSERT_EQUAL(logs.n, 0);
  CU_ASSERT_EQUAL(file_size(seg), size - rec / 2);
  /* The first produce cuts it, reported, and writes its own in its place. */
  produce_at(t, "t", 9);
  CU_ASSERT(strstr(logs.text, "torn record") != NULL);
  CU_ASSERT_EQUAL(file_size(seg), size);
  altar_transport_close(t);
  t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(read_all(t, "t", NULL), 10);
  CU_ASSERT_EQUAL(logs.n, 0);
  altar_transport_close(t);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_garbage_length_at_tail(void) {
  char *dir = altar_test_tmpdir("corrupt-len");
  produce_n(dir, "t", 5, NULL);
  char *seg = seg_path(dir, "t", 0);
  off_t size = file_size(seg);
  FILE *f = fopen(seg, "ab");
  CU_ASSERT_FATAL(f != NULL);
  const unsigned char junk[12] = {0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8};
  fwrite(junk, 1, sizeof junk, f);
  fclose(f);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(logs.n, 0); /* opening repairs nothing */
  CU_ASSERT_EQUAL(file_size(seg), size + (off_t)sizeof junk);
  /* A reader meeting a corrupt tail that no appender holds cuts it. */
  CU_ASSERT_EQUAL(read_all(t, "t", NULL), 5);
  CU_ASSERT(strstr(logs.text, "length out of bounds") != NULL);
  CU_ASSERT_EQUAL(file_size(seg), size);
  altar_transport_close(t);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_stray_files_ignored(void) {
  char *dir = altar_test_tmpdir("corrupt-stray");
  produce_n(dir, "t", 4, NULL);
  char p[4400];
  snprintf(p, sizeof p, "%s/topics/t/0/notes.txt", dir);
  altar_test_write_file(p, "hello", 5);
  snprintf(p, sizeof p, "%s/topics/t/0/00000000000000000abc.log", dir);
  altar_test_write_file(p, "x", 1);
  snprintf(p, sizeof p, "%s/topics/t/README", dir);
  altar_test_write_file(p, "x", 1);
  snprintf(p, sizeof p, "%s/topics/bad name", dir);
  altar_test_write_file(p, "x", 1);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT(strstr(logs.text, "stray entry 'notes.txt'") != NULL);
  CU_ASSERT(strstr(logs.text, "00000000000000000abc.log") != NULL);
  CU_ASSERT(strstr(logs.text, "bad name") != NULL);
  CU_ASSERT_EQUAL(read_all(t, "t", NULL), 4);
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_list_topics(t, NULL, 0, &l, &err), 0);
  CU_ASSERT_EQUAL(l->n_topics, 1);
  altar_topic_list_free(l);
  altar_transport_close(t);
  /* The stray files are left alone. */
  snprintf(p, sizeof p, "%s/topics/t/0/notes.txt", dir);
  CU_ASSERT_EQUAL(file_size(p), 5);
  altar_test_rmtree(dir);
  free(dir);
}

/* A 60-record log in dir with ~16 records a segment, one bit flipped at
 * each of the given fractions of segment 0 (on a length's top byte that is
 * far out of bounds, not a record still being written). Returns segment
 * 0's path (caller frees) and its size. */
static char *damaged_log(const char *dir, const double *at, int n_at, off_t *psize) {
  produce_n(dir, "t", 60, "1024");
  char *seg = seg_path(dir, "t", 0);
  off_t size = file_size(seg);
  CU_ASSERT_FATAL(size > 400);
  int fd = open(seg, O_RDWR);
  CU_ASSERT_FATAL(fd >= 0);
  for (int i = 0; i < n_at; i++) {
    off_t pos = (off_t)((double)size * at[i]);
    unsigned char b;
    CU_ASSERT_EQUAL_FATAL(pread(fd, &b, 1, pos), 1);
    b ^= 0x40;
    CU_ASSERT_EQUAL_FATAL(pwrite(fd, &b, 1, pos), 1);
  }
  close(fd);
  *psize = size;
  return seg;
}

/* Reading it all: a sealed segment is never cut, each damaged record is
 * reported once and costs only itself (reading resumes at the next intact
 * one). */
static void damaged_sealed_segment(const char *name, const double *at, int n_at) {
  char *dir = altar_test_tmpdir(name);
  off_t size;
  char *seg = damaged_log(dir, at, n_at, &size);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, "1024");
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(file_size(seg), size);
  int bad = 0;
  int n = read_all(t, "t", &bad);
  CU_ASSERT_EQUAL(bad, n_at);
  CU_ASSERT_EQUAL(n, 60 - n_at);
  altar_transport_close(t);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_corrupt_record_in_sealed_segment(void) {
  const double mid[] = {0.5};
  damaged_sealed_segment("corrupt-sealed", mid, 1);
}

static void test_two_corrupt_records_in_sealed_segment(void) {
  const double two[] = {0.25, 0.75};
  damaged_sealed_segment("corrupt-sealed-2", two, 2);
}

/* A consumer that starts past a damaged record of the same sealed segment
 * (a restart from its committed offset) gets every record from there: the
 * damage sits a quarter in, offset 10 behind it in the same segment. */
static void test_seek_past_damage_loses_nothing(void) {
  char *dir = altar_test_tmpdir("corrupt-seek");
  const double quarter[] = {0.25};
  off_t size;
  char *seg = damaged_log(dir, quarter, 1, &size);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, "1024");
  CU_ASSERT_FATAL(t != NULL);
  int bad = 0;
  CU_ASSERT_EQUAL(read_from(t, "t", 10, &bad), 50);
  CU_ASSERT(bad <= 1);
  altar_transport_close(t);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_malformed_offsets_file(void) {
  char *dir = altar_test_tmpdir("corrupt-offsets");
  produce_n(dir, "t", 3, NULL);
  char p[4400];
  snprintf(p, sizeof p, "%s/groups/g/offsets", dir);
  char cmd[4500];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
  CU_ASSERT_FATAL(system(cmd) == 0);
  snprintf(p, sizeof p, "%s/groups/g/offsets/t.0", dir);
  altar_test_write_file(p, "altar-offset 1\n99999999999999999999999\n3\nabc", 44);
  altar_test_logs_t logs;
  altar_transport_t *t = open_log(dir, &logs, NULL);
  CU_ASSERT_FATAL(t != NULL);
  int64_t off;
  char *md = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_transport_committed(t, "g", "t", 0, 0, &off, &md, &err), ALTAR_EDECODE);
  CU_ASSERT(strstr(err.msg, "t.0") != NULL);
  CU_ASSERT(md == NULL);
  /* A member of the group starts from auto.offset.reset, with a warning. */
  const char *topics[] = {"t"};
  CU_ASSERT_EQUAL_FATAL(altar_transport_subscribe(t, "g", topics, 1, NULL, NULL, &err), 0);
  altar_msg_t *m = NULL;
  CU_ASSERT_EQUAL(altar_transport_consume(t, 2000, &m, &err), 0);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL(m->offset, 0);
  altar_msg_free(m);
  CU_ASSERT(strstr(logs.text, "malformed") != NULL);
  /* A commit replaces the bad file. */
  CU_ASSERT_EQUAL(altar_transport_commit(t, "t", 0, 1, "ok", &err), 0);
  CU_ASSERT_EQUAL(altar_transport_committed(t, "g", "t", 0, 0, &off, &md, &err), 0);
  CU_ASSERT_EQUAL(off, 1);
  free(md);
  altar_transport_close(t);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local log: corruption", NULL, NULL);
  ALTAR_TEST(test_flipped_byte_in_tail);
  ALTAR_TEST(test_truncated_mid_record);
  ALTAR_TEST(test_garbage_length_at_tail);
  ALTAR_TEST(test_stray_files_ignored);
  ALTAR_TEST(test_corrupt_record_in_sealed_segment);
  ALTAR_TEST(test_two_corrupt_records_in_sealed_segment);
  ALTAR_TEST(test_seek_past_damage_loses_nothing);
  ALTAR_TEST(test_malformed_offsets_file);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
