/* The modal backend against a fake ModalRuntime that records calls and
 * "runs" sandboxes: the contract suite, timeouts and the 24 h cap,
 * accelerators, tags, exit-code mapping, the digest-verifying wrapper (run
 * for real with sh), staging and collection through Storage. */
#include "altar/codec.h"
#include "altar/digest.h"
#include "altar/modal.h"
#include "altar/fleet.h"
#include "altar/plugin/backend.h"
#include "altar/plugin/transport.h"
#include "producer/job_queue.h"
#include "worker/worker.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the fake runtime ---- */

typedef struct fsb {
  char id[32];
  char **argv;
  size_t argc;
  char *image, *gpu, *app, *volume, *mount_root;
  int64_t timeout;
  altar_opt_i64_t mem;
  altar_strmap_t tags;
  char task_key[80]; /* what submit asked to adopt by ("": none) */
  int polls;
  bool done;
  int code;
  bool oom;        /* killed for its memory, as Modal would say */
  char *out, *err; /* what the verifying wrapper printed (NULL: nothing ran) */
} fsb_t;

typedef struct mfake {
  fsb_t sbs[64];
  size_t n;
  char *volume_dir; /* the Volume's contents live here */
  int n_run, n_poll, n_upload, n_download, n_terminate;
  char last_upload_remote[512], last_download_remote[512];
  int poll_error; /* non-zero: poll_sandbox fails with it */
} mfake_t;

static fsb_t *find_sb(mfake_t *f, const char *id) {
  for (size_t i = 0; i < f->n; i++)
    if (!strcmp(f->sbs[i].id, id)) return &f->sbs[i];
  return NULL;
}

static void sb_clear(fsb_t *s) {
  for (size_t i = 0; i < s->argc; i++) free(s->argv[i]);
  free(s->argv);
  free(s->image);
  free(s->gpu);
  free(s->app);
  free(s->volume);
  free(s->mount_root);
  free(s->out);
  free(s->err);
  altar_strmap_clear(&s->tags);
}

static int f_run(void *impl, const altar_modal_sandbox_req_t *r, char **pid, altar_error_t *err) {
  mfake_t *f = impl;
  (void)err;
  f->n_run++;
  CU_ASSERT_FATAL(f->n < 64);
  fsb_t *s = &f->sbs[f->n++];
  memset(s, 0, sizeof *s);
  snprintf(s->id, sizeof s->id, "sb-%zu", f->n);
  s->argv = calloc(r->n_command + 1, sizeof *s->argv);
  for (size_t i = 0; i < r->n_command; i++) s->argv[i] = strdup(r->command[i]);
  s->argc = r->n_command;
  s->image = strdup(r->image);
  s->gpu = r->gpu ? strdup(r->gpu) : NULL;
  s->app = strdup(r->app_name);
  s->volume = strdup(r->volume_name);
  s->mount_root = strdup(r->mount_root);
  s->timeout = r->timeout_s;
  s->mem = r->memory_mb;
  altar_strmap_copy(&s->tags, r->tags);
  snprintf(s->task_key, sizeof s->task_key, "%s", r->task_key ? r->task_key : "");
  *pid = strdup(s->id);
  return 0;
}

/* Reads what f holds from its start (NUL-terminated, malloc'd). */
static char *slurp(FILE *f) {
  rewind(f);
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (size_t n; (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
    len += n;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = '\0';
  return buf;
}

/* Runs argv (with a NULL terminator) and returns its exit status; its
 * stdout and stderr go to *pout and *perr when given (malloc'd), else away. */
static int run_argv_output(char **argv, char **pout, char **perr) {
  FILE *o = pout ? tmpfile() : NULL, *e = perr ? tmpfile() : NULL;
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(o ? fileno(o) : devnull, 1);
    dup2(e ? fileno(e) : devnull, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (o) *pout = slurp(o), fclose(o);
  if (e) *perr = slurp(e), fclose(e);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int run_argv(char **argv) { return run_argv_output(argv, NULL, NULL); }

/* The sandbox's outcome: the verifying wrapper runs for real (with `true`
 * as the command), then the fake command ["altar-fake", op, arg] decides. */
static void sb_finish(fsb_t *s) {
  size_t cmd = 0;
  if (s->argc > 6 && !strcmp(s->argv[0], "sh") && !strcmp(s->argv[3], "altar-verify-inputs")) {
    char *argv[8] = {s->argv[0], s->argv[1], s->argv[2], s->argv[3], s->argv[4], s->argv[5], "true", NULL};
    int rc = run_argv_output(argv, &s->out, &s->err);
    if (rc != 0) {
      s->done = true;
      s->code = rc;
      return;
    }
    cmd = 6;
  }
  const char *op = cmd + 1 < s->argc ? s->argv[cmd + 1] : "exit";
  const char *arg = cmd + 2 < s->argc ? s->argv[cmd + 2] : NULL;
  if (!strcmp(op, "exit")) {
    s->done = true;
    s->code = arg ? (int)strtol(arg, NULL, 10) : 0;
  } else if (!strcmp(op, "sleep")) {
    long secs = arg ? strtol(arg, NULL, 10) : 0;
    if (s->timeout < secs) {
      s->done = true;
      s->code = ALTAR_MODAL_TIMEOUT_EXIT_CODE;
    } else if (secs < 60) {
      s->done = true;
      s->code = 0;
    }
  } else if (!strcmp(op, "oom")) {
    s->done = true;
    s->code = s->mem.set ? ALTAR_MODAL_KILLED_EXIT_CODE : 0;
    s->oom = s->mem.set;
  } else if (!strcmp(op, "read")) {
    struct stat sb;
    s->done = true;
    s->code = arg && stat(arg, &sb) == 0 ? 0 : 2;
  }
}

static int f_poll(void *impl, const char *id, bool *pdone, int *pcode, altar_error_t *err) {
  mfake_t *f = impl;
  f->n_poll++;
  if (f->poll_error) return altar_error_set(err, f->poll_error, "fake: poll refused");
  fsb_t *s = find_sb(f, id);
  if (!s) return altar_error_set(err, ALTAR_ENOTFOUND, "fake: no sandbox %s", id);
  if (!s->done && s->polls++ > 0) sb_finish(s);
  *pdone = s->done;
  *pcode = s->code;
  return 0;
}

/* The sandbox's output, as Modal keeps it: here, what the wrapper printed. */
static int f_output(void *impl, const char *id, size_t max, char **perr, size_t *perr_len, char **pout,
                    size_t *pout_len, altar_error_t *err) {
  mfake_t *f = impl;
  (void)max;
  fsb_t *s = find_sb(f, id);
  if (!s) return altar_error_set(err, ALTAR_ENOTFOUND, "fake: no sandbox %s", id);
  *perr = strdup(s->err ? s->err : "");
  *pout = strdup(s->out ? s->out : "");
  *perr_len = strlen(*perr);
  *pout_len = strlen(*pout);
  return 0;
}

static int f_oom(void *impl, const char *id, bool *poom, altar_error_t *err) {
  fsb_t *s = find_sb(impl, id);
  if (!s) return altar_error_set(err, ALTAR_ENOTFOUND, "fake: no sandbox %s", id);
  *poom = s->oom;
  return 0;
}

static int copy_file(const char *src, const char *dst) {
  char *data;
  size_t len = 0;
  /* The fake's volume is a host directory a test may also use as storage;
   * a real upload never touches the host file, so neither does this. */
  struct stat a, b;
  if (stat(src, &a) == 0 && stat(dst, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return 0;
  if (!(data = altar_test_read_file(src, &len))) return ALTAR_ENOTFOUND;
  /* mkdir -p of dst's directory */
  char *dir = strdup(dst);
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0755);
      *p = '/';
    }
  free(dir);
  altar_test_write_file(dst, data, len);
  free(data);
  return 0;
}

static int f_upload(void *impl, const char *vol, const char *local, const char *remote, altar_error_t *err) {
  mfake_t *f = impl;
  (void)vol;
  f->n_upload++;
  snprintf(f->last_upload_remote, sizeof f->last_upload_remote, "%s", remote);
  char dst[2048];
  snprintf(dst, sizeof dst, "%s/%s", f->volume_dir, remote);
  return copy_file(local, dst) ? altar_error_set(err, ALTAR_EIO, "fake: upload %s", local) : 0;
}

static int f_download(void *impl, const char *vol, const char *remote, const char *local, altar_error_t *err) {
  mfake_t *f = impl;
  (void)vol;
  f->n_download++;
  snprintf(f->last_download_remote, sizeof f->last_download_remote, "%s", remote);
  char src[2048];
  snprintf(src, sizeof src, "%s/%s", f->volume_dir, remote);
  return copy_file(src, local) ? altar_error_set(err, ALTAR_ENOTFOUND, "fake: %s not in volume", remote) : 0;
}

static int f_terminate(void *impl, const char *id, altar_error_t *err) {
  mfake_t *f = impl;
  f->n_terminate++;
  fsb_t *s = find_sb(f, id);
  if (!s) return altar_error_set(err, ALTAR_ENOTFOUND, "fake: no sandbox %s", id);
  if (!s->done) {
    s->done = true;
    s->code = ALTAR_MODAL_KILLED_EXIT_CODE;
  }
  return 0;
}

static void f_destroy(void *impl) {
  mfake_t *f = impl;
  for (size_t i = 0; i < f->n; i++) sb_clear(&f->sbs[i]);
  free(f->volume_dir);
  free(f);
}

static const altar_modal_runtime_ops_t fake_ops = {
    .name = "fake-modal",
    .run_sandbox = f_run,
    .poll_sandbox = f_poll,
    .upload = f_upload,
    .download = f_download,
    .terminate_sandbox = f_terminate,
    .read_output = f_output,
    .oom_killed = f_oom,
    .destroy = f_destroy,
};

static altar_modal_t *make_modal(const char *dir, mfake_t **pf, const altar_modal_config_t *cfg_in) {
  mfake_t *f = calloc(1, sizeof *f);
  f->volume_dir = strdup(dir);
  altar_modal_config_t cfg = {0};
  if (cfg_in) cfg = *cfg_in;
  if (!cfg.mount_root) cfg.mount_root = dir; /* the sandbox sees the volume where the fake keeps it */
  altar_error_t err = {0};
  altar_modal_t *m = altar_modal_new(&cfg, altar_modal_runtime_new(&fake_ops, f), &err);
  if (!m) fprintf(stderr, "altar_modal_new: %s\n", err.msg);
  CU_ASSERT_FATAL(m != NULL);
  *pf = f;
  return m;
}

/* ---- the contract suite ---- */

static altar_backend_t *contract_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  (void)err;
  mfake_t *f;
  return altar_modal_backend_wrap(make_modal(data_root, &f, NULL));
}

static int set_cmd(altar_spec_t *s, const char *op, const char *arg) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  s->n_command = 0;
  altar_spec_add_arg(s, "altar-fake");
  altar_spec_add_arg(s, op);
  return arg ? altar_spec_add_arg(s, arg) : 0;
}
static int c_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char n[16];
  snprintf(n, sizeof n, "%d", code);
  return set_cmd(s, "exit", n);
}
static int c_sleep(void *ctx, altar_spec_t *s, int secs) {
  (void)ctx;
  char n[16];
  snprintf(n, sizeof n, "%d", secs);
  return set_cmd(s, "sleep", n);
}
static int c_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  s->resources.memory_mb = (altar_opt_i64_t){true, 16};
  return set_cmd(s, "oom", NULL);
}
static int c_read(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  return set_cmd(s, "read", path);
}
static int c_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  mfake_t *f = altar_modal_runtime(altar_backend_impl(be))->impl;
  fsb_t *s = find_sb(f, h->external_id);
  if (!s) return -1;
  snprintf(s->id, sizeof s->id, "gone"); /* Modal no longer knows it */
  return 0;
}

static const altar_contract_fixture_t contract_fx = {
    .name = "modal (fake runtime)",
    .image = "python:3.11-slim",
    .wait_s = 30,
    .make_backend = contract_make,
    .set_exit = c_exit,
    .set_sleep = c_sleep,
    .set_oom = c_oom,
    .set_read_input = c_read,
    .vanish = c_vanish,
};

/* ---- modal specifics ---- */

static char *tmp;

static int suite_init(void) {
  tmp = altar_test_tmpdir("modal");
  return 0;
}
static int suite_clean(void) {
  altar_test_rmtree(tmp);
  free(tmp);
  return 0;
}

static altar_spec_t *spec_new(void) {
  altar_spec_t *s = altar_spec_new("score", "python:3.11-slim");
  altar_spec_add_arg(s, "altar-fake");
  altar_spec_add_arg(s, "exit");
  altar_spec_add_arg(s, "0");
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_set_label(s, "fold", "2");
  return s;
}

static void test_timeouts(void) {
  mfake_t *f;
  altar_modal_t *m = make_modal(tmp, &f, NULL);
  altar_spec_t *s = spec_new();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_EQUAL(f->sbs[0].timeout, 86400); /* none → Modal's maximum */
  altar_handle_clear(&h);
  s->timeout_s = (altar_opt_i64_t){true, 86400};
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_EQUAL(f->sbs[1].timeout, 86400);
  altar_handle_clear(&h);
  s->timeout_s = (altar_opt_i64_t){true, 600};
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_EQUAL(f->sbs[2].timeout, 600);
  altar_handle_clear(&h);
  s->timeout_s = (altar_opt_i64_t){true, 86401};
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "timeout_s") != NULL);
  CU_ASSERT_EQUAL(f->n_run, 3); /* refused before anything ran */
  CU_ASSERT(h.external_id == NULL);
  altar_spec_free(s);
  altar_modal_free(m);
}

static void test_accelerators_and_tags(void) {
  mfake_t *f;
  altar_modal_t *m = make_modal(tmp, &f, NULL);
  altar_spec_t *s = spec_new();
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT(f->sbs[0].gpu == NULL); /* CPU-only */
  CU_ASSERT_STRING_EQUAL(h.external_id, "sb-1");
  CU_ASSERT_STRING_EQUAL(h.backend, "modal");
  CU_ASSERT(altar_strmap_equal(&f->sbs[0].tags, &s->labels)); /* labels → tags */
  char key[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(s, key, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->sbs[0].task_key, key); /* adopt-or-run by task key */
  CU_ASSERT(altar_strmap_equal(&h.labels, &s->labels));
  CU_ASSERT_STRING_EQUAL(f->sbs[0].app, ALTAR_MODAL_DEFAULT_APP);
  CU_ASSERT_STRING_EQUAL(f->sbs[0].volume, ALTAR_MODAL_DEFAULT_VOLUME);
  CU_ASSERT_STRING_EQUAL(f->sbs[0].image, "python:3.11-slim");
  altar_handle_clear(&h);
  altar_spec_set_gpu(s, "gpu", 1);
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->sbs[1].gpu, "A10G");
  altar_handle_clear(&h);
  altar_spec_set_gpu(s, "a100", 2);
  s->resources.memory_mb = (altar_opt_i64_t){true, 4096};
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->sbs[2].gpu, "A100:2");
  CU_ASSERT(f->sbs[2].mem.set && f->sbs[2].mem.v == 4096);
  altar_handle_clear(&h);
  altar_spec_set_gpu(s, "h100", 1);
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "resources.gpu") != NULL);
  altar_spec_free(s);
  altar_modal_free(m);

  /* A configured map replaces the default. */
  altar_strmap_t accs = {0};
  altar_strmap_set(&accs, "h100", "H100");
  altar_modal_config_t cfg = {.app_name = "my-app", .volume_name = "my-vol", .pool_accelerators = &accs};
  m = make_modal(tmp, &f, &cfg);
  s = spec_new();
  altar_spec_set_gpu(s, "h100", 1);
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->sbs[0].gpu, "H100");
  CU_ASSERT_STRING_EQUAL(f->sbs[0].app, "my-app");
  CU_ASSERT_STRING_EQUAL(f->sbs[0].volume, "my-vol");
  altar_handle_clear(&h);
  altar_spec_set_gpu(s, "gpu", 1);
  CU_ASSERT_EQUAL(altar_modal_submit(m, s, &h, &err), ALTAR_EINVAL);
  altar_strmap_clear(&accs);
  altar_spec_free(s);
  altar_modal_free(m);
  /* Bad names are refused up front. */
  altar_modal_config_t bad = {.app_name = "has space"};
  mfake_t *f2 = calloc(1, sizeof *f2);
  CU_ASSERT(altar_modal_new(&bad, altar_modal_runtime_new(&fake_ops, f2), &err) == NULL);
  CU_ASSERT(strstr(err.msg, "app_name") != NULL);
}

/* Polls sandbox id, ended with code: the reason, exit_code (-1: unset) and
 * deterministic it reports. */
static void poll_case_id(mfake_t *f, altar_modal_t *m, const char *id, int code, const char *reason, int exit_code,
                         bool deterministic) {
  fsb_t *s = find_sb(f, id);
  CU_ASSERT_FATAL(s != NULL);
  s->done = true;
  s->code = code;
  altar_handle_t h;
  altar_handle_init(&h, "modal", id);
  altar_status_t st;
  memset(&st, 0, sizeof st);
  CU_ASSERT_EQUAL_FATAL(altar_modal_poll(m, &h, 1, &st, NULL), 0);
  if (!reason) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  } else {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
    if (strcmp(st.failure->reason, reason))
      fprintf(stderr, "modal: exit %d: want %s, got %s\n", code, reason, st.failure->reason);
    CU_ASSERT_STRING_EQUAL(st.failure->reason, reason);
    CU_ASSERT_EQUAL(st.failure->deterministic, deterministic);
    CU_ASSERT_EQUAL(st.failure->exit_code.set, exit_code >= 0);
    if (exit_code >= 0) CU_ASSERT_EQUAL(st.failure->exit_code.v, exit_code);
  }
  altar_status_clear(&st);
  altar_handle_clear(&h);
}

/* The sandbox of a spec with no digest-bearing input. */
static void poll_case(mfake_t *f, altar_modal_t *m, int code, const char *reason) {
  int exit_code = reason && !strncmp(reason, "exit_", 5) ? code : -1;
  poll_case_id(f, m, "sb-1", code, reason, exit_code, altar_reason_deterministic(reason));
}

static void test_poll_mapping(void) {
  mfake_t *f;
  altar_modal_t *m = make_modal(tmp, &f, NULL);
  altar_spec_t *s = spec_new();
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, NULL), 0);
  altar_status_t st[2];
  memset(st, 0, sizeof st);
  altar_handle_t hs[2];
  altar_handle_copy(&hs[0], &h);
  altar_handle_init(&hs[1], "modal", "sb-nope");
  CU_ASSERT_EQUAL(altar_modal_poll(m, hs, 2, st, NULL), 0);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_RUNNING); /* None: still running */
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st[1].failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  altar_status_clear(&st[0]);
  altar_status_clear(&st[1]);
  poll_case(f, m, 0, NULL);
  poll_case(f, m, ALTAR_MODAL_TIMEOUT_EXIT_CODE, ALTAR_REASON_TIMEOUT);
  poll_case(f, m, 3, "exit_3");
  /* A task with no digest-bearing input ran no verifier: its 86 is its own. */
  poll_case(f, m, ALTAR_MODAL_DIGEST_EXIT_CODE, "exit_86");
  /* 137 with nothing from Modal saying memory: a kill of unknown cause (or
   * the task's own exit 137), reported as the code, and worth a retry. */
  poll_case_id(f, m, "sb-1", ALTAR_MODAL_KILLED_EXIT_CODE, "exit_137", 137, false);
  /* The same 137 where Modal says it was memory. */
  find_sb(f, "sb-1")->oom = true;
  poll_case(f, m, ALTAR_MODAL_KILLED_EXIT_CODE, ALTAR_REASON_OOM_KILLED);
  find_sb(f, "sb-1")->oom = false;
  /* A probe that fails (Modal unreachable) is an error, not a status. */
  f->poll_error = ALTAR_EBACKEND;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_modal_poll(m, hs, 2, st, &err), ALTAR_EBACKEND);
  CU_ASSERT(st[0].handle.external_id == NULL);
  f->poll_error = 0;
  /* Capacity: none fixed. */
  altar_backend_t *be = altar_modal_backend_wrap(m);
  altar_capacity_t cap;
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, NULL), 0);
  CU_ASSERT_EQUAL(cap.n, 0);
  altar_capacity_clear(&cap);
  CU_ASSERT_EQUAL(altar_backend_verification(be), ALTAR_VERIFY_TASK);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, NULL), 0);
  CU_ASSERT_EQUAL(f->n_terminate, 1);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &hs[1], NULL), 0); /* missing is fine */
  altar_backend_close(be);
  altar_handle_clear(&hs[0]);
  altar_handle_clear(&hs[1]);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* Polls h until its sandbox ended (the fake ends one on its second poll). */
static int poll_until_done(altar_modal_t *m, const altar_handle_t *h, altar_status_t *pst) {
  for (int i = 0; i < 10; i++) {
    memset(pst, 0, sizeof *pst);
    if (altar_modal_poll(m, h, 1, pst, NULL)) return -1;
    if (altar_state_terminal(pst->state)) return 0;
    altar_status_clear(pst);
  }
  return -1;
}

/* 86 is input_digest_mismatch only when the verifier itself failed: a task
 * with checked inputs whose own command exits 86 reports exit_86. */
static void test_exit_86_needs_the_verifier(void) {
  mfake_t *f;
  char *root = altar_test_tmpdir("modal-86");
  altar_modal_t *m = make_modal(root, &f, NULL);
  char path[1024], digest[72];
  snprintf(path, sizeof path, "%s/m.bin", root);
  altar_test_write_file(path, "weights", 7);
  altar_contract_sha256("weights", 7, digest);
  altar_spec_t *s = spec_new();
  altar_spec_add_input(s, "file:///x", "m.bin", NULL, digest);
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  s->n_command = 0;
  altar_spec_add_arg(s, "altar-fake");
  altar_spec_add_arg(s, "exit");
  altar_spec_add_arg(s, "86");
  altar_handle_t h;
  altar_status_t st;
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, NULL), 0);
  /* The input matches: the verifier passes, then the command exits 86. */
  CU_ASSERT_EQUAL_FATAL(poll_until_done(m, &h, &st), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_86");
  CU_ASSERT(st.failure->exit_code.set && st.failure->exit_code.v == 86);
  CU_ASSERT_TRUE(st.failure->deterministic);
  altar_status_clear(&st);
  altar_handle_clear(&h);
  /* The input does not match: the verifier stops the sandbox with 86. */
  altar_test_write_file(path, "tampered", 8);
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(poll_until_done(m, &h, &st), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_INPUT_DIGEST_MISMATCH);
  CU_ASSERT_FALSE(st.failure->exit_code.set);
  CU_ASSERT_EQUAL(st.failure->deterministic, altar_reason_deterministic(ALTAR_REASON_INPUT_DIGEST_MISMATCH));
  CU_ASSERT(st.failure->detail && strstr(st.failure->detail, "mismatch"));
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_modal_free(m);
  altar_test_rmtree(root);
  free(root);
}

/* The wrapper really verifies: run it with sh over a good and a bad file. */
static void test_verify_wrapper(void) {
  mfake_t *f;
  char *root = altar_test_tmpdir("modal-wrap");
  altar_modal_t *m = make_modal(root, &f, NULL);
  char path[1024], digest[72];
  snprintf(path, sizeof path, "%s/models", root);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/models/m.bin", root);
  altar_test_write_file(path, "weights", 7);
  altar_contract_sha256("weights", 7, digest);
  altar_spec_t *s = spec_new();
  char **argv = NULL;
  size_t n = 0;
  CU_ASSERT_EQUAL(altar_modal_build_command(m, s, &argv, &n, NULL), 0);
  CU_ASSERT_EQUAL(n, 3); /* no digests: the command as it is */
  CU_ASSERT_STRING_EQUAL(argv[0], "altar-fake");
  for (size_t i = 0; i < n; i++) free(argv[i]);
  free(argv);
  altar_spec_add_input(s, "file:///x", "models/m.bin", NULL, digest);
  altar_spec_add_input(s, "file:///y", "models/plain.txt", NULL, NULL);
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  s->n_command = 0;
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, "exit 5");
  CU_ASSERT_EQUAL_FATAL(altar_modal_build_command(m, s, &argv, &n, NULL), 0);
  CU_ASSERT_EQUAL_FATAL(n, 9);
  CU_ASSERT(strncmp(argv[5], digest + 7, 64) == 0); /* "<hex>  <path>" */
  CU_ASSERT(strstr(argv[5], "/models/m.bin") != NULL);
  CU_ASSERT(strstr(argv[5], "plain.txt") == NULL); /* only digest-bearing inputs */
  char **av = calloc(n + 1, sizeof *av);
  memcpy(av, argv, n * sizeof *av);
  CU_ASSERT_EQUAL(run_argv(av), 5); /* verified, then the command ran */
  altar_test_write_file(path, "tampered", 8);
  CU_ASSERT_EQUAL(run_argv(av), ALTAR_MODAL_DIGEST_EXIT_CODE); /* stopped before the command */
  unlink(path);
  CU_ASSERT_EQUAL(run_argv(av), ALTAR_MODAL_DIGEST_EXIT_CODE); /* missing */
  free(av);
  for (size_t i = 0; i < n; i++) free(argv[i]);
  free(argv);
  /* An escaping input is refused. */
  altar_spec_add_input(s, "file:///z", "../../etc/passwd", NULL, digest);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_modal_build_command(m, s, &argv, &n, &err), ALTAR_EPATH);
  CU_ASSERT(strstr(err.msg, "inputs[2]") != NULL);
  altar_spec_free(s);
  altar_modal_free(m);
  altar_test_rmtree(root);
  free(root);
}

static void test_staging(void) {
  mfake_t *f;
  char *vol = altar_test_tmpdir("modal-vol");
  altar_modal_t *m = make_modal(vol, &f, NULL);
  char src[1024], uri[1100], out_uri[1100];
  snprintf(src, sizeof src, "%s/source.bin", tmp);
  altar_test_write_file(src, "payload", 7);
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_transfer_t in = {.uri = uri, .logical_path = "./models//m.bin"};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_modal_stage_inputs(m, &in, 1, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->last_upload_remote, "models/m.bin"); /* the mirrored, normalized path */
  char path[1200];
  snprintf(path, sizeof path, "%s/models/m.bin", vol);
  char *got = altar_test_read_file(path, NULL);
  CU_ASSERT(got && !strcmp(got, "payload"));
  free(got);
  /* Outputs come back through a download and Storage. */
  snprintf(path, sizeof path, "%s/jobs", vol);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/jobs/out.txt", vol);
  altar_test_write_file(path, "result", 6);
  snprintf(out_uri, sizeof out_uri, "file://%s/collected.txt", tmp);
  altar_transfer_t out = {.uri = out_uri, .logical_path = "jobs/out.txt"};
  CU_ASSERT_EQUAL_FATAL(altar_modal_collect_outputs(m, &out, 1, &err), 0);
  CU_ASSERT_STRING_EQUAL(f->last_download_remote, "jobs/out.txt");
  snprintf(path, sizeof path, "%s/collected.txt", tmp);
  got = altar_test_read_file(path, NULL);
  CU_ASSERT(got && !strcmp(got, "result"));
  free(got);
  altar_transfer_t missing = {.uri = out_uri, .logical_path = "jobs/none.txt"};
  CU_ASSERT_NOT_EQUAL(altar_modal_collect_outputs(m, &missing, 1, &err), 0);
  CU_ASSERT(strstr(err.msg, "outputs[0]") != NULL);
  altar_transfer_t escape = {.uri = uri, .logical_path = "../x"};
  CU_ASSERT_EQUAL(altar_modal_stage_inputs(m, &escape, 1, &err), ALTAR_EPATH);
  altar_modal_free(m);
  altar_test_rmtree(vol);
  free(vol);
}

/* What Modal can serve is its accelerator map (plus CPU), never free slots:
 * it autoscales, so its capacity stays empty and no pool is gated (#27). */
static void test_pools_servable(void) {
  mfake_t *f;
  altar_backend_t *be = altar_modal_backend_wrap(make_modal(tmp, &f, NULL));
  CU_ASSERT_FATAL(be != NULL);
  const char *names[8];
  CU_ASSERT_EQUAL_FATAL(altar_backend_pools(be, names, 8), 3);
  CU_ASSERT_STRING_EQUAL(names[0], ALTAR_POOL_CPU);
  bool gpu = false, a100 = false; /* the map's order */
  for (size_t i = 1; i < 3; i++) {
    gpu |= !strcmp(names[i], ALTAR_GPU_POOL_NORMAL);
    a100 |= !strcmp(names[i], ALTAR_GPU_POOL_A100);
  }
  CU_ASSERT(gpu && a100);
  CU_ASSERT_EQUAL(altar_backend_pools(be, names, 1), 3); /* the count, even past max */
  altar_capacity_t cap;
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, NULL), 0);
  CU_ASSERT_EQUAL(cap.n, 0);
  altar_capacity_clear(&cap);
  altar_backend_close(be);

  /* A configured map replaces the known pools. */
  altar_strmap_t accs = {0};
  altar_strmap_set(&accs, "h100", "H100");
  altar_modal_config_t cfg = {.pool_accelerators = &accs};
  be = altar_modal_backend_wrap(make_modal(tmp, &f, &cfg));
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_backend_pools(be, names, 8), 2);
  CU_ASSERT_STRING_EQUAL(names[0], ALTAR_POOL_CPU);
  CU_ASSERT_STRING_EQUAL(names[1], "h100");
  altar_strmap_clear(&accs);
  altar_backend_close(be);
}

/* Through a worker: a gpu job reaches a Modal worker and runs on the pool's
 * accelerator. Modal reports no capacity, so only its pool mapping can
 * route the job there (#27). */
static void test_worker_serves_gpu(void) {
  int rc = altar_transport_register(&altar_transport_local_ops);
  CU_ASSERT_FATAL(rc == 0 || rc == ALTAR_EEXIST);
  char *dir = altar_test_tmpdir("modal-worker");
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "dir", dir);
  altar_strmap_set(&props, "rebalance.check.ms", "20");
  altar_error_t err = {0};
  altar_transport_t *t = altar_transport_open("local", &props, NULL, &err);
  altar_strmap_clear(&props);
  CU_ASSERT_FATAL(t != NULL);
  altar_topics_t topics = {"jobs", "status", "ready", "dead", "dlq"};
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "jobs", 1, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "status", 1, &err) == 0);
  CU_ASSERT_FATAL(altar_transport_create_topic(t, "dlq", 1, &err) == 0);

  altar_spec_t *s = altar_spec_new("shard", "python:3.11-slim");
  altar_spec_add_arg(s, "altar-fake");
  altar_spec_add_arg(s, "exit");
  altar_spec_add_arg(s, "0");
  altar_spec_set_label(s, "fold", "0");
  altar_spec_set_gpu(s, ALTAR_GPU_POOL_NORMAL, 1);
  altar_job_queue_t q = {.transport = t, .topics = &topics};
  char run_id[ALTAR_RUN_ID_MAX + 1];
  rc = altar__job_queue_submit(&q, "shard", s, 1, run_id, &err);
  if (rc) fprintf(stderr, "submit: %s\n", err.msg);
  CU_ASSERT_FATAL(rc == 0);
  altar_spec_free(s);
  altar_transport_close(t);

  mfake_t *f;
  altar_backend_t *be = altar_modal_backend_wrap(make_modal(tmp, &f, NULL));
  CU_ASSERT_FATAL(be != NULL);
  props = (altar_strmap_t){0};
  altar_strmap_set(&props, "dir", dir);
  altar_strmap_set(&props, "rebalance.check.ms", "20");
  t = altar_transport_open("local", &props, NULL, &err);
  altar_strmap_clear(&props);
  CU_ASSERT_FATAL(t != NULL);
  altar_worker_opts_t o = {
      .transport = t,
      .backend = be,
      .topics = &topics,
      .worker_id = "host-m:1",
      .slots = 2,
      .poll_interval_ms = 5,
      .commit_interval_ms = 100,
      .drain_ms = 5000,
      .exit_when_idle = true,
      .quiet = true,
  };
  altar_worker_stats_t st = {0};
  rc = altar__worker_run(&o, &st, &err);
  if (rc) fprintf(stderr, "worker: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  altar_transport_close(t);
  CU_ASSERT_EQUAL(st.succeeded, 1);
  CU_ASSERT_EQUAL_FATAL(f->n, 1);
  CU_ASSERT(f->sbs[0].gpu && !strcmp(f->sbs[0].gpu, "A10G"));
  altar_backend_close(be);
  altar_test_rmtree(dir);
  free(dir);
}

static void test_registered_create(void) {
  altar_backend_register(&altar_backend_modal_ops);
  CU_ASSERT(altar_backend_lookup("modal") == &altar_backend_modal_ops);
  altar_error_t berr = {0};
  altar_strmap_t props = {0};
  altar_strmap_set(&props, "app_name", "a");
  altar_strmap_set(&props, "pool_accelerators", "{\"gpu\": \"L4\"}");
  altar_strmap_set(&props, "data_root", "./var/data");
  char bridge[1024];
  snprintf(bridge, sizeof bridge, "%s/tools/modal_bridge.py", altar_test_source_dir());
  altar_strmap_set(&props, "bridge", bridge);
  altar_backend_t *be = altar_backend_open_by_name("modal", &props, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  CU_ASSERT_FATAL(be != NULL);
  altar_resources_t l4 = {.gpu = "gpu", .count = 1}, a100 = {.gpu = "a100", .count = 1};
  CU_ASSERT_EQUAL(altar_backend_check_resources(be, &l4, NULL), 0);
  CU_ASSERT_EQUAL(altar_backend_check_resources(be, &a100, NULL), ALTAR_EINVAL);
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "/mnt/volume");
  altar_backend_close(be); /* the bridge never started: nothing to stop */
  /* The deadlines and the mount root are keys too; bad values name the key. */
  altar_strmap_set(&props, "mount_root", "/data/vol");
  altar_strmap_set(&props, "run_timeout_ms", "5000");
  altar_strmap_set(&props, "reply_timeout_ms", "1000");
  be = altar_backend_open_by_name("modal", &props, &berr);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "/data/vol");
  altar_backend_close(be);
  altar_strmap_set(&props, "run_timeout_ms", "soon");
  CU_ASSERT(altar_backend_open_by_name("modal", &props, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "run_timeout_ms") != NULL);
  altar_strmap_set(&props, "run_timeout_ms", "5000");
  altar_strmap_set(&props, "bridge", "/no/such/bridge.py");
  CU_ASSERT(altar_backend_open_by_name("modal", &props, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "/no/such/bridge.py") != NULL);
  altar_strmap_set(&props, "bridge", bridge);
  altar_strmap_set(&props, "volume", "x");
  CU_ASSERT(altar_backend_open_by_name("modal", &props, &berr) == NULL);
  CU_ASSERT(strstr(berr.msg, "volume") != NULL);
  altar_strmap_clear(&props);
}

static void add(void) {
  altar_storage_register_builtin();
  altar_contract_add_suite(&contract_fx);
  ALTAR_SUITE("modal", suite_init, suite_clean);
  ALTAR_TEST(test_timeouts);
  ALTAR_TEST(test_accelerators_and_tags);
  ALTAR_TEST(test_poll_mapping);
  ALTAR_TEST(test_verify_wrapper);
  ALTAR_TEST(test_exit_86_needs_the_verifier);
  ALTAR_TEST(test_staging);
  ALTAR_TEST(test_registered_create);
  ALTAR_TEST(test_pools_servable);
  ALTAR_TEST(test_worker_serves_gpu);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
