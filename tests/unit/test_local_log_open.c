/* Opening the local log repairs nothing: a partition is recovered by the
 * first produce to it. So a reader meets tails nobody recovered (a record
 * torn by a killed writer, a crc mismatch, a bad length, a stale copy of an
 * older record): it returns every intact record and never the damage, and
 * once another process appends (its recovery cuts the tail first) the same
 * reader goes on with the new records. Opening to read, and listing, change
 * no file. */
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int delivery_errors;
static int64_t last_offset;
static void on_dr(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)ctx;
  if (dr->err) delivery_errors++;
  else last_offset = dr->offset;
}

static altar_transport_t *open_log(const char *dir, altar_test_logs_t *logs, const char *k1, const char *v1) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  if (k1) altar_strmap_set(&m, k1, v1);
  static altar_test_logs_t ignored;
  if (!logs) logs = &ignored;
  memset(logs, 0, sizeof *logs);
  altar_transport_opts_t opts = {.on_log = altar_test_capture_log, .log_ctx = logs, .on_delivery = on_dr};
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, &opts, &err);
  if (!t) fprintf(stderr, "open: %s\n", err.msg);
  altar_strmap_clear(&m);
  return t;
}

static void value_of(char *v, size_t cap, int64_t off) {
  snprintf(v, cap, "value-%03lld-padding-padding", (long long)off);
}

/* Produces the records [from, to) of topic's partition 0 through t, each
 * with value_of(offset), and checks each lands at its offset. 0 if so. */
static int produce_range(altar_transport_t *t, const char *topic, int from, int to) {
  altar_error_t err = {0};
  int bad = 0;
  for (int i = from; i < to; i++) {
    char v[64];
    value_of(v, sizeof v, i);
    altar_produce_rec_t rec = {
        .topic = topic, .partition = 0, .key = "k", .key_len = 1, .value = v, .value_len = strlen(v)};
    delivery_errors = 0;
    last_offset = -1;
    if (altar_transport_produce(t, &rec, &err) != 0 || altar_transport_flush(t, -1, &err) != 0) return 1;
    if (delivery_errors || last_offset != i) bad++;
  }
  return bad;
}

static void make_log(const char *dir, const char *topic, int n) {
  altar_transport_t *t = open_log(dir, NULL, NULL, NULL);
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, topic, 1, &err), 0);
  CU_ASSERT_EQUAL_FATAL(produce_range(t, topic, 0, n), 0);
  altar_transport_close(t);
}

static char *seg_path(const char *dir, const char *topic) {
  char *p = malloc(4400);
  snprintf(p, 4400, "%s/topics/%s/0/%020d.log", dir, topic, 0);
  return p;
}

static off_t file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

static void append_bytes(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_APPEND);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL_FATAL(write(fd, p, n), (ssize_t)n);
  close(fd);
}

/* The tails a dead or broken writer can leave behind the 10 records of a
 * fresh log (all of one size, rec bytes each). */
enum { TAIL_TORN, TAIL_SHORT, TAIL_CRC, TAIL_LENGTH, TAIL_STALE, N_TAILS };
static const char *const tail_names[N_TAILS] = {"torn record", "a few bytes", "crc mismatch", "garbage length",
                                                "stale copy of record 3"};

static void damage_tail(const char *seg, int kind) {
  off_t size = file_size(seg);
  off_t rec = size / 10;
  unsigned char buf[512];
  CU_ASSERT_FATAL(rec > 0 && (size_t)rec <= sizeof buf);
  int fd = open(seg, O_RDONLY);
  CU_ASSERT_FATAL(fd >= 0);
  switch (kind) {
  case TAIL_TORN: { /* the first part of a plausible 512-byte record */
    const unsigned char head[12] = {0, 0, 2, 0, 0x12, 0x34, 0x56, 0x78, 1, 0, 0, 0};
    memset(buf, 0x5a, 40);
    memcpy(buf, head, sizeof head);
    append_bytes(seg, buf, 40);
    break;
  }
  case TAIL_SHORT: append_bytes(seg, "\0\0\0", 3); break;
  case TAIL_CRC: /* record 9 again with offset 10 and a body byte flipped */
    CU_ASSERT_EQUAL_FATAL(pread(fd, buf, (size_t)rec, size - rec), rec);
    buf[8 + 2 + 7] = 10;
    append_bytes(seg, buf, (size_t)rec);
    break;
  case TAIL_LENGTH: {
    const unsigned char junk[12] = {0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8};
    append_bytes(seg, junk, sizeof junk);
    break;
  }
  case TAIL_STALE: /* intact and checksummed, but its offset is long past */
    CU_ASSERT_EQUAL_FATAL(pread(fd, buf, (size_t)rec, 3 * rec), rec);
    append_bytes(seg, buf, (size_t)rec);
    break;
  }
  close(fd);
}

/* Consumes from t until it has been idle a while: the offsets must run on
 * from *pnext densely with their values; returns how many came, counting
 * anything else (an error, a wrong offset or value) in *pbad. */
static int drain(altar_transport_t *t, int64_t *pnext, int *pbad) {
  int n = 0;
  for (int idle = 0; idle < 4;) {
    altar_msg_t *m = NULL;
    altar_error_t err = {0};
    int rc = altar_transport_consume(t, 50, &m, &err);
    if (rc != 0) {
      fprintf(stderr, "consume: %s\n", err.msg);
      (*pbad)++;
      idle++;
      continue;
    }
    if (!m) {
      idle++;
      continue;
    }
    char v[64];
    value_of(v, sizeof v, m->offset);
    if (m->offset != *pnext || m->value_len != strlen(v) || memcmp(m->value, v, m->value_len) != 0) (*pbad)++;
    *pnext = m->offset + 1;
    n++;
    altar_msg_free(m);
  }
  return n;
}

static int64_t end_offset(altar_transport_t *t, const char *topic) {
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  if (altar_transport_list_topics(t, topic, 0, &l, &err) != 0) return -1;
  int64_t e = l->topics[0].partitions[0].end;
  altar_topic_list_free(l);
  return e;
}

/* For each kind of tail: a reader opened on it (nobody recovered it) reads
 * records 0..9 and nothing else; another process then appends 10..14 (its
 * recovery cuts the tail first, and each lands at its offset); the same
 * reader, still assigned, goes on with 10..14; a fresh reader sees 0..14. */
static void test_reader_on_unrecovered_tail(void) {
  for (int kind = 0; kind < N_TAILS; kind++) {
    char *dir = altar_test_tmpdir("open-tail");
    make_log(dir, "t", 10);
    char *seg = seg_path(dir, "t");
    off_t clean = file_size(seg);
    damage_tail(seg, kind);
    CU_ASSERT_FATAL(file_size(seg) > clean);

    altar_test_logs_t logs;
    altar_transport_t *r = open_log(dir, &logs, NULL, NULL);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_EQUAL(end_offset(r, "t"), 10);
    altar_tp_t tp = {"t", 0, ALTAR_OFFSET_BEGINNING};
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_transport_assign(r, &tp, 1, &err), 0);
    int64_t next = 0;
    int bad = 0;
    int n = drain(r, &next, &bad);
    if (n != 10 || bad) fprintf(stderr, "\n  tail '%s': read %d records, %d bad\n", tail_names[kind], n, bad);
    CU_ASSERT_EQUAL(n, 10);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(next, 10);

    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      altar_transport_t *w = open_log(dir, NULL, NULL, NULL);
      int rc = w ? produce_range(w, "t", 10, 15) : 2;
      if (w) altar_transport_close(w);
      _exit(rc ? 1 : 0);
    }
    int st = 0;
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* 10..14 acknowledged at their offsets */
    CU_ASSERT_EQUAL(file_size(seg), clean / 10 * 15); /* the tail is gone */

    n = drain(r, &next, &bad);
    if (n != 5 || bad) fprintf(stderr, "\n  tail '%s': then read %d records, %d bad\n", tail_names[kind], n, bad);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(next, 15);
    altar_transport_close(r);

    r = open_log(dir, &logs, NULL, NULL);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_EQUAL_FATAL(altar_transport_assign(r, &tp, 1, &err), 0);
    next = 0;
    CU_ASSERT_EQUAL(drain(r, &next, &bad), 15);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(logs.n, 0); /* clean now */
    altar_transport_close(r);
    free(seg);
    altar_test_rmtree(dir);
    free(dir);
  }
}

/* A reader that returned the last intact record, then a stale record turns
 * up behind it: the reader must not step over it (an appender's recovery
 * cuts the log there and writes over it). */
static void test_reader_waiting_at_end_meets_stale_record(void) {
  char *dir = altar_test_tmpdir("open-stale");
  make_log(dir, "t", 10);
  char *seg = seg_path(dir, "t");
  off_t clean = file_size(seg);
  altar_transport_t *r = open_log(dir, NULL, NULL, NULL);
  CU_ASSERT_FATAL(r != NULL);
  altar_tp_t tp = {"t", 0, ALTAR_OFFSET_BEGINNING};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_assign(r, &tp, 1, &err), 0);
  int64_t next = 0;
  int bad = 0;
  CU_ASSERT_EQUAL(drain(r, &next, &bad), 10);
  damage_tail(seg, TAIL_STALE);
  CU_ASSERT_EQUAL(drain(r, &next, &bad), 0);
  CU_ASSERT_EQUAL(bad, 0);
  /* A producer in this process now: it recovers, then writes 10..14 over. */
  altar_transport_t *w = open_log(dir, NULL, NULL, NULL);
  CU_ASSERT_FATAL(w != NULL);
  CU_ASSERT_EQUAL(produce_range(w, "t", 10, 15), 0);
  altar_transport_close(w);
  CU_ASSERT_EQUAL(file_size(seg), clean / 10 * 15);
  CU_ASSERT_EQUAL(drain(r, &next, &bad), 5);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(next, 15);
  altar_transport_close(r);
  free(seg);
  altar_test_rmtree(dir);
  free(dir);
}

/* ---- opening to read changes nothing ------------------------------------ */

typedef struct entry {
  char path[512];
  off_t size;
  struct timespec mtime;
  mode_t mode;
} entry_t;

static entry_t snap[256];
static int n_snap;
static size_t snap_root;

static int snap_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)flag;
  (void)f;
  if (n_snap >= (int)(sizeof snap / sizeof snap[0])) return 1;
  entry_t *e = &snap[n_snap++];
  snprintf(e->path, sizeof e->path, "%s", path + snap_root);
  e->size = st->st_size;
  e->mtime = st->st_mtim;
  e->mode = st->st_mode;
  return 0;
}

static int take_snapshot(const char *dir, entry_t *out) {
  n_snap = 0;
  snap_root = strlen(dir);
  CU_ASSERT_FATAL(nftw(dir, snap_one, 16, FTW_PHYS) == 0);
  memcpy(out, snap, (size_t)n_snap * sizeof *out);
  return n_snap;
}

static void test_read_only_open_changes_nothing(void) {
  char *dir = altar_test_tmpdir("open-ro");
  /* Two topics, several segments, damage in both active segments, a stray
   * file, and segments older than retention.ms. */
  altar_transport_t *t = open_log(dir, NULL, "segment.bytes", "1024");
  CU_ASSERT_FATAL(t != NULL);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "a", 1, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_transport_create_topic(t, "b", 1, &err), 0);
  CU_ASSERT_EQUAL(produce_range(t, "a", 0, 100), 0);
  CU_ASSERT_EQUAL(produce_range(t, "b", 0, 10), 0);
  altar_transport_close(t);
  char *seg_b = seg_path(dir, "b");
  damage_tail(seg_b, TAIL_CRC);
  char p[4400], cmd[4500];
  snprintf(cmd, sizeof cmd, "cd '%s/topics/a/0' && ls *.log | sort | tail -1", dir);
  FILE *f = popen(cmd, "r");
  char last[64] = "";
  CU_ASSERT_FATAL(f && fgets(last, sizeof last, f));
  pclose(f);
  last[strcspn(last, "\n")] = '\0';
  snprintf(p, sizeof p, "%s/topics/a/0/%s", dir, last);
  damage_tail(p, TAIL_TORN);
  snprintf(p, sizeof p, "%s/topics/a/0/notes.txt", dir);
  altar_test_write_file(p, "hello", 5);
  snprintf(cmd, sizeof cmd, "touch -d '2 hours ago' '%s'/topics/a/0/*.log", dir);
  CU_ASSERT_FATAL(system(cmd) == 0);

  static entry_t before[256], after[256];
  int nb = take_snapshot(dir, before);
  CU_ASSERT_FATAL(nb > 10);
  usleep(20000); /* past the clock tick, so a rewrite shows in the mtime */
  altar_test_logs_t logs;
  t = open_log(dir, &logs, "retention.ms", "3600000");
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT(strstr(logs.text, "notes.txt") != NULL); /* stray files still reported */
  CU_ASSERT_EQUAL(end_offset(t, "a"), 100);
  CU_ASSERT_EQUAL(end_offset(t, "b"), 10);
  altar_transport_close(t);
  int na = take_snapshot(dir, after);
  CU_ASSERT_EQUAL(na, nb);
  for (int i = 0; i < nb && i < na; i++) {
    CU_ASSERT_STRING_EQUAL(after[i].path, before[i].path);
    if (after[i].size != before[i].size || after[i].mtime.tv_sec != before[i].mtime.tv_sec ||
        after[i].mtime.tv_nsec != before[i].mtime.tv_nsec) {
      fprintf(stderr, "\n  %s changed by a read-only open\n", before[i].path);
      CU_FAIL("a read-only open changed a file");
    }
  }
  /* The first produce to a partition recovers it: the damage goes, reported,
   * and so do the segments beyond retention; the other partition is left
   * as it was until something is produced to it. */
  t = open_log(dir, &logs, "retention.ms", "3600000");
  CU_ASSERT_FATAL(t != NULL);
  CU_ASSERT_EQUAL(produce_range(t, "b", 10, 11), 0);
  CU_ASSERT(strstr(logs.text, "crc mismatch at offset 10") != NULL);
  CU_ASSERT(strstr(logs.text, "truncated") != NULL);
  snprintf(p, sizeof p, "%s/topics/a/0/%s", dir, last);
  CU_ASSERT(file_size(p) > 0);
  snprintf(p, sizeof p, "%s/topics/a/0/%020d.log", dir, 0);
  CU_ASSERT(file_size(p) > 0);
  CU_ASSERT_EQUAL(produce_range(t, "a", 100, 101), 0);
  CU_ASSERT(strstr(logs.text, "torn record") != NULL);
  CU_ASSERT_EQUAL(file_size(p), -1); /* retention.ms */
  altar_transport_close(t);
  free(seg_b);
  altar_test_rmtree(dir);
  free(dir);
}

static void add(void) {
  altar_transport_register(&altar_transport_local_ops);
  ALTAR_SUITE("local log: opening", NULL, NULL);
  ALTAR_TEST(test_reader_on_unrecovered_tail);
  ALTAR_TEST(test_reader_waiting_at_end_meets_stale_record);
  ALTAR_TEST(test_read_only_open_changes_nothing);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
