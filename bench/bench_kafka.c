/* Produce throughput through the kafka transport against kcat, same broker,
 * same run: N records of 512 bytes, no key, acks=all and idempotence on for
 * both, every other librdkafka setting at its default for both. Prints
 * records/s of each and the ratio altar/kcat (the aim is >= 0.9).
 *
 * Starts nothing: the broker is ALTAR_KAFKA_BROKERS (scripts/services/kafka.sh
 * start gives one on 127.0.0.1:19092). Usage: bench_kafka [records] [rounds] */
#include "altar/plugin/transport_kafka.h"
#include "util/bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { RECORD = 512, PARTITIONS = 3 };

typedef struct counts {
  long ok, failed;
  char last_err[ALTAR_ERRMSG_MAX];
} counts_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  counts_t *c = ctx;
  if (dr->err) {
    c->failed++;
    snprintf(c->last_err, sizeof c->last_err, "%s", dr->errstr ? dr->errstr : "");
  } else {
    c->ok++;
  }
}

static altar_transport_t *open_t(const char *brokers, counts_t *c, altar_error_t *err) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "bootstrap.servers", brokers);
  altar_transport_opts_t opts = {.on_delivery = on_delivery, .delivery_ctx = c};
  altar_transport_t *t = altar_transport_open_ops(&altar_transport_kafka_ops, &m, &opts, err);
  altar_strmap_clear(&m);
  return t;
}

static int64_t topic_records(altar_transport_t *t, const char *topic) {
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  if (altar_transport_list_topics(t, topic, 20000, &l, &err)) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < l->topics[0].n_partitions; i++)
    n += l->topics[0].partitions[i].end - l->topics[0].partitions[i].beginning;
  altar_topic_list_free(l);
  return n;
}

/* Seconds for the transport to open, produce n records, flush and close. */
static double run_altar(const char *brokers, const char *topic, long n, const char *payload) {
  counts_t c = {0};
  altar_error_t err = {0};
  double t0 = bench_now_s();
  altar_transport_t *t = open_t(brokers, &c, &err);
  if (!t) {
    fprintf(stderr, "bench_kafka: %s\n", err.msg);
    return -1;
  }
  altar_produce_rec_t rec = {.topic = topic, .partition = ALTAR_PARTITION_ANY, .value = payload, .value_len = RECORD};
  for (long i = 0; i < n; i++) {
    int rc;
    while ((rc = altar_transport_produce(t, &rec, &err)) == ALTAR_EAGAIN) altar_transport_poll(t, 5);
    if (rc) {
      fprintf(stderr, "bench_kafka: produce: %s\n", err.msg);
      altar_transport_close(t);
      return -1;
    }
    if ((i & 1023) == 0) altar_transport_poll(t, 0);
  }
  int rc = altar_transport_flush(t, 120000, &err);
  altar_transport_close(t);
  double dt = bench_now_s() - t0;
  if (rc || c.ok != n) {
    fprintf(stderr, "bench_kafka: altar delivered %ld of %ld (%ld failed: %s) %s\n", c.ok, n, c.failed, c.last_err,
            rc ? err.msg : "");
    return -1;
  }
  return dt;
}

/* Seconds for `kcat -P` to produce the records in file (one per line). */
static double run_kcat(const char *brokers, const char *topic, const char *file) {
  double t0 = bench_now_s();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(file, O_RDONLY);
    if (fd < 0 || dup2(fd, 0) < 0) _exit(127);
    execlp("kcat", "kcat", "-P", "-q", "-b", brokers, "-t", topic, "-X", "enable.idempotence=true", "-X", "acks=all",
           (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  double dt = bench_now_s() - t0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "bench_kafka: kcat failed (exit %d)%s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
            WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": is kcat installed? (scripts/install-deps.sh test)" : "");
    return -1;
  }
  return dt;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
  int rounds = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
  if (n <= 0 || n > 10000000 || rounds <= 0 || rounds > 20) {
    fprintf(stderr, "usage: bench_kafka [records 1..10000000] [rounds 1..20]\n");
    return 2;
  }
  const char *brokers = getenv("ALTAR_KAFKA_BROKERS");
  if (!brokers || !*brokers) brokers = "127.0.0.1:19092";
  counts_t c = {0};
  altar_error_t err = {0};
  altar_transport_t *admin = open_t(brokers, &c, &err);
  altar_topic_list_t *l = NULL;
  if (!admin || altar_transport_list_topics(admin, NULL, 10000, &l, &err)) {
    fprintf(stderr,
            "bench_kafka: no Kafka broker answers at %s (set ALTAR_KAFKA_BROKERS, or run "
            "scripts/services/kafka.sh start): %s\n",
            brokers, err.msg);
    altar_transport_close(admin);
    return 1;
  }
  altar_topic_list_free(l);

  char payload[RECORD + 1];
  for (int i = 0; i < RECORD; i++) payload[i] = (char)('a' + i % 26);
  payload[RECORD] = '\n';
  char file[] = "/tmp/altar-bench-kafka-XXXXXX";
  int fd = mkstemp(file);
  FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!fp) {
    perror("bench_kafka: temp file");
    return 1;
  }
  for (long i = 0; i < n; i++) fwrite(payload, 1, sizeof payload, fp);
  fclose(fp);

  double ta[20], tk[20];
  int rc = 0;
  for (int r = 0; r < rounds && !rc; r++) {
    char ta_topic[128], tk_topic[128];
    snprintf(ta_topic, sizeof ta_topic, "altar-bench-altar-%ld-%d", (long)getpid(), r);
    snprintf(tk_topic, sizeof tk_topic, "altar-bench-kcat-%ld-%d", (long)getpid(), r);
    if (altar_transport_create_topic(admin, ta_topic, PARTITIONS, &err) ||
        altar_transport_create_topic(admin, tk_topic, PARTITIONS, &err)) {
      fprintf(stderr, "bench_kafka: %s\n", err.msg);
      rc = 1;
      break;
    }
    /* Alternate who goes first, so neither always runs on a warmer broker. */
    if (r % 2 == 0) {
      tk[r] = run_kcat(brokers, tk_topic, file);
      ta[r] = run_altar(brokers, ta_topic, n, payload);
    } else {
      ta[r] = run_altar(brokers, ta_topic, n, payload);
      tk[r] = run_kcat(brokers, tk_topic, file);
    }
    if (ta[r] < 0 || tk[r] < 0) {
      rc = 1;
      break;
    }
    int64_t na = topic_records(admin, ta_topic), nk = topic_records(admin, tk_topic);
    if (na != n || nk != n) {
      fprintf(stderr, "bench_kafka: record count mismatch: altar topic %lld, kcat topic %lld, want %ld\n",
              (long long)na, (long long)nk, n);
      rc = 1;
      break;
    }
    printf("round %d: altar %.0f rec/s (%.2f s), kcat %.0f rec/s (%.2f s)\n", r + 1, n / ta[r], ta[r], n / tk[r],
           tk[r]);
  }
  unlink(file);
  altar_transport_close(admin);
  if (rc) return rc;
  qsort(ta, (size_t)rounds, sizeof ta[0], cmp_d);
  qsort(tk, (size_t)rounds, sizeof tk[0], cmp_d);
  double ra = n / ta[rounds / 2], rk = n / tk[rounds / 2];
  printf("kafka produce, %ld records of %d bytes, acks=all, idempotent, %d partitions, median of %d rounds:\n", n,
         RECORD, PARTITIONS, rounds);
  printf("  altar kafka transport: %.0f records/s (%.1f MB/s)\n", ra, ra * RECORD / 1e6);
  printf("  kcat -P (baseline):    %.0f records/s (%.1f MB/s)\n", rk, rk * RECORD / 1e6);
  printf("  ratio altar/kcat: %.2f (aim >= 0.90)\n", ra / rk);
  return 0;
}
