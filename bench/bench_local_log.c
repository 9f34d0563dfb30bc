/* Benchmark of the local transport: records/s produced (512-byte records,
 * fsync by group commit, every delivery report served) and consumed, against
 * a baseline measured in the same run on the same disk: raw write() of the
 * same bytes to one file with one fdatasync per batch of group.commit.bytes.
 * Usage: bench_local_log [records] [dir] */
#include "altar/plugin/transport.h"
#include "util/bench_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REC 512
#define BATCH_BYTES (1u << 20) /* = the default group.commit.bytes */

static long delivered, failed;
static void on_dr(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)ctx;
  if (dr->err) failed++;
  else delivered++;
}

static double baseline(const char *dir, long n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/baseline.dat", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror("baseline");
    exit(1);
  }
  char *buf = malloc(BATCH_BYTES);
  memset(buf, 'b', BATCH_BYTES);
  size_t per = BATCH_BYTES / REC;
  double t0 = bench_now_s();
  for (long done = 0; done < n;) {
    size_t k = (size_t)(n - done) < per ? (size_t)(n - done) : per;
    if (write(fd, buf, k * REC) != (ssize_t)(k * REC) || fdatasync(fd) != 0) {
      perror("baseline write");
      exit(1);
    }
    done += (long)k;
  }
  double el = bench_now_s() - t0;
  close(fd);
  unlink(path);
  free(buf);
  return (double)n / el;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 300000;
  if (n <= 0) n = 300000;
  char tmpl[] = "/tmp/altar-bench-log-XXXXXX";
  const char *dir = argc > 2 ? argv[2] : mkdtemp(tmpl);
  if (!dir) {
    perror("mkdtemp");
    return 1;
  }
  altar_transport_register(&altar_transport_local_ops);
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "fsync", "group");
  altar_strmap_set(&m, "segment.bytes", "67108864");
  altar_transport_opts_t opts = {.on_delivery = on_dr};
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &m, &opts, &err);
  altar_strmap_clear(&m);
  if (!t) {
    fprintf(stderr, "open: %s\n", err.msg);
    return 1;
  }
  if (altar_transport_create_topic(t, "bench", 1, &err) != 0 && err.code != ALTAR_EEXIST) {
    fprintf(stderr, "create: %s\n", err.msg);
    return 1;
  }
  char val[REC];
  memset(val, 'v', sizeof val);

  double base = baseline(dir, n);

  double t0 = bench_now_s();
  for (long i = 0; i < n; i++) {
    altar_produce_rec_t rec = {.topic = "bench", .partition = 0, .value = val, .value_len = REC};
    int rc;
    while ((rc = altar_transport_produce(t, &rec, &err)) == ALTAR_EAGAIN) altar_transport_poll(t, 1);
    if (rc) {
      fprintf(stderr, "produce: %s\n", err.msg);
      return 1;
    }
    if ((i & 255) == 0) altar_transport_poll(t, 0);
  }
  if (altar_transport_flush(t, -1, &err) != 0) {
    fprintf(stderr, "flush: %s\n", err.msg);
    return 1;
  }
  double prod = (double)n / (bench_now_s() - t0);

  altar_tp_t tp = {"bench", 0, ALTAR_OFFSET_BEGINNING};
  if (altar_transport_assign(t, &tp, 1, &err) != 0) {
    fprintf(stderr, "assign: %s\n", err.msg);
    return 1;
  }
  t0 = bench_now_s();
  long got = 0;
  while (got < n) {
    altar_msg_t *msg = NULL;
    if (altar_transport_consume(t, 1000, &msg, &err) != 0) {
      fprintf(stderr, "consume: %s\n", err.msg);
      return 1;
    }
    if (!msg) break;
    got++;
    altar_msg_free(msg);
  }
  double cons = (double)got / (bench_now_s() - t0);
  altar_transport_close(t);

  printf("local log, %ld records of %d bytes, fsync=group (one partition)\n", n, REC);
  printf("  delivered %ld, failed %ld, consumed %ld\n", delivered, failed, got);
  printf("  baseline write()+fdatasync per %u-byte batch: %12.0f records/s\n", BATCH_BYTES, base);
  printf("  local produce (acknowledged, group commit):   %12.0f records/s\n", prod);
  printf("  local consume:                                %12.0f records/s\n", cons);
  printf("  ratio produce/baseline: %.2f\n", prod / base);
  if (argc <= 2) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
  return (delivered == n && got == n && failed == 0) ? 0 : 1;
}
