/* The worker, in-process, on the local transport and a scripted fake
 * backend: status events in order, poison to the DLQ with its headers,
 * slots gating intake, commit metadata letting a second worker skip
 * finished jobs, drain and release on stop, and commits retried after a
 * failed one. */
#include "altar/plugin/backend.h"
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/plugin/transport.h"
#include "producer/job_queue.h"
#include "testutil.h"
#include "worker/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a scripted backend ------------------------------------------------ */

/* Each task's fate comes from its spec's "outcome" label: "ok" (default)
 * succeeds, "fail" fails with exit 3, "hang" runs until cancelled (unless
 * hang_succeeds). A task turns RUNNING at its first poll and terminal at
 * its polls_to_finish-th. */
typedef struct ftask {
  char id[32];
  char outcome[16];
  char pool[16]; /* resources.gpu, or "normal" */
  int polls;
  bool done, cancelled;
} ftask_t;

typedef struct fake {
  ftask_t t[512];
  size_t n;
  int running, max_running;
  int polls_to_finish;
  bool hang_succeeds;
  size_t stop_after_submits; /* with stop: request a stop once this many started */
  volatile sig_atomic_t *stop;
  sig_atomic_t stop_value;
  int polls_total, stop2_after_polls; /* with stop: a second signal after this many polls */
  size_t cancelled_live;              /* cancels of tasks still running */
  /* With fake_pool_ops: the pools it declares, and the pools it reports
   * with fixed free slots (none: an empty, autoscaling report). */
  const char *serves[4];
  size_t n_serves;
  const char *fixed_pool[4];
  int64_t fixed_free[4];
  size_t n_fixed;
  /* with stop: request a stop once stop_after_started tasks started and
   * finished and a few more capacity reports went by, or at the latest
   * after stop_at_cap_calls reports (so a test of a job that never comes
   * ends too) */
  size_t stop_after_started;
  int cap_calls, quiet_calls, stop_at_cap_calls;
  const altar_backend_ops_t *ops; /* NULL: fake_ops */
  int quick_waits;                /* with fake_wake_ops: wait_change calls that did not block */
  int change_pipe[2];             /* with fake_fd_ops: readable while a task runs */
  int fd_asks;                    /* with fake_fd_ops: change_fd calls */
} fake_t;

static ftask_t *ffind(fake_t *f, const char *id) {
  for (size_t i = 0; i < f->n; i++)
    if (!strcmp(f->t[i].id, id)) return &f->t[i];
  return NULL;
}

static int fake_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  (void)be;
  (void)cfg;
  return altar_error_set(err, ALTAR_ENOTSUP, "use altar_backend_wrap");
}
static void fake_close(altar_backend_t *be) { (void)be; /* the test owns the fake */ }

/* Staging fails by outcome: "escape" as a path leaving its root, "flaky"
 * as a transient error, "corrupt" as a digest mismatch. */
static int fake_stage(altar_backend_t *be, const altar_transfer_t *in, size_t n, altar_error_t *err) {
  (void)be;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(in[i].uri, "fake://escape"))
      return altar_error_set(err, ALTAR_EPATH, "inputs[%zu]: resolves outside the data root", i);
    if (!strcmp(in[i].uri, "fake://flaky")) return altar_error_set(err, ALTAR_EIO, "inputs[%zu]: store unreachable", i);
    if (!strcmp(in[i].uri, "fake://corrupt"))
      return altar_error_set(err, ALTAR_EINTEGRITY, "inputs[%zu]: digest mismatch", i);
  }
  return ALTAR_OK;
}

static int fake_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  fake_t *f = altar_backend_impl(be);
  if (f->n == 512) return altar_error_set(err, ALTAR_ENOMEM, "fake: full");
  ftask_t *t = &f->t[f->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->id, sizeof t->id, "fake-%zu", f->n);
  const char *o = altar_strmap_get(&spec->labels, "outcome");
  snprintf(t->outcome, sizeof t->outcome, "%s", o ? o : "ok");
  snprintf(t->pool, sizeof t->pool, "%s", spec->resources.gpu ? spec->resources.gpu : ALTAR_POOL_CPU);
  if (++f->running > f->max_running) f->max_running = f->running;
  if (f->stop && f->stop_after_submits == f->n) *f->stop = f->stop_value;
  return altar_handle_init_for_spec(ph, "fake", t->id, spec);
}

static int fake_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *st, altar_error_t *err) {
  (void)err;
  fake_t *f = altar_backend_impl(be);
  if (f->stop && f->stop2_after_polls && ++f->polls_total == f->stop2_after_polls) *f->stop = 2;
  for (size_t i = 0; i < n; i++) {
    ftask_t *t = ffind(f, hs[i].external_id);
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT(!t->cancelled); /* a released task is never polled again */
    CU_ASSERT(!t->done);      /* nor a finished one */
    t->polls++;
    bool hang = !strcmp(t->outcome, "hang") && !f->hang_succeeds;
    if (hang || t->polls < f->polls_to_finish) {
      st[i].state = ALTAR_STATE_RUNNING;
      continue;
    }
    t->done = true;
    f->running--;
    if (!strcmp(t->outcome, "fail")) {
      st[i].state = ALTAR_STATE_FAILED;
      st[i].failure = altar_failure_exit(3, "scripted failure", true);
    } else {
      st[i].state = ALTAR_STATE_SUCCEEDED;
    }
  }
  return ALTAR_OK;
}

static int fake_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  (void)err;
  fake_t *f = altar_backend_impl(be);
  ftask_t *t = ffind(f, h->external_id);
  if (t && !t->done && !t->cancelled) {
    t->cancelled = true;
    f->running--;
    f->cancelled_live++;
  }
  return ALTAR_OK;
}

/* The operations every fake table shares; each table adds its own. */
#define FAKE_BASE_OPS                                                                                                  \
  .name = "fake", .input_digest_verification = ALTAR_VERIFY_STAGING, .open = fake_open, .close = fake_close,           \
  .stage_inputs = fake_stage, .submit = fake_submit, .poll = fake_poll, .cancel = fake_cancel

static const altar_backend_ops_t fake_ops = {FAKE_BASE_OPS, .caps = ALTAR_BACKEND_CAP_CANCEL};

/* Says a task may have changed whenever one runs, as a backend fed by a
 * watch does when its events arrive. */
static int fake_wait_change(altar_backend_t *be, int timeout_ms) {
  fake_t *f = altar_backend_impl(be);
  if (timeout_ms == 0) f->quick_waits++;
  return f->running > 0 ? 1 : 0;
}

static const altar_backend_ops_t fake_wake_ops = {
    FAKE_BASE_OPS,
    .caps = ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_WAIT_CHANGE,
    .wait_change = fake_wait_change,
};

/* A backend whose only news comes through its change descriptor:
 * wait_change never says a task changed, the descriptor is readable while
 * one runs (as a pidfd set is once a supervisor exited). */
static int fake_never_changed(altar_backend_t *be, int timeout_ms) {
  (void)be;
  (void)timeout_ms;
  return 0;
}

static int fake_change_fd(altar_backend_t *be) {
  fake_t *f = altar_backend_impl(be);
  f->fd_asks++;
  char drain[16];
  if (f->running > 0) (void)!write(f->change_pipe[1], "x", 1);
  else
    while (read(f->change_pipe[0], drain, sizeof drain) > 0) {}
  return f->change_pipe[0];
}

static const altar_backend_ops_t fake_fd_ops = {
    FAKE_BASE_OPS,
    .caps = ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_WAIT_CHANGE,
    .wait_change = fake_never_changed,
    .change_fd = fake_change_fd,
};

static int fake_pools(altar_backend_t *be, const char **pnames, size_t max) {
  fake_t *f = altar_backend_impl(be);
  for (size_t i = 0; i < f->n_serves && i < max; i++) pnames[i] = f->serves[i];
  return (int)f->n_serves;
}

static int fake_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  (void)err;
  fake_t *f = altar_backend_impl(be);
  for (size_t i = 0; i < f->n_fixed; i++) altar_capacity_set(pcap, f->fixed_pool[i], f->fixed_free[i]);
  f->cap_calls++;
  if (f->stop && f->n >= f->stop_after_started && f->running == 0) f->quiet_calls++;
  if (f->stop && (f->quiet_calls > 10 || (f->stop_at_cap_calls && f->cap_calls >= f->stop_at_cap_calls))) *f->stop = 1;
  return ALTAR_OK;
}

/* The scripted backend with a pool mapping and a capacity report. */
static const altar_backend_ops_t fake_pool_ops = {
    FAKE_BASE_OPS,
    .caps = ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_POOLS | ALTAR_BACKEND_CAP_CANCEL,
    .capacity = fake_capacity,
    .pools = fake_pools,
};

/* ---- fixtures -------------------------------------------------------------- */

static altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};

static altar_transport_t *open_named(const char *name, const char *dir) {
  altar_strmap_t m = {0};
  altar_strmap_set(&m, "dir", dir);
  altar_strmap_set(&m, "rebalance.check.ms", "20");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open(name, &m, NULL, &err);
  if (!t) fprintf(stderr, "open %s: %s\n", name, err.msg);
  altar_strmap_clear(&m);
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

static altar_transport_t *open_local(const char *dir) { return open_named("local", dir); }

static void make_topics(const char *dir, int32_t job_parts) {
  altar_transport_t *t = open_local(dir);
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "jobs", job_parts, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "status", 2, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "dlq", 1, &err) == 0);
  altar_transport_close(t);
}

static char last_job_id[ALTAR_RUN_ID_MAX + 1]; /* of the last submit */
static const char *submit_job_id;              /* the job id the next submit uses; NULL: minted */
static const char *const *submit_gpus;         /* job i's resources.gpu (NULL entries: CPU); NULL: all CPU */

/* Submits one job per outcome, in order; fold i gets outcomes[i]. */
static void submit(const char *dir, const char *const *outcomes, size_t n) {
  altar_transport_t *t = open_local(dir);
  altar_spec_t *v = calloc(n, sizeof *v);
  CU_ASSERT_FATAL(v != NULL);
  for (size_t i = 0; i < n; i++) {
    altar_spec_t *s = altar_spec_new("shard", "none");
    altar_spec_add_arg(s, "/bin/true");
    char fold[16];
    snprintf(fold, sizeof fold, "%zu", i);
    altar_spec_set_label(s, "fold", fold);
    altar_spec_set_label(s, "outcome", outcomes[i]);
    if (submit_job_id) altar_spec_set_label(s, ALTAR_JOB_ID_LABEL, submit_job_id);
    if (submit_gpus && submit_gpus[i]) altar_spec_set_gpu(s, submit_gpus[i], 1);
    if (!strncmp(outcomes[i], "stage-", 6)) {
      char uri[64];
      snprintf(uri, sizeof uri, "fake://%s", outcomes[i] + 6);
      altar_spec_add_input(s, uri, "in/x", NULL, NULL);
    }
    v[i] = *s;
    free(s);
  }
  altar_job_queue_t q = {.transport = t, .topics = &topics};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  altar_error_t err = {0};
  int rc = altar__job_queue_submit(&q, "shard", v, n, run_id, &err);
  if (rc) fprintf(stderr, "submit: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  memcpy(last_job_id, run_id, sizeof last_job_id);
  for (size_t i = 0; i < n; i++) altar_spec_clear(&v[i]);
  free(v);
  altar_transport_close(t);
}

static void produce_raw(const char *dir, const void *value, size_t len) {
  altar_transport_t *t = open_local(dir);
  altar_error_t err = {0};
  altar_produce_rec_t rec = {.topic = "jobs", .partition = 0, .value = value, .value_len = len};
  CU_ASSERT_FATAL(altar_transport_produce(t, &rec, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_flush(t, 10000, &err) == 0);
  altar_transport_close(t);
}

static int lease_timeout_ms; /* 0: the worker's default */
static int poll_interval_ms = 5;

static int run_worker(altar_transport_t *t, fake_t *f, int64_t slots, int64_t max_jobs, int drain_ms,
                      volatile sig_atomic_t *stop, altar_worker_stats_t *st) {
  altar_backend_t *be = altar_backend_wrap(f->ops ? f->ops : &fake_ops, f, NULL);
  CU_ASSERT_FATAL(be != NULL);
  altar_worker_opts_t o = {
      .transport = t,
      .backend = be,
      .topics = &topics,
      .worker_id = "host-a:1",
      .slots = slots,
      .poll_interval_ms = poll_interval_ms,
      .commit_interval_ms = 100, /* what a kill mid-run leaves committed is asserted below */
      .drain_ms = drain_ms,
      .max_jobs = max_jobs,
      .exit_when_idle = true,
      .stop = stop,
      .quiet = true,
      .lease_timeout_ms = lease_timeout_ms,
  };
  altar_error_t err = {0};
  int rc = altar__worker_run(&o, st, &err);
  if (rc) fprintf(stderr, "worker: %s\n", err.msg);
  altar_backend_close(be);
  return rc;
}

/* Every record of a topic, any partition order. */
typedef struct rec {
  altar_buf_t value;
  char *key, *reason, *source, *size;
  int32_t partition;
} rec_t;

static char *hdr(const altar_msg_t *m, const char *name) {
  const void *v;
  size_t l;
  return altar_msg_header(m, name, &v, &l) == 0 ? strndup(v, l) : NULL;
}

static size_t read_topic(const char *dir, const char *topic, rec_t *out, size_t max) {
  altar_transport_t *t = open_local(dir);
  altar_error_t err = {0};
  altar_topic_list_t *tl = NULL;
  CU_ASSERT_FATAL(altar_transport_list_topics(t, topic, 5000, &tl, &err) == 0);
  const altar_topic_info_t *ti = &tl->topics[0];
  size_t n = 0;
  for (size_t p = 0; p < ti->n_partitions; p++) {
    int64_t want = ti->partitions[p].end - ti->partitions[p].beginning;
    if (!want) continue;
    altar_transport_t *c = open_local(dir);
    altar_tp_t tp = {topic, ti->partitions[p].partition, ALTAR_OFFSET_BEGINNING};
    CU_ASSERT_FATAL(altar_transport_assign(c, &tp, 1, &err) == 0);
    while (want > 0) {
      altar_msg_t *m = NULL;
      CU_ASSERT_FATAL(altar_transport_consume(c, 1000, &m, &err) == 0);
      if (!m) continue;
      want--;
      CU_ASSERT_FATAL(n < max);
      rec_t *r = &out[n++];
      memset(r, 0, sizeof *r);
      altar_buf_append(&r->value, m->value ? m->value : "", m->value_len);
      r->key = m->key ? strndup(m->key, m->key_len) : NULL;
      r->reason = hdr(m, ALTAR_DLQ_REASON_HEADER);
      r->source = hdr(m, ALTAR_DLQ_SOURCE_HEADER);
      r->size = hdr(m, ALTAR_DLQ_SIZE_HEADER);
      r->partition = m->partition;
      altar_msg_free(m);
    }
    altar_transport_close(c);
  }
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return n;
}

static void recs_clear(rec_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    altar_buf_free(&v[i].value);
    free(v[i].key);
    free(v[i].reason);
    free(v[i].source);
    free(v[i].size);
  }
}

/* Status events decoded, in log order within each partition. */
static altar_status_event_t evs[1024];
static size_t n_evs;

static void load_status(const char *dir) {
  static rec_t r[1024];
  size_t n = read_topic(dir, "status", r, 1024);
  altar_error_t err = {0};
  n_evs = 0;
  for (size_t i = 0; i < n; i++) {
    memset(&evs[n_evs], 0, sizeof evs[n_evs]);
    CU_ASSERT_FATAL(altar_decode_status(r[i].value.data, r[i].value.len, &evs[n_evs], &err) == 0);
    /* Keyed by the status key: with no group specs, the task key. */
    CU_ASSERT(r[i].key && !strcmp(r[i].key, evs[n_evs].task_key));
    n_evs++;
  }
  recs_clear(r, n);
}

static void clear_status(void) {
  for (size_t i = 0; i < n_evs; i++) altar_status_event_clear(&evs[i]);
  n_evs = 0;
}

static const char *outcome_of(const altar_status_event_t *e) {
  const char *o = altar_strmap_get(&e->handle.labels, "outcome");
  return o ? o : "?";
}

/* The worker group's committed offset and metadata of a jobs partition;
 * false when the log cannot say (the group may not exist yet). */
static bool committed_now(const char *dir, int32_t partition, int64_t *poff, char **pmeta) {
  altar_transport_t *t = open_local(dir);
  altar_error_t err = {0};
  *pmeta = NULL;
  bool ok = altar_transport_committed(t, ALTAR_WORKER_GROUP, "jobs", partition, 5000, poff, pmeta, &err) == 0;
  altar_transport_close(t);
  return ok;
}

static int64_t committed(const char *dir, int32_t partition, char **pmeta) {
  int64_t off = ALTAR_OFFSET_INVALID;
  char *meta = NULL;
  CU_ASSERT(committed_now(dir, partition, &off, &meta));
  if (pmeta) *pmeta = meta;
  else free(meta);
  return off;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_status_events_in_order(void) {
  char *dir = altar_test_tmpdir("worker-order");
  make_topics(dir, 2);
  const char *outcomes[] = {"ok", "fail", "ok", "ok", "fail"};
  submit(dir, outcomes, 5);
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 3;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 2, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.consumed, 5);
  CU_ASSERT_EQUAL(st.submitted, 5);
  CU_ASSERT_EQUAL(st.succeeded, 3);
  CU_ASSERT_EQUAL(st.failed, 2);
  CU_ASSERT_EQUAL(st.dead_lettered, 0);
  CU_ASSERT_EQUAL(st.status_events, 15); /* submitted, running, terminal */

  load_status(dir);
  CU_ASSERT_EQUAL(n_evs, 15);
  /* Per task: submitted (pending, with its spec and source) → running → terminal. */
  for (size_t i = 0; i < n_evs; i++) {
    if (evs[i].event != ALTAR_EV_SUBMITTED) continue;
    const altar_status_event_t *seq[8];
    size_t k = 0;
    for (size_t j = 0; j < n_evs && k < 8; j++)
      if (!strcmp(evs[j].task_key, evs[i].task_key)) seq[k++] = &evs[j];
    CU_ASSERT_FATAL(k == 3);
    CU_ASSERT(seq[0] == &evs[i]);
    CU_ASSERT(seq[0]->state == ALTAR_STATE_PENDING && seq[0]->spec != NULL);
    CU_ASSERT(seq[1]->event == ALTAR_EV_STATE && seq[1]->state == ALTAR_STATE_RUNNING && !seq[1]->spec);
    bool fail = !strcmp(outcome_of(seq[0]), "fail");
    CU_ASSERT(seq[2]->event == ALTAR_EV_STATE);
    CU_ASSERT_EQUAL(seq[2]->state, fail ? ALTAR_STATE_FAILED : ALTAR_STATE_SUCCEEDED);
    CU_ASSERT((seq[2]->failure != NULL) == fail);
    if (fail && seq[2]->failure) CU_ASSERT(seq[2]->failure->deterministic);
    for (size_t j = 0; j < 3; j++) {
      CU_ASSERT(seq[j]->ts >= seq[0]->ts);
      CU_ASSERT(seq[j]->worker && !strcmp(seq[j]->worker, "host-a:1"));
      CU_ASSERT(seq[j]->source.set && !strcmp(seq[j]->source.topic, "jobs"));
      CU_ASSERT_EQUAL(seq[j]->source.offset, seq[0]->source.offset);
      CU_ASSERT_STRING_EQUAL(seq[j]->handle.external_id, seq[0]->handle.external_id);
    }
  }
  clear_status();
  /* Everything finished: both partitions committed at their end, no metadata. */
  int64_t total = 0;
  for (int32_t p = 0; p < 2; p++) {
    char *meta = NULL;
    int64_t off = committed(dir, p, &meta);
    CU_ASSERT(meta == NULL || meta[0] == 0);
    free(meta);
    if (off > 0) total += off;
  }
  CU_ASSERT_EQUAL(total, 5);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_poison_to_dlq(void) {
  char *dir = altar_test_tmpdir("worker-poison");
  make_topics(dir, 1);
  produce_raw(dir, "\xc1garbage\xff", 9); /* offset 0: not msgpack */
  /* offset 1: a well-formed job whose input escapes the data root */
  altar_job_msg_t job = {.v = ALTAR_SCHEMA_VERSION, .job_id = "poison", .submitted_at = 1.0};
  job.spec.kind = "shard";
  job.spec.image = "none";
  char *cmd[] = {"/bin/true"};
  job.spec.command = cmd;
  job.spec.n_command = 1;
  altar_transfer_t in = {.uri = "file:///etc/passwd", .logical_path = "../../etc/passwd"};
  job.spec.inputs = &in;
  job.spec.n_inputs = 1;
  job.spec.resources.count = 1;
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_job(&job, &b, &err) == 0);
  produce_raw(dir, b.data, b.len);
  size_t esc_len = b.len;
  altar_buf_free(&b);
  /* offset 2: larger than any message may be */
  size_t big = ALTAR_MAX_MESSAGE + 10;
  char *huge = malloc(big);
  CU_ASSERT_FATAL(huge != NULL);
  memset(huge, 'x', big);
  produce_raw(dir, huge, big);
  free(huge);
  produce_raw(dir, "", 0); /* offset 3: empty */
  const char *ok[] = {"ok"};
  submit(dir, ok, 1); /* offset 4: a real job, still run */

  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 1;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 2, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.dead_lettered, 4);
  CU_ASSERT_EQUAL(st.succeeded, 1);
  CU_ASSERT_EQUAL(f.n, 1); /* nothing poisonous reached the backend */

  static rec_t r[8];
  size_t n = read_topic(dir, "dlq", r, 8);
  CU_ASSERT_FATAL(n == 4);
  for (size_t i = 0; i < n; i++) {
    CU_ASSERT_FATAL(r[i].reason && r[i].source && r[i].size);
    char want_src[32];
    snprintf(want_src, sizeof want_src, "jobs/0/%zu", i);
    CU_ASSERT_STRING_EQUAL(r[i].source, want_src);
  }
  CU_ASSERT(strstr(r[0].reason, "undecodable") != NULL);
  CU_ASSERT(r[0].value.len == 9 && !memcmp(r[0].value.data, "\xc1garbage\xff", 9)); /* original bytes */
  CU_ASSERT_STRING_EQUAL(r[0].size, "9");
  CU_ASSERT(strstr(r[1].reason, "logical_path") != NULL);
  CU_ASSERT_EQUAL(r[1].value.len, esc_len);
  CU_ASSERT(strstr(r[2].reason, "too large") != NULL);
  CU_ASSERT_EQUAL(r[2].value.len, ALTAR_DLQ_MAX_VALUE); /* kept bounded */
  char want_size[32];
  snprintf(want_size, sizeof want_size, "%zu", big);
  CU_ASSERT_STRING_EQUAL(r[2].size, want_size);
  CU_ASSERT(strstr(r[3].reason, "empty") != NULL);
  recs_clear(r, n);
  /* Poison counts as done: the offset moves past all of it. */
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 5);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_slots_gate_intake(void) {
  char *dir = altar_test_tmpdir("worker-slots");
  make_topics(dir, 3);
  const char *outcomes[16];
  for (size_t i = 0; i < 16; i++) outcomes[i] = "ok";
  submit(dir, outcomes, 16);
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 6;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 3, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 16);
  CU_ASSERT_EQUAL(f.n, 16);
  CU_ASSERT(f.max_running <= 3); /* never more than `slots` in flight */
  CU_ASSERT(f.max_running >= 2); /* and the slots were used */
  CU_ASSERT_EQUAL(f.running, 0);
  altar_test_rmtree(dir);
  free(dir);
}

/* The first worker finishes jobs 1 and 2 but not 0, stops (max_jobs) and
 * releases 0; it commits offset 0 with 1-2 finished and 0 held in the
 * metadata, then a "release" control message for 0. The second waits for
 * 0 instead of starting it, skips 1 and 2, and starts 0 on the release. */
static void test_commit_metadata_skips_finished(void) {
  char *dir = altar_test_tmpdir("worker-meta");
  make_topics(dir, 1);
  const char *outcomes[] = {"hang", "ok", "ok"};
  submit(dir, outcomes, 3);
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 2;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 3, 2, 0, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 2);
  CU_ASSERT_EQUAL(st.released, 1);
  CU_ASSERT_EQUAL(f.cancelled_live, 1);
  CU_ASSERT_EQUAL(f.running, 0);
  char *meta = NULL;
  CU_ASSERT_EQUAL(committed(dir, 0, &meta), 0);
  CU_ASSERT(meta && !strcmp(meta, "o2:1-2/3"));
  free(meta);
  load_status(dir);
  size_t released = 0;
  for (size_t i = 0; i < n_evs; i++)
    if (evs[i].event == ALTAR_EV_RELEASED) {
      released++;
      CU_ASSERT_STRING_EQUAL(outcome_of(&evs[i]), "hang");
    }
  CU_ASSERT_EQUAL(released, 1);
  clear_status();

  static fake_t g;
  memset(&g, 0, sizeof g);
  g.polls_to_finish = 1;
  g.hang_succeeds = true;
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &g, 3, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.consumed, 4); /* three jobs, one control message */
  CU_ASSERT_EQUAL(st.controls, 1);
  CU_ASSERT_EQUAL(st.skipped, 2);
  CU_ASSERT_EQUAL(st.waited, 1);
  CU_ASSERT_EQUAL(st.taken_over, 1);
  CU_ASSERT_EQUAL(st.submitted, 1);
  CU_ASSERT_FATAL(g.n == 1);
  CU_ASSERT_STRING_EQUAL(g.t[0].outcome, "hang");
  meta = NULL;
  CU_ASSERT_EQUAL(committed(dir, 0, &meta), 4);
  CU_ASSERT(meta == NULL || meta[0] == 0);
  free(meta);
  altar_test_rmtree(dir);
  free(dir);
}

/* A stop request (SIGTERM) while tasks run: intake stops and the worker
 * leaves the group at once, committing its held bound (jobs 0-2 still run);
 * held tasks get the drain time and finish with a "done" control message
 * each, a task that would never finish is cancelled and released with a
 * "release" one. A second worker then waits instead of re-running: it runs
 * only the released job and the three never started. */
static void test_drain_and_release_on_stop(void) {
  char *dir = altar_test_tmpdir("worker-drain");
  make_topics(dir, 1);
  const char *outcomes[] = {"ok", "hang", "ok", "ok", "ok", "ok"};
  submit(dir, outcomes, 6);
  static volatile sig_atomic_t stop;
  stop = 0;
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 40; /* ~200 ms: none ends before the stop */
  f.stop = &stop;
  f.stop_value = 1;
  f.stop_after_submits = 3; /* "SIGTERM" once jobs 0-2 have started */
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 3, 0, 1000, &stop, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(f.n, 3); /* no intake after the stop */
  CU_ASSERT_EQUAL(st.held, 3);
  CU_ASSERT_EQUAL(st.succeeded, 2);
  CU_ASSERT_EQUAL(st.released, 1);
  CU_ASSERT_EQUAL(f.cancelled_live, 1);
  CU_ASSERT_EQUAL(f.running, 0);
  CU_ASSERT_STRING_EQUAL(f.t[1].outcome, "hang");
  CU_ASSERT(f.t[1].cancelled);
  char *meta = NULL;
  CU_ASSERT_EQUAL(committed(dir, 0, &meta), 0); /* committed at the leave */
  CU_ASSERT(meta && !strcmp(meta, "o2:/3"));    /* 0-2 held */
  free(meta);
  load_status(dir);
  size_t released = 0, terminal = 0;
  for (size_t i = 0; i < n_evs; i++) {
    if (evs[i].event == ALTAR_EV_RELEASED) released++;
    if (evs[i].event == ALTAR_EV_STATE && altar_state_terminal(evs[i].state)) terminal++;
  }
  CU_ASSERT_EQUAL(released, 1);
  CU_ASSERT_EQUAL(terminal, 2);
  clear_status();

  static fake_t h;
  memset(&h, 0, sizeof h);
  h.polls_to_finish = 1;
  h.hang_succeeds = true;
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &h, 3, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.waited, 3);
  CU_ASSERT_EQUAL(st.handed_done, 2); /* 0 and 2: finished under the first worker */
  CU_ASSERT_EQUAL(st.taken_over, 1);  /* 1: released */
  CU_ASSERT(st.controls >= 4);        /* two "done", one "release", a lease or more */
  CU_ASSERT_FATAL(h.n == 4);
  size_t hangs = 0;
  for (size_t i = 0; i < h.n; i++) hangs += !strcmp(h.t[i].outcome, "hang");
  CU_ASSERT_EQUAL(hangs, 1); /* job 1, beside 3-5 */
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 6 + (int64_t)st.controls);
  altar_test_rmtree(dir);
  free(dir);

  /* A second signal during the drain stops at once: the hanging task is
   * released without waiting out a drain time of an hour. */
  dir = altar_test_tmpdir("worker-drain2");
  make_topics(dir, 1);
  const char *one[] = {"hang"};
  submit(dir, one, 1);
  stop = 0;
  static fake_t g;
  memset(&g, 0, sizeof g);
  g.polls_to_finish = 1;
  g.stop = &stop;
  g.stop_value = 1;
  g.stop_after_submits = 1;
  g.stop2_after_polls = 20; /* well into the drain, the second signal */
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &g, 3, 0, 3600 * 1000, &stop, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(stop, 2);
  CU_ASSERT_EQUAL(g.n, 1);
  CU_ASSERT_EQUAL(st.succeeded, 0);
  CU_ASSERT_EQUAL(st.released, 1);
  CU_ASSERT_EQUAL(g.cancelled_live, 1);
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 0); /* nothing finished */
  altar_test_rmtree(dir);
  free(dir);
}

/* Partition 0's committed offset and metadata as they are now: false
 * while nothing is committed (the group may not exist yet). */
/* Runs a worker in a child with job 0 hanging and job 1 finished, and
 * kills it (SIGKILL) once its periodic commit holds 0 with 1 finished, as
 * read from the log: killed at a poll count instead, a slow disk under a
 * loaded CI let the kill come before that commit. */
static void run_killed_worker(const char *dir) {
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    static fake_t k;
    memset(&k, 0, sizeof k);
    k.polls_to_finish = 2;
    altar_transport_t *t = open_local(dir);
    altar_worker_stats_t st = {0};
    run_worker(t, &k, 3, 0, 1000, NULL, &st);
    _exit(3); /* not reached: job 0 never ends, we kill it */
  }
  bool held = false;
  for (int i = 0; i < 6000 && !held; i++) { /* up to a minute */
    int64_t off = ALTAR_OFFSET_INVALID;
    char *meta = NULL;
    held = committed_now(dir, 0, &off, &meta) && off == 0 && meta && !strcmp(meta, "o2:1/2");
    free(meta);
    if (!held) nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
  }
  CU_ASSERT(held);
  kill(pid, SIGKILL);
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void produce_control(const char *dir, altar_control_event_t ev, int32_t partition, int64_t offset) {
  altar_control_msg_t c = {.event = ev, .partition = partition, .offsets = &offset, .n_offsets = 1, .ts = 1};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_control(&c, &b, &err) == 0);
  produce_raw(dir, b.data, b.len);
  altar_buf_free(&b);
}

/* The holder of a job dies (kill -9): the next worker waits a lease
 * timeout for news of it, then starts it under the same task key. A "done"
 * from another holder instead finishes the waited job without a run; a
 * control message naming another partition, or an offset nobody waits
 * for, changes nothing. */
static void test_waits_for_holder(void) {
  char *dir = altar_test_tmpdir("worker-wait");
  make_topics(dir, 1);
  const char *outcomes[] = {"hang", "ok"};
  submit(dir, outcomes, 2);
  run_killed_worker(dir);
  char *meta = NULL;
  CU_ASSERT_EQUAL(committed(dir, 0, &meta), 0);
  CU_ASSERT(meta && !strcmp(meta, "o2:1/2")); /* 0 held, 1 finished */
  free(meta);
  lease_timeout_ms = 300;
  static fake_t g;
  memset(&g, 0, sizeof g);
  g.polls_to_finish = 1;
  g.hang_succeeds = true;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &g, 3, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.waited, 1);
  CU_ASSERT_EQUAL(st.taken_over, 1); /* no lease came: started here */
  CU_ASSERT_EQUAL(st.skipped, 1);
  CU_ASSERT_FATAL(g.n == 1);
  CU_ASSERT_STRING_EQUAL(g.t[0].outcome, "hang");
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 2);
  altar_test_rmtree(dir);
  free(dir);

  dir = altar_test_tmpdir("worker-wait-done");
  make_topics(dir, 1);
  submit(dir, outcomes, 2);
  run_killed_worker(dir);
  produce_control(dir, ALTAR_CTL_DONE, 5, 0);  /* names another partition: ignored */
  produce_control(dir, ALTAR_CTL_DONE, 0, 77); /* an offset nobody waits for: ignored */
  produce_control(dir, ALTAR_CTL_LEASE, 0, 0);
  produce_control(dir, ALTAR_CTL_DONE, 0, 0);
  lease_timeout_ms = 60000; /* only the "done" can end the wait in time */
  static fake_t h;
  memset(&h, 0, sizeof h);
  h.polls_to_finish = 1;
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &h, 3, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  lease_timeout_ms = 0;
  CU_ASSERT_EQUAL(st.waited, 1);
  CU_ASSERT_EQUAL(st.handed_done, 1);
  CU_ASSERT_EQUAL(st.taken_over, 0);
  CU_ASSERT_EQUAL(st.controls, 4);
  CU_ASSERT_EQUAL(h.n, 0); /* nothing ran again */
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 6);
  altar_test_rmtree(dir);
  free(dir);
}

/* A job that fails before it runs (staging) still gets a terminal outcome,
 * and only a transient cause is marked retryable. A digest mismatch found
 * at staging carries the same `deterministic` as the one a task finds: the
 * shared table's. */
static void test_staging_failures_are_terminal(void) {
  char *dir = altar_test_tmpdir("worker-stage");
  make_topics(dir, 1);
  const char *outcomes[] = {"stage-escape", "stage-flaky", "stage-corrupt"};
  submit(dir, outcomes, 3);
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 1;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 2, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(f.n, 0); /* none reached submit */
  CU_ASSERT_EQUAL(st.failed, 3);
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 3);
  load_status(dir);
  size_t seen = 0;
  for (size_t i = 0; i < n_evs; i++) {
    if (evs[i].event != ALTAR_EV_STATE) continue;
    CU_ASSERT_FATAL(evs[i].state == ALTAR_STATE_FAILED && evs[i].failure);
    const char *o = outcome_of(&evs[i]);
    if (!strcmp(o, "stage-escape")) {
      CU_ASSERT_STRING_EQUAL(evs[i].failure->reason, "invalid_spec");
      CU_ASSERT(evs[i].failure->deterministic);
    } else if (!strcmp(o, "stage-flaky")) {
      CU_ASSERT(!evs[i].failure->deterministic);
    } else {
      CU_ASSERT_STRING_EQUAL(evs[i].failure->reason, ALTAR_REASON_INPUT_DIGEST_MISMATCH);
      CU_ASSERT_EQUAL(evs[i].failure->deterministic, altar_reason_deterministic(ALTAR_REASON_INPUT_DIGEST_MISMATCH));
      CU_ASSERT_FALSE(evs[i].failure->deterministic);
    }
    seen++;
  }
  CU_ASSERT_EQUAL(seen, 3);
  clear_status();
  altar_test_rmtree(dir);
  free(dir);
}

/* Registers ops (the local transport with some operations replaced) under
 * name, once per process. */
static void register_variant(altar_transport_ops_t *ops, const char *name) {
  ops->name = name;
  int rc = altar_transport_register(ops);
  CU_ASSERT_FATAL(rc == 0 || rc == ALTAR_EEXIST);
}

/* A transport whose first commit above offset 0 fails: the worker must
 * commit again, not believe the failed commit happened. */
static altar_transport_ops_t flaky_ops;
static int flaky_failures;

static int flaky_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                        const char *metadata, altar_error_t *err) {
  if (offset > 0 && flaky_failures == 0) {
    flaky_failures++;
    return altar_error_set(err, ALTAR_ETRANSPORT, "flaky: commit refused");
  }
  return altar_transport_local_ops.commit(t, topic, partition, offset, metadata, err);
}

static void test_commit_retried_after_failure(void) {
  char *dir = altar_test_tmpdir("worker-flaky");
  make_topics(dir, 1);
  const char *outcomes[] = {"ok"};
  submit(dir, outcomes, 1);
  flaky_ops = altar_transport_local_ops;
  flaky_ops.commit = flaky_commit;
  register_variant(&flaky_ops, "local-flaky");
  flaky_failures = 0;
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 1;
  altar_transport_t *t = open_named("local-flaky", dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 1, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 1);
  CU_ASSERT_EQUAL(flaky_failures, 1);
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 1);
  altar_test_rmtree(dir);
  free(dir);
}

/* Periodic commits are spread over the loop's turns: a turn (one consume
 * call to the next) writes at most one partition's commit, so a round over
 * many partitions never holds a finished task's report back by their sum.
 * Commits between the last consume and the exit (the leave's and the final
 * ones) are not counted: those are all at once by design. */
static altar_transport_ops_t counting_ops;
static int commits_this_turn, most_commits_in_a_turn, commits_counted;
static uint32_t partitions_committed; /* bit per partition */

static int counting_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err) {
  if (commits_this_turn > most_commits_in_a_turn) most_commits_in_a_turn = commits_this_turn;
  commits_counted += commits_this_turn;
  commits_this_turn = 0;
  return altar_transport_local_ops.consume(t, timeout_ms, pmsg, err);
}

static int counting_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                           const char *metadata, altar_error_t *err) {
  commits_this_turn++;
  if (partition >= 0 && partition < 32) partitions_committed |= 1u << partition;
  return altar_transport_local_ops.commit(t, topic, partition, offset, metadata, err);
}

static void test_commit_round_spread_over_turns(void) {
  char *dir = altar_test_tmpdir("worker-commit-round");
  make_topics(dir, 8);
  const char *outcomes[16];
  for (size_t i = 0; i < 16; i++) outcomes[i] = "ok";
  submit(dir, outcomes, 16);
  counting_ops = altar_transport_local_ops;
  counting_ops.consume = counting_consume;
  counting_ops.commit = counting_commit;
  register_variant(&counting_ops, "local-counting");
  commits_this_turn = most_commits_in_a_turn = commits_counted = 0;
  partitions_committed = 0;
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 4; /* one slot, ~20 ms a task: several finish between two rounds */
  altar_transport_t *t = open_named("local-counting", dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 1, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 16);
  /* The jobs were spread over partitions, and rounds did commit during the run. */
  CU_ASSERT(__builtin_popcount(partitions_committed) >= 2);
  CU_ASSERT(commits_counted >= 2);
  CU_ASSERT(most_commits_in_a_turn <= 1);
  for (int32_t p = 0; p < 8; p++) {
    int64_t off = committed(dir, p, NULL);
    CU_ASSERT(off == ALTAR_OFFSET_INVALID || off >= 0);
  }
  altar_test_rmtree(dir);
  free(dir);
}

/* A cancel behind jobs that wait for the only slot is acted on when it is
 * read, not when a slot frees (here none would: the running task never
 * ends by itself): the running task is cancelled, the queued ones of the
 * job are refused as cancelled, another job behind them runs, and every
 * offset is committed. */
static void test_cancel_behind_queued_jobs(void) {
  char *dir = altar_test_tmpdir("worker-cancel");
  make_topics(dir, 1);
  const char *outcomes[] = {"hang", "hang", "ok", "ok"};
  submit(dir, outcomes, 4);
  char job[ALTAR_RUN_ID_MAX + 1];
  memcpy(job, last_job_id, sizeof job);
  altar_control_msg_t c = {
      .v = ALTAR_SCHEMA_VERSION, .event = ALTAR_CTL_CANCEL, .partition = 0, .job_id = job, .ts = 1};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_control(&c, &b, &err) == 0);
  produce_raw(dir, b.data, b.len);
  altar_buf_free(&b);
  const char *other[] = {"ok"};
  submit(dir, other, 1);

  static fake_t f;
  memset(&f, 0, sizeof f);
  f.polls_to_finish = 2;
  volatile sig_atomic_t stop = 0;
  f.stop = &stop;
  f.stop2_after_polls = 20000; /* a bound, should the cancel be missed: fail, not hang */
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 1, 0, 5000, &stop, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(stop, 0);
  CU_ASSERT_EQUAL_FATAL(f.n, 2); /* the first hang and the other job's shard */
  CU_ASSERT_STRING_EQUAL(f.t[0].outcome, "hang");
  CU_ASSERT(f.t[0].cancelled);
  CU_ASSERT_EQUAL(f.cancelled_live, 1);
  CU_ASSERT_EQUAL(st.succeeded, 1);
  CU_ASSERT_EQUAL(st.failed, 4);
  load_status(dir);
  size_t cancelled = 0;
  for (size_t i = 0; i < n_evs; i++)
    if (evs[i].state == ALTAR_STATE_FAILED && evs[i].failure && !strcmp(evs[i].failure->reason, "cancelled")) {
      cancelled++;
      CU_ASSERT_STRING_EQUAL(altar_strmap_get(&evs[i].handle.labels, "job_id"), job);
    }
  CU_ASSERT_EQUAL(cancelled, 4);
  clear_status();
  char *meta = NULL;
  CU_ASSERT_EQUAL(committed(dir, 0, &meta), 6);
  CU_ASSERT(meta && strstr(meta, job)); /* the commit carries the cancel on */
  free(meta);

  /* A new worker starts past the cancel on the log: it learns the cancel
   * from the commit and refuses a later shard of the job unstarted. */
  submit_job_id = job;
  const char *late[] = {"ok"};
  submit(dir, late, 1);
  submit_job_id = NULL;
  static fake_t g;
  memset(&g, 0, sizeof g);
  g.polls_to_finish = 2;
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &g, 1, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(g.n, 0);
  CU_ASSERT_EQUAL(st.failed, 1);
  CU_ASSERT_EQUAL(committed(dir, 0, NULL), 7);
  altar_test_rmtree(dir);
  free(dir);
}

/* How many of f's tasks ran in pool. */
static size_t ran_in(const fake_t *f, const char *pool) {
  size_t n = 0;
  for (size_t i = 0; i < f->n; i++) n += !strcmp(f->t[i].pool, pool);
  return n;
}

/* An autoscaling backend (empty capacity) that can serve "gpu" gets the gpu
 * job and runs it: what it can serve decides the topics, and an empty
 * report gates nothing (#27). */
static void test_autoscaling_pool_served(void) {
  char *dir = altar_test_tmpdir("worker-autoscale");
  make_topics(dir, 2);
  const char *outcomes[] = {"ok", "ok"};
  const char *gpus[] = {ALTAR_GPU_POOL_NORMAL, NULL};
  submit_gpus = gpus;
  submit(dir, outcomes, 2);
  submit_gpus = NULL;
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.ops = &fake_pool_ops;
  f.serves[f.n_serves++] = ALTAR_POOL_CPU;
  f.serves[f.n_serves++] = ALTAR_GPU_POOL_NORMAL;
  f.polls_to_finish = 2;
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 2, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 2);
  CU_ASSERT_EQUAL(ran_in(&f, ALTAR_GPU_POOL_NORMAL), 1);
  CU_ASSERT_EQUAL(ran_in(&f, ALTAR_POOL_CPU), 1);
  altar_test_rmtree(dir);
  free(dir);
}

/* A declared pool reported with 0 fixed free slots is still read: its job
 * waits (not run, not committed, not dead-lettered) while the pools left
 * out of the report (autoscaling) run theirs, and it runs once a slot
 * frees. */
static void test_fixed_zero_pool_waits(void) {
  char *dir = altar_test_tmpdir("worker-zero-pool");
  make_topics(dir, 2);
  const char *outcomes[] = {"ok", "ok", "ok"};
  const char *gpus[] = {NULL, ALTAR_GPU_POOL_NORMAL, ALTAR_GPU_POOL_A100};
  submit_gpus = gpus;
  submit(dir, outcomes, 3);
  submit_gpus = NULL;
  static fake_t f;
  memset(&f, 0, sizeof f);
  f.ops = &fake_pool_ops;
  f.serves[f.n_serves++] = ALTAR_POOL_CPU;
  f.serves[f.n_serves++] = ALTAR_GPU_POOL_NORMAL;
  f.serves[f.n_serves++] = ALTAR_GPU_POOL_A100;
  f.fixed_pool[0] = ALTAR_GPU_POOL_A100;
  f.fixed_free[0] = 0;
  f.n_fixed = 1;
  f.polls_to_finish = 2;
  volatile sig_atomic_t stop = 0;
  f.stop = &stop;
  f.stop_after_started = 2;
  f.stop_at_cap_calls = 2000; /* ~10 s at the 5 ms poll: a test that fails still ends */
  altar_transport_t *t = open_local(dir);
  altar_worker_stats_t st = {0};
  CU_ASSERT_FATAL(run_worker(t, &f, 2, 0, 5000, &stop, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(f.n, 2);
  CU_ASSERT_EQUAL(ran_in(&f, ALTAR_POOL_CPU), 1);
  CU_ASSERT_EQUAL(ran_in(&f, ALTAR_GPU_POOL_NORMAL), 1);
  CU_ASSERT_EQUAL(ran_in(&f, ALTAR_GPU_POOL_A100), 0);
  CU_ASSERT_EQUAL(st.dead_lettered, 0);
  CU_ASSERT_EQUAL(st.refused, 0);

  /* A slot of a100 frees: the job that waited runs. */
  static fake_t f2;
  memset(&f2, 0, sizeof f2);
  f2.ops = &fake_pool_ops;
  f2.serves[f2.n_serves++] = ALTAR_POOL_CPU;
  f2.serves[f2.n_serves++] = ALTAR_GPU_POOL_NORMAL;
  f2.serves[f2.n_serves++] = ALTAR_GPU_POOL_A100;
  f2.fixed_pool[0] = ALTAR_GPU_POOL_A100;
  f2.fixed_free[0] = 1;
  f2.n_fixed = 1;
  f2.polls_to_finish = 2;
  t = open_local(dir);
  memset(&st, 0, sizeof st);
  CU_ASSERT_FATAL(run_worker(t, &f2, 2, 0, 5000, NULL, &st) == 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(ran_in(&f2, ALTAR_GPU_POOL_A100), 1);
  CU_ASSERT_EQUAL(f2.n, 1); /* the other two finished in the first run */
  altar_test_rmtree(dir);
  free(dir);
}

static int setup(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  return rc == 0 || rc == ALTAR_EEXIST ? 0 : -1;
}

/* Runs two quick jobs in a child with an hour between backend polls and
 * the given fake backend; the child fails unless both succeed and the
 * backend's counter (*asks, how it told of changes) moved. The child's alarm
 * ends a worker that would wait out the hour instead. */
static void run_hour_between_polls(const char *tag, const altar_backend_ops_t *ops, bool change_pipe,
                                   size_t asks_offset) {
  char *dir = altar_test_tmpdir(tag);
  make_topics(dir, 1);
  const char *outcomes[2] = {"ok", "ok"};
  submit(dir, outcomes, 2);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    alarm(300);
    static fake_t k;
    memset(&k, 0, sizeof k);
    if (change_pipe && pipe2(k.change_pipe, O_NONBLOCK | O_CLOEXEC) != 0) _exit(2);
    k.polls_to_finish = 3;
    k.ops = ops;
    poll_interval_ms = 3600 * 1000;
    altar_transport_t *t = open_local(dir);
    altar_worker_stats_t st = {0};
    int rc = run_worker(t, &k, 8, 2, 1000, NULL, &st);
    altar_transport_close(t);
    int asks = *(const int *)((const char *)&k + asks_offset);
    if (rc || st.succeeded != 2 || asks == 0) {
      fprintf(stderr, "worker: rc %d, %llu succeeded, %d asks\n", rc, (unsigned long long)st.succeeded, asks);
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  altar_test_rmtree(dir);
  free(dir);
}

/* Slots to spare (never paused) and an hour between polls: the jobs are
 * still seen finished, because a turn without a new record asks the backend
 * (without blocking) whether a task changed and polls when it says so. */
static void test_polls_on_change_when_not_paused(void) {
  run_hour_between_polls("worker-wake", &fake_wake_ops, false, offsetof(fake_t, quick_waits));
}

/* The same, with a backend that tells of changes only through its change
 * descriptor: the jobs finish within the hour between polls only because
 * the worker polls that descriptor beside the log. */
static void test_polls_on_change_descriptor(void) {
  run_hour_between_polls("worker-wake-fd", &fake_fd_ops, true, offsetof(fake_t, fd_asks));
}

static void add(void) {
  ALTAR_SUITE("worker", setup, NULL);
  ALTAR_TEST(test_status_events_in_order);
  ALTAR_TEST(test_poison_to_dlq);
  ALTAR_TEST(test_slots_gate_intake);
  ALTAR_TEST(test_commit_metadata_skips_finished);
  ALTAR_TEST(test_drain_and_release_on_stop);
  ALTAR_TEST(test_waits_for_holder);
  ALTAR_TEST(test_staging_failures_are_terminal);
  ALTAR_TEST(test_commit_retried_after_failure);
  ALTAR_TEST(test_commit_round_spread_over_turns);
  ALTAR_TEST(test_cancel_behind_queued_jobs);
  ALTAR_TEST(test_autoscaling_pool_served);
  ALTAR_TEST(test_fixed_zero_pool_waits);
  ALTAR_TEST(test_polls_on_change_when_not_paused);
  ALTAR_TEST(test_polls_on_change_descriptor);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
