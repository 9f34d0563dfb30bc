/* Shared body of fuzz_worker_intake and unit/test_worker_intake: one job
 * message of arbitrary size and content through the worker's intake
 * (worker/intake.h). Nothing may crash; a message with a readable identity
 * must get an outcome whose status events (submitted, failed) always encode
 * within the message bound, so no content can stop a worker. Inputs are
 * raw bytes (mode 0), a job grown from the input to any size up to beyond
 * the bound (mode 1), or a valid job with bytes overwritten (mode 2). */
#ifndef ALTAR_FUZZ_INTAKE_BODY_H
#define ALTAR_FUZZ_INTAKE_BODY_H

#include "altar/plugin/backend.h"
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/groups.h"
#include "altar/pools.h"
#include "worker/intake.h"
#include "core/unconst.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fz_submit(altar_backend_t *be, const altar_spec_t *s, altar_handle_t *h, altar_error_t *err) {
  (void)be, (void)s, (void)h;
  return altar_error_set(err, ALTAR_ENOTSUP, "not here");
}
static int fz_poll(altar_backend_t *be, const altar_handle_t *h, size_t n, altar_status_t *st, altar_error_t *err) {
  (void)be, (void)h, (void)n, (void)st;
  return altar_error_set(err, ALTAR_ENOTSUP, "not here");
}
/* Serves the CPU pool and a100. */
static int fz_check(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  (void)be;
  if (r->gpu && strcmp(r->gpu, "a100"))
    return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: no pool '%.64s'", r->gpu);
  return ALTAR_OK;
}
static int fz_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  (void)be;
  (void)cfg;
  return altar_error_set(err, ALTAR_ENOTSUP, "use altar_backend_wrap");
}
static void fz_close(altar_backend_t *be) { (void)be; }
static const altar_backend_ops_t fz_ops = {.name = "fuzz",
                                           .input_digest_verification = ALTAR_VERIFY_STAGING,
                                           .open = fz_open,
                                           .close = fz_close,
                                           .submit = fz_submit,
                                           .poll = fz_poll,
                                           .check_resources = fz_check};

static altar_backend_t *fz_be;
static altar_group_specs_t fz_groups;

static void fz_init(void) {
  if (fz_be) return;
  static char impl;
  fz_be = altar_backend_wrap(&fz_ops, &impl, NULL);
  static const char yaml[] = "groups:\n  shard: {group_by: [job_id, fold], ready_when: single}\n";
  altar_error_t err = {0};
  if (!fz_be || altar_group_specs_load_string(yaml, sizeof yaml - 1, "fuzz.yaml", &fz_groups, &err)) abort();
}

/* Builds a job from the input: labels grown to a size the input picks. */
static int fz_grow(const uint8_t *d, size_t n, altar_buf_t *out) {
  altar_spec_t *s = altar_spec_new(n > 4 && (d[4] & 1) ? "shard" : "other", "img");
  if (!s) return -1;
  altar_spec_add_arg(s, "/bin/true");
  size_t total = n >= 4 ? ((size_t)d[1] << 16 | (size_t)d[2] << 8 | d[3]) % (5u << 20) : 0;
  size_t chunk = ALTAR_MAX_STRING - 16;
  char *v = malloc(chunk + 1);
  if (!v) {
    altar_spec_free(s);
    return -1;
  }
  for (size_t i = 0; i < chunk; i++) v[i] = (char)('a' + (n > 5 ? d[5 + i % (n - 5)] : i) % 26);
  for (size_t k = 0; total && k < 100; k++) {
    size_t len = total < chunk ? total : chunk;
    v[len] = 0;
    char key[16];
    snprintf(key, sizeof key, "l%zu", k);
    altar_spec_set_label(s, key, v);
    v[len] = 'a';
    total -= len;
  }
  free(v);
  altar_spec_set_label(s, ALTAR_JOB_ID_LABEL, "j-fuzz");
  altar_spec_set_label(s, "fold", "0");
  if (n > 4 && (d[4] & 2)) altar_spec_set_gpu(s, (d[4] & 4) ? "a100" : "h100", 1);
  altar_job_msg_t job = {.v = ALTAR_SCHEMA_VERSION, .job_id = "j-fuzz", .spec = *s, .submitted_at = 1};
  altar_error_t err = {0};
  int rc = altar_encode_job(&job, out, &err);
  altar_spec_free(s);
  return rc;
}

static void fz_check_events(const altar__intake_t *in, const char *topic) {
  static char worker[ALTAR_BOUND_WORKER_ID + 1];
  memset(worker, 'w', ALTAR_BOUND_WORKER_ID);
  char ext[ALTAR_TASK_KEY_LEN + 16];
  snprintf(ext, sizeof ext, "refused-%s", in->task_key);
  altar_handle_t h = {0};
  if (altar_handle_init_for_spec(&h, "fuzz", ext, &in->job.spec)) abort();
  altar_failure_t *f = altar_failure_new(in->reason ? in->reason : "exit_1", in->detail, true);
  altar_status_event_t ev = {.v = ALTAR_SCHEMA_VERSION,
                             .event = ALTAR_EV_SUBMITTED,
                             .task_key = ALTAR__UNCONST(in->task_key),
                             .kind = in->job.spec.kind,
                             .handle = h,
                             .state = ALTAR_STATE_PENDING,
                             .spec = ALTAR__UNCONST(&in->job.spec),
                             .worker = worker,
                             .source = {true, ALTAR__UNCONST(topic), INT32_MAX, INT64_MAX},
                             .ts = 1};
  altar_buf_t b = {0};
  altar_error_t err = {0};
  bool reduced;
  if (altar__intake_encode_status(&fz_groups, &ev, &b, &reduced, &err)) abort();
  if (b.len > ALTAR_MAX_MESSAGE) abort();
  /* The first run's event must keep its spec, or a retry could not republish it. */
  if (in->verdict == ALTAR__INTAKE_RUN && reduced) abort();
  altar_status_event_t back = {0};
  if (altar_decode_status(b.data, b.len, &back, &err)) abort();
  if (!back.task_key || strcmp(back.task_key, in->task_key)) abort();
  altar_status_event_clear(&back);
  ev.event = ALTAR_EV_STATE;
  ev.state = ALTAR_STATE_FAILED;
  ev.spec = NULL;
  ev.failure = f;
  if (altar__intake_encode_status(&fz_groups, &ev, &b, &reduced, &err)) abort();
  altar_buf_free(&b);
  altar_failure_free(f);
  altar_handle_clear(&h);
}

static inline int fuzz_intake_one(const uint8_t *data, size_t size) {
  fz_init();
  altar_buf_t grown = {0};
  const void *value = data;
  size_t len = size;
  int mode = size ? data[0] % 3 : 0;
  if (mode == 1 && fz_grow(data, size, &grown) == 0) {
    value = grown.data;
    len = grown.len;
  } else if (mode == 2 && fz_grow((const uint8_t *)"\x01\0\0\x10\x01", 5, &grown) == 0) {
    for (size_t i = 1; i + 2 < size; i += 3) grown.data[((size_t)data[i] << 8 | data[i + 1]) % grown.len] = data[i + 2];
    value = grown.data;
    len = grown.len;
  }
  const char *topic = size > 1 && (data[size - 1] & 1) ? "jobs.a100" : "jobs";
  altar_msg_t m = {
      .topic = ALTAR__UNCONST(topic), .partition = 0, .offset = 0, .value = ALTAR__UNCONST(value), .value_len = len};
  altar__intake_ctx_t c = {.backend = fz_be, .groups = &fz_groups, .jobs_topic = "jobs"};
  altar__intake_t in;
  altar__intake_classify(&c, &m, &in);
  if (!in.detail[0] && in.verdict != ALTAR__INTAKE_RUN) abort();
  if (in.verdict == ALTAR__INTAKE_REFUSE && !in.reason) abort();
  if (in.verdict != ALTAR__INTAKE_DLQ) {
    if (strlen(in.task_key) != ALTAR_TASK_KEY_LEN) abort();
    fz_check_events(&in, topic);
  }
  altar__intake_clear(&in);
  altar_buf_free(&grown);
  return 0;
}

#endif
