/* Shared pieces of the benchmarks (bench_util.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "bench_util.h"
#include "altar/plugin/transport.h"
#include "core/unconst.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bench_now_s(void) { return clock_s(CLOCK_MONOTONIC); }

double bench_cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

void bench_die(const char *prog, const char *what, const altar_error_t *err) {
  fprintf(stderr, "%s: %s: %s\n", prog, what, err ? err->msg : "");
  exit(1);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void bench_rm_tree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

altar_transport_t *bench_open_local_log(const char *prog, const char *dir, altar_strmap_t *props, const char *topic,
                                        int partitions) {
  altar_strmap_set(props, "dir", dir);
  altar_strmap_set(props, "fsync", "never");
  altar_error_t e = {0};
  altar_transport_register(&altar_transport_local_ops);
  altar_transport_t *t = altar_transport_open("local", props, NULL, &e);
  if (!t) bench_die(prog, "open the embedded log", &e);
  if (altar_transport_create_topic(t, topic, partitions, &e)) bench_die(prog, "create a topic", &e);
  return t;
}

void bench_write_succeeded_shard(altar_transport_t *t, const char *topic, altar_spec_t *spec, altar_buf_t *buf,
                                 const char *group, long fold, long width, const char *task_key) {
  char f[24], nf[24];
  snprintf(f, sizeof f, "%ld", fold);
  snprintf(nf, sizeof nf, "%ld", width);
  altar_spec_set_label(spec, "job_id", "bench");
  altar_spec_set_label(spec, "group", group);
  altar_spec_set_label(spec, "fold", f);
  altar_spec_set_label(spec, "num_folds", nf);
  altar_status_event_t ev = {.v = 1,
                             .event = ALTAR_EV_SUBMITTED,
                             .task_key = ALTAR__UNCONST(task_key),
                             .kind = "bench",
                             .state = ALTAR_STATE_PENDING,
                             .spec = spec,
                             .worker = "w",
                             .ts = 1.0};
  altar_error_t e = {0};
  altar_handle_init_for_spec(&ev.handle, "process", task_key, spec);
  for (int k = 0; k < 2; k++) {
    altar_buf_reset(buf);
    if (altar_encode_status(&ev, buf, &e)) bench_die("bench", "encode", &e);
    altar_produce_rec_t rec = {.topic = topic,
                               .partition = ALTAR_PARTITION_ANY,
                               .key = group,
                               .key_len = strlen(group),
                               .value = buf->data,
                               .value_len = buf->len};
    while (altar_transport_produce(t, &rec, &e) == ALTAR_EAGAIN) altar_transport_poll(t, 10);
    ev.event = ALTAR_EV_STATE;
    ev.state = ALTAR_STATE_SUCCEEDED;
    ev.spec = NULL;
  }
  altar_handle_clear(&ev.handle);
}
